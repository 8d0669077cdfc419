/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided: finds processes running with libelide, aggregates their lock
 * statistics, applies the policy of /etc/elide.conf and pushes decisions
 * back into each process's segment.  A systemd Type=notify service: runs in
 * the foreground, logs to stderr with <N> priority prefixes under journald.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "dbus.h"
#include "discovery.h"
#include "elfsym.h"
#include "elided.h"
#include "events.h"
#include "hw.h"
#include "log.h"
#include "metrics.h"

#define DEFAULT_CONFIG SYSCONFDIR "/elide.conf"

static struct elided daemon_state;

static void help(void)
{
	printf("Usage: elided [OPTIONS]\n"
	       "\n"
	       "The elide policy daemon: finds processes running with libelide, aggregates their\n"
	       "per-lock statistics, applies the policy of the configuration and pushes decisions\n"
	       "back into each process.\n"
	       "\n"
	       "  -c, --config=FILE        configuration file (default %s);\n"
	       "                           drop-ins are read from FILE.d/*.conf\n"
	       "  -r, --runtime-dir=DIR    where processes put their segments (default %s,\n"
	       "                           or $ELIDE_RUNTIME_DIR)\n"
	       "  -s, --state-dir=DIR      where what was learned about programs is kept\n"
	       "                           (default $ELIDE_STATE_DIR, else systemd's\n"
	       "                           $STATE_DIRECTORY, else %s)\n"
	       "      --no-learning        neither use nor keep learned decisions\n"
	       "      --no-bpf             discover processes with inotify and pidfds only\n"
	       "      --no-bus             do not register on D-Bus (tests, emergencies)\n"
	       "      --check-config       validate the configuration and exit\n"
	       "  -v, --verbose            log debug messages\n"
	       "  -h, --help               show this help\n"
	       "  -V, --version            show the version\n"
	       "\n"
	       "Signals: SIGHUP reloads the configuration, SIGTERM and SIGINT stop the daemon.\n"
	       "See elided(8) and elide.conf(5).\n",
	       DEFAULT_CONFIG, ELIDE_RUNTIME_DIR_DEFAULT, ELIDED_STATE_DIR_DEFAULT);
}

static void status_notify(struct elided *d)
{
	char line[256];

	elided_status_line(d, line, sizeof(line));
	sd_notifyf(false, "STATUS=%s", line);
}

void elided_status_line(struct elided *d, char *buf, size_t size)
{
	size_t eliding = 0;

	for (struct tracked_process *p = d->processes; p; p = p->next)
		eliding += p->elision == ELIDE_SEG_ELISION_ON;
	snprintf(buf, size, "%zu processes with libelide, %zu eliding; RTM %s; discovery %s", d->nprocesses, eliding,
		 d->rtm_usable ? "usable" : "not usable",
		 d->discovery && discovery_get_method(d->discovery) == DISCOVERY_BPF ? "bpf" : "fallback");
}

static char *dropin_dir_of(const char *config_path)
{
	char *dir;

	if (asprintf(&dir, "%s.d", config_path) < 0)
		return NULL;
	return dir;
}

/* The configuration and its drop-ins; the system's (the default path)
 * also takes /run's and /usr/lib's, as elide.conf(5) says. */
static int load_config(const struct elided *d, struct elide_config **ret, char *err, size_t errlen)
{
	const char *dirs[] = { d->config_dropin_dir, CONFIG_RUNTIME_DROPIN_DIR, CONFIG_VENDOR_DROPIN_DIR, NULL };

	if (strcmp(d->config_path, DEFAULT_CONFIG) != 0)
		dirs[1] = NULL;
	return config_load_dirs(d->config_path, dirs, ret, err, errlen);
}

