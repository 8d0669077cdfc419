/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * procwatch: process exec and exit events for elided's discovery, from the
 * sched_process_exec and sched_process_exit tracepoints into a ring buffer.
 *
 * BTF-enabled tracepoints ("tp_btf/"): attached through the kernel's BTF
 * (/sys/kernel/btf/vmlinux) alone, without tracefs, which "tp/" programs
 * need to find their tracepoint ids and which bare containers and minimal
 * hosts often do not mount.  tp_btf exists since 5.5, the ring buffer
 * since 5.8: every kernel that has the one has the other.
 * CO-RE: built once against vmlinux.h, relocated by libbpf at load time.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "procwatch.h"

/*
 * GPL-compatible license: the kernel only lets GPL programs call gpl_only
 * helpers (bpf_probe_read_kernel, which any CO-RE read of task_struct
 * needs).  This file is LGPL-2.1-or-later, which may be distributed under
 * the GPL, so declaring "GPL" here is allowed.
 */
char LICENSE[] SEC("license") = "GPL";

/* 256 KiB: some 5000 events of 40 bytes (+8 header) between two reads. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* Named start_boottime since 5.5 (real_start_time before, not read here). */
struct task_struct___sb {
	u64 start_boottime;
} __attribute__((preserve_access_index));

/*
 * Events the ring buffer had no room for, since load.  User space reads it
 * through the skeleton's mapping of .bss each interval: an exit may be
 * among them, so a change makes it check every tracked process against
 * /proc at once, and the periodic checks can be rare.
 */
__u64 procwatch_lost = 0;

static __always_inline int emit(__u32 type, struct task_struct *task)
{
	struct task_struct___sb *leader = (void *)BPF_CORE_READ(task, group_leader);
	struct procwatch_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		/* Full: user space is behind.  Say so; it makes up for it. */
		__sync_fetch_and_add(&procwatch_lost, 1);
		return 0;
	}
	e->type = type;
	e->pid = BPF_CORE_READ(task, tgid);
	e->tid = BPF_CORE_READ(task, pid);
	e->reserved = 0;
	/* Which process had the pid: user space compares it with the start
	 * time in the segment's name instead of asking /proc, where a zombie
	 * looks alive. */
	e->start_boottime = 0;
	if (bpf_core_field_exists(leader->start_boottime))
		e->start_boottime = BPF_CORE_READ(leader, start_boottime);
	/* The task is current in both tracepoints. */
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(procwatch_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	/* After de_thread() the exec'ing thread is the group leader and its
	 * comm is already the new program's. */
	return emit(PROCWATCH_EXEC, p);
}

/*
 * One event per process, from the thread that ended the thread group (a
 * leader that called pthread_exit() leaves the process running).  Since
 * 6.16 the tracepoint says so itself (group_dead); discovery.c loads this
 * program where the kernel's BTF shows that argument, else the one below.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(procwatch_exit_gd, struct task_struct *p, bool group_dead)
{
	if (!group_dead)
		return 0;
	return emit(PROCWATCH_EXIT, p);
}

/*
 * Older kernels: do_exit() counts the group's live threads down before the
 * tracepoint, so 0 means every thread is past that point and none runs
 * user code again.  Threads that exit together may each see 0: user space
 * takes a second event for the same process and start time as a no-op.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(procwatch_exit, struct task_struct *p)
{
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;
	return emit(PROCWATCH_EXIT, p);
}
