// SPDX-License-Identifier: MIT
/* speedscope writer: valid JSON in speedscope's file format (the fields its schema
 * requires), one sampled profile per sample type with a value, the right units, stacks
 * root first starting at the process, weights summing to the totals, frames with file
 * and line, and names with any bytes in them escaped. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>

#include "profile.h"
#include "speedscope.h"
#include "test.h"

static int resolve(void *ctx, const struct prof_location *loc, struct sym_result *out)
{
	memset(out, 0, sizeof(*out));
	out->module = "/app";
	out->resolved = true;
	if (loc->addr == 0x1000) {
		out->nframes = 2;
		out->frames[0] = (struct sym_frame){"inl", NULL, "/src/a.h", 5, 4};
		out->frames[1] = (struct sym_frame){"work(int)", NULL, "/src/a.cc", 20, 18};
	} else if (loc->addr == 0x2000) {
		out->nframes = 1;
		out->frames[0] = (struct sym_frame){"main", NULL, "/src/a.cc", 40, 30};
	} else {
		return -ENOENT; /* stays an address */
	}
	return 0;
}

static struct profile *build(void)
{
	struct profile *p = profile__new();
	struct prof_frame cpu[] = {{PROF_FRAME_USER, 0x1000, NULL, NULL}, {PROF_FRAME_USER, 0x2000, NULL, NULL}};
	struct prof_frame cpu2[] = {{PROF_FRAME_USER, 0x3000, NULL, NULL}, {PROF_FRAME_USER, 0x2000, NULL, NULL}};
	struct prof_frame cp[] = {{PROF_FRAME_SYNTH, 0, "[memcpy HtoD]", NULL},
				  {PROF_FRAME_SYNTH, 0, "cudaMemcpy", NULL},
				  {PROF_FRAME_USER, 0x2000, NULL, NULL}};
	struct prof_frame odd[] = {{PROF_FRAME_SYNTH, 0, "k\"<\\>\n\x01\xff", NULL},
				   {PROF_FRAME_USER, 0x2000, NULL, NULL}};
	struct prof_label comm = {"process_name", "app", 0, NULL};
	int64_t v1[] = {3, 300, 0, 0}, v2[] = {1, 100, 0, 0}, v3[] = {0, 0, 4096, 0}, v4[] = {0, 0, 0, 0};

	profile__add_type(p, "samples", "count");
	profile__add_type(p, "cpu", "nanoseconds");
	profile__add_type(p, "cuda_memcpy", "bytes");
	profile__add_type(p, "gpu_inuse", "bytes"); /* all zero: no profile */
	profile__add_sample(p, 5, 5, cpu, 2, &comm, 1, v1);
	profile__add_sample(p, 6, 6, cpu2, 2, NULL, 0, v2);
	profile__add_sample(p, 5, 5, cp, 3, &comm, 1, v3);
	profile__add_sample(p, 5, 5, odd, 2, &comm, 1, v4);
	profile__symbolize_with(p, resolve, NULL);
	return p;
}

static json_t *write_parse(const struct profile *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_error_t je;
	json_t *root = NULL;

	if (f && speedscope__write(p, f) == 0 && fclose(f) == 0) {
		root = json_loadb(buf, len, 0, &je);
		if (!root)
			printf("# JSON error: %s at line %d\n", je.text, je.line);
	}
	free(buf);
	return root;
}

static const char *frame_name(json_t *frames, json_t *idx)
{
	return json_string_value(json_object_get(json_array_get(frames, json_integer_value(idx)), "name"));
}

