#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# test-elidectl-enable.sh - elidectl enable/disable --unit and --system.
#
# Everything happens in a temporary root (--root): this test never touches
# the live /etc.  Every elidectl call goes through ctl(), which always
# passes --root.  The library's load check runs this host's /bin/true with
# LD_PRELOAD=ROOT/path (the root has no /bin/true, so no chroot).
#
# Checks: the drop-in's content, mode and removal (with its directory);
# invalid unit names refused with status 2; a unit the root does not have
# refused with status 3 and a message that names it (--force writes the
# drop-in anyway); with --now, a failing systemctl daemon-reload says the
# drop-in stays and what to run (in a private mount namespace, root only);
# enable --system on a machine that cannot elide refuses without --force
# (ELIDE_FAKE_NO_RTM, same namespace); ld.so.preload gains exactly
# our line, keeps every other byte, is idempotent, and disable removes
# only our line (and the file once empty); broken libraries (a copy of
# /bin/true, a text file, ELF32, another machine, world-writable, missing)
# refused with ld.so.preload unchanged; a symlinked etc/ refused.
#
# Environment (from AM_TESTS_ENVIRONMENT): top_builddir, ELIDE_SANITIZERS.
# Exit status: 0 pass, 1 fail.

if [ -z "${top_builddir:-}" ]; then
	echo "test-elidectl-enable.sh: top_builddir is not set (run me through make check)" >&2
	exit 1
fi
elidectl=$top_builddir/elidectl/elidectl
lib=$top_builddir/libelide/.libs/libelide.so
for f in "$elidectl" "$lib"; do
	if [ ! -f "$f" ]; then
		echo "FAIL: $f not built" >&2
		exit 1
	fi
done
# elidectl finds the build tree's library as `run` does, canonical.
unset ELIDE_LIBDIR LD_PRELOAD ELIDE
buildlib=$(readlink -f "$lib")
if [ "${ELIDE_SANITIZERS:-no}" = yes ]; then
	# The load check preloads an instrumented libelide into /bin/true.
	ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
	export ASAN_OPTIONS
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/test-elidectl-enable.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root/etc/systemd/system" "$root/usr/lib/elide" "$root/usr/lib/bad" "$root/usr/lib/systemd/system"
# The units the root has: foo and the template bar@.
printf '[Service]\nExecStart=/bin/true\n' >"$root/usr/lib/systemd/system/foo.service"
cp "$root/usr/lib/systemd/system/foo.service" "$root/usr/lib/systemd/system/bar@.service"
out=$work/out
failures=0

fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() {
	echo "ok: $*"
}
# ctl ROOT ARGS...: elidectl with --root ROOT, always; output in $out.
ctl() {
	r=$1
	shift
	"$elidectl" "$@" --root "$r" >"$out" 2>&1
}
# expect STATUS WHAT ROOT ARGS...
expect() {
	want=$1 what=$2
	shift 2
	ctl "$@"
	st=$?
	if [ $st -eq "$want" ]; then
		ok "$what (exit $st)"
	else
		fail "$what: exit $st, want $want"
		sed 's/^/	/' "$out" >&2
	fi
}
contains() {
	if grep -qF -- "$2" "$out"; then ok "$1"; else fail "$1: no '$2' in:"; sed 's/^/	/' "$out" >&2; fi
}
sum() {
	if [ -e "$1" ]; then cksum <"$1"; else echo absent; fi
}

# --- --unit ---------------------------------------------------------------
# The build tree's library, as the root sees it: at the same path inside.
mkdir -p "$root$(dirname "$buildlib")"
cp "$buildlib" "$root$buildlib" && chmod 0644 "$root$buildlib"
dropin=$root/etc/systemd/system/foo.service.d/50-elide.conf

expect 0 "enable --unit foo" "$root" enable --unit foo --mode adaptive
contains "hint printed" "systemctl daemon-reload && systemctl restart foo.service"
printf '[Service]\nEnvironment=LD_PRELOAD=%s\nEnvironment=ELIDE=mode=adaptive\n' "$buildlib" >"$work/want"
if [ -f "$dropin" ] && grep -v '^#' "$dropin" | cmp -s - "$work/want" && head -n 1 "$dropin" | grep -q '^# '; then
	ok "drop-in content"
