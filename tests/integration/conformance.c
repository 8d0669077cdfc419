/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conformance - what every interposed pthread function returns, for every
 * mutex type and rwlock kind, against what POSIX and glibc 2.36 specify.
 *
 * One line per case, "scope/case: RESULT" (RESULT: 0 or the errno name),
 * and nothing that depends on addresses, timing or thread ids: the runner,
 * test-conformance.sh, diffs a run under libelide against a run without it.
 * Every result is also checked against the expectations written here, so
 * the program fails by itself too: a mismatch is reported on stderr, the
 * run goes on (the transcript stays complete) and the exit status is 1.
 *
 * Every case runs on a freshly initialised lock twice: "cold", and "hot"
 * after two threads contended it a few thousand times, so libelide takes
 * its tracked slow path (and elides, or aborts under ELIDE_SIM_ABORT).
 * Deadlines are always in the past or invalid: nothing here waits on time.
 *
 * Usage: conformance locks | fd-reuse | max-locks
 *   locks      every mutex type and rwlock kind, cold and hot
 *   fd-reuse   a daemon that closes every fd >= 3, then pipes, forks, logs
 *   max-locks  meant for ELIDE=max_locks=16: annotations fill the lock table
 *
 * Not a test by itself (test-conformance.sh runs it), so it runs happily
 * without libelide.
 */
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "testutil.h"
#include "conformance-util.h"

/* Acquisitions per thread, two threads, that make a lock "hot". */
#define HOT_ITERS 1500L

/* Expected value of a case POSIX leaves undefined for the type: not run. */
#define SKIP INT_MIN

#define BAD_CLOCK ((clockid_t)12345)

/* Low fds a "daemon" refills after closing everything: wherever libelide's
 * own descriptor was, one of the program's now has its number. */
#define LOW_FDS 32

/* Distinct contended mutexes: more records than a segment reserves at first. */
#define MANY_LOCKS 150

/* Locks that live in shared memory: the process-shared cases fork. */
struct shared {
	pthread_mutex_t m;
	pthread_rwlock_t rw;
	pthread_cond_t c;
	int child[8];
};

static struct shared *shm;
/*
 * Inside a critical section that may be elided: only store results (a
 * printf would abort the transaction, the section would re-run with the
 * real lock and show glibc's answer, hiding the elided one), emit after.
 */
#define BATCH_MAX 32

struct batch {
	int n;
	struct {
		const char *name;
		int got, want;
	} o[BATCH_MAX];
};

static inline void note(struct batch *b, const char *name, int got, int want)
{
	if (b->n >= BATCH_MAX) {
		b->n = BATCH_MAX + 1; /* reported by batch_emit() */
		return;
	}
	b->o[b->n].name = name;
	b->o[b->n].got = got;
	b->o[b->n].want = want;
	b->n++;
}

static void batch_emit(struct batch *b)
{
	if (b->n > BATCH_MAX)
		fail("more than %d results in one batch", BATCH_MAX);
	for (int i = 0; i < b->n; i++)
		emit(b->o[i].name, b->o[i].got, b->o[i].want);
	b->n = 0;
}

/* Store a result unless the case is undefined for this type. */
#define NOTE(b, name, want, expr) do {						\
		int w_ = (want);						\
		if (w_ != SKIP)							\
			note(b, name, (expr), w_);				\
	} while (0)

/* The same for an acquisition: undo it when it succeeded (a recursive
 * count goes back down, an unexpected success does not leak). */
#define NOTE_M(b, name, want, m, expr) do {					\
		int w_ = (want);						\
		if (w_ != SKIP) {						\
			int g_ = (expr);					\
			note(b, name, g_, w_);					\
			if (g_ == 0)						\
				(void)pthread_mutex_unlock(m);			\
		}								\
	} while (0)

#define NOTE_RW(b, name, want, rw, expr) do {					\
		int w_ = (want);						\
		if (w_ != SKIP) {						\
			int g_ = (expr);					\
			note(b, name, g_, w_);					\
			if (g_ == 0)						\
				(void)pthread_rwlock_unlock(rw);		\
		}								\
	} while (0)

/* An acquisition while this thread holds nothing: release, then print. */
#define TRY_M(name, want, m, expr) do {						\
		int w_ = (want);						\
		if (w_ != SKIP) {						\
			int g_ = (expr), u_ = g_ == 0 ? pthread_mutex_unlock(m) : 0; \
			emit(name, g_, w_);					\
			if (g_ == 0)						\
				emit(name "+unlock", u_, 0);			\
		}								\
	} while (0)

#define TRY_RW(name, want, rw, expr) do {					\
		int w_ = (want);						\
		if (w_ != SKIP) {						\
			int g_ = (expr), u_ = g_ == 0 ? pthread_rwlock_unlock(rw) : 0; \
			emit(name, g_, w_);					\
			if (g_ == 0)						\
				emit(name "+unlock", u_, 0);			\
		}								\
	} while (0)

/* ---- time ------------------------------------------------------------- */

/* A second ago: an acquisition that would block returns ETIMEDOUT at once. */
static struct timespec ts_past(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	ts.tv_sec -= 1;
	return ts;
}

/* Out of range tv_nsec (in the past too, so it never blocks if unchecked). */
static struct timespec ts_bad(long nsec)
{
	struct timespec ts = ts_past(CLOCK_REALTIME);

	ts.tv_nsec = nsec;
	return ts;
}

/* ---- threads ---------------------------------------------------------- */

/*
 * glibc 2.36 fails the first PTHREAD_PRIO_PROTECT lock of a SCHED_OTHER
 * thread with EINVAL (sched_setscheduler refuses priority 1 for SCHED_OTHER)
 * but keeps the raised ceiling count, so every later one succeeds.  Each
 * thread pays that once, unrecorded, before it touches a lock of a case:
 * the transcript must not depend on which thread came first.
 */
static __thread bool pp_warm;

static void pp_warmup(void)
{
	pthread_mutexattr_t a;
	pthread_mutex_t m;

	if (pp_warm)
		return;
	pp_warm = true;
	check_ret(pthread_mutexattr_init(&a), 0);
	check_ret(pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_PROTECT), 0);
	check_ret(pthread_mutex_init(&m, &a), 0);
	check_ret(pthread_mutexattr_destroy(&a), 0);
	if (pthread_mutex_lock(&m) == 0)
		check_ret(pthread_mutex_unlock(&m), 0);
	check_ret(pthread_mutex_destroy(&m), 0);
}

/* One call in another thread, its result returned. */
struct call {
	int (*fn)(struct call *);
	pthread_mutex_t *m;
	pthread_rwlock_t *rw;
	int ret;
};

static void *call_fn(void *arg)
{
	struct call *c = arg;

	pp_warmup();
	c->ret = c->fn(c);
	return NULL;
}

static int in_thread(int (*fn)(struct call *), pthread_mutex_t *m, pthread_rwlock_t *rw)
{
	struct call c = { .fn = fn, .m = m, .rw = rw, .ret = -1 };

	xjoin(xthread(call_fn, &c));
	return c.ret;
}

static int op_mutex_timedlock_past(struct call *c)
{
	struct timespec ts = ts_past(CLOCK_REALTIME);
	int r = pthread_mutex_timedlock(c->m, &ts);

	if (r == 0)
		(void)pthread_mutex_unlock(c->m);
	return r;
}

static int op_mutex_lock_and_exit(struct call *c)
{
	/* Robust mutexes: the owner dies holding it. */
	return pthread_mutex_lock(c->m);
}

static int op_rw_timedrdlock_past(struct call *c)
{
	struct timespec ts = ts_past(CLOCK_REALTIME);
	int r = pthread_rwlock_timedrdlock(c->rw, &ts);

	if (r == 0)
		(void)pthread_rwlock_unlock(c->rw);
	return r;
}

static int op_rw_timedwrlock_past(struct call *c)
{
	struct timespec ts = ts_past(CLOCK_REALTIME);
	int r = pthread_rwlock_timedwrlock(c->rw, &ts);

	if (r == 0)
		(void)pthread_rwlock_unlock(c->rw);
	return r;
}

/* ---- contention ------------------------------------------------------- */

struct contend {
	pthread_mutex_t *m;
	pthread_rwlock_t *rw;
	int depth;               /* nested acquisitions (recursive mutexes) */
	long counter;            /* written under the lock */
	_Atomic int failed;      /* a lock call that did not return 0 */
};

static void *contend_fn(void *arg)
{
	struct contend *h = arg;

	pp_warmup();
	for (long i = 0; i < HOT_ITERS; i++) {
		int r = 0, d;

		if (h->m) {
			for (d = 0; d < h->depth; d++) {
				r = pthread_mutex_lock(h->m);
				if (r)
					break;
			}
			if (d == h->depth)
				h->counter++;
			while (d-- > 0)
				(void)pthread_mutex_unlock(h->m);
		} else if ((i & 3) == 0) {
			r = pthread_rwlock_wrlock(h->rw);
			if (r == 0) {
				h->counter++;
				(void)pthread_rwlock_unlock(h->rw);
			}
		} else {
			r = pthread_rwlock_rdlock(h->rw);
			if (r == 0)
				(void)pthread_rwlock_unlock(h->rw);
		}
		if (r) {
			atomic_store(&h->failed, r);
			break;
		}
	}
	return NULL;
}

