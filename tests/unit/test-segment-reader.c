/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * segment-reader.c against segments built here: a valid one reads back
 * whole, every kind of hostile file is refused with its own errno and a
 * message naming the field, and garbage lock entries are skipped.  The
 * mapped reader (seg_map) reads the same, follows rewrites, notices a
 * replaced or resized file, survives truncation in the middle of a read,
 * and leaves every other SIGBUS fatal.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elide.h"
#include "macros.h"
#include "segment-reader.h"

#define LOCKS_OFFSET (ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE)

static char top_dir[] = "/tmp/test-segrd-XXXXXX";
static char test_dir[128];
static int dfd = -1;
static uint64_t self_start;

/* A segment image in memory, written to `name` in the test's directory. */
struct seg {
	char *buf;
	size_t size;
	char name[64];
};

static struct elide_seg_header *hdr(struct seg *s)
{
	return (void *)s->buf; /* calloc'd: suitably aligned */
}

static struct elide_seg_control *ctl(struct seg *s)
{
	return (void *)(s->buf + ELIDE_SEG_HEADER_SIZE);
}

static struct elide_seg_lock *ent(struct seg *s, uint32_t i)
{
	return (void *)(s->buf + LOCKS_OFFSET + (size_t)i * sizeof(struct elide_seg_lock));
}

/* Field 22 of /proc/self/stat, parsed independently of the code under test. */
static uint64_t read_self_start(void)
{
	char buf[2048], *p;
	unsigned long long v;
	ssize_t n;
	int fd;

	fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p + 2, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
				&v), 1);
	return v;
}

/* A consistent segment for pid/start_time: entry 1 the overflow bucket,
 * entries 2 .. nlocks+1 mutexes named "lock-<i>". */
static void seg_build_for(struct seg *s, pid_t pid, uint64_t start, uint32_t capacity, uint32_t nlocks)
{
	struct elide_seg_header *h;

	ck_assert_uint_le(nlocks + 2, capacity);
	s->size = LOCKS_OFFSET + (size_t)capacity * sizeof(struct elide_seg_lock);
	s->buf = calloc(1, s->size);
	ck_assert_ptr_nonnull(s->buf);
	snprintf(s->name, sizeof(s->name), "%d-%llu.seg", (int)pid, (unsigned long long)start);
	h = hdr(s);
	memcpy(h->magic, ELIDE_SEG_MAGIC, sizeof(h->magic));
	h->version = ELIDE_SEG_VERSION;
	h->header_size = ELIDE_SEG_HEADER_SIZE;
	h->total_size = s->size;
	h->control_offset = ELIDE_SEG_HEADER_SIZE;
	h->control_size = ELIDE_SEG_CONTROL_SIZE;
	h->locks_offset = LOCKS_OFFSET;
	h->lock_entry_size = sizeof(struct elide_seg_lock);
	h->lock_capacity = capacity;
	h->lock_high_water = nlocks + 2;
	h->pid = pid;
	h->uid = geteuid();
	h->start_time = start;
	h->created_ns = 123456789;
	strcpy(h->exe, "/usr/bin/testprog");
	strcpy(h->comm, "testprog");
	strcpy(h->lib_version, "0.1");
	h->elision = ELIDE_SEG_ELISION_ON;
	h->mode = ELIDE_SEG_MODE_ADAPTIVE;
	h->sample = 64;
	h->rtm_usable = 1;
	strcpy(h->status_reason, "RTM usable");

	ent(s, 1)->kind = ELIDE_SEG_KIND_OVERFLOW;
	strcpy(ent(s, 1)->name, "(overflow)");
	for (uint32_t i = 2; i < nlocks + 2; i++) {
		struct elide_seg_lock *e = ent(s, i);

		e->kind = i % 3 == 0 ? ELIDE_SEG_KIND_RWLOCK_READ : ELIDE_SEG_KIND_MUTEX;
		e->state = ELIDE_SEG_STATE_ELIDING;
		e->reason = ELIDE_SEG_REASON_CONTENDED;
		e->policy = ELIDE_POLICY_ADAPTIVE;
		e->addr = 0x1000 + i * 64;
		e->callsite = 0x400000 + i;
		snprintf(e->name, sizeof(e->name), "lock-%u", i);
		for (unsigned k = 0; k < ELIDE_SEG_NSTATS; k++)
			e->stats[k] = (uint64_t)i * 1000 + k;
	}
}

static void seg_build(struct seg *s, uint32_t capacity, uint32_t nlocks)
{
	seg_build_for(s, getpid(), self_start, capacity, nlocks);
}

static void seg_write(struct seg *s)
{
	int fd;

	fd = openat(dfd, s->name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, s->buf, s->size, 0), (ssize_t)s->size);
	ck_assert_int_eq(close(fd), 0);
}

static void seg_done(struct seg *s)
{
	free(s->buf);
	s->buf = NULL;
}

/* Build a default segment, let `s` be mutated by the caller, write it. */
#define WITH_SEG(s, cap, n) struct seg s = {}; seg_build(&s, cap, n)

static void seg_truncate(const char *name, off_t size)
{
	int fd = openat(dfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, size), 0);
	close(fd);
}

/* seg_read must fail with `expect`, name the file first and mention `what`. */
static void expect_fail(const char *name, unsigned flags, int expect, const char *what)
{
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX] = "";
	int r;

	r = seg_read(dfd, name, flags, &snap, err, sizeof(err));
	ck_assert_msg(r == expect, "%s: got %d (%s), expected %d; err=\"%s\"", name, r,
		      r < 0 ? strerror(-r) : "ok", expect, err);
	ck_assert_ptr_null(snap);
	ck_assert_msg(strncmp(err, name, strlen(name)) == 0 && strncmp(err + strlen(name), ": ", 2) == 0,
		      "err \"%s\" does not start with \"%s: \"", err, name);
	ck_assert_msg(strstr(err, what), "err \"%s\" does not mention \"%s\"", err, what);
	ck_assert_ptr_null(strchr(err, '\n'));
}

/* Write `s` and expect seg_read (no process check) to refuse it. */
static void expect_seg_fail(struct seg *s, int expect, const char *what)
{
	seg_write(s);
	expect_fail(s->name, 0, expect, what);
	seg_done(s);
}

static struct seg_snapshot *read_ok(const char *name, unsigned flags)
{
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX] = "";
	int r;

	r = seg_read(dfd, name, flags, &snap, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: %d (%s): %s", name, r, strerror(-r), err);
	ck_assert_ptr_nonnull(snap);
	return snap;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path) < 0 ? -1 : 0;
}

static void suite_setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(top_dir));
}

static void suite_teardown(void)
{
	nftw(top_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void)
{
	snprintf(test_dir, sizeof(test_dir), "%s/t-XXXXXX", top_dir);
	ck_assert_ptr_nonnull(mkdtemp(test_dir));
	dfd = open(test_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dfd, 0);
	self_start = read_self_start();
}

static void teardown(void)
{
	close(dfd);
	dfd = -1;
}

/* A pid no process has now. */
static pid_t unused_pid(void)
{
	char buf[32] = "";
	long max = 32768;
	int fd;

	fd = open("/proc/sys/kernel/pid_max", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf) - 1) > 0)
			max = strtol(buf, NULL, 10);
		close(fd);
	}
	for (pid_t p = (pid_t)max - 1; p > 300; p--)
		if (kill(p, 0) < 0 && errno == ESRCH)
			return p;
	ck_abort_msg("no unused pid found");
	return -1;
}

