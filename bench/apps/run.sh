#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/apps/run.sh: real multi-threaded programs from Debian under a load
# generator, with and without libelide (issue 35).  See bench/apps/README.md.
#
#   memcached  memcached -t THREADS, loaded by memaslap (libmemcached-tools)
#   mariadb    mariadbd in a private datadir, loaded by sysbench OLTP
#              (oltp_point_select, oltp_read_write)
#   rocksdb    RocksDB's db_bench (rocksdb-tools): readrandom and
#              readwhilewriting on a database filled once with fillseq
#   python     bench/apps/gil.py: CPU-bound CPython threads (the GIL)
#
# Configurations (only the server gets them, never the load generator):
#   plain      no preload
#   default    LD_PRELOAD=libelide.so, ELIDE unset
#   off        LD_PRELOAD=libelide.so ELIDE=mode=off
#   watch0     LD_PRELOAD=libelide.so ELIDE=watch=0
#   simabort   LD_PRELOAD=libelide.so ELIDE=mode=adaptive ELIDE_SIM_ABORT=0x6
# and, named with --configs: nospin (ELIDE=wait_spins=0), ownmutex0
# (ELIDE=own_mutex=0), ownrwlock0 (ELIDE=own_rwlock=0).
#
# Every run with libelide gets a fresh, private ELIDE_RUNTIME_DIR (mode
# 1777) under the run's temporary folder; no elided is needed.  Round r runs
# every configuration once, starting with configuration r (mod their number); the
# tables give medians over rounds and, for the ratios to plain, the median of
# the per-round ratios (bench/lib.sh's paired_ratio).

set -euo pipefail

prog=apps/run.sh
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
. "$script_dir/../lib.sh"
# shellcheck source=bench/apps/common.sh
. "$script_dir/common.sh"

cmdline="bench/apps/run.sh"
for a in "$@"; do cmdline+=" $(printf '%q' "$a")"; done

configs=(plain default off watch0 simabort)

rounds="" seconds="" programs="$all_programs" threads="" lib="" out="" raw="" quick=no from=() configs_given=no pin=no
workloads="" trace=no
all_workloads="get90-set10 oltp_point_select oltp_read_write readrandom readwhilewriting gil"

usage() {
	cat <<EOF
Usage: $prog [OPTIONS]

Runs real multi-threaded programs under a load generator, each under five
configurations (plain, default, off, watch0, simabort: see README.md) in
interleaved rounds, and prints one Markdown table per program: throughput,
p50/p99/p99.9 and maximum latency, the server's CPU time per operation, and
the ratios of throughput, p99, max and CPU/op to plain.

Programs (missing Debian packages are installed with apt-get when running
as root; otherwise the program is skipped with the list of what is missing):
  memcached   memcached -t THREADS loaded by memaslap   (memcached, libmemcached-tools)
  mariadb     mariadbd + sysbench oltp_point_select and oltp_read_write
                                                      (mariadb-server, sysbench)
  rocksdb     db_bench readrandom and readwhilewriting (rocksdb-tools, time)
  python      gil.py: CPU-bound CPython threads        (python3)

Options:
  --rounds R          rounds; each runs every configuration once (default 3)
  --seconds S         measured seconds per run (default 5)
  --programs "LIST"   a subset of: $all_programs (default all)
  --threads "LIST"    server thread counts (default "$nproc $((4 * nproc))":
                      the online CPUs, and 4x that, oversubscribed)
  --lib PATH          libelide.so (default: \$top_builddir/libelide/.libs/,
                      ./libelide/.libs/, ./b/libelide/.libs/ or
                      ../../libelide/.libs/ next to this script)
  --out FILE          also write the report to FILE
  --raw DIR           write every run's figures to DIR/runs.tsv
  --quick             smoke test: --rounds 1 --seconds 1, a smaller RocksDB
  --pin               memcached and MariaDB: the server on the upper half
                      of the online CPUs, its load generator on the lower
                      half (taskset), so that neither takes the other's
                      CPU; RocksDB and CPython, their own load, unpinned
  --from FILE         run nothing: the tables of an earlier run's runs.tsv
                      (--raw), e.g. to judge it again; repeated, the
                      rounds of every FILE pooled (refused where one
                      configuration ran two builds of libelide);
                      --programs and --configs select from them
  --configs "LIST"    configurations to run, plain first (default
                      "${configs[*]}"; also: nospin, the default with
                      ELIDE=wait_spins=0: waiters sleep at once, as glibc's;
                      ownmutex0 and ownrwlock0, the default with
                      ELIDE=own_mutex=0 or own_rwlock=0: glibc takes
                      default mutexes or rwlocks' read side itself)
  --trace             as root, also trace the scheduler and the futex calls
                      of the preloaded process over each measured run
                      (tracefs): its mutex waits in the kernel, their
                      longest, and its longest preemption (waits.awk; a
                      second table)
  --workloads "LIST"  only these workloads of the programs run (e.g.
                      "readrandom"); a program with none of them is skipped
  -h, --help          show this help

Each ratio to plain is the median of the rounds' own ratios, with its 95%
interval (from 6 rounds on); a goal of the default is met where the whole
interval meets it, missed (bold) where none of it does, and not resolved
by the run (italics) otherwise: more rounds, or a quieter machine.

Progress goes to stderr, the report to stdout.  A run that fails, or a
preload that did not take, stops the script with exit status 1; a usage
error exits 2.
EOF
}

while [[ $# -gt 0 ]]; do
	case $1 in
	--rounds)	need_value "$@"; rounds=$2; shift 2 ;;
	--seconds)	need_value "$@"; seconds=$2; shift 2 ;;
	--programs)	need_value "$@"; programs=$2; shift 2 ;;
	--threads)	need_value "$@"; threads=$2; shift 2 ;;
	--lib)		need_value "$@"; lib=$2; shift 2 ;;
	--out)		need_value "$@"; out=$2; shift 2 ;;
	--raw)		need_value "$@"; raw=$2; shift 2 ;;
	--configs)	need_value "$@"; read -r -a configs <<<"$2"; configs_given=yes; shift 2 ;;
	--workloads)	need_value "$@"; workloads=$2; shift 2 ;;
	--quick)	quick=yes; shift ;;
	--from)		need_value "$@"; from+=("$2"); shift 2 ;;
	--pin)		pin=yes; shift ;;
	--trace)	trace=yes; shift ;;
	-h|--help)	usage; exit 0 ;;
	*)		usage_error "unknown argument '$1'" ;;
	esac
