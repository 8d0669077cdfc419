/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * make-seeds OUTDIR: write the generated seed and regression inputs of the
 * fuzz harnesses, byte for byte the same on every run:
 *
 *   OUTDIR/corpus/fuzz-segment/       valid segments (as libelide writes them)
 *   OUTDIR/corpus/fuzz-elfsym/        small valid ELF files
 *   OUTDIR/regressions/fuzz-segment/  segments of known attack shapes
 *   OUTDIR/regressions/fuzz-elfsym/   ELF files of known attack shapes
 *   OUTDIR/known-crashes/<harness>/   inputs that still crash the code
 *                                     (fuzz/known-crashes/README.md)
 *
 * Binary inputs are made here rather than checked in, so that what each one
 * is stays readable.  The segments use pid 4242, start time 1000, the name
 * the harness gives a file whose header says so.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "segment-format.h"
#include "elide.h"

static const char *outdir;

static void mkdirs(const char *path)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0755) < 0 && errno != EEXIST) {
				perror(p);
				exit(1);
			}
			*s = '/';
		}
	if (mkdir(p, 0755) < 0 && errno != EEXIST) {
		perror(p);
		exit(1);
	}
}

static void write_out(const char *set, const char *harness, const char *name, const void *data, size_t size)
{
	char dir[4096], path[4352];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/%s/%s", outdir, set, harness);
	mkdirs(dir);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* ---------------------------------------------------------------- segments */

struct segment {
	struct elide_seg_header h;
	struct elide_seg_control c;
	struct elide_seg_lock locks[];
};

static struct segment *segment_new(uint32_t capacity, size_t *size)
{
	struct segment *s;

	*size = sizeof(*s) + (size_t)capacity * sizeof(struct elide_seg_lock);
	s = calloc(1, *size);
	if (!s)
		exit(1);
	memcpy(s->h.magic, ELIDE_SEG_MAGIC, sizeof(s->h.magic));
	s->h.version = ELIDE_SEG_VERSION;
	s->h.header_size = ELIDE_SEG_HEADER_SIZE;
	s->h.control_offset = ELIDE_SEG_HEADER_SIZE;
	s->h.control_size = ELIDE_SEG_CONTROL_SIZE;
	s->h.locks_offset = ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE;
	s->h.lock_entry_size = sizeof(struct elide_seg_lock);
	s->h.lock_capacity = capacity;
	s->h.lock_high_water = capacity;
	s->h.total_size = *size;
	s->h.pid = 4242;
	s->h.uid = 1000;
	s->h.start_time = 1000;
	s->h.created_ns = 1700000000000000000ull;
	snprintf(s->h.exe, sizeof(s->h.exe), "/opt/fuzz/bin/app");
	snprintf(s->h.comm, sizeof(s->h.comm), "app");
	snprintf(s->h.lib_version, sizeof(s->h.lib_version), "0.1.0");
	s->h.elision = ELIDE_SEG_ELISION_ON;
	s->h.mode = ELIDE_SEG_MODE_ADAPTIVE;
	s->h.sample = 64;
	s->h.rtm_usable = 1;
	snprintf(s->h.status_reason, sizeof(s->h.status_reason), "RTM usable");
	s->c.generation = 2;
	/* [1] is the overflow entry. */
	s->locks[1].kind = ELIDE_SEG_KIND_OVERFLOW;
	s->locks[1].stats[ELIDE_SEG_STAT_ACQUIRED] = 30;
	return s;
}

static void set_lock(struct elide_seg_lock *l, uint32_t kind, uint32_t state, uint32_t reason, uint64_t addr,
		     const char *name, uint64_t base)
{
	l->kind = kind;
	l->state = state;
	l->reason = reason;
	l->addr = addr;
	l->callsite = 0x401000 + addr / 16;
	snprintf(l->name, sizeof(l->name), "%s", name);
	for (unsigned i = 0; i < ELIDE_SEG_NSTATS; i++)
		l->stats[i] = base * (i + 1);
}

static void make_segments(void)
{
	struct segment *s;
	size_t size;

	/* As tests/integration/make-segment.c: overflow entry and three locks. */
	s = segment_new(5, &size);
	set_lock(&s->locks[2], ELIDE_SEG_KIND_MUTEX, ELIDE_SEG_STATE_ELIDING, ELIDE_SEG_REASON_CONTENDED, 0x1000,
		 "cache_lock", 123456);
	set_lock(&s->locks[3], ELIDE_SEG_KIND_RWLOCK_READ, ELIDE_SEG_STATE_OFF_ADAPT, ELIDE_SEG_REASON_ABORTS,
		 0x2000, "table_lock", 98765432);
	set_lock(&s->locks[4], ELIDE_SEG_KIND_RWLOCK_WRITE, ELIDE_SEG_STATE_OFF_POLICY, ELIDE_SEG_REASON_DAEMON,
		 0x2000, "table_lock", 42);
	s->locks[4].ctl_policy = ELIDE_POLICY_NEVER + 1;
	s->locks[4].ctl_source = ELIDE_SEG_SOURCE_CONFIG;
	write_out("corpus", "fuzz-segment", "three-locks.seg", s, size);
	free(s);

	/* The smallest: capacity 2, nothing but the overflow entry. */
	s = segment_new(2, &size);
	write_out("corpus", "fuzz-segment", "minimal.seg", s, size);
	free(s);

	/* Room for 16, 6 used, the rest never touched (high water 8). */
	s = segment_new(16, &size);
	s->h.lock_high_water = 8;
	for (uint32_t i = 2; i < 8; i++)
		set_lock(&s->locks[i], ELIDE_SEG_KIND_MUTEX + i % 3, i % 4, i % ELIDE_SEG_NREASONS, 0x1000 * i,
			 i % 2 ? "" : "named_lock", i);
	s->locks[5].kind = ELIDE_SEG_KIND_FREE;
	s->h.mode = ELIDE_SEG_MODE_ON;
	s->c.mode = ELIDE_SEG_MODE_OFF;
	write_out("corpus", "fuzz-segment", "high-water.seg", s, size);
	free(s);

	/* Partly invalid: the reader skips and counts the bad entries and hands
	 * over the good ones, in callback mode too. */
	s = segment_new(14, &size);
	s->locks[0].kind = ELIDE_SEG_KIND_MUTEX;                 /* entry 0 is never used */
	set_lock(&s->locks[2], ELIDE_SEG_KIND_MUTEX, 0, 0, 0x1000, "good_a", 1);
	set_lock(&s->locks[3], 9, 0, 0, 0x1100, "bad_kind", 1);
	set_lock(&s->locks[4], ELIDE_SEG_KIND_MUTEX, 7, 0, 0x1200, "bad_state", 1);
	set_lock(&s->locks[5], ELIDE_SEG_KIND_MUTEX, 0, 99, 0x1300, "bad_reason", 1);
	set_lock(&s->locks[6], ELIDE_SEG_KIND_MUTEX, 0, 0, 0x1400, "bad_policy", 1);
	s->locks[6].policy = 0xffffffffu;
	set_lock(&s->locks[7], ELIDE_SEG_KIND_MUTEX, 0, 0, 0x1500, "", 1);
	memset(s->locks[7].name, 'n', sizeof(s->locks[7].name));      /* no NUL */
	set_lock(&s->locks[8], ELIDE_SEG_KIND_OVERFLOW, 0, 0, 0x1600, "second_overflow", 1);
	set_lock(&s->locks[9], ELIDE_SEG_KIND_RWLOCK_READ, 1, 1, 0x1700, "good_b", 2);
	set_lock(&s->locks[11], ELIDE_SEG_KIND_RWLOCK_WRITE, 3, 6, 0x1800, "good_c", 3);
	set_lock(&s->locks[12], 0xffffffffu, 0xffffffffu, 0xffffffffu, 0, "", 0);
	set_lock(&s->locks[13], ELIDE_SEG_KIND_MUTEX, 2, 9, 0x1900, "good_d", 4);
	write_out("regressions", "fuzz-segment", "partly-invalid.seg", s, size);
	/* The same with the overflow entry itself broken. */
	s->locks[1].kind = ELIDE_SEG_KIND_MUTEX;
	write_out("regressions", "fuzz-segment", "bad-overflow-entry.seg", s, size);
	free(s);

	/* Header lies. */
	s = segment_new(4, &size);
	s->h.lock_high_water = 5;
	write_out("regressions", "fuzz-segment", "high-water-above-capacity.seg", s, size);
	s->h.lock_high_water = 4;
	s->h.lock_capacity = ELIDE_SEG_MAX_LOCKS;
	s->h.total_size = s->h.locks_offset + (uint64_t)ELIDE_SEG_MAX_LOCKS * sizeof(struct elide_seg_lock);
	write_out("regressions", "fuzz-segment", "capacity-beyond-file.seg", s, size);
	s->h.lock_capacity = 4;
	s->h.total_size = size;
	memset(s->h.exe, 'x', sizeof(s->h.exe));
	write_out("regressions", "fuzz-segment", "exe-unterminated.seg", s, size);
	snprintf(s->h.exe, sizeof(s->h.exe), "/opt/fuzz/bin/app");
	s->h.lock_entry_size = 128;
	write_out("regressions", "fuzz-segment", "entry-size-lie.seg", s, size);
	free(s);
	/* Truncated in the middle of an entry. */
	s = segment_new(4, &size);
	write_out("regressions", "fuzz-segment", "truncated.seg", s, size - 100);
	free(s);
}

/* ----------------------------------------------------------------- ELF files */

struct buf {
	uint8_t *p;
	size_t n, cap;
};

static size_t buf_add(struct buf *b, const void *data, size_t size, size_t align)
{
	size_t at = (b->n + align - 1) / align * align;

	if (at + size > b->cap) {
		b->cap = (at + size) * 2 + 4096;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			exit(1);
	}
	memset(b->p + b->n, 0, at - b->n);
	if (data)
		memcpy(b->p + at, data, size);
	else
		memset(b->p + at, 0, size);
	b->n = at + size;
	return at;
}

struct elf_sym_spec {
	const char *name;
	uint64_t value, size;
	unsigned type, bind;
	uint16_t shndx;
};

struct elf_spec {
	uint32_t symtab_type;     /* SHT_SYMTAB, SHT_DYNSYM or SHT_NULL (no table) */
	bool build_id;
	bool no_sections;         /* e_shoff = 0 */
	uint64_t entry;
	size_t nsyms;
	struct elf_sym_spec (*sym)(size_t i, void *ctx);
	void *ctx;
	const char **strings;     /* strings to put in .strtab; symbols name them by index */
	size_t nstrings;
};

/* One PT_LOAD covering the file (R+X) at vaddr 0 with a .bss beyond, .text
 * at 0x1000, .data at 0x2000 (in the memory image), then the tables. */
static void make_elf(const char *set, const char *name, const struct elf_spec *spec)
{
	struct buf b = { 0 };
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph = { 0 };
	Elf64_Shdr sh[8];
	size_t nsh = 0, strtab_at = 0, strtab_size = 0, symtab_at = 0, note_at = 0, note_size = 0;
	size_t shstr_at, sh_at, *str_off = NULL;
	static const char shstr[] = "\0.text\0.symtab\0.strtab\0.note.gnu.build-id\0.shstrtab\0.dynsym\0.dynstr";

	memset(sh, 0, sizeof(sh));
	buf_add(&b, NULL, sizeof(eh), 8);
	buf_add(&b, NULL, sizeof(ph), 8);
	buf_add(&b, NULL, 0x40, 16); /* .text bytes */

	if (spec->symtab_type != SHT_NULL) {
		struct buf strtab = { 0 };
		Elf64_Sym null = { 0 };

		str_off = calloc(spec->nstrings + 1, sizeof(*str_off));
		buf_add(&strtab, "", 1, 1);
		for (size_t i = 0; i < spec->nstrings; i++)
			str_off[i] = buf_add(&strtab, spec->strings[i], strlen(spec->strings[i]) + 1, 1);
		strtab_at = buf_add(&b, strtab.p, strtab.n, 1);
		strtab_size = strtab.n;
		free(strtab.p);
		symtab_at = buf_add(&b, &null, sizeof(null), 8);
		for (size_t i = 0; i < spec->nsyms; i++) {
			struct elf_sym_spec s = spec->sym(i, spec->ctx);
			Elf64_Sym es = {
				.st_name = (uint32_t)str_off[(size_t)(uintptr_t)s.name],
				.st_info = ELF64_ST_INFO(s.bind, s.type),
				.st_shndx = s.shndx ? s.shndx : 1,
				.st_value = s.value,
				.st_size = s.size,
			};

			buf_add(&b, &es, sizeof(es), 1);
		}
	}
	if (spec->build_id) {
		struct {
			Elf64_Nhdr nh;
			char name[4];
			uint8_t desc[20];
		} note = { { 4, 20, NT_GNU_BUILD_ID }, "GNU", { 0 } };

		/* A fixed id, derived from the file's name. */
		for (size_t i = 0; i < sizeof(note.desc); i++)
			note.desc[i] = (uint8_t)(0x5a ^ (i * 37) ^ (uint8_t)name[i % strlen(name)]);
		note_size = sizeof(note);
		note_at = buf_add(&b, &note, sizeof(note), 4);
	}
	shstr_at = buf_add(&b, shstr, sizeof(shstr), 1);

	/* Sections: [0] NULL, [1] .text, then the tables, .shstrtab last. */
	nsh = 1;
	sh[nsh++] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
				  .sh_addr = 0x1000, .sh_offset = sizeof(eh) + sizeof(ph), .sh_size = 0x40,
				  .sh_addralign = 16 };
	if (spec->symtab_type != SHT_NULL) {
		bool dyn = spec->symtab_type == SHT_DYNSYM;
		size_t strndx = nsh + 1;

		sh[nsh++] = (Elf64_Shdr){ .sh_name = dyn ? 52 : 7, .sh_type = spec->symtab_type,
					  .sh_offset = symtab_at, .sh_size = (spec->nsyms + 1) * sizeof(Elf64_Sym),
					  .sh_link = (uint32_t)strndx, .sh_info = 1, .sh_addralign = 8,
					  .sh_entsize = sizeof(Elf64_Sym) };
		sh[nsh++] = (Elf64_Shdr){ .sh_name = dyn ? 60 : 15, .sh_type = SHT_STRTAB, .sh_offset = strtab_at,
					  .sh_size = strtab_size, .sh_addralign = 1 };
	}
	if (spec->build_id)
		sh[nsh++] = (Elf64_Shdr){ .sh_name = 23, .sh_type = SHT_NOTE, .sh_flags = SHF_ALLOC,
					  .sh_offset = note_at, .sh_size = note_size, .sh_addralign = 4 };
	sh[nsh++] = (Elf64_Shdr){ .sh_name = 42, .sh_type = SHT_STRTAB, .sh_offset = shstr_at,
				  .sh_size = sizeof(shstr), .sh_addralign = 1 };
	sh_at = buf_add(&b, sh, nsh * sizeof(sh[0]), 8);

	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_entry = spec->entry;
	eh.e_phoff = sizeof(eh);
	eh.e_shoff = spec->no_sections ? 0 : sh_at;
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = spec->no_sections ? 0 : (uint16_t)nsh;
	eh.e_shstrndx = spec->no_sections ? 0 : (uint16_t)(nsh - 1);
	ph.p_type = PT_LOAD;
	ph.p_flags = PF_R | PF_X;
	ph.p_offset = 0;
	ph.p_vaddr = 0;
	ph.p_filesz = b.n;
	ph.p_memsz = 0x3000 > b.n ? 0x3000 : b.n;
	ph.p_align = 0x1000;
	memcpy(b.p, &eh, sizeof(eh));
	memcpy(b.p + sizeof(eh), &ph, sizeof(ph));

	write_out(set, "fuzz-elfsym", name, b.p, b.n);
	free(b.p);
	free(str_off);
}

