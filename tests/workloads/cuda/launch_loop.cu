// launch_loop: a tight loop of kernel launches (<<<>>> => cudaLaunchKernel) for
// benchmarks. Built with -cudart shared.
//   launch_loop [COUNT] [--seconds S] [--spin-us U] [--device-us K [--queue Q]]
// COUNT defaults to 20000 x GPUBPF_WL_REPEAT; with --seconds S it loops until S
// seconds have passed (checking the clock every 1000 launches) and ignores COUNT.
// --spin-us U spins U microseconds after each launch: a launch that costs what a real
// one does (4-5 us on an H100) where a failing one costs 40 ns.
// --device-us K makes each kernel take K microseconds on the device, so that the device,
// not the thread, sets the pace once its queue is full: a launch then waits inside the
// call for a kernel to finish (spinning, as the driver does by default), and a delay
// before the call (a probe) is absorbed by that wait instead of pushing launches out.
// On a GPU the kernel busy-waits K us on the device's clock (%globaltimer); without one
// (launches fail fast) an in-process device stands in: kernels run one after another, K
// us each, and a launch spins while Q of them (--queue, default 1024) are pending.
// --trace FILE (with COUNT, not --seconds) writes the CLOCK_MONOTONIC time (seconds, a
// native double) just before each launch to FILE: the truth a window's count is checked
// against (tests/e2e/window_truth.py).
// --busy N runs N more threads that spin for as long as the loop does: a job that fills
// the machine's CPUs, where whatever else runs (gpubpf's own threads) takes CPU time from
// it. The launching thread then prints its own wait for a CPU over the loop
// (/proc/thread-self/schedstat's run_delay) as "waited=S", and all the job's threads'
// together as "all_waited=S".
// --depth D launches from D more frames of run_at (frame pointers kept): a deep stack
// at the probe, as a framework's dispatcher makes.
// Prints: "launch_loop: launches=N seconds=T launches_per_sec=X ... user_us_per_launch=U
// sys_us_per_launch=K user_instr_per_launch=I user_cycles_per_launch=C" (the loop's CPU
// time a launch in user and kernel mode, getrusage: what a probe hit costs the loop's own
// code beside what it costs in the kernel; its instructions and cycles in user mode a
// launch, the CPU's counters, wl_common.c: "user_instr_per_launch=none(WHY)" without them).
// Start-up convention (GPUBPF_WL_WAIT / --wait-stdin): wl_common.c.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>
#include <pthread.h>
#include <sys/resource.h>

extern "C" int wl_repeat(void);
extern "C" void wl_wait(int argc, char **argv);
extern "C" double wl_now(void);
extern "C" void wl_ucount_open(void);
extern "C" void wl_ucount_mark(int slot);
extern "C" void wl_ucount_print(double n, const char *unit);

#define NOINLINE __attribute__((noinline))

__global__ void loop_kernel(int i, int *out, unsigned long long device_ns)
{
	if (device_ns) {
		unsigned long long t0, t;

		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
		do
			asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
		while (t - t0 < device_ns);
	}
	if (out && threadIdx.x == 0)
		out[0] = i;
}

static double tv_us(const struct timeval *a, const struct timeval *b)
{
	return (double)(a->tv_sec - b->tv_sec) * 1e6 + (double)(a->tv_usec - b->tv_usec);
}

static double now(void)
{
	return wl_now();
}

static double spin_s, device_s;
static double *trace; /* --trace: each launch's time, COUNT of them */
static long traced;

static void spin_until(double end)
{
	while (now() < end)
		;
}

/* The calling thread's wait for a CPU so far (seconds; -1: unknown): the kernel's
 * schedstat run_delay. */
static double run_delay(void)
{
	unsigned long long run, wait;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");
	int n = f ? fscanf(f, "%llu %llu", &run, &wait) : 0;

	if (f)
		fclose(f);
	return n == 2 ? (double)wait / 1e9 : -1;
}

/* --busy: threads that spin until the loop is done, each its wait for a CPU meanwhile */
static int busy_stop;
static double busy_waited[64];

static void *busy_thread(void *arg)
{
	double w0 = run_delay(), w1;

	while (!__atomic_load_n(&busy_stop, __ATOMIC_RELAXED))
		;
	w1 = run_delay();
	busy_waited[(long)arg] = w0 >= 0 && w1 >= 0 ? w1 - w0 : -1;
	return NULL;
}

/* The device that stands in where there is none: the finish times of the last QUEUE
 * kernels, a ring. */
static int emulate, queue = 1024;
static double *finish;
static long launched, nowait;

/* After a launch that failed fast, what a real one would have done: wait (spinning) until
 * the kernel QUEUE launches back has finished, then queue this one behind the last. */
static void device_launch(void)
{
	double t, start, last = launched ? finish[(launched - 1) % queue] : 0;

	t = now();
	if (launched >= queue) {
		nowait += t >= finish[launched % queue];
		spin_until(finish[launched % queue]);
		t = now();
	}
	start = t > last ? t : last;
	finish[launched % queue] = start + device_s;
	launched++;
}

NOINLINE static long launch_n(long n)
{
	unsigned long long device_ns = emulate ? 0 : (unsigned long long)(device_s * 1e9);

	for (long i = 0; i < n; i++) {
		if (trace)
			trace[traced++] = now();
		loop_kernel<<<1, 1>>>((int)i, nullptr, device_ns);
		if (emulate)
			device_launch();
		if (spin_s > 0)
			spin_until(now() + spin_s);
	}
	return n;
}

