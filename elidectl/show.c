/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* elidectl show PID: one process's header and per-lock statistics. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-bus.h>

#include "elidectl.h"
#include "json.h"
#include "lock-rows.h"
#include "log.h"
#include "table.h"
#include "terminal.h"

static enum sort_key sort_key;

static uint64_t row_key(const struct lock_row *r)
{
	const uint64_t *st = r->ls->lock.stats;

	switch (sort_key) {
	case SORT_COMMITS:
		return st[ELIDE_SEG_STAT_COMMITS];
	case SORT_ABORTS:
		return r->aborts;
	case SORT_CONFLICT:
		return st[ELIDE_SEG_STAT_ABORT_CONFLICT];
	case SORT_CAPACITY:
		return st[ELIDE_SEG_STAT_ABORT_CAPACITY];
	case SORT_CYCLES:
		return st[ELIDE_SEG_STAT_CYCLES_LOST];
	case SORT_WAIT:
		return r->ls->lock.wait_ns;
	case SORT_ACQUIRED:
	case SORT_NAME:
		break;
	}
	return st[ELIDE_SEG_STAT_ACQUIRED];
}

/* Numbers descending, names ascending; the entry index breaks ties so the
 * order is stable across runs. */
static int cmp_rows(const void *a, const void *b)
{
	const struct lock_row *x = a, *y = b;
	int c;

	if (sort_key == SORT_NAME) {
		c = strcmp(x->name, y->name);
		if (c)
			return c;
	} else {
		uint64_t kx = row_key(x), ky = row_key(y);

		if (kx != ky)
			return kx < ky ? 1 : -1;
	}
	return (x->ls->index > y->ls->index) - (x->ls->index < y->ls->index);
}

static const char *null_if_empty(const char *s)
{
	return s && *s ? s : NULL;
}

