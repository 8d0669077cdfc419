/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer harness: the input is a segment file as an unprivileged process
 * would leave it in the runtime directory.  It is read the ways elided and
 * elidectl read one: seg_read (whole and hot-only), seg_read_max with a cap,
 * seg_read_each with a callback that stops early, and the mapped reader.
 * Every validated entry handed over must really be valid: NUL-terminated
 * name, in-range kind and state.
 *
 * The file name carries the pid and start time that the header must repeat:
 * it is made from the header's own fields when they can form a name, so the
 * fuzzer reaches the checks behind that one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz-util.h"
#include "segment-reader.h"

struct each_state {
	uint32_t seen;
	uint32_t stop_after;     /* 0: never stop */
	uint32_t last_index;
};

static void check_entry(uint32_t index, const struct elide_seg_lock *lock)
{
	/* What the reader promises about every entry it hands over. */
	if (!memchr(lock->name, '\0', sizeof(lock->name)) || lock->kind == ELIDE_SEG_KIND_FREE ||
	    lock->kind > ELIDE_SEG_KIND_OVERFLOW || lock->state > ELIDE_SEG_STATE_OFF_ADAPT ||
	    lock->reason >= ELIDE_SEG_NREASONS || index == 0) {
		fprintf(stderr, "fuzz-segment: entry %" PRIu32 " handed over although invalid\n", index);
		abort();
	}
}

static int each_cb(uint32_t index, const struct elide_seg_lock *lock, void *userdata)
{
	struct each_state *s = userdata;

	check_entry(index, lock);
	if (s->seen && index <= s->last_index) {
		fprintf(stderr, "fuzz-segment: entries out of order (%" PRIu32 " after %" PRIu32 ")\n", index,
			s->last_index);
		abort();
	}
	s->last_index = index;
	s->seen++;
	if (s->stop_after && s->seen >= s->stop_after)
		return -ECANCELED;
	return 0;
}

static void check_snapshot(const struct seg_snapshot *snap, const char *err)
{
	if (!memchr(snap->header.exe, '\0', sizeof(snap->header.exe)) ||
	    !memchr(snap->header.comm, '\0', sizeof(snap->header.comm)) ||
	    !memchr(snap->first_bad, '\0', sizeof(snap->first_bad)) || err[0]) {
		fprintf(stderr, "fuzz-segment: accepted snapshot with unterminated strings or an error (%s)\n", err);
		abort();
	}
	for (uint32_t i = 0; i < snap->nlocks; i++)
		if (snap->locks)
			check_entry(snap->locks[i].index, &snap->locks[i].lock);
}

static void read_whole(const char *name, unsigned flags, uint32_t max_locks)
{
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX];
	int r;

	r = seg_read_max(fuzz_dirfd(), name, flags, max_locks, &snap, err, sizeof(err));
	if (!memchr(err, '\0', sizeof(err)))
		abort();
	if (r == 0) {
		check_snapshot(snap, err);
		if (max_locks != UINT32_MAX && snap->nlocks > max_locks)
			abort();
		seg_snapshot_free(snap);
	}
}

static void read_each(const char *name, unsigned flags, uint32_t stop_after, uint64_t created_ns)
{
	struct each_state s = { .stop_after = stop_after };
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX];
	int r;

	r = seg_read_each(fuzz_dirfd(), name, flags, UINT32_MAX, created_ns, each_cb, &s, &snap, err, sizeof(err));
	if (r == 0) {
		if (snap->locks || snap->nlocks != s.seen)
			abort();
		check_snapshot(snap, err);
		seg_snapshot_free(snap);
	}
}

static void read_mapped(const char *name, unsigned flags)
{
	struct each_state s = { 0 };
	struct seg_snapshot *snap = NULL;
	struct seg_map *m = NULL;
	char err[SEG_ERR_MAX];
	int r;

	if (seg_map_open(fuzz_dirfd(), name, &m, err, sizeof(err)) < 0)
		return;
	r = seg_map_read_each(m, fuzz_dirfd(), flags, UINT32_MAX, 0, each_cb, &s, &snap, err, sizeof(err));
	if (r == 0) {
		check_snapshot(snap, err);
		seg_snapshot_free(snap);
	}
	/* A second read of the same map, as elided does every interval. */
	snap = NULL;
	memset(&s, 0, sizeof(s));
	r = seg_map_read_each(m, fuzz_dirfd(), flags | SEG_READ_HOT_ONLY, 4, 0, each_cb, &s, &snap, err, sizeof(err));
	if (r == 0)
		seg_snapshot_free(snap);
	seg_map_close(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[64] = "4242-1000.seg";
	int32_t pid;
	uint64_t start_time;

	/* The input as a file name too (seg_parse_name is the first gate). */
	if (size < sizeof(name)) {
		char s[sizeof(name)];
		pid_t p;
		uint64_t t;

		memcpy(s, data, size);
		s[size] = '\0';
		(void)seg_parse_name(s, &p, &t);
	}

	if (size >= offsetof(struct elide_seg_header, start_time) + sizeof(start_time)) {
		memcpy(&pid, data + offsetof(struct elide_seg_header, pid), sizeof(pid));
		memcpy(&start_time, data + offsetof(struct elide_seg_header, start_time), sizeof(start_time));
		if (pid > 0)
			snprintf(name, sizeof(name), "%" PRId32 "-%" PRIu64 ".seg", pid, start_time);
	}
	fuzz_write(name, data, size);

	read_whole(name, 0, UINT32_MAX);
	read_whole(name, SEG_READ_HOT_ONLY, UINT32_MAX);
	read_whole(name, 0, 3);
	read_whole(name, SEG_READ_NO_LOCKS, UINT32_MAX);
	read_each(name, 0, 0, 0);
	read_each(name, SEG_READ_HOT_ONLY, 2, 0);
	read_each(name, 0, 0, 1); /* created_ns that rarely matches: -ESTALE */
	read_mapped(name, 0);

	if (unlinkat(fuzz_dirfd(), name, 0) < 0)
		abort();
	return 0;
}
