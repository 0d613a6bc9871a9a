// SPDX-License-Identifier: MIT
/* pprof writer tests: the real consumer (go tool pprof) reads what we write, and a
 * protobuf-c decode checks the id and string-table rules other consumers enforce. */
#include <errno.h>
#include <unistd.h>
#include <zlib.h>

#include "pprof.h"
#include "profile.h"
#include "profile.pb-c.h"
#include "test.h"

#define APP "/opt/app/bin/app"
#define APP_BI "0123456789abcdef0123456789abcdef01234567"
#define RT "/usr/lib/x86_64-linux-gnu/libcudart.so.13"
#define RT_BI "cafebabe00112233"

/* Symbols the fake resolver knows, by address. */
static int fake_resolve(void *ctx, const struct prof_location *loc, struct sym_result *out)
{
	memset(out, 0, sizeof(*out));
	if (loc->kind == PROF_FRAME_KERNEL) {
		out->module = "[kernel.kallsyms]";
		out->resolved = true;
		out->nframes = 1;
		out->frames[0].func = loc->addr == 0xffffffff81000000ULL ? "do_syscall_64" : "entry_SYSCALL_64";
		/* the kernel stays one mapping even when lookups disagree on its build id */
		if (loc->addr != 0xffffffff81000000ULL)
			out->build_id = "feedface";
		return 0;
	}
	out->module = APP;
	out->build_id = APP_BI;
	out->map_start = 0x400000;
	out->map_limit = 0x500000;
	out->map_offset = 0;
	out->rel_addr = loc->addr - 0x400000;
	out->resolved = true;
	switch (loc->addr) {
	case 0x401000:
		out->nframes = 2;
		out->frames[0] = (struct sym_frame){"inlined_helper", NULL, "/src/helper.h", 12, 10};
		out->frames[1] = (struct sym_frame){"compute(int)", "_Z7computei", "/src/main.cc", 34, 30};
		return 0;
	case 0x402000:
		out->nframes = 1;
		out->frames[0] = (struct sym_frame){"main", "main", "/src/main.cc", 50, 45};
		return 0;
	case 0x7f0000001000ULL:
		out->module = RT;
		out->build_id = RT_BI;
		out->map_start = 0x7f0000000000ULL;
		out->map_limit = 0x7f0000100000ULL;
		out->map_offset = 0x1000;
		out->nframes = 1;
		out->frames[0] = (struct sym_frame){"cudaLaunchKernel", "cudaLaunchKernel", NULL, 0, 0};
		return 0;
	case 0x409999:
		out->resolved = false;
		out->nframes = 1;
		out->frames[0].func = APP "+0x9999";
		return 0;
	default:
		return -ENOENT; /* stays unsymbolized */
	}
}

enum { T_SAMPLES, T_CPU, T_LAUNCH };

static struct profile *build_profile(void)
{
	struct prof_frame s1[] = {{PROF_FRAME_USER, 0x401000, NULL, NULL}, {PROF_FRAME_USER, 0x402000, NULL, NULL}};
	struct prof_frame s2[] = {{PROF_FRAME_KERNEL, 0xffffffff81000000ULL, NULL, NULL},
				  {PROF_FRAME_KERNEL, 0xffffffff81000100ULL, NULL, NULL},
				  {PROF_FRAME_USER, 0x402000, NULL, NULL}};
	struct prof_frame s3[] = {{PROF_FRAME_SYNTH, 0, "vectorAdd(float*)", "_Z9vectorAddPf"},
				  {PROF_FRAME_USER, 0x7f0000001000ULL, NULL, NULL},
				  {PROF_FRAME_USER, 0x401000, NULL, NULL},
				  {PROF_FRAME_USER, 0x402000, NULL, NULL}};
	struct prof_frame s4[] = {{PROF_FRAME_USER, 0x7777, NULL, NULL}, {PROF_FRAME_USER, 0x402000, NULL, NULL}};
	struct prof_frame s5[] = {{PROF_FRAME_USER, 0x409999, NULL, NULL}, {PROF_FRAME_USER, 0x402000, NULL, NULL}};
	struct prof_frame s6[] = {{PROF_FRAME_KERNEL, 0xffffffff81000200ULL, NULL, NULL}};
	struct prof_label comm[] = {{.key = "process_name", .str = "app"}};
	struct prof_label launch[] = {{.key = "process_name", .str = "app"},
				      {.key = "grid_threads", .num = 4096, .unit = "threads"}};
	int64_t v1[] = {5, 50000000, 0}, v2[] = {3, 30000000, 0}, v3[] = {0, 0, 7}, v4[] = {1, 10000000, 0},
		v6[] = {1, 0, 0};
	struct profile *p = profile__new();
	int err = 0;

