/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* cuda_abi.h: where each argument of each traced CUDA runtime / driver entry point
 * lives at function entry on x86-64 (System V ABI), for uprobe programs.
 *
 * The one documented place for this knowledge. Every placement below was checked
 * on this machine (CUDA 13.0, gcc 12) with gdb (`break *fn`, `info registers`,
 * `x/4gx $rsp`) and with tracefs uprobe fetch-args on the test workloads
 * (tests/workloads/cuda/abi_wl.cu, driver_wl.c); see docs/cuda-abi.md.
 *
 * Include after "vmlinux.h", <bpf/bpf_helpers.h> and <bpf/bpf_tracing.h>, with
 * -D__TARGET_ARCH_x86. Programs get `struct pt_regs *ctx` (SEC("uprobe")).
 *
 * ABI rules used here:
 * - integer/pointer args 1..6: rdi, rsi, rdx, rcx, r8, r9 (PT_REGS_PARM1..6);
 *   the 7th and later are on the stack: at entry [rsp] is the return address and
 *   stack arg k (1-based) is at rsp + 8*k.
 * - a 32-bit argument (unsigned int, int, enum) only defines the low 32 bits of
 *   its register or stack slot: the upper half is garbage, so truncate.
 * - dim3 (12 bytes, three unsigned ints) by value takes two eightbytes:
 *   x | y << 32 in one register, z in the low 32 bits of the next.
 *   cudaLaunchKernel(func, grid, block, ...) therefore has grid in rsi+rdx,
 *   block in rcx+r8, args in r9, and sharedMem/stream on the stack.
 * - At a uprobe on a function's first instruction, rbp still belongs to the
 *   caller, so a frame-pointer walk from (ip, rbp) skips the direct caller:
 *   [rsp] (cuda_abi_ret_addr) is that caller and must be added as frame 1.
 */
#ifndef GPUBPF_CUDA_ABI_H
#define GPUBPF_CUDA_ABI_H

/* libbpf < 1.2 (Debian 12 ships 1.1) has no PT_REGS_PARM6. */
#ifndef PT_REGS_PARM6
#define PT_REGS_PARM6(x) (__PT_REGS_CAST(x)->r9)
#endif

/* enum cudaMemcpyKind (driver_types.h, CUDA 13), 4 bytes. */
#define CUDA_ABI_MEMCPY_HTOH 0
#define CUDA_ABI_MEMCPY_HTOD 1
#define CUDA_ABI_MEMCPY_DTOH 2
#define CUDA_ABI_MEMCPY_DTOD 3
#define CUDA_ABI_MEMCPY_DEFAULT 4 /* direction inferred from the pointers (UVA) */

/* Special stream handles (driver_types.h / cuda.h). 0 is the default stream:
 * legacy for cudaX / cuX, per-thread for the cudaX_ptsz / cudaX_ptds and
 * cuX_ptsz / cuX_v2_ptds entry points (nvcc --default-stream per-thread). */
#define CUDA_ABI_STREAM_DEFAULT 0x0ULL
#define CUDA_ABI_STREAM_LEGACY 0x1ULL	  /* cudaStreamLegacy, CU_STREAM_LEGACY */
#define CUDA_ABI_STREAM_PER_THREAD 0x2ULL /* cudaStreamPerThread, CU_STREAM_PER_THREAD */

/* Word k (1-based) of the caller's outgoing stack arguments, at function entry. */
static __always_inline __u64 cuda_abi_stack_arg(struct pt_regs *ctx, int k)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)(PT_REGS_SP(ctx) + 8 * k));
	return v;
}

/* The return address at function entry: the direct caller's frame, which a
 * frame-pointer walk from a function-entry uprobe misses. */
static __always_inline __u64 cuda_abi_ret_addr(struct pt_regs *ctx)
{
	return cuda_abi_stack_arg(ctx, 0);
}

/* ---- kernel launches --------------------------------------------------------------- */

struct cuda_abi_launch {
	__u64 func; /* runtime: host stub or cudaKernel_t handle; driver: CUfunction */
	__u64 stream;
	__u64 args; /* void **args / kernelParams */
	__u64 shared_mem;
	__u32 grid[3];
	__u32 block[3];
};

