/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The learned verdicts outside the segments (issue 34; formats in
 * common/learn-format.h): elided writes each (uid, program)'s verdicts to
 * RUNTIME/hints/UID-HASH.hints, so that a process gets them in its
 * constructor, before its first contended lock and long before adoption;
 * and it folds in the UID-HASH.teach files that libelide writes at exit,
 * so that a run that ends before adoption teaches too.
 *
 * Trust: a .teach file teaches only the entries of its owner (the kernel's
 * word, the uid its name must carry too), so a user can only ever shape
 * their own processes' verdicts, as running the program would.  Each
 * .hints file is owned by its uid, mode 0400: no other user reads it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "elided.h"
#include "fdio.h"
#include "learn-format.h"
#include "learned.h"
#include "log.h"
#include "macros.h"

#define TEACH_SCAN_MAX 256u          /* .teach files folded in by one scan */

/* ---- the folder ------------------------------------------------------- */

static void remove_files(int dirfd)
{
	DIR *dir;
	struct dirent *de;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return;
	}
	while ((de = readdir(dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			(void)unlinkat(dirfd, de->d_name, 0);
	closedir(dir);
}

int elided_hints_open(struct elided *d)
{
	struct stat st;
	int fd;

	d->hints_dirfd = -1;
	if (d->runtime_dirfd < 0)
		return 0;
	if (!d->learned) {
		/* --no-learning: without the folder libelide neither reads
		 * nor writes anything (a folder of ours from an earlier run). */
		fd = openat(d->runtime_dirfd, ELIDE_LEARN_HINTS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == geteuid()) {
			remove_files(fd);
			(void)unlinkat(d->runtime_dirfd, ELIDE_LEARN_HINTS_DIR, AT_REMOVEDIR);
		}
		if (fd >= 0)
			close(fd);
		return 0;
	}
	if (mkdirat(d->runtime_dirfd, ELIDE_LEARN_HINTS_DIR, 0755) < 0 && errno != EEXIST)
		return log_warning_errno(errno, "cannot create %s/%s: learned verdicts reach processes at adoption only",
					 d->runtime_dir, ELIDE_LEARN_HINTS_DIR),
		       0;
	fd = openat(d->runtime_dirfd, ELIDE_LEARN_HINTS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return log_warning_errno(errno, "cannot open %s/%s: learned verdicts reach processes at adoption only",
					 d->runtime_dir, ELIDE_LEARN_HINTS_DIR),
		       0;
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
		/* Made by a user before elided ran: libelide believes it
		 * only in that user's processes; we write nothing there. */
		log_error("%s/%s is not elided's (owner uid %u): learned verdicts reach processes at adoption only; "
			  "remove it and restart elided",
			  d->runtime_dir, ELIDE_LEARN_HINTS_DIR, (unsigned)st.st_uid);
		close(fd);
		return 0;
	}
	if ((st.st_mode & 07777) != 0755 && fchmod(fd, 0755) < 0) {
		log_warning_errno(errno, "cannot make %s/%s mode 0755", d->runtime_dir, ELIDE_LEARN_HINTS_DIR);
		close(fd);
		return 0;
	}
	d->hints_dirfd = fd;
	elided_hints_rewrite_all(d);
	elided_teach_scan(d);
	return 0;
}

/* At shutdown: without elided nobody folds .teach files in, so libelide
 * must not write them (it looks for the folder), and no verdict stays
 * that elided could no longer withdraw.  The next start writes them again. */
void elided_hints_remove(struct elided *d)
{
	if (d->hints_dirfd < 0)
		return;
	remove_files(d->hints_dirfd);
	if (unlinkat(d->runtime_dirfd, ELIDE_LEARN_HINTS_DIR, AT_REMOVEDIR) < 0 && errno != ENOENT)
		log_warning_errno(errno, "cannot remove %s/%s", d->runtime_dir, ELIDE_LEARN_HINTS_DIR);
	elided_hints_close(d);
}

void elided_hints_close(struct elided *d)
{
	if (d->hints_dirfd >= 0)
		close(d->hints_dirfd);
	d->hints_dirfd = -1;
}

/* ---- .hints files ----------------------------------------------------- */

struct hints_build {
	struct elide_learn_header header;
	struct elide_learn_hint hints[ELIDE_LEARN_MAX_HINTS];
};

static int add_hint(uid_t uid, const char *program, const char *lock, const struct learned_entry *e, void *userdata)
{
	struct hints_build *b = userdata;
	struct elide_learn_hint *h;

	(void)uid;
	(void)program;
	if (b->header.count >= ELIDE_LEARN_MAX_HINTS)
		return 1;
	h = &b->hints[b->header.count];
	memset(h, 0, sizeof(*h));
	if (elide_learn_lock_parse(lock, &h->lock) < 0)
		return 0;
	h->verdict = e->verdict == LEARNED_NEVER ? ELIDE_LEARN_NEVER : ELIDE_LEARN_ELIDES;
	h->until = learned_entry_probe_at(e);
	b->header.count++;
	return 0;
}

/*
 * Lets uid read the file, and nobody else but its owner: an access ACL
 * (acl(5)) of user::r--, user:UID:r--, group::---, mask::r--, other::---,
 * in the kernel's xattr format (linux/posix_acl_xattr.h), entries in tag
 * order.  Needs no capability (the file is ours), unlike a chown.
 */
static int grant_read(int fd, uid_t uid)
{
	struct {
		uint32_t version;
		struct {
			uint16_t tag, perm;
			uint32_t id;
		} e[5];
	} acl = {
		.version = 2,
		.e = {
			{ 0x01, 4, (uint32_t)-1 },  /* ACL_USER_OBJ */
			{ 0x02, 4, (uint32_t)uid }, /* ACL_USER */
			{ 0x04, 0, (uint32_t)-1 },  /* ACL_GROUP_OBJ */
			{ 0x10, 4, (uint32_t)-1 },  /* ACL_MASK */
			{ 0x20, 0, (uint32_t)-1 },  /* ACL_OTHER */
		},
	};

	return fsetxattr(fd, "system.posix_acl_access", &acl, sizeof(acl), 0);
}

void elided_hints_write(struct elided *d, uid_t uid, const char *program)
{
	_cleanup_free_ struct hints_build *b = NULL;
	char stem[ELIDE_LEARN_NAME_MAX], name[ELIDE_LEARN_NAME_MAX + 8], tmp[ELIDE_LEARN_NAME_MAX + 32];
	size_t len = strlen(program);
	int fd, r;

	if (d->hints_dirfd < 0 || !d->learned || len == 0 || len > ELIDE_LEARN_PROGRAM_MAX)
		return;
	elide_learn_stem((uint32_t)uid, program, len, stem, sizeof(stem));
	snprintf(name, sizeof(name), "%s%s", stem, ELIDE_LEARN_HINTS_SUFFIX);
	b = calloc(1, sizeof(*b));
	if (!b) {
		log_oom();
		return;
	}
	memcpy(b->header.magic, ELIDE_LEARN_HINTS_MAGIC, sizeof(b->header.magic));
	b->header.version = ELIDE_LEARN_VERSION;
	b->header.uid = (uint32_t)uid;
	b->header.written = (int64_t)time(NULL);
	b->header.program_len = (uint32_t)len;
	memcpy(b->header.program, program, len);
	learned_store_foreach_program(d->learned, uid, program, add_hint, b);
	if (b->header.count == 0) {
		if (unlinkat(d->hints_dirfd, name, 0) < 0 && errno != ENOENT)
			log_warning_errno(errno, "cannot remove %s/%s/%s", d->runtime_dir, ELIDE_LEARN_HINTS_DIR, name);
		return;
	}
	snprintf(tmp, sizeof(tmp), ".%s.%d", name, (int)getpid());
	(void)unlinkat(d->hints_dirfd, tmp, 0);
	fd = openat(d->hints_dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd < 0) {
		log_warning_errno(errno, "cannot write %s/%s/%s", d->runtime_dir, ELIDE_LEARN_HINTS_DIR, tmp);
		return;
	}
	r = fd_write_all(fd, b, sizeof(b->header) + b->header.count * sizeof(b->hints[0]));
	/* Only its user's processes read it (and root). */
	if (r == 0 && uid != geteuid() && grant_read(fd, uid) < 0) {
		r = -errno;
		if (!d->hints_acl_warned)
			log_warning_errno(r, "cannot let uid %u read its learned-verdict file (a POSIX ACL on %s): its "
					  "processes get learned verdicts at adoption only", (unsigned)uid, d->runtime_dir);
		d->hints_acl_warned = true;
	} else if (r < 0) {
		log_warning_errno(r, "cannot write %s/%s/%s", d->runtime_dir, ELIDE_LEARN_HINTS_DIR, tmp);
	}
	if (close(fd) < 0 && r == 0)
		r = log_warning_errno(errno, "cannot write %s/%s/%s", d->runtime_dir, ELIDE_LEARN_HINTS_DIR, tmp);
	if (r == 0 && renameat(d->hints_dirfd, tmp, d->hints_dirfd, name) < 0)
		r = log_warning_errno(errno, "cannot rename %s/%s/%s", d->runtime_dir, ELIDE_LEARN_HINTS_DIR, tmp);
	if (r < 0)
		(void)unlinkat(d->hints_dirfd, tmp, 0);
}

struct program_walk {
	struct elided *d;
	uid_t last_uid;
	char *last_program;
};

static int write_program(uid_t uid, const char *program, const char *lock, const struct learned_entry *e,
			 void *userdata)
{
	struct program_walk *w = userdata;

	(void)lock;
	(void)e;
	if (w->last_program && w->last_uid == uid && strcmp(w->last_program, program) == 0)
		return 0; /* entries come sorted by (uid, program) */
	free(w->last_program);
	w->last_program = strdup(program);
	if (!w->last_program)
		return -ENOMEM;
	w->last_uid = uid;
	elided_hints_write(w->d, uid, program);
	return 0;
}

void elided_hints_rewrite_all(struct elided *d)
{
	struct program_walk w = { .d = d };

	if (d->hints_dirfd < 0 || !d->learned)
		return;
	remove_files(d->hints_dirfd);
	if (learned_store_foreach(d->learned, write_program, &w) < 0)
		log_oom();
	free(w.last_program);
}

/* ---- .teach files ----------------------------------------------------- */

/* "UID-HASH.teach": the uid; -EINVAL for any other name. */
static int parse_teach_name(const char *name, uid_t *uid)
{
	size_t len = strlen(name), suffix = strlen(ELIDE_LEARN_TEACH_SUFFIX);
	const char *dash, *end;
	uint64_t u;

	if (len <= suffix || strcmp(name + len - suffix, ELIDE_LEARN_TEACH_SUFFIX) != 0)
		return -EINVAL;
	dash = strchr(name, '-');
	if (!dash)
		return -EINVAL;
	end = seg_parse_u64(name, &u);
	if (end != dash || u >= (uid_t)-1)
		return -EINVAL;
	if ((size_t)(name + len - suffix - (dash + 1)) != 16)
		return -EINVAL;
	for (const char *p = dash + 1; p < name + len - suffix; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return -EINVAL;
	*uid = (uid_t)u;
	return 0;
}

bool elided_is_teach_name(const char *name)
{
	uid_t uid;

	return parse_teach_name(name, &uid) == 0;
}

static uid_t file_owner_of(struct elided *d, const char *name)
{
	struct stat st;

	return fstatat(d->runtime_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_uid : (uid_t)-1;
}

static void refuse(struct elided *d, const char *name, uid_t owner, const char *why)
{
	log_uid(&d->ratelimit, owner, LOG_WARNING, "%s/%s: %s; removed, nothing learned from it", d->runtime_dir, name,
		why);
	(void)unlinkat(d->runtime_dirfd, name, 0);
}

void elided_teach_file(struct elided *d, const char *name)
{
	_cleanup_free_ char *buf = NULL;
	const struct elide_learn_header *h;
	char why[256], stem[ELIDE_LEARN_NAME_MAX], program[ELIDE_LEARN_PROGRAM_MAX + 1];
	struct stat st, now;
	uid_t uid;
	size_t got;
	int fd;

	if (d->runtime_dirfd < 0 || parse_teach_name(name, &uid) < 0)
		return;
	fd = openat(d->runtime_dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && errno == ELOOP) {
		refuse(d, name, file_owner_of(d, name), "a symbolic link");
		return;
	}
	if (fd < 0)
		return; /* gone already */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		refuse(d, name, (uid_t)-1, "not a regular file");
		return;
	}
	if (st.st_uid != uid) {
		close(fd);
		snprintf(why, sizeof(why), "owned by uid %u, named for uid %u", (unsigned)st.st_uid, (unsigned)uid);
		refuse(d, name, st.st_uid, why);
		return;
	}
	if ((size_t)st.st_size > ELIDE_LEARN_TEACH_FILE_MAX) {
		close(fd);
		snprintf(why, sizeof(why), "%jd bytes, more than %zu", (intmax_t)st.st_size,
			 (size_t)ELIDE_LEARN_TEACH_FILE_MAX);
		refuse(d, name, uid, why);
		return;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		log_oom();
		return;
	}
	got = fd_read_up_to(fd, buf, (size_t)st.st_size);
	close(fd);
	if (elide_learn_check_teach(buf, got, why, sizeof(why)) < 0) {
		refuse(d, name, uid, why);
		return;
	}
	h = (const void *)buf;
	memcpy(program, h->program, h->program_len);
	program[h->program_len] = '\0';
	elide_learn_stem(h->uid, program, h->program_len, stem, sizeof(stem));
	if (h->uid != uid || strncmp(name, stem, strlen(stem)) != 0) {
		snprintf(why, sizeof(why), "written for uid %u and another program than its name says",
			 (unsigned)h->uid);
		refuse(d, name, uid, why);
		return;
	}
	if (d->learned)
		elided_learn_from_teach(d, uid, program, (pid_t)h->pid, h->start_time, (const void *)(h + 1), h->count);
	/* Only the file read: a later run's may have replaced it meanwhile,
	 * and it brings an event of its own. */
	if (fstatat(d->runtime_dirfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == st.st_ino &&
	    now.st_dev == st.st_dev)
		(void)unlinkat(d->runtime_dirfd, name, 0);
}

void elided_teach_scan(struct elided *d)
{
	char *names[TEACH_SCAN_MAX];
	size_t n = 0;
	struct dirent *de;
	DIR *dir;
	int fd;

	if (d->runtime_dirfd < 0)
		return;
	fd = openat(d->runtime_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return;
	}
	while (n < TEACH_SCAN_MAX && (de = readdir(dir)))
		if (elided_is_teach_name(de->d_name) && (names[n] = strdup(de->d_name)))
			n++;
	closedir(dir);
	for (size_t i = 0; i < n; i++) {
		elided_teach_file(d, names[i]);
		free(names[i]);
	}
}
