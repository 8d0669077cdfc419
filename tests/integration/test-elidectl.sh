#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Every elidectl command against the real elided on a private D-Bus system
# bus (dbus-daemon), a private runtime directory and a temporary
# configuration, with real workloads under libelide (started by
# `elidectl run`): status, list, show (PID and EXE), set/reset (process and
# lock), reload, learned and forget (and show's "off (learned, AGE ago)"
# for a lock a finished run taught "never"), check-config, hw, run, top
# (one-shot and on a pty), -H, and the error paths: unknown pid, unknown lock, invalid mode, permission
# denied (as nobody, when root), invalid config, daemon not running.
# Exit statuses are checked against elidectl(1): 0 ok, 1 failure, 2 usage,
# 3 not found, 4 permission denied, 5 elided not running.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need dbus-daemon busctl jq
tl_setup elidectl-test

# expect STATUS PATTERN DESCRIPTION -- COMMAND...: exit status and stderr.
expect() {
	local want=$1 pattern=$2 what=$3 rc
	shift 4
	"$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne "$want" ]; then
		fail "$what: exit $rc, want $want; stderr: $(head -c 300 "$tmp/err")"
	elif [ -n "$pattern" ] && ! grep -qE -- "$pattern" "$tmp/err" "$tmp/out"; then
		fail "$what: no '$pattern' in: $(head -c 300 "$tmp/err")"
	else
		ok "$what (exit $rc)"
	fi
}

start_private_bus

rundir="$tmp/run"
mkdir -m 1777 "$rundir"
export ELIDE_RUNTIME_DIR="$rundir"  # for the fallback when elided is down
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.2; };
default: { mode = "adaptive"; };
program = ( { comm = "wl-off"; mode = "off"; } );
EOF
cp "$workload" "$tmp/wl-a"
cp "$workload" "$tmp/wl-off"

start_daemon() {
	"$elided" --config "$tmp/elide.conf" --runtime-dir "$rundir" >>"$tmp/elided.log" 2>&1 &
	daemon=$!
	poll 10 busctl --system get-property org.elide.elided1 /org/elide/elided1 org.elide.Manager1 Version \
		|| { cat "$tmp/elided.log" >&2; echo "FAIL: elided did not come up" >&2; exit 1; }
}

# ---- daemon not running (nothing owns the name) ---------------------------
expect 5 "elided is not running.*start it with: systemctl start elided" "set without elided says how to start it" -- "$elidectl" set 1 off
expect 5 "elided is not running" "reload without elided" -- "$elidectl" reload
expect 5 "elided is not running" "learned without elided" -- "$elidectl" learned
expect 5 "elided is not running" "forget without elided" -- "$elidectl" forget
expect 5 "not running" "status without elided" -- "$elidectl" status
expect 0 "elided is not running: reading segments directly \(read-only\)" "list falls back to the segments" \
	-- "$elidectl" list

start_daemon
ok "elided is on the private bus"

# ---- run: the workloads are started by elidectl run ------------------------
export ELIDE_SIM_ABORT=0x6  # every simulated transaction aborts (no RTM here)
# elidectl run appends libelide to LD_PRELOAD: in a sanitizer build the ASan
# runtime must already be there, first.  Only ever called in a subshell
# (background or $(...)): it execs, so $! is the workload's pid.
elrun() {
	if [ -n "$asan_first" ]; then
		LD_PRELOAD="$asan_first${LD_PRELOAD:+ $LD_PRELOAD}" exec "$elidectl" run "$@"
	fi
	exec "$elidectl" run "$@"
}
elrun --mode adaptive -- "$tmp/wl-a" --seconds 120 >/dev/null &
wa=$!; pids+=("$wa")
elrun "$tmp/wl-off" --seconds 120 >/dev/null &
woff=$!; pids+=("$woff")
listed() { "$elidectl" list --json | jq -e --argjson p "$1" '.[] | select(.pid == $p)'; }
poll 15 listed "$wa" && ok "run: wl-a (pid $wa) runs under libelide, listed by elided" || fail "wl-a not listed"
poll 15 listed "$woff" && ok "run: wl-off (pid $woff) listed" || fail "wl-off not listed"

