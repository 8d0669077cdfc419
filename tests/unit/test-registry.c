/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libelide's lock records and adaptation, driven directly: abort
 * classification, contention gating, back-off growth and cap, the abort
 * ratio cut-off, overflow, detach, the PTHREAD_MUTEX_NORMAL attributes and
 * the verdicts elided hands a new process in the control block's hints.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "elide-internal.h"

struct elide_state elide;
static unsigned control_polls;

/* The control block is segment.c's business; count the polls. */
void segment_poll_control_slow(void)
{
	control_polls++;
	elide.control_seen = elide.seg_control->generation;
}

/* Every entry has its pages here (anonymous memory), unless a test says
 * otherwise: -EAGAIN as while a forked child's file is being made, -ENOSPC
 * as in a full runtime directory. */
static int reserve_error;

int segment_reserve(uint32_t idx)
{
	return reserve_error;
}

/* learn.c's verdicts from the files, before elided's first control block:
 * one lock address this test names. */
static uintptr_t file_hint_lock;
static uint32_t file_hint_verdict;

uint32_t learn_hint_verdict(const void *lock, const void *callsite)
{
	(void)callsite;
	return file_hint_lock && (uintptr_t)lock == file_hint_lock ? file_hint_verdict : 0;
}

/* A forked child's segment file is segment.c's business too. */
static unsigned lazy_calls;

void segment_make_lazy(void)
{
	lazy_calls++;
	elide.control_seen = elide.seg_control->generation;
}

static void setup_mode(enum elide_mode mode, unsigned max_locks)
{
	static void *seg;
	static size_t seg_size;

	if (elide.recs)
		munmap(elide.recs, (size_t)elide.nrecs * sizeof(struct lock_rec));
	if (seg)
		munmap(seg, seg_size);
	memset(&elide, 0, sizeof(elide));
	elide_options_defaults(&elide.opts);
	elide.opts.mode = mode;
	elide.opts.max_locks = max_locks;
	elide.sample_mask = elide.opts.sample - 1;
	elide.enabled = true;
	ck_assert_int_eq(registry_init(), 0);
	seg_size = ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE + max_locks * sizeof(struct elide_seg_lock);
	seg = mmap(NULL, seg_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(seg, MAP_FAILED);
	elide.seg_header = seg;
	elide.seg_control = (void *)((char *)seg + ELIDE_SEG_HEADER_SIZE);
	elide.seg_locks = (void *)((char *)seg + ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE);
	elide.seg_header->lock_high_water = REC_OVERFLOW + 1;
	registry_init_overflow_entry();
}

static void setup(void)
{
	setup_mode(ELIDE_MODE_ADAPTIVE, 64);
	file_hint_lock = 0;
}

static int32_t gate(const struct lock_rec *rec)
{
	return atomic_load(&rec->gate);
}

static uint64_t stat(const struct lock_rec *rec, enum lock_stat s)
{
	return rec_entry(rec)->stats[s];
}

START_TEST(test_classify)
{
	ck_assert_int_eq(elide_abort_classify(_XABORT_EXPLICIT | ((uint32_t)ELIDE_XABORT_BUSY << 24)), ELIDE_ABORT_BUSY);
	ck_assert_int_eq(elide_abort_classify(_XABORT_EXPLICIT | ((uint32_t)ELIDE_XABORT_TRYLOCK << 24)), ELIDE_ABORT_EXPLICIT);
	ck_assert_int_eq(elide_abort_classify(_XABORT_CAPACITY), ELIDE_ABORT_CAPACITY);
	ck_assert_int_eq(elide_abort_classify(_XABORT_CONFLICT | _XABORT_RETRY), ELIDE_ABORT_CONFLICT);
	ck_assert_int_eq(elide_abort_classify(_XABORT_CAPACITY | _XABORT_CONFLICT), ELIDE_ABORT_CAPACITY);
	ck_assert_int_eq(elide_abort_classify(_XABORT_DEBUG), ELIDE_ABORT_DEBUG);
	ck_assert_int_eq(elide_abort_classify(_XABORT_NESTED), ELIDE_ABORT_NESTED);
	ck_assert_int_eq(elide_abort_classify(_XABORT_RETRY), ELIDE_ABORT_RETRY);
	ck_assert_int_eq(elide_abort_classify(0), ELIDE_ABORT_OTHER);
	ck_assert(elide_abort_is_transient(_XABORT_CONFLICT | _XABORT_RETRY));
	ck_assert(elide_abort_is_transient(_XABORT_RETRY));
	ck_assert(!elide_abort_is_transient(_XABORT_CAPACITY | _XABORT_RETRY));
	ck_assert(!elide_abort_is_transient(0));
	ck_assert(!elide_abort_is_transient(_XABORT_EXPLICIT | _XABORT_RETRY));
	for (int c = 0; c < ELIDE_ABORT_NCAUSES; c++)
		ck_assert_ptr_nonnull(elide_abort_cause_names[c]);
}
END_TEST

START_TEST(test_attach_is_stable)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *a, *b;

	a = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL);
	b = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL);
	ck_assert_ptr_eq(a, b);
	ck_assert_ptr_eq(atomic_load(&a->addr), &m);
	ck_assert_uint_gt(*mutex_idx_ptr(&m), REC_OVERFLOW);
	ck_assert_int_eq(gate(a), GATE_WATCH);
	/* The lock itself still works with the index stored inside it. */
	ck_assert_int_eq(pthread_mutex_lock(&m), 0);
	ck_assert_int_eq(pthread_mutex_unlock(&m), 0);
	ck_assert_uint_gt(*mutex_idx_ptr(&m), REC_OVERFLOW);
}
END_TEST

