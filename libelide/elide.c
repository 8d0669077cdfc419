/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libelide: the pthread interposers and the RTM elision paths.
 *
 * Rules this file lives by (see DESIGN.md):
 *  - a committing elided section writes no shared memory: the lock and its
 *    record are only read; bookkeeping is thread-local or sampled;
 *  - whatever is not elided goes to glibc's own function, unchanged, or,
 *    for a default mutex, is done here exactly as glibc does it ("a default
 *    mutex's words");
 *  - nothing here allocates or takes a lock of ours on the lock/unlock
 *    paths, and the only syscall is glibc's own futex wake of a waiter.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/seccomp.h>
#include <unistd.h>
#include <x86intrin.h>
#include <cpuid.h>

#include "elide-internal.h"
#include "log.h"

/* The lock and unlock paths every program runs, together and at the same
 * place in a page in every build (bench/RESULTS.md). */
#define _hot_path_ __attribute__((section(".text.elide_hot"), aligned(64)))
__asm__(".pushsection .text.elide_hot,\"ax\",@progbits\n\t.balign 4096\n\t.popsection");

static int mutex_lock_off(pthread_mutex_t *m, void *callsite);

/* PATH_OFF until the constructor decides; no decisions before there is a
 * segment (the pass-through looks for them on every call). */
static struct elide_seg_control no_control;
struct elide_state elide = { .mutex_lock = mutex_lock_off, .seg_control = &no_control };

/* glibc exports these aliases; they let us run before dlsym() is safe. */
extern int __pthread_mutex_init(pthread_mutex_t *, const pthread_mutexattr_t *);
extern int __pthread_mutex_destroy(pthread_mutex_t *);
extern int __pthread_mutex_lock(pthread_mutex_t *);
extern int __pthread_mutex_trylock(pthread_mutex_t *);
extern int __pthread_mutex_unlock(pthread_mutex_t *);
extern int __pthread_mutexattr_settype(pthread_mutexattr_t *, int);
extern int __pthread_mutexattr_destroy(pthread_mutexattr_t *);
extern int __pthread_rwlock_init(pthread_rwlock_t *, const pthread_rwlockattr_t *);
extern int __pthread_rwlock_destroy(pthread_rwlock_t *);
extern int __pthread_rwlock_rdlock(pthread_rwlock_t *);
extern int __pthread_rwlock_tryrdlock(pthread_rwlock_t *);
extern int __pthread_rwlock_wrlock(pthread_rwlock_t *);
extern int __pthread_rwlock_trywrlock(pthread_rwlock_t *);
extern int __pthread_rwlock_unlock(pthread_rwlock_t *);

typedef int (*mutex_fn)(pthread_mutex_t *);
typedef int (*mutex_timed_fn)(pthread_mutex_t *, const struct timespec *);
typedef int (*mutex_clock_fn)(pthread_mutex_t *, clockid_t, const struct timespec *);
typedef int (*rwlock_fn)(pthread_rwlock_t *);
typedef int (*rwlock_timed_fn)(pthread_rwlock_t *, const struct timespec *);
typedef int (*rwlock_clock_fn)(pthread_rwlock_t *, clockid_t, const struct timespec *);
typedef int (*cond_wait_fn)(pthread_cond_t *, pthread_mutex_t *);
typedef int (*cond_timed_fn)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
typedef int (*cond_clock_fn)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);

/*
 * The next definitions in the lookup order.  The ones glibc has aliases for
 * start out pointing at glibc, so a call that arrives before our
 * constructor (another preloaded library's constructor, an allocator) works.
 * The constructor then asks dlsym(RTLD_NEXT) so another interposer behind
 * us (mutrace, a tracer) still sees every call.
 */
static struct {
	int (*mutex_init)(pthread_mutex_t *, const pthread_mutexattr_t *);
	mutex_fn mutex_destroy, mutex_lock, mutex_trylock, mutex_unlock;
	mutex_timed_fn mutex_timedlock;
	mutex_clock_fn mutex_clocklock;
	int (*mutexattr_settype)(pthread_mutexattr_t *, int);
	int (*mutexattr_destroy)(pthread_mutexattr_t *);
	int (*rwlock_init)(pthread_rwlock_t *, const pthread_rwlockattr_t *);
	rwlock_fn rwlock_destroy, rwlock_rdlock, rwlock_tryrdlock, rwlock_wrlock, rwlock_trywrlock, rwlock_unlock;
	rwlock_timed_fn rwlock_timedrdlock, rwlock_timedwrlock;
	rwlock_clock_fn rwlock_clockrdlock, rwlock_clockwrlock;
	cond_wait_fn cond_wait;
	cond_timed_fn cond_timedwait;
	/* The condvar of binaries linked before glibc 2.3.2: other functions. */
	cond_wait_fn cond_wait_2_2_5;
	cond_timed_fn cond_timedwait_2_2_5;
	cond_clock_fn cond_clockwait;
	pid_t (*fork_without_handlers)(void); /* glibc's _Fork() (2.34) */
} real = {
	.mutex_init = __pthread_mutex_init,
	.mutex_destroy = __pthread_mutex_destroy,
	.mutex_lock = __pthread_mutex_lock,
	.mutex_trylock = __pthread_mutex_trylock,
	.mutex_unlock = __pthread_mutex_unlock,
	.mutexattr_settype = __pthread_mutexattr_settype,
	.mutexattr_destroy = __pthread_mutexattr_destroy,
	.rwlock_init = __pthread_rwlock_init,
	.rwlock_destroy = __pthread_rwlock_destroy,
	.rwlock_rdlock = __pthread_rwlock_rdlock,
	.rwlock_tryrdlock = __pthread_rwlock_tryrdlock,
	.rwlock_wrlock = __pthread_rwlock_wrlock,
	.rwlock_trywrlock = __pthread_rwlock_trywrlock,
	.rwlock_unlock = __pthread_rwlock_unlock,
};

/* Set while dlsym() runs: dlsym may allocate, and an allocator may lock. */
static __thread bool resolving;

/* exact: only that version (a compat symbol must never become the
 * current function of the same name). */
static void *resolve(const char *name, const char *version, bool exact)
{
	void *fn;

	resolving = true;
	fn = version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);
	if (!fn && version && !exact)
		fn = dlsym(RTLD_NEXT, name);
	resolving = false;
	return fn;
}

#define RESOLVE(field, name) do { \
		void *fn_ = resolve(name, NULL, false); \
		if (fn_) \
			__atomic_store_n((void **)&real.field, fn_, __ATOMIC_RELEASE); \
	} while (0)
#define RESOLVE_V(field, name, version) do { \
		void *fn_ = resolve(name, version, false); \
		if (fn_) \
			__atomic_store_n((void **)&real.field, fn_, __ATOMIC_RELEASE); \
	} while (0)

#define RESOLVE_EXACT(field, name, version) do { \
		void *fn_ = resolve(name, version, true); \
		if (fn_) \
			__atomic_store_n((void **)&real.field, fn_, __ATOMIC_RELEASE); \
	} while (0)

static void resolve_all(void)
{
	RESOLVE(mutex_init, "pthread_mutex_init");
	RESOLVE(mutex_destroy, "pthread_mutex_destroy");
	RESOLVE(mutex_lock, "pthread_mutex_lock");
	RESOLVE(mutex_trylock, "pthread_mutex_trylock");
	RESOLVE(mutex_unlock, "pthread_mutex_unlock");
	RESOLVE(mutex_timedlock, "pthread_mutex_timedlock");
	RESOLVE(mutex_clocklock, "pthread_mutex_clocklock");
	RESOLVE(mutexattr_settype, "pthread_mutexattr_settype");
	RESOLVE(mutexattr_destroy, "pthread_mutexattr_destroy");
	RESOLVE(rwlock_init, "pthread_rwlock_init");
	RESOLVE(rwlock_destroy, "pthread_rwlock_destroy");
	RESOLVE(rwlock_rdlock, "pthread_rwlock_rdlock");
	RESOLVE(rwlock_tryrdlock, "pthread_rwlock_tryrdlock");
	RESOLVE(rwlock_wrlock, "pthread_rwlock_wrlock");
	RESOLVE(rwlock_trywrlock, "pthread_rwlock_trywrlock");
	RESOLVE(rwlock_unlock, "pthread_rwlock_unlock");
	RESOLVE(rwlock_timedrdlock, "pthread_rwlock_timedrdlock");
	RESOLVE(rwlock_timedwrlock, "pthread_rwlock_timedwrlock");
	RESOLVE(rwlock_clockrdlock, "pthread_rwlock_clockrdlock");
	RESOLVE(rwlock_clockwrlock, "pthread_rwlock_clockwrlock");
	/* The 2.3.2 condvar is the one every current program uses. */
	RESOLVE_V(cond_wait, "pthread_cond_wait", "GLIBC_2.3.2");
	RESOLVE_V(cond_timedwait, "pthread_cond_timedwait", "GLIBC_2.3.2");
	RESOLVE(cond_clockwait, "pthread_cond_clockwait");
	RESOLVE_EXACT(cond_wait_2_2_5, "pthread_cond_wait", "GLIBC_2.2.5");
	RESOLVE_EXACT(cond_timedwait_2_2_5, "pthread_cond_timedwait", "GLIBC_2.2.5");
	RESOLVE(fork_without_handlers, "_Fork");
}

/*
 * For the functions glibc has no alias of: resolve on first use.  A call
 * that arrives while dlsym itself runs cannot be served (nothing to call);
 * allocators never use these, so it reports EAGAIN rather than recursing.
 */
#define LAZY_RESOLVE(field, resolve_it) do { \
		if (unlikely(!__atomic_load_n((void **)&real.field, __ATOMIC_ACQUIRE))) { \
			if (resolving) \
				return EAGAIN; \
			resolve_it; \
			if (!real.field) \
				return ENOSYS; \
		} \
	} while (0)
#define LAZY(field, name) LAZY_RESOLVE(field, RESOLVE(field, name))
#define LAZY_EXACT(field, name, version) LAZY_RESOLVE(field, RESOLVE_EXACT(field, name, version))

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
 * how many of its acquisitions in a row failed to elide.  Direct-mapped by
 * record index; a collision only restarts that thread's count.
 */
#define LOCAL_SLOTS 64
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
	 * cost over a bare forwarding interposer, bench/RESULTS.md). */
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
	struct lock_local local[LOCAL_SLOTS];
};

static __thread struct elide_thread self;

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

static inline struct lock_local *local_slot(const void *lock, bool write_side)
{
	uintptr_t addr = (uintptr_t)lock;

	/* Locks are 8-aligned; the side picks a half of the slots so an
	 * rwlock's two sides never share one (for a mutex it folds away). */
	return &self.local[((addr >> 3) ^ (addr >> 9) ^ (write_side ? LOCAL_SLOTS / 2 : 0)) & (LOCAL_SLOTS - 1)];
}

_Static_assert(sizeof(struct lock_local) == 32, "a lock slot is half a cache line");

static inline struct lock_local *local_of(const void *lock, const struct lock_rec *rec)
{
	bool write_side = rec->kind == LOCK_KIND_RWLOCK_WRITE;
	uintptr_t key = lock_key(lock, write_side);
	struct lock_local *l = local_slot(lock, write_side);
	uint32_t idx = rec_index(rec);

	if (unlikely(l->key != key || l->idx != idx)) {
		l->key = key;
		l->idx = idx;
		l->burst = 0;
		l->skip_left = 0;
		l->fail_streak = 0;
		l->burst_shift = 0;
	}
	return l;
}

/*
 * The time-stamp counter, unless the program disabled it (prctl
 * PR_SET_TSC, seccomp's strict mode; see prctl() below): a read then
 * raises SIGSEGV, and glibc's lock paths never read it.  Callers treat 0
 * as "no clock".
 */
static inline uint64_t tsc_read(void)
{
	return elide_tsc_usable() ? __rdtsc() : 0;
}

/* The length of the burst granted now (see BURST_MIN_SHIFT): one TSC read
 * per burst; the shortest one without the TSC. */
static inline uint32_t burst_length(struct lock_local *l)
{
	uint32_t now = (uint32_t)(tsc_read() >> BURST_TSC_SHIFT);
	bool quick = now != 0 && now - l->burst_stamp < BURST_QUICK;

	l->burst_stamp = now;
	if (!quick || l->burst_shift < BURST_MIN_SHIFT)
		l->burst_shift = BURST_MIN_SHIFT;
	else if (l->burst_shift < BURST_MAX_SHIFT)
		l->burst_shift++;
	return 1u << l->burst_shift;
}

static inline bool sample_now(struct lock_local *l)
{
	return ((++l->sample_count) & elide.sample_mask) == 0;
}

/* The weight of this throttled acquisition's counts: THROTTLED_SAMPLE for
 * 1 in THROTTLED_SAMPLE of them, else 0 (not counted). */
static inline unsigned throttled_weight(struct lock_local *l)
{
	return (++l->throttled_count & (THROTTLED_SAMPLE - 1)) == 0 ? THROTTLED_SAMPLE : 0;
}

/* Remove `lock` from the elided set; true if it was there. */
static inline struct lock_rec *elided_pop(void *lock)
{
	unsigned d = self.depth;

	if (likely(d == 0))
		return NULL;
	if (likely(self.held[d - 1].lock == lock)) {
		self.depth = d - 1;
		return self.held[d - 1].rec;
	}
	/* Unlocked out of order: rare, search the rest. */
	for (unsigned i = d - 1; i-- > 0;) {
		if (self.held[i].lock == lock) {
			struct lock_rec *rec = self.held[i].rec;

			memmove(&self.held[i], &self.held[i + 1], (d - 1 - i) * sizeof(self.held[0]));
			self.depth = d - 1;
			return rec;
		}
	}
	return NULL;
}

