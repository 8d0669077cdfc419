/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The lock paths' per-thread state, and the static inline helpers that
 * their files share: fastpath.c (the entry points on the pinned page),
 * mutex.c, rwlock.c, elision.c (the transactions), watch.c,
 * glibc-protocol.c, cond.c and api.c.  They are static inline so that the
 * lock paths inline them wherever they did when one file held them all
 * (the entry points on the pinned page make no call of their own on their
 * common path), and `self` is an initial-exec thread-local variable: one
 * access, as when it was static.
 *
 * Rules the lock paths live by (see DESIGN.md):
 *  - a committing elided section writes no shared memory: the lock and its
 *    record are only read; bookkeeping is thread-local or sampled;
 *  - whatever is not elided goes to glibc's own function, unchanged, or,
 *    for a default mutex, is done here exactly as glibc does it ("a default
 *    mutex's words", glibc-protocol.h);
 *  - nothing here allocates or takes a lock of ours on the lock/unlock
 *    paths, and the only syscalls are glibc's own futex wakes of waiters
 *    (a mutex's, and a rwlock reader's that starts a read phase after a
 *    writer, rwlock_read_registered_late()).
 */
#ifndef ELIDE_HOTPATH_H
#define ELIDE_HOTPATH_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <x86intrin.h>

#include "elide-internal.h"

/*
 * Per thread: the locks this thread holds elided, innermost last.  Written
 * inside the transaction, so an abort rolls it back with everything else:
 * an entry here always means "elided by this thread, transaction open".
 * It also answers unlock's question without XTEST on a CPU without RTM.
 */
#define ELIDE_MAX_NEST 8

struct elided_lock {
	void *lock;
	struct lock_rec *rec;
};

/*
 * What one thread knows of a lock it uses, so that a lock whose elision
 * does not pay costs no shared write per acquisition: how many real
 * acquisitions it still takes before probing a backed-off lock again, and
 * how many of its acquisitions in a row failed to elide.  Two-way sets
 * found by the lock's address: the fast path looks at the first way
 * (local_slot()), where local_of() keeps the set's most recent lock; the
 * one before it keeps its counts in the second.  Direct-mapped, two locks
 * a thread used in turn whose slots collided (1 pair in 64) reset each
 * other's count at every acquisition: both took the slow path every time
 * and neither was ever probed again.  A slot taken over starts its count
 * at a random point of the span (local_of()), so a thread cycling through
 * more locks than its slots hold still probes each about once per span.
 */
#define LOCAL_SLOTS 64
#define LOCAL_WAYS 2
#define LOCAL_SETS (LOCAL_SLOTS / LOCAL_WAYS)
/* skip_left of a slot taken over from another lock: its span starts at a
 * random point. */
#define LOCAL_SKIP_FRESH UINT32_MAX
/* Failed acquisitions in a row after which an acquisition makes one
 * attempt, without waiting or pausing, and counts 1 in THROTTLED_SAMPLE. */
#define STREAK_THROTTLE 2
/* ...and after which an adaptive lock backs off. */
#define STREAK_BACK_OFF 6
#define STREAK_MAX 255
#define THROTTLED_SAMPLE 64
/* A lock that does not adapt (mode=on, policy always): after a throttled
 * acquisition falls back, this thread's next THROTTLED_SKIP acquisitions of
 * it go straight to the real lock, as glibc's own elision skips 3 after an
 * abort (glibc.elision.skip_lock_internal_abort).  An attempt that cannot
 * commit then costs a quarter as often; the lock itself never backs off. */
#define THROTTLED_SKIP 3

struct lock_local {
	uintptr_t key;                /* lock_key() of the lock, 0 = slot unused */
	/* Acquisitions this thread sends straight to glibc from the fast path
	 * before it looks at the lock's record again: the fast path of a lock
	 * that is not elided right now is a compare and a decrement.  The
	 * hot lock's burst is in struct elide_thread instead (hot_grant()). */
	uint32_t burst;
	uint32_t idx;                 /* its record index when the slot was filled */
	uint32_t skip_left;           /* real acquisitions before the next probe, 0 = not counting */
	/* 1-in-N counting per lock: one counter for all locks would alias (two
	 * locks used in turn would split the samples or one would get them all). */
	uint32_t sample_count;        /* drives 1-in-opts.sample counting */
	uint16_t throttled_count;     /* drives 1-in-THROTTLED_SAMPLE counting */
	uint8_t fail_streak;          /* acquisitions in a row that fell back, up to STREAK_MAX */
	uint8_t burst_shift;          /* log2 of the next burst's length (burst_length()) */
	uint32_t burst_stamp;         /* TSC >> BURST_TSC_SHIFT when the last burst was granted */
};

/*
 * Burst lengths.  Each burst ends in the slow path (the record's counts,
 * its gate, the control block: shared lines), which at 64 acquisitions was
 * a third of what a backed-off contended lock cost over plain glibc.  So a
 * burst that came back within BURST_QUICK earns one twice as long, up to
 * BURST_MAX; one that took longer drops back to 64 (BURST_MIN_SHIFT).  A
 * policy or gate change therefore reaches a thread within its next 64
 * acquisitions, or within about two BURST_QUICK if it runs long bursts,
 * and its counts run at most one burst ahead.
 */
#define BURST_MIN_SHIFT 6             /* 64 acquisitions */
#define BURST_MAX_SHIFT 12            /* 4096 */
#define BURST_MAX (1u << BURST_MAX_SHIFT)
/* A mutex's own skip count (mutex_skip_applies()) is one per lock, not one
 * per thread: it may grow further. */
#define BURST_MUTEX_MAX_SHIFT 15      /* 32768 */
_Static_assert((1u << BURST_MUTEX_MAX_SHIFT) <= UINT16_MAX,
	       "a burst must fit a mutex's skip count (glibc_mutex_skip_store())");
#define BURST_TSC_SHIFT 10            /* the stamp's unit: 1024 TSC ticks */
#define BURST_QUICK 2048u             /* 2M ticks: under a millisecond at 2+ GHz */

/*
 * A thread's contended acquisitions of one lock, added up before they go
 * to the lock's entry (a shared line) in one write: every WATCH_BATCH of
 * them, after WATCH_BATCH_TICKS, when the thread waits for another lock,
 * at its next sampled acquisition, always after an unlock, and at exit of the process (the thread
 * that runs the destructors).  A thread that exits first takes its last
 * batch with it: registering a hook per thread would take a pthread key
 * from the program, or allocate inside its critical section.
 */
#define WATCH_BATCH 64
#define WATCH_BATCH_TICKS (UINT64_C(1) << 24) /* ~5-10 ms of TSC; 16 ms of ns */

struct watch_waits {
	struct lock_rec *rec;
	uint32_t contended;           /* not counted in stats[CONTENDED] yet */
	uint64_t wait, wait_max;      /* in watch_now() units */
	uint64_t first;               /* watch_now() of the first one */
};

/*
 * A watched acquisition's figures, kept by the thread that holds the lock
 * until it gives it back (watch_flush()): written to the lock's entry then,
 * outside the critical section, so the counting never lengthens a
 * contended section.
 */
struct watch_pending {
	struct lock_rec *rec;
	uint64_t hold_start;          /* watch_now() when it got the lock; 0 = hold not sampled */
	uint32_t acquired;            /* acquisitions this sample stands for, 0 = none */
	bool flush_waits;             /* the thread's wait figures are due (watch_waits) */
	/* A wait for another lock than the batch's: the next batch, begun
	 * once that one is written at the unlock. */
	struct watch_waits next;
};

struct elide_thread {
	unsigned depth;
	/* The burst of the lock granted one last (the hot lock): next to
	 * depth, so its fast path reads one line of this thread's and
	 * computes no slot (a third of what a backed-off contended lock
	 * cost over a bare forwarding interposer, bench/results/2026-12-07-history.md). */
	uint32_t hot_burst;
	uintptr_t hot_key;            /* its lock_key(), 0 = none */
	unsigned attempt_count;       /* drives 1-in-16 abort timing */
	pid_t tid;                    /* gettid(), 0 until asked (thread_tid()) */
	struct lock_rec *probe_rec;   /* set inside a probing transaction */
	/* Watching: the lock whose figures wait for its unlock (NULL none), on
	 * the line every unlock reads anyway; and the countdown to the next
	 * sampled acquisition (0 = this one). */
	void *watch_lock;
	uint32_t watch_countdown;
	struct watch_pending watch;
	struct watch_waits waits;
	struct elided_lock held[ELIDE_MAX_NEST];
	/* A default mutex whose words libelide takes, not elided now: its
	 * next skip is settled once this thread holds it (mutex_skip_settle()). */
	struct lock_rec *skip_grant;
	/* Whether pausing before a futex sleep pays for this thread
	 * (mutex_words_wait_pays()): its score, and the count that lets
	 * every 16th wait try again while it does not. */
	int8_t wait_spin_score;
	uint8_t wait_spin_probe;
	uint32_t rand_state;          /* xorshift32 for local_of()'s start points; 0 = not seeded */
	struct lock_local local[LOCAL_SLOTS];
};

/* Defined in fastpath.c.  Aligned as the compiler aligned it while it was
 * static, so that it still knows: the stores that clear the watch figures
 * (watch_flush()) are aligned ones. */
extern __thread struct elide_thread self __attribute__((aligned(16))) _hidden_;

/*
 * Slots are found by the lock's address (plus the side, for an rwlock's two
 * records), not by its record: the fast path of a backed-off lock must not
 * read the lock's cache line before glibc's atomic instruction does (that
 * read fetches the line shared and the CAS pays a second transfer).
 */
static inline uintptr_t lock_key(const void *lock, bool write_side)
{
	return (uintptr_t)lock | (write_side ? 1u : 0u);
}

static inline struct lock_local *local_set(const void *lock, bool write_side)
{
	uintptr_t addr = (uintptr_t)lock;

	/* Locks are 8-aligned; the side picks a half of the sets so an
	 * rwlock's two sides never share one (for a mutex it folds away). */
	return &self.local[LOCAL_WAYS *
			   (((addr >> 3) ^ (addr >> 8) ^ (write_side ? LOCAL_SETS / 2 : 0)) & (LOCAL_SETS - 1))];
}

/* Where the fast path looks: the first way of the lock's set, which
 * local_of() gives the set's most recent lock.  One look, as when the
 * slots were direct-mapped: callers compare the key. */
static inline struct lock_local *local_slot(const void *lock, bool write_side)
{
	return local_set(lock, write_side);
}

/* The lock's slot in either way, NULL when it has none; moves nothing. */
static inline struct lock_local *local_find(const void *lock, bool write_side)
{
	uintptr_t key = lock_key(lock, write_side);
	struct lock_local *set = local_set(lock, write_side);

	return set[0].key == key ? &set[0] : set[1].key == key ? &set[1] : NULL;
}

_Static_assert(sizeof(struct lock_local) == 32, "a lock slot is half a cache line");
_Static_assert(LOCAL_WAYS == 2, "local_find() and local_of() look at two ways");

/* Where a thread's count of a lock whose slot was taken over resumes. */
static inline uint32_t local_random(void)
{
	uint32_t x = self.rand_state;

	if (unlikely(x == 0))
		x = (uint32_t)(uintptr_t)&self ^ 0x9e3779b9u; /* differs per thread; never 0 after | 1 */
	x |= 1;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	self.rand_state = x;
	return x;
}

/*
 * The lock's slot, moved to the first way of its set (where the fast path
 * finds its burst), the other lock of the set to the second; a lock with
 * none takes over the second way, the set's least recent lock.  Pointers
 * to slots of this set that a caller holds are stale after it.
 */
static inline struct lock_local *local_of(const void *lock, const struct lock_rec *rec)
{
	bool write_side = rec->kind == LOCK_KIND_RWLOCK_WRITE;
	uintptr_t key = lock_key(lock, write_side);
	struct lock_local *set = local_set(lock, write_side), *l = &set[0];
	uint32_t idx = rec_index(rec);
	bool taken_over = false;

	if (unlikely(set[0].key != key)) {
		struct lock_local first = set[0];

		if (set[1].key != key) {
			taken_over = set[1].key != 0;
			set[1].key = 0; /* filled below */
			set[1].idx = 0;
		}
		set[0] = set[1];
		set[1] = first;
	}
	if (unlikely(l->key != key || l->idx != idx)) {
		l->key = key;
		l->idx = idx;
		l->burst = 0;
		/* A first fill counts the whole span, as a thread always did. */
		l->skip_left = taken_over ? LOCAL_SKIP_FRESH : 0;
		l->fail_streak = 0;
		l->burst_shift = 0;
	}
	return l;
}

/*
 * The time-stamp counter, unless the program disabled it (prctl
 * PR_SET_TSC, seccomp's strict mode; see prctl(), sandbox.c): a read then
 * raises SIGSEGV, and glibc's lock paths never read it.  Callers treat 0
 * as "no clock".
 */
static inline uint64_t tsc_read(void)
{
	return elide_tsc_usable() ? __rdtsc() : 0;
}

static inline bool sample_now(struct lock_local *l)
{
	return ((++l->sample_count) & elide.sample_mask) == 0;
}

/* In our own transaction?  (depth > 0 can only be seen inside one.) */
static inline bool in_elided_section(void)
{
	return self.depth != 0;
}

/* glibc <= 2.42 marks mutexes typed with pthread_mutexattr_settype(NORMAL)
 * (or DEFAULT, the same value) in their kind; 2.43 no longer does. */
#define MUTEX_KIND_NO_ELISION 512

enum mutex_class {
	MUTEX_ELIDABLE,      /* timed/default or adaptive */
	MUTEX_NORMAL_TYPED,  /* typed NORMAL: elided only when the program asks */
	MUTEX_UNELIDABLE,    /* recursive, errorcheck, robust, PI, PP, process-shared */
};

static inline enum mutex_class mutex_class(const pthread_mutex_t *m)
{
	int kind = __atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED);

	if (kind == PTHREAD_MUTEX_TIMED_NP || kind == PTHREAD_MUTEX_ADAPTIVE_NP)
		return MUTEX_ELIDABLE;
	/* NORMAL must deadlock on relock, which an elided lock does not. */
	if (kind == (PTHREAD_MUTEX_NORMAL | MUTEX_KIND_NO_ELISION))
		return elide.opts.force_normal ? MUTEX_ELIDABLE : MUTEX_NORMAL_TYPED;
	return MUTEX_UNELIDABLE;
}