	if (!p)
		return NULL;
	if (profile__add_type(p, "samples", "count") != T_SAMPLES ||
	    profile__add_type(p, "cpu", "nanoseconds") != T_CPU ||
	    profile__add_type(p, "cuda_launches", "count") != T_LAUNCH)
		goto fail;
	err = err ?: profile__set_period(p, "cpu", "nanoseconds", 10000000);
	profile__set_time(p, 1700000000000000000LL, 2000000000LL);
	err = err ?: profile__add_comment(p, "gpubpf unit test");
	err = err ?: profile__add_comment(p, "pid %d", 100);
	err = err ?: profile__add_sample(p, 100, 101, s1, 2, comm, 1, v1);
	err = err ?: profile__add_sample(p, 100, 102, s2, 3, comm, 1, v2);
	err = err ?: profile__add_sample(p, 100, 101, s3, 4, launch, 2, v3);
	err = err ?: profile__add_sample(p, 100, 101, s4, 2, NULL, 0, v4);
	err = err ?: profile__add_sample(p, 100, 101, s5, 2, NULL, 0, v4);
	err = err ?: profile__add_sample(p, 0, 0, s6, 1, NULL, 0, v6);
	err = err ?: profile__symbolize_with(p, fake_resolve, NULL);
	if (err)
		goto fail;
	return p;
fail:
	profile__free(p);
	return NULL;
}

static char tmpdir[] = "/tmp/gpubpf_test_pprof.XXXXXX";

static int write_file(const struct profile *p, const char *path)
{
	FILE *f = fopen(path, "w");
	int err;

	if (!f)
		return -errno;
	err = pprof__write(p, f);
	if (fclose(f) != 0 && !err)
		err = -EIO;
	return err;
}

/* Output of a shell command (stdout and stderr), or NULL. */
static char *run_cmd(const char *cmd, int *status)
{
	FILE *f = popen(cmd, "r");
	size_t len = 0, cap = 0;
	char *out = NULL;
	char buf[4096];
	size_t n;

	if (!f)
		return NULL;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		if (len + n + 1 > cap) {
			char *nb;

			cap = (len + n + 1) * 2;
			nb = realloc(out, cap);
			if (!nb) {
				pclose(f);
				return NULL;
			}
			out = nb;
		}
		memcpy(out + len, buf, n);
		len += n;
	}
	if (!out)
		out = calloc(1, 1);
	else
		out[len] = '\0';
	*status = pclose(f);
	return out;
}

static bool have_go(void)
{
	return system("command -v go >/dev/null 2>&1") == 0;
}

/* go needs a writable HOME/GOCACHE; keep it out of the user's. */
#define GO_ENV "HOME=/tmp GOCACHE=/tmp/gpubpf-gocache GOPATH=/tmp/gpubpf-gopath GOFLAGS=-mod=mod "

/* The last command's output, kept here so a failing CHECK does not leak it. */
static char *last_out;

static char *pprof_cmd(const char *args, const char *path, int *status)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), GO_ENV "go tool pprof %s '%s' 2>&1", args, path);
	free(last_out);
	last_out = run_cmd(cmd, status);
	return last_out;
}

/* The line of out that contains all of the given pieces (in order), or NULL. */
static const char *find_line(const char *out, const char *a, const char *b, const char *c)
{
	static char line[4096];
	const char *s = out;

	while (s && *s) {
		const char *e = strchr(s, '\n');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		const char *x;

		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		memcpy(line, s, n);
		line[n] = '\0';
		x = strstr(line, a);
		if (x && b)
			x = strstr(x, b);
		if (x && c)
			x = strstr(x, c);
		if (x)
			return line;
		s = e ? e + 1 : NULL;
	}
	return NULL;
}

#define CHECK_HAS(out, s)                                                                                              \
	do {                                                                                                           \
		if (!strstr((out), (s)))                                                                               \
			T_FAIL("output lacks \"%s\":\n%s", (s), (out));                                                \
	} while (0)

