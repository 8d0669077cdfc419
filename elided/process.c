/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The process table: adopting segments (at once, or deferred to an
 * adoption pass), the periodic rescan of the runtime directory, reaping,
 * and the calls over the whole table (refresh, redecide, forget, free).
 * Identity comes from /proc, never from the segment.  Reading a segment
 * is process-refresh.c's job, deciding and writing process-decisions.c's,
 * owners process-owner.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-login.h>
#include <time.h>
#include <unistd.h>

#include "dbus.h"
#include "discovery.h"
#include "elfsym.h"
#include "elided.h"
#include "log.h"
#include "process-internal.h"

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct tracked_process *elided_find_process(struct elided *d, pid_t pid)
{
	for (struct tracked_process *p = d->processes; p; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

static size_t processes_of_uid(struct elided *d, uid_t uid)
{
	size_t n = 0;

	for (struct tracked_process *p = d->processes; p; p = p->next)
		n += p->uid == uid;
	return n;
}

static void read_proc_string(pid_t pid, const char *what, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* Identity from the kernel, not from the segment (which the process writes). */
void read_identity(struct tracked_process *p)
{
	char path[64];
	char *unit = NULL, *slice = NULL;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)p->pid);
	n = readlink(path, p->exe, sizeof(p->exe) - 1);
	p->exe[n > 0 ? n : 0] = '\0';
	read_proc_string(p->pid, "comm", p->comm, sizeof(p->comm));
	p->unit[0] = p->slice[0] = '\0';
	if (sd_pid_get_unit(p->pid, &unit) >= 0 || sd_pid_get_user_unit(p->pid, &unit) >= 0) {
		snprintf(p->unit, sizeof(p->unit), "%s", unit);
		free(unit);
	}
	if (sd_pid_get_slice(p->pid, &slice) >= 0) {
		snprintf(p->slice, sizeof(p->slice), "%s", slice);
		free(slice);
	}
}

void decide(struct elided *d, struct tracked_process *p)
{
	struct process_identity id = {
		.exe = p->exe,
		.comm = p->comm,
		.uid = p->uid,
		.unit = p->unit[0] ? p->unit : NULL,
		.slice = p->slice[0] ? p->slice : NULL,
	};

	config_decide(d->config, &id, &p->decision);
	p->rules_dirty = true;
}

static void process_free(struct tracked_process *p)
{
	if (!p)
		return;
	elfsym_maps_free(p->maps);
	seg_map_close(p->map);
	free_views(p->locks, p->nlocks);
	free(p->moving);
	free(p->learned_program);
	free(p->hints);
	free(p->hint_since);
	free(p);
}

/* ---- adoption and reaping -------------------------------------------- */

/* The owner of a file in the runtime directory, (uid_t)-1 when unknown:
 * whose rate limit a message about it counts against. */
static uid_t file_owner(struct elided *d, const char *name)
{
	struct stat st;

	if (fstatat(d->runtime_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return (uid_t)-1;
	return st.st_uid;
}

static void remove_file(struct elided *d, const char *name, int priority, const char *why)
{
	uid_t owner = file_owner(d, name);

	if (unlinkat(d->runtime_dirfd, name, 0) == 0)
		log_uid(&d->ratelimit, owner, priority, "removed %s: %s", name, why);
}

static void remove_stale(struct elided *d, const char *name)
{
	remove_file(d, name, LOG_INFO, "its process is gone");
}

/*
 * A second segment for a process we track: an exec'd image that could not
 * replace the earlier image's file (see segment-format.h).  The newer one
 * is the process now; the older one is removed.
 */
static void supersede(struct elided *d, struct tracked_process *p, const char *name)
{
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX];

	if (seg_read(d->runtime_dirfd, name, SEG_READ_CHECK_PROCESS | SEG_READ_NO_LOCKS, &snap, err, sizeof(err)) < 0)
		return;
	/* A live process's own files: lifecycle, not news. */
	if (snap->header.created_ns > p->created_ns) {
		char why[128];

		log_debug("pid %d: %s replaces %s (a new image)", (int)p->pid, name, p->seg_name);
		snprintf(why, sizeof(why), "superseded by %s (a new image of pid %d)", name, (int)p->pid);
		remove_file(d, p->seg_name, LOG_DEBUG, why);
		snprintf(p->seg_name, sizeof(p->seg_name), "%s", name);
		seg_map_close(p->map);
		p->map = NULL;
		refresh_process(d, p);
	} else {
		remove_file(d, name, LOG_DEBUG, "not newer than the tracked segment of its live process (a hard link or an earlier image)");
	}
	seg_snapshot_free(snap);
}

/*
 * 0 when the segment's process is tracked, -ESRCH/-ENOENT when it is gone,
 * -EDQUOT when its uid is at daemon.max_segments_per_uid, another -errno
 * when the segment is refused (invalid, not a regular file, ...).  Quiet:
 * a retry of a file refused before, neither logged nor counted again.
 */
static int adopt(struct elided *d, const char *name, bool quiet)
{
	_cleanup_free_ struct tracked_process *fresh = NULL;
	struct tracked_process *existing;
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX];
	pid_t pid;
	uint64_t start;
	int r;

	if (seg_parse_name(name, &pid, &start) < 0)
		return -EINVAL;
	existing = elided_find_process(d, pid);
	if (existing) {
		if (strcmp(existing->seg_name, name))
			supersede(d, existing, name);
		return 0;
	}
	/* The header is enough to decide; lock tables are read once adopted. */
	r = seg_read(d->runtime_dirfd, name, SEG_READ_CHECK_PROCESS | SEG_READ_NO_LOCKS, &snap, err, sizeof(err));
	if (r == -ESRCH) {
		remove_stale(d, name);
		return r;
	}
	if (r == -ENOENT)
		return r;
	if (r < 0) {
		if (!quiet) {
			log_uid(&d->ratelimit, file_owner(d, name), LOG_WARNING, "ignoring %s", err);
			d->unseen.refused_total++;
			d->unseen.refused++;
		}
		return r;
	}
	if (processes_of_uid(d, snap->process_uid) >= d->config->max_segments_per_uid) {
		uid_t uid = snap->process_uid;

		seg_snapshot_free(snap);
		if (quiet)
			return -EDQUOT;
		log_uid(&d->ratelimit, uid, LOG_WARNING,
			"ignoring %s: uid %u already has %u processes tracked (daemon.max_segments_per_uid)", name,
			(unsigned)uid, d->config->max_segments_per_uid);
		d->unseen.over_cap_total++;
		d->unseen.over_cap++;
		return -EDQUOT;
	}
	fresh = calloc(1, sizeof(*fresh));
	if (!fresh) {
		seg_snapshot_free(snap);
		return log_oom();
	}
	fresh->pid = pid;
	fresh->start_time = start;
	/* Who may read and steer it: the process's owner now, not the file's
	 * (root when the program dropped privileges after start-up). */
	fresh->uid = snap->process_uid;
	snprintf(fresh->seg_name, sizeof(fresh->seg_name), "%s", name);
	seg_snapshot_free(snap);
	read_identity(fresh);
	decide(d, fresh);
	elided_learning_adopt(d, fresh);
	r = refresh_process(d, fresh);
	/* Its exit must reach us at once (pidfd; BPF sees every exit anyway).
	 * -ESRCH: reaped, or the pid is another process's already. */
	if (r != -ESRCH)
		r = discovery_watch_pid(d->discovery, pid, start);
	/* With BPF the watch is a no-op and the exit event is the watch; one
	 * lost in a full ring buffer is made up for in elided_refresh_all(). */
	fresh->exit_watched = r == 0;
	if (r == -ESRCH) {
		process_free(fresh);
		fresh = NULL;
		return r;
	}
	if (r < 0)
		log_warning_errno(r, "pid %d: cannot watch for its exit, found at the next check of /proc", (int)pid);
	fresh->next = d->processes;
	d->processes = fresh;
	d->nprocesses++;
	/* Say where the mode comes from: an override a restarted daemon found
	 * in the segment is not the configuration's. */
	if (fresh->override != POLICY_MODE_UNSET)
		log_debug("tracking pid %d (%s), policy %s (runtime override, kept from its segment; configured: %s)",
			 (int)pid, tracked_process_name(fresh), policy_mode_to_string(fresh->override),
			 policy_mode_to_string(fresh->decision.mode));
	else
		log_debug("tracking pid %d (%s), policy %s%s%s", (int)pid, tracked_process_name(fresh),
			 policy_mode_to_string(effective_process_mode(fresh)),
			 fresh->decision.rule ? " from " : " (default)",
			 fresh->decision.rule ? fresh->decision.rule->where : "");
	elided_bus_emit_process_added(d, fresh);
	fresh = NULL;
	return 0;
}

/* ---- deferred adoption ------------------------------------------------ */

/*
 * With libelide in every program most segments belong to processes that
 * live a few milliseconds (true, sed, a shell's pipeline).  Adopting one
 * costs /proc and systemd look-ups, a read of the segment, a pidfd, and
 * its exit as much again, for a process gone before its first interval.
 * So a new segment waits for an adoption pass, at most
 * ELIDED_ADOPT_DELAY_USEC (or one interval) away, and is adopted there
 * once it is ELIDED_ADOPT_MIN_AGE_USEC old: a process that ends sooner
 * removes its file and is forgotten unseen.
 */
static uint64_t adopt_delay_usec(struct elided *d)
{
	double interval = d->config->interval * 1e6;

	return interval < ELIDED_ADOPT_DELAY_USEC ? (uint64_t)interval : ELIDED_ADOPT_DELAY_USEC;
}

/* Adopt the k oldest waiting segments; the rest keep waiting. */
static void adopt_oldest(struct elided *d, size_t k)
{
	if (k == 0)
		return; /* and the list may be NULL: memmove must not see it */
	d->pending.adopting = true;
	for (size_t i = 0; i < k; i++)
		if (d->pending.list[i].name[0])
			adopt(d, d->pending.list[i].name, false);
	d->pending.adopting = false;
	memmove(d->pending.list, d->pending.list + k, (d->pending.n - k) * sizeof(d->pending.list[0]));
	d->pending.n -= k;
}

static int on_adopt_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void arm_adopt_timer(struct elided *d)
{
	uint64_t now, when;
	int enabled = SD_EVENT_OFF, r;

	if (!d->event || sd_event_now(d->event, CLOCK_MONOTONIC, &now) < 0)
		return;
	when = now + adopt_delay_usec(d);
	if (d->pending.timer) {
		if (sd_event_source_get_enabled(d->pending.timer, &enabled) >= 0 && enabled != SD_EVENT_OFF)
			return; /* a pass is due already */
		if (sd_event_source_set_time(d->pending.timer, when) >= 0 &&
		    sd_event_source_set_enabled(d->pending.timer, SD_EVENT_ONESHOT) >= 0)
			return;
		d->pending.timer = sd_event_source_disable_unref(d->pending.timer);
	}
	/* 50 ms of slack: the pass may share a wake-up with other timers. */
	r = sd_event_add_time(d->event, &d->pending.timer, CLOCK_MONOTONIC, when, 50000, on_adopt_timer, d);
	if (r < 0) {
		log_warning_errno(r, "cannot schedule the adoption of new segments; adopting them as they come");
		d->pending.timer = NULL;
	}
}

static int on_adopt_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct elided *d = userdata;
	uint64_t now;
	size_t k = 0;

	if (sd_event_now(d->event, CLOCK_MONOTONIC, &now) < 0)
		now = usec;
	/* Arrival order: the old enough ones come first. */
	while (k < d->pending.n && now - d->pending.list[k].seen_usec >= ELIDED_ADOPT_MIN_AGE_USEC)
		k++;
	adopt_oldest(d, k);
	if (d->pending.n)
		arm_adopt_timer(d);
	return 0;
}

