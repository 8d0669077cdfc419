/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * abort-regime: a contended workload whose every transaction aborts, judged
 * by libelide's own counters (never by time).  Run by test-abort-regime.sh
 * under LD_PRELOAD=libelide.so, with ELIDE_SIM_ABORT=<status> where RTM is
 * missing, or with real RTM and --section syscall (a getppid() inside every
 * section makes every real transaction abort too).
 *
 *   abort-regime [--threads N] [--iterations N]
 *                [--lock mutex|rwlock-write|rwlock-read-90-10]
 *                [--section counter|syscall] [--policy never | --hint never]
 *   abort-regime --regime     print "simulated" or "rtm", or exit 77 with
 *                             the reason libelide is not eliding
 *
 * Threads hammer one global lock for a fixed number of iterations each.
 * Afterwards the program checks that no update was lost, reads its own
 * segment (<pid>-<starttime>.seg in ELIDE_RUNTIME_DIR), finds the lock's
 * entry (entries, for an rwlock: read and write side) by address, prints
 * the counters and asserts on them:
 *
 *   adaptive:  the lock backs off and stays backed off: few transactions,
 *              most acquisitions skipped, every acquisition counted;
 *   mode=on:   the lock never backs off: after a thread's first two
 *              acquisitions (which may retry), each failed one makes one
 *              attempt and sends the thread's next 3 straight to the lock
 *              (skipped, as glibc's elision does); every other acquisition
 *              a fallback.
 *
 * Before the workers start (adaptive mode), helper threads block on the lock
 * while the main thread holds it, one at a time, until libelide has seen the
 * lock contended often enough to elide it: from the first worker acquisition
 * on, the lock is eliding, whatever the scheduler does.
 *
 * --policy never annotates the lock never (elide.h).  --hint never does
 * what elided does for a program it knows (issue 16): before the lock is
 * first contended it writes a "never" verdict for the lock's address into
 * the control block's hint table; then one helper blocks on the lock (each
 * side) so that libelide makes its record.  Either way the lock must make no
 * transaction attempt at all, and count every acquisition; with the hint
 * its entry must read ctl_policy never, ctl_source learned.
 *
 * Exit status: 0 passed, 1 failed (one line per failed check, naming the
 * counter and the values), 2 usage, 77 nothing to test here.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elide.h"
#include "own-segment.h"

#define MAX_THREADS 64

/* libelide's defaults, which test-abort-regime.sh leaves alone. */
#define LIB_RETRIES 3           /* retries= */
#define LIB_BUSY_RETRIES 3      /* busy_retries= */
#define LIB_SKIP 16             /* skip= */
#define LIB_SKIP_MAX 65536      /* skip_max= */
#define LIB_SAMPLE 64           /* sample=: real acquisitions counted 1 in 64 */
/* libelide/hotpath.h BURST_MAX: a lock that is not elided now sends up to
 * this many of a thread's acquisitions straight to glibc, counted when the
 * burst is granted (so counts may run ahead by less than that per thread;
 * bursts grow from 64 to this while they come back within a millisecond). */
#define LIB_BURST_MAX 4096
/* libelide/glibc-abi.h, mutex.c: a default mutex that libelide locks
 * itself keeps its burst in the mutex instead, one for all threads, in the
 * two bytes glibc names __spins (GLIBC_MUTEX_SKIP_OFFSET), up to
 * BURST_MUTEX_MAX_SHIFT = 32768; counted when it starts, so the count runs
 * ahead by exactly what is left of it. */
#define LIB_MUTEX_SKIP_OFFSET 20
#define LIB_MUTEX_SKIP_MAX 32768
/* libelide/hotpath.h, elision.c: after STREAK_THROTTLE failed acquisitions in a row a
 * thread makes one attempt per acquisition, counted 1 in THROTTLED_SAMPLE;
 * after STREAK_BACK_OFF an adaptive lock backs off. */
#define LIB_STREAK_THROTTLE 2
#define LIB_STREAK_BACK_OFF 6
#define LIB_THROTTLED_SAMPLE 64
/* ...and, for a lock that does not adapt (mode=on), skips the thread's next
 * THROTTLED_SKIP acquisitions after each throttled one. */
#define LIB_THROTTLED_SKIP 3

#define die(...) do { \
		fflush(stdout); \
		fprintf(stderr, "abort-regime: " __VA_ARGS__); \
		fputc('\n', stderr); \
		_exit(1); \
	} while (0)

enum lock_kind { LOCK_MUTEX, LOCK_RWLOCK_WRITE, LOCK_RWLOCK_READ_90_10 };
enum regime { REGIME_SIMULATED, REGIME_RTM };

static struct {
	unsigned threads;
	unsigned long iterations;
	enum lock_kind lock;
	bool syscall_section;
	bool policy_never;      /* --policy never: the lock is annotated never */
	bool hint_never;        /* --hint never: a learned "never" in the control block */
	bool relock;            /* --relock: relocks of an rwlock held elided for writing */
} opt = { .threads = 2, .iterations = 200000, .lock = LOCK_MUTEX };

static const char *const lock_names[] = { "mutex", "rwlock-write", "rwlock-read-90-10" };

/* ---- the workload ----------------------------------------------------- */

