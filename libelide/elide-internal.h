/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libelide internals shared by its files: the lock paths (fastpath.c,
 * mutex.c, rwlock.c, elision.c, ...; their own state is hotpath.h's),
 * elide.c (start-up), registry.c (lock records and adaptation), segment.c,
 * learn.c and report.c (the exit report).
 */
#ifndef ELIDE_INTERNAL_H
#define ELIDE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "elide.h"
#include "glibc-abi.h"
#include "hw.h"
#include "macros.h"
#include "options.h"
#include "rtm.h"
#include "segment-format.h"

/*
 * A lock's record index lives inside the lock, in bytes glibc keeps for
 * elision or padding and zeroes in every initializer (x86_64, glibc 2.28 ..
 * 2.43; offsets, assertions and the run-time check in glibc-abi.h):
 *   mutex:  byte 22, __elision / __unused (glibc's elision never runs beside
 *           us: we refuse to start when GLIBC_TUNABLES enables it)
 *   rwlock: bytes 34 (readers) and 36 (writers), inside __pad1
 * 0 means "no record yet".  Reading it costs nothing extra: it shares the
 * cache line with the lock word that the fast path reads anyway.
 */
static inline uint16_t *mutex_idx_ptr(pthread_mutex_t *m)
{
	return glibc_mutex_idx(m);
}

static inline uint16_t *rwlock_idx_ptr(pthread_rwlock_t *rw, bool write)
{
	/* Readers and writers adapt separately: two records per rwlock. */
	return glibc_rwlock_idx(rw, write);
}

/* glibc's rwlock __readers word (documented in pthread_rwlock_common.c). */
#define RWLOCK_WRPHASE 1u
#define RWLOCK_WRLOCKED 2u
#define RWLOCK_RWAITING 4u
#define RWLOCK_READER_SHIFT 3
#define RWLOCK_READER_OVERFLOW 0x80000000u /* glibc refuses a reader here: EAGAIN */
#define RWLOCK_ONE_READER (1u << RWLOCK_READER_SHIFT)
#define RWLOCK_FUTEX_USED 2u /* in __wrphase_futex: someone may sleep on it */

enum lock_kind {
	LOCK_KIND_MUTEX = 1,        /* values as enum elide_seg_kind */
	LOCK_KIND_RWLOCK_READ = 2,
	LOCK_KIND_RWLOCK_WRITE = 3,
};

/* elide.path: what the acquisition fast path does. */
enum lock_path {
	PATH_OFF = 0,        /* pass everything through (not eliding) */
	PATH_WATCH = 1,      /* adaptive: locks free and without a record go through */
	PATH_TRACK_ALL = 2,  /* mode=on: every eligible lock gets a record */
	PATH_OBSERVE = 3,    /* mode=watch, or no usable RTM: no transactions; a lock found
			      * held gets a record, its waits are timed, 1 in
			      * opts.watch_sample acquisitions has its hold timed */
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

/* Statistics live in the lock's segment entry (segment-format.h). */
enum lock_stat {
	STAT_ACQUIRED = ELIDE_SEG_STAT_ACQUIRED,
	STAT_ATTEMPTS = ELIDE_SEG_STAT_ATTEMPTS,
	STAT_COMMITS = ELIDE_SEG_STAT_COMMITS,
	STAT_FALLBACKS = ELIDE_SEG_STAT_FALLBACKS,
	STAT_CONTENDED = ELIDE_SEG_STAT_CONTENDED,
	STAT_SKIPPED = ELIDE_SEG_STAT_SKIPPED,
	STAT_CYCLES_LOST = ELIDE_SEG_STAT_CYCLES_LOST,
	STAT_ABORT_FIRST = ELIDE_SEG_STAT_ABORT_CONFLICT, /* + enum elide_abort_cause */
	STAT_NSTATS = ELIDE_SEG_NSTATS
};
_Static_assert(STAT_ABORT_FIRST + ELIDE_ABORT_NCAUSES == ELIDE_SEG_STAT_ABORT_OTHER + 1, "abort causes match the segment");
_Static_assert(STAT_ABORT_FIRST + ELIDE_ABORT_OTHER == ELIDE_SEG_STAT_ABORT_OTHER, "abort order");
_Static_assert(STAT_ABORT_FIRST + ELIDE_ABORT_BUSY == ELIDE_SEG_STAT_ABORT_BUSY, "abort order");

/*
 * Private per-lock state; index i pairs with segment entry i, which holds
 * the lock's identity, state and statistics for readers outside.
 */
struct lock_rec {
	/* Hot: read on acquisitions of the lock; written only when a decision
	 * changes, so it stays shared in every CPU's cache. */
	_Atomic int32_t gate;
	_Atomic uint8_t policy;        /* enum elide_policy in effect */
	_Atomic uint8_t own_policy;    /* set by the program (elide.h) or the lock type */
	_Atomic uint8_t reason;        /* enum elide_seg_reason */
	uint8_t kind;                  /* enum lock_kind */
	bool hard_never;               /* a lock type libelide must never elide */
	_Atomic(void *) addr;          /* the lock; NULL when the record is free */
	/* Cold, a line of its own: written on aborts, contention and 1 in
	 * opts.sample commits. */
	_Atomic uint32_t contended_watch __attribute__((aligned(64))); /* contended acquisitions while watching */
	_Atomic uint32_t window_aborts;
	_Atomic uint64_t window_commits;
	_Atomic uint8_t backoff_level; /* back-off doubles per persistent abort */
	uint32_t ctl_applied;          /* entry.ctl_policy last applied */
	_Atomic uint32_t next_free;    /* free-list link */
	/* A default mutex's own skip count (mutex.c, mutex_skip_length()):
	 * written by the thread that holds the mutex, once per skip. */
	_Atomic uint32_t skip_stamp;   /* TSC >> BURST_TSC_SHIFT when the last one was granted */
	_Atomic uint32_t skip_span;    /* acquisitions left in the back-off span; 1 = probe due, 0 = new span */
	_Atomic uint8_t skip_shift;    /* log2 of the last one's length, 0 = none yet */
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct lock_rec) == 128, "a record is one hot and one cold cache line");

struct elide_state {
	uint8_t path;                 /* enum lock_path, read first on every acquisition */
	/* pthread_mutex_lock() of that path (set_path()). */
	int (*mutex_lock)(pthread_mutex_t *m, void *callsite);
	bool enabled;                 /* elide at all (RTM usable, mode != off, ...) */
	/* Watch locks (PATH_OBSERVE) whatever mode elided pushes, because
	 * eliding is impossible here for want of RTM alone (opts.watch). */
	bool watch_instead;
	/* Default mutexes are taken and given by libelide itself, with glibc's
	 * protocol (glibc-protocol.h, "a default mutex's words"); set once, in
	 * the constructor, after glibc_check_default_mutex(). */
	bool own_mutex_words;
	bool own_rwlock_words;        /* the read side of default rwlocks, likewise */
	/* What the start-up checks allow; the two above are these unless
	 * mode=off, which forwards every call to glibc (set_path()). */
	bool own_mutex_allowed, own_rwlock_allowed;
	/* The program disabled the time-stamp counter for a thread (prctl
	 * PR_SET_TSC, seccomp strict mode): nothing reads it from then on. */
	bool tsc_disabled;
	/* The program runs under a seccomp filter (it installed one, or
	 * started under one): lock calls make no system call of libelide's
	 * own from then on (no segment file made or grown). */
	bool sandboxed;
	/* Where glibc keeps a thread's id in its descriptor; 0: unknown. */
	uint32_t pthread_tid_offset;
	const char *single_threaded;  /* glibc's __libc_single_threaded, NULL before 2.32 */
	const char *disabled_reason;  /* why not, when !enabled */
	struct elide_options opts;    /* in effect (elided may change mode and knobs) */
	enum elide_mode env_mode;     /* the mode ELIDE asked for */
	struct elide_hw hw;
	uint32_t sample_mask;         /* opts.sample - 1 */
	bool sim_abort;               /* ELIDE_SIM_ABORT: no RTM, pretend every XBEGIN aborts */
	uint32_t sim_abort_status;    /* ...with this status */
	struct lock_rec *recs;        /* opts.max_locks records, [0] unused, [1] overflow */
	uint32_t nrecs;
	/* The segment (or a private stand-in when it cannot be created). */
	struct elide_seg_header *seg_header;
	struct elide_seg_control *seg_control;
	struct elide_seg_lock *seg_locks; /* nrecs entries, paired with recs */
	uint64_t control_seen;        /* generation of the last control block applied */
};

extern struct elide_state elide _hidden_;

/* Record index 1 collects every lock that found the table full. */
#define REC_OVERFLOW 1

/* A lock's record; an index that cannot be ours (memory reused without
 * pthread_*_init) lands in the overflow record instead of out of bounds. */
static inline struct lock_rec *rec_of_idx(uint16_t idx)
{
	if (unlikely(idx >= elide.nrecs))
		return &elide.recs[REC_OVERFLOW];
	return &elide.recs[idx];
}

/* registry.c */
int registry_init(void) _hidden_;
struct lock_rec *registry_attach(void *lock, uint16_t *idx_ptr, enum lock_kind kind, void *callsite) _hidden_;
struct lock_rec *registry_attach_own(void *lock, uint16_t *idx_ptr, enum lock_kind kind, void *callsite,
				     bool elidable, bool *created) _hidden_;
void registry_detach(uint16_t *idx_ptr) _hidden_;
uint32_t registry_records_end(void) _hidden_;
void registry_republish(uint32_t end) _hidden_;
static inline uint32_t rec_index(const struct lock_rec *rec)
{
	return (uint32_t)(rec - elide.recs);
}

static inline struct elide_seg_lock *rec_entry(const struct lock_rec *rec)
{
	return &elide.seg_locks[rec_index(rec)];
}

/*
 * Mark the record's entry written, for elided (header.dirty[]): set its bit
 * only when clear, so the line stays shared between this process's threads
 * until elided clears the bit once an interval.  Call it after the write:
 * elided clears the bit first and then reads the entry, so a write either
 * lands before that read or sets the bit again.  Sequentially consistent
 * load: a write made with a plain store needs __atomic_thread_fence first
 * (a locked add, as in rec_count(), orders itself on x86).
 */
static inline void rec_touch(const struct lock_rec *rec)
{
	uint32_t idx = rec_index(rec);
	uint64_t *word, bit;

	if (idx >= ELIDE_SEG_DIRTY_ENTRIES)
		return;
	word = &elide.seg_header->dirty[idx / 64];
	bit = UINT64_C(1) << (idx % 64);
	if (!(__atomic_load_n(word, __ATOMIC_SEQ_CST) & bit))
		__atomic_fetch_or(word, bit, __ATOMIC_RELAXED);
}

static inline void rec_count(struct lock_rec *rec, enum lock_stat stat, uint64_t n)
{
	__atomic_fetch_add(&rec_entry(rec)->stats[stat], n, __ATOMIC_SEQ_CST);
	rec_touch(rec);
}

/* Whether the lock's own outcomes steer it (back-off, probes): adaptive
 * mode and no policy of its own.  mode=on and policy "always" try every
 * time. */
static inline bool rec_adapts(const struct lock_rec *rec)
{
	return elide.opts.mode == ELIDE_MODE_ADAPTIVE &&
	       atomic_load_explicit(&rec->policy, memory_order_relaxed) == ELIDE_POLICY_ADAPTIVE;
}

void rec_publish_state(struct lock_rec *rec) _hidden_;
void registry_apply_mode(void) _hidden_;
void registry_apply_lock_decisions(void) _hidden_;
void rec_set_policy(struct lock_rec *rec, int policy) _hidden_;
void rec_set_type_normal(struct lock_rec *rec) _hidden_;
void rec_set_type_unelidable(struct lock_rec *rec) _hidden_;
void registry_init_overflow_entry(void) _hidden_;
void rec_note_contended(struct lock_rec *rec) _hidden_;
void rec_note_abort(struct lock_rec *rec, uint32_t status, uint64_t cycles, unsigned weight) _hidden_;
void rec_note_commit_sample(struct lock_rec *rec) _hidden_;
void rec_back_off(struct lock_rec *rec) _hidden_;
void rec_back_off_from(struct lock_rec *rec, int32_t expected) _hidden_;
void rec_probe_committed(struct lock_rec *rec) _hidden_;
int attr_mark_normal(const pthread_mutexattr_t *attr, bool normal) _hidden_;
bool attr_is_normal(const pthread_mutexattr_t *attr) _hidden_;

/* segment.c */
void segment_init(void) _hidden_;
int segment_reserve(uint32_t idx) _hidden_;
void segment_fini(void) _hidden_;
void segment_fork_child(void) _hidden_;
void segment_make_lazy(void) _hidden_;
void segment_publish_status(void) _hidden_;
const char *segment_runtime_dir(void) _hidden_;
void segment_poll_control_slow(void) _hidden_;

/*
 * elide.control_seen in a forked child that has no segment file yet (its
 * private copy's generation is 0): every look for decisions then takes the
 * slow path, which makes the file.
 */
#define SEG_CONTROL_LAZY UINT64_MAX

/* Something to publish: a forked child makes its segment file now. */
static inline void segment_need(void)
{
	if (unlikely(__atomic_load_n(&elide.control_seen, __ATOMIC_RELAXED) == SEG_CONTROL_LAZY))
		segment_make_lazy();
}

/* Called on sampled paths: decisions from elided arrive without a syscall. */
static inline void segment_poll_control(void)
{
	if (unlikely(__atomic_load_n(&elide.seg_control->generation, __ATOMIC_ACQUIRE) != elide.control_seen))
		segment_poll_control_slow();
}

/* learn.c */
void learn_init(const char *runtime_dir) _hidden_;
uint32_t learn_hint_verdict(const void *lock, const void *callsite) _hidden_;
void learn_fini(const char *runtime_dir) _hidden_;

/* elide.c */
void elide_set_mode(enum elide_mode mode) _hidden_;

/* sandbox.c */
void elide_clock_gettime(clockid_t clock, struct timespec *ts) _hidden_;
void sandbox_check_inherited(void) _hidden_;

static inline bool elide_sandboxed(void)
{
	return unlikely(__atomic_load_n(&elide.sandboxed, __ATOMIC_RELAXED));
}

static inline bool elide_tsc_usable(void)
{
	return likely(!__atomic_load_n(&elide.tsc_disabled, __ATOMIC_RELAXED));
}

/* report.c */
void report_print(int fd) _hidden_;

#endif
