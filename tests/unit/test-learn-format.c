/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Check suite for common/learn-format.c: the verdict of a run's counters,
 * lock identities both ways, the checks of .hints and .teach files (one
 * mutation of a valid file per case) and the stem of their names.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn-format.h"
#include "segment-format.h"

#define PROGRAM "path:/bin/x:ino=1:mtime=2"

/* ---- elide_learn_judge ---- */

static const struct {
	uint64_t attempts, commits;
	enum elide_learn_verdict verdict;
} judge_cases[] = {
	{ 0, 0, ELIDE_LEARN_NONE },
	{ ELIDE_LEARN_MIN_NEVER - 1, 0, ELIDE_LEARN_NONE },
	{ ELIDE_LEARN_MIN_NEVER - 1, ELIDE_LEARN_MIN_NEVER - 1, ELIDE_LEARN_NONE },
	{ 16, 0, ELIDE_LEARN_NEVER },
	{ 16, 1, ELIDE_LEARN_NONE },
	{ 100, 0, ELIDE_LEARN_NEVER },
	{ 100, 1, ELIDE_LEARN_NEVER },
	{ 100, 2, ELIDE_LEARN_NONE },
	{ 63, 63, ELIDE_LEARN_NONE },   /* elides needs ELIDE_LEARN_MIN_ELIDES */
	{ 64, 64, ELIDE_LEARN_ELIDES },
	{ 100, 100, ELIDE_LEARN_ELIDES },
	{ 100, 90, ELIDE_LEARN_ELIDES },
	{ 100, 89, ELIDE_LEARN_NONE },
	{ 100, 50, ELIDE_LEARN_NONE },
	{ 16, 17, ELIDE_LEARN_NONE },   /* commits > attempts */
	{ 100, 101, ELIDE_LEARN_NONE },
	{ 0, 1, ELIDE_LEARN_NONE },
	{ UINT64_MAX, UINT64_MAX, ELIDE_LEARN_ELIDES }, /* no overflow */
	{ UINT64_MAX, 0, ELIDE_LEARN_NEVER },
	{ UINT64_MAX, UINT64_MAX / 100, ELIDE_LEARN_NEVER },
	{ UINT64_MAX, UINT64_MAX / 2, ELIDE_LEARN_NONE },
};

START_TEST(test_judge)
{
	uint64_t a = judge_cases[_i].attempts, c = judge_cases[_i].commits;

	ck_assert_msg(elide_learn_judge(a, c) == judge_cases[_i].verdict,
		      "judge(%" PRIu64 ", %" PRIu64 ") = %d, expected %d", a, c, (int)elide_learn_judge(a, c),
		      (int)judge_cases[_i].verdict);
}
END_TEST

/* ---- lock identities ---- */

static const struct {
	const char *identity;
	const char *module;
	uint64_t offset;
	uint32_t match;
} lock_good[] = {
	{ "data:libc.so.6+0x1a2b", "libc.so.6", 0x1a2b, ELIDE_SEG_HINT_LOCK_ADDR },
	{ "call:libfoo.so+0xdeadbeef", "libfoo.so", 0xdeadbeef, ELIDE_SEG_HINT_CALLSITE },
	{ "data:x+0x0", "x", 0, ELIDE_SEG_HINT_LOCK_ADDR },
	{ "call:a.out+0xffffffffffffffff", "a.out", UINT64_MAX, ELIDE_SEG_HINT_CALLSITE },
	/* The last "+0x" separates the offset: a module name may hold one. */
	{ "data:lib+0xc++.so+0x40", "lib+0xc++.so", 0x40, ELIDE_SEG_HINT_LOCK_ADDR },
	{ "call:a+0xb+0x10", "a+0xb", 0x10, ELIDE_SEG_HINT_CALLSITE },
	/* 63 characters: the longest module that fits with its NUL. */
	{ "data:abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk+0x1",
	  "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk", 1, ELIDE_SEG_HINT_LOCK_ADDR },
};

