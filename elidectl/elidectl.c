/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl: the administrator's view of lock elision on this machine.
 * Verbs read through a source (source.h): elided over D-Bus when it runs,
 * else the segments directly (read-only).
 */
#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elidectl.h"
#include "log.h"
#include "terminal.h"

enum verb_source {
	SOURCE_NONE,    /* works without elided and segments */
	SOURCE_ANY,     /* elided, else the segments */
	SOURCE_DAEMON,  /* elided only */
};

struct verb {
	const char *name;
	enum verb_source source;
	int (*run)(struct source *s, const struct ctl_options *o, int argc, char **argv);
	bool pager;     /* long output: through a pager on a terminal */
	bool columns;   /* a table whose columns -o chooses */
};

static const struct verb verbs[] = {
	{ "status", SOURCE_ANY, verb_status, true, true },
	{ "list", SOURCE_ANY, verb_list, true, true },
	{ "show", SOURCE_ANY, verb_show, true, true },
	{ "top", SOURCE_ANY, verb_top, false, true },
	{ "candidates", SOURCE_ANY, verb_candidates, true, true },
	{ "set", SOURCE_DAEMON, verb_set, false, false },
	{ "reset", SOURCE_DAEMON, verb_reset, false, false },
	{ "reload", SOURCE_DAEMON, verb_reload, false, false },
	{ "learned", SOURCE_DAEMON, verb_learned, true, true },
	{ "forget", SOURCE_DAEMON, verb_forget, false, false },
	{ "check-config", SOURCE_NONE, verb_check_config, false, false },
	{ "hw", SOURCE_NONE, verb_hw, false, false },
	{ "run", SOURCE_NONE, verb_run, false, false },
	{ "enable", SOURCE_NONE, verb_enable, false, false },
	{ "disable", SOURCE_NONE, verb_disable, false, false },
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
	{ "wait", SORT_WAIT },
};

