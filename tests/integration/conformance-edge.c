/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conformance-edge - the corners of the pthread interface that
 * conformance.c does not reach (issue 30), with the same transcript: one
 * line per case, "scope/case: RESULT", nothing that depends on addresses,
 * timing or thread ids, each result also checked against what glibc 2.36
 * does (a mismatch goes to stderr and makes the exit status 1).
 * test-conformance.sh runs every part once without libelide (the
 * reference) and under libelide in every configuration, and diffs.
 *
 * Racy stress prints only invariants ("double holders: 0", counts
 * "exact"); waits that must end by a timeout are ~20 ms ones; whether a
 * thread already sleeps in a lock call is read from /proc (never a result,
 * only when to go on).  Cases that may crash or hang run in a child
 * process bounded by an alarm, whose exit status is a result.
 *
 * Usage: conformance-edge PART, PART one of
 *   tsc          rdtsc faults (prctl PR_TSC_SIGSEGV): contended locks work
 *   seccomp      no system call but futex on any lock path: a seccomp filter
 *                traps everything else (new thread, fork child, contention)
 *   compat-cond  the 2.2.5 condition variable (pthread_cond_*@GLIBC_2.2.5)
 *   signals      trylock in a signal handler of a single-threaded process;
 *                signals arriving while a thread waits for a lock
 *   cancel       pthread_cond_wait cancelled; mutex/rwlock waits are not
 *                cancellation points
 *   direct       glibc's own entry points (dlsym on libc, __pthread_*)
 *                beside the interposed ones, on one lock, under stress
 *   timed        timed waits that expire; rwlock reader overflow; writer
 *                preference
 *   destroy      destroy of busy locks, a type change at one address, use
 *                after destroy
 *   errno        errno is left alone by every lock call
 *   fork         fork/_Fork while threads contend and sleep; process-shared
 *                locks under stress from two processes
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <gnu/lib-names.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/wait.h>

#include "testutil.h"
#include "conformance-util.h"
#include "conformance-compat.h"

/* Built with AddressSanitizer (the sanitizer build): its runtime makes
 * system calls of its own, and reads the TSC. */
#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif
#ifndef ASAN_BUILD
#define ASAN_BUILD 0
#endif

/* errno before every call whose effect on errno is checked. */
#define SENTINEL 4242

/* Acquisitions per thread, two threads, that make a lock "hot" (tracked
 * and, with RTM or ELIDE_SIM_ABORT, elided or aborted by libelide). */
#define HOT_ITERS 1500L

/* A child process that hangs is killed by SIGALRM after this (a bound,
 * never a result: what it waits for takes milliseconds). */
#define CHILD_SECONDS 10
/* The same for a child that hangs where libelide is known to lose a
 * wake-up (the 2.2.5 condition variable), so that the test fails fast. */
#define CHILD_SECONDS_SHORT 2

/* Timed waits that must expire: this far ahead. */
#define EXPIRE_MS 20
/* ...and where only errno after the expiry is looked at. */
#define EXPIRE_MS_SHORT 5

/*
 * glibc's own entry points, exported beside the pthread_* names (which
 * libelide interposes) and not interposed by it.  Only as a version that
 * is not the default, which a program links against by naming it (as
 * programs linked before glibc 2.34 do).  AddressSanitizer intercepts two
 * of them but cannot find the real ones (dlsym(RTLD_NEXT) sees no default
 * version) and crashes: its build asks libc's handle for them instead.
 */
#define GLIBC_2_2_5(alias, name) __asm__(".symver " #alias ", " #name "@GLIBC_2.2.5")
int ref_mutex_lock(pthread_mutex_t *m);
int ref_mutex_trylock(pthread_mutex_t *m);
int ref_mutex_unlock(pthread_mutex_t *m);
int ref_rwlock_rdlock(pthread_rwlock_t *rw);
int ref_rwlock_wrlock(pthread_rwlock_t *rw);
int ref_rwlock_tryrdlock(pthread_rwlock_t *rw);
int ref_rwlock_trywrlock(pthread_rwlock_t *rw);
int ref_rwlock_unlock(pthread_rwlock_t *rw);
GLIBC_2_2_5(ref_mutex_lock, __pthread_mutex_lock);
GLIBC_2_2_5(ref_mutex_trylock, __pthread_mutex_trylock);
GLIBC_2_2_5(ref_mutex_unlock, __pthread_mutex_unlock);
GLIBC_2_2_5(ref_rwlock_rdlock, __pthread_rwlock_rdlock);
GLIBC_2_2_5(ref_rwlock_wrlock, __pthread_rwlock_wrlock);
GLIBC_2_2_5(ref_rwlock_tryrdlock, __pthread_rwlock_tryrdlock);
GLIBC_2_2_5(ref_rwlock_trywrlock, __pthread_rwlock_trywrlock);
GLIBC_2_2_5(ref_rwlock_unlock, __pthread_rwlock_unlock);

/* ---- results recorded where nothing may be printed -------------------- */

/* A child that may not print (a seccomp filter, a _Fork child of a
 * threaded process) records here; the parent prints. */
#define RECS_MAX 64

enum rec_kind {
	REC_RESULT,              /* 0 or an errno name */
	REC_COUNT,               /* "exact" or "off by N" */
	REC_ZERO,                /* a number that must be 0 */
};

struct rec {
	const char *name;        /* a literal: the same address in parent and child */
	long got, want;
	enum rec_kind kind;
};

struct edge_shm {
	int nrec;
	struct rec rec[RECS_MAX];
	_Atomic int ntrapped;    /* seccomp: system calls the filter trapped */
	int trapped[8];
	_Atomic int stop;        /* signals: the sender stops */

	/* fork: process-shared locks, two processes, two threads each */
	pthread_mutex_t pm;
	pthread_rwlock_t prw;
	long pm_count, prw_count;
	_Atomic int pm_inside, prw_inside, prw_readers;
	_Atomic long pviolations, pfailures;
};

static struct edge_shm *shm;

static void rec_add(enum rec_kind kind, const char *name, long got, long want)
{
	if (shm->nrec < RECS_MAX)
		shm->rec[shm->nrec++] = (struct rec){ .name = name, .got = got, .want = want, .kind = kind };
}

static void rec_result(const char *name, long got, long want)
{
	rec_add(REC_RESULT, name, got, want);
}

static void rec_count(const char *name, long got, long want)
{
	rec_add(REC_COUNT, name, got, want);
}

static void rec_zero(const char *name, long got)
{
	rec_add(REC_ZERO, name, got, 0);
}

static void emit_count(const char *name, long got, long want)
{
	char buf[48];

	if (got == want)
		snprintf(buf, sizeof(buf), "exact");
	else
		snprintf(buf, sizeof(buf), "off by %ld", got - want);
	emit_str(name, buf, "exact");
}

static void emit_zero(const char *name, long got)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", got);
	emit_str(name, buf, "0");
}

static void emit_yes(const char *name, bool got)
{
	emit_str(name, got ? "yes" : "no", "yes");
}

/* errno after a call that must leave it alone. */
static void emit_errno(const char *name, int err)
{
	emit_str(name, err == SENTINEL ? "kept" : errname(err), "kept");
}

static void recs_emit(void)
{
	for (int i = 0; i < shm->nrec && i < RECS_MAX; i++) {
		struct rec *r = &shm->rec[i];

		switch (r->kind) {
		case REC_RESULT: emit(r->name, (int)r->got, (int)r->want); break;
		case REC_COUNT: emit_count(r->name, r->got, r->want); break;
		case REC_ZERO: emit_zero(r->name, r->got); break;
		}
	}
	if (shm->nrec > RECS_MAX)
		fail("more than %d recorded results", RECS_MAX);
	shm->nrec = 0;
}

static void set_scope(const char *s)
{
	snprintf(scope, sizeof(scope), "%s", s);
}

/* ---- processes and threads -------------------------------------------- */

/*
 * fn in a child process, killed by SIGALRM when it hangs; its wait status
 * printed as `name` (exit 0 expected: fn's result, or 1 after a mismatch
 * it printed).  fork() with its handlers, or _Fork().
 */
static void in_child_for(const char *name, int (*fn)(void *), void *arg, bool handlers, unsigned seconds)
{
	int status, r;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = handlers ? fork() : _Fork();
	if (pid < 0)
		fail("fork: %m");
	if (pid == 0) {
		mismatches = 0;
		signal(SIGALRM, SIG_DFL);
		alarm(seconds);
		r = fn(arg);
		if (handlers) {
			fflush(stdout);
			fflush(stderr);
		}
		_exit(r ? r : mismatches ? 1 : 0);
	}
	if (waitpid(pid, &status, 0) != pid)
		fail("waitpid: %m");
	emit_status(name, status);
}

static void in_child(const char *name, int (*fn)(void *), void *arg, bool handlers)
{
	in_child_for(name, fn, arg, handlers, CHILD_SECONDS);
}

/* A thread's scheduling state, from /proc ('S': asleep, in a futex here). */
static char thread_state(pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/*
 * Until thread `tid`, which announced a blocking call, sleeps in it, or
 * `done` says it returned: never a result, only when to go on.
 */
static void wait_asleep(pid_t tid, _Atomic int *done)
{
	struct timespec ts = { 0, 100000 };

	while (thread_state(tid) != 'S' && !(done && atomic_load(done)))
		nanosleep(&ts, NULL);
}

/* A deadline long past (any clock): a wait that would block times out at once. */
static const struct timespec long_ago = { 1, 0 };

/* Mutual exclusion, seen from inside: someone else inside is a violation. */
static inline void enter(_Atomic int *inside, _Atomic long *violations)
{
	if (atomic_exchange_explicit(inside, 1, memory_order_relaxed))
		atomic_fetch_add(violations, 1);
}

static inline void leave(_Atomic int *inside)
{
	atomic_store_explicit(inside, 0, memory_order_relaxed);
}

static void mutex_init_type(pthread_mutex_t *m, int type)
{
	pthread_mutexattr_t a;

	check_ret(pthread_mutexattr_init(&a), 0);
	check_ret(pthread_mutexattr_settype(&a, type), 0);
	check_ret(pthread_mutex_init(m, &a), 0);
	check_ret(pthread_mutexattr_destroy(&a), 0);
}

static void rwlock_init_kind(pthread_rwlock_t *rw, int kind)
{
	pthread_rwlockattr_t a;

	check_ret(pthread_rwlockattr_init(&a), 0);
	check_ret(pthread_rwlockattr_setkind_np(&a, kind), 0);
	check_ret(pthread_rwlock_init(rw, &a), 0);
	check_ret(pthread_rwlockattr_destroy(&a), 0);
}

static void make_hot_mutex(pthread_mutex_t *m)
{
	hammer_lock(m, NULL, 1, 2, HOT_ITERS);
}

static void make_hot_rwlock(pthread_rwlock_t *rw)
{
	hammer_lock(NULL, rw, 1, 2, HOT_ITERS);
}

/* ---- shared stress: 4 threads on one mutex and one rwlock ------------- */

struct stress {
	pthread_mutex_t *m;
	pthread_rwlock_t *rw;
	long iters;
	long mcount, rwcount;            /* written under the lock */
	_Atomic long macq, rwacq;        /* acquisitions that counted */
	_Atomic int minside, rwinside, readers;
	_Atomic long violations, failures;
};

static void *stress_fn(void *arg)
{
	struct stress *s = arg;
	long macq = 0, rwacq = 0;

	for (long i = 0; i < s->iters; i++) {
		int r;

		if (s->m) {
			r = (i & 7) == 3 ? pthread_mutex_trylock(s->m) : pthread_mutex_lock(s->m);
			if (r == 0) {
				enter(&s->minside, &s->violations);
				s->mcount++;
				macq++;
				leave(&s->minside);
				if (pthread_mutex_unlock(s->m))
					atomic_fetch_add(&s->failures, 1);
			} else if (r != EBUSY) {
				atomic_fetch_add(&s->failures, 1);
			}
		}
		if (s->rw) {
			bool write = (i & 3) == 0;

			if ((i & 15) == 5)
				r = write ? pthread_rwlock_trywrlock(s->rw) : pthread_rwlock_tryrdlock(s->rw);
			else
				r = write ? pthread_rwlock_wrlock(s->rw) : pthread_rwlock_rdlock(s->rw);
			if (r == 0) {
				if (write) {
					enter(&s->rwinside, &s->violations);
					if (atomic_load_explicit(&s->readers, memory_order_relaxed))
						atomic_fetch_add(&s->violations, 1);
					s->rwcount++;
					rwacq++;
					leave(&s->rwinside);
				} else {
					atomic_fetch_add_explicit(&s->readers, 1, memory_order_relaxed);
					if (atomic_load_explicit(&s->rwinside, memory_order_relaxed))
						atomic_fetch_add(&s->violations, 1);
					atomic_fetch_sub_explicit(&s->readers, 1, memory_order_relaxed);
				}
				if (pthread_rwlock_unlock(s->rw))
					atomic_fetch_add(&s->failures, 1);
			} else if (r != EBUSY) {
				atomic_fetch_add(&s->failures, 1);
			}
		}
	}
	atomic_fetch_add(&s->macq, macq);
	atomic_fetch_add(&s->rwacq, rwacq);
	return NULL;
}

/* nthreads threads (the caller not among them) hammer m and/or rw. */
static void stress(struct stress *s, int nthreads)
{
	pthread_t t[8];

	check(nthreads <= 8);
	for (int i = 0; i < nthreads; i++)
		t[i] = xthread(stress_fn, s);
	for (int i = 0; i < nthreads; i++)
		xjoin(t[i]);
}

/* ---- tsc: rdtsc faults ------------------------------------------------ */

static int tsc_child(void *arg)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	struct stress s = { .m = &m, .rw = &rw, .iters = 2000 };
	int r;

	/* From here on RDTSC raises SIGSEGV in this thread and every thread it
	 * creates (nothing here reads a clock: the vDSO would use it). */
	r = prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) ? errno : 0;
	emit("prctl-tsc-sigsegv", r, 0);

	/* Single-threaded first, then four threads. */
	emit("lock", pthread_mutex_lock(&m), 0);
	emit("trylock-held", pthread_mutex_trylock(&m), EBUSY);
	emit("unlock", pthread_mutex_unlock(&m), 0);
	emit("rdlock", pthread_rwlock_rdlock(&rw), 0);
	emit("rdlock-unlock", pthread_rwlock_unlock(&rw), 0);
	emit("wrlock", pthread_rwlock_wrlock(&rw), 0);
	emit("wrlock-unlock", pthread_rwlock_unlock(&rw), 0);

	stress(&s, 4);
	emit_count("4-threads-mutex-count", s.mcount, atomic_load(&s.macq));
	emit_count("4-threads-rwlock-count", s.rwcount, atomic_load(&s.rwacq));
	emit_zero("4-threads-violations", atomic_load(&s.violations));
	emit_zero("4-threads-failed-calls", atomic_load(&s.failures));
	return 0;
}

