/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Cache of symbolizer answers, per-uid budget, and the parser of a child's
 * output; see symcache.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symcache.h"

#define NBUCKETS 4096u

struct entry {
	struct symcache_key k;
	struct symcache_value v;
	size_t bytes;
	struct entry *hnext;                   /* hash chain */
	struct entry *older, *newer;           /* the uid's FIFO */
};

struct uid_state {
	uid_t uid;
	size_t bytes;
	struct entry *oldest, *newest;
	uint64_t window_start;
	unsigned runs;
	uint64_t cpu_ns;
	struct uid_state *next;
};

struct symcache {
	size_t uid_bytes;
	size_t count;
	struct entry *buckets[NBUCKETS];
	struct uid_state *uids;
};

int symcache_new(struct symcache **ret, size_t uid_bytes)
{
	struct symcache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->uid_bytes = uid_bytes;
	*ret = c;
	return 0;
}

void symcache_free(struct symcache *c)
{
	if (!c)
		return;
	for (size_t b = 0; b < NBUCKETS; b++)
		for (struct entry *e = c->buckets[b], *n; e; e = n) {
			n = e->hnext;
			free(e);
		}
	for (struct uid_state *u = c->uids, *n; u; u = n) {
		n = u->next;
		free(u);
	}
	free(c);
}

static size_t hash_key(const struct symcache_key *k)
{
	uint64_t h = 1469598103934665603ull;
	uint64_t parts[5] = { k->uid, k->dev, k->ino, k->off, k->object };

	for (int i = 0; i < 5; i++) {
		h ^= parts[i];
		h *= 1099511628211ull;
		h ^= h >> 29;
	}
	return (size_t)(h % NBUCKETS);
}

static bool key_eq(const struct symcache_key *a, const struct symcache_key *b)
{
	return a->uid == b->uid && a->dev == b->dev && a->ino == b->ino && a->off == b->off &&
	       a->object == b->object;
}

static struct uid_state *uid_get(struct symcache *c, uid_t uid, bool create)
{
	struct uid_state *u;

	for (u = c->uids; u; u = u->next)
		if (u->uid == uid)
			return u;
	if (!create)
		return NULL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->uid = uid;
	u->next = c->uids;
	c->uids = u;
	return u;
}

static struct entry *find(struct symcache *c, const struct symcache_key *k)
{
	for (struct entry *e = c->buckets[hash_key(k)]; e; e = e->hnext)
		if (key_eq(&e->k, k))
			return e;
	return NULL;
}

const struct symcache_value *symcache_get(struct symcache *c, const struct symcache_key *k)
{
	struct entry *e = find(c, k);

	return e ? &e->v : NULL;
}

