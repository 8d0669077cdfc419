/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The elide.h annotation API.  Under libelide: names and policies are
 * accepted (0), bad policies and NULL locks are -EINVAL, lock types
 * libelide never elides refuse a policy with -EINVAL, and annotated locks
 * keep working under every policy.  The program then re-executes itself
 * without libelide in LD_PRELOAD: every call is -ENOSYS and the program
 * still works.  A third run limits the lock table (max_locks=16): each
 * annotation then succeeds or says -ENOSPC, and every lock still works.
 */
#include <sys/wait.h>

#include "testutil.h"

#define MANY 64

static void mutex_works(pthread_mutex_t *m)
{
	struct results rs = { 0 };

	hammer_lock(m, NULL, 1, 2, 20000);
	check_ret(pthread_mutex_lock(m), 0);
	record(&rs, pthread_mutex_trylock(m), EBUSY);
	check_ret(pthread_mutex_unlock(m), 0);
	results_check(&rs);
}

static void rwlock_works(pthread_rwlock_t *rw)
{
	struct results rs = { 0 };

	hammer_lock(NULL, rw, 1, 2, 20000);
	check_ret(pthread_rwlock_wrlock(rw), 0);
	record(&rs, pthread_rwlock_trywrlock(rw), EBUSY);
	record(&rs, pthread_rwlock_tryrdlock(rw), EBUSY);
	check_ret(pthread_rwlock_unlock(rw), 0);
	results_check(&rs);
}

static void with_libelide(void)
{
	static const enum elide_policy policies[] = {
		ELIDE_POLICY_NEVER, ELIDE_POLICY_ALWAYS, ELIDE_POLICY_ADAPTIVE,
	};
	char longname[ELIDE_NAME_MAX * 2];
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, e, r;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	struct results rs = { 0 };
	pthread_mutexattr_t a;
	int ret;

	check_ret(elide_mutex_set_name(&m, "test-annotate.m"), 0);
	check_ret(elide_rwlock_set_name(&rw, "test-annotate.rw"), 0);
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	check_ret(elide_mutex_set_name(&m, longname), 0);

	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		check_ret(elide_mutex_set_policy(&m, policies[i]), 0);
		check_ret(elide_rwlock_set_policy(&rw, policies[i]), 0);
		mutex_works(&m);
		rwlock_works(&rw);
		printf("test-annotate: policy %d accepted, locks work\n", policies[i]);
	}
	/* Renaming keeps the policy and the lock. */
	check_ret(elide_mutex_set_name(&m, "renamed"), 0);
	mutex_works(&m);

	check_ret(elide_mutex_set_policy(&m, (enum elide_policy)7), -EINVAL);
	check_ret(elide_rwlock_set_policy(&rw, (enum elide_policy)7), -EINVAL);
	check_ret(elide_mutex_set_policy(&m, (enum elide_policy)-5), -EINVAL);
	check_ret(elide_mutex_set_policy(NULL, ELIDE_POLICY_ALWAYS), -EINVAL);
	check_ret(elide_rwlock_set_policy(NULL, ELIDE_POLICY_ALWAYS), -EINVAL);
	check_ret(elide_mutex_set_name(NULL, "x"), -EINVAL);
	check_ret(elide_rwlock_set_name(NULL, "x"), -EINVAL);
	mutex_works(&m);
	rwlock_works(&rw);
	printf("test-annotate: bad policy and NULL lock: -EINVAL\n");

	/* Types libelide never elides refuse a policy. */
	check_ret(pthread_mutexattr_init(&a), 0);
	check_ret(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK), 0);
	check_ret(pthread_mutex_init(&e, &a), 0);
	check_ret(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE), 0);
	check_ret(pthread_mutex_init(&r, &a), 0);
	check_ret(pthread_mutexattr_destroy(&a), 0);
	check_ret(elide_mutex_set_policy(&e, ELIDE_POLICY_ALWAYS), -EINVAL);
	check_ret(elide_mutex_set_policy(&r, ELIDE_POLICY_ALWAYS), -EINVAL);
	/*
	 * A name alone may be accepted, but must not make them elidable:
	 * after contention they still answer as glibc does.  Recorded, as
	 * an elided section would hide a failing check (testutil.h).
	 */
	ret = elide_mutex_set_name(&e, "errorcheck");
	if (ret != 0 && ret != -EINVAL)
		fail("elide_mutex_set_name(errorcheck mutex) = %d", ret);
	ret = elide_mutex_set_name(&r, "recursive");
	if (ret != 0 && ret != -EINVAL)
		fail("elide_mutex_set_name(recursive mutex) = %d", ret);
	for (int round = 0; round < 3; round++) {
		hammer_lock(&e, NULL, 1, 2, 20000);
		hammer_lock(&r, NULL, 2, 2, 20000);
		check_ret(pthread_mutex_lock(&e), 0);
		record(&rs, pthread_mutex_lock(&e), EDEADLK);
		record(&rs, pthread_mutex_unlock(&e), 0);
		record(&rs, pthread_mutex_unlock(&e), EPERM);
		results_check(&rs);
		check_ret(pthread_mutex_lock(&r), 0);
		record(&rs, pthread_mutex_lock(&r), 0);
		record(&rs, pthread_mutex_unlock(&r), 0);
		record(&rs, pthread_mutex_unlock(&r), 0);
		record(&rs, pthread_mutex_unlock(&r), EPERM);
		results_check(&rs);
	}
	check_ret(pthread_mutex_destroy(&e), 0);
	check_ret(pthread_mutex_destroy(&r), 0);
	printf("test-annotate: errorcheck/recursive mutexes refuse a policy (-EINVAL) and keep their semantics\n");

	check_ret(pthread_mutex_destroy(&m), 0);
	check_ret(pthread_rwlock_destroy(&rw), 0);
}

