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
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "elide-internal.h"

/*
 * The registry takes no lock, not even a spinlock of its own: it runs inside
 * pthread_mutex_init/destroy and on a lock's first contention, where a
 * SCHED_FIFO thread preempting a spinning holder on one CPU, or a signal
 * handler interrupting one, would wait forever.  Free records form a stack
 * whose top carries a tag (ABA), fresh ones come from a bump counter, and
 * a lock's index is published with one CAS.
 */
static _Atomic uint64_t free_top;  /* tag << 32 | index of the first free record, 0 = none */
static _Atomic uint32_t next_unused = REC_OVERFLOW + 1;

static void free_push(uint32_t idx)
{
	uint64_t top = atomic_load_explicit(&free_top, memory_order_relaxed);
	uint64_t next;

	do {
		atomic_store_explicit(&elide.recs[idx].next_free, (uint32_t)top, memory_order_relaxed);
		next = ((top >> 32) + 1) << 32 | idx;
	} while (!atomic_compare_exchange_weak_explicit(&free_top, &top, next, memory_order_release,
							memory_order_relaxed));
}

static uint32_t free_pop(void)
{
	uint64_t top = atomic_load_explicit(&free_top, memory_order_acquire);
	uint64_t next;
	uint32_t idx;

	do {
		idx = (uint32_t)top;
		if (idx == 0)
			return 0;
		/* May read a stale link while another thread pops: the tag then
		 * makes this CAS fail and the loop reads again. */
		next = ((top >> 32) + 1) << 32 |
		       atomic_load_explicit(&elide.recs[idx].next_free, memory_order_relaxed);
	} while (!atomic_compare_exchange_weak_explicit(&free_top, &top, next, memory_order_acquire,
							memory_order_acquire));
	return idx;
}

/* The gate and reason a policy starts from. */
static void policy_gate(int policy, int32_t *gate, uint8_t *reason)
{
	/* elided turned the whole process off: that beats every lock policy. */
	if (elide.opts.mode == ELIDE_MODE_OFF) {
		*gate = GATE_NEVER;
		*reason = ELIDE_SEG_REASON_PROCESS_OFF;
		return;
	}
	switch (policy) {
	case ELIDE_POLICY_ALWAYS:
		*gate = GATE_ELIDE;
		*reason = ELIDE_SEG_REASON_POLICY_ALWAYS;
		return;
	case ELIDE_POLICY_NEVER:
		*gate = GATE_NEVER;
		*reason = ELIDE_SEG_REASON_POLICY_NEVER;
		return;
	default:
		*gate = elide.opts.mode == ELIDE_MODE_ON ? GATE_ELIDE : GATE_WATCH;
		*reason = elide.opts.mode == ELIDE_MODE_ON ? ELIDE_SEG_REASON_MODE_ON : ELIDE_SEG_REASON_UNCONTENDED;
		return;
	}
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
	{
		int32_t gate;
		uint8_t reason;

		policy_gate(ELIDE_POLICY_ADAPTIVE, &gate, &reason);
		atomic_store_explicit(&elide.recs[REC_OVERFLOW].gate, gate, memory_order_relaxed);
		atomic_store_explicit(&elide.recs[REC_OVERFLOW].reason, reason, memory_order_relaxed);
	}
	return 0;
}

/* The overflow entry, once the segment (or its stand-in) is mapped. */
void registry_init_overflow_entry(void)
{
	struct elide_seg_lock *e = &elide.seg_locks[REC_OVERFLOW];

	e->kind = ELIDE_SEG_KIND_OVERFLOW;
	strcpy(e->name, "(overflow)");
	rec_publish_state(&elide.recs[REC_OVERFLOW]);
}

static uint32_t state_of_gate(int32_t gate)
{
	if (gate == GATE_ELIDE)
		return ELIDE_SEG_STATE_ELIDING;
	if (gate == GATE_NEVER)
		return ELIDE_SEG_STATE_OFF_POLICY;
	if (gate == GATE_WATCH)
		return ELIDE_SEG_STATE_PLAIN;
	return ELIDE_SEG_STATE_OFF_ADAPT;
}