static void unlink_entry(struct symcache *c, struct uid_state *u, struct entry *e)
{
	struct entry **pp = &c->buckets[hash_key(&e->k)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	if (e->older)
		e->older->newer = e->newer;
	else
		u->oldest = e->newer;
	if (e->newer)
		e->newer->older = e->older;
	else
		u->newest = e->older;
	u->bytes -= e->bytes;
	c->count--;
	free(e);
}

int symcache_put(struct symcache *c, const struct symcache_key *k, const struct symcache_value *v)
{
	struct uid_state *u = uid_get(c, k->uid, true);
	struct entry *e;

	if (!u)
		return -ENOMEM;
	e = find(c, k);
	if (e)
		unlink_entry(c, u, e);
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->k = *k;
	e->v = *v;
	e->v.name[sizeof(e->v.name) - 1] = '\0';
	/* What the entry costs, so the cap is about memory, not a count. */
	e->bytes = sizeof(*e);
	e->hnext = c->buckets[hash_key(k)];
	c->buckets[hash_key(k)] = e;
	e->older = u->newest;
	if (u->newest)
		u->newest->newer = e;
	else
		u->oldest = e;
	u->newest = e;
	u->bytes += e->bytes;
	c->count++;
	while (u->bytes > c->uid_bytes && u->oldest)
		unlink_entry(c, u, u->oldest);
	return 0;
}

size_t symcache_uid_bytes(const struct symcache *c, uid_t uid)
{
	for (const struct uid_state *u = c->uids; u; u = u->next)
		if (u->uid == uid)
			return u->bytes;
	return 0;
}

size_t symcache_count(const struct symcache *c)
{
	return c->count;
}

uint64_t symcache_retry_delay(unsigned failures)
{
	uint64_t d = SYMRETRY_FIRST_NS;

	for (unsigned i = 1; i < failures && d < SYMRETRY_MAX_NS; i++)
		d *= 2;
	return d < SYMRETRY_MAX_NS ? d : SYMRETRY_MAX_NS;
}

enum symcache_use symcache_use(const struct symcache_value *v, uint64_t now_ns)
{
	if (v->retry_ns == 0)
		return SYMCACHE_ANSWER;
	return now_ns >= v->retry_ns ? SYMCACHE_ASK : SYMCACHE_WAIT;
}

int symcache_put_failure(struct symcache *c, const struct symcache_key *k, int err, uint64_t now_ns)
{
	const struct symcache_value *old = symcache_get(c, k);
	struct symcache_value v = { .err = err > 0 ? err : EIO };

	/* An answer already there stays (another run gave it meanwhile). */
	if (old && old->retry_ns == 0)
		return 0;
	v.failures = old && old->failures < 64 ? old->failures + 1 : old ? old->failures : 1;
	v.retry_ns = now_ns + symcache_retry_delay(v.failures);
	return symcache_put(c, k, &v);
}

static struct uid_state *budget_window(struct symcache *c, uid_t uid, uint64_t now_ns)
{
	struct uid_state *u = uid_get(c, uid, true);

	if (u && (u->window_start == 0 || now_ns - u->window_start >= SYMBUDGET_WINDOW_NS)) {
		u->window_start = now_ns ? now_ns : 1;
		u->runs = 0;
		u->cpu_ns = 0;
	}
	return u;
}

bool symcache_budget_allows(struct symcache *c, uid_t uid, uint64_t now_ns)
{
	struct uid_state *u = budget_window(c, uid, now_ns);

	return u && u->runs < SYMBUDGET_RUNS && u->cpu_ns < SYMBUDGET_CPU_NS;
}

uint64_t symcache_budget_next_ns(struct symcache *c, uid_t uid, uint64_t now_ns)
{
	struct uid_state *u;

	if (symcache_budget_allows(c, uid, now_ns))
		return now_ns;
	u = uid_get(c, uid, false);
	return u ? u->window_start + SYMBUDGET_WINDOW_NS : now_ns;
}

void symcache_budget_charge(struct symcache *c, uid_t uid, uint64_t now_ns, uint64_t cpu_ns)
{
	struct uid_state *u = budget_window(c, uid, now_ns);

	if (!u)
		return;
	u->runs++;
	u->cpu_ns += cpu_ns;
}

/* ---- protocol ----------------------------------------------------------- */

static bool name_byte_ok(unsigned char ch)
{
	return ch > 0x20 && ch < 0x7f;
}

size_t symproto_format(char *buf, size_t index, int err, uint64_t dev, uint64_t ino, uint64_t sym_offset,
		       uint64_t vaddr, const char *name)
{
	char safe[SYMPROTO_NAME_MAX];
	size_t n = 0;
	int len;

	for (; name && name[n] && n < sizeof(safe) - 1; n++)
		safe[n] = name_byte_ok((unsigned char)name[n]) ? name[n] : '?';
	safe[n] = '\0';
	if (err < 0)
		err = -err;
	if (err > 4095)
		err = EIO;
	len = snprintf(buf, SYMPROTO_LINE_MAX, "R %zu %d %llu %llu %llu %llu %s\n", index, err,
		       (unsigned long long)dev, (unsigned long long)ino, (unsigned long long)sym_offset,
		       (unsigned long long)vaddr, n ? safe : "-");
	return len > 0 && len < SYMPROTO_LINE_MAX ? (size_t)len : 0;
}

/* A decimal number of at most 20 digits that fits 64 bits; *p moves past it
 * and one following separator sep. */
static bool parse_u64(const char **p, const char *end, char sep, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	size_t digits = 0;

	while (s < end && *s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
		s++;
		if (++digits > 20)
			return false;
	}
	if (digits == 0 || s >= end || *s != sep)
		return false;
	*p = s + 1;
	*out = v;
	return true;
}

int symproto_parse(const char *buf, size_t len, const struct symproto_req *reqs, size_t nreq,
		   struct symproto_answer *out, unsigned *files_parsed)
{
	const char *p = buf, *end = buf + len;
	bool done = false;

	memset(out, 0, nreq * sizeof(*out));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		uint64_t idx, err, dev, ino, off, vaddr, files;
		const char *name;
		size_t name_len;

		if (!nl || nl - p + 1 > SYMPROTO_LINE_MAX || done)
			return -EBADMSG;
		if (nl - p >= 2 && p[0] == 'P' && p[1] == ' ') {
			const char *q = p + 2;

			if (!parse_u64(&q, nl + 1, '\n', &files) || q != nl + 1 || files > 1000000)
				return -EBADMSG;
			*files_parsed = (unsigned)files;
			done = true;
			p = nl + 1;
			continue;
		}
		if (nl - p < 2 || p[0] != 'R' || p[1] != ' ')
			return -EBADMSG;
		p += 2;
		if (!parse_u64(&p, nl, ' ', &idx) || !parse_u64(&p, nl, ' ', &err) || !parse_u64(&p, nl, ' ', &dev) ||
		    !parse_u64(&p, nl, ' ', &ino) || !parse_u64(&p, nl, ' ', &off) || !parse_u64(&p, nl, ' ', &vaddr))
			return -EBADMSG;
		name = p;
		name_len = (size_t)(nl - p);
		if (idx >= nreq || out[idx].have || err > 4095 || name_len == 0 || name_len >= SYMPROTO_NAME_MAX)
			return -EBADMSG;
		for (size_t i = 0; i < name_len; i++)
			if (!name_byte_ok((unsigned char)name[i]))
				return -EBADMSG;
		p = nl + 1;
		/* About another file than the one asked for: not an answer. */
		if (dev != reqs[idx].dev || ino != reqs[idx].ino)
			continue;
		out[idx].have = true;
		out[idx].v.err = (int)err;
		out[idx].v.sym_offset = off;
		out[idx].v.vaddr = vaddr;
		if (err == 0 && !(name_len == 1 && name[0] == '-')) {
			memcpy(out[idx].v.name, name, name_len);
			out[idx].v.name[name_len] = '\0';
		} else if (err == 0) {
			out[idx].v.err = ENOENT;
		}
	}
	return done ? 0 : -EBADMSG;
}
