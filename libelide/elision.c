/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Elision with RTM: a tracked lock's acquisition as a transaction (begin,
 * the abort's cause, retries, waiting for a busy lock), the lock's back-off
 * and probes, and the bursts of real acquisitions a thread takes while a
 * lock is not elided.  The unlock's commit is elision.h's.
 */
#include "elision.h"
#include "mutex.h"

/* The length of the burst granted now (see BURST_MIN_SHIFT): one TSC read
 * per burst; the shortest one without the TSC. */
static inline uint32_t burst_length(struct lock_local *l)
{
	uint32_t now = (uint32_t)(tsc_read() >> BURST_TSC_SHIFT);
	bool quick = now != 0 && now - l->burst_stamp < BURST_QUICK;

	l->burst_stamp = now;
	if (!quick || l->burst_shift < BURST_MIN_SHIFT)
		l->burst_shift = BURST_MIN_SHIFT;
	else if (l->burst_shift < BURST_MAX_SHIFT)
		l->burst_shift++;
	return 1u << l->burst_shift;
}

/* The weight of this throttled acquisition's counts: THROTTLED_SAMPLE for
 * 1 in THROTTLED_SAMPLE of them, else 0 (not counted). */
static inline unsigned throttled_weight(struct lock_local *l)
{
	return (++l->throttled_count & (THROTTLED_SAMPLE - 1)) == 0 ? THROTTLED_SAMPLE : 0;
}

static inline bool rwlock_free_for_reader(const pthread_rwlock_t *rw)
{
	return !(rwlock_readers(rw) & RWLOCK_WRLOCKED) &&
	       __atomic_load_n(&rw->__data.__cur_writer, __ATOMIC_RELAXED) == 0;
}

static inline bool rwlock_free_for_writer(const pthread_rwlock_t *rw)
{
	unsigned r = rwlock_readers(rw);

	return (r >> RWLOCK_READER_SHIFT) == 0 && !(r & RWLOCK_WRLOCKED) &&
	       __atomic_load_n(&rw->__data.__cur_writer, __ATOMIC_RELAXED) == 0;
}

static inline bool lock_is_free(void *lock, enum elide_op op)
{
	switch (op) {
	case OP_MUTEX:
		return mutex_word(lock) == 0;
	case OP_RDLOCK:
		return rwlock_free_for_reader(lock);
	case OP_WRLOCK:
		return rwlock_free_for_writer(lock);
	}
	return false;
}

/*
 * Lock-busy: wait for the holder to leave rather than queueing behind it
 * (which would make every later acquisition real too: the lemming effect).
 */
static bool wait_until_free(void *lock, enum elide_op op)
{
	for (unsigned spins = elide.opts.busy_spins; spins; spins--) {
		if (lock_is_free(lock, op))
			return true;
		_mm_pause();
	}
	return lock_is_free(lock, op);
}

static void conflict_pause(unsigned attempt)
{
	unsigned n = 16u << (attempt < 6 ? attempt : 6);

	/* Desynchronise threads that keep killing each other's transactions. */
	n += (unsigned)(tsc_read() & (n - 1));
	while (n--)
		_mm_pause();
}

/* A burst just granted goes to the hot entry; the previous hot lock's rest
 * goes back to its slot, so two locks used in turn both keep theirs (the
 * other one's fast path finds it in its slot). */
static inline void hot_grant(struct lock_local *l, uint32_t n)
{
	if (self.hot_key != l->key) {
		if (self.hot_key) {
			struct lock_local *old = local_find((const void *)(self.hot_key & ~(uintptr_t)1), self.hot_key & 1);

			if (old)
				old->burst = self.hot_burst;
		}
		self.hot_key = l->key;
	}
	self.hot_burst = n;
	l->burst = 0;
}

/*
 * Try to run the critical section as a transaction.  Returns true with the
 * transaction open (the caller returns 0 to the program), false when the
 * caller must take the real lock.
 *
 * A thread whose last acquisitions of this lock all fell back is throttled:
 * one attempt, no waiting for a busy lock, no pauses, counts sampled.  A
 * lock whose elision keeps failing thus costs one attempt per acquisition
 * (mode=on, policy always) until adaptive mode backs it off, which takes
 * STREAK_BACK_OFF failures in a row rather than a whole abort window.  A
 * commit ends the streak inside the transaction, so a lock that elides
 * well never sees throttling.
 */