static pthread_mutex_t the_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t the_rwlock = PTHREAD_RWLOCK_INITIALIZER;
/* Written under the lock (write side) only; readers check a == b. */
static unsigned long counter_a, counter_b;
static pthread_barrier_t start_line;

struct worker {
	pthread_t tid;
	unsigned id;
	unsigned long reads, writes, torn;
};

static inline void section_write(void)
{
	if (opt.syscall_section)
		(void)getppid();
	counter_a++;
	counter_b++;
}

static inline bool section_read(void)
{
	if (opt.syscall_section)
		(void)getppid();
	return counter_a == counter_b;
}

static void lock_exclusive(void)
{
	int r = opt.lock == LOCK_MUTEX ? pthread_mutex_lock(&the_mutex) : pthread_rwlock_wrlock(&the_rwlock);

	if (r)
		die("lock: %s", strerror(r));
}

static void unlock_exclusive(void)
{
	int r = opt.lock == LOCK_MUTEX ? pthread_mutex_unlock(&the_mutex) : pthread_rwlock_unlock(&the_rwlock);

	if (r)
		die("unlock: %s", strerror(r));
}

/* xorshift64: which of a 90-10 thread's operations write.  Not a fixed
 * pattern: libelide samples counts every 64th acquisition of a thread, and
 * a period of 10 would alias with that, putting all or none of the samples
 * on the write side. */
static inline uint64_t next_random(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t x = 0x9e3779b97f4a7c15ull * (w->id + 1);
	int r = pthread_barrier_wait(&start_line);

	if (r && r != PTHREAD_BARRIER_SERIAL_THREAD)
		die("pthread_barrier_wait: %s", strerror(r));
	for (unsigned long i = 0; i < opt.iterations; i++) {
		if (opt.lock != LOCK_RWLOCK_READ_90_10 || next_random(&x) % 10 == 0) {
			lock_exclusive();
			section_write();
			unlock_exclusive();
			w->writes++;
		} else {
			bool consistent;

			if ((r = pthread_rwlock_rdlock(&the_rwlock)))
				die("pthread_rwlock_rdlock: %s", strerror(r));
			consistent = section_read();
			if ((r = pthread_rwlock_unlock(&the_rwlock)))
				die("pthread_rwlock_unlock (read): %s", strerror(r));
			w->reads++;
			w->torn += !consistent;
		}
	}
	return NULL;
}

/* ---- the segment ------------------------------------------------------ */

static const struct elide_seg_lock *find_entry(const struct seg_snapshot *snap, uint32_t kind)
{
	uintptr_t addr = opt.lock == LOCK_MUTEX ? (uintptr_t)&the_mutex : (uintptr_t)&the_rwlock;

	for (uint32_t i = 0; i < snap->nlocks; i++)
		if (snap->locks[i].lock.addr == addr && snap->locks[i].lock.kind == kind)
			return &snap->locks[i].lock;
	return NULL;
}

static void pause_briefly(void)
{
	struct timespec ts = { 0, 200 * 1000 };

	nanosleep(&ts, NULL);
}

/* ---- making the lock elide before the workers start -------------------- */

static void *helper(void *arg)
{
	bool read = arg != NULL;
	int r;

	if (read) {
		if ((r = pthread_rwlock_rdlock(&the_rwlock)) || (r = pthread_rwlock_unlock(&the_rwlock)))
			die("helper rdlock/unlock: %s", strerror(r));
	} else {
		lock_exclusive();
		unlock_exclusive();
	}
	return NULL;
}

#define MAX_HELPERS 64
static pthread_t helpers[MAX_HELPERS];
static unsigned nhelpers;

/*
 * With the lock held here, start helpers (readers for the read side) one at
 * a time, each after libelide counted the previous one contended, until the
 * side's entry says ELIDING.  The polls below wait for another thread to get
 * somewhere, and decide nothing by time.
 */
static void make_side_elide(uint32_t kind)
{
	for (;;) {
		struct seg_snapshot *snap = own_segment_read(0);
		const struct elide_seg_lock *e = find_entry(snap, kind);
		uint64_t contended = e ? e->stats[ELIDE_SEG_STAT_CONTENDED] : 0;
		bool eliding = e && e->state == ELIDE_SEG_STATE_ELIDING;

		seg_snapshot_free(snap);
		if (eliding)
			return;
		if (nhelpers == MAX_HELPERS)
			die("%u helpers blocked on the lock, %" PRIu64 " contended acquisitions counted, and the "
			    "lock's entry (kind %u) is still not eliding (contention= set that high?)",
			    nhelpers, contended, kind);
		if (pthread_create(&helpers[nhelpers], NULL, helper,
				   kind == ELIDE_SEG_KIND_RWLOCK_READ ? (void *)1 : NULL))
			die("pthread_create (helper)");
		nhelpers++;
		for (unsigned long polls = 0;; polls++) {
			uint64_t now;

			snap = own_segment_read(0);
			e = find_entry(snap, kind);
			now = e ? e->stats[ELIDE_SEG_STAT_CONTENDED] : 0;
			seg_snapshot_free(snap);
			if (now > contended)
				break;
			if (polls == 500000)
				die("helper %u never reached the lock (contended stays %" PRIu64 ")", nhelpers, now);
			pause_briefly();
		}
	}
}

