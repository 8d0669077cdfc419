#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/apps/instructions.sh: the instructions per operation that the real
# programs of bench/apps/run.sh execute, with and without libelide, counted
# by valgrind's cachegrind (issue 35).  See bench/apps/README.md.
#
# A count does not move with the machine's load, so it resolves what
# run.sh's timed CPU per operation cannot on a shared machine: the cost of
# libelide's paths in the program.  It does not see waiting or cache
# misses; valgrind runs one thread at a time.
#
# Each figure comes from two runs of the program under cachegrind, one of
# N operations and one of 3N: (I(3N) - I(N)) / 2N, so start-up, filling
# and shutdown cancel out.

set -euo pipefail

prog=apps/instructions.sh
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
. "$script_dir/../lib.sh"
# shellcheck source=bench/apps/common.sh
. "$script_dir/common.sh"

cmdline="bench/apps/instructions.sh"
for a in "$@"; do cmdline+=" $(printf '%q' "$a")"; done

configs=(plain default off nospin)
programs="$all_programs" threads="" lib="" out="" scale=1

usage() {
	cat <<EOF
Usage: $prog [OPTIONS]

Counts the instructions per operation of the programs bench/apps/run.sh
times (memcached, MariaDB, RocksDB's db_bench, CPython), the server process
only, under valgrind's cachegrind, in each configuration, and prints a
Markdown table of instructions per operation and their ratios to plain.
Each figure is (I(3N) - I(N)) / 2N from two runs of N and 3N operations.
valgrind runs one thread at a time: the counts are the paths' cost, not
waiting, spinning against a running holder, or cache misses.

Options:
  --programs "LIST"   a subset of: $all_programs (default all)
  --threads "LIST"    server thread counts (default $((4 * nproc)), 4x the online CPUs)
  --configs "LIST"    configurations, plain first (default "${configs[*]}";
                      known: $all_configs; see run.sh --help)
  --scale K           multiply every N by K (default 1; larger is slower and
                      steadier)
  --lib PATH          libelide.so (default as run.sh)
  --out FILE          also write the report to FILE
  -h, --help          show this help

Needs valgrind (installed with apt-get when run as root, as are the
programs).  Progress goes to stderr, the report to stdout; a failed run
stops the script with exit status 1, a usage error exits 2.
EOF
}

while [[ $# -gt 0 ]]; do
	case $1 in
	--programs)	need_value "$@"; programs=$2; shift 2 ;;
	--threads)	need_value "$@"; threads=$2; shift 2 ;;
	--configs)	need_value "$@"; read -r -a configs <<<"$2"; shift 2 ;;
	--scale)	need_value "$@"; scale=$2; shift 2 ;;
	--lib)		need_value "$@"; lib=$2; shift 2 ;;
	--out)		need_value "$@"; out=$2; shift 2 ;;
	-h|--help)	usage; exit 0 ;;
	*)		usage_error "unknown argument '$1'" ;;
	esac
done

: "${threads:=$((4 * nproc))}"
is_uint "$scale" || usage_error "--scale must be a positive integer, not '$scale'"
check_selection
find_lib