START_TEST(test_valid)
{
	WITH_SEG(s, 16, 5);
	struct seg_snapshot *snap;

	ctl(&s)->generation = 6;
	ctl(&s)->retries = 4;
	seg_write(&s);
	snap = read_ok(s.name, 0);
	ck_assert_str_eq(snap->file, s.name);
	ck_assert_int_eq(snap->pid, getpid());
	ck_assert_uint_eq(snap->start_time, self_start);
	ck_assert_uint_eq(snap->file_uid, geteuid());
	ck_assert_mem_eq(&snap->header, s.buf, sizeof(snap->header));
	ck_assert_str_eq(snap->header.exe, "/usr/bin/testprog");
	ck_assert_str_eq(snap->header.comm, "testprog");
	ck_assert_uint_eq(snap->control.generation, 6);
	ck_assert_uint_eq(snap->control.retries, 4);
	ck_assert_uint_eq(snap->nbad_locks, 0);
	ck_assert_uint_eq(snap->nlocks, 6);
	ck_assert_uint_eq(snap->locks[0].index, 1);
	ck_assert_uint_eq(snap->locks[0].lock.kind, ELIDE_SEG_KIND_OVERFLOW);
	ck_assert_str_eq(snap->locks[0].lock.name, "(overflow)");
	for (uint32_t i = 1; i < snap->nlocks; i++) {
		char name[32];

		snprintf(name, sizeof(name), "lock-%u", i + 1);
		ck_assert_uint_eq(snap->locks[i].index, i + 1);
		ck_assert_str_eq(snap->locks[i].lock.name, name);
		ck_assert_mem_eq(&snap->locks[i].lock, ent(&s, i + 1), sizeof(struct elide_seg_lock));
	}
	seg_snapshot_free(snap);
	seg_done(&s);
}
END_TEST

START_TEST(test_valid_check_process)
{
	WITH_SEG(s, 4, 2);
	struct seg_snapshot *snap;

	seg_write(&s);
	snap = read_ok(s.name, SEG_READ_CHECK_PROCESS);
	ck_assert_uint_eq(snap->nlocks, 3);
	seg_snapshot_free(snap);
	seg_done(&s);
}
END_TEST

START_TEST(test_empty_table)
{
	WITH_SEG(s, 2, 0);
	struct seg_snapshot *snap;

	hdr(&s)->lock_high_water = 0;
	seg_write(&s);
	snap = read_ok(s.name, 0);
	ck_assert_uint_eq(snap->nlocks, 0);
	ck_assert_ptr_null(snap->locks);
	seg_snapshot_free(snap);
	seg_done(&s);
}
END_TEST

/* The largest table, entries at chunk edges: read whole, nothing beyond high water. */
START_TEST(test_max_capacity)
{
	WITH_SEG(s, ELIDE_SEG_MAX_LOCKS, 0);
	struct seg_snapshot *snap;
	const uint32_t at[] = { 255, 256, 257, 65533 };

	hdr(&s)->lock_high_water = 65534;
	for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
		ent(&s, at[k])->kind = ELIDE_SEG_KIND_MUTEX;
		snprintf(ent(&s, at[k])->name, ELIDE_SEG_NAME_MAX, "at-%u", at[k]);
	}
	ent(&s, 65534)->kind = ELIDE_SEG_KIND_MUTEX; /* beyond high water: not read */
	ent(&s, 65534)->name[0] = 'x';
	seg_write(&s);
	snap = read_ok(s.name, 0);
	ck_assert_uint_eq(snap->nlocks, 5);
	ck_assert_uint_eq(snap->nbad_locks, 0);
	for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++)
		ck_assert_uint_eq(snap->locks[k + 1].index, at[k]);
	seg_snapshot_free(snap);
	seg_done(&s);
}
END_TEST

START_TEST(test_sizes)
{
	WITH_SEG(s, 16, 5);

	seg_write(&s);
	seg_truncate(s.name, 0);
	expect_fail(s.name, 0, -EBADMSG, "truncated");
	seg_truncate(s.name, 100);
	expect_fail(s.name, 0, -EBADMSG, "truncated");
	seg_truncate(s.name, ELIDE_SEG_HEADER_SIZE + 100);
	expect_fail(s.name, 0, -EBADMSG, "truncated");
	/* Mid-table: the header promises more than the file holds. */
	seg_write(&s);
	seg_truncate(s.name, (off_t)s.size - 300);
	expect_fail(s.name, 0, -EBADMSG, "total_size");
	seg_write(&s);
	seg_truncate(s.name, (off_t)s.size + 256);
	expect_fail(s.name, 0, -EBADMSG, "total_size");
	/* Sparse: no disk used. */
	seg_truncate(s.name, (off_t)SEG_MAX_SIZE + 4096);
	expect_fail(s.name, 0, -EFBIG, "too large");
	seg_done(&s);
}
END_TEST

