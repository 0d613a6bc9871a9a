/* SPDX-License-Identifier: MIT */
/* Estimates of a whole recording from probe groups attached in sampling windows, and how
 * far to trust them. Pure arithmetic, no I/O: unit-tested under ASan and UBSan.
 *
 * The design (userspace/trace/windows.c carries it out): time is cut into periods; in each
 * period a windowed group is planned a duty d, the period (or each of its equal parts, where
 * the group's windows are cheap: governor.c's strata) is cut into K = ceil(1/d) equal slots
 * and one slot, drawn uniformly, is attached. Every instant of the period is then
 * observed with probability 1/K whatever the job does at that instant: bursts, idle
 * phases, two threads, a job period that matches the window period. A call seen in a
 * window of inclusion probability p counts 1/p (Horvitz-Thompson), so the sum over
 * windows is an unbiased estimate of the calls of the whole recording, per call site as
 * in total. Groups planned fully on (d = 1) are observed with probability 1 and count 1.
 *
 * The overhead guard may detach a group in the middle of its slot, when its calls cost
 * far more than planned. That decision depends on the calls seen, so it cannot simply
 * shorten the window: the rest of the slot would be observed with probability 0. The
 * rest becomes a segment of its own, sampled the same way (K' slots, one drawn), and
 * its calls count K * K' (est_segment_split): every instant keeps a known, non-zero
 * probability, the product of the draws that led to it.
 *
 * Two corrections make the weight of a window a little different from K: the window's
 * realized length (attaching and detaching take time; the weight is the segment's length
 * over the length attached), and the probes' own delay (est_run_factor): a thread that
 * calls again as soon as it can makes fewer calls while its probes cost it time, and the
 * window would under-count the time outside it, where it calls at its own rate: that time
 * is counted at the rate without the probes (est_weight; the calls the probes pushed past
 * the window are in it, made after the window, and count once).
 * That delay is the probes' program time, timed in the job, and their traps, calibrated on
 * gpubpf's own call: in a job a trap costs more than there (1.5-2.2 times in this VM's
 * launch loops, docs/DESIGN.md), so the correction has a range. The traps are timed in
 * the job as well, roughly: in such a run the thread's kernel time is its probes', and
 * the kernel counts it by ticks (est_traps); pooled over the windows, it gives the traps'
 * cost as a multiple of the calibrated one with its error. Until enough ticks are in, the
 * trap part is taken at EST_TRAP_LO to EST_TRAP_HI times. The interval covers the range.
 * The ticks count kernel time; a trap also slows the job's own code after it (user time:
 * 0.29 us a call in a 4 us C launch loop, 0.6-0.9 us in a Python-driven ctypes step whose
 * calibrated traps are 0.6-0.73 us, dev VM, 2026-12-07), which nothing in a window can
 * tell apart from the job's own pace. The mid leaves it out (so the launch estimate of
 * such a loop reads low: -6% and -40% to -49% there); the range's top holds it: the ticks
 * narrow the traps' multiple from below, never under EST_TRAP_HI from above (with the
 * ticks' top, x1.21 over 120 s, the Python step's interval held half the truth).
 *
 * Error: per group, the periods' estimates give a variance by successive differences
 * (periods are strata with one slot drawn in each, so no unbiased variance estimator
 * exists; neighbouring periods stand in for each other, which overstates the variance
 * when the job's rate drifts: a conservative interval), with a Poisson floor for few
 * calls. */
#ifndef GPUBPF_ESTIMATE_H
#define GPUBPF_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A segment of time [start, end) (seconds) observed with probability 1/weight so far:
 * a period (weight 1), or the rest of a slot the guard cut short. */
struct est_segment {
	double start, end;
	double weight;
};

/* Slots a segment of LEN seconds is cut into for duty D: ceil(1/D), at most LEN / MIN_SLOT
 * (shorter windows than MIN_SLOT cannot be attached and detached in time), at least 1. */
int est_slots(double d, double len, double min_slot);

/* The window of one K-th of SEG, placed at U (uniform in [0, 1)) of the way through it:
 * [*open, *close), and where it ran past SEG's end, on from its start, its second piece
 * [*tail, SEG's end) after the first (*tail 0: one piece). Every instant of SEG is in it
 * with probability 1/K whatever the job's own rhythm: a grid of K fixed slots put every
 * window at one phase of a loop whose period divides the slot (a steady 500 us tick
 * against slots of 2 ms), and what corrects a window for opening late then erred the
 * same way in all of them (+4-6% on e2e 60's steady loop). Returns the weight of the
 * calls seen in it (SEG's weight times K). */