#define CHECK_LINE(out, a, b, c)                                                                                       \
	do {                                                                                                           \
		if (!find_line((out), (a), (b), (c)))                                                                  \
			T_FAIL("no line with \"%s\" .. \"%s\" .. \"%s\" in:\n%s", (a), (b) ? (b) : "", (c) ? (c) : "", \
			       (out));                                                                                 \
	} while (0)

TEST(go_pprof_raw)
{
	struct profile *p = build_profile();
	char path[256];
	char *out;
	int status;

	if (!have_go())
		SKIP("LOUD: 'go' not in PATH: the real pprof consumer cannot be run (apt-get install golang-go)");
	CHECK(p);
	snprintf(path, sizeof(path), "%s/raw.pb.gz", tmpdir);
	CHECK_INT(write_file(p, path), 0);
	profile__free(p);

	out = pprof_cmd("-raw", path, &status);
	CHECK(out);
	if (status != 0) {
		T_FAIL("go tool pprof -raw failed (status %d):\n%s", status, out);
	}
	if (getenv("TEST_VERBOSE"))
		printf("%s\n", out);
	/* header */
	CHECK_HAS(out, "PeriodType: cpu nanoseconds");
	CHECK_HAS(out, "Period: 10000000");
	CHECK_HAS(out, "Duration: 2s");
	CHECK_HAS(out, "samples/count[dflt] cpu/nanoseconds cuda_launches/count");
	CHECK_HAS(out, "gpubpf unit test");
	CHECK_HAS(out, "pid 100");
	/* samples: values in type order, then location ids leaf first */
	CHECK_LINE(out, "5   50000000          0: 1 2 ", NULL, NULL);
	CHECK_LINE(out, "3   30000000          0: 3 4 2 ", NULL, NULL);
	CHECK_LINE(out, "0          0          7: 5 6 1 2 ", NULL, NULL);
	CHECK_LINE(out, "1   10000000          0: 7 2 ", NULL, NULL);
	CHECK_LINE(out, "1   10000000          0: 8 2 ", NULL, NULL);
	CHECK_LINE(out, "process_name:[app]", NULL, NULL);
	CHECK_LINE(out, "grid_threads:[4096 threads]", NULL, NULL);
	CHECK_LINE(out, "pid:[100]", NULL, NULL);
	/* locations: address, mapping, function, file:line, inline chain */
	CHECK_LINE(out, "1: 0x401000 M=1 inlined_helper /src/helper.h:12 s=10", NULL, NULL);
	CHECK_LINE(out, "compute(int) /src/main.cc:34 s=30", NULL, NULL);
	CHECK_LINE(out, "2: 0x402000 M=1 main /src/main.cc:50 s=45", NULL, NULL);
	CHECK_LINE(out, "3: 0xffffffff81000000 M=2 do_syscall_64", NULL, NULL);
	CHECK_LINE(out, "4: 0xffffffff81000100 M=2 entry_SYSCALL_64", NULL, NULL);
	CHECK_LINE(out, "5: 0x0 M=3 vectorAdd(float*)", NULL, NULL);
	CHECK_LINE(out, "6: 0x7f0000001000 M=4 cudaLaunchKernel", NULL, NULL);
	CHECK_LINE(out, "7: 0x7777 [unknown]+0x7777", NULL, NULL);
	CHECK_LINE(out, "8: 0x409999 M=1 " APP "+0x9999", NULL, NULL);
	CHECK_LINE(out, "9: 0xffffffff81000200 M=2 entry_SYSCALL_64", NULL, NULL);
	CHECK_LINE(out, "1          0          0: 9 ", NULL, NULL);
	/* mappings with their build ids (go tool pprof numbers them in the order samples
	 * use them; the file's own order is checked in decode_rules) */
	CHECK_LINE(out, "1: 0x400000/0x500000/0x0 " APP " " APP_BI, NULL, NULL);
	CHECK_LINE(out, "2: 0x0/0x0/0x0 [kernel.kallsyms] feedface", NULL, NULL);
	CHECK_LINE(out, "3: 0x0/0x0/0x0 [cuda]", NULL, NULL);
	CHECK_LINE(out, "4: 0x7f0000000000/0x7f0000100000/0x1000 " RT " " RT_BI, NULL, NULL);
}

