/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What earlier runs of this program taught, before the first contended
 * lock, and what this run teaches, at exit (issue 34; the files are
 * common/learn-format.h's).
 *
 * At start-up, in adaptive mode, libelide reads its program's verdicts:
 * the last run's .teach file (while elided has not folded it in yet) and
 * elided's .hints file, and finds each lock's address through
 * /proc/self/maps.  Until elided writes the segment's control block, a
 * new lock record looks itself up there (learn_hint_verdict()); from then
 * on elided's own hints are the ones that count.  At normal exit, a run
 * that tried transactions writes its counters to the .teach file, so that
 * the next run and elided learn from it even when elided never saw the
 * process (it ended before adoption).
 *
 * Nothing happens without elided's hints folder (elided with learning is
 * not running here, or never ran), with stats=0, in a forked child that did
 * not exec, or once the program runs under a seccomp filter.  No file
 * descriptor is kept; errno is the program's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elide-internal.h"
#include "fdio.h"
#include "log.h"
#include "learn-format.h"

#define LEARN_MAX_ENTRIES (ELIDE_LEARN_MAX_TEACH + ELIDE_LEARN_MAX_HINTS)
#define MAPS_LINE_MAX (PATH_MAX + 128)

struct pending {
	struct elide_learn_lock lock;
	uint32_t verdict;
	uint64_t addr;                /* resolved; 0: not mapped now */
};

/* Scratch memory of one start-up or exit, mapped only while used. */
struct scratch {
	union {
		struct elide_learn_header header;
		char file[ELIDE_LEARN_TEACH_FILE_MAX > ELIDE_LEARN_HINTS_FILE_MAX ? ELIDE_LEARN_TEACH_FILE_MAX :
										     ELIDE_LEARN_HINTS_FILE_MAX];
	};
	struct pending pending[LEARN_MAX_ENTRIES];
	uint32_t npending;
	char maps[2 * MAPS_LINE_MAX];
};

static struct {
	bool enabled;                 /* elided's hints folder is there and trusted */
	pid_t pid;                    /* the process these are for (not a forked child) */
	size_t program_len;
	char program[ELIDE_LEARN_PROGRAM_MAX + 1];
	uint32_t nhints;
	struct elide_seg_hint hints[LEARN_MAX_ENTRIES];
} learn;

static int64_t wall_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec;
}

/* "path:EXE:ino=N:mtime=N", as elided computes it from /proc/PID/exe. */
static int program_identity(void)
{
	char exe[PATH_MAX];
	struct stat st;
	ssize_t n;
	int len;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	exe[n] = '\0';
	if (stat("/proc/self/exe", &st) < 0)
		return -errno;
	len = snprintf(learn.program, sizeof(learn.program), "path:%s:ino=%llu:mtime=%lld", exe,
		       (unsigned long long)st.st_ino, (long long)st.st_mtim.tv_sec);
	if (len < 0 || (size_t)len >= sizeof(learn.program))
		return -ENAMETOOLONG;
	learn.program_len = (size_t)len;
	return 0;
}

/* A folder or file we may believe: not group- or other-writable, owned by
 * `owner` or (for the folder) root. */
static bool trusted(const struct stat *st, uid_t owner, bool dir)
{
	if (dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
		return false;
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return false;
	return st->st_uid == owner || (dir && st->st_uid == 0);
}

/* Reads NAME in dirfd whole into (*sp)->file when it is trusted and at
 * most max bytes, mapping the scratch memory on first need (most programs
 * have no file: no mapping then); its size, or -errno. */
static ssize_t read_file(int dirfd, const char *name, uid_t owner, uid_t alt_owner, size_t max, struct scratch **sp,
			 struct stat *st)
{
	size_t got;
	int fd;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0 || (!trusted(st, owner, false) && !trusted(st, alt_owner, false)) ||
	    (size_t)st->st_size > max) {
		close(fd);
		return -EPERM;
	}
	if (!*sp) {
		void *p = mmap(NULL, sizeof(**sp), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			close(fd);
			return -ENOMEM;
		}
		*sp = p; /* zero-filled: no pending verdict yet */
	}
	got = fd_read_up_to(fd, (*sp)->file, (size_t)st->st_size);
	close(fd);
	return (ssize_t)got;
}

static bool same_program(const struct elide_learn_header *h, uid_t uid)
{
	return h->uid == uid && h->program_len == learn.program_len &&
	       memcmp(h->program, learn.program, learn.program_len) == 0;
}

