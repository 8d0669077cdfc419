/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ELF symbolizer for addresses of a running process; see elfsym.h.
 *
 * Everything read from a file is untrusted: offsets and sizes are checked
 * against the file size (with overflow-safe comparisons) before any read,
 * every table is size-capped, string tables must end in NUL and every
 * st_name must lie inside its table.  Reads use pread, so a file that
 * shrinks under us yields -EBADMSG instead of SIGBUS.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include "elfsym.h"
#include "macros.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "elfsym reads little-endian ELF files with native loads"
#endif

#define MAX_SYMTABS 8                               /* SHT_SYMTAB + SHT_DYNSYM sections per file */
#define MAX_SHDR_BYTES (UINT64_C(64) << 20)         /* section header table */
#define MAX_STRINGS_BYTES (UINT64_C(256) << 20)     /* all string tables kept for one file */
#define LOOKBACK 64                                 /* symbols scanned backwards for a container */
/* Names are compared on this many bytes at most: results keep 127 of them,
 * and a file of long same-address names must not make the sort quadratic
 * in name length. */
#define NAME_CMP_MAX 128

enum sym_kind { KIND_OBJECT = 0, KIND_FUNC = 1 };

struct seg {
	uint64_t offset, filesz, vaddr, memsz;
	bool exec; /* PF_X */
};

struct sym {
	uint64_t value, size;
	uint32_t name; /* offset into module->strings */
	uint8_t kind;  /* enum sym_kind */
	uint8_t bind;  /* ELF64_ST_BIND */
};

struct elfsym_module {
	char *path;
	const char *base; /* basename, inside path */
	dev_t dev;
	uint64_t inode;   /* from the maps line; 0 = do not check */
	bool deleted;     /* maps said " (deleted)" */
	unsigned shared_refs; /* maps objects using it, when in the shared table */

	bool loaded;      /* load attempted; error says how it went */
	int error;
	char reason[256];

	struct seg *segs;
	size_t n_segs;
	struct sym *syms; /* objects [0, n_objs), then functions */
	size_t n_objs, n_funcs;
	char *strings;
	size_t strings_size;

	/* Stripped files: the GNU build-id locates a separate debug file
	 * (DEBUGDIR/.build-id/xx/yyyy.debug) whose .symtab names what the
	 * stripped file no longer can. */
	bool has_symtab;
	uint8_t build_id[64];
	size_t build_id_len;
	struct elfsym_module *debug;
};

struct mapping {
	uint64_t start, end, offset;
	size_t module;
	bool bss; /* anonymous tail following a mapping of the module */
};

struct elfsym_maps {
	pid_t pid;
	struct mapping *maps;
	size_t n_maps, cap_maps;
	struct elfsym_module **modules;
	size_t n_modules, cap_modules;
};

static __thread char last_error[256];

/* Modules of files that many processes map (libc...), parsed once for all
 * maps objects while elfsym_share_modules() is on; keyed by path, device
 * and inode. */
static struct {
	bool enabled;
	struct elfsym_module **modules;
	size_t n, cap;
} shared;

void elfsym_share_modules(bool on)
{
	shared.enabled = on;
}

/* By identity, never by path: hard links of one file are one module. */
static struct elfsym_module *shared_find(dev_t dev, uint64_t inode)
{
	for (size_t i = 0; i < shared.n; i++) {
		struct elfsym_module *m = shared.modules[i];

		if (m->dev == dev && m->inode == inode)
			return m;
	}
	return NULL;
}

/* Out of memory only means this module is not shared. */
static void shared_add(struct elfsym_module *m)
{
	if (shared.n == shared.cap) {
		size_t ncap = shared.cap ? shared.cap * 2 : 16;
		struct elfsym_module **n = reallocarray(shared.modules, ncap, sizeof(*n));

		if (!n)
			return;
		shared.modules = n;
		shared.cap = ncap;
	}
	shared.modules[shared.n++] = m;
	m->shared_refs = 1;
}

/* A maps object is done with m. */
static void module_release(struct elfsym_module *m)
{
	if (!m || (m->shared_refs && --m->shared_refs))
		return;
	for (size_t i = 0; i < shared.n; i++)
		if (shared.modules[i] == m) {
			shared.modules[i] = shared.modules[--shared.n];
			break;
		}
	if (shared.n == 0) {
		free(shared.modules);
		shared.modules = NULL;
		shared.cap = 0;
	}
	elfsym_module_free(m);
}

const char *elfsym_last_error(void)
{
	return last_error;
}

/* Records a reason and returns -err.  errno is set to err first so that the
 * format may use %m. */
static int fail(int err, const char *fmt, ...) _printf_(2, 3);
static int fail(int err, const char *fmt, ...)
{
	va_list ap;

	if (err <= 0)
		err = EIO;
	errno = err;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return -err;
}

static void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

static bool copy_trunc(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);
	bool truncated = n >= size;

	if (truncated)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	return truncated;
}

/* [off, off + len) lies within a file of file_size bytes, without overflow. */
static bool range_ok(uint64_t off, uint64_t len, uint64_t file_size)
{
	return off <= file_size && len <= file_size - off;
}

