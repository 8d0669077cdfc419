#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# elided's BPF discovery (issue 13 item 7), as root, with the kernel's BTF
# and no tracefs needed: the real elided on a private runtime directory
# and a private D-Bus system bus, without --no-bpf:
#   - it says so at start-up (log) and in status (DiscoveryMethod, elidectl
#     status): "bpf (tp_btf ...)";
#   - workloads under libelide, started before and after it, are adopted;
#   - a SIGKILLed one, and a zombie whose parent reaps late, are untracked
#     within one interval, while elided holds no pidfd at all (the exit
#     events did it, not the pidfd fallback nor the periodic /proc check);
#   - a tracked process whose exit event was lost (elided stopped while
#     thousands of processes ran: the ring buffer full) is untracked within
#     one interval after elided resumes, and elided says events were lost;
#   - processes with libelide but no segment (status, issue 13 "Deliver"):
#     one whose runtime directory is missing, started before elided (found
#     by the start-up sweep), and one exec'd later as nobody whose runtime
#     directory it cannot write (found through its exec event: with BPF
#     there is no other sweep for a minute) are listed by
#     ListProcessesWithoutSegment, counted by ProcessesWithoutSegment,
#     shown by elidectl status (text and JSON) and warned about once; a
#     process with its segment is not; killed, they are uncounted.
# Skips (77, with the reason) when not root or when BPF does not load here.
# "Within one interval": the interval is 2 s and each such wait is a poll
# bounded at 2 s.  Other waits are bounded polls too, never fixed sleeps.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need dbus-daemon busctl jq setpriv
[ "$(id -u)" -eq 0 ] || skip "BPF discovery needs root (CAP_BPF and CAP_PERFMON); running as uid $(id -u)"
[ -r /sys/kernel/btf/vmlinux ] || skip "the kernel has no BTF (/sys/kernel/btf/vmlinux): BPF discovery cannot load"
tl_setup elided-bpf
start_private_bus

rundir="$tmp/run"
mkdir -m 1777 "$rundir"
interval=2
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = $interval.0; };
default: { mode = "adaptive"; };
EOF

listed() { "${B[@]}" call $NAME $OBJ $IFACE ListProcesses | jq -e --argjson pid "$1" '.data[0][] | select(.[0] == $pid)'; }
not_listed() { ! listed "$1"; }
noseg_list() { "${B[@]}" call $NAME $OBJ $IFACE ListProcessesWithoutSegment; }
noseg_row() { noseg_list | jq -c --argjson pid "$1" '.data[0][] | select(.[0] == $pid)'; }
noseg_listed() { [ -n "$(noseg_row "$1")" ]; }
# Not listed by an answer that lists (a failed call is not an absence).
noseg_not_listed() { local l; l=$(noseg_list) && ! jq -e --argjson pid "$1" '.data[0][] | select(.[0] == $pid)' <<<"$l" >/dev/null; }
pidfds() { pidfds_of "$daemon"; }
logged() { grep -q -- "$1" "$tmp/elided.log"; }

# A cheap process with libelide: sleep has no locks, but a segment.
start_sleeper() {
	ELIDE_RUNTIME_DIR="${2:-$rundir}" LD_PRELOAD="$preload" sleep 300 &
	pids+=("$!")
	printf -v "$1" %s "$!"
}

# Before elided: one tracked from its segment, one without (its runtime
# directory does not exist: libelide runs on, statistics private).
start_sleeper early
start_sleeper early_noseg "$tmp/missing"

"$elided" --config "$tmp/elide.conf" --runtime-dir "$rundir" >"$tmp/elided.log" 2>&1 &
daemon=$!
poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { cat "$tmp/elided.log" >&2; echo "FAIL: elided did not come up on the bus" >&2; exit 1; }

# ---- the method in use, and why -------------------------------------------
method=$(prop DiscoveryMethod)
case "$method" in
bpf*) ;;
*)
	cat "$tmp/elided.log" >&2
	skip "BPF discovery does not load here: $method" ;;
