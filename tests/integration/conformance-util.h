/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conformance-util.h - the transcript of the conformance programs
 * (conformance.c, conformance-edge.c): one line per case, "scope/case:
 * RESULT", each checked against what POSIX and glibc 2.36 specify.  A
 * mismatch is reported on stderr and counted; the run goes on, so the
 * transcript stays complete, and the program exits 1 at the end.
 *
 * Include after testutil.h.
 */
#ifndef ELIDE_CONFORMANCE_UTIL_H
#define ELIDE_CONFORMANCE_UTIL_H

#include <sys/wait.h>

static char scope[64];
static int mismatches;

static inline const char *errname(int e)
{
	static char buf[4][24];
	static unsigned next;
	char *b;

	switch (e) {
	case 0: return "0";
	case EBUSY: return "EBUSY";
	case EDEADLK: return "EDEADLK";
	case EPERM: return "EPERM";
	case EINVAL: return "EINVAL";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EOWNERDEAD: return "EOWNERDEAD";
	case ENOTRECOVERABLE: return "ENOTRECOVERABLE";
	case EAGAIN: return "EAGAIN";
	case ENOTSUP: return "ENOTSUP";
	case ENOSYS: return "ENOSYS";
	case ENOMEM: return "ENOMEM";
	case EBADF: return "EBADF";
	case EINTR: return "EINTR";
	case ESRCH: return "ESRCH";
	case -ENOSPC: return "-ENOSPC";
	case -ENOSYS: return "-ENOSYS";
	case -EINVAL: return "-EINVAL";
	case -ENOMEM: return "-ENOMEM";
	}
	b = buf[next++ % 4];
	snprintf(b, sizeof(buf[0]), "errno-%d", e);
	return b;
}

/* Print one result; never call it while holding a lock (it makes syscalls). */
static inline void emit_str(const char *name, const char *got, const char *want)
{
	printf("%s/%s: %s\n", scope, name, got);
	if (strcmp(got, want) != 0) {
		fflush(stdout);
		fprintf(stderr, "conformance: MISMATCH %s/%s: got %s, POSIX/glibc 2.36 specify %s\n", scope, name,
			got, want);
		mismatches++;
	}
}

static inline void emit(const char *name, int got, int want)
{
	emit_str(name, errname(got), errname(want));
}

/* A child's wait status, as "exit N" or "signal N". */
static inline void emit_status(const char *name, int status)
{
	char got[32];

	if (WIFEXITED(status))
		snprintf(got, sizeof(got), "exit %d", WEXITSTATUS(status));
	else
		snprintf(got, sizeof(got), "signal %d", WTERMSIG(status));
	emit_str(name, got, "exit 0");
}

/* Another thread holds a lock between hold() and unhold(). */
enum hold_how {
	HOLD_MUTEX,
	HOLD_WRITE,
	HOLD_READ,
};

struct holder {
	enum hold_how how;
	pthread_mutex_t *m;
	pthread_rwlock_t *rw;
	int got, released;
	pthread_barrier_t held, release;
	pthread_t t;
};

/* What each holder thread does first, if anything (conformance.c's
 * priority-protect warm-up). */
static void (*holder_thread_start)(void);

static void *holder_fn(void *arg)
{
	struct holder *h = arg;

	if (holder_thread_start)
		holder_thread_start();
	switch (h->how) {
	case HOLD_MUTEX:
		h->got = pthread_mutex_lock(h->m);
		break;
	case HOLD_WRITE:
		h->got = pthread_rwlock_wrlock(h->rw);
		break;
	case HOLD_READ:
		h->got = pthread_rwlock_rdlock(h->rw);
		break;
	}
	/* A system call inside the section: an elided hold becomes a real one. */
	pthread_barrier_wait(&h->held);
	pthread_barrier_wait(&h->release);
	if (h->got == 0)
		h->released = h->how == HOLD_MUTEX ? pthread_mutex_unlock(h->m) : pthread_rwlock_unlock(h->rw);
	return NULL;
}

static inline void hold(struct holder *h, enum hold_how how, pthread_mutex_t *m, pthread_rwlock_t *rw)
{
	h->how = how;
	h->m = m;
	h->rw = rw;
	h->got = -1;
	h->released = -1;
	check_ret(pthread_barrier_init(&h->held, NULL, 2), 0);
	check_ret(pthread_barrier_init(&h->release, NULL, 2), 0);
	h->t = xthread(holder_fn, h);
	pthread_barrier_wait(&h->held);
	check_ret(h->got, 0);
}

static inline void unhold(struct holder *h)
{
	pthread_barrier_wait(&h->release);
	xjoin(h->t);
	check_ret(h->released, 0);
	check_ret(pthread_barrier_destroy(&h->held), 0);
	check_ret(pthread_barrier_destroy(&h->release), 0);
}

#endif