static void add_pending(struct scratch *s, const struct elide_learn_lock *lock, uint32_t verdict)
{
	if (s->npending >= LEARN_MAX_ENTRIES)
		return;
	s->pending[s->npending].lock = *lock;
	s->pending[s->npending].verdict = verdict;
	s->pending[s->npending].addr = 0;
	s->npending++;
}

/* The last run's counters, judged as elided judges them: locks that share
 * an identity (heap locks of one call site) count as one. */
static void take_teach(struct scratch *s, size_t size, uid_t uid)
{
	const struct elide_learn_teach *t = (const void *)(&s->header + 1);
	uint32_t n;

	if (elide_learn_check_teach(s->file, size, NULL, 0) < 0 || !same_program(&s->header, uid))
		return;
	n = s->header.count;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t attempts = t[i].attempts, commits = t[i].commits;
		bool first = true;
		uint32_t v;

		for (uint32_t j = 0; j < n; j++) {
			if (j == i || memcmp(&t[j].lock, &t[i].lock, sizeof(t[i].lock)))
				continue;
			if (j < i) {
				first = false;
				break;
			}
			attempts = attempts + t[j].attempts < attempts ? UINT64_MAX : attempts + t[j].attempts;
			commits = commits + t[j].commits < commits ? UINT64_MAX : commits + t[j].commits;
		}
		if (!first)
			continue;
		v = elide_learn_judge(attempts, commits > attempts ? attempts : commits);
		if (v != ELIDE_LEARN_NONE)
			add_pending(s, &t[i].lock, v);
	}
}

static void take_hints(struct scratch *s, size_t size, uid_t uid, int64_t now)
{
	const struct elide_learn_hint *h = (const void *)(&s->header + 1);

	if (elide_learn_check_hints(s->file, size, NULL, 0) < 0 || !same_program(&s->header, uid))
		return;
	for (uint32_t i = 0; i < s->header.count; i++)
		if (h[i].until == 0 || h[i].until > now)
			add_pending(s, &h[i].lock, h[i].verdict);
}

/* ---- /proc/self/maps ------------------------------------------------------ */

struct map_line {
	uint64_t start, end, offset;
	bool writable, executable;
	char base[ELIDE_LEARN_MODULE_MAX]; /* basename, cut as elided cuts it; "" for none */
};

static const char *hex(const char *p, uint64_t *v)
{
	const char *q = p;

	*v = 0;
	for (;; q++) {
		unsigned d;

		if (*q >= '0' && *q <= '9')
			d = (unsigned)(*q - '0');
		else if (*q >= 'a' && *q <= 'f')
			d = (unsigned)(*q - 'a' + 10);
		else
			break;
		*v = *v << 4 | d;
	}
	return q == p ? NULL : q;
}

/* One line of maps as elided's reader takes it (common/elfsym.c): a file
 * mapping that is not deleted, or the anonymous writable tail (.bss) that
 * directly follows one; anything else gets base "". */
static bool parse_map_line(char *line, struct map_line *m, struct map_line *prev)
{
	static const char deleted[] = " (deleted)";
	uint64_t dev_major, dev_minor, inode;
	const char *p = line, *path, *slash;
	char perms[4];
	size_t len;

	if (!(p = hex(p, &m->start)) || *p++ != '-' || !(p = hex(p, &m->end)) || *p++ != ' ')
		return false;
	if (strlen(p) < 5 || p[4] != ' ')
		return false;
	memcpy(perms, p, 4);
	p += 5;
	if (!(p = hex(p, &m->offset)) || *p++ != ' ' || !(p = hex(p, &dev_major)) || *p++ != ':' ||
	    !(p = hex(p, &dev_minor)) || *p++ != ' ')
		return false;
	inode = 0;
	while (*p >= '0' && *p <= '9')
		inode = inode * 10 + (uint64_t)(*p++ - '0');
	while (*p == ' ')
		p++;
	path = p;
	len = strlen(path);
	m->writable = perms[1] == 'w';
	m->executable = perms[2] == 'x';
	/* Zero-padded: a record's module field is compared whole. */
	memset(m->base, 0, sizeof(m->base));
	if (m->end <= m->start)
		return false;
	if (len == 0) {
		if (prev->base[0] && prev->end == m->start && m->writable && inode == 0) {
			memcpy(m->base, prev->base, sizeof(m->base));
			m->offset = prev->offset + (prev->end - prev->start);
		}
		prev->base[0] = '\0'; /* one tail per file mapping */
		return true;
	}
	if (path[0] != '/' || (len > sizeof(deleted) - 1 && strcmp(path + len - (sizeof(deleted) - 1), deleted) == 0)) {
		prev->base[0] = '\0';
		return true;
	}
	slash = strrchr(path, '/');
	strncpy(m->base, slash + 1, sizeof(m->base) - 1);
	*prev = *m;
	return true;
}