void elided_defer_segment(struct elided *d, const char *name)
{
	struct pending_segment *e;
	struct tracked_process *tracked;
	size_t len = strlen(name);
	uint64_t now, start;
	pid_t pid;

	/* A new file under a tracked process's name (an exec'd image): the
	 * next read maps it afresh, since reads trust the mapping. */
	if (seg_parse_name(name, &pid, &start) < 0)
		pid = 0;
	if (pid && (tracked = elided_find_process(d, pid)) && !strcmp(tracked->seg_name, name)) {
		seg_map_close(tracked->map);
		tracked->map = NULL;
		return;
	}

	if (len >= sizeof(e->name) || !d->event || sd_event_now(d->event, CLOCK_MONOTONIC, &now) < 0) {
		adopt(d, name, false);
		return;
	}
	/* A flood waits for the periodic rescan instead (elided_rescan). */
	if (d->pending.n >= ELIDED_MAX_PENDING)
		return;
	if (d->pending.n == d->pending.alloc) {
		size_t n = d->pending.alloc ? d->pending.alloc * 2 : 64;
		void *p = reallocarray(d->pending.list, n, sizeof(d->pending.list[0]));

		if (!p) {
			adopt(d, name, false);
			return;
		}
		d->pending.list = p;
		d->pending.alloc = n;
	}
	e = &d->pending.list[d->pending.n++];
	memcpy(e->name, name, len + 1);
	e->pid = pid;
	e->seen_usec = now;
	arm_adopt_timer(d);
	if (!d->pending.timer)
		elided_adopt_pending(d);
}