else
	fail "drop-in content:"
	cat "$dropin" >&2
fi
[ "$(stat -c %a "$dropin" 2>/dev/null)" = 644 ] && ok "drop-in mode 0644" || fail "drop-in mode $(stat -c %a "$dropin")"
before=$(sum "$dropin")
expect 0 "enable --unit foo again" "$root" enable --unit foo --mode adaptive
contains "idempotent" "already enabled"
[ "$(sum "$dropin")" = "$before" ] && ok "drop-in unchanged" || fail "drop-in changed"
expect 0 "enable --unit foo without --mode updates" "$root" enable --unit foo.service
grep -q ELIDE= "$dropin" && fail "ELIDE= still in the drop-in" || ok "drop-in updated"

expect 0 "disable --unit foo" "$root" disable --unit foo
[ ! -e "$dropin" ] && [ ! -e "$root/etc/systemd/system/foo.service.d" ] &&
	ok "drop-in and its directory removed" || fail "drop-in or directory left"
expect 0 "disable --unit foo again" "$root" disable --unit foo
contains "not enabled" "not enabled"

# Another file in the .d directory: kept, with the directory.
expect 0 "enable --unit bar@.service" "$root" enable --unit bar@.service
echo '[Service]' >"$root/etc/systemd/system/bar@.service.d/10-other.conf"
expect 0 "disable --unit bar@" "$root" disable --unit bar@
[ ! -e "$root/etc/systemd/system/bar@.service.d/50-elide.conf" ] &&
	[ -f "$root/etc/systemd/system/bar@.service.d/10-other.conf" ] &&
	ok "other drop-in kept" || fail "other drop-in not kept"

# A unit the root does not have: refused, nothing written; --force writes it.
expect 3 "enable --unit of a unit not installed" "$root" enable --unit memcached
contains "not installed: names it" "no unit memcached.service is installed under $root"
contains "not installed: says where it looked" "/usr/lib/systemd/system"
contains "not installed: says what to do" "--force"
[ ! -e "$root/etc/systemd/system/memcached.service.d" ] && ok "no drop-in for a missing unit" ||
	fail "drop-in written for a missing unit"
expect 0 "enable --unit NAME --force of a unit not installed" "$root" enable --unit memcached --force
contains "--force: warned" "takes effect once it is installed"
expect 0 "disable --unit memcached" "$root" disable --unit memcached
expect 0 "enable --unit of a template's instance" "$root" enable --unit bar@x
expect 0 "disable --unit of a template's instance" "$root" disable --unit bar@x
expect 2 "--force with disable" "$root" disable --unit foo --force

for name in ../x a/b "" .. foo.socket 'x y' "$(printf '%0256d' 0)"; do
	expect 2 "invalid unit name '$(printf %.20s "$name")'" "$root" enable --unit "$name"
done
expect 2 "disable --unit ../x" "$root" disable --unit ../x
[ -z "$(ls -A "$root/etc/systemd/system" | grep -v '^bar@')" ] && ok "nothing else created" ||
	fail "unexpected files: $(ls -A "$root/etc/systemd/system")"
expect 2 "--now with --root" "$root" enable --unit foo --now
expect 2 "--mode bogus" "$root" enable --unit foo --mode bogus
expect 2 "neither --unit nor --system" "$root" enable
expect 2 "both --unit and --system" "$root" enable --unit foo --system
expect 2 "relative --library" "$root" enable --system --library libelide.so

# --- --system -------------------------------------------------------------
preload=$root/etc/ld.so.preload
ourlib=/usr/lib/elide/libelide.so
cp "$buildlib" "$root$ourlib" && chmod 0644 "$root$ourlib"
printf '# comment\n/usr/lib/other.so\n' >"$preload"
cp "$preload" "$work/orig"
printf '# comment\n/usr/lib/other.so\n%s\n' "$ourlib" >"$work/want"