static inline bool rwlock_is_elidable(const pthread_rwlock_t *rw)
{
	return __atomic_load_n(&rw->__data.__shared, __ATOMIC_RELAXED) == 0;
}

/* PREFETCHW; a NOP on the few x86-64 parts without it (0F 0D is reserved
 * as a NOP there). */
static inline void prefetch_for_write(const void *p)
{
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
}

/*
 * mode=on: an acquisition whose thread's attempts on this lock keep failing
 * will end in glibc's atomic instruction on the lock's line; ask for the
 * line exclusive before the slow path reads it (shared).  Never for a lock
 * that elides: eliding threads only read the line, and a PREFETCHW
 * invalidates the other CPUs' copies, which aborts every transaction
 * that has the lock in its read set (all of them: each reads the lock).
 */
static inline void prefetch_if_failing(const void *lock, bool write_side, const struct lock_local *l)
{
	if (l->key == lock_key(lock, write_side) && l->fail_streak >= STREAK_THROTTLE)
		prefetch_for_write(lock);
}

/*
 * Adaptive: the same, the other way round.  Most locks that reach this
 * point are untracked or not eliding, and glibc's atomic instruction comes
 * next, so the line is asked for exclusive; but not for a lock this
 * thread elided at its last acquisitions (its slot knows the lock and has
 * no failing streak), for the reason above.  A lock whose slot another
 * lock took is prefetched, and then costs the transactions running on it
 * one abort each.
 */