/* `name` in the waiting list, NULL when not there. */
static struct pending_segment *find_pending(struct elided *d, const char *name)
{
	uint64_t start;
	pid_t pid;

	if (seg_parse_name(name, &pid, &start) < 0)
		pid = 0;
	/* Newest first: the short-lived are near the end.  The pid first: a
	 * flood of 16384 waiting names costs a removal or a rescanned entry a
	 * pass over integers, not 16384 string compares. */
	for (size_t i = d->pending.n; i-- > 0;)
		if (d->pending.list[i].pid == pid && !strcmp(d->pending.list[i].name, name))
			return &d->pending.list[i];
	return NULL;
}

/* Drop `name` from the waiting list; true when it was there. */
static bool forget_pending(struct elided *d, const char *name)
{
	struct pending_segment *e = find_pending(d, name);

	if (!e)
		return false;
	if (d->pending.adopting) {
		e->name[0] = '\0'; /* adopt_oldest() walks the list */
	} else {
		memmove(e, e + 1, (size_t)(d->pending.list + d->pending.n - (e + 1)) * sizeof(*e));
		d->pending.n--;
	}
	return true;
}

void elided_adopt_pending(struct elided *d)
{
	if (d->pending.timer)
		sd_event_source_set_enabled(d->pending.timer, SD_EVENT_OFF);
	adopt_oldest(d, d->pending.n);
}

