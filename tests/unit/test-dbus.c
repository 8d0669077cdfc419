/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided/dbus.c against a private dbus-daemon, without the rest of the
 * daemon: a fake struct elided with two processes (one of ours, one of
 * uid + 1), stubs for what dbus.c calls in process.c/main.c, the server's
 * sd-event loop in a thread and a second connection calling every method.
 *
 * The bus runs with a system-bus-like policy (method calls denied by
 * default) plus systemd/org.elide.elided1.conf, so the policy file is
 * tested too.  Run as root, a forked child drops to uid 1 to check what an
 * unprivileged caller sees.  The learned-policy store is the real one
 * (learned.c), with entries of both uids.  Exits 77 when dbus-daemon is
 * missing.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "dbus.h"
#include "events.h"
#include "discovery.h"
#include "elided.h"
#include "learned.h"
#include "macros.h"

#define PID_A 4242      /* ours */
#define PID_B 4343      /* uid + 1 */
#define TIMEOUT_USEC (5ULL * 1000000ULL)

static char bus_dir[] = "/tmp/test-dbus-XXXXXX";
static char bus_address[512];
static pid_t bus_pid = -1;

/* ---- stubs for process.c / main.c / config.c / discovery.c -------------- */

static struct {
	int set, reset, reload;
	char lock[64];          /* last lock argument, "" for the process */
	enum policy_mode mode;
	uid_t caller;           /* who the last set or reset came from */
	bool reload_fails;
	int totals_error;       /* elided_read_lock_totals fails with it */
	int check_owner;        /* elided_check_owner calls */
	pid_t owner_pid;        /* this process's owner "now" is owner_uid... */
	uid_t owner_uid;
	bool owner_gone;        /* ...or it has exited */
	int forget;             /* elided_forget_learned calls */
	uid_t forget_uid;       /* ...the uid of the last */
} calls;

static struct tracked_process proc_a, proc_b;

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A fresh look at the owner: what the test says it is now. */
int elided_check_owner(struct elided *daemon, struct tracked_process *p)
{
	calls.check_owner++;
	if (p->pid != calls.owner_pid)
		return 0;
	if (calls.owner_gone)
		return -ESRCH;
	if (p->uid != calls.owner_uid) {
		uid_t old = p->uid;

		p->override = POLICY_MODE_UNSET;
		p->uid = calls.owner_uid;
		elided_bus_emit_owner_changed(daemon, p, old);
	}
	return 0;
}

