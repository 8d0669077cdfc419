/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Mutexes: the slow paths of pthread_mutex_lock() (tracked, watched), the
 * skip counts of backed-off default mutexes, and the other mutex
 * interposers.  pthread_mutex_lock() and pthread_mutex_unlock() themselves
 * are on the pinned page (fastpath.c); the default mutex's words are
 * glibc-protocol.h's.
 */
#include <errno.h>

#include "elision.h"
#include "log.h"
#include "mutex.h"

static inline bool mutex_skipping(const pthread_mutex_t *m)
{
	return own_mutex_words(m) && glibc_mutex_skip_load(m) != 0;
}

static __attribute__((noinline)) void mutex_skip_missed(pthread_mutex_t *m)
{
	uint16_t idx = glibc_mutex_idx_load(m);
	struct lock_rec *rec;

	/* Another thread used the last skip between the look and the lock:
	 * this acquisition was not counted in advance. */
	if (idx == 0 || !elide.opts.stats)
		return;
	rec = rec_of_idx(idx);
	rec_count(rec, STAT_ACQUIRED, 1);
	if (atomic_load_explicit(&rec->gate, memory_order_relaxed) > 0)
		rec_count(rec, STAT_SKIPPED, 1);
}

/*
 * The length of a mutex's next skip, by the holder: 64 acquisitions, twice
 * the last one's if that ran out within BURST_QUICK, the same if within four
 * times that, else 64 again.  Timed per lock, not per thread: the threads
 * take turns granting a mutex's skips, so a thread's own gaps would be
 * several skips long.  The middle band keeps a lock whose longest skip
 * takes about BURST_QUICK from falling back to 64 every other time.
 */
static uint32_t mutex_skip_length(struct lock_rec *rec)
{
	uint32_t now = (uint32_t)(tsc_read() >> BURST_TSC_SHIFT);
	uint32_t since = now - atomic_load_explicit(&rec->skip_stamp, memory_order_relaxed);
	uint8_t shift = atomic_load_explicit(&rec->skip_shift, memory_order_relaxed);

	/* Relaxed atomics: the overflow record is shared by mutexes that
	 * different threads hold at once (a race on it only misjudges a length). */
	atomic_store_explicit(&rec->skip_stamp, now, memory_order_relaxed);
	if (shift < BURST_MIN_SHIFT || now == 0 || since >= 4 * BURST_QUICK)
		shift = BURST_MIN_SHIFT;
	else if (since < BURST_QUICK && shift < BURST_MUTEX_MAX_SHIFT)
		shift++;
	atomic_store_explicit(&rec->skip_shift, shift, memory_order_relaxed);
	return 1u << shift;
}

/*
 * The next skip of a mutex not elided now, by its holder (`used`: this
 * acquisition itself, when it is not counted yet): 0 when none may start.
 * Backed off, a lock probes once per span of `gate` acquisitions, like a
 * thread's span of its own acquisitions (tracked_acquire()) but kept for
 * the lock: the skips use the span up to its last acquisition, which then
 * goes to the slow path and probes (whichever thread comes).
 */
static uint32_t mutex_skip_grant(struct lock_rec *rec, int32_t gate, uint32_t used)
{
	uint32_t left, n;

	if (gate == GATE_NEVER)
		return mutex_skip_length(rec);
	if (gate <= 0)
		return 0; /* eliding again, or watched for contention: the slow path's */
	left = atomic_load_explicit(&rec->skip_span, memory_order_relaxed);
	if (left == 0 || left > (uint32_t)gate)
		left = (uint32_t)gate; /* a new span (or a shorter one after commits) */
	left = left > used ? left - used : 1;
	n = left > 1 ? mutex_skip_length(rec) : 0;
	if (n > left - 1)
		n = left - 1;
	atomic_store_explicit(&rec->skip_span, left - n, memory_order_relaxed);
	return n;
}

/* Counted when granted: the skip and (used) the acquisition granting it. */
static void mutex_skip_count(struct lock_rec *rec, int32_t gate, uint64_t count)
{
	if (!elide.opts.stats || count == 0)
		return;
	rec_count(rec, STAT_ACQUIRED, count);
	if (gate > 0)
		rec_count(rec, STAT_SKIPPED, count);
}

