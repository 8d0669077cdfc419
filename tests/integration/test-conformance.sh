#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Conformance: tests/integration/conformance prints what every interposed
# pthread function returns, for every mutex type and rwlock kind, and checks
# each result against POSIX/glibc 2.36 itself.  It runs once without
# libelide (the reference transcript), then under libelide in every mode
# (watch mode too, sampled as usual and with every acquisition timed; and
# without RTM, watching by default or passing through with watch=0) and,
# on a CPU without RTM, with every simulated abort cause in adaptive and
# on mode (with RTM, the adaptive and on runs use real transactions).  Every
# transcript must equal the reference and every run must exit 0.
#
# The program has three parts, each run on its own: locks (all types, cold
# and contended), fd-reuse (a daemon that closes every fd >= 3) and
# max-locks (ELIDE=...,max_locks=16: a full lock table).  Its companion,
# tests/integration/conformance-edge, has the corners (issue 30), each a
# part of its own, run and compared the same way: rdtsc disabled, a seccomp
# filter that allows futex alone, the 2.2.5 condition variable, signal
# handlers that take locks, cancellation, glibc's own entry points beside
# the interposed ones, waits that expire, destroy and reuse, errno, fork.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
tl_setup conformance

for prog in conformance conformance-edge; do
	[ -x "$top_builddir/tests/integration/$prog" ] ||
		{ echo "FAIL: $top_builddir/tests/integration/$prog is not built (make check builds it)" >&2; exit 1; }
done
[ -f "$lib" ] || { echo "FAIL: $lib is not built" >&2; exit 1; }

# PROGRAM:PART, in the order they run.
parts="conformance:locks conformance:fd-reuse conformance:max-locks"
for part in tsc seccomp compat-cond signals cancel direct timed destroy errno fork; do
	parts="$parts conformance-edge:$part"
done
note "libelide runs: LD_PRELOAD=$preload"

# run NAME PRELOAD ELIDE FAKE SIM: every part, transcript in $tmp/NAME.out,
# stderr in $tmp/NAME.err; fails when a part exits non-zero.
run() {
	local name=$1 pre=$2 elide=$3 fake=$4 sim=$5 entry prog part rundir rc status=0
	local -a envs

	: >"$tmp/$name.out"
	: >"$tmp/$name.err"
	for entry in $parts; do
		prog="$top_builddir/tests/integration/${entry%%:*}"
		part=${entry#*:}
		# A runtime directory of its own for each run: segments are created.
		rundir=$(mktemp -d "$tmp/rundir.XXXXXX") || exit 1
		envs=(ELIDE_RUNTIME_DIR="$rundir")
		[ -n "$pre" ] && envs+=(LD_PRELOAD="$pre")
		if [ -n "$elide" ]; then
			if [ "$part" = max-locks ]; then
				envs+=(ELIDE="$elide,max_locks=16")
			else
				envs+=(ELIDE="$elide")
			fi
		fi
		[ -n "$fake" ] && envs+=(ELIDE_FAKE_NO_RTM="$fake")
		[ -n "$sim" ] && envs+=(ELIDE_SIM_ABORT="$sim")
		echo "== $entry" >>"$tmp/$name.out"
		# A lost futex wake would hang a part: a bound far above its run time.
		timeout --signal=KILL 120 env -u LD_PRELOAD -u ELIDE -u ELIDE_FAKE_NO_RTM -u ELIDE_SIM_ABORT \
			-u GLIBC_TUNABLES "${envs[@]}" "$prog" "$part" >>"$tmp/$name.out" 2>>"$tmp/$name.err"
		rc=$?
		rm -rf "$rundir"
		if [ $rc -ne 0 ]; then
			if [ $rc -gt 128 ]; then
				echo "== $entry: killed by signal $((rc - 128))" >>"$tmp/$name.err"
			else
				echo "== $entry: exit status $rc" >>"$tmp/$name.err"
			fi
			status=1
		fi
	done
	return $status
}

show_err() {
	sed -n '1,40p' "$tmp/$1.err" | sed 's/^/    /' >&2
}

echo "reference: without libelide"
if run reference "" "" "" ""; then
	ok "reference: $(grep -c '^[^=]' "$tmp/reference.out") results, all as POSIX/glibc 2.36 specify"
else
	fail "reference: without libelide the results differ from the expectations in conformance.c (another libc?):"
	show_err reference
fi

# name|ELIDE|ELIDE_FAKE_NO_RTM|ELIDE_SIM_ABORT
configs=(
	"adaptive|mode=adaptive||"
	"on|mode=on||"
	"off|mode=off||"
	"own-mutex-0|mode=adaptive,own_mutex=0||"
	"wait-spins-0|mode=adaptive,wait_spins=0||"
	"fake-no-rtm|mode=on|1|"
	"fake-no-rtm-adaptive|mode=adaptive|1|"
	"fake-no-rtm-watch-0|mode=adaptive,watch=0|1|"
	"watch|mode=watch||"
	"watch-every|mode=watch,watch_sample=1||"
)
if grep -qw rtm /proc/cpuinfo 2>/dev/null; then
	note "this CPU has RTM: adaptive and on use real transactions, no simulated aborts"
else
	# Every transaction "aborts" with this _xbegin() status: conflict+retry,
	# capacity, no cause bit, explicit abort with code 0xff (lock busy),
	# debug, nested.
	for cause in conflict-retry:0x6 capacity:0x8 no-cause:0x0 explicit-busy:0xff000001 debug:0x10 nested:0x20; do
		for mode in adaptive on; do
			configs+=("sim-${cause%%:*}-$mode|mode=$mode||${cause#*:}")
		done
	done
fi

matched=0
differed=0
for c in "${configs[@]}"; do
	IFS='|' read -r name elide fake sim <<<"$c"
	desc="ELIDE=$elide${fake:+ ELIDE_FAKE_NO_RTM=$fake}${sim:+ ELIDE_SIM_ABORT=$sim}"
	good=true
	if ! run "$name" "$preload" "$elide" "$fake" "$sim"; then
		fail "$name ($desc): the program failed under libelide:"
		show_err "$name"
		good=false
	fi
	if ! diff -u "$tmp/reference.out" "$tmp/$name.out" >"$tmp/$name.diff"; then
		fail "$name ($desc): results differ from the run without libelide (- without, + with):"
		grep '^[-+][^-+]' "$tmp/$name.diff" | sed -n '1,60p' | sed 's/^/    /' >&2
		good=false
	fi
	if $good; then
		ok "$name ($desc): same results as without libelide"
		matched=$((matched + 1))
	else
		differed=$((differed + 1))
	fi
done

echo "conformance summary: ${#configs[@]} libelide configurations: $matched same as glibc alone, $differed differ"
tl_finish conformance
