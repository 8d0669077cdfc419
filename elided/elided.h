/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided's core state: the process table built from segments, the policy
 * in force, the event loop.  main.c owns it; dbus.c exposes it.
 */
#ifndef ELIDED_H
#define ELIDED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "decide-lock.h"
#include "log.h"
#include "policy-config.h"
#include "learn-format.h"
#include "segment-format.h"
#include "segment-reader.h"

struct discovery;
struct elfsym_maps;
struct bus_state;
struct symbolizer;
struct learned_store;

#define ELIDED_HISTORY 60        /* intervals of per-process history kept */
/* Lock entries followed per process: caps what one process costs the daemon. */
#define ELIDED_MAX_LOCKS_PER_PROCESS 4096u
/* Intervals between two checks of a tracked process against /proc. */
#define ELIDED_PROC_CHECK_EVERY 10u
/* ...for a process whose exit elided is told of exactly (its pidfd, or BPF
 * events, a lost one making every process checked at once): the check only
 * confirms the owner (also looked at with one stat every
 * ELIDED_PROC_CHECK_EVERY intervals) and the file under its name. */
#define ELIDED_PROC_CHECK_WATCHED_EVERY 60u
/* A new segment is adopted at the first adoption pass after it appeared,
 * at most this long (or one interval, when shorter) later: most processes
 * on a host end sooner and then cost nothing but two directory events. */
#define ELIDED_ADOPT_DELAY_USEC 1000000u
/* ... and only once it is this old (else at the pass after): a process of
 * a few milliseconds that a pass happens to catch is not worth adopting. */
#define ELIDED_ADOPT_MIN_AGE_USEC 100000u
/* Segments waiting for that pass; more wait for the periodic rescan. */
#define ELIDED_MAX_PENDING 16384u
#define ELIDED_LOCK_NAME_MAX 128
/* Messages a user can trigger (bad segments, leftovers): at most this many
 * per uid per window, then one summary line (log.h). */
#define ELIDED_LOG_BURST 10u
#define ELIDED_LOG_WINDOW_SEC 10u

#define ELIDED_CALLSITE_TEXT_MAX (ELIDED_LOCK_NAME_MAX * 2)

/* Learning (learning.c, issue 16).  The store is written at most this
 * often (and at shutdown, and at once after elidectl forget). */
#define ELIDED_LEARNED_SAVE_USEC 10000000u
/* A run says something about a lock only over this many attempts: the
 * rule is elide_learn_judge() (common/learn-format.h). */
#define ELIDED_LEARN_MIN_ATTEMPTS ELIDE_LEARN_MIN_NEVER
/* ELIDED_LEARNED_PROBE_INTERVALS: decide-lock.h */
#define ELIDED_TAUGHT_RECENT 256u
#define ELIDED_LEARNED_ID_MAX 96         /* "data:MODULE+0xOFFSET" */
#define ELIDED_STATE_DIR_DEFAULT LOCALSTATEDIR "/lib/elide"

/*
 * How a lock is called: its name (elide.h name, else symbol, else
 * "0x..."), its call site's function ("" when unknown) and the call site
 * as text ("fn+0x12 (module)"), packed in one allocation (lock-names.c).
 * Every view has one; never NULL.
 */
struct lock_names {
	uint16_t function_at, callsite_at; /* where the other two strings start in text */
	char text[];                 /* name \0 function \0 callsite text \0 */
};

static inline const char *lock_name(const struct lock_names *nm)
{
	return nm->text;
}

static inline const char *lock_function(const struct lock_names *nm)
{
	return nm->text + nm->function_at;
}

static inline const char *lock_callsite(const struct lock_names *nm)
{
	return nm->text + nm->callsite_at;
}

/* NULL when out of memory; strings are cut to ELIDED_LOCK_NAME_MAX - 1
 * bytes (the call site text to ELIDED_CALLSITE_TEXT_MAX - 1); NULL = "". */
struct lock_names *lock_names_new(const char *name, const char *function, const char *callsite_text);

/* The counters elided follows per lock every interval (the rest are read
 * from the segment when somebody asks: GetLocks). */
