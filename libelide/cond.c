/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Condition variables: the waits forward to glibc's, each version to its
 * own (libelide.sym), once an elided mutex is held for real.
 */
#include "hotpath.h"
#include "resolve.h"
#include "watch.h"

/*
 * glibc unlocks and relocks the mutex through internal calls we cannot see,
 * so an elided mutex must become a real one first: abort, and the section
 * re-runs with the lock held for real.
 */
static inline void leave_elision_for_cond(const pthread_mutex_t *m)
{
	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_COND);
	/* A sampled hold ends where the wait gives the mutex up. */
	if (unlikely(self.watch_lock == m))
		watch_flush(watch_hold_end());
}

/*
 * glibc has two condvars: the current one (symbol version GLIBC_2.3.2) and
 * the one binaries linked before 2.3.2 still call (GLIBC_2.2.5), which
 * takes a different pthread_cond_t.  Each version here forwards to its
 * own (libelide.sym): an unversioned definition would catch the old
 * binaries' calls too and hand their condvars to the new functions.
 */
int elide_cond_wait_2_3_2(pthread_cond_t *c, pthread_mutex_t *m);
int elide_cond_timedwait_2_3_2(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime);
int elide_cond_wait_2_2_5(pthread_cond_t *c, pthread_mutex_t *m);
int elide_cond_timedwait_2_2_5(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime);

_public_ int elide_cond_wait_2_3_2(pthread_cond_t *c, pthread_mutex_t *m)
{
	leave_elision_for_cond(m);
	LAZY(cond_wait, "pthread_cond_wait");
	return real.cond_wait(c, m);
}
__asm__(".symver elide_cond_wait_2_3_2, pthread_cond_wait@@GLIBC_2.3.2");

_public_ int elide_cond_timedwait_2_3_2(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime)
{
	leave_elision_for_cond(m);
	LAZY(cond_timedwait, "pthread_cond_timedwait");
	return real.cond_timedwait(c, m, abstime);
}
__asm__(".symver elide_cond_timedwait_2_3_2, pthread_cond_timedwait@@GLIBC_2.3.2");

_public_ int elide_cond_wait_2_2_5(pthread_cond_t *c, pthread_mutex_t *m)
{
	leave_elision_for_cond(m);
	LAZY_EXACT(cond_wait_2_2_5, "pthread_cond_wait", "GLIBC_2.2.5");
	return real.cond_wait_2_2_5(c, m);
}
__asm__(".symver elide_cond_wait_2_2_5, pthread_cond_wait@GLIBC_2.2.5");

_public_ int elide_cond_timedwait_2_2_5(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime)
{
	leave_elision_for_cond(m);
	LAZY_EXACT(cond_timedwait_2_2_5, "pthread_cond_timedwait", "GLIBC_2.2.5");
	return real.cond_timedwait_2_2_5(c, m, abstime);
}
__asm__(".symver elide_cond_timedwait_2_2_5, pthread_cond_timedwait@GLIBC_2.2.5");

_public_ int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
				    const struct timespec *abstime)
{
	leave_elision_for_cond(m);
	LAZY(cond_clockwait, "pthread_cond_clockwait");
	return real.cond_clockwait(c, m, clock, abstime);
}
