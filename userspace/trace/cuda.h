/* SPDX-License-Identifier: MIT */
/* CUDA host-side tracing: finds runtime and driver entry points by symbol in every object
 * the targets map (shared libcudart, static cudart inside an executable, libcuda), attaches
 * uprobes to them, and drains what bpf/cuda.bpf.c aggregated into the profile. */
#ifndef GPUBPF_CUDA_USER_H
#define GPUBPF_CUDA_USER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_api.h"
#include "session.h"

struct cuda_tracer;

struct cuda_stats {
	uint64_t calls;	  /* traced calls counted */
	uint64_t dropped; /* calls dropped: aggregation map full */
	uint64_t lost_stacks;
	uint64_t kernel_walks;	/* hits whose stacks the kernel walked (bpf/fpwalk.bpf.h) */
	uint64_t lost_events;	/* name events lost */
	int objects;		/* objects with CUDA entry points probed */
	int probes;		/* uprobes attached */
	size_t trace_events;	/* --trace: calls in the timeline */
	uint64_t trace_dropped; /* --trace: calls past --max-events or lost in the ring buffer */
};

/* Open and load (no probes yet): NULL with errno set (a message was printed). */
struct cuda_tracer *cuda__new(struct session *s, int targets_fd, int comms_fd);
void cuda__free(struct cuda_tracer *c);

/* Look for CUDA entry points in every object the live targets map that was not looked at
 * yet, and attach probes there. Cheap when nothing new is mapped: call it every tick. */
int cuda__scan(struct cuda_tracer *c);

/* Move what the kernel aggregated into the profile. Calls of windowed groups count their
 * window's weight (windows.h); a call whose window's books are still open waits for the
 * next drain. final: drain both buffers and everything that waited. */
int cuda__drain(struct cuda_tracer *c, bool final);

/* Overhead budget: probe groups (enum cuda_group) attached in windows. Only where the
 * kernel has uprobe_multi links (cuda__windowed); otherwise every probe stays attached. */
struct windows;
bool cuda__windowed(const struct cuda_tracer *c);
/* Drained calls take their weights from W (NULL: every call counts 1). */
void cuda__set_windows(struct cuda_tracer *c, struct windows *w);
/* Attach or detach group G in every probed object (thread-safe). Detaching happens on a
 * thread; when it begins (the breakpoints go), *BEGAN gets CLOCK_MONOTONIC ns. */
void cuda__set_group(struct cuda_tracer *c, int g, bool on, _Atomic int64_t *began);
/* The launch probes' (CG_LAUNCH) switches, as FN(ARG, event) calls: ATTACHING just before
 * they go in, IN once the attach returned (the breakpoints are in), DETACHING just before
 * they come out, OUT once every one is out (after the closes: from their thread). So that
 * the device-time cost measurement, which times launch calls in the job, compares calls
 * that met them alike. FN NULL: no more calls (it waits, up to 2 s, for the closes under
 * way). */
enum cuda_probe_event { CUDA_PROBES_ATTACHING, CUDA_PROBES_IN, CUDA_PROBES_DETACHING, CUDA_PROBES_OUT };
void cuda__on_launch_probes(struct cuda_tracer *c, void (*fn)(void *arg, int event), void *arg);
/* Attach and detach a probe on gpubpf's own text, never hit. Attaching uprobes waits for
 * an RCU grace period (the kernel's dup_mmap_sem, a per-CPU rwsem, taken for writing)
 * unless one was attached or detached less than a grace period ago: warmed so, a group's
 * attach that follows at once puts its breakpoints in within ~0.05 ms instead of 4-12 ms.
 * -ENOTSUP without uprobe_multi links or a calibration. */
int cuda__warm(struct cuda_tracer *c);
/* Calls of group G belong to window ID from now on (0: not windowed), those that enter in
 * [OPEN, CLOSE) (CLOCK_MONOTONIC seconds; CLOSE 0: until the next) only. */
void cuda__set_window(struct cuda_tracer *c, int g, uint32_t id, double open, double close);
/* The per-thread costs of group G in window ID (struct cuda_tstate): up to MAX into OUT,
 * their thread ids into TIDS. Returns how many. */
int cuda__window_threads(struct cuda_tracer *c, int g, uint32_t id, uint32_t *tids, struct cuda_tstate *out, int max);
/* What group G's probes cost each thread while in with no window open, since the start
 * (struct cuda_tclosed): up to MAX into OUT, their thread ids into TIDS. Returns how many. */
int cuda__closed_threads(struct cuda_tracer *c, int g, uint32_t *tids, struct cuda_tclosed *out, int max);
/* Entry hits on the targets so far, per group (enum cuda_group), and the time they cost
 * (nanoseconds, traps included): reads of mapped memory, no system call. */
/* gpubpf's own CPU time in the threads that took group probes out (windows' detaches). */
uint64_t cuda__close_cpu_ns(struct cuda_tracer *c);

void cuda__group_hits(struct cuda_tracer *c, uint64_t hits[CG__COUNT]);
void cuda__group_costs(struct cuda_tracer *c, uint64_t cost_ns[CG__COUNT]);
/* Calls of group G between entry and return now (those with a return probe). */
int64_t cuda__group_pending(struct cuda_tracer *c, int g);
/* Send a guard event (cuda__guard_fd, a BPF ring buffer of struct cuda_guard_event) when
 * group G's hits reach AT; once: arm again after each look. */
void cuda__arm_guard(struct cuda_tracer *c, int g, uint64_t at);
int cuda__guard_fd(struct cuda_tracer *c);

/* What each part of a probe costs here, measured at start-up on functions of gpubpf's own
 * that begin like every CUDA entry point. Seconds; negative where not measured. */
struct cuda_calib {
	double traced_call; /* a traced call: entry and return probe, with the program */
	double prog;	    /* the entry program's own run time on that call (BPF-timed) */
	double trap_entry;  /* an entry probe's trap, without the program */
	double trap_return; /* a return probe's */
	double first_hit;   /* what the first hit after an attach costs more than the next ones */
	double window;	    /* what attaching and detaching once costs a thread running through
			     * the probed code (the breakpoint written into and out of its page) */
	double attach;	    /* gpubpf's own time to attach (a window is opened that early) */
};
int cuda__calibrate(struct cuda_tracer *c, struct cuda_calib *out);
/* Trap costs the BPF side adds to every hit's measured run time (seconds). */
void cuda__set_traps(struct cuda_tracer *c, double entry, double ret);
/* Hold one counted call in CUDA_STALL_EVERY of a window SECS more (0: none): the
 * experiment that tells whether the probes' delay pushes calls out (estimate.h). */
void cuda__set_stall(struct cuda_tracer *c, double secs);
bool cuda__stalls(const struct cuda_tracer *c);
/* One counted call in EVERY of a window (a power of two, rounded down; 0: none) skips its
 * work at random: what that work costs the job (estimate.h, est_bare). */
void cuda__set_bare(struct cuda_tracer *c, unsigned every);
unsigned cuda__bare_every(const struct cuda_tracer *c);

/* At the end: allocations still live become gpu_inuse samples under their stacks. */
int cuda__finish(struct cuda_tracer *c);
void cuda__stats(struct cuda_tracer *c, struct cuda_stats *out);

/* --trace: hand over the timeline of calls (the caller frees it with trace__free), so
 * it outlives the tracer, which is torn down before the output is written. */
struct trace;
struct trace *cuda__take_trace(struct cuda_tracer *c);
/* The timeline while recording (NULL without --trace): the device tracks go in too. */
struct trace *cuda__timeline(struct cuda_tracer *c);

#endif /* GPUBPF_CUDA_USER_H */
