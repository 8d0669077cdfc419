/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Process discovery (discovery.h): inotify on the runtime directory, plus
 * either the procwatch BPF program or one pidfd per watched process.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "discovery.h"
#include "log.h"
#include "macros.h"
#include "segment-names.h"
#include "segment-reader.h"

#ifdef HAVE_BPF
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "procwatch.h"
#include "procwatch.skel.h"
#endif

#define INOTIFY_MASK (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR | IN_DONT_FOLLOW)
#define BPF_DESCRIPTION "bpf (tp_btf sched_process_exec/exit, ring buffer)"
#define FALLBACK_PREFIX "fallback (inotify + pidfd): "
#define VMLINUX_BTF_PATH "/sys/kernel/btf/vmlinux"

struct pid_watch {
	struct discovery *d;
	pid_t pid;
	uint64_t start_time; /* 0: not known */
	sd_event_source *source; /* owns the pidfd */
};

/*
 * Processes with libelide but no segment (discovery.h, discovery_tick).
 * Candidates wait in a ring until their grace period is over, then are
 * checked within a per-tick budget; those counted are kept in a small
 * unsorted array (removed on exit, on a segment of theirs, on a recheck).
 */
#define NOSEG_GRACE_TICKS 2        /* libelide creates the segment in its constructor */
#define NOSEG_GRACE_NS NS_PER_SEC  /* and at least this long, for a loaded machine */
#define NOSEG_EXEC_MAX 4096u       /* exec candidates waiting; more: dropped, then a sweep */
#define NOSEG_SWEEP_MAX 1024u      /* sweep candidates waiting: the sweep goes at their pace */
#define NOSEG_SET_MAX 1024u        /* processes counted at once (the count saturates) */
#define NOSEG_STAT_BUDGET 256u     /* /proc/PID/stat reads per tick (those that open) */
#define NOSEG_MAPS_BUDGET 64u      /* /proc/PID/maps reads per tick */
#define NOSEG_MAPS_MAX (1u << 20)  /* bytes of one maps file read at most */
#define NOSEG_SWEEP_BUDGET 512u    /* /proc entries queued per tick by a sweep */
#define NOSEG_SWEEP_NS (60 * NS_PER_SEC) /* without BPF: a sweep of /proc this often */
#define NOSEG_RECHECK_TICKS 5u     /* counted processes checked against /proc */
#define NOSEG_WARN_NS (300 * NS_PER_SEC) /* at most one warning line this often */
#define NS_PER_SEC 1000000000ull

/* Linux's task flags (include/linux/sched.h), as /proc/PID/stat field 9. */
#define PF_FORKNOEXEC_FLAG 0x00000040u /* forked, has not exec'd */
#define PF_KTHREAD_FLAG 0x00200000u

struct noseg_candidate {
	pid_t pid;
	uint64_t start; /* clock ticks; 0: whoever has the pid when checked */
	uint64_t tick;  /* discovery_tick count when it became a candidate */
	uint64_t ns;    /* and CLOCK_MONOTONIC then */
};


/* Candidates in the order they came, allocated on first use. */
struct noseg_ring {
	struct noseg_candidate *q;
	size_t cap, head, len;
};

struct noseg {
	uint64_t ticks;
	/* Exec events first: a sweep of a busy host must not delay them. */
	struct noseg_ring execs, swept;
	bool dropped;            /* exec candidates dropped: a sweep makes up for them */
	DIR *sweep;              /* /proc while a sweep is under way */
	uint64_t last_sweep_ns;  /* 0: none yet (one is due at the first tick) */
	bool sweep_wanted;
	struct discovery_no_segment_proc *procs;
	size_t n, alloc;
	uint64_t total;          /* processes counted since start */
	size_t new_since_warning;
	struct discovery_no_segment_proc first_new; /* for the warning */
	uint64_t last_warning_ns;
};

/* A sorted array of names, for the known-segment set and scans. */
struct name_set {
	char **names;
	size_t n, alloc;
};

struct discovery {
	sd_event *event;
	const struct discovery_ops *ops;
	void *userdata;
	char *runtime_dir;

	int dir_fd;
	sd_event_source *inotify_source; /* owns the inotify fd */
	bool dir_gone;

	/* Every segment name reported added and not yet removed. */
	struct name_set known;

	/* Fallback: watched pids, unsorted (a few hundred at most). */
	struct pid_watch **watches;
	size_t n_watches, alloc_watches;

	enum discovery_method method;
	char description[512];
	uint64_t ns_per_tick; /* BPF start times (ns) to /proc's clock ticks */

	/* Processes with libelide but no segment (discovery_tick). */
	struct noseg noseg;

#ifdef HAVE_BPF
	struct procwatch_bpf *skel;
	struct ring_buffer *rb;
	sd_event_source *rb_source; /* the fd belongs to rb */
#endif
};

/* Exit events first: a reused pid's old exit before its new segment. */
#define PRIORITY_EXIT SD_EVENT_PRIORITY_IMPORTANT
#define PRIORITY_SEGMENTS SD_EVENT_PRIORITY_NORMAL

