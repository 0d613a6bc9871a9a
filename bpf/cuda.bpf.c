// SPDX-License-Identifier: GPL-2.0
/* CUDA host-side tracing: uprobes on runtime and driver entry points. Counts, bytes and
 * wait times are aggregated in the kernel per (thread, stack, function, kernel, stream);
 * the ring buffer carries only rare events (kernel names learned from the driver).
 *
 * One entry program and one return program serve every function: the attach cookie
 * (CUDA_COOKIE) says which function it is and how to decode its arguments. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "regs.bpf.h"
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define EFAULT 14
#define ENOMEM 12
#include "targets.bpf.h"
#include "stacks.bpf.h"
#include "fpwalk.bpf.h"
#include "python.bpf.h"
#include "cuda_abi.h"
#include "cuda.h"

char LICENSE[] SEC("license") = "GPL";

struct cuda_counts {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* per buffer: (thread, call, stack) keys seen in a second */
	__type(key, struct cuda_key);
	__type(value, struct cuda_val);
};
struct cuda_counts ccounts0 SEC(".maps");
struct cuda_counts ccounts1 SEC(".maps");

/* Allocation stacks outlive the double buffer: a live allocation is reported under its
 * stack at the end of the recording. Allocations are rare, so this map stays small. */
DEFINE_STACK_MAP(alloc_stacks, 8192);

/* ... and the allocation stacks whose bucket there another holds (bpf/stackid.bpf.h) */
DEFINE_STACK_MAP(alloc_stacks_ovf, 1024);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct cuda_alloc_key);
	__type(value, struct cuda_alloc_val);
} live_allocs SEC(".maps");

/* The outermost runtime call a thread is in (sp and return slot): a driver call made
 * from inside it is the same user call and is not counted again. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct cuda_abi_frame);
} rt_frames SEC(".maps");

/* A call with a return probe (syncs, allocations, name lookups; every call with --trace),
 * from entry to return. */
struct pending {
	__u64 cookie;
	__u64 ts;
	__u64 out;  /* out-pointer argument */
	__u64 arg;  /* size, hostFun, CUkernel */
	__u64 name; /* user pointer to a kernel name */
	__u64 caller;
	/* --trace: what the call event reports */
	__u64 object;
	__u64 bytes;
	__u64 stream;
	__u32 dir;
	__u32 window; /* the call's window: the one open at its entry */
};

/* --trace: every traced call with its entry time and duration. Sized by userspace. */
const volatile bool trace_calls = false;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* resized by userspace with --trace */
} call_events SEC(".maps");

__u64 lost_call_events = 0;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pending);
} pendings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} cuda_events SEC(".maps");

/* Entry hits on targets per probe group, read by userspace's overhead guard through the
 * mmapped .bss. guard_at[g] is the count past which group g costs more than the plan
 * allowed it until the guard's next look: the hit that reaches it (while armed) wakes the
 * window thread (guard_events) at once instead of at that look. */
__u64 group_hits[CUDA_GROUPS_MAX] = {};
volatile __u64 guard_at[CUDA_GROUPS_MAX] = {};
volatile __u32 guard_armed[CUDA_GROUPS_MAX] = {};
/* What the probes cost where the job runs: per group, return hits and the time of every
 * hit (the program's own run time, measured here, plus trap_ns, the trap around it that
 * only a calibration can measure: entry, return). */
__u64 group_ret_hits[CUDA_GROUPS_MAX] = {};
/* Calls with a return probe between entry and return, per group: a window's group stays
 * attached for their returns. */
__s64 group_pending[CUDA_GROUPS_MAX] = {};
__u64 group_cost_ns[CUDA_GROUPS_MAX] = {};
volatile __u64 trap_ns[2] = {};
/* Tests only (GPUBPF_TEST_TRAP_NS): every hit held this much more before its program's
 * clock starts (entry, return), as a host whose traps are dearer makes it: a CI host may
 * have traps several times this development VM's (docs/BENCHMARKS.md, the twenty-ninth
 * session). 0, the rule: the verifier drops it. */
const volatile __u64 dear_ns[2] = {};
/* The stall that measures whether the probes' delay pushes a thread's calls out
 * (struct cuda_tstate): set by userspace once the costs are calibrated; 0: none. */
volatile __u64 stall_ns = 0;
/* One counted call in a window in this many (a power of two; 0: none) skips its work, at
 * random: what that work costs the job's code after it (struct cuda_tstate). Its call is
 * in no stack's count; the window's other calls count for it (windows.c). */
