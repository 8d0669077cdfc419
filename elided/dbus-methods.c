/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The methods of org.elide.Manager1 (dbus.c lists them), run from the
 * callers' queues (dbus-queue.c) with the caller's uid known: what a
 * caller may see and change, and the replies, strings made valid for the
 * bus.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "dbus.h"
#include "dbus-internal.h"
#include "discovery.h"
#include "elided.h"
#include "learned.h"
#include "macros.h"

static const struct {
	const char *name;
	enum elide_seg_stat stat;
} abort_causes[] = {
	{ "conflict", ELIDE_SEG_STAT_ABORT_CONFLICT },
	{ "capacity", ELIDE_SEG_STAT_ABORT_CAPACITY },
	{ "busy", ELIDE_SEG_STAT_ABORT_BUSY },
	{ "explicit", ELIDE_SEG_STAT_ABORT_EXPLICIT },
	{ "retry", ELIDE_SEG_STAT_ABORT_RETRY },
	{ "debug", ELIDE_SEG_STAT_ABORT_DEBUG },
	{ "nested", ELIDE_SEG_STAT_ABORT_NESTED },
	{ "other", ELIDE_SEG_STAT_ABORT_OTHER },
};

bool elided_bus_may_access(uid_t caller, uid_t owner)
{
	if (caller == (uid_t)-1)
		return false;
	return caller == 0 || caller == owner;
}

/* ---- strings ----------------------------------------------------------- */

/*
 * Length of the UTF-8 sequence at s as sd-bus accepts it (no overlong forms,
 * surrogates, non-characters or code points past U+10FFFF), 0 if invalid.
 */
static size_t utf8_sequence_len(const unsigned char *s)
{
	uint32_t c;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		c = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		c = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		c = s[0] & 0x07;
	} else
		return 0;

	/* A NUL fails this test too, so we never read past the string. */
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}

	if ((n == 2 && c < 0x80) || (n == 3 && c < 0x800) || (n == 4 && c < 0x10000))
		return 0;
	if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	if ((c >= 0xfdd0 && c <= 0xfdef) || (c & 0xfffe) == 0xfffe)
		return 0;
	return n;
}

/*
 * D-Bus strings must be valid UTF-8, or sd-bus refuses to build the whole
 * reply, and segment strings come from unprivileged processes: one odd comm
 * must not break ListProcesses for everybody.  Returns s when it is valid,
 * else a copy in buf with every stray byte replaced by '?' (truncated to
 * size - 1 bytes).
 */
const char *bus_string(const char *s, char *buf, size_t size)
{
	const unsigned char *u;
	size_t n, len = 0;

	if (!s)
		return "";
	for (u = (const unsigned char *)s; *u; u += n) {
		n = utf8_sequence_len(u);
		if (n == 0)
			break;
	}
	if (!*u)
		return s;

	if (size == 0)
		return "";
	for (u = (const unsigned char *)s; *u; u += n) {
		n = utf8_sequence_len(u);
		if (n == 0) {
			if (len + 1 >= size)
				break;
			buf[len++] = '?';
			n = 1;
			continue;
		}
		if (len + n >= size)
			break;
		memcpy(buf + len, u, n);
		len += n;
	}
	buf[len] = '\0';
	return buf;
}

static const char *mode_string(enum policy_mode mode)
{
	return mode == POLICY_MODE_UNSET ? "" : policy_mode_to_string(mode);
}

/* The mode a process runs with, as it last said in its segment: elided
 * never reports a decision the process has not applied (a process
 * applies one at its next lock call, or its next sampled one).  Until its
 * segment was read: the decision. */
static const char *process_mode_string(const struct tracked_process *p)
{
	if (p->mode >= ELIDE_SEG_MODE_ADAPTIVE && p->mode <= ELIDE_SEG_MODE_WATCH)
		return seg_mode_to_string(p->mode);
	return mode_string(p->override != POLICY_MODE_UNSET ? p->override : p->decision.mode);
}

/* ---- figures ----------------------------------------------------------- */

struct rates {
	double acquired, attempts, commits, aborts, cycles_lost, wait;
};

/* A process's rates over the last interval: its newest history point. */
static void process_rates(const struct tracked_process *p, struct rates *r)
{
	const struct history_point *h;

	if (!p->history_len)
		return;
	h = &p->history[(p->history_next + ELIDED_HISTORY - 1) % ELIDED_HISTORY];
	r->acquired += h->acquired_per_sec;
	r->attempts += h->attempts_per_sec;
	r->commits += h->commits_per_sec;
	r->aborts += h->aborts_per_sec;
	r->cycles_lost += h->cycles_lost_per_sec;
	r->wait += h->wait_per_sec;
}

