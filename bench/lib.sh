# shellcheck shell=bash disable=SC2154
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Shared by bench/compare.sh and bench/sysbench.sh: sourced, never run.
# Expects $prog (the script's name for messages).

die() { echo "$prog: $*" >&2; exit 1; }
usage_error() { echo "$prog: $* (see --help)" >&2; exit 2; }
need_value() { [[ $# -ge 2 ]] || usage_error "option '$1' needs a value"; }
is_uint() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }

# Median of the whitespace-separated numbers on stdin (0 when there are none).
median() {
	tr ' ' '\n' | grep . | sort -g | awk '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print 0; exit }
			if (NR % 2) print v[(NR + 1) / 2]
			else print (v[NR / 2] + v[NR / 2 + 1]) / 2
		}'
}

ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else printf "n/a" }'
}

# paired_ratio LIST_A LIST_B: the median of the rounds' ratios A/B, the
# lists in round order (runs seconds apart: the machine's drift cancels).
paired_ratio() {
	paste -d ' ' <(tr ' ' '\n' <<<"$1" | grep .) <(tr ' ' '\n' <<<"$2" | grep .) |
		awk '$2 > 0 { printf "%.6f ", $1 / $2 }' | median | xargs printf '%.3f'
}

# The report's first lines: when, on what, and whether RTM is there at all.
machine_lines() {
	local cpu rtm

	cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)
	if grep -qw rtm /proc/cpuinfo 2>/dev/null; then
		rtm="yes"
	else
		rtm="no (libelide watches contention, no transactions; libelide-off passes through; glibc elision is inert)"
	fi
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- cpu: ${cpu:-unknown} ($(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') online CPUs)"
	echo "- rtm: $rtm"
	echo "- kernel: $(uname -srm)"
	echo "- glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown)"
}

# The absolute path of the libelide.so at $1 (ld.so wants a path with a
# slash, and runs from other folders need it absolute); dies when the file
# is not readable.  $2 names it in messages ("libelide", "old libelide").
abs_lib() {
	[[ -r $1 ]] || die "$2 '$1' is not readable"
	echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
}

# ld.so only warns when a preload fails and then runs without it: die here,
# or a "libelide" configuration would silently measure plain glibc.
# Usage: check_preload LIB COMMAND... (a quick command to preload LIB into).
check_preload() {
	local lib=$1 err
	shift
	err=$(env -u ELIDE -u ELIDE_SIM_ABORT LD_PRELOAD="$lib" "$@" 2>&1 >/dev/null) || true
	[[ $err != *"cannot be preloaded"* ]] || die "ld.so cannot preload '$lib': $err"
}

# ELIDE_SIM_ABORT statuses by name: what _xbegin() returns for the abort.
sim_status() {
	case $1 in
	conflict)	echo 0x6 ;;	# _XABORT_RETRY | _XABORT_CONFLICT
	capacity)	echo 0x8 ;;	# _XABORT_CAPACITY
	none)		echo 0x0 ;;	# no bit set (an interrupt, a fault)
	*)		die "internal error: unknown simulated abort '$1'" ;;
	esac
}
