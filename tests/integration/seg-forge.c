/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * seg-forge: writes segment files (segment-format.h) the way a hostile or a
 * well-behaved process would, for the elided tests and the scale bench.
 *
 *   seg-forge --dir D --pid P [--locks N] [--corrupt KIND] [--name NAME]
 *             [--owner UID] [--other-pid Q] [--grow SECS] [--flap SECS] [--animate SECS]
 *   seg-forge --dir D --pid P --symlink TARGET | --fifo
 *   seg-forge --dir D --junk N
 *   seg-forge --dir D --animate SECS [--active PCT]  (every segment in D)
 *   seg-forge --dir D --pid P --status TEXT   (P's existing segment: a new
 *             status, published as libelide does, no lock entry touched)
 *   seg-forge --dir D --pid P --dump   (P's existing segment: what elided
 *             wrote, the control block's hints and each lock's decision)
 *
 * --libc-locks OFF[,OFF...]: the first lock entries lie at these offsets
 * into P's libc (its mapping of file offset 0), so that elided names them
 * "data:libc.so.6+0xOFF" (the learned store's lock identity).  --dump
 * prints an address inside P's libc the same way, as "libc+0xOFF".
 *
 * A forged segment is valid for the live process P (start time from
 * /proc/P/stat, owner the caller) unless --corrupt says otherwise.  Its lock
 * addresses and call sites point into P's libc some of the time, so the
 * daemon's naming path resolves real symbols.  Files are written under a
 * temporary name that is not a segment name and renamed into place, so a
 * reader sees the finished file (as with libelide).
 *
 * Only the format header is used: no libelide, no segment reader.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "macros.h"
#include "segment-format.h"

#define LOCKS_OFFSET (ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE)
#define LOCK_SIZE ((uint64_t)sizeof(struct elide_seg_lock))
#define MAX_SIZE ((uint64_t)LOCKS_OFFSET + (uint64_t)ELIDE_SEG_MAX_LOCKS * LOCK_SIZE)
/* Entries 0 (unused) and 1 (overflow) are not locks. */
#define MAX_FORGED_LOCKS (ELIDE_SEG_MAX_LOCKS - 2)
/* A pid above the kernel's largest pid_max (2^22): never alive. */
#define DEAD_PID_BASE 5000000

static const char *arg_dir;
static pid_t arg_pid;
static pid_t arg_other_pid;
static uint32_t arg_locks = 8;
static const char *arg_corrupt;
static const char *arg_name;
static const char *arg_symlink;
static bool arg_fifo;
static long arg_owner = -1;
static double arg_grow = -1;
static double arg_flap = -1;
static double arg_animate = -1;
static long arg_active = 100; /* --animate: % of each segment's locks that move */
static long arg_junk = -1;
static const char *arg_status;
static bool arg_dump;
#define MAX_LIBC_LOCKS 16
static uint64_t arg_libc_locks[MAX_LIBC_LOCKS];
static unsigned arg_nlibc_locks;

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	stop = 1;
}

_printf_(1, 2) static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("seg-forge: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static uint64_t xorshift_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
	uint64_t x = xorshift_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return xorshift_state = x;
}

static void sleep_s(double s)
{
	struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !stop)
		;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Field 22 of /proc/<pid>/stat, counted after the last ')' (comm may hold any). */
static int proc_start_time(pid_t pid, uint64_t *ret)
{
	char path[64], buf[1024];
	const char *s;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	s = strrchr(buf, ')');
	if (!s)
		return -EBADMSG;
	s++;
	for (int field = 3; field <= 22; field++) {
		s = strchr(s, ' ');
		if (!s)
			return -EBADMSG;
		s++;
	}
	*ret = strtoull(s, NULL, 10);
	return 0;
}

/* ---- addresses inside the target's libc --------------------------------- */

/* Where libc's file offset 0 is mapped in `pid` (0: this process), and its path. */
static uint64_t libc_base(pid_t pid, char *path, size_t size)
{
	char maps[64], line[1024];
	uint64_t base = 0;
	FILE *f;

	if (pid)
		snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	else
		snprintf(maps, sizeof(maps), "/proc/self/maps");
	f = fopen(maps, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char perms[8];
		int pos = 0;
		const char *p;

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s%n", &start, &end, perms, &off, &pos) < 4 || !pos)
			continue;
		p = line + pos;
		while (*p == ' ')
			p++;
		if (off != 0 || !strstr(p, "/libc.so") || !strstr(p, "/libc"))
			continue;
		snprintf(path, size, "%s", p);
		path[strcspn(path, "\n")] = '\0';
		base = start;
		break;
	}
	fclose(f);
	return base;
}

/* Translated addresses of libc objects and functions in the target. */
struct libc_points {
	uint64_t objects[16], functions[16];
	size_t nobjects, nfunctions;
};