struct tracked_process *elided_find_process(struct elided *d, pid_t pid)
{
	for (struct tracked_process *p = d->processes; p; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

/* futexwatch.c: two programs without libelide, one of another user. */
static bool observing = true;

const char *elided_futexwatch_state(const struct elided *d)
{
	(void)d;
	return observing ? "bpf" : "off (--no-bpf)";
}

int elided_observed_locks(struct elided *d, uid_t caller, struct observed_lock **ret, size_t *n)
{
	struct observed_lock *out;
	size_t k = 0;

	(void)d;
	*ret = NULL;
	*n = 0;
	if (!observing)
		return -EOPNOTSUPP;
	out = calloc(2, sizeof(*out));
	ck_assert_ptr_nonnull(out);
	for (int i = 0; i < 2; i++) {
		struct observed_lock o = { .pid = 5000 + i, .uid = getuid() + (uid_t)i, .start_time = 77,
					   .uaddr = 0x1000 + i, .waits = 10 - i, .wait_ns = 5000 - i,
					   .wait_max_ns = 900 };

		snprintf(o.comm, sizeof(o.comm), "prog%d", i);
		snprintf(o.exe, sizeof(o.exe), "/usr/bin/prog%d", i);
		snprintf(o.where, sizeof(o.where), "prog%d+0x%x", i, 0x4010 + i);
		/* The first one's symbol is known, the second's not (yet). */
		if (i == 0)
			snprintf(o.name, sizeof(o.name), "big_lock");
		if (elided_bus_may_access(caller, o.uid))
			out[k++] = o;
	}
	*ret = out;
	*n = k;
	return 0;
}

/* Magic lock names make the stubs fail the ways process.c can. */
static int stub_lock(struct tracked_process *p, const char *lock, struct lock_view **ret, char *err, size_t errlen)
{
	if (!strcmp(lock, "eperm")) {
		snprintf(err, errlen, "segment owner changed");
		return -EPERM;
	}
	if (!strcmp(lock, "eio")) {
		snprintf(err, errlen, "cannot write control block: disk on fire");
		return -EIO;
	}
	for (size_t i = 0; i < p->nlocks; i++)
		if (!strcmp(lock_name(p->locks[i].nm), lock)) {
			*ret = &p->locks[i];
			return 0;
		}
	snprintf(err, errlen, "pid %d has no lock named '%s'", (int)p->pid, lock);
	return -ENOENT;
}

/* A lock-off event about p, as process.c sends one. */
static void emit_decision(struct elided *daemon, const struct tracked_process *p)
{
	struct elided_event ev = {
		.kind = ELIDED_EVENT_LOCK_OFF,
		.priority = LOG_INFO,
		.pid = p->pid,
		.uid = p->uid,
		.exe = p->exe,
		.lock = "stats_lock",
		.mode = "off",
		.source = "adaptation",
		.reason = "its transactions kept aborting",
		.caller_uid = ELIDED_NO_UID,
		.old_uid = ELIDED_NO_UID,
	};

	elided_bus_emit_event(daemon, &ev);
}

int elided_set_override(struct elided *d, struct tracked_process *p, const char *lock, enum policy_mode mode,
			uid_t caller, char *err, size_t errlen)
{
	struct lock_view *v;
	int r;

	calls.set++;
	calls.caller = caller;
	snprintf(calls.lock, sizeof(calls.lock), "%s", lock ? lock : "");
	calls.mode = mode;
	if (!lock) {
		p->override = mode;
		return 0;
	}
	r = stub_lock(p, lock, &v, err, errlen);
	if (r < 0)
		return r;
	v->override = mode;
	return 0;
}

int elided_reset_override(struct elided *daemon, struct tracked_process *p, const char *lock, uid_t caller,
			  char *err, size_t errlen)
{
	struct lock_view *v;
	int r;

	calls.reset++;
	calls.caller = caller;
	/* A hook for the unprivileged child: signals, sent from the server's
	 * thread, about both processes, then B (the child's) becomes root's. */
	if (lock && !strcmp(lock, "emit-signals")) {
		uid_t old = proc_b.uid;

		elided_bus_emit_process_added(daemon, &proc_a);
		elided_bus_emit_process_removed(daemon, &proc_a);
		elided_bus_emit_process_added(daemon, &proc_b);
		emit_decision(daemon, &proc_a);
		emit_decision(daemon, &proc_b);
		proc_b.uid = 0;
		elided_bus_emit_owner_changed(daemon, &proc_b, old);
		return 0;
	}
	snprintf(calls.lock, sizeof(calls.lock), "%s", lock ? lock : "");
	if (!lock) {
		p->override = POLICY_MODE_UNSET;
		for (size_t i = 0; i < p->nlocks; i++)
			p->locks[i].override = POLICY_MODE_UNSET;
		return 0;
	}
	r = stub_lock(p, lock, &v, err, errlen);
	if (r < 0)
		return r;
	v->override = POLICY_MODE_UNSET;
	return 0;
}

/* Since when cache_lock of PID_A has been "never elide" (its view says learned). */
#define LEARNED_SINCE 1699990000
#define LEARNED_NOW 1700000000
#define LEARNED_MEMCACHED "path:/usr/bin/memcached:ino=1:mtime=2"

int64_t elided_learned_since(const struct tracked_process *p, const struct lock_view *v)
{
	(void)p;
	return v->learned == VIEW_LEARNED_OFF ? LEARNED_SINCE : -1;
}

/* As learning.c: the fixture's programs are "path:EXE:ino=1:mtime=2". */
int elided_forget_learned(struct elided *daemon, uid_t uid, const char *exe, size_t *count)
{
	char program[256];

	calls.forget++;
	calls.forget_uid = uid;
	*count = 0;
	if (!daemon->learned)
		return 0;
	if (!exe || !*exe) {
		*count = learned_store_forget(daemon->learned, uid, NULL);
		return 0;
	}
	snprintf(program, sizeof(program), "path:%s:ino=1:mtime=2", exe);
	*count = learned_store_forget(daemon->learned, uid, program);
	return 0;
}

int elided_reload(struct elided *d, char *err, size_t errlen)
{
	calls.reload++;
	if (calls.reload_fails) {
		snprintf(err, errlen, "/etc/elide.conf:3: unknown setting 'bogus'");
		return -EINVAL;
	}
	snprintf(d->last_reload, sizeof(d->last_reload), "ok at reload %d", calls.reload);
	return 0;
}

void elided_status_line(struct elided *d, char *buf, size_t size)
{
	snprintf(buf, size, "%zu processes, test status", d->nprocesses);
}

const char *discovery_describe(const struct discovery *disc)
{
	return "fallback (inotify+pidfd): test";
}

/* Two processes without a segment: ours (PID_A's uid) and uid + 1's. */
size_t discovery_no_segment_list(const struct discovery *disc, const struct discovery_no_segment_proc **ret)
{
	static struct discovery_no_segment_proc procs[] = {
		{ .pid = 5252, .start_time = 7, .comm = "mine" },
		{ .pid = 5353, .start_time = 8, .comm = "bad\xff" "comm" },
	};

	procs[0].uid = getuid();
	procs[1].uid = getuid() + 1;
	*ret = procs;
	return ARRAY_SIZE(procs);
}

const char *policy_mode_to_string(enum policy_mode mode)
{
	switch (mode) {
	case POLICY_MODE_ADAPTIVE:
		return "adaptive";
	case POLICY_MODE_ON:
		return "on";
	case POLICY_MODE_OFF:
		return "off";
	default:
		return "unset";
	}
}

int policy_mode_from_string(const char *s, enum policy_mode *ret)
{
	if (!strcmp(s, "adaptive"))
		*ret = POLICY_MODE_ADAPTIVE;
	else if (!strcmp(s, "on"))
		*ret = POLICY_MODE_ON;
	else if (!strcmp(s, "off"))
		*ret = POLICY_MODE_OFF;
	else
		return -EINVAL;
	return 0;
}

/* ---- the fake daemon ----------------------------------------------------- */

static struct elided d;
static struct lock_view locks_a[2], locks_b[1];
static uint64_t totals_a[2][ELIDE_SEG_NSTATS], totals_b[1][ELIDE_SEG_NSTATS];
static struct elide_config config;
static char config_file0[] = "/etc/elide.conf", config_file1[] = "/etc/elide.conf.d/10-test.conf";
static char runtime_dir[] = "/run/elide-test";
static long fake_discovery[4]; /* only passed to the discovery_describe stub */
static pthread_t server_thread;
static atomic_bool server_stop;
static bool server_running;
static sd_bus *client;

/* Counters "read from the segment": the fixture's tables. */
int elided_read_lock_totals(struct elided *daemon, struct tracked_process *p, struct lock_totals **ret, size_t *n,
			    char *err, size_t errlen)
{
	uint64_t(*table)[ELIDE_SEG_NSTATS] = p->locks == locks_a ? totals_a : totals_b;
	struct lock_totals *out;

	if (calls.totals_error) {
		snprintf(err, errlen, "%s: changed size while being read", p->seg_name);
		return calls.totals_error;
	}
	out = calloc(p->nlocks + 1, sizeof(*out));
	ck_assert_ptr_nonnull(out);
	for (size_t i = 0; i < p->nlocks; i++) {
		out[i].view = &p->locks[i];
		memcpy(out[i].stats, table[i], sizeof(out[i].stats));
		/* Contention figures: distinct values per lock and field. */
		out[i].wait_ns = 1000 * (i + 1) + 1;
		out[i].wait_max_ns = 1000 * (i + 1) + 2;
		out[i].hold_ns = 1000 * (i + 1) + 3;
		out[i].hold_samples = 1000 * (i + 1) + 4;
		out[i].hold_long = 1000 * (i + 1) + 5;
	}
	*ret = out;
	*n = p->nlocks;
	return 0;
}

/* What the segment says of stats_lock (GetLocks checks every field). */
static const uint64_t stats_lock_totals[ELIDE_SEG_NSTATS] = {
	[ELIDE_SEG_STAT_ACQUIRED] = 1000,
	[ELIDE_SEG_STAT_ATTEMPTS] = 900,
	[ELIDE_SEG_STAT_COMMITS] = 800,
	[ELIDE_SEG_STAT_FALLBACKS] = 50,
	[ELIDE_SEG_STAT_CONTENDED] = 70,
	[ELIDE_SEG_STAT_CYCLES_LOST] = 12345,
	[ELIDE_SEG_STAT_ABORT_CONFLICT] = 60,
	[ELIDE_SEG_STAT_ABORT_CAPACITY] = 30,
	[ELIDE_SEG_STAT_ABORT_BUSY] = 5,
	[ELIDE_SEG_STAT_ABORT_EXPLICIT] = 3,
	[ELIDE_SEG_STAT_ABORT_RETRY] = 1,
	[ELIDE_SEG_STAT_ABORT_OTHER] = 1,
};

/* Three entries of ours (two programs), one of uid + 1 (invalid UTF-8 in its lock). */
static void fill_learned(void)
{
	struct learned_entry never = { .verdict = LEARNED_NEVER, .runs = 3, .acquired = 5000, .attempts = 1000,
				       .commits = 5 };
	struct learned_entry elides = { .verdict = LEARNED_ELIDES, .runs = 1, .acquired = 900, .attempts = 800,
					.commits = 790 };

	never.aborts[LEARNED_ABORT_CONFLICT] = 900;
	never.aborts[LEARNED_ABORT_CAPACITY] = 95;
	elides.aborts[LEARNED_ABORT_OTHER] = 10;
	ck_assert_int_eq(learned_store_new(LEARNED_PER_UID_CAP_DEFAULT, LEARNED_TOTAL_CAP_DEFAULT, &d.learned), 0);
	ck_assert_int_eq(learned_store_put(d.learned, getuid(), LEARNED_MEMCACHED, "data:memcached+0x10", &never,
					   LEARNED_NOW), 0);
	ck_assert_int_eq(learned_store_put(d.learned, getuid(), LEARNED_MEMCACHED, "call:libc.so.6+0x99", &elides,
					   LEARNED_NOW + 5), 0);
	ck_assert_int_eq(learned_store_put(d.learned, getuid(), "path:/usr/bin/other:ino=1:mtime=2",
					   "data:other+0x20", &never, LEARNED_NOW), 0);
	ck_assert_int_eq(learned_store_put(d.learned, getuid() + 1, LEARNED_MEMCACHED, "data:odd\xff+0x10",
					   &never, LEARNED_NOW), 0);
}

static void fill_state(void)
{
	struct lock_view *l;

	memset(&calls, 0, sizeof(calls));
	memset(&d, 0, sizeof(d));
	memset(&proc_a, 0, sizeof(proc_a));
	memset(&proc_b, 0, sizeof(proc_b));
	for (size_t i = 0; i < ARRAY_SIZE(locks_a); i++)
		free(locks_a[i].nm);
	free(locks_b[0].nm);
	memset(locks_a, 0, sizeof(locks_a));
	memset(locks_b, 0, sizeof(locks_b));
	memset(totals_a, 0, sizeof(totals_a));
	memset(totals_b, 0, sizeof(totals_b));
	memset(&config, 0, sizeof(config));

	config.interval = 1.0;
	config.files[0] = config_file0;
	config.files[1] = config_file1;
	config.nfiles = 2;

	locks_a[0].nm = lock_names_new("stats_lock", "do_stats", "do_stats+0x12 (memcached)");
	locks_a[1].nm = lock_names_new("cache_lock", NULL, NULL);
	/* Hostile bytes from a segment: U+FFFF and a stray 0xff. */
	locks_b[0].nm = lock_names_new("odd\xef\xbf\xbfname", "f\xff", NULL);
	ck_assert(locks_a[0].nm && locks_a[1].nm && locks_b[0].nm);
	l = &locks_a[0];
	l->index = 2;
	l->kind = ELIDE_SEG_KIND_MUTEX;
	l->state = ELIDE_SEG_STATE_ELIDING;
	l->reason = ELIDE_SEG_REASON_CONTENDED;
	memcpy(totals_a[0], stats_lock_totals, sizeof(totals_a[0]));
	l->rates[LOCK_RATE_ACQUIRED] = 100;
	l->rates[LOCK_RATE_ATTEMPTS] = 90;
	l->rates[LOCK_RATE_COMMITS] = 80;
	l->rates[LOCK_RATE_ABORTS] = 10;
	l->rates[LOCK_RATE_CYCLES_LOST] = 1000;

	l = &locks_a[1];
	l->index = 3;
	l->kind = ELIDE_SEG_KIND_RWLOCK_READ;
	l->state = ELIDE_SEG_STATE_OFF_ADAPT;
	l->reason = ELIDE_SEG_REASON_ABORTS;
	l->override = POLICY_MODE_OFF;
	l->learned = VIEW_LEARNED_OFF;
	l->rates[LOCK_RATE_ACQUIRED] = 50;
	l->rates[LOCK_RATE_ATTEMPTS] = 10;
	l->rates[LOCK_RATE_COMMITS] = 2;
	l->rates[LOCK_RATE_ABORTS] = 8;
	l->rates[LOCK_RATE_CYCLES_LOST] = 500;

	proc_a.pid = PID_A;
	proc_a.uid = getuid();
	proc_a.start_time = 123456;
	snprintf(proc_a.seg_name, sizeof(proc_a.seg_name), "%d-123456.seg", PID_A);
	snprintf(proc_a.exe, sizeof(proc_a.exe), "/usr/bin/memcached");
	snprintf(proc_a.comm, sizeof(proc_a.comm), "memcached");
	snprintf(proc_a.unit, sizeof(proc_a.unit), "memcached.service");
	proc_a.elision = ELIDE_SEG_ELISION_ON;
	proc_a.decision.mode = POLICY_MODE_ADAPTIVE;
	proc_a.locks = locks_a;
	proc_a.nlocks = 2;
	/* Three points in a ring that has wrapped: slots 58, 59, 0. */
	for (int i = 0; i < 3; i++) {
		struct history_point *h = &proc_a.history[(ELIDED_HISTORY - 2 + i) % ELIDED_HISTORY];

		h->time_ns = 1000 + (uint64_t)i;
		h->acquired_per_sec = 75.0 * i;
		h->attempts_per_sec = 50.0 * i;
		h->commits_per_sec = 41.0 * i;
		h->aborts_per_sec = 9.0 * i;
		h->cycles_lost_per_sec = 750.0 * i;
		h->wait_per_sec = 0.25 * i;
	}
	proc_a.history_len = 3;
	proc_a.history_next = 1;
	proc_a.next = &proc_b;

	l = &locks_b[0];
	l->index = 2;
	l->kind = ELIDE_SEG_KIND_MUTEX;
	l->state = ELIDE_SEG_STATE_PLAIN;
	l->reason = ELIDE_SEG_REASON_PROCESS_OFF;
	l->rates[LOCK_RATE_ACQUIRED] = 10;

	proc_b.pid = PID_B;
	proc_b.uid = getuid() + 1;
	proc_b.start_time = 654321;
	snprintf(proc_b.exe, sizeof(proc_b.exe), "/opt/bad\xffname");
	snprintf(proc_b.comm, sizeof(proc_b.comm), "worker");
	proc_b.elision = ELIDE_SEG_ELISION_OFF;
	snprintf(proc_b.status_reason, sizeof(proc_b.status_reason), "RTM not usable: TSX disabled");
	proc_b.decision.mode = POLICY_MODE_OFF;
	proc_b.locks = locks_b;
	proc_b.nlocks = 1;

	d.processes = &proc_a;
	d.nprocesses = 2;
	d.unseen.no_segment = 3; /* counted; the list (stub) has two */
	d.unseen.no_segment_total = 5;
	d.runtime_dir = runtime_dir;
	d.discovery = (struct discovery *)fake_discovery;
	d.config = &config;
	snprintf(d.last_reload, sizeof(d.last_reload), "ok at start");
	d.rtm_usable = true;
	snprintf(d.rtm_reason, sizeof(d.rtm_reason), "RTM works (probe committed)");
	fill_learned();
}

static void *server_main(void *arg)
{
	while (!atomic_load(&server_stop)) {
		int r = sd_event_run(d.event, 50 * 1000);

		if (r < 0) {
			fprintf(stderr, "sd_event_run: %s\n", strerror(-r));
			break;
		}
	}
	return NULL;
}

static void server_start(void)
{
	atomic_store(&server_stop, false);
	ck_assert_int_eq(pthread_create(&server_thread, NULL, server_main, NULL), 0);
	server_running = true;
}

/* Bounded: the loop wakes at least every 50 ms. */
static void server_pause(void)
{
	if (!server_running)
		return;
	atomic_store(&server_stop, true);
	pthread_join(server_thread, NULL);
	server_running = false;
}

static void setup(void)
{
	int r;

	fill_state();
	ck_assert_int_eq(sd_event_new(&d.event), 0);
	r = elided_bus_setup(&d);
	ck_assert_msg(r == 0, "elided_bus_setup: %s", strerror(-r));
	ck_assert_ptr_nonnull(d.bus);
	server_start();

	ck_assert_int_eq(sd_bus_open_system(&client), 0);
	ck_assert_int_eq(sd_bus_set_method_call_timeout(client, TIMEOUT_USEC), 0);
}

static void teardown(void)
{
	client = sd_bus_flush_close_unref(client);
	server_pause();
	/* Synchronously, so the next test's RequestName never races our disconnect. */
	if (d.bus)
		sd_bus_release_name(d.bus, ELIDED_BUS_NAME);
	elided_bus_free(&d);
	d.event = sd_event_unref(d.event);
	learned_store_free(d.learned);
	d.learned = NULL;
}

/* ---- helpers ------------------------------------------------------------- */

static void bus_error_freep(sd_bus_error *e)
{
	sd_bus_error_free(e);
}
#define _cleanup_bus_error_ _cleanup_(bus_error_freep)

static int call(sd_bus *bus, const char *method, sd_bus_error *error, sd_bus_message **reply, const char *types, ...)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
	va_list ap;
	int r;

	r = sd_bus_message_new_method_call(bus, &m, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, method);
	if (r < 0)
		return r;
	if (types) {
		va_start(ap, types);
		r = sd_bus_message_appendv(m, types, ap);
		va_end(ap);
		if (r < 0)
			return r;
	}
	return sd_bus_call(bus, m, TIMEOUT_USEC, error, reply);
}

/* The call fails with error `name` and, when given, message `text`. */
#define assert_call_error(_name, _text, _method, ...)                                                   \
	do {                                                                                            \
		_cleanup_bus_error_ sd_bus_error _e = SD_BUS_ERROR_NULL;                                \
		int _r = call(client, _method, &_e, NULL, __VA_ARGS__);                                 \
		ck_assert_int_lt(_r, 0);                                                                \
		ck_assert_msg(sd_bus_error_has_name(&_e, _name), "%s: got %s (%s), expected %s", _method, \
			      _e.name, _e.message, _name);                                              \
		if (_text)                                                                              \
			ck_assert_str_eq(_e.message, (const char *)(_text));                            \
	} while (0)

#define assert_call_ok(_method, ...)                                                                    \
	do {                                                                                            \
		_cleanup_bus_error_ sd_bus_error _e = SD_BUS_ERROR_NULL;                                \
		int _r = call(client, _method, &_e, NULL, __VA_ARGS__);                                 \
		ck_assert_msg(_r >= 0, "%s: %s: %s", _method, _e.name, _e.message);                     \
	} while (0)

struct proc_row {
	uint32_t pid, uid, nlocks;
	const char *exe, *comm, *unit, *mode, *state;
	double acquired, commits, ratio, cycles, wait;
	uint64_t start_time;
};

/* ListProcesses into rows (strings point into *reply); returns the count. */
static int list_processes(sd_bus *bus, sd_bus_message **reply, struct proc_row *rows, int max)
{
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	int n = 0, r;

	r = call(bus, "ListProcesses", &error, reply, NULL);
	if (r < 0)
		return r;
	r = sd_bus_message_enter_container(*reply, 'a', "(uusssssddddtud)");
	if (r < 0)
		return r;
	for (;;) {
		struct proc_row row;

		r = sd_bus_message_read(*reply, "(uusssssddddtud)", &row.pid, &row.uid, &row.exe, &row.comm, &row.unit,
					&row.mode, &row.state, &row.acquired, &row.commits, &row.ratio, &row.cycles,
					&row.start_time, &row.nlocks, &row.wait);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		if (n < max)
			rows[n] = row;
		n++;
	}
	r = sd_bus_message_exit_container(*reply);
	return r < 0 ? r : n;
}

static const struct proc_row *find_row(const struct proc_row *rows, int n, uint32_t pid)
{
	for (int i = 0; i < n; i++)
		if (rows[i].pid == pid)
			return &rows[i];
	return NULL;
}

struct lock_row {
	uint32_t index;
	const char *kind, *name, *function, *callsite, *state, *reason, *override;
	uint64_t acquired, attempts, commits, fallbacks, contended, cycles_lost;
	uint64_t aborts[8];     /* conflict .. other */
	unsigned naborts;
	uint64_t watch[5];      /* watch_keys[] */
	unsigned nwatch;
	double acquired_rate, commits_rate, ratio;
};

static const char *const watch_keys[] = { "wait_ns", "wait_max_ns", "hold_ns", "hold_samples", "hold_long" };

static int get_locks(uint32_t pid, sd_bus_message **reply, struct lock_row *rows, int max)
{
	static const char *const causes[] = { "conflict", "capacity", "busy", "explicit",
					      "retry", "debug", "nested", "other" };
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	int n = 0, r;

	r = call(client, "GetLocks", &error, reply, "u", pid);
	ck_assert_msg(r >= 0, "GetLocks: %s", error.message);
	ck_assert_int_ge(sd_bus_message_enter_container(*reply, 'a', "(ussssttttta{st}tdddsss)"), 0);
	for (;;) {
		struct lock_row row = {};
		const char *cause;
		uint64_t v;

		r = sd_bus_message_enter_container(*reply, 'r', "ussssttttta{st}tdddsss");
		ck_assert_int_ge(r, 0);
		if (r == 0)
			break;
		ck_assert_int_gt(sd_bus_message_read(*reply, "ussssttttt", &row.index, &row.kind, &row.name,
						     &row.function, &row.callsite, &row.acquired, &row.attempts,
						     &row.commits, &row.fallbacks, &row.contended), 0);
		ck_assert_int_gt(sd_bus_message_enter_container(*reply, 'a', "{st}"), 0);
		while ((r = sd_bus_message_read(*reply, "{st}", &cause, &v)) > 0) {
			/* The abort causes, in order, then the contention figures. */
			if (row.naborts == 8) {
				ck_assert_uint_lt(row.nwatch, ARRAY_SIZE(watch_keys));
				ck_assert_str_eq(cause, watch_keys[row.nwatch]);
				row.watch[row.nwatch++] = v;
				continue;
			}
			ck_assert_str_eq(cause, causes[row.naborts]);
			row.aborts[row.naborts++] = v;
		}
		ck_assert_uint_eq(row.nwatch, ARRAY_SIZE(watch_keys));
		ck_assert_int_eq(r, 0);
		ck_assert_int_ge(sd_bus_message_exit_container(*reply), 0);
		ck_assert_int_gt(sd_bus_message_read(*reply, "tdddsss", &row.cycles_lost, &row.acquired_rate,
						     &row.commits_rate, &row.ratio, &row.state, &row.reason,
						     &row.override), 0);
		ck_assert_int_ge(sd_bus_message_exit_container(*reply), 0);
		if (n < max)
			rows[n] = row;
		n++;
	}
	ck_assert_int_ge(sd_bus_message_exit_container(*reply), 0);
	return n;
}

struct learned_row {
	uint32_t uid, runs;
	const char *program, *lock, *verdict;
	uint64_t acquired, attempts, commits, aborts;
	int64_t first_learned, last_updated;
};

/* ListLearned into rows (strings point into *reply); the count or -errno.
 * No Check: the unprivileged child calls it too. */
static int list_learned(sd_bus *bus, sd_bus_message **reply, struct learned_row *rows, int max)
{
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	int n = 0, r;

	r = call(bus, "ListLearned", &error, reply, NULL);
	if (r < 0)
		return r;
	r = sd_bus_message_enter_container(*reply, 'a', "(usssuttttxx)");
	if (r < 0)
		return r;
	for (;;) {
		struct learned_row row;

		r = sd_bus_message_read(*reply, "(usssuttttxx)", &row.uid, &row.program, &row.lock, &row.verdict,
					&row.runs, &row.acquired, &row.attempts, &row.commits, &row.aborts,
					&row.first_learned, &row.last_updated);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		if (n < max)
			rows[n] = row;
		n++;
	}
	r = sd_bus_message_exit_container(*reply);
	return r < 0 ? r : n;
}

/* ForgetLearned(exe): the count, or -errno. */
static int64_t forget_learned(sd_bus *bus, const char *exe)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	uint32_t count;
	int r;