/*
 * With the lock held here, one helper (a reader for the read side) blocks on
 * it until libelide has made the side's record: from then on every
 * acquisition is counted.
 */
static void make_side_tracked(uint32_t kind)
{
	if (pthread_create(&helpers[nhelpers], NULL, helper, kind == ELIDE_SEG_KIND_RWLOCK_READ ? (void *)1 : NULL))
		die("pthread_create (helper)");
	nhelpers++;
	for (unsigned long polls = 0;; polls++) {
		struct seg_snapshot *snap = own_segment_read(0);
		bool tracked = find_entry(snap, kind) != NULL;

		seg_snapshot_free(snap);
		if (tracked)
			return;
		if (polls == 500000)
			die("helper %u never reached the lock: no entry of kind %u", nhelpers, kind);
		pause_briefly();
	}
}

static void track_first(void)
{
	lock_exclusive();
	if (opt.lock == LOCK_MUTEX) {
		make_side_tracked(ELIDE_SEG_KIND_MUTEX);
	} else {
		make_side_tracked(ELIDE_SEG_KIND_RWLOCK_WRITE);
		if (opt.lock == LOCK_RWLOCK_READ_90_10)
			make_side_tracked(ELIDE_SEG_KIND_RWLOCK_READ);
	}
	unlock_exclusive();
	for (unsigned i = 0; i < nhelpers; i++)
		pthread_join(helpers[i], NULL);
}

/* --hint never: the control block as elided writes it (under its seqlock),
 * with a learned "never" for the lock's address (both sides of an rwlock). */
static void write_hint_never(void)
{
	struct seg_snapshot *snap = own_segment_read(SEG_READ_NO_LOCKS);
	struct elide_seg_control c = snap->control;
	char err[SEG_ERR_MAX] = "";
	int dfd, r;

	seg_snapshot_free(snap);
	/* A hint for another address first: only the lock's own may match. */
	c.hints[0] = (struct elide_seg_hint){ (uintptr_t)&counter_a, ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER };
	c.hints[1] = (struct elide_seg_hint){
		opt.lock == LOCK_MUTEX ? (uintptr_t)&the_mutex : (uintptr_t)&the_rwlock,
		ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER };
	c.nhints = 2;
	dfd = open(own_seg_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		die("open ELIDE_RUNTIME_DIR %s: %s", own_seg_dir, strerror(errno));
	r = seg_write_control(dfd, own_seg_name, &c, err, sizeof(err));
	close(dfd);
	if (r < 0)
		die("writing my control block: %s (%s)", err, strerror(-r));
}

static void warm_up(void)
{
	lock_exclusive();
	if (opt.lock == LOCK_MUTEX) {
		make_side_elide(ELIDE_SEG_KIND_MUTEX);
	} else {
		make_side_elide(ELIDE_SEG_KIND_RWLOCK_WRITE);
		if (opt.lock == LOCK_RWLOCK_READ_90_10)
			make_side_elide(ELIDE_SEG_KIND_RWLOCK_READ);
	}
	unlock_exclusive();
	for (unsigned i = 0; i < nhelpers; i++)
		pthread_join(helpers[i], NULL);
}

/* ---- judging the counters --------------------------------------------- */

static int failures;

#define check(cond, ...) do { \
		if (!(cond)) { \
			printf("FAIL: " __VA_ARGS__); \
			putchar('\n'); \
			failures++; \
		} \
	} while (0)

static const char *const abort_names[] = { "conflict", "capacity", "busy", "explicit",
					   "retry", "debug", "nested", "other" };

/* The abort counter libelide puts a status in (libelide/rtm.h's order of
 * precedence), written out again here on purpose. */
static int abort_stat_of(uint32_t status)
{
	if (status & 0x1)
		return (status >> 24) == 0xff ? ELIDE_SEG_STAT_ABORT_BUSY : ELIDE_SEG_STAT_ABORT_EXPLICIT;
	if (status & 0x8)
		return ELIDE_SEG_STAT_ABORT_CAPACITY;
	if (status & 0x4)
		return ELIDE_SEG_STAT_ABORT_CONFLICT;
	if (status & 0x10)
		return ELIDE_SEG_STAT_ABORT_DEBUG;
	if (status & 0x20)
		return ELIDE_SEG_STAT_ABORT_NESTED;
	if (status & 0x2)
		return ELIDE_SEG_STAT_ABORT_RETRY;
	return ELIDE_SEG_STAT_ABORT_OTHER;
}

/*
 * Probes one thread makes of a backed-off lock in n of its acquisitions:
 * its k-th count-down is at least min(skip << (k-1), skip_max) acquisitions
 * long, because a failed probe doubles the span (or finds it doubled by
 * another thread's probe: the gate only grows while nothing commits).
 * skip=16, skip_max=65536: 12 probes (spans 16..32768) in the first 65520
 * acquisitions, then one per 65536; that is about log2(65536/16) + n/65536.
 */
static uint64_t max_probes(uint64_t n)
{
	uint64_t span = LIB_SKIP, used = 0, probes = 0;

	while (used + span <= n) {
		used += span;
		probes++;
		span = span * 2 > LIB_SKIP_MAX ? LIB_SKIP_MAX : span * 2;
	}
	return probes;
}