enum lock_rate {
	LOCK_RATE_ACQUIRED,
	LOCK_RATE_ATTEMPTS,
	LOCK_RATE_COMMITS,
	LOCK_RATE_ABORTS,            /* every cause together */
	LOCK_RATE_CYCLES_LOST,
	LOCK_NRATES
};

/*
 * One lock as of the last interval: only what every interval needs.  At
 * the scale goal (100 processes of 1000 locks) the interval is bound by
 * the memory these views occupy, so they hold five followed counters, not
 * all of them, small enums as bytes, and the names (written once) apart.
 */
struct lock_view {
	uint64_t addr;
	uint64_t callsite;           /* for naming it once its symbols are known */
	uint64_t last[LOCK_NRATES];  /* the counters at the last interval */
	float rates[LOCK_NRATES];    /* per second over the last interval */
	uint32_t index;              /* entry index in the segment */
	uint32_t updated_in;         /* (uint32_t)refreshes of the pass that last updated it */
	uint32_t decided_in;         /* ... that last adapted and decided for it (pass_lock) */
	uint64_t window_aborts, window_attempts; /* daemon-side cut-off window */
	struct lock_names *nm;       /* cold: names, call site */
	uint8_t kind, state, reason, policy; /* enum elide_seg_kind, _state, _reason, elide_policy */
	uint8_t ctl_policy, ctl_source; /* the decision the segment holds now */
	uint8_t override;            /* enum policy_mode from elidectl; UNSET = none */
	uint8_t rule_mode;           /* enum policy_mode from the config's lock rules; UNSET = none */
	uint8_t backoff_intervals;   /* daemon-side re-probe back-off (exponential, <= 64) */
	uint8_t backoff_left;        /* intervals until the next probe */
	bool daemon_off;             /* the daemon's long-window adaptation turned it off */
	bool named;                  /* name set through elide.h: no need to look again */
	bool rule_stale;             /* rule_mode needs computing (new lock, new name) */
	bool sym_pending;            /* symbol names not looked up yet (symbolizer.c) */
	uint8_t learned;             /* VIEW_LEARNED_* (decide-lock.h) */
};

/* A lock's cumulative counters, read from its segment on request. */
struct lock_totals {
	const struct lock_view *view;
	uint64_t stats[ELIDE_SEG_NSTATS];
	/* Contention (ELIDE_SEG_FEATURE_WATCH), as the entry says; 0 when its
	 * libelide keeps none. */
	uint64_t wait_ns, wait_max_ns, hold_ns, hold_samples, hold_long;
};

struct history_point {
	uint64_t time_ns;            /* CLOCK_MONOTONIC */
	double commits_per_sec, aborts_per_sec, acquired_per_sec, cycles_lost_per_sec;
	double attempts_per_sec;
	double wait_per_sec;         /* seconds waited for locks a second (1: one thread all the time) */
};

