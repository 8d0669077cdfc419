#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Issue 12, run as root with an unprivileged second user (nobody), against
# a real elided on a private bus whose policy is the system bus's defaults
# plus the shipped systemd/org.elide.elided1.conf (not a permissive one):
#   - signals: a subscribed non-owner gets nothing about root's process, a
#     connection that only adds match rules (gdbus monitor style) gets
#     nothing at all, root's subscriber gets everything;
#   - a process that exec's a setuid-root program (same pid, same start
#     time) is root's at once: the override its user set is dropped, the
#     change is logged, its user may no longer read or steer it;
#   - a user's flood of bad segment files gives a few warnings and one
#     "suppressed N messages about uid U" line, not one line per file.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
forge="$top_builddir/tests/integration/seg-forge"
listen="$top_builddir/tests/integration/signal-listen"
policy="${top_srcdir:-$(dirname "$0")/../..}/systemd/org.elide.elided1.conf"
need dbus-daemon busctl jq setpriv
[ "$(id -u)" -eq 0 ] || skip "needs root to run a second, unprivileged user"
id nobody >/dev/null 2>&1 || skip "no user nobody"
[ -x "$listen" ] && [ -x "$forge" ] || skip "helpers not built"
tl_setup elided-privacy
nobody_uid=$(id -u nobody)
as_nobody=(setpriv --reuid="$nobody_uid" --regid="$(id -g nobody)" --clear-groups)
# nobody runs copies: the build tree may be out of its reach.
for_others forge "$forge"
for_others listen "$listen"

# ---- a bus like the system bus ------------------------------------------------
start_system_like_bus "$policy"

rundir="$tmp/run"
mkdir -m 1777 "$rundir"
log="$tmp/elided.log"
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.2; };
default: { mode = "adaptive"; };
EOF
"$elided" --verbose --config "$tmp/elide.conf" --runtime-dir "$rundir" --no-bpf >"$log" 2>&1 &
daemon=$!
poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { cat "$log" >&2; echo "FAIL: elided not on the bus" >&2; exit 1; }
ok "elided on a bus with the shipped policy"

in_log() { grep -qF -- "$1" "$log"; }
adopted() { grep -q "tracking pid $1 " "$log"; }
# start_listener NAME COMMAND...: a signal-listen in the background, waited for until ready.
start_listener() {
	local name=$1; shift
	"$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	pids+=("$!")
	poll 10 grep -qx ready "$tmp/$name.out" || fail "listener $name not ready: $(cat "$tmp/$name.err")"
}
start_listener root "$listen" --subscribe 60
start_listener nobody "${as_nobody[@]}" "$listen" --subscribe 60
start_listener snoop "${as_nobody[@]}" "$listen" 60

# ---- signals ------------------------------------------------------------------
sleep 300 &
root_pid=$!
pids+=("$root_pid")
"$forge" --dir "$rundir" --pid "$root_pid" --locks 4 >/dev/null || fail "seg-forge for root's pid"
"${as_nobody[@]}" sleep 300 &
nb_pid=$!
pids+=("$nb_pid")
poll 5 test "$(awk '/^Uid:/ { print $3 }' "/proc/$nb_pid/status" 2>/dev/null)" = "$nobody_uid"
"${as_nobody[@]}" "$forge" --dir "$rundir" --pid "$nb_pid" --locks 4 >/dev/null || fail "seg-forge as nobody"
poll 10 adopted "$root_pid" || fail "root's pid $root_pid not adopted"
poll 10 adopted "$nb_pid" || fail "nobody's pid $nb_pid not adopted"

poll 10 grep -q "^ProcessAdded $root_pid " "$tmp/root.out" && poll 10 grep -q "^ProcessAdded $nb_pid " "$tmp/root.out" &&
	ok "root's subscriber got ProcessAdded of both" || fail "root's subscriber: $(cat "$tmp/root.out")"
poll 10 grep -q "^ProcessAdded $nb_pid " "$tmp/nobody.out" && ok "nobody's subscriber got its own ProcessAdded" ||
	fail "nobody's subscriber missed its own process: $(cat "$tmp/nobody.out")"
# Root's was sent first: had it reached nobody, it would be there by now.
grep -qw "$root_pid" "$tmp/nobody.out" && fail "nobody's subscriber saw root's process: $(cat "$tmp/nobody.out")" ||
	ok "nobody's subscriber got nothing about root's process"
sleep 0.5
[ "$(grep -vcx ready "$tmp/snoop.out")" -eq 0 ] && ok "a match rule without Subscribe receives nothing" ||
	fail "the snooping connection received: $(cat "$tmp/snoop.out")"
if command -v gdbus >/dev/null; then
	timeout 3 "${as_nobody[@]}" gdbus monitor --system --dest $NAME >"$tmp/gdbus.out" 2>&1 &
	gmon=$!
	sleep 1
	kill "$root_pid"
	wait "$gmon" 2>/dev/null
	grep -q "ProcessRemoved\|ProcessAdded" "$tmp/gdbus.out" && fail "gdbus monitor as nobody saw: $(grep Process "$tmp/gdbus.out")" ||
		ok "gdbus monitor as nobody sees none of root's signals"
else
	kill "$root_pid"
