/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Lock waits of programs that do not run libelide (elided(8), OBSERVING
 * PROGRAMS WITHOUT LIBELIDE): futexwatch.bpf.c adds up, per process and
 * futex word, the time threads sleep waiting for a pthread mutex; this file
 * loads it and reads its map on request (D-Bus ListObservedLocks).
 *
 * Nothing here parses a user's file: where a lock is is its address in a
 * mapping of /proc/PID/maps (kernel text), "MODULE+0xOFFSET"; its symbol
 * comes from the symbolizer (symbolizer.c), whose child parses the files as
 * the process's user, as for the locks of libelide's processes.  A listing
 * asks for the names it lacks; they are in the next one.  Processes that
 * run libelide report through their segments and are left out.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dbus.h"
#include "elided.h"
#include "log.h"
#include "macros.h"
#include "segment-reader.h"

#ifdef HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "futexwatch.h"
#include "futexwatch.skel.h"
#endif

struct futexwatch {
#ifdef HAVE_BPF
	struct futexwatch_bpf *skel;
#endif
	uint64_t ns_per_tick;        /* BPF start times (ns) to /proc's clock ticks */
	const char *method;          /* which programs are attached */
	sd_event_source *naming;     /* the sweep that asks for new locks' names */
};

/* New locks are named this long after they were first waited for, at
 * most: their names are known by the time somebody lists them. */
#define FUTEXWATCH_NAMING_USEC (2u * 1000000u)

#ifdef HAVE_BPF
/* Where the programs attach, cheapest first. */
enum futexwatch_attach {
	FUTEXWATCH_FENTRY,
	FUTEXWATCH_SCHED_SWITCH,
	FUTEXWATCH_SYSCALLS,
};

static const char *const futexwatch_attach_names[] = {
	[FUTEXWATCH_FENTRY] = "fentry/fexit __x64_sys_futex",
	[FUTEXWATCH_SCHED_SWITCH] = "tp_btf sched_switch",
	[FUTEXWATCH_SYSCALLS] = "tp_btf sys_enter/sys_exit",
};
#endif

const char *elided_futexwatch_state(const struct elided *d)
{
	return d->futexwatch ? d->futexwatch->method : d->futexwatch_why;
}

#ifdef HAVE_BPF
static int on_naming(sd_event_source *src, uint64_t usec, void *userdata);

static int silent_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level, (void)fmt, (void)ap;
	return 0;
}
#endif

int elided_futexwatch_start(struct elided *d)
{
#ifdef HAVE_BPF
	struct futexwatch *w;
	libbpf_print_fn_t old;
	long hz = sysconf(_SC_CLK_TCK);
	enum futexwatch_attach how, last;
	int r;

	if (d->config->observe_lock_waits == OBSERVE_LOCK_WAITS_OFF) {
		snprintf(d->futexwatch_why, sizeof(d->futexwatch_why), "off (daemon.observe_lock_waits = false)");
		return 0;
	}
	if (!d->allow_bpf) {
		snprintf(d->futexwatch_why, sizeof(d->futexwatch_why), "off (--no-bpf)");
		return 0;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ns_per_tick = hz > 0 ? 1000000000u / (uint64_t)hz : 0;
	/* libbpf's own chatter on a kernel that cannot: one line of ours
	 * instead.  Cheapest first (futexwatch.bpf.c): trampolines on the
	 * futex call, else the context switch, else (only when asked for:
	 * they slow every system call) the raw system-call tracepoints. */
	last = d->config->observe_lock_waits == OBSERVE_LOCK_WAITS_ON ? FUTEXWATCH_SYSCALLS : FUTEXWATCH_SCHED_SWITCH;
	old = libbpf_set_print(silent_print);
	for (how = 0; how <= last; how++) {
		w->skel = futexwatch_bpf__open();
		if (!w->skel) {
			r = -errno;
			break;
		}
		bpf_program__set_autoload(w->skel->progs.futexwatch_enter, how == FUTEXWATCH_FENTRY);
		bpf_program__set_autoload(w->skel->progs.futexwatch_exit, how == FUTEXWATCH_FENTRY);
		bpf_program__set_autoload(w->skel->progs.futexwatch_switch, how == FUTEXWATCH_SCHED_SWITCH);
		bpf_program__set_autoload(w->skel->progs.futexwatch_sys_enter, how == FUTEXWATCH_SYSCALLS);
		bpf_program__set_autoload(w->skel->progs.futexwatch_sys_exit, how == FUTEXWATCH_SYSCALLS);
		r = futexwatch_bpf__load(w->skel);
		if (r >= 0)
			r = futexwatch_bpf__attach(w->skel);
		if (r >= 0) {
			w->method = futexwatch_attach_names[how];
			break;
		}
		futexwatch_bpf__destroy(w->skel);
		w->skel = NULL;
	}
	libbpf_set_print(old);
	if (!w->skel) {
		const char *cheap_only = last == FUTEXWATCH_SYSCALLS ? "" : " (\"auto\": without the system-call tracepoints)";

		if (r >= 0)
			r = -EINVAL;
		snprintf(d->futexwatch_why, sizeof(d->futexwatch_why), "unavailable: %s%s", strerror(-r), cheap_only);
		log_info("lock waits of programs without libelide are not observed: the BPF program does not load%s: %s",
			 cheap_only, strerror(-r));
		free(w);
		return 0;
	}
	d->futexwatch = w;
	/* Without it, names come when the locks are listed (one listing later). */
	if (sd_event_add_time_relative(d->event, &w->naming, CLOCK_MONOTONIC, FUTEXWATCH_NAMING_USEC, 0, on_naming, d) < 0)
		w->naming = NULL;
	log_info("observing the lock waits of programs without libelide (BPF: %s)", w->method);
	return 0;
#else
	snprintf(d->futexwatch_why, sizeof(d->futexwatch_why), "unavailable: built without BPF");
	return 0;
#endif
}

void elided_futexwatch_stop(struct elided *d)
{
	if (!d->futexwatch)
		return;
	sd_event_source_disable_unref(d->futexwatch->naming);
#ifdef HAVE_BPF
	futexwatch_bpf__destroy(d->futexwatch->skel);
#endif
	free(d->futexwatch);
	d->futexwatch = NULL;
}

#ifdef HAVE_BPF
/* Fields 22 (start time, ticks) of /proc/PID/stat, and the owner and
 * name; -ESRCH when the process is gone. */
static int read_proc(pid_t pid, uint64_t *start, uid_t *uid, char *comm, size_t commlen)
{
	char path[64], buf[1024];
	const char *p;
	FILE *f;
	size_t n;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -ESRCH;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* comm may hold anything, ')' too: the fields follow the last one. */
	p = strrchr(buf, ')');
	if (!p)
		return -EBADMSG;
	{
		const char *open = strchr(buf, '(');
		size_t len = open && open < p ? (size_t)(p - open - 1) : 0;

		snprintf(comm, commlen, "%.*s", (int)(len < commlen ? len : commlen - 1), open ? open + 1 : "");
	}
	/* After ") ": field 3 (state) is the first; 22 is the 20th from there. */
	p += 2;
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p || sscanf(p, "%" SCNu64, start) != 1)
		return -EBADMSG;
	r = seg_proc_uid(NULL, pid, uid);
	return r < 0 ? r : 0;
}