static __attribute__((noinline)) bool try_elide(void *lock, struct lock_rec *rec, enum elide_op op)
{
	struct lock_local *l = local_of(lock, rec);
	bool throttled = l->fail_streak >= STREAK_THROTTLE;
	unsigned weight = throttled ? throttled_weight(l) : 1;
	unsigned retries = throttled ? 0 : elide.opts.retries;
	unsigned busy_retries = throttled ? 0 : elide.opts.busy_retries;
	unsigned attempt = 0, skipped = 0;
	bool other_retried = throttled;

	for (;;) {
		uint64_t start = 0;
		uint32_t status;

		if (!lock_is_free(lock, op) && !in_elided_section()) {
			/* Held for longer than a section should take: queue. */
			if (throttled || !wait_until_free(lock, op))
				break;
		}
		/* Time 1 in 16 attempts: cheap enough, and an unbiased estimate.
		 * A throttled attempt is timed when it is counted (1 in
		 * THROTTLED_SAMPLE, which its weight already scales). */
		if (throttled ? weight != 0 : unlikely((++self.attempt_count & 15) == 0))
			start = tsc_read();
		status = likely(!elide.sim_abort) ? _xbegin() : elide.sim_abort_status;
		if (status == _XBEGIN_STARTED) {
			if (likely(lock_is_free(lock, op))) {
				if (unlikely(l->fail_streak))
					l->fail_streak = 0;
				elided_push(lock, rec);
				return true;
			}
			_xabort(ELIDE_XABORT_BUSY);
		}
		if (weight)
			rec_note_abort(rec, status, start ? (tsc_read() - start) * (throttled ? 1 : 16) : 0, weight);
		switch (elide_abort_classify(status)) {
		case ELIDE_ABORT_BUSY:
			if (busy_retries-- == 0)
				goto fallback;
			continue;
		case ELIDE_ABORT_CONFLICT:
		case ELIDE_ABORT_RETRY:
			if (retries-- == 0)
				goto fallback;
			conflict_pause(attempt++);
			continue;
		case ELIDE_ABORT_OTHER:
		case ELIDE_ABORT_NESTED:
			/* No cause bit: an interrupt (gone on retry) or a syscall or
			 * page fault (there every time).  One more try tells them apart
			 * before the lock is backed off. */
			if (!other_retried) {
				other_retried = true;
				continue;
			}
			if (rec_adapts(rec))
				rec_back_off(rec);
			goto fallback;
		case ELIDE_ABORT_CAPACITY:
		case ELIDE_ABORT_EXPLICIT:
		case ELIDE_ABORT_DEBUG:
		default:
			/* Too big for the cache, or trylock / cond wait / destroy
			 * inside: this lock's sections need the real lock for a while. */
			if (rec_adapts(rec))
				rec_back_off(rec);
			goto fallback;
		}
	}
fallback:
	if (throttled && !rec_adapts(rec) && !in_elided_section()) {
		hot_grant(l, THROTTLED_SKIP);
		skipped = THROTTLED_SKIP;
	}
	if (l->fail_streak < STREAK_MAX)
		l->fail_streak++;
	/* A CAS from GATE_ELIDE: once per back-off.  Locks that do not adapt
	 * (mode=on, policy always) skip even the call: they get here on
	 * every acquisition. */
	if (l->fail_streak >= STREAK_BACK_OFF && rec_adapts(rec))
		rec_back_off(rec);
	if (weight) {
		rec_count(rec, STAT_FALLBACKS, weight);
		rec_count(rec, STAT_ACQUIRED, weight * (1 + skipped));
		if (skipped)
			rec_count(rec, STAT_SKIPPED, weight * skipped);
	}
	return false;
}

/*
 * A backed-off lock whose skip this thread has counted down: one
 * transaction tells whether eliding pays again.  It commits: the gate goes
 * back to eliding at the commit (commit_elided).  It aborts: the back-off
 * doubles.  A lock seen held is probed at the next acquisition instead.
 */
static __attribute__((noinline)) bool probe_elide(void *lock, struct lock_rec *rec, enum elide_op op, int32_t span, struct lock_local *l)
{
	uint32_t status;

	if (!lock_is_free(lock, op)) {
		l->skip_left = 1;
		return false;
	}
	status = likely(!elide.sim_abort) ? _xbegin() : elide.sim_abort_status;
	if (status == _XBEGIN_STARTED) {
		if (likely(lock_is_free(lock, op))) {
			self.probe_rec = rec;
			elided_push(lock, rec);
			return true;
		}
		_xabort(ELIDE_XABORT_BUSY);
	}
	/* Any abort, busy included (the lock looked free just before), is a
	 * failed probe: a lock that keeps aborting busy would otherwise be
	 * probed on every acquisition. */
	rec_note_abort(rec, status, 0, 1);
	rec_back_off_from(rec, span);
	rec_count(rec, STAT_FALLBACKS, 1);
	rec_count(rec, STAT_ACQUIRED, 1);
	return false;
}

