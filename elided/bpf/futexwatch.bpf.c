/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * futexwatch: how long the threads of every process sleep waiting for a
 * pthread mutex, whether or not the process runs libelide (elided(8),
 * OBSERVING PROGRAMS WITHOUT LIBELIDE).
 *
 * glibc's mutexes sleep in FUTEX_WAIT with the expected value 2 ("held,
 * with waiters": __lll_lock_wait), priority-inheritance ones in
 * FUTEX_LOCK_PI(2).  fentry/fexit on the x86-64 futex system call (one
 * argument, the registers: attachable on every kernel with BPF trampolines,
 * whatever do_futex()'s arity) time those calls and add them up per
 * process and futex word; every other futex call returns at once.  Where
 * trampolines are refused, the scheduler's context switch does it instead:
 * a thread that gives up its CPU inside such a futex call (its system-call
 * registers say so) starts a sleep, and the switch back to it ends the
 * sleep.  That costs every context switch a few loads, where the last
 * resort, the BTF raw tracepoints on every system call's entry and exit,
 * sends every system call of every process down the kernel's slow path
 * (bench/results/2026-12-07-history.md: 15-30% on a futex-heavy benchmark).  futexwatch.c
 * loads the first pair the kernel takes.  The word of a mutex is its first
 * field, so the word's address names the lock.
 * CO-RE: built once against vmlinux.h.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "futexwatch.h"

/* GPL-compatible (see procwatch.bpf.c): needed for the CO-RE task reads. */
char LICENSE[] SEC("license") = "GPL";

#define FUTEX_WAIT 0
#define FUTEX_LOCK_PI 6
#define FUTEX_LOCK_PI2 13
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_CLOCK_REALTIME 256
#define MUTEX_HELD_WITH_WAITERS 2
#define PF_KTHREAD 0x00200000 /* include/linux/sched.h */

struct sleep_start {
	__u64 start_ns;
	__u64 uaddr;
};

/* Per thread, in the task itself: no hash on the paths of other calls. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sleep_start);
} sleepers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FUTEXWATCH_MAX_LOCKS);
	__type(key, struct futexwatch_key);
	__type(value, struct futexwatch_value);
} waits SEC(".maps");

struct task_struct___sb {
	u64 start_boottime;
} __attribute__((preserve_access_index));

/* A mutex's sleep: FUTEX_WAIT for "held, with waiters", or a PI lock. */
static __always_inline bool futex_is_lock_wait(const struct pt_regs *regs)
{
	int cmd = (int)BPF_CORE_READ(regs, si) & ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
	__u32 val = (__u32)BPF_CORE_READ(regs, dx);

	return (cmd == FUTEX_WAIT && val == MUTEX_HELD_WITH_WAITERS) || cmd == FUTEX_LOCK_PI ||
	       cmd == FUTEX_LOCK_PI2;
}

static __always_inline void sleep_begin(struct task_struct *t, const struct pt_regs *regs)
{
	struct sleep_start *s;

	s = bpf_task_storage_get(&sleepers, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s)
		return;
	s->uaddr = BPF_CORE_READ(regs, di);
	s->start_ns = bpf_ktime_get_ns();
}

static __always_inline int futex_enter(const struct pt_regs *regs)
{
	if (futex_is_lock_wait(regs))
		sleep_begin(bpf_get_current_task_btf(), regs);
	return 0;
}

/* The sleep of t, if one began, ends: added to its process's lock. */
static __always_inline int sleep_end(struct task_struct *t)
{
	struct task_struct___sb *leader;
	struct futexwatch_value *v, zero = {};
	struct futexwatch_key k = {};
	struct sleep_start *s;
	__u64 slept;

	s = bpf_task_storage_get(&sleepers, t, 0, 0);
	if (!s || !s->start_ns)
		return 0;
	slept = bpf_ktime_get_ns() - s->start_ns;
	k.uaddr = s->uaddr;
	s->start_ns = 0;
	k.tgid = (__u32)BPF_CORE_READ(t, tgid);
	leader = (void *)BPF_CORE_READ(t, group_leader);
	if (bpf_core_field_exists(leader->start_boottime))
		k.start_boottime = BPF_CORE_READ(leader, start_boottime);
	v = bpf_map_lookup_elem(&waits, &k);
	if (!v) {
		bpf_map_update_elem(&waits, &k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&waits, &k);
		if (!v)
			return 0;
	}
	__sync_fetch_and_add(&v->waits, 1);
	__sync_fetch_and_add(&v->wait_ns, slept);
	/* Racy between two threads of one lock: a maximum, not an invariant. */
	if (slept > v->wait_max_ns)
		v->wait_max_ns = slept;
	return 0;
}

SEC("fentry/__x64_sys_futex")
int BPF_PROG(futexwatch_enter, const struct pt_regs *regs)
{
	return futex_enter(regs);
}

SEC("fexit/__x64_sys_futex")
int BPF_PROG(futexwatch_exit, const struct pt_regs *regs, long ret)
{
	return sleep_end(bpf_get_current_task_btf());
}

#define NR_FUTEX_X86_64 202

/*
 * prev gives up its CPU: asleep in a lock's futex wait when it did not
 * lose it to preemption and its system-call registers (the user's, saved
 * at entry) are those of one.  next runs again: a sleep of its ends.  A
 * wait that never sleeps (the word changed first) is not seen: it did not
 * wait.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(futexwatch_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	if (!preempt && !(BPF_CORE_READ(prev, flags) & PF_KTHREAD)) {
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(prev);

		if (regs && BPF_CORE_READ(regs, orig_ax) == NR_FUTEX_X86_64 && futex_is_lock_wait(regs))
			sleep_begin(prev, regs);
	}
	return sleep_end(next);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(futexwatch_sys_enter, struct pt_regs *regs, long id)
{
	if (id != NR_FUTEX_X86_64)
		return 0;
	return futex_enter(regs);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(futexwatch_sys_exit, struct pt_regs *regs, long ret)
{
	if (BPF_CORE_READ(regs, orig_ax) != NR_FUTEX_X86_64)
		return 0;
	return sleep_end(bpf_get_current_task_btf());
}
