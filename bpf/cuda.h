/* SPDX-License-Identifier: MIT */
/* Shared between bpf/cuda.bpf.c and userspace/trace/cuda.c. __u32/__u64 only. */
#ifndef GPUBPF_CUDA_H
#define GPUBPF_CUDA_H

#ifndef __VMLINUX_H__
#include <linux/types.h> /* BPF code gets these from vmlinux.h */
#endif

/* How a probed function's arguments are decoded (bpf/cuda_abi.h has the placements). */
enum cuda_class {
	CC_RT_LAUNCH = 1,   /* cudaLaunchKernel, cudaLaunchCooperativeKernel (+_ptsz) */
	CC_RT_LAUNCH_EX,    /* cudaLaunchKernelExC (+_ptsz) */
	CC_DRV_LAUNCH,	    /* cuLaunchKernel, cuLaunchCooperativeKernel (+_ptsz) */
	CC_DRV_LAUNCH_EX,   /* cuLaunchKernelEx (+_ptsz) */
	CC_GRAPH,	    /* cudaGraphLaunch, cuGraphLaunch (+_ptsz) */
	CC_RT_MEMCPY,	    /* (dst, src, count, kind[, stream]) */
	CC_RT_MEMCPY2D,	    /* (dst, dpitch, src, spitch, width, height, kind[, stream]) */
	CC_RT_MEMCPY_PEER,  /* (dst, dstDev, src, srcDev, count[, stream]) */
	CC_RT_MEMSET,	    /* (ptr, value, count[, stream]) */
	CC_DRV_MEMCPY,	    /* (dst, src, bytes[, stream]), direction from the name */
	CC_DRV_MEMCPY_PEER, /* (dst, dstCtx, src, srcCtx, bytes[, stream]) */
	CC_DRV_MEMSET,	    /* (dst, value, N[, stream]), N elements of elem size */
	CC_SYNC,	    /* entry + return: wait time */
	CC_ALLOC,	    /* entry + return: (void **out, size[, ...]) */
	CC_FREE,	    /* (ptr[, stream]) */
	CC_NAME_MODULE,	    /* cuModuleGetFunction / cuLibraryGetKernel (out, mod, name): learn a name */
	CC_NAME_KERNEL_FN,  /* cuKernelGetFunction (out CUfunction, CUkernel) */
	CC_NAME_RT_KERNEL,  /* __cudaGetKernel (out cudaKernel_t, hostFun) */
	CC_CALIBRATE,	    /* gpubpf's own calibration target: the cost of a hit */
};

/* The attach cookie: which function (index into userspace's table) and how to decode it. */
#define CUDA_COOKIE(idx, cls, dir, elem, async, runtime)                                                               \
	((__u64)(idx) | ((__u64)(cls) << 16) | ((__u64)(dir) << 24) | ((__u64)(elem) << 28) | ((__u64)(async) << 32) | \
	 ((__u64)(runtime) << 33))
#define CUDA_COOKIE_IDX(c) ((__u32)((c)&0xffff))
#define CUDA_COOKIE_CLASS(c) ((__u32)(((c) >> 16) & 0xff))
#define CUDA_COOKIE_DIR(c) ((__u32)(((c) >> 24) & 0xf))
#define CUDA_COOKIE_ELEM(c) ((__u32)(((c) >> 28) & 0xf))
#define CUDA_COOKIE_ASYNC(c) ((__u32)(((c) >> 32) & 1))
#define CUDA_COOKIE_RUNTIME(c) ((__u32)(((c) >> 33) & 1))
/* The probe group (userspace's enum cuda_group), for the per-group hit counters. */
#define CUDA_COOKIE_WITH_GROUP(c, g) ((c) | ((__u64)(g) << 40))
#define CUDA_COOKIE_GROUP(c) ((__u32)(((c) >> 40) & 0x7))
#define CUDA_GROUPS_MAX 8

/* Memcpy directions, as cudaMemcpyKind; 5 = memset. */
#define CUDA_DIR_HTOH 0
#define CUDA_DIR_HTOD 1
#define CUDA_DIR_DTOH 2
#define CUDA_DIR_DTOD 3
#define CUDA_DIR_DEFAULT 4
#define CUDA_DIR_MEMSET 5

#define CUDA_KEY_ALLOC_STACK 1 /* ustack is an id in alloc_stacks, not the double buffer */

