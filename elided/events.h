/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Events: every decision elided takes or is told to take, logged once.
 *
 * Under journald (stderr is the journal stream named by $JOURNAL_STREAM)
 * an event is a structured entry sent with sd_journal_sendv(): a
 * MESSAGE_ID per kind (journalctl MESSAGE_ID=... finds them all) and
 * ELIDE_* fields an administrator or a collector can match on.  Elsewhere
 * it is one ordinary log line.  Subscribers on D-Bus get the same event
 * as a Decision (or Reloaded) signal.
 */
#ifndef ELIDED_EVENTS_H
#define ELIDED_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct elided;
struct tracked_process;

enum elided_event_kind {
	ELIDED_EVENT_LOCK_OFF,       /* a lock's elision turned off (adaptation, config) */
	ELIDED_EVENT_LOCK_ON,        /* ... back on, or to a mode other than off */
	ELIDED_EVENT_PROCESS_MODE,   /* the config gave a process a mode of its own */
	ELIDED_EVENT_OVERRIDE,       /* elidectl set: a runtime override */
	ELIDED_EVENT_OVERRIDE_RESET, /* elidectl reset */
	ELIDED_EVENT_OWNER_CHANGED,  /* a process changed hands: overrides dropped */
	ELIDED_EVENT_RELOAD,         /* the configuration reloaded (or refused) */
	ELIDED_EVENT_KIND_MAX,
};

#define ELIDED_NO_UID ((uid_t)-1)

struct elided_event {
	enum elided_event_kind kind;
	int priority;                /* LOG_INFO, LOG_NOTICE, LOG_ERR */
	pid_t pid;                   /* 0: not about a process (reload) */
	uid_t uid;                   /* the process's owner */
	const char *exe;             /* NULL or "" when unknown */
	const char *lock;            /* NULL: the whole process */
	const char *mode;            /* "off", "on", "adaptive", "default" */
	const char *source;          /* "adaptation", "config", "override", "owner", "reload" */
	const char *reason;          /* why, in words; may be NULL */
	uid_t caller_uid;            /* who asked (overrides, D-Bus reloads); ELIDED_NO_UID if nobody */
	uid_t old_uid;               /* owner changes: the former owner */
};

/* The event kind's name ("lock-off", ...) and its MESSAGE_ID (32 hex digits). */
const char *elided_event_name(enum elided_event_kind kind);
const char *elided_event_message_id(enum elided_event_kind kind);

/*
 * The journal entry of `ev` with text `message`: at most ELIDED_EVENT_FIELDS
 * iovecs "NAME=value" in iov, their text in buf (size bytes).  Control
 * characters in values (a hostile executable's name) become '?'.  Returns
 * the number of fields.
 */
#define ELIDED_EVENT_FIELDS 16
size_t elided_event_fields(const struct elided_event *ev, const char *message, struct iovec *iov, char *buf,
			   size_t size);

/* Whether stderr is the journal stream $JOURNAL_STREAM names (dev:inode). */
bool elided_events_stderr_is_journal(void);
void elided_events_init(bool native_journal);

/* Log `ev` once (journal entry or log line, message printf-style) and
 * signal it to the D-Bus subscribers that may see its process. */
void elided_event(struct elided *d, const struct elided_event *ev, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
