/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * glibc's protocol for a default mutex, the out-of-line half: the thread's
 * id, the futex calls and the wait for a held mutex (glibc-protocol.h says
 * what it mirrors and which invariants it keeps).
 */
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "glibc-protocol.h"

__attribute__((noinline, cold)) pid_t thread_tid_first(void)
{
	/* glibc keeps the id in the thread's descriptor: read it there, as
	 * glibc's own lock does, so a thread in a seccomp sandbox that allows
	 * only futex can still lock.  gettid only where glibc did not say
	 * where (find_thread_id(); then nothing is locked here). */
	if (likely(elide.pthread_tid_offset))
		self.tid = *(const pid_t *)((const char *)pthread_self() + elide.pthread_tid_offset);
	else
		self.tid = (pid_t)syscall(SYS_gettid); /* never fails: errno kept */
	return self.tid;
}

/* A raw FUTEX_WAKE (op: FUTEX_WAKE, with or without FUTEX_PRIVATE_FLAG) of
 * up to n sleepers: a libc call would set errno on failure, and glibc's
 * own unlock ignores the result too. */
static inline void futex_wake_raw(void *word, long op, long n)
{
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_futex), "D"(word), "S"(op), "d"(n)
			 : "rcx", "r11", "memory");
	(void)ret;
}

__attribute__((noinline)) void futex_wake_one_private(int *word)
{
	futex_wake_raw(word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1);
}

/* A raw FUTEX_WAIT (op: FUTEX_WAIT, with or without FUTEX_PRIVATE_FLAG)
 * for as long as the word is `value`: returns on a wake-up, a signal or a
 * changed word alike (the caller looks again); errno is left alone, as
 * glibc's own wait leaves it. */
static void futex_wait_raw(void *word, long op, int value)
{
	register long no_timeout __asm__("r10") = 0;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_futex), "D"(word), "S"(op), "d"((long)value), "r"(no_timeout)
			 : "rcx", "r11", "memory");
	(void)ret;
}

static void futex_wait_private(int *word, int value)
{
	futex_wait_raw(word, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, value);
}

/* A thread's first: its id asked for, out of line. */
__attribute__((noinline, cold)) int mutex_words_note_first_holder(pthread_mutex_t *m)
{
	m->__data.__owner = thread_tid();
	m->__data.__nusers++;
	return 0;
}

/* The score of this thread's pauses before sleeping: a pause that ended
 * with the lock gains 7, one that did not loses 1, so it keeps pausing
 * while at least one in eight pays (a sleep and its wake-up cost several
 * times the pauses), between -32 and 32.  One in four stopped the pauses
 * of hash lookups at 2 threads that paid 1.4x. */
#define WAIT_SPIN_WON 7
#define WAIT_SPIN_SCORE_MAX 32
#define WAIT_SPIN_SCORE_MIN (-32)

/* Pause before sleeping this time?  While the score is negative (this
 * thread's waits outlast the pause: long sections), only every 16th wait
 * pauses, to notice when they become short again. */
static inline bool mutex_words_wait_pays(void)
{
	if (elide.opts.wait_spins == 0)
		return false;
	return self.wait_spin_score >= 0 || (++self.wait_spin_probe & 15) == 0;
}

static inline void mutex_words_wait_score(bool won)
{
	int score = self.wait_spin_score + (won ? WAIT_SPIN_WON : -1);

	if (score > WAIT_SPIN_SCORE_MAX)
		score = WAIT_SPIN_SCORE_MAX;
	if (score < WAIT_SPIN_SCORE_MIN)
		score = WAIT_SPIN_SCORE_MIN;
	self.wait_spin_score = (int8_t)score;
}

/*
 * A default mutex that was not free: wait for it with glibc's protocol
 * (mark it 2, "held with waiters", and sleep on the futex while it stays
 * 2; the unlock that finds 2 wakes one).  Here rather than in glibc,
 * whose lock would first try once more the compare-and-swap that just
 * failed: on a contended line every such try takes the line from the
 * holder, whose unlock must then fetch it back.
 *
 * Before marking it, the waiter pauses wait_spins times without touching
 * the lock's line and tries to take it once more: a short section is over
 * by then, and the waiter takes the lock without a futex sleep, and its
 * holder unlocks without a FUTEX_WAKE.  Spinning on loads instead took the
 * line from the holder and slowed everything down (bench/results/2026-12-07-history.md).
 * Only while the pauses pay (mutex_words_wait_pays()); wait_spins=0 waits
 * exactly as glibc does.
 * Modelled in libelide/model/own-mutex.pml: change both together.
 */
