/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libelide: start-up and exit.  The constructor reads the options, asks
 * the hardware and glibc what may be done, resolves glibc's functions and
 * sets the path every lock call takes (set_path()); elided may change the
 * mode later (elide_set_mode()).  Also fork, which must reset a thread's
 * state in the child.
 *
 * The rest of libelide, one job a file:
 *   fastpath.c        the lock and unlock entry points, on the pinned page
 *   mutex.c, rwlock.c the slow paths and the other lock interposers
 *   cond.c            the condition variable waits
 *   elision.c         the transactions (RTM), back-off, probes, bursts
 *   glibc-protocol.c  a default mutex and a default rwlock's read side,
 *                     done as glibc does them (glibc-protocol.h)
 *   watch.c           waits and holds timed (PATH_OBSERVE)
 *   resolve.c         glibc's functions behind ours
 *   sandbox.c         the program's TSC and seccomp requests
 *   api.c             <elide.h>
 *   registry.c        lock records and adaptation
 *   segment.c         the segment file elided reads
 *   learn.c           learned verdicts
 *   report.c          the exit report
 *   glibc-check.c     the start-up checks of glibc's lock layout
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "elide-internal.h"
#include "glibc-protocol.h"
#include "log.h"
#include "mutex.h"
#include "resolve.h"
#include "watch.h"

/* PATH_OFF until the constructor decides; no decisions before there is a
 * segment (the pass-through looks for them on every call). */
static struct elide_seg_control no_control;
struct elide_state elide = { .mutex_lock = mutex_lock_off, .seg_control = &no_control };

/* Both together: the path, read by most entry points, and the lock's; and
 * the own paths, which mode=off turns off: it forwards every call. */
static void set_path(uint8_t path)
{
	/* A process started with ELIDE=mode=off stays off whatever elided
	 * says (libelide(7)). */
	bool off = elide.opts.mode == ELIDE_MODE_OFF || elide.env_mode == ELIDE_MODE_OFF;
	/* Nor can elided end the pass-through where the constructor found
	 * that nothing can elide or watch (path_of_mode()). */
	bool for_good = elide.env_mode == ELIDE_MODE_OFF || (elide.disabled_reason && !elide.watch_instead);

	__atomic_store_n(&elide.own_mutex_words, elide.own_mutex_allowed && !off, __ATOMIC_RELAXED);
	__atomic_store_n(&elide.own_rwlock_words, elide.own_rwlock_allowed && !off, __ATOMIC_RELAXED);
	__atomic_store_n(&elide.path, path, __ATOMIC_RELEASE);
	__atomic_store_n(&elide.mutex_lock, mutex_lock_of_path(path, for_good), __ATOMIC_RELEASE);
}

static void on_bad_option(const char *pair, size_t len, const char *why, void *userdata)
{
	log_warning("ELIDE: invalid option '%.*s': %s; ignored", (int)len, pair, why);
}

static void atfork_child(void)
{
	int saved_errno = errno;

	self.tid = 0; /* the child's thread has an id of its own */
	/* The parent's figures are the parent's. */
	self.watch_lock = NULL;
	self.watch = (struct watch_pending){ 0 };
	self.waits = (struct watch_waits){ 0 };
	segment_fork_child();
	errno = saved_errno; /* fork() returns 0 with the program's errno */
}

/*
 * _Fork() (glibc >= 2.34) makes a child without running the pthread_atfork
 * handlers, so atfork_child() runs here: without it the child's thread
 * would write its parent's thread id into the mutexes it takes and its
 * counts into its parent's segment.  As async-signal-safe as _Fork()
 * itself once libelide is initialised: atfork_child() resets this
 * thread's state and remaps memory, it neither allocates nor locks.
 */
_public_ pid_t _Fork(void)
{
	pid_t (*next)(void) = __atomic_load_n(&real.fork_without_handlers, __ATOMIC_ACQUIRE);
	pid_t pid;

	if (!next) {
		/* Called before our constructor (another library's), or a glibc
		 * without _Fork() that a program cannot have linked against. */
		next = (pid_t(*)(void))resolve("_Fork", NULL, false);
		if (!next) {
			errno = ENOSYS;
			return -1;
		}
	}
	pid = next();
	if (pid == 0)
		atfork_child();
	return pid;
}

