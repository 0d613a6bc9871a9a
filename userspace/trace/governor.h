/* SPDX-License-Identifier: MIT */
/* The overhead governor: how long each probe group may stay attached per period so that
 * what gpubpf costs the busiest thread of the targets stays under the budget.
 *
 * Every part of the cost is measured, most of it where the job runs:
 * - a probe hit: the BPF program's own run time, measured at every hit in the job (deep
 *   stacks and Python frames cost more than gpubpf's own calibration call), plus the trap
 *   around it (entry and return separately), which only a calibration can time;
 * - the first hit of a window, over the others (calibrated);
 * - opening and closing a window: the breakpoints written into and taken out of the
 *   target's code cost its threads (calibrated on a thread of gpubpf's that runs through
 *   the page the breakpoint goes into); and the probes are in for a while with no window
 *   open (attaching and detaching wait for the kernel's grace periods: milliseconds), when
 *   every call still pays its trap (measured in the job, per window);
 * - a CPU sample (calibrated: a thread of gpubpf's sampled at 10 kHz);
 * - device time (CUPTI's activity and callbacks, in windows of their own): what it adds to
 *   a launch, measured in the job by the injection library, and its switches (cupti_win.c).
 * A group's cost while attached is `util`: the fraction of its busiest thread's time its
 * probes took in the last windows (measured: the hits' cost summed per thread). With duty
 * d (the attached fraction of each period) it costs that thread d * util, plus its
 * windows' fixed costs each period (their switches, first hits, probes in with no window
 * open: one window a period, or one in each of 2-8 equal parts of it where they are
 * cheap, and gpubpf's own CPU for them allows: GOV_OWN_WINDOWS_MAX). The budget left
 * after CPU sampling is filled like water: groups whose full cost fits get d = 1 (rare
 * ones: syncs, allocations), the rest share what remains equally, never below min_duty
 * (every call site must still show up).
 * What is spent once (device time's set-up of CUPTI at attach, its cost measurement, its
 * callbacks on between windows to name launch handles: milliseconds, at the start of a
 * session) is a debt: each plan keeps back what repays it within a period, at most half
 * the budget left after CPU sampling, until it is repaid. So is what a period's windowed
 * probes, as measured, spent over their share of the budget (governor__overspent): a plan
 * is only as good as the cost it was made from, and the first, measuring window of a job
 * that has just started reads it low (18% of a launch loop's thread, against 24-29% a
 * second later), so a short job overspent its budget by a fifth.
 * Pure arithmetic, no I/O: unit-tested. */
#ifndef GPUBPF_GOVERNOR_H
#define GPUBPF_GOVERNOR_H

#include <stdbool.h>

#define GOV_MAX_GROUPS 8

struct gov_group {
	const char *name;
	bool always;	 /* never windowed (allocations, name lookups: rare, and needed whole) */
	bool measured;	 /* a window measured its cost */
	bool saturated;	 /* its util is the guard's 1, not measured: the next window's is taken whole */
	double util;	 /* fraction of the busiest thread's time its probes took while attached */
	double util_all; /* ... of all threads' time together (the guard sees all threads' hits) */
	double hit_cost; /* seconds one hit costs, measured in the job (0: not yet) */
	double fixed;	 /* > 0: seconds one window of it costs besides its util (else the probes') */
	double closed;	 /* seconds its probes cost the busiest thread per window while in with no
			  * window open (put in ahead of it, not yet out after the last): measured */
	double duty;	 /* out: attached fraction of each period, (0, 1] */
	int every;	 /* out: its windows' period in periods (a power of two): a window whose
			  * fixed cost would take more than half its share each period comes once
			  * in EVERY */
	int strata;	 /* out: windows per period (a power of two), each in its own equal part
			  * of the period, where its windows are cheap (strata_for, governor.c) */
};

#define GOV_EVERY_MAX 32	     /* a power of two */
#define GOV_STRATA_MAX 8	     /* a power of two */
#define GOV_STRATUM_MIN_WINDOW 0.005 /* seconds: no window shorter for strata's sake */
#define GOV_STRATUM_MIN_PART 0.1     /* seconds: nor a part (an attach's warm-up takes up to 20 ms) */
/* gpubpf's own CPU (a share of one core) that windows in parts may take: each window is
 * an attach and a detach in every target and a read of its books (0.3-0.4 ms of gpubpf's
 * CPU with four targets), and 8 parts for each of three groups took the agent from 0.6%
 * of a core to 1.4% */
#define GOV_OWN_WINDOWS_MAX 0.0025

