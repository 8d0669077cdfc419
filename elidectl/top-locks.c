/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl top PID: one process's locks by their current rates, on top's
 * screen (top.h).  Rates are worked out here, from the cumulative counters
 * of two snapshots in a row (whichever source gives them), so the first
 * frame on a terminal has none yet ("-"; off a terminal the one frame is
 * the second of two samples).  Each lock keeps the rates of its last
 * TREND_POINTS frames, drawn as a sparkline of the sort key's (TREND).  A
 * lock is its entry's index and address: an entry reused for another lock
 * starts a new history, and so does one whose counters went back.
 *
 * Watched locks (no transaction, contention figures) show CONTENDED/s,
 * WAIT/s and HOLD, eliding ones COMMITS/s and ABORT%, as show does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elidectl.h"
#include "lock-rows.h"
#include "log.h"
#include "sparkline.h"
#include "table.h"
#include "terminal.h"
#include "top.h"

#define TREND_POINTS 30

enum lock_rate {
	RATE_ACQUIRED,          /* acquisitions a second */
	RATE_CONTENDED,         /* contended acquisitions a second */
	RATE_WAIT,              /* seconds waited a second: 1 is one thread waiting all the time */
	RATE_COMMITS,           /* commits a second */
	RATE_ABORT_RATIO,       /* aborts per attempt over the interval */
	N_RATES,
};

/* The cumulative counters the rates are the differences of. */
struct lock_counters {
	uint64_t acquired, contended, wait_ns, attempts, commits, aborts;
};

struct lock_trend {
	uint32_t index;
	uint64_t addr;
	struct lock_counters last;
	size_t len;                               /* frames kept, up to TREND_POINTS */
	double points[N_RATES][TREND_POINTS];     /* oldest first; < 0: unknown */
};

/* The sort keys and the rate each one sorts and draws. */
static const struct {
	char key;
	enum sort_key sort;
	enum lock_rate rate;
	const char *name;
} sort_keys[] = {
	{ 'a', SORT_ACQUIRED, RATE_ACQUIRED, "acquired/s" },
	{ 'w', SORT_WAIT, RATE_WAIT, "wait/s" },
	{ 'c', SORT_COMMITS, RATE_COMMITS, "commits/s" },
	{ 'x', SORT_ABORTS, RATE_ABORT_RATIO, "abort%" },
};

struct locks_view {
	struct source *s;
	const struct ctl_options *o;
	pid_t pid;
	size_t key;                       /* into sort_keys */
	double interval;
	/* The last sample: its snapshot, its rows, and when it was taken. */
	struct seg_snapshot *snap;
	struct lock_row *rows;
	size_t nrows;
	uint64_t sampled_ns;              /* CLOCK_MONOTONIC; 0: none yet */
	/* One per lock of the last sample, sorted by index and address. */
	struct lock_trend *trends;
	size_t ntrends;
};

/* What top PID's table shows, a row: a lock and its rates. */
struct top_row {
	const struct lock_row *row;
	const struct lock_trend *trend;
};

static const struct table_column lock_columns[] = {
	{ "INDEX", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "LOCK", TABLE_SHRINK, 0.3 },
	{ "KIND", 0, 0 },
	{ "ACQUIRED/s", TABLE_RIGHT, 0 },
	/* Watched locks: these three replace COMMITS/s and ABORT%. */
	{ "CONTENDED/s", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "WAIT/s", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "HOLD", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "COMMITS/s", TABLE_RIGHT, 0 },
	{ "ABORT%", TABLE_RIGHT, 0 },
	/* Gives way first: its oldest points go before a lock's name shrinks. */
	{ "TREND", TABLE_CUT_START, 0.1 },
};

