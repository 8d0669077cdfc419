/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pthread_mutex_unlock on a default mutex nobody holds.  glibc tolerates it;
 * an elision layer that answers every unlock of a free-looking lock with
 * XEND faults (#GP outside a transaction), or, inside another lock's
 * transaction, commits that other lock's critical section early.  Must not
 * crash, must give the same answer before and after the mutex is elided,
 * and the mutex must still exclude afterwards.
 */
#include "testutil.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t outer = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t stray = PTHREAD_MUTEX_INITIALIZER;
static long outer_counter;

static void still_usable(const char *when)
{
	check_ret(pthread_mutex_trylock(&m), 0);
	check_ret(pthread_mutex_trylock(&m), EBUSY);
	check_ret(in_other_thread(OTHER_MUTEX_TRYLOCK, &m, NULL), EBUSY);
	check_ret(pthread_mutex_unlock(&m), 0);
	check_ret(in_other_thread(OTHER_MUTEX_TRYLOCK, &m, NULL), 0);
	hammer_lock(&m, NULL, 1, 2, 50000);
	printf("test-unlock-unlocked: mutex still excludes %s\n", when);
}

/* Unlock a free mutex from inside another (contended, so elided) critical section. */
static void *stray_unlocker(void *arg)
{
	(void)arg;
	for (long i = 0; i < 50000; i++) {
		check_ret(pthread_mutex_lock(&outer), 0);
		outer_counter++;
		if (i % 16 == 0)
			(void)pthread_mutex_unlock(&stray);
		outer_counter++;
		check_ret(pthread_mutex_unlock(&outer), 0);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[2];
	int before, after;

	test_start("test-unlock-unlocked",
		   "unlocking an unlocked default mutex does not crash, answers consistently, "
		   "and leaves the mutex usable (also after it was elided)");

	before = pthread_mutex_unlock(&m);
	printf("test-unlock-unlocked: unlock of a never-locked mutex: %d (%s)\n", before, strerror(before));
	still_usable("after unlocking it unlocked");

	/* Now m has a contended history (adaptive mode elides it): repeat. */
	hammer_lock(&m, NULL, 1, 2, 100000);
	after = pthread_mutex_unlock(&m);
	printf("test-unlock-unlocked: unlock of an unlocked, contended mutex: %d (%s)\n",
	       after, strerror(after));
	check_eq(after, before);
	after = pthread_mutex_unlock(&m);
	check_eq(after, before);
	still_usable("after unlocking it unlocked twice more");

	/* Stray unlocks nested in another lock's critical section. */
	for (int i = 0; i < 2; i++)
		t[i] = xthread(stray_unlocker, NULL);
	for (int i = 0; i < 2; i++)
		xjoin(t[i]);
	check_eq(outer_counter, 2 * 2 * 50000);
	check_ret(pthread_mutex_trylock(&stray), 0);
	check_ret(pthread_mutex_trylock(&stray), EBUSY);
	check_ret(pthread_mutex_unlock(&stray), 0);
	hammer_lock(&stray, NULL, 1, 2, 20000);
	hammer_lock(&outer, NULL, 1, 2, 20000);
	printf("test-unlock-unlocked: stray unlocks inside an elided section left both mutexes usable\n");

	printf("test-unlock-unlocked: PASS\n");
	return 0;
}
