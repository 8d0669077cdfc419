/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided's learning (issue 16): when a process ends, what its run taught
 * about each lock goes into the learned-policy store (learned.c) under its
 * owner's uid and its program's identity; when a new process of a program
 * the store knows is adopted, the verdicts go into its segment as hints
 * (control.hints) that libelide applies when a lock is first contended, so
 * a lock that never committed tries no transaction at all.
 *
 * Identities, both computed by the daemon from the kernel's view, never
 * from the segment:
 *   program  "path:EXE:ino=N:mtime=N" of /proc/PID/exe (a rebuilt or
 *            replaced executable is another program);
 *   lock     "data:MODULE+0xOFF", the file offset of the lock itself in
 *            the module it lies in (a static lock: stable across runs in
 *            spite of ASLR), else "call:MODULE+0xOFF", the file offset of
 *            the call site that first found it contended (a heap lock:
 *            every lock made and contended there shares the verdict).
 * A lock in neither (a heap lock contended from code of a deleted or
 * anonymous mapping) is not learned.
 *
 * Safety: one user's runs feed only that uid's entries, and a process is
 * only ever given the entries of its own uid (the kernel's owner at
 * adoption), so one user cannot change what another user's processes get.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elfsym.h"
#include "elided.h"
#include "learn-format.h"
#include "learned.h"
#include "log.h"
#include "macros.h"

#define LEARNED_FILE "learned"
#define LEARNED_DAMAGED_FILE "learned.damaged"

static int64_t wall_seconds(void)
{
	return (int64_t)time(NULL);
}

int elided_learning_open(struct elided *d)
{
	char err[LEARNED_ERR_MAX];
	int r;

	d->state_dirfd = -1;
	d->learned = NULL;
	if (!d->state_dir)
		return 0; /* --no-learning: nothing is learned, given or saved */
	r = learned_store_new(LEARNED_PER_UID_CAP_DEFAULT, LEARNED_TOTAL_CAP_DEFAULT, &d->learned);
	if (r < 0)
		return r;
	if (mkdir(d->state_dir, 0700) < 0 && errno != EEXIST)
		return log_warning_errno(errno, "cannot create the state directory %s, nothing learned is kept",
					 d->state_dir),
		       0;
	d->state_dirfd = open(d->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->state_dirfd < 0)
		return log_warning_errno(errno, "cannot open the state directory %s, nothing learned is kept",
					 d->state_dir),
		       0;
	r = learned_store_load(d->learned, d->state_dirfd, LEARNED_FILE, err, sizeof(err));
	if (r == -EBADMSG) {
		/* Kept for a post-mortem, out of the way of the next save. */
		if (renameat(d->state_dirfd, LEARNED_FILE, d->state_dirfd, LEARNED_DAMAGED_FILE) == 0)
			log_error("%s/%s, ignored and moved to %s: starting with nothing learned", d->state_dir, err,
				  LEARNED_DAMAGED_FILE);
		else
			log_error("%s/%s, ignored: starting with nothing learned", d->state_dir, err);
		return 0;
	}
	if (r < 0) {
		log_error("%s/%s: starting with nothing learned, and keeping the file as it is", d->state_dir, err);
		/* Saving over a store we could not read would lose it. */
		close(d->state_dirfd);
		d->state_dirfd = -1;
		return 0;
	}
	log_info("learned policy: %zu entries from %s/%s", learned_store_count(d->learned), d->state_dir,
		 LEARNED_FILE);
	return 0;
}

/* Writes the store when it changed, at most every ELIDED_LEARNED_SAVE_USEC
 * unless forced (shutdown). */
void elided_learning_save(struct elided *d, bool force)
{
	char err[LEARNED_ERR_MAX];
	uint64_t now = now_ns() / 1000;
	int r;

	if (!d->learned_dirty || d->state_dirfd < 0)
		return;
	if (!force && d->learned_saved_usec && now - d->learned_saved_usec < ELIDED_LEARNED_SAVE_USEC)
		return;
	d->learned_saved_usec = now;
	r = learned_store_save(d->learned, d->state_dirfd, LEARNED_FILE, err, sizeof(err));
	if (r < 0) {
		/* The old file is intact (learned.h); retried at the next save. */
		if (!d->learned_save_failing)
			log_error("cannot save what was learned: %s/%s (the previous store is kept; retrying)",
				  d->state_dir, err);
		d->learned_save_failing = true;
		return;
	}
	if (d->learned_save_failing)
		log_notice("learned policy saved again to %s/%s", d->state_dir, LEARNED_FILE);
	d->learned_save_failing = false;
	d->learned_dirty = false;
}

