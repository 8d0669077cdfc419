/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * testutil.h - helpers shared by the integration tests.
 *
 * Every test runs under tests/integration/preload.sh, which preloads
 * libelide once per configuration.  test_start() fails when libelide is
 * not loaded, so a test can never pass by accident against plain glibc;
 * ELIDE_TEST_NO_PRELOAD=1 lets a developer run a program by hand without
 * it.  Failures go through _exit(), never exit(): other threads may be
 * inside locks, and a failing test must not hang in atexit handlers.
 */
#ifndef ELIDE_TESTUTIL_H
#define ELIDE_TESTUTIL_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elide.h"

#define EXIT_SKIP 77

/* Seconds before a hang becomes a failure; never a correctness criterion. */
#define WATCHDOG_SECONDS 300

#define fail(fmt, ...) do {							\
		fflush(stdout);							\
		fprintf(stderr, "FAIL %s:%d: " fmt "\n", __FILE__, __LINE__,	\
			##__VA_ARGS__);						\
		_exit(EXIT_FAILURE);						\
	} while (0)

#define check(cond) do {							\
		if (!(cond))							\
			fail("check failed: %s", #cond);			\
	} while (0)

/* For calls returning an errno value (pthread_*) or -errno (elide.h). */
#define check_ret(expr, expected) do {						\
		int _r = (expr), _e = (expected);				\
		if (_r != _e)							\
			fail("%s returned %d (%s), expected %s = %d", #expr,	\
			     _r, strerror(_r < 0 ? -_r : _r), #expected, _e);	\
	} while (0)

#define check_eq(a, b) do {							\
		long long _a = (long long)(a), _b = (long long)(b);		\
		if (_a != _b)							\
			fail("%s = %lld, expected %s = %lld", #a, _a, #b, _b);	\
	} while (0)

/*
 * Inside a critical section only record results, check them after it ends.
 * A failing check prints, and that system call aborts an RTM transaction:
 * the section re-runs with the real lock, gets glibc's answer and the
 * wrong answer would never be seen.  Recorded values survive only if the
 * transaction commits, i.e. exactly when the program acted on them.
 */
#define RESULTS_MAX 16

struct results {
	int n;
	struct {
		int got, want, line;
		const char *what;
	} r[RESULTS_MAX];
};

#define record(rs, expr, expected) do {						\
		struct results *_rs = (rs);					\
		int _got = (expr);						\
		if (_rs->n < RESULTS_MAX) {					\
			_rs->r[_rs->n].got = _got;				\
			_rs->r[_rs->n].want = (expected);			\
			_rs->r[_rs->n].line = __LINE__;				\
			_rs->r[_rs->n].what = #expr;				\
			_rs->n++;						\
		}								\
	} while (0)

#define results_check(rs) do {							\
		struct results *_rc = (rs);					\
		for (int _i = 0; _i < _rc->n; _i++)				\
			if (_rc->r[_i].got != _rc->r[_i].want)			\
				fail("(recorded at line %d) %s returned %d (%s), expected %d (%s)", \
				     _rc->r[_i].line, _rc->r[_i].what,		\
				     _rc->r[_i].got, strerror(_rc->r[_i].got),	\
				     _rc->r[_i].want, strerror(_rc->r[_i].want)); \
		_rc->n = 0;							\
	} while (0)

static inline void watchdog_handler(int sig)
{
	static const char msg[] = "FAIL: watchdog: test hung, killed by SIGALRM\n";
	ssize_t r;

	(void)sig;
	r = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)r;
	_exit(EXIT_FAILURE);
}

/* Turn a hang into a failure.  Call again in fork children: alarms do not survive fork. */
static inline void watchdog(unsigned seconds)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watchdog_handler;
	sigaction(SIGALRM, &sa, NULL);
	alarm(seconds);
}

/*
 * ELIDE_TEST_OPS=N: N operations per thread instead of `default_ops` (for
 * tools/run-rtm-check's long runs); the watchdog grows in proportion.
 */