START_TEST(test_rwlock_index_survives_use)
{
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	struct lock_rec *rec = registry_attach(&rw, rwlock_idx_ptr(&rw, true), LOCK_KIND_RWLOCK_WRITE, NULL);
	uint16_t idx = *rwlock_idx_ptr(&rw, true);

	ck_assert_ptr_eq(rec_of_idx(idx), rec);
	ck_assert_int_eq(pthread_rwlock_rdlock(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_rdlock(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_unlock(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_unlock(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_wrlock(&rw), 0);
	ck_assert_int_eq(pthread_rwlock_unlock(&rw), 0);
	ck_assert_uint_eq(*rwlock_idx_ptr(&rw, true), idx);
}
END_TEST

START_TEST(test_contention_gates_elision)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *rec = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL);

	for (unsigned i = 1; i < elide.opts.contention; i++) {
		rec_note_contended(rec);
		ck_assert_int_eq(gate(rec), GATE_WATCH);
	}
	rec_note_contended(rec);
	ck_assert_int_eq(gate(rec), GATE_ELIDE);
	ck_assert_int_eq(atomic_load(&rec->reason), ELIDE_SEG_REASON_CONTENDED);
	ck_assert_uint_eq(stat(rec, STAT_CONTENDED), elide.opts.contention);
}
END_TEST

START_TEST(test_backoff_doubles_and_caps)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *rec = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL);
	int32_t expect = (int32_t)elide.opts.skip;

	elide.opts.skip_max = 1000;
	for (int i = 0; i < 12; i++) {
		atomic_store(&rec->gate, GATE_ELIDE);
		rec_back_off(rec);
		ck_assert_int_eq(gate(rec), expect);
		expect = expect * 2 > 1000 ? 1000 : expect * 2;
	}
	/* Sampled commits shorten the next back-off again. */
	for (int i = 0; i < 40; i++)
		rec_note_commit_sample(rec);
	ck_assert_uint_eq(atomic_load(&rec->backoff_level), 0);
	atomic_store(&rec->gate, GATE_ELIDE);
	rec_back_off(rec);
	ck_assert_int_eq(gate(rec), (int32_t)elide.opts.skip);
}
END_TEST

/* A failed probe doubles the span it replaces; a committed probe elides
 * again; neither overrides a policy that landed meanwhile. */
START_TEST(test_probe_outcomes)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *rec = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL);
	int32_t span;

	atomic_store(&rec->gate, GATE_ELIDE);
	rec_back_off(rec);
	span = gate(rec);
	ck_assert_int_eq(span, (int32_t)elide.opts.skip);
	rec_back_off_from(rec, span);
	ck_assert_int_eq(gate(rec), 2 * span);
	/* A stale span (another thread's probe got there first) changes nothing. */
	rec_back_off_from(rec, span);
	ck_assert_int_eq(gate(rec), 2 * span);
	rec_probe_committed(rec);
	ck_assert_int_eq(gate(rec), GATE_ELIDE);
	rec_probe_committed(rec);
	ck_assert_int_eq(gate(rec), GATE_ELIDE);
	rec_set_policy(rec, ELIDE_POLICY_NEVER);
	rec_probe_committed(rec);
	ck_assert_int_eq(gate(rec), GATE_NEVER);
	rec_back_off_from(rec, GATE_NEVER);
	ck_assert_int_eq(gate(rec), GATE_NEVER);
}
END_TEST

START_TEST(test_backoff_only_from_eliding)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *rec = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL);

	rec_set_policy(rec, ELIDE_POLICY_NEVER);
	rec_back_off(rec);
	ck_assert_int_eq(gate(rec), GATE_NEVER);
	rec_set_policy(rec, ELIDE_POLICY_ALWAYS);
	rec_back_off(rec);
	ck_assert_int_eq(gate(rec), GATE_ELIDE); /* always means always */
	rec_set_policy(rec, ELIDE_POLICY_ADAPTIVE);
	ck_assert_int_eq(gate(rec), GATE_WATCH);
}
END_TEST