void elided_learning_close(struct elided *d)
{
	elided_learning_save(d, true);
	learned_store_free(d->learned);
	d->learned = NULL;
	if (d->state_dirfd >= 0)
		close(d->state_dirfd);
	d->state_dirfd = -1;
}

/* ---- identities --------------------------------------------------------- */

/* The path and the file both from /proc/PID/exe now: p->exe is the image's
 * at its last exec seen, and an owner change found before the new image's
 * segment (a setuid exec) must not pair the former path with the new file. */
static int program_identity(const struct tracked_process *p, char **ret)
{
	char path[64], exe[sizeof(p->exe)];
	struct stat st;
	ssize_t n;

	if (!p->exe[0])
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)p->pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	exe[n] = '\0';
	if (stat(path, &st) < 0)
		return -errno;
	if (asprintf(ret, "path:%s:ino=%" PRIu64 ":mtime=%" PRId64, exe, (uint64_t)st.st_ino,
		     (int64_t)st.st_mtim.tv_sec) < 0)
		return -ENOMEM;
	return 0;
}

/* "data:MODULE+0xOFF" or "call:MODULE+0xOFF" (top of this file). */
static int lock_identity(const struct elfsym_maps *maps, uint64_t addr, uint64_t callsite, char *buf, size_t size)
{
	struct elfsym_location loc;

	if (!maps)
		return -ENOENT;
	if (elfsym_maps_locate(maps, addr, &loc) == 0 && !loc.deleted && loc.module[0]) {
		snprintf(buf, size, "data:%s+0x%" PRIx64, loc.module, loc.file_offset);
		return 0;
	}
	if (callsite && elfsym_maps_locate(maps, callsite, &loc) == 0 && !loc.deleted && loc.module[0]) {
		snprintf(buf, size, "call:%s+0x%" PRIx64, loc.module, loc.file_offset);
		return 0;
	}
	return -ENOENT;
}

/* The address a lock identity names in this process, and how libelide
 * matches it. */
static int lock_address(const struct elfsym_maps *maps, const char *identity, uint32_t *match, uint64_t *addr)
{
	struct elide_learn_lock l;

	if (elide_learn_lock_parse(identity, &l) < 0)
		return -EINVAL;
	*match = l.match;
	return elfsym_maps_address_of(maps, l.module, l.offset, addr);
}

/* ---- learning from a run ------------------------------------------------ */

struct run_lock {
	char identity[ELIDED_LEARNED_ID_MAX];
	uint64_t acquired, attempts, commits;
	uint64_t aborts[LEARNED_ABORT_CAUSES];
};

struct run {
	struct tracked_process *p;
	struct run_lock *locks;
	size_t n, alloc;
	bool causes_known;
};

static int run_add(struct run *run, uint64_t addr, uint64_t callsite, uint64_t acquired, uint64_t attempts,
		   uint64_t commits, const uint64_t *aborts)
{
	struct run_lock *l;

	if (run->n == run->alloc) {
		size_t a = run->alloc ? run->alloc * 2 : 16;
		struct run_lock *q = reallocarray(run->locks, a, sizeof(*q));

		if (!q)
			return -ENOMEM;
		run->locks = q;
		run->alloc = a;
	}
	l = &run->locks[run->n];
	memset(l, 0, sizeof(*l));
	if (lock_identity(run->p->maps, addr, callsite, l->identity, sizeof(l->identity)) < 0)
		return 0;
	l->acquired = acquired;
	l->attempts = attempts;
	l->commits = commits;
	if (aborts)
		memcpy(l->aborts, aborts, sizeof(l->aborts));
	run->n++;
	return 0;
}

