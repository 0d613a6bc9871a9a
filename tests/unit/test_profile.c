// SPDX-License-Identifier: MIT
/* Unit tests for the profile model (userspace/model/profile.c). */
#include <errno.h>

#include "profile.h"
#include "test.h"

static struct profile *new_profile(int ntypes)
{
	static const char *const names[] = {"samples", "cpu", "cuda_launches"};
	static const char *const units[] = {"count", "nanoseconds", "count"};
	struct profile *p = profile__new();

	if (!p)
		return NULL;
	for (int i = 0; i < ntypes; i++)
		if (profile__add_type(p, names[i], units[i]) != i) {
			profile__free(p);
			return NULL;
		}
	return p;
}

TEST(free_null)
{
	profile__free(NULL);
	CHECK_INT(profile__num_samples(NULL), 0);
	CHECK_INT(profile__num_locations(NULL), 0);
	CHECK(profile__location(NULL, 1) == NULL);
	CHECK(profile__sample(NULL, 0) == NULL);
	CHECK_INT(profile__total(NULL, 0), 0);
}

TEST(types)
{
	struct profile *p = profile__new();
	const char *t, *u;
	int64_t v[2] = {1, 2};
	struct prof_frame fr = {.kind = PROF_FRAME_KERNEL, .addr = 0x1000};
	char name[16] = "cpu", unit[16] = "nanoseconds";

	CHECK(p);
	CHECK_INT(profile__add_sample(p, 1, 1, &fr, 1, NULL, 0, v), -EINVAL); /* no types yet */
	CHECK_INT(profile__add_type(p, "samples", "count"), 0);
	CHECK_INT(profile__add_type(p, "cuda-launches", "count"), -EINVAL);
	CHECK_INT(profile__add_type(p, "", "count"), -EINVAL);
	CHECK_INT(profile__add_type(p, NULL, "count"), -EINVAL);
	CHECK_INT(profile__add_type(p, "samples", "count"), -EEXIST);
	CHECK_INT(profile__add_type(p, name, unit), 1);
	/* the model keeps its own copies */
	strcpy(name, "XXX");
	strcpy(unit, "YYY");
	CHECK_INT(profile__num_types(p), 2);
	profile__type(p, 1, &t, &u);
	CHECK_STR(t, "cpu");
	CHECK_STR(u, "nanoseconds");
	profile__type(p, 2, &t, &u);
	CHECK(t == NULL && u == NULL);
	CHECK_INT(profile__find_type(p, "cpu"), 1);
	CHECK_INT(profile__find_type(p, "samples"), 0);
	CHECK_INT(profile__find_type(p, "nope"), -ENOENT);
	CHECK_INT(profile__add_sample(p, 1, 1, &fr, 1, NULL, 0, v), 0);
	/* types come before samples */
	CHECK_INT(profile__add_type(p, "late", "count"), -EBUSY);
	CHECK_INT(profile__num_types(p), 2);
	profile__free(p);

	p = profile__new();
	CHECK(p);
	for (int i = 0; i < PROFILE_MAX_TYPES; i++) {
		char n[16];

		snprintf(n, sizeof(n), "t%d", i);
		CHECK_INT(profile__add_type(p, n, "count"), i);
	}
	CHECK_INT(profile__add_type(p, "one_more", "count"), -E2BIG);
	profile__free(p);
}

TEST(header)
{
	struct profile *p = new_profile(1);
	const char *t, *u;
	int64_t period, tn, dn;
	char fmt_arg[8] = "abc";

	CHECK(p);
	profile__period(p, &t, &u, &period);
	CHECK(t == NULL && u == NULL && period == 0);
	CHECK_INT(profile__set_period(p, "cpu", "nanoseconds", 10000000), 0);
	profile__period(p, &t, &u, &period);
	CHECK_STR(t, "cpu");
	CHECK_STR(u, "nanoseconds");
	CHECK_INT(period, 10000000);
	profile__set_time(p, 1700000000000000000LL, 5000000000LL);
	profile__time(p, &tn, &dn);
	CHECK_INT(tn, 1700000000000000000LL);
	CHECK_INT(dn, 5000000000LL);
	CHECK_INT(profile__num_comments(p), 0);
	CHECK_INT(profile__add_comment(p, "gpubpf %s %d", fmt_arg, 42), 0);
	strcpy(fmt_arg, "zzz");
	CHECK_INT(profile__add_comment(p, "second"), 0);
	CHECK_INT(profile__num_comments(p), 2);
	CHECK_STR(profile__comment(p, 0), "gpubpf abc 42");
	CHECK_STR(profile__comment(p, 1), "second");
	CHECK(profile__comment(p, 2) == NULL);
	CHECK(profile__comment(p, -1) == NULL);
	profile__free(p);
}

