/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The learned-policy store; see learned.h.
 *
 * The file, version 1: text, one record per line, every line ending in
 * "\n", fields separated by exactly one space:
 *
 *   elide-learned 1
 *   UID PROGRAM LOCK VERDICT RUNS FIRST LAST ACQUIRED ATTEMPTS COMMITS
 *       CONFLICT CAPACITY BUSY EXPLICIT RETRY DEBUG NESTED OTHER      (one line)
 *   ...
 *   end COUNT
 *
 *  - UID: decimal, 0..4294967294.
 *  - PROGRAM, LOCK: the identity strings, percent-encoded: the bytes
 *    0x21..0x7e other than '%' stand for themselves, every other byte
 *    (space, control bytes, '%', bytes >= 0x80) is "%XX" in hexadecimal
 *    (written upper case, read in either case).  Decoded, 1..1024 bytes
 *    (LEARNED_STR_MAX), no NUL ("%00" is invalid).
 *  - VERDICT: "never" (never elide) or "elides" (elides well).
 *  - RUNS: process runs that contributed, 0..4294967295.
 *  - FIRST, LAST: seconds since the Epoch, FIRST <= LAST <= 2^63-1: since
 *    when this verdict holds, and the last update.
 *  - ACQUIRED ATTEMPTS COMMITS and the aborts by cause (conflict,
 *    capacity, busy, explicit, retry, debug, nested, other): 0..2^64-1.
 *  - Numbers are unsigned decimal, 1..20 digits, no sign.
 *  - "end COUNT": the number of entry lines; the last line, so that a file
 *    cut short at a line boundary is not taken for a smaller store.
 *
 * elided writes the entries sorted by UID (numerically), then PROGRAM and
 * LOCK (bytewise), so that the file diffs well; it reads them in any
 * order.  It refuses the whole file, with "FILE:LINE: what", when any of
 * this does not hold, when a key appears twice, when a uid has more than
 * per_uid_cap entries or the file more than total_cap, when a line is
 * longer than LEARNED_LINE_MAX bytes (the longest valid line is 6446
 * bytes) or the file larger than LEARNED_FILE_MAX (16 MiB; the largest
 * valid file, 2000 such lines, is 12.3 MiB).
 *
 * In memory: a sorted array of pointers (capacity total_cap + 1, allocated
 * once), each entry one allocation with its strings.  Eviction scans the
 * array: O(n), n <= 2000.  Memory: at most total_cap * (about 2.2 KiB with
 * both strings at their longest) = 4.4 MiB at 2000 entries, plus a 64 KiB
 * buffer while loading or saving.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "errbuf.h"
#include "learned.h"
#include "macros.h"
#include "segment-format.h"

#define HEADER "elide-learned"
#define IO_CHUNK 65536u
#define TEMP_SUFFIX_LEN 6

/* The fields of an entry line, in order. */
enum {
	FIELD_UID, FIELD_PROGRAM, FIELD_LOCK, FIELD_VERDICT, FIELD_RUNS, FIELD_FIRST, FIELD_LAST,
	FIELD_ACQUIRED, FIELD_ATTEMPTS, FIELD_COMMITS,
	FIELD_ABORTS,                          /* LEARNED_ABORT_CAUSES of them */
	NFIELDS = FIELD_ABORTS + LEARNED_ABORT_CAUSES
};

_Static_assert(LEARNED_ABORT_CAUSES == ELIDE_SEG_STAT_ABORT_OTHER - ELIDE_SEG_STAT_ABORT_CONFLICT + 1,
	       "the abort causes are the segment's");
/* The longest entry line: every string byte escaped, every number at its widest. */
_Static_assert(10 + 2 * 3 * LEARNED_STR_MAX + 6 + 10 + 2 * 19 + 11 * 20 + (NFIELDS - 1) + 1 <= LEARNED_LINE_MAX,
	       "a valid entry line fits LEARNED_LINE_MAX");
/* The largest file elided can write is below the bound it reads. */
_Static_assert(32 + (uint64_t)LEARNED_TOTAL_CAP_MAX * LEARNED_LINE_MAX + 32 <= LEARNED_FILE_MAX,
	       "a full store fits LEARNED_FILE_MAX");
