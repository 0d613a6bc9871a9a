// SPDX-License-Identifier: MIT
/* pprof reader: zlib inflates, protobuf-c unpacks, and every reference is checked before
 * the model sees it. Locations become already-resolved model locations (one per file
 * location, in file order); samples reference them by id. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pbscan.h"
#include "pprof_read.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile PB;

static void set_err(struct pprof_read_info *info, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(struct pprof_read_info *info, const char *fmt, ...)
{
	va_list ap;

	if (!info)
		return;
	va_start(ap, fmt);
	vsnprintf(info->error, sizeof(info->error), fmt, ap);
	va_end(ap);
}

int pprof_read__slurp(const char *path, size_t max, char **out, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	size_t cap = 1 << 16, n = 0;
	char *buf = NULL;
	int err = 0;

	*out = NULL;
	*len = 0;
	if (!f)
		return -errno;
	for (;;) {
		size_t got;

		if (!buf || n == cap) {
			char *nb;

			if (buf)
				cap *= 2;
			if (cap > max + 1)
				cap = max + 1;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				err = -ENOMEM;
				break;
			}
			buf = nb;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (n > max) {
			err = -EFBIG;
			break;
		}
		if (got == 0) {
			if (ferror(f))
				err = -EIO;
			break;
		}
	}
	if (f != stdin)
		fclose(f);
	if (err) {
		free(buf);
		return err;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

/* ---- id lookups: ids are usually 1..N in order, but the format does not say so ---- */

struct id_ent {
	uint64_t id;
	size_t idx;
};

struct id_index {
	struct id_ent *ents;
	size_t n;
	bool dense; /* ids are 1..n in order: idx = id - 1 */
};

static int cmp_id(const void *a, const void *b)
{
	uint64_t x = ((const struct id_ent *)a)->id, y = ((const struct id_ent *)b)->id;

	return x < y ? -1 : x > y;
}

/* ids[i] for i < n, read through get. Fails on id 0 or a duplicate. */
static int id_index_build(struct id_index *ix, size_t n, uint64_t (*get)(const void *arr, size_t i), const void *arr)
{
	ix->n = n;
	ix->dense = true;
	ix->ents = NULL;
	for (size_t i = 0; i < n; i++)
		if (get(arr, i) != i + 1)
			ix->dense = false;
	if (ix->dense || !n)
		return 0;
	ix->ents = calloc(n, sizeof(*ix->ents));
	if (!ix->ents)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		ix->ents[i].id = get(arr, i);
		ix->ents[i].idx = i;
		if (!ix->ents[i].id)
			return -EINVAL;
	}
	qsort(ix->ents, n, sizeof(*ix->ents), cmp_id);
	for (size_t i = 1; i < n; i++)
		if (ix->ents[i].id == ix->ents[i - 1].id)
			return -EINVAL;
	return 0;
}

/* Index of id, or -1. */
static long id_index_find(const struct id_index *ix, uint64_t id)
{
	struct id_ent key = {.id = id}, *e;

	if (ix->dense)
		return id >= 1 && id <= ix->n ? (long)(id - 1) : -1;
	if (!ix->n)
		return -1;
	e = bsearch(&key, ix->ents, ix->n, sizeof(*ix->ents), cmp_id);
	return e ? (long)e->idx : -1;
}

static uint64_t get_map_id(const void *arr, size_t i)
{
	return ((Perftools__Profiles__Mapping *const *)arr)[i]->id;
}

static uint64_t get_func_id(const void *arr, size_t i)
{
	return ((Perftools__Profiles__Function *const *)arr)[i]->id;
}

static uint64_t get_loc_id(const void *arr, size_t i)
{
	return ((Perftools__Profiles__Location *const *)arr)[i]->id;
}

/* ---- conversion ---- */

struct reader;
static int read_main_mapping(struct reader *r);

struct reader {
	const PB *pb;
	struct profile *p;
	struct pprof_read_info *info;
	struct id_index maps, funcs, locs;
	uint32_t *loc_model_id; /* file location index -> model location id */
};

/* String at index i, or NULL when out of range. */
static const char *str_at(const PB *pb, int64_t i)
{
	if (i < 0 || (uint64_t)i >= pb->n_string_table)
		return NULL;
	return pb->string_table[i] ? pb->string_table[i] : "";
}