static int grow(void **array, size_t *alloc, size_t need, size_t elem)
{
	size_t n;
	void *p;

	if (need <= *alloc)
		return 0;
	n = *alloc ? *alloc * 2 : 16;
	if (n < need)
		n = need;
	p = reallocarray(*array, n, elem);
	if (!p)
		return -ENOMEM;
	*array = p;
	*alloc = n;
	return 0;
}

static void name_set_clear(struct name_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->names[i]);
	free(s->names);
	*s = (struct name_set){};
}

/* Index of `name`, or of where it would go (*found false). */
static size_t name_set_find(const struct name_set *s, const char *name, bool *found)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->names[mid], name);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

/* 1 when added, 0 when already there. */
static int name_set_add(struct name_set *s, const char *name)
{
	bool found;
	size_t i = name_set_find(s, name, &found);
	char *copy;

	if (found)
		return 0;
	if (grow((void **)&s->names, &s->alloc, s->n + 1, sizeof(char *)) < 0)
		return -ENOMEM;
	copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	memmove(s->names + i + 1, s->names + i, (s->n - i) * sizeof(char *));
	s->names[i] = copy;
	s->n++;
	return 1;
}

/* 1 when removed, 0 when it was not there. */
static int name_set_remove(struct name_set *s, const char *name)
{
	bool found;
	size_t i = name_set_find(s, name, &found);

	if (!found)
		return 0;
	free(s->names[i]);
	memmove(s->names + i, s->names + i + 1, (s->n - i - 1) * sizeof(char *));
	s->n--;
	return 1;
}

static void noseg_forget(struct discovery *d, pid_t pid, uint64_t start);
static void noseg_candidate(struct discovery *d, pid_t pid, uint64_t start);

static void segment_added(struct discovery *d, const char *name)
{
	int r;

	if (seg_parse_name(name, NULL, NULL) < 0)
		return;
	r = name_set_add(&d->known, name);
	if (r < 0) {
		log_error_errno(r, "discovery: cannot track segment %s", name);
		return;
	}
	if (r > 0) {
		pid_t pid;
		uint64_t start;

		/* Not counted any more: elided sees it now. */
		if (seg_parse_name(name, &pid, &start) == 0)
			noseg_forget(d, pid, start);
		if (d->ops->segment_added)
			d->ops->segment_added(d->userdata, name);
	}
}

static void segment_removed(struct discovery *d, const char *name)
{
	pid_t pid;
	uint64_t start;

	if (name_set_remove(&d->known, name) <= 0)
		return;
	/* Mostly an exit; a process whose file was removed under it (the
	 * directory emptied) has no segment now. */
	if (seg_parse_name(name, &pid, &start) == 0)
		noseg_candidate(d, pid, start);
	if (d->ops->segment_removed)
		d->ops->segment_removed(d->userdata, name);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The segment names now in the directory, sorted.  Names only: no stat. */
static int scan_dir(struct discovery *d, struct name_set *ret)
{
	struct name_set s = {};
	struct dirent *de;
	DIR *dir;
	int fd, r = 0;

	/* A fresh descriptor: fdopendir takes it, and reads from offset 0. */
	fd = openat(d->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		r = -errno;
		close(fd);
		return r;
	}
	for (;;) {
		errno = 0;
		de = readdir(dir);
		if (!de) {
			r = -errno;
			break;
		}
		if (seg_parse_name(de->d_name, NULL, NULL) < 0)
			continue;
		r = grow((void **)&s.names, &s.alloc, s.n + 1, sizeof(char *));
		if (r < 0)
			break;
		s.names[s.n] = strdup(de->d_name);
		if (!s.names[s.n]) {
			r = -ENOMEM;
			break;
		}
		s.n++;
	}
	closedir(dir);
	if (r < 0) {
		name_set_clear(&s);
		return r;
	}
	if (s.n > 1)
		qsort(s.names, s.n, sizeof(char *), cmp_names);
	*ret = s;
	return 0;
}

/*
 * Bring the known set in line with the directory: report what vanished,
 * then what appeared.  The initial scan is the case of an empty set.
 */
static int rescan(struct discovery *d)
{
	struct name_set now = { 0 };
	size_t i;
	int r;

	r = scan_dir(d, &now);
	if (r < 0)
		return log_error_errno(r, "discovery: cannot read %s", d->runtime_dir);

	/* segment_removed() frees the set's string: pass it a copy. */
	for (i = 0; i < d->known.n;) {
		bool found;

		name_set_find(&now, d->known.names[i], &found);
		if (found) {
			i++;
			continue;
		}
		_cleanup_free_ char *name = strdup(d->known.names[i]);
		if (!name) {
			name_set_clear(&now);
			return -ENOMEM;
		}
		segment_removed(d, name);
	}
	for (i = 0; i < now.n; i++)
		segment_added(d, now.names[i]);
	name_set_clear(&now);
	return 0;
}

#ifdef HAVE_BPF
static void drain_ring_buffer(struct discovery *d);
#endif

static int on_inotify(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct discovery *d = userdata;
	union {
		struct inotify_event ev;
		char buf[4096];
	} u;
	bool overflow = false;

	/* Exits that happened before these files were created go first. */
#ifdef HAVE_BPF
	drain_ring_buffer(d);
#endif
	for (;;) {
		ssize_t n = read(fd, u.buf, sizeof(u.buf));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return log_error_errno(-errno, "discovery: inotify read failed");
		}
		for (char *p = u.buf; p < u.buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)(void *)p;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				overflow = true;
				continue;
			}
			if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_UNMOUNT)) {
				d->dir_gone = true;
				continue;
			}
			if (ev->len == 0 || overflow)
				continue; /* the rescan below covers it */
			if ((ev->mask & IN_MOVED_TO) && ev->name[0] != '.' && d->ops->teach_file &&
			    seg_parse_name(ev->name, NULL, NULL) < 0)
				d->ops->teach_file(d->userdata, ev->name);
			if (ev->mask & (IN_CREATE | IN_MOVED_TO))
				segment_added(d, ev->name);
			else if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
				segment_removed(d, ev->name);
		}
	}

	if (d->dir_gone) {
		/* The watch is gone with the directory: nothing will come.  The
		 * owner's check of the path (discovery_dir_replaced) warns. */
		log_debug("discovery: runtime directory %s was removed or unmounted; no more segment events",
			  d->runtime_dir);
		while (d->known.n > 0) {
			_cleanup_free_ char *name = strdup(d->known.names[d->known.n - 1]);

			if (!name)
				break;
			segment_removed(d, name);
		}
		d->inotify_source = sd_event_source_disable_unref(d->inotify_source);
		/* Their processes have no segment here any more: count them. */
		d->noseg.sweep_wanted = true;
		return 0;
	}
	if (overflow) {
		log_notice("discovery: inotify queue overflow, rescanning %s", d->runtime_dir);
		rescan(d);
	}
	return 0;
}