/* Copy the record's state into its segment entry, for readers outside. */
void rec_publish_state(struct lock_rec *rec)
{
	struct elide_seg_lock *e = rec_entry(rec);
	int32_t gate = atomic_load_explicit(&rec->gate, memory_order_relaxed);
	uint32_t state = state_of_gate(gate);
	uint32_t reason = atomic_load_explicit(&rec->reason, memory_order_relaxed);
	uint32_t policy = atomic_load_explicit(&rec->policy, memory_order_relaxed);
	unsigned changed = 0;

	if (__atomic_load_n(&elide.path, __ATOMIC_RELAXED) == PATH_OBSERVE) {
		state = ELIDE_SEG_STATE_PLAIN;
		reason = ELIDE_SEG_REASON_WATCHING;
	} else if (!elide.enabled || elide.opts.mode == ELIDE_MODE_OFF) {
		state = ELIDE_SEG_STATE_PLAIN;
		reason = ELIDE_SEG_REASON_PROCESS_OFF;
	} else if (state == ELIDE_SEG_STATE_OFF_ADAPT) {
		reason = ELIDE_SEG_REASON_ABORTS;
	}
	/* Called on sampled paths too: a store of an unchanged value would
	 * still take the line away from readers. */
	if (__atomic_load_n(&e->state, __ATOMIC_RELAXED) != state) {
		__atomic_store_n(&e->state, state, __ATOMIC_RELAXED);
		changed++;
	}
	if (__atomic_load_n(&e->reason, __ATOMIC_RELAXED) != reason) {
		__atomic_store_n(&e->reason, reason, __ATOMIC_RELAXED);
		changed++;
	}
	if (__atomic_load_n(&e->policy, __ATOMIC_RELAXED) != policy)
		__atomic_store_n(&e->policy, policy, __ATOMIC_RELAXED);
	else if (changed == 0)
		return;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	rec_touch(rec);
}

static uint32_t rec_alloc(void)
{
	uint32_t idx = free_pop();

	if (idx)
		return idx;
	idx = atomic_load_explicit(&next_unused, memory_order_relaxed);
	do {
		if (idx >= elide.nrecs)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(&next_unused, &idx, idx + 1, memory_order_relaxed,
							memory_order_relaxed));
	return idx;
}

/*
 * What elided learned about a new lock in earlier runs of the program: the
 * verdict of the first hint in the control block that names the lock or its
 * call site, 0 for none.  Runs once per record, at its creation, never on
 * the fast path.  elided may rewrite the table meanwhile (under a seqlock
 * that this does not take): every field is read once and checked, so a torn
 * hint gives at worst another valid verdict, and either is safe.
 */
static uint32_t hint_verdict(const void *lock, const void *callsite)
{
	const struct elide_seg_control *c = elide.seg_control;
	uint32_t n;

	if (!c)
		return 0;
	/* Before elided's first control block, the files (learn.c). */
	if (__atomic_load_n(&c->generation, __ATOMIC_ACQUIRE) == 0)
		return learn_hint_verdict(lock, callsite);
	n = __atomic_load_n(&c->nhints, __ATOMIC_RELAXED);
	if (n > ELIDE_SEG_MAX_HINTS)
		n = ELIDE_SEG_MAX_HINTS;
	for (uint32_t i = 0; i < n; i++) {
		const struct elide_seg_hint *h = &c->hints[i];
		uint32_t match = __atomic_load_n(&h->match, __ATOMIC_RELAXED);
		uint64_t addr, want;
		uint32_t verdict;

		if (match == ELIDE_SEG_HINT_LOCK_ADDR)
			want = (uint64_t)(uintptr_t)lock;
		else if (match == ELIDE_SEG_HINT_CALLSITE)
			want = (uint64_t)(uintptr_t)callsite;
		else
			continue;
		addr = __atomic_load_n(&h->addr, __ATOMIC_RELAXED);
		if (addr == 0 || addr != want)
			continue;
		verdict = __atomic_load_n(&h->verdict, __ATOMIC_RELAXED);
		if (verdict == ELIDE_SEG_HINT_NEVER || verdict == ELIDE_SEG_HINT_ELIDES)
			return verdict;
	}
	return 0;
}

