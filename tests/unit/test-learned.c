/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* elided's learned-policy store: entries, caps, the file, its corruption and crash safety. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "learned.h"

#define NAME "learned"

/* ---- helpers ------------------------------------------------------------- */

struct tmpdir {
	char path[256];
	int fd;
};

static void tmpdir_make(struct tmpdir *t)
{
	const char *base = getenv("TMPDIR");

	snprintf(t->path, sizeof(t->path), "%s/test-learned-XXXXXX", base && *base ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(t->path));
	t->fd = open(t->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(t->fd, 0);
}

/* Names in the directory other than . and .., up to max, sorted; returns how many. */
static size_t tmpdir_list(const struct tmpdir *t, char names[][256], size_t max)
{
	DIR *d = opendir(t->path);
	struct dirent *e;
	size_t n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n < max)
			snprintf(names[n], 256, "%s", e->d_name);
		n++;
	}
	closedir(d);
	qsort(names, n < max ? n : max, 256, (int (*)(const void *, const void *))strcmp);
	return n;
}

static void tmpdir_remove(struct tmpdir *t)
{
	char names[64][256];
	size_t n = tmpdir_list(t, names, 64);

	ck_assert_uint_le(n, 64);
	for (size_t i = 0; i < n; i++)
		if (unlinkat(t->fd, names[i], 0) < 0)
			ck_assert_int_eq(unlinkat(t->fd, names[i], AT_REMOVEDIR), 0);
	close(t->fd);
	ck_assert_int_eq(rmdir(t->path), 0);
}

static void write_file(int dirfd, const char *name, const char *data, size_t len)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* The file's contents, NUL-terminated (caller frees); *len its size. */
static char *read_file(int dirfd, const char *name, size_t *len)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *buf;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
	buf[st.st_size] = '\0';
	*len = (size_t)st.st_size;
	close(fd);
	return buf;
}

/* Distinct values for every field, derived from seed. */
static struct learned_entry vals(uint64_t seed, enum learned_verdict verdict)
{
	struct learned_entry e = {
		.verdict = verdict,
		.runs = (uint32_t)(seed * 7 + 1),
		.acquired = seed * 1000 + 1,
		.attempts = seed * 1000 + 2,
		.commits = seed * 1000 + 3,
	};

	for (int c = 0; c < LEARNED_ABORT_CAUSES; c++)
		e.aborts[c] = seed * 100 + (uint64_t)c;
	return e;
}

static void entry_eq(const struct learned_entry *a, const struct learned_entry *b)
{
	ck_assert_int_eq(a->verdict, b->verdict);
	ck_assert_uint_eq(a->runs, b->runs);
	ck_assert_uint_eq(a->acquired, b->acquired);
	ck_assert_uint_eq(a->attempts, b->attempts);
	ck_assert_uint_eq(a->commits, b->commits);
	for (int c = 0; c < LEARNED_ABORT_CAUSES; c++)
		ck_assert_uint_eq(a->aborts[c], b->aborts[c]);
	ck_assert_int_eq(a->first_learned, b->first_learned);
	ck_assert_int_eq(a->last_updated, b->last_updated);
}

/* Counters only (what put takes from its values). */
static void counters_eq(const struct learned_entry *a, const struct learned_entry *b)
{
	struct learned_entry x = *a, y = *b;

	x.first_learned = y.first_learned = 0;
	x.last_updated = y.last_updated = 0;
	entry_eq(&x, &y);
}

static bool same_entry(const struct learned_entry *a, const struct learned_entry *b)
{
	return a->verdict == b->verdict && a->runs == b->runs && a->acquired == b->acquired &&
	       a->attempts == b->attempts && a->commits == b->commits && !memcmp(a->aborts, b->aborts, sizeof(a->aborts)) &&
	       a->first_learned == b->first_learned && a->last_updated == b->last_updated;
}

static int differs_from(uid_t uid, const char *program, const char *lock, const struct learned_entry *e, void *other)
{
	const struct learned_entry *o = learned_store_find(other, uid, program, lock);

	return !o || !same_entry(e, o);
}

/* Same keys, every field equal. */
static bool stores_equal(const struct learned_store *a, const struct learned_store *b)
{
	return learned_store_count(a) == learned_store_count(b) &&
	       learned_store_foreach(a, differs_from, (void *)b) == 0;
}

static struct learned_store *store_new(size_t per_uid, size_t total)
{
	struct learned_store *s = NULL;

	ck_assert_int_eq(learned_store_new(per_uid, total, &s), 0);
	ck_assert_ptr_nonnull(s);
	return s;
}

static void put_ok(struct learned_store *s, uid_t uid, const char *program, const char *lock, uint64_t seed,
		   int64_t now)
{
	struct learned_entry v = vals(seed, seed % 2 ? LEARNED_ELIDES : LEARNED_NEVER);

	ck_assert_int_eq(learned_store_put(s, uid, program, lock, &v, now), 0);
}

/* ---- entries ------------------------------------------------------------- */

START_TEST(test_new_refuses_bad_caps)
{
	struct learned_store *s = NULL;

	ck_assert_int_eq(learned_store_new(0, 10, &s), -EINVAL);
	ck_assert_int_eq(learned_store_new(11, 10, &s), -EINVAL);
	ck_assert_int_eq(learned_store_new(1, LEARNED_TOTAL_CAP_MAX + 1, &s), -EINVAL);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(learned_store_new(LEARNED_PER_UID_CAP_DEFAULT, LEARNED_TOTAL_CAP_DEFAULT, &s), 0);
	ck_assert_uint_eq(learned_store_count(s), 0);
	learned_store_free(s);
	learned_store_free(NULL);
}
END_TEST

