/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The exit report (ELIDE=report=1): one line per lock on stderr, in the
 * vocabulary of `perf stat -T` and HotSpot's RTM statistics.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "elfsym.h"
#include "elide-internal.h"
#include "segment-names.h"

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

/* "cache_lock (prog)", "worker+0x3a (prog)", or the raw address. */
static void describe_address(struct elfsym_maps *maps, uint64_t addr, bool want_object, char *buf, size_t size)
{
	struct elfsym_result res;

	if (!maps || elfsym_resolve(maps, addr, want_object, &res) < 0 || !res.name[0]) {
		snprintf(buf, size, "0x%llx", (unsigned long long)addr);
		return;
	}
	elfsym_format(&res, addr, buf, size);
}

static uint64_t stat_of(const struct elide_seg_lock *e, unsigned s)
{
	return __atomic_load_n(&e->stats[s], __ATOMIC_RELAXED);
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void report_lock(int fd, struct elfsym_maps *maps, const struct elide_seg_lock *e, uint32_t idx)
{
	char name[96], site[96];
	uint64_t acquired = stat_of(e, STAT_ACQUIRED);
	uint64_t attempts = stat_of(e, STAT_ATTEMPTS);
	uint64_t commits = stat_of(e, STAT_COMMITS);
	uint32_t kind = __atomic_load_n(&e->kind, __ATOMIC_RELAXED);
	uint32_t state = __atomic_load_n(&e->state, __ATOMIC_RELAXED);
	uint32_t reason = __atomic_load_n(&e->reason, __ATOMIC_RELAXED);
	const char *why = seg_reason_to_string(reason);

	/* elided's decision, from a verdict of earlier runs: say which. */
	if (reason == ELIDE_SEG_REASON_DAEMON &&
	    __atomic_load_n(&e->ctl_source, __ATOMIC_RELAXED) == ELIDE_SEG_SOURCE_LEARNED)
		why = "learned";
	if (idx == REC_OVERFLOW)
		snprintf(name, sizeof(name), "(overflow+destroyed)");
	else if (e->name[0])
		snprintf(name, sizeof(name), "%.*s", (int)sizeof(e->name), e->name);
	else
		describe_address(maps, e->addr, true, name, sizeof(name));
	if (idx == REC_OVERFLOW)
		snprintf(site, sizeof(site), "-");
	else
		describe_address(maps, e->callsite, false, site, sizeof(site));
	if (commits > attempts)
		commits = attempts;
	if (commits > acquired)
		acquired = commits;
	out(fd, "libelide: %-24.24s %-6s %11llu %6.1f%% %6.1f%%", name,
	    kind == ELIDE_SEG_KIND_OVERFLOW ? "-" : seg_kind_to_string(kind),
	    (unsigned long long)acquired, pct(commits, acquired), pct(commits, attempts));
	for (int c = 0; c < ELIDE_ABORT_NCAUSES; c++)
		out(fd, " %9llu", (unsigned long long)stat_of(e, STAT_ABORT_FIRST + c));
	out(fd, " %9llu %9llu %12llu %s (%s) %s\n",
	    (unsigned long long)stat_of(e, STAT_FALLBACKS),
	    (unsigned long long)stat_of(e, STAT_CONTENDED),
	    (unsigned long long)stat_of(e, STAT_CYCLES_LOST),
	    seg_state_to_string(state), why, site);
}

static bool entry_in_use(const struct elide_seg_lock *e, uint32_t idx)
{
	if (idx == REC_OVERFLOW) {
		for (int s = 0; s < STAT_NSTATS; s++)
			if (stat_of(e, s))
				return true;
		return false;
	}
	return __atomic_load_n(&e->kind, __ATOMIC_ACQUIRE) != ELIDE_SEG_KIND_FREE;
}

void report_print(int fd)
{
	struct elfsym_maps *maps = NULL;
	uint32_t tracked = 0, high;

	out(fd, "libelide: report for pid %d (%s)\n", (int)getpid(), program_invocation_short_name);
	if (elide.enabled)
		out(fd, "libelide: elision: on, mode=%s; RTM: %s\n", elide_mode_to_string(elide.opts.mode),
		    elide.hw.reason);
	else
		out(fd, "libelide: elision: off: %s\n", elide.disabled_reason ? elide.disabled_reason : "not started");
	if (!elide.recs || !elide.seg_locks)
		return;
	high = elide.seg_header->lock_high_water;
	if (high > elide.nrecs)
		high = elide.nrecs;
	for (uint32_t i = REC_OVERFLOW; i < high; i++)
		if (entry_in_use(&elide.seg_locks[i], i))
			tracked++;
	out(fd, "libelide: %u tracked locks (locks never contended are not tracked); "
	    "commit counts sampled 1 in %u\n", tracked, elide.opts.sample);
	if (!tracked)
		return;
	out(fd, "libelide: %-24s %-6s %11s %7s %7s", "LOCK", "KIND", "ACQUIRED", "ELIDED", "COMMIT");
	for (int c = 0; c < ELIDE_ABORT_NCAUSES; c++)
		out(fd, " %9s", elide_abort_cause_names[c]);
	out(fd, " %9s %9s %12s %s\n", "fallback", "contended", "cycles-lost", "STATE (WHY) CALL-SITE");
	/* Symbol tables (.symtab too) name static locks that dladdr cannot. */
	if (elfsym_maps_load(&maps, 0) < 0)
		maps = NULL;
	for (uint32_t i = REC_OVERFLOW; i < high; i++)
		if (entry_in_use(&elide.seg_locks[i], i))
			report_lock(fd, maps, &elide.seg_locks[i], i);
	elfsym_maps_free(maps);
}