static int pread_full(int fd, void *buf, size_t size, uint64_t off)
{
	uint8_t *p = buf;

	while (size > 0) {
		ssize_t n = pread(fd, p, size, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail(errno, "read at offset %#" PRIx64 ": %m", off);
		}
		if (n == 0)
			return fail(EBADMSG, "file ended at offset %#" PRIx64 " while reading (truncated?)", off);
		p += n;
		size -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* ---------------------------------------------------------------- modules */

static struct elfsym_module *module_new(const char *path)
{
	struct elfsym_module *m = calloc(1, sizeof(*m));
	const char *slash;

	if (!m)
		return NULL;
	m->path = strdup(path);
	if (!m->path) {
		free(m);
		return NULL;
	}
	slash = strrchr(m->path, '/');
	m->base = slash ? slash + 1 : m->path;
	return m;
}

void elfsym_module_free(struct elfsym_module *m)
{
	if (!m)
		return;
	elfsym_module_free(m->debug);
	free(m->path);
	free(m->segs);
	free(m->syms);
	free(m->strings);
	free(m);
}

static void module_freep(struct elfsym_module **m)
{
	elfsym_module_free(*m);
}

size_t elfsym_module_symbol_count(const struct elfsym_module *m)
{
	return m ? m->n_objs + m->n_funcs : 0;
}

static int parse_phdrs(struct elfsym_module *m, int fd, const Elf64_Ehdr *eh, uint64_t fsize)
{
	_cleanup_free_ Elf64_Phdr *ph = NULL;
	uint64_t len;
	size_t n = 0;
	int r;

	if (eh->e_phnum == PN_XNUM)
		return fail(EBADMSG, "extended program header count (PN_XNUM) is not supported");
	if (eh->e_phnum == 0)
		return fail(EBADMSG, "no program headers");
	if (eh->e_phentsize != sizeof(Elf64_Phdr))
		return fail(EBADMSG, "e_phentsize is %u, expected %zu", eh->e_phentsize, sizeof(Elf64_Phdr));
	len = (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr);
	if (!range_ok(eh->e_phoff, len, fsize))
		return fail(EBADMSG, "program headers (offset %#" PRIx64 ", %u entries) extend past end of file (%" PRIu64 " bytes)",
			    eh->e_phoff, eh->e_phnum, fsize);

	ph = malloc(len);
	if (!ph)
		return -ENOMEM;
	r = pread_full(fd, ph, len, eh->e_phoff);
	if (r < 0)
		return r;

	m->segs = calloc(eh->e_phnum, sizeof(*m->segs));
	if (!m->segs)
		return -ENOMEM;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];

		if (p->p_type != PT_LOAD)
			continue;
		if (p->p_filesz > p->p_memsz)
			return fail(EBADMSG, "PT_LOAD %u: p_filesz %#" PRIx64 " > p_memsz %#" PRIx64, i,
				    p->p_filesz, p->p_memsz);
		if (!range_ok(p->p_offset, p->p_filesz, fsize))
			return fail(EBADMSG, "PT_LOAD %u (offset %#" PRIx64 ", size %#" PRIx64 ") extends past end of file",
				    i, p->p_offset, p->p_filesz);
		if (p->p_memsz > UINT64_MAX - p->p_vaddr)
			return fail(EBADMSG, "PT_LOAD %u: p_vaddr + p_memsz overflows", i);
		m->segs[n++] = (struct seg){ .offset = p->p_offset, .filesz = p->p_filesz,
					     .vaddr = p->p_vaddr, .memsz = p->p_memsz,
					     .exec = (p->p_flags & PF_X) != 0 };
	}
	if (n == 0)
		return fail(EBADMSG, "no PT_LOAD segment");
	m->n_segs = n;
	return 0;
}

/* Appends the kept symbols of symbol table section idx (and a copy of its
 * string table) to m.  *cap is the allocated length of m->syms. */
