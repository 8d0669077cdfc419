/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided's per-lock decision (elided/decide-lock.c), a pure function, by a
 * table: each row gives the inputs, the state before, how many intervals
 * it runs, and the decision of the last interval and the state after.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "decide-lock.h"
#include "elide.h"
#include "macros.h"
#include "segment-format.h"

#define UNSET POLICY_MODE_UNSET
#define ADAPTIVE POLICY_MODE_ADAPTIVE
#define MODE_ON POLICY_MODE_ON
#define MODE_OFF POLICY_MODE_OFF
#define WATCH POLICY_MODE_WATCH

/* What a lock's entry holds. */
#define CTL_NONE ELIDE_SEG_CTL_NONE
#define CTL_ADAPTIVE (ELIDE_POLICY_ADAPTIVE + 1)
#define CTL_ON (ELIDE_POLICY_ALWAYS + 1)
#define CTL_OFF (ELIDE_POLICY_NEVER + 1)

#define S_NONE ELIDE_SEG_SOURCE_NONE
#define S_CONFIG ELIDE_SEG_SOURCE_CONFIG
#define S_OVERRIDE ELIDE_SEG_SOURCE_OVERRIDE
#define S_ADAPTATION ELIDE_SEG_SOURCE_ADAPTATION
#define S_LEARNED ELIDE_SEG_SOURCE_LEARNED

#define L_UNCHECKED VIEW_LEARNED_UNCHECKED
#define L_NONE VIEW_LEARNED_NONE
#define L_OFF VIEW_LEARNED_OFF
#define L_FOREIGN VIEW_LEARNED_FOREIGN

#define PROBE ELIDED_LEARNED_PROBE_INTERVALS

/* The process's mode, the lock rule's, the override, what the entry holds
 * (policy, source), and whether a "never" hint names the lock. */
#define IN(process, rule, ovr, ctl, src, hinted)                                                   \
	{ .process_mode = (process), .rule_mode = (rule), .override = (ovr), .ctl_policy = (ctl), \
	  .ctl_source = (src), .hinted_never = (hinted) }
/* Off by the daemon, back-off (intervals, left), learned, the window (aborts, attempts). */
#define ST(off, intervals, left, learned_, aborts, attempts)                                            \
	{ .daemon_off = (off), .backoff_intervals = (intervals), .backoff_left = (left), .learned = (learned_), \
	  .window_aborts = (aborts), .window_attempts = (attempts) }
#define DEC(mode_, ctl, src, changed_) { .mode = (mode_), .ctl_policy = (ctl), .source = (src), .changed = (changed_) }

struct knobs {
	uint64_t min_aborts;
	double max_abort_ratio;
};

static const struct knobs tight = { .min_aborts = 10, .max_abort_ratio = 0.2 };
static const struct knobs ratio_zero = { .min_aborts = 1, .max_abort_ratio = 0.0 };

struct row {
	const char *name;
	struct lock_decide_input in;
	const struct knobs *knobs;   /* NULL: unset in the config, the defaults (1000 aborts, 0.5) */
	struct lock_decide_state before;
	unsigned intervals;          /* decide_lock() calls, 0 = 1; the entry holds what each one decided */
	uint64_t aborts_each, attempts_each; /* counted into the window before each call, as update_view() does */
	struct lock_decision want;   /* of the last call */
	struct lock_decide_state after;
};

