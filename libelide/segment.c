/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The process's shared-memory segment (segment-format.h): created at
 * start-up in the runtime directory, replaced in a forked child, removed at
 * normal exit.  When it cannot be created, an anonymous mapping of the same
 * layout stands in: statistics stay private (the exit report still works)
 * and the program runs on.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elide-internal.h"
#include "log.h"

static struct {
	void *base;
	size_t size;
	bool file_backed;
	pid_t owner;              /* the pid whose file this is */
	int dirfd;                /* open between create_file() and publish_file() */
	dev_t dev;                /* the segment file's identity, to find it again */
	ino_t ino;
	_Atomic uint32_t reserved; /* lock entries [0, reserved) have their pages */
	char name[64];
	char path[PATH_MAX];
} seg = { .dirfd = -1 };

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
 * by several threads at once (reserving twice is harmless).  errno is the
 * program's: kept as it was.
 */
int segment_reserve(uint32_t idx)
{
	uint32_t have = atomic_load_explicit(&seg.reserved, memory_order_acquire);
	uint32_t want;
	int saved_errno, r;

	if (!seg.file_backed || idx < have)
		return 0;
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

/* Field 22 of /proc/self/stat, counted after the ")" that ends comm. */
static int read_start_time(uint64_t *ret)
{
	char buf[1024], *p;
	int fd, r;

	fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
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
	*ret = strtoull(p + 1, NULL, 10);
	return errno ? -errno : 0;
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
	clock_gettime(CLOCK_REALTIME, &now);
	h->created_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	n = readlink("/proc/self/exe", h->exe, sizeof(h->exe) - 1);
	h->exe[n > 0 ? n : 0] = '\0';
	strncpy(h->comm, program_invocation_short_name, sizeof(h->comm) - 1);
	strncpy(h->lib_version, PACKAGE_VERSION, sizeof(h->lib_version) - 1);
	h->sample = elide.opts.sample;
	/* Valid from the first moment; segment_publish_status() refines them. */
	h->mode = (uint32_t)elide.opts.mode + 1;
	h->elision = ELIDE_SEG_ELISION_OFF;
	strcpy(h->status_reason, "starting");
}

/*
 * Create <dir>/<pid>-<starttime>.seg.new, owner-only, and map it.  The
 * caller fills the header and then publish_file() renames it into place, so
 * a reader never sees a half-written segment under the real name.
 */
static int create_file(const char *dir, uint64_t start_time, void **ret)
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
		r = -posix_fallocate(fd, 0, (off_t)entries_end(SEG_RESERVE_FIRST));
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
	seg.dirfd = dfd;
	seg.dev = st.st_dev;
	seg.ino = st.st_ino;
	atomic_store_explicit(&seg.reserved, SEG_RESERVE_FIRST < elide.nrecs ? SEG_RESERVE_FIRST : elide.nrecs,
			      memory_order_relaxed);
	snprintf(seg.path, sizeof(seg.path), "%s/%s", dir, seg.name);
	*ret = p;
	return 0;
}

/*
 * Give the filled segment its real name.  A file already there can only be
 * an earlier image of this very process (exec keeps pid and start time): it
 * is replaced when it is a regular file of ours.
 */
