/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl top: the processes by current rates, redrawn every interval on
 * a terminal (ANSI clear and redraw, no curses) and at once when the
 * terminal is resized (SIGWINCH); every frame fits the terminal, title and
 * keys included (rows beyond its height are counted on a last line).  Keys
 * a, c, x, l sort, q quits.  Not on a terminal: the table once.  The screen
 * is here too (top.h); top PID's view of one process's locks is
 * top-locks.c's.
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
#include "terminal.h"
#include "top.h"

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
	case SORT_WAIT:
		return r->t.wait_per_sec;
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

static const struct table_column rate_columns[] = {
	{ "PID", TABLE_RIGHT, 0 },
	{ "USER", TABLE_SHRINK, 0.1 },
	{ "UID", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "EXE/UNIT", TABLE_SHRINK_MIDDLE, 0.3 },
	{ "COMM", TABLE_HIDDEN | TABLE_SHRINK, 0 },
	{ "MODE", 0, 0 },
	{ "STATE", TABLE_HIDDEN | TABLE_SHRINK, 0.2 },
	{ "LOCKS", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "ACQUIRED/s", TABLE_RIGHT, 0 },
	{ "COMMITS/s", TABLE_RIGHT, 0 },
	{ "ABORT%", TABLE_RIGHT, 0 },
	{ "CYCLES-LOST/s", TABLE_RIGHT, 0 },
	/* Seconds waited for locks a second: 100% is one thread all the time. */
	{ "WAIT/s", TABLE_RIGHT, 0 },
};

int rates_check_output(const char *output)
{
	return table_check_output("top", rate_columns, ARRAY_SIZE(rate_columns), output);
}

static int print_rates_to(FILE *f, struct source *s, struct seg_snapshot **procs, size_t n, enum sort_key key,
			  size_t max, bool legend, const char *output)
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
	r = table_new(&t, "top", rate_columns, ARRAY_SIZE(rate_columns), output);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct seg_snapshot *p = rows[i].snap;
		const char *who = p->header.exe[0] ? p->header.exe : p->header.comm;
		struct proc_state ps;
		char user[64];

		if (rows[i].have_info && rows[i].info.unit[0])
			who = rows[i].info.unit;
		user_name(p->file_uid, user, sizeof(user));
		process_state(p, &ps);
		if ((r = table_add_cellf(t, "%d", (int)p->pid)) < 0 ||
		    (r = table_add_cell(t, user)) < 0 ||
		    (r = table_add_cellf(t, "%u", (unsigned)p->file_uid)) < 0 ||
		    (r = table_add_cell(t, who)) < 0 ||
		    (r = table_add_cell(t, p->header.comm[0] ? p->header.comm : "-")) < 0 ||
		    (r = table_add_cell(t, rows[i].have_info ? rows[i].info.mode :
					seg_mode_to_string(p->header.mode))) < 0 ||
		    (r = table_add_cellf(t, "%s%s%s%s", ps.state, ps.why[0] ? " (" : "", ps.why,
					 ps.why[0] ? ")" : "")) < 0)
			goto out;
		table_set_color(t, state_color(ps.state));
		if ((r = table_add_cellf(t, "%u", rows[i].t.locks)) < 0 ||
		    (r = table_add_rate(t, rows[i].t.acquired_per_sec)) < 0 ||
		    (r = table_add_rate(t, rows[i].t.commits_per_sec)) < 0 ||
		    (r = table_add_ratio(t, rows[i].t.abort_ratio)) < 0 ||
		    (r = table_add_rate(t, rows[i].t.cycles_lost_per_sec)) < 0 ||
		    (r = table_add_share(t, rows[i].t.wait_per_sec)) < 0)
			goto out;
	}
	r = table_print(t, f, legend);
out:
	table_free(t);
	free(rows);
	return r;
}

int print_rates(struct source *s, struct seg_snapshot **procs, size_t n, enum sort_key key, size_t max,
		bool legend, const char *output)
{
	return print_rates_to(stdout, s, procs, n, key, max, legend, output);
}

static struct termios saved_tty;
static bool tty_raw;
static volatile sig_atomic_t resized;

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
	static const char show_cursor[] = "\033[?25h";

	(void)sig;
	if (tty_raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tty);
	(void)!write(STDOUT_FILENO, show_cursor, sizeof(show_cursor) - 1);
	_exit(EXIT_OK);
}

static void on_winch(int sig)
{
	(void)sig;
	resized = 1;
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
	case SORT_WAIT:
		return "wait/s";
	default:
		return "acquired/s";
	}
}

double top_interval(struct source *s)
{
	sd_bus *bus = source_bus(s);
	double d = 0;

	if (bus && sd_bus_get_property_trivial(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
					       "Interval", NULL, 'd', &d) >= 0 && d >= 0.05)
		return d;
	return 1.0;
}

void top_frame_line(FILE *f, const char *text)
{
	char buf[512];

	if (terminal_width() > 0) {
		ellipsize(text, terminal_width(), false, buf, sizeof(buf));
		text = buf;
	}
	fprintf(f, "%s\n", text);
}

/*
 * The table, at most `rows` processes of it (0: all).  When some are left
 * out, the last line says how many.
 */
static int one_frame(FILE *f, struct source *s, const struct ctl_options *o, enum sort_key key, bool legend,
		     size_t rows)
{
	struct seg_snapshot **procs = NULL;
	size_t n = 0, max = 0;
	int r;

	r = source_list(s, &procs, &n);
	if (r < 0) {
		log_error("cannot list the processes: %s", s->error[0] ? s->error : strerror(-r));
		return s->error_exit ? s->error_exit : EXIT_FAIL;
	}
	if (rows > 0 && n > rows)
		max = rows - 1; /* and a line that says so */
	r = print_rates_to(f, s, procs, n, key, max, legend, o->output);
	if (r >= 0 && max) {
		char more[128];

		snprintf(more, sizeof(more), "... and %zu more (elidectl list shows every process)", n - max);
		top_frame_line(f, more);
	}
	source_list_free(procs, n);
	if (r == -EINVAL)
		return EXIT_USAGE; /* an unknown column, said */
	return r < 0 ? EXIT_FAIL : EXIT_OK;
}

