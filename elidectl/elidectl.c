/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl: the administrator's view of lock elision on this machine.
 * Verbs read through a source (source.h); today the segments directly.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elidectl.h"
#include "log.h"

struct verb {
	const char *name;
	int (*run)(struct source *s, const struct ctl_options *o, int argc, char **argv);
};

static const struct verb verbs[] = {
	{ "list", verb_list },
	{ "show", verb_show },
};

static const struct {
	const char *name;
	enum sort_key key;
} sort_keys[] = {
	{ "acquired", SORT_ACQUIRED },
	{ "name", SORT_NAME },
	{ "commits", SORT_COMMITS },
	{ "aborts", SORT_ABORTS },
	{ "conflict", SORT_CONFLICT },
	{ "capacity", SORT_CAPACITY },
	{ "cycles", SORT_CYCLES },
};

static void help(void)
{
	printf("Usage: %s [OPTIONS] COMMAND ...\n"
	       "\n"
	       "Show hardware lock elision (libelide) in the running processes.\n"
	       "\n"
	       "Commands:\n"
	       "  list                 One line per process running with libelide (the default)\n"
	       "  show PID             The process's elision state and per-lock statistics\n"
	       "\n"
	       "Options:\n"
	       "  -h --help            Show this help\n"
	       "     --version         Show the version\n"
	       "     --json[=MODE]     JSON output, MODE pretty or short (default: pretty on a\n"
	       "                       terminal); numbers are exact integers\n"
	       "     --no-legend       No column headers, footer or process header\n"
	       "     --runtime-dir DIR Segment directory (default: $ELIDE_RUNTIME_DIR, else %s)\n"
	       "     --sort KEY        show: order locks by name, acquired, commits, aborts,\n"
	       "                       conflict, capacity or cycles (default acquired; numbers\n"
	       "                       descending, names ascending)\n"
	       "     --max N           show: at most N locks\n"
	       "  -v --verbose         Say what was skipped (stale segments, other users')\n"
	       "\n"
	       "Counts come from each process's libelide.  Rates (COMMITS/s) are averages\n"
	       "since the process started with libelide, not current rates.  Commit, attempt\n"
	       "and acquisition counts are estimates: libelide samples 1 in N commits (shown\n"
	       "by show).  Abort counts are exact.  Tables humanise numbers (1.2k, 3.4M).\n"
	       "A user sees the processes whose segments they can read: root all of them.\n"
	       "\n"
	       "Exit status: 0 success, 1 failure (e.g. no such process), 2 usage error.\n"
	       "See elidectl(1).\n",
	       program_invocation_short_name, ELIDE_RUNTIME_DIR_DEFAULT);
}

static int parse_sort(const char *s, enum sort_key *ret)
{
	for (size_t i = 0; i < ARRAY_SIZE(sort_keys); i++)
		if (strcmp(s, sort_keys[i].name) == 0) {
			*ret = sort_keys[i].key;
			return 0;
		}
	return -EINVAL;
}

static int parse_max(const char *s, unsigned long *ret)
{
	char *end;
	unsigned long v;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v == 0)
		return -EINVAL;
	*ret = v;
	return 0;
}

/* Returns 1 to go on, 0 when done (help/version), or -EXIT_USAGE. */
static int parse_argv(int argc, char **argv, struct ctl_options *o)
{
	enum {
		ARG_VERSION = 0x100,
		ARG_JSON,
		ARG_NO_LEGEND,
		ARG_RUNTIME_DIR,
		ARG_SORT,
		ARG_MAX,
	};
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, ARG_VERSION },
		{ "json", optional_argument, NULL, ARG_JSON },
		{ "no-legend", no_argument, NULL, ARG_NO_LEGEND },
		{ "runtime-dir", required_argument, NULL, ARG_RUNTIME_DIR },
		{ "sort", required_argument, NULL, ARG_SORT },
		{ "max", required_argument, NULL, ARG_MAX },
		{ "verbose", no_argument, NULL, 'v' },
		{}
	};
	int c;

	o->json_pretty = isatty(STDOUT_FILENO);
	o->legend = true;
	o->sort = SORT_ACQUIRED;
	opterr = 0; /* our own messages, with our prefix */
	while ((c = getopt_long(argc, argv, "hv", options, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help();
			return 0;
		case ARG_VERSION:
			printf("elidectl (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
			return 0;
		case ARG_JSON:
			o->json = true;
			if (!optarg)
				break;
			if (strcmp(optarg, "pretty") == 0)
				o->json_pretty = true;
			else if (strcmp(optarg, "short") == 0)
				o->json_pretty = false;
			else {
				log_error("--json: unknown mode '%s' (pretty, short)", optarg);
				return -EXIT_USAGE;
			}
			break;
		case ARG_NO_LEGEND:
			o->legend = false;
			break;
		case ARG_RUNTIME_DIR:
			if (!*optarg) {
				log_error("--runtime-dir: empty path");
				return -EXIT_USAGE;
			}
			o->runtime_dir = optarg;
			break;
		case ARG_SORT:
			if (parse_sort(optarg, &o->sort) < 0) {
				log_error("--sort: unknown key '%s' (name, acquired, commits, aborts, "
					  "conflict, capacity, cycles)", optarg);
				return -EXIT_USAGE;
			}
			o->sort_set = true;
			break;
		case ARG_MAX:
			if (parse_max(optarg, &o->max) < 0) {
				log_error("--max: not a positive number: '%s'", optarg);
				return -EXIT_USAGE;
			}
			o->max_set = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		default:
			/* '?': unknown or ambiguous option, or a missing argument. */
			log_error("invalid option or missing argument: '%s'; see --help", argv[optind - 1]);
			return -EXIT_USAGE;
		}
	}
	return 1;
}

int main(int argc, char **argv)
{
	static char *default_argv[] = { (char *)"list", NULL };
	struct ctl_options o = {};
	struct source *s = NULL;
	const struct verb *verb = NULL;
	const char *name;
	int r;

	log_set_prefix("elidectl");
	r = parse_argv(argc, argv, &o);
	if (r <= 0)
		return r == 0 ? EXIT_OK : -r;
	log_set_max_priority(o.verbose ? LOG_DEBUG : LOG_NOTICE);

	argc -= optind;
	argv += optind;
	if (argc == 0) {
		argc = 1;
		argv = default_argv;
	}
	name = argv[0];
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
		if (strcmp(verbs[i].name, name) == 0)
			verb = &verbs[i];
	if (!verb) {
		log_error("unknown command '%s'; see --help", name);
		return EXIT_USAGE;
	}

	if (!o.runtime_dir) {
		o.runtime_dir = getenv("ELIDE_RUNTIME_DIR");
		if (!o.runtime_dir || !*o.runtime_dir)
			o.runtime_dir = ELIDE_RUNTIME_DIR_DEFAULT;
	}
	r = source_direct_new(o.runtime_dir, &s);
	if (r < 0) {
		log_error_errno(r, "cannot set up");
		return EXIT_FAIL;
	}
	r = verb->run(s, &o, argc, argv);
	source_free(s);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error_errno(errno ? errno : EIO, "cannot write to standard output");
		return EXIT_FAIL;
	}
	return r;
}
