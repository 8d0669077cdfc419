#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# sysbench.sh: run Debian's sysbench mutex test under four configurations and
# print a Markdown table of median figures and their ratios.
#
#   plain          no preload, glibc defaults
#   glibc-elision  no preload, GLIBC_TUNABLES=glibc.elision.enable=1
#   libelide       LD_PRELOAD=libelide.so (mode adaptive)
#   libelide-off   LD_PRELOAD=libelide.so ELIDE=mode=off
#
# sysbench's mutex test: each thread makes one "event" of --mutex-locks
# iterations; an iteration spins --mutex-loops times outside any lock, then
# locks a random mutex of a pool of --mutex-num, increments a shared counter
# and unlocks.  "total number of events" is therefore always the thread
# count: the figure is sysbench's "total time", and the derived lock
# acquisitions per second (threads x mutex-locks / total time).
#
# Runs are interleaved (run 1 of every configuration, then run 2, ..., each
# round starting with another configuration) and the median is reported, as
# in compare.sh; see bench/README.md.

set -euo pipefail

prog=${0##*/}
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
. "$script_dir/lib.sh"

runs=5
threads="1 2 4"
locks=5000000
workloads="one-lock pool-64 sysbench-default"
lib=""
out=""
configs=(plain glibc-elision libelide libelide-off)

usage() {
	cat <<EOF
Usage: $prog [OPTIONS]

Runs sysbench's mutex test for every workload x thread count under plain,
glibc-elision, libelide and libelide-off, interleaving the runs, and prints
a Markdown table of median total times and lock acquisitions per second.

Workloads (sysbench mutex options):
  one-lock          --mutex-num=1 --mutex-locks=LOCKS --mutex-loops=0:
                    every acquisition contends for one mutex
  pool-64           --mutex-num=64 --mutex-locks=LOCKS --mutex-loops=100:
                    a pool of mutexes, rarely contended, some work outside
  sysbench-default  sysbench's defaults: 4096 mutexes, 50000 locks, 10000
                    loops outside the lock (the lock is a small share)

Options:
  --runs R            runs per configuration (default $runs)
  --threads "LIST"    thread counts (default "$threads")
  --locks N           --mutex-locks of one-lock and pool-64 (default $locks)
  --workloads "LIST"  a subset of the workloads above
  --lib PATH          libelide.so (default: \$top_builddir/libelide/.libs/,
                      ./libelide/.libs/ or ../libelide/.libs/ next to this script)
  --out FILE          also write the report to FILE
  --quick             smoke mode: --runs 3 --locks 500000
  -h, --help          show this help

Progress goes to stderr, the report to stdout.  A run that fails or prints
no total time stops the script with exit status 1; a usage error exits 2.
EOF
}


while [[ $# -gt 0 ]]; do
	case $1 in
	--runs)		need_value "$@"; runs=$2; shift 2 ;;
	--threads)	need_value "$@"; threads=$2; shift 2 ;;
	--locks)	need_value "$@"; locks=$2; shift 2 ;;
	--workloads)	need_value "$@"; workloads=$2; shift 2 ;;
	--lib)		need_value "$@"; lib=$2; shift 2 ;;
	--out)		need_value "$@"; out=$2; shift 2 ;;
	--quick)	runs=3; locks=500000; shift ;;
	-h|--help)	usage; exit 0 ;;
	*)		usage_error "unknown argument '$1'" ;;
	esac
done

is_uint "$runs" || usage_error "--runs must be a positive integer, not '$runs'"
is_uint "$locks" || usage_error "--locks must be a positive integer, not '$locks'"
[[ -n ${threads// /} ]] || usage_error "--threads is empty"
for t in $threads; do
	is_uint "$t" || usage_error "--threads entries must be positive integers, not '$t'"
done
[[ -n ${workloads// /} ]] || usage_error "--workloads is empty"
for w in $workloads; do
	case $w in one-lock|pool-64|sysbench-default) ;; *) usage_error "unknown workload '$w'" ;; esac
done

sysbench=$(command -v sysbench) || die "sysbench is not installed (Debian: apt-get install sysbench)"

if [[ -z $lib ]]; then
	for f in ${top_builddir:+"$top_builddir/libelide/.libs/libelide.so"} \
		"$PWD/libelide/.libs/libelide.so" "$script_dir/../libelide/.libs/libelide.so"; do
		if [[ -e $f ]]; then lib=$f; break; fi
	done
	[[ -n $lib ]] || die "cannot find libelide.so: build it ('make libelide/libelide.la') or pass --lib PATH"
fi
[[ -r $lib ]] || die "libelide '$lib' is not readable"
lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")

# ld.so only warns when a preload fails: catch that, or "libelide" would
# silently measure plain glibc.
preload_err=$(env -u ELIDE LD_PRELOAD="$lib" "$sysbench" --version 2>&1 >/dev/null) || true
[[ $preload_err != *"cannot be preloaded"* ]] || die "ld.so cannot preload '$lib': $preload_err"

workload_args() {
	case $1 in
	one-lock)		echo "--mutex-num=1 --mutex-locks=$locks --mutex-loops=0" ;;
	pool-64)		echo "--mutex-num=64 --mutex-locks=$locks --mutex-loops=100" ;;
	sysbench-default)	echo "--mutex-num=4096 --mutex-locks=50000 --mutex-loops=10000" ;;
	esac
}
workload_locks() {
	case $1 in sysbench-default) echo 50000 ;; *) echo "$locks" ;; esac
}

