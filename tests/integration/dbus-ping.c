/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dbus-ping COUNT PAUSE_MS: connect once to the system bus
 * ($DBUS_SYSTEM_BUS_ADDRESS), then COUNT times call elided's ListProcesses
 * and print how long the answer took, in whole milliseconds, one line per
 * call ("error" for a call that failed), pausing PAUSE_MS between calls.
 * One connection: the figures are the bus and elided, not a client's
 * start-up.  For test-elided-symbolizer.sh (D-Bus answered during an
 * attack).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <systemd/sd-bus.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	sd_bus *bus = NULL;
	long count, pause_ms;
	int r;

	if (argc != 3)
		return fprintf(stderr, "usage: dbus-ping COUNT PAUSE_MS\n"), 2;
	count = strtol(argv[1], NULL, 10);
	pause_ms = strtol(argv[2], NULL, 10);
	r = sd_bus_open_system(&bus);
	if (r < 0)
		return fprintf(stderr, "dbus-ping: cannot connect to the system bus (%d)\n", r), 1;
	for (long i = 0; i < count; i++) {
		sd_bus_error error = SD_BUS_ERROR_NULL;
		sd_bus_message *reply = NULL;
		struct timespec ts = { pause_ms / 1000, (pause_ms % 1000) * 1000000L };
		double t0 = now_ms();

		r = sd_bus_call_method(bus, "org.elide.elided1", "/org/elide/elided1", "org.elide.Manager1",
				       "ListProcesses", &error, &reply, "");
		if (r < 0)
			printf("error %s\n", error.message ? error.message : "?");
		else
			printf("%.0f\n", now_ms() - t0);
		fflush(stdout);
		sd_bus_message_unref(reply);
		sd_bus_error_free(&error);
		nanosleep(&ts, NULL);
	}
	sd_bus_flush_close_unref(bus);
	return 0;
}
