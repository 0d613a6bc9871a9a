/* SPDX-License-Identifier: MIT */
/* The sampling windows of the overhead budget, on a thread of their own: every period it
 * plans each probe group's duty (governor.h), draws the slot its window takes
 * (estimate.h), attaches and detaches the group on time whatever the main loop is doing
 * (its drains and symbolization take tens of milliseconds, and a window that waited for
 * them would cover the wrong instants), watches the hits with the overhead guard, and
 * closes each window's books: its realized length, its weight, and per thread the
 * correction for the delay its probes caused. Drained calls get their weight here. */
#ifndef GPUBPF_WINDOWS_H
#define GPUBPF_WINDOWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_api.h"
#include "estimate.h"
#include "governor.h"

struct cuda_tracer;
struct windows;

/* Windows for the groups of GV (planned and costed there; GV must outlive it) over the
 * probes of C, one per PERIOD seconds. NULL with errno set. */
struct windows *windows__new(struct cuda_tracer *c, struct governor *gv, double period);

/* The recording starts now: the first period begins and the thread runs. 0 or -errno. */
int windows__start(struct windows *w);

/* The recording ends now: every open window closes and its books are closed (this waits
 * for the detaches to begin), the thread ends. Drained calls all have their weight after. */
void windows__stop(struct windows *w);

void windows__free(struct windows *w);

/* The weight of a call of thread TID in window ID (1 / the probability it was seen), the
 * correction for its probes' delay, with its range (*D), and *WALKED: the calls it stands
 * for in the window (>= 1: the bare calls' share, whose stacks were not taken). 1: known; 0: the window's books are not
 * closed yet (ask again at the next drain); -ENOENT: no such window (weight 1). */
int windows__weight(struct windows *w, uint32_t id, uint32_t tid, double *weight, struct est_delay *d, double *walked);

/* Count a drained entry of window ID: N calls, VALUES (calls, bytes or wait ns, 0) before
 * weighting, at WEIGHT and delay correction D, into its period's estimates (the confidence
 * interval). */
void windows__add(struct windows *w, uint32_t id, double n, const double values[3], double weight,
		  const struct est_delay *d);

/* Where the recording stands, for the status line, the comments and the summary. */
struct windows_summary {
	struct est_total calls[CG__COUNT]; /* per group: calls seen, estimate, interval */
	struct est_total value[CG__COUNT]; /* bytes (copies) or wait ns (syncs) */
	struct est_delay trap_scale;	   /* the traps' cost timed in the job / calibrated */
	double trap_ticks;		   /* ... from this many of the kernel's ticks */
	uint64_t windows;		   /* windows opened */
	uint64_t guard_cuts;		   /* windows the guard cut short */
	uint64_t late;			   /* windows opened late (the window thread woke late) */
	double late_s;			   /* ... by this much in all */
	uint64_t missed;		   /* windows that never opened (the next stood in) */
	uint64_t slips;			   /* gate bounds written late (their thread preempted) ... */
	double slip_max;		   /* ... by at most this much (windows_gate.c) */
	double idle_max[CG__COUNT];	   /* per group: the longest its probes were in with no window open */
	double elapsed;			   /* seconds recorded */
	/* measured costs to the busiest thread, seconds over the recording */
	double probes;	      /* its probe hits (program time measured, traps calibrated), window switches */
	double probes_traps;  /* ... of which its traps at their calibrated cost (x1) */
	double probes_closed; /* ... of which with probes in and no window open (ahead of, after one) */
	int busiest_tid;
	struct est_response resp[CG__COUNT]; /* per group: whether the delay pushes calls out */
	bool stalls;			     /* ... asked of the job by stalls (GPUBPF_STALL_US) */
	double pace[2];			     /* the device's records over the recording (windows__device_pace) */
	struct est_bare bare[CG__COUNT];     /* per group: what a call's work costs the job */
	unsigned bare_every;		     /* ... measured by one bare call in this many (0: not) */
	double probes_work;		     /* the busiest thread's part of that cost (in probes) */
};
void windows__summary(struct windows *w, struct windows_summary *out);