/*
 * Prepare a record that no lock points at yet; readers outside see it only
 * once rec_publish() names its kind.  `hint` is the lock's learned verdict
 * (hint_verdict()), 0 for none.
 */
static void rec_reset(struct lock_rec *rec, enum lock_kind kind, void *callsite, uint32_t hint)
{
	struct elide_seg_lock *e = rec_entry(rec);
	bool never = hint == ELIDE_SEG_HINT_NEVER;
	uint32_t ctl = never ? ELIDE_POLICY_NEVER + 1 : ELIDE_SEG_CTL_NONE;
	int policy = never ? ELIDE_POLICY_NEVER : ELIDE_POLICY_ADAPTIVE;
	int32_t gate;
	uint8_t reason;

	memset(e->stats, 0, sizeof(e->stats));
	memset(e->name, 0, sizeof(e->name));
	e->addr = 0;
	e->callsite = (uint64_t)(uintptr_t)callsite;
	rec->kind = (uint8_t)kind;
	rec->hard_never = false;
	/* A recycled entry must not inherit a decision about its previous lock.
	 * A learned "never" starts out as if elided had written it and
	 * registry_apply_lock_decisions() had applied it: elided reading the
	 * entry sees where it came from, and its later writes work as ever. */
	__atomic_store_n(&e->ctl_source, never ? ELIDE_SEG_SOURCE_LEARNED : ELIDE_SEG_SOURCE_NONE, __ATOMIC_RELAXED);
	__atomic_store_n(&e->ctl_policy, ctl, __ATOMIC_RELAXED);
	rec->ctl_applied = ctl;
	atomic_store_explicit(&rec->contended_watch, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->window_aborts, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->window_commits, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->backoff_level, 0, memory_order_relaxed);
	/* A new lock's skips start at 64 with a span of its own. */
	atomic_store_explicit(&rec->skip_stamp, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->skip_span, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->skip_shift, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->policy, (uint8_t)policy, memory_order_relaxed);
	atomic_store_explicit(&rec->own_policy, ELIDE_POLICY_ADAPTIVE, memory_order_relaxed);
	policy_gate(policy, &gate, &reason);
	if (never) {
		reason = ELIDE_SEG_REASON_DAEMON;
	} else if (hint == ELIDE_SEG_HINT_ELIDES && gate == GATE_WATCH) {
		/* Known to elide well: no contention warm-up (adaptive mode
		 * only: mode=on elides anyway, mode=off never). */
		gate = GATE_ELIDE;
		reason = ELIDE_SEG_REASON_CONTENDED;
	}
	atomic_store_explicit(&rec->reason, reason, memory_order_relaxed);
	atomic_store_explicit(&rec->gate, gate, memory_order_relaxed);
}

