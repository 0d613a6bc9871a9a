// SPDX-License-Identifier: GPL-2.0
/* CPU sampling: a perf_event (cpu-clock or cycles) per CPU runs this program; samples
 * of targets are counted in the kernel by (tgid, tid, user stack, kernel stack). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "regs.bpf.h"
#include <bpf/bpf_tracing.h>

#define EFAULT 14
#define ENOMEM 12
#include "targets.bpf.h"
#include "stacks.bpf.h"
#include "python.bpf.h"
#include "cpu.h"

char LICENSE[] SEC("license") = "GPL";

#define CPU_COUNTS_ENTRIES 16384 /* per buffer: (thread, stack) pairs sampled in a second */

struct cpu_counts {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CPU_COUNTS_ENTRIES);
	__type(key, struct cpu_key);
	__type(value, struct cpu_val);
};
struct cpu_counts counts0 SEC(".maps");
struct cpu_counts counts1 SEC(".maps");

/* The thread each per-thread event last sampled (the event's address -> tid): an event
 * whose samples move between threads is no thread's own clock (userspace/trace/cpu.c). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, __u32);
} clock_owner SEC(".maps");

/* A thread's CPU time (task_struct.se.sum_exec_runtime) at its last sample on its own
 * clock, and its start time (a tid used again is another thread). */
struct thread_clock {
	__u64 runtime;
	__u64 start;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct thread_clock);
} thread_clock SEC(".maps");

/* The sampling period in ns (set by userspace before load): what a sample stands for
 * where the thread's own CPU time is not known. */
const volatile __u64 period_ns = 0;

/* What the program costs a target's sample, timed here (its stack walks, Python frames):
 * the governor adds it to the calibrated cost of a sample (userspace/trace/cpu.c). */
__u64 prog_ns = 0;
__u64 prog_runs = 0;

static __always_inline int sample(struct bpf_perf_event_data *ctx, __u32 tgid, __u32 tid);

/* The CPU time a sample of thread TID on its own clock stands for: what the thread ran
 * since its last sample, by the scheduler's count. Its clock's timer counts the time the
 * thread holds a CPU, and on a virtual machine that includes the time the host took the
 * CPU away (steal): a thread that held it then got samples for time it never ran (one
 * stolen 100 ms is 10 samples at 99 Hz). The scheduler's count leaves steal out, and its
 * sum over a thread's samples is the CPU time it ran between its first and its last,
 * however the samples fell. A thread's first sample, or one where the count is unknown,
 * stands for a period. */
static __always_inline __u64 sample_cpu_ns(__u32 tid)
{
	struct thread_clock now = {task_u64(task_off.runtime), task_u64(task_off.start_time)}, *last;
	__u64 ns = period_ns;

	if (!task_off.runtime)
		return ns;
	last = bpf_map_lookup_elem(&thread_clock, &tid);
	if (last && last->start == now.start)
		ns = now.runtime > last->runtime ? now.runtime - last->runtime : 0;
	bpf_map_update_elem(&thread_clock, &tid, &now, BPF_ANY);
	return ns;
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), t0;
	__u32 tgid = pid_tgid >> 32;

	if (!is_target(tgid))
		return 0;
	t0 = bpf_ktime_get_ns();
	sample(ctx, tgid, (__u32)pid_tgid);
	__sync_fetch_and_add(&prog_ns, bpf_ktime_get_ns() - t0);
	__sync_fetch_and_add(&prog_runs, 1);
	return 0;
}

static __always_inline int sample(struct bpf_perf_event_data *ctx, __u32 tgid, __u32 tid)
{
	__u32 buf = buf_active & 1;
	struct cpu_key key = {};
	struct cpu_val *cnt, val = {1, period_ns}; /* this sample */
	__u64 owned = 0;

	/* An event opened for a thread (not per CPU) samples one thread, unless the kernel
	 * swaps it between threads (userspace/trace/cpu.c says when). */
	if (task_off.perf_event) {
		/* by the offsets userspace read from the kernel's BTF (kbtf.c), not CO-RE, which
		 * would have libbpf parse all of it again for this object at start-up */
		__u64 evk = 0;
		__u32 *last;

		bpf_probe_read_kernel(&evk, sizeof(evk), (void *)ctx + task_off.perf_event);
		if (evk)
			bpf_probe_read_kernel(&owned, sizeof(owned), (void *)evk + task_off.perf_target);
		last = bpf_map_lookup_elem(&clock_owner, &evk);
		if (owned && (!last || *last != tid)) {
			if (last)
				stat_inc(STAT_CLOCK_MOVED);
			bpf_map_update_elem(&clock_owner, &evk, &tid, BPF_ANY);
		}
	}
	if (owned)
		val.cpu_ns = sample_cpu_ns(tid);

	key.tgid = tgid;
	key.tid = tid;
	key.names = record_comm(tgid, tid);
	key.ustack = capture_ustack(ctx, buf);
	key.kstack = capture_kstack(ctx, buf);
	/* The interpreter's frames, merged into the native stack by userspace. */
	key.pystack = python_capture(tgid, tid);

	void *counts = buf ? (void *)&counts1 : (void *)&counts0;
	cnt = bpf_map_lookup_elem(counts, &key);
	if (!cnt && bpf_map_update_elem(counts, &key, &val, BPF_NOEXIST)) {
		/* Lost the race to another CPU (-EEXIST) or the map is full. */
		cnt = bpf_map_lookup_elem(counts, &key);
		if (!cnt) {
			stat_inc(STAT_MAP_FULL);
			return 0;
		}
	}
	if (cnt) {
		__sync_fetch_and_add(&cnt->samples, 1);
		__sync_fetch_and_add(&cnt->cpu_ns, val.cpu_ns);
	}
	stat_inc(STAT_SAMPLES);
	return 0;
}
