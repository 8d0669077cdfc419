#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# compare.sh: run elide-bench under five configurations (more with --sim and
# --lib-old) and print a Markdown table of median throughputs and their ratios.
#
#   plain          no preload, glibc defaults
#   glibc-elision  no preload, GLIBC_TUNABLES=glibc.elision.enable=1
#   libelide       LD_PRELOAD=libelide.so
#   libelide-off   LD_PRELOAD=libelide.so ELIDE=mode=off
#   libelide-nostats LD_PRELOAD=libelide.so ELIDE=stats=0 (statistics cost: the "stats on/off" column)
#   floor          LD_PRELOAD=elide-forward.so, a preload that only forwards
#                  each lock call to glibc: what any interposer costs at least
#                  (skipped, with a note, when elide-forward.so is not built)
#
# --sim adds libelide with ELIDE_SIM_ABORT (every transaction aborts with a
# given status; honoured only where RTM is missing) in adaptive mode and
# mode=on, for conflict, capacity and no-status aborts, as a second table.
# --lib-old PATH adds the same libelide configurations with another build,
# in the same interleaved rounds, for a before/after comparison.
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
sim=no
paired=no
lib_old=""
floor=""

sim_modes=(adaptive on)
sim_causes=(conflict capacity none)

usage() {
	cat <<EOF
Usage: $prog [OPTIONS]

Runs every workload x thread count under five configurations -- plain,
glibc-elision (GLIBC_TUNABLES=glibc.elision.enable=1), libelide (LD_PRELOAD),
libelide-off (ELIDE=mode=off) and libelide-nostats (ELIDE=stats=0) --
interleaving the runs, and prints a Markdown table of median ops/s ratios.

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
  --floor PATH       elide-forward.so, the forwarding-only preload run as the
                     "floor" configuration (default: bench/.libs/ next to
                     the elide-bench binary; without it no floor columns)
  --sim              also run libelide with simulated aborts (ELIDE_SIM_ABORT):
                     adaptive and mode=on, each with conflict (0x6), capacity
                     (0x8) and status-less (0x0) aborts, as ratios vs plain in
                     a second table; libelide honours ELIDE_SIM_ABORT only on
                     a CPU without RTM (elsewhere those columns elide for real)
  --lib-old PATH     a second libelide.so (e.g. a build of the previous main):
                     adds "old" runs of libelide and libelide-off (and with
                     --sim of the simulated configurations) to the same rounds,
                     and old and new/old columns
  --paired           ratios are the median of each round's ratio (the runs
                     of one round are seconds apart: drift of a shared
                     machine cancels), not the ratio of the medians
  --out FILE         also write the report to FILE
  --quick            smoke mode: --runs 3 --duration-ms 200
  -h, --help         show this help

Progress goes to stderr, the report to stdout. Any run whose invariant check
fails (or that exits non-zero) aborts the script with exit status 1. Every
run with libelide gets a private ELIDE_RUNTIME_DIR, so its statistics
segment exists as it would under elided.
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
	--floor)	need_value "$@"; floor=$2; shift 2 ;;
	--out)		need_value "$@"; out=$2; shift 2 ;;
	--sim)		sim=yes; shift ;;
	--paired)	paired=yes; shift ;;
	--lib-old)	need_value "$@"; lib_old=$2; shift 2 ;;
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
lib=$(abs_lib "$lib" libelide) || exit 1
check_preload "$lib" "$bench" --list
# The floor: a preload that only forwards, built next to elide-bench.
floor_note=""
if [[ -z $floor ]]; then
	floor=$(find_first "$(dirname "$bench")/.libs/elide-forward.so") ||
		floor_note="not built (make bench/elide-forward.la), no floor columns"
fi
if [[ -n $floor ]]; then
	floor=$(abs_lib "$floor" "forwarding preload (--floor)") || exit 1
	check_preload "$floor" "$bench" --list
fi
if [[ -n $lib_old ]]; then
	lib_old=$(abs_lib "$lib_old" "old libelide (--lib-old)") || exit 1
	check_preload "$lib_old" "$bench" --list
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

# The configurations, in the order of the first round. "old-X" is X with
# the --lib-old library; "sim-MODE-CAUSE" is libelide with ELIDE=mode=MODE
# and ELIDE_SIM_ABORT=$(sim_status CAUSE).
configs=(plain glibc-elision libelide libelide-off libelide-nostats)
if [[ -n $floor ]]; then
	configs+=(floor)
fi
sim_configs=()
if [[ $sim == yes ]]; then
	for m in "${sim_modes[@]}"; do
		for c in "${sim_causes[@]}"; do
			sim_configs+=("sim-$m-$c")
		done
	done
	configs+=("${sim_configs[@]}")
fi
if [[ -n $lib_old ]]; then
	configs+=(old-libelide old-libelide-off)
	for c in "${sim_configs[@]}"; do
		configs+=("old-$c")
	done
fi

