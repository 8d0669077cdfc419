/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elidectl.h"
#include "lock-rows.h"
#include "log.h"
#include "table.h"

static bool overflow_in_use(const struct elide_seg_lock *l)
{
	for (unsigned s = 0; s < ELIDE_SEG_NSTATS; s++)
		if (l->stats[s])
			return true;
	return false;
}

/* elide.h's name, else the symbol, else the address. */
static void name_row(struct lock_row *row)
{
	const struct elide_seg_lock *l = &row->ls->lock;

	if (l->kind == ELIDE_SEG_KIND_OVERFLOW)
		snprintf(row->name, sizeof(row->name), "(overflow)");
	else if (l->name[0])
		snprintf(row->name, sizeof(row->name), "%s", l->name);
	else if (row->sym.symbol[0])
		snprintf(row->name, sizeof(row->name), "%s", row->sym.symbol);
	else
		snprintf(row->name, sizeof(row->name), "0x%llx", (unsigned long long)l->addr);
}

int lock_rows_build(struct source *s, const struct seg_snapshot *snap, bool call_sites, struct lock_row **ret,
		    size_t *ret_n)
{
	struct lock_row *rows;
	size_t n = 0;

	rows = calloc(snap->nlocks ? snap->nlocks : 1, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	for (uint32_t i = 0; i < snap->nlocks; i++) {
		const struct seg_lock_snapshot *ls = &snap->locks[i];
		const struct elide_seg_lock *l = &ls->lock;
		struct lock_row *row = &rows[n];

		/* The overflow entry always exists; it matters once it counted. */
		if (l->kind == ELIDE_SEG_KIND_OVERFLOW && !overflow_in_use(l))
			continue;
		row->ls = ls;
		row->aborts = lock_aborts(l);
		snprintf(row->site.text, sizeof(row->site.text), "-");
		if (l->kind == ELIDE_SEG_KIND_OVERFLOW) {
			snprintf(row->sym.text, sizeof(row->sym.text), "-");
		} else {
			source_symbolize(s, snap->pid, l->addr, true, &row->sym);
			if (call_sites && l->callsite)
				source_symbolize(s, snap->pid, l->callsite, false, &row->site);
		}
		name_row(row);
		n++;
	}
	*ret = rows;
	*ret_n = n;
	return 0;
}

bool lock_rows_watched(const struct lock_row *rows, size_t n)
{
	bool figures = false;

	for (size_t i = 0; i < n; i++) {
		if (rows[i].ls->lock.stats[ELIDE_SEG_STAT_ATTEMPTS])
			return false;
		figures = figures || lock_has_contention(&rows[i].ls->lock);
	}
	return figures;
}

int lock_rows_get_failed(struct source *s, const struct ctl_options *o, pid_t pid, int r)
{
	char clean[SEG_ERR_MAX];

	if (r == -ENOENT) {
		if (o->daemon)
			log_error("no libelide process with pid %d", (int)pid);
		else
			log_error("no libelide segment for pid %d in %s", (int)pid, s->location);
		return EXIT_NOT_FOUND;
	}
	sanitize_text(s->error[0] ? s->error : strerror(-r), clean, sizeof(clean));
	log_error("cannot read pid %d: %s", (int)pid, clean);
	if (s->error_exit)
		return s->error_exit;
	return r == -EACCES || r == -EPERM ? EXIT_DENIED : EXIT_FAIL;
}
