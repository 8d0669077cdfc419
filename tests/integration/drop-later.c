/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * drop-later: a root process that changes owner without an exec, as a
 * server dropping its privileges after start-up does (elided's tests of
 * what follows a process's owner).
 *
 *   drop-later UID GID FILE SECONDS
 *
 * Prints "ready", waits until FILE exists (polled every 20 ms), then
 * becomes UID:GID (setgroups, setresgid, setresuid: real, effective and
 * saved), prints "dropped", and lives until SECONDS have passed since its
 * start or a SIGTERM comes.  Exit status 0, 1 when it could not drop,
 * 2 on a usage error.
 */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static long number(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0)
		return -1;
	return v;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct timespec nap = { 0, 20 * 1000 * 1000 };
	struct sigaction sa = { .sa_handler = on_term };
	long uid, gid, seconds;
	double end;
	int dropped = 0;

	if (argc != 5 || (uid = number(argv[1])) < 0 || (gid = number(argv[2])) < 0 ||
	    (seconds = number(argv[4])) <= 0) {
		fprintf(stderr, "usage: drop-later UID GID FILE SECONDS\n");
		return 2;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	end = mono_s() + (double)seconds;
	printf("ready\n");
	fflush(stdout);
	while (!stop && mono_s() < end) {
		if (!dropped && access(argv[3], F_OK) == 0) {
			if (setgroups(0, NULL) < 0 || setresgid((gid_t)gid, (gid_t)gid, (gid_t)gid) < 0 ||
			    setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) < 0) {
				perror("drop-later: cannot drop privileges");
				return 1;
			}
			dropped = 1;
			printf("dropped\n");
			fflush(stdout);
		}
		nanosleep(&nap, NULL);
	}
	return 0;
}
