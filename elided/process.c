/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The process table: adopting segments, reading them every interval,
 * deciding each process's and each lock's policy, and writing decisions
 * back.  Everything read from a segment went through the segment reader
 * (copied and validated) first; identity comes from /proc, never from the
 * segment.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
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
#include "elide.h"
#include "elided.h"
#include "events.h"
#include "log.h"

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
static void read_identity(struct tracked_process *p)
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

static void decide(struct elided *d, struct tracked_process *p)
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

static enum policy_mode effective_process_mode(const struct tracked_process *p)
{
	return p->override != POLICY_MODE_UNSET ? p->override : p->decision.mode;
}

/* ---- naming locks ------------------------------------------------------ */

/* The names of a new lock as far as its entry tells: the symbols of the
 * files it lies in come later, from the symbolizer (symbolizer.c), which
 * never runs on this loop.  NULL when out of memory. */
static struct lock_names *name_lock(const struct elide_seg_lock *e)
{
	char name[ELIDED_LOCK_NAME_MAX], callsite[ELIDED_CALLSITE_TEXT_MAX];

	if (e->kind == ELIDE_SEG_KIND_OVERFLOW)
		return lock_names_new("(overflow)", "", "");
	snprintf(callsite, sizeof(callsite), "0x%" PRIx64, e->callsite);
	if (e->name[0])
		snprintf(name, sizeof(name), "%s", e->name);
	else
		snprintf(name, sizeof(name), "0x%" PRIx64, e->addr);
	return lock_names_new(name, "", callsite);
}

/* ---- reading one process ----------------------------------------------- */

/* Views are kept in entry-index order (the reader returns entries so). */
static struct lock_view *find_view(struct tracked_process *p, uint32_t index)
{
	size_t lo = 0, hi = p->nlocks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->locks[mid].index == index)
			return &p->locks[mid];
		if (p->locks[mid].index < index)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Segment bytes the reader does not range-check, narrowed without aliasing
 * a valid value: anything out of range reads as 0xff. */
static uint8_t seg_byte(uint32_t v)
{
	return v > 0xfe ? 0xff : (uint8_t)v;
}

/* The followed counters of one entry (enum lock_rate order). */
static void followed_counters(const struct elide_seg_lock *e, uint64_t out[LOCK_NRATES])
{
	uint64_t aborts = 0;

	for (int s = ELIDE_SEG_STAT_ABORT_CONFLICT; s <= ELIDE_SEG_STAT_ABORT_OTHER; s++)
		aborts += e->stats[s];
	out[LOCK_RATE_ACQUIRED] = e->stats[ELIDE_SEG_STAT_ACQUIRED];
	out[LOCK_RATE_ATTEMPTS] = e->stats[ELIDE_SEG_STAT_ATTEMPTS];
	out[LOCK_RATE_COMMITS] = e->stats[ELIDE_SEG_STAT_COMMITS];
	out[LOCK_RATE_ABORTS] = aborts;
	out[LOCK_RATE_CYCLES_LOST] = e->stats[ELIDE_SEG_STAT_CYCLES_LOST];
}

/*
 * Fold one entry, as read now, into its view: rates over the interval and
 * the cut-off window.  A fresh view (new lock, recycled entry) has no rate
 * yet, and its window starts with everything the lock did so far.  Once
 * per pass (`pass`, the process's refresh count): a pass that reads the
 * segment again after a partial read (locks came or went) keeps the rates
 * the first read computed.
 */
static void update_view(struct lock_view *v, const struct elide_seg_lock *e, bool fresh, double per_sec,
			uint32_t pass)
{
	uint64_t now[LOCK_NRATES], delta[LOCK_NRATES];

	if (!fresh && v->updated_in == pass)
		return;
	v->updated_in = pass;

	/* Named later via elide.h; the flag keeps the cold name off this path. */
	if (unlikely(e->name[0] && !v->named)) {
		struct lock_names *nm = lock_names_new(e->name, lock_function(v->nm), lock_callsite(v->nm));

		if (nm) {
			free(v->nm);
			v->nm = nm;
			v->named = true;
			v->rule_stale = true;
		}
	}
	/* kind, state, reason and policy were range-checked by the reader. */
	v->state = (uint8_t)e->state;
	v->reason = (uint8_t)e->reason;
	v->policy = (uint8_t)e->policy;
	v->ctl_policy = seg_byte(e->ctl_policy);
	v->ctl_source = seg_byte(e->ctl_source);
	followed_counters(e, now);
	for (int r = 0; r < LOCK_NRATES; r++) {
		delta[r] = fresh ? now[r] : now[r] >= v->last[r] ? now[r] - v->last[r] : 0;
		v->rates[r] = fresh ? 0 : (float)((double)delta[r] * per_sec);
		v->last[r] = now[r];
	}
	v->window_aborts += delta[LOCK_RATE_ABORTS];
	v->window_attempts += delta[LOCK_RATE_ATTEMPTS];
}

static void free_views(struct lock_view *views, size_t n)
{
	for (size_t i = 0; views && i < n; i++)
		free(views[i].nm);
	free(views);
}

static bool view_is_of(const struct lock_view *v, uint32_t index, const struct elide_seg_lock *e)
{
	return v->index == index && v->addr == e->addr && v->kind == e->kind;
}

/*
 * Merge a fresh snapshot into the process's lock views: rates over the
 * interval, cumulative totals, names for new locks.  The common case, the
 * same locks as last time, updates in place; a recycled entry (new
 * address) starts over.
 */
static int merge_locks(struct tracked_process *p, const struct seg_snapshot *snap, double per_sec)
{
	uint32_t pass = (uint32_t)p->refreshes;
	struct lock_view *views;
	bool same = snap->nlocks == p->nlocks;

	for (uint32_t i = 0; same && i < snap->nlocks; i++)
		same = view_is_of(&p->locks[i], snap->locks[i].index, &snap->locks[i].lock);
	if (same) {
		for (uint32_t i = 0; i < snap->nlocks; i++)
			update_view(&p->locks[i], &snap->locks[i].lock, false, per_sec, pass);
		return 0;
	}

	views = calloc(snap->nlocks ? snap->nlocks : 1, sizeof(*views));
	if (!views)
		return -ENOMEM;
	for (uint32_t i = 0; i < snap->nlocks; i++) {
		const struct elide_seg_lock *e = &snap->locks[i].lock;
		struct lock_view *old = find_view(p, snap->locks[i].index);
		struct lock_view *v = &views[i];
		bool fresh = !old || !view_is_of(old, snap->locks[i].index, e);

		if (!fresh) {
			*v = *old;
			old->nm = NULL; /* moved to the new view */
		} else {
			v->nm = name_lock(e);
			if (!v->nm) {
				free_views(views, i);
				return -ENOMEM;
			}
			v->index = snap->locks[i].index;
			v->addr = e->addr;
			v->callsite = e->callsite;
			v->named = e->name[0] != '\0';
			if (e->kind != ELIDE_SEG_KIND_OVERFLOW) {
				v->sym_pending = true;
				p->sym_pending = true;
			}
			v->kind = (uint8_t)e->kind;
			v->rule_stale = true;
		}
		update_view(v, e, fresh, per_sec, pass);
	}
	free_views(p->locks, p->nlocks);
	p->locks = views;
	p->nlocks = snap->nlocks;
	return 0;
}


