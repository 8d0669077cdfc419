/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One vocabulary for the segment's enums, shared by libelide's exit report,
 * elided and elidectl so they all read alike; and the one reading of a
 * segment's file name, shared by elided (adoption, stale files) and
 * libelide (its own sweep of stale files when no elided runs).
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "macros.h"
#include "segment-names.h"

const char *seg_source_to_string(uint32_t source)
{
	static const char *const names[] = {
		[ELIDE_SEG_SOURCE_NONE] = "",
		[ELIDE_SEG_SOURCE_CONFIG] = "config",
		[ELIDE_SEG_SOURCE_OVERRIDE] = "override",
		[ELIDE_SEG_SOURCE_ADAPTATION] = "adaptation",
		[ELIDE_SEG_SOURCE_LEARNED] = "learned",
	};

	return source < ARRAY_SIZE(names) ? names[source] : "?";
}

const char *seg_kind_to_string(uint32_t kind)
{
	static const char *const names[] = {
		[ELIDE_SEG_KIND_FREE] = "free",
		[ELIDE_SEG_KIND_MUTEX] = "mutex",
		[ELIDE_SEG_KIND_RWLOCK_READ] = "rw-rd",
		[ELIDE_SEG_KIND_RWLOCK_WRITE] = "rw-wr",
		[ELIDE_SEG_KIND_OVERFLOW] = "overflow",
	};

	return kind < ARRAY_SIZE(names) ? names[kind] : "?";
}

const char *seg_state_to_string(uint32_t state)
{
	static const char *const names[] = {
		[ELIDE_SEG_STATE_PLAIN] = "plain",
		[ELIDE_SEG_STATE_ELIDING] = "eliding",
		[ELIDE_SEG_STATE_OFF_POLICY] = "off",
		[ELIDE_SEG_STATE_OFF_ADAPT] = "backoff",
	};

	return state < ARRAY_SIZE(names) ? names[state] : "?";
}

const char *seg_reason_to_string(uint32_t reason)
{
	static const char *const names[ELIDE_SEG_NREASONS] = {
		[ELIDE_SEG_REASON_UNCONTENDED] = "not contended",
		[ELIDE_SEG_REASON_CONTENDED] = "contended",
		[ELIDE_SEG_REASON_MODE_ON] = "mode=on",
		[ELIDE_SEG_REASON_POLICY_ALWAYS] = "policy always",
		[ELIDE_SEG_REASON_POLICY_NEVER] = "policy never",
		[ELIDE_SEG_REASON_TYPE_NORMAL] = "PTHREAD_MUTEX_NORMAL",
		[ELIDE_SEG_REASON_ABORTS] = "aborts",
		[ELIDE_SEG_REASON_DAEMON] = "elided",
		[ELIDE_SEG_REASON_PROCESS_OFF] = "process off",
		[ELIDE_SEG_REASON_TYPE_UNELIDABLE] = "lock type",
		[ELIDE_SEG_REASON_WATCHING] = "watching",
	};

	return reason < ARRAY_SIZE(names) && names[reason] ? names[reason] : "?";
}

const char *seg_mode_to_string(uint32_t mode)
{
	static const char *const names[] = {
		[ELIDE_SEG_MODE_NONE] = "none",
		[ELIDE_SEG_MODE_ADAPTIVE] = "adaptive",
		[ELIDE_SEG_MODE_ON] = "on",
		[ELIDE_SEG_MODE_OFF] = "off",
		[ELIDE_SEG_MODE_WATCH] = "watch",
	};

	return mode < ARRAY_SIZE(names) ? names[mode] : "?";
}

/* Canonical decimal: digits only, no sign, no leading zero, no overflow. */
const char *seg_parse_u64(const char *s, uint64_t *ret)
{
	uint64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return NULL;
	if (*p == '0' && p[1] >= '0' && p[1] <= '9')
		return NULL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return NULL;
		v = v * 10 + d;
	}
	*ret = v;
	return p;
}

int seg_parse_name(const char *name, pid_t *pid, uint64_t *start_time)
{
	uint64_t p, t;
	const char *s;

	if (!name)
		return -EINVAL;
	s = seg_parse_u64(name, &p);
	if (!s || p < 1 || p > INT_MAX || *s != '-')
		return -EINVAL;
	s = seg_parse_u64(s + 1, &t);
	if (!s)
		return -EINVAL;
	/* "-GEN": a later image of the same process whose earlier segment it
	 * could not replace (an exec after dropping privileges). */
	if (*s == '-') {
		uint64_t gen;

		s = seg_parse_u64(s + 1, &gen);
		if (!s || gen < 1 || gen > ELIDE_SEG_MAX_GENERATION)
			return -EINVAL;
	}
	if (strcmp(s, ELIDE_SEG_SUFFIX) != 0)
		return -EINVAL;
	if (pid)
		*pid = (pid_t)p;
	if (start_time)
		*start_time = t;
	return 0;
}