/* cudaLaunchKernel, cudaLaunchKernel_ptsz, cudaLaunchCooperativeKernel(_ptsz):
 *   (const void *func, dim3 grid, dim3 block, void **args, size_t sharedMem, cudaStream_t stream)
 *   func=rdi grid.x|y<<32=rsi grid.z=edx block.x|y<<32=rcx block.z=r8d args=r9
 *   sharedMem=[rsp+8] stream=[rsp+16]
 * For a <<<>>> launch (CUDA 13) func is the cudaKernel_t that __cudaGetKernel
 * returned for the host stub (without a driver: the host stub itself). */
static __always_inline void cuda_abi_runtime_launch(struct pt_regs *ctx, struct cuda_abi_launch *l)
{
	__u64 gxy = PT_REGS_PARM2(ctx), bxy = PT_REGS_PARM4(ctx);

	l->func = PT_REGS_PARM1(ctx);
	l->grid[0] = (__u32)gxy;
	l->grid[1] = (__u32)(gxy >> 32);
	l->grid[2] = (__u32)PT_REGS_PARM3(ctx);
	l->block[0] = (__u32)bxy;
	l->block[1] = (__u32)(bxy >> 32);
	l->block[2] = (__u32)PT_REGS_PARM5(ctx);
	l->args = PT_REGS_PARM6(ctx);
	l->shared_mem = cuda_abi_stack_arg(ctx, 1);
	l->stream = cuda_abi_stack_arg(ctx, 2);
}

/* cudaLaunchConfig_t (driver_types.h), sizeof 56:
 *   0 dim3 gridDim, 12 dim3 blockDim, 24 size_t dynamicSmemBytes,
 *   32 cudaStream_t stream, 40 cudaLaunchAttribute *attrs, 48 unsigned numAttrs */
#define CUDA_ABI_LAUNCH_CONFIG_GRID 0
#define CUDA_ABI_LAUNCH_CONFIG_BLOCK 12
#define CUDA_ABI_LAUNCH_CONFIG_SMEM 24
#define CUDA_ABI_LAUNCH_CONFIG_STREAM 32
#define CUDA_ABI_LAUNCH_CONFIG_ATTRS 40
#define CUDA_ABI_LAUNCH_CONFIG_NUM_ATTRS 48
#define CUDA_ABI_LAUNCH_CONFIG_SIZE 56

/* cudaLaunchKernelExC, cudaLaunchKernelExC_ptsz:
 *   (const cudaLaunchConfig_t *config, const void *func, void **args)
 *   config=rdi func=rsi args=rdx. Returns 0 or a negative errno (unreadable config). */
static __always_inline int cuda_abi_runtime_launch_ex(struct pt_regs *ctx, struct cuda_abi_launch *l)
{
	struct {
		__u32 grid[3];
		__u32 block[3];
		__u64 smem;
		__u64 stream;
	} c;
	int err;

	l->func = PT_REGS_PARM2(ctx);
	l->args = PT_REGS_PARM3(ctx);
	err = bpf_probe_read_user(&c, sizeof(c), (void *)PT_REGS_PARM1(ctx));
	if (err)
		return err;
	l->grid[0] = c.grid[0];
	l->grid[1] = c.grid[1];
	l->grid[2] = c.grid[2];
	l->block[0] = c.block[0];
	l->block[1] = c.block[1];
	l->block[2] = c.block[2];
	l->shared_mem = c.smem;
	l->stream = c.stream;
	return 0;
}

/* cuLaunchKernel, cuLaunchKernel_ptsz:
 *   (CUfunction f, unsigned gx, gy, gz, bx, by, bz, unsigned sharedMemBytes,
 *    CUstream hStream, void **kernelParams, void **extra)
 *   f=rdi gx=esi gy=edx gz=ecx bx=r8d by=r9d bz=[rsp+8] sharedMemBytes=[rsp+16] (32-bit)
 *   hStream=[rsp+24] kernelParams=[rsp+32] extra=[rsp+40]
 * cuLaunchCooperativeKernel(_ptsz): the same without `extra`. */