struct side {
	const char *name;
	uint32_t kind;
	uint64_t expected;   /* acquisitions the workers made, counted by themselves */
	double share;        /* of all the workers' acquisitions */
};

static void print_entry(const struct side *s, const struct elide_seg_lock *e)
{
	const uint64_t *st = e->stats;

	printf("%s: ACQUIRED=%" PRIu64 " (made %" PRIu64 ") ATTEMPTS=%" PRIu64 " FALLBACKS=%" PRIu64
	       " SKIPPED=%" PRIu64 " COMMITS=%" PRIu64 " CONTENDED=%" PRIu64 " state=%u\n",
	       s->name, st[ELIDE_SEG_STAT_ACQUIRED], s->expected, st[ELIDE_SEG_STAT_ATTEMPTS],
	       st[ELIDE_SEG_STAT_FALLBACKS], st[ELIDE_SEG_STAT_SKIPPED], st[ELIDE_SEG_STAT_COMMITS],
	       st[ELIDE_SEG_STAT_CONTENDED], e->state);
	printf("%s: aborts:", s->name);
	for (int i = ELIDE_SEG_STAT_ABORT_CONFLICT; i <= ELIDE_SEG_STAT_ABORT_OTHER; i++)
		printf(" %s=%" PRIu64, abort_names[i - ELIDE_SEG_STAT_ABORT_CONFLICT], st[i]);
	putchar('\n');
}

/*
 * Sampling: libelide counts a thread's real acquisitions 1 in `period` with
 * weight `period`, so each thread's count falls short by less than `period`.
 * In a 90-10 run the samples of a thread land on the read or the write side
 * by chance (p = the side's share): a binomial over total/period samples,
 * allowed 6 standard deviations either way (0 for a lock with one side).
 */
static uint64_t side_noise(const struct side *s, uint64_t total, unsigned period)
{
	double samples = (double)total / period;

	return (uint64_t)ceil(6 * period * sqrt(samples * s->share * (1 - s->share)));
}

/*
 * What is left of the mutex's own skip (LIB_MUTEX_SKIP_OFFSET), read after
 * the workers are done: counted in ACQUIRED already, never made.  0 for an
 * rwlock and for a mutex whose bursts are per thread.
 */
static uint64_t skip_left(const struct side *s)
{
	uint16_t left;

	if (s->kind != ELIDE_SEG_KIND_MUTEX)
		return 0;
	memcpy(&left, (const char *)&the_mutex + LIB_MUTEX_SKIP_OFFSET, sizeof(left));
	return left;
}

/* ACQUIRED less the skip left over; false (and a failed check) when that
 * is more than a skip can be, or more than was counted. */
static bool acquired_made(const struct side *s, const struct elide_seg_lock *e, uint64_t *made)
{
	uint64_t acquired = e->stats[ELIDE_SEG_STAT_ACQUIRED], left = skip_left(s);

	if (left)
		printf("%s: skip left in the mutex: %" PRIu64 "\n", s->name, left);
	check(left <= LIB_MUTEX_SKIP_MAX && left <= acquired,
	      "%s: the mutex's skip bytes hold %" PRIu64 ": more than a skip (%d) or than ACQUIRED=%" PRIu64, s->name,
	      left, LIB_MUTEX_SKIP_MAX, acquired);
	*made = acquired - (left <= acquired ? left : 0);
	return left <= LIB_MUTEX_SKIP_MAX && left <= acquired;
}

