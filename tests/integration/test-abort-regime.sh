#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Contended workloads whose every transaction aborts, judged by libelide's
# counters and never by time (tests/integration/abort-regime.c says what is
# asserted and why): in adaptive mode a lock that cannot elide backs off and
# stays backed off (few attempts, most acquisitions skipped); in mode=on it
# never backs off: each failed acquisition makes one attempt and skips the
# thread's next 3 (as glibc's elision does); no update is lost.
#
# Without usable RTM, ELIDE_SIM_ABORT makes every transaction abort with
# one status per run:
#   0x6         conflict (+ retry hint): retried, then the fail streak backs off
#   0x8         capacity: backs off at once
#   0x0         no cause bit (syscall, interrupt): one retry, then backs off
#   0xfe000001  explicit abort, not "lock busy" (trylock inside): backs off at once
#   0xff000001  lock busy (XABORT 0xff): retried, never a reason to back off
#               by itself, but a probe that aborts busy is a failed probe (it
#               was once repeated at every acquisition, for ever)
# for a mutex, an rwlock's writers, and a 90-10 read/write mix, with 2 and 4
# threads, in adaptive mode; then mode=on twice (a conflict and the busy
# status): a throttled acquisition must neither retry nor wait, and skips
# the next 3; and a lock annotated never, in both modes: no attempt, every
# acquisition counted once; and the same for a lock that elided's hint table
# says never (a verdict learned from earlier runs, issue 16), whose entry
# then reads ctl_policy never, ctl_source learned.
#
# With usable RTM the simulation is ignored: the same workloads then run
# with a getppid() inside every section, which aborts every real
# transaction; and an rwlock held elided for writing is locked again by
# its holder, which glibc refuses with EDEADLK (only real RTM elides it).
# Neither possible (libelide not eliding here): exit 77.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
tl_setup abort-regime
prog="$top_builddir/tests/integration/abort-regime"
[ -x "$prog" ] || { echo "FAIL: $prog is not built (make check builds it)" >&2; exit 1; }
[ -f "$lib" ] || { echo "FAIL: $lib is not built" >&2; exit 1; }

# Iterations per thread: a fixed count.  A run takes well under a second.
iterations=${ABORT_REGIME_ITERATIONS:-200000}

# run ELIDE SIM ARGS...: the program under libelide in a runtime directory
# of its own; output in $tmp/out, exit status returned.
run() {
	local elide=$1 sim=$2 rundir rc
	shift 2
	rundir=$(mktemp -d "$tmp/run.XXXXXX") || exit 1
	env -u ELIDE_FAKE_NO_RTM -u ELIDE_SIM_ABORT -u GLIBC_TUNABLES ELIDE="$elide" \
		${sim:+ELIDE_SIM_ABORT=$sim} ELIDE_RUNTIME_DIR="$rundir" LD_PRELOAD="$preload" \
		"$prog" "$@" >"$tmp/out" 2>&1
	rc=$?
	rm -rf "$rundir"
	return $rc
}

# check WHAT ELIDE SIM ARGS...: one run, its counts shown, judged.
check() {
	local what=$1 rc
	shift
	run "$@"
	rc=$?
	sed 's/^/    /' "$tmp/out"
	if [ $rc = 0 ]; then
		ok "$what"
	else
		fail "$what: exit status $rc (ELIDE=$1${2:+ ELIDE_SIM_ABORT=$2} abort-regime ${*:3})"
	fi
}

# Which regime: with usable RTM libelide ignores ELIDE_SIM_ABORT.
run mode=adaptive 0x6 --regime
rc=$?
regime=$(tail -n1 "$tmp/out")
case $rc in
0) ;;
77) skip "libelide cannot elide here, not even simulated: $(cat "$tmp/out")" ;;
*) echo "FAIL: abort-regime --regime: exit status $rc: $(cat "$tmp/out")" >&2; exit 1 ;;
esac
if grep -qw rtm /proc/cpuinfo 2>/dev/null; then cpu_rtm=yes; else cpu_rtm=no; fi

locks="mutex rwlock-write rwlock-read-90-10"
case "$regime" in
simulated)
	[ $cpu_rtm = yes ] && note "the CPU lists rtm but libelide cannot use it: simulated aborts"
	for status in 0x6 0x8 0x0 0xfe000001 0xff000001; do
		for lock in $locks; do
			for threads in 2 4; do
				check "adaptive, every transaction aborts with $status: $lock, $threads threads" \
					mode=adaptive "$status" --lock "$lock" --threads "$threads" --iterations "$iterations"
			done
		done
	done
	check "mode=on, conflict aborts: mutex, one attempt, then 3 skipped" \
		mode=on 0x6 --lock mutex --threads 2 --iterations "$iterations"
	check "mode=on, busy aborts: rwlock-read-90-10, one attempt, then 3 skipped" \
		mode=on 0xff000001 --lock rwlock-read-90-10 --threads 4 --iterations "$iterations"
	for mode in adaptive on; do
		for lock in mutex rwlock-read-90-10; do
			check "mode=$mode, policy never: $lock, no attempt, every acquisition counted once" \
				mode=$mode 0x6 --policy never --lock "$lock" --threads 2 --iterations "$iterations"
			check "mode=$mode, learned never (hint): $lock, no attempt, entry reads learned" \
				mode=$mode 0x6 --hint never --lock "$lock" --threads 2 --iterations "$iterations"
		done
	done
	;;
rtm)
	[ $cpu_rtm = yes ] || { echo "FAIL: libelide reports usable RTM, /proc/cpuinfo has no rtm flag" >&2; exit 1; }
	note "real RTM: every section makes a system call, so every transaction aborts"
	for lock in $locks; do
		for threads in 2 4; do
			check "adaptive, real RTM, syscall in the section: $lock, $threads threads" \
				mode=adaptive "" --section syscall --lock "$lock" --threads "$threads" --iterations "$iterations"
		done
	done
	check "mode=on, real RTM, syscall in the section: mutex, one attempt, then 3 skipped" \
		mode=on "" --section syscall --lock mutex --threads 2 --iterations "$iterations"
	check "adaptive, real RTM: relocks of an rwlock held elided for writing: EDEADLK, as glibc" \
		mode=adaptive "" --relock
	check "adaptive, real RTM, learned never (hint): rwlock-read-90-10, no attempt, entry reads learned" \
		mode=adaptive "" --section syscall --hint never --lock rwlock-read-90-10 --threads 2 \
		--iterations "$iterations"
	;;
*)
	echo "FAIL: abort-regime --regime said '$regime'" >&2
	exit 1
	;;
esac

tl_finish abort-regime