/* Attempts are estimates when sampled, aborts exact: keep the ratio in 0..1. */
static double abort_ratio(double aborts, double attempts)
{
	if (!(aborts > 0))
		return 0;
	if (attempts < aborts)
		return 1;
	return aborts / attempts;
}

static void process_state(const struct tracked_process *p, char *buf, size_t size)
{
	if (p->elision == ELIDE_SEG_ELISION_ON)
		snprintf(buf, size, "on");
	else if (p->status_reason[0])
		snprintf(buf, size, "off: %s", p->status_reason);
	else
		snprintf(buf, size, "off");
}

/* ---- callers ----------------------------------------------------------- */

/* The sender's effective uid, as the bus daemon saw it on its socket when
 * the sender connected (GetConnectionUnixUser, never from the message):
 * every method runs from the per-uid queues, with it known. */
static int caller_uid(sd_bus_message *m, uid_t *ret, sd_bus_error *error)
{
	const struct bus_call *running = bus_running_call();

	if (!running || running->m != m) {
		sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "Permission denied: the caller's uid is not known");
		return -EACCES;
	}
	*ret = running->peer->u->uid;
	return 0;
}

/* The process `pid` if the caller may act on it, else an error in `error`;
 * the caller's uid in *ret_uid when asked. */
static int caller_process(struct elided *d, sd_bus_message *m, uint32_t pid, struct tracked_process **ret,
			  uid_t *ret_uid, sd_bus_error *error)
{
	struct tracked_process *p = NULL;
	uid_t uid;
	int r;

	r = caller_uid(m, &uid, error);
	if (r < 0)
		return r;

	if (pid > 0 && pid <= INT_MAX)
		p = elided_find_process(d, (pid_t)pid);
	if (!p)
		return sd_bus_error_setf(error, ELIDED_ERROR_NO_SUCH_PROCESS, "No libelide process with PID %" PRIu32,
					 pid);
	/* Its owner now, not at adoption. */
	r = elided_check_owner(d, p);
	if (r == -ESRCH)
		return sd_bus_error_setf(error, ELIDED_ERROR_NO_SUCH_PROCESS, "Process %" PRIu32 " has exited", pid);
	if (r < 0)
		return sd_bus_error_set_errnof(error, r, "Cannot determine the owner of process %" PRIu32 ": %m", pid);
	if (!elided_bus_may_access(uid, p->uid))
		return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
					 "Permission denied: process %" PRIu32 " belongs to another user", pid);

	*ret = p;
	if (ret_uid)
		*ret_uid = uid;
	return 0;
}

/* ---- reading methods --------------------------------------------------- */

int method_get_status(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;
	struct rates t = {};
	uint32_t n = 0, eliding = 0;
	char summary[512], buf[sizeof(summary)];

	for (const struct tracked_process *p = d->processes; p; p = p->next) {
		n++;
		if (p->elision == ELIDE_SEG_ELISION_ON)
			eliding++;
		process_rates(p, &t);
	}
	elided_status_line(d, summary, sizeof(summary));

	return sd_bus_reply_method_return(m, "suuddd", bus_string(summary, buf, sizeof(buf)), n, eliding,
					  t.commits, t.aborts, t.cycles_lost);
}

/* A method reply that is one array of CONTENTS: open it... */
static int array_reply_begin(sd_bus_message *m, const char *contents, sd_bus_message **ret)
{
	int r;

	r = sd_bus_message_new_method_return(m, ret);
	if (r < 0)
		return r;
	return sd_bus_message_open_container(*ret, 'a', contents);
}

/* ...and close and send it. */
static int array_reply_send(sd_bus_message *reply)
{
	int r;

	r = sd_bus_message_close_container(reply);
	if (r < 0)
		return r;
	return sd_bus_send(NULL, reply, NULL);
}

/*
 * Before listing for a non-root caller: the owner now of every process the
 * cache says is the caller's (one that became someone else's is left out).
 * Root sees everything anyway.
 */
static void check_owners_for(struct elided *d, uid_t caller)
{
	if (caller == 0)
		return;
	for (struct tracked_process *p = d->processes; p; p = p->next)
		if (p->uid == caller)
			(void)elided_check_owner(d, p);
}

