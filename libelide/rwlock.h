/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Rwlocks: what the entry points on the pinned page (fastpath.c) need of
 * rwlock.c, and the fast path's decision, which both inline.
 */
#ifndef ELIDE_RWLOCK_H
#define ELIDE_RWLOCK_H

#include "glibc-protocol.h"
#include "watch.h"

/* rwlock.c */
int rwlock_acquire_slow(pthread_rwlock_t *rw, enum elide_op op, enum mutex_wait how, clockid_t clock,
			const struct timespec *abstime, void *callsite) _hidden_;
int rwlock_acquire_watched(pthread_rwlock_t *rw, enum elide_op op, enum mutex_wait how, clockid_t clock,
			   const struct timespec *abstime, void *callsite) _hidden_;
int rwlock_unlock_maybe_elided(pthread_rwlock_t *rw) _hidden_;
int rwlock_unlock_watched(pthread_rwlock_t *rw) _hidden_;

static inline int rwlock_acquire_not_fast(pthread_rwlock_t *rw, enum elide_op op, enum mutex_wait how,
					  clockid_t clock, const struct timespec *abstime, void *callsite)
{
	if (elide.path == PATH_OBSERVE)
		return rwlock_acquire_watched(rw, op, how, clock, abstime, callsite);
	return rwlock_acquire_slow(rw, op, how, clock, abstime, callsite);
}

/* As for mutexes; "in use" includes other readers, whose count bounces the
 * lock's cache line between CPUs: exactly what read elision removes. */
static inline __attribute__((always_inline)) bool rwlock_takes_fast_path(pthread_rwlock_t *rw, bool write)
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
		prefetch_for_write(&rw->__data.__readers); /* glibc's atomic add comes next */
		return !rwlock_would_wait(rwlock_readers(rw), write);
	}
	/* Bursts: a lock not elided now, or this thread's skip after a
	 * throttled attempt (THROTTLED_SKIP). */
	slot = local_slot(rw, write);
	if (takes_burst(rw, write, slot))
		return true;
	if (path == PATH_TRACK_ALL) {
		prefetch_if_failing(rw, write, slot);
		return false;
	}
	prefetch_unless_eliding(rw, write, slot); /* as for mutexes: glibc's atomic add comes next */
	/* Inside an elided section a lock without a record of this side may
	 * be held elided on the other: the slow path looks (relocks). */
	return __atomic_load_n(rwlock_idx_ptr(rw, write), __ATOMIC_RELAXED) == 0 && !rwlock_in_use(rw) &&
	       !in_elided_section();
}

#endif
