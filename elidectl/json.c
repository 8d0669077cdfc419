/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "json.h"

void json_init(struct json *j, FILE *f, bool pretty)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	j->pretty = pretty;
	j->first[0] = true;
}

static void newline_indent(struct json *j)
{
	if (!j->pretty)
		return;
	fputc('\n', j->f);
	for (unsigned i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

/* Comma and indentation before a value or key at the current level. */
static void before_value(struct json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (!j->first[j->depth])
		fputc(',', j->f);
	j->first[j->depth] = false;
	if (j->depth > 0)
		newline_indent(j);
}

static void begin(struct json *j, char c)
{
	before_value(j);
	fputc(c, j->f);
	if (j->depth + 1 >= JSON_MAX_DEPTH) {
		j->overflow = true;
		return;
	}
	j->depth++;
	j->first[j->depth] = true;
}

static void end(struct json *j, char c)
{
	bool empty;

	if (j->depth == 0) {
		j->overflow = true;
		return;
	}
	empty = j->first[j->depth];
	j->depth--;
	if (!empty)
		newline_indent(j);
	fputc(c, j->f);
}

void json_begin_object(struct json *j)
{
	begin(j, '{');
}

void json_end_object(struct json *j)
{
	end(j, '}');
}

void json_begin_array(struct json *j)
{
	begin(j, '[');
}

void json_end_array(struct json *j)
{
	end(j, ']');
}

/* Length of a valid UTF-8 sequence at s, 0 when invalid. */
static size_t utf8_len(const unsigned char *s)
{
	uint32_t cp;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static void write_escaped(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', f);
	while (*s) {
		size_t len = utf8_len(s);

		if (len == 0) {
			fputs("\\ufffd", f);
			s++;
			continue;
		}
		/* C1 controls are valid UTF-8, but terminals obey some of them. */
		if (len == 2 && s[0] == 0xc2 && s[1] < 0xa0) {
			fprintf(f, "\\u%04x", s[1]);
			s += 2;
			continue;
		}
		if (len > 1) {
			fwrite(s, 1, len, f);
			s += len;
			continue;
		}
		switch (*s) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '\b':
			fputs("\\b", f);
			break;
		case '\f':
			fputs("\\f", f);
			break;
		default:
			if (*s < 0x20 || *s == 0x7f)
				fprintf(f, "\\u%04x", *s);
			else
				fputc(*s, f);
		}
		s++;
	}
	fputc('"', f);
}

void json_key(struct json *j, const char *key)
{
	before_value(j);
	write_escaped(j->f, key);
	fputs(j->pretty ? ": " : ":", j->f);
	j->after_key = true;
}

void json_string(struct json *j, const char *s)
{
	if (!s) {
		json_null(j);
		return;
	}
	before_value(j);
	write_escaped(j->f, s);
}

void json_null(struct json *j)
{
	before_value(j);
	fputs("null", j->f);
}

void json_bool(struct json *j, bool b)
{
	before_value(j);
	fputs(b ? "true" : "false", j->f);
}

void json_uint(struct json *j, uint64_t v)
{
	before_value(j);
	fprintf(j->f, "%" PRIu64, v);
}

void json_int(struct json *j, int64_t v)
{
	before_value(j);
	fprintf(j->f, "%" PRId64, v);
}

void json_double(struct json *j, double v)
{
	if (!isfinite(v)) {
		json_null(j);
		return;
	}
	before_value(j);
	/* 15 digits: exact enough, no binary noise; the C locale gives a '.'. */
	fprintf(j->f, "%.15g", v);
}

int json_finish(struct json *j)
{
	fputc('\n', j->f);
	if (j->overflow || j->depth != 0 || j->after_key)
		return -EINVAL;
	return ferror(j->f) ? -EIO : 0;
}