START_TEST(test_lock_round_trip)
{
	struct elide_learn_lock l, again;
	char buf[160];
	int n;

	memset(&l, 0xa5, sizeof(l));
	ck_assert_int_eq(elide_learn_lock_parse(lock_good[_i].identity, &l), 0);
	ck_assert_str_eq(l.module, lock_good[_i].module);
	ck_assert_uint_eq(l.offset, lock_good[_i].offset);
	ck_assert_uint_eq(l.match, lock_good[_i].match);
	ck_assert_uint_eq(l.reserved, 0);
	/* Zero-padded after the name, as the files want it. */
	for (size_t i = strlen(l.module); i < sizeof(l.module); i++)
		ck_assert_int_eq(l.module[i], 0);

	n = elide_learn_lock_format(&l, buf, sizeof(buf));
	ck_assert_int_eq(n, (int)strlen(lock_good[_i].identity));
	ck_assert_str_eq(buf, lock_good[_i].identity);

	ck_assert_int_eq(elide_learn_lock_parse(buf, &again), 0);
	ck_assert_mem_eq(&again, &l, sizeof(l));
}
END_TEST

static const char *const lock_bad[] = {
	"",
	"data:m+0x1A",                     /* upper case after the first digit */
	"data:m+0x0x10",                   /* a second prefix */
	"libc.so.6+0x10",                  /* no prefix */
	"DATA:libc.so.6+0x10",
	"data;libc.so.6+0x10",
	"heap:libc.so.6+0x10",
	"data:",
	"data:+0x10",                      /* empty module */
	"call:+0x10",
	/* 64 characters: one too many */
	"data:abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl+0x1",
	"data:/usr/lib/libc.so.6+0x10",    /* a path, not a basename */
	"data:a/b+0x10",
	"data:libc.so.6",                  /* no offset */
	"data:libc.so.6+10",
	"data:libc.so.6+0X10",
	"data:libc.so.6+0x",               /* empty digits */
	"data:libc.so.6+0xg",              /* non-hex */
	"data:libc.so.6+0xA",              /* upper case */
	"data:libc.so.6+0x-1",
	"data:libc.so.6+0x 1",
	"data:libc.so.6+0x+1",
	"data:libc.so.6+0x10z",            /* trailing junk */
	"data:libc.so.6+0x10 ",
	"data:libc.so.6+0x10\n",
	"data:libc.so.6+0x10000000000000000", /* 65 bits */
	"data:a+0x10+0x",                  /* the last "+0x" has no digits */
};

START_TEST(test_lock_parse_rejects)
{
	struct elide_learn_lock l;

	ck_assert_msg(elide_learn_lock_parse(lock_bad[_i], &l) == -EINVAL, "accepted \"%s\"", lock_bad[_i]);
}
END_TEST

START_TEST(test_lock_format_too_small)
{
	struct elide_learn_lock l;
	const char *id = "data:libc.so.6+0x1a2b";
	size_t len = strlen(id);
	char buf[64];

	ck_assert_int_eq(elide_learn_lock_parse(id, &l), 0);
	ck_assert_int_eq(elide_learn_lock_format(&l, buf, len + 1), (int)len);
	ck_assert_str_eq(buf, id);
	ck_assert_int_eq(elide_learn_lock_format(&l, buf, len), -ENAMETOOLONG);
	ck_assert_int_eq(elide_learn_lock_format(&l, buf, 1), -ENAMETOOLONG);
	ck_assert_int_eq(elide_learn_lock_format(&l, NULL, 0), -ENAMETOOLONG);
}
END_TEST

/* ---- .hints and .teach files ---- */

#define RECORDS 2u

/* A file as read, with room past its end for the "one byte long" case;
 * the records follow the header with no padding (sizes are multiples of 8). */
struct file {
	struct elide_learn_header h;
	union {
		struct elide_learn_hint hints[RECORDS];
		struct elide_learn_teach teach[RECORDS];
	} r;
	char slack[16];
};

enum kind { HINTS, TEACH };

static void set_lock(struct elide_learn_lock *l, const char *module, uint64_t offset, uint32_t match)
{
	memset(l, 0, sizeof(*l));
	strcpy(l->module, module);
	l->offset = offset;
	l->match = match;
}