/* The processes' view. */
struct procs_view {
	struct source *s;
	const struct ctl_options *o;
	enum sort_key key;
	double interval;
};

static int procs_frame(void *data, FILE *f, size_t rows, bool tick)
{
	struct procs_view *v = data;
	char title[256];

	(void)tick; /* every frame lists afresh: a key's redraw too */
	snprintf(title, sizeof(title), "elidectl top: %s, every %.1fs, sorted by %s",
		 v->o->daemon ? "elided" : "segments (averages since start)", v->interval, key_name(v->key));
	top_frame_line(f, title);
	top_frame_line(f, "keys: a acquired/s, c commits/s, x abort%, l cycles lost/s, w wait/s, q quit");
	return one_frame(f, v->s, v->o, v->key, true, rows);
}

static bool procs_key(void *data, char c)
{
	struct procs_view *v = data;

	if (c == 'a')
		v->key = SORT_ACQUIRED;
	else if (c == 'c')
		v->key = SORT_COMMITS;
	else if (c == 'x')
		v->key = SORT_ABORTS;
	else if (c == 'l')
		v->key = SORT_CYCLES;
	else if (c == 'w')
		v->key = SORT_WAIT;
	else
		return false;
	return true;
}

/*
 * One frame, drawn in one write: home, each line cut at the terminal's
 * width (a table that cannot shrink enough must not wrap and scroll the
 * title away) and the rest of its row erased, then the rest of the screen.
 * A frame that failed is not drawn: its message stays below the last one.
 */
static int draw(const struct top_view *v, bool tick)
{
	size_t height = terminal_height(), width = terminal_width(), rows = 0, len = 0;
	char *frame = NULL;
	FILE *f = open_memstream(&frame, &len);
	int r;

	if (!f) {
		log_oom();
		return EXIT_FAIL;
	}
	/* The title lines, the header, and the cursor's line below: a last
	 * newline on the bottom row would scroll the title away. */
	if (height >= TOP_TITLE_LINES + 4)
		rows = height - TOP_TITLE_LINES - 2;
	else if (height > 0)
		rows = 1;
	r = v->frame(v->data, f, rows, tick);
	if (fclose(f) != 0 || !frame) {
		free(frame);
		return EXIT_FAIL;
	}
	if (r != EXIT_OK) {
		free(frame);
		return r;
	}
	fputs("\033[H", stdout);
	for (char *line = frame; *line;) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		print_clipped(stdout, line, width);
		fputs("\033[K\n", stdout);
		if (!nl)
			break;
		line = nl + 1;
	}
	fputs("\033[J", stdout);
	fflush(stdout);
	free(frame);
	return EXIT_OK;
}

int top_screen(const struct top_view *v, double interval)
{
	struct sigaction sa = {};
	struct termios raw;
	int r;

	terminal_set_margin(1);
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
	/* No SA_RESTART: a resize interrupts the wait and redraws at once. */
	sa.sa_handler = on_winch;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGWINCH, &sa, NULL);
	/* Hide the cursor, clear once; frames then overwrite in place. */
	fputs("\033[?25l\033[H\033[2J", stdout);
	for (bool tick = true;;) {
		struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
		struct timespec start, now;
		char c;

		resized = 0;
		r = draw(v, tick);
		if (r != EXIT_OK)
			return r;
		tick = false;
		clock_gettime(CLOCK_MONOTONIC, &start);
		for (;;) {
			double left;

			if (resized) {
				/* Terminals reflow the old frame: start afresh. */
				terminal_update_size();
				fputs("\033[H\033[2J", stdout);
				break;
			}
			clock_gettime(CLOCK_MONOTONIC, &now);
			left = interval - (double)(now.tv_sec - start.tv_sec) - (double)(now.tv_nsec - start.tv_nsec) / 1e9;
			if (left <= 0) {
				tick = true;
				break;
			}
			if (poll(&pfd, 1, (int)(left * 1000) + 1) <= 0)
				continue;
			if (read(STDIN_FILENO, &c, 1) != 1)
				return EXIT_OK; /* end of input */
			if (c == 'q' || c == 'Q')
				return EXIT_OK;
			if (v->key(v->data, c))
				break;
		}
	}
}

int verb_top(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	struct procs_view pv = { .s = s, .o = o, .key = SORT_ACQUIRED };
	struct top_view view = { .frame = procs_frame, .key = procs_key, .data = &pv };
	pid_t pid;

	if (argc > 2) {
		log_error("top takes at most one PID");
		return EXIT_USAGE;
	}
	if (o->json) {
		log_error(argc == 2 ? "top has no JSON output; use show PID --json" :
			  "top has no JSON output; use list --json");
		return EXIT_USAGE;
	}
	if (argc == 2) {
		if (parse_pid(argv[1], &pid) < 0) {
			log_error("invalid PID '%s'", argv[1]);
			return EXIT_USAGE;
		}
		return top_locks(s, o, pid);
	}
	if (o->sort_set)
		pv.key = o->sort == SORT_COMMITS || o->sort == SORT_ABORTS || o->sort == SORT_CYCLES ||
				 o->sort == SORT_WAIT ? o->sort : SORT_ACQUIRED;
	if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO))
		return one_frame(stdout, s, o, pv.key, o->legend, 0);
	pv.interval = top_interval(s);
	return top_screen(&view, pv.interval);
}