__attribute__((noinline)) int mutex_words_wait(pthread_mutex_t *m)
{
	int *word = &m->__data.__lock;
	int seen;

	if (mutex_words_wait_pays()) {
		for (unsigned spins = elide.opts.wait_spins; spins; spins--)
			_mm_pause();
		seen = 0;
		if (__atomic_compare_exchange_n(word, &seen, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			mutex_words_wait_score(true);
			return mutex_words_note_holder(m);
		}
		mutex_words_wait_score(false);
	} else {
		seen = __atomic_load_n(word, __ATOMIC_RELAXED);
	}
	if (seen == 2)
		futex_wait_private(word, 2);
	while (__atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) != 0)
		futex_wait_private(word, 2);
	return mutex_words_note_holder(m);
}

/* The futex op's private flag for one of the rwlock's words: private or
 * shared as the rwlock is (glibc tells by __shared). */
static long rwlock_futex_private(const pthread_rwlock_t *rw)
{
	return __atomic_load_n(&rw->__data.__shared, __ATOMIC_RELAXED) != 0 ? 0 : FUTEX_PRIVATE_FLAG;
}

/* Wakes every sleeper on one of the rwlock's futex words. */
static void futex_wake_all_rwlock(pthread_rwlock_t *rw, unsigned *word)
{
	futex_wake_raw(word, FUTEX_WAKE | rwlock_futex_private(rw), INT_MAX);
}

/* Sleeps on one of the rwlock's futex words for as long as it is `value`. */
static void futex_wait_rwlock(pthread_rwlock_t *rw, unsigned *word, unsigned value)
{
	futex_wait_raw(word, FUTEX_WAIT | rwlock_futex_private(rw), (int)value);
}

/*
 * rwlock_read_take()'s fetch-add registered this thread as a reader (r is
 * the word it left), but not in a read phase, or past the count glibc
 * allows.  Every step below is one glibc's reader takes from the same
 * state (glibc-protocol.h):
 *  - an overflowing count: leave again while it overflows, EAGAIN;
 *  - a write phase without a writer: start the read phase, and wake the
 *    readers that wait for its hand-over (as glibc's reader does);
 *  - a writer's write phase: leave again while it lasts, as glibc's reader
 *    whose deadline has passed does, and wait in glibc's rdlock;
 *  - a read phase handed over meanwhile: it is ours, once the writer has
 *    finished handing it over (__wrphase_futex no longer 1): sleep for
 *    that on __wrphase_futex, as glibc's reader does.
 * Modelled in libelide/model/own-rwlock.pml: change both together.
 */
__attribute__((noinline, cold)) int rwlock_read_registered_late(pthread_rwlock_t *rw, unsigned r)
{
	unsigned *word = &rw->__data.__readers;
	unsigned *wrphase = &rw->__data.__wrphase_futex;

	while (r >= RWLOCK_READER_OVERFLOW) {
		if (__atomic_compare_exchange_n(word, &r, r - RWLOCK_ONE_READER, true, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return EAGAIN;
	}
	if (!(r & RWLOCK_WRPHASE))
		return 0;
	while ((r & RWLOCK_WRPHASE) && !(r & RWLOCK_WRLOCKED)) {
		if (__atomic_compare_exchange_n(word, &r, r ^ RWLOCK_WRPHASE, true, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			if (__atomic_exchange_n(wrphase, 0, __ATOMIC_RELAXED) & RWLOCK_FUTEX_USED)
				futex_wake_all_rwlock(rw, wrphase);
			return 0;
		}
	}
	while (r & RWLOCK_WRPHASE) {
		if (__atomic_compare_exchange_n(word, &r, r - RWLOCK_ONE_READER, true, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return real.rwlock_rdlock(rw);
	}
	/* Registered in a read phase: no writer can start another while we
	 * are counted, so it is ours once the writer has cleared
	 * __wrphase_futex.  Sleep for that as glibc's reader does, marking the
	 * word used so that the writer wakes us: spinning here, a reader whose
	 * writer is preempted between its two steps would burn its own time
	 * slice, with more threads than CPUs. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	for (;;) {
		unsigned seen = __atomic_load_n(wrphase, __ATOMIC_RELAXED);

		if ((seen | RWLOCK_FUTEX_USED) != (1u | RWLOCK_FUTEX_USED))
			return 0;
		if (!(seen & RWLOCK_FUTEX_USED) &&
		    !__atomic_compare_exchange_n(wrphase, &seen, seen | RWLOCK_FUTEX_USED, true, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED))
			continue;
		futex_wait_rwlock(rw, wrphase, 1u | RWLOCK_FUTEX_USED);
	}
}
