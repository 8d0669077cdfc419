/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl top's screen, shared by its two views: the processes (top.c)
 * and one process's locks (top-locks.c).  A view writes frames; the screen
 * redraws them every interval on a terminal (ANSI, no curses), at once on
 * a resize (SIGWINCH) or a key the view takes, and quits on q.
 */
#ifndef ELIDECTL_TOP_H
#define ELIDECTL_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "source.h"

/* Lines a frame writes above its table: a title and the keys. */
#define TOP_TITLE_LINES 2

struct top_view {
	/*
	 * One frame into f: TOP_TITLE_LINES lines, then the table with at
	 * most `rows` rows (0: all).  `tick`: the interval is over (or this
	 * is the first frame); false when only a key or a resize redraws.
	 * Returns an exit status: anything but EXIT_OK ends top with it
	 * (said on stderr, the frame not drawn).
	 */
	int (*frame)(void *data, FILE *f, size_t rows, bool tick);
	/* A key other than q: whether it changed the view (redrawn at once). */
	bool (*key)(void *data, char c);
	void *data;
};

/* Redraws the view every `interval` seconds until q, the end of input or
 * a frame's failure; returns the exit status. */
int top_screen(const struct top_view *v, double interval);

/* elided's interval (its Interval property), else 1 s. */
double top_interval(struct source *s);

/* One line of a frame, ellipsised to the terminal's width. */
void top_frame_line(FILE *f, const char *text);

#endif
