// SPDX-License-Identifier: MIT
/* Drives libgpubpf_inject.so without a GPU, through its production path.
 *
 *   producer synth [REPEAT]   attach with the synthetic backend (no CUPTI), wait for a
 *                             gpubpf session, then deliver CUPTI callbacks and CUPTI
 *                             activity records (real CUpti_* structs) from known call sites
 *   producer short [REPEAT]   REPEAT x (site_kernel_a, site_kernel_b) at once after start,
 *                             their records held by "CUPTI" until the exit's flush
 *   producer windows SECONDS  device time in windows: launches (1000 ns kernels) in bursts
 *                             from two threads, for SECONDS after a session attached; a
 *                             launch takes 5 us, 0.6 us more while "CUPTI" calls back and
 *                             3 us more while it has activity on (as a real one: 4.2 us,
 *                             0.6-1.6 and ~2.7 more on an H100), whose records
 *                             exist only then, and 5 us of work follow it; prints the
 *                             truth: launches, kernel_ns, and both from the first window's
 *                             period on (windowed_launches, windowed_kernel_ns)
 *   producer loop SECONDS     one thread launching back to back (the same launches) for
 *                             SECONDS after a session attached (PRODUCER_ALONE=1: at once,
 *                             no session: the job alone); prints launches_per_sec
 *   producer model SECONDS KERNEL_NS LIBCUPTI_MODEL [driver]
 *                             the CUPTI backend against tests/workloads/inject/cupti_model
 *                             (loaded first, as PyTorch loads its libcupti): one thread
 *                             launching kernels of KERNEL_NS back to back (cudaLaunchKernel;
 *                             with "driver", cuLaunchKernel alone) for SECONDS after
 *                             a session attached (PRODUCER_ALONE=1: at once, no session);
 *                             prints launches, launches_per_sec, the windowed truth as
 *                             "windows" does, and the EVERY gpubpf asked for last
 *   producer idle SECONDS [LIBCUPTI]
 *                             what the driver does: InitializeInjection() with the CUPTI
 *                             backend, then CPU work; the job must run on, session or not.
 *                             With LIBCUPTI, that library is loaded first, as PyTorch does
 *
 * synth's expected values are printed on one line, "producer: key=value ...", and the
 * end-to-end test reads them from there (never from its own constants):
 *   site_kernel_a: REPEAT cudaLaunchKernel (runtime, with the nested cuLaunchKernel that
 *                  the runtime makes, under another correlation id), kernel _Z8kernel_aPfi
 *                  of 1000 ns on device 0 stream 7; its records carry the inner id
 *   site_kernel_b: REPEAT cuLaunchKernel (driver), _ZN4test8kernel_bEv 2500 ns, device 1 stream 9
 *   site_graph:    REPEAT cudaGraphLaunch, 3 kernels graph_node_kernel of 300 ns, graph id 42
 *   site_copies:   REPEAT cudaMemcpyAsync HtoD 4096 bytes 700 ns and cudaMemsetAsync 128 ns
 *   unsampled:     records of REPEAT correlation ids no callback announced: dropped */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "../../../bpf/cupti.h" /* enum dev_status */

#ifndef MODEL_LIBCUDA
#define MODEL_LIBCUDA "libcuda.so.1"
#endif

int gpubpf_inject_test_start(void);
int gpubpf_inject_test_activity(void);
int gpubpf_inject_test_callbacks(void);
extern struct dev_config gpubpf_inject_config;
int gpubpf_inject_test_state(void);
const char *gpubpf_inject_test_status(void);
void gpubpf_inject_test_callback(uint32_t domain, uint32_t cbid, const CUpti_CallbackData *cb);
int gpubpf_inject_test_buffer(const uint8_t *buf, size_t valid);
void gpubpf_inject_test_hold(const uint8_t *buf, size_t valid);
int InitializeInjection(void);
uint64_t gpubpf_inject_test_clock(void);

