/* SPDX-License-Identifier: MIT */
/* A probe hit's user stack by its own frame-pointer walk, one that takes no page fault.
 *
 * bpf_get_stackid(BPF_F_USER_STACK) walks the frame pointers in the kernel and stops
 * only where a read faults: the chain's end (a 0 from _start or clone) or the first
 * frame of code built without frame pointers (whatever its rbp holds: 0x6 in Debian's
 * CPython) is read, and that read takes a kernel page fault on every hit. Measured on
 * the dev VM, a Python-driven launch: the kernel's walk cost about 600 ns of a 1.33 us
 * program, this one 100-150 ns; the fault is the difference (docs/BENCHMARKS.md, twelfth
 * session).
 *
 * This walk reads a frame only where a frame can be: 8-aligned, above the previous one,
 * within FPWALK_SPAN of the stack pointer; a chain that leaves that range has ended.
 * It keeps STACKS_OWN_DEPTH frames in a map of the caller's (STACKS_OWN ids,
 * bpf/stacks.h); a deeper stack goes to the caller's kernel walk (bpf_get_stackid, no
 * depth limit but its fault), and so do that thread's next FPWALK_DEEP_HITS hits (a thread
 * deep once is mostly deep again: the walk would be paid twice). */
#ifndef GPUBPF_FPWALK_BPF_H
#define GPUBPF_FPWALK_BPF_H

#include "stacks.h"

#define FPWALK_SPAN (8ULL << 20) /* the default thread stack's size */
#define FPWALK_DEEP_HITS 63

/* Knobs for tests and benchmarks, set before load (userspace/trace/cuda.c, cupti.c): the kernel's
 * walk for every hit (GPUBPF_FPWALK=0), and fewer key bits, so that stacks collide in
 * the own-walk map (GPUBPF_FPWALK_KEY_BITS). */
const volatile bool fpwalk_off = false;
const volatile __u32 fpwalk_key_mask = STACKS_OWN - 1;

#ifndef E2BIG
#define E2BIG 7
#endif
#ifndef EEXIST
#define EEXIST 17
#endif
#ifndef EFAULT
#define EFAULT 14
#endif
#ifndef ENOMEM
#define ENOMEM 12
#endif

/* fpwalk's answer where the kernel's walk is to take the stack */
#define FPWALK_KERNEL (-1000)

/* A map of own-walk stacks of ENTRIES entries. */
#define DEFINE_OWN_STACKS(name, entries)                                                                               \
	struct {                                                                                                       \
		__uint(type, BPF_MAP_TYPE_HASH);                                                                       \
		__uint(map_flags, BPF_F_NO_PREALLOC); /* a recording's stacks are few: memory for those */             \
		__uint(max_entries, entries);                                                                          \
		__type(key, __u32);                                                                                    \
		__type(value, struct stacks_own);                                                                      \
	} name SEC(".maps")

/* The stack being walked (512 bytes: not on the BPF stack) and the walk's state. The
 * state lives here, not on the BPF stack, so that the verifier knows nothing of its values:
 * on the stack, each frame's n and hash were exact, the loop's callback was verified again
 * for every depth and each call site's tail once per depth it could return (140 ms of
 * the CUDA probes' 160 ms load, a second of set-up's CPU in three). */
struct fpwalk_state {
	struct stacks_own s;
	__u64 fp, lo, hi, hash;
	__u32 n;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fpwalk_state);
} fpwalk_scratch SEC(".maps");

/* Threads whose stacks were deeper than the walk keeps: how many more hits go straight
 * to the kernel's walk. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u32);
} fpwalk_deep SEC(".maps");

struct fpwalk_ctx {
	struct fpwalk_state *w;
};

static long fpwalk_step(__u64 i, void *data)
{
	struct fpwalk_state *c = ((struct fpwalk_ctx *)data)->w;
	__u64 fr[2]; /* the saved frame pointer, the return address */

	if (c->fp < c->lo || c->fp >= c->hi || (c->fp & 7))
		return 1;
	if (c->n >= STACKS_OWN_DEPTH) {
		c->n++; /* deeper than kept */
		return 1;
	}
	if (bpf_probe_read_user(fr, sizeof(fr), (void *)c->fp) || !fr[1])
		return 1;
	c->s.ips[c->n & (STACKS_OWN_DEPTH - 1)] = fr[1];
	c->hash = (c->hash ^ fr[1]) * 1099511628211ULL;
	c->n++;
	c->lo = c->fp + sizeof(fr);
	c->fp = fr[0];
	return 0;
}

