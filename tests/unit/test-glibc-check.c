/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * glibc-check.c without LD_PRELOAD: the version parser and verdicts, the
 * index slots against glibc's own field names (where this glibc still has
 * them), and the behaviour probe against the glibc this test runs on.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "glibc-abi.h"

/* libelide passes resolve.c's dlsym(RTLD_NEXT) table; without it, glibc's are the public names. */
static const struct glibc_lock_fns glibc_fns = {
	.mutex_init = pthread_mutex_init,
	.mutex_destroy = pthread_mutex_destroy,
	.mutex_lock = pthread_mutex_lock,
	.mutex_trylock = pthread_mutex_trylock,
	.mutex_unlock = pthread_mutex_unlock,
	.mutexattr_settype = pthread_mutexattr_settype,
	.mutexattr_destroy = pthread_mutexattr_destroy,
	.rwlock_init = pthread_rwlock_init,
	.rwlock_destroy = pthread_rwlock_destroy,
	.rwlock_rdlock = pthread_rwlock_rdlock,
	.rwlock_trywrlock = pthread_rwlock_trywrlock,
	.rwlock_wrlock = pthread_rwlock_wrlock,
	.rwlock_unlock = pthread_rwlock_unlock,
};

/* A glibc whose lock leaves no owner: libelide must not write one itself. */
static int lock_without_owner(pthread_mutex_t *m)
{
	int r = pthread_mutex_lock(m);

	m->__data.__owner = 0;
	return r;
}

/* rwlocks whose read side counts another way. */
static int rdlock_counting_twice(pthread_rwlock_t *rw)
{
	int r = pthread_rwlock_rdlock(rw);

	rw->__data.__readers += 1u << 3;
	return r;
}

static int rdlock_touching_writers(pthread_rwlock_t *rw)
{
	int r = pthread_rwlock_rdlock(rw);

	rw->__data.__writers++;
	return r;
}

/* A writer that leaves no write phase behind. */
static int unlock_ending_write_phase(pthread_rwlock_t *rw)
{
	bool writer = rw->__data.__cur_writer != 0;
	int r = pthread_rwlock_unlock(rw);

	if (writer)
		rw->__data.__readers &= ~1u;
	return r;
}

/* One whose unlock leaves __nusers counted. */
static int unlock_keeping_users(pthread_mutex_t *m)
{
	int r = pthread_mutex_unlock(m);

	m->__data.__nusers++;
	return r;
}

/* One whose trylock writes a byte libelide's path does not. */
static int trylock_touching_spins(pthread_mutex_t *m)
{
	int r = pthread_mutex_trylock(m);

	m->__data.__spins = 7;
	return r;
}

/* A glibc that spins on default mutexes too: __spins is its estimate, so
 * a nonzero one is overwritten (here: decayed to 0) by every lock. */
static int lock_owning_spins(pthread_mutex_t *m)
{
	int r = pthread_mutex_lock(m);

	if (m->__data.__spins != 0)
		m->__data.__spins = 0;
	return r;
}

/* An initializer that keeps the bytes it finds in __spins. */
static int init_keeping_spins(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
	short spins = m->__data.__spins;
	int r = pthread_mutex_init(m, attr);

	m->__data.__spins = spins;
	return r;
}

static const struct {
	const char *s;
	unsigned major, minor;
} good[] = {
	{ "2.28", 2, 28 }, { "2.36", 2, 36 }, { "2.43", 2, 43 }, { "2.42.9000", 2, 42 }, { "2.27", 2, 27 },
	{ "2.44", 2, 44 }, { "3.0", 3, 0 }, { "2.36.1.2", 2, 36 },
};

START_TEST(test_parse_good)
{
	unsigned major = 99, minor = 99;

	ck_assert_int_eq(glibc_parse_version(good[_i].s, &major, &minor), 0);
	ck_assert_uint_eq(major, good[_i].major);
	ck_assert_uint_eq(minor, good[_i].minor);
}
END_TEST

static const char *const garbage[] = {
	"", "2", "2.", ".36", "2.36x", " 2.36", "2.36 ", "2.36.", "2..36", "x.y", "2,36", "-2.36", "2.-36",
	"1234567.1", "2.1234567", "glibc 2.36",
};

START_TEST(test_parse_garbage)
{
	unsigned major = 99, minor = 99;

	ck_assert_int_eq(glibc_parse_version(garbage[_i], &major, &minor), -EINVAL);
	ck_assert_uint_eq(major, 99);
	ck_assert_uint_eq(minor, 99);
}
END_TEST

