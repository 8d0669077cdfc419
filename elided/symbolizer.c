/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Lock and call-site names without parsing user files in the daemon.
 *
 * The daemon reads only /proc/PID/maps (kernel text) to learn which file
 * (device, inode) and which offset in it an address is, and looks that up
 * in its cache (symcache.c).  What is not cached is asked of a symbolizer
 * child: a fork of elided that drops to the target process's uid and gid
 * (no supplementary groups, no capabilities, no_new_privs), limits its CPU
 * time and address space, opens and parses the files as that user, writes
 * one line per address to a pipe and exits.  The daemon reads the pipe from
 * its event loop, validates every byte of the answer, and charges the run
 * to the uid's budget.  The child's CPU time is bounded by RLIMIT_CPU; its
 * wall-clock time only where it makes no progress: a child that neither
 * runs nor gains CPU time for SYMBOLIZER_STALL_USEC (a file on FUSE that
 * never answers) is killed, one that a busy machine only slows down is not,
 * up to a last-resort cap.  Addresses a run did not answer (killed, failed,
 * not started) are asked again later with back-off (symcache.h), never
 * given up.  Processes without libelide that the BPF observer saw
 * (futexwatch.c) are named the same way.  See elided(8).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elfsym.h"
#include "elided.h"
#include "log.h"
#include "symcache.h"

/* A request with the process whose maps it is about (the child resolves
 * it in its inherited copy of them). */
struct symreq {
	struct symproto_req r;
	struct elfsym_maps *maps;
};

/* Bounds (elide-security(7)). */
#define SYMBOLIZER_MAX_CHILDREN 2u             /* at once, all uids */
#define SYMBOLIZER_MAX_REQS 8192u              /* addresses per run: 4096 locks, 2 each */
#define SYMBOLIZER_CHECK_USEC (1u * 1000000u)  /* a child's progress is looked at this often */
#define SYMBOLIZER_STALL_USEC (5u * 1000000u)  /* neither runnable nor gaining CPU time this long: SIGKILL */
#define SYMBOLIZER_WALL_CAP_USEC (120u * 1000000u) /* wall clock, last resort: SIGKILL */
#define SYMBOLIZER_CPU_SEC 4u                  /* RLIMIT_CPU (SIGXCPU; SIGKILL a second later) */
#define SYMBOLIZER_AS_HEADROOM (256ull << 20)  /* RLIMIT_AS above the daemon's own size */
/* Processes without libelide (the BPF observer's) whose lock names are
 * kept, and their locks each; forgotten when not asked about this long. */
#define SYMBOLIZER_MAX_OBSERVED 4096u
#define SYMBOLIZER_OBSERVED_LOCKS 4096u
#define SYMBOLIZER_OBSERVED_EXPIRE_NS (60ull * 1000000000ull)

/* One child.  Owns reqs (the child's requests, which its answer is
 * checked against), buf and the descriptors; run_free frees them, and
 * kills and reaps a child that is still out. */
struct symrun {
	struct symbolizer *s;
	uid_t uid;
	pid_t target;
	pid_t child;                           /* 0: not forked (yet) */
	int fd;
	sd_event_source *io, *exit_src, *timer;
	int pidfd;
	char *buf;
	size_t len, cap;
	bool eof, exited, killed, overflow;
	const char *kill_reason;               /* why it was killed */
	uint64_t cpu_ns;
	uint64_t last_ticks;                   /* its CPU time at the last look, clock ticks */
	uint64_t last_progress_ns;             /* when it last ran or gained CPU time */
	int status;                            /* si_code/si_status summary */
	struct symproto_req *reqs;
	size_t nreq;
	uint64_t started_ns;
	struct symrun *next;
};

/* A lock of a process without libelide, named for ListObservedLocks. */
struct symobs_lock {
	uint64_t addr;
	bool pending;                          /* its name is not known yet */
	char name[ELIDED_LOCK_NAME_MAX];       /* "" when its file names nothing there */
};

/* A process without libelide whose locks the BPF observer saw. */
struct symobs {
	pid_t pid;
	uid_t uid;
	uint64_t start_time;
	struct elfsym_maps *maps;
	struct symobs_lock *locks;
	size_t nlocks, alloc;
	bool pending;                          /* some lock waits for its name */
	bool maps_reloaded;                    /* since it was last asked about */
	uint64_t seen_ns;                      /* last asked about */
	struct symobs *next;
};

struct symbolizer {
	struct elided *d;
	struct symcache *cache;
	struct symrun *runs;
	unsigned nruns;
	uint64_t total_runs;
	struct symobs *observed;
	size_t nobserved;
	/* The next look at what waits: failed runs' addresses due again, a
	 * user's budget open again.  next_due collects the earliest such time
	 * during a walk; retry_at is what the timer is set for (0: off). */
	sd_event_source *retry;
	uint64_t retry_at, next_due;
	uint64_t now;                          /* of the walk under way */
};

int elided_symbolizer_new(struct elided *d)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	if (symcache_new(&s->cache, SYMCACHE_UID_BYTES) < 0) {
		free(s);
		return -ENOMEM;
	}
	s->d = d;
	d->symbolizer = s;
	/* Where the children look for separate debug files by build-id
	 * (/usr/lib/debug unless set; the tests point it elsewhere).  Only
	 * ever read as the target's user, one level deep (elide-security(7)). */
	elfsym_set_debug_dir(getenv("ELIDE_DEBUG_DIR"));
	return 0;
}