/*
 * A tracked lock that is not elided now (backed off, or off by policy):
 * this acquisition is real, and so are the next `burst` of this thread,
 * which the fast path sends straight to glibc.  A backed-off lock's burst
 * ends before the span does, so the probe at the span's end runs here.
 * Counts are exact and written once per burst (two shared adds per 65 to
 * BURST_MAX + 1 acquisitions); a lock still being watched for contention
 * gets no burst (each acquisition looks at the lock) and is sampled.
 */
static __attribute__((noinline)) void grant_burst(void *lock, struct lock_local *l, struct lock_rec *rec,
						  int32_t gate)
{
	uint32_t n = 0;

	/* Inside an elided section a shared write would join the outer
	 * transaction's write set, and a relock of an rwlock held elided must
	 * reach the slow path: no burst, no count. */
	if (in_elided_section()) {
		l->burst = 0;
		return;
	}
	if ((gate == GATE_NEVER || gate > 0) && mutex_skip_applies(lock, rec)) {
		/* Its length, its count and the lock's span are settled
		 * under the lock (mutex_skip_settle()). */
		self.skip_grant = rec;
		l->burst = 0;
		if (self.hot_key == l->key)
			self.hot_burst = 0;
		goto publish;
	}
	if (gate > 0 && l->skip_left > 1) {
		uint32_t len = burst_length(l);

		n = l->skip_left - 1 < len ? l->skip_left - 1 : len;
	} else if (gate == GATE_NEVER) {
		n = burst_length(l);
	}
	l->skip_left -= gate > 0 ? n : 0;
	hot_grant(l, n);
	if (n == 0 && !sample_now(l))
		return;
	if (elide.opts.stats) {
		uint64_t count = n ? n + 1 : elide.opts.sample;

		rec_count(rec, STAT_ACQUIRED, count);
		if (gate > 0)
			rec_count(rec, STAT_SKIPPED, count);
	}
publish:
	/* Also repairs a state copy that a racing writer left stale. */
	rec_publish_state(rec);
	segment_poll_control();
}

/*
 * Decide for a tracked lock (one with a record).  Returns true when the
 * section now runs elided; false means "take the real lock" (and the
 * acquisition was already counted).  A backed-off lock is counted down per
 * thread: no shared write per acquisition.
 */
bool tracked_acquire(void *lock, struct lock_rec *rec, enum elide_op op)
{
	int32_t gate = atomic_load_explicit(&rec->gate, memory_order_relaxed);
	struct lock_local *l;

	if (likely(gate == GATE_ELIDE))
		return try_elide(lock, rec, op);
	l = local_of(lock, rec);
	if (gate > 0 && mutex_skip_applies(lock, rec)) {
		/* The lock's own span (mutex_skip_grant()): any thread probes
		 * once it is used up, the next one starts with the next skip. */
		if (atomic_load_explicit(&rec->skip_span, memory_order_relaxed) == 1 && !in_elided_section() &&
		    lock_is_free(lock, op)) {
			atomic_store_explicit(&rec->skip_span, 0, memory_order_relaxed);
			l->fail_streak = STREAK_THROTTLE;
			return probe_elide(lock, rec, op, gate, l);
		}
	} else if (gate > 0) {
		if (l->skip_left == 0 || l->skip_left > (uint32_t)gate) {
			/* A new span: when a probe turns elision back on, this
			 * thread starts throttled, so a lock that still fails
			 * backs off again after a few cheap attempts.  A slot
			 * just taken over resumes at a random point: restarting
			 * at the full span each time would never probe a lock
			 * whose slot keeps changing hands. */
			l->skip_left = l->skip_left == LOCAL_SKIP_FRESH ? 1 + local_random() % (uint32_t)gate :
									  (uint32_t)gate;
			l->fail_streak = STREAK_THROTTLE;
		}
		if (--l->skip_left == 0 && !in_elided_section())
			return probe_elide(lock, rec, op, gate, l);
	}
	grant_burst(lock, l, rec, gate);
	return false;
}