START_TEST(test_put_find_replace)
{
	struct learned_store *s = store_new(16, 64);
	struct learned_entry v = vals(3, LEARNED_NEVER), w = vals(4, LEARNED_NEVER), x = vals(5, LEARNED_ELIDES);
	const struct learned_entry *got;
	char program[] = "build-id:3f2a", lock[] = "table_lock";

	ck_assert_int_eq(learned_store_put(s, 1000, program, lock, &v, 100), 0);
	/* Copied: changing the caller's strings changes nothing. */
	program[0] = 'X';
	lock[0] = 'X';
	ck_assert_ptr_null(learned_store_find(s, 1000, program, lock));
	got = learned_store_find(s, 1000, "build-id:3f2a", "table_lock");
	ck_assert_ptr_nonnull(got);
	counters_eq(got, &v);
	ck_assert_int_eq(got->first_learned, 100);
	ck_assert_int_eq(got->last_updated, 100);
	/* Every part of the key matters. */
	ck_assert_ptr_null(learned_store_find(s, 1001, "build-id:3f2a", "table_lock"));
	ck_assert_ptr_null(learned_store_find(s, 1000, "build-id:3f2b", "table_lock"));
	ck_assert_ptr_null(learned_store_find(s, 1000, "build-id:3f2a", "table_lock2"));
	ck_assert_ptr_null(learned_store_find(s, 1000, "build-id:3f2a", NULL));

	/* Same verdict: replaced, one entry, keeps its age. */
	ck_assert_int_eq(learned_store_put(s, 1000, "build-id:3f2a", "table_lock", &w, 200), 0);
	ck_assert_uint_eq(learned_store_count(s), 1);
	got = learned_store_find(s, 1000, "build-id:3f2a", "table_lock");
	counters_eq(got, &w);
	ck_assert_int_eq(got->first_learned, 100);
	ck_assert_int_eq(got->last_updated, 200);
	/* The clock went back: first_learned never after last_updated. */
	ck_assert_int_eq(learned_store_put(s, 1000, "build-id:3f2a", "table_lock", &w, 50), 0);
	got = learned_store_find(s, 1000, "build-id:3f2a", "table_lock");
	ck_assert_int_eq(got->first_learned, 50);
	ck_assert_int_eq(got->last_updated, 50);
	/* A changed verdict starts its age anew. */
	ck_assert_int_eq(learned_store_put(s, 1000, "build-id:3f2a", "table_lock", &x, 300), 0);
	got = learned_store_find(s, 1000, "build-id:3f2a", "table_lock");
	counters_eq(got, &x);
	ck_assert_int_eq(got->first_learned, 300);
	ck_assert_int_eq(got->last_updated, 300);
	ck_assert_uint_eq(learned_store_count(s), 1);
	learned_store_free(s);
}
END_TEST

START_TEST(test_put_refuses)
{
	struct learned_store *s = store_new(16, 64);
	struct learned_entry v = vals(1, LEARNED_NEVER), bad = v;
	char *long_str = malloc(LEARNED_STR_MAX + 2);

	ck_assert_ptr_nonnull(long_str);
	memset(long_str, 'a', LEARNED_STR_MAX + 1);
	long_str[LEARNED_STR_MAX + 1] = '\0';
	ck_assert_int_eq(learned_store_put(s, LEARNED_ANY_UID, "p", "l", &v, 1), -EINVAL);
	ck_assert_int_eq(learned_store_put(s, 1, NULL, "l", &v, 1), -EINVAL);
	ck_assert_int_eq(learned_store_put(s, 1, "p", NULL, &v, 1), -EINVAL);
	ck_assert_int_eq(learned_store_put(s, 1, "", "l", &v, 1), -EINVAL);
	ck_assert_int_eq(learned_store_put(s, 1, "p", "", &v, 1), -EINVAL);
	ck_assert_int_eq(learned_store_put(s, 1, long_str, "l", &v, 1), -EINVAL);
	ck_assert_int_eq(learned_store_put(s, 1, "p", long_str, &v, 1), -EINVAL);
	ck_assert_int_eq(learned_store_put(s, 1, "p", "l", NULL, 1), -EINVAL);
	ck_assert_int_eq(learned_store_put(s, 1, "p", "l", &v, -1), -EINVAL);
	bad.verdict = (enum learned_verdict)7;
	ck_assert_int_eq(learned_store_put(s, 1, "p", "l", &bad, 1), -EINVAL);
	ck_assert_uint_eq(learned_store_count(s), 0);
	/* The longest string is fine. */
	long_str[LEARNED_STR_MAX] = '\0';
	ck_assert_int_eq(learned_store_put(s, 1, long_str, long_str, &v, 1), 0);
	ck_assert_uint_eq(learned_store_count(s), 1);
	free(long_str);
	learned_store_free(s);
}
END_TEST

START_TEST(test_forget)
{
	struct learned_store *s = store_new(16, 64);
	static const uid_t uids[] = { 1000, 1001 };
	static const char *const programs[] = { "prog-a", "prog-b" };
	static const char *const locks[] = { "l1", "l2", "l3" };

	for (int round = 0; round < 4; round++) {
		for (size_t u = 0; u < 2; u++)
			for (size_t p = 0; p < 2; p++)
				for (size_t l = 0; l < 3; l++)
					put_ok(s, uids[u], programs[p], locks[l], u * 6 + p * 3 + l, 10);
		ck_assert_uint_eq(learned_store_count(s), 12);
		switch (round) {
		case 0: /* by uid and program */
			ck_assert_uint_eq(learned_store_forget(s, 1000, "prog-a"), 3);
			ck_assert_uint_eq(learned_store_forget(s, 1000, "prog-a"), 0);
			ck_assert_ptr_null(learned_store_find(s, 1000, "prog-a", "l2"));
			ck_assert_ptr_nonnull(learned_store_find(s, 1000, "prog-b", "l2"));
			ck_assert_ptr_nonnull(learned_store_find(s, 1001, "prog-a", "l2"));
			ck_assert_uint_eq(learned_store_count(s), 9);
			break;
		case 1: /* by uid */
			ck_assert_uint_eq(learned_store_forget(s, 1001, NULL), 6);
			ck_assert_uint_eq(learned_store_uid_count(s, 1001), 0);
			ck_assert_uint_eq(learned_store_uid_count(s, 1000), 6);
			break;
		case 2: /* by program, any uid */
			ck_assert_uint_eq(learned_store_forget(s, LEARNED_ANY_UID, "prog-b"), 6);
			ck_assert_ptr_null(learned_store_find(s, 1000, "prog-b", "l1"));
			ck_assert_ptr_null(learned_store_find(s, 1001, "prog-b", "l3"));
			ck_assert_ptr_nonnull(learned_store_find(s, 1001, "prog-a", "l3"));
			ck_assert_uint_eq(learned_store_count(s), 6);
			/* An unknown program or uid: nothing. */
			ck_assert_uint_eq(learned_store_forget(s, LEARNED_ANY_UID, "prog-c"), 0);
			ck_assert_uint_eq(learned_store_forget(s, 4242, NULL), 0);
			break;
		case 3: /* everything */
			ck_assert_uint_eq(learned_store_forget(s, LEARNED_ANY_UID, NULL), 12);
			ck_assert_uint_eq(learned_store_count(s), 0);
			break;
		}
		learned_store_forget(s, LEARNED_ANY_UID, NULL);
	}
	learned_store_free(s);
}
END_TEST

