/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elfsym.h"

/* Only in .symtab (local symbols): what dladdr cannot name. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
/* .bss larger than the page the data segment ends in: its tail lives in an
 * anonymous mapping after the file mapping. */
static char big_bss[1 << 20];

pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;

struct registry {
	char name[40];
	long counters[8];
	pthread_mutex_t lock;
};
struct registry registry_table;

static volatile uintptr_t caller_pc;
static volatile int sink;

static __attribute__((noinline)) int record_caller(void)
{
	caller_pc = (uintptr_t)__builtin_return_address(0);
	return sink;
}

static __attribute__((noinline)) int worker_loop(int n)
{
	int acc = 0;

	for (int i = 0; i < n; i++)
		acc += record_caller() * i + 1;
	sink = acc;
	return acc * 3 + 1;
}

static const char *exe_base(void)
{
	static char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	const char *slash;

	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	return slash ? slash + 1 : buf;
}

static struct elfsym_maps *load_maps(pid_t pid)
{
	struct elfsym_maps *maps = NULL;
	int r = elfsym_maps_load(&maps, pid);

	ck_assert_msg(r == 0, "elfsym_maps_load(%d): %d (%s)", (int)pid, r, elfsym_last_error());
	ck_assert_ptr_nonnull(maps);
	ck_assert_uint_gt(elfsym_maps_count(maps), 0);
	return maps;
}

static void expect_sym(struct elfsym_maps *maps, const void *addr, bool object, const char *name,
		       uint64_t offset, const char *module)
{
	struct elfsym_result res;
	int r = elfsym_resolve(maps, (uint64_t)(uintptr_t)addr, object, &res);

	ck_assert_msg(r == 0, "resolve %p (%s): %d (%s)", addr, name, r, elfsym_last_error());
	ck_assert_str_eq(res.name, name);
	ck_assert_uint_eq(res.offset, offset);
	ck_assert_str_eq(res.module, module);
	ck_assert(res.is_object == object);
	ck_assert(!res.name_truncated);
	ck_assert_uint_ge(res.vaddr, res.sym_vaddr);
}

static void check_own_symbols(pid_t pid)
{
	struct elfsym_maps *maps = load_maps(pid);
	const char *me = exe_base();

	expect_sym(maps, &cache_lock, true, "cache_lock", 0, me);
	expect_sym(maps, (const char *)&cache_lock + 8, true, "cache_lock", 8, me);
	expect_sym(maps, &table_lock, true, "table_lock", 0, me);
	expect_sym(maps, &registry_table.lock, true, "registry_table", offsetof(struct registry, lock), me);
	expect_sym(maps, &registry_table.counters[3], true, "registry_table",
		   offsetof(struct registry, counters[3]), me);
	expect_sym(maps, &big_bss[0], true, "big_bss", 0, me);
	expect_sym(maps, &big_bss[sizeof(big_bss) - 1], true, "big_bss", sizeof(big_bss) - 1, me);
	expect_sym(maps, (const void *)(uintptr_t)&worker_loop, false, "worker_loop", 0, me);
	expect_sym(maps, (const char *)(uintptr_t)&worker_loop + 2, false, "worker_loop", 2, me);
	elfsym_maps_free(maps);
}

START_TEST(test_self_objects_and_code)
{
	check_own_symbols(0);
}
END_TEST

START_TEST(test_by_real_pid)
{
	check_own_symbols(getpid());
}
END_TEST

/* Another process: a forked child has the same layout. */
START_TEST(test_other_process)
{
	int pfd[2];
	pid_t child;
	int status;
	char c;

	ck_assert_int_eq(pipe(pfd), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		close(pfd[1]);
		(void)!read(pfd[0], &c, 1);
		_exit(0);
	}
	close(pfd[0]);
	check_own_symbols(child);
	close(pfd[1]);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status));
}
END_TEST

