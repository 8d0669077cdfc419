/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A lock the thread itself holds must look held.  Inside a transaction the
 * lock word of an elided lock still reads "free", so a naive elision turns
 * trylock on a held lock into success and a self-deadlock check into
 * nesting.  Two threads contend so adaptive mode really elides.
 */
#include "testutil.h"

#define ITERS 50000L

/* Each counter is protected by its own mutex. */
struct counted {
	pthread_mutex_t m;
	long counter;
};

static struct counted m_static = { .m = PTHREAD_MUTEX_INITIALIZER };
static struct counted m_init;
/* One per thread (main, two workers): free whenever its owner tries it. */
static pthread_mutex_t others[3] = {
	PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
};
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static long counter_rw;              /* protected by rw */

/* Checks in sections are recorded and verified after unlock: see testutil.h. */
static void mutex_round(struct counted *c, pthread_mutex_t *other, long i)
{
	pthread_mutex_t *m = &c->m;
	struct results rs = { 0 };
	struct timespec ts;
	int r;

	check_ret(pthread_mutex_lock(m), 0);
	c->counter++;
	record(&rs, pthread_mutex_trylock(m), EBUSY);
	/* A different, free mutex is still available while holding this one. */
	record(&rs, pthread_mutex_trylock(other), 0);
	record(&rs, pthread_mutex_trylock(m), EBUSY);
	record(&rs, pthread_mutex_unlock(other), 0);
	if (i % 5000 == 0) {
		/* The trylock above made this section real: glibc waits for the deadline. */
		ts = ts_from_now(CLOCK_REALTIME, 1);
		record(&rs, pthread_mutex_timedlock(m, &ts), ETIMEDOUT);
	}
	check_ret(pthread_mutex_unlock(m), 0);
	results_check(&rs);

	/* Acquired by trylock first: the second trylock must still see it held. */
	while ((r = pthread_mutex_trylock(m)) == EBUSY)
		sched_yield();
	check_ret(r, 0);
	c->counter++;
	record(&rs, pthread_mutex_trylock(m), EBUSY);
	check_ret(pthread_mutex_unlock(m), 0);
	results_check(&rs);

	/* A free mutex taken by trylock inside this one's section. */
	check_ret(pthread_mutex_lock(m), 0);
	c->counter++;
	record(&rs, pthread_mutex_trylock(other), 0);
	record(&rs, pthread_mutex_trylock(other), EBUSY);
	record(&rs, pthread_mutex_unlock(other), 0);
	check_ret(pthread_mutex_unlock(m), 0);
	results_check(&rs);
}

static void rwlock_round(pthread_mutex_t *other, long i)
{
	struct results rs = { 0 };
	struct timespec ts;
	int r;

	check_ret(pthread_rwlock_wrlock(&rw), 0);
	counter_rw++;
	record(&rs, pthread_rwlock_trywrlock(&rw), EBUSY);
	record(&rs, pthread_rwlock_tryrdlock(&rw), EBUSY);
	/* glibc detects relocking by the writer (__cur_writer == tid). */
	record(&rs, pthread_rwlock_wrlock(&rw), EDEADLK);
	record(&rs, pthread_rwlock_rdlock(&rw), EDEADLK);
	record(&rs, pthread_mutex_trylock(other), 0);
	record(&rs, pthread_mutex_unlock(other), 0);
	if (i % 5000 == 0) {
		ts = ts_from_now(CLOCK_REALTIME, 1);
		record(&rs, pthread_rwlock_timedwrlock(&rw, &ts), EDEADLK);
	}
	check_ret(pthread_rwlock_unlock(&rw), 0);
	results_check(&rs);

	while ((r = pthread_rwlock_trywrlock(&rw)) == EBUSY)
		sched_yield();
	check_ret(r, 0);
	counter_rw++;
	record(&rs, pthread_rwlock_trywrlock(&rw), EBUSY);
	record(&rs, pthread_rwlock_tryrdlock(&rw), EBUSY);
	check_ret(pthread_rwlock_unlock(&rw), 0);
	results_check(&rs);

	/* Readers share: a held read lock refuses writers only. */
	check_ret(pthread_rwlock_rdlock(&rw), 0);
	record(&rs, pthread_rwlock_trywrlock(&rw), EBUSY);
	check_ret(pthread_rwlock_unlock(&rw), 0);
	results_check(&rs);
}

static void *worker(void *arg)
{
	pthread_mutex_t *other = arg;

	for (long i = 0; i < ITERS; i++) {
		mutex_round(&m_static, other, i);
		mutex_round(&m_init, other, i);
		rwlock_round(other, i);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[2];

	test_start("test-trylock-nested",
		   "trylock/relock of a lock the caller holds reports it held (EBUSY, EDEADLK, ETIMEDOUT)");
	check_ret(pthread_mutex_init(&m_init.m, NULL), 0);

	/* Uncontended first, then with two threads so adaptive mode elides. */
	mutex_round(&m_static, &others[0], 0);
	mutex_round(&m_init, &others[0], 0);
	rwlock_round(&others[0], 0);
	for (int i = 0; i < 2; i++)
		t[i] = xthread(worker, &others[i + 1]);
	for (int i = 0; i < 2; i++)
		xjoin(t[i]);
	/* And once more now that the locks have a contended history. */
	mutex_round(&m_static, &others[0], 0);
	mutex_round(&m_init, &others[0], 0);
	rwlock_round(&others[0], 0);

	/* Each round counts 3; 2 threads x ITERS rounds plus 2 by main. */
	check_eq(m_static.counter, (2 * ITERS + 2) * 3);
	check_eq(m_init.counter, (2 * ITERS + 2) * 3);
	check_eq(counter_rw, (2 * ITERS + 2) * 2);
	check_ret(pthread_mutex_destroy(&m_init.m), 0);
	printf("test-trylock-nested: PASS\n");
	return 0;
}
