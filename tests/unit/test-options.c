/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

/* What on_error saw; reset by parse(). */
struct errlog {
	unsigned calls;
	char pair[128];
	const char *why;
};

static void record_error(const char *pair, size_t pair_len, const char *why, void *userdata)
{
	struct errlog *log = userdata;
	size_t n = pair_len < sizeof(log->pair) - 1 ? pair_len : sizeof(log->pair) - 1;

	log->calls++;
	memcpy(log->pair, pair, n);
	log->pair[n] = '\0';
	log->why = why;
	ck_assert_ptr_nonnull(why);
	ck_assert_uint_gt(strlen(why), 0);
}

static int parse(struct elide_options *o, const char *s, struct errlog *log)
{
	memset(log, 0, sizeof(*log));
	return elide_options_parse(o, s, record_error, log);
}

/* Field-wise so struct padding does not matter. */
static void assert_opts_eq(const struct elide_options *a, const struct elide_options *b)
{
	ck_assert_int_eq(a->mode, b->mode);
	ck_assert_uint_eq(a->retries, b->retries);
	ck_assert_uint_eq(a->busy_retries, b->busy_retries);
	ck_assert_uint_eq(a->busy_spins, b->busy_spins);
	ck_assert_uint_eq(a->wait_spins, b->wait_spins);
	ck_assert_uint_eq(a->contention, b->contention);
	ck_assert_uint_eq(a->skip, b->skip);
	ck_assert_uint_eq(a->skip_max, b->skip_max);
	ck_assert_double_eq(a->abort_ratio, b->abort_ratio);
	ck_assert_uint_eq(a->window, b->window);
	ck_assert_uint_eq(a->sample, b->sample);
	ck_assert_uint_eq(a->max_locks, b->max_locks);
	ck_assert(a->report == b->report);
	ck_assert(a->stats == b->stats);
	ck_assert(a->fork_segment == b->fork_segment);
	ck_assert(a->force_normal == b->force_normal);
	ck_assert(a->own_mutex == b->own_mutex);
	ck_assert(a->own_rwlock == b->own_rwlock);
	ck_assert(a->verbose == b->verbose);
	ck_assert(a->watch == b->watch);
	ck_assert_uint_eq(a->watch_sample, b->watch_sample);
}

static void assert_defaults(const struct elide_options *o)
{
	struct elide_options d;

	elide_options_defaults(&d);
	assert_opts_eq(o, &d);
}

START_TEST(test_defaults)
{
	struct elide_options o;

	memset(&o, 0xa5, sizeof(o));
	elide_options_defaults(&o);
	ck_assert_int_eq(o.mode, ELIDE_MODE_ADAPTIVE);
	ck_assert_uint_eq(o.retries, 3);
	ck_assert_uint_eq(o.busy_retries, 3);
	ck_assert_uint_eq(o.busy_spins, 400);
	ck_assert_uint_eq(o.wait_spins, 32);
	ck_assert_uint_eq(o.contention, 4);
	ck_assert_uint_eq(o.skip, 16);
	ck_assert_uint_eq(o.skip_max, 65536);
	ck_assert_double_eq(o.abort_ratio, 0.5);
	ck_assert_uint_eq(o.window, 1000);
	ck_assert_uint_eq(o.sample, 64);
	ck_assert_uint_eq(o.max_locks, 4096);
	ck_assert(!o.report);
	ck_assert(o.stats);
	ck_assert(o.fork_segment);
	ck_assert(!o.force_normal);
	ck_assert(o.own_mutex);
	ck_assert(o.own_rwlock);
	ck_assert(!o.verbose);
	ck_assert(o.watch);
	ck_assert_uint_eq(o.watch_sample, 1024);
}
END_TEST

START_TEST(test_mode_to_string)
{
	ck_assert_str_eq(elide_mode_to_string(ELIDE_MODE_ADAPTIVE), "adaptive");
	ck_assert_str_eq(elide_mode_to_string(ELIDE_MODE_ON), "on");
	ck_assert_str_eq(elide_mode_to_string(ELIDE_MODE_OFF), "off");
	ck_assert_str_eq(elide_mode_to_string(ELIDE_MODE_WATCH), "watch");
}
END_TEST

