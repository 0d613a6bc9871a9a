// SPDX-License-Identifier: MIT
/* Replays a timeline of CUDA calls against this machine's libcudart: the same threads,
 * each call made at its real offset from the start and followed by a spin for its real
 * duration, the real gaps in between. Call files come from a real --trace timeline
 * (timeline2calls.py) or from tests/workloads/cuda/patterns.py.
 *
 *   replay FILE [--repeat N] [--loop-from SEC] [--speed X] [--closed] [--log FILE]
 *
 * --repeat N      replay the calls from --loop-from on N times, back to back (the part
 *                 before it, such as an idle start, once)
 * --speed X       X times faster (offsets and durations divided by X)
 * --closed        a closed loop: each call follows the previous one's end after the real
 *                 gap, spent spinning (work), instead of waiting for its offset: a thread
 *                 that calls as fast as its own work allows, slowed by whatever slows a call
 * --log FILE      every 5 ms, "CLOCK_REALTIME_NS count_site0 count_site1 ..." (cumulative):
 *                 the calls made in any interval, for a profiler attached in the middle
 * --cupti-model LIB
 *                 launches go through tests/workloads/inject/cupti_model (LIB, loaded at
 *                 start as PyTorch loads its libcupti): a cudaLaunchKernel called back as
 *                 CUPTI does, that takes what an H100's launch takes (the model's time, not
 *                 the call's recorded one), of a kernel of --kernel-ns (2000); the library
 *                 in CUDA_INJECTION64_PATH is initialized at the first CUDA call, as the
 *                 driver does in cuInit. Device time's whole path on a real job's pattern.
 *                 Prints the truth device time's estimate is held to: the launches from
 *                 the first window's period on ("replay: windowed_launches=N every=E"),
 *                 and stays 1.5 s after its last call for gpubpf to read the last window.
 *
 * Open loop (the default): a thread sleeps until a call is due (timer slack 1 ns); a thread
 * behind its schedule calls at once. A thread is created when its first call is due.
 * Each (thread, call) pair of the file names a call site, site_NN, a frame of its own.
 * Prints "replay: calls=N late=L seconds=S" and "replay: site_NN API COUNT" per site.
 * Without a GPU every call fails fast; the probes fire all the same.
 * Start gate: GPUBPF_WL_WAIT=1 (print "ready", wait for a line on stdin). */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "../../../bpf/cupti.h" /* struct dev_config: the library's windows */

#define NOINLINE __attribute__((noinline))
#define MAX_THREADS 16
#define MAX_SITES 32

enum api {
	A_LAUNCH,
	A_LAUNCH_EX,
	A_MEMSET_ASYNC,
	A_MEMCPY_HTOD_ASYNC,
	A_MEMCPY_DTOH_ASYNC,
	A_MEMCPY_DTOD_ASYNC,
	A_MALLOC,
	A_FREE,
	A_STREAM_SYNC,
	A_DEVICE_SYNC,
	A__COUNT,
};

static const char *const api_names[A__COUNT] = {
    "launch", "launch_ex", "memset_async", "memcpy_htod_async", "memcpy_dtoh_async", "memcpy_dtod_async",
    "malloc", "free",	   "stream_sync",  "device_sync",
};

struct call {
	int64_t start_ns, dur_ns;
	uint64_t bytes;
	uint8_t thread, site, api;
};

struct rthread {
	struct call *calls;
	size_t n, cap;
	char name[16];
	pthread_t th;
	int started;
	long late;
};

static struct rthread threads[MAX_THREADS];
static int nthreads;
static int site_api[MAX_SITES];
static _Atomic long site_count[MAX_SITES];
static double speed = 1;
static int closed_loop;
static struct timespec t0;
static volatile int done;
static char host_fn; /* any host address: without a driver a launch fails fast */
static char dev_buf[1];
/* --cupti-model: the model's launch, with the runtime's inside it (what gpubpf's probes see) */
static void (*model_launch)(uint64_t kernel_ns, void (*driver)(void *f));
static uint64_t kernel_ns = 2000;
/* the model's launches per millisecond from the start, and the library's config */
static _Atomic long *launch_ms;
static size_t launch_ms_n;
static const struct dev_config *inj_config;

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t t0_ns(void)
{
	return (int64_t)t0.tv_sec * 1000000000 + t0.tv_nsec;
}

static void spin_until(int64_t end)
{
	while (mono_ns() < end)
		;
}

static void sleep_until(int64_t at)
{
	struct timespec ts = {.tv_sec = at / 1000000000, .tv_nsec = at % 1000000000};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
		;
}