/* Keep no per-period estimates (the agent: they would grow with its days, and it states
 * none); the weights of calls are kept as ever. */
void windows__no_estimates(struct windows *w);

/* Device time (the governor's group CG__COUNT, cupti_win.c): costs UTIL of a thread that
 * does nothing but launch while on, and FIXED seconds a window; planned from the next
 * period on. */
void windows__set_device(struct windows *w, double util, double fixed);

/* What device time spent once comes to so far: SECS of a thread's time (its set-up at
 * attach, its cost measurement, its callbacks on between windows), repaid from the budget
 * of the next periods (governor__spent_once). */
void windows__set_once(struct windows *w, double secs);

/* What gpubpf's own CPU time took from a thread so far (owncpu.h: where no CPU was idle),
 * SECS, repaid from the budget like device time's one-off costs (the two add up). */
void windows__set_own(struct windows *w, double secs);

/* A CPU sample costs SAMPLE seconds (calibrated, and its program as timed in the job):
 * CPU sampling takes RATE times that (the most sampled target thread's samples a second,
 * cpu__sample_rate), and SWITCHES (a fraction: what its events add to the most switched
 * thread's context switches, switches.h); planned from the next period on. */
void windows__set_cpu(struct windows *w, double sample, double rate, double switches);

/* The share of group G's probes' delay that pushes calls out, pooled over its windows so
 * far (estimate.h, est_response; 1 (1-1) where no stalls ask it). */
struct est_delay windows__share(struct windows *w, int g);

/* The device's records of a thread's run in a device-time window: of its launches' first
 * kernels, FREE started as launched (the launch set the pace) and QUEUED waited for the
 * one before them on their stream (the device did). Pooled, where EST_PACE_MIN have come
 * in lately, they are the launches' share (launch probes' windows, device-time windows
 * with too few records of their own, and what of a thread's delay slows the job): they
 * say it of the device's side exactly, where the stalls' gaps are noisy. */
void windows__device_pace(struct windows *w, double free, double queued);

/* Whether thread TID of TGID switched voluntarily (slept) since it had NVCSW voluntary
 * switches: a thread's last call in a window, against now. A thread gone: true (it made
 * no more calls either way). */
bool windows__task_slept(uint32_t tgid, uint32_t tid, uint64_t nvcsw);

/* A copy of the governor as the thread last planned it. */
void windows__governor(struct windows *w, struct governor *out);

/* "launches 2.1%, copies 100%, ..." */
void windows__duty_text(const struct governor *gv, char *buf, size_t len);

/* What gpubpf cost the busiest target thread over ELAPSED seconds, as measured (a
 * fraction): its probe hits and window switches, groups never windowed, CPU sampling.
 * LO, HI (may be NULL): the same with the traps at either end of their range
 * (est_traps_scale: 0.5-2.5 times their calibration until the kernel's ticks time them).
 * JOB (may be NULL): the share of it that slows the job (mid, lo, hi), below 1 only where
 * random stalls show a device's queue setting the thread's pace (estimate.h,
 * est_response); 1 otherwise, and for W NULL. */
double windows__overhead(struct windows *w, const uint64_t cost_ns[CG__COUNT], const struct governor *gv,
			 double elapsed, double *lo, double *hi, struct est_delay *job);

/* The profile's comments on the windows (W; NULL: exact counts, for EXACT_WHY): per group
 * the calls seen, the estimate and its 95% confidence interval, and what gpubpf cost the
 * busiest target thread, part by part, over ELAPSED seconds (COST_NS: cuda__group_costs
 * at the end; OWN: what gpubpf's own CPU took, owncpu__share, a part of the total). */
struct profile;
void windows__comments(struct windows *w, const uint64_t cost_ns[CG__COUNT], const struct governor *gv,
		       struct profile *prof, double budget_pct, const char *exact_why, double elapsed, double own);

#endif /* GPUBPF_WINDOWS_H */
