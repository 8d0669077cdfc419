/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read side of glibc's rwlock as libelide takes and gives it
 * (glibc-protocol.h, glibc-protocol.c), driven directly against this
 * glibc's own rwlocks, without LD_PRELOAD: what the look refuses, the
 * fetch-add that holds, and each answer of rwlock_read_registered_late()
 * (a reader whose add found a write phase after all), with the word
 * crafted in the state a racing writer would have left.  glibc's own
 * calls then run on the same lock and must find it as their own reader
 * would have left it.  The interleavings themselves are model-checked
 * (libelide/model/own-rwlock.pml).
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "glibc-protocol.h"

/* What glibc-protocol.c needs of the rest of libelide. */
struct elide_state elide;
struct real_fns real;
__thread struct elide_thread self;

static unsigned readers_of(pthread_rwlock_t *rw)
{
	return __atomic_load_n(&rw->__data.__readers, __ATOMIC_SEQ_CST);
}

static void setup(void)
{
	memset(&real, 0, sizeof(real));
	real.rwlock_rdlock = pthread_rwlock_rdlock;
	real.rwlock_unlock = pthread_rwlock_unlock;
	elide.own_rwlock_words = true;
}

static void init_kind(pthread_rwlock_t *rw, int kind)
{
	pthread_rwlockattr_t attr;

	ck_assert_int_eq(pthread_rwlockattr_init(&attr), 0);
	ck_assert_int_eq(pthread_rwlockattr_setkind_np(&attr, kind), 0);
	ck_assert_int_eq(pthread_rwlock_init(rw, &attr), 0);
	ck_assert_int_eq(pthread_rwlockattr_destroy(&attr), 0);
}

/* A free rwlock: one reader counted, exactly as glibc counts it; given back
 * to nothing, and glibc's writer then takes it at once. */
START_TEST(take_free_and_give)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

	ck_assert_int_eq(rwlock_read_take(&rw), 0);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_ONE_READER);
	ck_assert_int_eq(rwlock_read_take(&rw), 0);
	ck_assert_uint_eq(readers_of(&rw), 2 * RWLOCK_ONE_READER);
	ck_assert_int_eq(pthread_rwlock_trywrlock(&rw), EBUSY);
	ck_assert(rwlock_read_give(&rw));
	ck_assert(rwlock_read_give(&rw));
	ck_assert_uint_eq(readers_of(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_trywrlock(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_unlock(&rw), 0);
}
END_TEST

/* The look refuses a write phase (held, or left by the last writer) and
 * writes nothing: glibc's reader comes next. */
START_TEST(look_refuses_write_phase)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	unsigned before;

	ck_assert_int_eq(pthread_rwlock_wrlock(&rw), 0);
	before = readers_of(&rw);
	ck_assert_int_eq(rwlock_read_take(&rw), -1);
	ck_assert_uint_eq(readers_of(&rw), before);
	ck_assert_int_eq(pthread_rwlock_rdlock(&rw), EDEADLK);
	ck_assert_int_eq(pthread_rwlock_unlock(&rw), 0);

	ck_assert_uint_eq(readers_of(&rw), RWLOCK_WRPHASE);
	ck_assert_int_eq(rwlock_read_take(&rw), -1);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_WRPHASE);
	ck_assert_int_eq(pthread_rwlock_rdlock(&rw), 0);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_ONE_READER);
	ck_assert(rwlock_read_give(&rw));
}
END_TEST

/* A count that would overflow is glibc's (its EAGAIN). */
START_TEST(look_refuses_overflow)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

	rw.__data.__readers = RWLOCK_READER_OVERFLOW - RWLOCK_ONE_READER;
	ck_assert_int_eq(rwlock_read_take(&rw), -1);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_READER_OVERFLOW - RWLOCK_ONE_READER);
}
END_TEST

/* The last writer left its write phase; our add came after it: start the
 * read phase as glibc's reader does, and clear __wrphase_futex. */
START_TEST(late_starts_read_phase)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	unsigned r;

	ck_assert_int_eq(pthread_rwlock_wrlock(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_unlock(&rw), 0);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_WRPHASE);
	r = __atomic_add_fetch(&rw.__data.__readers, RWLOCK_ONE_READER, __ATOMIC_ACQUIRE);
	ck_assert_int_eq(rwlock_read_registered_late(&rw, r), 0);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_ONE_READER);
	ck_assert_uint_eq(rw.__data.__wrphase_futex, 0);
	ck_assert_int_eq(pthread_rwlock_trywrlock(&rw), EBUSY);
	ck_assert_int_eq(pthread_rwlock_unlock(&rw), 0); /* glibc's reader unlock */
	ck_assert_uint_eq(readers_of(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_trywrlock(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_unlock(&rw), 0);
}
END_TEST

/* An overflowing count after the add: leave again, EAGAIN, as glibc. */
START_TEST(late_overflow)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	unsigned r;

	rw.__data.__readers = RWLOCK_READER_OVERFLOW - RWLOCK_ONE_READER;
	r = __atomic_add_fetch(&rw.__data.__readers, RWLOCK_ONE_READER, __ATOMIC_ACQUIRE);
	ck_assert_int_eq(rwlock_read_registered_late(&rw, r), EAGAIN);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_READER_OVERFLOW - RWLOCK_ONE_READER);
}
END_TEST

