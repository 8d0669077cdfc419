/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"

static const struct {
	const char *vendor;
	unsigned family, model, stepping;
	bool broken;
} models[] = {
	{ "GenuineIntel", 6, 0x3c, 3, true },   /* Haswell client */
	{ "GenuineIntel", 6, 0x45, 1, true },
	{ "GenuineIntel", 6, 0x46, 1, true },
	{ "GenuineIntel", 6, 0x3f, 0, true },   /* Haswell-EP before E7 v3 */
	{ "GenuineIntel", 6, 0x3f, 2, true },
	{ "GenuineIntel", 6, 0x3f, 3, true },
	{ "GenuineIntel", 6, 0x3f, 4, false },  /* E7 v3: TSX works */
	{ "GenuineIntel", 6, 0x3f, 5, false },
	{ "GenuineIntel", 6, 0x4f, 1, false },  /* Broadwell-EP */
	{ "GenuineIntel", 6, 0x55, 4, true },   /* Skylake-SP: TSX memory-ordering notice */
	{ "GenuineIntel", 6, 0x55, 5, true },
	{ "GenuineIntel", 6, 0x55, 6, false },  /* Cascade Lake stepping 6+ */
	{ "GenuineIntel", 6, 0x55, 7, false },
	{ "GenuineIntel", 6, 0x4e, 3, true },   /* Skylake client */
	{ "GenuineIntel", 6, 0x5e, 3, true },
	{ "GenuineIntel", 6, 0x8e, 9, true },   /* Kaby Lake client */
	{ "GenuineIntel", 6, 0x8e, 0xc, true }, /* Whiskey Lake (i7-8665U) */
	{ "GenuineIntel", 6, 0x8e, 0xd, false },
	{ "GenuineIntel", 6, 0x9e, 0xa, true }, /* Coffee Lake */
	{ "GenuineIntel", 6, 0x9e, 0xc, true },
	{ "GenuineIntel", 6, 0x9e, 0xd, false },
	{ "GenuineIntel", 6, 0x6a, 6, false },  /* Ice Lake-SP */
	{ "GenuineIntel", 6, 0x8f, 8, false },  /* Sapphire Rapids */
	{ "GenuineIntel", 15, 0x3c, 3, false }, /* right model, wrong family */
	{ "AuthenticAMD", 6, 0x3c, 3, false },
	{ "AuthenticAMD", 6, 0x3f, 2, false },
	{ "AuthenticAMD", 25, 0x21, 0, false },
	{ "", 6, 0x3c, 3, false },
};

START_TEST(test_model_list)
{
	ck_assert_msg(elide_hw_model_is_broken(models[_i].vendor, models[_i].family,
					       models[_i].model, models[_i].stepping) == models[_i].broken,
		      "%s family %u model 0x%x stepping %u: expected %s", models[_i].vendor,
		      models[_i].family, models[_i].model, models[_i].stepping,
		      models[_i].broken ? "broken" : "fine");
}
END_TEST

START_TEST(test_model_null_vendor)
{
	ck_assert(!elide_hw_model_is_broken(NULL, 6, 0x3c, 3));
}
END_TEST

static const struct {
	const char *tunables;
	bool enabled;
} tunables[] = {
	{ NULL, false },
	{ "", false },
	{ "glibc.elision.enable=1", true },
	{ "glibc.malloc.check=3:glibc.elision.enable=1", true },
	{ "glibc.elision.enable=1:glibc.malloc.check=3", true },
	{ "glibc.elision.enable=0", false },
	{ "glibc.elision.enable=10", false },   /* out of range: ignored */
	{ "glibc.elision.enable=01", true },    /* glibc reads C notation */
	{ "glibc.elision.enable=0x1", true },
	{ "glibc.elision.enable=0X1", true },
	{ "glibc.elision.enable= 1", true },
	{ "glibc.elision.enable=+1", true },
	{ "glibc.elision.enable=1x", true },    /* parsing stops at the x */
	{ "glibc.elision.enable=-1", false },
	{ "glibc.elision.enable=2", false },
	{ "glibc.elision.enable=1:glibc.elision.enable=2", true },  /* 2 ignored, 1 stays */
	{ "glibc.elision.enable=1:glibc.elision.enable=0", false }, /* the last one wins */
	{ "glibc.elision.enable=1:glibc.elision.enable=", false },  /* no digit reads as 0 */
	{ "glibc.elision.enable=0x", false },
	{ "xglibc.elision.enable=1", false },
	{ "glibc.elision.enable=", false },
	{ "glibc.elision.enable", false },
	{ "glibc.elision.skip_lock_busy=3", false },
	{ ":::", false },
	{ "glibc.elision.enable=0:glibc.elision.enable=1", true },
};

