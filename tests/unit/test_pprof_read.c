// SPDX-License-Identifier: MIT
/* pprof reader tests: what pprof__write wrote reads back the same (types, totals, names,
 * labels, mappings); hand-made protobufs with dangling references, odd ids and what the
 * model cannot hold are refused or counted, never trusted. */
#include <errno.h>
#include <zlib.h>

#include "pprof.h"
#include "pprof_read.h"
#include "profile.h"
#include "profile.pb-c.h"
#include "test.h"

#define APP "/opt/app/bin/app"

static int resolve(void *ctx, const struct prof_location *loc, struct sym_result *out)
{
	memset(out, 0, sizeof(*out));
	if (loc->kind == PROF_FRAME_KERNEL) {
		out->module = "[kernel.kallsyms]";
		out->resolved = true;
		out->nframes = 1;
		out->frames[0].func = "do_syscall_64";
		return 0;
	}
	out->module = APP;
	out->build_id = "abcd";
	out->map_start = 0x400000;
	out->map_limit = 0x500000;
	out->resolved = true;
	out->rel_addr = loc->addr - 0x400000;
	if (loc->addr == 0x401000) {
		out->nframes = 2;
		out->frames[0] = (struct sym_frame){"helper", NULL, "/src/h.h", 12, 10};
		out->frames[1] = (struct sym_frame){"compute(int)", "_Z7computei", "/src/main.cc", 34, 30};
	} else {
		out->nframes = 1;
		out->frames[0] = (struct sym_frame){"main", "main", "/src/main.cc", 50, 45};
	}
	return 0;
}

static struct profile *build(void)
{
	struct profile *p = profile__new();
	struct prof_frame cpu[] = {{PROF_FRAME_KERNEL, 0xffffffff81000000ULL, NULL, NULL},
				   {PROF_FRAME_USER, 0x401000, NULL, NULL},
				   {PROF_FRAME_USER, 0x402000, NULL, NULL}};
	struct prof_frame launch[] = {{PROF_FRAME_SYNTH, 0, "k<float>(int)", "_Z1kIfEvi"},
				      {PROF_FRAME_SYNTH, 0, "cudaLaunchKernel", NULL},
				      {PROF_FRAME_USER, 0x402000, NULL, NULL}};
	struct prof_label labs[] = {{"pid", NULL, 42, NULL},
				    {"tid", NULL, 43, NULL},
				    {"thread_name", "worker", 0, NULL},
				    {"cuda_stream", "0x5000", 0, NULL}};
	int64_t v1[] = {3, 30, 0}, v2[] = {0, 0, 7};

	if (!p)
		return NULL;
	profile__add_type(p, "samples", "count");
	profile__add_type(p, "cpu", "nanoseconds");
	profile__add_type(p, "cuda_launches", "count");
	profile__set_period(p, "cpu", "nanoseconds", 10);
	profile__set_time(p, 1000, 2000);
	profile__add_comment(p, "command: gpubpf record x");
	profile__add_sample(p, 42, 43, cpu, 3, labs, 3, v1);
	profile__add_sample(p, 42, 43, launch, 3, labs, 4, v2);
	profile__symbolize_with(p, resolve, NULL);
	return p;
}

static struct profile *roundtrip(const struct profile *p, struct pprof_read_info *info)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct profile *q = NULL;

	if (f && pprof__write(p, f) == 0 && fclose(f) == 0)
		q = pprof_read__buf(buf, len, info);
	free(buf);
	return q;
}

static const char *label_str(const struct prof_sample *s, const char *key)
{
	for (uint32_t i = 0; i < s->nlabels; i++)
		if (!strcmp(s->labels[i].key, key))
			return s->labels[i].str;
	return NULL;
}

