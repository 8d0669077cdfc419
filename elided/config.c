/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elided's policy file: /etc/elide.conf plus every *.conf in /etc/elide.conf.d, in
 * libconfig syntax, validated strictly (unknown keys, wrong types and
 * out-of-range values are errors with "FILE:LINE: what"), folded into one
 * struct elide_config.  Each load builds a fresh struct, so a bad reload
 * leaves the running policy alone.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <grp.h>
#include <inttypes.h>
#include <libconfig.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "errbuf.h"
#include "macros.h"
#include "policy-config.h"

#define BUILTIN_NAME "(built-in default)"
#define GLOB_MAX 4096

#define DEFAULT_INTERVAL 1.0
#define DEFAULT_MAX_SEGMENTS_PER_UID 64
#define DEFAULT_MAX_ABORT_RATIO 0.5
#define DEFAULT_MIN_ABORTS 1000

/*
 * The errors of one load, one "FILE:LINE: what" a line: every error of
 * every file is reported in one run, the first CONFIG_MAX_ERRORS of them
 * in full, then how many more there were.
 */
struct errs {
	char *buf;                   /* the caller's, or NULL */
	size_t size;
	size_t len;
	unsigned n;                  /* errors seen, shown or not */
};

static void err_add(struct errs *e, const char *fmt, ...) _printf_(2, 3);
static void err_add(struct errs *e, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (e->n++ >= CONFIG_MAX_ERRORS || !e->buf || e->size == 0)
		return;
	if (e->len > 0 && e->len + 1 < e->size) {
		e->buf[e->len++] = '\n';
		e->buf[e->len] = '\0';
	}
	if (e->len + 1 >= e->size)
		return;
	va_start(ap, fmt);
	w = vsnprintf(e->buf + e->len, e->size - e->len, fmt, ap);
	va_end(ap);
	if (w > 0)
		e->len = e->len + (size_t)w < e->size ? e->len + (size_t)w : e->size - 1;
}

/* After the last error: how many were not shown. */
static void err_finish(struct errs *e)
{
	unsigned more = e->n > CONFIG_MAX_ERRORS ? e->n - CONFIG_MAX_ERRORS : 0;

	if (!more || !e->buf || e->len + 1 >= e->size)
		return;
	snprintf(e->buf + e->len, e->size - e->len, "%s%u more error%s", e->len ? "\n" : "", more,
		 more == 1 ? "" : "s");
}

/* One file being parsed: where messages point and where they go. */
struct parser {
	const char *path;
	const char *dir;             /* where @include names are looked up, or NULL */
	struct errs *e;
};

/* The first error of several (-ENOMEM ends a parse at once). */
#define KEEP_FIRST(first, r)                          \
	do {                                          \
		int r_ = (r);                         \
		if (r_ < 0 && (first) == 0)           \
			(first) = r_;                 \
	} while (0)

static inline bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

static inline void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

static void libconfig_destroyp(config_t **c)
{
	if (*c)
		config_destroy(*c);
}

/*
 * "FILE:LINE" of a setting.  Settings from an @include carry that file's
 * name as written, relative to the include directory; the rest are ours.
 */
static void format_where(const struct parser *p, const char *file, unsigned line, char *buf, size_t size)
{
	if (!file)
		snprintf(buf, size, "%s:%u", p->path, line);
	else if (file[0] != '/' && p->dir)
		snprintf(buf, size, "%s/%s:%u", p->dir, file, line);
	else
		snprintf(buf, size, "%s:%u", file, line);
}

static int fail(const struct parser *p, const config_setting_t *s, const char *fmt, ...) _printf_(3, 4);
static int fail(const struct parser *p, const config_setting_t *s, const char *fmt, ...)
{
	char at[PATH_MAX + 32], what[CONFIG_ERR_LINE_MAX];
	va_list ap;

	format_where(p, config_setting_source_file(s), config_setting_source_line(s), at, sizeof(at));
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	err_add(p->e, "%s: %s", at, what);
	return -EINVAL;
}

static void where(const struct parser *p, const config_setting_t *s, char *buf, size_t size)
{
	format_where(p, config_setting_source_file(s), config_setting_source_line(s), buf, size);
}

static const char *type_name(int type)
{
	switch (type) {
	case CONFIG_TYPE_GROUP:
		return "a group";
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		return "an integer";
	case CONFIG_TYPE_FLOAT:
		return "a float";
	case CONFIG_TYPE_STRING:
		return "a string";
	case CONFIG_TYPE_BOOL:
		return "a boolean";
	case CONFIG_TYPE_ARRAY:
		return "an array";
	case CONFIG_TYPE_LIST:
		return "a list";
	default:
		return "nothing";
	}
}

/*
 * libconfig 1.5 stores integers without an L suffix as 32-bit, silently
 * wrapping bigger literals; nothing to detect here, the range checks catch
 * most of it and elide.conf tells users to write the L.
 */
