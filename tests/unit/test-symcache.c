/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* elided's symbol cache, per-uid budget and the symbolizer child's protocol. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symcache.h"

static struct symcache_value val(const char *name)
{
	struct symcache_value v = { .err = 0, .sym_offset = 8, .vaddr = 0x4000 };

	snprintf(v.name, sizeof(v.name), "%s", name);
	return v;
}

START_TEST(test_key_is_identity_not_path)
{
	struct symcache *c = NULL;
	struct symcache_key k = { .uid = 1000, .dev = 0x801, .ino = 42, .off = 0x1234, .object = true };
	struct symcache_value v = val("cache_lock");
	const struct symcache_value *got;

	ck_assert_int_eq(symcache_new(&c, SYMCACHE_UID_BYTES), 0);
	ck_assert_int_eq(symcache_put(c, &k, &v), 0);
	/* The key has no path: a hard link (same device and inode) hits. */
	got = symcache_get(c, &k);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got->name, "cache_lock");
	/* Every other part of the key matters. */
	k.uid = 1001;
	ck_assert_ptr_null(symcache_get(c, &k));
	k.uid = 1000;
	k.dev = 0x802;
	ck_assert_ptr_null(symcache_get(c, &k));
	k.dev = 0x801;
	k.ino = 43;
	ck_assert_ptr_null(symcache_get(c, &k));
	k.ino = 42;
	k.object = false;
	ck_assert_ptr_null(symcache_get(c, &k));
	k.object = true;
	k.off++;
	ck_assert_ptr_null(symcache_get(c, &k));
	/* Replacing keeps one entry. */
	k.off--;
	v = val("other");
	ck_assert_int_eq(symcache_put(c, &k, &v), 0);
	ck_assert_uint_eq(symcache_count(c), 1);
	ck_assert_str_eq(symcache_get(c, &k)->name, "other");
	symcache_free(c);
}
END_TEST

START_TEST(test_uid_byte_cap)
{
	struct symcache *c = NULL;
	struct symcache_key k = { .uid = 1000, .dev = 1, .ino = 2 };
	struct symcache_key other = { .uid = 0, .dev = 1, .ino = 2, .off = 7 };
	struct symcache_value v = val("x");
	size_t cap = 64 * 1024;

	ck_assert_int_eq(symcache_new(&c, cap), 0);
	ck_assert_int_eq(symcache_put(c, &other, &v), 0);
	for (uint64_t i = 0; i < 10000; i++) {
		k.off = i;
		ck_assert_int_eq(symcache_put(c, &k, &v), 0);
		ck_assert_uint_le(symcache_uid_bytes(c, 1000), cap);
	}
	/* Oldest out first, the newest kept, another uid untouched. */
	k.off = 0;
	ck_assert_ptr_null(symcache_get(c, &k));
	k.off = 9999;
	ck_assert_ptr_nonnull(symcache_get(c, &k));
	ck_assert_ptr_nonnull(symcache_get(c, &other));
	ck_assert_uint_gt(symcache_uid_bytes(c, 0), 0);
	symcache_free(c);
}
END_TEST

START_TEST(test_budget)
{
	struct symcache *c = NULL;
	uint64_t t = 1000;

	ck_assert_int_eq(symcache_new(&c, SYMCACHE_UID_BYTES), 0);
	for (unsigned i = 0; i < SYMBUDGET_RUNS; i++) {
		ck_assert(symcache_budget_allows(c, 1000, t));
		symcache_budget_charge(c, 1000, t, 1000);
	}
	ck_assert(!symcache_budget_allows(c, 1000, t));
	ck_assert(symcache_budget_allows(c, 1001, t)); /* per uid */
	ck_assert(symcache_budget_allows(c, 1000, t + SYMBUDGET_WINDOW_NS));
	/* CPU time counts as well as runs. */
	symcache_budget_charge(c, 1001, t, SYMBUDGET_CPU_NS);
	ck_assert(!symcache_budget_allows(c, 1001, t + 1));
	symcache_free(c);
}
END_TEST

static const struct symproto_req reqs[3] = {
	{ .addr = 0x1000, .dev = 2049, .ino = 77, .off = 0x10, .object = true },
	{ .addr = 0x2000, .dev = 2049, .ino = 77, .off = 0x20, .object = false },
	{ .addr = 0x3000, .dev = 2049, .ino = 78, .off = 0x30, .object = true },
};

static int parse(const char *text, struct symproto_answer out[3], unsigned *files)
{
	return symproto_parse(text, strlen(text), reqs, 3, out, files);
}

