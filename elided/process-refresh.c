/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One interval's read of a process's segment: the whole file, the entries
 * it marked written, or a look at its header alone, merged into the
 * process's lock views (rates, cut-off windows, names of new locks), each
 * view handed to the decision pass (process-decisions.c) while it is in
 * the cache.  Everything read from a segment went through the segment
 * reader (copied and validated) first.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elfsym.h"
#include "elided.h"
#include "log.h"
#include "process-internal.h"

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

void free_views(struct lock_view *views, size_t n)
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

/*
 * Read one process's segment and act on it.  Returns -ESRCH when the
 * process is gone (the caller reaps it).
 */
int refresh_process(struct elided *d, struct tracked_process *p)
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
