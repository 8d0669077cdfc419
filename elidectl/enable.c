/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl enable|disable --unit NAME | --system [--root DIR]: preload
 * libelide into one systemd service (a drop-in) or into every program
 * (/etc/ld.so.preload).
 *
 * A broken ld.so.preload entry breaks every program on the host, so
 * enable checks the library first (a root-owned regular file that is
 * not world-writable, an ELF shared object for this machine, and one that
 * /bin/true loads), writes every file atomically (temporary file, fsync,
 * rename), keeps every other line of ld.so.preload byte for byte, and
 * disable removes exactly the line it added.  Paths under --root are
 * opened component by component without following symlinks, so a
 * symlinked etc/ cannot redirect the writes to the live /etc.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elidectl.h"
#include "hw.h"
#include "log.h"

#define DROPIN_NAME "50-elide.conf"
#define PRELOAD_NAME "ld.so.preload"
#define UNIT_NAME_MAX 255
#define FILE_SIZE_MAX (1024 * 1024)
#define SYMLINKS_MAX 40
#define LOAD_TIMEOUT_MS 10000

/* What elidectl and libelide were built for: the library must match. */
#if defined(__x86_64__) && defined(__LP64__)
#define ELF_CLASS_WANT ELFCLASS64
#define ELF_MACHINE_WANT EM_X86_64
#define ELF_WANT_NAME "ELF64 x86-64"
#elif defined(__x86_64__)
#define ELF_CLASS_WANT ELFCLASS32
#define ELF_MACHINE_WANT EM_X86_64
#define ELF_WANT_NAME "ELF32 x32"
#elif defined(__i386__)
#define ELF_CLASS_WANT ELFCLASS32
#define ELF_MACHINE_WANT EM_386
#define ELF_WANT_NAME "ELF32 i386"
#elif defined(__aarch64__)
#define ELF_CLASS_WANT ELFCLASS64
#define ELF_MACHINE_WANT EM_AARCH64
#define ELF_WANT_NAME "ELF64 aarch64"
#else
#define ELF_CLASS_WANT (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)
#define ELF_MACHINE_WANT EM_NONE /* unknown here: not checked */
#define ELF_WANT_NAME "ELF"
#endif

struct enable_ctx {
	bool enable;
	const char *unit;      /* --unit, as given */
	char unit_name[UNIT_NAME_MAX + 1]; /* with its suffix */
	bool system;           /* --system */
	const char *mode;      /* --mode */
	const char *library;   /* --library, else NULL: find_libelide() */
	bool now;              /* --now */
	bool force;            /* --force: no RTM, or a unit not installed (yet) */
	char root[PATH_MAX];   /* --root, canonical */
	const char *prefix;    /* "" for "/", else root: host path = prefix + path */
	bool root_is_slash;
	int rootfd;
};

static void free_strv(char ***p)
{
	if (!*p)
		return;
	for (char **s = *p; *s; s++)
		free(*s);
	free(*p);
}

/* --- names and paths ---------------------------------------------------- */

static const char *const unit_suffixes[] = {
	"service", "socket", "device", "mount", "automount", "swap",
	"target", "path", "timer", "slice", "scope",
};

/* NAME → NAME.service unless it has a unit suffix; only services qualify. */
static int unit_name_normalize(const char *name, char *buf, size_t size)
{
	const char *dot;
	size_t len = strlen(name);

	if (len == 0 || len > UNIT_NAME_MAX) {
		log_error("invalid unit name '%s': 1 to %d characters", name, UNIT_NAME_MAX);
		return -EINVAL;
	}
	for (const char *p = name; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_.\\@-", *p)) {
			log_error("invalid unit name '%s': '%c' is not allowed (letters, digits, "
				  "and : _ . \\ @ -)", name, *p);
			return -EINVAL;
		}
	if (name[0] == '.' || strstr(name, "..")) {
		log_error("invalid unit name '%s': no leading '.', no '..'", name);
		return -EINVAL;
	}
	dot = strrchr(name, '.');
	for (size_t i = 0; dot && i < ARRAY_SIZE(unit_suffixes); i++) {
		if (strcmp(dot + 1, unit_suffixes[i]) != 0)
			continue;
		if (strcmp(unit_suffixes[i], "service") != 0) {
			log_error("'%s' is a %s: only services can preload libelide", name, unit_suffixes[i]);
			return -EINVAL;
		}
		if (dot == name || (dot == name + 1 && name[0] == '@')) {
			log_error("invalid unit name '%s'", name);
			return -EINVAL;
		}
		snprintf(buf, size, "%s", name);
		return 0;
	}
	if ((size_t)snprintf(buf, size, "%s.service", name) >= size || strlen(buf) > UNIT_NAME_MAX) {
		log_error("invalid unit name '%s': longer than %d characters with .service", name, UNIT_NAME_MAX);
		return -EINVAL;
	}
	return 0;
}

/* Bytes that ld.so splits LD_PRELOAD and ld.so.preload on, and those that
 * systemd would expand or unescape in Environment=. */