start_s=$(date +%s)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/elide-instr.XXXXXX") || die "cannot create a temporary folder"
chmod 755 "$tmp"
mkdir -m 1777 "$tmp/rt"
srv=""
cleanup() {
	if [[ -n $srv ]]; then
		kill "$srv" 2>/dev/null || true
		wait "$srv" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

results=$tmp/results.tsv
: >"$results"

need_bins valgrind "valgrind:valgrind" || die "valgrind is needed (apt-get install valgrind)"
valgrind_bin=$(first_bin valgrind)
# valgrind execs its tool; /proc/PID/exe names that, not the program.
cg_tool=$("$valgrind_bin" --tool=cachegrind --version >/dev/null 2>&1 &&
	find /usr/libexec/valgrind /usr/lib/valgrind /usr/lib/x86_64-linux-gnu/valgrind \
		-maxdepth 1 -name 'cachegrind-amd64-linux' 2>/dev/null | head -n1) || true
[[ -n $cg_tool ]] || die "cannot find valgrind's cachegrind-amd64-linux"
cg_tool=$(readlink -f "$cg_tool")

# vg_prefix OUTFILE: the valgrind command line, into VG.
vg_prefix() {
	VG=("$valgrind_bin" --tool=cachegrind --cache-sim=no --branch-sim=no --trace-children=no
		--cachegrind-out-file="$1" --log-file="$1.log")
}

# instructions OUTFILE: the "summary:" (instructions) of a cachegrind run.
instructions() {
	local n
	n=$(awk '$1 == "summary:" { print $2 }' "$1" 2>/dev/null)
	[[ -n $n ]] || die "ABORT: cachegrind wrote no summary to $1: $(tail -n5 "$1.log" 2>/dev/null)"
	echo "$n"
}

# wait_client_loaded PID WHAT: until PID is valgrind's tool (not its
# launcher, which maps libc.so.6 too) and has loaded the program's
# libraries (libc.so.6 comes after every preload), so that verify_preload
# sees them.
wait_client_loaded() {
	local i
	for ((i = 0; i < 600; i++)); do
		[[ $(readlink "/proc/$1/exe" 2>/dev/null) == "$cg_tool" ]] &&
			grep -q 'libc\.so\.6' "/proc/$1/maps" 2>/dev/null && return 0
		kill -0 "$1" 2>/dev/null || die "ABORT: $2 (pid $1) exited before its libraries were loaded"
		sleep 0.05
	done
	die "ABORT: $2 (pid $1): no libc.so.6 mapped after 30 s under valgrind"
}

# ---- one run per program: count_PROGRAM WORKLOAD THREADS CONFIG OPS ---------
# Each prints the instructions of the whole run; OPS is what the load does.

count_memcached() {
	local t=$2 c=$3 n=$4 port try i pid="" cg=$tmp/cg.mc
	set_env "$c"
	vg_prefix "$cg"
	for try in 1 2 3 4 5; do
		port=$((20000 + (RANDOM * 7 + $$ + try * 7919) % 30000))
		# memcached sets both open-file limits to -c; valgrind allows only
		# its own hard limit, 12 under the one it was given.
		(ulimit -n 1036 && ulimit -H -n 1036 && exec "${ENVV[@]}" "${VG[@]}" "$memcached_bin" "${mc_user[@]}" \
			-t "$t" -l 127.0.0.1 -p "$port" -U 0 -m 1024 -c 1024) >"$tmp/memcached.log" 2>&1 &
		pid=$! srv=$pid
		for ((i = 0; i < 600; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			[[ $(mc_stat_pid "$port") == "$pid" ]] && break 2
			sleep 0.05
		done
		stop_server "$pid"
		pid=""
	done
	[[ -n $pid ]] || die "ABORT: memcached did not start under valgrind: $(tail -n3 "$tmp/memcached.log")"
	verify_preload "$pid" "$cg_tool" "$c" memcached
	"${CLEAN[@]}" timeout 600 "$memaslap_bin" -s "127.0.0.1:$port" -T 2 -c 16 -x "$n" \
		>"$tmp/memaslap.out" 2>&1 || die "ABORT: memaslap failed ($c): $(tail -n3 "$tmp/memaslap.out")"
	stop_server "$pid"
	instructions "$cg"
}

count_mariadb() {
	local w=$1 t=$2 c=$3 n=$4 cg=$tmp/cg.md
	rm -rf "$tmp/mariadb/run"
	cp -a "$tmp/mariadb/data" "$tmp/mariadb/run"
	md_datadir=$tmp/mariadb/run md_extra=("${md_vg_args[@]}")
	vg_prefix "$cg"
	md_start "$c" "${VG[@]}"
	verify_preload "$md_pid" "$cg_tool" "$c" mariadbd
	mapfile -t sbargs < <(sb_common)
	"${CLEAN[@]}" timeout 1200 "$sysbench_bin" "$w" "${sbargs[@]}" --threads="$t" --events="$n" --time=0 run \
		>"$tmp/sysbench.out" 2>&1 || die "ABORT: sysbench $w failed ($c): $(tail -n5 "$tmp/sysbench.out")"
	stop_server "$md_pid"
	instructions "$cg"
}

count_rocksdb() {
	local w=$1 t=$2 c=$3 n=$4 cg=$tmp/cg.rocks pid rc=0
	rm -rf "$tmp/rocksdb/run"
	cp -a "$tmp/rocksdb/base" "$tmp/rocksdb/run"
	mapfile -t rargs < <(rocks_common)
	set_env "$c"
	vg_prefix "$cg"
	# --reads is per thread
	"${ENVV[@]}" "${VG[@]}" "$dbbench_bin" --benchmarks="$w" --use_existing_db=1 \
		--db="$tmp/rocksdb/run" "${rargs[@]}" --threads="$t" --reads=$((n / t)) --duration=0 \
		>"$tmp/dbbench.out" 2>&1 &
	pid=$! srv=$pid
	wait_client_loaded "$pid" db_bench
	verify_preload "$pid" "$cg_tool" "$c" db_bench
	wait "$pid" || rc=$?
	srv=""
	[[ $rc -eq 0 ]] || die "ABORT: db_bench $w ($c) failed (exit $rc): $(grep -v '^\.\.\.' "$tmp/dbbench.out" | tail -n5)"
	instructions "$cg"
}

count_python() {
	local t=$2 c=$3 n=$4 cg=$tmp/cg.py line want=yes
	set_env "$c"
	vg_prefix "$cg"
	line=$("${ENVV[@]}" "${VG[@]}" "$python_bin" "$script_dir/gil.py" --threads "$t" \
		--ops $((n / t)) 2>"$tmp/gil.err") || die "ABORT: gil.py ($c) failed: $(tail -n5 "$tmp/gil.err")"
	[[ $c != plain ]] || want=no
	[[ " $line " == *" preload=$want "* ]] ||
		die "ABORT: gil.py ($c) reports '$line': libelide.so should $([[ $want == no ]] && echo "NOT ")be mapped"
	instructions "$cg"
}

# ---- the programs' set-ups and sizes -----------------------------------------

setup_memcached() {
	need_bins memcached "memcached:memcached memaslap|memcaslap:libmemcached-tools" || return 1
	memcached_bin=$(readlink -f "$(first_bin memcached)")
	memaslap_bin=$(first_bin memaslap memcaslap)
	mc_user=()
	[[ $(id -u) -ne 0 ]] || mc_user=(-u "$(id -un)")
	workloads="get90-set10" base_ops=$((20000 * scale))
}

setup_mariadb() {
	need_bins mariadb "/usr/sbin/mariadbd:mariadb-server mariadb-install-db:mariadb-server mariadb-admin:mariadb-client sysbench:sysbench" ||
		return 1
	md_prepare
	# Under valgrind InnoDB hangs on io_uring, and cannot reserve the
	# address space of its default buffer pool maximum (8 TB).
	md_vg_args=(--innodb-use-native-aio=0)
	if "$mariadbd_bin" --no-defaults --help --verbose 2>/dev/null | grep -q '^innodb-buffer-pool-size-max '; then
		md_vg_args+=(--innodb-buffer-pool-size-max=128M)
	fi
	workloads="oltp_point_select oltp_read_write" base_ops=""
}

setup_rocksdb() {
	need_bins rocksdb "db_bench|rocksdb_db_bench:rocksdb-tools" || return 1
	rocks_num=200000
	rocks_fill
	workloads="readrandom" base_ops=$((40000 * scale))
}

setup_python() {
	need_bins python "/usr/bin/python3:python3" || return 1
	python_bin=/usr/bin/python3
	workloads="gil" base_ops=$((4000 * scale))
}

# ops_for PROGRAM WORKLOAD: N, the smaller run's operations.
ops_for() {
	case $1:$2 in
	mariadb:oltp_point_select)	echo $((2000 * scale)) ;;
	mariadb:oltp_read_write)	echo $((100 * scale)) ;;
	*)				echo "$base_ops" ;;
	esac
}