static void judge_adaptive(const struct side *s, const struct elide_seg_lock *e, uint64_t total, enum regime regime,
			   int sim_stat)
{
	const uint64_t *st = e->stats;
	uint64_t acquired, attempts = st[ELIDE_SEG_STAT_ATTEMPTS];
	uint64_t skipped = st[ELIDE_SEG_STAT_SKIPPED], aborts = 0;
	/*
	 * Attempts allowed besides 1% of the acquisitions, per thread:
	 *  - before the lock backs off, at most STREAK_BACK_OFF = 6 of the
	 *    thread's acquisitions try (the sixth failure in a row backs it off;
	 *    one capacity or explicit abort, or two without a cause bit, do it
	 *    sooner), and no commit ever re-enables it;
	 *  - the first STREAK_THROTTLE = 2 of them make 1 + retries attempts
	 *    (= 4; with real RTM up to 1 + retries + busy_retries + 1 = 8, the
	 *    budgets being separate), the other 4 are throttled: one attempt,
	 *    counted 1 in 64 with weight 64: at most 64 counted for them;
	 *  - then one probe per count-down: max_probes() (14 for 200000).
	 * The helpers that made the lock elide never attempt (they decide while
	 * the lock only watches); one that raced past the gate flip might: 8.
	 */
	uint64_t first = regime == REGIME_SIMULATED ? 1 + LIB_RETRIES : 1 + LIB_RETRIES + LIB_BUSY_RETRIES + 1;
	uint64_t per_thread = LIB_STREAK_THROTTLE * first + LIB_THROTTLED_SAMPLE + max_probes(opt.iterations);
	uint64_t allowance = opt.threads * per_thread + nhelpers * 8;
	uint64_t noise = side_noise(s, total, LIB_SAMPLE);
	uint64_t below = (uint64_t)opt.threads * LIB_SAMPLE + noise;
	uint64_t above = (uint64_t)opt.threads * (LIB_THROTTLED_SAMPLE + LIB_BURST_MAX) + nhelpers + noise;

	if (!acquired_made(s, e, &acquired))
		return;

	/* The lock with no verdict of its own does try (what a learned "never"
	 * must prevent: --hint never). */
	check(attempts > 0, "%s: ATTEMPTS=0: the lock never tried a transaction", s->name);
	check(attempts <= s->expected / 100 + allowance,
	      "%s: ATTEMPTS=%" PRIu64 " > 1%% of %" PRIu64 " acquisitions + warm-up allowance %" PRIu64
	      " (%u threads x %" PRIu64 ", %u helpers): the lock does not stay backed off",
	      s->name, attempts, s->expected, allowance, opt.threads, per_thread, nhelpers);
	/* With simulated aborts nothing else can attempt: the allowance itself
	 * is the bound (1% is slack for real RTM's rare busy re-probes). */
	if (regime == REGIME_SIMULATED)
		check(attempts <= allowance,
		      "%s: ATTEMPTS=%" PRIu64 " > warm-up allowance %" PRIu64 " with simulated aborts: more "
		      "probes than one per doubling span, or more tries before backing off",
		      s->name, attempts, allowance);
	/* Against the counted acquisitions: a skipped acquisition is counted
	 * in both, by the same burst or sample, so a 90-10 run's chance split
	 * of samples between the sides cancels out. */
	check(skipped * 10 > st[ELIDE_SEG_STAT_ACQUIRED] * 9,
	      "%s: SKIPPED=%" PRIu64 " is not > 90%% of ACQUIRED=%" PRIu64 ": the lock is not kept backed off",
	      s->name, skipped, st[ELIDE_SEG_STAT_ACQUIRED]);
	/* Counted acquisitions fall short of the real ones by the sampling
	 * (below 64 per thread), exceed them by at most a thread's last burst
	 * (counted when granted, below LIB_BURST_MAX) plus the throttled 1 in 64 weight
	 * (64 per thread) and helpers racing past the gate flip.  A mutex's
	 * own skip is exact: what is left of it is taken off. */
	check(acquired + below >= s->expected && acquired <= s->expected + above,
	      "%s: ACQUIRED=%" PRIu64 " less the skip left, %" PRIu64 ", is not %" PRIu64
	      " (made) -%" PRIu64 "/+%" PRIu64 " (sampling 1 in %d)",
	      s->name, st[ELIDE_SEG_STAT_ACQUIRED], acquired, s->expected, below, above, LIB_SAMPLE);
	check(st[ELIDE_SEG_STAT_COMMITS] == 0, "%s: COMMITS=%" PRIu64 " although every transaction aborts",
	      s->name, st[ELIDE_SEG_STAT_COMMITS]);
	check(e->state == ELIDE_SEG_STATE_OFF_ADAPT, "%s: state %u at the end, want %u (backing off after aborts)",
	      s->name, e->state, ELIDE_SEG_STATE_OFF_ADAPT);
	for (int i = ELIDE_SEG_STAT_ABORT_CONFLICT; i <= ELIDE_SEG_STAT_ABORT_OTHER; i++)
		aborts += st[i];
	check(aborts == attempts, "%s: the abort counters add up to %" PRIu64 ", ATTEMPTS=%" PRIu64
	      " (nothing commits)", s->name, aborts, attempts);
	if (sim_stat >= 0)
		check(st[sim_stat] == attempts, "%s: %s aborts=%" PRIu64 ", want all ATTEMPTS=%" PRIu64
		      " (the simulated status)", s->name, abort_names[sim_stat - ELIDE_SEG_STAT_ABORT_CONFLICT],
		      st[sim_stat], attempts);
}