static int load_symtab(struct elfsym_module *m, int fd, const Elf64_Shdr *shdrs, uint64_t shnum,
		       uint64_t idx, size_t *cap)
{
	const Elf64_Shdr *sh = &shdrs[idx];
	const Elf64_Shdr *st;
	_cleanup_free_ Elf64_Sym *syms = NULL;
	size_t nsyms, base;
	char *strings;
	int r;

	if (sh->sh_entsize != sizeof(Elf64_Sym))
		return fail(EBADMSG, "symbol table (section %" PRIu64 "): sh_entsize %" PRIu64 ", expected %zu",
			    idx, sh->sh_entsize, sizeof(Elf64_Sym));
	if (sh->sh_size % sizeof(Elf64_Sym) != 0)
		return fail(EBADMSG, "symbol table (section %" PRIu64 "): size %#" PRIx64 " is not a multiple of %zu",
			    idx, sh->sh_size, sizeof(Elf64_Sym));
	if (sh->sh_size > ELFSYM_MAX_TABLE_SIZE)
		return fail(EFBIG, "symbol table (section %" PRIu64 ") is %" PRIu64 " bytes, over the 64 MiB cap",
			    idx, sh->sh_size);
	if (sh->sh_link == SHN_UNDEF || sh->sh_link >= shnum)
		return fail(EBADMSG, "symbol table (section %" PRIu64 "): sh_link %u out of range (%" PRIu64 " sections)",
			    idx, sh->sh_link, shnum);
	st = &shdrs[sh->sh_link];
	if (st->sh_type != SHT_STRTAB)
		return fail(EBADMSG, "symbol table (section %" PRIu64 "): sh_link %u is not a string table (type %u)",
			    idx, sh->sh_link, st->sh_type);
	if (st->sh_size == 0)
		return fail(EBADMSG, "string table (section %u) is empty", sh->sh_link);
	if (st->sh_size > ELFSYM_MAX_TABLE_SIZE || st->sh_size > MAX_STRINGS_BYTES - m->strings_size)
		return fail(EFBIG, "string table (section %u) is %" PRIu64 " bytes, over the cap",
			    sh->sh_link, st->sh_size);

	base = m->strings_size;
	strings = realloc(m->strings, base + st->sh_size);
	if (!strings)
		return -ENOMEM;
	m->strings = strings;
	r = pread_full(fd, strings + base, st->sh_size, st->sh_offset);
	if (r < 0)
		return r;
	if (strings[base + st->sh_size - 1] != '\0')
		return fail(EBADMSG, "string table (section %u) is not NUL-terminated", sh->sh_link);
	m->strings_size = base + st->sh_size;

	nsyms = sh->sh_size / sizeof(Elf64_Sym);
	if (nsyms == 0)
		return 0;
	syms = malloc(sh->sh_size);
	if (!syms)
		return -ENOMEM;
	r = pread_full(fd, syms, sh->sh_size, sh->sh_offset);
	if (r < 0)
		return r;

	if (nsyms > *cap - (m->n_objs + m->n_funcs)) {
		size_t ncap = m->n_objs + m->n_funcs + nsyms;
		struct sym *n = reallocarray(m->syms, ncap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		m->syms = n;
		*cap = ncap;
	}

	for (size_t i = 1; i < nsyms; i++) {
		const Elf64_Sym *s = &syms[i];
		unsigned type = ELF64_ST_TYPE(s->st_info);
		struct sym *d;

		if (s->st_name >= st->sh_size)
			return fail(EBADMSG, "symbol %zu of section %" PRIu64 ": st_name %u outside its string table (%" PRIu64 " bytes)",
				    i, idx, s->st_name, st->sh_size);
		if (type != STT_OBJECT && type != STT_COMMON && type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		if (s->st_shndx == SHN_UNDEF || s->st_shndx == SHN_ABS || s->st_shndx == SHN_COMMON)
			continue;
		if (strings[base + s->st_name] == '\0')
			continue;
		if (s->st_size > UINT64_MAX - s->st_value)
			continue; /* nonsense range; cannot contain anything sensibly */

		d = &m->syms[m->n_objs + m->n_funcs];
		*d = (struct sym){
			.value = s->st_value,
			.size = s->st_size,
			.name = (uint32_t)(base + s->st_name),
			.kind = (type == STT_FUNC || type == STT_GNU_IFUNC) ? KIND_FUNC : KIND_OBJECT,
			.bind = (uint8_t)ELF64_ST_BIND(s->st_info),
		};
		/* Counted as objects for now; split after sorting. */
		m->n_objs++;
	}
	return 0;
}

static int bind_rank(unsigned bind)
{
	switch (bind) {
	case STB_GLOBAL:
		return 0;
	case STB_WEAK:
		return 1;
	case STB_LOCAL:
		return 2;
	default:
		return 3;
	}
}

/* Among aliases, prefer global over weak over local, then names without a
 * leading underscore ("printf" over "_IO_printf"), then shorter names. */
static int sym_pref_cmp(const struct sym *a, const struct sym *b, const char *strings)
{
	const char *na = strings + a->name, *nb = strings + b->name;
	size_t la, lb;

	if (bind_rank(a->bind) != bind_rank(b->bind))
		return bind_rank(a->bind) - bind_rank(b->bind);
	if ((na[0] == '_') != (nb[0] == '_'))
		return na[0] == '_' ? 1 : -1;
	la = strnlen(na, NAME_CMP_MAX);
	lb = strnlen(nb, NAME_CMP_MAX);
	if (la != lb)
		return la < lb ? -1 : 1;
	return strncmp(na, nb, NAME_CMP_MAX);
}

static int sym_sort_cmp(const void *pa, const void *pb, void *strings)
{
	const struct sym *a = pa, *b = pb;

	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (a->value != b->value)
		return a->value < b->value ? -1 : 1;
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	return sym_pref_cmp(a, b, strings);
}

/* Sorts by (kind, value, size, preference), drops duplicates of the same
 * kind/value/size (.symtab repeats .dynsym) keeping the preferred name, and
 * splits the array into objects and functions. */
static void sort_syms(struct elfsym_module *m)
{
	size_t n = m->n_objs + m->n_funcs, out = 0, objs = 0;

	if (n == 0)
		return;
	qsort_r(m->syms, n, sizeof(*m->syms), sym_sort_cmp, m->strings);
	for (size_t i = 0; i < n; i++) {
		const struct sym *s = &m->syms[i];

		if (out > 0) {
			const struct sym *p = &m->syms[out - 1];

			if (p->kind == s->kind && p->value == s->value && p->size == s->size)
				continue;
		}
		m->syms[out++] = *s;
		if (s->kind == KIND_OBJECT)
			objs++;
	}
	m->n_objs = objs;
	m->n_funcs = out - objs;
}

/* The NT_GNU_BUILD_ID note of a SHT_NOTE section (already range-checked),
 * if it has one.  Anything malformed is simply no build-id. */
static void read_build_id(struct elfsym_module *m, int fd, const Elf64_Shdr *sec)
{
	uint8_t buf[1024];
	size_t len = sec->sh_size < sizeof(buf) ? (size_t)sec->sh_size : sizeof(buf);
	size_t off = 0;

	if (len < sizeof(Elf64_Nhdr) || pread_full(fd, buf, len, sec->sh_offset) < 0)
		return;
	while (off + sizeof(Elf64_Nhdr) <= len) {
		Elf64_Nhdr nh;
		size_t name_off, desc_off;

		memcpy(&nh, buf + off, sizeof(nh));
		name_off = off + sizeof(nh);
		desc_off = name_off + ((nh.n_namesz + 3u) & ~3u);
		if (nh.n_namesz > len || nh.n_descsz > len || desc_off > len || nh.n_descsz > len - desc_off)
			return;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(buf + name_off, "GNU", 4) &&
		    nh.n_descsz >= 2 && nh.n_descsz <= sizeof(m->build_id)) {
			memcpy(m->build_id, buf + desc_off, nh.n_descsz);
			m->build_id_len = nh.n_descsz;
			return;
		}
		off = desc_off + ((nh.n_descsz + 3u) & ~3u);
	}
}

static int parse_sections(struct elfsym_module *m, int fd, const Elf64_Ehdr *eh, uint64_t fsize)
{
	_cleanup_free_ Elf64_Shdr *sh = NULL;
	uint64_t shnum = eh->e_shnum, len;
	size_t cap = 0, ntabs = 0;
	int r;

	if (eh->e_shoff == 0) {
		if (eh->e_shnum != 0)
			return fail(EBADMSG, "e_shnum is %u but e_shoff is 0", eh->e_shnum);
		return 0; /* no section headers: no symbols */
	}
	if (eh->e_shentsize != sizeof(Elf64_Shdr))
		return fail(EBADMSG, "e_shentsize is %u, expected %zu", eh->e_shentsize, sizeof(Elf64_Shdr));
	if (shnum == 0) {
		/* Extended numbering: the count is section 0's sh_size. */
		Elf64_Shdr s0;

		if (!range_ok(eh->e_shoff, sizeof(s0), fsize))
			return fail(EBADMSG, "section header table (offset %#" PRIx64 ") extends past end of file (%" PRIu64 " bytes)",
				    eh->e_shoff, fsize);
		r = pread_full(fd, &s0, sizeof(s0), eh->e_shoff);
		if (r < 0)
			return r;
		shnum = s0.sh_size;
		if (shnum == 0)
			return 0;
	}
	if (shnum > MAX_SHDR_BYTES / sizeof(Elf64_Shdr))
		return fail(EBADMSG, "section count %" PRIu64 " is implausibly large", shnum);
	len = shnum * sizeof(Elf64_Shdr);
	if (!range_ok(eh->e_shoff, len, fsize))
		return fail(EBADMSG, "section header table (offset %#" PRIx64 ", %" PRIu64 " entries) extends past end of file (%" PRIu64 " bytes)",
			    eh->e_shoff, shnum, fsize);

	sh = malloc(len);
	if (!sh)
		return -ENOMEM;
	r = pread_full(fd, sh, len, eh->e_shoff);
	if (r < 0)
		return r;

	for (uint64_t i = 0; i < shnum; i++) {
		if (sh[i].sh_type == SHT_NULL || sh[i].sh_type == SHT_NOBITS)
			continue;
		if (!range_ok(sh[i].sh_offset, sh[i].sh_size, fsize))
			return fail(EBADMSG, "section %" PRIu64 " (offset %#" PRIx64 ", size %#" PRIx64 ") extends past end of file (%" PRIu64 " bytes)",
				    i, sh[i].sh_offset, sh[i].sh_size, fsize);
	}

	for (uint64_t i = 0; i < shnum; i++) {
		if (sh[i].sh_type == SHT_NOTE && !m->build_id_len)
			read_build_id(m, fd, &sh[i]);
		if (sh[i].sh_type == SHT_SYMTAB)
			m->has_symtab = true;
		if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM)
			continue;
		if (++ntabs > MAX_SYMTABS)
			return fail(EBADMSG, "more than %d symbol tables", MAX_SYMTABS);
		r = load_symtab(m, fd, sh, shnum, i, &cap);
		if (r < 0)
			return r;
	}
	sort_syms(m);
	return 0;
}

