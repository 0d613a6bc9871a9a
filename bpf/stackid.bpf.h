/* SPDX-License-Identifier: MIT */
/* A stack map keeps one stack a bucket and refuses (-EEXIST) another that hashes there:
 * with ASLR two of a recording's stacks do so now and then (~1% of runs of a 20-stack
 * workload lost one). The loser goes to an overflow map, where the same hash's bucket is
 * almost always free; its id says so (STACKS_OVF, bpf/stacks.h). */
#ifndef GPUBPF_STACKID_BPF_H
#define GPUBPF_STACKID_BPF_H

#include "stacks.h"

#ifndef EEXIST
#define EEXIST 17
#endif

/* A stack map of ENTRIES stacks of up to STACKS_MAX_DEPTH frames. */
#define DEFINE_STACK_MAP(name, entries)                                                                                \
	struct {                                                                                                       \
		__uint(type, BPF_MAP_TYPE_STACK_TRACE);                                                                \
		__uint(max_entries, entries);                                                                          \
		__uint(key_size, sizeof(__u32));                                                                       \
		__uint(value_size, STACKS_MAX_DEPTH * sizeof(__u64));                                                  \
	} name SEC(".maps")

/* bpf_get_stackid into MAP, or OVF where its bucket in MAP holds another stack. */
static __always_inline long stackid_ovf(void *ctx, void *map, void *ovf, __u64 flags)
{
	long id = bpf_get_stackid(ctx, map, flags), id2;

	if (id != -EEXIST)
		return id;
	id2 = bpf_get_stackid(ctx, ovf, flags);
	return id2 < 0 ? id : (id2 | STACKS_OVF);
}

#endif /* GPUBPF_STACKID_BPF_H */
