#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Watch mode (issue 15): libelide watching a contended mutex reports its
# contention, waiting and hold times close to what the program measured
# itself, elidectl shows them (reading the segment, and through elided on a
# private bus), and the advisor judges the lock.
#
# tests/integration/watch-measure runs two threads on one static mutex
# (hot_lock) with sections of a known length, timing every wait and hold
# itself; it prints its sums and stays alive until SIGTERM, so the segment
# can be read.  Each thread takes the lock a fixed number of times
# (--count), however long that takes: the number of hold samples follows
# from the number of acquisitions (1 in watch_sample per thread), never
# from how fast a loaded machine ran the loop.  The comparisons are loose
# on purpose (a loaded machine moves both measurements, and libelide
# samples holds 1 in watch_sample): they catch a mechanism that is broken
# or off by a unit, not a few percent.  bench/RESULTS.md has the measured
# error.  Nothing here is timed: waits are bounded polls.
#
# On a CPU without RTM the first run needs no ELIDE at all: watching is the
# default there.  With RTM that run is skipped (it would elide), loudly.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need jq dbus-daemon busctl
tl_setup watch

measure="$top_builddir/tests/integration/watch-measure"
rundir="$tmp/run"
mkdir -m 1777 "$rundir"

# start NAME ELIDE ARGS...: runs watch-measure under libelide; sets $wpid;
# waits for its "done" line.
start() {
	local name=$1 elide=$2
	shift 2
	ELIDE_RUNTIME_DIR="$rundir" ELIDE="$elide" LD_PRELOAD="$preload" "$measure" "$@" \
		>"$tmp/$name.out" 2>"$tmp/$name.err" &
	wpid=$!
	pids+=("$wpid")
	poll 300 grep -q '^done' "$tmp/$name.out" || { fail "$name: no 'done' line: $(cat "$tmp/$name.err")"; return 1; }
}
finish() {
	kill -TERM "$wpid"
	wait "$wpid" || fail "$1: watch-measure exited $? ($(cat "$tmp/$1.err"))"
}
field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$tmp/$2.out"; }
# within LO HI A B: LO <= A/B <= HI
within() { awk -v lo="$1" -v hi="$2" -v a="$3" -v b="$4" 'BEGIN { exit !(b > 0 && a / b >= lo && a / b <= hi) }'; }

# Acquisitions per thread of each run: 16 samples per thread at the default
# watch_sample (1024).
count=16384
threads=2
# check_run NAME MODE HOLD_US: the JSON of `show` against the program's own sums.
check_run() {
	local name=$1 want_mode=$2 hold_us=$3 j acq wait hold hold_max
	j=$("$elidectl" --runtime-dir "$rundir" show "$wpid" --json) || { fail "$name: show failed"; return; }
	printf '%s\n' "$j" >"$tmp/$name.json"
	acq=$(field acquired "$name"); wait=$(field wait_ns "$name"); hold=$(field hold_ns "$name")
	hold_max=$(field hold_max_ns "$name")
	[ "$(jq -r .mode <<<"$j")" = "$want_mode" ] && ok "$name: mode $want_mode" ||
		fail "$name: mode $(jq -r .mode <<<"$j"), expected $want_mode"
	jq -e '.elision == "off" and (.reason | test("watching contended locks"))' <<<"$j" >/dev/null &&
		ok "$name: elision off, reason says it watches" || fail "$name: header $(jq -c '{elision, reason}' <<<"$j")"
	local l
	l=$(jq -c '.locks[] | select(.symbol == "hot_lock")' <<<"$j")
	if [ -z "$l" ]; then
		fail "$name: no lock named hot_lock in $(jq -c '[.locks[].name]' <<<"$j")"
		return
	fi
	ok "$name: hot_lock found by its symbol"
	jq -e '.state == "plain" and .reason == "watching" and .attempts == 0' <<<"$l" >/dev/null &&
		ok "$name: plain (watching), no transaction" || fail "$name: $(jq -c '{state, reason, attempts}' <<<"$l")"
	local c w hs hn mean pmean a
	c=$(jq .contended <<<"$l"); w=$(jq .wait_ns <<<"$l"); hs=$(jq .hold_samples <<<"$l")
	hn=$(jq .hold_ns <<<"$l"); a=$(jq .acquired <<<"$l")
	[ "$c" -gt 0 ] && [ "$c" -le "$acq" ] && ok "$name: $c contended acquisitions of $acq" ||
		fail "$name: contended $c, program acquired $acq"
	# libelide times the contended acquisitions from inside the call; the
	# program times every call from outside: a little more.  A thread's
	# last waits (since its last sample) may still be in its batch, and on
	# a loaded machine a few long waits (a preempted holder) can be most of
	# the total: the lower bound catches a wrong unit, not a few percent.
	within 0.1 1.2 "$w" "$wait" && ok "$name: wait $w ns, program measured $wait ns" ||
		fail "$name: wait $w ns, program measured $wait ns"
	# 1 in watch_sample acquisitions per thread is sampled; a sample whose
	# hold cannot be timed (the countdown ran out on a path that does not
	# time) is dropped, so half of them, and at least the 8 the advisor
	# needs (elidectl/advice.c, HOLD_SAMPLES_MIN).
	local want=$((threads * (count / 1024) / 2))
	[ "$hs" -ge "$want" ] && ok "$name: $hs holds sampled (at least $want for $acq acquisitions)" ||
		fail "$name: $hs holds sampled, at least $want expected for $acq acquisitions"
	mean=$((hn / (hs > 0 ? hs : 1))); pmean=$((hold / (acq > 0 ? acq : 1)))
	# Every section spins at least $hold_us: the sampled mean cannot be less.
	# It can be more (a section preempted on a loaded machine), up to the
	# longest section the program timed (libelide's window is a few calls
	# wider): the upper bound, from what the program saw, catches a wrong
	# unit, never a slow machine.
	within 0.9 1000000 "$mean" "$((hold_us * 1000))" && [ "$mean" -le $((2 * hold_max + 100000)) ] &&
		ok "$name: mean hold $mean ns for ${hold_us} us sections (program's mean $pmean ns, longest $hold_max ns)" ||
		fail "$name: mean hold $mean ns for ${hold_us} us sections (program's mean $pmean ns, longest $hold_max ns)"
	within 0.5 2 "$a" "$acq" && ok "$name: acquisitions estimated $a, program counted $acq" ||
		fail "$name: acquisitions estimated $a, program counted $acq"
}

