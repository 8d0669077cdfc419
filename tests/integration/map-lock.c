/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * map-lock SECONDS [--chmod0] FILE...: maps each FILE (private, writable
 * copy-on-write, still a file-backed mapping of it) and uses a pthread
 * mutex placed at offset 0x1008 of each, from two threads, so that
 * libelide reports locks that lie inside those files; prints "ready" and
 * runs for SECONDS.  --chmod0: once mapped, and before any lock is used,
 * each file is made unreadable (mode 000; its owner may), so that only a
 * reader with root's rights could open it again.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 16

static pthread_mutex_t *locks[MAX_FILES];
static int nlocks;
static int stop;
static unsigned long counters[MAX_FILES];

static void *worker(void *arg)
{
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		for (int i = 0; i < nlocks; i++) {
			pthread_mutex_lock(locks[i]);
			counters[i]++;
			pthread_mutex_unlock(locks[i]);
		}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[2];
	double seconds;
	int chmod0 = 0;

	if (argc < 3)
		return fprintf(stderr, "usage: map-lock SECONDS FILE...\n"), 2;
	seconds = atof(argv[1]);
	for (int i = 2; i < argc && nlocks < MAX_FILES; i++) {
		if (!strcmp(argv[i], "--chmod0")) {
			chmod0 = 1;
			continue;
		}
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
		struct stat st;
		char *p;

		if (fd < 0 || fstat(fd, &st) < 0)
			return perror(argv[i]), 1;
		if (st.st_size < 0x1008 + (off_t)sizeof(pthread_mutex_t))
			return fprintf(stderr, "map-lock: %s: too small\n", argv[i]), 1;
		p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED)
			return perror("mmap"), 1;
		if (chmod0 && fchmod(fd, 0) < 0)
			return perror("fchmod"), 1;
		close(fd);
		locks[nlocks] = (void *)(p + 0x1008);
		pthread_mutex_init(locks[nlocks], NULL);
		nlocks++;
	}
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, worker, NULL) != 0)
			return fprintf(stderr, "map-lock: pthread_create failed\n"), 1;
	printf("ready\n");
	fflush(stdout);
	{
		struct timespec ts = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };

		nanosleep(&ts, NULL);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 0;
}