static int show_json(struct source *s, struct json *j, const struct seg_snapshot *snap, const struct lock_row *rows,
		     size_t n)
{
	struct source_proc_info info;
	struct proc_state ps;
	bool have_info = source_info(s, snap->pid, &info) == 0;
	char addr[32], user[64];

	process_state(snap, &ps);
	user_name(snap->file_uid, user, sizeof(user));
	json_begin_object(j);
	json_key(j, "pid");
	json_int(j, snap->pid);
	json_key(j, "uid");
	json_uint(j, snap->file_uid);
	json_key(j, "user");
	json_string(j, user);
	json_key(j, "exe");
	json_string(j, null_if_empty(snap->header.exe));
	json_key(j, "comm");
	json_string(j, null_if_empty(snap->header.comm));
	json_key(j, "unit");
	json_string(j, have_info ? null_if_empty(info.unit) : NULL);
	/* elided does not pass libelide's version on. */
	json_key(j, "version");
	json_string(j, null_if_empty(snap->header.lib_version));
	json_key(j, "elision");
	json_string(j, snap->header.elision == ELIDE_SEG_ELISION_ON ? "on" : "off");
	json_key(j, "state");
	json_string(j, ps.state);
	json_key(j, "state_reason");
	json_string(j, null_if_empty(ps.why));
	json_key(j, "reason");
	json_string(j, null_if_empty(snap->header.status_reason));
	json_key(j, "mode");
	json_string(j, have_info ? info.mode : seg_mode_to_string(snap->header.mode));
	json_key(j, "rtm_usable");
	json_bool(j, snap->header.rtm_usable != 0);
	json_key(j, "sample");
	if (snap->header.sample)
		json_uint(j, snap->header.sample);
	else
		json_null(j);
	json_key(j, "created_ns");
	if (snap->header.created_ns)
		json_uint(j, snap->header.created_ns);
	else
		json_null(j);
	json_key(j, "bad_locks");
	json_uint(j, snap->nbad_locks);
	json_key(j, "locks");
	json_begin_array(j);
	for (size_t i = 0; i < n; i++) {
		const struct elide_seg_lock *l = &rows[i].ls->lock;
		const uint64_t *st = l->stats;
		bool overflow = l->kind == ELIDE_SEG_KIND_OVERFLOW;

		json_begin_object(j);
		json_key(j, "index");
		json_uint(j, rows[i].ls->index);
		json_key(j, "name");
		json_string(j, rows[i].name);
		json_key(j, "symbol");
		json_string(j, rows[i].sym.symbol[0] ? rows[i].sym.symbol : NULL);
		json_key(j, "address");
		snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)l->addr);
		json_string(j, overflow || s->synthetic ? NULL : addr);
		json_key(j, "kind");
		json_string(j, kind_name(l->kind));
		json_key(j, "callsite");
		json_string(j, overflow || !l->callsite ? NULL : rows[i].site.text);
		json_key(j, "acquired");
		json_uint(j, st[ELIDE_SEG_STAT_ACQUIRED]);
		json_key(j, "attempts");
		json_uint(j, st[ELIDE_SEG_STAT_ATTEMPTS]);
		json_key(j, "commits");
		json_uint(j, st[ELIDE_SEG_STAT_COMMITS]);
		json_key(j, "aborts");
		json_begin_object(j);
		for (unsigned c = 0; c < N_ABORT_CAUSES; c++) {
			json_key(j, abort_cause_name(c));
			json_uint(j, st[ELIDE_SEG_STAT_ABORT_CONFLICT + c]);
		}
		json_end_object(j);
		json_key(j, "fallbacks");
		json_uint(j, st[ELIDE_SEG_STAT_FALLBACKS]);
		json_key(j, "contended");
		json_uint(j, st[ELIDE_SEG_STAT_CONTENDED]);
		json_key(j, "skipped");
		json_uint(j, st[ELIDE_SEG_STAT_SKIPPED]);
		json_key(j, "cycles_lost");
		json_uint(j, st[ELIDE_SEG_STAT_CYCLES_LOST]);
		/* Contention: what waiting for it cost, and its sampled holds. */
		json_key(j, "wait_ns");
		json_uint(j, l->wait_ns);
		json_key(j, "wait_max_ns");
		json_uint(j, l->wait_max_ns);
		json_key(j, "hold_ns");
		json_uint(j, l->hold_ns);
		json_key(j, "hold_samples");
		json_uint(j, l->hold_samples);
		json_key(j, "hold_long");
		json_uint(j, l->hold_long);
		json_key(j, "hold_mean_ns");
		if (l->hold_samples)
			json_uint(j, l->hold_ns / l->hold_samples);
		else
			json_null(j);
		json_key(j, "state");
		json_string(j, state_name(l->state));
		/* The table's WHY: libelide's reason, or who decided. */
		json_key(j, "reason");
		json_string(j, lock_why(l));
		/* Who decided, when elided did: its configuration, an override
		 * (elidectl set) or its long-window adaptation; null otherwise. */
		json_key(j, "decided_by");
		json_string(j, decided_by_name(l));
		/* A learned decision: since when (seconds since the Epoch);
		 * null otherwise, or when not known (read without elided). */
		json_key(j, "learned_since");
		if (l->ctl_source == ELIDE_SEG_SOURCE_LEARNED && rows[i].ls->learned_since > 0)
			json_int(j, rows[i].ls->learned_since);
		else
			json_null(j);
		json_end_object(j);
	}
	json_end_array(j);
	json_end_object(j);
	return 0;
}

/* "       Key: value", the value ellipsised to the terminal's width. */
static void header_line(const char *key, const char *value, bool middle)
{
	char clean[512], fitted[512];
	size_t width = terminal_width();

	/* Every string here is the process's to write. */
	sanitize_text(value, clean, sizeof(clean));
	if (width > 12 + 8) {
		ellipsize(clean, width - 12, middle, fitted, sizeof(fitted));
		printf("%10s: %s\n", key, fitted);
	} else
		printf("%10s: %s\n", key, clean);
}