static const struct row rows[] = {
	/* ---- the process's off: the kill switch ---- */
	{ .name = "process off: no lock decision, not even the override's",
	  .in = IN(MODE_OFF, UNSET, MODE_ON, CTL_NONE, S_NONE, false), .before = ST(false, 0, 0, L_NONE, 0, 0),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, false), .after = ST(false, 0, 0, L_NONE, 0, 0) },
	{ .name = "process off: a rule's decision written before is taken back",
	  .in = IN(MODE_OFF, MODE_ON, UNSET, CTL_ON, S_CONFIG, false), .before = ST(false, 0, 0, L_NONE, 0, 0),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, true), .after = ST(false, 0, 0, L_NONE, 0, 0) },
	{ .name = "process off: the daemon's off is taken back, its back-off not counted down",
	  .in = IN(MODE_OFF, UNSET, UNSET, CTL_OFF, S_ADAPTATION, false), .before = ST(true, 4, 3, L_NONE, 0, 0),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, true), .after = ST(true, 4, 3, L_NONE, 0, 0) },
	{ .name = "process off: a learned verdict is not applied",
	  .in = IN(MODE_OFF, UNSET, UNSET, CTL_NONE, S_NONE, true), .before = ST(false, 0, 0, L_UNCHECKED, 0, 0),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, false), .after = ST(false, 0, 0, L_NONE, 0, 0) },

	/* ---- who wins: override, rule, learned, adaptation ---- */
	{ .name = "override beats the lock rule",
	  .in = IN(ADAPTIVE, MODE_OFF, MODE_ON, CTL_NONE, S_NONE, false), .before = ST(false, 0, 0, L_NONE, 0, 0),
	  .want = DEC(MODE_ON, CTL_ON, S_OVERRIDE, true), .after = ST(false, 0, 0, L_NONE, 0, 0) },
	{ .name = "override beats the daemon's off, whose back-off waits",
	  .in = IN(ADAPTIVE, UNSET, MODE_ON, CTL_OFF, S_ADAPTATION, false), .before = ST(true, 4, 3, L_NONE, 0, 0),
	  .want = DEC(MODE_ON, CTL_ON, S_OVERRIDE, true), .after = ST(true, 4, 3, L_NONE, 0, 0) },
	{ .name = "override already in the entry: nothing to write",
	  .in = IN(ADAPTIVE, UNSET, MODE_OFF, CTL_OFF, S_OVERRIDE, false), .before = ST(false, 0, 0, L_NONE, 0, 0),
	  .want = DEC(MODE_OFF, CTL_OFF, S_OVERRIDE, false), .after = ST(false, 0, 0, L_NONE, 0, 0) },
	{ .name = "rule beats learned: the verdict is noted, the rule written",
	  .in = IN(ADAPTIVE, MODE_ON, UNSET, CTL_NONE, S_NONE, true), .before = ST(false, 0, 0, L_UNCHECKED, 0, 0),
	  .want = DEC(MODE_ON, CTL_ON, S_CONFIG, true), .after = ST(true, 32, PROBE, L_OFF, 0, 0) },
	{ .name = "rule beats adaptation: no window judged",
	  .in = IN(ADAPTIVE, MODE_ON, UNSET, CTL_ON, S_CONFIG, false), .before = ST(false, 0, 0, L_NONE, 5000, 5000),
	  .want = DEC(MODE_ON, CTL_ON, S_CONFIG, false), .after = ST(false, 0, 0, L_NONE, 5000, 5000) },
	{ .name = "rule beats the daemon's off, whose back-off waits",
	  .in = IN(ADAPTIVE, MODE_ON, UNSET, CTL_OFF, S_ADAPTATION, false), .before = ST(true, 2, 2, L_NONE, 0, 0),
	  .want = DEC(MODE_ON, CTL_ON, S_CONFIG, true), .after = ST(true, 2, 2, L_NONE, 0, 0) },
	{ .name = "rule watch: the lock is never elided",
	  .in = IN(ADAPTIVE, WATCH, UNSET, CTL_NONE, S_NONE, false), .before = ST(false, 0, 0, L_NONE, 0, 0),
	  .want = DEC(WATCH, CTL_OFF, S_CONFIG, true), .after = ST(false, 0, 0, L_NONE, 0, 0) },
	{ .name = "rule adaptive in a process that is on",
	  .in = IN(MODE_ON, ADAPTIVE, UNSET, CTL_NONE, S_NONE, false), .before = ST(false, 0, 0, L_NONE, 0, 0),
	  .want = DEC(ADAPTIVE, CTL_ADAPTIVE, S_CONFIG, true), .after = ST(false, 0, 0, L_NONE, 0, 0) },
	{ .name = "learned beats adaptation: off from the store, the window waits",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, true), .before = ST(false, 0, 0, L_UNCHECKED, 5000, 5000),
	  .want = DEC(MODE_OFF, CTL_OFF, S_LEARNED, true), .after = ST(true, 32, PROBE - 1, L_OFF, 5000, 5000) },

	/* ---- learned verdicts ---- */
	{ .name = "learned, applied by libelide already: kept, nothing to write",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_OFF, S_LEARNED, false), .before = ST(false, 0, 0, L_UNCHECKED, 0, 0),
	  .want = DEC(MODE_OFF, CTL_OFF, S_LEARNED, false), .after = ST(true, 32, PROBE - 1, L_OFF, 0, 0) },
	{ .name = "no hint: nothing learned",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, false), .before = ST(false, 0, 0, L_UNCHECKED, 0, 0),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, false), .after = ST(false, 0, 0, L_NONE, 0, 0) },
	{ .name = "learned looked at once: a checked view ignores the hints",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, true), .before = ST(false, 0, 0, L_NONE, 0, 0),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, false), .after = ST(false, 0, 0, L_NONE, 0, 0) },
	{ .name = "learned never: still off the interval before its probe",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, true), .before = ST(false, 0, 0, L_UNCHECKED, 0, 0),
	  .intervals = PROBE - 1,
	  .want = DEC(MODE_OFF, CTL_OFF, S_LEARNED, false), .after = ST(true, 32, 1, L_OFF, 0, 0) },
	{ .name = "learned never: probed after ELIDED_LEARNED_PROBE_INTERVALS, back-off 32 kept",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, true), .before = ST(false, 0, 0, L_UNCHECKED, 0, 0),
	  .intervals = PROBE,
	  .want = DEC(UNSET, CTL_NONE, S_NONE, true), .after = ST(false, 32, 0, L_NONE, 0, 0) },
	{ .name = "learned never, probed, aborting again: back-off 32 doubles to 64",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, true), .before = ST(false, 0, 0, L_UNCHECKED, 0, 0),
	  .intervals = PROBE + 1, .aborts_each = 1000, .attempts_each = 1000,
	  .want = DEC(MODE_OFF, CTL_OFF, S_ADAPTATION, true), .after = ST(true, 64, 64, L_NONE, 0, 0) },
	{ .name = "learned never, probed, committing: back-off 32 halves to 16",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, true), .before = ST(false, 0, 0, L_UNCHECKED, 0, 0),
	  .intervals = PROBE + 1, .aborts_each = 1000, .attempts_each = 4000,
	  .want = DEC(UNSET, CTL_NONE, S_NONE, false), .after = ST(false, 16, 0, L_NONE, 0, 0) },

	/* ---- the long-window cut-off and its back-off ---- */
	{ .name = "cut-off at min_aborts over the ratio: back-off of one interval",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, false), .before = ST(false, 0, 0, L_NONE, 1000, 1500),
	  .want = DEC(MODE_OFF, CTL_OFF, S_ADAPTATION, true), .after = ST(true, 1, 1, L_NONE, 0, 0) },
	{ .name = "under min_aborts: no verdict, the window goes on",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, false), .before = ST(false, 0, 0, L_NONE, 999, 999),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, false), .after = ST(false, 0, 0, L_NONE, 999, 999) },
	{ .name = "aborts exactly at the ratio pass: back-off halves, window afresh",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, false), .before = ST(false, 8, 0, L_NONE, 1000, 2000),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, false), .after = ST(false, 4, 0, L_NONE, 0, 0) },
	{ .name = "no attempts counted: one stands in for them",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, false), .before = ST(false, 0, 0, L_NONE, 1000, 0),
	  .want = DEC(MODE_OFF, CTL_OFF, S_ADAPTATION, true), .after = ST(true, 1, 1, L_NONE, 0, 0) },
	{ .name = "back-off doubles",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, false), .before = ST(false, 16, 0, L_NONE, 1000, 1000),
	  .want = DEC(MODE_OFF, CTL_OFF, S_ADAPTATION, true), .after = ST(true, 32, 32, L_NONE, 0, 0) },
	{ .name = "back-off stops doubling at 64",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, false), .before = ST(false, 64, 0, L_NONE, 2000, 2000),
	  .want = DEC(MODE_OFF, CTL_OFF, S_ADAPTATION, true), .after = ST(true, 64, 64, L_NONE, 0, 0) },
	{ .name = "back-off counts down, the decision stays written",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_OFF, S_ADAPTATION, false), .before = ST(true, 4, 3, L_NONE, 0, 0),
	  .want = DEC(MODE_OFF, CTL_OFF, S_ADAPTATION, false), .after = ST(true, 4, 2, L_NONE, 0, 0) },
	{ .name = "probe at the back-off's end: decision taken back, window afresh",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_OFF, S_ADAPTATION, false), .before = ST(true, 4, 1, L_NONE, 50, 60),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, true), .after = ST(false, 4, 0, L_NONE, 0, 0) },
	{ .name = "back-off 64: off for 64 intervals, then probed",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_OFF, S_ADAPTATION, false), .before = ST(true, 64, 64, L_NONE, 0, 0),
	  .intervals = 64,
	  .want = DEC(UNSET, CTL_NONE, S_NONE, true), .after = ST(false, 64, 0, L_NONE, 0, 0) },
	{ .name = "back-off 64: still off the interval before",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_OFF, S_ADAPTATION, false), .before = ST(true, 64, 64, L_NONE, 0, 0),
	  .intervals = 63,
	  .want = DEC(MODE_OFF, CTL_OFF, S_ADAPTATION, false), .after = ST(true, 64, 1, L_NONE, 0, 0) },
	{ .name = "knobs: min_aborts 10 and ratio 0.2 cut off",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, false), .knobs = &tight,
	  .before = ST(false, 0, 0, L_NONE, 10, 40),
	  .want = DEC(MODE_OFF, CTL_OFF, S_ADAPTATION, true), .after = ST(true, 1, 1, L_NONE, 0, 0) },
	{ .name = "knobs: aborts at a ratio of 0.2 pass",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, false), .knobs = &tight,
	  .before = ST(false, 2, 0, L_NONE, 10, 50),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, false), .after = ST(false, 1, 0, L_NONE, 0, 0) },
	{ .name = "knobs: ratio 0 cuts off at the first abort",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_NONE, S_NONE, false), .knobs = &ratio_zero,
	  .before = ST(false, 0, 0, L_NONE, 1, 1000000),
	  .want = DEC(MODE_OFF, CTL_OFF, S_ADAPTATION, true), .after = ST(true, 1, 1, L_NONE, 0, 0) },

	/* ---- a mode other than adaptive: no adaptation, nothing learned ---- */
	{ .name = "mode on: no adaptation",
	  .in = IN(MODE_ON, UNSET, UNSET, CTL_NONE, S_NONE, false), .before = ST(false, 0, 0, L_NONE, 5000, 5000),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, false), .after = ST(false, 0, 0, L_NONE, 5000, 5000) },
	{ .name = "mode watch: no adaptation",
	  .in = IN(WATCH, UNSET, UNSET, CTL_NONE, S_NONE, false), .before = ST(false, 0, 0, L_NONE, 5000, 5000),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, false), .after = ST(false, 0, 0, L_NONE, 5000, 5000) },
	{ .name = "mode on: learned not applied",
	  .in = IN(MODE_ON, UNSET, UNSET, CTL_NONE, S_NONE, true), .before = ST(false, 0, 0, L_UNCHECKED, 0, 0),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, false), .after = ST(false, 0, 0, L_NONE, 0, 0) },
	{ .name = "mode on: a hint libelide applied is taken back",
	  .in = IN(MODE_ON, UNSET, UNSET, CTL_OFF, S_LEARNED, false), .before = ST(false, 0, 0, L_UNCHECKED, 0, 0),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, true), .after = ST(false, 0, 0, L_NONE, 0, 0) },
	{ .name = "mode on: an earlier cut-off holds, not counted down",
	  .in = IN(MODE_ON, UNSET, UNSET, CTL_OFF, S_ADAPTATION, false), .before = ST(true, 2, 2, L_NONE, 0, 0),
	  .want = DEC(MODE_OFF, CTL_OFF, S_ADAPTATION, false), .after = ST(true, 2, 2, L_NONE, 0, 0) },

	/* ---- a change of owner ---- */
	{ .name = "owner changed: the former owner's learned decision is taken back",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_OFF, S_LEARNED, false), .before = ST(false, 32, 40, L_FOREIGN, 0, 0),
	  .want = DEC(UNSET, CTL_NONE, S_NONE, true), .after = ST(false, 32, 40, L_NONE, 0, 0) },
	{ .name = "owner changed: the new owner's hint says never too",
	  .in = IN(ADAPTIVE, UNSET, UNSET, CTL_OFF, S_LEARNED, true), .before = ST(false, 0, 0, L_FOREIGN, 0, 0),
	  .want = DEC(MODE_OFF, CTL_OFF, S_LEARNED, false), .after = ST(true, 32, PROBE - 1, L_OFF, 0, 0) },
};

