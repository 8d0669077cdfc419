/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Rwlocks: the slow paths of the acquisitions (tracked, watched), the
 * timed ones, and the other rwlock interposers.  pthread_rwlock_rdlock(),
 * pthread_rwlock_wrlock() and pthread_rwlock_unlock() themselves are on
 * the pinned page (fastpath.c); the read side of a default rwlock is
 * glibc-protocol.h's.
 */
#include "elision.h"
#include "rwlock.h"

static inline bool rwlock_held_by_other(const pthread_rwlock_t *rw, bool write)
{
	return rwlock_would_wait(rwlock_readers(rw), write) &&
	       (pid_t)__atomic_load_n(&rw->__data.__cur_writer, __ATOMIC_RELAXED) != thread_tid();
}

struct rw_call {
	enum elide_op op;
	enum mutex_wait how;
	clockid_t clock;
	const struct timespec *abstime;
};

static int real_rwlock_acquire(pthread_rwlock_t *rw, const struct rw_call *c)
{
	bool rd = c->op == OP_RDLOCK;

	switch (c->how) {
	case WAIT_TIMED:
		if (rd) {
			LAZY(rwlock_timedrdlock, "pthread_rwlock_timedrdlock");
			return real.rwlock_timedrdlock(rw, c->abstime);
		}
		LAZY(rwlock_timedwrlock, "pthread_rwlock_timedwrlock");
		return real.rwlock_timedwrlock(rw, c->abstime);
	case WAIT_CLOCK:
		if (rd) {
			LAZY(rwlock_clockrdlock, "pthread_rwlock_clockrdlock");
			return real.rwlock_clockrdlock(rw, c->clock, c->abstime);
		}
		LAZY(rwlock_clockwrlock, "pthread_rwlock_clockwrlock");
		return real.rwlock_clockwrlock(rw, c->clock, c->abstime);
	case WAIT_FOREVER:
		break;
	}
	return rd ? real_rwlock_rdlock(rw) : real.rwlock_wrlock(rw);
}

/*
 * Would this acquisition nest on an elided hold of the same rwlock that
 * glibc refuses?  A writer that locks again (for reading or writing) gets
 * EDEADLK from glibc, and so does a reader asking to write (a deadlock
 * there).  Inside the transaction nothing in the lock says we hold it, so
 * only the thread's elided set can tell.
 */
static bool rwlock_relock_refused(const pthread_rwlock_t *rw, enum elide_op op)
{
	for (unsigned i = 0; i < self.depth; i++) {
		if (self.held[i].lock != rw)
			continue;
		if (op == OP_WRLOCK || self.held[i].rec->kind == LOCK_KIND_RWLOCK_WRITE)
			return true;
	}
	return false;
}

__attribute__((noinline)) int rwlock_acquire_slow(pthread_rwlock_t *rw, enum elide_op op, enum mutex_wait how,
						   clockid_t clock, const struct timespec *abstime,
						   void *callsite)
{
	const struct rw_call call = { .op = op, .how = how, .clock = clock, .abstime = abstime };
	const struct rw_call *c = &call;
	uint16_t *idx_ptr = rwlock_idx_ptr(rw, c->op == OP_WRLOCK);
	uint16_t idx = __atomic_load_n(idx_ptr, __ATOMIC_RELAXED);
	struct lock_rec *rec;

	/* glibc checks a deadline's clock and nanoseconds even for a free lock. */
	if (how != WAIT_FOREVER && (!wait_clock_valid(how == WAIT_CLOCK ? clock : CLOCK_REALTIME) ||
				    !abstime_valid(abstime)))
		return real_rwlock_acquire(rw, c);
	if (in_elided_section() && rwlock_relock_refused(rw, op))
		/* Redo the section with real locks, where glibc answers EDEADLK. */
		_xabort(ELIDE_XABORT_RELOCK);
	if (!rwlock_is_elidable(rw))
		return real_rwlock_acquire(rw, c);
	if (idx == 0) {
		if (in_elided_section())
			return real_rwlock_acquire(rw, c);
		rec = registry_attach(rw, idx_ptr, c->op == OP_WRLOCK ? LOCK_KIND_RWLOCK_WRITE : LOCK_KIND_RWLOCK_READ,
				      callsite);
		if (elide.opts.mode != ELIDE_MODE_ON)
			rec_note_contended(rec);
	} else {
		rec = rec_of_idx(idx);
	}
	if (tracked_acquire(rw, rec, c->op))
		return 0;
	if (rwlock_held_by_other(rw, c->op == OP_WRLOCK)) {
		/* A real wait: timed, as for mutexes. */
		bool counted = atomic_load_explicit(&rec->gate, memory_order_relaxed) == GATE_WATCH;
		uint64_t start = watch_now(), got;
		int r;

		if (counted)
			rec_note_contended(rec);
		r = real_rwlock_acquire(rw, c);
		got = watch_now();
		watch_note(rw, rec, r, true, !counted, got - start, false, got);
		return r;
	}
	if (atomic_load_explicit(&rec->gate, memory_order_relaxed) == GATE_WATCH && rwlock_in_use(rw))
		rec_note_contended(rec);
	return real_rwlock_acquire(rw, c);
}