static void judge_mode_on(const struct side *s, const struct elide_seg_lock *e, uint64_t total, enum regime regime,
			  int sim_stat)
{
	const uint64_t *st = e->stats;
	uint64_t acquired = st[ELIDE_SEG_STAT_ACQUIRED], attempts = st[ELIDE_SEG_STAT_ATTEMPTS];
	uint64_t fallbacks = st[ELIDE_SEG_STAT_FALLBACKS], skipped = st[ELIDE_SEG_STAT_SKIPPED];
	/*
	 * mode=on: an acquisition either tries and falls back, or is one of the
	 * THROTTLED_SKIP that follow a throttled fallback of the same thread;
	 * the first are counted as FALLBACKS, the others as SKIPPED, with the
	 * weight of the fallback they follow (1, or 64 for 1 in 64 throttled
	 * ones), so the two add up to ACQUIRED exactly.  A throttled
	 * acquisition makes one attempt (none when it finds the lock held);
	 * only each thread's first two may make more: 1 + retries
	 * (simulated), 1 + retries + busy_retries + 1 (RTM).
	 */
	uint64_t extra = regime == REGIME_SIMULATED ? LIB_RETRIES : LIB_RETRIES + LIB_BUSY_RETRIES + 1;
	uint64_t allowance = opt.threads * LIB_STREAK_THROTTLE * extra;
	/* Skips left when a thread exits are counted but never taken. */
	uint64_t noise = side_noise(s, total, LIB_THROTTLED_SAMPLE) +
			 (uint64_t)opt.threads * LIB_THROTTLED_SAMPLE * LIB_THROTTLED_SKIP;
	uint64_t below = (uint64_t)opt.threads * LIB_THROTTLED_SAMPLE + noise;

	check(attempts > 0, "%s: ATTEMPTS=0: the lock never tried a transaction", s->name);
	check(attempts <= fallbacks + allowance,
	      "%s: ATTEMPTS=%" PRIu64 " > FALLBACKS=%" PRIu64 " + %" PRIu64 " (first two acquisitions per "
	      "thread may retry): throttled acquisitions retry", s->name, attempts, fallbacks, allowance);
	check(fallbacks + skipped == acquired, "%s: FALLBACKS=%" PRIu64 " + SKIPPED=%" PRIu64 " != ACQUIRED=%" PRIu64
	      ": an acquisition neither tried nor was skipped", s->name, fallbacks, skipped, acquired);
	check(skipped <= fallbacks * LIB_THROTTLED_SKIP, "%s: SKIPPED=%" PRIu64 " > %d x FALLBACKS=%" PRIu64
	      ": more skipped than follow the failed attempts", s->name, skipped, LIB_THROTTLED_SKIP, fallbacks);
	/* The other way round: a throttled acquisition that finds the lock
	 * held goes straight to it, without an attempt.  With counter sections
	 * (a few instructions) that is rare: below 0.1% of acquisitions seen,
	 * even on a loaded machine; half is a bound that only a mode=on lock
	 * that stopped trying misses, and two thirds of the skips one that
	 * stopped skipping.  With real RTM and a system call in the section
	 * the lock is held most of the time: no bound there. */
	if (regime == REGIME_SIMULATED) {
		check(attempts * 2 >= fallbacks, "%s: ATTEMPTS=%" PRIu64 " < half of FALLBACKS=%" PRIu64
		      ": acquisitions stop trying in mode=on", s->name, attempts, fallbacks);
		check(skipped * 3 >= fallbacks * LIB_THROTTLED_SKIP * 2, "%s: SKIPPED=%" PRIu64 " < two thirds of "
		      "%d x FALLBACKS=%" PRIu64 ": a failed throttled attempt does not skip the next %d",
		      s->name, skipped, LIB_THROTTLED_SKIP, fallbacks, LIB_THROTTLED_SKIP);
	}
	check(acquired + below >= s->expected && acquired <= s->expected + noise,
	      "%s: ACQUIRED=%" PRIu64 " is not %" PRIu64 " (made) -%" PRIu64 "/+%" PRIu64 " (sampling 1 in %d)",
	      s->name, acquired, s->expected, below, noise, LIB_THROTTLED_SAMPLE);
	check(st[ELIDE_SEG_STAT_COMMITS] == 0, "%s: COMMITS=%" PRIu64 " although every transaction aborts",
	      s->name, st[ELIDE_SEG_STAT_COMMITS]);
	check(e->state == ELIDE_SEG_STATE_ELIDING, "%s: state %u at the end, want %u (eliding)", s->name, e->state,
	      ELIDE_SEG_STATE_ELIDING);
	if (sim_stat >= 0)
		check(st[sim_stat] == attempts, "%s: %s aborts=%" PRIu64 ", want all ATTEMPTS=%" PRIu64
		      " (the simulated status)", s->name, abort_names[sim_stat - ELIDE_SEG_STAT_ABORT_CONFLICT],
		      st[sim_stat], attempts);
}

/*
 * A lock annotated never, in either mode: no attempt, and every acquisition
 * counted once.  Real acquisitions go out in bursts counted when granted,
 * so a thread's counts may run ahead by one burst per side, never behind.
 */
static void judge_never(const struct side *s, const struct elide_seg_lock *e)
{
	const uint64_t *st = e->stats;
	uint64_t acquired;
	uint64_t ahead = (uint64_t)opt.threads * (LIB_BURST_MAX + 1);

	if (!acquired_made(s, e, &acquired))
		return;
	check(st[ELIDE_SEG_STAT_ATTEMPTS] == 0, "%s: ATTEMPTS=%" PRIu64 " on a lock whose policy is never", s->name,
	      st[ELIDE_SEG_STAT_ATTEMPTS]);
	for (int i = ELIDE_SEG_STAT_ABORT_CONFLICT; i <= ELIDE_SEG_STAT_ABORT_OTHER; i++)
		check(st[i] == 0, "%s: %s aborts=%" PRIu64 " on a lock whose policy is never", s->name,
		      abort_names[i - ELIDE_SEG_STAT_ABORT_CONFLICT], st[i]);
	check(acquired >= s->expected && acquired <= s->expected + ahead,
	      "%s: ACQUIRED=%" PRIu64 " less the skip left, %" PRIu64 ", is not %" PRIu64
	      " (made) -0/+%" PRIu64 " (a burst per thread ahead)",
	      s->name, st[ELIDE_SEG_STAT_ACQUIRED], acquired, s->expected, ahead);
	check(e->state == ELIDE_SEG_STATE_OFF_POLICY, "%s: state %u at the end, want %u (off by policy)", s->name,
	      e->state, ELIDE_SEG_STATE_OFF_POLICY);
	/* A learned verdict reads as elided's decision, with its source. */
	if (opt.hint_never)
		check(e->ctl_policy == ELIDE_POLICY_NEVER + 1 && e->ctl_source == ELIDE_SEG_SOURCE_LEARNED &&
		      e->reason == ELIDE_SEG_REASON_DAEMON,
		      "%s: ctl_policy %u, ctl_source %u, reason %u; want %u, %u (learned), %u (elided)", s->name,
		      e->ctl_policy, e->ctl_source, e->reason, ELIDE_POLICY_NEVER + 1, ELIDE_SEG_SOURCE_LEARNED,
		      ELIDE_SEG_REASON_DAEMON);
}

