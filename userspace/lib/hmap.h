/* SPDX-License-Identifier: MIT */
/* A small open-addressing map from a key of three u64 to a u64 value (often a pointer),
 * for the sets and tables of the tracers (objects already probed, kernel handles). */
#ifndef GPUBPF_HMAP_H
#define GPUBPF_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmap_ent {
	uint64_t k[3];
	uint64_t val;
	bool used;
};

struct hmap {
	struct hmap_ent *ents;
	size_t cap, len;
};

/* 0 or -ENOMEM. Replaces an existing value. */
int hmap__put(struct hmap *m, uint64_t a, uint64_t b, uint64_t c, uint64_t val);
/* true and *val when present (val may be NULL). */
bool hmap__get(const struct hmap *m, uint64_t a, uint64_t b, uint64_t c, uint64_t *val);
/* Free the table (not what values point to). */
void hmap__clear(struct hmap *m);

#define hmap_for_each(m, e)                                                                                            \
	for (struct hmap_ent *e = (m)->ents; (m)->ents && e < (m)->ents + (m)->cap; e++)                               \
		if (e->used)

#endif /* GPUBPF_HMAP_H */
