/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Symbol resolution: which of glibc's functions each interposer forwards
 * to (resolve.h).
 */
#include "resolve.h"

struct real_fns real = {
	.mutex_init = __pthread_mutex_init,
	.mutex_destroy = __pthread_mutex_destroy,
	.mutex_lock = __pthread_mutex_lock,
	.mutex_trylock = __pthread_mutex_trylock,
	.mutex_unlock = __pthread_mutex_unlock,
	.mutexattr_settype = __pthread_mutexattr_settype,
	.mutexattr_destroy = __pthread_mutexattr_destroy,
	.rwlock_init = __pthread_rwlock_init,
	.rwlock_destroy = __pthread_rwlock_destroy,
	.rwlock_rdlock = __pthread_rwlock_rdlock,
	.rwlock_tryrdlock = __pthread_rwlock_tryrdlock,
	.rwlock_wrlock = __pthread_rwlock_wrlock,
	.rwlock_trywrlock = __pthread_rwlock_trywrlock,
	.rwlock_unlock = __pthread_rwlock_unlock,
};

/* Set while dlsym() runs (resolve.h). */
__thread bool resolving;

void resolve_all(void)
{
	RESOLVE(mutex_init, "pthread_mutex_init");
	RESOLVE(mutex_destroy, "pthread_mutex_destroy");
	RESOLVE(mutex_lock, "pthread_mutex_lock");
	RESOLVE(mutex_trylock, "pthread_mutex_trylock");
	RESOLVE(mutex_unlock, "pthread_mutex_unlock");
	RESOLVE(mutex_timedlock, "pthread_mutex_timedlock");
	RESOLVE(mutex_clocklock, "pthread_mutex_clocklock");
	RESOLVE(mutexattr_settype, "pthread_mutexattr_settype");
	RESOLVE(mutexattr_destroy, "pthread_mutexattr_destroy");
	RESOLVE(rwlock_init, "pthread_rwlock_init");
	RESOLVE(rwlock_destroy, "pthread_rwlock_destroy");
	RESOLVE(rwlock_rdlock, "pthread_rwlock_rdlock");
	RESOLVE(rwlock_tryrdlock, "pthread_rwlock_tryrdlock");
	RESOLVE(rwlock_wrlock, "pthread_rwlock_wrlock");
	RESOLVE(rwlock_trywrlock, "pthread_rwlock_trywrlock");
	RESOLVE(rwlock_unlock, "pthread_rwlock_unlock");
	RESOLVE(rwlock_timedrdlock, "pthread_rwlock_timedrdlock");
	RESOLVE(rwlock_timedwrlock, "pthread_rwlock_timedwrlock");
	RESOLVE(rwlock_clockrdlock, "pthread_rwlock_clockrdlock");
	RESOLVE(rwlock_clockwrlock, "pthread_rwlock_clockwrlock");
	/* The 2.3.2 condvar is the one every current program uses. */
	RESOLVE_V(cond_wait, "pthread_cond_wait", "GLIBC_2.3.2");
	RESOLVE_V(cond_timedwait, "pthread_cond_timedwait", "GLIBC_2.3.2");
	RESOLVE(cond_clockwait, "pthread_cond_clockwait");
	RESOLVE_EXACT(cond_wait_2_2_5, "pthread_cond_wait", "GLIBC_2.2.5");
	RESOLVE_EXACT(cond_timedwait_2_2_5, "pthread_cond_timedwait", "GLIBC_2.2.5");
	RESOLVE(fork_without_handlers, "_Fork");
}