static int setup_inotify(struct discovery *d)
{
	int fd, wd, r;

	fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (fd < 0)
		return log_error_errno(-errno, "discovery: inotify_init1 failed");
	wd = inotify_add_watch(fd, d->runtime_dir, INOTIFY_MASK);
	if (wd < 0) {
		r = -errno;
		close(fd);
		return log_error_errno(r, "discovery: cannot watch %s", d->runtime_dir);
	}
	r = sd_event_add_io(d->event, &d->inotify_source, fd, EPOLLIN, on_inotify, d);
	if (r < 0) {
		close(fd);
		return log_error_errno(r, "discovery: cannot add the inotify source");
	}
	(void)sd_event_source_set_io_fd_own(d->inotify_source, true);
	(void)sd_event_source_set_priority(d->inotify_source, PRIORITY_SEGMENTS);
	(void)sd_event_source_set_description(d->inotify_source, "discovery-inotify");
	return 0;
}

/* ---- processes with libelide but no segment ---- */

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

/*
 * Whether a segment of pid is known: of the process that started at
 * `start` ("PID-START.seg", "PID-START-GEN.seg"), or of any process with
 * that pid when start is 0.  Names only: the known set is sorted, so the
 * names with the prefix are contiguous and start at its lower bound.
 */
static bool has_segment(const struct discovery *d, pid_t pid, uint64_t start)
{
	char prefix[48];
	size_t len, i;
	bool found;

	if (start)
		snprintf(prefix, sizeof(prefix), "%d-%" PRIu64, (int)pid, start);
	else
		snprintf(prefix, sizeof(prefix), "%d-", (int)pid);
	len = strlen(prefix);
	for (i = name_set_find(&d->known, prefix, &found); i < d->known.n; i++) {
		const char *name = d->known.names[i];

		if (strncmp(name, prefix, len) != 0)
			break;
		if (!start || name[len] == '.' || name[len] == '-')
			return true;
	}
	return false;
}

static struct discovery_no_segment_proc *noseg_find(struct discovery *d, pid_t pid, size_t *index)
{
	for (size_t i = 0; i < d->noseg.n; i++)
		if (d->noseg.procs[i].pid == pid) {
			if (index)
				*index = i;
			return &d->noseg.procs[i];
		}
	return NULL;
}

/* pid (the process that started at start; 0: any) is not counted any more. */
static void noseg_forget(struct discovery *d, pid_t pid, uint64_t start)
{
	struct discovery_no_segment_proc *p;
	size_t i;

	p = noseg_find(d, pid, &i);
	if (p && (!start || !p->start_time || p->start_time == start))
		d->noseg.procs[i] = d->noseg.procs[--d->noseg.n];
}

/* false when the ring is full (or cannot be allocated). */
static bool noseg_enqueue(struct noseg *ns, struct noseg_ring *ring, size_t cap, pid_t pid, uint64_t start)
{
	struct noseg_candidate *c;

	if (!ring->q) {
		ring->q = calloc(cap, sizeof(*ring->q));
		if (!ring->q)
			return false;
		ring->cap = cap;
	}
	if (ring->len == ring->cap)
		return false;
	c = &ring->q[(ring->head + ring->len++) % ring->cap];
	c->pid = pid;
	c->start = start;
	c->tick = ns->ticks;
	c->ns = monotonic_ns();
	return true;
}

