/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Shared by elidectl's verbs. */
#ifndef ELIDECTL_H
#define ELIDECTL_H

#include <stdbool.h>
#include <stdint.h>

#include "segment-reader.h"
#include "source.h"

/* Exit statuses, documented in --help and elidectl(1). */
#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE 2

enum sort_key {
	SORT_ACQUIRED,
	SORT_NAME,
	SORT_COMMITS,
	SORT_ABORTS,
	SORT_CONFLICT,
	SORT_CAPACITY,
	SORT_CYCLES,
};

struct ctl_options {
	const char *runtime_dir;
	bool json;
	bool json_pretty;
	bool legend;
	bool verbose;
	bool sort_set;
	enum sort_key sort;
	bool max_set;
	unsigned long max;
};

int verb_list(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_show(struct source *s, const struct ctl_options *o, int argc, char **argv);

/* User-facing names, in the vocabulary of libelide's exit report. */
const char *kind_name(uint32_t kind);
const char *state_name(uint32_t state);
const char *reason_name(uint32_t reason);
const char *abort_cause_name(unsigned cause); /* cause: 0 .. N_ABORT_CAUSES-1 */
#define N_ABORT_CAUSES (ELIDE_SEG_STAT_ABORT_OTHER - ELIDE_SEG_STAT_ABORT_CONFLICT + 1)

uint64_t lock_aborts(const struct elide_seg_lock *l);

/* CLOCK_REALTIME in ns. */
uint64_t now_realtime_ns(void);
/* Seconds since the segment was created; <= 0 when the clock disagrees. */
double segment_age(const struct seg_snapshot *snap, uint64_t now_ns);

#endif
