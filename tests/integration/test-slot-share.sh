#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# One thread takes 160 backed-off locks in turn, more than its slots hold:
# each lock must still be probed about once per span (slot-share.c says
# why and what is counted).  Mutexes with own_mutex=0 (their count is the
# thread's, not the lock's), and rwlocks' write side with the defaults.
# Every transaction aborts: a capacity abort (ELIDE_SIM_ABORT=0x8) where
# RTM is missing, a system call in the section where it works.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
tl_setup slot-share
prog="$top_builddir/tests/integration/slot-share"
[ -x "$prog" ] || { echo "FAIL: $prog is not built (make check builds it)" >&2; exit 1; }

# check WHAT ELIDE ARGS...: one run in a runtime directory of its own.
check() {
	local what=$1 elide=$2 rundir rc
	shift 2
	rundir=$(mktemp -d "$tmp/run.XXXXXX") || exit 1
	env -u ELIDE_FAKE_NO_RTM -u GLIBC_TUNABLES ELIDE="$elide" ELIDE_SIM_ABORT=0x8 ELIDE_RUNTIME_DIR="$rundir" \
		LD_PRELOAD="$preload" "$prog" "$@" >"$tmp/out" 2>&1
	rc=$?
	rm -rf "$rundir"
	case $rc in
	0) ok "$what: $(tail -n 1 "$tmp/out")" ;;
	77) echo "SKIP: $(cat "$tmp/out")"; exit 77 ;;
	*) fail "$what: exit status $rc: $(head -n 20 "$tmp/out")" ;;
	esac
}

common=mode=adaptive,contention=1,skip_max=64
check "mutexes, each probed again" "$common,own_mutex=0" --kind mutex --locks 160 --rounds 3200
check "rwlocks (write side), each probed again" "$common" --kind rwlock-write --locks 160 --rounds 3200
tl_finish slot-share