static __always_inline bool fpwalk_same(const struct stacks_own *a, const struct stacks_own *b)
{
#pragma unroll
	for (int i = 0; i < STACKS_OWN_DEPTH; i++)
		if (a->ips[i] != b->ips[i])
			return false;
	return true;
}

/* The user stack id of this hit in MAP (with STACKS_OWN), -ENOMEM where MAP is full, or
 * FPWALK_KERNEL: the stack is deeper than the walk keeps, its key holds another stack, or
 * the walk is off; the caller's kernel walk takes it then. */
static __noinline __s32 fpwalk(struct pt_regs *ctx, void *map)
{
	__u32 zero = 0, tid = (__u32)bpf_get_current_pid_tgid(), key, deep = FPWALK_DEEP_HITS;
	struct fpwalk_state *w = bpf_map_lookup_elem(&fpwalk_scratch, &zero);
	__u32 *d = bpf_map_lookup_elem(&fpwalk_deep, &tid);
	struct fpwalk_ctx c = {.w = w};
	struct stacks_own *v;
	long err;

	if (fpwalk_off || !w)
		return FPWALK_KERNEL;
	if (d && *d) {
		*d -= 1;
		return FPWALK_KERNEL;
	}
#pragma unroll
	for (int i = 0; i < STACKS_OWN_DEPTH; i++)
		w->s.ips[i] = 0;
	w->s.ips[0] = PT_REGS_IP(ctx);
	w->hash = (2166136261u ^ w->s.ips[0]) * 1099511628211ULL;
	w->n = 1;
	w->lo = PT_REGS_SP(ctx);
	w->hi = w->lo + FPWALK_SPAN;
	w->fp = PT_REGS_FP(ctx);
	bpf_loop(STACKS_OWN_DEPTH, fpwalk_step, &c, 0);
	if (w->n > STACKS_OWN_DEPTH) {
		bpf_map_update_elem(&fpwalk_deep, &tid, &deep, BPF_ANY);
		return FPWALK_KERNEL;
	}
	key = (__u32)(w->hash ^ (w->hash >> 32)) & fpwalk_key_mask & (STACKS_OWN - 1);
	v = bpf_map_lookup_elem(map, &key);
	if (!v) {
		err = bpf_map_update_elem(map, &key, &w->s, BPF_NOEXIST);
		if (!err)
			return (__s32)(key | STACKS_OWN);
		if (err != -EEXIST)
			return err == -E2BIG ? -ENOMEM : -EFAULT;
		v = bpf_map_lookup_elem(map, &key); /* another CPU put it there first */
	}
	/* another stack with the same hash: the kernel's map keeps this one */
	return v && fpwalk_same(v, &w->s) ? (__s32)(key | STACKS_OWN) : FPWALK_KERNEL;
}

#ifdef GPUBPF_STACKS_BPF_H
/* Objects that include stacks.bpf.h first: the own walk's maps, one a buffer of its
 * double buffer. */
DEFINE_OWN_STACKS(own_stacks0, STACKS_MAP_ENTRIES);
DEFINE_OWN_STACKS(own_stacks1, STACKS_MAP_ENTRIES);

/* A hit's user stack: the own walk's where it can, else the kernel's (and counted). */
static __always_inline __s32 capture_ustack_fp(struct pt_regs *ctx, __u32 buf)
{
	__s32 id = fpwalk(ctx, buf ? (void *)&own_stacks1 : (void *)&own_stacks0);

	if (id == FPWALK_KERNEL) {
		stat_inc(STAT_KERNEL_WALK);
		return capture_ustack(ctx, buf);
	}
	if (id < 0)
		stat_inc(id == -ENOMEM ? STAT_STACK_FULL : STAT_USTACK_LOST);
	return id < 0 ? -1 : id;
}
#endif

#endif /* GPUBPF_FPWALK_BPF_H */
