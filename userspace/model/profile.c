// SPDX-License-Identifier: MIT
/* The profile model: interned strings, interned locations and aggregated samples.
 *
 * Everything variable-sized (strings, a sample's location ids, labels and values) lives
 * in an append-only arena, so pointers handed out stay valid for the profile's life and
 * freeing is a walk over a few large chunks. Lookups go through open-addressing tables
 * (lib/hmap.h's htab: 64-bit hashes stored in the slots, so growing never re-hashes).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "profile.h"

/* profile.c is linked into unit tests without syms.c: weak references keep those links
 * working, and profile__symbolize answers -ENOSYS when no symbolizer is linked in. */
#pragma weak syms__resolve_user
#pragma weak syms__resolve_kernel

#define ARENA_CHUNK (64 * 1024)
#define SYMBOLIZE_TRIES 4
#define LOC_BLOCK 1024 /* locations per block */

struct arena_chunk {
	struct arena_chunk *next;
	size_t size, used;
	/* 8-byte aligned: three 8-byte fields above */
	char data[];
};

struct loc_ent {
	struct prof_location pub;
	const char *synth_name; /* interned; PROF_FRAME_SYNTH only */
	const char *synth_sys;
	uint8_t tries; /* resolver calls that did not resolve it */
};

struct sample_ent {
	struct prof_sample pub;
	int64_t *values; /* in the arena; pub.values points here */
};

struct profile {
	struct arena_chunk *arena;
	size_t arena_bytes;

	const char **strs; /* interned strings, in the arena */
	size_t nstrs, cap_strs;
	struct htab str_ht;

	struct {
		const char *type, *unit;
	} types[PROFILE_MAX_TYPES];
	int ntypes;
	int64_t totals[PROFILE_MAX_TYPES];
	uint64_t saturated; /* sums held at the int64 limits */
	struct prof_mapping main_map;
	bool have_main_map;

	const char *period_type, *period_unit;
	int64_t period;
	int64_t time_nanos, duration_nanos;

	const char **comments;
	int ncomments, cap_comments;

	/* fixed-size blocks: a location is large (it holds a whole sym_result), so the
	 * array neither doubles its slack nor copies itself when it grows */
	struct loc_ent **loc_blocks;
	size_t nlocs, cap_blocks;
	struct htab loc_ht;

	struct sample_ent *samples;
	size_t nsamples, cap_samples;
	struct htab sample_ht;
};

static inline struct loc_ent *loc_at(const struct profile *p, size_t idx)
{
	return &p->loc_blocks[idx / LOC_BLOCK][idx % LOC_BLOCK];
}

/* ---- arena ---- */

static void *arena_alloc(struct profile *p, size_t size)
{
	struct arena_chunk *c = p->arena;

	size = (size + 7) & ~(size_t)7;
	if (!size)
		size = 8;
	if (!c || c->size - c->used < size) {
		size_t csz = size > ARENA_CHUNK / 4 ? size : ARENA_CHUNK;

		if (size > SIZE_MAX - sizeof(*c))
			return NULL;
		if (csz == size && c) {
			/* a big block gets its own chunk, behind the current one, so the
			 * current chunk's free space is not thrown away */
			struct arena_chunk *b = malloc(sizeof(*b) + csz);

			if (!b)
				return NULL;
			b->size = b->used = csz;
			b->next = c->next;
			c->next = b;
			p->arena_bytes += sizeof(*b) + csz;
			return b->data;
		}
		c = malloc(sizeof(*c) + csz);
		if (!c)
			return NULL;
		c->size = csz;
		c->used = 0;
		c->next = p->arena;
		p->arena = c;
		p->arena_bytes += sizeof(*c) + csz;
	}
	c->used += size;
	return c->data + c->used - size;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *n;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 64;
	while (ncap < need)
		ncap *= 2;
	if (ncap > SIZE_MAX / elem)
		return -ENOMEM;
	n = realloc(*arr, ncap * elem);
	if (!n)
		return -ENOMEM;
	*arr = n;
	*cap = ncap;
	return 0;
}

