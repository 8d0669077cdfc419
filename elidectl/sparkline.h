/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sparklines: a series of rates drawn as one line of characters, one a
 * point, for top's TREND column and show --history.  Points are scaled
 * from 0 to the largest shown (rates start at 0: a flat line of busy
 * points stays high); an unknown point (negative, NaN) is a space.
 */
#ifndef ELIDECTL_SPARKLINE_H
#define ELIDECTL_SPARKLINE_H

#include <stdbool.h>
#include <stddef.h>

#define SPARK_LEVELS 8
/* The bytes one point takes at most (a UTF-8 block character). */
#define SPARK_POINT_MAX 3

/*
 * The level of each of the n points: 0 .. SPARK_LEVELS-1, scaled so that
 * the largest is the highest; -1 for an unknown point.  A series without a
 * point above 0 is all level 0.
 */
void spark_levels(const double *values, size_t n, int *levels);

/*
 * The last `width` of the n points (oldest first) into buf, right-aligned:
 * spaces on the left where there are fewer.  `utf8`: U+2581..U+2588, else
 * the ASCII ramp "_.:-=+*#".  -ENOBUFS when buf cannot hold width points.
 */
int sparkline(const double *values, size_t n, size_t width, bool utf8, char *buf, size_t size);

#endif
