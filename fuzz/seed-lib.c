/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Built by `make fuzz` into a tiny shared object (no libc, with a build-id)
 * for fuzz-elfsym's seed corpus: data and code symbols, local and global,
 * an alias, the shapes elfsym names locks and call sites by.
 */
#include <stddef.h>

struct fake_mutex {
	int lock, count, owner, kind;
	long pad[3];
};

struct fake_mutex cache_lock;
static struct fake_mutex stats_lock = { 0, 0, 0, 1, { 0 } };
struct fake_mutex *const lock_table[2] = { &cache_lock, &stats_lock };

int worker_loop(int n);
int worker_loop(int n)
{
	int s = 0;

	for (int i = 0; i < n; i++)
		s += lock_table[i & 1]->kind;
	return s;
}

int worker_alias(int n) __attribute__((alias("worker_loop")));

static int helper(int x)
{
	return x * 3 + stats_lock.count;
}

int entry_point(void);
int entry_point(void)
{
	return helper(worker_loop(4));
}