/*
 * The daemon's long-window cut-off (libelide's own works over one
 * process's short memory): over at least min_aborts aborts, a lock whose
 * aborts exceed max_abort_ratio of its attempts is turned off, then probed
 * again after 1, 2, 4, ... 64 intervals.
 */
static void long_window_adapt(const struct tracked_process *p, struct lock_view *v)
{
	const struct policy_knobs *k = &p->decision.knobs;
	uint64_t min_aborts = k->min_aborts ? k->min_aborts : 1000;
	double ratio = k->max_abort_ratio >= 0 ? k->max_abort_ratio : 0.5;

	if (v->daemon_off) {
		if (v->backoff_left > 0 && --v->backoff_left > 0)
			return;
		v->daemon_off = false; /* probe again */
		v->window_aborts = v->window_attempts = 0;
		return;
	}
	if (v->window_aborts < min_aborts)
		return;
	if ((double)v->window_aborts > ratio * (double)(v->window_attempts ? v->window_attempts : 1)) {
		v->daemon_off = true;
		v->backoff_intervals = v->backoff_intervals ? v->backoff_intervals * 2 : 1;
		if (v->backoff_intervals > 64)
			v->backoff_intervals = 64;
		v->backoff_left = v->backoff_intervals;
	} else if (v->backoff_intervals > 0) {
		v->backoff_intervals /= 2;
	}
	v->window_aborts = v->window_attempts = 0;
}

static uint32_t seg_mode_of(enum policy_mode m)
{
	switch (m) {
	case POLICY_MODE_ADAPTIVE:
		return ELIDE_SEG_MODE_ADAPTIVE;
	case POLICY_MODE_ON:
		return ELIDE_SEG_MODE_ON;
	case POLICY_MODE_OFF:
		return ELIDE_SEG_MODE_OFF;
	case POLICY_MODE_WATCH:
		return ELIDE_SEG_MODE_WATCH;
	default:
		return ELIDE_SEG_MODE_NONE;
	}
}

static uint32_t ctl_policy_of(enum policy_mode m)
{
	switch (m) {
	case POLICY_MODE_ADAPTIVE:
		return ELIDE_POLICY_ADAPTIVE + 1;
	case POLICY_MODE_ON:
		return ELIDE_POLICY_ALWAYS + 1;
	case POLICY_MODE_OFF:
	case POLICY_MODE_WATCH: /* a lock is watched whenever it is not elided */
		return ELIDE_POLICY_NEVER + 1;
	default:
		return ELIDE_SEG_CTL_NONE;
	}
}

/* A segment gone (the process exited) or replaced (it exec'd) while we
 * wrote: an ordinary race, not worth a warning.  Anything else is. */
static int write_problem_priority(int r)
{
	return r == -ENOENT || r == -ESRCH || r == -ESTALE ? LOG_DEBUG : LOG_WARNING;
}

/* One interval's walk over a process's locks: history sums and decisions. */
struct pass {
	struct elided *d;
	struct tracked_process *p;
	enum policy_mode mode;
	struct history_point sum;
	unsigned locks_written;
	bool daemon_off;              /* a visited lock is off by the daemon's adaptation */
	bool marked_only;             /* visits only the locks marked written (marked_entry()) */
	/* Whose process it is, asked before the first write of the pass:
	 * 0 not yet, 1 the one we know, -1 another (or gone): no writes. */
	int owner;
};

static void pass_begin(struct pass *ps, struct elided *d, struct tracked_process *p)
{
	memset(ps, 0, sizeof(*ps));
	ps->d = d;
	ps->p = p;
	ps->mode = effective_process_mode(p);
}

static int check_owner(struct elided *d, struct tracked_process *p, bool fresh);

/*
 * Decisions for a former owner must not be pushed into a process that
 * changed hands (a server dropping privileges, a setuid exec): its owner is
 * asked (one stat) before the first write of a pass, not every interval.
 * A change drops the runtime overrides and decides again (owner_changed);
 * the next pass pushes the new decisions.
 */
static bool pass_may_write(struct pass *ps)
{
	if (ps->owner == 0)
		ps->owner = check_owner(ps->d, ps->p, false) == 0 ? 1 : -1;
	return ps->owner > 0;
}

/* ---- events ----------------------------------------------------------- */

static enum policy_mode mode_of_seg(uint32_t m);

/* "off", "on", "adaptive", or "default" for no decision of its own. */
static const char *decision_mode_name(enum policy_mode m)
{
	return m == POLICY_MODE_UNSET ? "default" : policy_mode_to_string(m);
}

static struct elided_event process_event(const struct tracked_process *p, enum elided_event_kind kind)
{
	return (struct elided_event){
		.kind = kind,
		.priority = LOG_INFO,
		.pid = p->pid,
		.uid = p->uid,
		.exe = tracked_process_name(p),
		.caller_uid = ELIDED_NO_UID,
		.old_uid = ELIDED_NO_UID,
	};
}

/*
 * A lock decision the pass just wrote, from adaptation or the config: an
 * event.  Overrides (and their reset) were logged when asked for, with
 * who asked.
 */
static void lock_decision_event(struct elided *d, const struct tracked_process *p, const struct lock_view *v,
				enum policy_mode mode, uint32_t source, uint32_t old_source)
{
	struct elided_event ev = process_event(p, mode == POLICY_MODE_OFF ? ELIDED_EVENT_LOCK_OFF : ELIDED_EVENT_LOCK_ON);
	const char *name = lock_name(v->nm)[0] ? lock_name(v->nm) : lock_callsite(v->nm);
	char reason[256];

