/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A small streaming JSON writer.  The caller nests begin/end calls; the
 * writer places commas, colons and (when pretty) indentation, escapes
 * strings and replaces invalid UTF-8 with U+FFFD, so the output is always
 * well-formed JSON whatever bytes a segment held.
 */
#ifndef ELIDECTL_JSON_H
#define ELIDECTL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json {
	FILE *f;
	bool pretty;
	unsigned depth;
	bool first[JSON_MAX_DEPTH]; /* nothing written yet at that level */
	bool after_key;
	bool overflow;              /* nested too deep: output is invalid */
};

void json_init(struct json *j, FILE *f, bool pretty);
void json_begin_object(struct json *j);
void json_end_object(struct json *j);
void json_begin_array(struct json *j);
void json_end_array(struct json *j);
void json_key(struct json *j, const char *key);
void json_string(struct json *j, const char *s);  /* NULL writes null */
void json_null(struct json *j);
void json_bool(struct json *j, bool b);
void json_uint(struct json *j, uint64_t v);
void json_int(struct json *j, int64_t v);
void json_double(struct json *j, double v);     /* non-finite writes null */
/* Ends the document (newline); -EIO on a write error, -EINVAL if unbalanced. */
int json_finish(struct json *j);

#endif
