// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"

/* ---- the index table ---- */

int htab__reserve(struct htab *t)
{
	struct htab_slot *slots;
	size_t cap;

	if (t->cap && (t->n + 1) * 10 <= t->cap * 7)
		return 0;
	cap = t->cap ? t->cap * 2 : 64;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		const struct htab_slot *o = &t->slots[i];
		size_t j;

		if (!o->idx1)
			continue;
		for (j = o->hash & (cap - 1); slots[j].idx1; j = (j + 1) & (cap - 1))
			;
		slots[j] = *o;
	}
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

struct htab_slot *htab__find(const struct htab *t, uint64_t hash, htab_eq_fn eq, const void *ctx, const void *key)
{
	size_t mask, i;

	if (!t->cap)
		return NULL;
	mask = t->cap - 1;
	for (i = hash & mask;; i = (i + 1) & mask) {
		struct htab_slot *s = &t->slots[i];

		if (!s->idx1 || (s->hash == hash && eq(ctx, s->idx1 - 1, key)))
			return s;
	}
}

void htab__clear(struct htab *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

uint64_t htab__final(uint64_t x)
{
	/* splitmix64's finalizer */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* Eight bytes a step (FxHash's rotate, xor and multiply): a process's maps text, hashed
 * at every hold to see whether it changed, is hundreds of KB with thousands of mappings,
 * and FNV-1a's byte a step took 0.5 ms of each. The length goes in first, so a short tail
 * padded with zeros is no other input's. */
uint64_t htab__bytes(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ULL ^ n, w;

	for (; n >= 8; n -= 8, b += 8) {
		memcpy(&w, b, 8);
		h = ((h << 5 | h >> 59) ^ w) * 0x517cc1b727220a95ULL;
	}
	w = 0;
	memcpy(&w, b, n);
	h = ((h << 5 | h >> 59) ^ w) * 0x517cc1b727220a95ULL;
	return htab__final(h);
}

/* ---- the u64 map on it ---- */

static uint64_t key_hash(uint64_t a, uint64_t b, uint64_t c)
{
	return htab__final(htab__word(htab__word(htab__word(0, a), b), c));
}

static bool key_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct hmap_ent *e = &((const struct hmap *)ctx)->ents[idx];
	const uint64_t *k = key;

	return e->k[0] == k[0] && e->k[1] == k[1] && e->k[2] == k[2];
}

int hmap__put(struct hmap *m, uint64_t a, uint64_t b, uint64_t c, uint64_t val)
{
	const uint64_t k[3] = {a, b, c};
	uint64_t h = key_hash(a, b, c);
	struct htab_slot *s;
	struct hmap_ent *e;

	if (htab__reserve(&m->idx))
		return -ENOMEM;
	s = htab__find(&m->idx, h, key_eq, m, k);
	if (s->idx1) {
		m->ents[s->idx1 - 1].val = val;
		return 0;
	}
	if (m->len == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 16;
		struct hmap_ent *n = realloc(m->ents, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		m->ents = n;
		m->cap = ncap;
	}
	e = &m->ents[m->len];
	memcpy(e->k, k, sizeof(k));
	e->val = val;
	e->used = true;
	htab__fill(&m->idx, s, h, (uint32_t)m->len);
	m->len++;
	return 0;
}

bool hmap__get(const struct hmap *m, uint64_t a, uint64_t b, uint64_t c, uint64_t *val)
{
	const uint64_t k[3] = {a, b, c};
	const struct htab_slot *s = htab__find(&m->idx, key_hash(a, b, c), key_eq, m, k);

	if (!s || !s->idx1)
		return false;
	if (val)
		*val = m->ents[s->idx1 - 1].val;
	return true;
}

void hmap__clear(struct hmap *m)
{
	free(m->ents);
	htab__clear(&m->idx);
	m->ents = NULL;
	m->cap = m->len = 0;
}