/*
 * Test hook for machines without RTM: ELIDE_SIM_ABORT=STATUS makes every
 * transaction "abort" with that _xbegin() status before it starts, so the
 * whole contention / abort / back-off / fallback machinery runs for real.
 * Never honoured where RTM works, and never for setuid programs.
 */
static void setup_sim_abort(void)
{
	static char reason[96];
	const char *v = secure_getenv("ELIDE_SIM_ABORT");
	unsigned long status;
	char *end;

	if (!v || elide.hw.rtm_usable)
		return;
	errno = 0;
	status = strtoul(v, &end, 0);
	if (errno || end == v || *end || status == _XBEGIN_STARTED || status > UINT32_MAX) {
		log_warning("ELIDE_SIM_ABORT: invalid abort status '%s'; ignored", v);
		return;
	}
	elide.sim_abort = true;
	elide.sim_abort_status = (uint32_t)status;
	snprintf(reason, sizeof(reason), "simulated: every transaction aborts with status 0x%lx (ELIDE_SIM_ABORT)",
		 status);
	elide.hw.reason = reason;
}

/*
 * Where glibc keeps a thread's id in its descriptor: glibc describes it for
 * debuggers (libthread_db) as {bits, count, offset} in
 * _thread_db_pthread_tid, in libc since 2.34 and libpthread before.  Used
 * only when it holds this thread's id.  NULL, or why not.
 */
static const char *thread_id_why;

/* Whether glibc elides its own mutexes: opt-in with the tunable up to
 * 2.42; 2.43 removed elision, and its tunables with it (a
 * glibc.elision.enable=1 left in GLIBC_TUNABLES then does nothing). */
static bool glibc_elides(void)
{
	unsigned major, minor;

	if (!elide_glibc_elision_enabled(secure_getenv("GLIBC_TUNABLES")))
		return false;
	if (glibc_parse_version(gnu_get_libc_version(), &major, &minor) < 0)
		return true; /* cannot tell: as if it did */
	return major < 2 || (major == 2 && minor < 43);
}

static const char *find_thread_id(void)
{
	const uint32_t *desc;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	resolving = true;
	desc = dlvsym(RTLD_DEFAULT, "_thread_db_pthread_tid", "GLIBC_PRIVATE");
	resolving = false;
	if (!desc)
		return "glibc does not describe its thread descriptor (_thread_db_pthread_tid)";
	if (desc[0] != 8 * sizeof(pid_t) || desc[1] != 1 || desc[2] == 0 || desc[2] > 65536)
		return "glibc describes the thread id in its descriptor in an unknown way";
	if (*(const pid_t *)((const char *)pthread_self() + desc[2]) != tid)
		return "the thread id is not where glibc says it is";
	elide.pthread_tid_offset = desc[2];
	return NULL;
}

/* glibc's functions that the probes in glibc-check.c run. */
static struct glibc_lock_fns real_lock_fns(void)
{
	return (struct glibc_lock_fns){
		.mutex_init = real.mutex_init, .mutex_destroy = real.mutex_destroy,
		.mutex_lock = real.mutex_lock, .mutex_trylock = real.mutex_trylock,
		.mutex_unlock = real.mutex_unlock, .mutexattr_settype = real.mutexattr_settype,
		.mutexattr_destroy = real.mutexattr_destroy, .rwlock_init = real.rwlock_init,
		.rwlock_destroy = real.rwlock_destroy, .rwlock_rdlock = real.rwlock_rdlock,
		.rwlock_trywrlock = real.rwlock_trywrlock, .rwlock_wrlock = real.rwlock_wrlock,
		.rwlock_unlock = real.rwlock_unlock,
	};
}

/* Why default mutexes' words stay glibc's to write, or NULL when libelide
 * takes and gives them itself ("a default mutex's words", glibc-protocol.h).  In every
 * mode, pass-through included: it is what libelide's real acquisitions cost. */
