// SPDX-License-Identifier: MIT
/* The sampling windows said: the duty cycles, each group's estimate with its 95%
 * interval, and gpubpf's estimated overhead part by part, for the profile's comments,
 * the summary line and the agent. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cuda.h"
#include "hmap.h"
#include "log.h"
#include "numfmt.h"
#include "profile.h"
#include "readfile.h"
#include "windows.h"

#include "windows_int.h"

void windows__duty_text(const struct governor *gv, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int g = 0; g < gv->ngroups && off < len; g++) {
		int n;

		if (gv->g[g].always)
			continue;
		n = snprintf(buf + off, len - off, "%s%s %.3g%%", off ? ", " : "", gv->g[g].name, 100 * gv->g[g].duty);
		if (n >= 0 && gv->g[g].strata > 1 && gv->g[g].duty < 1 && off + (size_t)n < len) {
			int m = snprintf(buf + off + n, len - off - (size_t)n, " in %d windows", gv->g[g].strata);

			n = m < 0 ? m : n + m;
		}
		if (n < 0)
			break;
		off += (size_t)n;
	}
}

/* Whether group G's probes' delay pushed calls out, as the stalls said (estimate.h,
 * est_response), for the correction's part of the estimate's comment. */
static void share_text(const struct windows_summary *sum, int g, char *buf, size_t len)
{
	const struct est_response *r = &sum->resp[g];
	struct est_delay s;
	double delta, stall, n = sum->pace[0] + sum->pace[1];
	char gaps[32], a[32], b[32];

	if (g == CG_LAUNCH && n >= EST_PACE_MIN) {
		snprintf(buf, len,
			 "; of the probes' delay %.2f pushed calls out over the recording, as the device's records "
			 "said: of the followed launches' first kernels (device-time windows, the cost measurement), "
			 "%s started "
			 "as launched (their "
			 "launch set the pace) and %s waited for the one before them on their stream (a device's queue "
			 "that sets the pace absorbs a delay)",
			 sum->pace[0] / n, numfmt__grouped(a, sizeof(a), sum->pace[0]),
			 numfmt__grouped(b, sizeof(b), sum->pace[1]));
		return;
	}
	if (!sum->stalls) {
		snprintf(buf, len, "; the probes' delay taken to push the thread's calls out (GPUBPF_STALL_US=0)");
		return;
	}
	s = est_response_share(r, false, &delta, &stall);
	if (!(stall > 0)) {
		snprintf(buf, len,
			 "; whether the probes' delay pushed calls out or a device's queue absorbed it: too few gaps "
			 "to tell (taken as 0-1 of it)");
		return;
	}
	snprintf(buf, len,
		 "; of the probes' delay %.2f (%.2f-%.2f) pushed calls out over the recording: a %.2g us stall at "
		 "random on one call in %d made the thread's next call %.2g us later (%s gaps), where a device's "
		 "queue that sets the pace absorbs it",
		 s.mid, s.lo, s.hi, stall * 1e6, CUDA_STALL_EVERY, delta * 1e6,
		 numfmt__grouped(gaps, sizeof(gaps), r->n[0] + r->n[1]));
}