typedef void (*map_fn)(const struct map_line *m, struct scratch *s);

/* Calls fn for each mapping of /proc/self/maps, in address order. */
static int walk_maps(struct scratch *s, map_fn fn)
{
	struct map_line m, prev = { .base = "" };
	size_t have = 0;
	bool skipping = false;
	int fd;

	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, s->maps + have, sizeof(s->maps) - 1 - have);
		char *line, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		s->maps[have] = '\0';
		line = s->maps;
		while ((nl = strchr(line, '\n'))) {
			*nl = '\0';
			if (!skipping && parse_map_line(line, &m, &prev))
				fn(&m, s);
			skipping = false;
			line = nl + 1;
		}
		have = (size_t)(s->maps + have - line);
		memmove(s->maps, line, have);
		if (have == sizeof(s->maps) - 1) {
			/* A line longer than any path: not a module of ours. */
			skipping = true;
			have = 0;
		}
	}
	close(fd);
	return 0;
}

/* The first mapping in address order that holds the offset, of the kind a
 * lock (writable) or a call site (executable) lies in. */
static void resolve_one(const struct map_line *m, struct scratch *s)
{
	if (!m->base[0])
		return;
	for (uint32_t i = 0; i < s->npending; i++) {
		struct pending *p = &s->pending[i];

		if (p->addr || strcmp(p->lock.module, m->base) != 0)
			continue;
		if (p->lock.match == ELIDE_SEG_HINT_LOCK_ADDR ? !m->writable : !m->executable)
			continue;
		if (p->lock.offset < m->offset || p->lock.offset - m->offset >= m->end - m->start)
			continue;
		p->addr = m->start + (p->lock.offset - m->offset);
	}
}

/* ---- start-up ------------------------------------------------------------- */

static struct scratch *load(int rundir, int hintsdir, uid_t hints_owner)
{
	uid_t uid = geteuid();
	char stem[ELIDE_LEARN_NAME_MAX], name[ELIDE_LEARN_NAME_MAX + 8];
	int64_t now = wall_seconds();
	struct scratch *s = NULL;
	struct stat st;
	ssize_t size;

	elide_learn_stem((uint32_t)uid, learn.program, learn.program_len, stem, sizeof(stem));
	/* The .teach file first: elided writes the .hints file before it
	 * removes the .teach file, so one of them has the last run. */
	snprintf(name, sizeof(name), "%s%s", stem, ELIDE_LEARN_TEACH_SUFFIX);
	size = read_file(rundir, name, uid, uid, ELIDE_LEARN_TEACH_FILE_MAX, &s, &st);
	if (size > 0 && now - st.st_mtim.tv_sec <= ELIDE_LEARN_TEACH_FRESH_SEC)
		take_teach(s, (size_t)size, uid);
	snprintf(name, sizeof(name), "%s%s", stem, ELIDE_LEARN_HINTS_SUFFIX);
	size = read_file(hintsdir, name, uid, hints_owner, ELIDE_LEARN_HINTS_FILE_MAX, &s, &st);
	if (size > 0)
		take_hints(s, (size_t)size, uid, now);
	if (!s || !s->npending || walk_maps(s, resolve_one) < 0)
		return s;
	for (uint32_t i = 0; i < s->npending; i++) {
		if (!s->pending[i].addr)
			continue; /* a module not loaded (yet): elided's own hints have it once adopted */
		learn.hints[learn.nhints].addr = s->pending[i].addr;
		learn.hints[learn.nhints].match = s->pending[i].lock.match;
		learn.hints[learn.nhints].verdict = s->pending[i].verdict;
		learn.nhints++;
	}
	return s;
}

