/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Mutexes: what the entry points on the pinned page (fastpath.c) and the
 * other files need of mutex.c, and the fast path's decision, which both
 * fastpath.c and mutex.c inline.
 */
#ifndef ELIDE_MUTEX_H
#define ELIDE_MUTEX_H

#include "glibc-protocol.h"
#include "watch.h"

struct wait_spec {
	enum mutex_wait how;
	clockid_t clock;
	const struct timespec *abstime;
};

/*
 * Adaptive mode, a backed-off default mutex whose words libelide takes: its
 * burst is the mutex's own skip count (glibc-abi.h), not this thread's.
 * The fast path sees it on the line it is about to write and takes the
 * lock with nothing in between; the holder counts it down.  A look at the
 * thread's own burst before the compare-and-swap cost the 2-thread counter
 * a tenth of its speed on this guest (bench/results/2026-12-07-history.md), a look at the
 * mutex's line nothing measurable.  Its acquisitions were counted when the
 * skip was granted, and all of them are skipped by whichever threads come:
 * the count stays exact without a write to the record per acquisition.
 */
static inline bool mutex_skip_applies(const void *lock, const struct lock_rec *rec)
{
	return rec->kind == LOCK_KIND_MUTEX && elide.path == PATH_WATCH && own_mutex_words(lock);
}

/* mutex.c */
int mutex_acquire_slow(pthread_mutex_t *m, const struct wait_spec *w, void *callsite) _hidden_;
int mutex_acquire_watched(pthread_mutex_t *m, const struct wait_spec *w, void *callsite) _hidden_;
int mutex_lock_skipping_own(pthread_mutex_t *m) _hidden_;
int mutex_unlock_maybe_elided(pthread_mutex_t *m) _hidden_;
int mutex_unlock_watched(pthread_mutex_t *m) _hidden_;

/*
 * The fast path of every acquisition: a mutex without a record that is free
 * right now goes straight to glibc, and so does one backed off in the
 * middle of this thread's span.  One look at the lock's cache line (the
 * index and the lock word share it) decides; the check is racy on purpose:
 * a lock that becomes held a moment later was simply not seen contended.
 */
static inline __attribute__((always_inline)) bool mutex_takes_fast_path(const pthread_mutex_t *m)
{
	uint8_t path = elide.path;
	struct lock_local *slot;

	if (likely(path == PATH_OFF)) {
		poll_control_off();
		return true;
	}
	if (path == PATH_OBSERVE) {
		if (watch_tick())
			return false;
		prefetch_for_write(m); /* as below: glibc's CAS comes next */
		return mutex_word(m) == 0;
	}
	/* Bursts: a lock not elided now, or this thread's skip after a
	 * throttled attempt (THROTTLED_SKIP).  The slot is computed once,
	 * for the burst and the prefetch. */
	slot = local_slot(m, false);
	if (takes_burst(m, false, slot))
		return true;
	if (path == PATH_TRACK_ALL) {
		prefetch_if_failing(m, false, slot);
		return false;
	}
	/* glibc writes this line next: ask for it exclusive now, or the read
	 * below fetches it shared and glibc's CAS pays a second transfer. */
	prefetch_unless_eliding(m, false, slot);
	return (glibc_mutex_idx_load(m) | mutex_word(m)) == 0;
}

static inline int mutex_acquire_not_fast(pthread_mutex_t *m, const struct wait_spec *w, void *callsite)
{
	if (elide.path == PATH_OBSERVE)
		return mutex_acquire_watched(m, w, callsite);
	return mutex_acquire_slow(m, w, callsite);
}

/* fastpath.c: pthread_mutex_lock() of each path (elide.mutex_lock). */
int mutex_lock_off(pthread_mutex_t *m, void *callsite) _hidden_;
int (*mutex_lock_of_path(uint8_t path, bool for_good))(pthread_mutex_t *, void *) _hidden_;

#endif