static int run_entry(uint32_t index, const struct elide_seg_lock *e, void *userdata)
{
	struct run *run = userdata;

	(void)index;
	if (e->kind == ELIDE_SEG_KIND_OVERFLOW || e->kind == ELIDE_SEG_KIND_FREE)
		return 0;
	return run_add(run, e->addr, e->callsite, e->stats[ELIDE_SEG_STAT_ACQUIRED], e->stats[ELIDE_SEG_STAT_ATTEMPTS],
		       e->stats[ELIDE_SEG_STAT_COMMITS], &e->stats[ELIDE_SEG_STAT_ABORT_CONFLICT]);
}

static int cmp_run_lock(const void *a, const void *b)
{
	return strcmp(((const struct run_lock *)a)->identity, ((const struct run_lock *)b)->identity);
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* A verdict when the run saw enough attempts to be trusted (the rule
 * libelide applies to a .teach file too). */
static bool judge(const struct run_lock *l, enum learned_verdict *v)
{
	switch (elide_learn_judge(l->attempts, l->commits)) {
	case ELIDE_LEARN_NEVER:
		*v = LEARNED_NEVER;
		return true;
	case ELIDE_LEARN_ELIDES:
		*v = LEARNED_ELIDES;
		return true;
	default:
		return false;
	}
}

/* Whose run it was, for the store's key and for the log. */
struct run_owner {
	uid_t uid;
	const char *program;
	pid_t pid;
	const char *name;
};

static void learn_lock(struct elided *d, const struct run_owner *p, const struct run_lock *l, int64_t now)
{
	const struct learned_entry *old = learned_store_find(d->learned, p->uid, p->program, l->identity);
	struct learned_entry e = { 0 };
	int r;

	if (!judge(l, &e.verdict)) {
		/* Neither: elision half works.  A verdict from earlier runs that
		 * this run contradicts goes; libelide adapts on its own. */
		if (old && l->attempts >= ELIDED_LEARN_MIN_ATTEMPTS) {
			learned_store_forget_lock(d->learned, p->uid, p->program, l->identity);
			d->learned_dirty = true;
			d->learned_changes++;
		}
		return;
	}
	e.runs = 1;
	e.acquired = l->acquired;
	e.attempts = l->attempts;
	e.commits = l->commits;
	memcpy(e.aborts, l->aborts, sizeof(e.aborts));
	if (old && old->verdict == e.verdict) {
		e.runs = old->runs + 1 ? old->runs + 1 : old->runs;
		e.acquired = sat_add(e.acquired, old->acquired);
		e.attempts = sat_add(e.attempts, old->attempts);
		e.commits = sat_add(e.commits, old->commits);
		for (int c = 0; c < LEARNED_ABORT_CAUSES; c++)
			e.aborts[c] = sat_add(e.aborts[c], old->aborts[c]);
	}
	r = learned_store_put(d->learned, p->uid, p->program, l->identity, &e, now);
	if (r < 0) {
		log_warning_errno(r, "pid %d: cannot keep what was learned about lock %s", (int)p->pid, l->identity);
		return;
	}
	d->learned_dirty = true;
	d->learned_changes++;
	if (!old || old->verdict != e.verdict)
		log_debug("pid %d (%s): learned lock %s: %s (%" PRIu64 " attempts, %" PRIu64 " commits)", (int)p->pid,
			  p->name, l->identity, e.verdict == LEARNED_NEVER ? "never elide" : "elides well",
			  l->attempts, l->commits);
}

/* Locks sharing an identity (heap locks of one call site) count as one. */
static void learn_run(struct elided *d, const struct run_owner *owner, struct run *run)
{
	int64_t now = wall_seconds();
	uint64_t changes = d->learned_changes;
	size_t i, j;

	if (run->n > 1)
		qsort(run->locks, run->n, sizeof(*run->locks), cmp_run_lock);
	for (i = 0; i < run->n; i = j) {
		struct run_lock sum = run->locks[i];

		for (j = i + 1; j < run->n && strcmp(run->locks[j].identity, sum.identity) == 0; j++) {
			sum.acquired = sat_add(sum.acquired, run->locks[j].acquired);
			sum.attempts = sat_add(sum.attempts, run->locks[j].attempts);
			sum.commits = sat_add(sum.commits, run->locks[j].commits);
			for (int c = 0; c < LEARNED_ABORT_CAUSES; c++)
				sum.aborts[c] = sat_add(sum.aborts[c], run->locks[j].aborts[c]);
		}
		learn_lock(d, owner, &sum, now);
	}
	/* The program's next runs read it in their constructor. */
	if (d->learned_changes != changes)
		elided_hints_write(d, owner->uid, owner->program);
}

/* Whether (pid, start_time) already taught, and remember it did. */
static bool taught_before(struct elided *d, pid_t pid, uint64_t start_time)
{
	for (size_t i = 0; i < ELIDED_TAUGHT_RECENT; i++)
		if (d->taught_recent[i].pid == pid && d->taught_recent[i].start_time == start_time)
			return true;
	d->taught_recent[d->taught_recent_next].pid = pid;
	d->taught_recent[d->taught_recent_next].start_time = start_time;
	d->taught_recent_next = (d->taught_recent_next + 1) % ELIDED_TAUGHT_RECENT;
	return false;
}

void elided_learn_from(struct elided *d, struct tracked_process *p, bool at_exit)
{
	struct run run = { .p = p };
	struct run_owner owner;
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX];
	size_t i;
	int r;

	if (!d->learned || !p->learned_program || !p->maps || !p->nlocks)
		return;
	/* At exit, its .teach file taught already, or will.  (An exec's
	 * image writes none: destructors do not run.) */
	if (at_exit && (p->taught || taught_before(d, p->pid, p->start_time)))
		return;
	/* The counters as they are now, by cause (the segment outlives the
	 * process while elided maps it); else as of the last interval. */
	r = p->map ? seg_map_read_each(p->map, d->runtime_dirfd, SEG_READ_MAP_NO_STAT, ELIDED_MAX_LOCKS_PER_PROCESS,
				       p->created_ns, run_entry, &run, &snap, err, sizeof(err)) :
		     -ENOENT;
	seg_snapshot_free(snap);
	if (r < 0) {
		run.n = 0;
		for (i = 0; i < p->nlocks; i++) {
			const struct lock_view *v = &p->locks[i];
			uint64_t aborts[LEARNED_ABORT_CAUSES] = { 0 };

			if (v->kind == ELIDE_SEG_KIND_OVERFLOW)
				continue;
			aborts[LEARNED_ABORT_OTHER] = v->last[LOCK_RATE_ABORTS];
			if (run_add(&run, v->addr, v->callsite, v->last[LOCK_RATE_ACQUIRED], v->last[LOCK_RATE_ATTEMPTS],
				    v->last[LOCK_RATE_COMMITS], aborts) < 0)
				break;
		}
	}
	owner = (struct run_owner){ .uid = p->learned_uid, .program = p->learned_program, .pid = p->pid,
				    .name = tracked_process_name(p) };
	learn_run(d, &owner, &run);
	free(run.locks);
}