TEST(file_format)
{
	struct profile *p = build();
	json_t *root = write_parse(p), *profs, *frames, *pr, *smp;
	size_t i;

	CHECK(root);
	CHECK_STR(json_string_value(json_object_get(root, "$schema")),
		  "https://www.speedscope.app/file-format-schema.json");
	profs = json_object_get(root, "profiles");
	frames = json_object_get(json_object_get(root, "shared"), "frames");
	CHECK(json_is_array(frames));
	CHECK_INT(json_array_size(profs), 3); /* gpu_inuse is all zero */
	json_array_foreach(profs, i, pr)
	{
		static const char *const names[] = {"samples", "cpu", "cuda_memcpy"};
		static const char *const units[] = {"none", "nanoseconds", "bytes"};
		static const int64_t totals[] = {4, 400, 4096};
		json_t *w = json_object_get(pr, "weights"), *x;
		int64_t sum = 0;
		size_t j;

		CHECK_STR(json_string_value(json_object_get(pr, "type")), "sampled");
		CHECK_STR(json_string_value(json_object_get(pr, "name")), names[i]);
		CHECK_STR(json_string_value(json_object_get(pr, "unit")), units[i]);
		CHECK_INT(json_integer_value(json_object_get(pr, "startValue")), 0);
		CHECK_INT(json_integer_value(json_object_get(pr, "endValue")), totals[i]);
		CHECK_INT(json_array_size(json_object_get(pr, "samples")), json_array_size(w));
		json_array_foreach(w, j, x) sum += json_integer_value(x);
		CHECK_INT(sum, totals[i]);
	}
	/* samples: root first, the process, then main, work(int), and the inlined inl */
	pr = json_array_get(profs, 0);
	smp = json_array_get(json_object_get(pr, "samples"), 0);
	CHECK_INT(json_array_size(smp), 4);
	CHECK_STR(frame_name(frames, json_array_get(smp, 0)), "app");
	CHECK_STR(frame_name(frames, json_array_get(smp, 1)), "main");
	CHECK_STR(frame_name(frames, json_array_get(smp, 2)), "work(int)");
	CHECK_STR(frame_name(frames, json_array_get(smp, 3)), "inl");
	CHECK_INT(json_integer_value(json_array_get(json_object_get(pr, "weights"), 0)), 3);
	/* a process without a name, and an address without a symbol */
	smp = json_array_get(json_object_get(pr, "samples"), 1);
	CHECK_STR(frame_name(frames, json_array_get(smp, 0)), "pid 6");
	CHECK_STR(frame_name(frames, json_array_get(smp, 2)), "[unknown]+0x3000");
	/* frames carry file and the function's first line; synthetic ones have neither */
	{
		json_t *fr = json_array_get(
		    frames, json_integer_value(json_array_get(json_array_get(json_object_get(pr, "samples"), 0), 2)));

		CHECK_STR(json_string_value(json_object_get(fr, "file")), "/src/a.cc");
		CHECK_INT(json_integer_value(json_object_get(fr, "line")), 18);
	}
	pr = json_array_get(profs, 2);
	smp = json_array_get(json_object_get(pr, "samples"), 0);
	CHECK_STR(frame_name(frames, json_array_get(smp, 3)), "[memcpy HtoD]");
	CHECK(!json_object_get(json_array_get(frames, json_integer_value(json_array_get(smp, 3))), "file"));
	/* main appears once in the frame table although three stacks use it */
	{
		int nmain = 0;
		json_t *fr;

		json_array_foreach(frames, i, fr) nmain +=
		    !strcmp(json_string_value(json_object_get(fr, "name")), "main");
		CHECK_INT(nmain, 1);
	}
	json_decref(root);
	profile__free(p);
}

TEST(escaping)
{
	struct profile *p = build();
	int64_t v[] = {1, 1, 0, 0};
	struct prof_frame odd[] = {{PROF_FRAME_SYNTH, 0, "k\"<\\>\n\x01\xff", NULL}};
	json_t *root, *frames, *fr;
	size_t i;
	bool found = false;

	profile__add_sample(p, 5, 5, odd, 1, NULL, 0, v);
	root = write_parse(p);
	CHECK(root);
	frames = json_object_get(json_object_get(root, "shared"), "frames");
	json_array_foreach(frames, i, fr) found |=
	    !strcmp(json_string_value(json_object_get(fr, "name")), "k\"<\\>\n\x01\xef\xbf\xbd");
	CHECK(found);
	json_decref(root);
	profile__free(p);
}

TEST(empty_profile_still_has_one)
{
	struct profile *p = profile__new();
	json_t *root;

	profile__add_type(p, "samples", "count");
	root = write_parse(p);
	CHECK(root);
	CHECK_INT(json_array_size(json_object_get(root, "profiles")), 1);
	CHECK_INT(json_array_size(json_object_get(json_array_get(json_object_get(root, "profiles"), 0), "samples")), 0);
	CHECK_INT(speedscope__write(NULL, stdout), -EINVAL);
	json_decref(root);
	profile__free(p);
}

/* A CUDA recording of a program that barely used the CPU: no empty "samples" tab, and
 * speedscope opens on the launches. */
TEST(cuda_only_opens_on_launches)
{
	struct profile *p = profile__new();
	struct prof_frame fr = {.kind = PROF_FRAME_SYNTH, .name = "saxpy"};
	int64_t v[3] = {0, 7, 7};
	json_t *root, *profs;

	profile__add_type(p, "samples", "count");
	profile__add_type(p, "cuda_calls", "count");
	profile__add_type(p, "cuda_launches", "count");
	CHECK_INT(profile__add_sample(p, 1, 1, &fr, 1, NULL, 0, v), 0);
	root = write_parse(p);
	CHECK(root);
	profs = json_object_get(root, "profiles");
	CHECK_INT(json_array_size(profs), 2);
	CHECK_STR(json_string_value(json_object_get(json_array_get(profs, 1), "name")), "cuda_launches");
	CHECK_INT(json_integer_value(json_object_get(root, "activeProfileIndex")), 1);
	json_decref(root);
	v[0] = 2;
	CHECK_INT(profile__add_sample(p, 1, 1, &fr, 1, NULL, 0, v), 0);
	root = write_parse(p);
	profs = json_object_get(root, "profiles");
	CHECK_INT(json_array_size(profs), 3);
	/* CPU samples exist now: they come first, and speedscope opens on them */
	CHECK_INT(json_integer_value(json_object_get(root, "activeProfileIndex")), 0);
	CHECK_STR(json_string_value(json_object_get(json_array_get(profs, 0), "name")), "samples");
	json_decref(root);
	profile__free(p);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(file_format);
	RUN(cuda_only_opens_on_launches);
	RUN(escaping);
	RUN(empty_profile_still_has_one);
	return T_END();
}
