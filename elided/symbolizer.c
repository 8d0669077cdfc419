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
 * its event loop, kills the child at a wall-clock deadline (a file on FUSE
 * that never answers blocks the child only), validates every byte of the
 * answer, and charges the run to the uid's budget.  See elided(8).
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

/* Bounds (elided(8), "Threat model"). */
#define SYMBOLIZER_MAX_CHILDREN 2u             /* at once, all uids */
#define SYMBOLIZER_MAX_REQS 8192u              /* addresses per run: 4096 locks, 2 each */
#define SYMBOLIZER_TIMEOUT_USEC (5u * 1000000u) /* wall clock, then SIGKILL */
#define SYMBOLIZER_CPU_SEC 4u                  /* RLIMIT_CPU */
#define SYMBOLIZER_AS_HEADROOM (256ull << 20)  /* RLIMIT_AS above the daemon's own size */

struct symrun {
	struct symbolizer *s;
	uid_t uid;
	pid_t target;
	pid_t child;
	int fd;
	sd_event_source *io, *exit_src, *timer;
	int pidfd;
	char *buf;
	size_t len, cap;
	bool eof, exited, killed, overflow;
	uint64_t cpu_ns;
	int status;                            /* si_code/si_status summary */
	struct symproto_req *reqs;
	size_t nreq;
	uint64_t started_ns;
	struct symrun *next;
};

struct symbolizer {
	struct elided *d;
	struct symcache *cache;
	struct symrun *runs;
	unsigned nruns;
	uint64_t total_runs;
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
	 * ever read as the target's user, one level deep (elided(8)). */
	elfsym_set_debug_dir(getenv("ELIDE_DEBUG_DIR"));
	return 0;
}

static void run_free(struct symrun *run)
{
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
static void start_batch(struct symbolizer *s, uid_t uid);

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
	return 0;
}

/* The pidfd is readable once the child has exited: reap it with its CPU
 * time.  (No SIGCHLD handling: the daemon has no other children.) */