START_TEST(test_bad_header_fields)
{
	struct {
		size_t off;
		uint32_t value;
		const char *what;
	} cases[] = {
		{ offsetof(struct elide_seg_header, version), ELIDE_SEG_VERSION + 1, "version" },
		{ offsetof(struct elide_seg_header, version), 1, "version" }, /* the layout before the hot part */
		{ offsetof(struct elide_seg_header, version), 0, "version" },
		{ offsetof(struct elide_seg_header, header_size), 8192, "header_size" },
		{ offsetof(struct elide_seg_header, control_offset), 0, "control_offset" },
		{ offsetof(struct elide_seg_header, control_size), 8192, "control_size" },
		{ offsetof(struct elide_seg_header, locks_offset), 4096, "locks_offset" },
		{ offsetof(struct elide_seg_header, lock_entry_size), 128, "lock_entry_size" },
		{ offsetof(struct elide_seg_header, lock_entry_size), 0, "lock_entry_size" },
		{ offsetof(struct elide_seg_header, lock_capacity), 0, "lock_capacity" },
		{ offsetof(struct elide_seg_header, lock_capacity), 1, "lock_capacity" },
		{ offsetof(struct elide_seg_header, lock_capacity), 70000, "lock_capacity" },
		{ offsetof(struct elide_seg_header, lock_capacity), 0xffffffffu, "lock_capacity" },
		{ offsetof(struct elide_seg_header, lock_capacity), 17, "total_size" },
		{ offsetof(struct elide_seg_header, lock_high_water), 17, "lock_high_water" },
		{ offsetof(struct elide_seg_header, lock_high_water), 0xffffffffu, "lock_high_water" },
		{ offsetof(struct elide_seg_header, elision), 2, "elision" },
		{ offsetof(struct elide_seg_header, mode), 0, "mode" },
		{ offsetof(struct elide_seg_header, mode), ELIDE_SEG_MODE_WATCH + 1, "mode" },
		{ offsetof(struct elide_seg_header, sample), 0, "sample" },
		{ offsetof(struct elide_seg_header, sample), 3, "sample" },
		{ offsetof(struct elide_seg_header, sample), 131072, "sample" },
		{ offsetof(struct elide_seg_header, rtm_usable), 2, "rtm_usable" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		WITH_SEG(s, 16, 5);

		memcpy(s.buf + cases[i].off, &cases[i].value, sizeof(uint32_t));
		expect_seg_fail(&s, -EBADMSG, cases[i].what);
	}

	/* watch_sample counts only where the writer says it keeps it up. */
	static const uint32_t bad_samples[] = { 0, 3, 131072, 0xffffffffu };
	for (size_t i = 0; i < sizeof(bad_samples) / sizeof(bad_samples[0]); i++) {
		WITH_SEG(s, 16, 5);

		hdr(&s)->features |= ELIDE_SEG_FEATURE_WATCH;
		hdr(&s)->watch_sample = bad_samples[i];
		expect_seg_fail(&s, -EBADMSG, "watch_sample");
	}
	{
		WITH_SEG(s, 16, 5);
		struct seg_snapshot *snap;

		hdr(&s)->features &= ~ELIDE_SEG_FEATURE_WATCH;
		hdr(&s)->watch_sample = 3;
		seg_write(&s);
		snap = read_ok(s.name, 0);
		seg_snapshot_free(snap);
		seg_done(&s);
	}
}
END_TEST

START_TEST(test_bad_magic_and_identity)
{
	struct seg s = {};

	seg_build(&s, 16, 5);
	hdr(&s)->magic[7] = '2';
	expect_seg_fail(&s, -EBADMSG, "magic");

	seg_build(&s, 16, 5);
	hdr(&s)->total_size += 256;
	expect_seg_fail(&s, -EBADMSG, "total_size");
	seg_build(&s, 16, 5);
	hdr(&s)->total_size -= 256;
	expect_seg_fail(&s, -EBADMSG, "total_size");
	seg_build(&s, 16, 5);
	hdr(&s)->total_size = UINT64_MAX;
	expect_seg_fail(&s, -EBADMSG, "total_size");

	seg_build(&s, 16, 5);
	hdr(&s)->pid = getpid() + 1;
	expect_seg_fail(&s, -EBADMSG, "pid");
	seg_build(&s, 16, 5);
	hdr(&s)->pid = -1;
	expect_seg_fail(&s, -EBADMSG, "pid");
	seg_build(&s, 16, 5);
	hdr(&s)->start_time = self_start + 1;
	expect_seg_fail(&s, -EBADMSG, "start_time");
}
END_TEST

START_TEST(test_strings_without_nul)
{
	struct seg s = {};

	seg_build(&s, 16, 5);
	memset(hdr(&s)->exe, 'a', sizeof(hdr(&s)->exe));
	expect_seg_fail(&s, -EBADMSG, "exe");
	seg_build(&s, 16, 5);
	memset(hdr(&s)->comm, 'a', sizeof(hdr(&s)->comm));
	expect_seg_fail(&s, -EBADMSG, "comm");
	seg_build(&s, 16, 5);
	memset(hdr(&s)->lib_version, 'a', sizeof(hdr(&s)->lib_version));
	expect_seg_fail(&s, -EBADMSG, "lib_version");
	seg_build(&s, 16, 5);
	memset(hdr(&s)->status_reason, 'a', sizeof(hdr(&s)->status_reason));
	expect_seg_fail(&s, -EBADMSG, "status_reason");
}
END_TEST

START_TEST(test_bad_entries_skipped)
{
	WITH_SEG(s, 32, 10);
	struct seg_snapshot *snap;

	ent(&s, 3)->kind = 9;
	ent(&s, 4)->state = 7;
	memset(ent(&s, 5)->name, 'n', ELIDE_SEG_NAME_MAX);
	ent(&s, 6)->reason = ELIDE_SEG_NREASONS;
	ent(&s, 7)->policy = 3;
	ent(&s, 8)->kind = ELIDE_SEG_KIND_OVERFLOW; /* only entry 1 is the overflow bucket */
	ent(&s, 0)->kind = ELIDE_SEG_KIND_MUTEX;     /* entry 0 is never used */
	ent(&s, 9)->kind = ELIDE_SEG_KIND_FREE;      /* free: neither kept nor counted */
	ent(&s, 9)->state = 99;
	seg_write(&s);
	snap = read_ok(s.name, 0);
	ck_assert_uint_eq(snap->nbad_locks, 7);
	ck_assert_str_eq(snap->first_bad, "entry 0: in use, but entry 0 is never used");
	/* 1 (overflow), 2, 10, 11 */
	ck_assert_uint_eq(snap->nlocks, 4);
	ck_assert_uint_eq(snap->locks[0].index, 1);
	ck_assert_uint_eq(snap->locks[1].index, 2);
	ck_assert_uint_eq(snap->locks[2].index, 10);
	ck_assert_str_eq(snap->locks[2].lock.name, "lock-10");
	ck_assert_uint_eq(snap->locks[3].index, 11);
	seg_snapshot_free(snap);
	seg_done(&s);
}
END_TEST

static struct seg_map *map_ok(const char *name);

static int count_entry(uint32_t index, const struct elide_seg_lock *lock, void *userdata)
{
	(*(unsigned *)userdata)++;
	return 0;
}

/* Callback mode with garbage entries: no table, never one realloc'd from NULL. */
START_TEST(test_each_bad_entries_no_table)
{
	WITH_SEG(s, 32, 10);
	struct seg_snapshot *snap = NULL;
	struct seg_map *m;
	char err[SEG_ERR_MAX] = "";
	unsigned seen = 0;

	ent(&s, 3)->kind = 9;
	ent(&s, 4)->state = 7;
	seg_write(&s);
	ck_assert_int_eq(seg_read_each(dfd, s.name, 0, UINT32_MAX, 0, count_entry, &seen, &snap, err, sizeof(err)), 0);
	ck_assert_uint_eq(snap->nbad_locks, 2);
	ck_assert_uint_lt(snap->nlocks, snap->header.lock_high_water);
	ck_assert_uint_eq(snap->nlocks, seen);
	ck_assert_uint_gt(seen, 0);
	ck_assert_ptr_null(snap->locks);
	seg_snapshot_free(snap);

	/* The same through a mapping. */
	seen = 0;
	m = map_ok(s.name);
	ck_assert_int_eq(seg_map_read_each(m, dfd, 0, UINT32_MAX, 0, count_entry, &seen, &snap, err, sizeof(err)), 0);
	ck_assert_uint_eq(snap->nbad_locks, 2);
	ck_assert_uint_eq(snap->nlocks, seen);
	ck_assert_ptr_null(snap->locks);
	seg_snapshot_free(snap);
	seg_map_close(m);
	seg_done(&s);
}
END_TEST

/* Each kind of garbage entry, explained with its value. */
START_TEST(test_bad_entry_explained)
{
	static const struct {
		uint32_t index;
		const char *expect;
	} cases[] = {
		{ 3, "entry 3: kind 9 out of range 0..4" },
		{ 4, "entry 4: state 7 out of range 0..3" },
		{ 5, "entry 5: name is not NUL-terminated" },
		{ 6, "entry 6: reason 11 out of range 0..10" },
		{ 7, "entry 7: policy 3 out of range 0..2" },
		{ 8, "entry 8: kind 4, but entry 1 and only it is the overflow entry" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		WITH_SEG(s, 16, 8);
		struct elide_seg_lock *e = ent(&s, cases[i].index);
		struct seg_snapshot *snap;

		switch (cases[i].index) {
		case 3: e->kind = 9; break;
		case 4: e->state = 7; break;
		case 5: memset(e->name, 'n', ELIDE_SEG_NAME_MAX); break;
		case 6: e->reason = ELIDE_SEG_NREASONS; break;
		case 7: e->policy = 3; break;
		default: e->kind = ELIDE_SEG_KIND_OVERFLOW; break;
		}
		seg_write(&s);
		snap = read_ok(s.name, 0);
		ck_assert_uint_eq(snap->nbad_locks, 1);
		ck_assert_str_eq(snap->first_bad, cases[i].expect);
		seg_snapshot_free(snap);
		seg_done(&s);
	}
}
END_TEST

START_TEST(test_stale)
{
	struct seg s = {};
	struct seg_snapshot *snap;
	pid_t dead = unused_pid();

	/* Our pid, another start time: an earlier process that had our pid. */
	seg_build_for(&s, getpid(), self_start + 1, 8, 2);
	seg_write(&s);
	expect_fail(s.name, SEG_READ_CHECK_PROCESS, -ESRCH, "stale");
	snap = read_ok(s.name, 0); /* post-mortem inspection still works */
	seg_snapshot_free(snap);
	seg_done(&s);

	seg_build_for(&s, dead, self_start, 8, 2);
	seg_write(&s);
	expect_fail(s.name, SEG_READ_CHECK_PROCESS, -ESRCH, "stale");
	snap = read_ok(s.name, 0);
	seg_snapshot_free(snap);
	seg_done(&s);
}
END_TEST

START_TEST(test_owner)
{
	WITH_SEG(s, 8, 2);

	/* The header's uid must be the file owner. */
	hdr(&s)->uid = geteuid() + 1;
	seg_write(&s);
	expect_fail(s.name, SEG_READ_CHECK_PROCESS, -EBADMSG, "uid");
	seg_snapshot_free(read_ok(s.name, 0)); /* without the process check: fine */

	if (geteuid() != 0) {
		printf("test_owner: not root, skipping the file-owner (-EPERM) case\n");
		seg_done(&s);
		return;
	}
	/* A file someone else owns, named for our process. */
	hdr(&s)->uid = 12345;
	seg_write(&s);
	ck_assert_int_eq(fchownat(dfd, s.name, 12345, 12345, AT_SYMLINK_NOFOLLOW), 0);
	expect_fail(s.name, SEG_READ_CHECK_PROCESS, -EPERM, "owner");
	seg_done(&s);
}
END_TEST

START_TEST(test_not_regular)
{
	WITH_SEG(s, 8, 2);
	char name[64];

	seg_write(&s);
	/* A symlink to a valid segment is never followed. */
	snprintf(name, sizeof(name), "%d-%llu.seg", (int)getpid(), (unsigned long long)self_start + 7);
	ck_assert_int_eq(symlinkat(s.name, dfd, name), 0);
	expect_fail(name, 0, -ELOOP, "symlink");
	ck_assert_int_eq(unlinkat(dfd, name, 0), 0);

	/* A FIFO must not block the reader. */
	ck_assert_int_eq(mkfifoat(dfd, name, 0600), 0);
	alarm(5);
	expect_fail(name, 0, -EBADMSG, "regular");
	alarm(0);
	ck_assert_int_eq(unlinkat(dfd, name, 0), 0);

	ck_assert_int_eq(mkdirat(dfd, name, 0700), 0);
	expect_fail(name, 0, -EBADMSG, "regular");

	snprintf(name, sizeof(name), "%d-%llu.seg", (int)getpid(), (unsigned long long)self_start + 8);
	expect_fail(name, 0, -ENOENT, "open");
	seg_done(&s);
}
END_TEST

START_TEST(test_parse_name)
{
	static const char *const bad[] = {
		"abc.seg", "1-2.seg.tmp", "-1-2.seg", "01-2.seg", "1-99999999999999999999999.seg",
		"1-.seg", "-.seg", "0-2.seg", "2147483648-2.seg", "+1-2.seg", "1-+2.seg", "1--2.seg",
		"1-02.seg", " 1-2.seg", "1-2 .seg", "1-2.SEG", "1-2", "1-2.se", "1-2.seg/", "1.seg",
		"1-18446744073709551616.seg", "",
	};
	pid_t pid;
	uint64_t t;

	ck_assert_int_eq(seg_parse_name("1-0.seg", &pid, &t), 0);
	ck_assert_int_eq(pid, 1);
	ck_assert_uint_eq(t, 0);
	ck_assert_int_eq(seg_parse_name("2147483647-18446744073709551615.seg", &pid, &t), 0);
	ck_assert_int_eq(pid, INT_MAX);
	ck_assert_uint_eq(t, UINT64_MAX);
	ck_assert_int_eq(seg_parse_name(NULL, &pid, &t), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(seg_parse_name(bad[i], &pid, &t) == -EINVAL, "accepted \"%s\"", bad[i]);
		if (!bad[i][0] || strchr(bad[i], '/'))
			continue;
		/* A valid segment under a bad name is refused by name. */
		{
			WITH_SEG(s, 4, 1);

			snprintf(s.name, sizeof(s.name), "%s", bad[i]);
			seg_write(&s);
			expect_fail(bad[i], 0, -EINVAL, "name");
			seg_done(&s);
		}
	}
}
END_TEST

START_TEST(test_write_control)
{
	WITH_SEG(s, 8, 2);
	struct elide_seg_control c = { .generation = 999, .mode = ELIDE_SEG_MODE_OFF, .retries = 3, .nhints = 2 };
	struct seg_snapshot *snap;
	char err[SEG_ERR_MAX];
	uint64_t prev = 0;

	c.hints[0] = (struct elide_seg_hint){ 0x7f0000001000, ELIDE_SEG_HINT_LOCK_ADDR, ELIDE_SEG_HINT_NEVER };
	c.hints[ELIDE_SEG_MAX_HINTS - 1] = (struct elide_seg_hint){ 0x401234, ELIDE_SEG_HINT_CALLSITE,
								     ELIDE_SEG_HINT_ELIDES };
	seg_write(&s);
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(seg_write_control(dfd, s.name, &c, err, sizeof(err)), 0);
		snap = read_ok(s.name, 0);
		ck_assert_uint_eq(snap->control.generation % 2, 0);
		ck_assert_uint_gt(snap->control.generation, prev);
		ck_assert_uint_eq(snap->control.mode, ELIDE_SEG_MODE_OFF);
		ck_assert_uint_eq(snap->control.retries, c.retries);
		/* The hint table is written and read with the rest of the block. */
		ck_assert_uint_eq(snap->control.nhints, 2);
		ck_assert_mem_eq(&snap->control.hints, &c.hints, sizeof(c.hints));
		/* The rest of the file is untouched. */
		ck_assert_mem_eq(&snap->header, s.buf, sizeof(snap->header));
		ck_assert_uint_eq(snap->nlocks, 3);
		prev = snap->control.generation;
		seg_snapshot_free(snap);
		c.retries++;
	}
	ck_assert_uint_eq(prev, 4);

	/* An odd generation left by an interrupted writer: next even above it. */
	ctl(&s)->generation = 7;
	seg_write(&s);
	ck_assert_int_eq(seg_write_control(dfd, s.name, &c, err, sizeof(err)), 0);
	snap = read_ok(s.name, 0);
	ck_assert_uint_eq(snap->control.generation, 10);
	seg_snapshot_free(snap);

	/* Refused like reads: bad header, symlink, bad name. */
	hdr(&s)->lock_entry_size = 128;
	seg_write(&s);
	ck_assert_int_eq(seg_write_control(dfd, s.name, &c, err, sizeof(err)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, "lock_entry_size"));
	ck_assert_int_eq(symlinkat(s.name, dfd, "1-1.seg"), 0);
	ck_assert_int_eq(seg_write_control(dfd, "1-1.seg", &c, err, sizeof(err)), -ELOOP);
	ck_assert_int_eq(seg_write_control(dfd, "x.seg", &c, err, sizeof(err)), -EINVAL);
	seg_done(&s);
}
END_TEST

START_TEST(test_write_lock_policy)
{
	WITH_SEG(s, 8, 3);
	struct seg_snapshot *snap;
	char err[SEG_ERR_MAX];

	seg_write(&s);
	ck_assert_int_eq(seg_write_lock_policy(dfd, s.name, 3, ELIDE_POLICY_NEVER + 1, ELIDE_SEG_SOURCE_OVERRIDE, err, sizeof(err)), 0);
	ck_assert_int_eq(seg_write_lock_policy(dfd, s.name, 7, ELIDE_POLICY_ALWAYS + 1, ELIDE_SEG_SOURCE_OVERRIDE, err, sizeof(err)), 0);
	snap = read_ok(s.name, 0);
	ck_assert_uint_eq(snap->nlocks, 4);
	ck_assert_uint_eq(snap->locks[2].index, 3);
	ck_assert_uint_eq(snap->locks[2].lock.ctl_policy, ELIDE_POLICY_NEVER + 1);
	ck_assert_uint_eq(snap->locks[2].lock.ctl_source, ELIDE_SEG_SOURCE_OVERRIDE);
	/* Only ctl_policy and ctl_source changed. */
	ent(&s, 3)->ctl_policy = ELIDE_POLICY_NEVER + 1;
	ent(&s, 3)->ctl_source = ELIDE_SEG_SOURCE_OVERRIDE;
	ck_assert_mem_eq(&snap->locks[2].lock, ent(&s, 3), sizeof(struct elide_seg_lock));
	ck_assert_mem_eq(&snap->locks[1].lock, ent(&s, 2), sizeof(struct elide_seg_lock));
	seg_snapshot_free(snap);

	ck_assert_int_eq(seg_write_lock_policy(dfd, s.name, 8, 1, ELIDE_SEG_SOURCE_OVERRIDE, err, sizeof(err)), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err, "lock_capacity"));
	ck_assert_int_eq(seg_write_lock_policy(dfd, s.name, 2, 1, 9, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "ctl_source"));
	/* LEARNED is the last source there is. */
	ck_assert_int_eq(seg_write_lock_policy(dfd, s.name, 2, ELIDE_POLICY_NEVER + 1, ELIDE_SEG_SOURCE_LEARNED, err,
					       sizeof(err)), 0);
	snap = read_ok(s.name, 0);
	ck_assert_uint_eq(snap->locks[1].index, 2);
	ck_assert_uint_eq(snap->locks[1].lock.ctl_policy, ELIDE_POLICY_NEVER + 1);
	ck_assert_uint_eq(snap->locks[1].lock.ctl_source, ELIDE_SEG_SOURCE_LEARNED);
	seg_snapshot_free(snap);
	ck_assert_int_eq(seg_write_lock_policy(dfd, s.name, 2, 1, ELIDE_SEG_SOURCE_LEARNED + 1, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "ctl_source"));
	ck_assert_int_eq(seg_write_lock_policy(dfd, s.name, UINT32_MAX, 1, ELIDE_SEG_SOURCE_OVERRIDE, err, sizeof(err)), -ERANGE);
	ck_assert_int_eq(seg_write_lock_policy(dfd, s.name, 2, 4, ELIDE_SEG_SOURCE_OVERRIDE, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "ctl_policy"));
	seg_done(&s);
}
END_TEST

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(test_proc)
{
	char proc[256], dir[512];
	uint64_t t;
	uid_t uid;

	ck_assert_int_eq(seg_proc_start_time(NULL, getpid(), &t), 0);
	ck_assert_uint_eq(t, self_start);
	ck_assert_int_eq(seg_proc_uid(NULL, getpid(), &uid), 0);
	ck_assert_uint_eq(uid, geteuid());
	ck_assert_int_eq(seg_proc_start_time(NULL, unused_pid(), &t), -ESRCH);
	ck_assert_int_eq(seg_proc_uid(NULL, unused_pid(), &uid), -ESRCH);
	ck_assert_int_eq(seg_proc_start_time(NULL, 0, &t), -EINVAL);

	/* A fake /proc: a comm holding ") " and parentheses. */
	snprintf(proc, sizeof(proc), "%s/proc", test_dir);
	snprintf(dir, sizeof(dir), "%s/42", proc);
	ck_assert_int_eq(mkdir(proc, 0700), 0);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	write_file(dir, "stat", "42 (a) b (c) ) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
				"987654321 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
	write_file(dir, "status", "Name:\ta\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t2000\t3000\t4000\n"
				  "Gid:\t5\t5\t5\t5\n");
	ck_assert_int_eq(seg_proc_start_time(proc, 42, &t), 0);
	ck_assert_uint_eq(t, 987654321);
	ck_assert_int_eq(seg_proc_uid(proc, 42, &uid), 0);
	ck_assert_uint_eq(uid, 2000);

	write_file(dir, "stat", "42 (a) S 1 42\n");
	ck_assert_int_eq(seg_proc_start_time(proc, 42, &t), -EBADMSG);
	write_file(dir, "stat", "43 (a) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987\n");
	ck_assert_int_eq(seg_proc_start_time(proc, 42, &t), -EBADMSG);
	write_file(dir, "stat", "42 (a) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 -987 1\n");
	ck_assert_int_eq(seg_proc_start_time(proc, 42, &t), -EBADMSG);
	write_file(dir, "stat", "42 (a) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 99999999999999999999 1\n");
	ck_assert_int_eq(seg_proc_start_time(proc, 42, &t), -EBADMSG);
	write_file(dir, "status", "Name:\tUid:\t1\t1\t1\t1\nGid:\t5\t5\t5\t5\n");
	ck_assert_int_eq(seg_proc_uid(proc, 42, &uid), -EBADMSG);
	{
		/* A long status (CPU masks of a big machine) is read only up to Uid:. */
		char big[3 * 4096];

		snprintf(big, sizeof(big), "Name:\ta\nUid:\t7\t8\t9\t10\nCpus_allowed:\t%0*d\n", 8192, 0);
		write_file(dir, "status", big);
		ck_assert_int_eq(seg_proc_uid(proc, 42, &uid), 0);
		ck_assert_uint_eq(uid, 8);
		/* stat must be whole. */
		snprintf(big, sizeof(big), "42 (%0*d) S\n", 8192, 0);
		write_file(dir, "stat", big);
		ck_assert_int_eq(seg_proc_start_time(proc, 42, &t), -EFBIG);
	}
	write_file(dir, "status", "Uid:\t1000 2000\t3000\t4000\n");
	ck_assert_int_eq(seg_proc_uid(proc, 42, &uid), -EBADMSG);
	write_file(dir, "status", "Uid:\t1000\t\t3000\t4000\n");
	ck_assert_int_eq(seg_proc_uid(proc, 42, &uid), -EBADMSG);
}
END_TEST

START_TEST(test_to_string)
{
	ck_assert_str_eq(seg_kind_to_string(ELIDE_SEG_KIND_MUTEX), "mutex");
	ck_assert_str_eq(seg_kind_to_string(5), "?");
	ck_assert_str_eq(seg_state_to_string(ELIDE_SEG_STATE_ELIDING), "eliding");
	ck_assert_str_eq(seg_state_to_string(4), "?");
	ck_assert_str_eq(seg_reason_to_string(ELIDE_SEG_REASON_ABORTS), "aborts");
	ck_assert_str_eq(seg_reason_to_string(ELIDE_SEG_NREASONS), "?");
	ck_assert_str_eq(seg_reason_to_string(UINT32_MAX), "?");
	ck_assert_str_eq(seg_mode_to_string(ELIDE_SEG_MODE_ADAPTIVE), "adaptive");
	ck_assert_str_eq(seg_mode_to_string(ELIDE_SEG_MODE_WATCH), "watch");
	ck_assert_str_eq(seg_mode_to_string(5), "?");
	ck_assert_str_eq(seg_source_to_string(ELIDE_SEG_SOURCE_NONE), "");
	ck_assert_str_eq(seg_source_to_string(ELIDE_SEG_SOURCE_ADAPTATION), "adaptation");
	ck_assert_str_eq(seg_source_to_string(ELIDE_SEG_SOURCE_LEARNED), "learned");
	ck_assert_str_eq(seg_source_to_string(ELIDE_SEG_SOURCE_LEARNED + 1), "?");
	for (uint32_t i = 0; i < ELIDE_SEG_NREASONS; i++)
		ck_assert_str_ne(seg_reason_to_string(i), "?");
}
END_TEST

/* ---- mapped reads ------------------------------------------------------ */

static struct seg_map *map_ok(const char *name)
{
	struct seg_map *m = NULL;
	char err[SEG_ERR_MAX] = "";
	int r;

	r = seg_map_open(dfd, name, &m, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: %d (%s): %s", name, r, strerror(-r), err);
	ck_assert_ptr_nonnull(m);
	return m;
}

static struct seg_snapshot *map_read_ok(struct seg_map *m, unsigned flags)
{
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX] = "";
	int r;

	r = seg_map_read_each(m, dfd, flags, UINT32_MAX, 0, NULL, NULL, &snap, err, sizeof(err));
	ck_assert_msg(r == 0, "%d (%s): %s", r, strerror(-r), err);
	ck_assert_ptr_nonnull(snap);
	return snap;
}

/* Reading m (mapped from `name`) fails with `expect`, naming the file and `what`. */
static void map_read_fails(struct seg_map *m, const char *name, seg_lock_fn each, void *userdata, int expect,
			   const char *what)
{
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX] = "";
	int r;

	r = seg_map_read_each(m, dfd, 0, UINT32_MAX, 0, each, userdata, &snap, err, sizeof(err));
	ck_assert_msg(r == expect, "got %d (%s), expected %d; err=\"%s\"", r, r < 0 ? strerror(-r) : "ok", expect,
		      err);
	ck_assert_ptr_null(snap);
	ck_assert_msg(strncmp(err, name, strlen(name)) == 0, "err \"%s\" does not start with %s", err, name);
	ck_assert_msg(strstr(err, what), "err \"%s\" does not mention \"%s\"", err, what);
}