TEST(interning)
{
	struct profile *p = new_profile(1);
	int64_t one = 1;
	char kname[32] = "vectorAdd(float*)";
	struct prof_frame a[] = {
	    {.kind = PROF_FRAME_SYNTH, .addr = 7, .name = kname, .sys_name = "_Z9vectorAddPf"},
	    {.kind = PROF_FRAME_USER, .addr = 0x401000},
	    {.kind = PROF_FRAME_KERNEL, .addr = 0xffffffff81000000ULL},
	};
	struct prof_frame b[] = {
	    {.kind = PROF_FRAME_SYNTH, .addr = 99, .name = "vectorAdd(float*)", .sys_name = "_Z9vectorAddPf"},
	    {.kind = PROF_FRAME_USER, .addr = 0x401000},
	    {.kind = PROF_FRAME_KERNEL, .addr = 0xffffffff81000000ULL},
	};
	struct prof_frame c[] = {
	    {.kind = PROF_FRAME_SYNTH, .name = "vectorAdd(float*)"}, /* no sys_name: a different frame */
	    {.kind = PROF_FRAME_USER, .addr = 0x401000},
	    {.kind = PROF_FRAME_USER, .addr = 0x401004},
	};
	const struct prof_location *l;
	const struct prof_sample *s;

	CHECK(p);
	CHECK_INT(profile__add_sample(p, 100, 100, a, 3, NULL, 0, &one), 0);
	CHECK_INT(profile__num_locations(p), 3);
	strcpy(kname, "overwritten");
	/* same frames in another pid: the user address is a new location, the kernel and
	 * synthetic ones are shared */
	CHECK_INT(profile__add_sample(p, 200, 200, b, 3, NULL, 0, &one), 0);
	CHECK_INT(profile__num_locations(p), 4);
	CHECK_INT(profile__add_sample(p, 100, 100, b, 3, NULL, 0, &one), 0);
	CHECK_INT(profile__num_locations(p), 4);
	CHECK_INT(profile__add_sample(p, 100, 100, c, 3, NULL, 0, &one), 0);
	CHECK_INT(profile__num_locations(p), 6);

	for (uint32_t id = 1; id <= 6; id++) {
		l = profile__location(p, id);
		CHECK(l);
		CHECK_INT(l->id, id);
	}
	CHECK(profile__location(p, 0) == NULL);
	CHECK(profile__location(p, 7) == NULL);

	l = profile__location(p, 1);
	CHECK_INT(l->kind, PROF_FRAME_SYNTH);
	CHECK(l->symbolized);
	CHECK_STR(l->sym.module, "[cuda]");
	CHECK_INT(l->sym.nframes, 1);
	CHECK_STR(l->sym.frames[0].func, "vectorAdd(float*)");
	CHECK_STR(l->sym.frames[0].sys_name, "_Z9vectorAddPf");
	l = profile__location(p, 2);
	CHECK_INT(l->kind, PROF_FRAME_USER);
	CHECK_INT(l->pid, 100);
	CHECK_INT(l->addr, 0x401000);
	CHECK(!l->symbolized);
	l = profile__location(p, 3);
	CHECK_INT(l->kind, PROF_FRAME_KERNEL);
	CHECK_INT(l->pid, 0);
	l = profile__location(p, 4);
	CHECK_INT(l->pid, 200);
	l = profile__location(p, 5);
	CHECK_STR(l->sym.frames[0].sys_name, "vectorAdd(float*)");

	CHECK_INT(profile__num_samples(p), 3);
	s = profile__sample(p, 0);
	CHECK_INT(s->nlocs, 3);
	CHECK_INT(s->locs[0], 1);
	CHECK_INT(s->locs[1], 2);
	CHECK_INT(s->locs[2], 3);
	CHECK_INT(s->values[0], 2);
	s = profile__sample(p, 1);
	CHECK_INT(s->pid, 200);
	CHECK_INT(s->locs[1], 4);
	s = profile__sample(p, 2);
	CHECK_INT(s->locs[0], 5);
	CHECK_INT(s->locs[2], 6);
	profile__free(p);
}

