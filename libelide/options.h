/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ELIDE environment variable: one option string, jemalloc MALLOC_CONF
 * style, "key=value,key=value".  Every option is typed and range-checked; a
 * bad pair is reported once and ignored, the rest still apply.
 */
#ifndef ELIDE_OPTIONS_H
#define ELIDE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

enum elide_mode {
	ELIDE_MODE_ADAPTIVE = 0, /* elide contended locks, back off on aborts */
	ELIDE_MODE_ON = 1,       /* try a transaction on every eligible acquisition */
	ELIDE_MODE_OFF = 2,      /* pass everything straight to glibc */
	ELIDE_MODE_WATCH = 3,    /* no transactions: record contention, wait and hold times */
};

struct elide_options {
	enum elide_mode mode;     /* mode=adaptive|on|off|watch      default adaptive */
	unsigned retries;         /* retries=0..64       conflict/retry-able aborts retried per acquisition, default 3 */
	unsigned busy_retries;    /* busy_retries=0..64  lock-busy aborts retried per acquisition, default 3 */
	unsigned busy_spins;      /* busy_spins=0..1000000 pause iterations waiting for a busy lock to become free, default 400 (a PAUSE is 10-140 cycles) */
	unsigned wait_spins;      /* wait_spins=0..1000 pause iterations before a waiter of a default mutex libelide
				   * takes tries once more and then sleeps, default 32; 0 = glibc's wait */
	unsigned contention;      /* contention=1..65535 contended acquisitions before adaptive mode elides a lock, default 4 */
	unsigned skip;            /* skip=1..1000000     real acquisitions after a persistent abort (first backoff step), default 16 */
	unsigned skip_max;        /* skip_max=1..100000000 backoff cap, default 65536 */
	double abort_ratio;       /* abort_ratio=0..1    stop eliding a lock whose aborts/attempts exceed this..., default 0.5 */
	unsigned window;          /* window=1..100000000 ...over this many aborts (HotSpot style), default 1000 */
	unsigned sample;          /* sample=1..65536, power of two: count 1 in N commits, default 64 */
	unsigned max_locks;       /* max_locks=16..65535 lock records per process, default 4096 */
	bool report;              /* report=0|1|PATH  per-lock summary at exit, default 0 */
	char report_path[256];    /* ...appended to this file (report=PATH), else on stderr */
	bool stats;               /* stats=0|1   sampled commit counts and the shared segment, default 1;
				   * 0 keeps aborts (counted off the fast path) in private memory only */
	bool fork_segment;        /* fork_segment=0|1 a forked child makes its own segment at its first need (1)
				   * or counts in private memory only and makes no file (0), default 1 */
	bool force_normal;        /* force_normal=0|1 elide explicit PTHREAD_MUTEX_NORMAL mutexes too, default 0 */
	bool verbose;             /* verbose=0|1  say at start-up whether and why elision is on, default 0 */
	bool own_mutex;           /* own_mutex=0|1 lock and unlock default mutexes with glibc's protocol in
				   * libelide (1) or always call glibc's functions (0), default 1 */
	bool own_rwlock;          /* own_rwlock=0|1 read-lock and unlock free rwlocks with glibc's protocol in
				   * libelide (1) or always call glibc's functions (0), default 1 */
	bool watch;               /* watch=0|1   without usable RTM, watch contended locks (1) or pass
				   * everything through untouched (0), default 1 */
	unsigned watch_sample;    /* watch_sample=1..65536, power of two: of a watched lock, count 1 in N
				   * acquisitions and time its hold, default 1024 */
};

/* Fill *opts with the defaults above. */
void elide_options_defaults(struct elide_options *opts);

/*
 * Called once per rejected pair.  `pair` points into the parsed string and is
 * `pair_len` bytes long (not NUL-terminated); `why` is a static string such
 * as "unknown option", "value out of range 0..64", "not a number",
 * "must be a power of two", "missing '='", "mode must be adaptive, on, off or watch".
 */
typedef void (*elide_option_error_fn)(const char *pair, size_t pair_len, const char *why, void *userdata);

/*
 * Parse `str` (may be NULL or empty: nothing changes) into *opts, which the
 * caller initialised (defaults).  Pairs are separated by ',' (empty pairs
 * are skipped); keys and values have no surrounding spaces.  A rejected
 * pair leaves its option unchanged and calls on_error.  Does not allocate.
 * Returns the number of rejected pairs (0 when all applied).
 */
int elide_options_parse(struct elide_options *opts, const char *str,
			elide_option_error_fn on_error, void *userdata);

/* "adaptive", "on", "off" or "watch". */
const char *elide_mode_to_string(enum elide_mode mode);

#endif
