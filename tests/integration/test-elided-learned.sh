#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# elided remembers what it learned (issue 16), on a private runtime
# directory, state directory and D-Bus system bus:
#   - a program whose locks never commit (every transaction aborts: real
#     aborts where RTM works are not forced, so without RTM the test uses
#     ELIDE_SIM_ABORT, which libelide honours only there) runs; when it
#     exits elided learns "never elide" for its locks, under its uid;
#   - elided is restarted: it loads the store, the program runs again and
#     makes zero transaction attempts on those locks from its first
#     acquisition (libelide's exit report counts every abort), and
#     `elidectl show` says the decision was learned;
#   - another user (uid 65534) running the very same executable is given
#     nothing of root's entries, and its runs never change them;
#   - elidectl forget drops them: the next run tries again;
#   - a corrupted store is reported, moved aside and ignored: elided starts
#     with nothing learned; a kill -9 leaves the last saved store whole.
# Waits are bounded polls, never fixed sleeps.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need dbus-daemon busctl jq
tl_setup elided-learned
start_private_bus

rundir="$tmp/run"
state="$tmp/state"
mkdir -m 1777 "$rundir"
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.5; };
default: { mode = "adaptive"; };
EOF

start_daemon() {
	"$elided" --verbose --no-bpf --config "$tmp/elide.conf" --runtime-dir "$rundir" --state-dir "$state" \
		>>"$tmp/elided.log" 2>&1 &
	daemon=$!
	poll 60 "${B[@]}" get-property $NAME $OBJ $IFACE Version ||
		{ cat "$tmp/elided.log" >&2; echo "FAIL: elided did not come up on the bus" >&2; exit 1; }
}
stop_daemon() {
	kill -TERM "$daemon"
	wait "$daemon" 2>/dev/null
	daemon=
}
logged() { grep -q -- "$1" "$tmp/elided.log"; }

# One executable for every run, reachable by uid 65534 too: the program's
# identity (path, inode, mtime) is the same for both users.
prog="$workload"
lib_run="$lib"
as_nobody=()
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	for_others prog "$workload"
	for_others lib_run "$lib"
	as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi

# run_workload NAME [as-user-command...]: a run whose threads start (and
# its locks are first contended) only once elided lists it (go()), and which
# works until stop_run: its exit report (every lock's aborts by cause) goes
# to $tmp/NAME.report.  Sets $last.  Nothing is timed: how long a run lasts
# is decided by what elided has seen of it.
run_workload() {
	local name=$1
	shift
	ELIDE_RUNTIME_DIR="$rundir" ELIDE_SIM_ABORT=0x6 ELIDE=report=1 \
		LD_PRELOAD="${asan_first:+$asan_first }$lib_run" "$@" "$prog" --seconds 3600 --wait-start \
		>"$tmp/$name.out" 2>"$tmp/$name.report" &
	last=$!
	pids+=("$last")
}
# go: once elided lists $last (and so has handed it what it learned), start
# its threads.  Sets $seen.
go() {
	seen=no
	poll 120 grep -qx waiting "$tmp/$1.out" && poll 120 adopted "$last" && seen=yes
	kill -USR1 "$last"
}
# stop_run: ends $last normally (its report is written at exit); sets $rc.
stop_run() {
	kill -TERM "$last"
	wait "$last"; rc=$?
}
# elided's view of a process's cache_lock (JSON), and a figure of it at least N.
cache_lock_of() { "$elidectl" show "$1" --json 2>/dev/null | jq -c '.locks[] | select(.name == "cache_lock")'; }
at_least() { local n; n=$(cache_lock_of "$1" | jq -r ".$2" 2>/dev/null); [ -n "$n" ] && [ "$n" -ge "$3" ]; }
# Transactions a run's report says the lock tried: with every transaction
# aborting, the sum of its aborts by cause (columns 7-14).
attempts_of() {
	awk -v lock="$2" '$1 == "libelide:" && $2 == lock { s = 0; for (i = 7; i <= 14; i++) s += $i; print s; f = 1 }
		END { if (!f) print "none" }' "$tmp/$1.report"
}
# teaching_run NAME [as-user-command...]: a run that lasts until elided has
# seen its cache_lock try the transactions elided learns from
# (ELIDED_LEARN_MIN_ATTEMPTS, 64).  On a loaded machine this workload
# sometimes crawls, with or without libelide (its writers starve behind its
# readers): the run just lasts longer.  Sets $last, $rc, $a (its attempts,
# from its exit report) and $seen (yes when elided listed it while it ran).
teaching_run() {
	local name=$1
	shift
	run_workload "$name" "$@"
	go "$name"
	poll 300 at_least "$last" attempts 64 ||
		note "$name: elided saw fewer than 64 attempts of cache_lock: $(cache_lock_of "$last")"
	stop_run
	a=$(attempts_of "$name" cache_lock)
}
adopted() { "${B[@]}" call $NAME $OBJ $IFACE ListProcesses | jq -e --argjson pid "$1" '.data[0][] | select(.[0] == $pid)'; }
# Entry lines of the store file (elided/learned.c): "UID PROGRAM LOCK VERDICT RUNS FIRST ...".
store_entries_of() {
	if [ -f "$state/learned" ]; then awk -v u="$1" 'u == "" && /^[0-9]/ || $1 == u { n++ } END { print n + 0 }' "$state/learned"; else echo 0; fi
}
store_entries() { store_entries_of ""; }
store_has_entries() { [ "$(store_entries)" -gt 0 ]; }

