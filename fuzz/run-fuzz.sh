#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-fuzz.sh BUILDDIR SRCDIR SECONDS 'EXTRA-LIBFUZZER-ARGS' HARNESS...
# What `make fuzz` runs (fuzz/local.mk); see fuzz/README.md.
#
# For each harness: replay every regression input (a crash fails), fuzz
# for SECONDS over a scratch copy of its corpus + regressions (a finding
# fails, its input is kept under BUILDDIR/fuzz/run/HARNESS/), then replay
# each known crash and say whether it still reproduces (never fails).
set -u

builddir="$1" srcdir="$2" seconds="$3" extra="$4"
shift 4
run="$builddir/fuzz/run"
seeds="$builddir/fuzz/seeds"

rm -rf "$run"
mkdir -p "$run/tmp"
# The harnesses keep their scratch files under TMPDIR; a crashing process
# cannot clean up after itself, so that is inside the run folder.
export TMPDIR="$run/tmp"
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$srcdir/fuzz/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && ! command -v llvm-symbolizer >/dev/null; then
	for s in /usr/lib/llvm-*/bin/llvm-symbolizer; do
		[ -x "$s" ] && export ASAN_SYMBOLIZER_PATH="$s"
	done
fi

# Plain files of a folder, one per line (README files are not inputs).
inputs() {
	local d
	for d in "$@"; do
		[ -d "$d" ] || continue
		find "$d" -maxdepth 1 -type f ! -name 'README*' ! -name '.*' | LC_ALL=C sort
	done
}

harness_args() {
	case "$1" in
	fuzz-segment) echo "-max_len=40960" ;;
	fuzz-elfsym) echo "-max_len=65536" ;;
	fuzz-config) echo "-max_len=8192 -dict=$srcdir/fuzz/fuzz-config.dict" ;;
	fuzz-learned) echo "-max_len=20000" ;;
	esac
}

# The tail of a libFuzzer log: the report of what went wrong.
show_log() {
	echo "---- $1 (last 80 lines) ----"
	tail -n 80 "$1"
	echo "----"
}

failed=()
for h in "$@"; do
	bin="$builddir/fuzz/$h"
	mkdir -p "$run/$h/corpus"
	log="$run/$h/log"
	mapfile -t regressions < <(inputs "$srcdir/fuzz/regressions/$h" "$seeds/regressions/$h")
	mapfile -t corpus < <(inputs "$srcdir/fuzz/corpus/$h" "$seeds/corpus/$h")
	[ "$h" = fuzz-config ] && [ -f "$srcdir/conf/elide.conf" ] && corpus+=("$srcdir/conf/elide.conf")

	# 1. Regressions, each once.
	if [ ${#regressions[@]} -gt 0 ]; then
		if timeout 300 "$bin" -timeout=25 -rss_limit_mb=2048 "${regressions[@]}" >"$log.replay" 2>&1; then
			echo "$h: ${#regressions[@]} regression inputs replayed: OK"
		else
			echo "$h: FAIL: a regression input crashed or hung"
			show_log "$log.replay"
			failed+=("$h (regressions)")
		fi
	fi

	# 2. Fuzzing, over a scratch copy (libFuzzer adds what it finds there).
	i=0
	for f in "${corpus[@]}" "${regressions[@]}"; do
		i=$((i + 1))
		cp "$f" "$run/$h/corpus/$(printf '%03d' "$i")-$(basename "$f")"
	done
	# shellcheck disable=SC2046,SC2086
	if timeout $((seconds + 120)) "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$run/$h/" $(harness_args "$h") $extra \
		"$run/$h/corpus" >"$log" 2>&1; then
		echo "$h: fuzzed ${seconds}s: $(grep -h -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') runs," \
			"$(grep -o -E 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1), corpus $(find "$run/$h/corpus" -type f | wc -l) inputs: OK"
	else
		echo "$h: FAIL: fuzzing found a problem; the input is in $run/$h/"
		ls "$run/$h/" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | sed "s|^|  $run/$h/|"
		show_log "$log"
		failed+=("$h (fuzzing)")
	fi

	# 3. Known crashes: tell when one is fixed.
	while IFS= read -r f; do
		[ -n "$f" ] || continue
		if timeout 120 "$bin" -timeout=25 -rss_limit_mb=2048 "$f" >"$log.known" 2>&1; then
			echo "$h: known crash $(basename "$f") no longer reproduces: move it to fuzz/regressions/$h (fuzz/known-crashes/README.md)"
		else
			echo "$h: known crash $(basename "$f") still reproduces (fuzz/known-crashes/README.md)"
		fi
	done < <(inputs "$srcdir/fuzz/known-crashes/$h" "$seeds/known-crashes/$h")
done
rm -rf "$run/tmp"

if [ ${#failed[@]} -gt 0 ]; then
	echo "make fuzz: FAILED: ${failed[*]}"
	exit 1
fi
echo "make fuzz: all harnesses passed"