START_TEST(test_call_site)
{
	struct elfsym_maps *maps;
	struct elfsym_result res;
	char buf[256], want[128];

	ck_assert_int_eq(worker_loop(3), 3 * 3 + 1);
	ck_assert_uint_ne(caller_pc, 0);

	maps = load_maps(0);
	ck_assert_int_eq(elfsym_resolve(maps, caller_pc, false, &res), 0);
	ck_assert_str_eq(res.name, "worker_loop");
	ck_assert_uint_gt(res.offset, 0);
	ck_assert_uint_lt(res.offset, res.sym_size);
	ck_assert_uint_eq((uint64_t)caller_pc - res.offset, (uint64_t)(uintptr_t)&worker_loop);

	elfsym_format(&res, caller_pc, buf, sizeof(buf));
	snprintf(want, sizeof(want), "worker_loop+%#llx (%s)", (unsigned long long)res.offset, exe_base());
	ck_assert_str_eq(buf, want);

	/* A code address is not a data symbol. */
	ck_assert_int_eq(elfsym_resolve(maps, caller_pc, true, &res), -ENOENT);
	ck_assert_str_eq(res.name, "");
	ck_assert_str_eq(res.module, exe_base());
	elfsym_maps_free(maps);
}
END_TEST

START_TEST(test_format)
{
	struct elfsym_maps *maps = load_maps(0);
	struct elfsym_result res;
	char buf[256], want[128];

	ck_assert_int_eq(elfsym_resolve(maps, (uintptr_t)&cache_lock, true, &res), 0);
	elfsym_format(&res, (uintptr_t)&cache_lock, buf, sizeof(buf));
	snprintf(want, sizeof(want), "cache_lock (%s)", exe_base());
	ck_assert_str_eq(buf, want);

	memset(&res, 0, sizeof(res));
	elfsym_format(&res, 0x1234, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0x1234");
	elfsym_maps_free(maps);
}
END_TEST

/* The symbol alone: how locks are named; a long name is cut, not its offset. */
START_TEST(test_format_symbol)
{
	struct elfsym_result res = { .name = "table", .offset = 0x18 };
	char buf[32];

	ck_assert_int_eq(elfsym_format_symbol(&res, buf, sizeof(buf)), 10);
	ck_assert_str_eq(buf, "table+0x18");
	res.offset = 0;
	elfsym_format_symbol(&res, buf, sizeof(buf));
	ck_assert_str_eq(buf, "table");
	res.name[0] = '\0';
	res.offset = 0x18;
	elfsym_format_symbol(&res, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	memset(res.name, 'n', sizeof(res.name) - 1);
	res.offset = 0xffffffffffffffff;
	elfsym_format_symbol(&res, buf, sizeof(buf));
	ck_assert_str_eq(buf + strlen(buf) - 19, "+0xffffffffffffffff");
	ck_assert_uint_eq(strspn(buf, "n"), sizeof(buf) - 20);
}
END_TEST

START_TEST(test_libc)
{
	struct elfsym_maps *maps = load_maps(0);
	struct elfsym_result res;
	void *libc, *fn;

	/* dlsym on libc itself: &printf may be a sanitizer's interceptor. */
	libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	ck_assert_ptr_nonnull(libc);
	fn = dlsym(libc, "printf");
	ck_assert_ptr_nonnull(fn);

	ck_assert_msg(elfsym_resolve(maps, (uintptr_t)fn, false, &res) == 0, "%s", elfsym_last_error());
	ck_assert_msg(strcmp(res.name, "printf") == 0 || strcmp(res.name, "_IO_printf") == 0,
		      "printf resolved to %s", res.name);
	ck_assert_uint_eq(res.offset, 0);
	ck_assert_str_eq(res.module, "libc.so.6");
	ck_assert(!res.is_object);

	/* Inside the function. */
	ck_assert_int_eq(elfsym_resolve(maps, (uintptr_t)fn + 1, false, &res), 0);
	ck_assert_uint_eq(res.offset, 1);
	ck_assert_str_eq(res.module, "libc.so.6");
	dlclose(libc);
	elfsym_maps_free(maps);
}
END_TEST

/* Shared modules: maps of two processes (ours and a child's, the same
 * files) resolve alike, and either can be freed first. */
START_TEST(test_shared_modules)
{
	struct elfsym_maps *a, *b, *c;
	pid_t child;
	int status;

	elfsym_share_modules(true);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	a = load_maps(0);
	b = load_maps(child);
	expect_sym(a, &table_lock, true, "table_lock", 0, exe_base());
	expect_sym(b, &table_lock, true, "table_lock", 0, exe_base());
	/* Freed first, the maps that loaded the module leave it to the other. */
	elfsym_maps_free(a);
	expect_sym(b, (const void *)(uintptr_t)&worker_loop, false, "worker_loop", 0, exe_base());
	c = load_maps(0);
	expect_sym(c, &big_bss[0], true, "big_bss", 0, exe_base());
	elfsym_maps_free(b);
	elfsym_maps_free(c);
	/* Nothing left shared: a fresh maps parses again and still works. */
	a = load_maps(0);
	expect_sym(a, &table_lock, true, "table_lock", 0, exe_base());
	elfsym_maps_free(a);
	elfsym_share_modules(false);
	kill(child, SIGKILL);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
}
END_TEST

START_TEST(test_anonymous)
{
	struct elfsym_maps *maps = load_maps(0);
	struct elfsym_result res;
	char *heap = malloc(64);
	int on_stack = 0;
	void *anon;

	ck_assert_ptr_nonnull(heap);
	ck_assert_int_eq(elfsym_resolve(maps, (uintptr_t)heap, true, &res), -ENOENT);
	ck_assert_str_eq(res.name, "");
	ck_assert_int_eq(elfsym_resolve(maps, (uintptr_t)heap, false, &res), -ENOENT);
	ck_assert_int_eq(elfsym_resolve(maps, (uintptr_t)&on_stack, true, &res), -ENOENT);
	ck_assert_int_eq(elfsym_resolve(maps, 0, true, &res), -ENOENT);
	ck_assert_int_eq(elfsym_resolve(maps, UINT64_MAX, false, &res), -ENOENT);
	ck_assert_uint_gt(strlen(elfsym_last_error()), 0);
	free(heap);

	/* Mapped after the maps were read: unknown, not a crash. */
	anon = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(anon, MAP_FAILED);
	ck_assert_int_eq(elfsym_resolve(maps, (uintptr_t)anon, true, &res), -ENOENT);
	munmap(anon, 4096);
	elfsym_maps_free(maps);
}
END_TEST

START_TEST(test_maps_errors)
{
	struct elfsym_maps *maps = NULL;

	ck_assert_int_eq(elfsym_maps_load(&maps, -1), -EINVAL);
	ck_assert_int_eq(elfsym_maps_load(&maps, 0x7ffffff0), -ENOENT);
	ck_assert_ptr_null(maps);
	elfsym_maps_free(NULL);
}
END_TEST

START_TEST(test_module_load_path)
{
	struct elfsym_maps *maps = load_maps(0);
	struct elfsym_module *m = NULL;
	struct elfsym_result res, mres;

	ck_assert_int_eq(elfsym_resolve(maps, (uintptr_t)&cache_lock, true, &res), 0);
	ck_assert_msg(elfsym_module_load_path("/proc/self/exe", &m) == 0, "%s", elfsym_last_error());
	ck_assert_uint_gt(elfsym_module_symbol_count(m), 10);
	ck_assert_int_eq(elfsym_module_lookup(m, res.vaddr, true, &mres), 0);
	ck_assert_str_eq(mres.name, "cache_lock");
	ck_assert_uint_eq(mres.offset, 0);
	ck_assert_int_eq(elfsym_module_lookup(m, res.vaddr, false, &mres), -ENOENT);
	elfsym_module_free(m);
	elfsym_maps_free(maps);
}
END_TEST

/* ------------------------------------------------------------ hostile ELF */

static char tmpdir[PATH_MAX];

static void tmpdir_setup(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/test-elfsym.XXXXXX", base && *base ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void tmpdir_teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
}

static uint8_t *read_self(size_t *len)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *buf;
	size_t done = 0;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	ck_assert_ptr_nonnull(buf);
	while (done < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);

		ck_assert_int_gt(n, 0);
		done += (size_t)n;
	}
	close(fd);
	*len = done;
	return buf;
}

