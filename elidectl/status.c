/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl status: the daemon (configuration, last reload, discovery), the
 * hardware verdict, totals and the busiest processes.  Without elided: what
 * the segments and this machine's CPU say, and exit status 5.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "elidectl.h"
#include "hw.h"
#include "json.h"
#include "log.h"
#include "table.h"
#include "terminal.h"

#define BUSIEST 5

struct daemon_status {
	char *version, *discovery, *runtime_dir, *last_reload, *rtm_reason, *summary;
	char *observer;               /* LockWaitObserver; NULL from an elided without it */
	char **config_files;
	int rtm_usable;
	double interval;
	uint32_t processes, eliding;
	double commits_per_sec, aborts_per_sec, cycles_lost_per_sec;
	/* Segments elided does not track; have_unseen false with an older elided. */
	bool have_unseen;
	uint32_t refused, over_cap, uids_at_cap;
	uint64_t refused_total, over_cap_total;
	/* Processes with libelide but no segment; false with an older elided. */
	bool have_no_segment;
	uint32_t no_segment;
	uint64_t no_segment_total;
};

static void daemon_status_free(struct daemon_status *d)
{
	free(d->version);
	free(d->discovery);
	free(d->observer);
	free(d->runtime_dir);
	free(d->last_reload);
	free(d->rtm_reason);
	free(d->summary);
	for (char **f = d->config_files; f && *f; f++)
		free(*f);
	free(d->config_files);
}

static int get_string(sd_bus *bus, const char *name, char **ret, sd_bus_error *e)
{
	return sd_bus_get_property_string(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, name, e, ret);
}

static int get_trivial(sd_bus *bus, const char *name, char type, void *ret)
{
	return sd_bus_get_property_trivial(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, name, NULL,
					   type, ret);
}

/* An elided from before these properties: the line is left out. */
static void read_unseen(sd_bus *bus, struct daemon_status *d)
{
	d->have_unseen = get_trivial(bus, "SegmentsRefused", 'u', &d->refused) >= 0 &&
			 get_trivial(bus, "SegmentsOverCap", 'u', &d->over_cap) >= 0 &&
			 get_trivial(bus, "UidsAtCap", 'u', &d->uids_at_cap) >= 0 &&
			 get_trivial(bus, "SegmentsRefusedTotal", 't', &d->refused_total) >= 0 &&
			 get_trivial(bus, "SegmentsOverCapTotal", 't', &d->over_cap_total) >= 0;
	d->have_no_segment = d->have_unseen &&
			     get_trivial(bus, "ProcessesWithoutSegment", 'u', &d->no_segment) >= 0 &&
			     get_trivial(bus, "ProcessesWithoutSegmentTotal", 't', &d->no_segment_total) >= 0;
}

static int read_daemon(sd_bus *bus, struct daemon_status *d, sd_bus_error *e)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	const char *summary;
	int r;

	if ((r = get_string(bus, "Version", &d->version, e)) < 0 ||
	    (r = get_string(bus, "DiscoveryMethod", &d->discovery, e)) < 0 ||
	    (r = get_string(bus, "RuntimeDirectory", &d->runtime_dir, e)) < 0 ||
	    (r = get_string(bus, "LastReload", &d->last_reload, e)) < 0 ||
	    (r = get_string(bus, "RtmReason", &d->rtm_reason, e)) < 0)
		return r;
	/* An elided from before the property: the line is left out. */
	if (get_string(bus, "LockWaitObserver", &d->observer, NULL) < 0)
		d->observer = NULL;
	r = sd_bus_get_property_strv(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "ConfigFiles", e,
				     &d->config_files);
	if (r < 0)
		return r;
	r = sd_bus_get_property_trivial(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "RtmUsable", e,
					'b', &d->rtm_usable);
	if (r < 0)
		return r;
	r = sd_bus_get_property_trivial(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "Interval", e,
					'd', &d->interval);
	if (r < 0)
		return r;
	r = sd_bus_call_method(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "GetStatus", e, &reply,
			       NULL);
	if (r < 0)
		return r;
	r = sd_bus_message_read(reply, "suuddd", &summary, &d->processes, &d->eliding, &d->commits_per_sec,
				&d->aborts_per_sec, &d->cycles_lost_per_sec);
	if (r < 0)
		return r;
	d->summary = strdup(summary);
	if (!d->summary)
		return -ENOMEM;
	read_unseen(bus, d);
	return 0;
}