/* A valid file of RECORDS records; its size is returned. */
static size_t make_file(struct file *f, enum kind kind)
{
	memset(f, 0, sizeof(*f));
	memcpy(f->h.magic, kind == HINTS ? ELIDE_LEARN_HINTS_MAGIC : ELIDE_LEARN_TEACH_MAGIC, sizeof(f->h.magic));
	f->h.version = ELIDE_LEARN_VERSION;
	f->h.uid = 1000;
	f->h.count = RECORDS;
	f->h.program_len = (uint32_t)strlen(PROGRAM);
	memcpy(f->h.program, PROGRAM, strlen(PROGRAM));
	f->h.written = 1700000000;
	if (kind == HINTS) {
		set_lock(&f->r.hints[0].lock, "libc.so.6", 0x1a2b, ELIDE_SEG_HINT_LOCK_ADDR);
		f->r.hints[0].verdict = ELIDE_LEARN_NEVER;
		f->r.hints[0].until = 1700003600;
		set_lock(&f->r.hints[1].lock, "x", 0x40, ELIDE_SEG_HINT_CALLSITE);
		f->r.hints[1].verdict = ELIDE_LEARN_ELIDES;
		f->r.hints[1].until = 0;
		return sizeof(f->h) + RECORDS * sizeof(struct elide_learn_hint);
	}
	f->h.pid = 4242;
	f->h.start_time = 123456;
	set_lock(&f->r.teach[0].lock, "libc.so.6", 0x1a2b, ELIDE_SEG_HINT_LOCK_ADDR);
	f->r.teach[0].acquired = 1000;
	f->r.teach[0].attempts = 100;
	f->r.teach[0].commits = 100;
	set_lock(&f->r.teach[1].lock, "x", 0x40, ELIDE_SEG_HINT_CALLSITE);
	f->r.teach[1].acquired = 50;
	f->r.teach[1].attempts = 20;
	f->r.teach[1].commits = 0;
	f->r.teach[1].aborts[0] = 20;
	return sizeof(f->h) + RECORDS * sizeof(struct elide_learn_teach);
}

static int check(enum kind kind, const struct file *f, size_t size, char *why, size_t whylen)
{
	return kind == HINTS ? elide_learn_check_hints(f, size, why, whylen)
			     : elide_learn_check_teach(f, size, why, whylen);
}

static struct elide_learn_lock *lock_of(struct file *f, enum kind kind, unsigned i)
{
	return kind == HINTS ? &f->r.hints[i].lock : &f->r.teach[i].lock;
}

START_TEST(test_valid_files)
{
	struct file f;
	char why[256];
	size_t size;

	for (enum kind kind = HINTS; kind <= TEACH; kind++) {
		size = make_file(&f, kind);
		why[0] = '\0';
		ck_assert_int_eq(check(kind, &f, size, why, sizeof(why)), 0);
		ck_assert_str_eq(why, "");
		ck_assert_int_eq(check(kind, &f, size, NULL, 0), 0);

		/* No records at all. */
		f.h.count = 0;
		ck_assert_int_eq(check(kind, &f, sizeof(f.h), why, sizeof(why)), 0);

		/* Edges that are still right: a 63-character module, the
		 * longest program, "path:" alone. */
		size = make_file(&f, kind);
		memset(lock_of(&f, kind, 1)->module, 'm', ELIDE_LEARN_MODULE_MAX - 1);
		ck_assert_int_eq(check(kind, &f, size, why, sizeof(why)), 0);
		memset(f.h.program + 5, 'p', ELIDE_LEARN_PROGRAM_MAX - 5);
		f.h.program_len = ELIDE_LEARN_PROGRAM_MAX;
		ck_assert_int_eq(check(kind, &f, size, why, sizeof(why)), 0);
		memset(f.h.program, 0, sizeof(f.h.program));
		memcpy(f.h.program, "path:", 5);
		f.h.program_len = 5;
		ck_assert_int_eq(check(kind, &f, size, why, sizeof(why)), 0);
	}

	/* .teach edges: commits == attempts, the largest pid. */
	size = make_file(&f, TEACH);
	f.r.teach[1].commits = f.r.teach[1].attempts = UINT64_MAX;
	f.h.pid = INT32_MAX;
	ck_assert_int_eq(check(TEACH, &f, size, why, sizeof(why)), 0);
	f.h.pid = 1;
	ck_assert_int_eq(check(TEACH, &f, size, why, sizeof(why)), 0);

	/* .hints edge: a far end. */
	size = make_file(&f, HINTS);
	f.r.hints[0].until = INT64_MAX;
	ck_assert_int_eq(check(HINTS, &f, size, why, sizeof(why)), 0);
}
END_TEST

