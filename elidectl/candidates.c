/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl candidates: the locks that processes wait for most, across all
 * the processes the caller may see, each with the advisor's estimate of
 * whether elision would pay (advice.c) and what to do about it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

#include "advice.h"
#include "elidectl.h"
#include "json.h"
#include "log.h"
#include "table.h"

#define CANDIDATES_DEFAULT_MAX 20

struct candidate {
	pid_t pid;
	char comm[ELIDE_SEG_COMM_MAX];
	char exe[ELIDE_SEG_EXE_MAX];
	struct elide_seg_lock lock;   /* a copy; of an observed lock only the waits */
	bool observed;                /* a program without libelide, seen by elided's BPF */
	struct advice advice;
	char name[ELIDE_SEG_NAME_MAX + 160];
	char site[256];
	char action[320];
	double runtime_s;
};

/* Most waiting first; then contention, then the pid and entry for a
 * stable order. */
static int cmp_candidates(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;

	if (x->lock.wait_ns != y->lock.wait_ns)
		return x->lock.wait_ns < y->lock.wait_ns ? 1 : -1;
	if (x->lock.stats[ELIDE_SEG_STAT_CONTENDED] != y->lock.stats[ELIDE_SEG_STAT_CONTENDED])
		return x->lock.stats[ELIDE_SEG_STAT_CONTENDED] < y->lock.stats[ELIDE_SEG_STAT_CONTENDED] ? 1 : -1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return (x->lock.addr > y->lock.addr) - (x->lock.addr < y->lock.addr);
}

static void name_lock(struct source *s, const struct seg_snapshot *p, const struct elide_seg_lock *l,
		      struct candidate *c)
{
	struct source_symbol sym = { 0 }, site = { 0 };

	source_symbolize(s, p->pid, l->addr, true, &sym);
	if (l->callsite) {
		source_symbolize(s, p->pid, l->callsite, false, &site);
		snprintf(c->site, sizeof(c->site), "%s", site.text);
	} else {
		snprintf(c->site, sizeof(c->site), "-");
	}
	if (l->name[0])
		snprintf(c->name, sizeof(c->name), "%s", l->name);
	else if (sym.symbol[0])
		snprintf(c->name, sizeof(c->name), "%s", sym.symbol);
	else
		snprintf(c->name, sizeof(c->name), "0x%llx", (unsigned long long)l->addr);
}

struct candidates {
	struct candidate *v;
	size_t n, allocated;
};

static struct candidate *candidate_add(struct candidates *c)
{
	if (c->n == c->allocated) {
		size_t a = c->allocated ? c->allocated * 2 : 32;
		struct candidate *q = reallocarray(c->v, a, sizeof(*c->v));

		if (!q)
			return NULL;
		c->v = q;
		c->allocated = a;
	}
	memset(&c->v[c->n], 0, sizeof(c->v[0]));
	return &c->v[c->n++];
}

/* Seconds since a process started, from its start time in clock ticks
 * after boot; 0 when unknown. */
