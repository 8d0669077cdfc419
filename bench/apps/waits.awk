# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/apps/waits.awk: the waits of one process in a tracefs trace (the
# text of /sys/kernel/tracing/trace, with options/record-tgid, events
# sched:sched_switch, syscalls:sys_enter_futex and syscalls:sys_exit_futex),
# for run.sh --trace.  Portable awk (mawk, Debian's default, has no match()
# groups and no strtonum()).
#
#   awk -v tgid=PID -f waits.awk TRACE
#
# prints one line, "SLEEPS SLEEP_US SLEEP_MAX_US PREEMPT_MAX_US", of PID's
# threads:
#   SLEEPS          mutex waits: FUTEX_WAIT calls on a word whose value is
#                   2, as glibc's default mutexes and libelide's own sleep
#                   ("held, with waiters"; a call that finds the word
#                   changed returns at once, and counts); condition
#                   variables and rwlocks wait with FUTEX_WAIT_BITSET, and
#                   are not counted
#   SLEEP_US        their time in all, entry to return: the sleep and the
#                   wait for a CPU once woken
#   SLEEP_MAX_US    the longest of them: the longest single wait for a
#                   mutex in the kernel
#   PREEMPT_MAX_US  the longest time a thread spent preempted (switched out
#                   runnable) before it ran again: the scheduler's share of
#                   an operation's latency, whoever's lock it is
# Exit status 1 when the trace has no event of PID at all.

# hex("0x80") = 128; decimal strings pass through
function hex(s,   i, c, v) {
	if (substr(s, 1, 2) != "0x")
		return s + 0
	v = 0
	for (i = 3; i <= length(s); i++) {
		c = index("0123456789abcdef", tolower(substr(s, i, 1)))
		if (c == 0)
			break
		v = v * 16 + c - 1
	}
	return v
}

# field(text, name): the value of "name: V," or "name=V " in text
function field(text, name,   i, v) {
	i = index(text, name)
	if (i == 0)
		return ""
	v = substr(text, i + length(name))
	sub(/[ ,)].*$/, "", v)
	return v
}

BEGIN { tgid += 0; sleeps = 0; sleep_us = 0; sleep_max = 0; preempt_max = 0; seen = 0 }

/^#/ { next }

{
	# "COMM-TID (TGID) [CPU] FLAGS SECONDS: EVENT: ...": COMM may hold
	# spaces and dashes, so the header is read from its "(TGID)" on.
	at = index($0, ") [")
	if (at == 0)
		next
	head = substr($0, 1, at)
	open = 0
	for (i = at; i > 0; i--)
		if (substr(head, i, 1) == "(") { open = i; break }
	if (open == 0)
		next
	line_tgid = substr(head, open + 1, at - open - 1) + 0
	tid_text = substr(head, 1, open - 1)
	sub(/ +$/, "", tid_text)
	sub(/^.*-/, "", tid_text)
	tid = tid_text + 0
	rest = substr($0, at + 1)
	colon = index(rest, ": ")
	if (colon == 0)
		next
	n = split(substr(rest, 1, colon - 1), h, " ")
	ts = h[n] * 1e6
	event = substr(rest, colon + 2)

	if (substr(event, 1, 14) == "sched_switch: ") {
		# Back on a CPU: the end of a preemption of ours.
		next_pid = field(event, "next_pid=") + 0
		if (next_pid in preempted) {
			gap = ts - preempted[next_pid]
			if (gap > preempt_max)
				preempt_max = gap
			delete preempted[next_pid]
		}
		if (line_tgid != tgid)
			next
		seen = 1
		if (substr(field(event, "prev_state="), 1, 1) == "R")
			preempted[field(event, "prev_pid=") + 0] = ts
		next
	}
	if (line_tgid != tgid)
		next
	if (substr(event, 1, 10) == "sys_futex(") {
		seen = 1
		op = hex(field(event, "op: ")) % 128 # FUTEX_PRIVATE_FLAG off
		if (op == 0 && hex(field(event, "val: ")) == 2)
			asleep[tid] = ts
		next
	}
	if (substr(event, 1, 13) == "sys_futex -> ") {
		seen = 1
		if (tid in asleep) {
			d = ts - asleep[tid]
			sleeps++
			sleep_us += d
			if (d > sleep_max)
				sleep_max = d
			delete asleep[tid]
		}
	}
}

END {
	if (!seen)
		exit 1
	printf "%d %.0f %.0f %.0f\n", sleeps, sleep_us, sleep_max, preempt_max
}