START_TEST(test_null_and_empty)
{
	struct elide_options o;
	struct errlog log;

	elide_options_defaults(&o);
	ck_assert_int_eq(parse(&o, NULL, &log), 0);
	ck_assert_uint_eq(log.calls, 0);
	ck_assert_int_eq(parse(&o, "", &log), 0);
	ck_assert_uint_eq(log.calls, 0);
	ck_assert_int_eq(parse(&o, ",,,", &log), 0);
	ck_assert_uint_eq(log.calls, 0);
	assert_defaults(&o);
}
END_TEST

/* Integer options and their documented ranges. */
static const struct {
	const char *name;
	size_t offset;
	unsigned min, max;
} int_opts[] = {
	{ "retries", offsetof(struct elide_options, retries), 0, 64 },
	{ "busy_retries", offsetof(struct elide_options, busy_retries), 0, 64 },
	{ "busy_spins", offsetof(struct elide_options, busy_spins), 0, 1000000 },
	{ "wait_spins", offsetof(struct elide_options, wait_spins), 0, 1000 },
	{ "contention", offsetof(struct elide_options, contention), 1, 65535 },
	{ "skip", offsetof(struct elide_options, skip), 1, 1000000 },
	{ "skip_max", offsetof(struct elide_options, skip_max), 1, 100000000 },
	{ "window", offsetof(struct elide_options, window), 1, 100000000 },
	{ "max_locks", offsetof(struct elide_options, max_locks), 16, 65535 },
};

static unsigned get_uint(const struct elide_options *o, size_t offset)
{
	unsigned v;

	memcpy(&v, (const char *)o + offset, sizeof(v));
	return v;
}

static void accept_uint(size_t idx, unsigned value)
{
	struct elide_options o;
	struct errlog log;
	char buf[64];

	elide_options_defaults(&o);
	snprintf(buf, sizeof(buf), "%s=%u", int_opts[idx].name, value);
	ck_assert_msg(parse(&o, buf, &log) == 0, "'%s' rejected: %s", buf, log.why);
	ck_assert_uint_eq(log.calls, 0);
	ck_assert_uint_eq(get_uint(&o, int_opts[idx].offset), value);
}

static void reject_value(const char *name, const char *value)
{
	struct elide_options o, d;
	struct errlog log;
	char buf[64];

	elide_options_defaults(&o);
	elide_options_defaults(&d);
	snprintf(buf, sizeof(buf), "%s=%s", name, value);
	ck_assert_msg(parse(&o, buf, &log) == 1, "'%s' accepted", buf);
	ck_assert_uint_eq(log.calls, 1);
	ck_assert_str_eq(log.pair, buf);
	assert_opts_eq(&o, &d);
}

START_TEST(test_int_bounds)
{
	char buf[32];

	accept_uint((size_t)_i, int_opts[_i].min);
	accept_uint((size_t)_i, int_opts[_i].max);
	accept_uint((size_t)_i, (int_opts[_i].min + int_opts[_i].max) / 2);

	if (int_opts[_i].min > 0)
		snprintf(buf, sizeof(buf), "%u", int_opts[_i].min - 1);
	else
		snprintf(buf, sizeof(buf), "-1");
	reject_value(int_opts[_i].name, buf);

	snprintf(buf, sizeof(buf), "%u", int_opts[_i].max + 1);
	reject_value(int_opts[_i].name, buf);

	reject_value(int_opts[_i].name, "");
	reject_value(int_opts[_i].name, "+5");
	reject_value(int_opts[_i].name, "0x10");
	reject_value(int_opts[_i].name, " 20");
	reject_value(int_opts[_i].name, "20 ");
	reject_value(int_opts[_i].name, "99999999999999999999");
	reject_value(int_opts[_i].name, "4294967312"); /* 2^32 + 16 must not wrap */
}
END_TEST