	if (source == ELIDE_SEG_SOURCE_OVERRIDE || (old_source == ELIDE_SEG_SOURCE_OVERRIDE && source == ELIDE_SEG_SOURCE_NONE))
		return;
	/* Re-probes with back-off repeat: the first turn-off is worth a
	 * line, the probes and later turn-offs only a signal (and debug). */
	if (source == ELIDE_SEG_SOURCE_ADAPTATION) {
		snprintf(reason, sizeof(reason), "its transactions kept aborting; probed again in %u intervals",
			 v->backoff_left);
		if (v->backoff_intervals > 1)
			ev.priority = LOG_DEBUG;
	} else if (source == ELIDE_SEG_SOURCE_LEARNED) {
		snprintf(reason, sizeof(reason),
			 "earlier runs of the program never committed a transaction on it; probed again in %u intervals",
			 v->backoff_left);
	} else if (source == ELIDE_SEG_SOURCE_CONFIG)
		snprintf(reason, sizeof(reason), "a lock rule%s%s", p->decision.rule ? " of " : "",
			 p->decision.rule ? p->decision.rule->where : "");
	else if (effective_process_mode(p) == POLICY_MODE_OFF)
		snprintf(reason, sizeof(reason), "its process is off, which no lock rule overrides");
	else if (old_source == ELIDE_SEG_SOURCE_ADAPTATION || old_source == ELIDE_SEG_SOURCE_LEARNED) {
		snprintf(reason, sizeof(reason), "probing it again after its back-off");
		ev.priority = LOG_DEBUG;
	} else
		snprintf(reason, sizeof(reason), "no lock rule applies any more");
	ev.lock = name;
	ev.mode = decision_mode_name(mode);
	ev.source = seg_source_to_string(source ? source : old_source);
	ev.reason = reason;
	elided_event(d, &ev, "pid %d (%s): lock %s %s (%s: %s)", (int)p->pid, ev.exe, name[0] ? name : "?",
		     mode == POLICY_MODE_OFF ? "no longer elided" :
		     mode == POLICY_MODE_UNSET ? "back to the process's mode" : policy_mode_to_string(mode),
		     ev.source, reason);
}

/* The control block the pass just wrote gives the process another mode
 * from the config (a rule at adoption, or a reload). */
static void process_mode_event(struct elided *d, const struct tracked_process *p, const struct elide_seg_control *c,
			       const struct elide_seg_control *old)
{
	struct elided_event ev = process_event(p, ELIDED_EVENT_PROCESS_MODE);
	char reason[256];

	if (c->mode == old->mode && c->mode_source == old->mode_source)
		return;
	if (c->mode_source == ELIDE_SEG_SOURCE_OVERRIDE || old->mode_source == ELIDE_SEG_SOURCE_OVERRIDE)
		return;
	snprintf(reason, sizeof(reason), "%s%s", p->decision.rule ? "the rule of " : "no program rule applies any more",
		 p->decision.rule ? p->decision.rule->where : "");
	ev.mode = decision_mode_name(mode_of_seg(c->mode));
	ev.source = "config";
	ev.reason = reason;
	elided_event(d, &ev, "pid %d (%s): mode %s (config: %s)", (int)p->pid, ev.exe, ev.mode, reason);
}

/*
 * A new view in adaptive mode: is it a lock the program's earlier runs
 * taught "never elide"?  Either libelide applied the hint when the lock was first
 * contended (its entry says so), or the lock was contended before the
 * hints arrived and the pass writes the decision now.  Off until the
 * probe, ELIDED_LEARNED_PROBE_INTERVALS away, then the daemon's back-off
 * goes on from 32 intervals.
 */
static void check_learned(const struct tracked_process *p, enum policy_mode mode, struct lock_view *v)
{
	bool applied = v->learned != VIEW_LEARNED_FOREIGN && v->ctl_source == ELIDE_SEG_SOURCE_LEARNED &&
		       v->ctl_policy == ELIDE_POLICY_NEVER + 1;

	v->learned = VIEW_LEARNED_NONE;
	/* A mode the admin chose (a rule's "on" or "off", an override) is not
	 * second-guessed by what was learned: the pass then writes NONE over a
	 * hint libelide applied. */
	if (mode != POLICY_MODE_ADAPTIVE || v->kind == ELIDE_SEG_KIND_OVERFLOW ||
	    (!applied && elided_learned_hint_of(p, v) < 0))
		return;
	v->learned = VIEW_LEARNED_OFF;
	v->daemon_off = true;
	v->backoff_intervals = 32;
	v->backoff_left = ELIDED_LEARNED_PROBE_INTERVALS;
}

/* One lock, while its view is in cache anyway. */
static void pass_lock(struct pass *ps, struct lock_view *v)
{
	struct tracked_process *p = ps->p;
	enum policy_mode lm = POLICY_MODE_UNSET;
	uint32_t want, source = ELIDE_SEG_SOURCE_NONE;
	char err[SEG_ERR_MAX];
	int r;

	ps->sum.acquired_per_sec += v->rates[LOCK_RATE_ACQUIRED];
	ps->sum.attempts_per_sec += v->rates[LOCK_RATE_ATTEMPTS];
	ps->sum.commits_per_sec += v->rates[LOCK_RATE_COMMITS];
	ps->sum.aborts_per_sec += v->rates[LOCK_RATE_ABORTS];
	ps->sum.cycles_lost_per_sec += v->rates[LOCK_RATE_CYCLES_LOST];
	/* Once per pass: a pass that reads again after a partial read (locks
	 * came or went) must not count a back-off interval twice. */
	if (v->kind == ELIDE_SEG_KIND_OVERFLOW || v->decided_in == (uint32_t)p->refreshes)
		return;
	v->decided_in = (uint32_t)p->refreshes;
	/* Names are cold: match rules only when the lock or the policy is new. */
	if (p->rules_dirty || v->rule_stale) {
		v->rule_mode = (uint8_t)config_lock_mode(&p->decision, lock_name(v->nm), lock_function(v->nm));
		v->rule_stale = false;
	}
	if (v->learned == VIEW_LEARNED_UNCHECKED || v->learned == VIEW_LEARNED_FOREIGN)
		check_learned(p, ps->mode, v);
	if (ps->mode == POLICY_MODE_ADAPTIVE && v->rule_mode == POLICY_MODE_UNSET && v->override == POLICY_MODE_UNSET)
		long_window_adapt(p, v);
	/* The store's verdict holds until its probe; then the daemon's own
	 * back-off takes over. */
	if (v->learned == VIEW_LEARNED_OFF && !v->daemon_off)
		v->learned = VIEW_LEARNED_NONE;
	/* Its back-off counts intervals: every pass must visit it. */
	ps->daemon_off |= v->daemon_off;
	if (ps->mode == POLICY_MODE_OFF) {
		/* The process's off is the administrator's kill switch: libelide
		 * forwards every call to glibc, whatever a lock's own policy
		 * says.  No lock decision is written (one written before is
		 * taken back), so none is claimed; they come back with
		 * another process mode. */
	} else if (v->override != POLICY_MODE_UNSET) {
		lm = (enum policy_mode)v->override;
		source = ELIDE_SEG_SOURCE_OVERRIDE;
	} else if (v->rule_mode != POLICY_MODE_UNSET) {
		lm = (enum policy_mode)v->rule_mode;
		source = ELIDE_SEG_SOURCE_CONFIG;
	} else if (v->daemon_off) {
		lm = POLICY_MODE_OFF;
		source = v->learned == VIEW_LEARNED_OFF ? ELIDE_SEG_SOURCE_LEARNED : ELIDE_SEG_SOURCE_ADAPTATION;
	}
	want = ctl_policy_of(lm);
	if ((want == v->ctl_policy && source == v->ctl_source) || !pass_may_write(ps))
		return;
	r = seg_write_lock_policy(ps->d->runtime_dirfd, p->seg_name, v->index, want, source, err, sizeof(err));
	if (r < 0) {
		snprintf(p->last_error, sizeof(p->last_error), "%s", err);
		log_uid(&ps->d->ratelimit, p->uid, write_problem_priority(r), "pid %d: cannot write a lock decision: %s",
			(int)p->pid, err);
		return;
	}
	ps->locks_written++;
	lock_decision_event(ps->d, p, v, lm, source, v->ctl_source);
	v->ctl_policy = (uint8_t)want;
	v->ctl_source = (uint8_t)source;
}