TEST(summing_and_labels)
{
	struct profile *p = new_profile(2);
	struct prof_frame fr[] = {{.kind = PROF_FRAME_USER, .addr = 0x10}, {.kind = PROF_FRAME_USER, .addr = 0x20}};
	char key[16] = "process_name", val[16] = "python";
	struct prof_label l1[] = {{.key = key, .str = val}, {.key = "bytes", .num = 4096, .unit = "bytes"}};
	struct prof_label l1_swapped[] = {{.key = "bytes", .num = 4096, .unit = "bytes"},
					  {.key = "process_name", .str = "python"}};
	struct prof_label l2[] = {{.key = "process_name", .str = "python3"},
				  {.key = "bytes", .num = 4096, .unit = "bytes"}};
	struct prof_label l3[] = {{.key = "process_name", .str = "python"},
				  {.key = "bytes", .num = 8192, .unit = "bytes"}};
	struct prof_label bad[] = {{.key = NULL, .str = "x"}};
	int64_t v1[] = {1, 100}, v2[] = {2, 250};
	const struct prof_sample *s;

	CHECK(p);
	CHECK_INT(profile__add_sample(p, 5, 6, fr, 2, l1, 2, v1), 0);
	strcpy(key, "clobbered");
	strcpy(val, "clobbered");
	CHECK_INT(profile__add_sample(p, 5, 6, fr, 2, l1_swapped, 2, v2), 0);
	CHECK_INT(profile__num_samples(p), 1);
	s = profile__sample(p, 0);
	CHECK_INT(s->values[0], 3);
	CHECK_INT(s->values[1], 350);
	CHECK_INT(s->nlabels, 2);
	for (uint32_t i = 0; i < s->nlabels; i++) {
		if (s->labels[i].str) {
			CHECK_STR(s->labels[i].key, "process_name");
			CHECK_STR(s->labels[i].str, "python");
		} else {
			CHECK_STR(s->labels[i].key, "bytes");
			CHECK_INT(s->labels[i].num, 4096);
			CHECK_STR(s->labels[i].unit, "bytes");
		}
	}
	/* each differing key part makes a new sample */
	CHECK_INT(profile__add_sample(p, 5, 6, fr, 2, l2, 2, v1), 0);
	CHECK_INT(profile__add_sample(p, 5, 6, fr, 2, l3, 2, v1), 0);
	CHECK_INT(profile__add_sample(p, 5, 6, fr, 2, l3, 1, v1), 0);
	CHECK_INT(profile__add_sample(p, 5, 6, fr, 2, NULL, 0, v1), 0);
	CHECK_INT(profile__add_sample(p, 5, 7, fr, 2, NULL, 0, v1), 0);
	CHECK_INT(profile__add_sample(p, 5, 7, fr, 1, NULL, 0, v1), 0);
	CHECK_INT(profile__add_sample(p, 5, 7, fr + 1, 1, NULL, 0, v1), 0);
	CHECK_INT(profile__add_sample(p, 5, 7, NULL, 0, NULL, 0, v1), 0);
	CHECK_INT(profile__num_samples(p), 9);
	CHECK_INT(profile__add_sample(p, 5, 7, NULL, 0, NULL, 0, v1), 0);
	CHECK_INT(profile__num_samples(p), 9);
	CHECK_INT(profile__sample(p, 8)->nlocs, 0);
	CHECK_INT(profile__sample(p, 8)->values[1], 200);
	CHECK_INT(profile__total(p, 0), 3 + 9);
	CHECK_INT(profile__total(p, 1), 350 + 9 * 100);
	CHECK_INT(profile__total(p, 2), 0);

	/* bad arguments change nothing */
	CHECK_INT(profile__add_sample(p, 5, 6, fr, 2, bad, 1, v1), -EINVAL);
	CHECK_INT(profile__add_sample(p, 5, 6, fr, PROFILE_MAX_FRAMES + 1, NULL, 0, v1), -E2BIG);
	CHECK_INT(profile__add_sample(p, 5, 6, fr, 2, l1_swapped, PROFILE_MAX_LABELS + 1, v1), -E2BIG);
	CHECK_INT(profile__add_sample(p, 5, 6, fr, 2, NULL, 0, NULL), -EINVAL);
	CHECK_INT(profile__add_sample(p, 5, 6, NULL, 2, NULL, 0, v1), -EINVAL);
	CHECK_INT(profile__add_sample(p, 5, 6, fr, -1, NULL, 0, v1), -EINVAL);
	CHECK_INT(profile__add_sample(NULL, 5, 6, fr, 2, NULL, 0, v1), -EINVAL);
	{
		struct prof_frame f[] = {{.kind = 7, .addr = 1}};
		struct prof_frame g[] = {{.kind = PROF_FRAME_SYNTH, .name = NULL}};

		CHECK_INT(profile__add_sample(p, 5, 6, f, 1, NULL, 0, v1), -EINVAL);
		CHECK_INT(profile__add_sample(p, 5, 6, g, 1, NULL, 0, v1), -EINVAL);
	}
	CHECK_INT(profile__num_samples(p), 9);
	CHECK_INT(profile__total(p, 0), 12);
	profile__free(p);
}