static void part_tsc(void)
{
	set_scope("tsc");
	if (ASAN_BUILD) {
		/* Its runtime reads the TSC itself (and dies of it). */
		emit_str("skipped", "AddressSanitizer build", "AddressSanitizer build");
		return;
	}
	in_child("child", tsc_child, NULL, true);
}

/* ---- seccomp: futex is the only system call a lock path makes --------- */

/* Writes the system call down, makes it fail with ENOSYS and goes on: a
 * run shows every system call a lock path makes, not only the first. */
static void sigsys_handler(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	int i = atomic_fetch_add(&shm->ntrapped, 1);

	if (i < (int)(sizeof(shm->trapped) / sizeof(shm->trapped[0])))
		shm->trapped[i] = si->si_syscall;
	uc->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
}

static const char *syscall_name(int nr)
{
	switch (nr) {
	case SYS_gettid: return "gettid";
	case SYS_getpid: return "getpid";
	case SYS_openat: return "openat";
	case SYS_open: return "open";
	case SYS_read: return "read";
	case SYS_write: return "write";
	case SYS_close: return "close";
	case SYS_mmap: return "mmap";
	case SYS_munmap: return "munmap";
	case SYS_mprotect: return "mprotect";
	case SYS_clock_gettime: return "clock_gettime";
	case SYS_ftruncate: return "ftruncate";
	case SYS_rt_sigprocmask: return "rt_sigprocmask";
	case SYS_madvise: return "madvise";
	}
	return "?";
}

/* The system calls trapped, in order of number, each once. */
static void trapped_list(char *buf, size_t size)
{
	int n = atomic_load(&shm->ntrapped), nrs[8], k = 0;
	size_t len = 0;

	if (n > 8)
		n = 8;
	for (int i = 0; i < n; i++) {
		int nr = shm->trapped[i], j;

		for (j = 0; j < k && nrs[j] != nr; j++)
			;
		if (j == k)
			nrs[k++] = nr;
	}
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && nrs[j - 1] > nrs[j]; j--) {
			int t = nrs[j];

			nrs[j] = nrs[j - 1];
			nrs[j - 1] = t;
		}
	snprintf(buf, size, "none");
	for (int i = 0; i < k && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%d (%s)", i ? ", " : "", nrs[i],
					 syscall_name(nrs[i]));
}

#define SC_ALLOW(nr) \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

/*
 * Every system call but futex (and what exiting and the SIGSYS handler
 * need, and sched_yield for the waits of this program) raises SIGSYS,
 * whose handler writes down which and fails it.  tsync: in every thread.
 */
static int install_filter(bool tsync)
{
#ifdef __x86_64__
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		SC_ALLOW(SYS_futex),
		SC_ALLOW(SYS_exit),
		SC_ALLOW(SYS_exit_group),
		SC_ALLOW(SYS_rt_sigreturn),
		SC_ALLOW(SYS_sched_yield),
#if ASAN_BUILD
		/* Before every noreturn call (_exit, here): is this an alternate
		 * signal stack?  Not a lock path. */
		SC_ALLOW(SYS_sigaltstack),
#endif
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	struct sigaction sa;
	long r;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sigsys_handler;
	sa.sa_flags = SA_SIGINFO;
	if (sigaction(SIGSYS, &sa, NULL))
		return errno;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return errno;
	r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, tsync ? SECCOMP_FILTER_FLAG_TSYNC : 0, &prog);
	if (r < 0)
		return errno;
	return r > 0 ? ESRCH : 0; /* TSYNC: a thread that could not follow */
#else
	return ENOSYS;
#endif
}

/* What every thread does under the filter. */
struct sc_locks {
	pthread_mutex_t hot_m, fresh_m;
	pthread_rwlock_t hot_rw, fresh_rw;
	pthread_cond_t c;
	pthread_barrier_t ready, go;
	long count[2], rwcount[2];       /* [0] under the fresh lock, [1] the hot one */
	_Atomic long acq[2], rwacq[2], failures, violations;
	_Atomic int inside[2], rwinside[2], finished;
	int park;                        /* never changes: a futex to sleep on */
};

#define SC_ITERS 300

static void sc_run(struct sc_locks *s)
{
	long acq[2] = { 0, 0 }, rwacq[2] = { 0, 0 };

	for (long i = 0; i < SC_ITERS; i++) {
		int h = (i & 4) != 0;
		pthread_mutex_t *m = h ? &s->hot_m : &s->fresh_m;
		pthread_rwlock_t *rw = h ? &s->hot_rw : &s->fresh_rw;
		int r;

		switch (i & 3) {
		case 0: r = pthread_mutex_lock(m); break;
		case 1: r = pthread_mutex_trylock(m); break;
		case 2: r = pthread_mutex_timedlock(m, &long_ago); break;
		default: r = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &long_ago); break;
		}
		if (r == 0) {
			enter(&s->inside[h], &s->violations);
			s->count[h]++;
			acq[h]++;
			leave(&s->inside[h]);
			if (pthread_mutex_unlock(m))
				atomic_fetch_add(&s->failures, 1);
		} else if (r != EBUSY && r != ETIMEDOUT) {
			atomic_fetch_add(&s->failures, 1);
		}

		switch (i % 6) {
		case 0: r = pthread_rwlock_wrlock(rw); break;
		case 1: r = pthread_rwlock_trywrlock(rw); break;
		case 2: r = pthread_rwlock_tryrdlock(rw); break;
		case 3: r = pthread_rwlock_timedrdlock(rw, &long_ago); break;
		case 4: r = pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &long_ago); break;
		default: r = pthread_rwlock_rdlock(rw); break;
		}
		if (r == 0) {
			if (i % 6 == 0 || i % 6 == 1 || i % 6 == 4) {
				enter(&s->rwinside[h], &s->violations);
				s->rwcount[h]++;
				rwacq[h]++;
				leave(&s->rwinside[h]);
			} else if (atomic_load_explicit(&s->rwinside[h], memory_order_relaxed)) {
				atomic_fetch_add(&s->violations, 1);
			}
			if (pthread_rwlock_unlock(rw))
				atomic_fetch_add(&s->failures, 1);
		} else if (r != EBUSY && r != ETIMEDOUT) {
			atomic_fetch_add(&s->failures, 1);
		}
	}
	for (int h = 0; h < 2; h++) {
		atomic_fetch_add(&s->acq[h], acq[h]);
		atomic_fetch_add(&s->rwacq[h], rwacq[h]);
	}
}

/* Exiting is more than exit(2) (signal masks, stack advice): park instead,
 * until the process exits. */
static _Noreturn void sc_park(struct sc_locks *s)
{
	atomic_fetch_add(&s->finished, 1);
	for (;;)
		syscall(SYS_futex, &s->park, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}

/* Took locks before the filter. */
static void *sc_old_thread(void *arg)
{
	struct sc_locks *s = arg;

	check_ret(pthread_mutex_lock(&s->hot_m), 0);
	check_ret(pthread_mutex_unlock(&s->hot_m), 0);
	check_ret(pthread_rwlock_rdlock(&s->hot_rw), 0);
	check_ret(pthread_rwlock_unlock(&s->hot_rw), 0);
	pthread_barrier_wait(&s->ready);
	pthread_barrier_wait(&s->go);
	sc_run(s);
	sc_park(s);
}

/* Created before the filter, takes its first lock under it. */
static void *sc_new_thread(void *arg)
{
	struct sc_locks *s = arg;

	pthread_barrier_wait(&s->ready);
	pthread_barrier_wait(&s->go);
	sc_run(s);
	sc_park(s);
}

static void sc_init(struct sc_locks *s)
{
	memset(s, 0, sizeof(*s));
	check_ret(pthread_mutex_init(&s->hot_m, NULL), 0);
	check_ret(pthread_mutex_init(&s->fresh_m, NULL), 0);
	check_ret(pthread_rwlock_init(&s->hot_rw, NULL), 0);
	check_ret(pthread_rwlock_init(&s->fresh_rw, NULL), 0);
	check_ret(pthread_cond_init(&s->c, NULL), 0);
	make_hot_mutex(&s->hot_m);
	make_hot_rwlock(&s->hot_rw);
}

static void sc_results(struct sc_locks *s)
{
	struct timespec past = long_ago;
	int r;

	rec_count("fresh-mutex-count", s->count[0], atomic_load(&s->acq[0]));
	rec_count("hot-mutex-count", s->count[1], atomic_load(&s->acq[1]));
	rec_count("fresh-rwlock-count", s->rwcount[0], atomic_load(&s->rwacq[0]));
	rec_count("hot-rwlock-count", s->rwcount[1], atomic_load(&s->rwacq[1]));
	rec_zero("violations", atomic_load(&s->violations));
	rec_zero("failed-calls", atomic_load(&s->failures));
	/* A condition wait that times out: glibc unlocks and relocks inside. */
	r = pthread_mutex_lock(&s->hot_m);
	rec_result("cond-timedwait-past", r ? r : pthread_cond_timedwait(&s->c, &s->hot_m, &past), ETIMEDOUT);
	rec_result("cond-timedwait-past+unlock", pthread_mutex_unlock(&s->hot_m), 0);
}

/* A process with three threads, two of them new to locking under the filter. */
static int sc_threads_child(void *arg)
{
	struct sc_locks *s = arg;
	pthread_t old_t, new_t;
	int r;

	check_ret(pthread_barrier_init(&s->ready, NULL, 3), 0);
	check_ret(pthread_barrier_init(&s->go, NULL, 3), 0);
	/* This thread's first locks in this process: before the filter. */
	check_ret(pthread_mutex_lock(&s->hot_m), 0);
	check_ret(pthread_mutex_unlock(&s->hot_m), 0);
	check_ret(pthread_rwlock_wrlock(&s->hot_rw), 0);
	check_ret(pthread_rwlock_unlock(&s->hot_rw), 0);
	old_t = xthread(sc_old_thread, s);
	new_t = xthread(sc_new_thread, s);
	(void)old_t;
	(void)new_t;
	pthread_barrier_wait(&s->ready);
	r = install_filter(true);
	rec_result("install-filter", r, 0);
	if (r)
		return 4;
	pthread_barrier_wait(&s->go);
	sc_run(s);
	while (atomic_load(&s->finished) < 2)
		sched_yield();
	sc_results(s);
	return 0;
}

/* A fork child, alone: its first locks are under the filter. */
static int sc_fork_child(void *arg)
{
	struct sc_locks *s = arg;
	int r = install_filter(false);

	rec_result("install-filter", r, 0);
	if (r)
		return 4;
	sc_run(s);
	sc_results(s);
	return 0;
}

static void sc_case(const char *name, int (*fn)(void *), bool handlers)
{
	struct sc_locks s;
	char buf[160];

	snprintf(scope, sizeof(scope), "seccomp/%s", name);
	sc_init(&s);
	shm->nrec = 0;
	atomic_store(&shm->ntrapped, 0);
	in_child("exit", fn, &s, handlers);
	recs_emit();
	trapped_list(buf, sizeof(buf));
	emit_str("trapped", buf, "none");
}

static void part_seccomp(void)
{
#ifndef __x86_64__
	set_scope("seccomp");
	emit_str("skipped", "not x86-64", "not x86-64");
	return;
#endif
	sc_case("threads", sc_threads_child, true);
	sc_case("child-of-fork", sc_fork_child, true);
	sc_case("child-of-_Fork", sc_fork_child, false);
}

/* ---- compat-cond: pthread_cond_*@GLIBC_2.2.5 --------------------------- */

struct cc_waiter {
	pthread_cond_t *c;
	pthread_mutex_t *m;
	int *flag;                       /* the predicate, under m */
	bool timed;
	_Atomic pid_t tid;
	_Atomic int done;
	int ret;
	pthread_t t;
};

static void *cc_waiter_fn(void *arg)
{
	struct cc_waiter *w = arg;
	struct timespec ts = ts_from_now(CLOCK_REALTIME, 60000);
	int r;

	r = pthread_mutex_lock(w->m);
	atomic_store(&w->tid, gettid());
	while (r == 0 && !*w->flag)
		r = w->timed ? compat_cond_timedwait(w->c, w->m, &ts) : compat_cond_wait(w->c, w->m);
	w->ret = r;
	if (pthread_mutex_unlock(w->m) && r == 0)
		w->ret = EPERM;
	atomic_store(&w->done, 1);
	return NULL;
}

static void cc_start(struct cc_waiter *w, pthread_cond_t *c, pthread_mutex_t *m, int *flag, bool timed)
{
	memset(w, 0, sizeof(*w));
	w->c = c;
	w->m = m;
	w->flag = flag;
	w->timed = timed;
	w->t = xthread(cc_waiter_fn, w);
	while (!atomic_load(&w->tid))
		sched_yield();
	wait_asleep(w->tid, &w->done);
}

static int compat_child(void *arg)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c;
	struct cc_waiter w[2];
	struct timespec ts;
	int flag = 0;

	make_hot_mutex(&m);
	memset(&c, 0xa5, sizeof(c));
	emit("init", compat_cond_init(&c, NULL), 0);

	/* One waiter, signalled. */
	cc_start(&w[0], &c, &m, &flag, false);
	check_ret(pthread_mutex_lock(&m), 0);
	flag = 1;
	emit("signal", compat_cond_signal(&c), 0);
	check_ret(pthread_mutex_unlock(&m), 0);
	xjoin(w[0].t);
	emit("wait-signalled", w[0].ret, 0);

	/* Two waiters (one timed), a broadcast. */
	flag = 0;
	cc_start(&w[0], &c, &m, &flag, false);
	cc_start(&w[1], &c, &m, &flag, true);
	check_ret(pthread_mutex_lock(&m), 0);
	flag = 1;
	emit("broadcast", compat_cond_broadcast(&c), 0);
	check_ret(pthread_mutex_unlock(&m), 0);
	xjoin(w[0].t);
	xjoin(w[1].t);
	emit("wait-broadcast", w[0].ret, 0);
	emit("timedwait-broadcast", w[1].ret, 0);

	/* A timed wait that expires: ETIMEDOUT, the mutex held again. */
	check_ret(pthread_mutex_lock(&m), 0);
	ts = ts_from_now(CLOCK_REALTIME, EXPIRE_MS);
	emit("timedwait-expires", compat_cond_timedwait(&c, &m, &ts), ETIMEDOUT);
	emit("timedwait-expires-mutex-held", in_other_thread(OTHER_MUTEX_TRYLOCK, &m, NULL), EBUSY);
	emit("timedwait-expires+unlock", pthread_mutex_unlock(&m), 0);

	/* Nobody waits: a signal and a broadcast are no-ops. */
	emit("signal-no-waiter", compat_cond_signal(&c), 0);
	emit("broadcast-no-waiter", compat_cond_broadcast(&c), 0);
	emit("destroy", compat_cond_destroy(&c), 0);
	return 0;
}

