/* driver_wl: the CUDA driver API workload, plain C against cuda.h.
 *
 * Linked against $(CUDA_HOME)/lib64/stubs/libcuda.so (SONAME libcuda.so.1) and
 * run here against the same stub through $(BUILD)/workloads/cuda/stubs/libcuda.so.1
 * (LD_LIBRARY_PATH=$(BUILD)/workloads/cuda/stubs; Makefile.inc makes the link).
 * On a machine with a driver, run it without that LD_LIBRARY_PATH and the real
 * libcuda.so.1 is used.
 *
 * The stub returns CUDA_ERROR_STUB_LIBRARY (34) from every call and never writes
 * the output arguments. Every error is ignored and every output handle is
 * pre-filled with a fake non-NULL value the workload chose (the functions from
 * cuModuleGetFunction are 0xf00a / 0xf00b, the stream 0x5000, ...), which a call
 * that succeeds overwrites. So with the stub every call below is still made, with
 * the fake handles; with a real driver the embedded PTX gives real functions.
 *
 * Expected calls, R = GPUBPF_WL_REPEAT (symbol names as linked, cuda.h maps e.g.
 * cuMemAlloc -> cuMemAlloc_v2):
 *   cuInit 1, cuModuleGetFunction 2 ("drv_kernel_a", "drv_kernel_b"),
 *   cuLibraryGetKernel 1 ("drv_kernel_a"), cuKernelGetFunction 1
 *   site_launch_a: cuLaunchKernel 60R (f_a 0xf00a, grid 2,1,1 block 64,1,1, smem 0, stream 0)
 *   site_launch_b: cuLaunchKernel 40R (f_b 0xf00b, grid 3,4,5 block 6,7,8, smem 128, stream s)
 *                  => cuLaunchKernel 100R
 *   site_launch_ex: cuLaunchKernelEx 5R (cfg grid 9,1,1 block 32,1,1 smem 256 stream s, f_a)
 *   site_launch_coop: cuLaunchCooperativeKernel 2R (f_b grid 1,1,1 block 128,1,1 smem 0 stream s)
 *   site_graph: cuGraphLaunch 2R (exec (fake 0x6000), s)
 *   site_allocs: cuMemAlloc_v2 x3 (1 MiB, 2 MiB, 256 KiB), cuMemFree_v2 x1 (256 KiB)
 *                => 3 MiB in use at exit; cuMemAllocAsync 512 KiB + cuMemFreeAsync x1 on s
 *   site_copies: cuMemcpyHtoD_v2 8R x 64 KiB, cuMemcpyDtoH_v2 4R x 32 KiB,
 *                cuMemcpyDtoD_v2 2R x 16 KiB, cuMemcpy R x 4 KiB, cuMemcpyAsync R x 2 KiB (s),
 *                cuMemcpyHtoDAsync_v2 3R x 8 KiB (s), cuMemcpyDtoHAsync_v2 R x 1 KiB (s)
 *   site_memsets: cuMemsetD8_v2 R x N=1000 (1000 B), cuMemsetD16_v2 R x N=1000 (2000 B),
 *                 cuMemsetD32_v2 R x N=1000 (4000 B), cuMemsetD32Async R x N=100 (400 B, s)
 *   site_syncs: cuStreamSynchronize 3R, cuCtxSynchronize 2R, cuEventSynchronize R
 */
#include <stdint.h>
#include <stdio.h>
#include <cuda.h>

#define NOINLINE __attribute__((noinline))
#define KiB 1024u
#define MiB (1024u * 1024u)

int wl_repeat(void);
void wl_wait(int argc, char **argv);

static const char ptx[] = ".version 7.0\n"
			  ".target sm_52\n"
			  ".address_size 64\n"
			  ".visible .entry drv_kernel_a(.param .u64 p) { ret; }\n"
			  ".visible .entry drv_kernel_b(.param .u64 p) { ret; }\n";

static int g_fail;