static void run_free(struct symrun *run)
{
	if (!run)
		return;
	sd_event_source_disable_unref(run->io);
	sd_event_source_disable_unref(run->timer);
	sd_event_source_disable_unref(run->exit_src);
	if (run->child > 0 && !run->exited) {
		/* Shutting down with a child out: it must not outlive us. */
		kill(run->child, SIGKILL);
		waitpid(run->child, NULL, 0);
	}
	if (run->fd >= 0)
		close(run->fd);
	if (run->pidfd >= 0)
		close(run->pidfd);
	free(run->buf);
	free(run->reqs);
	free(run);
}

static void symobs_free(struct symobs *o)
{
	elfsym_maps_free(o->maps);
	free(o->locks);
	free(o);
}

void elided_symbolizer_free(struct elided *d)
{
	struct symbolizer *s = d->symbolizer;

	if (!s)
		return;
	while (s->runs) {
		struct symrun *r = s->runs;

		s->runs = r->next;
		run_free(r);
	}
	while (s->observed) {
		struct symobs *o = s->observed;

		s->observed = o->next;
		symobs_free(o);
	}
	sd_event_source_disable_unref(s->retry);
	symcache_free(s->cache);
	free(s);
	d->symbolizer = NULL;
}

/* ---- the child ----------------------------------------------------------- */

static void child_fail(const char *what)
{
	/* The daemon sees a non-zero status; the journal gets the reason. */
	dprintf(STDERR_FILENO, "elided symbolizer: %s: %s\n", what, strerror(errno));
	_exit(3);
}

static void drop_privileges(uid_t uid, gid_t gid)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct caps[2];

	/* Not root (tests, a daemon run by hand): no groups to shed. */
	if (setgroups(0, NULL) < 0 && !(errno == EPERM && geteuid() != 0))
		child_fail("setgroups");
	if (setresgid(gid, gid, gid) < 0)
		child_fail("setresgid");
	if (setresuid(uid, uid, uid) < 0)
		child_fail("setresuid");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail("no_new_privs");
	/* uid 0 keeps its capabilities through setresuid: drop them all. */
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	memset(caps, 0, sizeof(caps));
	if (syscall(SYS_capset, &hdr, caps) < 0)
		child_fail("capset");
	if (syscall(SYS_capget, &hdr, caps) < 0 || caps[0].effective || caps[0].permitted || caps[1].effective ||
	    caps[1].permitted)
		child_fail("capabilities still held");
}

static void set_limit(int resource, rlim_t soft, rlim_t hard)
{
	struct rlimit rl = { soft, hard };

	if (setrlimit(resource, &rl) < 0)
		child_fail("setrlimit");
}

/* Our address space now: a fork starts with the daemon's. */
static uint64_t address_space_bytes(void)
{
	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%llu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(4);
		buf += n;
		len -= (size_t)n;
	}
}

/* maps: the daemon's own reading of /proc/PID/maps, inherited through the
 * fork: a child without capabilities may not read the maps of a process
 * that has some (root's), and the answers must be about the very files the
 * daemon keyed its requests on. */
static __attribute__((noreturn)) void child_main(int fd, struct elfsym_maps *const *maps, uid_t uid, gid_t gid,
						 const struct symproto_req *reqs, size_t nreq)
{
	uint64_t as = address_space_bytes();
	char out[64 * 1024];
	size_t len = 0;
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		child_fail("pdeathsig");
	/* Only the pipe (and stderr, the journal) stays open. */
	if (dup2(fd, 3) < 0)
		child_fail("dup2");
	if (syscall(SYS_close_range, 4u, ~0u, 0u) < 0)
		for (int i = 4; i < 1024; i++)
			close(i);
	close(STDIN_FILENO);
	close(STDOUT_FILENO);

	/* Out of memory in the unit's cgroup (MemoryMax=): the child goes,
	 * not the daemon.  Best effort. */
	{
		int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

		if (oom >= 0) {
			(void)!write(oom, "1000", 4);
			close(oom);
		}
	}
	set_limit(RLIMIT_CPU, SYMBOLIZER_CPU_SEC, SYMBOLIZER_CPU_SEC + 1);
	if (as)
		set_limit(RLIMIT_AS, as + SYMBOLIZER_AS_HEADROOM, as + SYMBOLIZER_AS_HEADROOM);
	set_limit(RLIMIT_NOFILE, 32, 32);
	set_limit(RLIMIT_CORE, 0, 0);
	set_limit(RLIMIT_FSIZE, 0, 0);
	drop_privileges(uid, gid);

	/* The files are opened by path as this user (map_files needs a
	 * capability we no longer have), without following symbolic links,
	 * and must be the mapped device and inode. */
	for (size_t i = 0; i < nreq; i++) {
		struct elfsym_location loc;
		struct elfsym_result res;
		int r = elfsym_resolve(maps[i], reqs[i].addr, reqs[i].object, &res);

		if (elfsym_maps_locate(maps[i], reqs[i].addr, &loc) < 0)
			continue;
		if (len + SYMPROTO_LINE_MAX > sizeof(out)) {
			write_all(3, out, len);
			len = 0;
		}
		len += symproto_format(out + len, i, r < 0 ? -r : 0, loc.dev, loc.inode, res.offset, res.vaddr,
				       res.name);
	}
	{
		/* Files parsed, per process whose maps were used (a file shared
		 * by two processes is one module object, counted in each). */
		size_t files = 0;

		for (size_t i = 0; i < nreq; i++)
			if (i == 0 || maps[i] != maps[i - 1]) {
				bool seen = false;

				for (size_t j = 0; j < i && !seen; j++)
					seen = maps[j] == maps[i];
				if (!seen)
					files += elfsym_maps_parsed_count(maps[i]);
			}
		len += (size_t)snprintf(out + len, sizeof(out) - len, "P %zu\n", files);
	}
	write_all(3, out, len);
	_exit(0);
}

