/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * own-segment.h - a test program that judges libelide by its own segment
 * (ELIDE_RUNTIME_DIR/<pid>-<start time>.seg), read with segment-reader.h:
 * where it is, reading it, and the numbers on its command line.  For one
 * translation unit per program.  Errors print "<program>: what" and
 * _exit(1): other threads may be inside locks.
 */
#ifndef ELIDE_OWN_SEGMENT_H
#define ELIDE_OWN_SEGMENT_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elide.h"
#include "segment-reader.h"

#define EXIT_SKIP 77

static const char *own_seg_dir;     /* ELIDE_RUNTIME_DIR */
static char own_seg_name[128];      /* the segment's file name in it */

static void __attribute__((format(printf, 1, 2), noreturn)) own_seg_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", program_invocation_short_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	_exit(1);
}

/* seg_read() of the program's own segment (flags: SEG_READ_*). */
static struct seg_snapshot *own_segment_read(unsigned flags)
{
	struct seg_snapshot *snap = NULL;
	char err[SEG_ERR_MAX] = "";
	int dfd = open(own_seg_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r;

	if (dfd < 0)
		own_seg_die("open ELIDE_RUNTIME_DIR %s: %s", own_seg_dir, strerror(errno));
	r = seg_read(dfd, own_seg_name, flags, &snap, err, sizeof(err));
	close(dfd);
	if (r < 0)
		own_seg_die("reading my segment %s/%s: %s (%s)", own_seg_dir, own_seg_name, err, strerror(-r));
	return snap;
}

/*
 * Finds the segment and returns its header (SEG_READ_NO_LOCKS), or exits
 * 77 with a SKIP line where there is nothing to judge: libelide is not
 * loaded, or does not elide here (the header's reason says why).
 */
static struct seg_snapshot *own_segment_open(void)
{
	struct seg_snapshot *snap;
	uint64_t start_time = 0;

	if (!__elide_active) {
		printf("SKIP: libelide is not loaded (run me with LD_PRELOAD=libelide.so)\n");
		exit(EXIT_SKIP);
	}
	own_seg_dir = getenv("ELIDE_RUNTIME_DIR");
	if (!own_seg_dir || !*own_seg_dir)
		own_seg_die("ELIDE_RUNTIME_DIR is not set: I read my own segment from there");
	if (seg_proc_start_time(NULL, getpid(), &start_time) < 0)
		own_seg_die("cannot read my start time from /proc/self/stat");
	snprintf(own_seg_name, sizeof(own_seg_name), "%d-%" PRIu64 ELIDE_SEG_SUFFIX, (int)getpid(), start_time);
	snap = own_segment_read(SEG_READ_NO_LOCKS);
	if (snap->header.elision != ELIDE_SEG_ELISION_ON) {
		printf("SKIP: libelide is not eliding: %s\n", snap->header.status_reason);
		seg_snapshot_free(snap);
		exit(EXIT_SKIP);
	}
	return snap;
}

/* A decimal number lo..hi from the command line, else exit 2 (usage). */
static unsigned long arg_number(const char *arg, unsigned long lo, unsigned long hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || v < lo || v > hi) {
		fprintf(stderr, "%s: '%s': want a number %lu..%lu\n", program_invocation_short_name, arg, lo, hi);
		exit(2);
	}
	return v;
}

#endif
