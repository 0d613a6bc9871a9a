// abi_wl: calls every traced CUDA runtime entry point exactly once (per
// GPUBPF_WL_REPEAT) with distinctive argument values, so that a test (or gdb)
// can check that each argument is decoded from the right register / stack slot.
// Built three ways: abi_wl_static (nvcc default, static cudart), abi_wl_shared
// (-cudart shared) and abi_wl_ptsz (static, --default-stream per-thread: calls go
// to the *_ptsz / *_ptds entry points). See docs/cuda-abi.md.
//
// Expected argument values (S = the stream: a real one, or WL_FAKE_STREAM
// 0x5000 when cudaStreamCreate fails as it does without a driver):
//   cudaLaunchKernel(abi_kernel, grid 11,12,13, block 21,22,23, args, smem 77, S)
//   cudaLaunchKernelExC(cfg{grid 31,32,33 block 41,42,43 smem 99 S attrs numAttrs=1}, abi_kernel, args)
//   cudaLaunchCooperativeKernel(abi_kernel, grid 51,52,53, block 61,62,63, args, smem 88, S)
//   cudaGraphLaunch(exec (fake 0x6000 here), S)
//   cudaMemcpy(.., 1001, HtoD=1)
//   cudaMemcpyAsync(.., 1002, DtoH=2, S); (.., 1003, HtoD, 0); (.., 1004, HtoD, cudaStreamPerThread=0x2);
//                  (.., 1005, HtoD, cudaStreamLegacy=0x1)
//   cudaMemcpy2D(dst, dpitch 512, src, spitch 256, width 100, height 7, DtoD=3)        bytes 700
//   cudaMemcpy2DAsync(dst, 512, src, 256, width 120, height 9, HtoD=1, S)             bytes 1080
//   cudaMemcpyPeer(dst, 1, src, 0, 1006); cudaMemcpyPeerAsync(dst, 1, src, 0, 1007, S)
//   cudaMemset(p, 0x5a, 1008); cudaMemsetAsync(p, 0x5b, 1009, S)
//   cudaMalloc(&p, 1010); cudaFree(p); cudaMallocAsync(&p, 1011, S); cudaFreeAsync(p, S)
//   cudaMallocManaged(&p, 1012, cudaMemAttachHost=2); cudaMallocHost(&p, 1013); cudaFreeHost(p)
//   cudaDeviceSynchronize(); cudaStreamSynchronize(S); cudaEventSynchronize(E (fake 0x7000 here))
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

extern "C" int wl_repeat(void);
extern "C" void wl_wait(int argc, char **argv);

#define NOINLINE __attribute__((noinline))
#define WL_FAKE_STREAM ((cudaStream_t)0x5000)
#define WL_FAKE_GRAPHEXEC ((cudaGraphExec_t)0x6000)
#define WL_FAKE_EVENT ((cudaEvent_t)0x7000)
#define WL_FAKE_DEV(i) ((void *)(0x7e0000000000ull + (uint64_t)(i) * 0x100000ull))

static int g_fail;

__global__ void abi_kernel(int n, float *p)
{
	if (threadIdx.x == 0 && n < 0)
		p[0] = 1.0f;
}

static void chk(cudaError_t e)
{
	if (e != cudaSuccess)
		g_fail++;
}

static bool no_driver(cudaError_t e)
{
	return e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorStubLibrary;
}

NOINLINE static void abi_launches(cudaStream_t s, cudaGraphExec_t exec, float *d)
{
	int n = 1;
	void *args[] = {&n, &d};
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute attr[1] = {};

	chk(cudaLaunchKernel((const void *)abi_kernel, dim3(11, 12, 13), dim3(21, 22, 23), args, 77, s));
	cfg.gridDim = dim3(31, 32, 33);
	cfg.blockDim = dim3(41, 42, 43);
	cfg.dynamicSmemBytes = 99;
	cfg.stream = s;
	attr[0].id = cudaLaunchAttributePriority;
	attr[0].val.priority = 0;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	chk(cudaLaunchKernelExC(&cfg, (const void *)abi_kernel, args));
	chk(cudaLaunchCooperativeKernel((const void *)abi_kernel, dim3(51, 52, 53), dim3(61, 62, 63), args, 88, s));
	chk(cudaGraphLaunch(exec, s));
}