static int check_path_chars(const char *what, const char *path)
{
	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		if (*p <= ' ' || *p == 0x7f || strchr(":\"'\\%", *p)) {
			log_error("%s '%s': contains a space, a control character or one of : \" ' \\ %%, "
				  "which LD_PRELOAD or systemd would split or expand", what, path);
			return -EINVAL;
		}
	return 0;
}

/* Open the directory PATH (relative, '/'-separated) under dirfd, one
 * component at a time, never following a symlink. */
static int open_dir_nofollow(int dirfd, const char *path)
{
	_cleanup_free_ char *copy = strdup(path);
	int fd = -1;
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -errno;
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int next;

		if (strcmp(c, "..") == 0) {
			close(fd);
			return -EINVAL;
		}
		next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			int r = -errno;

			close(fd);
			return r;
		}
		close(fd);
		fd = next;
	}
	return fd;
}

/* The canonical path of the absolute PATH as seen inside the root: symlinks
 * are followed as the root sees them (absolute targets and ".." stop at the
 * root), so nothing resolves to a file outside it. */
static int resolve_in_root(int rootfd, const char *path, char **ret)
{
	_cleanup_free_ char *rest = strdup(path), *cur = malloc(PATH_MAX);
	size_t curlen = 0;
	unsigned links = 0;

	if (!rest || !cur)
		return -ENOMEM;
	cur[0] = '\0';
	for (;;) {
		char *c = rest, *end, target[PATH_MAX];
		struct stat st;
		size_t clen, oldlen = curlen;
		ssize_t n;

		while (*c == '/')
			c++;
		if (!*c)
			break;
		end = strchrnul(c, '/');
		clen = (size_t)(end - c);
		if (clen == 1 && c[0] == '.') {
			memmove(rest, end, strlen(end) + 1);
			continue;
		}
		if (clen == 2 && c[0] == '.' && c[1] == '.') {
			char *slash = strrchr(cur, '/');

			curlen = slash ? (size_t)(slash - cur) : 0;
			cur[curlen] = '\0';
			memmove(rest, end, strlen(end) + 1);
			continue;
		}
		if (curlen + 1 + clen >= PATH_MAX)
			return -ENAMETOOLONG;
		cur[curlen++] = '/';
		memcpy(cur + curlen, c, clen);
		curlen += clen;
		cur[curlen] = '\0';
		memmove(rest, end, strlen(end) + 1);

		/* cur + 1: relative to rootfd; every earlier component is no symlink. */
		if (fstatat(rootfd, cur + 1, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		if (!S_ISLNK(st.st_mode))
			continue;
		if (++links > SYMLINKS_MAX)
			return -ELOOP;
		n = readlinkat(rootfd, cur + 1, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		/* Replace the link by its target: from the root, or its directory. */
		curlen = target[0] == '/' ? 0 : oldlen;
		cur[curlen] = '\0';
		{
			size_t tlen = (size_t)n, rlen = strlen(rest);
			char *nrest = malloc(tlen + 1 + rlen + 1);

			if (!nrest)
				return -ENOMEM;
			memcpy(nrest, target, tlen);
			nrest[tlen] = '/';
			memcpy(nrest + tlen + 1, rest, rlen + 1);
			free(rest);
			rest = nrest;
		}
	}
	if (curlen == 0)
		strcpy(cur, "/");
	*ret = cur;
	cur = NULL;
	return 0;
}

/* --- files -------------------------------------------------------------- */

/* A regular file (no symlink) of at most FILE_SIZE_MAX bytes, NUL-terminated. */
static int read_file_at(int dirfd, const char *name, char **ret, size_t *ret_len, struct stat *ret_st)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, ret_st) < 0)
		return -errno;
	if (!S_ISREG(ret_st->st_mode))
		return -EBADFD;
	if (ret_st->st_size > FILE_SIZE_MAX)
		return -EFBIG;
	buf = malloc((size_t)ret_st->st_size + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + len, (size_t)ret_st->st_size - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0 || (len += (size_t)n) == (size_t)ret_st->st_size)
			break;
	}
	buf[len] = '\0';
	*ret_len = len;
	*ret = buf;
	buf = NULL;
	return 0;
}

static int write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Replace NAME in dirfd with DATA: a temporary file in the same directory,
 * fsync, rename over NAME, fsync the directory.  A crash leaves either the
 * old file or the new one, never a torn one.  OLD (may be NULL): keep its
 * owner. */
static int write_file_atomic_at(int dirfd, const char *name, const char *data, size_t len, mode_t mode,
				const struct stat *old)
{
	char tmp[NAME_MAX + 1];
	int fd = -1, r;

	for (unsigned i = 0; fd < 0; i++) {
		snprintf(tmp, sizeof(tmp), ".#%.200s.%ld.%u", name, (long)getpid(), i);
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && (errno != EEXIST || i >= 100))
			return -errno;
	}
	r = write_all(fd, data, len);
	if (r == 0 && fchmod(fd, mode) < 0)
		r = -errno;
	if (r == 0 && old && geteuid() == 0 && fchown(fd, old->st_uid, old->st_gid) < 0)
		r = -errno;
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dirfd, tmp, 0);
		return r;
	}
	(void)fsync(dirfd); /* the rename itself, durably */
	return 0;
}

