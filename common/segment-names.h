/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef ELIDE_SEGMENT_NAMES_H
#define ELIDE_SEGMENT_NAMES_H

#include <stdint.h>
#include <sys/types.h>

#include "segment-format.h"

/* Names for the segment's enums, "?" for out-of-range values. */
const char *seg_kind_to_string(uint32_t kind);   /* "mutex", "rw-rd", "rw-wr", ... */
const char *seg_state_to_string(uint32_t state);
const char *seg_reason_to_string(uint32_t reason);
const char *seg_mode_to_string(uint32_t mode);
/* "config", "override", "adaptation", or "" for none. */
const char *seg_source_to_string(uint32_t source);

/* "<pid>-<starttime>.seg" or "<pid>-<starttime>-<gen>.seg" → pid, start time.
 * -EINVAL for any other name. */
int seg_parse_name(const char *name, pid_t *pid, uint64_t *start_time);

/* Canonical decimal (digits only, no sign, no leading zero, no overflow):
 * the end of the number, or NULL. */
const char *seg_parse_u64(const char *s, uint64_t *ret);

#endif
