/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Learned verdicts outside the segment (issue 34): the files through which
 * a process gets its program's learned verdicts before its first
 * contended lock, and through which a run that ends before elided adopts
 * it still teaches.  Both live in the runtime directory:
 *
 *   hints/UID-HASH.hints   written by elided from its learned-policy store:
 *                          the verdicts of uid UID for one program.  The
 *                          folder is elided's (not group or other
 *                          writable); a file is elided's, mode 0400, and
 *                          an ACL lets UID read it: no other user does.
 *   UID-HASH.teach         written by libelide at exit (a temporary file
 *                          renamed into place) when a run tried
 *                          transactions: that run's counters per lock.
 *                          elided folds it into its store, rewrites the
 *                          .hints file, then removes it; the program's
 *                          next run reads it meanwhile.
 *
 * HASH is learn_program_hash() of the program's identity, as 16 lower-case
 * hex digits; the identity itself is in the file and is compared whole.
 * A program is "path:EXE:ino=N:mtime=N" of /proc/self/exe, a lock
 * "MODULE+0xOFFSET" with a match saying whether the offset is the lock's
 * own (a static lock) or its call site's (a heap lock): elide-learning(7).
 *
 * Who trusts what: a reader accepts a .teach file only when its owner is
 * the uid it is for (libelide: its own effective uid; elided: the uid in
 * the name), so a file can only ever shape its owner's own processes; the
 * folder of .hints files must belong to root or to the reader's uid, and a
 * .hints file to the folder's owner or the reader's uid.
 * Every field is checked before use: a file that is not exactly right is
 * ignored whole.
 *
 * Binary, native byte order (written and read on one host), fixed sizes.
 */
#ifndef ELIDE_LEARN_FORMAT_H
#define ELIDE_LEARN_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define ELIDE_LEARN_HINTS_DIR "hints"
#define ELIDE_LEARN_HINTS_SUFFIX ".hints"
#define ELIDE_LEARN_TEACH_SUFFIX ".teach"
#define ELIDE_LEARN_HINTS_MAGIC "ELHINTS1"
#define ELIDE_LEARN_TEACH_MAGIC "ELTEACH1"
#define ELIDE_LEARN_VERSION 1u
#define ELIDE_LEARN_PROGRAM_MAX 1024u   /* bytes of a program identity (the store's LEARNED_STR_MAX) */
#define ELIDE_LEARN_MODULE_MAX 64u      /* a module's basename, NUL included (elfsym_location.module) */
#define ELIDE_LEARN_MAX_HINTS 120u      /* as many as a control block holds */
#define ELIDE_LEARN_MAX_TEACH 128u      /* locks one run reports, those with the most attempts */
#define ELIDE_LEARN_NAME_MAX 48u        /* "UID-HASH.teach" and its NUL */
/* A .teach file older than this is not used by libelide: elided is not
 * folding them in, so they are not what it would decide. */
#define ELIDE_LEARN_TEACH_FRESH_SEC 600

/*
 * The verdict of one run's counters (elided's store judges with it too):
 * never elide when at most 1% of at least ELIDE_LEARN_MIN_NEVER attempts
 * committed; elides well when at least 90% of at least
 * ELIDE_LEARN_MIN_ELIDES did; else none.  "Never" needs fewer: libelide's
 * own back-off lets a run of 50 ms try an always-aborting lock only some 30
 * times, and a lock that commits one transaction in four shows no commit in
 * 16 attempts once in a hundred runs (a wrong "never" is probed again).
 */
#define ELIDE_LEARN_MIN_NEVER 16u
#define ELIDE_LEARN_MIN_ELIDES 64u
enum elide_learn_verdict {
	ELIDE_LEARN_NONE = 0,
	ELIDE_LEARN_NEVER = 1,   /* = ELIDE_SEG_HINT_NEVER */
	ELIDE_LEARN_ELIDES = 2,  /* = ELIDE_SEG_HINT_ELIDES */
};

static inline enum elide_learn_verdict elide_learn_judge(uint64_t attempts, uint64_t commits)
{
	if (attempts < ELIDE_LEARN_MIN_NEVER || commits > attempts)
		return ELIDE_LEARN_NONE;
	if (commits <= attempts / 100)
		return ELIDE_LEARN_NEVER;
	if (attempts >= ELIDE_LEARN_MIN_ELIDES && commits >= attempts - attempts / 10)
		return ELIDE_LEARN_ELIDES;
	return ELIDE_LEARN_NONE;
}

