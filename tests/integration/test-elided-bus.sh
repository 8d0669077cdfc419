#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Issue 31 items 1-2, issue 32 item 1: elided on a bus like the system bus
# (its defaults plus the shipped policy) stays on it and answers everybody
# whatever one user does, and comes back when the bus daemon restarts:
#   - nobody floods Subscribe from 50 connections: root's calls meanwhile
#     are answered, elided is on the bus afterwards, each of the 50 got
#     its subscription (fair between one uid's connections), every
#     subscription went with its connection, a 65th subscription of one
#     uid is refused;
#   - nobody pipelines GetStatus on 50 connections: another user's (uid 1)
#     calls meanwhile are answered;
#   - the bus daemon is killed and started again on the same socket:
#     elided says so in its log, reconnects, takes its name, answers.
# Nothing here is timed as a pass/fail: latencies are printed as notes
# (bench/bus-flood.sh measures them).
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
flood="$top_builddir/tests/integration/bus-flood"
policy="${top_srcdir:-$(dirname "$0")/../..}/systemd/org.elide.elided1.conf"
need dbus-daemon busctl jq setpriv
[ "$(id -u)" -eq 0 ] || skip "needs root to flood as another, unprivileged user (nobody)"
id nobody >/dev/null 2>&1 || skip "no user nobody"
[ -x "$flood" ] || skip "bus-flood not built"
tl_setup elided-bus
nobody_uid=$(id -u nobody)
as_nobody=(setpriv --reuid="$nobody_uid" --regid="$(id -g nobody)" --clear-groups)
as_other=(setpriv --reuid=1 --regid=1 --clear-groups)
for_others flood "$flood"

start_system_like_bus "$policy"
rundir="$tmp/run"
mkdir -m 1777 "$rundir"
log="$tmp/elided.log"
printf 'daemon: { interval = 0.5; };\n' >"$tmp/elide.conf"
# Without the guid: the restarted bus daemon has another one.
DBUS_SYSTEM_BUS_ADDRESS="unix:path=$tmp/bus.socket" \
	"$elided" --verbose --config "$tmp/elide.conf" --runtime-dir "$rundir" --no-bpf >"$log" 2>&1 &
daemon=$!
poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { cat "$log" >&2; echo "FAIL: elided not on the bus" >&2; exit 1; }
ok "elided on a bus with the shipped policy"

on_bus() { "${B[@]}" get-property $NAME $OBJ $IFACE Version >/dev/null 2>&1; }
# answered FILE: every probe call had an answer, none an error.
answered() { ! grep -q '^error' "$1" && grep -q '^max ' "$1"; }

# ---- sequential calls ----------------------------------------------------------
if t_elided=$("$flood" seq 200 elided) && t_bus=$("$flood" seq 200 bus); then
	ok "200 sequential calls answered"
	note "200 sequential calls: elided ${t_elided} s, the bus daemon itself ${t_bus} s"
else
	fail "sequential calls failed"
fi

# ---- a Subscribe flood -------------------------------------------------------
"${as_nobody[@]}" "$flood" flood 50 6 Subscribe >"$tmp/sub-flood.out" 2>&1 &
fl=$!
pids+=("$fl")
sleep 1
"$flood" probe 20 200 >"$tmp/sub-probe.out" 2>&1
wait "$fl"
note "nobody's Subscribe flood: $(cat "$tmp/sub-flood.out")"
answered "$tmp/sub-probe.out" && ok "root's 20 calls during the Subscribe flood answered ($(tail -1 "$tmp/sub-probe.out") ms)" ||
	fail "root's calls during the Subscribe flood: $(grep -m3 error "$tmp/sub-probe.out")"
grep -q '^calls [0-9]* replies [1-9]' "$tmp/sub-flood.out" && ok "the flood was served" ||
	fail "the flood got no replies: $(cat "$tmp/sub-flood.out")"