/* --- the library checks ------------------------------------------------- */

static int check_elf(const char *path, int fd)
{
	unsigned char h[sizeof(Elf64_Ehdr)];
	uint16_t type, machine;
	ssize_t n;

	n = pread(fd, h, sizeof(h), 0);
	if (n < 0)
		return log_error_errno(errno, "%s: cannot read", path);
	if ((size_t)n < EI_NIDENT || memcmp(h, ELFMAG, SELFMAG) != 0) {
		log_error("%s: not an ELF file", path);
		return -ENOEXEC;
	}
	if ((size_t)n < (h[EI_CLASS] == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr))) {
		log_error("%s: truncated ELF header", path);
		return -ENOEXEC;
	}
	if (h[EI_CLASS] != ELF_CLASS_WANT || h[EI_DATA] != ELFDATA2LSB) {
		log_error("%s: ELF%s %s, this machine needs " ELF_WANT_NAME, path,
			  h[EI_CLASS] == ELFCLASS32 ? "32" : h[EI_CLASS] == ELFCLASS64 ? "64" : "?",
			  h[EI_DATA] == ELFDATA2LSB ? "little-endian" : "big-endian");
		return -ENOEXEC;
	}
	/* e_type and e_machine: the same offsets in ELF32 and ELF64. */
	memcpy(&type, h + offsetof(Elf64_Ehdr, e_type), sizeof(type));
	memcpy(&machine, h + offsetof(Elf64_Ehdr, e_machine), sizeof(machine));
	if (ELF_MACHINE_WANT != EM_NONE && machine != ELF_MACHINE_WANT) {
		log_error("%s: built for ELF machine %u, this machine needs " ELF_WANT_NAME, path, machine);
		return -ENOEXEC;
	}
	if (type != ET_DYN) {
		log_error("%s: not a shared object (ELF type %u)", path, type);
		return -ENOEXEC;
	}
	return 0;
}

/* The environment of the load check: ours, with LD_PRELOAD=lib and a
 * libelide that keeps its statistics and report to itself. */
static char **load_check_env(const char *lib)
{
	extern char **environ;
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 3, sizeof(char *));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(environ[i], "LD_PRELOAD=", 11) == 0 || strncmp(environ[i], "ELIDE=", 6) == 0)
			continue;
		if (!(env[k++] = strdup(environ[i])))
			goto oom;
	}
	if (asprintf(&env[k++], "LD_PRELOAD=%s", lib) < 0) {
		env[k - 1] = NULL;
		goto oom;
	}
	if (!(env[k++] = strdup("ELIDE=stats=0,report=0")))
		goto oom;
	return env;
oom:
	free_strv(&env);
	return NULL;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Run /bin/true with LIB preloaded (inside the root with CHROOT_DIR): it
 * must exit 0 without ld.so's "cannot be preloaded".  ld.so only warns
 * about a preload it cannot load and runs the program anyway, hence the
 * look at stderr. */
static int load_check(const char *lib, const char *chroot_dir)
{
	static char *const args[] = { (char *)"true", NULL };
	char **env _cleanup_(free_strv) = load_check_env(lib);
	char err[4096], *nl;
	size_t errlen = 0;
	int pipefd[2], status, r = 0;
	int64_t deadline;
	pid_t pid;

	if (!env)
		return log_oom();
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return log_error_errno(errno, "cannot create a pipe");
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return log_error_errno(r, "cannot fork");
	}
	if (pid == 0) {
		/* Async-signal-safe calls only. */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
		    dup2(pipefd[1], STDERR_FILENO) < 0)
			_exit(126);
		if (chroot_dir && (chroot(chroot_dir) < 0 || chdir("/") < 0)) {
			static const char msg[] = "elidectl: cannot chroot\n";

			(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
			_exit(126);
		}
		execve("/bin/true", args, env);
		_exit(127);
	}
	close(pipefd[1]);
	deadline = now_ms() + LOAD_TIMEOUT_MS;
	for (;;) {
		struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
		int64_t left = deadline - now_ms();
		char chunk[1024];
		ssize_t n;

		if (left <= 0) {
			kill(pid, SIGKILL);
			r = -ETIMEDOUT;
			break;
		}
		n = poll(&p, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			continue;
		n = read(pipefd[0], chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		/* Keep the beginning: ld.so's message comes first. */
		if (errlen < sizeof(err) - 1) {
			size_t take = (size_t)n < sizeof(err) - 1 - errlen ? (size_t)n : sizeof(err) - 1 - errlen;

			memcpy(err + errlen, chunk, take);
			errlen += take;
		}
	}
	close(pipefd[0]);
	err[errlen] = '\0';
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return log_error_errno(errno, "cannot wait for /bin/true");
	if (r == -ETIMEDOUT) {
		log_error("%s does not load: /bin/true with it preloaded did not finish in %d s", lib,
			  LOAD_TIMEOUT_MS / 1000);
		return r;
	}
	/* Messages are single lines: show the first. */
	for (size_t i = 0; i < errlen; i++)
		if (err[i] == '\0')
			err[i] = ' ';
	nl = strchr(err, '\n');
	if (nl)
		*nl = '\0';
	if (strstr(err, "cannot be preloaded")) {
		log_error("%s does not load: %s", lib, err);
		return -ENOEXEC;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFSIGNALED(status))
			log_error("%s does not load: /bin/true with it preloaded was killed by signal %d%s%s",
				  lib, WTERMSIG(status), *err ? ": " : "", err);
		else
			log_error("%s does not load: /bin/true with it preloaded exited with status %d%s%s",
				  lib, WEXITSTATUS(status), *err ? ": " : "", err);
		return -ENOEXEC;
	}
	if (*err)
		log_debug("/bin/true with %s preloaded said: %s", lib, err);
	return 0;
}