struct walk {
	uid_t uids[8];
	char programs[8][16];
	size_t n, stop_at;
};

static int walk_cb(uid_t uid, const char *program, const char *lock, const struct learned_entry *e, void *userdata)
{
	struct walk *w = userdata;

	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_nonnull(lock);
	if (w->n == w->stop_at)
		return 42;
	w->uids[w->n] = uid;
	snprintf(w->programs[w->n], sizeof(w->programs[0]), "%s", program);
	w->n++;
	return 0;
}

START_TEST(test_foreach_order)
{
	struct learned_store *s = store_new(16, 64);
	struct walk w = { .stop_at = SIZE_MAX };

	put_ok(s, 10, "b", "l", 1, 1);
	put_ok(s, 2, "b", "l", 2, 1);
	put_ok(s, 10, "a", "l", 3, 1);
	put_ok(s, 2, "\xff", "l", 4, 1);
	put_ok(s, 2, "a", "l", 5, 1);
	ck_assert_int_eq(learned_store_foreach(s, walk_cb, &w), 0);
	ck_assert_uint_eq(w.n, 5);
	/* uid numerically (2 before 10), then the program bytewise (0xff last). */
	ck_assert_uint_eq(w.uids[0], 2);
	ck_assert_str_eq(w.programs[0], "a");
	ck_assert_str_eq(w.programs[1], "b");
	ck_assert_str_eq(w.programs[2], "\xff");
	ck_assert_uint_eq(w.uids[3], 10);
	ck_assert_str_eq(w.programs[3], "a");
	ck_assert_str_eq(w.programs[4], "b");
	/* A nonzero return stops the walk and is returned. */
	w = (struct walk){ .stop_at = 2 };
	ck_assert_int_eq(learned_store_foreach(s, walk_cb, &w), 42);
	ck_assert_uint_eq(w.n, 2);
	learned_store_free(s);
}
END_TEST

/* ---- caps ---------------------------------------------------------------- */

static const char *lk(unsigned i)
{
	static char buf[32];

	snprintf(buf, sizeof(buf), "lock-%u", i);
	return buf;
}

/* A "never" holds 60 s after its last confirming run, doubling per run up
 * to 17 h; "elides" always holds; a LAST near the end of time saturates. */
START_TEST(test_probe_hold)
{
	struct learned_entry e = { .verdict = LEARNED_NEVER, .runs = 1, .last_updated = 1000 };

	ck_assert_int_eq(learned_entry_probe_at(&e), 1060);
	ck_assert(learned_entry_holds(&e, 1059));
	ck_assert(!learned_entry_holds(&e, 1060));
	e.runs = 0;
	ck_assert_int_eq(learned_entry_probe_at(&e), 1060);
	e.runs = 2;
	ck_assert_int_eq(learned_entry_probe_at(&e), 1120);
	e.runs = 11;
	ck_assert_int_eq(learned_entry_probe_at(&e), 1000 + 60 * 1024);
	e.runs = UINT32_MAX;
	ck_assert_int_eq(learned_entry_probe_at(&e), 1000 + 60 * 1024);
	e.last_updated = INT64_MAX - 5;
	ck_assert_int_eq(learned_entry_probe_at(&e), INT64_MAX);
	ck_assert(learned_entry_holds(&e, INT64_MAX - 1));
	e.verdict = LEARNED_ELIDES;
	e.last_updated = 1000;
	ck_assert_int_eq(learned_entry_probe_at(&e), 0);
	ck_assert(learned_entry_holds(&e, INT64_MAX));
}
END_TEST

START_TEST(test_per_uid_cap_evicts_own_oldest)
{
	struct learned_store *s = store_new(4, 100);

	put_ok(s, 7, "p", "x", 99, 1);                 /* another uid, older than all */
	for (unsigned i = 0; i < 4; i++)
		put_ok(s, 1000, "p", lk(i), i, 10 + i);
	ck_assert_uint_eq(learned_store_uid_count(s, 1000), 4);
	put_ok(s, 1000, "p", lk(4), 4, 14);
	ck_assert_uint_eq(learned_store_uid_count(s, 1000), 4);
	ck_assert_ptr_null(learned_store_find(s, 1000, "p", lk(0)));
	ck_assert_ptr_nonnull(learned_store_find(s, 7, "p", "x"));
	/* Updated is recent: lock-1 refreshed, so lock-2 goes next. */
	put_ok(s, 1000, "p", lk(1), 1, 20);
	put_ok(s, 1000, "p", lk(5), 5, 21);
	ck_assert_ptr_nonnull(learned_store_find(s, 1000, "p", lk(1)));
	ck_assert_ptr_null(learned_store_find(s, 1000, "p", lk(2)));
	ck_assert_ptr_nonnull(learned_store_find(s, 1000, "p", lk(3)));
	/* The entry being put is never the one evicted, even when it is the oldest. */
	put_ok(s, 1000, "p", lk(6), 6, 5);
	ck_assert_ptr_nonnull(learned_store_find(s, 1000, "p", lk(6)));
	ck_assert_ptr_null(learned_store_find(s, 1000, "p", lk(3)));
	ck_assert_uint_eq(learned_store_uid_count(s, 1000), 4);
	ck_assert_uint_eq(learned_store_count(s), 5);
	learned_store_free(s);

	/* Equal times: the least recently put goes. */
	s = store_new(2, 100);
	put_ok(s, 5, "p", "b", 1, 50);
	put_ok(s, 5, "p", "a", 2, 50);
	put_ok(s, 5, "p", "c", 3, 50);
	ck_assert_ptr_null(learned_store_find(s, 5, "p", "b"));
	ck_assert_ptr_nonnull(learned_store_find(s, 5, "p", "a"));
	learned_store_free(s);
}
END_TEST

