/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Bank transfers: 64 accounts behind one global lock, random transfers and
 * audits by several threads.  The total never changes, so every audit made
 * under the lock and the final sum must see it exact.  Two variants: a
 * global mutex (taken by lock, trylock and timedlock), and a global rwlock
 * (readers audit, writers transfer), of the default kind and then one that
 * prefers writers nonrecursively (whose readers wait for a waiting
 * writer).  Bounded by operation count.
 */
#include "testutil.h"

#define NACCOUNTS 64
#define NTHREADS 4
#define OPS 1000000L
#define INITIAL 1000L

static long accounts[NACCOUNTS];
static pthread_mutex_t bank_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t bank_rw_default = PTHREAD_RWLOCK_INITIALIZER;
static pthread_rwlock_t bank_rw_writers;
static pthread_rwlock_t *bank_rw = &bank_rw_default;
static _Atomic long violations, audits, transfers;
static long ops = OPS;

static long ops_per_thread(void)
{
	return test_ops_per_thread(OPS);
}

static long total(void)
{
	long sum = 0;

	for (int i = 0; i < NACCOUNTS; i++)
		sum += accounts[i];
	return sum;
}

static void transfer(uint64_t r)
{
	int from = r % NACCOUNTS, to = (r >> 8) % NACCOUNTS;
	long amount = (long)((r >> 16) % 100);

	accounts[from] -= amount;
	accounts[to] += amount;
}

static void mutex_acquire(uint64_t r)
{
	struct timespec ts;
	int ret;

	switch ((r >> 32) % 4) {
	case 0:
		while ((ret = pthread_mutex_trylock(&bank_m)) == EBUSY)
			sched_yield();
		check_ret(ret, 0);
		break;
	case 1:
		/* A generous deadline; a timeout (starvation) only means try again. */
		do {
			ts = ts_from_now(CLOCK_REALTIME, 5000);
			ret = pthread_mutex_timedlock(&bank_m, &ts);
		} while (ret == ETIMEDOUT);
		check_ret(ret, 0);
		break;
	default:
		check_ret(pthread_mutex_lock(&bank_m), 0);
		break;
	}
}

static void *mutex_worker(void *arg)
{
	uint64_t rng = 0x9e3779b97f4a7c15ULL * ((uintptr_t)arg + 1);
	long my_audits = 0, my_transfers = 0;

	for (long i = 0; i < ops; i++) {
		uint64_t r = rng_next(&rng);

		mutex_acquire(r);
		if ((r >> 40) % 8 == 0) {
			if (total() != NACCOUNTS * INITIAL)
				atomic_fetch_add(&violations, 1);
			my_audits++;
		} else {
			transfer(r);
			my_transfers++;
		}
		check_ret(pthread_mutex_unlock(&bank_m), 0);
	}
	atomic_fetch_add(&audits, my_audits);
	atomic_fetch_add(&transfers, my_transfers);
	return NULL;
}

static void *rwlock_worker(void *arg)
{
	uint64_t rng = 0x2545f4914f6cdd1dULL * ((uintptr_t)arg + 1);
	long my_audits = 0, my_transfers = 0;

	for (long i = 0; i < ops; i++) {
		uint64_t r = rng_next(&rng);
		int ret;

		if ((r >> 40) % 4 == 0) {
			if ((r >> 48) & 1) {
				check_ret(pthread_rwlock_rdlock(bank_rw), 0);
			} else {
				while ((ret = pthread_rwlock_tryrdlock(bank_rw)) == EBUSY)
					sched_yield();
				check_ret(ret, 0);
			}
			if (total() != NACCOUNTS * INITIAL)
				atomic_fetch_add(&violations, 1);
			my_audits++;
		} else {
			if ((r >> 48) & 1) {
				check_ret(pthread_rwlock_wrlock(bank_rw), 0);
			} else {
				while ((ret = pthread_rwlock_trywrlock(bank_rw)) == EBUSY)
					sched_yield();
				check_ret(ret, 0);
			}
			transfer(r);
			my_transfers++;
		}
		check_ret(pthread_rwlock_unlock(bank_rw), 0);
	}
	atomic_fetch_add(&audits, my_audits);
	atomic_fetch_add(&transfers, my_transfers);
	return NULL;
}

static void run(const char *name, void *(*fn)(void *))
{
	pthread_t t[NTHREADS];

	for (int i = 0; i < NACCOUNTS; i++)
		accounts[i] = INITIAL;
	atomic_store(&violations, 0);
	atomic_store(&audits, 0);
	atomic_store(&transfers, 0);
	for (int i = 0; i < NTHREADS; i++)
		t[i] = xthread(fn, (void *)(intptr_t)i);
	for (int i = 0; i < NTHREADS; i++)
		xjoin(t[i]);

	printf("test-stress-bank: %s: %ld transfers, %ld audits, %ld violations, final total %ld\n",
	       name, atomic_load(&transfers), atomic_load(&audits), atomic_load(&violations), total());
	check_eq(atomic_load(&audits) + atomic_load(&transfers), NTHREADS * ops);
	check_eq(atomic_load(&violations), 0);
	check_eq(total(), NACCOUNTS * INITIAL);
}

int main(void)
{
	test_start("test-stress-bank",
		   "4 threads x 1000000 (ELIDE_TEST_OPS) random transfers/audits on 64 accounts "
		   "under one mutex, then one rwlock of each kind: the total never changes");
	ops = ops_per_thread();
	printf("test-stress-bank: %d threads x %ld operations\n", NTHREADS, ops);
	run("global mutex", mutex_worker);
	run("global rwlock", rwlock_worker);

	pthread_rwlockattr_t attr;
	check_ret(pthread_rwlockattr_init(&attr), 0);
	check_ret(pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP), 0);
	check_ret(pthread_rwlock_init(&bank_rw_writers, &attr), 0);
	check_ret(pthread_rwlockattr_destroy(&attr), 0);
	bank_rw = &bank_rw_writers;
	run("global rwlock preferring writers", rwlock_worker);
	check_ret(pthread_rwlock_destroy(&bank_rw_writers), 0);
	printf("test-stress-bank: PASS\n");
	return 0;
}
