/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "dbus.h"
#include "elided.h"
#include "events.h"
#include "log.h"

static const struct {
	const char *name;
	const char *message_id;
} event_kinds[ELIDED_EVENT_KIND_MAX] = {
	[ELIDED_EVENT_LOCK_OFF] = { "lock-off", "f7414c92f5cc43bf9c7906c9b84e3326" },
	[ELIDED_EVENT_LOCK_ON] = { "lock-on", "c58be9b35edc494e8c17c172bafc0424" },
	[ELIDED_EVENT_PROCESS_MODE] = { "process-mode", "7e1586fc44834a10be48d2015859146d" },
	[ELIDED_EVENT_OVERRIDE] = { "override", "89e4c94ce82a4d3fa8eb8d3a9db035df" },
	[ELIDED_EVENT_OVERRIDE_RESET] = { "override-reset", "7f6c6ea6259c476a8359baba7a8a938e" },
	[ELIDED_EVENT_OWNER_CHANGED] = { "owner-changed", "508bd2eea93c4f6c9d5df872d452e624" },
	[ELIDED_EVENT_RELOAD] = { "reload", "3621be7ce0a340fba8a54d86ead6bb7a" },
};

static bool native_journal;

const char *elided_event_name(enum elided_event_kind kind)
{
	return kind < ELIDED_EVENT_KIND_MAX ? event_kinds[kind].name : "unknown";
}

const char *elided_event_message_id(enum elided_event_kind kind)
{
	return kind < ELIDED_EVENT_KIND_MAX ? event_kinds[kind].message_id : NULL;
}

struct field_writer {
	struct iovec *iov;
	size_t n;
	char *buf;
	size_t size, used;
};

/* "NAME=value" into the writer, control characters made '?'; a field
 * that no longer fits is left out whole. */
static void add_field(struct field_writer *w, const char *name, const char *value)
{
	size_t name_len = strlen(name), value_len = strlen(value);
	char *at = w->buf + w->used;

	if (w->n >= ELIDED_EVENT_FIELDS || w->used + name_len + 1 + value_len > w->size)
		return;
	memcpy(at, name, name_len);
	at[name_len] = '=';
	for (size_t i = 0; i < value_len; i++) {
		unsigned char c = (unsigned char)value[i];

		at[name_len + 1 + i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	w->iov[w->n++] = (struct iovec){ .iov_base = at, .iov_len = name_len + 1 + value_len };
	w->used += name_len + 1 + value_len;
}

static void add_uint(struct field_writer *w, const char *name, unsigned long long value)
{
	char text[24];

	snprintf(text, sizeof(text), "%llu", value);
	add_field(w, name, text);
}

size_t elided_event_fields(const struct elided_event *ev, const char *message, struct iovec *iov, char *buf,
			   size_t size)
{
	struct field_writer w = { .iov = iov, .buf = buf, .size = size };
	const char *id = elided_event_message_id(ev->kind);

	add_field(&w, "MESSAGE", message);
	if (id)
		add_field(&w, "MESSAGE_ID", id);
	add_uint(&w, "PRIORITY", (unsigned long long)ev->priority);
	add_field(&w, "SYSLOG_IDENTIFIER", "elided");
	add_field(&w, "ELIDE_EVENT", elided_event_name(ev->kind));
	if (ev->pid > 0) {
		/* OBJECT_PID: journald adds the process's OBJECT_EXE, _UID... */
		add_uint(&w, "OBJECT_PID", (unsigned long long)ev->pid);
		add_uint(&w, "ELIDE_PID", (unsigned long long)ev->pid);
		add_uint(&w, "ELIDE_UID", (unsigned long long)ev->uid);
	}
	if (ev->exe && ev->exe[0])
		add_field(&w, "ELIDE_EXE", ev->exe);
	if (ev->lock && ev->lock[0])
		add_field(&w, "ELIDE_LOCK", ev->lock);
	if (ev->mode)
		add_field(&w, "ELIDE_MODE", ev->mode);
	if (ev->source)
		add_field(&w, "ELIDE_SOURCE", ev->source);
	if (ev->reason && ev->reason[0])
		add_field(&w, "ELIDE_REASON", ev->reason);
	if (ev->caller_uid != ELIDED_NO_UID)
		add_uint(&w, "ELIDE_CALLER_UID", (unsigned long long)ev->caller_uid);
	if (ev->kind == ELIDED_EVENT_OWNER_CHANGED && ev->old_uid != ELIDED_NO_UID)
		add_uint(&w, "ELIDE_OLD_UID", (unsigned long long)ev->old_uid);
	return w.n;
}

bool elided_events_stderr_is_journal(void)
{
	const char *stream = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!stream || sscanf(stream, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void elided_events_init(bool native)
{
	native_journal = native;
}

/* Whose per-uid log budget an event spends: the unprivileged side of it,
 * so that a user's processes (thousands of locks backing off, a program
 * toggling its euid) cannot flood the journal.  Root's are not limited. */
static uid_t event_charged_uid(const struct elided_event *ev)
{
	if (ev->kind == ELIDED_EVENT_OWNER_CHANGED && ev->old_uid != ELIDED_NO_UID && ev->old_uid != 0)
		return ev->old_uid;
	return ev->pid > 0 ? ev->uid : 0;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void elided_event(struct elided *d, const struct elided_event *ev, const char *fmt, ...)
{
	char message[512], buf[2048];
	struct iovec iov[ELIDED_EVENT_FIELDS];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);

	if (ev->priority <= log_get_max_priority() &&
	    (!d || log_ratelimit_allow(&d->ratelimit, event_charged_uid(ev), ev->priority, monotonic_ns()))) {
		n = native_journal ? elided_event_fields(ev, message, iov, buf, sizeof(buf)) : 0;
		/* The journal gone (restarted, full): the line still goes out. */
		if (!n || sd_journal_sendv(iov, (int)n) < 0)
			log_full(ev->priority, "%s", message);
	}
	if (d)
		elided_bus_emit_event(d, ev);
}