TEST(go_pprof_top)
{
	struct profile *p = build_profile();
	char path[256];
	char *out;
	int status;

	if (!have_go())
		SKIP("LOUD: 'go' not in PATH: the real pprof consumer cannot be run (apt-get install golang-go)");
	CHECK(p);
	snprintf(path, sizeof(path), "%s/top.pb.gz", tmpdir);
	CHECK_INT(write_file(p, path), 0);
	profile__free(p);

	/* the default sample type is the first one added */
	out = pprof_cmd("-top -nodecount=50", path, &status);
	CHECK(out);
	if (getenv("TEST_VERBOSE"))
		printf("%s\n", out);
	CHECK_INT(status, 0);
	CHECK_LINE(out, "Type: samples", NULL, NULL);
	CHECK_LINE(out, "Total samples = 11", NULL, NULL);
	CHECK_LINE(out, "5 45.45%", "inlined_helper (inline)", NULL);

	out = pprof_cmd("-top -nodecount=50 -sample_index=1", path, &status);
	CHECK(out);
	if (getenv("TEST_VERBOSE"))
		printf("%s\n", out);
	CHECK_INT(status, 0);
	CHECK_LINE(out, "Type: cpu", NULL, NULL);
	/* flat: leaf functions; main holds everything cumulatively */
	CHECK_LINE(out, "50ms", "inlined_helper", NULL);
	CHECK_LINE(out, "30ms", "do_syscall_64", NULL);
	CHECK_LINE(out, "10ms", "[unknown]+0x7777", NULL);
	CHECK_LINE(out, "100ms", "100%", "main");

	out = pprof_cmd("-top -nodecount=50 -sample_index=cuda_launches", path, &status);
	CHECK(out);
	if (getenv("TEST_VERBOSE"))
		printf("%s\n", out);
	CHECK_INT(status, 0);
	CHECK_LINE(out, "Type: cuda_launches", NULL, NULL);
	CHECK_LINE(out, "7   100%", "vectorAdd(float*)", NULL);
	CHECK_LINE(out, "0     0%", "7   100%", "cudaLaunchKernel");

	/* the location's file:line survives to -lines granularity */
	out = pprof_cmd("-top -lines -sample_index=cpu", path, &status);
	CHECK(out);
	CHECK_INT(status, 0);
	CHECK_LINE(out, "inlined_helper", "/src/helper.h:12", NULL);
	CHECK_LINE(out, "main", "/src/main.cc:50", NULL);

	/* label filtering works on our labels */
	out = pprof_cmd("-top -tagfocus=process_name=app -sample_index=cpu", path, &status);
	CHECK(out);
	CHECK_INT(status, 0);
	CHECK_LINE(out, "80ms", "main", NULL);
}

/* ---- decoding ourselves ---- */

static Perftools__Profiles__Profile *read_back(const char *path)
{
	gzFile gz = gzopen(path, "rb");
	size_t len = 0, cap = 1 << 16;
	uint8_t *buf = malloc(cap);
	Perftools__Profiles__Profile *msg;
	int n;

	if (!gz || !buf) {
		if (gz)
			gzclose(gz);
		free(buf);
		return NULL;
	}
	while ((n = gzread(gz, buf + len, (unsigned)(cap - len))) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap * 2);

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	gzclose(gz);
	msg = perftools__profiles__profile__unpack(NULL, len, buf);
	free(buf);
	return msg;
}

static bool str_ok(const Perftools__Profiles__Profile *m, int64_t idx)
{
	return idx >= 0 && (size_t)idx < m->n_string_table;
}

#define S(m, idx) (str_ok((m), (idx)) ? (m)->string_table[(idx)] : "(bad index)")