_Static_assert(IO_CHUNK > LEARNED_LINE_MAX, "a line fits the read buffer");

struct item {
	uid_t uid;
	uint64_t seq;                          /* order of puts, for ties of last_updated */
	struct learned_entry v;
	const char *program, *lock;            /* in data[] */
	char data[];
};

struct learned_store {
	size_t per_uid_cap, total_cap;
	size_t n;
	struct item **items;                   /* sorted by key; total_cap + 1 slots */
	uint64_t seq;
};

int64_t learned_entry_probe_at(const struct learned_entry *e)
{
	uint32_t shift = e->runs > 1 ? e->runs - 1 : 0;
	int64_t hold;

	if (e->verdict != LEARNED_NEVER)
		return 0;
	if (shift > LEARNED_PROBE_MAX_SHIFT)
		shift = LEARNED_PROBE_MAX_SHIFT;
	hold = (int64_t)LEARNED_PROBE_BASE_SEC << shift;
	/* A store may say any LAST up to 2^63-1. */
	return e->last_updated > INT64_MAX - hold ? INT64_MAX : e->last_updated + hold;
}

bool learned_entry_holds(const struct learned_entry *e, int64_t now)
{
	return e->verdict != LEARNED_NEVER || learned_entry_probe_at(e) > now;
}

int learned_store_new(size_t per_uid_cap, size_t total_cap, struct learned_store **ret)
{
	struct learned_store *s;

	if (per_uid_cap < 1 || per_uid_cap > total_cap || total_cap > LEARNED_TOTAL_CAP_MAX)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->items = calloc(total_cap + 1, sizeof(*s->items));
	if (!s->items) {
		free(s);
		return -ENOMEM;
	}
	s->per_uid_cap = per_uid_cap;
	s->total_cap = total_cap;
	*ret = s;
	return 0;
}

static void clear(struct learned_store *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->items[i]);
	s->n = 0;
}

void learned_store_free(struct learned_store *s)
{
	if (!s)
		return;
	clear(s);
	free(s->items);
	free(s);
}

/* ---- the array ----------------------------------------------------------- */

static int key_cmp(uid_t uid, const char *program, const char *lock, const struct item *it)
{
	int c;

	if (uid != it->uid)
		return uid < it->uid ? -1 : 1;
	c = strcmp(program, it->program);      /* compares as unsigned char */
	return c ? c : strcmp(lock, it->lock);
}

/* Index of the key, or where it would go (*found false). */
static size_t search(const struct learned_store *s, uid_t uid, const char *program, const char *lock, bool *found)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = key_cmp(uid, program, lock, s->items[mid]);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	*found = false;
	return lo;
}

/* The uid's entries: [*lo, *hi). */
static void uid_range(const struct learned_store *s, uid_t uid, size_t *lo, size_t *hi)
{
	size_t a = 0, b = s->n;

	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (s->items[mid]->uid < uid)
			a = mid + 1;
		else
			b = mid;
	}
	*lo = a;
	b = s->n;
	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (s->items[mid]->uid <= uid)
			a = mid + 1;
		else
			b = mid;
	}
	*hi = a;
}

static void insert_at(struct learned_store *s, size_t pos, struct item *it)
{
	memmove(&s->items[pos + 1], &s->items[pos], (s->n - pos) * sizeof(*s->items));
	s->items[pos] = it;
	s->n++;
}

static void remove_at(struct learned_store *s, size_t pos)
{
	free(s->items[pos]);
	memmove(&s->items[pos], &s->items[pos + 1], (s->n - pos - 1) * sizeof(*s->items));
	s->n--;
}

static struct item *item_new(uid_t uid, const char *program, size_t plen, const char *lock, size_t llen)
{
	struct item *it = calloc(1, sizeof(*it) + plen + 1 + llen + 1);

	if (!it)
		return NULL;
	it->uid = uid;
	memcpy(it->data, program, plen);
	memcpy(it->data + plen + 1, lock, llen);
	it->program = it->data;
	it->lock = it->data + plen + 1;
	return it;
}