/* "             Key: value", the value wrapped at the terminal's width. */
static void line(const char *key, const char *value)
{
	char clean[1024], prefix[64];

	sanitize_text(value, clean, sizeof(clean));
	snprintf(prefix, sizeof(prefix), "%16s: ", key);
	print_wrapped(stdout, prefix, 18, clean, terminal_width());
}

static void status_json(const struct daemon_status *d, bool daemon, const struct elide_hw *hw,
			struct source *s, struct seg_snapshot **procs, size_t n, bool pretty)
{
	uint64_t now = now_realtime_ns();
	struct json j;

	json_init(&j, stdout, pretty);
	json_begin_object(&j);
	json_key(&j, "daemon");
	json_string(&j, daemon ? "running" : "not running");
	if (daemon) {
		json_key(&j, "version");
		json_string(&j, d->version);
		json_key(&j, "config_files");
		json_begin_array(&j);
		for (char **f = d->config_files; f && *f; f++)
			json_string(&j, *f);
		json_end_array(&j);
		json_key(&j, "last_reload");
		json_last_reload(&j, d->last_reload);
		json_key(&j, "discovery");
		json_discovery(&j, d->discovery);
		if (d->observer) {
			json_key(&j, "lock_wait_observer");
			json_string(&j, d->observer);
		}
		json_key(&j, "runtime_directory");
		json_string(&j, d->runtime_dir);
		json_key(&j, "interval");
		json_double(&j, d->interval);
	}
	json_key(&j, "rtm_usable");
	json_bool(&j, daemon ? d->rtm_usable : hw->rtm_usable);
	json_key(&j, "rtm_reason");
	json_string(&j, daemon ? d->rtm_reason : hw->reason);
	json_key(&j, "processes");
	json_uint(&j, n);
	json_key(&j, "busiest");
	json_begin_array(&j);
	for (size_t i = 0; i < n && i < BUSIEST; i++) {
		struct proc_totals t;

		totals_of(s, procs[i], now, &t);
		json_begin_object(&j);
		json_key(&j, "pid");
		json_int(&j, procs[i]->pid);
		json_key(&j, "exe");
		json_string(&j, procs[i]->header.exe);
		json_key(&j, "commits_per_sec");
		if (t.commits_per_sec < 0)
			json_null(&j);
		else
			json_double(&j, t.commits_per_sec);
		json_end_object(&j);
	}
	json_end_array(&j);
	if (daemon) {
		json_key(&j, "eliding");
		json_uint(&j, d->eliding);
		json_key(&j, "commits_per_sec");
		json_double(&j, d->commits_per_sec);
		json_key(&j, "aborts_per_sec");
		json_double(&j, d->aborts_per_sec);
		json_key(&j, "cycles_lost_per_sec");
		json_double(&j, d->cycles_lost_per_sec);
		if (d->have_unseen) {
			json_key(&j, "unseen");
			json_begin_object(&j);
			json_key(&j, "segments_refused");
			json_uint(&j, d->refused);
			json_key(&j, "segments_over_cap");
			json_uint(&j, d->over_cap);
			json_key(&j, "uids_at_cap");
			json_uint(&j, d->uids_at_cap);
			json_key(&j, "segments_refused_total");
			json_uint(&j, d->refused_total);
			json_key(&j, "segments_over_cap_total");
			json_uint(&j, d->over_cap_total);
			if (d->have_no_segment) {
				json_key(&j, "processes_without_segment");
				json_uint(&j, d->no_segment);
				json_key(&j, "processes_without_segment_total");
				json_uint(&j, d->no_segment_total);
			}
			json_end_object(&j);
		}
	}
	json_end_object(&j);
	json_finish(&j);
}