TEST(roundtrip_gpubpf_profile)
{
	struct pprof_read_info info;
	struct profile *p = build(), *q = roundtrip(p, &info);
	const struct prof_sample *cs = NULL, *ls = NULL;
	const char *t, *u;
	int64_t per, t0, dur;

	CHECK(q);
	CHECK_INT(profile__num_types(q), 3);
	profile__type(q, 0, &t, &u);
	CHECK_STR(t, "samples");
	profile__type(q, 2, &t, &u);
	CHECK_STR(t, "cuda_launches");
	CHECK_INT(profile__total(q, 0), 3);
	CHECK_INT(profile__total(q, 1), 30);
	CHECK_INT(profile__total(q, 2), 7);
	profile__period(q, &t, &u, &per);
	CHECK_STR(t, "cpu");
	CHECK_INT(per, 10);
	profile__time(q, &t0, &dur);
	CHECK_INT(t0, 1000);
	CHECK_INT(dur, 2000);
	CHECK_STR(profile__comment(q, 0), "command: gpubpf record x");
	CHECK_INT(profile__num_samples(q), 2);
	for (size_t i = 0; i < 2; i++) {
		const struct prof_sample *s = profile__sample(q, i);

		if (s->values[0])
			cs = s;
		else
			ls = s;
	}
	CHECK(cs && ls);
	CHECK_INT(cs->pid, 42);
	CHECK_INT(cs->tid, 43);
	CHECK_STR(label_str(cs, "thread_name"), "worker");
	CHECK_STR(label_str(ls, "cuda_stream"), "0x5000");
	CHECK_INT(cs->nlocs, 3);
	{
		const struct prof_location *k = profile__location(q, cs->locs[0]);
		const struct prof_location *c = profile__location(q, cs->locs[1]);

		CHECK_INT(k->kind, PROF_FRAME_KERNEL);
		CHECK_STR(k->sym.frames[0].func, "do_syscall_64");
		CHECK_INT(c->kind, PROF_FRAME_USER);
		CHECK_INT(c->addr, 0x401000);
		CHECK_STR(c->sym.module, APP);
		CHECK_STR(c->sym.build_id, "abcd");
		CHECK_INT(c->sym.nframes, 2);
		CHECK_STR(c->sym.frames[0].func, "helper");
		CHECK_STR(c->sym.frames[1].func, "compute(int)");
		CHECK_STR(c->sym.frames[1].sys_name, "_Z7computei");
		CHECK_STR(c->sym.frames[1].file, "/src/main.cc");
		CHECK_INT(c->sym.frames[1].line, 34);
		CHECK_INT(c->sym.frames[1].start_line, 30);
	}
	{
		const struct prof_location *k = profile__location(q, ls->locs[0]);
		const struct prof_location *a = profile__location(q, ls->locs[1]);

		CHECK_INT(k->kind, PROF_FRAME_SYNTH);
		CHECK_STR(k->sym.frames[0].func, "k<float>(int)");
		CHECK_STR(k->sym.frames[0].sys_name, "_Z1kIfEvi");
		CHECK_INT(a->kind, PROF_FRAME_SYNTH);
		CHECK_STR(a->sym.frames[0].func, "cudaLaunchKernel");
	}
	/* and written again, it reads the same once more */
	{
		struct profile *r = roundtrip(q, &info);

		CHECK(r);
		CHECK_INT(profile__num_samples(r), 2);
		CHECK_INT(profile__total(r, 2), 7);
		profile__free(r);
	}
	profile__free(p);
	profile__free(q);
}

TEST(plain_protobuf_too)
{
	Perftools__Profiles__Profile m = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT, *pvt = &vt;
	Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT, *ps = &s;
	char *strs[] = {"", "alloc-space", "bytes"};
	int64_t v = 5;
	uint8_t buf[256];
	size_t len;
	struct pprof_read_info info;
	struct profile *p;
	const char *t;

	vt.type = 1;
	vt.unit = 2;
	m.n_sample_type = 1;
	m.sample_type = &pvt;
	s.n_value = 1;
	s.value = &v;
	m.n_sample = 1;
	m.sample = &ps;
	m.n_string_table = 3;
	m.string_table = strs;
	len = perftools__profiles__profile__pack(&m, buf);
	p = pprof_read__buf(buf, len, &info);
	CHECK(p);
	profile__type(p, 0, &t, NULL);
	CHECK_STR(t, "alloc_space");
	CHECK_INT(info.nrenamed_types, 1);
	CHECK_INT(profile__total(p, 0), 5);
	profile__free(p);
}

/* A small profile with one location and one function whose fields the case then breaks. */
struct mini {
	Perftools__Profiles__Profile m;
	Perftools__Profiles__ValueType vt, *pvt;
	Perftools__Profiles__Sample s, *ps;
	Perftools__Profiles__Location loc[2], *ploc[2];
	Perftools__Profiles__Line line, *pline;
	Perftools__Profiles__Function fn, *pfn;
	Perftools__Profiles__Mapping map, *pmap;
	uint64_t locids[300];
	int64_t v;
	char *strs[5];
};