static void runtime_launch(void *f)
{
	dim3 g = {1, 1, 1}, b = {1, 1, 1};

	(void)cudaLaunchKernel(f, g, b, NULL, 0, 0);
}

/* The call itself, through the real libcudart (a launch through the CUPTI model). */
NOINLINE static void do_call(const struct call *c)
{
	dim3 g = {1, 1, 1}, b = {1, 1, 1};
	size_t n = c->bytes ? c->bytes : 1;
	void *p = NULL;

	if (model_launch && (c->api == A_LAUNCH || c->api == A_LAUNCH_EX)) {
		size_t ms = (size_t)((mono_ns() - t0_ns()) / 1000000);

		model_launch(kernel_ns, runtime_launch);
		if (ms < launch_ms_n)
			atomic_fetch_add_explicit(&launch_ms[ms], 1, memory_order_relaxed);
		return;
	}
	switch (c->api) {
	case A_LAUNCH:
		(void)cudaLaunchKernel(&host_fn, g, b, NULL, 0, 0);
		break;
	case A_LAUNCH_EX: {
		cudaLaunchConfig_t cfg = {.gridDim = g, .blockDim = b};

		(void)cudaLaunchKernelExC(&cfg, &host_fn, NULL);
		break;
	}
	case A_MEMSET_ASYNC:
		(void)cudaMemsetAsync(dev_buf, 0, n, 0);
		break;
	case A_MEMCPY_HTOD_ASYNC:
		(void)cudaMemcpyAsync(dev_buf, &host_fn, n, cudaMemcpyHostToDevice, 0);
		break;
	case A_MEMCPY_DTOH_ASYNC:
		(void)cudaMemcpyAsync(&host_fn, dev_buf, n, cudaMemcpyDeviceToHost, 0);
		break;
	case A_MEMCPY_DTOD_ASYNC:
		(void)cudaMemcpyAsync(dev_buf, dev_buf, n, cudaMemcpyDeviceToDevice, 0);
		break;
	case A_MALLOC:
		(void)cudaMalloc(&p, n);
		break;
	case A_FREE:
		(void)cudaFree(dev_buf);
		break;
	case A_STREAM_SYNC:
		(void)cudaStreamSynchronize(0);
		break;
	case A_DEVICE_SYNC:
		(void)cudaDeviceSynchronize();
		break;
	}
}

/* One function per call site: the frame that tells sites apart in a profile. */
#define SITE(nn)                                                                                                       \
	NOINLINE static void site_##nn(const struct call *c)                                                           \
	{                                                                                                              \
		do_call(c);                                                                                            \
		__asm__ volatile("" ::: "memory");                                                                     \
	}
SITE(00)
SITE(01)
SITE(02)
SITE(03)
SITE(04)
SITE(05)
SITE(06)
SITE(07)
SITE(08)
SITE(09)
SITE(10)
SITE(11)
SITE(12)
SITE(13)
SITE(14)
SITE(15)
SITE(16)
SITE(17)
SITE(18)
SITE(19)
SITE(20)
SITE(21)
SITE(22)
SITE(23)
SITE(24)
SITE(25)
SITE(26)
SITE(27)
SITE(28)
SITE(29)
SITE(30)
SITE(31)

static void (*const sites[MAX_SITES])(const struct call *) = {
    site_00, site_01, site_02, site_03, site_04, site_05, site_06, site_07, site_08, site_09, site_10,
    site_11, site_12, site_13, site_14, site_15, site_16, site_17, site_18, site_19, site_20, site_21,
    site_22, site_23, site_24, site_25, site_26, site_27, site_28, site_29, site_30, site_31,
};

static void *run_thread(void *arg)
{
	struct rthread *t = arg;
	int64_t base = t0_ns(), prev_end = -1;

	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	pthread_setname_np(pthread_self(), t->name);
	for (size_t i = 0; i < t->n; i++) {
		const struct call *c = &t->calls[i];
		int64_t due = base + (int64_t)((double)c->start_ns / speed), now = mono_ns();

		if (closed_loop && prev_end >= 0) {
			/* the real gap after the previous call, as work */
			int64_t gap = c->start_ns - t->calls[i - 1].start_ns - t->calls[i - 1].dur_ns;

			spin_until(now + (int64_t)((double)(gap > 0 ? gap : 0) / speed));
		} else if (due > now) {
			sleep_until(due);
		} else if (now - due > 1000000) {
			t->late++;
		}
		sites[c->site](c);
		atomic_fetch_add_explicit(&site_count[c->site], 1, memory_order_relaxed);
		prev_end = mono_ns();
		/* a launch through the model took the model's time */
		if (!model_launch || (c->api != A_LAUNCH && c->api != A_LAUNCH_EX))
			prev_end += (int64_t)((double)c->dur_ns / speed);
		spin_until(prev_end);
	}
	return NULL;
}