START_TEST(test_full_files)
{
	/* As many records as a file may hold. */
	for (enum kind kind = HINTS; kind <= TEACH; kind++) {
		size_t rsize = kind == HINTS ? sizeof(struct elide_learn_hint) : sizeof(struct elide_learn_teach);
		uint32_t max = kind == HINTS ? ELIDE_LEARN_MAX_HINTS : ELIDE_LEARN_MAX_TEACH;
		size_t size = kind == HINTS ? ELIDE_LEARN_HINTS_FILE_MAX : ELIDE_LEARN_TEACH_FILE_MAX;
		struct file one;
		char *buf;
		char why[256];

		ck_assert_uint_eq(size, sizeof(struct elide_learn_header) + max * rsize);
		buf = malloc(size + rsize);
		ck_assert_ptr_nonnull(buf);
		make_file(&one, kind);
		memcpy(buf, &one.h, sizeof(one.h));
		for (uint32_t i = 0; i < max + 1; i++)
			memcpy(buf + sizeof(one.h) + i * rsize, (const char *)&one.r + (i % RECORDS) * rsize, rsize);
		((struct elide_learn_header *)(void *)buf)->count = max;
		ck_assert_int_eq(kind == HINTS ? elide_learn_check_hints(buf, size, why, sizeof(why))
					       : elide_learn_check_teach(buf, size, why, sizeof(why)), 0);
		((struct elide_learn_header *)(void *)buf)->count = max + 1;
		ck_assert_int_eq(kind == HINTS ? elide_learn_check_hints(buf, size + rsize, why, sizeof(why))
					       : elide_learn_check_teach(buf, size + rsize, why, sizeof(why)), -EBADMSG);
		ck_assert_ptr_nonnull(strstr(why, "records"));
		free(buf);
	}
}
END_TEST

/* One mutation of a valid file: it changes the file and perhaps its size. */
struct mutation {
	const char *name;
	unsigned kinds;             /* 1 << HINTS, 1 << TEACH */
	void (*mutate)(struct file *f, enum kind kind, size_t *size);
	const char *key;            /* a word that why must hold */
	int other;                  /* given to the other kind's checker */
};

#define BOTH ((1u << HINTS) | (1u << TEACH))