static void show_header(struct source *s, const struct seg_snapshot *snap, size_t total, size_t shown)
{
	const struct elide_seg_header *h = &snap->header;
	double age = segment_age(snap, now_realtime_ns());
	struct source_proc_info info;
	struct proc_state ps;
	char buf[512];

	snprintf(buf, sizeof(buf), "%d", (int)snap->pid);
	header_line("PID", buf, false);
	header_line("Executable", h->exe[0] ? h->exe : "-", true);
	header_line("Command", h->comm[0] ? h->comm : "-", false);
	if (source_info(s, snap->pid, &info) == 0 && info.unit[0])
		header_line("Unit", info.unit, false);
	if (h->lib_version[0])
		header_line("libelide", h->lib_version, false);
	if (h->status_reason[0])
		snprintf(buf, sizeof(buf), "%s (%s)", h->elision == ELIDE_SEG_ELISION_ON ? "on" : "off",
			 h->status_reason);
	else
		snprintf(buf, sizeof(buf), "%s", h->elision == ELIDE_SEG_ELISION_ON ? "on" : "off");
	header_line("Elision", buf, false);
	process_state(snap, &ps);
	snprintf(buf, sizeof(buf), "%s%s%s%s", ps.state, ps.why[0] ? " (" : "", ps.why, ps.why[0] ? ")" : "");
	header_line("State", buf, false);
	header_line("Mode", seg_mode_to_string(h->mode), false);
	if ((h->features & ELIDE_SEG_FEATURE_WATCH) && !strcmp(ps.state, "watching"))
		snprintf(buf, sizeof(buf), "acquisitions are estimates; 1 in %u counted, its hold timed",
			 h->watch_sample);
	else if (h->sample == 0)
		snprintf(buf, sizeof(buf), "commit counts are estimates (libelide samples them)");
	else if (h->sample > 1)
		snprintf(buf, sizeof(buf), "commit counts are estimates, sampled 1 in %u", h->sample);
	else
		snprintf(buf, sizeof(buf), "every commit counted");
	header_line("Sampling", buf, false);
	if (h->created_ns) {
		snprintf(buf, sizeof(buf), "%.1fs (counts since start)", age);
		header_line("Running", buf, false);
	}
	snprintf(buf, sizeof(buf), "%zu tracked", total);
	if (shown < total)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), ", %zu shown", shown);
	if (snap->nbad_locks)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), ", %u malformed entries skipped (first %s)",
			 snap->nbad_locks, snap->first_bad);
	header_line("Locks", buf, false);
}