static int parse_elf(struct elfsym_module *m, int fd)
{
	Elf64_Ehdr eh;
	struct stat st;
	uint64_t fsize;
	int r;

	if (fstat(fd, &st) < 0)
		return fail(errno, "%s: fstat: %m", m->path);
	if (!S_ISREG(st.st_mode))
		return fail(ENOEXEC, "%s: not a regular file", m->path);
	fsize = (uint64_t)st.st_size;

	if (fsize < SELFMAG)
		return fail(ENOEXEC, "%s: not an ELF file (%" PRIu64 " bytes)", m->path, fsize);
	r = pread_full(fd, eh.e_ident, SELFMAG, 0);
	if (r < 0)
		return r;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
		return fail(ENOEXEC, "%s: not an ELF file", m->path);
	if (fsize < sizeof(eh))
		return fail(EBADMSG, "%s: truncated ELF header (%" PRIu64 " bytes)", m->path, fsize);
	r = pread_full(fd, &eh, sizeof(eh), 0);
	if (r < 0)
		return r;
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return fail(ENOEXEC, "%s: not a 64-bit little-endian ELF file", m->path);
	if (eh.e_ident[EI_VERSION] != EV_CURRENT || eh.e_version != EV_CURRENT)
		return fail(EBADMSG, "%s: bad ELF version", m->path);
	if (eh.e_machine != EM_X86_64)
		return fail(ENOEXEC, "%s: ELF machine %u is not x86-64", m->path, eh.e_machine);
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
		return fail(ENOEXEC, "%s: ELF type %u is not an executable or shared object", m->path, eh.e_type);
	if (eh.e_ehsize != sizeof(eh))
		return fail(EBADMSG, "%s: e_ehsize is %u, expected %zu", m->path, eh.e_ehsize, sizeof(eh));

	r = parse_phdrs(m, fd, &eh, fsize);
	if (r < 0)
		return r;
	return parse_sections(m, fd, &eh, fsize);
}