static void find_libc_points(pid_t pid, struct libc_points *pts)
{
	static const char *const objects[] = {
		"stdin", "stdout", "stderr", "environ", "optind", "opterr", "optarg", "timezone",
		"daylight", "tzname", "program_invocation_name", "_IO_2_1_stdout_",
	};
	static const char *const functions[] = {
		"malloc", "free", "pthread_mutex_lock", "pthread_mutex_unlock", "qsort", "fopen",
		"getenv", "fclose", "pthread_rwlock_rdlock", "pthread_cond_wait", "fwrite", "abort",
	};
	char mine[PATH_MAX] = "", theirs[PATH_MAX] = "";
	uint64_t my_base, their_base;
	void *h;

	memset(pts, 0, sizeof(*pts));
	my_base = libc_base(0, mine, sizeof(mine));
	their_base = libc_base(pid, theirs, sizeof(theirs));
	if (!my_base || !their_base || strcmp(mine, theirs) != 0)
		return; /* another libc (or none): plain fake addresses only */
	h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(objects) && pts->nobjects < ARRAY_SIZE(pts->objects); i++) {
		uint64_t a = (uint64_t)(uintptr_t)dlsym(h, objects[i]);

		/* A copy relocation puts it in our executable: not libc's, skip. */
		if (a > my_base && a - my_base < (64u << 20))
			pts->objects[pts->nobjects++] = a - my_base + their_base;
	}
	for (size_t i = 0; i < ARRAY_SIZE(functions) && pts->nfunctions < ARRAY_SIZE(pts->functions); i++) {
		uint64_t a = (uint64_t)(uintptr_t)dlsym(h, functions[i]);

		if (a > my_base && a - my_base < (64u << 20))
			pts->functions[pts->nfunctions++] = a - my_base + their_base;
	}
	dlclose(h);
}

/* ---- building segments ---------------------------------------------------- */

static void fill_stats(struct elide_seg_lock *e)
{
	uint64_t acquired = 1000 + rnd() % 1000000;
	uint64_t attempts = acquired / 2 + rnd() % (acquired / 2 + 1);
	uint64_t commits = attempts - attempts / (2 + rnd() % 16);
	uint64_t aborts = attempts - commits;

	e->stats[ELIDE_SEG_STAT_ACQUIRED] = acquired;
	e->stats[ELIDE_SEG_STAT_ATTEMPTS] = attempts;
	e->stats[ELIDE_SEG_STAT_COMMITS] = commits;
	e->stats[ELIDE_SEG_STAT_FALLBACKS] = aborts / 4;
	e->stats[ELIDE_SEG_STAT_CONTENDED] = acquired / 50;
	e->stats[ELIDE_SEG_STAT_SKIPPED] = acquired - attempts;
	e->stats[ELIDE_SEG_STAT_CYCLES_LOST] = aborts * 150;
	e->stats[ELIDE_SEG_STAT_ABORT_CONFLICT] = aborts / 2;
	e->stats[ELIDE_SEG_STAT_ABORT_CAPACITY] = aborts / 8;
	e->stats[ELIDE_SEG_STAT_ABORT_BUSY] = aborts / 8;
	e->stats[ELIDE_SEG_STAT_ABORT_EXPLICIT] = aborts / 16;
	e->stats[ELIDE_SEG_STAT_ABORT_RETRY] = aborts / 16;
	e->stats[ELIDE_SEG_STAT_ABORT_OTHER] = aborts - aborts / 2 - 2 * (aborts / 8) - 2 * (aborts / 16);
}

/* Lock entry i (>= 2) of a plausible process. */
static void fill_lock(struct elide_seg_lock *e, uint32_t i, const struct libc_points *pts)
{
	static const uint32_t kinds[] = { ELIDE_SEG_KIND_MUTEX, ELIDE_SEG_KIND_MUTEX, ELIDE_SEG_KIND_RWLOCK_READ,
					  ELIDE_SEG_KIND_RWLOCK_WRITE };

	memset(e, 0, sizeof(*e));
	e->kind = kinds[i % ARRAY_SIZE(kinds)];
	e->state = i % 7 == 0 ? ELIDE_SEG_STATE_OFF_ADAPT : ELIDE_SEG_STATE_ELIDING;
	e->reason = i % 7 == 0 ? ELIDE_SEG_REASON_ABORTS : ELIDE_SEG_REASON_CONTENDED;
	e->policy = 0; /* ELIDE_POLICY_ADAPTIVE */
	/* A quarter of the locks are libc objects, the rest heap-like. */
	if (pts->nobjects && i % 4 == 0)
		e->addr = pts->objects[(i / 4) % pts->nobjects];
	else
		e->addr = 0x5a5a00000000u + (uint64_t)i * 64;
	/* Most call sites are inside libc functions; 1 in 64 resolves nowhere. */
	if (pts->nfunctions && i % 64 != 63)
		e->callsite = pts->functions[i % pts->nfunctions] + 0x10 + (i % 5);
	else
		e->callsite = 0x7a7a00000000u + (uint64_t)i * 16;
	if (i % 10 == 0)
		snprintf(e->name, sizeof(e->name), "forged_lock_%u", i);
	fill_stats(e);
}

