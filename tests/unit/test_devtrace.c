// SPDX-License-Identifier: MIT
/* Device tracks (userspace/trace/devtrace.c) and the call lookup under them (trace.c): launches
 * joined to the traced call that holds them, launches no call holds given a slice of
 * their own, the bound, and the written trace's flows checked by the validator and
 * jansson. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "devtrace.h"
#include "test.h"
#include "trace.h"

static int add_call(struct trace *t, const char *name, int pid, int tid, uint64_t start, uint64_t dur)
{
	struct trace_event e = {
	    .kind = TRACE_API, .name = name, .pid = pid, .tid = tid, .start_ns = start, .dur_ns = dur};

	return trace__add(t, &e);
}

static struct trace_event kernel(int pid, uint64_t start, uint64_t dur)
{
	struct trace_event e = {.kind = TRACE_KERNEL,
				.name = "saxpy",
				.pid = pid,
				.device = 1,
				.stream = 7,
				.start_ns = start,
				.dur_ns = dur};
	return e;
}

TEST(find_call)
{
	struct trace *t = trace__new();

	CHECK(t != NULL);
	/* thread 11: [100, 200], [300, 400] holding [310, 320]; thread 12: [150, 250] */
	CHECK_INT(add_call(t, "a", 10, 11, 100, 100), 0);
	CHECK_INT(add_call(t, "b", 10, 11, 300, 100), 0);
	CHECK_INT(add_call(t, "b-inner", 10, 11, 310, 10), 0);
	CHECK_INT(add_call(t, "c", 10, 12, 150, 100), 0);
	CHECK(trace__find_call(t, 10, 11, 150) == 0);
	CHECK(trace__find_call(t, 10, 11, 200) == 0); /* the end is inside */
	CHECK(trace__find_call(t, 10, 11, 250) == -1);
	CHECK(trace__find_call(t, 10, 11, 315) == 2); /* the innermost */
	CHECK(trace__find_call(t, 10, 11, 305) == 1);
	CHECK(trace__find_call(t, 10, 12, 150) == 3);
	CHECK(trace__find_call(t, 10, 13, 150) == -1);
	CHECK(trace__find_call(t, 99, 11, 150) == -1);
	/* the index follows later adds */
	CHECK_INT(add_call(t, "d", 10, 11, 500, 10), 0);
	CHECK(trace__find_call(t, 10, 11, 505) == 4);
	trace__free(t);
}

TEST(link_and_write)
{
	struct trace *t = trace__new();
	struct devtrace *d = devtrace__new(t, 100);
	struct devtrace_stats st;
	struct trace_event k1 = kernel(10, 1000, 50), k2 = kernel(10, 2000, 60), k3 = kernel(10, 3000, 70);
	char *buf = NULL, err[256] = "";
	size_t len = 0;
	FILE *f;
	json_t *doc;
	int s = 0, fl = 0, dev_x = 0;

	CHECK(t && d);
	if (!t || !d)
		return;
	CHECK_INT(add_call(t, "cudaLaunchKernel", 10, 11, 100, 100), 0);
	/* launch 5 inside the traced call; launch 6 where no call was traced; launch 7
	 * never ran anything on the device */
	CHECK_INT(devtrace__launch(d, 10, 11, 5, 150, "cudaLaunchKernel"), 0);
	CHECK_INT(devtrace__launch(d, 10, 11, 6, 500, "cuLaunchKernel"), 0);
	CHECK_INT(devtrace__launch(d, 10, 11, 7, 600, NULL), 0);
	CHECK_INT(devtrace__record(d, &k1, 5), 0);
	CHECK_INT(devtrace__record(d, &k2, 6), 0);
	CHECK_INT(devtrace__record(d, &k3, 6), 0); /* a second kernel of launch 6 (a graph) */
	CHECK_INT(devtrace__link(d), 0);
	devtrace__stats(d, &st);
	CHECK(st.records == 3 && st.dropped == 0 && st.linked == 1 && st.own_slices == 1);
	CHECK(trace__event(t, 0)->correlation == devtrace__corr(10, 5));
	CHECK(trace__event(t, 1)->correlation == devtrace__corr(10, 5));
	CHECK(trace__num_events(t) == 5); /* call, 3 kernels, one own slice */
	CHECK_STR(trace__event(t, 4)->name, "cuLaunchKernel");
	CHECK(trace__event(t, 4)->kind == TRACE_LAUNCH);
	CHECK(trace__event(t, 4)->start_ns == 500 && trace__event(t, 4)->dur_ns == 0);

	f = open_memstream(&buf, &len);
	CHECK(f && trace__write(t, f) == 0);
	if (f)
		fclose(f);
	CHECK(buf && trace__validate(buf, len, err, sizeof(err)) == 0);
	if (err[0])
		printf("  validator: %s\n", err);
	doc = buf ? json_loads(buf, 0, NULL) : NULL;
	CHECK(doc != NULL);
	if (doc) {
		json_t *evs = json_object_get(doc, "traceEvents"), *e;
		size_t i;

		json_array_foreach(evs, i, e)
		{
			const char *ph = json_string_value(json_object_get(e, "ph"));

			if (!ph)
				continue;
			s += ph[0] == 's';
			fl += ph[0] == 'f';
			dev_x += ph[0] == 'X' && json_integer_value(json_object_get(e, "tid")) >= 0x40000000;
		}
		json_decref(doc);
	}
	CHECK(s == 2 && fl == 2); /* one arrow per launch with device work */
	CHECK(dev_x == 3);
	free(buf);
	devtrace__free(d);
	trace__free(t);
}

