/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Lock records: one per lock that was ever contended, annotated, or elided
 * by mode=on.  Records live in one mmap'ed array that never moves, so a
 * lock can carry its record index and the fast path needs no lookup.
 *
 * Adaptation lives here too.  Everything in this file runs off the
 * committing fast path: on contention, on aborts, and on 1 in opts.sample
 * commits.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "elide-internal.h"

/* A spinlock of our own: the registry must never call the functions it wraps. */
static atomic_flag registry_lock = ATOMIC_FLAG_INIT;
static uint32_t free_head;  /* index of the first free record, 0 = none */
static uint32_t next_unused = REC_OVERFLOW + 1;

static void registry_lock_take(void)
{
	while (atomic_flag_test_and_set_explicit(&registry_lock, memory_order_acquire))
		_mm_pause();
}

static void registry_lock_release(void)
{
	atomic_flag_clear_explicit(&registry_lock, memory_order_release);
}

int registry_init(void)
{
	size_t size = (size_t)elide.opts.max_locks * sizeof(struct lock_rec);
	void *p;

	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	elide.recs = p;
	elide.nrecs = elide.opts.max_locks;
	atomic_store_explicit(&elide.recs[REC_OVERFLOW].gate,
			      elide.opts.mode == ELIDE_MODE_ON ? GATE_ELIDE : GATE_WATCH,
			      memory_order_relaxed);
	strcpy(elide.recs[REC_OVERFLOW].name, "(overflow)");
	return 0;
}

struct lock_rec *rec_of_idx(uint16_t idx)
{
	if (unlikely(idx >= elide.nrecs))
		return &elide.recs[REC_OVERFLOW];
	return &elide.recs[idx];
}

static uint32_t rec_alloc(void)
{
	uint32_t idx;

	if (free_head) {
		idx = free_head;
		free_head = elide.recs[idx].next_free;
		return idx;
	}
	if (next_unused < elide.nrecs)
		return next_unused++;
	return 0;
}

static void rec_reset(struct lock_rec *rec, void *lock, enum lock_kind kind, void *callsite)
{
	memset(rec->stats, 0, sizeof(rec->stats));
	memset(rec->name, 0, sizeof(rec->name));
	rec->kind = (uint8_t)kind;
	rec->callsite = callsite;
	atomic_store_explicit(&rec->contended_watch, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->window_aborts, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->window_commits, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->backoff_level, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->policy, ELIDE_POLICY_ADAPTIVE, memory_order_relaxed);
	if (elide.opts.mode == ELIDE_MODE_ON) {
		atomic_store_explicit(&rec->reason, REASON_MODE_ON, memory_order_relaxed);
		atomic_store_explicit(&rec->gate, GATE_ELIDE, memory_order_relaxed);
	} else {
		atomic_store_explicit(&rec->reason, REASON_UNCONTENDED, memory_order_relaxed);
		atomic_store_explicit(&rec->gate, GATE_WATCH, memory_order_relaxed);
	}
	atomic_store_explicit(&rec->addr, lock, memory_order_release);
}

/*
 * Return the lock's record, creating it when the lock has none.  Two threads
 * may race here on the first contention of one lock: the registry lock makes
 * the second one see the first one's index.  When the table is full the lock
 * shares the overflow record.
 */
struct lock_rec *registry_attach(void *lock, uint16_t *idx_ptr, enum lock_kind kind, void *callsite)
{
	uint16_t idx;
	uint32_t fresh;

	idx = __atomic_load_n(idx_ptr, __ATOMIC_ACQUIRE);
	if (idx)
		return rec_of_idx(idx);

	registry_lock_take();
	idx = __atomic_load_n(idx_ptr, __ATOMIC_RELAXED);
	if (idx) {
		registry_lock_release();
		return rec_of_idx(idx);
	}
	fresh = rec_alloc();
	if (!fresh) {
		__atomic_store_n(idx_ptr, (uint16_t)REC_OVERFLOW, __ATOMIC_RELEASE);
		registry_lock_release();
		return &elide.recs[REC_OVERFLOW];
	}
	rec_reset(&elide.recs[fresh], lock, kind, callsite);
	__atomic_store_n(idx_ptr, (uint16_t)fresh, __ATOMIC_RELEASE);
	registry_lock_release();
	return &elide.recs[fresh];
}