static void part_compat_cond(void)
{
	set_scope("compat-cond");
	if (!compat_cond_available) {
		emit_str("skipped", "no pthread_cond_*@GLIBC_2.2.5 here", "no pthread_cond_*@GLIBC_2.2.5 here");
		return;
	}
	in_child_for("child", compat_child, NULL, true, CHILD_SECONDS_SHORT);
}

/* ---- signals ---------------------------------------------------------- */

/*
 * A single-threaded process (glibc then skips atomic instructions where it
 * may: never in a trylock) and a signal handler that trylocks the lock the
 * main program is trylocking, or unlocking, at that very moment.  Every
 * moment, not a random few: the main call runs single-stepped (the x86
 * trap flag, SIGTRAP after each instruction) and the handler acts at step
 * 1, then, in the next run, at step 2, ... until the call ends before the
 * handler's step comes.  glibc's trylock is one compare-and-swap, so
 * exactly one of the two gets a free lock ("double holders" and "neither
 * held" stay 0) and an unlock is over or not yet begun ("stuck" stays 0).
 */
enum ss_op {
	SS_MUTEX_TRYLOCK,        /* main: trylock a free mutex; handler: trylock */
	SS_MUTEX_TIMEDLOCK,      /* main: timedlock (past) a free mutex; handler: trylock */
	SS_MUTEX_UNLOCK,         /* main: unlock its mutex; handler: trylock */
	SS_RW_TRYWRLOCK,         /* main: trywrlock a free rwlock; handler: trywrlock */
	SS_RW_TRYRDLOCK,         /* main: tryrdlock a free rwlock; handler: trywrlock */
	SS_RW_RDUNLOCK,          /* main: unlock its read lock; handler: trywrlock */
	SS_RW_WRUNLOCK,          /* main: unlock its write lock; handler: tryrdlock */
};

/* Runs stop after this many steps: a call that long is a failure. */
#define SS_MAX_STEPS 5000
/*
 * Run k single-steps k instructions: the cost grows with the square of a
 * call's length, which the sanitizer build multiplies.  There the handler
 * acts at every SS_STRIDE-th step only (its instrumentation also widens
 * every window between a load and a store).
 */
#define SS_STRIDE (ASAN_BUILD ? 3 : 1)

static struct {
	pthread_mutex_t *m;
	pthread_rwlock_t *rw;
	enum ss_op op;
	volatile sig_atomic_t step, target, acted, done;
	volatile int handler_ret;
} ss;

#define X86_TRAP_FLAG 0x100

static void ss_trap(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	int e = errno;

	if (!ss.done && ++ss.step == ss.target) {
		ss.acted = 1;
		switch (ss.op) {
		case SS_MUTEX_TRYLOCK:
		case SS_MUTEX_TIMEDLOCK:
		case SS_MUTEX_UNLOCK:
			ss.handler_ret = pthread_mutex_trylock(ss.m);
			break;
		case SS_RW_TRYWRLOCK:
		case SS_RW_TRYRDLOCK:
		case SS_RW_RDUNLOCK:
			ss.handler_ret = pthread_rwlock_trywrlock(ss.rw);
			break;
		case SS_RW_WRUNLOCK:
			ss.handler_ret = pthread_rwlock_tryrdlock(ss.rw);
			break;
		}
	}
	if (ss.done || ss.acted)
		uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)X86_TRAP_FLAG;
	errno = e;
}

static inline __attribute__((always_inline)) void trap_flag_on(void)
{
	__asm__ volatile("pushfq\n\torq $0x100, (%%rsp)\n\tpopfq" ::: "memory", "cc");
}

static int ss_main_op(void)
{
	switch (ss.op) {
	case SS_MUTEX_TRYLOCK: return pthread_mutex_trylock(ss.m);
	case SS_MUTEX_TIMEDLOCK: return pthread_mutex_timedlock(ss.m, &long_ago);
	case SS_MUTEX_UNLOCK: return pthread_mutex_unlock(ss.m);
	case SS_RW_TRYWRLOCK: return pthread_rwlock_trywrlock(ss.rw);
	case SS_RW_TRYRDLOCK: return pthread_rwlock_tryrdlock(ss.rw);
	case SS_RW_RDUNLOCK:
	case SS_RW_WRUNLOCK: return pthread_rwlock_unlock(ss.rw);
	}
	return -1;
}

static int ss_unlock(void)
{
	return ss.m ? pthread_mutex_unlock(ss.m) : pthread_rwlock_unlock(ss.rw);
}

static int ss_trylock(void)
{
	return ss.m ? pthread_mutex_trylock(ss.m) : pthread_rwlock_trywrlock(ss.rw);
}

static void ss_case(const char *name, enum ss_op op, pthread_mutex_t *m, pthread_rwlock_t *rw)
{
	bool unlocking = op == SS_MUTEX_UNLOCK || op == SS_RW_RDUNLOCK || op == SS_RW_WRUNLOCK;
	long doubles = 0, neither = 0, stuck = 0, bad = 0, inside = 0;
	char full[96];
	int target;

	ss.m = m;
	ss.rw = rw;
	ss.op = op;
	for (target = 1; target <= SS_MAX_STEPS; target += SS_STRIDE) {
		int r, hr;
		bool main_got, handler_got;

		if (op == SS_MUTEX_UNLOCK)
			check_ret(pthread_mutex_lock(m), 0);
		else if (op == SS_RW_RDUNLOCK)
			check_ret(pthread_rwlock_rdlock(rw), 0);
		else if (op == SS_RW_WRUNLOCK)
			check_ret(pthread_rwlock_wrlock(rw), 0);
		ss.step = 0;
		ss.target = target;
		ss.acted = 0;
		ss.done = 0;
		ss.handler_ret = -1;
		trap_flag_on();
		r = ss_main_op();
		ss.done = 1;
		/* The next instruction traps once more: the flag goes. */
		atomic_signal_fence(memory_order_seq_cst);
		hr = ss.handler_ret;
		if (!ss.acted) {
			/* The call ended before the handler's step: the last run. */
			if (!unlocking && r == 0 && ss_unlock())
				bad++;
			break;
		}
		handler_got = hr == 0;
		if (hr != 0 && hr != EBUSY)
			bad++;
		if (unlocking) {
			if (r != 0)
				bad++;
			/* The handler's hold, if it got one. */
			if (handler_got && ss_unlock())
				bad++;
		} else {
			main_got = r == 0;
			if (r != 0 && r != EBUSY && r != ETIMEDOUT)
				bad++;
			if (main_got && handler_got)
				doubles++;
			if (!main_got && !handler_got)
				neither++;
			if (main_got && ss_unlock())
				bad++;
			if (handler_got && ss_unlock())
				bad++;
		}
		/* Whoever held it let go: free now. */
		if (ss_trylock() != 0)
			stuck++;
		else if (ss_unlock())
			bad++;
		inside++;
	}
	snprintf(full, sizeof(full), "%s/handler-ran-inside", name);
	emit_yes(full, inside > 0 && target <= SS_MAX_STEPS);
	if (!unlocking) {
		snprintf(full, sizeof(full), "%s/double-holders", name);
		emit_zero(full, doubles);
		snprintf(full, sizeof(full), "%s/neither-held", name);
		emit_zero(full, neither);
	}
	snprintf(full, sizeof(full), "%s/stuck-after", name);
	emit_zero(full, stuck);
	snprintf(full, sizeof(full), "%s/unexpected-results", name);
	emit_zero(full, bad);
}

static void signals_single_threaded(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, normal;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	struct sigaction sa;

	set_scope("signals/single-threaded");
	emit_yes("process-single-threaded", __libc_single_threaded);
#ifndef __x86_64__
	emit_str("skipped", "not x86-64", "not x86-64");
	return;
#endif
	mutex_init_type(&normal, PTHREAD_MUTEX_NORMAL);
	/* First calls (lazy binding, libelide's first look) not single-stepped. */
	for (int i = 0; i < 2; i++) {
		pthread_mutex_t *mm = i ? &normal : &m;

		check_ret(pthread_mutex_trylock(mm), 0);
		check_ret(pthread_mutex_unlock(mm), 0);
		check_ret(pthread_mutex_timedlock(mm, &long_ago), 0);
		check_ret(pthread_mutex_unlock(mm), 0);
	}
	check_ret(pthread_rwlock_trywrlock(&rw), 0);
	check_ret(pthread_rwlock_unlock(&rw), 0);
	check_ret(pthread_rwlock_tryrdlock(&rw), 0);
	check_ret(pthread_rwlock_unlock(&rw), 0);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = ss_trap;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	check(sigaction(SIGTRAP, &sa, NULL) == 0);
	ss_case("mutex-trylock", SS_MUTEX_TRYLOCK, &m, NULL);
	ss_case("mutex-timedlock", SS_MUTEX_TIMEDLOCK, &m, NULL);
	ss_case("mutex-unlock", SS_MUTEX_UNLOCK, &m, NULL);
	ss_case("normal-mutex-trylock", SS_MUTEX_TRYLOCK, &normal, NULL);
	ss_case("normal-mutex-unlock", SS_MUTEX_UNLOCK, &normal, NULL);
	ss_case("rwlock-trywrlock", SS_RW_TRYWRLOCK, NULL, &rw);
	ss_case("rwlock-tryrdlock", SS_RW_TRYRDLOCK, NULL, &rw);
	ss_case("rwlock-rdunlock", SS_RW_RDUNLOCK, NULL, &rw);
	ss_case("rwlock-wrunlock", SS_RW_WRUNLOCK, NULL, &rw);
	signal(SIGTRAP, SIG_DFL);
	emit_yes("still-single-threaded", __libc_single_threaded);
	check_ret(pthread_mutex_destroy(&normal), 0);
}

/* A thread waiting for a lock gets signals; its wait goes on. */
enum ws_op {
	WS_MUTEX,        /* pthread_mutex_lock, the caller holds the mutex */
	WS_RDLOCK,       /* pthread_rwlock_rdlock, the caller holds it for writing */
	WS_WRLOCK,       /* pthread_rwlock_wrlock, the caller holds it for reading */
	WS_COND,         /* pthread_cond_wait until a predicate holds */
	WS_TIMEDLOCK,    /* pthread_mutex_timedlock, a minute ahead */
};

struct ws {
	enum ws_op op;
	pthread_mutex_t *m;
	pthread_rwlock_t *rw;
	pthread_cond_t *c;
	int flag;
	_Atomic pid_t tid;
	_Atomic int done;
	int ret, err;
};

static _Atomic int ws_signals;

static void ws_handler(int sig)
{
	int e = errno;

	atomic_fetch_add(&ws_signals, 1);
	errno = e;
}

static void *ws_thread(void *arg)
{
	struct ws *w = arg;
	struct timespec ts = ts_from_now(CLOCK_REALTIME, 60000);
	int r = 0, e;

	if (w->op == WS_COND)
		check_ret(pthread_mutex_lock(w->m), 0);
	atomic_store(&w->tid, gettid());
	errno = SENTINEL;
	switch (w->op) {
	case WS_MUTEX: r = pthread_mutex_lock(w->m); break;
	case WS_TIMEDLOCK: r = pthread_mutex_timedlock(w->m, &ts); break;
	case WS_RDLOCK: r = pthread_rwlock_rdlock(w->rw); break;
	case WS_WRLOCK: r = pthread_rwlock_wrlock(w->rw); break;
	case WS_COND:
		while (r == 0 && !w->flag)
			r = pthread_cond_wait(w->c, w->m);
		break;
	}
	e = errno;
	w->ret = r;
	w->err = e;
	if (r == 0 || w->op == WS_COND)
		check_ret(w->op == WS_RDLOCK || w->op == WS_WRLOCK ? pthread_rwlock_unlock(w->rw) :
			  pthread_mutex_unlock(w->m), 0);
	atomic_store(&w->done, 1);
	return NULL;
}

