/* SPDX-License-Identifier: MIT */
/* Python stacks: walk the current thread's CPython frame chain and store the frames
 * (code object address, instruction pointer) in py_stacks, keyed by their hash.
 * Included by cpu.bpf.c and cuda.bpf.c; userspace (python.c) makes every object share
 * py_procs, py_tstates and py_stacks with bpf_map__reuse_fd() before load.
 *
 * Finding the thread's PyThreadState: _PyRuntime's "current tstate" names only the GIL
 * holder, and a thread in a ctypes call (cudaLaunchKernel) or blocked in I/O has
 * released the GIL. The autoTSSkey pthread key is per thread but needs glibc's private
 * struct pthread layout. Instead we walk interp->threads (bounded) and match
 * native_thread_id (3.11+) against the tid, or thread_id (pthread_self(), which is the
 * thread pointer, fsbase, on x86-64 glibc and musl) on 3.10. The answer is cached per
 * tid in py_tstates and re-validated with one read at each use, so the walk runs once
 * per thread (and at most every 50 ms for threads that are not Python threads). */
#ifndef GPUBPF_PYTHON_BPF_H
#define GPUBPF_PYTHON_BPF_H

#include "python.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PY_PROCS_ENTRIES);
	__type(key, __u32); /* tgid */
	__type(value, struct py_proc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PY_TSTATES_ENTRIES);
	__type(key, __u32); /* tid */
	__type(value, struct py_tcache);
} py_tstates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PY_STACKS_ENTRIES);
	__type(key, __u32); /* hash of the frames */
	__type(value, struct py_stack);
} py_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} py_new_stacks SEC(".maps");

struct py_scratch {
	struct py_stack st;
	/* PY_FRAME_READ bytes of the current frame; twice that so that a field offset
	 * masked with 0x7f plus an 8-byte load stays inside for the verifier. */
	__u8 fbuf[2 * 128];
};
_Static_assert(PY_FRAME_READ <= 128, "frame read must fit the masked window");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_scratch);
} py_scratch SEC(".maps");

/* Captures that failed, by reason (userspace does not read these yet; bpftool does). */
__u64 py_no_tstate = 0;
__u64 py_fault = 0;

static __always_inline __u64 py_read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

static __always_inline __u64 py_thread_key(const struct py_proc *pp, __u32 tid)
{
#if defined(__TARGET_ARCH_x86)
	if (pp->flags & PY_F_MATCH_FSBASE) {
		void *task = (void *)bpf_get_current_task();
		__u64 fs = 0;

		if (!task_off.fsbase || bpf_probe_read_kernel(&fs, sizeof(fs), task + task_off.fsbase))
			return 0;
		return fs;
	}
#else
	if (pp->flags & PY_F_MATCH_FSBASE)
		return 0; /* 3.10 on other architectures: not supported */
#endif
	return tid;
}

static __always_inline __u64 py_find_tstate(const struct py_proc *pp, __u32 tid)
{
	struct py_tcache *c = bpf_map_lookup_elem(&py_tstates, &tid), nc = {};
	__u64 want = py_thread_key(pp, tid), now = bpf_ktime_get_ns(), interp, t;

	if (!want)
		return 0;
	if (c) {
		if (c->tstate && py_read_ptr(c->tstate + pp->tstate_match) == want)
			return c->tstate;
		/* Not a Python thread a moment ago: do not walk the list at every sample
		 * (CUDA or OpenMP threads of a PyTorch process). Short, so that a thread just
		 * started is found soon after its thread state is linked. */
		if (!c->tstate && now - c->ts < 50000000ULL)
			return 0;
	}
	interp = py_read_ptr(pp->interp_head);
	if (!interp)
		return 0; /* not initialized yet: no negative cache, it will be soon */
	t = py_read_ptr(interp + pp->interp_threads);
	for (int i = 0; i < PY_MAX_THREADS && t; i++) {
		if (py_read_ptr(t + pp->tstate_match) == want) {
			nc.tstate = t;
			break;
		}
		t = py_read_ptr(t + pp->tstate_next);
	}
	nc.ts = now;
	bpf_map_update_elem(&py_tstates, &tid, &nc, BPF_ANY);
	return nc.tstate;
}

