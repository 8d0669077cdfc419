#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Issue 31 item 3: what elided learned is given by a process's owner of
# the moment, never by a former one.  Run as root with the unprivileged
# user nobody, on a private runtime directory, state directory and bus.
# The learned store is written before elided starts (its format is
# elided/learned.c's), with "never elide" verdicts for locks at known
# offsets into libc; seg-forge writes segments whose locks lie there and
# reads back the hints and lock decisions elided writes:
#   - nobody's process gets nobody's verdicts for its program;
#   - a process of nobody's that exec's a setuid-root program (same pid, a
#     new root-owned segment, as libelide under /etc/ld.so.preload makes
#     one) gets root's verdicts for that program and none of nobody's,
#     like a run of the program that root started;
#   - a root process that drops to nobody without an exec loses root's
#     hints and the lock root's verdict turned off, and gets nobody's.
# Waits are bounded polls, never fixed sleeps.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
forge="$top_builddir/tests/integration/seg-forge"
drop="$top_builddir/tests/integration/drop-later"
need dbus-daemon busctl jq setpriv
[ "$(id -u)" -eq 0 ] || skip "needs root to run a second, unprivileged user and a setuid program"
id nobody >/dev/null 2>&1 || skip "no user nobody"
[ -x "$forge" ] && [ -x "$drop" ] || skip "helpers not built"
tl_setup elided-learned-owner
nb=$(id -u nobody)
nb_gid=$(id -g nobody)
as_nobody=(setpriv --reuid="$nb" --regid="$nb_gid" --clear-groups)
for_others forge "$forge"

rundir="$tmp/run"
state="$tmp/state"
log="$tmp/elided.log"
mkdir -m 1777 "$rundir"
mkdir -m 0700 "$state"
mkdir -m 0777 "$tmp/sh"

# The lock offsets into libc, one per (user, program) verdict.
NB_SH=0x1100    # nobody's, for the shell that exec's the setuid program
NB_SUID=0x2200  # nobody's, for the setuid program
ROOT_SUID=0x3300 # root's, for the setuid program
ROOT_DROP=0x4400 # root's, for drop-later
NB_DROP=0x5500  # nobody's, for drop-later

# ---- the processes ---------------------------------------------------------------
suid="$tmp/suid-sleep"
cp "$(command -v sleep)" "$suid" && chmod 4755 "$suid" || skip "cannot make a setuid copy of sleep"
suid=$(readlink -f "$suid")
# nobody's shell, waiting for "go" to exec the setuid copy in the same pid.
"${as_nobody[@]}" sh -c 'echo $$ > "$1/pid"; while [ ! -e "$1/go" ]; do sleep 0.1; done; exec "$2" 300' \
	sh "$tmp/sh" "$suid" &
pids+=("$!")
poll 5 test -s "$tmp/sh/pid" || { echo "FAIL: nobody's shell did not start" >&2; exit 1; }
sp=$(cat "$tmp/sh/pid")
# root's run of the setuid program.
"$suid" 300 &
rp=$!
pids+=("$rp")
# root's process that becomes nobody's when "drop" appears.
"$drop" "$nb" "$nb_gid" "$tmp/drop" 300 >"$tmp/drop.out" 2>&1 &
dp=$!
pids+=("$dp")
poll 5 grep -qx ready "$tmp/drop.out" || { echo "FAIL: drop-later did not start: $(cat "$tmp/drop.out")" >&2; exit 1; }
exe_is() { [ "$(readlink "/proc/$1/exe")" = "$2" ]; }
poll 5 exe_is "$rp" "$suid" || { echo "FAIL: root's $suid did not start" >&2; exit 1; }

