/* SPDX-License-Identifier: MIT */
/* CPU sampling: a perf event per online CPU, aggregated in the kernel by bpf/cpu.bpf.c. */
#ifndef GPUBPF_CPU_USER_H
#define GPUBPF_CPU_USER_H

#include <stdbool.h>
#include <stdint.h>

#include "session.h"

struct perf_event_attr;

struct cpu_sampler;

struct cpu_stats {
	uint64_t samples;     /* samples counted into stacks */
	uint64_t lost_stacks; /* user or kernel stacks lost (collisions, faults, full maps) */
	uint64_t dropped;     /* samples dropped: aggregation map full */
	uint64_t clock_moves; /* a thread's event sampled another thread (see cpu.c): ~0 */
	const char *event;    /* "cpu-clock" or "cycles" */
};

/* Open, load and attach: NULL with errno set on failure (a message was printed). */
struct cpu_sampler *cpu__new(struct session *s, int targets_fd, int comms_fd);
void cpu__free(struct cpu_sampler *c);

/* Move what the kernel aggregated into the profile. final: drain both buffers. */
int cpu__drain(struct cpu_sampler *c, bool final);
/* What one sample costs the sampled thread (seconds), measured on gpubpf's own thread
 * at start-up: the gaps a loop that reads the clock sees while sampled at 10 kHz by the
 * same kind of event running the same program (which returns at once for gpubpf), against
 * those it sees unsampled. In a VM the timer interrupt is most of it, and dearer than a
 * probe's trap. ~25 ms. -1 if it cannot be measured. */
double cpu__sample_cost(struct cpu_sampler *c);
/* What the program costs a target's sample beyond that (its stack walks, Python frames),
 * timed in the job: seconds a sample, 0 before any. */
double cpu__prog_cost(struct cpu_sampler *c);
/* Samples a second of the target thread sampled the most: over the last tick's drain
 * (whole: false), or an upper bound over the recording (whole: the sum of each drain's
 * most sampled thread's samples over ELAPSED seconds). A thread is sampled -F times a
 * second of its own CPU time, or of the time it runs at a CPU's tick per CPU: one that
 * sleeps most of the time is sampled a few times a second, and pays for those only.
 * -1 before the first drain with a start (the first covers the events' opening). */
double cpu__sample_rate(const struct cpu_sampler *c, double elapsed, bool whole);
void cpu__stats(struct cpu_sampler *c, struct cpu_stats *out);
/* Sample per CPU from now on, where each target thread had an event of its own: what
 * those events cost the targets' context switches is over what the budget allows
 * (switches.h). The per-CPU events are in before the threads' go. 0, or a negative errno
 * (the threads' events stay). */
int cpu__to_per_cpu(struct cpu_sampler *c);
/* The event each target thread has of its own, as opened (kind, frequency, sample type):
 * 0, or -ENOENT where the targets are sampled per CPU. */
int cpu__task_attr(const struct cpu_sampler *c, struct perf_event_attr *attr);

#endif /* GPUBPF_CPU_USER_H */
