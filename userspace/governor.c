// SPDX-License-Identifier: MIT
#include <math.h>

#include "governor.h"

static double cost_rate(const struct governor *gv, const struct gov_group *g)
{
	return g->rate * gv->cost_per_hit;
}

void governor__plan(struct governor *gv)
{
	double left = gv->budget - gv->cpu_cost;
	bool done[GOV_MAX_GROUPS] = {false};
	int open = 0;

	if (left < 0)
		left = 0;
	for (int i = 0; i < gv->ngroups; i++) {
		struct gov_group *g = &gv->g[i];

		if (gv->exact || g->always) {
			g->duty = 1;
			done[i] = true;
			if (!gv->exact)
				left -= cost_rate(gv, g);
		} else if (!g->measured) {
			/* Unknown rate: a short window measures it without risking the budget. */
			g->duty = gv->probe_duty;
			done[i] = true;
		} else {
			open++;
		}
	}
	/* Water-filling: repeatedly give every open group an equal share; a group that
	 * needs less than its share takes d = 1 and returns the rest to the pool. */
	while (open > 0) {
		double share = (left > 0 ? left : 0) / open;
		bool settled = false;

		for (int i = 0; i < gv->ngroups; i++) {
			struct gov_group *g = &gv->g[i];

			if (done[i] || cost_rate(gv, g) > share)
				continue;
			g->duty = 1;
			left -= cost_rate(gv, g);
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
			d = share / cost_rate(gv, g);
			g->duty = d < gv->min_duty ? gv->min_duty : (d > 1 ? 1 : d);
			done[i] = true;
		}
		open = 0;
	}
}

double governor__overhead(const struct governor *gv)
{
	double sum = gv->cpu_cost;

	for (int i = 0; i < gv->ngroups; i++)
		sum += gv->g[i].duty * cost_rate(gv, &gv->g[i]);
	return sum;
}

static double smooth(bool measured, double old, double r)
{
	/* Up at once, down by halves: a job's phases come back, and a group that was hot a
	 * moment ago would cost its full price before the guard caught it again. */
	return measured && r < old ? 0.5 * old + 0.5 * r : r;
}

void governor__observe(struct governor *gv, int group, double busiest, double all, double attached)
{
	struct gov_group *g;
	double r, a;

	if (group < 0 || group >= gv->ngroups || attached <= 0)
		return;
	g = &gv->g[group];
	r = busiest / attached;
	a = all / attached;
	if (g->peak > a) {
		/* The busiest thread's share of the hits, from this interval (all of them
		 * when there were none to tell). */
		r = g->peak * (all > 0 ? busiest / all : 1);
		a = g->peak;
	}
	g->rate = smooth(g->measured, g->rate, r);
	g->all = smooth(g->measured, g->all, a);
	g->peak = 0;
	g->measured = true;
}

void governor__assume_saturated(struct governor *gv, int group)
{
	if (group < 0 || group >= gv->ngroups || gv->cost_per_hit <= 0)
		return;
	if (gv->g[group].peak < 1 / gv->cost_per_hit)
		gv->g[group].peak = 1 / gv->cost_per_hit;
}

double governor__guard_hits(const struct governor *gv, int group, double dt)
{
	const struct gov_group *g;

	if (group < 0 || group >= gv->ngroups || dt <= 0 || gv->cost_per_hit <= 0)
		return 0;
	g = &gv->g[group];
	/* Not measured yet (the first window): one second's budget, however short dt. */
	if (!g->measured && !g->always)
		return fmax(2 * gv->budget * dt, gv->budget) / gv->cost_per_hit;
	return 2 * (g->all * gv->cost_per_hit + gv->budget) * dt / gv->cost_per_hit;
}

bool governor__guard(struct governor *gv, int group, double hits, double dt)
{
	struct gov_group *g;

	if (group < 0 || group >= gv->ngroups || dt <= 0 || gv->exact)
		return false;
	g = &gv->g[group];
	if (hits / dt > g->peak)
		g->peak = hits / dt;
	if (g->always)
		return false;
	return hits > governor__guard_hits(gv, group, dt);
}

double governor__scale(double attached, double elapsed)
{
	if (attached <= 0 || attached >= elapsed)
		return 1;
	return elapsed / attached;
}
