/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * RTM primitives and the abort vocabulary.  Callers execute RTM instructions
 * only after elide_hw_detect() found RTM usable.
 */
#ifndef ELIDE_RTM_H
#define ELIDE_RTM_H

#include <immintrin.h>
#include <stdint.h>

/* Explicit abort codes (the imm8 of XABORT), visible in abort statistics. */
#define ELIDE_XABORT_BUSY 0xff     /* the elided lock was held for real */
#define ELIDE_XABORT_TRYLOCK 0xfe  /* trylock inside an elided section */
#define ELIDE_XABORT_COND 0xfd     /* pthread_cond_*wait on an elided mutex */
#define ELIDE_XABORT_DESTROY 0xfc  /* destroy inside an elided section */
#define ELIDE_XABORT_DEPTH 0xfb    /* elided sections nested too deeply */
#define ELIDE_XABORT_RELOCK 0xfa   /* an rwlock relock glibc refuses (EDEADLK) */

/* Causes, in the order of precedence used to classify one abort status. */
enum elide_abort_cause {
	ELIDE_ABORT_CONFLICT = 0, /* another CPU touched our read/write set */
	ELIDE_ABORT_CAPACITY,     /* the footprint did not fit the cache */
	ELIDE_ABORT_BUSY,         /* lock held for real when we started */
	ELIDE_ABORT_EXPLICIT,     /* trylock, cond wait, destroy, nesting depth */
	ELIDE_ABORT_RETRY,        /* only the "may succeed on retry" hint */
	ELIDE_ABORT_DEBUG,        /* debug exception or breakpoint */
	ELIDE_ABORT_NESTED,       /* aborted inside a nested transaction */
	ELIDE_ABORT_OTHER,        /* no bit: syscall, interrupt, page fault, unfriendly instruction */
	ELIDE_ABORT_NCAUSES
};

static inline enum elide_abort_cause elide_abort_classify(uint32_t status)
{
	if (status & _XABORT_EXPLICIT)
		return _XABORT_CODE(status) == ELIDE_XABORT_BUSY ? ELIDE_ABORT_BUSY : ELIDE_ABORT_EXPLICIT;
	if (status & _XABORT_CAPACITY)
		return ELIDE_ABORT_CAPACITY;
	if (status & _XABORT_CONFLICT)
		return ELIDE_ABORT_CONFLICT;
	if (status & _XABORT_DEBUG)
		return ELIDE_ABORT_DEBUG;
	if (status & _XABORT_NESTED)
		return ELIDE_ABORT_NESTED;
	if (status & _XABORT_RETRY)
		return ELIDE_ABORT_RETRY;
	return ELIDE_ABORT_OTHER;
}

/* Whether another transaction attempt in the same acquisition may pay off. */
static inline int elide_abort_is_transient(uint32_t status)
{
	if (status & (_XABORT_EXPLICIT | _XABORT_CAPACITY))
		return 0;
	return (status & (_XABORT_RETRY | _XABORT_CONFLICT)) != 0;
}

static const char *const elide_abort_cause_names[ELIDE_ABORT_NCAUSES] = {
	[ELIDE_ABORT_CONFLICT] = "conflict",
	[ELIDE_ABORT_CAPACITY] = "capacity",
	[ELIDE_ABORT_BUSY] = "busy",
	[ELIDE_ABORT_EXPLICIT] = "explicit",
	[ELIDE_ABORT_RETRY] = "retry",
	[ELIDE_ABORT_DEBUG] = "debug",
	[ELIDE_ABORT_NESTED] = "nested",
	[ELIDE_ABORT_OTHER] = "other",
};

#endif