struct cuda_key {
	__u32 tgid;
	__u32 tid;
	__s32 ustack;
	__u32 api;     /* index into userspace's function table */
	__u32 flags;   /* CUDA_KEY_* */
	__u32 dir;     /* copies: CUDA_DIR_* */
	__s32 pystack; /* Python frames: id in py_stacks (bpf/python.bpf.h), or -1 */
	__u32 names;   /* the thread's names at the call (struct comm_key); every byte of the
			* key is set: it is hashed bytewise */
	__u32 window;  /* the sampling window of the call's group (window_id), 0: not windowed */
	__u32 pad;
	__u64 caller; /* [rsp] at an entry probe: the direct caller the frame walk misses; 0 at return probes */
	__u64 object; /* launches: the function pointer, cudaKernel_t or CUfunction */
	__u64 stream;
};

struct cuda_val {
	__u64 calls;
	__u64 bytes;   /* copies and sets: bytes; allocations: bytes requested */
	__u64 wait_ns; /* sync calls: wall time inside the call */
};

/* A live allocation: where it came from, for gpu_inuse at the end. */
struct cuda_alloc_key {
	__u32 tgid;
	__u32 pad;
	__u64 ptr;
};

struct cuda_alloc_val {
	__u64 size;
	struct cuda_key key;
};

/* What the probes of one group cost one thread during one sampling window (the overhead
 * budget's estimates, userspace/trace/estimate.h): read when the window closes. A thread that
 * calls again at once after a probe hit is delayed by it; one that slept or waited on the
 * device in between made up for it. */
struct cuda_tkey {
	__u32 tid;
	__u32 group;
};

struct cuda_tstate {
	__u32 window;	 /* the window these numbers are of */
	__u32 hits;	 /* entry hits in the window (nested ones too: each costs a trap) */
	__u32 calls;	 /* calls counted (not nested) */
	__u32 run_calls; /* ... since the thread last slept or waited on the device */
	__u64 tgid;
	__u64 nvcsw;	    /* its voluntary context switches at the last hit */
	__u64 run_start_ns; /* entry of the first counted call since then */
	__u64 first_ns;	    /* the thread's first hit in the window */
	__u64 last_ns;	    /* entry of the last counted call */
	__u64 backlog_ns;   /* probe time since then: the delay not made up for yet */
	__u64 last_cost_ns; /* the last hit's probe time */
	__u64 cost_ns;	    /* probe time in the window, traps included */
	__u64 run_trap_ns;  /* the part of backlog_ns that is calibrated traps, not timed */
	__u64 utime0_ns;    /* the thread's user and kernel CPU time at the run's first counted */
	__u64 stime0_ns;    /* call (task_struct's utime, stime: ticks of 1/HZ s, or exact) */
	__u64 run_utime_ns; /* ... and what each grew by up to its last counted call */
	__u64 run_stime_ns;
	__u64 wait0_ns;	   /* sched_info.run_delay at the run's first counted call ... */
	__u64 run_wait_ns; /* ... and what it grew by up to its last: the run's turns lost to other threads */
	__u64 traps_ns;	   /* the calibrated traps of every hit in the window (in cost_ns) */
	/* Does a delay before a call push the thread's next call out (it calls again as soon
	 * as it can), or does the call absorb it (it waits in the call for a device that sets
	 * the pace)? One counted call in CUDA_STALL_EVERY is stalled a further stall_ns at
	 * random, and the gaps from a call to the thread's next are summed apart after a
	 * stalled call ([1]) and after another ([0]), for gaps with no context switch in them
	 * shorter than CUDA_GAP_MAX_NS and than 4 times the window's mean so far (raw_ns), and not
	 * within CUDA_SETTLE gaps or CUDA_SETTLE_X times the time lost of one that was not
	 * (or of one over twice the mean): their means differ by the stall where it pushes,
	 * by nothing where it is absorbed. */
	/* And what a counted call's work (its stack walks and map updates, the most of a
	 * program) costs the job's own code after it, beyond the program's run time (its
	 * caches refilled): one counted call in bare_every, at random and not stalled, skips
	 * that work ("bare"), and the gaps after bare calls ([2]) are shorter than the others
	 * by the work's whole cost as far as the delay pushes calls out. GAP_PROG_NS sums the
	 * programs' run time of the calls each gap follows, which the difference is weighed
	 * against. */
	__u64 nivcsw;	      /* its involuntary context switches at the last counted call */
	__u64 gap_ns[3];      /* sums of the gaps */
	__u64 gap_sq[3];      /* ... of their squares (ns^2: at most the window's length times
			       * CUDA_GAP_MAX_NS) */
	__u64 gap_prog_ns[3]; /* ... of the run time of the programs before them */
	__u32 gap_n[3];	      /* ... and how many */
	__u32 last_class;     /* the last counted call: 0 another, 1 stalled, 2 bare */
	__u64 last_prog_ns;   /* ... its program's run time, the stall left out */
	__u32 bare;	      /* bare calls in the window (their stacks not taken) */
	__u32 run_bare;	      /* ... of the run's calls */
	__u64 stall_sum_ns;   /* the stalls' time (in cost_ns and backlog_ns) */
	__u32 stalls;	      /* ... and how many */
	__u32 settle;	      /* gaps left out yet after a disturbance (CUDA_SETTLE) */
	__u64 settle_ns;      /* ... and until when (CUDA_SETTLE_X its length) */
	__u64 raw_ns;	      /* the window's gaps with no disturbance in them, counted or not */
	__u32 raw_n;	      /* ... and how many: their mean is what "4 times the mean" is of */
	__u32 raw_pad;
};

