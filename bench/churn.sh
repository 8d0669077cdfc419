#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# churn.sh: what short-lived processes cost elided on a host where every
# program runs with libelide (`elidectl enable --system`).  Goal (issue 13):
# at 200 new processes a second elided uses at most 1% of one core and logs
# nothing per process at info level.
#
# Method: elided --no-bus --no-bpf on a private runtime directory (interval
# 1 s, no per-uid cap in the way), and bench/elide-churn starting processes
# at a fixed rate, all with LD_PRELOAD=libelide and ELIDE_RUNTIME_DIR set:
# in turn /bin/true, sed over a small file and bench/churn-worker (4
# threads that start on a held mutex, so the lock is contended and gets an
# entry in the segment).  Without RTM, ELIDE_SIM_ABORT=0x6 makes libelide
# run its RTM code paths (every transaction aborting), so the worker's lock
# is tracked as on an RTM host.  elided's CPU is read from /proc (utime +
# stime, and the scheduler's exact run time from /proc/PID/schedstat) from
# the start of the churn to its end plus two intervals (the exits of the
# last processes), divided by the churn's wall time: % of one core.  Log
# lines are counted from elided's stderr at its default (info) level.
#
# With --builddir-old the previous build (its own elided and libelide) runs
# in the same rounds, interleaved with this one.
#
# --memory N runs N processes in chunks of --chunk (default 1000) under one
# elided and reports its VmRSS, RssAnon and open descriptors after each
# chunk (once the exits are processed): they must not grow.
#
# Progress to stderr, the Markdown report to stdout.

set -euo pipefail

prog=${0##*/}
rate=200
seconds=30
runs=3
interval=1.0
mix=1:1:1
builddir=${top_builddir:-.}
builddir_old=""
perf_out=""
memory=0
chunk=1000
sim_abort=0x6

usage() {
	cat <<EOF
Usage: $prog [OPTIONS]

Options:
  --rate R            processes started per second (default $rate)
  --seconds S         churn window per run (default $seconds)
  --runs N            runs per build, interleaved between builds (default $runs)
  --interval S        elided's daemon.interval (default $interval)
  --mix T:S:W         weights of /bin/true, sed and churn-worker (default $mix)
  --builddir DIR      build tree with elided/elided, libelide and bench/
                      (default \$top_builddir, else .)
  --builddir-old DIR  a previous build tree to run in the same rounds
  --sim-abort STATUS  ELIDE_SIM_ABORT for the children where RTM is missing
                      (default $sim_abort; "" for pass-through libelide)
  --perf FILE         also 'perf record -g' elided during the first run
  --memory N          instead: N processes in chunks, elided's RSS and fds
                      after each chunk
  --chunk N           processes per chunk with --memory (default $chunk)
  -h, --help          show this help
EOF
}

die() { echo "$prog: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case "$1" in
	--rate) rate=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--interval) interval=$2; shift 2 ;;
	--mix) mix=$2; shift 2 ;;
	--builddir) builddir=$2; shift 2 ;;
	--builddir-old) builddir_old=$2; shift 2 ;;
	--sim-abort) sim_abort=$2; shift 2 ;;
	--perf) perf_out=$2; shift 2 ;;
	--memory) memory=$2; shift 2 ;;
	--chunk) chunk=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

abs() { (cd "$1" && pwd); }
builddir=$(abs "$builddir")
[ -z "$builddir_old" ] || builddir_old=$(abs "$builddir_old")
churn="$builddir/bench/elide-churn"
worker="$builddir/bench/churn-worker"
[ -x "$churn" ] && [ -x "$worker" ] || die "$churn or $worker not built (make bench/elide-churn bench/churn-worker)"
for b in "$builddir" $builddir_old; do
	[ -x "$b/elided/elided" ] || die "$b/elided/elided not built"
	[ -r "$b/libelide/.libs/libelide.so" ] || die "$b/libelide/.libs/libelide.so not built"
done
[ -z "$perf_out" ] || command -v perf >/dev/null || die "perf is not installed"