# Does this libelide honour ELIDE_SIM_ABORT here? Its own start-up line
# says so ("simulated: ..."); where RTM works it elides for real instead.
sim_honoured=no
sim_note=""
if [[ $sim == yes ]]; then
	sim_line=$(env -u ELIDE -u GLIBC_TUNABLES -u ELIDE_FAKE_NO_RTM ELIDE=verbose=1,stats=0 \
		ELIDE_SIM_ABORT=0x6 LD_PRELOAD="$lib" "$bench" --list 2>&1 >/dev/null) || true
	if [[ $sim_line == *"simulated"* ]]; then
		sim_honoured=yes
		sim_note="honoured: no usable RTM here, so every transaction aborts with the given status before it starts"
	elif grep -qw rtm /proc/cpuinfo 2>/dev/null; then
		sim_note="IGNORED: this CPU has RTM, so libelide elides for real and ELIDE_SIM_ABORT does nothing; the sim columns repeat plain libelide (adaptive or mode=on) and only make sense on a CPU without RTM"
	else
		sim_note="NOT honoured by this libelide (its start-up line: ${sim_line:-nothing}); the sim columns measure pass-through"
	fi
	echo "$prog: simulated aborts (ELIDE_SIM_ABORT): $sim_note" >&2
fi

runtime_dir=$(mktemp -d "${TMPDIR:-/tmp}/elide-compare.XXXXXX") || die "cannot create a temporary folder"
trap 'rm -rf "$runtime_dir"' EXIT

# Run one configuration once; prints ops/s, or aborts the whole script.
run_one() {
	local config=$1 w=$2 t=$3 seed=$4 line rc=0 l=$lib base=$1 mode cause
	local -a envv=(env -u LD_PRELOAD -u ELIDE -u GLIBC_TUNABLES -u ELIDE_SIM_ABORT
		-u ELIDE_FAKE_NO_RTM -u ELIDE_RUNTIME_DIR)

	if [[ $config == old-* ]]; then
		l=$lib_old
		base=${config#old-}
	fi
	# A private runtime directory: libelide creates its statistics segment
	# (as under elided) and removes it at exit.
	case $base in
	libelide*|sim-*) envv+=(ELIDE_RUNTIME_DIR="$runtime_dir/run") ;;
	esac
	case $base in
	plain)		;;
	floor)		envv+=(LD_PRELOAD="$floor") ;;
	glibc-elision)	envv+=(GLIBC_TUNABLES=glibc.elision.enable=1) ;;
	libelide)	envv+=(LD_PRELOAD="$l") ;;
	libelide-off)	envv+=(LD_PRELOAD="$l" ELIDE=mode=off) ;;
	libelide-nostats) envv+=(LD_PRELOAD="$l" ELIDE=stats=0) ;;
	sim-*-*)
		mode=${base#sim-}
		cause=${mode#*-}
		mode=${mode%%-*}
		envv+=(LD_PRELOAD="$l" ELIDE=mode="$mode" ELIDE_SIM_ABORT="$(sim_status "$cause")")
		;;
	*)		die "internal error: unknown config '$config'" ;;
	esac

	line=$("${envv[@]}" "$bench" --workload "$w" --threads "$t" \
		--duration-ms "$duration_ms" --seed "$seed") || rc=$?
	if [[ $rc -ne 0 || $line != *"check=ok"* ]]; then
		echo >&2
		die "ABORT: $config $w threads=$t seed=$seed failed (exit $rc): ${line:-no output}"
	fi
	[[ $line =~ ops_per_sec=([0-9.]+).*ops_per_cpu_sec=([0-9.]+) ]] || die "cannot parse elide-bench output: $line"
	echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
}




mkdir -m 700 "$runtime_dir/run" || die "cannot create '$runtime_dir/run'"
report=$runtime_dir/report.md
sim_rows=$runtime_dir/sim-rows.md
: >"$sim_rows"

{
	echo "## elide-bench: plain vs glibc-elision vs libelide"
	echo
	machine_lines
	echo "- runs: $runs per configuration, interleaved; duration: $duration_ms ms per run; figure: median ops/s; ratios: $([[ $paired == yes ]] && echo "median of the rounds' ratios (--paired)" || echo "ratio of the medians")"
	echo "- CPU per op: the process's CPU-seconds (every thread, user and system, spinning included) per operation, libelide's over plain's: above 1 costs more"
	echo "- libelide: $lib"
	echo "- floor: ${floor:-$floor_note} (a preload that only forwards each lock call to glibc)"
	if [[ -n $lib_old ]]; then
		echo "- old libelide: $lib_old (the \"old\" columns and rows, run in the same rounds)"
	fi
	if [[ $sim == yes ]]; then
		echo "- simulated aborts (ELIDE_SIM_ABORT, second table): $sim_note"
	fi
	echo
	head="| workload | threads | plain Mops/s | glibc-elision/plain | libelide/plain | libelide/plain CPU per op | libelide/glibc-elision | off/plain | stats on/off |"
	rule="|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	if [[ -n $floor ]]; then
		head+=" floor/plain | libelide/floor |"
		rule+="---:|---:|"
	fi
	if [[ -n $lib_old ]]; then
		head+=" old libelide/plain | old off/plain | libelide new/old |"
		rule+="---:|---:|---:|"
	fi
	echo "$head"
	echo "$rule"
} >"$report"