rundir=$(mktemp -d)
report=$(mktemp)
trap 'rm -rf "$rundir" "$report"' EXIT

# run_one CONFIG WORKLOAD THREADS: prints sysbench's total time in seconds.
run_one() {
	local config=$1 w=$2 t=$3 output rc=0
	local -a envv=(env -u LD_PRELOAD -u ELIDE -u GLIBC_TUNABLES ELIDE_RUNTIME_DIR="$rundir")

	case $config in
	plain)		;;
	glibc-elision)	envv+=(GLIBC_TUNABLES=glibc.elision.enable=1) ;;
	libelide)	envv+=(LD_PRELOAD="$lib") ;;
	libelide-off)	envv+=(LD_PRELOAD="$lib" ELIDE=mode=off) ;;
	*)		die "internal error: unknown config '$config'" ;;
	esac
	# shellcheck disable=SC2046 # workload_args is a list of options
	output=$("${envv[@]}" "$sysbench" mutex --threads="$t" $(workload_args "$w") run 2>&1) || rc=$?
	[[ $rc -eq 0 ]] || die "ABORT: $config $w threads=$t failed (exit $rc): $(tail -n3 <<<"$output")"
	[[ $output =~ total\ number\ of\ events:\ *([0-9]+) && ${BASH_REMATCH[1]} == "$t" ]] ||
		die "ABORT: $config $w threads=$t: not one event per thread: $(grep 'events' <<<"$output")"
	[[ $output =~ total\ time:\ *([0-9.]+)s ]] || die "cannot parse sysbench output: $output"
	echo "${BASH_REMATCH[1]}"
}



{
	echo "## sysbench mutex: plain vs glibc-elision vs libelide"
	echo
	machine_lines
	echo "- sysbench: $("$sysbench" --version 2>/dev/null | head -n1)"
	echo "- runs: $runs per configuration, interleaved; figure: median of sysbench's total time"
	echo "- libelide: $lib"
	echo
	echo "| workload | threads | plain s | plain Mlocks/s | glibc-elision/plain | libelide/plain | libelide/glibc-elision | off/plain |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
} >"$report"

ncfg=${#configs[@]}
for w in $workloads; do
	for t in $threads; do
		declare -A times=()
		for c in "${configs[@]}"; do times[$c]=""; done
		for ((r = 0; r < runs; r++)); do
			for ((i = 0; i < ncfg; i++)); do
				c=${configs[(r + i) % ncfg]}
				printf '\r%s: %s threads=%s run %d/%d %-14s' "$prog" "$w" "$t" $((r + 1)) "$runs" "$c" >&2
				times[$c]+=" $(run_one "$c" "$w" "$t")"
			done
		done
		declare -A med=()
		for c in "${configs[@]}"; do med[$c]=$(median <<<"${times[$c]}"); done
		# Ratios are of speeds (time of the baseline / time of the config):
		# above 1 means faster than the baseline.
		awk -v w="$w" -v t="$t" -v n=$(($(workload_locks "$w") * t)) \
			-v p="${med[plain]}" -v g="${med[glibc-elision]}" -v l="${med[libelide]}" -v o="${med[libelide-off]}" '
			function r(a, b) { return (a > 0 && b > 0) ? sprintf("%.3f", b / a) : "n/a" }
			BEGIN {
				printf "| %s | %d | %.4f | %.2f | %s | %s | %s | %s |\n", w, t, p,
					(p > 0 ? n / p / 1e6 : 0), r(g, p), r(l, p), r(l, g), r(o, p)
			}' >>"$report"
		unset times med
	done
done
printf '\r%*s\r' 60 '' >&2

{
	echo
	echo "Ratios are speed ratios (the other configuration's time / this one's):"
	echo "above 1 means faster.  Mlocks/s = threads x mutex-locks / total time."
} >>"$report"

cat "$report"
if [[ -n $out ]]; then
	cp "$report" "$out"
fi