/* FNV-1a, 64 bits: names a file, never trusted (the identity is compared). */
static inline uint64_t elide_learn_program_hash(const char *program, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)program[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

struct elide_learn_header {
	char magic[8];              /* ELIDE_LEARN_HINTS_MAGIC or ELIDE_LEARN_TEACH_MAGIC */
	uint32_t version;           /* ELIDE_LEARN_VERSION */
	uint32_t uid;               /* whose verdicts or run: the file's owner */
	uint32_t count;             /* records after the header */
	uint32_t program_len;       /* bytes of program[], 1..ELIDE_LEARN_PROGRAM_MAX; the rest is zero */
	uint64_t pid;               /* .teach: the run's pid; .hints: 0 */
	uint64_t start_time;        /* .teach: its start time (clock ticks after boot); .hints: 0 */
	int64_t written;            /* seconds since the Epoch */
	char program[ELIDE_LEARN_PROGRAM_MAX];
};

/* A lock, as the module that holds it (or its call site) and an offset in
 * that module's file. */
struct elide_learn_lock {
	char module[ELIDE_LEARN_MODULE_MAX]; /* basename, NUL-terminated, zero-padded, no '/' */
	uint64_t offset;
	uint32_t match;             /* ELIDE_SEG_HINT_LOCK_ADDR ("data:") or ELIDE_SEG_HINT_CALLSITE ("call:") */
	uint32_t reserved;          /* 0 */
};

struct elide_learn_hint {
	struct elide_learn_lock lock;
	uint32_t verdict;           /* ELIDE_LEARN_NEVER or ELIDE_LEARN_ELIDES */
	uint32_t reserved;          /* 0 */
	int64_t until;              /* seconds since the Epoch: holds until then (a re-probe); 0: no end */
};

/* Aborts in the order of the segment's ELIDE_SEG_STAT_ABORT_CONFLICT..OTHER. */
#define ELIDE_LEARN_ABORT_CAUSES 8u
struct elide_learn_teach {
	struct elide_learn_lock lock;
	uint64_t acquired, attempts, commits;
	uint64_t aborts[ELIDE_LEARN_ABORT_CAUSES];
};

#define ELIDE_LEARN_HINTS_FILE_MAX (sizeof(struct elide_learn_header) + ELIDE_LEARN_MAX_HINTS * sizeof(struct elide_learn_hint))
#define ELIDE_LEARN_TEACH_FILE_MAX (sizeof(struct elide_learn_header) + ELIDE_LEARN_MAX_TEACH * sizeof(struct elide_learn_teach))

/*
 * Checks a whole file as read: its size, header (magic, version, count,
 * program) and every record's lock; a .hints file's verdicts and a .teach
 * file's counters too.  0, or -EBADMSG with why (when whylen > 0) saying
 * what is wrong and where ("record 3: module not NUL-terminated").  Owner,
 * uid and name are the caller's to compare.
 */
int elide_learn_check_hints(const void *buf, size_t size, char *why, size_t whylen);
int elide_learn_check_teach(const void *buf, size_t size, char *why, size_t whylen);

/* "data:MODULE+0xOFF" / "call:MODULE+0xOFF" (elided's lock identities);
 * -ENAMETOOLONG, or the length written.  And back: 0 or -EINVAL. */
int elide_learn_lock_format(const struct elide_learn_lock *l, char *buf, size_t size);
int elide_learn_lock_parse(const char *identity, struct elide_learn_lock *l);

/* "UID-HASH": the stem of both file names; buf of ELIDE_LEARN_NAME_MAX. */
void elide_learn_stem(uint32_t uid, const char *program, size_t len, char *buf, size_t size);

_Static_assert(sizeof(struct elide_learn_header) == 48 + ELIDE_LEARN_PROGRAM_MAX, "learn header layout");
_Static_assert(sizeof(struct elide_learn_lock) == 80, "learn lock layout");
_Static_assert(sizeof(struct elide_learn_hint) == 96, "learn hint layout");
_Static_assert(sizeof(struct elide_learn_teach) == 80 + 11 * 8, "learn teach layout");

#endif