static bool less_recent(const struct item *a, const struct item *b)
{
	if (a->v.last_updated != b->v.last_updated)
		return a->v.last_updated < b->v.last_updated;
	return a->seq < b->seq;
}

/* The least recently updated entry in [lo, hi) other than keep, or SIZE_MAX. */
static size_t lru_in(const struct learned_store *s, size_t lo, size_t hi, const struct item *keep)
{
	size_t best = SIZE_MAX;

	for (size_t i = lo; i < hi; i++)
		if (s->items[i] != keep && (best == SIZE_MAX || less_recent(s->items[i], s->items[best])))
			best = i;
	return best;
}

/* Over total_cap after keep (of uid) went in: the victim (see learned.h). */
static size_t total_victim(const struct learned_store *s, uid_t uid, const struct item *keep)
{
	size_t best = SIZE_MAX, best_count = 0;
	uid_t best_uid = 0;

	for (size_t lo = 0, hi; lo < s->n; lo = hi) {
		size_t lru, count;
		bool better;

		for (hi = lo + 1; hi < s->n && s->items[hi]->uid == s->items[lo]->uid; hi++)
			;
		lru = lru_in(s, lo, hi, keep);
		if (lru == SIZE_MAX)
			continue;
		count = hi - lo;
		if (best == SIZE_MAX || count > best_count)
			better = true;
		else if (count < best_count || best_uid == uid)
			better = false;
		else
			better = s->items[lo]->uid == uid || less_recent(s->items[lru], s->items[best]);
		if (better) {
			best = lru;
			best_count = count;
			best_uid = s->items[lo]->uid;
		}
	}
	return best;
}

/* ---- lookups and changes --------------------------------------------------- */

const struct learned_entry *learned_store_find(const struct learned_store *s, uid_t uid, const char *program,
					       const char *lock)
{
	bool found;
	size_t i;

	if (!program || !lock)
		return NULL;
	i = search(s, uid, program, lock, &found);
	return found ? &s->items[i]->v : NULL;
}

static bool str_ok(const char *p, size_t *len)
{
	if (!p)
		return false;
	*len = strnlen(p, LEARNED_STR_MAX + 1);
	return *len >= 1 && *len <= LEARNED_STR_MAX;
}

static bool verdict_ok(enum learned_verdict v)
{
	return v == LEARNED_NEVER || v == LEARNED_ELIDES;
}

int learned_store_put(struct learned_store *s, uid_t uid, const char *program, const char *lock,
		      const struct learned_entry *values, int64_t now)
{
	size_t plen, llen, pos, lo, hi, victim;
	struct item *it;
	bool found;

	if (uid == LEARNED_ANY_UID || !str_ok(program, &plen) || !str_ok(lock, &llen) || !values ||
	    !verdict_ok(values->verdict) || now < 0)
		return -EINVAL;
	pos = search(s, uid, program, lock, &found);
	if (found) {
		int64_t first;

		it = s->items[pos];
		/* The same verdict keeps its age; a changed one starts anew. */
		first = it->v.verdict == values->verdict && it->v.first_learned < now ? it->v.first_learned : now;
		it->v = *values;
		it->v.first_learned = first;
		it->v.last_updated = now;
		it->seq = ++s->seq;
		return 0;
	}
	it = item_new(uid, program, plen, lock, llen);
	if (!it)
		return -ENOMEM;
	it->v = *values;
	it->v.first_learned = now;
	it->v.last_updated = now;
	it->seq = ++s->seq;
	insert_at(s, pos, it);

	uid_range(s, uid, &lo, &hi);
	if (hi - lo > s->per_uid_cap) {
		victim = lru_in(s, lo, hi, it);
		if (victim != SIZE_MAX)
			remove_at(s, victim);
	}
	if (s->n > s->total_cap) {
		victim = total_victim(s, uid, it);
		if (victim != SIZE_MAX)
			remove_at(s, victim);
	}
	return 0;
}