static void mini_init(struct mini *x)
{
	memset(x, 0, sizeof(*x));
	perftools__profiles__profile__init(&x->m);
	perftools__profiles__value_type__init(&x->vt);
	perftools__profiles__sample__init(&x->s);
	perftools__profiles__location__init(&x->loc[0]);
	perftools__profiles__location__init(&x->loc[1]);
	perftools__profiles__line__init(&x->line);
	perftools__profiles__function__init(&x->fn);
	perftools__profiles__mapping__init(&x->map);
	x->strs[0] = "";
	x->strs[1] = "samples";
	x->strs[2] = "count";
	x->strs[3] = "f";
	x->strs[4] = "/lib/x.so";
	x->m.string_table = x->strs;
	x->m.n_string_table = 5;
	x->vt.type = 1;
	x->vt.unit = 2;
	x->pvt = &x->vt;
	x->m.sample_type = &x->pvt;
	x->m.n_sample_type = 1;
	x->map.id = 7;
	x->map.filename = 4;
	x->pmap = &x->map;
	x->m.mapping = &x->pmap;
	x->m.n_mapping = 1;
	x->fn.id = 9;
	x->fn.name = 3;
	x->pfn = &x->fn;
	x->m.function = &x->pfn;
	x->m.n_function = 1;
	x->line.function_id = 9;
	x->line.line = 3;
	x->pline = &x->line;
	/* ids not 1..N: the format allows any distinct non-zero ids */
	x->loc[0].id = 100;
	x->loc[0].mapping_id = 7;
	x->loc[0].n_line = 1;
	x->loc[0].line = &x->pline;
	x->loc[1].id = 50;
	x->loc[1].mapping_id = 7;
	x->loc[1].address = 0x1234;
	x->ploc[0] = &x->loc[0];
	x->ploc[1] = &x->loc[1];
	x->m.location = x->ploc;
	x->m.n_location = 2;
	x->locids[0] = 100;
	x->locids[1] = 50;
	x->s.location_id = x->locids;
	x->s.n_location_id = 2;
	x->v = 4;
	x->s.value = &x->v;
	x->s.n_value = 1;
	x->ps = &x->s;
	x->m.sample = &x->ps;
	x->m.n_sample = 1;
}

static struct profile *mini_read(struct mini *x, struct pprof_read_info *info)
{
	size_t len = perftools__profiles__profile__get_packed_size(&x->m);
	uint8_t *buf = malloc(len + 1);
	struct profile *p;

	perftools__profiles__profile__pack(&x->m, buf);
	p = pprof_read__buf(buf, len, info);
	free(buf);
	return p;
}

TEST(sparse_ids_and_unnamed_address)
{
	struct pprof_read_info info;
	struct mini x;
	struct profile *p;
	const struct prof_sample *s;

	mini_init(&x);
	p = mini_read(&x, &info);
	CHECK(p);
	s = profile__sample(p, 0);
	CHECK_INT(s->nlocs, 2);
	CHECK_STR(profile__location(p, s->locs[0])->sym.frames[0].func, "f");
	CHECK_INT(profile__location(p, s->locs[0])->sym.frames[0].line, 3);
	/* a location without lines is named after its module, as gpubpf names it */
	CHECK_STR(profile__location(p, s->locs[1])->sym.frames[0].func, "x.so+0x1234");
	profile__free(p);
}

#define EXPECT_REFUSED(x, needle)                                                                                      \
	do {                                                                                                           \
		struct pprof_read_info _i;                                                                             \
		struct profile *_p = mini_read(x, &_i);                                                                \
		if (_p) {                                                                                              \
			profile__free(_p);                                                                             \
			T_FAIL("accepted a profile with %s", needle);                                                  \
		}                                                                                                      \
		if (!strstr(_i.error, needle))                                                                         \
			T_FAIL("error \"%s\" does not mention \"%s\"", _i.error, needle);                              \
	} while (0)