volatile __u32 bare_every = 0;
/* The sampling window each group's calls belong to (0: not windowed; CUDA_WINDOW_CLOSED:
 * between windows, when probes attached early or not yet detached count nothing): calls
 * carry it in their key, threads' costs in tstates. Userspace writes a window's bounds
 * (CLOCK_MONOTONIC ns), then its id, ahead of its start, and closes it by writing the id
 * after its end: the window holds exactly [open, close), however late the thread that
 * writes it wakes (a window that met a loop's tick where the thread woke to close it
 * saw that tick too: +9% on a steady loop). */
volatile __u32 window_id[CUDA_GROUPS_MAX] = {};
volatile __u64 window_open_ns[CUDA_GROUPS_MAX] = {}, window_close_ns[CUDA_GROUPS_MAX] = {};

static __always_inline __u32 window_at(__u32 g, __u64 t)
{
	__u32 win = window_id[g & (CUDA_GROUPS_MAX - 1)];

	if (win && win != CUDA_WINDOW_CLOSED &&
	    (t < window_open_ns[g & (CUDA_GROUPS_MAX - 1)] || t >= window_close_ns[g & (CUDA_GROUPS_MAX - 1)]))
		return CUDA_WINDOW_CLOSED;
	return win;
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} guard_events SEC(".maps");

/* Per thread and windowed group: its hits and their cost in the current window. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct cuda_tkey);
	__type(value, struct cuda_tstate);
} tstates SEC(".maps");

/* Per thread and windowed group: hits with probes in and no window open (struct
 * cuda_tclosed). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct cuda_tkey);
	__type(value, struct cuda_tclosed);
} tclosed SEC(".maps");

/* Counted calls whose aggregation entry could not be created, and lost name events. */
__u64 dropped_calls = 0;
__u64 lost_events = 0;
__u64 calib_hits = 0;
__u64 calib_ns = 0; /* the calibration hits' own run time */

/* Runtime errors that only say "no GPU or driver here" (cudaErrorInsufficientDriver,
 * cudaErrorNoDevice, CUDA_ERROR_STUB_LIBRARY, CUDA_ERROR_NO_DEVICE): the call is still the
 * program's intent, so allocations that fail this way are counted. Any other error (an
 * out-of-memory retry) allocated nothing. */
static __always_inline bool call_counts(int rc)
{
	return rc == 0 || rc == 35 || rc == 100 || rc == 34;
}

static __always_inline void account(struct cuda_key *key, __u64 bytes, __u64 wait_ns)
{
	void *counts = (buf_active & 1) ? (void *)&ccounts1 : (void *)&ccounts0;
	struct cuda_val *v, init = {};

	v = bpf_map_lookup_elem(counts, key);
	if (!v) {
		bpf_map_update_elem(counts, key, &init, BPF_NOEXIST);
		v = bpf_map_lookup_elem(counts, key);
		if (!v) {
			__sync_fetch_and_add(&dropped_calls, 1);
			stat_inc(STAT_MAP_FULL);
			return;
		}
	}
	__sync_fetch_and_add(&v->calls, 1);
	if (bytes)
		__sync_fetch_and_add(&v->bytes, bytes);
	if (wait_ns)
		__sync_fetch_and_add(&v->wait_ns, wait_ns);
	stat_inc(STAT_SAMPLES);
}

/* True when this call runs inside a traced runtime call of the same thread (the runtime
 * calling the driver, or one runtime entry point another): count the outer one only.
 * A runtime call that is not nested becomes the thread's outer frame. */
static __always_inline bool nested_call(struct pt_regs *ctx, __u32 tid, bool runtime)
{
	struct cuda_abi_frame *outer = bpf_map_lookup_elem(&rt_frames, &tid);
	struct cuda_abi_frame f;

	if (outer && cuda_abi_frame_active(ctx, outer))
		return true;
	if (runtime) {
		cuda_abi_frame_enter(ctx, &f);
		bpf_map_update_elem(&rt_frames, &tid, &f, BPF_ANY);
	}
	return false;
}