static inline void elided_push(void *lock, struct lock_rec *rec)
{
	unsigned d = self.depth;

	if (unlikely(d >= ELIDE_MAX_NEST))
		_xabort(ELIDE_XABORT_DEPTH);
	self.held[d].lock = lock;
	self.held[d].rec = rec;
	self.depth = d + 1;
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

static inline bool rwlock_free_for_reader(const pthread_rwlock_t *rw)
{
	return !(rwlock_readers(rw) & RWLOCK_WRLOCKED) &&
	       __atomic_load_n(&rw->__data.__cur_writer, __ATOMIC_RELAXED) == 0;
}

static inline bool rwlock_free_for_writer(const pthread_rwlock_t *rw)
{
	unsigned r = rwlock_readers(rw);

	return (r >> RWLOCK_READER_SHIFT) == 0 && !(r & RWLOCK_WRLOCKED) &&
	       __atomic_load_n(&rw->__data.__cur_writer, __ATOMIC_RELAXED) == 0;
}

static inline pid_t thread_tid(void);

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

static inline bool rwlock_held_by_other(const pthread_rwlock_t *rw, bool write)
{
	return rwlock_would_wait(rwlock_readers(rw), write) &&
	       (pid_t)__atomic_load_n(&rw->__data.__cur_writer, __ATOMIC_RELAXED) != thread_tid();
}

enum elide_op {
	OP_MUTEX,
	OP_RDLOCK,
	OP_WRLOCK,
};

static inline bool lock_is_free(void *lock, enum elide_op op)
{
	switch (op) {
	case OP_MUTEX:
		return mutex_word(lock) == 0;
	case OP_RDLOCK:
		return rwlock_free_for_reader(lock);
	case OP_WRLOCK:
		return rwlock_free_for_writer(lock);
	}
	return false;
}

/*
 * Lock-busy: wait for the holder to leave rather than queueing behind it
 * (which would make every later acquisition real too: the lemming effect).
 */
static bool wait_until_free(void *lock, enum elide_op op)
{
	for (unsigned spins = elide.opts.busy_spins; spins; spins--) {
		if (lock_is_free(lock, op))
			return true;
		_mm_pause();
	}
	return lock_is_free(lock, op);
}

static void conflict_pause(unsigned attempt)
{
	unsigned n = 16u << (attempt < 6 ? attempt : 6);

	/* Desynchronise threads that keep killing each other's transactions. */
	n += (unsigned)(tsc_read() & (n - 1));
	while (n--)
		_mm_pause();
}

/* A burst just granted goes to the hot entry; the previous hot lock's rest
 * goes back to its slot, so two locks used in turn both keep theirs (the
 * other one's fast path finds it in its slot). */
static inline void hot_grant(struct lock_local *l, uint32_t n)
{
	if (self.hot_key != l->key) {
		if (self.hot_key) {
			struct lock_local *old = local_slot((const void *)(self.hot_key & ~(uintptr_t)1), self.hot_key & 1);

			if (old->key == self.hot_key)
				old->burst = self.hot_burst;
		}
		self.hot_key = l->key;
	}
	self.hot_burst = n;
	l->burst = 0;
}

/*
 * Try to run the critical section as a transaction.  Returns true with the
 * transaction open (the caller returns 0 to the program), false when the
 * caller must take the real lock.
 *
 * A thread whose last acquisitions of this lock all fell back is throttled:
 * one attempt, no waiting for a busy lock, no pauses, counts sampled.  A
 * lock whose elision keeps failing thus costs one attempt per acquisition
 * (mode=on, policy always) until adaptive mode backs it off, which takes
 * STREAK_BACK_OFF failures in a row rather than a whole abort window.  A
 * commit ends the streak inside the transaction, so a lock that elides
 * well never sees throttling.
 */
static __attribute__((noinline)) bool try_elide(void *lock, struct lock_rec *rec, enum elide_op op)
{
	struct lock_local *l = local_of(lock, rec);
	bool throttled = l->fail_streak >= STREAK_THROTTLE;
	unsigned weight = throttled ? throttled_weight(l) : 1;
	unsigned retries = throttled ? 0 : elide.opts.retries;
	unsigned busy_retries = throttled ? 0 : elide.opts.busy_retries;
	unsigned attempt = 0, skipped = 0;
	bool other_retried = throttled;

	for (;;) {
		uint64_t start = 0;
		uint32_t status;

		if (!lock_is_free(lock, op) && !in_elided_section()) {
			/* Held for longer than a section should take: queue. */
			if (throttled || !wait_until_free(lock, op))
				break;
		}
		/* Time 1 in 16 attempts: cheap enough, and an unbiased estimate.
		 * A throttled attempt is timed when it is counted (1 in
		 * THROTTLED_SAMPLE, which its weight already scales). */
		if (throttled ? weight != 0 : unlikely((++self.attempt_count & 15) == 0))
			start = tsc_read();
		status = likely(!elide.sim_abort) ? _xbegin() : elide.sim_abort_status;
		if (status == _XBEGIN_STARTED) {
			if (likely(lock_is_free(lock, op))) {
				if (unlikely(l->fail_streak))
					l->fail_streak = 0;
				elided_push(lock, rec);
				return true;
			}
			_xabort(ELIDE_XABORT_BUSY);
		}
		if (weight)
			rec_note_abort(rec, status, start ? (tsc_read() - start) * (throttled ? 1 : 16) : 0, weight);
		switch (elide_abort_classify(status)) {
		case ELIDE_ABORT_BUSY:
			if (busy_retries-- == 0)
				goto fallback;
			continue;
		case ELIDE_ABORT_CONFLICT:
		case ELIDE_ABORT_RETRY:
			if (retries-- == 0)
				goto fallback;
			conflict_pause(attempt++);
			continue;
		case ELIDE_ABORT_OTHER:
		case ELIDE_ABORT_NESTED:
			/* No cause bit: an interrupt (gone on retry) or a syscall or
			 * page fault (there every time).  One more try tells them apart
			 * before the lock is backed off. */
			if (!other_retried) {
				other_retried = true;
				continue;
			}
			if (rec_adapts(rec))
				rec_back_off(rec);
			goto fallback;
		case ELIDE_ABORT_CAPACITY:
		case ELIDE_ABORT_EXPLICIT:
		case ELIDE_ABORT_DEBUG:
		default:
			/* Too big for the cache, or trylock / cond wait / destroy
			 * inside: this lock's sections need the real lock for a while. */
			if (rec_adapts(rec))
				rec_back_off(rec);
			goto fallback;
		}
	}
fallback:
	if (throttled && !rec_adapts(rec) && !in_elided_section()) {
		hot_grant(l, THROTTLED_SKIP);
		skipped = THROTTLED_SKIP;
	}
	if (l->fail_streak < STREAK_MAX)
		l->fail_streak++;
	/* A CAS from GATE_ELIDE: once per back-off.  Locks that do not adapt
	 * (mode=on, policy always) skip even the call: they get here on
	 * every acquisition. */
	if (l->fail_streak >= STREAK_BACK_OFF && rec_adapts(rec))
		rec_back_off(rec);
	if (weight) {
		rec_count(rec, STAT_FALLBACKS, weight);
		rec_count(rec, STAT_ACQUIRED, weight * (1 + skipped));
		if (skipped)
			rec_count(rec, STAT_SKIPPED, weight * skipped);
	}
	return false;
}

/*
 * A backed-off lock whose skip this thread has counted down: one
 * transaction tells whether eliding pays again.  It commits: the gate goes
 * back to eliding at the commit (commit_elided).  It aborts: the back-off
 * doubles.  A lock seen held is probed at the next acquisition instead.
 */
static __attribute__((noinline)) bool probe_elide(void *lock, struct lock_rec *rec, enum elide_op op, int32_t span, struct lock_local *l)
{
	uint32_t status;

	if (!lock_is_free(lock, op)) {
		l->skip_left = 1;
		return false;
	}
	status = likely(!elide.sim_abort) ? _xbegin() : elide.sim_abort_status;
	if (status == _XBEGIN_STARTED) {
		if (likely(lock_is_free(lock, op))) {
			self.probe_rec = rec;
			elided_push(lock, rec);
			return true;
		}
		_xabort(ELIDE_XABORT_BUSY);
	}
	/* Any abort, busy included (the lock looked free just before), is a
	 * failed probe: a lock that keeps aborting busy would otherwise be
	 * probed on every acquisition. */
	rec_note_abort(rec, status, 0, 1);
	rec_back_off_from(rec, span);
	rec_count(rec, STAT_FALLBACKS, 1);
	rec_count(rec, STAT_ACQUIRED, 1);
	return false;
}

/*
 * A tracked lock that is not elided now (backed off, or off by policy):
 * this acquisition is real, and so are the next `burst` of this thread,
 * which the fast path sends straight to glibc.  A backed-off lock's burst
 * ends before the span does, so the probe at the span's end runs here.
 * Counts are exact and written once per burst (two shared adds per 65 to
 * BURST_MAX + 1 acquisitions); a lock still being watched for contention
 * gets no burst (each acquisition looks at the lock) and is sampled.
 */
static inline bool mutex_skip_applies(const void *lock, const struct lock_rec *rec);

static __attribute__((noinline)) void grant_burst(void *lock, struct lock_local *l, struct lock_rec *rec,
						  int32_t gate)
{
	uint32_t n = 0;

	/* Inside an elided section a shared write would join the outer
	 * transaction's write set, and a relock of an rwlock held elided must
	 * reach the slow path: no burst, no count. */
	if (in_elided_section()) {
		l->burst = 0;
		return;
	}
	if ((gate == GATE_NEVER || gate > 0) && mutex_skip_applies(lock, rec)) {
		/* Its length, its count and the lock's span are settled
		 * under the lock (mutex_skip_settle()). */
		self.skip_grant = rec;
		l->burst = 0;
		if (self.hot_key == l->key)
			self.hot_burst = 0;
		goto publish;
	}
	if (gate > 0 && l->skip_left > 1) {
		uint32_t len = burst_length(l);

		n = l->skip_left - 1 < len ? l->skip_left - 1 : len;
	} else if (gate == GATE_NEVER) {
		n = burst_length(l);
	}
	l->skip_left -= gate > 0 ? n : 0;
	hot_grant(l, n);
	if (n == 0 && !sample_now(l))
		return;
	if (elide.opts.stats) {
		uint64_t count = n ? n + 1 : elide.opts.sample;

		rec_count(rec, STAT_ACQUIRED, count);
		if (gate > 0)
			rec_count(rec, STAT_SKIPPED, count);
	}
publish:
	/* Also repairs a state copy that a racing writer left stale. */
	rec_publish_state(rec);
	segment_poll_control();
}

/*
 * Decide for a tracked lock (one with a record).  Returns true when the
 * section now runs elided; false means "take the real lock" (and the
 * acquisition was already counted).  A backed-off lock is counted down per
 * thread: no shared write per acquisition.
 */
static inline bool tracked_acquire(void *lock, struct lock_rec *rec, enum elide_op op)
{
	int32_t gate = atomic_load_explicit(&rec->gate, memory_order_relaxed);
	struct lock_local *l;

	if (likely(gate == GATE_ELIDE))
		return try_elide(lock, rec, op);
	l = local_of(lock, rec);
	if (gate > 0 && mutex_skip_applies(lock, rec)) {
		/* The lock's own span (mutex_skip_grant()): any thread probes
		 * once it is used up, the next one starts with the next skip. */
		if (atomic_load_explicit(&rec->skip_span, memory_order_relaxed) == 1 && !in_elided_section() &&
		    lock_is_free(lock, op)) {
			atomic_store_explicit(&rec->skip_span, 0, memory_order_relaxed);
			l->fail_streak = STREAK_THROTTLE;
			return probe_elide(lock, rec, op, gate, l);
		}
	} else if (gate > 0) {
		if (l->skip_left == 0 || l->skip_left > (uint32_t)gate) {
			/* A new span: when a probe turns elision back on, this
			 * thread starts throttled, so a lock that still fails
			 * backs off again after a few cheap attempts. */
			l->skip_left = (uint32_t)gate;
			l->fail_streak = STREAK_THROTTLE;
		}
		if (--l->skip_left == 0 && !in_elided_section())
			return probe_elide(lock, rec, op, gate, l);
	}
	grant_burst(lock, l, rec, gate);
	return false;
}

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

static inline void commit_elided(void *lock, struct lock_rec *rec)
{
	_xend();
	if (in_elided_section())
		return; /* a nested XEND commits nothing yet: count at the outermost */
	if (unlikely(self.probe_rec == rec)) {
		self.probe_rec = NULL;
		rec_probe_committed(rec);
	}
	if (unlikely(sample_now(local_of(lock, rec))))
		rec_note_commit_sample(rec);
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

/* ---- watching --------------------------------------------------------- */

/*
 * Contention figures (PATH_OBSERVE, and the real acquisitions of tracked
 * locks in the other modes): a real acquisition that finds the lock held
 * is timed from before the wait to the lock; 1 in opts.watch_sample
 * acquisitions of a watched lock is counted with that weight and timed from
 * the lock to its unlock.  Clocks are read only there: an acquisition of a
 * free lock between samples costs a decrement and the look at the lock's
 * line that every path makes.
 */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	/* CLOCK_MONOTONIC cannot fail here: errno is left alone. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The watch clock: the TSC where it is invariant (one instruction, which
 * matters inside a contended section: a clock read there lengthens every
 * waiter's wait), else CLOCK_MONOTONIC in ns.  TSC ticks become ns when
 * written out (watch_ns()), against a reference taken at start-up.
 */
static struct {
	bool tsc;
	uint64_t ref_tsc, ref_ns;
	uint64_t ns_per_tick_q32;     /* ns per tick << 32; 0 until measured over >= 100 ms */
} watch_clock;

/* Without the TSC no clock at all: clock_gettime() reads it too (in the
 * vDSO), or makes a system call glibc's lock paths do not.  Waits and
 * holds are then counted, not timed. */
static inline uint64_t watch_now(void)
{
	if (unlikely(!elide_tsc_usable()))
		return 0;
	return likely(watch_clock.tsc) ? __rdtsc() : now_ns();
}

static void watch_clock_init(void)
{
	unsigned eax, ebx, ecx, edx;

	if (!elide_tsc_usable())
		return;
	/* CPUID 0x80000007 EDX bit 8: invariant TSC (constant rate, all cores). */
	watch_clock.tsc = __get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) && (edx & (1u << 8));
	watch_clock.ref_ns = now_ns();
	watch_clock.ref_tsc = __rdtsc();
}

/* Ticks of watch_now() in ns; called outside critical sections only. */
static uint64_t watch_ns(uint64_t ticks)
{
	uint64_t scale = __atomic_load_n(&watch_clock.ns_per_tick_q32, __ATOMIC_RELAXED);

	if (!watch_clock.tsc)
		return ticks;
	if (!elide_tsc_usable())
		return scale ? (uint64_t)(((unsigned __int128)ticks * scale) >> 32) : 0;
	if (scale == 0) {
		uint64_t ns = now_ns() - watch_clock.ref_ns, tsc = __rdtsc() - watch_clock.ref_tsc;

		if (tsc == 0)
			return 0;
		scale = (uint64_t)(((unsigned __int128)ns << 32) / tsc);
		/* Long enough for a close figure: keep it (a race stores the same). */
		if (ns >= 100000000u)
			__atomic_store_n(&watch_clock.ns_per_tick_q32, scale, __ATOMIC_RELAXED);
	}
	return (uint64_t)(((unsigned __int128)ticks * scale) >> 32);
}

/* The fast path's sampling tick: true once in opts.watch_sample calls per
 * thread (the countdown wraps from 0). */
static inline bool watch_tick(void)
{
	return unlikely(self.watch_countdown-- == 0);
}

/* In the slow path: was this acquisition the fast path's sample?  Starts
 * the next countdown, and looks for elided's decisions (1 in N, as the
 * other modes do on their sampled paths). */
static inline bool watch_sampled(void)
{
	if (self.watch_countdown != UINT32_MAX)
		return false;
	self.watch_countdown = elide.opts.watch_sample - 1;
	segment_poll_control();
	return true;
}

static void watch_add_max(uint64_t *max, uint64_t v)
{
	uint64_t cur = __atomic_load_n(max, __ATOMIC_RELAXED);

	while (v > cur && !__atomic_compare_exchange_n(max, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* The thread's added-up waits to their lock's entry. */
static __attribute__((noinline)) void watch_waits_flush(void)
{
	struct watch_waits w = self.waits;
	struct elide_seg_lock *e;
	uint64_t wait_ns;

	self.waits = (struct watch_waits){ 0 };
	if (!w.rec)
		return;
	segment_need();
	e = rec_entry(w.rec);
	if (w.contended)
		__atomic_fetch_add(&e->stats[STAT_CONTENDED], w.contended, __ATOMIC_RELAXED);
	wait_ns = watch_ns(w.wait);
	__atomic_fetch_add(&e->wait_ns, wait_ns, __ATOMIC_RELAXED);
	__atomic_fetch_add(&elide.seg_header->wait_ns, wait_ns, __ATOMIC_RELAXED);
	watch_add_max(&e->wait_max_ns, watch_ns(w.wait_max));
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	rec_touch(w.rec);
}

/* Write the pending figures to the lock's entry; hold_end 0 drops a
 * sampled hold (the lock was not given back by this thread's unlock). */
static __attribute__((noinline)) void watch_flush(uint64_t hold_end)
{
	struct watch_pending p = self.watch;
	struct elide_seg_lock *e;

	self.watch_lock = NULL;
	self.watch = (struct watch_pending){ 0 };
	if (p.flush_waits) {
		watch_waits_flush();
		self.waits = p.next;
	}
	if (!p.rec || (!p.acquired && !p.hold_start))
		return;
	segment_need();
	e = rec_entry(p.rec);
	if (p.acquired)
		__atomic_fetch_add(&e->stats[STAT_ACQUIRED], p.acquired, __ATOMIC_RELAXED);
	if (p.hold_start && hold_end > p.hold_start) {
		uint64_t hold = watch_ns(hold_end - p.hold_start);

		__atomic_fetch_add(&e->hold_ns, hold, __ATOMIC_RELAXED);
		__atomic_fetch_add(&e->hold_samples, 1, __ATOMIC_RELAXED);
		if (hold >= ELIDE_SEG_HOLD_LONG_NS)
			__atomic_fetch_add(&e->hold_long, 1, __ATOMIC_RELAXED);
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	rec_touch(p.rec);
}

/* Add a wait to the thread's batch, of rec (inside the section:
 * thread-local stores only); true when the batch is due to be written. */
static inline bool watch_waits_add(struct lock_rec *rec, bool count_contended, uint64_t wait, uint64_t now)
{
	struct watch_waits *w = &self.waits;

	if (!w->rec) {
		w->rec = rec;
		w->first = now;
	}
	w->contended += count_contended;
	w->wait += wait;
	if (wait > w->wait_max)
		w->wait_max = wait;
	return w->contended >= WATCH_BATCH || now - w->first >= WATCH_BATCH_TICKS;
}

/*
 * After a watched real acquisition (result r).  A wait is added to the
 * thread's figures; a sample, and waits that are due, are kept until the
 * unlock, or written now when the lock is not held (an error, a timeout).
 */
static void watch_note(void *lock, struct lock_rec *rec, int r, bool waited, bool count_contended,
		       uint64_t wait, bool sampled, uint64_t got)
{
	struct watch_waits next = { 0 };
	bool due = false;

	/* Figures still pending from a lock held across this one: written
	 * now, without their hold (nested sections; rare). */
	if (self.watch_lock)
		watch_flush(0);
	if (waited && self.waits.rec && self.waits.rec != rec) {
		/* Another lock's batch: written at this unlock, and this wait
		 * begins the next one then. */
		next = (struct watch_waits){ .rec = rec, .contended = count_contended, .wait = wait,
					     .wait_max = wait, .first = got };
		due = true;
	} else if (waited) {
		due = watch_waits_add(rec, count_contended, wait, got);
	}
	/* A sample also writes what the thread added up, however little. */
	due = due || (sampled && self.waits.rec);

	if (!due && !(sampled && r == 0))
		return;
	self.watch = (struct watch_pending){
		.rec = rec,
		.acquired = sampled && r == 0 ? elide.opts.watch_sample : 0,
		.hold_start = sampled && r == 0 ? got : 0,
		.flush_waits = due,
		.next = next,
	};
	if (r != 0) {
		watch_flush(0);
		return;
	}
	self.watch_lock = lock;
}

/* The unlock of a lock with pending figures: the hold ends here. */
static __attribute__((noinline)) uint64_t watch_hold_end(void)
{
	return self.watch.hold_start ? watch_now() : 0;
}

/* ---- mutexes ---------------------------------------------------------- */

enum mutex_wait {
	WAIT_FOREVER,
	WAIT_TIMED,
	WAIT_CLOCK,
};

struct wait_spec {
	enum mutex_wait how;
	clockid_t clock;
	const struct timespec *abstime;
};

/*
 * A default mutex's words.  Every interposer adds a call between the
 * program's unlock and its next lock; on a short contended section that
 * hop decides who gets the lock next, and a preload that only forwards
 * each call to glibc costs 7-13% there by itself (bench/RESULTS.md, "the
 * interposition floor").  So a default mutex (private, __kind 0: what
 * PTHREAD_MUTEX_INITIALIZER and pthread_mutex_init(m, NULL) make) is taken
 * and given here, with the protocol glibc uses for it: __lock is 0 free,
 * 1 held, 2 held with waiters (a futex word); the holder writes its thread
 * id to __owner and counts itself in __nusers.  A lock that is not free
 * is waited for the same way (mutex_words_wait(): marked 2, a futex sleep
 * while it stays 2); an unlock that finds 2 wakes one waiter, as glibc's
 * does.  Only when
 * glibc_check_default_mutex() saw glibc write the words the same way and
 * the next definitions are glibc's own (a tracer interposed behind us must
 * still see every call), and never beside glibc's own elision.
 */
static __attribute__((noinline, cold)) pid_t thread_tid_first(void)
{
	/* glibc keeps the id in the thread's descriptor: read it there, as
	 * glibc's own lock does, so a thread in a seccomp sandbox that allows
	 * only futex can still lock.  gettid only where glibc did not say
	 * where (find_thread_id(); then nothing is locked here). */
	if (likely(elide.pthread_tid_offset))
		self.tid = *(const pid_t *)((const char *)pthread_self() + elide.pthread_tid_offset);
	else
		self.tid = (pid_t)syscall(SYS_gettid); /* never fails: errno kept */
	return self.tid;
}

static inline pid_t thread_tid(void)
{
	if (unlikely(self.tid == 0))
		return thread_tid_first();
	return self.tid;
}

/* glibc's own shortcut while the process has one thread: no atomic
 * instruction is needed on a private mutex then. */
static inline bool process_single_threaded(void)
{
	const char *flag = elide.single_threaded;

	return flag && __atomic_load_n(flag, __ATOMIC_RELAXED);
}

static inline bool own_mutex_words(const pthread_mutex_t *m)
{
	/* Both expected: the lock paths fall through to their common case. */
	if (unlikely(!__atomic_load_n(&elide.own_mutex_words, __ATOMIC_RELAXED)))
		return false;
	return likely(__atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED) == PTHREAD_MUTEX_TIMED_NP);
}

/*
 * Adaptive mode, a backed-off default mutex whose words libelide takes: its
 * burst is the mutex's own skip count (glibc-abi.h), not this thread's.
 * The fast path sees it on the line it is about to write and takes the
 * lock with nothing in between; the holder counts it down.  A look at the
 * thread's own burst before the compare-and-swap cost the 2-thread counter
 * a tenth of its speed on this guest (bench/RESULTS.md), a look at the
 * mutex's line nothing measurable.  Its acquisitions were counted when the
 * skip was granted, and all of them are skipped by whichever threads come:
 * the count stays exact without a write to the record per acquisition.
 */
static inline bool mutex_skip_applies(const void *lock, const struct lock_rec *rec)
{
	return rec->kind == LOCK_KIND_MUTEX && elide.path == PATH_WATCH && own_mutex_words(lock);
}

static inline bool mutex_skipping(const pthread_mutex_t *m)
{
	return own_mutex_words(m) && glibc_mutex_skip_load(m) != 0;
}

static __attribute__((noinline)) void mutex_skip_missed(pthread_mutex_t *m)
{
	uint16_t idx = glibc_mutex_idx_load(m);
	struct lock_rec *rec;

	/* Another thread used the last skip between the look and the lock:
	 * this acquisition was not counted in advance. */
	if (idx == 0 || !elide.opts.stats)
		return;
	rec = rec_of_idx(idx);
	rec_count(rec, STAT_ACQUIRED, 1);
	if (atomic_load_explicit(&rec->gate, memory_order_relaxed) > 0)
		rec_count(rec, STAT_SKIPPED, 1);
}

/*
 * The length of a mutex's next skip, by the holder: 64 acquisitions, twice
 * the last one's if that ran out within BURST_QUICK, the same if within four
 * times that, else 64 again.  Timed per lock, not per thread: the threads
 * take turns granting a mutex's skips, so a thread's own gaps would be
 * several skips long.  The middle band keeps a lock whose longest skip
 * takes about BURST_QUICK from falling back to 64 every other time.
 */
static uint32_t mutex_skip_length(struct lock_rec *rec)
{
	uint32_t now = (uint32_t)(tsc_read() >> BURST_TSC_SHIFT);
	uint32_t since = now - atomic_load_explicit(&rec->skip_stamp, memory_order_relaxed);
	uint8_t shift = atomic_load_explicit(&rec->skip_shift, memory_order_relaxed);

	/* Relaxed atomics: the overflow record is shared by mutexes that
	 * different threads hold at once (a race on it only misjudges a length). */
	atomic_store_explicit(&rec->skip_stamp, now, memory_order_relaxed);
	if (shift < BURST_MIN_SHIFT || now == 0 || since >= 4 * BURST_QUICK)
		shift = BURST_MIN_SHIFT;
	else if (since < BURST_QUICK && shift < BURST_MUTEX_MAX_SHIFT)
		shift++;
	atomic_store_explicit(&rec->skip_shift, shift, memory_order_relaxed);
	return 1u << shift;
}

/*
 * The next skip of a mutex not elided now, by its holder (`used`: this
 * acquisition itself, when it is not counted yet): 0 when none may start.
 * Backed off, a lock probes once per span of `gate` acquisitions, like a
 * thread's span of its own acquisitions (tracked_acquire()) but kept for
 * the lock: the skips use the span up to its last acquisition, which then
 * goes to the slow path and probes (whichever thread comes).
 */
static uint32_t mutex_skip_grant(struct lock_rec *rec, int32_t gate, uint32_t used)
{
	uint32_t left, n;

	if (gate == GATE_NEVER)
		return mutex_skip_length(rec);
	if (gate <= 0)
		return 0; /* eliding again, or watched for contention: the slow path's */
	left = atomic_load_explicit(&rec->skip_span, memory_order_relaxed);
	if (left == 0 || left > (uint32_t)gate)
		left = (uint32_t)gate; /* a new span (or a shorter one after commits) */
	left = left > used ? left - used : 1;
	n = left > 1 ? mutex_skip_length(rec) : 0;
	if (n > left - 1)
		n = left - 1;
	atomic_store_explicit(&rec->skip_span, left - n, memory_order_relaxed);
	return n;
}

/* Counted when granted: the skip and (used) the acquisition granting it. */
static void mutex_skip_count(struct lock_rec *rec, int32_t gate, uint64_t count)
{
	if (!elide.opts.stats || count == 0)
		return;
	rec_count(rec, STAT_ACQUIRED, count);
	if (gate > 0)
		rec_count(rec, STAT_SKIPPED, count);
}

/* The slow path took the mutex (r = 0) or gave up: the skip grant_burst()
 * asked for starts now, unless another thread's is still running.
 * Counted here, under the lock. */
static __attribute__((noinline)) void mutex_skip_settle(pthread_mutex_t *m, int r)
{
	struct lock_rec *rec = self.skip_grant;
	int32_t gate = atomic_load_explicit(&rec->gate, memory_order_relaxed);
	uint32_t n = 0;

	self.skip_grant = NULL;
	if (r != 0)
		return; /* not acquired (timed out): nothing to count or skip */
	if (glibc_mutex_skip_load(m) == 0) {
		n = mutex_skip_grant(rec, gate, 1);
		glibc_mutex_skip_store(m, (uint16_t)n);
	}
	mutex_skip_count(rec, gate, 1 + n);
}

/*
 * The holder used a mutex's last skip: the next one starts here, under the
 * lock, when nothing waits for the slow path: the lock is still backed off
 * (or off) and its span not used up (else its probe is due), no decision
 * from elided is pending (applying one may create a file: not inside the
 * program's critical section) and this is no elided section (a shared
 * write would join the transaction).  Otherwise the skip stays 0 and the
 * next acquisition takes the slow path.  Without this, every thread that
 * came while the count was 0 went there, and the ones that then found the
 * lock held slept on its futex.
 */
static __attribute__((noinline)) void mutex_skip_renew(pthread_mutex_t *m)
{
	uint16_t idx = glibc_mutex_idx_load(m);
	struct lock_rec *rec;
	int32_t gate;
	uint32_t n;

	if (idx == 0 || in_elided_section() || elide.path != PATH_WATCH ||
	    __atomic_load_n(&elide.seg_control->generation, __ATOMIC_ACQUIRE) != elide.control_seen)
		return;
	rec = rec_of_idx(idx);
	gate = atomic_load_explicit(&rec->gate, memory_order_relaxed);
	n = mutex_skip_grant(rec, gate, 0);
	glibc_mutex_skip_store(m, (uint16_t)n);
	mutex_skip_count(rec, gate, n);
}

/* The holder of a skipping mutex: one of its acquisitions used. */
static inline void mutex_skip_use(pthread_mutex_t *m)
{
	uint16_t n = glibc_mutex_skip_load(m);

	if (likely(n > 1)) {
		glibc_mutex_skip_store(m, n - 1);
	} else if (n == 1) {
		glibc_mutex_skip_store(m, 0);
		mutex_skip_renew(m);
	} else {
		mutex_skip_missed(m);
	}
}

/* A raw FUTEX_WAKE: a libc call would set errno on failure, and glibc's
 * own unlock ignores the result too. */
static __attribute__((noinline)) void futex_wake_one_private(int *word)
{
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_futex), "D"(word), "S"((long)(FUTEX_WAKE | FUTEX_PRIVATE_FLAG)), "d"(1L)
			 : "rcx", "r11", "memory");
	(void)ret;
}

/* A raw FUTEX_WAIT for as long as *word is `value`: returns on a wake-up,
 * a signal or a changed word alike (the caller looks again); errno is left
 * alone, as glibc's own wait leaves it. */
static void futex_wait_private(int *word, int value)
{
	register long no_timeout __asm__("r10") = 0;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_futex), "D"(word), "S"((long)(FUTEX_WAIT | FUTEX_PRIVATE_FLAG)), "d"((long)value),
			   "r"(no_timeout)
			 : "rcx", "r11", "memory");
	(void)ret;
}