static void m_magic(struct file *f, enum kind kind, size_t *size) { f->h.magic[7] = '2'; }
static void m_magic_zero(struct file *f, enum kind kind, size_t *size) { memset(f->h.magic, 0, sizeof(f->h.magic)); }
static void m_version2(struct file *f, enum kind kind, size_t *size) { f->h.version = 2; }
static void m_version0(struct file *f, enum kind kind, size_t *size) { f->h.version = 0; }
static void m_count_over(struct file *f, enum kind kind, size_t *size)
{
	f->h.count = (kind == HINTS ? ELIDE_LEARN_MAX_HINTS : ELIDE_LEARN_MAX_TEACH) + 1;
}
static void m_count_huge(struct file *f, enum kind kind, size_t *size) { f->h.count = UINT32_MAX; }
static void m_count_less(struct file *f, enum kind kind, size_t *size) { f->h.count = RECORDS - 1; }
static void m_short(struct file *f, enum kind kind, size_t *size) { (*size)--; }
static void m_long(struct file *f, enum kind kind, size_t *size) { (*size)++; }
static void m_program_len0(struct file *f, enum kind kind, size_t *size) { f->h.program_len = 0; }
static void m_program_len_over(struct file *f, enum kind kind, size_t *size)
{
	f->h.program_len = ELIDE_LEARN_PROGRAM_MAX + 1;
}
static void m_program_nul(struct file *f, enum kind kind, size_t *size) { f->h.program[7] = '\0'; }
static void m_program_nul_last(struct file *f, enum kind kind, size_t *size)
{
	f->h.program_len++; /* takes in the zero after it */
}
static void m_program_trailing(struct file *f, enum kind kind, size_t *size)
{
	f->h.program[f->h.program_len + 1] = 'x';
}
static void m_program_trailing_end(struct file *f, enum kind kind, size_t *size)
{
	f->h.program[ELIDE_LEARN_PROGRAM_MAX - 1] = 'x';
}
static void m_program_no_path(struct file *f, enum kind kind, size_t *size) { f->h.program[0] = 'P'; }
static void m_program_short(struct file *f, enum kind kind, size_t *size)
{
	memset(f->h.program, 0, sizeof(f->h.program));
	memcpy(f->h.program, "path", 4);
	f->h.program_len = 4;
}
static void m_module_unterminated(struct file *f, enum kind kind, size_t *size)
{
	memset(lock_of(f, kind, 1)->module, 'm', ELIDE_LEARN_MODULE_MAX);
}
static void m_module_empty(struct file *f, enum kind kind, size_t *size)
{
	memset(lock_of(f, kind, 1)->module, 0, ELIDE_LEARN_MODULE_MAX);
}
static void m_module_slash(struct file *f, enum kind kind, size_t *size) { strcpy(lock_of(f, kind, 1)->module, "a/b"); }
static void m_module_junk(struct file *f, enum kind kind, size_t *size)
{
	lock_of(f, kind, 1)->module[ELIDE_LEARN_MODULE_MAX - 1] = 'j';
}
static void m_match0(struct file *f, enum kind kind, size_t *size) { lock_of(f, kind, 1)->match = 0; }
static void m_match3(struct file *f, enum kind kind, size_t *size) { lock_of(f, kind, 1)->match = 3; }
static void m_lock_reserved(struct file *f, enum kind kind, size_t *size) { lock_of(f, kind, 1)->reserved = 1; }
static void m_verdict0(struct file *f, enum kind kind, size_t *size) { f->r.hints[1].verdict = ELIDE_LEARN_NONE; }
static void m_verdict3(struct file *f, enum kind kind, size_t *size) { f->r.hints[1].verdict = 3; }
static void m_hint_reserved(struct file *f, enum kind kind, size_t *size) { f->r.hints[1].reserved = 1; }
static void m_until_negative(struct file *f, enum kind kind, size_t *size) { f->r.hints[1].until = -1; }
static void m_hints_pid(struct file *f, enum kind kind, size_t *size) { f->h.pid = 4242; }
static void m_hints_start_time(struct file *f, enum kind kind, size_t *size) { f->h.start_time = 1; }
static void m_commits_over(struct file *f, enum kind kind, size_t *size)
{
	f->r.teach[1].commits = f->r.teach[1].attempts + 1;
}
static void m_pid0(struct file *f, enum kind kind, size_t *size) { f->h.pid = 0; }
static void m_pid_over(struct file *f, enum kind kind, size_t *size) { f->h.pid = (uint64_t)INT32_MAX + 1; }
static void m_pid_huge(struct file *f, enum kind kind, size_t *size) { f->h.pid = UINT64_MAX; }
static void m_none(struct file *f, enum kind kind, size_t *size) {}
static void m_as_teach(struct file *f, enum kind kind, size_t *size)
{
	memcpy(f->h.magic, ELIDE_LEARN_TEACH_MAGIC, sizeof(f->h.magic));
}
static void m_as_hints(struct file *f, enum kind kind, size_t *size)
{
	memcpy(f->h.magic, ELIDE_LEARN_HINTS_MAGIC, sizeof(f->h.magic));
}

