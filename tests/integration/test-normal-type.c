/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Mutexes typed PTHREAD_MUTEX_NORMAL explicitly must deadlock on relock,
 * which an elided mutex does not, so libelide tries no transaction on them
 * unless ELIDE has force_normal=1 or the program asks with policy
 * "always".  glibc up to 2.42 marks them in the mutex's kind; 2.43 does
 * not, and libelide then goes by the attribute.
 *
 * Three mutexes are contended by two threads: a default one, a NORMAL one
 * and a NORMAL one annotated "always".  The process's own segment then
 * says how many transactions each one attempted.  The program runs once as
 * preload.sh starts it and once more, re-executed, with force_normal=1.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>

#include "segment-reader.h"
#include "testutil.h"

#define ITERATIONS 50000
#define SECTION_WORK 64

static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t normal_lock, normal_always_lock;
static unsigned long counters[3];

static void section(pthread_mutex_t *m, unsigned long *counter)
{
	volatile unsigned work = 0;

	pthread_mutex_lock(m);
	for (unsigned i = 0; i < SECTION_WORK; i++)
		work += i;
	(*counter)++;
	pthread_mutex_unlock(m);
	(void)work; /* read back: gcc 16 warns about a variable only written */
}

/*
 * Make `m` contended for sure: hold it until a second thread has looked at
 * it and gone to sleep in glibc's lock, `rounds` times.  Adaptive mode
 * elides a lock only after it was seen contended a few times, and a race
 * left to chance may not provide that.
 */
struct waiter {
	pthread_mutex_t *m;
	_Atomic pid_t tid;
};

static void *wait_for_lock(void *arg)
{
	struct waiter *w = arg;

	atomic_store(&w->tid, gettid());
	pthread_mutex_lock(w->m);
	pthread_mutex_unlock(w->m);
	return NULL;
}

static bool thread_sleeps(pid_t tid)
{
	char path[64], buf[256], *p;
	FILE *f;
	bool sleeping = false;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sleeping = p[1] == ' ' && p[2] == 'S';
	fclose(f);
	return sleeping;
}

static void contend(pthread_mutex_t *m, int rounds)
{
	for (int i = 0; i < rounds; i++) {
		struct waiter w = { .m = m };
		pthread_t t;

		check(pthread_mutex_lock(m) == 0);
		check(pthread_create(&t, NULL, wait_for_lock, &w) == 0);
		while (atomic_load(&w.tid) == 0 || !thread_sleeps(atomic_load(&w.tid)))
			sched_yield();
		check(pthread_mutex_unlock(m) == 0);
		check(pthread_join(t, NULL) == 0);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < ITERATIONS; i++) {
		section(&default_lock, &counters[0]);
		section(&normal_lock, &counters[1]);
		section(&normal_always_lock, &counters[2]);
	}
	return NULL;
}

/* Transactions attempted on `lock`, from this process's segment; 0 when
 * the lock has no record at all. */
static uint64_t attempts_of(const struct seg_snapshot *snap, const void *lock)
{
	for (uint32_t i = 0; i < snap->nlocks; i++)
		if (snap->locks[i].lock.addr == (uintptr_t)lock)
			return snap->locks[i].lock.stats[ELIDE_SEG_STAT_ATTEMPTS];
	return 0;
}

static struct seg_snapshot *read_own_segment(void)
{
	const char *dir = getenv("ELIDE_RUNTIME_DIR");
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX] = "", name[64];
	uint64_t start = 0;
	int dfd, r;

	if (!dir)
		fail("ELIDE_RUNTIME_DIR is not set (run me through preload.sh)");
	check(seg_proc_start_time(NULL, getpid(), &start) == 0);
	snprintf(name, sizeof(name), "%d-%" PRIu64 ".seg", (int)getpid(), start);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	check(dfd >= 0);
	r = seg_read(dfd, name, 0, &snap, err, sizeof(err));
	close(dfd);
	if (r < 0)
		fail("reading my segment %s/%s: %s", dir, name, err);
	return snap;
}

static void reexec_with_force_normal(char **argv)
{
	const char *elide_env = getenv("ELIDE");
	char buf[256];

	snprintf(buf, sizeof(buf), "%s%sforce_normal=1", elide_env ? elide_env : "", elide_env ? "," : "");
	setenv("ELIDE", buf, 1);
	setenv("ELIDE_TEST_FORCE_NORMAL_RUN", "1", 1);
	fflush(stdout);
	execv("/proc/self/exe", argv);
	fail("re-exec: %s", strerror(errno));
}

int main(int argc, char **argv)
{
	bool force = getenv("ELIDE_TEST_FORCE_NORMAL_RUN") != NULL;
	bool eliding, stats;
	pthread_mutexattr_t attr;
	struct seg_snapshot *snap;
	uint64_t tried[3];
	pthread_t t[2];

	(void)argc;
	eliding = test_start("test-normal-type", force ? "normal mutexes with force_normal=1"
							: "normal mutexes are not elided") == 1;
	/* The segment exists unless statistics are off. */
	stats = !env_has("ELIDE", "stats=0");
	check(pthread_mutexattr_init(&attr) == 0);
	check(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_NORMAL) == 0);
	check(pthread_mutex_init(&normal_lock, &attr) == 0);
	check(pthread_mutex_init(&normal_always_lock, &attr) == 0);
	check(pthread_mutexattr_destroy(&attr) == 0);
	if (eliding)
		check_ret(elide_mutex_set_policy(&normal_always_lock, ELIDE_POLICY_ALWAYS), 0);

	contend(&default_lock, 8);
	contend(&normal_lock, 8);
	contend(&normal_always_lock, 8);
	for (int i = 0; i < 2; i++)
		check(pthread_create(&t[i], NULL, worker, NULL) == 0);
	for (int i = 0; i < 2; i++)
		check(pthread_join(t[i], NULL) == 0);
	for (int i = 0; i < 3; i++)
		check_eq(counters[i], 2 * ITERATIONS);

	if (stats) {
		snap = read_own_segment();
		tried[0] = attempts_of(snap, &default_lock);
		tried[1] = attempts_of(snap, &normal_lock);
		tried[2] = attempts_of(snap, &normal_always_lock);
		seg_snapshot_free(snap);
		printf("test-normal-type: attempts: default %" PRIu64 ", normal %" PRIu64 ", normal+always %" PRIu64 "\n",
		       tried[0], tried[1], tried[2]);
		if (!eliding) {
			check_eq(tried[0] + tried[1] + tried[2], 0);
		} else {
			/* mode=on tries every lock at once; adaptive once contended,
			 * which two threads hammering it guarantee. */
			check(tried[0] > 0);
			check(tried[2] > 0);
			if (force)
				check(tried[1] > 0);
			else
				check_eq(tried[1], 0);
		}
	}
	if (!force)
		reexec_with_force_normal(argv);
	return 0;
}
