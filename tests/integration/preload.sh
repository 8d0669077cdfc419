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

for config in adaptive on off fake-no-rtm; do
	case "$config" in
	adaptive)	elide=mode=adaptive fake= ;;
	on)		elide=mode=on fake= ;;
	off)		elide=mode=off fake= ;;
	fake-no-rtm)	elide=mode=on fake=1 ;;
	esac

	echo "=== $config: ELIDE=$elide${fake:+ ELIDE_FAKE_NO_RTM=$fake} LD_PRELOAD=$preload"
	if [ -n "$fake" ]; then
		env LD_PRELOAD="$preload" ELIDE="$elide" ELIDE_FAKE_NO_RTM="$fake" "$@"
	else
		env -u ELIDE_FAKE_NO_RTM LD_PRELOAD="$preload" ELIDE="$elide" "$@"
	fi
	rc=$?

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