out=$(elrun --mode off -- sh -c 'echo "$LD_PRELOAD|$ELIDE"')
case "$out" in *libelide.so\|mode=off) ok "run: LD_PRELOAD and ELIDE=mode=off set ($out)" ;; *) fail "run env: $out" ;; esac
out=$(ELIDE=report=0,mode=on LD_PRELOAD=/nonexistent.so elrun --mode=off sh -c 'echo "$LD_PRELOAD|$ELIDE"' 2>/dev/null)
case "$out" in *"/nonexistent.so "*libelide.so\|report=0,mode=off) ok "run: LD_PRELOAD appended, ELIDE merged" ;; *) fail "run merge: $out" ;; esac
expect 2 "invalid mode" "run: invalid mode" -- "$elidectl" run --mode sometimes true
expect 127 "cannot run" "run: no such command" -- "$elidectl" run /nonexistent/cmd
expect 2 "usage" "run: no command" -- "$elidectl" run

# ---- status -----------------------------------------------------------------
expect 0 "" "status" -- "$elidectl" status
for want in "elided: running" "Config: $tmp/elide.conf" "Discovery: " "Lock waits: " "Hardware: RTM" "Busiest processes" "Last reload"; do
	grep -q "$want" "$tmp/out" && ok "status shows '$want'" || fail "status lacks '$want': $(cat "$tmp/out")"
done
s=$("$elidectl" status --json)
[ "$(jq -r .daemon <<<"$s")" = running ] && [ "$(jq -r '.config_files[0]' <<<"$s")" = "$tmp/elide.conf" ] \
	&& jq -e '.discovery and (.rtm_usable | type == "boolean") and (.busiest | length >= 1)' <<<"$s" >/dev/null \
	&& ok "status --json" || fail "status --json: $s"

# ---- list ---------------------------------------------------------------------
expect 0 "" "list" -- "$elidectl" list
grep -qE "^ *$wa +$(id -un) +$tmp/wl-a " "$tmp/out" && ok "list table row for wl-a" || fail "list: $(cat "$tmp/out")"
grep -q "processes listed" "$tmp/out" && ok "list legend" || fail "list legend"
"$elidectl" list --no-legend | grep -q "PID" && fail "--no-legend kept the header" || ok "list --no-legend"
[ "$("$elidectl" list --json=short | jq -r --argjson p "$wa" '.[] | select(.pid == $p) | .rates')" = interval ] \
	&& ok "list --json: rates over elided's interval" || fail "list --json rates"
[ "$("$elidectl" list --json | jq -r --argjson p "$woff" '.[] | select(.pid == $p) | .mode')" = off ] \
	&& ok "list --json: wl-off mode off (config rule)" || fail "wl-off mode"

# ---- show ---------------------------------------------------------------------
has_lock() { "$elidectl" show "$wa" --json | jq -e '.locks[] | select(.name == "cache_lock")'; }
poll 15 has_lock && ok "show --json: cache_lock" || fail "show --json lacks cache_lock: $("$elidectl" show "$wa" --json)"
expect 0 "" "show PID" -- "$elidectl" show "$wa"
grep -qE "^LOCK +KIND +ACQUIRED +ELIDED% +ABORTS +CYCLES-LOST +STATE$" "$tmp/out" && grep -q "^cache_lock " "$tmp/out" \
	&& ok "show table" || fail "show table: $(cat "$tmp/out")"
expect 0 "" "show PID -o with the call site" -- "$elidectl" show "$wa" -o LOCK,KIND,CALL-SITE,ACQUIRED,CONFLICT
grep -qE "^LOCK +KIND +CALL-SITE +ACQUIRED +CONFLICT$" "$tmp/out" && grep -q "^cache_lock " "$tmp/out" \
	&& ok "show -o" || fail "show -o: $(cat "$tmp/out")"