static int get_int(const struct parser *p, const config_setting_t *s, long long min, long long max,
		   long long *ret)
{
	long long v;
	int type = config_setting_type(s);

	if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64)
		return fail(p, s, "%s: expected an integer, got %s", config_setting_name(s), type_name(type));
	v = config_setting_get_int64(s);
	if (v < min || v > max)
		return fail(p, s, "%s: %lld out of range %lld..%lld", config_setting_name(s), v, min, max);
	*ret = v;
	return 0;
}

/* true, false or "auto". */
static int get_observe_lock_waits(const struct parser *p, const config_setting_t *s, enum observe_lock_waits *ret)
{
	int type = config_setting_type(s);

	if (type == CONFIG_TYPE_BOOL) {
		*ret = config_setting_get_bool(s) ? OBSERVE_LOCK_WAITS_ON : OBSERVE_LOCK_WAITS_OFF;
		return 0;
	}
	if (type == CONFIG_TYPE_STRING && streq(config_setting_get_string(s), "auto")) {
		*ret = OBSERVE_LOCK_WAITS_AUTO;
		return 0;
	}
	if (type == CONFIG_TYPE_STRING)
		return fail(p, s, "%s: expected true, false or \"auto\", got \"%s\"", config_setting_name(s),
			    config_setting_get_string(s));
	return fail(p, s, "%s: expected true, false or \"auto\", got %s", config_setting_name(s), type_name(type));
}

static int get_number(const struct parser *p, const config_setting_t *s, double min, double max, double *ret)
{
	int type = config_setting_type(s);
	double v;

	if (type == CONFIG_TYPE_FLOAT)
		v = config_setting_get_float(s);
	else if (type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64)
		v = (double)config_setting_get_int64(s);
	else
		return fail(p, s, "%s: expected a number, got %s", config_setting_name(s), type_name(type));
	/* Written so that NaN fails too. */
	if (!(v >= min && v <= max))
		return fail(p, s, "%s: %g out of range %g..%g", config_setting_name(s), v, min, max);
	*ret = v;
	return 0;
}

static int get_string(const struct parser *p, const config_setting_t *s, const char **ret)
{
	int type = config_setting_type(s);

	if (type != CONFIG_TYPE_STRING)
		return fail(p, s, "%s: expected a string, got %s", config_setting_name(s), type_name(type));
	*ret = config_setting_get_string(s);
	return 0;
}

static int get_mode(const struct parser *p, const config_setting_t *s, enum policy_mode *ret)
{
	const char *v = NULL;
	int r;

	r = get_string(p, s, &v);
	if (r < 0)
		return r;
	if (policy_mode_from_string(v, ret) < 0)
		return fail(p, s, "%s: invalid mode \"%s\" (expected \"adaptive\", \"on\", \"off\" or \"watch\")",
			    config_setting_name(s), v);
	return 0;
}

/*
 * glibc's fnmatch() quietly treats an unclosed '[' as a literal, which is
 * never what the writer meant; check bracket expressions and escapes here.
 */
static const char *glob_problem(const char *g)
{
	static const char *const classes[] = {
		"alnum", "alpha", "blank", "cntrl", "digit", "graph",
		"lower", "print", "punct", "space", "upper", "xdigit",
	};
	int r;

	for (const char *c = g; *c; c++) {
		if (*c == '\\') {
			if (!c[1])
				return "trailing backslash";
			c++;
			continue;
		}
		if (*c != '[')
			continue;

		c++;
		if (*c == '!' || *c == '^')
			c++;
		if (*c == ']')           /* a leading ']' is a member */
			c++;
		for (;; c++) {
			if (!*c)
				return "unbalanced '['";
			if (*c == ']')
				break;
			if (*c == '\\') {
				if (!c[1])
					return "trailing backslash";
				c++;
				continue;
			}
			if (*c == '[' && (c[1] == ':' || c[1] == '.' || c[1] == '=')) {
				char delim = c[1];
				const char *start = c + 2, *end;

				end = start;
				while (*end && !(end[0] == delim && end[1] == ']'))
					end++;
				if (!*end)
					return "unbalanced '[' in bracket expression";
				if (delim == ':') {
					bool known = false;

					for (size_t i = 0; i < ARRAY_SIZE(classes); i++)
						if ((size_t)(end - start) == strlen(classes[i]) &&
						    strncmp(start, classes[i], end - start) == 0)
							known = true;
					if (!known)
						return "unknown character class";
				}
				c = end + 1;
			}
		}
	}

	/* Anything else fnmatch() itself refuses. */
	r = fnmatch(g, "", 0);
	if (r != 0 && r != FNM_NOMATCH)
		return "rejected by fnmatch()";
	return NULL;
}

