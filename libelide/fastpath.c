/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pinned page: the lock and unlock entry points every program runs,
 * pthread_mutex_lock() and its function for each path,
 * pthread_mutex_unlock(), pthread_rwlock_rdlock(), pthread_rwlock_wrlock()
 * and pthread_rwlock_unlock().  They share one translation unit and the
 * section .text.elide_hot, which they alone fill, in the order of this
 * file (no_reorder): the order the compiler gave them when elide.c held
 * every lock path, and in which bench/results/2026-12-07-history.md measured them.
 * Everything they inline comes from headers (hotpath.h, glibc-protocol.h,
 * watch.h, mutex.h, rwlock.h); their slow paths are tail calls into
 * mutex.c and rwlock.c.
 */
#include "mutex.h"
#include "rwlock.h"

/* The lock paths' per-thread state (hotpath.h). */
__thread struct elide_thread self __attribute__((aligned(16)));

/* The lock and unlock paths every program runs, together and at the same
 * place in a page in every build (bench/results/2026-12-07-history.md); in the order of this
 * file, whatever else the file holds, where the compiler has no_reorder
 * (GCC). */
#if __has_attribute(no_reorder)
#define _hot_path_ __attribute__((section(".text.elide_hot"), aligned(64), no_reorder))
#else
#define _hot_path_ __attribute__((section(".text.elide_hot"), aligned(64)))
#endif
__asm__(".pushsection .text.elide_hot,\"ax\",@progbits\n\t.balign 4096\n\t.popsection");

_public_ _hot_path_ int pthread_mutex_lock(pthread_mutex_t *m)
{
	int (*lock)(pthread_mutex_t *, void *) = __atomic_load_n(&elide.mutex_lock, __ATOMIC_RELAXED);

	return lock(m, __builtin_return_address(0));
}

_public_ _hot_path_ int pthread_mutex_unlock(pthread_mutex_t *m)
{
	/* Nothing elided by this thread (every non-RTM case, and every real
	 * hold of a thread outside elided sections), or held for real.  The
	 * thread's own depth first: reading the lock word would fetch a line
	 * that a waiter took away, and glibc's atomic then pays a second
	 * transfer. */
	if (unlikely(self.watch_lock == m))
		return mutex_unlock_watched(m);
	if (likely(!in_elided_section()) || likely(mutex_word(m) != 0))
		return real_mutex_unlock(m);
	return mutex_unlock_maybe_elided(m);
}

_public_ _hot_path_ int pthread_rwlock_unlock(pthread_rwlock_t *rw)
{
	/* A reader count cannot tell our elided read from a real one: only the
	 * thread's own elided set can. */
	if (unlikely(self.watch_lock == rw))
		return rwlock_unlock_watched(rw);
	if (likely(!in_elided_section()))
		return real_rwlock_unlock(rw);
	return rwlock_unlock_maybe_elided(rw);
}

/*
 * pthread_mutex_lock() per fast path.  The entry jumps to the one of the
 * current path through elide.mutex_lock (one predictable jump), and each
 * lays out its common case as one straight line: written as a single
 * function, the adaptive path's uncontended lock took six taken branches
 * over seven cache lines, and the uncontended 1-thread benchmarks moved by
 * 15% with nothing but where the code landed.  callsite is the caller's
 * return address, for the slow paths.
 */
_hot_path_ int mutex_lock_off(pthread_mutex_t *m, void *callsite)
{
	(void)callsite;
	poll_control_off();
	return real_mutex_lock(m);
}

/*
 * Watching a default mutex: its compare-and-swap is the look.  A free lock
 * then costs one atomic instruction, as without libelide, and only a
 * failed one (the lock was held) goes to the out-of-line path; looking at
 * the word first would add a load that, on a contended line, waits for
 * the line once more before glibc's CAS fetches it for writing.
 */
static _hot_path_ int mutex_lock_observe(pthread_mutex_t *m, void *callsite)
{
	static const struct wait_spec forever = { .how = WAIT_FOREVER };

	if (unlikely(watch_tick()))
		return mutex_acquire_watched(m, &forever, callsite);
	if (likely(own_mutex_words(m))) {
		if (unlikely(!mutex_words_take_word(m)))
			return mutex_acquire_watched(m, &forever, callsite);
		return mutex_words_note_holder(m);
	}
	prefetch_for_write(m); /* glibc's CAS comes next */
	if (mutex_word(m) == 0)
		return real.mutex_lock(m);
	return mutex_acquire_watched(m, &forever, callsite);
}

/* Locks with records (mode=on), and adaptive mode's mutexes whose words
 * glibc takes. */
static int mutex_lock_tracking(pthread_mutex_t *m, void *callsite)
{
	static const struct wait_spec forever = { .how = WAIT_FOREVER };

	if (likely(mutex_takes_fast_path(m)))
		return real_mutex_lock(m);
	return mutex_acquire_not_fast(m, &forever, callsite);
}

/*
 * Adaptive mode, a default mutex whose words libelide takes: its own line
 * decides everything, and nothing of the thread's is looked at before the
 * compare-and-swap.  A skip left (mutex_skipping()): take it.  No record:
 * its compare-and-swap is the look and takes it as glibc would.  Otherwise
 * (tracked and not skipping: eliding, watched, or its skip just ran out;
 * or the CAS found it held) the slow path.  Its
 * bursts are the mutex's skips, never the thread's (grant_burst()), so the
 * thread's slots have nothing to say here.
 */