/* Symbols name strings by index (cast through the name pointer). */
#define STR(i) ((const char *)(uintptr_t)(i))

static const char *small_strings[] = { "cache_lock", "worker_loop", "asm_entry", "_IO_alias", "stats_lock" };

static struct elf_sym_spec small_sym(size_t i, void *ctx)
{
	static const struct elf_sym_spec syms[] = {
		{ STR(0), 0x2000, 40, STT_OBJECT, STB_LOCAL, 0 },
		{ STR(1), 0x1000, 0x20, STT_FUNC, STB_GLOBAL, 0 },
		{ STR(2), 0x1020, 0, STT_FUNC, STB_GLOBAL, 0 },
		{ STR(3), 0x1000, 0x20, STT_FUNC, STB_WEAK, 0 },
		{ STR(4), 0x2040, 8, STT_OBJECT, STB_GLOBAL, 0 },
	};

	(void)ctx;
	return syms[i];
}

/* Thousands of symbols at one address, with long names that differ only at
 * their ends: the sort, the de-duplication and the alias choice are all
 * worst cases. */
#define MANY_SYMS 5000
#define LONG_NAMES 4
static const char *long_names[LONG_NAMES];

static struct elf_sym_spec many_sym(size_t i, void *ctx)
{
	static const unsigned binds[] = { STB_GLOBAL, STB_WEAK, STB_LOCAL, STB_GNU_UNIQUE };