	r = call(bus, "ForgetLearned", &error, &reply, "s", exe);
	if (r < 0)
		return r;
	r = sd_bus_message_read(reply, "u", &count);
	return r < 0 ? (int64_t)r : (int64_t)count;
}

/* ---- tests --------------------------------------------------------------- */

START_TEST(test_may_access)
{
	ck_assert(elided_bus_may_access(0, 1000));
	ck_assert(elided_bus_may_access(0, 0));
	ck_assert(elided_bus_may_access(1000, 1000));
	ck_assert(!elided_bus_may_access(1000, 1001));
	ck_assert(!elided_bus_may_access(1000, 0));
	ck_assert(!elided_bus_may_access((uid_t)-1, (uid_t)-1));
}
END_TEST

START_TEST(test_properties)
{
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	char *s = NULL, **files = NULL;
	double interval = 0;
	uint32_t n = 0;
	int b = 0;

#define GET_STRING(prop, expect)                                                                        \
	do {                                                                                            \
		ck_assert_int_ge(sd_bus_get_property_string(client, ELIDED_BUS_NAME, ELIDED_BUS_PATH,   \
							    ELIDED_BUS_INTERFACE, prop, &error, &s), 0); \
		ck_assert_str_eq(s, expect);                                                            \
		free(s);                                                                                \
	} while (0)

	GET_STRING("Version", PACKAGE_VERSION);
	GET_STRING("DiscoveryMethod", "fallback (inotify+pidfd): test");
	GET_STRING("RuntimeDirectory", "/run/elide-test");
	GET_STRING("LastReload", "ok at start");
	GET_STRING("RtmReason", "RTM works (probe committed)");
#undef GET_STRING

	ck_assert_int_ge(sd_bus_get_property_strv(client, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
						  "ConfigFiles", &error, &files), 0);
	ck_assert_ptr_nonnull(files);
	ck_assert_str_eq(files[0], "/etc/elide.conf");
	ck_assert_str_eq(files[1], "/etc/elide.conf.d/10-test.conf");
	ck_assert_ptr_null(files[2]);
	for (char **f = files; *f; f++)
		free(*f);
	free(files);

	ck_assert_int_ge(sd_bus_get_property_trivial(client, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
						     "RtmUsable", &error, 'b', &b), 0);
	ck_assert_int_eq(b, 1);
	ck_assert_int_ge(sd_bus_get_property_trivial(client, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
						     "Interval", &error, 'd', &interval), 0);
	ck_assert_double_eq(interval, 1.0);
	ck_assert_int_ge(sd_bus_get_property_trivial(client, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
						     "NProcesses", &error, 'u', &n), 0);
	ck_assert_uint_eq(n, 2);
}
END_TEST

START_TEST(test_get_status)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	const char *summary;
	uint32_t n, eliding;
	double commits, aborts, cycles;

	ck_assert_int_ge(call(client, "GetStatus", &error, &reply, NULL), 0);
	ck_assert_int_gt(sd_bus_message_read(reply, "suuddd", &summary, &n, &eliding, &commits, &aborts, &cycles), 0);
	ck_assert_str_eq(summary, "2 processes, test status");
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(eliding, 1);
	ck_assert_double_eq_tol(commits, 82, 1e-9);
	ck_assert_double_eq_tol(aborts, 18, 1e-9);
	ck_assert_double_eq_tol(cycles, 1500, 1e-9);
}
END_TEST

START_TEST(test_list_processes)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct proc_row rows[4];
	const struct proc_row *a, *b;
	int n;

	n = list_processes(client, &reply, rows, 4);
	ck_assert_int_ge(n, 0);

	a = find_row(rows, n, PID_A);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->uid, getuid());
	ck_assert_str_eq(a->exe, "/usr/bin/memcached");
	ck_assert_str_eq(a->comm, "memcached");
	ck_assert_str_eq(a->unit, "memcached.service");
	ck_assert_str_eq(a->mode, "adaptive");
	ck_assert_str_eq(a->state, "on");
	ck_assert_double_eq_tol(a->acquired, 150, 1e-9);
	ck_assert_double_eq_tol(a->commits, 82, 1e-9);
	ck_assert_double_eq_tol(a->ratio, 0.18, 1e-9);
	ck_assert_double_eq_tol(a->cycles, 1500, 1e-9);
	ck_assert_double_eq_tol(a->wait, 0.5, 1e-9);
	ck_assert_uint_eq(a->start_time, 123456);
	ck_assert_uint_eq(a->nlocks, 2);

	b = find_row(rows, n, PID_B);
	if (getuid() != 0) {
		/* Not root: the other user's process is invisible. */
		ck_assert_int_eq(n, 1);
		ck_assert_ptr_null(b);
		return;
	}
	ck_assert_int_eq(n, 2);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(b->uid, getuid() + 1);
	/* Invalid UTF-8 from the segment is made valid, not a failed reply. */
	ck_assert_str_eq(b->exe, "/opt/bad?name");
	ck_assert_str_eq(b->unit, "");
	ck_assert_str_eq(b->mode, "off");
	ck_assert_str_eq(b->state, "off: RTM not usable: TSX disabled");
	ck_assert_double_eq(b->ratio, 0);
}
END_TEST

