/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The time-stamp counter and seccomp: the program's requests that change
 * what libelide may do (prctl() and syscall() are watched), and a
 * clock_gettime() that respects them.
 */
#include <errno.h>
#include <stdarg.h>
#include <time.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "elide-internal.h"
#include "resolve.h"

/*
 * A program may disable the TSC for a thread: prctl(PR_SET_TSC,
 * PR_TSC_SIGSEGV), or seccomp's strict mode, which does it too.  RDTSC then
 * raises SIGSEGV in that thread and the threads it creates, and glibc's
 * lock paths never read the TSC, so libelide must not either.  These two
 * entries of the system call interface are watched: from the first
 * request on, before it is made, no thread of the process reads the TSC
 * (the threads a disabled one creates inherit the state, so a per-thread
 * flag would need to follow thread creation).  Everything is then counted
 * as before, only waits and holds are not timed.  A program that makes the
 * system call with an instruction of its own goes unseen (libelide-semantics(7)).
 */
static void note_tsc_request(long option, unsigned long arg)
{
	if ((option == PR_SET_TSC && arg != PR_TSC_ENABLE) ||
	    (option == PR_SET_SECCOMP && arg == SECCOMP_MODE_STRICT))
		__atomic_store_n(&elide.tsc_disabled, true, __ATOMIC_SEQ_CST);
	/* The same way, a seccomp filter: lock calls make no system call of
	 * libelide's own from then on (a filter may kill the process for
	 * one), before the filter is in place. */
	if (option == PR_SET_SECCOMP)
		__atomic_store_n(&elide.sandboxed, true, __ATOMIC_SEQ_CST);
}

/* A process started with the TSC disabled, or under a seccomp filter:
 * both survive execve. */
void sandbox_check_inherited(void)
{
	int state = PR_TSC_ENABLE;
	int saved_errno = errno;

	if (prctl(PR_GET_TSC, &state, 0, 0, 0) == 0 && state != PR_TSC_ENABLE)
		elide.tsc_disabled = true;
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) > 0)
		elide.sandboxed = true;
	errno = saved_errno;
}

/* A raw system call, for a call that arrives while dlsym() runs (an
 * allocator's): there is nothing to forward it to yet.  glibc's result
 * convention. */
static long raw_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	if ((unsigned long)ret > -4096UL) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

static void *resolve_next(void **cache, const char *name)
{
	void *fn = __atomic_load_n(cache, __ATOMIC_ACQUIRE);

	if (likely(fn) || resolving)
		return fn;
	fn = resolve(name, NULL, false);
	__atomic_store_n(cache, fn, __ATOMIC_RELEASE);
	return fn;
}

/* glibc's prctl() and syscall() read their further arguments whether the
 * call has them or not: so does the forwarding. */
_public_ int prctl(int option, ...)
{
	static void *next;
	int (*fn)(int, unsigned long, unsigned long, unsigned long, unsigned long);
	unsigned long a2, a3, a4, a5;
	va_list ap;

	va_start(ap, option);
	a2 = va_arg(ap, unsigned long);
	a3 = va_arg(ap, unsigned long);
	a4 = va_arg(ap, unsigned long);
	a5 = va_arg(ap, unsigned long);
	va_end(ap);
	note_tsc_request(option, a2);
	fn = resolve_next(&next, "prctl");
	if (!fn)
		return (int)raw_syscall6(SYS_prctl, option, (long)a2, (long)a3, (long)a4, (long)a5, 0);
	return fn(option, a2, a3, a4, a5);
}

/*
 * syscall(): most calls are the program's own futexes and the like, made
 * often.  The entry compares the number with the two that are watched and
 * jumps straight to glibc's syscall(), arguments untouched, once that is
 * known; only prctl, seccomp and the first call come to the C function
 * below.  A C function taking the variadic arguments cost each call a
 * stack frame and twelve moves (bench/RESULTS.md, the syscall workload).
 * %r11 is free at a function's entry (neither an argument nor preserved).
 */
#define ASM_STR2(x) #x
#define ASM_STR(x) ASM_STR2(x)

void *elide_next_syscall _hidden_; /* glibc's syscall(), once resolved */
long elide_syscall_noted(long number, ...) _hidden_;

__asm__(".pushsection .text\n"
	".globl syscall\n"
	".type syscall, @function\n"
	".p2align 4\n"
	"syscall:\n"
	".cfi_startproc\n"
#ifdef __CET__
	"endbr64\n"
#endif
	"cmpq $" ASM_STR(SYS_prctl) ", %rdi\n"
	"je elide_syscall_noted\n"
	"cmpq $" ASM_STR(SYS_seccomp) ", %rdi\n"
	"je elide_syscall_noted\n"
	"movq elide_next_syscall(%rip), %r11\n"
	"testq %r11, %r11\n"
	"jz elide_syscall_noted\n"
	"jmp *%r11\n"
	".cfi_endproc\n"
	".size syscall, .-syscall\n"
	".popsection\n");

long elide_syscall_noted(long number, ...)
{
	static void *next;
	long (*fn)(long, long, long, long, long, long, long);
	long a1, a2, a3, a4, a5, a6;
	va_list ap;

	va_start(ap, number);
	a1 = va_arg(ap, long);
	a2 = va_arg(ap, long);
	a3 = va_arg(ap, long);
	a4 = va_arg(ap, long);
	a5 = va_arg(ap, long);
	a6 = va_arg(ap, long);
	va_end(ap);
	if (number == SYS_prctl)
		note_tsc_request(a1, (unsigned long)a2);
	else if (number == SYS_seccomp && (a1 == SECCOMP_SET_MODE_STRICT || a1 == SECCOMP_SET_MODE_FILTER))
		note_tsc_request(PR_SET_SECCOMP, a1 == SECCOMP_SET_MODE_STRICT ? SECCOMP_MODE_STRICT : SECCOMP_MODE_FILTER);
	fn = resolve_next(&next, "syscall");
	if (!fn)
		return raw_syscall6(number, a1, a2, a3, a4, a5, a6);
	__atomic_store_n(&elide_next_syscall, (void *)fn, __ATOMIC_RELAXED);
	return fn(number, a1, a2, a3, a4, a5, a6);
}

/* clock_gettime() that never reads a disabled TSC (the vDSO would): the
 * system call then.  Only where system calls are made anyway. */
void elide_clock_gettime(clockid_t clock, struct timespec *ts)
{
	if (likely(elide_tsc_usable()))
		clock_gettime(clock, ts);
	else
		raw_syscall6(SYS_clock_gettime, clock, (long)ts, 0, 0, 0, 0);
}
