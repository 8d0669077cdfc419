/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <errno.h>
#include <libsmartcols.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <wchar.h>
#include <wctype.h>

#include "log.h"
#include "table.h"
#include "terminal.h"

#define TABLE_MAX_COLUMNS 48
#define TABLE_CELL_MAX 512
#define TABLE_SHRINKS (TABLE_SHRINK | TABLE_SHRINK_MIDDLE | TABLE_CUT_START)

struct table {
	struct libscols_table *tb;
	const struct table_column *defs;
	size_t ndefs;
	/* The scols column of each definition, NULL when not shown. */
	struct libscols_column *shown[TABLE_MAX_COLUMNS];
	size_t nshown;
	struct libscols_line *line;   /* the row being filled */
	size_t next;                  /* its next definition */
	struct libscols_cell *last;   /* the last cell added, NULL when dropped */
	size_t rows;
};

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
	/* What the terminal cannot print (a UTF-8 locale reads it as one wide
	 * character; elsewhere non-ASCII is not shown as such). */
	if (!terminal_utf8() || !iswprint((wint_t)cp))
		return 0;
	return len;
}

size_t sanitize_text(const char *src, char *dst, size_t size)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t out = 0, chars = 0;

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
			/* Skip the rest of a sequence too: one '?' per character. */
			s++;
			while ((*s & 0xc0) == 0x80)
				s++;
		} else {
			if (out + len >= size)
				break;
			memcpy(dst + out, s, len);
			out += len;
			s += len;
		}
		chars++;
	}
	dst[out] = '\0';
	return chars;
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

static const struct table_column *find_column(const struct table_column *defs, size_t n, const char *name,
					      size_t len, size_t *index)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(defs[i].name) == len && strncasecmp(defs[i].name, name, len) == 0) {
			*index = i;
			return &defs[i];
		}
	return NULL;
}

static void unknown_column(const char *verb, const struct table_column *defs, size_t n, const char *name,
			   size_t len)
{
	char names[1024] = "";

	for (size_t i = 0; i < n; i++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "", defs[i].name);
	if (len == 0)
		log_error("--output: empty column name; %s has %s", verb, names);
	else
		log_error("--output: %s has no column '%.*s'; its columns: %s", verb, (int)len, name, names);
}

static int show_column(struct table *t, size_t index)
{
	const struct table_column *c = &t->defs[index];
	int flags = 0;

	if (t->shown[index])
		return 0; /* named twice: shown once */
	if (c->flags & TABLE_RIGHT)
		flags |= SCOLS_FL_RIGHT;
	if (c->flags & TABLE_SHRINKS)
		flags |= SCOLS_FL_TRUNC;
	/* A share only matters to shrinkable columns: others never shrink. */
	t->shown[index] = scols_table_new_column(t->tb, c->name,
						 flags & SCOLS_FL_TRUNC && c->share > 0 && c->share < 1 ? c->share : 0,
						 flags);
	if (!t->shown[index])
		return -ENOMEM;
	t->nshown++;
	return 0;
}

int table_new(struct table **ret, const char *verb, const struct table_column *columns, size_t ncolumns,
	      const char *output)
{
	struct table *t;
	const char *p;
	int r = 0;

	if (ncolumns == 0 || ncolumns > TABLE_MAX_COLUMNS)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->defs = columns;
	t->ndefs = ncolumns;
	t->tb = scols_new_table();
	if (!t->tb) {
		free(t);
		return -ENOMEM;
	}
	/* Our cells are sanitised already (sanitize_text). */
	scols_table_enable_noencoding(t->tb, 1);

	p = output;
	if (!p || *p == '+') {
		for (size_t i = 0; i < ncolumns && r >= 0; i++)
			if (!(columns[i].flags & TABLE_HIDDEN))
				r = show_column(t, i);
		if (p)
			p++;
	}
	while (p && r >= 0) {
		size_t len = strcspn(p, ","), i;

		if (!find_column(columns, ncolumns, p, len, &i)) {
			unknown_column(verb, columns, ncolumns, p, len);
			r = -EINVAL;
			break;
		}
		r = show_column(t, i);
		p = p[len] ? p + len + 1 : NULL;
	}
	if (r < 0) {
		table_free(t);
		return r;
	}
	*ret = t;
	return 0;
}

int table_check_output(const char *verb, const struct table_column *columns, size_t ncolumns, const char *output)
{
	struct table *t = NULL;
	int r = table_new(&t, verb, columns, ncolumns, output);

	table_free(t);
	return r;
}

void table_free(struct table *t)
{
	if (!t)
		return;
	scols_unref_table(t->tb);
	free(t);
}

