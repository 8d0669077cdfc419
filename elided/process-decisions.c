/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Writing decisions: the pass over a process's locks (history sums, one
 * decision per lock by decide_lock(), written into its entry when it
 * changed), the control block at the pass's end, the events they make,
 * decisions a restarted daemon finds in a segment, and the runtime
 * overrides of elidectl.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "decide-lock.h"
#include "elide.h"
#include "elided.h"
#include "events.h"
#include "log.h"
#include "process-internal.h"

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

/* A segment gone (the process exited) or replaced (it exec'd) while we
 * wrote: an ordinary race, not worth a warning.  Anything else is. */
static int write_problem_priority(int r)
{
	return r == -ENOENT || r == -ESRCH || r == -ESTALE ? LOG_DEBUG : LOG_WARNING;
}

void pass_begin(struct pass *ps, struct elided *d, struct tracked_process *p)
{
	memset(ps, 0, sizeof(*ps));
	ps->d = d;
	ps->p = p;
	ps->mode = effective_process_mode(p);
}

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

/* "off", "on", "adaptive", or "default" for no decision of its own. */
static const char *decision_mode_name(enum policy_mode m)
{
	return m == POLICY_MODE_UNSET ? "default" : policy_mode_to_string(m);
}

struct elided_event process_event(const struct tracked_process *p, enum elided_event_kind kind)
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

/* The part of v that decide_lock() carries from one interval to the next. */
static struct lock_decide_state view_decide_state(const struct lock_view *v)
{
	return (struct lock_decide_state){
		.window_aborts = v->window_aborts,
		.window_attempts = v->window_attempts,
		.backoff_intervals = v->backoff_intervals,
		.backoff_left = v->backoff_left,
		.daemon_off = v->daemon_off,
		.learned = v->learned,
	};
}

static void view_store_decide_state(struct lock_view *v, const struct lock_decide_state *st)
{
	v->window_aborts = st->window_aborts;
	v->window_attempts = st->window_attempts;
	v->backoff_intervals = st->backoff_intervals;
	v->backoff_left = st->backoff_left;
	v->daemon_off = st->daemon_off;
	v->learned = st->learned;
}

/* One lock, while its view is in cache anyway. */
void pass_lock(struct pass *ps, struct lock_view *v)
{
	struct tracked_process *p = ps->p;
	struct lock_decide_input in;
	struct lock_decide_state st;
	struct lock_decision dec;
	char err[SEG_ERR_MAX];
	int r;

	ps->sum.acquired_per_sec += v->rates[LOCK_RATE_ACQUIRED];
	ps->sum.attempts_per_sec += v->rates[LOCK_RATE_ATTEMPTS];
	ps->sum.commits_per_sec += v->rates[LOCK_RATE_COMMITS];
	ps->sum.aborts_per_sec += v->rates[LOCK_RATE_ABORTS];
	ps->sum.cycles_lost_per_sec += v->rates[LOCK_RATE_CYCLES_LOST];
	/* Once per pass: a pass that reads again after a partial read (locks
	 * came or went) must not count a back-off interval twice.  The
	 * overflow entry stands for many locks: none is decided for. */
	if (v->kind == ELIDE_SEG_KIND_OVERFLOW || v->decided_in == (uint32_t)p->refreshes)
		return;
	v->decided_in = (uint32_t)p->refreshes;
	/* Names are cold: match rules only when the lock or the policy is new. */
	if (p->rules_dirty || v->rule_stale) {
		v->rule_mode = (uint8_t)config_lock_mode(&p->decision, lock_name(v->nm), lock_function(v->nm));
		v->rule_stale = false;
	}
	in = (struct lock_decide_input){
		.process_mode = ps->mode,
		.rule_mode = (enum policy_mode)v->rule_mode,
		.override = (enum policy_mode)v->override,
		.ctl_policy = v->ctl_policy,
		.ctl_source = v->ctl_source,
		/* The hints are looked through only while decide_lock() reads
		 * them: once per new view (or after a change of owner). */
		.hinted_never = (v->learned == VIEW_LEARNED_UNCHECKED || v->learned == VIEW_LEARNED_FOREIGN) &&
				p->nhints && elided_learned_hint_of(p, v) >= 0,
		.min_aborts = p->decision.knobs.min_aborts,
		.max_abort_ratio = p->decision.knobs.max_abort_ratio,
	};
	st = view_decide_state(v);
	dec = decide_lock(&in, &st);
	view_store_decide_state(v, &st);
	/* Its back-off counts intervals: every pass must visit it. */
	ps->daemon_off |= v->daemon_off;
	if (!dec.changed || !pass_may_write(ps))
		return;
	r = seg_write_lock_policy(ps->d->runtime_dirfd, p->seg_name, v->index, dec.ctl_policy, dec.source, err,
				  sizeof(err));
	if (r < 0) {
		snprintf(p->last_error, sizeof(p->last_error), "%s", err);
		log_uid(&ps->d->ratelimit, p->uid, write_problem_priority(r), "pid %d: cannot write a lock decision: %s",
			(int)p->pid, err);
		return;
	}
	ps->locks_written++;
	lock_decision_event(ps->d, p, v, dec.mode, dec.source, v->ctl_source);
	v->ctl_policy = (uint8_t)dec.ctl_policy;
	v->ctl_source = (uint8_t)dec.source;
}

/* After the walk: the history point and the process's control block. */
void pass_end(struct pass *ps, uint64_t t, bool history)
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

/*
 * The first read of a process this daemon instance sees: decisions an
 * earlier instance made at runtime live on in the segment (marked by their
 * source), so a restarted daemon keeps them instead of reverting to the
 * configuration.
 */
void restore_decisions(struct tracked_process *p, const struct seg_snapshot *snap)
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
