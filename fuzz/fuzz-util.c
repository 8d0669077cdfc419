/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Scratch directory of a fuzzer process; see fuzz-util.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz-util.h"

static char dir_path[PATH_MAX];
static int dir_fd = -1;

static void die(const char *what)
{
	fprintf(stderr, "fuzz: %s: %s\n", what, strerror(errno));
	abort();
}

/* Removes everything below dirfd (the harnesses make at most a few levels). */
static void remove_tree_at(int dirfd)
{
	int fd = dup(dirfd);
	DIR *d;
	struct dirent *e;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(dirfd, e->d_name, 0) == 0)
			continue;
		if (errno == EISDIR || errno == EPERM) {
			int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0) {
				remove_tree_at(sub);
				close(sub);
			}
			unlinkat(dirfd, e->d_name, AT_REMOVEDIR);
		}
	}
	closedir(d);
}

static void cleanup(void)
{
	if (dir_fd < 0)
		return;
	remove_tree_at(dir_fd);
	close(dir_fd);
	dir_fd = -1;
	rmdir(dir_path);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	int n;

	if (dir_fd >= 0)
		return;
	if (!tmp || !*tmp)
		tmp = "/tmp";
	n = snprintf(dir_path, sizeof(dir_path), "%s/elide-fuzz-XXXXXX", tmp);
	if (n < 0 || (size_t)n >= sizeof(dir_path)) {
		errno = ENAMETOOLONG;
		die("TMPDIR");
	}
	if (!mkdtemp(dir_path))
		die(dir_path);
	dir_fd = open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		die(dir_path);
	atexit(cleanup);
}

const char *fuzz_dir(void)
{
	setup();
	return dir_path;
}

int fuzz_dirfd(void)
{
	setup();
	return dir_fd;
}

void fuzz_write(const char *name, const uint8_t *data, size_t size)
{
	int fd = openat(fuzz_dirfd(), name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	size_t done = 0;

	if (fd < 0)
		die(name);
	while (done < size) {
		ssize_t k = write(fd, data + done, size - done);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			die(name);
		}
		done += (size_t)k;
	}
	if (close(fd) < 0)
		die(name);
}