static void hammer(pthread_mutex_t *m, pthread_rwlock_t *rw, int depth)
{
	struct contend h = { .m = m, .rw = rw, .depth = depth };
	pthread_t t[2];

	for (int i = 0; i < 2; i++)
		t[i] = xthread(contend_fn, &h);
	for (int i = 0; i < 2; i++)
		xjoin(t[i]);
	if (atomic_load(&h.failed))
		fail("%s: a lock call returned %s while making the lock hot", scope, errname(atomic_load(&h.failed)));
	check_eq(h.counter, m ? 2 * HOT_ITERS : 2 * ((HOT_ITERS + 3) / 4));
}

/* ---- mutexes ---------------------------------------------------------- */

struct mkind {
	const char *name;
	bool attr;               /* false: pthread_mutex_init(m, NULL) */
	int type, protocol, robust, pshared;
	/* The results that depend on the type; SKIP where POSIX leaves them
	 * undefined (relocking a DEFAULT mutex, unlocking one not held, ...). */
	int self_trylock;        /* trylock by the owner */
	int self_lock;           /* lock by the owner */
	int self_timed;          /* timedlock/clocklock by the owner, past deadline */
	int self_timed_badnsec;  /* the same with tv_nsec out of range */
	int owner_checked;       /* unlock by a non-owner, or of an unlocked mutex */
	int destroy_busy;        /* destroy while locked */
};

#define NONE_ PTHREAD_PRIO_NONE
#define STALLED_ PTHREAD_MUTEX_STALLED
#define PRIVATE_ PTHREAD_PROCESS_PRIVATE

static const struct mkind mkinds[] = {
	/* NORMAL relock deadlocks (POSIX): a timed one times out, a bad
	 * deadline is rejected once it has to wait. */
	{ "normal", true, PTHREAD_MUTEX_NORMAL, NONE_, STALLED_, PRIVATE_,
	  EBUSY, SKIP, ETIMEDOUT, EINVAL, SKIP, EBUSY },
	{ "default", false, 0, 0, 0, 0,
	  EBUSY, SKIP, SKIP, SKIP, SKIP, EBUSY },
	/* ERRORCHECK checks the owner before the deadline. */
	{ "errorcheck", true, PTHREAD_MUTEX_ERRORCHECK, NONE_, STALLED_, PRIVATE_,
	  EBUSY, EDEADLK, EDEADLK, EDEADLK, EPERM, EBUSY },
	/* RECURSIVE counts before it looks at the deadline. */
	{ "recursive", true, PTHREAD_MUTEX_RECURSIVE, NONE_, STALLED_, PRIVATE_,
	  0, 0, 0, 0, EPERM, EBUSY },
	{ "adaptive", true, PTHREAD_MUTEX_ADAPTIVE_NP, NONE_, STALLED_, PRIVATE_,
	  EBUSY, SKIP, SKIP, SKIP, SKIP, EBUSY },
	/* Robust: glibc checks the owner on unlock, and destroys a locked one
	 * without EBUSY (undefined in POSIX: not run). */
	{ "robust", true, PTHREAD_MUTEX_DEFAULT, NONE_, PTHREAD_MUTEX_ROBUST, PRIVATE_,
	  EBUSY, SKIP, SKIP, SKIP, EPERM, SKIP },
	{ "pi", true, PTHREAD_MUTEX_DEFAULT, PTHREAD_PRIO_INHERIT, STALLED_, PRIVATE_,
	  EBUSY, SKIP, SKIP, SKIP, SKIP, EBUSY },
	{ "pp", true, PTHREAD_MUTEX_DEFAULT, PTHREAD_PRIO_PROTECT, STALLED_, PRIVATE_,
	  EBUSY, SKIP, SKIP, SKIP, SKIP, EBUSY },
	{ "pshared", true, PTHREAD_MUTEX_DEFAULT, NONE_, STALLED_, PTHREAD_PROCESS_SHARED,
	  EBUSY, SKIP, SKIP, SKIP, SKIP, EBUSY },
};

static int mutex_init_kind(const struct mkind *k, pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int r;

	if (!k->attr)
		return pthread_mutex_init(m, NULL);
	check_ret(pthread_mutexattr_init(&a), 0);
	check_ret(pthread_mutexattr_settype(&a, k->type), 0);
	check_ret(pthread_mutexattr_setprotocol(&a, k->protocol), 0);
	check_ret(pthread_mutexattr_setrobust(&a, k->robust), 0);
	check_ret(pthread_mutexattr_setpshared(&a, k->pshared), 0);
	r = pthread_mutex_init(m, &a);
	check_ret(pthread_mutexattr_destroy(&a), 0);
	return r;
}

static void mutex_make_hot(const struct mkind *k, pthread_mutex_t *m)
{
	int r;

	hammer(m, NULL, k->type == PTHREAD_MUTEX_RECURSIVE ? 2 : 1);
	/* One contended acquisition for certain: the hammering may not have collided. */
	check_ret(pthread_mutex_lock(m), 0);
	r = in_thread(op_mutex_timedlock_past, m, NULL);
	check_ret(pthread_mutex_unlock(m), 0);
	check_ret(r, ETIMEDOUT);
}

/* Free mutex: every acquisition succeeds; only a bad clock is refused. */
static void mc_free(const struct mkind *k, pthread_mutex_t *m)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	struct timespec neg = ts_bad(-1), big = ts_bad(1000000000L);

	TRY_M("lock", 0, m, pthread_mutex_lock(m));
	TRY_M("trylock", 0, m, pthread_mutex_trylock(m));
	TRY_M("timedlock-past", 0, m, pthread_mutex_timedlock(m, &rt));
	TRY_M("clocklock-monotonic-past", 0, m, pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &mono));
	TRY_M("clocklock-realtime-past", 0, m, pthread_mutex_clocklock(m, CLOCK_REALTIME, &rt));
	/* POSIX: the deadline need not be checked when the mutex is free;
	 * glibc 2.36 does not check it then. */
	TRY_M("timedlock-nsec-negative", 0, m, pthread_mutex_timedlock(m, &neg));
	TRY_M("timedlock-nsec-1e9", 0, m, pthread_mutex_timedlock(m, &big));
	TRY_M("clocklock-nsec-negative", 0, m, pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &neg));
	/* The clock is checked first, always. */
	TRY_M("clocklock-bad-clock", EINVAL, m, pthread_mutex_clocklock(m, BAD_CLOCK, &rt));
	TRY_M("clocklock-cputime-clock", EINVAL, m, pthread_mutex_clocklock(m, CLOCK_PROCESS_CPUTIME_ID, &rt));
	/* Not interposed, but it reads the same lock word. */
	emit("consistent-not-inconsistent", pthread_mutex_consistent(m), EINVAL);
	TRY_M("lock-after", 0, m, pthread_mutex_lock(m));
}

/* Held by this thread: the nested calls are the ones elision can get wrong. */
static void mc_self(const struct mkind *k, pthread_mutex_t *m)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	struct timespec neg = ts_bad(-1);
	struct batch b = { 0 };
	int r;

	r = pthread_mutex_lock(m);
	note(&b, "self/lock", r, 0);
	if (r == 0) {
		NOTE_M(&b, "self/trylock", k->self_trylock, m, pthread_mutex_trylock(m));
		NOTE_M(&b, "self/lock-again", k->self_lock, m, pthread_mutex_lock(m));
		NOTE_M(&b, "self/timedlock-past", k->self_timed, m, pthread_mutex_timedlock(m, &rt));
		NOTE_M(&b, "self/clocklock-monotonic-past", k->self_timed, m,
		       pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &mono));
		NOTE_M(&b, "self/timedlock-nsec-negative", k->self_timed_badnsec, m, pthread_mutex_timedlock(m, &neg));
		NOTE_M(&b, "self/clocklock-bad-clock", EINVAL, m, pthread_mutex_clocklock(m, BAD_CLOCK, &rt));
		NOTE_M(&b, "self/clocklock-cputime-clock", EINVAL, m,
		       pthread_mutex_clocklock(m, CLOCK_PROCESS_CPUTIME_ID, &rt));
		NOTE(&b, "self/destroy", k->destroy_busy, pthread_mutex_destroy(m));
		note(&b, "self/unlock", pthread_mutex_unlock(m), 0);
		NOTE(&b, "self/unlock-unlocked", k->owner_checked, pthread_mutex_unlock(m));
	}
	batch_emit(&b);
}

