// runtime_wl: the CUDA runtime workload with known call sites and counts.
// Built twice: runtime_wl_static (nvcc default: static cudart) and
// runtime_wl_shared (-cudart shared). Start-up convention: wl_common.c.
//
// Expected counts per run, R = GPUBPF_WL_REPEAT (default 1):
//   launch_a   100R x saxpy_kernel<float>          <<<4, 256>>>            default stream (0)
//   launch_b    50R x saxpy_kernel<double>         <<<(8,2,1), 128>>>      default stream (0)
//   launch_c    30R x gpubpf_demo::scale_kernel    <<<1, 64, 0, s>>>       stream s
//   => cudaLaunchKernel 180R (each <<<>>> is __cudaLaunchKernel, a tail jump to cudaLaunchKernel)
//   do_htod      4R x cudaMemcpy 1 MiB   HtoD (kind 1)
//   do_dtoh      2R x cudaMemcpy 512 KiB DtoH (kind 2)
//   do_dtod      1R x cudaMemcpy 256 KiB DtoD (kind 3)        => cudaMemcpy 7R
//   do_async     3R x cudaMemcpyAsync 64 KiB HtoD on stream s
//   do_memset    2R x cudaMemset 128 KiB
//   do_syncs     5R x cudaDeviceSynchronize, 3R x cudaStreamSynchronize(s)
//   do_allocs    cudaMalloc x5 (1 MiB, 1 MiB, 2 MiB, 512 KiB, 4 MiB = 8.5 MiB), not scaled by R
//   do_frees     cudaFree x2 (512 KiB, 4 MiB) => 4 MiB (x, y, z) still allocated at exit
//   do_pinned    cudaMallocHost 1 MiB x1, cudaFreeHost x1
// Without a driver every call fails at once; output pointers are pre-filled with
// fake addresses (and s with 0x5000) that the calls leave untouched, so alloc/free
// pairs and stream values are still consistent for a tracer.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

extern "C" int wl_repeat(void);
extern "C" void wl_wait(int argc, char **argv);

#define NOINLINE __attribute__((noinline))
#define WL_FAKE_STREAM ((cudaStream_t)0x5000)
#define WL_FAKE_DEV(i) ((void *)(0x7e0000000000ull + (uint64_t)(i) * 0x1000000ull))
#define KiB 1024u
#define MiB (1024u * 1024u)

template <typename T> __global__ void saxpy_kernel(int n, T a, const T *x, T *y)
{
	int i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = a * x[i] + y[i];
}

namespace gpubpf_demo {
__global__ void scale_kernel(float *p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] *= 2.0f;
}
} // namespace gpubpf_demo

static int g_fail;

static void chk(cudaError_t e)
{
	if (e != cudaSuccess)
		g_fail++;
}

NOINLINE void launch_a(int n, float *x, float *y)
{
	for (int i = 0; i < n; i++)
		saxpy_kernel<float><<<4, 256>>>(1024, 2.0f, x, y);
	chk(cudaGetLastError());
}

NOINLINE void launch_b(int n, double *x, double *y)
{
	for (int i = 0; i < n; i++)
		saxpy_kernel<double><<<dim3(8, 2, 1), 128>>>(2048, 3.0, x, y);
	chk(cudaGetLastError());
}

NOINLINE void launch_c(int n, float *p, cudaStream_t s)
{
	for (int i = 0; i < n; i++)
		gpubpf_demo::scale_kernel<<<1, 64, 0, s>>>(p, 64);
	chk(cudaGetLastError());
}

NOINLINE void do_htod(int n, void *d, const void *h)
{
	for (int i = 0; i < n; i++)
		chk(cudaMemcpy(d, h, 1 * MiB, cudaMemcpyHostToDevice));
}

NOINLINE void do_dtoh(int n, void *h, const void *d)
{
	for (int i = 0; i < n; i++)
		chk(cudaMemcpy(h, d, 512 * KiB, cudaMemcpyDeviceToHost));
}