/* The read phase was handed over between the add and the look at it: ours. */
START_TEST(late_handed_over)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

	rw.__data.__readers = RWLOCK_ONE_READER; /* the writer's unlock handed it to us */
	ck_assert_int_eq(rwlock_read_registered_late(&rw, RWLOCK_WRPHASE | RWLOCK_WRLOCKED | RWLOCK_ONE_READER), 0);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_ONE_READER);
	ck_assert(rwlock_read_give(&rw));
	ck_assert_uint_eq(readers_of(&rw), 0);
}
END_TEST

struct late_arg {
	pthread_rwlock_t *rw;
	unsigned r;
	int ret;
};

static void *reader_late(void *p)
{
	struct late_arg *a = p;

	a->ret = rwlock_read_registered_late(a->rw, a->r);
	return NULL;
}

/*
 * Handed the read phase while the writer has yet to clear __wrphase_futex
 * (its second step; it may be preempted in between): the reader sleeps
 * for it as glibc's does, marking the word used so the writer's exchange
 * wakes it, instead of spinning through its time slice.
 */
START_TEST(late_handed_over_sleeps_for_writer)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	struct late_arg a = { .rw = &rw, .r = RWLOCK_WRPHASE | RWLOCK_WRLOCKED | RWLOCK_ONE_READER, .ret = -1 };
	unsigned seen = 0;
	pthread_t rt;

	rw.__data.__readers = RWLOCK_ONE_READER; /* the writer's first step */
	rw.__data.__wrphase_futex = 1;
	ck_assert_int_eq(pthread_create(&rt, NULL, reader_late, &a), 0);
	/* Up to 2 s (under Check's 4 s limit) for the reader to mark it. */
	for (int i = 0; i < 2000; i++) {
		seen = __atomic_load_n(&rw.__data.__wrphase_futex, __ATOMIC_SEQ_CST);
		if (seen == (1u | RWLOCK_FUTEX_USED))
			break;
		usleep(1000);
	}
	ck_assert_uint_eq(seen, 1u | RWLOCK_FUTEX_USED);
	ck_assert_int_eq(__atomic_load_n(&a.ret, __ATOMIC_SEQ_CST), -1);

	/* The writer's second step, as glibc's write unlock does it. */
	if (__atomic_exchange_n(&rw.__data.__wrphase_futex, 0, __ATOMIC_RELAXED) & RWLOCK_FUTEX_USED)
		syscall(SYS_futex, &rw.__data.__wrphase_futex, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
	ck_assert_int_eq(pthread_join(rt, NULL), 0);
	ck_assert_int_eq(a.ret, 0);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_ONE_READER);
	ck_assert(rwlock_read_give(&rw));
	ck_assert_int_eq(pthread_rwlock_trywrlock(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_unlock(&rw), 0);
}
END_TEST

struct writer_arg {
	pthread_rwlock_t *rw;
	int pipe_go[2];   /* main -> writer: unlock now */
	int pipe_held[2]; /* writer -> main: I hold it */
};

static void *writer_holds(void *p)
{
	struct writer_arg *w = p;
	char c = 'w';

	ck_assert_int_eq(pthread_rwlock_wrlock(w->rw), 0);
	ck_assert_int_eq(write(w->pipe_held[1], &c, 1), 1);
	ck_assert_int_eq(read(w->pipe_go[0], &c, 1), 1);
	ck_assert_int_eq(pthread_rwlock_unlock(w->rw), 0);
	return NULL;
}

/* A writer holds its write phase: leave again and wait in glibc's read
 * lock, which returns once the writer hands the read phase over. */
