// SPDX-License-Identifier: GPL-2.0
/* ret_delay's probe (ret_delay.c says what it measures): one uprobe session program on a
 * function of the job. At entry it books the gap from the thread's last call, by what
 * that call had: nothing more, a return hit, a stall, or (with walk set) no walk of the
 * user stack where every other call has one; then it draws what this call gets. At
 * return (only where the entry asked for it) it times itself. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "stall.bpf.h"

extern bool bpf_session_is_return(void) __ksym;

#define RD_PLAIN 0
#define RD_RET 1
#define RD_STALL 2
#define RD_SKIP 3 /* no walk, where the others walk */
#define RD_WALK_FRAMES 127
#define RD_GAP_MAX_NS 1000000ull

struct rd_thread {
	__u64 last_ns;	       /* entry of its last call */
	__u64 switches;	       /* its context switches then */
	__u64 mean_n, mean_ns; /* its gaps so far, for the cut at 4 times their mean */
	__u32 what;	       /* what its last call had: RD_* */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct rd_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[RD_WALK_FRAMES]);
} walk_buf SEC(".maps");

/* Per class: gaps booked, their sum and sum of squares (ns, ns^2). */
__u64 gap_n[4], gap_ns[4], gap_sq[4];
__u64 calls, cut, ret_hits, ret_ns, stalls, stall_sum_ns;
/* Per what this call got (RD_*): the entry program's run time, and how many. */
__u64 entry_ns[4], entry_n[4];
volatile const __u32 every = 8;	     /* one call in EVERY gets a return hit, one a stall */
volatile const __u64 stall_ns = 500; /* how long */
volatile const bool walk = false;    /* walk the user stack, as gpubpf's probes do */

SEC("uprobe.multi")
int ret_delay(struct pt_regs *ctx)
{
	__u64 t0 = bpf_ktime_get_ns(), sw, gap, mean;
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), draw;
	struct task_struct *task = bpf_get_current_task_btf();
	struct rd_thread *t, init = {};

	if (bpf_session_is_return()) {
		__sync_fetch_and_add(&ret_hits, 1);
		__sync_fetch_and_add(&ret_ns, bpf_ktime_get_ns() - t0);
		return 0;
	}
	sw = task->nvcsw + task->nivcsw;
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t) {
		bpf_map_update_elem(&threads, &tid, &init, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&threads, &tid);
		if (!t)
			return 1;
	}
	gap = t0 - t->last_ns;
	mean = t->mean_n >= 16 ? t->mean_ns / t->mean_n : 0;
	/* a gap with a context switch, an interrupt or a sample in it says nothing of the
	 * call before it */
	if (t->last_ns && sw == t->switches && gap < RD_GAP_MAX_NS && !(mean && gap > 4 * mean)) {
		__u32 j = t->what & 3;

		__sync_fetch_and_add(&gap_n[j], 1);
		__sync_fetch_and_add(&gap_ns[j], gap);
		__sync_fetch_and_add(&gap_sq[j], gap * gap);
		if (j == RD_PLAIN) {
			t->mean_n++;
			t->mean_ns += gap;
		}
	} else if (t->last_ns) {
		__sync_fetch_and_add(&cut, 1);
	}
	__sync_fetch_and_add(&calls, 1);
	draw = bpf_get_prandom_u32() % every;
	t->what = draw == 0 ? RD_RET : draw == 1 ? RD_STALL : draw == 2 && walk ? RD_SKIP : RD_PLAIN;
	if (walk && t->what != RD_SKIP) {
		__u32 zero = 0;
		__u64 *buf = bpf_map_lookup_elem(&walk_buf, &zero);

		if (buf)
			bpf_get_stack(ctx, buf, RD_WALK_FRAMES * sizeof(__u64), BPF_F_USER_STACK);
	}
	if (t->what == RD_STALL) {
		__u64 clock = stall(stall_ns);

		__sync_fetch_and_add(&stalls, 1);
		__sync_fetch_and_add(&stall_sum_ns, clock);
	}
	t->switches = sw;
	t->last_ns = t0;
	__sync_fetch_and_add(&entry_n[t->what & 3], 1);
	__sync_fetch_and_add(&entry_ns[t->what & 3], bpf_ktime_get_ns() - t0);
	return t->what == RD_RET ? 0 : 1; /* 0: call the program at the return too */
}

char LICENSE[] SEC("license") = "GPL";