START_TEST(test_proto_roundtrip)
{
	char buf[4 * SYMPROTO_LINE_MAX];
	struct symproto_answer out[3];
	unsigned files = 0;
	size_t len = 0;

	len += symproto_format(buf + len, 0, 0, 2049, 77, 8, 0x4010, "cache_lock");
	len += symproto_format(buf + len, 1, ENOENT, 2049, 77, 0, 0x4020, "");
	/* Control characters and spaces in a name do not survive. */
	len += symproto_format(buf + len, 2, 0, 2049, 78, 0, 0x30, "evil\nname with\x1b[2J");
	len += (size_t)snprintf(buf + len, sizeof(buf) - len, "P 1\n");
	ck_assert_int_eq(symproto_parse(buf, len, reqs, 3, out, &files), 0);
	ck_assert_uint_eq(files, 1);
	ck_assert(out[0].have);
	ck_assert_str_eq(out[0].v.name, "cache_lock");
	ck_assert_uint_eq(out[0].v.sym_offset, 8);
	ck_assert_uint_eq(out[0].v.vaddr, 0x4010);
	ck_assert(out[1].have);
	ck_assert_int_eq(out[1].v.err, ENOENT);
	ck_assert_str_eq(out[1].v.name, "");
	ck_assert_str_eq(out[2].v.name, "evil?name?with?[2J");
}
END_TEST

START_TEST(test_proto_refuses)
{
	static const char *bad[] = {
		"",                                              /* no P line */
		"R 0 0 2049 77 0 0 x\n",                         /* no P line */
		"P 1\nR 0 0 2049 77 0 0 x\n",                    /* after P */
		"R 3 0 2049 77 0 0 x\nP 1\n",                    /* index out of range */
		"R 0 0 2049 77 0 0 x\nR 0 0 2049 77 0 0 y\nP 1\n", /* answered twice */
		"R 0 0 2049 77 0 0 \nP 1\n",                     /* empty name */
		"R 0 0 2049 77 0 0 a b\nP 1\n",                  /* space in name */
		"R 0 0 2049 77 0 0 a\x01\nP 1\n",                /* control byte */
		"R 0 5000 2049 77 0 0 x\nP 1\n",                 /* errno out of range */
		"R 0 0 2049 77 99999999999999999999 0 x\nP 1\n", /* over 64 bits */
		"R 0 0 2049 77 -1 0 x\nP 1\n",                   /* not a number */
		"R 0 0 2049 77 0 0 x\nP 1",                      /* no final newline */
		"R 0 0 2049 77 0 0 x\nP 1 \n",                   /* trailing junk */
		"X 0\nP 1\n",                                    /* unknown line */
		"R 0 0 2049 77 0x10 0 x\nP 1\n",                 /* hex */
	};
	struct symproto_answer out[3];
	char longline[SYMPROTO_LINE_MAX + 64];
	unsigned files;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(parse(bad[i], out, &files) == -EBADMSG, "accepted case %zu", i);
	/* A name over the cap, and a line over the cap. */
	memset(longline, 'a', sizeof(longline));
	memcpy(longline, "R 0 0 2049 77 0 0 ", 18);
	memcpy(longline + sizeof(longline) - 6, "\nP 1\n", 6);
	ck_assert_int_eq(parse(longline, out, &files), -EBADMSG);
	/* An answer about another file is dropped, not taken. */
	ck_assert_int_eq(parse("R 0 0 2049 99 0 0 liar\nP 1\n", out, &files), 0);
	ck_assert(!out[0].have);
	/* A NUL inside a name. */
	ck_assert_int_eq(symproto_parse("R 0 0 2049 77 0 0 a\0b\nP 1\n", 26, reqs, 3, out, &files), -EBADMSG);
}
END_TEST

/* A failed run's addresses are asked again later, with back-off, never
 * given up; an answer replaces the failure, a later failure never an answer. */