fi
poll 10 grep -q "^ProcessRemoved $root_pid$" "$tmp/root.out" && ok "root's subscriber got ProcessRemoved" ||
	fail "root's subscriber missed ProcessRemoved $root_pid"
grep -q "ProcessRemoved $root_pid" "$tmp/nobody.out" && fail "nobody's subscriber saw root's ProcessRemoved" ||
	ok "nobody's subscriber did not see root's ProcessRemoved"

# ---- an owner change: a setuid exec in a process of nobody's ------------------
suid="$tmp/suid-sleep"
cp "$(command -v sleep)" "$suid"
chmod 4755 "$suid"
mkdir -m 777 "$tmp/sh"
"${as_nobody[@]}" sh -c 'echo $$ > "$1/pid"; while [ ! -e "$1/go" ]; do sleep 0.1; done; exec "$2" 300' sh "$tmp/sh" "$suid" &
pids+=("$!")
poll 5 test -s "$tmp/sh/pid"
sp=$(cat "$tmp/sh/pid")
"${as_nobody[@]}" "$forge" --dir "$rundir" --pid "$sp" --locks 4 >/dev/null || fail "seg-forge as nobody for $sp"
poll 10 adopted "$sp" || fail "nobody's pid $sp not adopted"
"${as_nobody[@]}" "${B[@]}" call $NAME $OBJ $IFACE SetProcessMode us "$sp" off >/dev/null 2>"$tmp/err" &&
	ok "nobody set an override on its own pid $sp" || fail "nobody's SetProcessMode on $sp: $(cat "$tmp/err")"
owner_mode() { "${B[@]}" call $NAME $OBJ $IFACE ListProcesses | jq -r --argjson pid "$1" '.data[0][] | select(.[0] == $pid) | "\(.[1]) \(.[5])"'; }
# A forged segment never applies decisions, so it is listed with the mode
# it says it runs (elided never reports one the process has not applied).
[ "$(owner_mode "$sp")" = "$nobody_uid adaptive" ] && ok "listed as nobody's, with the mode its segment says" ||
	fail "before: $(owner_mode "$sp")"
override_line() { grep -F "pid $sp (" "$log" | grep -qF "mode set to off at runtime by uid $nobody_uid"; }
poll 5 override_line && ok "nobody's override on its own pid logged" || fail "no override line for $sp"
touch "$tmp/sh/go"
euid_root() { [ "$(awk '/^Uid:/ { print $3 }' "/proc/$sp/status")" = 0 ]; }
changed_line() { grep -F "pid $sp (" "$log" | grep -F "changed owner uid $nobody_uid -> uid 0; runtime overrides dropped"; }
if poll 5 euid_root; then
	poll 5 changed_line && ok "logged: $(changed_line | sed 's/^elided: //')" || fail "no owner-change line for $sp"
	[ "$(changed_line | wc -l)" -eq 1 ] && ok "logged once" || fail "owner change logged $(changed_line | wc -l) times"
	[ "$(owner_mode "$sp")" = "0 adaptive" ] && ok "now root's, mode adaptive" || fail "after: $(owner_mode "$sp")"
	for call in "GetLocks u $sp" "SetProcessMode us $sp on"; do
		# shellcheck disable=SC2086
		if "${as_nobody[@]}" "${B[@]}" call $NAME $OBJ $IFACE $call >/dev/null 2>"$tmp/err"; then
			fail "nobody may still call ${call%% *}"
		else
			grep -qi "access.\?denied\|permission denied" "$tmp/err" && ok "nobody refused: ${call%% *}" || fail "${call%% *}: $(cat "$tmp/err")"
		fi
	done
	n=$("${as_nobody[@]}" "${B[@]}" call $NAME $OBJ $IFACE ListProcesses | jq --argjson pid "$sp" '[.data[0][] | select(.[0] == $pid)] | length')
	[ "$n" = 0 ] && ok "nobody no longer lists it" || fail "nobody still lists $sp"
	poll 5 grep -q "^ProcessRemoved $sp$" "$tmp/nobody.out" && ok "nobody's subscriber got ProcessRemoved $sp" ||
		fail "nobody's subscriber: $(cat "$tmp/nobody.out")"
else
	note "the setuid copy did not run as root (nosuid mount?): owner change not checked"
fi
kill "$sp" 2>/dev/null

# ---- a flood of bad files from one user ----------------------------------------
"${as_nobody[@]}" sh -c 'i=200000; while [ $i -lt 200300 ]; do : > "$1/$i-1.seg"; i=$((i + 1)); done' sh "$rundir"
summary() { grep "suppressed [0-9]* messages about uid $nobody_uid$" "$log"; }
poll 20 summary && ok "summary: $(summary | head -n1 | sed 's/^elided: //')" ||
	fail "no 'suppressed N messages about uid $nobody_uid' line"
n=$(grep -c "ignoring 2[0-9]\{5\}-1\.seg" "$log")
[ "$n" -le 20 ] && ok "300 bad files, $n warnings" || fail "300 bad files gave $n warnings"
kill -0 "$daemon" && ok "elided still running" || fail "elided died"

echo "---- elided log (tail) ----"
tail -n 30 "$log"
tl_finish privacy