start_daemon

# ---- 1. the first run teaches "never elide" ---------------------------------------
teaching_run first
first=$last
[ $seen = yes ] && ok "run 1 (pid $first) adopted" || fail "run 1 not adopted: $(tail -n 5 "$tmp/elided.log")"
[ $rc -eq 0 ] && ok "run 1 exited cleanly" || fail "run 1 exited with $rc: $(tail -n 3 "$tmp/first.report")"
[ "$a" != none ] && [ "$a" -gt 0 ] && ok "run 1: cache_lock tried $a transactions (nothing learned yet)" ||
	fail "run 1: cache_lock attempts: $a: $(cat "$tmp/first.report")"
poll 60 logged "pid $first (.*): learned lock data:.*: never elide" &&
	ok "elided learned 'never elide' when run 1 exited" ||
	fail "nothing learned from run 1: $(grep -i learn "$tmp/elided.log" | tail -n 5)"

# ---- 2. restart: the store is saved, loaded, and given to the next run -------------
stop_daemon
[ -f "$state/learned" ] && ok "the store was saved at shutdown: $(store_entries) entries" ||
	fail "no store in $state: $(ls -la "$state" 2>&1)"
[ "$(stat -c %a "$state/learned" 2>/dev/null)" = 600 ] && ok "the store is mode 0600" ||
	fail "store mode $(stat -c %a "$state/learned" 2>/dev/null)"
grep -q "^$(id -u) .* never " "$state/learned" && ok "its entries are keyed by uid $(id -u)" ||
	fail "no never entry of uid $(id -u): $(head -n 5 "$state/learned")"
start_daemon
poll 60 logged "learned policy: [1-9][0-9]* entries from $state/learned" && ok "restarted elided loaded the store" ||
	fail "store not loaded: $(grep -i learn "$tmp/elided.log" | tail -n 3)"

run_workload second
second=$last
go second
[ $seen = yes ] && ok "run 2 (pid $second) adopted" || fail "run 2 not adopted"
# Both views are taken while run 2 is certainly alive (it works until
# stopped): its lock shows up once first contended and named.
show_json= show_text=
shown() {
	show_json=$("$elidectl" show "$second" --json 2>/dev/null) &&
		echo "$show_json" | jq -e '.. | objects | select(.name? == "cache_lock")' >/dev/null 2>&1 &&
		show_text=$("$elidectl" show "$second" 2>&1)
}
poll 120 shown
echo "$show_json" | jq -e '.. | objects | select(.name? == "cache_lock") | select(.decided_by == "learned")' >/dev/null &&
	ok "elidectl show: cache_lock decided_by learned" ||
	fail "elidectl show --json of run 2: $(echo "$show_json" | jq -c '.. | objects | select(.name? == "cache_lock")' 2>/dev/null | head -c 600)"
echo "$show_text" | grep "cache_lock" | grep -q "learned" &&
	ok "elidectl show says why: $(echo "$show_text" | grep cache_lock | tr -s ' ' | head -c 160)" ||
	fail "elidectl show of run 2: $(echo "$show_text" | head -n 12)"
# The whole run: until elided has seen cache_lock taken a good many times.
poll 300 at_least "$second" acquired 1000 || note "run 2: elided saw cache_lock taken fewer than 1000 times"
stop_run
a=$(attempts_of second cache_lock)
[ "$a" = 0 ] && ok "run 2: cache_lock made zero transaction attempts in the whole run" ||
	fail "run 2: cache_lock attempts: $a: $(cat "$tmp/second.report")"
grep -q "cache_lock .*off (learned)" "$tmp/second.report" && ok "run 2's report: off (learned)" ||
	note "run 2 report line: $(grep cache_lock "$tmp/second.report")"

