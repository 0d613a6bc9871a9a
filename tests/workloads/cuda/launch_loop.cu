// launch_loop: a tight loop of kernel launches (<<<>>> => cudaLaunchKernel) for
// benchmarks. Built with -cudart shared.
//   launch_loop [COUNT] [--seconds S] [--spin-us U]
// COUNT defaults to 20000 x GPUBPF_WL_REPEAT; with --seconds S it loops until S
// seconds have passed (checking the clock every 1000 launches) and ignores COUNT.
// --spin-us U spins U microseconds after each launch: a launch that costs what a real
// one does (4-5 us on an H100) where a failing one costs 40 ns.
// Prints: "launch_loop: launches=N seconds=T launches_per_sec=X".
// Start-up convention (GPUBPF_WL_WAIT / --wait-stdin): wl_common.c.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>

extern "C" int wl_repeat(void);
extern "C" void wl_wait(int argc, char **argv);

#define NOINLINE __attribute__((noinline))

__global__ void loop_kernel(int i, int *out)
{
	if (out && threadIdx.x == 0)
		out[0] = i;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double spin_s;

static void spin(void)
{
	double end = now() + spin_s;

	while (now() < end)
		;
}

NOINLINE static long launch_n(long n)
{
	for (long i = 0; i < n; i++) {
		loop_kernel<<<1, 1>>>((int)i, nullptr);
		if (spin_s > 0)
			spin();
	}
	return n;
}

int main(int argc, char **argv)
{
	long count = 20000L * wl_repeat(), done = 0;
	double seconds = 0, t0, t1;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (strcmp(argv[i], "--spin-us") == 0 && i + 1 < argc)
			spin_s = atof(argv[++i]) / 1e6;
		else if (argv[i][0] != '-')
			count = atol(argv[i]);
	}
	wl_wait(argc, argv);
	(void)cudaGetLastError(); /* lazy runtime init outside the timed loop */
	t0 = now();
	if (seconds > 0) {
		while (now() - t0 < seconds)
			done += launch_n(spin_s > 0 ? 100 : 1000);
	} else {
		done = launch_n(count);
	}
	t1 = now();
	printf("launch_loop: launches=%ld seconds=%.6f launches_per_sec=%.0f\n", done, t1 - t0,
	       t1 > t0 ? done / (t1 - t0) : 0.0);
	return 0;
}