static void chk(CUresult r)
{
	if (r != CUDA_SUCCESS)
		g_fail++;
}

NOINLINE static void site_launch_a(int n, CUfunction f, CUdeviceptr d)
{
	void *params[] = {&d};

	for (int i = 0; i < n; i++)
		chk(cuLaunchKernel(f, 2, 1, 1, 64, 1, 1, 0, NULL, params, NULL));
}

NOINLINE static void site_launch_b(int n, CUfunction f, CUdeviceptr d, CUstream s)
{
	void *params[] = {&d};

	for (int i = 0; i < n; i++)
		chk(cuLaunchKernel(f, 3, 4, 5, 6, 7, 8, 128, s, params, NULL));
}

NOINLINE static void site_launch_ex(int n, CUfunction f, CUdeviceptr d, CUstream s)
{
	void *params[] = {&d};
	CUlaunchConfig cfg = {.gridDimX = 9, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32, .blockDimY = 1,
			      .blockDimZ = 1, .sharedMemBytes = 256, .hStream = s, .attrs = NULL, .numAttrs = 0};

	for (int i = 0; i < n; i++)
		chk(cuLaunchKernelEx(&cfg, f, params, NULL));
}

NOINLINE static void site_launch_coop(int n, CUfunction f, CUdeviceptr d, CUstream s)
{
	void *params[] = {&d};

	for (int i = 0; i < n; i++)
		chk(cuLaunchCooperativeKernel(f, 1, 1, 1, 128, 1, 1, 0, s, params));
}

NOINLINE static void site_graph(int n, CUgraphExec exec, CUstream s)
{
	for (int i = 0; i < n; i++)
		chk(cuGraphLaunch(exec, s));
}

NOINLINE static void site_copies(int R, CUdeviceptr d0, CUdeviceptr d1, char *h, CUstream s)
{
	for (int i = 0; i < 8 * R; i++)
		chk(cuMemcpyHtoD(d0, h, 64 * KiB));
	for (int i = 0; i < 4 * R; i++)
		chk(cuMemcpyDtoH(h, d0, 32 * KiB));
	for (int i = 0; i < 2 * R; i++)
		chk(cuMemcpyDtoD(d1, d0, 16 * KiB));
	for (int i = 0; i < R; i++)
		chk(cuMemcpy(d1, d0, 4 * KiB));
	for (int i = 0; i < R; i++)
		chk(cuMemcpyAsync(d1, d0, 2 * KiB, s));
	for (int i = 0; i < 3 * R; i++)
		chk(cuMemcpyHtoDAsync(d0, h, 8 * KiB, s));
	for (int i = 0; i < R; i++)
		chk(cuMemcpyDtoHAsync(h, d0, 1 * KiB, s));
}

NOINLINE static void site_memsets(int R, CUdeviceptr d, CUstream s)
{
	for (int i = 0; i < R; i++) {
		chk(cuMemsetD8(d, 0x5a, 1000));
		chk(cuMemsetD16(d, 0x5a5a, 1000));
		chk(cuMemsetD32(d, 0x5a5a5a5a, 1000));
		chk(cuMemsetD32Async(d, 0x5a5a5a5a, 100, s));
	}
}

NOINLINE static void site_allocs(CUdeviceptr *a, CUdeviceptr *b, CUstream s)
{
	CUdeviceptr tmp = 0x7e0000300000ull, as = 0x7e0000400000ull;

	chk(cuMemAlloc(a, 1 * MiB));
	chk(cuMemAlloc(b, 2 * MiB));
	chk(cuMemAlloc(&tmp, 256 * KiB));
	chk(cuMemFree(tmp));
	chk(cuMemAllocAsync(&as, 512 * KiB, s));
	chk(cuMemFreeAsync(as, s));
}

NOINLINE static void site_syncs(int R, CUstream s, CUevent ev)
{
	for (int i = 0; i < 3 * R; i++)
		chk(cuStreamSynchronize(s));
	for (int i = 0; i < 2 * R; i++)
		chk(cuCtxSynchronize());
	for (int i = 0; i < R; i++)
		chk(cuEventSynchronize(ev));
}

