/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One small logging module for every part of elide.
 *
 * Messages go to stderr as "PREFIX: message".  With log_set_journal_prefix(true)
 * (elided under systemd) each line starts with "<N>", the syslog priority that
 * journald reads.  Formatting uses a stack buffer and one write(2): no stdio
 * locks and no allocation, so libelide may log from inside pthread wrappers.
 */
#ifndef ELIDE_LOG_H
#define ELIDE_LOG_H

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <syslog.h>

#include "macros.h"

void log_set_prefix(const char *prefix);
void log_set_max_priority(int priority);
int log_get_max_priority(void);
void log_set_journal_prefix(bool enable);
void log_set_fd(int fd);

/* Returns -error (or 0 if error is 0), so callers can `return log_error_errno(...)`. */
int log_full_errno(int priority, int error, const char *fmt, ...) _printf_(3, 4);
void log_full(int priority, const char *fmt, ...) _printf_(2, 3);
void log_fullv(int priority, const char *fmt, va_list ap) _printf_(2, 0);

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)
#define log_error_errno(err, ...) log_full_errno(LOG_ERR, err, __VA_ARGS__)
#define log_warning_errno(err, ...) log_full_errno(LOG_WARNING, err, __VA_ARGS__)
#define log_oom() log_full_errno(LOG_ERR, ENOMEM, "out of memory")

#endif
