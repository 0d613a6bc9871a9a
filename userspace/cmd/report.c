// SPDX-License-Identifier: MIT
/* gpubpf report: aggregate the model into small tables and print them aligned.
 *
 * A CUDA sample's stack is, leaf first: the GPU-side frame (kernel name, "[memcpy
 * HtoD]", ...) when there is one, the API frame, then the caller's frames. The synthetic
 * frames are the leading locations of kind PROF_FRAME_SYNTH (mapping "[cuda]" in a file),
 * so the API frame is the last of them and the GPU-side frame the first when there are
 * two. A "call site" is the innermost frame that is not CUDA's own: not in an NVIDIA
 * library, not an nvcc-generated launch stub, and not the host stub that carries the
 * kernel's own name.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "log.h"
#include "report.h"

#include "report_int.h"

/* ---- reading CUDA stacks ---- */

static const char *loc_func(const struct prof_location *l)
{
	return l && l->symbolized && l->sym.nframes > 0 ? l->sym.frames[0].func : NULL;
}

struct cuda_view {
	int nsynth;
	const char *api;  /* API function, or NULL: not a CUDA sample */
	const char *leaf; /* GPU-side frame, or NULL */
	const char *leaf_sys;
};

static void cuda_view(const struct profile *p, const struct prof_sample *s, struct cuda_view *cv)
{
	memset(cv, 0, sizeof(*cv));
	while ((uint32_t)cv->nsynth < s->nlocs) {
		const struct prof_location *l = profile__location(p, s->locs[cv->nsynth]);

		if (!l || l->kind != PROF_FRAME_SYNTH || !loc_func(l))
			break;
		cv->nsynth++;
	}
	if (!cv->nsynth)
		return;
	cv->api = loc_func(profile__location(p, s->locs[cv->nsynth - 1]));
	if (cv->nsynth >= 2) {
		const struct prof_location *l = profile__location(p, s->locs[0]);

		cv->leaf = loc_func(l);
		cv->leaf_sys = l->sym.frames[0].sys_name;
	}
}

static bool has_prefix(const char *s, const char *prefix)
{
	return s && !strncmp(s, prefix, strlen(prefix));
}

/* An NVIDIA library, or code nvcc and the CUDA headers put between a kernel launch and
 * the line that wrote it. */
static bool is_cuda_frame(const struct prof_location *l, const struct sym_frame *fr, const struct cuda_view *cv)
{
	static const char *const libs[] = {"libcudart", "libcuda.", "libcuda-",	    "libcupti",	    "libcublas",
					   "libcudnn",	"libcufft", "libcurand",    "libcusparse",  "libcusolver",
					   "libnccl",	"libnvrtc", "libnvJitLink", "libnvToolsExt"};
	static const char *const funcs[] = {"__cudaLaunch",
					    "__device_stub__",
					    "__wrapper__device_stub",
					    "__cudaPushCallConfiguration",
					    "__cudaPopCallConfiguration",
					    "cudaLaunch",
					    "cuLaunch"};
	const char *mod = l->sym.module, *base;

	if (l->kind == PROF_FRAME_SYNTH)
		return true;
	base = mod ? strrchr(mod, '/') : NULL;
	base = base ? base + 1 : mod;
	for (size_t i = 0; base && i < sizeof(libs) / sizeof(libs[0]); i++)
		if (has_prefix(base, libs[i]))
			return true;
	for (size_t i = 0; i < sizeof(funcs) / sizeof(funcs[0]); i++)
		if (has_prefix(fr->func, funcs[i]))
			return true;
	/* the host-side stub nvcc generates is named like the kernel */
	if (cv->leaf && (fr->func == cv->leaf || (fr->func && !strcmp(fr->func, cv->leaf))))
		return true;
	if (cv->leaf_sys && fr->sys_name && !strcmp(fr->sys_name, cv->leaf_sys))
		return true;
	return false;
}

static const struct sym_frame no_site = {.func = "[no call site outside CUDA]"};

