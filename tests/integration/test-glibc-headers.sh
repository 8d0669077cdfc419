#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# libelide against other glibc headers than the build machine's.
#
# libelide keeps its lock-record indexes in bytes of pthread_mutex_t and
# pthread_rwlock_t that glibc renamed in 2.43 (mutex __elision -> __unused,
# rwlock __rwelision + __pad1[7] -> unsigned long __pad1), so it reaches them
# by offset (libelide/glibc-abi.h) and static assertions on fields every glibc
# 2.28 .. 2.43 has prove the offsets.  This test swaps in other layouts the
# way a compiler would see them: a directory with its own bits/struct_mutex.h
# and bits/struct_rwlock.h placed first on the include path, so glibc's
# <bits/thread-shared-types.h> picks those up instead of the system's.
#
#   tests/glibc-2.43/        the 2.43 x86_64 layouts: every libelide/*.c must
#                            compile with the real build's flags (-Werror), link
#                            into a libelide.so, and that library must run
#                            test-types (built here and built against the shim)
#                            with ELIDE=mode=on and say it elides;
#   tests/glibc-bad-layout/  __shared moved into the index bytes: the build
#                            must stop with glibc-abi.h's static assertion.
#
# gcc -H and a compile that needs the 2.43 field names show the shim is the
# header actually used.  At run time glibc_check() (glibc-check.c) guards the
# layout; the last checks fake what it looks at with small preloaded
# libraries (a gnu_get_libc_version() saying 2.44 or 2.27, a
# pthread_rwlock_init that leaves bytes in the index slots, as a glibc using
# them would) and want the real libelide to pass through and say why.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
tl_setup glibc-headers
export ELIDE_RUNTIME_DIR="$tmp"

case "$(uname -m)" in
x86_64) ;;
*) skip "the glibc layouts libelide knows are x86_64 ones" ;;
esac

# Relative paths in the generated flags are relative to the build directory.
cd "$top_builddir" || exit 1
flags=tests/integration/libelide-flags.sh
[ -r "$flags" ] || { echo "FAIL: $flags missing (make check writes it)" >&2; exit 1; }
. "./$flags"
src="$top_srcdir"
shim243="$src/tests/glibc-2.43"
shimbad="$src/tests/glibc-bad-layout"
cc=${CC:-cc}

# The generated flags stay unquoted on purpose: each is a list of words.
# shellcheck disable=SC2086
compile() { # SHIM SOURCE OUTPUT [extra flags]
	local shim=$1 source=$2 out=$3
	shift 3
	$cc -I"$shim" $libelide_cppflags $libelide_cflags -fPIC -DPIC "$@" -c "$src/$source" -o "$out"
}

# 1. The shim really replaces glibc's headers.
compile "$shim243" libelide/glibc-check.c /dev/null -fsyntax-only -H 2>"$tmp/H" ||
	fail "glibc-check.c does not compile against the 2.43 shim: $(cat "$tmp/H")"
grep -q "glibc-2.43/bits/struct_mutex.h" "$tmp/H" && grep -q "glibc-2.43/bits/struct_rwlock.h" "$tmp/H" &&
	! grep -Eq "^\.+ /usr/include/.*bits/struct_(mutex|rwlock)\.h" "$tmp/H" &&
	ok "gcc -H: <bits/struct_mutex.h> and <bits/struct_rwlock.h> come from the 2.43 shim" ||
	fail "the shim headers are not the ones included: $(grep struct_ "$tmp/H")"

cat > "$tmp/is243.c" <<'EOF'
#include <pthread.h>
#include <stddef.h>
/* Only glibc 2.43's layout has these names and sizes. */
_Static_assert(sizeof(((pthread_mutex_t *)0)->__data.__unused) == 2, "mutex __unused");
_Static_assert(offsetof(pthread_mutex_t, __data.__unused) == 22, "mutex __unused at 22");
_Static_assert(sizeof(((pthread_rwlock_t *)0)->__data.__pad1) == 8, "rwlock __pad1 is one long");
int is243;
EOF
$cc -I"$shim243" -fsyntax-only "$tmp/is243.c" 2>"$tmp/err" &&
	ok "with the shim first, pthread_mutex_t has __unused at byte 22 and the rwlock an 8-byte __pad1" ||
	fail "the 2.43 field names are not in effect: $(cat "$tmp/err")"
