/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conformance-compat.c - references to pthread_cond_*@GLIBC_2.2.5, the
 * condition variable glibc keeps for binaries linked before 2.3.2 (on
 * x86-64: the first version of the ABI).  Its functions take the old,
 * one-word pthread_cond_t (a pointer to a new one that they allocate on
 * first use), so handing that object to the 2.3.2 functions corrupts it.
 * On its own in this file: the .symver aliases below are the only way a
 * program refers to a version that is not the default one.
 */
#include "conformance-compat.h"

#include <errno.h>

#if defined(__x86_64__) && defined(__GLIBC__)
const int compat_cond_available = 1;

#define COMPAT(alias, name) __asm__(".symver " #alias ", " #name "@GLIBC_2.2.5")

int old_cond_init(pthread_cond_t *c, const pthread_condattr_t *a);
int old_cond_destroy(pthread_cond_t *c);
int old_cond_signal(pthread_cond_t *c);
int old_cond_broadcast(pthread_cond_t *c);
int old_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
int old_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime);

COMPAT(old_cond_init, pthread_cond_init);
COMPAT(old_cond_destroy, pthread_cond_destroy);
COMPAT(old_cond_signal, pthread_cond_signal);
COMPAT(old_cond_broadcast, pthread_cond_broadcast);
COMPAT(old_cond_wait, pthread_cond_wait);
COMPAT(old_cond_timedwait, pthread_cond_timedwait);

int compat_cond_init(pthread_cond_t *c, const pthread_condattr_t *a) { return old_cond_init(c, a); }
int compat_cond_destroy(pthread_cond_t *c) { return old_cond_destroy(c); }
int compat_cond_signal(pthread_cond_t *c) { return old_cond_signal(c); }
int compat_cond_broadcast(pthread_cond_t *c) { return old_cond_broadcast(c); }
int compat_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) { return old_cond_wait(c, m); }

int compat_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime)
{
	return old_cond_timedwait(c, m, abstime);
}
#else
const int compat_cond_available = 0;

int compat_cond_init(pthread_cond_t *c, const pthread_condattr_t *a) { return ENOSYS; }
int compat_cond_destroy(pthread_cond_t *c) { return ENOSYS; }
int compat_cond_signal(pthread_cond_t *c) { return ENOSYS; }
int compat_cond_broadcast(pthread_cond_t *c) { return ENOSYS; }
int compat_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) { return ENOSYS; }

int compat_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime)
{
	return ENOSYS;
}
#endif
