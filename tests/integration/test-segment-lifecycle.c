/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The segment's life cycle, run under libelide (preload.sh) in every mode:
 * created owner-only at start, counts of exited threads visible, removed at
 * normal exit, left over (and recognisably stale) after a crash, none in a
 * forked child until it has something to publish (then a fresh one), a
 * fresh one after exec, the overflow entry when the
 * lock table is full, and a missing, unusable or full runtime directory
 * turning statistics off with one message while the program runs on.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elide.h"
#include "segment-reader.h"

#define FAIL(...) do { \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		exit(1); \
	} while (0)
#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)

static char runtime_dir[256];
static const char *self_exe;

static void seg_name_of(pid_t pid, char *buf, size_t size)
{
	uint64_t start = 0;

	CHECK(seg_proc_start_time(NULL, pid, &start) == 0, "start time of %d", (int)pid);
	snprintf(buf, size, "%d-%" PRIu64 ".seg", (int)pid, start);
}

static struct seg_snapshot *read_seg(const char *name, unsigned flags)
{
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX] = "";
	int dfd = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r;

	CHECK(dfd >= 0, "open %s: %m", runtime_dir);
	r = seg_read(dfd, name, flags, &snap, err, sizeof(err));
	close(dfd);
	CHECK(r == 0, "seg_read %s: %s (%d)", name, err, r);
	return snap;
}

static bool seg_exists(const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", runtime_dir, name);
	return lstat(path, &st) == 0;
}

/* Counted in-process: a helper command would run under libelide too and
 * add a segment of its own while we count. */
static int count_segments(void)
{
	DIR *dir = opendir(runtime_dir);
	struct dirent *de;
	int n = 0;

	CHECK(dir, "opendir %s: %m", runtime_dir);
	while ((de = readdir(dir))) {
		size_t len = strlen(de->d_name);

		n += len > 4 && !strcmp(de->d_name + len - 4, ".seg");
	}
	closedir(dir);
	return n;
}

/* ---- work that makes libelide track locks ---------------------------- */

static pthread_mutex_t lifecycle_lock = PTHREAD_MUTEX_INITIALIZER;
static long shared_counter;

static void *hammer(void *arg)
{
	pthread_mutex_t *locks = arg;
	int nlocks = locks ? 40 : 1;

	for (int i = 0; i < 200000; i++) {
		pthread_mutex_t *m = locks ? &locks[i % nlocks] : &lifecycle_lock;

		pthread_mutex_lock(m);
		shared_counter++;
		pthread_mutex_unlock(m);
	}
	return NULL;
}

static void run_threads(pthread_mutex_t *locks)
{
	pthread_t t[4];

	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, hammer, locks) == 0, "pthread_create");
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
}

static const struct seg_lock_snapshot *find_lock(const struct seg_snapshot *snap, const void *addr)
{
	for (uint32_t i = 0; i < snap->nlocks; i++)
		if (snap->locks[i].lock.addr == (uintptr_t)addr)
			return &snap->locks[i];
	return NULL;
}

/* ---- children (re-executed with a role) ------------------------------ */

