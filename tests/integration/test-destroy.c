/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Lock lifetimes: destroy and re-init the same memory many times, switching
 * the mutex type between cycles, while other threads use other locks.
 * libelide keeps per-lock state keyed by the lock, so stale state from the
 * previous life (an errorcheck mutex treated as an elidable default one, or
 * the other way round) shows up as wrong answers here.  Also: destroying a
 * busy default mutex returns EBUSY, and freeing locks without destroying
 * them (common in real programs) must not run the process out of anything.
 */
#include "testutil.h"

#define CYCLES 3000
#define LEAKED 6000
#define CYCLE_ITERS 200L
#define NWORKERS 2

enum { T_DEFAULT, T_ERRORCHECK, T_RECURSIVE, T_STATIC, T_NTYPES };

/* The lock under test this cycle; the same memory every cycle. */
static pthread_mutex_t slot_m;
static pthread_rwlock_t slot_rw;
static pthread_barrier_t go, stop;
static long slot_counter;          /* protected by slot_m */
static long slot_rw_counter;       /* protected by slot_rw */
static pthread_mutex_t *heap_m;    /* a heap lock, freed without destroy each cycle */
static _Atomic bool finished;

/* Background: unrelated locks in constant use. */
static pthread_mutex_t bg_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t bg_rw = PTHREAD_RWLOCK_INITIALIZER;
static long bg_m_counter, bg_rw_counter;
static _Atomic long bg_ops, bg_violations;

static void *cycle_worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_barrier_wait(&go);
		if (atomic_load(&finished))
			return NULL;
		for (long i = 0; i < CYCLE_ITERS; i++) {
			check_ret(pthread_mutex_lock(&slot_m), 0);
			slot_counter++;
			check_ret(pthread_mutex_unlock(&slot_m), 0);
			if (i & 1) {
				check_ret(pthread_rwlock_wrlock(&slot_rw), 0);
				slot_rw_counter++;
				check_ret(pthread_rwlock_unlock(&slot_rw), 0);
			} else {
				check_ret(pthread_rwlock_rdlock(&slot_rw), 0);
				check_ret(pthread_rwlock_unlock(&slot_rw), 0);
			}
			if (heap_m) {
				check_ret(pthread_mutex_lock(heap_m), 0);
				check_ret(pthread_mutex_unlock(heap_m), 0);
			}
		}
		pthread_barrier_wait(&stop);
	}
}

static void *bg_worker(void *arg)
{
	long n = 0;

	(void)arg;
	while (!atomic_load_explicit(&finished, memory_order_relaxed)) {
		long a, b;

		check_ret(pthread_mutex_lock(&bg_m), 0);
		a = ++bg_m_counter;
		b = bg_m_counter;
		check_ret(pthread_mutex_unlock(&bg_m), 0);
		if (a != b)
			atomic_fetch_add(&bg_violations, 1);
		check_ret(pthread_rwlock_wrlock(&bg_rw), 0);
		bg_rw_counter++;
		check_ret(pthread_rwlock_unlock(&bg_rw), 0);
		n++;
	}
	atomic_fetch_add(&bg_ops, n);
	return NULL;
}

static void init_slot(int type)
{
	pthread_mutexattr_t a;

	switch (type) {
	case T_STATIC:
		slot_m = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
		slot_rw = (pthread_rwlock_t)PTHREAD_RWLOCK_INITIALIZER;
		return;
	case T_DEFAULT:
		check_ret(pthread_mutex_init(&slot_m, NULL), 0);
		break;
	default:
		check_ret(pthread_mutexattr_init(&a), 0);
		check_ret(pthread_mutexattr_settype(&a, type == T_ERRORCHECK ?
						    PTHREAD_MUTEX_ERRORCHECK : PTHREAD_MUTEX_RECURSIVE), 0);
		check_ret(pthread_mutex_init(&slot_m, &a), 0);
		check_ret(pthread_mutexattr_destroy(&a), 0);
		break;
	}
	check_ret(pthread_rwlock_init(&slot_rw, NULL), 0);
}