/* The innermost frame of s that is not CUDA's own. */
static const struct sym_frame *call_site(const struct profile *p, const struct prof_sample *s,
					 const struct cuda_view *cv)
{
	for (uint32_t j = cv->nsynth; j < s->nlocs; j++) {
		const struct prof_location *l = profile__location(p, s->locs[j]);

		if (!l || !l->symbolized)
			continue;
		for (int k = 0; k < l->sym.nframes && k < SYMS_MAX_INLINE; k++)
			if (l->sym.frames[k].func && !is_cuda_frame(l, &l->sym.frames[k], cv))
				return &l->sym.frames[k];
	}
	return &no_site;
}

/* ---- sections ---- */

struct ctx {
	const struct profile *p;
	const struct report_opts *o;
	FILE *f;
	int t_calls, t_launch, t_memcpy, t_sync, t_alloc, t_inuse, t_ktime, t_ctime;
};

static int64_t val(const struct prof_sample *s, int t)
{
	return t >= 0 ? s->values[t] : 0;
}

static int64_t total(const struct ctx *c, int t)
{
	return t >= 0 ? profile__total(c->p, t) : 0;
}

void rep_section(FILE *f, const char *title)
{
	fprintf(f, "\n%s\n", title);
}

/* Sum the sample types T[0..n) per call site (call_site) into table RT, over the samples
 * with a value of T[0] or T[1] (the section's own types; the others ride along).
 * 0, or -ENOMEM with RT freed. */
static int sum_by_call_site(struct ctx *c, struct table *rt, const int *types, int n)
{
	for (size_t i = 0; i < profile__num_samples(c->p); i++) {
		const struct prof_sample *s = profile__sample(c->p, i);
		const struct sym_frame *site;
		struct cuda_view cv;
		struct row *r;

		if (!val(s, types[0]) && !val(s, types[1]))
			continue;
		cuda_view(c->p, s, &cv);
		site = call_site(c->p, s, &cv);
		r = rep_table_get(rt, site->func, site->file, site->file ? site->line : 0);
		if (!r) {
			rep_table_free(rt);
			return -ENOMEM;
		}
		for (int k = 0; k < n; k++)
			rep_sat_add(&r->v[k], val(s, types[k]));
	}
	return 0;
}

static int sec_api(struct ctx *c)
{
	static const struct col cols[] = {
	    {"calls", COL_VAL, 0, 0, U_COUNT, true}, {"calls%", COL_PCT, 0, 0, U_COUNT, true},
	    {"wait", COL_VAL, 1, 0, U_NS, true},     {"wait%", COL_PCT, 1, 0, U_COUNT, true},
	    {"avg wait", COL_AVG, 1, 0, U_NS, true},
	};
	struct table t = {0};
	char title[128];

	if (c->t_calls < 0) {
		fprintf(c->f, "\nCUDA API summary: left out: the profile has no cuda_calls sample type "
			      "(not recorded by gpubpf's CUDA tracer)\n");
		return 0;
	}
	if (total(c, c->t_calls) <= 0) {
		fprintf(c->f, "\nCUDA API summary: left out: no CUDA API calls were traced (the targets made "
			      "none, or loaded no CUDA library)\n");
		return 0;
	}
	for (size_t i = 0; i < profile__num_samples(c->p); i++) {
		const struct prof_sample *s = profile__sample(c->p, i);
		struct cuda_view cv;
		struct row *r;

		if (!val(s, c->t_calls) && !val(s, c->t_sync))
			continue;
		cuda_view(c->p, s, &cv);
		if (!cv.api)
			continue;
		r = rep_table_get(&t, cv.api, NULL, 0);
		if (!r) {
			rep_table_free(&t);
			return -ENOMEM;
		}
		rep_sat_add(&r->v[0], val(s, c->t_calls));
		rep_sat_add(&r->v[1], val(s, c->t_sync));
	}
	snprintf(title, sizeof(title), "CUDA API summary (%" PRId64 " calls; wait: time inside synchronizing calls)",
		 total(c, c->t_calls));
	rep_section(c->f, title);
	rep_print_table(c->f, &t, cols, c->t_sync >= 0 ? 5 : 2, 0, c->o->top, c->o->raw, "function", 0);
	rep_table_free(&t);
	return 0;
}