expect 0 "enable --system" "$root" enable --system --library "$ourlib"
cmp -s "$preload" "$work/want" && ok "our line appended, others kept" || { fail "ld.so.preload:"; cat "$preload" >&2; }
[ "$(stat -c %a "$preload")" = 644 ] && ok "ld.so.preload mode 0644" || fail "ld.so.preload mode $(stat -c %a "$preload")"
expect 0 "enable --system again" "$root" enable --system --library "$ourlib"
contains "idempotent" "already enabled"
cmp -s "$preload" "$work/want" && ok "ld.so.preload unchanged" || fail "ld.so.preload changed"
expect 0 "disable --system" "$root" disable --system --library "$ourlib"
cmp -s "$preload" "$work/orig" && ok "only our line removed" || { fail "ld.so.preload:"; cat "$preload" >&2; }
expect 0 "disable --system again" "$root" disable --system --library "$ourlib"
contains "not enabled" "not enabled"

# Our line between others, twice, and a last line without a newline.
printf '/a.so\n%s\n# x\n%s\n/b.so' "$ourlib" "$ourlib" >"$preload"
expect 0 "disable --system, two lines" "$root" disable --system --library "$ourlib"
printf '/a.so\n# x\n/b.so' | cmp -s - "$preload" && ok "both removed, the rest byte for byte" ||
	{ fail "ld.so.preload:"; od -c "$preload" >&2; }
expect 0 "enable --system after a line without newline" "$root" enable --system --library "$ourlib"
printf '/a.so\n# x\n/b.so\n%s\n' "$ourlib" | cmp -s - "$preload" && ok "newline added before ours" ||
	{ fail "ld.so.preload:"; od -c "$preload" >&2; }

# No file before: created, then removed once empty.
rm -f "$preload"
expect 0 "enable --system, no ld.so.preload" "$root" enable --system --library "$ourlib"
printf '%s\n' "$ourlib" | cmp -s - "$preload" && ok "ld.so.preload created" || fail "ld.so.preload not created"
expect 0 "disable --system, last line" "$root" disable --system --library "$ourlib"
[ ! -e "$preload" ] && ok "empty ld.so.preload removed" || fail "ld.so.preload left"

# A library that is gone can still be disabled.
printf '/usr/lib/other.so\n/usr/lib/gone/libelide.so\n' >"$preload"
expect 0 "disable --system, library gone" "$root" disable --system --library /usr/lib/gone/libelide.so
printf '/usr/lib/other.so\n' | cmp -s - "$preload" && ok "gone library's line removed" || fail "gone library's line"

# Broken libraries: refused, ld.so.preload untouched.
cp "$work/orig" "$preload"
cp /bin/true "$root/usr/lib/bad/true.so"
echo 'not a library' >"$root/usr/lib/bad/text.so"
# Minimal ELF headers: ELF32 i386 and ELF64 aarch64, both ET_DYN.
{ printf '\177ELF\001\001\001'; head -c 9 /dev/zero; printf '\003\000\003\000\001\000\000\000'; head -c 64 /dev/zero; } \
	>"$root/usr/lib/bad/elf32.so"
{ printf '\177ELF\002\001\001'; head -c 9 /dev/zero; printf '\003\000\267\000\001\000\000\000'; head -c 64 /dev/zero; } \
	>"$root/usr/lib/bad/aarch64.so"