static inline void prefetch_unless_eliding(const void *lock, bool write_side, const struct lock_local *l)
{
	if (l->key != lock_key(lock, write_side) || l->fail_streak >= STREAK_THROTTLE)
		prefetch_for_write(lock);
}

static inline int mutex_word(const pthread_mutex_t *m)
{
	return __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED);
}

static inline unsigned rwlock_readers(const pthread_rwlock_t *rw)
{
	return __atomic_load_n(&rw->__data.__readers, __ATOMIC_RELAXED);
}

/* Held by a writer, or by readers other than us. */
static inline bool rwlock_in_use(const pthread_rwlock_t *rw)
{
	return (rwlock_readers(rw) & ~(RWLOCK_WRPHASE | RWLOCK_RWAITING)) != 0;
}

/* Would this thread wait for the rwlock?  A reader waits for a writer, a
 * writer for anyone; a thread that holds it for writing itself does not
 * wait (glibc says EDEADLK).  One read of the word that glibc's atomic
 * instruction takes next. */
static inline bool rwlock_would_wait(unsigned r, bool write)
{
	if (write)
		return (r >> RWLOCK_READER_SHIFT) != 0 || (r & RWLOCK_WRLOCKED);
	return (r & RWLOCK_WRLOCKED) != 0;
}

