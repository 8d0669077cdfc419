/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Opening, validating and reading segments (segment-format.h), for elided
 * (as root, on files that unprivileged users write) and elidectl.
 *
 * Every byte of a segment is hostile input: the reader copies the file (with
 * pread, or from a read-only mapping) into private memory first and
 * validates the copy, so a process that rewrites its segment while we read
 * cannot change what was checked.  It
 * never follows a symlink, never trusts a pointer or path found inside, and
 * refuses files whose owner is not the process's owner.
 *
 * Every function returns 0 or a negative errno; on failure `err` (when not
 * NULL) holds one line naming what is wrong and where, e.g.
 *   "123-4567.seg: lock entry 17: name is not NUL-terminated"
 */
#ifndef ELIDE_SEGMENT_READER_H
#define ELIDE_SEGMENT_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "segment-format.h"
#include "segment-names.h"

#define SEG_ERR_MAX 256
/* The largest segment a reader accepts (the format's maximum). */
#define SEG_MAX_SIZE ((uint64_t)ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE + \
		      (uint64_t)ELIDE_SEG_MAX_LOCKS * sizeof(struct elide_seg_lock))

struct seg_lock_snapshot {
	uint32_t index;               /* entry index in the segment */
	struct elide_seg_lock lock;   /* validated copy; name NUL-terminated */
	/* Since when (seconds since the Epoch) elided's learned "never elide"
	 * keeps the lock off; 0 when unknown or none.  Set only by elidectl's
	 * bus source (GetLearned); the reader leaves it 0. */
	int64_t learned_since;
};

struct seg_snapshot {
	char file[64];                /* file name inside the runtime directory */
	pid_t pid;                    /* from the file name, equal to header.pid */
	uint64_t start_time;          /* from the file name, equal to header.start_time */
	uid_t file_uid;               /* owner of the file */
	uid_t process_uid;            /* (CHECK_PROCESS) the process's effective uid now */
	struct elide_seg_header header;   /* validated copy; strings NUL-terminated */
	struct elide_seg_control control; /* copy (values are elided's, unchecked) */
	uint32_t nlocks;              /* entries in locks[] (in use, valid) */
	struct seg_lock_snapshot *locks;
	uint32_t nbad_locks;          /* in-use entries rejected (garbage), not in locks[] */
	char first_bad[96];           /* the first one's problem, "entry 5: state 7 out of range 0..3" */
	uint32_t nskipped_locks;      /* entries past the caller's max_locks, not read */
	bool dirty_only;              /* (SEG_READ_DIRTY_ONLY) only the entries marked written were read */
	uint32_t nmarked_free;        /* (dirty_only) marked entries that are free: locks destroyed */
};

enum seg_read_flags {
	/* Check pid + start time against /proc and the file owner against the
	 * process's owner; without it only the file's own consistency is checked
	 * (tests, post-mortem inspection). */
	SEG_READ_CHECK_PROCESS = 1 << 0,
	/* Header and control block only: no lock entries are read. */
	SEG_READ_NO_LOCKS = 1 << 1,
	/* Of each lock entry only the first ELIDE_SEG_LOCK_HOT_SIZE bytes
	 * (identity, state, decisions, counters through the aborts); the rest
	 * of the copy (other counters, callsite, name) is zero.  From a
	 * mapping this reads half of each entry's cache lines. */
	SEG_READ_HOT_ONLY = 1 << 2,
	/* seg_map_read_each without SEG_READ_CHECK_PROCESS: no fstatat of the
	 * name before and after the read; the file's size and owner are those
	 * it had when mapped.  A file put under the name since is not noticed
	 * (the caller learns of it another way: inotify, a checked read), and
	 * a truncation still fails the read (SIGBUS).  Two system calls less
	 * per read, which at 1000 segments were a quarter of elided's time. */
	SEG_READ_MAP_NO_STAT = 1 << 3,
	/* seg_map_read_each of a mapping that seg_map_tracks_dirty(): only the
	 * entries marked written since the last read through it (header.dirty[];
	 * every read through such a mapping takes the marks), in index order.
	 * snap->dirty_only says whether it was so; entries destroyed since come
	 * as nmarked_free, not as entries.  Without marks (an older writer, a
	 * read-only mapping, more entries than the bitmap covers) the read is
	 * whole, as without the flag. */
	SEG_READ_DIRTY_ONLY = 1 << 4,
};

/* seg_parse_name(): segment-names.h. */

/* Field 22 of /proc/<pid>/stat (under `proc_root`, NULL = "/proc"). */
int seg_proc_start_time(const char *proc_root, pid_t pid, uint64_t *start_time);

/* The owner (effective uid) of a running process, from /proc/<pid>/status. */
int seg_proc_uid(const char *proc_root, pid_t pid, uid_t *uid);