/* Busiest first, by commits/s: the order of status's short table and JSON. */
static struct source *sort_source;
static int cmp_busiest(const void *a, const void *b)
{
	const struct seg_snapshot *x = *(struct seg_snapshot *const *)a, *y = *(struct seg_snapshot *const *)b;
	struct proc_totals tx, ty;
	uint64_t now = now_realtime_ns();

	totals_of(sort_source, x, now, &tx);
	totals_of(sort_source, y, now, &ty);
	if (tx.commits_per_sec != ty.commits_per_sec)
		return tx.commits_per_sec < ty.commits_per_sec ? 1 : -1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

int verb_status(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	struct daemon_status d = {};
	struct seg_snapshot **procs = NULL;
	struct elide_hw hw = {};
	size_t n = 0;
	char buf[512];
	int r, ret = EXIT_OK;

	(void)argv;
	if (argc != 1) {
		log_error("status takes no arguments");
		return EXIT_USAGE;
	}
	if (o->daemon) {
		r = read_daemon(source_bus(s), &d, &e);
		if (r < 0) {
			daemon_status_free(&d);
			return bus_error_exit("cannot read elided's status", &e, r);
		}
	} else {
		elide_hw_detect(&hw);
		ret = EXIT_NO_DAEMON;
	}
	r = source_list(s, &procs, &n);
	if (r < 0) {
		/* Say what we know; the processes are not that. */
		log_warning("cannot list the processes: %s", s->error[0] ? s->error : strerror(-r));
		procs = NULL;
		n = 0;
	}
	sort_source = s;
	if (n > 1)
		qsort(procs, n, sizeof(*procs), cmp_busiest);

	if (o->json) {
		status_json(&d, o->daemon, &hw, s, procs, n, o->json_pretty);
		goto out;
	}
	if (o->daemon) {
		snprintf(buf, sizeof(buf), "running, version %s%s%s", d.version, o->host ? ", on " : "",
			 o->host ? o->host : "");
		line("elided", buf);
		buf[0] = '\0';
		for (char **f = d.config_files; f && *f; f++)
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", f == d.config_files ? "" : ", ",
				 *f);
		line("Config", buf[0] ? buf : "-");
		line("Last reload", d.last_reload[0] ? d.last_reload : "none since start");
		line("Discovery", d.discovery);
		if (d.observer)
			line("Lock waits", d.observer);
		line("Runtime dir", d.runtime_dir);
		snprintf(buf, sizeof(buf), "%.2gs", d.interval);
		line("Interval", buf);
		snprintf(buf, sizeof(buf), "%s: %s", d.rtm_usable ? "RTM usable" : "RTM not usable", d.rtm_reason);
		line("Hardware", buf);
		snprintf(buf, sizeof(buf), "%u tracked, %u eliding", d.processes, d.eliding);
		line("Processes", buf);
		snprintf(buf, sizeof(buf), "%.1f commits/s, %.1f aborts/s, %.0f cycles lost/s (last interval)",
			 d.commits_per_sec, d.aborts_per_sec, d.cycles_lost_per_sec);
		line("Totals", buf);
		if (d.have_unseen) {
			/* What elided cannot see belongs next to what it sees. */
			if (d.refused || d.over_cap || d.refused_total || d.over_cap_total)
				snprintf(buf, sizeof(buf),
					 "%u segments refused (invalid), %u over the per-uid cap (%u uid%s at "
					 "daemon.max_segments_per_uid); since start %" PRIu64 " refused, %" PRIu64
					 " over the cap",
					 d.refused, d.over_cap, d.uids_at_cap, d.uids_at_cap == 1 ? "" : "s",
					 d.refused_total, d.over_cap_total);
			else
				snprintf(buf, sizeof(buf), "none (every segment in the runtime directory is tracked)");
			line("Not tracked", buf);
		}
		if (d.have_no_segment) {
			if (d.no_segment || d.no_segment_total)
				snprintf(buf, sizeof(buf),
					 "%u process%s with libelide but no segment (runtime directory full, "
					 "unwritable or missing for %s, or stats=0); since start %" PRIu64,
					 d.no_segment, d.no_segment == 1 ? "" : "es", d.no_segment == 1 ? "it" : "them",
					 d.no_segment_total);
			else
				snprintf(buf, sizeof(buf), "none (every process with libelide has a segment)");
			line("No segment", buf);
		}
	} else {
		line("elided", "not running: reading segments directly (read-only)");
		snprintf(buf, sizeof(buf), "%s: %s", hw.rtm_usable ? "RTM usable" : "RTM not usable", hw.reason);
		line("Hardware", buf);
		snprintf(buf, sizeof(buf), "%zu with libelide (rates are averages since start)", n);
		line("Processes", buf);
	}
	if (n > 0) {
		/* Without RTM nothing commits: the processes that wait most are
		 * the busiest then (watch mode). */
		bool rtm = o->daemon ? d.rtm_usable : hw.rtm_usable;

		printf("\nBusiest processes%s:\n", rtm ? "" : " (by waiting)");
		r = print_rates(s, procs, n, rtm ? SORT_COMMITS : SORT_WAIT, BUSIEST, true, o->output);
		if (r < 0)
			ret = EXIT_FAIL;
	}
out:
	source_list_free(procs, n);
	daemon_status_free(&d);
	return ret;
}
