/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The object elided exports, /org/elide/elided1: its vtable, the
 * properties, the subscriptions, and the signals unicast to subscribers.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "dbus.h"
#include "dbus-internal.h"
#include "discovery.h"
#include "elided.h"
#include "events.h"
#include "log.h"
#include "macros.h"

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

/* ---- subscriptions ----------------------------------------------------- */

void bus_unsubscribe(struct elided *d, struct bus_peer *p)
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

static int method_subscribe(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	struct elided *d = userdata;
	struct bus_peer *p = bus_running_call()->peer;
	struct bus_uid *u = p->u;

	if (p->subscribed)
		return sd_bus_reply_method_return(m, NULL);
	/* What one user can make the daemon hold. */
	if (u->uid != 0 && u->subscribers >= ELIDED_MAX_SUBSCRIBERS_PER_UID)
		return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
					 "uid %u already has %u subscriptions", (unsigned)u->uid,
					 ELIDED_MAX_SUBSCRIBERS_PER_UID);
	/* Nothing to set up: the peer goes when its name leaves the bus
	 * (bus_on_name_owner_changed), and with it the subscription. */
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
	struct bus_peer *p = bus_running_call()->peer;

	if (!p->subscribed)
		return sd_bus_error_setf(error, ELIDED_ERROR_NOT_SUBSCRIBED, "Not subscribed");
	bus_unsubscribe(userdata, p);
	return sd_bus_reply_method_return(m, NULL);
}

/* The vtable's handlers: each queues its call for the real one. */
#define QUEUED(fn)                                                                    \
	static int fn##_queued(sd_bus_message *m, void *userdata, sd_bus_error *error) \
	{                                                                             \
		return bus_enqueue(m, userdata, fn, error);                            \
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

const sd_bus_vtable bus_manager_vtable[] = {
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

/* ---- signals ----------------------------------------------------------- */

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