# ---- 3. another user: nothing of root's, and root's entries unchanged ------------
if [ ${#as_nobody[@]} -gt 0 ]; then
	# Root's entries as elided holds them once done with run 2, whose exit
	# may still teach (a lock run 1 tried too little): a restart writes
	# them to disk.  Read before that, they were short by such an entry
	# on a loaded machine.
	poll 60 logged "pid $second exited" || note "elided logged no exit of run 2 (pid $second)"
	stop_daemon
	start_daemon
	root_entries=$(store_entries_of 0)
	cp "$state/learned" "$tmp/learned.before"
	teaching_run nobody "${as_nobody[@]}"
	nb=$last
	[ $seen = yes ] && ok "uid 65534's run (pid $nb) adopted" || fail "uid 65534's run not adopted"
	[ "$a" != none ] && [ "$a" -gt 0 ] &&
		ok "uid 65534 running the same executable got none of root's verdicts ($a attempts)" ||
		fail "uid 65534's run: cache_lock attempts $a: $(cat "$tmp/nobody.report")"
	poll 60 logged "pid $nb (.*): learned lock" && ok "its run taught entries of its own" || fail "nothing learned from uid 65534's run"
	stop_daemon
	[ "$(store_entries_of 0)" = "$root_entries" ] && [ "$(store_entries_of 65534)" -gt 0 ] &&
		ok "the store: root's $root_entries entries as before, uid 65534's $(store_entries_of 65534) apart" ||
		fail "store after uid 65534's run: $(grep '^[0-9]' "$state/learned" | cut -c1-120)"
	diff <(grep "^0 " "$tmp/learned.before" | cut -d' ' -f1-6) <(grep "^0 " "$state/learned" | cut -d' ' -f1-6) \
		>/dev/null && ok "root's entries unchanged by uid 65534's run" || fail "root's entries changed"
	start_daemon
else
	note "not root (or no setpriv): the cross-user part needs uid 65534"
fi

# ---- 4. elidectl forget ------------------------------------------------------------
if "$elidectl" forget "$prog" >"$tmp/forget.out" 2>&1; then
	grep -q "forgot [1-9]" "$tmp/forget.out" && ok "elidectl forget $prog: $(cat "$tmp/forget.out")" ||
		fail "elidectl forget said: $(cat "$tmp/forget.out")"
	[ "$(store_entries_of "$(id -u)")" = 0 ] && ok "the store on disk lost them at once" ||
		fail "store after forget: $(grep "^$(id -u) " "$state/learned" | head -n 3)"
	teaching_run third
	third=$last
	[ "$a" != none ] && [ "$a" -gt 0 ] && ok "after forget the next run tries again ($a attempts)" ||
		fail "run 3 after forget: cache_lock attempts $a"
else
	fail "elidectl forget $prog failed: $(cat "$tmp/forget.out")"
fi

# ---- 5. crash and corruption -------------------------------------------------------
poll 60 store_has_entries && ok "run 3 was learned and saved" ||
	fail "store empty after run 3: $(grep -i -e learn -e save "$tmp/elided.log" | tail -n 5)"
cp "$state/learned" "$tmp/learned.saved"
kill -KILL "$daemon"
wait "$daemon" 2>/dev/null
daemon=
cmp -s "$state/learned" "$tmp/learned.saved" && ok "kill -9: the saved store is whole" || fail "kill -9 changed the store"
[ -z "$(ls -A "$state" | grep -v -e '^learned$')" ] && ok "kill -9: no temporary file left" ||
	note "state directory after kill -9: $(ls -A "$state")"
printf 'elide-learned 1\n0 garbage\nend 1\n' > "$state/learned"
start_daemon
poll 60 logged "learned:2: .*ignored and moved to learned.damaged" &&
	ok "a corrupted store is reported with file:line and moved aside" ||
	fail "corrupted store: $(grep -i learn "$tmp/elided.log" | tail -n 3)"
[ -f "$state/learned.damaged" ] && ok "learned.damaged kept for inspection" || fail "no learned.damaged"
kill -0 "$daemon" 2>/dev/null && ok "elided runs on with nothing learned" || fail "elided died on a corrupted store"
teaching_run fourth
[ "$a" != none ] && [ "$a" -gt 0 ] && ok "with the store ignored the program tries again ($a attempts)" ||
	fail "run 4: cache_lock attempts $a (exit $rc, listed: $seen; its report: $(grep '^libelide: ' "$tmp/fourth.report" | tail -n 8))"
stop_daemon

tl_finish "learned-policy"