static int sec_kernels(struct ctx *c)
{
	static const struct col tcols[] = {
	    {"time", COL_VAL, 1, 0, U_NS, true},
	    {"time%", COL_PCT, 1, 0, U_COUNT, true},
	    {"instances", COL_VAL, 0, 0, U_COUNT, true},
	    {"avg", COL_AVG, 1, 0, U_NS, true},
	};
	static const struct col lcols[] = {
	    {"launches", COL_VAL, 0, 0, U_COUNT, true},
	    {"launches%", COL_PCT, 0, 0, U_COUNT, true},
	};
	bool dev = total(c, c->t_ktime) > 0;
	struct table t = {0};
	char title[160];

	if (total(c, c->t_launch) <= 0 && !dev) {
		fprintf(c->f, "\nGPU kernel summary: left out: %s\n",
			c->t_launch < 0 ? "the profile has no cuda_launches or gpu_kernel_time sample type"
					: "no kernel launches were traced");
		return 0;
	}
	for (size_t i = 0; i < profile__num_samples(c->p); i++) {
		const struct prof_sample *s = profile__sample(c->p, i);
		struct cuda_view cv;
		struct row *r;

		if (!val(s, c->t_launch) && !val(s, c->t_ktime))
			continue;
		cuda_view(c->p, s, &cv);
		r = rep_table_get(&t, cv.leaf ? cv.leaf : cv.api ? cv.api : "[unknown kernel]", NULL, 0);
		if (!r) {
			rep_table_free(&t);
			return -ENOMEM;
		}
		rep_sat_add(&r->v[0], val(s, c->t_launch));
		rep_sat_add(&r->v[1], val(s, c->t_ktime));
	}
	if (dev) {
		snprintf(title, sizeof(title), "GPU kernel summary (device time; instances: launches)");
		rep_section(c->f, title);
		rep_print_table(c->f, &t, tcols, 4, 1, c->o->top, c->o->raw, "kernel", 0);
	} else {
		snprintf(title, sizeof(title), "GPU kernel summary (%" PRId64 " launches)", total(c, c->t_launch));
		rep_section(c->f, title);
		fprintf(c->f, "  no device time: %s; launches only\n",
			c->t_ktime < 0 ? "the profile has no gpu_kernel_time (the target was not started with "
					 "gpubpf's injection library, which times kernels with CUPTI)"
				       : "gpu_kernel_time is zero (no GPU ran the kernels, or the injection library "
					 "was not attached)");
		rep_print_table(c->f, &t, lcols, 2, 0, c->o->top, c->o->raw, "kernel", 0);
	}
	rep_table_free(&t);
	return 0;
}

static bool is_memop(const char *leaf)
{
	return has_prefix(leaf, "[memcpy") || has_prefix(leaf, "[memset");
}

static int sec_memops(struct ctx *c)
{
	static const struct col cols[] = {
	    {"calls", COL_VAL, 0, 0, U_COUNT, true},  {"bytes", COL_VAL, 1, 0, U_BYTES, true},
	    {"bytes%", COL_PCT, 1, 0, U_COUNT, true}, {"time", COL_VAL, 2, 0, U_NS, true},
	    {"time%", COL_PCT, 2, 0, U_COUNT, true},
	};
	bool dev = total(c, c->t_ctime) > 0;
	struct table t = {0};

	for (size_t i = 0; i < profile__num_samples(c->p); i++) {
		const struct prof_sample *s = profile__sample(c->p, i);
		struct cuda_view cv;
		struct row *r;

		if (!val(s, c->t_calls) && !val(s, c->t_memcpy) && !val(s, c->t_ctime))
			continue;
		cuda_view(c->p, s, &cv);
		if (!is_memop(cv.leaf))
			continue;
		r = rep_table_get(&t, cv.leaf, NULL, 0);
		if (!r) {
			rep_table_free(&t);
			return -ENOMEM;
		}
		rep_sat_add(&r->v[0], val(s, c->t_calls));
		rep_sat_add(&r->v[1], val(s, c->t_memcpy));
		rep_sat_add(&r->v[2], val(s, c->t_ctime));
	}
	if (!t.n) {
		fprintf(c->f, "\nMemory operations: left out: %s\n",
			c->t_memcpy < 0 ? "the profile has no cuda_memcpy sample type"
					: "no copies or memsets were traced");
		return 0;
	}
	rep_section(c->f, dev ? "Memory operations (bytes requested; time on the device)"
			      : "Memory operations (bytes requested)");
	if (!dev)
		fprintf(c->f, "  no device time for copies (gpu_memcpy_time %s)\n",
			c->t_ctime < 0 ? "absent: not recorded with the injection library" : "is zero");
	rep_print_table(c->f, &t, cols, dev ? 5 : 3, 1, c->o->top, c->o->raw, "operation", 0);
	rep_table_free(&t);
	return 0;
}