/*
 * --relock: the write side made eliding (its read side has no record), the
 * main thread write-locks it (with real RTM and a counter section: elided,
 * nothing in the lock says it is held) and locks it again.  glibc answers
 * EDEADLK to both the rdlock and the wrlock; libelide must too (it aborts
 * the section and redoes it with the real lock).  A read side without a
 * record once took the fast path there and got the lock.
 */
static int relock_check(enum regime regime)
{
	int r, rd, wr;

	printf("abort-regime: relock of an rwlock held for writing, write side eliding, regime=%s\n",
	       regime == REGIME_RTM ? "rtm" : "simulated");
	lock_exclusive();
	make_side_elide(ELIDE_SEG_KIND_RWLOCK_WRITE);
	unlock_exclusive();
	for (unsigned i = 0; i < nhelpers; i++)
		pthread_join(helpers[i], NULL);
	if ((r = pthread_rwlock_wrlock(&the_rwlock)))
		die("wrlock: %s", strerror(r));
	rd = pthread_rwlock_rdlock(&the_rwlock);
	wr = pthread_rwlock_wrlock(&the_rwlock);
	if ((r = pthread_rwlock_unlock(&the_rwlock)))
		die("unlock: %s", strerror(r));
	check(rd == EDEADLK, "rdlock while write-locked returned %d (%s), want EDEADLK", rd, strerror(rd));
	check(wr == EDEADLK, "wrlock while write-locked returned %d (%s), want EDEADLK", wr, strerror(wr));
	if (failures)
		return 1;
	printf("ok: rdlock and wrlock while write-locked: EDEADLK\n");
	return 0;
}