/* Exec events, removed segments: checked before the sweep's. */
static void noseg_candidate(struct discovery *d, pid_t pid, uint64_t start)
{
	if (!noseg_enqueue(&d->noseg, &d->noseg.execs, NOSEG_EXEC_MAX, pid, start))
		d->noseg.dropped = true;
}

/*
 * /proc/PID/stat: state, flags and start time, and the comm.  The comm is
 * the program's (any bytes but NUL, ')' included): the fields are read
 * after the last ')'.  -errno (-ENOENT: gone).
 */
static int read_proc_stat(pid_t pid, char *state, unsigned *flags, uint64_t *start, char comm[16])
{
	char path[32], buf[1024];
	const char *open_paren, *close_paren;
	unsigned long long st;
	ssize_t n;
	size_t len;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	buf[n] = '\0';
	open_paren = strchr(buf, '(');
	close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren)
		return -EBADMSG;
	/* state ppid pgrp session tty_nr tpgid flags, then 12 fields, starttime */
	if (sscanf(close_paren + 1, " %c %*d %*d %*d %*d %*d %u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		   state, flags, &st) != 3)
		return -EBADMSG;
	*start = st;
	len = (size_t)(close_paren - open_paren - 1);
	if (len > 15)
		len = 15;
	memcpy(comm, open_paren + 1, len);
	comm[len] = '\0';
	return 0;
}

/*
 * 1 when /proc/PID/maps maps a file named libelide.so (or libelide.so.N...),
 * 0 when not (within the first NOSEG_MAPS_MAX bytes), -errno.  The text is
 * the kernel's; the names in it are whatever the process mapped, so they
 * are only compared, never used.
 */
static int maps_libelide(pid_t pid)
{
	static const char needle[] = "/libelide.so";
	char path[32], *line = NULL;
	size_t alloc = 0, total = 0;
	ssize_t n;
	int fd, r = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "re");
	if (!f) {
		r = -errno;
		close(fd);
		return r;
	}
	while (total < NOSEG_MAPS_MAX && (n = getline(&line, &alloc, f)) > 0) {
		const char *hit;

		total += (size_t)n;
		if (n > 0 && line[n - 1] == '\n')
			line[n - 1] = '\0';
		hit = strstr(line, needle);
		if (hit && (hit[sizeof(needle) - 1] == '\0' || hit[sizeof(needle) - 1] == '.')) {
			r = 1;
			break;
		}
	}
	free(line);
	fclose(f);
	return r;
}

enum noseg_verdict {
	NOSEG_DONE,      /* checked (or needs no check): next candidate */
	NOSEG_OVER_BUDGET,
};

static enum noseg_verdict noseg_check(struct discovery *d, const struct noseg_candidate *c, unsigned *stat_budget,
				      unsigned *maps_budget)
{
	struct discovery_no_segment_proc *p;
	unsigned flags;
	uint64_t start;
	char state, comm[16];
	int r;

	if (has_segment(d, c->pid, c->start))
		return NOSEG_DONE;
	p = noseg_find(d, c->pid, NULL);
	if (p && (!c->start || p->start_time == c->start))
		return NOSEG_DONE; /* counted already */
	if (*stat_budget == 0 || *maps_budget == 0)
		return NOSEG_OVER_BUDGET;
	r = read_proc_stat(c->pid, &state, &flags, &start, comm);
	if (r == -ENOENT || r == -ESRCH)
		return NOSEG_DONE; /* gone: free, not charged */
	(*stat_budget)--;
	if (r < 0 || (c->start && start != c->start))
		return NOSEG_DONE;
	/* Kernel threads map nothing; a fork child that has not exec'd runs
	 * its parent's image, whose libelide creates its segment lazily. */
	if ((flags & (PF_KTHREAD_FLAG | PF_FORKNOEXEC_FLAG)) || state == 'Z' || state == 'X')
		return NOSEG_DONE;
	if (has_segment(d, c->pid, start))
		return NOSEG_DONE;
	(*maps_budget)--;
	r = maps_libelide(c->pid);
	if (r <= 0)
		return NOSEG_DONE;
	/* A process of the pid counted before is not this one. */
	noseg_forget(d, c->pid, 0);
	d->noseg.total++;
	log_debug("discovery: pid %d (%s) runs with libelide but has no segment", (int)c->pid, comm);
	if (d->noseg.new_since_warning++ == 0) {
		d->noseg.first_new.pid = c->pid;
		d->noseg.first_new.start_time = start;
		memcpy(d->noseg.first_new.comm, comm, sizeof(comm));
	}
	if (d->noseg.n == NOSEG_SET_MAX)
		return NOSEG_DONE; /* counted in the total, not followed */
	if (grow((void **)&d->noseg.procs, &d->noseg.alloc, d->noseg.n + 1, sizeof(*d->noseg.procs)) < 0)
		return NOSEG_DONE;
	p = &d->noseg.procs[d->noseg.n++];
	p->pid = c->pid;
	p->start_time = start;
	memcpy(p->comm, comm, sizeof(comm));
	/* Who may see it over D-Bus; root (nobody else) when unreadable. */
	if (seg_proc_uid(NULL, c->pid, &p->uid) < 0)
		p->uid = 0;
	return NOSEG_DONE;
}