static void estimate_comment(struct profile *prof, int g, const char *what, const struct est_total *t,
			     const struct windows_summary *sum)
{
	const char *group = cuda_group_names[g];
	char e[32], lo[32], hi[32], seen[32], sys[768] = "", how[256], up[32], pm[128], share[512];
	double half = (t->hi - t->lo) / 2;

	if (!t->sampled) {
		profile__add_comment(prof, "cuda estimate: %s: %s %s, every call seen (attached all the time)", group,
				     numfmt__grouped(e, sizeof(e), t->est), what);
		return;
	}
	if (t->sampled < 2) {
		/* One sampled period gives no spread to measure: no interval is better than a
		 * false one (a short recording; see docs/BENCHMARKS.md). */
		profile__add_comment(prof,
				     "cuda estimate: %s: %s %s, no confidence interval (one sampled period: a "
				     "recording this short is a rough estimate), from %s calls seen in windows of "
				     "%d of %d periods",
				     group, numfmt__grouped(e, sizeof(e), t->est), what,
				     numfmt__grouped(seen, sizeof(seen), t->seen), t->sampled, t->periods);
		return;
	}
	/* Said apart: sampling cannot narrow it, only timing the traps better (or --exact). */
	if (t->est > 0 && t->sys_hi - t->sys_lo > 0.005 * t->est) {
		if (sum->trap_ticks >= EST_TRAPS_MIN_TICKS)
			snprintf(how, sizeof(how),
				 "timed in the job by %.0f of the kernel's ticks at x%.2f their calibrated cost, "
				 "x%.2f-x%.2f (the top at least x%.1f: the ticks see the kernel's side, not the job's "
				 "code slowed after each trap)",
				 sum->trap_ticks, sum->trap_scale.mid, sum->trap_scale.lo, sum->trap_scale.hi,
				 EST_TRAP_HI);
		else if (sum->trap_ticks < 0)
			snprintf(how, sizeof(how),
				 "calibrated on gpubpf's own call, taken at %.1f-%.1f times: %.0f of the kernel's "
				 "ticks put them outside that, at one phase of a loop paced to the tick, not taken",
				 EST_TRAP_LO, EST_TRAP_HI, -sum->trap_ticks);
		else
			snprintf(how, sizeof(how),
				 "calibrated on gpubpf's own call, taken at %.1f-%.1f times: too few of the kernel's "
				 "ticks to time them",
				 EST_TRAP_LO, EST_TRAP_HI);
		if (isinf(t->sys_hi))
			snprintf(up, sizeof(up), "unbounded");
		else
			snprintf(up, sizeof(up), "%.2g%%", 100 * (t->sys_hi - t->est) / t->est);
		snprintf(sys, sizeof(sys), "; the correction for the probes' delay alone -%.2g%% +%s (its traps %s)%s",
			 100 * (t->est - t->sys_lo) / t->est, up, how,
			 isinf(t->sys_hi)
			     ? "; with the traps at their dearest the probes took all of a thread's time in "
			       "a window: the calls it would have made without them cannot be told"
			     : "");
	}
	if (isinf(t->hi))
		snprintf(pm, sizeof(pm), "unbounded above: --exact counts them");
	else if (t->est > 0)
		snprintf(pm, sizeof(pm), "+-%.2g%%", 100 * half / t->est);
	else /* no share of nothing: the top is the rule of three's (est_group_total) */
		snprintf(pm, sizeof(pm), "none seen: at most ~3 in the time the windows watched, scaled");
	share_text(sum, g, share, sizeof(share));
	profile__add_comment(prof,
			     "cuda estimate: %s: %s %s, 95%% CI %s-%s (%s), from %s calls seen in windows of "
			     "%d of %d periods%s%s",
			     group, numfmt__grouped(e, sizeof(e), t->est), what, numfmt__grouped(lo, sizeof(lo), t->lo),
			     numfmt__grouped(hi, sizeof(hi), t->hi), pm, numfmt__grouped(seen, sizeof(seen), t->seen),
			     t->sampled, t->periods, sys, share);
}

/* The parts of what gpubpf cost the busiest thread, as fractions of ELAPSED. */
static void cost_parts(struct windows *w, const uint64_t cost[CG__COUNT], const struct governor *gv, double elapsed,
		       struct windows_summary *sum, double *probes, double *always)
{
	double secs = elapsed > 0 ? elapsed : 1;

	*probes = *always = 0;
	memset(sum, 0, sizeof(*sum));
	if (w) {
		windows__summary(w, sum);
		*probes = sum->probes / secs;
		for (int g = 0; g < CG__COUNT; g++)
			if (!w->gs[g].windowed)
				*always += (double)cost[g] / 1e9 / secs;
	} else {
		/* no windows, no per-thread books: all threads' probe time, as if one's */
		for (int g = 0; g < CG__COUNT; g++)
			*probes += (double)cost[g] / 1e9 / secs;
	}
	(void)gv;
}

/* The busiest thread's traps are in its cost at the multiple of their calibration the
 * windows used (the timed one as it stood, x1 before): at the range's ends instead. */
static void traps_range(const struct windows_summary *sum, double secs, double total, double *lo, double *hi)
{
	double traps = sum->probes_traps / (secs > 0 ? secs : 1), mid = sum->trap_scale.mid;

	if (lo)
		*lo = fmax(0, total + (sum->trap_scale.lo - mid) * traps);
	if (hi)
		*hi = total + (sum->trap_scale.hi - mid) * traps;
}