START_TEST(test_map_reads_like_pread)
{
	WITH_SEG(s, 64, 40);
	struct seg_snapshot *a, *b;
	struct seg_map *m;

	seg_write(&s);
	m = map_ok(s.name);
	a = read_ok(s.name, SEG_READ_CHECK_PROCESS);
	b = map_read_ok(m, SEG_READ_CHECK_PROCESS);
	ck_assert_mem_eq(&a->header, &b->header, sizeof(a->header));
	ck_assert_mem_eq(&a->control, &b->control, sizeof(a->control));
	ck_assert_uint_eq(a->nlocks, 41);
	ck_assert_uint_eq(b->nlocks, a->nlocks);
	ck_assert_mem_eq(a->locks, b->locks, a->nlocks * sizeof(*a->locks));
	seg_snapshot_free(b);

	/* Hot only, mapped or not: the first two cache lines, zeros after. */
	for (int mapped = 0; mapped < 2; mapped++) {
		struct seg_snapshot *hot = NULL;
		char err[SEG_ERR_MAX] = "";

		if (mapped)
			ck_assert_int_eq(seg_map_read_each(m, dfd, SEG_READ_HOT_ONLY, UINT32_MAX, 0, NULL, NULL, &hot, err,
							   sizeof(err)), 0);
		else
			ck_assert_int_eq(seg_read_each(dfd, s.name, SEG_READ_HOT_ONLY, UINT32_MAX, 0, NULL, NULL, &hot, err,
						       sizeof(err)), 0);
		ck_assert_uint_eq(hot->nlocks, a->nlocks);
		for (uint32_t i = 0; i < hot->nlocks; i++) {
			static const char zeros[sizeof(struct elide_seg_lock) - ELIDE_SEG_LOCK_HOT_SIZE];

			ck_assert_uint_eq(hot->locks[i].index, a->locks[i].index);
			ck_assert_mem_eq(&hot->locks[i].lock, &a->locks[i].lock, ELIDE_SEG_LOCK_HOT_SIZE);
			ck_assert_mem_eq((const char *)&hot->locks[i].lock + ELIDE_SEG_LOCK_HOT_SIZE, zeros,
					 sizeof(zeros));
		}
		seg_snapshot_free(hot);
	}

	/* The owner rewrites a counter in place: the next read sees it. */
	ent(&s, 7)->stats[ELIDE_SEG_STAT_COMMITS] = 987654321;
	seg_write(&s);
	b = map_read_ok(m, 0);
	ck_assert_uint_eq(b->locks[6].index, 7);
	ck_assert_uint_eq(b->locks[6].lock.stats[ELIDE_SEG_STAT_COMMITS], 987654321);
	seg_snapshot_free(a);
	seg_snapshot_free(b);
	seg_map_close(m);
	seg_done(&s);
}
END_TEST