START_TEST(test_retry_backoff)
{
	struct symcache *c = NULL;
	struct symcache_key k = { .uid = 1000, .dev = 1, .ino = 2, .off = 3, .object = true };
	struct symcache_value v = val("big_lock");
	const struct symcache_value *got;
	uint64_t t = 1000ull * 1000000000ull, prev = 0;

	ck_assert_uint_eq(symcache_retry_delay(1), SYMRETRY_FIRST_NS);
	ck_assert_uint_eq(symcache_retry_delay(2), 2 * SYMRETRY_FIRST_NS);
	ck_assert_uint_eq(symcache_retry_delay(3), 4 * SYMRETRY_FIRST_NS);
	for (unsigned f = 1; f < 100; f++) {
		ck_assert_uint_ge(symcache_retry_delay(f), prev);
		ck_assert_uint_le(symcache_retry_delay(f), SYMRETRY_MAX_NS);
		prev = symcache_retry_delay(f);
	}
	ck_assert_uint_eq(prev, SYMRETRY_MAX_NS);

	ck_assert_int_eq(symcache_new(&c, SYMCACHE_UID_BYTES), 0);
	ck_assert_int_eq(symcache_put_failure(c, &k, ETIMEDOUT, t), 0);
	got = symcache_get(c, &k);
	ck_assert_ptr_nonnull(got);
	ck_assert_int_eq(got->err, ETIMEDOUT);
	ck_assert_uint_eq(got->failures, 1);
	ck_assert_uint_eq(got->retry_ns, t + SYMRETRY_FIRST_NS);
	/* Not due yet: wait; due: ask a child again. */
	ck_assert_int_eq(symcache_use(got, t), SYMCACHE_WAIT);
	ck_assert_int_eq(symcache_use(got, t + SYMRETRY_FIRST_NS - 1), SYMCACHE_WAIT);
	ck_assert_int_eq(symcache_use(got, t + SYMRETRY_FIRST_NS), SYMCACHE_ASK);
	/* Failing again doubles the delay, counted from the new failure. */
	t += SYMRETRY_FIRST_NS;
	ck_assert_int_eq(symcache_put_failure(c, &k, ETIMEDOUT, t), 0);
	got = symcache_get(c, &k);
	ck_assert_uint_eq(got->failures, 2);
	ck_assert_uint_eq(got->retry_ns, t + 2 * SYMRETRY_FIRST_NS);
	ck_assert_uint_eq(symcache_count(c), 1);
	/* The answer replaces the failure and is final. */
	ck_assert_int_eq(symcache_put(c, &k, &v), 0);
	got = symcache_get(c, &k);
	ck_assert_str_eq(got->name, "big_lock");
	ck_assert_int_eq(symcache_use(got, t + SYMRETRY_MAX_NS * 10), SYMCACHE_ANSWER);
	/* A failure after an answer (another run's) leaves the answer. */
	ck_assert_int_eq(symcache_put_failure(c, &k, ETIMEDOUT, t), 0);
	ck_assert_str_eq(symcache_get(c, &k)->name, "big_lock");
	ck_assert_uint_eq(symcache_get(c, &k)->retry_ns, 0);
	/* A final "no name" answer is an answer too. */
	k.off++;
	v = (struct symcache_value){ .err = ENOENT };
	ck_assert_int_eq(symcache_put(c, &k, &v), 0);
	ck_assert_int_eq(symcache_use(symcache_get(c, &k), t), SYMCACHE_ANSWER);
	symcache_free(c);
}
END_TEST

/* A user over budget is told when it may run a child again. */
START_TEST(test_budget_next)
{
	struct symcache *c = NULL;
	uint64_t t = 5ull * 1000000000ull;

	ck_assert_int_eq(symcache_new(&c, SYMCACHE_UID_BYTES), 0);
	ck_assert_uint_eq(symcache_budget_next_ns(c, 1000, t), t);
	for (unsigned i = 0; i < SYMBUDGET_RUNS; i++)
		symcache_budget_charge(c, 1000, t, 1000);
	ck_assert(!symcache_budget_allows(c, 1000, t + 1));
	ck_assert_uint_eq(symcache_budget_next_ns(c, 1000, t + 1), t + SYMBUDGET_WINDOW_NS);
	ck_assert(symcache_budget_allows(c, 1000, t + SYMBUDGET_WINDOW_NS));
	symcache_free(c);
}
END_TEST

static Suite *symcache_suite(void)
{
	Suite *s = suite_create("symcache");
	TCase *tc = tcase_create("cache");
	TCase *tp = tcase_create("protocol");

	tcase_add_test(tc, test_key_is_identity_not_path);
	tcase_add_test(tc, test_uid_byte_cap);
	tcase_add_test(tc, test_budget);
	tcase_add_test(tc, test_retry_backoff);
	tcase_add_test(tc, test_budget_next);
	suite_add_tcase(s, tc);
	tcase_add_test(tp, test_proto_roundtrip);
	tcase_add_test(tp, test_proto_refuses);
	suite_add_tcase(s, tp);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(symcache_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