/* ---- main ------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr, "usage: abort-regime [--threads N] [--iterations N] "
		"[--lock mutex|rwlock-write|rwlock-read-90-10] [--section counter|syscall]\n"
		"       [--policy never | --hint never]\n"
		"       abort-regime --relock [--section counter]\n"
		"       abort-regime --regime\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "lock", required_argument, NULL, 'l' },
		{ "section", required_argument, NULL, 's' },
		{ "policy", required_argument, NULL, 'p' },
		{ "hint", required_argument, NULL, 'h' },
		{ "relock", no_argument, NULL, 'R' },
		{ "regime", no_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	struct worker workers[MAX_THREADS];
	struct seg_snapshot *snap;
	struct side sides[2];
	unsigned nsides = 0;
	uint64_t reads = 0, writes = 0, torn = 0;
	bool regime_only = false, mode_on;
	enum regime regime;
	int c, sim_stat = -1;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			opt.threads = (unsigned)arg_number(optarg, 1, MAX_THREADS);
			break;
		case 'n':
			opt.iterations = arg_number(optarg, 1, 1000000000);
			break;
		case 'l':
			if (!strcmp(optarg, "mutex"))
				opt.lock = LOCK_MUTEX;
			else if (!strcmp(optarg, "rwlock-write"))
				opt.lock = LOCK_RWLOCK_WRITE;
			else if (!strcmp(optarg, "rwlock-read-90-10"))
				opt.lock = LOCK_RWLOCK_READ_90_10;
			else
				usage();
			break;
		case 's':
			if (!strcmp(optarg, "counter"))
				opt.syscall_section = false;
			else if (!strcmp(optarg, "syscall"))
				opt.syscall_section = true;
			else
				usage();
			break;
		case 'p':
			if (strcmp(optarg, "never"))
				usage();
			opt.policy_never = true;
			break;
		case 'h':
			if (strcmp(optarg, "never"))
				usage();
			opt.hint_never = true;
			break;
		case 'r':
			regime_only = true;
			break;
		case 'R':
			opt.relock = true;
			opt.lock = LOCK_RWLOCK_WRITE;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || (opt.policy_never && opt.hint_never))
		usage();

	/* Where this runs: libelide loaded and eliding, with what aborts. */
	snap = own_segment_open();
	regime = snap->header.rtm_usable ? REGIME_RTM : REGIME_SIMULATED;
	mode_on = snap->header.mode == ELIDE_SEG_MODE_ON;
	if (regime == REGIME_SIMULATED) {
		const char *v = getenv("ELIDE_SIM_ABORT");

		if (!v || !strstr(snap->header.status_reason, "ELIDE_SIM_ABORT"))
			die("no RTM and no simulated aborts, yet eliding: '%s'", snap->header.status_reason);
		sim_stat = abort_stat_of((uint32_t)strtoul(v, NULL, 0));
	}
	if (regime_only) {
		printf("%s\n", regime == REGIME_RTM ? "rtm" : "simulated");
		seg_snapshot_free(snap);
		return 0;
	}
	if (opt.relock)
		return relock_check(regime);
	if (regime == REGIME_RTM && !opt.syscall_section) {
		printf("SKIP: real RTM: counter sections would commit; run with --section syscall\n");
		seg_snapshot_free(snap);
		return EXIT_SKIP;
	}
	printf("abort-regime: lock=%s%s section=%s threads=%u iterations=%lu mode=%s regime=%s (%s)\n",
	       lock_names[opt.lock], opt.policy_never ? " policy=never" : opt.hint_never ? " hint=never" : "",
	       opt.syscall_section ? "syscall" : "counter",
	       opt.threads, opt.iterations,
	       mode_on ? "on" : "adaptive", regime == REGIME_RTM ? "rtm" : "simulated", snap->header.status_reason);
	seg_snapshot_free(snap);

	if (opt.policy_never) {
		int r = opt.lock == LOCK_MUTEX ? elide_mutex_set_policy(&the_mutex, ELIDE_POLICY_NEVER)
					       : elide_rwlock_set_policy(&the_rwlock, ELIDE_POLICY_NEVER);

		if (r)
			die("setting the lock's policy to never: %s", strerror(r < 0 ? -r : r));
	} else if (opt.hint_never) {
		write_hint_never();
		track_first();
	} else if (!mode_on) {
		warm_up();
	}
	if (pthread_barrier_init(&start_line, NULL, opt.threads))
		die("pthread_barrier_init");
	for (unsigned i = 0; i < opt.threads; i++) {
		workers[i] = (struct worker){ .id = i };
		if (pthread_create(&workers[i].tid, NULL, work, &workers[i]))
			die("pthread_create (worker %u)", i);
	}
	for (unsigned i = 0; i < opt.threads; i++) {
		pthread_join(workers[i].tid, NULL);
		reads += workers[i].reads;
		writes += workers[i].writes;
		torn += workers[i].torn;
	}
	pthread_barrier_destroy(&start_line);

	/* The invariant: no lost update, no reader saw a half-done write. */
	check(counter_a == writes && counter_b == writes,
	      "lost updates: counter %lu/%lu after %" PRIu64 " write sections", counter_a, counter_b, writes);
	check(torn == 0, "%" PRIu64 " read sections saw a write half done", torn);
	check(reads + writes == (uint64_t)opt.threads * opt.iterations, "%" PRIu64 " sections ran, want %" PRIu64,
	      reads + writes, (uint64_t)opt.threads * opt.iterations);

	if (opt.lock == LOCK_MUTEX) {
		sides[nsides++] = (struct side){ "mutex", ELIDE_SEG_KIND_MUTEX, writes, 1.0 };
	} else {
		sides[nsides++] = (struct side){ "rwlock-write", ELIDE_SEG_KIND_RWLOCK_WRITE, writes,
						 (double)writes / (double)(reads + writes) };
		if (opt.lock == LOCK_RWLOCK_READ_90_10)
			sides[nsides++] = (struct side){ "rwlock-read", ELIDE_SEG_KIND_RWLOCK_READ, reads,
							 (double)reads / (double)(reads + writes) };
	}
	snap = own_segment_read(0);
	printf("helpers=%u\n", nhelpers);
	for (unsigned i = 0; i < nsides; i++) {
		const struct elide_seg_lock *e = find_entry(snap, sides[i].kind);

		if (!e) {
			check(false, "%s: no entry (kind %u) for the lock at %p in %s", sides[i].name, sides[i].kind,
			      opt.lock == LOCK_MUTEX ? (void *)&the_mutex : (void *)&the_rwlock, own_seg_name);
			continue;
		}
		print_entry(&sides[i], e);
		if (opt.policy_never || opt.hint_never)
			judge_never(&sides[i], e);
		else if (mode_on)
			judge_mode_on(&sides[i], e, reads + writes, regime, sim_stat);
		else
			judge_adaptive(&sides[i], e, reads + writes, regime, sim_stat);
	}
	/* Read and write side together: sampled from one stream per thread. */
	if (nsides == 2 && !failures && !opt.policy_never && !opt.hint_never) {
		const struct elide_seg_lock *r = find_entry(snap, ELIDE_SEG_KIND_RWLOCK_READ);
		const struct elide_seg_lock *w = find_entry(snap, ELIDE_SEG_KIND_RWLOCK_WRITE);
		uint64_t both = r->stats[ELIDE_SEG_STAT_ACQUIRED] + w->stats[ELIDE_SEG_STAT_ACQUIRED];
		uint64_t period = mode_on ? LIB_THROTTLED_SAMPLE : LIB_SAMPLE;
		/* ...and each side may run a burst ahead per thread; in mode=on
		 * one counted fallback stands for 1 + THROTTLED_SKIP acquisitions. */
		uint64_t slack = opt.threads * 2 * (mode_on ? period * (1 + LIB_THROTTLED_SKIP) : period + LIB_BURST_MAX) +
				 nhelpers;

		check(both + slack >= reads + writes && both <= reads + writes + slack,
		      "read+write: ACQUIRED=%" PRIu64 " is not %" PRIu64 " (made) +-%" PRIu64, both,
		      reads + writes, slack);
	}
	seg_snapshot_free(snap);
	if (failures) {
		printf("%d check(s) failed\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