struct forged {
	struct elide_seg_header h;
	struct elide_seg_control c;
	struct elide_seg_lock *locks; /* nbuilt entries */
	uint32_t nbuilt;
	uint64_t size;                /* bytes to write (the file's size) */
};

static void forge_valid(struct forged *f, pid_t pid, uint64_t start_time, uint32_t nlocks, uid_t owner)
{
	struct elide_seg_header *h = &f->h;
	struct libc_points pts;
	struct timespec now;
	uint32_t cap = nlocks + 2;

	memset(f, 0, sizeof(*f));
	memcpy(h->magic, ELIDE_SEG_MAGIC, sizeof(h->magic));
	h->version = ELIDE_SEG_VERSION;
	h->header_size = ELIDE_SEG_HEADER_SIZE;
	h->control_offset = ELIDE_SEG_HEADER_SIZE;
	h->control_size = ELIDE_SEG_CONTROL_SIZE;
	h->locks_offset = LOCKS_OFFSET;
	h->lock_entry_size = sizeof(struct elide_seg_lock);
	h->lock_capacity = cap;
	h->lock_high_water = cap;
	h->total_size = LOCKS_OFFSET + (uint64_t)cap * LOCK_SIZE;
	h->pid = pid;
	h->uid = owner;
	h->start_time = start_time;
	clock_gettime(CLOCK_REALTIME, &now);
	h->created_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	snprintf(h->exe, sizeof(h->exe), "/forged/by/seg-forge");
	snprintf(h->comm, sizeof(h->comm), "forged");
	snprintf(h->lib_version, sizeof(h->lib_version), "forged");
	h->elision = ELIDE_SEG_ELISION_ON;
	h->mode = ELIDE_SEG_MODE_ADAPTIVE;
	h->sample = 1;
	h->rtm_usable = 1;
	h->features = ELIDE_SEG_FEATURE_DIRTY; /* --animate marks what it writes, as libelide does */
	snprintf(h->status_reason, sizeof(h->status_reason), "forged by seg-forge");
	clock_gettime(CLOCK_MONOTONIC, &now);
	h->publish_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;

	f->locks = calloc(cap, sizeof(*f->locks));
	if (!f->locks)
		die("out of memory for %u entries", cap);
	f->nbuilt = cap;
	find_libc_points(pid, &pts);
	f->locks[1].kind = ELIDE_SEG_KIND_OVERFLOW;
	f->locks[1].state = ELIDE_SEG_STATE_PLAIN;
	f->locks[1].stats[ELIDE_SEG_STAT_ACQUIRED] = rnd() % 1000;
	for (uint32_t i = 2; i < cap; i++)
		fill_lock(&f->locks[i], i, &pts);
	if (arg_nlibc_locks) {
		char libc[PATH_MAX];
		uint64_t base = libc_base(pid, libc, sizeof(libc));

		if (!base)
			die("--libc-locks: process %d maps no libc", (int)pid);
		if (arg_nlibc_locks > nlocks)
			die("--libc-locks: %u offsets for %u locks", arg_nlibc_locks, nlocks);
		for (unsigned k = 0; k < arg_nlibc_locks; k++) {
			struct elide_seg_lock *e = &f->locks[2 + k];

			e->kind = ELIDE_SEG_KIND_MUTEX;
			e->state = ELIDE_SEG_STATE_ELIDING;
			e->reason = ELIDE_SEG_REASON_CONTENDED;
			e->addr = base + arg_libc_locks[k];
			snprintf(e->name, sizeof(e->name), "libc_lock_%#" PRIx64, arg_libc_locks[k]);
		}
	}
	f->size = h->total_size;
}

static const char *const corrupt_kinds[] = {
	"truncated",  /* the file ends inside the lock table */
	"short",      /* 100 bytes: less than a header */
	"oversized",  /* sparse, larger than the format's maximum */
	"total-size", /* header total_size larger than the file */
	"capacity",   /* lock_capacity above the maximum */
	"capacity-file", /* lock_capacity and total_size agree, the file is smaller */
	"high-water", /* lock_high_water above lock_capacity */
	"magic",
	"version",
	"kinds",      /* every lock entry has a garbage kind/state/reason */
	"names",      /* every named entry's name lacks its NUL */
	"header-pid", /* header pid is another process (--other-pid, default the parent) */
	"strings",    /* exe, comm, status_reason without NUL */
	"fields",     /* elision, mode, sample out of range */
	"offsets",    /* locks_offset pointing past the file, entry size 1 */
};