/* The string at index i, or an error naming what referenced it. */
static int need_str(struct reader *r, int64_t i, const char *what, const char **out)
{
	*out = str_at(r->pb, i);
	if (!*out) {
		set_err(r->info, "%s refers to string %lld, past the string table (%zu entries)", what, (long long)i,
			r->pb->n_string_table);
		return -EINVAL;
	}
	return 0;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s && s[1] ? s + 1 : path;
}

static uint32_t kind_of_mapping(const char *file)
{
	if (!file)
		return PROF_FRAME_USER;
	if (!strcmp(file, "[cuda]"))
		return PROF_FRAME_SYNTH;
	if (!strcmp(file, "[kernel.kallsyms]") || !strncmp(file, "[kernel", 7) || !strcmp(file, "[vmlinux]"))
		return PROF_FRAME_KERNEL;
	return PROF_FRAME_USER;
}

/* The file's first mapping is its program (pprof's "File:"): keep it first. */
static int read_main_mapping(struct reader *r)
{
	const Perftools__Profiles__Mapping *m = r->pb->n_mapping ? r->pb->mapping[0] : NULL;
	const char *file, *bid;

	if (!m)
		return 0;
	file = str_at(r->pb, m->filename);
	bid = str_at(r->pb, m->build_id);
	if (!file || !*file || kind_of_mapping(file) != PROF_FRAME_USER)
		return 0;
	return profile__set_main_mapping(r->p, file, bid && *bid ? bid : NULL, m->memory_start, m->memory_limit,
					 m->file_offset);
}

static int read_locations(struct reader *r)
{
	const PB *pb = r->pb;
	int err;

	if (pb->n_location > UINT32_MAX - 2) {
		set_err(r->info, "too many locations (%zu)", pb->n_location);
		return -E2BIG;
	}
	r->loc_model_id = calloc(pb->n_location ? pb->n_location : 1, sizeof(*r->loc_model_id));
	if (!r->loc_model_id)
		return -ENOMEM;
	for (size_t i = 0; i < pb->n_location; i++) {
		const Perftools__Profiles__Location *L = pb->location[i];
		const Perftools__Profiles__Mapping *M = NULL;
		struct sym_result sym;
		const char *module = NULL;
		char fallback[300];
		uint32_t kind;
		size_t nl = L->n_line;

		memset(&sym, 0, sizeof(sym));
		if (L->mapping_id) {
			long mi = id_index_find(&r->maps, L->mapping_id);

			if (mi < 0) {
				set_err(r->info, "location %llu refers to mapping %llu, which does not exist",
					(unsigned long long)L->id, (unsigned long long)L->mapping_id);
				return -EINVAL;
			}
			M = pb->mapping[mi];
			err = need_str(r, M->filename, "a mapping's file name", &module);
			if (!err)
				err = need_str(r, M->build_id, "a mapping's build id", &sym.build_id);
			if (err)
				return err;
			if (!*sym.build_id)
				sym.build_id = NULL;
			sym.map_start = M->memory_start;
			sym.map_limit = M->memory_limit;
			sym.map_offset = M->file_offset;
			if (L->address >= M->memory_start)
				sym.rel_addr = L->address - M->memory_start + M->file_offset;
		}
		if (module && !*module)
			module = NULL;
		kind = kind_of_mapping(module);
		sym.module = module ? module : "[unknown]";
		/* more inlined frames than the model keeps: the innermost ones and the real
		 * function (the last line) survive */
		sym.nframes = nl > SYMS_MAX_INLINE ? SYMS_MAX_INLINE : (int)nl;
		for (size_t j = 0; j < nl; j++) {
			const Perftools__Profiles__Line *ln = L->line[j];
			struct sym_frame *fr;
			long fi;
			const Perftools__Profiles__Function *F;

			if (j >= SYMS_MAX_INLINE - 1 && j != nl - 1)
				continue;
			fr = &sym.frames[j < SYMS_MAX_INLINE - 1 ? j : SYMS_MAX_INLINE - 1];
			fr->line = ln->line > 0 && ln->line < INT32_MAX ? (int)ln->line : 0;
			if (!ln->function_id)
				continue;
			fi = id_index_find(&r->funcs, ln->function_id);
			if (fi < 0) {
				set_err(r->info, "location %llu refers to function %llu, which does not exist",
					(unsigned long long)L->id, (unsigned long long)ln->function_id);
				return -EINVAL;
			}
			F = pb->function[fi];
			err = need_str(r, F->name, "a function name", &fr->func);
			if (!err)
				err = need_str(r, F->system_name, "a function's system name", &fr->sys_name);
			if (!err)
				err = need_str(r, F->filename, "a function's file name", &fr->file);
			if (err)
				return err;
			if (!*fr->func)
				fr->func = *fr->sys_name ? fr->sys_name : NULL;
			if (!*fr->sys_name)
				fr->sys_name = NULL;
			if (!*fr->file)
				fr->file = NULL;
			fr->start_line = F->start_line > 0 && F->start_line < INT32_MAX ? (int)F->start_line : 0;
			if (fr->func)
				sym.resolved = true;
		}
		if (!sym.nframes) {
			/* no line at all: name it the way gpubpf names an address no symbol covers */
			sym.nframes = 1;
			if (module)
				snprintf(fallback, sizeof(fallback), "%.200s+0x%llx", base_name(module),
					 (unsigned long long)sym.rel_addr);
			else
				snprintf(fallback, sizeof(fallback), "[unknown]+0x%llx",
					 (unsigned long long)L->address);
			sym.frames[0].func = fallback;
		}
		for (int j = 0; j < sym.nframes; j++)
			if (!sym.frames[j].func) {
				snprintf(fallback, sizeof(fallback), "%.200s+0x%llx",
					 module ? base_name(module) : "[unknown]",
					 (unsigned long long)(module ? sym.rel_addr : L->address));
				sym.frames[j].func = fallback;
			}
		if (kind == PROF_FRAME_SYNTH)
			sym.module = "[cuda]";
		err = profile__add_resolved_location(r->p, kind, 0, L->address, &sym, &r->loc_model_id[i]);
		if (err) {
			set_err(r->info, "cannot add location %llu: %s", (unsigned long long)L->id, strerror(-err));
			return err;
		}
	}
	return 0;
}

