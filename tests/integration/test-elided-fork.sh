#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Forked children (issue 32, item 6): a program under libelide forks
# children without exec, as stress-ng and pre-fork servers do, and each
# child takes contended locks (one it inherited, one it made) until the
# program is told to stop.  elided (private runtime directory and bus)
# must list every child, with its locks, for the whole of its life: from
# adoption until it exits, across elided's periodic checks of each process
# against /proc (every 10 intervals, and every 60 for a process whose exit
# it watches), then forget it once it is gone.
#
# "Its whole life" is counted in elided's own intervals, not in seconds:
# the test looks at every child until elided's history of it holds its
# full 60 points, which it has only after the 60th interval's pass (and
# the check of that pass).  Every wait is a bounded poll.
#
# Run once with the pidfd fallback (--no-bpf), and once more with BPF
# discovery where elided can load it (root, BTF).
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
need dbus-daemon busctl jq
tl_setup elided-fork
start_private_bus

forker="$top_builddir/tests/integration/fork-workload"
rundir="$tmp/run"
mkdir -m 1777 "$rundir"
cat > "$tmp/elide.conf" <<EOF
daemon: { interval = 0.2; };
EOF

listed() { "${B[@]}" call $NAME $OBJ $IFACE ListProcesses | jq -e --argjson pid "$1" '.data[0][] | select(.[0] == $pid)'; }
# has_locks PID: elided shows the child's two locks, fork_lock by its name.
has_locks() {
	local j
	j=$("$elidectl" show "$1" --json 2>/dev/null) || return 1
	jq -e '(.locks | length) >= 2 and any(.locks[]; .name == "fork_lock")' <<<"$j" >/dev/null
}
history_points() { "${B[@]}" call $NAME $OBJ $IFACE GetHistory u "$1" 2>/dev/null | jq '.data[0] | length'; }

# run_case LABEL ELIDED-OPTIONS...
run_case() {
	local label=$1 kids=() child seen_all lost= full
	shift
	"$elided" --verbose "$@" --config "$tmp/elide.conf" --runtime-dir "$rundir" >>"$tmp/elided-$label.log" 2>&1 &
	daemon=$!
	poll 30 "${B[@]}" get-property $NAME $OBJ $IFACE Version ||
		{ fail "$label: elided did not come up: $(cat "$tmp/elided-$label.log")"; return; }
	note "$label: discovery $(prop DiscoveryMethod)"

	ELIDE_RUNTIME_DIR="$rundir" LD_PRELOAD="$preload" "$forker" --children 3 >"$tmp/$label.out" 2>"$tmp/$label.err" &
	local parent=$!
	pids+=("$parent")
	if ! poll 120 grep -qx ready "$tmp/$label.out"; then
		fail "$label: the children did not start: $(cat "$tmp/$label.out" "$tmp/$label.err")"
		kill "$daemon"; wait "$daemon" 2>/dev/null; daemon=
		return
	fi
	mapfile -t kids < <(sed -n 's/^child \([0-9]*\)$/\1/p' "$tmp/$label.out")
	[ ${#kids[@]} = 3 ] && ok "$label: 3 children forked: ${kids[*]}" || fail "$label: children: ${kids[*]}"

	for child in "${kids[@]}"; do
		poll 120 listed "$child" && ok "$label: child $child adopted" ||
			fail "$label: child $child not listed: $("$elidectl" list 2>&1) $(ls "$rundir")"
		poll 120 has_locks "$child" && ok "$label: child $child shows its locks, fork_lock by name" ||
			fail "$label: child $child locks: $("$elidectl" show "$child" --json 2>&1 | jq -c '[.locks[]?.name]' 2>&1)"
	done

	# Every child listed, with its locks, at every look, until elided has
	# kept it for 60 intervals (its history is full).  Bounded by a count of
	# looks, not by a deadline: a loaded machine only makes it slower.
	full=no
	for _ in $(seq 3000); do
		for child in "${kids[@]}"; do
			if ! kill -0 "$child" 2>/dev/null; then
				lost="child $child died: $(cat "$tmp/$label.err")"
			elif ! listed "$child" >/dev/null; then
				lost="child $child (alive) dropped out of ListProcesses after $(history_points "$child") intervals"
			elif ! has_locks "$child"; then
				lost="child $child (alive) lost its locks: $("$elidectl" show "$child" --json 2>&1 | jq -c '[.locks[]?.name]' 2>&1)"
			fi
			[ -n "$lost" ] && break 2
		done
		full=yes
		for child in "${kids[@]}"; do
			[ "$(history_points "$child")" -ge 60 ] || { full=no; break; }
		done
		[ $full = yes ] && break
		sleep 0.2
	done
	if [ -n "$lost" ]; then
		fail "$label: $lost; elided's log: $(grep -v 'no segment' "$tmp/elided-$label.log" | tail -n 8)"
	elif [ $full = yes ]; then
		ok "$label: every child stayed listed with its locks for 60 intervals of elided's (its /proc checks included)"
	else
		fail "$label: elided's history of the children never filled: $(for c in "${kids[@]}"; do history_points "$c"; done)"
	fi
	listed "$parent" >/dev/null && ok "$label: the parent is listed too" || fail "$label: the parent $parent is not listed"

	kill -TERM "$parent"
	wait "$parent" && ok "$label: the children stopped cleanly, their locks excluded" ||
		fail "$label: fork-workload exited $?: $(cat "$tmp/$label.err")"
	for child in "${kids[@]}"; do
		gone() { ! listed "$1" >/dev/null; }
		poll 60 gone "$child" && ok "$label: child $child forgotten after its exit" ||
			fail "$label: child $child still listed after its exit"
	done
	kill "$daemon"
	wait "$daemon" 2>/dev/null
	daemon=
}

run_case pidfd --no-bpf
if [ "$(id -u)" -eq 0 ] && [ -r /sys/kernel/btf/vmlinux ]; then
	run_case bpf
else
	note "SKIPPED PART: BPF discovery needs root and BTF"
fi

tl_finish elided-fork
