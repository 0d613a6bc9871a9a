// SPDX-License-Identifier: MIT
/* The profile model: samples, aggregated by (pid, tid, locations, labels), their
 * labels interned and sorted, values summed with saturation; the main mapping, totals
 * and the model's size. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "vec.h"
#include "profile.h"

#include "profile_int.h"

/* ---- samples ---- */

struct sample_key {
	int pid, tid;
	uint32_t nlocs, nlabels;
	const uint32_t *locs;
	const struct prof_label *labels; /* interned and sorted */
};

static int cmp_str(const char *a, const char *b)
{
	if (a == b)
		return 0;
	if (!a)
		return -1;
	if (!b)
		return 1;
	return strcmp(a, b);
}

static int cmp_label(const void *pa, const void *pb)
{
	const struct prof_label *a = pa, *b = pb;
	int c;

	c = cmp_str(a->key, b->key);
	if (c)
		return c;
	c = cmp_str(a->str, b->str);
	if (c)
		return c;
	if (a->num != b->num)
		return a->num < b->num ? -1 : 1;
	return cmp_str(a->unit, b->unit);
}

static bool sample_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct profile *p = ctx;
	const struct sample_key *k = key;
	const struct prof_sample *s = &p->samples[idx].pub;

	if (s->pid != k->pid || s->tid != k->tid || s->nlocs != k->nlocs || s->nlabels != k->nlabels)
		return false;
	if (k->nlocs && memcmp(s->locs, k->locs, k->nlocs * sizeof(*k->locs)) != 0)
		return false;
	for (uint32_t i = 0; i < k->nlabels; i++) {
		const struct prof_label *a = &s->labels[i], *b = &k->labels[i];

		if (a->key != b->key || a->str != b->str || a->num != b->num || a->unit != b->unit)
			return false;
	}
	return true;
}

static uint64_t sample_hash(const struct sample_key *k)
{
	uint64_t h = htab__word(0x2545f4914f6cdd1dULL, (uint32_t)k->pid);

	h = htab__word(h, (uint32_t)k->tid);
	h = htab__word(h, (uint64_t)k->nlocs << 32 | k->nlabels);
	for (uint32_t i = 0; i < k->nlocs; i++)
		h = htab__word(h, k->locs[i]);
	for (uint32_t i = 0; i < k->nlabels; i++) {
		const struct prof_label *l = &k->labels[i];

		h = htab__word(h, (uintptr_t)l->key);
		h = htab__word(h, (uintptr_t)l->str);
		h = htab__word(h, (uint64_t)l->num);
		h = htab__word(h, (uintptr_t)l->unit);
	}
	return htab__final(h);
}

/* Intern and sort a sample's labels into lab (PROFILE_MAX_LABELS entries). */
static int intern_labels(struct profile *p, const struct prof_label *labels, int nlabels, struct prof_label *lab)
{
	int err;

	for (int i = 0; i < nlabels; i++) {
		if (!labels[i].key)
			return -EINVAL;
		memset(&lab[i], 0, sizeof(lab[i]));
		err = prof_intern(p, labels[i].key, &lab[i].key);
		if (err)
			return err;
		if (labels[i].str) {
			err = prof_intern(p, labels[i].str, &lab[i].str);
		} else {
			lab[i].num = labels[i].num;
			err = prof_intern(p, labels[i].unit, &lab[i].unit);
		}
		if (err)
			return err;
	}
	/* the same labels in another order are the same sample */
	if (nlabels > 1)
		qsort(lab, nlabels, sizeof(lab[0]), cmp_label);
	return 0;
}

/* Add values to the sample keyed by interned location ids and interned, sorted labels. */
static int add_sample_ids(struct profile *p, int pid, int tid, const uint32_t *ids, int nframes,
			  const struct prof_label *lab, int nlabels, const int64_t *values)
{
	struct sample_key k;
	struct sample_ent *e;
	struct htab_slot *slot;
	uint64_t hash;
	uint32_t *locs;
	struct prof_label *labs;
	int64_t *vals;
	int err;

	k.pid = pid;
	k.tid = tid;
	k.nlocs = nframes;
	k.nlabels = nlabels;
	k.locs = ids;
	k.labels = lab;
	hash = sample_hash(&k);
	err = htab__reserve(&p->sample_ht);
	if (err)
		return err;
	slot = htab__find(&p->sample_ht, hash, sample_eq, p, &k);
	if (slot->idx1) {
		vals = p->samples[slot->idx1 - 1].values;
	} else {
		if (p->nsamples >= UINT32_MAX - 1)
			return -E2BIG;
		err = vec__grow((void **)&p->samples, &p->cap_samples, p->nsamples + 1, sizeof(*p->samples));
		if (err)
			return err;
		vals = prof_arena_alloc(p, p->ntypes * sizeof(*vals));
		locs = nframes ? prof_arena_alloc(p, nframes * sizeof(*locs)) : NULL;
		labs = nlabels ? prof_arena_alloc(p, nlabels * sizeof(*labs)) : NULL;
		if (!vals || (nframes && !locs) || (nlabels && !labs))
			return -ENOMEM; /* arena space is reclaimed at profile__free */
		memset(vals, 0, p->ntypes * sizeof(*vals));
		if (nframes)
			memcpy(locs, ids, nframes * sizeof(*locs));
		if (nlabels)
			memcpy(labs, lab, nlabels * sizeof(*labs));
		e = &p->samples[p->nsamples++];
		e->pub.pid = pid;
		e->pub.tid = tid;
		e->pub.nlocs = nframes;
		e->pub.locs = locs;
		e->pub.nlabels = nlabels;
		e->pub.labels = labs;
		e->pub.values = vals;
		e->values = vals;
		htab__fill(&p->sample_ht, slot, hash, (uint32_t)p->nsamples - 1);
	}
	for (int i = 0; i < p->ntypes; i++) {
		/* absurd sums (another tool's INT64_MAX) stop at the limit and are counted */
		if (__builtin_add_overflow(vals[i], values[i], &vals[i])) {
			vals[i] = values[i] > 0 ? INT64_MAX : INT64_MIN;
			p->saturated++;
		}
		if (__builtin_add_overflow(p->totals[i], values[i], &p->totals[i])) {
			p->totals[i] = values[i] > 0 ? INT64_MAX : INT64_MIN;
			p->saturated++;
		}
	}
	return 0;
}