int top_locks_check_output(const char *output)
{
	return table_check_output("top PID", lock_columns, ARRAY_SIZE(lock_columns), output);
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void counters_of(const struct elide_seg_lock *l, struct lock_counters *c)
{
	c->acquired = l->stats[ELIDE_SEG_STAT_ACQUIRED];
	c->contended = l->stats[ELIDE_SEG_STAT_CONTENDED];
	c->wait_ns = l->wait_ns;
	c->attempts = l->stats[ELIDE_SEG_STAT_ATTEMPTS];
	c->commits = l->stats[ELIDE_SEG_STAT_COMMITS];
	c->aborts = lock_aborts(l);
}

/* Counters only grow: one that went back belongs to another lock. */
static bool counters_went_back(const struct lock_counters *now, const struct lock_counters *then)
{
	return now->acquired < then->acquired || now->contended < then->contended || now->wait_ns < then->wait_ns ||
	       now->attempts < then->attempts || now->commits < then->commits || now->aborts < then->aborts;
}

/* The rates between two samples `seconds` apart; unknown (-1) without. */
static void rates_between(const struct lock_counters *now, const struct lock_counters *then, double seconds,
			  double rates[N_RATES])
{
	uint64_t attempts;

	if (!then || !(seconds > 0)) {
		for (unsigned k = 0; k < N_RATES; k++)
			rates[k] = -1;
		return;
	}
	attempts = now->attempts - then->attempts;
	rates[RATE_ACQUIRED] = (double)(now->acquired - then->acquired) / seconds;
	rates[RATE_CONTENDED] = (double)(now->contended - then->contended) / seconds;
	rates[RATE_WAIT] = (double)(now->wait_ns - then->wait_ns) / 1e9 / seconds;
	rates[RATE_COMMITS] = (double)(now->commits - then->commits) / seconds;
	rates[RATE_ABORT_RATIO] = attempts ? (double)(now->aborts - then->aborts) / (double)attempts : -1;
}

static void trend_push(struct lock_trend *t, const double rates[N_RATES])
{
	if (t->len == TREND_POINTS) {
		for (unsigned k = 0; k < N_RATES; k++)
			memmove(t->points[k], t->points[k] + 1, (TREND_POINTS - 1) * sizeof(t->points[k][0]));
		t->len--;
	}
	for (unsigned k = 0; k < N_RATES; k++)
		t->points[k][t->len] = rates[k];
	t->len++;
}

static double trend_now(const struct lock_trend *t, enum lock_rate rate)
{
	return t->len ? t->points[rate][t->len - 1] : -1;
}

static int cmp_trend(const void *a, const void *b)
{
	const struct lock_trend *x = a, *y = b;

	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

static struct lock_trend *find_trend(struct lock_trend *trends, size_t n, const struct elide_seg_lock *l,
				     uint32_t index)
{
	struct lock_trend want = { .index = index, .addr = l->addr };

	return n ? bsearch(&want, trends, n, sizeof(*trends), cmp_trend) : NULL;
}

/*
 * The trends of the locks in rows, `seconds` after the last sample: each
 * lock's old trend with one more point, or a new one whose first point is
 * unknown.  Locks gone since are dropped.  -ENOMEM.
 */
static int trends_update(struct locks_view *v, const struct lock_row *rows, size_t n, double seconds)
{
	struct lock_trend *next = calloc(n ? n : 1, sizeof(*next));

	if (!next)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct elide_seg_lock *l = &rows[i].ls->lock;
		const struct lock_trend *old = find_trend(v->trends, v->ntrends, l, rows[i].ls->index);
		struct lock_counters now;
		double rates[N_RATES];

		counters_of(l, &now);
		if (old && !counters_went_back(&now, &old->last))
			next[i] = *old;
		else {
			next[i].index = rows[i].ls->index;
			next[i].addr = l->addr;
			old = NULL;
		}
		rates_between(&now, old ? &old->last : NULL, seconds, rates);
		trend_push(&next[i], rates);
		next[i].last = now;
	}
	qsort(next, n, sizeof(*next), cmp_trend);
	free(v->trends);
	v->trends = next;
	v->ntrends = n;
	return 0;
}

static void sample_free(struct locks_view *v)
{
	free(v->rows);
	v->rows = NULL;
	v->nrows = 0;
	seg_snapshot_free(v->snap);
	v->snap = NULL;
}

/* A new snapshot of the process and its locks' rates; an exit status. */
static int sample(struct locks_view *v)
{
	struct seg_snapshot *snap = NULL;
	struct lock_row *rows = NULL;
	uint64_t now;
	size_t n = 0;
	int r;

	r = source_get(v->s, v->pid, &snap);
	if (r == -ENOENT && v->sampled_ns) {
		log_error("pid %d has exited", (int)v->pid);
		return EXIT_NOT_FOUND;
	}
	if (r < 0)
		return lock_rows_get_failed(v->s, v->o, v->pid, r);
	now = monotonic_ns();
	r = lock_rows_build(v->s, snap, false, &rows, &n);
	if (r >= 0)
		r = trends_update(v, rows, n, v->sampled_ns ? (double)(now - v->sampled_ns) / 1e9 : 0);
	if (r < 0) {
		free(rows);
		seg_snapshot_free(snap);
		log_oom();
		return EXIT_FAIL;
	}
	sample_free(v);
	v->snap = snap;
	v->rows = rows;
	v->nrows = n;
	v->sampled_ns = now;
	return EXIT_OK;
}

static enum lock_rate sort_rate;

/* The count since the start behind a rate: orders the first frame, which
 * has no rates, as show orders its locks. */
static uint64_t total_of(const struct lock_trend *t, enum lock_rate rate)
{
	switch (rate) {
	case RATE_CONTENDED:
		return t->last.contended;
	case RATE_WAIT:
		return t->last.wait_ns;
	case RATE_COMMITS:
		return t->last.commits;
	case RATE_ABORT_RATIO:
		return t->last.aborts;
	case RATE_ACQUIRED:
	case N_RATES:
		break;
	}
	return t->last.acquired;
}

/* The sort key's rate descending, unknown last, then its total since the
 * start; entry order breaks ties. */
static int cmp_top_row(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;
	double kx = trend_now(x->trend, sort_rate), ky = trend_now(y->trend, sort_rate);
	uint64_t tx = total_of(x->trend, sort_rate), ty = total_of(y->trend, sort_rate);

	if (kx != ky)
		return kx < ky ? 1 : -1;
	if (tx != ty)
		return tx < ty ? 1 : -1;
	return (x->row->ls->index > y->row->ls->index) - (x->row->ls->index < y->row->ls->index);
}

static int add_row(struct table *t, const struct top_row *tr, enum lock_rate trend_rate)
{
	const struct elide_seg_lock *l = &tr->row->ls->lock;
	char spark[TREND_POINTS * SPARK_POINT_MAX + 1];
	int r;

	r = sparkline(tr->trend->points[trend_rate], tr->trend->len, TREND_POINTS, terminal_utf8(), spark,
		      sizeof(spark));
	if (r < 0)
		return r;
	if ((r = table_add_cellf(t, "%u", tr->row->ls->index)) < 0 ||
	    (r = table_add_cell(t, tr->row->name)) < 0 ||
	    (r = table_add_cell(t, l->kind == ELIDE_SEG_KIND_OVERFLOW ? "-" : kind_name(l->kind))) < 0 ||
	    (r = table_add_rate(t, trend_now(tr->trend, RATE_ACQUIRED))) < 0 ||
	    (r = table_add_rate(t, trend_now(tr->trend, RATE_CONTENDED))) < 0 ||
	    (r = table_add_share(t, trend_now(tr->trend, RATE_WAIT))) < 0 ||
	    (r = table_add_duration(t, l->hold_samples ? l->hold_ns / l->hold_samples : 0, l->hold_samples != 0)) < 0 ||
	    (r = table_add_rate(t, trend_now(tr->trend, RATE_COMMITS))) < 0 ||
	    (r = table_add_ratio(t, trend_now(tr->trend, RATE_ABORT_RATIO))) < 0)
		return r;
	return table_add_cell(t, spark);
}

/*
 * The table of the last sample, busiest first, at most `rows` locks (0:
 * all; --max too); when some are left out, a last line says how many.
 * -EINVAL (said) for an unknown column.
 */
static int print_locks(struct locks_view *v, FILE *f, bool legend, size_t rows)
{
	struct table_column columns[ARRAY_SIZE(lock_columns)];
	bool watched = lock_rows_watched(v->rows, v->nrows);
	struct top_row *top_rows;
	struct table *t = NULL;
	size_t n = v->nrows, shown = n;
	bool cut = false;
	int r;

	/* As show does: where locks are watched, waiting is the story. */
	memcpy(columns, lock_columns, sizeof(columns));
	for (size_t c = 0; watched && c < ARRAY_SIZE(columns); c++) {
		const char *h = columns[c].name;

		if (!strcmp(h, "CONTENDED/s") || !strcmp(h, "WAIT/s") || !strcmp(h, "HOLD"))
			columns[c].flags &= ~TABLE_HIDDEN;
		else if (!strcmp(h, "COMMITS/s") || !strcmp(h, "ABORT%"))
			columns[c].flags |= TABLE_HIDDEN;
	}
	top_rows = calloc(n ? n : 1, sizeof(*top_rows));
	if (!top_rows)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		top_rows[i].row = &v->rows[i];
		top_rows[i].trend = find_trend(v->trends, v->ntrends, &v->rows[i].ls->lock, v->rows[i].ls->index);
	}
	sort_rate = sort_keys[v->key].rate;
	qsort(top_rows, n, sizeof(*top_rows), cmp_top_row);
	if (v->o->max_set && shown > v->o->max)
		shown = v->o->max;
	if (rows > 0 && shown > rows) {
		shown = rows - 1; /* and a line that says so */
		cut = true;
	}
	r = table_new(&t, "top PID", columns, ARRAY_SIZE(columns), v->o->output);
	for (size_t i = 0; r >= 0 && i < shown; i++)
		r = add_row(t, &top_rows[i], sort_rate);
	if (r >= 0)
		r = table_print(t, f, legend);
	if (r >= 0 && cut) {
		char more[128];

		snprintf(more, sizeof(more), "... and %zu more locks (elidectl show %d lists every one)", n - shown,
			 (int)v->pid);
		top_frame_line(f, more);
	}
	table_free(t);
	free(top_rows);
	return r;
}