START_TEST(test_map_replaced_and_resized)
{
	WITH_SEG(s, 16, 4);
	struct seg_snapshot *snap;
	struct seg_map *m;
	char tmp[80];

	seg_write(&s);
	m = map_ok(s.name);

	/* An exec'd image publishes a new file under the same name. */
	hdr(&s)->created_ns = 42;
	snprintf(tmp, sizeof(tmp), "%s.new", s.name);
	{
		int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, s.buf, s.size, 0), (ssize_t)s.size);
		close(fd);
	}
	ck_assert_int_eq(renameat(dfd, tmp, dfd, s.name), 0);
	map_read_fails(m, s.name, NULL, NULL, -ESTALE, "replaced by another file");
	seg_map_close(m);
	m = map_ok(s.name);
	snap = map_read_ok(m, 0);
	ck_assert_uint_eq(snap->header.created_ns, 42);
	seg_snapshot_free(snap);

	/* Grown or shrunk since it was mapped. */
	seg_truncate(s.name, (off_t)s.size + 4096);
	map_read_fails(m, s.name, NULL, NULL, -EBADMSG, "changed size");
	seg_truncate(s.name, (off_t)s.size - 256);
	map_read_fails(m, s.name, NULL, NULL, -EBADMSG, "changed size");

	/* Gone: the process exited. */
	ck_assert_int_eq(unlinkat(dfd, s.name, 0), 0);
	map_read_fails(m, s.name, NULL, NULL, -ENOENT, "cannot stat");
	seg_map_close(m);
	seg_done(&s);
}
END_TEST