/* A thread's first: its id asked for, out of line. */
static __attribute__((noinline, cold)) int mutex_words_note_first_holder(pthread_mutex_t *m)
{
	m->__data.__owner = thread_tid();
	m->__data.__nusers++;
	return 0;
}

/* What glibc writes once a default mutex is taken: its holder's thread id
 * and one more user.  Returns 0, pthread_mutex_lock()'s result: a lock
 * path ends in it or in mutex_words_wait() as a tail call, and so needs no
 * stack frame of its own. */
static inline int mutex_words_note_holder(pthread_mutex_t *m)
{
	pid_t tid = self.tid;

	if (unlikely(tid == 0))
		return mutex_words_note_first_holder(m);
	m->__data.__owner = tid;
	m->__data.__nusers++;
	return 0;
}

/* The score of this thread's pauses before sleeping: a pause that ended
 * with the lock gains 7, one that did not loses 1, so it keeps pausing
 * while at least one in eight pays (a sleep and its wake-up cost several
 * times the pauses), between -32 and 32.  One in four stopped the pauses
 * of hash lookups at 2 threads that paid 1.4x. */
#define WAIT_SPIN_WON 7
#define WAIT_SPIN_SCORE_MAX 32
#define WAIT_SPIN_SCORE_MIN (-32)