/* All the checks; LIB is the path as seen inside the root. */
static int check_library(const struct enable_ctx *c, const char *lib)
{
	_cleanup_free_ char *canon = NULL, *host = NULL, *chroot_true = NULL;
	_cleanup_close_ int fd = -1;
	const char *chroot_dir = NULL;
	struct stat st;
	int r;

	if (lib[0] != '/') {
		log_error("library '%s': not an absolute path", lib);
		return -EINVAL;
	}
	r = check_path_chars("library", lib);
	if (r < 0)
		return r;
	r = resolve_in_root(c->rootfd, lib, &canon);
	if (r < 0)
		return log_error_errno(r, "library %s%s", c->prefix, lib);
	if (asprintf(&host, "%s%s", c->prefix, canon) < 0)
		return log_oom();
	fd = openat(c->rootfd, canon[1] ? canon + 1 : ".", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return log_error_errno(errno, "library %s", host);
	if (fstat(fd, &st) < 0)
		return log_error_errno(errno, "library %s", host);
	if (!S_ISREG(st.st_mode)) {
		log_error("library %s: not a regular file", host);
		return -EINVAL;
	}
	if (st.st_mode & S_IWOTH) {
		log_error("library %s: world-writable (mode %04o): anyone could take over every program",
			  host, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	if (c->root_is_slash && st.st_uid != 0) {
		log_error("library %s: owned by uid %u, not root", host, (unsigned)st.st_uid);
		return -EPERM;
	}
	r = check_elf(host, fd);
	if (r < 0)
		return r;

	r = check_path_chars("library", host);
	if (r < 0)
		return r;
	if (!c->root_is_slash) {
		/* Inside the root when it has its own /bin/true and we may chroot. */
		if (geteuid() == 0 && resolve_in_root(c->rootfd, "/bin/true", &chroot_true) == 0)
			chroot_dir = c->root;
		if (chroot_dir)
			printf("Checking that %s loads: /bin/true in %s (chroot)\n", lib, c->root);
		else
			printf("Checking that %s loads: this host's /bin/true with LD_PRELOAD=%s "
			       "(%s has no /bin/true, or no chroot without root)\n", lib, host, c->root);
	}
	r = load_check(chroot_dir ? canon : host, chroot_dir);
	if (r < 0)
		return r;
	log_debug("library %s: %s shared object, loads", host, ELF_WANT_NAME);
	return 0;
}

/* The library path inside the root: --library, else what run uses. */
static int library_path(const struct enable_ctx *c, char *buf, size_t size, bool must_exist)
{
	int r;

	if (c->library) {
		snprintf(buf, size, "%s", c->library);
		return 0;
	}
	r = find_libelide(buf, size);
	if (r < 0 && must_exist && c->root_is_slash)
		return log_error_errno(r, "cannot find libelide.so (last tried %s; use --library or ELIDE_LIBDIR)",
				       buf);
	if (buf[0] != '/') {
		log_error("libelide.so at '%s': not an absolute path (use --library)", buf);
		return -EINVAL;
	}
	return 0;
}

/* --- is there anything to do? -------------------------------------------- */

/* Where systemd looks for units, as seen inside the root. */
static const char *const unit_dirs[] = {
	"etc/systemd/system", "run/systemd/system", "run/systemd/transient", "run/systemd/generator",
	"run/systemd/generator.early", "run/systemd/generator.late", "usr/local/lib/systemd/system",
	"usr/lib/systemd/system", "lib/systemd/system",
};

/* Whether the root has the unit (or, for NAME@INSTANCE.service, its
 * template): 0 yes, -ENOENT no. */
static int unit_installed(const struct enable_ctx *c)
{
	char template[UNIT_NAME_MAX + 1] = "";
	const char *at = strchr(c->unit_name, '@');
	struct stat st;

	if (at && at[1] != '.')
		snprintf(template, sizeof(template), "%.*s@%s", (int)(at - c->unit_name), c->unit_name,
			 strrchr(c->unit_name, '.'));
	for (size_t i = 0; i < ARRAY_SIZE(unit_dirs); i++) {
		_cleanup_close_ int fd = open_dir_nofollow(c->rootfd, unit_dirs[i]);

		if (fd >= 0 && (fstatat(fd, c->unit_name, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
				(template[0] && fstatat(fd, template, &st, AT_SYMLINK_NOFOLLOW) == 0)))
			return 0;
	}
	return -ENOENT;
}

/*
 * Whether this CPU can elide; when not, says plainly what preloading
 * libelide into `who` would do here.  Shared with run.
 */
bool rtm_usable_or_say(const char *who)
{
	struct elide_hw hw;

	elide_hw_detect(&hw);
	if (hw.rtm_usable)
		return true;
	log_warning("nothing can be elided on this machine: RTM is not usable (%s)", hw.reason);
	log_warning("libelide in %s would elide nothing and watch instead: each process shows up in "
		    "elidectl list as \"watching\", with the waiting and hold times of its contended locks "
		    "(elidectl show, elidectl candidates; ELIDE=watch=0 passes every lock straight through "
		    "to glibc; elidectl hw says more)", who);
	return false;
}

/* --- systemctl ---------------------------------------------------------- */

static int run_systemctl(const char *verb, const char *unit)
{
	char *const args[] = { (char *)"systemctl", (char *)verb, (char *)unit, NULL };
	int status;
	pid_t pid;

	printf("Running: systemctl %s%s%s\n", verb, unit ? " " : "", unit ? unit : "");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return log_error_errno(errno, "cannot fork");
	if (pid == 0) {
		execvp(args[0], args);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return log_error_errno(errno, "cannot wait for systemctl");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		log_error("systemctl %s%s%s failed", verb, unit ? " " : "", unit ? unit : "");
		return -EIO;
	}
	return 0;
}

/* After the drop-in changed: tell what to run, or run it (--now).  The
 * drop-in stays whatever systemctl says: it is what was asked for. */
static int apply_now(const struct enable_ctx *c, const char *dropin)
{
	const char *what = c->enable ? "enabled" : "disabled";
	int r;

	if (!c->now) {
		printf("To apply it, run: systemctl daemon-reload && systemctl restart %s\n", c->unit_name);
		return EXIT_OK;
	}
	r = run_systemctl("daemon-reload", NULL);
	if (r < 0) {
		if (c->enable)
			log_error("the drop-in %s stays in place, but %s runs without libelide until systemd "
				  "reloads its units", dropin, c->unit_name);
		else
			log_error("the drop-in %s is removed, but %s keeps libelide until systemd reloads its "
				  "units", dropin, c->unit_name);
		log_error("once systemd answers, run: systemctl daemon-reload && systemctl restart %s%s%s%s",
			  c->unit_name, c->enable ? " (or undo with: elidectl disable --unit " : "",
			  c->enable ? c->unit_name : "", c->enable ? ")" : "");
		return EXIT_FAIL;
	}
	r = run_systemctl("try-restart", c->unit_name);
	if (r < 0) {
		log_error("%s is %s (%s) and systemd reloaded, but the restart failed: run systemctl restart %s, "
			  "and see systemctl status %s", c->unit_name, what, dropin, c->unit_name, c->unit_name);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* --- the verbs ---------------------------------------------------------- */

static int enable_unit(struct enable_ctx *c)
{
	_cleanup_free_ char *content = NULL, *old = NULL;
	_cleanup_close_ int sysfd = -1, dfd = -1;
	char lib[PATH_MAX], dname[UNIT_NAME_MAX + 3];
	char dropin[PATH_MAX + UNIT_NAME_MAX + 64];
	struct stat st;
	size_t oldlen;
	int r, len;

	if (unit_installed(c) < 0) {
		if (!c->force) {
			log_error("no unit %s is installed%s%s (none in /etc/systemd/system, /run/systemd, "
				  "/usr/local/lib/systemd/system or /usr/lib/systemd/system): nothing to preload "
				  "libelide into", c->unit_name, c->root_is_slash ? "" : " under ", c->prefix);
			log_error("check the name (systemctl list-unit-files '*.service'), or give --force to "
				  "write the drop-in for a unit installed later");
			return EXIT_NOT_FOUND;
		}
		log_warning("no unit %s on this system yet (--force): the drop-in takes effect once it is "
			    "installed", c->unit_name);
	}
	if (c->root_is_slash)
		rtm_usable_or_say(c->unit_name);
	if (library_path(c, lib, sizeof(lib), true) < 0 || check_library(c, lib) < 0)
		return EXIT_FAIL;
	len = asprintf(&content,
		       "# Written by elidectl enable: preload libelide (hardware lock elision)\n"
		       "# into %s.  Undo with: elidectl disable --unit %s\n"
		       "[Service]\n"
		       "Environment=LD_PRELOAD=%s\n"
		       "%s%s%s",
		       c->unit_name, c->unit_name, lib,
		       c->mode ? "Environment=ELIDE=mode=" : "", c->mode ? c->mode : "", c->mode ? "\n" : "");
	if (len < 0)
		return log_oom(), EXIT_FAIL;

	sysfd = open_dir_nofollow(c->rootfd, "etc/systemd/system");
	if (sysfd == -ELOOP || sysfd == -ENOTDIR) {
		log_error("%s/etc/systemd/system: a symlink or not a directory: refusing to write through it",
			  c->prefix);
		return EXIT_FAIL;
	}
	if (sysfd < 0) {
		log_error_errno(sysfd, "%s/etc/systemd/system", c->prefix);
		return EXIT_FAIL;
	}
	snprintf(dname, sizeof(dname), "%s.d", c->unit_name);
	if (mkdirat(sysfd, dname, 0755) < 0 && errno != EEXIST) {
		log_error_errno(errno, "cannot create %s/etc/systemd/system/%s", c->prefix, dname);
		return EXIT_FAIL;
	}
	dfd = openat(sysfd, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		log_error_errno(errno, "%s/etc/systemd/system/%s", c->prefix, dname);
		return EXIT_FAIL;
	}
	r = read_file_at(dfd, DROPIN_NAME, &old, &oldlen, &st);
	if (r == 0 && oldlen == (size_t)len && memcmp(old, content, oldlen) == 0) {
		printf("%s: already enabled (%s/etc/systemd/system/%s/" DROPIN_NAME ")\n", c->unit_name,
		       c->prefix, dname);
		return EXIT_OK;
	}
	if (r < 0 && r != -ENOENT) {
		log_error_errno(r, "%s/etc/systemd/system/%s/" DROPIN_NAME, c->prefix, dname);
		return EXIT_FAIL;
	}
	r = write_file_atomic_at(dfd, DROPIN_NAME, content, (size_t)len, 0644, NULL);
	if (r < 0) {
		log_error_errno(r, "cannot write %s/etc/systemd/system/%s/" DROPIN_NAME, c->prefix, dname);
		return EXIT_FAIL;
	}
	snprintf(dropin, sizeof(dropin), "%s/etc/systemd/system/%s/" DROPIN_NAME, c->prefix, dname);
	printf("%s %s: %s runs with LD_PRELOAD=%s%s%s\n", old ? "Updated" : "Created", dropin, c->unit_name, lib,
	       c->mode ? " ELIDE=mode=" : "", c->mode ? c->mode : "");
	return apply_now(c, dropin);
}

static int disable_unit(struct enable_ctx *c)
{
	_cleanup_close_ int sysfd = -1, dfd = -1;
	char dname[UNIT_NAME_MAX + 3], dropin[PATH_MAX + UNIT_NAME_MAX + 64];

	snprintf(dname, sizeof(dname), "%s.d", c->unit_name);
	sysfd = open_dir_nofollow(c->rootfd, "etc/systemd/system");
	if (sysfd >= 0)
		dfd = openat(sysfd, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sysfd == -ENOENT || (sysfd >= 0 && dfd < 0 && errno == ENOENT)) {
		printf("%s: not enabled\n", c->unit_name);
		return EXIT_OK;
	}
	if (sysfd < 0 || dfd < 0) {
		log_error_errno(sysfd < 0 ? sysfd : errno, "%s/etc/systemd/system%s%s", c->prefix,
				sysfd < 0 ? "" : "/", sysfd < 0 ? "" : dname);
		return EXIT_FAIL;
	}
	if (unlinkat(dfd, DROPIN_NAME, 0) < 0) {
		if (errno == ENOENT) {
			printf("%s: not enabled\n", c->unit_name);
			return EXIT_OK;
		}
		log_error_errno(errno, "cannot remove %s/etc/systemd/system/%s/" DROPIN_NAME, c->prefix, dname);
		return EXIT_FAIL;
	}
	(void)fsync(dfd);
	snprintf(dropin, sizeof(dropin), "%s/etc/systemd/system/%s/" DROPIN_NAME, c->prefix, dname);
	printf("Removed %s\n", dropin);
	/* The directory too, when nothing else is in it. */
	if (unlinkat(sysfd, dname, AT_REMOVEDIR) == 0) {
		(void)fsync(sysfd);
		printf("Removed %s/etc/systemd/system/%s\n", c->prefix, dname);
	} else if (errno != ENOTEMPTY && errno != EEXIST) {
		log_warning_errno(errno, "cannot remove %s/etc/systemd/system/%s", c->prefix, dname);
	}
	return apply_now(c, dropin);
}

/* Whether [line, line+len) is exactly LIB. */
static bool line_is(const char *line, size_t len, const char *lib)
{
	return len == strlen(lib) && memcmp(line, lib, len) == 0;
}

static int open_etc(const struct enable_ctx *c)
{
	int fd = open_dir_nofollow(c->rootfd, "etc");

	if (fd == -ELOOP || fd == -ENOTDIR)
		log_error("%s/etc: a symlink or not a directory: refusing to write through it", c->prefix);
	else if (fd < 0)
		log_error_errno(fd, "%s/etc", c->prefix);
	return fd;
}

static int read_preload(const struct enable_ctx *c, int etcfd, char **ret, size_t *ret_len, struct stat *st)
{
	int r = read_file_at(etcfd, PRELOAD_NAME, ret, ret_len, st);

	if (r == -ENOENT) {
		*ret = NULL;
		*ret_len = 0;
		return 0;
	}
	if (r < 0) {
		log_error_errno(r, "%s/etc/" PRELOAD_NAME "%s", c->prefix,
				r == -ELOOP ? " (a symlink)" : r == -EBADFD ? " (not a regular file)" : "");
		return r;
	}
	return 1;
}

static int enable_system(struct enable_ctx *c)
{
	_cleanup_free_ char *old = NULL, *new = NULL;
	_cleanup_close_ int etcfd = -1;
	char lib[PATH_MAX];
	struct stat st;
	size_t oldlen, newlen, liblen;
	int r, exists;

	/* Every program on the host for nothing: only when asked twice.  An
	 * image under --root may be meant for other hardware. */
	if (c->root_is_slash && !rtm_usable_or_say("every program") && !c->force) {
		log_error("refusing to preload libelide into every program on a machine that cannot elide; "
			  "give --force to do it anyway");
		return EXIT_FAIL;
	}
	if (library_path(c, lib, sizeof(lib), true) < 0 || check_library(c, lib) < 0)
		return EXIT_FAIL;
	etcfd = open_etc(c);
	if (etcfd < 0)
		return EXIT_FAIL;
	exists = read_preload(c, etcfd, &old, &oldlen, &st);
	if (exists < 0)
		return EXIT_FAIL;
	for (size_t i = 0; i < oldlen;) {
		const char *nl = memchr(old + i, '\n', oldlen - i);
		size_t end = nl ? (size_t)(nl - old) : oldlen;

		if (line_is(old + i, end - i, lib)) {
			printf("%s: already enabled in %s/etc/" PRELOAD_NAME "\n", lib, c->prefix);
			return EXIT_OK;
		}
		i = end + 1;
	}
	liblen = strlen(lib);
	new = malloc(oldlen + 1 + liblen + 2);
	if (!new)
		return log_oom(), EXIT_FAIL;
	if (oldlen)
		memcpy(new, old, oldlen);
	newlen = oldlen;
	if (newlen && new[newlen - 1] != '\n')
		new[newlen++] = '\n';
	memcpy(new + newlen, lib, liblen);
	newlen += liblen;
	new[newlen++] = '\n';
	r = write_file_atomic_at(etcfd, PRELOAD_NAME, new, newlen, exists ? st.st_mode & 07777 : 0644,
				 exists ? &st : NULL);
	if (r < 0) {
		log_error_errno(r, "cannot write %s/etc/" PRELOAD_NAME, c->prefix);
		return EXIT_FAIL;
	}
	printf("Added %s to %s/etc/" PRELOAD_NAME ": programs started from now on preload libelide.\n"
	       "Undo with: elidectl disable --system%s%s\n",
	       lib, c->prefix, c->root_is_slash ? "" : " --root ", c->root_is_slash ? "" : c->root);
	return EXIT_OK;
}

static int disable_system(struct enable_ctx *c)
{
	_cleanup_free_ char *old = NULL, *new = NULL;
	_cleanup_close_ int etcfd = -1;
	char lib[PATH_MAX];
	struct stat st;
	size_t oldlen, newlen = 0;
	unsigned removed = 0;
	int r, exists;

	if (library_path(c, lib, sizeof(lib), false) < 0)
		return EXIT_FAIL;
	etcfd = open_etc(c);
	if (etcfd < 0)
		return EXIT_FAIL;
	exists = read_preload(c, etcfd, &old, &oldlen, &st);
	if (exists < 0)
		return EXIT_FAIL;
	new = malloc(oldlen + 1);
	if (!new)
		return log_oom(), EXIT_FAIL;
	for (size_t i = 0, line = 1; i < oldlen; line++) {
		const char *nl = memchr(old + i, '\n', oldlen - i);
		size_t end = nl ? (size_t)(nl - old) + 1 : oldlen;

		if (line_is(old + i, end - i - (nl ? 1 : 0), lib)) {
			removed++;
		} else {
			/* A libelide we did not add, or added under another path. */
			if (memmem(old + i, end - i, "libelide", 8))
				printf("Note: line %zu of %s/etc/" PRELOAD_NAME " also names a libelide: %.*s\n",
				       line, c->prefix, (int)(end - i - (nl ? 1 : 0)), old + i);
			memcpy(new + newlen, old + i, end - i);
			newlen += end - i;
		}
		i = end;
	}
	if (!removed) {
		printf("%s: not enabled in %s/etc/" PRELOAD_NAME "\n", lib, c->prefix);
		return EXIT_OK;
	}
	if (newlen == 0) {
		if (unlinkat(etcfd, PRELOAD_NAME, 0) < 0) {
			log_error_errno(errno, "cannot remove %s/etc/" PRELOAD_NAME, c->prefix);
			return EXIT_FAIL;
		}
		(void)fsync(etcfd);
		printf("Removed %s from %s/etc/" PRELOAD_NAME ", and the file, now empty.\n", lib, c->prefix);
		return EXIT_OK;
	}
	r = write_file_atomic_at(etcfd, PRELOAD_NAME, new, newlen, st.st_mode & 07777, &st);
	if (r < 0) {
		log_error_errno(r, "cannot write %s/etc/" PRELOAD_NAME, c->prefix);
		return EXIT_FAIL;
	}
	printf("Removed %s from %s/etc/" PRELOAD_NAME "\n", lib, c->prefix);
	return EXIT_OK;
}

static void enable_help(const char *verb)
{
	bool enable = strcmp(verb, "enable") == 0;

	printf("Usage: elidectl %s --unit NAME [--root DIR] [--library PATH]%s [--now]\n"
	       "       elidectl %s --system [--root DIR] [--library PATH]%s\n"
	       "See elidectl --help and elidectl(1).\n",
	       verb, enable ? " [--mode MODE] [--force]" : "", verb, enable ? " [--force]" : "");
}

/* Returns 1 to go on, else an exit status. */
static int parse_enable_argv(int argc, char **argv, struct enable_ctx *c)
{
	enum { ARG_UNIT = 0x100, ARG_SYSTEM, ARG_ROOT, ARG_MODE, ARG_LIBRARY, ARG_NOW, ARG_FORCE };
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "unit", required_argument, NULL, ARG_UNIT },
		{ "system", no_argument, NULL, ARG_SYSTEM },
		{ "root", required_argument, NULL, ARG_ROOT },
		{ "mode", required_argument, NULL, ARG_MODE },
		{ "library", required_argument, NULL, ARG_LIBRARY },
		{ "now", no_argument, NULL, ARG_NOW },
		{ "force", no_argument, NULL, ARG_FORCE },
		{}
	};
	const char *verb = argv[0], *root = "/";
	int ch;

	optind = 0; /* glibc: start afresh, past elidectl's own options */
	while ((ch = getopt_long(argc, argv, "hv", options, NULL)) >= 0) {
		switch (ch) {
		case 'h':
			enable_help(verb);
			return EXIT_OK;
		case 'v':
			log_set_max_priority(LOG_DEBUG);
			break;
		case ARG_UNIT:
			c->unit = optarg;
			break;
		case ARG_SYSTEM:
			c->system = true;
			break;
		case ARG_ROOT:
			root = optarg;
			break;
		case ARG_MODE:
			c->mode = optarg;
			break;
		case ARG_LIBRARY:
			c->library = optarg;
			break;
		case ARG_NOW:
			c->now = true;
			break;
		case ARG_FORCE:
			c->force = true;
			break;
		default:
			log_error("%s: invalid option or missing argument: '%s'; see --help", verb, argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		log_error("%s: unexpected argument '%s'", verb, argv[optind]);
		return EXIT_USAGE;
	}
	if (!!c->unit == c->system) {
		log_error("%s: one of --unit NAME or --system", verb);
		return EXIT_USAGE;
	}
	if (c->mode && (!c->enable || c->system)) {
		log_error("--mode applies to enable --unit only");
		return EXIT_USAGE;
	}
	if (c->mode && strcmp(c->mode, "on") != 0 && strcmp(c->mode, "off") != 0 &&
	    strcmp(c->mode, "adaptive") != 0 && strcmp(c->mode, "watch") != 0) {
		log_error("invalid mode '%s': expected off, on, adaptive or watch", c->mode);
		return EXIT_USAGE;
	}
	if (c->library && c->library[0] != '/') {
		log_error("--library: '%s' must be an absolute path as seen inside the root", c->library);
		return EXIT_USAGE;
	}
	if (c->library && check_path_chars("--library", c->library) < 0)
		return EXIT_USAGE;
	if (c->library && c->unit && !c->enable) {
		log_error("--library: not used by disable --unit");
		return EXIT_USAGE;
	}
	if (c->now && c->system) {
		log_error("--now applies to --unit only");
		return EXIT_USAGE;
	}
	if (c->force && !c->enable) {
		log_error("--force applies to enable only");
		return EXIT_USAGE;
	}
	if (c->unit && unit_name_normalize(c->unit, c->unit_name, sizeof(c->unit_name)) < 0)
		return EXIT_USAGE;
	if (!*root) {
		log_error("--root: empty path");
		return EXIT_USAGE;
	}
	if (!realpath(root, c->root)) {
		log_error_errno(errno, "--root %s", root);
		return EXIT_USAGE;
	}
	c->root_is_slash = strcmp(c->root, "/") == 0;
	c->prefix = c->root_is_slash ? "" : c->root;
	if (c->now && !c->root_is_slash) {
		log_error("--now: only with --root / (systemctl manages the running system)");
		return EXIT_USAGE;
	}
	c->rootfd = open(c->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->rootfd < 0) {
		log_error_errno(errno, "--root %s", c->root);
		return EXIT_USAGE;
	}
	return 1;
}

static int enable_disable(bool enable, int argc, char **argv)
{
	struct enable_ctx c = { .enable = enable, .rootfd = -1 };
	int r;

	r = parse_enable_argv(argc, argv, &c);
	if (r == 1) {
		if (c.system)
			r = enable ? enable_system(&c) : disable_system(&c);
		else
			r = enable ? enable_unit(&c) : disable_unit(&c);
	}
	if (c.rootfd >= 0)
		close(c.rootfd);
	return r;
}

int verb_enable(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	(void)s;
	(void)o;
	return enable_disable(true, argc, argv);
}

int verb_disable(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	(void)s;
	(void)o;
	return enable_disable(false, argc, argv);
}