# 1. No RTM: watching is the default.
if [ "$("$elidectl" hw --json 2>/dev/null | jq -r .rtm_usable)" = true ]; then
	note "SKIPPED PART: this CPU has RTM, so without ELIDE libelide elides: the default-watch run needs a CPU without RTM"
else
	start default "" --threads $threads --hold-us 30 --gap-us 5 --count $count &&
		check_run default adaptive 30
	# Sections of 30 us, well over the 20 us long mark: too long to elide.
	v=$("$elidectl" --runtime-dir "$rundir" candidates --json | jq -r --argjson pid "$wpid" \
		'.[] | select(.pid == $pid and .lock == "hot_lock") | .verdict')
	[ "$v" = too-long ] && ok "default: candidates says too-long for 30 us sections" ||
		fail "default: candidates verdict '$v' for 30 us sections"
	finish default
fi

# 2. mode=watch (any CPU), with short sections: a candidate.  The daemon
# path too: GetLocks carries the figures, elidectl shows them.
start short "mode=watch" --threads $threads --hold-us 2 --gap-us 1 --count $count && check_run short watch 2
t=$("$elidectl" --runtime-dir "$rundir" show "$wpid")
grep -q 'WAIT' <<<"$t" && grep -q 'HOLD' <<<"$t" && ok "short: the table shows WAIT and HOLD" ||
	fail "short: the table lacks WAIT/HOLD: $t"
v=$("$elidectl" --runtime-dir "$rundir" candidates --json | jq -r --argjson pid "$wpid" \
	'.[] | select(.pid == $pid and .lock == "hot_lock") | .verdict')
[ "$v" = candidate ] && ok "short: candidates says candidate for 2 us sections" ||
	fail "short: candidates verdict '$v' for 2 us sections"
"$elidectl" --runtime-dir "$rundir" candidates | grep -q 'hot_lock' && ok "short: candidates table names hot_lock" ||
	fail "short: candidates table: $("$elidectl" --runtime-dir "$rundir" candidates 2>&1)"

start_private_bus
start_elided 'daemon: { interval = 0.2; };'
# elided names the lock off its loop (a symbolizer child): wait for it.
# The process has stopped working: elided's figures are the segment's.
jd=$(jq -c '.locks[] | select(.symbol == "hot_lock") | {contended, wait_ns, hold_samples}' "$tmp/short.json")
bus_same() {
	jbus=$("$elidectl" show "$wpid" --json | jq -c '.locks[] | select(.name == "hot_lock") | {contended, wait_ns, hold_samples}')
	[ -n "$jbus" ] && [ "$jbus" = "$jd" ]
}
bus_candidate() { "$elidectl" candidates | grep -q hot_lock; }
if poll 120 bus_same; then
	ok "short: through elided the same figures: $jbus"
	poll 60 bus_candidate && ok "short: candidates through elided names hot_lock" ||
		fail "short: candidates through elided: $("$elidectl" candidates 2>&1)"
else
	fail "short: through elided '$jbus', from the segment $jd: $("$elidectl" show "$wpid" 2>&1) $(cat "$tmp/elided.log")"
fi
finish short

tl_finish watch