/* The answers this cycle's type owes, right after contention (recorded: testutil.h). */
static void check_slot(int type, int cycle)
{
	struct results rs = { 0 };

	switch (type) {
	case T_DEFAULT:
	case T_STATIC:
		check_ret(pthread_mutex_lock(&slot_m), 0);
		record(&rs, pthread_mutex_trylock(&slot_m), EBUSY);
		record(&rs, pthread_mutex_destroy(&slot_m), EBUSY);
		check_ret(pthread_mutex_unlock(&slot_m), 0);
		break;
	case T_ERRORCHECK:
		check_ret(pthread_mutex_lock(&slot_m), 0);
		record(&rs, pthread_mutex_lock(&slot_m), EDEADLK);
		record(&rs, pthread_mutex_destroy(&slot_m), EBUSY);
		record(&rs, pthread_mutex_unlock(&slot_m), 0);
		record(&rs, pthread_mutex_unlock(&slot_m), EPERM);
		break;
	case T_RECURSIVE:
		check_ret(pthread_mutex_lock(&slot_m), 0);
		record(&rs, pthread_mutex_lock(&slot_m), 0);
		record(&rs, pthread_mutex_trylock(&slot_m), 0);
		record(&rs, pthread_mutex_destroy(&slot_m), EBUSY);
		for (int i = 0; i < 3; i++)
			record(&rs, pthread_mutex_unlock(&slot_m), 0);
		record(&rs, pthread_mutex_unlock(&slot_m), EPERM);
		break;
	}
	results_check(&rs);
	if (cycle % 1000 == 0)
		printf("test-destroy: cycle %d ok\n", cycle);
}

int main(void)
{
	pthread_t cw[NWORKERS], bg[2];

	test_start("test-destroy",
		   "destroy/re-init cycles of mutexes (changing type) and rwlocks beside busy locks; "
		   "destroy of a busy default mutex is EBUSY; locks freed without destroy");
	pthread_barrier_init(&go, NULL, NWORKERS + 1);
	pthread_barrier_init(&stop, NULL, NWORKERS + 1);
	for (int i = 0; i < NWORKERS; i++)
		cw[i] = xthread(cycle_worker, NULL);
	for (int i = 0; i < 2; i++)
		bg[i] = xthread(bg_worker, NULL);

	for (int cycle = 0; cycle < CYCLES + LEAKED; cycle++) {
		int type = cycle % T_NTYPES;
		bool leak = cycle >= CYCLES;

		init_slot(type);
		slot_counter = 0;
		slot_rw_counter = 0;
		if (leak) {
			/* A fresh heap lock per cycle, freed without destroy (more than max_locks). */
			heap_m = xmalloc(sizeof(*heap_m));
			memset(heap_m, 0x5a, sizeof(*heap_m));
			check_ret(pthread_mutex_init(heap_m, NULL), 0);
		}
		pthread_barrier_wait(&go);
		pthread_barrier_wait(&stop);
		check_eq(slot_counter, NWORKERS * CYCLE_ITERS);
		check_eq(slot_rw_counter, NWORKERS * CYCLE_ITERS / 2);
		check_slot(type, cycle);

		/* A write-held rwlock refuses other writers; then it can be destroyed. */
		check_ret(pthread_rwlock_wrlock(&slot_rw), 0);
		check_ret(pthread_rwlock_trywrlock(&slot_rw), EBUSY);
		check_ret(pthread_rwlock_unlock(&slot_rw), 0);
		check_ret(pthread_rwlock_destroy(&slot_rw), 0);
		check_ret(pthread_mutex_destroy(&slot_m), 0);
		/*
		 * Scribble over the memory, as reused heap memory would be: init
		 * must not trust what it finds there, nor lean on the previous life.
		 */
		memset(&slot_m, 0xa5, sizeof(slot_m));
		memset(&slot_rw, 0xa5, sizeof(slot_rw));
		if (leak) {
			free(heap_m);
			heap_m = NULL;
		}
	}

	atomic_store(&finished, true);
	pthread_barrier_wait(&go);
	for (int i = 0; i < NWORKERS; i++)
		xjoin(cw[i]);
	for (int i = 0; i < 2; i++)
		xjoin(bg[i]);
	check_eq(atomic_load(&bg_violations), 0);
	check_eq(bg_m_counter, atomic_load(&bg_ops));
	check_eq(bg_rw_counter, atomic_load(&bg_ops));
	/* The background locks, too, still behave after all that. */
	hammer_lock(&bg_m, NULL, 1, 2, 20000);
	hammer_lock(NULL, &bg_rw, 1, 2, 20000);
	printf("test-destroy: %d cycles, %ld background operations\n", CYCLES + LEAKED,
	       atomic_load(&bg_ops));
	printf("test-destroy: PASS\n");
	return 0;
}