TEST(max_frames)
{
	struct profile *p = new_profile(1);
	struct prof_frame fr[PROFILE_MAX_FRAMES];
	int64_t one = 1;
	const struct prof_sample *s;

	CHECK(p);
	for (int i = 0; i < PROFILE_MAX_FRAMES; i++)
		fr[i] = (struct prof_frame){.kind = PROF_FRAME_USER, .addr = 0x1000 + i};
	CHECK_INT(profile__add_sample(p, 1, 1, fr, PROFILE_MAX_FRAMES, NULL, 0, &one), 0);
	s = profile__sample(p, 0);
	CHECK_INT(s->nlocs, PROFILE_MAX_FRAMES);
	CHECK_INT(s->locs[PROFILE_MAX_FRAMES - 1], PROFILE_MAX_FRAMES);
	CHECK_INT(profile__num_locations(p), PROFILE_MAX_FRAMES);
	profile__free(p);
}

TEST(many_samples)
{
	struct profile *p = new_profile(2);
	struct prof_frame fr[8];
	struct prof_label lab = {.key = "process_name"};
	char comm[16];
	int64_t v[2];
	size_t mem;

	CHECK(p);
	/* 100k distinct samples over 1000 stacks x 100 threads */
	for (int i = 0; i < 100000; i++) {
		int stack = i % 1000, tid = i / 1000;

		for (int j = 0; j < 8; j++)
			fr[j] = (struct prof_frame){.kind = PROF_FRAME_USER, .addr = 0x400000 + stack * 8 + j};
		snprintf(comm, sizeof(comm), "w%d", tid % 4);
		lab.str = comm;
		v[0] = 1;
		v[1] = i;
		CHECK_INT(profile__add_sample(p, 42, tid, fr, 8, &lab, 1, v), 0);
	}
	CHECK_INT(profile__num_samples(p), 100000);
	CHECK_INT(profile__num_locations(p), 8000);
	for (uint32_t id = 1; id <= 8000; id++) {
		const struct prof_location *l = profile__location(p, id);

		CHECK(l);
		CHECK_INT(l->id, id);
		CHECK_INT(l->addr, 0x400000 + id - 1);
		CHECK_INT(l->pid, 42);
	}
	mem = profile__mem_bytes(p);
	/* then 100k more adds that only sum */
	for (int i = 0; i < 100000; i++) {
		int stack = i % 1000, tid = i / 1000;

		for (int j = 0; j < 8; j++)
			fr[j] = (struct prof_frame){.kind = PROF_FRAME_USER, .addr = 0x400000 + stack * 8 + j};
		snprintf(comm, sizeof(comm), "w%d", tid % 4);
		lab.str = comm;
		v[0] = 2;
		v[1] = 1;
		CHECK_INT(profile__add_sample(p, 42, tid, fr, 8, &lab, 1, v), 0);
	}
	CHECK_INT(profile__num_samples(p), 100000);
	CHECK_INT(profile__total(p, 0), 300000);
	CHECK_INT(profile__total(p, 1), 99999LL * 100000 / 2 + 100000);
	/* summing into existing samples does not grow the model */
	CHECK_INT(profile__mem_bytes(p), mem);
	/* ~100 bytes of payload per sample; allow generous slack for tables */
	CHECK(mem < 40u * 1024 * 1024);
	for (size_t i = 0; i < profile__num_samples(p); i += 9973) {
		const struct prof_sample *s = profile__sample(p, i);

		CHECK_INT(s->values[0], 3);
		CHECK_INT(s->values[1], (int64_t)i + 1);
	}
	profile__free(p);
}

