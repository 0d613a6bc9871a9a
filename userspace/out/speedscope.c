// SPDX-License-Identifier: MIT
/* speedscope writer. Frame identity is (name, file, start line) by pointer: the model
 * interns its strings, so equal strings are one pointer within a profile. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "speedscope.h"
#include "trace.h"

#include "version.h" /* GPUBPF_VERSION, generated (Makefile) */

struct sframe {
	const char *name, *file;
	int line;
};

struct sw {
	struct sframe *fr;
	size_t nfr, capfr;
	struct hmap idx; /* (name ptr, file ptr, line) -> frame index */
	char **owned;	 /* names made here ("pid 12", "[unknown]+0x...") */
	size_t nowned, capowned;
	uint32_t *stack; /* frame indices of one sample, root first */
	size_t nstack, capstack;
};

static int push_owned(struct sw *w, char *s)
{
	if (!s)
		return -ENOMEM;
	if (w->nowned == w->capowned) {
		size_t cap = w->capowned ? w->capowned * 2 : 16;
		char **n = realloc(w->owned, cap * sizeof(*n));

		if (!n) {
			free(s);
			return -ENOMEM;
		}
		w->owned = n;
		w->capowned = cap;
	}
	w->owned[w->nowned++] = s;
	return 0;
}

/* Index of the frame (name, file, line), added when new. */
static int frame_idx(struct sw *w, const char *name, const char *file, int line, uint32_t *out)
{
	uint64_t v;
	int err;

	if (line < 0)
		line = 0;
	if (hmap__get(&w->idx, (uintptr_t)name, (uintptr_t)file, (uint64_t)line, &v)) {
		*out = (uint32_t)v;
		return 0;
	}
	if (w->nfr == w->capfr) {
		size_t cap = w->capfr ? w->capfr * 2 : 256;
		struct sframe *n = realloc(w->fr, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		w->fr = n;
		w->capfr = cap;
	}
	w->fr[w->nfr] = (struct sframe){.name = name, .file = file, .line = line};
	err = hmap__put(&w->idx, (uintptr_t)name, (uintptr_t)file, (uint64_t)line, w->nfr);
	if (err)
		return err;
	*out = (uint32_t)w->nfr++;
	return 0;
}

static int push(struct sw *w, uint32_t fi)
{
	if (w->nstack == w->capstack) {
		size_t cap = w->capstack ? w->capstack * 2 : 512;
		uint32_t *n = realloc(w->stack, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		w->stack = n;
		w->capstack = cap;
	}
	w->stack[w->nstack++] = fi;
	return 0;
}

/* Names for an unsymbolized address, made once per location. */
static int unknown_frame(struct sw *w, const struct prof_location *loc, uint32_t *out)
{
	uint64_t v;
	char buf[64], *s;
	int err;

	/* keyed apart from real frames: name pointer 0 never occurs there */
	if (hmap__get(&w->idx, 0, loc->id, 1, &v)) {
		*out = (uint32_t)v;
		return 0;
	}
	snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, loc->kind == PROF_FRAME_KERNEL ? "[kernel.kallsyms]" : "[unknown]",
		 loc->addr);
	s = strdup(buf);
	err = push_owned(w, s);
	if (!err)
		err = frame_idx(w, s, NULL, 0, out);
	if (!err)
		err = hmap__put(&w->idx, 0, loc->id, 1, *out);
	return err;
}

static int sample_stack(struct sw *w, const struct profile *p, const struct prof_sample *s)
{
	const char *comm = NULL;
	uint32_t fi;
	int err;

	w->nstack = 0;
	for (uint32_t j = 0; j < s->nlabels; j++)
		if (s->labels[j].str && !strcmp(s->labels[j].key, "process_name"))
			comm = s->labels[j].str;
	if (comm) {
		err = frame_idx(w, comm, NULL, 0, &fi);
	} else {
		uint64_t v;

		if (hmap__get(&w->idx, 0, (uint32_t)s->pid, 2, &v)) {
			fi = (uint32_t)v;
			err = 0;
		} else {
			char buf[32], *n;

			snprintf(buf, sizeof(buf), "pid %d", s->pid);
			n = strdup(buf);
			err = push_owned(w, n);
			if (!err)
				err = frame_idx(w, n, NULL, 0, &fi);
			if (!err)
				err = hmap__put(&w->idx, 0, (uint32_t)s->pid, 2, fi);
		}
	}
	if (!err)
		err = push(w, fi);
	/* locations are leaf first and their frames inlined first: walk both backwards */
	for (uint32_t j = s->nlocs; !err && j-- > 0;) {
		const struct prof_location *loc = profile__location(p, s->locs[j]);

		if (!loc)
			continue;
		if (!loc->symbolized || loc->sym.nframes < 1) {
			err = unknown_frame(w, loc, &fi);
			if (!err)
				err = push(w, fi);
			continue;
		}
		for (int k = (loc->sym.nframes > SYMS_MAX_INLINE ? SYMS_MAX_INLINE : loc->sym.nframes);
		     !err && k-- > 0;) {
			const struct sym_frame *sf = &loc->sym.frames[k];

			err = frame_idx(w, sf->func, sf->file, sf->start_line, &fi);
			if (!err)
				err = push(w, fi);
		}
	}
	return err;
}

static const char *unit_of(const char *u)
{
	static const char *const known[] = {"nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"};

	for (size_t i = 0; u && i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(u, known[i]))
			return known[i];
	return "none";
}

/* One "sampled" profile: stacks as frame index arrays, weights beside them. */
static int write_profile(struct sw *w, const struct profile *p, int ti, FILE *f)
{
	size_t ns = profile__num_samples(p);
	const char *type, *unit;
	bool first = true;
	int err = 0;

	profile__type(p, ti, &type, &unit);
	fputs("{\"type\":\"sampled\",\"name\":", f);
	json__write_str(f, type);
	fprintf(f, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%" PRId64 ",\"samples\":[", unit_of(unit),
		profile__total(p, ti) > 0 ? profile__total(p, ti) : 0);
	for (size_t i = 0; i < ns && !err; i++) {
		const struct prof_sample *s = profile__sample(p, i);

		if (s->values[ti] <= 0)
			continue;
		err = sample_stack(w, p, s);
		if (err)
			break;
		fputs(first ? "\n[" : ",\n[", f);
		first = false;
		for (size_t k = 0; k < w->nstack; k++)
			fprintf(f, "%s%" PRIu32, k ? "," : "", w->stack[k]);
		putc(']', f);
	}
	fputs("],\n\"weights\":[", f);
	first = true;
	for (size_t i = 0; i < ns; i++) {
		const struct prof_sample *s = profile__sample(p, i);

		if (s->values[ti] <= 0)
			continue;
		fprintf(f, "%s%" PRId64, first ? "" : ",", s->values[ti]);
		first = false;
	}
	fputs("]}", f);
	return err;
}

/* The tab speedscope opens on: CPU samples when there are any, else device time, else
 * launches, else the first type written. */
static int active_index(const struct profile *p, const int *types, int n)
{
	static const char *const pref[] = {"samples", "cpu", "gpu_kernel_time", "cuda_launches", "cuda_calls"};

	for (size_t k = 0; k < sizeof(pref) / sizeof(pref[0]); k++)
		for (int i = 0; i < n; i++)
			if (types[i] == profile__find_type(p, pref[k]))
				return i;
	return 0;
}

int speedscope__write(const struct profile *p, FILE *f)
{
	struct sw w = {0};
	int ntypes, n = 0, types[PROFILE_MAX_TYPES];
	int err = 0;

	if (!p || !f)
		return -EINVAL;
	/* An empty type would only add a blank tab (a CUDA recording opened on an empty
	 * "samples" tab): only types with data, or the first when none has any. */
	ntypes = profile__num_types(p);
	for (int ti = 0; ti < ntypes && n < PROFILE_MAX_TYPES; ti++)
		if (profile__total(p, ti) > 0)
			types[n++] = ti;
	if (!n && ntypes)
		types[n++] = 0;
	fprintf(f,
		"{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"gpubpf %s\","
		"\"name\":\"gpubpf profile\",\"activeProfileIndex\":%d,\n\"profiles\":[",
		GPUBPF_VERSION, active_index(p, types, n));
	for (int i = 0; i < n && !err; i++) {
		if (i)
			fputs(",\n", f);
		err = write_profile(&w, p, types[i], f);
	}
	if (err)
		goto out;
	fputs("],\n\"shared\":{\"frames\":[", f);
	for (size_t i = 0; i < w.nfr; i++) {
		const struct sframe *fr = &w.fr[i];

		fputs(i ? ",\n{\"name\":" : "\n{\"name\":", f);
		json__write_str(f, fr->name);
		if (fr->file) {
			fputs(",\"file\":", f);
			json__write_str(f, fr->file);
		}
		if (fr->line > 0)
			fprintf(f, ",\"line\":%d", fr->line);
		putc('}', f);
	}
	fputs("]}}\n", f);
	if (fflush(f) != 0 || ferror(f))
		err = -EIO;
out:
	for (size_t i = 0; i < w.nowned; i++)
		free(w.owned[i]);
	free(w.owned);
	free(w.fr);
	free(w.stack);
	hmap__clear(&w.idx);
	return err;
}