struct tracked_process {
	/* Read every interval: together at the start, so that a pass over a
	 * thousand quiet processes touches one or two lines of each (the
	 * fields were spread over 8 KiB). */
	struct tracked_process *next;
	pid_t pid;
	uid_t uid;
	struct seg_map *map;         /* seg_name mapped for the interval's reads; NULL until read */
	struct lock_view *locks;
	size_t nlocks;
	uint32_t *moving;            /* positions in locks[] whose rates are not zero, ascending */
	size_t nmoving;
	uint64_t refreshes;          /* reads of its segment so far */
	uint64_t last_sample_ns;
	uint64_t created_ns;         /* the segment's; a new value means a new image (exec) */
	uint64_t start_time;
	uint32_t elision;            /* header.elision */
	uint32_t mode;               /* header.mode (enum elide_seg_mode) */
	uint32_t sample;
	struct seg_peek last_peek;   /* the header as its last read saw it (quiet_pass()) */
	enum policy_mode override;   /* from elidectl (SetProcessMode); UNSET = none */
	bool rules_dirty;            /* decision changed: every lock's rule_mode is stale */
	bool lock_overrides;         /* a lock has had one since the last reset (SetLockMode) */
	bool dirty_tracking;         /* the segment marks the entries written (its last read said so) */
	bool peek_valid;             /* last_peek is set */
	bool exit_watched;           /* its exit is reported at once (pidfd, or BPF events none lost) */
	bool check_next;             /* the next read checks it against /proc (events were lost) */
	bool walk_views;             /* the next pass visits every view (a countdown, an override, names) */
	bool control_valid;
	bool maps_reloaded;          /* already reloaded during this refresh */
	bool sym_pending;            /* some lock waits for its symbol names */
	bool warned_skipped, warned_bad; /* logged once per process */
	size_t history_len, history_next;
	uint64_t wait_total_ns;      /* header.wait_ns at the last read (FEATURE_WAIT_TOTAL) */
	bool wait_total_known;       /* wait_total_ns is from this image's segment */
	struct policy_decision decision; /* from the config */
	/* Read when something changed, or on request. */
	char seg_name[64];
	char status_reason[ELIDE_SEG_REASON_MAX];
	char exe[ELIDE_SEG_EXE_MAX];
	char comm[ELIDE_SEG_COMM_MAX];
	char unit[128];              /* "" when none */
	char slice[128];
	struct history_point history[ELIDED_HISTORY];
	struct elide_seg_control control_written; /* what we last wrote */
	char last_error[SEG_ERR_MAX]; /* last read/write problem, "" when fine */
	struct elfsym_maps *maps;    /* for naming locks; reloaded when names fail */
	/* Learning (learning.c): the program's identity, and the verdicts
	 * of its earlier runs given to this one as hints (NULL, 0: none). */
	char *learned_program;
	uid_t learned_uid;           /* whose entries learned_program's run feeds */
	struct elide_seg_hint *hints;
	int64_t *hint_since;         /* per hint: since when (seconds since the Epoch) */
	uint32_t nhints;
	bool hints_dirty;            /* not yet in the control block */
	bool taught;                 /* its exit's .teach file was learned from */
};

/* The name a process goes by in logs and metrics: its executable, else its
 * command name. */
static inline const char *tracked_process_name(const struct tracked_process *p)
{
	return p->exe[0] ? p->exe : p->comm;
}

struct pending_segment {
	char name[64];
	pid_t pid;                   /* from the name, 0 if it has none: compared before the name */
	uint64_t seen_usec;          /* CLOCK_MONOTONIC */
};

struct elided {
	sd_event *event;
	sd_bus *bus;
	struct discovery *discovery;
	char *config_path;
	char *config_dropin_dir;
	char *runtime_dir;
	int runtime_dirfd;
	struct elide_config *config;
	char last_reload[CONFIG_ERR_MAX + 64]; /* "ok at ..." or the error */
	struct tracked_process *processes;
	size_t nprocesses;
	/* Segments seen and not adopted yet, oldest first (process.c). */
	struct {
		struct pending_segment *list;
		size_t n, alloc;
		bool adopting;           /* adopt_oldest() is walking the list */
		sd_event_source *timer; /* the next adoption pass; one-shot */
	} pending;
	uint64_t started_ns;
	uint64_t intervals;
	uint64_t lost_events_seen;   /* discovery_lost_events() at the last pass */
	bool losing_events;          /* it moved at the last pass */
	double cpu_seconds_per_interval; /* our own cost, for status */
	bool rtm_usable;
	char rtm_reason[160];
	bool bus_required;           /* --no-bus not given */
	struct bus_state *bus_state; /* dbus.c: callers, queues, subscribers */
	size_t nsubscribers;
	struct log_ratelimit ratelimit; /* per uid, for what users can trigger */
	struct symbolizer *symbolizer; /* symbolizer.c: names from ELF files, off the loop */
	struct metrics *metrics;     /* metrics.c: Prometheus textfile output */
	/* Segments in the runtime directory that are not tracked, for status:
	 * now (as of the last rescan) and since start (first sightings). */
	struct {
		size_t refused, over_cap, uids_at_cap;
		uint64_t refused_total, over_cap_total;
		/* Processes with libelide but no segment (discovery_no_segment),
		 * as of the last interval. */
		size_t no_segment;
		uint64_t no_segment_total;
	} unseen;
	bool runtime_dir_lost;       /* warned: the path is not the directory we hold */
	/* Learning (learning.c): NULL state_dir = off. */
	char *state_dir;
	int state_dirfd;             /* -1: nothing is loaded or saved */
	struct learned_store *learned;
	bool learned_dirty, learned_save_failing;
	uint64_t learned_changes;    /* puts and forgets: a .hints file to write */
	uint64_t learned_saved_usec; /* CLOCK_MONOTONIC of the last save attempt */
	int hints_dirfd;             /* RUNTIME/hints (hints.c), -1: none */
	bool hints_acl_warned;
	/* The last runs learned from at exit, so that a run's segment and its
	 * .teach file do not both count. */
	struct {
		pid_t pid;
		uint64_t start_time;
	} taught_recent[ELIDED_TAUGHT_RECENT];
	size_t taught_recent_next;
	/* futexwatch.c: lock waits of programs without libelide; NULL = not
	 * observed, futexwatch_why says why. */
	struct futexwatch *futexwatch;
	char futexwatch_why[128];
	bool allow_bpf;              /* not --no-bpf */
};

