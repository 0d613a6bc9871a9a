// SPDX-License-Identifier: GPL-2.0
/* A stall: the thread held a set time more in a BPF program, by a loop of clock reads.
 * gpubpf's CUDA probes stall one call in CUDA_STALL_EVERY of a window to ask whether their
 * delay pushes the thread's calls out (cuda_charge.bpf.h); ret_delay measures the same
 * (tests/workloads/probe/). */
#ifndef GPUBPF_STALL_BPF_H
#define GPUBPF_STALL_BPF_H

#define STALL_MAX_LOOPS 4096 /* clock reads a stall may take */

struct stall_ctx {
	__u64 t0, t, ns;
};

static long stall_step(__u64 i, void *data)
{
	struct stall_ctx *c = data;

	c->t = bpf_ktime_get_ns();
	return c->t - c->t0 >= c->ns;
}

/* Hold the thread NS more (at most STALL_MAX_LOOPS clock reads): how long it was by its
 * own first and last reads, 50-90 ns short of what it adds to the program (bpf_loop's
 * start and end): what a stall adds is timed around it. bpf_loop, so that the verifier
 * checks one step, not thousands. */
static __always_inline __u64 stall(__u64 ns)
{
	struct stall_ctx c = {.ns = ns};

	c.t0 = c.t = bpf_ktime_get_ns();
	bpf_loop(STALL_MAX_LOOPS, stall_step, &c, 0);
	return c.t - c.t0;
}

#endif