/* Queue the processes of /proc, up to NOSEG_SWEEP_BUDGET a tick and as
 * many as the sweep's ring takes. */
static void noseg_sweep(struct discovery *d)
{
	struct noseg *ns = &d->noseg;
	unsigned queued = 0;
	struct dirent *de;

	if (!ns->sweep) {
		ns->sweep = opendir("/proc");
		if (!ns->sweep)
			return;
		ns->dropped = false;
		ns->sweep_wanted = false;
		ns->last_sweep_ns = monotonic_ns();
	}
	/* procfs lists pids in increasing order, resuming where it stopped. */
	while (queued < NOSEG_SWEEP_BUDGET && ns->swept.len < NOSEG_SWEEP_MAX) {
		char *end;
		long pid;

		errno = 0;
		de = readdir(ns->sweep);
		if (!de) {
			closedir(ns->sweep);
			ns->sweep = NULL;
			return;
		}
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || pid > INT32_MAX || has_segment(d, (pid_t)pid, 0) || noseg_find(d, (pid_t)pid, NULL))
			continue;
		if (!noseg_enqueue(ns, &ns->swept, NOSEG_SWEEP_MAX, (pid_t)pid, 0))
			break;
		queued++;
	}
}

/* Check the ring's candidates whose grace period is over, within the
 * budgets; false when a budget ran out. */
static bool noseg_drain(struct discovery *d, struct noseg_ring *ring, uint64_t now, unsigned *stat_budget,
			unsigned *maps_budget)
{
	while (ring->len > 0) {
		const struct noseg_candidate *c = &ring->q[ring->head];

		if (c->tick + NOSEG_GRACE_TICKS > d->noseg.ticks || c->ns + NOSEG_GRACE_NS > now)
			return true;
		if (noseg_check(d, c, stat_budget, maps_budget) == NOSEG_OVER_BUDGET)
			return false;
		ring->head = (ring->head + 1) % ring->cap;
		ring->len--;
	}
	return true;
}

/* Drop the counted processes that are gone (without BPF no exit says so). */
static void noseg_recheck(struct discovery *d)
{
	for (size_t i = 0; i < d->noseg.n;) {
		struct discovery_no_segment_proc *p = &d->noseg.procs[i];
		unsigned flags;
		uint64_t start;
		char state, comm[16];

		if (read_proc_stat(p->pid, &state, &flags, &start, comm) < 0 || start != p->start_time || state == 'Z' ||
		    state == 'X' || has_segment(d, p->pid, p->start_time))
			d->noseg.procs[i] = d->noseg.procs[--d->noseg.n];
		else
			i++;
	}
}

static void noseg_warn(struct discovery *d, uint64_t now)
{
	struct noseg *ns = &d->noseg;
	char comm[64];
	size_t i, o = 0;

	if (ns->new_since_warning == 0 || (ns->last_warning_ns && now - ns->last_warning_ns < NOSEG_WARN_NS))
		return;
	/* The comm is the program's choice: printable ASCII only. */
	for (i = 0; ns->first_new.comm[i] && o < sizeof(comm) - 5; i++) {
		unsigned char ch = (unsigned char)ns->first_new.comm[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '\\')
			comm[o++] = (char)ch;
		else
			o += (size_t)snprintf(comm + o, sizeof(comm) - o, "\\x%02x", ch);
	}
	comm[o] = '\0';
	log_warning("processes with libelide but no segment in %s: %zu new since %s (the first: pid %d (%s)), %zu now; "
		    "elided cannot see them: the directory is full, unwritable or missing for them, they use "
		    "another ELIDE_RUNTIME_DIR, or run with stats=0 (libelide says why on their stderr)",
		    d->runtime_dir, ns->new_since_warning, ns->last_warning_ns ? "the last warning" : "start",
		    (int)ns->first_new.pid, comm, ns->n);
	ns->new_since_warning = 0;
	ns->last_warning_ns = now;
}

void discovery_tick(struct discovery *d)
{
	struct noseg *ns = &d->noseg;
	unsigned stat_budget = NOSEG_STAT_BUDGET, maps_budget = NOSEG_MAPS_BUDGET;
	uint64_t now = monotonic_ns();

	ns->ticks++;
	/* With BPF every exec is a candidate: a sweep finds what ran before
	 * we started, and what a full ring dropped.  Without, every minute. */
	if (ns->sweep || ns->sweep_wanted || ns->last_sweep_ns == 0 || (ns->dropped && ns->execs.len < NOSEG_EXEC_MAX / 2) ||
	    (d->method != DISCOVERY_BPF && now - ns->last_sweep_ns >= NOSEG_SWEEP_NS))
		noseg_sweep(d);
	if (noseg_drain(d, &ns->execs, now, &stat_budget, &maps_budget))
		noseg_drain(d, &ns->swept, now, &stat_budget, &maps_budget);
	if (ns->ticks % NOSEG_RECHECK_TICKS == 0)
		noseg_recheck(d);
	noseg_warn(d, now);
}

size_t discovery_no_segment(const struct discovery *d, uint64_t *total)
{
	if (total)
		*total = d->noseg.total;
	return d->noseg.n;
}