void learn_init(const char *runtime_dir)
{
	int saved_errno = errno, rundir = -1, hintsdir = -1;
	struct scratch *s = NULL;
	struct stat st;

	/* Off is off; and a process that passes everything to glibc (its
	 * elision on, no lock table) has nothing to learn or to teach. */
	if (!elide.recs || !elide.opts.stats || elide_sandboxed() || elide.opts.mode == ELIDE_MODE_OFF ||
	    elide.disabled_reason)
		goto out;
	rundir = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rundir < 0)
		goto out;
	hintsdir = openat(rundir, ELIDE_LEARN_HINTS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (hintsdir < 0 || fstat(hintsdir, &st) < 0 || !trusted(&st, geteuid(), true))
		goto out;
	if (program_identity() < 0)
		goto out;
	learn.enabled = true;
	learn.pid = getpid();
	/* Verdicts only steer adaptive mode (elide-learning(7)). */
	if (elide.opts.mode == ELIDE_MODE_ADAPTIVE)
		s = load(rundir, hintsdir, st.st_uid);
	if (elide.opts.verbose)
		log_info("learned verdicts for %u locks of this program (%s/%s)", learn.nhints, runtime_dir,
			 ELIDE_LEARN_HINTS_DIR);
out:
	if (s)
		munmap(s, sizeof(*s));
	if (hintsdir >= 0)
		close(hintsdir);
	if (rundir >= 0)
		close(rundir);
	errno = saved_errno;
}

/*
 * The verdict the files gave for a new lock, 0 for none.  Only until
 * elided writes the control block: its hints then say what holds (a
 * ForgetLearned, a verdict withdrawn for a probe).
 */
uint32_t learn_hint_verdict(const void *lock, const void *callsite)
{
	for (uint32_t i = 0; i < learn.nhints; i++) {
		const struct elide_seg_hint *h = &learn.hints[i];
		uint64_t want = h->match == ELIDE_SEG_HINT_LOCK_ADDR ? (uint64_t)(uintptr_t)lock :
								       (uint64_t)(uintptr_t)callsite;

		if (want && h->addr == want)
			return h->verdict;
	}
	return 0;
}

/* ---- exit ----------------------------------------------------------------- */

struct taught {
	uint64_t addr, callsite;
	const struct elide_seg_lock *e;
	struct elide_learn_lock lock; /* match 0: not located yet */
};

/* The exit scratch: the file being written, and the locks it covers. */
struct exit_scratch {
	struct scratch s;
	struct taught taught[ELIDE_LEARN_MAX_TEACH];
	uint32_t ntaught;
};

static bool locate(const struct map_line *m, uint64_t addr, struct elide_learn_lock *lock)
{
	if (!m->base[0] || addr < m->start || addr >= m->end)
		return false;
	memset(lock, 0, sizeof(*lock));
	memcpy(lock->module, m->base, sizeof(lock->module));
	lock->offset = addr - m->start + m->offset;
	return true;
}

static void locate_one(const struct map_line *m, struct scratch *s)
{
	struct exit_scratch *x = (struct exit_scratch *)s;

	for (uint32_t i = 0; i < x->ntaught; i++) {
		struct taught *t = &x->taught[i];
		struct elide_learn_lock l;

		/* The lock itself wins over its call site, wherever each lies. */
		if (t->lock.match == ELIDE_SEG_HINT_LOCK_ADDR)
			continue;
		if (locate(m, t->addr, &l)) {
			t->lock = l;
			t->lock.match = ELIDE_SEG_HINT_LOCK_ADDR;
		} else if (!t->lock.match && t->callsite && locate(m, t->callsite, &l)) {
			t->lock = l;
			t->lock.match = ELIDE_SEG_HINT_CALLSITE;
		}
	}
}

/* The locks that tried transactions, those with the most attempts first
 * when there are more than a file holds. */
static void collect(struct exit_scratch *x)
{
	uint32_t high = __atomic_load_n(&elide.seg_header->lock_high_water, __ATOMIC_ACQUIRE);

	if (high > elide.nrecs)
		high = elide.nrecs;
	for (uint32_t i = REC_OVERFLOW + 1; i < high; i++) {
		const struct elide_seg_lock *e = &elide.seg_locks[i];
		uint64_t attempts = __atomic_load_n(&e->stats[ELIDE_SEG_STAT_ATTEMPTS], __ATOMIC_RELAXED);
		uint32_t slot = x->ntaught;

		if (attempts == 0 || e->kind == ELIDE_SEG_KIND_FREE || e->kind == ELIDE_SEG_KIND_OVERFLOW)
			continue;
		if (slot == ELIDE_LEARN_MAX_TEACH) {
			slot = 0;
			for (uint32_t j = 1; j < x->ntaught; j++)
				if (x->taught[j].e->stats[ELIDE_SEG_STAT_ATTEMPTS] <
				    x->taught[slot].e->stats[ELIDE_SEG_STAT_ATTEMPTS])
					slot = j;
			if (x->taught[slot].e->stats[ELIDE_SEG_STAT_ATTEMPTS] >= attempts)
				continue;
		} else {
			x->ntaught++;
		}
		x->taught[slot] = (struct taught){ .addr = e->addr, .callsite = e->callsite, .e = e };
	}
}