static int load_bytes(const char *name, const uint8_t *buf, size_t len)
{
	char path[PATH_MAX + 64];
	struct elfsym_module *m = NULL;
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);

	r = elfsym_module_load_path(path, &m);
	if (r == 0) {
		struct elfsym_result res;

		ck_assert_ptr_nonnull(m);
		/* Whatever loaded must be safe to query. */
		for (uint64_t v = 0; v < 0x40000; v += 0x333) {
			(void)elfsym_module_lookup(m, v, true, &res);
			(void)elfsym_module_lookup(m, v, false, &res);
		}
		elfsym_module_free(m);
	} else {
		ck_assert_ptr_null(m);
		ck_assert_uint_gt(strlen(elfsym_last_error()), 0);
	}
	return r;
}

struct layout {
	Elf64_Ehdr *eh;
	Elf64_Shdr *sh;
	size_t symtab, strtab;
};

static struct layout layout_of(uint8_t *buf, size_t len)
{
	struct layout l = { .eh = (Elf64_Ehdr *)buf, .symtab = SIZE_MAX };

	ck_assert_uint_ge(len, sizeof(Elf64_Ehdr));
	ck_assert_uint_le(l.eh->e_shoff + (uint64_t)l.eh->e_shnum * sizeof(Elf64_Shdr), len);
	l.sh = (Elf64_Shdr *)(buf + l.eh->e_shoff);
	for (size_t i = 0; i < l.eh->e_shnum; i++)
		if (l.sh[i].sh_type == SHT_SYMTAB)
			l.symtab = i;
	ck_assert_msg(l.symtab != SIZE_MAX, "test binary has no .symtab (stripped?)");
	l.strtab = l.sh[l.symtab].sh_link;
	return l;
}

