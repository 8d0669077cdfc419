/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Segments of forked children, and stale segments without a daemon (issue
 * 13 item 6), run under libelide (preload.sh) in every mode, no elided:
 *
 *  - 1,000 fork+_exit children (and fork+exit, fork+exec) of a process with
 *    tracked locks leave no file behind: a child makes none at fork;
 *  - a child (of fork() or of _Fork(), which runs no atfork handlers) that
 *    contends a lock gets its own segment, with its own lock and the locks
 *    it inherited (no counts of the parent's), and its counts never land
 *    in the parent's segment;
 *  - threads of a child that all need the segment at once make exactly one,
 *    with every lock in it;
 *  - with fork_segment=0 a child that contends and names a lock makes no
 *    file (a sandboxed child may not make one), nor counts in its parent's;
 *  - segments of SIGKILLed processes are removed by the next process of the
 *    same uid that makes a segment (at start or in a forked child), at most
 *    8 per segment made; another uid's file, a symlink and a live process's
 *    segment are left alone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "segment-reader.h"
#include "testutil.h"

#define NFORK_EXIT 1000
#define NKILLED 5
#define NRACERS 8
#define NRACE_CHILDREN 20
/* libelide's bound on removals per segment made (segment.c, SWEEP_REMOVALS). */
#define SWEEP_REMOVALS 8

static const char *runtime_dir;
static int active;

/* ---- the runtime directory --------------------------------------------- */

static bool is_segment_file(const char *name)
{
	size_t len = strlen(name);

	return (len > 4 && !strcmp(name + len - 4, ".seg")) || (len > 8 && !strcmp(name + len - 8, ".seg.new"));
}

/* Counted in-process: a helper command would run under libelide too. */
static int count_segments(void)
{
	DIR *dir = opendir(runtime_dir);
	struct dirent *de;
	int n = 0;

	if (!dir)
		fail("opendir %s: %m", runtime_dir);
	while ((de = readdir(dir)))
		n += is_segment_file(de->d_name);
	closedir(dir);
	return n;
}

static void seg_name_of(pid_t pid, char *buf, size_t size)
{
	uint64_t start;

	if (seg_proc_start_time(NULL, pid, &start) < 0)
		fail("start time of %d", (int)pid);
	snprintf(buf, size, "%d-%" PRIu64 ".seg", (int)pid, start);
}

static bool exists(const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", runtime_dir, name);
	return lstat(path, &st) == 0;
}

static struct seg_snapshot *read_seg(const char *name)
{
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX] = "";
	int dfd = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

	check(dfd >= 0);
	r = seg_read(dfd, name, SEG_READ_CHECK_PROCESS, &snap, err, sizeof(err));
	close(dfd);
	if (r < 0)
		fail("seg_read %s: %s (%d)", name, err, r);
	return snap;
}

static const struct elide_seg_lock *find_lock(const struct seg_snapshot *snap, const void *addr)
{
	for (uint32_t i = 0; i < snap->nlocks; i++)
		if (snap->locks[i].lock.addr == (uintptr_t)addr)
			return &snap->locks[i].lock;
	return NULL;
}

static uint64_t total_counts(const struct elide_seg_lock *e)
{
	uint64_t total = 0;

	for (int s = 0; s < ELIDE_SEG_NSTATS; s++)
		total += e->stats[s];
	return total;
}

/* A file in the runtime directory, owned by `uid` (-1: ours). */
static void make_file(const char *name, uid_t uid)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", runtime_dir, name);
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		fail("create %s: %m", path);
	if (uid != (uid_t)-1 && fchown(fd, uid, uid) < 0)
		fail("chown %s: %m", path);
	close(fd);
}

/* A pid no process has now (a child we made and reaped). */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	if (pid < 0)
		fail("fork: %m");
	if (pid == 0)
		_exit(0);
	check(waitpid(pid, NULL, 0) == pid);
	return pid;
}

/* ---- children run as a new image (their segment made at start) -------- */

/* Run ourselves with a role, ELIDE set to elide_env unless NULL; returns
 * the pid.  `ready`: the child writes a byte there once running (and so
 * has its segment), and may write more. */