static void corrupt(struct forged *f, const char *kind)
{
	struct elide_seg_header *h = &f->h;

	if (!strcmp(kind, "truncated")) {
		f->size = LOCKS_OFFSET + (uint64_t)h->lock_capacity * LOCK_SIZE / 2 + 100;
	} else if (!strcmp(kind, "short")) {
		f->size = 100;
	} else if (!strcmp(kind, "oversized")) {
		/* Sparse: only what f holds is written, the rest is a hole. */
		h->lock_capacity = ELIDE_SEG_MAX_LOCKS;
		h->total_size = MAX_SIZE;
		f->size = MAX_SIZE + (1u << 20);
	} else if (!strcmp(kind, "total-size")) {
		h->total_size = UINT64_MAX - 4095;
	} else if (!strcmp(kind, "capacity")) {
		h->lock_capacity = UINT32_MAX;
		h->lock_high_water = UINT32_MAX;
	} else if (!strcmp(kind, "capacity-file")) {
		h->lock_capacity = ELIDE_SEG_MAX_LOCKS;
		h->lock_high_water = ELIDE_SEG_MAX_LOCKS;
		h->total_size = MAX_SIZE;
	} else if (!strcmp(kind, "high-water")) {
		h->lock_high_water = h->lock_capacity + 1000;
	} else if (!strcmp(kind, "magic")) {
		memcpy(h->magic, "ELIDESG0", 8);
	} else if (!strcmp(kind, "version")) {
		h->version = 0xdead;
	} else if (!strcmp(kind, "kinds")) {
		for (uint32_t i = 0; i < f->nbuilt; i++) {
			struct elide_seg_lock *e = &f->locks[i];

			e->kind = 5 + (uint32_t)(rnd() % 0xfffffff0u);
			e->state = (uint32_t)rnd();
			e->reason = (uint32_t)rnd();
			e->policy = (uint32_t)rnd();
		}
		/* And entry 0 in use, and the overflow kind in the wrong place. */
		f->locks[0].kind = ELIDE_SEG_KIND_MUTEX;
		if (f->nbuilt > 2)
			f->locks[2].kind = ELIDE_SEG_KIND_OVERFLOW;
	} else if (!strcmp(kind, "names")) {
		for (uint32_t i = 1; i < f->nbuilt; i++)
			memset(f->locks[i].name, 'A' + (int)(i % 26), sizeof(f->locks[i].name));
	} else if (!strcmp(kind, "header-pid")) {
		h->pid = arg_other_pid ? arg_other_pid : getppid();
	} else if (!strcmp(kind, "strings")) {
		memset(h->exe, '/', sizeof(h->exe));
		memset(h->comm, 'c', sizeof(h->comm));
		memset(h->status_reason, 'r', sizeof(h->status_reason));
	} else if (!strcmp(kind, "fields")) {
		h->elision = 7;
		h->mode = 99;
		h->sample = 3;
	} else if (!strcmp(kind, "offsets")) {
		h->locks_offset = UINT32_MAX - 8;
		h->lock_entry_size = 1;
	} else {
		die("unknown --corrupt kind '%s'", kind);
	}
}