n=$("$elidectl" show "$wa" --json --sort aborts --max 1 | jq '.locks | length')
[ "$n" = 1 ] && ok "show --sort aborts --max 1" || fail "show --max 1 gave $n locks"
j=$("$elidectl" show "$wa" --json)
jq -e '.locks[0].aborts | has("conflict") and has("capacity") and has("other")' <<<"$j" >/dev/null \
	&& jq -e '[.locks[].acquired | type == "number"] | all' <<<"$j" >/dev/null \
	&& ok "show --json: exact counts, aborts by cause" || fail "show --json: $j"
# The same process, the same facts in list and show; null where elided does not know.
l=$("$elidectl" list --json | jq -c --argjson p "$wa" '.[] | select(.pid == $p) | {created_ns, sample, exe, unit, state}')
sj=$("$elidectl" show "$wa" --json | jq -c '{created_ns, sample, exe, unit, state}')
[ -n "$l" ] && [ "$l" = "$sj" ] && ok "list and show --json agree: $l" || fail "list $l vs show $sj"
jq -e '.created_ns > 0 and .sample == null' <<<"$l" >/dev/null && ok "created_ns known, sample null over D-Bus" || fail "created_ns/sample: $l"
n=$("$elidectl" show wl-a --json | jq --argjson p "$wa" '[.[] | select(.pid == $p)] | length')
[ "$n" = 1 ] && ok "show EXE (base name)" || fail "show wl-a: $n"
n=$("$elidectl" show "$tmp/wl-a" --json | jq 'length')
[ "$n" = 1 ] && ok "show EXE (path)" || fail "show $tmp/wl-a: $n"
expect 3 "no libelide process" "show: unknown pid" -- "$elidectl" show 999999
expect 3 "no libelide process runs" "show: unknown exe" -- "$elidectl" show no-such-program
expect 2 "invalid PID" "show: bad pid" -- "$elidectl" show 12x
expect 2 "unknown key" "show: bad --sort" -- "$elidectl" show "$wa" --sort nope

# ---- set / reset ----------------------------------------------------------------
mode_is() { [ "$("$elidectl" show "$1" --json | jq -r .mode)" = "$2" ]; }
lock_override() { "$elidectl" show "$1" --json | jq -r --arg n "$2" '[.locks[] | select(.name == $n) | .decided_by] | unique | join(",")'; }
expect 0 "" "set PID off" -- "$elidectl" set "$wa" off
poll 15 mode_is "$wa" off && ok "set: mode off applied" || fail "set not applied"
expect 0 "" "set PID --lock cache_lock on" -- "$elidectl" set "$wa" --lock cache_lock on
poll 15 bash -c "[ \"\$('$elidectl' show $wa --json | jq -r '[.locks[] | select(.name == \"cache_lock\") | .decided_by] | unique | join(\",\")')\" = override ]" \
	&& ok "set --lock: override shown" || fail "lock override: $(lock_override "$wa" cache_lock)"
expect 0 "" "reset PID --lock cache_lock" -- "$elidectl" reset "$wa" --lock cache_lock
expect 0 "" "reset PID" -- "$elidectl" reset "$wa"
poll 15 mode_is "$wa" adaptive && ok "reset: back to adaptive" || fail "reset not applied"
# A decision reaches a process whose every transaction aborts (mode=on, no
# commit ever counted), and elided shows a mode only once the process runs it.
cp "$workload" "$tmp/wl-on"
elrun --mode on -- "$tmp/wl-on" --seconds 120 >/dev/null &
won=$!; pids+=("$won")
poll 15 listed "$won" && ok "run: wl-on (pid $won, every transaction aborts) listed" || fail "wl-on not listed"
seg_mode_is() { [ "$("$elidectl" show "$1" --runtime-dir "$rundir" --json | jq -r .mode)" = "$2" ]; }
list_mode() { "$elidectl" list --json | jq -r --argjson p "$1" '.[] | select(.pid == $p) | .mode'; }
expect 0 "" "set wl-on off" -- "$elidectl" set "$won" off
poll 15 seg_mode_is "$won" off && ok "set: an all-aborting mode=on process applied off (its segment says off)" ||
	fail "set off not applied by the all-aborting process: segment says $("$elidectl" show "$won" --runtime-dir "$rundir" --json | jq -r .mode)"
