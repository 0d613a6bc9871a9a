// SPDX-License-Identifier: GPL-2.0
/* What a thread's CUDA probes cost it, and the window it is charged to: its hits and
 * their time per (thread, windowed group) in the window open at each hit (tstates), or
 * with none open (tclosed); the stall that asks whether that delay pushes its calls out;
 * a wait on the device that makes up for it. Included by cuda.bpf.c, after its maps. */
#ifndef GPUBPF_CUDA_CHARGE_BPF_H
#define GPUBPF_CUDA_CHARGE_BPF_H

#include "stall.bpf.h"

/* A thread's fresh state is built here, not on charge's stack: cuda_tstate is most of
 * 300 bytes, and with the entry program's own frame it took the two calls past the
 * verifier's 512 (640: refused by 6.18's verifier on the development machine, where an
 * older build of it had let them by). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cuda_tstate);
} tstate_scratch SEC(".maps");

/* The current thread's CPU time in user mode and in the kernel (0 and 0: unknown). */
static __always_inline void task_times(__u64 *ut, __u64 *st)
{
	/* kbtf.c sets both offsets or neither */
	*ut = task_u64(task_off.utime);
	*st = task_u64(task_off.stime);
}

/* Until when the thread may be catching up on its device after losing LOST ns at NOW. */
static __always_inline __u64 settle_until(__u64 now, __u64 lost)
{
	return now + (lost < CUDA_SETTLE_MAX_NS / CUDA_SETTLE_X ? CUDA_SETTLE_X * lost : CUDA_SETTLE_MAX_NS);
}

/* A counted call of thread ST at START: the gap from its last one, into the books of the
 * delay's response (struct cuda_tstate) when nothing else came between them, and the
 * thread has settled since something did (CUDA_SETTLE). */
static __always_inline void note_gap(struct cuda_tstate *st, __u64 start, __u64 nv, __u64 niv)
{
	/* The mean of every undisturbed gap of the window, those of its first CUDA_SETTLE
	 * too: of the counted ones alone, it was unknown for their first 16, and a CPU sample
	 * or an interrupt there (a 120 us gap in a 14 us loop) was in the books. */
	__u64 gap = start - st->last_ns, mean = st->raw_n >= 16 ? st->raw_ns / st->raw_n : 0;
	__u32 j = st->last_class == 2 ? 2 : st->last_class == 1 ? 1 : 0;

	/* A window's first call (its hit is dearer), a context switch, an interrupt, a CPU
	 * sample or a fault: gaps far longer than the thread's in this window so far (their
	 * variance would drown the stall's effect), and the thread behind its device for a
	 * while after them */
	if (!st->calls || nv != st->nvcsw || niv != st->nivcsw || start < st->last_ns || gap >= CUDA_GAP_MAX_NS ||
	    (mean && gap > 4 * mean)) {
		st->settle = CUDA_SETTLE;
		if (st->calls && start > st->last_ns)
			st->settle_ns = settle_until(start, gap);
		return;
	}
	st->raw_n++;
	st->raw_ns += gap;
	if (st->settle || start < st->settle_ns) {
		if (st->settle)
			st->settle--;
	} else {
		st->gap_n[j]++;
		st->gap_ns[j] += gap;
		st->gap_sq[j] += gap * gap;
		st->gap_prog_ns[j] += st->last_prog_ns;
	}
	/* A gap over twice the mean (a short interrupt, a CPU sample) is in the books: leaving
	 * it out would depend on whether its call was stalled. The gaps after it are not: the
	 * thread catches up on its device for a while (whether they are left out depends on
	 * calls before theirs, so the stalls' share stays unbiased). */
	if (mean && gap > 2 * mean) {
		__u64 until = settle_until(start, gap - mean);

		if (until > st->settle_ns)
			st->settle_ns = until;
	}
}

/* This hit of group G by thread TID began at START: add its cost (the program's run time
 * so far and the trap around it) to the group and, in a window, to the thread. A counted
 * call (not a nested one) after the thread slept starts a new run: the delay the probes
 * caused before the sleep was made up for by it. One counted call in CUDA_STALL_EVERY of
 * a window is held stall_ns more, at random (struct cuda_tstate says why); that is part of
 * its cost. */
/* CHARGE_RET: a return probe's hit; CHARGE_COUNTED: a counted call's entry; CHARGE_BARE:
 * ... whose work was skipped (bare_every). A global function must return a scalar: it
 * returns 0. */
#define CHARGE_RET 1u
#define CHARGE_COUNTED 2u
#define CHARGE_BARE 4u

