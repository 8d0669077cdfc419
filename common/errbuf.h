/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The caller's error buffer that elided's loaders fill: a message naming
 * what and where, or nothing when the caller passed no buffer.
 */
#ifndef ELIDE_ERRBUF_H
#define ELIDE_ERRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "macros.h"

static inline void errbuf_set(char *err, size_t errlen, const char *fmt, ...) _printf_(3, 4);
static inline void errbuf_set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

#endif