TEST(decode_rules)
{
	struct profile *p = build_profile();
	Perftools__Profiles__Profile *m;
	char path[256];

	CHECK(p);
	snprintf(path, sizeof(path), "%s/decode.pb.gz", tmpdir);
	CHECK_INT(write_file(p, path), 0);
	m = read_back(path);
	CHECK(m);

	CHECK(m->n_string_table >= 1);
	CHECK_STR(m->string_table[0], "");
	for (size_t i = 1; i < m->n_string_table; i++)
		for (size_t j = i + 1; j < m->n_string_table; j++)
			CHECK(strcmp(m->string_table[i], m->string_table[j]) != 0);

	CHECK_INT(m->n_sample_type, 3);
	for (size_t i = 0; i < m->n_sample_type; i++) {
		const char *t = S(m, m->sample_type[i]->type);

		CHECK(strchr(t, '-') == NULL);
	}
	CHECK_STR(S(m, m->sample_type[0]->type), "samples");
	CHECK_STR(S(m, m->sample_type[1]->unit), "nanoseconds");
	CHECK_STR(S(m, m->default_sample_type), "samples");
	CHECK(m->period_type);
	CHECK_STR(S(m, m->period_type->type), "cpu");
	CHECK_INT(m->period, 10000000);
	CHECK_INT(m->time_nanos, 1700000000000000000LL);
	CHECK_INT(m->duration_nanos, 2000000000LL);
	CHECK_INT(m->n_comment, 2);
	CHECK_STR(S(m, m->comment[1]), "pid 100");

	/* ids 1..N in order, no gaps */
	CHECK_INT(m->n_mapping, 4);
	for (size_t i = 0; i < m->n_mapping; i++) {
		CHECK_INT(m->mapping[i]->id, i + 1);
		CHECK(str_ok(m, m->mapping[i]->filename) && str_ok(m, m->mapping[i]->build_id));
	}
	CHECK_INT(m->n_location, profile__num_locations(p));
	for (size_t i = 0; i < m->n_location; i++) {
		const Perftools__Profiles__Location *l = m->location[i];

		CHECK_INT(l->id, i + 1);
		CHECK(l->mapping_id <= m->n_mapping);
		CHECK(l->n_line >= 1);
		for (size_t j = 0; j < l->n_line; j++)
			CHECK(l->line[j]->function_id >= 1 && l->line[j]->function_id <= m->n_function);
	}
	CHECK_INT(m->n_function, 9);
	for (size_t i = 0; i < m->n_function; i++) {
		const Perftools__Profiles__Function *f = m->function[i];

		CHECK_INT(f->id, i + 1);
		CHECK(str_ok(m, f->name) && str_ok(m, f->system_name) && str_ok(m, f->filename));
		CHECK(*S(m, f->name));
	}
	CHECK_INT(m->n_sample, 6);
	for (size_t i = 0; i < m->n_sample; i++) {
		const Perftools__Profiles__Sample *s = m->sample[i];

		CHECK_INT(s->n_value, 3);
		for (size_t j = 0; j < s->n_location_id; j++)
			CHECK(s->location_id[j] >= 1 && s->location_id[j] <= m->n_location);
		for (size_t j = 0; j < s->n_label; j++)
			CHECK(str_ok(m, s->label[j]->key) && str_ok(m, s->label[j]->str) &&
			      str_ok(m, s->label[j]->num_unit));
	}

	/* specifics: the inline chain, innermost first; names and system names */
	{
		const Perftools__Profiles__Location *l = m->location[0];
		const Perftools__Profiles__Function *f0, *f1;
		const Perftools__Profiles__Mapping *mp = m->mapping[0];

		CHECK_INT(l->address, 0x401000);
		CHECK_INT(l->n_line, 2);
		f0 = m->function[l->line[0]->function_id - 1];
		f1 = m->function[l->line[1]->function_id - 1];
		CHECK_STR(S(m, f0->name), "inlined_helper");
		CHECK_STR(S(m, f0->system_name), "inlined_helper");
		CHECK_INT(l->line[0]->line, 12);
		CHECK_STR(S(m, f1->name), "compute(int)");
		CHECK_STR(S(m, f1->system_name), "_Z7computei");
		CHECK_STR(S(m, f1->filename), "/src/main.cc");
		CHECK_INT(f1->start_line, 30);
		CHECK_INT(l->line[1]->line, 34);
		CHECK_STR(S(m, mp->filename), APP);
		CHECK_STR(S(m, mp->build_id), APP_BI);
		CHECK(mp->has_functions && mp->has_filenames && mp->has_line_numbers && mp->has_inline_frames);
		CHECK_INT(mp->memory_start, 0x400000);
		CHECK_INT(mp->memory_limit, 0x500000);

		/* the synthetic leaf */
		l = m->location[4];
		f0 = m->function[l->line[0]->function_id - 1];
		CHECK_STR(S(m, f0->name), "vectorAdd(float*)");
		CHECK_STR(S(m, f0->system_name), "_Z9vectorAddPf");
		CHECK_STR(S(m, m->mapping[l->mapping_id - 1]->filename), "[cuda]");
		/* user mappings come first in the file: consumers take mapping 1 as the program */
		CHECK_STR(S(m, m->mapping[0]->filename), APP);
		mp = m->mapping[1];
		CHECK(mp->has_functions && !mp->has_filenames && !mp->has_line_numbers && !mp->has_inline_frames);
		CHECK_INT(mp->file_offset, 0x1000);
	}
	/* numeric label */
	{
		const Perftools__Profiles__Sample *s = m->sample[2];
		bool found = false;

		for (size_t j = 0; j < s->n_label; j++) {
			if (strcmp(S(m, s->label[j]->key), "grid_threads") != 0)
				continue;
			found = true;
			CHECK_INT(s->label[j]->num, 4096);
			CHECK_INT(s->label[j]->str, 0);
			CHECK_STR(S(m, s->label[j]->num_unit), "threads");
		}
		CHECK(found);
	}
	perftools__profiles__profile__free_unpacked(m, NULL);
	profile__free(p);
}