# ---- driver -----------------------------------------------------------------

# Each count runs in a subshell, which has no EXIT trap of its own: a run
# that dies there must not leave its server behind.
stop_orphan() {
	[[ -z $srv ]] || kill "$srv" 2>/dev/null || true
}

ran=0
for p in $programs; do
	log "=== $p ==="
	"setup_$p" || continue
	for w in $workloads; do
		base=$(ops_for "$p" "$w")
		for t in $threads; do
			# n operations must split evenly over t threads
			n=$(((base + t - 1) / t * t))
			for c in "${configs[@]}"; do
				i1=$(trap stop_orphan EXIT; "count_$p" "$w" "$t" "$c" "$n")
				i3=$(trap stop_orphan EXIT; "count_$p" "$w" "$t" "$c" $((3 * n)))
				per=$(awk -v a="$i1" -v b="$i3" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / (2 * n) }')
				log "$(printf '%-9s %-17s t=%-3s %-8s N=%-7s %14s / %14s instructions: %10s per op' \
					"$p" "$w" "$t" "$c" "$n" "$i1" "$i3" "$per")"
				printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "$w" "$t" "$c" "$n" "$i1" "$i3" "$per" >>"$results"
			done
		done
	done
	ran=$((ran + 1))
done
[[ $ran -gt 0 ]] || die "no program could run"

