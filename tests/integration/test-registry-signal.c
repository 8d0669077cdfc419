/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libelide's lock table must never wait: a signal handler that names a
 * lock, types a mutex attribute or destroys a mutex may interrupt the same
 * thread in the middle of doing so itself.  With a spinlock around the
 * table (as libelide once had) the handler spins on a lock its own thread
 * holds, for ever; the watchdog turns that into a failure.
 *
 * A timer fires every 50 us of the thread's CPU time while the main loop
 * does the same table operations; the handler's work is bounded, the loop
 * too.  Nothing here is timed: only a hang fails.
 */
#include <sys/time.h>

#include "testutil.h"

#define LOOPS 200000
#define HANDLER_LOCKS 64

static pthread_mutex_t handler_locks[HANDLER_LOCKS];
static volatile sig_atomic_t handler_runs;

static void table_work(pthread_mutex_t *m, const char *name)
{
	pthread_mutexattr_t attr;

	/* Typing an attribute NORMAL and destroying it marks and unmarks it. */
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_NORMAL);
	pthread_mutexattr_destroy(&attr);
	/* Naming a mutex gives it a record; destroying it recycles the record. */
	pthread_mutex_init(m, NULL);
	(void)elide_mutex_set_name(m, name);
	pthread_mutex_lock(m);
	pthread_mutex_unlock(m);
	pthread_mutex_destroy(m);
}

static void on_tick(int sig)
{
	int saved_errno = errno;

	(void)sig;
	table_work(&handler_locks[handler_runs % HANDLER_LOCKS], "handler");
	handler_runs++;
	errno = saved_errno;
}

int main(void)
{
	struct itimerval tick = { .it_interval = { 0, 50 }, .it_value = { 0, 50 } };
	struct sigaction sa;
	pthread_mutex_t m;

	test_start("test-registry-signal", "lock table operations interrupted by a signal handler doing the same");
	watchdog(120); /* a hang is the failure this test looks for: sooner */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_tick;
	sa.sa_flags = SA_RESTART;
	check(sigaction(SIGPROF, &sa, NULL) == 0);
	check(setitimer(ITIMER_PROF, &tick, NULL) == 0);
	for (int i = 0; i < LOOPS; i++)
		table_work(&m, "main");
	memset(&tick, 0, sizeof(tick));
	check(setitimer(ITIMER_PROF, &tick, NULL) == 0);
	printf("test-registry-signal: %d loops, %d handler runs, no hang\n", LOOPS, (int)handler_runs);
	/* Without interruptions the test proved nothing: the timer must fire. */
	check(handler_runs > 0);
	return 0;
}