START_TEST(test_mode_on_never_backs_off)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *rec;

	setup_mode(ELIDE_MODE_ON, 64);
	rec = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL);
	ck_assert_int_eq(gate(rec), GATE_ELIDE);
	for (int i = 0; i < 5000; i++)
		rec_note_abort(rec, _XABORT_CAPACITY, 10, 1);
	rec_back_off(rec);
	ck_assert_int_eq(gate(rec), GATE_ELIDE);
	ck_assert_uint_eq(stat(rec, STAT_ABORT_FIRST + ELIDE_ABORT_CAPACITY), 5000);
	ck_assert_uint_eq(stat(rec, STAT_CYCLES_LOST), 50000);
}
END_TEST

START_TEST(test_abort_ratio_window)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *rec = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL);
	unsigned sample = elide.opts.sample;

	elide.opts.window = 100;
	atomic_store(&rec->gate, GATE_ELIDE);
	/* 99 aborts against many commits: window not complete, no change. */
	for (int i = 0; i < 99; i++)
		rec_note_abort(rec, _XABORT_CONFLICT | _XABORT_RETRY, 0, 1);
	ck_assert_int_eq(gate(rec), GATE_ELIDE);
	/* Commits dominate the window: the 100th abort keeps eliding. */
	for (unsigned i = 0; i < 1000 / sample + 2; i++)
		rec_note_commit_sample(rec);
	rec_note_abort(rec, _XABORT_CONFLICT | _XABORT_RETRY, 0, 1);
	ck_assert_int_eq(gate(rec), GATE_ELIDE);
	/* A window of aborts with no commits backs off. */
	for (int i = 0; i < 100; i++)
		rec_note_abort(rec, _XABORT_CONFLICT | _XABORT_RETRY, 0, 1);
	ck_assert_int_gt(gate(rec), 0);
	ck_assert_uint_eq(stat(rec, STAT_ABORT_FIRST + ELIDE_ABORT_CONFLICT), 200);
}
END_TEST

START_TEST(test_overflow_and_detach)
{
	pthread_mutex_t locks[80];
	struct lock_rec *overflow = &elide.recs[REC_OVERFLOW];
	unsigned n_overflow = 0;
	struct lock_rec *rec;

	for (int i = 0; i < 80; i++) {
		pthread_mutex_init(&locks[i], NULL);
		rec = registry_attach(&locks[i], mutex_idx_ptr(&locks[i]), LOCK_KIND_MUTEX, NULL);
		rec_count(rec, STAT_CONTENDED, 1);
		if (rec == overflow)
			n_overflow++;
	}
	/* 64 records: [0] unused, [1] overflow, 62 for locks. */
	ck_assert_uint_eq(n_overflow, 80 - 62);
	ck_assert_uint_eq(stat(overflow, STAT_CONTENDED), 80 - 62);
	/* Destroying a tracked lock moves its counts to overflow and frees the record. */
	registry_detach(mutex_idx_ptr(&locks[0]));
	ck_assert_uint_eq(*mutex_idx_ptr(&locks[0]), 0);
	ck_assert_uint_eq(stat(overflow, STAT_CONTENDED), 80 - 62 + 1);
	rec = registry_attach(&locks[79], mutex_idx_ptr(&locks[79]), LOCK_KIND_MUTEX, NULL);
	ck_assert_ptr_eq(rec, overflow); /* already in overflow: stays there */
	{
		pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

		rec = registry_attach(&fresh, mutex_idx_ptr(&fresh), LOCK_KIND_MUTEX, NULL);
		ck_assert_ptr_ne(rec, overflow); /* the freed record is reused */
		ck_assert_uint_eq(stat(rec, STAT_CONTENDED), 0);
	}
}
END_TEST

START_TEST(test_entry_mirrors_record)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *rec = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, (void *)0x1234);
	struct elide_seg_lock *e = rec_entry(rec);

	ck_assert_uint_eq(e->kind, ELIDE_SEG_KIND_MUTEX);
	ck_assert_uint_eq(e->addr, (uintptr_t)&m);
	ck_assert_uint_eq(e->callsite, 0x1234);
	ck_assert_uint_eq(e->state, ELIDE_SEG_STATE_PLAIN);
	ck_assert_uint_gt(elide.seg_header->lock_high_water, rec_index(rec));
	for (unsigned i = 0; i < elide.opts.contention; i++)
		rec_note_contended(rec);
	ck_assert_uint_eq(e->state, ELIDE_SEG_STATE_ELIDING);
	ck_assert_uint_eq(e->reason, ELIDE_SEG_REASON_CONTENDED);
	rec_back_off(rec);
	ck_assert_uint_eq(e->state, ELIDE_SEG_STATE_OFF_ADAPT);
	ck_assert_uint_eq(e->reason, ELIDE_SEG_REASON_ABORTS);
	rec_set_type_normal(rec);
	ck_assert_uint_eq(e->state, ELIDE_SEG_STATE_OFF_POLICY);
	ck_assert_uint_eq(e->reason, ELIDE_SEG_REASON_TYPE_NORMAL);
	registry_detach(mutex_idx_ptr(&m));
	ck_assert_uint_eq(e->kind, ELIDE_SEG_KIND_FREE);
}
END_TEST