static inline long test_ops_per_thread(long default_ops)
{
	const char *v = getenv("ELIDE_TEST_OPS");
	char *end;
	long n;

	if (!v || !*v)
		return default_ops;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || n < 1 || n > 1000000000000L)
		fail("ELIDE_TEST_OPS='%s': expected an operation count from 1 to 10^12", v);
	if (n > default_ops)
		watchdog((unsigned)(WATCHDOG_SECONDS * (n / default_ops + 1)));
	return n;
}

static inline bool env_has(const char *name, const char *needle)
{
	const char *v = getenv(name);

	return v && strstr(v, needle);
}

/*
 * Print what runs, arm the watchdog and insist on libelide.  Returns
 * elide_active(): 1 eliding, 0 passing through (or -ENOSYS when the
 * developer asked for a run without libelide).
 */
static inline int test_start(const char *name, const char *what)
{
	const char *elide_env = getenv("ELIDE");
	const char *fake = getenv("ELIDE_FAKE_NO_RTM");
	int active;

	setvbuf(stdout, NULL, _IOLBF, 0);
	watchdog(WATCHDOG_SECONDS);
	active = elide_active();
	printf("%s: %s\n", name, what);
	printf("%s: ELIDE=%s ELIDE_FAKE_NO_RTM=%s elide_active()=%d (%s)\n", name,
	       elide_env ? elide_env : "(unset)", fake ? fake : "(unset)", active,
	       active == 1 ? "eliding" : active == 0 ? "pass-through" : "libelide NOT loaded");

	if (active == -ENOSYS) {
		if (getenv("ELIDE_TEST_NO_PRELOAD"))
			return active;
		fail("libelide is not loaded (elide_active() = -ENOSYS): run through "
		     "tests/integration/preload.sh, or set ELIDE_TEST_NO_PRELOAD=1 to debug without it");
	}
	if (active != 0 && active != 1)
		fail("elide_active() = %d, expected 0 or 1", active);
	/* Pass-through is promised for these two; anything else is the hardware's call. */
	if (fake && strcmp(fake, "1") == 0 && active != 0)
		fail("ELIDE_FAKE_NO_RTM=1 but elide_active() = %d", active);
	if (env_has("ELIDE", "mode=off") && !env_has("ELIDE", "mode=on") &&
	    !env_has("ELIDE", "mode=adaptive") && active != 0)
		fail("ELIDE=mode=off but elide_active() = %d", active);
	return active;
}

static inline pthread_t xthread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	int r = pthread_create(&t, NULL, fn, arg);

	if (r)
		fail("pthread_create: %s", strerror(r));
	return t;
}

static inline void *xjoin(pthread_t t)
{
	void *ret;
	int r = pthread_join(t, &ret);

	if (r)
		fail("pthread_join: %s", strerror(r));
	return ret;
}

static inline void *xmalloc(size_t n)
{
	void *p = calloc(1, n);

	if (!p)
		fail("out of memory (%zu bytes)", n);
	return p;
}

/* Absolute time `ms` milliseconds from now on `clock` (negative: in the past). */
static inline struct timespec ts_from_now(clockid_t clock, long ms)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	} else if (ts.tv_nsec < 0) {
		ts.tv_sec--;
		ts.tv_nsec += 1000000000L;
	}
	return ts;
}

/* xorshift64*: cheap per-thread randomness, no libc state shared between threads. */
static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* ---- run one lock call in another thread and return its result ---- */

enum other_op {
	OTHER_MUTEX_TRYLOCK,      /* trylock; unlocks again on success */
	OTHER_MUTEX_UNLOCK,
	OTHER_MUTEX_TIMEDLOCK,    /* deadline 20 ms ahead; unlocks again on success */
	OTHER_RWLOCK_TRYRDLOCK,   /* unlocks again on success */
	OTHER_RWLOCK_TRYWRLOCK,   /* unlocks again on success */
};

struct other_call {
	enum other_op op;
	pthread_mutex_t *m;
	pthread_rwlock_t *rw;
	int ret;
};