/* Held by another thread. */
static void mc_other(const struct mkind *k, pthread_mutex_t *m)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	struct timespec neg = ts_bad(-1), big = ts_bad(1000000000L);
	struct holder h;

	hold(&h, HOLD_MUTEX, m, NULL);
	TRY_M("other/trylock", EBUSY, m, pthread_mutex_trylock(m));
	TRY_M("other/timedlock-past", ETIMEDOUT, m, pthread_mutex_timedlock(m, &rt));
	TRY_M("other/clocklock-monotonic-past", ETIMEDOUT, m, pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &mono));
	TRY_M("other/clocklock-realtime-past", ETIMEDOUT, m, pthread_mutex_clocklock(m, CLOCK_REALTIME, &rt));
	TRY_M("other/timedlock-nsec-negative", EINVAL, m, pthread_mutex_timedlock(m, &neg));
	TRY_M("other/timedlock-nsec-1e9", EINVAL, m, pthread_mutex_timedlock(m, &big));
	TRY_M("other/clocklock-nsec-negative", EINVAL, m, pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &neg));
	TRY_M("other/clocklock-bad-clock", EINVAL, m, pthread_mutex_clocklock(m, BAD_CLOCK, &rt));
	TRY_M("other/clocklock-cputime-clock", EINVAL, m, pthread_mutex_clocklock(m, CLOCK_PROCESS_CPUTIME_ID, &rt));
	if (k->owner_checked != SKIP)
		emit("other/unlock-not-owner", pthread_mutex_unlock(m), k->owner_checked);
	if (k->destroy_busy != SKIP)
		emit("other/destroy", pthread_mutex_destroy(m), k->destroy_busy);
	unhold(&h);
	TRY_M("other/trylock-after-release", 0, m, pthread_mutex_trylock(m));
}

static _Atomic int cond_flag;

static int op_cond_signal(struct call *c)
{
	int r = pthread_mutex_lock(c->m);

	if (r)
		return r;
	atomic_store(&cond_flag, 1);
	r = pthread_cond_signal(&shm->c);
	return pthread_mutex_unlock(c->m) ? EPERM : r;
}

static void *cond_signal_thread(void *arg)
{
	struct call *c = arg;

	pp_warmup();
	c->ret = op_cond_signal(c);
	return NULL;
}

/* Condition variables: glibc unlocks and relocks the mutex internally. */
static void mc_cond(const struct mkind *k, pthread_mutex_t *m)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	struct timespec neg = ts_bad(-1), big = ts_bad(1000000000L);
	pthread_cond_t *c = &shm->c;
	struct call sig = { .m = m, .ret = -1 };
	struct batch b = { 0 };
	pthread_t t;
	int r;

	check_ret(pthread_cond_init(c, NULL), 0);
	r = pthread_mutex_lock(m);
	note(&b, "cond/lock", r, 0);
	if (r == 0) {
		note(&b, "cond/timedwait-past", pthread_cond_timedwait(c, m, &rt), ETIMEDOUT);
		note(&b, "cond/clockwait-monotonic-past", pthread_cond_clockwait(c, m, CLOCK_MONOTONIC, &mono),
		     ETIMEDOUT);
		note(&b, "cond/clockwait-realtime-past", pthread_cond_clockwait(c, m, CLOCK_REALTIME, &rt), ETIMEDOUT);
		note(&b, "cond/clockwait-bad-clock", pthread_cond_clockwait(c, m, BAD_CLOCK, &rt), EINVAL);
		note(&b, "cond/clockwait-cputime-clock", pthread_cond_clockwait(c, m, CLOCK_PROCESS_CPUTIME_ID, &rt),
		     EINVAL);
		note(&b, "cond/timedwait-nsec-negative", pthread_cond_timedwait(c, m, &neg), EINVAL);
		note(&b, "cond/timedwait-nsec-1e9", pthread_cond_timedwait(c, m, &big), EINVAL);
		note(&b, "cond/clockwait-nsec-negative", pthread_cond_clockwait(c, m, CLOCK_MONOTONIC, &neg), EINVAL);
		/* Every wait returned with the mutex held again. */
		NOTE_M(&b, "cond/trylock-still-held", k->self_trylock, m, pthread_mutex_trylock(m));
		note(&b, "cond/unlock", pthread_mutex_unlock(m), 0);
	}
	batch_emit(&b);

	/* Woken by another thread, started with the mutex held: it can only
	 * signal once this thread waits. */
	atomic_store(&cond_flag, 0);
	r = pthread_mutex_lock(m);
	note(&b, "cond/wait-lock", r, 0);
	t = xthread(cond_signal_thread, &sig);
	if (r == 0) {
		int w = 0;

		while (w == 0 && !atomic_load(&cond_flag))
			w = pthread_cond_wait(c, m);
		note(&b, "cond/wait-signalled", w, 0);
		note(&b, "cond/wait-unlock", pthread_mutex_unlock(m), 0);
	}
	xjoin(t);
	note(&b, "cond/signaller", sig.ret, 0);
	batch_emit(&b);

	/* Not held: an owner-checking mutex refuses before any wait. */
	if (k->owner_checked != SKIP)
		emit("cond/timedwait-not-held", pthread_cond_timedwait(c, m, &rt), k->owner_checked);
	check_ret(pthread_cond_destroy(c), 0);
}

/*
 * The words glibc keeps in the mutex (__lock, __owner, __nusers, __count),
 * seen from outside: libelide takes and gives a default mutex itself and
 * must leave them exactly as glibc would.  Thread ids print as "self" or
 * "other".  Read only in real holds (a system call inside the section
 * first: an elided hold leaves __lock 0) and printed after the unlock.
 */
static void mutex_words(char *buf, size_t size, const pthread_mutex_t *m)
{
	int tid = (int)syscall(SYS_gettid);
	int lock = __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED);
	int owner = __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED);
	char lock_s[32];

	/* Robust and PI mutexes hold the owner's id, with FUTEX_WAITERS and
	 * FUTEX_OWNER_DIED above it. */
	if ((lock & FUTEX_TID_MASK) == tid)
		snprintf(lock_s, sizeof(lock_s), "self%s%s", lock & FUTEX_WAITERS ? "|waiters" : "",
			 lock & FUTEX_OWNER_DIED ? "|died" : "");
	else
		snprintf(lock_s, sizeof(lock_s), "%d", lock);
	snprintf(buf, size, "lock=%s owner=%s nusers=%u count=%u", lock_s,
		 owner == 0 ? "0" : owner == tid ? "self" : "other", m->__data.__nusers, m->__data.__count);
}

/* Checked against glibc 2.36 for the default mutex; the other kinds only
 * against the reference run, by the diff. */
static void emit_words(const struct mkind *k, const char *name, const char *got, const char *want_default)
{
	emit_str(name, got, k->attr ? got : want_default);
}

struct words_waiter {
	pthread_mutex_t *m;
	int got, released;
};

static void *words_waiter_fn(void *arg)
{
	struct words_waiter *w = arg;

	pp_warmup();
	w->got = pthread_mutex_lock(w->m);
	if (w->got == 0)
		w->released = pthread_mutex_unlock(w->m);
	return NULL;
}

static void mc_words(const struct mkind *k, pthread_mutex_t *m)
{
	static const char free_words[] = "lock=0 owner=0 nusers=0 count=0";
	static const char held_words[] = "lock=1 owner=self nusers=1 count=0";
	struct timespec rt = ts_past(CLOCK_REALTIME);
	pthread_cond_t *c = &shm->c;
	char held[96], busy[96], cond[96], now[96];
	int r, busy_r = -1, cond_r = -1;

	mutex_words(now, sizeof(now), m);
	emit_words(k, "words/free", now, free_words);

	r = pthread_mutex_lock(m);
	if (r == 0) {
		(void)syscall(SYS_getppid);
		mutex_words(held, sizeof(held), m);
		busy_r = pthread_mutex_trylock(m);
		if (busy_r == 0)
			(void)pthread_mutex_unlock(m);
		mutex_words(busy, sizeof(busy), m);
		r = pthread_mutex_unlock(m);
	}
	emit("words/lock+unlock", r, 0);
	if (busy_r != -1) {
		emit_words(k, "words/locked", held, held_words);
		emit("words/trylock-held", busy_r, k->attr ? busy_r : EBUSY);
		emit_words(k, "words/after-trylock-held", busy, held_words);
	}
	mutex_words(now, sizeof(now), m);
	emit_words(k, "words/unlocked", now, free_words);

	r = pthread_mutex_trylock(m);
	if (r == 0) {
		mutex_words(held, sizeof(held), m);
		r = pthread_mutex_unlock(m);
		emit_words(k, "words/trylocked", held, held_words);
	}
	emit("words/trylock+unlock", r, 0);
	mutex_words(now, sizeof(now), m);
	emit_words(k, "words/trylock-unlocked", now, free_words);

	/* glibc's condition variable relocks the mutex itself (as contended:
	 * __lock 2), and the program's unlock then wakes a waiter that is not
	 * there. */
	check_ret(pthread_cond_init(c, NULL), 0);
	r = pthread_mutex_lock(m);
	if (r == 0) {
		(void)syscall(SYS_getppid);
		cond_r = pthread_cond_timedwait(c, m, &rt);
		mutex_words(cond, sizeof(cond), m);
		r = pthread_mutex_unlock(m);
	}
	check_ret(pthread_cond_destroy(c), 0);
	emit("words/cond-lock+unlock", r, 0);
	if (cond_r != -1) {
		emit("words/cond-timedwait-past", cond_r, ETIMEDOUT);
		emit_words(k, "words/after-cond-timedwait", cond, "lock=2 owner=self nusers=1 count=0");
	}
	mutex_words(now, sizeof(now), m);
	emit_words(k, "words/cond-unlocked", now, free_words);

	/* A waiter asleep on the futex (__lock 2): the unlock must wake it. */
	if (k->robust == PTHREAD_MUTEX_STALLED && k->protocol == PTHREAD_PRIO_NONE) {
		struct words_waiter w = { .m = m, .got = -1, .released = -1 };
		pthread_t t;

		r = pthread_mutex_lock(m);
		if (r == 0) {
			(void)syscall(SYS_getppid);
			t = xthread(words_waiter_fn, &w);
			while (__atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) != 2)
				sched_yield();
			mutex_words(held, sizeof(held), m);
			r = pthread_mutex_unlock(m);
			xjoin(t);
			emit_words(k, "words/waited-on", held, "lock=2 owner=self nusers=1 count=0");
			emit("words/waiter-lock", w.got, 0);
			emit("words/waiter-unlock", w.released, 0);
		}
		emit("words/waited-on-lock+unlock", r, 0);
		mutex_words(now, sizeof(now), m);
		emit_words(k, "words/waiter-gone", now, free_words);
	}
}