static _hot_path_ int mutex_lock_adaptive(pthread_mutex_t *m, void *callsite)
{
	static const struct wait_spec forever = { .how = WAIT_FOREVER };

	if (likely(own_mutex_words(m))) {
		/* Field by field, each load as wide as the store that wrote
		 * it: one load of bytes 16-23 waited for the skip's 2-byte
		 * store of the last acquisition to leave the store buffer
		 * (the counter at 2 threads fell from 0.92 to 0.73x plain). */
		if (unlikely(glibc_mutex_skip_load(m) != 0))
			return mutex_lock_skipping_own(m);
		if (unlikely(glibc_mutex_idx_load(m) != 0))
			return mutex_acquire_not_fast(m, &forever, callsite);
		if (unlikely(!mutex_words_take_word(m)))
			return mutex_acquire_not_fast(m, &forever, callsite);
		return mutex_words_note_holder(m);
	}
	return mutex_lock_tracking(m, callsite);
}

_public_ _hot_path_ int pthread_rwlock_wrlock(pthread_rwlock_t *rw)
{
	/* Adaptive, a write side without a record: as in rdlock below. */
	if (elide.path == PATH_WATCH && likely(self.hot_key != lock_key(rw, true)) &&
	    likely(__atomic_load_n(rwlock_idx_ptr(rw, true), __ATOMIC_RELAXED) == 0)) {
		prefetch_for_write(&rw->__data.__readers);
		if (likely(!rwlock_in_use(rw) && !in_elided_section()))
			return real.rwlock_wrlock(rw);
		goto slow;
	}
	if (likely(rwlock_takes_fast_path(rw, true)))
		return real.rwlock_wrlock(rw);
slow:
	return rwlock_acquire_not_fast(rw, OP_WRLOCK, WAIT_FOREVER, 0, NULL, __builtin_return_address(0));
}

/*
 * Watching (the default without RTM), one look at __readers decides both
 * whether this reader would wait for a writer (then the watched path
 * times it) and whether glibc's fetch-add may be done here: two looks and
 * the branches between them cost 6% of an uncontended rdlock and unlock.
 */
_public_ _hot_path_ int pthread_rwlock_rdlock(pthread_rwlock_t *rw)
{
	uint8_t path = elide.path;
	unsigned r;

	if (likely(path == PATH_OBSERVE)) {
		if (unlikely(watch_tick()))
			goto watched;
		prefetch_for_write(&rw->__data.__readers); /* the add comes next */
		r = rwlock_readers(rw);
		if (unlikely(rwlock_would_wait(r, false)))
			goto watched;
		goto add;
	}
	/*
	 * Adaptive, a lock without a record (the read side's index is 0): no
	 * burst and nothing to elide, and the look is the one above.  The
	 * generic path below looked at the thread's slot twice and at
	 * __readers twice: 22 instructions more than plain glibc per rdlock
	 * and unlock (cachegrind); the 1-thread rwlock-read row went from
	 * 0.97 to 1.03 of plain (bench/RESULTS.md, "rwlock read side").
	 * The index is read before the line is asked for exclusive, as a
	 * default mutex's are: a tracked lock may be elided, and a PREFETCHW
	 * would abort the transactions reading it.  Not for this thread's hot
	 * lock, though (a contended one it takes in bursts): there that read
	 * fetched the line shared before glibc's add wanted it exclusive,
	 * and 2 and 4 threads lost 5-10%.
	 */
	if (likely(path == PATH_WATCH) && likely(self.hot_key != lock_key(rw, false)) &&
	    likely(__atomic_load_n(rwlock_idx_ptr(rw, false), __ATOMIC_RELAXED) == 0)) {
		prefetch_for_write(&rw->__data.__readers);
		r = rwlock_readers(rw);
		/* In use (rwlock_in_use()): contended, maybe.  Inside an elided
		 * section: the slow path sees a relock of a lock held elided,
		 * which glibc refuses (EDEADLK) and the word does not show. */
		if (unlikely(r & ~(RWLOCK_WRPHASE | RWLOCK_RWAITING)) || unlikely(in_elided_section()))
			goto slow;
		goto add;
	}
	if (likely(rwlock_takes_fast_path(rw, false)))
		return real_rwlock_rdlock(rw);
slow:
	return rwlock_acquire_not_fast(rw, OP_RDLOCK, WAIT_FOREVER, 0, NULL, __builtin_return_address(0));
watched:
	return rwlock_acquire_watched(rw, OP_RDLOCK, WAIT_FOREVER, 0, NULL, __builtin_return_address(0));
add:
	if (unlikely(!own_rwlock_read() || !rwlock_read_may_add(rw, r)))
		return real.rwlock_rdlock(rw);
	return rwlock_read_add(rw);
}

/*
 * The pass-through for good (ELIDE=mode=off, or nothing here can elide or
 * watch): no decision of elided's can change what it does, so it does not
 * look for one either.  Last on the page, so that it moves nothing above.
 */
static _hot_path_ int mutex_lock_pass(pthread_mutex_t *m, void *callsite)
{
	(void)callsite;
	return real_mutex_lock(m);
}

/* ...where glibc takes every mutex (ELIDE=mode=off): one jump to it. */
static _hot_path_ int mutex_lock_glibc(pthread_mutex_t *m, void *callsite)
{
	(void)callsite;
	return real.mutex_lock(m);
}

/* The path's pthread_mutex_lock(), for set_path() (elide.c), which sets
 * own_mutex_words first; for_good: PATH_OFF that no decision can end. */
int (*mutex_lock_of_path(uint8_t path, bool for_good))(pthread_mutex_t *, void *)
{
	if (path == PATH_OFF && for_good)
		return __atomic_load_n(&elide.own_mutex_words, __ATOMIC_RELAXED) ? mutex_lock_pass : mutex_lock_glibc;
	switch (path) {
	case PATH_WATCH:
		return mutex_lock_adaptive;
	case PATH_TRACK_ALL:
		return mutex_lock_tracking;
	case PATH_OBSERVE:
		return mutex_lock_observe;
	}
	return mutex_lock_off;
}
