// SPDX-License-Identifier: MIT
/* Folded-stack writer tests: exact output for a small profile. */
#include <errno.h>

#include "folded.h"
#include "profile.h"
#include "test.h"

static int fake_resolve(void *ctx, const struct prof_location *loc, struct sym_result *out)
{
	memset(out, 0, sizeof(*out));
	out->module = "/opt/app/bin/app";
	out->resolved = true;
	switch (loc->addr) {
	case 0x401000:
		out->nframes = 2;
		out->frames[0].func = "inlined_helper"; /* inlined into compute */
		out->frames[1].func = "compute(int)";
		return 0;
	case 0x402000:
		out->nframes = 1;
		out->frames[0].func = "main";
		return 0;
	case 0x403000:
		out->nframes = 1;
		out->frames[0].func = "trailing  \t";
		return 0;
	default:
		return -ENOENT;
	}
}

#define U(a)                                                                                                           \
	{                                                                                                              \
		PROF_FRAME_USER, (a), NULL, NULL                                                                       \
	}

static struct profile *build(void)
{
	struct prof_frame inl[] = {U(0x401000), U(0x402000)};
	struct prof_frame unk[] = {{PROF_FRAME_KERNEL, 0xffffffff81dead00ULL, NULL, NULL}, U(0x7777)};
	struct prof_frame syn[] = {{PROF_FRAME_SYNTH, 0, "ker;nel\nname  ", NULL}, U(0x402000)};
	struct prof_frame mainonly[] = {U(0x402000)};
	struct prof_frame trail[] = {U(0x403000), U(0x402000)};
	struct prof_label app[] = {{.key = "process_name", .str = "app"}};
	struct prof_label app_x[] = {{.key = "process_name", .str = "app"}, {.key = "x", .str = "y"}};
	struct prof_label myproc[] = {{.key = "process_name", .str = "my;proc"}, {.key = "n", .num = 3}};
	int64_t v1[] = {5, 50}, v2[] = {2, 20}, v3[] = {1, 0}, v4[] = {3, 0}, v5[] = {2, 9}, v0[] = {0, 0},
		v6[] = {4, 0}, vp[] = {5, 5}, vn[] = {-5, -5}, v7[] = {1, 1};
	struct profile *p = profile__new();
	int err = 0;

	if (!p)
		return NULL;
	err = err ?: (profile__add_type(p, "samples", "count") < 0);
	err = err ?: (profile__add_type(p, "cpu", "nanoseconds") < 0);
	err = err ?: profile__add_sample(p, 10, 11, inl, 2, app, 1, v1);
	/* another thread and another label: the same folded line */
	err = err ?: profile__add_sample(p, 10, 12, inl, 2, app_x, 2, v2);
	err = err ?: profile__add_sample(p, 20, 20, unk, 2, NULL, 0, v3);
	err = err ?: profile__add_sample(p, 10, 11, syn, 2, app, 1, v4);
	err = err ?: profile__add_sample(p, 10, 11, mainonly, 1, myproc, 2, v5);
	err = err ?: profile__add_sample(p, 10, 13, mainonly, 1, app, 1, v0);
	err = err ?: profile__add_sample(p, 10, 11, NULL, 0, app, 1, v6);
	/* two samples that cancel out */
	err = err ?: profile__add_sample(p, 30, 31, mainonly, 1, NULL, 0, vp);
	err = err ?: profile__add_sample(p, 30, 32, mainonly, 1, NULL, 0, vn);
	err = err ?: profile__add_sample(p, 40, 40, trail, 2, NULL, 0, v7);
	err = err ?: profile__symbolize_with(p, fake_resolve, NULL);
	if (err) {
		profile__free(p);
		return NULL;
	}
	return p;
}

/* folded__write into a string (malloc'd), or NULL. */
static char *folded_str(const struct profile *p, int type, int *err)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	*err = folded__write(p, type, f);
	fclose(f);
	return buf;
}

static char *out;

TEST(default_type)
{
	struct profile *p = build();
	int err;

	CHECK(p);
	free(out);
	out = folded_str(p, 0, &err);
	profile__free(p);
	CHECK_INT(err, 0);
	CHECK_STR(out, "app 4\n"
		       "app;main;compute(int);inlined_helper 7\n"
		       "app;main;ker:nel name 3\n"
		       "my:proc;main 2\n"
		       "pid 20;[unknown]+0x7777;[kernel.kallsyms]+0xffffffff81dead00 1\n"
		       "pid 40;main;trailing 1\n");
}

TEST(other_type)
{
	struct profile *p = build();
	int err;

	CHECK(p);
	free(out);
	out = folded_str(p, 1, &err);
	profile__free(p);
	CHECK_INT(err, 0);
	CHECK_STR(out, "app;main;compute(int);inlined_helper 70\n"
		       "my:proc;main 9\n"
		       "pid 40;main;trailing 1\n");
}

TEST(unsymbolized)
{
	struct profile *p = profile__new();
	struct prof_frame fr[] = {{PROF_FRAME_SYNTH, 0, "[memcpy HtoD]", NULL},
				  U(0x402000),
				  {PROF_FRAME_KERNEL, 0xffffffff81000000ULL, NULL, NULL}};
	int64_t v = 3;
	int err;

	CHECK(p);
	CHECK_INT(profile__add_type(p, "samples", "count"), 0);
	CHECK_INT(profile__add_sample(p, 7, 7, fr, 3, NULL, 0, &v), 0);
	free(out);
	out = folded_str(p, 0, &err);
	profile__free(p);
	CHECK_INT(err, 0);
	CHECK_STR(out, "pid 7;[kernel.kallsyms]+0xffffffff81000000;[unknown]+0x402000;[memcpy HtoD] 3\n");
}

TEST(empty_and_errors)
{
	struct profile *p = profile__new();
	FILE *f;
	int err;

	CHECK(p);
	CHECK_INT(folded__write(p, 0, stdout), -EINVAL); /* no such type */
	CHECK_INT(profile__add_type(p, "samples", "count"), 0);
	free(out);
	out = folded_str(p, 0, &err);
	CHECK_INT(err, 0);
	CHECK_STR(out, "");
	CHECK_INT(folded__write(p, 1, stdout), -EINVAL);
	CHECK_INT(folded__write(p, -1, stdout), -EINVAL);
	CHECK_INT(folded__write(NULL, 0, stdout), -EINVAL);
	profile__free(p);

	p = build();
	CHECK(p);
	f = fopen("/dev/full", "w");
	if (!f) {
		profile__free(p);
		SKIP("/dev/full: %s", strerror(errno));
	}
	err = folded__write(p, 0, f);
	fclose(f);
	profile__free(p);
	CHECK(err < 0);
}

int main(int argc, char **argv)
{
	int rc;

	T_BEGIN(argv);
	RUN(default_type);
	RUN(other_type);
	RUN(unsymbolized);
	RUN(empty_and_errors);
	free(out);
	rc = T_END();
	return rc;
}
