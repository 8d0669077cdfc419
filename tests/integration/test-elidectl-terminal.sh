#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# elidectl on a real terminal, without screenshots: tmux runs it in a
# detached 80x24 window and capture-pane reads the screen back.
#   - top with 30 processes fits 80x24: the title is still on the first
#     row (nothing scrolled), the column header follows, no line wrapped,
#     the rows that do not fit are counted on a last line;
#   - top redraws at once when the window shrinks to 60x15 (SIGWINCH),
#     and fits that too; q quits;
#   - top PID (one process's locks; make-segment names its command "app")
#     fits 80x24, its trend grows a point a frame, w sorts by wait, the
#     process's exit is said (exit status 3), q quits;
#   - list on a terminal goes through the pager ($SYSTEMD_PAGER, with
#     LESS=FRXMK), not with --no-pager, not with PAGER=cat;
#   - states are coloured on a terminal, not with NO_COLOR=1;
#   - hw gives advice, and says nothing about TSX_CTRL needing root or the
#     msr module on a CPU that is not Intel's.
# Without tmux (Debian: tmux, in tools/install-deps) it skips, loudly.
set -u

: "${top_builddir:?run me through make check}"
elidectl=$(cd "$top_builddir/elidectl" && pwd)/elidectl
mkseg="$top_builddir/tests/integration/make-segment"

