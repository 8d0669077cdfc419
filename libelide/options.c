/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ELIDE option string parser.  Runs from libelide's constructor, possibly
 * before malloc is usable, so it neither allocates nor touches stdio.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "macros.h"
#include "options.h"

enum opt_type {
	OPT_UINT,
	OPT_POW2,
	OPT_BOOL,
	OPT_RATIO,
	OPT_MODE,
	OPT_REPORT,
};

struct opt_desc {
	const char *name;
	enum opt_type type;
	size_t offset;
	unsigned min, max;
	const char *range_why;  /* value parsed but outside min..max */
	const char *syntax_why; /* value is not of the right form */
};

#define OPT_U(field, lo, hi)                                                   \
	{ #field, OPT_UINT, offsetof(struct elide_options, field), lo, hi,     \
	  "value out of range " #lo ".." #hi,                                  \
	  "not a decimal number " #lo ".." #hi }
#define OPT_B(field)                                                           \
	{ #field, OPT_BOOL, offsetof(struct elide_options, field), 0, 1,       \
	  "must be 0 or 1", "must be 0 or 1" }

static const struct opt_desc opt_table[] = {
	{ "mode", OPT_MODE, offsetof(struct elide_options, mode), 0, 0,
	  "mode must be adaptive, on, off or watch", "mode must be adaptive, on, off or watch" },
	OPT_U(retries, 0, 64),
	OPT_U(busy_retries, 0, 64),
	OPT_U(busy_spins, 0, 1000000),
	OPT_U(wait_spins, 0, 1000),
	OPT_U(contention, 1, 65535),
	OPT_U(skip, 1, 1000000),
	OPT_U(skip_max, 1, 100000000),
	{ "abort_ratio", OPT_RATIO, offsetof(struct elide_options, abort_ratio), 0, 1,
	  "value out of range 0..1", "not a decimal fraction 0..1" },
	OPT_U(window, 1, 100000000),
	{ "sample", OPT_POW2, offsetof(struct elide_options, sample), 1, 65536,
	  "value out of range 1..65536 (power of two)",
	  "not a decimal number 1..65536 (power of two)" },
	OPT_U(max_locks, 16, 65535),
	{ "report", OPT_REPORT, offsetof(struct elide_options, report), 0, 0,
	  "path too long", "must be 0, 1 or an absolute path" },
	OPT_B(stats),
	OPT_B(fork_segment),
	OPT_B(force_normal),
	OPT_B(verbose),
	OPT_B(own_mutex),
	OPT_B(own_rwlock),
	OPT_B(watch),
	{ "watch_sample", OPT_POW2, offsetof(struct elide_options, watch_sample), 1, 65536,
	  "value out of range 1..65536 (power of two)",
	  "not a decimal number 1..65536 (power of two)" },
};

void elide_options_defaults(struct elide_options *opts)
{
	*opts = (struct elide_options){
		.mode = ELIDE_MODE_ADAPTIVE,
		.retries = 3,
		.busy_retries = 3,
		.busy_spins = 400,
		.wait_spins = 32,
		.contention = 4,
		.skip = 16,
		.skip_max = 65536,
		.abort_ratio = 0.5,
		.window = 1000,
		.sample = 64,
		.max_locks = 4096,
		.report = false,
		.report_path = "",
		.stats = true,
		.fork_segment = true,
		.force_normal = false,
		.verbose = false,
		.own_mutex = true,
		.own_rwlock = true,
		.watch = true,
		.watch_sample = 1024,
	};
}

const char *elide_mode_to_string(enum elide_mode mode)
{
	switch (mode) {
	case ELIDE_MODE_ADAPTIVE:
		return "adaptive";
	case ELIDE_MODE_ON:
		return "on";
	case ELIDE_MODE_OFF:
		return "off";
	case ELIDE_MODE_WATCH:
		return "watch";
	}
	return "unknown";
}

static bool token_eq(const char *s, size_t len, const char *lit)
{
	return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

/* Plain decimal digits only: no sign, no spaces, no 0x.  Saturates at
 * ULLONG_MAX so an overlong number reads as out of range, not as garbage. */
static int parse_decimal(const char *s, size_t len, unsigned long long *ret)
{
	unsigned long long v = 0;

	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		d = (unsigned)(s[i] - '0');
		if (v > (ULLONG_MAX - d) / 10)
			v = ULLONG_MAX;
		else
			v = v * 10 + d;
	}
	*ret = v;
	return 0;
}

/* "1", "0.25", ".5", "1.000": digits with at most one '.', at least one
 * digit.  Hand-rolled because strtod wants a NUL-terminated string and
 * honours the locale. */
static int parse_fraction(const char *s, size_t len, double *ret)
{
	double v = 0.0, scale = 1.0;
	bool dot = false, digits = false, big = false;

	for (size_t i = 0; i < len; i++) {
		if (s[i] == '.') {
			if (dot)
				return -EINVAL;
			dot = true;
			continue;
		}
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		digits = true;
		if (!dot) {
			/* Only 0 or 1 can be in range; don't accumulate more. */
			v = v * 10 + (s[i] - '0');
			if (v > 1.0) {
				big = true;
				v = 2.0;
			}
		} else {
			scale /= 10;
			v += (s[i] - '0') * scale;
		}
	}
	if (!digits)
		return -EINVAL;
	if (big || v > 1.0)
		return -ERANGE;
	*ret = v;
	return 0;
}

static int parse_bool(const char *s, size_t len, bool *ret)
{
	if (token_eq(s, len, "1") || token_eq(s, len, "yes") || token_eq(s, len, "true")) {
		*ret = true;
		return 0;
	}
	if (token_eq(s, len, "0") || token_eq(s, len, "no") || token_eq(s, len, "false")) {
		*ret = false;
		return 0;
	}
	return -EINVAL;
}

static int parse_mode(const char *s, size_t len, enum elide_mode *ret)
{
	if (token_eq(s, len, "adaptive"))
		*ret = ELIDE_MODE_ADAPTIVE;
	else if (token_eq(s, len, "on"))
		*ret = ELIDE_MODE_ON;
	else if (token_eq(s, len, "off"))
		*ret = ELIDE_MODE_OFF;
	else if (token_eq(s, len, "watch"))
		*ret = ELIDE_MODE_WATCH;
	else
		return -EINVAL;
	return 0;
}

/* Applies one value; returns NULL on success or the reason it was refused. */
static const char *apply(struct elide_options *opts, const struct opt_desc *d,
			 const char *val, size_t len)
{
	char *field = (char *)opts + d->offset;
	unsigned long long u;
	double r;
	bool b;
	enum elide_mode m;
	int k;

	switch (d->type) {
	case OPT_UINT:
	case OPT_POW2:
		if (parse_decimal(val, len, &u) < 0)
			return d->syntax_why;
		if (u < d->min || u > d->max)
			return d->range_why;
		if (d->type == OPT_POW2 && (u & (u - 1)) != 0)
			return "must be a power of two 1..65536";
		memcpy(field, &(unsigned){ (unsigned)u }, sizeof(unsigned));
		return NULL;
	case OPT_RATIO:
		k = parse_fraction(val, len, &r);
		if (k == -ERANGE)
			return d->range_why;
		if (k < 0)
			return d->syntax_why;
		memcpy(field, &r, sizeof(r));
		return NULL;
	case OPT_BOOL:
		if (parse_bool(val, len, &b) < 0)
			return d->syntax_why;
		memcpy(field, &b, sizeof(b));
		return NULL;
	case OPT_MODE:
		if (parse_mode(val, len, &m) < 0)
			return d->syntax_why;
		memcpy(field, &m, sizeof(m));
		return NULL;
	case OPT_REPORT:
		if (len == 0 || val[0] != '/') {
			if (parse_bool(val, len, &opts->report) < 0)
				return d->syntax_why;
			opts->report_path[0] = '\0';
			return NULL;
		}
		if (len >= sizeof(opts->report_path))
			return d->range_why;
		memcpy(opts->report_path, val, len);
		opts->report_path[len] = '\0';
		opts->report = true;
		return NULL;
	}
	return "internal error: bad option type";
}

static const char *parse_pair(struct elide_options *opts, const char *pair, size_t len)
{
	const char *eq = memchr(pair, '=', len);
	size_t klen;

	if (!eq)
		return "missing '='";
	klen = (size_t)(eq - pair);
	for (size_t i = 0; i < ARRAY_SIZE(opt_table); i++)
		if (token_eq(pair, klen, opt_table[i].name))
			return apply(opts, &opt_table[i], eq + 1, len - klen - 1);
	return "unknown option";
}

int elide_options_parse(struct elide_options *opts, const char *str,
			elide_option_error_fn on_error, void *userdata)
{
	int rejected = 0;

	if (!str)
		return 0;

	while (*str) {
		const char *end = strchrnul(str, ',');
		size_t len = (size_t)(end - str);

		if (len > 0) {
			const char *why = parse_pair(opts, str, len);

			if (why) {
				rejected++;
				if (on_error)
					on_error(str, len, why, userdata);
			}
		}
		str = *end ? end + 1 : end;
	}
	return rejected;
}
