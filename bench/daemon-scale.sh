#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# daemon-scale.sh: elided's own CPU cost at scale.  Goals: with 100
# processes of 1000 active locks each at a 1 s interval, elided uses at most
# 1% of one core (issue 9); and 1000 x 100 and 300 x 1000 at most 1% each,
# cost linear in the number of active locks (issue 13).
#
# Method, per point PROCSxLOCKS: PROCS live `sleep` processes, one
# seg-forge segment of LOCKS locks each (lock addresses and call sites
# partly inside the sleeps' libc, so naming resolves real symbols), one
# `seg-forge --animate` bumping the counters of --active percent of every
# segment's locks through a shared mapping every 0.5 s (as libelide does),
# and elided --no-bus --no-bpf (with --bpf: BPF discovery) on that private
# runtime directory (in memory, as /run is).  Once every segment is adopted and after a warm-up, elided's
# utime+stime from /proc/PID/stat (and its exact run time from
# /proc/PID/schedstat) over the measurement window gives CPU% of one core.
# With --builddir-old the previous build's elided runs on the same segments
# and animator in the same rounds, interleaved with this one (the segment
# format is the same).  Needs no root and no RTM.  Progress to stderr, the
# report to stdout.

set -euo pipefail

prog=${0##*/}
points=""
procs=100
locks=1000
active=100
interval=1.0
warmup=5
seconds=30
rounds=1
builddir=${top_builddir:-.}
builddir_old=""
perf_out=""
discovery=--no-bpf

usage() {
	cat <<EOF
Usage: $prog [OPTIONS]

Options:
  --procs N          live processes with a segment each (default $procs)
  --locks L          locks per segment (default $locks)
  --points "PxL ..." several points in one run, e.g. "100x1000 1000x100"
                     (instead of --procs and --locks)
  --active PCT       percent of each segment's locks whose counters move
                     (default $active)
  --interval S       elided's daemon.interval (default $interval)
  --warmup S         seconds after adoption before measuring (default $warmup)
  --seconds S        measurement window (default $seconds)
  --rounds N         measurements per point and build, interleaved (default $rounds)
  --builddir DIR     build tree with elided/elided and tests/integration/seg-forge
                     (default \$top_builddir, else .)
  --builddir-old DIR a previous build tree whose elided runs in the same rounds
  --bpf              let elided discover processes with BPF (as root where
                     BTF is there) instead of inotify + pidfd
  --perf FILE        also 'perf record -g' this build's elided during the
                     first window of each point (FILE.PxL)
  -h, --help         show this help
EOF
}

die() { echo "$prog: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case "$1" in
	--procs) procs=$2; shift 2 ;;
	--locks) locks=$2; shift 2 ;;
	--points) points=$2; shift 2 ;;
	--active) active=$2; shift 2 ;;
	--interval) interval=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--builddir) builddir=$2; shift 2 ;;
	--builddir-old) builddir_old=$2; shift 2 ;;
	--perf) perf_out=$2; shift 2 ;;
	--bpf) discovery=; shift ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[ -n "$points" ] || points="${procs}x${locks}"

forge="$builddir/tests/integration/seg-forge"
[ -x "$forge" ] || die "$forge not built (make tests/integration/seg-forge)"
builds=("$builddir")
[ -z "$builddir_old" ] || builds+=("$builddir_old")
for b in "${builds[@]}"; do
	[ -x "$b/elided/elided" ] || die "$b/elided/elided not built (make elided/elided)"
done
[ -z "$perf_out" ] || command -v perf >/dev/null || die "perf is not installed"

# Segments live in memory, as in /run on a host.
shm=${ELIDE_BENCH_SHM:-/dev/shm}
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
tmp=$(mktemp -d "$shm/daemon-scale.XXXXXX")
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

ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$daemon/stat"; }
run_ns() { awk '{ print $1 }' "/proc/$daemon/schedstat"; }
status_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$daemon/status"; }
nfds() { ls "/proc/$daemon/fd" | wc -l; }
now() { date +%s.%N; }
calc() { echo "scale=${2:-3}; $1" | bc; }
hz=$(getconf CLK_TCK)

echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo) ($(nproc) online CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg) at the start)"
echo "- kernel: $(uname -sr); segments on $(df -T "$tmp" | awk 'NR == 2 { print $2 }')"
echo "- new: $builddir ($(git -C "$builddir" rev-parse --short HEAD 2>/dev/null || git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'))"
[ -z "$builddir_old" ] || echo "- old: $builddir_old ($(git -C "$builddir_old" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "- setup: interval $interval s, $active% of the locks moving, warm-up $warmup s, window $seconds s, $rounds round(s) per point and build, discovery ${discovery:-with BPF}"
echo
echo "| point | active locks | build | round | elided CPU % (ticks) | elided CPU % (schedstat) | ms per interval | ns per active lock | adoption CPU s | RssAnon kB | fds | warnings |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"

