/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Check suite for elidectl/sparkline.c: levels, unknown points, widths. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sparkline.h"

#define LOWEST "\xe2\x96\x81"  /* U+2581 */
#define LEVEL4 "\xe2\x96\x85"  /* U+2585 */
#define HIGHEST "\xe2\x96\x88" /* U+2588 */

START_TEST(test_levels_scale_from_zero)
{
	const double v[] = { 0, 1, 2, 4, 8 };
	int levels[5];

	spark_levels(v, 5, levels);
	ck_assert_int_eq(levels[0], 0);
	ck_assert_int_eq(levels[4], SPARK_LEVELS - 1);
	/* 4 of 8 is half of 7 levels above the lowest: 3.5, rounded up. */
	ck_assert_int_eq(levels[3], 4);
	ck_assert_int_eq(levels[2], 2);
	ck_assert_int_eq(levels[1], 1);
	for (int i = 1; i < 5; i++)
		ck_assert_int_ge(levels[i], levels[i - 1]);
}
END_TEST

START_TEST(test_flat_busy_series_is_high)
{
	/* Scaled from 0, not from the smallest: a steady rate stays high. */
	const double v[] = { 500, 500, 500 };
	int levels[3];

	spark_levels(v, 3, levels);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(levels[i], SPARK_LEVELS - 1);
}
END_TEST

START_TEST(test_unknown_points)
{
	const double v[] = { -1, NAN, 3, -0.5, 0 };
	int levels[5];
	char buf[64];

	spark_levels(v, 5, levels);
	ck_assert_int_eq(levels[0], -1);
	ck_assert_int_eq(levels[1], -1);
	ck_assert_int_eq(levels[2], SPARK_LEVELS - 1);
	ck_assert_int_eq(levels[3], -1);
	ck_assert_int_eq(levels[4], 0);
	ck_assert_int_eq(sparkline(v, 5, 5, false, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "  # _");
	ck_assert_int_eq(sparkline(v, 5, 5, true, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "  " HIGHEST " " LOWEST);
}
END_TEST

START_TEST(test_all_zero_is_lowest)
{
	const double v[] = { 0, 0, 0, 0 };
	char buf[64];

	ck_assert_int_eq(sparkline(v, 4, 4, true, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, LOWEST LOWEST LOWEST LOWEST);
	ck_assert_int_eq(sparkline(v, 4, 4, false, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "____");
}
END_TEST

START_TEST(test_all_unknown_is_blank)
{
	const double v[] = { -1, -1, NAN };
	char buf[64];

	ck_assert_int_eq(sparkline(v, 3, 3, true, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "   ");
}
END_TEST

START_TEST(test_width_keeps_the_newest)
{
	/* 8 points, 4 wide: the last 4, scaled among themselves. */
	const double v[] = { 1000, 1000, 1000, 1000, 0, 4, 8, 8 };
	char buf[64];

	ck_assert_int_eq(sparkline(v, 8, 4, false, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "_=##");
	ck_assert_int_eq(sparkline(v, 8, 4, true, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, LOWEST LEVEL4 HIGHEST HIGHEST);
}
END_TEST

START_TEST(test_fewer_points_than_width_pad_left)
{
	const double v[] = { 0, 2, 4 };
	char buf[64];

	ck_assert_int_eq(sparkline(v, 3, 6, false, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "   _=#");
	ck_assert_int_eq(sparkline(v, 3, 6, true, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "   " LOWEST LEVEL4 HIGHEST);
	ck_assert_int_eq(sparkline(v, 0, 3, true, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "   ");
	ck_assert_int_eq(sparkline(v, 3, 0, true, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(test_buffer_too_small)
{
	const double v[] = { 1, 2, 3, 4 };
	char buf[16];

	/* 4 UTF-8 points need 12 bytes and the NUL. */
	ck_assert_int_eq(sparkline(v, 4, 4, true, buf, 12), -ENOBUFS);
	ck_assert_int_eq(sparkline(v, 4, 4, true, buf, 13), 0);
	ck_assert_int_eq(sparkline(v, 4, 4, false, buf, 4), -ENOBUFS);
	ck_assert_int_eq(sparkline(v, 4, 4, false, buf, 5), 0);
	ck_assert_int_eq(sparkline(v, 4, 4, false, buf, 0), -ENOBUFS);
}
END_TEST

START_TEST(test_huge_values)
{
	const double v[] = { INFINITY, 1e300, 0 };
	int levels[3];

	spark_levels(v, 3, levels);
	ck_assert_int_eq(levels[0], SPARK_LEVELS - 1);
	ck_assert_int_eq(levels[1], 0);
	ck_assert_int_eq(levels[2], 0);
}
END_TEST

static Suite *sparkline_suite(void)
{
	Suite *s = suite_create("sparkline");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_levels_scale_from_zero);
	tcase_add_test(tc, test_flat_busy_series_is_high);
	tcase_add_test(tc, test_unknown_points);
	tcase_add_test(tc, test_all_zero_is_lowest);
	tcase_add_test(tc, test_all_unknown_is_blank);
	tcase_add_test(tc, test_width_keeps_the_newest);
	tcase_add_test(tc, test_fewer_points_than_width_pad_left);
	tcase_add_test(tc, test_buffer_too_small);
	tcase_add_test(tc, test_huge_values);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sparkline_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
