// SPDX-License-Identifier: MIT
#include <math.h>

#include "governor.h"

double governor__window_cost(const struct governor *gv)
{
	return gv->window_cost + gv->first_hit;
}

/* What group G costs its busiest thread attached all the time (a fraction). */
static double full_cost(const struct governor *gv, const struct gov_group *g)
{
	return g->util;
}

/* ... and what its windows add each period, at any duty below 1. */
static double fixed_cost(const struct governor *gv, const struct gov_group *g)
{
	if (!(gv->period > 0))
		return 0;
	return ((g->fixed > 0 ? g->fixed : governor__window_cost(gv)) + g->closed) / gv->period /
	       (g->every > 1 ? g->every : 1) * (g->strata > 1 ? g->strata : 1);
}

/* Windows per period for G within SHARE: the period cut into equal parts, a slot drawn in
 * each. A window's calls then stand for its part of the period only, so a recording's ends
 * (a job that starts or exits inside a period) and a job's changes of pace weigh on fewer
 * calls each: with one slot a 1 s period, the draw put a whole period's calls, or none, on
 * where that slot fell (a 4 s launch loop came out -26% to +19% of its count, -10% to +4%
 * in 4 parts; docs/DESIGN.md). As many parts as keep each window
 * GOV_STRATUM_MIN_WINDOW long and each part GOV_STRATUM_MIN_PART (a window thread late by
 * an attach's warm-up missed whole parts of 25 ms), at most GOV_STRATA_MAX, while their
 * fixed costs (switches, first hits, probes in with no window open) take at most a quarter
 * of the share; one where a window's fixed cost is its own (device time's set-up of CUPTI). */
static int strata_for(const struct governor *gv, const struct gov_group *g, double share)
{
	struct gov_group t = *g;
	int n = 1;

	if (g->fixed > 0 || !(gv->period > 0))
		return 1;
	for (t.strata = 2; t.strata <= GOV_STRATA_MAX; t.strata *= 2) {
		double fc = fixed_cost(gv, &t), d = (share - fc) / full_cost(gv, &t);

		if (!(d < 1) || d * gv->period / t.strata < GOV_STRATUM_MIN_WINDOW ||
		    gv->period / t.strata < GOV_STRATUM_MIN_PART * (1 - 1e-9) || fc > share / 4)
			break;
		n = t.strata;
	}
	return n;
}

/* Periods per window for G within SHARE: a fixed cost of its own (device time's set-up
 * and teardown of CUPTI, milliseconds) at most half the share, when it can be; a power
 * of two. No share at all (CPU sampling took the budget): the fewest windows. */
static int every_for(const struct governor *gv, const struct gov_group *g, double share)
{
	double m;

	if (!(g->fixed > 0) || !(gv->period > 0))
		return 1;
	if (!(share > 0))
		return GOV_EVERY_MAX;
	m = 2 * (g->fixed + g->closed) / (share * gv->period);
	/* a power of two: the library changes it only where both periods begin */
	for (int e = 1; e < GOV_EVERY_MAX; e *= 2)
		if (e >= m)
			return e;
	return GOV_EVERY_MAX;
}

/* Windows in parts are a refinement (one window a period is as unbiased), and each costs
 * gpubpf's own CPU: while the windows a second of all groups together would take more than
 * GOV_OWN_WINDOWS_MAX of a core at own_window each, the group with the most parts gets half
 * as many, and its duty is planned again within SHARES[i] (what it was given). */
static void hold_parts(struct governor *gv, const double *shares)
{
	gv->parts_held = false;
	if (!(gv->own_window > 0) || !(gv->period > 0))
		return;
	for (;;) {
		double n = 0, d;
		int big = -1;

		for (int i = 0; i < gv->ngroups; i++) {
			const struct gov_group *g = &gv->g[i];

			if (gv->exact || g->always || !(g->duty < 1))
				continue;
			n += (double)(g->strata > 1 ? g->strata : 1) / (g->every > 1 ? g->every : 1);
			if (g->strata > 1 && (big < 0 || g->strata > gv->g[big].strata))
				big = i;
		}
		if (big < 0 || !(n * gv->own_window / gv->period > GOV_OWN_WINDOWS_MAX))
			return;
		gv->g[big].strata /= 2;
		gv->parts_held = true;
		d = (shares[big] - fixed_cost(gv, &gv->g[big])) / full_cost(gv, &gv->g[big]);
		gv->g[big].duty = d < gv->min_duty ? gv->min_duty : (d > 1 ? 1 : d);
	}
}

