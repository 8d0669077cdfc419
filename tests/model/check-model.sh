#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Model-checks libelide's own-lock protocols (libelide/model/*.pml, see its
# README) with spin:
#
#   safety    assertions (mutual exclusion) and invalid end states (deadlock,
#             a thread left asleep on a futex: a lost wake-up);
#   liveness  the ltl claim `wakes` (every futex sleeper is woken) under
#             weak fairness;
#
# and each seeded mutation (spin -DMUTATION_...) must make its check fail
# with the expected error, so the checks are shown to catch those bugs.
# The models do not depend on the build: the sanitizer build skips them.
#
# Run by make check (TESTS) and make check-model, or directly.  Exit 77
# (automake SKIP) when spin or a C compiler is missing.
set -u

srcdir="${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}"
model="$srcdir/libelide/model"
cc=${CC:-cc}

skip() { echo "SKIP: $*" >&2; exit 77; }

command -v spin >/dev/null || skip "spin not installed (apt-get install spin): the lock models are not checked"
command -v "${cc%% *}" >/dev/null || skip "no C compiler ($cc) to build spin's verifier"
[ "${ELIDE_SANITIZERS:-no}" = yes ] && skip "the models do not depend on the build: checked by the plain build"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-model.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# check NAME MODEL MODE EXPECT [SPIN_OPTION...]
# MODE is safety or liveness.  EXPECT is "pass", or the error a mutation
# must make pan report ("invalid end state", "assertion violated",
# "acceptance cycle").
check() {
	local name=$1 pml=$2 mode=$3 expect=$4
	shift 4
	local dir="$tmp/$name" cflags opts states secs
	mkdir "$dir" && cp "$model/$pml" "$dir/" || exit 1
	case $mode in
	safety) cflags="-DSAFETY -DNOCLAIM" opts="" ;;
	liveness) cflags="-DNFAIR=3" opts="-a -f" ;;
	esac
	if ! (cd "$dir" && spin "$@" -a "$pml" >spin.log 2>&1); then
		fail "$name: spin -a $* $pml"
		cat "$dir/spin.log" >&2
		return
	fi
	# COLLAPSE: the rwlock's 15M states in about 1 GB; MEMLIM (MB) stops
	# pan cleanly rather than the machine.  A mutation fails within a few
	# thousand states: -O0 compiles faster than the search it saves.
	if [ "$expect" = pass ]; then
		cflags="$cflags -O2 -DCOLLAPSE"
	else
		cflags="$cflags -O0"
	fi
	# shellcheck disable=SC2086 # $cc and the flags are lists of words
	if ! (cd "$dir" && $cc -w $cflags -DMEMLIM=3072 -o pan pan.c >cc.log 2>&1); then
		fail "$name: compiling pan.c"
		cat "$dir/cc.log" >&2
		return
	fi
	# shellcheck disable=SC2086
	(cd "$dir" && ./pan $opts -m200000 >pan.log 2>&1)
	states=$(awk '/states, stored/ { print $1; exit }' "$dir/pan.log")
	secs=$(awk '/^pan: elapsed time/ { print $4; exit }' "$dir/pan.log")
	if grep -q -e "max search depth too small" -e "out of memory" "$dir/pan.log"; then
		fail "$name: the search was cut short"
		tail -n 30 "$dir/pan.log" >&2
	elif [ "$expect" = pass ]; then
		if grep -q "errors: 0$" "$dir/pan.log"; then
			echo "PASS: $name ($mode: ${states:-?} states, ${secs:-?} s)"
		else
			fail "$name ($mode)"
			cat "$dir/pan.log" >&2
			(cd "$dir" && spin "$@" -t -p -g "$pml" 2>&1 | tail -n 60) >&2
		fi
	elif grep -q "^pan:1: $expect" "$dir/pan.log"; then
		echo "PASS: $name fails as it must ($mode: $expect after ${states:-?} states)"
	else
		fail "$name: the seeded bug went unnoticed (wanted \"$expect\")"
		cat "$dir/pan.log" >&2
	fi
}

start=$SECONDS
check own-mutex-safety own-mutex.pml safety pass
check own-mutex-liveness own-mutex.pml liveness pass
check own-rwlock-safety own-rwlock.pml safety pass
check own-rwlock-liveness own-rwlock.pml liveness pass

# The seeded bugs: a lost wake-up, a broken compare-and-swap, a skipped
# hand-over, a reader let into a write phase (by its fetch-add, or after
# leaving it), a reader starting a read phase that wakes nobody, a reader
# handed the read phase that sleeps for it unseen by the writer.
check mutation-no-wake own-mutex.pml safety "invalid end state" -DMUTATION_NO_WAKE
check mutation-no-wake-ltl own-mutex.pml liveness "acceptance cycle" -DMUTATION_NO_WAKE
check mutation-plain-take own-mutex.pml safety "assertion violated" -DMUTATION_PLAIN_TAKE
check mutation-no-handover own-rwlock.pml safety "invalid end state" -DMUTATION_NO_HANDOVER
check mutation-no-handover-ltl own-rwlock.pml liveness "acceptance cycle" -DMUTATION_NO_HANDOVER
check mutation-take-wrphase own-rwlock.pml safety "assertion violated" -DMUTATION_TAKE_WRPHASE
check mutation-late-hold own-rwlock.pml safety "assertion violated" -DMUTATION_LATE_HOLD
check mutation-late-no-wake own-rwlock.pml safety "invalid end state" -DMUTATION_LATE_NO_WAKE
check mutation-late-unmarked own-rwlock.pml safety "invalid end state" -DMUTATION_LATE_UNMARKED

echo "check-model: $((SECONDS - start)) s, $failures failed"
[ "$failures" -eq 0 ]
