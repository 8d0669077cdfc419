/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork() from a multi-threaded program whose locks are busy (and elided).
 * The program does what correct programs do: pthread_atfork handlers take
 * every lock before fork and release them in both parent and child.  The
 * child must then see consistent data, be able to lock everything again
 * (also from new threads) and exit; the parent must carry on unharmed.
 */
#include <sys/wait.h>

#include "testutil.h"

#define NFORKS 50
#define NWORKERS 4
#define CHILD_ITERS 5000L

static pthread_mutex_t m1 = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

/* Each pair is equal whenever its lock is free. */
static long a1, b1;             /* m1 */
static long a2, b2;             /* m2 */
static long x, y;               /* rw */
static _Atomic long violations;
static _Atomic bool stop;
static int parent_active;

static void prepare(void)
{
	check_ret(pthread_mutex_lock(&m1), 0);
	check_ret(pthread_mutex_lock(&m2), 0);
	check_ret(pthread_rwlock_wrlock(&rw), 0);
}

static void parent_release(void)
{
	check_ret(pthread_rwlock_unlock(&rw), 0);
	check_ret(pthread_mutex_unlock(&m2), 0);
	check_ret(pthread_mutex_unlock(&m1), 0);
}

/*
 * The child re-initialises the rwlock instead of unlocking it: its thread
 * has a new TID, so glibc no longer sees it as the writer (__cur_writer),
 * and waiting writers that do not exist in the child may have left marks
 * in the lock word.
 */
static void child_release(void)
{
	check_ret(pthread_rwlock_init(&rw, NULL), 0);
	check_ret(pthread_mutex_unlock(&m2), 0);
	check_ret(pthread_mutex_unlock(&m1), 0);
}

static void one_round(uint64_t *rng)
{
	uint64_t r = rng_next(rng);

	switch (r % 4) {
	case 0:
		check_ret(pthread_mutex_lock(&m1), 0);
		if (a1 != b1)
			atomic_fetch_add(&violations, 1);
		a1++;
		b1++;
		check_ret(pthread_mutex_unlock(&m1), 0);
		break;
	case 1:
		check_ret(pthread_mutex_lock(&m2), 0);
		if (a2 != b2)
			atomic_fetch_add(&violations, 1);
		a2++;
		b2++;
		check_ret(pthread_mutex_unlock(&m2), 0);
		break;
	case 2:
		check_ret(pthread_rwlock_wrlock(&rw), 0);
		if (x != y)
			atomic_fetch_add(&violations, 1);
		x++;
		y++;
		check_ret(pthread_rwlock_unlock(&rw), 0);
		break;
	default:
		check_ret(pthread_rwlock_rdlock(&rw), 0);
		if (x != y)
			atomic_fetch_add(&violations, 1);
		check_ret(pthread_rwlock_unlock(&rw), 0);
		break;
	}
}

static void *worker(void *arg)
{
	uint64_t rng = 0x9e3779b97f4a7c15ULL * ((uintptr_t)arg + 1);
	long n = 0;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		one_round(&rng);
		n++;
	}
	return (void *)(intptr_t)n;
}

static void *child_worker(void *arg)
{
	uint64_t rng = 0x2545f4914f6cdd1dULL * ((uintptr_t)arg + 1);

	for (long i = 0; i < CHILD_ITERS; i++)
		one_round(&rng);
	return NULL;
}

/* In the child: only the forking thread exists; everything must work. */
static void child(void)
{
	pthread_t t[2];

	watchdog(60);
	if (elide_active() != parent_active)
		fail("child: elide_active() = %d, parent had %d", elide_active(), parent_active);
	if (a1 != b1 || a2 != b2 || x != y)
		fail("child: inconsistent data after fork: %ld/%ld %ld/%ld %ld/%ld", a1, b1, a2, b2, x, y);
	prepare();
	parent_release();
	check_ret(pthread_mutex_trylock(&m1), 0);
	check_ret(pthread_mutex_trylock(&m1), EBUSY);
	check_ret(pthread_mutex_unlock(&m1), 0);
	check_ret(pthread_rwlock_trywrlock(&rw), 0);
	check_ret(pthread_rwlock_tryrdlock(&rw), EBUSY);
	check_ret(pthread_rwlock_unlock(&rw), 0);

#ifdef __SANITIZE_ADDRESS__
	/*
	 * GCC 12's ASan allocator is not fork-safe in a multi-threaded parent:
	 * a new thread's first calloc (in ASan's own thread start) can block on
	 * an allocator lock inherited held.  Exercise the locks single-threaded.
	 */
	(void)t;
	child_worker(NULL);
#else
	for (int i = 0; i < 2; i++)
		t[i] = xthread(child_worker, (void *)(intptr_t)i);
	for (int i = 0; i < 2; i++)
		xjoin(t[i]);
#endif
	if (atomic_load(&violations))
		fail("child: mutual exclusion violated %ld times", atomic_load(&violations));
	if (a1 != b1 || a2 != b2 || x != y)
		fail("child: inconsistent data: %ld/%ld %ld/%ld %ld/%ld", a1, b1, a2, b2, x, y);
	_exit(0);
}

int main(void)
{
	pthread_t t[NWORKERS];
	long ops = 0;

	parent_active = test_start("test-fork",
				   "fork 50 times while 4 threads hammer 2 mutexes and an rwlock; "
				   "atfork handlers take the locks; children relock and exit cleanly");
	check_ret(pthread_atfork(prepare, parent_release, child_release), 0);
	for (int i = 0; i < NWORKERS; i++)
		t[i] = xthread(worker, (void *)(intptr_t)i);

	for (int i = 0; i < NFORKS; i++) {
		int status;
		pid_t pid;

		/* Let the workers build up contention between forks. */
		for (int j = 0; j < 200; j++) {
			check_ret(pthread_mutex_lock(&m1), 0);
			a1++;
			b1++;
			check_ret(pthread_mutex_unlock(&m1), 0);
		}
		pid = fork();
		if (pid < 0)
			fail("fork: %m");
		if (pid == 0)
			child();
		if (waitpid(pid, &status, 0) != pid)
			fail("waitpid: %m");
		if (WIFSIGNALED(status))
			fail("child %d killed by signal %d", i, WTERMSIG(status));
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail("child %d failed (status 0x%x)", i, status);
	}

	atomic_store(&stop, true);
	for (int i = 0; i < NWORKERS; i++)
		ops += (long)(intptr_t)xjoin(t[i]);
	check_eq(atomic_load(&violations), 0);
	check_eq(a1, b1);
	check_eq(a2, b2);
	check_eq(x, y);
	printf("test-fork: %d children ok, %ld worker operations in the parent\n", NFORKS, ops);
	printf("test-fork: PASS\n");
	return 0;
}
