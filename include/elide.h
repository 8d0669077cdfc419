/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elide.h - annotation API of libelide, system-wide hardware lock elision.
 *
 * A program includes this header to tell libelide how to treat a lock
 * (always elide, never elide, or adapt) and what to call it in statistics.
 * There is nothing to link: the entry points are weak references that
 * libelide.so provides when it is preloaded.  Without libelide every call
 * returns -ENOSYS and changes nothing, so annotated programs run unchanged
 * on systems without elide.
 *
 * All functions return 0 on success or a negative errno value:
 *   -ENOSYS  libelide is not loaded in this process
 *   -EINVAL  unknown policy, NULL lock, or a lock type libelide never elides
 *   -ENOSPC  the per-process lock table is full (nothing changed for the
 *            lock: it follows the process's mode, counted in the overflow
 *            bucket once contended)
 *
 * See elide.h(3).
 */
#ifndef ELIDE_H
#define ELIDE_H

#include <errno.h>
#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

enum elide_policy {
	ELIDE_POLICY_ADAPTIVE = 0, /* elide when contended, back off on aborts */
	ELIDE_POLICY_ALWAYS = 1,   /* try a transaction on every acquisition */
	ELIDE_POLICY_NEVER = 2,    /* always take the real lock */
};

/* Longest lock name kept, including the terminating NUL; longer ones are cut. */
#define ELIDE_NAME_MAX 48

/* Provided by libelide.so; weak, so NULL when it is not loaded. */
#ifdef ELIDE_BUILDING_LIBELIDE
#define ELIDE_WEAK_
#else
#define ELIDE_WEAK_ __attribute__((weak))
#endif
extern int __elide_mutex_annotate(pthread_mutex_t *mutex, int policy, const char *name) ELIDE_WEAK_;
extern int __elide_rwlock_annotate(pthread_rwlock_t *rwlock, int policy, const char *name) ELIDE_WEAK_;
extern int __elide_active(void) ELIDE_WEAK_;

/* Keep the current policy of the lock (used for the name-only calls). */
#define ELIDE_POLICY_KEEP (-1)

#ifndef ELIDE_BUILDING_LIBELIDE

static inline int elide_mutex_set_policy(pthread_mutex_t *mutex, enum elide_policy policy)
{
	if (!__elide_mutex_annotate)
		return -ENOSYS;
	return __elide_mutex_annotate(mutex, (int)policy, NULL);
}

static inline int elide_mutex_set_name(pthread_mutex_t *mutex, const char *name)
{
	if (!__elide_mutex_annotate)
		return -ENOSYS;
	return __elide_mutex_annotate(mutex, ELIDE_POLICY_KEEP, name);
}

static inline int elide_rwlock_set_policy(pthread_rwlock_t *rwlock, enum elide_policy policy)
{
	if (!__elide_rwlock_annotate)
		return -ENOSYS;
	return __elide_rwlock_annotate(rwlock, (int)policy, NULL);
}

static inline int elide_rwlock_set_name(pthread_rwlock_t *rwlock, const char *name)
{
	if (!__elide_rwlock_annotate)
		return -ENOSYS;
	return __elide_rwlock_annotate(rwlock, ELIDE_POLICY_KEEP, name);
}

/*
 * 1 when libelide is loaded and elides with RTM, 0 when it is loaded but
 * passes every lock through (no usable RTM, mode=off, glibc's own elision
 * enabled), -ENOSYS when it is not loaded.
 */
static inline int elide_active(void)
{
	if (!__elide_active)
		return -ENOSYS;
	return __elide_active();
}
#endif /* !ELIDE_BUILDING_LIBELIDE */

#ifdef __cplusplus
}
#endif

#endif /* ELIDE_H */