size_t discovery_no_segment_list(const struct discovery *d, const struct discovery_no_segment_proc **ret)
{
	*ret = d->noseg.procs;
	return d->noseg.n;
}

static void noseg_free(struct noseg *ns)
{
	if (ns->sweep)
		closedir(ns->sweep);
	free(ns->execs.q);
	free(ns->swept.q);
	free(ns->procs);
	*ns = (struct noseg){};
}

/* ---- fallback: one pidfd per watched process ---- */

static struct pid_watch *find_watch(struct discovery *d, pid_t pid, size_t *index)
{
	for (size_t i = 0; i < d->n_watches; i++)
		if (d->watches[i]->pid == pid) {
			if (index)
				*index = i;
			return d->watches[i];
		}
	return NULL;
}

static void watch_free(struct pid_watch *w)
{
	if (!w)
		return;
	/* Safe from the source's own callback: sd-event defers the free. */
	sd_event_source_disable_unref(w->source);
	free(w);
}

static void remove_watch(struct discovery *d, size_t i)
{
	watch_free(d->watches[i]);
	d->watches[i] = d->watches[--d->n_watches];
}

static int on_pidfd(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct pid_watch *w = userdata;
	struct discovery *d = w->d;
	pid_t pid = w->pid;
	uint64_t start = w->start_time;
	size_t i;

	/* Readable = dead, zombie or reaped: no need to ask /proc, whose stat
	 * of a zombie looks like that of a live process. */
	if (find_watch(d, pid, &i) == w)
		remove_watch(d, i); /* first: the callback may watch the pid again */
	if (d->ops->process_exit)
		d->ops->process_exit(d->userdata, pid, start);
	return 0;
}

int discovery_watch_pid(struct discovery *d, pid_t pid, uint64_t start_time)
{
	struct pid_watch *w;
	uint64_t now_start;
	int fd, r;

	if (!d || pid <= 0)
		return -EINVAL;
	if (d->method == DISCOVERY_BPF)
		return 0;
	if (find_watch(d, pid, NULL))
		return 0;
	r = grow((void **)&d->watches, &d->alloc_watches, d->n_watches + 1, sizeof(*d->watches));
	if (r < 0)
		return r;

	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return -errno; /* ESRCH: already reaped */
	/* The pidfd pins whoever has the pid now; a start time read after it
	 * tells whether that is the process meant (a zombie still has it). */
	if (start_time) {
		r = seg_proc_start_time(NULL, pid, &now_start);
		if (r == 0 && now_start != start_time)
			r = -ESRCH;
		if (r < 0) {
			close(fd);
			return r;
		}
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		close(fd);
		return -ENOMEM;
	}
	w->d = d;
	w->pid = pid;
	w->start_time = start_time;
	r = sd_event_add_io(d->event, &w->source, fd, EPOLLIN, on_pidfd, w);
	if (r < 0) {
		close(fd);
		free(w);
		return r;
	}
	(void)sd_event_source_set_io_fd_own(w->source, true);
	(void)sd_event_source_set_priority(w->source, PRIORITY_EXIT);
	(void)sd_event_source_set_description(w->source, "discovery-pidfd");
	d->watches[d->n_watches++] = w;
	return 0;
}

void discovery_unwatch_pid(struct discovery *d, pid_t pid)
{
	size_t i;

	if (d && find_watch(d, pid, &i))
		remove_watch(d, i);
}

/* ---- BPF: sched_process_exec/exit into a ring buffer ---- */

bool discovery_bpf_exit_by_live_count;

#ifdef HAVE_BPF
/* libbpf has no user data for its printer: the last warning for the notice. */
static char libbpf_last_warning[256];

_printf_(2, 0)
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char buf[512];
	size_t n;

	const char *msg = buf;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	/* Most of its messages carry their own prefix already. */
	if (strncmp(msg, "libbpf: ", 8) == 0) {
		msg += 8;
		n -= 8;
	}
	if (level == LIBBPF_WARN) {
		n = n < sizeof(libbpf_last_warning) ? n : sizeof(libbpf_last_warning) - 1;
		memcpy(libbpf_last_warning, msg, n);
		libbpf_last_warning[n] = '\0';
	}
	log_debug("libbpf: %s", msg);
	return 0;
}

static int on_ring_event(void *ctx, void *data, size_t size)
{
	struct discovery *d = ctx;
	const struct procwatch_event *e = data;
	char comm[PROCWATCH_COMM_LEN + 1];

	if (size < sizeof(*e) || e->pid == 0 || e->pid > (__u32)INT32_MAX)
		return 0;
	switch (e->type) {
	case PROCWATCH_EXEC: {
		uint64_t start = d->ns_per_tick ? e->start_boottime / d->ns_per_tick : 0;

		/* A new image: its libelide (if any) makes a segment now. */
		noseg_forget(d, (pid_t)e->pid, start);
		noseg_candidate(d, (pid_t)e->pid, start);
		if (!d->ops->process_exec)
			break;
		memcpy(comm, e->comm, PROCWATCH_COMM_LEN);
		comm[PROCWATCH_COMM_LEN] = '\0';
		d->ops->process_exec(d->userdata, (pid_t)e->pid, comm);
		break;
	}
	case PROCWATCH_EXIT: {
		uint64_t start = d->ns_per_tick ? e->start_boottime / d->ns_per_tick : 0;

		/* The kernel's word for which process died: trusted as is. */
		noseg_forget(d, (pid_t)e->pid, start);
		if (d->ops->process_exit)
			d->ops->process_exit(d->userdata, (pid_t)e->pid, start);
		break;
	}
	}
	return 0;
}