enum { M_NONE, M_TRUNC100, M_TRUNC10, M_TRUNC3, M_NOT_ELF, M_SHOFF_HUGE, M_SHOFF_END, M_SHNUM_HUGE,
       M_SHENTSIZE, M_PHOFF_HUGE, M_PHENTSIZE, M_PHNUM_XNUM, M_LOAD_OFFSET, M_LOAD_FILESZ,
       M_SYMTAB_OFFSET, M_SYMTAB_SIZE_HUGE, M_SYMTAB_SIZE_ODD, M_SYMTAB_ENTSIZE, M_LINK_HUGE,
       M_LINK_ZERO, M_LINK_SELF, M_STRTAB_UNTERMINATED, M_STRTAB_OFFSET, M_STNAME, M_OTHER_SECTION,
       M_EXT_SHNUM, M_CLASS32, M_BIG_ENDIAN, M_MACHINE, M_TYPE_REL, M_VERSION, M_COUNT };

static const struct {
	const char *name;
	int expect;
} mutations[M_COUNT] = {
	[M_NONE] = { "intact", 0 },
	[M_TRUNC100] = { "truncated to 100 bytes", -EBADMSG },
	[M_TRUNC10] = { "truncated to 10 bytes", -EBADMSG },
	[M_TRUNC3] = { "truncated to 3 bytes", -ENOEXEC },
	[M_NOT_ELF] = { "bad magic", -ENOEXEC },
	[M_SHOFF_HUGE] = { "e_shoff huge", -EBADMSG },
	[M_SHOFF_END] = { "e_shoff near EOF", -EBADMSG },
	[M_SHNUM_HUGE] = { "e_shnum 0xfffe", -EBADMSG },
	[M_SHENTSIZE] = { "e_shentsize 32", -EBADMSG },
	[M_PHOFF_HUGE] = { "e_phoff huge", -EBADMSG },
	[M_PHENTSIZE] = { "e_phentsize 8", -EBADMSG },
	[M_PHNUM_XNUM] = { "e_phnum PN_XNUM", -EBADMSG },
	[M_LOAD_OFFSET] = { "PT_LOAD p_offset past EOF", -EBADMSG },
	[M_LOAD_FILESZ] = { "PT_LOAD p_filesz > p_memsz", -EBADMSG },
	[M_SYMTAB_OFFSET] = { ".symtab sh_offset past EOF", -EBADMSG },
	[M_SYMTAB_SIZE_HUGE] = { ".symtab sh_size huge", -EBADMSG },
	[M_SYMTAB_SIZE_ODD] = { ".symtab sh_size not a multiple", -EBADMSG },
	[M_SYMTAB_ENTSIZE] = { ".symtab sh_entsize 16", -EBADMSG },
	[M_LINK_HUGE] = { ".symtab sh_link out of range", -EBADMSG },
	[M_LINK_ZERO] = { ".symtab sh_link 0", -EBADMSG },
	[M_LINK_SELF] = { ".symtab sh_link not a string table", -EBADMSG },
	[M_STRTAB_UNTERMINATED] = { ".strtab not NUL-terminated", -EBADMSG },
	[M_STRTAB_OFFSET] = { ".strtab sh_offset past EOF", -EBADMSG },
	[M_STNAME] = { "st_name outside .strtab", -EBADMSG },
	[M_OTHER_SECTION] = { "unrelated section past EOF", -EBADMSG },
	[M_EXT_SHNUM] = { "extended e_shnum huge", -EBADMSG },
	[M_CLASS32] = { "ELFCLASS32", -ENOEXEC },
	[M_BIG_ENDIAN] = { "ELFDATA2MSB", -ENOEXEC },
	[M_MACHINE] = { "EM_AARCH64", -ENOEXEC },
	[M_TYPE_REL] = { "ET_REL", -ENOEXEC },
	[M_VERSION] = { "EV_NONE", -EBADMSG },
};