poll 15 bash -c "[ \"\$('$elidectl' list --json | jq -r '.[] | select(.pid == $won) | .mode')\" = off ]" &&
	ok "list: off once the process runs it" || fail "list mode after set off: $(list_mode "$won")"
expect 0 "" "reset wl-on" -- "$elidectl" reset "$won"
poll 15 seg_mode_is "$won" on && ok "reset: the switched-off process is back to on (decisions reach mode=off)" ||
	fail "reset not applied to the switched-off process"
kill "$won" 2>/dev/null

# Who turned a lock off, in the table's words and JSON's alike.
# (the process is back to adaptive: its lock's own state shows)
expect 0 "" "set PID --lock cache_lock off" -- "$elidectl" set "$wa" --lock cache_lock off
lock_off_override() { "$elidectl" show "$wa" | grep -qE "^cache_lock .* off \(override\)$"; }
poll 15 lock_off_override && ok "show: a lock set off says off (override)" || fail "show after set --lock off: $("$elidectl" show "$wa")"
"$elidectl" show "$wa" | grep -q "(elided)" && fail "show still says (elided)" || ok "show: no \"(elided)\""
"$elidectl" show "$wa" --json | jq -e '[.locks[] | select(.name == "cache_lock")] | all(.decided_by == "override" and .reason == "override" and .state == "off")' >/dev/null \
	&& ok "show --json: decided_by and reason override" || fail "show --json after set --lock off: $("$elidectl" show "$wa" --json)"
expect 0 "" "reset PID --lock cache_lock (after off)" -- "$elidectl" reset "$wa" --lock cache_lock
expect 3 "No libelide process" "set: unknown pid" -- "$elidectl" set 999999 off
expect 3 "lock" "set: unknown lock" -- "$elidectl" set "$wa" --lock no_such_lock off
expect 3 "lock" "reset: unknown lock" -- "$elidectl" reset "$wa" --lock no_such_lock
expect 3 "No libelide process" "reset: unknown pid" -- "$elidectl" reset 999999
expect 2 "invalid mode" "set: invalid mode" -- "$elidectl" set "$wa" sometimes
expect 2 "usage" "set: missing mode" -- "$elidectl" set "$wa"
expect 2 "--lock applies" "--lock on list" -- "$elidectl" list --lock x

# ---- learned and forget ------------------------------------------------------------
# A run that tries 200+ transactions and commits none (ELIDE_SIM_ABORT)
# teaches "never elide"; the program's next run starts with those locks off.
cp "$workload" "$tmp/wl-learn"
elrun -- "$tmp/wl-learn" --seconds 3 >/dev/null &
wl1=$!; pids+=("$wl1")
poll 15 listed "$wl1" && ok "learn: first run of wl-learn adopted" || fail "wl-learn (pid $wl1) not listed"
wait "$wl1"
learned_never() {
	local j
	j=$("$elidectl" learned --json) || return 1
	jq -e --arg e "$tmp/wl-learn" '[.[] | select(.exe == $e and .verdict == "never")] | length > 0' <<<"$j"
}
poll 15 learned_never && ok "learned --json: wl-learn's locks learned as never" \
	|| fail "learned after wl-learn's run: $("$elidectl" learned --json)"
expect 0 "" "learned (table)" -- "$elidectl" learned
grep -qE "^PROGRAM +LOCK +VERDICT +RUNS +ATTEMPTS +COMMITS +AGE$" "$tmp/out" && grep -qE "^$tmp/wl-learn +data:.* never +1 " "$tmp/out" \
	&& grep -qE "^[0-9]+ learned decisions?\.$" "$tmp/out" && ok "learned table" || fail "learned table: $(cat "$tmp/out")"