/* O_PATH descriptor of path.  nofollow: no symbolic link anywhere in the
 * path (openat2's RESOLVE_NO_SYMLINKS; before Linux 5.6, at least not in
 * the last component), so a user cannot swap a link in under a mapped
 * path to point elsewhere. */
static int open_path(const char *path, bool nofollow)
{
#ifdef SYS_openat2
	if (nofollow) {
		struct open_how how = { .flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
					.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
		long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));

		if (fd >= 0 || errno != ENOSYS)
			return (int)fd;
	}
#endif
	return open(path, O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
}

/* Opens path as a regular file for reading without opening anything else
 * first: an O_PATH descriptor is checked (regular file, expected device and
 * inode when want_inode != 0) and only then reopened through
 * /proc/self/fd, so a FIFO or device swapped in at path is never opened for
 * real. */
static int open_checked(const char *path, bool nofollow, dev_t want_dev, uint64_t want_inode, int *ret_fd)
{
	_cleanup_close_ int pfd = -1;
	char fdpath[64];
	struct stat st;
	int fd;

	pfd = open_path(path, nofollow);
	if (pfd < 0)
		return fail(errno, "open %s: %m", path);
	if (fstat(pfd, &st) < 0)
		return fail(errno, "fstat %s: %m", path);
	if (!S_ISREG(st.st_mode))
		return fail(ENOEXEC, "%s: not a regular file", path);
	if (want_inode != 0 && ((uint64_t)st.st_ino != want_inode || st.st_dev != want_dev))
		return fail(ESTALE, "%s: device %u:%u inode %" PRIu64 " is not the mapped %u:%u inode %" PRIu64 " (file replaced?)",
			    path, major(st.st_dev), minor(st.st_dev), (uint64_t)st.st_ino, major(want_dev),
			    minor(want_dev), want_inode);
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", pfd);
	fd = open(fdpath, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return fail(errno, "reopen %s: %m", path);
	*ret_fd = fd;
	return 0;
}

static char debug_dir[256] = "/usr/lib/debug";

void elfsym_set_debug_dir(const char *dir)
{
	copy_trunc(debug_dir, sizeof(debug_dir), dir && *dir ? dir : "/usr/lib/debug");
}

static int module_load_fd(struct elfsym_module *m, int fd, bool is_debug);

/* A stripped module's separate debug file, by build-id; absent is fine.
 * One level only: a debug file never has its own looked up (one that names
 * itself would recurse), and it must have a .symtab and the same build-id,
 * or it is not used. */
static void load_debug_file(struct elfsym_module *m)
{
	_cleanup_(module_freep) struct elfsym_module *dbg = NULL;
	_cleanup_close_ int fd = -1;
	char path[sizeof(debug_dir) + 2 * sizeof(m->build_id) + 32];
	char hex[2 * sizeof(m->build_id) + 1];
	int n;

	if (m->has_symtab || m->build_id_len == 0 || m->debug)
		return;
	for (size_t i = 0; i < m->build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", m->build_id[i]);
	n = snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", debug_dir, hex, hex + 2);
	if (n < 0 || (size_t)n >= sizeof(path))
		return;
	if (access(path, R_OK) < 0)
		return;
	dbg = module_new(path);
	if (!dbg || open_checked(path, false, 0, 0, &fd) < 0 || module_load_fd(dbg, fd, true) < 0)
		return;
	if (!dbg->has_symtab || dbg->build_id_len != m->build_id_len ||
	    memcmp(dbg->build_id, m->build_id, m->build_id_len) != 0)
		return;
	dbg->loaded = true;
	m->debug = dbg;
	dbg = NULL;
}

static int module_load_fd(struct elfsym_module *m, int fd, bool is_debug)
{
	int r = parse_elf(m, fd);

	if (r == 0 && !is_debug)
		load_debug_file(m);

	if (r < 0) {
		/* Keep the module consistent (no symbols) after a failure. */
		free(m->segs);
		free(m->syms);
		free(m->strings);
		m->segs = NULL;
		m->syms = NULL;
		m->strings = NULL;
		m->n_segs = m->n_objs = m->n_funcs = m->strings_size = 0;
	}
	return r;
}

int elfsym_module_load_path(const char *path, struct elfsym_module **ret)
{
	_cleanup_(module_freep) struct elfsym_module *m = NULL;
	_cleanup_close_ int fd = -1;
	int r;

	if (!path || !ret)
		return -EINVAL;
	m = module_new(path);
	if (!m)
		return -ENOMEM;
	r = open_checked(path, false, 0, 0, &fd);
	if (r < 0)
		return r;
	r = module_load_fd(m, fd, false);
	if (r < 0)
		return r;
	m->loaded = true;
	*ret = m;
	m = NULL;
	return 0;
}

/* File offset -> link-time virtual address.  A PT_LOAD whose file bytes
 * contain the offset wins; otherwise one whose memory image (p_memsz, the
 * .bss beyond p_filesz) does. */
static int module_vaddr(const struct elfsym_module *m, uint64_t off, uint64_t *vaddr)
{
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < m->n_segs; i++) {
			const struct seg *s = &m->segs[i];
			uint64_t lim = pass == 0 ? s->filesz : s->memsz;

			if (off >= s->offset && off - s->offset < lim) {
				*vaddr = off - s->offset + s->vaddr;
				return 0;
			}
		}
	return fail(ENOENT, "%s: file offset %#" PRIx64 " is in no PT_LOAD segment", m->base, off);
}

static bool sym_contains(const struct sym *s, uint64_t vaddr)
{
	return s->value <= vaddr && vaddr - s->value < s->size;
}

/* Index of the first symbol of the same value as syms[i] that satisfies ok,
 * preferring the best alias; SIZE_MAX when none does. */
static size_t best_in_group(const struct sym *syms, size_t i, uint64_t vaddr, bool sizeless,
			    const char *strings)
{
	size_t best = SIZE_MAX;
	uint64_t value = syms[i].value;

	for (size_t j = i + 1; j-- > 0 && syms[j].value == value;) {
		bool ok = sizeless ? syms[j].size == 0 : sym_contains(&syms[j], vaddr);

		if (ok && (best == SIZE_MAX || sym_pref_cmp(&syms[j], &syms[best], strings) <= 0))
			best = j;
	}
	return best;
}

/* The executable PT_LOAD segment whose memory image holds vaddr, if any. */
static const struct seg *exec_seg_of(const struct elfsym_module *m, uint64_t vaddr)
{
	for (size_t i = 0; i < m->n_segs; i++) {
		const struct seg *s = &m->segs[i];

		if (s->exec && vaddr >= s->vaddr && vaddr - s->vaddr < s->memsz)
			return s;
	}
	return NULL;
}

static int lookup_syms_in(const struct elfsym_module *m, uint64_t vaddr, bool want_object,
			  struct elfsym_result *res);

/* The module's own symbols, then its debug file's (same link-time addresses). */
static int lookup_syms(const struct elfsym_module *m, uint64_t vaddr, bool want_object,
		       struct elfsym_result *res)
{
	int r = lookup_syms_in(m, vaddr, want_object, res);

	if (r == -ENOENT && m->debug)
		r = lookup_syms_in(m->debug, vaddr, want_object, res);
	return r;
}

static int lookup_syms_in(const struct elfsym_module *m, uint64_t vaddr, bool want_object,
			  struct elfsym_result *res)
{
	size_t n = want_object ? m->n_objs : m->n_funcs;
	const struct sym *syms;
	size_t lo = 0, hi = n, found = SIZE_MAX;
	const struct sym *s;

	/* No symbols: m->syms is NULL, and NULL + 0 is undefined. */
	if (n == 0)
		return fail(ENOENT, "%s: no %s symbols", m->base, want_object ? "data" : "code");
	syms = want_object ? m->syms : m->syms + m->n_objs;
	/* lo = first symbol with value > vaddr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (syms[mid].value <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return fail(ENOENT, "%s: no %s symbol at or below %#" PRIx64, m->base,
			    want_object ? "data" : "code", vaddr);

	for (size_t i = lo, steps = 0; i-- > 0 && steps < LOOKBACK; steps++) {
		if (sym_contains(&syms[i], vaddr)) {
			found = best_in_group(syms, i, vaddr, false, m->strings);
			break;
		}
	}
	if (found == SIZE_MAX && !want_object) {
		/* Size-less function symbols (hand-written assembly): the
		 * nearest preceding one, if both lie in one executable segment. */
		const struct seg *seg = exec_seg_of(m, vaddr);

		if (seg && seg == exec_seg_of(m, syms[lo - 1].value))
			found = best_in_group(syms, lo - 1, vaddr, true, m->strings);
	}
	if (found == SIZE_MAX)
		return fail(ENOENT, "%s: no %s symbol contains %#" PRIx64, m->base,
			    want_object ? "data" : "code", vaddr);

	s = &syms[found];
	res->name_truncated = copy_trunc(res->name, sizeof(res->name), m->strings + s->name);
	res->offset = vaddr - s->value;
	res->sym_vaddr = s->value;
	res->sym_size = s->size;
	res->is_object = s->kind == KIND_OBJECT;
	res->vaddr = vaddr;
	return 0;
}

