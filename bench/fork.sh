#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# fork.sh: what fork() costs under libelide (issue 13 item 6): bench/fork-bench
# (fork + _exit + waitpid, and fork + exec /bin/true + waitpid) plain, under
# libelide (pass-through where RTM is missing, its default mode elsewhere)
# and, with --lib-old, under another libelide build, in interleaved rounds;
# prints a Markdown table of median microseconds per iteration.
#
# Every libelide run gets a private runtime directory on tmpfs (/dev/shm
# when there is one), as /run/elide is; --busy first fills it with one
# segment name per live process of the machine (live: never removed), the
# directory a system-wide installation has, so that the sweep of stale
# segments each new process does costs what it costs there.

set -euo pipefail

prog=${0##*/}
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
. "$script_dir/lib.sh"

runs=7
exit_iters=2000
exec_iters=400
lib=""
lib_old=""
bench=""
busy=no

usage() {
	cat <<EOF2
Usage: $prog [OPTIONS]

Options:
  --runs R          interleaved rounds (default $runs)
  --exit-iters N    fork+_exit iterations per run (default $exit_iters)
  --exec-iters N    fork+exec iterations per run (default $exec_iters)
  --lib PATH        libelide.so (default: \$top_builddir/libelide/.libs/,
                    ./libelide/.libs/, ../libelide/.libs/ next to this script)
  --lib-old PATH    a second libelide.so (e.g. a build of the previous main)
  --bench PATH      fork-bench binary (default: \$top_builddir/bench/, ./bench/,
                    this script's folder)
  --busy            fill the runtime directory with one live segment name per
                    process of the machine first
  -h, --help        show this help
EOF2
}

while [[ $# -gt 0 ]]; do
	case $1 in
	--runs) need_value "$@"; is_uint "$2" || usage_error "--runs wants a positive integer"; runs=$2; shift 2 ;;
	--exit-iters) need_value "$@"; is_uint "$2" || usage_error "--exit-iters wants a positive integer"; exit_iters=$2; shift 2 ;;
	--exec-iters) need_value "$@"; is_uint "$2" || usage_error "--exec-iters wants a positive integer"; exec_iters=$2; shift 2 ;;
	--lib) need_value "$@"; lib=$2; shift 2 ;;
	--lib-old) need_value "$@"; lib_old=$2; shift 2 ;;
	--bench) need_value "$@"; bench=$2; shift 2 ;;
	--busy) busy=yes; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown option '$1'" ;;
	esac
done

find_first() {
	local f
	for f in "$@"; do
		[[ -n $f && -e $f ]] && { echo "$f"; return; }
	done
}
[[ -n $lib ]] || lib=$(find_first "${top_builddir:+$top_builddir/libelide/.libs/libelide.so}" \
	./libelide/.libs/libelide.so "$script_dir/../libelide/.libs/libelide.so")
[[ -n $bench ]] || bench=$(find_first "${top_builddir:+$top_builddir/bench/fork-bench}" \
	./bench/fork-bench "$script_dir/fork-bench")
[[ -n $bench && -x $bench ]] || die "fork-bench not found (make bench/fork-bench, or --bench PATH)"
[[ -n $lib ]] || die "libelide.so not found (--lib PATH)"
lib=$(abs_lib "$lib" libelide)
check_preload "$lib" /bin/true
configs=(plain new)
if [[ -n $lib_old ]]; then
	lib_old=$(abs_lib "$lib_old" "old libelide")
	check_preload "$lib_old" /bin/true
	configs=(plain old new)
fi