static uint32_t next_corr = 1000;
static uint64_t clock_ns; /* the device clock (the library's synthetic CUPTI clock) */
static uint8_t buffer[1 << 20];
static size_t buf_used;

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* One API callback pair as CUPTI delivers it; inner runs between enter and exit. */
static void api(uint32_t domain, uint32_t cbid, const char *fn, uint32_t corr, void (*inner)(void))
{
	CUpti_CallbackData cb;

	memset(&cb, 0, sizeof(cb));
	cb.functionName = fn;
	cb.correlationId = corr;
	cb.callbackSite = CUPTI_API_ENTER;
	gpubpf_inject_test_callback(domain, cbid, &cb);
	if (inner)
		inner();
	cb.callbackSite = CUPTI_API_EXIT;
	gpubpf_inject_test_callback(domain, cbid, &cb);
}

/* Device work starts after the call that launched it (now, on the device clock) and
 * after the previous record: records never overlap. */
static void device_now(void)
{
	uint64_t now = gpubpf_inject_test_clock();

	if (now > clock_ns)
		clock_ns = now;
}

static void *append(size_t size)
{
	void *p = buffer + buf_used;

	buf_used += (size + 7) & ~(size_t)7;
	if (buf_used > sizeof(buffer)) {
		fprintf(stderr, "producer: buffer overflow\n");
		exit(2);
	}
	memset(p, 0, size);
	return p;
}

static void kernel_rec(uint32_t corr, const char *name, uint64_t dur, uint32_t dev, uint32_t stream, uint32_t graph)
{
	CUpti_ActivityKernel10 *k = append(sizeof(*k));

	device_now();
	k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k->correlationId = corr;
	k->name = name;
	k->start = clock_ns;
	k->end = clock_ns + dur;
	k->deviceId = dev;
	k->streamId = stream;
	k->graphId = graph;
	clock_ns += dur + 10;
}

static void memcpy_rec(uint32_t corr, uint32_t kind, uint64_t bytes, uint64_t dur)
{
	CUpti_ActivityMemcpy6 *m = append(sizeof(*m));

	device_now();
	m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m->correlationId = corr;
	m->copyKind = (uint8_t)kind;
	m->bytes = bytes;
	m->start = clock_ns;
	m->end = clock_ns + dur;
	m->streamId = 7;
	clock_ns += dur + 10;
}

static void memset_rec(uint32_t corr, uint64_t bytes, uint64_t dur)
{
	CUpti_ActivityMemset4 *m = append(sizeof(*m));

	device_now();
	m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
	m->correlationId = corr;
	m->bytes = bytes;
	m->start = clock_ns;
	m->end = clock_ns + dur;
	m->streamId = 7;
	clock_ns += dur + 10;
}

static const char *const KA = "_Z8kernel_aPfi", *const KB = "_ZN4test8kernel_bEv", *const KG = "graph_node_kernel";
static uint32_t inner_corr;

static void driver_inside_runtime(void)
{
	inner_corr = next_corr++;
	api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", inner_corr, NULL);
}

__attribute__((noinline)) static void site_kernel_a(void)
{
	api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel",
	    next_corr++, driver_inside_runtime);
	kernel_rec(inner_corr, KA, 1000, 0, 7, 0);
}

__attribute__((noinline)) static void site_kernel_b(void)
{
	uint32_t corr = next_corr++;

	api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", corr, NULL);
	kernel_rec(corr, KB, 2500, 1, 9, 0);
}

__attribute__((noinline)) static void site_graph(void)
{
	uint32_t corr = next_corr++;

	api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch", corr,
	    NULL);
	for (int i = 0; i < 3; i++)
		kernel_rec(corr, KG, 300, 0, 7, 42);
}

__attribute__((noinline)) static void site_copies(void)
{
	uint32_t c1 = next_corr++, c2;

	api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, "cudaMemcpyAsync", c1, NULL);
	memcpy_rec(c1, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 4096, 700);
	c2 = next_corr++;
	api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, "cudaMemsetAsync", c2, NULL);
	memset_rec(c2, 128, 128);
}