double est_place(const struct est_segment *seg, int k, double u, double *open, double *close, double *tail);

/* The guard detached a group at T inside a window of weight W that was to last until
 * END: the segment the rest of the window becomes. */
struct est_segment est_segment_split(double t, double end, double w);

/* The factor for the calls one thread made in one window (>= 1): its rate without its
 * probes over its rate with them (the calls their delay pushed past the window's end over
 * those it made in it, plus one). CALLS counted calls in the window;
 * RUN_CALLS of them since the thread last slept or waited on the device, the first at
 * RUN_START and the last at LAST (seconds); BACKLOG the probe time of that run, LAST_COST
 * of its last hit; SLEPT: the thread slept after its last call (the delay was made up).
 * INFINITY when BACKLOG is all the run's time: its calls without probes cannot be told. */
double est_run_factor(uint32_t calls, uint32_t run_calls, double run_start, double last, double backlog,
		      double last_cost, bool slept);

/* The trap part of a delay is taken at these times its calibrated value for the range. */
#define EST_TRAP_LO 0.5
#define EST_TRAP_HI 2.5

/* How much longer than their CPU time a thread's probes (or CUPTI's cost) took of a run
 * of SPAN seconds (or ns) in which it waited WAIT on a runqueue for a CPU (other threads'
 * turns: sched_info.run_delay): the run's wall time over its time on a CPU, at most
 * EST_STRETCH_MAX; 1 where nothing was waited. A thread that shares its CPU waits its
 * turns in its probes' time as in its own work's. */
#define EST_STRETCH_MAX 20
double est_run_stretch(double span, double wait);

/* A delay correction with its range: MID with the traps as calibrated, LO and HI with
 * them at EST_TRAP_LO and EST_TRAP_HI times (LO <= MID <= HI; all 1 without a delay).
 * MID adds back at most 20 times the run's calls; HI is not held so, and is INFINITY
 * where the probes at HI's traps took all of the run's time. */
struct est_delay {
	double mid, lo, hi;
};

/* est_run_factor's arguments, TRAPS the part of BACKLOG that is calibrated traps, taken at
 * SCALE's times (mid, lo, hi; NULL: 1, EST_TRAP_LO, EST_TRAP_HI). */
struct est_delay est_run_delay(uint32_t calls, uint32_t run_calls, double run_start, double last, double backlog,
			       double traps, const struct est_delay *scale, double last_cost, bool slept);

/* The traps' cost timed in the job, pooled over runs of threads that never slept: K ns
 * of their CPU time in the kernel and U in user mode, PROG ns of timed programs and
 * TRAPS ns of calibrated traps in that time. The kernel counts CPU time by whole ticks
 * where it does not account it exactly: TICK, the greatest common divisor of what it
 * counted (ns), gives the sampling error. */
struct est_traps {
	double k, u, prog, traps;
	uint64_t tick;
};

void est_traps_add(struct est_traps *t, uint64_t k, uint64_t u, double prog, double traps);

/* Ticks needed before the timed traps replace the calibrated range, and how far from 1
 * the calibration is taken to be (the ticks are weighed against it). */
#define EST_TRAPS_MIN_TICKS 200
#define EST_TRAPS_PRIOR_SD 0.6

/* The traps' cost as a multiple of the calibrated one: mid, and the range its error (2.5
 * sigma of the ticks weighed with the calibration's, and 0.2 for ticks that land late
 * after the kernel's interrupts-off parts) allows, within 0.25-4, its top at least
 * EST_TRAP_HI (the user side, above); the calibrated range (1, EST_TRAP_LO-EST_TRAP_HI)
 * while fewer than EST_TRAPS_MIN_TICKS are in, or where the ticks alone put it outside
 * that range (they then alias with the job's pace). *TICKS (may be NULL): how many are
 * in, negated where they were not taken for that. */
struct est_delay est_traps_scale(const struct est_traps *t, double *ticks);

/* Does the probes' delay push a thread's calls out of a window, as est_run_delay assumes
 * of a thread that never slept, or is it absorbed? A launch into a full device queue waits
 * in the call (spinning, by default) for the device, which sets the pace: a delay before
 * the call is taken from that wait and pushes nothing out. No clock of the thread's can
 * tell the two apart (the wait is CPU time as much as the work), so it is asked of the job:
 * BPF holds one counted call in CUDA_STALL_EVERY a further stall at random and sums the
 * gaps to the thread's next call apart, after stalled and after other calls. Their means
 * differ by the stall where it pushes and by nothing where it is absorbed: a randomized
 * experiment, unbiased whatever the job's pattern, its precision that of the gaps. The
 * share it measures scales the calls est_run_delay adds back. */
