// SPDX-License-Identifier: MIT
/* The traced entry points. Argument placements are in bpf/cuda_abi.h; the facts behind
 * them (checked on CUDA 13) in docs/cuda-abi.md. Notes:
 * - <<<>>> calls __cudaLaunchKernel, which jumps to cudaLaunchKernel: probing only the
 *   latter counts each launch once.
 * - __cudaGetKernel maps a host stub to the cudaKernel_t that launches then pass.
 * - cudaMemcpyPeer(Async) have no per-thread variants. */
#include "cuda_api.h"

#define RT(n, c, g)                                                                                                    \
	{                                                                                                              \
		.name = n, .cls = c, .runtime = true, .group = g                                                       \
	}
#define RTA(n, c, g)                                                                                                   \
	{                                                                                                              \
		.name = n, .cls = c, .runtime = true, .async = true, .group = g                                        \
	}
#define RTR(n, c, g)                                                                                                   \
	{                                                                                                              \
		.name = n, .cls = c, .runtime = true, .retprobe = true, .group = g                                     \
	}
#define DRV(n, c, g)                                                                                                   \
	{                                                                                                              \
		.name = n, .cls = c, .group = g                                                                        \
	}
#define DRVR(n, c, g)                                                                                                  \
	{                                                                                                              \
		.name = n, .cls = c, .retprobe = true, .group = g                                                      \
	}
#define DCPY(n, d, a)                                                                                                  \
	{                                                                                                              \
		.name = n, .cls = CC_DRV_MEMCPY, .dir = d, .async = a, .group = CG_COPY                                \
	}
#define DSET(n, e, a)                                                                                                  \
	{                                                                                                              \
		.name = n, .cls = CC_DRV_MEMSET, .elem = e, .async = a, .group = CG_COPY                               \
	}

const char *const cuda_group_names[CG__COUNT] = {"launches", "copies", "syncs", "allocations", "names"};

