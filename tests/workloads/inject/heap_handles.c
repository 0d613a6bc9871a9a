// SPDX-License-Identifier: MIT
/* Launches through handles that are heap pointers, the way a real driver hands them out
 * (a cudaKernel_t from __cudaGetKernel under lazy loading, a CUfunction), which no symbol
 * of the process names. Without a driver the stub libcudart fails the calls at once, but
 * gpubpf's probes see the handle they pass all the same.
 *
 *   heap_handles stub N    N launches from __device_stub__Z11heap_kernelPfi, the frame
 *                          nvcc generates for kernel heap_kernel(float*, int): the stack
 *                          names the kernel
 *   heap_handles cupti N [DELAY_MS]
 *                          N launches from a site with no stub frame (inlined, as in
 *                          PyTorch's release builds), each announced to the injection
 *                          library's synthetic CUPTI with its symbolName
 *                          _Z12cupti_kernelv and its params: CUPTI names the kernel;
 *                          DELAY_MS after the session attached (its device-time windows
 *                          running by then, in default mode)
 *   heap_handles driver N LIBCUDA
 *                          N cuLaunchKernel of a CUfunction from cuModuleGetFunction of a
 *                          kernel whose mangled name is 278 bytes (2,049 demangled), with
 *                          LIBCUDA (the stub: the handle is pre-filled, 0xf00d)
 * Prints "heap_handles: mode=... launches=N handle=0x...". libcudart is dlopen'd
 * (HEAP_CUDART: the toolkit's). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#include "../../../bpf/cupti.h"

#ifndef HEAP_CUDART
#define HEAP_CUDART "libcudart.so.13"
#endif

int gpubpf_inject_test_start(void);
int gpubpf_inject_test_state(void);
void gpubpf_inject_test_callback(uint32_t domain, uint32_t cbid, const CUpti_CallbackData *cb);

struct wl_dim3 {
	unsigned int x, y, z;
};
typedef int (*launch_fn)(const void *func, struct wl_dim3 grid, struct wl_dim3 block, void **args, size_t smem,
			 void *stream);

typedef int (*get_function_fn)(void **f, void *mod, const char *name);
typedef int (*cu_launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			    unsigned smem, void *stream, void **params, void **extra);

/* A PyTorch-like kernel's mangled name, longer than any fixed buffer it once went through. */
static const char long_name[] =
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_7FunctorISt5tupleIJfdSt3mapINSt7__cxx1112basic_"
    "stringIcSt11char_traitsIcESaIcEEESt5arrayIS3_IJlsSA_EELm7EESt4lessISA_ESaISt4pairIKSA_SD_EEEEELi3EEESB_IS3_IJS4_"
    "IiSA_SE_IiESaISG_IKiSA_EEESB_IPcLm3EES3_IJffSA_EEEELm2EEEEviT0_T1_";

static launch_fn launch;
static void *handle;

/* What nvcc emits for a kernel: a host stub named after it that launches the handle. */
__attribute__((noinline)) void __device_stub__Z11heap_kernelPfi(float *p, int n)
{
	void *args[2] = {&p, &n};

	launch(handle, (struct wl_dim3){1, 1, 1}, (struct wl_dim3){32, 1, 1}, args, 0, NULL);
}

/* PyTorch's launch sites: the stub inlined away, CUPTI's callback around the call. */
__attribute__((noinline)) static void inlined_site(uint32_t corr)
{
	cudaLaunchKernel_v7000_params params = {.func = handle};
	CUpti_CallbackData cb;
	void *args[1] = {NULL};

	memset(&cb, 0, sizeof(cb));
	cb.functionName = "cudaLaunchKernel";
	cb.symbolName = "_Z12cupti_kernelv";
	cb.functionParams = &params;
	cb.correlationId = corr;
	cb.callbackSite = CUPTI_API_ENTER;
	gpubpf_inject_test_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &cb);
	launch(handle, (struct wl_dim3){1, 1, 1}, (struct wl_dim3){32, 1, 1}, args, 0, NULL);
	cb.callbackSite = CUPTI_API_EXIT;
	gpubpf_inject_test_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &cb);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "stub";
	int n = argc > 2 ? atoi(argv[2]) : 20;
	void *lib;
	float x = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	handle = malloc(64); /* a heap address, like the driver's */
	lib = dlopen(HEAP_CUDART, RTLD_NOW);
	launch = lib ? (launch_fn)dlsym(lib, "cudaLaunchKernel") : NULL;
	if (!launch) {
		fprintf(stderr, "heap_handles: no cudaLaunchKernel in %s: %s\n", HEAP_CUDART, dlerror());
		return 2;
	}
	if (!strcmp(mode, "stub")) {
		for (int i = 0; i < n; i++)
			__device_stub__Z11heap_kernelPfi(&x, i);
	} else if (!strcmp(mode, "cupti")) {
		struct timespec ts = {0, 100000000};

		if (gpubpf_inject_test_start())
			return 1;
		for (int w = 0; gpubpf_inject_test_state() != DEV_ST_SYNTHETIC; w++) {
			if (w > 300) {
				fprintf(stderr, "heap_handles: no gpubpf session attached\n");
				return 1;
			}
			nanosleep(&ts, NULL);
		}
		if (argc > 3) {
			long ms = atol(argv[3]);
			struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};

			nanosleep(&d, NULL);
		}
		for (int i = 0; i < n; i++)
			inlined_site(5000 + (uint32_t)i);
	} else if (!strcmp(mode, "driver") && argc > 3) {
		void *drv = dlopen(argv[3], RTLD_NOW), *f = (void *)0xf00d;
		get_function_fn get = drv ? (get_function_fn)dlsym(drv, "cuModuleGetFunction") : NULL;
		cu_launch_fn cu_launch = drv ? (cu_launch_fn)dlsym(drv, "cuLaunchKernel") : NULL;

		if (!get || !cu_launch) {
			fprintf(stderr, "heap_handles: no driver entry points in %s\n", argv[3]);
			return 2;
		}
		get(&f, (void *)0xa0d, long_name);
		for (int i = 0; i < n; i++)
			cu_launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
		handle = f;
	} else {
		fprintf(stderr, "usage: heap_handles stub|cupti [N] | heap_handles driver N LIBCUDA\n");
		return 2;
	}
	printf("heap_handles: mode=%s launches=%d handle=%p\n", mode, n, handle);
	{
		struct timespec ts = {1, 200000000}; /* symbolized while it lives */

		nanosleep(&ts, NULL);
	}
	return 0;
}