static double seconds_since_boot_ticks(uint64_t start_ticks)
{
	long hz = sysconf(_SC_CLK_TCK);
	double uptime = 0;
	FILE *f = fopen("/proc/uptime", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%lf", &uptime) != 1)
		uptime = 0;
	fclose(f);
	if (hz <= 0 || uptime <= 0 || (double)start_ticks / (double)hz > uptime)
		return 0;
	return uptime - (double)start_ticks / (double)hz;
}

/*
 * Programs without libelide, from elided's BPF observer (ListObservedLocks):
 * their locks are named by their symbols, which elided's symbolizer reads
 * as the program's user, else by module and offset (/proc/PID/maps).  Without elided, or where it does not observe, none:
 * *why says so.
 */
static int collect_observed(struct source *s, struct candidates *c, char *why, size_t whylen)
{
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	sd_bus *bus = source_bus(s);
	int r;

	why[0] = '\0';
	if (!bus) {
		snprintf(why, whylen, "programs without libelide are seen only through elided");
		return 0;
	}
	r = sd_bus_call_method(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "ListObservedLocks", &e,
			       &reply, "");
	if (r < 0) {
		sanitize_text(e.message ? e.message : strerror(-r), why, whylen);
		return 0;
	}
	r = sd_bus_message_enter_container(reply, 'a', "(uutssstttts)");
	if (r < 0)
		return r;
	for (;;) {
		const char *comm, *exe, *where, *name;
		uint64_t start, addr, waits, wait_ns, max_ns;
		uint32_t pid, uid;
		struct candidate *o;

		r = sd_bus_message_read(reply, "(uutssstttts)", &pid, &uid, &start, &comm, &exe, &where, &addr, &waits,
					&wait_ns, &max_ns, &name);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		o = candidate_add(c);
		if (!o)
			return -ENOMEM;
		o->pid = (pid_t)pid;
		o->observed = true;
		snprintf(o->comm, sizeof(o->comm), "%s", comm);
		snprintf(o->exe, sizeof(o->exe), "%s", exe);
		/* Its symbol when elided's symbolizer found one, as a libelide
		 * process's lock is named; else where it lies. */
		sanitize_text(name[0] ? name : where, o->name, sizeof(o->name));
		snprintf(o->site, sizeof(o->site), "-");
		o->lock.kind = ELIDE_SEG_KIND_MUTEX;
		o->lock.addr = addr;
		o->lock.stats[ELIDE_SEG_STAT_CONTENDED] = waits;
		o->lock.wait_ns = wait_ns;
		o->lock.wait_max_ns = max_ns;
		o->runtime_s = seconds_since_boot_ticks(start);
		advise_observed(waits, wait_ns, o->runtime_s, &o->advice);
		advice_action(&o->advice, exe, NULL, false, o->action, sizeof(o->action));
	}
	return sd_bus_message_exit_container(reply);
}

static int collect(struct source *s, struct seg_snapshot **procs, size_t n, struct candidates *c)
{
	uint64_t now = now_realtime_ns();

	for (size_t i = 0; i < n; i++) {
		const struct seg_snapshot *p = procs[i];
		struct source_proc_info info;
		bool have_info = source_info(s, p->pid, &info) == 0;
		double runtime = segment_age(p, now);

		for (uint32_t k = 0; k < p->nlocks; k++) {
			const struct elide_seg_lock *l = &p->locks[k].lock;
			struct candidate *o;

			/* Only locks somebody waited for: the rest have
			 * nothing to advise on. */
			if (l->kind == ELIDE_SEG_KIND_OVERFLOW || l->stats[ELIDE_SEG_STAT_CONTENDED] == 0)
				continue;
			o = candidate_add(c);
			if (!o)
				return -ENOMEM;
			o->pid = p->pid;
			snprintf(o->comm, sizeof(o->comm), "%s", p->header.comm);
			snprintf(o->exe, sizeof(o->exe), "%s", p->header.exe);
			o->lock = *l;
			o->runtime_s = runtime;
			advise_lock(l, runtime, &o->advice);
			name_lock(s, p, l, o);
			advice_action(&o->advice, p->header.exe, have_info ? info.unit : NULL, p->header.rtm_usable != 0,
				      o->action, sizeof(o->action));
		}
	}
	return 0;
}

static const struct table_column candidate_columns[] = {
	{ "PID", TABLE_RIGHT, 0 },
	{ "COMM", 0, 0 },
	{ "LOCK", TABLE_SHRINK, 0.25 },
	{ "CALL-SITE", TABLE_HIDDEN | TABLE_SHRINK, 0.3 },
	{ "CONTENDED", TABLE_RIGHT, 0 },
	{ "CONT%", TABLE_RIGHT, 0 },
	{ "WAIT", TABLE_RIGHT, 0 },
	{ "WAIT/S", TABLE_RIGHT, 0 },
	{ "HOLD", TABLE_RIGHT, 0 },
	{ "LONG%", TABLE_RIGHT, 0 },
	{ "COMMIT%", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "VERDICT", 0, 0 },
	{ "ACTION", TABLE_SHRINK, 0.3 },
};

static int candidates_table(const struct candidate *c, size_t n, const struct ctl_options *o, const char *why)
{
	struct table *t = NULL;
	int r;

	r = table_new(&t, "candidates", candidate_columns, ARRAY_SIZE(candidate_columns), o->output);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		const struct elide_seg_lock *l = &c[i].lock;
		char comm[ELIDE_SEG_COMM_MAX * 4];

		sanitize_text(c[i].comm, comm, sizeof(comm));
		if ((r = table_add_cellf(t, "%d", (int)c[i].pid)) < 0 ||
		    (r = table_add_cell(t, comm[0] ? comm : "-")) < 0 ||
		    (r = table_add_cell(t, c[i].name)) < 0 ||
		    (r = table_add_cell(t, c[i].site)) < 0 ||
		    (r = table_add_number(t, l->stats[ELIDE_SEG_STAT_CONTENDED])) < 0 ||
		    (r = table_add_share(t, c[i].advice.contended_share)) < 0 ||
		    (r = table_add_duration(t, l->wait_ns, true)) < 0 ||
		    (r = table_add_share(t, c[i].advice.wait_share)) < 0 ||
		    (r = table_add_duration(t, c[i].advice.hold_mean_ns, l->hold_samples != 0)) < 0 ||
		    (r = table_add_share(t, c[i].advice.long_share)) < 0 ||
		    (r = table_add_share(t, c[i].advice.commit_share)) < 0 ||
		    (r = table_add_cell(t, advice_verdict_name(c[i].advice.verdict))) < 0 ||
		    (r = table_add_cell(t, c[i].action)) < 0)
			goto out;
		table_set_color(t, c[i].advice.verdict == ADVICE_CANDIDATE || c[i].advice.verdict == ADVICE_ELIDES ?
					   TABLE_COLOR_GOOD :
				   c[i].advice.verdict == ADVICE_TOO_LONG || c[i].advice.verdict == ADVICE_ABORTS ?
					   TABLE_COLOR_WARN :
					   TABLE_COLOR_NONE);
	}
	r = table_print(t, stdout, o->legend);
	if (r >= 0 && o->legend && n)
		printf("Verdicts are estimates from waiting and hold times; see elidectl(1), ADVICE.\n");
	if (r >= 0 && o->legend && why[0])
		printf("Programs without libelide: not shown (%s).\n", why);
out:
	table_free(t);
	return r;
}

