/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Column tables for elidectl's human output: cells are added row by row,
 * widths are computed at print time, numbers are humanised (1.2k, 3.4M).
 *
 * Every cell is sanitised on the way in: text comes from segments that any
 * user's process writes, so control characters and invalid UTF-8 are shown
 * as '?' rather than sent to the terminal.
 */
#ifndef ELIDECTL_TABLE_H
#define ELIDECTL_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "macros.h"

enum table_align {
	TABLE_LEFT,
	TABLE_RIGHT,
};

struct table;

int table_new(struct table **ret);
void table_free(struct table *t);

/* Columns must all be added before the first cell. */
int table_add_column(struct table *t, const char *header, enum table_align align);

/* Cells fill the current row left to right, then start the next row. */
int table_add_cell(struct table *t, const char *text);
int table_add_cellf(struct table *t, const char *fmt, ...) _printf_(2, 3);
int table_add_number(struct table *t, uint64_t v);          /* humanised */
int table_add_percent(struct table *t, uint64_t part, uint64_t whole); /* "-" when whole is 0 */

size_t table_rows(const struct table *t);

/* Writes the table; `legend` prints the column headers.  -EIO on a write error. */
int table_print(const struct table *t, FILE *f, bool legend);

/* "999", "1.2k", "34k", "5.6M", ... (SI, powers of 1000). */
char *humanize_number(uint64_t v, char *buf, size_t size);

/* Copies src to dst (NUL-terminated, truncated to size) with control
 * characters and invalid UTF-8 replaced by '?'; returns the display width
 * in code points. */
size_t sanitize_text(const char *src, char *dst, size_t size);

#endif
