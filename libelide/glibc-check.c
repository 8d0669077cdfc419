/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Is the running glibc one whose lock layout and behaviour libelide has
 * verified?  The static assertions in glibc-abi.h cover the headers we were
 * built against; a program runs against whatever glibc the system has, so
 * this checks the version and then watches glibc's own functions (those
 * libelide passes calls to) work on local locks.  It runs in the
 * constructor: nothing here allocates, prints or calls dlsym.
 */
#include <errno.h>
#include <gnu/libc-version.h>
#include <string.h>

#include "glibc-abi.h"
#include "sbuf.h"

struct glibc_facts glibc_facts;

/* Parses up to 6 decimal digits at *p; -EINVAL when there are none. */
static int parse_number(const char **p, unsigned *out)
{
	const char *s = *p;
	unsigned v = 0;
	int n = 0;

	while (*s >= '0' && *s <= '9') {
		if (++n > 6)
			return -EINVAL;
		v = v * 10 + (unsigned)(*s++ - '0');
	}
	if (n == 0)
		return -EINVAL;
	*p = s;
	*out = v;
	return 0;
}

int glibc_parse_version(const char *version, unsigned *major, unsigned *minor)
{
	const char *p = version;
	unsigned maj, min, extra;

	if (!p || parse_number(&p, &maj) < 0 || *p++ != '.' || parse_number(&p, &min) < 0)
		return -EINVAL;
	while (*p == '.') {
		p++;
		if (parse_number(&p, &extra) < 0)
			return -EINVAL;
	}
	if (*p != '\0')
		return -EINVAL;
	*major = maj;
	*minor = min;
	return 0;
}


const char *glibc_version_reason(const char *version, unsigned *major, unsigned *minor)
{
	static char reason[160];
	struct sbuf b = SBUF_INIT(reason);
	unsigned maj, min;

	if (glibc_parse_version(version, &maj, &min) < 0) {
		sb_puts(&b, "glibc version '");
		sb_puts(&b, version ? version : "(null)");
		sb_puts(&b, "' cannot be parsed; libelide was verified against glibc 2.28 .. 2.43");
		return reason;
	}
	*major = maj;
	*minor = min;
	if (maj == GLIBC_VERIFIED_MAJOR && min >= GLIBC_VERIFIED_MINOR_MIN && min <= GLIBC_VERIFIED_MINOR_MAX)
		return NULL;
	sb_puts(&b, "glibc ");
	sb_putu(&b, maj, 10);
	sb_puts(&b, ".");
	sb_putu(&b, min, 10);
	if (maj < GLIBC_VERIFIED_MAJOR || (maj == GLIBC_VERIFIED_MAJOR && min < GLIBC_VERIFIED_MINOR_MIN))
		sb_puts(&b, " is older than the 2.28 this libelide was verified against");
	else
		sb_puts(&b, " is newer than the 2.43 this libelide was verified against");
	return reason;
}

/* Index values glibc never writes: if they change, glibc wrote our bytes. */
#define SENTINEL_MUTEX 0xe1d7
#define SENTINEL_SKIP 0x5e1d
#define SENTINEL_RD 0xe1d5
#define SENTINEL_WR 0xe1d3

static int mutex_word(const pthread_mutex_t *m)
{
	return __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED);
}

/* __kind of a mutex glibc initialised from an attribute of type TYPE; -1 when glibc refused. */
static int kind_of_type(const struct glibc_lock_fns *fns, int type)
{
	pthread_mutexattr_t attr;
	pthread_mutex_t m;
	int kind = -1;

	if (pthread_mutexattr_init(&attr) != 0)
		return -1;
	if (fns->mutexattr_settype(&attr, type) == 0 && fns->mutex_init(&m, &attr) == 0) {
		kind = m.__data.__kind;
		fns->mutex_destroy(&m);
	}
	fns->mutexattr_destroy(&attr);
	return kind;
}