/*
 * "libfoo.so.1+0x1234", from /proc/PID/maps: the module holding addr and
 * the offset from where it is loaded (its first mapping, file offset 0),
 * which for a library or a PIE executable is the address nm(1) prints.
 */
static void where_of(pid_t pid, uint64_t addr, char *buf, size_t size)
{
	char path[64], line[512], base_name[256] = "";
	uint64_t base = 0, prev_hi = 0;
	bool prev_in_module = false;
	FILE *f;

	snprintf(buf, size, "0x%" PRIx64, addr);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		uint64_t lo, hi, off;
		int name_at = 0;
		const char *name, *slash;
		size_t len;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %*s %*s %n", &lo, &hi, &off, &name_at) < 3)
			continue;
		name = name_at > 0 ? line + name_at : "";
		len = strcspn(name, "\n");
		/* Maps are sorted: a module's offset-0 mapping comes first. */
		if (off == 0 && len && name[0] == '/') {
			snprintf(base_name, sizeof(base_name), "%.*s", (int)len, name);
			base = lo;
		}
		if (addr < lo || addr >= hi) {
			prev_in_module = len ? strlen(base_name) == len && !strncmp(base_name, name, len) :
					       prev_in_module && lo == prev_hi;
			prev_hi = hi;
			continue;
		}
		if (len) {
			slash = memrchr(name, '/', len);
			const char *base_of = slash ? slash + 1 : name;
			size_t blen = len - (size_t)(base_of - name);

			if (name[0] == '/' && strlen(base_name) == len && !strncmp(base_name, name, len))
				snprintf(buf, size, "%.*s+0x%" PRIx64, (int)blen, base_of, addr - base);
			else
				snprintf(buf, size, "%.*s+0x%" PRIx64, (int)blen, base_of, addr - lo);
		} else if (prev_in_module && lo == prev_hi) {
			/* An anonymous mapping right after a module: its .bss. */
			const char *b = strrchr(base_name, '/');

			snprintf(buf, size, "%s+0x%" PRIx64, b ? b + 1 : base_name, addr - base);
		}
		break;
	}
	fclose(f);
}

static int cmp_observed(const void *a, const void *b)
{
	const struct observed_lock *x = a, *y = b;

	if (x->wait_ns != y->wait_ns)
		return x->wait_ns < y->wait_ns ? 1 : -1;
	return x->pid != y->pid ? (x->pid < y->pid ? -1 : 1) : (x->uaddr > y->uaddr) - (x->uaddr < y->uaddr);
}

/*
 * Every FUTEXWATCH_NAMING_USEC: the locks waited for whose names the
 * symbolizer was not asked for yet are, so that the next listing shows
 * them.  Only those cost a look at /proc; the rest, a map lookup.
 */
