/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * churn-worker: the short-lived multi-threaded program of bench/churn.sh.
 * A few threads start on one global mutex that the main thread holds for
 * a millisecond (so libelide sees the lock contended and gives it an entry
 * in the segment), take it in turn for a moment, then the process exits.  Plain pthreads: it knows nothing about libelide.
 *
 *   churn-worker [THREADS [ITERATIONS [LINGER_MS]]]
 *
 * Default 4 threads x 2000 acquisitions each, then exit at once; LINGER_MS
 * keeps the process alive that long after its threads ended.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long counter;
static unsigned long iterations = 2000;

static void *run(void *arg)
{
	(void)arg;
	for (unsigned long i = 0; i < iterations; i++) {
		pthread_mutex_lock(&lock);
		/* Long enough (~100 ns) that a thread arriving meanwhile finds
		 * the lock held, even on a busy machine. */
		for (int k = 0; k < 32; k++)
			counter++;
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long nthreads = 4, linger_ms = 0;
	pthread_t t[64];

	if (argc > 1)
		nthreads = strtoul(argv[1], NULL, 10);
	if (argc > 2)
		iterations = strtoul(argv[2], NULL, 10);
	if (argc > 3)
		linger_ms = strtoul(argv[3], NULL, 10);
	if (nthreads < 1 || nthreads > 64) {
		fprintf(stderr, "churn-worker: THREADS must be 1-64\n");
		return 2;
	}
	/* The threads start on a held lock: each finds it contended. */
	pthread_mutex_lock(&lock);
	for (unsigned long i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, run, NULL)) {
			fprintf(stderr, "churn-worker: pthread_create failed\n");
			return 1;
		}
	{
		struct timespec ts = { .tv_nsec = 1000000 };

		nanosleep(&ts, NULL);
	}
	pthread_mutex_unlock(&lock);
	for (unsigned long i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	if (counter != 32 * nthreads * iterations) {
		fprintf(stderr, "churn-worker: counter %lu, expected %lu\n", counter, 32 * nthreads * iterations);
		return 1;
	}
	if (linger_ms) {
		struct timespec ts = { .tv_sec = (time_t)(linger_ms / 1000), .tv_nsec = (long)(linger_ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
	}
	return 0;
}
