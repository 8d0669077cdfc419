/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Reading segments written by other users' processes (segment-reader.h).
 *
 * Everything is copied into private memory and validated there, no size,
 * offset or count is used before it is checked, and every string is
 * checked for its NUL inside its field.  The copy comes from pread, or, for
 * elided's repeated reads, from a read-only shared mapping (struct seg_map):
 * no system call and no file opened per read.  A mapped file its owner
 * truncates would SIGBUS the reader; a SIGBUS handler puts a zero page
 * where the fault was, and the read in progress fails cleanly.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elide.h"
#include "macros.h"
#include "segment-reader.h"

#define SEG_LOCKS_OFFSET (ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE)
/* Entries copied per pread: bounds the scratch buffer, not the table. */
#define SEG_READ_CHUNK 256u
/* The overflow entry's index (libelide's REC_OVERFLOW). */
#define SEG_OVERFLOW_INDEX 1u

_printf_(5, 6)
static int seg_error(char *err, size_t errlen, int r, const char *file, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!err || errlen == 0)
		return r;
	/* For %m: glibc formats it with strerror_r, safe in threads. */
	errno = r < 0 ? -r : 0;
	n = snprintf(err, errlen, "%s: ", file);
	if (n < 0 || (size_t)n >= errlen)
		return r;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return r;
}

/*
 * Read a /proc/<pid> file into buf, NUL-terminated: whole (-EFBIG when it
 * does not fit), or only its first size - 1 bytes.
 */
static int read_proc_file(const char *proc_root, pid_t pid, const char *what, bool whole, char *buf, size_t size)
{
	char path[PATH_MAX];
	size_t len = 0;
	int n;

	if (pid <= 0)
		return -EINVAL;
	n = snprintf(path, sizeof(path), "%s/%d/%s", proc_root ? proc_root : "/proc", (int)pid, what);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;

	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	while (len < size - 1) {
		ssize_t k = read(fd, buf + len, size - 1 - len);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			/* ESRCH: the process exited after open */
			return -errno;
		}
		if (k == 0)
			break;
		len += (size_t)k;
	}
	if (whole && len == size - 1)
		return -EFBIG;
	buf[len] = '\0';
	if (strlen(buf) != len)
		return -EBADMSG;
	return (int)len;
}

int seg_proc_start_time(const char *proc_root, pid_t pid, uint64_t *start_time)
{
	char buf[4096], *p;
	uint64_t v;
	const char *s;
	int r;

	/* Whole: the last ')' must be comm's, not one cut short. */
	r = read_proc_file(proc_root, pid, "stat", true, buf, sizeof(buf));
	if (r < 0)
		return r;
	/* "pid (comm) state ..."; comm may hold spaces and ')' but is followed
	 * by the last ')' of the line. */
	s = seg_parse_u64(buf, &v);
	if (!s || v != (uint64_t)pid || strncmp(s, " (", 2) != 0)
		return -EBADMSG;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -EBADMSG;
	s = p + 2;
	/* Skip fields 3 (state) .. 21 to reach field 22. */
	for (int field = 3; field < 22; field++) {
		s = strchr(s, ' ');
		if (!s)
			return -EBADMSG;
		s++;
	}
	s = seg_parse_u64(s, &v);
	if (!s || (*s != ' ' && *s != '\n'))
		return -EBADMSG;
	*start_time = v;
	return 0;
}

int seg_proc_uid(const char *proc_root, pid_t pid, uid_t *uid)
{
	char buf[4096];
	const char *s;
	uint64_t real, euid;
	int r;

	/* status grows with CPU and node masks, but Uid: is its ninth line:
	 * its beginning is enough, and a cut line fails to parse below. */
	r = read_proc_file(proc_root, pid, "status", false, buf, sizeof(buf));
	if (r < 0)
		return r;
	if (strncmp(buf, "Uid:", 4) == 0) {
		s = buf;
	} else {
		s = strstr(buf, "\nUid:");
		if (!s)
			return -EBADMSG;
		s++;
	}
	/* "Uid:\treal\teffective\tsaved\tfs\n" */
	s += 4;
	if (*s != '\t')
		return -EBADMSG;
	s = seg_parse_u64(s + 1, &real);
	if (!s || *s != '\t')
		return -EBADMSG;
	s = seg_parse_u64(s + 1, &euid);
	if (!s || *s != '\t' || euid > (uid_t)-1 - 1)
		return -EBADMSG;
	*uid = (uid_t)euid;
	return 0;
}