static bool any_attempts(void)
{
	uint32_t high = __atomic_load_n(&elide.seg_header->lock_high_water, __ATOMIC_ACQUIRE);

	for (uint32_t i = REC_OVERFLOW + 1; i < high && i < elide.nrecs; i++)
		if (__atomic_load_n(&elide.seg_locks[i].stats[ELIDE_SEG_STAT_ATTEMPTS], __ATOMIC_RELAXED))
			return true;
	return false;
}

static void write_teach(struct exit_scratch *x, int rundir)
{
	struct elide_learn_header *h = &x->s.header;
	struct elide_learn_teach *t = (void *)(h + 1);
	char stem[ELIDE_LEARN_NAME_MAX], name[ELIDE_LEARN_NAME_MAX + 8], tmp[ELIDE_LEARN_NAME_MAX + 32];
	uid_t uid = geteuid();
	int fd, r;

	memset(h, 0, sizeof(*h));
	memcpy(h->magic, ELIDE_LEARN_TEACH_MAGIC, sizeof(h->magic));
	h->version = ELIDE_LEARN_VERSION;
	h->uid = (uint32_t)uid;
	h->pid = (uint64_t)learn.pid;
	h->start_time = elide.seg_header->start_time;
	h->written = wall_seconds();
	h->program_len = (uint32_t)learn.program_len;
	memcpy(h->program, learn.program, learn.program_len);
	for (uint32_t i = 0; i < x->ntaught; i++) {
		const struct elide_seg_lock *e = x->taught[i].e;
		struct elide_learn_teach *out = &t[h->count];

		if (!x->taught[i].lock.match)
			continue; /* in no file: not learned (elide-learning(7)) */
		memset(out, 0, sizeof(*out));
		out->lock = x->taught[i].lock;
		out->acquired = __atomic_load_n(&e->stats[ELIDE_SEG_STAT_ACQUIRED], __ATOMIC_RELAXED);
		out->attempts = __atomic_load_n(&e->stats[ELIDE_SEG_STAT_ATTEMPTS], __ATOMIC_RELAXED);
		out->commits = __atomic_load_n(&e->stats[ELIDE_SEG_STAT_COMMITS], __ATOMIC_RELAXED);
		if (out->commits > out->attempts)
			out->commits = out->attempts; /* both are estimates */
		for (unsigned c = 0; c < ELIDE_LEARN_ABORT_CAUSES; c++)
			out->aborts[c] = __atomic_load_n(&e->stats[ELIDE_SEG_STAT_ABORT_CONFLICT + c], __ATOMIC_RELAXED);
		h->count++;
	}
	if (!h->count)
		return;
	elide_learn_stem((uint32_t)uid, learn.program, learn.program_len, stem, sizeof(stem));
	snprintf(name, sizeof(name), "%s%s", stem, ELIDE_LEARN_TEACH_SUFFIX);
	snprintf(tmp, sizeof(tmp), ".%s.%d", name, (int)learn.pid);
	(void)unlinkat(rundir, tmp, 0); /* a leftover of an earlier pid's crash */
	fd = openat(rundir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0)
		return;
	r = fd_write_all(fd, h, sizeof(*h) + h->count * sizeof(*t));
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0 || renameat(rundir, tmp, rundir, name) < 0)
		(void)unlinkat(rundir, tmp, 0);
}

void learn_fini(const char *runtime_dir)
{
	int saved_errno = errno, rundir;
	struct exit_scratch *x;

	if (!learn.enabled || learn.pid != getpid() || elide_sandboxed() || !elide.seg_header ||
	    elide.seg_header->pid != (int32_t)learn.pid || !any_attempts())
		return;
	x = mmap(NULL, sizeof(*x), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (x == MAP_FAILED)
		goto out;
	collect(x);
	if (x->ntaught && walk_maps(&x->s, locate_one) == 0) {
		struct stat st;

		rundir = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		/* elided still runs (it removes its folder when it stops):
		 * else nobody would fold the file in, or remove it. */
		if (rundir >= 0 && fstatat(rundir, ELIDE_LEARN_HINTS_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    trusted(&st, geteuid(), true))
			write_teach(x, rundir);
		if (rundir >= 0)
			close(rundir);
	}
	munmap(x, sizeof(*x));
out:
	errno = saved_errno;
}