esac
[[ "$method" == "bpf (tp_btf "* ]] && ok "DiscoveryMethod: $method" || fail "DiscoveryMethod: $method"
logged "process discovery: bpf (tp_btf" && ok "start-up log: $(grep 'process discovery' "$tmp/elided.log")" ||
	fail "no start-up line about BPF discovery: $(cat "$tmp/elided.log")"
[ -d /sys/kernel/tracing/events ] || note "tracefs is not mounted: BTF tracepoints need none"
"$elidectl" status >"$tmp/status" 2>&1
grep -q "Discovery: bpf (tp_btf" "$tmp/status" && ok "elidectl status: $(grep Discovery: "$tmp/status" | sed 's/^ *//')" ||
	fail "elidectl status: $(cat "$tmp/status")"

# ---- adoption, before and after start-up ----------------------------------
poll 10 listed "$early" && ok "pid $early (started before elided) tracked" || fail "pid $early not tracked"
start_sleeper late
poll 10 listed "$late" && ok "pid $late (started after elided) tracked" || fail "pid $late not tracked"

# ---- exits: SIGKILL, and a zombie whose parent reaps late -----------------
[ "$(pidfds)" = 0 ] && ok "no pidfds held: exits come from BPF events" || fail "elided holds $(pidfds) pidfds with BPF discovery"
kill -KILL "$late"
if poll $interval not_listed "$late"; then ok "SIGKILLed pid $late untracked within one interval"; else fail "killed pid $late still tracked after ${interval} s"; fi

# The parent execs a sleep that never waits: the killed child stays a zombie.
sh -c 'ELIDE_RUNTIME_DIR="$1" LD_PRELOAD="$2" sleep 300 & echo $! >"$3"; exec sleep 120' sh "$rundir" "$preload" "$tmp/zpid" &
pids+=("$!")
poll 10 test -s "$tmp/zpid" || fail "the zombie's parent did not start"
z=$(cat "$tmp/zpid")
pids+=("$z")
poll 10 listed "$z" && ok "tracking pid $z (parent reaps late)" || fail "pid $z not tracked"
kill -KILL "$z"
zombie() { [ "$(awk '{print $3}' "/proc/$z/stat" 2>/dev/null)" = Z ]; }
poll 10 zombie && ok "pid $z is a zombie (not reaped)" || fail "pid $z is not a zombie: $(cat "/proc/$z/stat" 2>&1)"
if poll $interval not_listed "$z"; then ok "zombie untracked within one interval"; else fail "zombie $z still tracked after ${interval} s"; fi
zombie && ok "...while still unreaped" || note "the zombie was reaped meanwhile"
[ "$(pidfds)" = 0 ] && ok "still no pidfds held" || fail "elided holds $(pidfds) pidfds"

# ---- an exit event lost in a full ring buffer -----------------------------
# elided stopped, some 8,000 exec and exit events (the ring holds about
# 5,400), then a tracked process killed and reaped: its exit event finds no
# room.  Resumed, elided must see the loss and check every process against
# /proc at once (its periodic check would come 60 intervals later).
start_sleeper victim
poll 10 listed "$victim" && ok "tracking pid $victim" || fail "pid $victim not tracked"
kill -STOP "$daemon"
for ((i = 0; i < 4000; i++)); do /bin/true; done
kill -KILL "$victim"
wait "$victim" 2>/dev/null
kill -CONT "$daemon"
if poll $interval not_listed "$victim"; then
	ok "pid $victim, whose exit event was lost, untracked within one interval"
else
	fail "pid $victim still tracked after ${interval} s: $(grep -m1 'events lost' "$tmp/elided.log")"
fi
logged "process events lost (the BPF ring buffer was full)" && ok "said so: $(grep -m1 'events lost' "$tmp/elided.log")" ||
	fail "no notice of lost events"
