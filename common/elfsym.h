/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Address symbolizer: names the lock (a data address) or the call site (a
 * code address) of a running process from the ELF symbol tables of the
 * mapped files, .symtab included, so that a `static pthread_mutex_t
 * cache_lock` of a PIE executable reads "cache_lock" and a return address
 * reads "worker_loop+0x3a (myprog)".
 *
 * elided runs this as root on files an unprivileged user may control: every
 * ELF field is checked before use, files are read with pread (never mmap,
 * which a concurrent truncate would turn into SIGBUS) and sizes are capped.
 * Only ELFCLASS64 little-endian x86-64 ET_EXEC/ET_DYN files are accepted.
 *
 * Errors are 0 / -errno:
 *   -ENOENT   no file-backed mapping or no symbol contains the address
 *   -ENOEXEC  not an ELF file, or one of an unsupported class/machine/type
 *             or not a regular file
 *   -EBADMSG  malformed ELF (elfsym_last_error() says what is wrong)
 *   -EFBIG    a table is over the size caps (64 MiB per table)
 *   -ESTALE   the file at the mapped path is no longer the mapped one
 *             (device and inode are compared; the path is opened without
 *             following symbolic links)
 * elfsym_last_error() returns a one-line reason for the calling thread's
 * last failure (thread-local; "" when none has been recorded).
 *
 * A struct elfsym_maps (and the modules it caches) is not thread-safe: use
 * one per thread or lock around it.
 */
#ifndef ELIDE_ELFSYM_H
#define ELIDE_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Caps against hostile files. */
#define ELFSYM_MAX_TABLE_SIZE (UINT64_C(64) << 20) /* one symbol or string table */

struct elfsym_maps;
struct elfsym_module;

struct elfsym_result {
	char name[128];       /* symbol name (truncated, always NUL-terminated); "" if none */
	char module[64];      /* basename of the mapped file (truncated); "" if no mapping */
	uint64_t offset;      /* address - symbol start */
	uint64_t sym_vaddr;   /* symbol st_value (link-time address) */
	uint64_t sym_size;    /* symbol st_size (0 for a nearest-preceding code match) */
	uint64_t vaddr;       /* link-time virtual address of the resolved address */
	uint64_t file_offset; /* file offset of the resolved address */
	bool is_object;       /* STT_OBJECT/STT_COMMON (else code) */
	bool name_truncated;
};

/*
 * Reads /proc/PID/maps (pid 0: the calling process) and keeps the
 * file-backed mappings, plus the anonymous writable mapping that directly
 * follows one of them (the .bss tail of that file's data segment).
 */
int elfsym_maps_load(struct elfsym_maps **ret, pid_t pid);
void elfsym_maps_free(struct elfsym_maps *maps);
size_t elfsym_maps_count(const struct elfsym_maps *maps);

/* Where an address lies, from /proc/PID/maps alone (no file is opened):
 * the mapped file's identity as the kernel reports it and the offset in
 * it.  elided keys its cache of names on this without touching the file. */
struct elfsym_location {
	uint64_t dev;         /* st_dev encoding (makedev) */
	uint64_t inode;       /* 0 for a file without one */
	uint64_t file_offset;
	bool deleted;
	char module[64];      /* basename of the mapped path (truncated) */
};

/* 0, or -ENOENT when addr is in no file-backed mapping. */
int elfsym_maps_locate(const struct elfsym_maps *maps, uint64_t addr, struct elfsym_location *loc);

/* The reverse of elfsym_maps_locate: the address at which file_offset of
 * the module whose basename is `module` (not deleted) is mapped now; the
 * first such mapping in address order.  0, or -ENOENT. */
int elfsym_maps_address_of(const struct elfsym_maps *maps, const char *module, uint64_t file_offset, uint64_t *addr);

/* Modules of maps whose file was opened and parsed so far (hard links of
 * one file count once). */
size_t elfsym_maps_parsed_count(const struct elfsym_maps *maps);

/*
 * Names addr.  want_object: look only at STT_OBJECT/STT_COMMON symbols whose
 * [st_value, st_value + st_size) contains the address (locks); otherwise
 * STT_FUNC/STT_GNU_IFUNC, falling back to the nearest preceding function
 * when that one has st_size 0 (call sites).  Each module's symbols are read
 * once per maps object and cached; a module that failed to load keeps
 * failing with the same error.  On -ENOENT after the mapping was found,
 * res->module, res->vaddr and res->file_offset are still filled in (the
 * caller may print "module+0xOFFSET"); res->name is "".  res is always
 * cleared first.
 */
int elfsym_resolve(struct elfsym_maps *maps, uint64_t addr, bool want_object,
		   struct elfsym_result *res);

/*
 * The symbol alone, as locks are named: "name+0xOFF", "name" at offset 0,
 * "" without a name.  A long name is cut so that the offset stays whole.
 * Returns the length written.
 */
int elfsym_format_symbol(const struct elfsym_result *res, char *buf, size_t size);

/*
 * "name+0xOFF (module)", "name (module)" at offset 0; without a name
 * "module+0xVADDR" (link-time address, for addr2line) or, when that is
 * unknown, "module@0xFILEOFFSET"; "0xADDR" without a module.  Returns
 * snprintf's value.
 */
int elfsym_format(const struct elfsym_result *res, uint64_t addr, char *buf, size_t size);

/* File-level parser, exposed for tests and tools: loads the program headers
 * and the .symtab/.dynsym symbols of the ELF file at path. */
int elfsym_module_load_path(const char *path, struct elfsym_module **ret);
void elfsym_module_free(struct elfsym_module *m);
/* Number of symbols kept (objects + functions, after de-duplication). */
size_t elfsym_module_symbol_count(const struct elfsym_module *m);
/* Looks up a link-time virtual address in a loaded module (as elfsym_resolve,
 * without the mapping step; res->module is the path's basename). */
int elfsym_module_lookup(const struct elfsym_module *m, uint64_t vaddr, bool want_object,
			 struct elfsym_result *res);

const char *elfsym_last_error(void);

/*
 * Share parsed modules between maps objects: a file that many processes
 * map (libc, a common executable), identified by device and inode (never
 * by path: hard links are one file),
 * is parsed once and freed with the last maps object using it.  For
 * single-threaded callers that hold many maps at once (elided); off by
 * default.  Not thread-safe: the shared table is process-wide.
 */
void elfsym_share_modules(bool on);

/*
 * Where separate debug files are looked up by GNU build-id, for stripped
 * modules (DIR/.build-id/ab/cdef....debug, as gdb and perf do).  Default
 * /usr/lib/debug; NULL or "" restores it.  Not thread-safe: set it once.
 */
void elfsym_set_debug_dir(const char *dir);

#endif