/* ---- the daemon's side of a run ------------------------------------------ */

static bool name_from_cache(struct symbolizer *s, struct tracked_process *p, struct symreq *reqs, size_t *nreq);
static bool observed_from_cache(struct symbolizer *s, struct symobs *o, struct symreq *reqs, size_t *nreq);
static void start_batch(struct symbolizer *s, uid_t uid);
static void retry_all(struct symbolizer *s);
static void arm_retry(struct symbolizer *s);

static void run_finish(struct symrun *run);

static int on_child_io(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct symrun *run = userdata;

	for (;;) {
		ssize_t n;

		if (run->len == run->cap) {
			/* More than nreq lines can hold: not an answer. */
			run->overflow = true;
			kill(run->child, SIGKILL);
			break;
		}
		n = read(fd, run->buf + run->len, run->cap - run->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			run->eof = true;
			break;
		}
		run->len += (size_t)n;
	}
	sd_event_source_set_enabled(src, SD_EVENT_OFF);
	if (run->exited)
		run_finish(run);
	else if ((run->eof || run->overflow) && run->pidfd < 0 && run->timer) {
		/* No pidfd: the end of its output is the end of the child,
		 * reaped at once (on_child_check). */
		(void)sd_event_source_set_time_relative(run->timer, 0);
		(void)sd_event_source_set_enabled(run->timer, SD_EVENT_ONESHOT);
	}
	return 0;
}

/* Reaps the child, with its CPU time, if it has exited: whether it had.
 * (No SIGCHLD handling: the daemon has no other children.) */