static void ws_case(const char *name, enum ws_op op, bool restart, pthread_mutex_t *m, pthread_rwlock_t *rw,
		    pthread_cond_t *c)
{
	struct ws w = { .op = op, .m = m, .rw = rw, .c = c };
	struct sigaction sa;
	char full[64];
	pthread_t t;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = ws_handler;
	sa.sa_flags = restart ? SA_RESTART : 0;
	check(sigaction(SIGUSR2, &sa, NULL) == 0);

	switch (op) {
	case WS_MUTEX:
	case WS_TIMEDLOCK: check_ret(pthread_mutex_lock(m), 0); break;
	case WS_RDLOCK: check_ret(pthread_rwlock_wrlock(rw), 0); break;
	case WS_WRLOCK: check_ret(pthread_rwlock_rdlock(rw), 0); break;
	case WS_COND: break;
	}
	t = xthread(ws_thread, &w);
	while (!atomic_load(&w.tid))
		sched_yield();
	wait_asleep(w.tid, &w.done);
	for (int i = 0; i < 3; i++) {
		int before = atomic_load(&ws_signals);

		check_ret(pthread_kill(t, SIGUSR2), 0);
		while (atomic_load(&ws_signals) == before)
			sched_yield();
		wait_asleep(w.tid, &w.done);
	}
	switch (op) {
	case WS_MUTEX:
	case WS_TIMEDLOCK: check_ret(pthread_mutex_unlock(m), 0); break;
	case WS_RDLOCK:
	case WS_WRLOCK: check_ret(pthread_rwlock_unlock(rw), 0); break;
	case WS_COND:
		check_ret(pthread_mutex_lock(m), 0);
		w.flag = 1;
		check_ret(pthread_cond_signal(c), 0);
		check_ret(pthread_mutex_unlock(m), 0);
		break;
	}
	xjoin(t);
	snprintf(full, sizeof(full), "%s%s", name, restart ? "/sa-restart" : "/no-restart");
	emit(full, w.ret, 0);
	snprintf(full, sizeof(full), "%s%s-errno", name, restart ? "/sa-restart" : "/no-restart");
	emit_errno(full, w.err);
}

static void signals_during_waits(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;

	set_scope("signals/during-wait");
	make_hot_mutex(&m);
	make_hot_rwlock(&rw);
	for (int restart = 0; restart < 2; restart++) {
		ws_case("mutex-lock", WS_MUTEX, restart, &m, NULL, NULL);
		ws_case("mutex-timedlock", WS_TIMEDLOCK, restart, &m, NULL, NULL);
		ws_case("rdlock", WS_RDLOCK, restart, NULL, &rw, NULL);
		ws_case("wrlock", WS_WRLOCK, restart, NULL, &rw, NULL);
		ws_case("cond-wait", WS_COND, restart, &m, NULL, &c);
	}
	signal(SIGUSR2, SIG_IGN);
}

static void part_signals(void)
{
	signals_single_threaded();
	signals_during_waits();
}

/* ---- cancel ----------------------------------------------------------- */

enum cw_how {
	CW_WAIT,         /* pthread_cond_wait */
	CW_TIMEDWAIT,    /* pthread_cond_timedwait, a minute ahead */
	CW_CLOCKWAIT,    /* pthread_cond_clockwait, CLOCK_MONOTONIC, a minute ahead */
	CW_PENDING,      /* pthread_cond_wait entered with the cancel already pending */
};

struct cw {
	enum cw_how how;
	pthread_mutex_t *m;
	pthread_cond_t *c;
	bool errorcheck;
	_Atomic pid_t tid;
	_Atomic int cancelled, done;
	int never;
	int cleanup_ran, cleanup_trylock, cleanup_relock, cleanup_unlock, after;
};

/* A cancelled condition wait holds the mutex again when its cleanup runs. */
static void cw_cleanup(void *arg)
{
	struct cw *w = arg;

	w->cleanup_ran = 1;
	w->cleanup_trylock = pthread_mutex_trylock(w->m);
	if (w->cleanup_trylock == 0)
		(void)pthread_mutex_unlock(w->m); /* was not held: undo, the result shows it */
	if (w->errorcheck)
		w->cleanup_relock = pthread_mutex_timedlock(w->m, &long_ago); /* EDEADLK: ours */
	w->cleanup_unlock = pthread_mutex_unlock(w->m);
	atomic_store(&w->done, 1);
}

/*
 * Cancelled threads unwind past frames whose redzones AddressSanitizer
 * then never unpoisons; its own thread exit writes there and reports a
 * stack-buffer-underflow that is not one.  Their frames get no redzones.
 */
#define NO_REDZONES __attribute__((no_sanitize_address))

NO_REDZONES static void *cw_thread(void *arg)
{
	struct cw *w = arg;
	struct timespec rt = ts_from_now(CLOCK_REALTIME, 60000), mono = ts_from_now(CLOCK_MONOTONIC, 60000);

	check_ret(pthread_mutex_lock(w->m), 0);
	pthread_cleanup_push(cw_cleanup, w);
	atomic_store(&w->tid, gettid());
	if (w->how == CW_PENDING)
		while (!atomic_load(&w->cancelled))
			sched_yield();
	while (!w->never) {
		switch (w->how) {
		case CW_WAIT:
		case CW_PENDING: (void)pthread_cond_wait(w->c, w->m); break;
		case CW_TIMEDWAIT: (void)pthread_cond_timedwait(w->c, w->m, &rt); break;
		case CW_CLOCKWAIT: (void)pthread_cond_clockwait(w->c, w->m, CLOCK_MONOTONIC, &mono); break;
		}
	}
	w->after = 1;
	pthread_cleanup_pop(1);
	return NULL;
}

static void cw_case(const char *name, enum cw_how how, pthread_mutex_t *m, bool errorcheck)
{
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	struct cw w = { .how = how, .m = m, .c = &c, .errorcheck = errorcheck };
	char full[80];
	pthread_t t;
	void *ret;

	t = xthread(cw_thread, &w);
	while (!atomic_load(&w.tid))
		sched_yield();
	if (how != CW_PENDING)
		wait_asleep(w.tid, &w.done);
	check_ret(pthread_cancel(t), 0);
	atomic_store(&w.cancelled, 1);
	ret = xjoin(t);
#define CW_EMIT(what, got, want) do {						\
		snprintf(full, sizeof(full), "%s/%s", name, what);		\
		emit(full, got, want);						\
	} while (0)
	snprintf(full, sizeof(full), "%s/join", name);
	emit_str(full, ret == PTHREAD_CANCELED ? "canceled" : "returned", "canceled");
	snprintf(full, sizeof(full), "%s/cleanup-ran", name);
	emit_yes(full, w.cleanup_ran);
	CW_EMIT("cleanup-trylock", w.cleanup_trylock, EBUSY);
	if (errorcheck)
		CW_EMIT("cleanup-timedlock", w.cleanup_relock, EDEADLK);
	CW_EMIT("cleanup-unlock", w.cleanup_unlock, 0);
	CW_EMIT("mutex-free-after", pthread_mutex_trylock(m), 0);
	CW_EMIT("mutex-free-after+unlock", pthread_mutex_unlock(m), 0);
	CW_EMIT("cond-destroy", pthread_cond_destroy(&c), 0);
#undef CW_EMIT
}

/* Waits that are not cancellation points: the cancel stays pending. */
enum nc_op {
	NC_MUTEX_LOCK,
	NC_MUTEX_TIMEDLOCK,
	NC_RDLOCK,
	NC_WRLOCK,
};

struct nc {
	enum nc_op op;
	pthread_mutex_t *m;
	pthread_rwlock_t *rw;
	_Atomic pid_t tid;
	_Atomic int done;
	int ret, unlock, after;
};

NO_REDZONES static void *nc_thread(void *arg)
{
	struct nc *w = arg;
	struct timespec ts = ts_from_now(CLOCK_REALTIME, 60000);
	bool rw = w->op == NC_RDLOCK || w->op == NC_WRLOCK;

	atomic_store(&w->tid, gettid());
	switch (w->op) {
	case NC_MUTEX_LOCK: w->ret = pthread_mutex_lock(w->m); break;
	case NC_MUTEX_TIMEDLOCK: w->ret = pthread_mutex_timedlock(w->m, &ts); break;
	case NC_RDLOCK: w->ret = pthread_rwlock_rdlock(w->rw); break;
	case NC_WRLOCK: w->ret = pthread_rwlock_wrlock(w->rw); break;
	}
	atomic_store(&w->done, 1);
	if (w->ret == 0)
		w->unlock = rw ? pthread_rwlock_unlock(w->rw) : pthread_mutex_unlock(w->m);
	pthread_testcancel();
	w->after = 1;
	return NULL;
}

static void nc_case(const char *name, enum nc_op op, pthread_mutex_t *m, pthread_rwlock_t *rw)
{
	struct nc w = { .op = op, .m = m, .rw = rw, .unlock = -1 };
	char full[80];
	pthread_t t;
	void *ret;

	switch (op) {
	case NC_MUTEX_LOCK:
	case NC_MUTEX_TIMEDLOCK: check_ret(pthread_mutex_lock(m), 0); break;
	case NC_RDLOCK: check_ret(pthread_rwlock_wrlock(rw), 0); break;
	case NC_WRLOCK: check_ret(pthread_rwlock_rdlock(rw), 0); break;
	}
	t = xthread(nc_thread, &w);
	while (!atomic_load(&w.tid))
		sched_yield();
	wait_asleep(w.tid, &w.done);
	check_ret(pthread_cancel(t), 0);
	/* Cancelled while it waits: the wait goes on. */
	wait_asleep(w.tid, &w.done);
	if (m)
		check_ret(pthread_mutex_unlock(m), 0);
	else
		check_ret(pthread_rwlock_unlock(rw), 0);
	ret = xjoin(t);
	snprintf(full, sizeof(full), "%s-cancel-pending", name);
	emit(full, w.ret, 0);
	snprintf(full, sizeof(full), "%s-cancel-pending+unlock", name);
	emit(full, w.unlock, 0);
	snprintf(full, sizeof(full), "%s-then-testcancel", name);
	emit_str(full, ret == PTHREAD_CANCELED && !w.after ? "canceled" : "returned", "canceled");
}

static void part_cancel(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, hot = PTHREAD_MUTEX_INITIALIZER, ec;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

	set_scope("cancel");
	mutex_init_type(&ec, PTHREAD_MUTEX_ERRORCHECK);
	make_hot_mutex(&hot);
	make_hot_rwlock(&rw);
	cw_case("cond-wait", CW_WAIT, &m, false);
	cw_case("cond-wait-hot", CW_WAIT, &hot, false);
	cw_case("cond-wait-errorcheck", CW_WAIT, &ec, true);
	cw_case("cond-timedwait", CW_TIMEDWAIT, &hot, false);
	cw_case("cond-clockwait", CW_CLOCKWAIT, &hot, false);
	cw_case("cond-wait-cancel-pending", CW_PENDING, &hot, false);
	cw_case("cond-wait-errorcheck-cancel-pending", CW_PENDING, &ec, true);
	nc_case("mutex-lock", NC_MUTEX_LOCK, &hot, NULL);
	nc_case("mutex-timedlock", NC_MUTEX_TIMEDLOCK, &hot, NULL);
	nc_case("rdlock", NC_RDLOCK, NULL, &rw);
	nc_case("wrlock", NC_WRLOCK, NULL, &rw);
	check_ret(pthread_mutex_destroy(&ec), 0);
}

/* ---- direct: glibc's entry points beside the interposed ones ---------- */

typedef int (*mutex_fn)(pthread_mutex_t *);
typedef int (*rwlock_fn)(pthread_rwlock_t *);

static struct {
	mutex_fn lock, trylock, unlock, lock_225;
	rwlock_fn rdlock, wrlock, tryrdlock, trywrlock, unlock_rw;
} libc_fn;

/* The __pthread_* aliases. */
static struct {
	mutex_fn mutex_lock, mutex_trylock, mutex_unlock;
	rwlock_fn rwlock_rdlock, rwlock_wrlock, rwlock_tryrdlock, rwlock_trywrlock, rwlock_unlock;
} alias;

static bool libc_resolve(void)
{
	void *h = dlopen(LIBC_SO, RTLD_NOW | RTLD_NOLOAD);

	if (!h)
		return false;
#if ASAN_BUILD
#define ALIAS(field, name) alias.field = (__typeof__(alias.field))dlvsym(h, name, "GLIBC_2.2.5")
#else
#define ALIAS(field, name) alias.field = ref_##field
#endif
	ALIAS(mutex_lock, "__pthread_mutex_lock");
	ALIAS(mutex_trylock, "__pthread_mutex_trylock");
	ALIAS(mutex_unlock, "__pthread_mutex_unlock");
	ALIAS(rwlock_rdlock, "__pthread_rwlock_rdlock");
	ALIAS(rwlock_wrlock, "__pthread_rwlock_wrlock");
	ALIAS(rwlock_tryrdlock, "__pthread_rwlock_tryrdlock");
	ALIAS(rwlock_trywrlock, "__pthread_rwlock_trywrlock");
	ALIAS(rwlock_unlock, "__pthread_rwlock_unlock");
#undef ALIAS
	/* dlsym on libc's handle: libc's definitions, never an interposer's. */
	libc_fn.lock = (mutex_fn)dlsym(h, "pthread_mutex_lock");
	libc_fn.trylock = (mutex_fn)dlsym(h, "pthread_mutex_trylock");
	libc_fn.unlock = (mutex_fn)dlsym(h, "pthread_mutex_unlock");
	libc_fn.lock_225 = (mutex_fn)dlvsym(h, "pthread_mutex_lock", "GLIBC_2.2.5");
	libc_fn.rdlock = (rwlock_fn)dlsym(h, "pthread_rwlock_rdlock");
	libc_fn.wrlock = (rwlock_fn)dlsym(h, "pthread_rwlock_wrlock");
	libc_fn.tryrdlock = (rwlock_fn)dlsym(h, "pthread_rwlock_tryrdlock");
	libc_fn.trywrlock = (rwlock_fn)dlsym(h, "pthread_rwlock_trywrlock");
	libc_fn.unlock_rw = (rwlock_fn)dlsym(h, "pthread_rwlock_unlock");
	dlclose(h);
	return libc_fn.lock && libc_fn.trylock && libc_fn.unlock && libc_fn.lock_225 && libc_fn.rdlock &&
	       libc_fn.wrlock && libc_fn.tryrdlock && libc_fn.trywrlock && libc_fn.unlock_rw && alias.mutex_lock &&
	       alias.mutex_trylock && alias.mutex_unlock && alias.rwlock_rdlock && alias.rwlock_wrlock &&
	       alias.rwlock_tryrdlock && alias.rwlock_trywrlock && alias.rwlock_unlock;
}