static uint32_t prop_u(sd_bus *bus, const char *name)
{
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	uint32_t v = UINT32_MAX;

	ck_assert_int_ge(sd_bus_get_property_trivial(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, name,
						     &error, 'u', &v), 0);
	return v;
}

static uint64_t prop_t(sd_bus *bus, const char *name)
{
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	uint64_t v = UINT64_MAX;

	ck_assert_int_ge(sd_bus_get_property_trivial(bus, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, name,
						     &error, 't', &v), 0);
	return v;
}

/* ListProcessesWithoutSegment: pid of each row, in order; the count. */
static int list_no_segment(sd_bus *bus, uint32_t *pids, const char **comms, int max)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	static char comm_copy[4][16];
	int n = 0, r;

	r = call(bus, "ListProcessesWithoutSegment", &error, &reply, NULL);
	if (r < 0)
		return r;
	r = sd_bus_message_enter_container(reply, 'a', "(uuts)");
	if (r < 0)
		return r;
	for (;;) {
		uint32_t pid, uid;
		uint64_t start;
		const char *comm;

		r = sd_bus_message_read(reply, "(uuts)", &pid, &uid, &start, &comm);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		if (n < max && n < 4) {
			pids[n] = pid;
			snprintf(comm_copy[n], sizeof(comm_copy[n]), "%s", comm);
			comms[n] = comm_copy[n];
		}
		n++;
	}
	return n;
}

START_TEST(test_list_no_segment)
{
	const char *comms[4];
	uint32_t pids[4];
	int n;

	ck_assert_int_eq(prop_u(client, "ProcessesWithoutSegment"), 3);
	ck_assert_uint_eq(prop_t(client, "ProcessesWithoutSegmentTotal"), 5);
	n = list_no_segment(client, pids, comms, 4);
	if (getuid() != 0) {
		/* Not root: the other user's process is invisible. */
		ck_assert_int_eq(n, 1);
		ck_assert_uint_eq(pids[0], 5252);
		return;
	}
	ck_assert_int_eq(n, 2);
	ck_assert_uint_eq(pids[0], 5252);
	ck_assert_str_eq(comms[0], "mine");
	ck_assert_uint_eq(pids[1], 5353);
	/* The program's bytes, made valid UTF-8. */
	ck_assert_str_eq(comms[1], "bad?comm");
}
END_TEST

START_TEST(test_list_observed_locks)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	const char *comm, *exe, *where, *name;
	uint64_t start, addr, waits, wait_ns, max_ns;
	uint32_t pid, uid;
	int r, rows = 0;

	r = call(client, "ListObservedLocks", &error, &reply, "");
	ck_assert_msg(r >= 0, "ListObservedLocks: %s", error.message);
	ck_assert_int_ge(sd_bus_message_enter_container(reply, 'a', "(uutssstttts)"), 0);
	while ((r = sd_bus_message_read(reply, "(uutssstttts)", &pid, &uid, &start, &comm, &exe, &where, &addr, &waits,
					&wait_ns, &max_ns, &name)) > 0) {
		if (rows++ == 0) {
			ck_assert_uint_eq(pid, 5000);
			ck_assert_uint_eq(uid, getuid());
			ck_assert_str_eq(comm, "prog0");
			ck_assert_str_eq(exe, "/usr/bin/prog0");
			ck_assert_str_eq(where, "prog0+0x4010");
			ck_assert_uint_eq(addr, 0x1000);
			ck_assert_uint_eq(waits, 10);
			ck_assert_uint_eq(wait_ns, 5000);
			ck_assert_uint_eq(max_ns, 900);
			ck_assert_str_eq(name, "big_lock");
		} else
			ck_assert_str_eq(name, "");
	}
	ck_assert_int_eq(r, 0);
	/* Root sees the other user's program too; a user only its own. */
	ck_assert_int_eq(rows, getuid() == 0 ? 2 : 1);

	observing = false;
	assert_call_error(ELIDED_ERROR_NOT_OBSERVING,
			  "Lock waits of programs without libelide are not observed: off (--no-bpf)", "ListObservedLocks",
			  "");
	observing = true;
}
END_TEST

START_TEST(test_get_locks)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *reply_b = NULL;
	struct lock_row rows[4];
	static const uint64_t aborts[8] = { 60, 30, 5, 3, 1, 0, 0, 1 };
	int n;

	n = get_locks(PID_A, &reply, rows, 4);
	ck_assert_int_eq(n, 2);

	ck_assert_uint_eq(rows[0].index, 2);
	ck_assert_str_eq(rows[0].kind, "mutex");
	ck_assert_str_eq(rows[0].name, "stats_lock");
	ck_assert_str_eq(rows[0].function, "do_stats");
	ck_assert_str_eq(rows[0].callsite, "do_stats+0x12 (memcached)");
	ck_assert_uint_eq(rows[0].acquired, 1000);
	ck_assert_uint_eq(rows[0].attempts, 900);
	ck_assert_uint_eq(rows[0].commits, 800);
	ck_assert_uint_eq(rows[0].fallbacks, 50);
	ck_assert_uint_eq(rows[0].contended, 70);
	ck_assert_uint_eq(rows[0].naborts, 8);
	for (int i = 0; i < 8; i++)
		ck_assert_uint_eq(rows[0].aborts[i], aborts[i]);
	ck_assert_uint_eq(rows[0].cycles_lost, 12345);
	for (unsigned i = 0; i < ARRAY_SIZE(watch_keys); i++)
		ck_assert_uint_eq(rows[0].watch[i], 1000 + i + 1);
	ck_assert_double_eq_tol(rows[0].acquired_rate, 100, 1e-9);
	ck_assert_double_eq_tol(rows[0].commits_rate, 80, 1e-9);
	ck_assert_double_eq_tol(rows[0].ratio, 10.0 / 90.0, 1e-9);
	ck_assert_str_eq(rows[0].state, "eliding");
	ck_assert_str_eq(rows[0].reason, "contended");
	ck_assert_str_eq(rows[0].override, "");

	ck_assert_str_eq(rows[1].kind, "rw-rd");
	ck_assert_str_eq(rows[1].state, "backoff");
	ck_assert_str_eq(rows[1].reason, "aborts");
	ck_assert_str_eq(rows[1].override, "off");
	ck_assert_double_eq_tol(rows[1].ratio, 0.8, 1e-9);

	if (getuid() == 0) {
		n = get_locks(PID_B, &reply_b, rows, 4);
		ck_assert_int_eq(n, 1);
		ck_assert_str_eq(rows[0].name, "odd???name");
		ck_assert_str_eq(rows[0].function, "f?");
		ck_assert_double_eq(rows[0].ratio, 0);
	} else
		assert_call_error(SD_BUS_ERROR_ACCESS_DENIED, "Permission denied: process 4343 belongs to another user",
				  "GetLocks", "u", (uint32_t)PID_B);

	assert_call_error(ELIDED_ERROR_NO_SUCH_PROCESS, "No libelide process with PID 999999", "GetLocks", "u",
			  (uint32_t)999999);
	assert_call_error(ELIDED_ERROR_NO_SUCH_PROCESS, NULL, "GetLocks", "u", (uint32_t)0);

	/* The segment cannot be read at the call: a named error, not stale numbers. */
	calls.totals_error = -EBADMSG;
	assert_call_error(ELIDED_ERROR_FAILED, "Cannot read the locks of process 4242: 4242-123456.seg: changed size while being read",
			  "GetLocks", "u", (uint32_t)PID_A);
	calls.totals_error = -ESRCH;
	assert_call_error(ELIDED_ERROR_NO_SUCH_PROCESS, "Process 4242 has exited", "GetLocks", "u", (uint32_t)PID_A);
	calls.totals_error = 0;
}
END_TEST

/* lock-names.c: packed strings, NULL as "", long ones cut at their caps. */
START_TEST(test_lock_names)
{
	char long_name[400];
	struct lock_names *nm;

	nm = lock_names_new("a", NULL, "c (m)");
	ck_assert_ptr_nonnull(nm);
	ck_assert_str_eq(lock_name(nm), "a");
	ck_assert_str_eq(lock_function(nm), "");
	ck_assert_str_eq(lock_callsite(nm), "c (m)");
	free(nm);

	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	nm = lock_names_new(long_name, long_name, long_name);
	ck_assert_ptr_nonnull(nm);
	ck_assert_uint_eq(strlen(lock_name(nm)), ELIDED_LOCK_NAME_MAX - 1);
	ck_assert_uint_eq(strlen(lock_function(nm)), ELIDED_LOCK_NAME_MAX - 1);
	ck_assert_uint_eq(strlen(lock_callsite(nm)), ELIDED_CALLSITE_TEXT_MAX - 1);
	free(nm);
}
END_TEST

START_TEST(test_get_history)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *empty = NULL;
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	uint64_t t;
	double acq, com, abo, cyc, wai;
	int i = 0, r;

	ck_assert_int_ge(call(client, "GetHistory", &error, &reply, "u", (uint32_t)PID_A), 0);
	ck_assert_int_gt(sd_bus_message_enter_container(reply, 'a', "(tddddd)"), 0);
	while ((r = sd_bus_message_read(reply, "(tddddd)", &t, &acq, &com, &abo, &cyc, &wai)) > 0) {
		/* Oldest first across the ring's wrap. */
		ck_assert_uint_eq(t, 1000 + (uint64_t)i);
		ck_assert_double_eq(acq, 75.0 * i);
		ck_assert_double_eq(com, 41.0 * i);
		ck_assert_double_eq(abo, 9.0 * i);
		ck_assert_double_eq(cyc, 750.0 * i);
		ck_assert_double_eq(wai, 0.25 * i);
		i++;
	}
	ck_assert_int_eq(r, 0);
	ck_assert_int_eq(i, 3);

	if (getuid() == 0) {
		ck_assert_int_ge(call(client, "GetHistory", &error, &empty, "u", (uint32_t)PID_B), 0);
		ck_assert_int_ge(sd_bus_message_enter_container(empty, 'a', "(tddddd)"), 0);
		ck_assert_int_eq(sd_bus_message_read(empty, "(tddddd)", &t, &acq, &com, &abo, &cyc, &wai), 0);
	}
	assert_call_error(ELIDED_ERROR_NO_SUCH_PROCESS, NULL, "GetHistory", "u", (uint32_t)1);
}
END_TEST

START_TEST(test_get_learned)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *other = NULL;
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;
	const char *verdict;
	uint32_t index;
	int64_t since;

	/* Of A's two locks, cache_lock (entry 3) runs under a learned "never". */
	ck_assert_int_ge(call(client, "GetLearned", &error, &reply, "u", (uint32_t)PID_A), 0);
	ck_assert_int_gt(sd_bus_message_enter_container(reply, 'a', "(usx)"), 0);
	ck_assert_int_gt(sd_bus_message_read(reply, "(usx)", &index, &verdict, &since), 0);
	ck_assert_uint_eq(index, 3);
	ck_assert_str_eq(verdict, "never");
	ck_assert_int_eq(since, LEARNED_SINCE);
	ck_assert_int_eq(sd_bus_message_read(reply, "(usx)", &index, &verdict, &since), 0);

	if (getuid() == 0) {
		/* B has none. */
		ck_assert_int_ge(call(client, "GetLearned", &error, &other, "u", (uint32_t)PID_B), 0);
		ck_assert_int_ge(sd_bus_message_enter_container(other, 'a', "(usx)"), 0);
		ck_assert_int_eq(sd_bus_message_read(other, "(usx)", &index, &verdict, &since), 0);
	} else {
		assert_call_error(SD_BUS_ERROR_ACCESS_DENIED, "Permission denied: process 4343 belongs to another user",
				  "GetLearned", "u", (uint32_t)PID_B);
	}
	assert_call_error(ELIDED_ERROR_NO_SUCH_PROCESS, NULL, "GetLearned", "u", (uint32_t)1);
}
END_TEST