/* The lock now points at the record: make it visible to elided. */
static void rec_publish(struct lock_rec *rec, void *lock)
{
	struct elide_seg_lock *e = rec_entry(rec);
	uint32_t idx = rec_index(rec);
	uint32_t high;

	/* The record first, then its entry: a forked child making its segment
	 * file meanwhile (registry_republish()) either sees the record or
	 * misses it, and then these writes land in the file. */
	atomic_store_explicit(&rec->addr, lock, memory_order_release);
	e->addr = (uint64_t)(uintptr_t)lock;
	rec_publish_state(rec);
	__atomic_store_n(&e->kind, (uint32_t)rec->kind, __ATOMIC_RELEASE);
	high = __atomic_load_n(&elide.seg_header->lock_high_water, __ATOMIC_RELAXED);
	while (idx >= high && !__atomic_compare_exchange_n(&elide.seg_header->lock_high_water, &high, idx + 1,
							   true, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	rec_touch(rec);
}

/*
 * The lock's own record, created when the lock has none; NULL when the
 * table (or the runtime directory) is full, *err then -ENOSPC (or the
 * reservation's error), or -EAGAIN when a forked child's segment file is
 * being made by another thread this moment and the record would lie beyond
 * it.  Two threads may race on the first contention of one lock: the one
 * whose CAS publishes the index wins and the other returns its spare
 * record.  *created says whether this call made the record.  An index that
 * is not a record of its own (the overflow's, or garbage in memory reused
 * without pthread_*_init) is left alone and answered with NULL.  `hints`:
 * the lock's type may be elided, so a verdict learned by elided applies (a
 * hint must not make a NORMAL or recursive lock elidable, not even for the
 * moment before its caller marks the type).
 */
static struct lock_rec *attach_own(void *lock, uint16_t *idx_ptr, enum lock_kind kind, void *callsite,
				   bool hints, bool *created, int *err)
{
	uint16_t idx;
	uint32_t fresh;
	int r;

	if (created)
		*created = false;
	*err = -ENOSPC;
	/* A record to publish: a forked child makes its segment file first. */
	segment_need();
	idx = __atomic_load_n(idx_ptr, __ATOMIC_ACQUIRE);
	if (idx)
		return idx > REC_OVERFLOW && idx < elide.nrecs ? &elide.recs[idx] : NULL;
	fresh = rec_alloc();
	if (!fresh)
		return NULL;
	r = segment_reserve(fresh);
	if (r < 0) {
		/* No room in the runtime directory for its entry, or not now. */
		free_push(fresh);
		*err = r;
		return NULL;
	}
	rec_reset(&elide.recs[fresh], kind, callsite, hints ? hint_verdict(lock, callsite) : 0);
	if (!__atomic_compare_exchange_n(idx_ptr, &idx, (uint16_t)fresh, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		free_push(fresh);
		return idx > REC_OVERFLOW && idx < elide.nrecs ? &elide.recs[idx] : NULL;
	}
	rec_publish(&elide.recs[fresh], lock);
	if (created)
		*created = true;
	return &elide.recs[fresh];
}

struct lock_rec *registry_attach_own(void *lock, uint16_t *idx_ptr, enum lock_kind kind, void *callsite,
				     bool elidable, bool *created)
{
	int err;

	return attach_own(lock, idx_ptr, kind, callsite, elidable, created, &err);
}

/* The lock's record, or the shared overflow record when the table is full;
 * for locks of a type libelide elides (contention, mode=on). */
struct lock_rec *registry_attach(void *lock, uint16_t *idx_ptr, enum lock_kind kind, void *callsite)
{
	int err;
	struct lock_rec *rec = attach_own(lock, idx_ptr, kind, callsite, true, NULL, &err);
	uint16_t idx = 0;

	if (rec)
		return rec;
	/* Not now (a forked child's file is being made): this acquisition
	 * counts in the overflow record, and the lock gets its own record when
	 * next contended. */
	if (err == -EAGAIN)
		return &elide.recs[REC_OVERFLOW];
	if (!__atomic_compare_exchange_n(idx_ptr, &idx, (uint16_t)REC_OVERFLOW, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return rec_of_idx(idx);
	return &elide.recs[REC_OVERFLOW];
}

/* Records handed out so far lie below this index. */
uint32_t registry_records_end(void)
{
	return atomic_load_explicit(&next_unused, memory_order_seq_cst);
}

/*
 * A forked child's segment file has just replaced its private copy, and
 * other threads may have written lock entries into the copy after it was
 * copied: publish every live record's identity and state again (records
 * below `end`).  A record published after we look writes its entry into
 * the file itself (rec_publish() stores the record before the entry).
 */
void registry_republish(uint32_t end)
{
	if (end > elide.nrecs)
		end = elide.nrecs;
	for (uint32_t i = REC_OVERFLOW + 1; i < end; i++) {
		struct lock_rec *rec = &elide.recs[i];
		void *lock = atomic_load_explicit(&rec->addr, memory_order_acquire);
		struct elide_seg_lock *e = &elide.seg_locks[i];
		uint32_t high;

		if (!lock)
			continue;
		if (__atomic_load_n(&e->addr, __ATOMIC_RELAXED) != (uint64_t)(uintptr_t)lock)
			__atomic_store_n(&e->addr, (uint64_t)(uintptr_t)lock, __ATOMIC_RELAXED);
		rec_publish_state(rec);
		if (__atomic_load_n(&e->kind, __ATOMIC_RELAXED) != rec->kind)
			__atomic_store_n(&e->kind, (uint32_t)rec->kind, __ATOMIC_RELEASE);
		high = __atomic_load_n(&elide.seg_header->lock_high_water, __ATOMIC_RELAXED);
		while (i >= high && !__atomic_compare_exchange_n(&elide.seg_header->lock_high_water, &high, i + 1,
								 true, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		rec_touch(rec);
	}
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
		rec_count(overflow, i, __atomic_load_n(&rec_entry(rec)->stats[i], __ATOMIC_RELAXED));
	__atomic_store_n(&rec_entry(rec)->kind, ELIDE_SEG_KIND_FREE, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	rec_touch(rec);
	atomic_store_explicit(&rec->addr, NULL, memory_order_release);
	free_push(idx);
}

static void rec_apply_policy(struct lock_rec *rec, int policy, uint8_t reason_override)
{
	int32_t gate;
	uint8_t reason;

	if (policy != ELIDE_POLICY_ALWAYS && policy != ELIDE_POLICY_NEVER)
		policy = ELIDE_POLICY_ADAPTIVE;
	policy_gate(policy, &gate, &reason);
	/* No policy, the program's or elided's, makes a recursive or robust lock elidable. */
	if (rec->hard_never) {
		policy = ELIDE_POLICY_NEVER;
		gate = GATE_NEVER;
		reason = ELIDE_SEG_REASON_TYPE_UNELIDABLE;
		reason_override = 0;
	}
	if (reason_override)
		reason = reason_override;
	atomic_store_explicit(&rec->policy, (uint8_t)policy, memory_order_relaxed);
	atomic_store_explicit(&rec->reason, reason, memory_order_relaxed);
	atomic_store_explicit(&rec->backoff_level, 0, memory_order_relaxed);
	atomic_store_explicit(&rec->gate, gate, memory_order_release);
	rec_publish_state(rec);
}

/* The program's (or the lock type's) own policy. */
void rec_set_policy(struct lock_rec *rec, int policy)
{
	atomic_store_explicit(&rec->own_policy, (uint8_t)policy, memory_order_relaxed);
	/* A decision from elided stays in force over the program's wish. */
	if (rec->ctl_applied != ELIDE_SEG_CTL_NONE)
		return;
	rec_apply_policy(rec, policy, 0);
}

void rec_set_type_unelidable(struct lock_rec *rec)
{
	rec->hard_never = true;
	atomic_store_explicit(&rec->own_policy, ELIDE_POLICY_NEVER, memory_order_relaxed);
	rec_apply_policy(rec, ELIDE_POLICY_NEVER, 0);
}

void rec_set_type_normal(struct lock_rec *rec)
{
	atomic_store_explicit(&rec->own_policy, ELIDE_POLICY_NEVER, memory_order_relaxed);
	rec_apply_policy(rec, ELIDE_POLICY_NEVER, ELIDE_SEG_REASON_TYPE_NORMAL);
}

/*
 * elided wrote lock entries' ctl_policy: apply the changed ones.  The
 * values come from another process: anything out of range is ignored.
 */
void registry_apply_lock_decisions(void)
{
	uint32_t high = __atomic_load_n(&elide.seg_header->lock_high_water, __ATOMIC_ACQUIRE);

	if (high > elide.nrecs)
		high = elide.nrecs;
	for (uint32_t i = REC_OVERFLOW + 1; i < high; i++) {
		struct lock_rec *rec = &elide.recs[i];
		uint32_t ctl = __atomic_load_n(&elide.seg_locks[i].ctl_policy, __ATOMIC_RELAXED);

		if (ctl == rec->ctl_applied || !atomic_load_explicit(&rec->addr, memory_order_relaxed))
			continue;
		if (ctl > ELIDE_POLICY_NEVER + 1)
			continue;
		rec->ctl_applied = ctl;
		if (ctl == ELIDE_SEG_CTL_NONE) {
			uint8_t own = atomic_load_explicit(&rec->own_policy, memory_order_relaxed);
			rec_apply_policy(rec, own, 0);
		} else {
			rec_apply_policy(rec, (int)ctl - 1, ELIDE_SEG_REASON_DAEMON);
		}
	}
}

/* The process mode changed (elided's control block): re-gate every lock. */
void registry_apply_mode(void)
{
	uint32_t high = __atomic_load_n(&elide.seg_header->lock_high_water, __ATOMIC_ACQUIRE);

	if (high > elide.nrecs)
		high = elide.nrecs;
	for (uint32_t i = REC_OVERFLOW; i < high; i++) {
		struct lock_rec *rec = &elide.recs[i];

		if (i != REC_OVERFLOW && !atomic_load_explicit(&rec->addr, memory_order_relaxed))
			continue;
		rec_apply_policy(rec, atomic_load_explicit(&rec->policy, memory_order_relaxed),
				 rec->ctl_applied != ELIDE_SEG_CTL_NONE ? ELIDE_SEG_REASON_DAEMON : 0);
	}
}

/* A real acquisition found the lock held: after opts.contention of those, elide. */
void rec_note_contended(struct lock_rec *rec)
{
	int32_t watch = GATE_WATCH;
	uint32_t n;

	segment_need();
	rec_count(rec, STAT_CONTENDED, 1);
	if (!rec_adapts(rec))
		return;
	n = atomic_fetch_add_explicit(&rec->contended_watch, 1, memory_order_relaxed) + 1;
	if (n < elide.opts.contention)
		return;
	if (atomic_compare_exchange_strong_explicit(&rec->gate, &watch, GATE_ELIDE,
						    memory_order_relaxed, memory_order_relaxed)) {
		atomic_store_explicit(&rec->reason, ELIDE_SEG_REASON_CONTENDED, memory_order_relaxed);
		rec_publish_state(rec);
	}
}

/*
 * Stop eliding for a while: opts.skip real acquisitions per thread, doubling
 * with every back-off that follows without commits in between (a failed
 * probe is one), up to opts.skip_max.  `expected` is the gate this decision
 * replaces: GATE_ELIDE, or the span of the back-off a probe just failed.
 */
void rec_back_off_from(struct lock_rec *rec, int32_t expected)
{
	uint8_t level;
	uint64_t skip;

	if (!rec_adapts(rec))
		return;
	level = atomic_load_explicit(&rec->backoff_level, memory_order_relaxed);
	skip = (uint64_t)elide.opts.skip << (level < 40 ? level : 40);
	if (skip > elide.opts.skip_max)
		skip = elide.opts.skip_max;
	if (skip > INT32_MAX)
		skip = INT32_MAX;
	if (!atomic_compare_exchange_strong_explicit(&rec->gate, &expected, (int32_t)skip,
						     memory_order_relaxed, memory_order_relaxed))
		return;
	if (level < 63)
		atomic_store_explicit(&rec->backoff_level, (uint8_t)(level + 1), memory_order_relaxed);
	rec_publish_state(rec);
}

void rec_back_off(struct lock_rec *rec)
{
	rec_back_off_from(rec, GATE_ELIDE);
}

/* A probe of a backed-off lock committed: elide it again. */
void rec_probe_committed(struct lock_rec *rec)
{
	int32_t gate = atomic_load_explicit(&rec->gate, memory_order_relaxed);

	/* Only a back-off gives way; a policy that landed meanwhile stays. */
	if (gate <= 0 || !rec_adapts(rec))
		return;
	if (!atomic_compare_exchange_strong_explicit(&rec->gate, &gate, GATE_ELIDE, memory_order_relaxed,
						     memory_order_relaxed))
		return;
	atomic_store_explicit(&rec->reason, ELIDE_SEG_REASON_CONTENDED, memory_order_relaxed);
	rec_publish_state(rec);
}

/*
 * HotSpot-style cut-off: every opts.window aborts, compare aborts with the
 * (sampled) commits of the same window and back off when aborts dominate.
 * `weight` is how many aborts this one stands for (sampled counting).
 */
void rec_note_abort(struct lock_rec *rec, uint32_t status, uint64_t cycles, unsigned weight)
{
	enum elide_abort_cause cause = elide_abort_classify(status);
	uint32_t aborts;
	uint64_t commits;

	segment_need();
	rec_count(rec, STAT_ABORT_FIRST + cause, weight);
	rec_count(rec, STAT_ATTEMPTS, weight);
	if (cycles)
		rec_count(rec, STAT_CYCLES_LOST, cycles * weight);
	/* Decisions from elided arrive here too: in a process whose every
	 * transaction aborts (mode=on, policy always) no commit is ever
	 * counted to look for them. */
	segment_poll_control();
	/* The cut-off backs off adaptive locks only; for the others (mode=on,
	 * policy always) the window would be one more shared line written. */
	if (!rec_adapts(rec))
		return;
	aborts = atomic_fetch_add_explicit(&rec->window_aborts, weight, memory_order_relaxed) + weight;
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
	rec_publish_state(rec);
	segment_poll_control();
}

/*
 * Attributes typed PTHREAD_MUTEX_NORMAL explicitly, for a glibc that gives
 * NORMAL and DEFAULT the same kind value (2.43 and later; older ones tag
 * NORMAL in the kind itself, see mutex_class()): the only place to tell
 * them apart is pthread_mutexattr_settype(), so remember those attributes
 * by address.  Lock-free for the same reasons as the records.
 */
#define NORMAL_ATTRS_MAX 256
static _Atomic(const pthread_mutexattr_t *) normal_attrs[NORMAL_ATTRS_MAX];
static _Atomic unsigned normal_attrs_used;

bool attr_is_normal(const pthread_mutexattr_t *attr)
{
	if (!attr || atomic_load_explicit(&normal_attrs_used, memory_order_acquire) == 0)
		return false;
	for (int i = 0; i < NORMAL_ATTRS_MAX; i++)
		if (atomic_load_explicit(&normal_attrs[i], memory_order_acquire) == attr)
			return true;
	return false;
}

int attr_mark_normal(const pthread_mutexattr_t *attr, bool normal)
{
	if (!normal) {
		for (int i = 0; i < NORMAL_ATTRS_MAX; i++) {
			const pthread_mutexattr_t *expected = attr;

			if (atomic_compare_exchange_strong(&normal_attrs[i], &expected, NULL))
				atomic_fetch_sub(&normal_attrs_used, 1);
		}
		return 0;
	}
	if (attr_is_normal(attr))
		return 0;
	for (int i = 0; i < NORMAL_ATTRS_MAX; i++) {
		const pthread_mutexattr_t *expected = NULL;

		if (atomic_compare_exchange_strong(&normal_attrs[i], &expected, attr)) {
			atomic_fetch_add(&normal_attrs_used, 1);
			return 0;
		}
	}
	return -ENOSPC;
}
