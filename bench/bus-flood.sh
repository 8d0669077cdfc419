#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bus-flood.sh: elided's D-Bus interface under one user's flood (issue 31).
# Goals: another user's call answered within 100 ms during any single-uid
# flood, and sequential calls at the bus daemon's own rate.
#
# Method: a private dbus-daemon with the system bus's default policy plus
# the shipped org.elide.elided1.conf, elided on it (--no-bpf, an empty
# runtime directory).  First COUNT sequential calls on one connection to
# elided's GetStatus and to the bus daemon's GetId.  Then, for each flood
# method, uid 65534 keeps WINDOW calls in flight on each of CONNS
# connections for SECONDS (tests/integration/bus-flood), while root makes
# one GetStatus call every 200 ms (and, for reference, one to the bus
# daemon's GetId, in another round): their latency's median, 90th
# percentile and maximum, whether elided is on the bus afterwards, and the
# CPU time of elided and of the bus daemon.  Needs root (setpriv), dbus-daemon
# and busctl.  Progress to stderr, the report (Markdown) to stdout.

set -euo pipefail

prog=${0##*/}
conns=50
window=64
seconds=10
count=200
methods="Subscribe GetStatus ListProcesses"
builddir=${top_builddir:-.}

usage() {
	cat <<EOF
Usage: $prog [OPTIONS]

Options:
  --conns N        flooding connections (default $conns)
  --window N       calls in flight per connection (default $window)
  --seconds S      length of each flood (default $seconds)
  --count N        sequential calls (default $count)
  --methods "M..." methods to flood with (default "$methods")
  --builddir DIR   build tree with elided/elided and tests/integration/bus-flood
                   (default \$top_builddir, else .)
  -h, --help       show this help
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--conns) conns=$2; shift 2 ;;
	--window) window=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	--methods) methods=$2; shift 2 ;;
	--builddir) builddir=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
done

top_builddir=$(cd "$builddir" && pwd)
top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
export top_builddir top_srcdir
[ -x "$top_builddir/elided/elided" ] && [ -x "$top_builddir/tests/integration/bus-flood" ] ||
	{ echo "$prog: build elided/elided and tests/integration/bus-flood in $top_builddir first" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "$prog: needs root (the flood runs as uid 65534)" >&2; exit 1; }

set +eu
# shellcheck source=../tests/integration/testlib.sh
. "$top_srcdir/tests/integration/testlib.sh"
set -u
tl_setup bus-flood-bench
flood="$top_builddir/tests/integration/bus-flood"
for_others flood "$flood"
start_system_like_bus "$top_srcdir/systemd/org.elide.elided1.conf"
rundir="$tmp/run"
mkdir -m 1777 "$rundir"
printf 'daemon: { interval = 1.0; };\n' >"$tmp/elide.conf"
"$elided" --config "$tmp/elide.conf" --runtime-dir "$rundir" --no-bpf >"$tmp/elided.log" 2>&1 &
daemon=$!
poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { cat "$tmp/elided.log" >&2; exit 1; }

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
stats() { grep -E '^[0-9.]+$' "$1" | sort -g | awk '{ v[NR] = $1 } END { if (!NR) { print "n/a | n/a | n/a"; exit }
	printf "%.1f | %.1f | %.1f", v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.5)], v[NR] }'; }

echo "$prog: sequential calls" >&2
t_elided=$("$flood" seq "$count" elided)
t_bus=$("$flood" seq "$count" bus)

echo "# elided under a D-Bus flood"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)),"
echo "dbus-daemon $(dbus-daemon --version | awk 'NR == 1 { print $NF }'), $conns connections x $window calls in flight, $seconds s per flood."
echo
echo "$count sequential calls on one connection: elided GetStatus ${t_elided} s" \
	"($(awk -v t="$t_elided" -v n="$count" 'BEGIN { printf "%.0f", n / t }')/s)," \
	"the bus daemon's GetId ${t_bus} s ($(awk -v t="$t_bus" -v n="$count" 'BEGIN { printf "%.0f", n / t }')/s)."
echo
echo "| flood (uid 65534) | root's call to | median ms | p90 ms | max ms | errors | flood calls / replies / errors | elided CPU | bus CPU | on the bus after |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for m in $methods; do
	for target in elided bus; do
		echo "$prog: flooding with $m, probing $target" >&2
		e0=$(ticks "$daemon")
		b0=$(ticks "$bus")
		setpriv --reuid=65534 --regid=65534 --clear-groups "$flood" flood "$conns" "$seconds" "$m" "$window" \
			>"$tmp/flood.out" 2>&1 &
		fl=$!
		sleep 1
		"$flood" probe $(((seconds - 2) * 5)) 200 "$target" >"$tmp/probe.out" 2>&1
		wait "$fl"
		e1=$(ticks "$daemon")
		b1=$(ticks "$bus")
		sleep 1
		after=no
		"${B[@]}" get-property $NAME $OBJ $IFACE Version >/dev/null 2>&1 && after=yes
		read -r _ fc _ fr _ fe _ <"$tmp/flood.out" || true
		echo "| $m | $target | $(stats "$tmp/probe.out") | $(grep -c '^error' "$tmp/probe.out") |" \
			"$fc / $fr / $fe | $(awk -v t=$((e1 - e0)) -v h="$hz" -v s="$seconds" 'BEGIN { printf "%.0f%%", 100 * t / h / s }') |" \
			"$(awk -v t=$((b1 - b0)) -v h="$hz" -v s="$seconds" 'BEGIN { printf "%.0f%%", 100 * t / h / s }') | $after |"
		# Whatever the flood left in flight times out before the next round.
		sleep 2
	done
done