static void without_libelide(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

	check_ret(elide_active(), -ENOSYS);
	check_ret(elide_mutex_set_name(&m, "m"), -ENOSYS);
	check_ret(elide_mutex_set_policy(&m, ELIDE_POLICY_ALWAYS), -ENOSYS);
	check_ret(elide_mutex_set_policy(&m, (enum elide_policy)7), -ENOSYS);
	check_ret(elide_mutex_set_policy(NULL, ELIDE_POLICY_NEVER), -ENOSYS);
	check_ret(elide_rwlock_set_name(&rw, "rw"), -ENOSYS);
	check_ret(elide_rwlock_set_policy(&rw, ELIDE_POLICY_NEVER), -ENOSYS);
	mutex_works(&m);
	rwlock_works(&rw);
	printf("test-annotate: without libelide every call is -ENOSYS and the locks work\n");
}

static void small_table(void)
{
	pthread_mutex_t *ms = xmalloc(MANY * sizeof(*ms));
	int ok = 0, nospc = 0;

	for (int i = 0; i < MANY; i++) {
		char name[32];
		int r;

		check_ret(pthread_mutex_init(&ms[i], NULL), 0);
		snprintf(name, sizeof(name), "many-%d", i);
		r = elide_mutex_set_name(&ms[i], name);
		if (r == 0)
			ok++;
		else if (r == -ENOSPC)
			nospc++;
		else
			fail("elide_mutex_set_name on lock %d of %d with max_locks=16: %d", i, MANY, r);
	}
	for (int i = 0; i < MANY; i++) {
		check_ret(pthread_mutex_lock(&ms[i]), 0);
		check_ret(pthread_mutex_trylock(&ms[i]), EBUSY);
		check_ret(pthread_mutex_unlock(&ms[i]), 0);
	}
	hammer_lock(&ms[MANY - 1], NULL, 1, 2, 20000);
	for (int i = 0; i < MANY; i++)
		check_ret(pthread_mutex_destroy(&ms[i]), 0);
	free(ms);
	printf("test-annotate: max_locks=16: %d named, %d -ENOSPC, all locks work\n", ok, nospc);
}

/* Re-execute with `mode` as argv[1], after changing the environment as it needs. */
static void run_child(const char *mode)
{
	char *argv[] = { (char *)"test-annotate", (char *)mode, NULL };
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		fail("fork: %m");
	if (pid == 0) {
		if (strcmp(mode, "--no-preload") == 0) {
			/* Keep other preloads (the ASan runtime); drop libelide. */
			const char *old = getenv("LD_PRELOAD");
			char *keep = xmalloc(old ? strlen(old) + 1 : 1), *copy, *tok, *save = NULL;

			copy = strdup(old ? old : "");
			if (!copy)
				_exit(3);
			for (tok = strtok_r(copy, " :", &save); tok; tok = strtok_r(NULL, " :", &save)) {
				if (strstr(tok, "libelide"))
					continue;
				if (*keep)
					strcat(keep, " ");
				strcat(keep, tok);
			}
			if (*keep)
				setenv("LD_PRELOAD", keep, 1);
			else
				unsetenv("LD_PRELOAD");
		} else {
			const char *old = getenv("ELIDE");
			char *elide_env;

			if (asprintf(&elide_env, "%s%smax_locks=16", old ? old : "",
				     old && *old ? "," : "") < 0)
				_exit(3);
			setenv("ELIDE", elide_env, 1);
		}
		execv("/proc/self/exe", argv);
		fprintf(stderr, "execv /proc/self/exe: %m\n");
		_exit(4);
	}
	if (waitpid(pid, &status, 0) != pid)
		fail("waitpid: %m");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("child %s failed (status 0x%x)", mode, status);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--no-preload") == 0) {
		watchdog(WATCHDOG_SECONDS);
		without_libelide();
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--small-table") == 0) {
		test_start("test-annotate(max_locks=16)", "annotating more locks than the table holds");
		small_table();
		return 0;
	}

	if (test_start("test-annotate",
		       "elide.h: names and policies, -EINVAL, -ENOSPC, -ENOSYS without libelide") == -ENOSYS) {
		/* Only when a developer runs it by hand with ELIDE_TEST_NO_PRELOAD=1. */
		without_libelide();
		return 0;
	}
	with_libelide();
	run_child("--no-preload");
	run_child("--small-table");
	printf("test-annotate: PASS\n");
	return 0;
}