static void mc_destroy(const struct mkind *k, pthread_mutex_t *m)
{
	char spins[32];

	emit("destroy-free", pthread_mutex_destroy(m), 0);
	/* __spins: glibc's spin estimate, written for adaptive mutexes only;
	 * libelide keeps a backed-off default mutex's skip count there
	 * (libelide/glibc-abi.h) and must leave it 0 again when the mutex is
	 * destroyed. */
	if (k->type != PTHREAD_MUTEX_ADAPTIVE_NP) {
		snprintf(spins, sizeof(spins), "%d", m->__data.__spins);
		emit_str("spins-after-destroy", spins, "0");
	}
	emit("init-again", mutex_init_kind(k, m), 0);
	TRY_M("lock-after-init-again", 0, m, pthread_mutex_lock(m));
}

/* Robust: the owner dies holding it (a thread that exits). */
static void owner_dies(pthread_mutex_t *m)
{
	check_ret(in_thread(op_mutex_lock_and_exit, m, NULL), 0);
}

static void mc_robust_recover(const struct mkind *k, pthread_mutex_t *m)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	struct batch b = { 0 };
	int r;

	owner_dies(m);
	r = pthread_mutex_lock(m);
	note(&b, "robust/lock-owner-died", r, EOWNERDEAD);
	if (r == 0 || r == EOWNERDEAD) {
		note(&b, "robust/consistent", pthread_mutex_consistent(m), r == 0 ? EINVAL : 0);
		note(&b, "robust/unlock", pthread_mutex_unlock(m), 0);
	}
	batch_emit(&b);
	TRY_M("robust/lock-recovered", 0, m, pthread_mutex_lock(m));

	owner_dies(m);
	r = pthread_mutex_timedlock(m, &rt);
	note(&b, "robust/timedlock-owner-died", r, EOWNERDEAD);
	if (r == 0 || r == EOWNERDEAD) {
		note(&b, "robust/consistent-2", pthread_mutex_consistent(m), r == 0 ? EINVAL : 0);
		note(&b, "robust/unlock-2", pthread_mutex_unlock(m), 0);
	}
	batch_emit(&b);

	owner_dies(m);
	r = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &mono);
	note(&b, "robust/clocklock-owner-died", r, EOWNERDEAD);
	if (r == 0 || r == EOWNERDEAD) {
		note(&b, "robust/consistent-3", pthread_mutex_consistent(m), r == 0 ? EINVAL : 0);
		note(&b, "robust/unlock-3", pthread_mutex_unlock(m), 0);
	}
	batch_emit(&b);
	TRY_M("robust/trylock-recovered", 0, m, pthread_mutex_trylock(m));
}

static void mc_robust_unrecoverable(const struct mkind *k, pthread_mutex_t *m)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	struct batch b = { 0 };
	int r;

	owner_dies(m);
	r = pthread_mutex_trylock(m);
	note(&b, "robust/trylock-owner-died", r, EOWNERDEAD);
	/* Unlocked without pthread_mutex_consistent(): unusable for good. */
	if (r == 0 || r == EOWNERDEAD)
		note(&b, "robust/unlock-inconsistent", pthread_mutex_unlock(m), 0);
	batch_emit(&b);
	TRY_M("robust/lock-unrecoverable", ENOTRECOVERABLE, m, pthread_mutex_lock(m));
	TRY_M("robust/timedlock-unrecoverable", ENOTRECOVERABLE, m, pthread_mutex_timedlock(m, &rt));
	TRY_M("robust/clocklock-unrecoverable", ENOTRECOVERABLE, m,
	      pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &mono));
	/* Last: glibc 2.36's trylock answers ENOTRECOVERABLE but leaves the
	 * lock word set, so later blocking calls would wait (ETIMEDOUT). */
	TRY_M("robust/trylock-unrecoverable", ENOTRECOVERABLE, m, pthread_mutex_trylock(m));
	emit("robust/destroy-unrecoverable", pthread_mutex_destroy(m), 0);
}

static int mutex_child_tries(pthread_mutex_t *m)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);

	shm->child[0] = pthread_mutex_trylock(m);
	shm->child[1] = pthread_mutex_timedlock(m, &rt);
	shm->child[2] = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &mono);
	return 0;
}

/* Process-shared: held by this process, tried by a child. */
static void mc_pshared_fork(const struct mkind *k, pthread_mutex_t *m)
{
	int status = 0, r;
	pid_t pid;

	for (int i = 0; i < 3; i++)
		shm->child[i] = -1;
	r = pthread_mutex_lock(m);
	if (r) {
		emit("fork/lock", r, 0);
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		watchdog(60);
		_exit(mutex_child_tries(m));
	}
	if (pid > 0 && waitpid(pid, &status, 0) != pid)
		pid = -1;
	r = pthread_mutex_unlock(m);
	if (pid < 0)
		fail("fork/waitpid: %m");
	emit("fork/unlock", r, 0);
	emit_status("fork/child-exit", status);
	emit("fork/child-trylock", shm->child[0], EBUSY);
	emit("fork/child-timedlock-past", shm->child[1], ETIMEDOUT);
	emit("fork/child-clocklock-monotonic-past", shm->child[2], ETIMEDOUT);
}

typedef void mutex_case(const struct mkind *k, pthread_mutex_t *m);

static void run_mutex_case(const struct mkind *k, bool hot, mutex_case *fn)
{
	pthread_mutex_t *m = &shm->m;

	snprintf(scope, sizeof(scope), "mutex-%s/%s", k->name, hot ? "hot" : "cold");
	check_ret(mutex_init_kind(k, m), 0);
	if (hot)
		mutex_make_hot(k, m);
	fn(k, m);
	/* Some cases destroyed it already or left it unusable: result irrelevant. */
	(void)pthread_mutex_destroy(m);
}

static void mutex_cases(const struct mkind *k)
{
	int r;

	snprintf(scope, sizeof(scope), "mutex-%s", k->name);
	r = mutex_init_kind(k, &shm->m);
	if (r == ENOTSUP && k->protocol == PTHREAD_PRIO_INHERIT) {
		/* The kernel has no PI futexes: the same in both runs. */
		emit_str("init", "ENOTSUP (skipped)", "ENOTSUP (skipped)");
		return;
	}
	emit("init", r, 0);
	if (r)
		return;
	(void)pthread_mutex_destroy(&shm->m);

	for (int hot = 0; hot <= 1; hot++) {
		run_mutex_case(k, hot, mc_free);
		run_mutex_case(k, hot, mc_self);
		run_mutex_case(k, hot, mc_other);
		run_mutex_case(k, hot, mc_cond);
		run_mutex_case(k, hot, mc_words);
		if (k->robust == PTHREAD_MUTEX_ROBUST) {
			run_mutex_case(k, hot, mc_robust_recover);
			run_mutex_case(k, hot, mc_robust_unrecoverable);
		}
		if (k->pshared == PTHREAD_PROCESS_SHARED)
			run_mutex_case(k, hot, mc_pshared_fork);
		run_mutex_case(k, hot, mc_destroy);
	}
}

/* ---- rwlocks ---------------------------------------------------------- */

struct rwkind {
	const char *name;
	bool attr;               /* false: pthread_rwlock_init(rw, NULL) */
	int kind, pshared;
};

static const struct rwkind rwkinds[] = {
	{ "default", false, 0, 0 },
	{ "prefer-writer", true, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP, PTHREAD_PROCESS_PRIVATE },
	{ "pshared", true, PTHREAD_RWLOCK_DEFAULT_NP, PTHREAD_PROCESS_SHARED },
};

static int rwlock_init_kind(const struct rwkind *k, pthread_rwlock_t *rw)
{
	pthread_rwlockattr_t a;
	int r;

	if (!k->attr)
		return pthread_rwlock_init(rw, NULL);
	check_ret(pthread_rwlockattr_init(&a), 0);
	check_ret(pthread_rwlockattr_setkind_np(&a, k->kind), 0);
	check_ret(pthread_rwlockattr_setpshared(&a, k->pshared), 0);
	r = pthread_rwlock_init(rw, &a);
	check_ret(pthread_rwlockattr_destroy(&a), 0);
	return r;
}

