/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * slot-share: one thread takes many backed-off locks in turn, more than
 * libelide's per-thread slots hold (libelide/hotpath.h, LOCAL_SLOTS), so
 * the locks keep taking each other's slots.  Every transaction aborts (a
 * capacity abort from ELIDE_SIM_ABORT=0x8, or a system call in the section
 * with real RTM), so each lock backs off at its first failure.  Each must
 * still be probed about once per span of its acquisitions: a slot taken
 * over used to restart its count at the full span, and a lock whose slot
 * changed hands at every acquisition was never probed again (two locks
 * used in turn whose slots collided were enough: the workload under ASan).
 *
 *   slot-share [--kind mutex|rwlock-write] [--locks N] [--rounds R]
 *
 * Run by test-slot-share.sh under LD_PRELOAD=libelide.so with
 * ELIDE=mode=adaptive,contention=1,skip_max=64 (own_mutex=0 for mutexes:
 * a default mutex's own skip count is the lock's, not the thread's).  Each
 * lock is made tracked first: the main thread holds it while a helper
 * blocks on it, until the lock's entry appears in the program's segment.
 * Then the main thread alone takes the N locks in turn, R rounds.  Checked
 * from the segment (counts, never time): no update lost, and each lock
 * tried at least MIN_PROBES transactions; with the span at 64, R = 3200
 * acquisitions give about 50 probes a lock.
 *
 * Exit status: 0 passed, 1 failed (a line per lock that failed), 2 usage,
 * 77 libelide is not loaded or not eliding.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elide.h"
#include "own-segment.h"

#define MAX_LOCKS 1024
/* Probes a lock must have made.  Each acquisition of a lock whose slot
 * was just taken over probes with chance 1/64 (the span): 3200 of them
 * make 50 on average, and fewer than 10 has odds of about 1e-12. */
#define MIN_PROBES 10

#define die(...) do { \
		fflush(stdout); \
		fprintf(stderr, "slot-share: " __VA_ARGS__); \
		fputc('\n', stderr); \
		_exit(1); \
	} while (0)

static bool use_rwlock, syscall_section;
static unsigned nlocks = 160;
static unsigned long rounds = 3200;
static pthread_mutex_t mutexes[MAX_LOCKS];
static pthread_rwlock_t rwlocks[MAX_LOCKS];
static unsigned long counters[MAX_LOCKS];

static void *lock_addr(unsigned i)
{
	return use_rwlock ? (void *)&rwlocks[i] : (void *)&mutexes[i];
}

static void take(unsigned i)
{
	int r = use_rwlock ? pthread_rwlock_wrlock(&rwlocks[i]) : pthread_mutex_lock(&mutexes[i]);

	if (r)
		die("lock %u: %s", i, strerror(r));
}

static void give(unsigned i)
{
	int r = use_rwlock ? pthread_rwlock_unlock(&rwlocks[i]) : pthread_mutex_unlock(&mutexes[i]);

	if (r)
		die("unlock %u: %s", i, strerror(r));
}

static const struct elide_seg_lock *find_entry(const struct seg_snapshot *snap, unsigned i)
{
	uint32_t kind = use_rwlock ? ELIDE_SEG_KIND_RWLOCK_WRITE : ELIDE_SEG_KIND_MUTEX;

	for (uint32_t k = 0; k < snap->nlocks; k++)
		if (snap->locks[k].lock.addr == (uintptr_t)lock_addr(i) && snap->locks[k].lock.kind == kind)
			return &snap->locks[k].lock;
	return NULL;
}

static void *helper(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;

	take(i);
	give(i);
	return NULL;
}

/* With lock i held here, a helper blocks on it until libelide has made
 * the lock's record (a contended lock's), as its entry shows. */
static void make_tracked(unsigned i)
{
	struct timespec nap = { 0, 200 * 1000 };
	pthread_t t;

	take(i);
	if (pthread_create(&t, NULL, helper, (void *)(uintptr_t)i))
		die("pthread_create (helper)");
	for (unsigned long polls = 0;; polls++) {
		struct seg_snapshot *snap = own_segment_read(0);
		bool tracked = find_entry(snap, i) != NULL;

		seg_snapshot_free(snap);
		if (tracked)
			break;
		if (polls == 500000)
			die("lock %u: the helper never reached it, no entry", i);
		nanosleep(&nap, NULL);
	}
	give(i);
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "kind", required_argument, NULL, 'k' },
		{ "locks", required_argument, NULL, 'n' },
		{ "rounds", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	struct seg_snapshot *snap;
	uint64_t least = UINT64_MAX, total = 0;
	int c, failures = 0;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
			if (!strcmp(optarg, "mutex"))
				use_rwlock = false;
			else if (!strcmp(optarg, "rwlock-write"))
				use_rwlock = true;
			else
				return fprintf(stderr, "slot-share: --kind mutex or rwlock-write\n"), 2;
			break;
		case 'n':
			nlocks = (unsigned)arg_number(optarg, 1, MAX_LOCKS);
			break;
		case 'r':
			rounds = arg_number(optarg, 1, 100000000);
			break;
		default:
			fprintf(stderr, "usage: slot-share [--kind mutex|rwlock-write] [--locks N] [--rounds R]\n");
			return 2;
		}
	}
	if (optind != argc)
		return fprintf(stderr, "slot-share: no operands\n"), 2;
	snap = own_segment_open();
	/* Real RTM: a system call aborts every transaction. */
	syscall_section = snap->header.rtm_usable;
	seg_snapshot_free(snap);

	for (unsigned i = 0; i < nlocks; i++) {
		pthread_mutex_init(&mutexes[i], NULL);
		pthread_rwlock_init(&rwlocks[i], NULL);
		make_tracked(i);
	}
	for (unsigned long r = 0; r < rounds; r++) {
		for (unsigned i = 0; i < nlocks; i++) {
			take(i);
			counters[i]++;
			if (syscall_section)
				getppid();
			give(i);
		}
	}

	snap = own_segment_read(0);
	for (unsigned i = 0; i < nlocks; i++) {
		const struct elide_seg_lock *e = find_entry(snap, i);
		uint64_t attempts = e ? e->stats[ELIDE_SEG_STAT_ATTEMPTS] : 0;

		if (counters[i] != rounds) {
			printf("FAIL: lock %u: counter %lu, want %lu (an update lost)\n", i, counters[i], rounds);
			failures++;
		}
		if (!e || attempts < MIN_PROBES) {
			printf("FAIL: lock %u: %" PRIu64 " transactions in %lu acquisitions, want %d or more: "
			       "its probes stopped\n", i, attempts, rounds, MIN_PROBES);
			failures++;
		}
		least = attempts < least ? attempts : least;
		total += attempts;
	}
	seg_snapshot_free(snap);
	printf("%u %s locks in turn, %lu rounds: transactions per lock: least %" PRIu64 ", mean %.1f\n", nlocks,
	       use_rwlock ? "rwlock (write side)" : "mutex", rounds, least, (double)total / nlocks);
	return failures ? 1 : 0;
}
