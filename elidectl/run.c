/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl run [--mode M] [--] CMD ARGS...: exec CMD with libelide
 * preloaded.  The library is $ELIDE_LIBDIR/libelide.so, else the build
 * tree's next to this elidectl, else the installed one.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elidectl.h"
#include "log.h"

#ifndef LIBDIR
#define LIBDIR "/usr/local/lib"
#endif

/* $ELIDE_LIBDIR, else the build tree next to this elidectl, else LIBDIR. */
int find_libelide(char *buf, size_t size)
{
	char self[PATH_MAX];
	const char *dir = getenv("ELIDE_LIBDIR");
	ssize_t n;
	char *slash;

	if (dir && *dir) {
		snprintf(buf, size, "%s/libelide.so", dir);
		return access(buf, R_OK) == 0 ? 0 : -errno;
	}
	/* Build tree: BUILDDIR/elidectl/elidectl next to BUILDDIR/libelide/.libs. */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			if ((size_t)snprintf(buf, size, "%s/../libelide/.libs/libelide.so", self) < size &&
			    access(buf, R_OK) == 0) {
				char real[PATH_MAX];

				if (realpath(buf, real))
					snprintf(buf, size, "%s", real);
				return 0;
			}
		}
	}
	snprintf(buf, size, "%s/libelide.so", LIBDIR);
	return access(buf, R_OK) == 0 ? 0 : -errno;
}

/* ELIDE with every mode= entry dropped and mode=M appended. */
static char *merge_elide(const char *old, const char *mode)
{
	size_t size = (old ? strlen(old) : 0) + strlen(mode) + 8;
	char *out = malloc(size), *copy = old ? strdup(old) : NULL, *save = NULL;

	if (!out || (old && !copy)) {
		free(out);
		free(copy);
		return NULL;
	}
	out[0] = '\0';
	for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
		if (strncmp(tok, "mode=", 5) == 0 || !*tok)
			continue;
		strcat(out, tok);
		strcat(out, ",");
	}
	strcat(out, "mode=");
	strcat(out, mode);
	free(copy);
	return out;
}

int verb_run(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	const char *mode = NULL, *preload;
	char lib[PATH_MAX], *value;
	int i = 1, r;

	(void)s;
	(void)o;
	/* Our options end at the command: its own are not ours. */
	while (i < argc && argv[i][0] == '-') {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
			mode = argv[i + 1];
			i += 2;
		} else if (strncmp(argv[i], "--mode=", 7) == 0) {
			mode = argv[i] + 7;
			i++;
		} else {
			log_error("run: unknown option '%s' (--mode MODE, or -- before the command)", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (i >= argc) {
		log_error("usage: run [--mode off|on|adaptive|watch] [--] COMMAND [ARGS...]");
		return EXIT_USAGE;
	}
	if (mode && strcmp(mode, "on") != 0 && strcmp(mode, "off") != 0 && strcmp(mode, "adaptive") != 0 &&
	    strcmp(mode, "watch") != 0) {
		log_error("invalid mode '%s': expected off, on, adaptive or watch", mode);
		return EXIT_USAGE;
	}
	r = find_libelide(lib, sizeof(lib));
	if (r < 0) {
		log_error_errno(r, "cannot find libelide.so (last tried %s; set ELIDE_LIBDIR)", lib);
		return EXIT_FAIL;
	}
	/* Runs anyway: the command is what was asked for.  Not for mode=off,
	 * which elides nothing by design, nor with simulated aborts. */
	if ((!mode || strcmp(mode, "off") != 0) && !getenv("ELIDE_SIM_ABORT"))
		rtm_usable_or_say(argv[i]);
	preload = getenv("LD_PRELOAD");
	if (preload && *preload) {
		if (asprintf(&value, "%s %s", preload, lib) < 0)
			return log_oom(), EXIT_FAIL;
	} else if (!(value = strdup(lib)))
		return log_oom(), EXIT_FAIL;
	if (setenv("LD_PRELOAD", value, 1) < 0) {
		free(value);
		return log_oom(), EXIT_FAIL;
	}
	free(value);
	if (mode) {
		value = merge_elide(getenv("ELIDE"), mode);
		if (!value || setenv("ELIDE", value, 1) < 0) {
			free(value);
			return log_oom(), EXIT_FAIL;
		}
		free(value);
	}
	fflush(stdout);
	execvp(argv[i], argv + i);
	r = -errno;
	log_error_errno(r, "cannot run %s", argv[i]);
	/* As the shell does: 127 not found, 126 not executable. */
	return r == -ENOENT ? 127 : 126;
}