static int get_glob(const struct parser *p, const config_setting_t *s, char **ret)
{
	const char *v = NULL, *why;
	char *copy;
	size_t len;
	int r;

	r = get_string(p, s, &v);
	if (r < 0)
		return r;
	/* libconfig strings are C strings: an embedded NUL cannot reach us. */
	len = strlen(v);
	if (len == 0)
		return fail(p, s, "%s: empty pattern", config_setting_name(s));
	if (len > GLOB_MAX)
		return fail(p, s, "%s: pattern longer than %d bytes", config_setting_name(s), GLOB_MAX);
	why = glob_problem(v);
	if (why)
		return fail(p, s, "%s: bad glob \"%s\": %s", config_setting_name(s), v, why);

	copy = strdup(v);
	if (!copy)
		return -ENOMEM;
	free(*ret);
	*ret = copy;
	return 0;
}

static int lookup_user(const char *name, uid_t *ret)
{
	_cleanup_free_ char *buf = NULL;
	struct passwd pw, *res = NULL;
	long sz = sysconf(_SC_GETPW_R_SIZE_MAX);
	size_t bufsize = sz > 0 ? (size_t)sz : 1024;
	int r;

	for (;;) {
		char *n = realloc(buf, bufsize);

		if (!n)
			return -ENOMEM;
		buf = n;
		r = getpwnam_r(name, &pw, buf, bufsize, &res);
		if (r != ERANGE)
			break;
		if (bufsize > 1024 * 1024)
			return -ERANGE;
		bufsize *= 2;
	}
	/* NSS modules report "no such user" in several ways. */
	if (r == 0 && !res)
		return -ESRCH;
	if (r == ENOENT || r == ESRCH || r == EBADF || r == EPERM)
		return -ESRCH;
	if (r > 0)
		return -r;
	*ret = res->pw_uid;
	return 0;
}

/* user = "name" | "1000" | 1000 */
static int get_user(const struct parser *p, const config_setting_t *s, struct program_rule *rule)
{
	char numbuf[32];
	const char *v;
	uid_t uid;
	char *copy;
	int type = config_setting_type(s);
	int r;

	if (type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64) {
		long long n;

		r = get_int(p, s, 0, (long long)UINT32_MAX - 1, &n);
		if (r < 0)
			return r;
		uid = (uid_t)n;
		snprintf(numbuf, sizeof(numbuf), "%lld", n);
		v = numbuf;
	} else if (type != CONFIG_TYPE_STRING) {
		return fail(p, s, "user: expected a user name or uid, got %s", type_name(type));
	} else {
		v = config_setting_get_string(s);
		if (!*v)
			return fail(p, s, "user: empty user name");
		if (strspn(v, "0123456789") == strlen(v)) {
			char *end;
			unsigned long long n;

			errno = 0;
			n = strtoull(v, &end, 10);
			if (errno || *end || n >= UINT32_MAX)
				return fail(p, s, "user: uid \"%s\" out of range", v);
			uid = (uid_t)n;
		} else {
			r = lookup_user(v, &uid);
			if (r == -ENOMEM)
				return r;
			if (r == -ESRCH)
				return fail(p, s, "user: unknown user \"%s\"", v);
			if (r < 0)
				return fail(p, s, "user: cannot look up user \"%s\": %s", v, strerror(-r));
		}
	}

	copy = strdup(v);
	if (!copy)
		return -ENOMEM;
	free(rule->user);
	rule->user = copy;
	rule->uid = uid;
	return 0;
}

/* Returns 1 when `s` is a knob (and stores it), 0 when it is not one. */
static int parse_knob(const struct parser *p, const config_setting_t *s, struct policy_knobs *k)
{
	const char *name = config_setting_name(s);
	long long v;
	int r;

	if (streq(name, "max_abort_ratio")) {
		r = get_number(p, s, 0.0, 1.0, &k->max_abort_ratio);
		return r < 0 ? r : 1;
	}
	if (streq(name, "min_aborts")) {
		r = get_int(p, s, 1, LLONG_MAX, &v);
		if (r < 0)
			return r;
		k->min_aborts = (uint64_t)v;
		return 1;
	}
	if (streq(name, "retries")) {
		r = get_int(p, s, 0, 64, &v);
		if (r < 0)
			return r;
		k->retries_plus1 = (uint32_t)v + 1;
		return 1;
	}
	if (streq(name, "contention")) {
		r = get_int(p, s, 1, 65535, &v);
		if (r < 0)
			return r;
		k->contention = (uint32_t)v;
		return 1;
	}
	if (streq(name, "skip")) {
		r = get_int(p, s, 1, 1000000, &v);
		if (r < 0)
			return r;
		k->skip = (uint32_t)v;
		return 1;
	}
	if (streq(name, "skip_max")) {
		r = get_int(p, s, 1, 100000000, &v);
		if (r < 0)
			return r;
		k->skip_max = (uint32_t)v;
		return 1;
	}
	return 0;
}

static int expect_group(const struct parser *p, const config_setting_t *s, const char *what)
{
	if (!config_setting_is_group(s))
		return fail(p, s, "%s: expected a group { ... }, got %s", what, type_name(config_setting_type(s)));
	return 0;
}

static int expect_list(const struct parser *p, const config_setting_t *s, const char *what)
{
	if (!config_setting_is_list(s))
		return fail(p, s, "%s: expected a list of groups ( { ... }, ... ), got %s", what,
			    type_name(config_setting_type(s)));
	return 0;
}