void governor__plan(struct governor *gv)
{
	double left = gv->budget - gv->cpu_cost, shares[GOV_MAX_GROUPS] = {0};
	bool done[GOV_MAX_GROUPS] = {false};
	int open = 0;

	gv->floored = left < 0;
	if (left < 0)
		left = 0;
	/* what was spent once: repaid within a period where half of what is left allows */
	gv->repay = gv->exact || !(gv->period > 0) ? 0 : fmin(governor__debt(gv) / gv->period, left / 2);
	left -= gv->repay;
	for (int i = 0; i < gv->ngroups; i++) {
		struct gov_group *g = &gv->g[i];

		g->every = 1;
		g->strata = 1;
		if (gv->exact || g->always) {
			g->duty = 1;
			done[i] = true;
			if (!gv->exact)
				left -= full_cost(gv, g);
		} else if (!g->measured) {
			/* Unknown cost: attached until a window measures it, the guard watching. */
			g->duty = 1;
			done[i] = true;
		} else {
			open++;
		}
	}
	/* groups never windowed are a floor too */
	gv->floored |= left < 0;
	/* Water-filling: repeatedly give every open group an equal share; a group that
	 * needs less than its share takes d = 1 and returns the rest to the pool. */
	while (open > 0) {
		double share = (left > 0 ? left : 0) / open;
		bool settled = false;

		for (int i = 0; i < gv->ngroups; i++) {
			struct gov_group *g = &gv->g[i];

			if (done[i] || full_cost(gv, g) > share)
				continue;
			g->duty = 1;
			left -= full_cost(gv, g);
			done[i] = true;
			open--;
			settled = true;
		}
		if (settled)
			continue;
		for (int i = 0; i < gv->ngroups; i++) {
			struct gov_group *g = &gv->g[i];
			double d;

			if (done[i])
				continue;
			/* a window's fixed cost comes out of the share first */
			g->every = every_for(gv, g, share);
			g->strata = strata_for(gv, g, share);
			d = (share - fixed_cost(gv, g)) / full_cost(gv, g);
			g->duty = d < gv->min_duty ? gv->min_duty : (d > 1 ? 1 : d);
			gv->floored |= d < gv->min_duty;
			shares[i] = share;
			done[i] = true;
		}
		open = 0;
	}
	hold_parts(gv, shares);
}

/* What group I costs the busiest thread at its planned duty (a fraction). */
static double planned_cost(const struct governor *gv, int i)
{
	const struct gov_group *g = &gv->g[i];
	double sum = g->duty * full_cost(gv, g);

	if (!gv->exact && !g->always && g->duty < 1)
		sum += fixed_cost(gv, g);
	return sum;
}

void governor__set_cpu(struct governor *gv, double sample, double rate, double switches)
{
	gv->sample_cost = sample;
	gv->sample_rate = rate;
	gv->switch_cost = switches;
	gv->cpu_cost = rate * sample + switches;
}

double governor__overhead(const struct governor *gv)
{
	double sum = gv->cpu_cost + gv->repay;

	for (int i = 0; i < gv->ngroups; i++)
		sum += planned_cost(gv, i);
	return sum;
}

double governor__overspent(struct governor *gv, int n, double spent, double dt)
{
	double share = gv->budget - governor__overhead(gv), over;

	if (gv->exact || gv->floored || !(dt > 0) || !(spent > 0))
		return 0;
	for (int i = 0; i < n && i < gv->ngroups; i++)
		if (!gv->g[i].always)
			share += planned_cost(gv, i);
	over = spent - fmax(share, 0) * dt;
	if (!(over > 0))
		return 0;
	gv->over += over;
	gv->over_n++;
	return over;
}

void governor__spent_once(struct governor *gv, double secs)
{
	if (secs >= 0)
		gv->once = secs;
}

void governor__repay(struct governor *gv, double dt)
{
	if (dt > 0 && gv->repay > 0)
		gv->repaid = fmin(gv->repaid + gv->repay * dt, fmax(gv->once + gv->over, gv->repaid));
}

double governor__debt(const struct governor *gv)
{
	return gv->once + gv->over > gv->repaid ? gv->once + gv->over - gv->repaid : 0;
}

static double smooth(bool measured, double old, double r)
{
	return measured && r < old ? 0.5 * old + 0.5 * r : r;
}

void governor__observe(struct governor *gv, int group, double busiest, double all, double hits, double len)
{
	struct gov_group *g;

	if (group < 0 || group >= gv->ngroups || !(len > 0))
		return;
	g = &gv->g[group];
	g->util = smooth(g->measured && !g->saturated, g->util, fmin(1, busiest / len));
	g->util_all = smooth(g->measured && !g->saturated, g->util_all, all / len);
	if (hits > 0 && all > 0)
		g->hit_cost = all / hits;
	g->measured = true;
	g->saturated = false;
}

void governor__observe_closed(struct governor *gv, int group, double secs)
{
	struct gov_group *g;

	if (group < 0 || group >= gv->ngroups || !(secs >= 0))
		return;
	g = &gv->g[group];
	g->closed = smooth(g->closed > 0, g->closed, secs);
}

void governor__saturated(struct governor *gv, int group)
{
	struct gov_group *g;

	if (group < 0 || group >= gv->ngroups)
		return;
	g = &gv->g[group];
	g->util = 1;
	if (g->util_all < 1)
		g->util_all = 1;
	g->measured = true;
	g->saturated = true;
}

/* Seconds one hit of G costs: measured in the job where it has hits, else calibrated. */
static double hit_cost(const struct governor *gv, const struct gov_group *g)
{
	if (g->hit_cost > 0)
		return g->hit_cost;
	return gv->cost_per_hit > 0 ? gv->cost_per_hit : 5e-6;
}

double governor__guard_hits(const struct governor *gv, int group, double dt)
{
	const struct gov_group *g;

	if (group < 0 || group >= gv->ngroups || !(dt > 0))
		return 0;
	g = &gv->g[group];
	if (!g->measured && !g->always)
		return fmax(2 * gv->budget * dt, gv->budget) / hit_cost(gv, g);
	return 2 * (g->util_all + gv->budget) * dt / hit_cost(gv, g);
}

bool governor__guard(const struct governor *gv, int group, double hits, double dt)
{
	if (group < 0 || group >= gv->ngroups || !(dt > 0) || gv->exact || gv->g[group].always)
		return false;
	return hits > governor__guard_hits(gv, group, dt);
}