/* A lock of a program without libelide, as futexwatch.c saw it. */
struct observed_lock {
	pid_t pid;
	uid_t uid;
	uint64_t start_time;          /* /proc/PID/stat field 22 */
	uint64_t uaddr;               /* the futex word: the mutex */
	uint64_t waits, wait_ns, wait_max_ns;
	char comm[16];
	char exe[256];                /* readlink of /proc/PID/exe, "" when unknown */
	char where[256];              /* "MODULE+0xOFFSET" from /proc/PID/maps, else the address */
	char name[ELIDED_LOCK_NAME_MAX]; /* its symbol, from the symbolizer; "" when not known (yet) */
};

/* futexwatch.c */
/* Loads the observer when daemon.observe_lock_waits and BPF are allowed;
 * -ENOMEM only (not loading is a state, elided_futexwatch_state()). */
int elided_futexwatch_start(struct elided *d);
void elided_futexwatch_stop(struct elided *d);
/* "bpf", or why not ("off (--no-bpf)", "unavailable: ..."). */
const char *elided_futexwatch_state(const struct elided *d);
/* The locks processes without libelide slept waiting for, that `caller`
 * may see, most waiting first; the caller frees *ret.  -EOPNOTSUPP when
 * not observed. */
int elided_observed_locks(struct elided *d, uid_t caller, struct observed_lock **ret, size_t *n);

/* process.c */
uint64_t now_ns(void);
/* A segment appeared: adopted at the next adoption pass if its file is
 * still there then (ELIDED_ADOPT_DELAY_USEC). */
void elided_defer_segment(struct elided *d, const char *name);
/* Adopt every deferred segment now (start-up, a runtime directory back). */
void elided_adopt_pending(struct elided *d);
/* A segment file went: not adopted if it waited, its process reaped if gone. */
void elided_segment_removed(struct elided *d, const char *name);
/* Look at the runtime directory again: segments refused earlier (per-user
 * cap, not yet valid) get another chance, leftovers of dead processes go. */
void elided_rescan(struct elided *d);
/* pid may be gone: untracked unless /proc shows it alive with its start time. */
void elided_reap(struct elided *d, pid_t pid);
/* The process pid that started at start_time is dead (zombie or reaped):
 * untracked without asking /proc.  start_time 0: as elided_reap. */
void elided_process_exited(struct elided *d, pid_t pid, uint64_t start_time);
/* Untrack every process, their segments left alone (runtime directory gone). */
void elided_forget_all(struct elided *d);
void elided_refresh_all(struct elided *d);
void elided_redecide_all(struct elided *d);
void elided_free_processes(struct elided *d);
/* symbolizer.c: lock names from the ELF files a process maps, parsed by
 * a child running as the process's user, never by the daemon. */
int elided_symbolizer_new(struct elided *d);
void elided_symbolizer_free(struct elided *d);
/* Names p's pending locks from the cache; asks a child for the rest when
 * the user's budget allows. */
void elided_symbolize(struct elided *d, struct tracked_process *p);
size_t elided_symbolizer_cached_bytes(struct elided *d, uid_t uid);
/* A lock of a process without libelide (the BPF observer's), named the same
 * way, by a child running as uid: 1 and its symbol in name when known, 0
 * when not (yet: asked for at the next flush; the name is "" then), or
 * -errno.  pid and start_time (/proc/PID/stat field 22) are the process. */
