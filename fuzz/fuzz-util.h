/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Shared by the libFuzzer harnesses: one private scratch directory per
 * fuzzer process (under $TMPDIR, else /tmp), created on the first input and
 * removed, with whatever is left in it, when the process exits normally.
 */
#ifndef ELIDE_FUZZ_UTIL_H
#define ELIDE_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The scratch directory's path and an O_DIRECTORY descriptor of it; aborts
 * when it cannot be made (a broken environment, not a finding). */
const char *fuzz_dir(void);
int fuzz_dirfd(void);

/* Writes data to name (relative to the scratch directory), replacing it. */
void fuzz_write(const char *name, const uint8_t *data, size_t size);

#endif
