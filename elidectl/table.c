/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

#define TABLE_MAX_COLUMNS 32
#define TABLE_CELL_MAX 512

struct table_column {
	char *header;
	enum table_align align;
	size_t width;
};

struct table_cell {
	char *text;
	size_t width;   /* display width in code points */
};

struct table {
	struct table_column columns[TABLE_MAX_COLUMNS];
	size_t ncolumns;
	struct table_cell *cells;
	size_t ncells, allocated;
};

int table_new(struct table **ret)
{
	struct table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	*ret = t;
	return 0;
}

void table_free(struct table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->ncolumns; i++)
		free(t->columns[i].header);
	for (size_t i = 0; i < t->ncells; i++)
		free(t->cells[i].text);
	free(t->cells);
	free(t);
}

/* Length of the valid UTF-8 sequence at s (1..4), 0 if invalid or a C1 control. */
static size_t utf8_sequence(const unsigned char *s)
{
	uint32_t cp;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
	} else
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates, beyond U+10FFFF, and C1 controls (which
	 * some terminals obey like ESC). */
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
		return 0;
	return len;
}

size_t sanitize_text(const char *src, char *dst, size_t size)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t out = 0, width = 0;

	if (size == 0)
		return 0;
	while (*s) {
		size_t len = utf8_sequence(s);

		if (len == 1 && (*s < 0x20 || *s == 0x7f))
			len = 0;
		if (len == 0) {
			if (out + 1 >= size)
				break;
			dst[out++] = '?';
			s++;
		} else {
			if (out + len >= size)
				break;
			memcpy(dst + out, s, len);
			out += len;
			s += len;
		}
		width++;
	}
	dst[out] = '\0';
	return width;
}

char *humanize_number(uint64_t v, char *buf, size_t size)
{
	static const char units[] = "kMGTPE";
	double x = (double)v;

	if (v < 1000) {
		snprintf(buf, size, "%llu", (unsigned long long)v);
		return buf;
	}
	for (size_t u = 0; u < sizeof(units) - 1; u++) {
		x /= 1000.0;
		/* Pick the unit whose rounded value stays below 1000. */
		if (x < 9.95) {
			snprintf(buf, size, "%.1f%c", x, units[u]);
			return buf;
		}
		if (x < 999.5 || u == sizeof(units) - 2) {
			snprintf(buf, size, "%.0f%c", x, units[u]);
			return buf;
		}
	}
	return buf; /* not reached: 2^64 < 1000^7 */
}

int table_add_column(struct table *t, const char *header, enum table_align align)
{
	struct table_column *c;

	if (t->ncells > 0 || t->ncolumns >= TABLE_MAX_COLUMNS)
		return -EINVAL;
	c = &t->columns[t->ncolumns];
	c->header = strdup(header);
	if (!c->header)
		return -ENOMEM;
	c->align = align;
	c->width = strlen(header);
	t->ncolumns++;
	return 0;
}

int table_add_cell(struct table *t, const char *text)
{
	char buf[TABLE_CELL_MAX];
	struct table_column *c;
	struct table_cell *cell;
	size_t width;

	if (t->ncolumns == 0)
		return -EINVAL;
	if (t->ncells == t->allocated) {
		size_t n = t->allocated ? t->allocated * 2 : 64;
		struct table_cell *p = reallocarray(t->cells, n, sizeof(*p));

		if (!p)
			return -ENOMEM;
		t->cells = p;
		t->allocated = n;
	}
	width = sanitize_text(text ? text : "", buf, sizeof(buf));
	cell = &t->cells[t->ncells];
	cell->text = strdup(buf);
	if (!cell->text)
		return -ENOMEM;
	cell->width = width;
	c = &t->columns[t->ncells % t->ncolumns];
	if (width > c->width)
		c->width = width;
	t->ncells++;
	return 0;
}

int table_add_cellf(struct table *t, const char *fmt, ...)
{
	char buf[TABLE_CELL_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return table_add_cell(t, buf);
}

int table_add_number(struct table *t, uint64_t v)
{
	char buf[16];

	return table_add_cell(t, humanize_number(v, buf, sizeof(buf)));
}

int table_add_percent(struct table *t, uint64_t part, uint64_t whole)
{
	if (whole == 0)
		return table_add_cell(t, "-");
	if (part > whole)
		part = whole;
	return table_add_cellf(t, "%.1f%%", 100.0 * (double)part / (double)whole);
}

size_t table_rows(const struct table *t)
{
	return t->ncolumns ? (t->ncells + t->ncolumns - 1) / t->ncolumns : 0;
}

static void print_cell(FILE *f, const struct table_column *c, const char *text, size_t width, bool last)
{
	size_t pad = c->width > width ? c->width - width : 0;

	if (c->align == TABLE_RIGHT)
		fprintf(f, "%*s%s", (int)pad, "", text);
	else if (last)
		fputs(text, f); /* no trailing blanks */
	else
		fprintf(f, "%s%*s", text, (int)pad, "");
	fputs(last ? "\n" : " ", f);
}

int table_print(const struct table *t, FILE *f, bool legend)
{
	if (legend && t->ncolumns > 0)
		for (size_t i = 0; i < t->ncolumns; i++)
			print_cell(f, &t->columns[i], t->columns[i].header, strlen(t->columns[i].header),
				   i + 1 == t->ncolumns);
	for (size_t i = 0; i < t->ncells; i++) {
		size_t col = i % t->ncolumns;
		bool last = col + 1 == t->ncolumns || i + 1 == t->ncells;

		print_cell(f, &t->columns[col], t->cells[i].text, t->cells[i].width, last);
	}
	return ferror(f) ? -EIO : 0;
}