static int on_child_exit(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct symrun *run = userdata;
	struct rusage ru;
	int status;
	pid_t r = wait4(run->child, &status, WNOHANG, &ru);

	if (r == 0 || (r < 0 && errno == EINTR))
		return 0;
	sd_event_source_set_enabled(src, SD_EVENT_OFF);
	run->exited = true;
	if (r < 0)
		run->status = 255;
	else {
		run->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		run->cpu_ns = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
			      (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
	}
	/* Whatever is still in the pipe is there now. */
	if (!run->eof)
		on_child_io(run->io, run->fd, EPOLLIN, run);
	else
		run_finish(run);
	return 0;
}

static int on_child_timeout(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct symrun *run = userdata;

	run->killed = true;
	kill(run->child, SIGKILL);
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
		failure = "killed at its deadline";
	else if (run->overflow)
		failure = "sent more than it was asked for";
	else if (run->status != 0)
		failure = "failed";
	else {
		ans = calloc(run->nreq, sizeof(*ans));
		r = ans ? symproto_parse(run->buf, run->len, run->reqs, run->nreq, ans, &files) : -ENOMEM;
		if (r == -EBADMSG)
			failure = "sent a malformed answer";
	}
	/* A timed-out run costs at least its deadline. */
	symcache_budget_charge(s->cache, run->uid, t,
			       run->killed && run->cpu_ns < SYMBOLIZER_TIMEOUT_USEC * 1000ull ?
				       SYMBOLIZER_TIMEOUT_USEC * 1000ull : run->cpu_ns);
	for (size_t i = 0; i < run->nreq; i++) {
		struct symcache_key k = { .uid = run->uid, .dev = run->reqs[i].dev, .ino = run->reqs[i].ino,
					  .off = run->reqs[i].off, .object = run->reqs[i].object };
		struct symcache_value v = { .err = failure ? ETIMEDOUT : 0 };

		/* Unanswered by a child that did answer: nothing to find there. */
		if (!failure && (!ans || !ans[i].have))
			v.err = ENOENT;
		else if (!failure) {
			v = ans[i].v;
			answered++;
		}
		/* A failed run is remembered too: the file behind it is not read
		 * again at every interval. */
		(void)symcache_put(s->cache, &k, &v);
	}
	if (failure)
		log_uid(&d->ratelimit, run->uid, LOG_WARNING,
			"symbolizer for pid %d (uid %u) %s (status %d); its locks stay named by address",
			(int)run->target, (unsigned)run->uid, failure, run->status);
	log_debug("symbolizer for pid %d (uid %u): %zu addresses, %u answered, %u files parsed, %.1f ms CPU, %.1f ms",
		  (int)run->target, (unsigned)run->uid, run->nreq, answered, files, (double)run->cpu_ns / 1e6,
		  (double)(t - run->started_ns) / 1e6);
	free(ans);
	unlink_run(s, run);
	{
		uid_t uid = run->uid;

		run_free(run);
		/* Name what can be named now, for every process of that user;
		 * whatever is left goes to the next child. */
		for (struct tracked_process *p = d->processes; p; p = p->next)
			if (p->uid == uid && p->sym_pending)
				name_from_cache(s, p, NULL, NULL);
		start_batch(s, uid);
	}
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

/* Starts a child for these requests (taken over, and maps freed) as uid
 * and gid. */
static int run_start(struct symbolizer *s, uid_t uid, gid_t gid, pid_t target, struct symproto_req *reqs,
		     struct elfsym_maps **maps, size_t nreq)
{
	struct symrun *run;
	int pipefd[2];
	int r;

	run = calloc(1, sizeof(*run));
	if (!run)
		return -ENOMEM;
	run->fd = -1;
	run->pidfd = -1;
	run->cap = nreq * SYMPROTO_LINE_MAX + 64;
	run->buf = malloc(run->cap);
	if (!run->buf || pipe2(pipefd, O_CLOEXEC) < 0) {
		r = run->buf ? -errno : -ENOMEM;
		free(run->buf);
		free(run);
		return r;
	}
	run->child = fork();
	if (run->child < 0) {
		r = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		free(run->buf);
		free(run);
		return r;
	}
	if (run->child == 0)
		child_main(pipefd[1], maps, uid, gid, reqs, nreq);
	close(pipefd[1]);
	free(maps);
	run->s = s;
	run->uid = uid;
	run->target = target;
	run->fd = pipefd[0];
	run->reqs = reqs;
	run->nreq = nreq;
	run->started_ns = now_ns();
	(void)fcntl(run->fd, F_SETFL, O_NONBLOCK);
	run->next = s->runs;
	s->runs = run;
	s->nruns++;
	s->total_runs++;
	run->pidfd = (int)syscall(SYS_pidfd_open, run->child, 0);
	r = run->pidfd < 0 ? -errno : 0;
	if (r >= 0)
		r = sd_event_add_io(s->d->event, &run->exit_src, run->pidfd, EPOLLIN, on_child_exit, run);
	if (r >= 0)
		r = sd_event_add_io(s->d->event, &run->io, run->fd, EPOLLIN, on_child_io, run);
	if (r >= 0)
		r = sd_event_add_time_relative(s->d->event, &run->timer, CLOCK_MONOTONIC, SYMBOLIZER_TIMEOUT_USEC, 0,
					       on_child_timeout, run);
	if (r < 0) {
		unlink_run(s, run);
		run_free(run);
		return r;
	}
	return 0;
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

enum lookup { LOOKUP_DONE, LOOKUP_MISS, LOOKUP_UNMAPPED };

/* One address: the cached answer, or a request for it. */
static enum lookup lookup(struct symbolizer *s, struct tracked_process *p, uint64_t addr, bool object,
			  struct elfsym_result *res, struct symproto_req *req)
{
	struct elfsym_location loc;
	struct symcache_key k;
	const struct symcache_value *v;

	memset(res, 0, sizeof(*res));
	if (!p->maps || elfsym_maps_locate(p->maps, addr, &loc) < 0)
		return LOOKUP_UNMAPPED;
	snprintf(res->module, sizeof(res->module), "%s", loc.module);
	res->file_offset = loc.file_offset;
	/* A deleted file has no identity worth caching under; nor does one
	 * without an inode number. */
	if (loc.deleted || loc.inode == 0)
		return LOOKUP_DONE;
	k = (struct symcache_key){ .uid = p->uid, .dev = loc.dev, .ino = loc.inode, .off = loc.file_offset,
				   .object = object };
	v = symcache_get(s->cache, &k);
	if (!v) {
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
 * NULL, up to SYMBOLIZER_MAX_REQS); returns whether some are left. */
static bool name_from_cache(struct symbolizer *s, struct tracked_process *p, struct symreq *reqs, size_t *nreq)
{
	bool pending = false, unmapped = false;
	struct symproto_req scratch;

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
			lo = lookup(s, p, v->addr, true, &obj, slot);
		if (lo == LOOKUP_MISS && slot != &scratch) {
			reqs[(*nreq)++].maps = p->maps;
			slot = *nreq < SYMBOLIZER_MAX_REQS ? &reqs[*nreq].r : &scratch;
		}
		lc = lookup(s, p, v->callsite, false, &cs, slot);
		if (lc == LOOKUP_MISS && slot != &scratch)
			reqs[(*nreq)++].maps = p->maps;
		if (lo == LOOKUP_MISS || lc == LOOKUP_MISS) {
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
	return pending;
}

/*
 * One child for everything a user's processes miss (of one gid: the child
 * runs as that uid and gid): a user starting many programs costs one run,
 * not one per program.  Over budget or with a child out for that user,
 * nothing: the misses are asked for at a later refresh, and the locks keep
 * their provisional names meanwhile.
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

	if (s->nruns >= SYMBOLIZER_MAX_CHILDREN || run_for_uid(s, uid) || !symcache_budget_allows(s->cache, uid, now_ns()))
		return;
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
	if (n == 0) {
		free(batch);
		return;
	}
	/* One request per (file, offset, kind): hard links, shared libraries
	 * and repeated call sites cost one lookup. */
	qsort(batch, n, sizeof(*batch), req_cmp);
	reqs = calloc(n, sizeof(*reqs));
	maps = calloc(n, sizeof(*maps));
	if (reqs && maps)
		for (size_t i = 0; i < n; i++)
			if (out == 0 || req_cmp(&batch[out - 1], &batch[i]) != 0) {
				batch[out] = batch[i];
				reqs[out] = batch[i].r;
				maps[out] = batch[i].maps;
				out++;
			}
	free(batch);
	if (!reqs || !maps || run_start(s, uid, gid, target, reqs, maps, out) < 0) {
		free(reqs);
		free(maps);
	}
}

void elided_symbolize(struct elided *d, struct tracked_process *p)
{
	struct symbolizer *s = d->symbolizer;

	if (s && name_from_cache(s, p, NULL, NULL))
		start_batch(s, p->uid);
}

size_t elided_symbolizer_cached_bytes(struct elided *d, uid_t uid)
{
	return d->symbolizer ? symcache_uid_bytes(d->symbolizer->cache, uid) : 0;
}