const struct cuda_api cuda_apis[] = {
    /* runtime: launches */
    RT("cudaLaunchKernel", CC_RT_LAUNCH, CG_LAUNCH),
    RT("cudaLaunchKernel_ptsz", CC_RT_LAUNCH, CG_LAUNCH),
    RT("cudaLaunchCooperativeKernel", CC_RT_LAUNCH, CG_LAUNCH),
    RT("cudaLaunchCooperativeKernel_ptsz", CC_RT_LAUNCH, CG_LAUNCH),
    RT("cudaLaunchKernelExC", CC_RT_LAUNCH_EX, CG_LAUNCH),
    RT("cudaLaunchKernelExC_ptsz", CC_RT_LAUNCH_EX, CG_LAUNCH),
    RT("cudaGraphLaunch", CC_GRAPH, CG_LAUNCH),
    RT("cudaGraphLaunch_ptsz", CC_GRAPH, CG_LAUNCH),
    /* runtime: copies and sets */
    RT("cudaMemcpy", CC_RT_MEMCPY, CG_COPY),
    RT("cudaMemcpy_ptds", CC_RT_MEMCPY, CG_COPY),
    RTA("cudaMemcpyAsync", CC_RT_MEMCPY, CG_COPY),
    RTA("cudaMemcpyAsync_ptsz", CC_RT_MEMCPY, CG_COPY),
    RT("cudaMemcpy2D", CC_RT_MEMCPY2D, CG_COPY),
    RT("cudaMemcpy2D_ptds", CC_RT_MEMCPY2D, CG_COPY),
    RTA("cudaMemcpy2DAsync", CC_RT_MEMCPY2D, CG_COPY),
    RTA("cudaMemcpy2DAsync_ptsz", CC_RT_MEMCPY2D, CG_COPY),
    RT("cudaMemcpyPeer", CC_RT_MEMCPY_PEER, CG_COPY),
    RTA("cudaMemcpyPeerAsync", CC_RT_MEMCPY_PEER, CG_COPY),
    RT("cudaMemset", CC_RT_MEMSET, CG_COPY),
    RT("cudaMemset_ptds", CC_RT_MEMSET, CG_COPY),
    RTA("cudaMemsetAsync", CC_RT_MEMSET, CG_COPY),
    RTA("cudaMemsetAsync_ptsz", CC_RT_MEMSET, CG_COPY),
    /* runtime: synchronization (entry and return: wait time) */
    RTR("cudaDeviceSynchronize", CC_SYNC, CG_SYNC),
    RTR("cudaStreamSynchronize", CC_SYNC, CG_SYNC),
    RTR("cudaStreamSynchronize_ptsz", CC_SYNC, CG_SYNC),
    RTR("cudaEventSynchronize", CC_SYNC, CG_SYNC),
    RTR("cudaStreamWaitEvent", CC_SYNC, CG_SYNC),
    RTR("cudaStreamWaitEvent_ptsz", CC_SYNC, CG_SYNC),
    /* runtime: memory */
    RTR("cudaMalloc", CC_ALLOC, CG_ALLOC),
    RTR("cudaMallocAsync", CC_ALLOC, CG_ALLOC),
    RTR("cudaMallocAsync_ptsz", CC_ALLOC, CG_ALLOC),
    RTR("cudaMallocManaged", CC_ALLOC, CG_ALLOC),
    RTR("cudaMallocHost", CC_ALLOC, CG_ALLOC),
    RT("cudaFree", CC_FREE, CG_ALLOC),
    RT("cudaFreeAsync", CC_FREE, CG_ALLOC),
    RT("cudaFreeAsync_ptsz", CC_FREE, CG_ALLOC),
    RT("cudaFreeHost", CC_FREE, CG_ALLOC),
    /* runtime: the kernel handle of a host stub */
    RTR("__cudaGetKernel", CC_NAME_RT_KERNEL, CG_NAME),

    /* driver: launches */
    DRV("cuLaunchKernel", CC_DRV_LAUNCH, CG_LAUNCH),
    DRV("cuLaunchKernel_ptsz", CC_DRV_LAUNCH, CG_LAUNCH),
    DRV("cuLaunchCooperativeKernel", CC_DRV_LAUNCH, CG_LAUNCH),
    DRV("cuLaunchCooperativeKernel_ptsz", CC_DRV_LAUNCH, CG_LAUNCH),
    DRV("cuLaunchKernelEx", CC_DRV_LAUNCH_EX, CG_LAUNCH),
    DRV("cuLaunchKernelEx_ptsz", CC_DRV_LAUNCH_EX, CG_LAUNCH),
    DRV("cuGraphLaunch", CC_GRAPH, CG_LAUNCH),
    DRV("cuGraphLaunch_ptsz", CC_GRAPH, CG_LAUNCH),
    /* driver: copies and sets */
    DCPY("cuMemcpyHtoD_v2", CUDA_DIR_HTOD, false),
    DCPY("cuMemcpyHtoD_v2_ptds", CUDA_DIR_HTOD, false),
    DCPY("cuMemcpyHtoDAsync_v2", CUDA_DIR_HTOD, true),
    DCPY("cuMemcpyHtoDAsync_v2_ptsz", CUDA_DIR_HTOD, true),
    DCPY("cuMemcpyDtoH_v2", CUDA_DIR_DTOH, false),
    DCPY("cuMemcpyDtoH_v2_ptds", CUDA_DIR_DTOH, false),
    DCPY("cuMemcpyDtoHAsync_v2", CUDA_DIR_DTOH, true),
    DCPY("cuMemcpyDtoHAsync_v2_ptsz", CUDA_DIR_DTOH, true),
    DCPY("cuMemcpyDtoD_v2", CUDA_DIR_DTOD, false),
    DCPY("cuMemcpyDtoD_v2_ptds", CUDA_DIR_DTOD, false),
    DCPY("cuMemcpyDtoDAsync_v2", CUDA_DIR_DTOD, true),
    DCPY("cuMemcpyDtoDAsync_v2_ptsz", CUDA_DIR_DTOD, true),
    DCPY("cuMemcpy", CUDA_DIR_DEFAULT, false),
    DCPY("cuMemcpy_ptds", CUDA_DIR_DEFAULT, false),
    DCPY("cuMemcpyAsync", CUDA_DIR_DEFAULT, true),
    DCPY("cuMemcpyAsync_ptsz", CUDA_DIR_DEFAULT, true),
    DRV("cuMemcpyPeer", CC_DRV_MEMCPY_PEER, CG_COPY),
    DRV("cuMemcpyPeer_ptds", CC_DRV_MEMCPY_PEER, CG_COPY),
    {.name = "cuMemcpyPeerAsync", .cls = CC_DRV_MEMCPY_PEER, .async = true, .group = CG_COPY},
    {.name = "cuMemcpyPeerAsync_ptsz", .cls = CC_DRV_MEMCPY_PEER, .async = true, .group = CG_COPY},
    DSET("cuMemsetD8_v2", 1, false),
    DSET("cuMemsetD8_v2_ptds", 1, false),
    DSET("cuMemsetD16_v2", 2, false),
    DSET("cuMemsetD16_v2_ptds", 2, false),
    DSET("cuMemsetD32_v2", 4, false),
    DSET("cuMemsetD32_v2_ptds", 4, false),
    DSET("cuMemsetD8Async", 1, true),
    DSET("cuMemsetD8Async_ptsz", 1, true),
    DSET("cuMemsetD16Async", 2, true),
    DSET("cuMemsetD16Async_ptsz", 2, true),
    DSET("cuMemsetD32Async", 4, true),
    DSET("cuMemsetD32Async_ptsz", 4, true),
    /* driver: synchronization */
    DRVR("cuStreamSynchronize", CC_SYNC, CG_SYNC),
    DRVR("cuStreamSynchronize_ptsz", CC_SYNC, CG_SYNC),
    DRVR("cuCtxSynchronize", CC_SYNC, CG_SYNC),
    DRVR("cuCtxSynchronize_v2", CC_SYNC, CG_SYNC),
    DRVR("cuEventSynchronize", CC_SYNC, CG_SYNC),
    /* driver: memory */
    DRVR("cuMemAlloc_v2", CC_ALLOC, CG_ALLOC),
    DRVR("cuMemAllocAsync", CC_ALLOC, CG_ALLOC),
    DRVR("cuMemAllocAsync_ptsz", CC_ALLOC, CG_ALLOC),
    DRV("cuMemFree_v2", CC_FREE, CG_ALLOC),
    DRV("cuMemFreeAsync", CC_FREE, CG_ALLOC),
    DRV("cuMemFreeAsync_ptsz", CC_FREE, CG_ALLOC),
    /* driver: kernel names */
    DRVR("cuModuleGetFunction", CC_NAME_MODULE, CG_NAME),
    DRVR("cuLibraryGetKernel", CC_NAME_MODULE, CG_NAME),
    DRVR("cuKernelGetFunction", CC_NAME_KERNEL_FN, CG_NAME),
};

const int cuda_num_apis = (int)(sizeof(cuda_apis) / sizeof(cuda_apis[0]));

uint64_t cuda_api__cookie(int i)
{
	const struct cuda_api *a = &cuda_apis[i];

	return CUDA_COOKIE_WITH_GROUP(CUDA_COOKIE(i, a->cls, a->dir, a->elem, a->async, a->runtime), a->group);
}