/* A new, zeroed location entry with the next id (blocks of LOC_BLOCK never move, so
 * pointers to entries stay valid). 0, -E2BIG or -ENOMEM. */
static int loc_new(struct profile *p, struct loc_ent **out)
{
	struct loc_ent *e;

	if (p->nlocs >= UINT32_MAX - 1)
		return -E2BIG;
	if (p->nlocs % LOC_BLOCK == 0) {
		size_t b = p->nlocs / LOC_BLOCK;
		int err = grow((void **)&p->loc_blocks, &p->cap_blocks, b + 1, sizeof(*p->loc_blocks));

		if (err)
			return err;
		p->loc_blocks[b] = malloc(LOC_BLOCK * sizeof(**p->loc_blocks));
		if (!p->loc_blocks[b])
			return -ENOMEM;
	}
	e = loc_at(p, p->nlocs++);
	memset(e, 0, sizeof(*e));
	e->pub.id = p->nlocs;
	*out = e;
	return 0;
}

/* ---- strings ---- */

struct str_key {
	const char *s;
	size_t len;
};

static bool str_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct profile *p = ctx;
	const struct str_key *k = key;
	const char *s = p->strs[idx];

	return strncmp(s, k->s, k->len) == 0 && s[k->len] == '\0';
}

/* The model's copy of s (NULL for NULL); equal strings get the same pointer. */
static int intern(struct profile *p, const char *s, const char **out)
{
	struct str_key k;
	struct htab_slot *slot;
	uint64_t hash;
	char *copy;
	int err;

	*out = NULL;
	if (!s)
		return 0;
	k.s = s;
	k.len = strlen(s);
	hash = htab__bytes(s, k.len);
	err = htab__reserve(&p->str_ht);
	if (err)
		return err;
	slot = htab__find(&p->str_ht, hash, str_eq, p, &k);
	if (slot->idx1) {
		*out = p->strs[slot->idx1 - 1];
		return 0;
	}
	if (p->nstrs >= UINT32_MAX - 1)
		return -E2BIG;
	err = grow((void **)&p->strs, &p->cap_strs, p->nstrs + 1, sizeof(*p->strs));
	if (err)
		return err;
	copy = arena_alloc(p, k.len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, s, k.len + 1);
	p->strs[p->nstrs++] = copy;
	htab__fill(&p->str_ht, slot, hash, (uint32_t)p->nstrs - 1);
	*out = copy;
	return 0;
}

/* ---- lifecycle and header ---- */