struct est_response {
	double n[2], sum[2], sq[2]; /* gaps after another [0] and a stalled [1] call: how many,
				     * their sum (s) and the sum of their squares (s^2) */
	double stall, stalls;	    /* the stalls' time (s) and how many */
};

/* One thread's gaps in one window, from BPF's books: N[j] gaps after another (j = 0) and
 * a stalled call (1), their sums SUM_NS[j] (ns) and sums of squares SQ_NS[j] (ns^2), and
 * STALLS stalls of STALL_NS in all. */
void est_response_add(struct est_response *r, const double n[2], const double sum_ns[2], const double sq_ns[2],
		      double stall_ns, double stalls);

/* Gaps after stalls needed before the share is taken from them; how far from 1 (a thread
 * paced by itself, the assumption before stalls measured it) the share is taken to be
 * where the gaps are too noisy to say (they are weighed against it). */
#define EST_RESPONSE_MIN 30
#define EST_RESPONSE_PRIOR_SD 1.0

/* A job's pace changes (a device queue fills after the start; a phase of big kernels
 * follows one of small): what the share is taken from is the latest gaps, about this
 * many, the older ones weighed down as newer come. */
#define EST_RESPONSE_MEMORY 5000

/* ... and a window weighs in it at most this many gaps: a job's first window, long, its
 * queue filling (a share near 1), would otherwise outweigh dozens of short ones after it
 * for the whole recording (2,400 gaps to their 80 each). */
#define EST_RESPONSE_WINDOW 200

/* R weighed down, its means and spreads kept, to at most MOST gaps. */
void est_response_cap(struct est_response *r, double most);

/* Add ADD to the pool R, whose older gaps keep a weight of at most MEMORY less ADD's (and
 * at least a quarter of MEMORY); MEMORY 0: all of it. */
void est_response_pool(struct est_response *r, const struct est_response *add, double memory);

/* A job's share surely below 1 and read below this says a device's queue paced it, and
 * what its thread paid was only partly the job's. Not "surely below 1" alone: a loop that
 * paces itself read 0.97 (0.00 to just below 1) over 90,000 gaps in a run here, and was
 * said to be device-paced; a device-bound one, its windows short, reads 0.08 (0.00-0.99). */
#define EST_JOB_PACED 0.9

/* The device's records that tell who set the launches' pace (windows__device_pace) needed
 * before they are the launches' share, and about how many of the latest it is taken from. */
#define EST_PACE_MIN 64
#define EST_PACE_MEMORY 5000

/* How much a device paced a thread in one window, by its gaps R: 1 - the share of a delay
 * that pushes calls out, where at least EST_PACED_MIN gaps after stalls and after other
 * calls are in and they say that share is surely below 1 (2.5 sigma); else -1: no sign of
 * a device's pace (a thread that paces itself, one that was catching up on its device
 * all through the window, or too few gaps to tell). */
#define EST_PACED_MIN 8
double est_response_paced(const struct est_response *r);

/* Whether R's gaps say the share well enough for one window to take it from them alone:
 * EST_RESPONSE_MIN gaps after stalls and after other calls, and the share's standard
 * error at most 1/EST_RESPONSE_PRECISE. */
#define EST_RESPONSE_PRECISE 2.0
bool est_response_precise(const struct est_response *r);

/* The share of a delay that pushes calls out: mid (the gaps' difference over the stall,
 * weighed against 1 by EST_RESPONSE_PRIOR_SD), and its range (2.5 sigma of the difference
 * of the means, within 0-1, and holding mid; down to 0 where its upper end is below 1: a
 * device paced the thread part of the time, and what pushed may have been made up); 1
 * (0-1) while fewer than EST_RESPONSE_MIN gaps after stalls are in. UNBIASED (for gaps
 * est_response_precise says enough of): mid as measured, not weighed against 1 (within
 * -1 to 2, twice its error at most), noise either side of the truth, so that windows'
 * corrections sum to the truth's (weighed, a 2 ms window's share read 0.15 where the truth
 * was 0.05); else within 0-1. *DELTA (may be NULL): how much longer the gap after a stall
 * was, and *STALL the stall (s). */
struct est_delay est_response_share(const struct est_response *r, bool unbiased, double *delta, double *stall);