/*
 * The process's waiting a second since the last read, from the header's
 * running total (ELIDE_SEG_FEATURE_WAIT_TOTAL): no walk of the entries.
 * The total is the process's to write: one that went back (a new image,
 * a forged header) starts afresh at 0.
 */
static double wait_rate(struct tracked_process *p, const struct elide_seg_header *h, double per_sec)
{
	uint64_t total = h->wait_ns, last = p->wait_total_ns;
	bool known = p->wait_total_known;

	if (!(h->features & ELIDE_SEG_FEATURE_WAIT_TOTAL)) {
		p->wait_total_known = false;
		return 0;
	}
	p->wait_total_ns = total;
	p->wait_total_known = true;
	if (!known || total < last)
		return 0;
	return (double)(total - last) / 1e9 * per_sec;
}

/* After the walk: the history point and the process's control block. */
static void pass_end(struct pass *ps, uint64_t t, bool history)
{
	struct tracked_process *p = ps->p;
	/* The fields only: zeroing and comparing its 4 KiB of reserved bytes
	 * was a tenth of an interval's work at 1000 quiet processes. */
	struct elide_seg_control c;
	const struct policy_knobs *k = &p->decision.knobs;
	enum policy_mode mode = ps->mode;
	char err[SEG_ERR_MAX];
	int r;

	/* An owner changed in the middle of the pass decided anew; a pass
	 * over the marked locks only leaves the others' rules to the next. */
	if (ps->owner >= 0 && !ps->marked_only)
		p->rules_dirty = false;
	if (history) {
		ps->sum.time_ns = t;
		p->history[p->history_next] = ps->sum;
		p->history_next = (p->history_next + 1) % ELIDED_HISTORY;
		if (p->history_len < ELIDED_HISTORY)
			p->history_len++;
	}

	memset(&c, 0, offsetof(struct elide_seg_control, hints));
	/* A mode the program already runs with needs no push: NONE keeps it. */
	c.mode = mode == POLICY_MODE_ADAPTIVE && p->override == POLICY_MODE_UNSET && !p->decision.rule ?
		 ELIDE_SEG_MODE_NONE : seg_mode_of(mode);
	c.retries = k->retries_plus1;
	c.contention = k->contention;
	c.skip = k->skip;
	c.skip_max = k->skip_max;
	/* Only a program rule's own ratio overrides the program's ELIDE
	 * abort_ratio; 0 in the control block means "keep", so 0.0 is 1 ppm. */
	if (p->decision.rule && p->decision.rule->knobs.max_abort_ratio >= 0)
		c.abort_ratio_ppm = k->max_abort_ratio * 1e6 < 1 ? 1 : (uint32_t)(k->max_abort_ratio * 1e6);
	c.mode_source = p->override != POLICY_MODE_UNSET ? ELIDE_SEG_SOURCE_OVERRIDE :
			c.mode != ELIDE_SEG_MODE_NONE ? ELIDE_SEG_SOURCE_CONFIG : ELIDE_SEG_SOURCE_NONE;
	/* libelide looks at lock decisions when the generation moves: a
	 * changed lock decision rewrites the control block too. */
	c.nhints = p->nhints;
	/* The hints (learning.c) are compared by their dirty flag: copying and
	 * comparing 2 KiB per pass would cost what the reserved bytes did. */
	if ((ps->locks_written || !p->control_valid || p->hints_dirty ||
	     memcmp(&c.mode, &p->control_written.mode,
		    offsetof(struct elide_seg_control, hints) - offsetof(struct elide_seg_control, mode))) &&
	    pass_may_write(ps)) {
		memset(c.hints, 0, sizeof(c.hints));
		if (p->nhints)
			memcpy(c.hints, p->hints, p->nhints * sizeof(*p->hints));
		memset(c.reserved, 0, sizeof(c.reserved));
		r = seg_write_control(ps->d->runtime_dirfd, p->seg_name, &c, err, sizeof(err));
		if (r < 0) {
			snprintf(p->last_error, sizeof(p->last_error), "%s", err);
			log_uid(&ps->d->ratelimit, p->uid, write_problem_priority(r), "pid %d: cannot write decisions: %s",
				(int)p->pid, err);
		} else {
			struct elide_seg_control old = p->control_valid ? p->control_written : (struct elide_seg_control){ 0 };

			p->control_written = c;
			p->control_valid = true;
			p->hints_dirty = false;
			process_mode_event(ps->d, p, &c, &old);
		}
	}
}

static enum policy_mode mode_of_seg(uint32_t m)
{
	switch (m) {
	case ELIDE_SEG_MODE_ADAPTIVE:
		return POLICY_MODE_ADAPTIVE;
	case ELIDE_SEG_MODE_ON:
		return POLICY_MODE_ON;
	case ELIDE_SEG_MODE_OFF:
		return POLICY_MODE_OFF;
	case ELIDE_SEG_MODE_WATCH:
		return POLICY_MODE_WATCH;
	default:
		return POLICY_MODE_UNSET;
	}
}

static enum policy_mode mode_of_ctl(uint32_t ctl)
{
	switch (ctl) {
	case ELIDE_POLICY_ADAPTIVE + 1:
		return POLICY_MODE_ADAPTIVE;
	case ELIDE_POLICY_ALWAYS + 1:
		return POLICY_MODE_ON;
	case ELIDE_POLICY_NEVER + 1:
		return POLICY_MODE_OFF;
	default:
		return POLICY_MODE_UNSET;
	}
}

/*
 * The first read of a process this daemon instance sees: decisions an
 * earlier instance made at runtime live on in the segment (marked by their
 * source), so a restarted daemon keeps them instead of reverting to the
 * configuration.
 */
static void restore_decisions(struct tracked_process *p, const struct seg_snapshot *snap)
{
	if (snap->control.mode_source == ELIDE_SEG_SOURCE_OVERRIDE)
		p->override = mode_of_seg(snap->control.mode);
	for (size_t i = 0; i < p->nlocks; i++) {
		struct lock_view *v = &p->locks[i];

		if (v->ctl_source == ELIDE_SEG_SOURCE_OVERRIDE) {
			v->override = (uint8_t)mode_of_ctl(v->ctl_policy);
			p->lock_overrides = true;
		} else if (v->ctl_source == ELIDE_SEG_SOURCE_ADAPTATION && v->ctl_policy == ELIDE_POLICY_NEVER + 1) {
			v->daemon_off = true;
			v->backoff_intervals = v->backoff_left = 1;
		}
	}
}

