/* dlopen_wl: loads the CUDA runtime only after start-up, with dlopen(), the way
 * Python frameworks do, so a tracer attached with -p before the load must notice
 * the new mapping and attach its uprobes then.
 *
 * Order: wl_wait() (GPUBPF_WL_WAIT=1 / --wait-stdin) -> optional sleep
 * GPUBPF_WL_DELAY_MS -> dlopen -> optional sleep GPUBPF_WL_AFTER_DLOPEN_MS (time
 * for a tracer that polls /proc/PID/maps) -> the calls.
 *
 * The library is dlopen(GPUBPF_WL_CUDART) if set, else dlopen("libcudart.so.13"),
 * which the dynamic loader resolves through this executable's DT_RUNPATH
 * ($(CUDA_HOME)/lib64, set by Makefile.inc), LD_LIBRARY_PATH, then ld.so.cache.
 *
 * Expected counts, R = GPUBPF_WL_REPEAT:
 *   dlopen_site:  cudaLaunchKernel 40R, func = fake_kernel_stub (a host function of
 *                 this executable, so it symbolizes to "fake_kernel_stub"),
 *                 grid (2,3,4) block (32,1,1) sharedMem 0 stream 0
 *   copy_site:    cudaMemcpy 2R x 8 KiB HtoD
 * Exit status 2 if the library or a symbol cannot be found; 0 otherwise (the CUDA
 * calls may fail). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

int wl_repeat(void);
void wl_wait(int argc, char **argv);

/* Same layout as the C++ dim3: three unsigned ints, passed by value in two
 * eightbytes (x|y<<32 in one register, z in the next). */
struct wl_dim3 {
	unsigned int x, y, z;
};
typedef int (*launch_fn)(const void *func, struct wl_dim3 grid, struct wl_dim3 block, void **args, size_t smem,
			 void *stream);
typedef int (*memcpy_fn)(void *dst, const void *src, size_t count, int kind);

static int g_fail;

NOINLINE void fake_kernel_stub(void)
{
	/* never called: only its address is passed as the kernel */
	__asm__ volatile("");
}

static void sleep_ms(const char *env)
{
	const char *s = getenv(env);
	long ms = s ? atol(s) : 0;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	if (ms > 0)
		nanosleep(&ts, NULL);
}

NOINLINE static void dlopen_site(launch_fn launch, int n)
{
	struct wl_dim3 grid = {2, 3, 4}, block = {32, 1, 1};
	int arg = 7;
	void *args[] = {&arg};

	for (int i = 0; i < n; i++)
		if (launch((const void *)fake_kernel_stub, grid, block, args, 0, NULL) != 0)
			g_fail++;
}

NOINLINE static void copy_site(memcpy_fn cpy, int n)
{
	static char h[8192];
	void *d = (void *)0x7e0000000000ull;

	for (int i = 0; i < n; i++)
		if (cpy(d, h, sizeof(h), 1 /* cudaMemcpyHostToDevice */) != 0)
			g_fail++;
}

int main(int argc, char **argv)
{
	int R = wl_repeat();
	const char *path = getenv("GPUBPF_WL_CUDART");
	void *lib;
	launch_fn launch;
	memcpy_fn cpy;

	wl_wait(argc, argv);
	sleep_ms("GPUBPF_WL_DELAY_MS");
	if (!path || !*path)
		path = "libcudart.so.13";
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen_wl: %s\n", dlerror());
		return 2;
	}
	launch = (launch_fn)dlsym(lib, "cudaLaunchKernel");
	cpy = (memcpy_fn)dlsym(lib, "cudaMemcpy");
	if (!launch || !cpy) {
		fprintf(stderr, "dlopen_wl: missing symbol: %s\n", dlerror());
		return 2;
	}
	sleep_ms("GPUBPF_WL_AFTER_DLOPEN_MS");
	dlopen_site(launch, 40 * R);
	copy_site(cpy, 2 * R);
	printf("dlopen_wl: repeat=%d launch=%d memcpy=%d htod_bytes=%d failed=%d\n", R, 40 * R, 2 * R, 2 * R * 8192,
	       g_fail);
	return 0;
}