TEST(dangling_references_refused)
{
	struct mini x;

	mini_init(&x);
	x.vt.type = 99;
	EXPECT_REFUSED(&x, "string");
	mini_init(&x);
	x.locids[1] = 51;
	EXPECT_REFUSED(&x, "location 51");
	mini_init(&x);
	x.loc[1].mapping_id = 8;
	EXPECT_REFUSED(&x, "mapping 8");
	mini_init(&x);
	x.line.function_id = 10;
	EXPECT_REFUSED(&x, "function 10");
	mini_init(&x);
	x.fn.name = -1;
	EXPECT_REFUSED(&x, "string -1");
	mini_init(&x);
	x.loc[1].id = 100;
	EXPECT_REFUSED(&x, "location ids");
	mini_init(&x);
	x.m.n_sample_type = 0;
	x.s.n_value = 0;
	EXPECT_REFUSED(&x, "no sample types");
}

TEST(what_the_model_cannot_hold_is_counted)
{
	struct pprof_read_info info;
	struct mini x;
	struct profile *p;
	Perftools__Profiles__Sample bad = PERFTOOLS__PROFILES__SAMPLE__INIT, *ps[2];
	int64_t two[2] = {1, 2};

	mini_init(&x);
	for (int i = 0; i < 300; i++)
		x.locids[i] = i % 2 ? 50 : 100;
	x.s.n_location_id = 300;
	bad.value = two;
	bad.n_value = 2;
	ps[0] = &x.s;
	ps[1] = &bad;
	x.m.sample = ps;
	x.m.n_sample = 2;
	p = mini_read(&x, &info);
	CHECK(p);
	CHECK_INT(info.truncated_stacks, 1);
	CHECK_INT(info.skipped_samples, 1);
	CHECK_INT(profile__sample(p, 0)->nlocs, PROFILE_MAX_FRAMES);
	CHECK_INT(profile__total(p, 0), 4);
	profile__free(p);
}

TEST(too_many_types_and_default_first)
{
	Perftools__Profiles__Profile m = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType vt[20], *pvt[20];
	char *strs[22], names[20][8];
	uint8_t buf[1024];
	struct pprof_read_info info;
	struct profile *p;
	const char *t;
	size_t len;

	strs[0] = "";
	strs[1] = "count";
	for (int i = 0; i < 20; i++) {
		perftools__profiles__value_type__init(&vt[i]);
		snprintf(names[i], sizeof(names[i]), "t%d", i);
		strs[i + 2] = names[i];
		vt[i].type = i + 2;
		vt[i].unit = 1;
		pvt[i] = &vt[i];
	}
	m.sample_type = pvt;
	m.n_sample_type = 20;
	m.string_table = strs;
	m.n_string_table = 22;
	m.default_sample_type = 2 + 5;
	len = perftools__profiles__profile__pack(&m, buf);
	p = pprof_read__buf(buf, len, &info);
	CHECK(p);
	CHECK_INT(profile__num_types(p), PROFILE_MAX_TYPES);
	CHECK_INT(info.nskipped_types, 20 - PROFILE_MAX_TYPES);
	CHECK(strstr(info.skipped_types, "t19/count"));
	profile__type(p, 0, &t, NULL);
	CHECK_STR(t, "t5");
	profile__free(p);
}

TEST(garbage_and_broken_gzip)
{
	struct pprof_read_info info;
	static const char junk[] = "\x0a\xff\xff\xff\xff\x0f garbage";
	struct profile *p = build(), *q;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(!pprof_read__buf(junk, sizeof(junk) - 1, &info));
	CHECK(info.error[0]);
	CHECK(!pprof_read__buf("", 0, &info));
	/* a gzip stream cut short */
	CHECK(f && pprof__write(p, f) == 0 && fclose(f) == 0);
	CHECK(len > 40);
	q = pprof_read__buf(buf, len - 10, &info);
	CHECK(!q);
	CHECK(strstr(info.error, "gzip"));
	free(buf);
	profile__free(p);
}

TEST(file_errors)
{
	struct pprof_read_info info;

	CHECK(!pprof_read__file("/nonexistent/x.pb.gz", &info));
	CHECK_INT(errno, ENOENT);
	CHECK(strstr(info.error, "cannot read"));
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(roundtrip_gpubpf_profile);
	RUN(plain_protobuf_too);
	RUN(sparse_ids_and_unnamed_address);
	RUN(dangling_references_refused);
	RUN(what_the_model_cannot_hold_is_counted);
	RUN(too_many_types_and_default_first);
	RUN(garbage_and_broken_gzip);
	RUN(file_errors);
	return T_END();
}
