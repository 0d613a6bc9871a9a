/* SPDX-License-Identifier: MIT */
/* Double-buffered stack capture. Each object that records stacks has two stack-trace
 * maps and two aggregation maps; `buf_active` (in .bss, flipped by userspace through
 * the mmapped skeleton) says which pair the programs write. Userspace drains the
 * inactive pair and empties it, so stack ids never go stale under a reader and the
 * maps stay sparse (fewer bucket collisions) over long recordings. */
#ifndef GPUBPF_STACKS_BPF_H
#define GPUBPF_STACKS_BPF_H

#include "stacks.h"
#include "stackid.bpf.h"

#ifndef STACKS_MAP_ENTRIES
#define STACKS_MAP_ENTRIES 8192 /* per buffer (a second): distinct stacks, with room against hash collisions */
#endif

DEFINE_STACK_MAP(stacks0, STACKS_MAP_ENTRIES);
DEFINE_STACK_MAP(stacks1, STACKS_MAP_ENTRIES);
/* A stack map keeps one stack a bucket and refuses (-EEXIST) another that hashes there:
 * with ASLR two of a recording's stacks do so now and then (~1% of runs of a 20-stack
 * workload lost one, and a test with it). The loser goes to the overflow map of its
 * buffer, where the same hash's bucket is almost always free; its id says so
 * (STACKS_OVF). */
DEFINE_STACK_MAP(stacks0_ovf, STACKS_OVF_ENTRIES);
DEFINE_STACK_MAP(stacks1_ovf, STACKS_OVF_ENTRIES);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

volatile __u32 buf_active = 0;

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += 1;
}

static __always_inline void *stack_map(__u32 buf)
{
	return buf ? (void *)&stacks1 : (void *)&stacks0;
}

/* bpf_get_stackid into buffer BUF's map, or its overflow map where the bucket collided. */
static __always_inline long get_stackid(void *ctx, __u32 buf, __u64 flags)
{
	long id = stackid_ovf(ctx, stack_map(buf), buf ? (void *)&stacks1_ovf : (void *)&stacks0_ovf, flags);

	if (id >= 0 && (id & STACKS_OVF))
		stat_inc(STAT_STACK_OVF);
	return id;
}

/* Returns the user stack id or a negative error; counts failures. */
static __always_inline __s32 capture_ustack(void *ctx, __u32 buf)
{
	long id = get_stackid(ctx, buf, BPF_F_USER_STACK);

	if (id < 0) {
		stat_inc(id == -ENOMEM ? STAT_STACK_FULL : STAT_USTACK_LOST);
		return -1;
	}
	return id;
}

static __always_inline __s32 capture_kstack(void *ctx, __u32 buf)
{
	long id = get_stackid(ctx, buf, 0);

	if (id < 0) {
		/* -EFAULT: no kernel stack (sampled in user mode) is normal, not a loss. */
		if (id != -EFAULT)
			stat_inc(id == -ENOMEM ? STAT_STACK_FULL : STAT_KSTACK_LOST);
		return -1;
	}
	return id;
}

#endif /* GPUBPF_STACKS_BPF_H */