"$elidectl" learned --json | jq -e '.[0] | (.uid | type == "number") and (.program | startswith("path:")) and (.first_learned > 0) and (.runs >= 1) and has("aborts")' >/dev/null \
	&& ok "learned --json fields" || fail "learned --json: $("$elidectl" learned --json)"
expect 0 "" "learned -o +USER,UPDATED" -- "$elidectl" learned -o +USER,UPDATED
head -1 "$tmp/out" | grep -qE "AGE +USER +UPDATED$" && ok "learned -o" || fail "learned -o: $(head -1 "$tmp/out")"
expect 2 "" "learned -o bogus" -- "$elidectl" learned -o bogus
expect 2 "no arguments" "learned takes no arguments" -- "$elidectl" learned x

elrun -- "$tmp/wl-learn" --seconds 60 --delay-ms 1500 >/dev/null &
wl2=$!; pids+=("$wl2")
# (jq -e passes on empty input: show must have answered.)
learned_off() {
	local j
	j=$("$elidectl" show "$wl2" --json) || return 1
	jq -e '[.locks[] | select(.decided_by == "learned" and .reason == "learned" and .state == "off" and (.learned_since | type == "number"))] | length > 0' <<<"$j"
}
poll 20 learned_off && ok "show --json: the second run's lock is off, decided_by learned, learned_since set" \
	|| fail "second run of wl-learn: $("$elidectl" show "$wl2" --json)"
"$elidectl" show "$wl2" | grep -qE " off \(learned, [0-9]+[smhd] ago\)$" && ok "show: off (learned, AGE ago)" \
	|| fail "show table of the second run: $("$elidectl" show "$wl2")"
"$elidectl" list | grep -qE "^ *$wl2 .* off \(learned\) " && ok "list: the second run is off (learned)" \
	|| fail "list with the second run: $("$elidectl" list)"

expect 2 "absolute path" "forget: a base name" -- "$elidectl" forget wl-learn
expect 2 "usage" "forget: two arguments" -- "$elidectl" forget /a /b
expect 0 "^forgot 0 learned decisions of /nonexistent/prog$" "forget: an unknown program" -- "$elidectl" forget /nonexistent/prog
expect 0 "^forgot [1-9][0-9]* learned decisions? of $tmp/wl-learn$" "forget EXE" -- "$elidectl" forget "$tmp/wl-learn"
[ "$("$elidectl" learned --json | jq --arg e "$tmp/wl-learn" '[.[] | select(.exe == $e)] | length')" = 0 ] \
	&& ok "forget EXE: its entries are gone" || fail "after forget: $("$elidectl" learned --json)"
[ "$("$elidectl" forget --json | jq -r '.forgotten | type')" = number ] && ok "forget --json" || fail "forget --json"
kill "$wl2" 2>/dev/null; wait "$wl2" 2>/dev/null

# ---- reload and check-config ----------------------------------------------------
cp "$tmp/elide.conf" "$tmp/good.conf"
expect 0 "configuration OK" "check-config FILE (good)" -- "$elidectl" check-config "$tmp/good.conf"
[ "$("$elidectl" check-config "$tmp/good.conf" --json | jq -r .valid)" = true ] && ok "check-config --json" || fail "check-config --json"
printf 'daemon: { interval = 0.2; };\nprogram = ( { comm = "x"; mode = "sometimes"; } );\n' > "$tmp/bad.conf"
expect 1 "bad.conf:[0-9]+: " "check-config FILE (invalid mode)" -- "$elidectl" check-config "$tmp/bad.conf"
printf 'daemon: { interval = ; };\n' > "$tmp/syntax.conf"
expect 1 "syntax.conf:1: " "check-config FILE (syntax error)" -- "$elidectl" check-config "$tmp/syntax.conf"
expect 1 "No such file" "check-config: missing file" -- "$elidectl" check-config "$tmp/none.conf"
mkdir "$tmp/good.conf.d" && printf 'default: { mode = "bogus"; };\n' > "$tmp/good.conf.d/50-x.conf"
expect 1 "50-x.conf:1: " "check-config: a bad drop-in" -- "$elidectl" check-config "$tmp/good.conf"

