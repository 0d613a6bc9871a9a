// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>

#include "hmap.h"

static uint64_t mix(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t h = a * 0x9E3779B97F4A7C15ULL;

	h ^= (b + 0x632BE59BD9B4E019ULL) * 0xBF58476D1CE4E5B9ULL;
	h ^= (c + 0x94D049BB133111EBULL) * 0xD6E8FEB86659FD93ULL;
	return h ^ (h >> 31);
}

static struct hmap_ent *slot(const struct hmap *m, uint64_t a, uint64_t b, uint64_t c)
{
	size_t i = mix(a, b, c) & (m->cap - 1);

	while (m->ents[i].used && !(m->ents[i].k[0] == a && m->ents[i].k[1] == b && m->ents[i].k[2] == c))
		i = (i + 1) & (m->cap - 1);
	return &m->ents[i];
}

static int grow(struct hmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	struct hmap old = *m;

	m->ents = calloc(ncap, sizeof(*m->ents));
	if (!m->ents) {
		*m = old;
		return -ENOMEM;
	}
	m->cap = ncap;
	for (size_t i = 0; i < old.cap; i++)
		if (old.ents[i].used)
			*slot(m, old.ents[i].k[0], old.ents[i].k[1], old.ents[i].k[2]) = old.ents[i];
	free(old.ents);
	return 0;
}

int hmap__put(struct hmap *m, uint64_t a, uint64_t b, uint64_t c, uint64_t val)
{
	struct hmap_ent *e;

	if ((m->len + 1) * 4 > m->cap * 3 && grow(m))
		return -ENOMEM;
	e = slot(m, a, b, c);
	if (!e->used) {
		e->used = true;
		e->k[0] = a;
		e->k[1] = b;
		e->k[2] = c;
		m->len++;
	}
	e->val = val;
	return 0;
}

bool hmap__get(const struct hmap *m, uint64_t a, uint64_t b, uint64_t c, uint64_t *val)
{
	const struct hmap_ent *e;

	if (!m->cap)
		return false;
	e = slot(m, a, b, c);
	if (!e->used)
		return false;
	if (val)
		*val = e->val;
	return true;
}

void hmap__clear(struct hmap *m)
{
	free(m->ents);
	m->ents = NULL;
	m->cap = m->len = 0;
}
