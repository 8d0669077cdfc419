/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided's D-Bus API (org.elide.Manager1 on the system bus), see dbus.c
 * for the interface.  The bus name, path and interface macros live in
 * elided.h.
 */
#ifndef ELIDED_DBUS_H
#define ELIDED_DBUS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct elided;
struct tracked_process;

/* Error names beyond the org.freedesktop.DBus.Error.* ones. */
#define ELIDED_ERROR_NO_SUCH_PROCESS "org.elide.Error.NoSuchProcess"
#define ELIDED_ERROR_NO_SUCH_LOCK "org.elide.Error.NoSuchLock"
#define ELIDED_ERROR_RELOAD_FAILED "org.elide.Error.ReloadFailed"
#define ELIDED_ERROR_FAILED "org.elide.Error.Failed"
#define ELIDED_ERROR_NOT_SUBSCRIBED "org.elide.Error.NotSubscribed"
#define ELIDED_ERROR_NOT_OBSERVING "org.elide.Error.NotObserving"

/*
 * What one user can make elided hold on the bus (elide-security(7) lists them):
 * subscriptions of one non-root uid...
 */
#define ELIDED_MAX_SUBSCRIBERS_PER_UID 64u
/* ...calls of one uid (root's too) waiting to run, all its connections
 * together; more are refused with LimitsExceeded until some have run, but
 * a connection with at least two calls fewer waiting than the uid's
 * fullest one takes the place of that one's newest call (refused
 * instead), and the uid's connections are served in turn... */
#define ELIDED_MAX_CALLS_PER_UID 128u
/* ...connections of one uid that elided knows (the bus daemon's own
 * max_connections_per_user is 256)... */
#define ELIDED_MAX_PEERS_PER_UID 256u
/* ...calls of one connection waiting for the bus daemon to say its uid,
 * and connections whose uid is being asked, all users together. */
#define ELIDED_MAX_PARKED_PER_PEER 32u
#define ELIDED_MAX_LOOKUPS 512u
/* Calls run per turn of the event loop, one per uid in turn: other
 * sources (and the bus's own input) get a turn between batches. */
#define ELIDED_BUS_BATCH 32u
/* Replies waiting to be written (the socket full) past which no call runs:
 * output goes out in order, and a short queue lets the next user's answer
 * through soon.  elided's socket buffer is kept small for the same reason. */
#define ELIDED_BUS_WQUEUE_MAX 16u
#define ELIDED_BUS_SNDBUF (32u * 1024u)
/* Messages read off the bus per turn of the event loop. */
#define ELIDED_BUS_DRAIN 256u
/* A lost bus connection is made again after this, doubled at each failed
 * attempt up to the maximum. */
#define ELIDED_BUS_RECONNECT_USEC 100000u
#define ELIDED_BUS_RECONNECT_MAX_USEC 5000000u

/* Connect to the system bus, export the object, take the name, attach to
 * d->event.  A connection lost later is made again (with back-off). */
int elided_bus_setup(struct elided *d);
/* Flush and drop the connection (releases the name).  Safe when not set up. */
void elided_bus_free(struct elided *d);
/* Reads and queues what the bus has for us, at most ELIDED_BUS_DRAIN
 * messages; true when more is waiting (the loop must not sleep). */
bool elided_bus_drain(struct elided *d);
/* Sleeps up to usec, less when the bus has something for us first. */
void elided_bus_wait(struct elided *d, uint64_t usec);

/* Signals, unicast to the subscribers allowed to see p (root and p's
 * owner); no-ops while there is no bus. */
void elided_bus_emit_process_added(struct elided *d, const struct tracked_process *p);
void elided_bus_emit_process_removed(struct elided *d, const struct tracked_process *p);
/* p->uid was old_uid: Removed to who may see it no more, Added to who may now. */
void elided_bus_emit_owner_changed(struct elided *d, const struct tracked_process *p, uid_t old_uid);

/* An event (events.h): Decision to the subscribers that may see its
 * process, Reloaded to every subscriber. */
struct elided_event;
void elided_bus_emit_event(struct elided *d, const struct elided_event *ev);

/* Root may act on every process, anyone else only on their own.  For tests. */
bool elided_bus_may_access(uid_t caller, uid_t owner);

#endif