int method_list_processes(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct elided *d = userdata;
	uid_t uid;
	int r;

	r = caller_uid(m, &uid, error);
	if (r < 0)
		return r;
	check_owners_for(d, uid);

	r = array_reply_begin(m, "(uusssssddddtud)", &reply);
	if (r < 0)
		return r;

	for (const struct tracked_process *p = d->processes; p; p = p->next) {
		char exe[ELIDE_SEG_EXE_MAX], comm[ELIDE_SEG_COMM_MAX], unit[sizeof(p->unit)];
		char state[ELIDE_SEG_REASON_MAX + 16], state_clean[sizeof(state)];
		struct rates t = {};

		if (!elided_bus_may_access(uid, p->uid))
			continue;

		process_rates(p, &t);
		process_state(p, state, sizeof(state));
		r = sd_bus_message_append(reply, "(uusssssddddtud)",
					  (uint32_t)p->pid, (uint32_t)p->uid,
					  bus_string(p->exe, exe, sizeof(exe)),
					  bus_string(p->comm, comm, sizeof(comm)),
					  bus_string(p->unit, unit, sizeof(unit)),
					  process_mode_string(p),
					  bus_string(state, state_clean, sizeof(state_clean)),
					  t.acquired, t.commits, abort_ratio(t.aborts, t.attempts), t.cycles_lost,
					  p->start_time, (uint32_t)p->nlocks, t.wait);
		if (r < 0)
			return r;
	}

	return array_reply_send(reply);
}

/* The futexwatch BPF observer's view: programs without libelide. */
int method_list_observed_locks(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_free_ struct observed_lock *locks = NULL;
	struct elided *d = userdata;
	size_t n = 0;
	uid_t uid;
	int r;

	r = caller_uid(m, &uid, error);
	if (r < 0)
		return r;
	r = elided_observed_locks(d, uid, &locks, &n);
	if (r == -EOPNOTSUPP)
		return sd_bus_error_setf(error, ELIDED_ERROR_NOT_OBSERVING,
					 "Lock waits of programs without libelide are not observed: %s",
					 elided_futexwatch_state(d));
	if (r < 0)
		return sd_bus_error_set_errno(error, r);
	r = array_reply_begin(m, "(uutssstttts)", &reply);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		const struct observed_lock *o = &locks[i];
		char comm[sizeof(o->comm)], exe[sizeof(o->exe)], where[sizeof(o->where)], name[sizeof(o->name)];

		r = sd_bus_message_append(reply, "(uutssstttts)", (uint32_t)o->pid, (uint32_t)o->uid, o->start_time,
					  bus_string(o->comm, comm, sizeof(comm)), bus_string(o->exe, exe, sizeof(exe)),
					  bus_string(o->where, where, sizeof(where)), o->uaddr, o->waits, o->wait_ns,
					  o->wait_max_ns, bus_string(o->name, name, sizeof(name)));
		if (r < 0)
			return r;
	}
	return array_reply_send(reply);
}

int method_list_no_segment(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	const struct discovery_no_segment_proc *procs = NULL;
	struct elided *d = userdata;
	size_t n = 0;
	uid_t uid;
	int r;

	r = caller_uid(m, &uid, error);
	if (r < 0)
		return r;
	r = array_reply_begin(m, "(uuts)", &reply);
	if (r < 0)
		return r;
	if (d->discovery)
		n = discovery_no_segment_list(d->discovery, &procs);
	for (size_t i = 0; i < n; i++) {
		char comm[sizeof(procs[i].comm)];

		if (!elided_bus_may_access(uid, procs[i].uid))
			continue;
		r = sd_bus_message_append(reply, "(uuts)", (uint32_t)procs[i].pid, (uint32_t)procs[i].uid,
					  procs[i].start_time, bus_string(procs[i].comm, comm, sizeof(comm)));
		if (r < 0)
			return r;
	}
	return array_reply_send(reply);
}