static void pwrite_or_die(int fd, const void *buf, size_t size, uint64_t off)
{
	size_t done = 0;

	while (done < size) {
		ssize_t n = pwrite(fd, (const char *)buf + done, size - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("write failed: %m");
		done += (size_t)n;
	}
}

/* Write f into fd: header, control, then the entries the file has room for. */
static void write_forged(int fd, const struct forged *f)
{
	uint64_t table = (uint64_t)f->nbuilt * LOCK_SIZE;
	char hdr[ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE];

	if (ftruncate(fd, (off_t)f->size) < 0)
		die("ftruncate to %" PRIu64 " bytes: %m", f->size);
	memcpy(hdr, &f->h, sizeof(f->h));
	memcpy(hdr + sizeof(f->h), &f->c, sizeof(f->c));
	pwrite_or_die(fd, hdr, f->size < sizeof(hdr) ? f->size : sizeof(hdr), 0);
	if (f->size <= LOCKS_OFFSET || !f->locks)
		return;
	/* The lying kinds claim more entries than were built: write what exists. */
	if (table > f->size - LOCKS_OFFSET)
		table = f->size - LOCKS_OFFSET;
	pwrite_or_die(fd, f->locks, table, LOCKS_OFFSET);
}

/*
 * --flap: the daemon adopted a valid file; now cut it to its header and
 * write it back whole, again and again, so that a reader going through a
 * mapping finds pages gone in the middle of a read.  Ends valid.
 */
static void flap(int fd, const struct forged *f, double seconds)
{
	double end = mono_s() + seconds;
	unsigned long cuts = 0;

	while (!stop && mono_s() < end) {
		if (ftruncate(fd, LOCKS_OFFSET) < 0)
			die("ftruncate: %m");
		write_forged(fd, f);
		cuts++;
		/* Whole most of the time: a read passes its size check, then
		 * the next cut lands in the middle of it. */
		sleep_s(0.0005);
	}
	write_forged(fd, f);
	fprintf(stderr, "seg-forge: cut the file %lu times\n", cuts);
}

/* Create `name` in dirfd atomically: written under a non-segment name, renamed. */
static int create_file(int dirfd, const char *name, const struct forged *f, uid_t owner)
{
	char tmp[NAME_MAX + 1];
	int fd;

	if ((size_t)snprintf(tmp, sizeof(tmp), ".%s.forge-tmp", name) >= sizeof(tmp))
		die("name too long: %s", name);
	unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		die("cannot create %s/%s: %m", arg_dir, tmp);
	write_forged(fd, f);
	if (owner != geteuid() && fchown(fd, owner, (gid_t)-1) < 0)
		die("cannot chown %s to %u: %m", tmp, (unsigned)owner);
	if (renameat(dirfd, tmp, dirfd, name) < 0)
		die("cannot rename %s to %s: %m", tmp, name);
	return fd;
}

/* ---- --grow ------------------------------------------------------------- */

/*
 * The daemon adopted a valid file: now append entries, sometimes with the
 * header agreeing, then make it sparse and huge, then tiny, then valid.
 */
static void grow(int fd, struct forged *f, double seconds)
{
	struct elide_seg_header h = f->h;
	struct elide_seg_lock chunk[16];
	double end = mono_s() + seconds;
	uint64_t size = f->size;
	struct libc_points pts;
	unsigned step = 0;

	find_libc_points(arg_pid, &pts);
	while (!stop && mono_s() < end && h.lock_capacity + ARRAY_SIZE(chunk) <= ELIDE_SEG_MAX_LOCKS) {
		for (size_t i = 0; i < ARRAY_SIZE(chunk); i++)
			fill_lock(&chunk[i], h.lock_capacity + (uint32_t)i, &pts);
		pwrite_or_die(fd, chunk, sizeof(chunk), size);
		size += sizeof(chunk);
		h.lock_capacity += ARRAY_SIZE(chunk);
		/* Every other step the header catches up: valid, but larger. */
		if (step++ % 2) {
			h.total_size = size;
			h.lock_high_water = h.lock_capacity;
			pwrite_or_die(fd, &h, sizeof(h), 0);
		}
		sleep_s(0.01);
	}
	if (ftruncate(fd, (off_t)(MAX_SIZE + (1u << 20))) < 0)
		die("ftruncate: %m");
	sleep_s(0.5);
	if (ftruncate(fd, 100) < 0)
		die("ftruncate: %m");
	sleep_s(0.5);
	/* Valid again, as first forged. */
	write_forged(fd, f);
}

/* ---- --animate ---------------------------------------------------------- */

struct animated {
	struct elide_seg_lock *locks;
	uint64_t *dirty;              /* header.dirty[] */
	void *map;
	size_t map_size;
	uint32_t n;
};

static int map_segment(int fd, struct animated *a)
{
	struct elide_seg_header h;
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < LOCKS_OFFSET ||
	    (uint64_t)st.st_size > MAX_SIZE)
		return -EBADMSG;
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || memcmp(h.magic, ELIDE_SEG_MAGIC, 8) ||
	    h.lock_capacity > ELIDE_SEG_MAX_LOCKS || h.lock_high_water > h.lock_capacity ||
	    LOCKS_OFFSET + (uint64_t)h.lock_capacity * LOCK_SIZE > (uint64_t)st.st_size)
		return -EBADMSG;
	a->map_size = (size_t)st.st_size;
	a->map = mmap(NULL, a->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (a->map == MAP_FAILED)
		return -errno;
	a->locks = (struct elide_seg_lock *)(void *)((char *)a->map + LOCKS_OFFSET);
	a->dirty = (uint64_t *)(void *)((char *)a->map + ELIDE_SEG_DIRTY_OFFSET);
	a->n = h.lock_high_water;
	return 0;
}

/* Counters move like a busy process's: monotonic, commits <= attempts.
 * With --active, only that share of the locks (the same ones each time). */
static void bump(struct animated *a)
{
	for (uint32_t i = 2; i < a->n; i++) {
		uint64_t *s = a->locks[i].stats;
		uint64_t acq = 100 + rnd() % 5000, att = acq / 2, com = att - att / 8;

		if (a->locks[i].kind == ELIDE_SEG_KIND_FREE || (long)((i - 2) % 100) >= arg_active)
			continue;
		s[ELIDE_SEG_STAT_ACQUIRED] += acq;
		s[ELIDE_SEG_STAT_ATTEMPTS] += att;
		s[ELIDE_SEG_STAT_COMMITS] += com;
		s[ELIDE_SEG_STAT_SKIPPED] += acq - att;
		s[ELIDE_SEG_STAT_CYCLES_LOST] += (att - com) * 150;
		s[ELIDE_SEG_STAT_ABORT_CONFLICT] += att - com;
		/* After the writes, and only when clear (libelide's rec_touch()). */
		if (i < ELIDE_SEG_DIRTY_ENTRIES) {
			uint64_t bit = UINT64_C(1) << (i % 64);

			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			if (!(__atomic_load_n(&a->dirty[i / 64], __ATOMIC_SEQ_CST) & bit))
				__atomic_fetch_or(&a->dirty[i / 64], bit, __ATOMIC_SEQ_CST);
		}
	}
}