START_TEST(test_row)
{
	const struct row *r = &rows[_i];
	struct lock_decide_input in = r->in;
	struct lock_decide_state st = r->before;
	struct lock_decision dec = { 0 };
	unsigned n = r->intervals ? r->intervals : 1;

	in.min_aborts = r->knobs ? r->knobs->min_aborts : 0;
	in.max_abort_ratio = r->knobs ? r->knobs->max_abort_ratio : -1;
	for (unsigned i = 0; i < n; i++) {
		st.window_aborts += r->aborts_each;
		st.window_attempts += r->attempts_each;
		dec = decide_lock(&in, &st);
		/* The pass wrote it: the entry holds it at the next interval. */
		if (dec.changed) {
			in.ctl_policy = dec.ctl_policy;
			in.ctl_source = dec.source;
		}
	}
	ck_assert_msg(dec.mode == r->want.mode, "%s: mode %d, want %d", r->name, dec.mode, r->want.mode);
	ck_assert_msg(dec.ctl_policy == r->want.ctl_policy, "%s: ctl_policy %u, want %u", r->name, dec.ctl_policy,
		      r->want.ctl_policy);
	ck_assert_msg(dec.source == r->want.source, "%s: source %u, want %u", r->name, dec.source, r->want.source);
	ck_assert_msg(dec.changed == r->want.changed, "%s: changed %d, want %d", r->name, dec.changed, r->want.changed);
	ck_assert_msg(st.daemon_off == r->after.daemon_off, "%s: daemon_off %d, want %d", r->name, st.daemon_off,
		      r->after.daemon_off);
	ck_assert_msg(st.backoff_intervals == r->after.backoff_intervals, "%s: backoff_intervals %u, want %u", r->name,
		      st.backoff_intervals, r->after.backoff_intervals);
	ck_assert_msg(st.backoff_left == r->after.backoff_left, "%s: backoff_left %u, want %u", r->name,
		      st.backoff_left, r->after.backoff_left);
	ck_assert_msg(st.learned == r->after.learned, "%s: learned %u, want %u", r->name, st.learned, r->after.learned);
	ck_assert_msg(st.window_aborts == r->after.window_aborts && st.window_attempts == r->after.window_attempts,
		      "%s: window %llu/%llu, want %llu/%llu", r->name, (unsigned long long)st.window_aborts,
		      (unsigned long long)st.window_attempts, (unsigned long long)r->after.window_aborts,
		      (unsigned long long)r->after.window_attempts);
}
END_TEST

static Suite *decide_lock_suite(void)
{
	Suite *s = suite_create("decide-lock");
	TCase *tc = tcase_create("table");

	tcase_add_loop_test(tc, test_row, 0, (int)ARRAY_SIZE(rows));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(decide_lock_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
