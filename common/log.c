/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* A line at most, with its newline. */
#define LOG_LINE_MAX 1024

static const char *log_prefix = "elide";
static int log_max_priority = LOG_INFO;
static bool log_journal;
static bool log_escape;
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

void log_set_escape(bool enable)
{
	log_escape = enable;
}

/*
 * The message part of buf[from, len) with control bytes as \xNN and '\'
 * as "\\": a name taken from a process (an executable called "x\nelided:
 * ..." or holding a terminal escape) shows as text, and cannot forge a
 * line or drive whoever reads the log.  Returns the new length.  Not
 * inlined: libelide (no escaping) never pays for its buffer on the stack.
 */
static __attribute__((noinline)) size_t escape_line(char *buf, size_t from, size_t len, size_t size)
{
	char out[LOG_LINE_MAX * 4];
	size_t n = 0;

	for (size_t i = from; i < len && n + 4 < sizeof(out); i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c < 0x20 || c == 0x7f) {
			n += (size_t)snprintf(out + n, sizeof(out) - n, "\\x%02x", c);
		} else if (c == '\\') {
			out[n++] = '\\';
			out[n++] = '\\';
		} else {
			out[n++] = (char)c;
		}
	}
	if (from + n > size)
		n = size - from;
	memcpy(buf + from, out, n);
	return from + n;
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

/*
 * One line: the message, then ": strerror(error)" when error is nonzero.
 * One buffer for both: libelide logs from inside a program's lock calls,
 * on whatever stack the program gave that thread.
 */
static void log_line(int priority, int error, const char *fmt, va_list ap)
{
	char buf[LOG_LINE_MAX];
	size_t len = 0, prefix_len;
	int saved_errno = errno;
	int n;

	if (priority > log_max_priority)
		return;
	/* journald reads the priority and adds our name itself. */
	if (log_journal)
		n = snprintf(buf, sizeof(buf), "<%d>", priority);
	else
		n = snprintf(buf, sizeof(buf), "%s: ", log_prefix);
	if (n > 0)
		len = (size_t)n;
	prefix_len = len;
	if (len < sizeof(buf)) {
		n = vsnprintf(buf + len, sizeof(buf) - len, fmt, ap);
		if (n > 0)
			len += (size_t)n;
	}
	if (log_escape && len > prefix_len)
		len = escape_line(buf, prefix_len, len < sizeof(buf) ? len : sizeof(buf) - 1, sizeof(buf));
	if (error && len < sizeof(buf)) {
		n = snprintf(buf + len, sizeof(buf) - len, ": %s", strerror(error));
		if (n > 0)
			len += (size_t)n;
	}
	if (len > sizeof(buf) - 2)
		len = sizeof(buf) - 2;
	buf[len++] = '\n';
	write_all(log_fd, buf, len);
	errno = saved_errno;
}

void log_fullv(int priority, const char *fmt, va_list ap)
{
	log_line(priority, 0, fmt, ap);
}

void log_full(int priority, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(priority, 0, fmt, ap);
	va_end(ap);
}

int log_full_errno(int priority, int error, const char *fmt, ...)
{
	va_list ap;

	if (error < 0)
		error = -error;
	va_start(ap, fmt);
	log_line(priority, error, fmt, ap);
	va_end(ap);
	return -error;
}

/* ---- per-uid rate limiting ------------------------------------------ */

void log_ratelimit_init(struct log_ratelimit *rl, uint64_t window_ns, unsigned burst)
{
	memset(rl, 0, sizeof(*rl));
	rl->window_ns = window_ns;
	rl->burst = burst;
	rl->other.uid = (uid_t)-1;
}

static void ratelimit_summary(struct log_ratelimit *rl, struct log_ratelimit_slot *s)
{
	if (!s->suppressed)
		return;
	if (s == &rl->other)
		log_full(s->priority, "suppressed %u messages about other uids", s->suppressed);
	else
		log_full(s->priority, "suppressed %u messages about uid %u", s->suppressed, (unsigned)s->uid);
	s->suppressed = 0;
}

static bool window_ended(const struct log_ratelimit *rl, const struct log_ratelimit_slot *s, uint64_t now_ns)
{
	return now_ns - s->window_start_ns >= rl->window_ns;
}

static struct log_ratelimit_slot *ratelimit_slot(struct log_ratelimit *rl, uid_t uid, uint64_t now_ns)
{
	struct log_ratelimit_slot *free_slot = NULL, *ended = NULL;

	for (size_t i = 0; i < LOG_RATELIMIT_SLOTS; i++) {
		struct log_ratelimit_slot *s = &rl->slots[i];

		if (!s->used) {
			if (!free_slot)
				free_slot = s;
		} else if (s->uid == uid) {
			return s;
		} else if (!ended && window_ended(rl, s, now_ns)) {
			ended = s;
		}
	}
	if (!free_slot && ended) {
		ratelimit_summary(rl, ended);
		free_slot = ended;
	}
	if (!free_slot)
		return &rl->other;
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = true;
	free_slot->uid = uid;
	free_slot->window_start_ns = now_ns;
	return free_slot;
}

bool log_ratelimit_allow(struct log_ratelimit *rl, uid_t uid, int priority, uint64_t now_ns)
{
	struct log_ratelimit_slot *s;

	if (!rl || uid == 0)
		return true;
	s = ratelimit_slot(rl, uid, now_ns);
	if (window_ended(rl, s, now_ns)) {
		ratelimit_summary(rl, s);
		s->window_start_ns = now_ns;
		s->shown = 0;
	}
	if (s->shown < rl->burst) {
		s->shown++;
		return true;
	}
	if (!s->suppressed || priority < s->priority)
		s->priority = priority;
	s->suppressed++;
	return false;
}

void log_ratelimit_flush(struct log_ratelimit *rl, uint64_t now_ns)
{
	for (size_t i = 0; i < LOG_RATELIMIT_SLOTS; i++) {
		struct log_ratelimit_slot *s = &rl->slots[i];

		if (s->used && window_ended(rl, s, now_ns)) {
			ratelimit_summary(rl, s);
			s->used = false;
		}
	}
	if (window_ended(rl, &rl->other, now_ns)) {
		ratelimit_summary(rl, &rl->other);
		rl->other.window_start_ns = now_ns;
		rl->other.shown = 0;
	}
}

void log_uid(struct log_ratelimit *rl, uid_t uid, int priority, const char *fmt, ...)
{
	struct timespec ts;
	va_list ap;

	/* Filtered out anyway: neither shown nor worth counting. */
	if (priority > log_max_priority)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (!log_ratelimit_allow(rl, uid, priority, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec))
		return;
	va_start(ap, fmt);
	log_fullv(priority, fmt, ap);
	va_end(ap);
}
