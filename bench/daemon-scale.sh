#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# daemon-scale.sh: elided's own CPU cost at scale.  Goal (the issue): with
# 100 processes of 1000 active locks each at a 1 s interval, elided uses at
# most 1% of one core.
#
# Method: N live `sleep` processes, one seg-forge segment of L locks each
# (lock addresses and call sites partly inside the sleeps' libc, so naming
# resolves real symbols), one `seg-forge --animate` bumping every lock's
# counters through a shared mapping every 0.5 s (as libelide does), and
# elided --no-bus --no-bpf on that private runtime directory.  Once every
# segment is adopted and after a warm-up, elided's utime+stime from
# /proc/PID/stat over the measurement window gives CPU% of one core.
# Needs no root and no RTM.  Progress to stderr, the report to stdout.

set -euo pipefail

prog=${0##*/}
procs=100
locks=1000
interval=1.0
warmup=5
seconds=30
builddir=${top_builddir:-.}
perf_out=""

usage() {
	cat <<EOF
Usage: $prog [OPTIONS]

Options:
  --procs N        live processes with a segment each (default $procs)
  --locks L        active locks per segment (default $locks)
  --interval S     elided's daemon.interval (default $interval)
  --warmup S       seconds after adoption before measuring (default $warmup)
  --seconds S      measurement window (default $seconds)
  --builddir DIR   build tree with elided/elided and tests/integration/seg-forge
                   (default \$top_builddir, else .)
  --perf FILE      also run 'perf record -g' on elided during the window
  -h, --help       show this help
EOF
}

die() { echo "$prog: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case "$1" in
	--procs) procs=$2; shift 2 ;;
	--locks) locks=$2; shift 2 ;;
	--interval) interval=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--builddir) builddir=$2; shift 2 ;;
	--perf) perf_out=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

elided="$builddir/elided/elided"
forge="$builddir/tests/integration/seg-forge"
[ -x "$elided" ] || die "$elided not built (make elided/elided)"
[ -x "$forge" ] || die "$forge not built (make tests/integration/seg-forge)"
[ -z "$perf_out" ] || command -v perf >/dev/null || die "perf is not installed"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/daemon-scale.XXXXXX")
pids=()
daemon=
animator=
cleanup() {
	[ -n "$animator" ] && kill "$animator" 2>/dev/null
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null
	[ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

rundir="$tmp/run"
log="$tmp/elided.log"
mkdir -m 1777 "$rundir"
cap=$((procs > 64 ? procs : 64))
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = $interval; max_segments_per_uid = $cap; };
default: { mode = "adaptive"; };
EOF

ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$daemon/stat"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$daemon/status"; }
# Segments stay mapped: RssFile/RssShmem are the processes' pages, shared.
anon_kb() { awk '/^RssAnon:/ { print $2 }' "/proc/$daemon/status"; }
now() { date +%s.%N; }
hz=$(getconf CLK_TCK)

echo "spawning $procs processes, forging $locks locks each" >&2
for _ in $(seq 1 "$procs"); do
	sleep 600 &
	pids+=("$!")
done
for p in "${pids[@]}"; do
	"$forge" --dir "$rundir" --pid "$p" --locks "$locks" >/dev/null
done

t0=$(now)
"$elided" --config "$tmp/elide.conf" --runtime-dir "$rundir" --no-bus --no-bpf >"$log" 2>&1 &
daemon=$!
adopted() { grep -c "tracking pid" "$log" || true; }
for _ in $(seq 1 1200); do
	[ "$(adopted)" -ge "$procs" ] && break
	kill -0 "$daemon" 2>/dev/null || { cat "$log" >&2; die "elided died"; }
	sleep 0.1
done
[ "$(adopted)" -ge "$procs" ] || die "only $(adopted) of $procs segments adopted after 120 s"
t1=$(now)
adopt_ticks=$(ticks)
adopt_rss=$(rss_kb)
echo "all $procs adopted in $(echo "$t1 - $t0" | bc) s ($adopt_ticks ticks of CPU)" >&2

"$forge" --dir "$rundir" --animate 0 2>/dev/null &
animator=$!
sleep "$warmup"
perf_pid=
if [ -n "$perf_out" ]; then
	perf record -g -o "$perf_out" -p "$daemon" -- sleep "$seconds" >/dev/null 2>&1 &
	perf_pid=$!
fi
c0=$(ticks)
w0=$(now)
sleep "$seconds"
c1=$(ticks)
w1=$(now)
[ -n "$perf_pid" ] && wait "$perf_pid"
kill -0 "$daemon" 2>/dev/null || die "elided died during the measurement"
rss=$(rss_kb)
anon=$(anon_kb)
intervals=$(echo "($w1 - $w0) / $interval" | bc)

cpu_s=$(echo "scale=4; ($c1 - $c0) / $hz" | bc)
wall_s=$(echo "scale=4; $w1 - $w0" | bc)
pct=$(echo "scale=3; 100 * $cpu_s / $wall_s" | bc)
per_interval_ms=$(echo "scale=2; 1000 * $cpu_s / $intervals" | bc)
warnings=$(grep -c "ignoring\|cannot" "$log" || true)

cat <<EOF
- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')
- cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo) ($(nproc) online CPUs)
- kernel: $(uname -sr)
- setup: $procs processes x $locks locks, interval $interval s, warm-up $warmup s, window $seconds s
- adoption: all $procs segments in $(echo "scale=2; ($t1 - $t0) / 1" | bc) s wall, $(echo "scale=2; $adopt_ticks / $hz" | bc) s CPU; RSS then $adopt_rss kB
- elided CPU: $cpu_s s over $wall_s s = **$pct% of one core** ($per_interval_ms ms per interval)
- elided RSS after the window: $rss kB, of which $anon kB its own (RssAnon; the rest is the mapped segments, shared)
- log warnings during the run: $warnings
EOF
