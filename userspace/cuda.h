/* SPDX-License-Identifier: MIT */
/* CUDA host-side tracing: finds runtime and driver entry points by symbol in every object
 * the targets map (shared libcudart, static cudart inside an executable, libcuda), attaches
 * uprobes to them, and drains what bpf/cuda.bpf.c aggregated into the profile. */
#ifndef GPUBPF_CUDA_USER_H
#define GPUBPF_CUDA_USER_H

#include <stdbool.h>
#include <stdint.h>

#include "session.h"

struct cuda_tracer;

struct cuda_stats {
	uint64_t calls;        /* traced calls counted */
	uint64_t dropped;      /* calls dropped: aggregation map full */
	uint64_t lost_stacks;
	uint64_t lost_events;  /* name events lost */
	int objects;           /* objects with CUDA entry points probed */
	int probes;            /* uprobes attached */
};

/* Open and load (no probes yet): NULL with errno set (a message was printed). */
struct cuda_tracer *cuda__new(struct session *s, int targets_fd, int comms_fd);
void cuda__free(struct cuda_tracer *c);

/* Look for CUDA entry points in every object the live targets map that was not looked at
 * yet, and attach probes there. Cheap when nothing new is mapped: call it every tick. */
int cuda__scan(struct cuda_tracer *c);

int cuda__drain(struct cuda_tracer *c, bool final);
/* At the end: allocations still live become gpu_inuse samples under their stacks. */
int cuda__finish(struct cuda_tracer *c);
void cuda__stats(struct cuda_tracer *c, struct cuda_stats *out);

#endif /* GPUBPF_CUDA_USER_H */
