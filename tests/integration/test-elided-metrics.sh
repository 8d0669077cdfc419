#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# elided's Prometheus output (daemon.metrics_dir): the real daemon on a
# private runtime directory, workloads under libelide (simulated aborts,
# so counters move without RTM).  Asserts: the directory missing is warned
# once and the file appears once it exists; the file passes
# `promtool check metrics`; counters are per program and monotonic, also
# after a process of the program is killed; label values from hostile
# program names are escaped; no temporary file is left behind; bad
# metrics_* settings are refused with file:line.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need jq
tl_setup elided-metrics
promtool=${PROMTOOL:-$(command -v promtool || true)}
[ -n "$promtool" ] || skip "promtool is not installed (Debian's prometheus package; tools/install-deps extracts it)"

rundir="$tmp/run"
mkdir -m 1777 "$rundir"
metrics="$tmp/metrics"
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.2; metrics_dir = "$metrics"; metrics_interval = 1; metrics_locks = 5; };
EOF

# ---- configuration errors -----------------------------------------------------
bad() {
	printf '%s\n' "$1" > "$tmp/bad.conf"
	"$elided" --check-config --config "$tmp/bad.conf" > "$tmp/out" 2>&1 && { fail "accepted: $1"; return; }
	grep -q "bad.conf:1" "$tmp/out" && ok "refused with file:line: $(head -c 100 "$tmp/out")" || fail "no file:line for '$1': $(cat "$tmp/out")"
}
bad 'daemon: { metrics_dir = "relative/dir"; };'
bad 'daemon: { metrics_group = "no-such-group-of-elide"; };'
bad 'daemon: { metrics_interval = 0.1; };'
bad 'daemon: { metrics_programs = 0; };'
bad 'daemon: { metrics_locks = 1001; };'

# ---- the directory appears later ------------------------------------------------
"$elided" --no-bus --no-bpf --config "$tmp/elide.conf" --runtime-dir "$rundir" >>"$tmp/elided.log" 2>&1 &
daemon=$!
poll 60 grep -q "metrics: cannot open $metrics" "$tmp/elided.log" && ok "missing directory warned" ||
	fail "no warning about the missing metrics directory: $(cat "$tmp/elided.log")"

# A program whose path has a quote, a backslash and a newline in it.
weird="$tmp/wl \"odd\\name
line2"
cp "$workload" "$tmp/wl-metrics"
cp "$workload" "$weird"
start() {
	ELIDE_RUNTIME_DIR="$rundir" ELIDE_SIM_ABORT=0x6 LD_PRELOAD="$preload" "$1" --seconds 600 >/dev/null &
	pids+=("$!")
}
start "$tmp/wl-metrics"
victim=${pids[-1]}
start "$weird"
mkdir "$metrics"

prom="$metrics/elide.prom"
value() {
	# The sample of metric $1 for program $2 (exact label match).
	awk -v m="$1" -v p="program=\"$2\"" 'index($0, m "{" p "}") == 1 { print $2 }' "$prom" 2>/dev/null
}
positive() { v=$(value "$1" "$2"); [ -n "$v" ] && [ "$v" -gt 0 ]; }
poll 120 positive elide_program_acquisitions_total "$tmp/wl-metrics" &&
	ok "per-program counters written: $(value elide_program_acquisitions_total "$tmp/wl-metrics") acquisitions" ||
	fail "no counters for wl-metrics in $prom: $(grep -c . "$prom" 2>/dev/null) lines"
poll 60 grep -q "metrics: $metrics/elide.prom written again" "$tmp/elided.log" && ok "recovery logged" ||
	fail "no 'written again' line: $(grep metrics "$tmp/elided.log")"

