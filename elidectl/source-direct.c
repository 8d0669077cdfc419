/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The "direct" source: reads the segments in the runtime directory with
 * segment-reader (which validates every byte and checks each file against
 * the live process) and names addresses from the process's mapped ELF
 * files with elfsym.  Whoever runs elidectl sees the segments their
 * credentials can open: root all of them, a user their own.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elfsym.h"
#include "log.h"
#include "source.h"
#include "table.h"

struct direct {
	int dirfd;
	int dir_error;          /* open() of the directory failed with this */
	/* Mappings of the last process symbolized: show names many addresses
	 * of one process. */
	bool maps_loaded;
	pid_t maps_pid;
	int maps_error;
	struct elfsym_maps *maps;
};

static void direct_free(struct source *s)
{
	struct direct *d = s->data;

	if (!d)
		return;
	if (d->dirfd >= 0)
		close(d->dirfd);
	elfsym_maps_free(d->maps);
	free(d);
}

static int cmp_pid(const void *a, const void *b)
{
	const struct seg_snapshot *x = *(struct seg_snapshot *const *)a;
	const struct seg_snapshot *y = *(struct seg_snapshot *const *)b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

static bool has_suffix(const char *name, const char *suffix)
{
	size_t n = strlen(name), m = strlen(suffix);

	return n >= m && strcmp(name + n - m, suffix) == 0;
}

/* One warning line naming the file and what is wrong with it; the text may
 * carry bytes from the file (a name), so it is sanitised. */
static void warn_segment(const char *name, int r, const char *err)
{
	char buf[SEG_ERR_MAX + 64], clean[SEG_ERR_MAX + 64];

	if (err && *err)
		snprintf(buf, sizeof(buf), "%s", err);
	else
		snprintf(buf, sizeof(buf), "%s: %s", name, strerror(-r));
	sanitize_text(buf, clean, sizeof(clean));
	log_warning("skipping segment %s", clean);
}

static int direct_list(struct source *s, struct seg_snapshot ***ret, size_t *ret_n)
{
	struct direct *d = s->data;
	struct seg_snapshot **procs = NULL;
	size_t n = 0, allocated = 0;
	struct dirent *de;
	DIR *dir;
	int fd, r;

	if (d->dirfd < 0)
		return -d->dir_error;
	/* fdopendir takes the fd: give it a fresh one at offset 0. */
	fd = openat(d->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		r = -errno;
		close(fd);
		return r;
	}
	memset(&s->counts, 0, sizeof(s->counts));
	while ((errno = 0, de = readdir(dir))) {
		char err[SEG_ERR_MAX] = "";
		struct seg_snapshot *snap;

		if (de->d_name[0] == '.' || !has_suffix(de->d_name, ELIDE_SEG_SUFFIX))
			continue;
		r = seg_read(d->dirfd, de->d_name, SEG_READ_CHECK_PROCESS, &snap, err, sizeof(err));
		switch (r) {
		case 0:
			break;
		case -ENOENT:       /* the process exited while we looked */
			s->counts.vanished++;
			continue;
		case -ESRCH:
			s->counts.stale++;
			continue;
		case -EACCES:       /* another user's process: not ours to see */
			s->counts.unreadable++;
			continue;
		default:
			s->counts.bad++;
			warn_segment(de->d_name, r, err);
			continue;
		}
		if (n == allocated) {
			size_t a = allocated ? allocated * 2 : 16;
			struct seg_snapshot **p = reallocarray(procs, a, sizeof(*p));

			if (!p) {
				seg_snapshot_free(snap);
				r = -ENOMEM;
				goto fail;
			}
			procs = p;
			allocated = a;
		}
		procs[n++] = snap;
	}
	if (errno) {
		r = -errno;
		goto fail;
	}
	closedir(dir);
	if (n > 1)
		qsort(procs, n, sizeof(*procs), cmp_pid);
	*ret = procs;
	*ret_n = n;
	return 0;
fail:
	closedir(dir);
	source_list_free(procs, n);
	return r;
}

static int direct_get(struct source *s, pid_t pid, struct seg_snapshot **ret)
{
	struct direct *d = s->data;
	char name[64];
	uint64_t start_time;
	int r;

	if (d->dirfd < 0) {
		if (d->dir_error == ENOENT)
			return -ENOENT;
		snprintf(s->error, sizeof(s->error), "cannot open %s: %s", s->location, strerror(d->dir_error));
		return -d->dir_error;
	}
	/* The live process's start time names its segment; a leftover of an
	 * earlier process with the same pid has another name. */
	r = seg_proc_start_time(NULL, pid, &start_time);
	if (r == -ENOENT || r == -ESRCH)
		return -ENOENT;
	if (r < 0) {
		snprintf(s->error, sizeof(s->error), "cannot read /proc/%d/stat: %s", (int)pid, strerror(-r));
		return r;
	}
	snprintf(name, sizeof(name), "%d-%llu%s", (int)pid, (unsigned long long)start_time, ELIDE_SEG_SUFFIX);
	r = seg_read(d->dirfd, name, SEG_READ_CHECK_PROCESS, ret, s->error, sizeof(s->error));
	if (r == -ENOENT || r == -ESRCH) {
		s->error[0] = '\0';
		return -ENOENT;
	}
	if (r < 0 && !s->error[0])
		snprintf(s->error, sizeof(s->error), "%s: %s", name, strerror(-r));
	return r;
}

static int direct_symbolize(struct source *s, pid_t pid, uint64_t addr, bool want_object,
			    struct source_symbol *ret)
{
	struct direct *d = s->data;
	struct elfsym_result res;
	int r;

	if (!d->maps_loaded || d->maps_pid != pid) {
		elfsym_maps_free(d->maps);
		d->maps = NULL;
		d->maps_loaded = true;
		d->maps_pid = pid;
		d->maps_error = -elfsym_maps_load(&d->maps, pid);
		if (d->maps_error)
			log_info("cannot read the mappings of pid %d, showing raw addresses: %s",
				 (int)pid, strerror(d->maps_error));
	}
	if (!d->maps)
		return -d->maps_error;
	r = elfsym_resolve(d->maps, addr, want_object, &res);
	/* Without a symbol but inside a mapping, "module+0xVADDR" is still
	 * worth more than the raw address. */
	if (r < 0 && !(r == -ENOENT && res.module[0]))
		return r;
	elfsym_format_symbol(&res, ret->symbol, sizeof(ret->symbol));
	elfsym_format(&res, addr, ret->text, sizeof(ret->text));
	return 0;
}

static const struct source_ops direct_ops = {
	.name = "direct",
	.free = direct_free,
	.list = direct_list,
	.get = direct_get,
	.symbolize = direct_symbolize,
};

int source_direct_new(const char *runtime_dir, struct source **ret)
{
	struct source *s;
	struct direct *d;

	s = calloc(1, sizeof(*s));
	d = calloc(1, sizeof(*d));
	if (!s || !d) {
		free(s);
		free(d);
		return -ENOMEM;
	}
	s->ops = &direct_ops;
	s->data = d;
	s->location = strdup(runtime_dir);
	if (!s->location) {
		source_free(s);
		return -ENOMEM;
	}
	/* Opened once: every segment is then read relative to this very
	 * directory, whatever happens to the path meanwhile. */
	d->dirfd = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->dirfd < 0)
		d->dir_error = errno;
	*ret = s;
	return 0;
}