void elided_learn_from_teach(struct elided *d, uid_t uid, const char *program, pid_t pid, uint64_t start_time,
			     const struct elide_learn_teach *t, uint32_t n)
{
	struct tracked_process *p = elided_find_process(d, pid);
	struct run run = { 0 };
	struct run_owner owner = { .uid = uid, .program = program, .pid = pid };
	const char *exe = program + 5, *ino = strstr(exe, ":ino="), *base;
	char name[64];

	if (p && p->start_time == start_time && p->learned_uid == uid) {
		/* Tracked: this file is its exit's counters; its reaping
		 * learns nothing more. */
		if (p->taught)
			return;
		p->taught = true;
		(void)taught_before(d, pid, start_time);
	} else if (taught_before(d, pid, start_time)) {
		return; /* reaped and learned from its segment already */
	}
	/* The log names the program as elidectl does: its executable's name. */
	for (const char *q = ino; q; q = strstr(q + 1, ":ino="))
		ino = q;
	base = exe;
	for (const char *q = exe; ino && q < ino; q++)
		if (*q == '/')
			base = q + 1;
	snprintf(name, sizeof(name), "%.*s", ino ? (int)(ino - base) : 0, base);
	owner.name = name;
	run.locks = calloc(n ? n : 1, sizeof(*run.locks));
	if (!run.locks) {
		log_oom();
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct run_lock *l = &run.locks[run.n];

		if (elide_learn_lock_format(&t[i].lock, l->identity, sizeof(l->identity)) < 0)
			continue;
		l->acquired = t[i].acquired;
		l->attempts = t[i].attempts;
		l->commits = t[i].commits;
		for (unsigned c = 0; c < LEARNED_ABORT_CAUSES && c < ELIDE_LEARN_ABORT_CAUSES; c++)
			l->aborts[c] = t[i].aborts[c];
		run.n++;
	}
	learn_run(d, &owner, &run);
	free(run.locks);
}