enum elide_op {
	OP_MUTEX,
	OP_RDLOCK,
	OP_WRLOCK,
};

/*
 * The fast path of a tracked lock in the middle of a burst: found by the
 * lock's address in the hot entry or this thread's slots, without touching
 * the lock's line (glibc's atomic instruction is the first to) or its
 * record.  A slot left from a lock destroyed and made again at the same
 * address sends at most
 * a burst of acquisitions to glibc that might have been elided: always
 * correct.  Inside an elided section the slow path decides (an rwlock's
 * relock must be seen there).
 */
/* l: local_slot(lock, write_side), which the caller computes once. */
static inline bool takes_burst(const void *lock, bool write_side, struct lock_local *l)
{
	uintptr_t key = lock_key(lock, write_side);

	if (likely(self.hot_key == key)) {
		if (self.hot_burst == 0 || in_elided_section())
			return false;
		self.hot_burst--;
		return true;
	}
	if (l->key != key || l->burst == 0 || in_elided_section())
		return false;
	l->burst--;
	return true;
}

/*
 * The pass-through (mode=off, or no RTM with watch=0) has no sampled path
 * to look for elided's decisions on: it looks on every acquisition, two
 * loads of lines no lock call writes.  Not in a forked child that has no
 * segment file yet: no decision can reach it before it makes one, and
 * making one is a system call the pass-through does not make.
 */
static inline void poll_control_off(void)
{
	uint64_t seen = __atomic_load_n(&elide.control_seen, __ATOMIC_RELAXED);

	if (unlikely(__atomic_load_n(&elide.seg_control->generation, __ATOMIC_ACQUIRE) != seen) &&
	    seen != SEG_CONTROL_LAZY)
		segment_poll_control_slow();
}

enum mutex_wait {
	WAIT_FOREVER,
	WAIT_TIMED,
	WAIT_CLOCK,
};

/* The clocks glibc's futex waits accept (others are EINVAL even for a
 * free lock), and the nanoseconds a timespec may have. */
static inline bool wait_clock_valid(clockid_t clock)
{
	return clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC;
}

static inline bool abstime_valid(const struct timespec *abstime)
{
	return !abstime || (abstime->tv_nsec >= 0 && abstime->tv_nsec < 1000000000);
}

#endif
