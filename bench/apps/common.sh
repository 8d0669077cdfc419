# shellcheck shell=bash disable=SC2154,SC2034
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/apps/common.sh: what bench/apps/run.sh (timed runs) and
# bench/apps/instructions.sh (instruction counts) share: the configurations'
# environments, the packages, and starting the servers.  Sourced after
# bench/lib.sh, never run.  Expects $prog, $tmp (the run's private folder,
# with a 1777 "rt" folder in it) and $lib (libelide.so, absolute).

log() { echo "$prog: $*" >&2; }

all_programs="memcached mariadb rocksdb python"
all_configs="plain default off watch0 simabort nospin ownmutex0 ownrwlock0"
nproc=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)

# ---- environments -----------------------------------------------------------

# The load generators and set-up steps run with none of libelide's variables.
CLEAN=(env -u LD_PRELOAD -u ELIDE -u ELIDE_SIM_ABORT -u ELIDE_FAKE_NO_RTM -u ELIDE_RUNTIME_DIR -u GLIBC_TUNABLES)
# run.sh --pin: taskset(1) prefixes that keep a server and its load
# generator on CPUs of their own (empty: the scheduler decides).
SERVER_PIN=()
LOAD_PIN=()

# check_selection: the --threads, --configs and --programs a script was
# given ($threads, $configs, $programs against $all_configs and
# $all_programs) are well-formed; a usage error otherwise.
check_selection() {
	local t c p
	[[ -n ${threads// /} ]] || usage_error "--threads is empty"
	for t in $threads; do
		is_uint "$t" || usage_error "--threads entries must be positive integers, not '$t'"
	done
	[[ ${configs[0]:-} == plain ]] || usage_error "--configs must start with plain (every ratio is to plain)"
	for c in "${configs[@]}"; do
		[[ " $all_configs " == *" $c "* ]] || usage_error "unknown configuration '$c' (known: $all_configs)"
	done
	[[ -n ${programs// /} ]] || usage_error "--programs is empty"
	for p in $programs; do
		[[ " $all_programs " == *" $p "* ]] || usage_error "unknown program '$p' (known: $all_programs)"
	done
}

# find_lib: $lib, or where a build tree has libelide.so, made absolute and
# checked to preload.
find_lib() {
	local f
	if [[ -z $lib ]]; then
		for f in ${top_builddir:+"$top_builddir/libelide/.libs/libelide.so"} \
			"$PWD/libelide/.libs/libelide.so" "$PWD/b/libelide/.libs/libelide.so" \
			"$script_dir/../../libelide/.libs/libelide.so"; do
			if [[ -e $f ]]; then lib=$f; break; fi
		done
		[[ -n $lib ]] || die "cannot find libelide.so: build it ('make libelide/libelide.la') or pass --lib PATH"
	fi
	lib=$(abs_lib "$lib" libelide)
	check_preload "$lib" /bin/true
}

# set_env CONFIG: ENVV becomes the env(1) prefix that starts the server,
# with a runtime folder of its own (mktemp: set_env may run in a subshell).
set_env() {
	local rt
	ENVV=("${SERVER_PIN[@]}" "${CLEAN[@]}")
	[[ $1 == plain ]] && return 0
	rt=$(mktemp -d "$tmp/rt/XXXXXX") || die "cannot create a runtime folder under $tmp/rt"
	chmod 1777 "$rt"
	ENVV+=(ELIDE_RUNTIME_DIR="$rt" LD_PRELOAD="$lib")
	case $1 in
	default)	;;
	off)		ENVV+=(ELIDE=mode=off) ;;
	watch0)		ENVV+=(ELIDE=watch=0) ;;
	simabort)	ENVV+=(ELIDE=mode=adaptive ELIDE_SIM_ABORT=0x6) ;;
	nospin)		ENVV+=(ELIDE=wait_spins=0) ;;
	ownmutex0)	ENVV+=(ELIDE=own_mutex=0) ;;
	ownrwlock0)	ENVV+=(ELIDE=own_rwlock=0) ;;
	*)		die "internal error: unknown config '$1'" ;;
	esac
}