START_TEST(test_list_learned)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *empty = NULL;
	struct learned_row rows[8];
	const struct learned_row *mine = NULL, *theirs = NULL;
	int n;

	n = list_learned(client, &reply, rows, 8);
	ck_assert_int_ge(n, 0);
	/* The store's order: uid, program, lock. */
	for (int i = 0; i < n; i++) {
		if (rows[i].uid == getuid() && !strcmp(rows[i].lock, "data:memcached+0x10"))
			mine = &rows[i];
		if (rows[i].uid == getuid() + 1)
			theirs = &rows[i];
	}
	ck_assert_ptr_nonnull(mine);
	ck_assert_str_eq(mine->program, LEARNED_MEMCACHED);
	ck_assert_str_eq(mine->verdict, "never");
	ck_assert_uint_eq(mine->runs, 3);
	ck_assert_uint_eq(mine->acquired, 5000);
	ck_assert_uint_eq(mine->attempts, 1000);
	ck_assert_uint_eq(mine->commits, 5);
	ck_assert_uint_eq(mine->aborts, 995);
	ck_assert_int_eq(mine->first_learned, LEARNED_NOW);
	ck_assert_int_eq(mine->last_updated, LEARNED_NOW);
	ck_assert_str_eq(rows[1].lock, "data:memcached+0x10");
	ck_assert_str_eq(rows[0].verdict, "elides");
	ck_assert_uint_eq(rows[0].aborts, 10);
	ck_assert_int_eq(rows[0].last_updated, LEARNED_NOW + 5);

	if (getuid() != 0) {
		/* Not root: only our own uid's entries. */
		ck_assert_int_eq(n, 3);
		ck_assert_ptr_null(theirs);
	} else {
		ck_assert_int_eq(n, 4);
		ck_assert_ptr_nonnull(theirs);
		/* Bytes from a path are made valid UTF-8, not a failed reply. */
		ck_assert_str_eq(theirs->lock, "data:odd?+0x10");
	}

	/* Learning off: nothing, and no error. */
	server_pause();
	learned_store_free(d.learned);
	d.learned = NULL;
	server_start();
	ck_assert_int_eq(list_learned(client, &empty, rows, 8), 0);
}
END_TEST

START_TEST(test_forget_learned)
{
	if (getuid() == 0) {
		/* Root forgets a program for every uid. */
		ck_assert_int_eq(forget_learned(client, "/usr/bin/memcached"), 3);
		ck_assert_uint_eq(calls.forget_uid, LEARNED_ANY_UID);
		ck_assert_int_eq(forget_learned(client, "/usr/bin/memcached"), 0);
		server_pause();
		ck_assert_uint_eq(learned_store_count(d.learned), 1);
		ck_assert_ptr_nonnull(learned_store_find(d.learned, getuid(), "path:/usr/bin/other:ino=1:mtime=2",
							 "data:other+0x20"));
		server_start();
	} else {
		/* Anyone else forgets only their own: uid + 1's entry stays. */
		ck_assert_int_eq(forget_learned(client, ""), 3);
		ck_assert_uint_eq(calls.forget_uid, getuid());
		server_pause();
		ck_assert_uint_eq(learned_store_count(d.learned), 1);
		ck_assert_uint_eq(learned_store_uid_count(d.learned, getuid() + 1), 1);
		server_start();
	}
	ck_assert_int_eq(forget_learned(client, ""), getuid() == 0 ? 1 : 0);

	/* Learning off: 0, not an error. */
	server_pause();
	learned_store_free(d.learned);
	d.learned = NULL;
	server_start();
	ck_assert_int_eq(forget_learned(client, ""), 0);
	ck_assert_int_eq(forget_learned(client, "/usr/bin/memcached"), 0);
}
END_TEST

START_TEST(test_overrides)
{
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *list = NULL, *locks = NULL;
	struct proc_row prow[4];
	struct lock_row lrow[4];
	int n;

	assert_call_ok("SetProcessMode", "us", (uint32_t)PID_A, "off");
	ck_assert_int_eq(calls.set, 1);
	ck_assert_uint_eq(calls.caller, getuid()); /* the bus daemon's word, for the event */
	ck_assert_str_eq(calls.lock, "");
	ck_assert_int_eq(calls.mode, POLICY_MODE_OFF);
	n = list_processes(client, &list, prow, 4);
	ck_assert_int_ge(n, 1);
	ck_assert_str_eq(find_row(prow, n, PID_A)->mode, "off");

	assert_call_ok("SetLockMode", "uss", (uint32_t)PID_A, "stats_lock", "on");
	ck_assert_int_eq(calls.set, 2);
	ck_assert_str_eq(calls.lock, "stats_lock");
	ck_assert_int_eq(calls.mode, POLICY_MODE_ON);
	get_locks(PID_A, &locks, lrow, 4);
	ck_assert_str_eq(lrow[0].override, "on");

	assert_call_ok("ResetLock", "us", (uint32_t)PID_A, "stats_lock");
	ck_assert_int_eq(calls.reset, 1);
	ck_assert_int_eq(locks_a[0].override, POLICY_MODE_UNSET);
	calls.caller = (uid_t)12345;
	assert_call_ok("ResetProcess", "u", (uint32_t)PID_A);
	ck_assert_int_eq(calls.reset, 2);
	ck_assert_uint_eq(calls.caller, getuid());
	ck_assert_str_eq(calls.lock, "");
	ck_assert_int_eq(proc_a.override, POLICY_MODE_UNSET);
	ck_assert_int_eq(locks_a[1].override, POLICY_MODE_UNSET);

	/* Bad mode: refused before anything is looked up or called. */
	assert_call_error(SD_BUS_ERROR_INVALID_ARGS, "Invalid mode 'bogus': expected adaptive, on, off or watch",
			  "SetProcessMode", "us", (uint32_t)PID_A, "bogus");
	assert_call_error(SD_BUS_ERROR_INVALID_ARGS, "Invalid mode '': expected adaptive, on, off or watch",
			  "SetLockMode", "uss", (uint32_t)PID_A, "stats_lock", "");
	ck_assert_int_eq(calls.set, 2);

	assert_call_error(ELIDED_ERROR_NO_SUCH_PROCESS, "No libelide process with PID 999999", "SetProcessMode",
			  "us", (uint32_t)999999, "on");
	assert_call_error(ELIDED_ERROR_NO_SUCH_PROCESS, NULL, "ResetProcess", "u", (uint32_t)999999);
	assert_call_error(ELIDED_ERROR_NO_SUCH_LOCK, "pid 4242 has no lock named 'nope'", "SetLockMode", "uss",
			  (uint32_t)PID_A, "nope", "on");
	assert_call_error(ELIDED_ERROR_NO_SUCH_LOCK, "pid 4242 has no lock named 'nope'", "ResetLock", "us",
			  (uint32_t)PID_A, "nope");
	assert_call_error(SD_BUS_ERROR_ACCESS_DENIED, NULL, "SetLockMode", "uss", (uint32_t)PID_A, "eperm", "on");
	assert_call_error(ELIDED_ERROR_FAILED, "cannot write control block: disk on fire", "ResetLock", "us",
			  (uint32_t)PID_A, "eio");

	if (getuid() != 0)
		assert_call_error(SD_BUS_ERROR_ACCESS_DENIED, "Permission denied: process 4343 belongs to another user",
				  "SetProcessMode", "us", (uint32_t)PID_B, "on");
}
END_TEST

/* Every call about a process looks at its owner afresh, before deciding. */
START_TEST(test_fresh_owner)
{
	int before = calls.check_owner;

	assert_call_ok("GetLocks", "u", (uint32_t)PID_A);
	assert_call_ok("GetHistory", "u", (uint32_t)PID_A);
	assert_call_ok("SetProcessMode", "us", (uint32_t)PID_A, "on");
	assert_call_ok("ResetProcess", "u", (uint32_t)PID_A);
	ck_assert_int_eq(calls.check_owner, before + 4);

	/* Exited since the last interval. */
	calls.owner_pid = PID_A;
	calls.owner_gone = true;
	assert_call_error(ELIDED_ERROR_NO_SUCH_PROCESS, "Process 4242 has exited", "GetLocks", "u", (uint32_t)PID_A);
	assert_call_error(ELIDED_ERROR_NO_SUCH_PROCESS, "Process 4242 has exited", "SetProcessMode", "us",
			  (uint32_t)PID_A, "off");

	/* The cache says ours; a setuid exec made it someone else's. */
	calls.owner_gone = false;
	calls.owner_uid = getuid() + 7;
	if (getuid() != 0) {
		assert_call_error(SD_BUS_ERROR_ACCESS_DENIED, "Permission denied: process 4242 belongs to another user",
				  "SetProcessMode", "us", (uint32_t)PID_A, "off");
		assert_call_error(SD_BUS_ERROR_ACCESS_DENIED, NULL, "GetLocks", "u", (uint32_t)PID_A);
	} else {
		assert_call_ok("GetLocks", "u", (uint32_t)PID_A);
	}
	server_pause();
	ck_assert_uint_eq(proc_a.uid, getuid() + 7);
	ck_assert_int_eq(proc_a.override, POLICY_MODE_UNSET);
}
END_TEST

/* Replies to asynchronous calls, counted by outcome. */
struct tally {
	int ok, limits, other;
};

static int on_tally(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	struct tally *t = userdata;
	const sd_bus_error *e = sd_bus_message_get_error(m);

	(void)ret_error;
	if (!e)
		t->ok++;
	else if (sd_bus_error_has_name(e, SD_BUS_ERROR_LIMITS_EXCEEDED))
		t->limits++;
	else
		t->other++;
	return 0;
}

/* A connection whose calls the bus daemon routed: it handles one
 * connection's messages in order, so a reply of its own comes after. */
static void routed(sd_bus *bus)
{
	ck_assert_int_ge(sd_bus_flush(bus), 0);
	ck_assert_int_ge(sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
					    "GetId", NULL, NULL, NULL),
			 0);
}

/*
 * Two connections of one uid: one pipelines as many calls as the uid may
 * have waiting (the bus daemon's own max_replies_per_connection, 128 by
 * default, lets no more through), then the other makes one call.  Its
 * call is not refused: it takes the place of the backlog's newest.
 */
