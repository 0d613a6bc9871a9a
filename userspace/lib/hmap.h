/* SPDX-License-Identifier: MIT */
/* The project's one hash table: open addressing with linear probing over slots that
 * hold an entry's 64-bit hash and its index in the owner's array (so growing never
 * re-hashes a key, and the owner keeps its entries dense and in insertion order).
 *
 * - struct htab indexes an array the caller owns: the caller hashes and compares (the
 *   profile's strings, locations and samples, pprof's tables, the symbolizer's strings
 *   and objects).
 * - struct hmap is a ready map from a key of three u64 to a u64 value (often a pointer)
 *   built on it, for the sets and tables of the tracers. */
#ifndef GPUBPF_HMAP_H
#define GPUBPF_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct htab_slot {
	uint64_t hash;
	uint32_t idx1; /* the entry's index + 1; 0: empty */
};

struct htab {
	struct htab_slot *slots;
	size_t cap; /* a power of two, or 0 */
	size_t n;
};

/* Does the entry at IDX of the owner's array (CTX) have KEY? */
typedef bool (*htab_eq_fn)(const void *ctx, uint32_t idx, const void *key);

/* Room for one more entry (load factor <= 0.7): 0 or -ENOMEM. Call it before a find
 * whose empty slot will be filled. */
int htab__reserve(struct htab *t);
/* The slot of the entry equal to KEY (idx1 != 0), or the empty slot where it belongs
 * (idx1 == 0; fill it with htab__fill). NULL only while the table has no slots. */
struct htab_slot *htab__find(const struct htab *t, uint64_t hash, htab_eq_fn eq, const void *ctx, const void *key);
static inline void htab__fill(struct htab *t, struct htab_slot *s, uint64_t hash, uint32_t idx)
{
	s->hash = hash;
	s->idx1 = idx + 1;
	t->n++;
}
void htab__clear(struct htab *t);

/* Hashes: of bytes (eight a step, finished so that every bit reaches the low ones the
 * table indexes by), and a word folded into a running hash (finish with htab__final). */
uint64_t htab__final(uint64_t x);
uint64_t htab__bytes(const void *p, size_t n);
static inline uint64_t htab__word(uint64_t h, uint64_t v)
{
	h = (h << 5 | h >> 59) ^ v;
	return h * 0x9e3779b97f4a7c15ULL;
}

struct hmap_ent {
	uint64_t k[3];
	uint64_t val;
	bool used; /* always true for entries in [0, len) */
};

struct hmap {
	struct hmap_ent *ents; /* in insertion order */
	size_t cap, len;
	struct htab idx;
};

/* 0 or -ENOMEM. Replaces an existing value. */
int hmap__put(struct hmap *m, uint64_t a, uint64_t b, uint64_t c, uint64_t val);
/* true and *val when present (val may be NULL). */
bool hmap__get(const struct hmap *m, uint64_t a, uint64_t b, uint64_t c, uint64_t *val);
/* Free the table (not what values point to). */
void hmap__clear(struct hmap *m);

/* Every entry, in insertion order. */
#define hmap_for_each(m, e)                                                                                            \
	for (struct hmap_ent *e = (m)->ents; (m)->ents && e < (m)->ents + (m)->len; e++)                               \
		if (e->used)

#endif /* GPUBPF_HMAP_H */