START_TEST(test_parse_null)
{
	unsigned major, minor;

	ck_assert_int_eq(glibc_parse_version(NULL, &major, &minor), -EINVAL);
	ck_assert_ptr_nonnull(glibc_version_reason(NULL, &major, &minor));
}
END_TEST

START_TEST(test_verdict_accepted)
{
	static const char *const ok[] = { "2.28", "2.29", "2.36", "2.42", "2.42.9000", "2.43" };
	unsigned major, minor;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		major = minor = 0;
		ck_assert_msg(glibc_version_reason(ok[i], &major, &minor) == NULL, "%s rejected", ok[i]);
		ck_assert_uint_eq(major, 2);
		ck_assert_uint_ge(minor, 28);
	}
}
END_TEST

START_TEST(test_verdict_rejected)
{
	unsigned major, minor;

	ck_assert_str_eq(glibc_version_reason("2.44", &major, &minor),
			 "glibc 2.44 is newer than the 2.43 this libelide was verified against");
	ck_assert_str_eq(glibc_version_reason("3.0", &major, &minor),
			 "glibc 3.0 is newer than the 2.43 this libelide was verified against");
	ck_assert_str_eq(glibc_version_reason("2.27", &major, &minor),
			 "glibc 2.27 is older than the 2.28 this libelide was verified against");
	ck_assert_str_eq(glibc_version_reason("1.99", &major, &minor),
			 "glibc 1.99 is older than the 2.28 this libelide was verified against");
	ck_assert_str_eq(glibc_version_reason("2.36-bogus", &major, &minor),
			 "glibc version '2.36-bogus' cannot be parsed; libelide was verified against glibc 2.28 .. 2.43");
}
END_TEST

START_TEST(test_verdict_long_garbage)
{
	char version[600];
	unsigned major, minor;
	const char *why;

	memset(version, 'x', sizeof(version) - 1);
	version[sizeof(version) - 1] = '\0';
	why = glibc_version_reason(version, &major, &minor);
	ck_assert_ptr_nonnull(why);
	ck_assert_uint_lt(strlen(why), 160);
	ck_assert(strncmp(why, "glibc version 'xxx", 18) == 0);
}
END_TEST

/* The offsets name the same bytes as the fields of the headers we were built against. */
START_TEST(test_slots)
{
	pthread_mutex_t m;
	pthread_rwlock_t rw;

	ck_assert_int_eq((char *)glibc_mutex_idx(&m) - (char *)&m, 22);
	ck_assert_int_eq((char *)glibc_rwlock_idx(&rw, false) - (char *)&rw, 34);
	ck_assert_int_eq((char *)glibc_rwlock_idx(&rw, true) - (char *)&rw, 36);
#if __GLIBC__ == 2 && __GLIBC_MINOR__ < 43
	ck_assert_ptr_eq(glibc_mutex_idx(&m), &m.__data.__elision);
	ck_assert_ptr_eq(glibc_rwlock_idx(&rw, false), &rw.__data.__pad1[1]);
	ck_assert_ptr_eq(glibc_rwlock_idx(&rw, true), &rw.__data.__pad1[3]);
#endif
	memset(&m, 0, sizeof(m));
	*glibc_mutex_idx(&m) = 0x1234;
	ck_assert_uint_eq(glibc_mutex_idx_load(&m), 0x1234);
}
END_TEST

/* The glibc running this test is one libelide supports (2.28 .. 2.43). */
START_TEST(test_default_mutex_this_glibc)
{
	int tid = (int)syscall(SYS_gettid);
	const char *why = glibc_check_default_mutex(&glibc_fns, tid);

	ck_assert_msg(why == NULL, "%s", why);
	/* Another thread's id is not what glibc writes. */
	why = glibc_check_default_mutex(&glibc_fns, tid + 1);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "pthread_mutex_lock of a free default mutex"));
}
END_TEST

START_TEST(test_default_mutex_other_protocols)
{
	int tid = (int)syscall(SYS_gettid);
	struct glibc_lock_fns fns = glibc_fns;
	const char *why;

	fns.mutex_lock = lock_without_owner;
	why = glibc_check_default_mutex(&fns, tid);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "pthread_mutex_lock"));

	fns = glibc_fns;
	fns.mutex_unlock = unlock_keeping_users;
	why = glibc_check_default_mutex(&fns, tid);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "pthread_mutex_unlock of a default mutex"));

	fns = glibc_fns;
	fns.mutex_trylock = trylock_touching_spins;
	why = glibc_check_default_mutex(&fns, tid);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "pthread_mutex_trylock"));
}
END_TEST

