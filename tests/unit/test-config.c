/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided's policy configuration: the built-in default, the example of
 * policy-config.h, drop-in order and overrides, the three drop-in
 * directories (systemd's rules: by name, the earliest directory's file, a
 * link to /dev/null masking), every class of error with
 * its "FILE:LINE:" and the caller's pointer left alone, and the shipped
 * conf/elide.conf (which must say exactly the built-in default).
 */
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macros.h"
#include "policy-config.h"

static char top_dir[] = "/tmp/test-config-XXXXXX";
static char user_name[256];

/* A sentinel that config_load must never overwrite on error. */
static struct elide_config sentinel_cfg;
#define SENTINEL (&sentinel_cfg)

static char *path_in(const char *rel)
{
	char *p;

	ck_assert_int_ge(asprintf(&p, "%s/%s", top_dir, rel), 0);
	return p;
}

/* Writes `content` to `rel` under the test directory; returns the path. */
static char *write_file(const char *rel, const char *content)
{
	char *p = path_in(rel);
	FILE *f = fopen(p, "we");

	ck_assert_msg(f, "%s: %s", p, strerror(errno));
	ck_assert_int_eq(fputs(content, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
	return p;
}

static char *make_dir(const char *rel)
{
	char *p = path_in(rel);

	ck_assert_msg(mkdir(p, 0755) == 0 || errno == EEXIST, "%s: %s", p, strerror(errno));
	return p;
}

static struct elide_config *load_ok(const char *main_path, const char *dropin_dir)
{
	struct elide_config *cfg = NULL;
	char err[CONFIG_ERR_MAX] = "";
	int r;

	r = config_load(main_path, dropin_dir, &cfg, err, sizeof(err));
	ck_assert_msg(r == 0, "config_load: %d (%s)", r, err);
	ck_assert_ptr_nonnull(cfg);
	return cfg;
}

static void assert_builtin_values(const struct elide_config *cfg)
{
	ck_assert_double_eq(cfg->interval, 1.0);
	ck_assert_uint_eq(cfg->max_segments_per_uid, 64);
	ck_assert_int_eq(cfg->observe_lock_waits, OBSERVE_LOCK_WAITS_AUTO);
	ck_assert_int_eq(cfg->default_mode, POLICY_MODE_ADAPTIVE);
	ck_assert_double_eq(cfg->default_knobs.max_abort_ratio, 0.5);
	ck_assert_uint_eq(cfg->default_knobs.min_aborts, 1000);
	ck_assert_uint_eq(cfg->default_knobs.retries_plus1, 0);
	ck_assert_uint_eq(cfg->default_knobs.contention, 0);
	ck_assert_uint_eq(cfg->default_knobs.skip, 0);
	ck_assert_uint_eq(cfg->default_knobs.skip_max, 0);
	ck_assert_uint_eq(cfg->nprograms, 0);
}

static struct process_identity ident(const char *exe, const char *comm, uid_t uid, const char *unit,
				     const char *slice)
{
	return (struct process_identity){ .exe = exe, .comm = comm, .uid = uid, .unit = unit, .slice = slice };
}

START_TEST(test_builtin_default)
{
	struct elide_config *cfg = NULL;
	struct policy_decision d;
	struct process_identity id = ident("/usr/bin/true", "true", 0, NULL, NULL);
	_cleanup_free_ char *missing = path_in("does-not-exist.conf");
	_cleanup_free_ char *missing_dir = path_in("does-not-exist.d");

	ck_assert_int_eq(config_default(&cfg), 0);
	assert_builtin_values(cfg);
	ck_assert_uint_eq(cfg->nfiles, 1);
	ck_assert_str_eq(cfg->files[0], "(built-in default)");
	config_decide(cfg, &id, &d);
	ck_assert_int_eq(d.mode, POLICY_MODE_ADAPTIVE);
	ck_assert_ptr_null(d.rule);
	ck_assert_int_eq(config_lock_mode(&d, "anything", "fn"), POLICY_MODE_UNSET);
	config_free(cfg);

	/* No main file and no drop-in directory: the same. */
	cfg = load_ok(missing, missing_dir);
	assert_builtin_values(cfg);
	ck_assert_uint_eq(cfg->nfiles, 1);
	ck_assert_str_eq(cfg->files[0], "(built-in default)");
	config_free(cfg);

	cfg = load_ok(NULL, NULL);
	ck_assert_str_eq(cfg->files[0], "(built-in default)");
	config_free(cfg);
}
END_TEST

START_TEST(test_example)
{
	_cleanup_free_ char *text = NULL, *path = NULL;
	struct elide_config *cfg;
	struct policy_decision d;
	struct process_identity id;
	uid_t me = getuid(), other = getuid() + 4242;

	ck_assert_int_ge(asprintf(&text,
				  "daemon:  { interval = 1.0; max_segments_per_uid = 64; };\n"
				  "default: { mode = \"adaptive\"; max_abort_ratio = 0.5; min_aborts = 1000; };\n"
				  "program = (\n"
				  "  { exe = \"/usr/bin/memcached\"; lock = ( { name = \"stats_lock\"; mode = \"off\"; } ); },\n"
				  "  { unit = \"mariadb.service\"; mode = \"off\"; },\n"
				  "  { comm = \"worker*\"; user = \"%s\"; mode = \"on\"; }\n"
				  ");\n",
				  user_name), 0);
	path = write_file("example.conf", text);
	cfg = load_ok(path, NULL);
	ck_assert_uint_eq(cfg->nprograms, 3);
	ck_assert_uint_eq(cfg->nfiles, 1);
	ck_assert_str_eq(cfg->files[0], path);
	ck_assert_uint_eq(cfg->programs[2].uid, me);
	ck_assert_str_eq(cfg->programs[2].user, user_name);

	/* memcached: its rule, default mode, one lock off. */
	id = ident("/usr/bin/memcached", "memcached", other, NULL, NULL);
	config_decide(cfg, &id, &d);
	ck_assert_ptr_eq(d.rule, &cfg->programs[0]);
	ck_assert_int_eq(d.mode, POLICY_MODE_ADAPTIVE);
	ck_assert_double_eq(d.knobs.max_abort_ratio, 0.5);
	ck_assert_uint_eq(d.knobs.min_aborts, 1000);
	ck_assert_int_eq(config_lock_mode(&d, "stats_lock", "do_stats"), POLICY_MODE_OFF);
	ck_assert_int_eq(config_lock_mode(&d, "stats_lock", NULL), POLICY_MODE_OFF);
	ck_assert_int_eq(config_lock_mode(&d, "cache_lock", "do_item_get"), POLICY_MODE_UNSET);
	ck_assert_int_eq(config_lock_mode(&d, NULL, NULL), POLICY_MODE_UNSET);

	/* A process of mariadb.service. */
	id = ident("/usr/sbin/mariadbd", "mariadbd", other, "mariadb.service", "system.slice");
	config_decide(cfg, &id, &d);
	ck_assert_ptr_eq(d.rule, &cfg->programs[1]);
	ck_assert_int_eq(d.mode, POLICY_MODE_OFF);

	/* worker7 of the configured user, and of someone else. */
	id = ident("/opt/batch/bin/run", "worker7", me, NULL, NULL);
	config_decide(cfg, &id, &d);
	ck_assert_ptr_eq(d.rule, &cfg->programs[2]);
	ck_assert_int_eq(d.mode, POLICY_MODE_ON);
	id.uid = other;
	config_decide(cfg, &id, &d);
	ck_assert_ptr_null(d.rule);
	ck_assert_int_eq(d.mode, POLICY_MODE_ADAPTIVE);

	/* Unmatched: the default. */
	id = ident("/usr/bin/vim", "vim", me, "session-1.scope", "user-1000.slice");
	config_decide(cfg, &id, &d);
	ck_assert_ptr_null(d.rule);
	ck_assert_int_eq(d.mode, POLICY_MODE_ADAPTIVE);
	ck_assert_double_eq(d.knobs.max_abort_ratio, 0.5);
	ck_assert_int_eq(config_lock_mode(&d, "stats_lock", NULL), POLICY_MODE_UNSET);

	config_free(cfg);
}
END_TEST

START_TEST(test_matching_and_merge)
{
	_cleanup_free_ char *path = NULL;
	struct elide_config *cfg;
	struct policy_decision d;
	struct process_identity id;

	path = write_file("match.conf",
			  "default: { retries = 5; skip = 100; max_abort_ratio = 0.25; };\n"
			  "program = (\n"
			  "  { slice = \"batch-*.slice\"; contention = 8; max_abort_ratio = 0.0; },\n"
			  "  { exe = \"/opt/*\"; comm = \"srv\"; mode = \"off\";\n"
			  "    lock = ( { name = \"a*\"; function = \"f*\"; mode = \"on\"; },\n"
			  "             { function = \"g\"; mode = \"adaptive\"; },\n"
			  "             { name = \"a*\"; mode = \"off\"; } ); },\n"
			  "  { user = 0; retries = 0; },\n"
			  "  { user = \"4000000000\"; skip_max = 7; }\n"
			  ");\n");
	cfg = load_ok(path, NULL);
	ck_assert_uint_eq(cfg->nprograms, 4);

	/* A slice criterion never matches a process outside one. */
	id = ident("/opt/x", "srv", 1, NULL, NULL);
	config_decide(cfg, &id, &d);
	ck_assert_ptr_eq(d.rule, &cfg->programs[1]);
	id.slice = "";
	config_decide(cfg, &id, &d);
	ck_assert_ptr_eq(d.rule, &cfg->programs[1]);

	/* '*' crosses '/' in exe (FNM_PATHNAME is not used). */
	id = ident("/opt/sub/dir/x", "srv", 1, NULL, NULL);
	config_decide(cfg, &id, &d);
	ck_assert_ptr_eq(d.rule, &cfg->programs[1]);
	ck_assert_int_eq(d.mode, POLICY_MODE_OFF);
	ck_assert_uint_eq(d.knobs.retries_plus1, 6);
	ck_assert_uint_eq(d.knobs.skip, 100);
	ck_assert_double_eq(d.knobs.max_abort_ratio, 0.25);
	/* Lock rules: both patterns when both given, first match wins. */
	ck_assert_int_eq(config_lock_mode(&d, "abc", "foo"), POLICY_MODE_ON);
	ck_assert_int_eq(config_lock_mode(&d, "abc", "bar"), POLICY_MODE_OFF);
	ck_assert_int_eq(config_lock_mode(&d, "abc", NULL), POLICY_MODE_OFF);
	ck_assert_int_eq(config_lock_mode(&d, "abc", ""), POLICY_MODE_OFF);
	ck_assert_int_eq(config_lock_mode(&d, "zzz", "g"), POLICY_MODE_ADAPTIVE);
	ck_assert_int_eq(config_lock_mode(&d, "zzz", "h"), POLICY_MODE_UNSET);

	/* Two criteria: both must match. */
	id.comm = "other";
	config_decide(cfg, &id, &d);
	ck_assert_ptr_null(d.rule);

	/* Rule knobs over default knobs; a ratio of 0 is a value, not "unset". */
	id = ident("/bin/sh", "sh", 1, "x.service", "batch-3.slice");
	config_decide(cfg, &id, &d);
	ck_assert_ptr_eq(d.rule, &cfg->programs[0]);
	ck_assert_int_eq(d.mode, POLICY_MODE_ADAPTIVE);
	ck_assert_uint_eq(d.knobs.contention, 8);
	ck_assert_uint_eq(d.knobs.retries_plus1, 6);
	ck_assert_double_eq(d.knobs.max_abort_ratio, 0.0);
	ck_assert_uint_eq(d.knobs.min_aborts, 1000);

	/* Numeric users, as an integer and as a string; retries = 0 is kept. */
	id = ident("/bin/sh", "sh", 0, NULL, NULL);
	config_decide(cfg, &id, &d);
	ck_assert_ptr_eq(d.rule, &cfg->programs[2]);
	ck_assert_uint_eq(d.knobs.retries_plus1, 1);
	id.uid = 4000000000u;
	config_decide(cfg, &id, &d);
	ck_assert_ptr_eq(d.rule, &cfg->programs[3]);
	ck_assert_uint_eq(d.knobs.skip_max, 7);

	config_free(cfg);
}
END_TEST

START_TEST(test_dropins)
{
	_cleanup_free_ char *main_path = NULL, *dir = NULL, *a = NULL, *b = NULL, *junk1 = NULL,
			    *junk2 = NULL, *junk3 = NULL, *subdir = NULL;
	struct elide_config *cfg;

	main_path = write_file("main.conf", "daemon: { interval = 2.0; max_segments_per_uid = 10; };\n"
					    "program = ( { comm = \"m\"; } );\n");
	dir = make_dir("main.conf.d");
	/* Written out of order on purpose. */
	b = write_file("main.conf.d/20-b.conf", "daemon: { interval = 4; };\nprogram = ( { comm = \"b\"; } );\n");
	a = write_file("main.conf.d/10-a.conf", "daemon: { interval = 3.0; };\n"
						"default: { mode = \"off\"; };\n"
						"program = ( { comm = \"a\"; } );\n");
	junk1 = write_file("main.conf.d/30-c.conf.disabled", "this is not libconfig\n");
	junk2 = write_file("main.conf.d/README", "nor is this\n");
	junk3 = write_file("main.conf.d/.hidden.conf", "nor this\n");
	subdir = make_dir("main.conf.d/40-dir.conf");

	cfg = load_ok(main_path, dir);
	ck_assert_double_eq(cfg->interval, 4.0);
	ck_assert_uint_eq(cfg->max_segments_per_uid, 10);
	ck_assert_int_eq(cfg->default_mode, POLICY_MODE_OFF);
	ck_assert_uint_eq(cfg->nfiles, 3);
	ck_assert_str_eq(cfg->files[0], main_path);
	ck_assert_str_eq(cfg->files[1], a);
	ck_assert_str_eq(cfg->files[2], b);
	ck_assert_uint_eq(cfg->nprograms, 3);
	ck_assert_str_eq(cfg->programs[0].comm, "m");
	ck_assert_str_eq(cfg->programs[1].comm, "a");
	ck_assert_str_eq(cfg->programs[2].comm, "b");
	ck_assert_int_eq(strncmp(cfg->programs[1].where, a, strlen(a)), 0);
	config_free(cfg);

	/* Drop-ins alone. */
	cfg = load_ok(NULL, dir);
	ck_assert_double_eq(cfg->interval, 4.0);
	ck_assert_uint_eq(cfg->max_segments_per_uid, 64);
	ck_assert_uint_eq(cfg->nfiles, 2);
	ck_assert_str_eq(cfg->files[0], a);
	config_free(cfg);
}
END_TEST

/*
 * The system's three drop-in directories (/etc, /run, /usr/lib in
 * elide.conf(5)), here under the test directory: every name once, in the
 * names' order across the directories, the earliest directory's file for a
 * name, a link to /dev/null there dropping the name, and a missing
 * directory or a NULL ending the list.
 */
START_TEST(test_vendor_dirs)
{
	_cleanup_free_ char *etc = NULL, *run = NULL, *usr = NULL, *etc_20 = NULL, *run_30 = NULL, *usr_10 = NULL,
			    *usr_20 = NULL, *usr_30 = NULL, *usr_40 = NULL, *run_40 = NULL, *etc_60 = NULL,
			    *usr_50 = NULL, *masked = NULL, *none = NULL;
	const char *dirs[5];
	struct elide_config *cfg = NULL;
	char err[CONFIG_ERR_MAX] = "";

	etc = make_dir("etc.d");
	run = make_dir("run.d");
	usr = make_dir("usr.d");
	none = path_in("missing.d");
	/* The vendor's: 10 kept, 20 replaced by /etc's, 30 by /run's, 40 by
	 * /run's (a link to /dev/null there drops it), 50 dropped by /etc. */
	usr_10 = write_file("usr.d/10-vendor.conf", "daemon: { interval = 2.0; };\nprogram = ( { comm = \"u10\"; } );\n");
	usr_20 = write_file("usr.d/20-tune.conf", "program = ( { comm = \"u20\"; } );\n");
	usr_30 = write_file("usr.d/30-x.conf", "program = ( { comm = \"u30\"; } );\n");
	usr_40 = write_file("usr.d/40-y.conf", "program = ( { comm = \"u40\"; } );\n");
	usr_50 = write_file("usr.d/50-z.conf", "this is not libconfig and must never be read\n");
	etc_20 = write_file("etc.d/20-tune.conf", "daemon: { interval = 5.0; };\nprogram = ( { comm = \"e20\"; } );\n");
	run_30 = write_file("run.d/30-x.conf", "program = ( { comm = \"r30\"; } );\n");
	run_40 = path_in("run.d/40-y.conf");
	ck_assert_int_eq(symlink("/dev/null", run_40), 0);
	masked = path_in("etc.d/50-z.conf");
	ck_assert_int_eq(symlink("/dev/null", masked), 0);
	etc_60 = write_file("etc.d/60-admin.conf", "default: { mode = \"off\"; };\n");

	dirs[0] = etc;
	dirs[1] = run;
	dirs[2] = none;
	dirs[3] = usr;
	dirs[4] = NULL;
	ck_assert_msg(config_load_dirs(NULL, dirs, &cfg, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(cfg->nfiles, 4);
	ck_assert_str_eq(cfg->files[0], usr_10);
	ck_assert_str_eq(cfg->files[1], etc_20);
	ck_assert_str_eq(cfg->files[2], run_30);
	ck_assert_str_eq(cfg->files[3], etc_60);
	ck_assert_uint_eq(cfg->nprograms, 3);
	ck_assert_str_eq(cfg->programs[0].comm, "u10");
	ck_assert_str_eq(cfg->programs[1].comm, "e20");
	ck_assert_str_eq(cfg->programs[2].comm, "r30");
	/* /etc's 20 comes after the vendor's 10: its interval wins. */
	ck_assert_double_eq(cfg->interval, 5.0);
	ck_assert_int_eq(cfg->default_mode, POLICY_MODE_OFF);
	config_free(cfg);

	/* A NULL ends the list: /etc alone.  50-z.conf's link masks nothing
	 * there and is no file: nothing is read for it. */
	dirs[1] = NULL;
	cfg = NULL;
	ck_assert_msg(config_load_dirs(NULL, dirs, &cfg, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(cfg->nfiles, 2);
	ck_assert_str_eq(cfg->files[0], etc_20);
	ck_assert_str_eq(cfg->files[1], etc_60);
	config_free(cfg);

	/* Without /etc's link the vendor's broken 50 is read, and named. */
	ck_assert_int_eq(unlink(masked), 0);
	dirs[0] = etc;
	dirs[1] = run;
	cfg = SENTINEL;
	ck_assert_int_eq(config_load_dirs(NULL, dirs, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_msg(strncmp(err, usr_50, strlen(usr_50)) == 0, "error does not name %s: %s", usr_50, err);

	/* config_load() is config_load_dirs() with one directory. */
	cfg = load_ok(NULL, run);
	ck_assert_uint_eq(cfg->nfiles, 1);
	ck_assert_str_eq(cfg->files[0], run_30);
	config_free(cfg);
	unlink(run_40);
}
END_TEST

/* One malformed configuration: the line the error must name and a word of it. */
struct bad_case {
	const char *text;
	int line;
	const char *needle;
};

static const struct bad_case bad_cases[] = {
	/* unknown keys, at every level */
	{ "daemon: { interval = 1.0; };\nfoo = 1;\n", 2, "unknown top-level key \"foo\"" },
	{ "daemon: {\n  interval = 1.0;\n  speed = 2;\n};\n", 3, "unknown key \"speed\" in daemon" },
	{ "daemon: {\n  observe_lock_waits = 1;\n};\n", 2,
	  "observe_lock_waits: expected true, false or \"auto\", got an integer" },
	{ "daemon: {\n  observe_lock_waits = \"yes\";\n};\n", 2,
	  "observe_lock_waits: expected true, false or \"auto\", got \"yes\"" },
	{ "default: {\n  mode = \"watch\";\n  colour = 2;\n};\n", 3, "unknown key \"colour\" in default" },
	{ "default: {\n  mode = \"on\";\n  colour = 2;\n};\n", 3, "unknown key \"colour\" in default" },
	{ "program = (\n  { exe = \"/bin/x\";\n    colour = \"red\"; }\n);\n", 3, "unknown key \"colour\" in program" },
	{ "program = (\n { exe = \"/bin/x\";\n  lock = (\n   { name = \"a\"; mode = \"off\";\n     weight = 2; }\n  ); }\n);\n",
	  5, "unknown key \"weight\" in lock" },
	/* wrong types */
	{ "default: {\n  mode = 3;\n};\n", 2, "mode: expected a string" },
	{ "daemon: {\n  interval = \"x\";\n};\n", 2, "interval: expected a number" },
	{ "default: {\n  retries = 1.5;\n};\n", 2, "retries: expected an integer" },
	{ "daemon = 1;\n", 1, "daemon: expected a group" },
	{ "program = { exe = \"/bin/x\"; };\n", 1, "program: expected a list" },
	{ "program = (\n  \"x\" );\n", 2, "expected a group" },
	{ "program = (\n  { exe = \"/bin/x\"; lock = { name = \"a\"; mode = \"on\"; }; }\n);\n", 2, "lock: expected a list" },
	{ "program = (\n  { exe = true; }\n);\n", 2, "exe: expected a string" },
	{ "program = (\n  { user = 1.0; }\n);\n", 2, "user: expected a user name or uid" },
	/* bad values */
	{ "default: {\n  mode = \"sometimes\";\n};\n", 2, "invalid mode \"sometimes\"" },
	{ "daemon: {\n\n  interval = 0.0;\n};\n", 3, "interval: 0 out of range" },
	{ "daemon: {\n  interval = 3601;\n};\n", 2, "out of range" },
	{ "daemon: {\n  max_segments_per_uid = 0;\n};\n", 2, "max_segments_per_uid: 0 out of range" },
	{ "default: {\n  max_abort_ratio = 1.5;\n};\n", 2, "max_abort_ratio: 1.5 out of range" },
	{ "default: {\n  min_aborts = 0;\n};\n", 2, "min_aborts: 0 out of range" },
	{ "program = (\n  { comm = \"x\";\n    retries = 65; }\n);\n", 3, "retries: 65 out of range" },
	{ "program = (\n  { comm = \"x\"; contention = 0; }\n);\n", 2, "contention: 0 out of range" },
	{ "program = (\n  { comm = \"x\"; skip = 1000001; }\n);\n", 2, "skip: 1000001 out of range" },
	{ "program = (\n  { comm = \"x\"; skip_max = 100000001; }\n);\n", 2, "skip_max: 100000001 out of range" },
	/* missing pieces */
	{ "program = (\n  { comm = \"x\"; },\n  { mode = \"off\"; }\n);\n", 3, "needs at least one of" },
	{ "program = (\n  { comm = \"x\";\n    lock = ( { mode = \"off\"; } ); }\n);\n", 3, "needs \"name\" and/or \"function\"" },
	{ "program = (\n  { comm = \"x\";\n    lock = (\n      { name = \"a\"; } ); }\n);\n", 4, "\"mode\" is required" },
	/* patterns and users */
	{ "program = (\n  { exe = \"[abc\"; }\n);\n", 2, "exe: bad glob \"[abc\": unbalanced '['" },
	{ "program = (\n  { comm = \"\"; }\n);\n", 2, "comm: empty pattern" },
	{ "program = (\n  { unit = \"a\\\\\"; }\n);\n", 2, "unit: bad glob" },
	{ "program = (\n  { slice = \"[[:nope:]]\"; }\n);\n", 2, "unknown character class" },
	{ "program = (\n  { comm = \"x\"; lock = ( { function = \"f[\"; mode = \"on\"; } ); }\n);\n", 2,
	  "function: bad glob" },
	{ "program = (\n  { user = \"no-such-user-xyz\"; }\n);\n", 2, "unknown user \"no-such-user-xyz\"" },
	{ "program = (\n  { user = -1; }\n);\n", 2, "user: -1 out of range" },
	/* syntax, duplicates */
	{ "daemon: { interval = ; };\n", 1, "syntax error" },
	{ "daemon: {\n  interval = 1.0;\n  interval = 2.0;\n};\n", 3, "duplicate setting" },
};

START_TEST(test_errors)
{
	const struct bad_case *c = &bad_cases[_i];
	_cleanup_free_ char *name = NULL, *path = NULL, *prefix = NULL;
	struct elide_config *cfg = SENTINEL;
	char err[CONFIG_ERR_MAX] = "";
	int r;

	ck_assert_int_ge(asprintf(&name, "bad-%d.conf", _i), 0);
	path = write_file(name, c->text);
	ck_assert_int_ge(asprintf(&prefix, "%s:%d: ", path, c->line), 0);

	r = config_load(path, NULL, &cfg, err, sizeof(err));
	ck_assert_msg(r == -EINVAL, "case %d: r=%d err=%s", _i, r, err);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0, "case %d: \"%s\" does not start with \"%s\"", _i,
		      err, prefix);
	ck_assert_msg(strstr(err, c->needle), "case %d: \"%s\" lacks \"%s\"", _i, err, c->needle);
	/* One mistake, one message: no second error made up from the first. */
	ck_assert_msg(!strchr(err, '\n'), "case %d: more than one error: \"%s\"", _i, err);
}
END_TEST

/* The number of lines of `err`, and its line `n` (from 0) in `buf`. */
static unsigned err_lines(const char *err)
{
	unsigned n = *err ? 1 : 0;

	for (; *err; err++)
		n += *err == '\n';
	return n;
}

static const char *err_line(const char *err, unsigned n, char *buf, size_t size)
{
	while (n-- > 0) {
		err = strchr(err, '\n');
		ck_assert_ptr_nonnull(err);
		err++;
	}
	snprintf(buf, size, "%.*s", (int)strcspn(err, "\n"), err);
	return buf;
}

/* Every error of a file in one load, in order, each FILE:LINE (issue 32). */
START_TEST(test_multiple_errors)
{
	static const struct {
		unsigned line;
		const char *needle;
	} want[] = {
		{ 2, "interval: 0.01 out of range" },
		{ 3, "unknown key \"bogus\" in daemon" },
		{ 6, "invalid mode \"sometimes\"" },
		{ 7, "contention: 0 out of range" },
		{ 10, "invalid mode \"fast\"" },
		{ 11, "needs at least one of" },
		{ 13, "\"mode\" is required" },
		{ 14, "needs \"name\" and/or \"function\"" },
		{ 15, "name: bad glob \"[a\"" },
		{ 18, "unknown top-level key \"extra\"" },
	};
	_cleanup_free_ char *path = NULL;
	struct elide_config *cfg = SENTINEL;
	char err[CONFIG_ERR_MAX] = "", line[CONFIG_ERR_LINE_MAX + 64], *prefix;

	path = write_file("many-errors.conf",
			  "daemon: {\n"                                             /* 1 */
			  "  interval = 0.01;\n"                                    /* 2 */
			  "  bogus = 1;\n"                                          /* 3 */
			  "};\n"                                                    /* 4 */
			  "default: {\n"                                            /* 5 */
			  "  mode = \"sometimes\";\n"                               /* 6 */
			  "  contention = 0;\n"                                     /* 7 */
			  "};\n"                                                    /* 8 */
			  "program = (\n"                                           /* 9 */
			  "  { exe = \"/usr/bin/a\"; mode = \"fast\"; },\n"          /* 10 */
			  "  { mode = \"on\"; },\n"                                 /* 11 */
			  "  { comm = \"ok\"; lock = (\n"                           /* 12 */
			  "      { name = \"a\"; },\n"                              /* 13 */
			  "      { mode = \"on\"; },\n"                             /* 14 */
			  "      { name = \"[a\"; mode = \"off\"; } ); },\n"        /* 15 */
			  "  { comm = \"fine\"; mode = \"watch\"; }\n"              /* 16 */
			  ");\n"                                                    /* 17 */
			  "extra = 1;\n");                                          /* 18 */

	ck_assert_int_eq(config_load(path, NULL, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_msg(err_lines(err) == sizeof(want) / sizeof(want[0]), "%u errors, expected %zu: %s", err_lines(err),
		      sizeof(want) / sizeof(want[0]), err);
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		err_line(err, i, line, sizeof(line));
		ck_assert_int_ge(asprintf(&prefix, "%s:%u: ", path, want[i].line), 0);
		ck_assert_msg(strncmp(line, prefix, strlen(prefix)) == 0, "error %u: \"%s\" does not start with \"%s\"",
			      i, line, prefix);
		ck_assert_msg(strstr(line, want[i].needle), "error %u: \"%s\" lacks \"%s\"", i, line, want[i].needle);
		free(prefix);
	}
}
END_TEST

/* At most CONFIG_MAX_ERRORS in full, then how many more. */
START_TEST(test_error_cap)
{
	_cleanup_free_ char *path = NULL, *text = NULL, *prefix = NULL;
	struct elide_config *cfg = SENTINEL;
	char err[CONFIG_ERR_MAX] = "", line[CONFIG_ERR_LINE_MAX + 64];
	size_t len = 0;
	FILE *f;

	f = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(f);
	fputs("program = (\n", f);
	for (int i = 0; i < CONFIG_MAX_ERRORS + 7; i++)
		fprintf(f, "  { comm = \"c%d\"; mode = \"bad%d\"; },\n", i, i);
	fputs("  { comm = \"last\"; }\n);\n", f);
	ck_assert_int_eq(fclose(f), 0);
	path = write_file("capped.conf", text);

	ck_assert_int_eq(config_load(path, NULL, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_uint_eq(err_lines(err), CONFIG_MAX_ERRORS + 1);
	ck_assert_int_ge(asprintf(&prefix, "%s:%d: mode: invalid mode \"bad%d\"", path, CONFIG_MAX_ERRORS + 1,
				  CONFIG_MAX_ERRORS - 1), 0);
	err_line(err, CONFIG_MAX_ERRORS - 1, line, sizeof(line));
	ck_assert_msg(strncmp(line, prefix, strlen(prefix)) == 0, "\"%s\" vs \"%s\"", line, prefix);
	ck_assert_str_eq(err_line(err, CONFIG_MAX_ERRORS, line, sizeof(line)), "7 more errors");
}
END_TEST

/* A bad main file does not hide a bad drop-in, nor one drop-in another. */
START_TEST(test_errors_across_files)
{
	_cleanup_free_ char *main_path = NULL, *dir = NULL, *a = NULL, *b = NULL, *p0 = NULL, *p1 = NULL, *p2 = NULL;
	struct elide_config *cfg = SENTINEL;
	char err[CONFIG_ERR_MAX] = "", line[CONFIG_ERR_LINE_MAX + 64];

	main_path = write_file("xmain.conf", "daemon: { interval = -1.0; };\n");
	dir = make_dir("xmain.d");
	a = write_file("xmain.d/10-a.conf", "\ndefault: { mode = \"never\"; };\n");
	b = write_file("xmain.d/20-b.conf", "daemon: { interval = ; };\n");
	ck_assert_int_ge(asprintf(&p0, "%s:1: interval:", main_path), 0);
	ck_assert_int_ge(asprintf(&p1, "%s:2: mode: invalid mode \"never\"", a), 0);
	ck_assert_int_ge(asprintf(&p2, "%s:1: syntax error", b), 0);

	ck_assert_int_eq(config_load(main_path, dir, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_msg(err_lines(err) == 3, "%s", err);
	ck_assert_msg(strncmp(err_line(err, 0, line, sizeof(line)), p0, strlen(p0)) == 0, "%s", err);
	ck_assert_msg(strncmp(err_line(err, 1, line, sizeof(line)), p1, strlen(p1)) == 0, "%s", err);
	ck_assert_msg(strncmp(err_line(err, 2, line, sizeof(line)), p2, strlen(p2)) == 0, "%s", err);
}
END_TEST

/* The message of an invalid mode names every mode accepted, watch too. */
START_TEST(test_mode_message_lists_watch)
{
	_cleanup_free_ char *path = NULL, *prefix = NULL;
	struct elide_config *cfg = SENTINEL;
	char err[CONFIG_ERR_MAX] = "";

	path = write_file("badmode.conf", "program = (\n  { comm = \"x\";\n    lock = ( { name = \"a\"; mode = \"maybe\"; } ); }\n);\n");
	ck_assert_int_ge(asprintf(&prefix, "%s:3: mode: invalid mode \"maybe\" (expected \"adaptive\", \"on\", \"off\" or \"watch\")",
				  path), 0);
	ck_assert_int_eq(config_load(path, NULL, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, prefix);
	/* ... and watch is accepted where the message says so. */
	free(path);
	path = write_file("watchmode.conf",
			  "default: { mode = \"watch\"; };\nprogram = ( { comm = \"x\"; mode = \"watch\"; "
			  "lock = ( { name = \"a\"; mode = \"watch\"; } ); } );\n");
	cfg = load_ok(path, NULL);
	ck_assert_int_eq(cfg->default_mode, POLICY_MODE_WATCH);
	config_free(cfg);
}
END_TEST

START_TEST(test_error_in_dropin)
{
	_cleanup_free_ char *main_path = NULL, *dir = NULL, *bad = NULL, *prefix = NULL, *ok = NULL;
	struct elide_config *cfg = SENTINEL;
	char err[CONFIG_ERR_MAX] = "";

	main_path = write_file("dmain.conf", "daemon: { interval = 2.0; };\n");
	dir = make_dir("dmain.d");
	ok = write_file("dmain.d/10-ok.conf", "program = ( { comm = \"x\"; } );\n");
	bad = write_file("dmain.d/50-bad.conf", "\n\ndefault: { mode = \"never\"; };\n");
	ck_assert_int_ge(asprintf(&prefix, "%s:3: ", bad), 0);

	ck_assert_int_eq(config_load(main_path, dir, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0, "\"%s\" vs \"%s\"", err, prefix);
}
END_TEST

/* @include works next to the including file, and errors name the right file. */
/* observe_lock_waits: false, "auto" (the cheap attachments) or true. */
START_TEST(test_observe_lock_waits)
{
	static const struct {
		const char *value;
		enum observe_lock_waits want;
	} cases[] = {
		{ "false", OBSERVE_LOCK_WAITS_OFF },
		{ "\"auto\"", OBSERVE_LOCK_WAITS_AUTO },
		{ "true", OBSERVE_LOCK_WAITS_ON },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		_cleanup_free_ char *text = NULL, *path = NULL;
		struct elide_config *cfg;

		ck_assert_int_ge(asprintf(&text, "daemon: { observe_lock_waits = %s; };\n", cases[i].value), 0);
		path = write_file("observe.conf", text);
		cfg = load_ok(path, NULL);
		ck_assert_msg(cfg->observe_lock_waits == cases[i].want, "%s: %d", cases[i].value,
			      (int)cfg->observe_lock_waits);
		config_free(cfg);
		unlink(path);
	}
}
END_TEST

START_TEST(test_include)
{
	_cleanup_free_ char *good = NULL, *part = NULL, *bad = NULL, *badpart = NULL, *missing = NULL,
			    *prefix = NULL;
	struct elide_config *cfg = SENTINEL;
	char err[CONFIG_ERR_MAX] = "";

	part = write_file("inc-part.conf", "daemon: { interval = 7; };\n");
	good = write_file("inc-good.conf", "default: { mode = \"on\"; };\n@include \"inc-part.conf\"\n");
	cfg = load_ok(good, NULL);
	ck_assert_double_eq(cfg->interval, 7.0);
	ck_assert_int_eq(cfg->default_mode, POLICY_MODE_ON);
	config_free(cfg);

	cfg = SENTINEL;
	badpart = write_file("inc-badpart.conf", "\ndaemon: { bogus = 1; };\n");
	bad = write_file("inc-bad.conf", "@include \"inc-badpart.conf\"\n");
	ck_assert_int_ge(asprintf(&prefix, "%s:2: ", badpart), 0);
	ck_assert_int_eq(config_load(bad, NULL, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0, "\"%s\" vs \"%s\"", err, prefix);

	free(prefix);
	missing = write_file("inc-missing.conf", "\n@include \"inc-nowhere.conf\"\n");
	ck_assert_int_ge(asprintf(&prefix, "%s:2: ", missing), 0);
	ck_assert_int_eq(config_load(missing, NULL, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0, "\"%s\" vs \"%s\"", err, prefix);
}
END_TEST

/* libconfig 1.5 exits the process on an @include it cannot read as a file
 * (a directory: "" names the including file's own): refused first. */
START_TEST(test_include_not_a_file)
{
	static const char nul_line[] = "@include \"\0\0elide.conf\"; };\n";
	_cleanup_free_ char *empty = NULL, *dir = NULL, *nested = NULL, *outer = NULL, *nul = NULL, *prefix = NULL;
	struct elide_config *cfg = SENTINEL;
	char err[CONFIG_ERR_MAX] = "";
	FILE *f;

	empty = write_file("inc-empty.conf", "default: { mode = \"on\"; };\n@include \"\"\n");
	ck_assert_int_ge(asprintf(&prefix, "%s:2: @include \"\": ", empty), 0);
	ck_assert_int_eq(config_load(empty, NULL, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0 && strstr(err, "not a regular file"), "%s", err);

	dir = make_dir("inc-a-dir");
	nested = write_file("inc-nested.conf", "@include \"inc-a-dir\"\n");
	outer = write_file("inc-outer.conf", "@include \"inc-nested.conf\"\n");
	ck_assert_int_eq(config_load(outer, NULL, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "inc-nested.conf:1: @include \"inc-a-dir\"") && strstr(err, "not a regular file"),
		      "%s", err);

	/* The input the fuzzer found: a NUL byte in the file. */
	nul = path_in("inc-nul.conf");
	f = fopen(nul, "we");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(nul_line, 1, sizeof(nul_line) - 1, f), sizeof(nul_line) - 1);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(config_load(nul, NULL, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_msg(strstr(err, "inc-nul.conf:1: a NUL byte"), "%s", err);
}
END_TEST

START_TEST(test_unreadable)
{
	_cleanup_free_ char *path = NULL, *expect = NULL;
	struct elide_config *cfg = SENTINEL;
	char err[CONFIG_ERR_MAX] = "";
	int r;

	path = write_file("unreadable.conf", "daemon: { interval = 2.0; };\n");
	ck_assert_int_eq(chmod(path, 0), 0);
	r = config_load(path, NULL, &cfg, err, sizeof(err));
	if (geteuid() == 0) {
		/* root reads it anyway */
		ck_assert_int_eq(r, 0);
		config_free(cfg);
		return;
	}
	ck_assert_int_eq(r, -EACCES);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_int_ge(asprintf(&expect, "%s: %s", path, strerror(EACCES)), 0);
	ck_assert_str_eq(err, expect);
}
END_TEST

START_TEST(test_main_is_directory)
{
	_cleanup_free_ char *dir = make_dir("adir.conf");
	struct elide_config *cfg = SENTINEL;
	char err[CONFIG_ERR_MAX] = "";

	ck_assert_int_eq(config_load(dir, NULL, &cfg, err, sizeof(err)), -EISDIR);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_int_eq(strncmp(err, dir, strlen(dir)), 0);
}
END_TEST

START_TEST(test_good_globs)
{
	_cleanup_free_ char *path = NULL;
	struct elide_config *cfg;
	struct policy_decision d;
	struct process_identity id = ident("/x/]", "a[b", 1, NULL, NULL);

	path = write_file("globs.conf",
			  "program = (\n"
			  "  { exe = \"/x/[]]\"; comm = \"a\\\\[b\"; },\n"
			  "  { exe = \"[!a]*\"; comm = \"[[:alpha:]][[:digit:]]?\"; },\n"
			  "  { exe = \"/[^x]\"; comm = \"[a-c]\"; }\n"
			  ");\n");
	cfg = load_ok(path, NULL);
	config_decide(cfg, &id, &d);
	ck_assert_ptr_eq(d.rule, &cfg->programs[0]);
	id = ident("/bin/sh", "q7z", 1, NULL, NULL);
	config_decide(cfg, &id, &d);
	ck_assert_ptr_eq(d.rule, &cfg->programs[1]);
	config_free(cfg);
}
END_TEST

START_TEST(test_mode_strings)
{
	static const enum policy_mode modes[] = { POLICY_MODE_ADAPTIVE, POLICY_MODE_ON, POLICY_MODE_OFF };
	enum policy_mode m = POLICY_MODE_UNSET;

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		ck_assert_int_eq(policy_mode_from_string(policy_mode_to_string(modes[i]), &m), 0);
		ck_assert_int_eq(m, modes[i]);
	}
	ck_assert_str_eq(policy_mode_to_string(POLICY_MODE_OFF), "off");
	ck_assert_str_eq(policy_mode_to_string(POLICY_MODE_UNSET), "unset");
	ck_assert_str_eq(policy_mode_to_string((enum policy_mode)42), "invalid");
	ck_assert_int_eq(policy_mode_from_string("ON", &m), -EINVAL);
	ck_assert_int_eq(policy_mode_from_string("", &m), -EINVAL);
	ck_assert_int_eq(policy_mode_from_string(NULL, &m), -EINVAL);
}
END_TEST

static char *shipped_conf_path(void)
{
	const char *top = getenv("top_srcdir");
	char *p, *src, *dir;

	if (top && *top) {
		ck_assert_int_ge(asprintf(&p, "%s/conf/elide.conf", top), 0);
		return p;
	}
	/* By hand: relative to this source file, tests/unit/ → ../../conf. */
	src = strdup(__FILE__);
	ck_assert_ptr_nonnull(src);
	dir = dirname(src);
	ck_assert_int_ge(asprintf(&p, "%s/../../conf/elide.conf", dir), 0);
	free(src);
	return p;
}

START_TEST(test_shipped_conf)
{
	_cleanup_free_ char *path = shipped_conf_path();
	struct elide_config *cfg;

	cfg = load_ok(path, NULL);
	assert_builtin_values(cfg);
	ck_assert_uint_eq(cfg->nfiles, 1);
	ck_assert_str_eq(cfg->files[0], path);
	config_free(cfg);
}
END_TEST

/* The commented example in elide.conf must parse once uncommented. */
START_TEST(test_shipped_example)
{
	_cleanup_free_ char *path = shipped_conf_path(), *out = NULL;
	struct elide_config *cfg;
	char line[1024];
	bool in = false;
	int nlines = 0;
	FILE *f, *o;

	f = fopen(path, "re");
	ck_assert_msg(f, "%s: %s", path, strerror(errno));
	out = path_in("example-uncommented.conf");
	o = fopen(out, "we");
	ck_assert_ptr_nonnull(o);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "#program = (", 12) == 0)
			in = true;
		if (in) {
			fputs(line + 1, o);
			nlines++;
		} else
			fputs(line, o);
		if (in && strncmp(line, "#);", 3) == 0)
			in = false;
	}
	fclose(f);
	ck_assert_int_eq(fclose(o), 0);
	ck_assert_int_gt(nlines, 10);

	cfg = load_ok(out, NULL);
	ck_assert_uint_eq(cfg->nprograms, 4);
	/* Every program and lock key appears in the example. */
	ck_assert_ptr_nonnull(cfg->programs[0].exe);
	ck_assert_uint_eq(cfg->programs[0].nlocks, 2);
	ck_assert_ptr_nonnull(cfg->programs[1].unit);
	ck_assert_ptr_nonnull(cfg->programs[2].comm);
	ck_assert_ptr_nonnull(cfg->programs[2].user);
	ck_assert_uint_ne(cfg->programs[2].knobs.retries_plus1, 0);
	ck_assert_uint_ne(cfg->programs[2].knobs.min_aborts, 0);
	ck_assert_ptr_nonnull(cfg->programs[3].slice);
	ck_assert_double_ge(cfg->programs[3].knobs.max_abort_ratio, 0);
	ck_assert_uint_ne(cfg->programs[3].knobs.contention, 0);
	ck_assert_uint_ne(cfg->programs[3].knobs.skip, 0);
	ck_assert_uint_ne(cfg->programs[3].knobs.skip_max, 0);
	ck_assert_ptr_nonnull(cfg->programs[3].locks[0].name);
	ck_assert_ptr_nonnull(cfg->programs[3].locks[0].function);
	config_free(cfg);
}
END_TEST

static int rm_entry(const char *p, _unused_ const struct stat *st, _unused_ int type, _unused_ struct FTW *ftw)
{
	return remove(p);
}

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");
	struct passwd *pw;
	SRunner *sr;
	int failed;

	if (!mkdtemp(top_dir)) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	pw = getpwuid(getuid());
	if (!pw) {
		fprintf(stderr, "no passwd entry for uid %u\n", (unsigned)getuid());
		return 77;
	}
	snprintf(user_name, sizeof(user_name), "%s", pw->pw_name);

	tcase_add_test(tc, test_builtin_default);
	tcase_add_test(tc, test_example);
	tcase_add_test(tc, test_observe_lock_waits);
	tcase_add_test(tc, test_matching_and_merge);
	tcase_add_test(tc, test_dropins);
	tcase_add_test(tc, test_vendor_dirs);
	tcase_add_loop_test(tc, test_errors, 0, sizeof(bad_cases) / sizeof(bad_cases[0]));
	tcase_add_test(tc, test_error_in_dropin);
	tcase_add_test(tc, test_multiple_errors);
	tcase_add_test(tc, test_error_cap);
	tcase_add_test(tc, test_errors_across_files);
	tcase_add_test(tc, test_mode_message_lists_watch);
	tcase_add_test(tc, test_include);
	tcase_add_test(tc, test_include_not_a_file);
	tcase_add_test(tc, test_unreadable);
	tcase_add_test(tc, test_main_is_directory);
	tcase_add_test(tc, test_good_globs);
	tcase_add_test(tc, test_mode_strings);
	tcase_add_test(tc, test_shipped_conf);
	tcase_add_test(tc, test_shipped_example);
	suite_add_tcase(s, tc);

	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);

	nftw(top_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
