#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# elided as a systemd Type=notify service, without systemd: a stand-in
# notification socket checks READY=1 after start-up, RELOADING=1 then READY=1
# on SIGHUP, STATUS= lines, WATCHDOG=1 when WATCHDOG_USEC is set, STOPPING=1
# and exit status 0 on SIGTERM; journald priority prefixes when JOURNAL_STREAM
# is set; command-line errors and a broken configuration at start-up.
set -u

: "${top_builddir:?run me through make check}"
elided="$top_builddir/elided/elided"
listen="$top_builddir/tests/integration/notify-listen"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/elided-svc.XXXXXX") || exit 1
export ELIDE_STATE_DIR="$tmp/state"
trap 'kill $daemon $listener 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
daemon= listener=
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
poll() {
	local deadline=$((SECONDS + $1)); shift
	while [ $SECONDS -lt $deadline ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	"$@" >/dev/null 2>&1
}

# ---- command line ---------------------------------------------------------
"$elided" --help | grep -q -- "--runtime-dir" && ok "--help" || fail "--help"
"$elided" --version | grep -q "^elided [0-9]" && ok "--version" || fail "--version"
"$elided" --no-such-option >/dev/null 2>&1; [ $? -eq 2 ] && ok "unknown option: exit 2" || fail "unknown option exit status"
printf 'daemon: { interval = "fast"; };\n' > "$tmp/bad.conf"
out=$("$elided" --no-bus --config "$tmp/bad.conf" --runtime-dir "$tmp/run" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "bad.conf:1" && ok "broken config at start: exit 1 with file:line ($out)" ||
	fail "broken config at start: rc=$rc: $out"
"$elided" --check-config --config "$tmp/bad.conf" >/dev/null 2>&1 && fail "--check-config accepted a broken file" || ok "--check-config refuses a broken file"

# ---- the notification protocol ----------------------------------------------
printf 'daemon: { interval = 0.2; };\n' > "$tmp/elide.conf"
"$listen" "$tmp/notify" 30 > "$tmp/notify.log" &
listener=$!
poll 10 grep -q LISTENING "$tmp/notify.log" || { echo "FAIL: listener did not start" >&2; exit 1; }
NOTIFY_SOCKET="$tmp/notify" WATCHDOG_USEC=400000 JOURNAL_STREAM=8:12345 \
	"$elided" --no-bus --config "$tmp/elide.conf" --runtime-dir "$tmp/run" 2>"$tmp/elided.err" &
daemon=$!
poll 10 grep -q "^READY=1" "$tmp/notify.log" && ok "READY=1" || fail "no READY=1"
poll 10 grep -q "^STATUS=.*processes with libelide" "$tmp/notify.log" && ok "STATUS= summary" || fail "no STATUS= line"
poll 10 grep -q "^WATCHDOG=1" "$tmp/notify.log" && ok "WATCHDOG=1 with WATCHDOG_USEC set" || fail "no watchdog pings"
kill -HUP "$daemon"
poll 10 bash -c "grep -A3 '^RELOADING=1' '$tmp/notify.log' | grep -q '^READY=1'" && ok "SIGHUP: RELOADING=1 then READY=1" ||
	fail "reload notifications: $(tr '\n' ' ' < "$tmp/notify.log")"
kill -TERM "$daemon"
wait "$daemon"; rc=$?
daemon=
[ $rc -eq 0 ] && ok "SIGTERM: exit 0" || fail "SIGTERM: exit status $rc"
poll 10 grep -q "^STOPPING=1" "$tmp/notify.log" && ok "STOPPING=1" || fail "no STOPPING=1"
grep -q "^<[0-7]>[^<]" "$tmp/elided.err" && ok "journald priority prefixes on stderr" ||
	fail "no <N> prefixes: $(head -2 "$tmp/elided.err")"
# journald adds the identifier itself: a prefix would show it twice.
grep -q "^<[0-7]>elided: " "$tmp/elided.err" && fail "\"elided:\" prefix under journald: $(grep -m1 "^<[0-7]>elided: " "$tmp/elided.err")" ||
	ok "no \"elided:\" prefix under journald"
grep -q "^<6>configuration reloaded" "$tmp/elided.err" && ok "reload logged at info priority" || fail "reload not logged"

[ $failures -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all service checks passed"
