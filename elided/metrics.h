/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef ELIDED_METRICS_H
#define ELIDED_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "segment-format.h"

/*
 * Prometheus output in node_exporter's textfile collector format (see
 * elide.conf(5), daemon.metrics_dir): written atomically (a temporary file
 * renamed over elide.prom) every metrics_interval seconds.
 *
 * Per-program counters are monotonic across the program's processes:
 * elided adds what each process counted since the previous write, so a
 * process that exits does not take its counts away (only what it counted
 * after the last write is missed).
 */

struct elided;
struct metrics;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

/* Text of a label value, escaped for the exposition format (\\, \", \n). */
void metrics_write_label_value(FILE *f, const char *value);

/* Per interval: writes when the configured interval has passed, or not at
 * all while daemon.metrics_dir is unset.  Errors are logged once per kind
 * until a write succeeds again. */
void elided_metrics_tick(struct elided *d);

/* Render the current metrics to f (the writer's and the tests' entry). */
int elided_metrics_render(struct elided *d, FILE *f);

#endif