static const struct mutation mutations[] = {
	{ "wrong magic", BOTH, m_magic, "magic", 0 },
	{ "zero magic", BOTH, m_magic_zero, "magic", 0 },
	{ "version 2", BOTH, m_version2, "version 2", 0 },
	{ "version 0", BOTH, m_version0, "version 0", 0 },
	{ "count above max", BOTH, m_count_over, "records", 0 },
	{ "count UINT32_MAX", BOTH, m_count_huge, "records", 0 },
	{ "count below the records", BOTH, m_count_less, "bytes", 0 },
	{ "one byte short", BOTH, m_short, "bytes", 0 },
	{ "one byte long", BOTH, m_long, "bytes", 0 },
	{ "program_len 0", BOTH, m_program_len0, "program identity of 0 bytes", 0 },
	{ "program_len above max", BOTH, m_program_len_over, "program identity of 1025 bytes", 0 },
	{ "NUL inside program", BOTH, m_program_nul, "NUL", 0 },
	{ "program_len takes in a NUL", BOTH, m_program_nul_last, "NUL", 0 },
	{ "byte after program", BOTH, m_program_trailing, "after the program", 0 },
	{ "last byte of program[]", BOTH, m_program_trailing_end, "after the program", 0 },
	{ "program not path:", BOTH, m_program_no_path, "path:", 0 },
	{ "program shorter than path:", BOTH, m_program_short, "path:", 0 },
	{ "module not NUL-terminated", BOTH, m_module_unterminated, "module name not NUL", 0 },
	{ "empty module", BOTH, m_module_empty, "empty module", 0 },
	{ "module with /", BOTH, m_module_slash, "module name holds '/'", 0 },
	{ "junk after module NUL", BOTH, m_module_junk, "after the module", 0 },
	{ "match 0", BOTH, m_match0, "match 0", 0 },
	{ "match 3", BOTH, m_match3, "match 3", 0 },
	{ "lock reserved", BOTH, m_lock_reserved, "reserved", 0 },
	{ "verdict 0", 1u << HINTS, m_verdict0, "verdict 0", 0 },
	{ "verdict 3", 1u << HINTS, m_verdict3, "verdict 3", 0 },
	{ "hint reserved", 1u << HINTS, m_hint_reserved, "reserved", 0 },
	{ "until < 0", 1u << HINTS, m_until_negative, "end", 0 },
	{ "hints with a pid", 1u << HINTS, m_hints_pid, "pid", 0 },
	{ "hints with a start time", 1u << HINTS, m_hints_start_time, "pid", 0 },
	{ "commits > attempts", 1u << TEACH, m_commits_over, "commits", 0 },
	{ "pid 0", 1u << TEACH, m_pid0, "pid 0", 0 },
	{ "pid above INT32_MAX", 1u << TEACH, m_pid_over, "pid 2147483648", 0 },
	{ "pid UINT64_MAX", 1u << TEACH, m_pid_huge, "pid", 0 },
	/* Each checker refuses the other kind's file by its magic... */
	{ "hints file to the teach checker", 1u << HINTS, m_none, "magic", 1 },
	{ "teach file to the hints checker", 1u << TEACH, m_none, "magic", 1 },
	/* ...and one laid out as the other kind, magic swapped, by its size. */
	{ "hints file with the teach magic", 1u << HINTS, m_as_teach, "bytes", 1 },
	{ "teach file with the hints magic", 1u << TEACH, m_as_hints, "bytes", 1 },
};

START_TEST(test_mutations)
{
	const struct mutation *m = &mutations[_i];
	unsigned tried = 0;

	for (enum kind kind = HINTS; kind <= TEACH; kind++) {
		struct file f;
		char why[256];
		size_t size;
		enum kind checker = m->other ? (kind == HINTS ? TEACH : HINTS) : kind;

		if (!(m->kinds & (1u << kind)))
			continue;
		size = make_file(&f, kind);
		m->mutate(&f, kind, &size);
		memset(why, 0, sizeof(why));
		ck_assert_msg(check(checker, &f, size, why, sizeof(why)) == -EBADMSG, "%s (%s): accepted", m->name,
			      kind == HINTS ? "hints" : "teach");
		ck_assert_msg(why[0] != '\0', "%s: no why", m->name);
		ck_assert_msg(strstr(why, m->key), "%s (%s): why \"%s\" does not say \"%s\"", m->name,
			      kind == HINTS ? "hints" : "teach", why, m->key);
		/* Record-level faults say which record: the second one. */
		if (strstr(why, "record ") && !strstr(why, " records"))
			ck_assert_msg(strstr(why, "record 1"), "%s: why \"%s\" names the wrong record", m->name, why);
		/* Also refused with no room for why, which stays untouched. */
		why[0] = '@';
		ck_assert_int_eq(check(checker, &f, size, why, 0), -EBADMSG);
		ck_assert_int_eq(why[0], '@');
		/* And with little room: cut, still a string. */
		memset(why, 'z', sizeof(why));
		ck_assert_int_eq(check(checker, &f, size, why, 4), -EBADMSG);
		ck_assert_uint_le(strlen(why), 3);
		tried++;
	}
	ck_assert_uint_gt(tried, 0);
}
END_TEST

START_TEST(test_shorter_than_header)
{
	struct file f;
	char why[256];
	const size_t sizes[] = { 0, 1, 8, sizeof(f.h) - 1 };

	for (enum kind kind = HINTS; kind <= TEACH; kind++) {
		make_file(&f, kind);
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			why[0] = '\0';
			ck_assert_int_eq(check(kind, &f, sizes[i], why, sizeof(why)), -EBADMSG);
			ck_assert_ptr_nonnull(strstr(why, "header"));
			ck_assert_ptr_nonnull(strstr(why, "bytes"));
		}
	}
}
END_TEST