START_TEST(test_daemon_lock_decisions)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, NULL);
	struct lock_rec *rb = registry_attach(&b, mutex_idx_ptr(&b), LOCK_KIND_MUTEX, NULL);

	rec_set_policy(rb, ELIDE_POLICY_ALWAYS);
	rec_entry(ra)->ctl_policy = ELIDE_POLICY_NEVER + 1;
	rec_entry(rb)->ctl_policy = 99; /* hostile value: ignored */
	registry_apply_lock_decisions();
	ck_assert_int_eq(gate(ra), GATE_NEVER);
	ck_assert_uint_eq(rec_entry(ra)->reason, ELIDE_SEG_REASON_DAEMON);
	ck_assert_int_eq(gate(rb), GATE_ELIDE);
	/* While elided decides, the program's own wish waits. */
	rec_set_policy(ra, ELIDE_POLICY_ALWAYS);
	ck_assert_int_eq(gate(ra), GATE_NEVER);
	/* Reset: back to the program's policy. */
	rec_entry(ra)->ctl_policy = ELIDE_SEG_CTL_NONE;
	registry_apply_lock_decisions();
	ck_assert_int_eq(gate(ra), GATE_ELIDE);
	ck_assert_uint_eq(rec_entry(ra)->reason, ELIDE_SEG_REASON_POLICY_ALWAYS);
}
END_TEST

START_TEST(test_process_mode_off_and_back)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, NULL);

	rec_set_policy(ra, ELIDE_POLICY_ALWAYS);
	elide.opts.mode = ELIDE_MODE_OFF;
	registry_apply_mode();
	ck_assert_int_eq(gate(ra), GATE_NEVER);
	ck_assert_uint_eq(rec_entry(ra)->reason, ELIDE_SEG_REASON_PROCESS_OFF);
	elide.opts.mode = ELIDE_MODE_ADAPTIVE;
	registry_apply_mode();
	ck_assert_int_eq(gate(ra), GATE_ELIDE);
}
END_TEST

START_TEST(test_commit_samples_poll_control)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, NULL);

	control_polls = 0;
	rec_note_commit_sample(ra);
	ck_assert_uint_eq(control_polls, 0); /* generation unchanged: no slow path */
	elide.seg_control->generation = 2;
	rec_note_commit_sample(ra);
	ck_assert_uint_eq(control_polls, 1);
	rec_note_commit_sample(ra);
	ck_assert_uint_eq(control_polls, 1);
	ck_assert_uint_eq(stat(ra, STAT_COMMITS), 3 * elide.opts.sample);
}
END_TEST

START_TEST(test_garbage_index_is_bounded)
{
	ck_assert_ptr_eq(rec_of_idx(65535), &elide.recs[REC_OVERFLOW]);
	ck_assert_ptr_eq(rec_of_idx((uint16_t)elide.nrecs), &elide.recs[REC_OVERFLOW]);
}
END_TEST

START_TEST(test_normal_attrs)
{
	pthread_mutexattr_t a = { 0 }, b = { 0 };

	ck_assert(!attr_is_normal(&a));
	ck_assert_int_eq(attr_mark_normal(&a, true), 0);
	ck_assert(attr_is_normal(&a));
	ck_assert(!attr_is_normal(&b));
	ck_assert(!attr_is_normal(NULL));
	ck_assert_int_eq(attr_mark_normal(&a, true), 0); /* idempotent */
	ck_assert_int_eq(attr_mark_normal(&a, false), 0);
	ck_assert(!attr_is_normal(&a));
}
END_TEST

/* While a forked child's segment file is being made by another thread, a
 * lock whose record would lie beyond it is not published this time: the
 * acquisition counts in the overflow record, the lock is not pinned there. */
START_TEST(test_not_now_leaves_lock_unpinned)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, full = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *overflow = &elide.recs[REC_OVERFLOW], *rec;

	reserve_error = -EAGAIN;
	ck_assert_ptr_eq(registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL), overflow);
	ck_assert_uint_eq(*mutex_idx_ptr(&m), 0);
	ck_assert_ptr_null(registry_attach_own(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL, true, NULL));
	reserve_error = 0;
	rec = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL);
	ck_assert_ptr_ne(rec, overflow);
	ck_assert_uint_gt(*mutex_idx_ptr(&m), REC_OVERFLOW);
	/* The record handed back while "not now" was reused, not lost. */
	ck_assert_uint_eq(*mutex_idx_ptr(&m), REC_OVERFLOW + 1);
	/* A full runtime directory does pin the lock to the overflow record. */
	reserve_error = -ENOSPC;
	ck_assert_ptr_eq(registry_attach(&full, mutex_idx_ptr(&full), LOCK_KIND_MUTEX, NULL), overflow);
	ck_assert_uint_eq(*mutex_idx_ptr(&full), REC_OVERFLOW);
	reserve_error = 0;
}
END_TEST