static void drain_ring_buffer(struct discovery *d)
{
	int r;

	if (!d->rb)
		return;
	r = ring_buffer__consume(d->rb);
	if (r < 0)
		log_warning_errno(r, "discovery: reading the BPF ring buffer failed");
}

static int on_ring_buffer(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	drain_ring_buffer(userdata);
	return 0;
}

static void bpf_teardown(struct discovery *d)
{
	d->rb_source = sd_event_source_disable_unref(d->rb_source);
	ring_buffer__free(d->rb);
	d->rb = NULL;
	procwatch_bpf__destroy(d->skel);
	d->skel = NULL;
}

/*
 * Whether the kernel's sched_process_exit passes group_dead (6.16 and
 * later): its BTF prototype then has three parameters (the hidden __data,
 * the task, group_dead).  0 or 1; -errno when the BTF cannot be read.
 */
static int exit_has_group_dead(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	const struct btf_type *t;
	__s32 id;
	int r = 0;

	if (!btf)
		return errno > 0 ? -errno : -ENOENT;
	id = btf__find_by_name_kind(btf, "btf_trace_sched_process_exit", BTF_KIND_TYPEDEF);
	t = id > 0 ? btf__type_by_id(btf, (__u32)id) : NULL;
	if (t)
		t = btf__type_by_id(btf, t->type);
	if (t && btf_is_ptr(t))
		t = btf__type_by_id(btf, t->type);
	if (t && btf_is_func_proto(t))
		r = btf_vlen(t) >= 3;
	btf__free(btf);
	return r;
}

/*
 * 0 with the programs attached, or -errno with d->description saying why
 * not.  BTF-enabled tracepoints: no tracefs needed, only the kernel's BTF.
 */
static int bpf_setup(struct discovery *d)
{
	struct bpf_program *exit_prog, *unused;
	const char *step;
	int r;

	if (access(VMLINUX_BTF_PATH, R_OK) < 0) {
		r = -errno;
		snprintf(d->description, sizeof(d->description), FALLBACK_PREFIX "kernel has no BTF (%s: %s)",
			 VMLINUX_BTF_PATH, strerror(-r));
		return r;
	}

	libbpf_last_warning[0] = '\0';
	libbpf_set_print(libbpf_print);

	step = "open";
	d->skel = procwatch_bpf__open();
	if (!d->skel) {
		r = errno > 0 ? -errno : -EINVAL;
		goto fail;
	}
	step = "read the kernel's BTF for";
	r = discovery_bpf_exit_by_live_count ? 0 : exit_has_group_dead();
	if (r < 0)
		goto fail;
	exit_prog = r ? d->skel->progs.procwatch_exit_gd : d->skel->progs.procwatch_exit;
	unused = r ? d->skel->progs.procwatch_exit : d->skel->progs.procwatch_exit_gd;
	(void)bpf_program__set_autoload(unused, false);

	step = "load";
	r = procwatch_bpf__load(d->skel);
	if (r < 0)
		goto fail;
	/* One by one: the program not loaded has nothing to attach. */
	step = "attach";
	d->skel->links.procwatch_exec = bpf_program__attach(d->skel->progs.procwatch_exec);
	if (!d->skel->links.procwatch_exec) {
		r = errno > 0 ? -errno : -EINVAL;
		goto fail;
	}
	if (exit_prog == d->skel->progs.procwatch_exit_gd)
		d->skel->links.procwatch_exit_gd = bpf_program__attach(exit_prog);
	else
		d->skel->links.procwatch_exit = bpf_program__attach(exit_prog);
	if (!d->skel->links.procwatch_exit_gd && !d->skel->links.procwatch_exit) {
		r = errno > 0 ? -errno : -EINVAL;
		goto fail;
	}
	step = "open the ring buffer of";
	d->rb = ring_buffer__new(bpf_map__fd(d->skel->maps.events), on_ring_event, d, NULL);
	if (!d->rb) {
		r = errno > 0 ? -errno : -ENOMEM;
		goto fail;
	}
	step = "add to the event loop";
	r = sd_event_add_io(d->event, &d->rb_source, ring_buffer__epoll_fd(d->rb), EPOLLIN, on_ring_buffer, d);
	if (r < 0)
		goto fail;
	(void)sd_event_source_set_priority(d->rb_source, PRIORITY_EXIT);
	(void)sd_event_source_set_description(d->rb_source, "discovery-bpf");

	d->method = DISCOVERY_BPF;
	snprintf(d->description, sizeof(d->description), "%s", BPF_DESCRIPTION);
	return 0;

fail:
	bpf_teardown(d);
	if (libbpf_last_warning[0])
		snprintf(d->description, sizeof(d->description), FALLBACK_PREFIX "cannot %s the BPF program: %s (%s)",
			 step, strerror(-r), libbpf_last_warning);
	else
		snprintf(d->description, sizeof(d->description), FALLBACK_PREFIX "cannot %s the BPF program: %s",
			 step, strerror(-r));
	return r;
}
#endif

