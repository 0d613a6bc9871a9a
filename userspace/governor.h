/* SPDX-License-Identifier: MIT */
/* The overhead governor: how long each probe group may stay attached per period so that
 * the estimated cost to the busiest thread of the targets stays under the budget.
 *
 * A probe hit costs the calling thread `cost_per_hit` seconds (calibrated at start-up).
 * A group whose busiest thread makes r hits per second costs that thread r * cost of
 * every second it is attached, so with duty d (attached fraction of the period) it costs
 * d * r * cost. The budget left after CPU sampling is filled like water: groups whose full
 * cost fits get d = 1 (rare ones: syncs, allocations), the rest share what remains
 * equally, never below min_duty (every call site must still show up). Counts gathered at
 * duty d estimate the whole period as counts / d. Pure arithmetic, no I/O: unit-tested. */
#ifndef GPUBPF_GOVERNOR_H
#define GPUBPF_GOVERNOR_H

#include <stdbool.h>

#define GOV_MAX_GROUPS 8

struct gov_group {
	const char *name;
	bool always;   /* never windowed (name lookups: rare, and needed for names) */
	bool measured; /* rate is known (the group was attached for some time) */
	double rate;   /* hits per second of the busiest thread while attached */
	double all;    /* hits per second of all threads together while attached */
	double peak;   /* highest all-thread rate the guard saw since the last observe */
	double duty;   /* out: attached fraction of each period, (0, 1] */
};

struct governor {
	double budget;	     /* fraction of a thread's time, e.g. 0.01 */
	double cost_per_hit; /* seconds */
	double cpu_cost;     /* fraction taken by CPU sampling (freq * cost of a sample) */
	double sample_cost;  /* seconds a CPU sample costs the sampled thread (reported) */
	double min_duty;     /* floor for hot groups */
	double probe_duty;   /* duty of a group whose rate is not known yet */
	bool exact;	     /* every group always attached */
	int ngroups;
	struct gov_group g[GOV_MAX_GROUPS];
};

/* Fill every g[i].duty from the rates. */
void governor__plan(struct governor *gv);

/* Estimated cost to the busiest thread at the planned duties (a fraction). */
double governor__overhead(const struct governor *gv);

/* Update a group's rates from the hits of its busiest thread (BUSIEST) and of all its
 * threads (ALL) over ATTACHED seconds. A higher rate is taken at once; a lower one weighs
 * half, so a group cold for one window (a job's phase, the start before the first call)
 * does not lose its history. A peak the guard saw since the last call counts too: a
 * group idle for most of its attached time and then hot is as hot as the peak says. */
void governor__observe(struct governor *gv, int group, double busiest, double all, double attached);

/* The guard's look at one group: HITS of all threads over the last DT seconds. Returns
 * true when that cost is well over what the plan allowed the group (twice its planned
 * cost rate, plus twice the budget for groups planned at rate ~0): the caller detaches
 * it until the next plan. Remembers the rate as a peak for the next observe. */
bool governor__guard(struct governor *gv, int group, double hits, double dt);

/* GROUP's hits came in a burst the guard cannot time (it was woken by them): plan it as
 * if a thread spent all its time in its probes until a window measures it. */
void governor__assume_saturated(struct governor *gv, int group);

/* The hits GROUP may make in DT seconds before governor__guard says no: what the BPF
 * side is told to wake gpubpf at, between two looks. A group not measured yet may spend
 * one second's budget (its first window measures it). */
double governor__guard_hits(const struct governor *gv, int group, double dt);

/* The factor that scales counts gathered while attached for ATTACHED out of ELAPSED
 * seconds to an estimate of the whole ELAPSED (1 when always attached). */
double governor__scale(double attached, double elapsed);

#endif /* GPUBPF_GOVERNOR_H */