static void note_reload(struct elided *d, const char *result)
{
	time_t now = time(NULL);
	struct tm tm;
	char when[32] = "";

	if (localtime_r(&now, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(d->last_reload, sizeof(d->last_reload), "%s at %s", result, when);
}

static void reload_event(struct elided *d, int priority, const char *result, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void reload_event(struct elided *d, int priority, const char *result, const char *fmt, ...)
{
	struct elided_event ev = {
		.kind = ELIDED_EVENT_RELOAD,
		.priority = priority,
		.source = "reload",
		.reason = result,
		.caller_uid = ELIDED_NO_UID,
		.old_uid = ELIDED_NO_UID,
	};
	char message[CONFIG_ERR_MAX + 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	elided_event(d, &ev, "%s", message);
}

/* The errors of a configuration, one "FILE:LINE: what" a line: each logged
 * as a line of its own, after `prefix`. */
static void log_config_errors(int priority, const char *prefix, const char *err)
{
	while (*err) {
		size_t n = strcspn(err, "\n");

		log_full(priority, "%s%.*s", prefix, (int)n, err);
		err += n;
		err += *err == '\n';
	}
}

/* How many lines (errors, or "N more errors") `err` holds. */
static unsigned config_error_lines(const char *err)
{
	unsigned n = *err ? 1 : 0;

	for (; *err; err++)
		n += *err == '\n' && err[1];
	return n;
}

int elided_reload(struct elided *d, char *err, size_t errlen)
{
	struct elide_config *fresh = NULL;
	double old_interval = d->config->interval;
	enum observe_lock_waits old_observe = d->config->observe_lock_waits;
	int r;

	sd_notify(false, "RELOADING=1\nSTATUS=Reloading configuration");
	r = load_config(d, &fresh, err, errlen);
	if (r < 0) {
		char result[CONFIG_ERR_MAX + 32];
		size_t first = strcspn(err, "\n");

		/* The event names the first error and how many there are; each
		 * error is a line of the log after it. */
		if (err[first])
			reload_event(d, LOG_ERR, err, "reload refused, keeping the running policy: %.*s (%u errors)",
				     (int)first, err, config_error_lines(err));
		else
			reload_event(d, LOG_ERR, err, "reload refused, keeping the running policy: %s", err);
		if (err[first])
			log_config_errors(LOG_ERR, "reload: ", err + first + 1);
		snprintf(result, sizeof(result), "failed: %s", err);
		note_reload(d, result);
		sd_notify(false, "READY=1");
		status_notify(d);
		return r;
	}
	config_free(d->config);
	d->config = fresh;
	note_reload(d, "ok");
	reload_event(d, LOG_INFO, "ok", "configuration reloaded from %zu file%s", fresh->nfiles,
		     fresh->nfiles == 1 ? "" : "s");
	elided_redecide_all(d);
	/* daemon.observe_lock_waits changed: load (or not) what it allows now. */
	if (fresh->observe_lock_waits != old_observe) {
		elided_futexwatch_stop(d);
		if (elided_futexwatch_start(d) < 0)
			log_oom();
	}
	if (fresh->interval != old_interval)
		elided_reschedule(d);
	sd_notify(false, "READY=1");
	status_notify(d);
	return 0;
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct elided *d = userdata;
	char err[CONFIG_ERR_MAX];

	if (si->ssi_signo == SIGHUP) {
		elided_reload(d, err, sizeof(err));
		return 0;
	}
	log_info("received %s, stopping", strsignal((int)si->ssi_signo));
	sd_notify(false, "STOPPING=1\nSTATUS=Stopping");
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

static double cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static void warn_world_writable(struct elided *d, int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
		log_warning("%s is world-writable without the sticky bit: users can remove each other's segments",
			    d->runtime_dir);
}

/*
 * Our own descriptors keep a removed runtime directory alive, so inotify
 * never says it went: compare the path with the directory we hold.  Its
 * segments went with it (processes started before it is back stay unseen
 * until they restart); a directory at the path again is adopted.
 */
static void check_runtime_dir(struct elided *d)
{
	int r, fd;

	if (!d->discovery)
		return;
	r = discovery_dir_replaced(d->discovery);
	if (r <= 0)
		return;
	if (!d->runtime_dir_lost) {
		d->runtime_dir_lost = true;
		log_warning("runtime directory %s was removed or replaced; dropped the %zu processes tracked from it "
			    "(their segments went with it: they stay unseen until they restart); new segments are "
			    "adopted as soon as %s is a directory again (systemd-tmpfiles --create elide.conf "
			    "re-creates it)",
			    d->runtime_dir, d->nprocesses, d->runtime_dir);
		elided_forget_all(d);
	}
	r = discovery_reopen(d->discovery);
	if (r == -ENOENT)
		return;
	if (r < 0) {
		log_error_errno(r, "cannot adopt the new runtime directory %s, retrying every interval", d->runtime_dir);
		return;
	}
	/* Reads go through the same directory as the watch. */
	fd = fcntl(discovery_dir_fd(d->discovery), F_DUPFD_CLOEXEC, 3);
	if (fd < 0) {
		log_error_errno(errno, "cannot use the new runtime directory %s", d->runtime_dir);
		return;
	}
	close(d->runtime_dirfd);
	d->runtime_dirfd = fd;
	d->runtime_dir_lost = false;
	warn_world_writable(d, fd);
	elided_hints_close(d);
	elided_hints_open(d);
	elided_adopt_pending(d);
	log_notice("runtime directory %s is back: %zu processes adopted from it", d->runtime_dir, d->nprocesses);
}

static int on_interval(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct elided *d = userdata;
	double before = cpu_seconds();
	uint64_t next = (uint64_t)(d->config->interval * 1e6);

	check_runtime_dir(d);
	if (d->discovery) {
		discovery_tick(d->discovery);
		d->unseen.no_segment = discovery_no_segment(d->discovery, &d->unseen.no_segment_total);
	}
	elided_refresh_all(d);
	elided_metrics_tick(d);
	d->intervals++;
	/* Summaries of ended rate-limit windows, without waiting for a next message. */
	log_ratelimit_flush(&d->ratelimit, now_ns());
	/* Every few intervals, give refused segments another chance. */
	if (d->intervals % 5 == 0) {
		elided_rescan(d);
		elided_teach_scan(d); /* those an inotify overflow hid */
	}
	elided_learning_save(d, false);
	d->cpu_seconds_per_interval = cpu_seconds() - before;
	status_notify(d);
	sd_event_source_set_time(s, usec + next);
	return 0;
}

static sd_event_source *interval_source;

void elided_reschedule(struct elided *d)
{
	uint64_t now;

	sd_event_now(d->event, CLOCK_MONOTONIC, &now);
	sd_event_source_set_time(interval_source, now + (uint64_t)(d->config->interval * 1e6));
}

/* Adopted at the next adoption pass: most processes are gone by then. */
static void on_segment_added(void *userdata, const char *name)
{
	elided_defer_segment(userdata, name);
}

/* A run's counters at exit, renamed into place: learned from at once, so
 * that the program's next runs get the verdicts. */
static void on_teach_file(void *userdata, const char *name)
{
	elided_teach_file(userdata, name);
}

static void on_segment_removed(void *userdata, const char *name)
{
	elided_segment_removed(userdata, name);
}

static void on_process_exec(void *userdata, pid_t pid, const char *comm)
{
	/* The segment of the new image arrives through inotify; nothing to do
	 * until then, but a process we tracked has a new identity now. */
	struct elided *d = userdata;

	if (elided_find_process(d, pid))
		elided_reap(d, pid);
}

static void on_process_exit(void *userdata, pid_t pid, uint64_t start_time)
{
	elided_process_exited(userdata, pid, start_time);
}

static const struct discovery_ops discovery_ops = {
	.segment_added = on_segment_added,
	.segment_removed = on_segment_removed,
	.teach_file = on_teach_file,
	.process_exec = on_process_exec,
	.process_exit = on_process_exit,
};

/*
 * sd_event_loop(), with wake-ups coalesced.  Where every program has
 * libelide, segments come and go hundreds of times a second, a few
 * directory events each, and a wake-up per batch (epoll, two context
 * switches) cost more than the events' own work.  Before it blocks, the
 * loop lets at least LOOP_MIN_WAKE_USEC pass since it last woke: whatever
 * arrives meanwhile is handled in one go, and nothing (an exit, a signal)
 * waits longer than that for it.
 *
 * Not the bus: sd-bus reads one message per dispatch, so every turn first
 * reads what the bus has (elided_bus_drain: calls are only queued there,
 * and run in turn per uid), and while more is waiting the loop does not
 * sleep.  A D-Bus call is answered at the bus daemon's pace, not at one
 * per LOOP_MIN_WAKE_USEC.
 */
#define LOOP_MIN_WAKE_USEC 20000u

static int run_loop(struct elided *d)
{
	sd_event *e = d->event;
	uint64_t woke = 0;
	int r, code = 0;

	for (;;) {
		bool bus_busy;

		r = sd_event_get_state(e);
		if (r < 0)
			return r;
		if (r == SD_EVENT_FINISHED)
			break;
		bus_busy = elided_bus_drain(d);
		r = sd_event_prepare(e);
		if (r == 0) {
			uint64_t since = now_ns() / 1000 - woke;

			/* The coalescing wait ends when the bus has input. */
			if (!bus_busy && since < LOOP_MIN_WAKE_USEC)
				elided_bus_wait(d, LOOP_MIN_WAKE_USEC - since);
			r = sd_event_wait(e, UINT64_MAX);
			woke = now_ns() / 1000;
		}
		if (r > 0)
			r = sd_event_dispatch(e);
		if (r < 0)
			return r;
	}
	r = sd_event_get_exit_code(e, &code);
	return r < 0 ? r : code;
}

static int open_runtime_dir(struct elided *d)
{
	/* tmpfiles.d creates it at boot; create it ourselves when run by hand. */
	if (mkdir(d->runtime_dir, 01777) == 0)
		chmod(d->runtime_dir, 01777);
	else if (errno != EEXIST)
		return log_error_errno(errno, "cannot create runtime directory %s", d->runtime_dir);
	d->runtime_dirfd = open(d->runtime_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->runtime_dirfd < 0)
		return log_error_errno(errno, "cannot open runtime directory %s", d->runtime_dir);
	warn_world_writable(d, d->runtime_dirfd);
	return 0;
}

/* -s, else $ELIDE_STATE_DIR, else the unit's StateDirectory= (systemd
 * sets $STATE_DIRECTORY), else the compiled-in default. */
static const char *state_dir_of(const char *option)
{
	const char *env;

	if (option && *option)
		return option;
	env = getenv("ELIDE_STATE_DIR");
	if (env && *env)
		return env;
	env = getenv("STATE_DIRECTORY");
	/* Several directories are separated by ':'; ours is the only one. */
	if (env && *env && !strchr(env, ':'))
		return env;
	return ELIDED_STATE_DIR_DEFAULT;
}

static void setup_logging(bool verbose)
{
	const char *stream = getenv("JOURNAL_STREAM");

	log_set_prefix("elided");
	/* Paths, comms, lock and module names come from processes. */
	log_set_escape(true);
	log_set_max_priority(verbose ? LOG_DEBUG : LOG_INFO);
	/* stderr connected to journald: let it read our priorities (it adds
	 * our name itself).  Events go as structured entries when stderr is
	 * the very stream $JOURNAL_STREAM names. */
	if (stream && *stream)
		log_set_journal_prefix(true);
	elided_events_init(elided_events_stderr_is_journal());
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "no-learning", no_argument, NULL, 'L' },
		{ "no-bpf", no_argument, NULL, 'B' },
		{ "no-bus", no_argument, NULL, 'N' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{}
	};
	struct elided *d = &daemon_state;
	struct elide_hw hw;
	const char *config = DEFAULT_CONFIG;
	const char *runtime_dir = getenv("ELIDE_RUNTIME_DIR");
	const char *state_dir = NULL;
	bool learning = true;
	bool allow_bpf = true, use_bus = true, check_only = false, verbose = false;
	char err[CONFIG_ERR_MAX];
	sigset_t mask;
	int c, r;

	while ((c = getopt_long(argc, argv, "c:r:s:vhV", options, NULL)) >= 0) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'r':
			runtime_dir = optarg;
			break;
		case 's':
			state_dir = optarg;
			break;
		case 'L':
			learning = false;
			break;
		case 'B':
			allow_bpf = false;
			break;
		case 'N':
			use_bus = false;
			break;
		case 'C':
			check_only = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			help();
			return EXIT_SUCCESS;
		case 'V':
			printf("elided %s\n", PACKAGE_VERSION);
			return EXIT_SUCCESS;
		default:
			fprintf(stderr, "Try 'elided --help'.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "elided: unexpected argument '%s'\nTry 'elided --help'.\n", argv[optind]);
		return 2;
	}
	setup_logging(verbose);
	log_ratelimit_init(&d->ratelimit, (uint64_t)ELIDED_LOG_WINDOW_SEC * 1000000000u, ELIDED_LOG_BURST);
	/* Snapshot buffers come and go every interval: keep them on the heap
	 * instead of an mmap/munmap pair (and fresh page faults) each time. */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	/* Symbolizer children are reaped through pidfds (symbolizer.c). */
	signal(SIGCHLD, SIG_DFL);
	/* One module object per mapped file (device, inode) for all processes:
	 * the daemon never parses it, but a symbolizer child that names locks
	 * of several processes then parses it once. */
	elfsym_share_modules(true);

	d->config_path = strdup(config);
	d->config_dropin_dir = dropin_dir_of(config);
	d->runtime_dir = strdup(runtime_dir && *runtime_dir ? runtime_dir : ELIDE_RUNTIME_DIR_DEFAULT);
	d->runtime_dirfd = -1;
	d->hints_dirfd = -1;
	if (!d->config_path || !d->config_dropin_dir || !d->runtime_dir)
		return log_oom(), EXIT_FAILURE;
	if (learning) {
		d->state_dir = strdup(state_dir_of(state_dir));
		if (!d->state_dir)
			return log_oom(), EXIT_FAILURE;
	}

	r = load_config(d, &d->config, err, sizeof(err));
	if (r < 0) {
		/* Every error, each a line of its own (editors jump to them). */
		log_config_errors(LOG_ERR, "invalid configuration: ", err);
		return EXIT_FAILURE;
	}
	if (check_only) {
		printf("configuration OK (%zu file%s)\n", d->config->nfiles, d->config->nfiles == 1 ? "" : "s");
		return EXIT_SUCCESS;
	}
	note_reload(d, "ok (start-up)");

	elide_hw_detect(&hw);
	d->rtm_usable = hw.rtm_usable;
	snprintf(d->rtm_reason, sizeof(d->rtm_reason), "%s", hw.reason);
	log_info("RTM %s: %s", hw.rtm_usable ? "usable" : "not usable", hw.reason);

	if (open_runtime_dir(d) < 0)
		return EXIT_FAILURE;
	if (elided_learning_open(d) < 0)
		return log_oom(), EXIT_FAILURE;
	elided_hints_open(d);

	r = sd_event_default(&d->event);
	if (r < 0)
		return log_error_errno(r, "cannot create the event loop"), EXIT_FAILURE;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sd_event_add_signal(d->event, NULL, SIGTERM, on_signal, d);
	sd_event_add_signal(d->event, NULL, SIGINT, on_signal, d);
	sd_event_add_signal(d->event, NULL, SIGHUP, on_signal, d);
	/* WATCHDOG=1 pings at half of WatchdogSec= when the unit sets it. */
	sd_event_set_watchdog(d->event, true);

	{
		uint64_t now;

		sd_event_now(d->event, CLOCK_MONOTONIC, &now);
		r = sd_event_add_time(d->event, &interval_source, CLOCK_MONOTONIC,
				      now + (uint64_t)(d->config->interval * 1e6), 10000, on_interval, d);
		if (r < 0)
			return log_error_errno(r, "cannot add the interval timer"), EXIT_FAILURE;
		sd_event_source_set_enabled(interval_source, SD_EVENT_ON);
	}

	if (elided_symbolizer_new(d) < 0)
		return log_oom(), EXIT_FAILURE;
	d->metrics = metrics_new();
	if (!d->metrics)
		return log_oom(), EXIT_FAILURE;
	if (use_bus) {
		r = elided_bus_setup(d);
		if (r < 0)
			return EXIT_FAILURE;
	}
	/* Adopts every segment already there before we say READY. */
	r = discovery_new(d->event, d->runtime_dir, allow_bpf, &discovery_ops, d, &d->discovery);
	if (r < 0)
		return log_error_errno(r, "cannot watch %s", d->runtime_dir), EXIT_FAILURE;
	elided_adopt_pending(d);
	/* Lock waits of programs without libelide; optional. */
	d->allow_bpf = allow_bpf;
	r = elided_futexwatch_start(d);
	if (r < 0)
		return log_oom(), EXIT_FAILURE;

	sd_notify(false, "READY=1");
	status_notify(d);
	r = run_loop(d);

	elided_futexwatch_stop(d);
	discovery_free(d->discovery);
	elided_bus_free(d);
	elided_free_processes(d);
	elided_hints_remove(d);
	elided_learning_close(d);
	elided_symbolizer_free(d);
	metrics_free(d->metrics);
	config_free(d->config);
	sd_event_source_unref(interval_source);
	sd_event_unref(d->event);
	close(d->runtime_dirfd);
	free(d->config_path);
	free(d->config_dropin_dir);
	free(d->runtime_dir);
	free(d->state_dir);
	return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
