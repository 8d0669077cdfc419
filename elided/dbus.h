/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided's D-Bus API (org.elide.Manager1 on the system bus), see dbus.c
 * for the interface.  The bus name, path and interface macros live in
 * elided.h.
 */
#ifndef ELIDED_DBUS_H
#define ELIDED_DBUS_H

#include <stdbool.h>
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

/* Subscriptions one non-root uid may hold (each costs a match on the bus). */
#define ELIDED_MAX_SUBSCRIBERS_PER_UID 64u

/* Connect to the system bus, export the object, take the name, attach to d->event. */
int elided_bus_setup(struct elided *d);
/* Flush and drop the connection (releases the name).  Safe when not set up. */
void elided_bus_free(struct elided *d);

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