static void *run_log(void *arg)
{
	FILE *f = arg;
	struct timespec ts;

	while (!done) {
		clock_gettime(CLOCK_REALTIME, &ts);
		fprintf(f, "%lld", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
		for (int s = 0; s < MAX_SITES; s++)
			fprintf(f, " %ld", atomic_load_explicit(&site_count[s], memory_order_relaxed));
		fputc('\n', f);
		usleep(5000);
	}
	return NULL;
}

static int add_call(const struct call *c)
{
	struct rthread *t = &threads[c->thread];

	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct call *nc = realloc(t->calls, cap * sizeof(*nc));

		if (!nc)
			return -1;
		t->calls = nc;
		t->cap = cap;
	}
	t->calls[t->n++] = *c;
	return 0;
}

static int load(const char *path, int repeat, double loop_from)
{
	FILE *f = fopen(path, "r");
	char line[256], name[16], api[32];
	struct call *all = NULL;
	size_t n = 0, cap = 0;
	int64_t loop_ns = (int64_t)(loop_from * 1e9), last_end = 0, first_loop = -1;
	int idx;

	if (!f) {
		perror(path);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		long long start, dur;
		unsigned long long bytes;
		int th, site, a;

		if (sscanf(line, "thread %d %15s", &idx, name) == 2 && idx >= 0 && idx < MAX_THREADS) {
			snprintf(threads[idx].name, sizeof(threads[idx].name), "%s", name);
			if (idx >= nthreads)
				nthreads = idx + 1;
			continue;
		}
		if (sscanf(line, "call %d %d %31s %lld %lld %llu", &th, &site, api, &start, &dur, &bytes) != 6)
			continue;
		for (a = 0; a < A__COUNT && strcmp(api, api_names[a]); a++)
			;
		if (a == A__COUNT || th < 0 || th >= MAX_THREADS || site < 0 || site >= MAX_SITES || start < 0 ||
		    dur < 0) {
			fprintf(stderr, "replay: bad line: %s", line);
			fclose(f);
			free(all);
			return -1;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 4096;
			all = realloc(all, cap * sizeof(*all));
			if (!all) {
				fclose(f);
				return -1;
			}
		}
		all[n++] = (struct call){.start_ns = start,
					 .dur_ns = dur,
					 .bytes = bytes,
					 .thread = (uint8_t)th,
					 .site = (uint8_t)site,
					 .api = (uint8_t)a};
		site_api[site] = a;
		if (th >= nthreads)
			nthreads = th + 1;
		if (start + dur > last_end)
			last_end = start + dur;
		if (start >= loop_ns && first_loop < 0)
			first_loop = start;
	}
	fclose(f);
	if (!n) {
		fprintf(stderr, "replay: no calls in %s\n", path);
		return -1;
	}
	/* one repetition lasts from the first looped call to the end of the last call, plus
	 * the gap that led into the first looped call */
	for (int r = 0; r < repeat; r++) {
		int64_t shift = first_loop < 0 ? 0 : (int64_t)r * (last_end - first_loop + 1000000);

		for (size_t i = 0; i < n; i++) {
			struct call c = all[i];

			if (r > 0 && c.start_ns < loop_ns)
				continue;
			c.start_ns += shift;
			if (add_call(&c)) {
				free(all);
				return -1;
			}
		}
	}
	free(all);
	return 0;
}

/* --cupti-model: the model loaded as PyTorch loads its libcupti, and the injection
 * library started as the driver starts it in cuInit. */
static int start_model(const char *lib)
{
	const char *inj = getenv("CUDA_INJECTION64_PATH");
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL), *ih;
	int (*init)(void);

	model_launch = h ? (void (*)(uint64_t, void (*)(void *)))dlsym(h, "cupti_model_launch") : NULL;
	if (!model_launch) {
		fprintf(stderr, "replay: cannot use the CUPTI model %s: %s\n", lib, dlerror());
		return -1;
	}
	if (!inj || !*inj)
		return 0; /* the job alone */
	/* the model is the driver of the library's own call, which finalizes CUPTI */
	setenv("GPUBPF_INJECT_DRIVER_LIB", lib, 1);
	ih = dlopen(inj, RTLD_NOW);
	init = ih ? (int (*)(void))dlsym(ih, "InitializeInjection") : NULL;
	if (!init || init() != 1) {
		fprintf(stderr, "replay: cannot start the injection library %s: %s\n", inj, ih ? "" : dlerror());
		return -1;
	}
	inj_config = dlsym(ih, "gpubpf_inject_config");
	return 0;
}