/* An absolute directory path; "" turns the output off again (a drop-in
 * may undo the main file).  Whether it exists is checked at each write. */
static int get_metrics_dir(const struct parser *p, const config_setting_t *s, char **ret)
{
	const char *v = NULL;
	char *copy = NULL;
	int r = get_string(p, s, &v);

	if (r < 0)
		return r;
	if (!v)
		return fail(p, s, "metrics_dir: no value");
	if (v[0] && v[0] != '/')
		return fail(p, s, "metrics_dir: \"%s\" is not an absolute path", v);
	if (strlen(v) >= 4096)
		return fail(p, s, "metrics_dir: longer than 4095 bytes");
	if (v[0]) {
		copy = strdup(v);
		if (!copy)
			return fail(p, s, "%s", strerror(ENOMEM));
	}
	free(*ret);
	*ret = copy;
	return 0;
}

/* A group name or number; "" is root's group again. */
static int get_metrics_group(const struct parser *p, const config_setting_t *s, gid_t *ret)
{
	const char *v = NULL;
	struct group *gr;
	unsigned long n;
	char *end;
	int r = get_string(p, s, &v);

	if (r < 0)
		return r;
	if (!v)
		return fail(p, s, "metrics_group: no value");
	if (!v[0]) {
		*ret = (gid_t)-1;
		return 0;
	}
	errno = 0;
	n = strtoul(v, &end, 10);
	if (!errno && !*end && v[0] >= '0' && v[0] <= '9' && n < (unsigned long)(gid_t)-1) {
		*ret = (gid_t)n;
		return 0;
	}
	gr = getgrnam(v);
	if (!gr)
		return fail(p, s, "metrics_group: no group \"%s\"", v);
	*ret = gr->gr_gid;
	return 0;
}

static int parse_daemon(const struct parser *p, const config_setting_t *g, struct elide_config *cfg)
{
	int first = 0, r = expect_group(p, g, "daemon");

	if (r < 0)
		return r;
	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const char *name = config_setting_name(s);
		long long v;

		if (streq(name, "interval")) {
			r = get_number(p, s, 0.05, 3600.0, &cfg->interval);
		} else if (streq(name, "max_segments_per_uid")) {
			r = get_int(p, s, 1, 100000, &v);
			if (r >= 0)
				cfg->max_segments_per_uid = (uint32_t)v;
		} else if (streq(name, "observe_lock_waits")) {
			r = get_observe_lock_waits(p, s, &cfg->observe_lock_waits);
		} else if (streq(name, "metrics_dir")) {
			r = get_metrics_dir(p, s, &cfg->metrics_dir);
		} else if (streq(name, "metrics_group")) {
			r = get_metrics_group(p, s, &cfg->metrics_gid);
		} else if (streq(name, "metrics_interval")) {
			r = get_number(p, s, 1.0, 3600.0, &cfg->metrics_interval);
		} else if (streq(name, "metrics_programs")) {
			r = get_int(p, s, 1, 10000, &v);
			if (r >= 0)
				cfg->metrics_programs = (uint32_t)v;
		} else if (streq(name, "metrics_locks")) {
			r = get_int(p, s, 0, 1000, &v);
			if (r >= 0)
				cfg->metrics_locks = (uint32_t)v;
		} else
			r = fail(p, s, "unknown key \"%s\" in daemon", name);
		if (r == -ENOMEM)
			return r;
		KEEP_FIRST(first, r);
	}
	return first;
}

static int parse_default(const struct parser *p, const config_setting_t *g, struct elide_config *cfg)
{
	int first = 0, r = expect_group(p, g, "default");

	if (r < 0)
		return r;
	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const char *name = config_setting_name(s);

		if (streq(name, "mode"))
			r = get_mode(p, s, &cfg->default_mode);
		else {
			r = parse_knob(p, s, &cfg->default_knobs);
			if (r == 0)
				r = fail(p, s, "unknown key \"%s\" in default", name);
		}
		KEEP_FIRST(first, r);
	}
	return first;
}

static void lock_rule_clear(struct lock_rule *l)
{
	free(l->name);
	free(l->function);
	l->name = l->function = NULL;
}

static void program_rule_clear(struct program_rule *rule)
{
	free(rule->exe);
	free(rule->comm);
	free(rule->user);
	free(rule->unit);
	free(rule->slice);
	for (size_t i = 0; i < rule->nlocks; i++)
		lock_rule_clear(&rule->locks[i]);
	free(rule->locks);
	*rule = (struct program_rule){ .uid = (uid_t)-1 };
}

