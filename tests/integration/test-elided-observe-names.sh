#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Issue 32 item 5: the locks of a program WITHOUT libelide that elided's BPF
# observer sees are named by their symbols, by the same sandboxed
# symbolizer child as a libelide process's, running as the program's user:
#   - watch-measure (its mutex is the static `hot_lock`), run as nobody:
#     ListObservedLocks names it hot_lock (where: MODULE+0xOFFSET still),
#     and `elidectl candidates` shows hot_lock, not watch-measure+0x...;
#   - the child that named it ran as nobody (elided's -v log line for the
#     run is for nobody's uid);
#   - `elidectl show PID` of that program shows what elided observed (its
#     lock by name, its waits), in the table and in --json, instead of
#     "no libelide process";
#   - `elidectl show PID` of a process neither with libelide nor observed
#     still says so (exit 3).
# Skips (77, with the reason) when not root or when the observer does not
# load here (no BTF, no BPF trampolines nor tp_btf sched_switch).
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need dbus-daemon busctl jq setpriv
[ "$(id -u)" -eq 0 ] || skip "the BPF observer needs root (CAP_BPF and CAP_PERFMON); running as uid $(id -u)"
[ -r /sys/kernel/btf/vmlinux ] || skip "the kernel has no BTF (/sys/kernel/btf/vmlinux): the observer cannot load"
id nobody >/dev/null 2>&1 || skip "no user nobody"
tl_setup elided-observe-names
start_private_bus
for_others measure "$top_builddir/tests/integration/watch-measure"
nobody_uid=$(id -u nobody)
rundir="$tmp/run"
mkdir -m 1777 "$rundir"
log="$tmp/elided.log"
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.5; };
EOF

"$elided" -v --config "$tmp/elide.conf" --runtime-dir "$rundir" >"$log" 2>&1 &
daemon=$!
poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { cat "$log" >&2; echo "FAIL: elided did not come up on the bus" >&2; exit 1; }
if ! "${B[@]}" call $NAME $OBJ $IFACE ListObservedLocks >"$tmp/first" 2>&1; then
	grep -v "^elided: pid" "$log" >&2
	skip "the BPF observer does not load here: $(cat "$tmp/first")"
fi
ok "the observer runs: $(prop LockWaitObserver)"

# Long enough to be listed a few times; its lock contended throughout.
setpriv --reuid="$nobody_uid" --regid="$(id -g nobody)" --clear-groups \
	"$measure" --threads 2 --hold-us 20 --gap-us 5 --ms 60000 >"$tmp/plain.out" 2>&1 &
plain=$!
pids+=("$plain")

row() { "${B[@]}" call $NAME $OBJ $IFACE ListObservedLocks | jq -c --argjson pid "$plain" '[.data[0][] | select(.[0] == $pid)]'; }
observed() { [ "$(row | jq length)" -ge 1 ]; }
named() { row | jq -e '.[0][10] == "hot_lock"' >/dev/null; }
poll 30 observed && ok "watch-measure (nobody, without libelide) is observed" || fail "not observed: $(row)"
poll 30 named && ok "its lock is named by its symbol: $(row | jq -c '.[0] | [.[5], .[10]]')" ||
	fail "not named: $(row) // $(grep -i symboliz "$log")"
row | jq -e --arg exe "$(basename "$measure")" '.[0][5] | startswith($exe + "+0x")' >/dev/null &&
	ok "where it lies is still given: $(row | jq -r '.[0][5]')" || fail "where: $(row)"
# One child per uid and batch: its line names the batch's first process,
# which may be another of nobody's (other tests run beside this one).
grep -qE "symbolizer for pid [0-9]+ \(uid $nobody_uid\): " "$log" &&
	ok "named by a child running as nobody: $(grep -E "symbolizer for pid [0-9]+ \(uid $nobody_uid\): " "$log" | head -n1 | sed 's/^elided: //')" ||
	fail "no symbolizer run as nobody for $plain: $(grep -i symboliz "$log")"

c=$("$elidectl" candidates --json | jq -c --argjson pid "$plain" '.[] | select(.pid == $pid)')
jq -e '.source == "bpf" and .lock == "hot_lock"' <<<"$c" >/dev/null && ok "elidectl candidates: $(jq -c '{source, lock, contended}' <<<"$c")" ||
	fail "elidectl candidates: $c"
"$elidectl" candidates | grep "watch-measure" | grep -q hot_lock && ok "the candidates table names hot_lock" ||
	fail "the candidates table: $("$elidectl" candidates 2>&1)"

out=$("$elidectl" show "$plain" 2>&1)
rc=$?
[ $rc -eq 0 ] && grep -q hot_lock <<<"$out" && grep -q "BPF observer" <<<"$out" &&
	ok "elidectl show $plain shows the observed process: $(grep hot_lock <<<"$out" | tr -s ' ')" ||
	fail "elidectl show $plain (exit $rc): $out"
j=$("$elidectl" show --json "$plain" 2>&1)
jq -e --argjson pid "$plain" '.pid == $pid and .source == "bpf" and .locks[0].name == "hot_lock" and .locks[0].waits > 0 and .locks[0].wait_ns > 0' \
	<<<"$j" >/dev/null && ok "elidectl show --json: $(jq -c '.locks[0] | {name, where, waits}' <<<"$j")" ||
	fail "elidectl show --json: $j"

# Neither libelide nor observed: still "no libelide process".
sleep 300 &
idle=$!
pids+=("$idle")
out=$("$elidectl" show "$idle" 2>&1)
rc=$?
[ $rc -eq 3 ] && grep -q "no libelide process" <<<"$out" && ok "a process neither run with libelide nor observed: $out" ||
	fail "elidectl show $idle (exit $rc): $out"

tl_finish elided-observe-names
