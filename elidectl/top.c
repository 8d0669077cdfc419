/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl top: the processes by current rates, redrawn every interval on
 * a terminal (ANSI clear and redraw, no curses); keys a, c, x, l sort, q
 * quits.  Not on a terminal: the table once.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

#include "elidectl.h"
#include "log.h"
#include "table.h"

struct rate_row {
	const struct seg_snapshot *snap;
	struct proc_totals t;
	struct source_proc_info info;
	bool have_info;
};

static enum sort_key rate_key;

static double rate_of(const struct rate_row *r)
{
	switch (rate_key) {
	case SORT_COMMITS:
		return r->t.commits_per_sec;
	case SORT_ABORTS:
		return r->t.abort_ratio;
	case SORT_CYCLES:
		return r->t.cycles_lost_per_sec;
	default:
		return r->t.acquired_per_sec;
	}
}

static int cmp_rate(const void *a, const void *b)
{
	const struct rate_row *x = a, *y = b;
	double kx = rate_of(x), ky = rate_of(y);

	if (kx != ky)
		return kx < ky ? 1 : -1;
	return (x->snap->pid > y->snap->pid) - (x->snap->pid < y->snap->pid);
}

static int add_rate(struct table *t, double v)
{
	if (v < 0)
		return table_add_cell(t, "-");
	if (v < 10)
		return table_add_cellf(t, "%.1f", v);
	return table_add_number(t, (uint64_t)(v + 0.5));
}

int print_rates(struct source *s, struct seg_snapshot **procs, size_t n, enum sort_key key, size_t max,
		bool legend)
{
	struct rate_row *rows;
	struct table *t = NULL;
	uint64_t now = now_realtime_ns();
	int r;

	rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		rows[i].snap = procs[i];
		totals_of(s, procs[i], now, &rows[i].t);
		rows[i].have_info = source_info(s, procs[i]->pid, &rows[i].info) == 0;
	}
	rate_key = key;
	qsort(rows, n, sizeof(*rows), cmp_rate);
	if (max && n > max)
		n = max;
	r = table_new(&t);
	if (r < 0)
		goto out;
	if ((r = table_add_column(t, "PID", TABLE_RIGHT)) < 0 ||
	    (r = table_add_column(t, "USER", TABLE_LEFT)) < 0 ||
	    (r = table_add_column(t, "EXE/UNIT", TABLE_LEFT)) < 0 ||
	    (r = table_add_column(t, "MODE", TABLE_LEFT)) < 0 ||
	    (r = table_add_column(t, "ACQUIRED/s", TABLE_RIGHT)) < 0 ||
	    (r = table_add_column(t, "COMMITS/s", TABLE_RIGHT)) < 0 ||
	    (r = table_add_column(t, "ABORT%", TABLE_RIGHT)) < 0 ||
	    (r = table_add_column(t, "CYCLES-LOST/s", TABLE_RIGHT)) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct seg_snapshot *p = rows[i].snap;
		const char *who = p->header.exe[0] ? p->header.exe : p->header.comm;
		char user[64];

		if (rows[i].have_info && rows[i].info.unit[0])
			who = rows[i].info.unit;
		user_name(p->file_uid, user, sizeof(user));
		if ((r = table_add_cellf(t, "%d", (int)p->pid)) < 0 ||
		    (r = table_add_cell(t, user)) < 0 ||
		    (r = table_add_cell(t, who)) < 0 ||
		    (r = table_add_cell(t, rows[i].have_info ? rows[i].info.mode :
					seg_mode_to_string(p->header.mode))) < 0 ||
		    (r = add_rate(t, rows[i].t.acquired_per_sec)) < 0 ||
		    (r = add_rate(t, rows[i].t.commits_per_sec)) < 0)
			goto out;
		if (rows[i].t.abort_ratio < 0)
			r = table_add_cell(t, "-");
		else
			r = table_add_cellf(t, "%.1f%%", rows[i].t.abort_ratio * 100);
		if (r < 0 || (r = add_rate(t, rows[i].t.cycles_lost_per_sec)) < 0)
			goto out;
	}
	r = table_print(t, stdout, legend);