$cc -fsyntax-only "$tmp/is243.c" 2>/dev/null &&
	note "this machine's own glibc headers already have the 2.43 layout"

# 2. Every libelide/*.c builds against 2.43 with the real flags, and links.
objs=()
built=1
for s in $libelide_sources; do
	o="$tmp/$(basename "$s" .c).o"
	if compile "$shim243" "$s" "$o" 2>"$tmp/err"; then
		objs+=("$o")
	else
		fail "$s does not compile against the glibc 2.43 headers: $(cat "$tmp/err")"
		built=0
	fi
done
lib243="$tmp/libelide-243.so"
ldflags=()
for f in $libelide_ldflags; do
	case "$f" in
	-avoid-version|-no-undefined|-module) ;; # libtool's, not the compiler's
	*) ldflags+=("$f") ;;
	esac
done
if [ $built = 1 ]; then
	# shellcheck disable=SC2086
	$cc $libelide_cflags -fPIC "${ldflags[@]}" -o "$lib243" "${objs[@]}" \
		common/.libs/libelide-common.a $libelide_libs 2>"$tmp/err" &&
		ok "libelide/*.c compile (-Werror) and link against the glibc 2.43 layout" ||
		{ fail "linking libelide-243.so failed: $(cat "$tmp/err")"; built=0; }
fi

# 3. That library runs a test program: built here, and built against 2.43 too.
# shellcheck disable=SC2086
$cc -I"$shim243" $integration_cflags -I"$src/tests/integration" "$src/tests/integration/test-types.c" \
	-o "$tmp/test-types-243" 2>"$tmp/err" || fail "test-types does not build against the 2.43 shim: $(cat "$tmp/err")"
sim=
grep -qw rtm /proc/cpuinfo 2>/dev/null || sim=0x8 # no RTM: every transaction "aborts", paths still run
lib_preload="$lib243"
[ -n "$asan_first" ] && lib_preload="$asan_first $lib243"
if [ $built = 1 ]; then
	for prog in tests/integration/test-types "$tmp/test-types-243"; do
		[ -x "$prog" ] || { fail "$prog is missing"; continue; }
		env -u ELIDE_FAKE_NO_RTM -u ELIDE_SIM_ABORT -u GLIBC_TUNABLES ${sim:+ELIDE_SIM_ABORT=$sim} \
			ELIDE=mode=on,verbose=1 LD_PRELOAD="$lib_preload" "$prog" >"$tmp/out" 2>"$tmp/err"
		rc=$?
		if [ $rc = 0 ] && grep -q "^libelide: eliding with RTM, mode=on" "$tmp/err"; then
			ok "$(basename "$prog") passes under the 2.43-built libelide, which elides (glibc check passed)"
		else
			fail "$(basename "$prog") under the 2.43-built libelide: exit $rc, $(cat "$tmp/err")"
		fi
	done
fi

# 4. A layout that moves a field the index bytes sit next to stops the build.
if compile "$shimbad" libelide/glibc-check.c "$tmp/bad.o" 2>"$tmp/err"; then
	fail "libelide compiled against a rwlock layout with __shared moved into its index bytes"
else
	grep -q "static assertion failed: \"pthread_rwlock_t.__data.__shared moved from byte 28" "$tmp/err" &&
		ok "a moved rwlock field stops the build with glibc-abi.h's message" ||
		fail "the bad layout failed to compile, but not with the expected assertion: $(cat "$tmp/err")"
fi

# 5. At run time, an unverified glibc means pass-through with the reason.
cat > "$tmp/fake-version.c" <<'EOF'
const char *gnu_get_libc_version(void);
const char *gnu_get_libc_version(void) { return FAKE_VERSION; }
EOF
cat > "$tmp/fake-rwinit.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
/* A glibc that keeps something of its own in bytes 34-37 of an rwlock. */
int pthread_rwlock_init(pthread_rwlock_t *rw, const pthread_rwlockattr_t *a)
{
	int (*next)(pthread_rwlock_t *, const pthread_rwlockattr_t *) =
		(int (*)(pthread_rwlock_t *, const pthread_rwlockattr_t *))dlsym(RTLD_NEXT, "pthread_rwlock_init");
	int r = next(rw, a);

	((unsigned char *)rw)[35] = 1;
	return r;
}
EOF
runtime_ok=1
for v in 2.44 2.43 2.27; do
	$cc -shared -fPIC -DFAKE_VERSION="\"$v\"" "$tmp/fake-version.c" -o "$tmp/fake-$v.so" 2>"$tmp/err" ||
		{ fail "building the fake gnu_get_libc_version: $(cat "$tmp/err")"; runtime_ok=0; }