static void help(void)
{
	printf("Usage: %s [OPTIONS] COMMAND ...\n"
	       "\n"
	       "Show and steer hardware lock elision (libelide) in the running processes.\n"
	       "\n"
	       "Commands:\n"
	       "  status               elided, the hardware, totals and the busiest processes\n"
	       "  list                 One line per process running with libelide (the default)\n"
	       "  show PID|EXE         The process's elision state and per-lock statistics;\n"
	       "                       EXE (a path or a base name): every process running it\n"
	       "  show PID --history   elided's rates of the process over its last intervals\n"
	       "  top                  Processes by current rates, redrawn every interval\n"
	       "                       (keys: a acquired, c commits, x aborts, l cycles lost, q quit)\n"
	       "  top PID              The process's locks by current rates, each with a trend\n"
	       "                       (keys: a acquired, w wait, c commits, x aborts, q quit)\n"
	       "  candidates           The locks processes wait for most, and whether eliding\n"
	       "                       them would pay (an estimate; see ADVICE in elidectl(1))\n"
	       "  set PID [--lock NAME] off|on|adaptive|watch\n"
	       "                       Override the mode of a process or one lock (not persisted)\n"
	       "  reset PID [--lock NAME]\n"
	       "                       Drop the overrides of a process, or of one lock\n"
	       "  reload               Make elided re-read its configuration\n"
	       "  learned              What elided learned about programs' locks in earlier\n"
	       "                       runs, and keeps across restarts\n"
	       "  forget [EXE]         Make elided forget what it learned (only of the program\n"
	       "                       at the absolute path EXE): what your processes taught\n"
	       "                       it; root's forget: everyone's\n"
	       "  check-config [FILE]  Validate a configuration (default %s and its .d)\n"
	       "  hw                   TSX/RTM report: CPUID, TSX_CTRL, the kernel, a probe,\n"
	       "                       and advice for this machine\n"
	       "  run [--mode M] [--] CMD [ARGS...]\n"
	       "                       Run CMD with libelide preloaded\n"
	       "  enable --unit NAME [--mode M] [--now] [--force] | --system [--force]\n"
	       "                       Preload libelide into the service NAME (a systemd\n"
	       "                       drop-in) or into every program (/etc/ld.so.preload),\n"
	       "                       once the library passed its checks: a root-owned\n"
	       "                       ELF shared object for this machine that loads;\n"
	       "                       --force: a unit not installed yet, or a CPU that\n"
	       "                       cannot elide (where --system refuses without it)\n"
	       "  disable --unit NAME [--now] | --system\n"
	       "                       Remove that drop-in, or exactly that line\n"
	       "\n"
	       "Options:\n"
	       "  -h --help            Show this help\n"
	       "     --version         Show the version\n"
	       "     --json[=MODE]     JSON output, MODE pretty or short (default: pretty on a\n"
	       "                       terminal); numbers are exact integers\n"
	       "     --no-legend       No column headers, footer or process header\n"
	       "  -o --output=COLUMNS  list, show, status, top, learned: the table's columns,\n"
	       "                       comma-separated (any case); +COLUMNS adds to the\n"
	       "                       defaults.  A wrong name lists the command's columns\n"
	       "  -l --full            Do not ellipsise cells to fit the terminal's width\n"
	       "     --no-pager        Do not pipe list, show and status into a pager\n"
	       "                       ($SYSTEMD_PAGER, $PAGER, less) on a terminal\n"
	       "     --no-color        No colours (also NO_COLOR=1; only ever on a terminal)\n"
	       "  -H --host=[USER@]HOST\n"
	       "                       Talk to elided on HOST over ssh\n"
	       "     --runtime-dir DIR Read segments in DIR directly, without elided (default:\n"
	       "                       $ELIDE_RUNTIME_DIR, else %s, when elided is not running)\n"
	       "     --lock NAME       set, reset: one lock (a name from show, #INDEX or 0xADDRESS)\n"
	       "     --sort KEY        show: order locks by name, acquired, commits, aborts,\n"
	       "                       conflict, capacity, cycles or wait (default acquired;\n"
	       "                       numbers descending, names ascending); top: acquired,\n"
	       "                       commits, aborts, cycles or wait; top PID: acquired,\n"
	       "                       wait, commits or aborts\n"
	       "     --max N           show, top PID: at most N locks\n"
	       "     --history         show PID: the rates elided kept of its last intervals\n"
	       "                       (needs elided)\n"
	       "     --root DIR        enable, disable: the system in DIR (default /)\n"
	       "     --library PATH    enable, disable: this libelide.so (as seen inside the\n"
	       "                       root) instead of the one run uses\n"
	       "     --now             enable, disable --unit: systemctl daemon-reload and\n"
	       "                       try-restart NAME\n"
	       "  -v --verbose         Say what was skipped (stale segments, other users')\n"
	       "\n"
	       "With elided running, list, show, status and top ask it over D-Bus and rates\n"
	       "are over its last interval; without it they read the segments directly\n"
	       "(read-only) and rates (COMMITS/s) are averages since the process started with\n"
	       "libelide.  Commit, attempt and acquisition counts are estimates: libelide\n"
	       "samples 1 in N commits (shown by show).  Abort counts are exact.  Tables\n"
	       "humanise numbers (1.2k, 3.4M).  A user sees and steers their own processes;\n"
	       "root all of them.\n"
	       "\n"
	       "Exit status: 0 success, 1 failure (hw: RTM not usable; check-config: invalid;\n"
	       "enable: the library failed a check), 2 usage error, 3 no such process, lock\n"
	       "or unit,\n"
	       "4 permission denied, 5 elided is not running.  See elidectl(1).\n",
	       program_invocation_short_name, SYSCONFDIR "/elide.conf", ELIDE_RUNTIME_DIR_DEFAULT);
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

/* Whether the verb parses its own options (run: CMD's are not ours;
 * enable, disable): the first word that is not an option. */
static bool own_options_verb(const char *a)
{
	return strcmp(a, "run") == 0 || strcmp(a, "enable") == 0 || strcmp(a, "disable") == 0;
}

static bool run_verb(int argc, char **argv)
{
	static const char *const with_value[] = { "-H", "--host", "--runtime-dir", "--sort", "--max", "--lock",
						  "-o", "--output" };

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0)
			return i + 1 < argc && own_options_verb(argv[i + 1]);
		if (a[0] != '-' || !a[1])
			return own_options_verb(a);
		for (size_t k = 0; k < ARRAY_SIZE(with_value); k++)
			if (strcmp(a, with_value[k]) == 0) {
				i++;
				break;
			}
	}
	return false;
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
		ARG_NO_PAGER,
		ARG_LOCK,
		ARG_NO_COLOR,
		ARG_HISTORY,
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
		{ "no-pager", no_argument, NULL, ARG_NO_PAGER },
		{ "no-color", no_argument, NULL, ARG_NO_COLOR },
		{ "output", required_argument, NULL, 'o' },
		{ "full", no_argument, NULL, 'l' },
		{ "host", required_argument, NULL, 'H' },
		{ "lock", required_argument, NULL, ARG_LOCK },
		{ "history", no_argument, NULL, ARG_HISTORY },
		{}
	};
	/* `run CMD -x`: CMD's options are not ours, so stop at the verb; as
	 * for enable and disable, which parse their own. */
	const char *optstring = run_verb(argc, argv) ? "+hvH:o:l" : "hvH:o:l";
	int c;

	o->json_pretty = isatty(STDOUT_FILENO);
	o->legend = true;
	o->sort = SORT_ACQUIRED;
	opterr = 0; /* our own messages, with our prefix */
	while ((c = getopt_long(argc, argv, optstring, options, NULL)) >= 0) {
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
			o->runtime_dir_set = true;
			break;
		case 'H':
			if (!*optarg) {
				log_error("--host: empty host");
				return -EXIT_USAGE;
			}
			o->host = optarg;
			break;
		case ARG_LOCK:
			if (!*optarg) {
				log_error("--lock: empty name");
				return -EXIT_USAGE;
			}
			o->lock = optarg;
			break;
		case ARG_HISTORY:
			o->history = true;
			break;
		case ARG_NO_PAGER:
			o->no_pager = true;
			break;
		case ARG_NO_COLOR:
			o->no_color = true;
			break;
		case 'o':
			o->output = optarg;
			break;
		case 'l':
			o->full = true;
			break;
		case ARG_SORT:
			if (parse_sort(optarg, &o->sort) < 0) {
				log_error("--sort: unknown key '%s' (name, acquired, commits, aborts, "
					  "conflict, capacity, cycles, wait)", optarg);
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

/* `source`: the verb's, or SOURCE_DAEMON where an option needs elided. */
static int open_source(const struct verb *verb, enum verb_source source, struct ctl_options *o,
		       struct source **ret)
{
	char why[512] = "";
	int r;

	if (source == SOURCE_NONE) {
		if (o->host) {
			log_error("%s works on this machine only (no -H)", verb->name);
			return EXIT_USAGE;
		}
		*ret = NULL;
		return EXIT_OK;
	}
	if (source == SOURCE_ANY && o->runtime_dir_set) {
		if (o->host) {
			log_error("--runtime-dir and -H exclude each other");
			return EXIT_USAGE;
		}
		goto direct;
	}
	r = source_bus_new(o->host, ret, why, sizeof(why));
	if (r >= 0) {
		o->daemon = true;
		return EXIT_OK;
	}
	if (source == SOURCE_DAEMON || o->host) {
		log_error("%s", why);
		return EXIT_NO_DAEMON;
	}
	/* Only a bus that answers tells us elided is not running; without a
	 * system bus at all (a container, a minimal system) reading the
	 * segments is simply how elidectl works: said with --verbose only.
	 * status says so itself, in its output. */
	if (r == -ENXIO && strcmp(verb->name, "status") != 0)
		log_notice("elided is not running: reading segments directly (read-only)");
	else
		log_debug("%s: reading segments directly (read-only)", why);
direct:
	r = source_direct_new(o->runtime_dir, ret);
	if (r < 0) {
		log_error_errno(r, "cannot set up");
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	static char *default_argv[] = { (char *)"list", NULL };
	struct ctl_options o = {};
	struct source *s = NULL;
	const struct verb *verb = NULL;
	const char *name;
	int r;

	/* The terminal's character set for widths and "…"; numbers stay C. */
	setlocale(LC_CTYPE, "");
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
	if (o.lock && verb->run != verb_set && verb->run != verb_reset) {
		log_error("--lock applies to set and reset only");
		return EXIT_USAGE;
	}
	if (o.output && !verb->columns) {
		log_error("--output applies to list, show, status, top and learned only");
		return EXIT_USAGE;
	}
	if (o.history && verb->run != verb_show) {
		log_error("--history applies to show only");
		return EXIT_USAGE;
	}
	if (o.history && o.runtime_dir_set) {
		log_error("--history needs elided: it keeps the history (the segments that --runtime-dir reads "
			  "have counters only)");
		return EXIT_USAGE;
	}
	if (o.history && (o.output || o.sort_set || o.max_set)) {
		log_error("--history prints rates, not the lock table: no -o, --sort or --max");
		return EXIT_USAGE;
	}
	/* top PID shows locks: its columns are not the processes'. */
	if (o.output && !o.json && verb->run == verb_top && argc == 2) {
		if (top_locks_check_output(o.output) < 0)
			return EXIT_USAGE;
	} else if (o.output && !o.json && (verb->run == verb_status || verb->run == verb_top) &&
		   rates_check_output(o.output) < 0)
		return EXIT_USAGE;
	terminal_setup(o.full, o.no_color);

	if (!o.runtime_dir) {
		o.runtime_dir = getenv("ELIDE_RUNTIME_DIR");
		if (!o.runtime_dir || !*o.runtime_dir)
			o.runtime_dir = ELIDE_RUNTIME_DIR_DEFAULT;
	}
	r = open_source(verb, o.history ? SOURCE_DAEMON : verb->source, &o, &s);
	if (r != EXIT_OK)
		return r;
	if (verb->pager)
		pager_open(o.no_pager);
	r = verb->run(s, &o, argc, argv);
	source_free(s);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error_errno(errno ? errno : EIO, "cannot write to standard output");
		r = EXIT_FAIL;
	}
	pager_close();
	return r;
}