TEST(empty_profile)
{
	struct profile *p = profile__new();
	Perftools__Profiles__Profile *m;
	char path[256];

	CHECK(p);
	snprintf(path, sizeof(path), "%s/empty.pb.gz", tmpdir);
	CHECK_INT(write_file(p, path), 0);
	m = read_back(path);
	CHECK(m);
	CHECK_INT(m->n_string_table, 1);
	CHECK_STR(m->string_table[0], "");
	CHECK_INT(m->n_sample, 0);
	CHECK_INT(m->n_location, 0);
	perftools__profiles__profile__free_unpacked(m, NULL);
	profile__free(p);
	CHECK_INT(pprof__write(NULL, stdout), -EINVAL);
}

TEST(write_error)
{
	struct profile *p = build_profile();
	FILE *f;
	int err;

	CHECK(p);
	f = fopen("/dev/full", "w");
	if (!f) {
		profile__free(p);
		SKIP("/dev/full: %s", strerror(errno));
	}
	err = pprof__write(p, f);
	fclose(f);
	profile__free(p);
	CHECK(err < 0);
	CHECK_INT(err, -EIO);
}

TEST(large_profile)
{
	struct profile *p = profile__new();
	struct prof_frame fr[16];
	int64_t v = 1;
	Perftools__Profiles__Profile *m;
	char path[256];

	CHECK(p);
	CHECK_INT(profile__add_type(p, "samples", "count"), 0);
	for (int i = 0; i < 20000; i++) {
		for (int j = 0; j < 16; j++)
			fr[j] = (struct prof_frame){PROF_FRAME_USER, 0x400000 + (uint64_t)((i * 16 + j) % 50000) * 4,
						    NULL, NULL};
		CHECK_INT(profile__add_sample(p, 1 + i % 3, 1, fr, 16, NULL, 0, &v), 0);
	}
	CHECK_INT(profile__symbolize_with(p, fake_resolve, NULL), 0);
	snprintf(path, sizeof(path), "%s/large.pb.gz", tmpdir);
	CHECK_INT(write_file(p, path), 0);
	m = read_back(path);
	CHECK(m);
	CHECK_INT(m->n_sample, profile__num_samples(p));
	CHECK_INT(profile__num_samples(p), 9375); /* 3125 stacks x 3 pids */
	CHECK_INT(m->n_location, profile__num_locations(p));
	CHECK_INT(m->location[m->n_location - 1]->id, m->n_location);
	perftools__profiles__profile__free_unpacked(m, NULL);
	profile__free(p);
}

int main(int argc, char **argv)
{
	char cmd[512];
	int rc;

	T_BEGIN(argv);
	if (!mkdtemp(tmpdir)) {
		printf("FAIL %s:setup: mkdtemp: %s\n", t_prog, strerror(errno));
		return 1;
	}
	RUN(go_pprof_raw);
	RUN(go_pprof_top);
	RUN(decode_rules);
	RUN(empty_profile);
	RUN(write_error);
	RUN(large_profile);
	free(last_out);
	rc = T_END();
	if (!getenv("TEST_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			printf("note: could not remove %s\n", tmpdir);
	}
	return rc;
}