static int child_role(const char *role, const char *arg)
{
	char name[128];

	if (!strcmp(role, "exit-normally")) {
		run_threads(NULL);
		exit(0);
	}
	if (!strcmp(role, "crash")) {
		run_threads(NULL);
		seg_name_of(getpid(), name, sizeof(name));
		CHECK(seg_exists(name), "crash child has no segment before the crash");
		kill(getpid(), SIGKILL);
		return 1;
	}
	if (!strcmp(role, "exec-then-check")) {
		/* Before exec: remember this image's creation time, then exec. */
		struct seg_snapshot *snap;
		char created[32];

		seg_name_of(getpid(), name, sizeof(name));
		snap = read_seg(name, SEG_READ_CHECK_PROCESS);
		snprintf(created, sizeof(created), "%" PRIu64, snap->header.created_ns);
		seg_snapshot_free(snap);
		usleep(2000);
		execl(self_exe, self_exe, "--role", "after-exec", created, (char *)NULL);
		FAIL("exec: %m");
	}
	if (!strcmp(role, "after-exec")) {
		struct seg_snapshot *snap;
		uint64_t before = strtoull(arg, NULL, 10);

		seg_name_of(getpid(), name, sizeof(name));
		snap = read_seg(name, SEG_READ_CHECK_PROCESS);
		CHECK(snap->header.created_ns > before, "segment after exec is not a fresh one");
		CHECK(snap->header.lock_high_water <= 2 || snap->nlocks <= 1,
		      "fresh segment after exec carries locks of the old image");
		seg_snapshot_free(snap);
		exit(0);
	}
	if (!strcmp(role, "full-table")) {
		static pthread_mutex_t many[40];
		struct seg_snapshot *snap;
		const struct seg_lock_snapshot *overflow = NULL;

		for (int i = 0; i < 40; i++)
			pthread_mutex_init(&many[i], NULL);
		run_threads(many);
		seg_name_of(getpid(), name, sizeof(name));
		snap = read_seg(name, SEG_READ_CHECK_PROCESS);
		CHECK(snap->header.lock_capacity == 16, "max_locks=16 gave capacity %u", snap->header.lock_capacity);
		for (uint32_t i = 0; i < snap->nlocks; i++)
			if (snap->locks[i].lock.kind == ELIDE_SEG_KIND_OVERFLOW)
				overflow = &snap->locks[i];
		if (elide_active() == 1) {
			CHECK(overflow, "no overflow entry");
			CHECK(overflow->lock.stats[ELIDE_SEG_STAT_CONTENDED] + overflow->lock.stats[ELIDE_SEG_STAT_ACQUIRED] > 0,
			      "overflow entry counted nothing with 40 contended locks and 14 records");
		}
		seg_snapshot_free(snap);
		exit(0);
	}
	if (!strcmp(role, "just-run")) {
		run_threads(NULL);
		CHECK(shared_counter == 4 * 200000, "lost updates: %ld", shared_counter);
		exit(0);
	}
	FAIL("unknown role %s", role);
}

/* Run ourselves with a role and extra environment; return the exit status
 * and what it wrote on stderr. */