/* Start the library (synthetic backend) and, unless ALONE, wait until a session attaches
 * (the library's watcher sees the semaphores); READY: say "ready" first. 0, or 1 with why
 * on stderr. */
static int start_session(bool ready, bool alone)
{
	if (gpubpf_inject_test_start()) {
		fprintf(stderr, "producer: cannot start the library\n");
		return 1;
	}
	if (ready) {
		printf("ready\n");
		fflush(stdout);
	}
	for (int waited = 0; !alone && gpubpf_inject_test_state() != DEV_ST_SYNTHETIC; waited++) {
		if (waited > 300) {
			fprintf(stderr, "producer: no gpubpf session attached in 30 s\n");
			return 1;
		}
		sleep_ms(100);
	}
	return 0;
}

__attribute__((unused)) static int synth(int repeat)
{
	if (start_session(true, false))
		return 1;
	/* Let gpubpf see the library's status and write its sampling settings first. */
	sleep_ms(1200);
	for (int i = 0; i < repeat; i++) {
		site_kernel_a();
		site_kernel_b();
		site_graph();
		site_copies();
		/* Records of launches nobody followed (ids never announced): dropped. */
		kernel_rec(900000 + (uint32_t)i, KA, 5000, 0, 7, 0);
		if (buf_used > sizeof(buffer) / 2) {
			gpubpf_inject_test_buffer(buffer, buf_used);
			buf_used = 0;
		}
	}
	gpubpf_inject_test_buffer(buffer, buf_used);
	buf_used = 0;
	printf("producer: kernel_a_ns=%d kernel_b_ns=%d graph_ns=%d htod_ns=%d memset_ns=%d kernel_a=%d kernel_b=%d "
	       "graph_kernels=%d copies=%d dropped=%d total_kernel_ns=%d total_copy_ns=%d\n",
	       1000 * repeat, 2500 * repeat, 900 * repeat, 700 * repeat, 128 * repeat, repeat, repeat, 3 * repeat,
	       2 * repeat, repeat, (1000 + 2500 + 900) * repeat, (700 + 128) * repeat);
	fflush(stdout);
	/* Stay a moment so gpubpf symbolizes the call sites while the process lives. */
	sleep_ms(1500);
	return 0;
}

/* ---- windows: bursts from two threads, launches that cost more with activity on ---- */

#include <pthread.h>
#include <stdatomic.h>

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void spin_s(double s)
{
	double t0 = mono_s();

	while (mono_s() - t0 < s)
		;
}

static pthread_mutex_t buf_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t w_launches;
/* launches per millisecond since the start: the truth of any span */
#define W_BUCKET 0.001
#define W_BUCKETS 60000
static _Atomic uint32_t w_bucket[W_BUCKETS];
static double w_t0;
static _Atomic uint32_t w_corr = 5000000;
static double w_end;

/* the first window's period (gpubpf's periods), kept while it is in the config's ring */
static _Atomic uint64_t w_first_period = UINT64_MAX;

/* One launch more in the current millisecond. */
static void w_bucket_add(void)
{
	long b = (long)((mono_s() - w_t0) / W_BUCKET);

	if (b >= 0 && b < W_BUCKETS)
		atomic_fetch_add(&w_bucket[b], 1);
	if (w_first_period == UINT64_MAX && gpubpf_inject_config.win[1].id == 1)
		w_first_period = gpubpf_inject_config.win[1].period;
}

/* The truth: all launches, and those from the first window's period on (the windows
 * estimate the periods they ran in; the library measured its cost before the first). */