/* One frame of the walk (bpf_loop: the verifier checks one step, not PY_MAX_DEPTH). */
struct py_walk {
	const struct py_proc *pp;
	struct py_scratch *sc;
	__u64 frame;
	__u32 hash, depth;
};

static long py_walk_step(__u64 i, void *data)
{
	struct py_walk *w = data;
	const struct py_proc *pp = w->pp;
	struct py_scratch *sc = w->sc;
	__u64 code, instr, tag = 0;
	__u32 d = w->depth, hash = w->hash;

	if (!w->frame || d >= PY_MAX_DEPTH)
		return 1;
	if (bpf_probe_read_user(sc->fbuf, PY_FRAME_READ, (void *)w->frame)) {
		sc->st.flags |= PY_STACK_FAULT;
		__sync_fetch_and_add(&py_fault, 1);
		return 1;
	}
	/* Offsets come from a map: mask them into the read window for the verifier. */
	code = *(__u64 *)(sc->fbuf + (pp->frame_code & 0x7f));
	if (pp->flags & PY_F_FRAMEOBJ)
		instr = *(__u32 *)(sc->fbuf + (pp->frame_instr & 0x7f));
	else
		instr = *(__u64 *)(sc->fbuf + (pp->frame_instr & 0x7f));
	if (pp->frame_owner < PY_FRAME_READ)
		tag = sc->fbuf[pp->frame_owner & 0x7f];
	sc->st.frames[d].code = code;
	sc->st.frames[d].instr = (instr & PY_INSTR_MASK) | (tag << 56);
	hash = (hash ^ (__u32)code ^ (__u32)(code >> 32)) * 16777619u;
	w->hash = (hash ^ (__u32)instr ^ (__u32)(tag << 24)) * 16777619u;
	w->depth = d + 1;
	w->frame = *(__u64 *)(sc->fbuf + (pp->frame_previous & 0x7f));
	return 0;
}

/* The frame chain of the current thread into py_stacks: returns its id (a hash), or -1
 * when the process is not a known Python, the thread has no thread state, or the map
 * is full. A global function: the verifier checks it once, not at each call site. */
__noinline __s32 python_capture(__u32 tgid, __u32 tid)
{
	struct py_proc *pp = bpf_map_lookup_elem(&py_procs, &tgid);
	struct py_scratch *sc;
	struct py_walk w = {};
	__u32 zero = 0, depth, hash = 2166136261u;
	__u64 tstate, frame;

	if (!pp)
		return -1;
	sc = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!sc)
		return -1;
	tstate = py_find_tstate(pp, tid);
	if (!tstate) {
		__sync_fetch_and_add(&py_no_tstate, 1);
		return -1;
	}
	frame = py_read_ptr(tstate + pp->tstate_frame);
	if (frame && (pp->flags & PY_F_CFRAME))
		frame = py_read_ptr(frame + pp->cframe_current);

	sc->st.flags = 0;
	w.pp = pp;
	w.sc = sc;
	w.frame = frame;
	w.hash = hash;
	bpf_loop(PY_MAX_DEPTH, py_walk_step, &w, 0);
	frame = w.frame;
	hash = w.hash;
	depth = w.depth;
	if (frame && depth == PY_MAX_DEPTH)
		sc->st.flags |= PY_STACK_TRUNCATED;
	if (!depth)
		return -1;
	sc->st.depth = depth;
	sc->st.tgid = tgid;
	sc->st.pad = 0;
	hash = (hash ^ depth ^ (sc->st.flags << 16)) * 16777619u;
	hash = (hash ^ tgid) * 16777619u;
	/* Frames past depth hold whatever an earlier capture left: the value is compared by
	 * hash only, and userspace reads depth frames. */
	hash &= 0x7fffffff; /* ids are non-negative __s32 */
	if (bpf_map_update_elem(&py_stacks, &hash, &sc->st, BPF_NOEXIST) == 0) {
		/* New: tell userspace now, so it decodes the frames while the process lives.
		 * A full ring buffer only means decoding at the next drain. */
		struct py_new_stack ns = {.id = hash, .tgid = tgid};

		bpf_ringbuf_output(&py_new_stacks, &ns, sizeof(ns), 0);
	} else if (!bpf_map_lookup_elem(&py_stacks, &hash)) {
		return -1;
	}
	return (__s32)hash;
}

#endif /* GPUBPF_PYTHON_BPF_H */