/* Pause before sleeping this time?  While the score is negative (this
 * thread's waits outlast the pause: long sections), only every 16th wait
 * pauses, to notice when they become short again. */
static inline bool mutex_words_wait_pays(void)
{
	if (elide.opts.wait_spins == 0)
		return false;
	return self.wait_spin_score >= 0 || (++self.wait_spin_probe & 15) == 0;
}

static inline void mutex_words_wait_score(bool won)
{
	int score = self.wait_spin_score + (won ? WAIT_SPIN_WON : -1);

	if (score > WAIT_SPIN_SCORE_MAX)
		score = WAIT_SPIN_SCORE_MAX;
	if (score < WAIT_SPIN_SCORE_MIN)
		score = WAIT_SPIN_SCORE_MIN;
	self.wait_spin_score = (int8_t)score;
}

/*
 * A default mutex that was not free: wait for it with glibc's protocol
 * (mark it 2, "held with waiters", and sleep on the futex while it stays
 * 2; the unlock that finds 2 wakes one).  Here rather than in glibc,
 * whose lock would first try once more the compare-and-swap that just
 * failed: on a contended line every such try takes the line from the
 * holder, whose unlock must then fetch it back.
 *
 * Before marking it, the waiter pauses wait_spins times without touching
 * the lock's line and tries to take it once more: a short section is over
 * by then, and the waiter takes the lock without a futex sleep, and its
 * holder unlocks without a FUTEX_WAKE.  Spinning on loads instead took the
 * line from the holder and slowed everything down (bench/RESULTS.md).
 * Only while the pauses pay (mutex_words_wait_pays()); wait_spins=0 waits
 * exactly as glibc does.
 * Modelled in libelide/model/own-mutex.pml: change both together.
 */
static __attribute__((noinline)) int mutex_words_wait(pthread_mutex_t *m)
{
	int *word = &m->__data.__lock;
	int seen;

	if (mutex_words_wait_pays()) {
		for (unsigned spins = elide.opts.wait_spins; spins; spins--)
			_mm_pause();
		seen = 0;
		if (__atomic_compare_exchange_n(word, &seen, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			mutex_words_wait_score(true);
			return mutex_words_note_holder(m);
		}
		mutex_words_wait_score(false);
	} else {
		seen = __atomic_load_n(word, __ATOMIC_RELAXED);
	}
	if (seen == 2)
		futex_wait_private(word, 2);
	while (__atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) != 0)
		futex_wait_private(word, 2);
	return mutex_words_note_holder(m);
}

/* Marks a free default mutex's word taken; false (nothing written) when it
 * is not free.  The caller then notes the holder. */
