/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided's D-Bus API, for elidectl.  System bus, sd-bus, attached to the
 * daemon's sd-event loop.
 *
 *   name       org.elide.elided1
 *   object     /org/elide/elided1
 *   interface  org.elide.Manager1
 *
 * Properties (readable by anyone):
 *   Version           s   elided's version
 *   DiscoveryMethod   s   discovery_describe(): "bpf (...)" or "fallback (inotify + pidfd): why"
 *   LockWaitObserver  s   the BPF observer of programs without libelide:
 *                         "on (ATTACHMENT)" or "off (why)" / "unavailable: why"
 *   RuntimeDirectory  s   where the segments are (/run/elide)
 *   ConfigFiles       as  configuration files read, in order
 *   LastReload        s   "ok at ..." or the last reload's error
 *   RtmUsable         b   whether this machine can elide at all
 *   RtmReason         s   why (not)
 *   Interval          d   seconds between aggregations
 *   NProcesses        u   libelide processes tracked
 *   What elided cannot see: segments in the runtime directory it does not
 *   track, as of its last look (every 5 intervals), and since it started:
 *   SegmentsRefused       u   invalid (garbage, not a regular file, ...)
 *   SegmentsOverCap       u   refused by daemon.max_segments_per_uid
 *   UidsAtCap             u   uids with that many processes tracked
 *   SegmentsRefusedTotal  t   files refused since start
 *   SegmentsOverCapTotal  t   files refused by the cap since start
 *   ProcessesWithoutSegment       u   exec'd with libelide, no segment (discovery.h)
 *   ProcessesWithoutSegmentTotal  t   such processes found since start
 *
 * Methods.  "mode" is "adaptive", "on" or "off"; "state" of a process is
 * "on", or "off: <reason>"; rates are per second over the last interval,
 * cumulative counters are read from the segment at the call;
 * abort ratios are aborts / attempts, 0..1.  A caller may read and change
 * only processes running under its own uid; root may do anything.
 *   GetStatus() -> (s summary, u processes, u eliding,
 *                   d commits_per_sec, d aborts_per_sec, d cycles_lost_per_sec)
 *       Totals over every tracked process.
 *   ListProcesses() -> a(uusssssddddtud) processes
 *       (pid, uid, exe, comm, unit, mode, state, acquired_per_sec,
 *        commits_per_sec, abort_ratio, cycles_lost_per_sec, start_time,
 *        nlocks); only the caller's processes unless the caller is root.
 *       mode is the one the process runs with, as its segment says: a
 *       decision (runtime override, else the configuration's) shows once
 *       the process applied it.  start_time is /proc/PID/stat field 22.
 *   ListObservedLocks() -> a(uutssstttts) locks
 *       (pid, uid, start_time, comm, exe, where, address, waits, wait_ns,
 *        wait_max_ns, name): locks of programs without libelide that the
 *       BPF observer saw threads sleep for; where "MODULE+0xOFFSET", name
 *       its symbol ("" until the symbolizer answered, or when none).
 *   ListProcessesWithoutSegment() -> a(uuts) processes
 *       (pid, uid, start_time, comm): the processes counted by
 *       ProcessesWithoutSegment (discovery.h says which), only the caller's
 *       unless the caller is root.
 *   ListPrograms() -> a(suuddddd) programs
 *       (exe, processes, locks, acquired_per_sec, commits_per_sec,
 *        aborts_per_sec, abort_ratio, cycles_lost_per_sec): the caller's
 *       processes grouped by executable, rates summed.
 *   GetLocks(u pid) -> a(ussssttttta{st}tdddsss) locks
 *       (index, kind, name, function, callsite, acquired, attempts, commits,
 *        fallbacks, contended, aborts {conflict, capacity, busy, explicit,
 *        retry, debug, nested, other}, cycles_lost, acquired_per_sec,
 *        commits_per_sec, abort_ratio, state, reason, override); counters
 *       are cumulative; override is a mode, or "" when there is none.
 *   GetHistory(u pid) -> a(tddddd) history
 *       (time_ns CLOCK_MONOTONIC, acquired_per_sec, commits_per_sec,
 *        aborts_per_sec, cycles_lost_per_sec), oldest first.
 *   SetProcessMode(u pid, s mode)
 *   ResetProcess(u pid)                      drops process and lock overrides
 *   SetLockMode(u pid, s lock, s mode)
 *   ResetLock(u pid, s lock)
 *       lock: the name shown by GetLocks, "#INDEX" or "0xADDRESS".
 *   GetLearned(u pid) -> a(usx) locks
 *       (index, verdict, since): the locks of pid that run under a decision
 *       of the learned-policy store now, index as in GetLocks; verdict
 *       "never" (never elide: the only one that turns a lock off); since:
 *       since when the verdict holds, seconds since the Epoch, 0 when not
 *       known (the decision was found in the segment after a restart).
 *       Empty when learning is off.
 *   ListLearned() -> a(usssuttttxx) entries
 *       (uid, program, lock, verdict, runs, acquired, attempts, commits,
 *        aborts, first_learned, last_updated): the learned-policy store,
 *       the caller's own uid's entries only unless the caller is root.
 *       program "path:EXE:ino=N:mtime=N"; lock "data:MODULE+0xOFF" or
 *       "call:MODULE+0xOFF"; verdict "never" or "elides"; runs: process
 *       runs that taught it; aborts: every cause together; times in
 *       seconds since the Epoch (first_learned: since when this verdict
 *       holds).  Empty when learning is off.
 *   ForgetLearned(s exe) -> u count
 *       Drops the learned entries of the executable exe (its path exactly,
 *       "" for every program): the caller's own only, root's call every
 *       uid's; the store is saved at once.  count: how many went; 0 when
 *       learning is off.
 *   Reload()                                 root only
 *   Subscribe()                              receive the signals below
 *   Unsubscribe()
 *
 * Signals, never broadcast: each goes to every subscriber (a connection
 * that called Subscribe) allowed to see the process, i.e. root and the
 * process's owner, as a unicast message.  A subscription ends with
 * Unsubscribe or when the connection leaves the bus.  When a process
 * changes owner, a subscriber that could see it only before gets
 * ProcessRemoved, one that can see it only now gets ProcessAdded.
 *   ProcessAdded(u pid, s exe)
 *   ProcessRemoved(u pid)
 *   Decision(u pid, s exe, s event, s lock, s mode, s source, s reason,
 *            s message_id, u caller_uid)
 *       a decision about the process (events.h): event lock-off, lock-on,
 *       process-mode, override, override-reset or owner-changed; lock ""
 *       for the whole process; mode off/on/adaptive/default; source
 *       adaptation, config, learned, override or owner; message_id the
 *       journal entry's MESSAGE_ID; caller_uid who asked, 4294967295 for
 *       nobody.
 *   Reloaded(b ok, s result)                 to every subscriber
 *
 * Errors:
 *   org.elide.Error.NoSuchProcess            no libelide process with that PID
 *   org.elide.Error.NoSuchLock               the process has no such lock
 *   org.elide.Error.ReloadFailed             "FILE:LINE: what"; old policy kept
 *   org.elide.Error.NotSubscribed            Unsubscribe without Subscribe
 *   org.elide.Error.Failed                   anything else
 *   org.freedesktop.DBus.Error.LimitsExceeded  too many subscriptions of one uid
 *   org.freedesktop.DBus.Error.AccessDenied  another user's process, or Reload by non-root
 *   org.freedesktop.DBus.Error.InvalidArgs   bad mode
 *
 * Authorisation is ours: the bus policy lets everyone call, and every method
 * is SD_BUS_VTABLE_UNPRIVILEGED so that sd-bus does not demand CAP_SYS_ADMIN
 * first.  The caller's uid comes from the bus daemon, never from the message.
 * The process's owner is read afresh at every call that reads or steers it
 * (elided_check_owner), not taken from what was cached at adoption: a
 * setuid exec keeps the pid.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>

#include "dbus.h"
#include "segment-names.h"
#include "events.h"
#include "discovery.h"
#include "elided.h"
#include "learned.h"
#include "log.h"
#include "macros.h"

/* So that clients get a meaningful errno from sd_bus_error_get_errno() too. */
static const sd_bus_error_map elided_error_map[] = {
	SD_BUS_ERROR_MAP(ELIDED_ERROR_NO_SUCH_PROCESS, ESRCH),
	SD_BUS_ERROR_MAP(ELIDED_ERROR_NO_SUCH_LOCK, ENOENT),
	SD_BUS_ERROR_MAP(ELIDED_ERROR_RELOAD_FAILED, EINVAL),
	SD_BUS_ERROR_MAP(ELIDED_ERROR_FAILED, EIO),
	SD_BUS_ERROR_MAP(ELIDED_ERROR_NOT_SUBSCRIBED, ENOENT),
	SD_BUS_ERROR_MAP_END
};

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

/*
 * Every method call waits in a queue of its caller's uid, and the queues
 * are served in turn, one call each (on_work()): a user who pipelines
 * thousands of calls delays another user's by one call, not by all of his.
 * Inside a uid's queue each connection has its own line, and the uid's
 * turns go to its connections in turn too: one connection's backlog delays
 * another connection of the same user by one call.  A uid's queue full
 * (ELIDED_MAX_CALLS_PER_UID), a call of a connection with fewer calls
 * waiting than the fullest one takes the place of that one's newest call,
 * which is refused as if it had come last: so every connection of the
 * user gets calls in, whatever the others pipeline.
 * A call is queued as soon as sd-bus reads it; its sender's uid is asked of
 * the bus daemon once per connection, asynchronously (a synchronous call
 * would let the whole backlog pile up behind it), and the call waits with
 * its connection ("parked") until the answer.
 */
struct bus_call {
	struct bus_call *next;
	sd_bus_message *m;
	struct bus_peer *peer;
	sd_bus_message_handler_t handler;
	uint64_t read_ns;            /* when sd-bus gave it to us */
};

/* What elided holds for one uid with a connection that called it. */
struct bus_uid {
	struct bus_uid *next;        /* every uid (bus_state.uids) */
	struct bus_uid *turn_next;   /* uids with calls queued, in turn */
	bool in_turn;
	uid_t uid;
	struct bus_peer *ring_head, *ring_tail; /* its connections with calls queued, in turn */
	size_t queued;               /* <= ELIDED_MAX_CALLS_PER_UID, all its connections' */
	size_t peers;                /* connections of this uid known to us */
	size_t subscribers;          /* <= ELIDED_MAX_SUBSCRIBERS_PER_UID (non-root) */
};

/* A connection (unique name) that called us, until it leaves the bus. */
struct bus_peer {
	struct bus_peer *hnext;      /* hash chain */
	struct bus_peer *snext;      /* subscribers (bus_state.subscribers) */
	struct elided *d;
	char *name;
	struct bus_uid *u;           /* NULL until the bus daemon said */
	sd_bus_slot *lookup;         /* GetConnectionUnixUser in flight */
	struct bus_call *parked, *parked_tail;
	size_t nparked;
	struct bus_call *head, *tail; /* its calls queued in its uid's queue */
	size_t nqueued;
	struct bus_peer *ring_next;  /* the uid's connections with calls queued */
	bool in_ring;
	bool subscribed;
};

#define BUS_PEER_BUCKETS 256u

struct bus_state {
	struct bus_peer *peers[BUS_PEER_BUCKETS];
	size_t npeers, nlookups, nparked;
	struct bus_uid *uids;
	struct bus_uid *turn_head, *turn_tail;
	struct bus_peer *subscribers;
	sd_event_source *work;       /* on_work(), on while calls are queued */
	sd_event_source *reconnect;  /* after the connection was lost */
	uint64_t backoff_usec;
	unsigned attempts;
	bool connected;              /* d->bus is open (not lost) */
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
static const char *bus_string(const char *s, char *buf, size_t size)
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

/*
 * The call being run (run_call()): every method runs from the per-uid
 * queues below, with its caller's uid already known.
 */
static const struct bus_call *running;

/* The sender's effective uid, as the bus daemon saw it on its socket when
 * the sender connected (GetConnectionUnixUser, never from the message). */
static int caller_uid(sd_bus_message *m, uid_t *ret, sd_bus_error *error)
{
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

/* ---- properties -------------------------------------------------------- */

static int property_get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
				sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
	return sd_bus_message_append(reply, "s", PACKAGE_VERSION);
}

static int property_get_discovery(sd_bus *bus, const char *path, const char *interface, const char *property,
				  sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;
	char buf[512];

	if (!d->discovery)
		return sd_bus_message_append(reply, "s", "none");
	return sd_bus_message_append(reply, "s", bus_string(discovery_describe(d->discovery), buf, sizeof(buf)));
}

static int property_get_lock_wait_observer(sd_bus *bus, const char *path, const char *interface,
					   const char *property, sd_bus_message *reply, void *userdata,
					   sd_bus_error *error)
{
	struct elided *d = userdata;
	char buf[192];

	if (d->futexwatch)
		snprintf(buf, sizeof(buf), "on (%s)", elided_futexwatch_state(d));
	else
		snprintf(buf, sizeof(buf), "%s", elided_futexwatch_state(d));
	return sd_bus_message_append(reply, "s", buf);
}

static int property_get_runtime_dir(sd_bus *bus, const char *path, const char *interface, const char *property,
				    sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;
	char buf[PATH_MAX];

	return sd_bus_message_append(reply, "s", bus_string(d->runtime_dir, buf, sizeof(buf)));
}

static int property_get_config_files(sd_bus *bus, const char *path, const char *interface, const char *property,
				     sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;
	char buf[PATH_MAX];
	int r;

	r = sd_bus_message_open_container(reply, 'a', "s");
	if (r < 0)
		return r;
	for (size_t i = 0; d->config && i < d->config->nfiles && i < CONFIG_MAX_FILES; i++) {
		r = sd_bus_message_append(reply, "s", bus_string(d->config->files[i], buf, sizeof(buf)));
		if (r < 0)
			return r;
	}
	return sd_bus_message_close_container(reply);
}

static int property_get_last_reload(sd_bus *bus, const char *path, const char *interface, const char *property,
				    sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;
	char buf[sizeof(d->last_reload)];

	return sd_bus_message_append(reply, "s", bus_string(d->last_reload, buf, sizeof(buf)));
}

static int property_get_rtm_usable(sd_bus *bus, const char *path, const char *interface, const char *property,
				   sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;

	return sd_bus_message_append(reply, "b", (int)d->rtm_usable);
}

static int property_get_rtm_reason(sd_bus *bus, const char *path, const char *interface, const char *property,
				   sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;
	char buf[sizeof(d->rtm_reason)];

	return sd_bus_message_append(reply, "s", bus_string(d->rtm_reason, buf, sizeof(buf)));
}

static int property_get_interval(sd_bus *bus, const char *path, const char *interface, const char *property,
				 sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;

	return sd_bus_message_append(reply, "d", d->config ? d->config->interval : 0.0);
}

static int property_get_unseen(sd_bus *bus, const char *path, const char *interface, const char *property,
			       sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;

	if (strcmp(property, "SegmentsRefused") == 0)
		return sd_bus_message_append(reply, "u", (uint32_t)d->unseen.refused);
	if (strcmp(property, "SegmentsOverCap") == 0)
		return sd_bus_message_append(reply, "u", (uint32_t)d->unseen.over_cap);
	if (strcmp(property, "UidsAtCap") == 0)
		return sd_bus_message_append(reply, "u", (uint32_t)d->unseen.uids_at_cap);
	if (strcmp(property, "SegmentsRefusedTotal") == 0)
		return sd_bus_message_append(reply, "t", d->unseen.refused_total);
	if (strcmp(property, "ProcessesWithoutSegment") == 0)
		return sd_bus_message_append(reply, "u", (uint32_t)d->unseen.no_segment);
	if (strcmp(property, "ProcessesWithoutSegmentTotal") == 0)
		return sd_bus_message_append(reply, "t", d->unseen.no_segment_total);
	return sd_bus_message_append(reply, "t", d->unseen.over_cap_total);
}

static int property_get_nprocesses(sd_bus *bus, const char *path, const char *interface, const char *property,
				   sd_bus_message *reply, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;

	return sd_bus_message_append(reply, "u", (uint32_t)d->nprocesses);
}

/* ---- reading methods --------------------------------------------------- */

static int method_get_status(sd_bus_message *m, void *userdata, sd_bus_error *error)
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

static int method_list_processes(sd_bus_message *m, void *userdata, sd_bus_error *error)
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
static int method_list_observed_locks(sd_bus_message *m, void *userdata, sd_bus_error *error)
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

static int method_list_no_segment(sd_bus_message *m, void *userdata, sd_bus_error *error)
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
static int method_list_programs(sd_bus_message *m, void *userdata, sd_bus_error *error)
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

static int method_get_locks(sd_bus_message *m, void *userdata, sd_bus_error *error)
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

static int method_get_history(sd_bus_message *m, void *userdata, sd_bus_error *error)
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

static int method_get_learned(sd_bus_message *m, void *userdata, sd_bus_error *error)
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

static int method_list_learned(sd_bus_message *m, void *userdata, sd_bus_error *error)
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

static int method_forget_learned(sd_bus_message *m, void *userdata, sd_bus_error *error)
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

static int method_set_process_mode(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *mode;
	uint32_t pid;
	int r;

	r = sd_bus_message_read(m, "us", &pid, &mode);
	if (r < 0)
		return r;
	return change_override(m, userdata, pid, NULL, mode, error);
}

static int method_reset_process(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	uint32_t pid;
	int r;

	r = sd_bus_message_read(m, "u", &pid);
	if (r < 0)
		return r;
	return change_override(m, userdata, pid, NULL, NULL, error);
}

static int method_set_lock_mode(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *lock, *mode;
	uint32_t pid;
	int r;

	r = sd_bus_message_read(m, "uss", &pid, &lock, &mode);
	if (r < 0)
		return r;
	return change_override(m, userdata, pid, lock, mode, error);
}

static int method_reset_lock(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *lock;
	uint32_t pid;
	int r;

	r = sd_bus_message_read(m, "us", &pid, &lock);
	if (r < 0)
		return r;
	return change_override(m, userdata, pid, lock, NULL, error);
}

static int method_reload(sd_bus_message *m, void *userdata, sd_bus_error *error)
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

/* ---- peers, uids and the queues ---------------------------------------- */

static unsigned peer_hash(const char *name)
{
	unsigned h = 5381;

	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = h * 33 + *c;
	return h % BUS_PEER_BUCKETS;
}

static struct bus_peer *find_peer(struct bus_state *st, const char *name)
{
	for (struct bus_peer *p = st->peers[peer_hash(name)]; p; p = p->hnext)
		if (!strcmp(p->name, name))
			return p;
	return NULL;
}

static struct bus_uid *get_uid(struct bus_state *st, uid_t uid)
{
	struct bus_uid *u;

	for (u = st->uids; u; u = u->next)
		if (u->uid == uid)
			return u;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->uid = uid;
	u->next = st->uids;
	st->uids = u;
	return u;
}

/* p, with calls queued, at the end of its uid's line of connections. */
static void ring_append(struct bus_uid *u, struct bus_peer *p)
{
	p->in_ring = true;
	p->ring_next = NULL;
	if (u->ring_tail)
		u->ring_tail->ring_next = p;
	else
		u->ring_head = p;
	u->ring_tail = p;
}

static void ring_remove(struct bus_uid *u, struct bus_peer *p)
{
	struct bus_peer *prev = NULL;

	if (!p->in_ring)
		return;
	for (struct bus_peer **pp = &u->ring_head; *pp; prev = *pp, pp = &(*pp)->ring_next)
		if (*pp == p) {
			*pp = p->ring_next;
			if (u->ring_tail == p)
				u->ring_tail = prev;
			break;
		}
	p->in_ring = false;
	p->ring_next = NULL;
}

/* u, with calls queued, at the end of the line of uids. */
static void turn_append(struct bus_state *st, struct bus_uid *u)
{
	u->in_turn = true;
	u->turn_next = NULL;
	if (st->turn_tail)
		st->turn_tail->turn_next = u;
	else
		st->turn_head = u;
	st->turn_tail = u;
}

/* Frees u once nothing refers to it (its calls went with its peers). */
static void put_uid(struct bus_state *st, struct bus_uid *u)
{
	if (u->peers || u->queued || u->in_turn)
		return;
	for (struct bus_uid **pp = &st->uids; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	free(u);
}

static void call_free(struct bus_call *c)
{
	sd_bus_message_unref(c->m);
	free(c);
}

/* Answers a call that will not run: refused, or its uid not known. */
static void call_refuse(struct bus_call *c, const char *name, const char *fmt, ...) _printf_(3, 4);

static void call_refuse(struct bus_call *c, const char *name, const char *fmt, ...)
{
	sd_bus_error error = SD_BUS_ERROR_NULL;
	va_list ap;

	va_start(ap, fmt);
	sd_bus_error_setfv(&error, name, fmt, ap);
	va_end(ap);
	(void)sd_bus_reply_method_error(c->m, &error);
	sd_bus_error_free(&error);
	call_free(c);
}

/* Replies are waiting for the socket: running calls now only makes every
 * later answer, another user's too, wait longer. */
static bool congested(struct elided *d)
{
	uint64_t n = 0;

	return d->bus && sd_bus_get_n_queued_write(d->bus, &n) >= 0 && n >= ELIDED_BUS_WQUEUE_MAX;
}

static void arm_work(struct elided *d)
{
	struct bus_state *st = d->bus_state;

	if (st->work && st->turn_head && !congested(d))
		sd_event_source_set_enabled(st->work, SD_EVENT_ON);
}

/*
 * A call past its uid's limit: refused, or, while replies are waiting for
 * the socket, dropped unanswered, for an error reply too would wait in
 * line ahead of other users' answers (its caller gets the bus daemon's
 * NoReply in time, and no more of its calls reach us meanwhile).
 */
static int over_limit(struct elided *d, uid_t uid, sd_bus_error *error)
{
	if (congested(d)) {
		log_uid(&d->ratelimit, uid, LOG_NOTICE,
			"uid %u has %u D-Bus calls waiting for elided; dropping more while the bus is congested",
			(unsigned)uid, ELIDED_MAX_CALLS_PER_UID);
		return 1;
	}
	return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED, "uid %u already has %u calls waiting for elided",
				 (unsigned)uid, ELIDED_MAX_CALLS_PER_UID);
}

/* Refuses c past its uid's limit (over_limit()), and frees it. */
static void refuse_over_limit(struct elided *d, struct bus_call *c)
{
	sd_bus_error error = SD_BUS_ERROR_NULL;

	if (over_limit(d, c->peer->u->uid, &error) < 0)
		(void)sd_bus_reply_method_error(c->m, &error);
	sd_bus_error_free(&error);
	call_free(c);
}

/*
 * With p's uid at its limit, the connection of that uid whose newest call
 * gives way to one of p's: the one with the most calls queued, when it has
 * at least two more than p (else p has its share already).  NULL: none.
 * A walk of the uid's connections with calls queued, at most
 * ELIDED_MAX_CALLS_PER_UID of them, only while the uid is at its limit.
 */
static struct bus_peer *displaceable(struct bus_peer *p)
{
	struct bus_peer *fullest = NULL;

	for (struct bus_peer *q = p->u->ring_head; q; q = q->ring_next)
		if (!fullest || q->nqueued > fullest->nqueued)
			fullest = q;
	return fullest && fullest != p && fullest->nqueued >= p->nqueued + 2 ? fullest : NULL;
}

/* Takes q's newest call out of the queue and refuses it. */
static void displace(struct elided *d, struct bus_peer *q)
{
	struct bus_call *c = q->head, *prev = NULL;

	while (c->next) {
		prev = c;
		c = c->next;
	}
	if (prev)
		prev->next = NULL;
	else
		q->head = NULL;
	q->tail = prev;
	q->nqueued--;
	q->u->queued--;
	if (!q->head)
		ring_remove(q->u, q);
	refuse_over_limit(d, c);
}

/* Queues c behind its connection's earlier calls; past its uid's limit it
 * takes the place of the fullest connection's newest call, or is refused. */
static void queue_call(struct elided *d, struct bus_call *c)
{
	struct bus_state *st = d->bus_state;
	struct bus_peer *p = c->peer;
	struct bus_uid *u = p->u;

	if (u->queued >= ELIDED_MAX_CALLS_PER_UID) {
		struct bus_peer *q = displaceable(p);

		if (!q) {
			refuse_over_limit(d, c);
			return;
		}
		displace(d, q);
	}
	c->next = NULL;
	if (p->tail)
		p->tail->next = c;
	else
		p->head = c;
	p->tail = c;
	p->nqueued++;
	u->queued++;
	if (!p->in_ring)
		ring_append(u, p);
	if (!u->in_turn)
		turn_append(st, u);
	arm_work(d);
}

static void unsubscribe(struct elided *d, struct bus_peer *p)
{
	struct bus_state *st = d->bus_state;

	if (!p->subscribed)
		return;
	for (struct bus_peer **pp = &st->subscribers; *pp; pp = &(*pp)->snext)
		if (*pp == p) {
			*pp = p->snext;
			break;
		}
	p->subscribed = false;
	p->u->subscribers--;
	d->nsubscribers--;
}

/* p left the bus (or the bus left us): nothing of it stays, its calls are
 * dropped unanswered (there is nobody to answer). */
static void peer_free(struct elided *d, struct bus_peer *p)
{
	struct bus_state *st = d->bus_state;
	struct bus_call *c, *next;

	for (struct bus_peer **pp = &st->peers[peer_hash(p->name)]; *pp; pp = &(*pp)->hnext)
		if (*pp == p) {
			*pp = p->hnext;
			break;
		}
	st->npeers--;
	if (p->lookup) {
		p->lookup = sd_bus_slot_unref(p->lookup);
		st->nlookups--;
	}
	for (c = p->parked; c; c = next) {
		next = c->next;
		call_free(c);
	}
	st->nparked -= p->nparked;
	if (p->u) {
		struct bus_uid *u = p->u;

		unsubscribe(d, p);
		ring_remove(u, p);
		for (c = p->head; c; c = next) {
			next = c->next;
			call_free(c);
		}
		u->queued -= p->nqueued;
		u->peers--;
		put_uid(st, u);
	}
	free(p->name);
	free(p);
}

/* The bus daemon said who p is: its parked calls join its uid's queue. */
static int on_lookup(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	struct bus_peer *p = userdata;
	struct elided *d = p->d;
	struct bus_state *st = d->bus_state;
	const sd_bus_error *e = sd_bus_message_get_error(m);
	struct bus_call *c, *next;
	struct bus_uid *u = NULL;
	uint32_t uid;
	int r = 0;

	(void)ret_error;
	p->lookup = sd_bus_slot_unref(p->lookup);
	st->nlookups--;
	if (e)
		r = -sd_bus_error_get_errno(e) ?: -EIO;
	else
		r = sd_bus_message_read(m, "u", &uid);
	if (r >= 0) {
		u = get_uid(st, (uid_t)uid);
		if (!u)
			r = -ENOMEM;
	}
	if (r >= 0 && u->peers >= ELIDED_MAX_PEERS_PER_UID) {
		put_uid(st, u);
		u = NULL;
		r = -EUSERS;
	}
	c = p->parked;
	p->parked = p->parked_tail = NULL;
	st->nparked -= p->nparked;
	p->nparked = 0;
	if (r < 0) {
		/* Asked again at its next call. */
		for (; c; c = next) {
			next = c->next;
			if (r == -EUSERS)
				call_refuse(c, SD_BUS_ERROR_LIMITS_EXCEEDED,
					    "uid %u already has %u connections known to elided", (unsigned)uid,
					    ELIDED_MAX_PEERS_PER_UID);
			else
				call_refuse(c, SD_BUS_ERROR_ACCESS_DENIED,
					    "Permission denied: the caller's uid is not known (%s)",
					    e && e->message ? e->message : strerror(-r));
		}
		return 0;
	}
	p->u = u;
	u->peers++;
	for (; c; c = next) {
		next = c->next;
		queue_call(d, c);
	}
	return 0;
}

/*
 * The vtable's handler of every method: queue the call and answer later
 * (run_call()).  An error returned here is sd-bus's to send at once.
 */
static int enqueue(sd_bus_message *m, struct elided *d, sd_bus_message_handler_t handler, sd_bus_error *error)
{
	struct bus_state *st = d->bus_state;
	const char *sender = sd_bus_message_get_sender(m);
	struct bus_peer *p;
	struct bus_call *c;
	int r;

	if (!sender || !st)
		return sd_bus_error_setf(error, SD_BUS_ERROR_NOT_SUPPORTED, "elided answers on the bus only");
	p = find_peer(st, sender);
	if (p && p->u && p->u->queued >= ELIDED_MAX_CALLS_PER_UID && !displaceable(p))
		return over_limit(d, p->u->uid, error);
	if (p && !p->u && p->nparked >= ELIDED_MAX_PARKED_PER_PEER)
		return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
					 "%u calls of this connection already wait for its uid", ELIDED_MAX_PARKED_PER_PEER);
	if (!p && st->nlookups >= ELIDED_MAX_LOOKUPS)
		return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
					 "elided is asking the uids of %u connections already, try again",
					 ELIDED_MAX_LOOKUPS);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		p->d = d;
		p->name = strdup(sender);
		if (!p->name) {
			free(p);
			return -ENOMEM;
		}
		p->hnext = st->peers[peer_hash(sender)];
		st->peers[peer_hash(sender)] = p;
		st->npeers++;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->m = sd_bus_message_ref(m);
	c->read_ns = now_ns();
	c->peer = p;
	c->handler = handler;
	if (p->u) {
		queue_call(d, c);
		return 1;
	}
	if (!p->lookup) {
		/* The bus daemon's SO_PEERCRED of the connection: its euid. */
		r = sd_bus_call_method_async(sd_bus_message_get_bus(m), &p->lookup, "org.freedesktop.DBus",
					     "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixUser",
					     on_lookup, p, "s", sender);
		if (r < 0) {
			call_free(c);
			if (!p->nparked)
				peer_free(d, p);
			return sd_bus_error_set_errnof(error, r, "Cannot determine the caller's credentials: %m");
		}
		st->nlookups++;
	}
	if (p->parked_tail)
		p->parked_tail->next = c;
	else
		p->parked = c;
	p->parked_tail = c;
	p->nparked++;
	st->nparked++;
	return 1;
}

