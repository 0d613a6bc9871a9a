// SPDX-License-Identifier: MIT
/* libFuzzer harness: where a process's dynamic linker keeps r_state, from its maps text
 * (userspace/trace/dlstate.c): a known linker (08:01, inode 1234, r_state 0x34130 past
 * its start) among lines of any shape. The address found is past the start of a mapping
 * of it from offset 0, never wrapped. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "dlstate.h"

#define REL 0x34130ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct dlstate d;
	char *text = malloc(size + 1);
	uint64_t at;

	if (!text)
		return 0;
	if (!d.files.len && hmap__put(&d.files, (uint64_t)makedev(8, 1), 1234, 0, REL))
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	at = dlstate__addr(&d, text);
	if (at && at < REL)
		abort();
	free(text);
	return 0;
}