/* SEG_READ_MAP_NO_STAT trusts the mapping: a file put under the name is
 * not seen (the caller learns of it from inotify), a truncation is. */
START_TEST(test_map_no_stat)
{
	WITH_SEG(s, 16, 4);
	struct seg_snapshot *snap = NULL;
	struct seg_map *m;
	char err[SEG_ERR_MAX] = "", tmp[80];
	int fd;

	seg_write(&s);
	m = map_ok(s.name);
	hdr(&s)->created_ns = 4242;
	snprintf(tmp, sizeof(tmp), "%s.new", s.name);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, s.buf, s.size, 0), (ssize_t)s.size);
	close(fd);
	ck_assert_int_eq(renameat(dfd, tmp, dfd, s.name), 0);

	/* The mapped file, as it was: no stat, no -ESTALE. */
	snap = map_read_ok(m, SEG_READ_MAP_NO_STAT);
	ck_assert_uint_ne(snap->header.created_ns, 4242);
	ck_assert_uint_eq(snap->nlocks, 5);
	seg_snapshot_free(snap);
	/* Without the flag the name is checked. */
	map_read_fails(m, s.name, NULL, NULL, -ESTALE, "replaced by another file");
	seg_map_close(m);

	/* Truncated under a trusting read: still a clean failure. */
	m = map_ok(s.name);
	seg_truncate(s.name, 0);
	snap = NULL;
	ck_assert_int_eq(seg_map_read_each(m, dfd, SEG_READ_MAP_NO_STAT, UINT32_MAX, 0, NULL, NULL, &snap, err,
					   sizeof(err)), -EBADMSG);
	ck_assert_ptr_null(snap);
	ck_assert_msg(strstr(err, "truncated while being read"), "err \"%s\"", err);
	seg_map_close(m);
	seg_done(&s);
}
END_TEST