void elided_segment_removed(struct elided *d, const char *name)
{
	pid_t pid;
	uint64_t start;

	if (forget_pending(d, name))
		return; /* never adopted: nothing else knows it */
	if (seg_parse_name(name, &pid, &start) == 0)
		elided_reap(d, pid);
}

static int cmp_uid(const void *a, const void *b)
{
	uid_t x = *(const uid_t *)a, y = *(const uid_t *)b;

	return x < y ? -1 : x > y;
}

/* Uids with daemon.max_segments_per_uid processes tracked. */
static size_t uids_at_cap(struct elided *d)
{
	_cleanup_free_ uid_t *uids = NULL;
	size_t n = 0, at = 0, run = 0;

	if (!d->nprocesses)
		return 0;
	uids = calloc(d->nprocesses, sizeof(*uids));
	if (!uids)
		return 0;
	for (struct tracked_process *p = d->processes; p && n < d->nprocesses; p = p->next)
		uids[n++] = p->uid;
	qsort(uids, n, sizeof(*uids), cmp_uid);
	for (size_t i = 0; i < n; i++) {
		run = i > 0 && uids[i] == uids[i - 1] ? run + 1 : 1;
		at += run == d->config->max_segments_per_uid;
	}
	return at;
}

/* "<pid>-<start>.seg.new" of a process that died while creating it. */
static void remove_dead_partial(struct elided *d, const char *name)
{
	char base[64];
	size_t len = strlen(name);
	pid_t pid;
	uint64_t start, now_start;

	if (len <= 4 || len >= sizeof(base) || strcmp(name + len - 4, ".new"))
		return;
	memcpy(base, name, len - 4);
	base[len - 4] = '\0';
	if (seg_parse_name(base, &pid, &start) < 0)
		return;
	if (seg_proc_start_time(NULL, pid, &now_start) == 0 && now_start == start)
		return; /* still being created */
	remove_stale(d, name);
}

