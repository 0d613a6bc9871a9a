// SPDX-License-Identifier: MIT
/* Trace-event JSON: what trace__write writes passes the validator and jansson, carries
 * the metadata, tracks and flows the viewers need, and reads back; the validator catches
 * the mistakes that make Perfetto drop or misdraw events. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <unistd.h>

#include "test.h"
#include "trace.h"

static char *write_trace(struct trace *t, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	if (trace__write(t, f)) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	return buf;
}

static struct trace *sample_trace(void)
{
	struct trace *t = trace__new();
	struct trace_event api = {.kind = TRACE_API,
				  .name = "cudaLaunchKernel",
				  .pid = 10,
				  .tid = 11,
				  .process_name = "train \"py\"",
				  .thread_name = "worker",
				  .start_ns = 1000,
				  .dur_ns = 500,
				  .correlation = 7};
	struct trace_event outer = {
	    .kind = TRACE_API, .name = "cudaGraphLaunch", .pid = 10, .tid = 11, .start_ns = 900, .dur_ns = 2000};
	struct trace_event k = {.kind = TRACE_KERNEL,
				.name = "saxpy<float>(int, float*)",
				.pid = 10,
				.device = 0,
				.stream = 0x5000,
				.start_ns = 3000,
				.dur_ns = 4000,
				.correlation = 7};
	struct trace_event k2 = {.kind = TRACE_KERNEL,
				 .name = "saxpy<float>(int, float*)",
				 .pid = 10,
				 .device = 0,
				 .stream = 0x5000,
				 .start_ns = 8000,
				 .dur_ns = 2000};
	struct trace_event c = {.kind = TRACE_MEMCPY,
				.name = "[memcpy HtoD]",
				.pid = 10,
				.device = 1,
				.stream = 0,
				.start_ns = 500,
				.dur_ns = 100,
				.bytes = 4096};
	struct trace_event sync = {
	    .kind = TRACE_API, .name = "cudaDeviceSynchronize", .pid = 10, .tid = 12, .start_ns = 2000, .dur_ns = 9000};

	if (!t)
		return NULL;
	/* added out of time order on purpose */
	trace__add(t, &k2);
	trace__add(t, &api);
	trace__add(t, &k);
	trace__add(t, &outer);
	trace__add(t, &c);
	trace__add(t, &sync);
	return t;
}

TEST(written_trace_is_valid_and_complete)
{
	struct trace *t = sample_trace();
	size_t len = 0, i;
	char *buf = write_trace(t, &len), err[256] = "";
	json_t *root, *evs, *e;
	int nflow_s = 0, nflow_f = 0, nx = 0, gpu_tracks = 0;
	bool proc_name = false, thread_name = false;

	CHECK(buf);
	if (trace__validate(buf, len, err, sizeof(err)))
		T_FAIL("validator: %s", err);
	root = json_loadb(buf, len, 0, NULL);
	CHECK(root);
	CHECK_STR(json_string_value(json_object_get(root, "displayTimeUnit")), "ns");
	evs = json_object_get(root, "traceEvents");
	CHECK(json_is_array(evs));
	json_array_foreach(evs, i, e)
	{
		const char *ph = json_string_value(json_object_get(e, "ph"));
		const char *name = json_string_value(json_object_get(e, "name"));
		json_t *args = json_object_get(e, "args");

		if (!strcmp(ph, "M") && !strcmp(name, "process_name"))
			proc_name |= !strcmp(json_string_value(json_object_get(args, "name")), "train \"py\"");
		if (!strcmp(ph, "M") && !strcmp(name, "thread_name")) {
			const char *n = json_string_value(json_object_get(args, "name"));

			thread_name |= !strcmp(n, "worker");
			gpu_tracks += !strncmp(n, "GPU ", 4);
		}
		if (!strcmp(ph, "X")) {
			nx++;
			if (!strcmp(name, "[memcpy HtoD]")) {
				CHECK_INT(json_integer_value(json_object_get(args, "bytes")), 4096);
				CHECK(json_real_value(json_object_get(e, "ts")) == 0.5);
				CHECK(json_real_value(json_object_get(e, "dur")) == 0.1);
			}
		}
		nflow_s += !strcmp(ph, "s");
		if (!strcmp(ph, "f")) {
			nflow_f++;
			CHECK_STR(json_string_value(json_object_get(e, "bp")), "e");
			/* a string: ids pass 2^53 for large pids, past JavaScript's exact integers */
			CHECK_STR(json_string_value(json_object_get(e, "id")), "7");
		}
	}
	CHECK_INT(nx, 6);
	CHECK_INT(nflow_s, 1);
	CHECK_INT(nflow_f, 1);
	CHECK(proc_name);
	CHECK(thread_name);
	CHECK_INT(gpu_tracks, 2); /* GPU 0 stream 0x5000, GPU 1 stream 0x0 */
	json_decref(root);
	free(buf);
	trace__free(t);
}

