/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Checks and identities of the learned-verdict files (learn-format.h),
 * shared by libelide (which reads .hints and .teach files and writes
 * .teach files) and elided (which writes .hints files and reads .teach
 * files).  No allocation, no system call: libelide runs this in its
 * constructor and destructor.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn-format.h"
#include "segment-format.h"

static int bad(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (whylen > 0) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

static bool all_zero(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static int check_lock(const struct elide_learn_lock *l, uint32_t i, char *why, size_t whylen)
{
	const char *end = memchr(l->module, '\0', sizeof(l->module));

	if (!end)
		return bad(why, whylen, "record %" PRIu32 ": module name not NUL-terminated", i);
	if (end == l->module)
		return bad(why, whylen, "record %" PRIu32 ": empty module name", i);
	if (memchr(l->module, '/', (size_t)(end - l->module)))
		return bad(why, whylen, "record %" PRIu32 ": module name holds '/'", i);
	if (!all_zero(end, sizeof(l->module) - (size_t)(end - l->module)))
		return bad(why, whylen, "record %" PRIu32 ": bytes after the module name's NUL", i);
	if (l->match != ELIDE_SEG_HINT_LOCK_ADDR && l->match != ELIDE_SEG_HINT_CALLSITE)
		return bad(why, whylen, "record %" PRIu32 ": unknown match %" PRIu32, i, l->match);
	if (l->reserved)
		return bad(why, whylen, "record %" PRIu32 ": reserved field not zero", i);
	return 0;
}

static int check_file(const void *buf, size_t size, const char *magic, size_t record_size, uint32_t max,
		      char *why, size_t whylen)
{
	const struct elide_learn_header *h = buf;

	if (size < sizeof(*h))
		return bad(why, whylen, "%zu bytes, shorter than its header (%zu)", size, sizeof(*h));
	if (memcmp(h->magic, magic, sizeof(h->magic)))
		return bad(why, whylen, "not a %s file (magic)", magic);
	if (h->version != ELIDE_LEARN_VERSION)
		return bad(why, whylen, "version %" PRIu32 ", only %u is known", h->version, ELIDE_LEARN_VERSION);
	if (h->count > max)
		return bad(why, whylen, "%" PRIu32 " records, at most %" PRIu32, h->count, max);
	if (size != sizeof(*h) + (size_t)h->count * record_size)
		return bad(why, whylen, "%zu bytes, but %" PRIu32 " records make %zu", size, h->count,
			   sizeof(*h) + (size_t)h->count * record_size);
	if (h->program_len == 0 || h->program_len > sizeof(h->program))
		return bad(why, whylen, "program identity of %" PRIu32 " bytes", h->program_len);
	if (memchr(h->program, '\0', h->program_len))
		return bad(why, whylen, "NUL inside the program identity");
	if (!all_zero(h->program + h->program_len, sizeof(h->program) - h->program_len))
		return bad(why, whylen, "bytes after the program identity");
	if (h->program_len < 5 || memcmp(h->program, "path:", 5))
		return bad(why, whylen, "program identity does not start with \"path:\"");
	return 0;
}

int elide_learn_check_hints(const void *buf, size_t size, char *why, size_t whylen)
{
	const struct elide_learn_header *h = buf;
	const struct elide_learn_hint *hints;
	int r;

	r = check_file(buf, size, ELIDE_LEARN_HINTS_MAGIC, sizeof(*hints), ELIDE_LEARN_MAX_HINTS, why, whylen);
	if (r < 0)
		return r;
	if (h->pid || h->start_time)
		return bad(why, whylen, "a .hints file with a pid");
	hints = (const void *)(h + 1);
	for (uint32_t i = 0; i < h->count; i++) {
		r = check_lock(&hints[i].lock, i, why, whylen);
		if (r < 0)
			return r;
		if (hints[i].verdict != ELIDE_LEARN_NEVER && hints[i].verdict != ELIDE_LEARN_ELIDES)
			return bad(why, whylen, "record %" PRIu32 ": unknown verdict %" PRIu32, i, hints[i].verdict);
		if (hints[i].reserved || hints[i].until < 0)
			return bad(why, whylen, "record %" PRIu32 ": reserved field or end out of range", i);
	}
	return 0;
}

int elide_learn_check_teach(const void *buf, size_t size, char *why, size_t whylen)
{
	const struct elide_learn_header *h = buf;
	const struct elide_learn_teach *t;
	int r;

	r = check_file(buf, size, ELIDE_LEARN_TEACH_MAGIC, sizeof(*t), ELIDE_LEARN_MAX_TEACH, why, whylen);
	if (r < 0)
		return r;
	if (h->pid == 0 || h->pid > INT32_MAX)
		return bad(why, whylen, "pid %" PRIu64 " out of range", h->pid);
	t = (const void *)(h + 1);
	for (uint32_t i = 0; i < h->count; i++) {
		r = check_lock(&t[i].lock, i, why, whylen);
		if (r < 0)
			return r;
		if (t[i].commits > t[i].attempts)
			return bad(why, whylen, "record %" PRIu32 ": %" PRIu64 " commits of %" PRIu64 " attempts", i,
				   t[i].commits, t[i].attempts);
	}
	return 0;
}

int elide_learn_lock_format(const struct elide_learn_lock *l, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s:%s+0x%" PRIx64, l->match == ELIDE_SEG_HINT_LOCK_ADDR ? "data" : "call",
			 l->module, l->offset);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : n;
}

int elide_learn_lock_parse(const char *identity, struct elide_learn_lock *l)
{
	const char *rest, *plus;
	uint64_t off;
	char *end;

	memset(l, 0, sizeof(*l));
	if (strncmp(identity, "data:", 5) == 0)
		l->match = ELIDE_SEG_HINT_LOCK_ADDR;
	else if (strncmp(identity, "call:", 5) == 0)
		l->match = ELIDE_SEG_HINT_CALLSITE;
	else
		return -EINVAL;
	rest = identity + 5;
	plus = strstr(rest, "+0x");
	for (const char *q = plus; q; q = strstr(q + 1, "+0x"))
		plus = q; /* the last one: a module name may hold "+0x" */
	if (!plus || plus == rest || (size_t)(plus - rest) >= sizeof(l->module) ||
	    memchr(rest, '/', (size_t)(plus - rest)))
		return -EINVAL;
	/* Lower-case hex digits only, as formatted: one spelling per lock. */
	if (!plus[3] || plus[3 + strspn(plus + 3, "0123456789abcdef")])
		return -EINVAL;
	errno = 0;
	off = strtoull(plus + 3, &end, 16);
	if (errno || *end)
		return -EINVAL;
	memcpy(l->module, rest, (size_t)(plus - rest));
	l->offset = off;
	return 0;
}

void elide_learn_stem(uint32_t uid, const char *program, size_t len, char *buf, size_t size)
{
	snprintf(buf, size, "%" PRIu32 "-%016" PRIx64, uid, elide_learn_program_hash(program, len));
}
