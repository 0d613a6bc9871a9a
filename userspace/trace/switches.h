/* SPDX-License-Identifier: MIT */
/* What the CPU sampler's events cost the targets' context switches.
 *
 * A thread sampled on its own clock (cpu.c: each target thread's own event) has that
 * event stopped when the thread leaves a CPU and started again when it comes back: the
 * kernel's perf code on every switch, and in a VM a timer to program. A thread that hands
 * work to another and waits (a producer and its consumer, a thread that sleeps on a
 * lock or a queue) pays it each time, samples or not, at any frequency. On the dev VM a
 * pinned ping-pong of two threads ran at 0.55-0.6 of its speed under gpubpf (and under
 * `perf record -p`); a sample's own cost is no part of that.
 *
 * Calibrated at start-up: two threads of gpubpf's on one CPU hand a byte to each other,
 * timed without events, then with an event like the targets' on each, in batches that
 * the CPU gave to nothing else (switches.c).
 * Counted in the job: each target thread's switches (/proc/PID/task/TID/status) once a
 * tick, and as it exits (bpf/procs.bpf.c: a look at /proc after it would find nothing). The estimate is what the most
 * switched thread paid over the recording; where threads hand work to each other, each
 * waits for the other's switches too, up to what all of them paid together. Per-CPU
 * sampling (-a, the agent) has no per-thread events and no such cost. */
#ifndef GPUBPF_SWITCHES_H
#define GPUBPF_SWITCHES_H

#include <stdbool.h>
#include <stdint.h>

#include "hmap.h"

struct perf_event_attr;

struct sw_thread {
	int tid;
	uint64_t last;	/* its count of switches at the last look */
	uint64_t count; /* ... since the first look (or its start, where it began later) */
};

struct switches {
	bool on;     /* the targets' threads are sampled on their own clocks */
	bool looked; /* a first look was taken */
	double cost; /* seconds a sampled thread's switch costs it (out and back in);
		      * negative (an errno) where it could not be measured */
	double t0;   /* CLOCK_MONOTONIC of the first look */
	struct sw_thread *th;
	size_t n, cap;
	struct hmap idx;      /* tid -> index in th */
	uint64_t max;	      /* the most switched thread's switches since the first look */
	uint64_t total;	      /* all the targets' threads' */
	uint64_t untracked;   /* threads past SW_MAX_THREADS, not counted */
	double per_cpu_at;    /* seconds into the recording where sampling went per CPU (0: never) */
	double per_cpu_share; /* ... and what the events had cost the most switched thread */
};

#define SW_MAX_THREADS 4096
#define SW_MIN_SECS 0.2 /* seconds of counting before the cost is judged */
#define SW_EARLY 0.25	/* seconds between looks before the engine's first tick */

/* Two threads on one CPU handing a byte to each other through pipes, with ATTR's event
 * on each and without: what the event adds to one thread's switch, out and back in
 * (seconds, >= 0), or a negative errno where it could not be measured. ~75 ms. */
double switches__calibrate(const struct perf_event_attr *attr);

/* A thread's switches in its /proc status: voluntary and not (what the kernel's nvcsw and
 * nivcsw count, as bpf/procs.bpf.c reads them at its exit). 0, or -EINVAL. */
int switches__parse(const char *text, uint64_t *n);

/* Fold one thread's count of switches in: FIRST is whether this is the first look (a
 * thread seen then counts from there; one seen later, or only at its exit, counts from
 * its start). 0 or -ENOMEM. */
int switches__add(struct switches *sw, int tid, uint64_t runs, bool first);

/* Where the threads' own events cost the most switched thread more than LIMIT (a share
 * of its time, over the recording's NOW seconds so far, at least MIN_SECS of them): true,
 * and the sampler should go per CPU (switches__per_cpu). Per-CPU sampling has no events
 * of a thread's own to stop and start; a thread that runs in bursts between sleeps is
 * still caught in proportion to its CPU time, where no timer's phase is tied to its. */
bool switches__over(const struct switches *sw, double now, double limit);

/* Sampling went per CPU NOW seconds into the recording: nothing more is counted. */
void switches__per_cpu(struct switches *sw, double now);

/* A look at the threads of the live target PIDS (N of them). */
void switches__look(struct switches *sw, const int *pids, int n);

/* What the most switched thread paid, a share of ELAPSED seconds (0 when off); *ALL
 * (may be NULL): what all the targets' threads paid together, where each waits for the
 * others. */
double switches__share(const struct switches *sw, double elapsed, double *all);

/* "context switches ..." for the profile's comments. */
void switches__text(const struct switches *sw, double elapsed, char *buf, unsigned long len);

void switches__free(struct switches *sw);

#endif /* GPUBPF_SWITCHES_H */
