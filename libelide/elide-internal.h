/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libelide internals shared by elide.c (the interposers), registry.c (lock
 * records and adaptation) and report.c (the exit report).
 */
#ifndef ELIDE_INTERNAL_H
#define ELIDE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "elide.h"
#include "hw.h"
#include "macros.h"
#include "options.h"
#include "rtm.h"

/*
 * A lock's record index lives inside the lock, in bytes glibc keeps for
 * elision or padding and zeroes in every initializer (glibc >= 2.25,
 * x86_64 layouts from <bits/struct_mutex.h> and <bits/struct_rwlock.h>):
 *   mutex:  __data.__elision (glibc's elision never runs beside us: we refuse
 *           to start when GLIBC_TUNABLES enables it)
 *   rwlock: __data.__pad1[1..2]
 * 0 means "no record yet".  Reading it costs nothing extra: it shares the
 * cache line with the lock word that the fast path reads anyway.
 */
static inline uint16_t *mutex_idx_ptr(pthread_mutex_t *m)
{
	return (uint16_t *)&m->__data.__elision;
}

static inline uint16_t *rwlock_idx_ptr(pthread_rwlock_t *rw)
{
	return (uint16_t *)(void *)&rw->__data.__pad1[1];
}

/* glibc's rwlock __readers word (documented in pthread_rwlock_common.c). */
#define RWLOCK_WRPHASE 1u
#define RWLOCK_WRLOCKED 2u
#define RWLOCK_READER_SHIFT 3

enum lock_kind {
	LOCK_KIND_MUTEX = 0,
	LOCK_KIND_RWLOCK = 1,
};

/*
 * The gate, read on every acquisition of a tracked lock:
 *   GATE_ELIDE  try a transaction
 *   > 0         take the real lock this many more times (adaptive back-off)
 *   GATE_WATCH  take the real lock; count contention, elide once contended
 *   GATE_NEVER  take the real lock (policy, or a type we must not elide)
 */
#define GATE_ELIDE 0
#define GATE_WATCH (-1)
#define GATE_NEVER (-2)

/* Why a lock is in its state; shown in the report. */
enum lock_reason {
	REASON_UNCONTENDED = 0, /* adaptive, waiting for contention */
	REASON_CONTENDED,       /* adaptive, eliding because it is contended */
	REASON_MODE_ON,         /* ELIDE=mode=on */
	REASON_POLICY_ALWAYS,   /* elide.h ELIDE_POLICY_ALWAYS */
	REASON_POLICY_NEVER,    /* elide.h ELIDE_POLICY_NEVER */
	REASON_TYPE_NORMAL,     /* explicit PTHREAD_MUTEX_NORMAL must deadlock on relock */
	REASON_NREASONS
};

enum lock_stat {
	STAT_ACQUIRED = 0,     /* estimate: exact real acquisitions + sampled commits */
	STAT_ATTEMPTS,         /* transactions started (commits estimate + aborts) */
	STAT_COMMITS,          /* estimate: sampled 1 in opts.sample */
	STAT_FALLBACKS,        /* acquisitions that gave up eliding and took the lock */
	STAT_CONTENDED,        /* acquisitions that found the lock held (real path) */
	STAT_SKIPPED,          /* estimate: real acquisitions during back-off */
	STAT_CYCLES_LOST,      /* estimate: TSC cycles spent in aborted transactions */
	STAT_ABORT_FIRST,      /* + enum elide_abort_cause */
	STAT_NSTATS = STAT_ABORT_FIRST + ELIDE_ABORT_NCAUSES
};

struct lock_rec {
	/* Hot, read-mostly: read before every transaction. */
	_Atomic int32_t gate;
	_Atomic uint8_t policy;       /* enum elide_policy of this lock */
	_Atomic uint8_t reason;       /* enum lock_reason */
	uint8_t kind;                 /* enum lock_kind */
	_Atomic uint8_t backoff_level; /* back-off doubles per persistent abort */
	_Atomic(void *) addr;         /* the lock; NULL when the record is free */
	void *callsite;               /* first contended acquisition's return address */
	char name[ELIDE_NAME_MAX];    /* from elide.h, or empty */
	/* Cold: written on aborts, contention and 1 in opts.sample commits. */
	_Atomic uint32_t contended_watch; /* contended acquisitions while watching */
	_Atomic uint32_t window_aborts;
	_Atomic uint64_t window_commits;
	_Atomic uint64_t stats[STAT_NSTATS];
	uint32_t next_free;
} __attribute__((aligned(64)));

struct elide_state {
	bool enabled;                 /* elide at all (RTM usable, mode != off, ...) */
	const char *disabled_reason;  /* why not, when !enabled */
	struct elide_options opts;
	struct elide_hw hw;
	uint32_t sample_mask;         /* opts.sample - 1 */
	bool sim_abort;               /* ELIDE_SIM_ABORT: no RTM, pretend every XBEGIN aborts */
	uint32_t sim_abort_status;    /* ...with this status */
	struct lock_rec *recs;        /* opts.max_locks records, [0] unused, [1] overflow */
	uint32_t nrecs;
};

extern struct elide_state elide _hidden_;

/* Record index 1 collects every lock that found the table full. */
#define REC_OVERFLOW 1

/* registry.c */
int registry_init(void) _hidden_;
struct lock_rec *rec_of_idx(uint16_t idx) _hidden_;
struct lock_rec *registry_attach(void *lock, uint16_t *idx_ptr, enum lock_kind kind, void *callsite) _hidden_;
void registry_detach(uint16_t *idx_ptr) _hidden_;
void registry_fork_prepare(void) _hidden_;
void registry_fork_parent(void) _hidden_;
void registry_fork_child(void) _hidden_;
void rec_count(struct lock_rec *rec, enum lock_stat stat, uint64_t n) _hidden_;
void rec_set_policy(struct lock_rec *rec, int policy) _hidden_;
void rec_note_contended(struct lock_rec *rec) _hidden_;
void rec_note_abort(struct lock_rec *rec, uint32_t status, uint64_t cycles) _hidden_;
void rec_note_commit_sample(struct lock_rec *rec) _hidden_;
void rec_back_off(struct lock_rec *rec) _hidden_;
int attr_mark_normal(const pthread_mutexattr_t *attr, bool normal) _hidden_;
bool attr_is_normal(const pthread_mutexattr_t *attr) _hidden_;

/* report.c */
void report_print(int fd) _hidden_;

#endif
