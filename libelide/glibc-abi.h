/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The bytes libelide uses inside glibc's lock objects, by offset.
 *
 * glibc renamed the fields that hold them (mutex: `short __elision` became
 * `short __unused` in 2.43; rwlock: `signed char __rwelision; unsigned char
 * __pad1[7]` became `unsigned long __pad1`), so no field name reaches them
 * in every version.  The offsets are ABI: pthread_mutex_t and
 * pthread_rwlock_t are embedded in programs built against any glibc since
 * 2.2.5, so glibc cannot move them without a new symbol version.  The
 * assertions below use only fields every glibc 2.28 .. 2.43 has, and prove
 * that the bytes lie between two of them; glibc_check() verifies at run
 * time that the running glibc zeroes them in its initialisers and leaves
 * them alone while locking.
 *
 *   pthread_mutex_t (40 bytes)            pthread_rwlock_t (56 bytes)
 *    0 __lock                              0 __readers
 *   16 __kind                             24 __cur_writer
 *   20 skip (__spins)                     28 __shared
 *   22 index (__elision / __unused)       32 __rwelision / __pad1 (2.43)
 *   24 __list                             34 reader index, 36 writer index
 *                                         40 __pad2
 *                                         48 __flags
 */
#ifndef ELIDE_GLIBC_ABI_H
#define ELIDE_GLIBC_ABI_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macros.h"

#if !defined(__x86_64__) || defined(__ILP32__)
#error "libelide knows glibc's lock layouts for x86_64 (LP64) only: the index slots in glibc-abi.h are unverified on this target"
#endif

#define GLIBC_MUTEX_IDX_OFFSET 22     /* short __elision (<= 2.42), short __unused (2.43) */
#define GLIBC_RWLOCK_RD_IDX_OFFSET 34 /* __pad1[1..2] (<= 2.42), bytes 2-3 of __pad1 (2.43) */
#define GLIBC_RWLOCK_WR_IDX_OFFSET 36 /* __pad1[3..4] (<= 2.42), bytes 4-5 of __pad1 (2.43) */
#define GLIBC_IDX_SIZE 2

/* The oldest and newest glibc whose layout and behaviour were verified. */
#define GLIBC_VERIFIED_MAJOR 2
#define GLIBC_VERIFIED_MINOR_MIN 28
#define GLIBC_VERIFIED_MINOR_MAX 43

#define GLIBC_MEMBER_SIZE(type, member) sizeof(((type *)0)->member)

_Static_assert(sizeof(pthread_mutex_t) == 40,
	       "pthread_mutex_t is no longer 40 bytes: glibc changed the x86_64 mutex ABI, "
	       "libelide's mutex index slot (byte 22) is unverified");
_Static_assert(offsetof(pthread_mutex_t, __data.__lock) == 0 && GLIBC_MEMBER_SIZE(pthread_mutex_t, __data.__lock) == 4,
	       "pthread_mutex_t.__data.__lock moved from byte 0 or changed size: libelide reads the lock word there");
_Static_assert(offsetof(pthread_mutex_t, __data.__kind) == 16 && GLIBC_MEMBER_SIZE(pthread_mutex_t, __data.__kind) == 4,
	       "pthread_mutex_t.__data.__kind moved from byte 16 or changed size: libelide reads the mutex type there");
_Static_assert(offsetof(pthread_mutex_t, __data.__owner) == 8 && GLIBC_MEMBER_SIZE(pthread_mutex_t, __data.__owner) == 4 &&
		       offsetof(pthread_mutex_t, __data.__nusers) == 12 &&
		       GLIBC_MEMBER_SIZE(pthread_mutex_t, __data.__nusers) == 4,
	       "pthread_mutex_t.__data.__owner or __nusers moved from bytes 8 and 12: libelide takes a default "
	       "mutex with glibc's protocol and writes them");
_Static_assert(offsetof(pthread_mutex_t, __data.__spins) + GLIBC_MEMBER_SIZE(pthread_mutex_t, __data.__spins) <=
		       GLIBC_MUTEX_IDX_OFFSET,
	       "pthread_mutex_t.__data.__spins grew or moved into byte 22: the mutex index slot would overlap it");
_Static_assert(offsetof(pthread_mutex_t, __data.__list) >= GLIBC_MUTEX_IDX_OFFSET + GLIBC_IDX_SIZE &&
		       offsetof(pthread_mutex_t, __data.__list) == 24,
	       "pthread_mutex_t.__data.__list moved from byte 24: the mutex index slot (bytes 22-23) no longer lies "
	       "between __spins and __list");

