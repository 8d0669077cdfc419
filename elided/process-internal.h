/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of the process table share, and nothing else includes:
 * process.c (the table, adoption, reaping), process-refresh.c (reading a
 * segment into the lock views), process-decisions.c (the decision pass
 * and what it writes), process-owner.c (owner checks).
 */
#ifndef ELIDED_PROCESS_INTERNAL_H
#define ELIDED_PROCESS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "elided.h"
#include "events.h"

/* The mode a process runs under: elidectl's override, else the config's. */
static inline enum policy_mode effective_process_mode(const struct tracked_process *p)
{
	return p->override != POLICY_MODE_UNSET ? p->override : p->decision.mode;
}

/* One interval's walk over a process's locks: history sums and decisions. */
struct pass {
	struct elided *d;
	struct tracked_process *p;
	enum policy_mode mode;
	struct history_point sum;
	unsigned locks_written;
	bool daemon_off;              /* a visited lock is off by the daemon's adaptation */
	bool marked_only;             /* visits only the locks marked written (marked_entry()) */
	/* Whose process it is, asked before the first write of the pass:
	 * 0 not yet, 1 the one we know, -1 another (or gone): no writes. */
	int owner;
};

/* process.c */
/* exe, comm, unit and slice from /proc and systemd, not from the segment. */
void read_identity(struct tracked_process *p);
/* The config's decision for p (rules may name its user); rule modes go stale. */
void decide(struct elided *d, struct tracked_process *p);

/* process-refresh.c */
/* Read p's segment and act on it: -ESRCH when the process is gone (the
 * caller reaps it), another -errno when the read failed. */
int refresh_process(struct elided *d, struct tracked_process *p);
void free_views(struct lock_view *views, size_t n);

/* process-decisions.c */
void pass_begin(struct pass *ps, struct elided *d, struct tracked_process *p);
/* One lock: its rates into the sums, its decision written when it changed. */
void pass_lock(struct pass *ps, struct lock_view *v);
/* After the walk: the history point (when `history`) and the control block. */
void pass_end(struct pass *ps, uint64_t t, bool history);
/* At the first read: runtime decisions an earlier daemon left in the segment. */
void restore_decisions(struct tracked_process *p, const struct seg_snapshot *snap);
/* An event about p, its fields filled in from p. */
struct elided_event process_event(const struct tracked_process *p, enum elided_event_kind kind);

/* process-owner.c */
/* 1 when p's owner changed (owner_changed() done), 0 when not, -ESRCH
 * when p is gone; fresh: asked of /proc/PID/status, not one stat. */
int check_owner(struct elided *d, struct tracked_process *p, bool fresh);
/* p now belongs to uid: runtime overrides and learned verdicts dropped. */
void owner_changed(struct elided *d, struct tracked_process *p, uid_t uid);

#endif
