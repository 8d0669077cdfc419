#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# learned-short.sh: what the learned-policy store saves short-lived
# processes (issue 34).  tests/integration/workload-contended (4 threads on
# a static mutex and a global rwlock) runs R times for M ms under elided
# with its store, and R times under an elided started --no-learning,
# alternating between the two, each on a private runtime directory, state
# directory and D-Bus.  Every transaction aborts (ELIDE_SIM_ABORT; libelide
# honours it only where RTM is missing, so on an RTM machine the locks'
# real outcomes decide).  Counts come from each run's exit report (every
# abort is counted, none is sampled), so machine noise moves them little.
# Prints a Markdown table: aborts in all, those of the first run, runs
# with no abort at all, and the median per run.

set -euo pipefail

prog=${0##*/}
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
. "$script_dir/lib.sh"

runs=100
ms=200
top=${top_builddir:-}

usage() {
	cat <<EOF2
Usage: $prog [OPTIONS]

Options:
  --runs R        runs of each configuration (default $runs)
  --ms M          milliseconds each run works (default $ms)
  --build DIR     the build tree (default: \$top_builddir, ., .., this script's ..)
  -h, --help      show this help
EOF2
}

while [[ $# -gt 0 ]]; do
	case $1 in
	--runs) need_value "$@"; is_uint "$2" || usage_error "--runs wants a positive integer"; runs=$2; shift 2 ;;
	--ms) need_value "$@"; is_uint "$2" || usage_error "--ms wants a positive integer"; ms=$2; shift 2 ;;
	--build) need_value "$@"; top=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown option '$1'" ;;
	esac
done

if [[ -z $top ]]; then
	for d in . .. "$script_dir/.."; do
		[[ -x $d/elided/elided ]] && { top=$d; break; }
	done
fi
[[ -n $top && -x $top/elided/elided ]] || die "no build tree with elided/elided (--build DIR)"
top=$(cd "$top" && pwd)
elided=$top/elided/elided
workload=$top/tests/integration/workload-contended
lib=$(abs_lib "$top/libelide/.libs/libelide.so" libelide)
[[ -x $workload ]] || die "$workload is not built (make check builds it)"
command -v dbus-daemon >/dev/null && command -v busctl >/dev/null || die "dbus-daemon and busctl are needed"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/learned-short.XXXXXX")
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# setup NAME [elided options...]: a bus and an elided of its own.
setup() {
	local name=$1 dir=$tmp/$1
	shift
	mkdir -p "$dir/run" && chmod 1777 "$dir/run"
	cat >"$dir/bus.conf" <<EOF2
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$dir/bus.socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
EOF2
	dbus-daemon --config-file="$dir/bus.conf" --nofork --nopidfile 2>>"$dir/bus.log" &
	pids+=($!)
	for _ in $(seq 100); do [[ -S $dir/bus.socket ]] && break; sleep 0.05; done
	printf 'daemon: { interval = 0.5; };\ndefault: { mode = "adaptive"; };\n' >"$dir/elide.conf"
	DBUS_SYSTEM_BUS_ADDRESS=unix:path=$dir/bus.socket "$elided" --no-bpf --config "$dir/elide.conf" \
		--runtime-dir "$dir/run" --state-dir "$dir/state" "$@" >>"$dir/elided.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 200); do
		DBUS_SYSTEM_BUS_ADDRESS=unix:path=$dir/bus.socket busctl --system --timeout=2 get-property org.elide.elided1 \
			/org/elide/elided1 org.elide.Manager1 Version >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	die "elided ($name) did not come up: $(tail -n 3 "$dir/elided.log")"
}

# run NAME: one run; prints its aborts in all and on cache_lock.
run() {
	local dir=$tmp/$1
	ELIDE_RUNTIME_DIR=$dir/run ELIDE_SIM_ABORT=0x6 ELIDE=report=1 LD_PRELOAD=$lib \
		"$workload" --ms "$ms" >/dev/null 2>"$dir/report" || die "a run under $1 failed: $(tail -n 3 "$dir/report")"
	# After the kind: acquired, elided%, commit%, then the 8 abort causes.
	awk '$1 == "libelide:" { k = 0; for (i = 3; i <= NF; i++) if ($i ~ /^(mutex|rw-rd|rw-wr)$/) { k = i; break }
		if (!k) next; s = 0; for (i = k + 4; i <= k + 11; i++) s += $i; all += s; if ($2 == "cache_lock") cache += s }
		END { print all + 0, cache + 0 }' "$dir/report"
}

setup store
setup nostore --no-learning
declare -A total first zero list
for c in store nostore; do total[$c]=0; zero[$c]=0; list[$c]=""; done
for ((i = 1; i <= runs; i++)); do
	for c in store nostore; do
		read -r all _cache < <(run "$c")
		total[$c]=$((total[$c] + all))
		[[ $i -eq 1 ]] && first[$c]=$all
		[[ $all -eq 0 ]] && zero[$c]=$((zero[$c] + 1))
		list[$c]+="$all "
	done
done

echo "### Aborts of $runs runs of ${ms} ms, with and without the learned store"
echo
machine_lines
echo "- workload: $workload --ms $ms (4 threads), ELIDE_SIM_ABORT=0x6, runs alternating"
echo
echo "| elided | aborts in all | first run | runs with no abort | median per run |"
echo "|---|---:|---:|---:|---:|"
for c in store nostore; do
	label=$([[ $c == store ]] && echo "with its store" || echo "--no-learning")
	echo "| $label | ${total[$c]} | ${first[$c]} | ${zero[$c]} of $runs | $(median <<<"${list[$c]}") |"
done
