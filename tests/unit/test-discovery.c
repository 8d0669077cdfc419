/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * discovery.c on a real sd-event loop and a temporary runtime directory:
 * the initial scan, inotify adds and removes, pidfd exits (of zombies too,
 * with the start time of the process meant), watches placed from the
 * initial scan's callbacks, a replaced runtime directory, and BPF when it
 * loads (root with BTF) or its fallback when it does not: with BPF, both
 * exit programs (group_dead, and the live-thread count of older kernels),
 * one exit per process, none while a leader that called pthread_exit()
 * leaves a thread running; processes with libelide but no segment (an
 * exec'd helper maps a file named libelide.so) counted, fork children
 * that did not exec and processes with a segment not.
 *
 * Waiting is bounded: the loop runs in 50 ms slices until the expected
 * callback arrives or the tries run out; sleeps are never the assertion.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "discovery.h"
#include "log.h"
#include "segment-reader.h"

#define MAX_RECORDS 64
#define SLICE_USEC (50 * 1000)
#define MAX_SLICES 100 /* 5 s */

struct record {
	char kind; /* '+' added, '-' removed, 'e' exec, 'x' exit */
	pid_t pid;
	uint64_t start; /* exits: the start time reported */
	char text[64];
};

static struct {
	struct record r[MAX_RECORDS];
	size_t n;
	/* Process events are recorded for these pids only (BPF sees them all). */
	pid_t interest[4];
} rec;

static char dir[64];
static sd_event *event;

static void record(char kind, pid_t pid, const char *text)
{
	ck_assert_uint_lt(rec.n, MAX_RECORDS);
	rec.r[rec.n].kind = kind;
	rec.r[rec.n].pid = pid;
	snprintf(rec.r[rec.n].text, sizeof(rec.r[rec.n].text), "%s", text ? text : "");
	rec.n++;
}

static bool interesting(pid_t pid)
{
	for (size_t i = 0; i < ARRAY_SIZE(rec.interest); i++)
		if (rec.interest[i] == pid)
			return true;
	return false;
}

static void on_added(void *userdata, const char *name)
{
	record('+', 0, name);
}

static void on_removed(void *userdata, const char *name)
{
	record('-', 0, name);
}

static void on_exec(void *userdata, pid_t pid, const char *comm)
{
	if (interesting(pid))
		record('e', pid, comm);
}

static void on_exit_(void *userdata, pid_t pid, uint64_t start)
{
	if (interesting(pid)) {
		record('x', pid, NULL);
		rec.r[rec.n - 1].start = start;
	}
}

static const struct discovery_ops ops = {
	.segment_added = on_added,
	.segment_removed = on_removed,
	.process_exec = on_exec,
	.process_exit = on_exit_,
};

static const struct record *find(char kind, pid_t pid, const char *text)
{
	for (size_t i = 0; i < rec.n; i++)
		if (rec.r[i].kind == kind && (!pid || rec.r[i].pid == pid) && (!text || strcmp(rec.r[i].text, text) == 0))
			return &rec.r[i];
	return NULL;
}

static size_t count(char kind, pid_t pid, const char *text)
{
	size_t c = 0;

	for (size_t i = 0; i < rec.n; i++)
		if (rec.r[i].kind == kind && (!pid || rec.r[i].pid == pid) && (!text || strcmp(rec.r[i].text, text) == 0))
			c++;
	return c;
}

/* Run the loop until `n` such records arrived; false after MAX_SLICES. */
static bool wait_count(char kind, pid_t pid, const char *text, size_t n)
{
	for (int i = 0; i < MAX_SLICES; i++) {
		if (count(kind, pid, text) >= n)
			return true;
		ck_assert_int_ge(sd_event_run(event, SLICE_USEC), 0);
	}
	return count(kind, pid, text) >= n;
}

static bool wait_for(char kind, pid_t pid, const char *text)
{
	return wait_count(kind, pid, text, 1);
}

/* Dispatch whatever is pending now, without waiting. */
static void drain(void)
{
	for (int i = 0; i < 1000; i++)
		if (sd_event_run(event, 0) <= 0)
			return;
}

static void touch(const char *name)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

static void rm(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_int_eq(unlink(path), 0);
}

static void mv(const char *from, const char *to)
{
	char a[128], b[128];

	snprintf(a, sizeof(a), "%s/%s", dir, from);
	snprintf(b, sizeof(b), "%s/%s", dir, to);
	ck_assert_int_eq(rename(a, b), 0);
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

static void setup(void)
{
	log_set_prefix("test-discovery");
	log_set_max_priority(getenv("TEST_DEBUG") ? LOG_DEBUG : LOG_INFO);
	memset(&rec, 0, sizeof(rec));
	snprintf(dir, sizeof(dir), "/tmp/test-discovery.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_ge(sd_event_new(&event), 0);
}

static void teardown(void)
{
	event = sd_event_unref(event);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A child that waits for a byte on a pipe, then execs `exe` or exits. */
static pid_t spawn(int *release_fd, const char *exe)
{
	int p[2];
	pid_t pid;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char c;

		close(p[1]);
		(void)!read(p[0], &c, 1);
		if (exe)
			execl(exe, exe, (char *)NULL);
		_exit(0);
	}
	close(p[0]);
	*release_fd = p[1];
	return pid;
}

/* A byte, not EOF: a sibling forked later holds a copy of this end. */
static void release(int fd)
{
	ck_assert_int_eq(write(fd, "", 1), 1);
	close(fd);
}

static void reap(pid_t pid)
{
	int status;

	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
}

START_TEST(test_initial_scan)
{
	struct discovery *d = NULL;
	char path[128];

	touch("20-7.seg");
	touch("100-5.seg");
	touch("x.txt");
	touch("0-1.seg");    /* pid 0: not a segment name */
	touch("1-2.seg.tmp");
	/* Reported: names only; seg_read() refuses the symlink with -ELOOP. */
	snprintf(path, sizeof(path), "%s/30-1.seg", dir);
	ck_assert_int_eq(symlink("/etc/passwd", path), 0);

	ck_assert_int_eq(discovery_new(event, dir, false, &ops, NULL, &d), 0);
	/* Reported before discovery_new returns, sorted. */
	ck_assert_uint_eq(rec.n, 3);
	ck_assert_str_eq(rec.r[0].text, "100-5.seg");
	ck_assert_str_eq(rec.r[1].text, "20-7.seg");
	ck_assert_str_eq(rec.r[2].text, "30-1.seg");
	for (size_t i = 0; i < 3; i++)
		ck_assert_int_eq(rec.r[i].kind, '+');

	ck_assert_int_eq(discovery_get_method(d), DISCOVERY_FALLBACK);
	ck_assert_str_eq(discovery_describe(d), "fallback (inotify + pidfd): BPF disabled by --no-bpf");

	/* Nothing more is pending: the scan's files produce no second report. */
	drain();
	ck_assert_uint_eq(rec.n, 3);
	discovery_free(d);
}
END_TEST

START_TEST(test_missing_dir)
{
	struct discovery *d = NULL;
	char path[128], link[128];

	snprintf(path, sizeof(path), "%s/nope", dir);
	ck_assert_int_eq(discovery_new(event, path, false, &ops, NULL, &d), -ENOENT);
	ck_assert_ptr_null(d);

	/* The runtime directory itself must not be a symlink. */
	snprintf(link, sizeof(link), "%s/link", dir);
	ck_assert_int_eq(symlink(dir, link), 0);
	ck_assert_int_lt(discovery_new(event, link, false, &ops, NULL, &d), 0);
	ck_assert_ptr_null(d);
}
END_TEST

START_TEST(test_create_remove)
{
	struct discovery *d = NULL;

	ck_assert_int_eq(discovery_new(event, dir, false, &ops, NULL, &d), 0);
	ck_assert_uint_eq(rec.n, 0);

	/* Ignored names go first: had they been reported, they would be seen. */
	touch("x.txt");
	touch("42-1.seg");
	ck_assert(wait_for('+', 0, "42-1.seg"));
	ck_assert_uint_eq(rec.n, 1);

	touch("tmp");
	mv("tmp", "43-2.seg");
	ck_assert(wait_for('+', 0, "43-2.seg"));

	rm("42-1.seg");
	ck_assert(wait_for('-', 0, "42-1.seg"));

	mv("43-2.seg", "gone");
	ck_assert(wait_for('-', 0, "43-2.seg"));

	/* exec: libelide replaces its file under the same name. */
	touch("44-3.seg");
	rm("44-3.seg");
	touch("44-3.seg");
	ck_assert(wait_count('+', 0, "44-3.seg", 2));
	ck_assert_uint_eq(count('-', 0, "44-3.seg"), 1);

	drain();
	ck_assert_uint_eq(count('+', 0, NULL), 4);
	ck_assert_uint_eq(count('-', 0, NULL), 3);
	ck_assert_ptr_null(find('+', 0, "x.txt"));
	ck_assert_ptr_null(find('+', 0, "tmp"));
	discovery_free(d);
}
END_TEST

START_TEST(test_pidfd_exit)
{
	struct discovery *d = NULL;
	uint64_t start, now;
	pid_t child;
	int release_fd;

	ck_assert_int_eq(discovery_new(event, dir, false, &ops, NULL, &d), 0);
	child = spawn(&release_fd, NULL);
	rec.interest[0] = child;
	ck_assert_int_eq(seg_proc_start_time(NULL, child, &start), 0);

	/* Another start time: another process, not watched. */
	ck_assert_int_eq(discovery_watch_pid(d, child, start + 1), -ESRCH);
	ck_assert_int_eq(discovery_watch_pid(d, child, start), 0);
	ck_assert_int_eq(discovery_watch_pid(d, child, start), 0); /* idempotent */
	drain();
	ck_assert_ptr_null(find('x', child, NULL));

	/* Not reaped while the exit is reported: a zombie is dead, though its
	 * /proc/PID/stat still shows the same start time. */
	release(release_fd);
	ck_assert(wait_for('x', child, NULL));
	ck_assert_uint_eq(find('x', child, NULL)->start, start);
	ck_assert_int_eq(seg_proc_start_time(NULL, child, &now), 0);
	ck_assert_uint_eq(now, start);
	drain();
	ck_assert_uint_eq(count('x', child, NULL), 1);
	reap(child);

	/* Reaped: nothing left to watch. */
	ck_assert_int_eq(discovery_watch_pid(d, child, 0), -ESRCH);
	ck_assert_int_eq(discovery_watch_pid(d, 0, 0), -EINVAL);
	discovery_free(d);
}
END_TEST

/* The initial scan's callbacks watch pids, as elided's adoption does. */
static struct discovery *scan_d;
static int scan_watch_result = 1;
static pid_t scan_child;

static void on_added_watch(void *userdata, const char *name)
{
	struct discovery **dp = userdata;

	record('+', 0, name);
	scan_watch_result = discovery_watch_pid(*dp, scan_child, 0);
}

START_TEST(test_watch_from_initial_scan)
{
	static const struct discovery_ops watch_ops = {
		.segment_added = on_added_watch,
		.process_exit = on_exit_,
	};
	int release_fd;

	scan_child = spawn(&release_fd, NULL);
	rec.interest[0] = scan_child;
	touch("5-1.seg");
	ck_assert_int_eq(discovery_new(event, dir, false, &watch_ops, &scan_d, &scan_d), 0);
	ck_assert_uint_eq(count('+', 0, "5-1.seg"), 1);
	ck_assert_int_eq(scan_watch_result, 0);
	release(release_fd);
	ck_assert(wait_for('x', scan_child, NULL));
	reap(scan_child);
	discovery_free(scan_d);
	scan_d = NULL;
}
END_TEST

/* Removed and re-created under us: no inotify event, the path check says so. */
START_TEST(test_dir_replaced)
{
	struct discovery *d = NULL;
	char old[128], path[160];

	touch("10-1.seg");
	ck_assert_int_eq(discovery_new(event, dir, false, &ops, NULL, &d), 0);
	ck_assert_int_eq(discovery_dir_replaced(d), 0);
	ck_assert_int_eq(discovery_reopen(d), 0); /* the same directory again: harmless */
	snprintf(old, sizeof(old), "%s.old", dir);
	ck_assert_int_eq(rename(dir, old), 0);
	ck_assert_int_eq(discovery_dir_replaced(d), 1);
	ck_assert_int_eq(discovery_reopen(d), -ENOENT);
	ck_assert_int_eq(discovery_dir_replaced(d), 1);

	ck_assert_int_eq(mkdir(dir, 0700), 0);
	touch("11-1.seg");
	rec.n = 0;
	ck_assert_int_eq(discovery_reopen(d), 0);
	ck_assert_int_eq(discovery_dir_replaced(d), 0);
	/* The new directory's segments, and only those: the old names are
	 * forgotten without a report. */
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_str_eq(rec.r[0].text, "11-1.seg");
	touch("12-1.seg");
	ck_assert(wait_for('+', 0, "12-1.seg"));
	ck_assert_ptr_null(find('-', 0, NULL));
	discovery_free(d);
	snprintf(path, sizeof(path), "%s/10-1.seg", old);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(rmdir(old), 0);
}
END_TEST

START_TEST(test_pidfd_unwatch)
{
	struct discovery *d = NULL;
	pid_t a, b;
	int release_a, release_b;

	ck_assert_int_eq(discovery_new(event, dir, false, &ops, NULL, &d), 0);
	a = spawn(&release_a, NULL);
	b = spawn(&release_b, NULL);
	rec.interest[0] = a;
	rec.interest[1] = b;

	ck_assert_int_eq(discovery_watch_pid(d, a, 0), 0);
	ck_assert_int_eq(discovery_watch_pid(d, b, 0), 0);
	discovery_unwatch_pid(d, a);
	discovery_unwatch_pid(d, 12345678); /* not watched: no-op */

	/* a is dead (and reaped) before b exits: had its pidfd stayed, it
	 * would be readable by the time b's exit is dispatched. */
	release(release_a);
	reap(a);
	release(release_b);
	ck_assert(wait_for('x', b, NULL));
	drain();
	ck_assert_ptr_null(find('x', a, NULL));
	reap(b);

	/* A watch may be freed with the object while still pending. */
	a = spawn(&release_a, NULL);
	ck_assert_int_eq(discovery_watch_pid(d, a, 0), 0);
	discovery_free(d);
	release(release_a);
	reap(a);
}
END_TEST

/* Passes as root with BTF (BPF) and elsewhere (fallback): checks whichever ran. */
START_TEST(test_bpf_or_fallback)
{
	static const char prefix[] = "fallback (inotify + pidfd): ";
	struct discovery *d = NULL;
	const char *desc;
	pid_t child;
	int release_fd;

	ck_assert_int_eq(discovery_new(event, dir, true, &ops, NULL, &d), 0);
	desc = discovery_describe(d);
	ck_assert_ptr_nonnull(desc);
	fprintf(stderr, "test-discovery: method: %s\n", desc);

	child = spawn(&release_fd, "/bin/true");
	rec.interest[0] = child;

	if (discovery_get_method(d) == DISCOVERY_BPF) {
		ck_assert_str_eq(desc, "bpf (tp_btf sched_process_exec/exit, ring buffer)");
		/* Every process is seen: no watch needed. */
		ck_assert_int_eq(discovery_watch_pid(d, child, 0), 0);
		release(release_fd);
		ck_assert(wait_for('e', child, "true"));
		ck_assert(wait_for('x', child, NULL));
	} else {
		ck_assert_int_eq(discovery_get_method(d), DISCOVERY_FALLBACK);
		ck_assert_int_eq(strncmp(desc, prefix, strlen(prefix)), 0);
		ck_assert_uint_gt(strlen(desc), strlen(prefix));
		ck_assert_int_eq(discovery_watch_pid(d, child, 0), 0);
		release(release_fd);
		ck_assert(wait_for('x', child, NULL));
		ck_assert_ptr_null(find('e', child, NULL));
	}
	drain();
	ck_assert_uint_eq(count('x', child, NULL), 1);
	reap(child);

	/* Segments work the same either way. */
	touch("77-1.seg");
	ck_assert(wait_for('+', 0, "77-1.seg"));
	discovery_free(d);
}
END_TEST

/* ---- helpers run as exec'd images of this program ---- */

/* --map FILE: map FILE and wait to be killed. */
static int helper_map(const char *file)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED)
		return 1;
	close(fd);
	for (;;)
		pause();
}

static void *wait_stdin(void *arg)
{
	char c;

	(void)!read(0, &c, 1);
	exit(0);
}

/* --leader-exits: the main thread leaves with pthread_exit(); another
 * ends the process when a byte (or EOF) comes on stdin. */
static int helper_leader_exits(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, wait_stdin, NULL) != 0)
		return 1;
	pthread_exit(NULL);
}