int main(int argc, char **argv)
{
	int R = wl_repeat();
	CUdevice dev = 0;
	CUcontext ctx = (CUcontext)0x4000;
	CUmodule mod = (CUmodule)0x3000;
	CUlibrary lib = (CUlibrary)0x3100;
	CUkernel kern = (CUkernel)0x3200;
	CUfunction f_a = (CUfunction)0xf00a, f_b = (CUfunction)0xf00b, f_k = (CUfunction)0xf00c;
	CUstream s = (CUstream)0x5000;
	CUevent ev = (CUevent)0x7000;
	CUgraph g = (CUgraph)0x6100;
	CUgraphNode node;
	CUgraphExec exec = (CUgraphExec)0x6000;
	CUdeviceptr d0 = 0x7e0000100000ull, d1 = 0x7e0000200000ull;
	static char h[64 * KiB];

	wl_wait(argc, argv);
	chk(cuInit(0));
	/* Setup calls (not traced): a context, a stream, an event, an empty graph. */
	if (cuDeviceGet(&dev, 0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS)
		cuCtxSetCurrent(ctx);
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	if (cuEventCreate(&ev, 0) == CUDA_SUCCESS)
		cuEventRecord(ev, s);
	if (cuGraphCreate(&g, 0) == CUDA_SUCCESS && cuGraphAddEmptyNode(&node, g, NULL, 0) == CUDA_SUCCESS)
		cuGraphInstantiate(&exec, g, 0);
	chk(cuModuleLoadData(&mod, ptx));
	chk(cuModuleGetFunction(&f_a, mod, "drv_kernel_a"));
	chk(cuModuleGetFunction(&f_b, mod, "drv_kernel_b"));
	chk(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	chk(cuLibraryGetKernel(&kern, lib, "drv_kernel_a"));
	chk(cuKernelGetFunction(&f_k, kern));

	site_allocs(&d0, &d1, s);
	site_copies(R, d0, d1, h, s);
	site_memsets(R, d0, s);
	site_launch_a(60 * R, f_a, d0);
	site_launch_b(40 * R, f_b, d0, s);
	site_launch_ex(5 * R, f_a, d0, s);
	site_launch_coop(2 * R, f_b, d0, s);
	site_graph(2 * R, exec, s);
	site_syncs(R, s, ev);
	printf("driver_wl: repeat=%d launch=%d launch_a=%d launch_b=%d launch_ex=%d launch_coop=%d graph_launch=%d "
	       "htod=%d htod_bytes=%u dtoh=%d dtoh_bytes=%u dtod=%d dtod_bytes=%u memcpy=%d memcpy_bytes=%u "
	       "memcpy_async=%d memcpy_async_bytes=%u htod_async=%d htod_async_bytes=%u dtoh_async=%d "
	       "dtoh_async_bytes=%u memset=%d memset_bytes=%u malloc=3 malloc_bytes=%u free=1 free_bytes=%u "
	       "inuse_bytes=%u malloc_async=1 free_async=1 stream_sync=%d ctx_sync=%d event_sync=%d "
	       "module_get_function=2 library_get_kernel=1 kernel_get_function=1 failed=%d\n",
	       R, 100 * R, 60 * R, 40 * R, 5 * R, 2 * R, 2 * R, 8 * R, 8 * R * 64 * KiB, 4 * R, 4 * R * 32 * KiB,
	       2 * R, 2 * R * 16 * KiB, R, R * 4 * KiB, R, R * 2 * KiB, 3 * R, 3 * R * 8 * KiB, R, R * KiB, 4 * R,
	       R * (1000 + 2000 + 4000 + 400), 3 * MiB + 256 * KiB, 256 * KiB, 3 * MiB, 3 * R, 2 * R, R, g_fail);
	return 0;
}