static void note_skipped_type(struct pprof_read_info *info, const char *t, const char *u)
{
	size_t len;

	if (!info)
		return;
	info->nskipped_types++;
	len = strlen(info->skipped_types);
	snprintf(info->skipped_types + len, sizeof(info->skipped_types) - len, "%s%.60s/%.30s", len ? ", " : "", t, u);
}

/* Add the file's types to the model; map[i] is the model index of file type i, or -1. */
static int read_types(struct reader *r, int *map)
{
	const PB *pb = r->pb;
	long dflt = -1;
	int err;

	for (size_t i = 0; i < pb->n_sample_type; i++)
		map[i] = -1;
	/* the model's default type is the first one added; pprof's is default_sample_type,
	 * or the last type when that is unset */
	if (pb->default_sample_type) {
		for (size_t i = 0; i < pb->n_sample_type; i++)
			if (pb->sample_type[i]->type == pb->default_sample_type)
				dflt = (long)i;
	} else if (pb->n_sample_type) {
		dflt = (long)pb->n_sample_type - 1;
	}
	for (long k = -1; k < (long)pb->n_sample_type; k++) {
		long i = k < 0 ? dflt : k;
		const char *t, *u;
		char name[256];
		int idx;

		if (i < 0 || (k >= 0 && i == dflt))
			continue;
		err = need_str(r, pb->sample_type[i]->type, "a sample type", &t);
		if (!err)
			err = need_str(r, pb->sample_type[i]->unit, "a sample unit", &u);
		if (err)
			return err;
		snprintf(name, sizeof(name), "%s", *t ? t : "value");
		if (strchr(name, '-')) {
			for (char *c = name; *c; c++)
				if (*c == '-')
					*c = '_';
			if (r->info)
				r->info->nrenamed_types++;
		}
		idx = profile__add_type(r->p, name, u);
		if (idx == -EEXIST || idx == -E2BIG) {
			note_skipped_type(r->info, name, u);
			continue;
		}
		if (idx < 0) {
			set_err(r->info, "cannot add sample type %s: %s", name, strerror(-idx));
			return idx;
		}
		map[i] = idx;
	}
	return 0;
}