static int spawn_role(const char *role, const char *arg, const char *const *env_extra, bool xfsz_limit,
		      char *errbuf, size_t errsize)
{
	int pipefd[2];
	pid_t pid;
	int status;
	ssize_t n;
	size_t len = 0;

	CHECK(pipe(pipefd) == 0, "pipe");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		dup2(pipefd[1], STDERR_FILENO);
		close(pipefd[0]);
		for (int i = 0; env_extra && env_extra[i]; i += 2)
			setenv(env_extra[i], env_extra[i + 1], 1);
		if (xfsz_limit) {
			struct rlimit rl = { 4096, 4096 };

			signal(SIGXFSZ, SIG_IGN);
			setrlimit(RLIMIT_FSIZE, &rl);
		}
		execl(self_exe, self_exe, "--role", role, arg ? arg : "", (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	while (errbuf && len + 1 < errsize && (n = read(pipefd[0], errbuf + len, errsize - 1 - len)) > 0)
		len += (size_t)n;
	if (errbuf)
		errbuf[len] = '\0';
	close(pipefd[0]);
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	return status;
}

static int count_lines_with(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* ---- scenarios -------------------------------------------------------- */

static void test_own_segment(void)
{
	char name[128], path[512];
	struct seg_snapshot *snap;
	struct stat st;

	seg_name_of(getpid(), name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", runtime_dir, name);
	CHECK(lstat(path, &st) == 0, "no segment %s: %m", path);
	CHECK(S_ISREG(st.st_mode), "segment is not a regular file");
	CHECK((st.st_mode & 077) == 0, "segment mode %o is not owner-only", st.st_mode & 0777);
	CHECK(st.st_uid == geteuid(), "segment owned by %u", st.st_uid);
	snap = read_seg(name, SEG_READ_CHECK_PROCESS);
	CHECK(snap->header.pid == getpid(), "header pid");
	CHECK(strstr(snap->header.exe, "test-segment-lifecycle"), "header exe '%s'", snap->header.exe);
	seg_snapshot_free(snap);
	printf("ok: own segment %s, mode %o, validated\n", name, st.st_mode & 0777);
}

static void test_exited_threads_counted(void)
{
	char name[128];
	struct seg_snapshot *snap;
	const struct seg_lock_snapshot *l;

	/* A name makes the lock tracked at once, contended or not (timing-free). */
	CHECK(elide_mutex_set_name(&lifecycle_lock, "lifecycle_lock") == 0 || elide_active() != 1, "set_name");
	run_threads(NULL);
	CHECK(shared_counter == 4 * 200000, "lost updates: %ld", shared_counter);
	seg_name_of(getpid(), name, sizeof(name));
	snap = read_seg(name, SEG_READ_CHECK_PROCESS);
	l = find_lock(snap, &lifecycle_lock);
	if (elide_active() == 1) {
		CHECK(l, "contended lock not in the segment after its threads exited");
		CHECK(l->lock.stats[ELIDE_SEG_STAT_ACQUIRED] > 0, "no acquisitions counted");
		printf("ok: exited threads' acquisitions visible (%" PRIu64 ")\n", l->lock.stats[ELIDE_SEG_STAT_ACQUIRED]);
	} else {
		printf("ok: not eliding here (elide_active()=%d): no lock tracked, as designed\n", elide_active());
	}
	seg_snapshot_free(snap);
}

static void test_removed_at_exit(void)
{
	int before = count_segments();
	int status = spawn_role("exit-normally", NULL, NULL, false, NULL, 0);

	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	CHECK(count_segments() == before, "segment left behind after a normal exit (%d -> %d)", before,
	      count_segments());
	printf("ok: removed at normal exit\n");
}

static void test_crash_leaves_stale(void)
{
	char errbuf[4096];
	int before = count_segments();
	int status = spawn_role("crash", NULL, NULL, false, errbuf, sizeof(errbuf));
	int dfd, stale = 0;
	DIR *dir;
	struct dirent *de;

	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "crash child status %d: %s", status, errbuf);
	CHECK(count_segments() == before + 1, "no leftover after a crash");
	/* Find it and check the reader calls it stale. */
	dfd = open(runtime_dir, O_RDONLY | O_DIRECTORY);
	dir = opendir(runtime_dir);
	CHECK(dfd >= 0 && dir, "open %s: %m", runtime_dir);
	while ((de = readdir(dir))) {
		struct seg_snapshot *snap = NULL;
		char err[SEG_ERR_MAX];
		const char *line = de->d_name;

		if (de->d_name[0] == '.')
			continue;
		if (seg_read(dfd, line, SEG_READ_CHECK_PROCESS, &snap, err, sizeof(err)) == -ESRCH) {
			stale++;
			CHECK(seg_read(dfd, line, 0, &snap, err, sizeof(err)) == 0,
			      "stale segment unreadable without the process check: %s", err);
			seg_snapshot_free(snap);
			unlinkat(dfd, line, 0);
		} else {
			seg_snapshot_free(snap);
		}
	}
	closedir(dir);
	close(dfd);
	CHECK(stale == 1, "expected one stale segment, found %d", stale);
	printf("ok: crash leaves a leftover the reader recognises as stale\n");
}

static void test_fork_child_fresh(void)
{
	char parent_name[128];
	int pipefd[2];
	pid_t pid;
	int status;
	char verdict[256] = "";

	run_threads(NULL);
	seg_name_of(getpid(), parent_name, sizeof(parent_name));
	CHECK(pipe(pipefd) == 0, "pipe");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		static pthread_mutex_t named = PTHREAD_MUTEX_INITIALIZER;
		char name[128];
		struct seg_snapshot *snap;
		uint64_t total = 0;
		bool before;

		close(pipefd[0]);
		/* No file at fork: it comes with the first thing to publish
		 * (here a lock's name, in every mode). */
		seg_name_of(getpid(), name, sizeof(name));
		before = seg_exists(name);
		CHECK(elide_mutex_set_name(&named, "child-lock") == 0, "set_name in the child");
		snap = read_seg(name, SEG_READ_CHECK_PROCESS);
		for (uint32_t i = 0; i < snap->nlocks; i++)
			for (int s = 0; s < ELIDE_SEG_NSTATS; s++)
				total += snap->locks[i].lock.stats[s];
		dprintf(pipefd[1], "%s %s %" PRIu64 " %d %d", before ? "at-fork" : "lazy",
			strcmp(name, parent_name) ? "own" : "shared", total, snap->header.pid == getpid(),
			find_lock(snap, &named) != NULL);
		seg_snapshot_free(snap);
		exit(0);
	}
	close(pipefd[1]);
	(void)!read(pipefd[0], verdict, sizeof(verdict) - 1);
	close(pipefd[0]);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "fork child failed (%d)", status);
	CHECK(!strcmp(verdict, "lazy own 0 1 1"),
	      "fork child segment: '%s' (want none at fork, then its own with zero counts and its lock)", verdict);
	CHECK(seg_exists(parent_name), "parent's segment vanished when the child exited");
	printf("ok: forked child has no segment until it needs one, then its own empty one; parent's survives the child's exit\n");
}

static void test_exec_fresh(void)
{
	int status = spawn_role("exec-then-check", NULL, NULL, false, NULL, 0);

	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exec scenario failed (%d)", status);
	printf("ok: exec starts a fresh segment\n");
}

static void test_full_table(void)
{
	char elide_env[256];
	const char *cur = getenv("ELIDE");
	const char *env[] = { "ELIDE", elide_env, NULL };
	char errbuf[4096];
	int status;

	/* mode=on tracks every lock at once: 40 locks must overflow 14 records. */
	snprintf(elide_env, sizeof(elide_env), "%s%smode=on,max_locks=16", cur ? cur : "", cur && *cur ? "," : "");
	status = spawn_role("full-table", NULL, env, false, errbuf, sizeof(errbuf));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "full-table child failed (%d): %s", status, errbuf);
	printf("ok: full lock table counts the rest in the overflow entry\n");
}

