/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* elidectl list: one line per process running with libelide. */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "elidectl.h"
#include "json.h"
#include "log.h"
#include "table.h"

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* With elided, rates are its: over the last interval; without, averages
 * since the process started with libelide. */
void totals_of(struct source *s, const struct seg_snapshot *snap, uint64_t now_ns, struct proc_totals *t)
{
	struct source_proc_info info;

	memset(t, 0, sizeof(*t));
	for (uint32_t i = 0; i < snap->nlocks; i++) {
		const struct elide_seg_lock *l = &snap->locks[i].lock;

		if (l->kind != ELIDE_SEG_KIND_OVERFLOW)
			t->locks++;
		/* The overflow entry's counts are real acquisitions too. */
		t->acquired = add_sat(t->acquired, l->stats[ELIDE_SEG_STAT_ACQUIRED]);
		t->attempts = add_sat(t->attempts, l->stats[ELIDE_SEG_STAT_ATTEMPTS]);
		t->commits = add_sat(t->commits, l->stats[ELIDE_SEG_STAT_COMMITS]);
		t->aborts = add_sat(t->aborts, lock_aborts(l));
		t->cycles_lost = add_sat(t->cycles_lost, l->stats[ELIDE_SEG_STAT_CYCLES_LOST]);
	}
	t->age = segment_age(snap, now_ns);
	t->commits_per_sec = t->age > 0 ? (double)t->commits / t->age : -1.0;
	t->cycles_lost_per_sec = t->age > 0 ? (double)t->cycles_lost / t->age : -1.0;
	t->acquired_per_sec = t->age > 0 ? (double)t->acquired / t->age : -1.0;
	/* The header's running total (a libelide that keeps one). */
	t->wait_per_sec = t->age > 0 && (snap->header.features & ELIDE_SEG_FEATURE_WAIT_TOTAL) ?
			  (double)snap->header.wait_ns / 1e9 / t->age : -1.0;
	t->abort_ratio = t->attempts ? (double)t->aborts / (double)t->attempts : -1.0;
	if (t->abort_ratio > 1)
		t->abort_ratio = 1;
	if (s && source_info(s, snap->pid, &info) == 0) {
		t->current = true;
		t->commits_per_sec = info.commits_per_sec;
		t->cycles_lost_per_sec = info.cycles_lost_per_sec;
		t->acquired_per_sec = info.acquired_per_sec;
		t->wait_per_sec = info.wait_per_sec;
		t->abort_ratio = info.abort_ratio;
		/* elided says 0 for an interval without attempts too; every
		 * attempt commits or aborts, so no commits and no aborts
		 * means there was none: the ratio is unknown, not 0%. */
		if (!(info.abort_ratio > 0) && !(info.commits_per_sec > 0))
			t->abort_ratio = -1.0;
	}
}

void user_name(uid_t uid, char *buf, size_t size)
{
	struct passwd pw, *result = NULL;
	char pwbuf[1024];

	if (getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &result) == 0 && result)
		snprintf(buf, size, "%s", result->pw_name);
	else
		snprintf(buf, size, "%u", (unsigned)uid);
}

static const char *null_if_empty(const char *s)
{
	return s && *s ? s : NULL;
}

static int list_json(struct source *s, struct seg_snapshot **procs, size_t n, const struct ctl_options *o, uint64_t now_ns)
{
	struct json j;

	json_init(&j, stdout, o->json_pretty);
	json_begin_array(&j);
	for (size_t i = 0; i < n; i++) {
		const struct seg_snapshot *p = procs[i];
		struct source_proc_info info;
		struct proc_totals t;
		struct proc_state ps;
		bool have_info;
		char user[64];

		totals_of(s, p, now_ns, &t);
		process_state(p, &ps);
		user_name(p->file_uid, user, sizeof(user));
		have_info = source_info(s, p->pid, &info) == 0;
		json_begin_object(&j);
		json_key(&j, "pid");
		json_int(&j, p->pid);
		json_key(&j, "uid");
		json_uint(&j, p->file_uid);
		json_key(&j, "user");
		json_string(&j, user);
		json_key(&j, "exe");
		json_string(&j, null_if_empty(p->header.exe));
		json_key(&j, "comm");
		json_string(&j, null_if_empty(p->header.comm));
		/* Only elided knows units: null without it, as for no unit. */
		json_key(&j, "unit");
		json_string(&j, have_info ? null_if_empty(info.unit) : NULL);
		json_key(&j, "elision");
		json_string(&j, p->header.elision == ELIDE_SEG_ELISION_ON ? "on" : "off");
		json_key(&j, "state");
		json_string(&j, ps.state);
		json_key(&j, "state_reason");
		json_string(&j, null_if_empty(ps.why));
		json_key(&j, "reason");
		json_string(&j, null_if_empty(p->header.status_reason));
		json_key(&j, "mode");
		json_string(&j, have_info ? info.mode : seg_mode_to_string(p->header.mode));
		/* 0: not known (elided does not pass it on). */
		json_key(&j, "sample");
		if (p->header.sample)
			json_uint(&j, p->header.sample);
		else
			json_null(&j);
		json_key(&j, "locks");
		json_uint(&j, t.locks);
		json_key(&j, "created_ns");
		if (p->header.created_ns)
			json_uint(&j, p->header.created_ns);
		else
			json_null(&j);
		json_key(&j, "seconds");
		if (t.age > 0)
			json_double(&j, t.age);
		else
			json_null(&j);
		json_key(&j, "acquired");
		json_uint(&j, t.acquired);
		json_key(&j, "attempts");
		json_uint(&j, t.attempts);
		json_key(&j, "commits");
		json_uint(&j, t.commits);
		json_key(&j, "aborts");
		json_uint(&j, t.aborts);
		json_key(&j, "cycles_lost");
		json_uint(&j, t.cycles_lost);
		json_key(&j, "commits_per_sec");
		if (t.commits_per_sec < 0)
			json_null(&j);
		else
			json_double(&j, t.commits_per_sec);
		json_key(&j, "abort_ratio");
		if (t.abort_ratio < 0)
			json_null(&j);
		else
			json_double(&j, t.abort_ratio);
		json_key(&j, "wait_per_sec");
		if (t.wait_per_sec < 0)
			json_null(&j);
		else
			json_double(&j, t.wait_per_sec);
		/* "interval": elided's last; "average": since the process started. */
		json_key(&j, "rates");
		json_string(&j, t.current ? "interval" : "average");
		json_end_object(&j);
	}
	json_end_array(&j);
	return json_finish(&j);
}