/* ---- symbolization through a fake resolver ---- */

struct fake_ctx {
	int calls;
	int fail_addr_einval; /* this address returns -EINVAL */
	uint64_t enomem_addr; /* this address returns -ENOMEM */
	char scratch[64];     /* reused between calls: the model must copy */
};

static int fake_resolve(void *ctx, const struct prof_location *loc, struct sym_result *out)
{
	struct fake_ctx *c = ctx;

	c->calls++;
	if (loc->addr == (uint64_t)c->fail_addr_einval)
		return -EINVAL;
	if (c->enomem_addr && loc->addr == c->enomem_addr)
		return -ENOMEM;
	memset(out, 0, sizeof(*out));
	if (loc->kind == PROF_FRAME_KERNEL) {
		out->module = "[kernel.kallsyms]";
		out->resolved = true;
		out->nframes = 1;
		out->frames[0].func = "do_syscall_64";
		out->frames[0].sys_name = "do_syscall_64";
		return 0;
	}
	if (loc->addr == 0x9999) {
		/* an address syms could not name */
		out->module = "/opt/app/bin/app";
		out->rel_addr = 0x9999;
		out->resolved = false;
		out->nframes = 1;
		out->frames[0].func = "/opt/app/bin/app+0x9999";
		return 0;
	}
	snprintf(c->scratch, sizeof(c->scratch), "func_%llx", (unsigned long long)loc->addr);
	out->module = "/opt/app/bin/app";
	out->build_id = "abcdef0123456789";
	out->map_start = 0x400000;
	out->map_limit = 0x500000;
	out->resolved = true;
	out->nframes = 2;
	out->frames[0].func = "inlined_helper";
	out->frames[0].file = "helper.h";
	out->frames[0].line = 12;
	out->frames[1].func = c->scratch;
	out->frames[1].file = "main.c";
	out->frames[1].line = 34;
	out->frames[1].start_line = 30;
	return 0;
}

