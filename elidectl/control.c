/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl set / reset / reload: change what elided applies at runtime.
 * Overrides live in elided (until reset, or until the process exits); they
 * are not written to the configuration.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "elidectl.h"
#include "log.h"

static bool valid_mode(const char *m)
{
	return strcmp(m, "on") == 0 || strcmp(m, "off") == 0 || strcmp(m, "adaptive") == 0 || strcmp(m, "watch") == 0;
}

static int call(struct source *s, const char *what, const char *method, const char *types, ...)
{
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
	sd_bus *bus = source_bus(s);
	va_list ap;
	int r;

	r = sd_bus_message_new_method_call(bus, &m, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
					   method);
	if (r >= 0 && types) {
		va_start(ap, types);
		r = sd_bus_message_appendv(m, types, ap);
		va_end(ap);
	}
	if (r < 0)
		return bus_error_exit(what, NULL, r);
	r = sd_bus_call(bus, m, 0, &e, &reply);
	if (r < 0)
		return bus_error_exit(what, &e, r);
	return EXIT_OK;
}

int verb_set(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	char what[256];
	pid_t pid;

	if (argc != 3) {
		log_error("usage: set PID [--lock NAME] off|on|adaptive|watch");
		return EXIT_USAGE;
	}
	if (parse_pid(argv[1], &pid) < 0) {
		log_error("invalid PID '%s'", argv[1]);
		return EXIT_USAGE;
	}
	if (!valid_mode(argv[2])) {
		log_error("invalid mode '%s': expected off, on, adaptive or watch", argv[2]);
		return EXIT_USAGE;
	}
	if (o->lock) {
		snprintf(what, sizeof(what), "cannot set lock %s of pid %d to %s", o->lock, (int)pid, argv[2]);
		return call(s, what, "SetLockMode", "uss", (uint32_t)pid, o->lock, argv[2]);
	}
	snprintf(what, sizeof(what), "cannot set pid %d to %s", (int)pid, argv[2]);
	return call(s, what, "SetProcessMode", "us", (uint32_t)pid, argv[2]);
}

int verb_reset(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	char what[256];
	pid_t pid;

	if (argc != 2) {
		log_error("usage: reset PID [--lock NAME]");
		return EXIT_USAGE;
	}
	if (parse_pid(argv[1], &pid) < 0) {
		log_error("invalid PID '%s'", argv[1]);
		return EXIT_USAGE;
	}
	if (o->lock) {
		snprintf(what, sizeof(what), "cannot reset lock %s of pid %d", o->lock, (int)pid);
		return call(s, what, "ResetLock", "us", (uint32_t)pid, o->lock);
	}
	snprintf(what, sizeof(what), "cannot reset pid %d", (int)pid);
	return call(s, what, "ResetProcess", "u", (uint32_t)pid);
}

int verb_reload(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	(void)o;
	(void)argv;
	if (argc != 1) {
		log_error("reload takes no arguments");
		return EXIT_USAGE;
	}
	/* The daemon's error is "FILE:LINE: what"; the old policy stays. */
	return call(s, "reload refused, the running configuration is kept", "Reload", NULL);
}
