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

# The report's first lines: when, on what, and whether RTM is there at all.
machine_lines() {
	local cpu rtm

	cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)
	if grep -qw rtm /proc/cpuinfo 2>/dev/null; then
		rtm="yes"
	else
		rtm="no (libelide passes through; glibc elision is inert)"
	fi
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- cpu: ${cpu:-unknown} ($(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') online CPUs)"
	echo "- rtm: $rtm"
	echo "- kernel: $(uname -srm)"
	echo "- glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown)"
}