static int read_samples(struct reader *r, const int *type_map)
{
	const PB *pb = r->pb;
	uint32_t locs[PROFILE_MAX_FRAMES];
	struct prof_label labs[PROFILE_MAX_LABELS];
	int64_t vals[PROFILE_MAX_TYPES];
	int err;

	for (size_t i = 0; i < pb->n_sample; i++) {
		const Perftools__Profiles__Sample *S = pb->sample[i];
		int nl = 0, nlab = 0, pid = 0, tid = 0;

		if (S->n_value != pb->n_sample_type) {
			if (r->info)
				r->info->skipped_samples++;
			continue;
		}
		memset(vals, 0, sizeof(vals));
		for (size_t j = 0; j < S->n_value; j++)
			if (type_map[j] >= 0)
				vals[type_map[j]] = S->value[j];
		for (size_t j = 0; j < S->n_location_id; j++) {
			long li = id_index_find(&r->locs, S->location_id[j]);

			if (li < 0) {
				set_err(r->info, "sample %zu refers to location %llu, which does not exist", i,
					(unsigned long long)S->location_id[j]);
				return -EINVAL;
			}
			if (nl < PROFILE_MAX_FRAMES)
				locs[nl++] = r->loc_model_id[li];
		}
		if (S->n_location_id > PROFILE_MAX_FRAMES && r->info)
			r->info->truncated_stacks++;
		for (size_t j = 0; j < S->n_label; j++) {
			const Perftools__Profiles__Label *L = S->label[j];
			struct prof_label *l = &labs[nlab];
			const char *key, *str, *unit;

			err = need_str(r, L->key, "a label key", &key);
			if (!err)
				err = need_str(r, L->str, "a label value", &str);
			if (!err)
				err = need_str(r, L->num_unit, "a label unit", &unit);
			if (err)
				return err;
			if (!*key)
				continue;
			if (nlab >= PROFILE_MAX_LABELS) {
				if (r->info)
					r->info->dropped_labels++;
				continue;
			}
			memset(l, 0, sizeof(*l));
			l->key = key;
			if (L->str) {
				l->str = str;
			} else {
				l->num = L->num;
				l->unit = *unit ? unit : NULL;
			}
			/* the model keys samples by pid and tid too; gpubpf writes them as labels */
			if (!strcmp(key, "pid") || !strcmp(key, "tid")) {
				long long v = l->str ? strtoll(l->str, NULL, 10) : l->num;

				if (v > 0 && v <= INT32_MAX)
					*(key[0] == 'p' ? &pid : &tid) = (int)v;
			}
			nlab++;
		}
		err = profile__add_sample_locs(r->p, pid, tid, locs, nl, labs, nlab, vals);
		if (err) {
			set_err(r->info, "cannot add sample %zu: %s", i, strerror(-err));
			return err;
		}
	}
	return 0;
}

static int read_header(struct reader *r)
{
	const PB *pb = r->pb;
	int err = 0;

	if (pb->period_type) {
		const char *t, *u;

		err = need_str(r, pb->period_type->type, "the period type", &t);
		if (!err)
			err = need_str(r, pb->period_type->unit, "the period unit", &u);
		if (!err)
			err = profile__set_period(r->p, t, u, pb->period);
		if (err)
			return err;
	}
	profile__set_time(r->p, pb->time_nanos, pb->duration_nanos);
	for (size_t i = 0; i < pb->n_comment; i++) {
		const char *c;

		err = need_str(r, pb->comment[i], "a comment", &c);
		if (!err)
			err = profile__add_comment(r->p, "%s", c);
		if (err)
			return err;
	}
	return 0;
}

struct profile *pprof_read__buf(const void *data, size_t len, struct pprof_read_info *info)
{
	struct reader r = {.info = info};
	const unsigned char *in = data;
	unsigned char *raw = NULL;
	size_t rawlen = len;
	int *type_map = NULL;
	struct pbscan scan = {
	    .max_field = PPROF_READ_MAX_FIELD, .max_string = PPROF_READ_MAX_STRING, .string_field = PPROF_STRING_FIELD};
	PB *pb = NULL;
	bool gz;
	int err;

