#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# `make install DESTDIR=...` from the build tree, then:
#   - the exact list of installed files: libelide.so (and libtool's .la),
#     elide.h, elide.pc, elided, elidectl, the unit, the tmpfiles.d entry,
#     the D-Bus policy, elide.conf, every page of dist_man_MANS and, once
#     the build defines bashcompletiondir, elidectl's completions (bash,
#     zsh, fish);
#   - every man: page of the unit's Documentation= is installed;
#   - `systemd-analyze verify` of the installed unit prints nothing, and
#     `systemd-analyze security --offline=yes` rates it 2.0 or below;
#   - systemd-tmpfiles creates /run/elide sticky and world-writable;
#   - groff lints every installed page without a warning;
#   - `elided --check-config` accepts the installed elide.conf;
#   - pkg-config finds elide.pc, a program including <elide.h> builds with
#     its flags and sees elide_active() == -ENOSYS alone, 0 or 1 with the
#     installed libelide.so preloaded;
#   - `make uninstall DESTDIR=...` leaves no file behind.
# Only the systemd checks are skipped, with a note, when systemd-analyze or
# systemd-tmpfiles is missing; everything else always runs.
set -u

: "${top_builddir:?run me through make check}"
CC=${CC:-cc}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/elide-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
dest=$tmp/dest

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
note() { echo "note: $*"; }

# Make's own view of the build: the configured directories and file lists.
# MAKEFLAGS from an enclosing `make check` must not leak into these makes.
unset MAKEFLAGS MFLAGS MAKELEVEL
mk() { make --no-print-directory -s -C "$top_builddir" "$@"; }
var() {
	printf 'print-elide-var:\n\t@echo $(%s)\n' "$1" |
		mk -f Makefile -f - print-elide-var
}
prefix=$(var prefix)
libdir=$(var libdir)
includedir=$(var includedir)
pkgconfigdir=$(var pkgconfigdir)
bindir=$(var bindir)
sbindir=$(var sbindir)
sysconfdir=$(var sysconfdir)
mandir=$(var mandir)
systemdsystemunitdir=$(var systemdsystemunitdir)
tmpfilesdir=$(var tmpfilesdir)
dbuspolicydir=$(var dbuspolicydir)
bashcompletiondir=$(var bashcompletiondir)
zshcompletiondir=$(var zshcompletiondir)
fishcompletiondir=$(var fishcompletiondir)
dist_man_MANS=$(var dist_man_MANS)
tmpfiles_DATA=$(var tmpfiles_DATA)
[ -n "$prefix" ] && [ -n "$libdir" ] || { echo "FAIL: cannot read the configured directories from $top_builddir/Makefile" >&2; exit 1; }

# ---- install ------------------------------------------------------------------
if mk install DESTDIR="$dest" >"$tmp/install.log" 2>&1; then
	ok "make install DESTDIR=..."
else
	cat "$tmp/install.log" >&2
	echo "FAIL: make install" >&2
	exit 1
fi