struct governor {
	double budget;	     /* fraction of a thread's time, e.g. 0.01 */
	double period;	     /* seconds: one window per group and period */
	double cost_per_hit; /* seconds: a traced call (entry and return) on the calibration call */
	double trap_entry;   /* seconds: an entry probe's trap, without the program */
	double trap_return;  /* ... a return probe's */
	double first_hit;    /* seconds: what a window's first hit costs more than the others */
	double window_cost;  /* seconds: what opening and closing one window costs a thread */
	double cpu_cost;     /* fraction taken by CPU sampling (sample_rate * sample_cost, and
			      * switch_cost) */
	double sample_hz;    /* CPU samples a second of a thread's CPU time (-F) */
	double sample_rate;  /* ... a second of the most sampled target thread's time (at most
			      * sample_hz: a thread that sleeps is sampled less) */
	double switch_cost;  /* ... of it: the sampled threads' context switches (switches.h) */
	double sample_cost;  /* seconds a CPU sample costs the sampled thread */
	double min_duty;     /* floor for hot groups */
	double min_slot;     /* seconds: the shortest window worth opening */
	double own_window;   /* seconds of gpubpf's own CPU a window takes (0: not measured) */
	bool parts_held;     /* out: fewer parts than the targets' budget allows, for
			      * gpubpf's own CPU (GOV_OWN_WINDOWS_MAX) */
	bool exact;	     /* every group always attached */
	double once;	     /* seconds of a thread's time spent once so far (governor__spent_once) */
	double over;	     /* seconds the windowed probes spent over their share, all periods
			      * (governor__overspent) ... */
	int over_n;	     /* ... in this many periods */
	double repaid;	     /* ... of those two repaid so far (governor__repay) */
	double repay;	     /* out: the fraction of each period kept back to repay once + over - repaid */
	bool floored;	     /* out: the plan is over the budget, held up by its floors (CPU
			      * sampling alone over it, or a group at min_duty) */
	int ngroups;
	struct gov_group g[GOV_MAX_GROUPS];
};

/* Fill every g[i].duty from the measured costs. */
void governor__plan(struct governor *gv);

/* CPU sampling's cost: SAMPLE seconds a sample, RATE samples a second of the most sampled
 * target thread, and SWITCHES (a fraction: its events in the threads' switches). */
void governor__set_cpu(struct governor *gv, double sample, double rate, double switches);

/* Planned cost to the busiest thread at the planned duties, with what is kept back to
 * repay what was spent once (a fraction). */
double governor__overhead(const struct governor *gv);

/* What was spent once comes to SECS of a thread's time so far, all of it (a figure that
 * grows, or shrinks where it was overestimated: what was repaid is kept). */
void governor__spent_once(struct governor *gv, double secs);

/* A period of DT seconds ran at the last plan, and the probes of its windowed groups
 * (groups 0..N-1 not always attached) cost their busiest thread SPENT seconds, as
 * measured. What that is over their share of the budget (the budget less the plan's other
 * parts: CPU sampling, what it keeps back, groups always attached or past N) is a debt
 * like what was spent once; a period under it banks nothing. Nothing is owed where the
 * plan is held over the budget by its floors (it says so), or for --exact. Returns the
 * seconds owed. */
double governor__overspent(struct governor *gv, int n, double spent, double dt);

/* DT seconds ran at the last plan: what it kept back repays what was spent once. */
void governor__repay(struct governor *gv, double dt);

/* Seconds spent once or over the budget, and not yet repaid. */
double governor__debt(const struct governor *gv);

/* What one window of a group costs a thread besides its hits: opening and closing it
 * and its first hit (seconds). */
double governor__window_cost(const struct governor *gv);

/* A window of GROUP that lasted LEN seconds: its busiest thread's probes took BUSIEST
 * seconds, all threads' together ALL, over HITS hits. A higher cost is taken at once, a
 * lower one weighs half: a job's phases come back, and a group that was hot a moment ago
 * would cost its full price before the guard caught it again. After the guard's
 * saturation (a cost of 1 that no window measured) it is taken whole: halved from 1, a
 * launch loop's 0.31 was planned at 0.66, then 0.49, and a 4 s job spent 0.8% of a 1%
 * budget. */
void governor__observe(struct governor *gv, int group, double busiest, double all, double hits, double len);

/* Between the last window of GROUP and the one that just closed, its probes cost the
 * busiest thread SECS while in with no window open (taken like a window's cost). */
void governor__observe_closed(struct governor *gv, int group, double secs);

/* The guard detached GROUP (it cost far more than planned): plan the rest of its period
 * as if a thread spent all its time in its probes, until a window measures it again. */
void governor__saturated(struct governor *gv, int group);

/* The hits GROUP may make in DT seconds attached before the guard detaches it: twice its
 * planned cost rate plus twice the budget, at its measured cost per hit. A group not
 * measured yet may spend one second's budget (its first window measures it). */
double governor__guard_hits(const struct governor *gv, int group, double dt);

/* The guard's look: HITS of all threads over DT seconds attached. True when that is past
 * governor__guard_hits. */
bool governor__guard(const struct governor *gv, int group, double hits, double dt);

#endif /* GPUBPF_GOVERNOR_H */
