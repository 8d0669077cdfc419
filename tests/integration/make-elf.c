/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * make-elf OUT [--syms N] [--name-len L] [--strip] [--build-id HEX]
 *
 * Writes a small x86-64 ET_DYN file for the symbolizer tests: one PT_LOAD
 * covering the whole file from offset 0 (so a mapping of the file at offset
 * 0 has file offset == link-time address), a 4 KiB .data at 0x1000, and N
 * STT_OBJECT symbols all at 0x1000 (size 64) with distinct names of L bytes
 * that differ only at their end: the worst case for a symbol sort that
 * compares whole names.  --strip leaves out .symtab/.strtab (a stripped
 * file, or a debug file that is no debug file); --build-id adds an
 * NT_GNU_BUILD_ID note.  A lock placed at 0x1008 is inside the symbols.
 */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_OFF 0x1000u
#define DATA_SIZE 0x1000u

static void die(const char *what)
{
	perror(what);
	exit(1);
}

int main(int argc, char **argv)
{
	unsigned long nsyms = 1, name_len = 16;
	unsigned char build_id[64];
	size_t build_id_len = 0;
	int strip = 0;
	const char *out;
	FILE *f;

	if (argc < 2) {
		fprintf(stderr, "usage: make-elf OUT [--syms N] [--name-len L] [--strip] [--build-id HEX]\n");
		return 2;
	}
	out = argv[1];
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--syms") && i + 1 < argc)
			nsyms = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--name-len") && i + 1 < argc)
			name_len = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--strip"))
			strip = 1;
		else if (!strcmp(argv[i], "--build-id") && i + 1 < argc) {
			const char *h = argv[++i];

			for (; h[0] && h[1] && build_id_len < sizeof(build_id); h += 2) {
				unsigned b;

				if (sscanf(h, "%2x", &b) != 1)
					break;
				build_id[build_id_len++] = (unsigned char)b;
			}
		} else {
			fprintf(stderr, "make-elf: bad argument %s\n", argv[i]);
			return 2;
		}
	}
	if (nsyms < 1 || nsyms > 1000000 || name_len < 8 || name_len > 4096)
		return fprintf(stderr, "make-elf: --syms 1..1000000, --name-len 8..4096\n"), 2;

	/* Layout: headers, .data, note, .strtab, .symtab, .shstrtab, section headers. */
	static const char shstr[] = "\0.data\0.symtab\0.strtab\0.shstrtab\0.note.gnu.build-id";
	size_t note_size = build_id_len ? sizeof(Elf64_Nhdr) + 4 + ((build_id_len + 3) & ~3u) : 0;
	size_t note_off = DATA_OFF + DATA_SIZE;
	size_t str_off = note_off + note_size;
	size_t str_size = strip ? 0 : 1 + nsyms * (name_len + 1);
	size_t sym_off = (str_off + str_size + 7) & ~(size_t)7;
	size_t sym_size = strip ? 0 : (nsyms + 1) * sizeof(Elf64_Sym);
	size_t shstr_off = sym_off + sym_size;
	size_t sh_off = (shstr_off + sizeof(shstr) + 7) & ~(size_t)7;
	unsigned shnum = 1 + 1 + (strip ? 0 : 2) + 1 + (build_id_len ? 1 : 0);
	size_t total = sh_off + shnum * sizeof(Elf64_Shdr);
	unsigned char *buf = calloc(1, total);
	Elf64_Ehdr *eh = (void *)buf;
	Elf64_Phdr *ph = (void *)(buf + sizeof(Elf64_Ehdr));
	Elf64_Shdr *sh = (void *)(buf + sh_off);
	unsigned n = 1, shstrndx;

	if (!buf)
		die("calloc");
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = sizeof(*eh);
	eh->e_shoff = sh_off;
	eh->e_ehsize = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 1;
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = (Elf64_Half)shnum;
	ph->p_type = PT_LOAD;
	ph->p_flags = PF_R | PF_W;
	ph->p_offset = 0;
	ph->p_vaddr = 0;
	ph->p_filesz = ph->p_memsz = total;
	ph->p_align = 0x1000;

	sh[n] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC | SHF_WRITE,
			      .sh_addr = DATA_OFF, .sh_offset = DATA_OFF, .sh_size = DATA_SIZE, .sh_addralign = 8 };
	n++;
	if (!strip) {
		char *strs = (char *)buf + str_off;
		Elf64_Sym *syms = (void *)(buf + sym_off);
		size_t pos = 1;

		for (unsigned long i = 0; i < nsyms; i++) {
			/* Same long prefix, the index at the end. */
			memset(strs + pos, 'L', name_len);
			memcpy(strs + pos, "hostile_lock_", 13);
			snprintf(strs + pos + name_len - 7, 8, "%07lu", i);
			syms[i + 1] = (Elf64_Sym){ .st_name = (Elf64_Word)pos,
						   .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT),
						   .st_shndx = 1, .st_value = DATA_OFF, .st_size = 64 };
			pos += name_len + 1;
		}
		sh[n] = (Elf64_Shdr){ .sh_name = 7, .sh_type = SHT_SYMTAB, .sh_offset = sym_off, .sh_size = sym_size,
				      .sh_link = n + 1, .sh_info = 1, .sh_addralign = 8, .sh_entsize = sizeof(Elf64_Sym) };
		n++;
		sh[n] = (Elf64_Shdr){ .sh_name = 15, .sh_type = SHT_STRTAB, .sh_offset = str_off, .sh_size = str_size,
				      .sh_addralign = 1 };
		n++;
	}
	shstrndx = n;
	sh[n] = (Elf64_Shdr){ .sh_name = 23, .sh_type = SHT_STRTAB, .sh_offset = shstr_off, .sh_size = sizeof(shstr),
			      .sh_addralign = 1 };
	memcpy(buf + shstr_off, shstr, sizeof(shstr));
	n++;
	if (build_id_len) {
		Elf64_Nhdr *nh = (void *)(buf + note_off);

		nh->n_namesz = 4;
		nh->n_descsz = (Elf64_Word)build_id_len;
		nh->n_type = NT_GNU_BUILD_ID;
		memcpy(buf + note_off + sizeof(*nh), "GNU", 4);
		memcpy(buf + note_off + sizeof(*nh) + 4, build_id, build_id_len);
		sh[n] = (Elf64_Shdr){ .sh_name = 33, .sh_type = SHT_NOTE, .sh_flags = SHF_ALLOC, .sh_addr = note_off,
				      .sh_offset = note_off, .sh_size = note_size, .sh_addralign = 4 };
		n++;
	}
	eh->e_shstrndx = (Elf64_Half)shstrndx;

	f = fopen(out, "we");
	if (!f)
		die(out);
	if (fwrite(buf, 1, total, f) != total || fclose(f) != 0)
		die(out);
	free(buf);
	return 0;
}
