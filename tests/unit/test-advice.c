/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Check suite for elidectl/advice.c: the advisor's verdicts and actions. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "advice.h"

/* A lock watched for `seconds` with these figures. */
static struct elide_seg_lock lock_of(uint64_t acquired, uint64_t contended, uint64_t wait_ns, uint64_t hold_mean_ns,
				     uint64_t hold_samples, uint64_t hold_long)
{
	struct elide_seg_lock l;

	memset(&l, 0, sizeof(l));
	l.kind = ELIDE_SEG_KIND_MUTEX;
	l.stats[ELIDE_SEG_STAT_ACQUIRED] = acquired;
	l.stats[ELIDE_SEG_STAT_CONTENDED] = contended;
	l.wait_ns = wait_ns;
	l.hold_ns = hold_mean_ns * hold_samples;
	l.hold_samples = hold_samples;
	l.hold_long = hold_long;
	return l;
}

START_TEST(test_quiet)
{
	/* 10 s, 1M acquisitions, 100 contended (0.01%), 1 ms waited (0.01%). */
	struct elide_seg_lock l = lock_of(1000000, 100, 1000000, 500, 1000, 0);
	struct advice a;

	advise_lock(&l, 10, &a);
	ck_assert_int_eq(a.verdict, ADVICE_QUIET);
	ck_assert(a.wait_share > 0.00009 && a.wait_share < 0.00011);
	ck_assert(a.contended_share > 0.00009 && a.contended_share < 0.00011);
	ck_assert_uint_eq(a.hold_mean_ns, 500);
	ck_assert_double_eq(a.long_share, 0);
	ck_assert(a.commit_share < 0);
}
END_TEST

START_TEST(test_candidate)
{
	/* Half the acquisitions contended, 2 s waited in 10 s, 1 us holds. */
	struct elide_seg_lock l = lock_of(1000000, 500000, 2000000000ull, 1000, 1000, 3);
	struct advice a;
	char action[256];

	advise_lock(&l, 10, &a);
	ck_assert_int_eq(a.verdict, ADVICE_CANDIDATE);
	ck_assert(a.wait_share > 0.19 && a.wait_share < 0.21);
	advice_action(&a, "/usr/bin/app", "app.service", true, action, sizeof(action));
	ck_assert_str_eq(action, "elidectl enable --unit app.service");
	advice_action(&a, "/usr/bin/app", "", true, action, sizeof(action));
	ck_assert_str_eq(action, "program rule { exe = \"/usr/bin/app\"; mode = \"adaptive\"; }");
	advice_action(&a, "/usr/bin/app", "app.service", false, action, sizeof(action));
	ck_assert(strstr(action, "RTM") != NULL);
	ck_assert_str_eq(advice_verdict_name(a.verdict), "candidate");
	ck_assert(strstr(advice_verdict_text(a.verdict), "estimate") != NULL);
}
END_TEST

START_TEST(test_too_long)
{
	struct elide_seg_lock mean_long = lock_of(100000, 50000, 5000000000ull, 50000, 100, 90);
	struct elide_seg_lock some_long = lock_of(100000, 50000, 5000000000ull, 2000, 100, 20);
	struct advice a;
	char action[256];

	advise_lock(&mean_long, 10, &a);
	ck_assert_int_eq(a.verdict, ADVICE_TOO_LONG);
	advise_lock(&some_long, 10, &a);
	ck_assert_int_eq(a.verdict, ADVICE_TOO_LONG);
	ck_assert_double_eq_tol(a.long_share, 0.2, 1e-9);
	advice_action(&a, "/usr/bin/app", NULL, true, action, sizeof(action));
	ck_assert_str_eq(action, "shorten the section or split the lock");
}
END_TEST

START_TEST(test_preempted_outliers_stay_candidate)
{
	/* 286 sampled 2 us sections, 2 of them preempted for 2 ms: the mean
	 * reads 16 us, yet 99% of the sections would fit a transaction. */
	struct elide_seg_lock l = lock_of(100000, 50000, 5000000000ull, 0, 286, 2);
	struct advice a;

	l.hold_ns = 284 * 2000ull + 2 * 2000000ull;
	advise_lock(&l, 10, &a);
	ck_assert_uint_gt(a.hold_mean_ns, 10000);
	ck_assert_int_eq(a.verdict, ADVICE_CANDIDATE);
}
END_TEST

START_TEST(test_unknown_without_samples)
{
	struct elide_seg_lock l = lock_of(100000, 50000, 5000000000ull, 1000, 7, 0);
	struct advice a;
	char action[256];

	advise_lock(&l, 10, &a);
	ck_assert_int_eq(a.verdict, ADVICE_UNKNOWN);
	ck_assert(!a.hold_known);
	advice_action(&a, NULL, NULL, true, action, sizeof(action));
	ck_assert_str_eq(action, "-");
}
END_TEST

START_TEST(test_measured_wins)
{
	struct elide_seg_lock l = lock_of(100000, 50000, 5000000000ull, 50000, 100, 90);
	struct advice a;
	char action[256];

	/* Long holds, but RTM committed most of 1000 attempts: measured. */
	l.stats[ELIDE_SEG_STAT_ATTEMPTS] = 1000;
	l.stats[ELIDE_SEG_STAT_COMMITS] = 900;
	advise_lock(&l, 10, &a);
	ck_assert_int_eq(a.verdict, ADVICE_ELIDES);
	l.stats[ELIDE_SEG_STAT_COMMITS] = 10;
	advise_lock(&l, 10, &a);
	ck_assert_int_eq(a.verdict, ADVICE_ABORTS);
	advice_action(&a, "/usr/bin/app", NULL, true, action, sizeof(action));
	ck_assert_str_eq(action, "program rule { exe = \"/usr/bin/app\"; mode = \"off\"; }");
	/* Fewer than 64 attempts decide nothing. */
	l.stats[ELIDE_SEG_STAT_ATTEMPTS] = 63;
	l.stats[ELIDE_SEG_STAT_COMMITS] = 63;
	advise_lock(&l, 10, &a);
	ck_assert_int_eq(a.verdict, ADVICE_TOO_LONG);
}
END_TEST

START_TEST(test_hostile_counters)
{
	/* Torn or forged counters: shares stay within 0..1, nothing divides by 0. */
	struct elide_seg_lock l = lock_of(10, 1000, UINT64_MAX, 0, 0, 5);
	struct advice a;

	l.hold_ns = UINT64_MAX;
	advise_lock(&l, 0, &a);
	ck_assert(a.wait_share < 0);
	ck_assert_double_eq(a.contended_share, 1.0);
	ck_assert(a.long_share < 0);
	ck_assert_uint_eq(a.hold_mean_ns, 0);
	ck_assert_int_eq(a.verdict, ADVICE_UNKNOWN);
	l.hold_samples = 1;
	l.hold_long = 1000;
	advise_lock(&l, 1, &a);
	ck_assert_double_eq(a.long_share, 1.0);
	ck_assert_str_eq(advice_verdict_name((enum advice_verdict)99), "?");
}
END_TEST

static Suite *advice_suite(void)
{
	Suite *s = suite_create("advice");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_quiet);
	tcase_add_test(tc, test_candidate);
	tcase_add_test(tc, test_too_long);
	tcase_add_test(tc, test_preempted_outliers_stay_candidate);
	tcase_add_test(tc, test_unknown_without_samples);
	tcase_add_test(tc, test_measured_wins);
	tcase_add_test(tc, test_hostile_counters);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(advice_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
