#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# observer.sh: what elided's BPF observer of lock waits (futexwatch) costs a
# program without libelide.  Each round runs elide-bench (no preload) once
# with no elided, once with elided --no-bpf and once with elided and its
# BPF programs (process discovery, which this workload never triggers, and
# the futex observer), in turn; medians of ops/s, as ratios to no elided.
# Needs root (BPF).  The workloads default to the futex-heavy ones: a
# contended counter and hash lookups, where threads sleep on the mutex.
#
#   bench/observer.sh [--runs R] [--duration-ms MS] [--threads "LIST"] [--workloads "LIST"]
#                     [--builddir DIR] [--out FILE]

set -euo pipefail

prog=${0##*/}
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
. "$script_dir/lib.sh"

runs=7
duration_ms=500
threads="2 4"
workloads="counter hash-lookup"
builddir=""
out=""

while [[ $# -gt 0 ]]; do
	case $1 in
	--runs)		need_value "$@"; runs=$2; shift 2 ;;
	--duration-ms)	need_value "$@"; duration_ms=$2; shift 2 ;;
	--threads)	need_value "$@"; threads=$2; shift 2 ;;
	--workloads)	need_value "$@"; workloads=$2; shift 2 ;;
	--builddir)	need_value "$@"; builddir=$2; shift 2 ;;
	--out)		need_value "$@"; out=$2; shift 2 ;;
	-h|--help)	sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*)		usage_error "unknown argument '$1'" ;;
	esac
done
is_uint "$runs" || usage_error "--runs must be a positive integer"
[[ $(id -u) -eq 0 ]] || die "needs root: the observer is a BPF program"
builddir=${builddir:-${top_builddir:-$script_dir/../build-lead}}
bench="$builddir/bench/elide-bench"
elided="$builddir/elided/elided"
[[ -x $bench && -x $elided ]] || die "no elide-bench or elided under $builddir (--builddir)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/observer.XXXXXX")
daemon=
observer_attach="unknown"
cleanup() { [[ -n $daemon ]] && kill "$daemon" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
mkdir -m 1777 "$tmp/run"
printf 'daemon: { interval = 1.0; observe_lock_waits = true; };\n' >"$tmp/elide.conf"

# start_elided [ARGS]: elided on a private runtime directory, no bus; waits
# until it logged that it runs (and, with BPF, whether the observer loaded).
start_elided() {
	: >"$tmp/elided.log"
	"$elided" --verbose --no-bus --config "$tmp/elide.conf" --runtime-dir "$tmp/run" "$@" >"$tmp/elided.log" 2>&1 &
	daemon=$!
	for _ in $(seq 50); do
		grep -q "process discovery" "$tmp/elided.log" && { [[ $* == *--no-bpf* ]] ||
			grep -q "observing the lock waits\|not observed" "$tmp/elided.log"; } && break
		sleep 0.1
	done
	if grep -q "not observed" "$tmp/elided.log"; then
		die "the observer did not load: $(grep "not observed" "$tmp/elided.log")"
	fi
	attach=$(sed -n 's/.*observing the lock waits of programs without libelide (BPF: \(.*\))$/\1/p' \
		"$tmp/elided.log" | head -n 1)
	[[ -z $attach ]] || observer_attach=$attach
}
stop_elided() { kill -TERM "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=; }
one_run() { "$bench" -w "$1" -t "$2" -d "$duration_ms" | sed -n 's/.*ops_per_sec=\([0-9.]*\).*/\1/p'; }

{
	echo "## BPF observer of lock waits: elide-bench without libelide, with and without elided"
	echo
	machine_lines
	echo "- runs: $runs per configuration, interleaved, the order turning each round; duration: $duration_ms ms per run; figure: median ops/s; ratios: median of the rounds' ratios"
	echo
	echo "| workload | threads | no elided Mops/s | elided --no-bpf / none | elided + BPF observer / none | observer / --no-bpf |"
	echo "|---|---:|---:|---:|---:|---:|"
} >"$tmp/report"

for w in $workloads; do
	for t in $threads; do
		none=() nobpf=() bpf=()
		echo -n "$prog: $w threads=$t:" >&2
		for r in $(seq "$runs"); do
			echo -n " $r" >&2
			# The order turns each round, so none always runs first.
			for k in 0 1 2; do
				case $(((r + k) % 3)) in
				0) none+=("$(one_run "$w" "$t")") ;;
				1) start_elided --no-bpf; nobpf+=("$(one_run "$w" "$t")"); stop_elided ;;
				2) start_elided; bpf+=("$(one_run "$w" "$t")"); stop_elided ;;
				esac
			done
		done
		echo >&2
		m0=$(echo "${none[@]}" | median)
		printf '| %s | %s | %.2f | %s | %s | %s |\n' "$w" "$t" "$(awk -v v="$m0" 'BEGIN { print v / 1e6 }')" \
			"$(paired_ratio "${nobpf[*]}" "${none[*]}")" "$(paired_ratio "${bpf[*]}" "${none[*]}")" \
			"$(paired_ratio "${bpf[*]}" "${nobpf[*]}")" >>"$tmp/report"
	done
done
echo "- observer attached with: $observer_attach" >>"$tmp/report"
cat "$tmp/report"
[[ -z $out ]] || cp "$tmp/report" "$out"
