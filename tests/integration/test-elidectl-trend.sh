#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Per-lock history in elidectl, on a contended program
# (tests/integration/watch-measure: two threads on hot_lock, watched):
#   - top PID off a terminal prints one frame, from the segments: it names
#     hot_lock, has a rate (two samples an interval apart: a number, not
#     "-"), and takes -o and --no-legend;
#   - through elided on a private bus, top PID shows the lock too, and
#     show PID --history has the rates elided keeps: --json arrays of one
#     length (>= 2 once a few intervals passed), the plain form one line a
#     rate;
#   - --history without elided (--runtime-dir) and on other verbs is a
#     usage error (2), for a process elided does not know it is 3.
# Structure and counts only: nothing here depends on how fast it runs.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need jq dbus-daemon busctl
tl_setup elidectl-trend

measure="$top_builddir/tests/integration/watch-measure"
rundir="$tmp/run"
mkdir -m 1777 "$rundir"

# expect STATUS PATTERN CMD...: CMD exits STATUS, its stderr matches PATTERN.
expect() {
	local want=$1 pattern=$2 rc
	shift 2
	"$@" >"$tmp/expect.out" 2>"$tmp/expect.err" </dev/null
	rc=$?
	if [ $rc -ne "$want" ]; then
		fail "'$*' exited $rc, expected $want: $(cat "$tmp/expect.err")"
	elif [ -n "$pattern" ] && ! grep -q -e "$pattern" "$tmp/expect.err"; then
		fail "'$*': stderr lacks '$pattern': $(cat "$tmp/expect.err")"
	else
		ok "'$*' exits $want"
	fi
}

# mode=watch: watched (not elided) on any CPU, RTM or not.
ELIDE_RUNTIME_DIR="$rundir" ELIDE="mode=watch" LD_PRELOAD="$preload" "$measure" --threads 2 --hold-us 2 \
	--gap-us 1 --ms 1000 >"$tmp/measure.out" 2>"$tmp/measure.err" &
wpid=$!
pids+=("$wpid")
poll 30 grep -q '^done' "$tmp/measure.out" || { fail "watch-measure: no 'done' line: $(cat "$tmp/measure.err")"; tl_finish trend; }

# ---- top PID, one frame, from the segments ----------------------------------------
ctl() { "$elidectl" --runtime-dir "$rundir" "$@" </dev/null; }
if frame=$(ctl top "$wpid" 2>"$tmp/top.err"); then
	ok "top PID off a terminal exits 0"
else
	fail "top PID exited $?: $(cat "$tmp/top.err")"
fi
printf '%s\n' "$frame" >"$tmp/top.txt"
head -n 1 "$tmp/top.txt" | grep -qE '^LOCK +KIND +ACQUIRED/s .* TREND$' && ok "top PID: the header, TREND last" ||
	fail "top PID: header '$(head -n 1 "$tmp/top.txt")'"
# Watched: contention columns instead of the transactions'.
head -n 1 "$tmp/top.txt" | grep -q 'WAIT/s' && ! head -n 1 "$tmp/top.txt" | grep -q 'COMMITS/s' &&
	ok "top PID: a watched lock shows WAIT/s, not COMMITS/s" || fail "top PID: header '$(head -n 1 "$tmp/top.txt")'"
row=$(awk '$1 == "hot_lock"' "$tmp/top.txt")
[ -n "$row" ] && ok "top PID names hot_lock" || fail "top PID: no hot_lock in: $frame"
rate=$(awk '{ print $3 }' <<<"$row")
[[ "$rate" =~ ^[0-9] ]] && ok "top PID off a terminal: ACQUIRED/s is a rate ($rate)" ||
	fail "top PID: ACQUIRED/s is '$rate'"
[ "$(ctl top "$wpid" --no-legend -o LOCK,KIND | awk '$1 == "hot_lock" { print $2 }')" = mutex ] &&
	[ "$(ctl top "$wpid" --no-legend -o LOCK | grep -c LOCK)" -eq 0 ] &&
	ok "top PID: -o LOCK,KIND and --no-legend" || fail "top PID -o: $(ctl top "$wpid" --no-legend -o LOCK,KIND 2>&1)"
expect 2 "top PID has no column 'BOGUS'" "$elidectl" --runtime-dir "$rundir" top "$wpid" -o BOGUS
expect 2 "no JSON" "$elidectl" --runtime-dir "$rundir" top "$wpid" --json
expect 2 "invalid PID" "$elidectl" --runtime-dir "$rundir" top 12x
expect 3 "no libelide segment for pid $$" "$elidectl" --runtime-dir "$rundir" top $$

# ---- --history needs elided ------------------------------------------------------------
expect 2 "^elidectl: --history needs elided: it keeps the history" \
	"$elidectl" --runtime-dir "$rundir" show "$wpid" --history
expect 2 "applies to show only" "$elidectl" --runtime-dir "$rundir" list --history
expect 2 "no -o, --sort or --max" "$elidectl" show "$wpid" --history -o LOCK

# ---- through elided ----------------------------------------------------------------------
start_private_bus
start_elided 'daemon: { interval = 0.2; };'