static void windowed_truth(uint64_t kernel_ns, double per_sec)
{
	const struct dev_win *first = &gpubpf_inject_config.win[1];
	uint64_t p = w_first_period != UINT64_MAX ? w_first_period : first->id == 1 ? first->period : UINT64_MAX;
	double from = p != UINT64_MAX ? (double)p * gpubpf_inject_config.period_ms / 1e3 : 1e300;
	uint64_t since = 0, all = w_launches;

	for (int i = 0; i < W_BUCKETS; i++)
		if (w_t0 + (i + 1) * W_BUCKET > from)
			since += w_bucket[i];
	/* PRODUCER_BUCKETS=FILE: the launches of each millisecond, "start_s count" (the start
	 * on CLOCK_MONOTONIC, as the library's trace): the truth of each window's period */
	if (getenv("PRODUCER_BUCKETS")) {
		FILE *f = fopen(getenv("PRODUCER_BUCKETS"), "w");

		for (int i = 0; f && i < W_BUCKETS; i++)
			if (w_bucket[i])
				fprintf(f, "%.6f %u\n", w_t0 + i * W_BUCKET, (unsigned)w_bucket[i]);
		if (f)
			fclose(f);
	}
	printf("producer: launches=%llu kernel_ns=%llu windowed_launches=%llu windowed_kernel_ns=%llu "
	       "launches_per_sec=%.1f every=%u\n",
	       (unsigned long long)all, (unsigned long long)(all * kernel_ns), (unsigned long long)since,
	       (unsigned long long)(since * kernel_ns), per_sec, (unsigned)gpubpf_inject_config.every);
	fflush(stdout);
}

/* One launch from THREAD's own call site: its records only while activity is on. */
__attribute__((noinline)) static void site_window_launch(void)
{
	CUpti_CallbackData cb;
	uint32_t c = atomic_fetch_add(&w_corr, 1);
	int act;

	memset(&cb, 0, sizeof(cb));
	cb.functionName = "cuLaunchKernel";
	cb.correlationId = c;
	cb.callbackSite = CUPTI_API_ENTER;
	gpubpf_inject_test_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
	act = gpubpf_inject_test_activity();
	spin_s((act ? 8e-6 : 5e-6) + (gpubpf_inject_test_callbacks() ? 0.6e-6 : 0));
	cb.callbackSite = CUPTI_API_EXIT;
	gpubpf_inject_test_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
	atomic_fetch_add(&w_launches, 1);
	w_bucket_add();
	if (act) {
		pthread_mutex_lock(&buf_lock);
		kernel_rec(c, KA, 1000, 0, 7, 0);
		if (buf_used > sizeof(buffer) / 2) {
			gpubpf_inject_test_buffer(buffer, buf_used);
			buf_used = 0;
		}
		pthread_mutex_unlock(&buf_lock);
	} else if (__atomic_load_n(&buf_used, __ATOMIC_RELAXED)) {
		/* Activity went off: a window ended, and CUPTI hands its records over when the
		 * library flushes at a window's end. Held here until the buffer was half full
		 * (a second of windows), a record came after 65,536 more launches had taken
		 * their correlation ids, and the library's mark that it was followed
		 * (INJ_SAMPLED_SLOTS, by id) could be another's: e2e 81 b5 then counted 2-4%
		 * fewer records than launches followed, in 1 full run of 2 and beside a CPU hog. */
		pthread_mutex_lock(&buf_lock);
		if (buf_used) {
			gpubpf_inject_test_buffer(buffer, buf_used);
			buf_used = 0;
		}
		pthread_mutex_unlock(&buf_lock);
	}
	spin_s(5e-6); /* the job's own work between launches */
}

/* Bursts of 1700 launches (thread 0) or 700 (thread 1), ~17 and ~7 ms unprofiled, with
 * pauses between, until w_end: a pattern that is neither steady nor in step with the
 * windows' period. A burst is so much work, as a training step is: a slower launch makes
 * it longer, not smaller. */
static void *window_thread(void *arg)
{
	int burst = arg ? 700 : 1700, pause_ms = arg ? 23 : 17;

	while (mono_s() < w_end) {
		for (int i = 0; i < burst; i++)
			site_window_launch();
		sleep_ms(pause_ms);
	}
	return NULL;
}