static void animate(int dirfd, int fd, double seconds)
{
	struct animated *all = NULL;
	size_t n = 0;
	double end = mono_s() + seconds;

	if (fd >= 0) {
		all = calloc(1, sizeof(*all));
		if (!all || map_segment(fd, &all[0]) < 0)
			die("cannot map the forged segment");
		n = 1;
	} else {
		DIR *d = fdopendir(dup(dirfd));
		struct dirent *de;

		if (!d)
			die("cannot read %s: %m", arg_dir);
		while ((de = readdir(d))) {
			size_t len = strlen(de->d_name);
			struct animated a;
			int f;

			if (len < 5 || strcmp(de->d_name + len - 4, ELIDE_SEG_SUFFIX))
				continue;
			f = openat(dirfd, de->d_name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			if (f < 0)
				continue;
			if (map_segment(f, &a) == 0) {
				struct animated *p = reallocarray(all, n + 1, sizeof(*all));

				if (!p)
					die("out of memory");
				all = p;
				all[n++] = a;
			}
			close(f);
		}
		closedir(d);
	}
	fprintf(stderr, "seg-forge: animating %zu segment(s)\n", n);
	while (!stop && (seconds == 0 || mono_s() < end)) {
		for (size_t i = 0; i < n; i++)
			bump(&all[i]);
		sleep_s(0.5);
	}
	for (size_t i = 0; i < n; i++)
		munmap(all[i].map, all[i].map_size);
	free(all);
}

/* ---- --junk --------------------------------------------------------------- */

/*
 * N files named like segments of processes that cannot exist, five kinds
 * in turn: empty, random bytes, zeros, a valid segment (a leftover the
 * daemon may remove), a wrong version.
 */
static void junk(int dirfd, long n)
{
	for (long i = 0; i < n; i++) {
		pid_t pid = (pid_t)(DEAD_PID_BASE + i);
		char name[64];
		struct forged f;

		snprintf(name, sizeof(name), "%d-%" PRIu64 "%s", (int)pid, 1000 + (uint64_t)i, ELIDE_SEG_SUFFIX);
		forge_valid(&f, pid, 1000 + (uint64_t)i, 2, geteuid());
		switch (i % 5) {
		case 0:
			f.size = 0;
			break;
		case 1:
			f.size = 100;
			for (size_t k = 0; k < sizeof(f.h); k++)
				((unsigned char *)&f.h)[k] = (unsigned char)rnd();
			break;
		case 2:
			memset(&f.h, 0, sizeof(f.h));
			break;
		case 3:
			break;
		default:
			f.h.version = ELIDE_SEG_VERSION + 1;
			break;
		}
		close(create_file(dirfd, name, &f, geteuid()));
		free(f.locks);
	}
}

/* ---- --status ---------------------------------------------------------- */

/* As libelide's status publication: the fields, then publish_ns last. */
static void set_status(int dirfd, const char *name, const char *text)
{
	struct elide_seg_header h;
	struct timespec now;
	int fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		die("cannot open %s: %m", name);
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		die("cannot read the header of %s", name);
	h.elision = ELIDE_SEG_ELISION_OFF;
	snprintf(h.status_reason, sizeof(h.status_reason), "%s", text);
	clock_gettime(CLOCK_MONOTONIC, &now);
	h.publish_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	pwrite_or_die(fd, &h.elision, sizeof(h.elision), offsetof(struct elide_seg_header, elision));
	pwrite_or_die(fd, h.status_reason, sizeof(h.status_reason), offsetof(struct elide_seg_header, status_reason));
	pwrite_or_die(fd, &h.publish_ns, sizeof(h.publish_ns), offsetof(struct elide_seg_header, publish_ns));
	close(fd);
}

/* ---- --dump ------------------------------------------------------------ */

/* "libc+0xOFF" for an address inside the target's libc, else "0xADDR". */
static const char *where(uint64_t addr, uint64_t base, char *buf, size_t size)
{
	if (base && addr >= base && addr - base < (64u << 20))
		snprintf(buf, size, "libc+%#" PRIx64, addr - base);
	else
		snprintf(buf, size, "%#" PRIx64, addr);
	return buf;
}

static const char *ctl_name(uint32_t ctl)
{
	static const char *const names[] = { "none", "adaptive", "always", "never" };

	return ctl < ARRAY_SIZE(names) ? names[ctl] : "invalid";
}

static const char *source_name(uint32_t source)
{
	static const char *const names[] = { "none", "config", "override", "adaptation", "learned" };

	return source < ARRAY_SIZE(names) ? names[source] : "invalid";
}

/*
 * What elided wrote into P's segment: "generation G hints N", a line
 * "hint VERDICT WHERE" per hint, a line "lock INDEX WHERE CTL SOURCE" per
 * lock entry.  The control block is copied under its seqlock, as libelide
 * does; the lock entries' decisions are read one entry at a time.
 */
static void dump(int dirfd, const char *name, pid_t pid)
{
	struct elide_seg_header h;
	struct elide_seg_control c;
	char libc[PATH_MAX], buf[64];
	uint64_t base = libc_base(pid, libc, sizeof(libc)), g1, g2;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int tries = 0;

	if (fd < 0)
		die("cannot open %s: %m", name);
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || memcmp(h.magic, ELIDE_SEG_MAGIC, 8) ||
	    h.control_offset != ELIDE_SEG_HEADER_SIZE || h.locks_offset != LOCKS_OFFSET ||
	    h.lock_entry_size != LOCK_SIZE || h.lock_high_water > ELIDE_SEG_MAX_LOCKS)
		die("%s: not a segment this tool reads", name);
	do {
		if (tries++ > 1000)
			die("%s: the control block never settled", name);
		if (pread(fd, &g1, sizeof(g1), h.control_offset) != (ssize_t)sizeof(g1) ||
		    pread(fd, &c, sizeof(c), h.control_offset) != (ssize_t)sizeof(c) ||
		    pread(fd, &g2, sizeof(g2), h.control_offset) != (ssize_t)sizeof(g2))
			die("%s: cannot read the control block: %m", name);
	} while (g1 % 2 || g1 != g2 || c.generation != g1);
	printf("generation %" PRIu64 " hints %u\n", c.generation, c.nhints);
	for (uint32_t i = 0; i < c.nhints && i < ELIDE_SEG_MAX_HINTS; i++)
		printf("hint %s %s\n",
		       c.hints[i].verdict == ELIDE_SEG_HINT_NEVER ? "never" :
		       c.hints[i].verdict == ELIDE_SEG_HINT_ELIDES ? "elides" : "invalid",
		       where(c.hints[i].addr, base, buf, sizeof(buf)));
	for (uint32_t i = 2; i < h.lock_high_water; i++) {
		struct elide_seg_lock e;

		if (pread(fd, &e, sizeof(e), LOCKS_OFFSET + (uint64_t)i * LOCK_SIZE) != (ssize_t)sizeof(e))
			break;
		if (e.kind == ELIDE_SEG_KIND_FREE || e.kind == ELIDE_SEG_KIND_OVERFLOW)
			continue;
		printf("lock %u %s %s %s\n", i, where(e.addr, base, buf, sizeof(buf)), ctl_name(e.ctl_policy),
		       source_name(e.ctl_source));
	}
	close(fd);
}

