/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "source.h"

void source_free(struct source *s)
{
	if (!s)
		return;
	if (s->ops->free)
		s->ops->free(s);
	free(s->location);
	free(s);
}

int source_list(struct source *s, struct seg_snapshot ***ret, size_t *n)
{
	return s->ops->list(s, ret, n);
}

void source_list_free(struct seg_snapshot **procs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		seg_snapshot_free(procs[i]);
	free(procs);
}

int source_get(struct source *s, pid_t pid, struct seg_snapshot **ret)
{
	s->error[0] = '\0';
	return s->ops->get(s, pid, ret);
}

void source_symbolize(struct source *s, pid_t pid, uint64_t addr, bool want_object,
		      struct source_symbol *ret)
{
	ret->symbol[0] = '\0';
	snprintf(ret->text, sizeof(ret->text), "0x%llx", (unsigned long long)addr);
	if (addr == 0 || !s->ops->symbolize)
		return;
	if (s->ops->symbolize(s, pid, addr, want_object, ret) < 0) {
		ret->symbol[0] = '\0';
		snprintf(ret->text, sizeof(ret->text), "0x%llx", (unsigned long long)addr);
	}
}

int source_info(struct source *s, pid_t pid, struct source_proc_info *ret)
{
	if (!s->ops->info)
		return -EOPNOTSUPP;
	return s->ops->info(s, pid, ret);
}