size_t learned_store_forget(struct learned_store *s, uid_t uid, const char *program)
{
	size_t kept = 0, dropped = 0;

	for (size_t i = 0; i < s->n; i++) {
		struct item *it = s->items[i];

		if ((uid == LEARNED_ANY_UID || it->uid == uid) && (!program || !strcmp(program, it->program))) {
			free(it);
			dropped++;
		} else {
			s->items[kept++] = it;
		}
	}
	s->n = kept;
	return dropped;
}

bool learned_store_forget_lock(struct learned_store *s, uid_t uid, const char *program, const char *lock)
{
	bool found = false;
	size_t pos;

	if (!program || !lock)
		return false;
	pos = search(s, uid, program, lock, &found);
	if (!found)
		return false;
	remove_at(s, pos);
	return true;
}

size_t learned_store_count(const struct learned_store *s)
{
	return s->n;
}

size_t learned_store_uid_count(const struct learned_store *s, uid_t uid)
{
	size_t lo, hi;

	uid_range(s, uid, &lo, &hi);
	return hi - lo;
}

int learned_store_foreach(const struct learned_store *s, learned_foreach_fn cb, void *userdata)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct item *it = s->items[i];
		int r = cb(it->uid, it->program, it->lock, &it->v, userdata);

		if (r)
			return r;
	}
	return 0;
}

int learned_store_foreach_program(const struct learned_store *s, uid_t uid, const char *program,
				  learned_foreach_fn cb, void *userdata)
{
	bool found;
	/* Lock identities are never empty: "" sorts before the program's first. */
	size_t i = search(s, uid, program, "", &found);

	for (; i < s->n && s->items[i]->uid == uid && strcmp(s->items[i]->program, program) == 0; i++) {
		const struct item *it = s->items[i];
		int r = cb(it->uid, it->program, it->lock, &it->v, userdata);

		if (r)
			return r;
	}
	return 0;
}

/* ---- the file: shared ----------------------------------------------------- */

static const char *const verdict_names[] = {
	[LEARNED_NEVER] = "never",
	[LEARNED_ELIDES] = "elides",
};

/* A file name in the directory, leaving room for the temporary name. */
static bool name_ok(const char *name)
{
	size_t n = name ? strnlen(name, NAME_MAX + 1) : 0;

	return n >= 1 && n + 2 + TEMP_SUFFIX_LEN <= NAME_MAX && !strchr(name, '/') && strcmp(name, ".") &&
	       strcmp(name, "..");
}

static bool byte_plain(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '%';
}

/* ---- the file: reading ---------------------------------------------------- */

struct reader {
	int fd;
	const char *name;
	char *err;
	size_t errlen;
	char *buf;                             /* IO_CHUNK bytes; unparsed: [start, end) */
	size_t start, end;
	uint64_t total;
	unsigned line;                         /* of the last line returned */
	bool eof;
};

static int bad_line(struct reader *r, unsigned line, const char *fmt, ...) _printf_(3, 4);
static int bad_line(struct reader *r, unsigned line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!r->err || r->errlen == 0)
		return -EBADMSG;
	n = snprintf(r->err, r->errlen, "%s:%u: ", r->name, line);
	if (n < 0 || (size_t)n >= r->errlen)
		return -EBADMSG;
	va_start(ap, fmt);
	vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

/* 1: a line (without its newline) in *line, *len; 0: the end; < 0: error. */
static int next_line(struct reader *r, char **line, size_t *len)
{
	for (;;) {
		char *p = r->buf + r->start, *nl = memchr(p, '\n', r->end - r->start);
		ssize_t k;

		if (nl) {
			*len = (size_t)(nl - p);
			if (*len + 1 > LEARNED_LINE_MAX)
				break;
			*line = p;
			r->start += *len + 1;
			r->line++;
			return 1;
		}
		if (r->end - r->start >= LEARNED_LINE_MAX)
			break;
		if (r->eof) {
			if (r->end == r->start)
				return 0;
			return bad_line(r, r->line + 1, "no newline at the end: the file is truncated");
		}
		memmove(r->buf, p, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
		k = read(r->fd, r->buf + r->end, IO_CHUNK - r->end);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			k = -errno;
			errbuf_set(r->err, r->errlen, "%s: read: %s", r->name, strerror((int)-k));
			return (int)k;
		}
		r->eof = k == 0;
		r->end += (size_t)k;
		r->total += (uint64_t)k;
		if (r->total > LEARNED_FILE_MAX) {
			errbuf_set(r->err, r->errlen, "%s: larger than %u bytes: not a file elided writes", r->name,
				LEARNED_FILE_MAX);
			return -EBADMSG;
		}
	}
	return bad_line(r, r->line + 1, "longer than %u bytes", LEARNED_LINE_MAX - 1);
}

