// SPDX-License-Identifier: MIT
/* Device time in windows, what the profile says of it (cupti_win.c runs them): the
 * "gpu cost:" comment (the duty, what a launch costs more and its parts, the estimated
 * overhead and what was repaid of what was spent once), "gpu correction:" (who set the
 * launches' pace) and "gpu estimate:" (kernels and kernel time with their intervals, in
 * their two parts). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "../../bpf/cupti.h"
#include "cuda.h"
#include "cupti.h"
#include "hmap.h"
#include "numfmt.h"
#include "profile.h"
#include "windows.h"

#include "cupti_int.h"

/* How the comment's CUPTI dispatch was come by, into BUF: timed in the targets' jobs, or
 * not at all (an older library, a backend without it). */
static void dispatch_text(struct cupti_tracer *c, char *buf, size_t len)
{
	double pair = 0, pairs = 0;
	int n = 0;

	hmap_for_each(&c->tab, en)
	{
		const struct cpt_wtarget *w = cpt_as_target(en);
		const struct dev_costs *m = w ? w->taken : NULL;

		if (m && m->pair_ns) {
			pair += m->pair_ns;
			pairs += (double)m->dispatch_ns / m->pair_ns;
			n++;
		}
	}
	if (n)
		snprintf(buf, len,
			 "its dispatch of a driver call's callbacks timed in the job, %.2f us a pair, %.2g pairs a "
			 "launch, and the subscription's %.2f us; the H100's %.2f us at least",
			 pair / n / 1e3, pairs / n, DEV_SUBSCRIBED_S * 1e6, DEV_CB_DISPATCH_S * 1e6);
	else
		snprintf(buf, len, "the H100's, not timed in the job");
}

