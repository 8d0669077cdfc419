/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The decision for one lock, as a pure function of plain values: no I/O,
 * no globals, no logging, so that every rule of it can be tested by a
 * table (tests/unit/test-decide-lock.c).  process-decisions.c copies the
 * inputs out of the process and its lock view, and writes what comes out.
 *
 * Who decides, strongest first: the process's mode "off" (the kill switch:
 * no lock decision at all), elidectl's override of the lock, the config's
 * lock rule, then the daemon's own "off": a learned "never elide" verdict
 * until its probe, or the long-window cut-off with its back-off.
 */
#ifndef ELIDED_DECIDE_LOCK_H
#define ELIDED_DECIDE_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "policy-config.h"

/* A lock given "never elide" from the store is probed again after this
 * many intervals, then with the daemon's own back-off (doubling to 64). */
#define ELIDED_LEARNED_PROBE_INTERVALS 60u
/* ...from this back-off: the store said so for whole runs. */
#define DECIDE_LOCK_LEARNED_BACKOFF 32u
/* The cut-off's back-off doubles up to this many intervals. */
#define DECIDE_LOCK_BACKOFF_MAX 64u
/* The knobs' values when the config leaves them unset (0, < 0). */
#define DECIDE_LOCK_MIN_ABORTS_DEFAULT 1000u
#define DECIDE_LOCK_MAX_ABORT_RATIO_DEFAULT 0.5

/* lock_view.learned, lock_decide_state.learned */
enum {
	VIEW_LEARNED_UNCHECKED = 0,  /* a new view: not yet compared with the hints */
	VIEW_LEARNED_NONE = 1,       /* no learned decision in force */
	VIEW_LEARNED_OFF = 2,        /* off from the store, until its probe */
	VIEW_LEARNED_FOREIGN = 3,    /* the process changed owner: a learned
				      * decision in the segment is the former
				      * owner's, checked against the hints alone */
};

/* What one interval's decision reads, copied from the process and the view. */
struct lock_decide_input {
	enum policy_mode process_mode; /* the process's override, else its config mode */
	enum policy_mode rule_mode;  /* the config's lock rule; UNSET: none matches */
	enum policy_mode override;   /* elidectl's for this lock; UNSET: none */
	/* The decision the lock's entry holds now: ELIDE_SEG_CTL_NONE or
	 * ELIDE_POLICY_* + 1, and its ELIDE_SEG_SOURCE_*. */
	uint32_t ctl_policy, ctl_source;
	bool hinted_never;           /* a "never elide" hint of the store names the lock */
	uint64_t min_aborts;         /* policy_knobs': 0 = DECIDE_LOCK_MIN_ABORTS_DEFAULT */
	double max_abort_ratio;      /* policy_knobs': < 0 = DECIDE_LOCK_MAX_ABORT_RATIO_DEFAULT */
};

/* What the decision keeps from one interval to the next (in the view). */
struct lock_decide_state {
	uint64_t window_aborts, window_attempts; /* counted since the cut-off's window began */
	uint8_t backoff_intervals;   /* the cut-off's back-off, <= DECIDE_LOCK_BACKOFF_MAX */
	uint8_t backoff_left;        /* intervals until the next probe */
	bool daemon_off;             /* off by the cut-off or a learned verdict */
	uint8_t learned;             /* VIEW_LEARNED_* */
};

struct lock_decision {
	enum policy_mode mode;       /* UNSET: none of its own, the lock runs as its process */
	uint32_t ctl_policy;         /* for the entry: ELIDE_SEG_CTL_NONE or ELIDE_POLICY_* + 1 */
	uint32_t source;             /* ELIDE_SEG_SOURCE_*; NONE with no decision */
	bool changed;                /* not what the entry holds: to be written */
};

/*
 * One interval's decision for one lock: its learned verdict looked at
 * once (state->learned UNCHECKED or FOREIGN), the cut-off's window judged
 * or its back-off counted down (adaptive mode, no override, no rule), and
 * the decision.  *state is updated in place.
 */
struct lock_decision decide_lock(const struct lock_decide_input *in, struct lock_decide_state *state);

#endif