struct field {
	const char *p;
	size_t n;
};

/* Unsigned decimal, 1..20 digits, <= max. */
static const char *parse_u64(const struct field *f, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (f->n > 20)
		return "out of range";
	for (size_t i = 0; i < f->n; i++) {
		unsigned d = (unsigned)(unsigned char)f->p[i] - '0';

		if (d > 9)
			return "not an unsigned decimal number";
		if (v > (UINT64_MAX - d) / 10)
			return "out of range";
		v = v * 10 + d;
	}
	if (v > max)
		return "out of range";
	*out = v;
	return NULL;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes f into out (LEARNED_STR_MAX + 1 bytes). */
static const char *decode(const struct field *f, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < f->n; o++) {
		unsigned char c = (unsigned char)f->p[i];

		if (c == '%') {
			int hi = i + 2 < f->n ? hex_digit(f->p[i + 1]) : -1;
			int lo = i + 2 < f->n ? hex_digit(f->p[i + 2]) : -1;

			if (hi < 0 || lo < 0)
				return "an invalid %-escape";
			c = (unsigned char)(hi * 16 + lo);
			if (c == 0)
				return "%00: a NUL byte";
			i += 3;
		} else if (byte_plain(c)) {
			i++;
		} else {
			return "a byte that must be %-escaped";
		}
		if (o == LEARNED_STR_MAX)
			return "longer than 1024 bytes decoded";
		out[o] = (char)c;
	}
	out[o] = '\0';
	return NULL;
}

static const char *const field_names[NFIELDS] = {
	"uid", "program", "lock", "verdict", "runs", "first learned", "last updated", "acquired", "attempts",
	"commits", "conflict aborts", "capacity aborts", "busy aborts", "explicit aborts", "retry aborts",
	"debug aborts", "nested aborts", "other aborts",
};

/* Splits at single spaces; *nf: the number of fields, NFIELDS + 1 meaning more. */
static const char *split(char *line, size_t len, struct field *f, size_t *nf)
{
	size_t n = 0, start = 0;

	for (size_t i = 0; i <= len; i++) {
		if (i < len && line[i] != ' ')
			continue;
		if (i == start)
			return "an empty field (two spaces, or a space at the start or end)";
		if (n == NFIELDS) {
			*nf = NFIELDS + 1;
			return NULL;
		}
		f[n].p = line + start;
		f[n].n = i - start;
		n++;
		start = i + 1;
	}
	*nf = n;
	return NULL;
}

