/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Watching: how long the real acquisitions wait for a lock and how long
 * a sampled one holds it, added up per thread and written to the lock's
 * segment entry outside its critical section (watch.h: the clock and the
 * sampling tick).
 */
#include <cpuid.h>

#include "watch.h"

struct watch_clock watch_clock;

void watch_clock_init(void)
{
	unsigned eax, ebx, ecx, edx;

	if (!elide_tsc_usable())
		return;
	/* CPUID 0x80000007 EDX bit 8: invariant TSC (constant rate, all cores). */
	watch_clock.tsc = __get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) && (edx & (1u << 8));
	watch_clock.ref_ns = now_ns();
	watch_clock.ref_tsc = __rdtsc();
}

/* Ticks of watch_now() in ns; called outside critical sections only. */
static uint64_t watch_ns(uint64_t ticks)
{
	uint64_t scale = __atomic_load_n(&watch_clock.ns_per_tick_q32, __ATOMIC_RELAXED);

	if (!watch_clock.tsc)
		return ticks;
	if (!elide_tsc_usable())
		return scale ? (uint64_t)(((unsigned __int128)ticks * scale) >> 32) : 0;
	if (scale == 0) {
		uint64_t ns = now_ns() - watch_clock.ref_ns, tsc = __rdtsc() - watch_clock.ref_tsc;

		if (tsc == 0)
			return 0;
		scale = (uint64_t)(((unsigned __int128)ns << 32) / tsc);
		/* Long enough for a close figure: keep it (a race stores the same). */
		if (ns >= 100000000u)
			__atomic_store_n(&watch_clock.ns_per_tick_q32, scale, __ATOMIC_RELAXED);
	}
	return (uint64_t)(((unsigned __int128)ticks * scale) >> 32);
}

static void watch_add_max(uint64_t *max, uint64_t v)
{
	uint64_t cur = __atomic_load_n(max, __ATOMIC_RELAXED);

	while (v > cur && !__atomic_compare_exchange_n(max, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* The thread's added-up waits to their lock's entry. */
__attribute__((noinline)) void watch_waits_flush(void)
{
	struct watch_waits w = self.waits;
	struct elide_seg_lock *e;
	uint64_t wait_ns;

	self.waits = (struct watch_waits){ 0 };
	if (!w.rec)
		return;
	segment_need();
	e = rec_entry(w.rec);
	if (w.contended)
		__atomic_fetch_add(&e->stats[STAT_CONTENDED], w.contended, __ATOMIC_RELAXED);
	wait_ns = watch_ns(w.wait);
	__atomic_fetch_add(&e->wait_ns, wait_ns, __ATOMIC_RELAXED);
	__atomic_fetch_add(&elide.seg_header->wait_ns, wait_ns, __ATOMIC_RELAXED);
	watch_add_max(&e->wait_max_ns, watch_ns(w.wait_max));
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	rec_touch(w.rec);
}

/* Write the pending figures to the lock's entry; hold_end 0 drops a
 * sampled hold (the lock was not given back by this thread's unlock). */
__attribute__((noinline)) void watch_flush(uint64_t hold_end)
{
	struct watch_pending p = self.watch;
	struct elide_seg_lock *e;

	self.watch_lock = NULL;
	self.watch = (struct watch_pending){ 0 };
	if (p.flush_waits) {
		watch_waits_flush();
		self.waits = p.next;
	}
	if (!p.rec || (!p.acquired && !p.hold_start))
		return;
	segment_need();
	e = rec_entry(p.rec);
	if (p.acquired)
		__atomic_fetch_add(&e->stats[STAT_ACQUIRED], p.acquired, __ATOMIC_RELAXED);
	if (p.hold_start && hold_end > p.hold_start) {
		uint64_t hold = watch_ns(hold_end - p.hold_start);

		__atomic_fetch_add(&e->hold_ns, hold, __ATOMIC_RELAXED);
		__atomic_fetch_add(&e->hold_samples, 1, __ATOMIC_RELAXED);
		if (hold >= ELIDE_SEG_HOLD_LONG_NS)
			__atomic_fetch_add(&e->hold_long, 1, __ATOMIC_RELAXED);
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	rec_touch(p.rec);
}

/* Add a wait to the thread's batch, of rec (inside the section:
 * thread-local stores only); true when the batch is due to be written. */
static inline bool watch_waits_add(struct lock_rec *rec, bool count_contended, uint64_t wait, uint64_t now)
{
	struct watch_waits *w = &self.waits;

	if (!w->rec) {
		w->rec = rec;
		w->first = now;
	}
	w->contended += count_contended;
	w->wait += wait;
	if (wait > w->wait_max)
		w->wait_max = wait;
	return w->contended >= WATCH_BATCH || now - w->first >= WATCH_BATCH_TICKS;
}

/*
 * After a watched real acquisition (result r).  A wait is added to the
 * thread's figures; a sample, and waits that are due, are kept until the
 * unlock, or written now when the lock is not held (an error, a timeout).
 */
void watch_note(void *lock, struct lock_rec *rec, int r, bool waited, bool count_contended,
		uint64_t wait, bool sampled, uint64_t got)
{
	struct watch_waits next = { 0 };
	bool due = false;

	/* Figures still pending from a lock held across this one: written
	 * now, without their hold (nested sections; rare). */
	if (self.watch_lock)
		watch_flush(0);
	if (waited && self.waits.rec && self.waits.rec != rec) {
		/* Another lock's batch: written at this unlock, and this wait
		 * begins the next one then. */
		next = (struct watch_waits){ .rec = rec, .contended = count_contended, .wait = wait,
					     .wait_max = wait, .first = got };
		due = true;
	} else if (waited) {
		due = watch_waits_add(rec, count_contended, wait, got);
	}
	/* A sample also writes what the thread added up, however little. */
	due = due || (sampled && self.waits.rec);

	if (!due && !(sampled && r == 0))
		return;
	self.watch = (struct watch_pending){
		.rec = rec,
		.acquired = sampled && r == 0 ? elide.opts.watch_sample : 0,
		.hold_start = sampled && r == 0 ? got : 0,
		.flush_waits = due,
		.next = next,
	};
	if (r != 0) {
		watch_flush(0);
		return;
	}
	self.watch_lock = lock;
}

/* The unlock of a lock with pending figures: the hold ends here. */
__attribute__((noinline)) uint64_t watch_hold_end(void)
{
	return self.watch.hold_start ? watch_now() : 0;
}
