#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# preload.sh - LOG_COMPILER of every test without a file extension.
#
# Runs the test program "$@" under LD_PRELOAD=libelide.so once per
# configuration below and fails when any run fails.  Exit status: 0 when
# every run passed or skipped (at least one passed), 77 when every run
# skipped, 1 otherwise.
#
# automake applies one LOG_COMPILER to all extension-less tests, so the
# Check unit suites (tests/unit/*) come through here too: they test modules
# linked in directly and are exec'd unchanged, without any preload.
#
# Environment (from AM_TESTS_ENVIRONMENT): top_builddir, ELIDE_SANITIZERS
# (yes: preload the ASan runtime first, as libelide is built with it), CC.

case "$1" in
*tests/unit/*)
	exec "$@"
	;;
esac

if [ -z "${top_builddir:-}" ]; then
	echo "preload.sh: top_builddir is not set (run me through make check)" >&2
	exit 1
fi

lib="$top_builddir/libelide/.libs/libelide.so"
if [ ! -f "$lib" ]; then
	echo "preload.sh: $lib not found: build libelide first" >&2
	exit 1
fi

preload="$lib"
if [ "${ELIDE_SANITIZERS:-no}" = yes ]; then
	# ASan must be the first object loaded; libelide is built with it too.
	asan=$(${CC:-cc} -print-file-name=libasan.so)
	case "$asan" in
	/*) ;;
	*)
		echo "preload.sh: cannot locate libasan.so with '${CC:-cc}'" >&2
		exit 1
		;;
	esac
	preload="$asan $lib"
	# libelide is the program's lock layer and keeps its records to the end.
	ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
	export ASAN_OPTIONS
fi

passed=0
skipped=0
failed=0

# Without RTM the elision paths would never run here: the sim-* configurations
# make libelide believe every transaction aborts with a given status
# (ELIDE_SIM_ABORT, ignored where RTM works), so contention gating, abort
# classification, retries, back-off and fallback run for real.
configs="adaptive on off fake-no-rtm"
if ! grep -qw rtm /proc/cpuinfo 2>/dev/null; then
	configs="$configs sim-conflict sim-capacity"
fi

for config in $configs; do
	sim=
	case "$config" in
	adaptive)	elide=mode=adaptive fake= ;;
	on)		elide=mode=on fake= ;;
	off)		elide=mode=off,wait_spins=0 fake= ;; # and glibc's own wait
	fake-no-rtm)	elide=mode=on fake=1 ;;
	sim-conflict)	elide=mode=adaptive fake= sim=0x6 ;;
	sim-capacity)	elide=mode=on fake= sim=0x8 ;;
	esac

	# Each run gets its own runtime directory for its segments.
	rundir=$(mktemp -d "${TMPDIR:-/tmp}/elide-test.XXXXXX") || exit 1
	echo "=== $config: ELIDE=$elide${fake:+ ELIDE_FAKE_NO_RTM=$fake}${sim:+ ELIDE_SIM_ABORT=$sim} LD_PRELOAD=$preload"
	env -u ELIDE_FAKE_NO_RTM -u ELIDE_SIM_ABORT ELIDE_RUNTIME_DIR="$rundir" LD_PRELOAD="$preload" ELIDE="$elide" \
		${fake:+ELIDE_FAKE_NO_RTM=$fake} ${sim:+ELIDE_SIM_ABORT=$sim} "$@"
	rc=$?
	rm -rf "$rundir"

	case $rc in
	0)
		echo "=== $config: PASS"
		passed=$((passed + 1))
		;;
	77)
		echo "=== $config: SKIP"
		skipped=$((skipped + 1))
		;;
	*)
		if [ $rc -gt 128 ]; then
			echo "=== $config: FAIL (killed by signal $((rc - 128)))"
		else
			echo "=== $config: FAIL (exit status $rc)"
		fi
		failed=$((failed + 1))
		;;
	esac
done

echo "=== summary: $passed passed, $skipped skipped, $failed failed"
if [ $failed -gt 0 ]; then
	exit 1
fi
if [ $passed -eq 0 ]; then
	exit 77
fi
exit 0
