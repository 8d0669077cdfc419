/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One process's locks as rows named for people, shared by show and top
 * PID: elide.h's name, else the symbol at the lock's address, else the
 * address.  The overflow entry is a row only once it counted something.
 */
#ifndef ELIDECTL_LOCK_ROWS_H
#define ELIDECTL_LOCK_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "segment-reader.h"
#include "source.h"

struct ctl_options;

struct lock_row {
	const struct seg_lock_snapshot *ls;
	struct source_symbol sym;      /* of the lock's address */
	struct source_symbol site;     /* of the call site ("-" unless asked for) */
	char name[ELIDE_SEG_NAME_MAX + 160];
	uint64_t aborts;
};

/* The rows of snap's locks, in entry order; `call_sites`: name where each
 * lock was first tracked too (a symbol lookup a lock).  -ENOMEM. */
int lock_rows_build(struct source *s, const struct seg_snapshot *snap, bool call_sites, struct lock_row **ret,
		    size_t *ret_n);

/* Were these locks watched, not elided: contention figures, and not one
 * transaction? */
bool lock_rows_watched(const struct lock_row *rows, size_t n);

/*
 * Says why source_get() of pid failed with r, the way show says it ("no
 * libelide process with pid N", a permission problem); returns the exit
 * status: EXIT_NOT_FOUND, EXIT_DENIED, EXIT_FAIL or the source's own.
 */
int lock_rows_get_failed(struct source *s, const struct ctl_options *o, pid_t pid, int r);

#endif