if ! command -v tmux >/dev/null; then
	echo "SKIP: tmux is not installed (apt-get install tmux): top's 80x24 fit, the pager and colours on a terminal are NOT tested" >&2
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/elidectl-term.XXXXXX") || exit 1
sock="$tmp/tmux.0.sock"
nsock=0
pids=()
cleanup() {
	tmux -S "$sock" kill-server 2>/dev/null
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir "$tmp/run"
for i in $(seq 30); do
	sleep 300 &
	pids+=($!)
	"$mkseg" "$tmp/run" $! >/dev/null || { echo "FAIL: make-segment" >&2; exit 1; }
done

failures=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

tm() { tmux -S "$sock" -f /dev/null "$@"; }
# run WIDTH HEIGHT COMMAND: a fresh window running COMMAND (in sh).
run() {
	# A server of its own each time: a new session on a server being
	# killed fails ("server exited unexpectedly").
	tm kill-server 2>/dev/null
	nsock=$((nsock + 1))
	sock="$tmp/tmux.$nsock.sock"
	tm new-session -d -s t -x "$1" -y "$2" \
		"env LC_ALL=C.UTF-8 TERM=xterm-256color $3; echo __DONE__; sleep 30" || return 1
	tm set-option -g window-size manual 2>/dev/null
	tm set-option -g remain-on-exit on 2>/dev/null
}
# screen [-e]: the visible screen, wrapped lines joined (-J), so a line
# longer than the window is one long line here.
screen() { tm capture-pane -p -J "$@" -t t; }
# wait_for PATTERN: up to 10 s for the screen to show it.
wait_for() {
	local i
	for i in $(seq 100); do
		screen | grep -q -- "$1" && return 0
		sleep 0.1
	done
	return 1
}
# fits WIDTH HEIGHT WHAT: no screen line wider than WIDTH, at most HEIGHT-1 lines.
fits() {
	local w=$1 h=$2 what=$3 widest lines
	screen >"$tmp/screen"
	widest=$(LC_ALL=C.UTF-8 wc -L <"$tmp/screen")
	lines=$(sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' "$tmp/screen" | wc -l)
	if [ "$widest" -le "$w" ] && [ "$lines" -lt "$h" ]; then
		ok "$what fits ${w}x$h ($widest columns, $lines lines)"
	else
		fail "$what does not fit ${w}x$h: $widest columns, $lines lines:"
		cat "$tmp/screen" >&2
	fi
}

# ---- top at 80x24, then 60x15 ---------------------------------------------------
run 80 24 "$elidectl --runtime-dir $tmp/run top" || { fail "tmux new-session"; exit 1; }
if wait_for "more"; then
	fits 80 24 "top"
	head -n 1 "$tmp/screen" | grep -q "^elidectl top: segments" && ok "top: the title on the first row" ||
		fail "top: first row is '$(head -n 1 "$tmp/screen")'"
	sed -n 3p "$tmp/screen" | grep -qE "^ *PID +USER +EXE/UNIT +MODE +ACQUIRED/s +COMMITS/s +ABORT% +CYCLES-LOST/s +WAIT/s$" &&
		ok "top: the whole header on row 3" || fail "top: row 3 is '$(sed -n 3p "$tmp/screen")'"
	grep -qE "^\.\.\. and [0-9]+ more" "$tmp/screen" && ok "top: the rows left out are counted" ||
		fail "top: no '... and N more' line"
	tm resize-window -t t -x 60 -y 15
	sleep 0.3
	sleep 0.5
	if wait_for "^elidectl top"; then
		fits 60 15 "top after a resize"
		head -n 1 "$tmp/screen" | grep -q "^elidectl top: " && sed -n 3p "$tmp/screen" | grep -qE "^ *PID " &&
			ok "top: redrawn at 60x15, title and header in place" || fail "top at 60x15: $(cat "$tmp/screen")"
	else
		fail "top after a resize: $(screen)"
	fi
	tm send-keys -t t q
	wait_for "__DONE__" && ok "top: q quits" || fail "top did not quit on q"
else
	fail "top did not draw: $(screen)"
fi

# ---- top PID at 80x24: one process's locks ----------------------------------------------
# The segment stands still: every rate is 0, so from the third frame on
# (the first has no rate) the trend is a flat line at the lowest block.
sleep 300 &
lpid=$!
pids+=($lpid)
"$mkseg" "$tmp/run" $lpid >/dev/null || { echo "FAIL: make-segment" >&2; exit 1; }
run 80 24 "$elidectl --runtime-dir $tmp/run top $lpid; echo rc=\$?" || { fail "tmux new-session"; exit 1; }
if wait_for "▁▁"; then
	fits 80 24 "top PID"
	head -n 1 "$tmp/screen" | grep -q "^elidectl top: pid $lpid (app), every 1.0s, sorted by acquired/s$" &&
		ok "top PID: the title names the process and the key" || fail "top PID: first row '$(head -n 1 "$tmp/screen")'"
	sed -n 3p "$tmp/screen" | grep -qE "^LOCK +KIND +ACQUIRED/s +COMMITS/s +ABORT% +TREND$" &&
		ok "top PID: the header on row 3" || fail "top PID: row 3 is '$(sed -n 3p "$tmp/screen")'"
	grep -qE "^cache_lock +mutex +0\.0 +0\.0 +- +▁+$" "$tmp/screen" && ok "top PID: rates and a trend of cache_lock" ||
		fail "top PID: $(grep cache_lock "$tmp/screen")"
	tm send-keys -t t w
	wait_for "sorted by wait/s" && ok "top PID: w sorts by wait/s" || fail "top PID: w: $(screen | head -n 1)"
	kill $lpid
	wait_for "rc=" && screen | grep -q "pid $lpid has exited" && screen | grep -q "^rc=3$" &&
		ok "top PID: the process exited, said, exit status 3" || fail "top PID after the exit: $(screen)"
else
	fail "top PID did not draw a trend: $(screen)"
fi
run 80 24 "$elidectl --runtime-dir $tmp/run top ${pids[0]}"
if wait_for "^LOCK"; then
	tm send-keys -t t q
	wait_for "__DONE__" && ok "top PID: q quits" || fail "top PID did not quit on q"
else
	fail "top PID did not draw: $(screen)"
fi

# ---- the pager ----------------------------------------------------------------------
pager="sh -c 'env > $tmp/pager-env; cat > $tmp/paged'"
run 80 24 "SYSTEMD_PAGER=\"$pager\" $elidectl --runtime-dir $tmp/run list"
wait_for "__DONE__"
[ -s "$tmp/paged" ] && grep -q "processes listed" "$tmp/paged" && ok "list on a terminal goes through \$SYSTEMD_PAGER" ||
	fail "no pager: $(screen)"
grep -qx "LESS=FRXMK" "$tmp/pager-env" && ok "the pager gets LESS=FRXMK" || fail "pager's LESS: $(grep LESS "$tmp/pager-env")"
rm -f "$tmp/paged"
run 80 24 "SYSTEMD_PAGER=\"$pager\" $elidectl --runtime-dir $tmp/run list --no-pager"
wait_for "__DONE__"
[ ! -e "$tmp/paged" ] && screen | grep -q "processes listed" && ok "--no-pager: straight to the terminal" ||
	fail "--no-pager still paged"
run 80 24 "PAGER=\"$pager\" $elidectl --runtime-dir $tmp/run list"
wait_for "__DONE__"
[ -s "$tmp/paged" ] && ok "\$PAGER is honoured" || fail "\$PAGER not used"
rm -f "$tmp/paged"
run 80 24 "PAGER=cat $elidectl --runtime-dir $tmp/run list"
wait_for "__DONE__"
[ ! -e "$tmp/paged" ] && screen | grep -q "processes listed" && ok "PAGER=cat: no pager" || fail "PAGER=cat"

# ---- colours --------------------------------------------------------------------------
run 80 24 "$elidectl --runtime-dir $tmp/run list --no-pager"
wait_for "__DONE__"
screen -e | grep -q $'\033\\[[0-9;]*32m''eliding' && ok "eliding in green on a terminal" ||
	fail "no colour on a terminal: $(screen -e | cat -v | head -3)"
run 80 24 "NO_COLOR=1 $elidectl --runtime-dir $tmp/run list --no-pager"
wait_for "__DONE__"
screen -e | grep -q $'\033\\[[0-9;]*32m' && fail "colours despite NO_COLOR=1" || ok "NO_COLOR=1: no colours"

# ---- hw -------------------------------------------------------------------------------------
"$elidectl" hw >"$tmp/hw" 2>&1
grep -q "^Advice:" "$tmp/hw" && ok "hw gives advice" || fail "hw: no advice: $(cat "$tmp/hw")"
if ! grep -q "^CPU: *GenuineIntel" "$tmp/hw"; then
	grep -q "^TSX_CTRL: *not applicable" "$tmp/hw" && ! grep -qi "msr module" "$tmp/hw" &&
		ok "hw on a CPU that is not Intel's: TSX_CTRL not applicable" || fail "hw: $(grep TSX_CTRL "$tmp/hw")"
fi
if grep -q "RTM not usable" "$tmp/hw"; then
	grep -q "nothing can be elided" "$tmp/hw" && ok "hw without RTM: nothing can be elided" || fail "hw without RTM: $(cat "$tmp/hw")"
fi
[ "$(LC_ALL=C.UTF-8 wc -L <"$tmp/hw")" -le 80 ] && ok "hw fits 80 columns" || fail "hw is wider than 80 columns"

[ $failures -eq 0 ] || exit 1
echo "all terminal checks passed"
