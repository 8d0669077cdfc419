/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Condition variables on contended (so elided) mutexes.  glibc's
 * pthread_cond_*wait release and retake the mutex internally, behind any
 * interposer's back, so a wait entered from an elided section must first
 * turn it into a real one.  Checks: every item is consumed exactly once,
 * the mutex is exclusive after every wakeup, and a wait whose deadline has
 * passed returns ETIMEDOUT with the mutex held.
 */
#include "testutil.h"

#define NITEMS 200000L
#define NPRODUCERS 2
#define RING 64

enum wait_kind { WAIT_PLAIN, WAIT_TIMED, WAIT_CLOCK_MONO, WAIT_CLOCK_REAL, WAIT_NKINDS };

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

/* Protected by m. */
static long ring[RING];
static unsigned head, count;
static long taken;
static unsigned char *seen;
static bool done;
static int inside;

static _Atomic long violations;
static _Atomic long timeouts;

static void enter(void)
{
	if (inside)
		atomic_fetch_add(&violations, 1);
	inside = 1;
}

static void leave(void)
{
	inside = 0;
}

/* Wait on c with the given flavour; returns with m held either way. */
static void cwait(pthread_cond_t *c, enum wait_kind kind)
{
	struct timespec ts;
	int r = 0;

	leave();
	switch (kind) {
	case WAIT_PLAIN:
		r = pthread_cond_wait(c, &m);
		break;
	case WAIT_TIMED:
		ts = ts_from_now(CLOCK_REALTIME, 20);
		r = pthread_cond_timedwait(c, &m, &ts);
		break;
	case WAIT_CLOCK_MONO:
	case WAIT_CLOCK_REAL:
#ifdef HAVE_PTHREAD_COND_CLOCKWAIT
		{
			clockid_t clk = kind == WAIT_CLOCK_MONO ? CLOCK_MONOTONIC : CLOCK_REALTIME;

			ts = ts_from_now(clk, 20);
			r = pthread_cond_clockwait(c, &m, clk, &ts);
		}
#else
		ts = ts_from_now(CLOCK_REALTIME, 20);
		r = pthread_cond_timedwait(c, &m, &ts);
#endif
		break;
	case WAIT_NKINDS:
		fail("bad wait kind");
	}
	if (r == ETIMEDOUT)
		atomic_fetch_add(&timeouts, 1);
	else if (r != 0)
		fail("condition wait (kind %d) returned %d (%s)", kind, r, strerror(r));
	enter();
}

