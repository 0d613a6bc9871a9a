// SPDX-License-Identifier: MIT
/* The agent's pure parts: reading only the named variables out of an environ stream
 * (userspace/cmd/agent_labels.c), container ids and cgroup paths, service names, and the
 * per-process cut of the model (userspace/cmd/agent_cut.c), read back with gpubpf's own pprof
 * reader. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_cut.h"
#include "agent_labels.h"
#include "metrics.h"
#include "pprof_read.h"
#include "profile.h"
#include "test.h"

static int environ_fd(const char *data, size_t len)
{
	char path[] = "/tmp/gpubpf-environ-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	unlink(path);
	if (write(fd, data, len) != (ssize_t)len)
		return -1;
	lseek(fd, 0, SEEK_SET);
	return fd;
}

TEST(environ_named_only)
{
	static const char *const names[] = {"OTEL_SERVICE_NAME", "RANK", "LOCAL_RANK", "WORLD_SIZE"};
	char vals[4][LABELS_VALUE_MAX], big[2000];
	char env[4096];
	size_t off = 0;
	int fd;

	/* a long secret before, a variable whose name only starts like one of ours, a
	 * value past the bound, and a last entry cut without its NUL */
	memset(big, 'S', sizeof(big));
	off += (size_t)sprintf(env + off, "AWS_SECRET=%.*s", 600, big) + 1;
	off += (size_t)sprintf(env + off, "RANKING=9") + 1;
	off += (size_t)sprintf(env + off, "RANK=3") + 1;
	off += (size_t)sprintf(env + off, "OTEL_SERVICE_NAME=%.*s", 400, big) + 1;
	off += (size_t)sprintf(env + off, "LOCAL_RANK=1") + 1;
	off += (size_t)sprintf(env + off, "WORLD_SIZE=8");
	fd = environ_fd(env, off);
	CHECK(fd >= 0);
	CHECK_INT(labels__environ(fd, 1 << 20, names, 4, vals), 3);
	CHECK_STR(vals[1], "3");
	CHECK_STR(vals[2], "1");
	CHECK_STR(vals[3], ""); /* no NUL: maybe cut, not trusted */
	CHECK_INT(strlen(vals[0]), LABELS_VALUE_MAX - 1);
	CHECK(vals[0][0] == 'S');
	/* the bound: nothing past MAX bytes is looked at */
	lseek(fd, 0, SEEK_SET);
	CHECK_INT(labels__environ(fd, 629, names, 4, vals), 1);
	CHECK_STR(vals[1], "3");
	CHECK_STR(vals[2], "");
	close(fd);
	CHECK_INT(labels__environ(-1, 100, names, 4, vals), -EBADF);
}

TEST(containers)
{
	const char *id = "3f2a9c0b1d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";
	char cg[1024], out[16];

	snprintf(cg, sizeof(cg), "0::/system.slice/docker-%s.scope\n", id);
	CHECK(labels__container(cg, out, sizeof(out)));
	CHECK_STR(out, "3f2a9c0b1d4e");
	snprintf(cg, sizeof(cg), "12:memory:/docker/%s\n0::/\n", id);
	CHECK(labels__container(cg, out, sizeof(out)));
	CHECK_STR(out, "3f2a9c0b1d4e");
	snprintf(cg, sizeof(cg),
		 "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/"
		 "cri-containerd-%s.scope",
		 id);
	CHECK(labels__container(cg, out, sizeof(out)));
	CHECK_STR(out, "3f2a9c0b1d4e");
	snprintf(cg, sizeof(cg), "0::/kubepods/besteffort/pod0a1b/%s\n", id);
	CHECK(labels__container(cg, out, sizeof(out)));
	snprintf(cg, sizeof(cg), "0::/machine.slice/libpod-%s.scope/container\n", id);
	CHECK(labels__container(cg, out, sizeof(out)));
	CHECK(!labels__container("0::/user.slice/user-0.slice/session-1.scope\n", out, sizeof(out)));
	CHECK(!labels__container("4:memory:/process_api/22b18576e64824cc03e56429ec1dfa79\n0::/\n", out, sizeof(out)));
	/* 65 hex digits, or upper case: not an id */
	snprintf(cg, sizeof(cg), "0::/docker/%sa\n", id);
	CHECK(!labels__container(cg, out, sizeof(out)));
	CHECK(!labels__container("0::/docker/3F2A9C0B1D4E5F60718293A4B5C6D7E8F90A1B2C3D4E5F60718293A4B5C6D7E8\n", out,
				 sizeof(out)));
	CHECK(!labels__container("", out, sizeof(out)));
}

