/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl show PID --history: the rates elided kept of the process over
 * its last intervals (GetHistory, up to 60 points, oldest first), one line
 * a rate: a sparkline of the newest points that fit, then min, max and
 * last over all of them.  Only elided keeps a history: the segments hold
 * counters since the start alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "elidectl.h"
#include "json.h"
#include "log.h"
#include "sparkline.h"
#include "table.h"
#include "terminal.h"

enum {
	RATE_ACQUIRED,
	RATE_COMMITS,
	RATE_ABORTS,
	RATE_CYCLES_LOST,
	RATE_WAIT,
	N_RATES,
};

static const struct {
	const char *name;       /* the plain line's */
	const char *json;       /* the JSON array's */
} rate_names[N_RATES] = {
	[RATE_ACQUIRED] = { "acquired/s", "acquired_per_sec" },
	[RATE_COMMITS] = { "commits/s", "commits_per_sec" },
	[RATE_ABORTS] = { "aborts/s", "aborts_per_sec" },
	[RATE_CYCLES_LOST] = { "cycles-lost/s", "cycles_lost_per_sec" },
	/* Seconds waited a second, as top PID's WAIT/s: 100% is one thread
	 * waiting all the time. */
	[RATE_WAIT] = { "wait/s", "wait_per_sec" },
};

/* The points as columns: elided keeps 60, another version may keep more. */
struct history {
	size_t n, allocated;
	uint64_t *time_ns;                      /* CLOCK_MONOTONIC */
	double *rates[N_RATES];
};

static void history_free(struct history *h)
{
	free(h->time_ns);
	for (unsigned k = 0; k < N_RATES; k++)
		free(h->rates[k]);
}

static int history_append(struct history *h, uint64_t time_ns, const double rates[N_RATES])
{
	if (h->n == h->allocated) {
		size_t a = h->allocated ? h->allocated * 2 : 64;
		void *p = reallocarray(h->time_ns, a, sizeof(*h->time_ns));

		if (!p)
			return -ENOMEM;
		h->time_ns = p;
		for (unsigned k = 0; k < N_RATES; k++) {
			p = reallocarray(h->rates[k], a, sizeof(*h->rates[k]));
			if (!p)
				return -ENOMEM;
			h->rates[k] = p;
		}
		h->allocated = a;
	}
	h->time_ns[h->n] = time_ns;
	for (unsigned k = 0; k < N_RATES; k++)
		h->rates[k][h->n] = rates[k];
	h->n++;
	return 0;
}

/* GetHistory into h; an exit status (the error said). */
static int fetch_history(struct source *s, pid_t pid, struct history *h)
{
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	char what[64];
	int r;

	snprintf(what, sizeof(what), "cannot read the history of pid %d", (int)pid);
	r = sd_bus_call_method(source_bus(s), ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "GetHistory",
			       &e, &reply, "u", (uint32_t)pid);
	if (r < 0)
		return bus_error_exit(what, &e, r);
	r = sd_bus_message_enter_container(reply, 'a', "(tddddd)");
	if (r < 0)
		return bus_error_exit(what, NULL, r);
	for (;;) {
		double rates[N_RATES];
		uint64_t t;

		r = sd_bus_message_read(reply, "(tddddd)", &t, &rates[RATE_ACQUIRED], &rates[RATE_COMMITS],
					&rates[RATE_ABORTS], &rates[RATE_CYCLES_LOST], &rates[RATE_WAIT]);
		if (r < 0)
			return bus_error_exit(what, NULL, r);
		if (r == 0)
			return EXIT_OK;
		r = history_append(h, t, rates);
		if (r < 0) {
			log_oom();
			return EXIT_FAIL;
		}
	}
}