out:
	table_free(t);
	free(rows);
	return r;
}

static struct termios saved_tty;
static bool tty_raw;

static void tty_restore(void)
{
	if (tty_raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tty);
	tty_raw = false;
	fputs("\033[?25h", stdout);
	fflush(stdout);
}

static void on_signal(int sig)
{
	(void)sig;
	if (tty_raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tty);
	_exit(EXIT_OK);
}

static const char *key_name(enum sort_key k)
{
	switch (k) {
	case SORT_COMMITS:
		return "commits/s";
	case SORT_ABORTS:
		return "abort%";
	case SORT_CYCLES:
		return "cycles lost/s";
	default:
		return "acquired/s";
	}
}

static double interval_of(struct source *s)
{
	sd_bus *bus = source_bus(s);
	double d = 0;

	if (bus && sd_bus_get_property_trivial(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
					       "Interval", NULL, 'd', &d) >= 0 && d >= 0.05)
		return d;
	return 1.0;
}

static int one_frame(struct source *s, enum sort_key key, bool legend)
{
	struct seg_snapshot **procs = NULL;
	size_t n = 0;
	int r;

	r = source_list(s, &procs, &n);
	if (r < 0) {
		log_error("cannot list the processes: %s", s->error[0] ? s->error : strerror(-r));
		return s->error_exit ? s->error_exit : EXIT_FAIL;
	}
	r = print_rates(s, procs, n, key, 0, legend);
	source_list_free(procs, n);
	return r < 0 ? EXIT_FAIL : EXIT_OK;
}

int verb_top(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	enum sort_key key = SORT_ACQUIRED;
	struct termios raw;
	double interval;
	int r;

	(void)argv;
	if (argc != 1) {
		log_error("top takes no arguments");
		return EXIT_USAGE;
	}
	if (o->json) {
		log_error("top has no JSON output; use list --json");
		return EXIT_USAGE;
	}
	if (o->sort_set)
		key = o->sort == SORT_COMMITS || o->sort == SORT_ABORTS || o->sort == SORT_CYCLES ? o->sort : SORT_ACQUIRED;
	if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO))
		return one_frame(s, key, o->legend);

	interval = interval_of(s);
	if (tcgetattr(STDIN_FILENO, &saved_tty) == 0) {
		raw = saved_tty;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
			tty_raw = true;
	}
	atexit(tty_restore);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fputs("\033[?25l", stdout);
	for (;;) {
		struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
		struct timespec start, now;
		char c;

		/* Home, clear: one redraw, no scrolling. */
		fputs("\033[H\033[2J", stdout);
		printf("elidectl top (%s, every %.1fs, sorted by %s) - a c x l: sort, q: quit\n\n",
		       o->daemon ? "elided" : "segments, averages since start", interval, key_name(key));
		r = one_frame(s, key, true);
		fflush(stdout);
		if (r != EXIT_OK)
			return r;
		clock_gettime(CLOCK_MONOTONIC, &start);
		for (;;) {
			double left;

			clock_gettime(CLOCK_MONOTONIC, &now);
			left = interval - (double)(now.tv_sec - start.tv_sec) - (double)(now.tv_nsec - start.tv_nsec) / 1e9;
			if (left <= 0)
				break;
			if (poll(&pfd, 1, (int)(left * 1000) + 1) <= 0)
				continue;
			if (read(STDIN_FILENO, &c, 1) != 1)
				return EXIT_OK; /* end of input */
			if (c == 'q' || c == 'Q')
				return EXIT_OK;
			if (c == 'a')
				key = SORT_ACQUIRED;
			else if (c == 'c')
				key = SORT_COMMITS;
			else if (c == 'x')
				key = SORT_ABORTS;
			else if (c == 'l')
				key = SORT_CYCLES;
			else
				continue;
			break;
		}
	}
}
