/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided's learned-policy store: what it learned about each lock of each
 * program, per uid, kept across restarts of the programs, the daemon and
 * the host in one text file under its state directory (issue 16).
 *
 * An entry is keyed by (uid, program, lock): the uid whose processes
 * produced it, the program's identity ("build-id:HEX", or
 * "path:PATH:ino=N:mtime=N") and the lock's identity (a symbol name, or
 * "MODULE+0xOFFSET").  Both strings are opaque here: any bytes but NUL,
 * 1..LEARNED_STR_MAX of them.
 *
 * Bounded: at most per_uid_cap entries per uid and total_cap in all.  A
 * put beyond a cap evicts the least recently updated entry of
 *  - the same uid, when that uid is over per_uid_cap;
 *  - else, when the store is over total_cap, of the uid holding the most
 *    entries (on a tie the inserting uid, else the tied uid whose least
 *    recently updated entry is the oldest).
 * The entry being put is never the one evicted.  So an insert by uid U
 * takes an entry of another uid V only while V holds more entries than U
 * (or every uid holds one entry: more uids than total_cap): a uid that
 * floods the store only ever evicts its own entries once it holds as many
 * as any other uid, and never touches a uid holding fewer.  With the
 * defaults (256 per uid, 2000 in all) the total cap is reached only when
 * more than 7 uids are at their own cap.
 *
 * The file (format: learned.c) is read with bounded memory and rejected
 * whole when anything in it is wrong, and written atomically (temporary
 * file, fsync, rename, fsync of the directory).
 *
 * Pure data structure plus file I/O: no logging (errors come back as
 * -errno with a message in the caller's buffer), no event loop, not
 * thread-safe.  Sizes: a sorted array of at most LEARNED_TOTAL_CAP_MAX
 * entries; find is O(log n), put, forget and eviction are O(n).
 */
#ifndef ELIDED_LEARNED_H
#define ELIDED_LEARNED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LEARNED_FILE_VERSION 1
#define LEARNED_STR_MAX 1024u                  /* bytes of a program or lock identity, NUL excluded */
#define LEARNED_LINE_MAX 8192u                 /* one line of the file, newline included */
#define LEARNED_TOTAL_CAP_MAX 2000u            /* the largest total_cap learned_store_new accepts */
#define LEARNED_FILE_MAX (16u << 20)           /* bytes; a larger file is refused unread */
#define LEARNED_PER_UID_CAP_DEFAULT 256u
#define LEARNED_TOTAL_CAP_DEFAULT LEARNED_TOTAL_CAP_MAX
#define LEARNED_ERR_MAX 1024                   /* err buffers of this size hold every message */

/* Matches every uid in learned_store_forget; never a valid key. */
#define LEARNED_ANY_UID ((uid_t)-1)

enum learned_verdict {
	LEARNED_NEVER = 0,                     /* never elide: attempts cost more than they saved */
	LEARNED_ELIDES = 1,                    /* elides well */
};

/* Aborts by cause, in the order of ELIDE_SEG_STAT_ABORT_CONFLICT..OTHER. */
enum learned_abort_cause {
	LEARNED_ABORT_CONFLICT = 0,
	LEARNED_ABORT_CAPACITY,
	LEARNED_ABORT_BUSY,
	LEARNED_ABORT_EXPLICIT,
	LEARNED_ABORT_RETRY,
	LEARNED_ABORT_DEBUG,
	LEARNED_ABORT_NESTED,
	LEARNED_ABORT_OTHER,
	LEARNED_ABORT_CAUSES
};

struct learned_entry {
	enum learned_verdict verdict;
	uint32_t runs;                         /* process runs that contributed */
	uint64_t acquired, attempts, commits;
	uint64_t aborts[LEARNED_ABORT_CAUSES];
	int64_t first_learned;                 /* seconds since the Epoch: since when this verdict holds */
	int64_t last_updated;                  /* seconds since the Epoch: the last put */
};

/* A "never" verdict holds for LEARNED_PROBE_BASE_SEC after the run that last
 * confirmed it, doubling with every run that confirmed it, at most
 * LEARNED_PROBE_BASE_SEC << LEARNED_PROBE_MAX_SHIFT (17 hours). */
#define LEARNED_PROBE_BASE_SEC 60
#define LEARNED_PROBE_MAX_SHIFT 10

/* When e's verdict is tried again, in seconds since the Epoch: its hold's
 * end for a "never" (saturated at INT64_MAX), 0 for "elides" (never
 * tried again: it costs nothing when it goes wrong, libelide backs off). */
int64_t learned_entry_probe_at(const struct learned_entry *e);

/* Whether e still holds at now: an "elides", or a "never" whose hold is
 * not over.  A verdict that no longer holds is withdrawn so that the next
 * run probes the lock and confirms it or not. */
bool learned_entry_holds(const struct learned_entry *e, int64_t now);

struct learned_store;

/* 1 <= per_uid_cap <= total_cap <= LEARNED_TOTAL_CAP_MAX, else -EINVAL. */
int learned_store_new(size_t per_uid_cap, size_t total_cap, struct learned_store **ret);
void learned_store_free(struct learned_store *s);

/*
 * Replaces the store's contents with the file NAME in dirfd (a file name,
 * no '/'; dirfd may be AT_FDCWD).  A missing file is an empty store: 0.
 * Returns 0 or:
 *   -EBADMSG: the file is not a valid store (any line malformed, a number
 *             out of range, an invalid escape, a duplicate key, more
 *             entries than this store's caps, a line longer than
 *             LEARNED_LINE_MAX, a last line without its newline, no "end"
 *             line, larger than LEARNED_FILE_MAX, not a regular file);
 *   -EINVAL: a bad NAME;
 *   -ENOMEM, or the -errno of open/read (-EACCES, -EIO, ...).
 * On any error the store is left empty, and err (when errlen > 0) says
 * "NAME:LINE: what" (or "NAME: what" for the whole file).  NAME is as
 * given: a caller that wants the directory in messages prefixes it.
 */
int learned_store_load(struct learned_store *s, int dirfd, const char *name, char *err, size_t errlen);

/*
 * Writes the store to NAME in dirfd atomically: to ".NAME.XXXXXX" (mode
 * 0600, created with O_EXCL) in the same directory, fsync, rename over
 * NAME, fsync of the directory.  Leftover ".NAME.XXXXXX" files of an
 * interrupted save (a kill -9) are removed first.  Returns 0 or -errno
 * (-EFBIG, -ENOSPC, -EIO, -EACCES, ...; -EINVAL for a bad NAME) with err
 * saying which step failed.  When anything before the rename fails the
 * temporary file is removed and NAME is untouched; when only the final
 * directory fsync fails, NAME already holds the new contents (err says so).
 */
int learned_store_save(const struct learned_store *s, int dirfd, const char *name, char *err, size_t errlen);

/* NULL when absent.  Valid until the next put, forget, load or free. */
const struct learned_entry *learned_store_find(const struct learned_store *s, uid_t uid, const char *program,
					       const char *lock);

/*
 * Inserts or replaces the entry of (uid, program, lock) with values'
 * verdict, runs and counters; values' times are ignored: last_updated
 * becomes now, first_learned stays that of the entry replaced when it had
 * the same verdict, else becomes now (never later than now).  Strings are
 * copied.  Evicts beyond the caps (see the top of this file).  -EINVAL for
 * uid LEARNED_ANY_UID, a NULL, empty or over-long string, an unknown
 * verdict or now < 0; -ENOMEM.
 */
int learned_store_put(struct learned_store *s, uid_t uid, const char *program, const char *lock,
		      const struct learned_entry *values, int64_t now);

/* Drops the entries of uid (LEARNED_ANY_UID: every uid) and of program
 * (NULL: every program); returns how many. */
size_t learned_store_forget(struct learned_store *s, uid_t uid, const char *program);

/* Drops the one entry of (uid, program, lock); whether there was one. */
bool learned_store_forget_lock(struct learned_store *s, uid_t uid, const char *program, const char *lock);
size_t learned_store_count(const struct learned_store *s);
size_t learned_store_uid_count(const struct learned_store *s, uid_t uid);

/*
 * Calls cb for each entry in the file's order (uid, then program, then
 * lock, bytewise).  cb must not change the store; a nonzero return stops
 * the walk and is returned.
 */
typedef int (*learned_foreach_fn)(uid_t uid, const char *program, const char *lock, const struct learned_entry *e,
				  void *userdata);
int learned_store_foreach(const struct learned_store *s, learned_foreach_fn cb, void *userdata);

/* As learned_store_foreach, only the entries of (uid, program): O(log n)
 * to find the first. */
int learned_store_foreach_program(const struct learned_store *s, uid_t uid, const char *program,
				  learned_foreach_fn cb, void *userdata);

#endif
