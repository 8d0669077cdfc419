/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A lock's names packed into one allocation of the size they need: at the
 * scale goal (100,000 locks) fixed-size name buffers were most of the
 * daemon's memory.
 */
#include <stdlib.h>
#include <string.h>

#include "elided.h"

static size_t capped_len(const char *s, size_t cap)
{
	return s ? strnlen(s, cap - 1) : 0;
}

struct lock_names *lock_names_new(const char *name, const char *function, const char *callsite_text)
{
	size_t name_len = capped_len(name, ELIDED_LOCK_NAME_MAX);
	size_t function_len = capped_len(function, ELIDED_LOCK_NAME_MAX);
	size_t callsite_len = capped_len(callsite_text, ELIDED_CALLSITE_TEXT_MAX);
	struct lock_names *nm = malloc(sizeof(*nm) + name_len + function_len + callsite_len + 3);
	char *text;

	if (!nm)
		return NULL;
	nm->function_at = (uint16_t)(name_len + 1);
	nm->callsite_at = (uint16_t)(name_len + 1 + function_len + 1);
	text = nm->text;
	memcpy(text, name ? name : "", name_len);
	text[name_len] = '\0';
	memcpy(text + nm->function_at, function ? function : "", function_len);
	text[nm->function_at + function_len] = '\0';
	memcpy(text + nm->callsite_at, callsite_text ? callsite_text : "", callsite_len);
	text[nm->callsite_at + callsite_len] = '\0';
	return nm;
}