TEST(bound)
{
	struct trace *t = trace__new();
	struct devtrace *d = devtrace__new(t, 2);
	struct devtrace_stats st;
	struct trace_event k = kernel(10, 1000, 50);

	CHECK(t && d);
	if (!t || !d)
		return;
	CHECK_INT(add_call(t, "cudaLaunchKernel", 10, 11, 100, 100), 0);
	CHECK_INT(devtrace__launch(d, 10, 11, 5, 150, NULL), 0);
	CHECK_INT(devtrace__launch(d, 10, 11, 6, 900, NULL), 0);
	for (int i = 0; i < 3; i++)
		CHECK_INT(devtrace__record(d, &k, 5 + (i > 0)), 0);
	CHECK_INT(devtrace__link(d), 0);
	devtrace__stats(d, &st);
	/* one record fits; the others and launch 6's own slice are past the bound */
	CHECK(st.records == 1 && st.dropped == 2 && st.own_slices == 0);
	CHECK(trace__num_events(t) == 2);
	devtrace__free(d);
	trace__free(t);
}

/* The recorded real timeline (tests/fixtures/gpu/, from an H100): every CUDA call of
 * a two-thread PyTorch loop, and every kernel and copy with the correlation id of its
 * launch. There, PyTorch's runtime entry points were not traced, only the driver calls
 * they make, and 21,708 of 22,346 launches got slices of their own. Taken apart and
 * joined again, every launch must find the call that made it. */
#define REAL_TIMELINE "tests/fixtures/gpu/train-timeline-shared-cupti.trace.json.gz"

static int gunzip_to(const char *gz, const char *out)
{
	gzFile in = gzopen(gz, "rb");
	FILE *f = fopen(out, "wb");
	char buf[65536];
	int n, err = 0;

	if (!in || !f)
		err = -ENOENT;
	while (!err && (n = gzread(in, buf, sizeof(buf))) > 0)
		if (fwrite(buf, 1, (size_t)n, f) != (size_t)n)
			err = -EIO;
	if (in)
		gzclose(in);
	if (f)
		fclose(f);
	return err;
}

TEST(real_timeline_every_launch_joined)
{
	char tmp[] = "/tmp/gpubpf-timeline-XXXXXX", why[256] = "";
	struct trace *orig = NULL, *t = trace__new();
	struct devtrace *d = devtrace__new(t, 10000000);
	struct devtrace_stats st;
	size_t launches = 0, records = 0, joined = 0;
	int fd;

	if (access(REAL_TIMELINE, R_OK))
		SKIP("%s is missing", REAL_TIMELINE);
	CHECK(t && d);
	fd = mkstemp(tmp);
	CHECK(fd >= 0);
	close(fd);
	CHECK_INT(gunzip_to(REAL_TIMELINE, tmp), 0);
	CHECK_INT(trace__read_file(tmp, &orig, why, sizeof(why)), 0);
	unlink(tmp);
	for (size_t i = 0; i < trace__num_events(orig); i++) {
		struct trace_event e = *trace__event(orig, i);
		uint32_t corr = (uint32_t)e.correlation;

		switch (e.kind) {
		case TRACE_API:
			/* the launches joined at recording time: the callback was inside */
			if (e.correlation) {
				CHECK_INT(devtrace__launch(d, e.pid, e.tid, corr, e.start_ns + e.dur_ns / 2, e.name),
					  0);
				launches++;
			}
			e.correlation = 0;
			CHECK_INT(trace__add(t, &e), 0);
			break;
		case TRACE_LAUNCH:
			CHECK_INT(devtrace__launch(d, e.pid, e.tid, corr, e.start_ns, e.name), 0);
			launches++;
			break;
		case TRACE_KERNEL:
		case TRACE_MEMCPY:
			CHECK_INT(devtrace__record(d, &e, corr), 0);
			records++;
			break;
		}
	}
	CHECK_INT(launches, 22346);
	CHECK_INT(records, 20416 + 1930);
	CHECK_INT(devtrace__link(d), 0);
	devtrace__stats(d, &st);
	CHECK_INT(st.own_slices, 0);
	CHECK_INT(st.linked, 22346);
	/* each launch joined to a call of its own kind (cudaMemsetAsync: cuMemset...) */
	for (size_t i = 0; i < trace__num_events(t); i++) {
		const struct trace_event *e = trace__event(t, i);

		if (e->kind != TRACE_API || !e->correlation)
			continue;
		joined++;
		CHECK(!strncmp(e->name, "cuLaunch", 8) || !strncmp(e->name, "cuMemset", 8) ||
		      !strncmp(e->name, "cuMemcpy", 8) || !strncmp(e->name, "cudaLaunch", 10));
	}
	CHECK_INT(joined, 22346);
	devtrace__free(d);
	trace__free(t);
	trace__free(orig);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(find_call);
	RUN(link_and_write);
	RUN(bound);
	RUN(real_timeline_every_launch_joined);
	return T_END();
}
