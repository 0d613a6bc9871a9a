// SPDX-License-Identifier: MIT
/* pprof writer: builds a perftools.profiles.Profile from the model and streams its
 * encoding through zlib (gzip framing) into the caller's FILE.
 *
 * Ids: the model's location ids are already 1..N without gaps and are kept as they are;
 * mapping and function ids are handed out 1..N in order of first use. Strings are
 * de-duplicated by content into the string table, whose entry 0 is "".
 */
#define ZLIB_CONST
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "hmap.h"
#include "vec.h"
#include "pprof.h"

#define KERNEL_MODULE "[kernel.kallsyms]"
#define SYNTH_MODULE "[cuda]"

struct map_ent {
	const char *module, *build_id; /* the key, with the addresses below */
	const char *emit_build_id;     /* what the output says */
	uint64_t start, limit, offset;
	bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

struct func_ent {
	const char *name, *sys_name, *file;
	int64_t start_line;
};

struct writer {
	void **owned; /* every allocation of this write, freed at the end */
	size_t nowned, cap_owned;

	const char **strs;
	size_t nstrs, cap_strs;
	struct htab str_tab;

	struct map_ent *maps;
	size_t nmaps, cap_maps;
	struct htab map_tab;

	struct func_ent *funcs;
	size_t nfuncs, cap_funcs;
	struct htab func_tab;
};

/* ---- helpers ---- */

static uint64_t mix(uint64_t x)
{
	return htab__final(x);
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	h ^= 0xcbf29ce484222325ULL; /* FNV-1a; NULL hashes apart from "" */
	if (!s)
		return mix(h ^ 0x5bd1e995);
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return mix(h);
}

static bool str_same(const char *a, const char *b)
{
	if (a == b)
		return true;
	return a && b && strcmp(a, b) == 0;
}

/* Zeroed memory owned by the write. Does nothing once *err is set, so a run of calls
 * needs one check; NULL for n == 0 is not an error. */
static void *w_alloc(struct writer *w, size_t n, size_t size, int *err)
{
	void *m;

	if (*err || !n)
		return NULL;
	if (vec__grow((void **)&w->owned, &w->cap_owned, w->nowned + 1, sizeof(*w->owned))) {
		*err = -ENOMEM;
		return NULL;
	}
	m = calloc(n, size);
	if (!m) {
		*err = -ENOMEM;
		return NULL;
	}
	w->owned[w->nowned++] = m;
	return m;
}

/* Find KEY in T; if absent, *SLOTP is the empty slot for it (fill it with htab__fill). */
static int tab_lookup(const struct writer *w, struct htab *t, uint64_t hash, htab_eq_fn eq, const void *key,
		      struct htab_slot **slotp)
{
	int err = htab__reserve(t);

	if (err)
		return err;
	*slotp = htab__find(t, hash, eq, w, key);
	return 0;
}

/* ---- string table ---- */

static bool str_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct writer *w = ctx;

	return strcmp(w->strs[idx], key) == 0;
}

/* Index of s in the string table (NULL and "" are 0). s must outlive the write. */
static int str_idx(struct writer *w, const char *s, int64_t *out)
{
	struct htab_slot *slot;
	uint64_t hash;
	int err = 0;

	*out = 0;
	if (!s || !*s)
		return 0;
	hash = hash_str(0, s);
	err = tab_lookup(w, &w->str_tab, hash, str_eq, s, &slot);
	if (err)
		return err;
	if (!slot->idx1) {
		if (vec__grow((void **)&w->strs, &w->cap_strs, w->nstrs + 1, sizeof(*w->strs)))
			return -ENOMEM;
		w->strs[w->nstrs++] = s;
		htab__fill(&w->str_tab, slot, hash, (uint32_t)w->nstrs - 1);
	}
	*out = slot->idx1 - 1;
	return 0;
}