static const char *probe_mutex(struct glibc_facts *facts, const struct glibc_lock_fns *fns)
{
	pthread_mutex_t s = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_t m;
	int kind;

	if (glibc_mutex_idx_load(&s) != 0)
		return "glibc probe: PTHREAD_MUTEX_INITIALIZER leaves the mutex index bytes (22-23) nonzero";

	/* Garbage first: we rely on pthread_mutex_init zeroing our index. */
	memset(&m, 0xa5, sizeof(m));
	if (fns->mutex_init(&m, NULL) != 0)
		return "glibc probe: pthread_mutex_init failed";
	if (glibc_mutex_idx_load(&m) != 0)
		return "glibc probe: pthread_mutex_init does not clear the mutex index bytes (22-23)";
	if (mutex_word(&m) != 0 || m.__data.__kind != PTHREAD_MUTEX_TIMED_NP)
		return "glibc probe: pthread_mutex_init leaves __lock or __kind nonzero for a default mutex";

	*glibc_mutex_idx(&m) = SENTINEL_MUTEX;
	if (fns->mutex_lock(&m) != 0)
		return "glibc probe: pthread_mutex_lock failed";
	if (mutex_word(&m) == 0)
		return "glibc probe: the mutex lock word (__lock) is zero while the mutex is held";
	if (fns->mutex_trylock(&m) != EBUSY)
		return "glibc probe: pthread_mutex_trylock of a held mutex did not answer EBUSY";
	if (glibc_mutex_idx_load(&m) != SENTINEL_MUTEX)
		return "glibc probe: pthread_mutex_lock/trylock changed the mutex index bytes (22-23)";
	if (fns->mutex_unlock(&m) != 0)
		return "glibc probe: pthread_mutex_unlock failed";
	if (mutex_word(&m) != 0)
		return "glibc probe: the mutex lock word (__lock) is nonzero after unlock";
	if (fns->mutex_trylock(&m) != 0)
		return "glibc probe: pthread_mutex_trylock of a free mutex failed";
	if (mutex_word(&m) == 0)
		return "glibc probe: the mutex lock word (__lock) is zero while trylock holds the mutex";
	if (fns->mutex_unlock(&m) != 0 || mutex_word(&m) != 0)
		return "glibc probe: the mutex lock word (__lock) is nonzero after unlock";
	if (glibc_mutex_idx_load(&m) != SENTINEL_MUTEX)
		return "glibc probe: pthread_mutex_unlock changed the mutex index bytes (22-23)";
	if (fns->mutex_destroy(&m) != 0 || fns->mutex_init(&m, NULL) != 0)
		return "glibc probe: pthread_mutex_destroy or a second pthread_mutex_init failed";
	if (glibc_mutex_idx_load(&m) != 0)
		return "glibc probe: pthread_mutex_init does not clear the mutex index bytes (22-23) of a used mutex";
	fns->mutex_destroy(&m);

	/* mutex_is_elidable_kind() tells the types apart by __kind alone. */
	if (kind_of_type(fns, PTHREAD_MUTEX_RECURSIVE) != PTHREAD_MUTEX_RECURSIVE_NP)
		return "glibc probe: a recursive mutex's __kind is not PTHREAD_MUTEX_RECURSIVE_NP";
	if (kind_of_type(fns, PTHREAD_MUTEX_ERRORCHECK) != PTHREAD_MUTEX_ERRORCHECK_NP)
		return "glibc probe: an errorcheck mutex's __kind is not PTHREAD_MUTEX_ERRORCHECK_NP";
	if (kind_of_type(fns, PTHREAD_MUTEX_ADAPTIVE_NP) != PTHREAD_MUTEX_ADAPTIVE_NP)
		return "glibc probe: an adaptive mutex's __kind is not PTHREAD_MUTEX_ADAPTIVE_NP";
	kind = kind_of_type(fns, PTHREAD_MUTEX_NORMAL);
	if (kind != PTHREAD_MUTEX_NORMAL && kind != (PTHREAD_MUTEX_NORMAL | GLIBC_MUTEX_NO_ELISION_NP))
		return "glibc probe: a normal mutex's __kind is neither 0 nor PTHREAD_MUTEX_NO_ELISION_NP";
	facts->normal_kind_tagged = (kind & GLIBC_MUTEX_NO_ELISION_NP) != 0;
	return NULL;
}

static unsigned rw_readers(const pthread_rwlock_t *rw)
{
	return __atomic_load_n(&rw->__data.__readers, __ATOMIC_RELAXED);
}

static int rw_writer(const pthread_rwlock_t *rw)
{
	return __atomic_load_n(&rw->__data.__cur_writer, __ATOMIC_RELAXED);
}

static bool rw_sentinels_intact(pthread_rwlock_t *rw)
{
	return *glibc_rwlock_idx(rw, false) == SENTINEL_RD && *glibc_rwlock_idx(rw, true) == SENTINEL_WR;
}

static bool rw_idx_clear(pthread_rwlock_t *rw)
{
	return *glibc_rwlock_idx(rw, false) == 0 && *glibc_rwlock_idx(rw, true) == 0;
}

