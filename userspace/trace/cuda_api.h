/* SPDX-License-Identifier: MIT */
/* The CUDA runtime and driver entry points gpubpf traces, and how each is decoded. */
#ifndef GPUBPF_CUDA_API_H
#define GPUBPF_CUDA_API_H

#include <stdbool.h>
#include <stdint.h>

#include "../../bpf/cuda.h"

enum cuda_group {
	CG_LAUNCH = 0, /* kernel and graph launches */
	CG_COPY,       /* copies and sets */
	CG_SYNC,       /* synchronization */
	CG_ALLOC,      /* allocations and frees */
	CG_NAME,       /* name lookups: not counted, they teach kernel names */
	CG__COUNT,
};
_Static_assert(CG__COUNT <= CUDA_GROUPS_MAX, "the cookie holds 3 bits of group");

struct cuda_api {
	const char *name;
	uint8_t cls;   /* enum cuda_class */
	uint8_t dir;   /* CUDA_DIR_* for driver copies */
	uint8_t elem;  /* element size for cuMemsetD* */
	bool async;    /* takes a stream after the usual arguments */
	bool runtime;  /* runtime API (a driver call inside it is not counted again) */
	bool retprobe; /* also needs a return probe */
	uint8_t group; /* enum cuda_group */
};

extern const char *const cuda_group_names[CG__COUNT];
extern const struct cuda_api cuda_apis[];
extern const int cuda_num_apis;

/* The attach cookie of entry i. */
uint64_t cuda_api__cookie(int i);

#endif /* GPUBPF_CUDA_API_H */