cp "$buildlib" "$root/usr/lib/bad/writable.so" && chmod 0666 "$root/usr/lib/bad/writable.so"
mkdir "$root/usr/lib/bad/dir.so"
chmod 0644 "$root"/usr/lib/bad/*.so 2>/dev/null
chmod 0666 "$root/usr/lib/bad/writable.so"
before=$(sum "$preload")
for bad in true.so text.so elf32.so aarch64.so writable.so dir.so missing.so; do
	expect 1 "enable --system refuses $bad" "$root" enable --system --library "/usr/lib/bad/$bad"
	[ "$(sum "$preload")" = "$before" ] && ok "ld.so.preload untouched ($bad)" || fail "ld.so.preload changed ($bad)"
done
expect 1 "enable --unit refuses a text file" "$root" enable --unit foo --library /usr/lib/bad/text.so
[ ! -e "$root/etc/systemd/system/foo.service.d" ] && ok "no drop-in for a broken library" || fail "drop-in written"

# A symlink inside the root resolves inside it.
ln -s /usr/lib/elide/libelide.so "$root/usr/lib/link.so"
expect 0 "enable --system through an in-root symlink" "$root" enable --system --library /usr/lib/link.so
expect 0 "disable --system through an in-root symlink" "$root" disable --system --library /usr/lib/link.so
cmp -s "$preload" "$work/orig" && ok "ld.so.preload back to the original" || fail "ld.so.preload not restored"

# A symlinked etc/ is refused (it points inside the work directory, so a
# bug could not reach the live /etc either).
root2=$work/root2
mkdir -p "$root2/real-etc" "$root2/usr/lib"
cp "$buildlib" "$root2/usr/lib/libelide.so" && chmod 0644 "$root2/usr/lib/libelide.so"
ln -s real-etc "$root2/etc"
expect 1 "symlinked etc refused" "$root2" enable --system --library /usr/lib/libelide.so
[ -z "$(ls -A "$root2/real-etc")" ] && ok "nothing written through the symlink" || fail "written through the symlink"

# --- the live root, in a private mount namespace ------------------------------
# --now needs --root /: /etc/systemd/system and /etc are tmpfs here, so
# nothing reaches the host's, and systemctl is a stand-in that fails.
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && unshare -m --propagation private true 2>/dev/null; then
	mkdir -p "$work/bin"
	printf '#!/bin/sh\necho "Failed to connect to bus: No such file or directory" >&2\nexit 1\n' >"$work/bin/systemctl"
	chmod +x "$work/bin/systemctl"
	unshare -m --propagation private sh -c '
		mount -t tmpfs tmpfs /etc/systemd/system || exit 99
		PATH="$1:$PATH" "$2" enable --unit elide-test-none --force --now --library "$3"' _ \
		"$work/bin" "$elidectl" "$buildlib" >"$out" 2>&1
	st=$?
	[ $st -eq 1 ] && ok "enable --now, daemon-reload failing: exit 1" || fail "enable --now: exit $st: $(cat "$out")"
	contains "daemon-reload failure: the drop-in stays" "/etc/systemd/system/elide-test-none.service.d/50-elide.conf stays in place"
	contains "daemon-reload failure: what to run" "run: systemctl daemon-reload && systemctl restart elide-test-none.service"
	contains "daemon-reload failure: how to undo" "elidectl disable --unit elide-test-none.service"

	ELIDE_FAKE_NO_RTM=1 unshare -m --propagation private sh -c '
		mount -t tmpfs tmpfs /etc || exit 99
		"$1" enable --system --library "$2" || exit $?
		test ! -e /etc/ld.so.preload' _ "$elidectl" "$buildlib" >"$out" 2>&1
	st=$?
	[ $st -eq 1 ] && ok "enable --system without RTM refuses (exit 1)" || fail "enable --system without RTM: exit $st: $(cat "$out")"
	contains "no RTM: says nothing can be elided" "nothing can be elided on this machine"
	contains "no RTM: says what libelide does there" "would elide nothing and watch instead"
	contains "no RTM: asks for --force" "give --force to do it anyway"
	ELIDE_FAKE_NO_RTM=1 unshare -m --propagation private sh -c '
		mount -t tmpfs tmpfs /etc || exit 99
		"$1" enable --system --force --library "$2" && grep -qx "$2" /etc/ld.so.preload' _ "$elidectl" "$buildlib" \
		>"$out" 2>&1
	st=$?
	[ $st -eq 0 ] && ok "enable --system --force without RTM writes the line" || fail "enable --system --force: exit $st: $(cat "$out")"
else
	echo "SKIP (loudly): --now and --system on the live root need root and unshare -m; not tested here" >&2
fi

[ $failures -eq 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
echo "all enable/disable checks passed"
