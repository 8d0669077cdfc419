/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bus-flood: load for elided's D-Bus interface, on the system bus
 * ($DBUS_SYSTEM_BUS_ADDRESS).  For test-elided-bus.sh and bench/bus-flood.sh.
 *
 *   bus-flood flood CONNECTIONS SECONDS METHOD [WINDOW]
 *       CONNECTIONS connections, each keeping WINDOW (default 64) calls of
 *       METHOD (no arguments: Subscribe, GetStatus, ListProcesses, ...) to
 *       elided in flight for SECONDS; prints "calls N replies N errors N"
 *       and the first error's name.
 *   bus-flood once CONNECTIONS METHOD
 *       CONNECTIONS connections, one call of METHOD each, all open at once;
 *       waits for every answer (however long a loaded machine takes) and
 *       prints as flood does.
 *   bus-flood seq COUNT elided|bus
 *       COUNT sequential calls on one connection, to elided's GetStatus or
 *       to the bus daemon's own Ping; prints the seconds they took.
 *   bus-flood probe COUNT PAUSE_MS [elided|bus]
 *       COUNT calls of elided's GetStatus (or the bus daemon's GetId), one
 *       every PAUSE_MS, on one connection; prints each call's milliseconds
 *       ("error NAME" when it failed), then "max MS".
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#define NAME "org.elide.elided1"
#define PATH "/org/elide/elided1"
#define IFACE "org.elide.Manager1"

static const char *method;
static unsigned long calls, replies, errors;
static char first_error[256];
static bool stopping;
static bool once; /* one call per connection, until every one is answered */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int send_one(sd_bus *bus);

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	sd_bus *bus = userdata;
	const sd_bus_error *e = sd_bus_message_get_error(m);

	(void)ret_error;
	if (e) {
		errors++;
		if (!first_error[0])
			snprintf(first_error, sizeof(first_error), "%s (%s)", e->name ? e->name : "?",
				 e->message ? e->message : "");
	} else {
		replies++;
	}
	if (once) {
		if (replies + errors == calls)
			return sd_event_exit(sd_bus_get_event(bus), 0);
		return 0;
	}
	/* Keep the window full until the end. */
	if (!stopping)
		send_one(bus);
	return 0;
}

static int send_one(sd_bus *bus)
{
	int r = sd_bus_call_method_async(bus, NULL, NAME, PATH, IFACE, method, on_reply, bus, NULL);

	if (r >= 0)
		calls++;
	return r;
}