static int append_lock(sd_bus_message *reply, const struct lock_totals *t)
{
	const struct lock_view *l = t->view;
	char name[ELIDED_LOCK_NAME_MAX], function[ELIDED_LOCK_NAME_MAX], callsite[ELIDED_CALLSITE_TEXT_MAX];
	int r;

	r = sd_bus_message_open_container(reply, 'r', "ussssttttta{st}tdddsss");
	if (r < 0)
		return r;

	r = sd_bus_message_append(reply, "ussssttttt",
				  l->index, seg_kind_to_string(l->kind),
				  bus_string(lock_name(l->nm), name, sizeof(name)),
				  bus_string(lock_function(l->nm), function, sizeof(function)),
				  bus_string(lock_callsite(l->nm), callsite, sizeof(callsite)),
				  t->stats[ELIDE_SEG_STAT_ACQUIRED], t->stats[ELIDE_SEG_STAT_ATTEMPTS],
				  t->stats[ELIDE_SEG_STAT_COMMITS], t->stats[ELIDE_SEG_STAT_FALLBACKS],
				  t->stats[ELIDE_SEG_STAT_CONTENDED]);
	if (r < 0)
		return r;

	r = sd_bus_message_open_container(reply, 'a', "{st}");
	if (r < 0)
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(abort_causes); i++) {
		r = sd_bus_message_append(reply, "{st}", abort_causes[i].name, t->stats[abort_causes[i].stat]);
		if (r < 0)
			return r;
	}
	/* Contention figures go in the same dictionary of named counters: a
	 * client that does not know a name skips it. */
	r = sd_bus_message_append(reply, "{st}{st}{st}{st}{st}", "wait_ns", t->wait_ns, "wait_max_ns", t->wait_max_ns,
				  "hold_ns", t->hold_ns, "hold_samples", t->hold_samples, "hold_long", t->hold_long);
	if (r < 0)
		return r;
	r = sd_bus_message_close_container(reply);
	if (r < 0)
		return r;

	r = sd_bus_message_append(reply, "tdddsss",
				  t->stats[ELIDE_SEG_STAT_CYCLES_LOST],
				  (double)l->rates[LOCK_RATE_ACQUIRED], (double)l->rates[LOCK_RATE_COMMITS],
				  abort_ratio(l->rates[LOCK_RATE_ABORTS], l->rates[LOCK_RATE_ATTEMPTS]),
				  seg_state_to_string(l->state), seg_reason_to_string(l->reason),
				  mode_string((enum policy_mode)l->override));
	if (r < 0)
		return r;

	return sd_bus_message_close_container(reply);
}

/*
 * Per program: the caller's processes grouped by executable, their rates
 * summed.  Quadratic in the number of programs, which is small.
 */
int method_list_programs(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct elided *d = userdata;
	uid_t uid;
	int r;

	r = caller_uid(m, &uid, error);
	if (r < 0)
		return r;
	check_owners_for(d, uid);
	r = array_reply_begin(m, "(suuddddd)", &reply);
	if (r < 0)
		return r;

	for (const struct tracked_process *p = d->processes; p; p = p->next) {
		char exe[ELIDE_SEG_EXE_MAX];
		struct rates t = {};
		uint32_t nprocs = 0, nlocks = 0;
		bool first = true;

		if (!elided_bus_may_access(uid, p->uid))
			continue;
		/* Reported once, at its first accessible process. */
		for (const struct tracked_process *q = d->processes; q != p; q = q->next)
			if (elided_bus_may_access(uid, q->uid) && !strcmp(q->exe, p->exe))
				first = false;
		if (!first)
			continue;
		for (const struct tracked_process *q = p; q; q = q->next) {
			if (!elided_bus_may_access(uid, q->uid) || strcmp(q->exe, p->exe))
				continue;
			process_rates(q, &t);
			nprocs++;
			nlocks += (uint32_t)q->nlocks;
		}
		r = sd_bus_message_append(reply, "(suuddddd)", bus_string(p->exe, exe, sizeof(exe)), nprocs, nlocks,
					  t.acquired, t.commits, t.aborts, abort_ratio(t.aborts, t.attempts),
					  t.cycles_lost);
		if (r < 0)
			return r;
	}
	return array_reply_send(reply);
}

int method_get_locks(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_free_ struct lock_totals *totals = NULL;
	struct elided *d = userdata;
	char err[SEG_ERR_MAX];
	size_t n;
	struct tracked_process *p;
	uint32_t pid;
	int r;

	r = sd_bus_message_read(m, "u", &pid);
	if (r < 0)
		return r;
	r = caller_process(d, m, pid, &p, NULL, error);
	if (r < 0)
		return r;

	/* Counters as of now, from the segment; rates as of the last interval. */
	r = elided_read_lock_totals(d, p, &totals, &n, err, sizeof(err));
	if (r == -ESRCH || r == -ENOENT)
		return sd_bus_error_setf(error, ELIDED_ERROR_NO_SUCH_PROCESS, "Process %" PRIu32 " has exited", pid);
	if (r < 0)
		return sd_bus_error_setf(error, ELIDED_ERROR_FAILED, "Cannot read the locks of process %" PRIu32 ": %s",
					 pid, err);

	r = array_reply_begin(m, "(ussssttttta{st}tdddsss)", &reply);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		r = append_lock(reply, &totals[i]);
		if (r < 0)
			return r;
	}
	return array_reply_send(reply);
}