int elfsym_module_lookup(const struct elfsym_module *m, uint64_t vaddr, bool want_object,
			 struct elfsym_result *res)
{
	if (!m || !res)
		return -EINVAL;
	memset(res, 0, sizeof(*res));
	copy_trunc(res->module, sizeof(res->module), m->base);
	res->vaddr = vaddr;
	if (m->error < 0) {
		snprintf(last_error, sizeof(last_error), "%s", m->reason);
		return m->error;
	}
	return lookup_syms(m, vaddr, want_object, res);
}

/* ------------------------------------------------------------------- maps */

void elfsym_maps_free(struct elfsym_maps *maps)
{
	if (!maps)
		return;
	for (size_t i = 0; i < maps->n_modules; i++)
		module_release(maps->modules[i]);
	free(maps->modules);
	free(maps->maps);
	free(maps);
}

static void maps_freep(struct elfsym_maps **maps)
{
	elfsym_maps_free(*maps);
}

size_t elfsym_maps_count(const struct elfsym_maps *maps)
{
	return maps ? maps->n_maps : 0;
}

static int maps_add_mapping(struct elfsym_maps *maps, const struct mapping *mp)
{
	if (maps->n_maps == maps->cap_maps) {
		size_t ncap = maps->cap_maps ? maps->cap_maps * 2 : 64;
		struct mapping *n = reallocarray(maps->maps, ncap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		maps->maps = n;
		maps->cap_maps = ncap;
	}
	maps->maps[maps->n_maps++] = *mp;
	return 0;
}

/* Finds or creates the module for (path, dev, inode); returns its index. */
static int maps_get_module(struct elfsym_maps *maps, const char *path, bool deleted, dev_t dev,
			   uint64_t inode, size_t *ret)
{
	struct elfsym_module *m;

	/* Mappings of one file are usually adjacent: try the last one first.
	 * A file on disk is one module whatever path (hard link) maps it; a
	 * deleted file or one without an inode number goes by path too. */
	for (size_t k = 0; k <= maps->n_modules; k++) {
		size_t i = k == 0 ? maps->n_modules - 1 : k - 1;

		if (maps->n_modules == 0)
			break;
		m = maps->modules[i];
		if (m->dev == dev && m->inode == inode &&
		    ((inode && !deleted && !m->deleted) || strcmp(m->path, path) == 0)) {
			*ret = i;
			return 0;
		}
	}

	if (maps->n_modules == maps->cap_modules) {
		size_t ncap = maps->cap_modules ? maps->cap_modules * 2 : 16;
		struct elfsym_module **n = reallocarray(maps->modules, ncap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		maps->modules = n;
		maps->cap_modules = ncap;
	}
	/* A file on disk that another process maps too: parsed once.  (A
	 * deleted file has no identity worth sharing.) */
	m = shared.enabled && !deleted && inode ? shared_find(dev, inode) : NULL;
	if (m) {
		m->shared_refs++;
		maps->modules[maps->n_modules] = m;
		*ret = maps->n_modules++;
		return 0;
	}
	m = module_new(path);
	if (!m)
		return -ENOMEM;
	m->dev = dev;
	m->inode = inode;
	m->deleted = deleted;
	if (shared.enabled && !deleted && inode)
		shared_add(m);
	maps->modules[maps->n_modules] = m;
	*ret = maps->n_modules++;
	return 0;
}

static int maps_parse_line(struct elfsym_maps *maps, char *line)
{
	static const char deleted_sfx[] = " (deleted)";
	uint64_t start, end, offset, inode;
	unsigned dmaj, dmin;
	char perms[8];
	char *path;
	size_t len;
	bool deleted = false;
	struct mapping mp;
	int pos = 0, r;

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 "%n",
		   &start, &end, perms, &offset, &dmaj, &dmin, &inode, &pos) != 7 || pos <= 0)
		return fail(EBADMSG, "unexpected line in maps: %.80s", line);
	if (end <= start)
		return 0;

	path = line + pos;
	path += strspn(path, " \t");
	len = strcspn(path, "\n");
	path[len] = '\0';

	if (len == 0) {
		/* Anonymous: keep it only as the .bss tail directly after a
		 * mapping of a file (writable, as .bss is). */
		const struct mapping *prev = maps->n_maps ? &maps->maps[maps->n_maps - 1] : NULL;

		if (!prev || prev->bss || prev->end != start || perms[1] != 'w' || inode != 0)
			return 0;
		mp = (struct mapping){ .start = start, .end = end,
				       .offset = prev->offset + (prev->end - prev->start),
				       .module = prev->module, .bss = true };
		return maps_add_mapping(maps, &mp);
	}
	/* Pseudo paths ([heap], [stack], [vdso], anon_inode:..., ...). */
	if (path[0] != '/')
		return 0;
	if (len > sizeof(deleted_sfx) - 1 &&
	    strcmp(path + len - (sizeof(deleted_sfx) - 1), deleted_sfx) == 0) {
		deleted = true;
		path[len - (sizeof(deleted_sfx) - 1)] = '\0';
	}

	mp = (struct mapping){ .start = start, .end = end, .offset = offset };
	r = maps_get_module(maps, path, deleted, makedev(dmaj, dmin), inode, &mp.module);
	if (r < 0)
		return r;
	return maps_add_mapping(maps, &mp);
}

