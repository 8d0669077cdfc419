/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fault injection for elided's tests: an LD_PRELOAD library that makes one
 * call fail, as an old kernel, a seccomp filter or fd exhaustion would.
 *
 *   ELIDE_FAULT=CALL[@NTH][:COUNT]    ELIDE_FAULT_ERRNO=N (optional)
 *
 * CALL is one of
 *   fork, pipe2                    every call is a candidate;
 *   pidfd_open, sd_event_add_io, sd_event_add_time_relative
 *                                  the NTH call (default 1) after each fork()
 *                                  that returned in the parent is: the calls
 *                                  that follow the symbolizer's fork, not
 *                                  those of the rest of the daemon;
 * COUNT (default 1; 0 = every time) candidates fail, then the fault is gone
 * and the calls go through.  A failing call returns what the real one
 * returns on error, with errno (or -errno for sd-event) ELIDE_FAULT_ERRNO,
 * else EAGAIN for fork, EMFILE for pipe2 and pidfd_open, ENOMEM for
 * sd-event, and writes "fault-inject: CALL failed: ERROR" to stderr.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <systemd/sd-event.h>
#include <unistd.h>

static struct {
	bool parsed;
	char call[64];
	unsigned nth, count, failed;
	int err;
	bool forked;                 /* a fork() returned in the parent */
	unsigned since_fork;         /* calls of CALL since then */
} f;

static void parse(void)
{
	const char *spec = getenv("ELIDE_FAULT"), *e = getenv("ELIDE_FAULT_ERRNO");
	char *p;

	if (f.parsed)
		return;
	f.parsed = true;
	f.nth = 1;
	f.count = 1;
	if (!spec)
		return;
	snprintf(f.call, sizeof(f.call), "%s", spec);
	p = strchr(f.call, ':');
	if (p) {
		*p = '\0';
		f.count = (unsigned)strtoul(p + 1, NULL, 10);
	}
	p = strchr(f.call, '@');
	if (p) {
		*p = '\0';
		f.nth = (unsigned)strtoul(p + 1, NULL, 10);
	}
	f.err = e ? atoi(e) : 0;
}

/* Whether this call of `call` fails; counts it. */
static bool should_fail(const char *call, bool after_fork, int default_err, int *err)
{
	parse();
	if (strcmp(f.call, call) != 0)
		return false;
	if (after_fork && (!f.forked || ++f.since_fork != f.nth))
		return false;
	if (f.count && f.failed >= f.count)
		return false;
	f.failed++;
	*err = f.err ? f.err : default_err;
	dprintf(STDERR_FILENO, "fault-inject: %s failed: %s\n", call, strerror(*err));
	return true;
}

static void *next(const char *name)
{
	void *fn = dlsym(RTLD_NEXT, name);

	if (!fn) {
		dprintf(STDERR_FILENO, "fault-inject: no %s\n", name);
		abort();
	}
	return fn;
}

pid_t fork(void)
{
	static pid_t (*real)(void);
	int err;
	pid_t pid;

	if (!real)
		real = next("fork");
	if (should_fail("fork", false, EAGAIN, &err)) {
		errno = err;
		return -1;
	}
	pid = real();
	if (pid > 0) {
		f.forked = true;
		f.since_fork = 0;
	}
	return pid;
}

int pipe2(int fds[2], int flags)
{
	static int (*real)(int[2], int);
	int err;

	if (!real)
		real = next("pipe2");
	if (should_fail("pipe2", false, EMFILE, &err)) {
		errno = err;
		return -1;
	}
	return real(fds, flags);
}

long syscall(long number, ...)
{
	static long (*real)(long, ...);
	long a[6];
	va_list ap;
	int err;

	if (!real)
		real = next("syscall");
	va_start(ap, number);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (number == SYS_pidfd_open && should_fail("pidfd_open", true, EMFILE, &err)) {
		errno = err;
		return -1;
	}
	return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int sd_event_add_io(sd_event *e, sd_event_source **s, int fd, uint32_t events, sd_event_io_handler_t callback,
		    void *userdata)
{
	static int (*real)(sd_event *, sd_event_source **, int, uint32_t, sd_event_io_handler_t, void *);
	int err;

	if (!real)
		real = next("sd_event_add_io");
	if (should_fail("sd_event_add_io", true, ENOMEM, &err))
		return -err;
	return real(e, s, fd, events, callback, userdata);
}

int sd_event_add_time_relative(sd_event *e, sd_event_source **s, clockid_t clock, uint64_t usec, uint64_t accuracy,
			       sd_event_time_handler_t callback, void *userdata)
{
	static int (*real)(sd_event *, sd_event_source **, clockid_t, uint64_t, uint64_t, sd_event_time_handler_t,
			   void *);
	int err;

	if (!real)
		real = next("sd_event_add_time_relative");
	if (should_fail("sd_event_add_time_relative", true, ENOMEM, &err))
		return -err;
	return real(e, s, clock, usec, accuracy, callback, userdata);
}