static __always_inline void cuda_abi_driver_launch(struct pt_regs *ctx, struct cuda_abi_launch *l)
{
	l->func = PT_REGS_PARM1(ctx);
	l->grid[0] = (__u32)PT_REGS_PARM2(ctx);
	l->grid[1] = (__u32)PT_REGS_PARM3(ctx);
	l->grid[2] = (__u32)PT_REGS_PARM4(ctx);
	l->block[0] = (__u32)PT_REGS_PARM5(ctx);
	l->block[1] = (__u32)PT_REGS_PARM6(ctx);
	l->block[2] = (__u32)cuda_abi_stack_arg(ctx, 1);
	l->shared_mem = (__u32)cuda_abi_stack_arg(ctx, 2);
	l->stream = cuda_abi_stack_arg(ctx, 3);
	l->args = cuda_abi_stack_arg(ctx, 4);
}

/* CUlaunchConfig (cuda.h), sizeof 56: 0 gridDimX, 4 gridDimY, 8 gridDimZ,
 * 12 blockDimX, 16 blockDimY, 20 blockDimZ, 24 unsigned sharedMemBytes, (pad),
 * 32 CUstream hStream, 40 CUlaunchAttribute *attrs, 48 unsigned numAttrs.
 * The first 40 bytes match cudaLaunchConfig_t except that sharedMemBytes is 32-bit. */
#define CUDA_ABI_CU_LAUNCH_CONFIG_SIZE 56

/* cuLaunchKernelEx, cuLaunchKernelEx_ptsz:
 *   (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
 *   config=rdi f=rsi kernelParams=rdx extra=rcx */
static __always_inline int cuda_abi_driver_launch_ex(struct pt_regs *ctx, struct cuda_abi_launch *l)
{
	struct {
		__u32 grid[3];
		__u32 block[3];
		__u32 smem;
		__u32 pad;
		__u64 stream;
	} c;
	int err;

	l->func = PT_REGS_PARM2(ctx);
	l->args = PT_REGS_PARM3(ctx);
	err = bpf_probe_read_user(&c, sizeof(c), (void *)PT_REGS_PARM1(ctx));
	if (err)
		return err;
	l->grid[0] = c.grid[0];
	l->grid[1] = c.grid[1];
	l->grid[2] = c.grid[2];
	l->block[0] = c.block[0];
	l->block[1] = c.block[1];
	l->block[2] = c.block[2];
	l->shared_mem = c.smem;
	l->stream = c.stream;
	return 0;
}

/* cudaGraphLaunch(_ptsz)(cudaGraphExec_t exec, cudaStream_t stream): exec=rdi stream=rsi
 * cuGraphLaunch(_ptsz)(CUgraphExec exec, CUstream stream):          exec=rdi stream=rsi */
#define CUDA_ABI_GRAPH_EXEC(ctx) ((__u64)PT_REGS_PARM1(ctx))
#define CUDA_ABI_GRAPH_STREAM(ctx) ((__u64)PT_REGS_PARM2(ctx))

/* ---- copies and sets ---------------------------------------------------------------- */

/* cudaMemcpy(_ptds)(void *dst, const void *src, size_t count, cudaMemcpyKind kind)
 *   dst=rdi src=rsi count=rdx kind=ecx
 * cudaMemcpyAsync(_ptsz)(dst, src, count, kind, cudaStream_t stream): + stream=r8 */
#define CUDA_ABI_MEMCPY_BYTES(ctx) ((__u64)PT_REGS_PARM3(ctx))
#define CUDA_ABI_MEMCPY_KIND(ctx) ((__u32)PT_REGS_PARM4(ctx))
#define CUDA_ABI_MEMCPY_ASYNC_STREAM(ctx) ((__u64)PT_REGS_PARM5(ctx))

/* cudaMemcpy2D(_ptds)(void *dst, size_t dpitch, const void *src, size_t spitch,
 *                     size_t width, size_t height, cudaMemcpyKind kind)
 *   dst=rdi dpitch=rsi src=rdx spitch=rcx width=r8 height=r9 kind=[rsp+8] (32-bit)
 *   bytes moved = width * height
 * cudaMemcpy2DAsync(_ptsz)(..., kind, cudaStream_t stream): + stream=[rsp+16] */
#define CUDA_ABI_MEMCPY2D_BYTES(ctx) ((__u64)PT_REGS_PARM5(ctx) * (__u64)PT_REGS_PARM6(ctx))
#define CUDA_ABI_MEMCPY2D_KIND(ctx) ((__u32)cuda_abi_stack_arg(ctx, 1))
#define CUDA_ABI_MEMCPY2D_ASYNC_STREAM(ctx) (cuda_abi_stack_arg(ctx, 2))

/* cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
 *   dst=rdi dstDevice=esi src=rdx srcDevice=ecx count=r8
 * cudaMemcpyPeerAsync(..., count, cudaStream_t stream): + stream=r9
 * (CUDA 13 has no _ptds/_ptsz variants of these two.) Always device to device. */
#define CUDA_ABI_MEMCPY_PEER_BYTES(ctx) ((__u64)PT_REGS_PARM5(ctx))
#define CUDA_ABI_MEMCPY_PEER_DST_DEV(ctx) ((__s32)PT_REGS_PARM2(ctx))
#define CUDA_ABI_MEMCPY_PEER_SRC_DEV(ctx) ((__s32)PT_REGS_PARM4(ctx))
#define CUDA_ABI_MEMCPY_PEER_ASYNC_STREAM(ctx) ((__u64)PT_REGS_PARM6(ctx))

/* cudaMemset(_ptds)(void *devPtr, int value, size_t count): count=rdx
 * cudaMemsetAsync(_ptsz)(devPtr, value, count, cudaStream_t stream): + stream=rcx */
#define CUDA_ABI_MEMSET_BYTES(ctx) ((__u64)PT_REGS_PARM3(ctx))
#define CUDA_ABI_MEMSET_ASYNC_STREAM(ctx) ((__u64)PT_REGS_PARM4(ctx))

/* Driver copies (the macros in cuda.h make cuMemcpyHtoD mean cuMemcpyHtoD_v2, etc.):
 *   cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes)   bytes=rdx
 *   cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes)         bytes=rdx
 *   cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes)   bytes=rdx
 *   cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes)          bytes=rdx (kind from UVA)
 *   cuMemcpyAsync(dst, src, bytes, CUstream)                          bytes=rdx stream=rcx
 *   cuMemcpyHtoDAsync_v2 / DtoHAsync_v2 / DtoDAsync_v2(dst, src, bytes, CUstream) same
 *   (_v2_ptds / _ptsz variants: same arguments) */
#define CUDA_ABI_CU_MEMCPY_BYTES(ctx) ((__u64)PT_REGS_PARM3(ctx))
#define CUDA_ABI_CU_MEMCPY_ASYNC_STREAM(ctx) ((__u64)PT_REGS_PARM4(ctx))

/* cuMemcpyPeer(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx, size_t bytes)
 *   bytes=r8; cuMemcpyPeerAsync(..., bytes, CUstream): + stream=r9 */
#define CUDA_ABI_CU_MEMCPY_PEER_BYTES(ctx) ((__u64)PT_REGS_PARM5(ctx))
#define CUDA_ABI_CU_MEMCPY_PEER_ASYNC_STREAM(ctx) ((__u64)PT_REGS_PARM6(ctx))

/* cuMemsetD8_v2 / D16_v2 / D32_v2(CUdeviceptr dst, uchar/ushort/uint value, size_t N):
 *   N=rdx counts ELEMENTS: bytes = N * 1 / 2 / 4.
 * cuMemsetD8Async / D16Async / D32Async(dst, value, N, CUstream): + stream=rcx */
#define CUDA_ABI_CU_MEMSET_BYTES(ctx, elem_size) ((__u64)PT_REGS_PARM3(ctx) * (__u64)(elem_size))
#define CUDA_ABI_CU_MEMSET_ASYNC_STREAM(ctx) ((__u64)PT_REGS_PARM4(ctx))

/* ---- allocations -------------------------------------------------------------------- */

/* The allocated pointer is written through the out-pointer (rdi) before return and
 * only on success (without a driver the out value is left untouched): read
 * *(void **)PARM1 at return, or later (e.g. at the next event of the thread).
 *   cudaMalloc(void **devPtr, size_t size)                        out=rdi size=rsi
 *   cudaMallocManaged(void **devPtr, size_t size, unsigned flags)  out=rdi size=rsi flags=edx
 *   cudaMallocHost(void **ptr, size_t size)                        out=rdi size=rsi (pinned host)
 *   cudaMallocAsync(_ptsz)(void **devPtr, size_t size, cudaStream_t) out=rdi size=rsi stream=rdx
 *   cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)              out=rdi size=rsi
 *   cuMemAllocAsync(_ptsz)(CUdeviceptr *dptr, size_t, CUstream)    out=rdi size=rsi stream=rdx
 *   cudaFree(void *devPtr), cudaFreeHost(void *ptr), cuMemFree_v2(CUdeviceptr): ptr=rdi
 *   cudaFreeAsync(_ptsz)(void *, cudaStream_t), cuMemFreeAsync(_ptsz)(CUdeviceptr, CUstream):
 *     ptr=rdi stream=rsi */
