/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elide-bench: lock-heavy micro-benchmarks on one global pthread lock.
 *
 * Plain pthreads on purpose: it knows nothing about libelide, so the same
 * binary runs with and without LD_PRELOAD=libelide.so and the numbers are
 * directly comparable. Every workload has an invariant checked at the end;
 * a lock (or elision) bug shows up as check=FAILED, not as a fast number.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CACHE_LINE		64
#define BATCH			64	/* ops between two looks at the stop flag */

#define HASH_BITS		10
#define HASH_BUCKETS		(1u << HASH_BITS)
#define HASH_KEYS		4096u
#define UPDATE_PERCENT		10

#define CAPACITY_BYTES		(64u * 1024u)
#define CAPACITY_LINES		(CAPACITY_BYTES / CACHE_LINE)
#define CAPACITY_STRIDE		(CACHE_LINE / sizeof(uint64_t))

#define MAX_THREADS		1024u
#define MAX_DURATION_MS		(3600u * 1000u)

#define EXIT_USAGE		2

enum workload {
	WL_HASH_LOOKUP,
	WL_HASH_90_10,
	WL_COUNTER,
	WL_CAPACITY,
	WL_SYSCALL,
	WL_RWLOCK_90_10,
	WL_RWLOCK_READ,
	WL_RWLOCK_READ_WP,
	_WL_MAX,
};

static const struct {
	const char *name;
	const char *help;
} workloads[_WL_MAX] = {
	[WL_HASH_LOOKUP] = { "hash-lookup",
		"chained hash table (1024 buckets, 4096 keys), 100% lookups" },
	[WL_HASH_90_10] = { "hash-90-10",
		"same table, 90% lookups, 10% updates (value += 1)" },
	[WL_COUNTER] = { "counter",
		"every op increments one shared counter (all conflicts)" },
	[WL_CAPACITY] = { "capacity",
		"every op reads and writes 64 KiB (one word per cache line)" },
	[WL_SYSCALL] = { "syscall",
		"getppid() syscall inside the lock, plus a counter increment" },
	[WL_RWLOCK_90_10] = { "rwlock-90-10",
		"hash table under a pthread_rwlock_t: 90% rdlock lookups, 10% wrlock updates" },
	[WL_RWLOCK_READ] = { "rwlock-read",
		"same table and rwlock, 100% rdlock lookups (readers share the lock word)" },
	[WL_RWLOCK_READ_WP] = { "rwlock-read-wp",
		"rwlock-read on a rwlock of kind PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP" },
};

/* One node per cache line, so different keys never share a line. */
struct node {
	uint64_t key;
	uint64_t value;
	struct node *next;
} __attribute__((aligned(CACHE_LINE)));

/* Per-thread state, one cache line each so counting never false-shares. */
struct worker {
	pthread_t thread;
	uint64_t rng;
	uint64_t ops;
	uint64_t increments;
	uint64_t sink;
	unsigned index;
} __attribute__((aligned(CACHE_LINE)));

/* The one lock every workload contends on. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;

static enum workload workload;
static struct node *nodes;
static struct node *buckets[HASH_BUCKETS];
static uint64_t initial_sum;
static uint64_t *capacity_buf;
static pthread_barrier_t start_barrier;

/* Shared words on their own lines: the counter is the conflict, the flag is not. */
static struct {
	uint64_t counter;
} shared __attribute__((aligned(CACHE_LINE)));
static struct {
	atomic_int stop;
} control __attribute__((aligned(CACHE_LINE)));

/* Lookups land here at the end, so the compiler must keep every load. */
static volatile uint64_t global_sink;

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static inline uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static inline unsigned hash_bucket(uint64_t key)
{
	return (unsigned)((key * UINT64_C(0x9e3779b97f4a7c15)) >> (64 - HASH_BITS));
}

