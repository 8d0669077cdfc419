#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# elided against hostile segments (DESIGN.md constraint 5).  The real daemon
# runs on a private runtime directory (--no-bus --no-bpf, interval 0.2 s) and
# seg-forge throws at it, each naming a live `sleep` of ours: every kind of
# corrupt header, garbage lock entries, a file that grows, shrinks and turns
# sparse while the daemon tracks it, a file cut short again and again while
# the daemon reads it through its mapping, symlinks (to a root-only file and to a
# valid segment), a FIFO, a hard link, files whose owner is not the
# process's, and a flood of 3000 junk files plus 300 valid segments of one
# uid against daemon.max_segments_per_uid = 64.
#
# Asserts: the daemon stays alive throughout and keeps adopting valid
# segments; every rejected file gets a log line naming it and the reason; a
# symlink's target is neither modified nor adopted; another user's processes
# are unaffected; RSS stays under RSS_LIMIT_KB after the flood.
# Waits are bounded polls.  Exit 77 when a prerequisite is missing.
set -u

: "${top_builddir:?run me through make check}"
elided="$top_builddir/elided/elided"
forge="$top_builddir/tests/integration/seg-forge"

# The daemon idles at ~4 MiB.  After the flood it tracks 64 processes (each a
# few KiB and its mapped segment's pages, plus once the symbol tables of the
# libc it names locks in) and knows
# ~3000 file names: a few MiB more.  64 MiB leaves room for allocator slack
# while catching anything that grows with the number of files or rejections.
RSS_LIMIT_KB=$((64 * 1024))
# AddressSanitizer's shadow memory and quarantine make RSS meaningless there.
[ "${ELIDE_SANITIZERS:-no}" = yes ] && RSS_LIMIT_KB=$((1024 * 1024))
FLOOD_PROCS=300
FLOOD_JUNK=3000
CAP=64

skip() { echo "SKIP: $*" >&2; exit 77; }
[ -x "$elided" ] || skip "$elided is not built"
[ -x "$forge" ] || skip "$forge is not built"
[ -r /proc/self/stat ] || skip "no /proc"
for tool in sha256sum stat timeout; do
	command -v "$tool" >/dev/null || skip "$tool is not installed"
done
[ "$(ulimit -u)" = unlimited ] || [ "$(ulimit -u)" -gt $((FLOOD_PROCS + 100)) ] ||
	skip "ulimit -u is too low for $FLOOD_PROCS processes"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/elided-hostile.XXXXXX") || exit 1
