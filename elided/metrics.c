/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Prometheus metrics in node_exporter's textfile collector format.
 *
 * Every metrics_interval seconds elided reads the full counters of every
 * tracked process (the interval's own pass follows only five), adds what
 * each process counted since the previous write to its program's totals,
 * and writes one file: a temporary name in the directory, renamed over
 * elide.prom, so the collector never reads half a file.
 *
 * Cardinality is bounded: at most metrics_programs programs (the busiest
 * now first, then those seen most recently) and metrics_locks locks per
 * program, whose series are gauges of the last interval's rates.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elided.h"
#include "log.h"
#include "metrics.h"
#include "policy-config.h"
#include "segment-names.h"

#define METRICS_FILE "elide.prom"
#define METRICS_MODE 0640

struct program_acc {
	char name[ELIDE_SEG_EXE_MAX];
	uint64_t total[ELIDE_SEG_NSTATS];
	uint64_t wait_ns;            /* lock_totals.wait_ns, summed like total[] */
	uint64_t last_seen_ns;
	/* This write's view of it. */
	unsigned processes;
	double acquired_per_sec;
	bool emitted;
};

struct proc_prev {
	pid_t pid;
	uint64_t start_time, created_ns;
	uint64_t sum[ELIDE_SEG_NSTATS];
	uint64_t wait_ns;
};

struct metrics {
	struct program_acc *progs;
	size_t nprogs;
	struct proc_prev *prev;
	size_t nprev;
	uint64_t last_write_ns;
	int last_error;              /* errno of the last failed write, 0 after a good one */
	uint64_t programs_dropped;   /* programs not written at the last write (over the cap) */
};

struct metrics *metrics_new(void)
{
	return calloc(1, sizeof(struct metrics));
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	free(m->progs);
	free(m->prev);
	free(m);
}

/* The table holds at most 2 x metrics_programs programs: the oldest one
 * without processes makes room; NULL when all have processes. */
static struct program_acc *program_get(struct metrics *m, const char *name, size_t cap)
{
	size_t victim = SIZE_MAX;

	for (size_t i = 0; i < m->nprogs; i++)
		if (strcmp(m->progs[i].name, name) == 0)
			return &m->progs[i];
	if (m->nprogs < cap) {
		struct program_acc *grown = realloc(m->progs, (m->nprogs + 1) * sizeof(*grown));

		if (!grown)
			return NULL;
		m->progs = grown;
		victim = m->nprogs++;
	} else {
		for (size_t i = 0; i < m->nprogs; i++)
			if (m->progs[i].processes == 0 &&
			    (victim == SIZE_MAX || m->progs[i].last_seen_ns < m->progs[victim].last_seen_ns))
				victim = i;
		if (victim == SIZE_MAX)
			return NULL;
	}
	memset(&m->progs[victim], 0, sizeof(m->progs[victim]));
	snprintf(m->progs[victim].name, sizeof(m->progs[victim].name), "%s", name);
	return &m->progs[victim];
}

static const struct proc_prev *prev_find(const struct metrics *m, const struct tracked_process *p)
{
	for (size_t i = 0; i < m->nprev; i++)
		if (m->prev[i].pid == p->pid && m->prev[i].start_time == p->start_time &&
		    m->prev[i].created_ns == p->created_ns)
			return &m->prev[i];
	return NULL;
}

/*
 * Add what each process counted since the last write to its program.  A
 * process's sums only grow, except when one of its locks goes away with
 * its counts: that step is taken as no growth (undercounting a little)
 * rather than as a reset (counting everything again).
 */
static void accumulate(struct elided *d, struct metrics *m, uint64_t now)
{
	size_t cap = 2 * (size_t)d->config->metrics_programs;
	struct proc_prev *next = calloc(d->nprocesses ? d->nprocesses : 1, sizeof(*next));
	size_t nnext = 0;

	if (!next)
		return;
	for (size_t i = 0; i < m->nprogs; i++) {
		m->progs[i].processes = 0;
		m->progs[i].acquired_per_sec = 0;
		m->progs[i].emitted = false;
	}
	for (struct tracked_process *p = d->processes; p && nnext < d->nprocesses; p = p->next) {
		const struct proc_prev *old = prev_find(m, p);
		struct proc_prev *cur = &next[nnext];
		struct lock_totals *totals = NULL;
		struct program_acc *acc;
		char err[SEG_ERR_MAX];
		size_t n = 0;

		*cur = (struct proc_prev){ .pid = p->pid, .start_time = p->start_time, .created_ns = p->created_ns };
		if (elided_read_lock_totals(d, p, &totals, &n, err, sizeof(err)) < 0) {
			/* Gone or unreadable this time: keep what we had. */
			if (old)
				*cur = *old;
			nnext++;
			continue;
		}
		for (size_t l = 0; l < n; l++) {
			for (int s = 0; s < ELIDE_SEG_NSTATS; s++)
				cur->sum[s] += totals[l].stats[s];
			cur->wait_ns += totals[l].wait_ns;
		}
		free(totals);
		nnext++;
		acc = program_get(m, tracked_process_name(p), cap);
		if (!acc)
			continue;
		for (int s = 0; s < ELIDE_SEG_NSTATS; s++) {
			uint64_t before = old ? old->sum[s] : 0;

			acc->total[s] += cur->sum[s] > before ? cur->sum[s] - before : 0;
		}
		{
			uint64_t before = old ? old->wait_ns : 0;

			acc->wait_ns += cur->wait_ns > before ? cur->wait_ns - before : 0;
		}
		acc->last_seen_ns = now;
		acc->processes++;
		for (size_t l = 0; l < p->nlocks; l++)
			acc->acquired_per_sec += p->locks[l].rates[LOCK_RATE_ACQUIRED];
	}
	free(m->prev);
	m->prev = next;
	m->nprev = nnext;
}

void metrics_write_label_value(FILE *f, const char *value)
{
	const unsigned char *s = (const unsigned char *)value;

	while (*s) {
		unsigned char c = *s;
		size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
		bool valid = len > 0;

		/* Label values are UTF-8: anything else becomes '?'. */
		for (size_t i = 1; valid && i < len; i++)
			valid = (s[i] & 0xc0) == 0x80;
		if (valid && len == 2 && c < 0xc2)
			valid = false; /* overlong */
		if (!valid) {
			fputc('?', f);
			s++;
			continue;
		}
		if (c == '\\')
			fputs("\\\\", f);
		else if (c == '"')
			fputs("\\\"", f);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 || c == 0x7f)
			fputc('?', f);
		else
			fwrite(s, 1, len, f);
		s += len;
	}
}

