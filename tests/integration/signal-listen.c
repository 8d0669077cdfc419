/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * signal-listen [--subscribe] SECONDS: connect to the system bus
 * ($DBUS_SYSTEM_BUS_ADDRESS), match every org.elide.Manager1 signal from
 * anyone, Subscribe() to elided when asked, print "ready", then one line
 * per signal received ("ProcessAdded PID EXE", "ProcessRemoved PID") for
 * SECONDS.  For test-elided-privacy.sh: what a user's client gets to see.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-bus.h>

static int on_signal(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *member = sd_bus_message_get_member(m);
	const char *exe = "";
	uint32_t pid = 0;

	if (member && !strcmp(member, "ProcessAdded"))
		sd_bus_message_read(m, "us", &pid, &exe);
	else
		sd_bus_message_read(m, "u", &pid);
	printf("%s %u%s%s\n", member ? member : "?", pid, *exe ? " " : "", exe);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	sd_bus *bus = NULL;
	sd_bus_error error = SD_BUS_ERROR_NULL;
	bool subscribe = argc > 1 && !strcmp(argv[1], "--subscribe");
	struct timespec start, now;
	long seconds;
	int r;

	if (argc != 2 + subscribe) {
		fprintf(stderr, "usage: signal-listen [--subscribe] SECONDS\n");
		return 2;
	}
	seconds = strtol(argv[1 + subscribe], NULL, 10);
	r = sd_bus_open_system(&bus);
	if (r < 0) {
		fprintf(stderr, "signal-listen: cannot connect: %s\n", strerror(-r));
		return 1;
	}
	r = sd_bus_add_match(bus, NULL, "type='signal',interface='org.elide.Manager1'", on_signal, NULL);
	if (r < 0) {
		fprintf(stderr, "signal-listen: cannot add the match: %s\n", strerror(-r));
		return 1;
	}
	if (subscribe) {
		r = sd_bus_call_method(bus, "org.elide.elided1", "/org/elide/elided1", "org.elide.Manager1", "Subscribe",
				       &error, NULL, NULL);
		if (r < 0) {
			fprintf(stderr, "signal-listen: Subscribe: %s\n", error.message ? error.message : strerror(-r));
			return 1;
		}
	}
	printf("ready\n");
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		r = sd_bus_process(bus, NULL);
		if (r < 0) {
			fprintf(stderr, "signal-listen: %s\n", strerror(-r));
			return 1;
		}
		if (r > 0)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= seconds)
			break;
		sd_bus_wait(bus, 200 * 1000);
	}
	sd_bus_flush_close_unref(bus);
	return 0;
}
