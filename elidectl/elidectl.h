/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Shared by elidectl's verbs. */
#ifndef ELIDECTL_H
#define ELIDECTL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "segment-reader.h"
#include "source.h"
#include "table.h"

/* Exit statuses, documented in --help and elidectl(1). */
#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_NOT_FOUND 3     /* no such process or lock */
#define EXIT_DENIED 4        /* another user's process, or root only */
#define EXIT_NO_DAEMON 5     /* elided is not running (or not reachable) */

#define ELIDED_BUS_NAME "org.elide.elided1"
#define ELIDED_BUS_PATH "/org/elide/elided1"
#define ELIDED_BUS_INTERFACE "org.elide.Manager1"

enum sort_key {
	SORT_ACQUIRED,
	SORT_NAME,
	SORT_COMMITS,
	SORT_ABORTS,
	SORT_CONFLICT,
	SORT_CAPACITY,
	SORT_CYCLES,
	SORT_WAIT,
};

struct ctl_options {
	const char *runtime_dir;
	bool runtime_dir_set;    /* --runtime-dir: read segments directly */
	const char *host;        /* -H: elided on another host over ssh */
	const char *lock;        /* set/reset --lock */
	bool history;            /* show --history: elided's rates over its last intervals */
	bool daemon;             /* the source is elided (not the segments) */
	bool json;
	bool json_pretty;
	bool legend;
	bool verbose;
	bool sort_set;
	enum sort_key sort;
	bool max_set;
	unsigned long max;
	const char *output;      /* -o: the table's columns */
	bool full;               /* --full: no ellipsis */
	bool no_pager;
	bool no_color;
};

int verb_list(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_show(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_status(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_set(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_reset(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_reload(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_forget(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_learned(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_check_config(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_hw(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_run(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_top(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_candidates(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_enable(struct source *s, const struct ctl_options *o, int argc, char **argv);
int verb_disable(struct source *s, const struct ctl_options *o, int argc, char **argv);

/* show PID --history (history.c): elided's GetHistory as sparklines or JSON;
 * returns an exit status. */
int show_history(struct source *s, const struct ctl_options *o, pid_t pid);
/* top PID (top-locks.c): the process's locks by current rates; returns an
 * exit status.  top_locks_check_output: -EINVAL (logged) for an unknown
 * column. */
int top_locks(struct source *s, const struct ctl_options *o, pid_t pid);
int top_locks_check_output(const char *output);

/* libelide.so: $ELIDE_LIBDIR's, else the build tree's next to elidectl,
 * else LIBDIR's.  Fills buf with the last path tried; -errno when none is
 * readable. */
int find_libelide(char *buf, size_t size);

/* A failed D-Bus call: prints "what: message" and returns the exit status
 * (EXIT_NOT_FOUND, EXIT_DENIED, EXIT_NO_DAEMON, EXIT_USAGE or EXIT_FAIL). */
int bus_error_exit(const char *what, const sd_bus_error *e, int r);

/* Whether this CPU can elide; when not, warns that libelide in `who`
 * ("every program", a unit, a command) would elide nothing. */
bool rtm_usable_or_say(const char *who);

/* "123" → 123; -EINVAL for anything else. */
int parse_pid(const char *s, pid_t *ret);

/* Process totals, shared by list, status and top. */
struct proc_totals {
	uint32_t locks;         /* tracked lock entries, overflow excluded */
	uint64_t acquired, attempts, commits, aborts, cycles_lost;
	double age;             /* seconds since the segment was created */
	double commits_per_sec; /* < 0: unknown (clock went backwards) */
	double abort_ratio;     /* < 0: unknown; else aborts / attempts */
	double cycles_lost_per_sec; /* < 0: unknown */
	double acquired_per_sec;    /* < 0: unknown */
	double wait_per_sec;        /* seconds waited for locks a second; < 0: unknown */
	bool current;           /* rates over elided's last interval, not averages */
};
void totals_of(struct source *s, const struct seg_snapshot *snap, uint64_t now_ns, struct proc_totals *t);
void user_name(uid_t uid, char *buf, size_t size);

/* The per-process rate table of status and top, busiest first by `key`
 * (SORT_ACQUIRED, SORT_COMMITS, SORT_ABORTS or SORT_CYCLES); max 0 = all;
 * `output`: -o's columns.  -EINVAL (logged) for an unknown column. */
int print_rates(struct source *s, struct seg_snapshot **procs, size_t n, enum sort_key key, size_t max,
		bool legend, const char *output);

/* User-facing names, in the vocabulary of libelide's exit report. */
const char *kind_name(uint32_t kind);
const char *state_name(uint32_t state);
const char *reason_name(uint32_t reason);
const char *abort_cause_name(unsigned cause); /* cause: 0 .. N_ABORT_CAUSES-1 */
#define N_ABORT_CAUSES (ELIDE_SEG_STAT_ABORT_OTHER - ELIDE_SEG_STAT_ABORT_CONFLICT + 1)

uint64_t lock_aborts(const struct elide_seg_lock *l);
/* Whether its libelide watched it: waits timed or holds sampled. */
bool lock_has_contention(const struct elide_seg_lock *l);

/* Why a lock is in its state, for people and JSON's "reason": libelide's
 * reason, or who turned it off or on: "override" (elidectl set), "config"
 * (elide.conf), "daemon" (elided's adaptation). */
const char *lock_why(const struct elide_seg_lock *l);
/* JSON's decided_by: "config", "override", "adaptation"; NULL when elided
 * decided nothing. */
const char *decided_by_name(const struct elide_seg_lock *l);

/*
 * A process's state, from its locks: "eliding" (a lock elides), "backoff"
 * (none does, some back off after aborts), "off" (libelide passes every
 * lock through, or every lock that would elide is turned off: `why` says
 * why or by whom), "plain" (no lock contended enough to elide yet).
 */
struct proc_state {
	const char *state;
	char why[64];           /* "" when there is nothing to add */
};
void process_state(const struct seg_snapshot *snap, struct proc_state *ret);
enum table_color state_color(const char *state);

/* status --json: elided's LastReload and DiscoveryMethod prose as objects
 * (result/startup/time/error, method/mechanism/fallback_reason), each
 * with the prose as "description". */
struct json;
void json_last_reload(struct json *j, const char *prose);
void json_discovery(struct json *j, const char *prose);

/* --output for status and top: -EINVAL (logged) for an unknown column. */
int rates_check_output(const char *output);

/* How long ago `since` was (seconds since the Epoch) at `now`: "45s",
 * "12m", "5h", "3d"; "-" when since is 0 (unknown). */
void format_age(int64_t since, int64_t now, char *buf, size_t size);

/* CLOCK_REALTIME in ns. */
uint64_t now_realtime_ns(void);
/* Seconds since the segment was created; <= 0 when the clock disagrees. */
double segment_age(const struct seg_snapshot *snap, uint64_t now_ns);

#endif