/* One call, with `running` saying whose it is; its error, if any, answered. */
static void run_call(struct elided *d, struct bus_call *c)
{
	sd_bus_error error = SD_BUS_ERROR_NULL;
	int r;

	/* A call that waited long says who kept it waiting. */
	if (now_ns() - c->read_ns > 1000000000u)
		log_debug("D-Bus call %s of uid %u waited %.0f ms to run", sd_bus_message_get_member(c->m),
			  (unsigned)c->peer->u->uid, (double)(now_ns() - c->read_ns) / 1e6);
	running = c;
	r = c->handler(c->m, d, &error);
	running = NULL;
	if (r < 0 || sd_bus_error_is_set(&error)) {
		r = sd_bus_reply_method_errno(c->m, r < 0 ? r : -EIO, &error);
		if (r < 0)
			log_debug("cannot answer %s of %s: %s", sd_bus_message_get_member(c->m), c->peer->name,
				  strerror(-r));
	}
	sd_bus_error_free(&error);
	call_free(c);
}

/* Up to ELIDED_BUS_BATCH calls, one of each uid in turn, and of each of
 * a uid's connections in turn. */
static int on_work(sd_event_source *s, void *userdata)
{
	struct elided *d = userdata;
	struct bus_state *st = d->bus_state;

	for (unsigned n = 0; n < ELIDED_BUS_BATCH && st->turn_head && !congested(d); n++) {
		struct bus_uid *u = st->turn_head;
		struct bus_peer *p = u->ring_head;
		struct bus_call *c;

		st->turn_head = u->turn_next;
		if (!st->turn_head)
			st->turn_tail = NULL;
		u->in_turn = false;
		if (!p) {
			/* Its calls went with their connections (peer_free). */
			put_uid(st, u);
			continue;
		}
		c = p->head;
		p->head = c->next;
		if (!p->head)
			p->tail = NULL;
		p->nqueued--;
		u->queued--;
		/* Both back in line behind the others before the call runs:
		 * a call that frees its own peer or uid finds them in no line. */
		u->ring_head = p->ring_next;
		if (!u->ring_head)
			u->ring_tail = NULL;
		p->in_ring = false;
		p->ring_next = NULL;
		if (p->head)
			ring_append(u, p);
		if (u->ring_head)
			turn_append(st, u);
		run_call(d, c);
		put_uid(st, u);
	}
	/* Again once the socket took the replies (elided_bus_drain). */
	if (!st->turn_head || congested(d))
		sd_event_source_set_enabled(s, SD_EVENT_OFF);
	return 0;
}