static inline struct node *hash_find(uint64_t key)
{
	struct node *n;

	for (n = buckets[hash_bucket(key)]; n; n = n->next)
		if (n->key == key)
			return n;
	return NULL;
}

static int hash_setup(uint64_t seed)
{
	nodes = aligned_alloc(CACHE_LINE, HASH_KEYS * sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;

	for (unsigned i = 0; i < HASH_KEYS; i++) {
		struct node *n = &nodes[i];
		unsigned b;

		n->key = i;
		/* Non-zero values, so lookups sum something real. */
		n->value = splitmix64(&seed) & 0xffff;
		initial_sum += n->value;
		b = hash_bucket(i);
		n->next = buckets[b];
		buckets[b] = n;
	}
	return 0;
}

static int capacity_setup(void)
{
	capacity_buf = aligned_alloc(CACHE_LINE, CAPACITY_BYTES);
	if (!capacity_buf)
		return -ENOMEM;
	memset(capacity_buf, 0, CAPACITY_BYTES);
	return 0;
}

/* The rwlock becomes one whose readers let a waiting writer go first. */
static int rwlock_prefer_writers(void)
{
	pthread_rwlockattr_t attr;
	int r;

	r = pthread_rwlockattr_init(&attr);
	if (r == 0)
		r = pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	if (r == 0)
		r = pthread_rwlock_init(&rwlock, &attr);
	pthread_rwlockattr_destroy(&attr);
	return -r;
}

/* Split one random word into a key and an update decision. */
static inline bool pick(struct worker *w, uint64_t *key)
{
	uint64_t r = xorshift64(&w->rng);

	*key = r % HASH_KEYS;
	return (r >> 32) % 100 < UPDATE_PERCENT;
}

static inline void op_hash_lookup(struct worker *w)
{
	uint64_t key = xorshift64(&w->rng) % HASH_KEYS;
	struct node *n;

	pthread_mutex_lock(&lock);
	n = hash_find(key);
	if (n)
		w->sink += n->value;
	pthread_mutex_unlock(&lock);
}

static inline void op_hash_90_10(struct worker *w)
{
	uint64_t key;
	bool update = pick(w, &key);
	struct node *n;

	pthread_mutex_lock(&lock);
	n = hash_find(key);
	if (n) {
		if (update)
			n->value++;
		else
			w->sink += n->value;
	}
	pthread_mutex_unlock(&lock);
	if (n && update)
		w->increments++;
}

static inline void op_counter(struct worker *w)
{
	(void)w;
	pthread_mutex_lock(&lock);
	shared.counter++;
	pthread_mutex_unlock(&lock);
}

static inline void op_capacity(struct worker *w)
{
	(void)w;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < CAPACITY_LINES; i++)
		capacity_buf[i * CAPACITY_STRIDE]++;
	pthread_mutex_unlock(&lock);
}

static inline void op_syscall(struct worker *w)
{
	pthread_mutex_lock(&lock);
	/* Raw syscall: glibc must not answer from a cache. */
	w->sink += (uint64_t)syscall(SYS_getppid);
	shared.counter++;
	pthread_mutex_unlock(&lock);
}

static inline void op_rwlock_90_10(struct worker *w)
{
	uint64_t key;
	bool update = pick(w, &key);
	struct node *n;

	if (update) {
		pthread_rwlock_wrlock(&rwlock);
		n = hash_find(key);
		if (n)
			n->value++;
		pthread_rwlock_unlock(&rwlock);
		if (n)
			w->increments++;
		return;
	}

	pthread_rwlock_rdlock(&rwlock);
	n = hash_find(key);
	if (n)
		w->sink += n->value;
	pthread_rwlock_unlock(&rwlock);
}

static inline void op_rwlock_read(struct worker *w)
{
	uint64_t key = xorshift64(&w->rng) % HASH_KEYS;
	struct node *n;

	pthread_rwlock_rdlock(&rwlock);
	n = hash_find(key);
	if (n)
		w->sink += n->value;
	pthread_rwlock_unlock(&rwlock);
}