static void json_share(struct json *j, const char *key, double share)
{
	json_key(j, key);
	if (share >= 0)
		json_double(j, share);
	else
		json_null(j);
}

static int candidates_json(const struct candidate *c, size_t n, const struct ctl_options *o)
{
	struct json j;

	json_init(&j, stdout, o->json_pretty);
	json_begin_array(&j);
	for (size_t i = 0; i < n; i++) {
		const struct elide_seg_lock *l = &c[i].lock;

		json_begin_object(&j);
		json_key(&j, "pid");
		json_int(&j, c[i].pid);
		json_key(&j, "exe");
		json_string(&j, c[i].exe[0] ? c[i].exe : NULL);
		json_key(&j, "comm");
		json_string(&j, c[i].comm[0] ? c[i].comm : NULL);
		/* libelide's segment, or elided's BPF observer (waits only). */
		json_key(&j, "source");
		json_string(&j, c[i].observed ? "bpf" : "libelide");
		json_key(&j, "lock");
		json_string(&j, c[i].name);
		json_key(&j, "kind");
		json_string(&j, kind_name(l->kind));
		json_key(&j, "callsite");
		json_string(&j, l->callsite ? c[i].site : NULL);
		json_key(&j, "seconds");
		if (c[i].runtime_s > 0)
			json_double(&j, c[i].runtime_s);
		else
			json_null(&j);
		json_key(&j, "acquired");
		if (c[i].observed)
			json_null(&j);
		else
			json_uint(&j, l->stats[ELIDE_SEG_STAT_ACQUIRED]);
		json_key(&j, "contended");
		json_uint(&j, l->stats[ELIDE_SEG_STAT_CONTENDED]);
		json_share(&j, "contended_share", c[i].advice.contended_share);
		json_key(&j, "wait_ns");
		json_uint(&j, l->wait_ns);
		json_key(&j, "wait_max_ns");
		json_uint(&j, l->wait_max_ns);
		json_share(&j, "wait_share", c[i].advice.wait_share);
		json_key(&j, "hold_mean_ns");
		if (l->hold_samples)
			json_uint(&j, c[i].advice.hold_mean_ns);
		else
			json_null(&j);
		json_key(&j, "hold_samples");
		json_uint(&j, l->hold_samples);
		json_share(&j, "long_share", c[i].advice.long_share);
		json_share(&j, "commit_share", c[i].advice.commit_share);
		json_key(&j, "verdict");
		json_string(&j, advice_verdict_name(c[i].advice.verdict));
		json_key(&j, "explanation");
		json_string(&j, advice_verdict_text(c[i].advice.verdict));
		json_key(&j, "action");
		json_string(&j, strcmp(c[i].action, "-") ? c[i].action : NULL);
		json_end_object(&j);
	}
	json_end_array(&j);
	return json_finish(&j);
}

int verb_candidates(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	struct seg_snapshot **procs = NULL;
	struct candidates c = { 0 };
	size_t nprocs = 0, n = 0;
	char why[256];
	int r;

	if (argc != 1) {
		log_error("candidates takes no arguments");
		return EXIT_USAGE;
	}
	if (o->output && !o->json &&
	    table_check_output("candidates", candidate_columns, ARRAY_SIZE(candidate_columns), o->output) < 0)
		return EXIT_USAGE;
	r = source_list(s, &procs, &nprocs);
	if (r < 0) {
		log_error("cannot list the processes: %s", s->error[0] ? s->error : strerror(-r));
		return s->error_exit ? s->error_exit : EXIT_FAIL;
	}
	r = collect(s, procs, nprocs, &c);
	if (r >= 0)
		r = collect_observed(s, &c, why, sizeof(why));
	if (r >= 0) {
		size_t max = o->max_set ? o->max : CANDIDATES_DEFAULT_MAX;

		if (c.n)
			qsort(c.v, c.n, sizeof(*c.v), cmp_candidates);
		n = c.n > max ? max : c.n;
		if (o->json)
			r = candidates_json(c.v, n, o);
		else if (n == 0 && o->legend)
			printf("No contended locks seen yet (%zu processes with libelide%s%s).\n", nprocs,
			       why[0] ? "; programs without libelide: " : "", why);
		else
			r = candidates_table(c.v, n, o, why);
	}
	free(c.v);
	source_list_free(procs, nprocs);
	if (r < 0) {
		log_error_errno(r, "cannot list candidates");
		return EXIT_FAIL;
	}
	return EXIT_OK;
}
