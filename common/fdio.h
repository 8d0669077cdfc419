/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Whole reads and writes on a file descriptor, for libelide and the tools
 * alike: no allocation, no logging, errno as the system calls leave it.
 */
#ifndef ELIDE_FDIO_H
#define ELIDE_FDIO_H

#include <errno.h>
#include <stddef.h>
#include <sys/types.h>
#include <unistd.h>

/* All of buf, retrying short writes and EINTR: 0 or -errno (-EIO when
 * write() wrote nothing). */
static inline int fd_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Up to len bytes, until end of file: how many were read (fewer at end of
 * file or on an error). */
static inline size_t fd_read_up_to(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

#endif
