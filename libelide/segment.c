/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The process's shared-memory segment (segment-format.h): created at
 * start-up in the runtime directory, removed at normal exit.  When it cannot
 * be created, an anonymous mapping of the same layout stands in: statistics
 * stay private (the exit report still works) and the program runs on.
 *
 * A forked child gets no file at fork: it carries on in a private copy (the
 * parent's locks, none of its counts) and makes its file the first time it
 * has something to publish: a lock record of its own, a contended or
 * aborting tracked lock, a sampled count, a name from elide.h.  A child that
 * only execs or exits never makes one, nor does any child with
 * fork_segment=0 (a sandbox forked from a zygote may kill the calls that
 * make one).  Whoever makes a file also removes a
 * few stale ones of its own uid (sweep_stale()): without elided, files of
 * processes that ended without destructors (_exit, SIGKILL) do not pile up.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elide-internal.h"
#include "log.h"
#include "segment-names.h"

/*
 * seg.state.  SEG_CREATING carries, in the bits above SEG_STATE_BITS, how
 * many lock entries the file being made will have pages for: one atomic
 * word, so a thread that sees the state sees the bound with it.
 */
enum seg_state {
	SEG_PRIVATE = 0,   /* the anonymous stand-in, for good (stats=0, no file could be made) */
	SEG_FILE = 1,      /* the process's own file, mapped shared */
	SEG_LAZY = 2,      /* a forked child's private copy; the file comes at first need */
	SEG_CREATING = 3,  /* one thread is making the file (segment_make_lazy()) */
};
#define SEG_STATE_BITS 8
#define SEG_STATE(word) ((word) & ((1u << SEG_STATE_BITS) - 1))

static struct {
	void *base;
	size_t size;
	_Atomic uint32_t state;   /* enum seg_state, and the bound while SEG_CREATING */
	pid_t owner;              /* the pid whose file this is */
	dev_t dev;                /* the segment file's identity, to find it again */
	ino_t ino;
	_Atomic uint32_t reserved; /* lock entries [0, reserved) have their pages */
	_Atomic bool fini;        /* the destructor ran: a file made later goes at once */
	char name[64];
	char path[PATH_MAX];
} seg;

/* Set while one thread applies elided's control block. */
static atomic_flag control_busy = ATOMIC_FLAG_INIT;

/* Entries whose pages are reserved when the segment is created. */
#define SEG_RESERVE_FIRST 64u

static size_t entries_end(uint32_t n)
{
	if (n > elide.nrecs)
		n = elide.nrecs;
	return ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE + (size_t)n * sizeof(struct elide_seg_lock);
}

/* Older kernels (< 5.14) lack it; the value is the kernel's ABI. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/*
 * Give the pages of [from, to) of the mapped segment their memory.  No fd
 * is kept for this (constraint 7: the program may close and reuse any fd
 * number): the kernel populates the shared mapping itself and reports a
 * full tmpfs as an error instead of a SIGBUS on the first touch.  Kernels
 * without MADV_POPULATE_WRITE get the file opened again by name and
 * checked to be ours before it is grown.
 */
static int reserve_range(size_t from, size_t to)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t start = from & ~(page - 1);
	struct stat st;
	int fd, r;

	if (madvise((char *)seg.base + start, to - start, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (errno != EINVAL)
		return -errno;
	fd = open(seg.path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = fstat(fd, &st) < 0 ? -errno : 0;
	if (r == 0 && (st.st_dev != seg.dev || st.st_ino != seg.ino))
		r = -ESTALE; /* not our file any more: leave it alone */
	if (r == 0)
		r = -posix_fallocate(fd, (off_t)start, (off_t)(to - start));
	close(fd);
	return r;
}

/*
 * Make sure entry `idx` has its pages (file-backed segments reserve in
 * doublings).  Called on the slow path that creates a lock record, possibly
 * by several threads at once (reserving twice is harmless).  -EAGAIN while
 * another thread makes a forked child's file and the entry lies beyond what
 * that file will have reserved: the caller does not publish this lock this
 * time.  errno is the program's: kept as it was.
 */
int segment_reserve(uint32_t idx)
{
	uint32_t have, want, state = atomic_load(&seg.state);
	int saved_errno, r;

	if (SEG_STATE(state) == SEG_CREATING)
		return idx < state >> SEG_STATE_BITS ? 0 : -EAGAIN;
	if (state != SEG_FILE)
		return 0; /* private memory: nothing to reserve */
	have = atomic_load_explicit(&seg.reserved, memory_order_acquire);
	if (idx < have)
		return 0;
	/* Growing the file is a system call a seccomp filter may kill. */
	if (elide_sandboxed())
		return -EPERM;
	want = have;
	while (want <= idx)
		want *= 2;
	if (want > elide.nrecs)
		want = elide.nrecs;
	saved_errno = errno;
	r = reserve_range(entries_end(have), entries_end(want));
	errno = saved_errno;
	if (r < 0)
		return r;
	while (have < want && !atomic_compare_exchange_weak_explicit(&seg.reserved, &have, want,
								     memory_order_release, memory_order_acquire))
		;
	return 0;
}

static size_t segment_size(void)
{
	return ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE + (size_t)elide.nrecs * sizeof(struct elide_seg_lock);
}

static int read_all(int fd, char *buf, size_t size)
{
	size_t len = 0;

	while (len < size - 1) {
		ssize_t n = read(fd, buf + len, size - 1 - len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return (int)len;
}

/*
 * Field 22 of /proc/<pid>/stat (pid 0: /proc/self/stat), counted after the
 * ")" that ends comm.  It ends within 512 bytes: pid and comm (15 bytes)
 * take under 30, the state and 19 numbers of at most 21 characters, each
 * with its space, under 430; a number cut off by the buffer's end is
 * refused, not misread.  -ENOENT or -ESRCH: no such
 * process.  A small stack: this runs inside the program's lock calls (a
 * forked child makes its file there) and may run in a signal handler.
 */
static int read_start_time(pid_t pid, uint64_t *ret)
{
	char path[32], buf[512], *p, *end;
	int fd, r;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(pid ? path : "/proc/self/stat", O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	r = read_all(fd, buf, sizeof(buf));
	close(fd);
	if (r < 0)
		return r;
	p = strrchr(buf, ')');
	if (!p)
		return -EBADMSG;
	/* After ")": field 3 (state) ... field 22 (starttime). */
	for (int field = 2; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EBADMSG;
	}
	errno = 0;
	*ret = strtoull(p + 1, &end, 10);
	if (errno)
		return -errno;
	if (end == p + 1 || *end != ' ')
		return -EBADMSG; /* not a number, or cut off by the buffer */
	return 0;
}

static void fill_header(struct elide_seg_header *h, uint64_t start_time)
{
	struct timespec now;
	ssize_t n;

	memcpy(h->magic, ELIDE_SEG_MAGIC, sizeof(h->magic));
	h->version = ELIDE_SEG_VERSION;
	h->header_size = ELIDE_SEG_HEADER_SIZE;
	h->total_size = seg.size;
	h->control_offset = ELIDE_SEG_HEADER_SIZE;
	h->control_size = ELIDE_SEG_CONTROL_SIZE;
	h->locks_offset = ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE;
	h->lock_entry_size = sizeof(struct elide_seg_lock);
	h->lock_capacity = elide.nrecs;
	h->lock_high_water = REC_OVERFLOW + 1;
	h->pid = getpid();
	h->uid = geteuid();
	h->start_time = start_time;
	elide_clock_gettime(CLOCK_REALTIME, &now);
	h->created_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	n = readlink("/proc/self/exe", h->exe, sizeof(h->exe) - 1);
	h->exe[n > 0 ? n : 0] = '\0';
	strncpy(h->comm, program_invocation_short_name, sizeof(h->comm) - 1);
	strncpy(h->lib_version, PACKAGE_VERSION, sizeof(h->lib_version) - 1);
	h->sample = elide.opts.sample;
	/* rec_touch() marks every entry it writes (header.dirty[]). */
	h->features = ELIDE_SEG_FEATURE_DIRTY | ELIDE_SEG_FEATURE_WATCH | ELIDE_SEG_FEATURE_WAIT_TOTAL;
	h->watch_sample = elide.opts.watch_sample;
	/* Valid from the first moment; segment_publish_status() refines them. */
	h->mode = (uint32_t)elide.opts.mode + 1;
	h->elision = ELIDE_SEG_ELISION_OFF;
	strcpy(h->status_reason, "starting");
}

/*
 * Create <dir>/<pid>-<starttime>.seg.new, owner-only, with the pages of its
 * first `reserve` lock entries, and map it.  The caller fills it and then
 * publish_file() renames it into place, so a reader never sees a
 * half-written segment under the real name.  *dfd: the directory, open
 * until the caller closes it.
 */
static int create_file(const char *dir, uint64_t start_time, uint32_t reserve, void **ret, int *dfd_ret)
{
	struct stat st;
	char tmp[80];
	void *p = NULL;
	int dfd, fd, r;

	if (strlen(dir) + sizeof(seg.name) + 2 > sizeof(seg.path))
		return -ENAMETOOLONG;
	snprintf(seg.name, sizeof(seg.name), "%d-%llu%s", (int)getpid(), (unsigned long long)start_time,
		 ELIDE_SEG_SUFFIX);
	snprintf(tmp, sizeof(tmp), "%s.new", seg.name);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		/* Our own pid and start time: an earlier image of this process. */
		unlinkat(dfd, tmp, 0);
		fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		r = -errno;
		close(dfd);
		return r;
	}
	/*
	 * The file has its full size but only the pages of the header, the
	 * control block and the first entries are reserved: a process with few
	 * locks costs /run a few KiB.  segment_reserve() adds more as locks
	 * come; a full tmpfs fails there (the lock then counts in the overflow
	 * entry), never with SIGBUS on a touch.
	 */
	r = ftruncate(fd, (off_t)seg.size) < 0 ? -errno : 0;
	if (r == 0)
		r = -posix_fallocate(fd, 0, (off_t)entries_end(reserve));
	if (r == 0)
		r = fstat(fd, &st) < 0 ? -errno : 0;
	if (r == 0) {
		p = mmap(NULL, seg.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			r = -errno;
	}
	/* The mapping is all we keep: the fd number is the program's again. */
	close(fd);
	if (r < 0) {
		unlinkat(dfd, tmp, 0);
		close(dfd);
		return r;
	}
	seg.dev = st.st_dev;
	seg.ino = st.st_ino;
	atomic_store_explicit(&seg.reserved, reserve < elide.nrecs ? reserve : elide.nrecs, memory_order_relaxed);
	snprintf(seg.path, sizeof(seg.path), "%s/%s", dir, seg.name);
	*ret = p;
	*dfd_ret = dfd;
	return 0;
}

/*
 * Give the filled segment its real name.  A file already there can only be
 * an earlier image of this very process (exec keeps pid and start time): it
 * is replaced when it is a regular file of ours.
 */
static int publish_file(int dfd)
{
	char tmp[80], base[64];
	struct stat st;
	int r = 0;

	snprintf(tmp, sizeof(tmp), "%s.new", seg.name);
	snprintf(base, sizeof(base), "%s", seg.name);
	if (renameat2(dfd, tmp, dfd, seg.name, RENAME_NOREPLACE) < 0) {
		r = -errno;
		if (r == -EEXIST && fstatat(dfd, seg.name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && st.st_uid == geteuid() && unlinkat(dfd, seg.name, 0) == 0)
			r = renameat2(dfd, tmp, dfd, seg.name, RENAME_NOREPLACE) < 0 ? -errno : 0;
	}
	/* The earlier image's file is not ours to replace (it ran as root, we
	 * dropped privileges before exec): publish under a generation. */
	for (unsigned gen = 1; r == -EEXIST && gen <= ELIDE_SEG_MAX_GENERATION; gen++) {
		size_t len = strlen(base) - strlen(ELIDE_SEG_SUFFIX);

		snprintf(seg.name, sizeof(seg.name), "%.*s-%u%s", (int)len, base, gen, ELIDE_SEG_SUFFIX);
		r = renameat2(dfd, tmp, dfd, seg.name, RENAME_NOREPLACE) < 0 ? -errno : 0;
	}
	if (r < 0)
		unlinkat(dfd, tmp, 0);
	else if (strcmp(seg.name, base)) {
		char *slash = strrchr(seg.path, '/');

		if (slash)
			snprintf(slash + 1, sizeof(seg.path) - (size_t)(slash + 1 - seg.path), "%s", seg.name);
	}
	return r;
}

/*
 * Stale segments, removed by whoever makes a segment, so that they do not
 * pile up where no elided runs (elided removes them too, at once, when it
 * does).  Bounded work, whatever the directory holds:
 *   - at most SWEEP_NAMES directory entries are read;
 *   - among the segment names there (and "<name>.new" leftovers of a
 *     creation that died), SWEEP_CHECKS are picked at random (reservoir
 *     sampling: a directory with more live segments than that still gets its
 *     stale ones found, over several creations);
 *   - each is checked with elided's rule: a regular file (never a symlink)
 *     of our own effective uid whose process is gone: no process with the
 *     name's pid, or one with another start time (/proc/<pid>/stat);
 *   - at most SWEEP_REMOVALS are removed.
 * Another uid's files are never touched (and the runtime directory is
 * sticky: the kernel would refuse anyway).  No allocation: the buffers are
 * static, used by one sweep at a time (the others skip theirs).
 */
#define SWEEP_NAMES 512u
#define SWEEP_CHECKS 16u
#define SWEEP_REMOVALS 8u
#define SWEEP_NAME_MAX 64u

static struct {
	char dirents[4096] __attribute__((aligned(8)));
	char names[SWEEP_CHECKS][SWEEP_NAME_MAX];
} sweep;
static atomic_flag sweep_busy = ATOMIC_FLAG_INIT;

/* A segment (or unfinished segment) name of another process: its pid and start time. */
static bool sweep_candidate(const char *name, pid_t self, pid_t *pid, uint64_t *start)
{
	char base[SWEEP_NAME_MAX];
	size_t len = strlen(name);

	if (len >= sizeof(base))
		return false;
	memcpy(base, name, len + 1);
	if (len > 4 && !strcmp(base + len - 4, ".new"))
		base[len - 4] = '\0';
	return seg_parse_name(base, pid, start) == 0 && *pid != self;
}

static bool sweep_is_stale(int dfd, const char *name, uid_t uid)
{
	struct stat st;
	uint64_t start, now;
	pid_t pid;
	int r;

	if (!sweep_candidate(name, 0, &pid, &start))
		return false;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) || st.st_uid != uid)
		return false;
	r = read_start_time(pid, &now);
	if (r == 0)
		return now != start; /* a later process has the pid */
	/* Not in /proc: gone, unless /proc hides it from us (hidepid) and the
	 * kernel still knows the pid. */
	return (r == -ENOENT || r == -ESRCH) && kill(pid, 0) < 0 && errno == ESRCH;
}

static void sweep_stale(int dfd)
{
	pid_t self = getpid(), pid;
	uid_t uid = geteuid();
	unsigned names = 0, candidates = 0, removed = 0;
	struct timespec now;
	uint64_t rng, start;

	if (atomic_flag_test_and_set_explicit(&sweep_busy, memory_order_acquire))
		return;
	elide_clock_gettime(CLOCK_MONOTONIC, &now);
	rng = ((uint64_t)self << 32 ^ (uint64_t)now.tv_nsec ^ (uint64_t)now.tv_sec << 20) | 1;
	if (lseek(dfd, 0, SEEK_SET) < 0)
		goto out;
	while (names < SWEEP_NAMES) {
		ssize_t n = getdents64(dfd, sweep.dirents, sizeof(sweep.dirents));

		if (n <= 0)
			break;
		for (ssize_t off = 0; off < n && names < SWEEP_NAMES; names++) {
			struct dirent64 *d = (void *)(sweep.dirents + off);
			unsigned slot;

			off += d->d_reclen;
			if ((d->d_type != DT_REG && d->d_type != DT_UNKNOWN) ||
			    !sweep_candidate(d->d_name, self, &pid, &start))
				continue;
			/* Reservoir: every candidate ends up checked with the same chance. */
			if (candidates < SWEEP_CHECKS) {
				slot = candidates;
			} else {
				rng ^= rng << 13;
				rng ^= rng >> 7;
				rng ^= rng << 17;
				slot = (unsigned)(rng % (candidates + 1));
			}
			candidates++;
			if (slot < SWEEP_CHECKS) /* shorter than SWEEP_NAME_MAX: a candidate */
				memcpy(sweep.names[slot], d->d_name, strlen(d->d_name) + 1);
		}
	}
	for (unsigned i = 0; i < candidates && i < SWEEP_CHECKS && removed < SWEEP_REMOVALS; i++)
		if (sweep_is_stale(dfd, sweep.names[i], uid) && unlinkat(dfd, sweep.names[i], 0) == 0)
			removed++;
out:
	atomic_flag_clear_explicit(&sweep_busy, memory_order_release);
}

static void use_mapping(void *base)
{
	elide.seg_header = base;
	/* Page-aligned mapping, page-sized header and control block: through
	 * void * so -Wcast-align (clang) accepts the arithmetic. */
	elide.seg_control = (void *)((char *)base + ELIDE_SEG_HEADER_SIZE);
	elide.seg_locks = (void *)((char *)base + ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE);
	elide.control_seen = 0;
}

const char *segment_runtime_dir(void)
{
	const char *dir = secure_getenv("ELIDE_RUNTIME_DIR");

	return dir && *dir ? dir : ELIDE_RUNTIME_DIR_DEFAULT;
}

/* Map a fresh segment; returns the mapping, never NULL (falls back to private). */
static void *segment_create(bool quiet)
{
	uint64_t start_time = 0;
	void *base = NULL;
	int dfd = -1, r;

	seg.size = segment_size();
	seg.path[0] = '\0';
	r = read_start_time(0, &start_time);
	if (r == 0 && !elide.opts.stats)
		r = -ECANCELED; /* stats=0: keep everything private, quietly */
	else if (r == 0)
		r = create_file(segment_runtime_dir(), start_time, SEG_RESERVE_FIRST, &base, &dfd);
	if (r == 0) {
		fill_header(base, start_time);
		r = publish_file(dfd);
		if (r < 0)
			munmap(base, seg.size);
		else
			sweep_stale(dfd);
		close(dfd);
	}
	if (r < 0) {
		if (!quiet && r != -ECANCELED)
			log_full_errno(LOG_NOTICE, r, "statistics off: cannot create a segment in %s", segment_runtime_dir());
		base = mmap(NULL, seg.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (base == MAP_FAILED)
			return NULL;
		fill_header(base, start_time);
	}
	atomic_store_explicit(&seg.state, r < 0 ? SEG_PRIVATE : SEG_FILE, memory_order_release);
	seg.owner = getpid();
	seg.base = base;
	return base;
}

void segment_init(void)
{
	void *base;

	if (!elide.recs)
		return;
	/* Without a runtime directory of its own a user sees one line per
	 * process; the default directory missing means elide is not set up,
	 * which verbose=1 reports. */
	base = segment_create(!elide.opts.verbose && !secure_getenv("ELIDE_RUNTIME_DIR") &&
			      access(ELIDE_RUNTIME_DIR_DEFAULT, F_OK) < 0);
	if (!base) {
		elide.recs = NULL; /* no statistics table at all: pass through */
		return;
	}
	use_mapping(base);
	registry_init_overflow_entry();
}

void segment_publish_status(void)
{
	static char watching[ELIDE_SEG_REASON_MAX];
	struct elide_seg_header *h = elide.seg_header;
	struct timespec now;
	const char *why;

	if (!h)
		return;
	why = !elide.enabled ? elide.disabled_reason :
	      elide.opts.mode == ELIDE_MODE_OFF ? "mode=off (set by elided)" :
	      elide.opts.mode == ELIDE_MODE_WATCH ? "mode=watch" : elide.hw.reason;
	if (why && __atomic_load_n(&elide.path, __ATOMIC_RELAXED) == PATH_OBSERVE) {
		snprintf(watching, sizeof(watching), "watching contended locks; %s", why);
		why = watching;
	}
	__atomic_store_n(&h->elision, elide.enabled && elide.opts.mode != ELIDE_MODE_OFF &&
			 elide.opts.mode != ELIDE_MODE_WATCH ? ELIDE_SEG_ELISION_ON : ELIDE_SEG_ELISION_OFF,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&h->mode, (uint32_t)elide.opts.mode + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->rtm_usable, elide.hw.rtm_usable ? 1u : 0u, __ATOMIC_RELAXED);
	snprintf(h->status_reason, sizeof(h->status_reason), "%s", why ? why : "");
	/* Not where the program disabled the TSC: no system call for this. */
	if (!elide_tsc_usable())
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	__atomic_store_n(&h->publish_ns, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec,
			 __ATOMIC_RELEASE);
}

void segment_fini(void)
{
	uint32_t state = SEG_LAZY;

	/* A forked child that never needed its file: none is made from now on. */
	if (atomic_compare_exchange_strong(&seg.state, &state, SEG_PRIVATE)) {
		__atomic_store_n(&elide.control_seen, 0, __ATOMIC_RELAXED);
		return;
	}
	/* One being made right now is removed by its maker (it sees fini). */
	atomic_store(&seg.fini, true);
	/* Only the process that created the file removes it. */
	if (atomic_load(&seg.state) == SEG_FILE && seg.owner == getpid() && seg.path[0])
		unlink(seg.path);
}

/*
 * A forked child's first need of its own file (the stand-in is live memory
 * that other threads may be writing): make the file, copy the stand-in into
 * it and put the file's mapping in the stand-in's place (mremap), so every
 * pointer into the segment stays valid and no thread ever touches unmapped
 * memory.  One thread makes it (a CAS claims SEG_LAZY); any other, or a
 * signal handler that interrupts the maker, carries on in the stand-in and
 * does not publish this time.  What other threads write between the copy
 * and the mremap (microseconds, once per process) may be lost: some counts,
 * a lock's name or call site; the identity and state of every lock are
 * published again from the private records afterwards.  Never inside a
 * transaction: a system call would abort it.  errno is the program's.
 */
void segment_make_lazy(void)
{
	uint32_t state = SEG_LAZY, high, want;
	struct elide_seg_header *h;
	struct elide_seg_lock *to;
	uint64_t start_time;
	void *base = seg.base, *file = NULL;
	int saved_errno, dfd = -1, r;

	if (elide.hw.rtm_usable && _xtest())
		return;
	if (SEG_STATE(atomic_load_explicit(&seg.state, memory_order_relaxed)) != SEG_LAZY)
		return;
	/* A child that confined itself with seccomp (a zygote's): no file, its
	 * counts stay private, as with fork_segment=0. */
	if (elide_sandboxed()) {
		if (atomic_compare_exchange_strong(&seg.state, &state, SEG_PRIVATE))
			__atomic_store_n(&elide.control_seen, 0, __ATOMIC_RELAXED);
		return;
	}
	/*
	 * Pages for every record handed out so far and SEG_RESERVE_FIRST more:
	 * a record taken while the file is made (by a thread that saw SEG_LAZY
	 * a moment ago, or SEG_CREATING with this bound) gets pages in the file
	 * too; one beyond the bound is not published this time
	 * (segment_reserve()).
	 */
	high = registry_records_end();
	for (want = SEG_RESERVE_FIRST; want < high + SEG_RESERVE_FIRST && want < elide.nrecs; want *= 2)
		;
	if (want > elide.nrecs)
		want = elide.nrecs;
	if (!atomic_compare_exchange_strong(&seg.state, &state, SEG_CREATING | want << SEG_STATE_BITS))
		return;
	saved_errno = errno;

	r = read_start_time(0, &start_time);
	if (r == 0)
		r = create_file(segment_runtime_dir(), start_time, want, &file, &dfd);
	if (r < 0)
		goto fail;
	h = file;
	fill_header(h, start_time);
	/* The stand-in's locks: those with a record now (the others' entries
	 * stay free), the overflow entry always. */
	high = __atomic_load_n(&elide.seg_header->lock_high_water, __ATOMIC_ACQUIRE);
	if (high > want)
		high = want;
	h->lock_high_water = high > REC_OVERFLOW + 1 ? high : REC_OVERFLOW + 1;
	to = (void *)((char *)file + ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE);
	for (uint32_t i = REC_OVERFLOW; i < high; i++) {
		if (i == REC_OVERFLOW || atomic_load_explicit(&elide.recs[i].addr, memory_order_acquire))
			memcpy(&to[i], &elide.seg_locks[i], sizeof(to[i]));
	}
	if (mremap(file, seg.size, seg.size, MREMAP_MAYMOVE | MREMAP_FIXED, base) == MAP_FAILED) {
		r = -errno;
		munmap(file, seg.size);
		goto fail_unlink;
	}
	/* The file is the segment now, at the same address. */
	registry_republish(want);
	segment_publish_status();
	seg.owner = getpid();
	r = publish_file(dfd);
	if (r < 0)
		seg.path[0] = '\0'; /* mapped but nameless: private in effect, nothing to remove */
	__atomic_store_n(&elide.control_seen, 0, __ATOMIC_RELAXED);
	atomic_store(&seg.state, SEG_FILE);
	/* The destructor ran meanwhile (another thread is exiting). */
	if (atomic_load(&seg.fini) && seg.path[0])
		unlink(seg.path);
	else if (r == 0)
		sweep_stale(dfd);
	close(dfd);
	errno = saved_errno;
	return;

fail_unlink:
	{
		char tmp[80];

		snprintf(tmp, sizeof(tmp), "%s.new", seg.name);
		unlinkat(dfd, tmp, 0);
		close(dfd);
	}
fail:
	/* Statistics stay private, as in a process that could not make one at
	 * start; no second try. */
	seg.path[0] = '\0';
	__atomic_store_n(&elide.control_seen, 0, __ATOMIC_RELAXED);
	atomic_store(&seg.state, SEG_PRIVATE);
	errno = saved_errno;
}

/*
 * In a forked child: a private copy of the segment with the parent's locks
 * (same addresses in the copied address space) but none of its counts or
 * decisions, and no file until the child has something to publish
 * (segment_make_lazy()).  Only this thread exists here.
 */
void segment_fork_child(void)
{
	uint32_t state = atomic_load_explicit(&seg.state, memory_order_relaxed);
	struct elide_seg_header *h = elide.seg_header;
	uint32_t high;

	/* Another thread of the parent may have been applying decisions or
	 * sweeping at the fork: it does not exist here, so nobody would clear
	 * its flag. */
	atomic_flag_clear_explicit(&control_busy, memory_order_relaxed);
	atomic_flag_clear_explicit(&sweep_busy, memory_order_relaxed);
	atomic_store_explicit(&seg.fini, false, memory_order_relaxed);
	if (!seg.base)
		return;
	high = h->lock_high_water;
	if (high > elide.nrecs)
		high = elide.nrecs;
	if (state == SEG_FILE || SEG_STATE(state) == SEG_CREATING) {
		/* The parent's file, mapped shared (or about to be): the child's
		 * counts must not land there.  Copy what the child keeps into
		 * private memory. */
		void *old = seg.base;
		void *base = mmap(NULL, seg.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (base == MAP_FAILED)
			return; /* keep counting in the parent's file: wrong numbers, no harm */
		/* Of the header only what the registry and the exit report read:
		 * the file's header is filled when it is made. */
		memcpy((char *)base + entries_end(REC_OVERFLOW), (char *)old + entries_end(REC_OVERFLOW),
		       entries_end(high) - entries_end(REC_OVERFLOW));
		use_mapping(base);
		seg.base = base;
		munmap(old, seg.size);
		h = base;
		h->lock_high_water = high;
	}
	/* A private mapping (the stand-in) is the child's own copy already. */
	for (uint32_t i = REC_OVERFLOW; i < high; i++) {
		struct elide_seg_lock *e = &elide.seg_locks[i];

		memset(e->stats, 0, sizeof(e->stats));
		e->ctl_policy = ELIDE_SEG_CTL_NONE;
		e->ctl_source = ELIDE_SEG_SOURCE_NONE;
	}
	h->pid = getpid();
	h->control_generation_seen = 0;
	seg.path[0] = '\0';
	seg.owner = getpid();
	if (elide.opts.stats && elide.opts.fork_segment) {
		/* The marker sends the next look for decisions to segment_make_lazy(). */
		elide.control_seen = SEG_CONTROL_LAZY;
		atomic_store_explicit(&seg.state, SEG_LAZY, memory_order_relaxed);
	} else {
		elide.control_seen = 0;
		atomic_store_explicit(&seg.state, SEG_PRIVATE, memory_order_relaxed);
	}
}

static bool control_value_ok(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v == 0 || (v >= lo && v <= hi);
}

/*
 * The control block's values that apply to the whole process: copied, not
 * the block itself, whose hints make it 4 KiB (this runs inside the
 * program's lock calls, on whatever stack the program gave that thread).
 */
struct control_values {
	uint32_t mode, retries, contention, skip, skip_max, abort_ratio_ppm;
};

static void control_values_copy(struct control_values *v, const struct elide_seg_control *c)
{
	v->mode = __atomic_load_n(&c->mode, __ATOMIC_RELAXED);
	v->retries = __atomic_load_n(&c->retries, __ATOMIC_RELAXED);
	v->contention = __atomic_load_n(&c->contention, __ATOMIC_RELAXED);
	v->skip = __atomic_load_n(&c->skip, __ATOMIC_RELAXED);
	v->skip_max = __atomic_load_n(&c->skip_max, __ATOMIC_RELAXED);
	v->abort_ratio_ppm = __atomic_load_n(&c->abort_ratio_ppm, __ATOMIC_RELAXED);
}

/*
 * elided changed the control block.  Copy its values under its seqlock,
 * check every one (another process wrote them) and apply what is valid.
 */
void segment_poll_control_slow(void)
{
	struct control_values c;
	uint64_t gen, again;

	/* A forked child's first need of a file (the marker in control_seen
	 * brought us here): no decisions can have come before it exists. */
	if (__atomic_load_n(&elide.control_seen, __ATOMIC_RELAXED) == SEG_CONTROL_LAZY) {
		segment_make_lazy();
		return;
	}
	/* One thread applies; the others carry on with the old decisions. */
	if (atomic_flag_test_and_set_explicit(&control_busy, memory_order_acquire))
		return;
	gen = __atomic_load_n(&elide.seg_control->generation, __ATOMIC_ACQUIRE);
	if ((gen & 1) || gen == elide.control_seen)
		goto out;
	control_values_copy(&c, elide.seg_control);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	again = __atomic_load_n(&elide.seg_control->generation, __ATOMIC_ACQUIRE);
	if (again != gen)
		goto out;
	elide.control_seen = gen;
	__atomic_store_n(&elide.seg_header->control_generation_seen, gen, __ATOMIC_RELEASE);

	if (control_value_ok(c.retries, 1, 65))
		elide.opts.retries = c.retries ? c.retries - 1 : elide.opts.retries;
	if (control_value_ok(c.contention, 1, 65535) && c.contention)
		elide.opts.contention = c.contention;
	if (control_value_ok(c.skip, 1, 1000000) && c.skip)
		elide.opts.skip = c.skip;
	if (control_value_ok(c.skip_max, 1, 100000000) && c.skip_max)
		elide.opts.skip_max = c.skip_max;
	if (control_value_ok(c.abort_ratio_ppm, 1, 1000000) && c.abort_ratio_ppm)
		elide.opts.abort_ratio = c.abort_ratio_ppm / 1e6;
	if (c.mode >= ELIDE_SEG_MODE_ADAPTIVE && c.mode <= ELIDE_SEG_MODE_WATCH) {
		enum elide_mode mode = (enum elide_mode)(c.mode - 1);

		if (mode != elide.opts.mode)
			elide_set_mode(mode);
	} else if (c.mode == ELIDE_SEG_MODE_NONE && elide.opts.mode != elide.env_mode) {
		elide_set_mode(elide.env_mode);
	}
	registry_apply_lock_decisions();
	segment_publish_status();
out:
	atomic_flag_clear_explicit(&control_busy, memory_order_release);
}