#define CUDA_ABI_ALLOC_OUT(ctx) ((__u64)PT_REGS_PARM1(ctx))
#define CUDA_ABI_ALLOC_SIZE(ctx) ((__u64)PT_REGS_PARM2(ctx))
#define CUDA_ABI_ALLOC_ASYNC_STREAM(ctx) ((__u64)PT_REGS_PARM3(ctx))
#define CUDA_ABI_FREE_PTR(ctx) ((__u64)PT_REGS_PARM1(ctx))
#define CUDA_ABI_FREE_ASYNC_STREAM(ctx) ((__u64)PT_REGS_PARM2(ctx))

/* ---- synchronisation ---------------------------------------------------------------- */
/* cudaDeviceSynchronize(void), cuCtxSynchronize(void): no arguments.
 * cudaStreamSynchronize(_ptsz)(cudaStream_t), cuStreamSynchronize(_ptsz)(CUstream): stream=rdi
 * cudaEventSynchronize(cudaEvent_t), cuEventSynchronize(CUevent): event=rdi
 * cuCtxSynchronize_v2(CUcontext) (new in CUDA 13): ctx=rdi */
#define CUDA_ABI_SYNC_HANDLE(ctx) ((__u64)PT_REGS_PARM1(ctx))

/* ---- kernel handles (driver) -------------------------------------------------------- */
/* cuModuleGetFunction(CUfunction *out, CUmodule mod, const char *name): out=rdi mod=rsi name=rdx
 * cuLibraryGetKernel(CUkernel *out, CUlibrary lib, const char *name):   out=rdi lib=rsi name=rdx
 *   *out is written on success only; the name is a NUL-terminated user string.
 * cuKernelGetFunction(CUfunction *out, CUkernel kernel):                 out=rdi kernel=rsi
 * Runtime: __cudaGetKernel(cudaKernel_t *out, const void *hostFun): out=rdi hostFun=rsi;
 *   called once per kernel (first <<<>>> of that kernel), maps hostFun -> the handle
 *   that <<<>>> then passes as cudaLaunchKernel's func. */
#define CUDA_ABI_GETFN_OUT(ctx) ((__u64)PT_REGS_PARM1(ctx))
#define CUDA_ABI_GETFN_NAME(ctx) ((const char *)PT_REGS_PARM3(ctx))
#define CUDA_ABI_KERNEL_GETFN_KERNEL(ctx) ((__u64)PT_REGS_PARM2(ctx))
#define CUDA_ABI_GET_KERNEL_HOSTFUN(ctx) ((__u64)PT_REGS_PARM2(ctx))

/* ---- nesting (runtime -> driver, __cudaLaunchKernel -> cudaLaunchKernel) ------------- */
/* Without a uretprobe, a per-thread record of the outermost traced call still
 * tells whether that call is active: at its entry save sp and [sp] (its return
 * address). Later, a call is nested inside it iff the current sp is below the
 * saved one and the saved slot still holds the saved return address (once the
 * outer call returns, the next call made from that frame overwrites the slot). */
struct cuda_abi_frame {
	__u64 sp;
	__u64 ret;
};

static __always_inline void cuda_abi_frame_enter(struct pt_regs *ctx, struct cuda_abi_frame *f)
{
	f->sp = PT_REGS_SP(ctx);
	f->ret = cuda_abi_ret_addr(ctx);
}

static __always_inline bool cuda_abi_frame_active(struct pt_regs *ctx, const struct cuda_abi_frame *outer)
{
	__u64 v = 0;

	if (!outer->sp || PT_REGS_SP(ctx) >= outer->sp)
		return false;
	if (bpf_probe_read_user(&v, sizeof(v), (void *)outer->sp))
		return false;
	return v == outer->ret;
}

#endif /* GPUBPF_CUDA_ABI_H */
