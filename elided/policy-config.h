/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided's policy: /etc/elide.conf then every *.conf in /etc/elide.conf.d,
 * /run/elide.conf.d and /usr/lib/elide.conf.d (lexical order of the names,
 * /etc's file replacing a same-named one in /run or /usr/lib), libconfig
 * syntax, or the built-in default when no file exists.
 *
 *   daemon:  { interval = 1.0; max_segments_per_uid = 64; };
 *   default: { mode = "adaptive"; max_abort_ratio = 0.5; min_aborts = 1000; };
 *   program = (
 *     { exe = "/usr/bin/memcached"; lock = ( { name = "stats_lock"; mode = "off"; } ); },
 *     { unit = "mariadb.service"; mode = "off"; },
 *     { comm = "worker*"; user = "batch"; mode = "on"; }
 *   );
 *
 * A later file's daemon/default settings override earlier ones; program
 * rules accumulate in file order and the first matching rule wins.
 */
#ifndef ELIDED_CONFIG_H
#define ELIDED_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The errors of one load: one "FILE:LINE: what" a line, the first
 * CONFIG_MAX_ERRORS of them, then "N more errors". */
#define CONFIG_MAX_ERRORS 20
#define CONFIG_ERR_LINE_MAX 512
#define CONFIG_ERR_MAX (CONFIG_MAX_ERRORS * CONFIG_ERR_LINE_MAX + 64)
#define CONFIG_MAX_FILES 64

enum policy_mode {
	POLICY_MODE_UNSET = 0,  /* not given: inherit */
	POLICY_MODE_ADAPTIVE,
	POLICY_MODE_ON,
	POLICY_MODE_OFF,
	POLICY_MODE_WATCH,      /* no transactions, contention watched; a lock: off */
};

/* Knobs pushed to libelide; 0 (or < 0 for the ratio) = not set, inherit. */
struct policy_knobs {
	uint32_t retries_plus1;      /* "retries", 0..64, stored + 1 */
	uint32_t contention;         /* 1..65535 */
	uint32_t skip;               /* 1..1000000 */
	uint32_t skip_max;           /* 1..100000000 */
	double max_abort_ratio;      /* 0..1: daemon-side cut-off and pushed abort_ratio */
	uint64_t min_aborts;         /* >= 1: window of aborts for the daemon-side cut-off */
};

struct lock_rule {
	char *name;                  /* glob on the lock's name (elide.h name or symbol) */
	char *function;              /* glob on the call site's function */
	enum policy_mode mode;
	char where[160];             /* "file:line" for messages */
};

struct program_rule {
	/* Match criteria; NULL / -1 = any.  All given ones must match. */
	char *exe;                   /* glob on the executable path */
	char *comm;                  /* glob on comm */
	char *user;                  /* user name (resolved to uid at load) */
	uid_t uid;                   /* (uid_t)-1 = any */
	char *unit;                  /* glob on the systemd unit */
	char *slice;                 /* glob on the systemd slice */
	enum policy_mode mode;
	struct policy_knobs knobs;
	struct lock_rule *locks;
	size_t nlocks;
	char where[160];             /* "file:line" */
};

/* daemon.observe_lock_waits: where the observer may attach (futexwatch.c). */
enum observe_lock_waits {
	OBSERVE_LOCK_WAITS_OFF,
	OBSERVE_LOCK_WAITS_AUTO,     /* the cheap attachments only: futex calls or context switches */
	OBSERVE_LOCK_WAITS_ON,       /* the system-call tracepoints too, where nothing cheaper loads */
};

struct elide_config {
	double interval;             /* seconds between aggregations, 0.05..3600, default 1.0 */
	uint32_t max_segments_per_uid; /* cap per user, 1..100000, default 64 */
	enum observe_lock_waits observe_lock_waits; /* BPF observer of programs without libelide, default auto */
	/* Prometheus textfile output (elided/metrics.c); off while NULL. */
	char *metrics_dir;           /* absolute path of the collector's directory */
	double metrics_interval;     /* seconds between writes, 1..3600, default 15 */
	uint32_t metrics_programs;   /* programs written, 1..10000, default 100 */
	uint32_t metrics_locks;      /* locks written per program, 0..1000, default 10 */
	/* The file is 0640 root:metrics_gid: it names every user's programs,
	 * so it is not everyone's to read.  (gid_t)-1: root's group. */
	gid_t metrics_gid;
	enum policy_mode default_mode;   /* default adaptive */
	struct policy_knobs default_knobs;
	struct program_rule *programs;
	size_t nprograms;
	char *files[CONFIG_MAX_FILES];   /* files read, in order ("(built-in default)" when none) */
	size_t nfiles;
};

/* Who a process is, for matching. */
struct process_identity {
	const char *exe;
	const char *comm;
	uid_t uid;
	const char *unit;            /* NULL when not in a unit */
	const char *slice;
};

/* What applies to one process. */
struct policy_decision {
	enum policy_mode mode;       /* never UNSET */
	struct policy_knobs knobs;   /* defaults merged with the rule's */
	const struct program_rule *rule; /* NULL: the default policy */
};

/*
 * Load `main_path` (may not exist: then only drop-ins, or the built-in
 * default when there are none) and every *.conf in `dropin_dir` (may be
 * NULL or missing) in lexical order.  Errors: unknown keys, wrong types,
 * out-of-range values, bad globs, unknown users, syntax errors: returns
 * -EINVAL with `err` = "FILE:LINE: what", one line for each error of every
 * file (a file's syntax error is its only one: libconfig stops there), at
 * most CONFIG_MAX_ERRORS of them, then a line "N more errors".  Unreadable
 * file: -errno with "FILE: strerror".  On error *ret is untouched.
 */
int config_load(const char *main_path, const char *dropin_dir, struct elide_config **ret, char *err, size_t errlen);

/*
 * The system configuration's drop-in directories after /etc/elide.conf.d,
 * as systemd's tools have them: /run for the running system, /usr/lib
 * for packages.  A file in /etc/elide.conf.d replaces one of the same name
 * in these (a link to /dev/null drops it), and /run's replaces /usr/lib's.
 */
#define CONFIG_RUNTIME_DROPIN_DIR "/run/elide.conf.d"
#define CONFIG_VENDOR_DROPIN_DIR "/usr/lib/elide.conf.d"

/*
 * config_load() with several drop-in directories (NULL-terminated, the
 * highest priority first; NULL entries end the list): their *.conf are
 * read in lexical order of the names across all of them, and of two files
 * with one name only the one in the earlier directory is read, or neither
 * when that one is a symlink to /dev/null.
 */
int config_load_dirs(const char *main_path, const char *const *dropin_dirs, struct elide_config **ret, char *err,
		     size_t errlen);

/* The built-in default policy (adaptive for everything, interval 1 s). */
int config_default(struct elide_config **ret);

void config_free(struct elide_config *cfg);

/* The first program rule that matches, merged over the defaults. */
void config_decide(const struct elide_config *cfg, const struct process_identity *id, struct policy_decision *out);

/*
 * The mode a rule of `decision` gives one lock (name and call-site function
 * may be NULL or empty), or POLICY_MODE_UNSET when no lock rule matches.
 */
enum policy_mode config_lock_mode(const struct policy_decision *decision, const char *lock_name,
				  const char *callsite_function);

/* "adaptive" | "on" | "off"; "unset" for UNSET, "invalid" for anything else. */
const char *policy_mode_to_string(enum policy_mode mode);
/* "adaptive" | "on" | "off" → mode; -EINVAL otherwise. */
int policy_mode_from_string(const char *s, enum policy_mode *ret);

#endif
