/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef ELIDE_SEGMENT_NAMES_H
#define ELIDE_SEGMENT_NAMES_H

#include <stdint.h>

#include "segment-format.h"

/* Names for the segment's enums, "?" for out-of-range values. */
const char *seg_kind_to_string(uint32_t kind);   /* "mutex", "rw-rd", "rw-wr", ... */
const char *seg_state_to_string(uint32_t state);
const char *seg_reason_to_string(uint32_t reason);
const char *seg_mode_to_string(uint32_t mode);
/* "config", "override", "adaptation", or "" for none. */
const char *seg_source_to_string(uint32_t source);

#endif