#define CUDA_STALL_EVERY 4	   /* a power of two */
#define CUDA_GAP_MAX_NS 1000000ull /* 1 ms */
/* Gaps left out after a disturbance: a thread it put behind its device calls as fast as
 * it can until the device's queue is full again, and a stall then pushes its next call,
 * but the delay is made up in the end */
#define CUDA_SETTLE 32
/* ... and for this many times the disturbance's length, at most CUDA_SETTLE_MAX_NS: a
 * thread that gains on its device by a part f of its pace catches up in 1/f times the
 * time it lost (1 ms lost, 300 calls of 7 us against a 10 us device) */
#define CUDA_SETTLE_X 4
#define CUDA_SETTLE_MAX_NS 16000000ull /* 16 ms */

/* Per thread and windowed group, since the recording began: what its hits cost while the
 * group's probes were in but no window was open (put in ahead of a window, not yet out
 * after one: attaching and detaching take the kernel milliseconds, and a thread that calls
 * all the time pays a trap at every call then). Counted nowhere, paid all the same: the
 * overhead estimate and the governor take it from here. */
struct cuda_tclosed {
	__u64 tgid;
	__u64 hits;	/* entry hits */
	__u64 cost_ns;	/* probe time, traps included */
	__u64 traps_ns; /* the calibrated traps in cost_ns */
};

/* window_id of a windowed group between its windows: probes may be attached (a window is
 * about to open, or has just closed) but calls count nowhere. */
#define CUDA_WINDOW_CLOSED 0xffffffffu

/* A guard wake-up (guard_events): group `group` reached its guard_at count. */
struct cuda_guard_event {
	__u32 group;
	__u32 tgid;
};

enum cuda_event_type {
	CUDA_EV_FUNC_NAME = 1,	 /* handle (CUfunction or CUkernel) is called name */
	CUDA_EV_KERNEL_FUNC = 2, /* CUfunction handle belongs to CUkernel other */
	CUDA_EV_RT_KERNEL = 3,	 /* cudaKernel_t handle belongs to host function other */
	CUDA_EV_GUARD = 4,	 /* group `handle` reached its guard_at count: look now */
};

/* --trace: one timed API call (call_events ring buffer). */
struct cuda_call_event {
	__u32 tgid;
	__u32 tid;
	__u32 api;
	__u32 dir;
	__u64 start_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u64 dur_ns;
	__u64 object; /* launches: the function handle */
	__u64 bytes;  /* copies, sets, allocations */
	__u64 stream;
};

/* Kernel names of C++ templates run to kilobytes mangled (PyTorch's elementwise kernels):
 * read whole, and sent at the length they have (bpf_ringbuf_output of a prefix). */
#define CUDA_NAME_MAX 4096

struct cuda_event {
	__u32 type;
	__u32 tgid;
	__u64 handle;
	__u64 other;
	char name[CUDA_NAME_MAX];
};

#endif /* GPUBPF_CUDA_H */