static bool reap(struct symrun *run)
{
	struct rusage ru;
	int status;
	pid_t r = wait4(run->child, &status, WNOHANG, &ru);

	if (r == 0 || (r < 0 && errno == EINTR))
		return false;
	run->exited = true;
	if (r < 0)
		run->status = 255;
	else {
		run->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		run->cpu_ns = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
			      (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
	}
	return true;
}

/* The pidfd is readable once the child has exited. */
static int on_child_exit(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct symrun *run = userdata;

	if (!reap(run))
		return 0;
	sd_event_source_set_enabled(src, SD_EVENT_OFF);
	/* Whatever is still in the pipe is there now. */
	if (!run->eof)
		on_child_io(run->io, run->fd, EPOLLIN, run);
	else
		run_finish(run);
	return 0;
}

/* The child's scheduler state and CPU time (user + system, clock ticks)
 * from /proc/PID/stat; the pid is ours until we reap it. */
static int child_progress(pid_t pid, char *state, uint64_t *ticks)
{
	char path[64], buf[1024];
	unsigned long long utime, stime;
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	/* The command name may hold anything: the fields follow the last ')'. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", state, &utime, &stime) != 3)
		return -EBADMSG;
	*ticks = utime + stime;
	return 0;
}

/*
 * Every SYMBOLIZER_CHECK_USEC: a child that runs, or could run and waits
 * for a CPU (a busy machine), or gained CPU time since the last look, makes
 * progress and goes on; RLIMIT_CPU bounds what it may use.  One that made
 * none for SYMBOLIZER_STALL_USEC is blocked (a file that never answers) and
 * is killed, as is any child at SYMBOLIZER_WALL_CAP_USEC.
 */
static int on_child_check(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct symrun *run = userdata;
	uint64_t t = now_ns(), ticks = 0;
	char state = '?';

	if (run->exited)
		return 0;
	if (run->pidfd < 0 && (run->eof || run->overflow)) {
		/* Without a pidfd: its output ended, it exits; a few looks
		 * until it has. */
		if (reap(run)) {
			run_finish(run);
			return 0;
		}
		if (sd_event_source_set_time_relative(src, 10000) >= 0 &&
		    sd_event_source_set_enabled(src, SD_EVENT_ONESHOT) >= 0)
			return 0;
		/* Cannot look again: wait for it (it is exiting). */
		if (waitpid(run->child, NULL, 0) == run->child) {
			run->exited = true;
			run->status = 255;
			run_finish(run);
		}
		return 0;
	}
	if (run->killed)
		return 0;
	if (child_progress(run->child, &state, &ticks) == 0 && (state == 'R' || ticks != run->last_ticks)) {
		run->last_ticks = ticks;
		run->last_progress_ns = t;
	}
	if (t - run->started_ns >= SYMBOLIZER_WALL_CAP_USEC * 1000ull)
		run->kill_reason = "killed at its wall-clock cap";
	else if (state != 'Z' && t - run->last_progress_ns >= SYMBOLIZER_STALL_USEC * 1000ull)
		run->kill_reason = "killed: blocked, no progress";
	if (run->kill_reason) {
		run->killed = true;
		kill(run->child, SIGKILL);
		return 0;
	}
	if (sd_event_source_set_time_relative(src, SYMBOLIZER_CHECK_USEC) < 0 ||
	    sd_event_source_set_enabled(src, SD_EVENT_ONESHOT) < 0) {
		/* No more looks: the wall-clock cap is all that is left. */
		run->kill_reason = "killed: its deadline could not be set";
		run->killed = true;
		kill(run->child, SIGKILL);
	}
	return 0;
}

static void unlink_run(struct symbolizer *s, struct symrun *run)
{
	for (struct symrun **pp = &s->runs; *pp; pp = &(*pp)->next)
		if (*pp == run) {
			*pp = run->next;
			s->nruns--;
			return;
		}
}

/* The run for these requests failed: each is asked again later, with
 * back-off, and the locks keep their provisional names meanwhile. */
static void remember_failure(struct symbolizer *s, uid_t uid, const struct symproto_req *reqs, size_t nreq, int err)
{
	uint64_t t = now_ns();

	for (size_t i = 0; i < nreq; i++) {
		struct symcache_key k = { .uid = uid, .dev = reqs[i].dev, .ino = reqs[i].ino, .off = reqs[i].off,
					  .object = reqs[i].object };
		const struct symcache_value *v;

		(void)symcache_put_failure(s->cache, &k, err, t);
		v = symcache_get(s->cache, &k);
		if (v && v->retry_ns && (!s->next_due || v->retry_ns < s->next_due))
			s->next_due = v->retry_ns;
	}
}

/* The delay before the requests of a failed run are asked again, in whole
 * seconds, for the log: what the first of them got. */
static unsigned retry_seconds(struct symbolizer *s, uid_t uid, const struct symproto_req *reqs, size_t nreq)
{
	struct symcache_key k;
	const struct symcache_value *v;
	uint64_t t = now_ns();

	if (nreq == 0)
		return 0;
	k = (struct symcache_key){ .uid = uid, .dev = reqs[0].dev, .ino = reqs[0].ino, .off = reqs[0].off,
				   .object = reqs[0].object };
	v = symcache_get(s->cache, &k);
	return v && v->retry_ns > t ? (unsigned)((v->retry_ns - t + 999999999ull) / 1000000000ull) : 0;
}

static void run_finish(struct symrun *run)
{
	struct symbolizer *s = run->s;
	struct elided *d = s->d;
	struct symproto_answer *ans = NULL;
	unsigned files = 0, answered = 0;
	uint64_t t = now_ns();
	const char *failure = NULL;
	int r = -EBADMSG;

	if (run->killed)
		failure = run->kill_reason ? run->kill_reason : "killed";
	else if (run->overflow)
		failure = "sent more than it was asked for";
	else if (run->status != 0)
		failure = "failed";
	else {
		ans = calloc(run->nreq, sizeof(*ans));
		r = ans ? symproto_parse(run->buf, run->len, run->reqs, run->nreq, ans, &files) : -ENOMEM;
		if (r == -ENOMEM)
			failure = "could not be read (out of memory)";
		else if (r == -EBADMSG)
			failure = "sent a malformed answer";
	}
	/* A killed run costs at least the time it was let stall. */
	symcache_budget_charge(s->cache, run->uid, t,
			       run->killed && run->cpu_ns < SYMBOLIZER_STALL_USEC * 1000ull ?
				       SYMBOLIZER_STALL_USEC * 1000ull : run->cpu_ns);
	if (failure)
		/* Asked again later, with back-off: a busy machine, a file that
		 * hung once, must not cost the names for good. */
		remember_failure(s, run->uid, run->reqs, run->nreq, ETIMEDOUT);
	else
		for (size_t i = 0; i < run->nreq; i++) {
			struct symcache_key k = { .uid = run->uid, .dev = run->reqs[i].dev, .ino = run->reqs[i].ino,
						  .off = run->reqs[i].off, .object = run->reqs[i].object };
			struct symcache_value v = { .err = ENOENT };

			/* Unanswered by a child that did answer: nothing to find there. */
			if (ans[i].have) {
				v = ans[i].v;
				answered++;
			}
			(void)symcache_put(s->cache, &k, &v);
		}
	if (failure)
		log_uid(&d->ratelimit, run->uid, LOG_WARNING,
			"symbolizer for pid %d (uid %u) %s (status %d, %.1f ms CPU, %.1f s); its locks stay named by address, asked again in %u s",
			(int)run->target, (unsigned)run->uid, failure, run->status, (double)run->cpu_ns / 1e6,
			(double)(t - run->started_ns) / 1e9, retry_seconds(s, run->uid, run->reqs, run->nreq));
	log_debug("symbolizer for pid %d (uid %u): %zu addresses, %u answered, %u files parsed, %.1f ms CPU, %.1f ms",
		  (int)run->target, (unsigned)run->uid, run->nreq, answered, files, (double)run->cpu_ns / 1e6,
		  (double)(t - run->started_ns) / 1e6);
	free(ans);
	unlink_run(s, run);
	run_free(run);
	/* Name what can be named now; whatever is left goes to the next
	 * children, for this user and any other that waited for one. */
	retry_all(s);
}

static bool run_for_uid(const struct symbolizer *s, uid_t uid)
{
	for (const struct symrun *r = s->runs; r; r = r->next)
		if (r->uid == uid)
			return true;
	return false;
}

static int read_gid(pid_t pid, gid_t *gid)
{
	char path[64], line[256];
	FILE *f;
	int r = -ENOENT;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned real, eff;

		if (sscanf(line, "Gid: %u %u", &real, &eff) == 2) {
			*gid = (gid_t)eff;
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

/*
 * Starts a child for these requests as uid and gid.  Takes reqs and maps
 * over on every path, so that each has one owner and one free: maps (the
 * array; its entries belong to the processes) is freed here as soon as the
 * child has its copy or none will be made; reqs goes to the run, freed with
 * it by run_free (here too, when the run cannot go on).  On failure the
 * requests are remembered as failed (asked again later, with back-off), the
 * call that failed is logged, and -errno returned.
 */
static int run_start(struct symbolizer *s, uid_t uid, gid_t gid, pid_t target, struct symproto_req *reqs,
		     struct elfsym_maps **maps, size_t nreq)
{
	struct elided *d = s->d;
	struct symrun *run;
	const char *what = "calloc";
	int pipefd[2] = { -1, -1 };
	int r = -ENOMEM;

	run = calloc(1, sizeof(*run));
	if (!run)
		goto fail;
	run->s = s;
	run->uid = uid;
	run->target = target;
	run->fd = -1;
	run->pidfd = -1;
	run->reqs = reqs;
	run->nreq = nreq;
	run->cap = nreq * SYMPROTO_LINE_MAX + 64;
	run->buf = malloc(run->cap);
	if (!run->buf) {
		what = "malloc";
		goto fail;
	}
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		r = -errno;
		what = "pipe2";
		goto fail;
	}
	run->fd = pipefd[0];
	run->child = fork();
	if (run->child < 0) {
		r = -errno;
		run->child = 0;
		close(pipefd[1]);
		what = "fork";
		goto fail;
	}
	if (run->child == 0)
		child_main(pipefd[1], maps, uid, gid, reqs, nreq);
	close(pipefd[1]);
	free(maps);
	maps = NULL;
	run->started_ns = run->last_progress_ns = now_ns();
	(void)fcntl(run->fd, F_SETFL, O_NONBLOCK);
	run->pidfd = (int)syscall(SYS_pidfd_open, run->child, 0);
	if (run->pidfd < 0)
		/* Before Linux 5.3, under a seccomp filter, out of fds: the
		 * end of the child's output tells its end (on_child_io). */
		log_uid(&d->ratelimit, uid, LOG_WARNING,
			"symbolizer for pid %d (uid %u): pidfd_open: %s; its child is reaped when its output ends",
			(int)target, (unsigned)uid, strerror(errno));
	else {
		r = sd_event_add_io(d->event, &run->exit_src, run->pidfd, EPOLLIN, on_child_exit, run);
		if (r < 0) {
			what = "sd_event_add_io (child exit)";
			goto fail;
		}
	}
	r = sd_event_add_io(d->event, &run->io, run->fd, EPOLLIN, on_child_io, run);
	if (r < 0) {
		what = "sd_event_add_io (child output)";
		goto fail;
	}
	r = sd_event_add_time_relative(d->event, &run->timer, CLOCK_MONOTONIC, SYMBOLIZER_CHECK_USEC, 0,
				       on_child_check, run);
	if (r < 0) {
		what = "sd_event_add_time_relative";
		goto fail;
	}
	run->next = s->runs;
	s->runs = run;
	s->nruns++;
	s->total_runs++;
	return 0;

fail:
	free(maps);
	if (r >= 0)
		r = -EIO;
	remember_failure(s, uid, reqs, nreq, -r);
	log_uid(&d->ratelimit, uid, LOG_ERR,
		"symbolizer for pid %d (uid %u) not started: %s: %s; its locks stay named by address, asked again in %u s",
		(int)target, (unsigned)uid, what, strerror(-r), retry_seconds(s, uid, reqs, nreq));
	if (run)
		run_free(run); /* kills and reaps a child already forked; frees reqs */
	else
		free(reqs);
	return r;
}

/* ---- naming a process's locks -------------------------------------------- */

static int req_cmp(const void *pa, const void *pb)
{
	const struct symproto_req *a = &((const struct symreq *)pa)->r, *b = &((const struct symreq *)pb)->r;

	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	if (a->off != b->off)
		return a->off < b->off ? -1 : 1;
	return (int)a->object - (int)b->object;
}

enum lookup {
	LOOKUP_DONE,
	LOOKUP_MISS,           /* not known: *req is the request for it */
	LOOKUP_LATER,          /* a failed run's: asked again once due */
	LOOKUP_UNMAPPED,
};

/* One address of a process (its maps, its owner): the cached answer, or a
 * request for it. */
static enum lookup lookup(struct symbolizer *s, struct elfsym_maps *maps, uid_t uid, uint64_t addr, bool object,
			  struct elfsym_result *res, struct symproto_req *req)
{
	struct elfsym_location loc;
	struct symcache_key k;
	const struct symcache_value *v;

	memset(res, 0, sizeof(*res));
	if (!maps || elfsym_maps_locate(maps, addr, &loc) < 0)
		return LOOKUP_UNMAPPED;
	snprintf(res->module, sizeof(res->module), "%s", loc.module);
	res->file_offset = loc.file_offset;
	/* A deleted file has no identity worth caching under; nor does one
	 * without an inode number. */
	if (loc.deleted || loc.inode == 0)
		return LOOKUP_DONE;
	k = (struct symcache_key){ .uid = uid, .dev = loc.dev, .ino = loc.inode, .off = loc.file_offset,
				   .object = object };
	v = symcache_get(s->cache, &k);
	if (v && symcache_use(v, s->now) == SYMCACHE_WAIT) {
		if (!s->next_due || v->retry_ns < s->next_due)
			s->next_due = v->retry_ns;
		return LOOKUP_LATER;
	}
	if (!v || symcache_use(v, s->now) == SYMCACHE_ASK) {
		*req = (struct symproto_req){ .addr = addr, .dev = loc.dev, .ino = loc.inode, .off = loc.file_offset,
					      .object = object };
		return LOOKUP_MISS;
	}
	res->vaddr = v->vaddr;
	if (v->err == 0) {
		snprintf(res->name, sizeof(res->name), "%s", v->name);
		res->offset = v->sym_offset;
		res->is_object = object;
	}
	return LOOKUP_DONE;
}

/* Names p's pending locks from the cache.  Misses go to reqs (when not
 * NULL, up to SYMBOLIZER_MAX_REQS); returns whether there were misses to
 * ask a child about (p->sym_pending also counts the locks that wait for a
 * failed run's retry). */
static bool name_from_cache(struct symbolizer *s, struct tracked_process *p, struct symreq *reqs, size_t *nreq)
{
	bool pending = false, unmapped = false, misses = false;
	struct symproto_req scratch;

	s->now = now_ns();
	if (!p->maps && elfsym_maps_load(&p->maps, p->pid) < 0)
		p->maps = NULL;
	for (size_t i = 0; i < p->nlocks; i++) {
		struct lock_view *v = &p->locks[i];
		struct elfsym_result obj, cs;
		char name[ELIDED_LOCK_NAME_MAX], callsite[ELIDED_CALLSITE_TEXT_MAX];
		enum lookup lo = LOOKUP_DONE, lc;
		struct symproto_req *slot;
		struct lock_names *nm;

		if (!v->sym_pending)
			continue;
		memset(&obj, 0, sizeof(obj));
		slot = reqs && *nreq < SYMBOLIZER_MAX_REQS ? &reqs[*nreq].r : &scratch;
		if (!v->named)
			lo = lookup(s, p->maps, p->uid, v->addr, true, &obj, slot);
		if (lo == LOOKUP_MISS && slot != &scratch) {
			reqs[(*nreq)++].maps = p->maps;
			slot = *nreq < SYMBOLIZER_MAX_REQS ? &reqs[*nreq].r : &scratch;
		}
		lc = lookup(s, p->maps, p->uid, v->callsite, false, &cs, slot);
		if (lc == LOOKUP_MISS && slot != &scratch)
			reqs[(*nreq)++].maps = p->maps;
		if (lo == LOOKUP_MISS || lc == LOOKUP_MISS) {
			misses = true;
			pending = true;
			continue;
		}
		/* A failed run's: the provisional name stays until the retry. */
		if (lo == LOOKUP_LATER || lc == LOOKUP_LATER) {
			pending = true;
			continue;
		}
		/* A library loaded since the maps were read: read them again,
		 * once per refresh; after that, the address is what we have. */
		if ((lo == LOOKUP_UNMAPPED || lc == LOOKUP_UNMAPPED) && !p->maps_reloaded) {
			unmapped = true;
			pending = true;
			continue;
		}
		if (v->named)
			snprintf(name, sizeof(name), "%s", lock_name(v->nm));
		else if (obj.name[0])
			elfsym_format_symbol(&obj, name, sizeof(name));
		else
			snprintf(name, sizeof(name), "0x%" PRIx64, v->addr);
		if (lc == LOOKUP_UNMAPPED)
			snprintf(callsite, sizeof(callsite), "0x%" PRIx64, v->callsite);
		else
			elfsym_format(&cs, v->callsite, callsite, sizeof(callsite));
		nm = lock_names_new(name, cs.name, callsite);
		if (!nm) {
			pending = true;
			continue;
		}
		free(v->nm);
		v->nm = nm;
		v->sym_pending = false;
		v->rule_stale = true;
		p->walk_views = true; /* its rule is matched at the next visit */
	}
	p->sym_pending = pending;
	if (unmapped && !reqs) {
		p->maps_reloaded = true;
		elfsym_maps_free(p->maps);
		p->maps = NULL;
		return name_from_cache(s, p, NULL, NULL);
	}
	return misses;
}

/* The same for a process without libelide: its observed locks' names. */
static bool observed_from_cache(struct symbolizer *s, struct symobs *o, struct symreq *reqs, size_t *nreq)
{
	bool pending = false, unmapped = false, misses = false;
	struct symproto_req scratch;

	s->now = now_ns();
	if (!o->maps && elfsym_maps_load(&o->maps, o->pid) < 0)
		o->maps = NULL;
	for (size_t i = 0; i < o->nlocks; i++) {
		struct symobs_lock *l = &o->locks[i];
		struct symproto_req *slot = reqs && *nreq < SYMBOLIZER_MAX_REQS ? &reqs[*nreq].r : &scratch;
		struct elfsym_result res;
		enum lookup lo;

		if (!l->pending)
			continue;
		lo = lookup(s, o->maps, o->uid, l->addr, true, &res, slot);
		if (lo == LOOKUP_MISS) {
			if (slot != &scratch)
				reqs[(*nreq)++].maps = o->maps;
			misses = true;
			pending = true;
			continue;
		}
		if (lo == LOOKUP_LATER || (lo == LOOKUP_UNMAPPED && !o->maps_reloaded)) {
			unmapped |= lo == LOOKUP_UNMAPPED;
			pending = true;
			continue;
		}
		if (lo == LOOKUP_DONE && res.name[0])
			elfsym_format_symbol(&res, l->name, sizeof(l->name));
		else
			l->name[0] = '\0';
		l->pending = false;
	}
	o->pending = pending;
	if (unmapped && !reqs) {
		o->maps_reloaded = true;
		elfsym_maps_free(o->maps);
		o->maps = NULL;
		return observed_from_cache(s, o, NULL, NULL);
	}
	return misses;
}

/*
 * One child for everything a user's processes miss (of one gid: the child
 * runs as that uid and gid), those with libelide and those the BPF observer
 * saw: a user starting many programs costs one run, not one per program.
 * Over budget or with a child out for that user, nothing: the misses are
 * asked for when the budget allows (the retry timer) or the child is done,
 * and the locks keep their provisional names meanwhile.
 */
static void start_batch(struct symbolizer *s, uid_t uid)
{
	struct elided *d = s->d;
	struct symreq *batch;
	struct symproto_req *reqs;
	struct elfsym_maps **maps;
	size_t n = 0, out = 0;
	pid_t target = 0;
	gid_t gid = (gid_t)-1;
	uint64_t t = now_ns();

	if (s->nruns >= SYMBOLIZER_MAX_CHILDREN || run_for_uid(s, uid))
		return;
	if (!symcache_budget_allows(s->cache, uid, t)) {
		uint64_t next = symcache_budget_next_ns(s->cache, uid, t);

		if (!s->next_due || next < s->next_due)
			s->next_due = next;
		return;
	}
	/* One past the cap: the last lookup may write before it is counted. */
	batch = calloc(SYMBOLIZER_MAX_REQS + 1, sizeof(*batch));
	if (!batch)
		return;
	for (struct tracked_process *p = d->processes; p && n < SYMBOLIZER_MAX_REQS; p = p->next) {
		gid_t g;

		if (p->uid != uid || !p->sym_pending || read_gid(p->pid, &g) < 0)
			continue;
		if (target == 0) {
			target = p->pid;
			gid = g;
		} else if (g != gid)
			continue;
		name_from_cache(s, p, batch, &n);
	}
	for (struct symobs *o = s->observed; o && n < SYMBOLIZER_MAX_REQS; o = o->next) {
		gid_t g;

		if (o->uid != uid || !o->pending || read_gid(o->pid, &g) < 0)
			continue;
		if (target == 0) {
			target = o->pid;
			gid = g;
		} else if (g != gid)
			continue;
		observed_from_cache(s, o, batch, &n);
	}
	if (n == 0) {
		free(batch);
		return;
	}
	/* One request per (file, offset, kind): hard links, shared libraries
	 * and repeated call sites cost one lookup. */
	qsort(batch, n, sizeof(*batch), req_cmp);
	reqs = calloc(n, sizeof(*reqs));
	maps = calloc(n, sizeof(*maps));
	if (!reqs || !maps) {
		free(batch);
		free(reqs);
		free(maps);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (out == 0 || req_cmp(&batch[out - 1], &batch[i]) != 0) {
			batch[out] = batch[i];
			reqs[out] = batch[i].r;
			maps[out] = batch[i].maps;
			out++;
		}
	free(batch);
	/* reqs and maps are run_start's now, whatever it returns. */
	(void)run_start(s, uid, gid, target, reqs, maps, out);
}

/* Everything that waits, for every user: names from the cache, children
 * for what is due (as many as may run). */
static void retry_all(struct symbolizer *s)
{
	struct elided *d = s->d;

	for (struct tracked_process *p = d->processes; p; p = p->next)
		if (p->sym_pending && name_from_cache(s, p, NULL, NULL))
			start_batch(s, p->uid);
	for (struct symobs *o = s->observed; o; o = o->next)
		if (o->pending && observed_from_cache(s, o, NULL, NULL))
			start_batch(s, o->uid);
	arm_retry(s);
}

static int on_retry(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct symbolizer *s = userdata;

	s->retry_at = 0;
	retry_all(s);
	return 0;
}

/* Sets the retry timer for the earliest time collected in next_due, unless
 * it is set for earlier already.  Where it cannot be set, the processes'
 * refreshes and the observer's listings still come back to what waits. */
static void arm_retry(struct symbolizer *s)
{
	uint64_t when = s->next_due;
	int r;

	s->next_due = 0;
	if (!when || (s->retry_at && s->retry_at <= when))
		return;
	if (!s->retry)
		r = sd_event_add_time(s->d->event, &s->retry, CLOCK_MONOTONIC, when / 1000, 0, on_retry, s);
	else {
		r = sd_event_source_set_time(s->retry, when / 1000);
		if (r >= 0)
			r = sd_event_source_set_enabled(s->retry, SD_EVENT_ONESHOT);
	}
	if (r < 0) {
		log_warning_errno(r, "symbolizer: cannot set its retry timer: %m");
		return;
	}
	(void)sd_event_source_set_description(s->retry, "symbolizer-retry");
	s->retry_at = when;
}

void elided_symbolize(struct elided *d, struct tracked_process *p)
{
	struct symbolizer *s = d->symbolizer;

	if (!s)
		return;
	if (name_from_cache(s, p, NULL, NULL))
		start_batch(s, p->uid);
	arm_retry(s);
}

size_t elided_symbolizer_cached_bytes(struct elided *d, uid_t uid)
{
	return d->symbolizer ? symcache_uid_bytes(d->symbolizer->cache, uid) : 0;
}

/* ---- processes without libelide ------------------------------------------ */

static struct symobs *observed_get(struct symbolizer *s, pid_t pid, uid_t uid, uint64_t start_time)
{
	struct symobs *o;

	for (o = s->observed; o; o = o->next)
		if (o->pid == pid)
			break;
	if (o && (o->uid != uid || o->start_time != start_time)) {
		/* Another process under that pid, or another owner: its names
		 * are not this one's. */
		elfsym_maps_free(o->maps);
		o->maps = NULL;
		o->nlocks = 0;
		o->pending = false;
		o->uid = uid;
		o->start_time = start_time;
	}
	if (o)
		return o;
	if (s->nobserved >= SYMBOLIZER_MAX_OBSERVED)
		return NULL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->pid = pid;
	o->uid = uid;
	o->start_time = start_time;
	o->next = s->observed;
	s->observed = o;
	s->nobserved++;
	return o;
}

int elided_symbolize_observed(struct elided *d, pid_t pid, uid_t uid, uint64_t start_time, uint64_t addr, char *name,
			      size_t size)
{
	struct symbolizer *s = d->symbolizer;
	struct symobs_lock *l = NULL;
	struct symobs *o;

	if (size)
		name[0] = '\0';
	if (!s || pid <= 0)
		return -EOPNOTSUPP;
	o = observed_get(s, pid, uid, start_time);
	if (!o)
		return -ENOMEM;
	o->seen_ns = now_ns();
	for (size_t i = 0; i < o->nlocks && !l; i++)
		if (o->locks[i].addr == addr)
			l = &o->locks[i];
	if (!l) {
		if (o->nlocks >= SYMBOLIZER_OBSERVED_LOCKS)
			return -ENOSPC;
		if (o->nlocks == o->alloc) {
			size_t a = o->alloc ? o->alloc * 2 : 8;
			struct symobs_lock *q = reallocarray(o->locks, a, sizeof(*q));

			if (!q)
				return -ENOMEM;
			o->locks = q;
			o->alloc = a;
		}
		l = &o->locks[o->nlocks++];
		memset(l, 0, sizeof(*l));
		l->addr = addr;
		l->pending = true;
		o->pending = true;
		/* Known already (another process mapping the file): now. */
		(void)observed_from_cache(s, o, NULL, NULL);
	}
	if (l->pending)
		return 0;
	snprintf(name, size, "%s", l->name);
	return l->name[0] ? 1 : 0;
}

bool elided_symbolizer_observed_known(struct elided *d, pid_t pid, uint64_t start_time, uint64_t addr)
{
	const struct symbolizer *s = d->symbolizer;

	for (const struct symobs *o = s ? s->observed : NULL; o; o = o->next)
		if (o->pid == pid) {
			if (o->start_time != start_time)
				return false;
			for (size_t i = 0; i < o->nlocks; i++)
				if (o->locks[i].addr == addr)
					return true;
			return false;
		}
	return false;
}

void elided_symbolize_observed_flush(struct elided *d)
{
	struct symbolizer *s = d->symbolizer;
	uint64_t t = now_ns();

	if (!s)
		return;
	/* Processes not asked about for a while are gone, or of no interest:
	 * their names are in the cache still. */
	for (struct symobs **pp = &s->observed; *pp;) {
		struct symobs *o = *pp;

		if (t - o->seen_ns >= SYMBOLIZER_OBSERVED_EXPIRE_NS) {
			*pp = o->next;
			s->nobserved--;
			symobs_free(o);
			continue;
		}
		o->maps_reloaded = false;
		pp = &o->next;
	}
	for (struct symobs *o = s->observed; o; o = o->next)
		if (o->pending && observed_from_cache(s, o, NULL, NULL))
			start_batch(s, o->uid);
	arm_retry(s);
}