static inline void *other_call_fn(void *arg)
{
	struct other_call *c = arg;
	struct timespec ts;

	switch (c->op) {
	case OTHER_MUTEX_TRYLOCK:
		c->ret = pthread_mutex_trylock(c->m);
		if (c->ret == 0)
			check_ret(pthread_mutex_unlock(c->m), 0);
		break;
	case OTHER_MUTEX_UNLOCK:
		c->ret = pthread_mutex_unlock(c->m);
		break;
	case OTHER_MUTEX_TIMEDLOCK:
		ts = ts_from_now(CLOCK_REALTIME, 20);
		c->ret = pthread_mutex_timedlock(c->m, &ts);
		if (c->ret == 0)
			check_ret(pthread_mutex_unlock(c->m), 0);
		break;
	case OTHER_RWLOCK_TRYRDLOCK:
		c->ret = pthread_rwlock_tryrdlock(c->rw);
		if (c->ret == 0)
			check_ret(pthread_rwlock_unlock(c->rw), 0);
		break;
	case OTHER_RWLOCK_TRYWRLOCK:
		c->ret = pthread_rwlock_trywrlock(c->rw);
		if (c->ret == 0)
			check_ret(pthread_rwlock_unlock(c->rw), 0);
		break;
	}
	return NULL;
}

static inline int in_other_thread(enum other_op op, pthread_mutex_t *m, pthread_rwlock_t *rw)
{
	struct other_call c = { .op = op, .m = m, .rw = rw, .ret = -1 };

	xjoin(xthread(other_call_fn, &c));
	return c.ret;
}

/* ---- contention: make adaptive mode start eliding a lock ---- */

struct hammer {
	pthread_mutex_t *m;
	pthread_rwlock_t *rw;
	long iters;
	int depth;                /* nested acquisitions per iteration (recursive mutexes) */
	long counter;             /* protected by the lock */
	_Atomic long violations;
	_Atomic int inside;
};

static inline void *hammer_fn(void *arg)
{
	struct hammer *h = arg;

	for (long i = 0; i < h->iters; i++) {
		bool write = !h->rw || (i & 3) == 0;

		if (h->m) {
			for (int d = 0; d < h->depth; d++)
				check_ret(pthread_mutex_lock(h->m), 0);
		} else if (write) {
			check_ret(pthread_rwlock_wrlock(h->rw), 0);
		} else {
			check_ret(pthread_rwlock_rdlock(h->rw), 0);
		}

		if (write) {
			/* Anyone else inside a writer section means exclusion broke. */
			if (atomic_exchange_explicit(&h->inside, 1, memory_order_relaxed))
				atomic_fetch_add(&h->violations, 1);
			h->counter++;
			atomic_store_explicit(&h->inside, 0, memory_order_relaxed);
		} else if (atomic_load_explicit(&h->inside, memory_order_relaxed)) {
			atomic_fetch_add(&h->violations, 1);
		}

		if (h->m) {
			for (int d = 0; d < h->depth; d++)
				check_ret(pthread_mutex_unlock(h->m), 0);
		} else {
			check_ret(pthread_rwlock_unlock(h->rw), 0);
		}
	}
	return NULL;
}

/*
 * `nthreads` threads acquire the lock `iters` times each; checks mutual
 * exclusion and that no increment was lost.  Exactly one of m, rw.
 */
static inline void hammer_lock(pthread_mutex_t *m, pthread_rwlock_t *rw, int depth,
			       int nthreads, long iters)
{
	struct hammer h = { .m = m, .rw = rw, .iters = iters, .depth = depth ? depth : 1 };
	pthread_t t[16];
	long writes_per_thread = 0;

	check(nthreads > 0 && nthreads <= 16);
	for (int i = 0; i < nthreads; i++)
		t[i] = xthread(hammer_fn, &h);
	for (int i = 0; i < nthreads; i++)
		xjoin(t[i]);

	for (long i = 0; i < iters; i++)
		if (!rw || (i & 3) == 0)
			writes_per_thread++;
	if (atomic_load(&h.violations))
		fail("mutual exclusion violated %ld times", atomic_load(&h.violations));
	check_eq(h.counter, writes_per_thread * nthreads);
}

#endif