#define RUN_BATCH(op, w)					\
	do {							\
		for (unsigned _i = 0; _i < BATCH; _i++)		\
			op(w);					\
	} while (0)

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int r;

	r = pthread_barrier_wait(&start_barrier);
	if (r != 0 && r != PTHREAD_BARRIER_SERIAL_THREAD) {
		fprintf(stderr, "elide-bench: pthread_barrier_wait: %s\n", strerror(r));
		exit(EXIT_FAILURE);
	}

	/* Switch outside the batch: the inner loop is just the op. */
	while (!atomic_load_explicit(&control.stop, memory_order_relaxed)) {
		switch (workload) {
		case WL_HASH_LOOKUP:
			RUN_BATCH(op_hash_lookup, w);
			break;
		case WL_HASH_90_10:
			RUN_BATCH(op_hash_90_10, w);
			break;
		case WL_COUNTER:
			RUN_BATCH(op_counter, w);
			break;
		case WL_CAPACITY:
			RUN_BATCH(op_capacity, w);
			break;
		case WL_SYSCALL:
			RUN_BATCH(op_syscall, w);
			break;
		case WL_RWLOCK_90_10:
			RUN_BATCH(op_rwlock_90_10, w);
			break;
		case WL_RWLOCK_READ:
		case WL_RWLOCK_READ_WP:
			RUN_BATCH(op_rwlock_read, w);
			break;
		default:
			abort();
		}
		w->ops += BATCH;
	}
	return NULL;
}