/* A forked child without its file (the marker in control_seen) makes it
 * when it first has something to publish: a record, a contention, an abort. */
START_TEST(test_first_need_makes_the_file)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *rec;

	rec = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL);
	ck_assert_uint_eq(lazy_calls, 0);
	elide.control_seen = SEG_CONTROL_LAZY;
	rec_note_contended(rec);
	ck_assert_uint_eq(lazy_calls, 1);
	elide.control_seen = SEG_CONTROL_LAZY;
	rec_note_abort(rec, _XABORT_CONFLICT, 0, 1);
	ck_assert_uint_eq(lazy_calls, 2);
	elide.control_seen = SEG_CONTROL_LAZY;
	ck_assert_ptr_eq(registry_attach_own(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL, true, NULL), rec);
	ck_assert_uint_eq(lazy_calls, 3);
	/* Made (the stub clears the marker): no further calls. */
	rec_note_contended(rec);
	ck_assert_uint_eq(lazy_calls, 3);
}
END_TEST

/* The file replaced the private copy after some entries were copied: every
 * live record's identity and state is published again, freed ones stay free. */
START_TEST(test_republish_after_switch)
{
	pthread_mutex_t locks[3];
	struct lock_rec *recs[3];

	for (int i = 0; i < 3; i++) {
		pthread_mutex_init(&locks[i], NULL);
		recs[i] = registry_attach(&locks[i], mutex_idx_ptr(&locks[i]), LOCK_KIND_MUTEX, NULL);
	}
	rec_set_policy(recs[1], ELIDE_POLICY_NEVER);
	registry_detach(mutex_idx_ptr(&locks[2]));
	/* What a file made before these records were published holds. */
	memset(&elide.seg_locks[REC_OVERFLOW + 1], 0, 3 * sizeof(struct elide_seg_lock));
	elide.seg_header->lock_high_water = REC_OVERFLOW + 1;
	registry_republish(64);
	for (int i = 0; i < 2; i++) {
		struct elide_seg_lock *e = rec_entry(recs[i]);

		ck_assert_uint_eq(e->addr, (uintptr_t)&locks[i]);
		ck_assert_uint_eq(e->kind, ELIDE_SEG_KIND_MUTEX);
		ck_assert_uint_gt(elide.seg_header->lock_high_water, rec_index(recs[i]));
	}
	ck_assert_uint_eq(rec_entry(recs[1])->state, ELIDE_SEG_STATE_OFF_POLICY);
	ck_assert_uint_eq(rec_entry(recs[1])->policy, ELIDE_POLICY_NEVER);
	ck_assert_uint_eq(rec_entry(recs[2])->kind, ELIDE_SEG_KIND_FREE);
	ck_assert_uint_eq(elide.seg_header->lock_high_water, rec_index(recs[1]) + 1);
}
END_TEST

/* ---- hints: verdicts learned from earlier runs (issue 16) ------------- */

static void add_hint(uint64_t addr, uint32_t match, uint32_t verdict)
{
	struct elide_seg_control *c = elide.seg_control;

	/* elided wrote a control block: its hints are the ones that count. */
	c->generation = 2;
	c->hints[c->nhints++] = (struct elide_seg_hint){ .addr = addr, .match = match, .verdict = verdict };
}

/* The entry reads as elided's own "never" would, the lock never tries. */
static void assert_learned_never(const struct lock_rec *rec)
{
	const struct elide_seg_lock *e = rec_entry(rec);

	ck_assert_int_eq(gate(rec), GATE_NEVER);
	ck_assert_uint_eq(e->ctl_policy, ELIDE_POLICY_NEVER + 1);
	ck_assert_uint_eq(e->ctl_source, ELIDE_SEG_SOURCE_LEARNED);
	ck_assert_uint_eq(rec->ctl_applied, ELIDE_POLICY_NEVER + 1);
	ck_assert_uint_eq(e->state, ELIDE_SEG_STATE_OFF_POLICY);
	ck_assert_uint_eq(e->reason, ELIDE_SEG_REASON_DAEMON);
	ck_assert_uint_eq(e->policy, ELIDE_POLICY_NEVER);
}

/* No hint applied: a fresh record as ever. */
static void assert_no_hint(const struct lock_rec *rec, int32_t want_gate)
{
	const struct elide_seg_lock *e = rec_entry(rec);

	ck_assert_int_eq(gate(rec), want_gate);
	ck_assert_uint_eq(e->ctl_policy, ELIDE_SEG_CTL_NONE);
	ck_assert_uint_eq(e->ctl_source, ELIDE_SEG_SOURCE_NONE);
	ck_assert_uint_eq(rec->ctl_applied, ELIDE_SEG_CTL_NONE);
}