static const struct table_column list_columns[] = {
	{ "PID", TABLE_RIGHT, 0 },
	{ "USER", TABLE_SHRINK, 0.1 },
	{ "EXE", TABLE_SHRINK_MIDDLE, 0.3 },
	{ "COMM", TABLE_HIDDEN | TABLE_SHRINK, 0 },
	{ "UNIT", TABLE_HIDDEN | TABLE_SHRINK, 0.2 },
	{ "STATE", TABLE_SHRINK, 0.2 },
	{ "MODE", TABLE_HIDDEN, 0 },
	{ "LOCKS", TABLE_RIGHT, 0 },
	{ "ACQUIRED/s", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "COMMITS/s", TABLE_RIGHT, 0 },
	{ "ABORT%", TABLE_RIGHT, 0 },
	{ "CYCLES-LOST", TABLE_RIGHT, 0 },
	{ "CYCLES-LOST/s", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "UID", TABLE_HIDDEN | TABLE_RIGHT, 0 },
};

static int list_table(struct source *s, struct seg_snapshot **procs, size_t n, const struct ctl_options *o, uint64_t now_ns)
{
	struct table *t = NULL;
	int r;

	r = table_new(&t, "list", list_columns, ARRAY_SIZE(list_columns), o->output);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		const struct seg_snapshot *p = procs[i];
		struct source_proc_info info;
		struct proc_totals tot;
		struct proc_state ps;
		bool have_info;
		char user[64];

		totals_of(s, p, now_ns, &tot);
		process_state(p, &ps);
		have_info = source_info(s, p->pid, &info) == 0;
		user_name(p->file_uid, user, sizeof(user));
		if ((r = table_add_cellf(t, "%d", (int)p->pid)) < 0 ||
		    (r = table_add_cell(t, user)) < 0 ||
		    (r = table_add_cell(t, p->header.exe[0] ? p->header.exe : p->header.comm)) < 0 ||
		    (r = table_add_cell(t, p->header.comm[0] ? p->header.comm : "-")) < 0 ||
		    (r = table_add_cell(t, have_info && info.unit[0] ? info.unit : "-")) < 0 ||
		    (r = table_add_cellf(t, "%s%s%s%s", ps.state, ps.why[0] ? " (" : "", ps.why,
					 ps.why[0] ? ")" : "")) < 0)
			goto out;
		table_set_color(t, state_color(ps.state));
		if ((r = table_add_cell(t, have_info ? info.mode : seg_mode_to_string(p->header.mode))) < 0 ||
		    (r = table_add_cellf(t, "%u", tot.locks)) < 0 ||
		    (r = table_add_rate(t, tot.acquired_per_sec)) < 0 ||
		    (r = table_add_rate(t, tot.commits_per_sec)) < 0 ||
		    (r = table_add_ratio(t, tot.abort_ratio)) < 0 ||
		    (r = table_add_number(t, tot.cycles_lost)) < 0 ||
		    (r = table_add_rate(t, tot.cycles_lost_per_sec)) < 0 ||
		    (r = table_add_cellf(t, "%u", (unsigned)p->file_uid)) < 0)
			goto out;
	}
	r = table_print(t, stdout, o->legend);
	if (r == 0 && o->legend)
		printf("\n%zu process%s listed.\n", n, n == 1 ? "" : "es");
out:
	table_free(t);
	return r;
}

int verb_list(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	struct seg_snapshot **procs = NULL;
	size_t n = 0;
	int r;

	if (argc > 1) {
		log_error("list takes no arguments");
		return EXIT_USAGE;
	}
	if (o->sort_set || o->max_set) {
		log_error("--sort and --max apply to show only");
		return EXIT_USAGE;
	}
	r = source_list(s, &procs, &n);
	if (r < 0) {
		if (s->error[0]) {
			log_error("cannot list the processes: %s", s->error);
			return s->error_exit ? s->error_exit : EXIT_FAIL;
		}
		log_error_errno(r, "cannot read %s", s->location);
		return EXIT_FAIL;
	}
	if (s->counts.stale)
		log_info("%u stale segment%s of exited processes not listed", s->counts.stale,
			 s->counts.stale == 1 ? "" : "s");
	if (s->counts.unreadable)
		log_info("%u segment%s of other users' processes not readable", s->counts.unreadable,
			 s->counts.unreadable == 1 ? "" : "s");
	if (o->json)
		r = list_json(s, procs, n, o, now_realtime_ns());
	else
		r = list_table(s, procs, n, o, now_realtime_ns());
	source_list_free(procs, n);
	if (r == -EINVAL)
		return EXIT_USAGE; /* an unknown column, said */
	if (r < 0) {
		log_error_errno(r, "cannot write the list");
		return EXIT_FAIL;
	}
	return EXIT_OK;
}