static int parse_entry(struct learned_store *s, struct reader *r, char *line, size_t len)
{
	struct field f[NFIELDS];
	char program[LEARNED_STR_MAX + 1], lock[LEARNED_STR_MAX + 1];
	uint64_t num[NFIELDS];
	const char *why;
	struct item *it;
	size_t nf, pos, lo, hi;
	bool found;
	int verdict = -1;

	why = split(line, len, f, &nf);
	if (why)
		return bad_line(r, r->line, "%s", why);
	if (nf != NFIELDS)
		return bad_line(r, r->line, "%s fields, expected %d", nf > NFIELDS ? "too many" : "too few", NFIELDS);
	for (size_t i = 0; i < NFIELDS; i++) {
		uint64_t max = UINT64_MAX;

		switch (i) {
		case FIELD_PROGRAM:
			why = decode(&f[i], program);
			break;
		case FIELD_LOCK:
			why = decode(&f[i], lock);
			break;
		case FIELD_VERDICT:
			for (int v = 0; v < (int)ARRAY_SIZE(verdict_names); v++)
				if (f[i].n == strlen(verdict_names[v]) && !memcmp(f[i].p, verdict_names[v], f[i].n))
					verdict = v;
			why = verdict < 0 ? "not \"never\" or \"elides\"" : NULL;
			break;
		default:
			if (i == FIELD_UID)
				max = (uint64_t)LEARNED_ANY_UID - 1;
			else if (i == FIELD_RUNS)
				max = UINT32_MAX;
			else if (i == FIELD_FIRST || i == FIELD_LAST)
				max = INT64_MAX;
			why = parse_u64(&f[i], max, &num[i]);
			break;
		}
		if (why)
			return bad_line(r, r->line, "%s: %s", field_names[i], why);
	}
	if (num[FIELD_FIRST] > num[FIELD_LAST])
		return bad_line(r, r->line, "first learned after last updated");

	pos = search(s, (uid_t)num[FIELD_UID], program, lock, &found);
	if (found)
		return bad_line(r, r->line, "a second entry for uid %" PRIu64 ", this program and lock", num[FIELD_UID]);
	if (s->n == s->total_cap)
		return bad_line(r, r->line, "more than %zu entries", s->total_cap);
	uid_range(s, (uid_t)num[FIELD_UID], &lo, &hi);
	if (hi - lo == s->per_uid_cap)
		return bad_line(r, r->line, "more than %zu entries for uid %" PRIu64, s->per_uid_cap, num[FIELD_UID]);
	it = item_new((uid_t)num[FIELD_UID], program, strlen(program), lock, strlen(lock));
	if (!it) {
		errbuf_set(r->err, r->errlen, "%s: %s", r->name, strerror(ENOMEM));
		return -ENOMEM;
	}
	it->v.verdict = (enum learned_verdict)verdict;
	it->v.runs = (uint32_t)num[FIELD_RUNS];
	it->v.first_learned = (int64_t)num[FIELD_FIRST];
	it->v.last_updated = (int64_t)num[FIELD_LAST];
	it->v.acquired = num[FIELD_ACQUIRED];
	it->v.attempts = num[FIELD_ATTEMPTS];
	it->v.commits = num[FIELD_COMMITS];
	for (size_t c = 0; c < LEARNED_ABORT_CAUSES; c++)
		it->v.aborts[c] = num[FIELD_ABORTS + c];
	it->seq = ++s->seq;
	insert_at(s, pos, it);
	return 0;
}

static int parse_header(struct reader *r, const char *line, size_t len)
{
	static const char want[] = HEADER " 1";
	size_t hl = strlen(HEADER " ");
	uint64_t v;

	if (len == strlen(want) && !memcmp(line, want, len))
		return 0;
	if (len > hl && !memcmp(line, HEADER " ", hl) &&
	    !parse_u64(&(struct field){ line + hl, len - hl }, UINT64_MAX, &v) && v != LEARNED_FILE_VERSION)
		return bad_line(r, 1, "version %" PRIu64 ": this elided reads version %d", v, LEARNED_FILE_VERSION);
	return bad_line(r, 1, "no \"%s\" header: not a learned-policy file", want);
}

static int parse_end(struct learned_store *s, struct reader *r, const char *line, size_t len)
{
	struct field f = { line + 4, len - 4 };
	const char *why;
	uint64_t count;

	why = parse_u64(&f, UINT64_MAX, &count);
	if (why)
		return bad_line(r, r->line, "end: %s", why);
	if (count != s->n)
		return bad_line(r, r->line, "end: %" PRIu64 " entries announced, %zu read", count, s->n);
	return 0;
}