START_TEST(test_connections_in_turn)
{
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *a = NULL, *b = NULL;
	struct tally ta = { 0 }, tb = { 0 };
	const int n = (int)ELIDED_MAX_CALLS_PER_UID;
	uint64_t deadline = now_ns() / 1000 + 10 * 1000000u;

	ck_assert_int_eq(sd_bus_open_system(&a), 0);
	ck_assert_int_eq(sd_bus_open_system(&b), 0);
	/* Both uids known first: calls waiting for it have a limit of their own. */
	ck_assert_int_ge(call(a, "GetStatus", NULL, NULL, NULL), 0);
	ck_assert_int_ge(call(b, "GetStatus", NULL, NULL, NULL), 0);
	server_pause();
	for (int i = 0; i < n; i++)
		ck_assert_int_ge(sd_bus_call_method_async(a, NULL, ELIDED_BUS_NAME, ELIDED_BUS_PATH,
							  ELIDED_BUS_INTERFACE, "GetStatus", on_tally, &ta, NULL),
				 0);
	routed(a);
	ck_assert_int_ge(sd_bus_call_method_async(b, NULL, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
						  "GetStatus", on_tally, &tb, NULL),
			 0);
	routed(b);
	/* Here, the server's loop as elided's main loop runs it: what the bus
	 * has is read (and queued) before any call runs, and the calls held
	 * back while replies wait for the socket are let go again there. */
	while ((ta.ok + ta.limits + ta.other < n || tb.ok + tb.limits + tb.other < 1) && now_ns() / 1000 < deadline) {
		struct timespec nap = { 0, 1000000 };

		elided_bus_drain(&d);
		while (sd_event_run(d.event, 0) > 0)
			;
		while (sd_bus_process(a, NULL) > 0)
			;
		while (sd_bus_process(b, NULL) > 0)
			;
		nanosleep(&nap, NULL);
	}
	ck_assert_msg(tb.ok == 1, "the second connection's call: %d ok, %d refused, %d other", tb.ok, tb.limits,
		      tb.other);
	/* The backlog: its newest call gave way to the other connection's. */
	ck_assert_int_eq(ta.other, 0);
	ck_assert_int_eq(ta.limits, 1);
	ck_assert_int_eq(ta.ok, n - 1);
}
END_TEST

START_TEST(test_reload)
{
	char *s = NULL;
	_cleanup_bus_error_ sd_bus_error error = SD_BUS_ERROR_NULL;

	if (getuid() != 0) {
		assert_call_error(SD_BUS_ERROR_ACCESS_DENIED, NULL, "Reload", NULL);
		ck_assert_int_eq(calls.reload, 0);
		return;
	}
	assert_call_ok("Reload", NULL);
	ck_assert_int_eq(calls.reload, 1);
	ck_assert_int_ge(sd_bus_get_property_string(client, ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
						    "LastReload", &error, &s), 0);
	ck_assert_str_eq(s, "ok at reload 1");
	free(s);

	calls.reload_fails = true;
	assert_call_error(ELIDED_ERROR_RELOAD_FAILED, "/etc/elide.conf:3: unknown setting 'bogus'", "Reload", NULL);
	ck_assert_int_eq(calls.reload, 2);
}
END_TEST

struct seen_signals {
	int added_a, removed_a, added_b, removed_b, other;
	int decision_a, decision_b;
};

static int record_signal(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	struct seen_signals *seen = userdata;
	uint32_t pid = 0;
	bool added = sd_bus_message_is_signal(m, ELIDED_BUS_INTERFACE, "ProcessAdded");

	if (sd_bus_message_is_signal(m, ELIDED_BUS_INTERFACE, "Decision")) {
		if (sd_bus_message_read(m, "u", &pid) <= 0)
			seen->other++;
		else if (pid == PID_A)
			seen->decision_a++;
		else if (pid == PID_B)
			seen->decision_b++;
		else
			seen->other++;
		return 0;
	}
	if (!added && !sd_bus_message_is_signal(m, ELIDED_BUS_INTERFACE, "ProcessRemoved"))
		return 0;
	if (sd_bus_message_read(m, "u", &pid) <= 0)
		seen->other++;
	else if (pid == PID_A)
		++*(added ? &seen->added_a : &seen->removed_a);
	else if (pid == PID_B)
		++*(added ? &seen->added_b : &seen->removed_b);
	else
		seen->other++;
	return 0;
}

/* Process bus until *done is reached or ms pass; false on timeout. */
static bool pump(sd_bus *bus, const int *counter, int want, int ms)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		int r = sd_bus_process(bus, NULL);

		if (r < 0)
			return false;
		if (counter && *counter >= want)
			return true;
		if (r > 0)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >= ms)
			return !counter;
		if (sd_bus_wait(bus, 50 * 1000) < 0)
			return false;
	}
}

/* Emitted from the test's thread: the server's bus belongs to its thread, so it is stopped meanwhile. */
static void emit_both(void)
{
	server_pause();
	elided_bus_emit_process_added(&d, &proc_b);
	elided_bus_emit_process_removed(&d, &proc_a);
	ck_assert_int_ge(sd_bus_flush(d.bus), 0);
	server_start();
}

START_TEST(test_signals)
{
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *other = NULL;
	struct elided none = {};
	struct seen_signals seen = {}, seen_other = {};
	int sum;

	ck_assert_int_eq(sd_bus_open_system(&other), 0);
	ck_assert_int_ge(sd_bus_match_signal(client, NULL, NULL, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, NULL,
					     record_signal, &seen), 0);
	ck_assert_int_ge(sd_bus_match_signal(other, NULL, NULL, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, NULL,
					     record_signal, &seen_other), 0);

	/* Not subscribed: nothing, matches or not (signals are never broadcast). */
	assert_call_error(ELIDED_ERROR_NOT_SUBSCRIBED, "Not subscribed", "Unsubscribe", NULL);
	emit_both();
	pump(client, NULL, 0, 300);
	ck_assert_int_eq(seen.added_b + seen.removed_a + seen.other, 0);

	assert_call_ok("Subscribe", NULL);
	assert_call_ok("Subscribe", NULL); /* twice is once */
	ck_assert_uint_eq(d.nsubscribers, 1);
	emit_both();
	/* Root (or the owner of both, when not root: B is uid + 1's, so only A's removal). */
	if (getuid() == 0) {
		ck_assert_msg(pump(client, &seen.removed_a, 1, 5000), "signals not received");
		ck_assert_int_eq(seen.added_b, 1);
	} else {
		ck_assert_msg(pump(client, &seen.removed_a, 1, 5000), "ProcessRemoved not received");
		pump(client, NULL, 0, 200);
		ck_assert_int_eq(seen.added_b, 0);
	}
	ck_assert_int_eq(seen.removed_a, 1);
	ck_assert_int_eq(seen.other, 0);
	/* The connection that did not subscribe saw none of it. */
	pump(other, NULL, 0, 200);
	sum = seen_other.added_a + seen_other.removed_a + seen_other.added_b + seen_other.removed_b + seen_other.other;
	ck_assert_int_eq(sum, 0);

	/* Unsubscribed: nothing more. */
	assert_call_ok("Unsubscribe", NULL);
	ck_assert_uint_eq(d.nsubscribers, 0);
	emit_both();
	pump(client, NULL, 0, 300);
	ck_assert_int_eq(seen.removed_a, 1);

	/* A subscriber that leaves the bus is forgotten. */
	ck_assert_int_ge(call(other, "Subscribe", NULL, NULL, NULL), 0);
	ck_assert_uint_eq(d.nsubscribers, 1);
	other = sd_bus_flush_close_unref(other);
	for (int i = 0; i < 100 && d.nsubscribers; i++)
		usleep(20 * 1000);
	ck_assert_uint_eq(d.nsubscribers, 0);

	/* No bus: a no-op. */
	elided_bus_emit_process_added(&none, &proc_a);
	elided_bus_emit_process_removed(&none, &proc_a);
}
END_TEST

struct decision {
	int n;
	uint32_t pid, caller_uid;
	char exe[64], event[32], lock[64], mode[16], source[16], reason[128], message_id[40];
	int reloaded;
	int ok;
	char result[128];
};

static int record_decision(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	struct decision *dec = userdata;
	const char *exe, *event, *lock, *mode, *source, *reason, *message_id, *result;
	int ok;

	if (sd_bus_message_is_signal(m, ELIDED_BUS_INTERFACE, "Reloaded")) {
		ck_assert_int_gt(sd_bus_message_read(m, "bs", &ok, &result), 0);
		dec->ok = ok;
		snprintf(dec->result, sizeof(dec->result), "%s", result);
		dec->reloaded++;
		return 0;
	}
	if (!sd_bus_message_is_signal(m, ELIDED_BUS_INTERFACE, "Decision"))
		return 0;
	ck_assert_int_gt(sd_bus_message_read(m, "usssssssu", &dec->pid, &exe, &event, &lock, &mode, &source, &reason,
					     &message_id, &dec->caller_uid), 0);
	snprintf(dec->exe, sizeof(dec->exe), "%s", exe);
	snprintf(dec->event, sizeof(dec->event), "%s", event);
	snprintf(dec->lock, sizeof(dec->lock), "%s", lock);
	snprintf(dec->mode, sizeof(dec->mode), "%s", mode);
	snprintf(dec->source, sizeof(dec->source), "%s", source);
	snprintf(dec->reason, sizeof(dec->reason), "%s", reason);
	snprintf(dec->message_id, sizeof(dec->message_id), "%s", message_id);
	dec->n++;
	return 0;
}

/* Decision and Reloaded carry the event whole, to subscribers only. */
START_TEST(test_decision_signals)
{
	struct decision dec = {};
	struct elided_event ev = {
		.kind = ELIDED_EVENT_OVERRIDE,
		.priority = LOG_INFO,
		.pid = PID_A,
		.uid = proc_a.uid,
		.exe = "/usr/bin/with\nnewline\xff",
		.lock = "stats_lock",
		.mode = "off",
		.source = "override",
		.reason = "set at runtime",
		.caller_uid = 1234,
		.old_uid = ELIDED_NO_UID,
	};
	struct elided_event reload = {
		.kind = ELIDED_EVENT_RELOAD,
		.priority = LOG_ERR,
		.source = "reload",
		.reason = "/etc/elide.conf:3: unknown setting 'bogus'",
		.caller_uid = ELIDED_NO_UID,
		.old_uid = ELIDED_NO_UID,
	};

	ck_assert_int_ge(sd_bus_match_signal(client, NULL, NULL, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, NULL,
					     record_decision, &dec), 0);
	server_pause();
	elided_bus_emit_event(&d, &ev); /* not subscribed: nothing */
	ck_assert_int_ge(sd_bus_flush(d.bus), 0);
	server_start();
	pump(client, NULL, 0, 300);
	ck_assert_int_eq(dec.n, 0);

	assert_call_ok("Subscribe", NULL);
	server_pause();
	elided_bus_emit_event(&d, &ev);
	elided_bus_emit_event(&d, &reload);
	ck_assert_int_ge(sd_bus_flush(d.bus), 0);
	server_start();
	ck_assert_msg(pump(client, &dec.reloaded, 1, 5000), "Reloaded not received");
	ck_assert_int_eq(dec.n, 1);
	ck_assert_uint_eq(dec.pid, PID_A);
	ck_assert_str_eq(dec.event, "override");
	ck_assert_str_eq(dec.lock, "stats_lock");
	ck_assert_str_eq(dec.mode, "off");
	ck_assert_str_eq(dec.source, "override");
	ck_assert_str_eq(dec.reason, "set at runtime");
	ck_assert_str_eq(dec.message_id, elided_event_message_id(ELIDED_EVENT_OVERRIDE));
	ck_assert_uint_eq(dec.caller_uid, 1234);
	/* Not valid UTF-8: the bus would refuse the message; it is made valid. */
	ck_assert_ptr_nonnull(strstr(dec.exe, "/usr/bin/with"));
	ck_assert_int_eq(dec.ok, 0);
	ck_assert_str_eq(dec.result, "/etc/elide.conf:3: unknown setting 'bogus'");
	assert_call_ok("Unsubscribe", NULL);
}
END_TEST

