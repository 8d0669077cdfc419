/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * procwatch: process exec and exit events for elided's discovery, from the
 * sched_process_exec and sched_process_exit tracepoints into a ring buffer.
 * CO-RE: built once against vmlinux.h, relocated by libbpf at load time.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "procwatch.h"

/*
 * GPL-compatible license: the kernel only lets GPL programs call gpl_only
 * helpers (bpf_probe_read_kernel, bpf_get_current_task, which any CO-RE read
 * of task_struct needs).  This file is LGPL-2.1-or-later, which may be
 * distributed under the GPL, so declaring "GPL" here is allowed.
 */
char LICENSE[] SEC("license") = "GPL";

/* 256 KiB: some 5000 events of 40 bytes (+8 header) between two reads. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/*
 * Recent kernels pass group_dead to sched_process_exit.  Declared here
 * (the ___ suffix is dropped when libbpf matches types) so the program still
 * builds against an older vmlinux.h and still loads on an older kernel.
 */
struct trace_event_raw_sched_process_exit___gd {
	bool group_dead;
} __attribute__((preserve_access_index));

/* Named start_boottime since 5.5 (real_start_time before, not read here). */
struct task_struct___sb {
	u64 start_boottime;
} __attribute__((preserve_access_index));

static __always_inline int emit(__u32 type)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct task_struct___sb *leader = (void *)BPF_CORE_READ(task, group_leader);
	struct procwatch_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0; /* full: user space is behind; nothing better to do here */
	e->type = type;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->reserved = 0;
	/* Which process had the pid: user space compares it with the start
	 * time in the segment's name instead of asking /proc, where a zombie
	 * looks alive. */
	e->start_boottime = 0;
	if (bpf_core_field_exists(leader->start_boottime))
		e->start_boottime = BPF_CORE_READ(leader, start_boottime);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp/sched/sched_process_exec")
int procwatch_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	/* After de_thread() the exec'ing thread is the group leader and its
	 * comm is already the new program's. */
	return emit(PROCWATCH_EXEC);
}

SEC("tp/sched/sched_process_exit")
int procwatch_exit(struct trace_event_raw_sched_process_exit *ctx)
{
	struct trace_event_raw_sched_process_exit___gd *gd = (void *)ctx;
	__u64 id = bpf_get_current_pid_tgid();

	/*
	 * One event per process.  Where the kernel says whether this was the
	 * group's last thread, use that: a leader that called pthread_exit()
	 * leaves the process running.  Elsewhere, report the group leader's
	 * exit (pid == tgid).
	 */
	if (bpf_core_field_exists(gd->group_dead)) {
		if (!gd->group_dead)
			return 0;
	} else if ((__u32)(id >> 32) != (__u32)id) {
		return 0;
	}
	return emit(PROCWATCH_EXIT);
}