#define DIRECT_ITERS 3000L

struct direct {
	pthread_mutex_t m;
	pthread_rwlock_t rw;
	pthread_cond_t c;
	long count, rwcount;
	_Atomic long acq, rwacq, violations, failures;
	_Atomic int inside, rwinside, readers;
};

struct direct_arg {
	struct direct *d;
	int path;
};

static void direct_mutex_section(struct direct *d, long *acq)
{
	enter(&d->inside, &d->violations);
	d->count++;
	(*acq)++;
	leave(&d->inside);
}

/* Path 0: interposed; 1: libc's handle (and its 2.2.5 version); 2: the
 * __pthread_ aliases; 3: interposed, a condition wait inside (glibc
 * unlocks and relocks by itself). */
static void *direct_mutex_fn(void *arg)
{
	struct direct_arg *a = arg;
	struct direct *d = a->d;
	long acq = 0;

	for (long i = 0; i < DIRECT_ITERS; i++) {
		bool try = (i & 7) == 5;
		int r = 0, u = 0;

		switch (a->path) {
		case 0:
			r = try ? pthread_mutex_trylock(&d->m) : pthread_mutex_lock(&d->m);
			if (r == 0) {
				direct_mutex_section(d, &acq);
				u = pthread_mutex_unlock(&d->m);
			}
			break;
		case 1:
			r = try ? libc_fn.trylock(&d->m) : (i & 1) ? libc_fn.lock_225(&d->m) : libc_fn.lock(&d->m);
			if (r == 0) {
				direct_mutex_section(d, &acq);
				u = libc_fn.unlock(&d->m);
			}
			break;
		case 2:
			r = try ? alias.mutex_trylock(&d->m) : alias.mutex_lock(&d->m);
			if (r == 0) {
				direct_mutex_section(d, &acq);
				u = alias.mutex_unlock(&d->m);
			}
			break;
		default:
			r = (i & 1) ? alias.mutex_lock(&d->m) : pthread_mutex_lock(&d->m);
			if (r == 0) {
				int w;

				direct_mutex_section(d, &acq);
				w = pthread_cond_timedwait(&d->c, &d->m, &long_ago);
				if (w != ETIMEDOUT)
					atomic_fetch_add(&d->failures, 1);
				direct_mutex_section(d, &acq);
				u = (i & 1) ? alias.mutex_unlock(&d->m) : pthread_mutex_unlock(&d->m);
			}
			break;
		}
		if ((r != 0 && !(try && r == EBUSY)) || u != 0)
			atomic_fetch_add(&d->failures, 1);
	}
	atomic_fetch_add(&d->acq, acq);
	return NULL;
}

static void *direct_rwlock_fn(void *arg)
{
	struct direct_arg *a = arg;
	struct direct *d = a->d;
	long acq = 0;

	for (long i = 0; i < DIRECT_ITERS; i++) {
		bool write = (i & 3) == 0, try = (i & 7) == 6;
		int r, u;

		switch (a->path) {
		case 0:
			r = write ? pthread_rwlock_wrlock(&d->rw) : pthread_rwlock_rdlock(&d->rw);
			break;
		case 1:
			r = write ? libc_fn.wrlock(&d->rw) : libc_fn.rdlock(&d->rw);
			break;
		case 2:
			if (try)
				r = write ? alias.rwlock_trywrlock(&d->rw) : alias.rwlock_tryrdlock(&d->rw);
			else
				r = write ? alias.rwlock_wrlock(&d->rw) : alias.rwlock_rdlock(&d->rw);
			break;
		default:
			if (try)
				r = write ? libc_fn.trywrlock(&d->rw) : libc_fn.tryrdlock(&d->rw);
			else
				r = write ? pthread_rwlock_trywrlock(&d->rw) : pthread_rwlock_tryrdlock(&d->rw);
			try = true;
			break;
		}
		if (r == EBUSY && try)
			continue;
		if (r != 0) {
			atomic_fetch_add(&d->failures, 1);
			continue;
		}
		if (write) {
			enter(&d->rwinside, &d->violations);
			if (atomic_load_explicit(&d->readers, memory_order_relaxed))
				atomic_fetch_add(&d->violations, 1);
			d->rwcount++;
			acq++;
			leave(&d->rwinside);
		} else {
			atomic_fetch_add_explicit(&d->readers, 1, memory_order_relaxed);
			if (atomic_load_explicit(&d->rwinside, memory_order_relaxed))
				atomic_fetch_add(&d->violations, 1);
			atomic_fetch_sub_explicit(&d->readers, 1, memory_order_relaxed);
		}
		switch (a->path) {
		case 0: u = pthread_rwlock_unlock(&d->rw); break;
		case 1: u = libc_fn.unlock_rw(&d->rw); break;
		case 2: u = alias.rwlock_unlock(&d->rw); break;
		default: u = (i & 1) ? alias.rwlock_unlock(&d->rw) : pthread_rwlock_unlock(&d->rw); break;
		}
		if (u)
			atomic_fetch_add(&d->failures, 1);
	}
	atomic_fetch_add(&d->rwacq, acq);
	return NULL;
}

static void direct_run(const char *name, struct direct *d, void *(*fn)(void *), bool rw)
{
	struct direct_arg a[4];
	pthread_t t[4];
	char full[64];

	for (int i = 0; i < 4; i++) {
		a[i] = (struct direct_arg){ .d = d, .path = i };
		t[i] = xthread(fn, &a[i]);
	}
	for (int i = 0; i < 4; i++)
		xjoin(t[i]);
	snprintf(full, sizeof(full), "%s-count", name);
	if (rw)
		emit_count(full, d->rwcount, atomic_load(&d->rwacq));
	else
		emit_count(full, d->count, atomic_load(&d->acq));
	snprintf(full, sizeof(full), "%s-violations", name);
	emit_zero(full, atomic_load(&d->violations));
	snprintf(full, sizeof(full), "%s-failed-calls", name);
	emit_zero(full, atomic_load(&d->failures));
}

static void part_direct(void)
{
	static const struct { const char *name; int kind; } rwkinds[] = {
		{ "rwlock", PTHREAD_RWLOCK_PREFER_READER_NP },
		{ "rwlock-prefer-writer", PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP },
	};
	struct direct *d = xmalloc(sizeof(*d));

	set_scope("direct");
	emit_yes("libc-symbols", libc_resolve());
	emit_yes("libc-dlsym-is-__pthread_mutex_lock", libc_fn.lock == alias.mutex_lock);
	if (!libc_fn.lock)
		return;

	/* Cold: the first acquisitions of each path race each other. */
	check_ret(pthread_mutex_init(&d->m, NULL), 0);
	check_ret(pthread_cond_init(&d->c, NULL), 0);
	direct_run("mutex-cold", d, direct_mutex_fn, false);
	/* Hot: libelide tracks it (and elides, or aborts, where it may). */
	d->count = 0;
	atomic_store(&d->acq, 0);
	make_hot_mutex(&d->m);
	direct_run("mutex-hot", d, direct_mutex_fn, false);
	emit("mutex-destroy", pthread_mutex_destroy(&d->m), 0);
	emit("cond-destroy", pthread_cond_destroy(&d->c), 0);

	for (size_t k = 0; k < sizeof(rwkinds) / sizeof(rwkinds[0]); k++) {
		char full[64];

		memset(d, 0, sizeof(*d));
		rwlock_init_kind(&d->rw, rwkinds[k].kind);
		snprintf(full, sizeof(full), "%s-cold", rwkinds[k].name);
		direct_run(full, d, direct_rwlock_fn, true);
		make_hot_rwlock(&d->rw);
		d->rwcount = 0;
		atomic_store(&d->rwacq, 0);
		snprintf(full, sizeof(full), "%s-hot", rwkinds[k].name);
		direct_run(full, d, direct_rwlock_fn, true);
		snprintf(full, sizeof(full), "%s-destroy", rwkinds[k].name);
		emit(full, pthread_rwlock_destroy(&d->rw), 0);
	}
	free(d);
}

/* ---- timed: waits that expire; reader overflow; writer preference ----- */

enum tw_op {
	TW_MUTEX_TIMED,
	TW_MUTEX_CLOCK,
	TW_RD_TIMED,
	TW_RD_CLOCK,
	TW_WR_TIMED,
	TW_WR_CLOCK,
	TW_COND_TIMED,
	TW_COND_CLOCK,
};

/* One wait EXPIRE_MS ahead on `clock` (CLOCK_REALTIME for the timed*
 * calls), errno checked too; a success is undone. */
static void tw_case(const char *name, enum tw_op op, clockid_t clock, pthread_mutex_t *m, pthread_rwlock_t *rw,
		    pthread_cond_t *c, int want)
{
	struct timespec ts = ts_from_now(clock, EXPIRE_MS);
	char full[80];
	int r = -1, e, u = 0;

	errno = SENTINEL;
	switch (op) {
	case TW_MUTEX_TIMED: r = pthread_mutex_timedlock(m, &ts); break;
	case TW_MUTEX_CLOCK: r = pthread_mutex_clocklock(m, clock, &ts); break;
	case TW_RD_TIMED: r = pthread_rwlock_timedrdlock(rw, &ts); break;
	case TW_RD_CLOCK: r = pthread_rwlock_clockrdlock(rw, clock, &ts); break;
	case TW_WR_TIMED: r = pthread_rwlock_timedwrlock(rw, &ts); break;
	case TW_WR_CLOCK: r = pthread_rwlock_clockwrlock(rw, clock, &ts); break;
	case TW_COND_TIMED: r = pthread_cond_timedwait(c, m, &ts); break;
	case TW_COND_CLOCK: r = pthread_cond_clockwait(c, m, clock, &ts); break;
	}
	e = errno;
	if (r == 0 && op < TW_COND_TIMED)
		u = op <= TW_MUTEX_CLOCK ? pthread_mutex_unlock(m) : pthread_rwlock_unlock(rw);
	emit(name, r, want);
	if (r == 0 && op < TW_COND_TIMED) {
		snprintf(full, sizeof(full), "%s+unlock", name);
		emit(full, u, 0);
	}
	snprintf(full, sizeof(full), "%s-errno", name);
	emit_errno(full, e);
}

/* A writer that waits for readers to leave. */
struct ww {
	pthread_rwlock_t *rw;
	_Atomic pid_t tid;
	_Atomic int done;
	int ret, unlock;
};

static void *ww_thread(void *arg)
{
	struct ww *w = arg;

	atomic_store(&w->tid, gettid());
	w->ret = pthread_rwlock_wrlock(w->rw);
	atomic_store(&w->done, 1);
	if (w->ret == 0)
		w->unlock = pthread_rwlock_unlock(w->rw);
	return NULL;
}

/* A reader holds the lock, a writer waits: may another reader come in? */
static void writer_waits(const char *name, int kind, int want)
{
	pthread_rwlock_t rw;
	struct ww w = { .rw = &rw };
	char full[80];
	pthread_t t;

	rwlock_init_kind(&rw, kind);
	make_hot_rwlock(&rw);
	check_ret(pthread_rwlock_rdlock(&rw), 0);
	t = xthread(ww_thread, &w);
	while (!atomic_load(&w.tid))
		sched_yield();
	wait_asleep(w.tid, &w.done);
	snprintf(full, sizeof(full), "%s/tryrdlock-while-writer-waits", name);
	emit(full, in_other_thread(OTHER_RWLOCK_TRYRDLOCK, NULL, &rw), want);
	snprintf(full, sizeof(full), "%s/trywrlock-while-writer-waits", name);
	emit(full, in_other_thread(OTHER_RWLOCK_TRYWRLOCK, NULL, &rw), EBUSY);
	check_ret(pthread_rwlock_unlock(&rw), 0);
	xjoin(t);
	snprintf(full, sizeof(full), "%s/writer", name);
	emit(full, w.ret, 0);
	snprintf(full, sizeof(full), "%s/writer+unlock", name);
	emit(full, w.unlock, 0);
	check_ret(pthread_rwlock_destroy(&rw), 0);
}

/*
 * glibc counts readers in __readers from bit 3 and refuses one that would
 * reach bit 31 (EAGAIN).  2^28 real readers would take seconds: the count
 * is set to what that many would have left, two short of the limit, in
 * a read phase with no writer.
 */
#define READER_SHIFT 3
#define READERS_MAX ((1u << (31 - READER_SHIFT)) - 1)