/*
 * The lock is being destroyed: its statistics move to the overflow record
 * (so the exit report still counts them) and the record is recycled.
 */
void registry_detach(uint16_t *idx_ptr)
{
	uint16_t idx = __atomic_exchange_n(idx_ptr, 0, __ATOMIC_ACQ_REL);
	struct lock_rec *rec, *overflow = &elide.recs[REC_OVERFLOW];

	if (idx <= REC_OVERFLOW || idx >= elide.nrecs)
		return;
	rec = &elide.recs[idx];
	for (unsigned i = 0; i < STAT_NSTATS; i++)
		atomic_fetch_add_explicit(&overflow->stats[i],
					  atomic_load_explicit(&rec->stats[i], memory_order_relaxed),
					  memory_order_relaxed);
	registry_lock_take();
	atomic_store_explicit(&rec->addr, NULL, memory_order_release);
	rec->next_free = free_head;
	free_head = idx;
	registry_lock_release();
}

void registry_fork_prepare(void)
{
	registry_lock_take();
}

void registry_fork_parent(void)
{
	registry_lock_release();
}

void registry_fork_child(void)
{
	/* Only the forking thread exists; nobody else can hold the lock. */
	atomic_flag_clear_explicit(&registry_lock, memory_order_release);
}

void rec_count(struct lock_rec *rec, enum lock_stat stat, uint64_t n)
{
	atomic_fetch_add_explicit(&rec->stats[stat], n, memory_order_relaxed);
}

static bool rec_adapts(const struct lock_rec *rec)
{
	return elide.opts.mode == ELIDE_MODE_ADAPTIVE &&
	       atomic_load_explicit(&rec->policy, memory_order_relaxed) == ELIDE_POLICY_ADAPTIVE;
}

void rec_set_policy(struct lock_rec *rec, int policy)
{
	int32_t gate;
	uint8_t reason;

	switch (policy) {
	case ELIDE_POLICY_ALWAYS:
		gate = GATE_ELIDE;
		reason = REASON_POLICY_ALWAYS;
		break;
	case ELIDE_POLICY_NEVER:
		gate = GATE_NEVER;
		reason = REASON_POLICY_NEVER;
		break;
	default:
		policy = ELIDE_POLICY_ADAPTIVE;
		gate = elide.opts.mode == ELIDE_MODE_ON ? GATE_ELIDE : GATE_WATCH;
		reason = elide.opts.mode == ELIDE_MODE_ON ? REASON_MODE_ON : REASON_UNCONTENDED;
		break;
	}
	atomic_store_explicit(&rec->policy, (uint8_t)policy, memory_order_relaxed);
	atomic_store_explicit(&rec->reason, reason, memory_order_relaxed);
	atomic_store_explicit(&rec->backoff_level, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->gate, gate, memory_order_release);
}

/* A real acquisition found the lock held: after opts.contention of those, elide. */
void rec_note_contended(struct lock_rec *rec)
{
	int32_t watch = GATE_WATCH;
	uint32_t n;

	rec_count(rec, STAT_CONTENDED, 1);
	if (!rec_adapts(rec))
		return;
	n = atomic_fetch_add_explicit(&rec->contended_watch, 1, memory_order_relaxed) + 1;
	if (n < elide.opts.contention)
		return;
	if (atomic_compare_exchange_strong_explicit(&rec->gate, &watch, GATE_ELIDE,
						    memory_order_relaxed, memory_order_relaxed))
		atomic_store_explicit(&rec->reason, REASON_CONTENDED, memory_order_relaxed);
}

/*
 * Stop eliding for a while: opts.skip real acquisitions, doubling with every
 * back-off that follows without commits in between, up to opts.skip_max.
 */
