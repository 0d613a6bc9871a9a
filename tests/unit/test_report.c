// SPDX-License-Identifier: MIT
/* report: a model with known CUDA and CPU stacks gives tables with those numbers (read
 * back from the text, not compared to a saved copy): counts, bytes, waits, call sites
 * past nvcc's stubs and NVIDIA libraries, percentages adding to 100, the "[N more]" row,
 * a line for each section without data, and duration statistics of a trace. */
#include <errno.h>
#include <stdbool.h>

#include "profile.h"
#include "report.h"
#include "test.h"
#include "trace.h"

enum { T_SAMPLES, T_CPU, T_CALLS, T_LAUNCH, T_MEMCPY, T_SYNC, T_ALLOC, T_INUSE, NT };

struct fn {
	uint64_t addr;
	const char *module, *func, *sys, *file;
	int line;
};

static const struct fn fns[] = {
    {0x100, "/app", "saxpy<float>(int)", "_Z5saxpyIfEvi", "wl.cu", 37},
    {0x110, "/app", "__device_stub__Z5saxpyIfEvi(int)", NULL, "stub.c", 15},
    {0x120, "/app", "launch_a(int)", NULL, "wl.cu", 63},
    {0x130, "/app", "launch_b()", NULL, "wl.cu", 70},
    {0x140, "/app", "do_htod()", NULL, "wl.cu", 84},
    {0x150, "/app", "do_sync()", NULL, "wl.cu", 114},
    {0x160, "/app", "do_allocs()", NULL, "wl.cu", 121},
    {0x161, "/app", "do_allocs()", NULL, "wl.cu", 122},
    {0x170, "/app", "spin", NULL, "wl.cu", 10},
    {0x180, "/app", "rec", NULL, "wl.cu", 20},
    {0x1f0, "/app", "main", NULL, "wl.cu", 150},
    {0x7f00, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuLaunchKernel_internal", NULL, NULL, 0},
};

static int resolve(void *ctx, const struct prof_location *loc, struct sym_result *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (fns[i].addr == loc->addr) {
			out->module = fns[i].module;
			out->resolved = true;
			out->nframes = 1;
			out->frames[0] = (struct sym_frame){fns[i].func, fns[i].sys, fns[i].file, fns[i].line, 0};
			return 0;
		}
	return -ENOENT;
}

#define U(a)                                                                                                           \
	{                                                                                                              \
		PROF_FRAME_USER, a, NULL, NULL                                                                         \
	}
#define S(n)                                                                                                           \
	{                                                                                                              \
		PROF_FRAME_SYNTH, 0, n, NULL                                                                           \
	}

static void add(struct profile *p, const struct prof_frame *fr, int n, int type, int64_t v, int type2, int64_t v2)
{
	int64_t vals[NT + 2] = {0};

	vals[type] = v;
	if (type2 >= 0)
		vals[type2] = v2;
	profile__add_sample(p, 1, 1, fr, n, NULL, 0, vals);
}

/* extra: a sample type past gpubpf's, e.g. "gpu_kernel_time" */
static struct profile *build(const char *extra)
{
	static const char *const types[NT][2] = {
	    {"samples", "count"},	{"cpu", "nanoseconds"},	  {"cuda_calls", "count"},
	    {"cuda_launches", "count"}, {"cuda_memcpy", "bytes"}, {"cuda_sync_wait", "nanoseconds"},
	    {"gpu_alloc", "bytes"},	{"gpu_inuse", "bytes"},
	};
	struct profile *p = profile__new();
	struct prof_frame la[] = {{PROF_FRAME_SYNTH, 0, "saxpy<float>(int)", "_Z5saxpyIfEvi"},
				  S("cudaLaunchKernel"),
				  U(0x100),
				  U(0x110),
				  U(0x120),
				  U(0x1f0)};
	struct prof_frame lb[] = {S("scale(float*)"), S("cuLaunchKernel"), U(0x7f00), U(0x130), U(0x1f0)};
	struct prof_frame cp[] = {S("[memcpy HtoD]"), S("cudaMemcpy"), U(0x140), U(0x1f0)};
	struct prof_frame ms[] = {S("[memset]"), S("cudaMemset"), U(0x140), U(0x1f0)};
	struct prof_frame sy[] = {S("cudaDeviceSynchronize"), U(0x150), U(0x1f0)};
	struct prof_frame a1[] = {S("cudaMalloc"), U(0x160), U(0x1f0)};
	struct prof_frame a2[] = {S("cudaMalloc"), U(0x161), U(0x1f0)};
	struct prof_frame c1[] = {U(0x170), U(0x1f0)};
	struct prof_frame c2[] = {U(0x180), U(0x180), U(0x1f0)};
	int64_t vals[NT + 1] = {0};

	for (int i = 0; i < NT; i++)
		profile__add_type(p, types[i][0], types[i][1]);
	if (extra)
		profile__add_type(p, extra, "nanoseconds");
	add(p, la, 6, T_CALLS, 100, T_LAUNCH, 100);
	add(p, lb, 5, T_CALLS, 50, T_LAUNCH, 50);
	add(p, cp, 4, T_CALLS, 4, T_MEMCPY, 4096);
	add(p, ms, 4, T_CALLS, 2, T_MEMCPY, 512);
	add(p, sy, 3, T_CALLS, 5, T_SYNC, 5000);
	add(p, a1, 3, T_CALLS, 1, T_ALLOC, 1024);
	vals[T_INUSE] = 1024;
	profile__add_sample(p, 1, 1, a1, 3, NULL, 0, vals);
	add(p, a2, 3, T_CALLS, 1, T_ALLOC, 2048);
	add(p, c1, 2, T_SAMPLES, 6, T_CPU, 600);
	add(p, c2, 3, T_SAMPLES, 2, T_CPU, 200);
	if (extra) {
		memset(vals, 0, sizeof(vals));
		vals[NT] = 9000; /* device time of saxpy */
		profile__add_sample(p, 1, 1, la, 6, NULL, 0, vals);
		vals[NT] = 1000;
		profile__add_sample(p, 1, 1, lb, 5, NULL, 0, vals);
	}
	profile__symbolize_with(p, resolve, NULL);
	return p;
}

static char *run_report(const struct profile *p, int top, const char *type, int *err)
{
	struct report_opts o = {.top = top, .raw = true, .sample_type = type};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	*err = report__profile(p, &o, f);
	fclose(f);
	return buf;
}

/* The section whose title starts with title: from its title to the next blank line. */
static const char *section(const char *out, const char *title, size_t *len)
{
	const char *s = out, *e;

	while ((s = strstr(s, title)) && s != out && s[-1] != '\n')
		s++;
	if (!s)
		return NULL;
	e = strstr(s, "\n\n");
	*len = e ? (size_t)(e - s) : strlen(s);
	return s;
}

/* The numbers before the name of the row whose name column is `name`; "-" reads as -1. */
static int row(const char *out, const char *title, const char *name, double *v, int max)
{
	size_t len;
	const char *s = section(out, title, &len), *end;
	char line[512];
	int n = 0;

	if (!s)
		return -1;
	end = s + len;
	for (const char *l = strchr(s, '\n'); l && l < end; l = strchr(l + 1, '\n')) {
		const char *nl = strchr(l + 1, '\n');
		size_t ll = (nl && nl < end ? nl : end) - (l + 1);
		char *tok, *save, *nm;

		if (ll >= sizeof(line))
			continue;
		memcpy(line, l + 1, ll);
		line[ll] = '\0';
		nm = strstr(line, "  ");
		/* the name column comes after two spaces following the last number */
		for (char *p = line; (p = strstr(p, "  ")); p++)
			nm = p;
		if (!nm || strcmp(nm + 2, name))
			continue;
		*nm = '\0';
		for (tok = strtok_r(line, " ", &save); tok && n < max; tok = strtok_r(NULL, " ", &save))
			v[n++] = !strcmp(tok, "-") ? -1 : strtod(tok, NULL);
		return n;
	}
	return -1;
}

/* Sum of the percentage column col over a section's rows. */
static double pct_sum(const char *out, const char *title, int col)
{
	size_t len;
	const char *s = section(out, title, &len), *end;
	double sum = 0;

	if (!s)
		return -1;
	end = s + len;
	/* the row lines: after the header line */
	s = strchr(s, '\n');
	s = s ? strchr(s + 1, '\n') : NULL;
	for (const char *l = s; l && l < end; l = strchr(l + 1, '\n')) {
		char line[512], *tok, *save;
		const char *nl = strchr(l + 1, '\n');
		size_t ll = (nl && nl < end ? nl : end) - (l + 1);
		int c = 0;

		if (ll >= sizeof(line))
			continue;
		memcpy(line, l + 1, ll);
		line[ll] = '\0';
		for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save), c++)
			if (c == col && strchr(tok, '%'))
				sum += strtod(tok, NULL);
	}
	return sum;
}

