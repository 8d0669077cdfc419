/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Watching: the clock and the sampling tick, which the lock paths inline;
 * watch.c keeps the figures and writes them out.
 */
#ifndef ELIDE_WATCH_H
#define ELIDE_WATCH_H

#include <time.h>

#include "hotpath.h"

/*
 * Contention figures (PATH_OBSERVE, and the real acquisitions of tracked
 * locks in the other modes): a real acquisition that finds the lock held
 * is timed from before the wait to the lock; 1 in opts.watch_sample
 * acquisitions of a watched lock is counted with that weight and timed from
 * the lock to its unlock.  Clocks are read only there: an acquisition of a
 * free lock between samples costs a decrement and the look at the lock's
 * line that every path makes.
 */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	/* CLOCK_MONOTONIC cannot fail here: errno is left alone. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The watch clock: the TSC where it is invariant (one instruction, which
 * matters inside a contended section: a clock read there lengthens every
 * waiter's wait), else CLOCK_MONOTONIC in ns.  TSC ticks become ns when
 * written out (watch_ns()), against a reference taken at start-up.
 */
struct watch_clock {
	bool tsc;
	uint64_t ref_tsc, ref_ns;
	uint64_t ns_per_tick_q32;     /* ns per tick << 32; 0 until measured over >= 100 ms */
};

extern struct watch_clock watch_clock _hidden_;

/* Without the TSC no clock at all: clock_gettime() reads it too (in the
 * vDSO), or makes a system call glibc's lock paths do not.  Waits and
 * holds are then counted, not timed. */
static inline uint64_t watch_now(void)
{
	if (unlikely(!elide_tsc_usable()))
		return 0;
	return likely(watch_clock.tsc) ? __rdtsc() : now_ns();
}

/* The fast path's sampling tick: true once in opts.watch_sample calls per
 * thread (the countdown wraps from 0). */
static inline bool watch_tick(void)
{
	return unlikely(self.watch_countdown-- == 0);
}

/* In the slow path: was this acquisition the fast path's sample?  Starts
 * the next countdown, and looks for elided's decisions (1 in N, as the
 * other modes do on their sampled paths). */
static inline bool watch_sampled(void)
{
	if (self.watch_countdown != UINT32_MAX)
		return false;
	self.watch_countdown = elide.opts.watch_sample - 1;
	segment_poll_control();
	return true;
}

/* watch.c */
void watch_clock_init(void) _hidden_;
void watch_waits_flush(void) _hidden_;
void watch_flush(uint64_t hold_end) _hidden_;
void watch_note(void *lock, struct lock_rec *rec, int r, bool waited, bool count_contended,
		uint64_t wait, bool sampled, uint64_t got) _hidden_;
uint64_t watch_hold_end(void) _hidden_;

#endif
