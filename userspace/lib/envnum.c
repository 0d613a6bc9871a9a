// SPDX-License-Identifier: MIT
#include <stdlib.h>

#include "envnum.h"

double envnum__get(const char *name, double lo, double hi, double def)
{
	const char *e = getenv(name);
	char *end;
	double v;

	if (!e || !*e)
		return def;
	v = strtod(e, &end);
	return !*end && v >= lo && v <= hi ? v : def;
}