/* --libc-locks: a comma-separated list of offsets (0x... or decimal). */
static void parse_libc_locks(const char *s)
{
	char *end;

	for (;;) {
		unsigned long long v;

		if (arg_nlibc_locks == MAX_LIBC_LOCKS)
			die("--libc-locks: at most %d offsets", MAX_LIBC_LOCKS);
		errno = 0;
		v = strtoull(s, &end, 0);
		if (errno || end == s || (*end && *end != ',') || v >= (64u << 20))
			die("invalid --libc-locks '%s'", s);
		arg_libc_locks[arg_nlibc_locks++] = v;
		if (!*end)
			return;
		s = end + 1;
	}
}

/* ---- main ----------------------------------------------------------------- */

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: seg-forge --dir DIR --pid PID [--locks N] [--corrupt KIND] [--name NAME]\n"
		"                 [--owner UID] [--other-pid PID] [--grow SECS] [--flap SECS] [--animate SECS]\n"
		"       seg-forge --dir DIR --pid PID --symlink TARGET | --fifo [--name NAME]\n"
		"       seg-forge --dir DIR --junk N\n"
		"       seg-forge --dir DIR --animate SECS [--active PCT]\n"
		"                 (every segment in DIR; 0 = until killed; PCT of each one's locks move)\n"
		"       seg-forge --dir DIR --pid PID --status TEXT [--name NAME]\n"
		"                 (the existing segment: elision off for TEXT, publish_ns now)\n"
		"       seg-forge --dir DIR --pid PID --dump [--name NAME]\n"
		"                 (the existing segment: hints and lock decisions elided wrote)\n"
		"       --libc-locks OFF[,OFF...]  the first locks at these offsets into PID's libc\n"
		"Corruptions:");
	for (size_t i = 0; i < ARRAY_SIZE(corrupt_kinds); i++)
		fprintf(out, " %s", corrupt_kinds[i]);
	fputc('\n', out);
}