/*
 * Read and validate segment `name` in directory `dirfd`:
 *   -ENOENT    no such file
 *   -ELOOP     a symlink (never followed)
 *   -EINVAL    not a segment file name
 *   -EBADMSG   not a regular file, bad magic/version/sizes/offsets, truncated,
 *              header identity disagreeing with the file name
 *   -EFBIG     larger than SEG_MAX_SIZE
 *   -ESRCH     (CHECK_PROCESS) no live process with that pid and start time:
 *              a leftover of a dead process
 *   -EPERM     (CHECK_PROCESS) file owner is neither the process's owner nor root
 * In-use lock entries with invalid fields (kind, state, reason, policy out of
 * range, name without NUL) are skipped and counted in nbad_locks.
 */
int seg_read(int dirfd, const char *name, unsigned flags, struct seg_snapshot **ret, char *err, size_t errlen);

/* The same, reading at most the first max_locks entries (the rest are
 * counted in nskipped_locks): a cap on what one segment costs the reader. */
int seg_read_max(int dirfd, const char *name, unsigned flags, uint32_t max_locks, struct seg_snapshot **ret,
		 char *err, size_t errlen);

/*
 * The same, handing each valid in-use entry to `each` (in index order, from a
 * private, validated copy) instead of collecting them: one pass over the
 * file, no table-sized buffer.  nlocks counts the entries handed over;
 * locks stays NULL.  `each` returns 0 or a negative errno (which stops the
 * read).  With SEG_READ_CHECK_PROCESS the process check comes after the
 * entries: on -ESRCH or -EPERM the caller must drop what `each` saw.
 * A non-zero created_ns must match the header's, else -ESTALE before any
 * entry is handed over (the process exec'd: a new segment).
 */
typedef int (*seg_lock_fn)(uint32_t index, const struct elide_seg_lock *lock, void *userdata);
int seg_read_each(int dirfd, const char *name, unsigned flags, uint32_t max_locks, uint64_t created_ns,
		  seg_lock_fn each, void *userdata, struct seg_snapshot **ret, char *err, size_t errlen);

void seg_snapshot_free(struct seg_snapshot *snap);

/*
 * A segment mapped read-only, for a reader that reads the same segment
 * again and again (elided, every interval): each read copies entry by entry
 * from the mapping, with no system call but an fstatat of the name before
 * and after (none with SEG_READ_MAP_NO_STAT), and validates as
 * seg_read_each does.  Truncation by the owner while a read runs is caught
 * (a process-wide SIGBUS handler, installed by the first seg_map_open,
 * passes on every SIGBUS that is not such a read) and fails that read.
 *
 * seg_map_read_each returns what seg_read_each returns, and:
 *   -ESTALE    also when `name` in dirfd is now another file (an exec'd
 *              image replaced it): close the map and open it again
 *   -EBADMSG   also when the file changed size since it was mapped, or was
 *              truncated during the read: close it, open it again
 * After any error the map may be closed and opened again.
 */
struct seg_map;
int seg_map_open(int dirfd, const char *name, struct seg_map **ret, char *err, size_t errlen);
int seg_map_read_each(struct seg_map *m, int dirfd, unsigned flags, uint32_t max_locks, uint64_t created_ns,
		      seg_lock_fn each, void *userdata, struct seg_snapshot **ret, char *err, size_t errlen);
void seg_map_close(struct seg_map *m);
bool seg_map_tracks_dirty(const struct seg_map *m, const struct seg_snapshot *snap);

/*
 * What a reader that follows a segment through its marks would notice
 * changing in the header: its status and the lock table's extent.  Values
 * are only compared for equality, never acted on, so they need no
 * validation.
 */
struct seg_peek {
	uint64_t created_ns;
	uint64_t publish_ns;          /* moves with status_reason, elision, rtm_usable */
	uint32_t lock_high_water;
	uint32_t elision;
	uint32_t mode;
	uint32_t sample;
	uint32_t features;
	bool marked;                  /* (seg_map_peek) a dirty mark below lock_high_water is set */
};

/* The fields of the header a read copied (marked is false). */
void seg_peek_of(const struct seg_snapshot *snap, struct seg_peek *q);

/*
 * One look at a mapped segment without reading it: the header's peek
 * fields and whether any entry is marked written, straight from the
 * mapping (a few cache lines, no copy, no system call).  A quiet process
 * (peek equal to the one of its last read, nothing marked) has nothing
 * new to read.  -EOPNOTSUPP when the mapping cannot carry marks (read-only),
 * -EBADMSG when the file was truncated under the look.
 */
int seg_map_peek(struct seg_map *m, struct seg_peek *q);

/* Whether two peeks differ in anything but `marked`. */
bool seg_peek_changed(const struct seg_peek *a, const struct seg_peek *b);

/*
 * For elided: write a control block under its seqlock (generation made odd,
 * fields written, generation made even and larger), and per-lock decisions.
 * The file is opened O_RDWR|O_NOFOLLOW and checked to be the same regular
 * file of the right size first.  `index` must be < header.lock_capacity.
 */
int seg_write_control(int dirfd, const char *name, const struct elide_seg_control *control,
		      char *err, size_t errlen);
int seg_write_lock_policy(int dirfd, const char *name, uint32_t index, uint32_t ctl_policy,
			  uint32_t ctl_source, char *err, size_t errlen);

#endif