int elided_symbolize_observed(struct elided *d, pid_t pid, uid_t uid, uint64_t start_time, uint64_t addr, char *name,
			      size_t size);
/* After a walk of the observed locks: children for what was not known,
 * processes not asked about for a minute forgotten. */
void elided_symbolize_observed_flush(struct elided *d);
/* Whether that lock of that process (start_time as above) was asked about
 * already: named, or its name on the way. */
bool elided_symbolizer_observed_known(struct elided *d, pid_t pid, uint64_t start_time, uint64_t addr);
/* main.c */
void elided_reschedule(struct elided *d);
/* learning.c */
int elided_learning_open(struct elided *d);
void elided_learning_save(struct elided *d, bool force);
void elided_learning_close(struct elided *d);
/* A process ends (or exec's): what its run taught goes into the store. */
void elided_learn_from(struct elided *d, struct tracked_process *p, bool at_exit);
/* A .teach file's run (hints.c read and checked it): learned under uid. */
struct elide_learn_teach;
void elided_learn_from_teach(struct elided *d, uid_t uid, const char *program, pid_t pid, uint64_t start_time,
			     const struct elide_learn_teach *t, uint32_t n);

/* hints.c: the learned-verdict files (common/learn-format.h). */
int elided_hints_open(struct elided *d);
void elided_hints_close(struct elided *d);
void elided_hints_remove(struct elided *d);
void elided_hints_write(struct elided *d, uid_t uid, const char *program);
void elided_hints_rewrite_all(struct elided *d);
bool elided_is_teach_name(const char *name);
void elided_teach_file(struct elided *d, const char *name);
void elided_teach_scan(struct elided *d);
/* At adoption (and exec): p's program identity and its hints. */
void elided_learning_adopt(struct elided *d, struct tracked_process *p);
/* p's owner changed with no new segment (learning.c says when it is an exec). */
void elided_learning_owner_changed(struct elided *d, struct tracked_process *p);
/* The index of the "never" hint naming v, or -1. */
int elided_learned_hint_of(const struct tracked_process *p, const struct lock_view *v);
/* When v runs under a "never elide" verdict of the store: since when that
 * verdict holds (seconds since the Epoch; 0 when not known, e.g. the
 * decision was found in the segment after a restart of elided); -1 when v
 * runs under no learned decision. */
int64_t elided_learned_since(const struct tracked_process *p, const struct lock_view *v);
/* Drops the entries of uid (LEARNED_ANY_UID: all) for the executable exe
 * (NULL or "": every program); *count says how many.  Saved at once. */
int elided_forget_learned(struct elided *d, uid_t uid, const char *exe, size_t *count);

/* process.c */
struct tracked_process *elided_find_process(struct elided *d, pid_t pid);
/* process-owner.c */
/* Before a D-Bus call reads or steers p: its owner now (fresh from /proc,
 * not the cached one).  A change drops p's runtime overrides (logged,
 * pushed at once) and updates p->uid.  0, or -ESRCH when p is gone. */
int elided_check_owner(struct elided *d, struct tracked_process *p);
/* process-decisions.c */
/* Mode or lock override from elidectl; lock NULL = whole process.  Pushes at once. */
int elided_set_override(struct elided *d, struct tracked_process *p, const char *lock, enum policy_mode mode, uid_t caller,
			char *err, size_t errlen);
int elided_reset_override(struct elided *d, struct tracked_process *p, const char *lock, uid_t caller, char *err,
			  size_t errlen);
/* process-refresh.c */
/* The current counters of p's locks, in view order; locks gone since the
 * last interval are left out.  *ret is freed by the caller. */
int elided_read_lock_totals(struct elided *d, struct tracked_process *p, struct lock_totals **ret, size_t *n,
			    char *err, size_t errlen);
/* main.c */
/* Re-read the configuration; on error keep the running one and fill err (file:line: what). */
int elided_reload(struct elided *d, char *err, size_t errlen);
/* One-line summary for STATUS= and GetStatus. */
void elided_status_line(struct elided *d, char *buf, size_t size);

/* dbus.c: see dbus.h */
#define ELIDED_BUS_NAME "org.elide.elided1"
#define ELIDED_BUS_PATH "/org/elide/elided1"
#define ELIDED_BUS_INTERFACE "org.elide.Manager1"

#endif
