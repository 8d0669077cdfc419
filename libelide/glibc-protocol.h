/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The code that must do what glibc does, word for word: the lock and
 * unlock of a default mutex and the read side of a default rwlock, which
 * libelide runs itself on the locks' own words while glibc's code may run
 * on the same lock (a program calling glibc through dlsym or the
 * __pthread_* aliases, pthread_cond_wait() relocking its mutex, or glibc's
 * rwlock functions for every case not done here).  The inline half is
 * here, inlined into the lock paths; the wait, the futex calls and a
 * thread's first look at its id are in glibc-protocol.c.  The layout of
 * the words is glibc-abi.h's.
 *
 * It mirrors, in glibc 2.28 .. 2.43 (the models follow 2.36):
 *  - nptl/pthread_mutex_lock.c, pthread_mutex_trylock.c and
 *    pthread_mutex_unlock.c for a PTHREAD_MUTEX_TIMED_NP private mutex,
 *    with the lll_lock, lll_trylock and lll_unlock of lowlevellock.h and
 *    __lll_lock_wait_private() of nptl/lowlevellock.c;
 *  - nptl/pthread_rwlock_common.c: the reader's registration in a read
 *    phase and the reader's unlock when no hand-over is due.
 *
 * Invariants (glibc's; every path here keeps them):
 *  - mutex __lock is 0 free, 1 held, 2 held with (possible) waiters; only
 *    a CAS 0 -> 1 or an exchange with 2 takes it, only the holder gives it
 *    back, by an exchange with 0, and an unlock that found 2 wakes one
 *    futex waiter; a waiter marks it 2 before it sleeps, and sleeps only
 *    while it is 2; while the process has one thread, a load and a plain
 *    store do for the CAS and the exchange (glibc's own shortcut);
 *  - the holder of a mutex writes its thread id (glibc's, from the thread
 *    descriptor) to __owner and counts itself in __nusers, and clears and
 *    uncounts them before it gives the word back;
 *  - trylock is always the CAS, even with one thread (a signal handler may
 *    trylock between a load and a store);
 *  - rwlock __readers counts readers from bit RWLOCK_READER_SHIFT up, with
 *    WRPHASE, WRLOCKED and RWAITING below; a reader is added here only in a
 *    read phase (where writers are preferred, with no writer either), below
 *    the overflow glibc refuses, and removed only when it is not the last
 *    reader that a writer or waiting readers need for the hand-over, with
 *    glibc's own fetch-add and CAS; a writer that comes between the look
 *    and the add gets what glibc's reader does then; every other case (a
 *    write phase, a writer that readers must let go first, the hand-over,
 *    the writer's own calls) is glibc's code, which then runs from the
 *    same state;
 *  - none of it runs unless glibc_check_default_mutex() and
 *    glibc_check_default_rwlock() (glibc-check.c) saw this glibc write the
 *    words the same way, the next definitions are glibc's own (resolve.c),
 *    glibc's own elision is off (elide.c, own_mutex_words_refused()) and
 *    the mode is not off (set_path()).
 *
 * Modelled in libelide/model/own-mutex.pml and own-rwlock.pml (spin,
 * tests/model/check-model.sh): a change here changes them too.
 */
#ifndef ELIDE_GLIBC_PROTOCOL_H
#define ELIDE_GLIBC_PROTOCOL_H

#include <errno.h>
#include <pthread.h>

#include "hotpath.h"
#include "resolve.h"

/*
 * A default mutex's words.  Every interposer adds a call between the
 * program's unlock and its next lock; on a short contended section that
 * hop decides who gets the lock next, and a preload that only forwards
 * each call to glibc costs 7-13% there by itself (bench/results/2026-12-07-history.md, "the
 * interposition floor").  So a default mutex (private, __kind 0: what
 * PTHREAD_MUTEX_INITIALIZER and pthread_mutex_init(m, NULL) make) is taken
 * and given here, with the protocol glibc uses for it: __lock is 0 free,
 * 1 held, 2 held with waiters (a futex word); the holder writes its thread
 * id to __owner and counts itself in __nusers.  A lock that is not free
 * is waited for the same way (mutex_words_wait(): marked 2, a futex sleep
 * while it stays 2); an unlock that finds 2 wakes one waiter, as glibc's
 * does.  Only when
 * glibc_check_default_mutex() saw glibc write the words the same way and
 * the next definitions are glibc's own (a tracer interposed behind us must
 * still see every call), and never beside glibc's own elision.
 */
__attribute__((noinline, cold)) pid_t thread_tid_first(void) _hidden_;

static inline pid_t thread_tid(void)
{
	if (unlikely(self.tid == 0))
		return thread_tid_first();
	return self.tid;
}

/* glibc's own shortcut while the process has one thread: no atomic
 * instruction is needed on a private mutex then. */
static inline bool process_single_threaded(void)
{
	const char *flag = elide.single_threaded;

	return flag && __atomic_load_n(flag, __ATOMIC_RELAXED);
}

static inline bool own_mutex_words(const pthread_mutex_t *m)
{
	/* Both expected: the lock paths fall through to their common case. */
	if (unlikely(!__atomic_load_n(&elide.own_mutex_words, __ATOMIC_RELAXED)))
		return false;
	return likely(__atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED) == PTHREAD_MUTEX_TIMED_NP);
}

/* glibc-protocol.c */
void futex_wake_one_private(int *word) _hidden_;
__attribute__((noinline, cold)) int mutex_words_note_first_holder(pthread_mutex_t *m) _hidden_;
int mutex_words_wait(pthread_mutex_t *m) _hidden_;

/* What glibc writes once a default mutex is taken: its holder's thread id
 * and one more user.  Returns 0, pthread_mutex_lock()'s result: a lock
 * path ends in it or in mutex_words_wait() as a tail call, and so needs no
 * stack frame of its own. */
static inline int mutex_words_note_holder(pthread_mutex_t *m)
{
	pid_t tid = self.tid;

	if (unlikely(tid == 0))
		return mutex_words_note_first_holder(m);
	m->__data.__owner = tid;
	m->__data.__nusers++;
	return 0;
}

/* Marks a free default mutex's word taken; false (nothing written) when it
 * is not free.  The caller then notes the holder. */
static inline bool mutex_words_take_word(pthread_mutex_t *m)
{
	int *word = &m->__data.__lock;
	int free_word = 0;

	if (process_single_threaded()) {
		if (__atomic_load_n(word, __ATOMIC_RELAXED) != 0)
			return false;
		__atomic_store_n(word, 1, __ATOMIC_RELAXED);
		return true;
	}
	return __atomic_compare_exchange_n(word, &free_word, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* pthread_mutex_trylock() of a default mutex: always the compare-and-swap,
 * as glibc's trylock does even in a process with one thread (a signal
 * handler may trylock the mutex between a load and a store). */
static inline int mutex_words_trylock(pthread_mutex_t *m)
{
	int free_word = 0;

	if (!__atomic_compare_exchange_n(&m->__data.__lock, &free_word, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return EBUSY;
	return mutex_words_note_holder(m);
}

/* Takes a default mutex, waiting as glibc does when it is held; 0. */
static inline int mutex_words_lock(pthread_mutex_t *m)
{
	if (unlikely(!mutex_words_take_word(m)))
		return mutex_words_wait(m);
	return mutex_words_note_holder(m);
}

static inline void mutex_words_give(pthread_mutex_t *m)
{
	int *word = &m->__data.__lock;

	m->__data.__owner = 0;
	m->__data.__nusers--;
	if (process_single_threaded())
		__atomic_store_n(word, 0, __ATOMIC_RELEASE);
	else if (__atomic_exchange_n(word, 0, __ATOMIC_RELEASE) > 1)
		futex_wake_one_private(word);
}

/*
 * Locks a default mutex of a process with other threads: its
 * compare-and-swap first, with no test of __libc_single_threaded, straight
 * through (the contended counter paid for every taken branch).
 */
static inline __attribute__((always_inline)) int mutex_words_lock_threaded(pthread_mutex_t *m)
{
	int free_word = 0;

	if (unlikely(!__atomic_compare_exchange_n(&m->__data.__lock, &free_word, 1, false, __ATOMIC_ACQUIRE,
						  __ATOMIC_RELAXED)))
		return mutex_words_wait(m);
	return mutex_words_note_holder(m);
}

/* pthread_mutex_lock() as glibc does it, for whatever libelide does not elide. */
static inline int real_mutex_lock(pthread_mutex_t *m)
{
	if (!own_mutex_words(m))
		return real.mutex_lock(m);
	return mutex_words_lock(m);
}

static inline int real_mutex_trylock(pthread_mutex_t *m)
{
	if (!own_mutex_words(m))
		return real.mutex_trylock(m);
	return mutex_words_trylock(m);
}

static inline int real_mutex_unlock(pthread_mutex_t *m)
{
	if (!own_mutex_words(m))
		return real.mutex_unlock(m);
	mutex_words_give(m);
	return 0;
}

/*
 * The read side of a default rwlock, taken and given here for the same
 * reason as a default mutex's words (above), with glibc's protocol for it
 * (2.25 and later): __readers counts readers from bit RWLOCK_READER_SHIFT
 * up, below it WRPHASE (a write phase), WRLOCKED (a writer holds or waits)
 * and RWAITING (readers wait for that writer).  A reader that registers in
 * a read phase holds the lock; a reader that leaves is done unless it is
 * the last one and a writer or waiting readers need the hand-over.  Only
 * those two cases are done here, with glibc's own fetch-add and CAS on
 * the word; everything else (a write phase seen before the add, a writer
 * that waits on a rwlock preferring writers, the reader that must hand
 * over, a thread that holds the lock for writing, an overflowing count)
 * goes to glibc, whose code then runs from the same state.  A reader whose
 * add found a write phase after all does what glibc's reader does then
 * (glibc-protocol.c).  Only where glibc_check_default_rwlock() saw glibc
 * write the word so.
 *
 * A rwlock that prefers writers nonrecursively (__flags 2) differs only in
 * its reader's lock: glibc's reader waits while a writer waits or holds
 * it, and otherwise registers with the same fetch-add.  So there the take
 * also refuses WRLOCKED (and RWAITING, which only its readers set); the
 * read unlock does not look at __flags in glibc, nor here.
 * Modelled in libelide/model/own-rwlock.pml (the default kind): change
 * both together.
 */
static inline bool own_rwlock_read(void)
{
	return __atomic_load_n(&elide.own_rwlock_words, __ATOMIC_RELAXED);
}

int rwlock_read_registered_late(pthread_rwlock_t *rw, unsigned r) _hidden_;

/* The bits of __readers that send a new reader to glibc: a write phase;
 * where writers are preferred, also a writer (glibc's reader waits for
 * it) and RWAITING (only that kind's readers set it). */
static inline unsigned rwlock_read_refused(const pthread_rwlock_t *rw)
{
	if (unlikely(__atomic_load_n(&rw->__data.__flags, __ATOMIC_RELAXED) ==
		     PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
		return RWLOCK_WRPHASE | RWLOCK_WRLOCKED | RWLOCK_RWAITING;
	return RWLOCK_WRPHASE;
}

/* May a reader that saw r register here?  A thread holding the lock for
 * writing (glibc says EDEADLK to it) sees its own write phase, so goes to
 * glibc without a look at __cur_writer: a writer holds the lock only in a
 * write phase. */
static inline bool rwlock_read_may_add(const pthread_rwlock_t *rw, unsigned r)
{
	return !(r & rwlock_read_refused(rw)) && r < RWLOCK_READER_OVERFLOW - RWLOCK_ONE_READER;
}

/*
 * Registers as a reader with glibc's own fetch-add, after a look that
 * rwlock_read_may_add() approved: pthread_rwlock_rdlock()'s answer.  A
 * compare-and-swap would do without the look, but cost 10-17% of an
 * uncontended rdlock and unlock (bench/RESULTS.md, "rwlock read side").
 * A writer may start its write phase between the look and the add: then,
 * as glibc's reader, rwlock_read_registered_late() answers.
 */
static inline int rwlock_read_add(pthread_rwlock_t *rw)
{
	unsigned r = __atomic_add_fetch(&rw->__data.__readers, RWLOCK_ONE_READER, __ATOMIC_ACQUIRE);

	if (likely(!(r & RWLOCK_WRPHASE) && r < RWLOCK_READER_OVERFLOW))
		return 0;
	return rwlock_read_registered_late(rw, r);
}

/* The look and the add: -1 (nothing written, glibc's turn) where the look
 * refuses, else pthread_rwlock_rdlock()'s answer. */
static inline int rwlock_read_take(pthread_rwlock_t *rw)
{
	unsigned *word = &rw->__data.__readers;

	/* The add writes this line: fetch it exclusive at once, or the load
	 * fetches it shared and the add pays a second transfer. */
	prefetch_for_write(word);
	if (!rwlock_read_may_add(rw, __atomic_load_n(word, __ATOMIC_RELAXED)))
		return -1;
	return rwlock_read_add(rw);
}

/* Leaves as a reader when no hand-over is due; false (nothing written) when
 * glibc must do it, or the thread holds the lock for writing. */
static inline bool rwlock_read_give(pthread_rwlock_t *rw)
{
	unsigned *word = &rw->__data.__readers;
	unsigned r;

	/* As in rwlock_read_take(): exclusive at once; and the writer's own
	 * unlock finds its write phase below, so goes to glibc. */
	prefetch_for_write(word);
	r = __atomic_load_n(word, __ATOMIC_RELAXED);
	for (;;) {
		unsigned readers = r >> RWLOCK_READER_SHIFT;

		if ((r & RWLOCK_WRPHASE) || readers == 0 ||
		    (readers == 1 && (r & (RWLOCK_WRLOCKED | RWLOCK_RWAITING))))
			return false;
		if (__atomic_compare_exchange_n(word, &r, r - RWLOCK_ONE_READER, true, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			return true;
	}
}

static inline int real_rwlock_rdlock(pthread_rwlock_t *rw)
{
	if (own_rwlock_read()) {
		int ret = rwlock_read_take(rw);

		if (likely(ret >= 0))
			return ret;
	}
	return real.rwlock_rdlock(rw);
}

static inline int real_rwlock_unlock(pthread_rwlock_t *rw)
{
	if (own_rwlock_read() && rwlock_read_give(rw))
		return 0;
	return real.rwlock_unlock(rw);
}

#endif
