#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Short-lived processes learn and teach (issue 34), with no start-up delay
# anywhere: a program whose cache_lock always aborts (ELIDE_SIM_ABORT
# where RTM is missing) runs back to back under elided, on a private
# runtime directory, state directory and D-Bus:
#   - five runs of 0.3 s: the first tries transactions and teaches at exit
#     (its .teach file); every later one makes zero attempts on the lock;
#   - after elidectl forget, a single run of 50 ms teaches as well;
#   - as root, uid 65534 running the same executable gets nothing of
#     root's verdicts, learns its own, and cannot plant a .teach file in
#     root's name; root's entries stay as they were;
#   - a damaged .teach file is refused with its reason, and the run that
#     finds it works as ever.
# Each run's attempts come from its exit report (every abort is counted).
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need dbus-daemon busctl jq
tl_setup elided-learned-short
start_private_bus

rundir="$tmp/run"
state="$tmp/state"
mkdir -m 1777 "$rundir"
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.5; };
default: { mode = "adaptive"; };
EOF

start_daemon() {
	"$elided" --verbose --no-bpf --config "$tmp/elide.conf" --runtime-dir "$rundir" --state-dir "$state" \
		>>"$tmp/elided.log" 2>&1 &
	daemon=$!
	poll 60 "${B[@]}" get-property $NAME $OBJ $IFACE Version ||
		{ cat "$tmp/elided.log" >&2; echo "FAIL: elided did not come up on the bus" >&2; exit 1; }
}
# The store is saved at shutdown.
restart_daemon() {
	kill -TERM "$daemon"
	wait "$daemon" 2>/dev/null
	start_daemon
}
start_daemon
[ -d "$rundir/hints" ] && [ "$(stat -c %a "$rundir/hints")" = 755 ] && ok "elided made $rundir/hints (0755)" ||
	fail "no hints folder: $(ls -la "$rundir")"

prog="$workload"
lib_run="$lib"
as_nobody=()
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	for_others prog "$workload"
	for_others lib_run "$lib"
	as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi

# run NAME MS [as-user-command...]: one run of MS milliseconds, started at
# once and waited for; its exit report in $tmp/NAME.report.
run() {
	local name=$1 ms=$2
	shift 2
	ELIDE_RUNTIME_DIR="$rundir" ELIDE_SIM_ABORT=0x6 ELIDE=report=1 \
		LD_PRELOAD="${asan_first:+$asan_first }$lib_run" "$@" "$prog" --ms "$ms" \
		>"$tmp/$name.out" 2>"$tmp/$name.report"
	rc=$?
	[ $rc -eq 0 ] || fail "$name exited with $rc: $(tail -n 3 "$tmp/$name.report")"
}
adopted() { "${B[@]}" call $NAME $OBJ $IFACE ListProcesses | jq -e --argjson pid "$1" '.data[0][] | select(.[0] == $pid)'; }
# adopted_run NAME MS: as run, but its threads start only once elided has
# adopted it (and given it its hints): the field's worst case for a
# verdict elided should no longer give.
adopted_run() {
	local name=$1 ms=$2 pid
	ELIDE_RUNTIME_DIR="$rundir" ELIDE_SIM_ABORT=0x6 ELIDE=report=1 \
		LD_PRELOAD="${asan_first:+$asan_first }$lib_run" "$prog" --ms "$ms" --wait-start \
		>"$tmp/$name.out" 2>"$tmp/$name.report" &
	pid=$!
	poll 60 grep -qx waiting "$tmp/$name.out" && poll 60 adopted "$pid" >/dev/null ||
		fail "$name (pid $pid) not adopted: $(tail -n 3 "$tmp/elided.log")"
	kill -USR1 "$pid"
	wait "$pid"
	rc=$?
	[ $rc -eq 0 ] || fail "$name exited with $rc: $(tail -n 3 "$tmp/$name.report")"
}
# Transactions the run tried on a lock: with every one aborting, the sum
# of its aborts by cause (the 8 columns after KIND, ACQUIRED, ELIDED and
# COMMIT); "none" when not tracked.
attempts_of() {
	awk -v lock="$2" '$1 == "libelide:" && $2 == lock {
		k = 0; for (i = 3; i <= NF; i++) if ($i ~ /^(mutex|rw-rd|rw-wr)$/) { k = i; break }
		s = 0; for (i = k + 4; i <= k + 11; i++) s += $i; t += s; f = 1 }
		END { print f ? t : "none" }' "$tmp/$1.report"
}
# zero NAME: the run tried no transaction on cache_lock ("none": never
# contended at all, which a loaded machine can make of a short run).
zero() { local a; a=$(attempts_of "$1" cache_lock); [ "$a" = 0 ] || [ "$a" = none ]; }
# teaching_run NAME MS [as-user-command...]: a run that tries the 16
# transactions a verdict needs.  On a loaded machine a short run's threads
# may barely meet; such a run teaches nothing, and another is made (noted).
# Sets $a (its attempts) and $tries.  $runner: run, or adopted_run.
runner=run
teaching_run() {
	local name=$1 ms=$2
	shift 2
	for tries in 1 2 3 4 5 6 7 8 9 10; do
		$runner "$name" "$ms" "$@"
		a=$(attempts_of "$name" cache_lock)
		[ "$a" != none ] && [ "$a" -ge 16 ] && break
		note "$name, try $tries: cache_lock tried $a transactions, fewer than a verdict needs: again"
	done
}
logged() { grep -q -- "$1" "$tmp/elided.log"; }
no_teach_file() { ! ls "$rundir"/*.teach >/dev/null 2>&1; }
store_lines() { grep "^$1 " "$state/learned" 2>/dev/null | cut -d' ' -f1-4 | sort; }

# ---- 1. five runs of 0.3 s, back to back ---------------------------------------------
teaching_run short1 300
[ "$a" != none ] && [ "$a" -ge 16 ] && ok "run 1 tried $a transactions on cache_lock, and taught" ||
	fail "run 1: cache_lock attempts $a (16 or more teach): $(cat "$tmp/short1.report")"
for i in 2 3 4 5; do
	run short$i 300
	zero short$i && ok "run $i: zero transaction attempts on cache_lock ($(attempts_of short$i cache_lock))" ||
		fail "run $i: cache_lock attempts $(attempts_of short$i cache_lock): $(grep -e cache_lock -e elision "$tmp/short$i.report")"
done
grep -q "cache_lock .*off (learned)" "$tmp/short2.report" && ok "run 2's report: cache_lock off (learned)" ||
	note "run 2's cache_lock: $(grep cache_lock "$tmp/short2.report")"
poll 30 logged "learned lock data:.*: never elide" && ok "elided learned it: $(grep -m1 'learned lock data:' "$tmp/elided.log")" ||
	fail "elided logged no learning: $(tail -n 5 "$tmp/elided.log")"
poll 30 no_teach_file && ok "elided folded the .teach file in and removed it" ||
	fail "left in $rundir: $(ls "$rundir")"
hints=$(ls "$rundir"/hints/*.hints 2>/dev/null | head -n 1)
[ -n "$hints" ] && [ "$(stat -c '%a %u' "$hints")" = "400 $(id -u)" ] &&
	ok "its .hints file is mode 0400, elided's (uid $(id -u))" || fail "hints files: $(ls -ln "$rundir/hints")"

# ---- 1b. a "never" is probed again, with back-off ----------------------------------------
# The file (common/learn-format.h): the header's record count at byte 16
# and `written` at 40; record i's `until` at 1072 + 96 i + 88.
i64() { od -An -t d8 -j "$2" -N 8 "$1" | tr -d ' '; }
count_of() { od -An -t u4 -j 16 -N 4 "$1" | tr -d ' '; }
# holds FILE: each verdict's hold, in seconds after the file was written.
holds() {
	local i w
	w=$(i64 "$1" 40)
	for ((i = 0; i < $(count_of "$1"); i++)); do echo -n "$(($(i64 "$1" $((1160 + 96 * i))) - w)) "; done
}
all_between() { local h; for h in $(holds "$hints"); do [ "$h" -ge "$1" ] && [ "$h" -le "$2" ] || return 1; done; }
all_between 55 65 && ok "each verdict ($(count_of "$hints")) holds 60 s after the run that taught it: $(holds "$hints")" ||
	fail "holds after one run: $(holds "$hints")"
# Their hold over: the next run probes, teaches again, and the hold doubles.
# The hold is the store's: elided writes the .hints file and each new
# process's segment hints from it.  So the store is aged by 61 s (elided
# stopped, which saves it; FIRST <= LAST kept) and elided restarted, which
# rewrites the .hints file.
kill -TERM "$daemon"
wait "$daemon" 2>/dev/null
awk 'NF == 18 { $7 -= 61; if ($6 > $7) $6 = $7 } { print }' "$state/learned" >"$state/learned.aged" &&
	mv "$state/learned.aged" "$state/learned"
start_daemon
all_between -61 0 && ok "the store aged by 61 s: the holds are over ($(holds "$hints"))" ||
	fail "holds after aging the store: $(holds "$hints")"
runner=adopted_run teaching_run probe 300
[ "$a" != none ] && [ "$a" -gt 0 ] && ok "once the hold is over, a run adopted before its first contention probes ($a attempts)" ||
	fail "the probe run: cache_lock attempts $a"
poll 30 all_between 115 125 && ok "confirmed again: now they hold $(holds "$hints")" ||
	fail "holds after the probe: $(holds "$hints")"
run after-probe 300
zero after-probe && ok "the run after the probe: zero attempts" ||
	fail "after the probe: cache_lock attempts $(attempts_of after-probe cache_lock)"

# ---- 2. forget, then one run of 50 ms teaches -----------------------------------------
"$elidectl" forget "$prog" >"$tmp/forget.out" 2>&1 && grep -q "forgot [1-9]" "$tmp/forget.out" &&
	ok "elidectl forget: $(cat "$tmp/forget.out")" || fail "elidectl forget said: $(cat "$tmp/forget.out")"
ls "$rundir"/hints/*.hints >/dev/null 2>&1 && fail "a .hints file outlived forget: $(ls "$rundir/hints")" ||
	ok "forget removed the program's .hints file"
teaching_run after-forget 300
[ "$a" != none ] && [ "$a" -gt 0 ] && ok "after forget, a run tries again ($a attempts)" ||
	fail "after forget: cache_lock attempts $a"
"$elidectl" forget "$prog" >/dev/null 2>&1
poll 30 no_teach_file
teaching_run brief 50
[ "$a" != none ] && [ "$a" -ge 16 ] && ok "a run of 50 ms tried $a transactions" ||
	fail "the 50 ms run: cache_lock attempts $a: $(cat "$tmp/brief.report")"
for i in 1 2; do
	run after-brief$i 300
	zero after-brief$i && ok "run $i after the 50 ms one: zero attempts on cache_lock" ||
		fail "run $i after the 50 ms one: cache_lock attempts $(attempts_of after-brief$i cache_lock)"
done

# ---- 3. another user -------------------------------------------------------------------
if [ ${#as_nobody[@]} -gt 0 ]; then
	poll 30 no_teach_file
	restart_daemon # the store on disk, as root's runs left it
	root_before=$(store_lines 0)
	teaching_run nobody1 300 "${as_nobody[@]}"
	[ "$a" != none ] && [ "$a" -ge 16 ] && ok "uid 65534, same executable: none of root's verdicts ($a attempts)" ||
		fail "uid 65534's first run: cache_lock attempts $a: $(cat "$tmp/nobody1.report")"
	run nobody2 300 "${as_nobody[@]}"
	zero nobody2 && ok "uid 65534's second run: zero attempts (its own verdict)" ||
		fail "uid 65534's second run: cache_lock attempts $(attempts_of nobody2 cache_lock)"
	nb_hints=$(ls "$rundir"/hints/65534-*.hints 2>/dev/null | head -n 1)
	root_hints=$(ls "$rundir"/hints/0-*.hints 2>/dev/null | head -n 1)
	[ -n "$nb_hints" ] && "${as_nobody[@]}" test -r "$nb_hints" && ok "uid 65534 reads a .hints file of its own" ||
		fail "uid 65534's hints file: $(ls -ln "$rundir/hints"; getfacl -n "$nb_hints" 2>&1)"
	"${as_nobody[@]}" test -r "$root_hints" && fail "uid 65534 can read root's $root_hints" ||
		ok "uid 65534 cannot read root's .hints file"
	# A .teach file in root's name, made by uid 65534: refused, removed.
	root_teach=$(basename "$(ls "$rundir"/hints/0-*.hints | head -n 1)" .hints).teach
	"${as_nobody[@]}" sh -c "head -c 4000 /dev/zero > '$rundir/.plant' && mv '$rundir/.plant' '$rundir/$root_teach'"
	poll 30 logged "$root_teach: owned by uid 65534, named for uid 0" &&
		ok "a .teach file planted in root's name is refused: $(grep -m1 "$root_teach: owned by" "$tmp/elided.log" | cut -c1-200)" ||
		fail "planted file: $(ls -ln "$rundir") $(tail -n 3 "$tmp/elided.log")"
	poll 30 no_teach_file || fail "the planted file stayed: $(ls -ln "$rundir")"
	run root-after 300
	zero root-after && ok "root's next run: zero attempts, as before" ||
		fail "root's run after uid 65534's: attempts $(attempts_of root-after cache_lock)"
	restart_daemon
	[ "$(store_lines 0)" = "$root_before" ] && ok "root's entries in the store unchanged by uid 65534" ||
		fail "root's entries changed: before [$root_before] after [$(store_lines 0)]"
	[ -n "$(store_lines 65534)" ] && ok "uid 65534's entries apart: $(store_lines 65534 | wc -l)" ||
		fail "no entries of uid 65534: $(cat "$state/learned")"
else
	note "not root (or no setpriv): the cross-user part needs uid 65534"
fi

# ---- 4. a damaged .teach file of one's own ---------------------------------------------
stem=$(basename "$(ls "$rundir"/hints/"$(id -u)"-*.hints | head -n 1)" .hints)
printf 'ELTEACH1 but not what it should be' >"$rundir/.bad" && mv "$rundir/.bad" "$rundir/$stem.teach"
poll 30 logged "$stem.teach: 34 bytes, shorter than its header" &&
	ok "a damaged .teach file is refused: $(grep -m1 "$stem.teach: 34 bytes" "$tmp/elided.log" | cut -c1-200)" ||
	fail "damaged file: $(tail -n 3 "$tmp/elided.log")"
ln -s /etc/passwd "$rundir/.link" && mv "$rundir/.link" "$rundir/$stem.teach"
poll 30 logged "$stem.teach: a symbolic link; removed" && ok "a .teach symbolic link is refused and removed" ||
	fail "a .teach symlink: $(ls -l "$rundir") $(tail -n 3 "$tmp/elided.log")"
printf 'ELTEACH1 but not what it should be' >"$rundir/$stem.teach.x" && mv "$rundir/$stem.teach.x" "$rundir/$stem.teach" 2>/dev/null
run damaged 300
zero damaged && ok "a run beside a damaged .teach file still has its verdicts" ||
	fail "run beside damage: attempts $(attempts_of damaged cache_lock)"

tl_finish elided-learned-short
