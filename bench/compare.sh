#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# compare.sh: run elide-bench under four configurations and print a Markdown
# table of median throughputs and their ratios.
#
#   plain          no preload, glibc defaults
#   glibc-elision  no preload, GLIBC_TUNABLES=glibc.elision.enable=1
#   libelide       LD_PRELOAD=libelide.so
#   libelide-off   LD_PRELOAD=libelide.so ELIDE=mode=off
#   libelide-nostats LD_PRELOAD=libelide.so ELIDE=stats=0 (statistics cost: the "stats on/off" column)
#
# Runs are interleaved (run 1 of every config, then run 2, ...) so that noise
# from a shared machine hits every configuration alike; the median of the
# runs is reported. See bench/README.md.

set -euo pipefail

prog=${0##*/}
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
. "$script_dir/lib.sh"

runs=5
duration_ms=500
threads="1 2 4"
workloads=""
lib=""
bench=""
out=""

configs=(plain glibc-elision libelide libelide-off libelide-nostats)

usage() {
	cat <<EOF
Usage: $prog [OPTIONS]

Runs every workload x thread count under four configurations -- plain,
glibc-elision (GLIBC_TUNABLES=glibc.elision.enable=1), libelide (LD_PRELOAD)
and libelide-off (LD_PRELOAD with ELIDE=mode=off) -- interleaving the runs,
and prints a Markdown table of median ops/s ratios.

Options:
  --runs R           runs per configuration (default $runs)
  --duration-ms MS   length of each run (default $duration_ms)
  --threads "LIST"   thread counts (default "$threads")
  --workloads "LIST" workloads (default: all, as elide-bench --list prints)
  --lib PATH         libelide.so to preload (default: the first of
                     \$top_builddir/libelide/.libs/, ./libelide/.libs/ and
                     ../libelide/.libs/ next to this script)
  --bench PATH       elide-bench binary (default: the first of
                     \$top_builddir/bench/, ./bench/ and this script's folder)
  --out FILE         also write the report to FILE
  --quick            smoke mode: --runs 3 --duration-ms 200
  -h, --help         show this help

Progress goes to stderr, the report to stdout. Any run whose invariant check
fails (or that exits non-zero) aborts the script with exit status 1.
EOF
}





while [[ $# -gt 0 ]]; do
	case $1 in
	--runs)		need_value "$@"; runs=$2; shift 2 ;;
	--duration-ms)	need_value "$@"; duration_ms=$2; shift 2 ;;
	--threads)	need_value "$@"; threads=$2; shift 2 ;;
	--workloads)	need_value "$@"; workloads=$2; shift 2 ;;
	--lib)		need_value "$@"; lib=$2; shift 2 ;;
	--bench)	need_value "$@"; bench=$2; shift 2 ;;
	--out)		need_value "$@"; out=$2; shift 2 ;;
	--quick)	runs=3; duration_ms=200; shift ;;
	-h|--help)	usage; exit 0 ;;
	*)		usage_error "unknown argument '$1'" ;;
	esac
done

