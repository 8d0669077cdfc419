/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer harness: the input is /etc/elide.conf as an administrator (or
 * a configuration-management tool) might write it.  A line
 * "#--dropin--" splits it: what follows becomes elide.conf.d/10-fuzz.conf.
 * A configuration that loads is then asked for decisions, the way elided
 * asks for each process and lock.  A rejected one must say where.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz-util.h"
#include "policy-config.h"

#define DROPIN_MARK "\n#--dropin--\n"

static const struct process_identity idents[] = {
	{ "/usr/bin/memcached", "memcached", 0, NULL, NULL },
	{ "/usr/sbin/mariadbd", "mariadbd", 65534, "mariadb.service", "system.slice" },
	{ "/opt/batch/bin/run", "worker7", 1000, NULL, "batch-1.slice" },
	{ "", "", (uid_t)-1, "", "" },
};

static const char *const lock_names[] = { "stats_lock", "cache_lock", "", NULL };
static const char *const functions[] = { "do_stats", "f", NULL };

static void decide_all(const struct elide_config *cfg)
{
	for (size_t i = 0; i < sizeof(idents) / sizeof(idents[0]); i++) {
		struct policy_decision d;

		config_decide(cfg, &idents[i], &d);
		if (d.mode == POLICY_MODE_UNSET || !strcmp(policy_mode_to_string(d.mode), "invalid"))
			abort();
		for (size_t l = 0; l < sizeof(lock_names) / sizeof(lock_names[0]); l++)
			for (size_t f = 0; f < sizeof(functions) / sizeof(functions[0]); f++)
				(void)config_lock_mode(&d, lock_names[l], functions[f]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *mark = memmem(data, size, DROPIN_MARK, strlen(DROPIN_MARK));
	size_t main_size = mark ? (size_t)(mark - data) : size;
	char main_path[4096], dropin_dir[4096], err[CONFIG_ERR_MAX];
	struct elide_config *cfg = NULL;
	int r;

	fuzz_write("elide.conf", data, main_size);
	if (mark) {
		if (mkdirat(fuzz_dirfd(), "elide.conf.d", 0700) < 0 && errno != EEXIST)
			abort();
		fuzz_write("elide.conf.d/10-fuzz.conf", mark + strlen(DROPIN_MARK),
			   size - main_size - strlen(DROPIN_MARK));
	}
	snprintf(main_path, sizeof(main_path), "%s/elide.conf", fuzz_dir());
	snprintf(dropin_dir, sizeof(dropin_dir), "%s/elide.conf.d", fuzz_dir());

	err[0] = '\0';
	r = config_load(main_path, mark ? dropin_dir : NULL, &cfg, err, sizeof(err));
	if (r == 0) {
		if (!cfg || cfg->nfiles == 0)
			abort();
		decide_all(cfg);
		config_free(cfg);
	} else if (!err[0] || !memchr(err, '\0', sizeof(err)) || cfg) {
		/* Bad input gets a clear error (DESIGN.md, constraint 8). */
		fprintf(stderr, "fuzz-config: config_load %d without a message\n", r);
		abort();
	}

	if (mark) {
		unlinkat(fuzz_dirfd(), "elide.conf.d/10-fuzz.conf", 0);
		unlinkat(fuzz_dirfd(), "elide.conf.d", AT_REMOVEDIR);
	}
	unlinkat(fuzz_dirfd(), "elide.conf", 0);
	return 0;
}
