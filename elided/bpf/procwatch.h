/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The record procwatch.bpf.c puts in its ring buffer and discovery.c reads.
 * Included by both sides: the BPF side gets the __u32 types from vmlinux.h,
 * user space from <linux/types.h>.  Fixed-size fields only, no padding, so
 * both compilers agree on the layout.
 */
#ifndef ELIDED_BPF_PROCWATCH_H
#define ELIDED_BPF_PROCWATCH_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define PROCWATCH_COMM_LEN 16

enum procwatch_event_type {
	PROCWATCH_EXEC = 1, /* the process exec'd; comm is the new one */
	PROCWATCH_EXIT = 2, /* the whole thread group is gone (one event per process) */
};

struct procwatch_event {
	__u32 type;                    /* enum procwatch_event_type */
	__u32 pid;                     /* tgid: the process id user space knows */
	__u32 tid;                     /* the thread that exec'd or exited last */
	__u32 reserved;                /* 0; keeps start_boottime aligned */
	__u64 start_boottime;          /* the group leader's, in ns (/proc/PID/stat's
	                                * field 22 in ns); 0 when the kernel lacks it */
	char comm[PROCWATCH_COMM_LEN]; /* NUL-terminated (the kernel's task comm) */
};

#endif