static inline bool mutex_words_take_word(pthread_mutex_t *m)
{
	int *word = &m->__data.__lock;
	int free_word = 0;

	if (process_single_threaded()) {
		if (__atomic_load_n(word, __ATOMIC_RELAXED) != 0)
			return false;
		__atomic_store_n(word, 1, __ATOMIC_RELAXED);
		return true;
	}
	return __atomic_compare_exchange_n(word, &free_word, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* pthread_mutex_trylock() of a default mutex: always the compare-and-swap,
 * as glibc's trylock does even in a process with one thread (a signal
 * handler may trylock the mutex between a load and a store). */
static inline int mutex_words_trylock(pthread_mutex_t *m)
{
	int free_word = 0;

	if (!__atomic_compare_exchange_n(&m->__data.__lock, &free_word, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return EBUSY;
	return mutex_words_note_holder(m);
}

/* Takes a default mutex, waiting as glibc does when it is held; 0. */
static inline int mutex_words_lock(pthread_mutex_t *m)
{
	if (unlikely(!mutex_words_take_word(m)))
		return mutex_words_wait(m);
	return mutex_words_note_holder(m);
}

static inline void mutex_words_give(pthread_mutex_t *m)
{
	int *word = &m->__data.__lock;

	m->__data.__owner = 0;
	m->__data.__nusers--;
	if (process_single_threaded())
		__atomic_store_n(word, 0, __ATOMIC_RELEASE);
	else if (__atomic_exchange_n(word, 0, __ATOMIC_RELEASE) > 1)
		futex_wake_one_private(word);
}

/*
 * Locks a default mutex of a process with other threads: its
 * compare-and-swap first, with no test of __libc_single_threaded, straight
 * through (the contended counter paid for every taken branch).
 */
static inline __attribute__((always_inline)) int mutex_words_lock_threaded(pthread_mutex_t *m)
{
	int free_word = 0;

	if (unlikely(!__atomic_compare_exchange_n(&m->__data.__lock, &free_word, 1, false, __ATOMIC_ACQUIRE,
						  __ATOMIC_RELAXED)))
		return mutex_words_wait(m);
	return mutex_words_note_holder(m);
}

/* pthread_mutex_lock() as glibc does it, for whatever libelide does not elide. */
static inline int real_mutex_lock(pthread_mutex_t *m)
{
	if (!own_mutex_words(m))
		return real.mutex_lock(m);
	return mutex_words_lock(m);
}

static inline int real_mutex_trylock(pthread_mutex_t *m)
{
	if (!own_mutex_words(m))
		return real.mutex_trylock(m);
	return mutex_words_trylock(m);
}

static inline int real_mutex_unlock(pthread_mutex_t *m)
{
	if (!own_mutex_words(m))
		return real.mutex_unlock(m);
	mutex_words_give(m);
	return 0;
}

/*
 * The read side of a default rwlock, taken and given here for the same
 * reason as a default mutex's words (above), with glibc's protocol for it
 * (2.25 and later): __readers counts readers from bit RWLOCK_READER_SHIFT
 * up, below it WRPHASE (a write phase), WRLOCKED (a writer holds or waits)
 * and RWAITING (readers wait for that writer).  A reader that registers in
 * a read phase holds the lock; a reader that leaves is done unless it is
 * the last one and a writer or waiting readers need the hand-over.  Only
 * those two cases are done here, with one CAS each that leaves the word as
 * glibc's fetch-add or CAS would; everything else (a write phase, a
 * writer-preferring rwlock, the reader that must hand over, a thread that
 * holds the lock for writing, an overflowing count) goes to glibc, whose
 * code then runs from the same state.  Only where
 * glibc_check_default_rwlock() saw glibc write the word so.
 * Modelled in libelide/model/own-rwlock.pml: change both together.
 */
static inline bool own_rwlock_read(const pthread_rwlock_t *rw)
{
	return __atomic_load_n(&elide.own_rwlock_words, __ATOMIC_RELAXED) &&
	       __atomic_load_n(&rw->__data.__flags, __ATOMIC_RELAXED) != PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP;
}

/* Registers as a reader in a read phase; false (nothing written) otherwise. */
static inline bool rwlock_read_take(pthread_rwlock_t *rw)
{
	unsigned *word = &rw->__data.__readers;
	unsigned r;

	/* The CAS below writes this line: fetch it exclusive at once, or the
	 * load fetches it shared and the CAS pays a second transfer. */
	prefetch_for_write(word);
	r = __atomic_load_n(word, __ATOMIC_RELAXED);
	/* A thread holding the lock for writing (glibc says EDEADLK to it)
	 * sees its own write phase, so goes to glibc without a look at
	 * __cur_writer: a writer holds the lock only in a write phase. */
	while (!(r & RWLOCK_WRPHASE) && r < RWLOCK_READER_OVERFLOW - (1u << RWLOCK_READER_SHIFT)) {
		if (__atomic_compare_exchange_n(word, &r, r + (1u << RWLOCK_READER_SHIFT), true, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return true;
	}
	return false;
}

/* Leaves as a reader when no hand-over is due; false (nothing written) when
 * glibc must do it, or the thread holds the lock for writing. */
static inline bool rwlock_read_give(pthread_rwlock_t *rw)
{
	unsigned *word = &rw->__data.__readers;
	unsigned r;

	/* As in rwlock_read_take(): exclusive at once; and the writer's own
	 * unlock finds its write phase below, so goes to glibc. */
	prefetch_for_write(word);
	r = __atomic_load_n(word, __ATOMIC_RELAXED);
	for (;;) {
		unsigned readers = r >> RWLOCK_READER_SHIFT;

		if ((r & RWLOCK_WRPHASE) || readers == 0 ||
		    (readers == 1 && (r & (RWLOCK_WRLOCKED | RWLOCK_RWAITING))))
			return false;
		if (__atomic_compare_exchange_n(word, &r, r - (1u << RWLOCK_READER_SHIFT), true, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			return true;
	}
}

static inline int real_rwlock_rdlock(pthread_rwlock_t *rw)
{
	if (own_rwlock_read(rw) && rwlock_read_take(rw))
		return 0;
	return real.rwlock_rdlock(rw);
}

static inline int real_rwlock_unlock(pthread_rwlock_t *rw)
{
	if (own_rwlock_read(rw) && rwlock_read_give(rw))
		return 0;
	return real.rwlock_unlock(rw);
}

static int real_mutex_acquire(pthread_mutex_t *m, const struct wait_spec *w)
{
	switch (w->how) {
	case WAIT_TIMED:
		LAZY(mutex_timedlock, "pthread_mutex_timedlock");
		return real.mutex_timedlock(m, w->abstime);
	case WAIT_CLOCK:
		LAZY(mutex_clocklock, "pthread_mutex_clocklock");
		return real.mutex_clocklock(m, w->clock, w->abstime);
	case WAIT_FOREVER:
		break;
	}
	return real_mutex_lock(m);
}

/*
 * The slow path: the mutex has a record, or it was held when we looked, or
 * mode=on tracks every lock.  Only contended (or annotated) locks get here
 * in adaptive mode, so single-threaded use never pays for it.
 */
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

/* The lock's record if this acquisition may use it, else NULL (straight to
 * glibc).  Creates one on a contended lock that has none. */
static inline struct lock_rec *mutex_tracking_rec(pthread_mutex_t *m, void *callsite, bool note_contended)
{
	uint16_t idx = __atomic_load_n(mutex_idx_ptr(m), __ATOMIC_RELAXED);
	enum mutex_class class = mutex_class(m);
	struct lock_rec *rec;

	if (idx == 0) {
		/* Within an elided section creating a record would write shared
		 * memory inside the transaction: this acquisition goes through. */
		if (class != MUTEX_ELIDABLE || in_elided_section())
			return NULL;
		rec = registry_attach(m, mutex_idx_ptr(m), LOCK_KIND_MUTEX, callsite);
		if (note_contended && elide.opts.mode != ELIDE_MODE_ON)
			rec_note_contended(rec);
		return rec;
	}
	rec = rec_of_idx(idx);
	if (class == MUTEX_ELIDABLE)
		return rec;
	/* Only a record of its own, made when the program named the lock,
	 * may track a lock of another type: never the shared overflow. */
	if (rec == &elide.recs[REC_OVERFLOW])
		return NULL;
	if (class == MUTEX_UNELIDABLE && !rec->hard_never)
		return NULL;
	return rec;
}

/*
 * The slow path: the mutex has a record, or it was held when we looked, or
 * mode=on tracks every lock.  Only contended (or annotated) locks get here
 * in adaptive mode, so single-threaded use never pays for it.
 */
static __attribute__((noinline)) int mutex_acquire_slow(pthread_mutex_t *m, const struct wait_spec *w,
							 void *callsite)
{
	struct lock_rec *rec;
	int r;

	/* glibc rejects a bad clock before looking at the lock. */
	if (w->how == WAIT_CLOCK && !wait_clock_valid(w->clock))
		return real_mutex_acquire(m, w);
	rec = mutex_tracking_rec(m, callsite, true);
	if (!rec)
		return real_mutex_acquire(m, w);
	if (tracked_acquire(m, rec, OP_MUTEX))
		return 0;
	if (mutex_word(m) != 0) {
		/* A real wait: timed, as in watch mode.  While watching for
		 * contention the gate counted it already. */
		bool counted = atomic_load_explicit(&rec->gate, memory_order_relaxed) == GATE_WATCH;
		uint64_t start = watch_now(), got;

		if (counted)
			rec_note_contended(rec);
		r = real_mutex_acquire(m, w);
		got = watch_now();
		watch_note(m, rec, r, true, !counted, got - start, false, got);
	} else {
		r = real_mutex_acquire(m, w);
	}
	if (self.skip_grant)
		mutex_skip_settle(m, r);
	return r;
}

/* A thread that holds the mutex itself is not waiting for another (a
 * recursive relock; EDEADLK). */
static inline bool mutex_held_by_other(const pthread_mutex_t *m)
{
	return mutex_word(m) != 0 && __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED) != thread_tid();
}

/*
 * PATH_OBSERVE: the mutex was held when the fast path looked (or its CAS
 * failed), or this is the thread's sampled acquisition.  A held lock gets
 * a record (as a contended lock does in adaptive mode) and its wait is
 * timed; a sampled acquisition of a lock with a record is counted and its
 * hold timed.
 */
static __attribute__((noinline)) int mutex_acquire_watched(pthread_mutex_t *m, const struct wait_spec *w,
							    void *callsite)
{
	bool sampled = watch_sampled();
	struct lock_rec *rec;
	uint64_t start = 0, got;
	bool held;
	int r;

	if (w->how == WAIT_CLOCK && !wait_clock_valid(w->clock))
		return real_mutex_acquire(m, w);
	held = mutex_held_by_other(m);
	if (!held && (!sampled || __atomic_load_n(mutex_idx_ptr(m), __ATOMIC_RELAXED) == 0))
		return real_mutex_acquire(m, w);
	rec = mutex_tracking_rec(m, callsite, false);
	if (!rec)
		return real_mutex_acquire(m, w);
	if (held)
		start = watch_now();
	if (held && w->how == WAIT_FOREVER && own_mutex_words(m)) {
		/* Held by another: straight to the wait, no second CAS. */
		r = mutex_words_wait(m);
	} else {
		r = real_mutex_acquire(m, w);
	}
	got = watch_now();
	watch_note(m, rec, r, held, held, held ? got - start : 0, sampled, got);
	return r;
}

/*
 * The fast path of every acquisition: a mutex without a record that is free
 * right now goes straight to glibc, and so does one backed off in the
 * middle of this thread's span.  One look at the lock's cache line (the
 * index and the lock word share it) decides; the check is racy on purpose:
 * a lock that becomes held a moment later was simply not seen contended.
 */
static inline __attribute__((always_inline)) bool mutex_takes_fast_path(const pthread_mutex_t *m)
{
	uint8_t path = elide.path;
	struct lock_local *slot;

	if (likely(path == PATH_OFF)) {
		poll_control_off();
		return true;
	}
	if (path == PATH_OBSERVE) {
		if (watch_tick())
			return false;
		prefetch_for_write(m); /* as below: glibc's CAS comes next */
		return mutex_word(m) == 0;
	}
	/* Bursts: a lock not elided now, or this thread's skip after a
	 * throttled attempt (THROTTLED_SKIP).  The slot is computed once,
	 * for the burst and the prefetch. */
	slot = local_slot(m, false);
	if (takes_burst(m, false, slot))
		return true;
	if (path == PATH_TRACK_ALL) {
		prefetch_if_failing(m, false, slot);
		return false;
	}
	/* glibc writes this line next: ask for it exclusive now, or the read
	 * below fetches it shared and glibc's CAS pays a second transfer. */
	prefetch_unless_eliding(m, false, slot);
	return (glibc_mutex_idx_load(m) | mutex_word(m)) == 0;
}

static inline int mutex_acquire_not_fast(pthread_mutex_t *m, const struct wait_spec *w, void *callsite)
{
	if (elide.path == PATH_OBSERVE)
		return mutex_acquire_watched(m, w, callsite);
	return mutex_acquire_slow(m, w, callsite);
}

/*
 * pthread_mutex_lock() per fast path.  The entry jumps to the one of the
 * current path through elide.mutex_lock (one predictable jump), and each
 * lays out its common case as one straight line: written as a single
 * function, the adaptive path's uncontended lock took six taken branches
 * over seven cache lines, and the uncontended 1-thread benchmarks moved by
 * 15% with nothing but where the code landed.  callsite is the caller's
 * return address, for the slow paths.
 */
static _hot_path_ int mutex_lock_off(pthread_mutex_t *m, void *callsite)
{
	(void)callsite;
	poll_control_off();
	return real_mutex_lock(m);
}

/* Locks with records (mode=on), and adaptive mode's mutexes whose words
 * glibc takes. */
static int mutex_lock_tracking(pthread_mutex_t *m, void *callsite)
{
	static const struct wait_spec forever = { .how = WAIT_FOREVER };

	if (likely(mutex_takes_fast_path(m)))
		return real_mutex_lock(m);
	return mutex_acquire_not_fast(m, &forever, callsite);
}

/* A backed-off mutex's acquisition, its skip counted down by the holder. */
static __attribute__((noinline)) int mutex_lock_skipping_own(pthread_mutex_t *m)
{
	mutex_words_lock_threaded(m);
	mutex_skip_use(m);
	return 0;
}

/*
 * Adaptive mode, a default mutex whose words libelide takes: its own line
 * decides everything, and nothing of the thread's is looked at before the
 * compare-and-swap.  A skip left (mutex_skipping()): take it.  No record:
 * its compare-and-swap is the look and takes it as glibc would.  Otherwise
 * (tracked and not skipping: eliding, watched, or its skip just ran out;
 * or the CAS found it held) the slow path.  Its
 * bursts are the mutex's skips, never the thread's (grant_burst()), so the
 * thread's slots have nothing to say here.
 */
static _hot_path_ int mutex_lock_adaptive(pthread_mutex_t *m, void *callsite)
{
	static const struct wait_spec forever = { .how = WAIT_FOREVER };

	if (likely(own_mutex_words(m))) {
		/* Field by field, each load as wide as the store that wrote
		 * it: one load of bytes 16-23 waited for the skip's 2-byte
		 * store of the last acquisition to leave the store buffer
		 * (the counter at 2 threads fell from 0.92 to 0.73x plain). */
		if (unlikely(glibc_mutex_skip_load(m) != 0))
			return mutex_lock_skipping_own(m);
		if (unlikely(glibc_mutex_idx_load(m) != 0))
			return mutex_acquire_not_fast(m, &forever, callsite);
		if (unlikely(!mutex_words_take_word(m)))
			return mutex_acquire_not_fast(m, &forever, callsite);
		return mutex_words_note_holder(m);
	}
	return mutex_lock_tracking(m, callsite);
}

/*
 * Watching a default mutex: its compare-and-swap is the look.  A free lock
 * then costs one atomic instruction, as without libelide, and only a
 * failed one (the lock was held) goes to the out-of-line path; looking at
 * the word first would add a load that, on a contended line, waits for
 * the line once more before glibc's CAS fetches it for writing.
 */
static _hot_path_ int mutex_lock_observe(pthread_mutex_t *m, void *callsite)
{
	static const struct wait_spec forever = { .how = WAIT_FOREVER };

	if (unlikely(watch_tick()))
		return mutex_acquire_watched(m, &forever, callsite);
	if (likely(own_mutex_words(m))) {
		if (unlikely(!mutex_words_take_word(m)))
			return mutex_acquire_watched(m, &forever, callsite);
		return mutex_words_note_holder(m);
	}
	prefetch_for_write(m); /* glibc's CAS comes next */
	if (mutex_word(m) == 0)
		return real.mutex_lock(m);
	return mutex_acquire_watched(m, &forever, callsite);
}

static int (*mutex_lock_of_path(uint8_t path))(pthread_mutex_t *, void *)
{
	switch (path) {
	case PATH_WATCH:
		return mutex_lock_adaptive;
	case PATH_TRACK_ALL:
		return mutex_lock_tracking;
	case PATH_OBSERVE:
		return mutex_lock_observe;
	}
	return mutex_lock_off;
}

/* Both together: the path, read by most entry points, and the lock's; and
 * the own paths, which mode=off turns off: it forwards every call. */
static void set_path(uint8_t path)
{
	/* A process started with ELIDE=mode=off stays off whatever elided
	 * says (libelide(7)). */
	bool off = elide.opts.mode == ELIDE_MODE_OFF || elide.env_mode == ELIDE_MODE_OFF;

	__atomic_store_n(&elide.own_mutex_words, elide.own_mutex_allowed && !off, __ATOMIC_RELAXED);
	__atomic_store_n(&elide.own_rwlock_words, elide.own_rwlock_allowed && !off, __ATOMIC_RELAXED);
	__atomic_store_n(&elide.path, path, __ATOMIC_RELEASE);
	__atomic_store_n(&elide.mutex_lock, mutex_lock_of_path(path), __ATOMIC_RELEASE);
}

_public_ _hot_path_ int pthread_mutex_lock(pthread_mutex_t *m)
{
	int (*lock)(pthread_mutex_t *, void *) = __atomic_load_n(&elide.mutex_lock, __ATOMIC_RELAXED);

	return lock(m, __builtin_return_address(0));
}

/* A timed acquisition of a skipping mutex (mutex_skipping()). */
static __attribute__((noinline)) int mutex_acquire_skipping(pthread_mutex_t *m, const struct wait_spec *w)
{
	int r = real_mutex_acquire(m, w);

	if (r == 0)
		mutex_skip_use(m);
	return r;
}

_public_ int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
	struct wait_spec w = { .how = WAIT_TIMED, .abstime = abstime };

	if (elide.path == PATH_WATCH && mutex_skipping(m))
		return mutex_acquire_skipping(m, &w);
	if (likely(mutex_takes_fast_path(m)))
		return real_mutex_acquire(m, &w);
	return mutex_acquire_not_fast(m, &w, __builtin_return_address(0));
}

_public_ int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock, const struct timespec *abstime)
{
	struct wait_spec w = { .how = WAIT_CLOCK, .clock = clock, .abstime = abstime };

	if (elide.path == PATH_WATCH && mutex_skipping(m))
		return mutex_acquire_skipping(m, &w);
	if (likely(mutex_takes_fast_path(m)))
		return real_mutex_acquire(m, &w);
	return mutex_acquire_not_fast(m, &w, __builtin_return_address(0));
}

static __attribute__((noinline)) int mutex_unlock_maybe_elided(pthread_mutex_t *m)
{
	struct lock_rec *rec = elided_pop(m);

	if (!rec)
		return real_mutex_unlock(m);
	commit_elided(m, rec);
	return 0;
}

/* Its figures are written after the unlock: outside the section. */
static __attribute__((noinline)) int mutex_unlock_watched(pthread_mutex_t *m)
{
	uint64_t hold_end = watch_hold_end();
	int r;

	if (in_elided_section() && mutex_word(m) == 0)
		r = mutex_unlock_maybe_elided(m);
	else
		r = real_mutex_unlock(m);
	watch_flush(r == 0 ? hold_end : 0);
	return r;
}

_public_ _hot_path_ int pthread_mutex_unlock(pthread_mutex_t *m)
{
	/* Nothing elided by this thread (every non-RTM case, and every real
	 * hold of a thread outside elided sections), or held for real.  The
	 * thread's own depth first: reading the lock word would fetch a line
	 * that a waiter took away, and glibc's atomic then pays a second
	 * transfer. */
	if (unlikely(self.watch_lock == m))
		return mutex_unlock_watched(m);
	if (likely(!in_elided_section()) || likely(mutex_word(m) != 0))
		return real_mutex_unlock(m);
	return mutex_unlock_maybe_elided(m);
}

_public_ int pthread_mutex_trylock(pthread_mutex_t *m)
{
	/* POSIX: trylock of a mutex this thread holds must fail, and inside a
	 * transaction we cannot tell; so leave the transaction and redo the
	 * whole section with real locks. */
	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_TRYLOCK);
	return real_mutex_trylock(m);
}

_public_ int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
	struct lock_rec *rec;
	int r;

	r = real.mutex_init(m, attr);
	if (r != 0 || !elide.recs || !attr || elide.opts.force_normal)
		return r;
	/* A glibc that does not tag NORMAL in the kind (>= 2.43): the
	 * attribute says it.  glibc's initializer cleared our index, so this
	 * makes a fresh record; without room the lock simply stays untracked
	 * until contended, and is then elided like a default one (the table
	 * is full: documented in libelide(7)). */
	if (mutex_class(m) != MUTEX_ELIDABLE || !attr_is_normal(attr))
		return r;
	rec = registry_attach_own(m, mutex_idx_ptr(m), LOCK_KIND_MUTEX, __builtin_return_address(0), false, NULL);
	if (rec)
		rec_set_type_normal(rec);
	return r;
}

_public_ int pthread_mutex_destroy(pthread_mutex_t *m)
{
	bool skipping;
	int r;

	/* Destroying a lock we may hold elided: redo it with real locks so
	 * glibc can answer EBUSY. */
	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_DESTROY);
	skipping = mutex_skipping(m);
	r = real.mutex_destroy(m);
	/* glibc's bytes as glibc would leave them. */
	if (r == 0 && skipping)
		glibc_mutex_skip_store(m, 0);
	if (r == 0 && elide.recs)
		registry_detach(mutex_idx_ptr(m));
	return r;
}

_public_ int pthread_mutexattr_settype(pthread_mutexattr_t *attr, int type)
{
	int r = real.mutexattr_settype(attr, type);

	if (r == 0 && elide.recs) {
		if (attr_mark_normal(attr, type == PTHREAD_MUTEX_NORMAL) < 0)
			log_warning("too many mutex attributes typed PTHREAD_MUTEX_NORMAL at once; "
				    "mutexes made from further ones may be elided");
	}
	return r;
}

_public_ int pthread_mutexattr_destroy(pthread_mutexattr_t *attr)
{
	if (elide.recs)
		(void)attr_mark_normal(attr, false);
	return real.mutexattr_destroy(attr);
}

/* ---- rwlocks ---------------------------------------------------------- */

struct rw_call {
	enum elide_op op;
	enum mutex_wait how;
	clockid_t clock;
	const struct timespec *abstime;
};

static int real_rwlock_acquire(pthread_rwlock_t *rw, const struct rw_call *c)
{
	bool rd = c->op == OP_RDLOCK;

	switch (c->how) {
	case WAIT_TIMED:
		if (rd) {
			LAZY(rwlock_timedrdlock, "pthread_rwlock_timedrdlock");
			return real.rwlock_timedrdlock(rw, c->abstime);
		}
		LAZY(rwlock_timedwrlock, "pthread_rwlock_timedwrlock");
		return real.rwlock_timedwrlock(rw, c->abstime);
	case WAIT_CLOCK:
		if (rd) {
			LAZY(rwlock_clockrdlock, "pthread_rwlock_clockrdlock");
			return real.rwlock_clockrdlock(rw, c->clock, c->abstime);
		}
		LAZY(rwlock_clockwrlock, "pthread_rwlock_clockwrlock");
		return real.rwlock_clockwrlock(rw, c->clock, c->abstime);
	case WAIT_FOREVER:
		break;
	}
	return rd ? real_rwlock_rdlock(rw) : real.rwlock_wrlock(rw);
}

/*
 * Would this acquisition nest on an elided hold of the same rwlock that
 * glibc refuses?  A writer that locks again (for reading or writing) gets
 * EDEADLK from glibc, and so does a reader asking to write (a deadlock
 * there).  Inside the transaction nothing in the lock says we hold it, so
 * only the thread's elided set can tell.
 */
static bool rwlock_relock_refused(const pthread_rwlock_t *rw, enum elide_op op)
{
	for (unsigned i = 0; i < self.depth; i++) {
		if (self.held[i].lock != rw)
			continue;
		if (op == OP_WRLOCK || self.held[i].rec->kind == LOCK_KIND_RWLOCK_WRITE)
			return true;
	}
	return false;
}

static __attribute__((noinline)) int rwlock_acquire_slow(pthread_rwlock_t *rw, enum elide_op op, enum mutex_wait how,
							  clockid_t clock, const struct timespec *abstime,
							  void *callsite)
{
	const struct rw_call call = { .op = op, .how = how, .clock = clock, .abstime = abstime };
	const struct rw_call *c = &call;
	uint16_t *idx_ptr = rwlock_idx_ptr(rw, c->op == OP_WRLOCK);
	uint16_t idx = __atomic_load_n(idx_ptr, __ATOMIC_RELAXED);
	struct lock_rec *rec;

	/* glibc checks a deadline's clock and nanoseconds even for a free lock. */
	if (how != WAIT_FOREVER && (!wait_clock_valid(how == WAIT_CLOCK ? clock : CLOCK_REALTIME) ||
				    !abstime_valid(abstime)))
		return real_rwlock_acquire(rw, c);
	if (in_elided_section() && rwlock_relock_refused(rw, op))
		/* Redo the section with real locks, where glibc answers EDEADLK. */
		_xabort(ELIDE_XABORT_RELOCK);
	if (!rwlock_is_elidable(rw))
		return real_rwlock_acquire(rw, c);
	if (idx == 0) {
		if (in_elided_section())
			return real_rwlock_acquire(rw, c);
		rec = registry_attach(rw, idx_ptr, c->op == OP_WRLOCK ? LOCK_KIND_RWLOCK_WRITE : LOCK_KIND_RWLOCK_READ,
				      callsite);
		if (elide.opts.mode != ELIDE_MODE_ON)
			rec_note_contended(rec);
	} else {
		rec = rec_of_idx(idx);
	}
	if (tracked_acquire(rw, rec, c->op))
		return 0;
	if (rwlock_held_by_other(rw, c->op == OP_WRLOCK)) {
		/* A real wait: timed, as for mutexes. */
		bool counted = atomic_load_explicit(&rec->gate, memory_order_relaxed) == GATE_WATCH;
		uint64_t start = watch_now(), got;
		int r;

		if (counted)
			rec_note_contended(rec);
		r = real_rwlock_acquire(rw, c);
		got = watch_now();
		watch_note(rw, rec, r, true, !counted, got - start, false, got);
		return r;
	}
	if (atomic_load_explicit(&rec->gate, memory_order_relaxed) == GATE_WATCH && rwlock_in_use(rw))
		rec_note_contended(rec);
	return real_rwlock_acquire(rw, c);
}

/* PATH_OBSERVE, as mutex_acquire_watched(). */
static __attribute__((noinline)) int rwlock_acquire_watched(pthread_rwlock_t *rw, enum elide_op op, enum mutex_wait how,
							     clockid_t clock, const struct timespec *abstime,
							     void *callsite)
{
	const struct rw_call c = { .op = op, .how = how, .clock = clock, .abstime = abstime };
	bool sampled = watch_sampled(), write = op == OP_WRLOCK, held;
	uint16_t *idx_ptr = rwlock_idx_ptr(rw, write);
	uint16_t idx = __atomic_load_n(idx_ptr, __ATOMIC_RELAXED);
	struct lock_rec *rec;
	uint64_t start = 0, got;
	int r;

	if (how != WAIT_FOREVER && (!wait_clock_valid(how == WAIT_CLOCK ? clock : CLOCK_REALTIME) ||
				    !abstime_valid(abstime)))
		return real_rwlock_acquire(rw, &c);
	if (!rwlock_is_elidable(rw))
		return real_rwlock_acquire(rw, &c);
	held = rwlock_held_by_other(rw, write);
	if (!held && (!sampled || idx == 0))
		return real_rwlock_acquire(rw, &c);
	if (idx != 0)
		rec = rec_of_idx(idx);
	else if (!in_elided_section())
		rec = registry_attach(rw, idx_ptr, write ? LOCK_KIND_RWLOCK_WRITE : LOCK_KIND_RWLOCK_READ, callsite);
	else
		return real_rwlock_acquire(rw, &c);
	if (held)
		start = watch_now();
	r = real_rwlock_acquire(rw, &c);
	got = watch_now();
	watch_note(rw, rec, r, held, held, held ? got - start : 0, sampled, got);
	return r;
}

static inline int rwlock_acquire_not_fast(pthread_rwlock_t *rw, enum elide_op op, enum mutex_wait how,
					  clockid_t clock, const struct timespec *abstime, void *callsite)
{
	if (elide.path == PATH_OBSERVE)
		return rwlock_acquire_watched(rw, op, how, clock, abstime, callsite);
	return rwlock_acquire_slow(rw, op, how, clock, abstime, callsite);
}

/* As for mutexes; "in use" includes other readers, whose count bounces the
 * lock's cache line between CPUs: exactly what read elision removes. */
static inline __attribute__((always_inline)) bool rwlock_takes_fast_path(pthread_rwlock_t *rw, bool write)
{
	uint8_t path = elide.path;
	struct lock_local *slot;

	if (likely(path == PATH_OFF)) {
		poll_control_off();
		return true;
	}
	if (path == PATH_OBSERVE) {
		if (watch_tick())
			return false;
		prefetch_for_write(&rw->__data.__readers); /* glibc's atomic add comes next */
		return !rwlock_would_wait(rwlock_readers(rw), write);
	}
	/* Bursts: a lock not elided now, or this thread's skip after a
	 * throttled attempt (THROTTLED_SKIP). */
	slot = local_slot(rw, write);
	if (takes_burst(rw, write, slot))
		return true;
	if (path == PATH_TRACK_ALL) {
		prefetch_if_failing(rw, write, slot);
		return false;
	}
	prefetch_unless_eliding(rw, write, slot); /* as for mutexes: glibc's atomic add comes next */
	return __atomic_load_n(rwlock_idx_ptr(rw, write), __ATOMIC_RELAXED) == 0 && !rwlock_in_use(rw);
}

_public_ _hot_path_ int pthread_rwlock_rdlock(pthread_rwlock_t *rw)
{
	if (likely(rwlock_takes_fast_path(rw, false)))
		return real_rwlock_rdlock(rw);
	return rwlock_acquire_not_fast(rw, OP_RDLOCK, WAIT_FOREVER, 0, NULL, __builtin_return_address(0));
}

_public_ _hot_path_ int pthread_rwlock_wrlock(pthread_rwlock_t *rw)
{
	if (likely(rwlock_takes_fast_path(rw, true)))
		return real.rwlock_wrlock(rw);
	return rwlock_acquire_not_fast(rw, OP_WRLOCK, WAIT_FOREVER, 0, NULL, __builtin_return_address(0));
}

_public_ int pthread_rwlock_timedrdlock(pthread_rwlock_t *rw, const struct timespec *abstime)
{
	if (likely(rwlock_takes_fast_path(rw, false))) {
		LAZY(rwlock_timedrdlock, "pthread_rwlock_timedrdlock");
		return real.rwlock_timedrdlock(rw, abstime);
	}
	return rwlock_acquire_not_fast(rw, OP_RDLOCK, WAIT_TIMED, 0, abstime, __builtin_return_address(0));
}

_public_ int pthread_rwlock_clockrdlock(pthread_rwlock_t *rw, clockid_t clock, const struct timespec *abstime)
{
	if (likely(rwlock_takes_fast_path(rw, false))) {
		LAZY(rwlock_clockrdlock, "pthread_rwlock_clockrdlock");
		return real.rwlock_clockrdlock(rw, clock, abstime);
	}
	return rwlock_acquire_not_fast(rw, OP_RDLOCK, WAIT_CLOCK, clock, abstime, __builtin_return_address(0));
}

_public_ int pthread_rwlock_timedwrlock(pthread_rwlock_t *rw, const struct timespec *abstime)
{
	if (likely(rwlock_takes_fast_path(rw, true))) {
		LAZY(rwlock_timedwrlock, "pthread_rwlock_timedwrlock");
		return real.rwlock_timedwrlock(rw, abstime);
	}
	return rwlock_acquire_not_fast(rw, OP_WRLOCK, WAIT_TIMED, 0, abstime, __builtin_return_address(0));
}

_public_ int pthread_rwlock_clockwrlock(pthread_rwlock_t *rw, clockid_t clock, const struct timespec *abstime)
{
	if (likely(rwlock_takes_fast_path(rw, true))) {
		LAZY(rwlock_clockwrlock, "pthread_rwlock_clockwrlock");
		return real.rwlock_clockwrlock(rw, clock, abstime);
	}
	return rwlock_acquire_not_fast(rw, OP_WRLOCK, WAIT_CLOCK, clock, abstime, __builtin_return_address(0));
}

_public_ int pthread_rwlock_tryrdlock(pthread_rwlock_t *rw)
{
	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_TRYLOCK);
	return real.rwlock_tryrdlock(rw);
}

