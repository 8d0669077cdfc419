/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * watch-measure - a contended mutex whose waits and holds the program
 * measures itself, to check libelide's watch mode against (and for
 * bench/RESULTS.md's error figures).
 *
 *   watch-measure [--threads N] [--hold-us H] [--gap-us G] [--ms MS | --count C]
 *
 * N threads (default 2) take one static mutex (hot_lock) in a loop: each
 * holds it for H microseconds of busy work (default 20), then works G
 * microseconds outside it (default 5), for MS milliseconds (default 1500),
 * or, with --count, until each thread has taken the lock C times (however
 * long a loaded machine makes that: what the tests judge is then a number
 * of acquisitions, never a span of time).
 * Each thread times every lock call (the wait) and every section (the
 * hold) with CLOCK_MONOTONIC.  Then it prints one line,
 *     done acquired=A wait_ns=W hold_ns=H hold_max_ns=M
 * (sums over all threads; M the longest section any thread timed) and waits for SIGTERM or SIGINT before it exits
 * (normally: libelide removes its segment), so that a test can read the
 * segment of a live process.
 *
 * Exit status: 0; 1 when the mutex failed to exclude (a lost update) or on
 * a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64

static pthread_mutex_t hot_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t guarded;                    /* under hot_lock */
static unsigned hold_us = 20, gap_us = 5, run_ms = 1500, count;
static atomic_bool stop;

struct worker {
	pthread_t thread;
	uint64_t acquired, wait_ns, hold_ns, hold_max_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Busy work until `until`: a section that holds its CPU, as compute does. */
static void spin_until(uint64_t until)
{
	while (now_ns() < until)
		;
}

static void *worker_loop(void *arg)
{
	struct worker *w = arg;

	while (count ? w->acquired < count : !atomic_load_explicit(&stop, memory_order_relaxed)) {
		uint64_t t0 = now_ns(), t1, t2;

		pthread_mutex_lock(&hot_lock);
		t1 = now_ns();
		guarded++;
		spin_until(t1 + hold_us * 1000ull);
		t2 = now_ns();
		pthread_mutex_unlock(&hot_lock);
		w->wait_ns += t1 - t0;
		w->hold_ns += t2 - t1;
		if (t2 - t1 > w->hold_max_ns)
			w->hold_max_ns = t2 - t1;
		w->acquired++;
		spin_until(now_ns() + gap_us * 1000ull);
	}
	return NULL;
}

static int parse_uint(const char *opt, const char *s, unsigned max, unsigned *ret)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max) {
		fprintf(stderr, "watch-measure: invalid %s '%s'\n", opt, s);
		return -EINVAL;
	}
	*ret = (unsigned)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "hold-us", required_argument, NULL, 'H' },
		{ "gap-us", required_argument, NULL, 'g' },
		{ "ms", required_argument, NULL, 'm' },
		{ "count", required_argument, NULL, 'c' },
		{},
	};
	struct worker workers[MAX_THREADS];
	uint64_t acquired = 0, wait_ns = 0, hold_ns = 0, hold_max_ns = 0;
	unsigned nthreads = 2;
	struct timespec run;
	sigset_t quit;
	int c, sig;

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		int r = 0;

		switch (c) {
		case 't':
			r = parse_uint("--threads", optarg, MAX_THREADS, &nthreads);
			break;
		case 'H':
			r = parse_uint("--hold-us", optarg, 1000000, &hold_us);
			break;
		case 'g':
			r = parse_uint("--gap-us", optarg, 1000000, &gap_us);
			break;
		case 'm':
			r = parse_uint("--ms", optarg, 600000, &run_ms);
			break;
		case 'c':
			r = parse_uint("--count", optarg, 100000000, &count);
			break;
		default:
			return 1;
		}
		if (r < 0)
			return 1;
	}
	if (optind != argc || nthreads == 0) {
		fprintf(stderr, "usage: watch-measure [--threads N] [--hold-us H] [--gap-us G] [--ms MS | --count C]\n");
		return 1;
	}
	/* Every thread inherits the mask: the signal waits for sigwait(). */
	sigemptyset(&quit);
	sigaddset(&quit, SIGTERM);
	sigaddset(&quit, SIGINT);
	pthread_sigmask(SIG_BLOCK, &quit, NULL);
	memset(workers, 0, sizeof(workers));
	for (unsigned i = 0; i < nthreads; i++) {
		if (pthread_create(&workers[i].thread, NULL, worker_loop, &workers[i]) != 0) {
			fprintf(stderr, "watch-measure: cannot create a thread\n");
			return 1;
		}
	}
	if (!count) {
		run.tv_sec = run_ms / 1000;
		run.tv_nsec = (long)(run_ms % 1000) * 1000000L;
		while (nanosleep(&run, &run) < 0 && errno == EINTR)
			;
		atomic_store(&stop, true);
	}
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(workers[i].thread, NULL);
		acquired += workers[i].acquired;
		wait_ns += workers[i].wait_ns;
		hold_ns += workers[i].hold_ns;
		if (workers[i].hold_max_ns > hold_max_ns)
			hold_max_ns = workers[i].hold_max_ns;
	}
	if (guarded != acquired) {
		fprintf(stderr, "watch-measure: %llu updates under the lock, %llu acquisitions: the lock failed\n",
			(unsigned long long)guarded, (unsigned long long)acquired);
		return 1;
	}
	printf("done acquired=%llu wait_ns=%llu hold_ns=%llu hold_max_ns=%llu\n", (unsigned long long)acquired,
	       (unsigned long long)wait_ns, (unsigned long long)hold_ns, (unsigned long long)hold_max_ns);
	fflush(stdout);
	/* The segment lives as long as the process: let the test read it. */
	sigwait(&quit, &sig);
	return 0;
}