static void *producer(void *arg)
{
	long id = (long)(intptr_t)arg;
	enum wait_kind kind = id == 0 ? WAIT_PLAIN : WAIT_TIMED;

	for (long i = id; i < NITEMS; i += NPRODUCERS) {
		check_ret(pthread_mutex_lock(&m), 0);
		enter();
		while (count == RING)
			cwait(&not_full, kind);
		ring[(head + count) % RING] = i;
		count++;
		check_ret(pthread_cond_signal(&not_empty), 0);
		leave();
		check_ret(pthread_mutex_unlock(&m), 0);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	enum wait_kind kind = (enum wait_kind)(intptr_t)arg;
	long got = 0;

	check_ret(pthread_mutex_lock(&m), 0);
	enter();
	for (;;) {
		long item;

		while (count == 0 && taken < NITEMS)
			cwait(&not_empty, kind);
		if (count == 0)
			break;
		item = ring[head];
		head = (head + 1) % RING;
		count--;
		taken++;
		if (item < 0 || item >= NITEMS)
			fail("consumed a bogus item %ld", item);
		seen[item]++;
		got++;
		check_ret(pthread_cond_signal(&not_full), 0);
		/* The last item wakes every consumer so they can leave. */
		if (taken == NITEMS)
			check_ret(pthread_cond_broadcast(&not_empty), 0);
		if ((got & 7) == 0) {
			/* Let others at the mutex now and then, waiting or not. */
			leave();
			check_ret(pthread_mutex_unlock(&m), 0);
			check_ret(pthread_mutex_lock(&m), 0);
			enter();
		}
	}
	leave();
	check_ret(pthread_mutex_unlock(&m), 0);
	return (void *)(intptr_t)got;
}

/* Extra contention on m; checks the ring's invariants and times out on a silent condvar. */
static void *noise(void *arg)
{
	long n = 0;

	(void)arg;
	for (;;) {
		struct timespec ts;

		check_ret(pthread_mutex_lock(&m), 0);
		enter();
		if (count > RING || taken > NITEMS)
			fail("ring broken: count %u taken %ld", count, taken);
		if (done) {
			leave();
			check_ret(pthread_mutex_unlock(&m), 0);
			break;
		}
		if (++n % 2000 == 0) {
			/* Deadline already passed: ETIMEDOUT, mutex held again on return. */
			ts = ts_from_now(CLOCK_REALTIME, -1000);
			leave();
			check_ret(pthread_cond_timedwait(&never, &m, &ts), ETIMEDOUT);
			enter();
		}
		leave();
		check_ret(pthread_mutex_unlock(&m), 0);
	}
	return (void *)(intptr_t)n;
}

/* ---- ETIMEDOUT with the mutex held: another thread's trylock must fail ---- */

static _Atomic int probe_req, probe_ret;

static void *prober(void *arg)
{
	(void)arg;
	for (;;) {
		int req;

		while ((req = atomic_load(&probe_req)) == 0)
			sched_yield();
		if (req < 0)
			return NULL;
		atomic_store(&probe_ret, pthread_mutex_trylock(&m));
		if (atomic_load(&probe_ret) == 0)
			check_ret(pthread_mutex_unlock(&m), 0);
		atomic_store(&probe_req, 0);
	}
}

static int probe_trylock(void)
{
	atomic_store(&probe_req, 1);
	while (atomic_load(&probe_req) != 0)
		sched_yield();
	return atomic_load(&probe_ret);
}

static void past_deadline(enum wait_kind kind, const char *what)
{
	struct timespec ts;
	int r = -1;

	check_ret(pthread_mutex_lock(&m), 0);
	switch (kind) {
	case WAIT_TIMED:
		ts = ts_from_now(CLOCK_REALTIME, -1);
		r = pthread_cond_timedwait(&never, &m, &ts);
		break;
#ifdef HAVE_PTHREAD_COND_CLOCKWAIT
	case WAIT_CLOCK_MONO:
		ts = ts_from_now(CLOCK_MONOTONIC, -1);
		r = pthread_cond_clockwait(&never, &m, CLOCK_MONOTONIC, &ts);
		break;
	case WAIT_CLOCK_REAL:
		ts = ts_from_now(CLOCK_REALTIME, -1);
		r = pthread_cond_clockwait(&never, &m, CLOCK_REALTIME, &ts);
		break;
#endif
	default:
		fail("bad wait kind %d", kind);
	}
	if (r != ETIMEDOUT)
		fail("%s with a past deadline returned %d (%s), expected ETIMEDOUT", what, r, strerror(r));
	check_ret(pthread_mutex_trylock(&m), EBUSY);
	r = probe_trylock();
	if (r != EBUSY)
		fail("after %s returned ETIMEDOUT another thread's trylock got %d (%s): mutex not held",
		     what, r, strerror(r));
	check_ret(pthread_mutex_unlock(&m), 0);
	/* Released now: the other thread gets it (once the noise threads let it). */
	while ((r = probe_trylock()) == EBUSY)
		sched_yield();
	check_ret(r, 0);
	printf("test-condwait: %s past deadline: ETIMEDOUT, mutex held\n", what);
}

static void past_deadlines(void)
{
	past_deadline(WAIT_TIMED, "pthread_cond_timedwait");
#ifdef HAVE_PTHREAD_COND_CLOCKWAIT
	past_deadline(WAIT_CLOCK_MONO, "pthread_cond_clockwait(CLOCK_MONOTONIC)");
	past_deadline(WAIT_CLOCK_REAL, "pthread_cond_clockwait(CLOCK_REALTIME)");
#endif
}

int main(void)
{
	pthread_t prod[NPRODUCERS], cons[WAIT_NKINDS], nz[2], probe;
	long consumed = 0, noise_ops = 0;

	test_start("test-condwait",
		   "cond wait/timedwait/clockwait on contended mutexes: no lost or duplicated items, "
		   "ETIMEDOUT returns with the mutex held");
	seen = xmalloc(NITEMS);
	probe = xthread(prober, NULL);

	past_deadlines();

	for (int i = 0; i < 2; i++)
		nz[i] = xthread(noise, NULL);
	for (int i = 0; i < WAIT_NKINDS; i++)
		cons[i] = xthread(consumer, (void *)(intptr_t)i);
	for (int i = 0; i < NPRODUCERS; i++)
		prod[i] = xthread(producer, (void *)(intptr_t)i);

	for (int i = 0; i < NPRODUCERS; i++)
		xjoin(prod[i]);
	for (int i = 0; i < WAIT_NKINDS; i++)
		consumed += (long)(intptr_t)xjoin(cons[i]);

	/* m now has a contended history; check past deadlines while the noise still runs. */
	past_deadlines();

	check_ret(pthread_mutex_lock(&m), 0);
	done = true;
	check_ret(pthread_mutex_unlock(&m), 0);
	for (int i = 0; i < 2; i++)
		noise_ops += (long)(intptr_t)xjoin(nz[i]);
	atomic_store(&probe_req, -1);
	xjoin(probe);

	printf("test-condwait: %ld items consumed, %ld noise acquisitions, %ld wait timeouts\n",
	       consumed, noise_ops, atomic_load(&timeouts));
	check_eq(atomic_load(&violations), 0);
	check_eq(consumed, NITEMS);
	check_eq(taken, NITEMS);
	check_eq(count, 0);
	for (long i = 0; i < NITEMS; i++)
		if (seen[i] != 1)
			fail("item %ld consumed %d times", i, seen[i]);
	free(seen);
	printf("test-condwait: PASS\n");
	return 0;
}