/* PATH_OBSERVE, as mutex_acquire_watched(). */
__attribute__((noinline)) int rwlock_acquire_watched(pthread_rwlock_t *rw, enum elide_op op, enum mutex_wait how,
						      clockid_t clock, const struct timespec *abstime,
						      void *callsite)
{
	const struct rw_call c = { .op = op, .how = how, .clock = clock, .abstime = abstime };
	bool sampled = watch_sampled(), write = op == OP_WRLOCK, held;
	uint16_t *idx_ptr = rwlock_idx_ptr(rw, write);
	uint16_t idx = __atomic_load_n(idx_ptr, __ATOMIC_RELAXED);
	struct lock_rec *rec;
	uint64_t start = 0, got;
	int r;

	if (how != WAIT_FOREVER && (!wait_clock_valid(how == WAIT_CLOCK ? clock : CLOCK_REALTIME) ||
				    !abstime_valid(abstime)))
		return real_rwlock_acquire(rw, &c);
	if (!rwlock_is_elidable(rw))
		return real_rwlock_acquire(rw, &c);
	held = rwlock_held_by_other(rw, write);
	if (!held && (!sampled || idx == 0))
		return real_rwlock_acquire(rw, &c);
	if (idx != 0)
		rec = rec_of_idx(idx);
	else if (!in_elided_section())
		rec = registry_attach(rw, idx_ptr, write ? LOCK_KIND_RWLOCK_WRITE : LOCK_KIND_RWLOCK_READ, callsite);
	else
		return real_rwlock_acquire(rw, &c);
	if (held)
		start = watch_now();
	r = real_rwlock_acquire(rw, &c);
	got = watch_now();
	watch_note(rw, rec, r, held, held, held ? got - start : 0, sampled, got);
	return r;
}

_public_ int pthread_rwlock_timedrdlock(pthread_rwlock_t *rw, const struct timespec *abstime)
{
	if (likely(rwlock_takes_fast_path(rw, false))) {
		LAZY(rwlock_timedrdlock, "pthread_rwlock_timedrdlock");
		return real.rwlock_timedrdlock(rw, abstime);
	}
	return rwlock_acquire_not_fast(rw, OP_RDLOCK, WAIT_TIMED, 0, abstime, __builtin_return_address(0));
}

_public_ int pthread_rwlock_clockrdlock(pthread_rwlock_t *rw, clockid_t clock, const struct timespec *abstime)
{
	if (likely(rwlock_takes_fast_path(rw, false))) {
		LAZY(rwlock_clockrdlock, "pthread_rwlock_clockrdlock");
		return real.rwlock_clockrdlock(rw, clock, abstime);
	}
	return rwlock_acquire_not_fast(rw, OP_RDLOCK, WAIT_CLOCK, clock, abstime, __builtin_return_address(0));
}

_public_ int pthread_rwlock_timedwrlock(pthread_rwlock_t *rw, const struct timespec *abstime)
{
	if (likely(rwlock_takes_fast_path(rw, true))) {
		LAZY(rwlock_timedwrlock, "pthread_rwlock_timedwrlock");
		return real.rwlock_timedwrlock(rw, abstime);
	}
	return rwlock_acquire_not_fast(rw, OP_WRLOCK, WAIT_TIMED, 0, abstime, __builtin_return_address(0));
}

_public_ int pthread_rwlock_clockwrlock(pthread_rwlock_t *rw, clockid_t clock, const struct timespec *abstime)
{
	if (likely(rwlock_takes_fast_path(rw, true))) {
		LAZY(rwlock_clockwrlock, "pthread_rwlock_clockwrlock");
		return real.rwlock_clockwrlock(rw, clock, abstime);
	}
	return rwlock_acquire_not_fast(rw, OP_WRLOCK, WAIT_CLOCK, clock, abstime, __builtin_return_address(0));
}

_public_ int pthread_rwlock_tryrdlock(pthread_rwlock_t *rw)
{
	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_TRYLOCK);
	return real.rwlock_tryrdlock(rw);
}

_public_ int pthread_rwlock_trywrlock(pthread_rwlock_t *rw)
{
	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_TRYLOCK);
	return real.rwlock_trywrlock(rw);
}

__attribute__((noinline)) int rwlock_unlock_maybe_elided(pthread_rwlock_t *rw)
{
	struct lock_rec *rec = elided_pop(rw);

	if (!rec)
		return real_rwlock_unlock(rw);
	commit_elided(rw, rec);
	return 0;
}

__attribute__((noinline)) int rwlock_unlock_watched(pthread_rwlock_t *rw)
{
	uint64_t hold_end = watch_hold_end();
	int r = in_elided_section() ? rwlock_unlock_maybe_elided(rw) : real_rwlock_unlock(rw);

	watch_flush(r == 0 ? hold_end : 0);
	return r;
}

_public_ int pthread_rwlock_init(pthread_rwlock_t *rw, const pthread_rwlockattr_t *attr)
{
	return real.rwlock_init(rw, attr);
}

_public_ int pthread_rwlock_destroy(pthread_rwlock_t *rw)
{
	int r;

	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_DESTROY);
	r = real.rwlock_destroy(rw);
	if (r == 0 && elide.recs) {
		registry_detach(rwlock_idx_ptr(rw, false));
		registry_detach(rwlock_idx_ptr(rw, true));
	}
	return r;
}