static void rwlock_make_hot(pthread_rwlock_t *rw)
{
	int r1, r2, r3;

	hammer(NULL, rw, 1);
	/* Contended for certain, on both sides: a writer, then readers, inside. */
	check_ret(pthread_rwlock_wrlock(rw), 0);
	r1 = in_thread(op_rw_timedrdlock_past, NULL, rw);
	r2 = in_thread(op_rw_timedwrlock_past, NULL, rw);
	check_ret(pthread_rwlock_unlock(rw), 0);
	check_ret(pthread_rwlock_rdlock(rw), 0);
	r3 = in_thread(op_rw_timedrdlock_past, NULL, rw);
	check_ret(pthread_rwlock_unlock(rw), 0);
	check_ret(r1, ETIMEDOUT);
	check_ret(r2, ETIMEDOUT);
	check_ret(r3, 0);
}

/* Free lock: acquisitions succeed; a bad clock or tv_nsec is refused even
 * so (glibc 2.36 checks them before it tries to acquire). */
static void rc_free(const struct rwkind *k, pthread_rwlock_t *rw)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	struct timespec neg = ts_bad(-1), big = ts_bad(1000000000L);

	TRY_RW("rdlock", 0, rw, pthread_rwlock_rdlock(rw));
	TRY_RW("wrlock", 0, rw, pthread_rwlock_wrlock(rw));
	TRY_RW("tryrdlock", 0, rw, pthread_rwlock_tryrdlock(rw));
	TRY_RW("trywrlock", 0, rw, pthread_rwlock_trywrlock(rw));
	TRY_RW("timedrdlock-past", 0, rw, pthread_rwlock_timedrdlock(rw, &rt));
	TRY_RW("timedwrlock-past", 0, rw, pthread_rwlock_timedwrlock(rw, &rt));
	TRY_RW("clockrdlock-monotonic-past", 0, rw, pthread_rwlock_clockrdlock(rw, CLOCK_MONOTONIC, &mono));
	TRY_RW("clockrdlock-realtime-past", 0, rw, pthread_rwlock_clockrdlock(rw, CLOCK_REALTIME, &rt));
	TRY_RW("clockwrlock-monotonic-past", 0, rw, pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &mono));
	TRY_RW("clockwrlock-realtime-past", 0, rw, pthread_rwlock_clockwrlock(rw, CLOCK_REALTIME, &rt));

	TRY_RW("timedrdlock-nsec-negative", EINVAL, rw, pthread_rwlock_timedrdlock(rw, &neg));
	TRY_RW("timedrdlock-nsec-1e9", EINVAL, rw, pthread_rwlock_timedrdlock(rw, &big));
	TRY_RW("timedwrlock-nsec-negative", EINVAL, rw, pthread_rwlock_timedwrlock(rw, &neg));
	TRY_RW("timedwrlock-nsec-1e9", EINVAL, rw, pthread_rwlock_timedwrlock(rw, &big));
	TRY_RW("clockrdlock-bad-clock", EINVAL, rw, pthread_rwlock_clockrdlock(rw, BAD_CLOCK, &rt));
	TRY_RW("clockrdlock-cputime-clock", EINVAL, rw, pthread_rwlock_clockrdlock(rw, CLOCK_PROCESS_CPUTIME_ID, &rt));
	TRY_RW("clockrdlock-nsec-negative", EINVAL, rw, pthread_rwlock_clockrdlock(rw, CLOCK_MONOTONIC, &neg));
	TRY_RW("clockrdlock-nsec-1e9", EINVAL, rw, pthread_rwlock_clockrdlock(rw, CLOCK_MONOTONIC, &big));
	TRY_RW("clockwrlock-bad-clock", EINVAL, rw, pthread_rwlock_clockwrlock(rw, BAD_CLOCK, &rt));
	TRY_RW("clockwrlock-cputime-clock", EINVAL, rw, pthread_rwlock_clockwrlock(rw, CLOCK_PROCESS_CPUTIME_ID, &rt));
	TRY_RW("clockwrlock-nsec-negative", EINVAL, rw, pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &neg));
	TRY_RW("clockwrlock-nsec-1e9", EINVAL, rw, pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &big));
	TRY_RW("wrlock-after", 0, rw, pthread_rwlock_wrlock(rw));
}

/* Write-locked by this thread: every relock is EDEADLK (after the checks
 * of the arguments), the try variants EBUSY. */
static void rc_self_writer(const struct rwkind *k, pthread_rwlock_t *rw)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	struct timespec neg = ts_bad(-1), big = ts_bad(1000000000L);
	struct batch b = { 0 };
	int r;

	r = pthread_rwlock_wrlock(rw);
	note(&b, "self-writer/wrlock", r, 0);
	if (r == 0) {
		NOTE_RW(&b, "self-writer/wrlock-again", EDEADLK, rw, pthread_rwlock_wrlock(rw));
		NOTE_RW(&b, "self-writer/rdlock", EDEADLK, rw, pthread_rwlock_rdlock(rw));
		NOTE_RW(&b, "self-writer/timedwrlock-past", EDEADLK, rw, pthread_rwlock_timedwrlock(rw, &rt));
		NOTE_RW(&b, "self-writer/timedrdlock-past", EDEADLK, rw, pthread_rwlock_timedrdlock(rw, &rt));
		NOTE_RW(&b, "self-writer/clockwrlock-monotonic-past", EDEADLK, rw,
			pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &mono));
		NOTE_RW(&b, "self-writer/clockrdlock-monotonic-past", EDEADLK, rw,
			pthread_rwlock_clockrdlock(rw, CLOCK_MONOTONIC, &mono));
		NOTE_RW(&b, "self-writer/trywrlock", EBUSY, rw, pthread_rwlock_trywrlock(rw));
		NOTE_RW(&b, "self-writer/tryrdlock", EBUSY, rw, pthread_rwlock_tryrdlock(rw));
		NOTE_RW(&b, "self-writer/timedwrlock-nsec-negative", EINVAL, rw, pthread_rwlock_timedwrlock(rw, &neg));
		NOTE_RW(&b, "self-writer/timedrdlock-nsec-1e9", EINVAL, rw, pthread_rwlock_timedrdlock(rw, &big));
		NOTE_RW(&b, "self-writer/clockwrlock-bad-clock", EINVAL, rw,
			pthread_rwlock_clockwrlock(rw, BAD_CLOCK, &rt));
		NOTE_RW(&b, "self-writer/clockrdlock-cputime-clock", EINVAL, rw,
			pthread_rwlock_clockrdlock(rw, CLOCK_PROCESS_CPUTIME_ID, &rt));
		NOTE_RW(&b, "self-writer/clockrdlock-nsec-negative", EINVAL, rw,
			pthread_rwlock_clockrdlock(rw, CLOCK_MONOTONIC, &neg));
		note(&b, "self-writer/unlock", pthread_rwlock_unlock(rw), 0);
	}
	batch_emit(&b);
}

/* Read-locked by this thread: more reads succeed, a write cannot. */
static void rc_self_reader(const struct rwkind *k, pthread_rwlock_t *rw)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	struct timespec neg = ts_bad(-1), big = ts_bad(1000000000L);
	struct batch b = { 0 };
	int r;

	r = pthread_rwlock_rdlock(rw);
	note(&b, "self-reader/rdlock", r, 0);
	if (r == 0) {
		/* Reads first: no writer waits yet, so even a writer-preferring
		 * lock takes a recursive read. */
		NOTE_RW(&b, "self-reader/rdlock-again", 0, rw, pthread_rwlock_rdlock(rw));
		NOTE_RW(&b, "self-reader/tryrdlock", 0, rw, pthread_rwlock_tryrdlock(rw));
		NOTE_RW(&b, "self-reader/timedrdlock-past", 0, rw, pthread_rwlock_timedrdlock(rw, &rt));
		NOTE_RW(&b, "self-reader/clockrdlock-monotonic-past", 0, rw,
			pthread_rwlock_clockrdlock(rw, CLOCK_MONOTONIC, &mono));
		NOTE_RW(&b, "self-reader/timedrdlock-nsec-negative", EINVAL, rw, pthread_rwlock_timedrdlock(rw, &neg));
		NOTE_RW(&b, "self-reader/clockrdlock-bad-clock", EINVAL, rw,
			pthread_rwlock_clockrdlock(rw, BAD_CLOCK, &rt));
		NOTE_RW(&b, "self-reader/trywrlock", EBUSY, rw, pthread_rwlock_trywrlock(rw));
		NOTE_RW(&b, "self-reader/timedwrlock-past", ETIMEDOUT, rw, pthread_rwlock_timedwrlock(rw, &rt));
		NOTE_RW(&b, "self-reader/clockwrlock-monotonic-past", ETIMEDOUT, rw,
			pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &mono));
		NOTE_RW(&b, "self-reader/timedwrlock-nsec-1e9", EINVAL, rw, pthread_rwlock_timedwrlock(rw, &big));
		NOTE_RW(&b, "self-reader/clockwrlock-cputime-clock", EINVAL, rw,
			pthread_rwlock_clockwrlock(rw, CLOCK_PROCESS_CPUTIME_ID, &rt));
		note(&b, "self-reader/unlock", pthread_rwlock_unlock(rw), 0);
	}
	batch_emit(&b);
}