static int parse_file(struct learned_store *s, struct reader *r)
{
	char *line;
	size_t len;
	bool ended = false;
	int k;

	k = next_line(r, &line, &len);
	if (k < 0)
		return k;
	if (k == 0)
		return bad_line(r, 1, "empty file: no \"" HEADER " 1\" header");
	k = parse_header(r, line, len);
	if (k < 0)
		return k;
	while ((k = next_line(r, &line, &len)) > 0) {
		if (ended)
			return bad_line(r, r->line, "a line after the end line");
		if (len >= 4 && !memcmp(line, "end ", 4)) {
			k = parse_end(s, r, line, len);
			ended = true;
		} else {
			k = parse_entry(s, r, line, len);
		}
		if (k < 0)
			return k;
	}
	if (k < 0)
		return k;
	if (!ended)
		return bad_line(r, r->line + 1, "no end line: the file is truncated");
	return 0;
}

int learned_store_load(struct learned_store *s, int dirfd, const char *name, char *err, size_t errlen)
{
	struct reader r = { .fd = -1, .name = name, .err = err, .errlen = errlen };
	struct stat st;
	int k;

	clear(s);
	if (err && errlen)
		err[0] = '\0';
	if (!name_ok(name)) {
		errbuf_set(err, errlen, "%s: not a file name", name ? name : "(null)");
		return -EINVAL;
	}
	r.fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
	if (r.fd < 0) {
		if (errno == ENOENT)
			return 0;
		k = -errno;
		errbuf_set(err, errlen, "%s: open: %s", name, strerror(-k));
		return k;
	}
	if (fstat(r.fd, &st) < 0) {
		k = -errno;
		errbuf_set(err, errlen, "%s: fstat: %s", name, strerror(-k));
	} else if (!S_ISREG(st.st_mode)) {
		errbuf_set(err, errlen, "%s: not a regular file", name);
		k = -EBADMSG;
	} else if (st.st_size > (off_t)LEARNED_FILE_MAX) {
		errbuf_set(err, errlen, "%s: %jd bytes, larger than %u: not a file elided writes", name,
			(intmax_t)st.st_size, LEARNED_FILE_MAX);
		k = -EBADMSG;
	} else if (!(r.buf = malloc(IO_CHUNK))) {
		errbuf_set(err, errlen, "%s: %s", name, strerror(ENOMEM));
		k = -ENOMEM;
	} else {
		k = parse_file(s, &r);
	}
	free(r.buf);
	close(r.fd);
	if (k < 0)
		clear(s);
	return k;
}

/* ---- the file: writing ---------------------------------------------------- */

struct writer {
	int fd;
	char *buf;                             /* IO_CHUNK bytes */
	size_t len;
	int error;                             /* the first -errno */
};

static void w_flush(struct writer *w)
{
	const char *p = w->buf;
	size_t left = w->len;

	while (left > 0 && !w->error) {
		ssize_t k = write(w->fd, p, left);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			w->error = -errno;
		else if (k == 0)
			w->error = -EIO;
		else {
			p += k;
			left -= (size_t)k;
		}
	}
	w->len = 0;
}

static void w_put(struct writer *w, const char *p, size_t n)
{
	if (w->len + n > IO_CHUNK)
		w_flush(w);
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static size_t encode(char *out, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (byte_plain(c)) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	return o;
}

static void write_entry(struct writer *w, const struct item *it, char *line)
{
	const struct learned_entry *v = &it->v;
	size_t n;
	int k;

	n = (size_t)snprintf(line, LEARNED_LINE_MAX, "%u ", (unsigned)it->uid);
	n += encode(line + n, it->program);
	line[n++] = ' ';
	n += encode(line + n, it->lock);
	k = snprintf(line + n, LEARNED_LINE_MAX - n,
		     " %s %" PRIu32 " %" PRId64 " %" PRId64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
		     " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
		     verdict_names[v->verdict], v->runs, v->first_learned, v->last_updated, v->acquired, v->attempts,
		     v->commits, v->aborts[0], v->aborts[1], v->aborts[2], v->aborts[3], v->aborts[4], v->aborts[5],
		     v->aborts[6], v->aborts[7]);
	w_put(w, line, n + (size_t)k);
}

static void write_store(const struct learned_store *s, struct writer *w, char *line)
{
	int n = snprintf(line, LEARNED_LINE_MAX, HEADER " %d\n", LEARNED_FILE_VERSION);

	w_put(w, line, (size_t)n);
	for (size_t i = 0; i < s->n; i++)
		write_entry(w, s->items[i], line);
	n = snprintf(line, LEARNED_LINE_MAX, "end %zu\n", s->n);
	w_put(w, line, (size_t)n);
	w_flush(w);
}

static bool is_temp_name(const char *d, const char *name)
{
	size_t n = strlen(name);

	if (strlen(d) != n + 2 + TEMP_SUFFIX_LEN || d[0] != '.' || memcmp(d + 1, name, n) || d[n + 1] != '.')
		return false;
	for (size_t i = n + 2; d[i]; i++)
		if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'z') || (d[i] >= 'A' && d[i] <= 'Z')))
			return false;
	return true;
}