/* __readers bits as elide-internal.h names them: 2 = write-locked, count from bit 3. */
#define RW_WRLOCKED 2u
#define RW_READER_SHIFT 3

static const char *probe_rwlock(const struct glibc_lock_fns *fns)
{
	pthread_rwlock_t s = PTHREAD_RWLOCK_INITIALIZER;
	pthread_rwlock_t rw;

	if (!rw_idx_clear(&s))
		return "glibc probe: PTHREAD_RWLOCK_INITIALIZER leaves the rwlock index bytes (34-37) nonzero";

	memset(&rw, 0xa5, sizeof(rw));
	if (fns->rwlock_init(&rw, NULL) != 0)
		return "glibc probe: pthread_rwlock_init failed";
	if (!rw_idx_clear(&rw))
		return "glibc probe: pthread_rwlock_init does not clear the rwlock index bytes (34-37)";
	if (rw_readers(&rw) != 0 || rw_writer(&rw) != 0 || rw.__data.__shared != 0)
		return "glibc probe: pthread_rwlock_init leaves __readers, __cur_writer or __shared nonzero";

	*glibc_rwlock_idx(&rw, false) = SENTINEL_RD;
	*glibc_rwlock_idx(&rw, true) = SENTINEL_WR;
	if (fns->rwlock_rdlock(&rw) != 0)
		return "glibc probe: pthread_rwlock_rdlock failed";
	if (rw_readers(&rw) >> RW_READER_SHIFT != 1 || (rw_readers(&rw) & RW_WRLOCKED))
		return "glibc probe: __readers does not count one reader (>> 3) while read-held";
	if (fns->rwlock_trywrlock(&rw) != EBUSY)
		return "glibc probe: pthread_rwlock_trywrlock of a read-held rwlock did not answer EBUSY";
	if (!rw_sentinels_intact(&rw))
		return "glibc probe: pthread_rwlock_rdlock changed the rwlock index bytes (34-37)";
	if (fns->rwlock_unlock(&rw) != 0)
		return "glibc probe: pthread_rwlock_unlock of a reader failed";
	if (rw_readers(&rw) >> RW_READER_SHIFT != 0)
		return "glibc probe: __readers still counts a reader after unlock";

	if (fns->rwlock_wrlock(&rw) != 0)
		return "glibc probe: pthread_rwlock_wrlock failed";
	if (!(rw_readers(&rw) & RW_WRLOCKED) || rw_writer(&rw) == 0)
		return "glibc probe: __readers lacks the write-locked bit (2) or __cur_writer is zero while write-held";
	if (!rw_sentinels_intact(&rw))
		return "glibc probe: pthread_rwlock_wrlock changed the rwlock index bytes (34-37)";
	if (fns->rwlock_unlock(&rw) != 0)
		return "glibc probe: pthread_rwlock_unlock of a writer failed";
	if ((rw_readers(&rw) & RW_WRLOCKED) || rw_readers(&rw) >> RW_READER_SHIFT != 0 || rw_writer(&rw) != 0)
		return "glibc probe: __readers or __cur_writer still say write-held after unlock";
	if (!rw_sentinels_intact(&rw))
		return "glibc probe: pthread_rwlock_unlock changed the rwlock index bytes (34-37)";

	if (fns->rwlock_destroy(&rw) != 0 || fns->rwlock_init(&rw, NULL) != 0)
		return "glibc probe: pthread_rwlock_destroy or a second pthread_rwlock_init failed";
	if (!rw_idx_clear(&rw))
		return "glibc probe: pthread_rwlock_init does not clear the rwlock index bytes (34-37) of a used rwlock";
	fns->rwlock_destroy(&rw);
	return NULL;
}

const char *glibc_check(struct glibc_facts *facts, const struct glibc_lock_fns *fns)
{
	const char *why;

	memset(facts, 0, sizeof(*facts));
	why = glibc_version_reason(gnu_get_libc_version(), &facts->major, &facts->minor);
	if (!why)
		why = probe_mutex(facts, fns);
	if (!why)
		why = probe_rwlock(fns);
	facts->checked = why == NULL;
	return why;
}

/* The words of a default mutex: __lock, __owner, __nusers as written, and
 * whether every other byte is as glibc's initializer left it. */
