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
#include "vec.h"
#include "profile.h"

#include "profile_int.h"

/* profile.c is linked into unit tests without syms.c: weak references keep those links
 * working, and profile__symbolize answers -ENOSYS when no symbolizer is linked in. */
#pragma weak syms__resolve_user
#pragma weak syms__resolve_kernel

/* ---- arena ---- */

void *prof_arena_alloc(struct profile *p, size_t size)
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

/* A new, zeroed location entry with the next id (blocks of LOC_BLOCK never move, so
 * pointers to entries stay valid). 0, -E2BIG or -ENOMEM. */
static int loc_new(struct profile *p, struct loc_ent **out)
{
	struct loc_ent *e;

	if (p->nlocs >= UINT32_MAX - 1)
		return -E2BIG;
	if (p->nlocs % LOC_BLOCK == 0) {
		size_t b = p->nlocs / LOC_BLOCK;
		int err = vec__grow((void **)&p->loc_blocks, &p->cap_blocks, b + 1, sizeof(*p->loc_blocks));

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
int prof_intern(struct profile *p, const char *s, const char **out)
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
	err = vec__grow((void **)&p->strs, &p->cap_strs, p->nstrs + 1, sizeof(*p->strs));
	if (err)
		return err;
	copy = prof_arena_alloc(p, k.len + 1);
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
	err = prof_intern(p, type, &t);
	if (!err)
		err = prof_intern(p, unit, &u);
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
	err = prof_intern(p, type, &t);
	if (!err)
		err = prof_intern(p, unit, &u);
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
	err = vec__grow((void **)&p->comments, &cap, (size_t)p->ncomments + 1, sizeof(*p->comments));
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
	err = prof_intern(p, s, &c);
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

int prof_intern_location(struct profile *p, int pid, const struct prof_frame *f, uint32_t *id)
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
		err = prof_intern(p, f->name, &k.name);
		if (!err)
			err = prof_intern(p, f->sys_name, &k.sys);
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

/* ---- symbolization ---- */

static int unknown_name(struct profile *p, uint64_t addr, const char **out)
{
	char buf[40];

	snprintf(buf, sizeof(buf), "[unknown]+0x%llx", (unsigned long long)addr);
	return prof_intern(p, buf, out);
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
	err = prof_intern(p, in->module ? in->module : "[unknown]", &out->module);
	if (!err)
		err = prof_intern(p, in->build_id, &out->build_id);
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
			err = prof_intern(p, f->func, &o->func);
		else
			err = unknown_name(p, loc->addr, &o->func);
		if (!err)
			err = f->sys_name ? prof_intern(p, f->sys_name, &o->sys_name) : 0;
		if (!err)
			err = prof_intern(p, f->file, &o->file);
		if (err)
			return err;
		if (!o->sys_name)
			o->sys_name = o->func;
		o->line = f->line;
		o->start_line = f->start_line;
	}
	return 0;
}

/* profile__symbolize_with; USER_ONLY leaves kernel locations for a later walk. */
static int symbolize_walk(struct profile *p, profile_resolve_fn resolve, void *ctx, bool user_only)
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
		if (user_only && e->pub.kind == PROF_FRAME_KERNEL)
			continue;
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

int profile__symbolize_with(struct profile *p, profile_resolve_fn resolve, void *ctx)
{
	return symbolize_walk(p, resolve, ctx, false);
}

static int syms_resolve(void *ctx, const struct prof_location *loc, struct sym_result *out)
{
	struct syms *s = ctx;

	if (loc->kind == PROF_FRAME_USER)
		return syms__resolve_user(s, loc->pid, loc->addr, out);
	return syms__resolve_kernel(s, loc->addr, out);
}

static int symbolize_syms(struct profile *p, struct syms *s, bool user_only)
{
	if (!p || !s)
		return -EINVAL;
	if (!syms__resolve_user || !syms__resolve_kernel)
		return -ENOSYS;
	return symbolize_walk(p, syms_resolve, s, user_only);
}

int profile__symbolize(struct profile *p, struct syms *s)
{
	return symbolize_syms(p, s, false);
}

int profile__symbolize_user(struct profile *p, struct syms *s)
{
	return symbolize_syms(p, s, true);
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
	return prof_intern_location(p, pid, f, id);
}