#define CHECK_NEAR(a, b, eps)                                                                                          \
	do {                                                                                                           \
		double _a = (a), _b = (b);                                                                             \
		if (_a < _b - (eps) || _a > _b + (eps))                                                                \
			T_FAIL("%s == %g, expected %g", #a, _a, _b);                                                   \
	} while (0)

TEST(cuda_tables)
{
	struct profile *p = build(NULL);
	int err;
	char *out = run_report(p, 10, NULL, &err);
	double v[8];

	CHECK_INT(err, 0);
	CHECK_INT(row(out, "CUDA API summary", "cudaLaunchKernel", v, 8), 5);
	CHECK_INT(v[0], 100);
	CHECK_INT(row(out, "CUDA API summary", "cuLaunchKernel", v, 8), 5);
	CHECK_INT(v[0], 50);
	CHECK_INT(row(out, "CUDA API summary", "cudaDeviceSynchronize", v, 8), 5);
	CHECK_INT(v[0], 5);
	CHECK_INT(v[2], 5000);
	CHECK_NEAR(v[3], 100, 0.01);
	CHECK_INT(v[4], 1000); /* average wait */
	CHECK_NEAR(pct_sum(out, "CUDA API summary", 1), 100, 0.3);

	CHECK(strstr(out, "no device time: the profile has no gpu_kernel_time"));
	CHECK_INT(row(out, "GPU kernel summary", "saxpy<float>(int)", v, 8), 2);
	CHECK_INT(v[0], 100);
	CHECK_NEAR(v[1], 66.7, 0.01);
	CHECK_INT(row(out, "GPU kernel summary", "scale(float*)", v, 8), 2);
	CHECK_NEAR(v[1], 33.3, 0.01);

	CHECK_INT(row(out, "Memory operations", "[memcpy HtoD]", v, 8), 3);
	CHECK_INT(v[0], 4);
	CHECK_INT(v[1], 4096);
	CHECK_NEAR(v[2], 88.9, 0.01);
	CHECK_INT(row(out, "Memory operations", "[memset]", v, 8), 3);
	CHECK_INT(v[1], 512);

	CHECK(strstr(out, "(3072 allocated, 1024 still in use at the end)"));
	CHECK_INT(row(out, "GPU memory", "do_allocs() (wl.cu:122)", v, 8), 5);
	CHECK_INT(v[0], 2048);
	CHECK_INT(v[2], 0);
	CHECK_INT(row(out, "GPU memory", "do_allocs() (wl.cu:121)", v, 8), 5);
	CHECK_INT(v[2], 1024);
	CHECK_NEAR(v[3], 100, 0.01);
	CHECK_INT(v[4], 1);
	/* the largest first */
	CHECK(strstr(out, "wl.cu:122") < strstr(out, "wl.cu:121"));

	/* call sites: past the host stub named like the kernel, nvcc's device stub and
	 * libcuda's own frame */
	CHECK_INT(row(out, "Top launch call sites", "launch_a(int) (wl.cu:63)", v, 8), 2);
	CHECK_INT(v[0], 100);
	CHECK_INT(row(out, "Top launch call sites", "launch_b() (wl.cu:70)", v, 8), 2);
	CHECK_INT(v[0], 50);
	CHECK_NEAR(pct_sum(out, "Top launch call sites", 1), 100, 0.2);
	free(out);
	profile__free(p);
}

TEST(cpu_functions)
{
	struct profile *p = build(NULL);
	int err;
	char *out = run_report(p, 10, NULL, &err);
	double v[8];

	CHECK_INT(err, 0);
	CHECK(strstr(out, "Top functions by samples/count"));
	CHECK_INT(row(out, "Top functions", "spin", v, 8), 4);
	CHECK_INT(v[0], 6);
	CHECK_NEAR(v[1], 75, 0.01);
	/* recursion counts once in cum */
	CHECK_INT(row(out, "Top functions", "rec", v, 8), 4);
	CHECK_INT(v[0], 2);
	CHECK_INT(v[2], 2);
	CHECK_INT(row(out, "Top functions", "main", v, 8), 4);
	CHECK_INT(v[0], 0);
	CHECK_INT(v[2], 8);
	CHECK_NEAR(v[3], 100, 0.01);
	CHECK_NEAR(pct_sum(out, "Top functions", 1), 100, 0.2);
	free(out);

	/* another type: nanoseconds */
	out = run_report(p, 10, "cpu", &err);
	CHECK_INT(err, 0);
	CHECK_INT(row(out, "Top functions by cpu/nanoseconds", "spin", v, 8), 4);
	CHECK_INT(v[0], 600);
	free(out);
	out = run_report(p, 10, "nope", &err);
	CHECK_INT(err, -EINVAL);
	free(out);
	profile__free(p);
}

TEST(top_n_folds_the_rest)
{
	struct profile *p = build(NULL);
	int err;
	char *out = run_report(p, 2, NULL, &err);
	double v[8];

	CHECK_INT(err, 0);
	/* 6 API functions: 2 shown, 4 summed */
	CHECK_INT(row(out, "CUDA API summary", "[4 more]", v, 8), 5);
	CHECK_INT(v[0], 13);
	CHECK_NEAR(pct_sum(out, "CUDA API summary", 1), 100, 0.3);
	free(out);
	profile__free(p);
}

TEST(device_time)
{
	struct profile *p = build("gpu_kernel_time");
	int err;
	char *out = run_report(p, 10, NULL, &err);
	double v[8];

	CHECK_INT(err, 0);
	CHECK(!strstr(out, "no device time:"));
	CHECK_INT(row(out, "GPU kernel summary", "saxpy<float>(int)", v, 8), 4);
	CHECK_INT(v[0], 9000);
	CHECK_NEAR(v[1], 90, 0.01);
	CHECK_INT(v[2], 100);
	CHECK_INT(v[3], 90);
	CHECK_NEAR(pct_sum(out, "GPU kernel summary", 1), 100, 0.2);
	CHECK_INT(row(out, "Top launch call sites", "launch_a(int) (wl.cu:63)", v, 8), 4);
	CHECK_INT(v[2], 9000);
	free(out);
	profile__free(p);
}

TEST(sections_without_data_say_why)
{
	struct profile *p = profile__new();
	struct prof_frame c1[] = {U(0x170)};
	int64_t v[] = {3, 9};
	int err;
	char *out;

	profile__add_type(p, "alloc_space", "bytes");
	profile__add_type(p, "objects", "count");
	profile__add_sample(p, 1, 1, c1, 1, NULL, 0, v);
	profile__symbolize_with(p, resolve, NULL);
	out = run_report(p, 10, NULL, &err);
	CHECK_INT(err, 0);
	CHECK(strstr(out, "CUDA API summary: left out: the profile has no cuda_calls"));
	CHECK(strstr(out, "GPU kernel summary: left out:"));
	CHECK(strstr(out, "Memory operations: left out:"));
	CHECK(strstr(out, "GPU memory: left out:"));
	/* another tool's profile: its default type is the one shown, the rest is named */
	CHECK(strstr(out, "Top functions by alloc_space/bytes"));
	CHECK(strstr(out, "Not shown: sample types objects/count"));
	free(out);
	profile__free(p);
}

TEST(trace_statistics)
{
	struct trace *t = trace__new();
	static const uint64_t durs[] = {100, 400, 200, 300};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct report_opts o = {.top = 10, .raw = true};
	double v[8];

	for (int i = 0; i < 4; i++) {
		struct trace_event k = {.kind = TRACE_KERNEL, .name = "k1", .start_ns = 1000 * i, .dur_ns = durs[i]};
		struct trace_event a = {
		    .kind = TRACE_API, .name = "cudaLaunchKernel", .start_ns = 1000 * i, .dur_ns = 10 + i};

		trace__add(t, &k);
		trace__add(t, &a);
	}
	{
		struct trace_event k = {.kind = TRACE_KERNEL, .name = "k2", .start_ns = 5000, .dur_ns = 3000};

		trace__add(t, &k);
	}
	CHECK_INT(report__trace(t, &o, f), 0);
	fclose(f);
	/* count total total% min median max */
	CHECK_INT(row(buf, "GPU kernels", "k1", v, 8), 6);
	CHECK_INT(v[0], 4);
	CHECK_INT(v[1], 1000);
	CHECK_NEAR(v[2], 25, 0.01);
	CHECK_INT(v[3], 100);
	CHECK_INT(v[4], 250);
	CHECK_INT(v[5], 400);
	CHECK_INT(row(buf, "GPU kernels", "k2", v, 8), 6);
	CHECK_INT(v[3], 3000);
	CHECK_INT(v[4], 3000);
	CHECK(strstr(buf, "GPU kernels") < strstr(buf, "k2") && strstr(buf, "k2") < strstr(buf, "k1"));
	CHECK_INT(row(buf, "CUDA API calls", "cudaLaunchKernel", v, 8), 6);
	CHECK_INT(v[3], 10);
	CHECK_INT(v[4], 11); /* (11 + 12) / 2, in whole ns */
	CHECK_INT(v[5], 13);
	CHECK(strstr(buf, "Memory operations (device time): left out"));
	free(buf);
	trace__free(t);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(cuda_tables);
	RUN(cpu_functions);
	RUN(top_n_folds_the_rest);
	RUN(device_time);
	RUN(sections_without_data_say_why);
	RUN(trace_statistics);
	return T_END();
}
