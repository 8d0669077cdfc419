/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork-bench: what fork() costs a program, for bench/fork.sh.
 *
 *   fork-bench exit N    N x (fork, child _exit(0), waitpid)
 *   fork-bench exec N    N x (fork, child execv("/bin/true"), waitpid)
 *
 * Before the loop the program names 16 mutexes through elide.h (a no-op
 * without libelide): under libelide they have records and segment entries,
 * as a real program's contended locks would, so a child has a lock table to
 * inherit.  Prints two numbers on stdout: the mean wall-clock nanoseconds
 * per iteration, and the mean CPU nanoseconds (this process's and its
 * children's, user and system), which a busy shared machine disturbs less.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elide.h"

#define NLOCKS 16
#define WARMUP 20

static pthread_mutex_t locks[NLOCKS];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct rusage self, children;
	uint64_t us;

	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &children);
	us = (uint64_t)(self.ru_utime.tv_sec + self.ru_stime.tv_sec + children.ru_utime.tv_sec +
			children.ru_stime.tv_sec) * 1000000u +
	     (uint64_t)(self.ru_utime.tv_usec + self.ru_stime.tv_usec + children.ru_utime.tv_usec +
			children.ru_stime.tv_usec);
	return us * 1000u;
}

static void one(bool exec_true)
{
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork-bench: fork");
		exit(1);
	}
	if (pid == 0) {
		if (exec_true) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "fork-bench: child failed (status %d)\n", status);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	bool exec_true;
	long n;
	uint64_t t0, c0;

	if (argc != 3 || (strcmp(argv[1], "exit") && strcmp(argv[1], "exec")) || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: fork-bench exit|exec ITERATIONS\n");
		return 2;
	}
	exec_true = !strcmp(argv[1], "exec");
	for (int i = 0; i < NLOCKS; i++) {
		char name[16];

		pthread_mutex_init(&locks[i], NULL);
		snprintf(name, sizeof(name), "bench-%d", i);
		(void)elide_mutex_set_name(&locks[i], name);
	}
	for (int i = 0; i < WARMUP; i++)
		one(exec_true);
	c0 = cpu_ns();
	t0 = now_ns();
	for (long i = 0; i < n; i++)
		one(exec_true);
	printf("%.0f %.0f\n", (double)(now_ns() - t0) / (double)n, (double)(cpu_ns() - c0) / (double)n);
	return 0;
}