for point in $points; do
	p_procs=${point%x*}
	p_locks=${point#*x}
	[[ $p_procs =~ ^[0-9]+$ && $p_locks =~ ^[0-9]+$ ]] || die "bad point '$point' (PROCSxLOCKS)"
	rundir="$tmp/run-$point"
	mkdir -m 1777 "$rundir"
	cat > "$tmp/elide.conf" <<EOF
daemon: { interval = $interval; max_segments_per_uid = $((p_procs > 64 ? p_procs : 64)); };
default: { mode = "adaptive"; };
EOF
	echo "$point: spawning $p_procs processes, forging $p_locks locks each" >&2
	pids=()
	for _ in $(seq 1 "$p_procs"); do
		sleep 3600 &
		pids+=("$!")
	done
	for p in "${pids[@]}"; do
		"$forge" --dir "$rundir" --pid "$p" --locks "$p_locks" >/dev/null
	done
	"$forge" --dir "$rundir" --animate 0 --active "$active" 2>/dev/null &
	animator=$!
	active_locks=$((p_procs * (p_locks / 100 * active + (p_locks % 100 < active ? p_locks % 100 : active))))

	for round in $(seq 1 "$rounds"); do
		for i in "${!builds[@]}"; do
			b=${builds[$i]}
			tag=$([ "$i" -eq 0 ] && echo new || echo old)
			log="$tmp/elided-$point-$tag-$round.log"
			t0=$(now)
			"$b/elided/elided" --config "$tmp/elide.conf" --runtime-dir "$rundir" --no-bus $discovery >"$log" 2>&1 &
			daemon=$!
			# Adopted segments stay mapped (read-only) in elided: count the
			# mappings (its log names adoptions only at debug level).
			adopted() { grep -c '\.seg$' "/proc/$daemon/maps" 2>/dev/null || true; }
			for _ in $(seq 1 1200); do
				[ "$(adopted)" -ge "$p_procs" ] && break
				kill -0 "$daemon" 2>/dev/null || { cat "$log" >&2; die "elided ($tag) died"; }
				sleep 0.1
			done
			[ "$(adopted)" -ge "$p_procs" ] || die "only $(adopted) of $p_procs segments adopted after 120 s"
			adopt_cpu=$(calc "$(ticks) / $hz" 2)
			echo "  $point $tag round $round: adopted in $(calc "$(now) - $t0" 2) s wall, $adopt_cpu s CPU" >&2
			sleep "$warmup"
			perf_pid=
			if [ -n "$perf_out" ] && [ "$tag" = new ] && [ "$round" -eq 1 ]; then
				perf record -g -o "$perf_out.$point" -p "$daemon" >/dev/null 2>&1 &
				perf_pid=$!
			fi
			c0=$(ticks); s0=$(run_ns); w0=$(now)
			sleep "$seconds"
			c1=$(ticks); s1=$(run_ns); w1=$(now)
			if [ -n "$perf_pid" ]; then
				kill -INT "$perf_pid"
				wait "$perf_pid" || true
			fi
			kill -0 "$daemon" 2>/dev/null || die "elided ($tag) died during the measurement"
			wall=$(calc "$w1 - $w0" 4)
			pct_ticks=$(calc "100 * ($c1 - $c0) / $hz / $wall")
			pct_ns=$(calc "100 * ($s1 - $s0) / 1000000000 / $wall")
			ms_int=$(calc "($s1 - $s0) / 1000000 / ($wall / $interval)" 2)
			ns_lock=$([ "$active_locks" -gt 0 ] && calc "($s1 - $s0) / ($wall / $interval) / $active_locks" 1 || echo "-")
			warnings=$(grep -c "ignoring\|cannot" "$log" || true)
			echo "| $point | $active_locks | $tag | $round | $pct_ticks | **$pct_ns** | $ms_int | $ns_lock | $adopt_cpu | $(status_kb RssAnon) | $(nfds) | $warnings |"
			echo "  $point $tag round $round: $pct_ns% of one core, $ms_int ms per interval" >&2
			kill "$daemon"
			wait "$daemon" 2>/dev/null || true
			daemon=
		done
	done
	kill "$animator" "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	animator=
	pids=()
	rm -rf "$rundir"
done
