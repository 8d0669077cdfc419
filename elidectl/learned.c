/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl learned / forget: what elided remembers about programs' locks
 * across their runs (its learned-policy store, ListLearned), and dropping
 * it (ForgetLearned).  elided does the authorisation: a user sees and
 * forgets only what their own processes taught; root everything.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-bus.h>

#include "elidectl.h"
#include "json.h"
#include "log.h"
#include "table.h"

void format_age(int64_t since, int64_t now, char *buf, size_t size)
{
	int64_t age;

	if (since <= 0) {
		snprintf(buf, size, "-");
		return;
	}
	/* A clock set back since: not negative. */
	age = now > since ? now - since : 0;
	if (age < 60)
		snprintf(buf, size, "%" PRId64 "s", age);
	else if (age < 3600)
		snprintf(buf, size, "%" PRId64 "m", age / 60);
	else if (age < 86400)
		snprintf(buf, size, "%" PRId64 "h", age / 3600);
	else
		snprintf(buf, size, "%" PRId64 "d", age / 86400);
}

/* "path:EXE:ino=N:mtime=N" → EXE (in buf); any other identity as it is.
 * The path is everything up to the last ":ino=", as a path may hold ':'. */
static const char *program_path(const char *program, char *buf, size_t size)
{
	const char *end = NULL;

	if (strncmp(program, "path:", 5) != 0)
		return program;
	for (const char *p = strstr(program + 5, ":ino="); p; p = strstr(p + 1, ":ino="))
		end = p;
	if (!end)
		return program;
	snprintf(buf, size, "%.*s", (int)(end - (program + 5)), program + 5);
	return buf;
}

/* An older elided has no learned-policy store: said, not a bare D-Bus error. */
static int learned_error_exit(const char *what, const sd_bus_error *e, int r)
{
	if (sd_bus_error_has_name(e, SD_BUS_ERROR_UNKNOWN_METHOD)) {
		log_error("%s: this elided keeps no learned decisions (it predates them)", what);
		return EXIT_FAIL;
	}
	return bus_error_exit(what, e, r);
}

int verb_forget(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	const char *exe = argc == 2 ? argv[1] : "";
	char what[PATH_MAX + 64], shown[PATH_MAX];
	uint32_t count;
	int r;

	if (argc > 2) {
		log_error("usage: forget [EXE]");
		return EXIT_USAGE;
	}
	/* elided matches the executable's path exactly; a base name would
	 * silently match nothing. */
	if (argc == 2 && !strchr(exe, '/')) {
		log_error("forget: '%s' is not a path: EXE must be the executable's absolute path, as 'elidectl "
			  "learned' shows it", exe);
		return EXIT_USAGE;
	}
	sanitize_text(exe, shown, sizeof(shown));
	snprintf(what, sizeof(what), "cannot forget what was learned%s%s", *exe ? " of " : "", shown);
	r = sd_bus_call_method(source_bus(s), ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE,
			       "ForgetLearned", &e, &reply, "s", exe);
	if (r < 0)
		return learned_error_exit(what, &e, r);
	r = sd_bus_message_read(reply, "u", &count);
	if (r < 0)
		return bus_error_exit(what, NULL, r);

	if (o->json) {
		struct json j;

		json_init(&j, stdout, o->json_pretty);
		json_begin_object(&j);
		json_key(&j, "forgotten");
		json_uint(&j, count);
		json_key(&j, "exe");
		json_string(&j, *exe ? exe : NULL);
		json_end_object(&j);
		return json_finish(&j) < 0 ? EXIT_FAIL : EXIT_OK;
	}
	printf("forgot %" PRIu32 " learned decision%s%s%s\n", count, count == 1 ? "" : "s", *exe ? " of " : "",
	       shown);
	return EXIT_OK;
}

struct learned_row {
	uint32_t uid, runs;
	const char *program, *lock, *verdict;
	uint64_t acquired, attempts, commits, aborts;
	int64_t first_learned, last_updated;
};

static int learned_json(const struct learned_row *rows, size_t n, const struct ctl_options *o)
{
	struct json j;
	char user[64], path[PATH_MAX];

	json_init(&j, stdout, o->json_pretty);
	json_begin_array(&j);
	for (size_t i = 0; i < n; i++) {
		const struct learned_row *l = &rows[i];
		const char *exe = program_path(l->program, path, sizeof(path));

		user_name(l->uid, user, sizeof(user));
		json_begin_object(&j);
		json_key(&j, "uid");
		json_uint(&j, l->uid);
		json_key(&j, "user");
		json_string(&j, user);
		/* The identity as elided keys it; exe: its path, null for another kind. */
		json_key(&j, "program");
		json_string(&j, l->program);
		json_key(&j, "exe");
		json_string(&j, exe != l->program ? exe : NULL);
		json_key(&j, "lock");
		json_string(&j, l->lock);
		json_key(&j, "verdict");
		json_string(&j, l->verdict);
		json_key(&j, "runs");
		json_uint(&j, l->runs);
		json_key(&j, "acquired");
		json_uint(&j, l->acquired);
		json_key(&j, "attempts");
		json_uint(&j, l->attempts);
		json_key(&j, "commits");
		json_uint(&j, l->commits);
		json_key(&j, "aborts");
		json_uint(&j, l->aborts);
		json_key(&j, "first_learned");
		json_int(&j, l->first_learned);
		json_key(&j, "last_updated");
		json_int(&j, l->last_updated);
		json_end_object(&j);
	}
	json_end_array(&j);
	return json_finish(&j);
}