/* What a counted call's work (its stack walks and map updates) costs the job's own code
 * after it, beyond the program's run time: its caches refilled, which no clock of
 * gpubpf's sees. One counted call in a window in bare_every skips that work at random
 * (struct cuda_tstate), and the gaps after it are shorter than after the others by the
 * work's run time and that cost, as far as a delay pushes calls out. The gaps after a
 * call that did its work ([0]) and after a bare one ([1]): how many, their sums (s) and
 * sums of squares (s^2), and the programs' run time before them (s). */
struct est_bare {
	double n[2], sum[2], sq[2], prog[2];
};

/* One thread's gaps in one window, from BPF's books (ns; [1] after bare calls). */
void est_bare_add(struct est_bare *b, const double n[2], const double sum_ns[2], const double sq_ns[2],
		  const double prog_ns[2]);

/* Gaps after bare calls needed before the work's cost is taken from them, and the least
 * share of a delay that pushes calls out it is taken at (below, the work's cost is mostly
 * absorbed by a device's queue, and the share's own error would swamp it). */
#define EST_BARE_MIN 200
#define EST_BARE_SHARE_MIN 0.5

/* The work's cost to the job beyond its run time, per call that did it (s): MID and a 95%
 * range (2 sigma of the gaps' difference), all at least 0, given SHARE of a delay that
 * pushes calls out (est_response_share's mid); 0 with too few gaps or too small a share.
 * *DELTA (may be NULL): how much shorter a gap after a bare call was (s), and *PROG how
 * much shorter its program ran. */
struct est_delay est_bare_cost(const struct est_bare *b, double share, double *delta, double *prog);

/* Delay corrections D with only SHARE of the delay pushing calls out: each end of D with
 * the same end of SHARE (an unbounded end times a share of 0 adds nothing; a share below
 * 0, noise, makes a factor below 1, and never below 0). */
struct est_delay est_delay_share(struct est_delay d, struct est_delay share);

/* What a call seen in a window of weight W (1/p: each instant is in a window with
 * probability p) stands for, its probes' delay correcting the window's rate by F: itself,
 * and W - 1 calls of the time outside the window at the rate the thread has there, without
 * its probes (F times the window's). Not F * W: the calls the probes pushed out of the
 * window were made after it, in the time outside, which counts them already; F * W estimates
 * the calls the job would have made without gpubpf, not those it made (the 4 us spin loop
 * at a 5% budget: +4% on average; with windows over all of its time, 2.5 million for its
 * 1.5 million). A thread a device paces has F near 1 either way. W <= 1 or F <= 0: the
 * call, once. */
double est_weight(double w, double f);

/* One period of one group: what was seen and what it estimates. */
struct est_period {
	double len;	   /* seconds */
	bool sampled;	   /* observed with probability < 1 somewhere */
	double wmax;	   /* the largest window weight planned in it */
	double seen;	   /* calls seen */
	double raw[3];	   /* values seen: calls, bytes (copies) or wait ns (syncs), spare */
	double est[3];	   /* their estimates */
	double poisson[3]; /* sum over windows of w * (w - 1) * value^2 / calls: a floor */
	double sys[2][3];  /* the estimates with the delay corrections' LO and HI ends */
};

/* The periods of one group over a recording. */
struct est_group {
	struct est_period *p;
	size_t n, cap;
};

/* Period I of G (created, zeroed, on first use; NULL when out of memory). */
struct est_period *est_group_period(struct est_group *g, size_t i);

/* A window of weight W is planned in period P of LEN seconds (whether or not it sees
 * anything: a period that saw nothing still estimates nothing, with an error). */
void est_period_plan(struct est_period *p, double len, double w);

/* Add what a window of weight W saw in period P: N calls and VALUES[3] (sums), whose
 * probes' delay D (est_run_delay, est_delay_share; NULL: none) corrects (est_weight). */
void est_period_add(struct est_period *p, double w, const struct est_delay *d, double n, const double values[3]);

struct est_total {
	double seen;	       /* calls seen */
	double est;	       /* estimate */
	double lo, hi;	       /* 95% confidence interval, the delay correction's range included
				* (hi INFINITY: unbounded, est_run_delay) */
	double sys_lo, sys_hi; /* the estimate at the delay correction's ends (sys_lo <= est <= sys_hi) */
	int sampled;	       /* periods observed with probability < 1 */
	int periods;
};

/* The estimate of value V (0: calls, 1: bytes or wait) over every period of G, with its
 * 95% confidence interval. */
void est_group_total(const struct est_group *g, int v, struct est_total *out);

void est_group_free(struct est_group *g);

/* The 97.5% quantile of Student's t with DF degrees of freedom (1.96 for large DF). */
double est_t975(int df);

#endif /* GPUBPF_ESTIMATE_H */