static const char *field(const struct iovec *iov, size_t n, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < n; i++)
		if (iov[i].iov_len > len && !memcmp(iov[i].iov_base, name, len) &&
		    ((const char *)iov[i].iov_base)[len] == '=') {
			static char value[256];

			snprintf(value, sizeof(value), "%.*s", (int)(iov[i].iov_len - len - 1),
				 (const char *)iov[i].iov_base + len + 1);
			return value;
		}
	return NULL;
}

/* The journal entry: MESSAGE_ID per kind, ELIDE_* fields, no control
 * characters from hostile names, no field cut in half. */
/* Lines written to `fd` so far (read without blocking). */
static unsigned count_lines(int fd)
{
	char buf[4096];
	unsigned n = 0;
	ssize_t r;

	while ((r = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < r; i++)
			n += buf[i] == '\n';
	return n;
}

/* An event about a user's process spends that user's log budget (the
 * owner-change one the unprivileged side's); root's and a reload's do not. */
START_TEST(test_event_ratelimit)
{
	static struct elided limited;
	struct elided_event ev = {
		.kind = ELIDED_EVENT_LOCK_OFF, .priority = LOG_INFO, .pid = 4242, .uid = 1000,
		.exe = "/usr/bin/x", .caller_uid = ELIDED_NO_UID, .old_uid = ELIDED_NO_UID,
	};
	int fds[2];

	ck_assert_int_eq(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
	log_set_fd(fds[1]);
	log_set_max_priority(LOG_INFO);
	log_ratelimit_init(&limited.ratelimit, 60ull * 1000000000u, 3);
	elided_events_init(false);

	for (int i = 0; i < 10; i++)
		elided_event(&limited, &ev, "lock %d of uid 1000 off", i);
	ck_assert_uint_eq(count_lines(fds[0]), 3);

	ev.uid = 0;
	for (int i = 0; i < 10; i++)
		elided_event(&limited, &ev, "lock %d of root off", i);
	ck_assert_uint_eq(count_lines(fds[0]), 10);

	/* root -> uid 1001 -> root...: charged to the user either way. */
	ev.kind = ELIDED_EVENT_OWNER_CHANGED;
	ev.uid = 0;
	ev.old_uid = 1001;
	for (int i = 0; i < 5; i++)
		elided_event(&limited, &ev, "owner change %d", i);
	ev.uid = 1001;
	ev.old_uid = 0;
	for (int i = 0; i < 5; i++)
		elided_event(&limited, &ev, "owner change back %d", i);
	ck_assert_uint_eq(count_lines(fds[0]), 3);

	ev = (struct elided_event){ .kind = ELIDED_EVENT_RELOAD, .priority = LOG_INFO,
				    .caller_uid = ELIDED_NO_UID, .old_uid = ELIDED_NO_UID };
	for (int i = 0; i < 10; i++)
		elided_event(&limited, &ev, "reload %d", i);
	ck_assert_uint_eq(count_lines(fds[0]), 10);

	log_set_fd(STDERR_FILENO);
	close(fds[0]);
	close(fds[1]);
}
END_TEST

START_TEST(test_event_fields)
{
	struct iovec iov[ELIDED_EVENT_FIELDS];
	char buf[2048], small[80];
	struct elided_event ev = {
		.kind = ELIDED_EVENT_OVERRIDE,
		.priority = LOG_INFO,
		.pid = 4242,
		.uid = 1000,
		.exe = "/tmp/evil\nMESSAGE_ID=forged",
		.lock = "stats_lock",
		.mode = "off",
		.source = "override",
		.reason = "set at runtime",
		.caller_uid = 1000,
		.old_uid = ELIDED_NO_UID,
	};
	size_t n = elided_event_fields(&ev, "pid 4242: lock stats_lock set to off", iov, buf, sizeof(buf));
	const char *ids[ELIDED_EVENT_KIND_MAX];

	ck_assert_str_eq(field(iov, n, "MESSAGE"), "pid 4242: lock stats_lock set to off");
	ck_assert_str_eq(field(iov, n, "MESSAGE_ID"), elided_event_message_id(ELIDED_EVENT_OVERRIDE));
	ck_assert_str_eq(field(iov, n, "PRIORITY"), "6");
	ck_assert_str_eq(field(iov, n, "ELIDE_EVENT"), "override");
	ck_assert_str_eq(field(iov, n, "ELIDE_PID"), "4242");
	ck_assert_str_eq(field(iov, n, "OBJECT_PID"), "4242");
	ck_assert_str_eq(field(iov, n, "ELIDE_UID"), "1000");
	ck_assert_str_eq(field(iov, n, "ELIDE_EXE"), "/tmp/evil?MESSAGE_ID=forged");
	ck_assert_str_eq(field(iov, n, "ELIDE_LOCK"), "stats_lock");
	ck_assert_str_eq(field(iov, n, "ELIDE_MODE"), "off");
	ck_assert_str_eq(field(iov, n, "ELIDE_SOURCE"), "override");
	ck_assert_str_eq(field(iov, n, "ELIDE_CALLER_UID"), "1000");
	ck_assert_ptr_null(field(iov, n, "ELIDE_OLD_UID"));
	for (size_t i = 0; i < n; i++)
		ck_assert_ptr_null(memchr(iov[i].iov_base, '\n', iov[i].iov_len));

	/* Every kind has its own 128-bit id, and a name. */
	for (int k = 0; k < ELIDED_EVENT_KIND_MAX; k++) {
		ids[k] = elided_event_message_id((enum elided_event_kind)k);
		ck_assert_uint_eq(strlen(ids[k]), 32);
		ck_assert_uint_eq(strspn(ids[k], "0123456789abcdef"), 32);
		ck_assert_str_ne(elided_event_name((enum elided_event_kind)k), "unknown");
		for (int j = 0; j < k; j++)
			ck_assert_str_ne(ids[j], ids[k]);
	}

	/* A reload: no process fields. */
	ev = (struct elided_event){ .kind = ELIDED_EVENT_RELOAD, .priority = LOG_ERR, .reason = "x:1: bad",
				    .caller_uid = ELIDED_NO_UID, .old_uid = ELIDED_NO_UID };
	n = elided_event_fields(&ev, "reload refused", iov, buf, sizeof(buf));
	ck_assert_ptr_null(field(iov, n, "ELIDE_PID"));
	ck_assert_ptr_null(field(iov, n, "OBJECT_PID"));
	ck_assert_ptr_null(field(iov, n, "ELIDE_CALLER_UID"));
	ck_assert_str_eq(field(iov, n, "ELIDE_REASON"), "x:1: bad");

	/* Too small a buffer: whole fields or none. */
	n = elided_event_fields(&ev, "reload refused", iov, small, sizeof(small));
	ck_assert_uint_ge(n, 2);
	ck_assert_str_eq(field(iov, n, "MESSAGE"), "reload refused");
	for (size_t i = 0; i < n; i++)
		ck_assert_ptr_nonnull(memchr(iov[i].iov_base, '=', iov[i].iov_len));
}
END_TEST

/* Run argv with stdout to a pipe; collect up to size - 1 bytes; bounded wait.  Returns the exit status. */
static int run_capture(const char *const argv[], char *out, size_t size)
{
	struct timespec start, now;
	size_t len = 0;
	int fds[2], status = -1;
	pid_t pid;

	ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };
		ssize_t n;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= 10) {
			kill(pid, SIGKILL);
			break;
		}
		if (poll(&p, 1, 200) <= 0)
			continue;
		n = read(fds[0], out + len, size - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len >= size - 1)
			break;
	}
	out[len] = '\0';
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];

	while (path && *path) {
		size_t n = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog);
		if (access(buf, X_OK) == 0)
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

START_TEST(test_busctl_introspect)
{
	char addr_arg[600], out[65536];
	const char *const argv[] = { "busctl", addr_arg, "--no-pager", "introspect", ELIDED_BUS_NAME, ELIDED_BUS_PATH, NULL };

	if (!in_path("busctl")) {
		fprintf(stderr, "test-dbus: busctl not installed, introspection not checked\n");
		return;
	}
	snprintf(addr_arg, sizeof(addr_arg), "--address=%s", bus_address);
	ck_assert_int_eq(run_capture(argv, out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, ELIDED_BUS_INTERFACE));
	ck_assert_ptr_nonnull(strstr(out, ".ListProcesses"));
	ck_assert_ptr_nonnull(strstr(out, "a(uusssssddddtud)"));
	ck_assert_ptr_nonnull(strstr(out, "a(ussssttttta{st}tdddsss)"));
	ck_assert_ptr_nonnull(strstr(out, ".ProcessAdded"));
	ck_assert_ptr_nonnull(strstr(out, ".Subscribe"));
	ck_assert_ptr_nonnull(strstr(out, ".Unsubscribe"));
	ck_assert_ptr_nonnull(strstr(out, ".GetLearned"));
	ck_assert_ptr_nonnull(strstr(out, "a(usssuttttxx)"));
	ck_assert_ptr_nonnull(strstr(out, ".ForgetLearned"));
	ck_assert_ptr_nonnull(strstr(out, ".NProcesses"));
	ck_assert_ptr_nonnull(strstr(out, "org.freedesktop.DBus.Properties"));
}
END_TEST

/* In a child without Check: 0 when the call fails with `name` (and `text` unless NULL). */
static int child_expect_error(sd_bus *bus, const char *name, const char *text, const char *method,
			      const char *types, uint32_t pid, const char *arg)
{
	_cleanup_bus_error_ sd_bus_error e = SD_BUS_ERROR_NULL;
	int r;

	r = types ? call(bus, method, &e, NULL, types, pid, arg) : call(bus, method, &e, NULL, NULL);
	if (r >= 0 || !sd_bus_error_has_name(&e, name) || (text && strcmp(e.message, text))) {
		fprintf(stderr, "test-dbus: unprivileged %s(%" PRIu32 "): %d %s (%s), expected %s\n", method, pid, r,
			e.name ?: "-", e.message ?: "-", name);
		return -1;
	}
	return 0;
}

/*
 * Signals an unprivileged subscriber gets: about its own process only.  The
 * hook sends Added and Removed of A (another user's), Added of B, then B
 * changes owner to root: Removed of B.  One sender's messages arrive in
 * order, so anything about A would have come before B's removal.
 */
static int child_signals(sd_bus *bus)
{
	_cleanup_bus_error_ sd_bus_error e = SD_BUS_ERROR_NULL;
	struct seen_signals seen = {};

	if (sd_bus_match_signal(bus, NULL, NULL, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, NULL, record_signal, &seen) < 0)
		return 30;
	if (call(bus, "Subscribe", &e, NULL, NULL) < 0)
		return 31;
	if (call(bus, "ResetLock", &e, NULL, "us", (uint32_t)PID_B, "emit-signals") < 0)
		return 32;
	if (!pump(bus, &seen.removed_b, 1, 5000))
		return 33;
	if (seen.added_a || seen.removed_a || seen.decision_a || seen.other) {
		fprintf(stderr, "test-dbus: unprivileged subscriber saw another user's process: %d %d %d %d\n",
			seen.added_a, seen.removed_a, seen.decision_a, seen.other);
		return 34;
	}
	if (seen.decision_b != 1)
		return 36;
	if (seen.added_b != 1 || seen.removed_b != 1)
		return 35;
	return 0;
}

