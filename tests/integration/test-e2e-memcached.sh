#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# End to end with a real program from Debian: memcached (4 worker threads)
# under libelide, next to the real elided on a private D-Bus system bus and
# a private runtime directory (as in test-elided.sh).  Loopback only.
#   - parallel clients speaking memcached's text protocol (bash /dev/tcp)
#     read back exactly what they stored, while memcslap (when installed)
#     loads the server from more threads;
#   - elided lists memcached (ListProcesses), and so does `elidectl list`;
#   - `elidectl show PID` lists its locks with their call sites resolved
#     to a module (memcached+0x...): Debian strips memcached, whose static
#     mutexes and functions are in no symbol table, so names are reported
#     when some library provides them, never required;
#   - SetProcessMode off over D-Bus reaches the process (mode "off" in its
#     segment) and memcached still answers correctly.
# Without RTM, ELIDE_SIM_ABORT makes every transaction abort, so the
# statistics and the adaptation still run.  Waits are bounded polls.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
memcached=$(command -v memcached) || skip "memcached is not installed (Debian: apt-get install memcached)"
need dbus-daemon busctl jq
[ "${ELIDE_SANITIZERS:-no}" = yes ] && skip "sanitizer build: an ASan libelide.so cannot be preloaded into memcached"
tl_setup elide-e2e-mc
mc=
trap 'kill $mc 2>/dev/null; tl_cleanup' EXIT

finish() {
	echo "---- elided log ----"
	cat "$tmp/elided.log"
	if [ $failures -gt 0 ]; then
		echo "$failures check(s) failed"
		exit 1
	fi
	echo "all memcached checks passed"
	exit 0
}

# ---- a private system bus and elided -------------------------------------------
start_private_bus

rundir=$tmp/run
mkdir -m 1777 "$rundir"
export ELIDE_RUNTIME_DIR=$rundir
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.2; };
default: { mode = "adaptive"; };
EOF
"$elided" --config "$tmp/elide.conf" --runtime-dir "$rundir" >"$tmp/elided.log" 2>&1 &
daemon=$!
poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version ||
	{ cat "$tmp/elided.log" >&2; echo "FAIL: elided did not come up on the bus" >&2; exit 1; }
ok "elided is on the private bus"

# ---- memcached under libelide ------------------------------------------------------
# As root, memcached runs as nobody from the start (setpriv), with a copy of
# libelide.so that nobody can read wherever the build tree is.  Only
# memcached itself is preloaded: a preloaded wrapper that exec()s would
# leave its own segment under memcached's pid.
cp "$lib" "$tmp/libelide.so" && chmod 755 "$tmp/libelide.so"
as_user=()
if [ "$(id -u)" -eq 0 ]; then
	command -v setpriv >/dev/null || skip "running as root without setpriv (util-linux) to drop to nobody"
	as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
sim=()
grep -qw rtm /proc/cpuinfo || sim=(ELIDE_SIM_ABORT=0x6)

# mc_cmd PORT REQUEST: one request on a fresh connection, the reply on stdout
# up to END/STORED/... (5 s at most).
mc_cmd() {
	local line
	exec 4<>"/dev/tcp/127.0.0.1/$1" || return 1
	printf '%s\r\n' "$2" >&4
	while IFS= read -r -t 5 line <&4; do
		line=${line%$'\r'}
		printf '%s\n' "$line"
		case "$line" in END | STORED | ERROR | *_ERROR*) break ;; esac
	done
	exec 4<&-
}
stat_of() { mc_cmd "$port" stats | sed -n "s/^STAT $1 //p"; }
our_server() { [ "$(stat_of pid)" = "$mc" ]; }

port=
for try in 1 2 3 4 5; do
	p=$((20000 + (RANDOM + $$ + try * 7919) % 30000))
	"${as_user[@]}" env LD_PRELOAD="$tmp/libelide.so" "${sim[@]}" \
		"$memcached" -t 4 -l 127.0.0.1 -p "$p" -U 0 -m 64 -c 256 >"$tmp/memcached.log" 2>&1 &
	mc=$!
	port=$p
	poll 10 bash -c "kill -0 $mc || exit 0; (exec 5<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && exit 0; exit 1"
	if kill -0 "$mc" 2>/dev/null && our_server; then
		break
	fi
	kill "$mc" 2>/dev/null; wait "$mc" 2>/dev/null
	mc='' port=''
done
[ -n "$mc" ] || { cat "$tmp/memcached.log" >&2; echo "FAIL: memcached did not start on a loopback port" >&2; exit 1; }
ok "memcached $(stat_of version) (pid $mc, $(stat_of threads) threads) listens on 127.0.0.1:$port"

# ---- correctness under load ----------------------------------------------------------
# client ID KEYS ROUND: one connection; sets KEYS keys, gets each back and
# compares; prints "ok ID" or the first difference.
client() {
	local id=$1 n=$2 round=$3 j v line hdr data end
	local -a vals
	exec 3<>"/dev/tcp/127.0.0.1/$port" || { echo "client $id: cannot connect"; return 1; }
	for ((j = 0; j < n; j++)); do
		v="r$round-c$id-k$j-$RANDOM$RANDOM"
		vals[j]=$v
		printf 'set e2e-%s-%s 0 0 %d\r\n%s\r\n' "$id" "$j" "${#v}" "$v" >&3
		IFS= read -r -t 5 line <&3 || { echo "client $id: no reply to set $j"; return 1; }
		[ "$line" = $'STORED\r' ] || { echo "client $id: set $j: '$line'"; return 1; }
	done
	for ((j = 0; j < n; j++)); do
		printf 'get e2e-%s-%s\r\n' "$id" "$j" >&3
		IFS= read -r -t 5 hdr <&3 && IFS= read -r -t 5 data <&3 && IFS= read -r -t 5 end <&3 ||
			{ echo "client $id: short reply to get $j"; return 1; }
		[ "$hdr" = "VALUE e2e-$id-$j 0 ${#vals[j]}"$'\r' ] && [ "$data" = "${vals[j]}"$'\r' ] && [ "$end" = $'END\r' ] ||
			{ echo "client $id: get $j: '$hdr' '$data' '$end', stored '${vals[j]}'"; return 1; }
	done
	exec 3<&-
	echo "ok $id"
}

