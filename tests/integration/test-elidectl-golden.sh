#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Golden tests of elidectl's output formats: list and show, table and JSON,
# on a fixed segment (make-segment) for a live process of ours (sleep), read
# directly (--runtime-dir).  The pid, uid and user name are masked; list's
# table is compared with runs of blanks squeezed (its PID column's width
# follows the pid).  ELIDECTL_GOLDEN_UPDATE=1 rewrites the golden files.
set -u

: "${top_builddir:?run me through make check}"
elidectl="$top_builddir/elidectl/elidectl"
mkseg="$top_builddir/tests/integration/make-segment"
golden="$(cd "$(dirname "$0")" && pwd)/golden"

command -v jq >/dev/null || { echo "SKIP: jq is not installed" >&2; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/elidectl-golden.XXXXXX") || exit 1
sleep 300 &
sp=$!
trap 'kill $sp 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir "$tmp/run"
"$mkseg" "$tmp/run" "$sp" >/dev/null || { echo "FAIL: make-segment" >&2; exit 1; }
user=$(id -un)
ctl() { "$elidectl" --runtime-dir "$tmp/run" "$@"; }

ctl list | sed -E "s/^ *$sp /PID /; s/ $user / USER /" | tr -s ' ' | sed -E "s/^ //" >"$tmp/list.txt"
ctl list --json=pretty | jq '.[] |= (.pid = 0 | .uid = 0 | .user = "USER")' >"$tmp/list.json"
ctl show "$sp" | sed -E "s/^( +PID): $sp\$/\1: PID/" >"$tmp/show.txt"
ctl show "$sp" --json=short | jq '.pid = 0 | .uid = 0' >"$tmp/show.json"
ctl show "$sp" --sort name --max 2 --no-legend >"$tmp/show-sorted.txt"

failures=0
for f in list.txt list.json show.txt show.json show-sorted.txt; do
	if [ "${ELIDECTL_GOLDEN_UPDATE:-0}" = 1 ]; then
		cp "$tmp/$f" "$golden/$f"
		echo "updated $f"
	elif diff -u "$golden/$f" "$tmp/$f"; then
		echo "ok: $f"
	else
		echo "FAIL: $f differs from the golden file" >&2
		failures=$((failures + 1))
	fi
done
[ $failures -eq 0 ] || exit 1
echo "all golden checks passed"