done
$cc -shared -fPIC "$tmp/fake-rwinit.c" -o "$tmp/fake-rwinit.so" -ldl 2>"$tmp/err" ||
	{ fail "building the fake pthread_rwlock_init: $(cat "$tmp/err")"; runtime_ok=0; }
# refuses PRELOAD WANT: the workload runs under PRELOAD, libelide says WANT at start and in the report.
refuses() {
	env -u ELIDE_FAKE_NO_RTM -u ELIDE_SIM_ABORT -u GLIBC_TUNABLES ELIDE_SIM_ABORT=0x6 \
		ELIDE=verbose=1,report=1 LD_PRELOAD="$1" "$workload" --seconds 1 >/dev/null 2>"$tmp/err" &&
		grep -qF "libelide: passing all locks through to glibc: $2" "$tmp/err" &&
		grep -qF "elision: off: $2" "$tmp/err"
}
if [ $runtime_ok = 1 ]; then
	# Before libelide: libelide's gnu_get_libc_version() binds to the fake.
	refuses "$asan_first${asan_first:+ }$tmp/fake-2.44.so $lib" \
		"glibc 2.44 is newer than the 2.43 this libelide was verified against" &&
		ok "glibc 2.44: pass-through; the start-up line and the report say why" ||
		fail "no refusal of glibc 2.44: $(cat "$tmp/err")"
	refuses "$asan_first${asan_first:+ }$tmp/fake-2.27.so $lib" \
		"glibc 2.27 is older than the 2.28 this libelide was verified against" &&
		ok "glibc 2.27: pass-through with the reason" || fail "no refusal of glibc 2.27: $(cat "$tmp/err")"
	# Without RTM a refused glibc stops the watching too: said, not silent.
	env -u ELIDE_SIM_ABORT -u GLIBC_TUNABLES ELIDE_FAKE_NO_RTM=1 ELIDE=verbose=1,report=1 \
		LD_PRELOAD="$asan_first${asan_first:+ }$tmp/fake-2.44.so $lib" "$workload" --seconds 1 >/dev/null 2>"$tmp/err" &&
		grep -qF "not watching either: glibc 2.44 is newer" "$tmp/err" &&
		grep -qF "elision: off: no usable RTM: disabled by ELIDE_FAKE_NO_RTM; not watching either: glibc 2.44" "$tmp/err" &&
		ok "glibc 2.44 without RTM: the start-up line and the report say why nothing is watched" ||
		fail "glibc 2.44 without RTM: no reason for not watching: $(cat "$tmp/err")"
	# glibc 2.43 removed its elision and the glibc.elision tunables: the
	# entry changes nothing, libelide elides and keeps its own paths.
	env -u ELIDE_FAKE_NO_RTM -u ELIDE_SIM_ABORT ELIDE_SIM_ABORT=0x6 GLIBC_TUNABLES=glibc.elision.enable=1 \
		ELIDE=verbose=1 LD_PRELOAD="$asan_first${asan_first:+ }$tmp/fake-2.43.so $lib" "$workload" --seconds 1 \
		>/dev/null 2>"$tmp/err" &&
		grep -qF "eliding with RTM" "$tmp/err" && ! grep -qF "glibc's own elision is enabled" "$tmp/err" &&
		ok "glibc 2.43: glibc.elision.enable=1 does nothing, libelide elides (own paths not refused for it)" ||
		fail "glibc 2.43 with glibc.elision.enable=1: $(cat "$tmp/err")"
	# After libelide: the pthread_rwlock_init libelide passes to (RTLD_NEXT) is the fake.
	refuses "$preload $tmp/fake-rwinit.so" \
		"glibc probe: pthread_rwlock_init does not clear the rwlock index bytes (34-37)" &&
		ok "a pthread_rwlock_init that leaves the index bytes set: pass-through, the probe names it" ||
		fail "the probe missed a pthread_rwlock_init writing the index bytes: $(cat "$tmp/err")"
fi

tl_finish glibc-headers