done

if [[ $quick == yes ]]; then
	: "${rounds:=1}" "${seconds:=1}"
	rocks_num=100000
else
	: "${rounds:=3}" "${seconds:=5}"
	rocks_num=500000
fi
# merge_runs FILE...: the runs of every FILE on stdout, one header, each
# round named FILE-INDEX.ROUND, and the build column (a runs.tsv of before
# it: "?"); dies where a file is not a runs.tsv, or where a configuration
# ran two builds of libelide, whose rounds are not one sample.
merge_runs() {
	local f i=0
	for f in "$@"; do
		[[ -r $f && -f $f ]] || die "--from: cannot read '$f'"
		[[ $(head -n1 "$f") == "$(runs_header | cut -f 1-14)"* ]] ||
			die "--from: '$f' is not a runs.tsv of this script (its first line is not the header)"
	done
	runs_header
	for f in "$@"; do
		i=$((i + 1))
		awk -F '\t' -v OFS='\t' -v i="$i" 'NR > 1 { $4 = i "." $4; if (NF < 15) $15 = ($5 == "plain" ? "-" : "?")
			for (k = 16; k <= 19; k++) if (k > NF) $k = "-"
			print }' "$f"
	done
}
runs_header() {
	printf 'program\tworkload\tthreads\tround\tconfig\tops\tseconds\tops_per_sec\tp50_us\tp99_us\tp999_us\tcpu_s\tcpu_us_per_op\tmax_us\tlibelide'
	printf '\tlock_sleeps\tlock_sleep_us\tlock_sleep_max_us\tpreempt_max_us\n'
}

