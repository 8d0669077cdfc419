/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer harness: the input is an ELF file that a process has mapped,
 * as elided meets it: loaded with elfsym_module_load_path, then addresses
 * looked up (the entry point and the bounds of each PT_LOAD, as data and as
 * code) and the results formatted.
 *
 * A stripped file's symbols come from a separate debug file found by its
 * GNU build-id.  Any user can make the file that path names be the file
 * itself, so when the input has a build-id note the harness installs the
 * input as its own debug file (in its private debug directory): elfsym
 * must look one level deep only (fuzz/regressions: debug-link-self.so).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfsym.h"
#include "fuzz-util.h"

#define MAX_ADDRS 32

/* [off, off + len) inside size bytes. */
static bool in_range(uint64_t off, uint64_t len, size_t size)
{
	return off <= size && len <= size - off;
}

/* The first GNU build-id note of the first SHT_NOTE section that has one,
 * as elfsym reads it (at most the section's first 1024 bytes). */
static size_t find_build_id(const uint8_t *data, size_t size, const Elf64_Ehdr *eh, uint8_t *id, size_t idmax,
			    bool *has_symtab)
{
	size_t found = 0;

	*has_symtab = false;
	if (!eh->e_shoff || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 ||
	    !in_range(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), size))
		return 0;
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		Elf64_Shdr sh;
		size_t len, off = 0;

		memcpy(&sh, data + eh->e_shoff + (uint64_t)i * sizeof(sh), sizeof(sh));
		if (sh.sh_type == SHT_SYMTAB)
			*has_symtab = true;
		if (found || sh.sh_type != SHT_NOTE || !in_range(sh.sh_offset, sh.sh_size, size))
			continue;
		len = sh.sh_size < 1024 ? (size_t)sh.sh_size : 1024;
		while (off + sizeof(Elf64_Nhdr) <= len) {
			const uint8_t *p = data + sh.sh_offset;
			Elf64_Nhdr nh;
			size_t name_off, desc_off;

			memcpy(&nh, p + off, sizeof(nh));
			name_off = off + sizeof(nh);
			desc_off = name_off + ((nh.n_namesz + 3u) & ~3u);
			if (nh.n_namesz > len || nh.n_descsz > len || desc_off > len || nh.n_descsz > len - desc_off)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(p + name_off, "GNU", 4) &&
			    nh.n_descsz >= 2 && nh.n_descsz <= idmax) {
				memcpy(id, p + desc_off, nh.n_descsz);
				found = nh.n_descsz;
				break;
			}
			off = desc_off + ((nh.n_descsz + 3u) & ~3u);
		}
	}
	return found;
}

/* debug/.build-id/xx/yyyy.debug, relative to the scratch directory. */
static void debug_paths(const uint8_t *id, size_t len, char *dir, size_t dirsize, char *file, size_t filesize)
{
	char hex[2 * 64 + 1];

	for (size_t i = 0; i < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	snprintf(dir, dirsize, "debug/.build-id/%.2s", hex);
	snprintf(file, filesize, "%s/%s.debug", dir, hex + 2);
}

static size_t collect_addrs(const uint8_t *data, size_t size, const Elf64_Ehdr *eh, uint64_t *addrs)
{
	size_t n = 0;

	addrs[n++] = 0;
	addrs[n++] = 1;
	addrs[n++] = UINT64_MAX;
	if (!eh)
		return n;
	addrs[n++] = eh->e_entry;
	addrs[n++] = eh->e_entry + 4;
	addrs[n++] = eh->e_entry - 1;
	if (eh->e_phentsize != sizeof(Elf64_Phdr))
		return n;
	for (unsigned i = 0; i < eh->e_phnum && n + 3 <= MAX_ADDRS; i++) {
		Elf64_Phdr ph;

		if (!in_range(eh->e_phoff + (uint64_t)i * sizeof(ph), sizeof(ph), size) ||
		    eh->e_phoff > UINT64_MAX / 2)
			break;
		memcpy(&ph, data + eh->e_phoff + (uint64_t)i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD)
			continue;
		addrs[n++] = ph.p_vaddr;
		addrs[n++] = ph.p_vaddr + ph.p_memsz / 2;
		addrs[n++] = ph.p_vaddr + ph.p_memsz - 1;
	}
	return n;
}

static void check_result(int r, const struct elfsym_result *res)
{
	char buf[300];
	static const size_t sizes[] = { 0, 1, 8, 21, 64, sizeof(buf) };

	if (!memchr(res->name, '\0', sizeof(res->name)) || !memchr(res->module, '\0', sizeof(res->module)))
		abort();
	if (r == 0 && !res->name[0])
		abort(); /* a found symbol has a name */
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int k;

		memset(buf, 'x', sizeof(buf));
		k = elfsym_format_symbol(res, buf, sizes[i]);
		if (k < 0 || (sizes[i] && !memchr(buf, '\0', sizes[i])))
			abort();
		k = elfsym_format(res, 0x7f0000001234, buf, sizes[i]);
		if (k < 0 || (sizes[i] && !memchr(buf, '\0', sizes[i])))
			abort();
	}
	if (!memchr(elfsym_last_error(), '\0', 256))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool initialised;
	char path[4096], ddir[256], dfile[512];
	uint8_t id[64];
	size_t idlen = 0, naddrs;
	uint64_t addrs[MAX_ADDRS];
	Elf64_Ehdr eh;
	bool have_eh = size >= sizeof(eh);
	struct elfsym_module *m = NULL;
	int r;

	if (!initialised) {
		snprintf(path, sizeof(path), "%s/debug", fuzz_dir());
		elfsym_set_debug_dir(path);
		initialised = true;
	}
	if (have_eh)
		memcpy(&eh, data, sizeof(eh));

	fuzz_write("module.so", data, size);
	if (have_eh) {
		bool has_symtab;

		idlen = find_build_id(data, size, &eh, id, sizeof(id), &has_symtab);
	}
	if (idlen) {
		debug_paths(id, idlen, ddir, sizeof(ddir), dfile, sizeof(dfile));
		if (mkdirat(fuzz_dirfd(), "debug", 0700) < 0 && errno != EEXIST)
			abort();
		if (mkdirat(fuzz_dirfd(), "debug/.build-id", 0700) < 0 && errno != EEXIST)
			abort();
		if (mkdirat(fuzz_dirfd(), ddir, 0700) < 0 && errno != EEXIST)
			abort();
		fuzz_write(dfile, data, size);
	}

	snprintf(path, sizeof(path), "%s/module.so", fuzz_dir());
	r = elfsym_module_load_path(path, &m);
	if (r == 0) {
		struct elfsym_result res;

		(void)elfsym_module_symbol_count(m);
		naddrs = collect_addrs(data, size, have_eh ? &eh : NULL, addrs);
		for (size_t i = 0; i < naddrs; i++)
			for (int obj = 0; obj < 2; obj++) {
				r = elfsym_module_lookup(m, addrs[i], obj, &res);
				check_result(r, &res);
			}
		elfsym_module_free(m);
	} else if (r != -ENOEXEC && r != -EBADMSG && r != -EFBIG && r != -ENOMEM) {
		fprintf(stderr, "fuzz-elfsym: unexpected error %d (%s)\n", r, elfsym_last_error());
		abort();
	}

	if (idlen) {
		unlinkat(fuzz_dirfd(), dfile, 0);
		unlinkat(fuzz_dirfd(), ddir, AT_REMOVEDIR);
	}
	if (unlinkat(fuzz_dirfd(), "module.so", 0) < 0)
		abort();
	return 0;
}