export ELIDE_STATE_DIR="$tmp/state"
chmod 755 "$tmp"
pids=()
daemon=
cleanup() {
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null
	# In chunks: a few hundred pids on one command line is fine.
	[ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
note() { echo "note: $*"; }

# poll SECONDS COMMAND...: true as soon as COMMAND succeeds.
poll() {
	local deadline=$((SECONDS + $1)); shift
	while [ $SECONDS -lt $deadline ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	"$@" >/dev/null 2>&1
}

rundir="$tmp/run"
log="$tmp/elided.log"
mkdir -m 1777 "$rundir"
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.2; max_segments_per_uid = $CAP; };
default: { mode = "adaptive"; };
EOF

# ---- helpers ------------------------------------------------------------------
# spawn: a live process to name in a segment; its pid in $spawned.
spawn() {
	"$@" sleep 300 &
	spawned=$!
	pids+=("$spawned")
}
forge() { "$forge" --dir "$rundir" "$@"; }
in_log() { grep -qF -- "$1" "$log"; }
# rejected NAME REASON: a log line refusing NAME that says REASON.
rejected() { grep -F "ignoring $1: " "$log" | grep -qF -- "$2"; }
adopted() { grep -q "tracking pid $1 " "$log"; }
exited() { grep -q "pid $1 exited" "$log"; }
alive() {
	if ! kill -0 "$daemon" 2>/dev/null; then
		echo "---- elided log (tail) ----" >&2
		tail -n 30 "$log" >&2
		fail "elided died ($1)"
		exit 1
	fi
}
root_tracked=()
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$daemon/status"; }
fingerprint() { echo "$(sha256sum < "$1") $(stat -c '%s %Y %y %U %a' "$1")"; }
# A fresh valid segment must be adopted promptly: the daemon is still serving.
serving() {
	local p
	spawn
	p=$spawned
	root_tracked+=("$p")
	forge --pid "$p" --locks 4 >/dev/null || { fail "seg-forge failed for pid $p"; return; }
	if poll 10 adopted "$p"; then ok "still serving after $1: pid $p adopted"; else fail "valid segment of pid $p not adopted after $1"; fi
}

# ---- the daemon ---------------------------------------------------------------
"$elided" --verbose --config "$tmp/elide.conf" --runtime-dir "$rundir" --no-bus --no-bpf >"$log" 2>&1 &
daemon=$!
poll 10 in_log "discovery:" || { cat "$log" >&2; fail "elided did not start"; exit 1; }
ok "elided started (pid $daemon), idle RSS $(rss_kb) kB"
rss_idle=$(rss_kb)

spawn
base=$spawned
forge --pid "$base" --locks 16 >/dev/null
poll 10 adopted "$base" && ok "baseline: a valid segment is adopted" || fail "baseline segment not adopted"
root_tracked+=("$base")

# ---- corrupt headers: each refused with its file name and reason -------------
declare -A reason=(
	[truncated]="file is "
	[short]="truncated: 100 bytes"
	[oversized]="too large"
	[total-size]="total_size 18446744073709547520"
	[capacity]="lock_capacity 4294967295 out of range"
	[capacity-file]="header total_size says"
	[high-water]="above lock_capacity"
	[magic]="bad magic"
	[version]="unsupported version"
	[header-pid]="header pid"
	[strings]="is not NUL-terminated"
	[fields]="out of range"
	[offsets]="locks_offset"
)
for kind in "${!reason[@]}"; do
	spawn
	p=$spawned
	name=$(forge --pid "$p" --locks 32 --corrupt "$kind" --other-pid "$base") || { fail "seg-forge --corrupt $kind"; continue; }
	if poll 10 rejected "$name" "${reason[$kind]}"; then
		ok "$kind: refused: $(grep -F "ignoring $name:" "$log" | head -n1 | sed 's/^elided: //')"
	else
		fail "$kind: no rejection of $name with '${reason[$kind]}' in the log"
	fi
	adopted "$p" && fail "$kind: pid $p adopted from a corrupt segment"
	alive "$kind"
done

# ---- garbage lock entries: the file is valid, its entries are not -----------
for kind in kinds names; do
	spawn
	p=$spawned
	name=$(forge --pid "$p" --locks 64 --corrupt "$kind")
	if poll 10 adopted "$p"; then
		ok "$kind: segment adopted, its garbage entries skipped"
		root_tracked+=("$p")
	else
		fail "$kind: valid header with garbage entries not adopted"
	fi
	if grep -F "$name: " "$log" | grep -q "lock entries are invalid and ignored, first entry [0-9]*: "; then
		ok "$kind: garbage entries logged: $(grep -F "$name: " "$log" | grep invalid | head -n1 | sed 's/^elided: //')"
	else
		fail "$kind: garbage lock entries of $name skipped without a log line naming one"
	fi
	alive "$kind"
done

# ---- files that change under the daemon --------------------------------------

# changing KIND FORGE-ARGS...: a live process whose segment seg-forge keeps
# changing (in the background, with FORGE-ARGS) while the daemon tracks it;
# returns once seg-forge is done.  Sets p (the pid) and name (the file);
# seg-forge's stderr is in $tmp/KIND.err.
changing() {
	local kind=$1 forger
	shift
	spawn
	p=$spawned
	"$forge" --dir "$rundir" --pid "$p" "$@" >"$tmp/$kind.out" 2>"$tmp/$kind.err" &
	forger=$!
	# Adopted in a moment when it is valid, at the latest once it is valid
	# again at the end (refused files are retried every fifth interval).
	poll 12 adopted "$p" && ok "$kind: adopted" || fail "$kind: not adopted"
	root_tracked+=("$p")
	for _ in $(seq 1 100); do
		kill -0 "$forger" 2>/dev/null || break
		alive "$kind"
		sleep 0.1
	done
	wait "$forger" || fail "$kind: seg-forge failed"
	name=$(cat "$tmp/$kind.out")
	alive "$kind"
}

# Grows (with and without its header agreeing), turns sparse and huge, then
# tiny, then valid again.
changing grow --locks 16 --grow 3
n=$(grep -cF "$name: " "$log")
if [ "$n" -gt 0 ]; then
	ok "grow: $n warning(s) about $name, e.g. $(grep -F "$name: " "$log" | sed -n '1p;$p' | sed 's/^elided: //' | paste -sd'|')"
else
	fail "grow: no warning about $name while it changed size"
fi
exited "$p" && fail "grow: pid $p dropped although alive"
serving "grow"

# Cut short while the daemon reads it.  elided keeps segments mapped: a
# truncation in the middle of a read faults (SIGBUS), which must fail that
# read only.  Whether a cut lands inside a read is timing; the daemon
# surviving and still serving is what is asserted.
changing flap --locks 4000 --flap 3
cuts=$(grep -o "cut the file [0-9]* times" "$tmp/flap.err" || true)
faults=$(grep -cF "$name: truncated while being read" "$log" || true)
ok "flap: $cuts; $faults read(s) hit by a cut (SIGBUS caught), $(grep -cF "$name: " "$log") warning(s) in all"
exited "$p" && fail "flap: pid $p dropped although alive"
serving "flap"

# ---- symlinks: never followed, targets untouched ----------------------------
secret="$tmp/secret"
printf 'root-only secret\n' > "$secret"
chmod 600 "$secret"
mkdir "$tmp/elsewhere"
spawn
victim=$spawned
# A valid segment outside the runtime directory, linked in under its own name.
vname=$("$forge" --dir "$tmp/elsewhere" --pid "$victim" --locks 8)
touch -d '2001-01-01 00:00:00' "$secret" "$tmp/elsewhere/$vname"
before_secret=$(fingerprint "$secret")
before_seg=$(fingerprint "$tmp/elsewhere/$vname")
spawn
p=$spawned
sname=$(forge --pid "$p" --symlink "$secret")
ln -s "$tmp/elsewhere/$vname" "$rundir/$vname"
for n in "$sname" "$vname"; do
	poll 10 in_log "ignoring $n: is a symlink (not followed)" && ok "symlink $n refused: not followed" ||
		fail "symlink $n: no 'is a symlink' rejection in the log"
done
sleep 0.5 # two intervals: a daemon that followed the link would write decisions now
adopted "$p" && fail "symlink to a root-only file adopted (pid $p)"
adopted "$victim" && fail "symlink to a valid segment adopted (pid $victim)"
[ "$(fingerprint "$secret")" = "$before_secret" ] && ok "symlink target (root-only file) unchanged: content, size, mtime" ||
	fail "root-only symlink target changed: $before_secret -> $(fingerprint "$secret")"
[ "$(fingerprint "$tmp/elsewhere/$vname")" = "$before_seg" ] && ok "symlink target (valid segment) unchanged" ||
	fail "linked segment changed: $before_seg -> $(fingerprint "$tmp/elsewhere/$vname")"
alive "symlinks"

# ---- hard link: another live process's segment under this one's name --------
spawn
p=$spawned
hname=$(forge --pid "$p" --locks 4 --name "$p-$(awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$p/stat").seg.tmp")
spawn
q=$spawned
qname="$q-$(awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$q/stat").seg"
ln "$rundir/$hname" "$rundir/$qname"
poll 10 in_log "ignoring $qname: header pid $p differs" && ok "hard link under another pid's name refused" ||
	fail "hard link $qname: no 'header pid' rejection"
adopted "$q" && fail "hard link adopted as pid $q"
rm -f "$rundir/$hname"

# ---- a FIFO must not block the daemon ---------------------------------------
spawn
p=$spawned
fname=$(forge --pid "$p" --fifo)
poll 10 in_log "ignoring $fname: not a regular file" && ok "FIFO $fname refused: not a regular file" ||
	fail "FIFO: no 'not a regular file' rejection"
alive "FIFO"
serving "a FIFO"

# ---- other users ----------------------------------------------------------------
other_victims=()
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
	nobody_uid=$(id -u nobody)
	as_nobody=(setpriv --reuid="$nobody_uid" --regid="$(id -g nobody)" --clear-groups)
	# nobody runs a copy: the build tree may be out of its reach (a clone
	# under a 0700 directory).
	forge_o="$tmp/for-others/seg-forge"
	mkdir -p "$tmp/for-others" && chmod 0755 "$tmp" "$tmp/for-others" && cp "$forge" "$forge_o" || exit 1
	"${as_nobody[@]}" test -x "$forge_o" || skip "uid $nobody_uid cannot reach $forge_o (is \$TMPDIR under a private directory?)"
	# A root process whose segment belongs to nobody.
	spawn
	p=$spawned
	name=$(forge --pid "$p" --locks 4 --owner "$nobody_uid")
	poll 10 in_log "ignoring $name: file owner uid $nobody_uid is not the owner uid 0 of process $p" &&
		ok "root's process, segment owned by nobody: refused" || fail "segment owned by nobody for root's pid $p: no owner rejection"
	adopted "$p" && fail "pid $p adopted from a file nobody owns"
	# Nobody's process with a segment root wrote: only root can write one,
	# which is what a server does before it drops privileges.  Adopted, and
	# owned (readable and steerable) by nobody, the process's user.
	spawn "${as_nobody[@]}"
	v1=$spawned
	poll 5 test "$(awk '/^Uid:/ { print $3 }' "/proc/$v1/status" 2>/dev/null)" = "$nobody_uid"
	name=$(forge --pid "$v1" --locks 4)
	poll 10 adopted "$v1" && ok "nobody's process, segment owned by root (privileges dropped): adopted" ||
		fail "root-owned segment of nobody's pid $v1 not adopted"
	# Header naming nobody's process inside a file for one of root's.
	spawn
	p=$spawned
	name=$(forge --pid "$p" --locks 4 --corrupt header-pid --other-pid "$v1")
	poll 10 in_log "ignoring $name: header pid $v1 differs" && ok "header naming nobody's pid $v1: refused" ||
		fail "header pid of another user: no rejection"
	# Nobody's own valid segment: adopted, and stays so through root's flood.
	spawn "${as_nobody[@]}"
	v2=$spawned
	poll 5 test "$(awk '/^Uid:/ { print $3 }' "/proc/$v2/status" 2>/dev/null)" = "$nobody_uid"
	"${as_nobody[@]}" "$forge_o" --dir "$rundir" --pid "$v2" --locks 8 >/dev/null || fail "seg-forge as nobody failed"
	poll 10 adopted "$v2" && ok "nobody's own segment adopted (uid $nobody_uid)" || fail "nobody's valid segment (pid $v2) not adopted"
	other_victims=("$v1" "$v2")
else
	note "not root (or no setpriv/nobody): the other-user cases are skipped"
fi
alive "other users"

# ---- the flood ------------------------------------------------------------------
# Free the uid's slots first: the cap then decides exactly which are adopted.
kill "${root_tracked[@]}" 2>/dev/null
for p in "${root_tracked[@]}"; do
	poll 10 exited "$p" || fail "tracked pid $p not reaped after being killed"
done
flood=()
for _ in $(seq 1 $FLOOD_PROCS); do
	spawn
	flood+=("$spawned")
done
t0=$SECONDS
forge --junk $FLOOD_JUNK || fail "seg-forge --junk failed"
for p in "${flood[@]}"; do
	forge --pid "$p" --locks 4 >/dev/null || fail "seg-forge failed for flood pid $p"
done
ok "flood written: $FLOOD_JUNK junk files, $FLOOD_PROCS valid segments in $((SECONDS - t0)) s"

printf '%s\n' "${flood[@]}" | sort > "$tmp/flood.pids"
junk_logged() { [ "$(grep -Eo '(ignoring|removed) 5[0-9]{6}-[0-9]+\.seg' "$log" | sort -u | wc -l)" -eq $FLOOD_JUNK ]; }
# Flood pids with a line saying adopted (A) or refused for the cap (R).
flood_lines() {
	sed -nE "s/.*tracking pid ([0-9]+) .*/\1 A/p; s/.*ignoring ([0-9]+)-[0-9]+\.seg: uid [0-9]+ already has $CAP processes tracked \(daemon.max_segments_per_uid\)$/\1 R/p" "$log" |
		sort -k1,1 | join - "$tmp/flood.pids"
}
flood_answered() { [ "$(flood_lines | cut -d' ' -f1 | sort -u | wc -l)" -eq $FLOOD_PROCS ]; }
poll 20 junk_logged && ok "every junk file got its log line ($FLOOD_JUNK)" ||
	fail "junk files logged: $(grep -Eo '(ignoring|removed) 5[0-9]{6}-[0-9]+\.seg' "$log" | sort -u | wc -l) of $FLOOD_JUNK"
poll 20 flood_answered || fail "not every flood segment was adopted or refused"
alive "flood"
flood_lines > "$tmp/flood.answers"
n_adopted=$(grep -c ' A$' "$tmp/flood.answers")
n_refused=$(grep -c ' R$' "$tmp/flood.answers")
n_twice=$(cut -d' ' -f1 "$tmp/flood.answers" | uniq -d | wc -l)
[ "$n_twice" -eq 0 ] || fail "flood: $n_twice pid(s) with more than one adoption/refusal line"
[ "$n_adopted" -eq $CAP ] && ok "flood: $n_adopted of $FLOOD_PROCS adopted (the cap)" || fail "flood: $n_adopted adopted, cap is $CAP"
[ "$n_refused" -eq $((FLOOD_PROCS - CAP)) ] && ok "flood: $n_refused refused, one line each naming the file and daemon.max_segments_per_uid" ||
	fail "flood: $n_refused refused, expected $((FLOOD_PROCS - CAP))"
sleep 1 # five intervals reading 64 segments
rss=$(rss_kb)
[ "$rss" -lt $RSS_LIMIT_KB ] && ok "RSS after the flood: $rss kB (idle $rss_idle kB, limit $RSS_LIMIT_KB kB)" ||
	fail "RSS after the flood: $rss kB >= $RSS_LIMIT_KB kB"

for v in "${other_victims[@]}"; do
	kill -0 "$v" 2>/dev/null || fail "other user's process $v died"
done
if [ ${#other_victims[@]} -eq 2 ]; then
	exited "${other_victims[1]}" && fail "nobody's tracked process dropped during the flood" ||
		ok "nobody's process still tracked through root's flood"
fi

# Slots come back when tracked processes go; the periodic rescan (every
# fifth interval) then adopts refused segments of live processes, quietly.
cut -d' ' -f1 < <(grep ' A$' "$tmp/flood.answers") > "$tmp/flood.adopted"
cut -d' ' -f1 < <(grep ' R$' "$tmp/flood.answers") > "$tmp/flood.refused"
mapfile -t first10 < <(head -n 10 "$tmp/flood.adopted")
kill "${first10[@]}"
refused_adopted() {
	[ "$(sed -nE 's/.*tracking pid ([0-9]+) .*/\1/p' "$log" | sort -u | join - <(sort "$tmp/flood.refused") | wc -l)" -ge 10 ]
}
if poll 10 refused_adopted; then
	ok "10 tracked processes killed: 10 refused segments adopted by the rescan"
else
	fail "freed slots not reused: $(sed -nE 's/.*tracking pid ([0-9]+) .*/\1/p' "$log" | sort -u | join - <(sort "$tmp/flood.refused") | wc -l) of 10 refused segments adopted later"
fi
alive "re-adoption"

kill "${flood[@]}" 2>/dev/null
# Every flood pid that got a "tracking" line has an "exited" line.
flood_still_tracked() {
	local t e
	t=$(sed -nE 's/.*tracking pid ([0-9]+) .*/\1/p' "$log" | sort -u | join - "$tmp/flood.pids" | wc -l)
	e=$(sed -nE 's/.*pid ([0-9]+) exited.*/\1/p' "$log" | sort -u | join - "$tmp/flood.pids" | wc -l)
	echo $((t - e))
}
none_tracked() { [ "$(flood_still_tracked)" -eq 0 ]; }
poll 15 none_tracked && ok "flood processes killed: every tracked one reaped" ||
	fail "$(flood_still_tracked) flood processes still tracked after being killed"
alive "reaping the flood"
serving "the flood"
rss=$(rss_kb)
[ "$rss" -lt $RSS_LIMIT_KB ] && ok "final RSS $rss kB" || fail "final RSS $rss kB >= $RSS_LIMIT_KB kB"
alive "the end"

echo "---- elided log: $(wc -l < "$log") lines; first rejections ----"
grep -E "ignoring|removed" "$log" | grep -v " 5[0-9]\{6\}-" | head -n 40
if [ $failures -gt 0 ]; then
	echo "$failures check(s) failed (${SECONDS}s)"
	exit 1
fi
echo "all hostile-segment checks passed (${SECONDS}s)"