static int parse_lock(const struct parser *p, const config_setting_t *g, struct lock_rule *l)
{
	int first = 0, r = expect_group(p, g, "lock entry");

	if (r < 0)
		return r;
	where(p, g, l->where, sizeof(l->where));
	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const char *name = config_setting_name(s);

		if (streq(name, "name"))
			r = get_glob(p, s, &l->name);
		else if (streq(name, "function"))
			r = get_glob(p, s, &l->function);
		else if (streq(name, "mode"))
			r = get_mode(p, s, &l->mode);
		else
			r = fail(p, s, "unknown key \"%s\" in lock", name);
		if (r == -ENOMEM)
			return r;
		KEEP_FIRST(first, r);
	}
	/* A key given but invalid is not also reported missing. */
	if (!l->name && !l->function && !config_setting_get_member(g, "name") &&
	    !config_setting_get_member(g, "function"))
		KEEP_FIRST(first, fail(p, g, "lock: needs \"name\" and/or \"function\""));
	if (l->mode == POLICY_MODE_UNSET && !config_setting_get_member(g, "mode"))
		KEEP_FIRST(first, fail(p, g, "lock: \"mode\" is required"));
	return first;
}

static int parse_locks(const struct parser *p, const config_setting_t *list, struct program_rule *rule)
{
	int n, r, first = 0;

	r = expect_list(p, list, "lock");
	if (r < 0)
		return r;
	n = config_setting_length(list);
	if (n == 0)
		return 0;
	rule->locks = calloc(n, sizeof(*rule->locks));
	if (!rule->locks)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		/* Count it first so that a half-parsed entry is freed too. */
		rule->nlocks++;
		r = parse_lock(p, config_setting_get_elem(list, i), &rule->locks[i]);
		if (r == -ENOMEM)
			return r;
		KEEP_FIRST(first, r);
	}
	return first;
}

static int parse_program(const struct parser *p, const config_setting_t *g, struct program_rule *rule)
{
	const config_setting_t *locks = NULL;
	int first = 0, r = expect_group(p, g, "program entry");

	if (r < 0)
		return r;
	where(p, g, rule->where, sizeof(rule->where));
	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const char *name = config_setting_name(s);

		if (streq(name, "exe"))
			r = get_glob(p, s, &rule->exe);
		else if (streq(name, "comm"))
			r = get_glob(p, s, &rule->comm);
		else if (streq(name, "unit"))
			r = get_glob(p, s, &rule->unit);
		else if (streq(name, "slice"))
			r = get_glob(p, s, &rule->slice);
		else if (streq(name, "user"))
			r = get_user(p, s, rule);
		else if (streq(name, "mode"))
			r = get_mode(p, s, &rule->mode);
		else if (streq(name, "lock")) {
			locks = s;       /* parsed once the rule is known to be sane */
			r = 0;
		} else {
			r = parse_knob(p, s, &rule->knobs);
			if (r == 0)
				r = fail(p, s, "unknown key \"%s\" in program", name);
		}
		if (r == -ENOMEM)
			return r;
		KEEP_FIRST(first, r);
	}
	/* A criterion given but invalid is not also reported missing. */
	if (!rule->exe && !rule->comm && !rule->unit && !rule->slice && !rule->user &&
	    !config_setting_get_member(g, "exe") && !config_setting_get_member(g, "comm") &&
	    !config_setting_get_member(g, "unit") && !config_setting_get_member(g, "slice") &&
	    !config_setting_get_member(g, "user"))
		KEEP_FIRST(first, fail(p, g, "program: needs at least one of \"exe\", \"comm\", \"user\", \"unit\", \"slice\""));
	if (locks) {
		r = parse_locks(p, locks, rule);
		if (r == -ENOMEM)
			return r;
		KEEP_FIRST(first, r);
	}
	return first;
}

static int parse_programs(const struct parser *p, const config_setting_t *list, struct elide_config *cfg)
{
	int n, r, first = 0;

	r = expect_list(p, list, "program");
	if (r < 0)
		return r;
	n = config_setting_length(list);
	for (int i = 0; i < n; i++) {
		struct program_rule rule = { .uid = (uid_t)-1, .knobs.max_abort_ratio = -1.0 };
		struct program_rule *rules;

		r = parse_program(p, config_setting_get_elem(list, i), &rule);
		if (r < 0) {
			/* The next rules are checked too, for their errors. */
			program_rule_clear(&rule);
			if (r == -ENOMEM)
				return r;
			KEEP_FIRST(first, r);
			continue;
		}
		rules = reallocarray(cfg->programs, cfg->nprograms + 1, sizeof(*rules));
		if (!rules) {
			program_rule_clear(&rule);
			return -ENOMEM;
		}
		cfg->programs = rules;
		cfg->programs[cfg->nprograms++] = rule;
	}
	return first;
}

static int parse_root(const struct parser *p, const config_setting_t *root, struct elide_config *cfg)
{
	int first = 0;

	for (int i = 0; i < config_setting_length(root); i++) {
		const config_setting_t *s = config_setting_get_elem(root, i);
		const char *name = config_setting_name(s);
		int r;

		if (streq(name, "daemon"))
			r = parse_daemon(p, s, cfg);
		else if (streq(name, "default"))
			r = parse_default(p, s, cfg);
		else if (streq(name, "program"))
			r = parse_programs(p, s, cfg);
		else
			r = fail(p, s, "unknown top-level key \"%s\" (expected daemon, default, program)", name);
		if (r == -ENOMEM)
			return r;
		KEEP_FIRST(first, r);
	}
	return first;
}

