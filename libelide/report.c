/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The exit report (ELIDE=report=1): one line per lock on stderr, in the
 * vocabulary of `perf stat -T` and HotSpot's RTM statistics.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "elide-internal.h"

static const char *const reason_names[REASON_NREASONS] = {
	[REASON_UNCONTENDED] = "not contended",
	[REASON_CONTENDED] = "contended",
	[REASON_MODE_ON] = "mode=on",
	[REASON_POLICY_ALWAYS] = "policy always",
	[REASON_POLICY_NEVER] = "policy never",
	[REASON_TYPE_NORMAL] = "PTHREAD_MUTEX_NORMAL",
};

static void out(int fd, const char *fmt, ...) _printf_(2, 3);
static void out(int fd, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	if (write(fd, buf, (size_t)n) < 0)
		return;
}

/* "file+0x12", the symbol covering addr when one does, else module+offset. */
static void describe_address(const void *addr, bool want_object, char *buf, size_t size)
{
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	const char *module;

	if (!addr || !dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) || !info.dli_fname) {
		snprintf(buf, size, "%p", addr);
		return;
	}
	module = strrchr(info.dli_fname, '/');
	module = module ? module + 1 : info.dli_fname;
	if (!*module)
		module = program_invocation_short_name;
	if (info.dli_sname && info.dli_saddr &&
	    (!want_object || (sym && (const char *)addr < (const char *)info.dli_saddr + sym->st_size))) {
		size_t off = (size_t)((const char *)addr - (const char *)info.dli_saddr);

		if (off)
			snprintf(buf, size, "%s+0x%zx", info.dli_sname, off);
		else
			snprintf(buf, size, "%s", info.dli_sname);
		return;
	}
	snprintf(buf, size, "%s+0x%zx", module, (size_t)((const char *)addr - (const char *)info.dli_fbase));
}

static uint64_t stat_of(const struct lock_rec *rec, enum lock_stat s)
{
	return atomic_load_explicit(&rec->stats[s], memory_order_relaxed);
}

static const char *state_of(const struct lock_rec *rec)
{
	int32_t gate = atomic_load_explicit(&rec->gate, memory_order_relaxed);

	if (!elide.enabled)
		return "plain";
	if (gate == GATE_ELIDE)
		return "eliding";
	if (gate == GATE_NEVER)
		return "off";
	if (gate == GATE_WATCH)
		return "plain";
	return "backoff";
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void report_lock(int fd, const struct lock_rec *rec, uint32_t idx)
{
	char name[96], site[96];
	uint64_t acquired = stat_of(rec, STAT_ACQUIRED);
	uint64_t attempts = stat_of(rec, STAT_ATTEMPTS);
	uint64_t commits = stat_of(rec, STAT_COMMITS);
	uint8_t reason = atomic_load_explicit(&rec->reason, memory_order_relaxed);
	void *addr = atomic_load_explicit(&rec->addr, memory_order_relaxed);

	if (idx == REC_OVERFLOW)
		snprintf(name, sizeof(name), "(overflow+destroyed)");
	else if (rec->name[0])
		snprintf(name, sizeof(name), "%s", rec->name);
	else
		describe_address(addr, true, name, sizeof(name));
	if (idx == REC_OVERFLOW)
		snprintf(site, sizeof(site), "-");
	else
		describe_address(rec->callsite, false, site, sizeof(site));
	if (commits > attempts)
		commits = attempts;
	out(fd, "libelide: %-24.24s %-6s %11llu %6.1f%% %6.1f%%",
	    name, rec->kind == LOCK_KIND_RWLOCK ? "rwlock" : "mutex",
	    (unsigned long long)acquired, pct(commits, acquired), pct(commits, attempts));
	for (int c = 0; c < ELIDE_ABORT_NCAUSES; c++)
		out(fd, " %9llu", (unsigned long long)stat_of(rec, STAT_ABORT_FIRST + c));
	out(fd, " %9llu %9llu %12llu %s (%s) %s\n",
	    (unsigned long long)stat_of(rec, STAT_FALLBACKS),
	    (unsigned long long)stat_of(rec, STAT_CONTENDED),
	    (unsigned long long)stat_of(rec, STAT_CYCLES_LOST),
	    state_of(rec), reason < REASON_NREASONS ? reason_names[reason] : "?", site);
}

static bool rec_in_use(const struct lock_rec *rec, uint32_t idx)
{
	if (idx == REC_OVERFLOW) {
		for (int s = 0; s < STAT_NSTATS; s++)
			if (stat_of(rec, s))
				return true;
		return false;
	}
	return atomic_load_explicit(&rec->addr, memory_order_relaxed) != NULL;
}

void report_print(int fd)
{
	uint32_t tracked = 0;

	out(fd, "libelide: report for pid %d (%s)\n", (int)getpid(), program_invocation_short_name);
	if (elide.enabled)
		out(fd, "libelide: elision: on, mode=%s; RTM: %s\n", elide_mode_to_string(elide.opts.mode),
		    elide.hw.reason);
	else
		out(fd, "libelide: elision: off: %s\n", elide.disabled_reason ? elide.disabled_reason : "not started");
	if (!elide.recs)
		return;
	for (uint32_t i = REC_OVERFLOW; i < elide.nrecs; i++)
		if (rec_in_use(&elide.recs[i], i))
			tracked++;
	out(fd, "libelide: %u tracked locks (locks never contended are not tracked); "
	    "commit counts sampled 1 in %u\n", tracked, elide.opts.sample);
	if (!tracked)
		return;
	out(fd, "libelide: %-24s %-6s %11s %7s %7s", "LOCK", "KIND", "ACQUIRED", "ELIDED", "COMMIT");
	for (int c = 0; c < ELIDE_ABORT_NCAUSES; c++)
		out(fd, " %9s", elide_abort_cause_names[c]);
	out(fd, " %9s %9s %12s %s\n", "fallback", "contended", "cycles-lost", "STATE (WHY) CALL-SITE");
	for (uint32_t i = REC_OVERFLOW; i < elide.nrecs; i++)
		if (rec_in_use(&elide.recs[i], i))
			report_lock(fd, &elide.recs[i], i);
}
