/* SPDX-License-Identifier: MIT */
/* The target set, shared by every BPF object of a session. procs.bpf.c owns it; other
 * objects declare it here too and userspace makes them share one map with
 * bpf_map__reuse_fd() before loading. */
#ifndef GPUBPF_TARGETS_BPF_H
#define GPUBPF_TARGETS_BPF_H

#include "procs.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROCS_MAX_TARGETS);
	__type(key, __u32);   /* tgid */
	__type(value, __u32); /* enum target_flags */
} targets SEC(".maps");

/* Set by userspace before load: trace every process (-a). gpubpf's own tgid is never traced. */
const volatile bool trace_all = false;
const volatile __u32 self_tgid = 0;
/* Set by userspace before load (userspace/trace/kbtf.c): no CO-RE relocations, so libbpf need
 * not parse the kernel's BTF again for every object. */
const volatile struct task_offsets task_off = {};

/* A field of task TASK (or of a struct it points to) at OFF (0: unknown, read as 0). */
static __always_inline __u64 task_u64_of(const void *task, __u32 off)
{
	__u64 v = 0;

	if (off && task)
		bpf_probe_read_kernel(&v, sizeof(v), task + off);
	return v;
}

static __always_inline __u32 task_u32_of(const void *task, __u32 off)
{
	__u32 v = 0;

	if (off && task)
		bpf_probe_read_kernel(&v, sizeof(v), task + off);
	return v;
}

/* ... of the current thread's task_struct. */
static __always_inline __u64 task_u64(__u32 off)
{
	return task_u64_of((const void *)bpf_get_current_task(), off);
}

/* The current thread's voluntary context switches (it slept or waited since, if they
 * grew) ... */
static __always_inline __u64 task_nvcsw(void)
{
	return task_u64(task_off.nvcsw);
}

/* ... and its involuntary ones (it was preempted since, if they grew). */
static __always_inline __u64 task_nivcsw(void)
{
	return task_u64(task_off.nivcsw);
}

/* Thread and process names by (tid, names), and each thread's latest at (tid, 0):
 * labels for samples of threads gone by export time, as they were named when sampled.
 * LRU, so -a on a busy host cannot fill it. Shared like targets. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct comm_key);
	__type(value, struct gpubpf_comm);
} comms SEC(".maps");

static __always_inline __u32 names_hash(const struct gpubpf_comm *c)
{
	__u32 h = 2166136261u;

#pragma unroll
	for (int i = 0; i < 16; i++)
		h = (h ^ (__u8)c->comm[i]) * 16777619u;
#pragma unroll
	for (int i = 0; i < 16; i++)
		h = (h ^ (__u8)c->pcomm[i]) * 16777619u;
	return h ? h : 1;
}

/* Remember the current thread's names; returns their hash for the sample's key. Two
 * lookups when nothing changed (the common case), an update only when a name did. */
static __always_inline __u32 record_comm(__u32 tgid, __u32 tid)
{
	struct gpubpf_comm c = {}, *cur;
	struct comm_key k = {.tid = tid};
	void *task = (void *)bpf_get_current_task(), *leader = NULL;

	c.tgid = tgid;
	bpf_get_current_comm(c.comm, sizeof(c.comm));
	if (task_off.group_leader && task_off.comm &&
	    !bpf_probe_read_kernel(&leader, sizeof(leader), task + task_off.group_leader) && leader)
		bpf_probe_read_kernel_str(c.pcomm, sizeof(c.pcomm), leader + task_off.comm);
	c.names = names_hash(&c);
	k.names = c.names;
	if (!bpf_map_lookup_elem(&comms, &k))
		bpf_map_update_elem(&comms, &k, &c, BPF_ANY);
	k.names = 0;
	cur = bpf_map_lookup_elem(&comms, &k);
	if (!cur || cur->names != c.names || cur->tgid != tgid)
		bpf_map_update_elem(&comms, &k, &c, BPF_ANY);
	return c.names;
}

static __always_inline bool is_target(__u32 tgid)
{
	__u32 *flags;

	if (tgid == 0 || tgid == self_tgid)
		return false;
	if (trace_all)
		return true;
	flags = bpf_map_lookup_elem(&targets, &tgid);
	return flags && !(*flags & TARGET_PREEXEC);
}

#endif /* GPUBPF_TARGETS_BPF_H */
