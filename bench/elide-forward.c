/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elide-forward.so: the interposition floor.  A preloaded library that
 * interposes the lock calls elide-bench makes and forwards each to glibc
 * with one indirect jump, doing nothing else: what any LD_PRELOAD
 * interposer costs at least (an extra call hop on both lock and unlock).
 * bench/compare.sh runs it as the "floor" configuration so that
 * libelide's own cost can be told apart from the cost of being preloaded.
 * Never installed.
 */
#include <pthread.h>

#define EXPORT __attribute__((visibility("default")))

/* glibc's own entry points under their second names, as libelide reaches
 * them before its constructor. */
extern int __pthread_mutex_lock(pthread_mutex_t *);
extern int __pthread_mutex_trylock(pthread_mutex_t *);
extern int __pthread_mutex_unlock(pthread_mutex_t *);
extern int __pthread_rwlock_rdlock(pthread_rwlock_t *);
extern int __pthread_rwlock_wrlock(pthread_rwlock_t *);
extern int __pthread_rwlock_unlock(pthread_rwlock_t *);

EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
	return __pthread_mutex_lock(m);
}

EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
	return __pthread_mutex_trylock(m);
}

EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
	return __pthread_mutex_unlock(m);
}

EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *rw)
{
	return __pthread_rwlock_rdlock(rw);
}

EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *rw)
{
	return __pthread_rwlock_wrlock(rw);
}

EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *rw)
{
	return __pthread_rwlock_unlock(rw);
}