base=/dev/shm
[[ -d $base && -w $base ]] || base=${TMPDIR:-/tmp}
work=$(mktemp -d "$base/elide-fork-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/template"

if [[ $busy == yes ]]; then
	# "<pid>-<starttime>.seg" of every live process (field 22 of its stat).
	for stat in /proc/[0-9]*/stat; do
		read -r line <"$stat" 2>/dev/null || continue
		pid=${line%% *}
		rest=${line##*) }
		read -ra f <<<"$rest"
		: >"$work/template/$pid-${f[19]}.seg"
	done
fi
nfiles=$(find "$work/template" -name '*.seg' | wc -l)

# Each run starts from the same directory (the old build leaves a file per
# fork+_exit child: they would slow the later runs down, and the new build's
# sweep would spend its time removing them).
# Prints "WALL CPU LEFT": wall-clock and CPU ns per iteration, segment files
# left behind by the run.
run_one() { # config mode iterations
	local config=$1 mode=$2 n=$3 preload="" dir=$work/run
	case $config in
	old) preload=$lib_old ;;
	new) preload=$lib ;;
	esac
	rm -rf "$dir"
	cp -a "$work/template" "$dir"
	if [[ -n $preload ]]; then
		ns=$(env -u ELIDE -u ELIDE_SIM_ABORT ELIDE_RUNTIME_DIR="$dir" LD_PRELOAD="$preload" "$bench" "$mode" "$n")
	else
		ns=$(env -u LD_PRELOAD "$bench" "$mode" "$n")
	fi
	echo "$ns $(($(find "$dir" -name '*.seg*' | wc -l) - nfiles))"
}

declare -A results cpus left
for ((r = 0; r < runs; r++)); do
	echo "$prog: round $((r + 1))/$runs" >&2
	# Rotate the order of configurations from round to round.
	for ((i = 0; i < ${#configs[@]}; i++)); do
		config=${configs[(i + r) % ${#configs[@]}]}
		for mode in exit exec; do
			iters=$exit_iters
			[[ $mode == exec ]] && iters=$exec_iters
			read -r wall cpu l < <(run_one "$config" "$mode" "$iters")
			results[$config,$mode]+=" $wall"
			cpus[$config,$mode]+=" $cpu"
			left[$config,$mode]=$l
		done
	done
done

us() { awk -v ns="$1" 'BEGIN { printf "%.1f", ns / 1000 }'; }

echo "### fork cost$([[ $busy == yes ]] && echo ", busy runtime directory")"
echo
machine_lines
echo "- runs: $runs interleaved rounds (order rotated), medians; $exit_iters fork+_exit and $exec_iters fork+exec iterations per run"
echo "- runtime directory: $base (tmpfs), $nfiles segment names in it at each run's start"
echo "- libelide mode: default (adaptive); without RTM a pass-through"
echo
if [[ -n $lib_old ]]; then
	echo "| workload | clock | plain µs | old libelide µs | new libelide µs | old/plain | new/plain | new/old |"
	echo "|---|---|---|---|---|---|---|---|"
else
	echo "| workload | clock | plain µs | libelide µs | libelide/plain |"
	echo "|---|---|---|---|---|"
fi
for mode in exit exec; do
	label="fork + _exit + waitpid"
	[[ $mode == exec ]] && label="fork + exec /bin/true + waitpid"
	for clock in wall cpu; do
		if [[ $clock == wall ]]; then
			p=$(median <<<"${results[plain,$mode]}") n=$(median <<<"${results[new,$mode]}")
			[[ -n $lib_old ]] && o=$(median <<<"${results[old,$mode]}")
		else
			p=$(median <<<"${cpus[plain,$mode]}") n=$(median <<<"${cpus[new,$mode]}")
			[[ -n $lib_old ]] && o=$(median <<<"${cpus[old,$mode]}")
		fi
		if [[ -n $lib_old ]]; then
			echo "| $label | $clock | $(us "$p") | $(us "$o") | $(us "$n") | $(ratio "$o" "$p") | $(ratio "$n" "$p") | $(ratio "$n" "$o") |"
		else
			echo "| $label | $clock | $(us "$p") | $(us "$n") | $(ratio "$n" "$p") |"
		fi
	done
done
echo
if [[ -n $lib_old ]]; then
	echo "Segment files left in the runtime directory by the last run: fork+_exit old ${left[old,exit]}, new ${left[new,exit]}; fork+exec old ${left[old,exec]}, new ${left[new,exec]}."
else
	echo "Segment files left in the runtime directory by the last run: fork+_exit ${left[new,exit]}, fork+exec ${left[new,exec]}."
fi
