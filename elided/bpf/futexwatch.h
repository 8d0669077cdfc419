/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The map futexwatch.bpf.c fills and futexwatch.c reads: per process and
 * futex word, how often and how long threads slept waiting for a lock.
 * Fixed-size fields only, no padding, so both compilers agree.
 */
#ifndef ELIDED_BPF_FUTEXWATCH_H
#define ELIDED_BPF_FUTEXWATCH_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* Locks followed at once, all processes: the least recently updated go. */
#define FUTEXWATCH_MAX_LOCKS 16384

struct futexwatch_key {
	__u32 tgid;                    /* the process */
	__u32 reserved;                /* 0 */
	__u64 start_boottime;          /* its group leader's, ns: tells a reused pid apart */
	__u64 uaddr;                   /* the futex word: a mutex's __lock, its address */
};

struct futexwatch_value {
	__u64 waits;                   /* lock waits that slept */
	__u64 wait_ns;                 /* their time in the kernel, summed */
	__u64 wait_max_ns;             /* the longest */
};

#endif