static int history_json(const struct ctl_options *o, pid_t pid, const struct history *h)
{
	struct json j;

	json_init(&j, stdout, o->json_pretty);
	json_begin_object(&j);
	json_key(&j, "pid");
	json_int(&j, pid);
	json_key(&j, "time_ns");
	json_begin_array(&j);
	for (size_t i = 0; i < h->n; i++)
		json_uint(&j, h->time_ns[i]);
	json_end_array(&j);
	for (unsigned k = 0; k < N_RATES; k++) {
		json_key(&j, rate_names[k].json);
		json_begin_array(&j);
		for (size_t i = 0; i < h->n; i++)
			json_double(&j, h->rates[k][i]);
		json_end_array(&j);
	}
	json_end_object(&j);
	return json_finish(&j);
}

/* The smallest and largest known point; -1 (shown "-") when none is. */
/* A rate as the plain form prints it: waiting as a share, the others as
 * rates ("-" when unknown). */
static char *format_value(unsigned rate, double v, char *buf, size_t size)
{
	if (rate != RATE_WAIT || v < 0)
		return format_rate(v, buf, size);
	snprintf(buf, size, "%.1f%%", v * 100);
	return buf;
}

static void min_max(const double *v, size_t n, double *min, double *max)
{
	*min = *max = -1;
	for (size_t i = 0; i < n; i++) {
		if (!(v[i] >= 0))
			continue;
		if (*min < 0 || v[i] < *min)
			*min = v[i];
		if (v[i] > *max)
			*max = v[i];
	}
}

/* NAME (padded) SPARKLINE  min X  max Y  last Z: at most 45 columns besides the sparkline. */
#define LINE_TEXT_WIDTH 45
#define SPARK_MIN_WIDTH 10

static int history_text(const struct ctl_options *o, pid_t pid, const struct history *h)
{
	size_t width = terminal_width(), spark_width = h->n, spark_size;
	_cleanup_free_ char *spark = NULL;

	/* The newest points that fit the terminal; all of them off one. */
	if (width > 0)
		spark_width = width > LINE_TEXT_WIDTH + SPARK_MIN_WIDTH ? width - LINE_TEXT_WIDTH : SPARK_MIN_WIDTH;
	if (spark_width > h->n)
		spark_width = h->n;
	spark_size = spark_width * SPARK_POINT_MAX + 1;
	spark = malloc(spark_size);
	if (!spark)
		return -ENOMEM;
	if (o->legend) {
		/* One point an interval: the time from the first to the last. */
		if (h->n >= 2)
			printf("pid %d: %zu intervals of elided, %.1fs from the first to the last\n", (int)pid, h->n,
			       (double)(h->time_ns[h->n - 1] - h->time_ns[0]) / 1e9);
		else
			printf("pid %d: %zu interval%s of elided\n", (int)pid, h->n, h->n == 1 ? "" : "s");
	}
	for (unsigned k = 0; k < N_RATES; k++) {
		char min_text[32], max_text[32], last_text[32];
		double min, max;
		int r;

		r = sparkline(h->rates[k], h->n, spark_width, terminal_utf8(), spark, spark_size);
		if (r < 0)
			return r;
		min_max(h->rates[k], h->n, &min, &max);
		printf("%-13s %s  min %s  max %s  last %s\n", rate_names[k].name, spark,
		       format_value(k, min, min_text, sizeof(min_text)), format_value(k, max, max_text, sizeof(max_text)),
		       format_value(k, h->n ? h->rates[k][h->n - 1] : -1, last_text, sizeof(last_text)));
	}
	return ferror(stdout) ? -EIO : 0;
}

int show_history(struct source *s, const struct ctl_options *o, pid_t pid)
{
	struct history h = {};
	int r;

	/* elidectl.c refuses --history without elided; this is the bus source. */
	if (!source_bus(s)) {
		log_error("--history needs elided: it keeps the history");
		return EXIT_USAGE;
	}
	r = fetch_history(s, pid, &h);
	if (r == EXIT_OK) {
		r = o->json ? history_json(o, pid, &h) : history_text(o, pid, &h);
		if (r < 0) {
			log_error_errno(r, "cannot show the history of pid %d", (int)pid);
			r = EXIT_FAIL;
		}
	}
	history_free(&h);
	return r;
}
