// SPDX-License-Identifier: MIT
/* libFuzzer harness: whatever name a target chooses, what reaches the terminal is valid
 * UTF-8 with no control character but newline and tab. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ttyesc.h"

static void check_utf8_no_controls(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t len = c < 0x80		      ? 1
			     : c >= 0xc2 && c <= 0xdf ? 2
			     : c >= 0xe0 && c <= 0xef ? 3
			     : c >= 0xf0 && c <= 0xf4 ? 4
						      : 0;

		if (!len || i + len > n)
			abort();
		if (len == 1 && ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f))
			abort();
		if (len == 2 && c == 0xc2 && s[i + 1] < 0xa0) /* C1 */
			abort();
		for (size_t k = 1; k < len; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				abort();
		i += len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t cap = size * 4 + 1;
	char *out = malloc(cap);
	size_t n;

	if (!out)
		return 0;
	n = ttyesc__string((const char *)data, size, out, cap);
	if (n >= cap || out[n] != '\0')
		abort();
	check_utf8_no_controls((const unsigned char *)out, n);
	free(out);
	return 0;
}