/* A name left the bus: a unique name is a connection, and its peer goes. */
static int on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	struct elided *d = userdata;
	const char *name, *old_owner, *new_owner;
	struct bus_peer *p;

	(void)ret_error;
	if (!d->bus_state || sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0)
		return 0;
	if (name[0] != ':' || *new_owner)
		return 0;
	p = find_peer(d->bus_state, name);
	if (p) {
		if (p->subscribed)
			log_debug("D-Bus subscriber %s (uid %u) disconnected", p->name, (unsigned)p->u->uid);
		peer_free(d, p);
	}
	return 0;
}

/* ---- subscriptions ----------------------------------------------------- */

static int method_subscribe(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;
	struct bus_peer *p = running->peer;
	struct bus_uid *u = p->u;

	if (p->subscribed)
		return sd_bus_reply_method_return(m, NULL);
	/* What one user can make the daemon hold. */
	if (u->uid != 0 && u->subscribers >= ELIDED_MAX_SUBSCRIBERS_PER_UID)
		return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
					 "uid %u already has %u subscriptions", (unsigned)u->uid,
					 ELIDED_MAX_SUBSCRIBERS_PER_UID);
	/* Nothing to set up: the peer goes when its name leaves the bus
	 * (on_name_owner_changed), and with it the subscription. */
	p->subscribed = true;
	p->snext = d->bus_state->subscribers;
	d->bus_state->subscribers = p;
	u->subscribers++;
	d->nsubscribers++;
	log_debug("D-Bus subscriber %s (uid %u)", p->name, (unsigned)u->uid);
	return sd_bus_reply_method_return(m, NULL);
}