# The lock's row, named or not yet: elided names it off its loop (a
# symbolizer child), in its own time; show's tests wait for that.
bus_top() { "$elidectl" top "$wpid" </dev/null | awk 'NR > 1 && $2 == "mutex" && $3 ~ /^[0-9]/' | grep -q .; }
poll 20 bus_top && ok "top PID through elided: the mutex's row, with a rate" ||
	fail "top PID through elided: $("$elidectl" top "$wpid" 2>&1 </dev/null) $(cat "$tmp/elided.log")"

# One point an interval: wait for two, whatever the interval takes.
two_points() { "$elidectl" show "$wpid" --history --json=short | jq -e '.time_ns | length >= 2'; }
if poll 30 two_points; then
	j=$("$elidectl" show "$wpid" --history --json=short)
	printf '%s\n' "$j" >"$tmp/history.json"
	n=$(jq '.time_ns | length' <<<"$j")
	ok "show --history --json: $n points"
	jq -e --argjson pid "$wpid" '.pid == $pid' <<<"$j" >/dev/null && ok "--history --json: the pid" ||
		fail "--history --json: pid $(jq .pid <<<"$j"), expected $wpid"
	jq -e '[.acquired_per_sec, .commits_per_sec, .aborts_per_sec, .cycles_lost_per_sec, .wait_per_sec] |
		all(type == "array" and length == ($n | tonumber) and all(.[]; type == "number" and . >= 0))' \
		--arg n "$n" <<<"$j" >/dev/null && ok "--history --json: five rate arrays of $n numbers" ||
		fail "--history --json: $j"
	jq -e '.time_ns as $t | [range(1; $t | length)] | all($t[.] > $t[. - 1])' <<<"$j" >/dev/null &&
		ok "--history --json: oldest first" || fail "--history --json: times not increasing: $(jq -c .time_ns <<<"$j")"
else
	fail "show --history --json: fewer than 2 points: $("$elidectl" show "$wpid" --history --json 2>&1) $(cat "$tmp/elided.log")"
fi

"$elidectl" show "$wpid" --history >"$tmp/history.txt" 2>&1 </dev/null
for rate in acquired/s commits/s aborts/s cycles-lost/s wait/s; do
	grep -qE "^$rate .* min [^ ]+ +max [^ ]+ +last [^ ]+$" "$tmp/history.txt" && ok "--history: a line for $rate" ||
		fail "--history: no line for $rate: $(cat "$tmp/history.txt")"
done
head -n 1 "$tmp/history.txt" | grep -q "^pid $wpid: [0-9]* intervals" && ok "--history: a header line" ||
	fail "--history: header '$(head -n 1 "$tmp/history.txt")'"
[ "$("$elidectl" show "$wpid" --history --no-legend </dev/null | wc -l)" -eq 5 ] &&
	ok "--history --no-legend: the five rate lines alone" ||
	fail "--history --no-legend: $("$elidectl" show "$wpid" --history --no-legend 2>&1)"
# A process that waits while elided follows it: its wait/s moves (elided
# reads the segment header's running total of waiting, not the entries).
# It waits for 20 s, longer than the polls below can take on a loaded
# machine, and is stopped once they are done.
ELIDE_RUNTIME_DIR="$rundir" ELIDE="mode=watch" LD_PRELOAD="$preload" "$measure" --threads 2 --hold-us 2 \
	--gap-us 1 --ms 20000 >"$tmp/busy.out" 2>"$tmp/busy.err" &
bpid=$!
pids+=("$bpid")
waited() { "$elidectl" show "$bpid" --history --json=short 2>/dev/null | jq -e '.wait_per_sec | any(. > 0)' >/dev/null; }
poll 30 waited && ok "--history: wait/s of a process whose threads wait is above 0" ||
	fail "--history of a waiting process: $("$elidectl" show "$bpid" --history --json=short 2>&1)"
# The process list's WAIT/s: elided's rate over its last interval (the
# header's total over the process's age without elided), above 0 while its
# threads wait.  Polled: on a loaded machine an interval can pass in which
# the threads did not run, or flushed no batch of waits, and reads 0.
# A share too small to print reads "<0.1%", never "0.0%".
share_re='^(<0[.]1|[0-9.]+)%$'
top_share() { "$elidectl" --runtime-dir "$rundir" top </dev/null | awk -v p="$bpid" '$1 == p { print $NF }'; }
share_nonzero() { w=$(top_share); [[ "$w" =~ $share_re ]] && [ "$w" != 0.0% ]; }
w=""
poll 30 share_nonzero && ok "top: WAIT/s of the waiting process from its segment: $w" ||
	fail "top: WAIT/s of the waiting process is '$w': $("$elidectl" --runtime-dir "$rundir" top 2>&1 </dev/null)"
kill -TERM "$bpid"
wait "$bpid"

expect 3 "" "$elidectl" show $$ --history
expect 2 "takes a PID" "$elidectl" show watch-measure --history

kill -TERM "$wpid"
wait "$wpid" || fail "watch-measure exited $? ($(cat "$tmp/measure.err"))"

tl_finish trend
