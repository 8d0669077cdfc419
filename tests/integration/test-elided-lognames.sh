#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Issue 31 item 4: names that come from a process reach elided's log as
# text.  A program whose file name holds a newline, quotes, a backslash and
# an OSC terminal escape runs under libelide: the "tracking pid" line names
# it with every control byte as \xNN, no raw ESC or BEL is in the log, and
# no line of the log starts with what followed the newline.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
tl_setup elided-lognames
rundir="$tmp/run"
mkdir -m 1777 "$rundir"
printf 'daemon: { interval = 0.2; };\n' >"$tmp/elide.conf"
"$elided" --verbose --no-bus --no-bpf --config "$tmp/elide.conf" --runtime-dir "$rundir" >"$tmp/elided.log" 2>&1 &
daemon=$!
hostile="$tmp/"$'wl "odd\'\\\nelided: forged line\e]0;pwned\a'
cp "$workload" "$hostile" || skip "cannot make a file with a hostile name here"
ELIDE_RUNTIME_DIR="$rundir" ELIDE_SIM_ABORT=0x6 LD_PRELOAD="$preload" "$hostile" --seconds 60 >/dev/null 2>&1 &
wl=$!
pids+=("$wl")
poll 20 grep -q "tracking pid $wl " "$tmp/elided.log" && ok "tracked: $(grep -m1 "tracking pid $wl " "$tmp/elided.log")" ||
	fail "pid $wl not tracked: $(tail -3 "$tmp/elided.log")"
grep -qF 'odd'"'"'\\\x0aelided: forged line\x1b]0;pwned\x07' "$tmp/elided.log" && ok "the name is escaped (\\, \\x0a, \\x1b, \\x07)" ||
	fail "escaped name not in the log: $(grep -a "tracking pid $wl" "$tmp/elided.log")"
grep -q $'[\e\a]' "$tmp/elided.log" && fail "raw ESC or BEL in the log" || ok "no raw ESC or BEL in the log"
grep -q '^elided: forged line' "$tmp/elided.log" && fail "a forged line: $(grep -m1 '^elided: forged' "$tmp/elided.log")" ||
	ok "no forged line"
tl_finish "log names"