int elfsym_maps_load(struct elfsym_maps **ret, pid_t pid)
{
	_cleanup_(maps_freep) struct elfsym_maps *maps = NULL;
	_cleanup_(fclosep) FILE *f = NULL;
	_cleanup_free_ char *line = NULL;
	size_t linesz = 0;
	char path[64];
	int r;

	if (!ret || pid < 0)
		return -EINVAL;
	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/maps");
	else
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return fail(errno, "open %s: %m", path);
	maps = calloc(1, sizeof(*maps));
	if (!maps)
		return -ENOMEM;
	maps->pid = pid;

	errno = 0;
	while (getline(&line, &linesz, f) >= 0) {
		r = maps_parse_line(maps, line);
		if (r < 0)
			return r;
		errno = 0;
	}
	if (ferror(f))
		return fail(errno ? errno : EIO, "read %s: %m", path);

	*ret = maps;
	maps = NULL;
	return 0;
}

/* Opens the mapped file: for another process (or a deleted file) through
 * /proc/PID/map_files/START-END, which pins the very file that is mapped
 * (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), else by its path, which
 * must still name the mapped inode. */
static int module_open(const struct elfsym_maps *maps, const struct mapping *mp, const struct elfsym_module *m,
		       int *ret_fd)
{
	if (maps->pid != 0 || m->deleted) {
		char mf[96];

		if (maps->pid != 0)
			snprintf(mf, sizeof(mf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
				 (int)maps->pid, mp->start, mp->end);
		else
			snprintf(mf, sizeof(mf), "/proc/self/map_files/%" PRIx64 "-%" PRIx64,
				 mp->start, mp->end);
		/* map_files entries are magic links: followed on purpose. */
		if (open_checked(mf, false, 0, 0, ret_fd) == 0)
			return 0;
	}
	return open_checked(m->path, true, m->dev, m->inode, ret_fd);
}

/* mp: a file-backed mapping of m in maps (a shared module may have been
 * found through another process's maps). */
static int module_ensure_loaded(const struct elfsym_maps *maps, const struct mapping *mp, struct elfsym_module *m)
{
	_cleanup_close_ int fd = -1;
	int r;

	if (!m->loaded) {
		m->loaded = true;
		m->error = 0;
		r = module_open(maps, mp, m, &fd);
		if (r >= 0)
			r = module_load_fd(m, fd, false);
		if (r < 0) {
			if (r == -ENOMEM)
				m->loaded = false; /* transient: try again next time */
			m->error = r;
			snprintf(m->reason, sizeof(m->reason), "%s", last_error);
		}
	}
	if (m->error < 0) {
		snprintf(last_error, sizeof(last_error), "%s", m->reason);
		return m->error;
	}
	return 0;
}

static const struct mapping *maps_find(const struct elfsym_maps *maps, uint64_t addr)
{
	size_t lo = 0, hi = maps->n_maps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct mapping *mp = &maps->maps[mid];

		if (addr < mp->start)
			hi = mid;
		else if (addr >= mp->end)
			lo = mid + 1;
		else
			return mp;
	}
	return NULL;
}