struct profile *profile__new(void)
{
	struct profile *p = calloc(1, sizeof(*p));

	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

void profile__free(struct profile *p)
{
	struct arena_chunk *c, *n;

	if (!p)
		return;
	for (c = p->arena; c; c = n) {
		n = c->next;
		free(c);
	}
	free(p->strs);
	htab__clear(&p->str_ht);
	free(p->comments);
	for (size_t i = 0; i < (p->nlocs + LOC_BLOCK - 1) / LOC_BLOCK; i++)
		free(p->loc_blocks[i]);
	free(p->loc_blocks);
	htab__clear(&p->loc_ht);
	free(p->samples);
	htab__clear(&p->sample_ht);
	free(p);
}

int profile__add_type(struct profile *p, const char *type, const char *unit)
{
	const char *t, *u;
	int err;

	if (!p || !type || !*type || !unit || strchr(type, '-'))
		return -EINVAL;
	if (p->nsamples)
		return -EBUSY;
	if (profile__find_type(p, type) >= 0)
		return -EEXIST;
	if (p->ntypes >= PROFILE_MAX_TYPES)
		return -E2BIG;
	err = intern(p, type, &t);
	if (!err)
		err = intern(p, unit, &u);
	if (err)
		return err;
	p->types[p->ntypes].type = t;
	p->types[p->ntypes].unit = u;
	return p->ntypes++;
}

int profile__num_types(const struct profile *p)
{
	return p ? p->ntypes : 0;
}

void profile__type(const struct profile *p, int idx, const char **type, const char **unit)
{
	bool ok = p && idx >= 0 && idx < p->ntypes;

	if (type)
		*type = ok ? p->types[idx].type : NULL;
	if (unit)
		*unit = ok ? p->types[idx].unit : NULL;
}

int profile__find_type(const struct profile *p, const char *type)
{
	if (!p || !type)
		return -EINVAL;
	for (int i = 0; i < p->ntypes; i++)
		if (strcmp(p->types[i].type, type) == 0)
			return i;
	return -ENOENT;
}

int profile__set_period(struct profile *p, const char *type, const char *unit, int64_t period)
{
	const char *t, *u;
	int err;

	if (!p)
		return -EINVAL;
	err = intern(p, type, &t);
	if (!err)
		err = intern(p, unit, &u);
	if (err)
		return err;
	p->period_type = t;
	p->period_unit = u;
	p->period = period;
	return 0;
}

void profile__period(const struct profile *p, const char **type, const char **unit, int64_t *period)
{
	if (type)
		*type = p ? p->period_type : NULL;
	if (unit)
		*unit = p ? p->period_unit : NULL;
	if (period)
		*period = p ? p->period : 0;
}

void profile__set_time(struct profile *p, int64_t time_nanos, int64_t duration_nanos)
{
	if (!p)
		return;
	p->time_nanos = time_nanos;
	p->duration_nanos = duration_nanos;
}

void profile__time(const struct profile *p, int64_t *time_nanos, int64_t *duration_nanos)
{
	if (time_nanos)
		*time_nanos = p ? p->time_nanos : 0;
	if (duration_nanos)
		*duration_nanos = p ? p->duration_nanos : 0;
}

int profile__add_comment(struct profile *p, const char *fmt, ...)
{
	const char *c;
	char *s;
	va_list ap;
	size_t cap;
	int err;

	if (!p || !fmt)
		return -EINVAL;
	if (p->ncomments >= INT32_MAX)
		return -E2BIG;
	cap = p->cap_comments;
	err = grow((void **)&p->comments, &cap, (size_t)p->ncomments + 1, sizeof(*p->comments));
	if (err)
		return err;
	p->cap_comments = (int)(cap > INT32_MAX ? INT32_MAX : cap);
	va_start(ap, fmt);
	err = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (err < 0)
		return -EINVAL;
	s = malloc((size_t)err + 1);
	if (!s)
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)err + 1, fmt, ap);
	va_end(ap);
	err = intern(p, s, &c);
	free(s);
	if (err)
		return err;
	p->comments[p->ncomments++] = c;
	return 0;
}

int profile__num_comments(const struct profile *p)
{
	return p ? p->ncomments : 0;
}

const char *profile__comment(const struct profile *p, int idx)
{
	if (!p || idx < 0 || idx >= p->ncomments)
		return NULL;
	return p->comments[idx];
}

/* ---- locations ---- */

struct loc_key {
	uint32_t kind;
	int pid;
	uint64_t addr;
	const char *name, *sys; /* interned */
};

static bool loc_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct profile *p = ctx;
	const struct loc_key *k = key;
	const struct loc_ent *e = loc_at(p, idx);

	if (e->pub.kind != k->kind)
		return false;
	switch (k->kind) {
	case PROF_FRAME_USER:
		return e->pub.pid == k->pid && e->pub.addr == k->addr;
	case PROF_FRAME_KERNEL:
		return e->pub.addr == k->addr;
	default:
		/* interned: pointer equality is string equality */
		return e->synth_name == k->name && e->synth_sys == k->sys;
	}
}

static uint64_t loc_hash(const struct loc_key *k)
{
	uint64_t h = htab__word(0x51ed270b27e3a6b5ULL, k->kind);

	if (k->kind == PROF_FRAME_SYNTH) {
		h = htab__word(h, (uintptr_t)k->name);
		h = htab__word(h, (uintptr_t)k->sys);
	} else {
		h = htab__word(h, k->kind == PROF_FRAME_USER ? (uint32_t)k->pid : 0);
		h = htab__word(h, k->addr);
	}
	return htab__final(h);
}

