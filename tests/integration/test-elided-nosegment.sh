#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Processes with libelide but no segment (issue 13, "Deliver": status says
# what elided cannot see), with pidfd discovery (--no-bpf), as any user:
# the real elided on a private runtime directory and a private D-Bus bus.
#   - a workload whose runtime directory is missing and one whose runtime
#     directory it cannot write (as root: run as nobody; else a 0555
#     directory), both running before elided starts, are found by the
#     start-up sweep of /proc: listed by ListProcessesWithoutSegment,
#     counted by ProcessesWithoutSegment(Total), shown by elidectl status;
#   - a workload with its segment, and a fork child of a process without
#     a segment that never exec'd (libelide makes a fork child's segment
#     lazily), are not;
#   - killed, one is uncounted by the check of /proc every 5 intervals;
#   - the runtime directory removed: the process that had its segment there
#     counts now (elided cannot see it any more), also once a new directory
#     is back (its segment went with the old one).
# The BPF path (exec events, exits) is test-elided-bpf.sh's.  Waits are
# bounded polls, never fixed sleeps that decide the outcome.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need dbus-daemon busctl jq
tl_setup elided-nosegment
start_private_bus

rundir="$tmp/run"
mkdir -m 1777 "$rundir"
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.5; };
default: { mode = "adaptive"; };
EOF

noseg_list() { "${B[@]}" call $NAME $OBJ $IFACE ListProcessesWithoutSegment; }
noseg_row() { noseg_list | jq -c --argjson pid "$1" '.data[0][] | select(.[0] == $pid)'; }
noseg_listed() { [ -n "$(noseg_row "$1")" ]; }
# Not listed by an answer that lists (a failed call is not an absence).
noseg_not_listed() { local l; l=$(noseg_list) && ! jq -e --argjson pid "$1" '.data[0][] | select(.[0] == $pid)' <<<"$l" >/dev/null; }
listed() { "${B[@]}" call $NAME $OBJ $IFACE ListProcesses | jq -e --argjson pid "$1" '.data[0][] | select(.[0] == $pid)'; }

# ---- workloads, before elided ---------------------------------------------
# With its segment.
ELIDE_RUNTIME_DIR="$rundir" LD_PRELOAD="$preload" sleep 300 &
seen=$!
pids+=("$seen")
# Runtime directory missing; the shell forks a child that never execs (a
# subshell running a builtin loop), which must not count.
# The child blocks opening a FIFO nobody writes: no exec, no CPU.
mkfifo "$tmp/fifo"
ELIDE_RUNTIME_DIR="$tmp/missing" LD_PRELOAD="$preload" bash -c '
	( read -r _ <"$2" ) &
	echo $! >"$1"
	exec sleep 300' sh "$tmp/forkpid" "$tmp/fifo" 2>"$tmp/missing.err" &
missing=$!
pids+=("$missing")
poll 10 test -s "$tmp/forkpid" || fail "the fork child did not start"
fork_child=$(cat "$tmp/forkpid")
pids+=("$fork_child")
# Runtime directory not writable by the workload's user.
mkdir -m 0555 "$tmp/readonly"
if [ "$(id -u)" -eq 0 ]; then
	need setpriv
	for_others lib_for_nobody "$lib"
	nobody_preload="$lib_for_nobody"
	[ -n "$asan_first" ] && nobody_preload="$asan_first $lib_for_nobody"
	setpriv --reuid=65534 --regid=65534 --clear-groups env ELIDE_RUNTIME_DIR="$tmp/readonly" \
		LD_PRELOAD="$nobody_preload" sleep 300 2>"$tmp/readonly.err" &
else
	ELIDE_RUNTIME_DIR="$tmp/readonly" LD_PRELOAD="$preload" sleep 300 2>"$tmp/readonly.err" &
fi
readonly_pid=$!
pids+=("$readonly_pid")

# The libelide constructors have run once the processes are sleep (exec'd).
comm_is_sleep() { [ "$(cat "/proc/$1/comm" 2>/dev/null)" = sleep ]; }
poll 10 comm_is_sleep "$missing" && poll 10 comm_is_sleep "$readonly_pid" || fail "workloads did not start"