/* The launches from the first window's period on (gpubpf's estimate covers those; the
 * cost measurement's, before it, it counts once). */
static void windowed_truth(void)
{
	const struct dev_win *first = inj_config ? &inj_config->win[1] : NULL;
	double from = first && first->id == 1 ? (double)first->period * inj_config->period_ms / 1e3 : 1e300;
	long since = 0;

	for (size_t i = 0; i < launch_ms_n; i++)
		if ((double)t0_ns() / 1e9 + (double)(i + 1) / 1e3 > from)
			since += launch_ms[i];
	printf("replay: windowed_launches=%ld every=%u\n", since, inj_config ? (unsigned)inj_config->every : 0);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *path = NULL, *log_path = NULL, *model_path = NULL;
	int repeat = 1, started = 0;
	double loop_from = 0;
	pthread_t logger;
	FILE *logf = NULL;
	long calls = 0, late = 0;
	char line[64];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--loop-from") && i + 1 < argc)
			loop_from = atof(argv[++i]);
		else if (!strcmp(argv[i], "--speed") && i + 1 < argc)
			speed = atof(argv[++i]);
		else if (!strcmp(argv[i], "--log") && i + 1 < argc)
			log_path = argv[++i];
		else if (!strcmp(argv[i], "--closed"))
			closed_loop = 1;
		else if (!strcmp(argv[i], "--cupti-model") && i + 1 < argc)
			model_path = argv[++i];
		else if (!strcmp(argv[i], "--kernel-ns") && i + 1 < argc)
			kernel_ns = strtoull(argv[++i], NULL, 10);
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else {
			fprintf(stderr, "usage: replay FILE [--repeat N] [--loop-from SEC] [--speed X] [--closed] "
					"[--log FILE] [--cupti-model LIB [--kernel-ns N]]\n");
			return 2;
		}
	}
	if (!path || repeat < 1 || speed <= 0 || load(path, repeat, loop_from))
		return 2;
	if (model_path) {
		int64_t end = 0;

		for (int i = 0; i < nthreads; i++)
			if (threads[i].n && threads[i].calls[threads[i].n - 1].start_ns > end)
				end = threads[i].calls[threads[i].n - 1].start_ns;
		launch_ms_n = (size_t)((double)end / speed / 1e6) + 60000;
		launch_ms = calloc(launch_ms_n, sizeof(*launch_ms));
		if (!launch_ms || start_model(model_path))
			return 2;
	}
	(void)cudaGetLastError(); /* lazy runtime start-up before the schedule */
	if (getenv("GPUBPF_WL_WAIT") && !strcmp(getenv("GPUBPF_WL_WAIT"), "1")) {
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 2;
	}
	if (log_path) {
		logf = fopen(log_path, "w");
		if (!logf || pthread_create(&logger, NULL, run_log, logf)) {
			perror(log_path);
			return 2;
		}
	}
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Each thread starts when its first call is due (a thread that starts late). */
	for (int i = 0; i < nthreads; i++)
		started += !threads[i].n; /* named but without calls */
	while (started < nthreads) {
		int next = -1;

		for (int i = 0; i < nthreads; i++)
			if (!threads[i].started && threads[i].n &&
			    (next < 0 || threads[i].calls[0].start_ns < threads[next].calls[0].start_ns))
				next = i;
		if (next < 0)
			break;
		if (!closed_loop)
			sleep_until(t0_ns() + (int64_t)((double)threads[next].calls[0].start_ns / speed) - 200000);
		if (pthread_create(&threads[next].th, NULL, run_thread, &threads[next])) {
			perror("pthread_create");
			return 1;
		}
		threads[next].started = 1;
		started++;
	}
	for (int i = 0; i < nthreads; i++) {
		if (threads[i].started)
			pthread_join(threads[i].th, NULL);
		late += threads[i].late;
	}
	done = 1;
	if (logf) {
		pthread_join(logger, NULL);
		fclose(logf);
	}
	for (int s = 0; s < MAX_SITES; s++)
		calls += site_count[s];
	printf("replay: calls=%ld late=%ld threads=%d seconds=%.3f\n", calls, late, nthreads,
	       (double)(mono_ns() - t0_ns()) / 1e9);
	for (int s = 0; s < MAX_SITES; s++)
		if (site_count[s])
			printf("replay: site_%02d %s %ld\n", s, api_names[site_api[s]], site_count[s]);
	if (inj_config) {
		windowed_truth();
		sleep(1);
		usleep(500000);
	}
	return 0;
}