is_uint "$runs" || usage_error "--runs must be a positive integer, not '$runs'"
is_uint "$duration_ms" || usage_error "--duration-ms must be a positive integer, not '$duration_ms'"
[[ -n ${threads// /} ]] || usage_error "--threads is empty"
for t in $threads; do
	is_uint "$t" || usage_error "--threads entries must be positive integers, not '$t'"
done

# First existing candidate wins. The build tree comes first: out of tree, this
# script lives in srcdir, which may hold an unrelated in-tree build.
find_first() {
	local f
	for f in "$@"; do
		if [[ -n $f && -e $f ]]; then
			echo "$f"
			return 0
		fi
	done
	return 1
}

if [[ -z $bench ]]; then
	bench=$(find_first ${top_builddir:+"$top_builddir/bench/elide-bench"} \
		"$PWD/bench/elide-bench" "$script_dir/elide-bench") ||
		die "cannot find elide-bench: build it ('make bench/elide-bench') or pass --bench PATH"
fi
[[ -x $bench ]] || die "elide-bench '$bench' is not executable"

if [[ -z $lib ]]; then
	lib=$(find_first ${top_builddir:+"$top_builddir/libelide/.libs/libelide.so"} \
		"$PWD/libelide/.libs/libelide.so" \
		"$script_dir/../libelide/.libs/libelide.so") ||
		die "cannot find libelide.so: build it ('make libelide/libelide.la') or pass --lib PATH"
fi
[[ -r $lib ]] || die "libelide '$lib' is not readable"
# ld.so wants a path with a slash, and runs from other dirs need it absolute.
lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")

# ld.so only warns when a preload fails and then runs without it: catch that
# here, or "libelide" would silently measure plain glibc.
preload_err=$(env -u ELIDE LD_PRELOAD="$lib" "$bench" --list 2>&1 >/dev/null) || true
if [[ $preload_err == *"cannot be preloaded"* ]]; then
	die "ld.so cannot preload '$lib': $preload_err"
fi

all_workloads=$("$bench" --list) || die "'$bench --list' failed"
all_joined=$(tr '\n' ' ' <<<"$all_workloads")
all_joined=${all_joined% }
if [[ -z $workloads ]]; then
	workloads=$all_joined
fi
[[ -n ${workloads// /} ]] || usage_error "--workloads is empty"
for w in $workloads; do
	grep -qxF -- "$w" <<<"$all_workloads" ||
		usage_error "unknown workload '$w' (known: $all_joined)"
done

# Run one configuration once; prints ops/s, or aborts the whole script.
run_one() {
	local config=$1 w=$2 t=$3 seed=$4 line rc=0
	local -a envv=(env -u LD_PRELOAD -u ELIDE -u GLIBC_TUNABLES)

	case $config in
	plain)		;;
	glibc-elision)	envv+=(GLIBC_TUNABLES=glibc.elision.enable=1) ;;
	libelide)	envv+=(LD_PRELOAD="$lib") ;;
	libelide-off)	envv+=(LD_PRELOAD="$lib" ELIDE=mode=off) ;;
	libelide-nostats) envv+=(LD_PRELOAD="$lib" ELIDE=stats=0) ;;
	*)		die "internal error: unknown config '$config'" ;;
	esac

	line=$("${envv[@]}" "$bench" --workload "$w" --threads "$t" \
		--duration-ms "$duration_ms" --seed "$seed") || rc=$?
	if [[ $rc -ne 0 || $line != *"check=ok"* ]]; then
		echo >&2
		die "ABORT: $config $w threads=$t seed=$seed failed (exit $rc): ${line:-no output}"
	fi
	[[ $line =~ ops_per_sec=([0-9.]+) ]] || die "cannot parse elide-bench output: $line"
	echo "${BASH_REMATCH[1]}"
}




report=$(mktemp)
trap 'rm -f "$report"' EXIT

{
	echo "## elide-bench: plain vs glibc-elision vs libelide"
	echo
	machine_lines
	echo "- runs: $runs per configuration, interleaved; duration: $duration_ms ms per run; figure: median ops/s"
	echo "- libelide: $lib"
	echo
	echo "| workload | threads | plain Mops/s | glibc-elision/plain | libelide/plain | libelide/glibc-elision | off/plain | stats on/off |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
} >"$report"

nconfigs=${#configs[@]}
for w in $workloads; do
	for t in $threads; do
		declare -A results=()
		printf '%s: %s threads=%s:' "$prog" "$w" "$t" >&2
		for ((r = 0; r < runs; r++)); do
			# Rotate the starting config too, so none always runs first.
			for ((k = 0; k < nconfigs; k++)); do
				c=${configs[(r + k) % nconfigs]}
				ops=$(run_one "$c" "$w" "$t" $((r + 1))) || exit 1
				results[$c]+="$ops "
			done
			printf ' %d' $((r + 1)) >&2
		done
		echo >&2

		plain=$(median <<<"${results[plain]}")
		glibc=$(median <<<"${results[glibc-elision]}")
		elide=$(median <<<"${results[libelide]}")
		off=$(median <<<"${results[libelide-off]}")
		nostats=$(median <<<"${results[libelide-nostats]}")
		printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$w" "$t" \
			"$(awk -v p="$plain" 'BEGIN { printf "%.2f", p / 1e6 }')" \
			"$(ratio "$glibc" "$plain")" "$(ratio "$elide" "$plain")" \
			"$(ratio "$elide" "$glibc")" "$(ratio "$off" "$plain")" \
			"$(ratio "$elide" "$nostats")" >>"$report"
		unset results
	done
done

if [[ -n $out ]]; then
	cp "$report" "$out" || die "cannot write '$out'"
fi
cat "$report"