static void mutate(int which, uint8_t *buf, size_t *len)
{
	struct layout l = layout_of(buf, *len);
	Elf64_Phdr *ph = (Elf64_Phdr *)(buf + l.eh->e_phoff);
	Elf64_Shdr *sym = &l.sh[l.symtab], *str = &l.sh[l.strtab];

	switch (which) {
	case M_NONE:
		break;
	case M_TRUNC100:
		*len = 100;
		break;
	case M_TRUNC10:
		*len = 10;
		break;
	case M_TRUNC3:
		*len = 3;
		break;
	case M_NOT_ELF:
		memcpy(buf, "#!/bin/sh\n", 10);
		break;
	case M_SHOFF_HUGE:
		l.eh->e_shoff = UINT64_C(0xffffffffffff0000);
		break;
	case M_SHOFF_END:
		l.eh->e_shoff = *len - 10;
		break;
	case M_SHNUM_HUGE:
		l.eh->e_shnum = 0xfffe;
		break;
	case M_SHENTSIZE:
		l.eh->e_shentsize = 32;
		break;
	case M_PHOFF_HUGE:
		l.eh->e_phoff = UINT64_MAX - 8;
		break;
	case M_PHENTSIZE:
		l.eh->e_phentsize = 8;
		break;
	case M_PHNUM_XNUM:
		l.eh->e_phnum = PN_XNUM;
		break;
	case M_LOAD_OFFSET:
	case M_LOAD_FILESZ:
		for (unsigned i = 0; i < l.eh->e_phnum; i++)
			if (ph[i].p_type == PT_LOAD) {
				if (which == M_LOAD_OFFSET)
					ph[i].p_offset = *len + 0x10000;
				else
					ph[i].p_filesz = ph[i].p_memsz + 1;
				break;
			}
		break;
	case M_SYMTAB_OFFSET:
		sym->sh_offset = *len + 4096;
		break;
	case M_SYMTAB_SIZE_HUGE:
		sym->sh_size = UINT64_MAX - 23;
		break;
	case M_SYMTAB_SIZE_ODD:
		sym->sh_size -= 5;
		break;
	case M_SYMTAB_ENTSIZE:
		sym->sh_entsize = 16;
		break;
	case M_LINK_HUGE:
		sym->sh_link = l.eh->e_shnum + 7;
		break;
	case M_LINK_ZERO:
		sym->sh_link = 0;
		break;
	case M_LINK_SELF:
		sym->sh_link = (uint32_t)l.symtab;
		break;
	case M_STRTAB_UNTERMINATED:
		buf[str->sh_offset + str->sh_size - 1] = 'x';
		break;
	case M_STRTAB_OFFSET:
		str->sh_offset = UINT64_MAX - 100;
		break;
	case M_STNAME: {
		Elf64_Sym *s = (Elf64_Sym *)(buf + sym->sh_offset);

		s[1].st_name = (uint32_t)str->sh_size;
		break;
	}
	case M_OTHER_SECTION:
		for (size_t i = 1; i < l.eh->e_shnum; i++)
			if (i != l.symtab && i != l.strtab && l.sh[i].sh_type == SHT_PROGBITS) {
				l.sh[i].sh_offset = *len - 1;
				l.sh[i].sh_size = 2;
				break;
			}
		break;
	case M_EXT_SHNUM:
		l.eh->e_shnum = 0;
		l.sh[0].sh_size = UINT64_C(1) << 40;
		break;
	case M_CLASS32:
		l.eh->e_ident[EI_CLASS] = ELFCLASS32;
		break;
	case M_BIG_ENDIAN:
		l.eh->e_ident[EI_DATA] = ELFDATA2MSB;
		break;
	case M_MACHINE:
		l.eh->e_machine = EM_AARCH64;
		break;
	case M_TYPE_REL:
		l.eh->e_type = ET_REL;
		break;
	case M_VERSION:
		l.eh->e_version = EV_NONE;
		break;
	}
}

