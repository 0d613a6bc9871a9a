// SPDX-License-Identifier: MIT
/* libFuzzer harness: the early size check of untrusted protobuf (pprof files given to
 * report and convert), fed whole, byte by byte and through gzip. The verdict must not
 * depend on how the bytes arrive, and no claimed length may pass its limit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pbscan.h"

static struct pbscan fresh(void)
{
	struct pbscan s = {.max_field = 300, .max_string = 40, .string_field = 6};

	pbscan__init(&s);
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbscan a = fresh(), b = fresh(), g = fresh();
	unsigned char *out = NULL;
	size_t outlen = 0;
	int ra, rb = 0;

	ra = pbscan__feed(&a, data, size);
	for (size_t i = 0; i < size && !rb; i++)
		rb = pbscan__feed(&b, data + i, 1);
	if (ra != rb || (!ra && pbscan__complete(&a) != pbscan__complete(&b)))
		abort();
	if (ra == -22 /* never EINVAL */)
		abort();
	if (a.bad_len && a.bad_len <= (a.bad_field == 6 ? a.max_string : a.max_field))
		abort();
	if (!pbscan__gunzip(&g, data, size, 4096, &out, &outlen) && outlen > 4096)
		abort();
	free(out);
	return 0;
}
