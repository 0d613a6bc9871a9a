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
	double duty;   /* out: attached fraction of each period, (0, 1] */
};

struct governor {
	double budget;	     /* fraction of a thread's time, e.g. 0.01 */
	double cost_per_hit; /* seconds */
	double cpu_cost;     /* fraction taken by CPU sampling (freq * cost of a sample) */
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

/* Update a group's rate from HITS of its busiest thread over ATTACHED seconds. Smoothed
 * (new windows weigh half) so one odd window does not swing the plan. */
void governor__observe(struct governor *gv, int group, double hits, double attached);

/* The factor that scales counts gathered while attached for ATTACHED out of ELAPSED
 * seconds to an estimate of the whole ELAPSED (1 when always attached). */
double governor__scale(double attached, double elapsed);

#endif /* GPUBPF_GOVERNOR_H */