expect 0 "" "reload (good config)" -- "$elidectl" reload
echo 'daemon: { interval = ; };' >> "$tmp/elide.conf"
expect 1 "elide.conf:[0-9]+" "reload (broken config): file:line" -- "$elidectl" reload
kill -0 "$daemon" && ok "elided survives the refused reload" || fail "elided died"
"$elidectl" status | grep -q "Last reload: failed" && ok "status shows the failed reload" || fail "status after failed reload: $("$elidectl" status)"
"$elidectl" status --json | jq -e '.last_reload.result == "failed" and (.last_reload.error | test("elide.conf:[0-9]+")) and (.last_reload.time | type == "string") and .last_reload.startup == false' >/dev/null \
	&& ok "status --json: last_reload is an object (result failed, error, time)" || fail "status --json last_reload: $("$elidectl" status --json | jq -c .last_reload)"
"$elidectl" status --json | jq -e '(.discovery.method == "bpf" or .discovery.method == "fallback") and (.discovery.mechanism | type == "string")' >/dev/null \
	&& ok "status --json: discovery.method is an enum" || fail "status --json discovery: $("$elidectl" status --json | jq -c .discovery)"
cp "$tmp/good.conf" "$tmp/elide.conf"

# ---- hw -------------------------------------------------------------------------
"$elidectl" hw >"$tmp/out" 2>&1; rc=$?
usable=$("$elidectl" hw --json | jq -r .rtm_usable)
if { [ $rc = 0 ] && [ "$usable" = true ]; } || { [ $rc = 1 ] && [ "$usable" = false ]; }; then
	ok "hw: exit $rc matches rtm_usable=$usable"
else
	fail "hw: exit $rc, rtm_usable=$usable"
fi
for want in "CPUID RTM:" "CPUID HLE:" "RTM_ALWAYS_ABORT:" "TSX_CTRL:" "Kernel tsx=:" "Probe:" "Verdict:"; do
	grep -q "^$want" "$tmp/out" && ok "hw shows $want" || fail "hw lacks $want: $(cat "$tmp/out")"
done
"$elidectl" hw --json | jq -e 'has("rtm") and has("hle") and has("rtm_always_abort") and has("tsx_ctrl")' >/dev/null \
	&& ok "hw --json" || fail "hw --json"

# ---- top ------------------------------------------------------------------------
"$elidectl" top </dev/null >"$tmp/out" 2>&1 && grep -qE "^ *$wa " "$tmp/out" && head -1 "$tmp/out" | grep -q "ACQUIRED/s" \
	&& ok "top: one-shot table when not on a terminal" || fail "top one-shot: $(cat "$tmp/out")"
"$elidectl" top --sort cycles </dev/null | grep -q "CYCLES-LOST/s" && ok "top --sort cycles" || fail "top --sort"
if command -v script >/dev/null && command -v timeout >/dev/null; then
	{ sleep 1.5; printf c; sleep 0.5; printf q; } | timeout 20 script -qec "$elidectl top" /dev/null >"$tmp/top" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q "sorted by commits/s" "$tmp/top" && grep -q $'\033\[2J' "$tmp/top"; then
		ok "top on a pty: redraws, c sorts, q quits"
	else
		fail "top on a pty (exit $rc): $(head -c 400 "$tmp/top" | cat -v)"
	fi
else
	echo "note: no script(1): the interactive top is not tested"
fi

# ---- -H -------------------------------------------------------------------------
expect 2 "this machine only" "-H with check-config" -- "$elidectl" -H somehost check-config
expect 2 "exclude" "-H with --runtime-dir" -- "$elidectl" -H somehost --runtime-dir "$rundir" list
if command -v ssh >/dev/null; then
	expect 5 "" "-H unreachable host: elided not reachable" -- timeout 30 "$elidectl" -H nobody@host.invalid status
fi

