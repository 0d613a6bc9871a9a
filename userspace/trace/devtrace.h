/* SPDX-License-Identifier: MIT */
/* Device tracks of a --trace timeline: the kernels and copies the injection library
 * reported, one track per (process, device, stream), each joined by a flow arrow to the
 * CUDA call that launched it.
 *
 * The library reports each followed launch (thread, CUPTI correlation id, the time of
 * its callback inside the API call) and each completed device activity (the same
 * correlation id, CLOCK_MONOTONIC times). The uprobes trace the API calls themselves. A
 * launch is joined to the traced call on its thread whose span holds the callback's
 * time; a launch no traced call holds (an entry point gpubpf does not probe) gets a
 * zero-length slice of its own, named as CUPTI names the function. */
#ifndef GPUBPF_DEVTRACE_H
#define GPUBPF_DEVTRACE_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

struct devtrace;

/* Into T (not owned), which holds at most MAX_EVENTS events in all. NULL on ENOMEM. */
struct devtrace *devtrace__new(struct trace *t, size_t max_events);
void devtrace__free(struct devtrace *d); /* accepts NULL */

/* A followed launch. API: the function's name (NULL: unknown); the names are copied. */
int devtrace__launch(struct devtrace *d, int pid, int tid, uint32_t corr, uint64_t ts, const char *api);

/* A device activity: EV's kind (TRACE_KERNEL or TRACE_MEMCPY), name, pid, device,
 * stream, start_ns, dur_ns and bytes; CORR its launch's correlation id (EV's own
 * correlation is set here). Past the bound it is counted as dropped. 0 or -ENOMEM. */
int devtrace__record(struct devtrace *d, const struct trace_event *ev, uint32_t corr);

/* Join every launch whose work was recorded to its call (see the top). Once, at the
 * end, after the API calls are all in the trace. 0 or -ENOMEM. */
int devtrace__link(struct devtrace *d);

struct devtrace_stats {
	uint64_t records;    /* device events in the trace */
	uint64_t dropped;    /* device events past the bound */
	uint64_t linked;     /* launches joined to a traced call */
	uint64_t own_slices; /* launches given a slice of their own */
};
void devtrace__stats(const struct devtrace *d, struct devtrace_stats *out);

/* The correlation id a device event and its launch share in the trace: CUPTI's ids are
 * per process. */
static inline uint64_t devtrace__corr(int pid, uint32_t corr)
{
	return (uint64_t)(uint32_t)pid << 32 | corr;
}

#endif /* GPUBPF_DEVTRACE_H */