/* The exit status of print_locks()'s result. */
static int print_exit_status(int r)
{
	if (r == -EINVAL)
		return EXIT_USAGE; /* an unknown column, said */
	if (r < 0) {
		log_error_errno(r, "cannot show the locks");
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int locks_frame(void *data, FILE *f, size_t rows, bool tick)
{
	struct locks_view *v = data;
	char comm[sizeof(v->snap->header.comm)], title[256], keys[128];
	int r;

	/* A key or a resize redraws the last sample: frames are intervals. */
	if (tick || !v->snap) {
		r = sample(v);
		if (r != EXIT_OK)
			return r;
	}
	/* The process names itself: sanitised before it reaches the terminal. */
	sanitize_text(v->snap->header.comm[0] ? v->snap->header.comm : "-", comm, sizeof(comm));
	snprintf(title, sizeof(title), "elidectl top: pid %d (%s), every %.1fs, sorted by %s", (int)v->pid, comm,
		 v->interval, sort_keys[v->key].name);
	top_frame_line(f, title);
	snprintf(keys, sizeof(keys), "keys:");
	for (size_t i = 0; i < ARRAY_SIZE(sort_keys); i++)
		snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys), " %c %s,", sort_keys[i].key,
			 sort_keys[i].name);
	snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys), " q quit");
	top_frame_line(f, keys);
	return print_exit_status(print_locks(v, f, true, rows));
}

