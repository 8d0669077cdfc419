#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Issue 32 item 2: every error path of the symbolizer, by fault injection
# into a real elided (fault-inject.so in its LD_PRELOAD, ELIDE_FAULT naming
# the call to fail, twice, then never again): fork, pipe2, each
# sd_event_add_* after the fork; and pidfd_open failing every time (an old
# kernel, seccomp), which the symbolizer copes with without one.  A process under libelide with a lock in
# a file that names it (make-elf, map-lock); for each fault:
#   - the injected failure happened (the library says so on stderr);
#   - elided logs a clear error naming the call that failed, once per
#     failure, and that the locks stay named by address for now;
#   - elided survives: it still answers on the bus (it aborted with a
#     double free on pidfd_open or sd_event_add_* failing);
#   - once the fault is gone the lock gets its name: the addresses of a
#     failed run are asked again later (with back-off), not given up.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
mkelf="$top_builddir/tests/integration/make-elf"
maplock="$top_builddir/tests/integration/map-lock"
fault="$top_builddir/tests/integration/.libs/fault-inject.so"
need dbus-daemon busctl jq
[ -x "$mkelf" ] && [ -x "$maplock" ] || skip "helpers not built"
[ -e "$fault" ] || skip "fault-inject.so not built"
[ -e "$lib" ] || skip "libelide.so not built"
tl_setup elided-symfault
start_private_bus
"$mkelf" "$tmp/named.so" --syms 1 || fail "make-elf"
chmod 0644 "$tmp/named.so"

cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.2; };
default: { mode = "adaptive"; };
EOF

lock_names() { "${B[@]}" call $NAME $OBJ $IFACE GetLocks u "$1" | jq -r '.data[0][] | .[2]'; }
named() { lock_names "$1" | grep -q '^hostile_l'; }

# fault_round SPEC WHAT: elided with ELIDE_FAULT=SPEC:2; WHAT is how its
# log names the call.
fault_round() {
	local spec=$1 what=$2 rundir="$tmp/run-${1//[@:]/-}" log="$tmp/elided-${1//[@:]/-}.log" pid n
	mkdir -m 1777 "$rundir"
	LD_PRELOAD="${asan_first:+$asan_first }$fault" ELIDE_FAULT="$spec:2" \
		"$elided" -v --no-bpf --config "$tmp/elide.conf" --runtime-dir "$rundir" >"$log" 2>&1 &
	daemon=$!
	poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { fail "$spec: elided not on the bus: $(cat "$log")"; return; }
	ELIDE_RUNTIME_DIR="$rundir" ELIDE_SIM_ABORT=0x6 LD_PRELOAD="$preload" "$maplock" 300 "$tmp/named.so" \
		>"$tmp/maplock.out" 2>"$tmp/maplock.err" &
	pid=$!
	pids+=("$pid")
	poll 10 grep -qx ready "$tmp/maplock.out" || fail "$spec: map-lock not ready: $(cat "$tmp/maplock.err")"
	poll 20 grep -q "fault-inject: ${spec%@*} failed" "$log" && ok "$spec: the fault was injected" ||
		fail "$spec: no fault injected: $(cat "$log")"
	poll 10 grep -qF "not started: $what: " "$log" &&
		ok "$spec: logged: $(grep -F "not started: $what: " "$log" | head -n1 | sed 's/^[^:]*: //')" ||
		fail "$spec: no error naming $what: $(grep -i symboliz "$log")"
	# Named once the fault is gone (the third run: 1 s, then 2 s later).
	poll 30 named "$pid" && ok "$spec: the lock is named after the fault: $(lock_names "$pid" | grep hostile | cut -c1-40)" ||
		fail "$spec: the lock is not named: $(lock_names "$pid") // $(grep -i symboliz "$log")"
	n=$(grep -cF "not started: $what: " "$log")
	[ "$n" -eq 2 ] && ok "$spec: 2 failed starts logged, then none" || fail "$spec: $n failed starts logged, expected 2"
	grep -q "asked again in [0-9]* s" "$log" && ok "$spec: the log says when the names are asked again" ||
		fail "$spec: no retry in the log: $(grep -i symboliz "$log")"
	if kill -0 "$daemon" 2>/dev/null && "${B[@]}" get-property $NAME $OBJ $IFACE Version >/dev/null; then
		ok "$spec: elided survived and answers on the bus"
	else
		fail "$spec: elided died: $(tail -n 20 "$log")"
	fi
	grep -qiE "double free|free\(\)|invalid pointer|AddressSanitizer|Aborted" "$log" && fail "$spec: $(grep -iE "double free|free\(\)|invalid pointer|AddressSanitizer|Aborted" "$log")"
	kill "$pid" 2>/dev/null
	kill "$daemon" 2>/dev/null
	wait "$pid" "$daemon" 2>/dev/null
	daemon=
}

# pidfd_open failing (before Linux 5.3, a seccomp filter, no fd left) is
# no failure of the run: the child is reaped when its output ends.  Every
# time it fails here.
fault_round_pidfd() {
	local rundir="$tmp/run-pidfd" log="$tmp/elided-pidfd.log" pid
	mkdir -m 1777 "$rundir"
	LD_PRELOAD="${asan_first:+$asan_first }$fault" ELIDE_FAULT="pidfd_open:0" ELIDE_FAULT_ERRNO=38 \
		"$elided" -v --no-bpf --config "$tmp/elide.conf" --runtime-dir "$rundir" >"$log" 2>&1 &
	daemon=$!
	poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { fail "pidfd_open: elided not on the bus: $(cat "$log")"; return; }
	ELIDE_RUNTIME_DIR="$rundir" ELIDE_SIM_ABORT=0x6 LD_PRELOAD="$preload" "$maplock" 300 "$tmp/named.so" \
		>"$tmp/maplock.out" 2>"$tmp/maplock.err" &
	pid=$!
	pids+=("$pid")
	poll 10 grep -qx ready "$tmp/maplock.out" || fail "pidfd_open: map-lock not ready: $(cat "$tmp/maplock.err")"
	poll 20 grep -qF "pidfd_open: Function not implemented; its child is reaped when its output ends" "$log" &&
		ok "pidfd_open (ENOSYS, always): logged: $(grep -F "pidfd_open: Function" "$log" | head -n1 | sed 's/^[^:]*: //')" ||
		fail "pidfd_open: not logged: $(grep -i symboliz "$log")"
	poll 30 named "$pid" && ok "pidfd_open: the lock is named without a pidfd: $(lock_names "$pid" | grep hostile)" ||
		fail "pidfd_open: the lock is not named: $(lock_names "$pid") // $(grep -i symboliz "$log")"
	grep -q "not started" "$log" && fail "pidfd_open: a run was not started: $(grep "not started" "$log")"
	kill -0 "$daemon" 2>/dev/null && "${B[@]}" get-property $NAME $OBJ $IFACE Version >/dev/null &&
		ok "pidfd_open: elided survived and answers on the bus" || fail "pidfd_open: elided died: $(tail -n 20 "$log")"
	kill "$pid" "$daemon" 2>/dev/null
	wait "$pid" "$daemon" 2>/dev/null
	daemon=
}

fault_round fork "fork"
fault_round pipe2 "pipe2"
fault_round_pidfd
fault_round sd_event_add_io@1 "sd_event_add_io (child exit)"
fault_round sd_event_add_io@2 "sd_event_add_io (child output)"
fault_round sd_event_add_time_relative "sd_event_add_time_relative"

tl_finish symfault
