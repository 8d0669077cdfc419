/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The per-process shared-memory segment: the one contract between libelide
 * (writes statistics, reads decisions), elided (reads statistics, writes
 * decisions) and elidectl (reads).  Documented in elide-segment(5).
 *
 * One regular file per process in the runtime directory (default
 * /run/elide, ELIDE_RUNTIME_DIR overrides), named
 *     <pid>-<starttime>.seg
 * where starttime is field 22 of /proc/<pid>/stat (clock ticks after boot),
 * so a leftover of a crashed process is recognisable: no live process has
 * that pid with that start time.  A later image of the same process (exec)
 * replaces the file; when it cannot (the earlier image ran as root and this
 * one does not), it adds a generation: <pid>-<starttime>-<gen>.seg, gen
 * 1..ELIDE_SEG_MAX_GENERATION, and readers prefer the newest created_ns.
 * Created O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, by the process itself.  The file is mapped MAP_SHARED by libelide.
 *
 * Layout (x86_64, little-endian, every field naturally aligned):
 *     offset 0                     struct elide_seg_header   (4096 bytes)
 *     header.control_offset        struct elide_seg_control  (4096 bytes)
 *     header.locks_offset          struct elide_seg_lock[header.lock_capacity]
 *
 * Writers: every field of the header and of the lock entries is written by
 * libelide only; struct elide_seg_control and the `ctl_*` fields of lock
 * entries by elided only, except that libelide sets the `ctl_*` fields of
 * an entry it is about to publish (none, or a learned "never" from the
 * control block's hints).  Readers must treat every byte as hostile input:
 * copy, then validate (segment-reader.c does).
 *
 * Counters are monotonic 64-bit values.  Commit, attempt and acquisition
 * counts are estimates when header.sample > 1: libelide counts 1 in
 * `sample` commits (a committing critical section writes no shared memory).
 */
#ifndef ELIDE_SEGMENT_FORMAT_H
#define ELIDE_SEGMENT_FORMAT_H

#include <stdint.h>

#define ELIDE_SEG_MAGIC "ELIDESG1"   /* 8 bytes, no NUL */
#define ELIDE_SEG_VERSION 2u
#define ELIDE_SEG_HEADER_SIZE 4096u
#define ELIDE_SEG_CONTROL_SIZE 4096u
#define ELIDE_SEG_MAX_LOCKS 65535u
#define ELIDE_SEG_SUFFIX ".seg"
#define ELIDE_SEG_MAX_GENERATION 15
#define ELIDE_RUNTIME_DIR_DEFAULT "/run/elide"

/* header.elision: is the process eliding at all */
enum elide_seg_elision {
	ELIDE_SEG_ELISION_OFF = 0,   /* passing every lock through; see status_reason */
	ELIDE_SEG_ELISION_ON = 1,
};

/* header.mode, control.mode (0 = no override there) */
enum elide_seg_mode {
	ELIDE_SEG_MODE_NONE = 0,
	ELIDE_SEG_MODE_ADAPTIVE = 1,
	ELIDE_SEG_MODE_ON = 2,
	ELIDE_SEG_MODE_OFF = 3,
	ELIDE_SEG_MODE_WATCH = 4,     /* no transactions: contention, wait and hold times only */
};

/* lock.kind */
enum elide_seg_kind {
	ELIDE_SEG_KIND_FREE = 0,      /* unused entry */
	ELIDE_SEG_KIND_MUTEX = 1,
	ELIDE_SEG_KIND_RWLOCK_READ = 2,  /* the read side of an rwlock */
	ELIDE_SEG_KIND_RWLOCK_WRITE = 3, /* the write side of the same rwlock */
	ELIDE_SEG_KIND_OVERFLOW = 4,  /* entry 1: locks that found the table full, and destroyed locks */
};

/* lock.state */
enum elide_seg_state {
	ELIDE_SEG_STATE_PLAIN = 0,        /* real lock, elision not (yet) worth it */
	ELIDE_SEG_STATE_ELIDING = 1,
	ELIDE_SEG_STATE_OFF_POLICY = 2,   /* never elided: policy or lock type */
	ELIDE_SEG_STATE_OFF_ADAPT = 3,    /* backing off after aborts */
};

/* lock.reason: why it is in that state */
enum elide_seg_reason {
	ELIDE_SEG_REASON_UNCONTENDED = 0,
	ELIDE_SEG_REASON_CONTENDED = 1,
	ELIDE_SEG_REASON_MODE_ON = 2,
	ELIDE_SEG_REASON_POLICY_ALWAYS = 3,
	ELIDE_SEG_REASON_POLICY_NEVER = 4,
	ELIDE_SEG_REASON_TYPE_NORMAL = 5,
	ELIDE_SEG_REASON_ABORTS = 6,      /* aborts cost more than elision saved */
	ELIDE_SEG_REASON_DAEMON = 7,      /* decision pushed by elided */
	ELIDE_SEG_REASON_PROCESS_OFF = 8, /* the whole process is not eliding */
	ELIDE_SEG_REASON_TYPE_UNELIDABLE = 9, /* recursive, errorcheck, robust, PI/PP or process-shared */
	ELIDE_SEG_REASON_WATCHING = 10,   /* watched, never elided: mode=watch, or no usable RTM */
	ELIDE_SEG_NREASONS
};

/*
 * lock.stats[] indexes.  What a reader aggregates every interval comes
 * first (up to ABORT_OTHER), so that it lies in an entry's first two cache
 * lines (ELIDE_SEG_LOCK_HOT_SIZE).
 */
enum elide_seg_stat {
	ELIDE_SEG_STAT_ACQUIRED = 0,   /* acquisitions (estimate) */
	ELIDE_SEG_STAT_ATTEMPTS,       /* transactions started (estimate) */
	ELIDE_SEG_STAT_COMMITS,        /* transactions committed (estimate) */
	ELIDE_SEG_STAT_CYCLES_LOST,    /* TSC cycles spent in aborted transactions (estimate) */
	ELIDE_SEG_STAT_ABORT_CONFLICT, /* aborts by cause, exact: */
	ELIDE_SEG_STAT_ABORT_CAPACITY,
	ELIDE_SEG_STAT_ABORT_BUSY,     /* lock held for real */
	ELIDE_SEG_STAT_ABORT_EXPLICIT, /* nested trylock, cond wait, destroy, nesting depth */
	ELIDE_SEG_STAT_ABORT_RETRY,
	ELIDE_SEG_STAT_ABORT_DEBUG,
	ELIDE_SEG_STAT_ABORT_NESTED,
	ELIDE_SEG_STAT_ABORT_OTHER,    /* no status bit: syscall, interrupt, page fault */
	ELIDE_SEG_STAT_FALLBACKS,      /* acquisitions that tried, gave up and took the real lock */
	ELIDE_SEG_STAT_CONTENDED,      /* real acquisitions that found the lock held */
	ELIDE_SEG_STAT_SKIPPED,        /* real acquisitions during back-off (estimate) */
	ELIDE_SEG_NSTATS
};

#define ELIDE_SEG_NAME_MAX 48
#define ELIDE_SEG_EXE_MAX 256
#define ELIDE_SEG_COMM_MAX 16
#define ELIDE_SEG_REASON_MAX 160

/* header.features */
#define ELIDE_SEG_FEATURE_DIRTY 1u    /* header.dirty[] marks the entries written */
#define ELIDE_SEG_FEATURE_WATCH 2u    /* lock entries carry wait_ns .. hold_long, header.watch_sample */
#define ELIDE_SEG_FEATURE_WAIT_TOTAL 4u /* header.wait_ns is the sum of the entries' wait_ns */

/* A sampled hold this long or longer counts in lock.hold_long: longer than
 * a transaction is likely to survive (a timer tick, a syscall that blocks,
 * a page fault), so such a section would abort if elided. */
#define ELIDE_SEG_HOLD_LONG_NS 20000u

#define ELIDE_SEG_DIRTY_OFFSET 2048u  /* of header.dirty[], cache-line aligned */
#define ELIDE_SEG_DIRTY_ENTRIES 4096u /* entries the bitmap covers: [0, 4096) */

struct elide_seg_header {
	char magic[8];                /* ELIDE_SEG_MAGIC */
	uint32_t version;             /* ELIDE_SEG_VERSION */
	uint32_t header_size;         /* ELIDE_SEG_HEADER_SIZE */
	uint64_t total_size;          /* the file's size; fixed at creation */
	uint32_t control_offset;      /* ELIDE_SEG_HEADER_SIZE */
	uint32_t control_size;        /* ELIDE_SEG_CONTROL_SIZE */
	uint32_t locks_offset;        /* control_offset + control_size */
	uint32_t lock_entry_size;     /* sizeof(struct elide_seg_lock) */
	uint32_t lock_capacity;       /* entries, including [0] (unused) and [1] (overflow) */
	uint32_t lock_high_water;     /* entries [0, lock_high_water) may be in use */
	/* identity: informational; readers check it against /proc */
	int32_t pid;
	uint32_t uid;
	uint64_t start_time;          /* /proc/<pid>/stat field 22 */
	uint64_t created_ns;          /* CLOCK_REALTIME at creation */
	char exe[ELIDE_SEG_EXE_MAX];  /* NUL-terminated, as read from /proc/self/exe */
	char comm[ELIDE_SEG_COMM_MAX];
	char lib_version[16];         /* libelide's PACKAGE_VERSION */
	/* status */
	uint32_t elision;             /* enum elide_seg_elision */
	uint32_t mode;                /* enum elide_seg_mode in effect */
	uint32_t sample;              /* commits counted 1 in sample */
	uint32_t rtm_usable;          /* 0/1: hardware verdict */
	char status_reason[ELIDE_SEG_REASON_MAX]; /* why elision is on/off, one line */
	uint64_t control_generation_seen; /* last control generation applied */
	uint64_t publish_ns;          /* CLOCK_MONOTONIC of the last status update */
	uint32_t features;            /* ELIDE_SEG_FEATURE_* this writer keeps up */
	/* (FEATURE_WATCH) 1 in watch_sample acquisitions of a watched lock is
	 * counted (with weight watch_sample) and has its hold time measured */
	uint32_t watch_sample;
	uint8_t reserved_line[16];
	/* (FEATURE_WAIT_TOTAL) nanoseconds the process's threads waited for
	 * its locks, all of them: added to with each entry's wait_ns, so that
	 * a reader has the process's waiting without a walk of its entries.
	 * A line of its own: written by the threads that flush waits. */
	uint64_t wait_ns;
	uint8_t reserved[ELIDE_SEG_DIRTY_OFFSET - 8 - 4 * 2 - 8 - 4 * 6 - 4 * 2 - 8 * 2 -
			 ELIDE_SEG_EXE_MAX - ELIDE_SEG_COMM_MAX - 16 - 4 * 4 - ELIDE_SEG_REASON_MAX - 8 * 2 - 4 - 4 -
			 16 - 8];
	/* ELIDE_SEG_FEATURE_DIRTY: bit i % 64 of dirty[i / 64] is set by the
	 * writer after it changed entry i (i < ELIDE_SEG_DIRTY_ENTRIES), and
	 * only when it was clear: cleared by the reader (an atomic exchange)
	 * before it reads the marked entries, so that a reader follows the
	 * locks that moved, not all of them.  Lines of their own: the writer's
	 * threads only read them until a reader clears a bit. */
	uint64_t dirty[ELIDE_SEG_DIRTY_ENTRIES / 64];
	uint8_t reserved_end[ELIDE_SEG_HEADER_SIZE - ELIDE_SEG_DIRTY_OFFSET - ELIDE_SEG_DIRTY_ENTRIES / 8];
};

#define ELIDE_SEG_MAX_LOCK_RULES 0 /* per-lock decisions live in the lock entries */

/*
 * Hints: verdicts elided learned from earlier runs of the program (issue
 * 16), for locks that have no entry yet.  A lock gets its entry (and starts
 * trying transactions) at its first contention, before elided could write
 * the entry's ctl_policy; so libelide looks its new record up here when it
 * creates it, and only then.  The first hint that matches wins.
 */
#define ELIDE_SEG_MAX_HINTS 120u

/* hint.match: what hint.addr is compared with */
enum elide_seg_hint_match {
	ELIDE_SEG_HINT_NONE = 0,      /* unused slot */
	ELIDE_SEG_HINT_LOCK_ADDR = 1, /* the lock's own address (a lock in a module's data or bss) */
	ELIDE_SEG_HINT_CALLSITE = 2,  /* the record's call site, entry.callsite: every lock first contended there */
};

/* hint.verdict */
enum elide_seg_hint_verdict {
	/* Never elide: the record starts as if elided had written ctl_policy
	 * NEVER + 1 with ctl_source LEARNED (libelide writes both). */
	ELIDE_SEG_HINT_NEVER = 1,
	/* Elides well: no contention watch, the lock elides from its first
	 * contention on and adapts as always (adaptive mode only). */
	ELIDE_SEG_HINT_ELIDES = 2,
};

struct elide_seg_hint {
	uint64_t addr;                /* an address in the process, compared only, never followed */
	uint32_t match;               /* enum elide_seg_hint_match */
	uint32_t verdict;             /* enum elide_seg_hint_verdict */
};

/*
 * Written by elided only.  Seqlock: elided makes `generation` odd, writes
 * the fields, then makes it even (larger than before).  libelide applies a
 * control block only when it reads the same even generation before and
 * after copying it, and only values in range.
 *
 * The hint table (nhints, hints[]) is written under the same seqlock, but
 * libelide reads it without one, only when it creates a lock record, one
 * field at a time: a torn read can at worst give one new lock another valid
 * verdict.  It ignores a hint out of range (nhints above
 * ELIDE_SEG_MAX_HINTS counts as ELIDE_SEG_MAX_HINTS, an unknown match or
 * verdict as no hint).  Older daemons wrote zeros here: nhints 0, no hints.
 */
struct elide_seg_control {
	uint64_t generation;
	uint32_t mode;                /* enum elide_seg_mode; NONE = keep ELIDE's */
	uint32_t retries;             /* 0 = keep; else value + 1 */
	uint32_t contention;          /* 0 = keep */
	uint32_t skip;                /* 0 = keep */
	uint32_t skip_max;            /* 0 = keep */
	uint32_t abort_ratio_ppm;     /* 0 = keep; else ratio * 1e6, 1..1000000 */
	uint32_t mode_source;         /* enum elide_seg_source of `mode`; libelide ignores it */
	uint32_t nhints;              /* hints[0, nhints) are in use */
	struct elide_seg_hint hints[ELIDE_SEG_MAX_HINTS];
	uint8_t reserved[ELIDE_SEG_CONTROL_SIZE - 8 - 4 * 8 - ELIDE_SEG_MAX_HINTS * 16];
};

/*
 * Why elided decided something (control.mode_source, lock.ctl_source): lets
 * a restarted elided tell a runtime override (elidectl set) from what its
 * configuration says, so overrides survive daemon restarts.
 */
enum elide_seg_source {
	ELIDE_SEG_SOURCE_NONE = 0,
	ELIDE_SEG_SOURCE_CONFIG = 1,    /* the configuration's rules */
	ELIDE_SEG_SOURCE_OVERRIDE = 2,  /* elidectl set, until reset or exit */
	ELIDE_SEG_SOURCE_ADAPTATION = 3, /* elided's long-window cut-off */
	ELIDE_SEG_SOURCE_LEARNED = 4,   /* elided's learned-policy store: verdicts of earlier runs of the program */
};

/* lock.ctl_policy, written by elided: 0 = no decision, else elide_policy + 1 */
#define ELIDE_SEG_CTL_NONE 0u

/*
 * One lock (or one side of an rwlock).  The first ELIDE_SEG_LOCK_HOT_SIZE
 * bytes hold everything a reader needs every interval (identity, state,
 * decisions, the counters through the aborts): elided reads only those two
 * cache lines of each entry between its full reads.
 */
struct elide_seg_lock {
	uint32_t kind;                /* enum elide_seg_kind */
	uint32_t state;               /* enum elide_seg_state */
	uint32_t reason;              /* enum elide_seg_reason */
	uint32_t policy;              /* enum elide_policy in effect (elide.h) */
	uint64_t addr;                /* the lock's address in the process */
	uint32_t ctl_policy;          /* elided's decision for this lock */
	uint32_t ctl_source;          /* enum elide_seg_source of ctl_policy */
	uint64_t stats[ELIDE_SEG_NSTATS];
	uint64_t callsite;            /* return address of its first tracked acquisition */
	char name[ELIDE_SEG_NAME_MAX]; /* from elide.h, NUL-terminated, or empty */
	/* Contention (header.features & ELIDE_SEG_FEATURE_WATCH, else zero),
	 * kept in every mode for the real acquisitions that found the lock
	 * held (stats[CONTENDED] counts them): */
	uint64_t wait_ns;             /* nanoseconds they waited for it, exact */
	uint64_t wait_max_ns;         /* the longest of those waits */
	/* Sampled hold times: 1 in header.watch_sample acquisitions of a
	 * watched lock (mode=watch, or no usable RTM) */
	uint64_t hold_ns;             /* sum of the sampled hold times */
	uint64_t hold_samples;        /* holds measured */
	uint64_t hold_long;           /* of those, ELIDE_SEG_HOLD_LONG_NS or longer */
	uint64_t reserved;
};

#define ELIDE_SEG_LOCK_HOT_SIZE 128u

_Static_assert(sizeof(struct elide_seg_header) == ELIDE_SEG_HEADER_SIZE, "segment header size");
_Static_assert(__builtin_offsetof(struct elide_seg_header, dirty) == ELIDE_SEG_DIRTY_OFFSET, "dirty bitmap offset");
_Static_assert(ELIDE_SEG_DIRTY_OFFSET % 64 == 0 && ELIDE_SEG_DIRTY_ENTRIES % 512 == 0, "dirty bitmap on whole lines");
_Static_assert(sizeof(struct elide_seg_control) == ELIDE_SEG_CONTROL_SIZE, "segment control size");
_Static_assert(sizeof(struct elide_seg_hint) == 16, "segment hint size");
_Static_assert(__builtin_offsetof(struct elide_seg_control, nhints) == 36, "control block layout");
_Static_assert(__builtin_offsetof(struct elide_seg_control, hints) == 40, "control block layout");
_Static_assert(__builtin_offsetof(struct elide_seg_control, reserved) == 40 + ELIDE_SEG_MAX_HINTS * 16,
	       "control block layout");
_Static_assert(sizeof(struct elide_seg_lock) == 256, "segment lock entry size");
_Static_assert(__builtin_offsetof(struct elide_seg_lock, ctl_source) ==
	       __builtin_offsetof(struct elide_seg_lock, ctl_policy) + 4, "ctl_policy and ctl_source are written together");
_Static_assert(__builtin_offsetof(struct elide_seg_lock, stats[ELIDE_SEG_STAT_ABORT_OTHER + 1]) ==
	       ELIDE_SEG_LOCK_HOT_SIZE, "the hot part ends after the abort counters");
_Static_assert(__builtin_offsetof(struct elide_seg_lock, stats) == 32, "lock entry layout");
_Static_assert(__builtin_offsetof(struct elide_seg_lock, callsite) == 152, "lock entry layout");
_Static_assert(__builtin_offsetof(struct elide_seg_lock, name) == 160, "lock entry layout");
_Static_assert(__builtin_offsetof(struct elide_seg_lock, wait_ns) == 208, "lock entry layout");
_Static_assert(__builtin_offsetof(struct elide_seg_header, watch_sample) == 556, "header layout");
_Static_assert(__builtin_offsetof(struct elide_seg_header, wait_ns) == 576, "header layout");

#endif