/* The slow path took the mutex (r = 0) or gave up: the skip grant_burst()
 * asked for starts now, unless another thread's is still running.
 * Counted here, under the lock. */
static __attribute__((noinline)) void mutex_skip_settle(pthread_mutex_t *m, int r)
{
	struct lock_rec *rec = self.skip_grant;
	int32_t gate = atomic_load_explicit(&rec->gate, memory_order_relaxed);
	uint32_t n = 0;

	self.skip_grant = NULL;
	if (r != 0)
		return; /* not acquired (timed out): nothing to count or skip */
	if (glibc_mutex_skip_load(m) == 0) {
		n = mutex_skip_grant(rec, gate, 1);
		glibc_mutex_skip_store(m, (uint16_t)n);
	}
	mutex_skip_count(rec, gate, 1 + n);
}

/*
 * The holder used a mutex's last skip: the next one starts here, under the
 * lock, when nothing waits for the slow path: the lock is still backed off
 * (or off) and its span not used up (else its probe is due), no decision
 * from elided is pending (applying one may create a file: not inside the
 * program's critical section) and this is no elided section (a shared
 * write would join the transaction).  Otherwise the skip stays 0 and the
 * next acquisition takes the slow path.  Without this, every thread that
 * came while the count was 0 went there, and the ones that then found the
 * lock held slept on its futex.
 */
static __attribute__((noinline)) void mutex_skip_renew(pthread_mutex_t *m)
{
	uint16_t idx = glibc_mutex_idx_load(m);
	struct lock_rec *rec;
	int32_t gate;
	uint32_t n;

	if (idx == 0 || in_elided_section() || elide.path != PATH_WATCH ||
	    __atomic_load_n(&elide.seg_control->generation, __ATOMIC_ACQUIRE) != elide.control_seen)
		return;
	rec = rec_of_idx(idx);
	gate = atomic_load_explicit(&rec->gate, memory_order_relaxed);
	n = mutex_skip_grant(rec, gate, 0);
	glibc_mutex_skip_store(m, (uint16_t)n);
	mutex_skip_count(rec, gate, n);
}

/* The holder of a skipping mutex: one of its acquisitions used. */
static inline void mutex_skip_use(pthread_mutex_t *m)
{
	uint16_t n = glibc_mutex_skip_load(m);

	if (likely(n > 1)) {
		glibc_mutex_skip_store(m, n - 1);
	} else if (n == 1) {
		glibc_mutex_skip_store(m, 0);
		mutex_skip_renew(m);
	} else {
		mutex_skip_missed(m);
	}
}

static int real_mutex_acquire(pthread_mutex_t *m, const struct wait_spec *w)
{
	switch (w->how) {
	case WAIT_TIMED:
		LAZY(mutex_timedlock, "pthread_mutex_timedlock");
		return real.mutex_timedlock(m, w->abstime);
	case WAIT_CLOCK:
		LAZY(mutex_clocklock, "pthread_mutex_clocklock");
		return real.mutex_clocklock(m, w->clock, w->abstime);
	case WAIT_FOREVER:
		break;
	}
	return real_mutex_lock(m);
}

/* The lock's record if this acquisition may use it, else NULL (straight to
 * glibc).  Creates one on a contended lock that has none. */
static inline struct lock_rec *mutex_tracking_rec(pthread_mutex_t *m, void *callsite, bool note_contended)
{
	uint16_t idx = __atomic_load_n(mutex_idx_ptr(m), __ATOMIC_RELAXED);
	enum mutex_class class = mutex_class(m);
	struct lock_rec *rec;

	if (idx == 0) {
		/* Within an elided section creating a record would write shared
		 * memory inside the transaction: this acquisition goes through. */
		if (class != MUTEX_ELIDABLE || in_elided_section())
			return NULL;
		rec = registry_attach(m, mutex_idx_ptr(m), LOCK_KIND_MUTEX, callsite);
		if (note_contended && elide.opts.mode != ELIDE_MODE_ON)
			rec_note_contended(rec);
		return rec;
	}
	rec = rec_of_idx(idx);
	if (class == MUTEX_ELIDABLE)
		return rec;
	/* Only a record of its own, made when the program named the lock,
	 * may track a lock of another type: never the shared overflow. */
	if (rec == &elide.recs[REC_OVERFLOW])
		return NULL;
	if (class == MUTEX_UNELIDABLE && !rec->hard_never)
		return NULL;
	return rec;
}