static void *park(void *arg)
{
	for (;;)
		pause();
	return NULL;
}

/* --threads-exit: four threads, then exit() from main on a byte on stdin. */
static int helper_threads_exit(void)
{
	pthread_t t;
	char c;

	for (int i = 0; i < 3; i++)
		if (pthread_create(&t, NULL, park, NULL) != 0)
			return 1;
	(void)!read(0, &c, 1);
	exit(0);
}

/* This program exec'd again with `arg`, `file`; its stdin the read end
 * of a pipe whose write end is *release_fd (or -1: /dev/null). */
static pid_t spawn_helper(const char *arg, const char *file, int *release_fd)
{
	int p[2];
	pid_t pid;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(p[0], 0);
		execl("/proc/self/exe", "test-discovery", arg, file, (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	if (release_fd)
		*release_fd = p[1];
	else
		close(p[1]);
	return pid;
}

static bool proc_state_is(pid_t pid, char want)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == want;
}

/* Loop slices until pid's /proc/PID/stat shows `want` (bounded). */
static bool wait_state(pid_t pid, char want)
{
	for (int i = 0; i < MAX_SLICES; i++) {
		if (proc_state_is(pid, want))
			return true;
		ck_assert_int_ge(sd_event_run(event, SLICE_USEC), 0);
	}
	return proc_state_is(pid, want);
}

/* Whether this test can see BPF here: root, kernel BTF, loads. */
static struct discovery *new_bpf_or_skip(bool by_live_count)
{
	struct discovery *d = NULL;

	discovery_bpf_exit_by_live_count = by_live_count;
	ck_assert_int_eq(discovery_new(event, dir, true, &ops, NULL, &d), 0);
	discovery_bpf_exit_by_live_count = false;
	if (discovery_get_method(d) != DISCOVERY_BPF) {
		fprintf(stderr, "test-discovery: SKIP BPF exit checks: %s\n", discovery_describe(d));
		discovery_free(d);
		return NULL;
	}
	return d;
}

static void check_bpf_exits(bool by_live_count)
{
	struct discovery *d = new_bpf_or_skip(by_live_count);
	uint64_t start;
	pid_t a, b;
	int release_a, release_b;

	if (!d)
		return;
	/* The leader leaves first: the process lives on in its other thread. */
	a = spawn_helper("--leader-exits", NULL, &release_a);
	rec.interest[0] = a;
	ck_assert(wait_for('e', a, NULL));
	ck_assert(wait_state(a, 'Z'));
	ck_assert_int_eq(seg_proc_start_time(NULL, a, &start), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_ge(sd_event_run(event, SLICE_USEC), 0);
	ck_assert_ptr_null(find('x', a, NULL));
	release(release_a);
	ck_assert(wait_for('x', a, NULL));
	ck_assert_uint_eq(find('x', a, NULL)->start, start);
	reap(a);

	/* Four threads end together: one exit (group_dead), or exits that
	 * all name the same process (the live count of older kernels). */
	b = spawn_helper("--threads-exit", NULL, &release_b);
	rec.interest[1] = b;
	ck_assert(wait_for('e', b, NULL));
	ck_assert_int_eq(seg_proc_start_time(NULL, b, &start), 0);
	release(release_b);
	ck_assert(wait_for('x', b, NULL));
	reap(b);
	for (int i = 0; i < 4; i++)
		ck_assert_int_ge(sd_event_run(event, SLICE_USEC), 0);
	for (size_t i = 0; i < rec.n; i++)
		if (rec.r[i].kind == 'x' && rec.r[i].pid == b)
			ck_assert_uint_eq(rec.r[i].start, start);
	if (!by_live_count)
		ck_assert_uint_eq(count('x', b, NULL), 1);
	fprintf(stderr, "test-discovery: %s: %zu exit event(s) for 4 threads\n",
		by_live_count ? "live count" : "group_dead", count('x', b, NULL));
	discovery_free(d);
}

START_TEST(test_bpf_exit_group_dead)
{
	check_bpf_exits(false);
}
END_TEST

START_TEST(test_bpf_exit_live_count)
{
	check_bpf_exits(true);
}
END_TEST

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool counted(struct discovery *d, pid_t pid)
{
	const struct discovery_no_segment_proc *procs;
	size_t n = discovery_no_segment_list(d, &procs);

	for (size_t i = 0; i < n; i++)
		if (procs[i].pid == pid)
			return true;
	return false;
}

/*
 * Tick every 100 ms (as elided's interval would) while running the loop,
 * until pid is counted (or not: want); bounded at 10 s.  By the clock,
 * not by loop runs: with BPF, every exec on the machine wakes the loop.
 * Pids, not the count: on a shared machine other processes with libelide
 * (other test runs, their own runtime directories) are counted too.
 */
static bool tick_until(struct discovery *d, pid_t pid, bool want)
{
	uint64_t deadline = mono_ms() + 10000, next = 0;

	while (mono_ms() < deadline) {
		if (mono_ms() >= next) {
			discovery_tick(d);
			next = mono_ms() + 100;
		}
		if (counted(d, pid) == want)
			return true;
		ck_assert_int_ge(sd_event_run(event, 20 * 1000), 0);
	}
	return counted(d, pid) == want;
}

/* Tick for `ms` milliseconds, whatever happens. */
static void tick_for(struct discovery *d, unsigned ms)
{
	uint64_t end = mono_ms() + ms, next = 0;

	while (mono_ms() < end) {
		if (mono_ms() >= next) {
			discovery_tick(d);
			next = mono_ms() + 100;
		}
		ck_assert_int_ge(sd_event_run(event, 20 * 1000), 0);
	}
}

static void check_no_segment(bool allow_bpf)
{
	const struct discovery_no_segment_proc *procs;
	struct discovery *d = NULL;
	char lib[128], name[64];
	uint64_t start, total, total_before;
	pid_t a, b, c, fork_child, plain;
	size_t n;
	int fd;

	/* Any file of that name will do: only the maps line is read. */
	snprintf(lib, sizeof(lib), "%s/libelide.so", dir);
	fd = open(lib, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
	close(fd);

	/* One that ran before discovery started (found by the first sweep). */
	a = spawn_helper("--map", lib, NULL);
	ck_assert(wait_state(a, 'S'));
	ck_assert_int_eq(discovery_new(event, dir, allow_bpf, &ops, NULL, &d), 0);
	fprintf(stderr, "test-discovery: no-segment checks with %s\n", discovery_describe(d));
	/* One exec'd after, one with its segment, one without libelide. */
	b = spawn_helper("--map", lib, NULL);
	c = spawn_helper("--map", lib, NULL);
	plain = spawn_helper("--map", "/dev/zero", NULL);
	/* A fork child that never exec'd: libelide would make its segment
	 * lazily, so it is not counted. */
	fork_child = fork();
	ck_assert_int_ge(fork_child, 0);
	if (fork_child == 0)
		_exit(helper_map(lib));
	ck_assert(wait_state(c, 'S'));
	ck_assert_int_eq(seg_proc_start_time(NULL, c, &start), 0);
	snprintf(name, sizeof(name), "%d-%" PRIu64 ".seg", (int)c, start);
	touch(name);

	ck_assert(tick_until(d, a, true));
	ck_assert(tick_until(d, b, true));
	/* More ticks (past every grace period) change nothing. */
	tick_for(d, 1500);
	ck_assert(counted(d, a) && counted(d, b));
	ck_assert(!counted(d, c));
	ck_assert(!counted(d, plain));
	ck_assert(!counted(d, fork_child));
	n = discovery_no_segment(d, &total);
	ck_assert_uint_ge(n, 2);
	ck_assert_uint_ge(total, 2);
	ck_assert_uint_eq(discovery_no_segment_list(d, &procs), n);
	for (size_t i = 0; i < n; i++)
		if (procs[i].pid == a) {
			ck_assert_uint_eq(procs[i].uid, geteuid());
			ck_assert_str_eq(procs[i].comm, "exe");
			ck_assert_int_eq(seg_proc_start_time(NULL, a, &start), 0);
			ck_assert_uint_eq(procs[i].start_time, start);
		}

	/* a gets its segment: seen now. */
	ck_assert_int_eq(seg_proc_start_time(NULL, a, &start), 0);
	snprintf(name, sizeof(name), "%d-%" PRIu64 ".seg", (int)a, start);
	touch(name);
	ck_assert(tick_until(d, a, false));
	/* b is killed but not reaped: gone all the same. */
	kill(b, SIGKILL);
	ck_assert(wait_state(b, 'Z'));
	ck_assert(tick_until(d, b, false));
	/* Each was counted once. */
	total_before = total;
	discovery_no_segment(d, &total);
	ck_assert_uint_ge(total, total_before);

	for (pid_t *p = (pid_t[]){ a, b, c, plain, fork_child, 0 }; *p; p++) {
		kill(*p, SIGKILL);
		reap(*p);
	}
	discovery_free(d);
}

START_TEST(test_no_segment_fallback)
{
	check_no_segment(false);
}
END_TEST

START_TEST(test_no_segment_bpf_or_fallback)
{
	check_no_segment(true);
}
END_TEST

static Suite *discovery_suite(void)
{
	Suite *s = suite_create("discovery");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_initial_scan);
	tcase_add_test(tc, test_missing_dir);
	tcase_add_test(tc, test_create_remove);
	tcase_add_test(tc, test_pidfd_exit);
	tcase_add_test(tc, test_pidfd_unwatch);
	tcase_add_test(tc, test_watch_from_initial_scan);
	tcase_add_test(tc, test_dir_replaced);
	tcase_add_test(tc, test_bpf_or_fallback);
	tcase_add_test(tc, test_bpf_exit_group_dead);
	tcase_add_test(tc, test_bpf_exit_live_count);
	tcase_add_test(tc, test_no_segment_fallback);
	tcase_add_test(tc, test_no_segment_bpf_or_fallback);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	SRunner *sr;
	int failed;

	if (argc == 3 && strcmp(argv[1], "--map") == 0)
		return helper_map(argv[2]);
	if (argc >= 2 && strcmp(argv[1], "--leader-exits") == 0)
		return helper_leader_exits();
	if (argc >= 2 && strcmp(argv[1], "--threads-exit") == 0)
		return helper_threads_exit();
	sr = srunner_create(discovery_suite());

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