START_TEST(test_hostile_elf)
{
	size_t len;
	uint8_t *buf = read_self(&len);
	int r;

	mutate(_i, buf, &len);
	r = load_bytes("variant", buf, len);
	ck_assert_msg(r == mutations[_i].expect, "%s: got %d (%s), expected %d", mutations[_i].name, r,
		      r < 0 ? elfsym_last_error() : "loaded", mutations[_i].expect);
	free(buf);
}
END_TEST

/* Random corruption of the headers and symbol tables: any verdict is fine,
 * crashing (or an ASan report) is not. */
START_TEST(test_fuzz_headers)
{
	size_t len;
	uint8_t *orig = read_self(&len);
	uint8_t *buf = malloc(len);
	struct layout l = layout_of(orig, len);
	uint64_t shoff = l.eh->e_shoff, shlen = (uint64_t)l.eh->e_shnum * sizeof(Elf64_Shdr);
	uint64_t symoff = l.sh[l.symtab].sh_offset, symlen = l.sh[l.symtab].sh_size;
	uint64_t phoff = l.eh->e_phoff, phlen = (uint64_t)l.eh->e_phnum * sizeof(Elf64_Phdr);
	unsigned seed = 12345;
	int loaded = 0;

	ck_assert_ptr_nonnull(buf);
	for (int iter = 0; iter < 300; iter++) {
		size_t n = len;
		int flips = 1 + rand_r(&seed) % 4, r;

		memcpy(buf, orig, len);
		for (int f = 0; f < flips; f++) {
			uint64_t off;

			switch (rand_r(&seed) % 4) {
			case 0:
				off = (uint64_t)rand_r(&seed) % sizeof(Elf64_Ehdr);
				break;
			case 1:
				off = phoff + (uint64_t)rand_r(&seed) % phlen;
				break;
			case 2:
				off = shoff + (uint64_t)rand_r(&seed) % shlen;
				break;
			default:
				off = symoff + (uint64_t)rand_r(&seed) % (symlen > 256 ? 256 : symlen);
				break;
			}
			if (off < len)
				buf[off] = (uint8_t)rand_r(&seed);
		}
		if (rand_r(&seed) % 8 == 0)
			n = (size_t)rand_r(&seed) % len;
		r = load_bytes("fuzz", buf, n);
		ck_assert_msg(r == 0 || r == -EBADMSG || r == -ENOEXEC || r == -EFBIG,
			      "iteration %d: unexpected %d (%s)", iter, r, elfsym_last_error());
		loaded += r == 0;
	}
	ck_assert_int_gt(loaded, 0);
	free(buf);
	free(orig);
}
END_TEST