# ---- another user -----------------------------------------------------------------
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	# nobody runs copies: the build tree may be out of its reach.
	for_others elidectl_o "$elidectl"
	for_others lib_o "$lib"
	elidectl=$elidectl_o
	export ELIDE_LIBDIR=${lib_o%/*}
	expect 4 "[Pp]ermission denied" "nobody: set on root's process" -- "${nobody[@]}" "$elidectl" set "$wa" off
	expect 4 "[Pp]ermission denied" "nobody: show root's process" -- "${nobody[@]}" "$elidectl" show "$wa"
	expect 4 "[Pp]ermission denied" "nobody: reset root's process" -- "${nobody[@]}" "$elidectl" reset "$wa"
	expect 4 "[Pp]ermission denied" "nobody: reload" -- "${nobody[@]}" "$elidectl" reload
	# What root's runs taught is root's: nobody neither sees nor forgets it.
	elrun -- "$tmp/wl-learn" --seconds 3 >/dev/null &
	wl3=$!; pids+=("$wl3")
	wait "$wl3"
	poll 15 learned_never && ok "root's run of wl-learn learned again" || fail "wl-learn not learned again"
	n=$("${nobody[@]}" "$elidectl" learned --json | jq length)
	[ "$n" = 0 ] && ok "nobody sees none of root's learned decisions" || fail "nobody sees $n learned decisions"
	expect 0 "^forgot 0 learned decisions$" "nobody: forget forgets none of root's" -- "${nobody[@]}" "$elidectl" forget
	learned_never >/dev/null && ok "root's learned decisions survive nobody's forget" || fail "nobody's forget took root's"
	n=$("${nobody[@]}" "$elidectl" list --json | jq length)
	[ "$n" = 0 ] && ok "nobody lists none of root's processes" || fail "nobody sees $n"
	# nobody's own process: seen and steered.
	cp "$workload" "$tmp/wl-nobody"
	"${nobody[@]}" env ELIDE_RUNTIME_DIR="$rundir" ${asan_first:+LD_PRELOAD=$asan_first} "$elidectl" run "$tmp/wl-nobody" --seconds 120 >/dev/null &
	wn=$!; pids+=("$wn")
	nobody_listed() { "${nobody[@]}" "$elidectl" list --json | jq -e --argjson p "$1" '.[] | select(.pid == $p)'; }
	poll 15 nobody_listed "$wn" && ok "nobody lists their own process" || fail "nobody's process not listed"
	expect 0 "" "nobody: set on their own process" -- "${nobody[@]}" "$elidectl" set "$wn" off
else
	echo "note: not root (or no setpriv): permission errors not tested here"
fi

# ---- elided goes away -------------------------------------------------------------
kill "$daemon"; wait "$daemon" 2>/dev/null; daemon=
expect 0 "elided is not running: reading segments directly" "list after elided stopped: direct fallback" -- "$elidectl" list
grep -qE "^ *$wa " "$tmp/out" && ok "fallback list shows wl-a" || fail "fallback list: $(cat "$tmp/out")"
expect 0 "reading segments directly" "show after elided stopped" -- "$elidectl" show "$wa" --json
expect 5 "elided is not running" "set after elided stopped" -- "$elidectl" set "$wa" off
expect 5 "elided is not running" "reset after elided stopped" -- "$elidectl" reset "$wa"
expect 5 "elided is not running" "reload after elided stopped" -- "$elidectl" reload
expect 5 "not running" "status after elided stopped" -- "$elidectl" status
DBUS_SYSTEM_BUS_ADDRESS=unix:path=$tmp/no-bus expect 0 "cannot connect.*reading segments directly" "list with no bus at all (says so with -v)" -- "$elidectl" -v list
DBUS_SYSTEM_BUS_ADDRESS=unix:path=$tmp/no-bus expect 5 "cannot connect" "set with no bus at all" -- "$elidectl" set "$wa" off

[ $failures -gt 0 ] && { echo "---- elided log ----"; cat "$tmp/elided.log"; }
tl_finish elidectl
