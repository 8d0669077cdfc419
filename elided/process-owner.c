/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Whose process it is: the owner cached at adoption compared with /proc,
 * cheaply every few intervals and afresh before a D-Bus call reads or
 * steers it, and what a change of owner takes away (runtime overrides,
 * the former owner's learned verdicts).
 */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "dbus.h"
#include "elided.h"
#include "events.h"
#include "log.h"
#include "process-internal.h"

/* ---- owner ------------------------------------------------------------ */

/*
 * p's effective uid is no longer the one cached (a setuid exec keeps pid
 * and start time; a server drops privileges).  Runtime overrides were set
 * by, or for, the former owner: drop them, and since they are written into
 * the segment (where a restarted daemon would restore them), the next pass
 * rewrites the control block and every lock decision without them.
 */
void owner_changed(struct elided *d, struct tracked_process *p, uid_t uid)
{
	struct elided_event ev;
	uid_t old = p->uid;

	p->override = POLICY_MODE_UNSET;
	for (size_t i = 0; i < p->nlocks; i++)
		p->locks[i].override = POLICY_MODE_UNSET;
	p->lock_overrides = false;
	p->uid = uid;
	p->control_valid = false;
	decide(d, p); /* rules may name the user */
	/* What was learned is per uid: the former owner's verdicts leave the
	 * process (hints and the locks turned off by them), the new owner's
	 * come in.  check_learned() then asks the new hints alone, not the
	 * segment, and the pass writes what they say. */
	for (size_t i = 0; i < p->nlocks; i++) {
		struct lock_view *v = &p->locks[i];

		if (v->learned == VIEW_LEARNED_OFF)
			v->daemon_off = false;
		v->learned = VIEW_LEARNED_FOREIGN;
	}
	elided_learning_owner_changed(d, p);
	/* Logged within the unprivileged side's budget (elided_event): a
	 * program toggling its euid must not flood the journal. */
	ev = process_event(p, ELIDED_EVENT_OWNER_CHANGED);
	ev.priority = LOG_NOTICE;
	ev.source = "owner";
	ev.old_uid = old;
	ev.reason = "runtime overrides dropped";
	elided_event(d, &ev, "pid %d (%s) changed owner uid %u -> uid %u; runtime overrides dropped", (int)p->pid,
		     ev.exe, (unsigned)old, (unsigned)uid);
	elided_bus_emit_owner_changed(d, p, old);
}

/*
 * Compare p's owner now with the cached one.  fresh: the authoritative
 * answer, for a D-Bus call about to read or steer p: the effective uid from
 * /proc/PID/status, then the start time, read after it, so that the uid is
 * that of the process we track (a recycled pid has another start time).
 * /proc rather than a pidfd: BPF discovery keeps no pidfds, and a start
 * time read after the status answers the same question.
 * Not fresh (every interval): one stat of /proc/PID, owned by the
 * effective uid of a dumpable process and by root otherwise.  It can only
 * err towards root, so every difference is confirmed the fresh way and a
 * change to root (a setuid exec) is always seen at once; a change away
 * from root may wait for the periodic full check or the next D-Bus call,
 * except for a root process holding root's learned hints: its owner is
 * read the fresh way, for a drop to another user must take root's hints
 * away (and what its run teaches must be the new owner's) soon.
 * Returns 1 when the owner changed, 0 when not, -ESRCH when p is gone.
 */
int check_owner(struct elided *d, struct tracked_process *p, bool fresh)
{
	char path[32];
	struct stat st;
	uint64_t start;
	uid_t uid;
	int r;

	if (!fresh) {
		snprintf(path, sizeof(path), "/proc/%d", (int)p->pid);
		if (stat(path, &st) < 0)
			return errno == ENOENT ? -ESRCH : -errno;
		if (st.st_uid == p->uid && !(p->uid == 0 && p->nhints))
			return 0;
	}
	r = seg_proc_uid(NULL, p->pid, &uid);
	if (r < 0)
		return r;
	r = seg_proc_start_time(NULL, p->pid, &start);
	if (r < 0)
		return r;
	if (start != p->start_time)
		return -ESRCH;
	if (uid == p->uid)
		return 0;
	owner_changed(d, p, uid);
	return 1;
}

/* ---- owner, on request ------------------------------------------------ */

int elided_check_owner(struct elided *d, struct tracked_process *p)
{
	int r = check_owner(d, p, true);

	/* Push the decisions without the dropped overrides now: a daemon
	 * restarted before the next interval must not restore them. */
	if (r > 0)
		refresh_process(d, p);
	return r < 0 ? r : 0;
}