START_TEST(test_not_regular)
{
	struct elfsym_module *m = NULL;
	char fifo[PATH_MAX + 16];

	ck_assert_int_eq(elfsym_module_load_path("/nonexistent/elfsym", &m), -ENOENT);
	ck_assert_int_eq(elfsym_module_load_path(tmpdir, &m), -ENOEXEC);
	/* Must not block opening a FIFO for reading. */
	snprintf(fifo, sizeof(fifo), "%s/fifo", tmpdir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	ck_assert_int_eq(elfsym_module_load_path(fifo, &m), -ENOEXEC);
	ck_assert_int_eq(elfsym_module_load_path("/dev/null", &m), -ENOEXEC);
	ck_assert_ptr_null(m);
	ck_assert_int_eq(elfsym_module_load_path(NULL, &m), -EINVAL);
}
END_TEST

/* A stripped copy names nothing of its own; its build-id debug file does. */
START_TEST(test_debug_file_by_build_id)
{
	struct elfsym_maps *maps = load_maps(0);
	struct elfsym_module *m = NULL;
	struct elfsym_result res, mres;
	char cmd[4 * PATH_MAX + 64], stripped[PATH_MAX + 16], debug[PATH_MAX + 16], id[256] = "";
	FILE *p;

	if (system("command -v objcopy >/dev/null && command -v readelf >/dev/null") != 0) {
		printf("note: objcopy/readelf missing: debug-file lookup not tested\n");
		elfsym_maps_free(maps);
		return;
	}
	ck_assert_int_eq(elfsym_resolve(maps, (uintptr_t)&cache_lock, true, &res), 0);
	snprintf(stripped, sizeof(stripped), "%s/stripped", tmpdir);
	snprintf(debug, sizeof(debug), "%s/full.debug", tmpdir);
	snprintf(cmd, sizeof(cmd), "objcopy --only-keep-debug /proc/%d/exe '%s' && objcopy --strip-all /proc/%d/exe '%s'",
		 (int)getpid(), debug, (int)getpid(), stripped);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' | sed -n 's/.*Build ID: *//p'", stripped);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	if (!fgets(id, sizeof(id), p))
		id[0] = '\0';
	pclose(p);
	id[strcspn(id, "\n")] = '\0';
	if (strlen(id) < 4) {
		printf("note: the test binary has no build-id: debug-file lookup not tested\n");
		elfsym_maps_free(maps);
		return;
	}

	/* Without a debug directory holding it: no name for the static lock. */
	elfsym_set_debug_dir(tmpdir);
	ck_assert_msg(elfsym_module_load_path(stripped, &m) == 0, "%s", elfsym_last_error());
	ck_assert_int_eq(elfsym_module_lookup(m, res.vaddr, true, &mres), -ENOENT);
	elfsym_module_free(m);

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/.build-id/%.2s' && mv '%s' '%s/.build-id/%.2s/%s.debug'",
		 tmpdir, id, debug, tmpdir, id, id + 2);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(elfsym_module_load_path(stripped, &m) == 0, "%s", elfsym_last_error());
	ck_assert_msg(elfsym_module_lookup(m, res.vaddr, true, &mres) == 0, "%s", elfsym_last_error());
	ck_assert_str_eq(mres.name, "cache_lock");
	elfsym_module_free(m);
	elfsym_set_debug_dir(NULL);
	elfsym_maps_free(maps);
}
END_TEST

/* Issue 12: a debug file found by build-id that is the stripped file itself
 * (it names itself) must neither recurse nor be used (it has no .symtab). */
START_TEST(test_debug_file_self_reference)
{
	struct elfsym_maps *maps = load_maps(0);
	struct elfsym_module *m = NULL;
	struct elfsym_result res, mres;
	char cmd[4 * PATH_MAX + 64], stripped[PATH_MAX + 16], id[256] = "";
	FILE *p;

	if (system("command -v objcopy >/dev/null && command -v readelf >/dev/null") != 0) {
		printf("note: objcopy/readelf missing: self-referencing debug file not tested\n");
		elfsym_maps_free(maps);
		return;
	}
	ck_assert_int_eq(elfsym_resolve(maps, (uintptr_t)&cache_lock, true, &res), 0);
	snprintf(stripped, sizeof(stripped), "%s/stripped", tmpdir);
	snprintf(cmd, sizeof(cmd), "objcopy --strip-all /proc/%d/exe '%s'", (int)getpid(), stripped);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' | sed -n 's/.*Build ID: *//p'", stripped);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	if (!fgets(id, sizeof(id), p))
		id[0] = '\0';
	pclose(p);
	id[strcspn(id, "\n")] = '\0';
	if (strlen(id) < 4) {
		printf("note: the test binary has no build-id: not tested\n");
		elfsym_maps_free(maps);
		return;
	}
	/* The debug file is a hard link of the stripped file: same build-id,
	 * no .symtab, and it would look itself up again. */
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/.build-id/%.2s' && ln '%s' '%s/.build-id/%.2s/%s.debug'", tmpdir, id,
		 stripped, tmpdir, id, id + 2);
	ck_assert_int_eq(system(cmd), 0);
	elfsym_set_debug_dir(tmpdir);
	ck_assert_msg(elfsym_module_load_path(stripped, &m) == 0, "%s", elfsym_last_error());
	ck_assert_int_eq(elfsym_module_lookup(m, res.vaddr, true, &mres), -ENOENT);
	elfsym_module_free(m);
	elfsym_set_debug_dir(NULL);
	elfsym_maps_free(maps);
}
END_TEST

static void *map_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	void *p;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	close(fd);
	*len = (size_t)st.st_size;
	return p;
}