static int add_file(struct elide_config *cfg, const char *path, struct errs *e)
{
	if (cfg->nfiles >= CONFIG_MAX_FILES) {
		err_add(e, "%s: more than %d configuration files", path, CONFIG_MAX_FILES);
		return -E2BIG;
	}
	cfg->files[cfg->nfiles] = strdup(path);
	if (!cfg->files[cfg->nfiles])
		return -ENOMEM;
	cfg->nfiles++;
	return 0;
}

/*
 * libconfig 1.5 ends the process (its scanner's fatal error) when an
 * @include names something it can open but not read as a file, such as a
 * directory (`@include ""` names the including file's directory), and it
 * has no hook to resolve includes ourselves.  So the includes are checked
 * first: each must be a regular file (nested ones too, resolved as
 * libconfig does, against `dir`), and no line may hold a NUL byte.
 * Includes that do not exist are left to libconfig, which reports them.
 */
#define CONFIG_MAX_INCLUDE_DEPTH 10

static int check_includes(FILE *f, const char *path, const char *dir, unsigned depth, struct errs *e)
{
	_cleanup_free_ char *line = NULL;
	size_t size = 0;
	unsigned lineno = 0;
	ssize_t len;
	int r = 0;

	while (r == 0 && (len = getline(&line, &size, f)) >= 0) {
		char *name, *end, full[PATH_MAX];
		struct stat st;
		FILE *inc;

		lineno++;
		if ((size_t)len != strlen(line)) {
			err_add(e, "%s:%u: a NUL byte: not a configuration file", path, lineno);
			return -EINVAL;
		}
		name = line + strspn(line, " \t");
		if (strncmp(name, "@include", 8) != 0)
			continue;
		name += 8;
		name += strspn(name, " \t");
		if (*name++ != '"' || !(end = strchr(name, '"')))
			continue; /* libconfig's own syntax error */
		*end = '\0';
		if (snprintf(full, sizeof(full), "%s%s%s", name[0] == '/' || !dir ? "" : dir,
			     name[0] == '/' || !dir ? "" : "/", name) >= (int)sizeof(full)) {
			err_add(e, "%s:%u: @include \"%s\": path too long", path, lineno, name);
			return -ENAMETOOLONG;
		}
		if (stat(full, &st) < 0)
			continue;
		if (!S_ISREG(st.st_mode)) {
			err_add(e, "%s:%u: @include \"%s\": %s is not a regular file", path, lineno, name, full);
			return -EINVAL;
		}
		if (depth >= CONFIG_MAX_INCLUDE_DEPTH) {
			err_add(e, "%s:%u: @include \"%s\": more than %d levels of includes", path, lineno, name,
				CONFIG_MAX_INCLUDE_DEPTH);
			return -ELOOP;
		}
		inc = fopen(full, "re");
		if (!inc)
			continue;
		r = check_includes(inc, full, dir, depth + 1, e);
		fclose(inc);
	}
	return r;
}

/* Returns 1 when read, 0 when the file does not exist. */
static int load_file(struct elide_config *cfg, const char *path, struct errs *e)
{
	_cleanup_(libconfig_destroyp) config_t *lc = NULL;
	_cleanup_(fclosep) FILE *f = NULL;
	_cleanup_free_ char *dir = NULL;
	struct parser p = { .path = path, .e = e };
	char at[PATH_MAX + 32];
	config_t lcbuf;
	struct stat st;
	char *slash;
	int r;

	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		r = -errno;
		err_add(e, "%s: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fileno(f), &st) < 0) {
		r = -errno;
		err_add(e, "%s: %s", path, strerror(-r));
		return r;
	}
	if (S_ISDIR(st.st_mode)) {
		err_add(e, "%s: %s", path, strerror(EISDIR));
		return -EISDIR;
	}

	r = add_file(cfg, path, e);
	if (r < 0)
		return r;

	config_init(&lcbuf);
	lc = &lcbuf;
	/* @include names resolve next to the including file. */
	dir = strdup(path);
	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash) {
		slash[slash == dir] = '\0';
		config_set_include_dir(lc, dir);
		p.dir = dir;
	}

	r = check_includes(f, path, p.dir, 0, e);
	if (r < 0)
		return r;
	rewind(f);
	if (!config_read(lc, f)) {
		format_where(&p, config_error_file(lc), (unsigned)config_error_line(lc), at, sizeof(at));
		err_add(e, "%s: %s", at, config_error_text(lc) ?: "parse error");
		return -EINVAL;   /* a syntax error, or an @include that cannot be read */
	}

	r = parse_root(&p, config_root_setting(lc), cfg);
	if (r == -ENOMEM)
		err_add(e, "%s: %s", path, strerror(ENOMEM));
	return r < 0 ? r : 1;
}

