/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Column tables for elidectl's human output, kept in libsmartcols, laid
 * out and printed by elidectl itself (the same on every util-linux
 * version): a verb declares its columns (the defaults and those
 * -o/--output may add), adds cells row by row in that order, and the table
 * shows the columns asked for, fitted to the terminal (terminal.h):
 * columns that may shrink are ellipsised ("…"), numbers never are; --full
 * keeps every cell whole.
 * Numbers are humanised (1.2k, 3.4M).
 *
 * Every cell is sanitised on the way in: text comes from segments that any
 * user's process writes, so control characters and invalid UTF-8 (any
 * non-ASCII byte outside a UTF-8 locale) are shown as '?' rather than sent
 * to the terminal.
 */
#ifndef ELIDECTL_TABLE_H
#define ELIDECTL_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "macros.h"

enum {
	TABLE_RIGHT = 1 << 0,         /* right-aligned (numbers) */
	TABLE_SHRINK = 1 << 1,        /* may be shortened to fit, ellipsised at the end */
	TABLE_SHRINK_MIDDLE = 1 << 2, /* ... in the middle ("/usr/…/memcached") */
	TABLE_HIDDEN = 1 << 3,        /* not a default column: -o NAME or -o +NAME shows it */
	TABLE_CUT_START = 1 << 4,     /* ... at the start, without a mark: a trend keeps its newest points */
};

struct table_column {
	const char *name;             /* the header, and the name -o takes (any case) */
	unsigned flags;
	/* Shrinkable columns: shortened first down to this share of the
	 * terminal's width (0..1), then all together; 0: no priority. */
	double share;
};

enum table_color {
	TABLE_COLOR_NONE,
	TABLE_COLOR_GOOD,             /* green: eliding */
	TABLE_COLOR_WARN,             /* yellow: backing off */
	TABLE_COLOR_BAD,              /* red: off */
};

struct table;

/*
 * A table of the verb's columns.  `output` is -o's value, NULL for the
 * defaults: comma-separated column names in the order to show them, or
 * "+NAMES" for the defaults followed by those.  An unknown name is logged
 * with the verb's column names and gives -EINVAL.
 */
int table_new(struct table **ret, const char *verb, const struct table_column *columns, size_t ncolumns,
	      const char *output);
void table_free(struct table *t);
/* Whether `output` names only the verb's columns: 0, else -EINVAL (logged
 * as table_new() logs it), before anything is asked or shown. */
int table_check_output(const char *verb, const struct table_column *columns, size_t ncolumns, const char *output);

/* Cells fill the current row in the order of the columns, then start the
 * next row; a cell of a column not shown is dropped. */
int table_add_cell(struct table *t, const char *text);
int table_add_cellf(struct table *t, const char *fmt, ...) _printf_(2, 3);
int table_add_number(struct table *t, uint64_t v);          /* humanised */
int table_add_percent(struct table *t, uint64_t part, uint64_t whole); /* "-" when whole is 0 */
int table_add_duration(struct table *t, uint64_t ns, bool known); /* "1.25ms"; "-" when !known */
int table_add_rate(struct table *t, double v);              /* "-" below 0; 1 decimal below 10 */
int table_add_ratio(struct table *t, double ratio);         /* "12.5%"; "-" below 0 */
int table_add_share(struct table *t, double share);         /* as ratio, not capped: 250% is 2.5 threads */
/* Colours the last cell added (on a terminal with colours only). */
void table_set_color(struct table *t, enum table_color color);

size_t table_rows(const struct table *t);

/* Writes the table; `legend` prints the column headers.  -EIO on a write error. */
int table_print(struct table *t, FILE *f, bool legend);

/* "999", "1.2k", "34k", "5.6M", ... (SI, powers of 1000). */
char *humanize_number(uint64_t v, char *buf, size_t size);
/* A rate as table_add_rate writes it: "-" below 0 (unknown), "3.5", "1.2k". */
char *format_rate(double v, char *buf, size_t size);
/* "950ns", "12.5us", "1.25ms", "3.00s": three significant digits at most. */
char *format_duration_ns(uint64_t ns, char *buf, size_t size);

/* Copies src to dst (NUL-terminated, truncated to size) with control
 * characters and invalid UTF-8 replaced by '?'; returns the number of
 * characters. */
size_t sanitize_text(const char *src, char *dst, size_t size);

#endif