/* The budget is well below what the plan needs at the least (its floors): said once,
 * when every windowed group's cost is measured, with what to change. A plan a little
 * over it (the agent's, at 1%: 1.09%, a group at its floor) is said in the profile's
 * `cuda cost:` comment only. Under w->lock. */
void windows_warn_floored(struct windows *w)
{
	const struct governor *gv = w->gv;

	/* (the sampler's events in the threads' switches: sampling goes per CPU where they are
	 * over half the budget, switches.h, and -F does nothing to them) */
	if (w->warned_floor || !gv->floored || gv->exact ||
	    governor__overhead(gv) - gv->switch_cost < FLOOR_WARN * gv->budget)
		return;
	for (int g = 0; g < gv->ngroups; g++)
		if (!gv->g[g].always && !gv->g[g].measured)
			return;
	w->warned_floor = true;
	pr_warn("the overhead budget of %.3g%% is below what gpubpf needs at the least: CPU sampling at %.0f Hz "
		"takes %.3g%% of a thread's time, and each windowed group at least %.3g%% of every period; "
		"planned %.3g%% (lower -F, or raise --overhead-budget)",
		100 * gv->budget, gv->sample_hz, 100 * (gv->cpu_cost - gv->switch_cost), 100 * gv->min_duty,
		100 * governor__overhead(gv));
}

/* What of a thread's delay slows the job: the device's records' share where they told it
 * (windows__device_pace), else the stalls' over every windowed group's gaps where it is
 * surely below 1; either where read below EST_JOB_PACED (a device's queue set the pace
 * part of the time, and the delay came out of the thread's waits on it); else all of it,
 * as the budget assumes (and where the stalls cannot tell: too few gaps,
 * GPUBPF_STALL_US=0). */
static struct est_delay job_share(const struct windows_summary *sum)
{
	struct est_response all = {0};
	struct est_delay one = {1, 1, 1}, s;
	double n = sum->pace[0] + sum->pace[1];

	/* the device's records, where they told it (windows__device_pace) */
	if (n >= EST_PACE_MIN) {
		s.mid = s.lo = s.hi = sum->pace[0] / n;
		return s.mid < EST_JOB_PACED ? s : one;
	}
	if (!sum->stalls)
		return one;
	for (int g = 0; g < CG__COUNT; g++)
		est_response_pool(&all, &sum->resp[g], 0);
	s = est_response_share(&all, false, NULL, NULL);
	return s.hi < 1 && s.mid < EST_JOB_PACED ? s : one;
}

double windows__overhead(struct windows *w, const uint64_t cost_ns[CG__COUNT], const struct governor *gv,
			 double elapsed, double *lo, double *hi, struct est_delay *job)
{
	struct windows_summary sum;
	double probes, always, total;

	cost_parts(w, cost_ns, gv, elapsed, &sum, &probes, &always);
	total = probes + always + gv->cpu_cost;
	if (lo)
		*lo = total;
	if (hi)
		*hi = total;
	if (w)
		traps_range(&sum, elapsed, total, lo, hi);
	if (job)
		*job = w ? job_share(&sum) : (struct est_delay){1, 1, 1};
	return total;
}

/* What the cost comment says of the job's own code running slower after each hit: counted
 * in part where bare calls measure what the calls' work costs it (est_bare), else not. */
