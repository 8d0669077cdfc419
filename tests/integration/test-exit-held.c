/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * exit() while other threads are inside (elided) critical sections, create
 * and destroy locks, or hold a lock themselves: exit handlers, libelide's
 * destructor and its exit report run beside them.  Each scenario runs in a
 * child process (with an alarm() watchdog) that must exit with status 0.
 */
#include <sys/wait.h>

#include "testutil.h"

#define NWORKERS 4
#define ROUNDS 10

enum scenario {
	MAIN_EXITS,            /* main calls exit(0), workers keep locking */
	MAIN_EXITS_HOLDING,    /* main calls exit(0) inside its own critical section */
	WORKER_EXITS_HOLDING,  /* a worker calls exit(0) inside a critical section */
	MAIN_EXITS_REPORT,     /* as MAIN_EXITS, re-exec'd with report=1 added to ELIDE */
	NSCENARIOS
};

static const char *const scenario_name[NSCENARIOS] = {
	[MAIN_EXITS] = "main exits while workers lock",
	[MAIN_EXITS_HOLDING] = "main exits holding the mutex",
	[WORKER_EXITS_HOLDING] = "a worker exits holding the mutex",
	[MAIN_EXITS_REPORT] = "main exits while workers lock, report=1",
};

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static long counter;             /* m */
static long rw_counter;          /* rw */
static _Atomic long progress;
static enum scenario current;

/* Runs at exit: a lock user in the exit path, as real programs have. */
static void at_exit_lock(void)
{
	if (current == MAIN_EXITS_HOLDING || current == WORKER_EXITS_HOLDING)
		return; /* the exiting thread holds m: relocking would deadlock */
	if (pthread_mutex_lock(&m) != 0)
		_exit(5);
	counter++;
	if (pthread_mutex_unlock(&m) != 0)
		_exit(6);
}

static void *worker(void *arg)
{
	long id = (long)(intptr_t)arg;

	for (long i = 0;; i++) {
		pthread_mutex_t local;

		check_ret(pthread_mutex_lock(&m), 0);
		counter++;
		if (current == WORKER_EXITS_HOLDING && id == 0 && i == 20000)
			exit(0);
		check_ret(pthread_mutex_unlock(&m), 0);

		check_ret(pthread_rwlock_wrlock(&rw), 0);
		rw_counter++;
		check_ret(pthread_rwlock_unlock(&rw), 0);
		check_ret(pthread_rwlock_rdlock(&rw), 0);
		check_ret(pthread_rwlock_unlock(&rw), 0);

		/* New locks keep appearing while the process exits. */
		if ((i & 63) == 0) {
			check_ret(pthread_mutex_init(&local, NULL), 0);
			check_ret(pthread_mutex_lock(&local), 0);
			check_ret(pthread_mutex_unlock(&local), 0);
			check_ret(pthread_mutex_destroy(&local), 0);
		}
		atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
	}
	return NULL;
}

static void __attribute__((noreturn)) run_scenario(enum scenario s)
{
	pthread_t t;

	watchdog(60);
	current = s;
	if (atexit(at_exit_lock))
		_exit(4);
	for (long i = 0; i < NWORKERS; i++) {
		t = xthread(worker, (void *)(intptr_t)i);
		check_ret(pthread_detach(t), 0);
	}

	if (s == WORKER_EXITS_HOLDING) {
		/* Bounded by the watchdog: a worker ends the process. */
		for (;;)
			pause();
	}

	/* Wait until the workers contend (bounded by the watchdog, not a clock). */
	while (atomic_load(&progress) < 20000)
		sched_yield();
	if (s == MAIN_EXITS_HOLDING) {
		check_ret(pthread_mutex_lock(&m), 0);
		counter++;
	}
	exit(0);
}

static void reexec_with_report(enum scenario s, const char *self)
{
	const char *old = getenv("ELIDE");
	char *elide_env, arg[16];
	char *argv[] = { (char *)self, (char *)"--child", arg, NULL };

	if (asprintf(&elide_env, "%s%sreport=1", old ? old : "", old && *old ? "," : "") < 0)
		_exit(7);
	setenv("ELIDE", elide_env, 1);
	snprintf(arg, sizeof(arg), "%d", (int)s);
	execv("/proc/self/exe", argv);
	fprintf(stderr, "execv /proc/self/exe: %m\n");
	_exit(8);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--child") == 0) {
		int s = atoi(argv[2]);

		if (s < 0 || s >= NSCENARIOS)
			return 2;
		run_scenario((enum scenario)s);
	}

	test_start("test-exit-held",
		   "exit(0) while threads hold or take (elided) locks exits with status 0, no hang");

	for (int s = 0; s < NSCENARIOS; s++) {
		for (int round = 0; round < ROUNDS; round++) {
			int status;
			pid_t pid = fork();

			if (pid < 0)
				fail("fork: %m");
			if (pid == 0) {
				if (s == MAIN_EXITS_REPORT)
					reexec_with_report((enum scenario)s, argv[0]);
				run_scenario((enum scenario)s);
			}
			if (waitpid(pid, &status, 0) != pid)
				fail("waitpid: %m");
			if (WIFSIGNALED(status))
				fail("%s: child killed by signal %d (%s)%s", scenario_name[s], WTERMSIG(status),
				     strsignal(WTERMSIG(status)),
				     WTERMSIG(status) == SIGALRM ? ": it hung" : "");
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				fail("%s: child exit status %d", scenario_name[s], WEXITSTATUS(status));
		}
		printf("test-exit-held: %s: %d children exited with status 0\n", scenario_name[s], ROUNDS);
	}
	printf("test-exit-held: PASS\n");
	return 0;
}