static void check_all_present(struct learned_store *s, uid_t uid, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		ck_assert_msg(learned_store_find(s, uid, "victim-prog", lk(i)), "uid %u lost %s", (unsigned)uid, lk(i));
}

START_TEST(test_flood_never_evicts_other_uid)
{
	/* total_cap below two full uids: the flood meets the total cap. */
	struct learned_store *s = store_new(10, 12);

	for (unsigned i = 0; i < 5; i++)
		put_ok(s, 1001, "victim-prog", lk(i), i, 1 + i); /* the oldest entries of all */
	for (unsigned i = 0; i < 10000; i++) {
		put_ok(s, 1000, "flood-prog", lk(i), i, 100 + i);
		check_all_present(s, 1001, 5);
		ck_assert_uint_le(learned_store_uid_count(s, 1000), 10);
		ck_assert_uint_le(learned_store_count(s), 12);
	}
	ck_assert_uint_eq(learned_store_uid_count(s, 1001), 5);
	ck_assert_uint_eq(learned_store_uid_count(s, 1000), 7);
	/* The flood kept its newest. */
	ck_assert_ptr_nonnull(learned_store_find(s, 1000, "flood-prog", lk(9999)));
	learned_store_free(s);

	/* Room for both at their caps: a uid at its full cap is untouched too. */
	s = store_new(10, 20);
	for (unsigned i = 0; i < 10; i++)
		put_ok(s, 1001, "victim-prog", lk(i), i, 1 + i);
	for (unsigned i = 0; i < 10000; i++) {
		put_ok(s, 1000, "flood-prog", lk(i), i, 100 + i);
		check_all_present(s, 1001, 10);
	}
	ck_assert_uint_eq(learned_store_uid_count(s, 1000), 10);
	ck_assert_uint_eq(learned_store_count(s), 20);
	learned_store_free(s);
}
END_TEST

START_TEST(test_total_cap_takes_from_largest)
{
	struct learned_store *s = store_new(10, 12);

	for (unsigned i = 0; i < 3; i++)
		put_ok(s, 2, "p", lk(i), i, 1 + i);     /* few and old */
	for (unsigned i = 0; i < 8; i++)
		put_ok(s, 1, "p", lk(i), i, 100 + i);   /* many and newer */
	put_ok(s, 3, "p", lk(0), 0, 200);
	ck_assert_uint_eq(learned_store_count(s), 12);
	put_ok(s, 3, "p", lk(1), 1, 201);
	/* uid 1 has the most: its oldest goes, not uid 2's older ones. */
	ck_assert_uint_eq(learned_store_count(s), 12);
	ck_assert_uint_eq(learned_store_uid_count(s, 1), 7);
	ck_assert_ptr_null(learned_store_find(s, 1, "p", lk(0)));
	ck_assert_uint_eq(learned_store_uid_count(s, 2), 3);
	ck_assert_uint_eq(learned_store_uid_count(s, 3), 2);
	learned_store_free(s);

	/* A tie with the inserting uid: the inserter pays, though the other's are older. */
	s = store_new(5, 5);
	for (unsigned i = 0; i < 3; i++)
		put_ok(s, 1, "p", lk(i), i, 1 + i);
	for (unsigned i = 0; i < 2; i++)
		put_ok(s, 2, "p", lk(i), i, 10 + i);
	put_ok(s, 2, "p", lk(2), 2, 20);
	ck_assert_uint_eq(learned_store_uid_count(s, 1), 3);
	ck_assert_uint_eq(learned_store_uid_count(s, 2), 2);
	ck_assert_ptr_null(learned_store_find(s, 2, "p", lk(0)));
	ck_assert_ptr_nonnull(learned_store_find(s, 2, "p", lk(2)));
	/* A tie between others: the one with the older entry pays. */
	put_ok(s, 3, "p", lk(0), 0, 30);
	ck_assert_uint_eq(learned_store_uid_count(s, 1), 2);
	ck_assert_ptr_null(learned_store_find(s, 1, "p", lk(0)));
	ck_assert_uint_eq(learned_store_uid_count(s, 2), 2);
	ck_assert_uint_eq(learned_store_uid_count(s, 3), 1);
	learned_store_free(s);
}
END_TEST

/* ---- the file ------------------------------------------------------------ */