int elfsym_maps_locate(const struct elfsym_maps *maps, uint64_t addr, struct elfsym_location *loc)
{
	const struct mapping *mp;
	const struct elfsym_module *m;

	if (!maps || !loc)
		return -EINVAL;
	memset(loc, 0, sizeof(*loc));
	mp = maps_find(maps, addr);
	if (!mp)
		return -ENOENT;
	m = maps->modules[mp->module];
	loc->dev = m->dev;
	loc->inode = m->inode;
	loc->deleted = m->deleted;
	loc->file_offset = addr - mp->start + mp->offset;
	copy_trunc(loc->module, sizeof(loc->module), m->base);
	return 0;
}

int elfsym_maps_address_of(const struct elfsym_maps *maps, const char *module, uint64_t file_offset, uint64_t *addr)
{
	if (!maps || !module || !addr)
		return -EINVAL;
	for (size_t i = 0; i < maps->n_maps; i++) {
		const struct mapping *mp = &maps->maps[i];
		const struct elfsym_module *m = maps->modules[mp->module];

		if (m->deleted || strncmp(m->base, module, sizeof(((struct elfsym_location *)0)->module) - 1) != 0)
			continue;
		if (file_offset < mp->offset || file_offset - mp->offset >= mp->end - mp->start)
			continue;
		*addr = mp->start + (file_offset - mp->offset);
		return 0;
	}
	return -ENOENT;
}

size_t elfsym_maps_parsed_count(const struct elfsym_maps *maps)
{
	size_t n = 0;

	for (size_t i = 0; maps && i < maps->n_modules; i++)
		n += maps->modules[i]->loaded;
	return n;
}

int elfsym_resolve(struct elfsym_maps *maps, uint64_t addr, bool want_object,
		   struct elfsym_result *res)
{
	const struct mapping *mp;
	struct elfsym_module *m;
	int r;

	if (!maps || !res)
		return -EINVAL;
	memset(res, 0, sizeof(*res));

	mp = maps_find(maps, addr);
	if (!mp)
		return fail(ENOENT, "%#" PRIx64 " is not in a file-backed mapping", addr);
	m = maps->modules[mp->module];
	copy_trunc(res->module, sizeof(res->module), m->base);
	res->file_offset = addr - mp->start + mp->offset;

	/* An anonymous .bss tail directly follows its file's mapping. */
	r = module_ensure_loaded(maps, mp->bss ? mp - 1 : mp, m);
	if (r < 0)
		return r;
	r = module_vaddr(m, res->file_offset, &res->vaddr);
	if (r < 0)
		return r;
	return lookup_syms(m, res->vaddr, want_object, res);
}

int elfsym_format_symbol(const struct elfsym_result *res, char *buf, size_t size)
{
	/* "+0x" and 16 hex digits, and the NUL. */
	const size_t offset_room = 3 + 16 + 1;
	int name_max;

	if (!size)
		return 0;
	if (!res->name[0] || !res->offset)
		return snprintf(buf, size, "%s", res->name);
	name_max = size > offset_room ? (int)(size - offset_room) : 0;
	return snprintf(buf, size, "%.*s+%#" PRIx64, name_max, res->name, res->offset);
}

int elfsym_format(const struct elfsym_result *res, uint64_t addr, char *buf, size_t size)
{
	if (res->name[0] && res->offset)
		return snprintf(buf, size, "%s+%#" PRIx64 " (%s)", res->name, res->offset, res->module);
	if (res->name[0])
		return snprintf(buf, size, "%s (%s)", res->name, res->module);
	if (res->module[0] && res->vaddr)
		return snprintf(buf, size, "%s+%#" PRIx64, res->module, res->vaddr);
	if (res->module[0])
		return snprintf(buf, size, "%s@%#" PRIx64, res->module, res->file_offset);
	return snprintf(buf, size, "%#" PRIx64, addr);
}