/*
 * The slow path: the mutex has a record, or it was held when we looked, or
 * mode=on tracks every lock.  Only contended (or annotated) locks get here
 * in adaptive mode, so single-threaded use never pays for it.
 */
__attribute__((noinline)) int mutex_acquire_slow(pthread_mutex_t *m, const struct wait_spec *w,
						  void *callsite)
{
	struct lock_rec *rec;
	int r;

	/* glibc rejects a bad clock before looking at the lock. */
	if (w->how == WAIT_CLOCK && !wait_clock_valid(w->clock))
		return real_mutex_acquire(m, w);
	rec = mutex_tracking_rec(m, callsite, true);
	if (!rec)
		return real_mutex_acquire(m, w);
	if (tracked_acquire(m, rec, OP_MUTEX))
		return 0;
	if (mutex_word(m) != 0) {
		/* A real wait: timed, as in watch mode.  While watching for
		 * contention the gate counted it already. */
		bool counted = atomic_load_explicit(&rec->gate, memory_order_relaxed) == GATE_WATCH;
		uint64_t start = watch_now(), got;

		if (counted)
			rec_note_contended(rec);
		r = real_mutex_acquire(m, w);
		got = watch_now();
		watch_note(m, rec, r, true, !counted, got - start, false, got);
	} else {
		r = real_mutex_acquire(m, w);
	}
	if (self.skip_grant)
		mutex_skip_settle(m, r);
	return r;
}

/* A thread that holds the mutex itself is not waiting for another (a
 * recursive relock; EDEADLK). */
static inline bool mutex_held_by_other(const pthread_mutex_t *m)
{
	return mutex_word(m) != 0 && __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED) != thread_tid();
}

/*
 * PATH_OBSERVE: the mutex was held when the fast path looked (or its CAS
 * failed), or this is the thread's sampled acquisition.  A held lock gets
 * a record (as a contended lock does in adaptive mode) and its wait is
 * timed; a sampled acquisition of a lock with a record is counted and its
 * hold timed.
 */
__attribute__((noinline)) int mutex_acquire_watched(pthread_mutex_t *m, const struct wait_spec *w,
						     void *callsite)
{
	bool sampled = watch_sampled();
	struct lock_rec *rec;
	uint64_t start = 0, got;
	bool held;
	int r;

	if (w->how == WAIT_CLOCK && !wait_clock_valid(w->clock))
		return real_mutex_acquire(m, w);
	held = mutex_held_by_other(m);
	if (!held && (!sampled || __atomic_load_n(mutex_idx_ptr(m), __ATOMIC_RELAXED) == 0))
		return real_mutex_acquire(m, w);
	rec = mutex_tracking_rec(m, callsite, false);
	if (!rec)
		return real_mutex_acquire(m, w);
	if (held)
		start = watch_now();
	if (held && w->how == WAIT_FOREVER && own_mutex_words(m)) {
		/* Held by another: straight to the wait, no second CAS. */
		r = mutex_words_wait(m);
	} else {
		r = real_mutex_acquire(m, w);
	}
	got = watch_now();
	watch_note(m, rec, r, held, held, held ? got - start : 0, sampled, got);
	return r;
}

/* A backed-off mutex's acquisition, its skip counted down by the holder. */
__attribute__((noinline)) int mutex_lock_skipping_own(pthread_mutex_t *m)
{
	mutex_words_lock_threaded(m);
	mutex_skip_use(m);
	return 0;
}

/* A timed acquisition of a skipping mutex (mutex_skipping()). */
static __attribute__((noinline)) int mutex_acquire_skipping(pthread_mutex_t *m, const struct wait_spec *w)
{
	int r = real_mutex_acquire(m, w);

	if (r == 0)
		mutex_skip_use(m);
	return r;
}