# The runtime directory lives in memory, as /run does on a host: on a disk
# file system the last munmap of a removed segment costs a truncation.
shm=${ELIDE_BENCH_SHM:-/dev/shm}
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
tmp=$(mktemp -d "$shm/churn.XXXXXX")
daemon=
cleanup() {
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

for _ in $(seq 1 40); do echo "elided takes the lock; sed reads a line abc"; done > "$tmp/input.txt"
hz=$(getconf CLK_TCK)

ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$daemon/stat"; }
run_ns() { awk '{ print $1 }' "/proc/$daemon/schedstat"; }
status_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$daemon/status"; }
nfds() { ls "/proc/$daemon/fd" | wc -l; }
# Wake-ups: the daemon's voluntary context switches.
wakeups() { awk '$1 == "voluntary_ctxt_switches:" { print $2 }' "/proc/$daemon/status"; }
now() { date +%s.%N; }
calc() { echo "scale=${2:-3}; $1" | bc; }

# start_daemon BUILDDIR TAG: a fresh runtime directory and log for it.
start_daemon() {
	local b=$1 tag=$2
	rundir="$tmp/run-$tag"
	log="$tmp/elided-$tag.log"
	rm -rf "$rundir"
	mkdir -m 1777 "$rundir"
	cat > "$tmp/elide.conf" <<EOF
daemon: { interval = $interval; max_segments_per_uid = 100000; };
default: { mode = "adaptive"; };
EOF
	"$b/elided/elided" --config "$tmp/elide.conf" --runtime-dir "$rundir" --no-bus --no-bpf >"$log" 2>&1 &
	daemon=$!
	for _ in $(seq 1 100); do
		grep -q "process discovery" "$log" && break
		kill -0 "$daemon" 2>/dev/null || { cat "$log" >&2; die "elided ($b) died at start-up"; }
		sleep 0.1
	done
	# Its first interval after start-up, then measure.
	sleep "$interval"
}

stop_daemon() {
	kill "$daemon"
	wait "$daemon" 2>/dev/null || true
	daemon=
}

# churn BUILDDIR ARGS...: elide-churn under that build's libelide.
churn() {
	local b=$1
	shift
	env LD_PRELOAD="$b/libelide/.libs/libelide.so" ELIDE_RUNTIME_DIR="$rundir" \
		${sim_abort:+ELIDE_SIM_ABORT=$sim_abort} \
		"$churn" --mix "$mix" --sed-input "$tmp/input.txt" --worker "$worker" "$@"
}

settle() { sleep "$(calc "2 * $interval + 0.2")"; }

header() {
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo) ($(nproc) online CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start)"
	echo "- kernel: $(uname -sr); runtime directory on $(df -T "$tmp" | awk 'NR == 2 { print $2 }')"
	echo "- rtm: $(grep -qw rtm /proc/cpuinfo && echo yes || echo "no; children run with ELIDE_SIM_ABORT=${sim_abort:-unset}")"
	echo "- new: $builddir ($(git -C "$builddir" rev-parse --short HEAD 2>/dev/null || git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'))"
	[ -z "$builddir_old" ] || echo "- old: $builddir_old ($(git -C "$builddir_old" rev-parse --short HEAD 2>/dev/null || echo '?'))"
}

if [ "$memory" -gt 0 ]; then
	echo "memory: $memory processes in chunks of $chunk at $rate/s" >&2
	start_daemon "$builddir" mem
	header
	echo "- setup: $memory processes (mix $mix) at $rate/s in chunks of $chunk under one elided, interval $interval s; figures after each chunk, once its exits were processed"
	echo
	echo "| after | processes | VmRSS kB | RssAnon kB | open fds | segments left | elided CPU s |"
	echo "|---:|---:|---:|---:|---:|---:|---:|"
	settle
	echo "| start | 0 | $(status_kb VmRSS) | $(status_kb RssAnon) | $(nfds) | $(ls "$rundir" | wc -l) | $(calc "$(ticks) / $hz" 2) |"
	done_n=0
	while [ "$done_n" -lt "$memory" ]; do
		n=$((memory - done_n < chunk ? memory - done_n : chunk))
		churn "$builddir" --rate "$rate" --count "$n" >"$tmp/churn.out" || true
		done_n=$((done_n + n))
		settle
		kill -0 "$daemon" 2>/dev/null || die "elided died"
		echo "| chunk $((done_n / chunk)) | $done_n | $(status_kb VmRSS) | $(status_kb RssAnon) | $(nfds) | $(ls "$rundir" | wc -l) | $(calc "$(ticks) / $hz" 2) |"
		echo "  $done_n processes: $(tail -n1 "$tmp/churn.out")" >&2
	done
	echo
	echo "- log lines at info level and above: $(wc -l < "$log") (including start-up)"
	stop_daemon
	exit 0