NOINLINE static void abi_copies(cudaStream_t s, char *d0, char *d1, char *h)
{
	chk(cudaMemcpy(d0, h, 1001, cudaMemcpyHostToDevice));
	chk(cudaMemcpyAsync(h, d0, 1002, cudaMemcpyDeviceToHost, s));
	chk(cudaMemcpyAsync(d0, h, 1003, cudaMemcpyHostToDevice, 0));
	chk(cudaMemcpyAsync(d0, h, 1004, cudaMemcpyHostToDevice, cudaStreamPerThread));
	chk(cudaMemcpyAsync(d0, h, 1005, cudaMemcpyHostToDevice, cudaStreamLegacy));
	chk(cudaMemcpy2D(d1, 512, d0, 256, 100, 7, cudaMemcpyDeviceToDevice));
	chk(cudaMemcpy2DAsync(d1, 512, h, 256, 120, 9, cudaMemcpyHostToDevice, s));
	chk(cudaMemcpyPeer(d1, 1, d0, 0, 1006));
	chk(cudaMemcpyPeerAsync(d1, 1, d0, 0, 1007, s));
	chk(cudaMemset(d0, 0x5a, 1008));
	chk(cudaMemsetAsync(d0, 0x5b, 1009, s));
}

NOINLINE static void abi_allocs(cudaStream_t s)
{
	void *p = WL_FAKE_DEV(10);

	chk(cudaMalloc(&p, 1010));
	chk(cudaFree(p));
	p = WL_FAKE_DEV(11);
	chk(cudaMallocAsync(&p, 1011, s));
	chk(cudaFreeAsync(p, s));
	p = WL_FAKE_DEV(12);
	chk(cudaMallocManaged(&p, 1012, cudaMemAttachHost));
	chk(cudaFree(p));
	p = (void *)0x600000000000ull;
	chk(cudaMallocHost(&p, 1013));
	chk(cudaFreeHost(p));
}

NOINLINE static void abi_syncs(cudaStream_t s, cudaEvent_t ev)
{
	chk(cudaDeviceSynchronize());
	chk(cudaStreamSynchronize(s));
	chk(cudaEventSynchronize(ev));
}

int main(int argc, char **argv)
{
	int reps = wl_repeat();
	cudaStream_t s = WL_FAKE_STREAM;
	cudaGraphExec_t exec = WL_FAKE_GRAPHEXEC;
	cudaEvent_t ev = WL_FAKE_EVENT;
	void *d0 = WL_FAKE_DEV(0), *d1 = WL_FAKE_DEV(1);
	static char h[64 << 10];
	cudaError_t e;

	wl_wait(argc, argv);
	// Setup: not part of the traced set (except cudaMalloc/cudaFree, counted below).
	e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	if (e != cudaSuccess && no_driver(e))
		s = WL_FAKE_STREAM;
	if (cudaEventCreate(&ev) == cudaSuccess)
		cudaEventRecord(ev, s);
	chk(cudaMalloc(&d0, 64 << 10));
	chk(cudaMalloc(&d1, 64 << 10));
	{
		cudaGraph_t g;
		cudaGraphNode_t node;
		if (cudaGraphCreate(&g, 0) == cudaSuccess && cudaGraphAddEmptyNode(&node, g, NULL, 0) == cudaSuccess)
			cudaGraphInstantiate(&exec, g, 0);
	}
	for (int i = 0; i < reps; i++) {
		abi_launches(s, exec, (float *)d0);
		abi_copies(s, (char *)d0, (char *)d1, h);
		abi_allocs(s);
		abi_syncs(s, ev);
	}
	chk(cudaFree(d0));
	chk(cudaFree(d1));
	printf("abi_wl: reps=%d launch=%d launch_exc=%d launch_coop=%d graph_launch=%d memcpy=%d memcpy_async=%d "
	       "memcpy2d=%d memcpy2d_async=%d memcpy_peer=%d memcpy_peer_async=%d memset=%d memset_async=%d "
	       "malloc=%d free=%d malloc_async=%d free_async=%d malloc_managed=%d malloc_host=%d free_host=%d "
	       "device_sync=%d stream_sync=%d event_sync=%d failed=%d\n",
	       reps, reps, reps, reps, reps, reps, 4 * reps, reps, reps, reps, reps, reps, reps, 2 + reps, 2 + 2 * reps,
	       reps, reps, reps, reps, reps, reps, reps, reps, g_fail);
	return 0;
}