__attribute__((unused)) static int windows_run(double seconds)
{
	pthread_t th[2];

	if (start_session(true, false))
		return 1;
	w_t0 = mono_s();
	w_end = w_t0 + seconds;
	for (long i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, window_thread, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_lock(&buf_lock);
	gpubpf_inject_test_buffer(buffer, buf_used);
	buf_used = 0;
	pthread_mutex_unlock(&buf_lock);
	windowed_truth(1000, (double)w_launches / (mono_s() - w_t0));
	sleep_ms(1500);
	return 0;
}

/* A launch-bound loop: the throughput alone, and under gpubpf (make bench). */
__attribute__((unused)) static int loop_run(double seconds)
{
	bool alone = getenv("PRODUCER_ALONE") != NULL;
	uint64_t n = 0;
	double t0, t;

	if (start_session(false, alone))
		return 1;
	w_t0 = t0 = mono_s();
	do {
		for (int i = 0; i < 100; i++)
			site_window_launch();
		n += 100;
		t = mono_s();
	} while (t - t0 < seconds);
	pthread_mutex_lock(&buf_lock);
	gpubpf_inject_test_buffer(buffer, buf_used);
	buf_used = 0;
	pthread_mutex_unlock(&buf_lock);
	printf("producer: launches=%llu launches_per_sec=%.1f\n", (unsigned long long)n, (double)n / (t - t0));
	fflush(stdout);
	if (!alone)
		sleep_ms(1500);
	return 0;
}

/* Launches through the CUPTI model, which calls the library as CUPTI would, and the
 * driver's cuLaunchKernel (the stub libcuda here: it fails at once) inside each, where
 * gpubpf's launch probe sees it. */
static void (*model_launch)(uint64_t kernel_ns, void (*driver)(void *f));
static int (*cu_launch)(void *f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
			void **);

static void driver_launch(void *f)
{
	cu_launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
}

__attribute__((noinline)) static void site_model_launch(uint64_t kernel_ns)
{
	model_launch(kernel_ns, driver_launch);
	w_bucket_add();
}

__attribute__((unused)) static int model_run(double seconds, uint64_t kernel_ns, const char *lib, bool driver_only)
{
	bool alone = getenv("PRODUCER_ALONE") != NULL;
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL), *cuda = dlopen(MODEL_LIBCUDA, RTLD_NOW | RTLD_GLOBAL);
	uint64_t n = 0;
	double t;

	/* cudaLaunchKernel (the driver's launch inside it), or cuLaunchKernel alone */
	model_launch = h ? (void (*)(uint64_t, void (*)(void *)))dlsym(h, driver_only ? "cupti_model_cu_launch"
										      : "cupti_model_launch")
			 : NULL;
	if (!model_launch) {
		fprintf(stderr, "producer: cannot use the CUPTI model %s: %s\n", lib, dlerror());
		return 2;
	}
	/* the model is the driver of the library's own call, which finalizes CUPTI */
	setenv("GPUBPF_INJECT_DRIVER_LIB", lib, 1);
	cu_launch = cuda ? dlsym(cuda, "cuLaunchKernel") : NULL;
	if (!cu_launch) {
		fprintf(stderr, "producer: no cuLaunchKernel in %s: %s\n", MODEL_LIBCUDA, dlerror());
		return 2;
	}
	if (InitializeInjection() != 1) {
		fprintf(stderr, "producer: InitializeInjection failed\n");
		return 1;
	}
	for (int waited = 0; !alone && gpubpf_inject_test_state() != DEV_ST_ATTACHED; waited++) {
		if (waited > 300) {
			fprintf(stderr, "producer: no gpubpf session attached in 30 s (%s)\n",
				gpubpf_inject_test_status());
			return 1;
		}
		sleep_ms(100);
	}
	w_t0 = mono_s();
	do {
		for (int i = 0; i < 100; i++)
			site_model_launch(kernel_ns);
		n += 100;
		t = mono_s();
	} while (t - w_t0 < seconds);
	w_launches = n;
	windowed_truth(kernel_ns, (double)n / (t - w_t0));
	/* PRODUCER_EXIT_DLOPEN=LIB: load LIB and exit at once, as a job whose objects change
	 * at its end (CUPTI's teardown at exit on an H100): its device time was left under
	 * the library's frames where gpubpf read the process's mappings after it was gone */
	if (getenv("PRODUCER_EXIT_DLOPEN")) {
		if (!dlopen(getenv("PRODUCER_EXIT_DLOPEN"), RTLD_NOW))
			fprintf(stderr, "producer: cannot load %s: %s\n", getenv("PRODUCER_EXIT_DLOPEN"), dlerror());
		return 0;
	}
	if (!alone)
		sleep_ms(1500);
	return 0;
}

