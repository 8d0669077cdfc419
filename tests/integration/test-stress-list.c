/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A circular doubly-linked list under one mutex: threads insert and remove
 * at both ends and in the middle, a checker walks the whole list under the
 * lock and verifies every prev/next pair, every node's magic and the count.
 * At the end the count equals inserts minus removes.
 */
#include "testutil.h"

#define NTHREADS 4
#define OPS 250000L
#define CHECKS 400
#define MAGIC 0x6c697374u /* "list" */

struct node {
	struct node *prev, *next;
	unsigned magic;
	long value;
};

static struct node head = { &head, &head, MAGIC, -1 };
static long count;                        /* nodes in the list, protected by m */
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static _Atomic long inserts, removes, walk_errors;
static _Atomic bool stop;
static long ops = OPS;

static long ops_per_thread(void)
{
	return test_ops_per_thread(OPS);
}

static void link_after(struct node *pos, struct node *n)
{
	n->prev = pos;
	n->next = pos->next;
	pos->next->prev = n;
	pos->next = n;
}

static void unlink_node(struct node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = NULL;
}

/* Under m: the whole structure; returns the number of problems seen. */
static long walk(void)
{
	long n = 0, errors = 0;
	struct node *p = &head;

	do {
		if (p->next->prev != p || p->prev->next != p || p->magic != MAGIC)
			return 1; /* links unusable: stop before following garbage */
		p = p->next;
		if (++n > count + 1)
			return 1; /* more nodes than counted, maybe a cycle */
	} while (p != &head);
	if (n - 1 != count)
		errors++;
	return errors;
}

static void *worker(void *arg)
{
	uint64_t rng = 0x9e3779b97f4a7c15ULL * ((uintptr_t)arg + 1);
	struct node *spare = NULL;
	long my_ins = 0, my_rem = 0;

	for (long i = 0; i < ops; i++) {
		uint64_t r = rng_next(&rng);
		struct node *victim = NULL;

		/* Allocate outside the lock: malloc must not run inside a critical section. */
		if (!spare) {
			spare = xmalloc(sizeof(*spare));
			spare->magic = MAGIC;
			spare->value = (long)(r >> 1);
		}

		check_ret(pthread_mutex_lock(&m), 0);
		/* Drift towards ~128 nodes: long enough to matter, short enough to walk. */
		if (count == 0 || (count < 128 ? r % 3 != 0 : r % 3 == 0)) {
			struct node *pos = &head;

			if ((r >> 8) % 3 == 1)
				pos = head.prev;          /* tail */
			else if ((r >> 8) % 3 == 2 && count)
				pos = head.next->next;    /* second or head again */
			link_after(pos, spare);
			spare = NULL;
			count++;
			my_ins++;
		} else {
			victim = (r >> 8) & 1 ? head.next : head.prev;
			unlink_node(victim);
			count--;
			my_rem++;
		}
		check_ret(pthread_mutex_unlock(&m), 0);

		if (victim) {
			if (victim->magic != MAGIC)
				atomic_fetch_add(&walk_errors, 1);
			victim->magic = 0;
			free(victim);
		}
	}
	free(spare);
	atomic_fetch_add(&inserts, my_ins);
	atomic_fetch_add(&removes, my_rem);
	return NULL;
}

static void *checker(void *arg)
{
	long walks = 0;

	(void)arg;
	while (!atomic_load(&stop) || walks < CHECKS) {
		check_ret(pthread_mutex_lock(&m), 0);
		if (walk())
			atomic_fetch_add(&walk_errors, 1);
		check_ret(pthread_mutex_unlock(&m), 0);
		walks++;
		if (walks >= CHECKS)
			sched_yield();
	}
	return (void *)(intptr_t)walks;
}

int main(void)
{
	pthread_t t[NTHREADS], c;
	long walks, n = 0;

	test_start("test-stress-list",
		   "4 threads insert/remove on a doubly-linked list under one mutex; a checker "
		   "verifies links and count under the lock; final count = inserts - removes");
	ops = ops_per_thread();
	printf("test-stress-list: %d threads x %ld operations (ELIDE_TEST_OPS)\n", NTHREADS, ops);
	c = xthread(checker, NULL);
	for (int i = 0; i < NTHREADS; i++)
		t[i] = xthread(worker, (void *)(intptr_t)i);
	for (int i = 0; i < NTHREADS; i++)
		xjoin(t[i]);
	atomic_store(&stop, true);
	walks = (long)(intptr_t)xjoin(c);

	printf("test-stress-list: %ld inserts, %ld removes, %ld nodes left, %ld checker walks\n",
	       atomic_load(&inserts), atomic_load(&removes), count, walks);
	check_eq(atomic_load(&walk_errors), 0);
	check_eq(walk(), 0);
	check_eq(count, atomic_load(&inserts) - atomic_load(&removes));
	check_eq(atomic_load(&inserts) + atomic_load(&removes), NTHREADS * ops);
	for (struct node *p = head.next; p != &head; n++) {
		struct node *next = p->next;

		free(p);
		p = next;
	}
	check_eq(n, count);
	printf("test-stress-list: PASS\n");
	return 0;
}