START_TEST(test_range_reason)
{
	struct elide_options o;
	struct errlog log;

	elide_options_defaults(&o);
	ck_assert_int_eq(parse(&o, "retries=65", &log), 1);
	ck_assert_ptr_nonnull(strstr(log.why, "0..64"));
	ck_assert_int_eq(parse(&o, "max_locks=15", &log), 1);
	ck_assert_ptr_nonnull(strstr(log.why, "16..65535"));
	ck_assert_int_eq(parse(&o, "sample=3", &log), 1);
	ck_assert_ptr_nonnull(strstr(log.why, "power of two"));
	ck_assert_int_eq(parse(&o, "unknown=1", &log), 1);
	ck_assert_str_eq(log.why, "unknown option");
	ck_assert_int_eq(parse(&o, "mode", &log), 1);
	ck_assert_str_eq(log.why, "missing '='");
	ck_assert_int_eq(parse(&o, "mode=auto", &log), 1);
	ck_assert_str_eq(log.why, "mode must be adaptive, on, off or watch");
	ck_assert_int_eq(parse(&o, "abort_ratio=1.5", &log), 1);
	ck_assert_ptr_nonnull(strstr(log.why, "0..1"));
}
END_TEST

START_TEST(test_sample)
{
	static const unsigned good[] = { 1, 2, 4, 64, 1024, 32768, 65536 };
	struct elide_options o;
	struct errlog log;
	char buf[32];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		elide_options_defaults(&o);
		snprintf(buf, sizeof(buf), "sample=%u", good[i]);
		ck_assert_int_eq(parse(&o, buf, &log), 0);
		ck_assert_uint_eq(o.sample, good[i]);
	}
	reject_value("sample", "0");
	reject_value("sample", "3");
	reject_value("sample", "6");
	reject_value("sample", "65535");
	reject_value("sample", "131072");
	reject_value("sample", "");
}
END_TEST

START_TEST(test_abort_ratio)
{
	static const struct {
		const char *s;
		double v;
	} good[] = {
		{ "0", 0.0 }, { "1", 1.0 }, { "0.5", 0.5 }, { "0.25", 0.25 },
		{ ".75", 0.75 }, { "1.0", 1.0 }, { "1.000", 1.0 }, { "0.", 0.0 },
		{ "00.1", 0.1 }, { "0.001", 0.001 },
	};
	struct elide_options o;
	struct errlog log;
	char buf[64];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		elide_options_defaults(&o);
		snprintf(buf, sizeof(buf), "abort_ratio=%s", good[i].s);
		ck_assert_msg(parse(&o, buf, &log) == 0, "'%s' rejected", buf);
		ck_assert_double_eq_tol(o.abort_ratio, good[i].v, 1e-12);
	}
	reject_value("abort_ratio", "1.5");
	reject_value("abort_ratio", "1.0001");
	reject_value("abort_ratio", "2");
	reject_value("abort_ratio", "10");
	reject_value("abort_ratio", "-0.1");
	reject_value("abort_ratio", "+0.1");
	reject_value("abort_ratio", "");
	reject_value("abort_ratio", ".");
	reject_value("abort_ratio", "0.5.");
	reject_value("abort_ratio", "0.5x");
	reject_value("abort_ratio", "1e-1");
	reject_value("abort_ratio", "nan");
	reject_value("abort_ratio", "inf");
}
END_TEST

START_TEST(test_bools)
{
	static const struct {
		const char *name;
		size_t offset;
	} fields[] = {
		{ "report", offsetof(struct elide_options, report) },
		{ "force_normal", offsetof(struct elide_options, force_normal) },
		{ "verbose", offsetof(struct elide_options, verbose) },
		{ "stats", offsetof(struct elide_options, stats) },
		{ "fork_segment", offsetof(struct elide_options, fork_segment) },
		{ "own_mutex", offsetof(struct elide_options, own_mutex) },
		{ "own_rwlock", offsetof(struct elide_options, own_rwlock) },
	};
	static const struct {
		const char *s;
		bool v;
	} vals[] = {
		{ "1", true }, { "0", false }, { "yes", true }, { "no", false },
		{ "true", true }, { "false", false },
	};
	struct elide_options o;
	struct errlog log;
	char buf[64];

	for (size_t n = 0; n < sizeof(fields) / sizeof(fields[0]); n++) {
		for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
			bool *field = (bool *)((char *)&o + fields[n].offset);

			elide_options_defaults(&o);
			/* Start from the opposite value so the parse must change it. */
			*field = !vals[i].v;
			snprintf(buf, sizeof(buf), "%s=%s", fields[n].name, vals[i].s);
			ck_assert_int_eq(parse(&o, buf, &log), 0);
			ck_assert_msg(*field == vals[i].v, "%s", buf);
		}
		reject_value(fields[n].name, "2");
		reject_value(fields[n].name, "-1");
		reject_value(fields[n].name, "");
		reject_value(fields[n].name, "01x");
		reject_value(fields[n].name, "maybe");
	}
}
END_TEST

