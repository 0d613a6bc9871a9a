// SPDX-License-Identifier: MIT
/* libFuzzer harness: /tmp/perf-PID.map lines, which the (untrusted) target writes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perfmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *end = buf + size;

	for (const char *p = buf; p <= end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		uint64_t start, sz;
		const char *name;
		size_t nlen;

		if (!perfmap__parse_line(p, (size_t)(le - p), &start, &sz, &name, &nlen)) {
			if (!sz || start + sz < start || !nlen)
				abort();
			if (name < p || name + nlen > le)
				abort();
			if (memchr(name, '\n', nlen) || name[0] == ' ' || name[nlen - 1] == ' ')
				abort();
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	return 0;
}