	if (info)
		memset(info, 0, sizeof(*info));
	if (!data && len) {
		errno = EINVAL;
		return NULL;
	}
	gz = len >= 2 && in[0] == 0x1f && in[1] == 0x8b;
	if (len > PPROF_READ_MAX_BYTES) {
		set_err(info, "file too large (%zu bytes, at most %llu)", len, PPROF_READ_MAX_BYTES);
		err = -EFBIG;
		goto out;
	}
	/* Every field is checked against its bound as the bytes come, before anything is
	 * unpacked: a field of a gigabyte is refused after its first bytes. */
	pbscan__init(&scan);
	if (gz) {
		err = pbscan__gunzip(&scan, in, len, PPROF_READ_MAX_BYTES, &raw, &rawlen);
		if (!err)
			in = raw;
	} else {
		err = pbscan__feed(&scan, in, len);
	}
	if (!err && !pbscan__complete(&scan))
		err = -EBADMSG;
	if (err) {
		if (err == -EFBIG && scan.bad_field)
			set_err(info, "%s of %llu bytes (at most %llu): refused",
				scan.bad_field == PPROF_STRING_FIELD ? "a string" : "a field",
				(unsigned long long)scan.bad_len,
				(unsigned long long)(scan.bad_field == PPROF_STRING_FIELD ? scan.max_string
											  : scan.max_field));
		else if (err == -EFBIG)
			set_err(info, "decompresses to more than %llu MiB: refused", PPROF_READ_MAX_BYTES >> 20);
		else if (err == -EBADMSG && gz)
			set_err(info, "not a valid gzip stream of a protobuf (corrupt or truncated)");
		else if (err == -EBADMSG)
			set_err(info, "not a pprof profile (not protobuf wire format)");
		goto out;
	}
	pb = perftools__profiles__profile__unpack(NULL, rawlen, in);
	if (!pb) {
		set_err(info, "not a pprof profile (the protobuf does not decode as perftools.profiles.Profile)");
		err = -EBADMSG;
		goto out;
	}
	r.pb = pb;
	if (!pb->n_sample_type) {
		set_err(info, "the profile declares no sample types");
		err = -EINVAL;
		goto out;
	}
	err = id_index_build(&r.maps, pb->n_mapping, get_map_id, pb->mapping);
	if (err == -EINVAL)
		set_err(info, "mapping ids are zero or repeated");
	if (!err) {
		err = id_index_build(&r.funcs, pb->n_function, get_func_id, pb->function);
		if (err == -EINVAL)
			set_err(info, "function ids are zero or repeated");
	}
	if (!err) {
		err = id_index_build(&r.locs, pb->n_location, get_loc_id, pb->location);
		if (err == -EINVAL)
			set_err(info, "location ids are zero or repeated");
	}
	if (err)
		goto out;
	r.p = profile__new();
	type_map = calloc(pb->n_sample_type, sizeof(*type_map));
	if (!r.p || !type_map) {
		err = -ENOMEM;
		goto out;
	}
	err = read_types(&r, type_map);
	if (!err)
		err = read_header(&r);
	if (!err)
		err = read_locations(&r);
	if (!err)
		err = read_main_mapping(&r);
	if (!err)
		err = read_samples(&r, type_map);
out:
	if (err && info && !info->error[0])
		set_err(info, "%s", strerror(-err));
	free(type_map);
	free(r.loc_model_id);
	free(r.maps.ents);
	free(r.funcs.ents);
	free(r.locs.ents);
	if (pb)
		perftools__profiles__profile__free_unpacked(pb, NULL);
	free(raw);
	if (err) {
		profile__free(r.p);
		errno = -err;
		return NULL;
	}
	return r.p;
}

struct profile *pprof_read__file(const char *path, struct pprof_read_info *info)
{
	struct profile *p;
	size_t len;
	char *buf;
	int err;

	if (info)
		memset(info, 0, sizeof(*info));
	if (!path) {
		errno = EINVAL;
		return NULL;
	}
	err = pprof_read__slurp(path, PPROF_READ_MAX_BYTES, &buf, &len);
	if (err) {
		set_err(info, "cannot read %s: %s", path,
			err == -EFBIG ? "larger than " PPROF_READ_MAX_TEXT : strerror(-err));
		errno = -err;
		return NULL;
	}
	p = pprof_read__buf(buf, len, info);
	err = errno;
	free(buf);
	errno = err;
	return p;
}