int method_get_history(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct elided *d = userdata;
	struct tracked_process *p;
	size_t len, next;
	uint32_t pid;
	int r;

	r = sd_bus_message_read(m, "u", &pid);
	if (r < 0)
		return r;
	r = caller_process(d, m, pid, &p, NULL, error);
	if (r < 0)
		return r;

	r = array_reply_begin(m, "(tddddd)", &reply);
	if (r < 0)
		return r;

	/* A ring: history_next is the slot written next, so the oldest is len back from it. */
	len = p->history_len < ELIDED_HISTORY ? p->history_len : ELIDED_HISTORY;
	next = p->history_next % ELIDED_HISTORY;
	for (size_t i = 0; i < len; i++) {
		const struct history_point *h = &p->history[(next + ELIDED_HISTORY - len + i) % ELIDED_HISTORY];

		r = sd_bus_message_append(reply, "(tddddd)", h->time_ns, h->acquired_per_sec, h->commits_per_sec,
					  h->aborts_per_sec, h->cycles_lost_per_sec, h->wait_per_sec);
		if (r < 0)
			return r;
	}

	return array_reply_send(reply);
}

static const char *verdict_string(enum learned_verdict v)
{
	return v == LEARNED_NEVER ? "never" : v == LEARNED_ELIDES ? "elides" : "unknown";
}

int method_get_learned(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct elided *d = userdata;
	struct tracked_process *p;
	uint32_t pid;
	int r;

	r = sd_bus_message_read(m, "u", &pid);
	if (r < 0)
		return r;
	r = caller_process(d, m, pid, &p, NULL, error);
	if (r < 0)
		return r;

	r = array_reply_begin(m, "(usx)", &reply);
	if (r < 0)
		return r;
	for (size_t i = 0; i < p->nlocks; i++) {
		int64_t since = elided_learned_since(p, &p->locks[i]);

		if (since < 0)
			continue;
		/* Only "never" turns a lock off; "elides" leaves it to adapt. */
		r = sd_bus_message_append(reply, "(usx)", p->locks[i].index, verdict_string(LEARNED_NEVER), since);
		if (r < 0)
			return r;
	}
	return array_reply_send(reply);
}

struct list_learned_walk {
	sd_bus_message *reply;
	uid_t caller;
};

static int append_learned(uid_t uid, const char *program, const char *lock, const struct learned_entry *e,
			  void *userdata)
{
	struct list_learned_walk *w = userdata;
	char program_buf[LEARNED_STR_MAX + 1], lock_buf[LEARNED_STR_MAX + 1];
	uint64_t aborts = 0;
	int r;

	if (!elided_bus_may_access(w->caller, uid))
		return 0;
	for (size_t i = 0; i < LEARNED_ABORT_CAUSES; i++)
		aborts = aborts > UINT64_MAX - e->aborts[i] ? UINT64_MAX : aborts + e->aborts[i];
	/* Identities hold any bytes (a path): made valid UTF-8 as segment strings are. */
	r = sd_bus_message_append(w->reply, "(usssuttttxx)", (uint32_t)uid,
				  bus_string(program, program_buf, sizeof(program_buf)),
				  bus_string(lock, lock_buf, sizeof(lock_buf)), verdict_string(e->verdict), e->runs,
				  e->acquired, e->attempts, e->commits, aborts, e->first_learned, e->last_updated);
	/* Nonzero stops the walk: only an error may. */
	return r < 0 ? r : 0;
}

int method_list_learned(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct elided *d = userdata;
	struct list_learned_walk w;
	uid_t uid;
	int r;

	r = caller_uid(m, &uid, error);
	if (r < 0)
		return r;
	r = array_reply_begin(m, "(usssuttttxx)", &reply);
	if (r < 0)
		return r;
	if (d->learned) {
		w = (struct list_learned_walk){ .reply = reply, .caller = uid };
		r = learned_store_foreach(d->learned, append_learned, &w);
		if (r < 0)
			return r;
	}
	return array_reply_send(reply);
}