START_TEST(test_hint_never_by_lock_addr)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	struct lock_rec *ra, *rb, *rr, *rw_rd;

	add_hint((uintptr_t)&a, ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER);
	add_hint((uintptr_t)&rw, ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER);
	ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, (void *)0x1234);
	rb = registry_attach(&b, mutex_idx_ptr(&b), LOCK_KIND_MUTEX, (void *)0x1234);
	assert_learned_never(ra);
	assert_no_hint(rb, GATE_WATCH);
	/* Both sides of an rwlock carry its address. */
	rr = registry_attach(&rw, rwlock_idx_ptr(&rw, true), LOCK_KIND_RWLOCK_WRITE, NULL);
	rw_rd = registry_attach(&rw, rwlock_idx_ptr(&rw, false), LOCK_KIND_RWLOCK_READ, NULL);
	assert_learned_never(rr);
	assert_learned_never(rw_rd);
	/* Contention never makes it elide, and nothing backs it off. */
	for (unsigned i = 0; i < 10 * elide.opts.contention; i++) {
		rec_note_contended(ra);
		rec_note_contended(rb);
	}
	ck_assert_int_eq(gate(ra), GATE_NEVER);
	ck_assert_int_eq(gate(rb), GATE_ELIDE);
	ck_assert_uint_eq(stat(ra, STAT_CONTENDED), 10 * elide.opts.contention);
	rec_back_off(ra);
	rec_probe_committed(ra);
	ck_assert_int_eq(gate(ra), GATE_NEVER);
	/* The program's own policy waits, as for elided's decisions. */
	rec_set_policy(ra, ELIDE_POLICY_ALWAYS);
	ck_assert_int_eq(gate(ra), GATE_NEVER);
	ck_assert_uint_eq(atomic_load(&ra->own_policy), ELIDE_POLICY_ALWAYS);
	/* Seeing an unchanged ctl_policy, libelide applies nothing again. */
	registry_apply_lock_decisions();
	assert_learned_never(ra);
	/* A mode change keeps the decision and its reason. */
	elide.opts.mode = ELIDE_MODE_ON;
	registry_apply_mode();
	ck_assert_int_eq(gate(ra), GATE_NEVER);
	ck_assert_uint_eq(rec_entry(ra)->reason, ELIDE_SEG_REASON_DAEMON);
}
END_TEST

START_TEST(test_hint_never_by_callsite)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER, c = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_t d = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *ra, *rb, *rc, *rd;

	add_hint(0x4242, ELIDE_SEG_HINT_CALLSITE, ELIDE_SEG_HINT_NEVER);
	/* A lock address is not a call site, nor the other way round. */
	add_hint((uintptr_t)&c, ELIDE_SEG_HINT_CALLSITE, ELIDE_SEG_HINT_NEVER);
	add_hint(0x5555, ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER);
	ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, (void *)0x4242);
	rb = registry_attach(&b, mutex_idx_ptr(&b), LOCK_KIND_MUTEX, (void *)0x4242);
	rc = registry_attach(&c, mutex_idx_ptr(&c), LOCK_KIND_MUTEX, (void *)0x4243);
	rd = registry_attach(&d, mutex_idx_ptr(&d), LOCK_KIND_MUTEX, (void *)0x5555);
	assert_learned_never(ra);
	assert_learned_never(rb);
	ck_assert_uint_eq(rec_entry(ra)->callsite, 0x4242);
	assert_no_hint(rc, GATE_WATCH);
	assert_no_hint(rd, GATE_WATCH);
}
END_TEST

START_TEST(test_hint_elides)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER, c = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *ra, *rb, *rc;

	add_hint(0x7777, ELIDE_SEG_HINT_CALLSITE, ELIDE_SEG_HINT_ELIDES);
	/* Adaptive: elides at once, no ctl fields, and adapts as always. */
	ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, (void *)0x7777);
	assert_no_hint(ra, GATE_ELIDE);
	ck_assert_uint_eq(rec_entry(ra)->state, ELIDE_SEG_STATE_ELIDING);
	ck_assert_uint_eq(atomic_load(&ra->policy), ELIDE_POLICY_ADAPTIVE);
	ck_assert(rec_adapts(ra));
	rec_back_off(ra);
	ck_assert_int_eq(gate(ra), (int32_t)elide.opts.skip);
	/* A recursive (or robust, ...) lock stays never. */
	rb = registry_attach(&b, mutex_idx_ptr(&b), LOCK_KIND_MUTEX, (void *)0x7777);
	ck_assert_int_eq(gate(rb), GATE_ELIDE);
	rec_set_type_unelidable(rb);
	ck_assert_int_eq(gate(rb), GATE_NEVER);
	/* A record made for a type libelide does not elide takes no hint,
	 * not even until its type is marked. */
	rc = registry_attach_own(&c, mutex_idx_ptr(&c), LOCK_KIND_MUTEX, (void *)0x7777, false, NULL);
	assert_no_hint(rc, GATE_WATCH);
	rec_set_type_normal(rc);
	ck_assert_int_eq(gate(rc), GATE_NEVER);
	ck_assert_uint_eq(rec_entry(rc)->reason, ELIDE_SEG_REASON_TYPE_NORMAL);
}
END_TEST

