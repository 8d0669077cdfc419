/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conformance-compat.h - the condition variable of glibc 2.2.5 (before the
 * 2.3.2 one every current program links against), called through its
 * versioned symbols, as a program linked in 2002 still does: see
 * conformance-compat.c.
 */
#ifndef ELIDE_CONFORMANCE_COMPAT_H
#define ELIDE_CONFORMANCE_COMPAT_H

#include <pthread.h>
#include <time.h>

/* False where the program was built without those references (not x86-64). */
extern const int compat_cond_available;

int compat_cond_init(pthread_cond_t *c, const pthread_condattr_t *a);
int compat_cond_destroy(pthread_cond_t *c);
int compat_cond_signal(pthread_cond_t *c);
int compat_cond_broadcast(pthread_cond_t *c);
int compat_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
int compat_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime);

#endif
