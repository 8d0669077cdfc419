/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl check-config [FILE]: validate a configuration the way elided
 * loads it (FILE, then the *.conf files in FILE.d; for the system's, also
 * /run/elide.conf.d and /usr/lib/elide.conf.d), without the daemon.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "elidectl.h"
#include "json.h"
#include "log.h"
#include "policy-config.h"

int verb_check_config(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	const char *path = SYSCONFDIR "/elide.conf";
	char err[CONFIG_ERR_MAX] = "", *dropins = NULL;
	struct elide_config *cfg = NULL;
	struct stat st;
	int r;

	(void)s;
	if (argc > 2) {
		log_error("check-config takes at most one FILE");
		return EXIT_USAGE;
	}
	if (argc == 2) {
		path = argv[1];
		/* Named explicitly, it must exist: config_load would take a
		 * missing main file for "drop-ins only". */
		if (stat(path, &st) < 0) {
			r = -errno;
			snprintf(err, sizeof(err), "%s: %s", path, strerror(-r));
			goto invalid;
		}
	}
	if (asprintf(&dropins, "%s.d", path) < 0) {
		log_oom();
		return EXIT_FAIL;
	}
	{
		/* As elided reads the system's: with /run's and /usr/lib's
		 * drop-ins; another FILE has its FILE.d only. */
		bool system = strcmp(path, SYSCONFDIR "/elide.conf") == 0;
		const char *dirs[] = { dropins, system ? CONFIG_RUNTIME_DROPIN_DIR : NULL, CONFIG_VENDOR_DROPIN_DIR,
				       NULL };

		r = config_load_dirs(path, dirs, &cfg, err, sizeof(err));
	}
	free(dropins);
	if (r < 0)
		goto invalid;

	if (o->json) {
		struct json j;

		json_init(&j, stdout, o->json_pretty);
		json_begin_object(&j);
		json_key(&j, "valid");
		json_bool(&j, true);
		json_key(&j, "files");
		json_begin_array(&j);
		for (size_t i = 0; i < cfg->nfiles && i < CONFIG_MAX_FILES; i++)
			json_string(&j, cfg->files[i]);
		json_end_array(&j);
		json_key(&j, "programs");
		json_uint(&j, cfg->nprograms);
		json_key(&j, "interval");
		json_double(&j, cfg->interval);
		json_end_object(&j);
		r = json_finish(&j);
	} else {
		for (size_t i = 0; i < cfg->nfiles && i < CONFIG_MAX_FILES; i++)
			printf("%s\n", cfg->files[i]);
		if (o->legend)
			printf("configuration OK: %zu file%s, %zu program rule%s\n", cfg->nfiles,
			       cfg->nfiles == 1 ? "" : "s", cfg->nprograms, cfg->nprograms == 1 ? "" : "s");
	}
	config_free(cfg);
	return r < 0 ? EXIT_FAIL : EXIT_OK;

invalid:
	if (!err[0])
		snprintf(err, sizeof(err), "%s: %s", path, strerror(-r));
	/* "FILE:LINE: what" alone, as compilers do, so editors can jump there. */
	fprintf(stderr, "%s\n", err);
	if (o->json) {
		struct json j;

		json_init(&j, stdout, o->json_pretty);
		json_begin_object(&j);
		json_key(&j, "valid");
		json_bool(&j, false);
		/* The first error, then every one (up to 20, and "N more errors"). */
		json_key(&j, "error");
		{
			size_t n = strcspn(err, "\n");
			char first[CONFIG_ERR_LINE_MAX + 64];

			snprintf(first, sizeof(first), "%.*s", (int)n, err);
			json_string(&j, first);
		}
		json_key(&j, "errors");
		json_begin_array(&j);
		for (const char *e = err; *e;) {
			size_t n = strcspn(e, "\n");
			char line[CONFIG_ERR_LINE_MAX + 64];

			snprintf(line, sizeof(line), "%.*s", (int)n, e);
			json_string(&j, line);
			e += n;
			e += *e == '\n';
		}
		json_end_array(&j);
		json_end_object(&j);
		json_finish(&j);
	}
	return EXIT_FAIL;
}
