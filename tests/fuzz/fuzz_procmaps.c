// SPDX-License-Identifier: MIT
/* libFuzzer harness: /proc/PID/maps lines, as a hostile /proc could never write them but a
 * corrupted snapshot or a future kernel format might. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "procmaps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *end = buf + size;

	/* Whole input as one line, then line by line, as syms.c feeds it. */
	for (int pass = 0; pass < 2; pass++) {
		for (const char *p = buf; p <= end;) {
			const char *nl = pass ? memchr(p, '\n', (size_t)(end - p)) : NULL;
			const char *le = nl ? nl : end;
			struct procmaps_entry e;

			if (!procmaps__parse_line(p, (size_t)(le - p), &e)) {
				if (e.start >= e.end)
					abort();
				if (e.path && (e.path < p || e.path + e.path_len > le || !e.path_len))
					abort();
				if (procmaps__is_file(&e) && e.path[0] != '/')
					abort();
				/* the readers' look before the parse never turns code away */
				if (e.exec && !procmaps__maybe_exec(p, (size_t)(le - p)))
					abort();
			}
			if (!pass || !nl)
				break;
			p = nl + 1;
		}
	}
	return 0;
}
