#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# elided reads only the lock entries a process marked written (issue 13,
# scale): the segment's header.dirty[] bitmap, set by libelide (here by
# seg-forge --animate, which writes counters as libelide does) and taken by
# elided before it reads the marked entries.  On a private runtime
# directory and a private D-Bus, with a live `sleep` per forged segment:
#   - the locks that move show their rates, the ones that do not show 0,
#     and once nothing moves every rate drops to 0 (the views that moved
#     last interval are zeroed, the others never touched);
#   - elided takes the marks (the bitmap is empty again after a pass);
#   - a lock destroyed (entry freed and marked) leaves GetLocks, and the
#     counters it reports agree with the file;
#   - a process with nothing marked is only looked at, yet a new status in
#     its header is seen;
#   - a real program under libelide marks its segment (features) and its
#     locks' counters keep moving in GetLocks.
# Waits are bounded polls.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need dbus-daemon busctl jq od
forge="$top_builddir/tests/integration/seg-forge"
[ -x "$forge" ] || skip "$forge is not built"
tl_setup elided-marks
start_private_bus

rundir="$tmp/run"
mkdir -m 1777 "$rundir"
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.2; };
default: { mode = "adaptive"; };
EOF
"$elided" --verbose --no-bpf --config "$tmp/elide.conf" --runtime-dir "$rundir" >>"$tmp/elided.log" 2>&1 &
daemon=$!
poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { cat "$tmp/elided.log" >&2; echo "FAIL: elided did not come up" >&2; exit 1; }

listed() { "${B[@]}" call $NAME $OBJ $IFACE ListProcesses | jq -e --argjson pid "$1" '.data[0][] | select(.[0] == $pid)'; }
locks() { "${B[@]}" call $NAME $OBJ $IFACE GetLocks u "$1"; }
# Entries whose acquisition rate (field 12) is above 0, as "2 3 4".
moving() { locks "$1" | jq -r '[.data[0][] | select(.[12] > 0) | .[0]] | sort | map(tostring) | join(" ")'; }
moving_is() { [ "$(moving "$1")" = "$2" ]; }
# The 512 bytes of header.dirty[] as hex, "" when all zero.
marks() { od -An -tx8 -v -j 2048 -N 512 "$rundir/$1" | tr -s ' \n' ' ' | sed 's/ 0000000000000000//g; s/^ *//; s/ *$//'; }
marks_empty() { [ -z "$(marks "$1")" ]; }

sleep 300 &
p=$!
pids+=("$p")
seg=$("$forge" --dir "$rundir" --pid "$p" --locks 50) || { fail "seg-forge failed"; tl_finish elided-marks; }
poll 10 listed "$p" && ok "forged segment adopted (pid $p, 50 locks)" || fail "pid $p not adopted"
moving_is "$p" "" && ok "nothing moves: no rates" || fail "rates before any write: $(moving "$p")"

# --active 10: entries 2..11 (the first 10 of every 100) move, 12..51 do not.
"$forge" --dir "$rundir" --animate 4 --active 10 2>/dev/null &
animator=$!
want="2 3 4 5 6 7 8 9 10 11"
poll 5 moving_is "$p" "$want" && ok "the 10 moving locks have rates, the 40 others none" ||
	fail "moving: '$(moving "$p")', expected '$want'"
wait "$animator"
poll 3 moving_is "$p" "" && ok "nothing moves any more: every rate back to 0" || fail "still moving: $(moving "$p")"
poll 3 marks_empty "$seg" && ok "elided took the marks (header.dirty[] is empty)" || fail "marks left: $(marks "$seg")"

# Counters as GetLocks reports them (read from the file) agree with the file.
total=$(locks "$p" | jq '[.data[0][] | .[5]] | add')
file_total=$("$elidectl" show "$p" --runtime-dir "$rundir" --json | jq '[.locks[] | .acquired] | add')
[ "$total" = "$file_total" ] && [ "$total" -gt 0 ] && ok "acquisitions agree with the file ($total)" ||
	fail "GetLocks says $total acquisitions, the file $file_total"

# A lock destroyed: its entry freed (kind 0) and marked, as libelide's
# registry_detach() does.  Entry 20: offset 8192 + 20 * 256, byte 2048 +
# 20 / 8 of the bitmap holds its bit (bit 4 of byte 2050).
n_before=$(locks "$p" | jq '.data[0] | length')
printf '\0\0\0\0' | dd of="$rundir/$seg" bs=1 seek=$((8192 + 20 * 256)) conv=notrunc status=none
printf '\x10' | dd of="$rundir/$seg" bs=1 seek=2050 conv=notrunc status=none
gone() { [ "$(locks "$p" | jq '.data[0] | length')" -eq $((n_before - 1)) ] && ! locks "$p" | jq -e '.data[0][] | select(.[0] == 20)'; }
poll 3 gone && ok "a destroyed lock leaves GetLocks ($n_before -> $((n_before - 1)) entries)" ||
	fail "entry 20 still listed: $(locks "$p" | jq -c '[.data[0][] | .[0]]')"

# A quiet process (nothing marked) is not read, only looked at: a new status
# published in its header (publish_ns moves, as libelide's does) must still
# reach ListProcesses within a few intervals.
state() { "${B[@]}" call $NAME $OBJ $IFACE ListProcesses | jq -r --argjson pid "$p" '.data[0][] | select(.[0] == $pid) | .[6]'; }
"$forge" --dir "$rundir" --pid "$p" --status "quiet test status" || fail "seg-forge --status failed"
state_is() { [ "$(state)" = "off: quiet test status" ]; }
poll 3 state_is && ok "a quiet process's new status is seen ($(state))" || fail "state still '$(state)'"
marks_empty "$seg" && ok "no marks were needed for it" || fail "marks: $(marks "$seg")"

# ---- a real program under libelide ------------------------------------------
ELIDE_RUNTIME_DIR="$rundir" ELIDE_SIM_ABORT=0x6 LD_PRELOAD="$preload" "$workload" --seconds 60 >/dev/null &
w=$!
pids+=("$w")
poll 15 listed "$w" && ok "workload adopted (pid $w)" || fail "workload $w not adopted"
wseg=$(cd "$rundir" && ls "$w"-*.seg 2>/dev/null | head -n1)
features=$(od -An -tu4 -j $((8 + 4 * 2 + 8 + 4 * 6 + 4 * 2 + 8 * 2 + 256 + 16 + 16 + 4 * 4 + 160 + 8 * 2)) -N 4 "$rundir/$wseg" | tr -d ' ')
[ "$features" = 7 ] && ok "libelide's segment keeps marks, contention figures and the wait total (features $features)" || fail "features '$features' in $wseg"
acquired() { locks "$w" | jq '[.data[0][] | .[5]] | add'; }
a1=$(acquired)
grows() { [ "$(acquired)" -gt "$a1" ]; }
rates() { locks "$w" | jq -e '[.data[0][] | select(.[12] > 0)] | length > 0'; }
poll 5 grows && ok "its counters move ($a1 -> $(acquired))" || fail "acquisitions stuck at $a1"
poll 5 rates && ok "its moving locks have rates" || fail "no rates: $(locks "$w" | jq -c '[.data[0][] | [.[0], .[12]]]')"

echo "---- elided log ----"
cat "$tmp/elided.log"
tl_finish elided-marks