static int sec_gpumem(struct ctx *c)
{
	static const struct col cols[] = {
	    {"allocated", COL_VAL, 0, 0, U_BYTES, true}, {"alloc%", COL_PCT, 0, 0, U_COUNT, true},
	    {"in use", COL_VAL, 1, 0, U_BYTES, true},	 {"in use%", COL_PCT, 1, 0, U_COUNT, true},
	    {"calls", COL_VAL, 2, 0, U_COUNT, true},
	};
	struct table t = {0};
	char title[200], a[CELL], u[CELL];

	if (total(c, c->t_alloc) <= 0) {
		fprintf(c->f, "\nGPU memory: left out: %s\n",
			c->t_alloc < 0 ? "the profile has no gpu_alloc sample type" : "no GPU allocations were traced");
		return 0;
	}
	if (sum_by_call_site(c, &t, (const int[]){c->t_alloc, c->t_inuse, c->t_calls}, 3))
		return -ENOMEM;
	rep_fmt_val(a, sizeof(a), total(c, c->t_alloc), U_BYTES, c->o->raw);
	rep_fmt_val(u, sizeof(u), total(c, c->t_inuse), U_BYTES, c->o->raw);
	snprintf(title, sizeof(title), "GPU memory by allocating call site (%s allocated, %s still in use at the end)",
		 a, u);
	rep_section(c->f, title);
	rep_print_table(c->f, &t, cols, 5, 0, c->o->top, c->o->raw, "call site", 0);
	rep_table_free(&t);
	return 0;
}

static int sec_sites(struct ctx *c)
{
	static const struct col cols[] = {
	    {"launches", COL_VAL, 0, 0, U_COUNT, true},
	    {"launches%", COL_PCT, 0, 0, U_COUNT, true},
	    {"time", COL_VAL, 1, 0, U_NS, true},
	    {"time%", COL_PCT, 1, 0, U_COUNT, true},
	};
	struct table t = {0};

	if (total(c, c->t_launch) <= 0)
		return 0; /* the kernel section said why */
	if (sum_by_call_site(c, &t, (const int[]){c->t_launch, c->t_ktime}, 2))
		return -ENOMEM;
	rep_section(c->f, "Top launch call sites (innermost frame outside CUDA)");
	rep_print_table(c->f, &t, cols, total(c, c->t_ktime) > 0 ? 4 : 2, 0, c->o->top, c->o->raw, "call site", 0);
	rep_table_free(&t);
	return 0;
}

