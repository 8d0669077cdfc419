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
	ck_assert_str_eq(drain(), "<3>tst: bad\n");
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
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
