#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Lint every manual page under man/ with groff: any warning fails the test.
# A page that is only a ".so manN/target" link must name a page that exists.
# Exit status follows automake: 0 pass, 1 fail, 77 skip.

if [ -z "$top_srcdir" ]; then
	top_srcdir=$(cd "$(dirname "$0")/.." && pwd) || exit 1
fi
mandir=$(cd "$top_srcdir/man" 2>/dev/null && pwd) || mandir=$top_srcdir/man

if ! command -v groff >/dev/null 2>&1; then
	echo "SKIP: groff is not installed" >&2
	exit 77
fi
if [ ! -d "$mandir" ]; then
	echo "FAIL: no man folder at $mandir" >&2
	exit 1
fi

# .so requests name their target relative to the root of the installed
# manual (man3/elide.h.3); in the source tree every page lies in man/.
# groff runs in a folder whose manN subfolders all point there, as man(1)
# runs it in the manual's root: troff resolves .so from the current folder.
# (Not with -I: groff 1.23's -I also runs grn, which groff-base lacks.)
sodir=$(mktemp -d "${TMPDIR:-/tmp}/test-man-lint.XXXXXX") || exit 1
trap 'rm -rf "$sodir"' EXIT
trap 'exit 1' HUP INT TERM
for section in 1 2 3 4 5 6 7 8; do
	ln -s "$mandir" "$sodir/man$section" || exit 1
done

LC_ALL=C.UTF-8
export LC_ALL

status=0
pages=0
for page in "$mandir"/*.[1-8]; do
	[ -f "$page" ] || continue
	pages=$((pages + 1))
	name=${page##*/}

	# Check .so targets directly, so a missing one reads clearly.
	targets=$(sed -n 's/^\.so[ 	][ 	]*//p' "$page")
	for target in $targets; do
		if [ ! -f "$sodir/$target" ]; then
			echo "FAIL: $name: .so target $target not found in $mandir" >&2
			status=1
		fi
	done

	output=$(cd "$sodir" && groff -man -ww -z "$page" 2>&1)
	rc=$?
	if [ $rc -ne 0 ] || [ -n "$output" ]; then
		echo "FAIL: $name (groff exit status $rc):" >&2
		printf '%s\n' "$output" >&2
		status=1
	else
		echo "ok: $name"
	fi
done

if [ $pages -eq 0 ]; then
	echo "FAIL: no manual pages found in $mandir" >&2
	exit 1
fi
exit $status
