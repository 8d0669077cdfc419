/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Elision with RTM: the elided-section stack and the commit that the
 * unlock paths inline; the transactions themselves (begin, abort handling,
 * back-off, probes and bursts) are elision.c's.
 */
#ifndef ELIDE_ELISION_H
#define ELIDE_ELISION_H

#include <string.h>

#include "hotpath.h"

/* Remove `lock` from the elided set; true if it was there. */
static inline struct lock_rec *elided_pop(void *lock)
{
	unsigned d = self.depth;

	if (likely(d == 0))
		return NULL;
	if (likely(self.held[d - 1].lock == lock)) {
		self.depth = d - 1;
		return self.held[d - 1].rec;
	}
	/* Unlocked out of order: rare, search the rest. */
	for (unsigned i = d - 1; i-- > 0;) {
		if (self.held[i].lock == lock) {
			struct lock_rec *rec = self.held[i].rec;

			memmove(&self.held[i], &self.held[i + 1], (d - 1 - i) * sizeof(self.held[0]));
			self.depth = d - 1;
			return rec;
		}
	}
	return NULL;
}

static inline void elided_push(void *lock, struct lock_rec *rec)
{
	unsigned d = self.depth;

	if (unlikely(d >= ELIDE_MAX_NEST))
		_xabort(ELIDE_XABORT_DEPTH);
	self.held[d].lock = lock;
	self.held[d].rec = rec;
	self.depth = d + 1;
}

/* elision.c: decide for a tracked lock, and run its section elided when it
 * may (true: the transaction is open). */
bool tracked_acquire(void *lock, struct lock_rec *rec, enum elide_op op) _hidden_;

static inline void commit_elided(void *lock, struct lock_rec *rec)
{
	_xend();
	if (in_elided_section())
		return; /* a nested XEND commits nothing yet: count at the outermost */
	if (unlikely(self.probe_rec == rec)) {
		self.probe_rec = NULL;
		rec_probe_committed(rec);
	}
	if (unlikely(sample_now(local_of(lock, rec))))
		rec_note_commit_sample(rec);
}

#endif