/* What an unprivileged caller (uid + 1, the owner of B) may do; the exit status names the failed check. */
static int unprivileged_child(uid_t uid)
{
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_bus_error_ sd_bus_error e = SD_BUS_ERROR_NULL;
	struct proc_row rows[4];
	int n;

	if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
		return 10;
	if (sd_bus_open_system(&bus) < 0)
		return 11;

	/* Only its own process, B. */
	n = list_processes(bus, &reply, rows, 4);
	if (n != 1 || rows[0].pid != PID_B) {
		fprintf(stderr, "test-dbus: unprivileged ListProcesses: %d rows\n", n);
		return 12;
	}
	{
		const char *comms[4];
		uint32_t pids[4];

		n = list_no_segment(bus, pids, comms, 4);
		if (n != 1 || pids[0] != 5353) {
			fprintf(stderr, "test-dbus: unprivileged ListProcessesWithoutSegment: %d rows\n", n);
			return 20;
		}
	}
	if (child_expect_error(bus, SD_BUS_ERROR_ACCESS_DENIED,
			       "Permission denied: process 4242 belongs to another user", "GetLocks", "u", PID_A, NULL))
		return 13;
	if (child_expect_error(bus, SD_BUS_ERROR_ACCESS_DENIED, NULL, "GetHistory", "u", PID_A, NULL))
		return 14;
	if (call(bus, "GetLocks", &e, NULL, "u", (uint32_t)PID_B) < 0)
		return 15;
	if (child_expect_error(bus, SD_BUS_ERROR_ACCESS_DENIED,
			       "Permission denied: process 4242 belongs to another user", "SetProcessMode", "us", PID_A,
			       "off"))
		return 16;
	if (child_expect_error(bus, SD_BUS_ERROR_ACCESS_DENIED, NULL, "ResetLock", "us", PID_A, "stats_lock"))
		return 17;
	if (call(bus, "SetProcessMode", &e, NULL, "us", (uint32_t)PID_B, "off") < 0)
		return 18;
	if (child_expect_error(bus, SD_BUS_ERROR_ACCESS_DENIED, NULL, "Reload", NULL, 0, NULL))
		return 19;
	if (child_expect_error(bus, SD_BUS_ERROR_ACCESS_DENIED,
			       "Permission denied: process 4242 belongs to another user", "GetLearned", "u", PID_A,
			       NULL))
		return 21;
	/* The store: only its own uid's entry, listed and forgotten. */
	{
		_cleanup_(sd_bus_message_unrefp) sd_bus_message *learned = NULL;
		struct learned_row lrows[8];

		n = list_learned(bus, &learned, lrows, 8);
		if (n != 1 || lrows[0].uid != uid) {
			fprintf(stderr, "test-dbus: unprivileged ListLearned: %d rows\n", n);
			return 22;
		}
	}
	if (forget_learned(bus, "") != 1)
		return 23;
	return child_signals(bus);
}

/*
 * As root: a forked child drops to uid + 1 and calls over its own
 * connection, so the daemon sees credentials the bus daemon vouches for.
 */
START_TEST(test_unprivileged_caller)
{
	struct timespec start, now;
	int status = 0;
	pid_t pid, r;

	if (getuid() != 0) {
		fprintf(stderr, "test-dbus: not root, the unprivileged child is not run\n");
		return;
	}

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char uid[16];

		/* A fresh image, not this forked copy of a threaded process: a
		 * lock another thread held at the fork (the sanitizers' allocator
		 * has no fork handlers) would hang the child's first malloc. */
		snprintf(uid, sizeof(uid), "%u", (unsigned)getuid() + 1);
		execl("/proc/self/exe", "test-dbus", "--unprivileged-child", uid, (char *)NULL);
		_exit(127);
	}

	clock_gettime(CLOCK_MONOTONIC, &start);
	while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= 20) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			ck_abort_msg("unprivileged child timed out");
		}
		usleep(20 * 1000);
	}
	ck_assert_int_eq(r, pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "unprivileged child failed check %d",
		      WIFEXITED(status) ? WEXITSTATUS(status) : -1);

	/* Only its own process changed, nothing reloaded.  (Joined first: the child's calls ran there.) */
	server_pause();
	ck_assert_int_eq(calls.set, 1);
	ck_assert_int_eq(proc_b.override, POLICY_MODE_OFF);
	ck_assert_int_eq(proc_a.override, POLICY_MODE_UNSET);
	ck_assert_int_eq(calls.reset, 1); /* the signal hook */
	ck_assert_int_eq(calls.reload, 0);
	/* It forgot its own learned entry, none of root's. */
	ck_assert_int_eq(calls.forget, 1);
	ck_assert_uint_eq(calls.forget_uid, getuid() + 1);
	ck_assert_uint_eq(learned_store_uid_count(d.learned, getuid() + 1), 0);
	ck_assert_uint_eq(learned_store_uid_count(d.learned, getuid()), 3);
}
END_TEST

/* ---- the private bus ----------------------------------------------------- */

static int write_bus_config(const char *path, const char *policy_file)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return -errno;
	fprintf(f,
		"<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN\"\n"
		" \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
		"<busconfig>\n"
		"  <listen>unix:path=%s/bus</listen>\n"
		"  <auth>EXTERNAL</auth>\n"
		"  <policy context=\"default\"><allow user=\"*\"/></policy>\n",
		bus_dir);
	if (policy_file)
		/* Like system.conf: method calls are denied unless a policy file allows them. */
		fprintf(f,
			"  <policy context=\"default\">\n"
			"    <deny own=\"*\"/>\n"
			"    <deny send_type=\"method_call\"/>\n"
			"    <allow send_type=\"signal\"/>\n"
			"    <allow send_requested_reply=\"true\" send_type=\"method_return\"/>\n"
			"    <allow send_requested_reply=\"true\" send_type=\"error\"/>\n"
			"    <allow receive_type=\"method_call\"/>\n"
			"    <allow receive_type=\"method_return\"/>\n"
			"    <allow receive_type=\"error\"/>\n"
			"    <allow receive_type=\"signal\"/>\n"
			"    <allow send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus\"/>\n"
			"    <allow send_destination=\"org.freedesktop.DBus\"\n"
			"           send_interface=\"org.freedesktop.DBus.Introspectable\"/>\n"
			"  </policy>\n"
			"  <include>%s</include>\n",
			policy_file);
	if (policy_file && getuid() != 0)
		/* Not root: the test's server stands in for root, which alone may own the name. */
		fprintf(f,
			"  <policy user=\"%u\"><allow own=\"" ELIDED_BUS_NAME "\"/></policy>\n",
			(unsigned)getuid());
	else
		fprintf(f,
			"  <policy context=\"default\">\n"
			"    <allow send_destination=\"*\" eavesdrop=\"true\"/>\n"
			"    <allow eavesdrop=\"true\"/>\n"
			"    <allow own=\"*\"/>\n"
			"  </policy>\n");
	fprintf(f, "</busconfig>\n");
	if (fclose(f) != 0)
		return -errno;
	return 0;
}

static const char *find_policy_file(void)
{
	static char path[4096];

#ifdef TOP_SRCDIR
	snprintf(path, sizeof(path), "%s/systemd/org.elide.elided1.conf", TOP_SRCDIR);
	if (access(path, R_OK) == 0)
		return path;
#endif
	snprintf(path, sizeof(path), "systemd/org.elide.elided1.conf");
	if (access(path, R_OK) == 0)
		return realpath("systemd/org.elide.elided1.conf", NULL) ?: path;
	return NULL;
}

/* Start dbus-daemon and read its address; 0, -errno, or 77 to skip. */
static int start_bus(void)
{
	char config_path[256], conf_arg[300];
	const char *policy;
	struct timespec start, now;
	size_t len = 0;
	int fds[2], r;

	if (!in_path("dbus-daemon")) {
		fprintf(stderr, "test-dbus: SKIP: dbus-daemon not installed\n");
		return 77;
	}
	if (!mkdtemp(bus_dir))
		return -errno;
	/* uid + 1 must reach the socket in the unprivileged test. */
	chmod(bus_dir, 0755);

	policy = find_policy_file();
	if (!policy)
		fprintf(stderr, "test-dbus: systemd/org.elide.elided1.conf not found, testing with an open bus\n");
	snprintf(config_path, sizeof(config_path), "%s/bus.conf", bus_dir);
	r = write_bus_config(config_path, policy);
	if (r < 0)
		return r;
	snprintf(conf_arg, sizeof(conf_arg), "--config-file=%s", config_path);

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	bus_pid = fork();
	if (bus_pid < 0)
		return -errno;
	if (bus_pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execlp("dbus-daemon", "dbus-daemon", conf_arg, "--print-address", "--nofork", "--nopidfile",
		       "--nosyslog", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);

	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!memchr(bus_address, '\n', len)) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };
		ssize_t n;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= 10 || len >= sizeof(bus_address) - 1) {
			close(fds[0]);
			return -ETIMEDOUT;
		}
		if (poll(&p, 1, 200) <= 0)
			continue;
		n = read(fds[0], bus_address + len, sizeof(bus_address) - 1 - len);
		if (n <= 0) {
			close(fds[0]);
			return -EIO;
		}
		len += (size_t)n;
	}
	close(fds[0]);
	bus_address[strcspn(bus_address, "\n")] = '\0';

	setenv("DBUS_SYSTEM_BUS_ADDRESS", bus_address, 1);
	return 0;
}

static void stop_bus(void)
{
	char path[300];

	if (bus_pid > 0) {
		kill(bus_pid, SIGTERM);
		waitpid(bus_pid, NULL, 0);
	}
	snprintf(path, sizeof(path), "%s/bus.conf", bus_dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/bus", bus_dir);
	unlink(path);
	rmdir(bus_dir);
}

static Suite *dbus_suite(void)
{
	Suite *s = suite_create("dbus");
	TCase *tc_access = tcase_create("access");
	TCase *tc = tcase_create("manager");

	tcase_add_test(tc_access, test_may_access);
	tcase_add_test(tc_access, test_event_fields);
	tcase_add_test(tc_access, test_event_ratelimit);
	suite_add_tcase(s, tc_access);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_properties);
	tcase_add_test(tc, test_get_status);
	tcase_add_test(tc, test_list_processes);
	tcase_add_test(tc, test_list_no_segment);
	tcase_add_test(tc, test_get_locks);
	tcase_add_test(tc, test_list_observed_locks);
	tcase_add_test(tc, test_get_history);
	tcase_add_test(tc, test_get_learned);
	tcase_add_test(tc, test_list_learned);
	tcase_add_test(tc, test_forget_learned);
	tcase_add_test(tc, test_lock_names);
	tcase_add_test(tc, test_overrides);
	tcase_add_test(tc, test_fresh_owner);
	tcase_add_test(tc, test_connections_in_turn);
	tcase_add_test(tc, test_reload);
	tcase_add_test(tc, test_signals);
	tcase_add_test(tc, test_decision_signals);
	tcase_add_test(tc, test_busctl_introspect);
	tcase_add_test(tc, test_unprivileged_caller);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	SRunner *sr;
	int failed, r;

	if (argc == 3 && strcmp(argv[1], "--unprivileged-child") == 0)
		return unprivileged_child((uid_t)strtoul(argv[2], NULL, 10));

	r = start_bus();
	if (r == 77)
		return 77;
	if (r < 0) {
		fprintf(stderr, "test-dbus: cannot start dbus-daemon: %s\n", strerror(-r));
		stop_bus();
		return EXIT_FAILURE;
	}

	sr = srunner_create(dbus_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	stop_bus();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