/* Self and cumulative values per function for one sample type. */
static int sec_functions(struct ctx *c, int ti, bool chosen)
{
	static const struct col cols[] = {
	    {"self", COL_VAL, 0, 0, U_COUNT, true},
	    {"self%", COL_PCT, 0, 0, U_COUNT, true},
	    {"cum", COL_VAL, 1, 0, U_COUNT, false},
	    {"cum%", COL_PCTG, 1, 0, U_COUNT, false},
	};
	struct col cc[4];
	struct hmap seen = {0}; /* function name -> index + 1 of the last sample that counted it */
	struct table t = {0};
	const char *type, *unit;
	char title[200];
	int64_t tot = profile__total(c->p, ti);
	int err = 0;

	profile__type(c->p, ti, &type, &unit);
	if (tot <= 0) {
		fprintf(c->f, "\nTop functions by %s: left out: %s\n", type,
			!chosen && (!strcmp(type, "samples") || !strcmp(type, "cpu"))
			    ? "no CPU samples (the targets were idle, or the recording was shorter than a "
			      "sampling period)"
			    : "every value of this sample type is zero");
		return 0;
	}
	for (size_t i = 0; i < profile__num_samples(c->p) && !err; i++) {
		const struct prof_sample *s = profile__sample(c->p, i);
		int64_t v = s->values[ti];
		bool leaf = true;

		if (!v)
			continue;
		for (uint32_t j = 0; j < s->nlocs && !err; j++) {
			const struct prof_location *l = profile__location(c->p, s->locs[j]);
			int nf = l && l->symbolized ? l->sym.nframes : 0;

			if (nf > SYMS_MAX_INLINE)
				nf = SYMS_MAX_INLINE;
			for (int k = 0; k < nf && !err; k++) {
				const char *fn = l->sym.frames[k].func;
				struct row *r;
				uint64_t last;

				if (!fn)
					continue;
				r = rep_table_get(&t, fn, NULL, 0);
				if (!r) {
					err = -ENOMEM;
					break;
				}
				if (leaf)
					rep_sat_add(&r->v[0], v);
				leaf = false;
				/* recursion: a function counts once per stack in cum */
				if (hmap__get(&seen, (uintptr_t)fn, 0, 0, &last) && last == i + 1)
					continue;
				err = hmap__put(&seen, (uintptr_t)fn, 0, 0, i + 1);
				rep_sat_add(&r->v[1], v);
			}
		}
	}
	hmap__clear(&seen);
	if (err) {
		rep_table_free(&t);
		return err;
	}
	memcpy(cc, cols, sizeof(cc));
	cc[0].unit = cc[2].unit = !strcmp(unit, "nanoseconds") ? U_NS : !strcmp(unit, "bytes") ? U_BYTES : U_COUNT;
	snprintf(title, sizeof(title), "Top functions by %s/%s (self: at the leaf, cum: anywhere on the stack)", type,
		 unit);
	rep_section(c->f, title);
	rep_sort_col2 = 1; /* among equal self values, the larger cum first */
	rep_print_table(c->f, &t, cc, 4, 0, c->o->top, c->o->raw, "function", tot);
	rep_sort_col2 = -1;
	rep_table_free(&t);
	return 0;
}

static bool is_known_type(const char *t)
{
	static const char *const known[] = {
	    "samples",	      "cpu",	   "cuda_calls", "cuda_launches",   "cuda_memcpy",
	    "cuda_sync_wait", "gpu_alloc", "gpu_inuse",	 "gpu_kernel_time", "gpu_memcpy_time"};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(t, known[i]))
			return true;
	return false;
}

static const char *type_name(const struct profile *p, int i)
{
	const char *t;

	profile__type(p, i, &t, NULL);
	return t ? t : "";
}

static void header(struct ctx *c)
{
	const struct profile *p = c->p;
	int64_t t0, dur;
	const char *cmd = NULL;

	profile__time(p, &t0, &dur);
	for (int i = 0; i < profile__num_comments(p); i++)
		if (has_prefix(profile__comment(p, i), "command: "))
			cmd = profile__comment(p, i) + 9;
	fprintf(c->f, "gpubpf report of %s: %zu stacks, %d sample types", c->o->source ? c->o->source : "a profile",
		profile__num_samples(p), profile__num_types(p));
	if (dur > 0) {
		char d[CELL];

		rep_fmt_val(d, sizeof(d), dur, U_NS, false);
		fprintf(c->f, ", %s recorded", d);
	}
	fputc('\n', c->f);
	if (cmd)
		fprintf(c->f, "  recorded with: %s\n", cmd);
	for (int i = 0; i < profile__num_comments(p); i++)
		if (strstr(profile__comment(p, i), "estimates scaled") ||
		    strstr(profile__comment(p, i), "in windows") || has_prefix(profile__comment(p, i), "cuda cost: ") ||
		    has_prefix(profile__comment(p, i), "cuda: sampled windows ") ||
		    has_prefix(profile__comment(p, i), "cost: "))
			fprintf(c->f, "  note: %s\n", profile__comment(p, i));
}

