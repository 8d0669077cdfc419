# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Shared by the shell integration tests: sourced, never run.
#
#   tl_setup NAME         make $tmp (removed at exit, with every pid in $pids,
#                         $daemon and $bus killed), set the tool paths
#   need TOOL...          skip (exit 77, with the reason) when a tool is missing
#   ok / fail / skip / note
#   poll SECONDS CMD...   true as soon as CMD succeeds (bounded, never decides by sleeping)
#   start_private_bus     a dbus-daemon for $tmp, exported as DBUS_SYSTEM_BUS_ADDRESS
#   start_elided CONF     elided without BPF on $rundir, configured by CONF (its
#                         text), logging to $tmp/elided.log; sets $daemon
#   tl_finish WHAT        exit 1 when a check failed, else 0
#   for_others VAR FILE   VAR := a copy of the built FILE that uid 65534 can run
#   $preload              LD_PRELOAD for a program under libelide (ASan first in sanitizer builds)

: "${top_builddir:?run me through make check}"
lib="$top_builddir/libelide/.libs/libelide.so"
elided="$top_builddir/elided/elided"
elidectl="$top_builddir/elidectl/elidectl"
workload="$top_builddir/tests/integration/workload-contended"

# What to put in LD_PRELOAD.  A sanitizer build's libelide needs the ASan
# runtime loaded before it; `elidectl run` appends libelide to LD_PRELOAD,
# so commands it runs get "$asan_first" as their LD_PRELOAD.
preload="$lib"
asan_first=
if [ "${ELIDE_SANITIZERS:-no}" = yes ]; then
	asan_first=$(${CC:-cc} -print-file-name=libasan.so)
	preload="$asan_first $lib"
	ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
	export ASAN_OPTIONS
fi

# The daemon's D-Bus coordinates and a busctl that speaks JSON.
NAME=org.elide.elided1
OBJ=/org/elide/elided1
IFACE=org.elide.Manager1
B=(busctl --system --json=short)
# prop NAME: a property of elided's, as text.
prop() { "${B[@]}" get-property $NAME $OBJ $IFACE "$1" | jq -r .data; }

failures=0
pids=()
daemon=
bus=

ok() { echo "ok: $*"; }
note() { echo "note: $*"; }
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
skip() { echo "SKIP: $*" >&2; exit 77; }

need() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null || skip "$tool is not installed"
	done
}

poll() {
	local deadline=$((SECONDS + $1)); shift
	while [ $SECONDS -lt $deadline ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	"$@" >/dev/null 2>&1
}

tl_cleanup() {
	local p
	for p in "${pids[@]}" $daemon $bus; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}

tl_setup() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
	# Readable by others: the other-user checks connect to the bus in here.
	chmod 755 "$tmp"
	# What elided learns stays in the test's own directory (never the
	# system's state directory, never shared by tests running side by side).
	ELIDE_STATE_DIR="$tmp/state"
	export ELIDE_STATE_DIR
	trap tl_cleanup EXIT
	trap 'exit 1' HUP INT TERM
}

start_private_bus() {
	cat > "$tmp/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$tmp/bus.socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
CONF
	run_bus_daemon
}

start_elided() {
	printf '%s\n' "$1" >"$tmp/elide.conf"
	"$elided" --no-bpf --config "$tmp/elide.conf" --runtime-dir "$rundir" >>"$tmp/elided.log" 2>&1 &
	daemon=$!
}

# A bus whose policy is the system bus's defaults plus $1 (the shipped
# policy file), for tests of what the policy allows.
start_system_like_bus() {
	local policy=$1

	cat > "$tmp/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$tmp/bus.socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
  </policy>
  <include>$policy</include>
</busconfig>
CONF
	run_bus_daemon
}

# dbus-daemon on $tmp/bus.conf; sets $bus and DBUS_SYSTEM_BUS_ADDRESS.
run_bus_daemon() {
	# dbus-daemon complains on stderr when it may not raise its fd limit.
	dbus-daemon --config-file="$tmp/bus.conf" --nofork --nopidfile --print-address=3 \
		3>"$tmp/bus.address" 2>>"$tmp/bus.log" &
	bus=$!
	poll 10 test -s "$tmp/bus.address" || { echo "FAIL: dbus-daemon did not start: $(cat "$tmp/bus.log")" >&2; exit 1; }
	DBUS_SYSTEM_BUS_ADDRESS=$(head -n1 "$tmp/bus.address")
	export DBUS_SYSTEM_BUS_ADDRESS
	chmod 777 "$tmp/bus.socket" 2>/dev/null
}

# How many pidfds process $1 holds, less those for the bus daemon ($bus):
# sd-bus of systemd 254 and later keeps one for its peer (SO_PEERPIDFD).
pidfds_of() {
	local n=0 fd
	for fd in "/proc/$1/fd/"*; do
		[ "$(readlink "$fd" 2>/dev/null)" = "anon_inode:[pidfd]" ] || continue
		if [ -n "${bus:-}" ] && grep -Eq "^Pid:[[:space:]]*$bus\$" "/proc/$1/fdinfo/${fd##*/}" 2>/dev/null; then
			continue
		fi
		n=$((n + 1))
	done
	echo "$n"
}

# Programs another user runs (setpriv --reuid) must not be run from the
# build tree: a clone under a 0700 directory (mktemp -d, /root, a home)
# hides it ("Permission denied").  A copy in $tmp (0755, under /tmp) is
# reachable; where it is not either (TMPDIR private too), the test skips.
for_others() {
	local dir="$tmp/for-others" src=$2 copy
	mkdir -p "$dir" && chmod 0755 "$dir" || exit 1
	# A libtool wrapper script runs the real program from .libs/.
	[ "$(head -c 2 "$src")" = "#!" ] && src="$(dirname "$src")/.libs/$(basename "$src")"
	copy="$dir/$(basename "$src")"
	cp "$src" "$copy" && chmod 0755 "$copy" || exit 1
	# Whatever it loads from the build tree would be out of reach again.
	if ldd "$copy" 2>/dev/null | grep -q -e "$top_builddir" -e "not found"; then
		skip "$copy loads libraries from the build tree: $(ldd "$copy" | grep -e "$top_builddir" -e "not found")"
	fi
	if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
		setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$copy" ||
			skip "uid 65534 cannot reach $dir (is \$TMPDIR under a private directory?)"
	fi
	printf -v "$1" %s "$copy"
}

tl_finish() {
	if [ $failures -gt 0 ]; then
		echo "$failures check(s) failed"
		exit 1
	fi
	echo "all $1 checks passed"
	exit 0
}