/* ---- giving it to a new process ----------------------------------------- */

struct hint_build {
	struct tracked_process *p;
	int64_t now;
};

static int add_hint(uid_t uid, const char *program, const char *lock, const struct learned_entry *e, void *userdata)
{
	struct hint_build *hb = userdata;
	struct tracked_process *p = hb->p;
	struct elide_seg_hint *h;
	uint32_t match;
	uint64_t addr;

	(void)uid;
	(void)program;
	if (p->nhints >= ELIDE_SEG_MAX_HINTS)
		return 1;
	/* A "never" whose hold is over is withdrawn, as in the .hints file:
	 * this run probes the lock, and its exit confirms the verdict or not.
	 * Given here, it would turn the lock off before a short run tried it. */
	if (!learned_entry_holds(e, hb->now))
		return 0;
	if (lock_address(p->maps, lock, &match, &addr) < 0)
		return 0; /* a module this run does not map (yet) */
	h = &p->hints[p->nhints];
	h->addr = addr;
	h->match = match;
	h->verdict = e->verdict == LEARNED_NEVER ? ELIDE_SEG_HINT_NEVER : ELIDE_SEG_HINT_ELIDES;
	p->hint_since[p->nhints] = e->first_learned;
	p->nhints++;
	return 0;
}

static int count_entry(uid_t uid, const char *program, const char *lock, const struct learned_entry *e, void *userdata)
{
	(void)uid;
	(void)program;
	(void)lock;
	(void)e;
	(*(size_t *)userdata)++;
	return 0;
}

void elided_learning_adopt(struct elided *d, struct tracked_process *p)
{
	struct hint_build hb = { .p = p, .now = wall_seconds() };
	size_t known = 0;
	int r;

	free(p->learned_program);
	p->learned_program = NULL;
	free(p->hints);
	p->hints = NULL;
	free(p->hint_since);
	p->hint_since = NULL;
	p->nhints = 0;
	p->hints_dirty = true;
	p->taught = false;
	if (!d->learned)
		return;
	r = program_identity(p, &p->learned_program);
	if (r < 0) {
		p->learned_program = NULL;
		return;
	}
	p->learned_uid = p->uid;
	learned_store_foreach_program(d->learned, p->uid, p->learned_program, count_entry, &known);
	if (!known)
		return;
	if (!p->maps && elfsym_maps_load(&p->maps, p->pid) < 0) {
		p->maps = NULL;
		return;
	}
	p->hints = calloc(ELIDE_SEG_MAX_HINTS, sizeof(*p->hints));
	p->hint_since = calloc(ELIDE_SEG_MAX_HINTS, sizeof(*p->hint_since));
	if (!p->hints || !p->hint_since) {
		free(p->hints);
		free(p->hint_since);
		p->hints = NULL;
		p->hint_since = NULL;
		log_oom();
		return;
	}
	learned_store_foreach_program(d->learned, p->uid, p->learned_program, add_hint, &hb);
	log_debug("pid %d (%s): %zu learned lock verdicts, %u given as hints", (int)p->pid, tracked_process_name(p),
		  known, p->nhints);
}

/*
 * p's owner changed while elided reads the same segment.  A process that
 * drops privileges keeps its program: its new owner's verdicts come in.
 * But a setuid exec changes the owner before its new image's segment
 * arrives: /proc/PID/exe names another program then, and what the old
 * image's segment still says belongs to the old program and owner, to be
 * learned from when the new segment shows the exec.
 */
