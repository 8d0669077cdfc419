/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A lock the thread itself holds must look held.  Inside a transaction the
 * lock word of an elided lock still reads "free", so a naive elision turns
 * trylock on a held lock into success and a self-deadlock check into
 * nesting.  Two threads contend so adaptive mode really elides.
 */
#include "testutil.h"

#define ITERS 50000L

static pthread_mutex_t m_static = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m_init;
static pthread_mutex_t other = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static long counter_m, counter_rw;

static void mutex_round(pthread_mutex_t *m, long i)
{
	struct timespec ts;
	int r;

	check_ret(pthread_mutex_lock(m), 0);
	counter_m++;
	check_ret(pthread_mutex_trylock(m), EBUSY);
	/* A different, free mutex is still available while holding this one. */
	check_ret(pthread_mutex_trylock(&other), 0);
	check_ret(pthread_mutex_trylock(m), EBUSY);
	check_ret(pthread_mutex_unlock(&other), 0);
	if (i % 5000 == 0) {
		/* glibc's default mutex waits for the deadline on a self-held lock. */
		ts = ts_from_now(CLOCK_REALTIME, 1);
		check_ret(pthread_mutex_timedlock(m, &ts), ETIMEDOUT);
	}
	check_ret(pthread_mutex_unlock(m), 0);

	/* Acquired by trylock first: the second trylock must still see it held. */
	while ((r = pthread_mutex_trylock(m)) == EBUSY)
		sched_yield();
	check_ret(r, 0);
	counter_m++;
	check_ret(pthread_mutex_trylock(m), EBUSY);
	check_ret(pthread_mutex_unlock(m), 0);
}

static void rwlock_round(long i)
{
	struct timespec ts;
	int r;

	check_ret(pthread_rwlock_wrlock(&rw), 0);
	counter_rw++;
	check_ret(pthread_rwlock_trywrlock(&rw), EBUSY);
	check_ret(pthread_rwlock_tryrdlock(&rw), EBUSY);
	/* glibc detects relocking by the writer (__cur_writer == tid). */
	check_ret(pthread_rwlock_wrlock(&rw), EDEADLK);
	check_ret(pthread_rwlock_rdlock(&rw), EDEADLK);
	check_ret(pthread_mutex_trylock(&other), 0);
	check_ret(pthread_mutex_unlock(&other), 0);
	if (i % 5000 == 0) {
		ts = ts_from_now(CLOCK_REALTIME, 1);
		check_ret(pthread_rwlock_timedwrlock(&rw, &ts), EDEADLK);
	}
	check_ret(pthread_rwlock_unlock(&rw), 0);

	while ((r = pthread_rwlock_trywrlock(&rw)) == EBUSY)
		sched_yield();
	check_ret(r, 0);
	counter_rw++;
	check_ret(pthread_rwlock_trywrlock(&rw), EBUSY);
	check_ret(pthread_rwlock_tryrdlock(&rw), EBUSY);
	check_ret(pthread_rwlock_unlock(&rw), 0);

	/* Readers share: a held read lock refuses writers only. */
	check_ret(pthread_rwlock_rdlock(&rw), 0);
	check_ret(pthread_rwlock_trywrlock(&rw), EBUSY);
	check_ret(pthread_rwlock_unlock(&rw), 0);
}

static void *worker(void *arg)
{
	(void)arg;
	for (long i = 0; i < ITERS; i++) {
		mutex_round(&m_static, i);
		mutex_round(&m_init, i);
		rwlock_round(i);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[2];

	test_start("test-trylock-nested",
		   "trylock/relock of a lock the caller holds reports it held (EBUSY, EDEADLK, ETIMEDOUT)");
	check_ret(pthread_mutex_init(&m_init, NULL), 0);

	/* Uncontended first, then with two threads so adaptive mode elides. */
	mutex_round(&m_static, 0);
	mutex_round(&m_init, 0);
	rwlock_round(0);
	for (int i = 0; i < 2; i++)
		t[i] = xthread(worker, NULL);
	for (int i = 0; i < 2; i++)
		xjoin(t[i]);
	/* And once more now that the locks have a contended history. */
	mutex_round(&m_static, 0);
	mutex_round(&m_init, 0);
	rwlock_round(0);

	/* Each mutex_round counts 2 per mutex, 2 mutexes; each rwlock_round 2. */
	check_eq(counter_m, (2 * ITERS + 2) * 4);
	check_eq(counter_rw, (2 * ITERS + 2) * 2);
	check_ret(pthread_mutex_destroy(&m_init), 0);
	printf("test-trylock-nested: PASS\n");
	return 0;
}
