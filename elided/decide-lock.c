/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The per-lock decision (decide-lock.h): learned verdicts, the daemon's
 * long-window cut-off and its back-off, and which of the deciders wins.
 * Plain values in, plain values out; the caller does the I/O.
 */
#include <stdbool.h>
#include <stdint.h>

#include "decide-lock.h"
#include "elide.h"
#include "segment-format.h"

/*
 * A new view in adaptive mode: is it a lock the program's earlier runs
 * taught "never elide"?  Either libelide applied the hint when the lock was
 * first contended (its entry says so), or the lock was contended before the
 * hints arrived and the decision is written now.  Off until the probe,
 * ELIDED_LEARNED_PROBE_INTERVALS away, then the daemon's back-off goes on
 * from DECIDE_LOCK_LEARNED_BACKOFF intervals.
 */
static void check_learned(const struct lock_decide_input *in, struct lock_decide_state *st)
{
	bool applied = st->learned != VIEW_LEARNED_FOREIGN && in->ctl_source == ELIDE_SEG_SOURCE_LEARNED &&
		       in->ctl_policy == ELIDE_POLICY_NEVER + 1;

	st->learned = VIEW_LEARNED_NONE;
	/* A mode the admin chose (a rule's "on" or "off", an override) is not
	 * second-guessed by what was learned: NONE is then written over a
	 * hint libelide applied. */
	if (in->process_mode != POLICY_MODE_ADAPTIVE || (!applied && !in->hinted_never))
		return;
	st->learned = VIEW_LEARNED_OFF;
	st->daemon_off = true;
	st->backoff_intervals = DECIDE_LOCK_LEARNED_BACKOFF;
	st->backoff_left = ELIDED_LEARNED_PROBE_INTERVALS;
}

/*
 * The daemon's long-window cut-off (libelide's own works over one
 * process's short memory): over at least min_aborts aborts, a lock whose
 * aborts exceed max_abort_ratio of its attempts is turned off, then probed
 * again after 1, 2, 4, ... 64 intervals; a window that passes halves the
 * back-off.
 */
static void long_window_adapt(const struct lock_decide_input *in, struct lock_decide_state *st)
{
	uint64_t min_aborts = in->min_aborts ? in->min_aborts : DECIDE_LOCK_MIN_ABORTS_DEFAULT;
	double ratio = in->max_abort_ratio >= 0 ? in->max_abort_ratio : DECIDE_LOCK_MAX_ABORT_RATIO_DEFAULT;

	if (st->daemon_off) {
		if (st->backoff_left > 0 && --st->backoff_left > 0)
			return;
		st->daemon_off = false; /* probe again */
		st->window_aborts = st->window_attempts = 0;
		return;
	}
	if (st->window_aborts < min_aborts)
		return;
	if ((double)st->window_aborts > ratio * (double)(st->window_attempts ? st->window_attempts : 1)) {
		st->daemon_off = true;
		st->backoff_intervals = st->backoff_intervals ? st->backoff_intervals * 2 : 1;
		if (st->backoff_intervals > DECIDE_LOCK_BACKOFF_MAX)
			st->backoff_intervals = DECIDE_LOCK_BACKOFF_MAX;
		st->backoff_left = st->backoff_intervals;
	} else if (st->backoff_intervals > 0) {
		st->backoff_intervals /= 2;
	}
	st->window_aborts = st->window_attempts = 0;
}

/* A lock entry's control value for a mode (ELIDE_SEG_CTL_NONE: none). */
static uint32_t ctl_policy_of(enum policy_mode m)
{
	switch (m) {
	case POLICY_MODE_ADAPTIVE:
		return ELIDE_POLICY_ADAPTIVE + 1;
	case POLICY_MODE_ON:
		return ELIDE_POLICY_ALWAYS + 1;
	case POLICY_MODE_OFF:
	case POLICY_MODE_WATCH: /* a lock is watched whenever it is not elided */
		return ELIDE_POLICY_NEVER + 1;
	default:
		return ELIDE_SEG_CTL_NONE;
	}
}

struct lock_decision decide_lock(const struct lock_decide_input *in, struct lock_decide_state *st)
{
	struct lock_decision out = { .mode = POLICY_MODE_UNSET, .source = ELIDE_SEG_SOURCE_NONE };

	if (st->learned == VIEW_LEARNED_UNCHECKED || st->learned == VIEW_LEARNED_FOREIGN)
		check_learned(in, st);
	if (in->process_mode == POLICY_MODE_ADAPTIVE && in->rule_mode == POLICY_MODE_UNSET &&
	    in->override == POLICY_MODE_UNSET)
		long_window_adapt(in, st);
	/* The store's verdict holds until its probe; then the daemon's own
	 * back-off takes over. */
	if (st->learned == VIEW_LEARNED_OFF && !st->daemon_off)
		st->learned = VIEW_LEARNED_NONE;
	if (in->process_mode == POLICY_MODE_OFF) {
		/* The process's off is the administrator's kill switch: libelide
		 * forwards every call to glibc, whatever a lock's own policy
		 * says.  No lock decision is written (one written before is
		 * taken back), so none is claimed; they come back with
		 * another process mode. */
	} else if (in->override != POLICY_MODE_UNSET) {
		out.mode = in->override;
		out.source = ELIDE_SEG_SOURCE_OVERRIDE;
	} else if (in->rule_mode != POLICY_MODE_UNSET) {
		out.mode = in->rule_mode;
		out.source = ELIDE_SEG_SOURCE_CONFIG;
	} else if (st->daemon_off) {
		out.mode = POLICY_MODE_OFF;
		out.source = st->learned == VIEW_LEARNED_OFF ? ELIDE_SEG_SOURCE_LEARNED : ELIDE_SEG_SOURCE_ADAPTATION;
	}
	out.ctl_policy = ctl_policy_of(out.mode);
	out.changed = out.ctl_policy != in->ctl_policy || out.source != in->ctl_source;
	return out;
}