void elided_learning_owner_changed(struct elided *d, struct tracked_process *p)
{
	char *now = NULL;

	if (p->learned_program && program_identity(p, &now) == 0 && strcmp(now, p->learned_program) != 0) {
		free(now);
		return;
	}
	free(now);
	elided_learning_adopt(d, p);
}

/* The learned NEVER hint that names this view, or -1. */
int elided_learned_hint_of(const struct tracked_process *p, const struct lock_view *v)
{
	for (uint32_t i = 0; i < p->nhints; i++) {
		const struct elide_seg_hint *h = &p->hints[i];

		if (h->verdict != ELIDE_SEG_HINT_NEVER)
			continue;
		if ((h->match == ELIDE_SEG_HINT_LOCK_ADDR && h->addr == v->addr) ||
		    (h->match == ELIDE_SEG_HINT_CALLSITE && v->callsite && h->addr == v->callsite))
			return (int)i;
	}
	return -1;
}

/* ---- forgetting --------------------------------------------------------- */

struct forget_walk {
	const char *exe;
	char **programs;
	size_t n, alloc;
	uid_t *uids;
};

/* "path:EXE:ino=..." names EXE: the path is everything up to the last
 * ":ino=" (a path may hold colons). */
static bool program_is_exe(const char *program, const char *exe)
{
	const char *ino;
	size_t len;

	if (strncmp(program, "path:", 5) != 0)
		return false;
	program += 5;
	ino = strstr(program, ":ino=");
	for (const char *q = ino; q; q = strstr(q + 1, ":ino="))
		ino = q;
	if (!ino)
		return false;
	len = (size_t)(ino - program);
	return strlen(exe) == len && memcmp(program, exe, len) == 0;
}

static int collect_program(uid_t uid, const char *program, const char *lock, const struct learned_entry *e,
			   void *userdata)
{
	struct forget_walk *w = userdata;

	(void)lock;
	(void)e;
	if (w->exe && !program_is_exe(program, w->exe))
		return 0;
	if (w->n && w->uids[w->n - 1] == uid && strcmp(w->programs[w->n - 1], program) == 0)
		return 0; /* entries come sorted by (uid, program) */
	if (w->n == w->alloc) {
		size_t a = w->alloc ? w->alloc * 2 : 16;
		char **q = reallocarray(w->programs, a, sizeof(*q));
		uid_t *u;

		if (!q)
			return -ENOMEM;
		w->programs = q;
		u = reallocarray(w->uids, a, sizeof(*u));
		if (!u)
			return -ENOMEM;
		w->uids = u;
		w->alloc = a;
	}
	w->programs[w->n] = strdup(program);
	if (!w->programs[w->n])
		return -ENOMEM;
	w->uids[w->n++] = uid;
	return 0;
}

int elided_forget_learned(struct elided *d, uid_t uid, const char *exe, size_t *count)
{
	struct forget_walk w = { .exe = exe && *exe ? exe : NULL };
	int r = 0;

	*count = 0;
	if (!d->learned)
		return 0;
	if (!w.exe) {
		*count = learned_store_forget(d->learned, uid, NULL);
	} else {
		r = learned_store_foreach(d->learned, collect_program, &w);
		for (size_t i = 0; r >= 0 && i < w.n; i++)
			if (uid == LEARNED_ANY_UID || w.uids[i] == uid)
				*count += learned_store_forget(d->learned, w.uids[i], w.programs[i]);
	}
	for (size_t i = 0; i < w.n; i++)
		free(w.programs[i]);
	free(w.programs);
	free(w.uids);
	if (r < 0)
		return r;
	if (*count) {
		d->learned_dirty = true;
		/* Forgetting is asked for: on disk at once, not in 10 s, and
		 * out of the files the next runs read. */
		elided_learning_save(d, true);
		elided_hints_rewrite_all(d);
	}
	return 0;
}

int64_t elided_learned_since(const struct tracked_process *p, const struct lock_view *v)
{
	int i;

	if (v->learned != VIEW_LEARNED_OFF)
		return -1;
	i = elided_learned_hint_of(p, v);
	return i >= 0 && p->hint_since ? p->hint_since[i] : 0;
}