	(void)ctx;
	return (struct elf_sym_spec){ STR(i % LONG_NAMES), 0x1000, i % 3 == 0 ? 0 : 16 + i % 2,
				      i % 2 ? STT_FUNC : STT_OBJECT, binds[(i / 2) % 4], 0 };
}

static void make_elfs(void)
{
	struct elf_spec spec = {
		.symtab_type = SHT_SYMTAB, .build_id = true, .entry = 0x1000, .nsyms = 5, .sym = small_sym,
		.strings = small_strings, .nstrings = 5,
	};
	char *names[LONG_NAMES];

	make_elf("corpus", "small-symtab.so", &spec);
	spec.symtab_type = SHT_DYNSYM;
	spec.build_id = false;
	make_elf("corpus", "small-dynsym.so", &spec);

	for (int i = 0; i < LONG_NAMES; i++) {
		names[i] = malloc(1001);
		if (!names[i])
			exit(1);
		memset(names[i], 'a' + i % 2, 1000);
		names[i][0] = i == 3 ? '_' : 'n';
		names[i][999] = (char)('0' + i);
		names[i][1000] = '\0';
		long_names[i] = names[i];
	}
	spec = (struct elf_spec){ .symtab_type = SHT_SYMTAB, .entry = 0x1000, .nsyms = MANY_SYMS, .sym = many_sym,
				  .strings = long_names, .nstrings = LONG_NAMES };
	make_elf("regressions", "many-aliases.so", &spec);
	for (int i = 0; i < LONG_NAMES; i++)
		free(names[i]);

	/* No symbols at all: no section headers, then an empty symbol table. */
	spec = (struct elf_spec){ .symtab_type = SHT_NULL, .no_sections = true, .entry = 0x1000 };
	make_elf("regressions", "no-sections.so", &spec);
	spec = (struct elf_spec){ .symtab_type = SHT_SYMTAB, .entry = 0x1000, .nsyms = 0, .sym = small_sym };
	make_elf("regressions", "empty-symtab.so", &spec);

	/* Stripped (.dynsym only) with a build-id: the harness installs it as
	 * its own separate debug file, which is again stripped and names
	 * itself. */
	spec = (struct elf_spec){ .symtab_type = SHT_DYNSYM, .build_id = true, .entry = 0x1000, .nsyms = 5,
				  .sym = small_sym, .strings = small_strings, .nstrings = 5 };
	make_elf("regressions", "debug-link-self.so", &spec);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
		return 2;
	}
	outdir = argv[1];
	make_segments();
	make_elfs();
	return 0;
}