static void expect_stats_off(const char *what, const char *dir, bool xfsz)
{
	const char *env[] = { "ELIDE_RUNTIME_DIR", dir, NULL };
	char errbuf[8192];
	int status = spawn_role("just-run", NULL, env, xfsz, errbuf, sizeof(errbuf));
	int n = count_lines_with(errbuf, "statistics off");

	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: program failed (%d): %s", what, status, errbuf);
	CHECK(n == 1, "%s: want exactly one 'statistics off' message, got %d:\n%s", what, n, errbuf);
	printf("ok: %s: program ran, one message\n", what);
}

static void test_bad_runtime_dirs(void)
{
	char file_path[512], full_dir[512];
	int fd;

	expect_stats_off("missing runtime directory", "/nonexistent/elide-test", false);
	snprintf(file_path, sizeof(file_path), "%s/not-a-dir", runtime_dir);
	fd = open(file_path, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0, "create %s", file_path);
	close(fd);
	expect_stats_off("runtime directory is a file", file_path, false);
	unlink(file_path);
	if (geteuid() != 0) {
		snprintf(full_dir, sizeof(full_dir), "%s/ro", runtime_dir);
		CHECK(mkdir(full_dir, 0500) == 0, "mkdir");
		expect_stats_off("unwritable runtime directory", full_dir, false);
		rmdir(full_dir);
	} else {
		printf("note: running as root, which writes anywhere: unwritable-directory case covered by the file case\n");
	}
	/* A full file system: the file size limit makes the reservation fail. */
	expect_stats_off("full runtime directory (RLIMIT_FSIZE)", runtime_dir, true);
}

int main(int argc, char **argv)
{
	const char *dir;

	setvbuf(stdout, NULL, _IOLBF, 0); /* no duplicated lines in forked children */
	self_exe = "/proc/self/exe";
	dir = getenv("ELIDE_RUNTIME_DIR");
	if (argc >= 3 && !strcmp(argv[1], "--role")) {
		CHECK(dir, "role without ELIDE_RUNTIME_DIR");
		snprintf(runtime_dir, sizeof(runtime_dir), "%s", dir);
		return child_role(argv[2], argc > 3 ? argv[3] : "");
	}
	if (elide_active() == -ENOSYS) {
		fprintf(stderr, "FAIL: not running under libelide (run through tests/integration/preload.sh)\n");
		return 1;
	}
	/* preload.sh gives every run its own runtime directory. */
	if (!dir) {
		fprintf(stderr, "FAIL: ELIDE_RUNTIME_DIR is not set (preload.sh sets it)\n");
		return 1;
	}
	snprintf(runtime_dir, sizeof(runtime_dir), "%s", dir);
	test_own_segment();
	test_exited_threads_counted();
	test_removed_at_exit();
	test_crash_leaves_stale();
	test_fork_child_fresh();
	test_exec_fresh();
	test_full_table();
	test_bad_runtime_dirs();
	printf("all segment life-cycle checks passed\n");
	return 0;
}
