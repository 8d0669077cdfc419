/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static int pipe_fds[2];

static void setup(void)
{
	ck_assert_int_eq(pipe(pipe_fds), 0);
	log_set_fd(pipe_fds[1]);
	log_set_prefix("tst");
	log_set_max_priority(LOG_INFO);
	log_set_journal_prefix(false);
}

static void teardown(void)
{
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	log_set_fd(STDERR_FILENO);
}

static const char *drain(void)
{
	static char buf[2048];
	ssize_t n;

	close(pipe_fds[1]);
	n = read(pipe_fds[0], buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	ck_assert_int_eq(pipe(pipe_fds), 0); /* fresh pipe for teardown symmetry */
	log_set_fd(pipe_fds[1]);
	return buf;
}

START_TEST(test_prefix_and_newline)
{
	log_info("hello %d", 42);
	ck_assert_str_eq(drain(), "tst: hello 42\n");
}
END_TEST

START_TEST(test_priority_filter)
{
	log_debug("hidden");
	log_warning("shown");
	ck_assert_str_eq(drain(), "tst: shown\n");
}
END_TEST

START_TEST(test_journal_prefix)
{
	log_set_journal_prefix(true);
	log_error("bad");
	/* journald adds the name itself: no prefix. */
	ck_assert_str_eq(drain(), "<3>bad\n");
}
END_TEST

START_TEST(test_errno_return)
{
	int r = log_error_errno(-ENOENT, "open %s", "x");

	ck_assert_int_eq(r, -ENOENT);
	ck_assert_str_eq(drain(), "tst: open x: No such file or directory\n");
	ck_assert_int_eq(log_error_errno(EACCES, "y"), -EACCES);
}
END_TEST

START_TEST(test_long_message_truncated)
{
	char big[3000];
	const char *out;

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_info("%s", big);
	out = drain();
	ck_assert_uint_le(strlen(out), 1024);
	ck_assert_int_eq(out[strlen(out) - 1], '\n');
}
END_TEST

START_TEST(test_errno_preserved)
{
	errno = EBUSY;
	log_info("x");
	ck_assert_int_eq(errno, EBUSY);
	drain();
}
END_TEST

#define SEC 1000000000ull

/* A flood about one uid: burst lines, then one summary when the window ends. */
START_TEST(test_ratelimit_per_uid)
{
	struct log_ratelimit rl;
	unsigned shown = 0;

	log_ratelimit_init(&rl, 10 * SEC, 3);
	for (int i = 0; i < 20000; i++)
		shown += log_ratelimit_allow(&rl, 1000, LOG_WARNING, 5 * SEC + (uint64_t)i);
	ck_assert_uint_eq(shown, 3);
	/* Another uid has its own budget; root is never limited. */
	ck_assert(log_ratelimit_allow(&rl, 1001, LOG_WARNING, 6 * SEC));
	for (int i = 0; i < 100; i++)
		ck_assert(log_ratelimit_allow(&rl, 0, LOG_WARNING, 6 * SEC));
	/* Nothing said before the window ends... */
	log_ratelimit_flush(&rl, 14 * SEC);
	ck_assert_str_eq(drain(), "");
	/* ...then one line. */
	log_ratelimit_flush(&rl, 15 * SEC);
	ck_assert_str_eq(drain(), "tst: suppressed 19997 messages about uid 1000\n");
	log_ratelimit_flush(&rl, 30 * SEC);
	ck_assert_str_eq(drain(), "");
	/* A new window: a fresh budget. */
	ck_assert(log_ratelimit_allow(&rl, 1000, LOG_WARNING, 31 * SEC));
}
END_TEST

/* The summary of an ended window comes with the next message, flush or not;
 * it carries the most urgent priority suppressed. */
START_TEST(test_ratelimit_summary_on_next_message)
{
	struct log_ratelimit rl;

	log_set_journal_prefix(true);
	log_ratelimit_init(&rl, 10 * SEC, 1);
	ck_assert(log_ratelimit_allow(&rl, 7, LOG_NOTICE, 1 * SEC));
	ck_assert(!log_ratelimit_allow(&rl, 7, LOG_NOTICE, 2 * SEC));
	ck_assert(!log_ratelimit_allow(&rl, 7, LOG_WARNING, 3 * SEC));
	ck_assert(!log_ratelimit_allow(&rl, 7, LOG_NOTICE, 4 * SEC));
	ck_assert_str_eq(drain(), "");
	ck_assert(log_ratelimit_allow(&rl, 7, LOG_NOTICE, 12 * SEC));
	ck_assert_str_eq(drain(), "<4>suppressed 3 messages about uid 7\n");
}
END_TEST

/* More uids than slots: the rest share one, and are summed up together. */
START_TEST(test_ratelimit_other_uids)
{
	struct log_ratelimit rl;
	unsigned shown = 0;

	log_ratelimit_init(&rl, 10 * SEC, 1);
	/* One message each for the uids that fill the slots, three for the rest. */
	for (uid_t u = 1; u <= LOG_RATELIMIT_SLOTS + 50; u++)
		for (int i = 0; i < (u <= LOG_RATELIMIT_SLOTS ? 1 : 3); i++)
			shown += log_ratelimit_allow(&rl, u, LOG_WARNING, 1 * SEC);
	ck_assert_uint_eq(shown, LOG_RATELIMIT_SLOTS + 1);
	log_ratelimit_flush(&rl, 20 * SEC);
	ck_assert_str_eq(drain(), "tst: suppressed 149 messages about other uids\n");
}
END_TEST

/* log_uid: limited lines; debug ones (filtered) neither shown nor counted. */
START_TEST(test_log_uid)
{
	struct log_ratelimit rl;

	log_ratelimit_init(&rl, 3600 * SEC, 2);
	for (int i = 0; i < 5; i++)
		log_uid(&rl, 1000, LOG_DEBUG, "debug %d", i);
	for (int i = 0; i < 5; i++)
		log_uid(&rl, 1000, LOG_WARNING, "bad file %d", i);
	log_uid(NULL, 1000, LOG_WARNING, "unlimited");
	ck_assert_str_eq(drain(), "tst: bad file 0\ntst: bad file 1\ntst: unlimited\n");
	ck_assert_uint_eq(rl.slots[0].suppressed, 3);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_prefix_and_newline);
	tcase_add_test(tc, test_priority_filter);
	tcase_add_test(tc, test_journal_prefix);
	tcase_add_test(tc, test_errno_return);
	tcase_add_test(tc, test_long_message_truncated);
	tcase_add_test(tc, test_errno_preserved);
	tcase_add_test(tc, test_ratelimit_per_uid);
	tcase_add_test(tc, test_ratelimit_summary_on_next_message);
	tcase_add_test(tc, test_ratelimit_other_uids);
	tcase_add_test(tc, test_log_uid);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