START_TEST(test_hint_elides_by_mode)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *ra, *rb;

	/* The process is off: no hint turns a lock on. */
	setup_mode(ELIDE_MODE_OFF, 64);
	add_hint(0x7777, ELIDE_SEG_HINT_CALLSITE, ELIDE_SEG_HINT_ELIDES);
	ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, (void *)0x7777);
	assert_no_hint(ra, GATE_NEVER);
	ck_assert_uint_eq(atomic_load(&ra->reason), ELIDE_SEG_REASON_PROCESS_OFF);
	/* mode=on elides anyway, for its own reason. */
	setup_mode(ELIDE_MODE_ON, 64);
	add_hint(0x7777, ELIDE_SEG_HINT_CALLSITE, ELIDE_SEG_HINT_ELIDES);
	rb = registry_attach(&b, mutex_idx_ptr(&b), LOCK_KIND_MUTEX, (void *)0x7777);
	assert_no_hint(rb, GATE_ELIDE);
	ck_assert_uint_eq(atomic_load(&rb->reason), ELIDE_SEG_REASON_MODE_ON);
	/* ...and a "never" still wins there. */
	add_hint((uintptr_t)&a, ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER);
	pthread_mutex_init(&a, NULL);
	ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, (void *)0x7778);
	assert_learned_never(ra);
}
END_TEST

/* The first hint that matches decides. */
START_TEST(test_hint_first_match_wins)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *ra;

	add_hint(0x9999, ELIDE_SEG_HINT_CALLSITE, ELIDE_SEG_HINT_ELIDES);
	add_hint((uintptr_t)&a, ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER);
	ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, (void *)0x9999);
	assert_no_hint(ra, GATE_ELIDE);
}
END_TEST

/* Garbage from another process changes nothing: out-of-range count,
 * unknown match or verdict, address 0, bytes past the table. */
START_TEST(test_hint_garbage)
{
	pthread_mutex_t locks[5];
	struct elide_seg_control *c = elide.seg_control;
	struct elide_seg_hint past = { 0, ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER };
	struct lock_rec *rec;

	for (int i = 0; i < 5; i++)
		pthread_mutex_init(&locks[i], NULL);
	c->hints[0] = (struct elide_seg_hint){ (uintptr_t)&locks[0], 99, ELIDE_SEG_HINT_NEVER };
	c->hints[1] = (struct elide_seg_hint){ (uintptr_t)&locks[1], ELIDE_SEG_HINT_LOCK_ADDR, 99 };
	c->hints[2] = (struct elide_seg_hint){ 0, ELIDE_SEG_HINT_CALLSITE, ELIDE_SEG_HINT_NEVER };
	c->hints[3] = (struct elide_seg_hint){ (uintptr_t)&locks[2], ELIDE_SEG_HINT_NONE, ELIDE_SEG_HINT_NEVER };
	/* The last slot still counts: nhints is clamped, not refused. */
	c->hints[ELIDE_SEG_MAX_HINTS - 1] =
		(struct elide_seg_hint){ (uintptr_t)&locks[3], ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER };
	/* What would be hints[ELIDE_SEG_MAX_HINTS] lies in the reserved bytes. */
	past.addr = (uintptr_t)&locks[4];
	memcpy(c->reserved, &past, sizeof(past));
	c->generation = 2;
	c->nhints = 0xffffffff;
	for (int i = 0; i < 5; i++) {
		/* Call site NULL against the hint with address 0. */
		rec = registry_attach(&locks[i], mutex_idx_ptr(&locks[i]), LOCK_KIND_MUTEX, NULL);
		if (i == 3)
			assert_learned_never(rec);
		else
			assert_no_hint(rec, GATE_WATCH);
	}
	/* No segment at all: no hints, no crash. */
	{
		pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
		struct elide_seg_control *saved = elide.seg_control;

		elide.seg_control = NULL;
		rec = registry_attach(&m, mutex_idx_ptr(&m), LOCK_KIND_MUTEX, NULL);
		elide.seg_control = saved;
		assert_no_hint(rec, GATE_WATCH);
	}
}
END_TEST

/* elided takes its decision back (a re-probe): the lock adapts again, and
 * later decisions work as ever. */
