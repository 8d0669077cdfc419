#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Golden tests of elidectl's output formats: list and show, table and JSON,
# on a fixed segment (make-segment) for a live process of ours (sleep), read
# directly (--runtime-dir).  The pid, uid and user name are masked; list's
# table is compared with runs of blanks squeezed (its PID column's width
# follows the pid).
#
# Tables at 80 columns (COLUMNS=80: what a terminal of that width gets)
# and with --full: the default columns fit 80; the wider -o selections are
# ellipsised ("…") to fit, numbers never, and --full keeps every cell.
# Every line of an 80-column table is checked to be at most 80 wide, and
# colours (SYSTEMD_COLORS=1 forces them off a terminal) to mark states and
# to give way to NO_COLOR and --no-color.  Messages fixed by issue 14 are
# golden too: run on a CPU without RTM, enable --unit of a unit that is not
# installed, elided --check-config's "1 file".
#
# UTF-8 (C.UTF-8) as a terminal would have it.  ELIDECTL_GOLDEN_UPDATE=1
# rewrites the golden files: review the diff before committing it.
set -u

: "${top_builddir:?run me through make check}"
elidectl="$top_builddir/elidectl/elidectl"
elided="$top_builddir/elided/elided"
mkseg="$top_builddir/tests/integration/make-segment"
golden="$(cd "$(dirname "$0")" && pwd)/golden"

command -v jq >/dev/null || { echo "SKIP: jq is not installed" >&2; exit 77; }
export LC_ALL=C.UTF-8
unset COLUMNS LINES NO_COLOR SYSTEMD_COLORS SYSTEMD_PAGER PAGER ELIDE_FAKE_NO_RTM

tmp=$(mktemp -d "${TMPDIR:-/tmp}/elidectl-golden.XXXXXX") || exit 1
sleep 300 &
sp=$!
trap 'kill $sp 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir "$tmp/run"
"$mkseg" "$tmp/run" "$sp" >/dev/null || { echo "FAIL: make-segment" >&2; exit 1; }
user=$(id -un)
ctl() { "$elidectl" --runtime-dir "$tmp/run" "$@"; }
mask_show() { sed -E "s/^( +PID): $sp\$/\1: PID/"; }
# The list columns without PID and USER, whose widths follow the pid and the
# user name: what is left is the same on every machine, ellipses included.
list_cols=EXE,STATE,MODE,LOCKS,ACQUIRED/s,COMMITS/s,ABORT%,CYCLES-LOST,CYCLES-LOST/s
show_cols=+CONFLICT,CAPACITY

ctl list | sed -E "s/^ *$sp /PID /; s/ $user / USER /" | tr -s ' ' | sed -E "s/^ //" >"$tmp/list.txt"
COLUMNS=80 ctl list -o "$list_cols" >"$tmp/list-80.txt"
COLUMNS=80 ctl list -o "$list_cols" --full >"$tmp/list-full.txt"
ctl list --json=pretty | jq '.[] |= (.pid = 0 | .uid = 0 | .user = "USER")' >"$tmp/list.json"
COLUMNS=80 ctl show "$sp" | mask_show >"$tmp/show.txt"
COLUMNS=80 ctl show "$sp" -o "$show_cols" | mask_show >"$tmp/show-80.txt"
COLUMNS=80 ctl show "$sp" -o "$show_cols" --full | mask_show >"$tmp/show-full.txt"
ctl show "$sp" --json=short | jq '.pid = 0 | .uid = 0 | .user = "USER"' >"$tmp/show.json"
ctl show "$sp" --sort name --max 2 --no-legend >"$tmp/show-sorted.txt"
SYSTEMD_COLORS=1 ctl show "$sp" --no-legend | cat -v >"$tmp/show-color.txt"

