// SPDX-License-Identifier: MIT
/* libFuzzer harness: the return-type stripper runs on every demangled symbol name, and
 * those names come from untrusted ELF files. (The demangler itself is libstdc++'s.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	size_t before;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	before = strlen(s);
	demangle__strip_return_type(s);
	if (strlen(s) > before)
		abort();
	free(s);
	return 0;
}