static const struct table_column show_columns[] = {
	{ "INDEX", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "LOCK", TABLE_SHRINK, 0.3 },
	{ "KIND", 0, 0 },
	{ "CALL-SITE", TABLE_HIDDEN | TABLE_SHRINK, 0.3 },
	{ "ACQUIRED", TABLE_RIGHT, 0 },
	{ "ELIDED%", TABLE_RIGHT, 0 },
	{ "COMMIT%", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "ABORTS", TABLE_RIGHT, 0 },
	/* One column per abort cause, in abort_cause_name() order. */
	{ "CONFLICT", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "CAPACITY", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "BUSY", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "EXPLICIT", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "RETRY", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "DEBUG", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "NESTED", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "OTHER", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "FALLBACK", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "CONTENDED", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	/* Contention (watch mode): shown when a lock has figures. */
	{ "WAIT", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "WAIT-MAX", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "HOLD", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "LONG%", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "CYCLES-LOST", TABLE_RIGHT, 0 },
	/* "eliding (contended)", "off (override)": the state, and why or who. */
	{ "STATE", TABLE_SHRINK, 0.2 },
};

/* "off (learned, 2d ago)": what elided learned, and since when, when known. */
static int add_state_cell(struct table *t, const struct seg_lock_snapshot *ls, int64_t now)
{
	const char *why = lock_why(&ls->lock);
	char age[32];

	if (strcmp(why, "learned") != 0 || ls->learned_since <= 0)
		return table_add_cellf(t, "%s (%s)", state_name(ls->lock.state), why);
	format_age(ls->learned_since, now, age, sizeof(age));
	return table_add_cellf(t, "%s (learned, %s ago)", state_name(ls->lock.state), age);
}

static int show_table(const struct lock_row *rows, size_t n, const struct ctl_options *o)
{
	struct table_column columns[ARRAY_SIZE(show_columns)];
	int64_t now = (int64_t)time(NULL);
	bool contention = lock_rows_watched(rows, n);
	struct table *t = NULL;
	int r;

	/* Where locks are watched, what they cost in waiting is the story:
	 * contention, wait and hold replace the transaction columns. */
	memcpy(columns, show_columns, sizeof(columns));
	for (size_t c = 0; contention && c < ARRAY_SIZE(columns); c++) {
		const char *h = columns[c].name;

		if (!strcmp(h, "CONTENDED") || !strcmp(h, "WAIT") || !strcmp(h, "HOLD") || !strcmp(h, "LONG%"))
			columns[c].flags &= ~TABLE_HIDDEN;
		else if (!strcmp(h, "ELIDED%") || !strcmp(h, "ABORTS") || !strcmp(h, "CYCLES-LOST"))
			columns[c].flags |= TABLE_HIDDEN;
	}
	r = table_new(&t, "show", columns, ARRAY_SIZE(columns), o->output);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		const struct elide_seg_lock *l = &rows[i].ls->lock;
		const uint64_t *st = l->stats;
		uint64_t acquired = st[ELIDE_SEG_STAT_ACQUIRED];
		uint64_t attempts = st[ELIDE_SEG_STAT_ATTEMPTS];
		uint64_t commits = st[ELIDE_SEG_STAT_COMMITS];
		const char *state = state_name(l->state);

		/* Sampled estimates can cross: keep the ratios within 100%,
		 * as libelide's report does. */
		if (commits > attempts)
			commits = attempts;
		if (commits > acquired)
			acquired = commits;
		if ((r = table_add_cellf(t, "%u", rows[i].ls->index)) < 0 ||
		    (r = table_add_cell(t, rows[i].name)) < 0 ||
		    (r = table_add_cell(t, l->kind == ELIDE_SEG_KIND_OVERFLOW ? "-" : kind_name(l->kind))) < 0 ||
		    (r = table_add_cell(t, rows[i].site.text)) < 0 ||
		    (r = table_add_number(t, acquired)) < 0 ||
		    (r = table_add_percent(t, commits, acquired)) < 0 ||
		    (r = table_add_percent(t, commits, attempts)) < 0 ||
		    (r = table_add_number(t, rows[i].aborts)) < 0)
			goto out;
		for (unsigned c = 0; c < N_ABORT_CAUSES; c++) {
			r = table_add_number(t, st[ELIDE_SEG_STAT_ABORT_CONFLICT + c]);
			if (r < 0)
				goto out;
		}
		if ((r = table_add_number(t, st[ELIDE_SEG_STAT_FALLBACKS])) < 0 ||
		    (r = table_add_number(t, st[ELIDE_SEG_STAT_CONTENDED])) < 0 ||
		    (r = table_add_duration(t, l->wait_ns, lock_has_contention(l))) < 0 ||
		    (r = table_add_duration(t, l->wait_max_ns, lock_has_contention(l))) < 0 ||
		    (r = table_add_duration(t, l->hold_samples ? l->hold_ns / l->hold_samples : 0, l->hold_samples != 0)) < 0 ||
		    (r = table_add_percent(t, l->hold_long < l->hold_samples ? l->hold_long : l->hold_samples,
					   l->hold_samples)) < 0 ||
		    (r = table_add_number(t, st[ELIDE_SEG_STAT_CYCLES_LOST])) < 0 ||
		    (r = add_state_cell(t, rows[i].ls, now)) < 0)
			goto out;
		table_set_color(t, state_color(state));
	}
	r = table_print(t, stdout, o->legend);
out:
	table_free(t);
	return r;
}

int parse_pid(const char *s, pid_t *ret)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > INT32_MAX || s[0] == '+' || s[0] == ' ')
		return -EINVAL;
	*ret = (pid_t)v;
	return 0;
}