static int on_naming(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct elided *d = userdata;
	struct futexwatch *w = d->futexwatch;
	struct futexwatch_key key, next;
	size_t seen = 0;
	bool first = true, asked = false;
	int fd = bpf_map__fd(w->skel->maps.waits);

	while (seen++ < FUTEXWATCH_MAX_LOCKS && bpf_map_get_next_key(fd, first ? NULL : &key, &next) == 0) {
		struct futexwatch_value v;
		uint64_t start, ticks;
		uid_t uid;
		char comm[16], name[ELIDED_LOCK_NAME_MAX];

		first = false;
		key = next;
		ticks = w->ns_per_tick ? key.start_boottime / w->ns_per_tick : 0;
		if (bpf_map_lookup_elem(fd, &key, &v) < 0 || v.waits == 0 ||
		    elided_symbolizer_observed_known(d, (pid_t)key.tgid, ticks, key.uaddr) ||
		    elided_find_process(d, (pid_t)key.tgid))
			continue;
		if (read_proc((pid_t)key.tgid, &start, &uid, comm, sizeof(comm)) < 0 || (ticks && ticks != start))
			continue;
		(void)elided_symbolize_observed(d, (pid_t)key.tgid, uid, start, key.uaddr, name, sizeof(name));
		asked = true;
	}
	if (asked)
		elided_symbolize_observed_flush(d);
	if (sd_event_source_set_time_relative(src, FUTEXWATCH_NAMING_USEC) >= 0)
		(void)sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
	return 0;
}
#endif

int elided_observed_locks(struct elided *d, uid_t caller, struct observed_lock **ret, size_t *n)
{
	*ret = NULL;
	*n = 0;
#ifdef HAVE_BPF
	struct futexwatch *w = d->futexwatch;
	struct futexwatch_key key, next;
	struct observed_lock *out = NULL;
	struct futexwatch_key *stale = NULL;
	size_t nout = 0, cap = 0, seen = 0, nstale = 0, stale_cap = 0;
	int fd, r;
	bool first = true;

	if (!w)
		return -EOPNOTSUPP;
	fd = bpf_map__fd(w->skel->maps.waits);
	while (seen++ < FUTEXWATCH_MAX_LOCKS) {
		struct futexwatch_value v;
		struct observed_lock *o;
		uint64_t start;
		uid_t uid;
		char comm[16];

		r = bpf_map_get_next_key(fd, first ? NULL : &key, &next);
		if (r < 0)
			break;
		first = false;
		key = next;
		if (bpf_map_lookup_elem(fd, &key, &v) < 0 || v.waits == 0)
			continue;
		/* Gone, or its pid now another process's: the entry is stale,
		 * deleted after the walk (a deleted key would restart it). */
		if (read_proc((pid_t)key.tgid, &start, &uid, comm, sizeof(comm)) < 0 ||
		    (w->ns_per_tick && key.start_boottime && key.start_boottime / w->ns_per_tick != start)) {
			if (nstale == stale_cap) {
				size_t c = stale_cap ? stale_cap * 2 : 16;
				struct futexwatch_key *q = reallocarray(stale, c, sizeof(*stale));

				if (!q)
					continue; /* deleted at a later read */
				stale = q;
				stale_cap = c;
			}
			stale[nstale++] = key;
			continue;
		}
		/* libelide's own processes report through their segments. */
		if (elided_find_process(d, (pid_t)key.tgid))
			continue;
		if (!elided_bus_may_access(caller, uid))
			continue;
		if (nout == cap) {
			size_t c = cap ? cap * 2 : 32;
			struct observed_lock *q = reallocarray(out, c, sizeof(*out));

			if (!q) {
				free(out);
				free(stale);
				return -ENOMEM;
			}
			out = q;
			cap = c;
		}
		o = &out[nout++];
		memset(o, 0, sizeof(*o));
		o->pid = (pid_t)key.tgid;
		o->uid = uid;
		o->start_time = start;
		o->uaddr = key.uaddr;
		o->waits = v.waits;
		o->wait_ns = v.wait_ns;
		o->wait_max_ns = v.wait_max_ns;
		snprintf(o->comm, sizeof(o->comm), "%s", comm);
		where_of(o->pid, o->uaddr, o->where, sizeof(o->where));
		/* Its symbol, as a libelide process's lock is named: by a
		 * child running as the process's user (symbolizer.c). */
		(void)elided_symbolize_observed(d, o->pid, o->uid, o->start_time, o->uaddr, o->name, sizeof(o->name));
		{
			char path[64];
			ssize_t len;

			snprintf(path, sizeof(path), "/proc/%d/exe", (int)o->pid);
			len = readlink(path, o->exe, sizeof(o->exe) - 1);
			o->exe[len > 0 ? len : 0] = '\0';
		}
	}
	for (size_t i = 0; i < nstale; i++)
		(void)bpf_map_delete_elem(fd, &stale[i]);
	free(stale);
	elided_symbolize_observed_flush(d);
	if (nout)
		qsort(out, nout, sizeof(*out), cmp_observed);
	*ret = out;
	*n = nout;
	return 0;
#else
	(void)d, (void)caller;
	return -EOPNOTSUPP;
#endif
}
