/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork-workload - a pre-fork server's shape, for elided's fork test: the
 * parent takes its locks, then forks children without exec (as stress-ng,
 * Apache's prefork MPM and PostgreSQL do); each child runs two threads on a
 * contended static mutex (fork_lock) and on a mutex of its own made after
 * the fork (child_lock), until it is told to stop.
 *
 *   fork-workload [--children N]
 *
 * The parent prints "child PID" for each child, then "ready" once every
 * child's threads run, and waits for SIGTERM or SIGINT: it then sends
 * SIGTERM to its children and reaps them.  A child exits 0 when it
 * stopped cleanly and its locks excluded (no lost update).  The parent
 * exits 0 when every child did.  Nothing is timed: the children work
 * until the test has seen what it wants.
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
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CHILDREN 16
#define NTHREADS 2

static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t fork_count;                 /* under fork_lock */
static pthread_mutex_t *child_lock;         /* made in the child, after the fork */
static uint64_t child_count;                /* under *child_lock */
static atomic_bool stop;
static atomic_int running;

struct worker {
	pthread_t thread;
	uint64_t fork_done, child_done;
};

static void on_term(int sig)
{
	(void)sig;
	atomic_store(&stop, true);
}

/* A section long enough that the other thread finds the lock held. */
static void work(volatile uint64_t *v)
{
	for (int i = 0; i < 200; i++)
		(*v)++;
}

static void *worker_loop(void *arg)
{
	struct worker *w = arg;
	volatile uint64_t scratch = 0;

	atomic_fetch_add(&running, 1);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		pthread_mutex_lock(&fork_lock);
		fork_count++;
		work(&scratch);
		pthread_mutex_unlock(&fork_lock);
		w->fork_done++;

		pthread_mutex_lock(child_lock);
		child_count++;
		work(&scratch);
		pthread_mutex_unlock(child_lock);
		w->child_done++;
	}
	return NULL;
}

static int child_main(int ready_fd)
{
	struct worker workers[NTHREADS];
	uint64_t fork_done = 0, child_done = 0;
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	fork_count = 0;
	child_lock = malloc(sizeof(*child_lock));
	if (!child_lock || pthread_mutex_init(child_lock, NULL) != 0)
		return 1;
	memset(workers, 0, sizeof(workers));
	for (int i = 0; i < NTHREADS; i++)
		if (pthread_create(&workers[i].thread, NULL, worker_loop, &workers[i]) != 0)
			return 1;
	while (atomic_load(&running) < NTHREADS)
		sched_yield();
	/* One byte: this child works. */
	if (write(ready_fd, "r", 1) != 1)
		return 1;
	close(ready_fd);
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(workers[i].thread, NULL);
		fork_done += workers[i].fork_done;
		child_done += workers[i].child_done;
	}
	if (fork_count != fork_done || child_count != child_done) {
		fprintf(stderr, "fork-workload: pid %d: %llu/%llu updates, %llu/%llu acquisitions: a lock failed\n",
			(int)getpid(), (unsigned long long)fork_count, (unsigned long long)child_count,
			(unsigned long long)fork_done, (unsigned long long)child_done);
		return 1;
	}
	pthread_mutex_destroy(child_lock);
	free(child_lock);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "children", required_argument, NULL, 'c' },
		{},
	};
	pid_t children[MAX_CHILDREN];
	unsigned nchildren = 2;
	int c, pipefd[2], sig, status, rc = 0;
	sigset_t quit;

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		char *end;

		if (c != 'c')
			return 1;
		errno = 0;
		nchildren = (unsigned)strtoul(optarg, &end, 10);
		if (errno || *end || nchildren == 0 || nchildren > MAX_CHILDREN) {
			fprintf(stderr, "fork-workload: invalid --children '%s'\n", optarg);
			return 1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "usage: fork-workload [--children N]\n");
		return 1;
	}
	/* The parent's own use of the lock, before the fork: its record (and
	 * the parent's segment) exist when the children copy them. */
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&fork_lock);
		fork_count++;
		pthread_mutex_unlock(&fork_lock);
	}
	if (pipe(pipefd) < 0)
		return 1;
	for (unsigned i = 0; i < nchildren; i++) {
		fflush(stdout);
		children[i] = fork();
		if (children[i] < 0) {
			perror("fork-workload: fork");
			return 1;
		}
		if (children[i] == 0) {
			close(pipefd[0]);
			_exit(child_main(pipefd[1]));
		}
		printf("child %d\n", (int)children[i]);
	}
	close(pipefd[1]);
	/* SIGTERM/SIGINT for sigwait() only: blocked after the children have
	 * their own handlers' default state. */
	sigemptyset(&quit);
	sigaddset(&quit, SIGTERM);
	sigaddset(&quit, SIGINT);
	pthread_sigmask(SIG_BLOCK, &quit, NULL);
	for (unsigned i = 0; i < nchildren; i++) {
		char b;

		if (read(pipefd[0], &b, 1) != 1) {
			fprintf(stderr, "fork-workload: a child died before it worked\n");
			rc = 1;
			break;
		}
	}
	if (rc == 0) {
		printf("ready\n");
		fflush(stdout);
		sigwait(&quit, &sig);
	}
	for (unsigned i = 0; i < nchildren; i++)
		kill(children[i], SIGTERM);
	for (unsigned i = 0; i < nchildren; i++) {
		if (waitpid(children[i], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "fork-workload: child %d failed (status %#x)\n", (int)children[i], status);
			rc = 1;
		}
	}
	return rc;
}
