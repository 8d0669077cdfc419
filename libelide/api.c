/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The functions behind <elide.h>: a program names its locks and sets their
 * policy, and asks whether libelide is eliding.
 */
#include <errno.h>
#include <string.h>

#include "hotpath.h"

static int annotate(struct lock_rec *rec, int policy, const char *name)
{
	if (name) {
		struct elide_seg_lock *e = rec_entry(rec);

		strncpy(e->name, name, sizeof(e->name) - 1);
		e->name[sizeof(e->name) - 1] = '\0';
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		rec_touch(rec);
	}
	if (policy != ELIDE_POLICY_KEEP)
		rec_set_policy(rec, policy);
	return 0;
}

static bool policy_valid(int policy)
{
	return policy == ELIDE_POLICY_KEEP || policy == ELIDE_POLICY_ADAPTIVE ||
	       policy == ELIDE_POLICY_ALWAYS || policy == ELIDE_POLICY_NEVER;
}

_public_ int __elide_mutex_annotate(pthread_mutex_t *m, int policy, const char *name)
{
	enum mutex_class class;
	struct lock_rec *rec;
	bool created;

	if (!m || !policy_valid(policy))
		return -EINVAL;
	class = mutex_class(m);
	if (policy != ELIDE_POLICY_KEEP && class == MUTEX_UNELIDABLE)
		return -EINVAL;
	if (!elide.recs)
		return -ENOMEM;
	/* Never the shared overflow record: its gate is not this lock's to
	 * follow (a recursive lock would be elided with it). */
	rec = registry_attach_own(m, mutex_idx_ptr(m), LOCK_KIND_MUTEX, __builtin_return_address(0),
				  class == MUTEX_ELIDABLE, &created);
	if (!rec)
		return -ENOSPC;
	/* A name on a recursive (or robust, ...) mutex: tracked, never elided. */
	if (class == MUTEX_UNELIDABLE)
		rec_set_type_unelidable(rec);
	else if (class == MUTEX_NORMAL_TYPED && created)
		rec_set_type_normal(rec);
	return annotate(rec, policy, name);
}

_public_ int __elide_rwlock_annotate(pthread_rwlock_t *rw, int policy, const char *name)
{
	struct lock_rec *rec;
	bool elidable;

	if (!rw || !policy_valid(policy))
		return -EINVAL;
	elidable = rwlock_is_elidable(rw);
	if (policy != ELIDE_POLICY_KEEP && !elidable)
		return -EINVAL;
	if (!elide.recs)
		return -ENOMEM;
	/* Both sides of the lock get the policy and the name. */
	for (int write = 0; write <= 1; write++) {
		rec = registry_attach_own(rw, rwlock_idx_ptr(rw, write),
					  write ? LOCK_KIND_RWLOCK_WRITE : LOCK_KIND_RWLOCK_READ,
					  __builtin_return_address(0), elidable, NULL);
		if (!rec)
			return -ENOSPC;
		if (!elidable)
			rec_set_type_unelidable(rec);
		annotate(rec, policy, name);
	}
	return 0;
}

_public_ int __elide_active(void)
{
	/* elided may have switched the process off since start-up. */
	return elide.enabled && elide.opts.mode != ELIDE_MODE_OFF ? 1 : 0;
}
