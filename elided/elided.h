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

#include "policy-config.h"
#include "segment-format.h"
#include "segment-reader.h"

struct discovery;
struct elfsym_maps;

#define ELIDED_HISTORY 60        /* intervals of per-process history kept */
/* Lock entries followed per process: caps what one process costs the daemon. */
#define ELIDED_MAX_LOCKS_PER_PROCESS 4096u
/* Intervals between two checks of a tracked process against /proc. */
#define ELIDED_PROC_CHECK_EVERY 10u
#define ELIDED_LOCK_NAME_MAX 128

/* How a lock is called; allocated with its view, never NULL. */
struct lock_names {
	char name[ELIDED_LOCK_NAME_MAX];     /* elide.h name, else symbol, else "0x..." */
	char function[ELIDED_LOCK_NAME_MAX]; /* call site function, or "" */
	char callsite_text[ELIDED_LOCK_NAME_MAX * 2]; /* "fn+0x12 (module)" */
};

/*
 * Per-lock figures of the last interval.  Laid out hot first: each interval
 * updates the state, totals, rates and window of every lock (100,000 of
 * them at the scale goal), so a view is only those; the names (written
 * once) live apart.
 */
struct lock_view {
	uint32_t index;              /* entry index in the segment */
	uint32_t kind, state, reason, policy;
	enum policy_mode override;   /* from elidectl; UNSET = none */
	enum policy_mode rule_mode;  /* from the config's lock rules; UNSET = none */
	bool daemon_off;             /* the daemon's long-window adaptation turned it off */
	uint32_t ctl_policy, ctl_source; /* the decision the segment holds now */
	bool named;                  /* name set through elide.h: no need to look again */
	bool rule_stale;             /* rule_mode needs computing (new lock, new name) */
	uint32_t backoff_intervals;  /* daemon-side re-probe back-off (exponential) */
	uint32_t backoff_left;       /* intervals until the next probe */
	uint64_t addr, callsite;
	uint64_t window_aborts, window_attempts; /* daemon-side cut-off window */
	uint64_t totals[ELIDE_SEG_NSTATS];   /* cumulative, from the segment */
	float rates[ELIDE_SEG_NSTATS];       /* per second over the last interval */
	struct lock_names *nm;       /* written once: kept out of the views' stride */
};

struct history_point {
	uint64_t time_ns;            /* CLOCK_MONOTONIC */
	double commits_per_sec, aborts_per_sec, acquired_per_sec, cycles_lost_per_sec;
};

struct tracked_process {
	pid_t pid;
	uint64_t start_time;
	uint64_t created_ns;         /* the segment's; a new value means a new image (exec) */
	uid_t uid;
	char seg_name[64];
	char exe[ELIDE_SEG_EXE_MAX];
	char comm[ELIDE_SEG_COMM_MAX];
	char unit[128];              /* "" when none */
	char slice[128];
	uint32_t elision;            /* header.elision */
	uint32_t mode;               /* header.mode (enum elide_seg_mode) */
	uint32_t sample;
	char status_reason[ELIDE_SEG_REASON_MAX];
	struct policy_decision decision; /* from the config */
	bool rules_dirty;            /* decision changed: every lock's rule_mode is stale */
	enum policy_mode override;   /* from elidectl (SetProcessMode); UNSET = none */
	struct lock_view *locks;
	size_t nlocks;
	uint64_t last_sample_ns;
	struct history_point history[ELIDED_HISTORY];
	size_t history_len, history_next;
	struct elide_seg_control control_written; /* what we last wrote */
	bool control_valid;
	char last_error[SEG_ERR_MAX]; /* last read/write problem, "" when fine */
	struct elfsym_maps *maps;    /* for naming locks; reloaded when names fail */
	bool maps_reloaded;          /* already reloaded during this refresh */
	uint64_t refreshes;          /* reads of its segment so far */
	bool warned_skipped, warned_bad; /* logged once per process */
	struct tracked_process *next;
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
	uint64_t started_ns;
	uint64_t intervals;
	double cpu_seconds_per_interval; /* our own cost, for status */
	bool rtm_usable;
	char rtm_reason[160];
	bool bus_required;           /* --no-bus not given */
};

/* process.c */
uint64_t now_ns(void);
void elided_adopt_segment(struct elided *d, const char *name);
/* Look at the runtime directory again: segments refused earlier (per-user
 * cap, not yet valid) get another chance, leftovers of dead processes go. */
void elided_rescan(struct elided *d);
void elided_reap(struct elided *d, pid_t pid);
void elided_refresh_all(struct elided *d);
void elided_redecide_all(struct elided *d);
void elided_free_processes(struct elided *d);
/* main.c */
void elided_reschedule(struct elided *d);

struct tracked_process *elided_find_process(struct elided *d, pid_t pid);
/* Mode or lock override from elidectl; lock NULL = whole process.  Pushes at once. */
int elided_set_override(struct elided *d, struct tracked_process *p, const char *lock, enum policy_mode mode,
			char *err, size_t errlen);
int elided_reset_override(struct elided *d, struct tracked_process *p, const char *lock, char *err, size_t errlen);
/* Re-read the configuration; on error keep the running one and fill err (file:line: what). */
int elided_reload(struct elided *d, char *err, size_t errlen);
/* One-line summary for STATUS= and GetStatus. */
void elided_status_line(struct elided *d, char *buf, size_t size);

/* dbus.c: see dbus.h */
#define ELIDED_BUS_NAME "org.elide.elided1"
#define ELIDED_BUS_PATH "/org/elide/elided1"
#define ELIDED_BUS_INTERFACE "org.elide.Manager1"

#endif