static void synth_fill(struct loc_ent *e)
{
	struct sym_result *r = &e->pub.sym;

	memset(r, 0, sizeof(*r));
	r->module = "[cuda]";
	r->resolved = true;
	r->nframes = 1;
	r->frames[0].func = e->synth_name;
	r->frames[0].sys_name = e->synth_sys ? e->synth_sys : e->synth_name;
	e->pub.symbolized = true;
}

static int intern_location(struct profile *p, int pid, const struct prof_frame *f, uint32_t *id)
{
	struct loc_key k = {.kind = f->kind, .addr = f->addr};
	struct htab_slot *slot;
	struct loc_ent *e;
	uint64_t hash;
	int err;

	switch (f->kind) {
	case PROF_FRAME_USER:
		k.pid = pid;
		break;
	case PROF_FRAME_KERNEL:
		break;
	case PROF_FRAME_SYNTH:
		if (!f->name)
			return -EINVAL;
		err = intern(p, f->name, &k.name);
		if (!err)
			err = intern(p, f->sys_name, &k.sys);
		if (err)
			return err;
		break;
	default:
		return -EINVAL;
	}
	hash = loc_hash(&k);
	err = htab__reserve(&p->loc_ht);
	if (err)
		return err;
	slot = htab__find(&p->loc_ht, hash, loc_eq, p, &k);
	if (slot->idx1) {
		*id = slot->idx1;
		return 0;
	}
	err = loc_new(p, &e);
	if (err)
		return err;
	e->pub.kind = k.kind;
	e->pub.pid = k.kind == PROF_FRAME_USER ? pid : 0;
	e->pub.addr = k.addr;
	if (k.kind == PROF_FRAME_SYNTH) {
		/* a synthetic frame names itself: symbolized from birth, so writers never
		 * show it as an unknown address */
		e->synth_name = k.name;
		e->synth_sys = k.sys;
		synth_fill(e);
	}
	htab__fill(&p->loc_ht, slot, hash, e->pub.id - 1);
	*id = e->pub.id;
	return 0;
}

size_t profile__num_locations(const struct profile *p)
{
	return p ? p->nlocs : 0;
}