/* Steady state: the same locks as last interval, updated as they are read. */
struct stream {
	struct tracked_process *p;
	struct pass *pass;
	size_t next;
	double per_sec;
	bool mismatch;
};

static int stream_entry(uint32_t index, const struct elide_seg_lock *e, void *userdata)
{
	struct stream *st = userdata;

	if (st->next >= st->p->nlocks || !view_is_of(&st->p->locks[st->next], index, e)) {
		st->mismatch = true;
		return -EAGAIN;
	}
	/* The views are walked as the entries are: ask for a later one. */
	if (st->next + 16 < st->p->nlocks) {
		__builtin_prefetch(&st->p->locks[st->next + 16], 1);
		__builtin_prefetch((const char *)&st->p->locks[st->next + 16] + 64, 1);
	}
	update_view(&st->p->locks[st->next], e, false, st->per_sec, (uint32_t)st->p->refreshes);
	pass_lock(st->pass, &st->p->locks[st->next++]);
	return 0;
}

/*
 * Read p's segment through its mapping (made on first use, dropped after
 * any error so that the next read maps the file afresh), or with pread
 * where it cannot be mapped.
 */
static int read_segment(struct elided *d, struct tracked_process *p, unsigned flags, uint64_t created_ns,
			seg_lock_fn each, void *userdata, struct seg_snapshot **snap, char *err, size_t errlen)
{
	int r;

	if (!p->map && seg_map_open(d->runtime_dirfd, p->seg_name, &p->map, err, errlen) < 0)
		p->map = NULL;
	if (!p->map)
		return seg_read_each(d->runtime_dirfd, p->seg_name, flags, ELIDED_MAX_LOCKS_PER_PROCESS, created_ns,
				     each, userdata, snap, err, errlen);
	r = seg_map_read_each(p->map, d->runtime_dirfd, flags, ELIDED_MAX_LOCKS_PER_PROCESS, created_ns, each,
			      userdata, snap, err, errlen);
	/* -EAGAIN: the caller's walk stopped (locks came or went), the file is fine. */
	if (r < 0 && r != -EAGAIN) {
		seg_map_close(p->map);
		p->map = NULL;
	}
	return r;
}

static bool view_moved(const struct lock_view *v)
{
	for (int k = 0; k < LOCK_NRATES; k++)
		if (v->rates[k] != 0)
			return true;
	return false;
}

/* After a pass that visited every view: which ones moved. */
static void collect_moving(struct tracked_process *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->nlocks; i++)
		n += view_moved(&p->locks[i]);
	free(p->moving);
	p->moving = n ? malloc(n * sizeof(*p->moving)) : NULL;
	p->nmoving = 0;
	if (!p->moving) {
		/* Without the list a marked pass could not zero them: walk again. */
		p->walk_views = n > 0;
		return;
	}
	for (size_t i = 0; i < p->nlocks; i++)
		if (view_moved(&p->locks[i]))
			p->moving[p->nmoving++] = (uint32_t)i;
}

static void zero_rates(struct tracked_process *p, uint32_t position)
{
	if (position < p->nlocks)
		memset(p->locks[position].rates, 0, sizeof(p->locks[position].rates));
}

/*
 * A pass over the entries marked written since the last read (a
 * SEG_READ_DIRTY_ONLY read, entry by entry in index order): each one's view
 * is found and updated, and visited (pass_lock) while it is in the cache;
 * the views that moved last interval and not now get zero rates; the
 * others keep theirs (zero) untouched: the cost follows the locks that
 * move.  An entry without a view (a new or recycled lock) stops the read
 * with -EAGAIN, and the caller reads the segment whole (update_view() and
 * pass_lock() keep what this pass did).
 */
struct marked {
	struct tracked_process *p;
	struct pass *ps;
	double per_sec;
	bool decide;                 /* visit (pass_lock) each view as it is read */
	size_t cursor;               /* views before it have lower indices */
	size_t old;                  /* p->moving[] before it are dealt with */
	uint32_t *pos;               /* the marked views' positions, ascending */
	size_t npos, cap;
};

/* Views that moved last time and are before `upto` now (not marked): no
 * longer moving. */
static void marked_zero_until(struct marked *mk, size_t upto)
{
	struct tracked_process *p = mk->p;

	for (; mk->old < p->nmoving && p->moving[mk->old] < upto; mk->old++)
		zero_rates(p, p->moving[mk->old]);
	if (mk->old < p->nmoving && p->moving[mk->old] == upto)
		mk->old++;
}

static int marked_entry(uint32_t index, const struct elide_seg_lock *e, void *userdata)
{
	struct marked *mk = userdata;
	struct tracked_process *p = mk->p;
	struct lock_view *v;

	/* Entries are mostly in use from the first one on, so a view's
	 * position is usually its index less the first view's: one look.
	 * Else a binary search past the cursor (a walk would touch every
	 * view). */
	size_t guess = p->nlocks ? index - p->locks[0].index : 0;
	size_t lo = mk->cursor, hi = p->nlocks;

	if (guess >= lo && guess < hi && p->locks[guess].index == index)
		lo = hi = guess;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->locks[mid].index < index)
			lo = mid + 1;
		else
			hi = mid;
	}
	mk->cursor = lo;
	if (mk->cursor == p->nlocks || !view_is_of(&p->locks[mk->cursor], index, e))
		return -EAGAIN;
	if (mk->npos == mk->cap) {
		size_t cap = mk->cap ? mk->cap * 2 : 64;
		uint32_t *pos = reallocarray(mk->pos, cap, sizeof(*pos));

		if (!pos)
			return -ENOMEM;
		mk->pos = pos;
		mk->cap = cap;
	}
	mk->pos[mk->npos++] = (uint32_t)mk->cursor;
	marked_zero_until(mk, mk->cursor);
	/* Where the walk goes next if many locks move (the reader asks for
	 * the entries ahead): a wasted line per lock when few do. */
	if (mk->cursor + 8 < p->nlocks) {
		__builtin_prefetch(&p->locks[mk->cursor + 8], 1);
		__builtin_prefetch((const char *)&p->locks[mk->cursor + 8] + 64, 1);
	}
	v = &p->locks[mk->cursor];
	update_view(v, e, false, mk->per_sec, (uint32_t)p->refreshes);
	/* While the view is in the cache (with every lock moving, a second
	 * walk over the views cost a fifth more than the old whole read). */
	if (mk->decide)
		pass_lock(mk->ps, v);
	return 0;
}

/* After a successful marked read: the views not visited yet (a checked
 * read decides only once the checks passed), and the new moving list. */
static void finish_marked(struct tracked_process *p, struct marked *mk)
{
	marked_zero_until(mk, SIZE_MAX);
	if (!mk->decide)
		for (size_t i = 0; i < mk->npos; i++)
			pass_lock(mk->ps, &p->locks[mk->pos[i]]);
	free(p->moving);
	p->moving = mk->pos;
	p->nmoving = mk->npos;
	mk->pos = NULL;
}