fi

builds=("$builddir")
[ -z "$builddir_old" ] || builds+=("$builddir_old")
declare -A rows
for run in $(seq 1 "$runs"); do
	for i in "${!builds[@]}"; do
		b=${builds[$i]}
		tag=$([ "$i" -eq 0 ] && echo new || echo old)
		echo "run $run, $tag: $rate/s for $seconds s" >&2
		start_daemon "$b" "$tag"
		base_lines=$(wc -l < "$log")
		perf_pid=
		if [ -n "$perf_out" ] && [ "$run" -eq 1 ]; then
			perf record --call-graph dwarf,16384 -F 2000 -o "$perf_out.$tag" -p "$daemon" >/dev/null 2>&1 &
			perf_pid=$!
		fi
		c0=$(ticks); s0=$(run_ns); v0=$(wakeups); w0=$(now)
		out=$(churn "$b" --rate "$rate" --seconds "$seconds") || echo "$prog: some children failed: $out" >&2
		w1=$(now)
		settle
		c1=$(ticks); s1=$(run_ns); v1=$(wakeups)
		if [ -n "$perf_pid" ]; then
			kill -INT "$perf_pid"
			wait "$perf_pid" || true
		fi
		kill -0 "$daemon" 2>/dev/null || die "elided died during the churn"
		spawned=$(sed -n 's/.*spawned=\([0-9]*\).*/\1/p' <<<"$out")
		achieved=$(sed -n 's/.*rate=\([0-9.]*\).*/\1/p' <<<"$out")
		wall=$(calc "$w1 - $w0" 4)
		lines=$(($(wc -l < "$log") - base_lines))
		pct_ticks=$(calc "100 * ($c1 - $c0) / $hz / $wall")
		pct_ns=$(calc "100 * ($s1 - $s0) / 1000000000 / $wall")
		us_per=$(calc "($s1 - $s0) / 1000 / $spawned" 1)
		left=$(ls "$rundir" | wc -l)
		rows[$tag]+="| $tag | $run | $spawned | $achieved | $pct_ticks | **$pct_ns** | $us_per | $(calc "($v1 - $v0) / $wall" 0) | $lines | $(calc "$lines / $spawned" 2) | $left | $(status_kb RssAnon) | $(nfds) |"$'\n'
		echo "  $out; elided $pct_ns% of one core, $lines log lines" >&2
		stop_daemon
		cp "$log" "$tmp/last-$tag.log"
	done
done

header
echo "- setup: elide-churn at $rate processes/s for $seconds s per run (mix true:sed:worker $mix), elided --no-bus --no-bpf, interval $interval s; CPU from the churn's start to its end + 2 intervals, over the churn's wall time"
echo
echo "| build | run | processes | achieved /s | elided CPU % (ticks) | elided CPU % (schedstat) | µs per process | wake-ups /s | log lines | lines per process | segments left | RssAnon kB | fds |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for tag in new old; do
	printf '%s' "${rows[$tag]:-}"
done
for tag in new old; do
	[ -f "$tmp/last-$tag.log" ] || continue
	echo
	echo "Log lines of the last $tag run by kind (numbers masked):"
	echo
	echo '```'
	sed -E 's/[0-9]+/N/g' "$tmp/last-$tag.log" | sort | uniq -c | sort -rn | head -n 8
	echo '```'
done