/* ---- object ---- */

int discovery_new(sd_event *event, const char *runtime_dir, bool allow_bpf, const struct discovery_ops *ops,
		  void *userdata, struct discovery **ret)
{
	struct discovery *d;
	int r;

	if (!event || !runtime_dir || !ops || !ret)
		return -EINVAL;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->event = sd_event_ref(event);
	d->ops = ops;
	d->userdata = userdata;
	d->dir_fd = -1;
	d->method = DISCOVERY_FALLBACK;
	/* /proc/PID/stat shows start times as nsec_to_clock_t() of these. */
	{
		long hz = sysconf(_SC_CLK_TCK);

		d->ns_per_tick = hz > 0 && 1000000000 % hz == 0 ? (uint64_t)(1000000000 / hz) : 0;
	}
	d->runtime_dir = strdup(runtime_dir);
	if (!d->runtime_dir) {
		r = -ENOMEM;
		goto fail;
	}

	d->dir_fd = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d->dir_fd < 0) {
		r = log_error_errno(-errno, "discovery: cannot open %s", runtime_dir);
		goto fail;
	}

	/* Exit events before the directory watch, the watch before the scan:
	 * a process is either in the scan or in an event, never in neither. */
	if (!allow_bpf) {
		snprintf(d->description, sizeof(d->description), FALLBACK_PREFIX "BPF disabled by --no-bpf");
	} else {
#ifdef HAVE_BPF
		r = bpf_setup(d);
#else
		snprintf(d->description, sizeof(d->description),
			 FALLBACK_PREFIX "built without BPF support (--disable-bpf)");
		r = -EOPNOTSUPP;
#endif
		if (r < 0)
			log_notice("process discovery: %s", d->description);
	}
	if (d->method == DISCOVERY_BPF || !allow_bpf)
		log_info("process discovery: %s", d->description);

	r = setup_inotify(d);
	if (r < 0)
		goto fail;
	/* Callbacks of the scan watch pids through the object: publish it. */
	*ret = d;
	r = rescan(d);
	if (r < 0) {
		*ret = NULL;
		goto fail;
	}
	return 0;

fail:
	discovery_free(d);
	return r;
}

int discovery_dir_replaced(const struct discovery *d)
{
	struct stat held, now;

	if (fstat(d->dir_fd, &held) < 0)
		return -errno;
	if (stat(d->runtime_dir, &now) < 0)
		return 1;
	return !S_ISDIR(now.st_mode) || now.st_dev != held.st_dev || now.st_ino != held.st_ino;
}

int discovery_reopen(struct discovery *d)
{
	sd_event_source *old_source = d->inotify_source;
	int old_fd = d->dir_fd, fd, r;

	fd = open(d->runtime_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		/* Called because the held directory is not at the path any more:
		 * its names are nobody's segments now (no file can be created in
		 * a removed directory), and their processes have none. */
		if (d->known.n > 0) {
			name_set_clear(&d->known);
			d->noseg.sweep_wanted = true;
		}
		return r;
	}
	d->dir_fd = fd;
	d->inotify_source = NULL;
	r = setup_inotify(d);
	if (r < 0) {
		close(fd);
		d->dir_fd = old_fd;
		d->inotify_source = old_source;
		return r;
	}
	sd_event_source_disable_unref(old_source);
	if (old_fd >= 0)
		close(old_fd);
	d->dir_gone = false;
	/* Their processes were dropped with the old directory. */
	name_set_clear(&d->known);
	d->noseg.sweep_wanted = true;
	return rescan(d);
}

int discovery_dir_fd(const struct discovery *d)
{
	return d->dir_fd;
}

void discovery_free(struct discovery *d)
{
	if (!d)
		return;
#ifdef HAVE_BPF
	bpf_teardown(d);
#endif
	for (size_t i = 0; i < d->n_watches; i++)
		watch_free(d->watches[i]);
	free(d->watches);
	noseg_free(&d->noseg);
	sd_event_source_disable_unref(d->inotify_source);
	if (d->dir_fd >= 0)
		close(d->dir_fd);
	name_set_clear(&d->known);
	free(d->runtime_dir);
	sd_event_unref(d->event);
	free(d);
}

enum discovery_method discovery_get_method(const struct discovery *d)
{
	return d->method;
}

uint64_t discovery_lost_events(const struct discovery *d)
{
#ifdef HAVE_BPF
	/* .bss is mapped where the kernel allows (BPF_F_MMAPABLE, 5.5+, as
	 * tp_btf needs anyway); without it nothing can be said. */
	if (!d || d->method != DISCOVERY_BPF || !d->skel || !d->skel->bss)
		return 0;
	return __atomic_load_n(&d->skel->bss->procwatch_lost, __ATOMIC_RELAXED);
#else
	(void)d;
	return 0; /* no BPF, no ring buffer to lose events from */
#endif
}

const char *discovery_describe(const struct discovery *d)
{
	return d->description;
}