static pid_t spawn_role_with(const char *role, const char *elide_env, int *ready)
{
	int fds[2];
	pid_t pid;
	char c;

	check(pipe(fds) == 0);
	pid = fork();
	if (pid < 0)
		fail("fork: %m");
	if (pid == 0) {
		char fd_arg[16];

		close(fds[0]);
		snprintf(fd_arg, sizeof(fd_arg), "%d", fds[1]);
		if (elide_env)
			setenv("ELIDE", elide_env, 1);
		execl("/proc/self/exe", "test-segment-fork", "--role", role, fd_arg, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1)
		fail("role %s did not start", role);
	if (ready)
		*ready = fds[0];
	else
		close(fds[0]);
	return pid;
}

static pid_t spawn_role(const char *role, int *ready)
{
	return spawn_role_with(role, NULL, ready);
}

static int no_fork_segment_role(int fd);

static int child_role(const char *role, int fd)
{
	if (!strcmp(role, "no-fork-segment"))
		return no_fork_segment_role(fd);
	if (!strcmp(role, "wait")) {
		/* Until killed. */
		(void)!write(fd, "r", 1);
		for (;;)
			pause();
	}
	if (!strcmp(role, "start")) {
		/* Its segment is made at start: that is the sweep under test. */
		(void)!write(fd, "r", 1);
		return 0;
	}
	fail("unknown role %s", role);
}

/* One more process that makes a segment (at start) and exits normally. */
static void run_one_process(void)
{
	pid_t pid = spawn_role("start", NULL);
	int status;

	check(waitpid(pid, &status, 0) == pid);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- locks ------------------------------------------------------------- */

static pthread_mutex_t parent_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t child_lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *hammer(void *arg)
{
	pthread_mutex_t *m = arg;

	for (int i = 0; i < 100000; i++) {
		pthread_mutex_lock(m);
		counter++;
		pthread_mutex_unlock(m);
	}
	return NULL;
}

static void hammer_threads(pthread_mutex_t *m)
{
	pthread_t t[4];

	for (int i = 0; i < 4; i++)
		t[i] = xthread(hammer, m);
	for (int i = 0; i < 4; i++)
		xjoin(t[i]);
}

static void *hold_briefly(void *arg)
{
	pthread_mutex_t *m = arg;

	pthread_mutex_lock(m);
	usleep(20000);
	pthread_mutex_unlock(m);
	return NULL;
}

/* A contention libelide sees: the lock is held while another thread asks. */
static void contend_once(pthread_mutex_t *m)
{
	pthread_t holder = xthread(hold_briefly, m);

	usleep(5000);
	pthread_mutex_lock(m);
	pthread_mutex_unlock(m);
	xjoin(holder);
}

/* ---- scenarios ------------------------------------------------------------ */

static void test_fork_exit_leaves_nothing(void)
{
	int before = count_segments(), status;

	for (int i = 0; i < NFORK_EXIT; i++) {
		pid_t pid = fork();

		if (pid < 0)
			fail("fork: %m");
		if (pid == 0)
			_exit(0);
		check(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
	}
	check_eq(count_segments(), before);
	printf("ok: %d fork+_exit children left no segment (%d files before and after)\n", NFORK_EXIT, before);

	for (int i = 0; i < 50; i++) {
		pid_t pid = fork();

		if (pid < 0)
			fail("fork: %m");
		if (pid == 0) {
			/* An untracked lock, uncontended: nothing to publish. */
			static pthread_mutex_t plain = PTHREAD_MUTEX_INITIALIZER;

			pthread_mutex_lock(&plain);
			pthread_mutex_unlock(&plain);
			exit(0);
		}
		check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	for (int i = 0; i < 20; i++) {
		pid_t pid = fork();

		if (pid < 0)
			fail("fork: %m");
		if (pid == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	check_eq(count_segments(), before);
	printf("ok: fork+exit and fork+exec children left no segment either\n");
}

/*
 * Fork with fork_fn and run child(fd) in the child: it writes its reply to
 * fd and exits 0.  The reply, once the child has exited; fails when it did
 * not exit 0.
 */
static void run_child(pid_t (*fork_fn)(void), const char *what, void (*child)(int fd), char *reply, size_t size)
{
	int fds[2], status;
	ssize_t n;
	pid_t pid;

	check(pipe(fds) == 0);
	pid = fork_fn();
	if (pid < 0)
		fail("%s: fork: %m", what);
	if (pid == 0) {
		close(fds[0]);
		child(fds[1]);
		exit(0); /* removes its segment */
	}
	close(fds[1]);
	n = read(fds[0], reply, size - 1);
	reply[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	check(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("%s failed (status %d)", what, status);
}

/* fork() runs the pthread_atfork handlers, _Fork() does not: libelide
 * must make the child's segment its own either way. */
static pid_t fork_with_handlers(void)
{
	return fork();
}

/* In a forked child: contend, hammer, and report what it found. */
static void contending_child(int fd)
{
	struct seg_snapshot *snap;
	char name[64];
	bool at_fork, after_plain;
	const struct elide_seg_lock *mine, *inherited;

	seg_name_of(getpid(), name, sizeof(name));
	at_fork = exists(name);
	/* Contend a lock of its own until libelide has seen it. */
	for (int i = 0; i < 50 && active == 1 && !exists(name); i++)
		contend_once(&child_lock);
	after_plain = exists(name);
	/* The inherited, tracked lock, used hard: its counts are the child's. */
	hammer_threads(&parent_lock);
	hammer_threads(&child_lock);
	/* Passing through, nothing is tracked: a name publishes in every mode. */
	check_ret(elide_mutex_set_name(&child_lock, "child-lock"), 0);
	snap = read_seg(name);
	check_eq(snap->header.pid, getpid());
	mine = find_lock(snap, &child_lock);
	inherited = find_lock(snap, &parent_lock);
	if (!mine || !inherited)
		fail("child's segment: own lock %s, inherited lock %s", mine ? "found" : "missing",
		     inherited ? "found" : "missing");
	if (strcmp(inherited->name, "parent-lock"))
		fail("inherited lock's name '%s'", inherited->name);
	if (active == 1 && total_counts(mine) == 0)
		fail("the child's contended lock counted nothing");
	dprintf(fd, "%s %s", at_fork ? "at-fork" : "none-at-fork",
		after_plain == (active == 1) ? "ok" : after_plain ? "made-passing-through" : "none-after-contention");
	seg_snapshot_free(snap);
}

/* In a forked child of a process with fork_segment=0: contend, hammer and
 * name a lock, which in every other case makes the child's file. */
static void contending_child_no_file(int fd)
{
	char name[64];

	seg_name_of(getpid(), name, sizeof(name));
	for (int i = 0; i < 50; i++)
		contend_once(&child_lock);
	hammer_threads(&parent_lock);
	hammer_threads(&child_lock);
	check_ret(elide_mutex_set_name(&child_lock, "child-lock"), 0);
	dprintf(fd, "%s", exists(name) ? "made" : "none");
}

/* Under fork_segment=0: tracked locks of its own, and a child that must
 * make no file.  Replies the child's verdict. */
static int no_fork_segment_role(int fd)
{
	char verdict[64];

	(void)!write(fd, "r", 1);
	check_ret(elide_mutex_set_name(&parent_lock, "parent-lock"), 0);
	hammer_threads(&parent_lock);
	run_child(fork_with_handlers, "child under fork_segment=0", contending_child_no_file, verdict, sizeof(verdict));
	dprintf(fd, "%s", verdict);
	return 0;
}

static void test_no_fork_segment(void)
{
	char elide_opts[512], verdict[64] = "";
	const char *old = getenv("ELIDE");
	int fd, status;
	ssize_t n;
	pid_t pid;

	snprintf(elide_opts, sizeof(elide_opts), "%s%sfork_segment=0", old ? old : "", old && *old ? "," : "");
	pid = spawn_role_with("no-fork-segment", elide_opts, &fd);
	n = read(fd, verdict, sizeof(verdict) - 1);
	verdict[n > 0 ? n : 0] = '\0';
	close(fd);
	check(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("the fork_segment=0 process failed (status %d)", status);
	if (strcmp(verdict, "none"))
		fail("a child under ELIDE=%s made a segment file: '%s'", elide_opts, verdict);
	printf("ok: under ELIDE=%s a contending child that names a lock makes no segment file\n", elide_opts);
}

static void test_contending_child(pid_t (*fork_fn)(void), const char *how)
{
	char parent_name[64], what[64];
	struct seg_snapshot *snap;
	const struct elide_seg_lock *e;
	uint64_t parent_before, parent_after;
	char verdict[64];

	seg_name_of(getpid(), parent_name, sizeof(parent_name));
	snap = read_seg(parent_name);
	e = find_lock(snap, &parent_lock);
	if (!e)
		fail("the parent's named lock is not in its segment");
	parent_before = total_counts(e);
	seg_snapshot_free(snap);

	snprintf(what, sizeof(what), "contending child of %s", how);
	run_child(fork_fn, what, contending_child, verdict, sizeof(verdict));
	if (strcmp(verdict, "none-at-fork ok"))
		fail("%s: '%s' (want no segment at fork, one after contention when eliding)", what, verdict);
	snap = read_seg(parent_name);
	e = find_lock(snap, &parent_lock);
	check(e);
	parent_after = total_counts(e);
	seg_snapshot_free(snap);
	if (parent_after != parent_before)
		fail("the counts of a child of %s landed in the parent's segment (%" PRIu64 " -> %" PRIu64 ")", how,
		     parent_before, parent_after);
	printf("ok: a contending child of %s made its own segment (its lock, the inherited one without the parent's "
	       "counts); the parent's counts unchanged (%" PRIu64 ")\n", how, parent_after);
}

static pthread_barrier_t race_barrier;
static pthread_mutex_t race_locks[NRACERS];

static void *name_at_once(void *arg)
{
	long i = (long)arg;
	char name[16];

	snprintf(name, sizeof(name), "racer-%ld", i);
	pthread_barrier_wait(&race_barrier);
	return (void *)(long)elide_mutex_set_name(&race_locks[i], name);
}

/* ---- stack depth -------------------------------------------------------- */

/*
 * How deep lock calls reach into the stack of the thread that makes them.
 * glibc's take a few hundred bytes, and programs size their threads'
 * stacks by what they themselves need (PTHREAD_STACK_MIN is 16 KiB): the
 * same program under libelide must not overflow.  libelide's deepest path
 * is a forked child's first contention, which makes the child's segment
 * and sweeps stale files (here one named for a live pid with another start
 * time, so the sweep reads that pid's /proc stat).  The thread runs on a
 * stack painted with a pattern; the lowest byte written is how deep it got.
 */
#define PAINTED_STACK (256 * 1024)
#define PAINT 0xa5
/* The contending thread makes no call but access(), sched_yield() and the
 * lock calls (another thread holds the lock for it), all bound before it
 * runs: passing through it reaches 120 bytes here, watching 350.  Making
 * the segment on that thread reached 3.9 KiB, 3.4 KiB since the stat
 * buffer shrank; about 1.5 KiB of it is glibc's snprintf().  The path that
 * applies elided's decisions copied the 4 KiB control block onto the
 * stack too; it copies 24 bytes now. */
#ifdef __SANITIZE_ADDRESS__
/* AddressSanitizer pads every frame with redzones: 7.7 KiB measured. */
#define STACK_BUDGET (16 * 1024)
#else
#define STACK_BUDGET 4096
#endif

struct painted_run {
	void (*fn)(void);
	uintptr_t top;
};

static void *painted_main(void *arg)
{
	struct painted_run *run = arg;
	volatile char here = 0;

	run->top = (uintptr_t)&here;
	run->fn();
	return NULL;
}

static size_t stack_depth_of(void (*fn)(void))
{
	struct painted_run run = { .fn = fn };
	unsigned char *stack;
	pthread_attr_t attr;
	pthread_t t;
	size_t low = 0;

	stack = mmap(NULL, PAINTED_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		fail("mmap: %m");
	memset(stack, PAINT, PAINTED_STACK);
	check_ret(pthread_attr_init(&attr), 0);
	check_ret(pthread_attr_setstack(&attr, stack, PAINTED_STACK), 0);
	check_ret(pthread_create(&t, &attr, painted_main, &run), 0);
	check_ret(pthread_join(t, NULL), 0);
	check_ret(pthread_attr_destroy(&attr), 0);
	while (low < PAINTED_STACK && stack[low] == PAINT)
		low++;
	munmap(stack, PAINTED_STACK);
	return run.top - (uintptr_t)(stack + low);
}

/* The child's segment, named before the painted thread runs: only lock
 * calls and what waiting for the holder needs run on that stack. */
static char child_segment[512];
static _Atomic int holder_round, holder_holds;
static _Atomic bool holder_stop;

/* Holds child_lock for 20 ms each time the contender asks. */
static void *holder(void *arg)
{
	int seen = 0;

	(void)arg;
	for (;;) {
		while (holder_round == seen && !holder_stop)
			usleep(100);
		if (holder_stop)
			return NULL;
		seen = holder_round;
		pthread_mutex_lock(&child_lock);
		holder_holds = seen;
		usleep(20000);
		pthread_mutex_unlock(&child_lock);
	}
}

static void contend_until_segment(void)
{
	/* Watching (no RTM) makes it too; passing through (off), nothing does. */
	for (int round = 1; round <= 10 && access(child_segment, F_OK) != 0; round++) {
		holder_round = round;
		while (holder_holds != round)
			sched_yield();
		pthread_mutex_lock(&child_lock);
		pthread_mutex_unlock(&child_lock);
	}
}

/* In a forked child: the contending thread's depth, as its reply. */
static void stack_depth_child(int fd)
{
	char name[64];
	pthread_t hold;
	size_t depth;

	seg_name_of(getpid(), name, sizeof(name));
	snprintf(child_segment, sizeof(child_segment), "%s/%s", runtime_dir, name);
	/* Bound now: the first call through a lazily bound PLT entry saves
	 * the vector registers on the caller's stack (1-3 KiB). */
	(void)!access(child_segment, F_OK);
	sched_yield();
	hold = xthread(holder, NULL);
	depth = stack_depth_of(contend_until_segment);
	holder_stop = true;
	xjoin(hold);
	dprintf(fd, "%zu", depth);
}

static void test_child_stack_depth(void)
{
	char stale[64], reply[32];
	size_t depth;

	snprintf(stale, sizeof(stale), "%d-1.seg", (int)getpid());
	make_file(stale, (uid_t)-1);
	run_child(fork_with_handlers, "stack-depth child", stack_depth_child, reply, sizeof(reply));
	depth = strtoul(reply, NULL, 10);
	if (depth == 0 || depth > STACK_BUDGET)
		fail("a forked child's first contention reached %zu bytes into its thread's stack (budget %d)", depth,
		     STACK_BUDGET);
	if (active == 1 && exists(stale))
		fail("the child's sweep left %s (its pid lives with another start time)", stale);
	if (exists(stale)) {
		/* Passing through, no segment was made, so nothing swept. */
		char path[512];

		snprintf(path, sizeof(path), "%s/%s", runtime_dir, stale);
		if (unlink(path) < 0)
			fail("unlink %s: %m", path);
	}
	printf("ok: a forked child's contending thread used %zu bytes of stack (budget %d)\n", depth, STACK_BUDGET);
}

static void test_racing_first_need(void)
{
	int before = count_segments();

	for (int round = 0; round < NRACE_CHILDREN; round++) {
		pid_t pid = fork();
		int status;

		if (pid < 0)
			fail("fork: %m");
		if (pid == 0) {
			pthread_t t[NRACERS];
			struct seg_snapshot *snap;
			char name[64];

			check_ret(pthread_barrier_init(&race_barrier, NULL, NRACERS), 0);
			for (long i = 0; i < NRACERS; i++) {
				pthread_mutex_init(&race_locks[i], NULL);
				t[i] = xthread(name_at_once, (void *)i);
			}
			for (int i = 0; i < NRACERS; i++) {
				long r = (long)xjoin(t[i]);

				if (r != 0)
					fail("elide_mutex_set_name in racer %d returned %ld", i, r);
			}
			check_eq(count_segments(), before + 1);
			seg_name_of(getpid(), name, sizeof(name));
			snap = read_seg(name);
			for (int i = 0; i < NRACERS; i++)
				if (!find_lock(snap, &race_locks[i]))
					fail("racer %d's lock is not in the segment", i);
			seg_snapshot_free(snap);
			exit(0);
		}
		check(waitpid(pid, &status, 0) == pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail("racing child %d failed (status %d)", round, status);
	}
	check_eq(count_segments(), before);
	printf("ok: %d children whose %d threads all needed the segment at once made one each, every lock in it\n",
	       NRACE_CHILDREN, NRACERS);
}

static void test_killed_segments_swept(void)
{
	pid_t killed[NKILLED], live, gone = dead_pid();
	char names[NKILLED][64], live_name[64], other_uid[64], symlink_name[64], partial[64], path[512], target[512];
	int live_fd, before = count_segments();
	bool root = geteuid() == 0;
	struct stat st;

	for (int i = 0; i < NKILLED; i++) {
		killed[i] = spawn_role("wait", NULL);
		seg_name_of(killed[i], names[i], sizeof(names[i]));
		check(exists(names[i]));
	}
	live = spawn_role("wait", &live_fd);
	seg_name_of(live, live_name, sizeof(live_name));
	for (int i = 0; i < NKILLED; i++) {
		check(kill(killed[i], SIGKILL) == 0);
		check(waitpid(killed[i], NULL, 0) == killed[i]);
	}
	check_eq(count_segments(), before + NKILLED + 1);
	/* A creation that died half-way, of our uid. */
	snprintf(partial, sizeof(partial), "%d-12345.seg.new", (int)gone);
	make_file(partial, (uid_t)-1);
	/* A stale name that is a symlink to a file of ours: never followed,
	 * never removed. */
	snprintf(target, sizeof(target), "%s/target", runtime_dir);
	make_file("target", (uid_t)-1);
	snprintf(symlink_name, sizeof(symlink_name), "%d-12346.seg", (int)gone);
	snprintf(path, sizeof(path), "%s/%s", runtime_dir, symlink_name);
	check(symlink(target, path) == 0);
	/* Another uid's stale file: never ours to remove. */
	snprintf(other_uid, sizeof(other_uid), "%d-12347.seg", (int)gone);
	if (root)
		make_file(other_uid, 65534);

	/* The next process of our uid that makes a segment. */
	run_one_process();
	for (int i = 0; i < NKILLED; i++)
		if (exists(names[i]))
			fail("stale segment %s of a SIGKILLed process survived the next process's start", names[i]);
	if (exists(partial))
		fail("stale %s survived", partial);
	check(exists(live_name));
	check(lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
	check(stat(target, &st) == 0);
	if (root) {
		check(exists(other_uid));
		printf("ok: another uid's stale file left alone\n");
	} else {
		printf("note: not root, so no file of another uid can be made here: that check needs root\n");
	}
	printf("ok: %d SIGKILLed processes' segments and a dead creation's file removed by the next process; "
	       "a live process's segment and a symlink left alone\n", NKILLED);
	unlink(path);
	unlink(target);
	if (root) {
		snprintf(path, sizeof(path), "%s/%s", runtime_dir, other_uid);
		unlink(path);
	}

	/* A forked child that makes its segment late sweeps too. */
	for (int i = 0; i < 3; i++) {
		snprintf(names[i], sizeof(names[i]), "%d-%d.seg", (int)gone, 20000 + i);
		make_file(names[i], (uid_t)-1);
	}
	{
		pid_t pid = fork();
		int status;

		if (pid < 0)
			fail("fork: %m");
		if (pid == 0) {
			check_ret(elide_mutex_set_name(&child_lock, "late"), 0);
			_exit(0);
		}
		check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	for (int i = 0; i < 3; i++)
		if (exists(names[i]))
			fail("stale %s survived a forked child making its segment", names[i]);
	/* That child _exited: its own file is stale now, and goes with the next. */
	run_one_process();
	check_eq(count_segments(), before + 1);
	printf("ok: a forked child making its segment late removes stale ones too\n");

	/* The bound: 40 stale files, at most SWEEP_REMOVALS go per segment made,
	 * and all of them after a few more processes. */
	for (int i = 0; i < 40; i++) {
		char name[64];

		snprintf(name, sizeof(name), "%d-%d.seg", (int)live, 30000 + i); /* a live pid, another start time */
		make_file(name, (uid_t)-1);
	}
	{
		int n0 = count_segments(), n1, rounds = 1;

		run_one_process();
		n1 = count_segments();
		if (n0 - n1 < 1 || n0 - n1 > SWEEP_REMOVALS)
			fail("one process removed %d stale files (want 1..%d)", n0 - n1, SWEEP_REMOVALS);
		while (count_segments() > before + 1 && rounds < 40) {
			run_one_process();
			rounds++;
		}
		check_eq(count_segments(), before + 1);
		printf("ok: one process removed %d of 40 stale files (bound %d); %d processes removed them all\n",
		       n0 - n1, SWEEP_REMOVALS, rounds);
	}
	check(exists(live_name));
	kill(live, SIGKILL);
	close(live_fd);
	check(waitpid(live, NULL, 0) == live);
	run_one_process();
	check_eq(count_segments(), before);
}

int main(int argc, char **argv)
{
	runtime_dir = getenv("ELIDE_RUNTIME_DIR");
	if (!runtime_dir)
		fail("ELIDE_RUNTIME_DIR is not set (preload.sh sets it)");
	if (argc >= 4 && !strcmp(argv[1], "--role"))
		return child_role(argv[2], atoi(argv[3]));
	active = test_start("test-segment-fork", "forked children's segments, stale segments without elided");
	/* Locks with records, as a real program has when it forks. */
	check_ret(elide_mutex_set_name(&parent_lock, "parent-lock"), 0);
	hammer_threads(&parent_lock);
	test_fork_exit_leaves_nothing();
	test_contending_child(fork_with_handlers, "fork()");
	test_contending_child(_Fork, "_Fork()");
	test_no_fork_segment();
	test_racing_first_need();
	test_child_stack_depth();
	test_killed_segments_swept();
	printf("all forked-child and stale-segment checks passed\n");
	return 0;
}
