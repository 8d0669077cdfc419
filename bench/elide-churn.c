/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elide-churn: starts short-lived processes at a fixed rate, the load of a
 * host where every program runs with libelide (bench/churn.sh).  Children
 * inherit the environment (LD_PRELOAD, ELIDE_RUNTIME_DIR), cycle through
 * a mix of /bin/true, sed over a small file and a tiny multi-threaded
 * program, and are reaped as they end.  The last line on stdout sums up:
 *
 *   spawned=N seconds=S rate=R failed=F max_live=M
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* posix_spawn takes char *const argv[]: writable copies of the words. */
static char w_true[] = "true", w_sed[] = "sed", w_e[] = "-e", w_script1[] = "s/lock/elided &/g",
	    w_script2[] = "y/abc/xyz/", w_worker[] = "churn-worker";

static unsigned long live, failed, max_live;

static void usage(FILE *f)
{
	fprintf(f, "Usage: elide-churn [OPTIONS]\n"
		   "\n"
		   "  --rate R          processes started per second (default 200)\n"
		   "  --seconds S       run for S seconds (default 10)\n"
		   "  --count N         start N processes instead (at the same rate)\n"
		   "  --mix T:S:W       weights of true, sed and the worker (default 1:1:1)\n"
		   "  --sed-input FILE  what sed reads (required when S > 0)\n"
		   "  --worker PATH     the multi-threaded program (required when W > 0)\n"
		   "  --worker-args A   its arguments, one word (default none)\n"
		   "  --worker-env V=X  an extra environment variable for the worker only\n"
		   "                    (repeatable, e.g. ELIDE_SIM_ABORT=0x6)\n"
		   "  --max-live M      at most M children at once (default 256)\n"
		   "  -h, --help        show this help\n");
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void account(int status)
{
	live--;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		failed++;
}

/* Reap what has ended; with block, wait for one first. */
static void reap(bool block)
{
	int status;
	pid_t pid;

	if (block && live > 0) {
		do
			pid = waitpid(-1, &status, 0);
		while (pid < 0 && errno == EINTR);
		if (pid > 0)
			account(status);
	}
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		account(status);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "rate", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'n' },
		{ "mix", required_argument, NULL, 'm' },
		{ "sed-input", required_argument, NULL, 'i' },
		{ "worker", required_argument, NULL, 'w' },
		{ "worker-args", required_argument, NULL, 'a' },
		{ "worker-env", required_argument, NULL, 'e' },
		{ "max-live", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	double rate = 200, seconds = 10, t0, t1;
	unsigned long count = 0, spawned = 0, max_children = 256;
	unsigned weights[3] = { 1, 1, 1 }, total;
	const char *sed_input = NULL, *worker = NULL, *worker_args = NULL;
	const char *extra_env[16];
	size_t nextra = 0, nenv = 0;
	char **worker_envp;
	posix_spawn_file_actions_t fa;
	int c;

	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (c) {
		case 'r':
			rate = strtod(optarg, NULL);
			break;
		case 's':
			seconds = strtod(optarg, NULL);
			break;
		case 'n':
			count = strtoul(optarg, NULL, 10);
			break;
		case 'm':
			if (sscanf(optarg, "%u:%u:%u", &weights[0], &weights[1], &weights[2]) != 3) {
				fprintf(stderr, "elide-churn: --mix wants T:S:W\n");
				return 2;
			}
			break;
		case 'i':
			sed_input = optarg;
			break;
		case 'w':
			worker = optarg;
			break;
		case 'a':
			worker_args = optarg;
			break;
		case 'e':
			if (nextra == sizeof(extra_env) / sizeof(extra_env[0])) {
				fprintf(stderr, "elide-churn: too many --worker-env\n");
				return 2;
			}
			extra_env[nextra++] = optarg;
			break;
		case 'l':
			max_children = strtoul(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	total = weights[0] + weights[1] + weights[2];
	if (optind < argc || rate <= 0 || (!count && seconds <= 0) || !total || !max_children ||
	    (weights[1] && !sed_input) || (weights[2] && !worker)) {
		usage(stderr);
		return 2;
	}

	while (environ[nenv])
		nenv++;
	worker_envp = calloc(nenv + nextra + 1, sizeof(char *));
	if (!worker_envp)
		return 1;
	memcpy(worker_envp, environ, nenv * sizeof(char *));
	for (size_t i = 0; i < nextra; i++)
		worker_envp[nenv + i] = (char *)extra_env[i];

	/* The children's output is not ours to print. */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	signal(SIGPIPE, SIG_IGN);

	t0 = now_s();
	for (;;) {
		double due = t0 + (double)spawned / rate, t = now_s();
		unsigned pick = (unsigned)(spawned % total);
		char *args[4] = { 0 };
		char **envp = environ;
		const char *path;
		bool is_sed = false;
		pid_t pid;
		int r;

		if (count ? spawned >= count : due - t0 >= seconds)
			break;
		reap(false);
		if (due > t) {
			struct timespec ts = { .tv_sec = (time_t)(due - t), .tv_nsec = (long)((due - t - (double)(time_t)(due - t)) * 1e9) };

			nanosleep(&ts, NULL);
			reap(false);
		}
		while (live >= max_children)
			reap(true);
		if (pick < weights[0]) {
			path = "/bin/true";
			args[0] = w_true;
		} else if (pick < weights[0] + weights[1]) {
			path = "/bin/sed";
			args[0] = w_sed;
			args[1] = w_e;
			args[2] = spawned % 2 ? w_script1 : w_script2;
			is_sed = true;
		} else {
			path = worker;
			args[0] = w_worker;
			args[1] = (char *)worker_args;
			envp = worker_envp;
		}
		/* sed reads the file on stdin: one argument list for both scripts. */
		if (is_sed) {
			posix_spawn_file_actions_t fs;

			posix_spawn_file_actions_init(&fs);
			posix_spawn_file_actions_addopen(&fs, STDIN_FILENO, sed_input, O_RDONLY, 0);
			posix_spawn_file_actions_addopen(&fs, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
			posix_spawn_file_actions_addopen(&fs, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
			r = posix_spawn(&pid, path, &fs, NULL, args, envp);
			posix_spawn_file_actions_destroy(&fs);
		} else {
			r = posix_spawn(&pid, path, &fa, NULL, args, envp);
		}
		spawned++;
		if (r != 0) {
			failed++;
			continue;
		}
		if (++live > max_live)
			max_live = live;
	}
	while (live > 0)
		reap(true);
	t1 = now_s();
	printf("spawned=%lu seconds=%.3f rate=%.1f failed=%lu max_live=%lu\n", spawned, t1 - t0,
	       (double)spawned / (t1 - t0), failed, max_live);
	free(worker_envp);
	posix_spawn_file_actions_destroy(&fa);
	return failed ? 1 : 0;
}
