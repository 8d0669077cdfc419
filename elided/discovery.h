/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Process discovery for elided.
 *
 * Two sources, started together:
 *   - inotify on the runtime directory: a new segment file means a new
 *     process with libelide (this is how a process is adopted), a removed
 *     one means it exited normally;
 *   - process exec/exit events: a libbpf CO-RE program on the
 *     sched_process_exec and sched_process_exit BTF-enabled tracepoints
 *     (tp_btf: no tracefs needed) feeding a ring buffer (needs
 *     CAP_BPF/CAP_PERFMON or root, and a kernel with BTF), or,
 *     where BPF is unavailable, refused or compiled out (--disable-bpf),
 *     a pidfd per adopted process that becomes readable when it exits.
 * Either way dead processes are reported at once, and exactly: a process
 * is dead when its pidfd is readable or its exit event arrives, reaped or
 * not (a zombie's /proc/PID/stat still shows its start time).
 *
 * The runtime directory is held open: removing it sends no inotify event
 * while we hold it, so the owner compares the path with the directory it
 * holds (discovery_dir_replaced) and calls discovery_reopen.
 *
 * Segment names: every directory entry whose name seg_parse_name() accepts
 * is reported, whatever its type (symlinks and directories included): this
 * module only sees names, never opens or stats them, and seg_read() is the
 * one place that refuses what is not a regular file (-ELOOP, -EBADMSG).
 * A name is reported added once and removed once: a known-name set drops
 * duplicates (a file created during the initial scan) and, after an inotify
 * queue overflow, a rescan reports exactly the difference.  libelide creates
 * its file before writing the header, so a read right after segment_added
 * may see a zeroed header (-EBADMSG): retry shortly.
 *
 * Ordering: exit events (ring buffer or pidfd) are dispatched before segment
 * events, so when a pid is reused the old process's exit is reported before
 * the new process's segment_added.
 *
 * Callbacks may call discovery_watch_pid/discovery_unwatch_pid, but must not
 * free the discovery object.
 */
#ifndef ELIDED_DISCOVERY_H
#define ELIDED_DISCOVERY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

struct discovery;

struct discovery_ops {
	/* A segment file appeared (or existed at start): name inside the runtime dir. */
	void (*segment_added)(void *userdata, const char *name);
	/* A file was renamed into the runtime dir (a .teach file, say): its
	 * name, whatever it is.  May be NULL. */
	void (*teach_file)(void *userdata, const char *name);
	/* A segment file was removed (only names reported added before). */
	void (*segment_removed)(void *userdata, const char *name);
	/* A process exec'd (BPF only; pid and the new comm).  May be NULL. */
	void (*process_exec)(void *userdata, pid_t pid, const char *comm);
	/*
	 * A watched (or, with BPF, any) process exited: dead, perhaps not yet
	 * reaped.  start_time (/proc/PID/stat field 22) says which process
	 * had that pid; 0 when the kernel did not say (BPF on kernels before
	 * 5.5), and then a pid reused since may be alive.
	 */
	void (*process_exit)(void *userdata, pid_t pid, uint64_t start_time);
};

enum discovery_method {
	DISCOVERY_BPF,      /* tracepoints + ring buffer */
	DISCOVERY_FALLBACK, /* inotify + pidfd */
};

/*
 * Start watching `runtime_dir` (not a symlink) on `event`.  With allow_bpf,
 * try the BPF program first and fall back (one notice saying why) when it
 * cannot load.  Calls ops->segment_added for every segment already present,
 * in strcmp() order, before returning; *ret is set before the first
 * callback, so callbacks may already watch pids through it (and *ret is
 * reset to NULL on failure).  -ENOENT/-ENOTDIR/-ELOOP for a missing or
 * unusable directory.
 */
int discovery_new(sd_event *event, const char *runtime_dir, bool allow_bpf, const struct discovery_ops *ops,
		  void *userdata, struct discovery **ret);
void discovery_free(struct discovery *d);

enum discovery_method discovery_get_method(const struct discovery *d);
/*
 * "bpf (tp_btf sched_process_exec/exit, ring buffer)" or
 * "fallback (inotify + pidfd): <why BPF is not used>".
 */
const char *discovery_describe(const struct discovery *d);

/*
 * Exec and exit events BPF discovery could not deliver since it started
 * (its ring buffer was full); 0 without BPF.  When it moves, an exit may
 * have been missed: every tracked process is checked against /proc.
 */
uint64_t discovery_lost_events(const struct discovery *d);

/*
 * Report the exit of `pid` once (pidfd in fallback mode; a no-op with BPF,
 * which sees every exit).  start_time, when not 0, is the start time of the
 * process meant: checked after the pidfd is opened, so that the pidfd is of
 * that process and not of a later one with a reused pid.  0 when watched
 * (or already watched), -ESRCH when the process is already reaped (or the
 * pid is another process's), other -errno on failure.  A process that
 * exited but is not reaped yet is reported from the event loop.
 */
int discovery_watch_pid(struct discovery *d, pid_t pid, uint64_t start_time);
void discovery_unwatch_pid(struct discovery *d, pid_t pid);

/*
 * 1 when the runtime directory's path no longer names the directory held
 * open (removed, renamed, replaced, or a mount on top), 0 when it does.
 */
int discovery_dir_replaced(const struct discovery *d);
/*
 * Open the runtime directory's path afresh, watch it and scan it: its
 * segments are reported added (names reported before are forgotten without
 * segment_removed: the caller dropped their processes; on failure too, as
 * the held directory is not at the path).  -ENOENT while it does not exist
 * again; on failure the old directory stays watched.
 */
int discovery_reopen(struct discovery *d);
/* The directory held open (for reads relative to it); -1 when none. */
int discovery_dir_fd(const struct discovery *d);

/*
 * Processes with libelide but no segment: what elided cannot see because
 * the runtime directory is full, unwritable or missing for them (or they
 * run with stats=0).  A process counts when
 *   - it runs a program it exec'd (not a fork child that has not exec'd:
 *     flag PF_FORKNOEXEC in /proc/PID/stat; libelide makes the segment of
 *     an exec'd program in its constructor, a fork child's only when it
 *     first needs one),
 *   - /proc/PID/maps maps a file named libelide.so (or libelide.so.N),
 *   - and two ticks (and at least a second) after it became a candidate,
 *     no segment in the runtime directory has its pid and start time.
 * Candidates: every process whose segment is removed (an exit, or a file
 * removed under a live process), with BPF every exec, and a sweep of /proc
 * at the first tick (what ran before elided), after the runtime directory
 * went or came back, and after candidates were dropped; without BPF a
 * sweep every minute.
 * Work per tick is bounded (stat and maps reads); a warning line at most
 * every 5 minutes says how many were found since the last one.
 *
 * discovery_tick does that work: call it once per interval.
 * discovery_no_segment: how many are counted now (at most 1024 are
 * followed), *total how many were found since start.
 */
void discovery_tick(struct discovery *d);
size_t discovery_no_segment(const struct discovery *d, uint64_t *total);

struct discovery_no_segment_proc {
	pid_t pid;
	uid_t uid;           /* effective, when it was counted */
	uint64_t start_time; /* /proc/PID/stat field 22 */
	char comm[16];       /* as the kernel had it (the program's bytes) */
};
/* The processes counted now; *ret points into d, valid until the next
 * call into d or event dispatched. */
size_t discovery_no_segment_list(const struct discovery *d, const struct discovery_no_segment_proc **ret);

/* Tests: load the exit program for kernels before 6.16 (no group_dead
 * argument) whatever the kernel. */
extern bool discovery_bpf_exit_by_live_count;

#endif
