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

/* What elided adds to a process's segment data (source-bus only). */
struct source_proc_info {
	char unit[256];              /* systemd unit, "" when none */
	char mode[16];               /* the mode elided applies */
	char state[ELIDE_SEG_REASON_MAX + 16]; /* "on" or "off: why" */
	double acquired_per_sec;     /* over elided's last interval */
	double commits_per_sec;
	double abort_ratio;          /* aborts / attempts, 0..1 */
	double cycles_lost_per_sec;
	double wait_per_sec;         /* seconds waited for locks a second */
};

struct source_ops {
	const char *name;
	void (*free)(struct source *s);
	int (*list)(struct source *s, struct seg_snapshot ***ret, size_t *n);
	int (*get)(struct source *s, pid_t pid, struct seg_snapshot **ret);
	int (*symbolize)(struct source *s, pid_t pid, uint64_t addr, bool want_object,
			 struct source_symbol *ret);
	/* Optional: elided's view of the process; -ENOENT when there is none. */
	int (*info)(struct source *s, pid_t pid, struct source_proc_info *ret);
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
	int error_exit;          /* with error: the exit status it maps to, 0 = EXIT_FAIL */
	bool synthetic;          /* lock addresses are made up (not the process's) */
	void *data;
};

int source_direct_new(const char *runtime_dir, struct source **ret);

/*
 * elided over D-Bus: host NULL for the local system bus (which honours
 * $DBUS_SYSTEM_BUS_ADDRESS), else "[USER@]HOST" over ssh.  -ENXIO when the
 * bus answers but elided does not own its name; other -errno when the bus
 * cannot be reached.  `why` gets one line on failure.
 */
struct sd_bus;
int source_bus_new(const char *host, struct source **ret, char *why, size_t whylen);
/* The bus of a bus source, NULL for others. */
struct sd_bus *source_bus(struct source *s);

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

/* elided's view of the process: -ENOENT (or -EOPNOTSUPP) when unavailable. */
int source_info(struct source *s, pid_t pid, struct source_proc_info *ret);

#endif