static double ts_diff(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* Returns 0 when the invariant holds, else writes why into msg. */
static int check(const struct worker *ws, unsigned n, uint64_t total, char *msg, size_t len)
{
	uint64_t incs = 0, sum = 0;

	switch (workload) {
	case WL_HASH_LOOKUP:
	case WL_HASH_90_10:
	case WL_RWLOCK_90_10:
	case WL_RWLOCK_READ:
	case WL_RWLOCK_READ_WP:
		for (unsigned i = 0; i < n; i++)
			incs += ws[i].increments;
		for (unsigned i = 0; i < HASH_KEYS; i++)
			sum += nodes[i].value;
		if (sum - initial_sum == incs)
			return 0;
		snprintf(msg, len, "sum of node values grew by %" PRIu64 ", increments %" PRIu64,
			 sum - initial_sum, incs);
		return -1;

	case WL_COUNTER:
	case WL_SYSCALL:
		if (shared.counter == total)
			return 0;
		snprintf(msg, len, "counter %" PRIu64 " != ops %" PRIu64, shared.counter, total);
		return -1;

	case WL_CAPACITY:
		for (unsigned i = 0; i < CAPACITY_LINES; i++) {
			uint64_t v = capacity_buf[i * CAPACITY_STRIDE];

			if (v != total) {
				snprintf(msg, len, "line %u word %" PRIu64 " != ops %" PRIu64,
					 i, v, total);
				return -1;
			}
		}
		return 0;

	default:
		snprintf(msg, len, "unknown workload");
		return -1;
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: elide-bench --workload W [--threads N] [--duration-ms MS] [--seed S]\n"
		"       elide-bench --list | --help\n"
		"\n"
		"Runs one lock-heavy workload on ONE global pthread lock and prints one line:\n"
		"  workload=W threads=N ops=TOTAL seconds=S ops_per_sec=X cpu_seconds=C ops_per_cpu_sec=Y check=ok\n"
		"or, when the workload's invariant does not hold at the end:\n"
		"  ... check=FAILED (why)\n"
		"\n"
		"Options:\n"
		"  -w, --workload W      workload to run (required; see below)\n"
		"  -t, --threads N       worker threads, 1..%u (default 1)\n"
		"  -d, --duration-ms MS  how long the workers run, 1..%u ms (default 1000)\n"
		"  -s, --seed S          seed for keys and initial values (default 1)\n"
		"  -l, --list            print the workload names, one a line, and exit\n"
		"  -h, --help            show this help and exit\n"
		"\n"
		"Workloads:\n",
		MAX_THREADS, MAX_DURATION_MS);
	for (unsigned i = 0; i < _WL_MAX; i++)
		fprintf(f, "  %-14s %s\n", workloads[i].name, workloads[i].help);
	fprintf(f,
		"\n"
		"Workers start together on a barrier; each checks a shared stop flag every\n"
		"%u ops, outside the lock. ops_per_sec = ops / seconds, timed with\n"
		"CLOCK_MONOTONIC from the start barrier to the last worker's exit.\n"
		"\n"
		"Exit status: 0 check=ok, 1 check=FAILED or runtime error, 2 bad arguments.\n",
		BATCH);
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	unsigned long long v;
	char *end;

	/* strtoull accepts "-1" and wraps; refuse signs outright. */
	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return -EINVAL;
	if (v < lo || v > hi)
		return -ERANGE;
	*out = v;
	return 0;
}

static int lookup_workload(const char *name)
{
	for (unsigned i = 0; i < _WL_MAX; i++)
		if (strcmp(name, workloads[i].name) == 0)
			return (int)i;
	return -1;
}

static int bad_arg(const char *opt, const char *val, const char *why)
{
	fprintf(stderr, "elide-bench: invalid %s '%s': %s (see --help)\n", opt, val, why);
	return EXIT_USAGE;
}

/* CPU time of every thread of the process (user and system): what the
 * operations cost in CPU, spinning included, whatever the wall clock. */
static double cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "workload",    required_argument, NULL, 'w' },
		{ "threads",     required_argument, NULL, 't' },
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "seed",        required_argument, NULL, 's' },
		{ "list",        no_argument,       NULL, 'l' },
		{ "help",        no_argument,       NULL, 'h' },
		{}
	};
	const char *wl_name = NULL;
	uint64_t nthreads = 1, duration_ms = 1000, seed = 1, total = 0;
	struct timespec start, deadline, end;
	struct worker *ws;
	char msg[256];
	double secs, cpu, cpu_start;
	int c, r;

	opterr = 0;	/* our own messages, with exit status 2 */
	while ((c = getopt_long(argc, argv, ":w:t:d:s:lh", longopts, NULL)) != -1) {
		switch (c) {
		case 'w':
			wl_name = optarg;
			break;
		case 't':
			r = parse_u64(optarg, 1, MAX_THREADS, &nthreads);
			if (r < 0)
				return bad_arg("--threads", optarg, r == -ERANGE ?
					       "out of range 1..1024" : "not a number");
			break;
		case 'd':
			r = parse_u64(optarg, 1, MAX_DURATION_MS, &duration_ms);
			if (r < 0)
				return bad_arg("--duration-ms", optarg, r == -ERANGE ?
					       "out of range 1..3600000" : "not a number");
			break;
		case 's':
			r = parse_u64(optarg, 0, UINT64_MAX, &seed);
			if (r < 0)
				return bad_arg("--seed", optarg, "not an unsigned 64-bit number");
			break;
		case 'l':
			for (unsigned i = 0; i < _WL_MAX; i++)
				printf("%s\n", workloads[i].name);
			return EXIT_SUCCESS;
		case 'h':
			usage(stdout);
			return EXIT_SUCCESS;
		case ':':
			fprintf(stderr, "elide-bench: option '%s' needs a value (see --help)\n",
				argv[optind - 1]);
			return EXIT_USAGE;
		default:
			if (optopt)
				fprintf(stderr, "elide-bench: unknown option '-%c' (see --help)\n",
					optopt);
			else
				fprintf(stderr, "elide-bench: unknown option '%s' (see --help)\n",
					argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "elide-bench: unexpected argument '%s' (see --help)\n", argv[optind]);
		return EXIT_USAGE;
	}
	if (!wl_name) {
		fprintf(stderr, "elide-bench: --workload is required (see --help)\n");
		return EXIT_USAGE;
	}
	r = lookup_workload(wl_name);
	if (r < 0)
		return bad_arg("--workload", wl_name, "unknown workload, --list shows them");
	workload = (enum workload)r;

	switch (workload) {
	case WL_CAPACITY:
		r = capacity_setup();
		break;
	case WL_COUNTER:
	case WL_SYSCALL:
		r = 0;
		break;
	case WL_RWLOCK_READ_WP:
		r = rwlock_prefer_writers();
		if (r == 0)
			r = hash_setup(seed);
		break;
	default:
		r = hash_setup(seed);
		break;
	}
	if (r < 0) {
		fprintf(stderr, "elide-bench: setup: %s\n", strerror(-r));
		return EXIT_FAILURE;
	}

	ws = aligned_alloc(CACHE_LINE, nthreads * sizeof(*ws));
	if (!ws) {
		fprintf(stderr, "elide-bench: out of memory\n");
		return EXIT_FAILURE;
	}
	memset(ws, 0, nthreads * sizeof(*ws));

	r = pthread_barrier_init(&start_barrier, NULL, (unsigned)nthreads + 1);
	if (r) {
		fprintf(stderr, "elide-bench: pthread_barrier_init: %s\n", strerror(r));
		return EXIT_FAILURE;
	}

	for (unsigned i = 0; i < nthreads; i++) {
		uint64_t s = seed ^ ((uint64_t)i << 32);

		ws[i].index = i;
		/* xorshift must never start at 0. */
		ws[i].rng = splitmix64(&s) | 1;
		r = pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]);
		if (r) {
			/* Started workers wait on the barrier forever; just leave. */
			fprintf(stderr, "elide-bench: pthread_create: %s\n", strerror(r));
			return EXIT_FAILURE;
		}
	}

	r = pthread_barrier_wait(&start_barrier);
	if (r != 0 && r != PTHREAD_BARRIER_SERIAL_THREAD) {
		fprintf(stderr, "elide-bench: pthread_barrier_wait: %s\n", strerror(r));
		return EXIT_FAILURE;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	cpu_start = cpu_seconds();

	/* Absolute deadline: a signal that interrupts the sleep cannot stretch it. */
	deadline = start;
	deadline.tv_sec += (time_t)(duration_ms / 1000);
	deadline.tv_nsec += (long)(duration_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	while ((r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL)) == EINTR)
		;
	if (r) {
		fprintf(stderr, "elide-bench: clock_nanosleep: %s\n", strerror(r));
		return EXIT_FAILURE;
	}
	atomic_store_explicit(&control.stop, 1, memory_order_relaxed);

	for (unsigned i = 0; i < nthreads; i++) {
		r = pthread_join(ws[i].thread, NULL);
		if (r) {
			fprintf(stderr, "elide-bench: pthread_join: %s\n", strerror(r));
			return EXIT_FAILURE;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	cpu = cpu_seconds() - cpu_start;

	for (unsigned i = 0; i < nthreads; i++) {
		total += ws[i].ops;
		global_sink += ws[i].sink;
	}
	secs = ts_diff(&start, &end);

	printf("workload=%s threads=%" PRIu64 " ops=%" PRIu64 " seconds=%.6f ops_per_sec=%.0f cpu_seconds=%.6f "
	       "ops_per_cpu_sec=%.0f ",
	       workloads[workload].name, nthreads, total, secs, secs > 0 ? (double)total / secs : 0.0, cpu,
	       cpu > 0 ? (double)total / cpu : 0.0);
	if (check(ws, (unsigned)nthreads, total, msg, sizeof(msg)) < 0) {
		printf("check=FAILED (%s)\n", msg);
		return EXIT_FAILURE;
	}
	printf("check=ok\n");
	return EXIT_SUCCESS;
}