static int method_unsubscribe(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	struct bus_peer *p = running->peer;

	if (!p->subscribed)
		return sd_bus_error_setf(error, ELIDED_ERROR_NOT_SUBSCRIBED, "Not subscribed");
	unsubscribe(userdata, p);
	return sd_bus_reply_method_return(m, NULL);
}

/* The vtable's handlers: each queues its call for the real one. */
#define QUEUED(fn)                                                                    \
	static int fn##_queued(sd_bus_message *m, void *userdata, sd_bus_error *error) \
	{                                                                             \
		return enqueue(m, userdata, fn, error);                                \
	}
QUEUED(method_get_status)
QUEUED(method_list_processes)
QUEUED(method_list_no_segment)
QUEUED(method_list_observed_locks)
QUEUED(method_list_programs)
QUEUED(method_get_locks)
QUEUED(method_get_history)
QUEUED(method_get_learned)
QUEUED(method_list_learned)
QUEUED(method_forget_learned)
QUEUED(method_set_process_mode)
QUEUED(method_reset_process)
QUEUED(method_set_lock_mode)
QUEUED(method_reset_lock)
QUEUED(method_reload)
QUEUED(method_subscribe)
QUEUED(method_unsubscribe)

/* ---- object ------------------------------------------------------------ */

static const sd_bus_vtable manager_vtable[] = {
	SD_BUS_VTABLE_START(0),

	/* Flags 0: may change, but no PropertiesChanged is sent; read them afresh. */
	SD_BUS_PROPERTY("Version", "s", property_get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("DiscoveryMethod", "s", property_get_discovery, 0, 0),
	SD_BUS_PROPERTY("LockWaitObserver", "s", property_get_lock_wait_observer, 0, 0),
	SD_BUS_PROPERTY("RuntimeDirectory", "s", property_get_runtime_dir, 0, SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("ConfigFiles", "as", property_get_config_files, 0, 0),
	SD_BUS_PROPERTY("LastReload", "s", property_get_last_reload, 0, 0),
	SD_BUS_PROPERTY("RtmUsable", "b", property_get_rtm_usable, 0, SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("RtmReason", "s", property_get_rtm_reason, 0, SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("Interval", "d", property_get_interval, 0, 0),
	SD_BUS_PROPERTY("NProcesses", "u", property_get_nprocesses, 0, 0),
	SD_BUS_PROPERTY("SegmentsRefused", "u", property_get_unseen, 0, 0),
	SD_BUS_PROPERTY("SegmentsOverCap", "u", property_get_unseen, 0, 0),
	SD_BUS_PROPERTY("UidsAtCap", "u", property_get_unseen, 0, 0),
	SD_BUS_PROPERTY("SegmentsRefusedTotal", "t", property_get_unseen, 0, 0),
	SD_BUS_PROPERTY("SegmentsOverCapTotal", "t", property_get_unseen, 0, 0),
	SD_BUS_PROPERTY("ProcessesWithoutSegment", "u", property_get_unseen, 0, 0),
	SD_BUS_PROPERTY("ProcessesWithoutSegmentTotal", "t", property_get_unseen, 0, 0),

	SD_BUS_METHOD_WITH_NAMES("GetStatus",
				 NULL, "",
				 "suuddd",
				 SD_BUS_PARAM(summary) SD_BUS_PARAM(processes) SD_BUS_PARAM(eliding)
				 SD_BUS_PARAM(commits_per_sec) SD_BUS_PARAM(aborts_per_sec)
				 SD_BUS_PARAM(cycles_lost_per_sec),
				 method_get_status_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("ListProcesses",
				 NULL, "",
				 "a(uusssssddddtud)", SD_BUS_PARAM(processes),
				 method_list_processes_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("ListProcessesWithoutSegment",
				 NULL, "",
				 "a(uuts)", SD_BUS_PARAM(processes),
				 method_list_no_segment_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("ListObservedLocks",
				 NULL, "",
				 "a(uutssstttts)", SD_BUS_PARAM(locks),
				 method_list_observed_locks_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("ListPrograms",
				 NULL, "",
				 "a(suuddddd)", SD_BUS_PARAM(programs),
				 method_list_programs_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("GetLocks",
				 "u", SD_BUS_PARAM(pid),
				 "a(ussssttttta{st}tdddsss)", SD_BUS_PARAM(locks),
				 method_get_locks_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("GetHistory",
				 "u", SD_BUS_PARAM(pid),
				 "a(tddddd)", SD_BUS_PARAM(history),
				 method_get_history_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("GetLearned",
				 "u", SD_BUS_PARAM(pid),
				 "a(usx)", SD_BUS_PARAM(locks),
				 method_get_learned_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("ListLearned",
				 NULL, "",
				 "a(usssuttttxx)", SD_BUS_PARAM(entries),
				 method_list_learned_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("ForgetLearned",
				 "s", SD_BUS_PARAM(exe),
				 "u", SD_BUS_PARAM(count),
				 method_forget_learned_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("SetProcessMode",
				 "us", SD_BUS_PARAM(pid) SD_BUS_PARAM(mode),
				 NULL, "",
				 method_set_process_mode_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("ResetProcess",
				 "u", SD_BUS_PARAM(pid),
				 NULL, "",
				 method_reset_process_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("SetLockMode",
				 "uss", SD_BUS_PARAM(pid) SD_BUS_PARAM(lock) SD_BUS_PARAM(mode),
				 NULL, "",
				 method_set_lock_mode_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_NAMES("ResetLock",
				 "us", SD_BUS_PARAM(pid) SD_BUS_PARAM(lock),
				 NULL, "",
				 method_reset_lock_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	/* Unprivileged for sd-bus; the handler itself admits root only. */
	SD_BUS_METHOD("Reload", NULL, NULL, method_reload_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD("Subscribe", NULL, NULL, method_subscribe_queued, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD("Unsubscribe", NULL, NULL, method_unsubscribe_queued, SD_BUS_VTABLE_UNPRIVILEGED),

	SD_BUS_SIGNAL_WITH_NAMES("ProcessAdded", "us", SD_BUS_PARAM(pid) SD_BUS_PARAM(exe), 0),
	SD_BUS_SIGNAL_WITH_NAMES("ProcessRemoved", "u", SD_BUS_PARAM(pid), 0),
	SD_BUS_SIGNAL_WITH_NAMES("Decision", "usssssssu",
				 SD_BUS_PARAM(pid) SD_BUS_PARAM(exe) SD_BUS_PARAM(event) SD_BUS_PARAM(lock)
				 SD_BUS_PARAM(mode) SD_BUS_PARAM(source) SD_BUS_PARAM(reason) SD_BUS_PARAM(message_id)
				 SD_BUS_PARAM(caller_uid), 0),
	SD_BUS_SIGNAL_WITH_NAMES("Reloaded", "bs", SD_BUS_PARAM(ok) SD_BUS_PARAM(result), 0),

	SD_BUS_VTABLE_END
};

/* ---- the connection ---------------------------------------------------- */

static int on_disconnected(sd_bus_message *m, void *userdata, sd_bus_error *ret_error);

/* Connects, exports the object, takes the name: a new d->bus, or -errno
 * with the reason in `why`. */
static int bus_connect(struct elided *d, const char **why)
{
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
	int r;

	*why = "connect to the system bus";
	r = sd_bus_open_system(&bus);
	if (r < 0)
		return r;
	/* A lost connection is ours to make again (on_disconnected), never
	 * a reason for sd-bus to end the event loop. */
	sd_bus_set_exit_on_disconnect(bus, false);
	/* sd-bus asks for megabytes: what waits in the kernel is out of our
	 * hands (ELIDED_BUS_WQUEUE_MAX).  Best effort. */
	(void)setsockopt(sd_bus_get_fd(bus), SOL_SOCKET, SO_SNDBUF, &(int){ ELIDED_BUS_SNDBUF }, sizeof(int));
	*why = "watch for the connection's end";
	r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus.Local", "/org/freedesktop/DBus/Local",
				"org.freedesktop.DBus.Local", "Disconnected", on_disconnected, d);
	if (r < 0)
		return r;
	/* One match for every subscriber and caller: they are forgotten when
	 * their connection leaves.  Installed now, synchronously: a match
	 * added asynchronously whose answer is late (behind a flood of calls)
	 * makes sd-bus drop the whole connection. */
	*why = "watch for callers leaving the bus";
	r = sd_bus_add_match(bus, NULL,
			     "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
			     "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg2=''",
			     on_name_owner_changed, d);
	if (r < 0)
		return r;
	*why = "export " ELIDED_BUS_PATH;
	r = sd_bus_add_object_vtable(bus, NULL, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, manager_vtable, d);
	if (r < 0)
		return r;
	/* Object first, name second: a client that sees the name finds the object. */
	*why = "take " ELIDED_BUS_NAME;
	r = sd_bus_request_name(bus, ELIDED_BUS_NAME, 0);
	if (r == -EEXIST)
		*why = "take " ELIDED_BUS_NAME " (is another elided running?)";
	if (r < 0)
		return r;
	*why = "attach the bus to the event loop";
	r = sd_bus_attach_event(bus, d->event, SD_EVENT_PRIORITY_NORMAL);
	if (r < 0)
		return r;
	d->bus = bus;
	bus = NULL;
	d->bus_state->connected = true;
	return 0;
}

/* Everything of the connection goes: peers, queued calls, subscriptions. */
static void bus_drop(struct elided *d)
{
	struct bus_state *st = d->bus_state;

	for (unsigned i = 0; st && i < BUS_PEER_BUCKETS; i++)
		while (st->peers[i])
			peer_free(d, st->peers[i]);
	/* No calls are left: no uid is anyone's turn. */
	while (st && st->turn_head) {
		struct bus_uid *u = st->turn_head;

		st->turn_head = u->turn_next;
		u->in_turn = false;
		put_uid(st, u);
	}
	if (st)
		st->turn_tail = NULL;
	if (st && st->work)
		sd_event_source_set_enabled(st->work, SD_EVENT_OFF);
	if (st)
		st->connected = false;
	if (d->bus) {
		sd_bus_detach_event(d->bus);
		d->bus = sd_bus_flush_close_unref(d->bus);
	}
}

static int on_reconnect(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct elided *d = userdata;
	struct bus_state *st = d->bus_state;
	const char *why;
	int r;

	bus_drop(d);
	st->attempts++;
	r = bus_connect(d, &why);
	if (r >= 0) {
		log_notice("back on the system bus as %s (attempt %u)", ELIDED_BUS_NAME, st->attempts);
		st->attempts = 0;
		st->backoff_usec = ELIDED_BUS_RECONNECT_USEC;
		return 0;
	}
	/* Said once per outage: the bus may take long to come back. */
	if (st->attempts == 1)
		log_warning_errno(r, "cannot %s, retrying with back-off up to every %u s", why,
				  ELIDED_BUS_RECONNECT_MAX_USEC / 1000000u);
	else
		log_debug("cannot %s: %s (attempt %u)", why, strerror(-r), st->attempts);
	st->backoff_usec = st->backoff_usec * 2 > ELIDED_BUS_RECONNECT_MAX_USEC ? ELIDED_BUS_RECONNECT_MAX_USEC :
										  st->backoff_usec * 2;
	sd_event_source_set_time(s, usec + st->backoff_usec);
	sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	return 0;
}

/*
 * sd-bus closed the connection (the bus daemon went away or dropped us):
 * the rest of elided carries on off the bus, and a timer makes the
 * connection again.  Not torn down here: we are inside sd-bus.
 */
static int on_disconnected(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	struct elided *d = userdata;
	struct bus_state *st = d->bus_state;
	uint64_t now;

	(void)m;
	(void)ret_error;
	log_warning("lost the connection to the system bus: %s is off the bus, reconnecting", ELIDED_BUS_NAME);
	st->connected = false;
	if (st->work)
		sd_event_source_set_enabled(st->work, SD_EVENT_OFF);
	sd_event_now(d->event, CLOCK_MONOTONIC, &now);
	st->backoff_usec = ELIDED_BUS_RECONNECT_USEC;
	st->attempts = 0;
	sd_event_source_set_time(st->reconnect, now + st->backoff_usec);
	sd_event_source_set_enabled(st->reconnect, SD_EVENT_ONESHOT);
	return 0;
}

int elided_bus_setup(struct elided *d)
{
	struct bus_state *st;
	const char *why;
	int r;

	r = sd_bus_error_add_map(elided_error_map);
	if (r < 0)
		return log_error_errno(r, "Failed to register D-Bus error names");

	st = calloc(1, sizeof(*st));
	if (!st)
		return log_oom();
	d->bus_state = st;
	r = sd_event_add_defer(d->event, &st->work, on_work, d);
	if (r >= 0)
		r = sd_event_source_set_enabled(st->work, SD_EVENT_OFF);
	if (r >= 0)
		r = sd_event_add_time(d->event, &st->reconnect, CLOCK_MONOTONIC, UINT64_MAX, 10000, on_reconnect, d);
	if (r >= 0)
		r = sd_event_source_set_enabled(st->reconnect, SD_EVENT_OFF);
	if (r < 0)
		return log_error_errno(r, "Failed to set up the D-Bus queues");

	r = bus_connect(d, &why);
	if (r < 0)
		return log_error_errno(r, "Failed to %s", why);
	log_debug("Listening on the system bus as %s", ELIDED_BUS_NAME);
	return 0;
}

void elided_bus_free(struct elided *d)
{
	struct bus_state *st = d->bus_state;

	bus_drop(d);
	if (!st)
		return;
	for (struct bus_uid *u = st->uids, *next; u; u = next) {
		next = u->next;
		free(u);
	}
	sd_event_source_unref(st->work);
	sd_event_source_unref(st->reconnect);
	free(st);
	d->bus_state = NULL;
}

void elided_bus_wait(struct elided *d, uint64_t usec)
{
	struct timespec ts = { .tv_sec = (time_t)(usec / 1000000u), .tv_nsec = (long)(usec % 1000000u) * 1000 };
	struct pollfd pfd = { .fd = -1 };
	int r;

	if (d->bus && d->bus_state && d->bus_state->connected) {
		pfd.fd = sd_bus_get_fd(d->bus);
		r = sd_bus_get_events(d->bus);
		pfd.events = r > 0 ? (short)r : POLLIN;
	}
	/* The bus ends the wait at once: poll() on no fd is a plain sleep. */
	(void)ppoll(&pfd, pfd.fd >= 0 ? 1 : 0, &ts, NULL);
}

bool elided_bus_drain(struct elided *d)
{
	struct pollfd pfd;
	int r = 0, fd;

	if (!d->bus || !d->bus_state->connected)
		return false;
	for (unsigned n = 0; n < ELIDED_BUS_DRAIN; n++) {
		r = sd_bus_process(d->bus, NULL);
		if (r <= 0)
			break;
	}
	/* A failure is sd-bus's to handle (Disconnected, on_disconnected). */
	if (r < 0 || !d->bus_state->connected)
		return false;
	/* Calls held back while the socket was full may run now. */
	arm_work(d);
	if (r > 0)
		return true;
	fd = sd_bus_get_fd(d->bus);
	if (fd < 0)
		return false;
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	r = sd_bus_get_events(d->bus);
	if (r > 0)
		pfd.events = (short)r;
	return poll(&pfd, 1, 0) > 0;
}

/* One signal about `pid`, unicast to `destination`; exe NULL: ProcessRemoved. */
static int send_process_signal(struct elided *d, const char *destination, pid_t pid, const char *exe)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
	int r;

	r = sd_bus_message_new_signal(d->bus, &m, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
				      exe ? "ProcessAdded" : "ProcessRemoved");
	if (r < 0)
		return r;
	r = sd_bus_message_set_destination(m, destination);
	if (r < 0)
		return r;
	r = exe ? sd_bus_message_append(m, "us", (uint32_t)pid, exe) : sd_bus_message_append(m, "u", (uint32_t)pid);
	if (r < 0)
		return r;
	return sd_bus_send(d->bus, m, NULL);
}

/* ProcessAdded (added) or ProcessRemoved about p to every subscriber that
 * may see a process of `owner`; with check_before, only to those that
 * could not see one of `before`. */
static void emit(struct elided *d, const struct tracked_process *p, uid_t owner, bool added, bool check_before,
		 uid_t before)
{
	char exe[ELIDE_SEG_EXE_MAX];
	int r;

	if (!d->bus || !d->bus_state)
		return;
	for (struct bus_peer *s = d->bus_state->subscribers; s; s = s->snext) {
		if (!elided_bus_may_access(s->u->uid, owner))
			continue;
		if (check_before && elided_bus_may_access(s->u->uid, before))
			continue;
		r = send_process_signal(d, s->name, p->pid, added ? bus_string(p->exe, exe, sizeof(exe)) : NULL);
		if (r < 0)
			log_warning_errno(r, "Failed to send %s for %d to %s", added ? "ProcessAdded" : "ProcessRemoved",
					  (int)p->pid, s->name);
	}
}

void elided_bus_emit_process_added(struct elided *d, const struct tracked_process *p)
{
	emit(d, p, p->uid, true, false, 0);
}

void elided_bus_emit_process_removed(struct elided *d, const struct tracked_process *p)
{
	emit(d, p, p->uid, false, false, 0);
}

void elided_bus_emit_owner_changed(struct elided *d, const struct tracked_process *p, uid_t old_uid)
{
	/* Gone for who saw it only under its former owner... */
	emit(d, p, old_uid, false, true, p->uid);
	/* ...new for who sees it only now. */
	emit(d, p, p->uid, true, true, old_uid);
}

/* One Decision (about a process) or Reloaded signal, unicast to `destination`. */
static int send_event_signal(struct elided *d, const char *destination, const struct elided_event *ev)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
	char exe[ELIDE_SEG_EXE_MAX], lock[ELIDED_LOCK_NAME_MAX], reason[256];
	bool reload = ev->kind == ELIDED_EVENT_RELOAD;
	int r;

	r = sd_bus_message_new_signal(d->bus, &m, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
				      reload ? "Reloaded" : "Decision");
	if (r < 0)
		return r;
	r = sd_bus_message_set_destination(m, destination);
	if (r < 0)
		return r;
	if (reload)
		r = sd_bus_message_append(m, "bs", ev->priority > LOG_ERR,
					  bus_string(ev->reason ? ev->reason : "", reason, sizeof(reason)));
	else
		r = sd_bus_message_append(m, "usssssssu", (uint32_t)ev->pid,
					  bus_string(ev->exe ? ev->exe : "", exe, sizeof(exe)),
					  elided_event_name(ev->kind),
					  bus_string(ev->lock ? ev->lock : "", lock, sizeof(lock)),
					  ev->mode ? ev->mode : "", ev->source ? ev->source : "",
					  bus_string(ev->reason ? ev->reason : "", reason, sizeof(reason)),
					  elided_event_message_id(ev->kind), (uint32_t)ev->caller_uid);
	if (r < 0)
		return r;
	return sd_bus_send(d->bus, m, NULL);
}

void elided_bus_emit_event(struct elided *d, const struct elided_event *ev)
{
	int r;

	if (!d->bus || !d->bus_state)
		return;
	for (struct bus_peer *s = d->bus_state->subscribers; s; s = s->snext) {
		if (ev->pid > 0 && !elided_bus_may_access(s->u->uid, ev->uid))
			continue;
		r = send_event_signal(d, s->name, ev);
		if (r < 0)
			log_warning_errno(r, "Failed to send the %s event to %s", elided_event_name(ev->kind), s->name);
	}
}
