/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer harness: the input is elided's learned-policy store file as a
 * bad disk, a bad copy or an editor might leave it.  The store has small
 * caps (8 per uid, 32 in all) so that inputs reach them.  A store that
 * loads must hold only entries that learned_store_put would accept, within
 * the caps, and must come back unchanged from a save and a reload; a
 * rejected one must say where and leave the store empty and usable.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz-util.h"
#include "learned.h"

#define PER_UID_CAP 8
#define TOTAL_CAP 32

static void fail(const char *what, const char *err)
{
	fprintf(stderr, "fuzz-learned: %s%s%s\n", what, err ? ": " : "", err ? err : "");
	abort();
}

static int check_entry(uid_t uid, const char *program, const char *lock, const struct learned_entry *e, void *userdata)
{
	const struct learned_store *s = userdata;
	size_t plen = strnlen(program, LEARNED_STR_MAX + 1), llen = strnlen(lock, LEARNED_STR_MAX + 1);

	if (uid == LEARNED_ANY_UID || plen == 0 || plen > LEARNED_STR_MAX || llen == 0 || llen > LEARNED_STR_MAX)
		fail("an entry with a bad key", NULL);
	if ((e->verdict != LEARNED_NEVER && e->verdict != LEARNED_ELIDES) || e->first_learned < 0 ||
	    e->first_learned > e->last_updated)
		fail("an entry with bad values", NULL);
	if (learned_store_find(s, uid, program, lock) != e || learned_store_uid_count(s, uid) > PER_UID_CAP)
		fail("an entry not found, or over the cap", NULL);
	return 0;
}

static int same_as_in(uid_t uid, const char *program, const char *lock, const struct learned_entry *e, void *userdata)
{
	const struct learned_entry *o = learned_store_find(userdata, uid, program, lock);

	if (!o || o->verdict != e->verdict || o->runs != e->runs || o->acquired != e->acquired ||
	    o->attempts != e->attempts || o->commits != e->commits || memcmp(o->aborts, e->aborts, sizeof(o->aborts)) ||
	    o->first_learned != e->first_learned || o->last_updated != e->last_updated)
		fail("an entry changed in a save and reload", program);
	return 0;
}

/* Saves s, loads it back into t: the same entries. */
static void round_trip(const struct learned_store *s, struct learned_store *t)
{
	char err[LEARNED_ERR_MAX];

	if (learned_store_save(s, fuzz_dirfd(), "learned.out", err, sizeof(err)) < 0)
		fail("save", err);
	if (learned_store_load(t, fuzz_dirfd(), "learned.out", err, sizeof(err)) < 0)
		fail("reload of what was saved", err);
	if (learned_store_count(t) != learned_store_count(s))
		fail("a different count after a save and reload", NULL);
	learned_store_foreach(s, same_as_in, t);
	unlinkat(fuzz_dirfd(), "learned.out", 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct learned_entry v = { .verdict = LEARNED_ELIDES, .runs = 1 };
	struct learned_store *s = NULL, *t = NULL;
	char err[LEARNED_ERR_MAX];
	int r;

	if (learned_store_new(PER_UID_CAP, TOTAL_CAP, &s) < 0 || learned_store_new(PER_UID_CAP, TOTAL_CAP, &t) < 0)
		fail("learned_store_new", NULL);
	fuzz_write("learned", data, size);

	err[0] = '\0';
	r = learned_store_load(s, fuzz_dirfd(), "learned", err, sizeof(err));
	if (r == 0) {
		if (learned_store_count(s) > TOTAL_CAP)
			fail("more entries than the total cap", NULL);
		learned_store_foreach(s, check_entry, s);
		round_trip(s, t);
	} else if (r != -EBADMSG || !memchr(err, '\0', sizeof(err)) || strncmp(err, "learned:", 8) ||
		   learned_store_count(s) != 0) {
		/* Bad input gets a clear error and leaves nothing behind. */
		fprintf(stderr, "fuzz-learned: load %d: \"%s\", %zu entries left\n", r, err, learned_store_count(s));
		abort();
	}
	/* Whatever came of it, the store takes entries. */
	if (learned_store_put(s, 1000, "build-id:00", "fuzz_lock", &v, 1) < 0 ||
	    !learned_store_find(s, 1000, "build-id:00", "fuzz_lock"))
		fail("put after load", NULL);

	learned_store_free(s);
	learned_store_free(t);
	unlinkat(fuzz_dirfd(), "learned", 0);
	return 0;
}
