/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <time.h>

#include "elidectl.h"
#include "macros.h"

/* Spelled out, unlike the report's "rw-rd": this is the admin's view. */
static const char *const kind_names[] = {
	[ELIDE_SEG_KIND_FREE] = "free",
	[ELIDE_SEG_KIND_MUTEX] = "mutex",
	[ELIDE_SEG_KIND_RWLOCK_READ] = "rw-read",
	[ELIDE_SEG_KIND_RWLOCK_WRITE] = "rw-write",
	[ELIDE_SEG_KIND_OVERFLOW] = "overflow",
};

static const char *const abort_cause_names[N_ABORT_CAUSES] = {
	"conflict", "capacity", "busy", "explicit", "retry", "debug", "nested", "other",
};

const char *kind_name(uint32_t kind)
{
	return kind < ARRAY_SIZE(kind_names) ? kind_names[kind] : "?";
}

/* The reader's names for state and reason are libelide's report's. */
const char *state_name(uint32_t state)
{
	return seg_state_to_string(state);
}

const char *reason_name(uint32_t reason)
{
	return seg_reason_to_string(reason);
}

const char *abort_cause_name(unsigned cause)
{
	return cause < ARRAY_SIZE(abort_cause_names) ? abort_cause_names[cause] : "?";
}

uint64_t lock_aborts(const struct elide_seg_lock *l)
{
	uint64_t sum = 0;

	for (unsigned s = ELIDE_SEG_STAT_ABORT_CONFLICT; s <= ELIDE_SEG_STAT_ABORT_OTHER; s++) {
		/* Saturate: the counters are the process's to write. */
		if (sum + l->stats[s] < sum)
			return UINT64_MAX;
		sum += l->stats[s];
	}
	return sum;
}

uint64_t now_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double segment_age(const struct seg_snapshot *snap, uint64_t now_ns)
{
	if (snap->header.created_ns == 0 || snap->header.created_ns >= now_ns)
		return 0.0;
	return (double)(now_ns - snap->header.created_ns) / 1e9;
}