# Messages.  The library's directory and the temporary root are masked.
{
	echo "\$ ELIDE_FAKE_NO_RTM=1 elidectl run true"
	# elidectl run appends libelide to LD_PRELOAD: a sanitizer build's
	# libelide needs the ASan runtime there first.
	if [ "${ELIDE_SANITIZERS:-no}" = yes ]; then
		LD_PRELOAD="$(${CC:-cc} -print-file-name=libasan.so)" \
			ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
			ELIDE_FAKE_NO_RTM=1 "$elidectl" run true 2>&1
	else
		ELIDE_FAKE_NO_RTM=1 "$elidectl" run true 2>&1
	fi
	echo "exit $?"
	mkdir -p "$tmp/root/etc/systemd/system"
	echo "\$ elidectl enable --unit memcached --root ROOT"
	"$elidectl" enable --unit memcached --root "$tmp/root" 2>&1 | sed "s|$tmp/root|ROOT|g"
	echo "exit ${PIPESTATUS[0]}"
	printf 'default: { mode = "adaptive"; };\n' >"$tmp/one.conf"
	echo "\$ elided --check-config --config ONE.conf"
	"$elided" --check-config --config "$tmp/one.conf" 2>&1
	echo "exit $?"
	mkdir "$tmp/one.conf.d" && cp "$tmp/one.conf" "$tmp/one.conf.d/10-x.conf"
	echo "\$ elided --check-config --config ONE.conf (and a drop-in)"
	"$elided" --check-config --config "$tmp/one.conf" 2>&1
	echo "exit $?"
	echo "\$ elidectl list -o PID,BOGUS"
	ctl list -o PID,BOGUS 2>&1
	echo "exit $?"
} >"$tmp/messages.txt"

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
for f in list.txt list-80.txt list-full.txt list.json show.txt show-80.txt show-full.txt show.json \
	show-sorted.txt show-color.txt messages.txt; do
	if [ "${ELIDECTL_GOLDEN_UPDATE:-0}" = 1 ]; then
		cp "$tmp/$f" "$golden/$f"
		echo "updated $f"
	elif diff -u "$golden/$f" "$tmp/$f"; then
		echo "ok: $f"
	else
		fail "$f differs from the golden file"
	fi
done

# What the golden files show, checked as properties too.
for f in list-80.txt show.txt show-80.txt; do
	w=$(wc -L <"$tmp/$f")
	[ "$w" -le 80 ] && echo "ok: $f is $w columns wide (<= 80)" || fail "$f is $w columns wide"
done
grep -q '…' "$tmp/show-80.txt" && grep -q '…' "$tmp/list-80.txt" && echo "ok: cells ellipsised at 80 columns" ||
	fail "no ellipsis at 80 columns"
grep -q '…' "$tmp/show-full.txt" "$tmp/list-full.txt" && fail "--full ellipsised a cell" || echo "ok: --full ellipsises nothing"
[ "$(wc -L <"$tmp/show-full.txt")" -gt 80 ] && echo "ok: --full goes past 80 columns" || fail "--full did not widen"
grep -q '\^\[\[' "$tmp/show-color.txt" && echo "ok: SYSTEMD_COLORS=1 colours states" || fail "no colours"
for how in "NO_COLOR=1 SYSTEMD_COLORS=1" "SYSTEMD_COLORS=1 --no-color"; do
	case $how in
	*--no-color) out=$(SYSTEMD_COLORS=1 ctl show "$sp" --no-color) ;;
	*) out=$(NO_COLOR=1 SYSTEMD_COLORS=1 ctl show "$sp") ;;
	esac
	[[ "$out" == *$'\033'* ]] && fail "colours with $how" || echo "ok: no colours with $how"
done
[[ "$(ctl show "$sp")" == *$'\033'* ]] && fail "colours off a terminal" || echo "ok: no colours off a terminal"
grep -q "(elided)" "$tmp/show.txt" "$tmp/show-full.txt" && fail "a lock is still \"off (elided)\"" ||
	echo "ok: no \"(elided)\" wording"

# The same lock turned off by a verdict of earlier runs (issue 16): the
# table says so, and JSON's decided_by names the source.
mkdir "$tmp/run-learned"
if "$mkseg" "$tmp/run-learned" "$sp" learned >/dev/null; then
	out=$("$elidectl" --runtime-dir "$tmp/run-learned" show "$sp")
	[[ "$out" == *"off (learned)"* ]] && echo "ok: a learned verdict reads \"off (learned)\"" ||
		fail "no \"off (learned)\" in: $out"
	by=$("$elidectl" --runtime-dir "$tmp/run-learned" show "$sp" --json=short |
		jq -r '.locks[] | select(.index == 4) | "\(.reason) \(.decided_by)"')
	[ "$by" = "learned learned" ] && echo "ok: JSON says reason and decided_by learned" ||
		fail "JSON reason and decided_by are '$by', want 'learned learned'"
else
	fail "make-segment ... learned"
fi

[ $failures -eq 0 ] || exit 1
echo "all golden checks passed"