int table_add_cell(struct table *t, const char *text)
{
	char buf[TABLE_CELL_MAX];
	struct libscols_column *c;

	if (t->next == 0 || !t->line) {
		t->line = scols_table_new_line(t->tb, NULL);
		if (!t->line)
			return -ENOMEM;
		t->next = 0;
		t->rows++;
	}
	c = t->shown[t->next];
	t->last = NULL;
	if (c) {
		sanitize_text(text ? text : "", buf, sizeof(buf));
		if (scols_line_set_column_data(t->line, c, buf) < 0)
			return -ENOMEM;
		t->last = scols_line_get_column_cell(t->line, c);
	}
	t->next = (t->next + 1) % t->ndefs;
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

char *format_duration_ns(uint64_t ns, char *buf, size_t size)
{
	static const struct {
		const char *unit;
		double ns;
	} units[] = { { "s", 1e9 }, { "ms", 1e6 }, { "us", 1e3 } };

	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		double v = (double)ns / units[i].ns;

		if (v >= 1) {
			snprintf(buf, size, v < 10 ? "%.2f%s" : v < 100 ? "%.1f%s" : "%.0f%s", v, units[i].unit);
			return buf;
		}
	}
	snprintf(buf, size, "%lluns", (unsigned long long)ns);
	return buf;
}

int table_add_duration(struct table *t, uint64_t ns, bool known)
{
	char buf[32];

	if (!known)
		return table_add_cell(t, "-");
	return table_add_cell(t, format_duration_ns(ns, buf, sizeof(buf)));
}

char *format_rate(double v, char *buf, size_t size)
{
	if (!(v >= 0))
		snprintf(buf, size, "-");
	else if (v < 10)
		snprintf(buf, size, "%.1f", v);
	else
		humanize_number(v >= 1.8e19 ? UINT64_MAX : (uint64_t)(v + 0.5), buf, size);
	return buf;
}

int table_add_rate(struct table *t, double v)
{
	char buf[32];

	return table_add_cell(t, format_rate(v, buf, sizeof(buf)));
}

int table_add_ratio(struct table *t, double ratio)
{
	if (!(ratio >= 0))
		return table_add_cell(t, "-");
	return table_add_cellf(t, "%.1f%%", (ratio > 1 ? 1 : ratio) * 100);
}

int table_add_share(struct table *t, double share)
{
	if (!(share >= 0))
		return table_add_cell(t, "-");
	/* Some waiting must not read as none. */
	if (share > 0 && share < 0.0005)
		return table_add_cell(t, "<0.1%");
	return table_add_cellf(t, "%.1f%%", 100.0 * share);
}

void table_set_color(struct table *t, enum table_color color)
{
	static const char *const names[] = {
		[TABLE_COLOR_GOOD] = "green",
		[TABLE_COLOR_WARN] = "yellow",
		[TABLE_COLOR_BAD] = "red",
	};

	if (!t->last || color == TABLE_COLOR_NONE || !terminal_colors())
		return;
	scols_cell_set_color(t->last, names[color]);
}

size_t table_rows(const struct table *t)
{
	return t->rows;
}

/*
 * The layout is elidectl's own, not libsmartcols' (whose sizing changed in
 * util-linux 2.41: without headings it no longer counts the headers, and it
 * shrinks columns differently), so a table reads the same on every
 * distribution.  It is the one util-linux 2.38 computed: a column is as
 * wide as its widest cell or its header; when the table is wider than the
 * terminal, shrinkable columns lose one cell at a time, in order, first
 * those wider than their share of the terminal, then all of them, never
 * below their header's width.  Cells wider than their column are then
 * ellipsised, so nothing is cut without a mark.
 */
static void layout(struct table *t, size_t termwidth, size_t order[], size_t widths[], size_t *ncols)
{
	size_t n = 0, total = 0, mins[TABLE_MAX_COLUMNS];

	/* The columns in the order they are shown. */
	for (size_t k = 0; k < scols_table_get_ncols(t->tb); k++) {
		struct libscols_column *c = scols_table_get_column(t->tb, k);

		for (size_t i = 0; i < t->ndefs; i++)
			if (t->shown[i] == c) {
				order[n++] = i;
				break;
			}
	}
	for (size_t k = 0; k < n; k++) {
		struct libscols_column *c = t->shown[order[k]];
		size_t w = text_width(t->defs[order[k]].name);

		mins[k] = w > 0 ? w : 1;
		w = mins[k];
		for (size_t row = 0; row < t->rows; row++) {
			struct libscols_line *ln = scols_table_get_line(t->tb, row);
			struct libscols_cell *cell = ln ? scols_line_get_column_cell(ln, c) : NULL;
			const char *data = cell ? scols_cell_get_data(cell) : NULL;
			size_t cw = data ? text_width(data) : 0;

			if (cw > w)
				w = cw;
		}
		widths[k] = w;
		total += w + (k + 1 < n ? 1 : 0);
	}
	*ncols = n;
	for (int stage = 1; termwidth > 0 && total > termwidth && stage <= 2;) {
		size_t before = total;

		for (size_t k = 0; k < n && total > termwidth; k++) {
			const struct table_column *d = &t->defs[order[k]];

			if (!(d->flags & TABLE_SHRINKS) || widths[k] == mins[k])
				continue;
			if (stage == 1 && (!(d->share > 0 && d->share < 1) ||
					   widths[k] < (size_t)(d->share * (double)termwidth)))
				continue;
			widths[k]--;
			total--;
		}
		if (total == before)
			stage++;
	}
}