START_TEST(test_mode)
{
	struct elide_options o;
	struct errlog log;

	elide_options_defaults(&o);
	ck_assert_int_eq(parse(&o, "mode=on", &log), 0);
	ck_assert_int_eq(o.mode, ELIDE_MODE_ON);
	ck_assert_int_eq(parse(&o, "mode=off", &log), 0);
	ck_assert_int_eq(o.mode, ELIDE_MODE_OFF);
	ck_assert_int_eq(parse(&o, "mode=adaptive", &log), 0);
	ck_assert_int_eq(o.mode, ELIDE_MODE_ADAPTIVE);
	ck_assert_int_eq(parse(&o, "mode=watch", &log), 0);
	ck_assert_int_eq(o.mode, ELIDE_MODE_WATCH);
	ck_assert_int_eq(parse(&o, "watch=0,watch_sample=1", &log), 0);
	ck_assert(!o.watch);
	ck_assert_uint_eq(o.watch_sample, 1);
	ck_assert_int_eq(parse(&o, "watch=1,watch_sample=65536", &log), 0);
	ck_assert(o.watch);
	ck_assert_uint_eq(o.watch_sample, 65536);

	reject_value("watch_sample", "0");
	reject_value("watch_sample", "3");
	reject_value("watch_sample", "131072");
	reject_value("watch", "2");
	reject_value("mode", "WATCH");

	reject_value("mode", "");
	reject_value("mode", "ON");
	reject_value("mode", "auto");
	reject_value("mode", "onx");
	reject_value("mode", "1");
}
END_TEST

static const char *const garbage[] = {
	"mode",
	"=3",
	"=",
	"retries=",
	"retries=-1",
	"retries=3x",
	"retries=99999999999999999999",
	"sample=3",
	"abort_ratio=1.5",
	"unknown=1",
	"retries",
	"Retries=3",
	"retries =3",
	"retries==3",
};

START_TEST(test_garbage)
{
	struct elide_options o;
	struct errlog log;
	const char *s = garbage[_i];

	elide_options_defaults(&o);
	ck_assert_msg(parse(&o, s, &log) == 1, "'%s' not rejected", s);
	ck_assert_uint_eq(log.calls, 1);
	ck_assert_str_eq(log.pair, s);
	assert_defaults(&o);
}
END_TEST

START_TEST(test_bad_in_middle)
{
	struct elide_options o;
	struct errlog log;

	elide_options_defaults(&o);
	ck_assert_int_eq(parse(&o, "retries=5,sample=3,busy_spins=7", &log), 1);
	ck_assert_uint_eq(log.calls, 1);
	ck_assert_str_eq(log.pair, "sample=3");
	ck_assert_uint_eq(o.retries, 5);
	ck_assert_uint_eq(o.busy_spins, 7);
	ck_assert_uint_eq(o.sample, 64);

	elide_options_defaults(&o);
	ck_assert_int_eq(parse(&o, "mode=off,,bogus,abort_ratio=0.25,verbose=1", &log), 1);
	ck_assert_uint_eq(log.calls, 1);
	ck_assert_str_eq(log.pair, "bogus");
	ck_assert_int_eq(o.mode, ELIDE_MODE_OFF);
	ck_assert_double_eq(o.abort_ratio, 0.25);
	ck_assert(o.verbose);
}
END_TEST