"$elided" --no-bpf --config "$tmp/elide.conf" --runtime-dir "$rundir" >"$tmp/elided.log" 2>&1 &
daemon=$!
poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { cat "$tmp/elided.log" >&2; echo "FAIL: elided did not come up on the bus" >&2; exit 1; }
[[ "$(prop DiscoveryMethod)" == "fallback (inotify + pidfd): BPF disabled by --no-bpf" ]] &&
	ok "discovery: $(prop DiscoveryMethod)" || fail "DiscoveryMethod: $(prop DiscoveryMethod)"
# A build without BPF says that first (configure --disable-bpf, nobpf profile).
if grep -q "^#define HAVE_BPF 1" "$top_builddir/config.h" 2>/dev/null; then
	want_observer="off (--no-bpf)"
else
	want_observer="unavailable: built without BPF"
fi
[[ "$(prop LockWaitObserver)" == "$want_observer" ]] && ok "observer: $(prop LockWaitObserver)" ||
	fail "LockWaitObserver: $(prop LockWaitObserver), want $want_observer"

# ---- found by the start-up sweep ------------------------------------------
poll 10 listed "$seen" && ok "pid $seen (with its segment) tracked" || fail "pid $seen not tracked"
# Other processes on this machine may run with libelide and segments
# elsewhere (other test runs): rows are checked by pid, counts as bounds.
for p in "$missing" "$readonly_pid"; do
	if poll 15 noseg_listed "$p"; then
		ok "pid $p listed without a segment: $(noseg_row "$p")"
	else
		fail "pid $p not in ListProcessesWithoutSegment: $(noseg_list 2>&1)"
	fi
done
grep -q "statistics off: cannot create a segment" "$tmp/missing.err" && ok "libelide said why: $(head -n1 "$tmp/missing.err")" ||
	note "libelide's stderr: $(cat "$tmp/missing.err")"
uid=$(noseg_row "$readonly_pid" | jq '.[1]')
want=$([ "$(id -u)" -eq 0 ] && echo 65534 || id -u)
[ "$uid" = "$want" ] && ok "pid $readonly_pid as uid $uid" || fail "uid of $readonly_pid: $uid, not $want"
noseg_not_listed "$seen" && ok "pid $seen (with its segment) not listed" || fail "pid $seen listed: $(noseg_row "$seen")"
# The fork child has had as long as the others.
noseg_not_listed "$fork_child" && ok "fork child $fork_child (never exec'd) not listed" ||
	fail "fork child $fork_child listed: $(noseg_row "$fork_child")"
n=$(prop ProcessesWithoutSegment)
total=$(prop ProcessesWithoutSegmentTotal)
[ "$n" -ge 2 ] && [ "$total" -ge "$n" ] && ok "ProcessesWithoutSegment $n, total $total" ||
	fail "ProcessesWithoutSegment $n, total $total"
"$elidectl" status >"$tmp/status" 2>&1
grep -Eq "No segment: [0-9]+ process(es)? with libelide but no segment" "$tmp/status" &&
	ok "elidectl status: $(grep "No segment:" "$tmp/status" | sed 's/^ *//')" || fail "elidectl status: $(cat "$tmp/status")"
"$elidectl" status --json | jq -e '.unseen.processes_without_segment >= 2' >/dev/null &&
	ok "elidectl status --json: unseen.processes_without_segment" || fail "status --json: $("$elidectl" status --json)"
grep -q "processes with libelide but no segment in $rundir" "$tmp/elided.log" &&
	ok "warned: $(grep -m1 "no segment in" "$tmp/elided.log")" || fail "no warning about processes without a segment"

# ---- gone ------------------------------------------------------------------
kill -KILL "$missing"
if poll 5 noseg_not_listed "$missing"; then ok "killed pid $missing uncounted"; else fail "killed pid $missing still listed"; fi

# ---- the runtime directory removed, then back -------------------------------
rm -rf "$rundir"
if poll 10 noseg_listed "$seen"; then ok "runtime directory removed: pid $seen counted without a segment"; else fail "pid $seen not counted after its runtime directory went: $(noseg_list 2>&1)"; fi
mkdir -m 1777 "$rundir"
poll 10 grep -q "runtime directory $rundir is back" "$tmp/elided.log" && ok "the new runtime directory adopted" ||
	fail "the new runtime directory not adopted"
# Give it the ticks a sweep and a grace period take, then it still counts.
poll 10 noseg_listed "$seen" && ok "...and pid $seen still counted (its segment went with the old directory)" ||
	fail "pid $seen not counted once the directory is back"

echo "---- elided log ----"
cat "$tmp/elided.log"
tl_finish elided-nosegment