# check_round ROUND: 6 parallel clients x 60 keys, with memcslap beside them.
check_round() {
	local round=$1 i bad=0 load=
	if command -v memcslap >/dev/null; then
		timeout 30 memcslap -q --servers="127.0.0.1:$port" --concurrency=4 --execute-number=3000 --test=set \
			>"$tmp/memcslap.log" 2>&1 &
		load=$!
		pids+=("$load")
	fi
	local -a cl=()
	for i in 1 2 3 4 5 6; do
		client "$i" 60 "$round" >"$tmp/client-$round-$i" 2>&1 &
		cl+=("$!")
		pids+=("$!")
	done
	for i in "${cl[@]}"; do wait "$i" || bad=1; done
	for i in 1 2 3 4 5 6; do
		grep -qx "ok $i" "$tmp/client-$round-$i" || { bad=1; echo "  $(cat "$tmp/client-$round-$i")" >&2; }
	done
	if [ -n "$load" ]; then
		wait "$load" || { bad=1; echo "  memcslap: $(tail -n3 "$tmp/memcslap.log")" >&2; }
	fi
	return $bad
}

if check_round 1; then
	ok "6 parallel clients read back their 360 values$(command -v memcslap >/dev/null && echo ", memcslap loading 4 more connections")"
else
	fail "memcached answered wrongly under libelide (round 1)"
fi
command -v memcslap >/dev/null || note "memcslap (libmemcached-tools) is not installed: only the bash clients load memcached"

# ---- elided and elidectl see it ------------------------------------------------------
listed() { "${B[@]}" call $NAME $OBJ $IFACE ListProcesses | jq -e --argjson pid "$mc" '.data[0][] | select(.[0] == $pid)'; }
if poll 15 listed; then
	ok "elided lists memcached (ListProcesses)"
else
	fail "elided does not list memcached: $("${B[@]}" call $NAME $OBJ $IFACE ListProcesses)"
fi
ctl_listed() { "$elidectl" list --json=short | jq -e --argjson pid "$mc" '.[] | select(.pid == $pid and (.exe | endswith("memcached")))'; }
if poll 10 ctl_listed; then
	ok "elidectl list shows memcached: $("$elidectl" list --json=short 2>/dev/null | jq -c --argjson pid "$mc" '.[] | select(.pid == $pid) | {pid, user, exe, mode, locks}')"
else
	fail "elidectl list does not show memcached: $("$elidectl" list 2>&1)"
fi

show() { "$elidectl" show "$mc" --runtime-dir "$rundir" --json=short; }
# Debian strips memcached: no .symtab, and its static locks and functions
# are not in .dynsym, so its locks have no names; their call sites are
# given as module+offset (or function+offset where a library exports one).
# A call site as a bare address would mean the mapping was not resolved.
show > "$tmp/show.json" 2>"$tmp/show.err"
nlocks=$(jq '.locks | length' "$tmp/show.json" 2>/dev/null)
named=$(jq -r '[.locks[] | .name | select(startswith("0x") | not)] | unique | join(" ")' "$tmp/show.json" 2>/dev/null)
sites=$(jq -r '[.locks[] | .callsite // ""] | unique | .[:6] | join(", ")' "$tmp/show.json" 2>/dev/null)
raw=$(jq '[.locks[] | select((.callsite // "") == "" or (.callsite | startswith("0x")))] | length' "$tmp/show.json" 2>/dev/null)
if [ "${nlocks:-0}" -gt 0 ] && [ "$raw" = 0 ]; then
	ok "elidectl show: $nlocks locks of memcached, every call site resolved: $sites"
	if [ -n "$named" ]; then
		ok "named locks: $named"
	else
		note "no lock has a symbol name: Debian's memcached is stripped and exports none of its own symbols"
	fi
else
	fail "elidectl show: ${nlocks:-no} locks, $raw call site(s) unresolved: $(head -c 600 "$tmp/show.json") $(cat "$tmp/show.err")"
fi

# ---- policy at runtime ------------------------------------------------------------------
mode_is() { [ "$(show | jq -r .mode)" = "$1" ]; }
poll 10 mode_is adaptive && ok "memcached starts in mode adaptive" || fail "memcached mode: $(show | jq -r .mode)"
if "${B[@]}" call $NAME $OBJ $IFACE SetProcessMode us "$mc" off >/dev/null 2>"$tmp/err"; then
	if poll 15 mode_is off; then
		ok "SetProcessMode off reached memcached"
	else
		fail "mode of memcached after SetProcessMode off: $(show | jq -r .mode)"
	fi
else
	fail "SetProcessMode: $(cat "$tmp/err")"
fi
if check_round 2; then
	ok "memcached still answers correctly with elision off"
else
	fail "memcached answered wrongly after the policy change (round 2)"
fi
kill -0 "$mc" 2>/dev/null && ok "memcached is still running" || fail "memcached died: $(cat "$tmp/memcached.log")"
finish