/*
 * Most processes with libelide never contend a lock, and most locks rest
 * most of the time: a process whose segment has nothing marked written and
 * whose header shows the status its last read saw has nothing to read.
 * One look at its mapping (the header's status fields and the mark words,
 * a few lines) then stands for the read: the views that moved last time
 * get zero rates and the pass ends as a marked pass that found no marks.
 * Checked intervals, rules to apply and views to walk read as before.
 */
static bool quiet_pass(struct elided *d, struct tracked_process *p, unsigned flags, uint64_t t, double dt)
{
	struct seg_peek now;
	struct pass ps;

	if (!p->dirty_tracking || !p->map || !p->peek_valid || !p->created_ns || !p->last_sample_ns ||
	    p->rules_dirty || p->walk_views || (flags & SEG_READ_CHECK_PROCESS))
		return false;
	if (seg_map_peek(p->map, &now) < 0 || now.marked || seg_peek_changed(&now, &p->last_peek) ||
	    !(now.features & ELIDE_SEG_FEATURE_DIRTY) || now.lock_high_water > ELIDE_SEG_DIRTY_ENTRIES)
		return false;
	pass_begin(&ps, d, p);
	ps.marked_only = true;
	for (size_t i = 0; i < p->nmoving; i++)
		zero_rates(p, p->moving[i]);
	free(p->moving);
	p->moving = NULL;
	p->nmoving = 0;
	p->last_error[0] = '\0';
	p->last_sample_ns = t;
	pass_end(&ps, t, dt > 0);
	return true;
}

/* Said once per distinct problem, within the owner's rate limit; a file
 * replaced by the next image (fork + exec) is no problem at all. */
static void log_read_problem(struct elided *d, struct tracked_process *p, int r, const char *err)
{
	if (strcmp(p->last_error, err))
		log_uid(&d->ratelimit, p->uid, r == -ESTALE ? LOG_DEBUG : LOG_WARNING, "%s", err);
	snprintf(p->last_error, sizeof(p->last_error), "%s", err);
}

/* ---- owner ------------------------------------------------------------ */

/*
 * p's effective uid is no longer the one cached (a setuid exec keeps pid
 * and start time; a server drops privileges).  Runtime overrides were set
 * by, or for, the former owner: drop them, and since they are written into
 * the segment (where a restarted daemon would restore them), the next pass
 * rewrites the control block and every lock decision without them.
 */
static void owner_changed(struct elided *d, struct tracked_process *p, uid_t uid)
{
	struct elided_event ev;
	uid_t old = p->uid;

	p->override = POLICY_MODE_UNSET;
	for (size_t i = 0; i < p->nlocks; i++)
		p->locks[i].override = POLICY_MODE_UNSET;
	p->lock_overrides = false;
	p->uid = uid;
	p->control_valid = false;
	decide(d, p); /* rules may name the user */
	/* What was learned is per uid: the former owner's verdicts leave the
	 * process (hints and the locks turned off by them), the new owner's
	 * come in.  check_learned() then asks the new hints alone, not the
	 * segment, and the pass writes what they say. */
	for (size_t i = 0; i < p->nlocks; i++) {
		struct lock_view *v = &p->locks[i];

		if (v->learned == VIEW_LEARNED_OFF)
			v->daemon_off = false;
		v->learned = VIEW_LEARNED_FOREIGN;
	}
	elided_learning_owner_changed(d, p);
	/* Logged within the unprivileged side's budget (elided_event): a
	 * program toggling its euid must not flood the journal. */
	ev = process_event(p, ELIDED_EVENT_OWNER_CHANGED);
	ev.priority = LOG_NOTICE;
	ev.source = "owner";
	ev.old_uid = old;
	ev.reason = "runtime overrides dropped";
	elided_event(d, &ev, "pid %d (%s) changed owner uid %u -> uid %u; runtime overrides dropped", (int)p->pid,
		     ev.exe, (unsigned)old, (unsigned)uid);
	elided_bus_emit_owner_changed(d, p, old);
}

/*
 * Compare p's owner now with the cached one.  fresh: the authoritative
 * answer, for a D-Bus call about to read or steer p: the effective uid from
 * /proc/PID/status, then the start time, read after it, so that the uid is
 * that of the process we track (a recycled pid has another start time).
 * /proc rather than a pidfd: BPF discovery keeps no pidfds, and a start
 * time read after the status answers the same question.
 * Not fresh (every interval): one stat of /proc/PID, owned by the
 * effective uid of a dumpable process and by root otherwise.  It can only
 * err towards root, so every difference is confirmed the fresh way and a
 * change to root (a setuid exec) is always seen at once; a change away
 * from root may wait for the periodic full check or the next D-Bus call,
 * except for a root process holding root's learned hints: its owner is
 * read the fresh way, for a drop to another user must take root's hints
 * away (and what its run teaches must be the new owner's) soon.
 * Returns 1 when the owner changed, 0 when not, -ESRCH when p is gone.
 */
static int check_owner(struct elided *d, struct tracked_process *p, bool fresh)
{
	char path[32];
	struct stat st;
	uint64_t start;
	uid_t uid;
	int r;

	if (!fresh) {
		snprintf(path, sizeof(path), "/proc/%d", (int)p->pid);
		if (stat(path, &st) < 0)
			return errno == ENOENT ? -ESRCH : -errno;
		if (st.st_uid == p->uid && !(p->uid == 0 && p->nhints))
			return 0;
	}
	r = seg_proc_uid(NULL, p->pid, &uid);
	if (r < 0)
		return r;
	r = seg_proc_start_time(NULL, p->pid, &start);
	if (r < 0)
		return r;
	if (start != p->start_time)
		return -ESRCH;
	if (uid == p->uid)
		return 0;
	owner_changed(d, p, uid);
	return 1;
}

/*
 * Read one process's segment and act on it.  Returns -ESRCH when the
 * process is gone (the caller reaps it).
 */