_Static_assert(sizeof(pthread_rwlock_t) == 56,
	       "pthread_rwlock_t is no longer 56 bytes: glibc changed the x86_64 rwlock ABI, "
	       "libelide's rwlock index slots (bytes 34-37) are unverified");
_Static_assert(offsetof(pthread_rwlock_t, __data.__readers) == 0 &&
		       GLIBC_MEMBER_SIZE(pthread_rwlock_t, __data.__readers) == 4,
	       "pthread_rwlock_t.__data.__readers moved from byte 0 or changed size: libelide reads the reader word there");
_Static_assert(offsetof(pthread_rwlock_t, __data.__cur_writer) == 24 &&
		       GLIBC_MEMBER_SIZE(pthread_rwlock_t, __data.__cur_writer) == 4,
	       "pthread_rwlock_t.__data.__cur_writer moved from byte 24 or changed size: libelide reads the writer there");
_Static_assert(offsetof(pthread_rwlock_t, __data.__shared) == 28 &&
		       GLIBC_MEMBER_SIZE(pthread_rwlock_t, __data.__shared) == 4 &&
		       offsetof(pthread_rwlock_t, __data.__shared) + 4 <= GLIBC_RWLOCK_RD_IDX_OFFSET,
	       "pthread_rwlock_t.__data.__shared moved from byte 28 or changed size: it would overlap the rwlock "
	       "index slots (bytes 34-37) or libelide would misread process-shared rwlocks");
_Static_assert(offsetof(pthread_rwlock_t, __data.__pad2) == 40 &&
		       GLIBC_RWLOCK_WR_IDX_OFFSET + GLIBC_IDX_SIZE <= offsetof(pthread_rwlock_t, __data.__pad2),
	       "pthread_rwlock_t.__data.__pad2 moved from byte 40: the rwlock index slots (bytes 34-37) no longer lie "
	       "between __shared and __pad2");
_Static_assert(offsetof(pthread_rwlock_t, __data.__flags) == 48,
	       "pthread_rwlock_t.__data.__flags moved from byte 48: glibc changed the x86_64 rwlock ABI");
_Static_assert(GLIBC_RWLOCK_RD_IDX_OFFSET + GLIBC_IDX_SIZE <= GLIBC_RWLOCK_WR_IDX_OFFSET,
	       "the rwlock reader and writer index slots overlap");

/*
 * The index slots.  Each is 2-aligned (the objects are 8-aligned), and only
 * libelide reads or writes it through a pointer: glibc only zeroes it.
 */
static inline uint16_t *glibc_mutex_idx(pthread_mutex_t *m)
{
	return (uint16_t *)(void *)((char *)m + GLIBC_MUTEX_IDX_OFFSET);
}

/* The fast path's look at a mutex's index, without a pointer to write through. */
static inline uint16_t glibc_mutex_idx_load(const pthread_mutex_t *m)
{
	return __atomic_load_n((const uint16_t *)(const void *)((const char *)m + GLIBC_MUTEX_IDX_OFFSET),
			       __ATOMIC_RELAXED);
}

static inline uint16_t *glibc_rwlock_idx(pthread_rwlock_t *rw, bool write)
{
	return (uint16_t *)(void *)((char *)rw + (write ? GLIBC_RWLOCK_WR_IDX_OFFSET : GLIBC_RWLOCK_RD_IDX_OFFSET));
}

/*
 * A default mutex's skip count: bytes 20-21, glibc's __spins, which glibc
 * reads and writes only for PTHREAD_MUTEX_ADAPTIVE_NP mutexes (its spin
 * estimate).  For a default mutex whose words libelide takes itself, it
 * counts the acquisitions that go straight to the lock while the mutex is
 * backed off, on the line those acquisitions write anyway; it is written
 * only by a thread that holds the mutex.  glibc_check() verifies that
 * glibc zeroes it in its initialisers and leaves it alone while locking.
 */
#define GLIBC_MUTEX_SKIP_OFFSET 20
_Static_assert(offsetof(pthread_mutex_t, __data.__spins) == GLIBC_MUTEX_SKIP_OFFSET &&
		       GLIBC_MEMBER_SIZE(pthread_mutex_t, __data.__spins) == 2,
	       "pthread_mutex_t.__data.__spins moved from byte 20 or changed size: libelide keeps a default "
	       "mutex's skip count there");