/* Tracked processes by pid, for a pass over the directory: one look-up per
 * file instead of a walk of the list (1,000 processes, 1,000 files). */
struct pid_ref {
	pid_t pid;
	struct tracked_process *p;
};

static int cmp_pid_ref(const void *a, const void *b)
{
	pid_t x = ((const struct pid_ref *)a)->pid, y = ((const struct pid_ref *)b)->pid;

	return x < y ? -1 : x > y;
}

static struct pid_ref *pid_index(struct elided *d, size_t *n)
{
	struct pid_ref *refs = calloc(d->nprocesses ? d->nprocesses : 1, sizeof(*refs));

	*n = 0;
	if (!refs)
		return NULL;
	for (struct tracked_process *p = d->processes; p && *n < d->nprocesses; p = p->next)
		refs[(*n)++] = (struct pid_ref){ .pid = p->pid, .p = p };
	qsort(refs, *n, sizeof(*refs), cmp_pid_ref);
	return refs;
}

void elided_rescan(struct elided *d)
{
	DIR *dir;
	struct dirent *de;
	int fd = dup(d->runtime_dirfd);
	size_t seen = 0, refused = 0, over_cap = 0, nrefs = 0;
	/* adopt() only adds processes: an entry stays valid for this pass, and
	 * one adopted during it is found by adopt() itself. */
	_cleanup_free_ struct pid_ref *refs = pid_index(d, &nrefs);

	if (fd < 0)
		return;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return;
	}
	rewinddir(dir);
	/* Bounded work per pass: a directory flooded with junk cannot stall us. */
	while ((de = readdir(dir)) && seen++ < 16384) {
		struct tracked_process *p;
		pid_t pid;
		uint64_t start;

		if (de->d_name[0] == '.')
			continue;
		if (seg_parse_name(de->d_name, &pid, &start) < 0) {
			remove_dead_partial(d, de->d_name);
			continue;
		}
		if (refs) {
			struct pid_ref key = { .pid = pid }, *ref = bsearch(&key, refs, nrefs, sizeof(*refs), cmp_pid_ref);

			p = ref ? ref->p : NULL;
		} else {
			p = elided_find_process(d, pid);
		}
		if (!p || strcmp(p->seg_name, de->d_name)) {
			int r;

			/* Its adoption pass comes (and a short-lived one never needs it). */
			if (find_pending(d, de->d_name))
				continue;
			r = adopt(d, de->d_name, true);

			/* What the daemon cannot see, for status. */
			if (r == -EDQUOT)
				over_cap++;
			else if (r < 0 && r != -ESRCH && r != -ENOENT)
				refused++;
		}
	}
	closedir(dir);
	d->unseen.refused = refused;
	d->unseen.over_cap = over_cap;
	d->unseen.uids_at_cap = uids_at_cap(d);
}