START_TEST(test_many)
{
	struct elide_options o;
	struct errlog log;

	elide_options_defaults(&o);
	ck_assert_int_eq(parse(&o, ",mode=on,retries=0,busy_retries=64,busy_spins=1000000,"
				   "contention=65535,skip=1,skip_max=100000000,abort_ratio=1,"
				   "window=1,sample=65536,max_locks=16,report=1,force_normal=yes,"
				   "verbose=true,", &log), 0);
	ck_assert_uint_eq(log.calls, 0);
	ck_assert_int_eq(o.mode, ELIDE_MODE_ON);
	ck_assert_uint_eq(o.retries, 0);
	ck_assert_uint_eq(o.busy_retries, 64);
	ck_assert_uint_eq(o.busy_spins, 1000000);
	ck_assert_uint_eq(o.contention, 65535);
	ck_assert_uint_eq(o.skip, 1);
	ck_assert_uint_eq(o.skip_max, 100000000);
	ck_assert_double_eq(o.abort_ratio, 1.0);
	ck_assert_uint_eq(o.window, 1);
	ck_assert_uint_eq(o.sample, 65536);
	ck_assert_uint_eq(o.max_locks, 16);
	ck_assert(o.report);
	ck_assert(o.force_normal);
	ck_assert(o.verbose);

	/* Later pairs win; every bad pair is counted. */
	elide_options_defaults(&o);
	ck_assert_int_eq(parse(&o, "retries=1,retries=2,a=1,b=2,retries=65", &log), 3);
	ck_assert_uint_eq(log.calls, 3);
	ck_assert_str_eq(log.pair, "retries=65");
	ck_assert_uint_eq(o.retries, 2);
}
END_TEST

START_TEST(test_report_path)
{
	struct elide_options o;
	struct errlog log;
	char long_path[300], pair[320];

	elide_options_defaults(&o);
	ck_assert_str_eq(o.report_path, "");
	ck_assert_int_eq(parse(&o, "report=/var/tmp/elide.report,retries=2", &log), 0);
	ck_assert(o.report);
	ck_assert_str_eq(o.report_path, "/var/tmp/elide.report");
	ck_assert_uint_eq(o.retries, 2);
	/* A later report=1 goes back to stderr, report=0 turns it off. */
	ck_assert_int_eq(parse(&o, "report=1", &log), 0);
	ck_assert(o.report);
	ck_assert_str_eq(o.report_path, "");
	ck_assert_int_eq(parse(&o, "report=/x,report=0", &log), 0);
	ck_assert(!o.report);
	ck_assert_str_eq(o.report_path, "");
	/* Relative paths and overlong ones are refused, and change nothing. */
	ck_assert_int_eq(parse(&o, "report=rel/path", &log), 1);
	ck_assert_str_eq(log.why, "must be 0, 1 or an absolute path");
	ck_assert(!o.report);
	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[sizeof(long_path) - 1] = '\0';
	snprintf(pair, sizeof(pair), "report=%s", long_path);
	ck_assert_int_eq(parse(&o, pair, &log), 1);
	ck_assert_str_eq(log.why, "path too long");
	ck_assert(!o.report);
	ck_assert_str_eq(o.report_path, "");
}
END_TEST

START_TEST(test_null_callback)
{
	struct elide_options o;

	elide_options_defaults(&o);
	ck_assert_int_eq(elide_options_parse(&o, "retries=7,bad,sample=5", NULL, NULL), 2);
	ck_assert_uint_eq(o.retries, 7);
	ck_assert_uint_eq(o.sample, 64);
}
END_TEST

static Suite *options_suite(void)
{
	Suite *s = suite_create("options");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_mode_to_string);
	tcase_add_test(tc, test_null_and_empty);
	tcase_add_loop_test(tc, test_int_bounds, 0, (int)(sizeof(int_opts) / sizeof(int_opts[0])));
	tcase_add_test(tc, test_range_reason);
	tcase_add_test(tc, test_sample);
	tcase_add_test(tc, test_abort_ratio);
	tcase_add_test(tc, test_bools);
	tcase_add_test(tc, test_mode);
	tcase_add_loop_test(tc, test_garbage, 0, (int)(sizeof(garbage) / sizeof(garbage[0])));
	tcase_add_test(tc, test_bad_in_middle);
	tcase_add_test(tc, test_many);
	tcase_add_test(tc, test_null_callback);
	tcase_add_test(tc, test_report_path);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(options_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
