/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * workload-contended - a steady, contended workload for elidectl's tests.
 *
 * Four threads hammer a static mutex (cache_lock) and a global rwlock
 * (table_lock) until --seconds N pass (default 5) or SIGTERM/SIGINT comes,
 * then exit normally, so libelide removes its segment.  Prints "ready" on
 * stdout once every thread runs.  --delay-ms N waits N ms before starting
 * the threads, as a program's own start-up would; --wait-start waits for
 * SIGUSR1 instead (elided's learning test: the locks are first contended
 * once the daemon has adopted the process, however long that took).  The lock names are what the test expects
 * elidectl to find in the symbol tables (.symtab for the static one).
 *
 * Exit status: 0, or 1 when the counters disagree (a lock failed to
 * exclude) or on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <unistd.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NTHREADS 4
#define TABLE_SIZE 64

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
/* Writer-preferring: four busy readers must not starve the writers. */
pthread_rwlock_t table_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

static uint64_t cache_hits;                 /* under cache_lock */
static uint64_t table[TABLE_SIZE];          /* under table_lock */
static uint64_t table_writes;               /* under table_lock */
static atomic_bool stop;
static atomic_int running;

struct worker {
	pthread_t thread;
	unsigned seed;
	uint64_t hits, writes;
};

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&stop, true);
}

static void *worker_loop(void *arg)
{
	struct worker *w = arg;
	uint64_t sum;

	atomic_fetch_add(&running, 1);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned r = (unsigned)rand_r(&w->seed);

		pthread_mutex_lock(&cache_lock);
		cache_hits++;
		pthread_mutex_unlock(&cache_lock);
		w->hits++;

		if (r % 8 == 0) {
			pthread_rwlock_wrlock(&table_lock);
			table[r % TABLE_SIZE]++;
			table_writes++;
			pthread_rwlock_unlock(&table_lock);
			w->writes++;
		} else {
			pthread_rwlock_rdlock(&table_lock);
			sum = 0;
			for (int i = 0; i < TABLE_SIZE; i += 8)
				sum += table[(r + (unsigned)i) % TABLE_SIZE];
			pthread_rwlock_unlock(&table_lock);
			__asm__ volatile("" : : "r"(sum));
		}
	}
	return NULL;
}

static int usage(const char *prog)
{
	fprintf(stderr, "Usage: %s [--seconds N | --ms N] [--drop-to UID] [--delay-ms N] [--wait-start]\n"
		"  --ms N         run N milliseconds instead of --seconds (a short-lived program)\n"
		"  --drop-to UID  become UID (and its group) after start-up, as servers do\n"
		"  --delay-ms N   wait N ms before the threads start\n"
		"  --wait-start   print \"waiting\" and start the threads at SIGUSR1\n", prog);
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "ms", required_argument, NULL, 'm' },
		{ "drop-to", required_argument, NULL, 'u' },
		{ "delay-ms", required_argument, NULL, 'd' },
		{ "wait-start", no_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct worker workers[NTHREADS] = {};
	struct sigaction sa = { .sa_handler = on_signal };
	struct timespec start, now, nap = { 0, 20 * 1000 * 1000 };
	uint64_t hits = 0, writes = 0, slots = 0;
	long run_ms = 5000, drop_to = -1, delay_ms = 0;
	char *end;
	bool wait_start = false;
	int c, r;

	while ((c = getopt_long(argc, argv, "s:m:u:d:wh", options, NULL)) >= 0) {
		switch (c) {
		case 'w':
			wait_start = true;
			break;
		case 'u':
			errno = 0;
			drop_to = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || drop_to < 0)
				return usage(argv[0]);
			break;
		case 'd':
			errno = 0;
			delay_ms = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || delay_ms < 0 || delay_ms > 60000)
				return usage(argv[0]);
			break;
		case 's':
			errno = 0;
			run_ms = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || run_ms <= 0 || run_ms > LONG_MAX / 1000)
				return usage(argv[0]);
			run_ms *= 1000;
			break;
		case 'm':
			errno = 0;
			run_ms = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || run_ms <= 0)
				return usage(argv[0]);
			break;
		default:
			return usage(argv[0]);
		}
	}
	if (optind < argc)
		return usage(argv[0]);
	/* libelide made its segment while we were still root. */
	if (drop_to >= 0 && (setgid((gid_t)drop_to) < 0 || setuid((uid_t)drop_to) < 0)) {
		perror("workload-contended: cannot drop privileges");
		return 1;
	}

	if (delay_ms > 0) {
		struct timespec d = { delay_ms / 1000, (delay_ms % 1000) * 1000000L };

		while (nanosleep(&d, &d) < 0 && errno == EINTR)
			;
	}
	if (wait_start) {
		sigset_t go;
		int sig;

		sigemptyset(&go);
		sigaddset(&go, SIGUSR1);
		sigprocmask(SIG_BLOCK, &go, NULL);
		printf("waiting\n");
		fflush(stdout);
		sigwait(&go, &sig);
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	for (int i = 0; i < NTHREADS; i++) {
		workers[i].seed = (unsigned)i * 2654435761u + 1;
		r = pthread_create(&workers[i].thread, NULL, worker_loop, &workers[i]);
		if (r) {
			fprintf(stderr, "pthread_create: %s\n", strerror(r));
			return 1;
		}
	}
	while (atomic_load(&running) < NTHREADS)
		nanosleep(&nap, NULL);
	printf("ready\n");
	fflush(stdout);

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		long elapsed_ms;

		clock_gettime(CLOCK_MONOTONIC, &now);
		elapsed_ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
		if (atomic_load(&stop) || elapsed_ms >= run_ms)
			break;
		nap.tv_nsec = (run_ms - elapsed_ms < 20 ? run_ms - elapsed_ms : 20) * 1000000L;
		nanosleep(&nap, NULL);
	}
	atomic_store(&stop, true);

	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(workers[i].thread, NULL);
		hits += workers[i].hits;
		writes += workers[i].writes;
	}
	for (int i = 0; i < TABLE_SIZE; i++)
		slots += table[i];
	/* Lost updates would mean a lock (or its elision) failed to exclude. */
	if (hits != cache_hits || writes != table_writes || slots != table_writes) {
		fprintf(stderr, "workload-contended: counters disagree: hits %llu/%llu, writes %llu/%llu/%llu\n",
			(unsigned long long)hits, (unsigned long long)cache_hits,
			(unsigned long long)writes, (unsigned long long)table_writes,
			(unsigned long long)slots);
		return 1;
	}
	printf("done: %llu cache hits, %llu table writes\n", (unsigned long long)hits,
	       (unsigned long long)writes);
	return 0;
}