static bool is_dropin_name(const char *name)
{
	size_t len = strlen(name);

	/* Hidden files are editor and package-manager leftovers. */
	return name[0] != '.' && len > 5 && streq(name + len - 5, ".conf");
}

/* One drop-in: the name decides the order, the first directory that has
 * it the file (or its masking). */
struct dropin {
	char *name;
	char *path;                  /* NULL: masked (a link to /dev/null) */
};

static void free_dropins(struct dropin *list, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(list[i].name);
		free(list[i].path);
	}
	free(list);
}

static int cmp_dropins(const void *a, const void *b)
{
	return strcmp(((const struct dropin *)a)->name, ((const struct dropin *)b)->name);
}

/* The *.conf of `dir` that no earlier (higher-priority) directory had. */
static int collect_dropins(const char *dir, struct dropin **list, size_t *n, struct errs *e)
{
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *de;
	int r;

	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		r = -errno;
		err_add(e, "%s: %s", dir, strerror(-r));
		return r;
	}
	for (;;) {
		struct dropin *nl, *de_new;
		struct stat st;
		bool masked, taken = false;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno) {
				r = -errno;
				err_add(e, "%s: %s", dir, strerror(-r));
				return r;
			}
			return 0;
		}
		if (!is_dropin_name(de->d_name))
			continue;
		for (size_t i = 0; i < *n && !taken; i++)
			taken = streq((*list)[i].name, de->d_name);
		if (taken)
			continue;
		/* Follow symlinks: a link to a regular file counts, one to
		 * /dev/null masks the name in the directories after this. */
		if (fstatat(dirfd(d), de->d_name, &st, 0) < 0)
			continue;
		masked = S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
		if (!S_ISREG(st.st_mode) && !masked)
			continue;
		nl = reallocarray(*list, *n + 1, sizeof(**list));
		if (!nl)
			return -ENOMEM;
		*list = nl;
		de_new = &nl[*n];
		de_new->name = strdup(de->d_name);
		de_new->path = NULL;
		if (!de_new->name || (!masked && asprintf(&de_new->path, "%s/%s", dir, de->d_name) < 0)) {
			free(de_new->name);
			return -ENOMEM;
		}
		(*n)++;
	}
}

/*
 * Every *.conf of `dirs` (highest priority first, NULL-terminated), in
 * lexical order of their names across the directories; of two files with
 * one name, the one in the earlier directory replaces the other, and a
 * link to /dev/null there drops both (systemd's drop-in rules).
 */
static int load_dropins(struct elide_config *cfg, const char *const *dirs, struct errs *e)
{
	struct dropin *list = NULL;
	size_t n = 0;
	int r = 0, q;

	for (size_t i = 0; dirs && dirs[i] && r >= 0; i++)
		r = collect_dropins(dirs[i], &list, &n, e);
	if (r >= 0 && n > 0)
		qsort(list, n, sizeof(*list), cmp_dropins);
	/* A bad file does not hide the errors of the next ones. */
	for (size_t i = 0; i < n && r != -ENOMEM; i++)
		if (list[i].path) {
			q = load_file(cfg, list[i].path, e);
			if (q < 0 && r >= 0)
				r = q;
		}
	if (r == -ENOMEM)
		err_add(e, "%s: %s", dirs && dirs[0] ? dirs[0] : "drop-ins", strerror(ENOMEM));
	free_dropins(list, n);
	return r < 0 ? r : 0;
}

static struct elide_config *config_new(void)
{
	struct elide_config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg)
		return NULL;
	cfg->interval = DEFAULT_INTERVAL;
	cfg->observe_lock_waits = OBSERVE_LOCK_WAITS_AUTO;
	cfg->max_segments_per_uid = DEFAULT_MAX_SEGMENTS_PER_UID;
	cfg->metrics_interval = 15.0;
	cfg->metrics_programs = 100;
	cfg->metrics_locks = 10;
	cfg->metrics_gid = (gid_t)-1;
	cfg->default_mode = POLICY_MODE_ADAPTIVE;
	/* The daemon-side cut-off; libelide's own knobs stay its defaults. */
	cfg->default_knobs.max_abort_ratio = DEFAULT_MAX_ABORT_RATIO;
	cfg->default_knobs.min_aborts = DEFAULT_MIN_ABORTS;
	return cfg;
}

int config_default(struct elide_config **ret)
{
	struct elide_config *cfg;

	if (!ret)
		return -EINVAL;
	cfg = config_new();
	if (!cfg)
		return -ENOMEM;
	if (add_file(cfg, BUILTIN_NAME, &(struct errs){ 0 }) < 0) {
		config_free(cfg);
		return -ENOMEM;
	}
	*ret = cfg;
	return 0;
}

int config_load(const char *main_path, const char *dropin_dir, struct elide_config **ret, char *err, size_t errlen)
{
	const char *dirs[] = { dropin_dir, NULL };

	return config_load_dirs(main_path, dirs, ret, err, errlen);
}