static int refresh_process(struct elided *d, struct tracked_process *p)
{
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX];
	uint64_t t = now_ns();
	double dt = p->last_sample_ns ? (double)(t - p->last_sample_ns) / 1e9 : 0;
	double per_sec = dt > 0 ? 1.0 / dt : 0;
	double wait_per_sec;
	/* Exits arrive from discovery (pidfd or BPF) at once, so the start
	 * time and the file's owner are checked at adoption and then every few
	 * intervals (missed exits), not each time: two /proc files less per
	 * process.  With the pidfd held no exit is missed, and the check
	 * (30 us, half of what 1000 quiet processes cost) comes less often. */
	uint64_t nth = p->refreshes++;
	unsigned flags = p->check_next ||
			 nth % (p->exit_watched ? ELIDED_PROC_CHECK_WATCHED_EVERY : ELIDED_PROC_CHECK_EVERY) == 0 ?
			 SEG_READ_CHECK_PROCESS : 0;
	/* The mapping is trusted between those checks: a file put under the
	 * name (an exec'd image) comes with an inotify event, which drops the
	 * mapping (elided_defer_segment). */
	flags |= SEG_READ_MAP_NO_STAT;
	/* While no view needs a visit of its own, only the entries the process
	 * marked written are read, checked intervals included (decisions are
	 * taken after the read and its checks: finish_marked()). */
	bool marked_pass = p->dirty_tracking && p->map && p->nlocks && p->created_ns && p->last_sample_ns &&
			   !p->rules_dirty && !p->walk_views;
	bool streamed = false;
	struct pass ps;
	int r;

	/* The owner is asked before decisions are pushed (pass_may_write), and
	 * every interval only while runtime overrides are set: they are the
	 * former owner's, and must go within an interval of the change.
	 * Between the full checks of a watched process, it is looked at as
	 * often as an unwatched one's (one stat, erring towards root). */
	bool look_at_owner = p->override != POLICY_MODE_UNSET || p->lock_overrides ||
			     (!(flags & SEG_READ_CHECK_PROCESS) && p->exit_watched &&
			      nth % ELIDED_PROC_CHECK_EVERY == 0);

	if (look_at_owner && check_owner(d, p, false) == -ESRCH)
		return -ESRCH;
	p->maps_reloaded = false;
	if (quiet_pass(d, p, flags, t, dt))
		return 0;
	/* One pass over the file into the views: at 100 processes of 1000
	 * locks the interval is memory-bound, and a snapshot would copy it all
	 * once more. */
	pass_begin(&ps, d, p);
	if (marked_pass) {
		struct marked mk = { .p = p, .ps = &ps, .per_sec = per_sec,
				     .decide = !(flags & SEG_READ_CHECK_PROCESS) };

		ps.marked_only = true;

		r = read_segment(d, p, flags | SEG_READ_HOT_ONLY | SEG_READ_DIRTY_ONLY, p->created_ns, marked_entry,
				 &mk, &snap, err, sizeof(err));
		if (r < 0 && r != -ESTALE && r != -EAGAIN) {
			free(mk.pos);
			if (r == -ESRCH || r == -ENOENT)
				return -ESRCH;
			log_read_problem(d, p, r, err);
			return r;
		}
		if (r == 0 && snap->dirty_only && !snap->nmarked_free) {
			finish_marked(p, &mk);
			streamed = true;
		} else {
			free(mk.pos);
			/* Locks came or went, or a new image: the marks are taken,
			 * so the segment is read whole (below). */
			seg_snapshot_free(snap);
			snap = NULL;
			marked_pass = false;
			pass_begin(&ps, d, p);
		}
	}
	/* Checked intervals read whole: decisions only after the checks pass. */
	if (!streamed && p->nlocks && p->created_ns && !(flags & SEG_READ_CHECK_PROCESS)) {
		struct stream st = { .p = p, .pass = &ps, .per_sec = per_sec };

		/* Names and call sites are not needed here: half the memory. */
		r = read_segment(d, p, flags | SEG_READ_HOT_ONLY, p->created_ns, stream_entry, &st, &snap, err,
				 sizeof(err));
		if (r == 0 && st.next == p->nlocks)
			streamed = true;
		else if (r < 0 && !st.mismatch && r != -ESTALE) {
			if (r == -ESRCH || r == -ENOENT)
				return -ESRCH;
			log_read_problem(d, p, r, err);
			return r;
		} else {
			/* Locks came or went (or a new image): read it whole. */
			seg_snapshot_free(snap);
			snap = NULL;
			pass_begin(&ps, d, p);
		}
	}
	if (!streamed) {
		r = read_segment(d, p, flags, 0, NULL, NULL, &snap, err, sizeof(err));
		if (r == -ESRCH || r == -ENOENT)
			return -ESRCH;
		if (r < 0) {
			log_read_problem(d, p, r, err);
			return r;
		}
	}
	p->last_error[0] = '\0';
	if (p->created_ns && snap->header.created_ns != p->created_ns) {
		/* exec: same pid and start time, a new program with a new segment. */
		elided_learn_from(d, p, false);
		free_views(p->locks, p->nlocks);
		p->locks = NULL;
		p->nlocks = 0;
		elfsym_maps_free(p->maps);
		p->maps = NULL;
		p->override = POLICY_MODE_UNSET;
		p->lock_overrides = false;
		p->control_valid = false;
		p->last_sample_ns = 0;
		p->history_len = p->history_next = 0;
		p->wait_total_known = false;
		per_sec = 0;
		read_identity(p);
		/* The new image's owner before anything is chosen for it (a
		 * setuid exec keeps the pid): rules, hints and names are the
		 * owner's, never the former one's. */
		if (snap->process_uid != (uid_t)-1 && snap->process_uid != p->uid)
			owner_changed(d, p, snap->process_uid);
		else if (snap->process_uid == (uid_t)-1 && check_owner(d, p, true) == -ESRCH) {
			seg_snapshot_free(snap);
			return -ESRCH;
		}
		decide(d, p);
		elided_learning_adopt(d, p);
		log_debug("pid %d exec'd %s, policy %s", (int)p->pid, tracked_process_name(p),
			 policy_mode_to_string(effective_process_mode(p)));
	}
	p->created_ns = snap->header.created_ns;
	if (snap->process_uid != (uid_t)-1 && snap->process_uid != p->uid)
		owner_changed(d, p, snap->process_uid);
	if (snap->nskipped_locks && !p->warned_skipped) {
		log_uid(&d->ratelimit, p->uid, LOG_WARNING, "pid %d: only the first %u of its %u lock entries are followed",
			(int)p->pid, ELIDED_MAX_LOCKS_PER_PROCESS, snap->header.lock_high_water);
		p->warned_skipped = true;
	}
	if (snap->nbad_locks && !p->warned_bad) {
		log_uid(&d->ratelimit, p->uid, LOG_WARNING, "%s: %u lock entries are invalid and ignored, first %s",
			p->seg_name, snap->nbad_locks, snap->first_bad);
		p->warned_bad = true;
	}
	p->elision = snap->header.elision;
	p->mode = snap->header.mode;
	p->sample = snap->header.sample;
	wait_per_sec = wait_rate(p, &snap->header, per_sec);
	/* NUL-terminated (checked by the reader); copied only when it changed. */
	if (strcmp(p->status_reason, snap->header.status_reason))
		memcpy(p->status_reason, snap->header.status_reason, sizeof(p->status_reason));
	r = streamed ? 0 : merge_locks(p, snap, per_sec);
	if (r == 0) {
		if (!streamed) {
			if (!p->last_sample_ns)
				restore_decisions(p, snap);
			pass_begin(&ps, d, p);
			for (size_t i = 0; i < p->nlocks; i++)
				pass_lock(&ps, &p->locks[i]);
		}
		p->last_sample_ns = t;
		ps.sum.wait_per_sec = wait_per_sec;
		pass_end(&ps, t, dt > 0);
		if (marked_pass) {
			p->walk_views |= ps.daemon_off;
		} else {
			p->walk_views = ps.daemon_off;
			collect_moving(p);
		}
	} else {
		p->walk_views = true;
	}
	p->dirty_tracking = seg_map_tracks_dirty(p->map, snap);
	seg_peek_of(snap, &p->last_peek);
	p->peek_valid = true;
	if (flags & SEG_READ_CHECK_PROCESS)
		p->check_next = false;
	seg_snapshot_free(snap);
	/* New locks: names from the cache now, the rest when a child answers. */
	if (r == 0 && p->sym_pending)
		elided_symbolize(d, p);
	return r;
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