static bool locks_key(void *data, char c)
{
	struct locks_view *v = data;

	for (size_t i = 0; i < ARRAY_SIZE(sort_keys); i++)
		if (sort_keys[i].key == c) {
			v->key = i;
			return true;
		}
	return false;
}

int top_locks(struct source *s, const struct ctl_options *o, pid_t pid)
{
	struct locks_view v = { .s = s, .o = o, .pid = pid };
	struct top_view view = { .frame = locks_frame, .key = locks_key, .data = &v };
	int r;

	for (size_t i = 0; o->sort_set && i < ARRAY_SIZE(sort_keys); i++)
		if (sort_keys[i].sort == o->sort)
			v.key = i;
	if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)) {
		/* One frame, like the screen's second: two samples an interval
		 * apart, so that a script or a pipe gets rates. */
		struct timespec pause;

		v.interval = top_interval(s);
		pause.tv_sec = (time_t)v.interval;
		pause.tv_nsec = (long)((v.interval - (double)pause.tv_sec) * 1e9);
		r = sample(&v);
		if (r == EXIT_OK) {
			while (nanosleep(&pause, &pause) < 0 && errno == EINTR)
				;
			r = sample(&v);
		}
		if (r == EXIT_OK)
			r = print_exit_status(print_locks(&v, stdout, o->legend, 0));
	} else {
		v.interval = top_interval(s);
		r = top_screen(&view, v.interval);
	}
	sample_free(&v);
	free(v.trends);
	return r;
}