START_TEST(test_tunables)
{
	ck_assert_msg(elide_glibc_elision_enabled(tunables[_i].tunables) == tunables[_i].enabled,
		      "'%s': expected %d", tunables[_i].tunables ? tunables[_i].tunables : "(null)",
		      tunables[_i].enabled);
}
END_TEST

static void assert_consistent(const struct elide_hw *hw)
{
	ck_assert_ptr_nonnull(hw->reason);
	ck_assert_uint_gt(strlen(hw->reason), 0);
	ck_assert_ptr_null(strchr(hw->reason, '\n'));
	ck_assert_uint_lt(strlen(hw->vendor), sizeof(hw->vendor));
	ck_assert(hw->model_broken == elide_hw_model_is_broken(hw->vendor, hw->family,
							       hw->model, hw->stepping));
	if (hw->rtm_usable) {
		ck_assert(hw->cpuid_rtm);
		ck_assert(!hw->rtm_always_abort);
		ck_assert(!hw->model_broken);
		ck_assert(hw->probe_done);
		ck_assert_uint_ge(hw->probe_commits, 1);
	}
	/* The probe must never run where an xbegin could #UD or is pointless. */
	if (!hw->cpuid_rtm || hw->rtm_always_abort || hw->model_broken)
		ck_assert(!hw->probe_done);
	ck_assert_uint_le(hw->probe_commits, hw->probe_tries);
	ck_assert_uint_le(hw->probe_tries, 16);
	if (!hw->probe_done)
		ck_assert_uint_eq(hw->probe_tries, 0);
}

START_TEST(test_detect)
{
	struct elide_hw hw, again;

	unsetenv("ELIDE_FAKE_NO_RTM");
	memset(&hw, 0xa5, sizeof(hw));
	ck_assert_int_eq(elide_hw_detect(&hw), 0);
	assert_consistent(&hw);
	if (!hw.cpuid_rtm)
		ck_assert_str_eq(hw.reason, "CPU has no RTM (CPUID.7.0:EBX[11] clear)");
	if (hw.probe_done)
		ck_assert_ptr_nonnull(strstr(hw.reason, "probe: "));

	/* CPUID facts do not change between calls. */
	ck_assert_int_eq(elide_hw_detect(&again), 0);
	ck_assert_str_eq(hw.vendor, again.vendor);
	ck_assert_uint_eq(hw.family, again.family);
	ck_assert_uint_eq(hw.model, again.model);
	ck_assert_uint_eq(hw.stepping, again.stepping);
	ck_assert(hw.cpuid_rtm == again.cpuid_rtm);
	ck_assert(hw.rtm_always_abort == again.rtm_always_abort);
}
END_TEST

START_TEST(test_detect_fake_no_rtm)
{
	struct elide_hw real, hw;

	unsetenv("ELIDE_FAKE_NO_RTM");
	ck_assert_int_eq(elide_hw_detect(&real), 0);

	ck_assert_int_eq(setenv("ELIDE_FAKE_NO_RTM", "1", 1), 0);
	ck_assert_int_eq(elide_hw_detect(&hw), 0);
	unsetenv("ELIDE_FAKE_NO_RTM");

	assert_consistent(&hw);
	ck_assert(!hw.rtm_usable);
	ck_assert(!hw.probe_done);
	ck_assert_str_eq(hw.reason, "disabled by ELIDE_FAKE_NO_RTM");
	/* CPUID fields are still reported. */
	ck_assert_str_eq(hw.vendor, real.vendor);
	ck_assert_uint_eq(hw.family, real.family);
	ck_assert_uint_eq(hw.model, real.model);
	ck_assert(hw.cpuid_rtm == real.cpuid_rtm);
}
END_TEST

static Suite *hw_suite(void)
{
	Suite *s = suite_create("hw");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_model_list, 0, (int)(sizeof(models) / sizeof(models[0])));
	tcase_add_test(tc, test_model_null_vendor);
	tcase_add_loop_test(tc, test_tunables, 0, (int)(sizeof(tunables) / sizeof(tunables[0])));
	tcase_add_test(tc, test_detect);
	tcase_add_test(tc, test_detect_fake_no_rtm);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hw_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