static int publish_file(void)
{
	char tmp[80], base[64];
	struct stat st;
	int r = 0;

	snprintf(tmp, sizeof(tmp), "%s.new", seg.name);
	snprintf(base, sizeof(base), "%s", seg.name);
	if (renameat2(seg.dirfd, tmp, seg.dirfd, seg.name, RENAME_NOREPLACE) < 0) {
		r = -errno;
		if (r == -EEXIST && fstatat(seg.dirfd, seg.name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && st.st_uid == geteuid() && unlinkat(seg.dirfd, seg.name, 0) == 0)
			r = renameat2(seg.dirfd, tmp, seg.dirfd, seg.name, RENAME_NOREPLACE) < 0 ? -errno : 0;
	}
	/* The earlier image's file is not ours to replace (it ran as root, we
	 * dropped privileges before exec): publish under a generation. */
	for (unsigned gen = 1; r == -EEXIST && gen <= ELIDE_SEG_MAX_GENERATION; gen++) {
		size_t len = strlen(base) - strlen(ELIDE_SEG_SUFFIX);

		snprintf(seg.name, sizeof(seg.name), "%.*s-%u%s", (int)len, base, gen, ELIDE_SEG_SUFFIX);
		r = renameat2(seg.dirfd, tmp, seg.dirfd, seg.name, RENAME_NOREPLACE) < 0 ? -errno : 0;
	}
	if (r < 0)
		unlinkat(seg.dirfd, tmp, 0);
	else if (strcmp(seg.name, base)) {
		char *slash = strrchr(seg.path, '/');

		if (slash)
			snprintf(slash + 1, sizeof(seg.path) - (size_t)(slash + 1 - seg.path), "%s", seg.name);
	}
	close(seg.dirfd);
	seg.dirfd = -1;
	return r;
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

static const char *runtime_dir(void)
{
	const char *dir = secure_getenv("ELIDE_RUNTIME_DIR");

	return dir && *dir ? dir : ELIDE_RUNTIME_DIR_DEFAULT;
}

/* Map a fresh segment; returns the mapping, never NULL (falls back to private). */
static void *segment_create(bool quiet)
{
	uint64_t start_time = 0;
	void *base = NULL;
	int r;

	seg.size = segment_size();
	seg.file_backed = false;
	seg.path[0] = '\0';
	r = read_start_time(&start_time);
	if (r == 0 && !elide.opts.stats)
		r = -ECANCELED; /* stats=0: keep everything private, quietly */
	else if (r == 0)
		r = create_file(runtime_dir(), start_time, &base);
	if (r == 0) {
		fill_header(base, start_time);
		r = publish_file();
		if (r < 0)
			munmap(base, seg.size);
	}
	if (r < 0) {
		if (!quiet && r != -ECANCELED)
			log_full_errno(LOG_NOTICE, r, "statistics off: cannot create a segment in %s", runtime_dir());
		base = mmap(NULL, seg.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (base == MAP_FAILED)
			return NULL;
	} else {
		seg.file_backed = true;
	}
	seg.owner = getpid();
	seg.base = base;
	if (!seg.file_backed)
		fill_header(base, start_time);
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
	struct elide_seg_header *h = elide.seg_header;
	struct timespec now;
	const char *why;

	if (!h)
		return;
	why = !elide.enabled ? elide.disabled_reason :
	      elide.opts.mode == ELIDE_MODE_OFF ? "mode=off (set by elided)" : elide.hw.reason;
	__atomic_store_n(&h->elision, elide.enabled && elide.opts.mode != ELIDE_MODE_OFF ? ELIDE_SEG_ELISION_ON : ELIDE_SEG_ELISION_OFF,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&h->mode, (uint32_t)elide.opts.mode + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->rtm_usable, elide.hw.rtm_usable ? 1u : 0u, __ATOMIC_RELAXED);
	strncpy(h->status_reason, why ? why : "", sizeof(h->status_reason) - 1);
	h->status_reason[sizeof(h->status_reason) - 1] = '\0';
	clock_gettime(CLOCK_MONOTONIC, &now);
	__atomic_store_n(&h->publish_ns, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec,
			 __ATOMIC_RELEASE);
}

void segment_fini(void)
{
	/* Only the process that created the file removes it. */
	if (seg.file_backed && seg.owner == getpid())
		unlink(seg.path);
	seg.file_backed = false;
}

/*
 * In a forked child: a segment of its own, with the parent's locks (same
 * addresses in the copied address space) but none of its counts.
 */
void segment_fork_child(void)
{
	struct elide_seg_lock *old_locks = elide.seg_locks;
	void *old_base = seg.base;
	size_t old_size = seg.size;
	uint32_t high;
	void *base;

	/* Another thread of the parent may have been applying decisions at the
	 * fork: it does not exist here, so nobody would clear its flag. */
	atomic_flag_clear_explicit(&control_busy, memory_order_relaxed);
	if (!old_base)
		return;
	high = elide.seg_header->lock_high_water;
	base = segment_create(true);
	if (!base)
		return; /* keep writing the parent's copy-on-write view: harmless */
	use_mapping(base);
	if (high > elide.nrecs)
		high = elide.nrecs;
	for (uint32_t i = REC_OVERFLOW; i < high; i++) {
		struct elide_seg_lock *e = &elide.seg_locks[i];

		if (segment_reserve(i) < 0)
			break; /* the rest count in the overflow entry from now on */
		memcpy(e, &old_locks[i], sizeof(*e));
		memset(e->stats, 0, sizeof(e->stats));
		e->ctl_policy = ELIDE_SEG_CTL_NONE;
		e->ctl_source = ELIDE_SEG_SOURCE_NONE;
	}
	elide.seg_header->lock_high_water = high;
	segment_publish_status();
	munmap(old_base, old_size);
}

static bool control_value_ok(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v == 0 || (v >= lo && v <= hi);
}

/*
 * elided changed the control block.  Copy it under its seqlock, check every
 * value (another process wrote them) and apply what is valid.
 */
void segment_poll_control_slow(void)
{
	struct elide_seg_control c;
	uint64_t gen, again;

	/* One thread applies; the others carry on with the old decisions. */
	if (atomic_flag_test_and_set_explicit(&control_busy, memory_order_acquire))
		return;
	gen = __atomic_load_n(&elide.seg_control->generation, __ATOMIC_ACQUIRE);
	if ((gen & 1) || gen == elide.control_seen)
		goto out;
	memcpy(&c, elide.seg_control, sizeof(c));
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
	if (c.mode >= ELIDE_SEG_MODE_ADAPTIVE && c.mode <= ELIDE_SEG_MODE_OFF) {
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