/* Name events are built here (4 KiB: not on the BPF stack) and sent at their length. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cuda_event);
} event_scratch SEC(".maps");

static __always_inline void emit_event(__u32 type, __u32 tgid, __u64 handle, __u64 other, const char *name)
{
	__u32 zero = 0;
	struct cuda_event *e = bpf_map_lookup_elem(&event_scratch, &zero);
	long n = 0;
	__u64 size;

	if (!e)
		return;
	e->type = type;
	e->tgid = tgid;
	e->handle = handle;
	e->other = other;
	e->name[0] = '\0';
	if (name)
		n = bpf_probe_read_user_str(e->name, sizeof(e->name), name);
	if (n < 1) {
		e->name[0] = '\0';
		n = 1;
	}
	size = offsetof(struct cuda_event, name) + (__u64)n;
	if (size > sizeof(*e))
		size = sizeof(*e);
	if (bpf_ringbuf_output(&cuda_events, e, size, 0))
		__sync_fetch_and_add(&lost_events, 1);
}

#include "cuda_charge.bpf.h"

/* A hit's start: the program's clock, after the dearer trap a test asks for (dear_ns). */
static __always_inline __u64 hit_start(int ret)
{
	if (dear_ns[ret & 1])
		stall(dear_ns[ret & 1]);
	return bpf_ktime_get_ns();
}

static __always_inline int enter(struct pt_regs *ctx)
{
	__u64 start = hit_start(0);
	__u64 pid_tgid = bpf_get_current_pid_tgid(), cookie = bpf_get_attach_cookie(ctx);
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u32 cls = CUDA_COOKIE_CLASS(cookie), async = CUDA_COOKIE_ASYNC(cookie);
	struct cuda_key key = {};
	struct cuda_abi_launch l = {};
	struct pending pend = {};
	__u64 bytes = 0;

	__u32 g = CUDA_COOKIE_GROUP(cookie) & (CUDA_GROUPS_MAX - 1);

	if (cls == CC_CALIBRATE) {
		/* The work of a counted call (stack capture, map update), on gpubpf itself. */
		key.ustack = capture_ustack_fp(ctx, buf_active & 1);
		if (!bpf_map_lookup_elem(&rt_frames, &tid)) {
			__sync_fetch_and_add(&calib_hits, 1);
			__sync_fetch_and_add(&calib_ns, bpf_ktime_get_ns() - start);
		}
		return 0;
	}
	if (!is_target(tgid))
		return 0;
	__sync_fetch_and_add(&group_hits[g], 1);
	/* Two CPUs may both see it: a second wake-up is harmless. */
	if (guard_armed[g] && group_hits[g] >= guard_at[g]) {
		struct cuda_guard_event ge = {.group = g, .tgid = tgid};

		guard_armed[g] = 0;
		bpf_ringbuf_output(&guard_events, &ge, sizeof(ge), 0);
	}
	key.window = window_at(g, start);
	if (key.window == CUDA_WINDOW_CLOSED || nested_call(ctx, tid, CUDA_COOKIE_RUNTIME(cookie))) {
		charge(pid_tgid, g, start, 0);
		return 0;
	}

	key.tgid = tgid;
	key.tid = tid;
	key.api = CUDA_COOKIE_IDX(cookie);
	key.caller = cuda_abi_ret_addr(ctx);

	switch (cls) {
	case CC_RT_LAUNCH:
		cuda_abi_runtime_launch(ctx, &l);
		key.object = l.func;
		key.stream = l.stream;
		break;
	case CC_RT_LAUNCH_EX:
		cuda_abi_runtime_launch_ex(ctx, &l);
		key.object = l.func;
		key.stream = l.stream;
		break;
	case CC_DRV_LAUNCH:
		cuda_abi_driver_launch(ctx, &l);
		key.object = l.func;
		key.stream = l.stream;
		break;
	case CC_DRV_LAUNCH_EX:
		cuda_abi_driver_launch_ex(ctx, &l);
		key.object = l.func;
		key.stream = l.stream;
		break;
	case CC_GRAPH:
		key.object = CUDA_ABI_GRAPH_EXEC(ctx);
		key.stream = CUDA_ABI_GRAPH_STREAM(ctx);
		break;
	case CC_RT_MEMCPY:
		bytes = CUDA_ABI_MEMCPY_BYTES(ctx);
		key.dir = CUDA_ABI_MEMCPY_KIND(ctx);
		if (key.dir > CUDA_DIR_DEFAULT)
			key.dir = CUDA_DIR_DEFAULT;
		if (async)
			key.stream = CUDA_ABI_MEMCPY_ASYNC_STREAM(ctx);
		break;
	case CC_RT_MEMCPY2D:
		bytes = CUDA_ABI_MEMCPY2D_BYTES(ctx);
		key.dir = CUDA_ABI_MEMCPY2D_KIND(ctx);
		if (key.dir > CUDA_DIR_DEFAULT)
			key.dir = CUDA_DIR_DEFAULT;
		if (async)
			key.stream = CUDA_ABI_MEMCPY2D_ASYNC_STREAM(ctx);
		break;
	case CC_RT_MEMCPY_PEER:
		bytes = CUDA_ABI_MEMCPY_PEER_BYTES(ctx);
		key.dir = CUDA_DIR_DTOD;
		if (async)
			key.stream = CUDA_ABI_MEMCPY_PEER_ASYNC_STREAM(ctx);
		break;
	case CC_RT_MEMSET:
		bytes = CUDA_ABI_MEMSET_BYTES(ctx);
		key.dir = CUDA_DIR_MEMSET;
		if (async)
			key.stream = CUDA_ABI_MEMSET_ASYNC_STREAM(ctx);
		break;
	case CC_DRV_MEMCPY:
		bytes = CUDA_ABI_CU_MEMCPY_BYTES(ctx);
		key.dir = CUDA_COOKIE_DIR(cookie);
		if (async)
			key.stream = CUDA_ABI_CU_MEMCPY_ASYNC_STREAM(ctx);
		break;
	case CC_DRV_MEMCPY_PEER:
		bytes = CUDA_ABI_CU_MEMCPY_PEER_BYTES(ctx);
		key.dir = CUDA_DIR_DTOD;
		if (async)
			key.stream = CUDA_ABI_CU_MEMCPY_PEER_ASYNC_STREAM(ctx);
		break;
	case CC_DRV_MEMSET:
		bytes = CUDA_ABI_CU_MEMSET_BYTES(ctx, CUDA_COOKIE_ELEM(cookie));
		key.dir = CUDA_DIR_MEMSET;
		if (async)
			key.stream = CUDA_ABI_CU_MEMSET_ASYNC_STREAM(ctx);
		break;
	case CC_FREE: {
		struct cuda_alloc_key ak = {.tgid = tgid, .ptr = CUDA_ABI_FREE_PTR(ctx)};

		bpf_map_delete_elem(&live_allocs, &ak);
		break;
	}
	case CC_SYNC:
	case CC_ALLOC:
	case CC_NAME_MODULE:
	case CC_NAME_KERNEL_FN:
	case CC_NAME_RT_KERNEL:
		/* Finished at return (cuda_exit). */
		pend.cookie = cookie;
		pend.ts = bpf_ktime_get_ns();
		pend.out = PT_REGS_PARM1(ctx);
		pend.arg = PT_REGS_PARM2(ctx);
		pend.bytes = cls == CC_ALLOC ? pend.arg : 0;
		pend.name = PT_REGS_PARM3(ctx);
		pend.caller = key.caller;
		pend.window = key.window;
		if (!bpf_map_update_elem(&pendings, &tid, &pend, BPF_ANY))
			__sync_fetch_and_add(&group_pending[g], 1);
		charge(pid_tgid, g, start, CHARGE_COUNTED);
		return 0;
	default:
		return 0;
	}
	if (bare_every && key.window && !trace_calls && !(bpf_get_prandom_u32() & (bare_every - 1))) {
		charge(pid_tgid, g, start, CHARGE_COUNTED | CHARGE_BARE);
		return 0;
	}
	key.ustack = capture_ustack_fp(ctx, buf_active & 1);
	key.pystack = python_capture(tgid, tid);
	key.names = record_comm(tgid, tid);
	account(&key, bytes, 0);
	if (trace_calls) {
		/* The return probe reports the call with its duration. */
		pend.cookie = cookie;
		pend.ts = bpf_ktime_get_ns();
		pend.object = key.object;
		pend.bytes = bytes;
		pend.stream = key.stream;
		pend.dir = key.dir;
		bpf_map_update_elem(&pendings, &tid, &pend, BPF_ANY);
	}
	charge(pid_tgid, g, start, CHARGE_COUNTED);
	return 0;
}

