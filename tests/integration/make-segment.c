/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * make-segment DIR PID [learned]: write a fixed, deterministic segment for
 * the live process PID into DIR, for elidectl's golden tests (list and
 * show, table and JSON).  With "learned", the lock that the configuration
 * turned off was turned off by a verdict of earlier runs instead.  Every number is chosen, none measured: the output of
 * elidectl on it depends only on PID and the caller's user name, which the
 * test masks.  created_ns is 0 so that no age or rate depends on the clock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "segment-reader.h"

#define CAPACITY 5u

static void set_lock(struct elide_seg_lock *l, uint32_t kind, uint32_t state, uint32_t reason, uint64_t addr,
		     const char *name, uint64_t base)
{
	l->kind = kind;
	l->state = state;
	l->reason = reason;
	l->addr = addr;
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->stats[ELIDE_SEG_STAT_ACQUIRED] = base * 10;
	l->stats[ELIDE_SEG_STAT_ATTEMPTS] = base * 8;
	l->stats[ELIDE_SEG_STAT_COMMITS] = base * 6;
	l->stats[ELIDE_SEG_STAT_FALLBACKS] = base / 2;
	l->stats[ELIDE_SEG_STAT_CONTENDED] = base / 4;
	l->stats[ELIDE_SEG_STAT_CYCLES_LOST] = base * 1234;
	l->stats[ELIDE_SEG_STAT_ABORT_CONFLICT] = base;
	l->stats[ELIDE_SEG_STAT_ABORT_CAPACITY] = base / 3;
	l->stats[ELIDE_SEG_STAT_ABORT_OTHER] = 7;
}

int main(int argc, char **argv)
{
	struct elide_seg_header h = {};
	struct elide_seg_control c = {};
	struct elide_seg_lock locks[CAPACITY] = {};
	uint64_t start;
	char path[4096];
	pid_t pid;
	int fd, r;

	if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "learned") != 0)) {
		fprintf(stderr, "usage: %s DIR PID [learned]\n", argv[0]);
		return 2;
	}
	pid = (pid_t)atoi(argv[2]);
	r = seg_proc_start_time(NULL, pid, &start);
	if (r < 0) {
		fprintf(stderr, "pid %d: %s\n", (int)pid, strerror(-r));
		return 1;
	}
	memcpy(h.magic, ELIDE_SEG_MAGIC, sizeof(h.magic));
	h.version = ELIDE_SEG_VERSION;
	h.header_size = ELIDE_SEG_HEADER_SIZE;
	h.control_offset = ELIDE_SEG_HEADER_SIZE;
	h.control_size = ELIDE_SEG_CONTROL_SIZE;
	h.locks_offset = ELIDE_SEG_HEADER_SIZE + ELIDE_SEG_CONTROL_SIZE;
	h.lock_entry_size = sizeof(struct elide_seg_lock);
	h.lock_capacity = CAPACITY;
	h.lock_high_water = CAPACITY;
	h.total_size = h.locks_offset + (uint64_t)CAPACITY * sizeof(struct elide_seg_lock);
	h.pid = pid;
	h.uid = getuid();
	h.start_time = start;
	snprintf(h.exe, sizeof(h.exe), "/opt/golden/bin/app");
	snprintf(h.comm, sizeof(h.comm), "app");
	snprintf(h.lib_version, sizeof(h.lib_version), "9.9");
	h.elision = ELIDE_SEG_ELISION_ON;
	h.mode = ELIDE_SEG_MODE_ADAPTIVE;
	h.sample = 64;
	h.rtm_usable = 1;
	snprintf(h.status_reason, sizeof(h.status_reason), "RTM usable");

	/* [0] unused, [1] overflow (counted), then three locks. */
	set_lock(&locks[1], ELIDE_SEG_KIND_OVERFLOW, ELIDE_SEG_STATE_PLAIN, ELIDE_SEG_REASON_UNCONTENDED, 0, "", 3);
	set_lock(&locks[2], ELIDE_SEG_KIND_MUTEX, ELIDE_SEG_STATE_ELIDING, ELIDE_SEG_REASON_CONTENDED, 0x1000,
		 "cache_lock", 123456);
	set_lock(&locks[3], ELIDE_SEG_KIND_RWLOCK_READ, ELIDE_SEG_STATE_OFF_ADAPT, ELIDE_SEG_REASON_ABORTS, 0x2000,
		 "table_lock", 98765432);
	set_lock(&locks[4], ELIDE_SEG_KIND_RWLOCK_WRITE, ELIDE_SEG_STATE_OFF_POLICY, ELIDE_SEG_REASON_DAEMON, 0x2000,
		 "table_lock", 42);
	locks[4].ctl_source = argc == 4 ? ELIDE_SEG_SOURCE_LEARNED : ELIDE_SEG_SOURCE_CONFIG;

	snprintf(path, sizeof(path), "%s/%d-%llu%s", argv[1], (int)pid, (unsigned long long)start, ELIDE_SEG_SUFFIX);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, &h, sizeof(h)) != (ssize_t)sizeof(h) || write(fd, &c, sizeof(c)) != (ssize_t)sizeof(c) ||
	    write(fd, locks, sizeof(locks)) != (ssize_t)sizeof(locks) || close(fd) < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return 1;
	}
	printf("%s\n", path);
	return 0;
}