static void header(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void program_label(FILE *f, const struct program_acc *a)
{
	fputs("program=\"", f);
	metrics_write_label_value(f, a->name);
	fputc('"', f);
}

static int by_activity(const void *a, const void *b)
{
	const struct program_acc *x = *(const struct program_acc *const *)a, *y = *(const struct program_acc *const *)b;

	if ((x->processes > 0) != (y->processes > 0))
		return x->processes > 0 ? -1 : 1;
	if (x->acquired_per_sec != y->acquired_per_sec)
		return x->acquired_per_sec > y->acquired_per_sec ? -1 : 1;
	if (x->last_seen_ns != y->last_seen_ns)
		return x->last_seen_ns > y->last_seen_ns ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* One lock name of a program, its rates summed over the program's processes. */
struct lock_row {
	const char *name;
	double rate[LOCK_NRATES];
};

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct lock_row *)a)->name, ((const struct lock_row *)b)->name);
}

static int by_acquired(const void *a, const void *b)
{
	const struct lock_row *x = a, *y = b;

	if (x->rate[LOCK_RATE_ACQUIRED] != y->rate[LOCK_RATE_ACQUIRED])
		return x->rate[LOCK_RATE_ACQUIRED] > y->rate[LOCK_RATE_ACQUIRED] ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The program's busiest locks, merged by name; *n rows, at most `cap`. */
static struct lock_row *program_locks(struct elided *d, const struct program_acc *a, size_t cap, size_t *n)
{
	struct lock_row *rows = NULL;
	size_t nrows = 0, total = 0, out = 0;

	*n = 0;
	if (cap == 0)
		return NULL;
	for (struct tracked_process *p = d->processes; p; p = p->next)
		if (strcmp(tracked_process_name(p), a->name) == 0)
			total += p->nlocks;
	if (total == 0)
		return NULL;
	rows = calloc(total, sizeof(*rows));
	if (!rows)
		return NULL;
	for (struct tracked_process *p = d->processes; p; p = p->next) {
		if (strcmp(tracked_process_name(p), a->name) != 0)
			continue;
		for (size_t l = 0; l < p->nlocks && nrows < total; l++) {
			const struct lock_view *v = &p->locks[l];

			if (v->kind == ELIDE_SEG_KIND_OVERFLOW)
				continue;
			rows[nrows].name = lock_name(v->nm);
			for (int r = 0; r < LOCK_NRATES; r++)
				rows[nrows].rate[r] = v->rates[r];
			nrows++;
		}
	}
	qsort(rows, nrows, sizeof(*rows), by_name);
	for (size_t i = 0; i < nrows; i++) {
		if (out > 0 && strcmp(rows[out - 1].name, rows[i].name) == 0) {
			for (int r = 0; r < LOCK_NRATES; r++)
				rows[out - 1].rate[r] += rows[i].rate[r];
			continue;
		}
		rows[out++] = rows[i];
	}
	qsort(rows, out, sizeof(*rows), by_acquired);
	*n = out < cap ? out : cap;
	return rows;
}

static const struct {
	int stat;
	const char *metric, *help;
} program_counters[] = {
	{ ELIDE_SEG_STAT_ACQUIRED, "elide_program_acquisitions_total",
	  "Lock acquisitions (elided or real) counted by libelide in the program's processes, exited ones included; partly sampled." },
	{ ELIDE_SEG_STAT_ATTEMPTS, "elide_program_transactions_total",
	  "Hardware transactions started on the program's locks; partly sampled." },
	{ ELIDE_SEG_STAT_COMMITS, "elide_program_commits_total",
	  "Transactions committed: critical sections that ran without taking the lock; sampled." },
	{ ELIDE_SEG_STAT_CYCLES_LOST, "elide_program_aborted_cycles_total",
	  "TSC cycles spent in transactions that aborted; sampled." },
	{ ELIDE_SEG_STAT_FALLBACKS, "elide_program_fallbacks_total",
	  "Acquisitions that tried a transaction, gave up and took the lock." },
	{ ELIDE_SEG_STAT_CONTENDED, "elide_program_contended_total",
	  "Real acquisitions that found the lock held." },
	{ ELIDE_SEG_STAT_SKIPPED, "elide_program_skipped_total",
	  "Real acquisitions of locks backed off after aborts." },
};

static const struct {
	int stat;
	const char *cause;
} abort_causes[] = {
	{ ELIDE_SEG_STAT_ABORT_CONFLICT, "conflict" }, { ELIDE_SEG_STAT_ABORT_CAPACITY, "capacity" },
	{ ELIDE_SEG_STAT_ABORT_BUSY, "busy" },         { ELIDE_SEG_STAT_ABORT_EXPLICIT, "explicit" },
	{ ELIDE_SEG_STAT_ABORT_RETRY, "retry" },       { ELIDE_SEG_STAT_ABORT_DEBUG, "debug" },
	{ ELIDE_SEG_STAT_ABORT_NESTED, "nested" },     { ELIDE_SEG_STAT_ABORT_OTHER, "other" },
};

/* The decision sources a lock's ctl_source can name, as label values. */
static const struct {
	uint32_t source;
	const char *label;
} decision_sources[] = {
	{ ELIDE_SEG_SOURCE_CONFIG, "config" },
	{ ELIDE_SEG_SOURCE_OVERRIDE, "override" },
	{ ELIDE_SEG_SOURCE_ADAPTATION, "adaptation" },
	{ ELIDE_SEG_SOURCE_LEARNED, "learned" },
};

static void render_program_gauges(struct elided *d, FILE *f, struct program_acc **order, size_t n)
{
	static const uint32_t states[] = { ELIDE_SEG_STATE_ELIDING, ELIDE_SEG_STATE_OFF_ADAPT,
					   ELIDE_SEG_STATE_OFF_POLICY, ELIDE_SEG_STATE_PLAIN };

	header(f, "elide_program_processes", "gauge", "Processes of the program that elided tracks now.");
	for (size_t i = 0; i < n; i++) {
		fputs("elide_program_processes{", f);
		program_label(f, order[i]);
		fprintf(f, "} %u\n", order[i]->processes);
	}
	header(f, "elide_program_locks", "gauge",
	       "Tracked locks of the program's processes by state (eliding, backoff, off, plain).");
	for (size_t i = 0; i < n; i++) {
		unsigned count[4] = { 0 };

		for (struct tracked_process *p = d->processes; p; p = p->next) {
			if (strcmp(tracked_process_name(p), order[i]->name) != 0)
				continue;
			for (size_t l = 0; l < p->nlocks; l++)
				for (size_t s = 0; s < 4; s++)
					count[s] += p->locks[l].kind != ELIDE_SEG_KIND_OVERFLOW && p->locks[l].state == states[s];
		}
		for (size_t s = 0; s < 4; s++) {
			fputs("elide_program_locks{", f);
			program_label(f, order[i]);
			fprintf(f, ",state=\"%s\"} %u\n", seg_state_to_string(states[s]), count[s]);
		}
	}
	header(f, "elide_program_decisions", "gauge",
	       "Locks of the program whose elision elided decides now, by source (config rule, runtime override, "
	       "adaptation, learned from earlier runs).");
	for (size_t i = 0; i < n; i++) {
		unsigned count[ARRAY_SIZE(decision_sources)] = { 0 };

		for (struct tracked_process *p = d->processes; p; p = p->next) {
			if (strcmp(tracked_process_name(p), order[i]->name) != 0)
				continue;
			for (size_t l = 0; l < p->nlocks; l++)
				for (size_t s = 0; s < ARRAY_SIZE(decision_sources); s++)
					count[s] += p->locks[l].ctl_policy != ELIDE_SEG_CTL_NONE &&
						    p->locks[l].ctl_source == decision_sources[s].source;
		}
		for (size_t s = 0; s < ARRAY_SIZE(decision_sources); s++) {
			fputs("elide_program_decisions{", f);
			program_label(f, order[i]);
			fprintf(f, ",source=\"%s\"} %u\n", decision_sources[s].label, count[s]);
		}
	}
}

static void render_programs(struct elided *d, struct metrics *m, FILE *f)
{
	struct program_acc **order = calloc(m->nprogs ? m->nprogs : 1, sizeof(*order));
	size_t n = m->nprogs;

	if (!order)
		return;
	for (size_t i = 0; i < m->nprogs; i++)
		order[i] = &m->progs[i];
	qsort(order, n, sizeof(*order), by_activity);
	m->programs_dropped = n > d->config->metrics_programs ? n - d->config->metrics_programs : 0;
	if (n > d->config->metrics_programs)
		n = d->config->metrics_programs;
	/* Written in name order: diffs of two files stay readable. */
	for (size_t i = 0; i < n; i++)
		order[i]->emitted = true;
	n = 0;
	for (size_t i = 0; i < m->nprogs; i++)
		if (m->progs[i].emitted)
			order[n++] = &m->progs[i];

	for (size_t c = 0; c < sizeof(program_counters) / sizeof(program_counters[0]); c++) {
		header(f, program_counters[c].metric, "counter", program_counters[c].help);
		for (size_t i = 0; i < n; i++) {
			fprintf(f, "%s{", program_counters[c].metric);
			program_label(f, order[i]);
			fprintf(f, "} %" PRIu64 "\n", order[i]->total[program_counters[c].stat]);
		}
	}
	header(f, "elide_program_lock_wait_seconds_total", "counter",
	       "Time threads of the program waited for locks they found held (contended acquisitions libelide saw).");
	for (size_t i = 0; i < n; i++) {
		fputs("elide_program_lock_wait_seconds_total{", f);
		program_label(f, order[i]);
		fprintf(f, "} %.9f\n", (double)order[i]->wait_ns / 1e9);
	}
	header(f, "elide_program_aborts_total", "counter", "Transaction aborts in the program's processes by cause; exact.");
	for (size_t i = 0; i < n; i++)
		for (size_t c = 0; c < sizeof(abort_causes) / sizeof(abort_causes[0]); c++) {
			fputs("elide_program_aborts_total{", f);
			program_label(f, order[i]);
			fprintf(f, ",cause=\"%s\"} %" PRIu64 "\n", abort_causes[c].cause,
				order[i]->total[abort_causes[c].stat]);
		}
	render_program_gauges(d, f, order, n);

	if (d->config->metrics_locks > 0) {
		static const struct {
			int rate;
			const char *metric, *help;
		} lock_gauges[] = {
			{ LOCK_RATE_ACQUIRED, "elide_lock_acquisitions_per_second",
			  "Acquisitions per second of the lock over elided's last interval, summed over the program's processes." },
			{ LOCK_RATE_COMMITS, "elide_lock_commits_per_second",
			  "Committed transactions per second of the lock over elided's last interval." },
			{ LOCK_RATE_ABORTS, "elide_lock_aborts_per_second",
			  "Aborted transactions per second of the lock over elided's last interval." },
		};
		struct lock_row **rows = calloc(n ? n : 1, sizeof(*rows));
		size_t *nrows = calloc(n ? n : 1, sizeof(*nrows));

		if (!rows || !nrows) {
			free(rows);
			free(nrows);
			free(order);
			return;
		}
		for (size_t i = 0; i < n; i++)
			rows[i] = program_locks(d, order[i], d->config->metrics_locks, &nrows[i]);
		for (size_t g = 0; g < sizeof(lock_gauges) / sizeof(lock_gauges[0]); g++) {
			header(f, lock_gauges[g].metric, "gauge", lock_gauges[g].help);
			for (size_t i = 0; i < n; i++)
				for (size_t l = 0; l < nrows[i]; l++) {
					fprintf(f, "%s{", lock_gauges[g].metric);
					program_label(f, order[i]);
					fputs(",lock=\"", f);
					metrics_write_label_value(f, rows[i][l].name);
					fprintf(f, "\"} %.6g\n", rows[i][l].rate[lock_gauges[g].rate]);
				}
		}
		for (size_t i = 0; i < n; i++)
			free(rows[i]);
		free(rows);
		free(nrows);
	}
	free(order);
}

int elided_metrics_render(struct elided *d, FILE *f)
{
	struct metrics *m = d->metrics;

	if (!m)
		return -EINVAL;
	header(f, "elide_info", "gauge", "elided's version and whether this CPU can elide (RTM usable).");
	fputs("elide_info{version=\"" PACKAGE_VERSION "\",rtm=\"", f);
	fputs(d->rtm_usable ? "usable" : "unusable", f);
	fputs("\"} 1\n", f);
	header(f, "elide_processes", "gauge", "Processes with libelide that elided tracks.");
	fprintf(f, "elide_processes %zu\n", d->nprocesses);
	header(f, "elide_segments_refused", "gauge", "Segments in the runtime directory elided does not track (invalid, or not yet valid).");
	fprintf(f, "elide_segments_refused %zu\n", d->unseen.refused);
	header(f, "elide_segments_over_cap", "gauge", "Segments not tracked because their user is at the per-user cap.");
	fprintf(f, "elide_segments_over_cap %zu\n", d->unseen.over_cap);
	header(f, "elide_daemon_interval_cpu_seconds", "gauge", "CPU time elided spent on its last interval.");
	fprintf(f, "elide_daemon_interval_cpu_seconds %.6f\n", d->cpu_seconds_per_interval);
	render_programs(d, m, f);
	header(f, "elide_metrics_programs_dropped", "gauge",
	       "Programs left out of this file by daemon.metrics_programs (the least busy).");
	fprintf(f, "elide_metrics_programs_dropped %" PRIu64 "\n", m->programs_dropped);
	return ferror(f) ? -EIO : 0;
}

/* Write the file: a temporary name in the directory, then rename. */
static int write_file(struct elided *d, char *err, size_t errlen)
{
	char tmp[64];
	int dirfd, fd, r = 0;
	FILE *f;

	dirfd = open(d->config->metrics_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open %s: %s", d->config->metrics_dir, strerror(-r));
		return r;
	}
	snprintf(tmp, sizeof(tmp), ".%s.%d.tmp", METRICS_FILE, (int)getpid());
	/* A leftover of ours from a crash: never follow what sits there. */
	(void)unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, METRICS_MODE);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot create %s/%s: %s", d->config->metrics_dir, tmp, strerror(-r));
		close(dirfd);
		return r;
	}
	/* Every user's program paths are in it: root and daemon.metrics_group
	 * read it, nobody else (elided-metrics(7)).  The mode whatever the umask. */
	if ((d->config->metrics_gid != (gid_t)-1 && fchown(fd, (uid_t)-1, d->config->metrics_gid) < 0) ||
	    fchmod(fd, METRICS_MODE) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot give %s/%s its group and mode: %s", d->config->metrics_dir, tmp,
			 strerror(-r));
		close(fd);
		(void)unlinkat(dirfd, tmp, 0);
		close(dirfd);
		return r;
	}
	f = fdopen(fd, "w");
	if (!f) {
		r = -errno;
		close(fd);
	} else {
		r = elided_metrics_render(d, f);
		if (fclose(f) != 0 && r == 0)
			r = -errno;
	}
	if (r == 0 && renameat(dirfd, tmp, dirfd, METRICS_FILE) < 0)
		r = -errno;
	if (r < 0) {
		snprintf(err, errlen, "cannot write %s/%s: %s", d->config->metrics_dir, METRICS_FILE, strerror(-r));
		(void)unlinkat(dirfd, tmp, 0);
	}
	close(dirfd);
	return r;
}

void elided_metrics_tick(struct elided *d)
{
	struct metrics *m = d->metrics;
	uint64_t now = now_ns();
	char err[4096 + 128];
	int r;

	if (!m || !d->config->metrics_dir)
		return;
	if (m->last_write_ns && now - m->last_write_ns < (uint64_t)(d->config->metrics_interval * 1e9))
		return;
	m->last_write_ns = now;
	accumulate(d, m, now);
	r = write_file(d, err, sizeof(err));
	if (r < 0) {
		if (r != -m->last_error)
			log_warning("metrics: %s (retrying every %.0f s)", err, d->config->metrics_interval);
		m->last_error = -r;
		return;
	}
	if (m->last_error)
		log_info("metrics: %s/%s written again", d->config->metrics_dir, METRICS_FILE);
	m->last_error = 0;
}