__noinline int charge(__u64 pid_tgid, __u32 g, __u64 start, __u32 how)
{
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	bool ret = how & CHARGE_RET, counted = how & CHARGE_COUNTED, bare = how & CHARGE_BARE;

	g &= CUDA_GROUPS_MAX - 1; /* a global function (verified once): nothing is known of G */
	struct cuda_tkey k = {.tid = tid, .group = g};
	struct cuda_tstate *st, *init;
	__u32 win = window_at(g, start);
	__u64 stalled = 0, pre = 0, now, cost, nv, niv, ut, stm;

	if (counted && !ret && !bare && win && win != CUDA_WINDOW_CLOSED && stall_ns &&
	    !(bpf_get_prandom_u32() & (CUDA_STALL_EVERY - 1))) {
		pre = bpf_ktime_get_ns();
		stall(stall_ns);
	}
	now = bpf_ktime_get_ns();
	/* What the stall added to the program is what the gaps after it are weighed
	 * against: from before it to after, with bpf_loop's own start and end, 50-90 ns
	 * beyond the stall's own clock (tests/workloads/probe/ret_delay.c; by that clock
	 * alone, a self-paced loop's stalls pushed out 1.06-1.16 of themselves). */
	if (pre)
		stalled = now - pre;
	cost = now - start + trap_ns[ret ? 1 : 0];
	__sync_fetch_and_add(&group_cost_ns[g], cost);
	if (!win)
		return 0;
	if (win == CUDA_WINDOW_CLOSED) {
		struct cuda_tclosed *c = bpf_map_lookup_elem(&tclosed, &k), cinit = {.tgid = tgid};

		if (!c) {
			bpf_map_update_elem(&tclosed, &k, &cinit, BPF_NOEXIST);
			c = bpf_map_lookup_elem(&tclosed, &k);
			if (!c)
				return 0;
		}
		/* one thread writes its own entry */
		c->hits += !ret;
		c->cost_ns += cost;
		c->traps_ns += trap_ns[ret ? 1 : 0];
		return 0;
	}
	st = bpf_map_lookup_elem(&tstates, &k);
	if (!st || st->window != win) {
		__u32 zero = 0;

		init = bpf_map_lookup_elem(&tstate_scratch, &zero);
		if (!init)
			return 0;
		__builtin_memset(init, 0, sizeof(*init));
		init->window = win;
		init->tgid = tgid;
		init->nvcsw = task_nvcsw();
		init->run_start_ns = start;
		init->first_ns = start;
		bpf_map_update_elem(&tstates, &k, init, BPF_ANY);
		st = bpf_map_lookup_elem(&tstates, &k);
		if (!st)
			return 0;
	}
	st->hits += !ret;
	st->cost_ns += cost;
	st->traps_ns += trap_ns[ret ? 1 : 0];
	if (counted && !ret) {
		nv = task_nvcsw();
		niv = task_nivcsw();
		note_gap(st, start, nv, niv);
		st->nivcsw = niv;
		st->last_class = bare ? 2 : stalled > 0 ? 1 : 0;
		st->last_prog_ns = now - start - stalled;
		st->stall_sum_ns += stalled;
		st->stalls += stalled > 0;
		st->bare += bare;
		if (nv != st->nvcsw || !st->run_calls) {
			st->nvcsw = nv;
			st->run_calls = 0;
			st->run_bare = 0;
			st->backlog_ns = 0;
			st->run_trap_ns = 0;
			st->run_start_ns = start;
			task_times(&st->utime0_ns, &st->stime0_ns);
			st->wait0_ns = task_u64(task_off.run_delay);
		}
		/* the last resume brought it up to date: exact at any hit */
		st->run_wait_ns = task_u64(task_off.run_delay) - st->wait0_ns;
		task_times(&ut, &stm);
		st->run_utime_ns = ut - st->utime0_ns;
		st->run_stime_ns = stm - st->stime0_ns;
		st->calls++;
		st->run_calls++;
		st->run_bare += bare;
		st->last_ns = start;
		st->last_cost_ns = cost;
	}
	st->backlog_ns += cost;
	st->run_trap_ns += trap_ns[ret ? 1 : 0];
	return 0;
}

/* A wait on the device of WAIT ns by TID: the probes' delay of its windowed groups is
 * made up for, up to that long (a device that was behind had the time anyway). */
static __always_inline void absorb(__u32 tid, __u64 wait)
{
#pragma unroll
	for (__u32 g = 0; g < 2; g++) {
		struct cuda_tkey k = {.tid = tid, .group = g};
		struct cuda_tstate *st = bpf_map_lookup_elem(&tstates, &k);

		if (!st || st->window != window_at(g, bpf_ktime_get_ns()))
			continue;
		if (wait >= st->backlog_ns)
			st->run_calls = 0; /* the next call starts a new run */
		else
			st->backlog_ns -= wait;
		if (st->run_trap_ns > st->backlog_ns)
			st->run_trap_ns = st->backlog_ns;
	}
}

#endif