static bool default_mutex_is(const pthread_mutex_t *m, const pthread_mutex_t *fresh, int lock, int owner,
			     unsigned nusers)
{
	pthread_mutex_t rest = *m;

	if (m->__data.__lock != lock || m->__data.__owner != owner || m->__data.__nusers != nusers)
		return false;
	rest.__data.__lock = fresh->__data.__lock;
	rest.__data.__owner = fresh->__data.__owner;
	rest.__data.__nusers = fresh->__data.__nusers;
	return memcmp(&rest, fresh, sizeof(rest)) == 0;
}

/* The skip bytes (glibc_mutex_skip_load()): glibc leaves them alone while
 * it locks a default mutex, and its initializer clears them. */
static const char *probe_default_mutex_skip(const struct glibc_lock_fns *fns, pthread_mutex_t *m)
{
	glibc_mutex_skip_store(m, SENTINEL_SKIP);
	if (fns->mutex_lock(m) != 0 || fns->mutex_trylock(m) != EBUSY || fns->mutex_unlock(m) != 0 ||
	    fns->mutex_trylock(m) != 0 || fns->mutex_unlock(m) != 0)
		return "glibc probe: locking a default mutex with nonzero skip bytes (20-21, __spins) failed";
	if (glibc_mutex_skip_load(m) != SENTINEL_SKIP)
		return "glibc probe: pthread_mutex_lock/trylock/unlock of a default mutex changed its skip bytes "
		       "(20-21, __spins)";
	if (fns->mutex_destroy(m) != 0 || fns->mutex_init(m, NULL) != 0)
		return "glibc probe: pthread_mutex_destroy or a second pthread_mutex_init failed";
	if (glibc_mutex_skip_load(m) != 0)
		return "glibc probe: pthread_mutex_init does not clear the skip bytes (20-21, __spins) of a used mutex";
	return NULL;
}

const char *glibc_check_default_mutex(const struct glibc_lock_fns *fns, int tid)
{
	pthread_mutex_t m, fresh;
	const char *why = NULL;

	memset(&m, 0, sizeof(m));
	if (fns->mutex_init(&m, NULL) != 0)
		return "glibc probe: pthread_mutex_init failed";
	fresh = m;
	if (!default_mutex_is(&m, &fresh, 0, 0, 0) || m.__data.__kind != PTHREAD_MUTEX_TIMED_NP)
		why = "glibc probe: a new default mutex has nonzero __lock, __owner, __nusers or __kind";
	else if (fns->mutex_lock(&m) != 0 || !default_mutex_is(&m, &fresh, 1, tid, 1))
		why = "glibc probe: pthread_mutex_lock of a free default mutex does not leave __lock 1, "
		      "__owner the thread's id, __nusers 1 and nothing else changed";
	else if (fns->mutex_unlock(&m) != 0 || !default_mutex_is(&m, &fresh, 0, 0, 0))
		why = "glibc probe: pthread_mutex_unlock of a default mutex does not leave __lock, __owner "
		      "and __nusers 0 and nothing else changed";
	else if (fns->mutex_trylock(&m) != 0 || !default_mutex_is(&m, &fresh, 1, tid, 1))
		why = "glibc probe: pthread_mutex_trylock of a free default mutex does not leave __lock 1, "
		      "__owner the thread's id, __nusers 1 and nothing else changed";
	else if (fns->mutex_unlock(&m) != 0 || !default_mutex_is(&m, &fresh, 0, 0, 0))
		why = "glibc probe: pthread_mutex_unlock after trylock does not leave __lock, __owner and "
		      "__nusers 0";
	else
		why = probe_default_mutex_skip(fns, &m);
	fns->mutex_destroy(&m);
	return why;
}

/* An rwlock's words other than __readers, __cur_writer and the two futex
 * words (glibc's writer path, never written by libelide) as glibc's
 * initializer left them. */
static bool default_rwlock_is(const pthread_rwlock_t *rw, const pthread_rwlock_t *fresh, unsigned readers,
			      int writer)
{
	pthread_rwlock_t rest = *rw;

	if (rw_readers(rw) != readers || rw_writer(rw) != writer)
		return false;
	rest.__data.__readers = fresh->__data.__readers;
	rest.__data.__cur_writer = fresh->__data.__cur_writer;
	rest.__data.__wrphase_futex = fresh->__data.__wrphase_futex;
	rest.__data.__writers_futex = fresh->__data.__writers_futex;
	return memcmp(&rest, fresh, sizeof(rest)) == 0;
}

#define RW_ONE_READER (1u << RW_READER_SHIFT)
#define RW_WRPHASE 1u

/* A rwlock preferring writers nonrecursively: __flags says so, and with no
 * writer its reader registers and leaves as a default rwlock's does. */
