// SPDX-License-Identifier: MIT
/* libFuzzer harness: /proc/kallsyms lines, plus the loader and lookups on the same text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kallsyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *end = buf + size;
	struct kallsyms *k;
	char *copy;

	for (const char *p = buf; p <= end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		struct kallsyms_line kl;

		if (!kallsyms__parse_line(p, (size_t)(le - p), &kl)) {
			if (!kl.name_len || kl.name < p || kl.name + kl.name_len > le)
				abort();
			if (kl.mod && (kl.mod < kl.name || kl.mod + kl.mod_len > le))
				abort();
		}
		if (!nl)
			break;
		p = nl + 1;
	}

	copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	k = kallsyms__from_buf(copy, size);
	if (k) {
		const struct ksym *prev = NULL;

		for (uint64_t a = 0; a < 64; a++) {
			const struct ksym *s = kallsyms__lookup(k, a * 0x1000 + (a & 7));

			if (s && s->addr > a * 0x1000 + (a & 7))
				abort();
			prev = s ? s : prev;
		}
		(void)prev;
		kallsyms__lookup(k, UINT64_MAX);
		kallsyms__free(k);
	}
	return 0;
}
