/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The elision advisor (advice.c): an estimate per lock, labelled as such. */
#ifndef ELIDECTL_ADVICE_H
#define ELIDECTL_ADVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "segment-format.h"

enum advice_verdict {
	ADVICE_QUIET,      /* little waiting */
	ADVICE_UNKNOWN,    /* contended, hold not sampled enough yet */
	ADVICE_TOO_LONG,   /* contended, sections too long to commit */
	ADVICE_CANDIDATE,  /* contended, short sections: may pay (estimate) */
	ADVICE_ELIDES,     /* RTM measured: commits */
	ADVICE_ABORTS,     /* RTM measured: aborts */
	ADVICE_WAITS,      /* seen from outside (BPF, no libelide): waits, holds unknown */
};

struct advice {
	enum advice_verdict verdict;
	double wait_share;            /* waiting time / the process's run time; < 0 unknown */
	double contended_share;       /* contended / acquisitions; < 0 unknown */
	bool hold_known;              /* enough hold samples */
	uint64_t hold_mean_ns;
	double long_share;            /* sampled holds >= ELIDE_SEG_HOLD_LONG_NS; < 0 unknown */
	double commit_share;          /* commits / attempts where RTM tried enough; < 0 none */
};

/* runtime_s: how long the process has run with libelide (0: unknown). */
void advise_lock(const struct elide_seg_lock *l, double runtime_s, struct advice *a);
/* A lock of a program without libelide, from elided's BPF observer: only
 * its sleeps are known. */
void advise_observed(uint64_t waits, uint64_t wait_ns, double runtime_s, struct advice *a);
const char *advice_verdict_name(enum advice_verdict v);
const char *advice_verdict_text(enum advice_verdict v);
/* What to do about it: a command or a configuration rule, or "-". */
void advice_action(const struct advice *a, const char *exe, const char *unit, bool rtm_here, char *buf,
		   size_t size);

#endif