if [[ ${#from[@]} -gt 0 ]]; then
	# The rounds, thread counts and configurations are the files'.
	from_tsv=$(mktemp "${TMPDIR:-/tmp}/elide-apps-from.XXXXXX") || die "cannot create a temporary file"
	trap 'rm -f "$from_tsv"' EXIT
	merge_runs "${from[@]}" >"$from_tsv"
	builds=$(awk -F '\t' 'NR > 1 && $5 != "plain" && !seen[$5, $15]++ { b[$5] = b[$5] " " $15; n[$5]++ }
		END { for (c in n) if (n[c] > 1) print c ":" b[c] }' "$from_tsv")
	[[ -z $builds ]] || die "--from: these configurations ran more than one build of libelide (sha256 prefixes; ? = not recorded), so their rounds cannot be pooled: $builds"
	in_file() { awk -F '\t' -v col="$1" 'NR > 1 && !seen[$col]++ { printf "%s ", $col }' "$from_tsv"; }
	rounds=$(in_file 4 | wc -w) threads=$(in_file 3)
	[[ $rounds -gt 0 ]] || die "--from: no runs in ${from[*]}"
	if [[ $configs_given == no ]]; then
		configs=(plain)
		for c in $all_configs; do
			[[ $c == plain || " $(in_file 5) " != *" $c "* ]] || configs+=("$c")
		done
	fi
fi
: "${threads:=$nproc $((4 * nproc))}"
is_uint "$rounds" || usage_error "--rounds must be a positive integer, not '$rounds'"
is_uint "$seconds" || usage_error "--seconds must be a positive integer, not '$seconds'"
check_selection
for w in $workloads; do
	[[ " $all_workloads " == *" $w "* ]] || usage_error "unknown workload '$w' (known: $all_workloads)"
done
[[ ${#from[@]} -gt 0 ]] || find_lib
if [[ $pin == yes ]]; then
	((nproc >= 2)) || usage_error "--pin needs at least 2 online CPUs (this machine has $nproc)"
	command -v taskset >/dev/null || die "--pin needs taskset (util-linux)"
	pin_load="0-$((nproc / 2 - 1))" pin_server="$((nproc / 2))-$((nproc - 1))"
fi

clk_tck=$(getconf CLK_TCK)
start_s=$(date +%s)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/elide-apps.XXXXXX") || die "cannot create a temporary folder"
chmod 755 "$tmp"
mkdir -m 1777 "$tmp/rt"
srv=""		# the server (or db_bench's /usr/bin/time) now running, if any
srv2=""		# db_bench itself, below time(1) and timeout(1)
cleanup() {
	[[ -z $srv2 ]] || kill "$srv2" 2>/dev/null || true
	if [[ -n $srv ]]; then
		kill "$srv" 2>/dev/null || true
		wait "$srv" 2>/dev/null || true
	fi
	rm -rf "$tmp"
	[[ -z ${from_tsv:-} ]] || rm -f "$from_tsv"
	trace_close
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- --trace: tracefs ----------------------------------------------------------

tracefs=/sys/kernel/tracing
trace_saved=()	# what trace_open changed, as "FILE VALUE" to write back
traced=""	# trace_end's figures for record(): "SLEEPS SLEEP_US SLEEP_MAX_US PREEMPT_MAX_US"

# trace_open: tracefs ready for the events waits.awk reads, or a clear
# reason to stop; the settings it changes are put back on exit.
trace_open() {
	local e f
	[[ $(id -u) -eq 0 ]] || usage_error "--trace needs root (tracefs)"
	[[ -r $tracefs/trace ]] || mount -t tracefs nodev "$tracefs" 2>/dev/null ||
		die "--trace: no tracefs at $tracefs, and mounting it failed"
	for e in sched/sched_switch syscalls/sys_enter_futex syscalls/sys_exit_futex; do
		[[ -d $tracefs/events/$e ]] || die "--trace: this kernel has no $e event (CONFIG_FTRACE_SYSCALLS?)"
	done
	# tracing_on alone is 1 on a fresh tracefs, recording nothing
	[[ $(cat "$tracefs/set_event") == "" && $(cat "$tracefs/current_tracer") == nop ]] ||
		die "--trace: tracefs is in use (events set, or a tracer other than nop): not taking it over"
	for f in tracing_on buffer_size_kb options/record-tgid; do
		trace_saved+=("$f $(awk '{ print $1 }' "$tracefs/$f")")
	done
	if ! { echo 0 >"$tracefs/tracing_on" && echo 65536 >"$tracefs/buffer_size_kb" &&
		echo 1 >"$tracefs/options/record-tgid" &&
		echo "sched:sched_switch syscalls:sys_enter_futex syscalls:sys_exit_futex" >"$tracefs/set_event"; }; then
		die "--trace: cannot set up tracefs"
	fi
}

trace_close() {
	local s
	[[ ${#trace_saved[@]} -gt 0 ]] || return 0
	echo 0 >"$tracefs/tracing_on"
	echo >"$tracefs/set_event"
	echo >"$tracefs/trace"
	for s in "${trace_saved[@]}"; do echo "${s#* }" >"$tracefs/${s%% *}"; done
	trace_saved=()
}

trace_begin() {
	[[ $trace == yes ]] || return 0
	echo >"$tracefs/trace"
	echo 1 >"$tracefs/tracing_on"
}

# trace_end PID: the figures of PID's threads since trace_begin in $traced
trace_end() {
	local lost
	[[ $trace == yes ]] || return 0
	echo 0 >"$tracefs/tracing_on"
	[[ $1 =~ ^[1-9][0-9]*$ ]] || die "ABORT: --trace: the preloaded process's id is unknown ('$1')"
	lost=$(awk '$1 == "overrun:" { n += $2 } END { print n + 0 }' "$tracefs"/per_cpu/cpu*/stats)
	[[ $lost -eq 0 ]] || log "warning: --trace lost $lost events (buffer overrun): these waits may be short"
	traced=$(awk -v tgid="$1" -f "$script_dir/waits.awk" "$tracefs/trace") ||
		die "ABORT: --trace: no event of process $1 in the trace"
}

if [[ ${#from[@]} -gt 0 ]]; then
	runs_tsv=$from_tsv
elif [[ -n $raw ]]; then
	mkdir -p "$raw" || die "cannot create '$raw'"
	runs_tsv=$raw/runs.tsv
else
	runs_tsv=$tmp/runs.tsv
fi
[[ ${#from[@]} -gt 0 ]] || runs_header >"$runs_tsv"
# The build of libelide in each run's row, so that --from pools only rounds
# of one build.
lib_id=-
[[ ${#from[@]} -gt 0 ]] || lib_id=$(sha256sum "$lib" | cut -c 1-12)
report=$tmp/report.md
: >"$report"

# cpu_ticks PID: utime + stime of every thread of PID, in clock ticks.
cpu_ticks() {
	local s
	s=$(<"/proc/$1/stat") || die "ABORT: cannot read /proc/$1/stat"
	s=${s##*) }
	awk '{ print $12 + $13 }' <<<"$s"
}

# record PROGRAM WORKLOAD THREADS ROUND CONFIG OPS SECONDS P50 P99 P999 CPU_S MAX
# (latencies in us; MAX is the longest single operation; then the build of
# libelide, and --trace's four figures ($traced, "-" untraced); all after
# the older columns, which keep their numbers)
record() {
	awk -v OFS='\t' -v p="$1" -v w="$2" -v t="$3" -v r="$4" -v c="$5" -v ops="$6" -v s="$7" \
		-v p50="$8" -v p99="$9" -v p999="${10}" -v cpu="${11}" -v mx="${12}" -v lib="$lib_id" \
		-v waits="${traced:-- - - -}" 'BEGIN {
		if (!(ops > 0) || !(s > 0)) {
			print "no operations" > "/dev/stderr"
			exit 1
		}
		if (mx == "" || !(mx + 0 >= 0)) {
			print "no maximum latency" > "/dev/stderr"
			exit 1
		}
		gsub(/ /, "\t", waits)
		printf "%s\t%s\t%s\t%s\t%s\t%d\t%.4f\t%.1f\t%s\t%s\t%s\t%.4f\t%.3f\t%s\t%s\t%s\n", p, w, t, r, c, ops, s,
			ops / s, p50, p99, p999, cpu, cpu * 1e6 / ops, mx, c == "plain" ? "-" : lib, waits
	}' >>"$runs_tsv" || die "ABORT: $1 $2 threads=$3 $5: the run reported no operations or no maximum latency"
	log "$(printf '%-9s %-17s t=%-3s round %s %-8s %10.0f ops/s  p99 %8s us  max %9s us  cpu %7.2f us/op' \
		"$1" "$2" "$3" "$4" "$5" "$(awk -v o="$6" -v s="$7" 'BEGIN { print o / s }')" "$9" "${12}" \
		"$(awk -v c="${11}" -v o="$6" 'BEGIN { print c * 1e6 / o }')")"
}

# ---- the driver -----------------------------------------------------------

# only_workloads "WORKLOADS": those of a program's WORKLOADS that
# --workloads names, in the program's order.
only_workloads() {
	local w kept=()
	for w in $1; do
		[[ " $workloads " == *" $w "* ]] && kept+=("$w")
	done
	echo "${kept[*]}"
}

# drive PROGRAM "WORKLOADS": every workload x thread count x round x config,
# the configs rotating; run_PROGRAM WORKLOAD THREADS ROUND CONFIG records.
drive() {
	local program=$1 w t r i c ncfg=${#configs[@]}
	for w in $2; do
		for t in $threads; do
			for ((r = 1; r <= rounds; r++)); do
				for ((i = 0; i < ncfg; i++)); do
					c=${configs[(r - 1 + i) % ncfg]}
					traced=""
					"run_$program" "$w" "$t" "$r" "$c"
				done
			done
		done
	done
}

# ---- memcached + memaslap --------------------------------------------------

setup_memcached() {
	need_bins memcached "memcached:memcached memaslap|memcaslap:libmemcached-tools" || return 1
	memcached_bin=$(readlink -f "$(first_bin memcached)")
	memaslap_bin=$(first_bin memaslap memcaslap)
	mc_cthreads=$((nproc < 2 ? 2 : (nproc > 8 ? 8 : nproc)))
	mc_conc=$((16 * mc_cthreads))
	mc_user=()
	[[ $(id -u) -ne 0 ]] || mc_user=(-u "$(id -un)")
	{
		echo "- memcached: $("$memcached_bin" -V 2>&1 | head -n1), -t THREADS -m 1024 -c 4096, TCP on 127.0.0.1"
		echo "- load: $memaslap_bin -T $mc_cthreads -c $mc_conc (memaslap's default mix: 90% get, 10% set), 1 s warm-up, then $seconds s measured"
		echo "- latency: memaslap's whole-run log2 histogram (buckets (2^(k-1), 2^k] us), percentiles interpolated geometrically inside a bucket: coarse;"
		echo "  max: the \"Max:\" (us) of memaslap's whole-run Total Statistics, exact"
	} >"$tmp/memcached.head"
}

# parse_memaslap FILE: "ops seconds p50 p99 p999 max maxsrc" (latencies in us).
# max is the "Max:" of the whole-run "Total Statistics (N events)" block
# (maxsrc "exact"); without one, the upper edge of the highest non-empty
# log2 bucket (maxsrc "bucket").
parse_memaslap() {
	awk '
		/^Total Statistics \(/ { tot = 1; next }
		tot && $1 == "Max:" { mx = $2; next }
		tot && /Log2 Dist:/ { dist = 1; next }
		dist {
			if (NF == 0) { dist = 0; tot = 0; next }
			b = $1; sub(":", "", b)
			for (j = 2; j <= NF; j++) { k = b + j - 2; n[k] = $j; sum += $j; if (k > maxk) maxk = k; if ($j > 0 && k > topk) topk = k }
			next
		}
		/^Run time:/ { s = $3; sub("s", "", s); ops = $5 }
		function pct(p,   k, cum, target, lo, hi) {
			target = p / 100 * sum; cum = 0
			for (k = 0; k <= maxk; k++) {
				if (n[k] > 0 && cum + n[k] >= target) {
					hi = 2 ^ k; lo = (k == 0) ? 0.5 : 2 ^ (k - 1)
					return lo * (hi / lo) ^ ((target - cum) / n[k])
				}
				cum += n[k]
			}
			return 2 ^ maxk
		}
		END {
			if (!(sum > 0) || !(ops > 0)) exit 1
			if (mx != "" && mx + 0 > 0) src = "exact"
			else { mx = 2 ^ topk; src = "bucket" }
			printf "%d %s %.1f %.1f %.1f %.1f %s\n", ops, s, pct(50), pct(99), pct(99.9), mx, src
		}' "$1"
}

run_memcached() {
	local w=$1 t=$2 r=$3 c=$4 port try i pid="" c0 c1 res ops s p50 p99 p999 mx mxsrc
	set_env "$c"
	for try in 1 2 3 4 5; do
		port=$((20000 + (RANDOM * 7 + $$ + try * 7919) % 30000))
		"${ENVV[@]}" "$memcached_bin" "${mc_user[@]}" -t "$t" -l 127.0.0.1 -p "$port" -U 0 -m 1024 -c 4096 \
			>"$tmp/memcached.log" 2>&1 &
		pid=$! srv=$pid
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			[[ $(mc_stat_pid "$port") == "$pid" ]] && break 2
			sleep 0.05
		done
		stop_server "$pid"
		pid=""
	done
	[[ -n $pid ]] || die "ABORT: memcached did not start on a loopback port: $(tail -n3 "$tmp/memcached.log")"
	verify_preload "$pid" "$memcached_bin" "$c" memcached
	"${LOAD_PIN[@]}" "${CLEAN[@]}" timeout 60 "$memaslap_bin" -s "127.0.0.1:$port" -T "$mc_cthreads" -c "$mc_conc" -t 1s \
		>"$tmp/memaslap.out" 2>&1 || die "ABORT: memaslap warm-up failed: $(tail -n3 "$tmp/memaslap.out")"
	c0=$(cpu_ticks "$pid")
	trace_begin
	"${LOAD_PIN[@]}" "${CLEAN[@]}" timeout $((seconds + 60)) "$memaslap_bin" -s "127.0.0.1:$port" -T "$mc_cthreads" -c "$mc_conc" \
		-t "${seconds}s" -S "${seconds}s" >"$tmp/memaslap.out" 2>&1 || die "ABORT: memaslap failed: $(tail -n3 "$tmp/memaslap.out")"
	trace_end "$pid"
	c1=$(cpu_ticks "$pid")
	stop_server "$pid"
	res=$(parse_memaslap "$tmp/memaslap.out") || die "ABORT: cannot parse memaslap's output: $(tail -n5 "$tmp/memaslap.out")"
	read -r ops s p50 p99 p999 mx mxsrc <<<"$res"
	if [[ $mxsrc != exact ]] && ! grep -q '^- note: max' "$tmp/memcached.head"; then
		log "memcached: memaslap printed no Max: in Total Statistics; max is the top of the highest log2 bucket"
		echo "- note: max for some runs (memaslap printed no \"Max:\"): the upper edge of the highest non-empty log2 bucket, coarse" \
			>>"$tmp/memcached.head"
	fi
	record memcached "$w" "$t" "$r" "$c" "$ops" "$s" "$p50" "$p99" "$p999" \
		"$(awk -v d=$((c1 - c0)) -v h="$clk_tck" 'BEGIN { print d / h }')" "$mx"
}

# ---- mariadb + sysbench ------------------------------------------------------

setup_mariadb() {
	need_bins mariadb "/usr/sbin/mariadbd:mariadb-server mariadb-install-db:mariadb-server mariadb-admin:mariadb-client sysbench:sysbench" ||
		return 1
	md_prepare
	{
		echo "- mariadb: $("$mariadbd_bin" --version 2>/dev/null | head -n1); private datadir, unix socket, skip-networking,"
		echo "  buffer pool 128M, innodb_flush_log_at_trx_commit=2; a fresh mariadbd per run (start-up not measured)"
		echo "- load: $("$sysbench_bin" --version 2>/dev/null | head -n1), 1 table x $md_rows rows, --threads THREADS (one server thread per"
		echo "  connection), 1 s warm-up, then $seconds s measured; latency: sysbench's --histogram (per transaction);"
		echo "  max: the \"max:\" of sysbench's \"Latency (ms):\" section (the longest transaction, 10 us resolution)"
	} >"$tmp/mariadb.head"
}

# parse_sysbench FILE: "transactions seconds p50 p99 p999 max" (latencies in us).
parse_sysbench() {
	awk '
		/^ *[0-9.]+ \|/ { v[++nb] = $1; n[nb] = $NF; sum += $NF; next }
		/^ *transactions:/ { ops = $2 }
		/^ *total time:/ { s = $3; sub("s", "", s) }
		/^Latency \(ms\):/ { lat = 1; next }
		lat && $1 == "max:" { mx = $2 * 1000; lat = 0 }
		function pct(p,   i, cum, target) {
			target = p / 100 * sum; cum = 0
			for (i = 1; i <= nb; i++) { cum += n[i]; if (cum >= target) return v[i] * 1000 }
			return v[nb] * 1000
		}
		END {
			if (!(sum > 0) || !(ops > 0) || mx == "") exit 1
			printf "%d %s %.1f %.1f %.1f %.1f\n", ops, s, pct(50), pct(99), pct(99.9), mx
		}' "$1"
}

run_mariadb() {
	local w=$1 t=$2 r=$3 c=$4 c0 c1 res ops s p50 p99 p999 mx
	md_start "$c"
	verify_preload "$md_pid" "$mariadbd_bin" "$c" mariadbd
	mapfile -t sbargs < <(sb_common)
	"${LOAD_PIN[@]}" "${CLEAN[@]}" timeout 60 "$sysbench_bin" "$w" "${sbargs[@]}" --threads="$t" --time=1 run \
		>"$tmp/sysbench.out" 2>&1 || die "ABORT: sysbench warm-up failed ($c): $(tail -n5 "$tmp/sysbench.out")"
	c0=$(cpu_ticks "$md_pid")
	trace_begin
	"${LOAD_PIN[@]}" "${CLEAN[@]}" timeout $((seconds + 60)) "$sysbench_bin" "$w" "${sbargs[@]}" --threads="$t" --time="$seconds" \
		--histogram=on --percentile=99 run >"$tmp/sysbench.out" 2>&1 ||
		die "ABORT: sysbench $w failed ($c): $(tail -n5 "$tmp/sysbench.out")"
	trace_end "$md_pid"
	c1=$(cpu_ticks "$md_pid")
	stop_server "$md_pid"
	res=$(parse_sysbench "$tmp/sysbench.out") || die "ABORT: cannot parse sysbench's output: $(tail -n20 "$tmp/sysbench.out")"
	read -r ops s p50 p99 p999 mx <<<"$res"
	record mariadb "$w" "$t" "$r" "$c" "$ops" "$s" "$p50" "$p99" "$p999" \
		"$(awk -v d=$((c1 - c0)) -v h="$clk_tck" 'BEGIN { print d / h }')" "$mx"
}

# ---- rocksdb db_bench ----------------------------------------------------------

setup_rocksdb() {
	need_bins rocksdb "db_bench|rocksdb_db_bench:rocksdb-tools /usr/bin/time:time" || return 1
	rocks_fill
	{
		echo "- rocksdb: $dbbench_bin (rocksdb-tools $(dpkg-query -W -f='${Version}' rocksdb-tools 2>/dev/null || echo '?')),"
		echo "  $rocks_num keys x 100 B filled once (fillseq, compact, no compression), copied afresh for every run; 256 MiB block cache;"
		echo "  --threads THREADS (readwhilewriting adds one writer), --duration $seconds; db_bench is the preloaded process"
		echo "- latency: db_bench --histogram=1 (per operation; readwhilewriting: the readers'); max: that histogram's \"Max:\" (us);"
		echo "  CPU: the whole db_bench process (/usr/bin/time), opening the database included"
		if grep -q 'Assertions are enabled' "$tmp/rocksdb/fill.log"; then
			echo "- note: this db_bench is built with assertions enabled (db_bench says so): absolute figures are low"
		fi
	} >"$tmp/rocksdb.head"
}

# parse_dbbench FILE WORKLOAD: "ops seconds p50 p99 p999 max" (latencies in us).
# The first histogram ("Microseconds per read:" and the like) prints
# "Min: A  Median: B  Max: C" just before its "Percentiles:" line.
parse_dbbench() {
	awk -v w="$2" '
		$1 == w && $2 == ":" && $4 == "micros/op" { ops = $9; s = $7 }
		/^Min: / && !got { for (i = 1; i < NF; i++) if ($i == "Max:") mx = $(i + 1) }
		/^Percentiles:/ && !got { p50 = $3; p99 = $7; p999 = $9; got = 1 }
		END {
			if (!(ops > 0) || !got || mx == "") exit 1
			printf "%d %s %s %s %s %s\n", ops, s, p50, p99, p999, mx
		}' "$1"
}

run_rocksdb() {
	local w=$1 t=$2 r=$3 c=$4 tpid child="" child2 i rc=0 res cpu ops s p50 p99 p999 mx
	rm -rf "$tmp/rocksdb/run"
	cp -a "$tmp/rocksdb/base" "$tmp/rocksdb/run"
	mapfile -t rargs < <(rocks_common)
	set_env "$c"
	trace_begin
	"${CLEAN[@]}" /usr/bin/time -o "$tmp/rocksdb/time" -f '%U %S' timeout $((seconds + 120)) \
		"${ENVV[@]}" "$dbbench_bin" --benchmarks="$w" --use_existing_db=1 \
		--db="$tmp/rocksdb/run" "${rargs[@]}" --threads="$t" --duration="$seconds" --histogram=1 \
		>"$tmp/dbbench.out" 2>&1 &
	tpid=$! srv=$tpid
	# time(1) -> timeout(1) -> env(1), which exec()s db_bench
	for ((i = 0; i < 200; i++)); do
		child=$(cat "/proc/$tpid/task/$tpid/children" 2>/dev/null) || true
		child=${child%% *}
		if [[ -n $child ]]; then
			child2=$(cat "/proc/$child/task/$child/children" 2>/dev/null) || true
			child2=${child2%% *}
			[[ -n $child2 ]] && { child=$child2; break; }
		fi
		sleep 0.02
	done
	[[ -n $child ]] || die "ABORT: db_bench did not start: $(tail -n5 "$tmp/dbbench.out")"
	srv2=$child
	verify_preload "$child" "$dbbench_bin" "$c" db_bench
	wait "$tpid" || rc=$?
	srv="" srv2=""
	[[ $rc -eq 0 ]] || die "ABORT: db_bench $w ($c) failed (exit $rc): $(grep -v '^\.\.\.' "$tmp/dbbench.out" | tail -n5)"
	trace_end "$child"
	res=$(parse_dbbench "$tmp/dbbench.out" "$w") || die "ABORT: cannot parse db_bench's output: $(tail -n5 "$tmp/dbbench.out")"
	cpu=$(awk 'END { print $1 + $2 }' "$tmp/rocksdb/time")
	read -r ops s p50 p99 p999 mx <<<"$res"
	record rocksdb "$w" "$t" "$r" "$c" "$ops" "$s" "$p50" "$p99" "$p999" "$cpu" "$mx"
}

# ---- python gil.py ------------------------------------------------------------

setup_python() {
	need_bins python "/usr/bin/python3:python3" || return 1
	python_bin=/usr/bin/python3
	local rate
	rate=$("${CLEAN[@]}" "$python_bin" "$script_dir/gil.py" --calibrate 1 | sed -n 's/^calibrate ops_per_sec=//p')
	[[ -n $rate ]] || die "gil.py --calibrate failed"
	py_rate=$rate
	{
		echo "- python: $("$python_bin" --version 2>&1) ($python_bin), bench/apps/gil.py: THREADS threads share a fixed amount"
		echo "  of pure-Python work, about $seconds s worth at one thread's rate (${rate%.*} ops/s); one op = a 200-step arithmetic loop"
		echo "- latency: each op timed inside the script (includes waits for the GIL), max: the longest single op;"
		echo "  CPU: getrusage over the measured window"
	} >"$tmp/python.head"
}

run_python() {
	local w=$1 t=$2 r=$3 c=$4 ops line f
	local -A kv=()
	ops=$(awk -v r="$py_rate" -v s="$seconds" -v t="$t" 'BEGIN { n = int(r * s / t); print (n < 100 ? 100 : n) }')
	set_env "$c"
	trace_begin
	line=$("${CLEAN[@]}" timeout $((seconds * 10 + 60)) "${ENVV[@]}" "$python_bin" "$script_dir/gil.py" --threads "$t" --ops "$ops" 2>"$tmp/gil.err") ||
		die "ABORT: gil.py ($c) failed: $(tail -n5 "$tmp/gil.err")"
	for f in $line; do [[ $f == *=* ]] && kv[${f%%=*}]=${f#*=}; done
	trace_end "${kv[pid]:-0}"
	case $c:${kv[preload]:-} in
	plain:no | default:yes | off:yes | watch0:yes | simabort:yes | nospin:yes | ownmutex0:yes | ownrwlock0:yes) ;;
	*) die "ABORT: gil.py ($c) reports preload=${kv[preload]:-?}: libelide.so is $([[ $c == plain ]] && echo "mapped in plain" || echo "NOT mapped: the preload did not take")" ;;
	esac
	record python "$w" "$t" "$r" "$c" "${kv[ops]}" "${kv[seconds]}" "${kv[p50_us]}" "${kv[p99_us]}" "${kv[p999_us]}" "${kv[cpu_s]}" \
		"${kv[max_us]:-}"
}

# ---- the tables ------------------------------------------------------------------

# summarize PROGRAM: the Markdown table of PROGRAM's runs in runs.tsv, and
# the default configuration's goals appended to $tmp/misses ("missed") and
# $tmp/unresolved.  A ratio is the median of the rounds' own ratios to
# plain, with the distribution-free 95% interval of that median: the order
# statistics k and n+1-k of the n ratios, k from the binomial
# distribution (a median's interval needs no assumption about the noise,
# which here is anything but normal).  A goal is met when the whole
# interval meets it, missed when none of it does, and not resolved by
# this run otherwise; with fewer than 6 rounds there is no such interval
# and the median alone decides.
summarize() {
	awk -F '\t' -v prog="$1" -v cfgs="${configs[*]}" -v misses="$tmp/misses" -v unresolved="$tmp/unresolved" '
		# sorted(list, a): the numbers of the space-separated list in a[1..n], ascending; returns n
		function sorted(list, a,   n, i, j, x) {
			n = split(list, a, " ")
			for (i = 2; i <= n; i++) { x = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
			return n
		}
		function med(list,   a, n) {
			n = sorted(list, a)
			if (n == 0) return ""
			return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		# ci_rank(n): the largest k with P(Binomial(n, 1/2) < k) <= 2.5%:
		# a[k] and a[n + 1 - k] then bound the median with >= 95%; 0 when
		# n values cannot (n < 6)
		function ci_rank(n,   p, cdf, i) {
			p = exp(-n * log(2)); cdf = 0
			for (i = 0; i < n; i++) {
				cdf += p
				if (cdf > 0.025) return i
				p = p * (n - i) / (i + 1)
			}
			return 0
		}
		# ratios(cell, config, field): the rounds ratios config / plain
		function ratios(cell, c, f,   r, l) {
			l = ""
			for (r in rounds) {
				if ((cell, c, r, f) in val && (cell, "plain", r, f) in val && val[cell, "plain", r, f] > 0)
					l = l " " val[cell, c, r, f] / val[cell, "plain", r, f]
			}
			return l
		}
		# ratio(cell, config, field): sets R_med, R_lo, R_hi ("" where none)
		function ratio(cell, c, f,   a, n, k) {
			n = sorted(ratios(cell, c, f), a)
			R_med = ""; R_lo = ""; R_hi = ""
			if (n == 0) return
			R_med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			k = ci_rank(n)
			if (k > 0) { R_lo = a[k]; R_hi = a[n + 1 - k] }
		}
		function fmt(x, d) { return (x == "") ? "n/a" : sprintf("%." d "f", x) }
		function lat(x) { return (x == "") ? "n/a" : (x >= 100 ? sprintf("%.0f", x) : sprintf("%.1f", x)) }
		function shown() { return fmt(R_med, 3) (R_lo == "" ? "" : " (" fmt(R_lo, 2) "-" fmt(R_hi, 2) ")") }
		# judge(goal, above): "met", "missed" or "unresolved" for the ratio
		# in R_*, whose goal is >= goal (above) or <= goal
		function judge(goal, above) {
			if (R_med == "") return "met"
			if (R_lo == "") return (above ? R_med >= goal : R_med <= goal) ? "met" : "missed"
			if (above) return R_lo >= goal ? "met" : (R_hi < goal ? "missed" : "unresolved")
			return R_hi <= goal ? "met" : (R_lo > goal ? "missed" : "unresolved")
		}
		# goal(what, goal, above): the default column cell for what, marked
		# (bold: missed; italics: not resolved), and its line in the lists
		function goal(what, g, above,   v, cell_text, line) {
			cell_text = shown()
			v = judge(g, above)
			if (v == "met") return cell_text
			line = sprintf("- %s %s, %s threads: default %s %.3fx plain, %s (goal %s %.2f)\n", prog, wt[1], wt[2], what, R_med,
				R_lo == "" ? "the median of " nr " rounds" : "95% interval " fmt(R_lo, 3) "-" fmt(R_hi, 3), above ? ">=" : "<=", g)
			if (v == "missed") { miss = miss line; return "**" cell_text "**" }
			unres = unres line
			return "*" cell_text "*"
		}
		NR == 1 { next }
		$1 == prog {
			cell = $2 SUBSEP $3
			if (!(cell in seen)) { seen[cell] = 1; order[++ncell] = cell }
			rounds[$4] = 1
			val[cell, $5, $4, "tput"] = $8; val[cell, $5, $4, "p99"] = $10; val[cell, $5, $4, "cpu"] = $13
			val[cell, $5, $4, "max"] = $14
			list[cell, $5, "tput"] = list[cell, $5, "tput"] " " $8
			list[cell, $5, "p50"] = list[cell, $5, "p50"] " " $9
			list[cell, $5, "p99"] = list[cell, $5, "p99"] " " $10
			list[cell, $5, "p999"] = list[cell, $5, "p999"] " " $11
			list[cell, $5, "cpu"] = list[cell, $5, "cpu"] " " $13
			list[cell, $5, "max"] = list[cell, $5, "max"] " " $14
			if (NF >= 19 && $16 != "-") {
				traced[cell] = 1
				val[cell, $5, $4, "lsmax"] = $18; val[cell, $5, $4, "pmax"] = $19
				list[cell, $5, "lsps"] = list[cell, $5, "lsps"] " " ($7 > 0 ? $16 / $7 : 0)
				list[cell, $5, "lsmax"] = list[cell, $5, "lsmax"] " " $18
				list[cell, $5, "pmax"] = list[cell, $5, "pmax"] " " $19
			}
		}
		END {
			nc = split(cfgs, cl, " ")
			print "| workload | threads | config | ops/s | p50 us | p99 us | p99.9 us | max us | CPU us/op | ops/s / plain | p99 / plain | max / plain | CPU/op / plain |"
			print "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
			for (k = 1; k <= ncell; k++) {
				cell = order[k]; split(cell, wt, SUBSEP)
				for (i = 1; i <= nc; i++) {
					c = cl[i]
					if (!((cell, c, "tput") in list)) continue
					nr = split(list[cell, c, "tput"], tmp_a, " ")
					if (c == "plain") { rt = "-"; rp = "-"; rm = "-"; rc = "-" }
					else if (c == "default") {
						ratio(cell, c, "tput"); rt = goal("throughput", 0.98, 1)
						ratio(cell, c, "p99"); rp = goal("p99", 1.05, 0)
						ratio(cell, c, "max"); rm = goal("max latency (no thread starved)", 1.0, 0)
						ratio(cell, c, "cpu"); rc = goal("CPU/op", 1.02, 0)
					} else {
						ratio(cell, c, "tput"); rt = shown()
						ratio(cell, c, "p99"); rp = shown()
						ratio(cell, c, "max"); rm = shown()
						ratio(cell, c, "cpu"); rc = shown()
					}
					printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", wt[1], wt[2], c,
						fmt(med(list[cell, c, "tput"]), 0), lat(med(list[cell, c, "p50"])),
						lat(med(list[cell, c, "p99"])), lat(med(list[cell, c, "p999"])),
						lat(med(list[cell, c, "max"])), fmt(med(list[cell, c, "cpu"]), 2), rt, rp, rm, rc
				}
			}
			# --trace: the waits behind those latencies (waits.awk), not judged
			hdr = 0
			for (k = 1; k <= ncell; k++) {
				cell = order[k]; split(cell, wt, SUBSEP)
				if (!(cell in traced)) continue
				if (!hdr++) {
					print ""
					print "Waits of the preloaded process (--trace; medians; waits.awk): a mutex wait is a FUTEX_WAIT call on a word of 2,"
					print "from the call to its return (the sleep, and the wait for a CPU once woken; a call that finds the word changed"
					print "returns at once); a preemption lasts from a thread being switched out runnable to its next run."
					print ""
					print "| workload | threads | config | mutex waits/s | longest mutex wait ms | longest wait / plain | longest preemption ms | preemption / plain |"
					print "|---|---:|---|---:|---:|---:|---:|---:|"
				}
				for (i = 1; i <= nc; i++) {
					c = cl[i]
					if (!((cell, c, "lsmax") in list)) continue
					if (c == "plain") { rs = "-"; rq = "-" }
					else { ratio(cell, c, "lsmax"); rs = shown(); ratio(cell, c, "pmax"); rq = shown() }
					printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", wt[1], wt[2], c, fmt(med(list[cell, c, "lsps"]), 0),
						fmt(med(list[cell, c, "lsmax"]) / 1000, 1), rs, fmt(med(list[cell, c, "pmax"]) / 1000, 1), rq
				}
			}
			printf "%s", miss >> misses
			printf "%s", unres >> unresolved
		}' "$runs_tsv"
}

# ---- main ---------------------------------------------------------------------------

sim_line=""
[[ ${#from[@]} -gt 0 ]] || sim_line=$("${CLEAN[@]}" ELIDE=verbose=1,stats=0,mode=adaptive ELIDE_SIM_ABORT=0x6 \
	ELIDE_RUNTIME_DIR="$tmp/rt" LD_PRELOAD="$lib" /bin/true 2>&1) || true
if [[ ${#from[@]} -gt 0 ]]; then
	sim_note="as the runs read found it"
elif [[ $sim_line == *simulated* ]]; then
	sim_note="honoured (no usable RTM): every transaction aborts with status 0x6 before it starts"
elif grep -qw rtm /proc/cpuinfo 2>/dev/null; then
	sim_note="IGNORED: this CPU has RTM, so simabort elides for real (adaptive), like default"
else
	sim_note="NOT honoured by this libelide (${sim_line%%$'\n'*}): simabort measures what libelide does without it"
fi
: >"$tmp/misses"
: >"$tmp/unresolved"

ran=0
[[ $trace == no || ${#from[@]} -gt 0 ]] || trace_open

for p in $programs; do
	if [[ ${#from[@]} -gt 0 ]]; then
		awk -F '\t' -v p="$p" 'NR > 1 && $1 == p { found = 1; exit } END { exit !found }' "$from_tsv" || continue
		{
			echo
			echo "### $p"
			echo
			summarize "$p"
		} >>"$report"
		ran=$((ran + 1))
		continue
	fi
	log "=== $p ==="
	SERVER_PIN=() LOAD_PIN=()
	if [[ $pin == yes && ( $p == memcached || $p == mariadb ) ]]; then
		SERVER_PIN=(taskset -c "$pin_server") LOAD_PIN=(taskset -c "$pin_load")
	fi
	"setup_$p" || continue
	case $p in
	memcached)	wl="get90-set10" ;;
	mariadb)	wl="oltp_point_select oltp_read_write" ;;
	rocksdb)	wl="readrandom readwhilewriting" ;;
	python)		wl="gil" ;;
	esac
	if [[ -n $workloads ]]; then
		wl=$(only_workloads "$wl")
		[[ -n $wl ]] || continue
	fi
	drive "$p" "$wl"
	{
		echo
		echo "### $p"
		echo
		cat "$tmp/$p.head"
		echo
		summarize "$p"
	} >>"$report"
	ran=$((ran + 1))
done

elapsed=$(($(date +%s) - start_s))
{
	echo "## Real programs under libelide (bench/apps/run.sh)"
	echo
	echo "- command: \`$cmdline\`"
	if [[ ${#from[@]} -gt 0 ]]; then
		echo "- the runs of ${from[*]}, pooled and judged again: nothing was run (the machine, date and wall"
		echo "  time are the original reports'); libelide builds (sha256 prefixes; ? = not recorded):"
		echo "  $(awk -F '\t' 'NR > 1 && $15 != "-" && !seen[$15]++ { printf "%s ", $15 }' "$from_tsv")"
	else
		machine_lines
		echo "- libelide: $lib"
	fi
	echo "- configurations run: ${configs[*]}; plain (no preload); default (LD_PRELOAD, ELIDE unset); off (ELIDE=mode=off);"
	echo "  watch0 (ELIDE=watch=0); simabort (ELIDE=mode=adaptive ELIDE_SIM_ABORT=0x6, $sim_note);"
	echo "  nospin (ELIDE=wait_spins=0); ownmutex0 (ELIDE=own_mutex=0); ownrwlock0 (ELIDE=own_rwlock=0)"
	if [[ ${#from[@]} -gt 0 ]]; then
		echo "- rounds: $rounds, each running every configuration once, the first rotating; threads: $threads"
	else
		echo "- rounds: $rounds, each running every configuration once, the first rotating; $seconds s per measured run;"
		echo "  threads: $threads; wall time of the whole script: $((elapsed / 60)) min $((elapsed % 60)) s"
		if [[ $pin == yes ]]; then
			echo "- pinned (--pin): memcached and mariadbd on CPUs $pin_server, memaslap and sysbench on CPUs $pin_load"
		fi
	fi
	echo "- figures: median over rounds; ratios: median over rounds of config / plain in the same round, and"
	echo "  (from 6 rounds on) that median's 95% interval, distribution-free: the rounds' ratios of rank k and"
	echo "  n+1-k, k from the binomial distribution (7 rounds: the lowest and highest; 21: the 6th and 16th);"
	echo "  max us: the longest single operation of the run; CPU us/op: the server process's user+system CPU time"
	echo "  (all threads) over the measured window / operations"
	for s in "${skipped[@]}"; do echo "- skipped: $s"; done
	cat "$report"
	echo
	echo "Goals of the default: throughput >= 0.98x, p99 <= 1.05x, max latency <= 1.0x (no thread starved),"
	echo "CPU/op <= 1.02x plain.  A goal is met where the whole 95% interval meets it, missed where none of it"
	echo "does (bold above), and not resolved by this run where the interval straddles it (italics above)."
	echo
	if [[ -s $tmp/misses ]]; then
		echo "Missed:"
		echo
		cat "$tmp/misses"
		echo
	fi
	if [[ -s $tmp/unresolved ]]; then
		echo "Not resolved by this run (more rounds, or a machine with more CPUs than the server's and the load's threads):"
		echo
		cat "$tmp/unresolved"
		echo
	fi
	if [[ ! -s $tmp/misses && ! -s $tmp/unresolved ]]; then
		echo "Every goal is met."
	fi
} >"$tmp/final.md"

cat "$tmp/final.md"
if [[ -n $out ]]; then
	cp "$tmp/final.md" "$out"
fi
[[ $ran -gt 0 ]] || die "no program could run"