/* Sample types no table reads, and what reading the file dropped. */
static void footer(struct ctx *c, int chosen)
{
	const struct pprof_read_info *info = c->o->info;
	bool any = false;

	for (int i = 0; i < profile__num_types(c->p); i++) {
		const char *t, *u;

		profile__type(c->p, i, &t, &u);
		if (i == chosen || is_known_type(t))
			continue;
		fprintf(c->f, "%s%s/%s", any ? ", " : "\nNot shown: sample types ", t, u);
		any = true;
	}
	if (any)
		fprintf(c->f, " (gpubpf report --sample-type NAME shows one)\n");
	if (!info)
		return;
	if (info->nskipped_types)
		fprintf(c->f, "Skipped while reading: sample types past the %d the model holds or repeated: %s\n",
			PROFILE_MAX_TYPES, info->skipped_types);
	if (info->nrenamed_types)
		fprintf(c->f, "Read %d sample type names with '-' as '_'\n", info->nrenamed_types);
	if (info->skipped_samples)
		fprintf(c->f, "Skipped while reading: %zu samples whose value count does not match the types\n",
			info->skipped_samples);
	if (info->truncated_stacks)
		fprintf(c->f, "Cut while reading: %zu stacks deeper than %d frames (the leaf-most kept)\n",
			info->truncated_stacks, PROFILE_MAX_FRAMES);
	if (info->dropped_labels)
		fprintf(c->f, "Dropped while reading: %zu labels past %d per sample\n", info->dropped_labels,
			PROFILE_MAX_LABELS);
}

int report__profile(const struct profile *p, const struct report_opts *o, FILE *f)
{
	struct report_opts dflt = {.top = 10};
	struct ctx c = {.p = p, .o = o ? o : &dflt, .f = f};
	int chosen = -1, err;

	if (!p || !f)
		return -EINVAL;
	rep_n_saturated = 0;
	c.t_calls = profile__find_type(p, "cuda_calls");
	c.t_launch = profile__find_type(p, "cuda_launches");
	c.t_memcpy = profile__find_type(p, "cuda_memcpy");
	c.t_sync = profile__find_type(p, "cuda_sync_wait");
	c.t_alloc = profile__find_type(p, "gpu_alloc");
	c.t_inuse = profile__find_type(p, "gpu_inuse");
	c.t_ktime = profile__find_type(p, "gpu_kernel_time");
	c.t_ctime = profile__find_type(p, "gpu_memcpy_time");
	if (c.o->sample_type) {
		chosen = profile__find_type(p, c.o->sample_type);
		if (chosen < 0) {
			pr_err("report: the profile has no sample type '%s'", c.o->sample_type);
			return -EINVAL;
		}
	} else {
		chosen = profile__find_type(p, "samples");
		if (chosen < 0 || profile__total(p, chosen) <= 0) {
			int cpu = profile__find_type(p, "cpu");

			if (cpu >= 0 && profile__total(p, cpu) > 0)
				chosen = cpu;
		}
		/* another tool's profile: its default type */
		if (chosen < 0 && profile__find_type(p, "cpu") < 0 && !is_known_type(type_name(p, 0)))
			chosen = 0;
	}
	header(&c);
	err = sec_api(&c);
	if (!err)
		err = sec_kernels(&c);
	if (!err)
		err = sec_memops(&c);
	if (!err)
		err = sec_gpumem(&c);
	if (!err && chosen >= 0)
		err = sec_functions(&c, chosen, c.o->sample_type != NULL);
	if (!err)
		err = sec_sites(&c);
	if (!err)
		footer(&c, chosen);
	if (!err && (rep_n_saturated || profile__saturated(p)))
		fprintf(f,
			"Capped: %llu sums passed the range of a 64-bit integer and were held at its limit "
			"(the profile holds values no recording makes)\n",
			(unsigned long long)(rep_n_saturated + profile__saturated(p)));
	if (!err && (fflush(f) != 0 || ferror(f)))
		err = -EIO;
	return err;
}
