/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the daemon keeps of symbol lookups done by its symbolizer children
 * (symbolizer.c), and what it accepts from them:
 *
 *  - a cache of answers keyed by (uid, device, inode, file offset, kind):
 *    the file's identity as the kernel reports it in /proc/PID/maps, never
 *    its path, so hard links of one file are one module.  Per uid, because
 *    a user's child answers for what that user could read and may lie: its
 *    answers name that user's locks only.  Each uid's entries are capped in
 *    bytes (oldest evicted first);
 *  - a per-uid budget of child runs and child CPU time per window;
 *  - the parser of a child's output: every byte from it is untrusted.
 *
 * Pure data structures (no event loop, no I/O) so that the unit tests can
 * drive them.
 */
#ifndef ELIDED_SYMCACHE_H
#define ELIDED_SYMCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Bounds (documented in elide-security(7)). */
#define SYMCACHE_UID_BYTES (2u << 20)          /* cached answers per uid */
#define SYMBUDGET_WINDOW_NS (60ull * 1000000000ull)
#define SYMBUDGET_RUNS 12u                     /* child runs per uid per window */
#define SYMBUDGET_CPU_NS (10ull * 1000000000ull) /* child CPU time per uid per window */
/* An address whose run failed (a child killed, one that could not be
 * started) is asked again after SYMRETRY_FIRST_NS, the delay doubling with
 * each failure in a row up to SYMRETRY_MAX_NS: never given up. */
#define SYMRETRY_FIRST_NS (1ull * 1000000000ull)
#define SYMRETRY_MAX_NS (300ull * 1000000000ull)

#define SYMPROTO_NAME_MAX 128                  /* name bytes + NUL */
#define SYMPROTO_LINE_MAX 400                  /* one line, newline included */

struct symcache_key {
	uid_t uid;
	uint64_t dev, ino, off;
	bool object;                           /* a lock (data symbol) or a call site (code) */
};

struct symcache_value {
	int err;                               /* 0, or a positive errno: no name */
	unsigned failures;                     /* failed runs in a row (retry_ns set) */
	uint64_t retry_ns;                     /* 0: an answer; else a failed run's entry,
						* asked again from then (CLOCK_MONOTONIC) */
	uint64_t sym_offset;                   /* address - symbol start */
	uint64_t vaddr;                        /* link-time address */
	char name[SYMPROTO_NAME_MAX];
};

struct symcache;

int symcache_new(struct symcache **ret, size_t uid_bytes);
void symcache_free(struct symcache *c);
/* NULL when not cached. */
const struct symcache_value *symcache_get(struct symcache *c, const struct symcache_key *k);
/* Adds or replaces; evicts the uid's oldest entries beyond its byte cap. */
int symcache_put(struct symcache *c, const struct symcache_key *k, const struct symcache_value *v);
size_t symcache_uid_bytes(const struct symcache *c, uid_t uid);
size_t symcache_count(const struct symcache *c);

/* How long after its failures-th failed run in a row (1, 2, ...) an
 * address is asked again: SYMRETRY_FIRST_NS doubled each time, at most
 * SYMRETRY_MAX_NS. */
uint64_t symcache_retry_delay(unsigned failures);
/* What to do about a cached entry at now_ns. */
enum symcache_use {
	SYMCACHE_ANSWER,                       /* an answer (a name, or a final error) */
	SYMCACHE_ASK,                          /* a failed run's, due: ask a child again */
	SYMCACHE_WAIT,                         /* a failed run's, not due yet */
};
enum symcache_use symcache_use(const struct symcache_value *v, uint64_t now_ns);
/* Records a failed run for k at now_ns: an entry with err (positive), the
 * failures counted on from a failed entry already there, retry_ns set. */
int symcache_put_failure(struct symcache *c, const struct symcache_key *k, int err, uint64_t now_ns);

/* Budget: may uid start a child run now?  Counts runs and CPU time in
 * windows of SYMBUDGET_WINDOW_NS. */
bool symcache_budget_allows(struct symcache *c, uid_t uid, uint64_t now_ns);
void symcache_budget_charge(struct symcache *c, uid_t uid, uint64_t now_ns, uint64_t cpu_ns);
/* When the budget may allow uid again: the end of its window (now_ns when
 * it allows now). */
uint64_t symcache_budget_next_ns(struct symcache *c, uid_t uid, uint64_t now_ns);

/*
 * The child's answer, one line per request it answered, then a last line
 * saying how many files it parsed:
 *
 *   R <index> <errno> <dev> <inode> <symbol offset> <vaddr> <name>\n
 *   P <files parsed>\n
 *
 * numbers in decimal, name 1..127 bytes of printable ASCII without space,
 * or "-" for none.  The inode and device are the file the child resolved
 * against, checked by the daemon against its own view of the maps.
 */
struct symproto_req {
	uint64_t addr;
	uint64_t dev, ino;                     /* from the daemon's /proc/PID/maps */
	uint64_t off;
	bool object;
};

struct symproto_answer {
	bool have;                             /* the child answered this request */
	struct symcache_value v;
};

/* Formats one answer line into buf (>= SYMPROTO_LINE_MAX bytes); a name's
 * bytes outside printable ASCII become '?'.  Returns the length. */
size_t symproto_format(char *buf, size_t index, int err, uint64_t dev, uint64_t ino, uint64_t sym_offset,
		       uint64_t vaddr, const char *name);
/* Parses len bytes of a child's output against nreq requests.  The whole
 * answer is refused (-EBADMSG) on any malformed line, an index out of
 * range or answered twice, an over-long line, a missing final P line or
 * anything after it.  An answer about another file than requested is
 * dropped (have stays false), not an error: the process may have remapped. */
int symproto_parse(const char *buf, size_t len, const struct symproto_req *reqs, size_t nreq,
		   struct symproto_answer *out, unsigned *files_parsed);

#endif