static const char *probe_writer_preferring_rwlock(const struct glibc_lock_fns *fns)
{
	pthread_rwlockattr_t attr;
	pthread_rwlock_t rw, fresh;
	const char *why = NULL;

	if (pthread_rwlockattr_init(&attr) != 0 ||
	    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP) != 0)
		return "glibc probe: cannot make a rwlock attribute preferring writers nonrecursively";
	memset(&rw, 0, sizeof(rw));
	if (fns->rwlock_init(&rw, &attr) != 0) {
		pthread_rwlockattr_destroy(&attr);
		return "glibc probe: pthread_rwlock_init of a rwlock preferring writers failed";
	}
	pthread_rwlockattr_destroy(&attr);
	fresh = rw;
	if (rw.__data.__flags != PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP || !default_rwlock_is(&rw, &fresh, 0, 0))
		why = "glibc probe: a new rwlock preferring writers nonrecursively does not have __flags 2 and "
		      "__readers and __cur_writer 0";
	else if (fns->rwlock_rdlock(&rw) != 0 || !default_rwlock_is(&rw, &fresh, RW_ONE_READER, 0))
		why = "glibc probe: pthread_rwlock_rdlock of a free rwlock preferring writers does not leave one "
		      "reader in __readers (bit 3) and nothing else changed";
	else if (fns->rwlock_unlock(&rw) != 0 || !default_rwlock_is(&rw, &fresh, 0, 0))
		why = "glibc probe: pthread_rwlock_unlock of the reader of a rwlock preferring writers does not "
		      "leave __readers 0";
	fns->rwlock_destroy(&rw);
	return why;
}

const char *glibc_check_default_rwlock(const struct glibc_lock_fns *fns, int tid)
{
	pthread_rwlock_t rw, fresh;
	const char *why = NULL;

	memset(&rw, 0, sizeof(rw));
	if (fns->rwlock_init(&rw, NULL) != 0)
		return "glibc probe: pthread_rwlock_init failed";
	fresh = rw;
	if (!default_rwlock_is(&rw, &fresh, 0, 0) || rw.__data.__flags != PTHREAD_RWLOCK_PREFER_READER_NP)
		why = "glibc probe: a new default rwlock has nonzero __readers or __cur_writer, or prefers writers";
	else if (fns->rwlock_rdlock(&rw) != 0 || !default_rwlock_is(&rw, &fresh, RW_ONE_READER, 0))
		why = "glibc probe: pthread_rwlock_rdlock of a free rwlock does not leave one reader in __readers "
		      "(bit 3) and nothing else changed";
	else if (fns->rwlock_rdlock(&rw) != 0 || !default_rwlock_is(&rw, &fresh, 2 * RW_ONE_READER, 0))
		why = "glibc probe: a second pthread_rwlock_rdlock does not count a second reader";
	else if (fns->rwlock_unlock(&rw) != 0 || !default_rwlock_is(&rw, &fresh, RW_ONE_READER, 0))
		why = "glibc probe: pthread_rwlock_unlock of one of two readers does not leave one reader";
	else if (fns->rwlock_unlock(&rw) != 0 || !default_rwlock_is(&rw, &fresh, 0, 0))
		why = "glibc probe: pthread_rwlock_unlock of the last reader does not leave __readers 0";
	else if (fns->rwlock_wrlock(&rw) != 0 || !default_rwlock_is(&rw, &fresh, RW_WRPHASE | RW_WRLOCKED, tid))
		why = "glibc probe: pthread_rwlock_wrlock of a free rwlock does not leave __readers write-phase and "
		      "write-locked (3) and __cur_writer the thread's id";
	else if (fns->rwlock_unlock(&rw) != 0 || !default_rwlock_is(&rw, &fresh, RW_WRPHASE, 0))
		why = "glibc probe: pthread_rwlock_unlock of a writer with no readers does not leave the write "
		      "phase (__readers 1) and __cur_writer 0";
	else if (fns->rwlock_rdlock(&rw) != 0 || !default_rwlock_is(&rw, &fresh, RW_ONE_READER, 0))
		why = "glibc probe: pthread_rwlock_rdlock after a writer does not start a read phase with one reader";
	else if (fns->rwlock_unlock(&rw) != 0 || !default_rwlock_is(&rw, &fresh, 0, 0))
		why = "glibc probe: pthread_rwlock_unlock of that reader does not leave __readers 0";
	fns->rwlock_destroy(&rw);
	return why ? why : probe_writer_preferring_rwlock(fns);
}