void rec_back_off(struct lock_rec *rec)
{
	uint8_t level;
	uint64_t skip;
	int32_t expected = GATE_ELIDE;

	if (!rec_adapts(rec))
		return;
	level = atomic_load_explicit(&rec->backoff_level, memory_order_relaxed);
	skip = (uint64_t)elide.opts.skip << (level < 40 ? level : 40);
	if (skip > elide.opts.skip_max)
		skip = elide.opts.skip_max;
	if (skip > INT32_MAX)
		skip = INT32_MAX;
	if (atomic_compare_exchange_strong_explicit(&rec->gate, &expected, (int32_t)skip,
						    memory_order_relaxed, memory_order_relaxed) &&
	    level < 63)
		atomic_store_explicit(&rec->backoff_level, (uint8_t)(level + 1), memory_order_relaxed);
}

/*
 * HotSpot-style cut-off: every opts.window aborts, compare aborts with the
 * (sampled) commits of the same window and back off when aborts dominate.
 */
void rec_note_abort(struct lock_rec *rec, uint32_t status, uint64_t cycles)
{
	enum elide_abort_cause cause = elide_abort_classify(status);
	uint32_t aborts;
	uint64_t commits;

	rec_count(rec, STAT_ABORT_FIRST + cause, 1);
	rec_count(rec, STAT_ATTEMPTS, 1);
	if (cycles)
		rec_count(rec, STAT_CYCLES_LOST, cycles);
	aborts = atomic_fetch_add_explicit(&rec->window_aborts, 1, memory_order_relaxed) + 1;
	if (aborts < elide.opts.window)
		return;
	atomic_store_explicit(&rec->window_aborts, 0, memory_order_relaxed);
	commits = atomic_exchange_explicit(&rec->window_commits, 0, memory_order_relaxed);
	if ((double)aborts > elide.opts.abort_ratio * (double)(aborts + commits))
		rec_back_off(rec);
}

void rec_note_commit_sample(struct lock_rec *rec)
{
	uint8_t level;

	rec_count(rec, STAT_COMMITS, elide.opts.sample);
	rec_count(rec, STAT_ATTEMPTS, elide.opts.sample);
	rec_count(rec, STAT_ACQUIRED, elide.opts.sample);
	atomic_fetch_add_explicit(&rec->window_commits, elide.opts.sample, memory_order_relaxed);
	/* Commits show elision pays again: shorten the next back-off. */
	level = atomic_load_explicit(&rec->backoff_level, memory_order_relaxed);
	if (level)
		atomic_store_explicit(&rec->backoff_level, (uint8_t)(level - 1), memory_order_relaxed);
}

/*
 * Attributes typed PTHREAD_MUTEX_NORMAL explicitly.  glibc gives NORMAL and
 * DEFAULT the same kind value, so the only place to tell them apart is
 * pthread_mutexattr_settype(); remember those attributes by address.
 */
#define NORMAL_ATTRS_MAX 256
static const pthread_mutexattr_t *normal_attrs[NORMAL_ATTRS_MAX];

int attr_mark_normal(const pthread_mutexattr_t *attr, bool normal)
{
	int free_slot = -1;
	int ret = 0;

	registry_lock_take();
	for (int i = 0; i < NORMAL_ATTRS_MAX; i++) {
		if (normal_attrs[i] == attr) {
			if (!normal)
				normal_attrs[i] = NULL;
			goto out;
		}
		if (!normal_attrs[i] && free_slot < 0)
			free_slot = i;
	}
	if (!normal)
		goto out;
	if (free_slot < 0) {
		ret = -ENOSPC;
		goto out;
	}
	normal_attrs[free_slot] = attr;
out:
	registry_lock_release();
	return ret;
}

bool attr_is_normal(const pthread_mutexattr_t *attr)
{
	bool found = false;

	if (!attr)
		return false;
	registry_lock_take();
	for (int i = 0; i < NORMAL_ATTRS_MAX && !found; i++)
		found = normal_attrs[i] == attr;
	registry_lock_release();
	return found;
}