/* Removes what interrupted saves left: elided is the directory's only writer. */
static void remove_leftovers(int dfd, const char *name)
{
	int fd = dup(dfd);
	DIR *d;
	struct dirent *e;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (is_temp_name(e->d_name, name))
			(void)unlinkat(dfd, e->d_name, 0);
	closedir(d);
}

static int create_temp(int dfd, const char *name, char tmp[static NAME_MAX + 1])
{
	static const char alnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
	static unsigned counter;

	for (int attempt = 0; attempt < 100; attempt++) {
		unsigned char rnd[TEMP_SUFFIX_LEN];
		char suffix[TEMP_SUFFIX_LEN + 1];
		int fd;

		if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
			struct timespec ts;
			uint64_t x;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			x = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^ ++counter;
			for (size_t i = 0; i < sizeof(rnd); i++, x >>= 8)
				rnd[i] = (unsigned char)x;
		}
		for (size_t i = 0; i < TEMP_SUFFIX_LEN; i++)
			suffix[i] = alnum[rnd[i] % (sizeof(alnum) - 1)];
		suffix[TEMP_SUFFIX_LEN] = '\0';
		snprintf(tmp, NAME_MAX + 1, ".%s.%s", name, suffix);
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd < 0 ? -errno : fd;
	}
	return -EEXIST;
}

int learned_store_save(const struct learned_store *s, int dirfd, const char *name, char *err, size_t errlen)
{
	char tmp[NAME_MAX + 1], *line = NULL;
	struct writer w = { .fd = -1 };
	const char *step;
	int dfd, r;

	if (err && errlen)
		err[0] = '\0';
	if (!name_ok(name)) {
		errbuf_set(err, errlen, "%s: not a file name", name ? name : "(null)");
		return -EINVAL;
	}
	dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		r = -errno;
		errbuf_set(err, errlen, "%s: opening its directory: %s", name, strerror(-r));
		return r;
	}
	remove_leftovers(dfd, name);
	w.fd = create_temp(dfd, name, tmp);
	if (w.fd < 0) {
		r = w.fd;
		errbuf_set(err, errlen, "%s: creating a temporary file in its directory: %s; %s left as it was", name,
			strerror(-r), name);
		close(dfd);
		return r;
	}

	w.buf = malloc(IO_CHUNK);
	line = malloc(LEARNED_LINE_MAX);
	step = "writing";
	if (!w.buf || !line)
		r = -ENOMEM;
	else {
		write_store(s, &w, line);
		r = w.error;
	}
	free(w.buf);
	free(line);
	if (r == 0 && fsync(w.fd) < 0) {
		r = -errno;
		step = "fsync of";
	}
	if (close(w.fd) < 0 && r == 0) {
		r = -errno;
		step = "closing";
	}
	if (r == 0 && renameat(dfd, tmp, dfd, name) < 0) {
		r = -errno;
		step = "renaming";
	}
	if (r < 0) {
		(void)unlinkat(dfd, tmp, 0);
		errbuf_set(err, errlen, "%s: %s %s: %s; %s left as it was", name, step, tmp, strerror(-r), name);
		close(dfd);
		return r;
	}
	if (fsync(dfd) < 0) {
		r = -errno;
		errbuf_set(err, errlen, "%s: written, but fsync of its directory failed: %s; the new file may not survive a crash",
			name, strerror(-r));
	}
	close(dfd);
	return r;
}
