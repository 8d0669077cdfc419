#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A process's mode "off" is the administrator's kill switch (issue 32,
# item 7; elide.conf(5), libelide(7)): libelide forwards every call to
# glibc, and a lock rule "on" of the same program rule does not override
# it.  What elided and elidectl say must be what libelide does:
#   - the lock shows "plain (process off)", decided by nobody, through
#     elided and read from the segment;
#   - elided writes no lock decision into the segment and logs no
#     "lock ... on" event for it;
#   - libelide makes no transaction attempt on it from then on;
#   - once the process runs another mode (a runtime override), the lock
#     rule applies (decided_by config, an event), and goes again with off.
# Waits are bounded polls.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need dbus-daemon busctl jq
tl_setup elided-process-off
start_private_bus

rundir="$tmp/run"
mkdir -m 1777 "$rundir"
cp "$workload" "$tmp/wl-killswitch"

# The workload first, without elided: its locks get their records (they are
# contended at once) while it runs its own adaptive mode.
ELIDE_RUNTIME_DIR="$rundir" ELIDE_SIM_ABORT=0x6 LD_PRELOAD="$preload" "$tmp/wl-killswitch" --seconds 3600 \
	>"$tmp/wl.out" 2>"$tmp/wl.err" &
wl=$!
pids+=("$wl")
direct() { "$elidectl" --runtime-dir "$rundir" show "$wl" --json 2>/dev/null; }
lock_direct() { direct | jq -c '.locks[] | select(.name == "cache_lock")'; }
has_lock() { [ -n "$(lock_direct)" ]; }
poll 120 has_lock && ok "cache_lock has its record before elided starts" ||
	fail "no cache_lock in the segment: $(direct | jq -c '[.locks[].name]')"

start_elided "daemon: { interval = 0.2; };
program = ( { comm = \"wl-killswitch\"; mode = \"off\"; lock = ( { name = \"cache_lock\"; mode = \"on\"; } ); } );"
poll 60 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { echo "FAIL: elided did not come up: $(cat "$tmp/elided.log")" >&2; exit 1; }

lock_bus() { "$elidectl" show "$wl" --json 2>/dev/null | jq -c '.locks[] | select(.name == "cache_lock")'; }
is_off() {
	[ "$(direct | jq -r '.mode')" = off ] || return 1
	[ "$("$elidectl" show "$wl" --json 2>/dev/null | jq -r '.mode')" = off ]
}
poll 120 is_off && ok "the process runs mode off (the rule's)" || fail "mode: $(direct | jq -c '{mode, reason}')"

# What each source says of cache_lock, once elided has had a pass over it
# with the process off.
plain_off() { jq -e '.state == "plain" and .reason == "process off" and .decided_by == null' <<<"$1" >/dev/null; }
bus_plain() { l=$(lock_bus) && plain_off "$l"; }
direct_plain() { l=$(lock_direct) && plain_off "$l"; }
poll 60 bus_plain && ok "through elided: cache_lock plain (process off), decided by nobody: $l" ||
	fail "through elided: $(lock_bus)"
poll 60 direct_plain && ok "in the segment: cache_lock plain (process off), no lock decision written: $l" ||
	fail "in the segment: $(lock_direct)"
"$elidectl" show "$wl" | grep cache_lock | grep -q "process off" &&
	ok "elidectl show: $("$elidectl" show "$wl" | grep cache_lock | tr -s ' ')" ||
	fail "elidectl show: $("$elidectl" show "$wl" 2>&1 | grep cache_lock)"
! grep -q "pid $wl (.*): lock cache_lock on" "$tmp/elided.log" && ok "no event claims cache_lock on" ||
	fail "elided claims the lock is on: $(grep "lock cache_lock" "$tmp/elided.log")"

# libelide elides nothing (and, forwarding every call, counts nothing
# either): the lock's attempts stay where they were over ten of elided's
# intervals while the process runs on.
history_points() { "${B[@]}" call $NAME $OBJ $IFACE GetHistory u "$wl" 2>/dev/null | jq '.data[0] | length'; }
a0=$(lock_direct | jq .attempts); h0=$(history_points)
later() { [ "$(history_points)" -ge $((h0 + 10 < 60 ? h0 + 10 : 60)) ]; }
poll 120 later && kill -0 "$wl" && a1=$(lock_direct | jq .attempts) && [ "$a1" = "$a0" ] &&
	ok "no transaction attempt while off ($a0 before and after $(($(history_points) - h0)) intervals)" ||
	fail "attempts $a0 -> $(lock_direct | jq .attempts) (history $h0 -> $(history_points))"

# Another mode for the process: the lock rule is back, and says so.
"$elidectl" set "$wl" adaptive >/dev/null 2>&1 || fail "elidectl set $wl adaptive: $("$elidectl" set "$wl" adaptive 2>&1)"
# (The bus carries only overrides as decided_by: the segment says config.)
rule_on() {
	l=$(lock_direct) && jq -e '.decided_by == "config" and .reason == "config"' <<<"$l" >/dev/null &&
		lock_bus | jq -e '.reason != "process off"' >/dev/null
}
poll 60 rule_on && ok "process adaptive: the lock rule decides cache_lock again: $(jq -c '{state, reason, decided_by}' <<<"$l")" ||
	fail "process adaptive: $(lock_bus) / $(lock_direct)"
poll 30 grep -q "pid $wl (.*): lock cache_lock on (config" "$tmp/elided.log" && ok "and an event says so" ||
	fail "no event for the rule: $(grep "lock cache_lock" "$tmp/elided.log")"
"$elidectl" reset "$wl" >/dev/null 2>&1 || fail "elidectl reset $wl: $("$elidectl" reset "$wl" 2>&1)"
poll 60 direct_plain && ok "off again (reset to the rule's mode): the decision is taken back" ||
	fail "after reset: $(lock_direct)"
poll 30 grep -q "pid $wl (.*): lock cache_lock back to the process's mode (config: its process is off" "$tmp/elided.log" &&
	ok "the event says why: $(grep "lock cache_lock back" "$tmp/elided.log" | tail -n 1)" ||
	fail "no event for the taking back: $(grep "lock cache_lock" "$tmp/elided.log")"

kill -TERM "$wl"
wait "$wl" && ok "the workload exited cleanly" || fail "the workload exited $?: $(cat "$tmp/wl.err")"
tl_finish elided-process-off
