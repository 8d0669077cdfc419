/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "elidectl.h"
#include "json.h"
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

/* libelide's own reason, except for a decision pushed by elided: then who
 * made it, the word JSON's decided_by has ("adaptation" reads "daemon"). */
const char *lock_why(const struct elide_seg_lock *l)
{
	if (l->reason != ELIDE_SEG_REASON_DAEMON)
		return reason_name(l->reason);
	switch (l->ctl_source) {
	case ELIDE_SEG_SOURCE_OVERRIDE:
		return "override";
	case ELIDE_SEG_SOURCE_CONFIG:
		return "config";
	case ELIDE_SEG_SOURCE_LEARNED:
		return "learned";
	default:
		return "daemon";
	}
}

const char *decided_by_name(const struct elide_seg_lock *l)
{
	const char *s = seg_source_to_string(l->ctl_source);

	return s && *s ? s : NULL;
}

enum table_color state_color(const char *state)
{
	if (!strcmp(state, "eliding"))
		return TABLE_COLOR_GOOD;
	if (!strcmp(state, "backoff"))
		return TABLE_COLOR_WARN;
	if (!strcmp(state, "off"))
		return TABLE_COLOR_BAD;
	return TABLE_COLOR_NONE;
}

/* "no usable RTM: CPU lacks RTM" → "no usable RTM": the head of a reason. */
static void short_reason(const char *reason, char *buf, size_t size)
{
	size_t n = strcspn(reason, ":;(");

	while (n > 0 && reason[n - 1] == ' ')
		n--;
	if (n == 0)
		n = strlen(reason);
	snprintf(buf, size, "%.*s", (int)n, reason);
}

#define WATCHING_PREFIX "watching contended locks"

void process_state(const struct seg_snapshot *snap, struct proc_state *ret)
{
	const struct elide_seg_lock *off = NULL;
	unsigned eliding = 0, backoff = 0;
	bool mixed = false;

	memset(ret, 0, sizeof(*ret));
	/* libelide says "watching contended locks; WHY" (mode=watch, or no
	 * RTM): not eliding, but its locks' figures are live. */
	if (snap->header.elision != ELIDE_SEG_ELISION_ON &&
	    strncmp(snap->header.status_reason, WATCHING_PREFIX, strlen(WATCHING_PREFIX)) == 0) {
		const char *why = snap->header.status_reason + strlen(WATCHING_PREFIX);

		ret->state = "watching";
		short_reason(why + strspn(why, "; "), ret->why, sizeof(ret->why));
		return;
	}
	if (snap->header.elision != ELIDE_SEG_ELISION_ON) {
		ret->state = "off";
		short_reason(snap->header.status_reason, ret->why, sizeof(ret->why));
		return;
	}
	for (uint32_t i = 0; i < snap->nlocks; i++) {
		const struct elide_seg_lock *l = &snap->locks[i].lock;

		if (l->kind == ELIDE_SEG_KIND_OVERFLOW)
			continue;
		if (l->state == ELIDE_SEG_STATE_ELIDING)
			eliding++;
		else if (l->state == ELIDE_SEG_STATE_OFF_ADAPT)
			backoff++;
		else if (l->state == ELIDE_SEG_STATE_OFF_POLICY) {
			if (off && strcmp(lock_why(off), lock_why(l)) != 0)
				mixed = true;
			if (!off)
				off = l;
		}
	}
	if (eliding) {
		ret->state = "eliding";
	} else if (backoff) {
		ret->state = "backoff";
		snprintf(ret->why, sizeof(ret->why), "aborts");
	} else if (off) {
		/* Every lock that would elide is turned off: say by whom. */
		ret->state = "off";
		snprintf(ret->why, sizeof(ret->why), "%s", mixed ? "locks off" : lock_why(off));
	} else {
		/* Eliding as soon as a lock is contended. */
		ret->state = "plain";
	}
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

bool lock_has_contention(const struct elide_seg_lock *l)
{
	return l->wait_ns != 0 || l->hold_samples != 0;
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

/*
 * elided's LastReload: "" (an elided that never said), "ok (start-up) at
 * TIME", "ok at TIME" or "failed: FILE:LINE: what at TIME", TIME being
 * "YYYY-MM-DD HH:MM:SS" in elided's local time.
 */
void json_last_reload(struct json *j, const char *prose)
{
	const char *at = NULL, *p, *result = NULL;
	bool startup = false;
	size_t head;

	for (p = prose; (p = strstr(p, " at ")); p++)
		at = p;
	head = at ? (size_t)(at - prose) : strlen(prose);
	if (!strncmp(prose, "ok", 2) && (prose[2] == ' ' || prose[2] == '\0')) {
		result = "ok";
		startup = !strncmp(prose + 2, " (start-up)", 11);
	} else if (!strncmp(prose, "failed", 6))
		result = "failed";
	json_begin_object(j);
	/* "ok", "failed"; null: elided did not say. */
	json_key(j, "result");
	json_string(j, result);
	json_key(j, "startup");
	json_bool(j, startup);
	json_key(j, "time");
	if (at && result) {
		char when[64];

		snprintf(when, sizeof(when), "%s", at + 4);
		json_string(j, when);
	} else
		json_null(j);
	json_key(j, "error");
	if (result && !strcmp(result, "failed") && head > 8 && prose[6] == ':') {
		char err[1024];

		snprintf(err, sizeof(err), "%.*s", (int)(head - 8), prose + 8);
		json_string(j, err);
	} else
		json_null(j);
	json_key(j, "description");
	json_string(j, *prose ? prose : NULL);
	json_end_object(j);
}

/* elided's DiscoveryMethod: "bpf (MECHANISM)" or "fallback (MECHANISM): why". */
void json_discovery(struct json *j, const char *prose)
{
	const char *open = strchr(prose, '('), *close = open ? strchr(open, ')') : NULL;
	size_t word = strcspn(prose, " (");
	char method[32], mechanism[256];

	snprintf(method, sizeof(method), "%.*s", (int)word, prose);
	json_begin_object(j);
	json_key(j, "method");
	json_string(j, !strcmp(method, "bpf") || !strcmp(method, "fallback") ? method : NULL);
	json_key(j, "mechanism");
	if (open && close) {
		snprintf(mechanism, sizeof(mechanism), "%.*s", (int)(close - open - 1), open + 1);
		json_string(j, mechanism);
	} else
		json_null(j);
	json_key(j, "fallback_reason");
	json_string(j, close && !strncmp(close, "): ", 3) && close[3] ? close + 3 : NULL);
	json_key(j, "description");
	json_string(j, *prose ? prose : NULL);
	json_end_object(j);
}