static int pread_all(int fd, void *buf, size_t size, uint64_t offset)
{
	size_t done = 0;

	while (done < size) {
		ssize_t n = pread(fd, (char *)buf + done, size - done, (off_t)(offset + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENODATA; /* shorter than fstat said: truncated meanwhile */
		done += (size_t)n;
	}
	return 0;
}

static int pwrite_all(int fd, const void *buf, size_t size, uint64_t offset)
{
	size_t done = 0;

	while (done < size) {
		ssize_t n = pwrite(fd, (const char *)buf + done, size - done, (off_t)(offset + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

static bool has_nul(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/*
 * Where a read copies from: a file descriptor (pread), or a read-only
 * mapping of the file (map_size bytes), whose name in dirfd is checked to
 * still be the mapped file (dev, ino) when the size is checked.
 */
struct seg_source {
	int fd;
	const uint8_t *map;
	uint8_t *dirty_words;         /* header.dirty[] in a writable mapping, or NULL */
	size_t map_size;
	int dirfd;
	const char *name;
	dev_t dev;
	ino_t ino;
	/* The file as it was mapped, trusted instead of a fresh fstatat
	 * (SEG_READ_MAP_NO_STAT). */
	const struct stat *mapped_st;
};

static int source_copy(const struct seg_source *src, void *buf, size_t size, uint64_t offset)
{
	if (!src->map)
		return pread_all(src->fd, buf, size, offset);
	if (offset > src->map_size || size > src->map_size - offset)
		return -ENODATA;
	memcpy(buf, src->map + offset, size);
	return 0;
}

/* The file's status now; for a mapping, -ESTALE once the name is another file. */
static int source_stat(const struct seg_source *src, struct stat *st)
{
	if (!src->map)
		return fstat(src->fd, st) < 0 ? -errno : 0;
	if (src->mapped_st) {
		*st = *src->mapped_st;
		return 0;
	}
	if (fstatat(src->dirfd, src->name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (st->st_dev != src->dev || st->st_ino != src->ino)
		return -ESTALE;
	return 0;
}

/*
 * Open `name` without following symlinks and without blocking on a FIFO,
 * check it is a regular file whose size a segment can have.
 */
static int seg_open(int dirfd, const char *name, int mode, struct stat *st, char *err, size_t errlen)
{
	int r;

	_cleanup_close_ int fd = openat(dirfd, name, mode | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		if (r == -ELOOP)
			return seg_error(err, errlen, r, name, "is a symlink (not followed)");
		return seg_error(err, errlen, r, name, "cannot open: %m");
	}
	if (fstat(fd, st) < 0)
		return seg_error(err, errlen, -errno, name, "cannot stat: %m");
	if (!S_ISREG(st->st_mode))
		return seg_error(err, errlen, -EBADMSG, name, "not a regular file");
	if ((uint64_t)st->st_size < SEG_LOCKS_OFFSET)
		return seg_error(err, errlen, -EBADMSG, name, "truncated: %llu bytes, a segment has at least %u",
				 (unsigned long long)st->st_size, SEG_LOCKS_OFFSET);
	if ((uint64_t)st->st_size > SEG_MAX_SIZE)
		return seg_error(err, errlen, -EFBIG, name, "too large: %llu bytes, at most %llu",
				 (unsigned long long)st->st_size, (unsigned long long)SEG_MAX_SIZE);
	r = fd;
	fd = -1;
	return r;
}

/* Read and validate the header against the format, the file size and the name. */
static int seg_read_header(const struct seg_source *src, const char *name, const struct stat *st, pid_t pid,
			   uint64_t start_time, struct elide_seg_header *h, char *err, size_t errlen)
{
	uint64_t expect;
	int r;

	/* Only the fields: the rest is reserved, and at a thousand segments an
	 * interval the 3.5 KiB of it were megabytes of cold reads. */
	r = source_copy(src, h, offsetof(struct elide_seg_header, reserved), 0);
	memset(h->reserved, 0, sizeof(h->reserved));
	if (r == -ENODATA)
		return seg_error(err, errlen, -EBADMSG, name, "truncated while reading the header");
	if (r < 0)
		return seg_error(err, errlen, r, name, "cannot read the header: %m");

	if (memcmp(h->magic, ELIDE_SEG_MAGIC, sizeof(h->magic)) != 0)
		return seg_error(err, errlen, -EBADMSG, name, "bad magic: not a segment");
	if (h->version != ELIDE_SEG_VERSION)
		return seg_error(err, errlen, -EBADMSG, name, "unsupported version %u (expected %u)",
				 h->version, ELIDE_SEG_VERSION);
	if (h->header_size != ELIDE_SEG_HEADER_SIZE)
		return seg_error(err, errlen, -EBADMSG, name, "header_size %u (expected %u)",
				 h->header_size, ELIDE_SEG_HEADER_SIZE);
	if (h->control_offset != ELIDE_SEG_HEADER_SIZE)
		return seg_error(err, errlen, -EBADMSG, name, "control_offset %u (expected %u)",
				 h->control_offset, ELIDE_SEG_HEADER_SIZE);
	if (h->control_size != ELIDE_SEG_CONTROL_SIZE)
		return seg_error(err, errlen, -EBADMSG, name, "control_size %u (expected %u)",
				 h->control_size, ELIDE_SEG_CONTROL_SIZE);
	if (h->locks_offset != SEG_LOCKS_OFFSET)
		return seg_error(err, errlen, -EBADMSG, name, "locks_offset %u (expected %u)",
				 h->locks_offset, SEG_LOCKS_OFFSET);
	if (h->lock_entry_size != sizeof(struct elide_seg_lock))
		return seg_error(err, errlen, -EBADMSG, name, "lock_entry_size %u (expected %zu)",
				 h->lock_entry_size, sizeof(struct elide_seg_lock));
	if (h->lock_capacity < 2 || h->lock_capacity > ELIDE_SEG_MAX_LOCKS)
		return seg_error(err, errlen, -EBADMSG, name, "lock_capacity %u out of range 2..%u",
				 h->lock_capacity, ELIDE_SEG_MAX_LOCKS);
	/* All factors are 32-bit and checked: no overflow in 64 bits. */
	expect = (uint64_t)h->locks_offset + (uint64_t)h->lock_capacity * h->lock_entry_size;
	if (h->total_size != expect)
		return seg_error(err, errlen, -EBADMSG, name, "total_size %llu, but %u entries need %llu",
				 (unsigned long long)h->total_size, h->lock_capacity, (unsigned long long)expect);
	if (h->total_size != (uint64_t)st->st_size)
		return seg_error(err, errlen, -EBADMSG, name, "file is %llu bytes, header total_size says %llu",
				 (unsigned long long)st->st_size, (unsigned long long)h->total_size);
	if (h->lock_high_water > h->lock_capacity)
		return seg_error(err, errlen, -EBADMSG, name, "lock_high_water %u above lock_capacity %u",
				 h->lock_high_water, h->lock_capacity);
	if (h->pid != (int32_t)pid)
		return seg_error(err, errlen, -EBADMSG, name, "header pid %d differs from the file name's",
				 (int)h->pid);
	if (h->start_time != start_time)
		return seg_error(err, errlen, -EBADMSG, name, "header start_time %llu differs from the file name's",
				 (unsigned long long)h->start_time);
	if (!has_nul(h->exe, sizeof(h->exe)))
		return seg_error(err, errlen, -EBADMSG, name, "exe is not NUL-terminated");
	if (!has_nul(h->comm, sizeof(h->comm)))
		return seg_error(err, errlen, -EBADMSG, name, "comm is not NUL-terminated");
	if (!has_nul(h->lib_version, sizeof(h->lib_version)))
		return seg_error(err, errlen, -EBADMSG, name, "lib_version is not NUL-terminated");
	if (!has_nul(h->status_reason, sizeof(h->status_reason)))
		return seg_error(err, errlen, -EBADMSG, name, "status_reason is not NUL-terminated");
	if (h->elision > ELIDE_SEG_ELISION_ON)
		return seg_error(err, errlen, -EBADMSG, name, "elision %u out of range 0..1", h->elision);
	if (h->mode < ELIDE_SEG_MODE_ADAPTIVE || h->mode > ELIDE_SEG_MODE_WATCH)
		return seg_error(err, errlen, -EBADMSG, name, "mode %u out of range 1..%u", h->mode,
				 ELIDE_SEG_MODE_WATCH);
	if ((h->features & ELIDE_SEG_FEATURE_WATCH) && (!is_pow2(h->watch_sample) || h->watch_sample > 65536))
		return seg_error(err, errlen, -EBADMSG, name, "watch_sample %u is not a power of two in 1..65536",
				 h->watch_sample);
	if (!is_pow2(h->sample) || h->sample > 65536)
		return seg_error(err, errlen, -EBADMSG, name, "sample %u is not a power of two in 1..65536",
				 h->sample);
	if (h->rtm_usable > 1)
		return seg_error(err, errlen, -EBADMSG, name, "rtm_usable %u out of range 0..1", h->rtm_usable);
	return 0;
}

/* For seg_lock_valid(): say what is wrong (when asked) and refuse. */
_printf_(3, 4)
static bool entry_refused(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	if (why && size) {
		va_start(ap, fmt);
		vsnprintf(why, size, fmt, ap);
		va_end(ap);
	}
	return false;
}

/* Whether an in-use entry is valid; if not, `why` (when not NULL) says
 * what is wrong with it, values included. */
static bool seg_lock_valid(uint32_t index, const struct elide_seg_lock *e, char *why, size_t size)
{
	if (e->kind > ELIDE_SEG_KIND_OVERFLOW)
		return entry_refused(why, size, "entry %u: kind %u out of range 0..%u", index, e->kind,
				     ELIDE_SEG_KIND_OVERFLOW);
	if (index == 0)
		return entry_refused(why, size, "entry 0: in use, but entry 0 is never used");
	if ((e->kind == ELIDE_SEG_KIND_OVERFLOW) != (index == SEG_OVERFLOW_INDEX))
		return entry_refused(why, size, "entry %u: kind %u, but entry %u and only it is the overflow entry",
				     index, e->kind, SEG_OVERFLOW_INDEX);
	if (e->state > ELIDE_SEG_STATE_OFF_ADAPT)
		return entry_refused(why, size, "entry %u: state %u out of range 0..%u", index, e->state,
				     ELIDE_SEG_STATE_OFF_ADAPT);
	if (e->reason >= ELIDE_SEG_NREASONS)
		return entry_refused(why, size, "entry %u: reason %u out of range 0..%u", index, e->reason,
				     ELIDE_SEG_NREASONS - 1);
	if (e->policy > ELIDE_POLICY_NEVER)
		return entry_refused(why, size, "entry %u: policy %u out of range 0..%u", index, e->policy,
				     ELIDE_POLICY_NEVER);
	/* Most locks have no name: an empty one is terminated by definition. */
	if (e->name[0] && !has_nul(e->name, sizeof(e->name)))
		return entry_refused(why, size, "entry %u: name is not NUL-terminated", index);
	return true;
}

void seg_snapshot_free(struct seg_snapshot *snap)
{
	if (!snap)
		return;
	free(snap->locks);
	free(snap);
}

static void seg_snapshot_freep(struct seg_snapshot **snap)
{
	seg_snapshot_free(*snap);
}

/*
 * Take the marks the writer set (header.dirty[]) on entries below `high`:
 * each word that has any is exchanged for 0 before the entries are read, so
 * a write after that sets its bit again for the next reader.  Marks in a
 * word wholly past `high` stay (those entries are not in use; nothing
 * reads them).  Returns false
 * when the segment keeps no marks (or is not mapped writable): then every
 * entry counts as marked.
 */
static bool take_dirty(const struct seg_source *src, const struct elide_seg_header *h, uint32_t high,
		       uint64_t marks[ELIDE_SEG_DIRTY_ENTRIES / 64])
{
	uint64_t *words = (uint64_t *)(void *)src->dirty_words;

	if (!words || !(h->features & ELIDE_SEG_FEATURE_DIRTY))
		return false;
	for (uint32_t w = 0; w < ELIDE_SEG_DIRTY_ENTRIES / 64; w++) {
		/* Words past the table are not looked at: a small process's
		 * pass touches one line of them. */
		uint64_t v = w * 64 < high ? __atomic_load_n(&words[w], __ATOMIC_RELAXED) : 0;

		/* A clear word stays untouched: no write into the writer's line. */
		marks[w] = v ? __atomic_exchange_n(&words[w], 0, __ATOMIC_SEQ_CST) : 0;
	}
	return true;
}

#define SEG_MARKED_AHEAD 8

/* The next marked entry at or after `i` below `high`, or `high`. */
static uint32_t next_marked(const uint64_t *marks, uint32_t i, uint32_t high)
{
	while (i < high) {
		uint64_t w = marks[i / 64] >> (i % 64);

		if (w)
			return i + (uint32_t)__builtin_ctzll(w) < high ? i + (uint32_t)__builtin_ctzll(w) : high;
		i = (i / 64 + 1) * 64;
	}
	return high;
}

/* Copy entries [0, high) chunk by chunk, keeping the valid in-use ones;
 * with SEG_READ_DIRTY_ONLY only those marked written (take_dirty()). */
static int seg_read_locks(const struct seg_source *src, const char *name, struct seg_snapshot *snap,
			  unsigned flags, uint32_t max_locks, seg_lock_fn each, void *userdata, char *err,
			  size_t errlen)
{
	uint32_t high = snap->header.lock_high_water;
	/* From a mapping, one entry at a time into a buffer that stays in L1:
	 * no system call per chunk to amortise. */
	uint32_t per_copy = src->map ? 1 : SEG_READ_CHUNK;
	bool hot_only = flags & SEG_READ_HOT_ONLY;
	struct seg_lock_snapshot *locks = NULL;
	uint64_t marks[ELIDE_SEG_DIRTY_ENTRIES / 64];
	uint32_t nmarked = 0;
	bool marked;
	int r;

	/* The caller's cap on entries read: what one process can make it hold. */
	if (high > max_locks) {
		snap->nskipped_locks = high - max_locks;
		high = max_locks;
	}

	if (high == 0)
		return 0;
	/* Every read through a writable mapping takes the marks, so that the
	 * next one finds only what was written since.  Entries the bitmap does
	 * not cover are read whole. */
	marked = take_dirty(src, &snap->header, high, marks) && (flags & SEG_READ_DIRTY_ONLY) &&
		 high <= ELIDE_SEG_DIRTY_ENTRIES;
	snap->dirty_only = marked;
	if (marked) {
		/* From a mapping one entry at a time: the marked ones. */
		per_copy = 1;
		/* Most words are 0, and without -mpopcnt each count is a call. */
		for (uint32_t w = 0; w < ELIDE_SEG_DIRTY_ENTRIES / 64; w++)
			if (marks[w])
				nmarked += (uint32_t)__builtin_popcountll(marks[w]);
		if (nmarked == 0)
			return 0;
		if (!each) {
			locks = calloc(nmarked, sizeof(*locks));
			if (!locks)
				return seg_error(err, errlen, -ENOMEM, name, "out of memory for %u lock entries",
						 nmarked);
			snap->locks = locks;
		}
	}
	/* At most one copy of the table: bounded by the (checked) file size.
	 * A caller that takes entries one by one needs none. */
	if (!each && !marked) {
		locks = calloc(high, sizeof(*locks));
		if (!locks)
			return seg_error(err, errlen, -ENOMEM, name, "out of memory for %u lock entries", high);
		snap->locks = locks;
	}

	/* Zeroed: with hot_only, what follows the hot part stays zero. */
	_cleanup_free_ struct elide_seg_lock *chunk = calloc(per_copy, sizeof(*chunk));
	if (!chunk)
		return seg_error(err, errlen, -ENOMEM, name, "out of memory");

	/* Marked: the entry SEG_MARKED_AHEAD marks ahead is asked for early
	 * (the walk jumps; no hardware prefetcher follows it).  When a quarter
	 * or more are marked, the walk is the sequential one, skipping the
	 * unmarked: the jumps cost more than they save. */
	uint32_t ahead_marked = marked ? next_marked(marks, 0, high) : high;
	bool sparse = marked && nmarked * 4 < high;

	for (unsigned i = 0; sparse && i < SEG_MARKED_AHEAD; i++)
		ahead_marked = next_marked(marks, ahead_marked + 1, high);
	for (uint32_t first = sparse ? next_marked(marks, 0, high) : 0; first < high;
	     first = sparse ? next_marked(marks, first + 1, high) : first + per_copy) {
		uint32_t n = high - first < per_copy ? high - first : per_copy;
		uint64_t offset = snap->header.locks_offset + (uint64_t)first * sizeof(*chunk);

		if (marked && !(marks[first / 64] & (UINT64_C(1) << (first % 64))))
			continue;
		/* Mapped and hot only: half of each entry's cache lines, a strided
		 * walk the hardware prefetchers do not follow: ask ahead. */
		if (src->map && hot_only && sparse) {
			if (ahead_marked < high) {
				uint64_t ahead = snap->header.locks_offset + (uint64_t)ahead_marked * sizeof(*chunk);

				__builtin_prefetch(src->map + ahead);
				__builtin_prefetch(src->map + ahead + 64);
				ahead_marked = next_marked(marks, ahead_marked + 1, high);
			}
			r = source_copy(src, chunk, ELIDE_SEG_LOCK_HOT_SIZE, offset);
		} else if (src->map && hot_only) {
			uint64_t ahead = offset + 16 * sizeof(*chunk);

			if (ahead + ELIDE_SEG_LOCK_HOT_SIZE <= src->map_size) {
				__builtin_prefetch(src->map + ahead);
				__builtin_prefetch(src->map + ahead + 64);
			}
			r = source_copy(src, chunk, ELIDE_SEG_LOCK_HOT_SIZE, offset);
		}
		else
			r = source_copy(src, chunk, (size_t)n * sizeof(*chunk), offset);
		if (r == -ENODATA)
			return seg_error(err, errlen, -EBADMSG, name, "changed size while being read");
		if (r < 0)
			return seg_error(err, errlen, r, name, "cannot read lock entries: %m");
		for (uint32_t i = 0; i < n; i++) {
			struct elide_seg_lock *e = &chunk[i];

			if (hot_only && !src->map)
				memset((char *)e + ELIDE_SEG_LOCK_HOT_SIZE, 0, sizeof(*e) - ELIDE_SEG_LOCK_HOT_SIZE);
			if (e->kind == ELIDE_SEG_KIND_FREE) {
				/* A lock destroyed since the last read, or never used. */
				snap->nmarked_free += marked;
				continue;
			}
			/* Only the first garbage entry is explained. */
			if (!seg_lock_valid(first + i, e, snap->nbad_locks ? NULL : snap->first_bad,
					    sizeof(snap->first_bad))) {
				snap->nbad_locks++;
				continue;
			}
			if (each) {
				/* Validated, and a private copy: the process may rewrite
				 * the file meanwhile without changing what we checked. */
				r = each(first + i, e, userdata);
				if (r < 0)
					return seg_error(err, errlen, r, name, "lock entry %u: %m", first + i);
				snap->nlocks++;
				continue;
			}
			locks[snap->nlocks].index = first + i;
			locks[snap->nlocks].lock = *e;
			snap->nlocks++;
		}
	}
	return 0;
}

/* The process behind the segment must be alive and be the file's owner. */
static int seg_check_process(struct seg_snapshot *snap, char *err, size_t errlen)
{
	uint64_t start_time;
	uid_t uid;
	int r;

	r = seg_proc_start_time(NULL, snap->pid, &start_time);
	if (r == -ESRCH || (r == 0 && start_time != snap->start_time))
		return seg_error(err, errlen, -ESRCH, snap->file,
				 "no live process %d with start_time %llu (stale segment)",
				 (int)snap->pid, (unsigned long long)snap->start_time);
	if (r < 0)
		return seg_error(err, errlen, r, snap->file, "cannot read /proc/%d/stat: %m",
				 (int)snap->pid);
	r = seg_proc_uid(NULL, snap->pid, &uid);
	if (r == -ESRCH)
		return seg_error(err, errlen, -ESRCH, snap->file, "no live process %d (stale segment)",
				 (int)snap->pid);
	if (r < 0)
		return seg_error(err, errlen, r, snap->file, "cannot read /proc/%d/status: %m",
				 (int)snap->pid);
	/* A root-owned segment is one the process made before it dropped its
	 * privileges (memcached -u, su, setpriv): only root can make one. */
	snap->process_uid = uid;
	if (uid != snap->file_uid && snap->file_uid != 0)
		return seg_error(err, errlen, -EPERM, snap->file,
				 "file owner uid %u is not the owner uid %u of process %d",
				 (unsigned)snap->file_uid, (unsigned)uid, (int)snap->pid);
	if (snap->header.uid != (uint32_t)snap->file_uid)
		return seg_error(err, errlen, -EBADMSG, snap->file, "header uid %u is not the file owner uid %u",
				 snap->header.uid, (unsigned)snap->file_uid);
	return 0;
}

int seg_read(int dirfd, const char *name, unsigned flags, struct seg_snapshot **ret, char *err, size_t errlen)
{
	return seg_read_max(dirfd, name, flags, UINT32_MAX, ret, err, errlen);
}

int seg_read_max(int dirfd, const char *name, unsigned flags, uint32_t max_locks, struct seg_snapshot **ret,
		 char *err, size_t errlen)
{
	return seg_read_each(dirfd, name, flags, max_locks, 0, NULL, NULL, ret, err, errlen);
}

/* Everything after opening: header, control block, entries, checks. */
static int seg_read_source(const struct seg_source *src, const char *name, pid_t pid, uint64_t start_time,
			   const struct stat *st, unsigned flags, uint32_t max_locks, uint64_t created_ns,
			   seg_lock_fn each, void *userdata, struct seg_snapshot **ret, char *err, size_t errlen)
{
	_cleanup_(seg_snapshot_freep) struct seg_snapshot *snap = NULL;
	struct stat st2;
	int r;

	snap = calloc(1, sizeof(*snap));
	if (!snap)
		return seg_error(err, errlen, -ENOMEM, name, "out of memory");
	/* The parsed name is at most 10 + 1 + 20 + 4 characters. */
	snprintf(snap->file, sizeof(snap->file), "%s", name);
	snap->pid = pid;
	snap->start_time = start_time;
	snap->file_uid = st->st_uid;
	snap->process_uid = (uid_t)-1; /* known only with SEG_READ_CHECK_PROCESS */

	r = seg_read_header(src, name, st, pid, start_time, &snap->header, err, errlen);
	if (r < 0)
		return r;
	if (created_ns && snap->header.created_ns != created_ns)
		return seg_error(err, errlen, -ESTALE, name, "a new image of the process (created_ns changed)");
	r = source_copy(src, &snap->control, offsetof(struct elide_seg_control, reserved), snap->header.control_offset);
	if (r == -ENODATA)
		return seg_error(err, errlen, -EBADMSG, name, "changed size while being read");
	if (r < 0)
		return seg_error(err, errlen, r, name, "cannot read the control block: %m");
	r = seg_read_locks(src, name, snap, flags, flags & SEG_READ_NO_LOCKS ? 0 : max_locks, each, userdata, err,
			   errlen);
	if (r < 0)
		return r;

	/* A file resized (or replaced) under us may have mixed old and new
	 * contents.  Not so a mapping: it reads one file throughout, and a
	 * truncation faults (SIGBUS, reported by the caller). */
	if (!src->map) {
		r = source_stat(src, &st2);
		if (r < 0)
			return seg_error(err, errlen, r, name, "cannot stat: %m");
		if (st2.st_size != st->st_size)
			return seg_error(err, errlen, -EBADMSG, name, "changed size while being read");
	}

	if (flags & SEG_READ_CHECK_PROCESS) {
		r = seg_check_process(snap, err, errlen);
		if (r < 0)
			return r;
	}

	/* Give back what the garbage and free entries did not use.  In callback
	 * mode there is no table (nlocks counts what `each` saw): realloc(NULL)
	 * would hand out an uninitialised one. */
	if (snap->nlocks == 0 || !snap->locks) {
		free(snap->locks);
		snap->locks = NULL;
	} else if (snap->nlocks < snap->header.lock_high_water) {
		struct seg_lock_snapshot *p = realloc(snap->locks, snap->nlocks * sizeof(*p));

		if (p)
			snap->locks = p;
	}
	*ret = snap;
	snap = NULL;
	return 0;
}

int seg_read_each(int dirfd, const char *name, unsigned flags, uint32_t max_locks, uint64_t created_ns,
		  seg_lock_fn each, void *userdata, struct seg_snapshot **ret, char *err, size_t errlen)
{
	_cleanup_close_ int fd = -1;
	struct seg_source src = { .fd = -1 };
	struct stat st;
	pid_t pid;
	uint64_t start_time;

	if (!name || !ret)
		return -EINVAL;
	if (err && errlen)
		err[0] = '\0';
	if (seg_parse_name(name, &pid, &start_time) < 0)
		return seg_error(err, errlen, -EINVAL, name, "not a segment file name (<pid>-<starttime>%s)",
				 ELIDE_SEG_SUFFIX);

	fd = seg_open(dirfd, name, O_RDONLY, &st, err, errlen);
	if (fd < 0)
		return fd;
	src.fd = fd;
	return seg_read_source(&src, name, pid, start_time, &st, flags, max_locks, created_ns, each, userdata, ret,
			       err, errlen);
}

/* ---- mapped segments --------------------------------------------------- */

struct seg_map {
	char name[64];
	pid_t pid;
	uint64_t start_time;
	void *base;
	size_t size;
	dev_t dev;
	ino_t ino;
	struct stat st;               /* the file when mapped */
	bool writable;                /* mapped read-write: the dirty marks can be taken */
};

/*
 * The mapping being read now (one per thread).  The SIGBUS handler only
 * acts on faults inside it; any other SIGBUS gets the disposition it would
 * have had without us.
 */
static __thread struct {
	const uint8_t *lo, *hi;
	volatile sig_atomic_t faulted;
} seg_guard;
static struct sigaction seg_sigbus_previous;
static size_t seg_page_size;
static pthread_once_t seg_sigbus_once = PTHREAD_ONCE_INIT;
static int seg_sigbus_error;

static void seg_sigbus(int sig, siginfo_t *si, void *context)
{
	const uint8_t *addr = si->si_addr;
	int saved_errno = errno;

	(void)sig;
	(void)context;
	if (seg_guard.lo && addr >= seg_guard.lo && addr < seg_guard.hi) {
		void *page = (void *)((uintptr_t)addr & ~(uintptr_t)(seg_page_size - 1));

		/* The owner truncated the file: zeros from here on, and the read
		 * in progress reports it (writable: taking the dirty marks
		 * writes). */
		if (mmap(page, seg_page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			 0) != MAP_FAILED) {
			seg_guard.faulted = 1;
			errno = saved_errno;
			return;
		}
	}
	/* Not ours: returning re-runs the access under the old disposition. */
	sigaction(SIGBUS, &seg_sigbus_previous, NULL);
	errno = saved_errno;
}

static void seg_sigbus_install(void)
{
	struct sigaction sa = { .sa_sigaction = seg_sigbus, .sa_flags = SA_SIGINFO };

	seg_page_size = (size_t)sysconf(_SC_PAGESIZE);
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &seg_sigbus_previous) < 0)
		seg_sigbus_error = -errno;
}

int seg_map_open(int dirfd, const char *name, struct seg_map **ret, char *err, size_t errlen)
{
	_cleanup_free_ struct seg_map *m = NULL;
	_cleanup_close_ int fd = -1;
	struct stat st;

	if (!name || !ret)
		return -EINVAL;
	if (err && errlen)
		err[0] = '\0';
	pthread_once(&seg_sigbus_once, seg_sigbus_install);
	if (seg_sigbus_error < 0)
		return seg_error(err, errlen, seg_sigbus_error, name, "cannot handle SIGBUS: %m");
	m = calloc(1, sizeof(*m));
	if (!m)
		return seg_error(err, errlen, -ENOMEM, name, "out of memory");
	if (seg_parse_name(name, &m->pid, &m->start_time) < 0)
		return seg_error(err, errlen, -EINVAL, name, "not a segment file name (<pid>-<starttime>%s)",
				 ELIDE_SEG_SUFFIX);
	snprintf(m->name, sizeof(m->name), "%s", name);
	fd = seg_open(dirfd, name, O_RDONLY, &st, err, errlen);
	if (fd < 0)
		return fd;
	/* seg_open bounded the size by SEG_MAX_SIZE. */
	m->size = (size_t)st.st_size;
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->st = st;
	/* Read-write where we may (taking the dirty marks clears them), through
	 * the descriptor just checked, not the name: the same regular file.
	 * Read-only otherwise (a read-only file system, another user's file
	 * without privileges): every read is whole then. */
	{
		char path[64];
		_cleanup_close_ int rw = -1;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		rw = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (rw >= 0) {
			m->base = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
			m->writable = m->base != MAP_FAILED;
		}
	}
	if (!m->writable)
		m->base = mmap(NULL, m->size, PROT_READ, MAP_SHARED, fd, 0);
	if (m->base == MAP_FAILED)
		return seg_error(err, errlen, -errno, name, "cannot map: %m");
	*ret = m;
	m = NULL;
	return 0;
}

/* Whether reads through m can be SEG_READ_DIRTY_ONLY, going by the header
 * of its last read. */
bool seg_map_tracks_dirty(const struct seg_map *m, const struct seg_snapshot *snap)
{
	return m && m->writable && snap && (snap->header.features & ELIDE_SEG_FEATURE_DIRTY);
}

void seg_peek_of(const struct seg_snapshot *snap, struct seg_peek *q)
{
	*q = (struct seg_peek){
		.created_ns = snap->header.created_ns,
		.publish_ns = snap->header.publish_ns,
		.lock_high_water = snap->header.lock_high_water,
		.elision = snap->header.elision,
		.mode = snap->header.mode,
		.sample = snap->header.sample,
		.features = snap->header.features,
	};
}

bool seg_peek_changed(const struct seg_peek *a, const struct seg_peek *b)
{
	return a->created_ns != b->created_ns || a->publish_ns != b->publish_ns ||
	       a->lock_high_water != b->lock_high_water || a->elision != b->elision || a->mode != b->mode ||
	       a->sample != b->sample || a->features != b->features;
}

int seg_map_peek(struct seg_map *m, struct seg_peek *q)
{
	const struct elide_seg_header *h = m->base;
	const uint64_t *words = (const uint64_t *)(const void *)((const uint8_t *)m->base + ELIDE_SEG_DIRTY_OFFSET);
	uint64_t any = 0;
	uint32_t high;
	bool faulted;

	if (!m->writable)
		return -EOPNOTSUPP;
	if (m->size < ELIDE_SEG_HEADER_SIZE)
		return -EBADMSG;
	seg_guard.faulted = 0;
	seg_guard.lo = m->base;
	seg_guard.hi = (const uint8_t *)m->base + m->size;
	/* Each field once, as the writer may change it meanwhile. */
	q->created_ns = __atomic_load_n(&h->created_ns, __ATOMIC_RELAXED);
	q->publish_ns = __atomic_load_n(&h->publish_ns, __ATOMIC_ACQUIRE);
	high = __atomic_load_n(&h->lock_high_water, __ATOMIC_RELAXED);
	q->lock_high_water = high;
	q->elision = __atomic_load_n(&h->elision, __ATOMIC_RELAXED);
	q->mode = __atomic_load_n(&h->mode, __ATOMIC_RELAXED);
	q->sample = __atomic_load_n(&h->sample, __ATOMIC_RELAXED);
	q->features = __atomic_load_n(&h->features, __ATOMIC_RELAXED);
	/* The words take_dirty() would look at (a bogus high only makes the
	 * look longer: it stops at the bitmap's end). */
	for (uint32_t w = 0; w < ELIDE_SEG_DIRTY_ENTRIES / 64 && w * 64 < high; w++)
		any |= __atomic_load_n(&words[w], __ATOMIC_RELAXED);
	q->marked = any != 0;
	faulted = seg_guard.faulted;
	seg_guard.lo = seg_guard.hi = NULL;
	return faulted ? -EBADMSG : 0;
}

void seg_map_close(struct seg_map *m)
{
	if (!m)
		return;
	munmap(m->base, m->size);
	free(m);
}

int seg_map_read_each(struct seg_map *m, int dirfd, unsigned flags, uint32_t max_locks, uint64_t created_ns,
		      seg_lock_fn each, void *userdata, struct seg_snapshot **ret, char *err, size_t errlen)
{
	struct seg_source src = {
		.fd = -1, .map = m->base, .map_size = m->size, .dirfd = dirfd, .name = m->name,
		.dev = m->dev, .ino = m->ino,
		.dirty_words = m->writable ? (uint8_t *)m->base + ELIDE_SEG_DIRTY_OFFSET : NULL,
	};
	struct seg_snapshot *snap = NULL;
	struct stat st;
	bool faulted;
	int r;

	if (!ret)
		return -EINVAL;
	if (err && errlen)
		err[0] = '\0';
	if ((flags & SEG_READ_MAP_NO_STAT) && !(flags & SEG_READ_CHECK_PROCESS))
		src.mapped_st = &m->st;
	r = source_stat(&src, &st);
	if (r == -ESTALE)
		return seg_error(err, errlen, -ESTALE, m->name, "replaced by another file (map it again)");
	if (r < 0)
		return seg_error(err, errlen, r, m->name, "cannot stat: %m");
	if ((uint64_t)st.st_size != m->size)
		return seg_error(err, errlen, -EBADMSG, m->name, "changed size: %llu bytes, %zu when mapped",
				 (unsigned long long)st.st_size, m->size);

	seg_guard.faulted = 0;
	seg_guard.lo = m->base;
	seg_guard.hi = (const uint8_t *)m->base + m->size;
	r = seg_read_source(&src, m->name, m->pid, m->start_time, &st, flags, max_locks, created_ns, each, userdata,
			    &snap, err, errlen);
	faulted = seg_guard.faulted;
	seg_guard.lo = seg_guard.hi = NULL;
	if (faulted) {
		seg_snapshot_free(snap);
		return seg_error(err, errlen, -EBADMSG, m->name, "truncated while being read (map it again)");
	}
	if (r < 0)
		return r;
	*ret = snap;
	return 0;
}

/* Open a segment for writing decisions into, after validating its header. */
static int seg_open_write(int dirfd, const char *name, struct elide_seg_header *h, char *err, size_t errlen)
{
	_cleanup_close_ int fd = -1;
	uint64_t start_time;
	struct stat st;
	pid_t pid;
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (!name || seg_parse_name(name, &pid, &start_time) < 0)
		return seg_error(err, errlen, -EINVAL, name ? name : "(null)",
				 "not a segment file name (<pid>-<starttime>%s)", ELIDE_SEG_SUFFIX);
	fd = seg_open(dirfd, name, O_RDWR, &st, err, errlen);
	if (fd < 0)
		return fd;
	/* A second link could be a name of the segment in another place. */
	if (st.st_nlink != 1)
		return seg_error(err, errlen, -EBADMSG, name, "has %llu hard links, expected 1",
				 (unsigned long long)st.st_nlink);
	r = seg_read_header(&(struct seg_source){ .fd = fd }, name, &st, pid, start_time, h, err, errlen);
	if (r < 0)
		return r;
	r = fd;
	fd = -1;
	return r;
}

int seg_write_control(int dirfd, const char *name, const struct elide_seg_control *control,
		      char *err, size_t errlen)
{
	struct elide_seg_header h;
	uint64_t gen, odd, even;
	int r;

	if (!control)
		return -EINVAL;
	_cleanup_close_ int fd = seg_open_write(dirfd, name, &h, err, errlen);
	if (fd < 0)
		return fd;

	r = pread_all(fd, &gen, sizeof(gen), h.control_offset + offsetof(struct elide_seg_control, generation));
	if (r == -ENODATA)
		return seg_error(err, errlen, -EBADMSG, name, "truncated while reading the control block");
	if (r < 0)
		return seg_error(err, errlen, r, name, "cannot read the control generation: %m");

	/* Seqlock: odd while writing, then even and larger than before.
	 * The old value is the owner's to scribble on: wrapping is harmless,
	 * libelide only compares for inequality. */
	odd = (gen & 1) ? gen + 2 : gen + 1;
	even = odd + 1;
	r = pwrite_all(fd, &odd, sizeof(odd), h.control_offset + offsetof(struct elide_seg_control, generation));
	if (r < 0)
		return seg_error(err, errlen, r, name, "cannot write the control generation: %m");
	r = pwrite_all(fd, (const char *)control + sizeof(control->generation),
		       sizeof(*control) - sizeof(control->generation),
		       h.control_offset + sizeof(control->generation));
	if (r < 0)
		return seg_error(err, errlen, r, name, "cannot write the control block: %m");
	r = pwrite_all(fd, &even, sizeof(even), h.control_offset + offsetof(struct elide_seg_control, generation));
	if (r < 0)
		return seg_error(err, errlen, r, name, "cannot write the control generation: %m");
	return 0;
}

int seg_write_lock_policy(int dirfd, const char *name, uint32_t index, uint32_t ctl_policy,
			  uint32_t ctl_source, char *err, size_t errlen)
{
	struct elide_seg_header h;
	uint32_t pair[2] = { ctl_policy, ctl_source };
	uint64_t off;
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (ctl_policy > ELIDE_POLICY_NEVER + 1)
		return seg_error(err, errlen, -EINVAL, name ? name : "(null)",
				 "ctl_policy %u out of range 0..%u", ctl_policy, ELIDE_POLICY_NEVER + 1);
	if (ctl_source > ELIDE_SEG_SOURCE_LEARNED)
		return seg_error(err, errlen, -EINVAL, name ? name : "(null)", "ctl_source %u out of range 0..%u",
				 ctl_source, ELIDE_SEG_SOURCE_LEARNED);
	_cleanup_close_ int fd = seg_open_write(dirfd, name, &h, err, errlen);
	if (fd < 0)
		return fd;
	if (index >= h.lock_capacity)
		return seg_error(err, errlen, -ERANGE, name, "lock index %u beyond lock_capacity %u",
				 index, h.lock_capacity);
	off = h.locks_offset + (uint64_t)index * sizeof(struct elide_seg_lock) +
	      offsetof(struct elide_seg_lock, ctl_policy);
	/* ctl_policy and ctl_source are adjacent: one write. */
	r = pwrite_all(fd, pair, sizeof(pair), off);
	if (r < 0)
		return seg_error(err, errlen, r, name, "cannot write lock entry %u: %m", index);
	return 0;
}