# ---- the file list ------------------------------------------------------------
{
	echo "$libdir/libelide.so"
	echo "$includedir/elide.h"
	echo "$pkgconfigdir/elide.pc"
	echo "$sbindir/elided"
	echo "$bindir/elidectl"
	echo "$systemdsystemunitdir/elided.service"
	for f in $tmpfiles_DATA; do echo "$tmpfilesdir/${f##*/}"; done
	echo "$dbuspolicydir/org.elide.elided1.conf"
	echo "$sysconfdir/elide.conf"
	for page in $dist_man_MANS; do
		page=${page##*/}
		echo "$mandir/man${page##*.}/$page"
	done
	[ -n "$bashcompletiondir" ] && echo "$bashcompletiondir/elidectl"
	[ -n "$zshcompletiondir" ] && echo "$zshcompletiondir/_elidectl"
	[ -n "$fishcompletiondir" ] && echo "$fishcompletiondir/elidectl.fish"
} | sort > "$tmp/expected"
# libtool installs libelide.la too; it is allowed, not required.
(cd "$dest" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort) |
	grep -vx "$libdir/libelide.la" > "$tmp/installed"
if diff -u "$tmp/expected" "$tmp/installed" > "$tmp/diff"; then
	ok "installed exactly the $(wc -l < "$tmp/expected") expected files"
else
	fail "installed files differ from the expected list (- missing, + unexpected):"
	sed -n '3,$p' "$tmp/diff" | grep '^[-+]' >&2
fi
[ -n "$bashcompletiondir" ] || note "the build defines no bashcompletiondir: no bash completion expected yet"

unit=$dest$systemdsystemunitdir/elided.service
grep -qx "ExecStart=$sbindir/elided" "$unit" && ok "unit: ExecStart=$sbindir/elided" ||
	fail "unit ExecStart: $(grep '^ExecStart=' "$unit")"

# Each man: page the unit names must be installed.
for ref in $(sed -n 's/^Documentation=//p' "$unit"); do
	case "$ref" in
	man:*\(*\))
		page=${ref#man:}
		name=${page%(*}
		section=${page##*(}
		section=${section%)}
		if [ -f "$dest$mandir/man${section%%[!0-9]*}/$name.$section" ]; then
			ok "Documentation=$ref is installed"
		else
			fail "Documentation=$ref: no $mandir/man${section%%[!0-9]*}/$name.$section installed"
		fi
		;;
	esac
done

# ---- systemd --------------------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
	# verify runs ExecStart's binary through access(), so point it into
	# DESTDIR; man finds the Documentation= pages through MANPATH.
	mkdir "$tmp/unit"
	sed "s|^ExecStart=$sbindir/|ExecStart=$dest$sbindir/|" "$unit" > "$tmp/unit/elided.service"
	man_opt=--man=yes
	if ! command -v man >/dev/null; then
		man_opt=--man=no
		note "man is not installed: systemd-analyze verify does not check Documentation="
	fi
	out=$(cd "$tmp" && MANPATH="$dest$mandir" systemd-analyze verify "$man_opt" "$tmp/unit/elided.service" 2>&1)
	rc=$?
	if [ $rc -eq 0 ] && [ -z "$out" ]; then
		ok "systemd-analyze verify: clean"
	else
		fail "systemd-analyze verify (exit status $rc):"
		printf '%s\n' "$out" >&2
	fi
	systemd-analyze security --offline=yes --no-pager "$tmp/unit/elided.service" > "$tmp/security" 2>&1
	exposure=$(sed -n 's/.*Overall exposure level for elided.service: \([0-9.]*\).*/\1/p' "$tmp/security")
	if [ -z "$exposure" ]; then
		note "systemd-analyze security --offline=yes gave no figure: $(tail -n1 "$tmp/security")"
	elif awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }'; then
		ok "systemd-analyze security: exposure $exposure (goal 2.0 or below)"
	else
		fail "systemd-analyze security: exposure $exposure, above 2.0"
		grep '^✗' "$tmp/security" >&2
	fi
else
	note "systemd-analyze is not installed: the unit is neither verified nor rated"
fi

if command -v systemd-tmpfiles >/dev/null; then
	# The root must exist: systemd 262 fails otherwise ("Failed to
	# initialize label context for root ...: No such file or directory").
	mkdir -p "$tmp/root"
	for f in $tmpfiles_DATA; do
		if systemd-tmpfiles --root="$tmp/root" --create "$dest$tmpfilesdir/${f##*/}" 2>"$tmp/err" &&
			[ "$(stat -c '%a %U' "$tmp/root/run/elide" 2>/dev/null)" = "1777 root" ]; then
			ok "tmpfiles.d: ${f##*/} creates /run/elide 1777 root"
		else
			fail "tmpfiles.d: ${f##*/}: $(cat "$tmp/err") $(stat -c '%a %U' "$tmp/root/run/elide" 2>&1)"
		fi
	done
else
	note "systemd-tmpfiles is not installed: the tmpfiles.d entry is not tried"
fi

# ---- man pages -------------------------------------------------------------------
if command -v groff >/dev/null; then
	pages=0
	for page in "$dest$mandir"/man*/*; do
		[ -f "$page" ] || continue
		pages=$((pages + 1))
		for target in $(sed -n 's/^\.so[ 	][ 	]*//p' "$page"); do
			[ -f "$dest$mandir/$target" ] || fail "${page##*/}: .so target $target is not installed"
		done
		# From the manual's root, as man(1) runs it: troff finds .so
		# targets there.  Not -I: groff 1.23's -I also runs grn, which
		# groff-base lacks.
		out=$(cd "$dest$mandir" && LC_ALL=C.UTF-8 groff -man -ww -z "$page" 2>&1)
		rc=$?
		[ $rc -eq 0 ] && [ -z "$out" ] || fail "groff lint of installed ${page##*/} (exit status $rc): $out"
	done
	[ $pages -gt 0 ] && ok "groff lints the $pages installed man pages" || fail "no man pages installed"
else
	note "groff is not installed: the installed man pages are not linted"
fi

# ---- the configuration sample --------------------------------------------------
conf=$dest$sysconfdir/elide.conf
if out=$("$dest$sbindir/elided" --check-config --config "$conf" 2>&1); then
	ok "elided --check-config accepts the installed elide.conf"
else
	fail "elided --check-config on the installed elide.conf: $out"
fi

# ---- pkg-config and <elide.h> --------------------------------------------------
if command -v pkg-config >/dev/null; then
	export PKG_CONFIG_PATH="$dest$pkgconfigdir" PKG_CONFIG_SYSROOT_DIR="$dest"
	if cflags=$(pkg-config --cflags elide) && version=$(pkg-config --modversion elide); then
		ok "pkg-config elide: version $version, cflags '$cflags'"
		cat > "$tmp/active.c" <<'EOF'
#include <elide.h>
#include <stdio.h>
int main(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	int r = elide_mutex_set_name(&m, "install_test_lock");
	printf("%d %d\n", elide_active(), r);
	return 0;
}
EOF
		# shellcheck disable=SC2046,SC2086 # flags are lists of words
		if $CC $cflags -pthread "$tmp/active.c" -o "$tmp/active" $(pkg-config --libs elide) 2>"$tmp/err"; then
			ok "a program including <elide.h> builds with pkg-config's flags alone"
			out=$("$tmp/active")
			[ "$out" = "-38 -38" ] && ok "without libelide: elide_active() == -ENOSYS" || fail "without libelide: '$out'"
			if [ "${ELIDE_SANITIZERS:-no}" = yes ]; then
				note "sanitizer build: the installed libelide.so is not preloaded into a plain program"
			else
				out=$(LD_PRELOAD="$dest$libdir/libelide.so" ELIDE_RUNTIME_DIR="$tmp" "$tmp/active")
				case "$out" in
				"0 0" | "1 0") ok "with the installed libelide.so preloaded: elide_active() == ${out% *}" ;;
				*) fail "with the installed libelide.so preloaded: '$out'" ;;
				esac
			fi
		else
			fail "cannot build a program with pkg-config's flags: $(cat "$tmp/err")"
		fi
	else
		fail "pkg-config does not find elide in $PKG_CONFIG_PATH"
	fi
	unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
else
	note "pkg-config is not installed: elide.pc is not tried"
fi

# ---- uninstall -------------------------------------------------------------------
if mk uninstall DESTDIR="$dest" >"$tmp/uninstall.log" 2>&1; then
	left=$(cd "$dest" && find . ! -type d | sed 's|^\.||')
	[ -z "$left" ] && ok "make uninstall leaves only empty folders" ||
		fail "make uninstall left: $(tr '\n' ' ' <<<"$left")"
else
	cat "$tmp/uninstall.log" >&2
	fail "make uninstall"
fi

if [ $failures -gt 0 ]; then
	echo "$failures check(s) failed"
	exit 1
fi
echo "all install checks passed"