START_TEST(late_waits_for_writer)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	struct writer_arg w = { .rw = &rw };
	struct late_arg a = { .rw = &rw, .ret = -1 };
	pthread_t wt, rt;
	char c;

	ck_assert_int_eq(pipe(w.pipe_go), 0);
	ck_assert_int_eq(pipe(w.pipe_held), 0);
	ck_assert_int_eq(pthread_create(&wt, NULL, writer_holds, &w), 0);
	ck_assert_int_eq(read(w.pipe_held[0], &c, 1), 1);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_WRPHASE | RWLOCK_WRLOCKED);

	a.r = __atomic_add_fetch(&rw.__data.__readers, RWLOCK_ONE_READER, __ATOMIC_ACQUIRE);
	ck_assert_int_eq(pthread_create(&rt, NULL, reader_late, &a), 0);
	/* glibc's reader registers again and sleeps until the hand-over,
	 * marking __wrphase_futex used (1 | 2); give it up to 2 s (under
	 * Check's 4 s limit) to get there: whatever it does, it must not
	 * return while the writer holds the lock. */
	for (int i = 0; i < 2000; i++) {
		if (__atomic_load_n(&rw.__data.__wrphase_futex, __ATOMIC_SEQ_CST) == (1u | RWLOCK_FUTEX_USED))
			break;
		usleep(1000);
	}
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_WRPHASE | RWLOCK_WRLOCKED | RWLOCK_ONE_READER);
	ck_assert_int_eq(__atomic_load_n(&a.ret, __ATOMIC_SEQ_CST), -1);

	ck_assert_int_eq(write(w.pipe_go[1], "g", 1), 1);
	ck_assert_int_eq(pthread_join(wt, NULL), 0);
	ck_assert_int_eq(pthread_join(rt, NULL), 0);
	ck_assert_int_eq(a.ret, 0);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_ONE_READER);
	ck_assert_int_eq(pthread_rwlock_trywrlock(&rw), EBUSY);
	ck_assert(rwlock_read_give(&rw));
	ck_assert_int_eq(pthread_rwlock_trywrlock(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_unlock(&rw), 0);
	for (int i = 0; i < 2; i++) {
		close(w.pipe_go[i]);
		close(w.pipe_held[i]);
	}
}
END_TEST

static void *writer_waits(void *p)
{
	pthread_rwlock_t *rw = p;

	ck_assert_int_eq(pthread_rwlock_wrlock(rw), 0);
	ck_assert_int_eq(pthread_rwlock_unlock(rw), 0);
	return NULL;
}

/* With a reader in and a writer waiting, a new reader: a default rwlock
 * (readers first) lets it in, as glibc's does; one that prefers writers
 * nonrecursively leaves it to glibc, whose reader waits. */
static void reader_beside_waiting_writer(int kind, int want)
{
	pthread_rwlock_t rw;
	pthread_t wt;

	init_kind(&rw, kind);
	ck_assert_int_eq(pthread_rwlock_rdlock(&rw), 0);
	ck_assert_int_eq(pthread_create(&wt, NULL, writer_waits, &rw), 0);
	while (!(readers_of(&rw) & RWLOCK_WRLOCKED))
		usleep(1000); /* the writer's fetch-or, then its sleep */
	ck_assert_int_eq(rwlock_read_take(&rw), want);
	ck_assert_uint_eq(readers_of(&rw) >> RWLOCK_READER_SHIFT, want == 0 ? 2 : 1);
	if (want == 0)
		ck_assert(rwlock_read_give(&rw));
	ck_assert_int_eq(pthread_rwlock_unlock(&rw), 0);
	ck_assert_int_eq(pthread_join(wt, NULL), 0);
	ck_assert_int_eq(pthread_rwlock_destroy(&rw), 0);
}

START_TEST(waiting_writer_by_kind)
{
	reader_beside_waiting_writer(PTHREAD_RWLOCK_PREFER_READER_NP, 0);
	reader_beside_waiting_writer(PTHREAD_RWLOCK_PREFER_WRITER_NP, 0);
	reader_beside_waiting_writer(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP, -1);
}
END_TEST

/* Without a writer, a rwlock preferring writers is taken as any other. */
START_TEST(prefer_writer_free)
{
	pthread_rwlock_t rw;

	init_kind(&rw, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	ck_assert_int_eq(rwlock_read_take(&rw), 0);
	ck_assert_uint_eq(readers_of(&rw), RWLOCK_ONE_READER);
	ck_assert_int_eq(pthread_rwlock_trywrlock(&rw), EBUSY);
	ck_assert(rwlock_read_give(&rw));
	ck_assert_uint_eq(readers_of(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_destroy(&rw), 0);
}
END_TEST

static Suite *rwlock_protocol_suite(void)
{
	Suite *s = suite_create("rwlock-protocol");
	TCase *tc = tcase_create("read side");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, take_free_and_give);
	tcase_add_test(tc, look_refuses_write_phase);
	tcase_add_test(tc, look_refuses_overflow);
	tcase_add_test(tc, late_starts_read_phase);
	tcase_add_test(tc, late_overflow);
	tcase_add_test(tc, late_handed_over);
	tcase_add_test(tc, late_handed_over_sleeps_for_writer);
	tcase_add_test(tc, late_waits_for_writer);
	tcase_add_test(tc, waiting_writer_by_kind);
	tcase_add_test(tc, prefer_writer_free);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(rwlock_protocol_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