/* ---- changing methods -------------------------------------------------- */

int method_forget_learned(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;
	const char *exe;
	size_t count = 0;
	uid_t uid;
	int r;

	r = sd_bus_message_read(m, "s", &exe);
	if (r < 0)
		return r;
	r = caller_uid(m, &uid, error);
	if (r < 0)
		return r;

	/* A user forgets what their own processes taught, never another's. */
	r = elided_forget_learned(d, uid == 0 ? LEARNED_ANY_UID : uid, exe, &count);
	if (r < 0)
		return sd_bus_error_setf(error, ELIDED_ERROR_FAILED, "Cannot forget learned decisions: %s",
					 strerror(-r));
	if (count > UINT32_MAX)
		count = UINT32_MAX;
	return sd_bus_reply_method_return(m, "u", (uint32_t)count);
}

/* Set (mode_name != NULL) or drop an override on a process (lock == NULL) or one of its locks. */
static int change_override(sd_bus_message *m, struct elided *d, uint32_t pid, const char *lock,
			   const char *mode_name, sd_bus_error *error)
{
	enum policy_mode mode = POLICY_MODE_UNSET;
	struct tracked_process *p;
	char err[256] = "", buf[sizeof(err)];
	uid_t caller;
	int r;

	if (mode_name && (policy_mode_from_string(mode_name, &mode) < 0 || mode == POLICY_MODE_UNSET)) {
		char shown[64];

		return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
					 "Invalid mode '%s': expected adaptive, on, off or watch",
					 bus_string(mode_name, shown, sizeof(shown)));
	}

	r = caller_process(d, m, pid, &p, &caller, error);
	if (r < 0)
		return r;

	if (mode_name)
		r = elided_set_override(d, p, lock, mode, caller, err, sizeof(err));
	else
		r = elided_reset_override(d, p, lock, caller, err, sizeof(err));
	/* p may be gone now: a refresh that finds the process dead drops it. */
	if (r >= 0)
		return sd_bus_reply_method_return(m, NULL);

	switch (r) {
	case -ENOENT:
		if (err[0])
			return sd_bus_error_setf(error, ELIDED_ERROR_NO_SUCH_LOCK, "%s",
						 bus_string(err, buf, sizeof(buf)));
		return sd_bus_error_setf(error, ELIDED_ERROR_NO_SUCH_LOCK, "Process %" PRIu32 " has no lock named '%s'",
					 pid, bus_string(lock, buf, sizeof(buf)));
	case -EPERM:
	case -EACCES:
		return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "Permission denied: %s",
					 err[0] ? bus_string(err, buf, sizeof(buf)) : strerror(-r));
	default:
		return sd_bus_error_setf(error, ELIDED_ERROR_FAILED, "%s",
					 err[0] ? bus_string(err, buf, sizeof(buf)) : strerror(-r));
	}
}

int method_set_process_mode(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *mode;
	uint32_t pid;
	int r;

	r = sd_bus_message_read(m, "us", &pid, &mode);
	if (r < 0)
		return r;
	return change_override(m, userdata, pid, NULL, mode, error);
}

int method_reset_process(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	uint32_t pid;
	int r;

	r = sd_bus_message_read(m, "u", &pid);
	if (r < 0)
		return r;
	return change_override(m, userdata, pid, NULL, NULL, error);
}

int method_set_lock_mode(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *lock, *mode;
	uint32_t pid;
	int r;

	r = sd_bus_message_read(m, "uss", &pid, &lock, &mode);
	if (r < 0)
		return r;
	return change_override(m, userdata, pid, lock, mode, error);
}

int method_reset_lock(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *lock;
	uint32_t pid;
	int r;

	r = sd_bus_message_read(m, "us", &pid, &lock);
	if (r < 0)
		return r;
	return change_override(m, userdata, pid, lock, NULL, error);
}

int method_reload(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;
	char err[CONFIG_ERR_MAX] = "", buf[sizeof(err)];
	uid_t uid;
	int r;

	r = caller_uid(m, &uid, error);
	if (r < 0)
		return r;
	if (uid != 0)
		return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "Permission denied: only root may reload");

	r = elided_reload(d, err, sizeof(err));
	if (r < 0)
		return sd_bus_error_setf(error, ELIDED_ERROR_RELOAD_FAILED, "%s",
					 err[0] ? bus_string(err, buf, sizeof(buf)) : strerror(-r));

	return sd_bus_reply_method_return(m, NULL);
}