_public_ int pthread_rwlock_trywrlock(pthread_rwlock_t *rw)
{
	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_TRYLOCK);
	return real.rwlock_trywrlock(rw);
}

static __attribute__((noinline)) int rwlock_unlock_maybe_elided(pthread_rwlock_t *rw)
{
	struct lock_rec *rec = elided_pop(rw);

	if (!rec)
		return real_rwlock_unlock(rw);
	commit_elided(rw, rec);
	return 0;
}

static __attribute__((noinline)) int rwlock_unlock_watched(pthread_rwlock_t *rw)
{
	uint64_t hold_end = watch_hold_end();
	int r = in_elided_section() ? rwlock_unlock_maybe_elided(rw) : real_rwlock_unlock(rw);

	watch_flush(r == 0 ? hold_end : 0);
	return r;
}

_public_ _hot_path_ int pthread_rwlock_unlock(pthread_rwlock_t *rw)
{
	/* A reader count cannot tell our elided read from a real one: only the
	 * thread's own elided set can. */
	if (unlikely(self.watch_lock == rw))
		return rwlock_unlock_watched(rw);
	if (likely(!in_elided_section()))
		return real_rwlock_unlock(rw);
	return rwlock_unlock_maybe_elided(rw);
}

_public_ int pthread_rwlock_init(pthread_rwlock_t *rw, const pthread_rwlockattr_t *attr)
{
	return real.rwlock_init(rw, attr);
}