static long parse_long(const char *s, const char *what, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		die("invalid %s '%s'", what, s);
	return v;
}

static double parse_seconds(const char *s, const char *what)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0 && v <= 86400))
		die("invalid %s '%s'", what, s);
	return v;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "pid", required_argument, NULL, 'p' },
		{ "locks", required_argument, NULL, 'l' },
		{ "corrupt", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },
		{ "owner", required_argument, NULL, 'o' },
		{ "other-pid", required_argument, NULL, 'O' },
		{ "symlink", required_argument, NULL, 's' },
		{ "fifo", no_argument, NULL, 'f' },
		{ "grow", required_argument, NULL, 'g' },
		{ "flap", required_argument, NULL, 'F' },
		{ "animate", required_argument, NULL, 'a' },
		{ "active", required_argument, NULL, 'A' },
		{ "junk", required_argument, NULL, 'j' },
		{ "status", required_argument, NULL, 'S' },
		{ "dump", no_argument, NULL, 'D' },
		{ "libc-locks", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	char name[NAME_MAX + 1];
	uint64_t start_time = 0;
	struct forged f;
	uid_t owner;
	int c, dirfd, fd;

	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (c) {
		case 'd':
			arg_dir = optarg;
			break;
		case 'p':
			arg_pid = (pid_t)parse_long(optarg, "pid", 1, INT_MAX);
			break;
		case 'l':
			arg_locks = (uint32_t)parse_long(optarg, "lock count", 0, MAX_FORGED_LOCKS);
			break;
		case 'c':
			arg_corrupt = optarg;
			break;
		case 'n':
			arg_name = optarg;
			break;
		case 'o':
			arg_owner = parse_long(optarg, "uid", 0, (long)UINT32_MAX - 1);
			break;
		case 'O':
			arg_other_pid = (pid_t)parse_long(optarg, "pid", 1, INT_MAX);
			break;
		case 's':
			arg_symlink = optarg;
			break;
		case 'f':
			arg_fifo = true;
			break;
		case 'g':
			arg_grow = parse_seconds(optarg, "--grow seconds");
			break;
		case 'F':
			arg_flap = parse_seconds(optarg, "--flap seconds");
			break;
		case 'a':
			arg_animate = parse_seconds(optarg, "--animate seconds");
			break;
		case 'A':
			arg_active = parse_long(optarg, "--active percentage", 0, 100);
			break;
		case 'j':
			arg_junk = parse_long(optarg, "junk count", 0, 1000000);
			break;
		case 'S':
			arg_status = optarg;
			break;
		case 'D':
			arg_dump = true;
			break;
		case 'L':
			parse_libc_locks(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!arg_dir || optind < argc) {
		usage(stderr);
		return 2;
	}
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);
	xorshift_state ^= (uint64_t)getpid() << 32 | (uint64_t)arg_pid;

	dirfd = open(arg_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		die("cannot open %s: %m", arg_dir);
	if (arg_junk >= 0) {
		junk(dirfd, arg_junk);
		return 0;
	}
	if (!arg_pid) {
		if (arg_animate < 0)
			die("--pid is required");
		animate(dirfd, -1, arg_animate);
		return 0;
	}
	if (proc_start_time(arg_pid, &start_time) < 0)
		die("no process %d", (int)arg_pid);
	if (arg_name)
		snprintf(name, sizeof(name), "%s", arg_name);
	else
		snprintf(name, sizeof(name), "%d-%" PRIu64 "%s", (int)arg_pid, start_time, ELIDE_SEG_SUFFIX);
	if (strchr(name, '/'))
		die("--name must not contain '/'");

	if (arg_status) {
		set_status(dirfd, name, arg_status);
		return 0;
	}
	if (arg_dump) {
		dump(dirfd, name, arg_pid);
		return 0;
	}
	if (arg_symlink) {
		if (symlinkat(arg_symlink, dirfd, name) < 0)
			die("cannot create symlink %s -> %s: %m", name, arg_symlink);
		printf("%s\n", name);
		return 0;
	}
	if (arg_fifo) {
		if (mkfifoat(dirfd, name, 0600) < 0)
			die("cannot create FIFO %s: %m", name);
		printf("%s\n", name);
		return 0;
	}

	owner = arg_owner >= 0 ? (uid_t)arg_owner : geteuid();
	forge_valid(&f, arg_pid, start_time, arg_locks, owner);
	if (arg_corrupt)
		corrupt(&f, arg_corrupt);
	fd = create_file(dirfd, name, &f, owner);
	printf("%s\n", name);
	fflush(stdout);
	if (arg_grow >= 0)
		grow(fd, &f, arg_grow);
	if (arg_flap >= 0)
		flap(fd, &f, arg_flap);
	if (arg_animate >= 0)
		animate(dirfd, fd, arg_animate);
	close(fd);
	free(f.locks);
	return 0;
}