static void untrack(struct elided *d, struct tracked_process **pp, bool remove_segment)
{
	struct tracked_process *p = *pp;

	*pp = p->next;
	d->nprocesses--;
	discovery_unwatch_pid(d->discovery, p->pid);
	/* libelide removes its segment at a normal exit; a crash leaves it. */
	if (remove_segment)
		remove_stale(d, p->seg_name);
	elided_bus_emit_process_removed(d, p);
	process_free(p);
}

void elided_reap(struct elided *d, pid_t pid)
{
	struct tracked_process **pp;

	for (pp = &d->processes; *pp; pp = &(*pp)->next) {
		struct tracked_process *p = *pp;
		uint64_t start;

		if (p->pid != pid)
			continue;
		/* A pid reused by a new process is not the one we track. */
		if (seg_proc_start_time(NULL, pid, &start) == 0 && start == p->start_time)
			return;
		log_debug("pid %d exited", (int)pid);
		elided_learn_from(d, p, true);
		untrack(d, pp, true);
		return;
	}
}

void elided_process_exited(struct elided *d, pid_t pid, uint64_t start_time)
{
	struct tracked_process **pp;

	if (!start_time) {
		elided_reap(d, pid);
		return;
	}
	for (pp = &d->processes; *pp; pp = &(*pp)->next) {
		if ((*pp)->pid != pid)
			continue;
		/* An earlier holder of the pid: the tracked one lives on. */
		if ((*pp)->start_time != start_time)
			return;
		log_debug("pid %d exited", (int)pid);
		elided_learn_from(d, *pp, true);
		untrack(d, pp, true);
		return;
	}
}

void elided_forget_all(struct elided *d)
{
	d->pending.n = 0;
	while (d->processes)
		untrack(d, &d->processes, false);
	d->unseen.refused = d->unseen.over_cap = d->unseen.uids_at_cap = 0;
}

void elided_refresh_all(struct elided *d)
{
	struct tracked_process *p = d->processes, *next;
	uint64_t lost = discovery_lost_events(d->discovery);

	/* Exit events lost: whose, nobody knows, so everybody's /proc now.
	 * Said at notice level when a run of losses starts (a fork storm
	 * would otherwise log every interval). */
	if (lost != d->lost_events_seen) {
		log_full(d->losing_events ? LOG_DEBUG : LOG_NOTICE,
			 "%llu process events lost (the BPF ring buffer was full): checking every tracked process",
			 (unsigned long long)(lost > d->lost_events_seen ? lost - d->lost_events_seen : lost));
		d->lost_events_seen = lost;
		d->losing_events = true;
		for (struct tracked_process *q = d->processes; q; q = q->next)
			q->check_next = true;
	} else {
		d->losing_events = false;
	}
	for (; p; p = next) {
		next = p->next;
		if (refresh_process(d, p) == -ESRCH)
			elided_reap(d, p->pid);
	}
}

/* After a reload: every process gets the new policy. */
void elided_redecide_all(struct elided *d)
{
	for (struct tracked_process *p = d->processes; p; p = p->next) {
		decide(d, p);
		p->control_valid = false;
		refresh_process(d, p);
	}
}

void elided_free_processes(struct elided *d)
{
	while (d->processes) {
		struct tracked_process *p = d->processes;

		d->processes = p->next;
		process_free(p);
	}
	d->nprocesses = 0;
	d->pending.timer = sd_event_source_disable_unref(d->pending.timer);
	free(d->pending.list);
	d->pending.list = NULL;
	d->pending.n = d->pending.alloc = 0;
}