/* Hard links of one file are one module (parsed once), whatever the path. */
START_TEST(test_hard_links_one_module)
{
	char a[PATH_MAX + 8], b[PATH_MAX + 8], cmd[3 * PATH_MAX + 64];
	struct elfsym_maps *maps;
	struct elfsym_result res;
	size_t la, lb;
	uint8_t *pa, *pb;

	snprintf(a, sizeof(a), "%s/a", tmpdir);
	snprintf(b, sizeof(b), "%s/b", tmpdir);
	snprintf(cmd, sizeof(cmd), "cp /proc/%d/exe '%s' && ln '%s' '%s'", (int)getpid(), a, a, b);
	ck_assert_int_eq(system(cmd), 0);
	pa = map_file(a, &la);
	pb = map_file(b, &lb);
	maps = load_maps(0);
	(void)elfsym_resolve(maps, (uintptr_t)(pa + 64), false, &res);
	(void)elfsym_resolve(maps, (uintptr_t)(pb + 64), false, &res);
	ck_assert_uint_eq(elfsym_maps_parsed_count(maps), 1);
	elfsym_maps_free(maps);
	munmap(pa, la);
	munmap(pb, lb);
}
END_TEST

/* The path of a mapping is opened without following symbolic links: a
 * link swapped in under it fails, even one to the very same file. */
START_TEST(test_path_symlink_not_followed)
{
	char a[PATH_MAX + 16], real[PATH_MAX + 32], cmd[5 * PATH_MAX + 64];
	struct elfsym_maps *maps;
	struct elfsym_location loc;
	struct elfsym_result res;
	struct stat st;
	size_t len;
	uint8_t *p;
	int r;

	snprintf(a, sizeof(a), "%s/mapped", tmpdir);
	snprintf(real, sizeof(real), "%s/mapped.real", tmpdir);
	snprintf(cmd, sizeof(cmd), "cp /proc/%d/exe '%s'", (int)getpid(), a);
	ck_assert_int_eq(system(cmd), 0);
	p = map_file(a, &len);
	maps = load_maps(0);
	ck_assert_int_eq(elfsym_maps_locate(maps, (uintptr_t)(p + 64), &loc), 0);
	ck_assert_int_eq(stat(a, &st), 0);
	ck_assert_uint_eq(loc.inode, st.st_ino);
	ck_assert_uint_eq(loc.dev, st.st_dev);
	ck_assert_uint_eq(loc.file_offset, 64);
	ck_assert_str_eq(loc.module, "mapped");
	/* After maps was read, the path becomes a link to the very file. */
	ck_assert_int_eq(rename(a, real), 0);
	ck_assert_int_eq(symlink(real, a), 0);
	r = elfsym_resolve(maps, (uintptr_t)(p + 64), false, &res);
	/* ELOOP, or the link itself (O_PATH|O_NOFOLLOW), which is no regular file. */
	ck_assert_msg(r == -ELOOP || r == -ENOEXEC, "resolved through a symlink: %d %s", r, elfsym_last_error());
	elfsym_maps_free(maps);
	munmap(p, len);
}
END_TEST

static Suite *elfsym_suite(void)
{
	Suite *s = suite_create("elfsym");
	TCase *tc = tcase_create("process");
	TCase *th = tcase_create("hostile");

	tcase_add_test(tc, test_self_objects_and_code);
	tcase_add_test(tc, test_by_real_pid);
	tcase_add_test(tc, test_other_process);
	tcase_add_test(tc, test_call_site);
	tcase_add_test(tc, test_format);
	tcase_add_test(tc, test_format_symbol);
	tcase_add_test(tc, test_libc);
	tcase_add_test(tc, test_anonymous);
	tcase_add_test(tc, test_shared_modules);
	tcase_add_test(tc, test_maps_errors);
	tcase_add_test(tc, test_module_load_path);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(th, tmpdir_setup, tmpdir_teardown);
	tcase_add_loop_test(th, test_hostile_elf, 0, M_COUNT);
	tcase_add_test(th, test_fuzz_headers);
	tcase_add_test(th, test_not_regular);
	tcase_add_test(th, test_debug_file_by_build_id);
	tcase_add_test(th, test_debug_file_self_reference);
	tcase_add_test(th, test_hard_links_one_module);
	tcase_add_test(th, test_path_symlink_not_followed);
	tcase_set_timeout(th, 60);
	suite_add_tcase(s, th);
	return s;
}


int main(void)
{
	SRunner *sr = srunner_create(elfsym_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