const struct prof_location *profile__location(const struct profile *p, uint32_t id)
{
	if (!p || id < 1 || id > p->nlocs)
		return NULL;
	return &loc_at(p, id - 1)->pub;
}

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
		err = intern(p, labels[i].key, &lab[i].key);
		if (err)
			return err;
		if (labels[i].str) {
			err = intern(p, labels[i].str, &lab[i].str);
		} else {
			lab[i].num = labels[i].num;
			err = intern(p, labels[i].unit, &lab[i].unit);
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
		err = grow((void **)&p->samples, &p->cap_samples, p->nsamples + 1, sizeof(*p->samples));
		if (err)
			return err;
		vals = arena_alloc(p, p->ntypes * sizeof(*vals));
		locs = nframes ? arena_alloc(p, nframes * sizeof(*locs)) : NULL;
		labs = nlabels ? arena_alloc(p, nlabels * sizeof(*labs)) : NULL;
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
		err = intern_location(p, pid, &frames[i], &ids[i]);
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
	err = intern(p, module, &m.module);
	if (!err && build_id)
		err = intern(p, build_id, &m.build_id);
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

/* ---- symbolization ---- */

static int unknown_name(struct profile *p, uint64_t addr, const char **out)
{
	char buf[40];

	snprintf(buf, sizeof(buf), "[unknown]+0x%llx", (unsigned long long)addr);
	return intern(p, buf, out);
}

/* Copy a resolver's result into the model's own strings. */
static int copy_result(struct profile *p, const struct prof_location *loc, const struct sym_result *in,
		       struct sym_result *out)
{
	int n = in->nframes, err;

	memset(out, 0, sizeof(*out));
	if (n < 1)
		return -EINVAL;
	if (n > SYMS_MAX_INLINE)
		n = SYMS_MAX_INLINE;
	err = intern(p, in->module ? in->module : "[unknown]", &out->module);
	if (!err)
		err = intern(p, in->build_id, &out->build_id);
	if (err)
		return err;
	out->map_start = in->map_start;
	out->map_limit = in->map_limit;
	out->map_offset = in->map_offset;
	out->rel_addr = in->rel_addr;
	out->resolved = in->resolved;
	out->nframes = n;
	for (int i = 0; i < n; i++) {
		const struct sym_frame *f = &in->frames[i];
		struct sym_frame *o = &out->frames[i];

		if (f->func)
			err = intern(p, f->func, &o->func);
		else
			err = unknown_name(p, loc->addr, &o->func);
		if (!err)
			err = f->sys_name ? intern(p, f->sys_name, &o->sys_name) : 0;
		if (!err)
			err = intern(p, f->file, &o->file);
		if (err)
			return err;
		if (!o->sys_name)
			o->sys_name = o->func;
		o->line = f->line;
		o->start_line = f->start_line;
	}
	return 0;
}

int profile__symbolize_with(struct profile *p, profile_resolve_fn resolve, void *ctx)
{
	if (!p || !resolve)
		return -EINVAL;
	for (size_t i = 0; i < p->nlocs; i++) {
		struct loc_ent *e = loc_at(p, i);
		struct sym_result r, copy;
		int err;

		if (e->pub.kind == PROF_FRAME_SYNTH) {
			if (!e->pub.symbolized)
				synth_fill(e);
			continue;
		}
		/* an address that did not resolve is tried again a few times: its object may
		 * have been tracked since (dlopen, a perf map written late); past that it is
		 * most likely JIT code or a gone mapping, not worth a lookup at every drain */
		if (e->pub.symbolized && e->pub.sym.resolved)
			continue;
		if (e->tries >= SYMBOLIZE_TRIES)
			continue;
		e->tries++;
		memset(&r, 0, sizeof(r));
		err = resolve(ctx, &e->pub, &r);
		if (err == -ENOMEM)
			return err;
		if (err < 0)
			continue;
		err = copy_result(p, &e->pub, &r, &copy);
		if (err == -ENOMEM)
			return err;
		if (err < 0)
			continue;
		e->pub.sym = copy;
		e->pub.symbolized = true;
	}
	return 0;
}

static int syms_resolve(void *ctx, const struct prof_location *loc, struct sym_result *out)
{
	struct syms *s = ctx;

	if (loc->kind == PROF_FRAME_USER)
		return syms__resolve_user(s, loc->pid, loc->addr, out);
	return syms__resolve_kernel(s, loc->addr, out);
}

int profile__symbolize(struct profile *p, struct syms *s)
{
	if (!p || !s)
		return -EINVAL;
	if (!syms__resolve_user || !syms__resolve_kernel)
		return -ENOSYS;
	return profile__symbolize_with(p, syms_resolve, s);
}

int profile__add_resolved_location(struct profile *p, uint32_t kind, int pid, uint64_t addr,
				   const struct sym_result *sym, uint32_t *id)
{
	struct prof_location tmp = {.kind = kind, .pid = pid, .addr = addr};
	struct sym_result copy;
	struct loc_ent *e;
	int err;

	if (!p || !sym || !id || kind > PROF_FRAME_SYNTH)
		return -EINVAL;
	err = copy_result(p, &tmp, sym, &copy);
	if (err)
		return err;
	/* not entered in the location table: a file's locations keep their own identity
	 * (two of them may share an address), and frames added later never merge into one */
	err = loc_new(p, &e);
	if (err)
		return err;
	e->pub.kind = kind;
	e->pub.pid = kind == PROF_FRAME_USER ? pid : 0;
	e->pub.addr = addr;
	e->pub.sym = copy;
	e->pub.symbolized = true;
	if (kind == PROF_FRAME_SYNTH) {
		e->synth_name = copy.frames[0].func;
		e->synth_sys = copy.frames[0].sys_name;
	}
	/* its names are final: no resolver is asked about it again */
	e->tries = SYMBOLIZE_TRIES;
	*id = e->pub.id;
	return 0;
}

/* For callers that mix interned frames with locations they made themselves
 * (python.c's Python frames, added with profile__add_resolved_location). */
int profile__location_id(struct profile *p, int pid, const struct prof_frame *f, uint32_t *id)
{
	if (!p || !f || !id)
		return -EINVAL;
	return intern_location(p, pid, f, id);
}