/* launch_n (N launches) from D more frames of this function */
NOINLINE static long run_at(long d, long n)
{
	long r;

	if (d <= 0)
		return launch_n(n);
	r = run_at(d - 1, n);
	__asm__ volatile("" ::: "memory"); /* no tail call: the frame stays */
	return r;
}

int main(int argc, char **argv)
{
	long count = 20000L * wl_repeat(), done = 0;
	double seconds = 0, t0, t1, w0 = 0, w1 = 0;
	struct rusage ru0, ru1;
	const char *trace_path = NULL;
	int nbusy = 0;
	long depth = 0;
	pthread_t busy[64];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (strcmp(argv[i], "--spin-us") == 0 && i + 1 < argc)
			spin_s = atof(argv[++i]) / 1e6;
		else if (strcmp(argv[i], "--device-us") == 0 && i + 1 < argc)
			device_s = atof(argv[++i]) / 1e6;
		else if (strcmp(argv[i], "--queue") == 0 && i + 1 < argc)
			queue = atoi(argv[++i]);
		else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc)
			trace_path = argv[++i];
		else if (strcmp(argv[i], "--busy") == 0 && i + 1 < argc)
			nbusy = atoi(argv[++i]);
		else if (strcmp(argv[i], "--depth") == 0 && i + 1 < argc)
			depth = atol(argv[++i]);
		else if (argv[i][0] != '-')
			count = atol(argv[i]);
	}
	if (nbusy < 0 || nbusy > 64) {
		fprintf(stderr, "launch_loop: --busy takes 0 to 64 threads\n");
		return 2;
	}
	if (depth < 0 || depth > 1000) {
		fprintf(stderr, "launch_loop: --depth takes 0 to 1000 frames\n");
		return 2;
	}
	if (queue < 1) {
		fprintf(stderr, "launch_loop: --queue must be at least 1\n");
		return 2;
	}
	if (trace_path && (seconds > 0 || count < 1)) {
		fprintf(stderr, "launch_loop: --trace needs a COUNT and no --seconds\n");
		return 2;
	}
	if (trace_path && !(trace = (double *)malloc((size_t)count * sizeof(*trace))))
		return 1;
	/* faulted in now: a page fault in the loop waits while gpubpf holds the process's
	 * address space to put its breakpoints in, which a job without --trace never does */
	if (trace)
		memset(trace, 0, (size_t)count * sizeof(*trace));
	wl_wait(argc, argv);
	(void)cudaGetLastError(); /* lazy runtime init outside the timed loop */
	if (device_s > 0) {
		int ndev = 0;

		emulate = cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0;
		finish = (double *)calloc((size_t)queue, sizeof(*finish));
		if (!finish)
			return 1;
	}
	for (int i = 0; i < nbusy; i++)
		if (pthread_create(&busy[i], NULL, busy_thread, (void *)(long)i)) {
			fprintf(stderr, "launch_loop: cannot start a --busy thread\n");
			return 1;
		}
	wl_ucount_open();
	w0 = run_delay();
	getrusage(RUSAGE_THREAD, &ru0);
	wl_ucount_mark(0);
	t0 = now();
	if (seconds > 0) {
		while (now() - t0 < seconds)
			done += run_at(depth, spin_s > 0 || device_s > 0 ? 100 : 1000);
	} else {
		done = run_at(depth, count);
	}
	if (device_s > 0 && !emulate)
		(void)cudaDeviceSynchronize(); /* the kernels' time is the loop's */
	t1 = now();
	wl_ucount_mark(1);
	getrusage(RUSAGE_THREAD, &ru1);
	w1 = run_delay();
	__atomic_store_n(&busy_stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nbusy; i++)
		pthread_join(busy[i], NULL);
	printf("launch_loop: launches=%ld seconds=%.6f launches_per_sec=%.0f%s", done, t1 - t0,
	       t1 > t0 ? done / (t1 - t0) : 0.0, device_s > 0 ? (emulate ? " device=emulated" : " device=gpu") : "");
	if (nbusy && w0 >= 0 && w1 >= 0) {
		double all = w1 - w0;

		for (int i = 0; i < nbusy && all >= 0; i++)
			all = busy_waited[i] >= 0 ? all + busy_waited[i] : -1;
		printf(" waited=%.6f", w1 - w0);
		if (all >= 0)
			printf(" all_waited=%.6f", all);
	}
	if (emulate)
		printf(" unpaced=%.4f", launched > queue ? (double)nowait / (double)(launched - queue) : 0.0);
	if (done > 0) /* the loop's CPU time a launch in user and kernel mode (the kernel's accounting) */
		printf(" user_us_per_launch=%.4f sys_us_per_launch=%.4f",
		       tv_us(&ru1.ru_utime, &ru0.ru_utime) / (double)done,
		       tv_us(&ru1.ru_stime, &ru0.ru_stime) / (double)done);
	wl_ucount_print((double)done, "launch");
	printf("\n");
	if (trace) {
		FILE *f = fopen(trace_path, "wb");

		if (!f || fwrite(trace, sizeof(*trace), (size_t)traced, f) != (size_t)traced || fclose(f)) {
			fprintf(stderr, "launch_loop: cannot write %s\n", trace_path);
			return 1;
		}
		free(trace);
	}
	free(finish);
	return 0;
}