static void reader_overflow(const char *name, int kind)
{
	pthread_rwlock_t rw;
	char full[80];

	rwlock_init_kind(&rw, kind);
	make_hot_rwlock(&rw);
#define RO_EMIT(what, got, want) do {						\
		snprintf(full, sizeof(full), "%s/%s", name, what);		\
		emit(full, got, want);						\
	} while (0)
	__atomic_store_n(&rw.__data.__readers, (READERS_MAX - 1) << READER_SHIFT, __ATOMIC_RELAXED);
	RO_EMIT("rdlock-last-reader", pthread_rwlock_rdlock(&rw), 0);
	RO_EMIT("rdlock-one-too-many", pthread_rwlock_rdlock(&rw), EAGAIN);
	RO_EMIT("tryrdlock-one-too-many", pthread_rwlock_tryrdlock(&rw), EAGAIN);
	RO_EMIT("timedrdlock-one-too-many", pthread_rwlock_timedrdlock(&rw, &long_ago), EAGAIN);
	RO_EMIT("clockrdlock-one-too-many", pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, &long_ago), EAGAIN);
	RO_EMIT("tryrdlock-one-too-many-other-thread", in_other_thread(OTHER_RWLOCK_TRYRDLOCK, NULL, &rw), EAGAIN);
	RO_EMIT("trywrlock-full", pthread_rwlock_trywrlock(&rw), EBUSY);
	RO_EMIT("last-reader-unlock", pthread_rwlock_unlock(&rw), 0);
	RO_EMIT("tryrdlock-again", pthread_rwlock_tryrdlock(&rw), 0);
	RO_EMIT("tryrdlock-again+unlock", pthread_rwlock_unlock(&rw), 0);
#undef RO_EMIT
	/* The readers that never were leave. */
	__atomic_store_n(&rw.__data.__readers, 0, __ATOMIC_RELAXED);
	snprintf(full, sizeof(full), "%s/wrlock-after", name);
	emit(full, pthread_rwlock_trywrlock(&rw), 0);
	snprintf(full, sizeof(full), "%s/wrlock-after+unlock", name);
	emit(full, pthread_rwlock_unlock(&rw), 0);
	check_ret(pthread_rwlock_destroy(&rw), 0);
}

static void part_timed(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	struct holder h;

	set_scope("timed");
	make_hot_mutex(&m);
	make_hot_rwlock(&rw);

	hold(&h, HOLD_MUTEX, &m, NULL);
	tw_case("mutex-timedlock", TW_MUTEX_TIMED, CLOCK_REALTIME, &m, NULL, NULL, ETIMEDOUT);
	tw_case("mutex-clocklock-monotonic", TW_MUTEX_CLOCK, CLOCK_MONOTONIC, &m, NULL, NULL, ETIMEDOUT);
	tw_case("mutex-clocklock-realtime", TW_MUTEX_CLOCK, CLOCK_REALTIME, &m, NULL, NULL, ETIMEDOUT);
	unhold(&h);

	hold(&h, HOLD_WRITE, NULL, &rw);
	tw_case("writer-held/timedrdlock", TW_RD_TIMED, CLOCK_REALTIME, NULL, &rw, NULL, ETIMEDOUT);
	tw_case("writer-held/clockrdlock-monotonic", TW_RD_CLOCK, CLOCK_MONOTONIC, NULL, &rw, NULL, ETIMEDOUT);
	tw_case("writer-held/clockrdlock-realtime", TW_RD_CLOCK, CLOCK_REALTIME, NULL, &rw, NULL, ETIMEDOUT);
	tw_case("writer-held/timedwrlock", TW_WR_TIMED, CLOCK_REALTIME, NULL, &rw, NULL, ETIMEDOUT);
	tw_case("writer-held/clockwrlock-monotonic", TW_WR_CLOCK, CLOCK_MONOTONIC, NULL, &rw, NULL, ETIMEDOUT);
	unhold(&h);

	hold(&h, HOLD_READ, NULL, &rw);
	tw_case("reader-held/timedwrlock", TW_WR_TIMED, CLOCK_REALTIME, NULL, &rw, NULL, ETIMEDOUT);
	tw_case("reader-held/clockwrlock-realtime", TW_WR_CLOCK, CLOCK_REALTIME, NULL, &rw, NULL, ETIMEDOUT);
	tw_case("reader-held/timedrdlock", TW_RD_TIMED, CLOCK_REALTIME, NULL, &rw, NULL, 0);
	unhold(&h);

	check_ret(pthread_mutex_lock(&m), 0);
	tw_case("cond-timedwait", TW_COND_TIMED, CLOCK_REALTIME, &m, NULL, &c, ETIMEDOUT);
	emit("cond-timedwait-mutex-held", in_other_thread(OTHER_MUTEX_TRYLOCK, &m, NULL), EBUSY);
	tw_case("cond-clockwait-monotonic", TW_COND_CLOCK, CLOCK_MONOTONIC, &m, NULL, &c, ETIMEDOUT);
	emit("cond-clockwait-mutex-held", in_other_thread(OTHER_MUTEX_TRYLOCK, &m, NULL), EBUSY);
	check_ret(pthread_mutex_unlock(&m), 0);

	reader_overflow("reader-overflow", PTHREAD_RWLOCK_PREFER_READER_NP);
	reader_overflow("reader-overflow-prefer-writer", PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);

	writer_waits("prefer-reader", PTHREAD_RWLOCK_PREFER_READER_NP, 0);
	writer_waits("prefer-writer", PTHREAD_RWLOCK_PREFER_WRITER_NP, 0);
	writer_waits("prefer-writer-nonrecursive", PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP, EBUSY);
}

/* ---- destroy: busy locks, a type change at one address, use after ----- */

struct cd_waiter {
	pthread_cond_t *c;
	pthread_mutex_t *m;
	_Atomic pid_t tid;
	_Atomic int done;
	int ret, unlock;
};

static void *cd_waiter_fn(void *arg)
{
	struct cd_waiter *w = arg;
	struct timespec ts;

	check_ret(pthread_mutex_lock(w->m), 0);
	atomic_store(&w->tid, gettid());
	ts = ts_from_now(CLOCK_REALTIME, EXPIRE_MS);
	w->ret = pthread_cond_timedwait(w->c, w->m, &ts);
	atomic_store(&w->done, 1);
	w->unlock = pthread_mutex_unlock(w->m);
	return NULL;
}

struct cd_destroyer {
	pthread_cond_t *c;
	int ret;
};

static void *cd_destroyer_fn(void *arg)
{
	struct cd_destroyer *d = arg;

	d->ret = pthread_cond_destroy(d->c);
	return NULL;
}

/*
 * pthread_cond_destroy while a thread waits: POSIX allows EBUSY; glibc
 * 2.36 returns neither at once nor EBUSY but waits for the waiter to leave
 * (here its wait expires), then 0.
 */
static void cond_destroy_with_waiter(pthread_mutex_t *m)
{
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	struct cd_waiter w = { .c = &c, .m = m };
	struct cd_destroyer d = { .c = &c, .ret = -1 };
	pthread_t wt, dt;

	wt = xthread(cd_waiter_fn, &w);
	while (!atomic_load(&w.tid))
		sched_yield();
	wait_asleep(w.tid, &w.done);
	dt = xthread(cd_destroyer_fn, &d);
	xjoin(dt);
	xjoin(wt);
	emit("cond-destroy-while-waiting", d.ret, 0);
	emit("cond-destroy-while-waiting/waiter", w.ret, ETIMEDOUT);
	emit("cond-destroy-while-waiting/waiter+unlock", w.unlock, 0);
}

static void mutex_destroy_busy(const char *name, pthread_mutex_t *m)
{
	struct holder h;
	char full[80];

#define DB_EMIT(what, got, want) do {						\
		snprintf(full, sizeof(full), "%s/%s", name, what);		\
		emit(full, got, want);						\
	} while (0)
	check_ret(pthread_mutex_lock(m), 0);
	DB_EMIT("destroy-locked-by-self", pthread_mutex_destroy(m), EBUSY);
	DB_EMIT("unlock-after-ebusy", pthread_mutex_unlock(m), 0);
	hold(&h, HOLD_MUTEX, m, NULL);
	DB_EMIT("destroy-locked-by-other", pthread_mutex_destroy(m), EBUSY);
	DB_EMIT("trylock-after-ebusy", pthread_mutex_trylock(m), EBUSY);
	unhold(&h);
	DB_EMIT("lock-after", pthread_mutex_lock(m), 0);
	DB_EMIT("lock-after+unlock", pthread_mutex_unlock(m), 0);
#undef DB_EMIT
}

/*
 * One address, destroyed and initialised again as another type each time,
 * hot before each destroy: whatever libelide remembers of the address
 * must not outlive pthread_mutex_destroy.
 */
static void type_change(void)
{
	pthread_mutex_t *m = xmalloc(sizeof(*m));
	pthread_mutex_t rec = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

	check_ret(pthread_mutex_init(m, NULL), 0);
	make_hot_mutex(m);
	emit("default/lock", pthread_mutex_lock(m), 0);
	emit("default/trylock-held", pthread_mutex_trylock(m), EBUSY);
	emit("default/unlock", pthread_mutex_unlock(m), 0);
	emit("default/destroy", pthread_mutex_destroy(m), 0);

	mutex_init_type(m, PTHREAD_MUTEX_RECURSIVE);
	emit("recursive/lock", pthread_mutex_lock(m), 0);
	emit("recursive/lock-again", pthread_mutex_trylock(m), 0);
	emit("recursive/timedlock-again", pthread_mutex_timedlock(m, &long_ago), 0);
	emit("recursive/other-thread-trylock", in_other_thread(OTHER_MUTEX_TRYLOCK, m, NULL), EBUSY);
	emit("recursive/unlock-1", pthread_mutex_unlock(m), 0);
	emit("recursive/unlock-2", pthread_mutex_unlock(m), 0);
	emit("recursive/unlock-3", pthread_mutex_unlock(m), 0);
	emit("recursive/unlock-unlocked", pthread_mutex_unlock(m), EPERM);
	hammer_lock(m, NULL, 2, 2, HOT_ITERS);
	emit("recursive/destroy", pthread_mutex_destroy(m), 0);

	mutex_init_type(m, PTHREAD_MUTEX_ERRORCHECK);
	emit("errorcheck/lock", pthread_mutex_lock(m), 0);
	emit("errorcheck/relock", pthread_mutex_timedlock(m, &long_ago), EDEADLK);
	emit("errorcheck/trylock-held", pthread_mutex_trylock(m), EBUSY);
	emit("errorcheck/other-thread-unlock", in_other_thread(OTHER_MUTEX_UNLOCK, m, NULL), EPERM);
	emit("errorcheck/unlock", pthread_mutex_unlock(m), 0);
	emit("errorcheck/unlock-unlocked", pthread_mutex_unlock(m), EPERM);
	make_hot_mutex(m);
	emit("errorcheck/destroy", pthread_mutex_destroy(m), 0);

	/* A recursive one by assignment of the static initialiser, no init call. */
	memcpy(m, &rec, sizeof(rec));
	emit("recursive-initializer/lock", pthread_mutex_lock(m), 0);
	emit("recursive-initializer/lock-again", pthread_mutex_lock(m), 0);
	emit("recursive-initializer/unlock-1", pthread_mutex_unlock(m), 0);
	emit("recursive-initializer/unlock-2", pthread_mutex_unlock(m), 0);
	emit("recursive-initializer/destroy", pthread_mutex_destroy(m), 0);

	check_ret(pthread_mutex_init(m, NULL), 0);
	emit("default-again/lock", pthread_mutex_lock(m), 0);
	emit("default-again/trylock-held", pthread_mutex_trylock(m), EBUSY);
	emit("default-again/unlock", pthread_mutex_unlock(m), 0);
	make_hot_mutex(m);
	emit("default-again/destroy", pthread_mutex_destroy(m), 0);
	free(m);
}

/* rwlock kinds at one address: the writer-preferring one must prefer writers. */
static void rwlock_kind_change(void)
{
	pthread_rwlock_t *rw = xmalloc(sizeof(*rw));
	struct ww w = { .rw = rw };
	pthread_t t;

	check_ret(pthread_rwlock_init(rw, NULL), 0);
	make_hot_rwlock(rw);
	emit("rwlock-default/destroy", pthread_rwlock_destroy(rw), 0);
	rwlock_init_kind(rw, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	check_ret(pthread_rwlock_rdlock(rw), 0);
	t = xthread(ww_thread, &w);
	while (!atomic_load(&w.tid))
		sched_yield();
	wait_asleep(w.tid, &w.done);
	emit("rwlock-prefer-writer/tryrdlock-while-writer-waits", in_other_thread(OTHER_RWLOCK_TRYRDLOCK, NULL, rw),
	     EBUSY);
	check_ret(pthread_rwlock_unlock(rw), 0);
	xjoin(t);
	emit("rwlock-prefer-writer/writer", w.ret, 0);
	make_hot_rwlock(rw);
	emit("rwlock-prefer-writer/destroy", pthread_rwlock_destroy(rw), 0);
	free(rw);
}

/* What glibc answers for a lock used after pthread_*_destroy (undefined
 * by POSIX): a destroyed mutex has an invalid type, EINVAL. */
static void use_after_destroy(bool hot)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	const char *p = hot ? "hot" : "cold";
	char full[80];

	if (hot) {
		make_hot_mutex(&m);
		make_hot_rwlock(&rw);
	}
#define UD_EMIT(what, got, want) do {						\
		snprintf(full, sizeof(full), "after-destroy-%s/%s", p, what);	\
		emit(full, got, want);						\
	} while (0)
	UD_EMIT("mutex-destroy", pthread_mutex_destroy(&m), 0);
	UD_EMIT("mutex-lock", pthread_mutex_lock(&m), EINVAL);
	UD_EMIT("mutex-trylock", pthread_mutex_trylock(&m), EINVAL);
	UD_EMIT("mutex-timedlock", pthread_mutex_timedlock(&m, &long_ago), EINVAL);
	UD_EMIT("mutex-clocklock", pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &long_ago), EINVAL);
	UD_EMIT("mutex-unlock", pthread_mutex_unlock(&m), EINVAL);
	UD_EMIT("mutex-destroy-again", pthread_mutex_destroy(&m), 0);
	UD_EMIT("mutex-other-thread-trylock", in_other_thread(OTHER_MUTEX_TRYLOCK, &m, NULL), EINVAL);
	UD_EMIT("rwlock-destroy", pthread_rwlock_destroy(&rw), 0);
	UD_EMIT("rwlock-rdlock", pthread_rwlock_rdlock(&rw), 0);
	UD_EMIT("rwlock-rdlock+unlock", pthread_rwlock_unlock(&rw), 0);
	UD_EMIT("rwlock-wrlock", pthread_rwlock_wrlock(&rw), 0);
	UD_EMIT("rwlock-wrlock+unlock", pthread_rwlock_unlock(&rw), 0);
	UD_EMIT("rwlock-destroy-again", pthread_rwlock_destroy(&rw), 0);