static const struct table_column learned_columns[] = {
	{ "USER", TABLE_HIDDEN | TABLE_SHRINK, 0.1 },
	{ "UID", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "PROGRAM", TABLE_SHRINK_MIDDLE, 0.4 },
	{ "LOCK", TABLE_SHRINK, 0.3 },
	{ "VERDICT", 0, 0 },
	{ "RUNS", TABLE_RIGHT, 0 },
	{ "ACQUIRED", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "ATTEMPTS", TABLE_RIGHT, 0 },
	{ "COMMITS", TABLE_RIGHT, 0 },
	{ "COMMIT%", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "ABORTS", TABLE_HIDDEN | TABLE_RIGHT, 0 },
	{ "AGE", TABLE_RIGHT, 0 },
	{ "UPDATED", TABLE_HIDDEN | TABLE_RIGHT, 0 },
};

static int learned_table(const struct learned_row *rows, size_t n, const struct ctl_options *o)
{
	int64_t now = (int64_t)time(NULL);
	struct table *t = NULL;
	int r;

	r = table_new(&t, "learned", learned_columns, ARRAY_SIZE(learned_columns), o->output);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		const struct learned_row *l = &rows[i];
		char user[64], path[PATH_MAX], age[32], updated[32];

		user_name(l->uid, user, sizeof(user));
		format_age(l->first_learned, now, age, sizeof(age));
		format_age(l->last_updated, now, updated, sizeof(updated));
		if ((r = table_add_cell(t, user)) < 0 ||
		    (r = table_add_cellf(t, "%" PRIu32, l->uid)) < 0 ||
		    (r = table_add_cell(t, program_path(l->program, path, sizeof(path)))) < 0 ||
		    (r = table_add_cell(t, l->lock)) < 0 ||
		    (r = table_add_cell(t, l->verdict)) < 0)
			goto out;
		table_set_color(t, strcmp(l->verdict, "never") == 0 ? TABLE_COLOR_BAD : TABLE_COLOR_GOOD);
		if ((r = table_add_cellf(t, "%" PRIu32, l->runs)) < 0 ||
		    (r = table_add_number(t, l->acquired)) < 0 ||
		    (r = table_add_number(t, l->attempts)) < 0 ||
		    (r = table_add_number(t, l->commits)) < 0 ||
		    (r = table_add_percent(t, l->commits < l->attempts ? l->commits : l->attempts, l->attempts)) < 0 ||
		    (r = table_add_number(t, l->aborts)) < 0 ||
		    (r = table_add_cell(t, age)) < 0 ||
		    (r = table_add_cell(t, updated)) < 0)
			goto out;
	}
	r = table_print(t, stdout, o->legend);
	if (r == 0 && o->legend)
		printf("\n%zu learned decision%s.\n", n, n == 1 ? "" : "s");
out:
	table_free(t);
	return r;
}

int verb_learned(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	const char *what = "cannot list what elided learned";
	struct learned_row *rows = NULL;
	size_t n = 0, allocated = 0;
	int r;

	(void)argv;
	if (argc > 1) {
		log_error("learned takes no arguments");
		return EXIT_USAGE;
	}
	if (o->sort_set || o->max_set) {
		log_error("--sort and --max apply to show only");
		return EXIT_USAGE;
	}
	/* An unknown column is a usage error before elided is asked. */
	if (o->output && !o->json &&
	    table_check_output("learned", learned_columns, ARRAY_SIZE(learned_columns), o->output) < 0)
		return EXIT_USAGE;
	r = sd_bus_call_method(source_bus(s), ELIDED_BUS_NAME, ELIDED_BUS_PATH, ELIDED_BUS_INTERFACE, "ListLearned",
			       &e, &reply, NULL);
	if (r < 0)
		return learned_error_exit(what, &e, r);
	r = sd_bus_message_enter_container(reply, 'a', "(usssuttttxx)");
	while (r >= 0) {
		struct learned_row row;

		r = sd_bus_message_read(reply, "(usssuttttxx)", &row.uid, &row.program, &row.lock, &row.verdict,
					&row.runs, &row.acquired, &row.attempts, &row.commits, &row.aborts,
					&row.first_learned, &row.last_updated);
		if (r <= 0)
			break;
		if (n == allocated) {
			size_t a = allocated ? allocated * 2 : 64;
			struct learned_row *p = reallocarray(rows, a, sizeof(*rows));

			if (!p) {
				r = -ENOMEM;
				break;
			}
			rows = p;
			allocated = a;
		}
		rows[n++] = row;
	}
	if (r < 0) {
		free(rows);
		return bus_error_exit(what, NULL, r);
	}
	r = o->json ? learned_json(rows, n, o) : learned_table(rows, n, o);
	free(rows);
	if (r == -EINVAL)
		return EXIT_USAGE; /* an unknown column, said */
	if (r < 0) {
		log_error_errno(r, "cannot write the list");
		return EXIT_FAIL;
	}
	return EXIT_OK;
}
