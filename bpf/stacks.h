/* SPDX-License-Identifier: MIT */
/* Shared between the BPF objects that capture stacks and userspace/trace/stacks.c. */
#ifndef GPUBPF_STACKS_H
#define GPUBPF_STACKS_H

#ifndef __VMLINUX_H__
#include <linux/types.h> /* BPF code gets these from vmlinux.h */
#endif

/* The kernel's PERF_MAX_STACK_DEPTH default: deeper stacks are truncated (and counted). */
#define STACKS_MAX_DEPTH 127

/* A stack id with this bit is in the overflow map of its buffer (bpf/stacks.bpf.h): its
 * bucket in the main map held another stack (a hash collision, -EEXIST). */
#define STACKS_OVF 0x40000000
#define STACKS_OVF_ENTRIES 1024

/* A stack id with this bit is in the own-walk map of its buffer (bpf/fpwalk.bpf.h): a
 * probe hit's stack of at most STACKS_OWN_DEPTH frames, zero-padded. */
#define STACKS_OWN 0x20000000
#define STACKS_OWN_DEPTH 64
struct stacks_own {
	__u64 ips[STACKS_OWN_DEPTH];
};

/* Per-CPU drop and error counters, surfaced in the status line and summary. */
enum stack_stat {
	STAT_SAMPLES = 0,     /* events counted into the aggregation map */
	STAT_USTACK_LOST = 1, /* user stack unavailable (-EFAULT) or collided (-EEXIST) */
	STAT_KSTACK_LOST = 2, /* kernel stack collided or unavailable */
	STAT_MAP_FULL = 3,    /* aggregation map full: the event was dropped */
	STAT_STACK_FULL = 4,  /* stack map full (-ENOMEM) */
	STAT_CLOCK_MOVED = 5, /* a per-thread CPU event sampled another thread than last time */
	STAT_STACK_OVF = 6,   /* a stack kept in the overflow map (its bucket collided) */
	STAT_KERNEL_WALK = 7, /* a probe hit the kernel walked: deeper than the own walk, or a key collision */
	STAT_NR = 8,
};

#endif /* GPUBPF_STACKS_H */
