/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The "bus" source: asks elided over D-Bus (org.elide.Manager1, see
 * elided/dbus.c) and turns its answers into the segment's data model, so
 * list and show print the same tables whichever source they read.  elided
 * does the authorisation: a user gets only their own processes.
 *
 * What the bus does not carry stays empty: lock addresses (made up here and
 * named by symbolize() from elided's names), the sampling rate, libelide's
 * version.  What it adds (unit, the current rates) comes through info(),
 * and which locks run under a learned decision (GetLearned) through each
 * lock's ctl_source and learned_since.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

#include "elidectl.h"
#include "log.h"
#include "source.h"
#include "table.h"

/* Made-up addresses: the entry index above this base, never 0. */
#define FAKE_ADDR_BASE 0x100000000ull

struct bus_lock_name {
	uint32_t index;
	char *name;
	char *callsite;
};

struct bus_proc {
	pid_t pid;
	struct source_proc_info info;
	struct bus_lock_name *names;
	size_t nnames;
};

struct bus_data {
	sd_bus *bus;
	bool remote;
	int rtm_usable;           /* -1: not asked yet */
	bool no_get_learned;      /* elided predates GetLearned: not asked again */
	struct bus_proc *procs;   /* from the last ListProcesses */
	size_t nprocs;
};

static void procs_clear(struct bus_data *d)
{
	for (size_t i = 0; i < d->nprocs; i++) {
		for (size_t k = 0; k < d->procs[i].nnames; k++) {
			free(d->procs[i].names[k].name);
			free(d->procs[i].names[k].callsite);
		}
		free(d->procs[i].names);
	}
	free(d->procs);
	d->procs = NULL;
	d->nprocs = 0;
}

static void bus_free(struct source *s)
{
	struct bus_data *d = s->data;

	if (!d)
		return;
	procs_clear(d);
	sd_bus_flush_close_unref(d->bus);
	free(d);
}

static struct bus_proc *find_proc(struct bus_data *d, pid_t pid)
{
	for (size_t i = 0; i < d->nprocs; i++)
		if (d->procs[i].pid == pid)
			return &d->procs[i];
	return NULL;
}

int bus_error_exit(const char *what, const sd_bus_error *e, int r)
{
	const char *msg = e && e->message ? e->message : strerror(-r);
	char clean[512];

	sanitize_text(msg, clean, sizeof(clean));
	if (e && e->name) {
		if (strcmp(e->name, "org.elide.Error.NoSuchProcess") == 0 ||
		    strcmp(e->name, "org.elide.Error.NoSuchLock") == 0) {
			log_error("%s: %s", what, clean);
			return EXIT_NOT_FOUND;
		}
		if (strcmp(e->name, SD_BUS_ERROR_ACCESS_DENIED) == 0) {
			log_error("%s: %s", what, clean);
			return EXIT_DENIED;
		}
		if (strcmp(e->name, SD_BUS_ERROR_SERVICE_UNKNOWN) == 0 ||
		    strcmp(e->name, SD_BUS_ERROR_NAME_HAS_NO_OWNER) == 0 ||
		    strcmp(e->name, SD_BUS_ERROR_NO_REPLY) == 0 ||
		    strcmp(e->name, SD_BUS_ERROR_DISCONNECTED) == 0) {
			log_error("%s: elided is not running (%s); start it with: systemctl start elided", what,
				  clean);
			return EXIT_NO_DAEMON;
		}
		if (strcmp(e->name, SD_BUS_ERROR_INVALID_ARGS) == 0) {
			log_error("%s: %s", what, clean);
			return EXIT_USAGE;
		}
	}
	log_error("%s: %s", what, clean);
	if (r == -ECONNRESET || r == -ENOTCONN || r == -ECONNREFUSED)
		return EXIT_NO_DAEMON;
	return EXIT_FAIL;
}

/* Errors of a call inside list/get become s->error and s->error_exit. */
static int note_error(struct source *s, const sd_bus_error *e, int r)
{
	const char *msg = e && e->message ? e->message : strerror(-r);

	snprintf(s->error, sizeof(s->error), "%s", msg);
	s->error_exit = EXIT_FAIL;
	if (sd_bus_error_has_name(e, "org.elide.Error.NoSuchProcess")) {
		s->error[0] = '\0';
		return -ENOENT;
	}
	if (sd_bus_error_has_name(e, SD_BUS_ERROR_ACCESS_DENIED)) {
		s->error_exit = EXIT_DENIED;
		return -EACCES;
	}
	if (sd_bus_error_has_name(e, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
	    sd_bus_error_has_name(e, SD_BUS_ERROR_NAME_HAS_NO_OWNER)) {
		s->error_exit = EXIT_NO_DAEMON;
		return -ENXIO;
	}
	return r < 0 ? r : -EIO;
}

static uint32_t enum_of(const char *str, const char *(*name)(uint32_t), uint32_t n, uint32_t fallback)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(name(i), str) == 0)
			return i;
	return fallback;
}

