/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The elision advisor: from what libelide measured of a lock, an estimate
 * of whether eliding it would pay.  Documented in elidectl(1), ADVICE.
 *
 * Elision wins time only where threads wait for a lock whose sections
 * could run side by side; it loses where a section cannot commit.  What can
 * be seen without RTM is the first half (waiting, contention) and part of
 * the second (sections so long, or so often long, that a transaction would
 * not survive them).  Whether concurrent sections touch the same data
 * (conflicts) only a transaction can tell: on a CPU without RTM a
 * "candidate" is therefore an estimate, and says so.
 */
#include <stdio.h>
#include <string.h>

#include "advice.h"

/* Waiting below this share of the process's run time, and contention
 * below CONTENDED_SHARE_MIN, leaves elision nothing to win. */
#define WAIT_SHARE_MIN 0.001
#define CONTENDED_SHARE_MIN 0.01
/* Hold samples needed before the hold time is believed. */
#define HOLD_SAMPLES_MIN 8
/* Share of long holds (ELIDE_SEG_HOLD_LONG_NS or longer) above which too
 * many transactions would abort.  The mean hold decides nothing: one
 * section preempted for a scheduler slice outweighs hundreds of short
 * ones in it, yet would cost one aborted transaction among them. */
#define LONG_SHARE_MAX 0.10
/* Transactions needed before their outcome decides; commit shares. */
#define ATTEMPTS_MIN 64
#define COMMIT_SHARE_ELIDES 0.5

static double share(uint64_t part, uint64_t whole)
{
	if (whole == 0)
		return -1.0;
	return part > whole ? 1.0 : (double)part / (double)whole;
}

void advise_lock(const struct elide_seg_lock *l, double runtime_s, struct advice *a)
{
	uint64_t attempts = l->stats[ELIDE_SEG_STAT_ATTEMPTS];
	uint64_t acquired = l->stats[ELIDE_SEG_STAT_ACQUIRED];
	uint64_t contended = l->stats[ELIDE_SEG_STAT_CONTENDED];

	memset(a, 0, sizeof(*a));
	a->wait_share = runtime_s > 0 ? (double)l->wait_ns / (runtime_s * 1e9) : -1.0;
	/* Sampled acquisitions can lag the exact contended count. */
	a->contended_share = share(contended, acquired > contended ? acquired : contended);
	a->hold_known = l->hold_samples >= HOLD_SAMPLES_MIN;
	a->hold_mean_ns = l->hold_samples ? l->hold_ns / l->hold_samples : 0;
	a->long_share = share(l->hold_long, l->hold_samples);
	a->commit_share = attempts >= ATTEMPTS_MIN ? share(l->stats[ELIDE_SEG_STAT_COMMITS], attempts) : -1.0;

	if (a->commit_share >= 0) {
		/* Measured: the hardware's word is final. */
		a->verdict = a->commit_share >= COMMIT_SHARE_ELIDES ? ADVICE_ELIDES : ADVICE_ABORTS;
		return;
	}
	if (!(a->wait_share >= WAIT_SHARE_MIN) && !(a->contended_share >= CONTENDED_SHARE_MIN)) {
		a->verdict = ADVICE_QUIET;
		return;
	}
	if (!a->hold_known) {
		a->verdict = ADVICE_UNKNOWN;
		return;
	}
	if (a->long_share > LONG_SHARE_MAX) {
		a->verdict = ADVICE_TOO_LONG;
		return;
	}
	a->verdict = ADVICE_CANDIDATE;
}

void advise_observed(uint64_t waits, uint64_t wait_ns, double runtime_s, struct advice *a)
{
	memset(a, 0, sizeof(*a));
	a->wait_share = runtime_s > 0 ? (double)wait_ns / (runtime_s * 1e9) : -1.0;
	a->contended_share = -1.0;
	a->long_share = -1.0;
	a->commit_share = -1.0;
	/* Without the acquisitions only the waiting time can say "quiet". */
	a->verdict = waits && !(a->wait_share >= 0 && a->wait_share < WAIT_SHARE_MIN) ? ADVICE_WAITS : ADVICE_QUIET;
}

const char *advice_verdict_name(enum advice_verdict v)
{
	switch (v) {
	case ADVICE_QUIET:
		return "quiet";
	case ADVICE_UNKNOWN:
		return "unknown";
	case ADVICE_TOO_LONG:
		return "too-long";
	case ADVICE_CANDIDATE:
		return "candidate";
	case ADVICE_ELIDES:
		return "elides";
	case ADVICE_ABORTS:
		return "aborts";
	case ADVICE_WAITS:
		return "waits";
	}
	return "?";
}

const char *advice_verdict_text(enum advice_verdict v)
{
	switch (v) {
	case ADVICE_QUIET:
		return "little waiting: elision has nothing to win";
	case ADVICE_UNKNOWN:
		return "contended; too few hold samples yet to judge";
	case ADVICE_TOO_LONG:
		return "contended, but its sections are long or block: transactions would abort";
	case ADVICE_CANDIDATE:
		return "contended with short sections: elision may pay (estimate: conflicts show only under RTM)";
	case ADVICE_ELIDES:
		return "measured: its transactions commit";
	case ADVICE_ABORTS:
		return "measured: its transactions abort";
	case ADVICE_WAITS:
		return "threads sleep waiting for it (seen without libelide): its hold times decide, measure them";
	}
	return "?";
}

void advice_action(const struct advice *a, const char *exe, const char *unit, bool rtm_here, char *buf,
		   size_t size)
{
	switch (a->verdict) {
	case ADVICE_CANDIDATE:
	case ADVICE_ELIDES:
		if (!rtm_here)
			snprintf(buf, size, "elide it on a CPU with RTM (this one has none)");
		else if (unit && *unit)
			snprintf(buf, size, "elidectl enable --unit %s", unit);
		else
			snprintf(buf, size, "program rule { exe = \"%s\"; mode = \"adaptive\"; }", exe && *exe ? exe : "EXE");
		return;
	case ADVICE_ABORTS:
		snprintf(buf, size, "program rule { exe = \"%s\"; mode = \"off\"; }", exe && *exe ? exe : "EXE");
		return;
	case ADVICE_TOO_LONG:
		snprintf(buf, size, "shorten the section or split the lock");
		return;
	case ADVICE_WAITS:
		if (unit && *unit)
			snprintf(buf, size, "measure it: elidectl enable --unit %s --mode watch", unit);
		else
			snprintf(buf, size, "measure it: elidectl run --mode watch %s", exe && *exe ? exe : "EXE");
		return;
	case ADVICE_UNKNOWN:
	case ADVICE_QUIET:
		break;
	}
	snprintf(buf, size, "-");
}
