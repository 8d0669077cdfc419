/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Appending to a fixed buffer without stdio or malloc, for the one-line
 * reasons libelide builds in its constructor (before either may be safe).
 * Truncates rather than overflows; the buffer is always NUL-terminated.
 */
#ifndef ELIDE_SBUF_H
#define ELIDE_SBUF_H

#include <stddef.h>

struct sbuf {
	char *p;
	size_t len, size;
};

#define SBUF_INIT(buf) { (buf), 0, sizeof(buf) }

static inline void sb_puts(struct sbuf *b, const char *s)
{
	for (; *s && b->len + 1 < b->size; s++)
		b->p[b->len++] = *s;
	b->p[b->len] = '\0';
}

static inline void sb_putu(struct sbuf *b, unsigned long v, unsigned base)
{
	char tmp[24];
	size_t n = 0;

	do {
		tmp[n++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v && n < sizeof(tmp));
	while (n > 0 && b->len + 1 < b->size)
		b->p[b->len++] = tmp[--n];
	b->p[b->len] = '\0';
}

#endif