# verify_preload PID EXE CONFIG WHAT: waits until PID runs EXE (env(1) has
# exec()ed it), then dies unless libelide.so is mapped exactly when CONFIG
# wants it.
verify_preload() {
	local pid=$1 exe=$2 config=$3 what=$4 i now=""
	for ((i = 0; i < 200; i++)); do
		now=$(readlink "/proc/$pid/exe" 2>/dev/null) || die "ABORT: $what (pid $pid) exited before its preload could be checked"
		[[ $now == "$exe" ]] && break
		sleep 0.02
	done
	[[ $now == "$exe" ]] || die "ABORT: $what (pid $pid) runs '$now', not '$exe'"
	if grep -q 'libelide\.so' "/proc/$pid/maps" 2>/dev/null; then
		[[ $config != plain ]] || die "ABORT: $what (pid $pid) maps libelide.so in the plain configuration (/etc/ld.so.preload?)"
	else
		[[ $config == plain ]] || die "ABORT: $what (pid $pid, config $config): libelide.so is NOT in /proc/$pid/maps: the preload did not take"
	fi
}

# ---- packages -------------------------------------------------------------

skipped=()
apt_updated=no

# need_bins PROGRAM "BIN:PACKAGE ..." : every BIN (a name on PATH, or an
# absolute path; "a|b" for alternatives) must be there; missing ones are
# installed from PACKAGE as root, else the program is skipped (returns 1).
need_bins() {
	local program=$1 spec bin pkg alt found missing=() pkgs=()
	for spec in $2; do
		bin=${spec%%:*} pkg=${spec#*:} found=""
		IFS='|' read -r -a alts <<<"$bin"
		for alt in "${alts[@]}"; do
			if [[ $alt == /* && -x $alt ]] || { [[ $alt != /* ]] && command -v "$alt" >/dev/null; }; then
				found=yes
				break
			fi
		done
		if [[ -z $found ]]; then
			missing+=("$bin")
			[[ " ${pkgs[*]} " == *" $pkg "* ]] || pkgs+=("$pkg")
		fi
	done
	[[ ${#missing[@]} -eq 0 ]] && return 0
	if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
		log "skipping $program: missing ${missing[*]} (Debian: apt-get install --no-install-recommends ${pkgs[*]}, as root)"
		skipped+=("$program (missing ${missing[*]}: apt-get install ${pkgs[*]})")
		return 1
	fi
	log "installing ${pkgs[*]} for $program"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >"$tmp/apt.log" 2>&1; then
		if [[ $apt_updated == no ]]; then
			apt_updated=yes
			apt-get update >>"$tmp/apt.log" 2>&1 || true
		fi
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >>"$tmp/apt.log" 2>&1 || {
			log "skipping $program: apt-get install ${pkgs[*]} failed: $(tail -n3 "$tmp/apt.log")"
			skipped+=("$program (apt-get install ${pkgs[*]} failed)")
			return 1
		}
	fi
	hash -r
	return 0
}

# first_bin NAME...: the first NAME on PATH (or absolute and executable).
first_bin() {
	local b
	for b in "$@"; do
		if [[ $b == /* ]]; then [[ -x $b ]] && { echo "$b"; return 0; }
		else command -v "$b" 2>/dev/null && return 0
		fi
	done
	return 1
}


# stop_server PID: SIGTERM, then SIGKILL after 30 s.
stop_server() {
	local pid=$1 i
	kill "$pid" 2>/dev/null || true
	for ((i = 0; i < 300; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	srv=""
}


mc_stat_pid() {
	(
		exec 5<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'stats\r\n' >&5
		while IFS= read -r -t 2 line <&5; do
			line=${line%$'\r'}
			case $line in
			"STAT pid "*) echo "${line#STAT pid }" ;;
			END) break ;;
			esac
		done
	) 2>/dev/null
}


md_rows=10000

md_extra=()

# md_args: mariadbd's options; the datadir is $md_datadir when set (md_start
# appends the array md_extra).
md_args() {
	local -a a=(--no-defaults --datadir="${md_datadir:-$tmp/mariadb/data}" --socket="$tmp/mariadb/sock"
		--pid-file="$tmp/mariadb/pid" --skip-networking --log-error="$tmp/mariadb/err.log"
		--innodb-buffer-pool-size=128M --innodb-log-file-size=48M
		--innodb-flush-log-at-trx-commit=2 --max-connections=512)
	[[ $(id -u) -ne 0 ]] || a+=(--user="$(id -un)")
	printf '%s\n' "${a[@]}"
}

# md_start CONFIG [PREFIX...]: starts mariadbd under CONFIG's environment
# (and PREFIX, a command such as valgrind's), waits for it to answer.
md_start() {
	local c=$1 i pid
	shift
	mapfile -t args < <(md_args)
	set_env "$c"
	"${ENVV[@]}" "$@" "$mariadbd_bin" "${args[@]}" "${md_extra[@]}" >>"$tmp/mariadb/out.log" 2>&1 &
	pid=$! srv=$pid
	for ((i = 0; i < 1200; i++)); do
		kill -0 "$pid" 2>/dev/null || die "ABORT: mariadbd ($c) exited at start-up: $(tail -n5 "$tmp/mariadb/err.log")"
		"${CLEAN[@]}" "$madmin_bin" --no-defaults --socket="$tmp/mariadb/sock" -u "$(id -un)" ping >/dev/null 2>&1 && break
		sleep 0.05
	done
	((i < 1200)) || die "ABORT: mariadbd ($c) did not answer within 60 s: $(tail -n5 "$tmp/mariadb/err.log")"
	md_pid=$pid
}

sb_common() {
	printf '%s\n' --db-driver=mysql --mysql-socket="$tmp/mariadb/sock" --mysql-user="$(id -un)" \
		--mysql-db=sbtest --tables=1 --table-size=$md_rows
}

# md_prepare: a private datadir in $tmp/mariadb/data with sysbench's table
# (1 x $md_rows rows) in it; sets mariadbd_bin, madmin_bin and sysbench_bin.
md_prepare() {
	mariadbd_bin=$(readlink -f /usr/sbin/mariadbd)
	madmin_bin=$(first_bin mariadb-admin)
	sysbench_bin=$(first_bin sysbench)
	mkdir -p "$tmp/mariadb"
	log "mariadb: creating a private datadir and a $md_rows-row table"
	"${CLEAN[@]}" mariadb-install-db --no-defaults --datadir="$tmp/mariadb/data" --user="$(id -un)" \
		--skip-test-db >"$tmp/mariadb/install.log" 2>&1 ||
		die "mariadb-install-db failed: $(tail -n5 "$tmp/mariadb/install.log")"
	md_start plain
	"${CLEAN[@]}" "$madmin_bin" --no-defaults --socket="$tmp/mariadb/sock" -u "$(id -un)" create sbtest ||
		die "cannot create database sbtest"
	mapfile -t sbargs < <(sb_common)
	"${CLEAN[@]}" "$sysbench_bin" oltp_read_write "${sbargs[@]}" prepare >"$tmp/mariadb/prepare.log" 2>&1 ||
		die "sysbench prepare failed: $(tail -n5 "$tmp/mariadb/prepare.log")"
	stop_server "$md_pid"
}

# ---- rocksdb ----------------------------------------------------------------

rocks_common() {
	printf '%s\n' --num="$rocks_num" --value_size=100 --compression_type=none --cache_size=268435456
}

# rocks_fill: $rocks_num keys in $tmp/rocksdb/base (fillseq, compact); sets
# dbbench_bin.
rocks_fill() {
	dbbench_bin=$(readlink -f "$(first_bin db_bench rocksdb_db_bench)")
	mkdir -p "$tmp/rocksdb"
	log "rocksdb: fillseq of $rocks_num keys"
	mapfile -t rargs < <(rocks_common)
	"${CLEAN[@]}" "$dbbench_bin" --benchmarks=fillseq,compact --db="$tmp/rocksdb/base" "${rargs[@]}" \
		>"$tmp/rocksdb/fill.log" 2>&1 || die "db_bench fillseq failed: $(tail -n5 "$tmp/rocksdb/fill.log")"
}