static const char *own_mutex_words_refused(void)
{
	const struct glibc_lock_fns fns = real_lock_fns();
	unsigned major, minor;
	const char *why;

	if (!elide.opts.own_mutex)
		return "own_mutex=0";
	if (thread_id_why)
		return thread_id_why;
	if (glibc_elides())
		return "glibc's own elision is enabled (GLIBC_TUNABLES)";
	if (real.mutex_lock != __pthread_mutex_lock || real.mutex_trylock != __pthread_mutex_trylock ||
	    real.mutex_unlock != __pthread_mutex_unlock)
		return "another library interposes the mutex functions after libelide";
	why = glibc_version_reason(gnu_get_libc_version(), &major, &minor);
	if (why)
		return why;
	return glibc_check_default_mutex(&fns, thread_tid());
}

/* The same for the read side of default rwlocks ("the read side of a
 * default rwlock", glibc-protocol.h). */
static const char *own_rwlock_words_refused(void)
{
	const struct glibc_lock_fns fns = real_lock_fns();
	unsigned major, minor;
	const char *why;

	if (!elide.opts.own_rwlock)
		return "own_rwlock=0";
	if (thread_id_why)
		return thread_id_why;
	if (glibc_elides())
		return "glibc's own elision is enabled (GLIBC_TUNABLES)";
	if (real.rwlock_rdlock != __pthread_rwlock_rdlock || real.rwlock_unlock != __pthread_rwlock_unlock)
		return "another library interposes the rwlock functions after libelide";
	why = glibc_version_reason(gnu_get_libc_version(), &major, &minor);
	if (why)
		return why;
	return glibc_check_default_rwlock(&fns, thread_tid());
}

/* What in glibc, its tunables or our table stops libelide using the
 * locks' bytes, or NULL. */
static const char *glibc_refusal(void)
{
	if (glibc_elides())
		return "GLIBC_TUNABLES enables glibc's own elision (glibc.elision.enable=1); "
		       "passing through to avoid eliding twice";
	/* After the tunables check: glibc's elision would write the probed bytes.
	 * The probe runs what every pass-through runs (resolved by now). */
	const struct glibc_lock_fns fns = real_lock_fns();
	const char *glibc_why = glibc_check(&glibc_facts, &fns);
	if (glibc_why)
		return glibc_why;
	if (!elide.recs)
		return "could not allocate the lock table";
	return NULL;
}

/*
 * Why libelide cannot elide here, or NULL.  *watch_instead: the only reason
 * is the hardware, so locks can still be watched (opts.watch): the same
 * records in the same bytes of the locks, with no transaction.
 */
static const char *decide_disabled_reason(bool *watch_instead)
{
	static char reason[320];
	const char *why;

	*watch_instead = false;
	if (elide.opts.mode == ELIDE_MODE_OFF)
		return "mode=off";
	why = glibc_refusal();
	if (!elide.hw.rtm_usable && !elide.sim_abort) {
		/* The hardware is the reason given; the others decide whether
		 * locks can be watched, and are said when they stop it. */
		*watch_instead = elide.opts.watch && !why;
		if (elide.opts.watch && why)
			snprintf(reason, sizeof(reason), "no usable RTM: %s; not watching either: %s", elide.hw.reason,
				 why);
		else
			snprintf(reason, sizeof(reason), "no usable RTM: %s", elide.hw.reason);
		return reason;
	}
	return why;
}

/* The fast path for a mode.  mode=off is the pass-through whatever the
 * hardware: the administrator's kill switch. */
static uint8_t path_of_mode(enum elide_mode mode)
{
	if (mode == ELIDE_MODE_OFF)
		return PATH_OFF;
	if (!elide.enabled)
		return elide.watch_instead ? PATH_OBSERVE : PATH_OFF;
	switch (mode) {
	case ELIDE_MODE_ON:
		return PATH_TRACK_ALL;
	case ELIDE_MODE_WATCH:
		return PATH_OBSERVE;
	case ELIDE_MODE_ADAPTIVE:
	case ELIDE_MODE_OFF:
		break;
	}
	return PATH_WATCH;
}

/*
 * A mode pushed by elided.  "off" is the pass-through (path_of_mode()),
 * which still looks for the next decision on every acquisition
 * (poll_control_off()).
 */
void elide_set_mode(enum elide_mode mode)
{
	/* ELIDE=mode=off: the program's own kill switch outranks elided's. */
	if (elide.env_mode == ELIDE_MODE_OFF)
		return;
	elide.opts.mode = mode;
	set_path(path_of_mode(mode));
	registry_apply_mode();
}