void cpt_win_comments(struct cupti_tracer *c, double elapsed)
{
	struct est_total k, t;
	struct governor g;
	double parts[CUPTI_COST_PARTS], total, act = 0, cb = 0, disp = 0, base = 0, c_lo = INFINITY, c_hi = 0;
	char e[32], lo[32], hi[32], slo[32], shi[32], seen[32], every[128] = "", times[160], how[200];
	int n = 0, probes[3] = {0};
	uint32_t measures = 0;

	if (!c->win)
		return;
	hmap_for_each(&c->tab, en)
	{
		const struct cpt_wtarget *w = cpt_as_target(en);
		const struct dev_costs *m = w ? w->taken : NULL;

		if (!m)
			continue;
		act += m->on_ns > m->off_ns ? (double)(m->on_ns - m->off_ns) : 0;
		cb += (double)m->callback_ns;
		disp += cpt_dispatch_s(m) * 1e9;
		base += (double)m->off_ns - cpt_dispatch_s(m) * 1e9;
		probes[m->probes <= DEV_PROBES_MIXED ? m->probes : DEV_PROBES_MIXED]++;
		measures += w->measures;
		c_lo = fmin(c_lo, w->c_lo);
		c_hi = fmax(c_hi, w->c_hi);
		n++;
	}
	if (measures > (uint32_t)n)
		snprintf(times, sizeof(times),
			 " %u times (at attach, then %.3g s after the last, once a window has closed; the median of "
			 "the last %d taken, c %.2f-%.2f us over them all)",
			 measures, c->remeasure_ms / 1e3, CPT_COSTS, c_lo * 1e6, c_hi * 1e6);
	else
		snprintf(times, sizeof(times), " at attach");
	total = cupti__overhead(c, elapsed, parts);
	dispatch_text(c, how, sizeof(how));
	windows__governor(c->win, &g);
	if (c->every > 1)
		snprintf(every, sizeof(every),
			 " (one window in %u periods of %.3g s: a window's set-up costs that much)", c->every,
			 c->period);
	if (!n) {
		profile__add_comment(c->s->prof,
				     "gpu cost: device time in windows: the cost per launch was not measured (the "
				     "targets launched too little while the library timed them), %" PRIu64 " windows",
				     c->windows);
	} else {
		profile__add_comment(
		    c->s->prof,
		    "gpu cost: device time in windows of %.3g%% of each %.3g s period%s, sized for a thread that does "
		    "nothing but launch: a launch costs %.2f us more with it (CUPTI's activity and the launch probe "
		    "%.2f us, measured in the job%s by timing launch calls followed with activity on against calls "
		    "with it off, those that met gpubpf's CPU launch probes alike: all out in %d, all in in %d, "
		    "mixed in %d of %d targets; callbacks %.2f us timed in them and CUPTI's dispatch to them with the "
		    "subscription %.2f us (%s)) against %.2f us without; estimated overhead %.3g%% (%" PRIu64
		    " launches followed in %" PRIu64
		    " windows %.3g%%, their switches %.3g%% (CUPTI set up and torn down, %.3g ms a window), the "
		    "measurement %.3g%%, callbacks on outside windows (the measurements' warm-up and calls they did "
		    "not time, and in %" PRIu64
		    " ticks to name new launch handles) %.3g%% (the library's time in them, and CUPTI's dispatch to "
		    "them, as above), CUPTI's set-up at attach and the measurement's switches "
		    "%.3g%% (%.3g ms, once), all launching threads together; what was spent once, %.3g ms, is repaid "
		    "from the budget: each period keeps back what repays it and what periods spent over the budget "
		    "(%.3g ms), at most half the budget, and %.3g ms of the two were repaid by the end)",
		    100 * c->duty, c->period * c->every, every, (act + cb + disp) / n / 1e3, act / n / 1e3, times,
		    probes[DEV_PROBES_OUT], probes[DEV_PROBES_IN], probes[DEV_PROBES_MIXED], n, cb / n / 1e3,
		    disp / n / 1e3, how, (base - cb) / n / 1e3, 100 * total, c->followed, c->windows, 100 * parts[0],
		    100 * parts[1], c->windows ? (double)c->switch_ns / c->windows / 1e6 : 0, 100 * parts[2],
		    c->naming_ticks, 100 * parts[3], 100 * parts[4], 1e3 * parts[4] * elapsed, 1e3 * g.once,
		    1e3 * g.over, 1e3 * fmin(g.repaid, g.once + g.over));
	}
	if (c->runs)
		profile__add_comment(
		    c->s->prof,
		    "gpu correction: a window's launches count the time outside it at the rate they would have had "
		    "without CUPTI, as far as its cost pushed them out: where a launch set its kernel's pace, all of "
		    "it; where the device did (the kernel waited for the one before it on its stream), none. Of the "
		    "windows' launches whose first kernel's record came in, %" PRIu64
		    " started as launched and %" PRIu64 " waited (the device's records, in %" PRIu64 " of %" PRIu64
		    " threads' runs in windows; the launch probes' stalls said it of the rest)",
		    c->paced_free, c->paced_queued, c->paced_runs, c->runs);
	cpt_win_totals(c, &k, &t);
	if (k.sampled < 2) {
		profile__add_comment(c->s->prof,
				     "gpu estimate: kernels %s, kernel time %.4g ms, from %s device records seen in "
				     "windows of %d periods (too few sampled periods for an interval: no estimate to "
				     "trust; this budget opens a window once in %.3g s) and %" PRIu64
				     " of the cost measurement's, counted once",
				     numfmt__grouped(e, sizeof(e), k.est), t.est / 1e6,
				     numfmt__grouped(seen, sizeof(seen), k.seen), k.periods, c->period * c->every,
				     c->measured_kernels);
		return;
	}
	if (isinf(k.hi)) {
		/* CUPTI's cost, at the dearest end of its range, took all of a launching thread's
		 * time in a window (estimate.h, est_run_delay) */
		profile__add_comment(c->s->prof,
				     "gpu estimate: kernels %s, 95%% CI %s-unbounded; kernel time %.4g ms, 95%% CI "
				     "%.4g ms-unbounded (a thread that launched back to back spent all its time in "
				     "CUPTI in a window, at its dearest: --exact follows every launch); from %s device "
				     "records seen in windows of %d of %d periods and %" PRIu64
				     " of the cost measurement's, counted once",
				     numfmt__grouped(e, sizeof(e), k.est), numfmt__grouped(lo, sizeof(lo), k.lo),
				     t.est / 1e6, t.lo / 1e6, numfmt__grouped(seen, sizeof(seen), k.seen), k.sampled,
				     k.periods, c->measured_kernels);
		return;
	}
	/* the interval's two parts: CUPTI's cost at either end of its range in the correction
	 * of what it pushed out of the windows, and the windows' sampling around them */
	numfmt__grouped(slo, sizeof(slo), k.sys_lo);
	numfmt__grouped(shi, sizeof(shi), k.sys_hi);
	profile__add_comment(c->s->prof,
			     "gpu estimate: kernels %s, 95%% CI %s-%s (+-%.2g%%: %s-%s at either end of CUPTI's "
			     "cost's range in the correction, and the windows' sampling +-%.2g%% around them); "
			     "kernel time %.4g ms, 95%% CI %.4g-%.4g ms (+-%.2g%%); from %s device records seen in "
			     "windows of %d of %d periods and %" PRIu64 " of the cost measurement's, counted once",
			     numfmt__grouped(e, sizeof(e), k.est), numfmt__grouped(lo, sizeof(lo), k.lo),
			     numfmt__grouped(hi, sizeof(hi), k.hi), k.est > 0 ? 50 * (k.hi - k.lo) / k.est : 0, slo,
			     shi, k.est > 0 ? 100 * fmax(k.sys_lo - k.lo, k.hi - k.sys_hi) / k.est : 0, t.est / 1e6,
			     t.lo / 1e6, t.hi / 1e6, t.est > 0 ? 50 * (t.hi - t.lo) / t.est : 0,
			     numfmt__grouped(seen, sizeof(seen), k.seen), k.sampled, k.periods, c->measured_kernels);
}
