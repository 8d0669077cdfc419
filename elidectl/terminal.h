/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * How elidectl's output meets the terminal, the way systemd's tools do it:
 * tables fit the width of the terminal (--full: they do not), colours only
 * on a terminal (--no-color, $NO_COLOR, TERM=dumb: none; $SYSTEMD_COLORS
 * forces them either way), and long output goes through a pager when
 * standard output is a terminal ($SYSTEMD_PAGER, $PAGER, less, more;
 * --no-pager: none).
 */
#ifndef ELIDECTL_TERMINAL_H
#define ELIDECTL_TERMINAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Decides width and colours from standard output, before any pager. */
void terminal_setup(bool full, bool no_color);

/*
 * The columns output must fit: $COLUMNS when set, else the terminal's when
 * standard output is one; 0 = no limit (--full, or neither).
 */
size_t terminal_width(void);
/* Keeps `columns` free at the right of terminal_width(): a full-screen
 * redraw (top) leaves the last column alone, where a character makes many
 * terminals wrap at the next newline. */
void terminal_set_margin(size_t columns);
/* Rows of the terminal ($LINES, else the terminal's); 0 when unknown. */
size_t terminal_height(void);
/* Reads the terminal's size again (after SIGWINCH). */
void terminal_update_size(void);
bool terminal_colors(void);
/* Whether the locale's character set is UTF-8 (then "…" ellipsises). */
bool terminal_utf8(void);

/* ANSI sequences, "" without colours. */
const char *ansi_highlight_green(void);
const char *ansi_highlight_yellow(void);
const char *ansi_highlight_red(void);
const char *ansi_normal(void);

/*
 * Sends standard output through a pager when it is a terminal and --no-pager
 * was not given: $SYSTEMD_PAGER, else $PAGER (empty or "cat": no pager), else
 * less, else more.  LESS is set to $SYSTEMD_LESS, else "FRXMK", so less exits
 * at once when the output fits one screen.  Call terminal_setup() first.
 */
void pager_open(bool no_pager);
/* Flushes standard output, closes the pipe and waits for the pager; idempotent. */
void pager_close(void);

/* Display width of a (sanitised) string. */
size_t text_width(const char *s);
/* The end of s that fits `width` columns. */
const char *text_tail(const char *s, size_t width);
/*
 * Copies s into buf shortened to at most `width` columns with an ellipsis
 * ("…", "..." outside UTF-8 locales) at the end, or in the middle when
 * `middle` (paths keep their last component).  Returns the display width.
 */
size_t ellipsize(const char *s, size_t width, bool middle, char *buf, size_t size);

/*
 * `prefix` (as wide as `indent` columns), then `text` wrapped at word
 * boundaries to `width` columns, continuation lines indented under its
 * start; width 0 (or too narrow) writes it on one line.
 */
void print_wrapped(FILE *f, const char *prefix, size_t indent, const char *text, size_t width);

/* Writes `line` cut at `width` columns (0: whole); colour sequences take
 * no room, and a cut after one resets the colour. */
void print_clipped(FILE *f, const char *line, size_t width);

#endif