_public_ int pthread_rwlock_destroy(pthread_rwlock_t *rw)
{
	int r;

	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_DESTROY);
	r = real.rwlock_destroy(rw);
	if (r == 0 && elide.recs) {
		registry_detach(rwlock_idx_ptr(rw, false));
		registry_detach(rwlock_idx_ptr(rw, true));
	}
	return r;
}

/* ---- condition variables ---------------------------------------------- */

/*
 * glibc unlocks and relocks the mutex through internal calls we cannot see,
 * so an elided mutex must become a real one first: abort, and the section
 * re-runs with the lock held for real.
 */
static inline void leave_elision_for_cond(const pthread_mutex_t *m)
{
	if (unlikely(in_elided_section()))
		_xabort(ELIDE_XABORT_COND);
	/* A sampled hold ends where the wait gives the mutex up. */
	if (unlikely(self.watch_lock == m))
		watch_flush(watch_hold_end());
}

/*
 * glibc has two condvars: the current one (symbol version GLIBC_2.3.2) and
 * the one binaries linked before 2.3.2 still call (GLIBC_2.2.5), which
 * takes a different pthread_cond_t.  Each version here forwards to its
 * own (libelide.sym): an unversioned definition would catch the old
 * binaries' calls too and hand their condvars to the new functions.
 */
int elide_cond_wait_2_3_2(pthread_cond_t *c, pthread_mutex_t *m);
int elide_cond_timedwait_2_3_2(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime);
int elide_cond_wait_2_2_5(pthread_cond_t *c, pthread_mutex_t *m);
int elide_cond_timedwait_2_2_5(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime);

_public_ int elide_cond_wait_2_3_2(pthread_cond_t *c, pthread_mutex_t *m)
{
	leave_elision_for_cond(m);
	LAZY(cond_wait, "pthread_cond_wait");
	return real.cond_wait(c, m);
}
__asm__(".symver elide_cond_wait_2_3_2, pthread_cond_wait@@GLIBC_2.3.2");

_public_ int elide_cond_timedwait_2_3_2(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime)
{
	leave_elision_for_cond(m);
	LAZY(cond_timedwait, "pthread_cond_timedwait");
	return real.cond_timedwait(c, m, abstime);
}
__asm__(".symver elide_cond_timedwait_2_3_2, pthread_cond_timedwait@@GLIBC_2.3.2");

_public_ int elide_cond_wait_2_2_5(pthread_cond_t *c, pthread_mutex_t *m)
{
	leave_elision_for_cond(m);
	LAZY_EXACT(cond_wait_2_2_5, "pthread_cond_wait", "GLIBC_2.2.5");
	return real.cond_wait_2_2_5(c, m);
}
__asm__(".symver elide_cond_wait_2_2_5, pthread_cond_wait@GLIBC_2.2.5");

_public_ int elide_cond_timedwait_2_2_5(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime)
{
	leave_elision_for_cond(m);
	LAZY_EXACT(cond_timedwait_2_2_5, "pthread_cond_timedwait", "GLIBC_2.2.5");
	return real.cond_timedwait_2_2_5(c, m, abstime);
}
__asm__(".symver elide_cond_timedwait_2_2_5, pthread_cond_timedwait@GLIBC_2.2.5");

_public_ int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
				    const struct timespec *abstime)
{
	leave_elision_for_cond(m);
	LAZY(cond_clockwait, "pthread_cond_clockwait");
	return real.cond_clockwait(c, m, clock, abstime);
}

/* ---- elide.h ---------------------------------------------------------- */

static int annotate(struct lock_rec *rec, int policy, const char *name)
{
	if (name) {
		struct elide_seg_lock *e = rec_entry(rec);

		strncpy(e->name, name, sizeof(e->name) - 1);
		e->name[sizeof(e->name) - 1] = '\0';
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		rec_touch(rec);
	}
	if (policy != ELIDE_POLICY_KEEP)
		rec_set_policy(rec, policy);
	return 0;
}

static bool policy_valid(int policy)
{
	return policy == ELIDE_POLICY_KEEP || policy == ELIDE_POLICY_ADAPTIVE ||
	       policy == ELIDE_POLICY_ALWAYS || policy == ELIDE_POLICY_NEVER;
}

_public_ int __elide_mutex_annotate(pthread_mutex_t *m, int policy, const char *name)
{
	enum mutex_class class;
	struct lock_rec *rec;
	bool created;

	if (!m || !policy_valid(policy))
		return -EINVAL;
	class = mutex_class(m);
	if (policy != ELIDE_POLICY_KEEP && class == MUTEX_UNELIDABLE)
		return -EINVAL;
	if (!elide.recs)
		return -ENOMEM;
	/* Never the shared overflow record: its gate is not this lock's to
	 * follow (a recursive lock would be elided with it). */
	rec = registry_attach_own(m, mutex_idx_ptr(m), LOCK_KIND_MUTEX, __builtin_return_address(0),
				  class == MUTEX_ELIDABLE, &created);
	if (!rec)
		return -ENOSPC;
	/* A name on a recursive (or robust, ...) mutex: tracked, never elided. */
	if (class == MUTEX_UNELIDABLE)
		rec_set_type_unelidable(rec);
	else if (class == MUTEX_NORMAL_TYPED && created)
		rec_set_type_normal(rec);
	return annotate(rec, policy, name);
}

_public_ int __elide_rwlock_annotate(pthread_rwlock_t *rw, int policy, const char *name)
{
	struct lock_rec *rec;
	bool elidable;

	if (!rw || !policy_valid(policy))
		return -EINVAL;
	elidable = rwlock_is_elidable(rw);
	if (policy != ELIDE_POLICY_KEEP && !elidable)
		return -EINVAL;
	if (!elide.recs)
		return -ENOMEM;
	/* Both sides of the lock get the policy and the name. */
	for (int write = 0; write <= 1; write++) {
		rec = registry_attach_own(rw, rwlock_idx_ptr(rw, write),
					  write ? LOCK_KIND_RWLOCK_WRITE : LOCK_KIND_RWLOCK_READ,
					  __builtin_return_address(0), elidable, NULL);
		if (!rec)
			return -ENOSPC;
		if (!elidable)
			rec_set_type_unelidable(rec);
		annotate(rec, policy, name);
	}
	return 0;
}

_public_ int __elide_active(void)
{
	/* elided may have switched the process off since start-up. */
	return elide.enabled && elide.opts.mode != ELIDE_MODE_OFF ? 1 : 0;
}

/* ---- the time-stamp counter ------------------------------------------ */

/*
 * A program may disable the TSC for a thread: prctl(PR_SET_TSC,
 * PR_TSC_SIGSEGV), or seccomp's strict mode, which does it too.  RDTSC then
 * raises SIGSEGV in that thread and the threads it creates, and glibc's
 * lock paths never read the TSC, so libelide must not either.  These two
 * entries of the system call interface are watched: from the first
 * request on, before it is made, no thread of the process reads the TSC
 * (the threads a disabled one creates inherit the state, so a per-thread
 * flag would need to follow thread creation).  Everything is then counted
 * as before, only waits and holds are not timed.  A program that makes the
 * system call with an instruction of its own goes unseen (libelide-semantics(7)).
 */
static void note_tsc_request(long option, unsigned long arg)
{
	if ((option == PR_SET_TSC && arg != PR_TSC_ENABLE) ||
	    (option == PR_SET_SECCOMP && arg == SECCOMP_MODE_STRICT))
		__atomic_store_n(&elide.tsc_disabled, true, __ATOMIC_SEQ_CST);
	/* The same way, a seccomp filter: lock calls make no system call of
	 * libelide's own from then on (a filter may kill the process for
	 * one), before the filter is in place. */
	if (option == PR_SET_SECCOMP)
		__atomic_store_n(&elide.sandboxed, true, __ATOMIC_SEQ_CST);
}

/* A process started with the TSC disabled, or under a seccomp filter:
 * both survive execve. */
static void sandbox_check_inherited(void)
{
	int state = PR_TSC_ENABLE;
	int saved_errno = errno;

	if (prctl(PR_GET_TSC, &state, 0, 0, 0) == 0 && state != PR_TSC_ENABLE)
		elide.tsc_disabled = true;
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) > 0)
		elide.sandboxed = true;
	errno = saved_errno;
}

/* A raw system call, for a call that arrives while dlsym() runs (an
 * allocator's): there is nothing to forward it to yet.  glibc's result
 * convention. */
static long raw_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	if ((unsigned long)ret > -4096UL) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

static void *resolve_next(void **cache, const char *name)
{
	void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);

	if (likely(fn) || resolving)
		return fn;
	fn = resolve(name, NULL, false);
	__atomic_store_n(cache, fn, __ATOMIC_RELEASE);
	return fn;
}

/* glibc's prctl() and syscall() read their further arguments whether the
 * call has them or not: so does the forwarding. */
_public_ int prctl(int option, ...)
{
	static void *next;
	int (*fn)(int, unsigned long, unsigned long, unsigned long, unsigned long);
	unsigned long a2, a3, a4, a5;
	va_list ap;

	va_start(ap, option);
	a2 = va_arg(ap, unsigned long);
	a3 = va_arg(ap, unsigned long);
	a4 = va_arg(ap, unsigned long);
	a5 = va_arg(ap, unsigned long);
	va_end(ap);
	note_tsc_request(option, a2);
	fn = resolve_next(&next, "prctl");
	if (!fn)
		return (int)raw_syscall6(SYS_prctl, option, (long)a2, (long)a3, (long)a4, (long)a5, 0);
	return fn(option, a2, a3, a4, a5);
}

_public_ long syscall(long number, ...)
{
	static void *next;
	long (*fn)(long, long, long, long, long, long, long);
	long a1, a2, a3, a4, a5, a6;
	va_list ap;

	va_start(ap, number);
	a1 = va_arg(ap, long);
	a2 = va_arg(ap, long);
	a3 = va_arg(ap, long);
	a4 = va_arg(ap, long);
	a5 = va_arg(ap, long);
	a6 = va_arg(ap, long);
	va_end(ap);
	if (number == SYS_prctl)
		note_tsc_request(a1, (unsigned long)a2);
	else if (number == SYS_seccomp && (a1 == SECCOMP_SET_MODE_STRICT || a1 == SECCOMP_SET_MODE_FILTER))
		note_tsc_request(PR_SET_SECCOMP, a1 == SECCOMP_SET_MODE_STRICT ? SECCOMP_MODE_STRICT : SECCOMP_MODE_FILTER);
	fn = resolve_next(&next, "syscall");
	if (!fn)
		return raw_syscall6(number, a1, a2, a3, a4, a5, a6);
	return fn(number, a1, a2, a3, a4, a5, a6);
}

/* clock_gettime() that never reads a disabled TSC (the vDSO would): the
 * system call then.  Only where system calls are made anyway. */
void elide_clock_gettime(clockid_t clock, struct timespec *ts)
{
	if (likely(elide_tsc_usable()))
		clock_gettime(clock, ts);
	else
		raw_syscall6(SYS_clock_gettime, clock, (long)ts, 0, 0, 0, 0);
}

/* ---- start-up and exit ------------------------------------------------ */

static void on_bad_option(const char *pair, size_t len, const char *why, void *userdata)
{
	log_warning("ELIDE: invalid option '%.*s': %s; ignored", (int)len, pair, why);
}