#undef UD_EMIT
}

static void part_destroy(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, hot = PTHREAD_MUTEX_INITIALIZER;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

	set_scope("destroy");
	make_hot_mutex(&hot);
	cond_destroy_with_waiter(&hot);
	mutex_destroy_busy("mutex-cold", &m);
	mutex_destroy_busy("mutex-hot", &hot);

	/* glibc's rwlock destroy checks nothing. */
	make_hot_rwlock(&rw);
	check_ret(pthread_rwlock_wrlock(&rw), 0);
	emit("rwlock-destroy-write-locked", pthread_rwlock_destroy(&rw), 0);
	emit("rwlock-destroy-write-locked+unlock", pthread_rwlock_unlock(&rw), 0);
	check_ret(pthread_rwlock_init(&rw, NULL), 0);
	check_ret(pthread_rwlock_rdlock(&rw), 0);
	emit("rwlock-destroy-read-locked", pthread_rwlock_destroy(&rw), 0);
	emit("rwlock-destroy-read-locked+unlock", pthread_rwlock_unlock(&rw), 0);

	type_change();
	rwlock_kind_change();
	use_after_destroy(false);
	use_after_destroy(true);
}

/* ---- errno: left alone by every call ---------------------------------- */

/* Calls `expr` with errno at SENTINEL; prints its result and errno's fate. */
#define EC(name, want, expr) do {						\
		int r_, e_;							\
		errno = SENTINEL;						\
		r_ = (expr);							\
		e_ = errno;							\
		emit(name, r_, want);						\
		emit_errno(name "-errno", e_);					\
	} while (0)

/* A thread that holds a lock until the caller sleeps waiting for it. */
struct eh {
	pthread_mutex_t *m;
	pthread_rwlock_t *rw;
	bool read;
	pid_t waiter;
	_Atomic int go;          /* set just before the call that waits */
	pthread_barrier_t held;
};

static void *eh_thread(void *arg)
{
	struct eh *h = arg;

	if (h->m)
		check_ret(pthread_mutex_lock(h->m), 0);
	else if (h->read)
		check_ret(pthread_rwlock_rdlock(h->rw), 0);
	else
		check_ret(pthread_rwlock_wrlock(h->rw), 0);
	pthread_barrier_wait(&h->held);
	while (!atomic_load(&h->go))
		sched_yield();
	wait_asleep(h->waiter, NULL);
	if (h->m)
		check_ret(pthread_mutex_unlock(h->m), 0);
	else
		check_ret(pthread_rwlock_unlock(h->rw), 0);
	return NULL;
}

/* Start a holder of m (or rw); once h->go is set, it lets go as soon as
 * this thread sleeps. */
static pthread_t eh_start(struct eh *h, pthread_mutex_t *m, pthread_rwlock_t *rw, bool read)
{
	pthread_t t;

	h->m = m;
	h->rw = rw;
	h->read = read;
	h->waiter = gettid();
	atomic_store(&h->go, 0);
	check_ret(pthread_barrier_init(&h->held, NULL, 2), 0);
	t = xthread(eh_thread, h);
	pthread_barrier_wait(&h->held);
	check_ret(pthread_barrier_destroy(&h->held), 0);
	return t;
}

struct ec_cond {
	pthread_mutex_t *m;
	pthread_cond_t c;
	int flag;
};

static void *ec_signal_later(void *arg)
{
	struct ec_cond *ec = arg;

	/* The waiter holds the mutex until it waits. */
	check_ret(pthread_mutex_lock(ec->m), 0);
	ec->flag = 1;
	check_ret(pthread_cond_signal(&ec->c), 0);
	check_ret(pthread_mutex_unlock(ec->m), 0);
	return NULL;
}

/* A condition wait until the other thread signals, errno checked across. */
static void ec_cond_wait(const char *name, struct ec_cond *ec, bool timed)
{
	struct timespec ahead = ts_from_now(CLOCK_REALTIME, 60000);
	char full[80];
	pthread_t t;
	int r = 0, e;

	ec->flag = 0;
	t = xthread(ec_signal_later, ec);
	errno = SENTINEL;
	while (r == 0 && !ec->flag)
		r = timed ? pthread_cond_timedwait(&ec->c, ec->m, &ahead) : pthread_cond_wait(&ec->c, ec->m);
	e = errno;
	check_ret(pthread_mutex_unlock(ec->m), 0);
	xjoin(t);
	emit(name, r, 0);
	snprintf(full, sizeof(full), "%s-errno", name);
	emit_errno(full, e);
	check_ret(pthread_mutex_lock(ec->m), 0);
}

static void errno_mutex(const char *kind_name, int type, bool hot)
{
	pthread_mutexattr_t a;
	pthread_mutex_t m;
	struct timespec ahead;
	struct eh h;
	pthread_t t;

	snprintf(scope, sizeof(scope), "errno/%s-%s", kind_name, hot ? "hot" : "cold");
	check_ret(pthread_mutexattr_init(&a), 0);
	EC("mutexattr-settype", 0, pthread_mutexattr_settype(&a, type));
	EC("mutexattr-settype-bad", EINVAL, pthread_mutexattr_settype(&a, 12345));
	EC("mutex-init", 0, pthread_mutex_init(&m, &a));
	EC("mutexattr-destroy", 0, pthread_mutexattr_destroy(&a));
	if (hot)
		make_hot_mutex(&m);
	EC("lock", 0, pthread_mutex_lock(&m));
	EC("trylock-held", type == PTHREAD_MUTEX_RECURSIVE ? 0 : EBUSY, pthread_mutex_trylock(&m));
	if (type == PTHREAD_MUTEX_RECURSIVE)
		EC("unlock-recursion", 0, pthread_mutex_unlock(&m));
	EC("timedlock-held-past", type == PTHREAD_MUTEX_ERRORCHECK ? EDEADLK :
	   type == PTHREAD_MUTEX_RECURSIVE ? 0 : ETIMEDOUT, pthread_mutex_timedlock(&m, &long_ago));
	if (type == PTHREAD_MUTEX_RECURSIVE)
		EC("unlock-recursion-2", 0, pthread_mutex_unlock(&m));
	EC("unlock", 0, pthread_mutex_unlock(&m));
	EC("trylock", 0, pthread_mutex_trylock(&m));
	EC("trylock+unlock", 0, pthread_mutex_unlock(&m));
	if (type == PTHREAD_MUTEX_RECURSIVE || type == PTHREAD_MUTEX_ERRORCHECK)
		EC("unlock-unlocked", EPERM, pthread_mutex_unlock(&m));
	ahead = ts_from_now(CLOCK_REALTIME, 60000);
	EC("timedlock-free", 0, pthread_mutex_timedlock(&m, &ahead));
	EC("timedlock-free+unlock", 0, pthread_mutex_unlock(&m));
	ahead = ts_from_now(CLOCK_MONOTONIC, 60000);
	EC("clocklock-free", 0, pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &ahead));
	EC("clocklock-free+unlock", 0, pthread_mutex_unlock(&m));
	EC("clocklock-bad-clock", EINVAL, pthread_mutex_clocklock(&m, (clockid_t)12345, &ahead));
	ahead.tv_nsec = 1000000000L;
	EC("timedlock-bad-time", 0, pthread_mutex_timedlock(&m, &ahead));
	EC("timedlock-bad-time+unlock", 0, pthread_mutex_unlock(&m));

	t = eh_start(&h, &m, NULL, false);
	atomic_store(&h.go, 1);
	EC("lock-contended", 0, pthread_mutex_lock(&m));
	xjoin(t);
	EC("lock-contended+unlock", 0, pthread_mutex_unlock(&m));
	t = eh_start(&h, &m, NULL, false);
	ahead = ts_from_now(CLOCK_REALTIME, 60000);
	atomic_store(&h.go, 1);
	EC("timedlock-contended", 0, pthread_mutex_timedlock(&m, &ahead));
	xjoin(t);
	EC("timedlock-contended+unlock", 0, pthread_mutex_unlock(&m));
	t = eh_start(&h, &m, NULL, false);
	EC("trylock-other-holds", EBUSY, pthread_mutex_trylock(&m));
	ahead = ts_from_now(CLOCK_MONOTONIC, EXPIRE_MS_SHORT);
	EC("clocklock-expires", ETIMEDOUT, pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &ahead));
	atomic_store(&h.go, 1);
	EC("lock-contended-2", 0, pthread_mutex_lock(&m));
	xjoin(t);
	EC("lock-contended-2+unlock", 0, pthread_mutex_unlock(&m));

	if (type == PTHREAD_MUTEX_NORMAL || type == PTHREAD_MUTEX_DEFAULT) {
		struct ec_cond ec = { .m = &m, .c = PTHREAD_COND_INITIALIZER };

		check_ret(pthread_mutex_lock(&m), 0);
		EC("cond-timedwait-past", ETIMEDOUT, pthread_cond_timedwait(&ec.c, &m, &long_ago));
		EC("cond-clockwait-past", ETIMEDOUT, pthread_cond_clockwait(&ec.c, &m, CLOCK_MONOTONIC, &long_ago));
		EC("cond-clockwait-bad-clock", EINVAL,
		   pthread_cond_clockwait(&ec.c, &m, (clockid_t)12345, &long_ago));
		ec_cond_wait("cond-wait-signalled", &ec, false);
		ec_cond_wait("cond-timedwait-signalled", &ec, true);
		check_ret(pthread_mutex_unlock(&m), 0);
		check_ret(pthread_cond_destroy(&ec.c), 0);
	}
	EC("destroy", 0, pthread_mutex_destroy(&m));
}

static void errno_rwlock(const char *kind_name, int kind, bool hot)
{
	pthread_rwlockattr_t a;
	pthread_rwlock_t rw;
	struct timespec ahead;
	struct eh h;
	pthread_t t;

	snprintf(scope, sizeof(scope), "errno/%s-%s", kind_name, hot ? "hot" : "cold");
	check_ret(pthread_rwlockattr_init(&a), 0);
	check_ret(pthread_rwlockattr_setkind_np(&a, kind), 0);
	EC("rwlock-init", 0, pthread_rwlock_init(&rw, &a));
	check_ret(pthread_rwlockattr_destroy(&a), 0);
	if (hot)
		make_hot_rwlock(&rw);
	EC("rdlock", 0, pthread_rwlock_rdlock(&rw));
	EC("tryrdlock-read-held", 0, pthread_rwlock_tryrdlock(&rw));
	EC("trywrlock-read-held", EBUSY, pthread_rwlock_trywrlock(&rw));
	EC("timedwrlock-read-held-past", ETIMEDOUT, pthread_rwlock_timedwrlock(&rw, &long_ago));
	EC("unlock-read-1", 0, pthread_rwlock_unlock(&rw));
	EC("unlock-read-2", 0, pthread_rwlock_unlock(&rw));
	EC("wrlock", 0, pthread_rwlock_wrlock(&rw));
	EC("wrlock-again", EDEADLK, pthread_rwlock_wrlock(&rw));
	EC("rdlock-write-held", EDEADLK, pthread_rwlock_rdlock(&rw));
	EC("tryrdlock-write-held", EBUSY, pthread_rwlock_tryrdlock(&rw));
	EC("unlock-write", 0, pthread_rwlock_unlock(&rw));
	EC("trywrlock", 0, pthread_rwlock_trywrlock(&rw));
	EC("trywrlock+unlock", 0, pthread_rwlock_unlock(&rw));
	ahead = ts_from_now(CLOCK_REALTIME, 60000);
	EC("timedrdlock-free", 0, pthread_rwlock_timedrdlock(&rw, &ahead));
	EC("timedrdlock-free+unlock", 0, pthread_rwlock_unlock(&rw));
	EC("timedwrlock-free", 0, pthread_rwlock_timedwrlock(&rw, &ahead));
	EC("timedwrlock-free+unlock", 0, pthread_rwlock_unlock(&rw));
	ahead = ts_from_now(CLOCK_MONOTONIC, 60000);
	EC("clockrdlock-free", 0, pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, &ahead));
	EC("clockrdlock-free+unlock", 0, pthread_rwlock_unlock(&rw));
	EC("clockwrlock-free", 0, pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, &ahead));
	EC("clockwrlock-free+unlock", 0, pthread_rwlock_unlock(&rw));
	EC("clockrdlock-bad-clock", EINVAL, pthread_rwlock_clockrdlock(&rw, (clockid_t)12345, &ahead));

	t = eh_start(&h, NULL, &rw, false);
	atomic_store(&h.go, 1);
	EC("rdlock-contended", 0, pthread_rwlock_rdlock(&rw));
	xjoin(t);
	EC("rdlock-contended+unlock", 0, pthread_rwlock_unlock(&rw));
	t = eh_start(&h, NULL, &rw, true);
	atomic_store(&h.go, 1);
	EC("wrlock-contended", 0, pthread_rwlock_wrlock(&rw));
	xjoin(t);
	EC("wrlock-contended+unlock", 0, pthread_rwlock_unlock(&rw));
	t = eh_start(&h, NULL, &rw, false);
	ahead = ts_from_now(CLOCK_MONOTONIC, EXPIRE_MS_SHORT);
	EC("clockrdlock-expires", ETIMEDOUT, pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, &ahead));
	ahead = ts_from_now(CLOCK_REALTIME, 60000);
	atomic_store(&h.go, 1);
	EC("timedwrlock-contended", 0, pthread_rwlock_timedwrlock(&rw, &ahead));
	xjoin(t);
	EC("timedwrlock-contended+unlock", 0, pthread_rwlock_unlock(&rw));
	EC("destroy", 0, pthread_rwlock_destroy(&rw));
}

