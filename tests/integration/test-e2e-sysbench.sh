#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# End to end with a real program from Debian: sysbench's mutex test (4
# threads, each locking random mutexes of a small pool) runs to completion
# under libelide in modes adaptive, on and off, and once without libelide.
# Each run must exit 0, report one event per thread and a positive total
# time, and (under libelide) end with libelide's report (ELIDE=report=1)
# naming the mode it ran in.  Without RTM, ELIDE_SIM_ABORT makes every
# transaction abort, so the abort and fallback paths run.  A few seconds.
set -u

: "${top_builddir:?run me through make check}"
lib="$top_builddir/libelide/.libs/libelide.so"

skip() { echo "SKIP: $*" >&2; exit 77; }
sysbench=$(command -v sysbench) || skip "sysbench is not installed (Debian: apt-get install sysbench)"
[ "${ELIDE_SANITIZERS:-no}" = yes ] && skip "sanitizer build: an ASan libelide.so cannot be preloaded into sysbench"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/elide-e2e-sb.XXXXXX") || exit 1
mkdir -m 1777 "$tmp/run"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

threads=4
args=(mutex "--threads=$threads" --mutex-num=64 --mutex-locks=20000 --mutex-loops=100 run)
sim=()
if ! grep -qw rtm /proc/cpuinfo; then
	sim=(ELIDE_SIM_ABORT=0x6)
	echo "note: this CPU has no RTM: every transaction aborts (ELIDE_SIM_ABORT=0x6)"
fi

# run NAME [VAR=VALUE...]: sysbench with that environment, 20 s at most.
run() {
	local name=$1 out=$tmp/$1.out rc events total
	shift
	env -u LD_PRELOAD -u ELIDE -u GLIBC_TUNABLES ELIDE_RUNTIME_DIR="$tmp/run" "$@" \
		timeout 20 "$sysbench" "${args[@]}" >"$out" 2>&1
	rc=$?
	events=$(sed -n 's/^ *total number of events: *\([0-9]*\).*/\1/p' "$out")
	total=$(sed -n 's/^ *total time: *\([0-9.]*\)s.*/\1/p' "$out")
	if [ $rc -ne 0 ]; then
		fail "$name: exit status $rc: $(tail -n5 "$out")"
		return 1
	fi
	if [ "$events" != "$threads" ] || ! awk -v t="${total:-0}" 'BEGIN { exit !(t > 0) }'; then
		fail "$name: events '${events:-none}', total time '${total:-none}': $(tail -n5 "$out")"
		return 1
	fi
	ok "$name: exit 0, $events events in ${total}s"
}

run plain
for mode in adaptive on off; do
	if run "libelide-$mode" LD_PRELOAD="$lib" ELIDE="mode=$mode,report=1" "${sim[@]}"; then
		line=$(grep -m1 '^libelide: elision: ' "$tmp/libelide-$mode.out")
		case "$line" in
		*"mode=$mode"*) ok "libelide-$mode: libelide's report says: ${line#libelide: }" ;;
		*) fail "libelide-$mode: no report naming mode=$mode: ${line:-$(grep '^libelide' "$tmp/libelide-$mode.out" | head -n3)}" ;;
		esac
	fi
done
left=$(ls -A "$tmp/run")
[ -z "$left" ] && ok "every run removed its segment" || fail "segments left behind: $left"

if [ $failures -gt 0 ]; then
	echo "$failures check(s) failed"
	exit 1
fi
echo "all sysbench checks passed"