/* ---- elide_learn_stem ---- */

static void assert_stem_shape(const char *stem, const char *uid)
{
	size_t ul = strlen(uid);

	ck_assert_uint_eq(strlen(stem), ul + 1 + 16);
	ck_assert_int_eq(strncmp(stem, uid, ul), 0);
	ck_assert_int_eq(stem[ul], '-');
	for (size_t i = ul + 1; i < ul + 17; i++)
		ck_assert_msg((stem[i] >= '0' && stem[i] <= '9') || (stem[i] >= 'a' && stem[i] <= 'f'),
			      "stem \"%s\": '%c' is not a lower-case hex digit", stem, stem[i]);
}

START_TEST(test_stem)
{
	const char *p1 = PROGRAM, *p2 = "path:/bin/y:ino=1:mtime=2";
	char a[ELIDE_LEARN_NAME_MAX], b[ELIDE_LEARN_NAME_MAX], c[ELIDE_LEARN_NAME_MAX];
	char expect[ELIDE_LEARN_NAME_MAX];

	elide_learn_stem(1000, p1, strlen(p1), a, sizeof(a));
	assert_stem_shape(a, "1000");
	snprintf(expect, sizeof(expect), "1000-%016" PRIx64, elide_learn_program_hash(p1, strlen(p1)));
	ck_assert_str_eq(a, expect);

	/* Same program, same stem; another program, another. */
	elide_learn_stem(1000, p1, strlen(p1), b, sizeof(b));
	ck_assert_str_eq(a, b);
	elide_learn_stem(1000, p2, strlen(p2), c, sizeof(c));
	assert_stem_shape(c, "1000");
	ck_assert_str_ne(a, c);
	/* Another uid: the same hash. */
	elide_learn_stem(0, p1, strlen(p1), c, sizeof(c));
	ck_assert_str_eq(c + 2, a + 5);
	ck_assert_int_eq(strncmp(c, "0-", 2), 0);
	/* Only len bytes count. */
	elide_learn_stem(1000, "path:/bin/x:ino=1:mtime=2XYZ", strlen(p1), c, sizeof(c));
	ck_assert_str_eq(c, a);

	/* FNV-1a-64 test vectors. */
	elide_learn_stem(0, "", 0, c, sizeof(c));
	ck_assert_str_eq(c, "0-cbf29ce484222325");
	elide_learn_stem(0, "a", 1, c, sizeof(c));
	ck_assert_str_eq(c, "0-af63dc4c8601ec8c");
	elide_learn_stem(0, "foobar", 6, c, sizeof(c));
	ck_assert_str_eq(c, "0-85944171f73967e8");
	/* A hash below 2^60 keeps its leading zero. */
	elide_learn_stem(7, "path:/bin/100", 13, c, sizeof(c));
	ck_assert_str_eq(c, "7-077a2e926a02403a");

	/* The longest stem and its suffix fit a name. */
	elide_learn_stem(UINT32_MAX, p1, strlen(p1), c, sizeof(c));
	assert_stem_shape(c, "4294967295");
	ck_assert_uint_lt(strlen(c) + strlen(ELIDE_LEARN_TEACH_SUFFIX), ELIDE_LEARN_NAME_MAX);
	ck_assert_uint_lt(strlen(c) + strlen(ELIDE_LEARN_HINTS_SUFFIX), ELIDE_LEARN_NAME_MAX);
}
END_TEST

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *learn_format_suite(void)
{
	Suite *s = suite_create("learn-format");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_judge, 0, N(judge_cases));
	tcase_add_loop_test(tc, test_lock_round_trip, 0, N(lock_good));
	tcase_add_loop_test(tc, test_lock_parse_rejects, 0, N(lock_bad));
	tcase_add_test(tc, test_lock_format_too_small);
	tcase_add_test(tc, test_valid_files);
	tcase_add_test(tc, test_full_files);
	tcase_add_loop_test(tc, test_mutations, 0, N(mutations));
	tcase_add_test(tc, test_shorter_than_header);
	tcase_add_test(tc, test_stem);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(learn_format_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