on_bus && ok "elided on the bus after the Subscribe flood" || fail "elided left the bus after the Subscribe flood"
kill -0 "$daemon" 2>/dev/null && ok "elided running" || fail "elided died"
subscribed() { grep -c "D-Bus subscriber :[0-9.]* (uid $nobody_uid)$" "$log"; }
gone() { grep -c "D-Bus subscriber :[0-9.]* (uid $nobody_uid) disconnected" "$log"; }
poll 20 test "$(subscribed)" -eq "$(gone)" && [ "$(subscribed)" -ge 1 ] &&
	ok "all $(subscribed) subscriptions of the flood went with their connections" ||
	fail "subscriptions $(subscribed), gone $(gone)"
# A uid's connections are served in turn, and one with fewer calls waiting
# takes the place of the fullest's newest: none of the 50 is starved by
# the others' backlog (each keeps calling for the whole flood).
[ "$(subscribed)" -eq 50 ] && ok "every one of the 50 flooding connections got its subscription" ||
	fail "$(subscribed) of the 50 flooding connections got their subscription"

# ---- the per-uid subscription limit -------------------------------------------
# One Subscribe on each of 70 connections held open together, every answer
# awaited: what a loaded machine delays, it does not change.
"${as_nobody[@]}" "$flood" once 70 Subscribe >"$tmp/cap.out" 2>&1
grep -q 'first org.freedesktop.DBus.Error.LimitsExceeded (uid [0-9]* already has 64 subscriptions)' "$tmp/cap.out" &&
	ok "70 connections of one uid: subscriptions past 64 refused ($(cat "$tmp/cap.out"))" ||
	fail "no LimitsExceeded for 70 subscriptions: $(cat "$tmp/cap.out")"

# ---- a call flood --------------------------------------------------------------
"${as_nobody[@]}" "$flood" flood 50 6 GetStatus >"$tmp/call-flood.out" 2>&1 &
fl=$!
pids+=("$fl")
sleep 1
"${as_other[@]}" "$flood" probe 20 200 >"$tmp/call-probe.out" 2>&1
wait "$fl"
note "nobody's GetStatus flood: $(cat "$tmp/call-flood.out")"
answered "$tmp/call-probe.out" && ok "uid 1's 20 calls during the call flood answered ($(tail -1 "$tmp/call-probe.out") ms)" ||
	fail "uid 1's calls during the call flood: $(grep -m3 error "$tmp/call-probe.out")"
on_bus && ok "elided on the bus after the call flood" || fail "elided left the bus after the call flood"
"$flood" probe 5 0 >"$tmp/after.out" 2>&1 && answered "$tmp/after.out" && ok "root answered after the floods" ||
	fail "root after the floods: $(cat "$tmp/after.out")"

# ---- the bus daemon restarts -----------------------------------------------------
kill "$bus"
wait "$bus" 2>/dev/null
rm -f "$tmp/bus.socket" "$tmp/bus.address"
poll 10 grep -q "lost the connection to the system bus" "$log" && ok "logged: $(grep -m1 "lost the connection" "$log")" ||
	fail "no log line about the lost bus"
run_bus_daemon
poll 20 on_bus && ok "elided back on the restarted bus" || fail "elided not back on the restarted bus: $(tail -3 "$log")"
grep -q "back on the system bus as $NAME" "$log" && ok "logged: $(grep -m1 "back on the system bus" "$log")" ||
	fail "no log line about the reconnection"
"${as_other[@]}" "$flood" probe 3 0 >"$tmp/restart.out" 2>&1 && answered "$tmp/restart.out" &&
	ok "uid 1 answered on the restarted bus" || fail "uid 1 on the restarted bus: $(cat "$tmp/restart.out")"
kill -0 "$daemon" 2>/dev/null && ok "elided running" || fail "elided died"
kill "$daemon"
wait "$daemon"
rc=$?
daemon=
[ $rc -eq 0 ] && ok "SIGTERM: exit 0" || fail "exit status $rc after SIGTERM"

tl_finish "elided bus"