static uint32_t mode_of(const char *m)
{
	if (strcmp(m, "adaptive") == 0)
		return ELIDE_SEG_MODE_ADAPTIVE;
	if (strcmp(m, "on") == 0)
		return ELIDE_SEG_MODE_ON;
	if (strcmp(m, "off") == 0)
		return ELIDE_SEG_MODE_OFF;
	return ELIDE_SEG_MODE_NONE;
}

/* The boot time in CLOCK_REALTIME seconds (/proc/stat btime, as ps reads
 * it): the same in every run, so list and show agree; 0 when unknown. */
static uint64_t boot_time(void)
{
	static unsigned long long btime;
	char line[256];
	FILE *f;

	if (btime)
		return btime;
	f = fopen("/proc/stat", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	return btime;
}

/* CLOCK_REALTIME of a /proc start time (clock ticks since boot); 0, that is
 * unknown, when the process is on another host (its boot is not ours). */
static uint64_t created_of(const struct bus_data *d, uint64_t start_time)
{
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t btime;

	if (d->remote || hz <= 0 || !(btime = boot_time()))
		return 0;
	return btime * 1000000000u + start_time * (1000000000u / (uint64_t)hz);
}

static int rtm_usable(struct bus_data *d)
{
	int b = 0;

	if (d->rtm_usable < 0) {
		if (sd_bus_get_property_trivial(d->bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
						"RtmUsable", NULL, 'b', &b) < 0)
			b = 0;
		d->rtm_usable = !!b;
	}
	return d->rtm_usable;
}

/* One entry of ListProcesses into a snapshot (no locks yet) and proc info. */
static int read_process(sd_bus_message *m, struct bus_data *d, struct seg_snapshot **ret, struct bus_proc *bp)
{
	const char *exe, *comm, *unit, *mode, *state;
	uint32_t pid, uid, nlocks;
	double acq, com, ratio, cyc, wait;
	uint64_t start;
	struct seg_snapshot *snap;
	int r;

	r = sd_bus_message_read(m, "(uusssssddddtud)", &pid, &uid, &exe, &comm, &unit, &mode, &state,
				&acq, &com, &ratio, &cyc, &start, &nlocks, &wait);
	if (r <= 0)
		return r;
	snap = calloc(1, sizeof(*snap));
	if (!snap)
		return -ENOMEM;
	snap->pid = (pid_t)pid;
	snap->start_time = start;
	snap->file_uid = uid;
	snprintf(snap->file, sizeof(snap->file), "%u-%llu%s", pid, (unsigned long long)start, ELIDE_SEG_SUFFIX);
	snap->header.pid = (int32_t)pid;
	snap->header.uid = uid;
	snap->header.start_time = start;
	snap->header.created_ns = created_of(d, start);
	snprintf(snap->header.exe, sizeof(snap->header.exe), "%s", exe);
	snprintf(snap->header.comm, sizeof(snap->header.comm), "%s", comm);
	snap->header.mode = mode_of(mode);
	snap->header.rtm_usable = (uint32_t)rtm_usable(d);
	if (strncmp(state, "on", 2) == 0 && (state[2] == '\0' || state[2] == ':'))
		snap->header.elision = ELIDE_SEG_ELISION_ON;
	else
		snap->header.elision = ELIDE_SEG_ELISION_OFF;
	if (strncmp(state, "off: ", 5) == 0)
		snprintf(snap->header.status_reason, sizeof(snap->header.status_reason), "%s", state + 5);

	memset(bp, 0, sizeof(*bp));
	bp->pid = (pid_t)pid;
	snprintf(bp->info.unit, sizeof(bp->info.unit), "%s", unit);
	snprintf(bp->info.mode, sizeof(bp->info.mode), "%s", mode);
	snprintf(bp->info.state, sizeof(bp->info.state), "%s", state);
	bp->info.acquired_per_sec = acq;
	bp->info.commits_per_sec = com;
	bp->info.abort_ratio = ratio;
	bp->info.cycles_lost_per_sec = cyc;
	bp->info.wait_per_sec = wait;
	*ret = snap;
	return 1;
}

static int read_locks(struct source *s, struct seg_snapshot *snap, struct bus_proc *bp)
{
	struct bus_data *d = s->data;
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	size_t allocated = 0;
	int r;

	r = sd_bus_call_method(d->bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "GetLocks", &e,
			       &reply, "u", (uint32_t)snap->pid);
	if (r < 0)
		return note_error(s, &e, r);
	r = sd_bus_message_enter_container(reply, 'a', "(ussssttttta{st}tdddsss)");
	if (r < 0)
		return r;
	for (;;) {
		const char *kind, *name, *function, *callsite, *state, *reason, *override;
		uint64_t st[ELIDE_SEG_NSTATS] = {};
		struct elide_seg_lock watch = {};
		double acq, com, ratio;
		struct seg_lock_snapshot *ls;
		uint32_t index;

		r = sd_bus_message_enter_container(reply, 'r', "ussssttttta{st}tdddsss");
		if (r < 0)
			return r;
		if (r == 0)
			break;
		r = sd_bus_message_read(reply, "ussssttttt", &index, &kind, &name, &function, &callsite,
					&st[ELIDE_SEG_STAT_ACQUIRED], &st[ELIDE_SEG_STAT_ATTEMPTS],
					&st[ELIDE_SEG_STAT_COMMITS], &st[ELIDE_SEG_STAT_FALLBACKS],
					&st[ELIDE_SEG_STAT_CONTENDED]);
		if (r < 0)
			return r;
		r = sd_bus_message_enter_container(reply, 'a', "{st}");
		if (r < 0)
			return r;
		for (;;) {
			const char *cause;
			uint64_t v;

			r = sd_bus_message_read(reply, "{st}", &cause, &v);
			if (r < 0)
				return r;
			if (r == 0)
				break;
			for (unsigned c = 0; c < N_ABORT_CAUSES; c++)
				if (strcmp(cause, abort_cause_name(c)) == 0)
					st[ELIDE_SEG_STAT_ABORT_CONFLICT + c] = v;
			/* The contention figures share the dictionary. */
			if (strcmp(cause, "wait_ns") == 0)
				watch.wait_ns = v;
			else if (strcmp(cause, "wait_max_ns") == 0)
				watch.wait_max_ns = v;
			else if (strcmp(cause, "hold_ns") == 0)
				watch.hold_ns = v;
			else if (strcmp(cause, "hold_samples") == 0)
				watch.hold_samples = v;
			else if (strcmp(cause, "hold_long") == 0)
				watch.hold_long = v;
		}
		r = sd_bus_message_exit_container(reply);
		if (r < 0)
			return r;
		r = sd_bus_message_read(reply, "tdddsss", &st[ELIDE_SEG_STAT_CYCLES_LOST], &acq, &com, &ratio,
					&state, &reason, &override);
		if (r < 0)
			return r;
		r = sd_bus_message_exit_container(reply);
		if (r < 0)
			return r;

		if (snap->nlocks == allocated) {
			size_t a = allocated ? allocated * 2 : 16;
			void *p = reallocarray(snap->locks, a, sizeof(*snap->locks));
			void *q = reallocarray(bp->names, a, sizeof(*bp->names));

			if (p)
				snap->locks = p;
			if (q)
				bp->names = q;
			if (!p || !q)
				return -ENOMEM;
			allocated = a;
		}
		ls = &snap->locks[snap->nlocks++];
		memset(ls, 0, sizeof(*ls));
		ls->index = index;
		ls->lock.kind = enum_of(kind, seg_kind_to_string, ELIDE_SEG_KIND_OVERFLOW + 1, ELIDE_SEG_KIND_MUTEX);
		ls->lock.state = enum_of(state, seg_state_to_string, ELIDE_SEG_STATE_OFF_ADAPT + 1, ELIDE_SEG_STATE_PLAIN);
		ls->lock.reason = enum_of(reason, seg_reason_to_string, ELIDE_SEG_NREASONS, ELIDE_SEG_REASON_DAEMON);
		ls->lock.addr = FAKE_ADDR_BASE + index;
		ls->lock.callsite = callsite[0] ? FAKE_ADDR_BASE + index : 0;
		ls->lock.ctl_source = override[0] ? ELIDE_SEG_SOURCE_OVERRIDE : ELIDE_SEG_SOURCE_NONE;
		memcpy(ls->lock.stats, st, sizeof(st));
		ls->lock.wait_ns = watch.wait_ns;
		ls->lock.wait_max_ns = watch.wait_max_ns;
		ls->lock.hold_ns = watch.hold_ns;
		ls->lock.hold_samples = watch.hold_samples;
		ls->lock.hold_long = watch.hold_long;
		bp->names[bp->nnames].index = index;
		bp->names[bp->nnames].name = strdup(name);
		bp->names[bp->nnames].callsite = strdup(callsite);
		bp->nnames++;
		if (!bp->names[bp->nnames - 1].name || !bp->names[bp->nnames - 1].callsite)
			return -ENOMEM;
	}
	return sd_bus_message_exit_container(reply);
}

/*
 * Marks the locks that run under a learned "never elide" (GetLearned), so
 * that show says "learned" and since when.  An older elided without the
 * method marks nothing.
 */
static int read_learned(struct source *s, struct seg_snapshot *snap)
{
	struct bus_data *d = s->data;
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	int r;

	if (d->no_get_learned)
		return 0;
	r = sd_bus_call_method(d->bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "GetLearned", &e,
			       &reply, "u", (uint32_t)snap->pid);
	if (r < 0 && sd_bus_error_has_name(&e, SD_BUS_ERROR_UNKNOWN_METHOD)) {
		d->no_get_learned = true;
		return 0;
	}
	if (r < 0)
		return note_error(s, &e, r);
	r = sd_bus_message_enter_container(reply, 'a', "(usx)");
	if (r < 0)
		return r;
	for (;;) {
		const char *verdict;
		uint32_t index;
		int64_t since;

		r = sd_bus_message_read(reply, "(usx)", &index, &verdict, &since);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		/* An override outranks what was learned: it stays the lock's source. */
		for (uint32_t i = 0; i < snap->nlocks; i++) {
			struct seg_lock_snapshot *ls = &snap->locks[i];

			if (ls->index != index || ls->lock.ctl_source == ELIDE_SEG_SOURCE_OVERRIDE)
				continue;
			ls->lock.ctl_source = ELIDE_SEG_SOURCE_LEARNED;
			ls->learned_since = since > 0 ? since : 0;
		}
	}
	return sd_bus_message_exit_container(reply);
}

static void bus_proc_free(struct bus_proc *bp)
{
	for (size_t k = 0; k < bp->nnames; k++) {
		free(bp->names[k].name);
		free(bp->names[k].callsite);
	}
	free(bp->names);
}

/* ListProcesses, then GetLocks of each (pid 0) or of one process. */
static int fetch(struct source *s, pid_t only, struct seg_snapshot ***ret, size_t *ret_n)
{
	struct bus_data *d = s->data;
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct seg_snapshot **procs = NULL;
	size_t n = 0, allocated = 0;
	int r;

	procs_clear(d);
	memset(&s->counts, 0, sizeof(s->counts));
	r = sd_bus_call_method(d->bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "ListProcesses",
			       &e, &reply, NULL);
	if (r < 0)
		return note_error(s, &e, r);
	r = sd_bus_message_enter_container(reply, 'a', "(uusssssddddtud)");
	if (r < 0)
		return r;
	for (;;) {
		struct seg_snapshot *snap = NULL;
		struct bus_proc bp;

		if (n == allocated) {
			size_t a = allocated ? allocated * 2 : 16;
			void *p = reallocarray(procs, a, sizeof(*procs));
			void *q = reallocarray(d->procs, a, sizeof(*d->procs));

			if (p)
				procs = p;
			if (q)
				d->procs = q;
			if (!p || !q) {
				r = -ENOMEM;
				goto fail;
			}
			allocated = a;
		}
		r = read_process(reply, d, &snap, &bp);
		if (r < 0)
			goto fail;
		if (r == 0)
			break;
		if (only > 0 && snap->pid != only) {
			seg_snapshot_free(snap);
			continue;
		}
		r = read_locks(s, snap, &bp);
		if (r >= 0)
			r = read_learned(s, snap);
		if (r == -ENOENT || r == -EACCES) {
			/* Gone since ListProcesses, or not ours after all. */
			if (r == -ENOENT)
				s->counts.vanished++;
			else
				s->counts.unreadable++;
			s->error[0] = '\0';
			bus_proc_free(&bp);
			seg_snapshot_free(snap);
			continue;
		}
		procs[n] = snap;
		d->procs[d->nprocs++] = bp;
		n++;
		if (r < 0)
			goto fail;
	}
	*ret = procs;
	*ret_n = n;
	return 0;
fail:
	source_list_free(procs, n);
	return r;
}

static int bus_list(struct source *s, struct seg_snapshot ***ret, size_t *n)
{
	return fetch(s, 0, ret, n);
}

static int bus_get(struct source *s, pid_t pid, struct seg_snapshot **ret)
{
	struct bus_data *d = s->data;
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct seg_snapshot **procs = NULL;
	size_t n = 0;
	int r;

	/* GetLocks first: it says "not yours" where ListProcesses would just
	 * leave the process out. */
	r = sd_bus_call_method(d->bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "GetLocks", &e,
			       &reply, "u", (uint32_t)pid);
	if (r < 0)
		return note_error(s, &e, r);
	r = fetch(s, pid, &procs, &n);
	if (r < 0)
		return r;
	if (n == 0) {
		free(procs);
		return -ENOENT;
	}
	*ret = procs[0];
	for (size_t i = 1; i < n; i++)
		seg_snapshot_free(procs[i]);
	free(procs);
	return 0;
}

static int bus_symbolize(struct source *s, pid_t pid, uint64_t addr, bool want_object, struct source_symbol *ret)
{
	struct bus_proc *bp = find_proc(s->data, pid);

	if (!bp || addr < FAKE_ADDR_BASE)
		return -ENOENT;
	for (size_t k = 0; k < bp->nnames; k++) {
		const struct bus_lock_name *ln = &bp->names[k];

		if (ln->index != addr - FAKE_ADDR_BASE)
			continue;
		if (want_object) {
			snprintf(ret->symbol, sizeof(ret->symbol), "%s", ln->name);
			snprintf(ret->text, sizeof(ret->text), "%s", ln->name);
		} else {
			snprintf(ret->text, sizeof(ret->text), "%s", ln->callsite[0] ? ln->callsite : "-");
		}
		return 0;
	}
	return -ENOENT;
}

static int bus_info(struct source *s, pid_t pid, struct source_proc_info *ret)
{
	struct bus_proc *bp = find_proc(s->data, pid);

	if (!bp)
		return -ENOENT;
	*ret = bp->info;
	return 0;
}

static const struct source_ops bus_ops = {
	.name = "bus",
	.free = bus_free,
	.list = bus_list,
	.get = bus_get,
	.symbolize = bus_symbolize,
	.info = bus_info,
};

struct sd_bus *source_bus(struct source *s)
{
	if (!s || s->ops != &bus_ops)
		return NULL;
	return ((struct bus_data *)s->data)->bus;
}

int source_bus_new(const char *host, struct source **ret, char *why, size_t whylen)
{
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct source *s;
	struct bus_data *d;
	int r, has = 0;

	if (host)
		r = sd_bus_open_system_remote(&bus, host);
	else
		r = sd_bus_open_system(&bus);
	if (r < 0) {
		snprintf(why, whylen, "cannot connect to the system bus%s%s: %s", host ? " of " : "",
			 host ? host : "", strerror(-r));
		return r;
	}
	r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
			       "NameHasOwner", &e, &reply, "s", ELIDED_BUS_NAME);
	if (r >= 0)
		r = sd_bus_message_read(reply, "b", &has);
	if (r < 0) {
		snprintf(why, whylen, "cannot ask the system bus%s%s: %s", host ? " of " : "", host ? host : "",
			 e.message ? e.message : strerror(-r));
		return r;
	}
	if (!has) {
		/* What to do about it, where it has to be done. */
		snprintf(why, whylen, "elided is not running (%s has no owner on the system bus%s%s); start it "
			 "with: %s%s%ssystemctl start elided", ELIDED_BUS_NAME, host ? " of " : "", host ? host : "",
			 host ? "ssh " : "", host ? host : "", host ? " " : "");
		return -ENXIO;
	}

	s = calloc(1, sizeof(*s));
	d = calloc(1, sizeof(*d));
	if (!s || !d) {
		free(s);
		free(d);
		return -ENOMEM;
	}
	d->remote = host != NULL;
	d->rtm_usable = -1;
	s->ops = &bus_ops;
	s->data = d;
	s->synthetic = true;
	s->location = strdup(host ? host : "elided");
	if (!s->location) {
		free(d);
		free(s);
		return -ENOMEM;
	}
	d->bus = bus;
	bus = NULL;
	*ret = s;
	return 0;
}