out=$("$promtool" check metrics < "$prom" 2>&1) && ok "promtool check metrics passes" || fail "promtool: $out"
# Every user's program paths are in it: not world-readable (issue 31).
[ "$(stat -c %a "$prom")" = 640 ] && ok "file mode 0640" || fail "mode $(stat -c %a "$prom")"
[ "$(stat -c %g "$prom")" = "$(id -g)" ] && ok "group: elided's own" || fail "group $(stat -c %g "$prom")"
if [ "$(id -u)" -eq 0 ] && getent group nogroup >/dev/null; then
	sed -i "s|metrics_locks = 5;|metrics_locks = 5; metrics_group = \"nogroup\";|" "$tmp/elide.conf"
	kill -HUP "$daemon"
	ngid=$(getent group nogroup | cut -d: -f3)
	poll 60 bash -c '[ "$(stat -c %g "$1")" = "$2" ]' sh "$prom" "$ngid" && [ "$(stat -c %a "$prom")" = 640 ] &&
		ok "daemon.metrics_group = \"nogroup\": 0640 root:nogroup" || fail "metrics_group: $(stat -c '%a %U:%G' "$prom")"
else
	note "not root (or no group nogroup): daemon.metrics_group not tried"
fi

escaped='wl \"odd\\name\nline2'
# Each of these is in a later file than the first counters (a process is
# adopted, then its locks named off elided's loop, at its own pace on a
# loaded machine): polled for, file after file.
poll 120 grep -qF "program=\"$tmp/$escaped\"" "$prom" && ok "hostile program name escaped" ||
	fail "escaped name not found: $(grep -F 'odd' "$prom" | head -2)"
poll 120 grep -q 'lock="cache_lock"' "$prom" && ok "per-lock gauges carry the lock's name" ||
	fail "no cache_lock series: $(grep elide_lock_ "$prom" | head -3)"
poll 120 grep -q 'elide_program_aborts_total{.*cause="conflict"} [1-9]' "$prom" && ok "aborts by cause" ||
	fail "no conflict aborts: $(grep aborts_total "$prom" | head -3)"
poll 120 grep -q '^elide_program_lock_wait_seconds_total{.*} [0-9]' "$prom" && ok "lock wait seconds per program" ||
	fail "no elide_program_lock_wait_seconds_total: $(grep wait_seconds "$prom" | head -3)"

# ---- monotonic, also across a process's exit -----------------------------------
a=$(value elide_program_acquisitions_total "$tmp/wl-metrics")
grows() { b=$(value elide_program_acquisitions_total "$tmp/wl-metrics"); [ -n "$b" ] && [ "$b" -gt "$a" ]; }
poll 120 grows && ok "counter grows ($a -> $b)" || fail "counter did not grow from $a"
kill -KILL "$victim"
gone() { [ "$(value elide_program_processes "$tmp/wl-metrics")" = 0 ]; }
poll 120 gone && ok "killed process: the program has 0 processes" || fail "processes: $(value elide_program_processes "$tmp/wl-metrics")"
c=$(value elide_program_acquisitions_total "$tmp/wl-metrics")
[ -n "$c" ] && [ "$c" -ge "$b" ] && ok "its counts stay after the exit ($c >= $b)" || fail "counter went back: $b -> $c"

# Every metric the shipped Grafana dashboard queries is one elided writes.
dashboard="${top_srcdir:-$(dirname "$0")/../..}/contrib/grafana/elide.json"
if used=$(jq -r '.. | .expr? // empty' "$dashboard" | grep -o 'elide_[a-z_]*' | sort -u); then
	missing=$(for m in $used; do grep -q "^$m[{ ]" "$prom" || echo "$m"; done)
	[ -z "$missing" ] && ok "dashboard queries only written metrics ($(echo $used | wc -w))" ||
		fail "dashboard queries metrics elided does not write: $missing"
else
	fail "cannot read the dashboard's queries from $dashboard"
fi

leftover=$(find "$metrics" -name '.*tmp' | wc -l)
[ "$leftover" = 0 ] && ok "no temporary file left" || fail "$leftover temporary files in $metrics"

kill "$daemon"
wait "$daemon" 2>/dev/null
daemon=
tl_finish elided-metrics