TEST(read_back)
{
	struct trace *t = sample_trace(), *r = NULL;
	char path[] = "/tmp/gpubpf-test-trace.XXXXXX", err[256] = "";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	int nk = 0;

	CHECK(f);
	CHECK_INT(trace__write(t, f), 0);
	fclose(f);
	if (trace__read_file(path, &r, err, sizeof(err)))
		T_FAIL("read: %s", err);
	unlink(path);
	CHECK_INT(trace__num_events(r), 6);
	for (size_t i = 0; i < trace__num_events(r); i++) {
		const struct trace_event *e = trace__event(r, i);

		if (e->kind == TRACE_KERNEL) {
			nk++;
			CHECK_STR(e->name, "saxpy<float>(int, float*)");
			CHECK_INT(e->stream, 0x5000);
		}
		if (e->kind == TRACE_MEMCPY) {
			CHECK_INT(e->start_ns, 500);
			CHECK_INT(e->dur_ns, 100);
			CHECK_INT(e->bytes, 4096);
			CHECK_INT(e->device, 1);
		}
	}
	CHECK_INT(nk, 2);
	trace__free(t);
	trace__free(r);
}

TEST(partial_overlap_is_clipped)
{
	struct trace *t = trace__new();
	struct trace_event a = {.kind = TRACE_API, .name = "a", .pid = 1, .tid = 1, .start_ns = 0, .dur_ns = 100};
	struct trace_event b = {.kind = TRACE_API, .name = "b", .pid = 1, .tid = 1, .start_ns = 50, .dur_ns = 100};
	char *buf, err[256] = "";
	size_t len;

	CHECK_INT(trace__add(t, &a), 0);
	CHECK_INT(trace__add(t, &b), 0);
	buf = write_trace(t, &len);
	CHECK(buf);
	if (trace__validate(buf, len, err, sizeof(err)))
		T_FAIL("validator: %s", err);
	free(buf);
	trace__free(t);
}

TEST(add_refuses_nonsense)
{
	struct trace *t = trace__new();
	struct trace_event e = {.kind = TRACE_API};

	CHECK_INT(trace__add(t, &e), -EINVAL);
	e.name = "x";
	e.kind = 9;
	CHECK_INT(trace__add(t, &e), -EINVAL);
	CHECK_INT(trace__add(NULL, &e), -EINVAL);
	trace__free(t);
	trace__free(NULL);
}

#define BAD(json, needle)                                                                                              \
	do {                                                                                                           \
		char _e[256] = "";                                                                                     \
		const char *_j = (json);                                                                               \
		if (trace__validate(_j, strlen(_j), _e, sizeof(_e)) != -EINVAL)                                        \
			T_FAIL("accepted: %s", _j);                                                                    \
		if (!strstr(_e, needle))                                                                               \
			T_FAIL("error \"%s\" does not mention \"%s\"", _e, needle);                                    \
	} while (0)

TEST(validator_catches_mistakes)
{
	char err[256];
	const char *ok = "{\"traceEvents\":[{\"ph\":\"B\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":1},"
			 "{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":2}]}";

	CHECK_INT(trace__validate(ok, strlen(ok), err, sizeof(err)), 0);
	BAD("{\"traceEvents\":[", "JSON");
	BAD("{\"events\":[]}", "traceEvents");
	BAD("{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":5,\"dur\":1},"
	    "{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":4,\"dur\":1}]}",
	    "goes back");
	BAD("{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10},"
	    "{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":5,\"dur\":10}]}",
	    "without nesting");
	BAD("{\"traceEvents\":[{\"ph\":\"B\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":1}]}", "never ends");
	BAD("{\"traceEvents\":[{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":1}]}", "without a matching B");
	BAD("{\"traceEvents\":[{\"ph\":\"s\",\"id\":3,\"pid\":1,\"tid\":1,\"ts\":1}]}", "flow id 3");
	BAD("{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":1}]}", "dur");
	BAD("{\"traceEvents\":[{\"ph\":\"Q\",\"ts\":1}]}", "phase");
	BAD("{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":1}]}", "args.name");
	BAD("{\"displayTimeUnit\":\"s\",\"traceEvents\":[]}", "displayTimeUnit");
}

TEST(json_strings)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_t *v;

	CHECK(f);
	/* quotes, backslash, control characters, valid UTF-8, a lone continuation byte, an
	 * overlong encoding and a surrogate */
	json__write_str(f, "a\"b\\c\n\t\x01\x1f é€😀 \x80 \xc0\xaf \xed\xa0\x80 end");
	fclose(f);
	v = json_loadb(buf, len, JSON_DECODE_ANY, NULL);
	CHECK(v);
	CHECK_STR(json_string_value(v), "a\"b\\c\n\t\x01\x1f é€😀 \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd "
					"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd end");
	json_decref(v);
	free(buf);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(written_trace_is_valid_and_complete);
	RUN(read_back);
	RUN(partial_overlap_is_clipped);
	RUN(add_refuses_nonsense);
	RUN(validator_catches_mistakes);
	RUN(json_strings);
	return T_END();
}
