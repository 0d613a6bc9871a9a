/* SPDX-License-Identifier: MIT */
/* CUDA host-side tracing: finds runtime and driver entry points by symbol in every object
 * the targets map (shared libcudart, static cudart inside an executable, libcuda), attaches
 * uprobes to them, and drains what bpf/cuda.bpf.c aggregated into the profile. */
#ifndef GPUBPF_CUDA_USER_H
#define GPUBPF_CUDA_USER_H

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

/* Move what the kernel aggregated into the profile; counts of windowed groups are scaled
 * by elapsed/attached time. final: drain both buffers. */
int cuda__drain(struct cuda_tracer *c, bool final);

/* Overhead budget: probe groups (enum cuda_group) attached in windows. Only where the
 * kernel has uprobe_multi links (cuda__windowed); otherwise every probe stays attached. */
struct governor;
bool cuda__windowed(const struct cuda_tracer *c);
/* Report hit rates to GOV; with WINDOWED, also scale counts by attached time. */
void cuda__set_governor(struct cuda_tracer *c, struct governor *gov, bool windowed);
/* The recording starts now: window accounting begins here. */
void cuda__start(struct cuda_tracer *c);
void cuda__set_group(struct cuda_tracer *c, int group, bool on);
bool cuda__group_on(const struct cuda_tracer *c, int group);
/* Entry hits on the targets so far, per group (enum cuda_group): a read of mapped
 * memory, no system call. */
void cuda__group_hits(struct cuda_tracer *c, uint64_t hits[CG__COUNT]);
/* Wake gpubpf (the ring buffer procs__poll waits on) when group G's hits reach AT; once:
 * arm again after each look. */
void cuda__arm_guard(struct cuda_tracer *c, int g, uint64_t at);
/* Whether such a wake-up came since the last call. */
bool cuda__guard_woken(struct cuda_tracer *c);
/* Seconds one probe hit costs the calling thread, measured on a function of gpubpf's
 * own; negative when it cannot be measured. */
double cuda__calibrate(struct cuda_tracer *c);
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