/* The file's dirty words now, as elided would find them. */
static void dirty_words(const char *name, uint64_t words[ELIDE_SEG_DIRTY_ENTRIES / 64])
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, words, ELIDE_SEG_DIRTY_ENTRIES / 8, ELIDE_SEG_DIRTY_OFFSET),
			 ELIDE_SEG_DIRTY_ENTRIES / 8);
	close(fd);
}

/* Mark entry i written, as libelide's rec_touch() does, into the file. */
static void mark(const char *name, uint32_t i)
{
	uint64_t words[ELIDE_SEG_DIRTY_ENTRIES / 64];
	int fd;

	dirty_words(name, words);
	words[i / 64] |= UINT64_C(1) << (i % 64);
	fd = openat(dfd, name, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, words, sizeof(words), ELIDE_SEG_DIRTY_OFFSET), (ssize_t)sizeof(words));
	close(fd);
}

/* No marks on entries [0, 256): the test segments' capacity. */
static bool no_marks(const char *name)
{
	uint64_t words[ELIDE_SEG_DIRTY_ENTRIES / 64];

	dirty_words(name, words);
	for (unsigned w = 0; w < 256 / 64; w++)
		if (words[w])
			return false;
	return true;
}

/* SEG_READ_DIRTY_ONLY: the marked entries, in index order, and the marks
 * taken; every read through the mapping takes them; a writer that keeps
 * none is read whole. */
/* One look at a mapped segment: what elided's quiet pass relies on. */
START_TEST(test_map_peek)
{
	WITH_SEG(s, 256, 200);
	struct seg_snapshot *snap;
	struct seg_peek last, now;
	struct seg_map *m;

	hdr(&s)->features = ELIDE_SEG_FEATURE_DIRTY;
	hdr(&s)->publish_ns = 1000;
	seg_write(&s);
	m = map_ok(s.name);
	snap = map_read_ok(m, SEG_READ_DIRTY_ONLY | SEG_READ_HOT_ONLY);
	seg_peek_of(snap, &last);
	seg_snapshot_free(snap);
	ck_assert(!last.marked);
	ck_assert_uint_eq(last.publish_ns, 1000);

	/* Nothing written since: quiet. */
	ck_assert_int_eq(seg_map_peek(m, &now), 0);
	ck_assert(!now.marked);
	ck_assert(!seg_peek_changed(&now, &last));
	ck_assert_uint_eq(now.lock_high_water, last.lock_high_water);

	/* A mark is seen, and left for the read to take. */
	mark(s.name, 130);
	ck_assert_int_eq(seg_map_peek(m, &now), 0);
	ck_assert(now.marked);
	ck_assert(!seg_peek_changed(&now, &last));
	ck_assert(!no_marks(s.name));
	snap = map_read_ok(m, SEG_READ_DIRTY_ONLY | SEG_READ_HOT_ONLY);
	ck_assert_uint_eq(snap->nlocks, 1);
	seg_snapshot_free(snap);
	ck_assert_int_eq(seg_map_peek(m, &now), 0);
	ck_assert(!now.marked);

	/* Marks past the table are not looked at (the read ignores them too). */
	mark(s.name, 4000);
	ck_assert_int_eq(seg_map_peek(m, &now), 0);
	ck_assert(!now.marked);

	/* A new status, a new lock table extent, another mode: changed. */
	hdr(&s)->publish_ns = 2000;
	seg_write(&s);
	ck_assert_int_eq(seg_map_peek(m, &now), 0);
	ck_assert(seg_peek_changed(&now, &last));
	hdr(&s)->publish_ns = 1000;
	hdr(&s)->lock_high_water++;
	seg_write(&s);
	ck_assert_int_eq(seg_map_peek(m, &now), 0);
	ck_assert(seg_peek_changed(&now, &last));
	hdr(&s)->lock_high_water--;
	hdr(&s)->mode = ELIDE_SEG_MODE_OFF;
	seg_write(&s);
	ck_assert_int_eq(seg_map_peek(m, &now), 0);
	ck_assert(seg_peek_changed(&now, &last));

	/* Truncated under the look: an error, no crash. */
	seg_truncate(s.name, 0);
	ck_assert_int_eq(seg_map_peek(m, &now), -EBADMSG);
	seg_map_close(m);
	seg_done(&s);
}
END_TEST