listed "$early" && ok "pid $early (alive) still tracked" || fail "pid $early lost after the check"

# ---- processes with libelide but no segment -------------------------------
# Other processes on this machine may run with libelide and segments
# elsewhere (other test runs): they count too, so rows are checked by pid
# and counts as lower bounds.
poll 15 noseg_listed "$early_noseg" && ok "pid $early_noseg (missing runtime directory, started before elided) listed: $(noseg_row "$early_noseg")" ||
	fail "pid $early_noseg (no segment) not in ListProcessesWithoutSegment: $(noseg_list 2>&1)"

# As nobody, into a directory nobody cannot write; libelide from a copy
# nobody can reach (a clone under a 0700 directory hides the build tree).
for_others lib_for_nobody "$lib"
mkdir -m 0755 "$tmp/readonly"
nobody_preload="$lib_for_nobody"
[ -n "$asan_first" ] && nobody_preload="$asan_first $lib_for_nobody"
setpriv --reuid=65534 --regid=65534 --clear-groups env ELIDE_RUNTIME_DIR="$tmp/readonly" LD_PRELOAD="$nobody_preload" \
	sleep 300 2>"$tmp/nobody.err" &
late_noseg=$!
pids+=("$late_noseg")
if poll 10 noseg_listed "$late_noseg"; then
	row=$(noseg_row "$late_noseg")
	ok "pid $late_noseg (nobody, unwritable runtime directory, exec'd after start-up: found by its exec event) listed: $row"
	[ "$(jq '.[1]' <<<"$row")" = 65534 ] && ok "...as uid 65534" || fail "uid of $late_noseg: $row"
	[ "$(jq -r '.[3]' <<<"$row")" = sleep ] && ok "...comm sleep" || fail "comm of $late_noseg: $row"
else
	fail "pid $late_noseg (no segment) not listed: $(noseg_list 2>&1); its stderr: $(cat "$tmp/nobody.err")"
fi
grep -q "statistics off: cannot create a segment" "$tmp/nobody.err" && ok "libelide said why on its stderr: $(head -n1 "$tmp/nobody.err")" ||
	note "libelide's stderr: $(cat "$tmp/nobody.err")"
noseg_not_listed "$early" && ok "pid $early (with its segment) not listed" || fail "pid $early listed without segment"
n=$(prop ProcessesWithoutSegment)
total=$(prop ProcessesWithoutSegmentTotal)
[ "$n" -ge 2 ] && [ "$total" -ge "$n" ] && ok "ProcessesWithoutSegment $n, total $total" ||
	fail "ProcessesWithoutSegment $n, total $total"
"$elidectl" status >"$tmp/status" 2>&1
grep -Eq "No segment: [0-9]+ process(es)? with libelide but no segment" "$tmp/status" &&
	ok "elidectl status: $(grep "No segment:" "$tmp/status" | sed 's/^ *//')" || fail "elidectl status: $(cat "$tmp/status")"
"$elidectl" status --json | jq -e '.unseen.processes_without_segment >= 2 and .unseen.processes_without_segment_total >= 2' >/dev/null &&
	ok "elidectl status --json: unseen.processes_without_segment" || fail "status --json: $("$elidectl" status --json)"
logged "processes with libelide but no segment in $rundir" && ok "warned: $(grep -m1 "no segment in" "$tmp/elided.log")" ||
	fail "no warning about processes without a segment"
[ "$(grep -c "no segment in" "$tmp/elided.log")" = 1 ] && ok "warned once (rate-limited)" ||
	fail "warned $(grep -c "no segment in" "$tmp/elided.log") times"

kill -KILL "$early_noseg" "$late_noseg"
if poll $interval noseg_not_listed "$early_noseg" && poll $interval noseg_not_listed "$late_noseg"; then
	ok "killed: no longer counted"
else
	fail "killed processes still listed: $(noseg_list 2>&1)"
fi

echo "---- elided log ----"
cat "$tmp/elided.log"
tl_finish elided-bpf