int profile__add_sample(struct profile *p, int pid, int tid, const struct prof_frame *frames, int nframes,
			const struct prof_label *labels, int nlabels, const int64_t *values)
{
	uint32_t ids[PROFILE_MAX_FRAMES];
	struct prof_label lab[PROFILE_MAX_LABELS];
	int err;

	if (!p || !values || nframes < 0 || nlabels < 0 || (nframes && !frames) || (nlabels && !labels))
		return -EINVAL;
	if (nframes > PROFILE_MAX_FRAMES || nlabels > PROFILE_MAX_LABELS)
		return -E2BIG;
	if (!p->ntypes)
		return -EINVAL;
	err = intern_labels(p, labels, nlabels, lab);
	if (err)
		return err;
	for (int i = 0; i < nframes; i++) {
		err = prof_intern_location(p, pid, &frames[i], &ids[i]);
		if (err)
			return err;
	}
	return add_sample_ids(p, pid, tid, ids, nframes, lab, nlabels, values);
}

int profile__add_sample_locs(struct profile *p, int pid, int tid, const uint32_t *locs, int nlocs,
			     const struct prof_label *labels, int nlabels, const int64_t *values)
{
	struct prof_label lab[PROFILE_MAX_LABELS];
	int err;

	if (!p || !values || nlocs < 0 || nlabels < 0 || (nlocs && !locs) || (nlabels && !labels))
		return -EINVAL;
	if (nlocs > PROFILE_MAX_FRAMES || nlabels > PROFILE_MAX_LABELS)
		return -E2BIG;
	if (!p->ntypes)
		return -EINVAL;
	for (int i = 0; i < nlocs; i++)
		if (locs[i] < 1 || locs[i] > p->nlocs)
			return -ENOENT;
	err = intern_labels(p, labels, nlabels, lab);
	if (err)
		return err;
	return add_sample_ids(p, pid, tid, locs, nlocs, lab, nlabels, values);
}

size_t profile__num_samples(const struct profile *p)
{
	return p ? p->nsamples : 0;
}

const struct prof_sample *profile__sample(const struct profile *p, size_t idx)
{
	if (!p || idx >= p->nsamples)
		return NULL;
	return &p->samples[idx].pub;
}

int profile__set_main_mapping(struct profile *p, const char *module, const char *build_id, uint64_t start,
			      uint64_t limit, uint64_t offset)
{
	struct prof_mapping m = {.start = start, .limit = limit, .offset = offset};
	int err;

	if (!p || !module)
		return -EINVAL;
	err = prof_intern(p, module, &m.module);
	if (!err && build_id)
		err = prof_intern(p, build_id, &m.build_id);
	if (err)
		return err;
	p->main_map = m;
	p->have_main_map = true;
	return 0;
}

const struct prof_mapping *profile__main_mapping(const struct profile *p)
{
	return p && p->have_main_map ? &p->main_map : NULL;
}

uint64_t profile__saturated(const struct profile *p)
{
	return p ? p->saturated : 0;
}

int64_t profile__total(const struct profile *p, int type_idx)
{
	if (!p || type_idx < 0 || type_idx >= p->ntypes)
		return 0;
	return p->totals[type_idx];
}

size_t profile__mem_bytes(const struct profile *p)
{
	if (!p)
		return 0;
	return sizeof(*p) + p->arena_bytes + p->cap_strs * sizeof(*p->strs) +
	       (size_t)p->cap_comments * sizeof(*p->comments) + p->cap_blocks * sizeof(*p->loc_blocks) +
	       (p->nlocs + LOC_BLOCK - 1) / LOC_BLOCK * LOC_BLOCK * sizeof(struct loc_ent) +
	       p->cap_samples * sizeof(*p->samples) +
	       (p->str_ht.cap + p->loc_ht.cap + p->sample_ht.cap) * sizeof(struct htab_slot);
}