NOINLINE void do_dtod(int n, void *dst, const void *src)
{
	for (int i = 0; i < n; i++)
		chk(cudaMemcpy(dst, src, 256 * KiB, cudaMemcpyDeviceToDevice));
}

NOINLINE void do_async(int n, void *d, const void *h, cudaStream_t s)
{
	for (int i = 0; i < n; i++)
		chk(cudaMemcpyAsync(d, h, 64 * KiB, cudaMemcpyHostToDevice, s));
}

NOINLINE void do_memset(int n, void *d)
{
	for (int i = 0; i < n; i++)
		chk(cudaMemset(d, 0, 128 * KiB));
}

NOINLINE void do_syncs(int ndev, int nstream, cudaStream_t s)
{
	for (int i = 0; i < ndev; i++)
		chk(cudaDeviceSynchronize());
	for (int i = 0; i < nstream; i++)
		chk(cudaStreamSynchronize(s));
}

NOINLINE void do_allocs(void **x, void **y, void **z, void **tmp, void **w)
{
	chk(cudaMalloc(x, 1 * MiB));
	chk(cudaMalloc(y, 1 * MiB));
	chk(cudaMalloc(z, 2 * MiB));
	chk(cudaMalloc(tmp, 512 * KiB));
	chk(cudaMalloc(w, 4 * MiB));
}

NOINLINE void do_frees(void *tmp, void *w)
{
	chk(cudaFree(tmp));
	chk(cudaFree(w));
}

NOINLINE void *do_pinned_alloc(void)
{
	void *p = (void *)0x600000000000ull;

	chk(cudaMallocHost(&p, 1 * MiB));
	return p;
}

NOINLINE void do_pinned_free(void *p)
{
	chk(cudaFreeHost(p));
}

int main(int argc, char **argv)
{
	int R = wl_repeat();
	void *x = WL_FAKE_DEV(1), *y = WL_FAKE_DEV(2), *z = WL_FAKE_DEV(3), *tmp = WL_FAKE_DEV(4), *w = WL_FAKE_DEV(5);
	cudaStream_t s = WL_FAKE_STREAM;
	void *h = calloc(1, 1 * MiB), *pinned;
	cudaError_t e;

	wl_wait(argc, argv);
	e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	if (e != cudaSuccess)
		s = WL_FAKE_STREAM;
	do_allocs(&x, &y, &z, &tmp, &w);
	pinned = do_pinned_alloc();
	do_htod(4 * R, x, h);
	do_memset(2 * R, y);
	launch_a(100 * R, (float *)x, (float *)y);
	launch_b(50 * R, (double *)x, (double *)y);
	launch_c(30 * R, (float *)z, s);
	do_async(3 * R, x, pinned, s);
	do_syncs(5 * R, 3 * R, s);
	do_dtoh(2 * R, h, y);
	do_dtod(1 * R, z, x);
	do_frees(tmp, w);
	do_pinned_free(pinned);
	free(h);
	printf("runtime_wl: repeat=%d launch=%d launch_a=%d launch_b=%d launch_c=%d memcpy=%d htod_bytes=%u "
	       "dtoh_bytes=%u dtod_bytes=%u memcpy_async=%d memcpy_async_bytes=%u memset=%d memset_bytes=%u "
	       "device_sync=%d stream_sync=%d malloc=5 malloc_bytes=%u free=2 free_bytes=%u inuse_bytes=%u "
	       "malloc_host=1 malloc_host_bytes=%u free_host=1 failed=%d\n",
	       R, 180 * R, 100 * R, 50 * R, 30 * R, 7 * R, 4 * R * MiB, 2 * R * 512 * KiB, R * 256 * KiB, 3 * R,
	       3 * R * 64 * KiB, 2 * R, 2 * R * 128 * KiB, 5 * R, 3 * R, 8 * MiB + 512 * KiB, 4 * MiB + 512 * KiB,
	       4 * MiB, 1 * MiB, g_fail);
	return 0;
}
