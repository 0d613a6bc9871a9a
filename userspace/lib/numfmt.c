// SPDX-License-Identifier: MIT
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "numfmt.h"

const char *numfmt__grouped(char *buf, size_t len, double v)
{
	char raw[32];
	size_t n, o = 0;

	if (!len)
		return buf;
	if (isinf(v) && v > 0) {
		snprintf(buf, len, "unbounded");
		return buf;
	}
	snprintf(raw, sizeof(raw), "%.0f", v < 0 || v != v ? 0 : v);
	n = strlen(raw);
	for (size_t i = 0; i < n && o + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = raw[i];
	}
	buf[o] = '\0';
	return buf;
}