static int on_end(sd_event_source *s, uint64_t usec, void *userdata)
{
	(void)usec;
	(void)userdata;
	stopping = true;
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int flood(long nconn, long seconds, long window)
{
	sd_event *e = NULL;
	sd_bus **buses = calloc((size_t)nconn, sizeof(*buses));
	uint64_t now;
	int r;

	if (!buses)
		return 1;
	r = sd_event_default(&e);
	if (r < 0)
		return fprintf(stderr, "bus-flood: sd_event_default: %s\n", strerror(-r)), 1;
	for (long i = 0; i < nconn; i++) {
		r = sd_bus_open_system(&buses[i]);
		if (r < 0)
			return fprintf(stderr, "bus-flood: connection %ld: %s\n", i, strerror(-r)), 1;
		/* Long enough to outlast the flood: a timeout is not what we measure. */
		sd_bus_set_method_call_timeout(buses[i], (uint64_t)(seconds + 30) * 1000000u);
		r = sd_bus_attach_event(buses[i], e, 0);
		if (r < 0)
			return fprintf(stderr, "bus-flood: attach: %s\n", strerror(-r)), 1;
		for (long k = 0; k < window; k++)
			send_one(buses[i]);
	}
	if (!once) {
		sd_event_now(e, CLOCK_MONOTONIC, &now);
		sd_event_add_time(e, NULL, CLOCK_MONOTONIC, now + (uint64_t)seconds * 1000000u, 0, on_end, NULL);
	}
	sd_event_loop(e);
	printf("calls %lu replies %lu errors %lu%s%s\n", calls, replies, errors, first_error[0] ? " first " : "",
	       first_error);
	/* Leave without waiting for what is still in flight. */
	for (long i = 0; i < nconn; i++)
		sd_bus_close_unref(buses[i]);
	free(buses);
	sd_event_unref(e);
	return 0;
}

static int sequential(long count, bool to_elided)
{
	sd_bus *bus = NULL;
	double t0;
	int r;

	r = sd_bus_open_system(&bus);
	if (r < 0)
		return fprintf(stderr, "bus-flood: cannot connect: %s\n", strerror(-r)), 1;
	/* The connection's own start-up is not part of the figure. */
	sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.Peer", "Ping",
			   NULL, NULL, NULL);
	t0 = now_s();
	for (long i = 0; i < count; i++) {
		sd_bus_error error = SD_BUS_ERROR_NULL;

		if (to_elided)
			r = sd_bus_call_method(bus, NAME, PATH, IFACE, "GetStatus", &error, NULL, NULL);
		else
			r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					       "org.freedesktop.DBus", "GetId", &error, NULL, NULL);
		if (r < 0) {
			fprintf(stderr, "bus-flood: call %ld: %s\n", i, error.message ? error.message : strerror(-r));
			sd_bus_error_free(&error);
			return 1;
		}
	}
	printf("%.3f\n", now_s() - t0);
	sd_bus_flush_close_unref(bus);
	return 0;
}

static int probe(long count, long pause_ms, bool to_elided)
{
	sd_bus *bus = NULL;
	double worst = 0;
	int r;

	r = sd_bus_open_system(&bus);
	if (r < 0)
		return fprintf(stderr, "bus-flood: cannot connect: %s\n", strerror(-r)), 1;
	for (long i = 0; i < count; i++) {
		sd_bus_error error = SD_BUS_ERROR_NULL;
		struct timespec ts = { pause_ms / 1000, (pause_ms % 1000) * 1000000L };
		double t0 = now_s(), ms;

		if (to_elided)
			r = sd_bus_call_method(bus, NAME, PATH, IFACE, "GetStatus", &error, NULL, NULL);
		else
			r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					       "org.freedesktop.DBus", "GetId", &error, NULL, NULL);
		ms = (now_s() - t0) * 1e3;
		if (r < 0)
			printf("error %s\n", error.name ? error.name : strerror(-r));
		else
			printf("%.1f\n", ms);
		if (r >= 0 && ms > worst)
			worst = ms;
		fflush(stdout);
		sd_bus_error_free(&error);
		nanosleep(&ts, NULL);
	}
	printf("max %.1f\n", worst);
	sd_bus_flush_close_unref(bus);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "flood")) {
		method = argv[4];
		return flood(strtol(argv[2], NULL, 10), strtol(argv[3], NULL, 10),
			     argc > 5 ? strtol(argv[5], NULL, 10) : 64);
	}
	if (argc == 4 && !strcmp(argv[1], "once")) {
		/* 90 s: only the calls' timeout, far beyond any answer. */
		method = argv[3];
		once = true;
		return flood(strtol(argv[2], NULL, 10), 90, 1);
	}
	if (argc == 4 && !strcmp(argv[1], "seq"))
		return sequential(strtol(argv[2], NULL, 10), !strcmp(argv[3], "elided"));
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "probe"))
		return probe(strtol(argv[2], NULL, 10), strtol(argv[3], NULL, 10), argc == 4 || strcmp(argv[4], "bus"));
	fprintf(stderr, "usage: bus-flood flood CONNECTIONS SECONDS METHOD [WINDOW]\n"
			"       bus-flood once CONNECTIONS METHOD\n"
			"       bus-flood seq COUNT elided|bus\n"
			"       bus-flood probe COUNT PAUSE_MS [elided|bus]\n");
	return 2;
}