/* Prints one process; r < 0 on a write error. */
static int show_one(struct source *s, const struct ctl_options *o, struct json *j, const struct seg_snapshot *snap,
		    bool first)
{
	struct lock_row *rows = NULL;
	size_t n = 0, total;
	int r;

	r = lock_rows_build(s, snap, true, &rows, &n);
	if (r < 0)
		return r;
	sort_key = o->sort;
	qsort(rows, n, sizeof(*rows), cmp_rows);
	total = n;
	if (o->max_set && n > o->max)
		n = o->max;
	if (j) {
		r = show_json(s, j, snap, rows, n);
	} else {
		if (!first)
			putchar('\n');
		if (o->legend) {
			show_header(s, snap, total, n);
			putchar('\n');
		}
		r = show_table(rows, n, o);
	}
	free(rows);
	return r;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* show EXE: every process whose executable is EXE (a path, or a base name). */
static int show_exe(struct source *s, const struct ctl_options *o, const char *exe)
{
	struct seg_snapshot **procs = NULL;
	size_t n = 0, shown = 0;
	struct json j;
	int r;

	r = source_list(s, &procs, &n);
	if (r < 0) {
		log_error("cannot list the processes: %s", s->error[0] ? s->error : strerror(-r));
		return s->error_exit ? s->error_exit : EXIT_FAIL;
	}
	if (o->json) {
		json_init(&j, stdout, o->json_pretty);
		json_begin_array(&j);
	}
	for (size_t i = 0; i < n && r >= 0; i++) {
		const struct elide_seg_header *h = &procs[i]->header;
		bool match = strchr(exe, '/') ? strcmp(h->exe, exe) == 0 :
			(strcmp(base_name(h->exe), exe) == 0 || (!h->exe[0] && strcmp(h->comm, exe) == 0));

		if (!match)
			continue;
		r = show_one(s, o, o->json ? &j : NULL, procs[i], shown == 0);
		shown++;
	}
	if (o->json) {
		json_end_array(&j);
		if (r >= 0)
			r = json_finish(&j);
	}
	source_list_free(procs, n);
	if (r < 0) {
		log_error_errno(r, "cannot show %s", exe);
		return EXIT_FAIL;
	}
	if (shown == 0) {
		log_error("no libelide process runs %s", exe);
		return EXIT_NOT_FOUND;
	}
	return EXIT_OK;
}

/* ---- a process without libelide, as elided's BPF observer saw it -------- */

struct observed_row {
	char name[ELIDE_SEG_NAME_MAX + 160];
	char where[256];
	uint64_t addr, waits, wait_ns, wait_max_ns;
};

static const struct table_column observed_columns[] = {
	{ "LOCK", TABLE_SHRINK, 0.3 },
	{ "WHERE", TABLE_SHRINK, 0.3 },
	{ "WAITS", TABLE_RIGHT, 0 },
	{ "WAIT", TABLE_RIGHT, 0 },
	{ "WAIT-MAX", TABLE_RIGHT, 0 },
};

/*
 * show PID of a process without libelide: what elided's observer knows of
 * it (ListObservedLocks), its locks by name (their symbols, which elided's
 * symbolizer reads as the process's user) and the time its threads slept
 * for them.  -ENOENT when elided saw none of its locks (or does not
 * observe, or is not asked: a direct source).
 */
static int show_observed(struct source *s, const struct ctl_options *o, pid_t pid)
{
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct observed_row *rows = NULL;
	size_t n = 0, alloc = 0;
	char exe[256] = "", comm[64] = "", user[64], buf[512];
	uint32_t owner = 0;
	sd_bus *bus = source_bus(s);
	int r;

	if (!bus)
		return -ENOENT;
	r = sd_bus_call_method(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "ListObservedLocks", &e,
			       &reply, "");
	if (r < 0)
		return -ENOENT;
	r = sd_bus_message_enter_container(reply, 'a', "(uutssstttts)");
	for (; r >= 0;) {
		const char *c, *x, *where, *name;
		uint64_t start, addr, waits, wait_ns, max_ns;
		uint32_t p, uid;
		struct observed_row *row;

		r = sd_bus_message_read(reply, "(uutssstttts)", &p, &uid, &start, &c, &x, &where, &addr, &waits, &wait_ns,
					&max_ns, &name);
		if (r <= 0)
			break;
		if ((pid_t)p != pid)
			continue;
		if (n == alloc) {
			size_t a = alloc ? alloc * 2 : 8;
			struct observed_row *q = reallocarray(rows, a, sizeof(*rows));

			if (!q) {
				r = -ENOMEM;
				break;
			}
			rows = q;
			alloc = a;
		}
		row = &rows[n++];
		sanitize_text(name[0] ? name : where, row->name, sizeof(row->name));
		sanitize_text(where, row->where, sizeof(row->where));
		row->addr = addr;
		row->waits = waits;
		row->wait_ns = wait_ns;
		row->wait_max_ns = max_ns;
		owner = uid;
		snprintf(exe, sizeof(exe), "%s", x);
		snprintf(comm, sizeof(comm), "%s", c);
	}
	if (r < 0 || n == 0) {
		free(rows);
		return r < 0 ? r : -ENOENT;
	}
	user_name(owner, user, sizeof(user));
	if (o->json) {
		struct json j;

		json_init(&j, stdout, o->json_pretty);
		json_begin_object(&j);
		json_key(&j, "pid");
		json_int(&j, pid);
		json_key(&j, "uid");
		json_uint(&j, owner);
		json_key(&j, "user");
		json_string(&j, user);
		json_key(&j, "exe");
		json_string(&j, null_if_empty(exe));
		json_key(&j, "comm");
		json_string(&j, null_if_empty(comm));
		json_key(&j, "source");
		json_string(&j, "bpf");
		json_key(&j, "locks");
		json_begin_array(&j);
		for (size_t i = 0; i < n; i++) {
			json_begin_object(&j);
			json_key(&j, "name");
			json_string(&j, rows[i].name);
			json_key(&j, "where");
			json_string(&j, rows[i].where);
			json_key(&j, "address");
			snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)rows[i].addr);
			json_string(&j, buf);
			json_key(&j, "waits");
			json_uint(&j, rows[i].waits);
			json_key(&j, "wait_ns");
			json_uint(&j, rows[i].wait_ns);
			json_key(&j, "wait_max_ns");
			json_uint(&j, rows[i].wait_max_ns);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_end_object(&j);
		r = json_finish(&j);
	} else {
		struct table *t = NULL;

		if (o->legend) {
			snprintf(buf, sizeof(buf), "%d", (int)pid);
			header_line("PID", buf, false);
			header_line("Executable", exe[0] ? exe : "-", true);
			header_line("Command", comm[0] ? comm : "-", false);
			header_line("User", user, false);
			header_line("libelide", "none: lock waits seen by elided's BPF observer", false);
			snprintf(buf, sizeof(buf), "%zu waited for", n);
			header_line("Locks", buf, false);
			putchar('\n');
		}
		r = table_new(&t, "show", observed_columns, ARRAY_SIZE(observed_columns), NULL);
		for (size_t i = 0; r >= 0 && i < n; i++)
			if ((r = table_add_cell(t, rows[i].name)) < 0 || (r = table_add_cell(t, rows[i].where)) < 0 ||
			    (r = table_add_number(t, rows[i].waits)) < 0 ||
			    (r = table_add_duration(t, rows[i].wait_ns, true)) < 0 ||
			    (r = table_add_duration(t, rows[i].wait_max_ns, true)) < 0)
				break;
		if (r >= 0)
			r = table_print(t, stdout, o->legend);
		table_free(t);
	}
	free(rows);
	return r < 0 ? r : 0;
}