TEST(cgroup_paths)
{
	char out[256];

	CHECK(labels__cgroup_path("9:name=systemd:/a\n0::/jobs/train\n", out, sizeof(out)));
	CHECK_STR(out, "/jobs/train");
	CHECK(labels__cgroup_path("9:name=systemd:/user.slice\n4:memory:/x\n", out, sizeof(out)));
	CHECK_STR(out, "/user.slice");
	CHECK(!labels__cgroup_path("4:memory:/x\n", out, sizeof(out)));
}

static void service_of(const char *exe, const char *const *argv, char *out, size_t cap)
{
	char cmd[512];
	size_t n = 0;

	for (int i = 0; argv[i]; i++)
		n += (size_t)sprintf(cmd + n, "%s", argv[i]) + 1;
	labels__service(exe, cmd, n, out, cap);
}

TEST(services)
{
	char out[128];

	service_of("/usr/bin/python3.11",
		   (const char *const[]){"python3", "-u", "/opt/job/train.py", "--lr", "1", NULL}, out, sizeof(out));
	CHECK_STR(out, "train.py");
	service_of("/usr/bin/python3", (const char *const[]){"python3", "-m", "torch.distributed.run", "x.py", NULL},
		   out, sizeof(out));
	CHECK_STR(out, "torch.distributed.run");
	service_of("/usr/bin/python3", (const char *const[]){"python3", "-W", "ignore", "-X", "dev", "serve.py", NULL},
		   out, sizeof(out));
	CHECK_STR(out, "serve.py");
	service_of("/usr/bin/python3", (const char *const[]){"python3", "-c", "import x", NULL}, out, sizeof(out));
	CHECK_STR(out, "python3");
	service_of("/opt/app/bin/trainer", (const char *const[]){"trainer", "--config", "a.yaml", NULL}, out,
		   sizeof(out));
	CHECK_STR(out, "trainer");
	labels__service(NULL, "", 0, out, sizeof(out));
	CHECK_STR(out, "");
}

/* Names for the model's addresses, as the symbolizer would give them. */
static int fake_resolve(void *ctx, const struct prof_location *loc, struct sym_result *out)
{
	static char names[8][16];
	int i = (int)(loc->addr & 7);

	(void)ctx;
	snprintf(names[i], sizeof(names[i]), "func_%d", i);
	out->module = "/bin/job";
	out->resolved = true;
	out->nframes = 1;
	out->frames[0].func = names[i];
	return 0;
}