# cmp_ratio LIST_A LIST_B: how configuration A compares with B, from their runs in
# round order: the ratio of the medians, or (--paired) the median of the
# rounds' ratios.
cmp_ratio() {
	if [[ $paired == yes ]]; then
		paired_ratio "$1" "$2"
	else
		ratio "$(median <<<"$1")" "$(median <<<"$2")"
	fi
}

nconfigs=${#configs[@]}
for w in $workloads; do
	for t in $threads; do
		declare -A results=() cpu_results=()
		printf '%s: %s threads=%s:' "$prog" "$w" "$t" >&2
		for ((r = 0; r < runs; r++)); do
			# Rotate the starting config too, so none always runs first.
			for ((k = 0; k < nconfigs; k++)); do
				c=${configs[(r + k) % nconfigs]}
				figures=$(run_one "$c" "$w" "$t" $((r + 1))) || exit 1
				results[$c]+="${figures%% *} "
				cpu_results[$c]+="${figures##* } "
			done
			printf ' %d' $((r + 1)) >&2
		done
		echo >&2

		plain=$(median <<<"${results[plain]}")
		P=${results[plain]} G=${results[glibc-elision]} E=${results[libelide]}
		row=$(printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |' "$w" "$t" \
			"$(awk -v p="$plain" 'BEGIN { printf "%.2f", p / 1e6 }')" \
			"$(cmp_ratio "$G" "$P")" "$(cmp_ratio "$E" "$P")" \
			"$(cmp_ratio "${cpu_results[plain]}" "${cpu_results[libelide]}")" "$(cmp_ratio "$E" "$G")" \
			"$(cmp_ratio "${results[libelide-off]}" "$P")" "$(cmp_ratio "$E" "${results[libelide-nostats]}")")
		if [[ -n $floor ]]; then
			row+=$(printf ' %s | %s |' "$(cmp_ratio "${results[floor]}" "$P")" "$(cmp_ratio "$E" "${results[floor]}")")
		fi
		if [[ -n $lib_old ]]; then
			row+=$(printf ' %s | %s | %s |' "$(cmp_ratio "${results[old-libelide]}" "$P")" \
				"$(cmp_ratio "${results[old-libelide-off]}" "$P")" "$(cmp_ratio "$E" "${results[old-libelide]}")")
		fi
		echo "$row" >>"$report"

		# Simulated aborts: one row per build, each configuration's median / plain.
		if [[ ${#sim_configs[@]} -gt 0 ]]; then
			for prefix in "" ${lib_old:+old-}; do
				row="| $w | $t |"
				if [[ -n $lib_old ]]; then
					if [[ -n $prefix ]]; then row+=" old |"; else row+=" new |"; fi
				fi
				if [[ -n $floor ]]; then
					row+=" $(cmp_ratio "${results[floor]}" "$P") |"
				fi
				for c in "${sim_configs[@]}"; do
					row+=" $(cmp_ratio "${results[$prefix$c]}" "$P") |"
				done
				echo "$row" >>"$sim_rows"
			done
		fi
		unset results
	done
done

if [[ ${#sim_configs[@]} -gt 0 ]]; then
	{
		echo
		echo "### Simulated aborts: libelide with ELIDE_SIM_ABORT, median ops/s / plain"
		echo
		if [[ $sim_honoured == yes ]]; then
			echo "Every transaction aborts with the given _xbegin() status before it starts"
			echo "and the section then runs under the real lock: the cost of elision that"
			echo "never succeeds (design targets: adaptive >= 0.97x plain, mode=on >= 0.5x"
			echo "plain). ELIDE_SIM_ABORT is honoured only where RTM is missing; on a CPU"
			echo "with RTM these columns would repeat plain libelide."
			if [[ -n $floor ]]; then
				echo "The floor column is the forwarding-only preload: no interposer, libelide"
				echo "included, can do better than it."
			fi
		else
			echo "**Simulated aborts $sim_note.**"
		fi
		echo
		head="| workload | threads |"
		rule="|---|---:|"
		if [[ -n $lib_old ]]; then
			head+=" build |"
			rule+="---|"
		fi
		if [[ -n $floor ]]; then
			head+=" floor |"
			rule+="---:|"
		fi
		for c in "${sim_configs[@]}"; do
			m=${c#sim-}
			head+=" ${m%%-*} ${m#*-} $(sim_status "${m#*-}") |"
			rule+="---:|"
		done
		echo "$head"
		echo "$rule"
		cat "$sim_rows"
	} >>"$report"
fi

if [[ -n $out ]]; then
	cp "$report" "$out" || die "cannot write '$out'"
fi
cat "$report"