/* fork() (with libelide's handlers) and _Fork(): errno in parent and child. */
static void errno_fork(const char *name, bool handlers)
{
	char full[80];
	int status, e;
	pid_t pid;

	fflush(stdout);
	errno = SENTINEL;
	pid = handlers ? fork() : _Fork();
	e = errno;
	if (pid == 0)
		_exit(e == SENTINEL ? 0 : 1);
	if (pid < 0)
		fail("fork: %m");
	if (waitpid(pid, &status, 0) != pid)
		fail("waitpid: %m");
	snprintf(full, sizeof(full), "%s-child-errno", name);
	emit_status(full, status);
	snprintf(full, sizeof(full), "%s-parent-errno", name);
	emit_errno(full, e);
}

static void part_errno(void)
{
	static const struct { const char *name; int type; } types[] = {
		{ "mutex-default", PTHREAD_MUTEX_DEFAULT },
		{ "mutex-recursive", PTHREAD_MUTEX_RECURSIVE },
		{ "mutex-errorcheck", PTHREAD_MUTEX_ERRORCHECK },
		{ "mutex-adaptive", PTHREAD_MUTEX_ADAPTIVE_NP },
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		errno_mutex(types[i].name, types[i].type, false);
		errno_mutex(types[i].name, types[i].type, true);
	}
	errno_rwlock("rwlock", PTHREAD_RWLOCK_PREFER_READER_NP, false);
	errno_rwlock("rwlock", PTHREAD_RWLOCK_PREFER_READER_NP, true);
	errno_rwlock("rwlock-prefer-writer", PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP, true);

	set_scope("errno");
	errno_fork("fork", true);
	errno_fork("_Fork", false);
}

/* ---- fork: while threads contend and sleep; process-shared stress ----- */

struct fk {
	pthread_mutex_t busy;            /* two threads contend on it at the fork */
	pthread_mutex_t forker_holds;    /* the forking thread holds it; a thread waits */
	pthread_mutex_t other_holds;     /* another thread holds it */
	pthread_mutex_t free_hot;        /* free at the fork, hot */
	pthread_rwlock_t rw_free;        /* free at the fork, hot */
	pthread_rwlock_t rw_read;        /* read-held by another thread */
	long busy_count;
	_Atomic long busy_acq, violations;
	_Atomic int busy_inside, stop, release, holding;
	_Atomic pid_t waiter_tid;
	_Atomic int waiter_done;
};

static void *fk_contend(void *arg)
{
	struct fk *f = arg;
	long acq = 0;

	while (!atomic_load(&f->stop)) {
		check_ret(pthread_mutex_lock(&f->busy), 0);
		enter(&f->busy_inside, &f->violations);
		f->busy_count++;
		acq++;
		leave(&f->busy_inside);
		check_ret(pthread_mutex_unlock(&f->busy), 0);
	}
	atomic_fetch_add(&f->busy_acq, acq);
	return NULL;
}

static void *fk_waiter(void *arg)
{
	struct fk *f = arg;

	atomic_store(&f->waiter_tid, gettid());
	check_ret(pthread_mutex_lock(&f->forker_holds), 0);
	atomic_store(&f->waiter_done, 1);
	check_ret(pthread_mutex_unlock(&f->forker_holds), 0);
	return NULL;
}

static void *fk_holder(void *arg)
{
	struct fk *f = arg;

	check_ret(pthread_mutex_lock(&f->other_holds), 0);
	check_ret(pthread_rwlock_rdlock(&f->rw_read), 0);
	atomic_store(&f->holding, 1);
	while (!atomic_load(&f->release))
		sched_yield();
	check_ret(pthread_rwlock_unlock(&f->rw_read), 0);
	check_ret(pthread_mutex_unlock(&f->other_holds), 0);
	return NULL;
}

/* The child: one thread, locks in whatever state the fork left them. */
static int fk_child(void *arg)
{
	struct fk *f = arg;
	int r;

	r = pthread_mutex_lock(&f->free_hot);
	rec_result("free-hot-lock", r, 0);
	rec_result("free-hot-owner-is-self", r == 0 && f->free_hot.__data.__owner == gettid() ? 0 : EINVAL, 0);
	rec_result("free-hot-trylock-held", pthread_mutex_trylock(&f->free_hot), EBUSY);
	rec_result("free-hot-unlock", pthread_mutex_unlock(&f->free_hot), 0);
	rec_result("free-hot-trylock", pthread_mutex_trylock(&f->free_hot), 0);
	rec_result("free-hot-trylock+unlock", pthread_mutex_unlock(&f->free_hot), 0);
	rec_result("forker-holds-unlock", pthread_mutex_unlock(&f->forker_holds), 0);
	rec_result("forker-holds-lock", pthread_mutex_lock(&f->forker_holds), 0);
	rec_result("forker-holds-lock+unlock", pthread_mutex_unlock(&f->forker_holds), 0);
	rec_result("other-holds-trylock", pthread_mutex_trylock(&f->other_holds), EBUSY);
	rec_result("other-holds-timedlock-past", pthread_mutex_timedlock(&f->other_holds, &long_ago), ETIMEDOUT);
	rec_result("rw-free-wrlock", pthread_rwlock_wrlock(&f->rw_free), 0);
	rec_result("rw-free-wrlock+unlock", pthread_rwlock_unlock(&f->rw_free), 0);
	rec_result("rw-free-rdlock", pthread_rwlock_rdlock(&f->rw_free), 0);
	rec_result("rw-free-rdlock+unlock", pthread_rwlock_unlock(&f->rw_free), 0);
	rec_result("rw-read-held-tryrdlock", pthread_rwlock_tryrdlock(&f->rw_read), 0);
	rec_result("rw-read-held-tryrdlock+unlock", pthread_rwlock_unlock(&f->rw_read), 0);
	rec_result("rw-read-held-trywrlock", pthread_rwlock_trywrlock(&f->rw_read), EBUSY);
	return 0;
}

static void fork_while_busy(const char *name, bool handlers)
{
	struct fk *f = xmalloc(sizeof(*f));
	pthread_t contenders[2], waiter, holder;

	snprintf(scope, sizeof(scope), "fork/%s", name);
	check_ret(pthread_mutex_init(&f->busy, NULL), 0);
	check_ret(pthread_mutex_init(&f->forker_holds, NULL), 0);
	check_ret(pthread_mutex_init(&f->other_holds, NULL), 0);
	check_ret(pthread_mutex_init(&f->free_hot, NULL), 0);
	check_ret(pthread_rwlock_init(&f->rw_free, NULL), 0);
	check_ret(pthread_rwlock_init(&f->rw_read, NULL), 0);
	make_hot_mutex(&f->free_hot);
	make_hot_mutex(&f->forker_holds);
	make_hot_rwlock(&f->rw_free);

	check_ret(pthread_mutex_lock(&f->forker_holds), 0);
	holder = xthread(fk_holder, f);
	waiter = xthread(fk_waiter, f);
	for (int i = 0; i < 2; i++)
		contenders[i] = xthread(fk_contend, f);
	while (!atomic_load(&f->holding) || !atomic_load(&f->waiter_tid))
		sched_yield();
	wait_asleep(atomic_load(&f->waiter_tid), &f->waiter_done);

	shm->nrec = 0;
	in_child("child", fk_child, f, handlers);
	recs_emit();

	atomic_store(&f->stop, 1);
	for (int i = 0; i < 2; i++)
		xjoin(contenders[i]);
	emit("forker-holds-unlock", pthread_mutex_unlock(&f->forker_holds), 0);
	xjoin(waiter);
	atomic_store(&f->release, 1);
	xjoin(holder);
	emit_count("busy-count", f->busy_count, atomic_load(&f->busy_acq));
	emit_zero("busy-violations", atomic_load(&f->violations));
	emit("busy-destroy", pthread_mutex_destroy(&f->busy), 0);
	emit("forker-holds-destroy", pthread_mutex_destroy(&f->forker_holds), 0);
	emit("other-holds-destroy", pthread_mutex_destroy(&f->other_holds), 0);
	emit("free-hot-destroy", pthread_mutex_destroy(&f->free_hot), 0);
	free(f);
}

#define PSHARED_ITERS 2000L

static void *pshared_fn(void *arg)
{
	for (long i = 0; i < PSHARED_ITERS; i++) {
		if (pthread_mutex_lock(&shm->pm)) {
			atomic_fetch_add(&shm->pfailures, 1);
			continue;
		}
		enter(&shm->pm_inside, &shm->pviolations);
		shm->pm_count++;
		leave(&shm->pm_inside);
		if (pthread_mutex_unlock(&shm->pm))
			atomic_fetch_add(&shm->pfailures, 1);

		if ((i & 3) == 0) {
			if (pthread_rwlock_wrlock(&shm->prw)) {
				atomic_fetch_add(&shm->pfailures, 1);
				continue;
			}
			enter(&shm->prw_inside, &shm->pviolations);
			if (atomic_load_explicit(&shm->prw_readers, memory_order_relaxed))
				atomic_fetch_add(&shm->pviolations, 1);
			shm->prw_count++;
			leave(&shm->prw_inside);
		} else {
			if (pthread_rwlock_rdlock(&shm->prw)) {
				atomic_fetch_add(&shm->pfailures, 1);
				continue;
			}
			atomic_fetch_add_explicit(&shm->prw_readers, 1, memory_order_relaxed);
			if (atomic_load_explicit(&shm->prw_inside, memory_order_relaxed))
				atomic_fetch_add(&shm->pviolations, 1);
			atomic_fetch_sub_explicit(&shm->prw_readers, 1, memory_order_relaxed);
		}
		if (pthread_rwlock_unlock(&shm->prw))
			atomic_fetch_add(&shm->pfailures, 1);
	}
	return NULL;
}

static void pshared_two_threads(void)
{
	pthread_t t[2];

	for (int i = 0; i < 2; i++)
		t[i] = xthread(pshared_fn, NULL);
	for (int i = 0; i < 2; i++)
		xjoin(t[i]);
}

static int pshared_child(void *arg)
{
	pshared_two_threads();
	return 0;
}

/* Two processes, two threads each, on process-shared locks in MAP_SHARED memory. */
static void pshared_stress(void)
{
	pthread_mutexattr_t ma;
	pthread_rwlockattr_t ra;
	int status;
	pid_t pid;

	set_scope("fork/pshared");
	check_ret(pthread_mutexattr_init(&ma), 0);
	check_ret(pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED), 0);
	check_ret(pthread_mutex_init(&shm->pm, &ma), 0);
	check_ret(pthread_mutexattr_destroy(&ma), 0);
	check_ret(pthread_rwlockattr_init(&ra), 0);
	check_ret(pthread_rwlockattr_setpshared(&ra, PTHREAD_PROCESS_SHARED), 0);
	check_ret(pthread_rwlock_init(&shm->prw, &ra), 0);
	check_ret(pthread_rwlockattr_destroy(&ra), 0);

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		fail("fork: %m");
	if (pid == 0) {
		signal(SIGALRM, SIG_DFL);
		alarm(CHILD_SECONDS);
		_exit(pshared_child(NULL));
	}
	pshared_two_threads();
	if (waitpid(pid, &status, 0) != pid)
		fail("waitpid: %m");
	emit_status("other-process", status);
	emit_count("mutex-count", shm->pm_count, 4 * PSHARED_ITERS);
	emit_count("rwlock-count", shm->prw_count, 4 * ((PSHARED_ITERS + 3) / 4));
	emit_zero("violations", atomic_load(&shm->pviolations));
	emit_zero("failed-calls", atomic_load(&shm->pfailures));
	emit("mutex-destroy", pthread_mutex_destroy(&shm->pm), 0);
	emit("rwlock-destroy", pthread_rwlock_destroy(&shm->prw), 0);
}

static void part_fork(void)
{
	fork_while_busy("fork", true);
	fork_while_busy("_Fork", false);
	pshared_stress();
}

/* ---- main ------------------------------------------------------------- */

static const struct {
	const char *name;
	void (*fn)(void);
} parts[] = {
	{ "tsc", part_tsc },
	{ "seccomp", part_seccomp },
	{ "compat-cond", part_compat_cond },
	{ "signals", part_signals },
	{ "cancel", part_cancel },
	{ "direct", part_direct },
	{ "timed", part_timed },
	{ "destroy", part_destroy },
	{ "errno", part_errno },
	{ "fork", part_fork },
};

int main(int argc, char **argv)
{
	const char *part = argc == 2 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	watchdog(WATCHDOG_SECONDS);
	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED)
		fail("mmap: %m");

	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		if (strcmp(part, parts[i].name) != 0)
			continue;
		parts[i].fn();
		fflush(stdout);
		if (mismatches) {
			fprintf(stderr, "conformance-edge: %s: %d result(s) differ from POSIX/glibc 2.36\n", part,
				mismatches);
			return 1;
		}
		return 0;
	}
	fprintf(stderr, "usage: %s", argv[0]);
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		fprintf(stderr, "%s%s", i ? " | " : " ", parts[i].name);
	fprintf(stderr, "\n");
	return 2;
}