static void work_text(const struct windows_summary *sum, double secs, char *buf, size_t len)
{
	size_t at = 0;
	int n;

	if (!sum->bare_every) {
		snprintf(
		    buf, len,
		    "not counted: the job's own code runs slower after each hit (its caches refilled), which no "
		    "clock of gpubpf's sees (measured apart: a fifth to a third of a hit's cost more in a "
		    "Python-driven loop, about a tenth in a C one; GPUBPF_BARE_EVERY measures the programs' part)");
		return;
	}
	n = snprintf(
	    buf, len,
	    "the job's own code runs slower after each hit (its caches refilled): the calls' work (stack walks, "
	    "map updates) costs it, beyond the programs' run time, ");
	at = n > 0 ? (size_t)n : 0;
	for (int g = 0; g < CG__COUNT && at < len; g++) {
		double delta, prog;
		struct est_delay c;

		if (!(sum->bare[g].n[1] > 0))
			continue;
		c = est_bare_cost(&sum->bare[g], 1, &delta, &prog);
		if (sum->bare[g].n[1] < EST_BARE_MIN)
			n = snprintf(buf + at, len - at, "%s: too few gaps after bare calls to tell (%.0f); ",
				     cuda_group_names[g], sum->bare[g].n[1]);
		else
			n = snprintf(
			    buf + at, len - at,
			    "%s: %.2f us a call (%.2f-%.2f at all of a delay pushing calls out; a gap after a bare "
			    "call %.2f us shorter, its program %.2f us shorter), ",
			    cuda_group_names[g], c.mid * 1e6, c.lo * 1e6, c.hi * 1e6, delta * 1e6, prog * 1e6);
		if (n < 0)
			break;
		at += (size_t)n;
	}
	if (at < len)
		snprintf(
		    buf + at, len - at,
		    "measured in the job: one counted call in %u in a window skips its work at random, its stack "
		    "not taken (the window's other calls count for it); %.3g%% of the busiest thread, in the hits' "
		    "part; not counted: what a trap itself costs the job's code after it so",
		    sum->bare_every, 100 * sum->probes_work / (secs > 0 ? secs : 1));
}

/* "launches 2.1 ms, copies 0.4 ms": per windowed group, the longest its probes were in
 * with no window open (ahead of a window, after one, or held in by a window thread that
 * woke late). */
static void idle_text(const struct windows *w, const struct windows_summary *sum, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (int g = 0; g < CG__COUNT && at < len; g++) {
		int n;

		if (!w->gs[g].windowed)
			continue;
		n = snprintf(buf + at, len - at, "%s%s %.3g ms", at ? ", " : "", cuda_group_names[g],
			     1e3 * sum->idle_max[g]);
		if (n < 0)
			break;
		at += (size_t)n;
	}
}

void windows__comments(struct windows *w, const uint64_t cost[CG__COUNT], const struct governor *gv,
		       struct profile *prof, double budget_pct, const char *exact_why, double elapsed, double own)
{
	struct windows_summary sum;
	char duty[256], traps[96] = "calibrated", range[128] = "", floors[160] = "", idle[160] = "", over[256] = "",
			work[1536], ownw[192] = "";
	double probes, always, total, lo = 0, hi = 0;

