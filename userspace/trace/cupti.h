/* SPDX-License-Identifier: MIT */
/* Device-side time: finds the injection library (libgpubpf_inject.so, userspace/inject/)
 * in the targets, attaches its USDT probes (which turns the library on: see
 * docs/DEVICE_TIME.md), and drains what bpf/cupti.bpf.c joined into gpu_kernel_time and
 * gpu_memcpy_time samples under the launching stacks. */
#ifndef GPUBPF_CUPTI_USER_H
#define GPUBPF_CUPTI_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "session.h"

struct cupti_tracer;

struct cupti_stats {
	uint64_t kernels, copies;    /* activity records counted (before scaling) */
	uint64_t kernel_ns, copy_ns; /* their device time (before scaling) */
	uint64_t launches_seen, launches_sampled, copies_seen, copies_sampled;
	uint64_t dropped_unsampled; /* records of launches not followed, dropped by the library */
	uint64_t lost;		    /* records CUPTI or the library had no room for */
	uint64_t unjoined;	    /* records without a known launch stack */
	uint64_t invalid;	    /* malformed batches or records */
	uint64_t lost_stacks, lost_events, map_full;
	int objects;	   /* targets with the library mapped (probes attached) */
	int attached;	   /* targets where it reported attached */
	uint32_t max_rate; /* sampled calls per second asked of the library; 0 all */
};

/* Open and load (no probes yet); makes sure the profile has the gpu_kernel_time and
 * gpu_memcpy_time types. NULL with errno set (a message was printed). */
struct cupti_tracer *cupti__new(struct session *s, int targets_fd, int comms_fd);
void cupti__free(struct cupti_tracer *c);
/* Remove the probes (the library returns to idle) but keep what was learned, for the
 * comments and summary. After the final drain; cupti__free does it too. */
void cupti__detach(struct cupti_tracer *c);

/* Attach to the library in every target object not looked at yet (cheap when nothing is
 * new: call it every tick). Also handles the library's status and name events. */
int cupti__scan(struct cupti_tracer *c);
/* Handle the library's name and status events now: before the CUDA tracer's drain, which
 * names launches by the kernel names they carry. Accepts NULL. */
void cupti__consume_events(struct cupti_tracer *c);

/* Move joined device time into the profile, scaled by seen/sampled per target. final:
 * both buffers. */
int cupti__drain(struct cupti_tracer *c, bool final);

/* Sampling: the library follows at most budget_pct/100 / cost_per_hit / 2 calls a second
 * (half the budget: CUPTI's own per-call cost is the other half). exact: every call. */
void cupti__set_budget(struct cupti_tracer *c, double budget_pct, double cost_per_hit, bool exact);

/* Device time in windows planned by W's governor (its "device time" group), one per PERIOD
 * seconds, from the cost per launch each library measures in its job (the launch probe's
 * included). W NULL: followed all the time (exact). Before the first target is found. */
struct windows;
void cupti__set_windows(struct cupti_tracer *c, struct windows *w, double period);

/* gpubpf's launch probes switched (EVENT: enum cuda_probe_event): each library's config
 * hears of it (dev_config.probe_gen), from any thread (cuda__on_launch_probes). */
void cupti__launch_probes(void *c, int event);

/* What device time cost the targets' launching threads over ELAPSED seconds (a fraction),
 * as estimated from the measured costs; PARTS (may be NULL, else CUPTI_COST_PARTS):
 * [launches followed, window switches, the cost measurement, callbacks kept on to name
 * launch handles, the one-off part (CUPTI's set-up at attach, the measurement's
 * switches)]. 0 without windows. */
#define CUPTI_COST_PARTS 5
double cupti__overhead(struct cupti_tracer *c, double elapsed, double *parts);

void cupti__stats(struct cupti_tracer *c, struct cupti_stats *out);

/* NULL when device time was recorded; else why not, for the profile and the summary. */
const char *cupti__unavailable_reason(struct cupti_tracer *c);

/* The profile's "gpu: ..." comments, and the summary line's part (", device time ..."). */
int cupti__add_comments(struct cupti_tracer *c, double elapsed);
void cupti__summary(struct cupti_tracer *c, char *buf, size_t len);

/* --trace: kernels and copies also go into T (not owned; at most MAX_EVENTS events in
 * all), joined to their launching calls (devtrace.h). Before the first target is found.
 * 0 or a negative errno. */
struct trace;
int cupti__set_timeline(struct cupti_tracer *c, struct trace *t, size_t max_events);
/* After the final drain and before writing: the last records, and the flow arrows. */
int cupti__finish_timeline(struct cupti_tracer *c);
/* Device events in the timeline, and those past the bound or lost in the ring buffer. */
void cupti__timeline_stats(struct cupti_tracer *c, uint64_t *events, uint64_t *dropped);

/* For `record -- COMMAND`, before the command is spawned: put CUDA_INJECTION64_PATH in
 * the environment it inherits (the library next to the gpubpf binary, or
 * $GPUBPF_INJECT_LIB). An existing value is kept, with a warning. 0 or negative errno. */
int cupti__prepare_command(void);
/* The library's absolute path, or NULL when it is not installed next to gpubpf. */
const char *cupti__library_path(void);

/* Helpers, exposed for unit tests. */
struct cupti_range {
	uint64_t lo, hi;
};
/* Number of leaf-side frames of IPS (leaf first) inside RANGES (the library, CUPTI, the
 * driver, the shared runtime): the frames between the user's call and the probe. */
int cupti__internal_frames(const uint64_t *ips, int n, const struct cupti_range *r, int nr);
/* seen/sampled: the factor that turns sampled time into an estimate of all of it. */
double cupti__scale(uint64_t seen, uint64_t sampled);
/* Whether a mapped object's basename is one whose frames are trimmed. */
bool cupti__internal_object(const char *basename);

#endif /* GPUBPF_CUPTI_USER_H */
