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

/* Connect to the system bus, export the object, take the name, attach to d->event. */
int elided_bus_setup(struct elided *d);
/* Flush and drop the connection (releases the name).  Safe when not set up. */
void elided_bus_free(struct elided *d);

/* Signals; no-ops while there is no bus. */
void elided_bus_emit_process_added(struct elided *d, const struct tracked_process *p);
void elided_bus_emit_process_removed(struct elided *d, pid_t pid);

/* Root may act on every process, anyone else only on their own.  For tests. */
bool elided_bus_may_access(uid_t caller, uid_t owner);

#endif