elapsed=$(($(date +%s) - start_s))
{
	echo "## Instructions per operation of real programs (bench/apps/instructions.sh)"
	echo
	echo "- command: \`$cmdline\`"
	machine_lines
	echo "- libelide: $lib; $("$valgrind_bin" --version)"
	echo "- each figure: (I(3N) - I(N)) / 2N, I the server process's instructions (cachegrind) in a run of N or 3N"
	echo "  operations; memcached: memaslap -T 2 -c 16 -x N; MariaDB: sysbench --events N (transactions);"
	echo "  RocksDB: db_bench readrandom --reads N/THREADS; CPython: gil.py --ops N/THREADS"
	echo "- valgrind runs one thread at a time: paths, not waiting; wall time: $((elapsed / 60)) min $((elapsed % 60)) s"
	for s in "${skipped[@]}"; do echo "- skipped: $s"; done
	echo
	hdr="| program | workload | threads | N | plain instructions/op"
	sep="|---|---|---:|---:|---:"
	for c in "${configs[@]:1}"; do hdr+=" | $c/plain"; sep+="|---:"; done
	echo "$hdr |"
	echo "$sep|"
	awk -F'\t' -v cfgs="${configs[*]}" '
		BEGIN { nc = split(cfgs, cfg, " ") }
		{ key = $1 "\t" $2 "\t" $3; if (!(key in seen)) { seen[key] = 1; order[++nk] = key; nn[key] = $5 }
		  v[key, $4] = $8 }
		END {
			for (k = 1; k <= nk; k++) {
				split(order[k], f, "\t")
				base = v[order[k], cfg[1]]
				line = sprintf("| %s | %s | %s | %s | %.0f", f[1], f[2], f[3], nn[order[k]], base)
				for (i = 2; i <= nc; i++)
					line = line sprintf(" | %.3f", base > 0 ? v[order[k], cfg[i]] / base : 0)
				print line " |"
			}
		}' "$results"
} >"$tmp/final.md"
cat "$tmp/final.md"
[[ -z $out ]] || cp "$tmp/final.md" "$out"