TEST(symbolize_with)
{
	struct profile *p = new_profile(1);
	struct prof_frame fr[] = {
	    {.kind = PROF_FRAME_SYNTH, .name = "[memcpy HtoD]"},
	    {.kind = PROF_FRAME_USER, .addr = 0x401000},
	    {.kind = PROF_FRAME_USER, .addr = 0x9999},
	    {.kind = PROF_FRAME_USER, .addr = 0x1234},
	    {.kind = PROF_FRAME_KERNEL, .addr = 0xffffffff81000000ULL},
	};
	struct fake_ctx ctx = {.fail_addr_einval = 0x1234};
	const struct prof_location *l;
	int64_t one = 1;

	CHECK(p);
	CHECK_INT(profile__add_sample(p, 1, 1, fr, 5, NULL, 0, &one), 0);
	CHECK_INT(profile__symbolize_with(p, NULL, NULL), -EINVAL);
	CHECK_INT(profile__symbolize_with(p, fake_resolve, &ctx), 0);
	CHECK_INT(ctx.calls, 4); /* not the synthetic frame */
	strcpy(ctx.scratch, "clobbered");

	l = profile__location(p, 1);
	CHECK(l->symbolized);
	CHECK_STR(l->sym.module, "[cuda]");
	CHECK_STR(l->sym.frames[0].func, "[memcpy HtoD]");
	CHECK_STR(l->sym.frames[0].sys_name, "[memcpy HtoD]");
	l = profile__location(p, 2);
	CHECK(l->symbolized);
	CHECK(l->sym.resolved);
	CHECK_STR(l->sym.module, "/opt/app/bin/app");
	CHECK_STR(l->sym.build_id, "abcdef0123456789");
	CHECK_INT(l->sym.nframes, 2);
	CHECK_STR(l->sym.frames[0].func, "inlined_helper");
	CHECK_STR(l->sym.frames[0].sys_name, "inlined_helper");
	CHECK_STR(l->sym.frames[1].func, "func_401000");
	CHECK_STR(l->sym.frames[1].file, "main.c");
	CHECK_INT(l->sym.frames[1].line, 34);
	CHECK_INT(l->sym.frames[1].start_line, 30);
	CHECK_INT(l->sym.map_start, 0x400000);
	l = profile__location(p, 3);
	CHECK(l->symbolized);
	CHECK(!l->sym.resolved);
	CHECK_STR(l->sym.frames[0].func, "/opt/app/bin/app+0x9999");
	l = profile__location(p, 4);
	CHECK(!l->symbolized); /* resolver failed: left for the writers' fallback */
	l = profile__location(p, 5);
	CHECK(l->symbolized);
	CHECK_STR(l->sym.frames[0].func, "do_syscall_64");

	/* a second pass retries only the unresolved and the failed */
	ctx.calls = 0;
	CHECK_INT(profile__symbolize_with(p, fake_resolve, &ctx), 0);
	CHECK_INT(ctx.calls, 2);
	ctx.fail_addr_einval = 0;
	ctx.calls = 0;
	CHECK_INT(profile__symbolize_with(p, fake_resolve, &ctx), 0);
	CHECK_INT(ctx.calls, 2);
	CHECK(profile__location(p, 4)->symbolized);
	CHECK_STR(profile__location(p, 4)->sym.frames[1].func, "func_1234");
	/* an address that never resolves is not looked up forever */
	ctx.calls = 0;
	CHECK_INT(profile__symbolize_with(p, fake_resolve, &ctx), 0);
	CHECK_INT(ctx.calls, 1);
	ctx.calls = 0;
	CHECK_INT(profile__symbolize_with(p, fake_resolve, &ctx), 0);
	CHECK_INT(ctx.calls, 0);
	CHECK(profile__location(p, 3)->symbolized);

	/* -ENOMEM stops the walk */
	{
		struct prof_frame more[] = {{.kind = PROF_FRAME_USER, .addr = 0x5000},
					    {.kind = PROF_FRAME_USER, .addr = 0x6000}};
		struct fake_ctx c2 = {.enomem_addr = 0x5000};

		CHECK_INT(profile__add_sample(p, 1, 1, more, 2, NULL, 0, &one), 0);
		CHECK_INT(profile__symbolize_with(p, fake_resolve, &c2), -ENOMEM);
		CHECK(!profile__location(p, 6)->symbolized);
		CHECK(!profile__location(p, 7)->symbolized);
	}
	CHECK_INT(profile__symbolize(NULL, NULL), -EINVAL);
	profile__free(p);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(free_null);
	RUN(types);
	RUN(header);
	RUN(interning);
	RUN(summing_and_labels);
	RUN(max_frames);
	RUN(many_samples);
	RUN(symbolize_with);
	return T_END();
}