/* ---- counters on request --------------------------------------------- */

int elided_read_lock_totals(struct elided *d, struct tracked_process *p, struct lock_totals **ret, size_t *n,
			    char *err, size_t errlen)
{
	struct seg_snapshot *snap = NULL;
	struct lock_totals *out;
	size_t nout = 0, j = 0;
	int r;

	*ret = NULL;
	*n = 0;
	r = seg_read_max(d->runtime_dirfd, p->seg_name, 0, ELIDED_MAX_LOCKS_PER_PROCESS, &snap, err, errlen);
	if (r < 0)
		return r;
	out = calloc(p->nlocks ? p->nlocks : 1, sizeof(*out));
	if (!out) {
		seg_snapshot_free(snap);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* A new image since the last interval: none of the views is its. */
	if (snap->header.created_ns != p->created_ns)
		goto done;
	/* Both in entry-index order: one merge. */
	for (size_t i = 0; i < p->nlocks; i++) {
		const struct lock_view *v = &p->locks[i];

		while (j < snap->nlocks && snap->locks[j].index < v->index)
			j++;
		if (j == snap->nlocks)
			break;
		if (!view_is_of(v, snap->locks[j].index, &snap->locks[j].lock))
			continue;
		out[nout].view = v;
		memcpy(out[nout].stats, snap->locks[j].lock.stats, sizeof(out[nout].stats));
		if (snap->header.features & ELIDE_SEG_FEATURE_WATCH) {
			const struct elide_seg_lock *e = &snap->locks[j].lock;

			out[nout].wait_ns = e->wait_ns;
			out[nout].wait_max_ns = e->wait_max_ns;
			out[nout].hold_ns = e->hold_ns;
			out[nout].hold_samples = e->hold_samples;
			out[nout].hold_long = e->hold_long;
		}
		nout++;
	}
done:
	seg_snapshot_free(snap);
	*ret = out;
	*n = nout;
	return 0;
}

/* ---- owner, on request ------------------------------------------------ */

int elided_check_owner(struct elided *d, struct tracked_process *p)
{
	int r = check_owner(d, p, true);

	/* Push the decisions without the dropped overrides now: a daemon
	 * restarted before the next interval must not restore them. */
	if (r > 0)
		refresh_process(d, p);
	return r < 0 ? r : 0;
}

/* ---- overrides ------------------------------------------------------- */

/* Does view v answer to `lock`: its name, "#INDEX" or "0xADDRESS"? */
static bool lock_matches(const struct lock_view *v, const char *lock)
{
	char buf[32];

	if (!strcmp(lock_name(v->nm), lock))
		return true;
	snprintf(buf, sizeof(buf), "#%u", v->index);
	if (!strcmp(buf, lock))
		return true;
	snprintf(buf, sizeof(buf), "0x%" PRIx64, v->addr);
	return !strcmp(buf, lock);
}

/* Set (or with UNSET clear) the override of every entry that answers to
 * `lock`: an rwlock has two, its read and its write side. */
static int override_locks(struct tracked_process *p, const char *lock, enum policy_mode mode)
{
	int n = 0;

	for (size_t i = 0; i < p->nlocks; i++) {
		if (p->locks[i].kind == ELIDE_SEG_KIND_OVERFLOW || !lock_matches(&p->locks[i], lock))
			continue;
		p->locks[i].override = (uint8_t)mode;
		n++;
	}
	p->walk_views = true;
	if (n && mode != POLICY_MODE_UNSET)
		p->lock_overrides = true;
	return n;
}

/* elidectl set or reset, logged with who asked. */
static void override_event(struct elided *d, const struct tracked_process *p, const char *lock,
			   enum policy_mode mode, uid_t caller)
{
	struct elided_event ev = process_event(p, mode == POLICY_MODE_UNSET ? ELIDED_EVENT_OVERRIDE_RESET :
									  ELIDED_EVENT_OVERRIDE);

	ev.lock = lock;
	ev.mode = decision_mode_name(mode);
	ev.source = "override";
	ev.caller_uid = caller;
	ev.reason = mode == POLICY_MODE_UNSET ? "runtime override dropped" : "set at runtime";
	if (mode == POLICY_MODE_UNSET)
		elided_event(d, &ev, "pid %d (%s): %s%s reset to the configured policy by uid %u", (int)p->pid,
			     ev.exe, lock ? "lock " : "runtime policy", lock ? lock : "", (unsigned)caller);
	else
		elided_event(d, &ev, "pid %d (%s): %s%s set to %s at runtime by uid %u", (int)p->pid, ev.exe,
			     lock ? "lock " : "mode", lock ? lock : "", ev.mode, (unsigned)caller);
}

int elided_set_override(struct elided *d, struct tracked_process *p, const char *lock, enum policy_mode mode,
			uid_t caller, char *err, size_t errlen)
{
	if (mode == POLICY_MODE_UNSET) {
		snprintf(err, errlen, "invalid mode");
		return -EINVAL;
	}
	if (!lock) {
		p->override = mode;
		/* Every lock's decision depends on the process's mode (off
		 * takes them all back): every view is visited. */
		p->walk_views = true;
	} else if (override_locks(p, lock, mode) == 0) {
		snprintf(err, errlen, "pid %d has no lock named '%s'", (int)p->pid, lock);
		return -ENOENT;
	}
	override_event(d, p, lock, mode, caller);
	/* Push now rather than at the next interval. */
	refresh_process(d, p);
	return 0;
}

int elided_reset_override(struct elided *d, struct tracked_process *p, const char *lock, uid_t caller, char *err,
			  size_t errlen)
{
	if (!lock) {
		p->override = POLICY_MODE_UNSET;
		for (size_t i = 0; i < p->nlocks; i++)
			p->locks[i].override = POLICY_MODE_UNSET;
		p->lock_overrides = false;
		p->walk_views = true;
	} else if (override_locks(p, lock, POLICY_MODE_UNSET) == 0) {
		snprintf(err, errlen, "pid %d has no lock named '%s'", (int)p->pid, lock);
		return -ENOENT;
	}
	override_event(d, p, lock, POLICY_MODE_UNSET, caller);
	refresh_process(d, p);
	return 0;
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