static void atfork_child(void)
{
	int saved_errno = errno;

	self.tid = 0; /* the child's thread has an id of its own */
	/* The parent's figures are the parent's. */
	self.watch_lock = NULL;
	self.watch = (struct watch_pending){ 0 };
	self.waits = (struct watch_waits){ 0 };
	segment_fork_child();
	errno = saved_errno; /* fork() returns 0 with the program's errno */
}

/*
 * _Fork() (glibc >= 2.34) makes a child without running the pthread_atfork
 * handlers, so atfork_child() runs here: without it the child's thread
 * would write its parent's thread id into the mutexes it takes and its
 * counts into its parent's segment.  As async-signal-safe as _Fork()
 * itself once libelide is initialised: atfork_child() resets this
 * thread's state and remaps memory, it neither allocates nor locks.
 */
_public_ pid_t _Fork(void)
{
	pid_t (*next)(void) = __atomic_load_n(&real.fork_without_handlers, __ATOMIC_ACQUIRE);
	pid_t pid;

	if (!next) {
		/* Called before our constructor (another library's), or a glibc
		 * without _Fork() that a program cannot have linked against. */
		next = (pid_t(*)(void))resolve("_Fork", NULL, false);
		if (!next) {
			errno = ENOSYS;
			return -1;
		}
	}
	pid = next();
	if (pid == 0)
		atfork_child();
	return pid;
}

/*
 * Test hook for machines without RTM: ELIDE_SIM_ABORT=STATUS makes every
 * transaction "abort" with that _xbegin() status before it starts, so the
 * whole contention / abort / back-off / fallback machinery runs for real.
 * Never honoured where RTM works, and never for setuid programs.
 */
static void setup_sim_abort(void)
{
	static char reason[96];
	const char *v = secure_getenv("ELIDE_SIM_ABORT");
	unsigned long status;
	char *end;

	if (!v || elide.hw.rtm_usable)
		return;
	errno = 0;
	status = strtoul(v, &end, 0);
	if (errno || end == v || *end || status == _XBEGIN_STARTED || status > UINT32_MAX) {
		log_warning("ELIDE_SIM_ABORT: invalid abort status '%s'; ignored", v);
		return;
	}
	elide.sim_abort = true;
	elide.sim_abort_status = (uint32_t)status;
	snprintf(reason, sizeof(reason), "simulated: every transaction aborts with status 0x%lx (ELIDE_SIM_ABORT)",
		 status);
	elide.hw.reason = reason;
}

/*
 * Where glibc keeps a thread's id in its descriptor: glibc describes it for
 * debuggers (libthread_db) as {bits, count, offset} in
 * _thread_db_pthread_tid, in libc since 2.34 and libpthread before.  Used
 * only when it holds this thread's id.  NULL, or why not.
 */
static const char *thread_id_why;

/* Whether glibc elides its own mutexes: opt-in with the tunable up to
 * 2.42; 2.43 removed elision, and its tunables with it (a
 * glibc.elision.enable=1 left in GLIBC_TUNABLES then does nothing). */
static bool glibc_elides(void)
{
	unsigned major, minor;

	if (!elide_glibc_elision_enabled(secure_getenv("GLIBC_TUNABLES")))
		return false;
	if (glibc_parse_version(gnu_get_libc_version(), &major, &minor) < 0)
		return true; /* cannot tell: as if it did */
	return major < 2 || (major == 2 && minor < 43);
}

static const char *find_thread_id(void)
{
	const uint32_t *desc;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	resolving = true;
	desc = dlvsym(RTLD_DEFAULT, "_thread_db_pthread_tid", "GLIBC_PRIVATE");
	resolving = false;
	if (!desc)
		return "glibc does not describe its thread descriptor (_thread_db_pthread_tid)";
	if (desc[0] != 8 * sizeof(pid_t) || desc[1] != 1 || desc[2] == 0 || desc[2] > 65536)
		return "glibc describes the thread id in its descriptor in an unknown way";
	if (*(const pid_t *)((const char *)pthread_self() + desc[2]) != tid)
		return "the thread id is not where glibc says it is";
	elide.pthread_tid_offset = desc[2];
	return NULL;
}

/* glibc's functions that the probes in glibc-check.c run. */
static struct glibc_lock_fns real_lock_fns(void)
{
	return (struct glibc_lock_fns){
		.mutex_init = real.mutex_init, .mutex_destroy = real.mutex_destroy,
		.mutex_lock = real.mutex_lock, .mutex_trylock = real.mutex_trylock,
		.mutex_unlock = real.mutex_unlock, .mutexattr_settype = real.mutexattr_settype,
		.mutexattr_destroy = real.mutexattr_destroy, .rwlock_init = real.rwlock_init,
		.rwlock_destroy = real.rwlock_destroy, .rwlock_rdlock = real.rwlock_rdlock,
		.rwlock_trywrlock = real.rwlock_trywrlock, .rwlock_wrlock = real.rwlock_wrlock,
		.rwlock_unlock = real.rwlock_unlock,
	};
}

/* Why default mutexes' words stay glibc's to write, or NULL when libelide
 * takes and gives them itself ("a default mutex's words" above).  In every
 * mode, pass-through included: it is what libelide's real acquisitions cost. */
static const char *own_mutex_words_refused(void)
{
	const struct glibc_lock_fns fns = real_lock_fns();
	unsigned major, minor;
	const char *why;

	if (!elide.opts.own_mutex)
		return "own_mutex=0";
	if (thread_id_why)
		return thread_id_why;
	if (glibc_elides())
		return "glibc's own elision is enabled (GLIBC_TUNABLES)";
	if (real.mutex_lock != __pthread_mutex_lock || real.mutex_trylock != __pthread_mutex_trylock ||
	    real.mutex_unlock != __pthread_mutex_unlock)
		return "another library interposes the mutex functions after libelide";
	why = glibc_version_reason(gnu_get_libc_version(), &major, &minor);
	if (why)
		return why;
	return glibc_check_default_mutex(&fns, thread_tid());
}

/* The same for the read side of default rwlocks ("the read side of a
 * default rwlock" above). */
static const char *own_rwlock_words_refused(void)
{
	const struct glibc_lock_fns fns = real_lock_fns();
	unsigned major, minor;
	const char *why;

	if (!elide.opts.own_rwlock)
		return "own_rwlock=0";
	if (thread_id_why)
		return thread_id_why;
	if (glibc_elides())
		return "glibc's own elision is enabled (GLIBC_TUNABLES)";
	if (real.rwlock_rdlock != __pthread_rwlock_rdlock || real.rwlock_unlock != __pthread_rwlock_unlock)
		return "another library interposes the rwlock functions after libelide";
	why = glibc_version_reason(gnu_get_libc_version(), &major, &minor);
	if (why)
		return why;
	return glibc_check_default_rwlock(&fns, thread_tid());
}

/* What in glibc, its tunables or our table stops libelide using the
 * locks' bytes, or NULL. */
static const char *glibc_refusal(void)
{
	if (glibc_elides())
		return "GLIBC_TUNABLES enables glibc's own elision (glibc.elision.enable=1); "
		       "passing through to avoid eliding twice";
	/* After the tunables check: glibc's elision would write the probed bytes.
	 * The probe runs what every pass-through runs (resolved by now). */
	const struct glibc_lock_fns fns = real_lock_fns();
	const char *glibc_why = glibc_check(&glibc_facts, &fns);
	if (glibc_why)
		return glibc_why;
	if (!elide.recs)
		return "could not allocate the lock table";
	return NULL;
}

/*
 * Why libelide cannot elide here, or NULL.  *watch_instead: the only reason
 * is the hardware, so locks can still be watched (opts.watch): the same
 * records in the same bytes of the locks, with no transaction.
 */
static const char *decide_disabled_reason(bool *watch_instead)
{
	static char reason[320];
	const char *why;

	*watch_instead = false;
	if (elide.opts.mode == ELIDE_MODE_OFF)
		return "mode=off";
	why = glibc_refusal();
	if (!elide.hw.rtm_usable && !elide.sim_abort) {
		/* The hardware is the reason given; the others decide whether
		 * locks can be watched, and are said when they stop it. */
		*watch_instead = elide.opts.watch && !why;
		if (elide.opts.watch && why)
			snprintf(reason, sizeof(reason), "no usable RTM: %s; not watching either: %s", elide.hw.reason,
				 why);
		else
			snprintf(reason, sizeof(reason), "no usable RTM: %s", elide.hw.reason);
		return reason;
	}
	return why;
}

/* The fast path for a mode.  mode=off is the pass-through whatever the
 * hardware: the administrator's kill switch. */
static uint8_t path_of_mode(enum elide_mode mode)
{
	if (mode == ELIDE_MODE_OFF)
		return PATH_OFF;
	if (!elide.enabled)
		return elide.watch_instead ? PATH_OBSERVE : PATH_OFF;
	switch (mode) {
	case ELIDE_MODE_ON:
		return PATH_TRACK_ALL;
	case ELIDE_MODE_WATCH:
		return PATH_OBSERVE;
	case ELIDE_MODE_ADAPTIVE:
	case ELIDE_MODE_OFF:
		break;
	}
	return PATH_WATCH;
}

/*
 * A mode pushed by elided.  "off" is the pass-through (path_of_mode()),
 * which still looks for the next decision on every acquisition
 * (poll_control_off()).
 */
void elide_set_mode(enum elide_mode mode)
{
	/* ELIDE=mode=off: the program's own kill switch outranks elided's. */
	if (elide.env_mode == ELIDE_MODE_OFF)
		return;
	elide.opts.mode = mode;
	set_path(path_of_mode(mode));
	registry_apply_mode();
}

__attribute__((constructor(101))) static void elide_init(void)
{
	/* C: errno is zero at program start-up, whatever we called. */
	int saved_errno = errno;
	const char *own_words_why, *own_rwlock_why;
	int r;

	log_set_prefix("libelide");
	elide_options_defaults(&elide.opts);
	elide_options_parse(&elide.opts, secure_getenv("ELIDE"), on_bad_option, NULL);
	/* stats=0: the sample counter never comes round, so commits go uncounted. */
	elide.sample_mask = elide.opts.stats ? elide.opts.sample - 1 : UINT32_MAX;
	elide.env_mode = elide.opts.mode;
	sandbox_check_inherited();
	elide_hw_detect(&elide.hw);
	setup_sim_abort();
	watch_clock_init();
	resolve_all();
	thread_id_why = find_thread_id();
	/* The definition everyone uses: a program linked against it holds a
	 * copy that glibc then writes, so not RTLD_NEXT.  Absent before 2.32. */
	resolving = true;
	elide.single_threaded = dlsym(RTLD_DEFAULT, "__libc_single_threaded");
	resolving = false;
	own_words_why = own_mutex_words_refused();
	elide.own_mutex_allowed = own_words_why == NULL;
	own_rwlock_why = own_rwlock_words_refused();
	elide.own_rwlock_allowed = own_rwlock_why == NULL;
	r = registry_init();
	if (r < 0)
		log_warning_errno(r, "cannot map the lock table (%u records); statistics off",
				  elide.opts.max_locks);
	segment_init();
	pthread_atfork(NULL, NULL, atfork_child);
	elide.disabled_reason = decide_disabled_reason(&elide.watch_instead);
	if (elide.opts.verbose) {
		if (elide.disabled_reason && elide.watch_instead)
			log_info("not eliding (%s); watching contended locks", elide.disabled_reason);
		else if (elide.disabled_reason)
			log_info("passing all locks through to glibc: %s", elide.disabled_reason);
		else if (elide.opts.mode == ELIDE_MODE_WATCH)
			log_info("watching contended locks, no transactions (mode=watch; %s)", elide.hw.reason);
		else
			log_info("eliding with RTM, mode=%s (%s)", elide_mode_to_string(elide.opts.mode),
				 elide.hw.reason);
	}
	elide.enabled = elide.disabled_reason == NULL;
	set_path(path_of_mode(elide.opts.mode));
	/* Before any lock of the program's is contended: its learned verdicts. */
	learn_init(segment_runtime_dir());
	if (elide.opts.verbose) {
		/* mode=off: the kill switch turns the own paths off too (set_path()). */
		if (!own_words_why && !elide.own_mutex_words)
			own_words_why = "mode=off";
		if (!own_rwlock_why && !elide.own_rwlock_words)
			own_rwlock_why = "mode=off";
		if (own_words_why)
			log_info("default mutexes are locked by glibc's functions: %s", own_words_why);
		else
			log_info("default mutexes are locked by libelide with glibc's protocol");
		if (own_rwlock_why)
			log_info("rwlocks are read-locked by glibc's functions: %s", own_rwlock_why);
		else
			log_info("free rwlocks are read-locked by libelide with glibc's protocol");
		if (!elide_tsc_usable())
			log_info("the time-stamp counter is disabled: waits and holds are counted, not timed");
	}
	segment_publish_status();
	errno = saved_errno;
}

/*
 * report=1: on standard error (which programs such as xz and sort close
 * before they exit: the report is then lost, EBADF); report=PATH: appended
 * to that file, opened now with the process's own rights and closed again.
 */
static void report_at_exit(void)
{
	int fd;

	if (!elide.opts.report_path[0]) {
		report_print(STDERR_FILENO);
		return;
	}
	fd = open(elide.opts.report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0666);
	if (fd < 0) {
		log_warning_errno(-errno, "report=%s: cannot open", elide.opts.report_path);
		return;
	}
	report_print(fd);
	close(fd);
}

__attribute__((destructor)) static void elide_fini(void)
{
	int saved_errno = errno;

	if (elide.opts.report)
		report_at_exit();
	watch_waits_flush();
	learn_fini(segment_runtime_dir());
	segment_fini();
	errno = saved_errno;
}
