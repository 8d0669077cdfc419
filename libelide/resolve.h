/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * glibc's definitions behind libelide's: the next ones in the lookup order,
 * asked for at start-up (resolve_all()) or on first use (LAZY()).  The
 * table is resolve.c's; every file that forwards a call reads it.
 */
#ifndef ELIDE_RESOLVE_H
#define ELIDE_RESOLVE_H

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "macros.h"

/* glibc exports these aliases; they let us run before dlsym() is safe. */
extern int __pthread_mutex_init(pthread_mutex_t *, const pthread_mutexattr_t *);
extern int __pthread_mutex_destroy(pthread_mutex_t *);
extern int __pthread_mutex_lock(pthread_mutex_t *);
extern int __pthread_mutex_trylock(pthread_mutex_t *);
extern int __pthread_mutex_unlock(pthread_mutex_t *);
extern int __pthread_mutexattr_settype(pthread_mutexattr_t *, int);
extern int __pthread_mutexattr_destroy(pthread_mutexattr_t *);
extern int __pthread_rwlock_init(pthread_rwlock_t *, const pthread_rwlockattr_t *);
extern int __pthread_rwlock_destroy(pthread_rwlock_t *);
extern int __pthread_rwlock_rdlock(pthread_rwlock_t *);
extern int __pthread_rwlock_tryrdlock(pthread_rwlock_t *);
extern int __pthread_rwlock_wrlock(pthread_rwlock_t *);
extern int __pthread_rwlock_trywrlock(pthread_rwlock_t *);
extern int __pthread_rwlock_unlock(pthread_rwlock_t *);

typedef int (*mutex_fn)(pthread_mutex_t *);
typedef int (*mutex_timed_fn)(pthread_mutex_t *, const struct timespec *);
typedef int (*mutex_clock_fn)(pthread_mutex_t *, clockid_t, const struct timespec *);
typedef int (*rwlock_fn)(pthread_rwlock_t *);
typedef int (*rwlock_timed_fn)(pthread_rwlock_t *, const struct timespec *);
typedef int (*rwlock_clock_fn)(pthread_rwlock_t *, clockid_t, const struct timespec *);
typedef int (*cond_wait_fn)(pthread_cond_t *, pthread_mutex_t *);
typedef int (*cond_timed_fn)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
typedef int (*cond_clock_fn)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);

/*
 * The next definitions in the lookup order.  The ones glibc has aliases for
 * start out pointing at glibc, so a call that arrives before our
 * constructor (another preloaded library's constructor, an allocator) works.
 * The constructor then asks dlsym(RTLD_NEXT) so another interposer behind
 * us (mutrace, a tracer) still sees every call.
 */
struct real_fns {
	int (*mutex_init)(pthread_mutex_t *, const pthread_mutexattr_t *);
	mutex_fn mutex_destroy, mutex_lock, mutex_trylock, mutex_unlock;
	mutex_timed_fn mutex_timedlock;
	mutex_clock_fn mutex_clocklock;
	int (*mutexattr_settype)(pthread_mutexattr_t *, int);
	int (*mutexattr_destroy)(pthread_mutexattr_t *);
	int (*rwlock_init)(pthread_rwlock_t *, const pthread_rwlockattr_t *);
	rwlock_fn rwlock_destroy, rwlock_rdlock, rwlock_tryrdlock, rwlock_wrlock, rwlock_trywrlock, rwlock_unlock;
	rwlock_timed_fn rwlock_timedrdlock, rwlock_timedwrlock;
	rwlock_clock_fn rwlock_clockrdlock, rwlock_clockwrlock;
	cond_wait_fn cond_wait;
	cond_timed_fn cond_timedwait;
	/* The condvar of binaries linked before glibc 2.3.2: other functions. */
	cond_wait_fn cond_wait_2_2_5;
	cond_timed_fn cond_timedwait_2_2_5;
	cond_clock_fn cond_clockwait;
	pid_t (*fork_without_handlers)(void); /* glibc's _Fork() (2.34) */
};

extern struct real_fns real _hidden_;

/* Set while dlsym() runs: dlsym may allocate, and an allocator may lock. */
extern __thread bool resolving _hidden_;

/* exact: only that version (a compat symbol must never become the
 * current function of the same name). */
static inline void *resolve(const char *name, const char *version, bool exact)
{
	void *fn;

	resolving = true;
	fn = version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);
	if (!fn && version && !exact)
		fn = dlsym(RTLD_NEXT, name);
	resolving = false;
	return fn;
}

#define RESOLVE(field, name) do { \
		void *fn_ = resolve(name, NULL, false); \
		if (fn_) \
			__atomic_store_n((void **)&real.field, fn_, __ATOMIC_RELEASE); \
	} while (0)
#define RESOLVE_V(field, name, version) do { \
		void *fn_ = resolve(name, version, false); \
		if (fn_) \
			__atomic_store_n((void **)&real.field, fn_, __ATOMIC_RELEASE); \
	} while (0)

#define RESOLVE_EXACT(field, name, version) do { \
		void *fn_ = resolve(name, version, true); \
		if (fn_) \
			__atomic_store_n((void **)&real.field, fn_, __ATOMIC_RELEASE); \
	} while (0)

void resolve_all(void) _hidden_;

/*
 * For the functions glibc has no alias of: resolve on first use.  A call
 * that arrives while dlsym itself runs cannot be served (nothing to call);
 * allocators never use these, so it reports EAGAIN rather than recursing.
 */
#define LAZY_RESOLVE(field, resolve_it) do { \
		if (unlikely(!__atomic_load_n((void **)&real.field, __ATOMIC_ACQUIRE))) { \
			if (resolving) \
				return EAGAIN; \
			resolve_it; \
			if (!real.field) \
				return ENOSYS; \
		} \
	} while (0)
#define LAZY(field, name) LAZY_RESOLVE(field, RESOLVE(field, name))
#define LAZY_EXACT(field, name, version) LAZY_RESOLVE(field, RESOLVE_EXACT(field, name, version))

#endif
