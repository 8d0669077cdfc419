/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Where elidectl gets its data.  The data model is the segment's own
 * (struct seg_snapshot, validated copies); a source produces snapshots and
 * names addresses.  "direct" reads the runtime directory and /proc itself;
 * a daemon source (asking elided) slots in behind the same calls.
 *
 * Sources report per-process problems (an unreadable or malformed segment)
 * as warnings on stderr and go on; the calls fail only when nothing can be
 * read at all.
 */
#ifndef ELIDECTL_SOURCE_H
#define ELIDECTL_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "segment-reader.h"

struct source;

/* A named address: symbol is "cache_lock", "worker+0x3a" or "" when
 * unknown; text is the full description: "worker+0x3a (prog)",
 * "prog+0x1234", or "0x7f12..." without a mapping. */
struct source_symbol {
	char symbol[160];
	char text[256];
};

struct source_ops {
	const char *name;
	void (*free)(struct source *s);
	int (*list)(struct source *s, struct seg_snapshot ***ret, size_t *n);
	int (*get)(struct source *s, pid_t pid, struct seg_snapshot **ret);
	int (*symbolize)(struct source *s, pid_t pid, uint64_t addr, bool want_object,
			 struct source_symbol *ret);
};

/* What list() skipped, for --verbose. */
struct source_counts {
	unsigned stale;        /* leftovers of dead processes */
	unsigned unreadable;   /* no permission (another user's process) */
	unsigned bad;          /* malformed or hostile, warned about */
	unsigned vanished;     /* removed while we read (process exited) */
};

struct source {
	const struct source_ops *ops;
	char *location;        /* for messages: the runtime directory, the daemon's address */
	struct source_counts counts;
	char error[SEG_ERR_MAX]; /* the last failure of get(), one line */
	void *data;
};

int source_direct_new(const char *runtime_dir, struct source **ret);

void source_free(struct source *s);

/* Every live process with libelide that the caller may see, sorted by pid. */
int source_list(struct source *s, struct seg_snapshot ***ret, size_t *n);
void source_list_free(struct seg_snapshot **procs, size_t n);

/* One process: -ENOENT when it has no (live) segment; on other errors
 * s->error says why. */
int source_get(struct source *s, pid_t pid, struct seg_snapshot **ret);

/* Never fails: without symbols the text is the raw address. */
void source_symbolize(struct source *s, pid_t pid, uint64_t addr, bool want_object,
		      struct source_symbol *ret);

#endif