__attribute__((constructor(101))) static void elide_init(void)
{
	/* C: errno is zero at program start-up, whatever we called. */
	int saved_errno = errno;
	const char *own_words_why, *own_rwlock_why;
	int r;

	log_set_prefix("libelide");
	elide_options_defaults(&elide.opts);
	elide_options_parse(&elide.opts, secure_getenv("ELIDE"), on_bad_option, NULL);
	/* stats=0: the sample counter never comes round, so commits go uncounted. */
	elide.sample_mask = elide.opts.stats ? elide.opts.sample - 1 : UINT32_MAX;
	elide.env_mode = elide.opts.mode;
	sandbox_check_inherited();
	elide_hw_detect(&elide.hw);
	setup_sim_abort();
	watch_clock_init();
	resolve_all();
	thread_id_why = find_thread_id();
	/* The definition everyone uses: a program linked against it holds a
	 * copy that glibc then writes, so not RTLD_NEXT.  Absent before 2.32. */
	resolving = true;
	elide.single_threaded = dlsym(RTLD_DEFAULT, "__libc_single_threaded");
	resolving = false;
	own_words_why = own_mutex_words_refused();
	elide.own_mutex_allowed = own_words_why == NULL;
	own_rwlock_why = own_rwlock_words_refused();
	elide.own_rwlock_allowed = own_rwlock_why == NULL;
	r = registry_init();
	if (r < 0)
		log_warning_errno(r, "cannot map the lock table (%u records); statistics off",
				  elide.opts.max_locks);
	segment_init();
	pthread_atfork(NULL, NULL, atfork_child);
	elide.disabled_reason = decide_disabled_reason(&elide.watch_instead);
	if (elide.opts.verbose) {
		if (elide.disabled_reason && elide.watch_instead)
			log_info("not eliding (%s); watching contended locks", elide.disabled_reason);
		else if (elide.disabled_reason)
			log_info("passing all locks through to glibc: %s", elide.disabled_reason);
		else if (elide.opts.mode == ELIDE_MODE_WATCH)
			log_info("watching contended locks, no transactions (mode=watch; %s)", elide.hw.reason);
		else
			log_info("eliding with RTM, mode=%s (%s)", elide_mode_to_string(elide.opts.mode),
				 elide.hw.reason);
	}
	elide.enabled = elide.disabled_reason == NULL;
	set_path(path_of_mode(elide.opts.mode));
	/* Before any lock of the program's is contended: its learned verdicts. */
	learn_init(segment_runtime_dir());
	if (elide.opts.verbose) {
		/* mode=off: the kill switch turns the own paths off too (set_path()). */
		if (!own_words_why && !elide.own_mutex_words)
			own_words_why = "mode=off";
		if (!own_rwlock_why && !elide.own_rwlock_words)
			own_rwlock_why = "mode=off";
		if (own_words_why)
			log_info("default mutexes are locked by glibc's functions: %s", own_words_why);
		else
			log_info("default mutexes are locked by libelide with glibc's protocol");
		if (own_rwlock_why)
			log_info("rwlocks are read-locked by glibc's functions: %s", own_rwlock_why);
		else
			log_info("free rwlocks are read-locked by libelide with glibc's protocol");
		if (!elide_tsc_usable())
			log_info("the time-stamp counter is disabled: waits and holds are counted, not timed");
	}
	segment_publish_status();
	errno = saved_errno;
}

/*
 * report=1: on standard error (which programs such as xz and sort close
 * before they exit: the report is then lost, EBADF); report=PATH: appended
 * to that file, opened now with the process's own rights and closed again.
 */
static void report_at_exit(void)
{
	int fd;

	if (!elide.opts.report_path[0]) {
		report_print(STDERR_FILENO);
		return;
	}
	fd = open(elide.opts.report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0666);
	if (fd < 0) {
		log_warning_errno(-errno, "report=%s: cannot open", elide.opts.report_path);
		return;
	}
	report_print(fd);
	close(fd);
}

__attribute__((destructor)) static void elide_fini(void)
{
	int saved_errno = errno;

	if (elide.opts.report)
		report_at_exit();
	watch_waits_flush();
	learn_fini(segment_runtime_dir());
	segment_fini();
	errno = saved_errno;
}