static inline uint16_t glibc_mutex_skip_load(const pthread_mutex_t *m)
{
	return __atomic_load_n((const uint16_t *)(const void *)((const char *)m + GLIBC_MUTEX_SKIP_OFFSET),
			       __ATOMIC_RELAXED);
}

/* Only by the thread that holds the mutex (or destroys it). */
static inline void glibc_mutex_skip_store(pthread_mutex_t *m, uint16_t n)
{
	__atomic_store_n((uint16_t *)(void *)((char *)m + GLIBC_MUTEX_SKIP_OFFSET), n, __ATOMIC_RELAXED);
}

/* What glibc_check() learnt about the running glibc. */
struct glibc_facts {
	unsigned major, minor;   /* gnu_get_libc_version() */
	/* pthread_mutexattr_settype(PTHREAD_MUTEX_NORMAL) leaves
	 * PTHREAD_MUTEX_NO_ELISION_NP (512) in the mutex's __kind (<= 2.42), so
	 * an explicitly normal mutex can be told from a default one. */
	bool normal_kind_tagged;
	bool checked;            /* glibc_check() ran and every check held */
};

#define GLIBC_MUTEX_NO_ELISION_NP 512

extern struct glibc_facts glibc_facts _hidden_;

/*
 * Parses a gnu_get_libc_version() string, "MAJOR.MINOR" with optional
 * ".N" parts after it (development snapshots say 2.42.9000).  Returns 0,
 * or -EINVAL for anything else.
 */
int glibc_parse_version(const char *version, unsigned *major, unsigned *minor) _hidden_;

/*
 * NULL when VERSION is one libelide was verified against (and *major,
 * *minor are set), else why not, in static storage that the next call
 * overwrites.
 */
const char *glibc_version_reason(const char *version, unsigned *major, unsigned *minor) _hidden_;

/*
 * The lock functions the probe calls: the ones libelide passes calls to
 * (resolve.c's dlsym(RTLD_NEXT) table), not the __pthread_* aliases, which a
 * sanitizer runtime may intercept with nothing behind (ASan on glibc >= 2.34).
 */
struct glibc_lock_fns {
	int (*mutex_init)(pthread_mutex_t *, const pthread_mutexattr_t *);
	int (*mutex_destroy)(pthread_mutex_t *);
	int (*mutex_lock)(pthread_mutex_t *);
	int (*mutex_trylock)(pthread_mutex_t *);
	int (*mutex_unlock)(pthread_mutex_t *);
	int (*mutexattr_settype)(pthread_mutexattr_t *, int);
	int (*mutexattr_destroy)(pthread_mutexattr_t *);
	int (*rwlock_init)(pthread_rwlock_t *, const pthread_rwlockattr_t *);
	int (*rwlock_destroy)(pthread_rwlock_t *);
	int (*rwlock_rdlock)(pthread_rwlock_t *);
	int (*rwlock_trywrlock)(pthread_rwlock_t *);
	int (*rwlock_wrlock)(pthread_rwlock_t *);
	int (*rwlock_unlock)(pthread_rwlock_t *);
};

/*
 * Runs once before any elision: the version check, then a probe of FNS on
 * local objects.  Fills FACTS; returns NULL when the layout and behaviour
 * libelide relies on hold, else a static string naming the check that
 * failed.  Allocates nothing, prints nothing, calls no dlsym.
 */
const char *glibc_check(struct glibc_facts *facts, const struct glibc_lock_fns *fns) _hidden_;

/*
 * NULL when glibc's own lock, trylock and unlock of a default mutex (private,
 * __kind 0) leave its words as libelide's own path writes them (libelide's
 * mutex-word.h): __lock 1 while held and 0 after, __owner the holder's
 * thread id TID and then 0, __nusers 1 and then 0, and nothing else of the
 * mutex changed; else what differs.
 */
const char *glibc_check_default_mutex(const struct glibc_lock_fns *fns, int tid) _hidden_;

/*
 * NULL when glibc's rdlock and unlock of a default rwlock (prefers readers)
 * count readers in __readers from bit 3 with nothing else written, and a
 * writer leaves the write phase (bit 0) that the next reader ends; else
 * what differs (libelide's read side: "the read side of a default rwlock"
 * in glibc-protocol.h).
 */
const char *glibc_check_default_rwlock(const struct glibc_lock_fns *fns, int tid) _hidden_;

#endif