TEST(cut_per_process)
{
	struct profile *p = profile__new(), *back = NULL;
	struct cut_set cs = {0};
	struct cut_meta m = {.time_ns = 1700000000123456789LL, .duration_ns = 15000000000LL};
	struct pprof_read_info info;
	char *buf = NULL;
	size_t len = 0;
	int64_t total = 0;

	CHECK(p);
	CHECK_INT(profile__add_type(p, "samples", "count"), 0);
	CHECK_INT(profile__add_type(p, "cuda_launches", "count"), 1);
	for (int pid = 300; pid >= 100; pid -= 100) {
		for (int tid = 0; tid < 3; tid++) {
			struct prof_frame f[3] = {
			    {.kind = PROF_FRAME_SYNTH, .name = "saxpy(float*)"},
			    {.kind = PROF_FRAME_USER, .addr = (uint64_t)(pid + 1)},
			    {.kind = PROF_FRAME_USER, .addr = (uint64_t)(pid + 2 + (tid == 2))},
			};
			char tids[16];
			struct prof_label l[4] = {{.key = "pid", .str = "x"},
						  {.key = "tid", .str = tids},
						  {.key = "thread_name", .str = tid < 2 ? "worker" : "main"},
						  {.key = "cuda_stream", .str = "0x7f00"}};
			int64_t v[2] = {1, pid};

			snprintf(tids, sizeof(tids), "%d", pid + tid);
			CHECK_INT(profile__add_sample(p, pid, pid + tid, f, 3, l, 4, v), 0);
		}
	}
	CHECK_INT(profile__symbolize_with(p, fake_resolve, NULL), 0);
	CHECK_INT(agent_cut__group(p, &cs), 0);
	CHECK_INT(cs.npids, 3);
	CHECK_INT(cs.pids[0], 100);
	CHECK_INT(cs.pids[2], 300);
	CHECK_INT(cs.start[1] - cs.start[0], 3);
	for (size_t i = cs.start[1]; i < cs.start[2]; i++)
		CHECK_INT(profile__sample(p, cs.idx[i])->pid, 200);
	m.comments[m.ncomments++] = "gpubpf agent: svc{pid=200}";
	CHECK_INT(agent_cut__pprof(p, cs.idx + cs.start[1], cs.start[2] - cs.start[1], &m, &buf, &len), 0);
	CHECK(buf && len > 20 && (unsigned char)buf[0] == 0x1f);
	back = pprof_read__buf(buf, len, &info);
	CHECK(back);
	/* pid 200's three threads: two named "worker" merge, "main" stays */
	CHECK_INT(profile__num_samples(back), 2);
	CHECK_INT(profile__total(back, 0), 3);
	CHECK_INT(profile__total(back, 1), 600);
	/* the synthetic leaf, pid 200's caller and its two leaves; none of the others' */
	CHECK_INT(profile__num_locations(back), 4);
	for (size_t i = 0; i < profile__num_samples(back); i++) {
		const struct prof_sample *s = profile__sample(back, i);

		for (uint32_t j = 0; j < s->nlabels; j++) {
			total++;
			CHECK(!strcmp(s->labels[j].key, "thread_name") ||
			      (!strcmp(s->labels[j].key, "pid") && !s->labels[j].str && s->labels[j].num == 200));
		}
	}
	CHECK_INT(total, 4);
	{
		int64_t t, d;

		profile__time(back, &t, &d);
		CHECK_INT(t, m.time_ns);
		CHECK_INT(d, m.duration_ns);
		CHECK_STR(profile__comment(back, 0), "gpubpf agent: svc{pid=200}");
	}
	/* the next interval's model: the same types, no samples */
	{
		struct profile *next = agent_cut__renew(p);
		const char *t, *u;

		CHECK(next);
		CHECK_INT(profile__num_types(next), 2);
		profile__type(next, 1, &t, &u);
		CHECK_STR(t, "cuda_launches");
		CHECK_INT(profile__num_samples(next), 0);
		profile__free(next);
	}
	free(buf);
	profile__free(back);
	agent_cut__set_free(&cs);
	profile__free(p);
}

TEST(cut_empty)
{
	struct profile *p = profile__new();
	struct cut_set cs;

	CHECK(p);
	CHECK_INT(profile__add_type(p, "samples", "count"), 0);
	CHECK_INT(agent_cut__group(p, &cs), 0);
	CHECK_INT(cs.npids, 0);
	agent_cut__set_free(&cs);
	profile__free(p);
}

TEST(metrics_loopback_only)
{
	struct agent_stats st = {0};
	char buf[8192];
	int fam, port;

	CHECK_INT(metrics__parse("9100", &fam, &port), 0);
	CHECK_INT(port, 9100);
	CHECK_INT(metrics__parse("127.0.0.1:9101", &fam, &port), 0);
	CHECK_INT(metrics__parse("localhost:9102", &fam, &port), 0);
	CHECK_INT(metrics__parse("[::1]:9103", &fam, &port), 0);
	CHECK_INT(port, 9103);
	CHECK_INT(metrics__parse("0.0.0.0:9100", &fam, &port), -EINVAL);
	CHECK_INT(metrics__parse("10.1.2.3:9100", &fam, &port), -EINVAL);
	CHECK_INT(metrics__parse("[::]:9100", &fam, &port), -EINVAL);
	CHECK_INT(metrics__parse("70000", &fam, &port), -EINVAL);
	CHECK_INT(metrics__parse("", &fam, &port), -EINVAL);
	atomic_store(&st.sent, 42);
	atomic_store(&st.overhead_ppm, 4321);
	CHECK(metrics__format(&st, buf, sizeof(buf)) > 0);
	CHECK(strstr(buf, "\ngpubpf_agent_profiles_sent_total 42\n"));
	CHECK(strstr(buf, "# TYPE gpubpf_agent_spool_profiles gauge\n"));
	CHECK(strstr(buf, "gpubpf_agent_estimated_overhead_ratio 0.004321\n"));
	CHECK(strstr(buf, "gpubpf_agent_session_renewals_total 0\n"));
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(environ_named_only);
	RUN(containers);
	RUN(cgroup_paths);
	RUN(services);
	RUN(cut_per_process);
	RUN(cut_empty);
	RUN(metrics_loopback_only);
	return T_END();
}