START_TEST(test_round_trip)
{
	struct tmpdir t;
	struct learned_store *a = store_new(LEARNED_PER_UID_CAP_DEFAULT, LEARNED_TOTAL_CAP_DEFAULT), *b = store_new(64, 64);
	static const char *const programs[] = {
		"build-id:3f2a9c0d", "path:/usr/bin/my prog:ino=123:mtime=456", "line\nbreak\r\n", "100%", "%41%",
		"caf\xc3\xa9 \x80\xff\x01\x7f\t", "-",
	};
	static const char *const locks[] = { "table_lock", "libfoo.so+0x1234", "sp ace", "%", "\xff" };
	char *longest = malloc(LEARNED_STR_MAX + 1), err[LEARNED_ERR_MAX];
	struct learned_entry max = vals(0, LEARNED_ELIDES);
	char *file, *file2;
	size_t len, len2, lines = 0, line_start = 0;
	struct stat st;
	uint64_t seed = 1;

	tmpdir_make(&t);
	ck_assert_ptr_nonnull(longest);
	for (size_t p = 0; p < sizeof(programs) / sizeof(programs[0]); p++)
		for (size_t l = 0; l < sizeof(locks) / sizeof(locks[0]); l++, seed++)
			put_ok(a, (uid_t)(seed % 3 == 0 ? 0 : 1000 + seed % 2), programs[p], locks[l], seed,
			       1700000000 + (int64_t)seed);
	/* The longest line: every byte escaped, every number at its widest. */
	memset(longest, 0xff, LEARNED_STR_MAX);
	longest[LEARNED_STR_MAX] = '\0';
	max.runs = UINT32_MAX;
	max.acquired = max.attempts = max.commits = UINT64_MAX;
	for (int c = 0; c < LEARNED_ABORT_CAUSES; c++)
		max.aborts[c] = UINT64_MAX;
	ck_assert_int_eq(learned_store_put(a, LEARNED_ANY_UID - 1, longest, longest, &max, INT64_MAX), 0);
	ck_assert_int_eq(learned_store_put(a, 5, "zero", "zero", &(struct learned_entry){ 0 }, 0), 0);

	/* Loading replaces what b held. */
	put_ok(b, 42, "stale", "stale", 1, 1);
	ck_assert_int_eq(learned_store_save(a, t.fd, NAME, err, sizeof(err)), 0);
	ck_assert_int_eq(learned_store_load(b, t.fd, NAME, err, sizeof(err)), 0);
	ck_assert_uint_eq(learned_store_count(b), learned_store_count(a));
	ck_assert_uint_eq(learned_store_count(a), 7 * 5 + 2);
	for (size_t p = 0; p < sizeof(programs) / sizeof(programs[0]); p++)
		for (size_t l = 0; l < sizeof(locks) / sizeof(locks[0]); l++) {
			seed = 1 + p * 5 + l;
			uid_t uid = (uid_t)(seed % 3 == 0 ? 0 : 1000 + seed % 2);
			const struct learned_entry *x = learned_store_find(a, uid, programs[p], locks[l]);
			const struct learned_entry *y = learned_store_find(b, uid, programs[p], locks[l]);

			ck_assert_ptr_nonnull(x);
			ck_assert_ptr_nonnull(y);
			entry_eq(x, y);
			ck_assert_int_eq(y->last_updated, 1700000000 + (int64_t)seed);
		}
	entry_eq(learned_store_find(a, LEARNED_ANY_UID - 1, longest, longest),
		 learned_store_find(b, LEARNED_ANY_UID - 1, longest, longest));
	ck_assert_uint_eq(learned_store_find(b, LEARNED_ANY_UID - 1, longest, longest)->acquired, UINT64_MAX);
	ck_assert_int_eq(learned_store_find(b, LEARNED_ANY_UID - 1, longest, longest)->last_updated, INT64_MAX);
	ck_assert_ptr_null(learned_store_find(b, 42, "stale", "stale"));
	ck_assert(stores_equal(a, b));

	/* The file: header, one line per entry within the bound, end line, mode 0600. */
	file = read_file(t.fd, NAME, &len);
	ck_assert_int_eq(strncmp(file, "elide-learned 1\n", 16), 0);
	for (size_t i = 0; i < len; i++)
		if (file[i] == '\n') {
			ck_assert_uint_lt(i + 1 - line_start, LEARNED_LINE_MAX);
			line_start = i + 1;
			lines++;
		}
	ck_assert_uint_eq(lines, learned_store_count(a) + 2);
	ck_assert_ptr_nonnull(strstr(file, "\nend 37\n"));
	ck_assert_ptr_nonnull(strstr(file, " path:/usr/bin/my%20prog:ino=123:mtime=456 "));
	ck_assert_ptr_nonnull(strstr(file, " line%0Abreak%0D%0A "));
	ck_assert_ptr_nonnull(strstr(file, " 100%25 "));
	ck_assert_ptr_nonnull(strstr(file, " %2541%25 "));
	ck_assert_ptr_nonnull(strstr(file, " caf%C3%A9%20%80%FF%01%7F%09 "));
	ck_assert_ptr_nonnull(strstr(file, "\n5 zero zero never 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"));
	ck_assert_int_eq(fstatat(t.fd, NAME, &st, 0), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	/* Deterministic: what was loaded saves to the same bytes. */
	ck_assert_int_eq(learned_store_save(b, t.fd, "again", err, sizeof(err)), 0);
	file2 = read_file(t.fd, "again", &len2);
	ck_assert_uint_eq(len, len2);
	ck_assert_int_eq(memcmp(file, file2, len), 0);
	free(file);
	free(file2);

	/* An empty store round-trips too. */
	learned_store_forget(a, LEARNED_ANY_UID, NULL);
	ck_assert_int_eq(learned_store_save(a, t.fd, NAME, err, sizeof(err)), 0);
	ck_assert_int_eq(learned_store_load(b, t.fd, NAME, err, sizeof(err)), 0);
	ck_assert_uint_eq(learned_store_count(b), 0);
	file = read_file(t.fd, NAME, &len);
	ck_assert_str_eq(file, "elide-learned 1\nend 0\n");
	free(file);

	free(longest);
	learned_store_free(a);
	learned_store_free(b);
	tmpdir_remove(&t);
}
END_TEST

START_TEST(test_load_missing_and_bad_names)
{
	struct tmpdir t;
	struct learned_store *s = store_new(4, 8);
	char err[LEARNED_ERR_MAX];

	tmpdir_make(&t);
	put_ok(s, 1, "p", "l", 1, 1);
	ck_assert_int_eq(learned_store_load(s, t.fd, NAME, err, sizeof(err)), 0);
	ck_assert_uint_eq(learned_store_count(s), 0);
	ck_assert_int_eq(learned_store_load(s, t.fd, "a/b", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(learned_store_load(s, t.fd, "", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(learned_store_save(s, t.fd, "..", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(learned_store_save(s, t.fd, NULL, err, sizeof(err)), -EINVAL);
	/* A directory is not a store. */
	ck_assert_int_eq(mkdirat(t.fd, NAME, 0700), 0);
	ck_assert_int_eq(learned_store_load(s, t.fd, NAME, err, sizeof(err)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, NAME ": not a regular file"));
	ck_assert_int_eq(unlinkat(t.fd, NAME, AT_REMOVEDIR), 0);
	learned_store_free(s);
	tmpdir_remove(&t);
}
END_TEST

#define HDR "elide-learned 1\n"
#define GOOD(uid, prog) uid " " prog " lock never 1 10 20 1 2 3 0 0 0 0 0 0 0 0\n"

struct bad_file {
	const char *what;
	const char *data;
	const char *where;                     /* expected in err */
};

static const struct bad_file bad_files[] = {
	{ "empty file", "", NAME ":1: empty file" },
	{ "wrong header", "elide-policy 1\nend 0\n", NAME ":1: no \"elide-learned 1\" header" },
	{ "header only with a space", "elide-learned 1 \nend 0\n", NAME ":1:" },
	{ "version 2", "elide-learned 2\nend 0\n", NAME ":1: version 2" },
	{ "too few fields", HDR "1000 prog lock never 1 10 20\nend 1\n", NAME ":2: too few fields" },
	{ "too many fields", HDR "1000 p lock never 1 10 20 1 2 3 0 0 0 0 0 0 0 0 0\nend 1\n", NAME ":2: too many" },
	{ "an empty field", HDR "1000 p  lock never 1 10 20 1 2 3 0 0 0 0 0 0 0\nend 1\n", NAME ":2: an empty field" },
	{ "a trailing space", HDR "1000 p lock never 1 10 20 1 2 3 0 0 0 0 0 0 0 0 \nend 1\n", NAME ":2: an empty" },
	{ "a non-number", HDR GOOD("1000", "a") "1000 p lock never x 10 20 1 2 3 0 0 0 0 0 0 0 0\nend 2\n",
	  NAME ":3: runs: not an unsigned decimal number" },
	{ "a negative number", HDR "1000 p lock never 1 10 20 -1 2 3 0 0 0 0 0 0 0 0\nend 1\n",
	  NAME ":2: acquired: not an unsigned" },
	{ "a signed number", HDR "+1000 p lock never 1 10 20 1 2 3 0 0 0 0 0 0 0 0\nend 1\n", NAME ":2: uid: not" },
	{ "a 64-bit overflow", HDR "1000 p lock never 1 10 20 1 18446744073709551616 3 0 0 0 0 0 0 0 0\nend 1\n",
	  NAME ":2: attempts: out of range" },
	{ "21 digits", HDR "1000 p lock never 1 10 20 1 2 3 0 0 0 0 0 0 0 000000000000000000001\nend 1\n",
	  NAME ":2: other aborts: out of range" },
	{ "runs over 32 bits", HDR "1000 p lock never 4294967296 10 20 1 2 3 0 0 0 0 0 0 0 0\nend 1\n",
	  NAME ":2: runs: out of range" },
	{ "uid -1", HDR "4294967295 p lock never 1 10 20 1 2 3 0 0 0 0 0 0 0 0\nend 1\n", NAME ":2: uid: out of range" },
	{ "a time over 2^63-1", HDR "1000 p lock never 1 10 9223372036854775808 1 2 3 0 0 0 0 0 0 0 0\nend 1\n",
	  NAME ":2: last updated: out of range" },
	{ "first after last", HDR "1000 p lock never 1 30 20 1 2 3 0 0 0 0 0 0 0 0\nend 1\n",
	  NAME ":2: first learned after last updated" },
	{ "an unknown verdict", HDR "1000 p lock maybe 1 10 20 1 2 3 0 0 0 0 0 0 0 0\nend 1\n", NAME ":2: verdict" },
	{ "an invalid escape", HDR GOOD("1000", "a%4Gb") "end 1\n", NAME ":2: program: an invalid %-escape" },
	{ "a cut escape", HDR "1000 p lo%4 never 1 10 20 1 2 3 0 0 0 0 0 0 0 0\nend 1\n", NAME ":2: lock: an invalid" },
	{ "a lone percent", HDR GOOD("1000", "%") "end 1\n", NAME ":2: program: an invalid %-escape" },
	{ "an escaped NUL", HDR GOOD("1000", "a%00") "end 1\n", NAME ":2: program: %00" },
	{ "a raw byte >= 0x80", HDR GOOD("1000", "caf\xc3\xa9") "end 1\n", NAME ":2: program: a byte that must be" },
	{ "a raw tab", HDR GOOD("1000", "a\tb") "end 1\n", NAME ":2: program: a byte that must be" },
	{ "a carriage return", HDR "1000 p lock never 1 10 20 1 2 3 0 0 0 0 0 0 0 0\r\nend 1\n", NAME ":2: other aborts" },
	{ "a truncated last line", HDR GOOD("1000", "a") "1000 b lock never 1 10 20 1 2 3 0 0", NAME ":3: no newline" },
	{ "a truncated end line", HDR GOOD("1000", "a") "end 1", NAME ":3: no newline" },
	{ "no end line", HDR GOOD("1000", "a") GOOD("1000", "b"), NAME ":4: no end line" },
	{ "a wrong count", HDR GOOD("1000", "a") "end 2\n", NAME ":3: end: 2 entries announced, 1 read" },
	{ "a bad count", HDR "end x\n", NAME ":2: end: not" },
	{ "a line after the end", HDR "end 0\n" GOOD("1000", "a"), NAME ":3: a line after the end" },
	{ "a duplicate key", HDR GOOD("1000", "a") GOOD("1001", "a") GOOD("1000", "a") "end 3\n",
	  NAME ":4: a second entry for uid 1000" },
	{ "a duplicate key, escaped differently", HDR GOOD("1000", "%41") GOOD("1000", "A") "end 2\n",
	  NAME ":3: a second entry" },
	{ "over the per-uid cap", HDR GOOD("1000", "a") GOOD("1000", "b") GOOD("1000", "c") GOOD("1000", "d")
	  GOOD("1001", "a") GOOD("1000", "e") "end 6\n", NAME ":7: more than 4 entries for uid 1000" },
	{ "over the total cap", HDR GOOD("1", "a") GOOD("2", "a") GOOD("3", "a") GOOD("4", "a") GOOD("5", "a")
	  GOOD("6", "a") GOOD("7", "a") GOOD("8", "a") GOOD("9", "a") "end 9\n", NAME ":10: more than 8 entries" },
};

static void check_rejected(struct learned_store *s, const struct tmpdir *t, const char *what, const char *data,
			   size_t len, const char *where)
{
	char err[LEARNED_ERR_MAX];
	int r;

	write_file(t->fd, NAME, data, len);
	put_ok(s, 7, "before", "before", 1, 1);
	err[0] = '\0';
	r = learned_store_load(s, t->fd, NAME, err, sizeof(err));
	ck_assert_msg(r == -EBADMSG, "%s: load returned %d (%s)", what, r, err);
	ck_assert_msg(strstr(err, where), "%s: \"%s\" does not say \"%s\"", what, err, where);
	ck_assert_msg(learned_store_count(s) == 0, "%s: %zu entries left", what, learned_store_count(s));
	/* Still usable. */
	put_ok(s, 1000, "after", "after", 2, 2);
	ck_assert_ptr_nonnull(learned_store_find(s, 1000, "after", "after"));
	ck_assert_uint_eq(learned_store_count(s), 1);
}

START_TEST(test_corrupt_files_rejected)
{
	struct tmpdir t;
	struct learned_store *s = store_new(4, 8);
	size_t n = sizeof(bad_files) / sizeof(bad_files[0]);
	char *big = malloc(2 * LEARNED_LINE_MAX);
	char err[LEARNED_ERR_MAX];
	int fd;

	tmpdir_make(&t);
	ck_assert_ptr_nonnull(big);
	for (size_t i = 0; i < n; i++)
		check_rejected(s, &t, bad_files[i].what, bad_files[i].data, strlen(bad_files[i].data), bad_files[i].where);

	/* A NUL byte inside a line. */
	check_rejected(s, &t, "a NUL byte", HDR "1000 p\0q lock never 1 10 20 1 2 3 0 0 0 0 0 0 0 0\nend 1\n",
		       sizeof(HDR "1000 p\0q lock never 1 10 20 1 2 3 0 0 0 0 0 0 0 0\nend 1\n") - 1,
		       NAME ":2: program: a byte that must be");
	/* A line over LEARNED_LINE_MAX, and one just below it but too long a string. */
	snprintf(big, 2 * LEARNED_LINE_MAX, HDR GOOD("1000", "%0*d") "end 1\n", (int)LEARNED_LINE_MAX, 0);
	check_rejected(s, &t, "an overlong line", big, strlen(big), NAME ":2: longer than 8191 bytes");
	snprintf(big, 2 * LEARNED_LINE_MAX, HDR GOOD("1000", "%0*d") "end 1\n", (int)LEARNED_STR_MAX + 1, 0);
	check_rejected(s, &t, "an overlong string", big, strlen(big), NAME ":2: program: longer than 1024 bytes");
	/* An overlong line with no newline at all. */
	memset(big, 'a', 2 * LEARNED_LINE_MAX);
	check_rejected(s, &t, "an overlong first line", big, 2 * LEARNED_LINE_MAX, NAME ":1: longer than");

	/* Larger than LEARNED_FILE_MAX: refused unread (sparse, so cheap). */
	fd = openat(t.fd, NAME, O_WRONLY | O_TRUNC | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, HDR, strlen(HDR)), (ssize_t)strlen(HDR));
	ck_assert_int_eq(ftruncate(fd, (off_t)LEARNED_FILE_MAX + 1), 0);
	close(fd);
	put_ok(s, 7, "before", "before", 1, 1);
	ck_assert_int_eq(learned_store_load(s, t.fd, NAME, err, sizeof(err)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, NAME ": 16777217 bytes, larger than 16777216"));
	ck_assert_uint_eq(learned_store_count(s), 0);

	/* A short err buffer is still terminated; no buffer at all is fine. */
	write_file(t.fd, NAME, "junk\n", 5);
	memset(err, 'x', sizeof(err));
	ck_assert_int_eq(learned_store_load(s, t.fd, NAME, err, 8), -EBADMSG);
	ck_assert_uint_eq(strlen(err), 7);
	ck_assert_int_eq(learned_store_load(s, t.fd, NAME, NULL, 0), -EBADMSG);

	/* After all that, a valid file loads. */
	write_file(t.fd, NAME, HDR GOOD("1000", "%41") "end 1\n", strlen(HDR GOOD("1000", "%41") "end 1\n"));
	ck_assert_int_eq(learned_store_load(s, t.fd, NAME, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(learned_store_find(s, 1000, "A", "lock"));
	ck_assert_int_eq(learned_store_find(s, 1000, "A", "lock")->first_learned, 10);
	free(big);
	learned_store_free(s);
	tmpdir_remove(&t);
}
END_TEST

START_TEST(test_save_removes_leftovers)
{
	struct tmpdir t;
	struct learned_store *s = store_new(4, 8);
	char names[8][256], err[LEARNED_ERR_MAX];

	tmpdir_make(&t);
	write_file(t.fd, ".learned.abc123", "x", 1);   /* an interrupted save's */
	write_file(t.fd, ".learned.ZZZZZZ", "x", 1);
	write_file(t.fd, ".learned.abc1234", "x", 1);  /* not ours: kept */
	write_file(t.fd, ".other.abc123", "x", 1);
	put_ok(s, 1, "p", "l", 1, 1);
	ck_assert_int_eq(learned_store_save(s, t.fd, NAME, err, sizeof(err)), 0);
	ck_assert_uint_eq(tmpdir_list(&t, names, 8), 3);
	ck_assert_str_eq(names[0], ".learned.abc1234");
	ck_assert_str_eq(names[1], ".other.abc123");
	ck_assert_str_eq(names[2], NAME);
	learned_store_free(s);
	tmpdir_remove(&t);
}
END_TEST

/* A store of n entries whose contents depend on variant. */
static struct learned_store *store_filled(unsigned n, unsigned variant)
{
	struct learned_store *s = store_new(LEARNED_PER_UID_CAP_DEFAULT, LEARNED_TOTAL_CAP_DEFAULT);
	char program[160];

	for (unsigned i = 0; i < n; i++) {
		snprintf(program, sizeof(program), "path:/opt/some long directory/v%u/bin/program-%u:ino=%u:mtime=%u",
			 variant, i % 50, i, 1700000000 + i);
		put_ok(s, 1000 + i % 4, program, lk(i), i + variant * 100000, 1700000000 + i + variant);
	}
	return s;
}

START_TEST(test_save_failure_keeps_old_file)
{
	struct tmpdir t;
	struct learned_store *old = store_filled(3, 1), *big = store_filled(400, 2), *got = store_new(64, 64);
	char err[LEARNED_ERR_MAX], child_err[LEARNED_ERR_MAX] = "", names[8][256];
	int pipefd[2], status, r = 0;
	pid_t pid;
	size_t len;
	char *before, *after;

	tmpdir_make(&t);
	ck_assert_int_eq(learned_store_save(old, t.fd, NAME, err, sizeof(err)), 0);
	before = read_file(t.fd, NAME, &len);
	ck_assert_uint_lt(len, 4096);
	ck_assert_int_eq(pipe(pipefd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* Writes past 4 KiB fail with EFBIG, for root too. */
		struct rlimit rl = { 4096, 4096 };
		int k;

		close(pipefd[0]);
		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
			_exit(2);
		k = learned_store_save(big, t.fd, NAME, child_err, sizeof(child_err));
		if (write(pipefd[1], &k, sizeof(k)) != sizeof(k) ||
		    write(pipefd[1], child_err, sizeof(child_err)) != sizeof(child_err))
			_exit(3);
		_exit(0);
	}
	close(pipefd[1]);
	ck_assert_int_eq(read(pipefd[0], &r, sizeof(r)), sizeof(r));
	ck_assert_int_eq(read(pipefd[0], child_err, sizeof(child_err)), sizeof(child_err));
	close(pipefd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the saving child: status %#x", (unsigned)status);
	child_err[sizeof(child_err) - 1] = '\0';

	ck_assert_int_eq(r, -EFBIG);
	ck_assert_msg(strstr(child_err, NAME ": writing .learned.") && strstr(child_err, strerror(EFBIG)) &&
			      strstr(child_err, "left as it was"),
		      "err: %s", child_err);
	/* No temporary file left; the old file as it was, and it loads. */
	ck_assert_uint_eq(tmpdir_list(&t, names, 8), 1);
	ck_assert_str_eq(names[0], NAME);
	after = read_file(t.fd, NAME, &len);
	ck_assert_str_eq(before, after);
	ck_assert_int_eq(learned_store_load(got, t.fd, NAME, err, sizeof(err)), 0);
	ck_assert(stores_equal(old, got));
	/* Without the limit the same save succeeds. */
	ck_assert_int_eq(learned_store_save(big, t.fd, NAME, err, sizeof(err)), 0);
	free(before);
	free(after);
	learned_store_free(old);
	learned_store_free(big);
	learned_store_free(got);
	tmpdir_remove(&t);
}
END_TEST

START_TEST(test_kill_during_save)
{
	struct tmpdir t;
	struct learned_store *a = store_filled(600, 1), *b = store_filled(500, 2);
	struct learned_store *got = store_new(LEARNED_PER_UID_CAP_DEFAULT, LEARNED_TOTAL_CAP_DEFAULT);
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid(), saw_a = 0, saw_b = 0;
	char err[LEARNED_ERR_MAX], names[8][256];

	tmpdir_make(&t);
	ck_assert(!stores_equal(a, b));
	ck_assert_int_eq(learned_store_save(a, t.fd, NAME, err, sizeof(err)), 0);
	for (int round = 0; round < 30; round++) {
		struct timespec delay = { 0, (long)(rand_r(&seed) % 20000) * 1000 };
		int status;
		pid_t pid = fork();
		size_t n;

		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			for (;;)
				if (learned_store_save(b, t.fd, NAME, NULL, 0) < 0 ||
				    learned_store_save(a, t.fd, NAME, NULL, 0) < 0)
					_exit(1);
		}
		/* The delay only varies where the kill lands; the verdict does not depend on it. */
		nanosleep(&delay, NULL);
		ck_assert_int_eq(kill(pid, SIGKILL), 0);
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the saving child failed");

		ck_assert_msg(learned_store_load(got, t.fd, NAME, err, sizeof(err)) == 0, "round %d: %s", round, err);
		if (stores_equal(got, a))
			saw_a++;
		else if (stores_equal(got, b))
			saw_b++;
		else
			ck_abort_msg("round %d: the file is neither store", round);
		/* At most the killed save's temporary file, as saves remove earlier ones. */
		n = tmpdir_list(&t, names, 8);
		ck_assert_uint_ge(n, 1);
		ck_assert_uint_le(n, 2);
	}
	fprintf(stderr, "test_kill_during_save: 30 kills: the file was the first store %u times, the second %u\n",
		saw_a, saw_b);
	learned_store_free(a);
	learned_store_free(b);
	learned_store_free(got);
	tmpdir_remove(&t);
}
END_TEST

static Suite *learned_suite(void)
{
	Suite *s = suite_create("learned");
	TCase *te = tcase_create("entries");
	TCase *tc = tcase_create("caps");
	TCase *tf = tcase_create("file");

	tcase_add_test(te, test_new_refuses_bad_caps);
	tcase_add_test(te, test_put_find_replace);
	tcase_add_test(te, test_put_refuses);
	tcase_add_test(te, test_forget);
	tcase_add_test(te, test_foreach_order);
	tcase_add_test(te, test_probe_hold);
	suite_add_tcase(s, te);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_per_uid_cap_evicts_own_oldest);
	tcase_add_test(tc, test_flood_never_evicts_other_uid);
	tcase_add_test(tc, test_total_cap_takes_from_largest);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tf, 120);
	tcase_add_test(tf, test_round_trip);
	tcase_add_test(tf, test_load_missing_and_bad_names);
	tcase_add_test(tf, test_corrupt_files_rejected);
	tcase_add_test(tf, test_save_removes_leftovers);
	tcase_add_test(tf, test_save_failure_keeps_old_file);
	tcase_add_test(tf, test_kill_during_save);
	suite_add_tcase(s, tf);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(learned_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