	windows__duty_text(gv, duty, sizeof(duty));
	cost_parts(w, cost, gv, elapsed, &sum, &probes, &always);
	work_text(&sum, elapsed, work, sizeof(work));
	if (w) {
		idle_text(w, &sum, idle, sizeof(idle));
		if (gv->own_window > 0)
			snprintf(
			    ownw, sizeof(ownw),
			    "; a window took %.3g ms of gpubpf's own CPU (its attach, detach and books), the parts "
			    "held to %.3g%% of a CPU for it%s",
			    1e3 * gv->own_window, 100 * GOV_OWN_WINDOWS_MAX,
			    gv->parts_held ? ": fewer than the budget allows" : "");
		profile__add_comment(
		    prof,
		    "cuda: sampled windows under a %.3g%% overhead budget: periods of %.3g s, one window per group in "
		    "each (or in each of its equal parts, where the group's windows are cheap), placed at random, "
		    "so every instant is seen with a known probability and each call seen counts 1/p; last "
		    "duty cycles: %s (allocations and name lookups always attached); counts, bytes and waits of "
		    "windowed groups are estimates of the whole recording; windows opened late: %" PRIu64 ", by %.3g "
		    "ms in all, and never opened: %" PRIu64 " (the next stood in for them), where gpubpf's window "
		    "thread woke late (a loaded machine); gate bounds whose store may have landed after them (the "
		    "thread preempted; the calls there in or out of their window): %" PRIu64 ", by at most %.3g ms; "
		    "the longest a group's probes were in with no window open: %s%s",
		    budget_pct, w->period, duty, sum.late, 1e3 * sum.late_s, sum.missed, sum.slips, 1e3 * sum.slip_max,
		    idle, ownw);
		for (int g = 0; g < CG__COUNT; g++) {
			if (!w->gs[g].windowed)
				continue;
			estimate_comment(prof, g, "calls", &sum.calls[g], &sum);
			if (g == CG_COPY && sum.value[g].est > 0)
				estimate_comment(prof, g, "bytes", &sum.value[g], &sum);
			if (g == CG_SYNC && sum.value[g].est > 0)
				estimate_comment(prof, g, "ns waited", &sum.value[g], &sum);
		}
	} else {
		profile__add_comment(prof, "cuda: exact counts (%s): every probe attached all the time", exact_why);
	}
	/* What gpubpf cost the busiest thread, each part as measured (see --help). */
	total = probes + always + gv->cpu_cost + own;
	if (gv->floored && !gv->exact)
		snprintf(floors, sizeof(floors),
			 " (over the %.3g%% budget, held up by its floors: CPU sampling, and each windowed group at "
			 "least %.3g%% of every period)",
			 budget_pct, 100 * gv->min_duty);
	if (gv->over_n > 0)
		snprintf(over, sizeof(over),
			 "; %d periods went over the budget (planned from a cost measured low, as a job that has just "
			 "started reads), by %.3g ms in all, kept back from the next periods' with what was spent "
			 "once (%.3g ms): %.3g ms repaid by the end",
			 gv->over_n, 1e3 * gv->over, 1e3 * gv->once, 1e3 * fmin(gv->repaid, gv->once + gv->over));
	if (w && sum.trap_ticks >= EST_TRAPS_MIN_TICKS)
		snprintf(traps, sizeof(traps), "calibrated, and timed in the job by the kernel's ticks at x%.2f",
			 sum.trap_scale.mid);
	/* The traps' multiple is known only within its range: so is the cost (a trap's
	 * real cost was 1.5-2.2 times its calibration in a 4 us spin loop here). */
	if (w) {
		traps_range(&sum, elapsed, total, &lo, &hi);
		if (hi - lo > 0.001 * total)
			snprintf(range, sizeof(range),
				 " (%.3g-%.3g%% with the traps at x%.2f-x%.2f their calibration%s)", 100 * lo, 100 * hi,
				 sum.trap_scale.lo, sum.trap_scale.hi,
				 sum.trap_ticks >= EST_TRAPS_MIN_TICKS ? ", as timed"
				 : sum.trap_ticks < 0		       ? ": the ticks aliased with the job's pace"
								       : ": too few ticks to time them");
	}
	profile__add_comment(
	    prof,
	    "cuda cost: estimated overhead %.3g%%%s of the busiest target thread: probe hits %.3g%% (their programs "
	    "timed in the job, plus traps of %.2f us at entry and %.2f us at return, %s; %.3g%% of it with the "
	    "probes in and no window open, attached ahead of a window or not yet out after one, measured in the "
	    "job), %" PRIu64 " windows opened and closed (%.2f us each with its first hit, counted with the hits), "
	    "groups never windowed %.3g%%, CPU sampling %.3g%% (%.2f us a sample, %.3g samples a second of the most "
	    "sampled target thread's time at -F %.0f, and %.3g%% for its events in the sampled threads' context "
	    "switches), gpubpf's own CPU where no CPU "
	    "was idle %.3g%%; planned %.3g%%%s%s; a traced call costs %.2f us on gpubpf's own calibration call; %s",
	    100 * total, range, 100 * probes, gv->trap_entry * 1e6, gv->trap_return * 1e6, traps,
	    100 * sum.probes_closed / (elapsed > 0 ? elapsed : 1), sum.windows, governor__window_cost(gv) * 1e6,
	    100 * always, 100 * gv->cpu_cost, gv->sample_cost * 1e6, gv->sample_rate, gv->sample_hz,
	    100 * gv->switch_cost, 100 * own, 100 * governor__overhead(gv), floors, over, gv->cost_per_hit * 1e6, work);
	if (w) {
		struct est_delay js = job_share(&sum);

		if (js.hi < 1)
			profile__add_comment(
			    prof,
			    "cuda cost: the job slowed by an estimated %.3g%% (%.3g-%.3g%%): a device's queue set the "
			    "busiest thread's pace, and of a delay only %.2f (%.2f-%.2f) pushed its calls out (%s), "
			    "the "
			    "rest came out of its waits on the device; the budget is spent on the thread's time all "
			    "the "
			    "same",
			    100 * total * js.mid, 100 * lo * js.lo, 100 * hi * js.hi, js.mid, js.lo, js.hi,
			    sum.pace[0] + sum.pace[1] >= EST_PACE_MIN ? "the device's records" : "random stalls");
	}
}
