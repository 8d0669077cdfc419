#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# elided's BPF observer of lock waits (issue 15, part 2), as root: a program
# that does NOT run libelide, with a contended pthread mutex, appears in
# ListObservedLocks and in `elidectl candidates` (source bpf, verdict
# "waits", its lock named MODULE+0xOFFSET from /proc/PID/maps), with sleep
# time no more than the program measured waiting itself; a program under
# libelide is not listed there (its segment reports it); a user sees only
# its own programs; after the program exits its entry goes.
# Skips (77, with the reason) when not root or when the observer does not
# load here under the default "auto" (no BTF, or neither BPF trampolines nor
# bpf_task_pt_regs(), before 5.15).
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need dbus-daemon busctl jq setpriv
[ "$(id -u)" -eq 0 ] || skip "the BPF observer needs root (CAP_BPF and CAP_PERFMON); running as uid $(id -u)"
[ -r /sys/kernel/btf/vmlinux ] || skip "the kernel has no BTF (/sys/kernel/btf/vmlinux): the observer cannot load"
tl_setup elided-observe
start_private_bus

measure="$top_builddir/tests/integration/watch-measure"
[ "$(head -c 2 "$measure")" = "#!" ] && measure="$(dirname "$measure")/.libs/$(basename "$measure")"
rundir="$tmp/run"
mkdir -m 1777 "$rundir"
# observe_lock_waits left at its default, "auto".
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.5; };
EOF

"$elided" --config "$tmp/elide.conf" --runtime-dir "$rundir" >"$tmp/elided.log" 2>&1 &
daemon=$!
poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { cat "$tmp/elided.log" >&2; echo "FAIL: elided did not come up on the bus" >&2; exit 1; }
if ! "${B[@]}" call $NAME $OBJ $IFACE ListObservedLocks >"$tmp/first" 2>&1; then
	cat "$tmp/elided.log" >&2
	skip "the BPF observer does not load here: $(cat "$tmp/first")"
fi
ok "ListObservedLocks answers"
how=$(sed -n 's/.*observing the lock waits of programs without libelide (BPF: \(.*\))$/\1/p' "$tmp/elided.log")
[ -n "$how" ] && ok "attached with $how" || fail "no start-up line names the attachment: $(cat "$tmp/elided.log")"
[ "$(prop LockWaitObserver)" = "on ($how)" ] && ok "LockWaitObserver: $(prop LockWaitObserver)" ||
	fail "LockWaitObserver: '$(prop LockWaitObserver)', expected 'on ($how)'"
"$elidectl" status | grep -q "Lock waits: on ($how)" && ok "elidectl status: Lock waits: on ($how)" ||
	fail "elidectl status lacks the observer: $("$elidectl" status 2>&1)"
[ "$("$elidectl" status --json | jq -r .lock_wait_observer)" = "on ($how)" ] && ok "status --json: lock_wait_observer" ||
	fail "status --json: $("$elidectl" status --json 2>&1)"

# Without libelide: 2 threads, 20 us sections, a fixed number of
# acquisitions each (however long a loaded machine takes for them).
"$measure" --threads 2 --hold-us 20 --gap-us 5 --count 20000 >"$tmp/plain.out" 2>&1 &
plain=$!
pids+=("$plain")
# Under libelide (watching): its segment reports it, the observer must not.
ELIDE_RUNTIME_DIR="$rundir" LD_PRELOAD="$preload" "$measure" --threads 2 --hold-us 20 --gap-us 5 --count 20000 \
	>"$tmp/watched.out" 2>&1 &
watched=$!
pids+=("$watched")
poll 300 grep -q '^done' "$tmp/plain.out" && poll 300 grep -q '^done' "$tmp/watched.out" ||
	fail "the workloads did not finish: $(cat "$tmp/plain.out" "$tmp/watched.out")"

row() { "${B[@]}" call $NAME $OBJ $IFACE ListObservedLocks | jq -c --argjson pid "$1" '[.data[0][] | select(.[0] == $pid)]'; }
# elided reads the observer's map each interval, and names the lock off its
# loop: the program has stopped working, so once named the row is final.
observed() { r=$(row "$plain") && jq -e 'length >= 1 and (.[0][5] | test("\\+0x"))' <<<"$r" >/dev/null; }
poll 120 observed
r=$(row "$plain")
[ "$(jq length <<<"$r")" -ge 1 ] && ok "the program without libelide is observed: $r" || fail "not observed: $r"
waits=$(jq '[.[][7]] | add // 0' <<<"$r"); slept=$(jq '[.[][8]] | add // 0' <<<"$r")
own=$(sed -n 's/.* wait_ns=\([0-9]*\).*/\1/p' "$tmp/plain.out")
[ "$waits" -gt 0 ] && ok "$waits lock waits slept" || fail "no waits: $r"
# Sleeping is part of what the program timed around its lock calls, and
# with 20 us sections most of it (95% measured here through sched_switch); a
# third catches sleeps that go unseen.
awk -v a="$slept" -v b="$own" 'BEGIN { exit !(b > 0 && a >= b * 0.3 && a <= b * 1.05) }' &&
	ok "slept $slept ns, $(awk -v a="$slept" -v b="$own" 'BEGIN { printf "%.0f%%", 100 * a / b }') of the program's own $own ns of waiting" ||
	fail "slept $slept ns, the program waited $own ns"
jq -e --arg exe "$(basename "$measure")" '.[0][5] | startswith($exe + "+0x")' <<<"$r" >/dev/null &&
	ok "named by module and offset: $(jq -r '.[0][5]' <<<"$r")" || fail "lock name: $(jq -r '.[0][5]' <<<"$r")"
[ "$(jq length <<<"$(row "$watched")")" = 0 ] && ok "a program under libelide is left to its segment" ||
	fail "the libelide program is observed too: $(row "$watched")"

candidate() { c=$("$elidectl" candidates --json | jq -c --argjson pid "$plain" '.[] | select(.pid == $pid)') && [ -n "$c" ]; }
poll 60 candidate
jq -e '.source == "bpf" and .verdict == "waits" and .contended > 0 and .wait_ns > 0 and (.action | test("--mode watch"))' \
	<<<"$c" >/dev/null && ok "elidectl candidates: $c" || fail "elidectl candidates: $c // $("$elidectl" candidates 2>&1)"
"$elidectl" candidates | grep -q "watch-measure" && ok "the candidates table lists it" ||
	fail "the candidates table: $("$elidectl" candidates 2>&1)"

# Another user sees only its own.
n=$(setpriv --reuid=65534 --regid=65534 --clear-groups "${B[@]}" call $NAME $OBJ $IFACE ListObservedLocks |
	jq --argjson pid "$plain" '[.data[0][] | select(.[0] == $pid)] | length')
[ "$n" = 0 ] && ok "uid 65534 does not see root's program" || fail "uid 65534 sees root's program ($n rows)"

kill -TERM "$plain" "$watched"
wait "$plain" "$watched" 2>/dev/null
gone() { [ "$(row "$1" | jq length)" = 0 ]; }
poll 60 gone "$plain" && ok "gone with the process" || fail "still listed after exit: $(row "$plain")"

tl_finish elided-observe