int verb_show(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	struct seg_snapshot *snap = NULL;
	struct json j;
	pid_t pid;
	int r;

	if (argc != 2) {
		log_error("show takes exactly one PID or executable");
		return EXIT_USAGE;
	}
	/* An unknown column is a usage error before anything is shown. */
	if (o->output && !o->json && table_check_output("show", show_columns, ARRAY_SIZE(show_columns), o->output) < 0)
		return EXIT_USAGE;
	if (!*argv[1]) {
		log_error("show: empty argument");
		return EXIT_USAGE;
	}
	if (parse_pid(argv[1], &pid) < 0) {
		if (argv[1][0] >= '0' && argv[1][0] <= '9') {
			log_error("invalid PID '%s'", argv[1]);
			return EXIT_USAGE;
		}
		if (o->history) {
			log_error("--history takes a PID, not an executable: '%s'", argv[1]);
			return EXIT_USAGE;
		}
		return show_exe(s, o, argv[1]);
	}
	if (o->history)
		return show_history(s, o, pid);
	r = source_get(s, pid, &snap);
	if (r == -ENOENT) {
		/* No libelide there: what elided's observer saw of it, if anything. */
		r = show_observed(s, o, pid);
		if (r == 0)
			return EXIT_OK;
		if (r != -ENOENT) {
			log_error_errno(r, "cannot show pid %d", (int)pid);
			return EXIT_FAIL;
		}
		r = -ENOENT;
	}
	if (r < 0)
		return lock_rows_get_failed(s, o, pid, r);
	if (o->json) {
		json_init(&j, stdout, o->json_pretty);
		r = show_one(s, o, &j, snap, true);
		if (r >= 0)
			r = json_finish(&j);
	} else
		r = show_one(s, o, NULL, snap, true);
	seg_snapshot_free(snap);
	if (r < 0) {
		log_error_errno(r, "cannot show pid %d", (int)pid);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}