/* A program that is over before a watcher would have looked: the library must follow
 * it from InitializeInjection on, and deliver at exit what "CUPTI" still holds. */
__attribute__((unused)) static int short_run(int repeat)
{
	if (gpubpf_inject_test_start()) {
		fprintf(stderr, "producer: cannot start the library\n");
		return 1;
	}
	for (int i = 0; i < repeat; i++) {
		site_kernel_a();
		site_kernel_b();
	}
	gpubpf_inject_test_hold(buffer, buf_used);
	printf("producer: kernels=%d kernel_ns=%d state=%d\n", 2 * repeat, (1000 + 2500) * repeat,
	       gpubpf_inject_test_state());
	return 0; /* exit at once: the records are still held */
}

static volatile uint64_t sink;

__attribute__((unused)) static int idle(double seconds, const char *preload)
{
	struct timespec t0, t;
	uint64_t iters = 0;

	/* PyTorch's start-up: its own libcupti is loaded, nobody subscribes. */
	if (preload && !dlopen(preload, RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "producer: cannot load %s: %s\n", preload, dlerror());
		return 2;
	}

	if (InitializeInjection() != 1) {
		fprintf(stderr, "producer: InitializeInjection failed\n");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			sink += (uint64_t)i * 2654435761u;
		iters++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	printf("idle: iterations=%llu state=%d status=%s\n", (unsigned long long)iters, gpubpf_inject_test_state(),
	       gpubpf_inject_test_status());
	return 0;
}

/* ---- as a library (libproducer.so), for a Python program that launches through ctypes:
 * its device time must land under its Python frames. */

#define EXPORT __attribute__((visibility("default")))

/* Start the library and wait for a session to attach: 0, or 1 after 30 s without one. */
EXPORT int producer_start(void)
{
	return start_session(false, false);
}

/* One cudaLaunchKernel of kernel_a (1000 ns), from the caller's stack. */
EXPORT void producer_launch(void)
{
	site_kernel_a();
}

/* Hand the records of the launches so far to the library. */
EXPORT void producer_deliver(void)
{
	gpubpf_inject_test_buffer(buffer, buf_used);
	buf_used = 0;
}

#ifndef PRODUCER_LIBRARY
int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && strcmp(argv[1], "synth") == 0)
		return synth(argc >= 3 ? atoi(argv[2]) : 10);
	if (argc >= 2 && strcmp(argv[1], "short") == 0)
		return short_run(argc >= 3 ? atoi(argv[2]) : 10);
	if (argc >= 3 && strcmp(argv[1], "loop") == 0)
		return loop_run(atof(argv[2]));
	if (argc >= 3 && strcmp(argv[1], "windows") == 0)
		return windows_run(atof(argv[2]));
	if (argc >= 5 && strcmp(argv[1], "model") == 0)
		return model_run(atof(argv[2]), strtoull(argv[3], NULL, 10), argv[4],
				 argc >= 6 && strcmp(argv[5], "driver") == 0);
	if (argc >= 3 && strcmp(argv[1], "idle") == 0)
		return idle(atof(argv[2]), argc >= 4 ? argv[3] : NULL);
	fprintf(
	    stderr,
	    "usage: producer synth [REPEAT] | producer short [REPEAT] | producer windows SECONDS | producer loop "
	    "SECONDS | producer model SECONDS KERNEL_NS LIBCUPTI_MODEL [driver] | producer idle SECONDS [LIBCUPTI]\n");
	return 2;
}
#endif