/* libelide keeps a backed-off default mutex's skip count in __spins: only
 * where glibc leaves a nonzero one alone and its initializer clears it. */
START_TEST(test_default_mutex_skip_bytes)
{
	int tid = (int)syscall(SYS_gettid);
	struct glibc_lock_fns fns = glibc_fns;
	const char *why;
	pthread_mutex_t m;

	ck_assert_int_eq(offsetof(pthread_mutex_t, __data.__spins), GLIBC_MUTEX_SKIP_OFFSET);
	memset(&m, 0, sizeof(m));
	glibc_mutex_skip_store(&m, 32768);
	ck_assert_uint_eq(glibc_mutex_skip_load(&m), 32768);
	ck_assert_uint_eq(glibc_mutex_idx_load(&m), 0);

	fns.mutex_lock = lock_owning_spins;
	why = glibc_check_default_mutex(&fns, tid);
	ck_assert_ptr_nonnull(why);
	ck_assert_msg(strstr(why, "skip bytes (20-21, __spins)") != NULL, "%s", why);

	fns = glibc_fns;
	fns.mutex_init = init_keeping_spins;
	why = glibc_check_default_mutex(&fns, tid);
	ck_assert_ptr_nonnull(why);
	ck_assert_msg(strstr(why, "does not clear the skip bytes") != NULL, "%s", why);
}
END_TEST

START_TEST(test_default_rwlock_this_glibc)
{
	int tid = (int)syscall(SYS_gettid);
	const char *why = glibc_check_default_rwlock(&glibc_fns, tid);

	ck_assert_msg(why == NULL, "%s", why);
	/* Another thread's id is not what glibc writes for a writer. */
	why = glibc_check_default_rwlock(&glibc_fns, tid + 1);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "pthread_rwlock_wrlock of a free rwlock"));
}
END_TEST

START_TEST(test_default_rwlock_other_protocols)
{
	int tid = (int)syscall(SYS_gettid);
	struct glibc_lock_fns fns = glibc_fns;
	const char *why;

	fns.rwlock_rdlock = rdlock_counting_twice;
	why = glibc_check_default_rwlock(&fns, tid);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "pthread_rwlock_rdlock of a free rwlock"));

	fns = glibc_fns;
	fns.rwlock_rdlock = rdlock_touching_writers;
	why = glibc_check_default_rwlock(&fns, tid);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "nothing else changed"));

	fns = glibc_fns;
	fns.rwlock_unlock = unlock_ending_write_phase;
	why = glibc_check_default_rwlock(&fns, tid);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "write phase"));
}
END_TEST

START_TEST(test_probe_this_glibc)
{
	struct glibc_facts facts;
	const char *why;

	memset(&facts, 0xff, sizeof(facts));
	why = glibc_check(&facts, &glibc_fns);
	ck_assert_msg(why == NULL, "glibc_check: %s", why);
	ck_assert(facts.checked);
	ck_assert_uint_eq(facts.major, 2);
	ck_assert_uint_ge(facts.minor, 28);
	/* glibc 2.43 stopped tagging PTHREAD_MUTEX_NORMAL with NO_ELISION_NP. */
	ck_assert_int_eq(facts.normal_kind_tagged, facts.minor <= 42);
}
END_TEST

static Suite *glibc_check_suite(void)
{
	Suite *s = suite_create("glibc-check");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_parse_good, 0, (int)(sizeof(good) / sizeof(good[0])));
	tcase_add_loop_test(tc, test_parse_garbage, 0, (int)(sizeof(garbage) / sizeof(garbage[0])));
	tcase_add_test(tc, test_parse_null);
	tcase_add_test(tc, test_verdict_accepted);
	tcase_add_test(tc, test_verdict_rejected);
	tcase_add_test(tc, test_verdict_long_garbage);
	tcase_add_test(tc, test_slots);
	tcase_add_test(tc, test_probe_this_glibc);
	tcase_add_test(tc, test_default_mutex_this_glibc);
	tcase_add_test(tc, test_default_mutex_other_protocols);
	tcase_add_test(tc, test_default_mutex_skip_bytes);
	tcase_add_test(tc, test_default_rwlock_this_glibc);
	tcase_add_test(tc, test_default_rwlock_other_protocols);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(glibc_check_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
