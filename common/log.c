/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static const char *log_prefix = "elide";
static int log_max_priority = LOG_INFO;
static bool log_journal;
static int log_fd = STDERR_FILENO;

void log_set_prefix(const char *prefix)
{
	log_prefix = prefix;
}

void log_set_max_priority(int priority)
{
	log_max_priority = priority;
}

int log_get_max_priority(void)
{
	return log_max_priority;
}

void log_set_journal_prefix(bool enable)
{
	log_journal = enable;
}

void log_set_fd(int fd)
{
	log_fd = fd;
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

void log_fullv(int priority, const char *fmt, va_list ap)
{
	char buf[1024];
	size_t len = 0;
	int saved_errno = errno;
	int n;

	if (priority > log_max_priority)
		return;
	if (log_journal)
		len += (size_t)snprintf(buf, sizeof(buf), "<%d>", priority);
	n = snprintf(buf + len, sizeof(buf) - len, "%s: ", log_prefix);
	if (n > 0)
		len += (size_t)n;
	if (len < sizeof(buf)) {
		n = vsnprintf(buf + len, sizeof(buf) - len, fmt, ap);
		if (n > 0)
			len += (size_t)n;
	}
	if (len > sizeof(buf) - 2)
		len = sizeof(buf) - 2;
	buf[len++] = '\n';
	write_all(log_fd, buf, len);
	errno = saved_errno;
}

void log_full(int priority, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_fullv(priority, fmt, ap);
	va_end(ap);
}

int log_full_errno(int priority, int error, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	if (error < 0)
		error = -error;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (error)
		log_full(priority, "%s: %s", msg, strerror(error));
	else
		log_full(priority, "%s", msg);
	return -error;
}
