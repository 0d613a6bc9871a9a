/* SPDX-License-Identifier: MIT */
/* Shared between bpf/cpu.bpf.c and userspace/trace/cpu.c. __u32/__u64 only. */
#ifndef GPUBPF_CPU_H
#define GPUBPF_CPU_H

#ifndef __VMLINUX_H__
#include <linux/types.h> /* BPF code gets these from vmlinux.h */
#endif

struct cpu_key {
	__u32 tgid;
	__u32 tid;
	__s32 ustack;  /* stack id, or -1 */
	__s32 kstack;  /* stack id, or -1 */
	__s32 pystack; /* Python frames: id in py_stacks (bpf/python.bpf.h), or -1 */
	__u32 names;   /* the thread's names when sampled (struct comm_key) */
};

/* What the counts maps hold for a key. */
struct cpu_val {
	__u64 samples;
	__u64 cpu_ns; /* the CPU time they stand for (bpf/cpu.bpf.c: sample_cpu_ns) */
};

#endif /* GPUBPF_CPU_H */
