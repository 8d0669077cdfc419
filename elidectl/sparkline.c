/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "sparkline.h"

/* U+2581 .. U+2588, lower one eighth block to full block. */
static const char *const blocks[SPARK_LEVELS] = {
	"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84",
	"\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88",
};
/* No space in it: a space is an unknown point, '_' a quiet one. */
static const char ascii_ramp[SPARK_LEVELS + 1] = "_.:-=+*#";

static bool known(double v)
{
	return v >= 0; /* false for NaN too */
}

static double largest(const double *values, size_t n)
{
	double max = 0;

	for (size_t i = 0; i < n; i++)
		if (known(values[i]) && values[i] > max)
			max = values[i];
	return max;
}

static int level_of(double v, double max)
{
	if (!known(v))
		return -1;
	if (max <= 0)
		return 0;
	/* v >= max first: an infinite max would make v / max NaN. */
	if (v >= max)
		return SPARK_LEVELS - 1;
	return (int)(v / max * (SPARK_LEVELS - 1) + 0.5);
}

void spark_levels(const double *values, size_t n, int *levels)
{
	double max = largest(values, n);

	for (size_t i = 0; i < n; i++)
		levels[i] = level_of(values[i], max);
}

int sparkline(const double *values, size_t n, size_t width, bool utf8, char *buf, size_t size)
{
	size_t point_max = utf8 ? SPARK_POINT_MAX : 1, shown = n < width ? n : width, out = width - shown;
	double max;

	if (size == 0 || width > (size - 1) / point_max)
		return -ENOBUFS;
	values += n - shown;
	max = largest(values, shown);
	memset(buf, ' ', out);
	for (size_t i = 0; i < shown; i++) {
		int level = level_of(values[i], max);

		if (level < 0)
			buf[out++] = ' ';
		else if (!utf8)
			buf[out++] = ascii_ramp[level];
		else {
			memcpy(buf + out, blocks[level], SPARK_POINT_MAX);
			out += SPARK_POINT_MAX;
		}
	}
	buf[out] = '\0';
	return 0;
}