_public_ int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
	struct wait_spec w = { .how = WAIT_TIMED, .abstime = abstime };

	if (elide.path == PATH_WATCH && mutex_skipping(m))
		return mutex_acquire_skipping(m, &w);
	if (likely(mutex_takes_fast_path(m)))
		return real_mutex_acquire(m, &w);
	return mutex_acquire_not_fast(m, &w, __builtin_return_address(0));
}

_public_ int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock, const struct timespec *abstime)
{
	struct wait_spec w = { .how = WAIT_CLOCK, .clock = clock, .abstime = abstime };

	if (elide.path == PATH_WATCH && mutex_skipping(m))
		return mutex_acquire_skipping(m, &w);
	if (likely(mutex_takes_fast_path(m)))
		return real_mutex_acquire(m, &w);
	return mutex_acquire_not_fast(m, &w, __builtin_return_address(0));
}

__attribute__((noinline)) int mutex_unlock_maybe_elided(pthread_mutex_t *m)
{
	struct lock_rec *rec = elided_pop(m);

	if (!rec)
		return real_mutex_unlock(m);
	commit_elided(m, rec);
	return 0;
}

/* Its figures are written after the unlock: outside the section. */
__attribute__((noinline)) int mutex_unlock_watched(pthread_mutex_t *m)
{
	uint64_t hold_end = watch_hold_end();
	int r;

	if (in_elided_section() && mutex_word(m) == 0)
		r = mutex_unlock_maybe_elided(m);
	else
		r = real_mutex_unlock(m);
	watch_flush(r == 0 ? hold_end : 0);
	return r;
}

_public_ int pthread_mutex_trylock(pthread_mutex_t *m)
{
	/* POSIX: trylock of a mutex this thread holds must fail, and inside a
	 * transaction we cannot tell; so leave the transaction and redo the
	 * whole section with real locks. */
	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_TRYLOCK);
	return real_mutex_trylock(m);
}

_public_ int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
	struct lock_rec *rec;
	int r;

	r = real.mutex_init(m, attr);
	if (r != 0 || !elide.recs || !attr || elide.opts.force_normal)
		return r;
	/* A glibc that does not tag NORMAL in the kind (>= 2.43): the
	 * attribute says it.  glibc's initializer cleared our index, so this
	 * makes a fresh record; without room the lock simply stays untracked
	 * until contended, and is then elided like a default one (the table
	 * is full: documented in libelide(7)). */
	if (mutex_class(m) != MUTEX_ELIDABLE || !attr_is_normal(attr))
		return r;
	rec = registry_attach_own(m, mutex_idx_ptr(m), LOCK_KIND_MUTEX, __builtin_return_address(0), false, NULL);
	if (rec)
		rec_set_type_normal(rec);
	return r;
}

_public_ int pthread_mutex_destroy(pthread_mutex_t *m)
{
	bool skipping;
	int r;

	/* Destroying a lock we may hold elided: redo it with real locks so
	 * glibc can answer EBUSY. */
	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_DESTROY);
	skipping = mutex_skipping(m);
	r = real.mutex_destroy(m);
	/* glibc's bytes as glibc would leave them. */
	if (r == 0 && skipping)
		glibc_mutex_skip_store(m, 0);
	if (r == 0 && elide.recs)
		registry_detach(mutex_idx_ptr(m));
	return r;
}

_public_ int pthread_mutexattr_settype(pthread_mutexattr_t *attr, int type)
{
	int r = real.mutexattr_settype(attr, type);

	if (r == 0 && elide.recs) {
		if (attr_mark_normal(attr, type == PTHREAD_MUTEX_NORMAL) < 0)
			log_warning("too many mutex attributes typed PTHREAD_MUTEX_NORMAL at once; "
				    "mutexes made from further ones may be elided");
	}
	return r;
}

_public_ int pthread_mutexattr_destroy(pthread_mutexattr_t *attr)
{
	if (elide.recs)
		(void)attr_mark_normal(attr, false);
	return real.mutexattr_destroy(attr);
}