static void rc_other_writer(const struct rwkind *k, pthread_rwlock_t *rw)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	struct timespec neg = ts_bad(-1), big = ts_bad(1000000000L);
	struct holder h;

	hold(&h, HOLD_WRITE, NULL, rw);
	TRY_RW("other-writer/tryrdlock", EBUSY, rw, pthread_rwlock_tryrdlock(rw));
	TRY_RW("other-writer/trywrlock", EBUSY, rw, pthread_rwlock_trywrlock(rw));
	TRY_RW("other-writer/timedrdlock-past", ETIMEDOUT, rw, pthread_rwlock_timedrdlock(rw, &rt));
	TRY_RW("other-writer/timedwrlock-past", ETIMEDOUT, rw, pthread_rwlock_timedwrlock(rw, &rt));
	TRY_RW("other-writer/clockrdlock-monotonic-past", ETIMEDOUT, rw,
	       pthread_rwlock_clockrdlock(rw, CLOCK_MONOTONIC, &mono));
	TRY_RW("other-writer/clockwrlock-monotonic-past", ETIMEDOUT, rw,
	       pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &mono));
	TRY_RW("other-writer/clockrdlock-realtime-past", ETIMEDOUT, rw,
	       pthread_rwlock_clockrdlock(rw, CLOCK_REALTIME, &rt));
	TRY_RW("other-writer/timedrdlock-nsec-negative", EINVAL, rw, pthread_rwlock_timedrdlock(rw, &neg));
	TRY_RW("other-writer/timedwrlock-nsec-1e9", EINVAL, rw, pthread_rwlock_timedwrlock(rw, &big));
	TRY_RW("other-writer/clockrdlock-bad-clock", EINVAL, rw, pthread_rwlock_clockrdlock(rw, BAD_CLOCK, &rt));
	TRY_RW("other-writer/clockwrlock-cputime-clock", EINVAL, rw,
	       pthread_rwlock_clockwrlock(rw, CLOCK_PROCESS_CPUTIME_ID, &rt));
	TRY_RW("other-writer/clockwrlock-nsec-negative", EINVAL, rw,
	       pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &neg));
	unhold(&h);
	TRY_RW("other-writer/trywrlock-after-release", 0, rw, pthread_rwlock_trywrlock(rw));
}

static void rc_other_reader(const struct rwkind *k, pthread_rwlock_t *rw)
{
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	struct timespec big = ts_bad(1000000000L);
	struct holder h;

	hold(&h, HOLD_READ, NULL, rw);
	TRY_RW("other-reader/tryrdlock", 0, rw, pthread_rwlock_tryrdlock(rw));
	TRY_RW("other-reader/rdlock", 0, rw, pthread_rwlock_rdlock(rw));
	TRY_RW("other-reader/timedrdlock-past", 0, rw, pthread_rwlock_timedrdlock(rw, &rt));
	TRY_RW("other-reader/clockrdlock-monotonic-past", 0, rw, pthread_rwlock_clockrdlock(rw, CLOCK_MONOTONIC, &mono));
	TRY_RW("other-reader/timedrdlock-nsec-1e9", EINVAL, rw, pthread_rwlock_timedrdlock(rw, &big));
	TRY_RW("other-reader/trywrlock", EBUSY, rw, pthread_rwlock_trywrlock(rw));
	TRY_RW("other-reader/timedwrlock-past", ETIMEDOUT, rw, pthread_rwlock_timedwrlock(rw, &rt));
	TRY_RW("other-reader/clockwrlock-monotonic-past", ETIMEDOUT, rw,
	       pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &mono));
	TRY_RW("other-reader/clockwrlock-bad-clock", EINVAL, rw, pthread_rwlock_clockwrlock(rw, BAD_CLOCK, &rt));
	unhold(&h);
	TRY_RW("other-reader/trywrlock-after-release", 0, rw, pthread_rwlock_trywrlock(rw));
}

/* Undefined in POSIX; glibc 2.36 checks no owner and returns 0 (the lock
 * is initialised afresh after).  What matters: libelide must not crash
 * (XEND outside a transaction) nor answer differently. */
static void rc_unlock_not_held(const struct rwkind *k, pthread_rwlock_t *rw)
{
	emit("unlock-not-held", pthread_rwlock_unlock(rw), 0);
}

/*
 * The words glibc keeps in an rwlock (__readers: the reader count from bit
 * 3 and the phase flags below it; __cur_writer; the two futex words), seen
 * from outside: libelide takes and gives the read side of a default rwlock
 * itself and must leave them exactly as glibc would.  Read in real holds
 * (a system call inside the section first) and printed after the unlock.
 */
static void rwlock_words(char *buf, size_t size, const pthread_rwlock_t *rw, bool futexes)
{
	int tid = (int)syscall(SYS_gettid);
	unsigned r = __atomic_load_n(&rw->__data.__readers, __ATOMIC_RELAXED);
	int writer = __atomic_load_n(&rw->__data.__cur_writer, __ATOMIC_RELAXED);
	int n;

	n = snprintf(buf, size, "readers=%u flags=%s%s%s%s writer=%s", r >> 3, r & 7 ? "" : "-",
		     r & 1 ? "wrphase," : "", r & 2 ? "wrlocked," : "", r & 4 ? "rwaiting," : "",
		     writer == 0 ? "0" : writer == tid ? "self" : "other");
	if (futexes && n > 0 && (size_t)n < size)
		snprintf(buf + n, size - (size_t)n, " wrphase_futex=%u writers_futex=%u",
			 __atomic_load_n(&rw->__data.__wrphase_futex, __ATOMIC_RELAXED),
			 __atomic_load_n(&rw->__data.__writers_futex, __ATOMIC_RELAXED));
}

static void emit_rw_words(const struct rwkind *k, const char *name, const char *got, const char *want_default)
{
	emit_str(name, got, k->attr ? got : want_default);
}

struct rw_words_writer {
	pthread_rwlock_t *rw;
	int got, released;
	char held[128];
};

static void *rw_words_writer_fn(void *arg)
{
	struct rw_words_writer *w = arg;

	pp_warmup();
	w->got = pthread_rwlock_wrlock(w->rw);
	if (w->got == 0) {
		(void)syscall(SYS_getppid);
		rwlock_words(w->held, sizeof(w->held), w->rw, false);
		w->released = pthread_rwlock_unlock(w->rw);
	}
	return NULL;
}

/* One step: OP on the rwlock (in a real hold when it locks), then its words. */
#define RW_STEP(name, want_r, op, want_words) do { \
		int r_ = (op); \
		(void)syscall(SYS_getppid); \
		rwlock_words(words, sizeof(words), rw, true); \
		emit("words/" name, r_, want_r); \
		emit_rw_words(k, "words/" name "-words", words, want_words); \
	} while (0)

static void rc_words(const struct rwkind *k, pthread_rwlock_t *rw)
{
	char words[128], before[128];

	rwlock_words(words, sizeof(words), rw, true);
	emit_rw_words(k, "words/free", words, "readers=0 flags=- writer=0 wrphase_futex=0 writers_futex=0");
	RW_STEP("rdlock", 0, pthread_rwlock_rdlock(rw), "readers=1 flags=- writer=0 wrphase_futex=0 writers_futex=0");
	RW_STEP("rdlock-second", 0, pthread_rwlock_rdlock(rw),
		"readers=2 flags=- writer=0 wrphase_futex=0 writers_futex=0");
	RW_STEP("unlock-one-of-two", 0, pthread_rwlock_unlock(rw),
		"readers=1 flags=- writer=0 wrphase_futex=0 writers_futex=0");
	RW_STEP("unlock-last", 0, pthread_rwlock_unlock(rw), "readers=0 flags=- writer=0 wrphase_futex=0 writers_futex=0");
	RW_STEP("wrlock", 0, pthread_rwlock_wrlock(rw),
		"readers=0 flags=wrphase,wrlocked, writer=self wrphase_futex=1 writers_futex=1");
	RW_STEP("wrunlock", 0, pthread_rwlock_unlock(rw),
		"readers=0 flags=wrphase, writer=0 wrphase_futex=1 writers_futex=0");
	RW_STEP("rdlock-after-writer", 0, pthread_rwlock_rdlock(rw),
		"readers=1 flags=- writer=0 wrphase_futex=0 writers_futex=0");
	RW_STEP("unlock-after-writer", 0, pthread_rwlock_unlock(rw),
		"readers=0 flags=- writer=0 wrphase_futex=0 writers_futex=0");

	/* A writer waits for this reader: its unlock must hand the lock over. */
	{
		struct rw_words_writer w = { .rw = rw, .got = -1, .released = -1 };
		pthread_t t;
		int r = pthread_rwlock_rdlock(rw);

		if (r == 0) {
			(void)syscall(SYS_getppid);
			t = xthread(rw_words_writer_fn, &w);
			while (!(__atomic_load_n(&rw->__data.__readers, __ATOMIC_RELAXED) & 2))
				sched_yield();
			rwlock_words(before, sizeof(before), rw, false);
			r = pthread_rwlock_unlock(rw);
			xjoin(t);
			emit_rw_words(k, "words/reader-with-writer-waiting", before,
				      "readers=1 flags=wrlocked, writer=0");
			emit("words/handed-over-unlock", r, 0);
			emit("words/waiting-writer-lock", w.got, 0);
			emit("words/waiting-writer-unlock", w.released, 0);
			if (w.got == 0)
				emit_rw_words(k, "words/waiting-writer-held", w.held,
					      "readers=0 flags=wrphase,wrlocked, writer=self");
		}
		rwlock_words(words, sizeof(words), rw, true);
		emit_rw_words(k, "words/after-hand-over", words,
			      "readers=0 flags=wrphase, writer=0 wrphase_futex=1 writers_futex=0");
	}
}