# libc as elided names it (its file name), and the room in its first mapping.
libc_map() { awk '$3 == "00000000" && $6 ~ /\/libc[.-]/ { print $1, $6; exit }' "/proc/$1/maps"; }
read -r range libc_path <<<"$(libc_map "$sp")"
[ -n "${libc_path:-}" ] || skip "no libc mapped by pid $sp: $(cat "/proc/$sp/maps")"
libc=$(basename "$libc_path")
size=$((0x${range#*-} - 0x${range%-*}))
[ "$size" -gt $((NB_DROP + 64)) ] || skip "libc's first mapping ($size bytes) is smaller than the offsets used"

# ---- the store: elided/learned.c's format --------------------------------------------
# pct STRING: percent-encoded as the store writes identities.
pct() {
	local LC_ALL=C s=$1 out='' c n i
	for ((i = 0; i < ${#s}; i++)); do
		c=${s:i:1}
		printf -v n %d "'$c"
		if [ "$n" -lt 33 ] || [ "$n" -gt 126 ] || [ "$c" = % ]; then printf -v c %%%02X "$n"; fi
		out+=$c
	done
	printf %s "$out"
}
# program PID: the program identity of PID's executable, as elided computes it.
program() {
	local exe
	exe=$(readlink "/proc/$1/exe") || return 1
	pct "path:$exe:ino=$(stat -L -c %i "/proc/$1/exe"):mtime=$(stat -L -c %Y "/proc/$1/exe")"
}
sh_prog=$(program "$sp")
suid_prog=$(program "$rp")
drop_prog=$(program "$dp")
now=$(date +%s)
entry() { echo "$1 $2 data:$(pct "$libc")+$3 never 1 $now $now 1000 1000 0 0 0 0 0 0 0 0 1000"; }
{
	echo "elide-learned 1"
	entry "$nb" "$sh_prog" $NB_SH
	entry "$nb" "$suid_prog" $NB_SUID
	entry 0 "$suid_prog" $ROOT_SUID
	entry 0 "$drop_prog" $ROOT_DROP
	entry "$nb" "$drop_prog" $NB_DROP
	echo "end 5"
} >"$state/learned"
chmod 0600 "$state/learned"

# ---- elided ---------------------------------------------------------------------------
start_private_bus
cat >"$tmp/elide.conf" <<EOF
daemon: { interval = 0.2; };
default: { mode = "adaptive"; };
EOF
"$elided" --verbose --no-bpf --config "$tmp/elide.conf" --runtime-dir "$rundir" --state-dir "$state" >"$log" 2>&1 &
daemon=$!
poll 10 "${B[@]}" get-property $NAME $OBJ $IFACE Version || { cat "$log" >&2; echo "FAIL: elided not on the bus" >&2; exit 1; }
grep -q "learned policy: 5 entries from $state/learned" "$log" && ok "elided loaded the 5 seeded verdicts" ||
	{ cat "$log" >&2; echo "FAIL: the seeded store was not loaded" >&2; exit 1; }

# seg PID: PID's newest segment file (an image that could not replace the
# file of the image before it publishes NAME-GEN.seg, see segment-format.h).
seg() { printf '%s\n' "$rundir/$1"-*.seg | awk -F/ '{ print $NF }' | sort -t- -k3n | tail -n 1; }
# dump PID: what elided wrote into PID's segment (seg-forge --dump).
dump() { "$forge" --dir "$rundir" --pid "$1" --name "$(seg "$1")" --dump 2>&1; }
hints() { dump "$1" | awk '$1 == "hint" { print $2, $3 }' | sort | tr '\n' ' ' | sed 's/ $//'; }
lock_ctl() { dump "$1" | awk -v w="libc+$2" '$1 == "lock" && $3 == w { print $4, $5; exit }'; }
has_hint() { dump "$1" | grep -qx "hint never libc+$2"; }
# expect PID WHAT HINTS [OFFSET CTL]...: PID's hints are HINTS ("never
# libc+0x..." sorted, space-separated, or empty), each lock at OFFSET has
# the decision CTL ("never learned", "none none").
expect() {
	local pid=$1 what=$2 want=$3 got off ctl
	shift 3
	got=$(hints "$pid")
	[ "$got" = "$want" ] && ok "$what: hints [$got]" || fail "$what: hints [$got], expected [$want]: $(dump "$pid")"
	while [ $# -ge 2 ]; do
		off=$1 ctl=$2
		shift 2
		got=$(lock_ctl "$pid" "$off")
		[ "$got" = "$ctl" ] && ok "$what: the lock at libc+$off: $got" ||
			fail "$what: the lock at libc+$off: '$got', expected '$ctl'"
	done
}
euid() { awk '/^Uid:/ { print $3 }' "/proc/$1/status"; }
euid_is() { [ "$(euid "$1")" = "$2" ]; }
ctl_is() { [ "$(lock_ctl "$1" "$2")" = "$3" ]; }

# ---- 1. every process gets its own owner's verdicts ---------------------------------
"${as_nobody[@]}" "$forge" --dir "$rundir" --pid "$sp" --locks 4 --libc-locks $NB_SH,$NB_SUID,$ROOT_SUID >/dev/null ||
	fail "seg-forge as nobody for pid $sp"
"$forge" --dir "$rundir" --pid "$rp" --locks 4 --libc-locks $NB_SUID,$ROOT_SUID >/dev/null || fail "seg-forge for pid $rp"
"$forge" --dir "$rundir" --pid "$dp" --locks 4 --libc-locks $ROOT_DROP,$NB_DROP >/dev/null || fail "seg-forge for pid $dp"
poll 10 has_hint "$sp" $NB_SH || fail "nobody's shell (pid $sp) never got nobody's hint: $(dump "$sp")"
poll 10 has_hint "$rp" $ROOT_SUID || fail "root's run of $suid (pid $rp) never got root's hint: $(dump "$rp")"
poll 10 has_hint "$dp" $ROOT_DROP || fail "root's drop-later (pid $dp) never got root's hint: $(dump "$dp")"
# The decisions follow the hints within a pass: wait for the last one's.
poll 5 ctl_is "$dp" $ROOT_DROP "never learned"
expect "$sp" "nobody's shell" "never libc+$NB_SH" $NB_SH "never learned" $NB_SUID "none none" $ROOT_SUID "none none"
expect "$rp" "root's run of the setuid program" "never libc+$ROOT_SUID" $ROOT_SUID "never learned" $NB_SUID "none none"
expect "$dp" "root's drop-later" "never libc+$ROOT_DROP" $ROOT_DROP "never learned" $NB_DROP "none none"

# ---- 2. a setuid exec in nobody's process -------------------------------------------
touch "$tmp/sh/go"
if poll 5 euid_is "$sp" 0; then
	# The new image's segment, root's.  libelide replaces only a file of
	# its own euid: the shell's, nobody's, stays, and the root image
	# publishes the next generation, NAME-1.seg (libelide/segment.c).
	first=$(seg "$sp")
	"$forge" --dir "$rundir" --pid "$sp" --name "${first%.seg}-1.seg" --locks 4 \
		--libc-locks $NB_SH,$NB_SUID,$ROOT_SUID >/dev/null || fail "seg-forge for pid $sp's new image"
	[ "$(stat -c %u "$rundir/${first%.seg}-1.seg")" = 0 ] && ok "pid $sp's new image has a segment of root's" ||
		fail "pid $sp's segments: $(ls -ln "$rundir")"
	poll 10 has_hint "$sp" $ROOT_SUID && ok "the setuid image (pid $sp) got root's hint for its program" ||
		fail "the setuid image never got root's hint: $(dump "$sp")"
	poll 5 ctl_is "$sp" $ROOT_SUID "never learned"
	expect "$sp" "the setuid image" "never libc+$ROOT_SUID" $ROOT_SUID "never learned" $NB_SUID "none none" \
		$NB_SH "none none"
	# Nothing of nobody's reached it at any time: no lock of pid $sp was
	# turned off by nobody's verdict for the setuid program.
	grep -F "pid $sp (" "$log" | grep -q "lock libc_lock_$NB_SUID no longer elided" &&
		fail "nobody's verdict reached root's image: $(grep -F "pid $sp (" "$log" | grep "libc_lock_$NB_SUID")" ||
		ok "no lock of the setuid image was ever turned off by nobody's verdict"
	grep -F "pid $sp (" "$log" | grep -q "changed owner uid $nb -> uid 0" && ok "the owner change was logged" ||
		fail "no owner change logged for pid $sp: $(grep -F "pid $sp" "$log" | tail -n 5)"
	poll 5 test ! -e "$rundir/$first" && ok "the shell's segment was superseded and removed" ||
		fail "the shell's segment $first is still there: $(ls -ln "$rundir")"
	owner=$("${B[@]}" call $NAME $OBJ $IFACE ListProcesses | jq -r --argjson pid "$sp" '.data[0][] | select(.[0] == $pid) | .[1]')
	[ "$owner" = 0 ] && ok "listed as root's" || fail "pid $sp listed as uid '$owner'"
else
	note "the setuid copy did not run as root (nosuid mount?): the setuid exec not checked"
fi

# ---- 3. root's process drops to nobody without an exec ----------------------------
touch "$tmp/drop"
poll 5 grep -qx dropped "$tmp/drop.out" && [ "$(euid "$dp")" = "$nb" ] && ok "drop-later (pid $dp) is nobody's now" ||
	fail "drop-later did not drop: $(cat "$tmp/drop.out")"
# A change away from root is seen at the next look at the owner (a root
# process with root's hints is looked at the fresh way, every
# ELIDED_PROC_CHECK_EVERY intervals), at the latest at the periodic full
# check (ELIDED_PROC_CHECK_WATCHED_EVERY intervals).
t0=$SECONDS
poll 30 has_hint "$dp" $NB_DROP && ok "after the drop, pid $dp got nobody's hint ($((SECONDS - t0)) s)" ||
	fail "after the drop pid $dp never got nobody's hint: $(dump "$dp")"
poll 5 ctl_is "$dp" $ROOT_DROP "none none"
poll 5 ctl_is "$dp" $NB_DROP "never learned"
expect "$dp" "after the drop" "never libc+$NB_DROP" $ROOT_DROP "none none" $NB_DROP "never learned"
grep -F "pid $dp (" "$log" | grep -q "changed owner uid 0 -> uid $nb" && ok "the owner change was logged" ||
	fail "no owner change logged for pid $dp: $(grep -F "pid $dp" "$log" | tail -n 5)"
# Now nobody's to read: the locks off by a learned verdict are those of
# nobody's own verdicts (entry 3, at $NB_DROP; entry 2 at $ROOT_DROP is not).
if "${as_nobody[@]}" "${B[@]}" call $NAME $OBJ $IFACE GetLearned u "$dp" >"$tmp/getlearned.json" 2>"$tmp/err"; then
	[ "$(jq -c '[.data[0][] | .[0]]' "$tmp/getlearned.json")" = "[3]" ] &&
		ok "nobody's GetLearned of pid $dp: entry 3 only ($(jq -c .data "$tmp/getlearned.json"))" ||
		fail "nobody's GetLearned of pid $dp: $(jq -c .data "$tmp/getlearned.json")"
else
	fail "nobody's GetLearned of pid $dp: $(cat "$tmp/err")"
fi

kill -0 "$daemon" && ok "elided still running" || fail "elided died"
echo "---- elided log (tail) ----"
tail -n 30 "$log"
tl_finish "learned-owner"