START_TEST(test_map_dirty_marks)
{
	WITH_SEG(s, 256, 200);
	struct seg_snapshot *snap;
	struct seg_map *m;

	hdr(&s)->features = ELIDE_SEG_FEATURE_DIRTY;
	seg_write(&s);
	m = map_ok(s.name);
	snap = map_read_ok(m, SEG_READ_DIRTY_ONLY | SEG_READ_HOT_ONLY);
	ck_assert(snap->dirty_only);
	ck_assert_uint_eq(snap->nlocks, 0);
	ck_assert(seg_map_tracks_dirty(m, snap));
	seg_snapshot_free(snap);

	/* Three entries in three words, and the overflow entry. */
	mark(s.name, 130);
	mark(s.name, 5);
	mark(s.name, 70);
	mark(s.name, 1);
	ent(&s, 70)->stats[ELIDE_SEG_STAT_ACQUIRED] = 777; /* through the file: the mapping sees it */
	{
		int fd = openat(dfd, s.name, O_WRONLY | O_CLOEXEC);
		size_t off = LOCKS_OFFSET + 70 * sizeof(struct elide_seg_lock);

		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, s.buf + off, sizeof(struct elide_seg_lock), (off_t)off),
				 (ssize_t)sizeof(struct elide_seg_lock));
		close(fd);
	}
	snap = map_read_ok(m, SEG_READ_DIRTY_ONLY | SEG_READ_HOT_ONLY);
	ck_assert(snap->dirty_only);
	ck_assert_uint_eq(snap->nlocks, 4);
	ck_assert_uint_eq(snap->locks[0].index, 1);
	ck_assert_uint_eq(snap->locks[1].index, 5);
	ck_assert_uint_eq(snap->locks[2].index, 70);
	ck_assert_uint_eq(snap->locks[2].lock.stats[ELIDE_SEG_STAT_ACQUIRED], 777);
	ck_assert_uint_eq(snap->locks[3].index, 130);
	ck_assert_uint_eq(snap->nmarked_free, 0);
	seg_snapshot_free(snap);
	ck_assert(no_marks(s.name));

	/* Half of them marked: the sequential walk, the same answer. */
	for (uint32_t i = 2; i < 202; i += 2)
		mark(s.name, i);
	snap = map_read_ok(m, SEG_READ_DIRTY_ONLY | SEG_READ_HOT_ONLY);
	ck_assert(snap->dirty_only);
	ck_assert_uint_eq(snap->nlocks, 100);
	for (uint32_t i = 0; i < 100; i++)
		ck_assert_uint_eq(snap->locks[i].index, 2 + 2 * i);
	seg_snapshot_free(snap);
	ck_assert(no_marks(s.name));

	/* Taken: nothing the next time. */
	snap = map_read_ok(m, SEG_READ_DIRTY_ONLY);
	ck_assert(snap->dirty_only);
	ck_assert_uint_eq(snap->nlocks, 0);
	seg_snapshot_free(snap);

	/* A destroyed lock is counted, not returned; marks past the table
	 * (a hostile writer) are left alone and ignored. */
	mark(s.name, 9);
	mark(s.name, 4000);
	{
		uint32_t zero = ELIDE_SEG_KIND_FREE;
		int fd = openat(dfd, s.name, O_WRONLY | O_CLOEXEC);

		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, &zero, sizeof(zero), LOCKS_OFFSET + 9 * sizeof(struct elide_seg_lock)),
				 (ssize_t)sizeof(zero));
		close(fd);
	}
	snap = map_read_ok(m, SEG_READ_DIRTY_ONLY);
	ck_assert_uint_eq(snap->nlocks, 0);
	ck_assert_uint_eq(snap->nmarked_free, 1);
	seg_snapshot_free(snap);
	{
		uint64_t words[ELIDE_SEG_DIRTY_ENTRIES / 64];

		dirty_words(s.name, words);
		ck_assert_uint_eq(words[4000 / 64], UINT64_C(1) << (4000 % 64));
	}

	/* A whole read takes the marks too. */
	mark(s.name, 100);
	snap = map_read_ok(m, 0);
	ck_assert(!snap->dirty_only);
	ck_assert_uint_eq(snap->nlocks, 200);
	seg_snapshot_free(snap);
	ck_assert(no_marks(s.name));

	/* A pread read leaves them to elided's mapping (elidectl, D-Bus calls). */
	mark(s.name, 100);
	snap = read_ok(s.name, 0);
	ck_assert_uint_eq(snap->nlocks, 200);
	seg_snapshot_free(snap);
	ck_assert(!no_marks(s.name));

	/* A writer without the feature (an older libelide): read whole. */
	hdr(&s)->features = 0;
	seg_write(&s);
	snap = map_read_ok(m, SEG_READ_DIRTY_ONLY);
	ck_assert(!snap->dirty_only);
	ck_assert(!seg_map_tracks_dirty(m, snap));
	ck_assert_uint_eq(snap->nlocks, 201);
	seg_snapshot_free(snap);

	/* Truncated under a marked read: a clean failure, no crash. */
	hdr(&s)->features = ELIDE_SEG_FEATURE_DIRTY;
	seg_write(&s);
	mark(s.name, 5);
	seg_truncate(s.name, 0);
	{
		char err[SEG_ERR_MAX] = "";

		snap = NULL;
		ck_assert_int_eq(seg_map_read_each(m, dfd, SEG_READ_DIRTY_ONLY | SEG_READ_MAP_NO_STAT, UINT32_MAX, 0,
						   NULL, NULL, &snap, err, sizeof(err)), -EBADMSG);
		ck_assert_ptr_null(snap);
		ck_assert_msg(strstr(err, "truncated while being read"), "err \"%s\"", err);
	}
	seg_map_close(m);
	seg_done(&s);
}
END_TEST

struct truncator {
	const char *name;
	uint32_t at_index;
	unsigned seen;
};

/* The owner truncates its file while elided reads it. */
static int truncate_midway(uint32_t index, const struct elide_seg_lock *lock, void *userdata)
{
	struct truncator *t = userdata;

	(void)lock;
	t->seen++;
	if (index == t->at_index)
		seg_truncate(t->name, LOCKS_OFFSET);
	return 0;
}

START_TEST(test_map_truncated_while_reading)
{
	WITH_SEG(s, 256, 200);
	struct truncator t = { .name = s.name, .at_index = 10 };
	struct seg_snapshot *snap;
	struct seg_map *m;

	seg_write(&s);
	m = map_ok(s.name);
	/* Entries past the new end fault: the read fails, we live on. */
	map_read_fails(m, s.name, truncate_midway, &t, -EBADMSG, "truncated while being read");
	ck_assert_uint_ge(t.seen, 10);
	seg_map_close(m);

	/* Written whole again and mapped afresh, it reads as before. */
	seg_write(&s);
	m = map_ok(s.name);
	snap = map_read_ok(m, 0);
	ck_assert_uint_eq(snap->nlocks, 201);
	seg_snapshot_free(snap);
	seg_map_close(m);
	seg_done(&s);
}
END_TEST

/* A SIGBUS that is not a segment read stays what it was: fatal. */
START_TEST(test_map_other_sigbus_fatal)
{
	WITH_SEG(s, 16, 4);
	struct seg_map *m;
	int status;
	pid_t child;

	seg_write(&s);
	m = map_ok(s.name); /* installs the handler */
#if defined(__SANITIZE_ADDRESS__)
	fprintf(stderr, "test_map_other_sigbus_fatal: the child's SIGBUS report below is expected\n");
#endif
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		int fd = openat(dfd, s.name, O_RDWR | O_CLOEXEC);
		volatile const char *p;

		if (fd < 0)
			_exit(2);
		p = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED || ftruncate(fd, 0) < 0)
			_exit(3);
		(void)p[4096];
		_exit(0);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
#if defined(__SANITIZE_ADDRESS__)
	/* AddressSanitizer's own SIGBUS handler reports and exits. */
	ck_assert(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) < 2));
#else
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS, "child status 0x%x", status);
#endif
	seg_map_close(m);
	seg_done(&s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("segment-reader");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_valid);
	tcase_add_test(tc, test_valid_check_process);
	tcase_add_test(tc, test_empty_table);
	tcase_add_test(tc, test_max_capacity);
	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_bad_header_fields);
	tcase_add_test(tc, test_bad_magic_and_identity);
	tcase_add_test(tc, test_strings_without_nul);
	tcase_add_test(tc, test_bad_entries_skipped);
	tcase_add_test(tc, test_bad_entry_explained);
	tcase_add_test(tc, test_each_bad_entries_no_table);
	tcase_add_test(tc, test_stale);
	tcase_add_test(tc, test_owner);
	tcase_add_test(tc, test_not_regular);
	tcase_add_test(tc, test_parse_name);
	tcase_add_test(tc, test_write_control);
	tcase_add_test(tc, test_write_lock_policy);
	tcase_add_test(tc, test_proc);
	tcase_add_test(tc, test_to_string);
	tcase_add_test(tc, test_map_reads_like_pread);
	tcase_add_test(tc, test_map_replaced_and_resized);
	tcase_add_test(tc, test_map_no_stat);
	tcase_add_test(tc, test_map_dirty_marks);
	tcase_add_test(tc, test_map_peek);
	tcase_add_test(tc, test_map_truncated_while_reading);
	tcase_add_test(tc, test_map_other_sigbus_fatal);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