static void rc_destroy(const struct rwkind *k, pthread_rwlock_t *rw)
{
	int r;

	emit("destroy-free", pthread_rwlock_destroy(rw), 0);
	emit("init-again", rwlock_init_kind(k, rw), 0);
	/* POSIX may say EBUSY; glibc 2.36 never checks.  Initialised afresh. */
	r = pthread_rwlock_wrlock(rw);
	if (r == 0)
		r = pthread_rwlock_destroy(rw);
	emit("destroy-write-locked", r, 0);
	emit("init-after-destroy-locked", rwlock_init_kind(k, rw), 0);
	TRY_RW("wrlock-after-init", 0, rw, pthread_rwlock_wrlock(rw));
}

static int rwlock_child_tries(pthread_rwlock_t *rw)
{
	struct timespec rt = ts_past(CLOCK_REALTIME);

	shm->child[0] = pthread_rwlock_tryrdlock(rw);
	shm->child[1] = pthread_rwlock_trywrlock(rw);
	shm->child[2] = pthread_rwlock_timedrdlock(rw, &rt);
	shm->child[3] = pthread_rwlock_timedwrlock(rw, &rt);
	return 0;
}

static void rc_pshared_fork(const struct rwkind *k, pthread_rwlock_t *rw)
{
	int status = 0, r;
	pid_t pid;

	for (int i = 0; i < 4; i++)
		shm->child[i] = -1;
	r = pthread_rwlock_wrlock(rw);
	if (r) {
		emit("fork/wrlock", r, 0);
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		watchdog(60);
		_exit(rwlock_child_tries(rw));
	}
	if (pid > 0 && waitpid(pid, &status, 0) != pid)
		pid = -1;
	r = pthread_rwlock_unlock(rw);
	if (pid < 0)
		fail("fork/waitpid: %m");
	emit("fork/unlock", r, 0);
	emit_status("fork/child-exit", status);
	emit("fork/child-tryrdlock", shm->child[0], EBUSY);
	emit("fork/child-trywrlock", shm->child[1], EBUSY);
	emit("fork/child-timedrdlock-past", shm->child[2], ETIMEDOUT);
	emit("fork/child-timedwrlock-past", shm->child[3], ETIMEDOUT);
}

typedef void rwlock_case(const struct rwkind *k, pthread_rwlock_t *rw);

static void run_rwlock_case(const struct rwkind *k, bool hot, rwlock_case *fn)
{
	pthread_rwlock_t *rw = &shm->rw;

	snprintf(scope, sizeof(scope), "rwlock-%s/%s", k->name, hot ? "hot" : "cold");
	check_ret(rwlock_init_kind(k, rw), 0);
	if (hot)
		rwlock_make_hot(rw);
	fn(k, rw);
	(void)pthread_rwlock_destroy(rw);
}

static void rwlock_cases(const struct rwkind *k)
{
	for (int hot = 0; hot <= 1; hot++) {
		run_rwlock_case(k, hot, rc_free);
		run_rwlock_case(k, hot, rc_self_writer);
		run_rwlock_case(k, hot, rc_self_reader);
		run_rwlock_case(k, hot, rc_other_writer);
		run_rwlock_case(k, hot, rc_other_reader);
		if (k->pshared == PTHREAD_PROCESS_SHARED)
			run_rwlock_case(k, hot, rc_pshared_fork);
		run_rwlock_case(k, hot, rc_unlock_not_held);
		run_rwlock_case(k, hot, rc_words);
		run_rwlock_case(k, hot, rc_destroy);
	}
}

/* The attribute calls libelide wraps (it remembers NORMAL-typed ones). */
static void attr_cases(void)
{
	pthread_mutexattr_t a;

	snprintf(scope, sizeof(scope), "mutexattr");
	check_ret(pthread_mutexattr_init(&a), 0);
	emit("settype-normal", pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL), 0);
	emit("settype-invalid", pthread_mutexattr_settype(&a, 12345), EINVAL);
	emit("settype-errorcheck", pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK), 0);
	emit("settype-default", pthread_mutexattr_settype(&a, PTHREAD_MUTEX_DEFAULT), 0);
	emit("destroy", pthread_mutexattr_destroy(&a), 0);
}

/*
 * A child's own thread id in the mutexes it locks.  fork() runs the
 * pthread_atfork handlers, _Fork() (glibc 2.34) does not: a library that
 * keeps the thread id it found before either must still write the
 * child's into __owner.  The parent locks first, so such a library has
 * its id at hand.
 */
static pid_t fork_by(bool handlers)
{
	return handlers ? fork() : _Fork();
}

static void fork_child_words(const char *name, bool handlers)
{
	static pthread_mutex_t before = PTHREAD_MUTEX_INITIALIZER;
	char held[96] = "";
	int fds[2], status;
	ssize_t n;
	pid_t pid;

	check_ret(pthread_mutex_lock(&before), 0);
	check_ret(pthread_mutex_unlock(&before), 0);
	if (pipe(fds) != 0)
		fail("pipe: %m");
	pid = fork_by(handlers);
	if (pid < 0)
		fail("%s: %m", name);
	if (pid == 0) {
		pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
		char words[96];

		close(fds[0]);
		if (pthread_mutex_lock(&m) != 0)
			_exit(2);
		syscall(SYS_getppid); /* a real hold (see mutex_words()) */
		mutex_words(words, sizeof(words), &m);
		if (pthread_mutex_unlock(&m) != 0)
			_exit(3);
		if (write(fds[1], words, strlen(words)) != (ssize_t)strlen(words))
			_exit(4);
		_exit(0);
	}
	close(fds[1]);
	n = read(fds[0], held, sizeof(held) - 1);
	held[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid)
		fail("waitpid: %m");
	snprintf(scope, sizeof(scope), "%s", name);
	emit_status("child-exit", status);
	emit_str("child-lock-words", held, "lock=1 owner=self nusers=1 count=0");
}

static void fork_cases(void)
{
	fork_child_words("child-of-fork", true);
	fork_child_words("child-of-_Fork", false);
}

static void part_locks(void)
{
	attr_cases();
	fork_cases();
	for (size_t i = 0; i < sizeof(mkinds) / sizeof(mkinds[0]); i++)
		mutex_cases(&mkinds[i]);
	for (size_t i = 0; i < sizeof(rwkinds) / sizeof(rwkinds[0]); i++)
		rwlock_cases(&rwkinds[i]);
}

/* ---- fd reuse (DESIGN.md constraint 7) -------------------------------- */

/* What a daemon does at start-up. */
static void close_all_fds(void)
{
	if (close_range(3, ~0u, 0) == 0)
		return;
	for (int fd = 3; fd < 4096; fd++)
		close(fd);
}

/* Fds 3 .. 3+LOW_FDS-1 all refer to `fd`'s file (fd itself is one of them). */
static void fill_low_fds_with(int fd)
{
	for (int i = 3; i < 3 + LOW_FDS; i++)
		if (i != fd && dup2(fd, i) != i)
			fail("dup2: %m");
}

/*
 * Closes everything, then pipes whose write ends take every low fd number
 * (libelide's own fd had one of them), forks, and the child writes "hello"
 * into each: every pipe must carry exactly that.
 */
