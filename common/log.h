/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One small logging module for every part of elide.
 *
 * Messages go to stderr as "PREFIX: message".  With log_set_journal_prefix(true)
 * (elided under systemd) a line is "<N>message" instead: the syslog priority
 * that journald reads, and no prefix, since journald adds the name itself.  Formatting uses a stack buffer and one write(2): no stdio
 * locks and no allocation, so libelide may log from inside pthread wrappers.
 */
#ifndef ELIDE_LOG_H
#define ELIDE_LOG_H

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <syslog.h>

#include "macros.h"

void log_set_prefix(const char *prefix);
void log_set_max_priority(int priority);
int log_get_max_priority(void);
void log_set_journal_prefix(bool enable);
void log_set_fd(int fd);
/* Control bytes of messages as \xNN, '\' as "\\" (elided: messages name
 * what processes chose).  Off by default (libelide's stack is the program's). */
void log_set_escape(bool enable);

/* Returns -error (or 0 if error is 0), so callers can `return log_error_errno(...)`. */
int log_full_errno(int priority, int error, const char *fmt, ...) _printf_(3, 4);
void log_full(int priority, const char *fmt, ...) _printf_(2, 3);
void log_fullv(int priority, const char *fmt, va_list ap) _printf_(2, 0);

/*
 * Per-uid rate limiting for messages a local user can trigger at will (bad
 * segments, garbage entries, leftover files): at most `burst` messages
 * about one uid per window; the rest are counted, and once the window has
 * ended one line says "suppressed N messages about uid U".  The state is
 * the caller's (elided's), in fixed slots: no allocation.  uid 0 is never
 * limited: only root can write root's files, and root can flood the
 * journal anyway.  Uids beyond the slots share one ("other uids").
 */
#define LOG_RATELIMIT_SLOTS 64

struct log_ratelimit_slot {
	uint64_t window_start_ns;
	uid_t uid;
	unsigned shown, suppressed;
	int priority;                 /* the most urgent one suppressed */
	bool used;
};

struct log_ratelimit {
	uint64_t window_ns;
	unsigned burst;
	struct log_ratelimit_slot slots[LOG_RATELIMIT_SLOTS];
	struct log_ratelimit_slot other;
};

void log_ratelimit_init(struct log_ratelimit *rl, uint64_t window_ns, unsigned burst);
/* Whether a message about `uid` at `priority` may go out at now_ns (CLOCK_MONOTONIC);
 * counts it either way.  Writes the summary of an ended window first. */
bool log_ratelimit_allow(struct log_ratelimit *rl, uid_t uid, int priority, uint64_t now_ns);
/* The summary lines of windows ended by now_ns; frees their slots.  Call it
 * now and then (elided: every interval) so that a summary never waits for
 * the next message. */
void log_ratelimit_flush(struct log_ratelimit *rl, uint64_t now_ns);
/* log_full through the limiter (rl NULL: not limited). */
void log_uid(struct log_ratelimit *rl, uid_t uid, int priority, const char *fmt, ...) _printf_(4, 5);

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)
#define log_error_errno(err, ...) log_full_errno(LOG_ERR, err, __VA_ARGS__)
#define log_warning_errno(err, ...) log_full_errno(LOG_WARNING, err, __VA_ARGS__)
#define log_oom() log_full_errno(LOG_ERR, ENOMEM, "out of memory")

#endif