/* A formatted string that lives until the end of the write. */
static int owned_fmt_addr(struct writer *w, const char *prefix, uint64_t addr, const char **out)
{
	char *s;
	int err = 0;

	s = w_alloc(w, strlen(prefix) + 24, 1, &err);
	if (err)
		return err;
	sprintf(s, "%s+0x%llx", prefix, (unsigned long long)addr);
	*out = s;
	return 0;
}

/* ---- mappings and functions ---- */

static bool map_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct writer *w = ctx;
	const struct map_ent *a = &w->maps[idx], *b = key;

	return a->start == b->start && a->limit == b->limit && a->offset == b->offset &&
	       str_same(a->module, b->module) && str_same(a->build_id, b->build_id);
}

static int map_id(struct writer *w, const struct map_ent *key, uint32_t *id)
{
	uint64_t h = hash_str(hash_str(0, key->module), key->build_id);
	struct htab_slot *slot;
	int err = 0;

	h = mix(h ^ key->start) ^ mix(key->limit + 0x9e3779b97f4a7c15ULL) ^ mix(key->offset + 0x632be59bd9b4e019ULL);
	err = tab_lookup(w, &w->map_tab, h, map_eq, key, &slot);
	if (err)
		return err;
	if (!slot->idx1) {
		if (vec__grow((void **)&w->maps, &w->cap_maps, w->nmaps + 1, sizeof(*w->maps)))
			return -ENOMEM;
		w->maps[w->nmaps++] = *key;
		htab__fill(&w->map_tab, slot, h, (uint32_t)w->nmaps - 1);
	}
	*id = slot->idx1;
	return 0;
}

static bool func_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct writer *w = ctx;
	const struct func_ent *a = &w->funcs[idx], *b = key;

	return a->start_line == b->start_line && str_same(a->name, b->name) && str_same(a->sys_name, b->sys_name) &&
	       str_same(a->file, b->file);
}

static int func_id(struct writer *w, const struct func_ent *key, uint64_t *id)
{
	uint64_t h = hash_str(hash_str(hash_str(0, key->name), key->sys_name), key->file);
	struct htab_slot *slot;
	int err = 0;

	h = mix(h ^ (uint64_t)key->start_line);
	err = tab_lookup(w, &w->func_tab, h, func_eq, key, &slot);
	if (err)
		return err;
	if (!slot->idx1) {
		if (vec__grow((void **)&w->funcs, &w->cap_funcs, w->nfuncs + 1, sizeof(*w->funcs)))
			return -ENOMEM;
		w->funcs[w->nfuncs++] = *key;
		htab__fill(&w->func_tab, slot, h, (uint32_t)w->nfuncs - 1);
	}
	*id = slot->idx1;
	return 0;
}

/* ---- gzip output ---- */

struct gz_out {
	ProtobufCBuffer base; /* first: protobuf-c hands us this pointer */
	z_stream zs;
	FILE *f;
	int err;
	unsigned char buf[64 * 1024];
};

static int gz_pump(struct gz_out *g, int flush)
{
	int ret;

	do {
		size_t have;

		g->zs.next_out = g->buf;
		g->zs.avail_out = sizeof(g->buf);
		ret = deflate(&g->zs, flush);
		if (ret == Z_STREAM_ERROR)
			return -EIO;
		have = sizeof(g->buf) - g->zs.avail_out;
		if (have && fwrite(g->buf, 1, have, g->f) != have)
			return -EIO;
	} while (g->zs.avail_out == 0);
	if (flush == Z_FINISH && ret != Z_STREAM_END)
		return -EIO;
	return 0;
}

static void gz_append(ProtobufCBuffer *buf, size_t len, const uint8_t *data)
{
	struct gz_out *g = (struct gz_out *)buf;

	while (len && !g->err) {
		size_t n = len > UINT_MAX ? UINT_MAX : len;

		g->zs.next_in = data;
		g->zs.avail_in = (uInt)n;
		g->err = gz_pump(g, Z_NO_FLUSH);
		data += n;
		len -= n;
	}
}