static __always_inline void emit_call(const struct pending *pend, __u32 tgid, __u32 tid, __u64 now)
{
	struct cuda_call_event *e = bpf_ringbuf_reserve(&call_events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost_call_events, 1);
		return;
	}
	e->tgid = tgid;
	e->tid = tid;
	e->api = CUDA_COOKIE_IDX(pend->cookie);
	e->dir = pend->dir;
	e->start_ns = pend->ts;
	e->dur_ns = now - pend->ts;
	e->object = pend->object;
	e->bytes = pend->bytes;
	e->stream = pend->stream;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int leave(struct pt_regs *ctx)
{
	__u64 start = hit_start(1);
	__u64 pid_tgid = bpf_get_current_pid_tgid(), cookie = bpf_get_attach_cookie(ctx);
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid, g = CUDA_COOKIE_GROUP(cookie) & (CUDA_GROUPS_MAX - 1);
	struct cuda_key key = {};
	struct pending *pend;
	__u64 handle = 0, now;
	int rc = (int)PT_REGS_RC(ctx); /* a CUresult/cudaError_t: 32 bits, the rest is garbage */

	if (!is_target(tgid))
		return 0;
	__sync_fetch_and_add(&group_ret_hits[g], 1);
	pend = bpf_map_lookup_elem(&pendings, &tid);
	/* Not ours: a nested call whose entry was skipped, or a pending record of another function. */
	if (!pend || pend->cookie != cookie) {
		charge(pid_tgid, g, start, CHARGE_RET);
		return 0;
	}
	now = bpf_ktime_get_ns();
	/* A call belongs to the window open at its entry (one that waited long on the device
	 * still counts there), which userspace keeps attached for its return. */
	key.window = pend->window;
	if (CUDA_COOKIE_CLASS(cookie) >= CC_SYNC && CUDA_COOKIE_CLASS(cookie) != CC_FREE)
		__sync_fetch_and_sub(&group_pending[g], 1);

	key.tgid = tgid;
	key.tid = tid;
	key.api = CUDA_COOKIE_IDX(cookie);

	switch (CUDA_COOKIE_CLASS(cookie)) {
	case CC_SYNC:
		/* At return the frame walk starts in the caller: no separate caller frame. */
		key.ustack = capture_ustack_fp(ctx, buf_active & 1);
		key.pystack = python_capture(tgid, tid);
		key.names = record_comm(tgid, tid);
		account(&key, 0, now - pend->ts);
		absorb(tid, now - pend->ts);
		break;
	case CC_ALLOC: {
		struct cuda_alloc_key ak = {.tgid = tgid};
		struct cuda_alloc_val av = {};
		long id;

		if (!call_counts(rc))
			break;
		bpf_probe_read_user(&ak.ptr, sizeof(ak.ptr), (void *)pend->out);
		id = stackid_ovf(ctx, &alloc_stacks, &alloc_stacks_ovf, BPF_F_USER_STACK);
		if (id < 0)
			stat_inc(id == -ENOMEM ? STAT_STACK_FULL : STAT_USTACK_LOST);
		key.ustack = id < 0 ? -1 : (__s32)id;
		/* py_stacks is never cleared: the id stays valid for gpu_inuse at the end. */
		key.pystack = python_capture(tgid, tid);
		key.flags = CUDA_KEY_ALLOC_STACK;
		key.names = record_comm(tgid, tid);
		account(&key, pend->arg, 0);
		av.size = pend->arg;
		av.key = key;
		if (ak.ptr)
			bpf_map_update_elem(&live_allocs, &ak, &av, BPF_ANY);
		break;
	}
	case CC_NAME_MODULE:
		if (rc != 0 && rc != 34)
			break;
		bpf_probe_read_user(&handle, sizeof(handle), (void *)pend->out);
		if (handle)
			emit_event(CUDA_EV_FUNC_NAME, tgid, handle, 0, (const char *)pend->name);
		break;
	case CC_NAME_KERNEL_FN:
		bpf_probe_read_user(&handle, sizeof(handle), (void *)pend->out);
		if (handle)
			emit_event(CUDA_EV_KERNEL_FUNC, tgid, handle, pend->arg, NULL);
		break;
	case CC_NAME_RT_KERNEL:
		bpf_probe_read_user(&handle, sizeof(handle), (void *)pend->out);
		if (handle)
			emit_event(CUDA_EV_RT_KERNEL, tgid, handle, pend->arg, NULL);
		break;
	}
	if (trace_calls && CUDA_COOKIE_CLASS(cookie) < CC_NAME_MODULE)
		emit_call(pend, tgid, tid, now);
	bpf_map_delete_elem(&pendings, &tid);
	charge(pid_tgid, g, start, CHARGE_RET);
	return 0;
}

/* Two flavours of the same programs: attached through uprobe_multi links where the kernel
 * has them (one link per object, detached in one grace period), else one perf uprobe per
 * function. Userspace loads one flavour only. */
SEC("uprobe")
int cuda_enter(struct pt_regs *ctx)
{
	return enter(ctx);
}

SEC("uretprobe")
int cuda_exit(struct pt_regs *ctx)
{
	return leave(ctx);
}

SEC("uprobe")
int cuda_enter_multi(struct pt_regs *ctx)
{
	return enter(ctx);
}

SEC("uprobe")
int cuda_exit_multi(struct pt_regs *ctx)
{
	return leave(ctx);
}