static int ellipsize_cells(struct table *t, const size_t order[], const size_t widths[], size_t n)
{
	char buf[TABLE_CELL_MAX];

	for (size_t k = 0; k < n; k++) {
		const struct table_column *d = &t->defs[order[k]];
		struct libscols_column *c = t->shown[order[k]];

		if (!(d->flags & TABLE_SHRINKS))
			continue;
		for (size_t row = 0; row < t->rows; row++) {
			struct libscols_line *ln = scols_table_get_line(t->tb, row);
			struct libscols_cell *cell = ln ? scols_line_get_column_cell(ln, c) : NULL;
			const char *data = cell ? scols_cell_get_data(cell) : NULL;

			if (!data || text_width(data) <= widths[k])
				continue;
			if (d->flags & TABLE_CUT_START)
				snprintf(buf, sizeof(buf), "%s", text_tail(data, widths[k]));
			else
				ellipsize(data, widths[k], d->flags & TABLE_SHRINK_MIDDLE, buf, sizeof(buf));
			if (scols_line_set_column_data(ln, c, buf) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

/* One cell as libsmartcols 2.38 printed it: the colour around the padding
 * too, the last column not filled unless right-aligned. */
static void print_cell(FILE *f, const char *data, const char *color, size_t width, bool right, bool last)
{
	size_t len = text_width(data);

	if (last && len < width && !right)
		width = len;
	if (color)
		fputs(color, f);
	for (size_t i = len; right && *data && i < width; i++)
		fputc(' ', f);
	if (right && *data)
		len = width;
	fputs(data, f);
	for (size_t i = len; !last && i < width; i++)
		fputc(' ', f);
	if (color)
		fputs("\033[0m", f);
	if (!last)
		fputc(' ', f);
}

int table_print(struct table *t, FILE *f, bool legend)
{
	size_t width = terminal_width(), order[TABLE_MAX_COLUMNS], widths[TABLE_MAX_COLUMNS], n;
	bool colors = terminal_colors();
	int r;

	/* A row left half-filled gets empty cells. */
	while (t->line && t->next != 0)
		if ((r = table_add_cell(t, "")) < 0)
			return r;
	layout(t, width, order, widths, &n);
	if (width > 0 && t->rows > 0) {
		r = ellipsize_cells(t, order, widths, n);
		if (r < 0)
			return r;
	}
	if (t->rows == 0) {
		/* libsmartcols prints nothing for an empty table; the header
		 * still says what would be there. */
		for (size_t i = 0; legend && i < scols_table_get_ncols(t->tb); i++) {
			struct libscols_column *c = scols_table_get_column(t->tb, i);

			fprintf(f, "%s%s", i ? " " : "", scols_cell_get_data(scols_column_get_header(c)));
		}
		if (legend)
			fputc('\n', f);
		return ferror(f) ? -EIO : 0;
	}
	for (size_t k = 0; legend && k < n; k++)
		print_cell(f, t->defs[order[k]].name, NULL, widths[k], t->defs[order[k]].flags & TABLE_RIGHT,
			   k + 1 == n);
	if (legend)
		fputc('\n', f);
	for (size_t row = 0; row < t->rows; row++) {
		struct libscols_line *ln = scols_table_get_line(t->tb, row);

		for (size_t k = 0; ln && k < n; k++) {
			struct libscols_cell *cell = scols_line_get_column_cell(ln, t->shown[order[k]]);
			const char *data = cell ? scols_cell_get_data(cell) : NULL;

			print_cell(f, data ? data : "", colors && cell ? scols_cell_get_color(cell) : NULL, widths[k],
				   t->defs[order[k]].flags & TABLE_RIGHT, k + 1 == n);
		}
		fputc('\n', f);
	}
	return ferror(f) ? -EIO : 0;
}
