// SPDX-License-Identifier: MIT
/* CUPTI's structs read for the injection library: activity records into records.c's
 * CUPTI-free form, on gpubpf's clock, and the launch handle a launch callback's
 * parameters pass. Shared by the CUPTI backend and the synthetic one the tests drive
 * (synth_backend.c), so what the tests feed takes the production path. */
#include <stdint.h>
#include <time.h>

#include <cupti.h> /* with generated_cuda_meta.h and ..._runtime_api_meta.h: the params */

#include "backend.h"
#include "cupti_int.h"

/* ---- activity records ---------------------------------------------------------------- */

/* Records carry CUPTI's timestamps; gpubpf's timeline is CLOCK_MONOTONIC (what BPF's
 * bpf_ktime_get_ns reads). The offset between the two is sampled at each completed
 * buffer, so a slewed clock does not drift the device tracks away from the CPU's. */
static int64_t clock_offset;
uint64_t (*inj_device_clock)(void);

uint64_t inj_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void inj_sample_clock(void)
{
	uint64_t t0 = inj_mono_ns(), d = inj_device_clock ? inj_device_clock() : 0, t1 = inj_mono_ns();

	if (d)
		clock_offset = (int64_t)(t0 / 2 + t1 / 2) - (int64_t)d;
}

static uint64_t to_mono(uint64_t t)
{
	int64_t m = (int64_t)t + clock_offset;

	return m > 0 ? (uint64_t)m : 0;
}

/* One CUPTI record into the CUPTI-free form records.c handles. The structs are those of
 * the CUPTI this library was built against, which is the one it loads. */
/* The fields every kind of record has, under the same names. */
#define COMMON_FIELDS(a, x)                                                                                            \
	do {                                                                                                           \
		(a).corr = (x)->correlationId;                                                                         \
		(a).untimed = !(x)->start && !(x)->end;                                                                \
		(a).start = to_mono((x)->start);                                                                       \
		(a).end = to_mono((x)->end);                                                                           \
		(a).device = (x)->deviceId;                                                                            \
		(a).stream = (x)->streamId;                                                                            \
		(a).graph_id = (x)->graphId;                                                                           \
	} while (0)

void inj_handle_record(const CUpti_Activity *r)
{
	struct inj_activity a = {0};

	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)r;

		a.kind = DEV_KERNEL;
		COMMON_FIELDS(a, k);
		a.name = k->name;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)r;

		a.kind = DEV_MEMCPY;
		COMMON_FIELDS(a, m);
		a.bytes = m->bytes;
		a.cupti_copy_kind = m->copyKind;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)r;

		a.kind = DEV_MEMSET;
		COMMON_FIELDS(a, m);
		a.bytes = m->bytes;
		break;
	}
	default:
		return;
	}
	inj_add_activity(&inj, &a);
}

/* ---- API callbacks' parameters -------------------------------------------------------- */

/* The handle a launch callback's call passes: a host stub or cudaKernel_t (runtime), a
 * CUfunction (driver). This is the value gpubpf's probe on the entry point sees, and
 * symbolName names its kernel: on a real driver the handles are heap pointers (lazy
 * loading, cudaKernel_t from __cudaGetKernel, possibly before gpubpf attached) that no
 * symbol of the process names. */
uint64_t inj_launch_handle(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *params)
{
	if (!params)
		return 0;
	if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
		switch (cbid) {
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
			return (uint64_t)(uintptr_t)((const cudaLaunchKernel_v7000_params *)params)->func;
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
			return (uint64_t)(uintptr_t)((const cudaLaunchCooperativeKernel_v9000_params *)params)->func;
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
		case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
			return (uint64_t)(uintptr_t)((const cudaLaunchKernelExC_v11060_params *)params)->func;
		case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
		case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000:
			/* __cudaLaunchKernel(cudaKernel_t kernel, dim3, dim3, void **, size_t,
			 * cudaStream_t) (crt/device_functions.h): CUDA 13.0's headers give no params
			 * struct; the kernel comes first, as in cudaLaunchKernel's. */
			return (uint64_t)(uintptr_t) * (const void *const *)params;
		}
		return 0;
	}
	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
		return (uint64_t)(uintptr_t)((const cuLaunchKernel_params *)params)->f;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
		return (uint64_t)(uintptr_t)((const cuLaunchCooperativeKernel_params *)params)->f;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
		return (uint64_t)(uintptr_t)((const cuLaunchKernelEx_params *)params)->f;
	}
	return 0;
}