static void fd_reuse_fork_pipe(void)
{
	int rd[LOW_FDS], status = 0, bad = 0, child_bad;
	pid_t pid;

	snprintf(scope, sizeof(scope), "fd-reuse");
	close_all_fds();
	for (int i = 0; i < LOW_FDS; i++)
		if (open("/dev/null", O_RDONLY | O_CLOEXEC) != 3 + i)
			fail("open /dev/null did not get fd %d: %m", 3 + i);
	for (int i = 0; i < LOW_FDS; i++) {
		int p[2];

		if (pipe(p) < 0)
			fail("pipe: %m");
		rd[i] = p[0];
		if (dup2(p[1], 3 + i) != 3 + i)
			fail("dup2: %m");
		close(p[1]);
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		fail("fork: %m");
	if (pid == 0) {
		child_bad = 0;
		for (int i = 0; i < LOW_FDS; i++)
			if (write(3 + i, "hello", 5) != 5)
				child_bad++;
		_exit(child_bad ? 1 : 0);
	}
	for (int i = 0; i < LOW_FDS; i++)
		close(3 + i);
	for (int i = 0; i < LOW_FDS; i++) {
		char buf[64];
		size_t len = 0;
		ssize_t n;

		/* Bounded: the child has exited or will, closing its ends. */
		while (len < sizeof(buf) - 1 && (n = read(rd[i], buf + len, sizeof(buf) - 1 - len)) != 0) {
			if (n < 0) {
				if (errno == EINTR)
					continue;
				break;
			}
			len += (size_t)n;
		}
		buf[len] = '\0';
		if (strcmp(buf, "hello") != 0)
			bad++;
		close(rd[i]);
	}
	if (waitpid(pid, &status, 0) != pid)
		fail("waitpid: %m");
	emit_status("fork-child-writes", status);
	emit_str("fork-pipe-data", bad ? "lost" : "hello", "hello");
}

static void *contend_many(void *arg)
{
	pthread_mutex_t *locks = arg;
	struct timespec rt = ts_past(CLOCK_REALTIME);
	long bad = 0;

	for (int i = 0; i < MANY_LOCKS; i++) {
		int r = pthread_mutex_timedlock(&locks[i], &rt);

		if (r == 0)
			(void)pthread_mutex_unlock(&locks[i]);
		if (r != ETIMEDOUT)
			bad++;
	}
	return (void *)bad;
}

/*
 * Closes everything, opens a log file (a low fd: every low fd is it), logs
 * 9 bytes, then contends many distinct mutexes (libelide makes records for
 * them and needs more room in its segment): the log must stay 9 bytes.
 */
static void fd_reuse_log(void)
{
	const char *dir = getenv("TMPDIR");
	pthread_mutex_t *locks;
	char path[PATH_MAX];
	struct stat st;
	void *bad;
	int fd;

	snprintf(scope, sizeof(scope), "fd-reuse");
	snprintf(path, sizeof(path), "%s/elide-conformance-log.XXXXXX", dir && *dir ? dir : "/tmp");
	close_all_fds();
	fd = mkstemp(path);
	if (fd < 0)
		fail("mkstemp %s: %m", path);
	unlink(path); /* nothing left behind; fstat still works */
	fill_low_fds_with(fd);
	if (write(fd, "123456789", 9) != 9)
		fail("write: %m");

	locks = xmalloc(MANY_LOCKS * sizeof(*locks));
	for (int i = 0; i < MANY_LOCKS; i++)
		check_ret(pthread_mutex_init(&locks[i], NULL), 0);
	for (int i = 0; i < MANY_LOCKS; i++)
		check_ret(pthread_mutex_lock(&locks[i]), 0);
	bad = xjoin(xthread(contend_many, locks));
	for (int i = MANY_LOCKS; i-- > 0;)
		check_ret(pthread_mutex_unlock(&locks[i]), 0);
	emit_str("contended-timedlock", bad ? "not always ETIMEDOUT" : "ETIMEDOUT", "ETIMEDOUT");

	if (fstat(fd, &st) < 0)
		fail("fstat: %m");
	printf("%s/log-size: %lld\n", scope, (long long)st.st_size);
	if (st.st_size != 9) {
		fflush(stdout);
		fprintf(stderr, "conformance: MISMATCH %s/log-size: the program's log file grew to %lld bytes, "
			"it wrote 9\n", scope, (long long)st.st_size);
		mismatches++;
	}
	for (int i = 0; i < MANY_LOCKS; i++)
		check_ret(pthread_mutex_destroy(&locks[i]), 0);
	free(locks);
	for (int i = 3; i < 3 + LOW_FDS; i++)
		close(i);
}

static void part_fd_reuse(void)
{
	fd_reuse_fork_pipe();
	fd_reuse_log();
}

/* ---- a full lock table (ELIDE=max_locks=16) --------------------------- */

/*
 * glibc's `short __elision` (named __unused from 2.43): bytes 22-23 of an
 * x86_64 mutex, where libelide keeps a lock's record index.  glibc without
 * its own elision leaves it 0.  Read by offset: either name works.
 */
#define MUTEX_ELISION_OFFSET 22
#if defined(__GLIBC__) && (__GLIBC__ == 2 && __GLIBC_MINOR__ < 43)
_Static_assert(offsetof(pthread_mutex_t, __data.__elision) == MUTEX_ELISION_OFFSET, "glibc mutex layout");
#endif

static int mutex_elision_field(const pthread_mutex_t *m)
{
	short v;

	memcpy(&v, (const char *)m + MUTEX_ELISION_OFFSET, sizeof(v));
	return v;
}

static int annotate_ok(int r)
{
	/* 0 or -ENOSPC under libelide, -ENOSYS without it. */
	return r == 0 || r == -ENOSPC || r == -ENOSYS;
}

static void part_max_locks(void)
{
	static pthread_mutex_t fill[64];
	pthread_mutex_t *e = &shm->m, r2;
	struct timespec rt = ts_past(CLOCK_REALTIME), mono = ts_past(CLOCK_MONOTONIC);
	const struct mkind *ec = &mkinds[2];
	struct batch b = { 0 };
	int nospc = 0, others = 0, r;

	snprintf(scope, sizeof(scope), "max-locks");
	check(strcmp(ec->name, "errorcheck") == 0);
	for (int i = 0; i < 64; i++) {
		check_ret(pthread_mutex_init(&fill[i], NULL), 0);
		r = elide_mutex_set_name(&fill[i], "fill");
		if (r == -ENOSPC)
			nospc++;
		else if (!annotate_ok(r))
			others++;
	}
	emit_str("fill-table", others ? "unexpected" : elide_active() != -ENOSYS && !nospc ? "not-full" : "full",
		 "full");

	/* An errorcheck mutex named in a full table: still glibc's. */
	check_ret(mutex_init_kind(ec, e), 0);
	r = elide_mutex_set_name(e, "errorcheck");
	emit_str("annotate-errorcheck", annotate_ok(r) ? "0, -ENOSPC or -ENOSYS" : errname(r),
		 "0, -ENOSPC or -ENOSYS");
	printf("%s/errorcheck-elision-field: %d\n", scope, mutex_elision_field(e));
	if (mutex_elision_field(e) != 0) {
		fflush(stdout);
		fprintf(stderr, "conformance: MISMATCH %s/errorcheck-elision-field: glibc's __elision of an "
			"errorcheck mutex is %d, glibc leaves it 0\n", scope, mutex_elision_field(e));
		mismatches++;
	}
	for (int round = 0; round < 2; round++) {
		snprintf(scope, sizeof(scope), "max-locks/errorcheck-%s", round ? "hot" : "cold");
		if (round)
			mutex_make_hot(ec, e);
		r = pthread_mutex_lock(e);
		note(&b, "lock", r, 0);
		if (r == 0) {
			NOTE_M(&b, "lock-again", EDEADLK, e, pthread_mutex_lock(e));
			NOTE_M(&b, "trylock-again", EBUSY, e, pthread_mutex_trylock(e));
			NOTE_M(&b, "timedlock-again", EDEADLK, e, pthread_mutex_timedlock(e, &rt));
			NOTE_M(&b, "clocklock-again", EDEADLK, e, pthread_mutex_clocklock(e, CLOCK_MONOTONIC, &mono));
			note(&b, "unlock", pthread_mutex_unlock(e), 0);
			note(&b, "unlock-unlocked", pthread_mutex_unlock(e), EPERM);
		}
		batch_emit(&b);
		mc_other(ec, e);
	}
	snprintf(scope, sizeof(scope), "max-locks");
	printf("%s/errorcheck-elision-field-after: %d\n", scope, mutex_elision_field(e));
	if (mutex_elision_field(e) != 0) {
		fflush(stdout);
		fprintf(stderr, "conformance: MISMATCH %s/errorcheck-elision-field-after: %d, glibc leaves it 0\n",
			scope, mutex_elision_field(e));
		mismatches++;
	}
	emit("errorcheck-destroy", pthread_mutex_destroy(e), 0);

	/* A recursive one too: its count must stay glibc's. */
	check_ret(mutex_init_kind(&mkinds[3], &r2), 0);
	r = elide_mutex_set_name(&r2, "recursive");
	emit_str("annotate-recursive", annotate_ok(r) ? "0, -ENOSPC or -ENOSYS" : errname(r), "0, -ENOSPC or -ENOSYS");
	hammer(&r2, NULL, 2);
	r = pthread_mutex_lock(&r2);
	note(&b, "recursive-lock", r, 0);
	if (r == 0) {
		NOTE_M(&b, "recursive-lock-again", 0, &r2, pthread_mutex_lock(&r2));
		note(&b, "recursive-unlock", pthread_mutex_unlock(&r2), 0);
		note(&b, "recursive-unlock-unlocked", pthread_mutex_unlock(&r2), EPERM);
	}
	batch_emit(&b);
	printf("%s/recursive-elision-field: %d\n", scope, mutex_elision_field(&r2));
	if (mutex_elision_field(&r2) != 0) {
		fflush(stdout);
		fprintf(stderr, "conformance: MISMATCH %s/recursive-elision-field: %d, glibc leaves it 0\n", scope,
			mutex_elision_field(&r2));
		mismatches++;
	}
	emit("recursive-destroy", pthread_mutex_destroy(&r2), 0);
	for (int i = 0; i < 64; i++)
		check_ret(pthread_mutex_destroy(&fill[i]), 0);
}

int main(int argc, char **argv)
{
	const char *part = argc == 2 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	watchdog(WATCHDOG_SECONDS);
	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED)
		fail("mmap: %m");
	pp_warmup();
	holder_thread_start = pp_warmup;

	if (strcmp(part, "locks") == 0)
		part_locks();
	else if (strcmp(part, "fd-reuse") == 0)
		part_fd_reuse();
	else if (strcmp(part, "max-locks") == 0)
		part_max_locks();
	else {
		fprintf(stderr, "usage: %s locks | fd-reuse | max-locks\n", argv[0]);
		return 2;
	}
	fflush(stdout);
	if (mismatches) {
		fprintf(stderr, "conformance: %s: %d result(s) differ from POSIX/glibc 2.36\n", part, mismatches);
		return 1;
	}
	return 0;
}
