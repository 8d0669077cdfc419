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
 *
 * This file holds the connection: made, watched, and made again with
 * back-off when lost.  The callers' queues are in dbus-queue.c, the
 * methods in dbus-methods.c, the object's vtable, properties,
 * subscriptions and signals in dbus-object.c.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>

#include "dbus.h"
#include "dbus-internal.h"
#include "elided.h"
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
			     bus_on_name_owner_changed, d);
	if (r < 0)
		return r;
	*why = "export " ELIDED_BUS_PATH;
	r = sd_bus_add_object_vtable(bus, NULL, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, bus_manager_vtable, d);
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

	bus_queues_drop(d);
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
	r = bus_queues_init(d);
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
	bus_queues_free(st);
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
	bus_arm_work(d);
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