static int write_gz(const Perftools__Profiles__Profile *msg, FILE *f, int level)
{
	struct gz_out *g = calloc(1, sizeof(*g));
	int err = 0;

	if (!g)
		return -ENOMEM;
	g->base.append = gz_append;
	g->f = f;
	/* 15 + 16: a gzip header and trailer rather than a raw zlib stream */
	if (deflateInit2(&g->zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		return -ENOMEM;
	}
	perftools__profiles__profile__pack_to_buffer(msg, &g->base);
	err = g->err;
	if (!err)
		err = gz_pump(g, Z_FINISH);
	deflateEnd(&g->zs);
	free(g);
	/* buffered write errors (ENOSPC on /dev/full) only show at flush */
	if (fflush(f) != 0 || ferror(f))
		err = -EIO;
	return err;
}

/* ---- building the message ---- */

/* A location in the program's executable (/proc/PID/exe), of the process with the most
 * samples in it, or 0 when no location is known to be in one. */
static uint32_t main_location(const struct profile *p, size_t nl)
{
	uint64_t *weight = calloc(nl + 1, sizeof(*weight));
	uint32_t best = 0;

	if (!weight)
		return 0;
	for (size_t i = 0; i < profile__num_samples(p); i++) {
		const struct prof_sample *s = profile__sample(p, i);

		for (uint32_t j = 0; j < s->nlocs; j++) {
			const struct prof_location *loc = profile__location(p, s->locs[j]);

			if (loc && loc->kind == PROF_FRAME_USER && loc->symbolized && loc->sym.main_exe) {
				weight[s->locs[j]]++;
				break;
			}
		}
	}
	for (uint32_t id = 1; id <= nl; id++)
		if (weight[id] > weight[best])
			best = id;
	free(weight);
	return best;
}

static int build_locations(struct writer *w, const struct profile *p, Perftools__Profiles__Profile *msg)
{
	size_t nl = profile__num_locations(p), nlines = 0;
	Perftools__Profiles__Location *locs, **plocs;
	Perftools__Profiles__Line *lines, **plines;
	uint32_t main_loc;
	int err = 0;

	for (uint32_t id = 1; id <= nl; id++) {
		const struct prof_location *loc = profile__location(p, id);

		nlines += loc->symbolized && loc->sym.nframes > 0 ? (size_t)loc->sym.nframes : 1;
	}
	locs = w_alloc(w, nl, sizeof(*locs), &err);
	plocs = w_alloc(w, nl, sizeof(*plocs), &err);
	lines = w_alloc(w, nlines, sizeof(*lines), &err);
	plines = w_alloc(w, nlines, sizeof(*plines), &err);
	if (err)
		return err;

	/* pprof names mapping 1 as the profile's "File": the program, not the kernel or the
	 * synthetic [cuda] frames that lead most stacks, nor libc at the leaf of the first
	 * stack: the executable's mapping goes first (of the process most samples pass
	 * through), then the other user mappings. */
	if (profile__main_mapping(p)) {
		const struct prof_mapping *pm = profile__main_mapping(p);
		struct map_ent mk = {.module = pm->module,
				     .build_id = pm->build_id,
				     .emit_build_id = pm->build_id,
				     .start = pm->start,
				     .limit = pm->limit,
				     .offset = pm->offset};
		uint32_t mid;

		err = map_id(w, &mk, &mid);
		if (err)
			return err;
	}
	main_loc = main_location(p, nl);
	for (uint32_t k = 0; k <= nl; k++) {
		uint32_t id = k ? k : main_loc;
		const struct prof_location *loc = id ? profile__location(p, id) : NULL;
		const struct sym_result *r = loc ? &loc->sym : NULL;
		struct map_ent mk = {0};
		uint32_t mid;

		if (!loc || loc->kind != PROF_FRAME_USER || !loc->symbolized || r->nframes <= 0)
			continue;
		mk.module = r->module ? r->module : "[unknown]";
		mk.build_id = mk.emit_build_id = r->build_id;
		mk.start = r->map_start;
		mk.limit = r->map_limit;
		mk.offset = r->map_offset;
		err = map_id(w, &mk, &mid);
		if (err)
			return err;
	}

	for (uint32_t id = 1; id <= nl; id++) {
		const struct prof_location *loc = profile__location(p, id);
		const struct sym_result *r = &loc->sym;
		bool sym = loc->symbolized && r->nframes > 0;
		Perftools__Profiles__Location *L = &locs[id - 1];
		struct map_ent mk = {0};
		uint32_t mid = 0;
		int nf = sym ? (r->nframes > SYMS_MAX_INLINE ? SYMS_MAX_INLINE : r->nframes) : 1;

		perftools__profiles__location__init(L);
		L->id = id;
		plocs[id - 1] = L;

		if (loc->kind == PROF_FRAME_SYNTH) {
			/* Synthetic frames name their own module ("[cuda]", "[python]"). */
			mk.module = loc->symbolized && r->module ? r->module : SYNTH_MODULE;
		} else if (loc->kind == PROF_FRAME_KERNEL) {
			mk.module = KERNEL_MODULE;
			L->address = loc->addr;
		} else {
			L->address = loc->addr;
			if (sym) {
				mk.module = r->module ? r->module : "[unknown]";
				mk.build_id = mk.emit_build_id = r->build_id;
				mk.start = r->map_start;
				mk.limit = r->map_limit;
				mk.offset = r->map_offset;
			}
		}
		if (mk.module) {
			struct map_ent *m;

			err = map_id(w, &mk, &mid);
			if (err)
				return err;
			m = &w->maps[mid - 1];
			/* the kernel is one mapping whatever build id a lookup reported */
			if (loc->kind == PROF_FRAME_KERNEL && !m->emit_build_id && sym)
				m->emit_build_id = r->build_id;
			if (sym && r->resolved)
				m->has_functions = true;
			if (sym && nf > 1)
				m->has_inline_frames = true;
			for (int i = 0; sym && i < nf; i++) {
				if (r->frames[i].file)
					m->has_filenames = true;
				if (r->frames[i].line > 0)
					m->has_line_numbers = true;
			}
		}
		L->mapping_id = mid;

		L->n_line = nf;
		L->line = plines;
		for (int i = 0; i < nf; i++) {
			Perftools__Profiles__Line *ln = lines++;
			struct func_ent fk = {0};

			perftools__profiles__line__init(ln);
			*plines++ = ln;
			if (sym) {
				/* frames are inlined-first, the real function last: pprof's order */
				fk.name = r->frames[i].func;
				fk.sys_name = r->frames[i].sys_name ? r->frames[i].sys_name : fk.name;
				fk.file = r->frames[i].file;
				fk.start_line = r->frames[i].start_line;
				ln->line = r->frames[i].line;
			}
			if (!fk.name) {
				err = owned_fmt_addr(w, loc->kind == PROF_FRAME_KERNEL ? KERNEL_MODULE : "[unknown]",
						     loc->addr, &fk.name);
				if (err)
					return err;
				fk.sys_name = fk.name;
			}
			err = func_id(w, &fk, &ln->function_id);
			if (err)
				return err;
		}
	}
	msg->n_location = nl;
	msg->location = plocs;
	return 0;
}

static int build_samples(struct writer *w, const struct profile *p, Perftools__Profiles__Profile *msg)
{
	size_t ns = profile__num_samples(p), nids = 0, nlab = 0;
	Perftools__Profiles__Sample *smp, **psmp;
	Perftools__Profiles__Label *labs, **plabs;
	uint64_t *ids;
	int64_t pid_key = -1;
	int ntypes = profile__num_types(p);
	int err = 0;

	for (size_t i = 0; i < ns; i++) {
		const struct prof_sample *s = profile__sample(p, i);

		nids += s->nlocs;
		nlab += s->nlabels + 1;
	}
	smp = w_alloc(w, ns, sizeof(*smp), &err);
	psmp = w_alloc(w, ns, sizeof(*psmp), &err);
	ids = w_alloc(w, nids, sizeof(*ids), &err);
	labs = w_alloc(w, nlab, sizeof(*labs), &err);
	plabs = w_alloc(w, nlab, sizeof(*plabs), &err);
	if (err)
		return err;

	for (size_t i = 0; i < ns; i++) {
		const struct prof_sample *s = profile__sample(p, i);
		Perftools__Profiles__Sample *S = &smp[i];
		bool has_pid = false;

		perftools__profiles__sample__init(S);
		psmp[i] = S;
		S->n_location_id = s->nlocs;
		S->location_id = s->nlocs ? ids : NULL;
		for (uint32_t j = 0; j < s->nlocs; j++)
			*ids++ = s->locs[j]; /* leaf first, as pprof wants */
		S->n_value = ntypes;
		/* protobuf-c only reads the values while packing */
		S->value = (int64_t *)s->values;
		S->label = plabs;
		for (uint32_t j = 0; j < s->nlabels; j++) {
			const struct prof_label *l = &s->labels[j];
			Perftools__Profiles__Label *L = labs++;

			perftools__profiles__label__init(L);
			*plabs++ = L;
			S->n_label++;
			err = str_idx(w, l->key, &L->key);
			if (!err && l->str)
				err = str_idx(w, l->str, &L->str);
			if (!err && !l->str) {
				L->num = l->num;
				err = str_idx(w, l->unit, &L->num_unit);
			}
			if (err)
				return err;
			if (strcmp(l->key, "pid") == 0)
				has_pid = true;
		}
		if (s->pid > 0 && !has_pid) {
			/* one profile can hold many processes (-a): keep them apart */
			Perftools__Profiles__Label *L = labs++;

			perftools__profiles__label__init(L);
			*plabs++ = L;
			S->n_label++;
			if (pid_key < 0) {
				err = str_idx(w, "pid", &pid_key);
				if (err)
					return err;
			}
			L->key = pid_key;
			L->num = s->pid;
		}
		if (!S->n_label)
			S->label = NULL;
	}
	msg->n_sample = ns;
	msg->sample = psmp;
	return 0;
}

static int build_header(struct writer *w, const struct profile *p, Perftools__Profiles__Profile *msg)
{
	int ntypes = profile__num_types(p), nc = profile__num_comments(p);
	Perftools__Profiles__ValueType *vt, **pvt;
	const char *pt, *pu;
	int64_t *comments;
	int err = 0;

	vt = w_alloc(w, ntypes, sizeof(*vt), &err);
	pvt = w_alloc(w, ntypes, sizeof(*pvt), &err);
	comments = w_alloc(w, nc, sizeof(*comments), &err);
	if (err)
		return err;
	for (int i = 0; i < ntypes; i++) {
		const char *t, *u;

		perftools__profiles__value_type__init(&vt[i]);
		pvt[i] = &vt[i];
		profile__type(p, i, &t, &u);
		err = str_idx(w, t, &vt[i].type);
		if (!err)
			err = str_idx(w, u, &vt[i].unit);
		if (err)
			return err;
	}
	msg->n_sample_type = ntypes;
	msg->sample_type = pvt;
	/* the first type added is the default; pprof would otherwise pick the last */
	if (ntypes)
		msg->default_sample_type = vt[0].type;

	profile__period(p, &pt, &pu, &msg->period);
	if (pt || pu) {
		Perftools__Profiles__ValueType *v;

		v = w_alloc(w, 1, sizeof(*v), &err);
		if (err)
			return err;
		perftools__profiles__value_type__init(v);
		err = str_idx(w, pt, &v->type);
		if (!err)
			err = str_idx(w, pu, &v->unit);
		if (err)
			return err;
		msg->period_type = v;
	}
	profile__time(p, &msg->time_nanos, &msg->duration_nanos);
	for (int i = 0; i < nc; i++) {
		err = str_idx(w, profile__comment(p, i), &comments[i]);
		if (err)
			return err;
	}
	msg->n_comment = nc;
	msg->comment = comments;
	return 0;
}

static int build_tables(struct writer *w, Perftools__Profiles__Profile *msg)
{
	Perftools__Profiles__Mapping *maps, **pmaps;
	Perftools__Profiles__Function *funcs, **pfuncs;
	int err = 0;

	maps = w_alloc(w, w->nmaps, sizeof(*maps), &err);
	pmaps = w_alloc(w, w->nmaps, sizeof(*pmaps), &err);
	funcs = w_alloc(w, w->nfuncs, sizeof(*funcs), &err);
	pfuncs = w_alloc(w, w->nfuncs, sizeof(*pfuncs), &err);
	if (err)
		return err;
	for (size_t i = 0; i < w->nmaps; i++) {
		const struct map_ent *m = &w->maps[i];
		Perftools__Profiles__Mapping *M = &maps[i];

		perftools__profiles__mapping__init(M);
		pmaps[i] = M;
		M->id = i + 1;
		M->memory_start = m->start;
		M->memory_limit = m->limit;
		M->file_offset = m->offset;
		M->has_functions = m->has_functions;
		M->has_filenames = m->has_filenames;
		M->has_line_numbers = m->has_line_numbers;
		M->has_inline_frames = m->has_inline_frames;
		err = str_idx(w, m->module, &M->filename);
		if (!err)
			err = str_idx(w, m->emit_build_id, &M->build_id);
		if (err)
			return err;
	}
	for (size_t i = 0; i < w->nfuncs; i++) {
		const struct func_ent *f = &w->funcs[i];
		Perftools__Profiles__Function *F = &funcs[i];

		perftools__profiles__function__init(F);
		pfuncs[i] = F;
		F->id = i + 1;
		F->start_line = f->start_line;
		err = str_idx(w, f->name, &F->name);
		if (!err)
			err = str_idx(w, f->sys_name, &F->system_name);
		if (!err)
			err = str_idx(w, f->file, &F->filename);
		if (err)
			return err;
	}
	msg->n_mapping = w->nmaps;
	msg->mapping = pmaps;
	msg->n_function = w->nfuncs;
	msg->function = pfuncs;
	return 0;
}

int pprof__write(const struct profile *p, FILE *f)
{
	return pprof__write_level(p, f, Z_DEFAULT_COMPRESSION);
}

int pprof__write_level(const struct profile *p, FILE *f, int level)
{
	Perftools__Profiles__Profile msg = PERFTOOLS__PROFILES__PROFILE__INIT;
	struct writer w = {0};
	int err = 0;

	if (!p || !f)
		return -EINVAL;
	err = vec__grow((void **)&w.strs, &w.cap_strs, 1, sizeof(*w.strs));
	if (err)
		goto out;
	w.strs[w.nstrs++] = ""; /* string_table[0] must be "" */

	err = build_header(&w, p, &msg);
	if (!err)
		err = build_locations(&w, p, &msg);
	if (!err)
		err = build_samples(&w, p, &msg);
	if (!err)
		err = build_tables(&w, &msg);
	if (err)
		goto out;
	msg.n_string_table = w.nstrs;
	/* protobuf-c's char ** is only read while packing */
	msg.string_table = (char **)w.strs;
	err = write_gz(&msg, f, level);
out:
	for (size_t i = 0; i < w.nowned; i++)
		free(w.owned[i]);
	free(w.owned);
	free(w.strs);
	htab__clear(&w.str_tab);
	free(w.maps);
	htab__clear(&w.map_tab);
	free(w.funcs);
	htab__clear(&w.func_tab);
	return err;
}