int config_load_dirs(const char *main_path, const char *const *dropin_dirs, struct elide_config **ret, char *err,
		     size_t errlen)
{
	struct errs errs = { .buf = err, .size = errlen }, *e = &errs;
	struct elide_config *cfg;
	int r = 0, q;

	if (!ret)
		return -EINVAL;
	errbuf_set(err, errlen, "%s", "");

	cfg = config_new();
	if (!cfg) {
		err_add(e, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	/* The drop-ins are read after a bad main file too: all their errors
	 * are reported in the same run. */
	if (main_path)
		r = load_file(cfg, main_path, e);
	if (r != -ENOMEM) {
		q = load_dropins(cfg, dropin_dirs, e);
		r = r < 0 ? r : q;
	}
	if (r >= 0 && cfg->nfiles == 0)
		r = add_file(cfg, BUILTIN_NAME, e);
	if (r < 0) {
		err_finish(e);
		config_free(cfg);
		return r;
	}
	*ret = cfg;
	return 0;
}

void config_free(struct elide_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->nprograms; i++)
		program_rule_clear(&cfg->programs[i]);
	free(cfg->programs);
	for (size_t i = 0; i < cfg->nfiles; i++)
		free(cfg->files[i]);
	free(cfg->metrics_dir);
	free(cfg);
}

/* A glob criterion: unset matches anything, a missing value matches nothing. */
static bool glob_matches(const char *glob, const char *value)
{
	if (!glob)
		return true;
	if (!value)
		return false;
	return fnmatch(glob, value, 0) == 0;
}

static bool rule_matches(const struct program_rule *rule, const struct process_identity *id)
{
	const char *unit = id->unit && *id->unit ? id->unit : NULL;
	const char *slice = id->slice && *id->slice ? id->slice : NULL;

	return glob_matches(rule->exe, id->exe) &&
	       glob_matches(rule->comm, id->comm) &&
	       (rule->uid == (uid_t)-1 || rule->uid == id->uid) &&
	       glob_matches(rule->unit, unit) &&
	       glob_matches(rule->slice, slice);
}

static void knobs_merge(struct policy_knobs *dst, const struct policy_knobs *src)
{
	if (src->retries_plus1)
		dst->retries_plus1 = src->retries_plus1;
	if (src->contention)
		dst->contention = src->contention;
	if (src->skip)
		dst->skip = src->skip;
	if (src->skip_max)
		dst->skip_max = src->skip_max;
	if (src->max_abort_ratio >= 0)
		dst->max_abort_ratio = src->max_abort_ratio;
	if (src->min_aborts)
		dst->min_aborts = src->min_aborts;
}

void config_decide(const struct elide_config *cfg, const struct process_identity *id, struct policy_decision *out)
{
	*out = (struct policy_decision){
		.mode = cfg->default_mode != POLICY_MODE_UNSET ? cfg->default_mode : POLICY_MODE_ADAPTIVE,
		.knobs = cfg->default_knobs,
	};
	if (!id)
		return;
	for (size_t i = 0; i < cfg->nprograms; i++) {
		const struct program_rule *rule = &cfg->programs[i];

		if (!rule_matches(rule, id))
			continue;
		out->rule = rule;
		if (rule->mode != POLICY_MODE_UNSET)
			out->mode = rule->mode;
		knobs_merge(&out->knobs, &rule->knobs);
		return;
	}
}

enum policy_mode config_lock_mode(const struct policy_decision *decision, const char *lock_name,
				  const char *callsite_function)
{
	const struct program_rule *rule = decision ? decision->rule : NULL;

	if (!rule)
		return POLICY_MODE_UNSET;
	if (lock_name && !*lock_name)
		lock_name = NULL;
	if (callsite_function && !*callsite_function)
		callsite_function = NULL;

	for (size_t i = 0; i < rule->nlocks; i++) {
		const struct lock_rule *l = &rule->locks[i];

		if (glob_matches(l->name, lock_name) && glob_matches(l->function, callsite_function))
			return l->mode;
	}
	return POLICY_MODE_UNSET;
}

const char *policy_mode_to_string(enum policy_mode mode)
{
	switch (mode) {
	case POLICY_MODE_UNSET:
		return "unset";
	case POLICY_MODE_ADAPTIVE:
		return "adaptive";
	case POLICY_MODE_ON:
		return "on";
	case POLICY_MODE_OFF:
		return "off";
	case POLICY_MODE_WATCH:
		return "watch";
	}
	return "invalid";
}

int policy_mode_from_string(const char *s, enum policy_mode *ret)
{
	if (!s || !ret)
		return -EINVAL;
	if (streq(s, "adaptive"))
		*ret = POLICY_MODE_ADAPTIVE;
	else if (streq(s, "on"))
		*ret = POLICY_MODE_ON;
	else if (streq(s, "off"))
		*ret = POLICY_MODE_OFF;
	else if (streq(s, "watch"))
		*ret = POLICY_MODE_WATCH;
	else
		return -EINVAL;
	return 0;
}