START_TEST(test_hint_then_daemon_decides)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *ra;

	add_hint((uintptr_t)&a, ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER);
	ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, NULL);
	assert_learned_never(ra);
	rec_entry(ra)->ctl_policy = ELIDE_SEG_CTL_NONE;
	rec_entry(ra)->ctl_source = ELIDE_SEG_SOURCE_NONE;
	registry_apply_lock_decisions();
	ck_assert_uint_eq(ra->ctl_applied, ELIDE_SEG_CTL_NONE);
	ck_assert_int_eq(gate(ra), GATE_WATCH);
	ck_assert_uint_eq(rec_entry(ra)->reason, ELIDE_SEG_REASON_UNCONTENDED);
	ck_assert_uint_eq(atomic_load(&ra->policy), ELIDE_POLICY_ADAPTIVE);
	for (unsigned i = 0; i < elide.opts.contention; i++)
		rec_note_contended(ra);
	ck_assert_int_eq(gate(ra), GATE_ELIDE);
	/* The program's own policy applies again... */
	rec_set_policy(ra, ELIDE_POLICY_NEVER);
	ck_assert_int_eq(gate(ra), GATE_NEVER);
	ck_assert_uint_eq(rec_entry(ra)->reason, ELIDE_SEG_REASON_POLICY_NEVER);
	/* ...until elided decides again, from any source. */
	rec_entry(ra)->ctl_policy = ELIDE_POLICY_ALWAYS + 1;
	rec_entry(ra)->ctl_source = ELIDE_SEG_SOURCE_OVERRIDE;
	registry_apply_lock_decisions();
	ck_assert_int_eq(gate(ra), GATE_ELIDE);
	ck_assert_uint_eq(rec_entry(ra)->reason, ELIDE_SEG_REASON_DAEMON);
}
END_TEST

/* A recycled record forgets the verdict of its previous lock. */
START_TEST(test_hint_not_inherited)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *ra, *rb;

	add_hint((uintptr_t)&a, ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER);
	ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, NULL);
	assert_learned_never(ra);
	registry_detach(mutex_idx_ptr(&a));
	rb = registry_attach(&b, mutex_idx_ptr(&b), LOCK_KIND_MUTEX, NULL);
	ck_assert_ptr_eq(rb, ra);
	assert_no_hint(rb, GATE_WATCH);
	ck_assert_uint_eq(rec_entry(rb)->reason, ELIDE_SEG_REASON_UNCONTENDED);
	ck_assert_uint_eq(atomic_load(&rb->policy), ELIDE_POLICY_ADAPTIVE);
}
END_TEST

/* Before elided writes a control block the files' verdicts (learn.c)
 * apply; once it has, only its own hints do (a forget, a probe). */
START_TEST(test_hint_files_until_control)
{
	pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
	struct lock_rec *ra, *rb;

	file_hint_lock = (uintptr_t)&a;
	file_hint_verdict = ELIDE_SEG_HINT_NEVER;
	ra = registry_attach(&a, mutex_idx_ptr(&a), LOCK_KIND_MUTEX, NULL);
	assert_learned_never(ra);
	elide.seg_control->generation = 2;
	file_hint_lock = (uintptr_t)&b;
	rb = registry_attach(&b, mutex_idx_ptr(&b), LOCK_KIND_MUTEX, NULL);
	assert_no_hint(rb, GATE_WATCH);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("registry");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_classify);
	tcase_add_test(tc, test_attach_is_stable);
	tcase_add_test(tc, test_rwlock_index_survives_use);
	tcase_add_test(tc, test_contention_gates_elision);
	tcase_add_test(tc, test_backoff_doubles_and_caps);
	tcase_add_test(tc, test_backoff_only_from_eliding);
	tcase_add_test(tc, test_probe_outcomes);
	tcase_add_test(tc, test_mode_on_never_backs_off);
	tcase_add_test(tc, test_abort_ratio_window);
	tcase_add_test(tc, test_overflow_and_detach);
	tcase_add_test(tc, test_entry_mirrors_record);
	tcase_add_test(tc, test_daemon_lock_decisions);
	tcase_add_test(tc, test_process_mode_off_and_back);
	tcase_add_test(tc, test_commit_samples_poll_control);
	tcase_add_test(tc, test_garbage_index_is_bounded);
	tcase_add_test(tc, test_normal_attrs);
	tcase_add_test(tc, test_not_now_leaves_lock_unpinned);
	tcase_add_test(tc, test_first_need_makes_the_file);
	tcase_add_test(tc, test_republish_after_switch);
	tcase_add_test(tc, test_hint_never_by_lock_addr);
	tcase_add_test(tc, test_hint_never_by_callsite);
	tcase_add_test(tc, test_hint_elides);
	tcase_add_test(tc, test_hint_elides_by_mode);
	tcase_add_test(tc, test_hint_first_match_wins);
	tcase_add_test(tc, test_hint_garbage);
	tcase_add_test(tc, test_hint_then_daemon_decides);
	tcase_add_test(tc, test_hint_not_inherited);
	tcase_add_test(tc, test_hint_files_until_control);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
