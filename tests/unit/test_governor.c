// SPDX-License-Identifier: MIT
#include <math.h>

#include "governor.h"
#include "rng.h"
#include "test.h"

#define NEAR(a, b, eps) (fabs((a) - (b)) <= (eps))

static struct governor gov(void)
{
	struct governor g = {
	    .budget = 0.01,
	    .period = 1,
	    .cost_per_hit = 5e-6,
	    .cpu_cost = 0.0005,
	    .min_duty = 0.002,
	    .min_slot = 0.002,
	    .ngroups = 4,
	    .g = {{.name = "launch"}, {.name = "copy"}, {.name = "sync"}, {.name = "alloc"}},
	};
	return g;
}

/* Group I of G as device time whose cost the library measured: UTIL of a thread that only
 * launches while on, FIXED seconds a window (CUPTI set up and torn down). */
static void device_group(struct governor *g, int i, double util, double fixed)
{
	g->g[i].name = "device time";
	g->g[i].measured = true;
	g->g[i].util = g->g[i].util_all = util;
	g->g[i].fixed = fixed;
}

/* Rare groups fit whole; the hot one takes what is left, and the sum is the budget. */
TEST(hot_and_rare)
{
	struct governor g = gov();

	/* a window of 1 s: the busiest thread spent 0.5 s in launch probes, 500 us in copies */
	governor__observe(&g, 0, 0.5, 0.5, 100000, 1);
	governor__observe(&g, 1, 0.0005, 0.0005, 100, 1);
	governor__observe(&g, 2, 0.00005, 0.00005, 10, 1);
	governor__observe(&g, 3, 0.000005, 0.000005, 1, 1);
	governor__plan(&g);
	CHECK(g.g[1].duty == 1 && g.g[2].duty == 1 && g.g[3].duty == 1);
	/* left = 0.01 - 0.0005 - 0.000555 = 0.008945; duty = left / 0.5 */
	CHECK(NEAR(g.g[0].duty, 0.008945 / 0.5, 1e-9));
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
	/* the cost of a hit is measured: all threads' time over their hits */
	CHECK(NEAR(g.g[0].hit_cost, 5e-6, 1e-12));
}

/* Two hot groups share the remainder equally in cost, not in duty. */
TEST(two_hot_groups)
{
	struct governor g = gov();

	g.ngroups = 2;
	g.min_duty = 0.0001;
	governor__observe(&g, 0, 1.0, 1.0, 200000, 1);
	governor__observe(&g, 1, 0.1, 0.1, 20000, 1);
	governor__plan(&g);
	CHECK(NEAR(g.g[0].duty * 1.0, g.g[1].duty * 0.1, 1e-12));
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
}

/* A window's fixed cost (switches, first hit) comes out of the share, and the planned
 * overhead counts it. */
TEST(window_costs)
{
	struct governor g = gov();

	g.ngroups = 1;
	g.window_cost = 0.0004;
	g.first_hit = 0.0001; /* 0.5 ms a window, one window a second: 0.05% */
	governor__observe(&g, 0, 0.5, 0.5, 100000, 1);
	governor__plan(&g);
	CHECK(NEAR(governor__window_cost(&g), 0.0005, 1e-12));
	/* two windows a period (strata, below): 1 ms of the share */
	CHECK(g.g[0].strata == 2);
	CHECK(NEAR(g.g[0].duty, (0.0095 - 2 * 0.0005) / 0.5, 1e-9));
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
}

/* The probes in with no window open (attached ahead of it, not yet out after it): a cost
 * per window, measured, out of the share before the duty; a lower one weighs half. */
TEST(closed_gate_cost)
{
	struct governor g = gov();

	g.ngroups = 1;
	g.window_cost = 0.0004;
	g.first_hit = 0.0001;
	governor__observe(&g, 0, 0.5, 0.5, 100000, 1);
	governor__observe_closed(&g, 0, 0.002);
	governor__plan(&g);
	CHECK(NEAR(g.g[0].closed, 0.002, 1e-12));
	CHECK(NEAR(g.g[0].duty, (0.0095 - 0.0005 - 0.002) / 0.5, 1e-9));
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
	/* a dearer one at once, a cheaper one by half */
	governor__observe_closed(&g, 0, 0.004);
	CHECK(NEAR(g.g[0].closed, 0.004, 1e-12));
	governor__observe_closed(&g, 0, 0.0002);
	CHECK(NEAR(g.g[0].closed, 0.0021, 1e-12));
	/* nonsense is ignored */
	governor__observe_closed(&g, 0, NAN);
	governor__observe_closed(&g, 7, 1);
	CHECK(NEAR(g.g[0].closed, 0.0021, 1e-12));
	/* past the share: the floor, and the overhead says so */
	governor__observe_closed(&g, 0, 0.02);
	governor__plan(&g);
	CHECK(g.g[0].duty == g.min_duty);
	CHECK(governor__overhead(&g) > 0.02);
}

/* The strata of one hot group whose probes take UTIL of its thread, periods of PERIOD
 * seconds; its duty into *DUTY (may be NULL). */
static int one_group_strata(double period, double util, double *duty)
{
	struct governor g = gov();

	g.ngroups = 1;
	g.period = period;
	governor__observe(&g, 0, util, util, 1000, 1);
	governor__plan(&g);
	if (duty)
		*duty = g.g[0].duty;
	return g.g[0].strata;
}

/* A hot group's windows: one slot in each equal part of the period (strata), as many as
 * keep each window GOV_STRATUM_MIN_WINDOW long and each part GOV_STRATUM_MIN_PART while
 * their fixed costs take at most a quarter of the share; the planned overhead counts every
 * window. */
TEST(strata)
{
	struct governor g = gov();
	double duty;

	g.ngroups = 1;
	g.first_hit = 2e-6;
	governor__observe(&g, 0, 0.4, 0.4, 100000, 1);
	governor__plan(&g);
	/* share 0.95%: 23.7 ms of windows a 1 s period, four of 5.9 ms */
	CHECK(g.g[0].strata == 4);
	CHECK(NEAR(g.g[0].duty, (0.0095 - 4 * 2e-6) / 0.4, 1e-9));
	CHECK(g.g[0].duty * g.period / g.g[0].strata >= GOV_STRATUM_MIN_WINDOW);
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
	/* probes in with no window open 1 ms a window: two windows take 2 ms of 9.5 */
	governor__observe_closed(&g, 0, 0.001);
	governor__plan(&g);
	CHECK(g.g[0].strata == 2);
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
	/* 3 ms: more windows would take more than a quarter of the share */
	governor__observe_closed(&g, 0, 0.003);
	governor__observe_closed(&g, 0, 0.003);
	governor__plan(&g);
	CHECK(g.g[0].strata == 1);
	/* a short period: windows of 2.4 ms already, one */
	CHECK(one_group_strata(0.1, 0.4, NULL) == 1);
	/* long windows in a 0.2 s period: no part under GOV_STRATUM_MIN_PART, two */
	CHECK(one_group_strata(0.2, 0.012, &duty) == 2 && duty > 0.5);
	/* device time (a window's set-up of its own), groups whole, --exact: one */
	g = gov();
	g.ngroups = 2;
	governor__observe(&g, 0, 0.0001, 0.0001, 20, 1);
	device_group(&g, 1, 0.3, 0.00001);
	governor__plan(&g);
	CHECK(g.g[0].duty == 1 && g.g[0].strata == 1);
	CHECK(g.g[1].duty < 1 && g.g[1].strata == 1);
	g.exact = true;
	governor__plan(&g);
	CHECK(g.g[0].strata == 1 && g.g[1].strata == 1);
}

/* Windows in parts cost gpubpf's own CPU: three hot groups in 4 parts each (12 windows a
 * second) at 0.35 ms of it a window would take 0.42% of a core; the parts are halved, the
 * group with the most first, until the windows take at most GOV_OWN_WINDOWS_MAX, and the
 * duties planned again within each group's share (the overhead still the budget). */
TEST(parts_held_for_own_cpu)
{
	struct governor g = gov();
	double n = 0, duty0;

	g.ngroups = 3;
	g.first_hit = 2e-6;
	for (int i = 0; i < 3; i++)
		governor__observe(&g, i, 0.13, 0.13, 100000, 1);
	governor__plan(&g);
	CHECK(g.g[0].strata == 4 && g.g[1].strata == 4 && g.g[2].strata == 4);
	CHECK(!g.parts_held);
	duty0 = g.g[0].duty;
	/* measured cheap: nothing held */
	g.own_window = 0.0001;
	governor__plan(&g);
	CHECK(g.g[0].strata == 4 && g.g[1].strata == 4 && g.g[2].strata == 4 && !g.parts_held);
	g.own_window = 0.00035;
	governor__plan(&g);
	CHECK(g.parts_held);
	for (int i = 0; i < 3; i++) {
		CHECK(g.g[i].strata >= 1 && g.g[i].strata <= 2);
		n += g.g[i].strata;
	}
	CHECK(n * g.own_window / g.period <= GOV_OWN_WINDOWS_MAX);
	/* ... as many as fit: a held group's parts doubled again would be over */
	for (int i = 0; i < 3; i++)
		CHECK(g.g[i].strata == 4 || (n + g.g[i].strata) * g.own_window / g.period > GOV_OWN_WINDOWS_MAX);
	/* fewer fixed costs a period: each held group's duty a little longer, the plan on budget */
	for (int i = 0; i < 3; i++)
		CHECK(g.g[i].strata == 4 || g.g[i].duty > duty0);
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
	/* a window dearer than the whole allowance: one a period, never fewer */
	g.own_window = 0.01;
	governor__plan(&g);
	CHECK(g.g[0].strata == 1 && g.g[1].strata == 1 && g.g[2].strata == 1 && g.parts_held);
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
}

/* Everything cheap: all attached, overhead under budget. */
TEST(all_fit)
{
	struct governor g = gov();

	for (int i = 0; i < 4; i++)
		governor__observe(&g, i, 0.0001, 0.0001, 20, 1);
	governor__plan(&g);
	for (int i = 0; i < 4; i++)
		CHECK(g.g[i].duty == 1);
	CHECK(governor__overhead(&g) < g.budget);
}

/* A hot group never drops below the floor, even when the budget is gone. */
TEST(floor_and_exhausted_budget)
{
	struct governor g = gov();

	g.budget = 0.0001; /* less than CPU sampling alone */
	governor__observe(&g, 0, 1, 1, 1e6, 1);
	governor__plan(&g);
	CHECK(NEAR(g.g[0].duty, g.min_duty, 1e-12));
	CHECK(g.floored);
	/* within the budget: not held up */
	g.budget = 0.01;
	governor__plan(&g);
	CHECK(!g.floored);
	/* some budget left after CPU sampling, but less than the floor of a group whose
	 * probes take all of a thread's time */
	g.budget = 0.002;
	governor__plan(&g);
	CHECK(NEAR(g.g[0].duty, g.min_duty, 1e-12));
	CHECK(g.floored);
}

/* CPU sampling takes the whole budget (a 0.05% budget at 99 Hz of 12 us samples): device
 * time, whose window costs milliseconds to set up, comes as seldom as it can, not once a
 * period (it did: 1.27% of each period where 0.05% was asked, and "planned 1.62%"). */
TEST(device_group_no_budget_left)
{
	struct governor g = gov();

	g.budget = 0.0005;
	g.cpu_cost = 0.0012;
	g.ngroups = 2;
	governor__observe(&g, 0, 0.5, 0.5, 100000, 1);
	device_group(&g, 1, 0.4, 12.7e-3);
	governor__plan(&g);
	CHECK_INT(g.g[1].every, GOV_EVERY_MAX);
	CHECK(NEAR(g.g[1].duty, g.min_duty, 1e-12));
	CHECK(g.floored);
	CHECK(governor__overhead(&g) < g.cpu_cost + 2 * g.min_duty * 0.5 + 12.7e-3 / GOV_EVERY_MAX + 1e-9);
}

/* Unknown costs: attached (the guard watches); exact mode attaches everything. */
TEST(unknown_and_exact)
{
	struct governor g = gov();

	governor__plan(&g);
	for (int i = 0; i < 4; i++)
		CHECK(g.g[i].duty == 1);
	g.exact = true;
	governor__observe(&g, 0, 1, 1, 1e6, 1);
	governor__plan(&g);
	for (int i = 0; i < 4; i++)
		CHECK(g.g[i].duty == 1);
}

/* Smoothing: up at once, down by halves; bad input ignored. */
TEST(observe_smoothing)
{
	struct governor g = gov();

	governor__observe(&g, 0, 0.1, 0.1, 1000, 0.5); /* 20% of the thread */
	CHECK(NEAR(g.g[0].util, 0.2, 1e-12));
	governor__observe(&g, 0, 0.1, 0.1, 1000, 1); /* 10%, averaged with 20% */
	CHECK(NEAR(g.g[0].util, 0.15, 1e-12));
	governor__observe(&g, 0, 0, 0, 0, 1); /* a cold window: halves */
	CHECK(NEAR(g.g[0].util, 0.075, 1e-12));
	CHECK(NEAR(g.g[0].hit_cost, 1e-4, 1e-12));   /* no hits: the last measure stays */
	governor__observe(&g, 0, 0.3, 0.6, 1000, 1); /* hot again: taken at once */
	CHECK(NEAR(g.g[0].util, 0.3, 1e-12) && NEAR(g.g[0].util_all, 0.6, 1e-12));
	governor__observe(&g, 0, 5, 5, 1, 3); /* more than all of a thread: 1 */
	CHECK(NEAR(g.g[0].util, 1, 1e-12));
	governor__observe(&g, 0, 5, 5, 5, 0); /* no time: ignored */
	governor__observe(&g, 9, 5, 5, 5, 1); /* no such group: ignored */
	CHECK(NEAR(g.g[0].util, 1, 1e-12));
}

/* The guard: a group planned idle that turns hot is caught; after it fired, the group is
 * planned saturated; a hot group in its planned window is left alone. */
TEST(guard_and_saturation)
{
	struct governor g = gov();

	g.ngroups = 2;
	/* not measured yet: one second's budget (1% at 5 us a hit: 2000 hits) */
	CHECK(NEAR(governor__guard_hits(&g, 0, 0.05), 2000, 1e-9));
	CHECK(!governor__guard(&g, 0, 1999, 0.001) && governor__guard(&g, 0, 2001, 0.001));
	governor__observe(&g, 0, 0, 0, 0, 1);	       /* idle when measured */
	governor__observe(&g, 1, 0.8, 0.8, 160000, 1); /* 80% of a thread */
	governor__plan(&g);
	CHECK(g.g[0].duty == 1);
	/* 10 ms later group 0 is hot: 1500 hits (7.5 ms of probes) against 2 * 1% * 10 ms */
	CHECK(governor__guard(&g, 0, 1500, 0.01));
	CHECK(!governor__guard(&g, 0, 10, 0.01));
	CHECK(NEAR(governor__guard_hits(&g, 0, 0.01), 40, 1e-9));
	/* group 1 at its known cost, saturated in its window: allowed */
	CHECK(!governor__guard(&g, 1, 1600, 0.01));
	governor__saturated(&g, 0);
	governor__plan(&g);
	CHECK(g.g[0].util == 1 && g.g[0].duty < 0.01);
	/* the next window's cost is taken whole, not halved from the guard's 1 (a launch loop's
	 * 0.31 was planned at 0.66); then lower ones weigh half again */
	governor__observe(&g, 0, 0.003, 0.004, 600, 0.01);
	CHECK(NEAR(g.g[0].util, 0.3, 1e-12) && NEAR(g.g[0].util_all, 0.4, 1e-12) && !g.g[0].saturated);
	governor__observe(&g, 0, 0.002, 0.002, 400, 0.01);
	CHECK(NEAR(g.g[0].util, 0.25, 1e-12) && NEAR(g.g[0].util_all, 0.3, 1e-12));
	/* exact mode and always-attached groups are never guarded */
	g.g[1].always = true;
	CHECK(!governor__guard(&g, 1, 1e9, 0.01));
	g.exact = true;
	CHECK(!governor__guard(&g, 0, 1e9, 0.01));
}

/* Device time: a group of its own with its own window cost (the library's switches, not
 * the probes'), planned from the worst case it costs a thread while on; before a library
 * measured it, it takes nothing from the others. */
TEST(device_group_fixed_cost)
{
	struct governor g = gov();

	g.ngroups = 2;
	g.window_cost = 100e-6;
	g.g[1].name = "device time";
	g.g[1].always = true; /* no library yet: costs nothing, takes nothing */
	governor__observe(&g, 0, 0.5, 0.5, 100000, 1);
	governor__plan(&g);
	CHECK(g.g[0].strata == 2); /* two windows of 9 ms a period */
	CHECK(NEAR(g.g[0].duty, (0.0095 - 2 * 100e-6) / 0.5, 1e-9));
	/* measured: CUPTI costs 40% of a thread that only launches; 20 us a window */
	g.g[1].always = false;
	device_group(&g, 1, 0.4, 20e-6);
	governor__plan(&g);
	CHECK(NEAR(g.g[0].duty, (0.0095 / 2 - 100e-6) / 0.5, 1e-9));
	CHECK(NEAR(g.g[1].duty, (0.0095 / 2 - 20e-6) / 0.4, 1e-9));
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
	CHECK_INT(g.g[1].every, 1);
	CHECK_INT(g.g[0].every, 1);
}

/* CUPTI set up and torn down for each window (15 ms on an H100): more than half the
 * device group's share of a 1 s period, so its windows come once in EVERY periods (a
 * power of two), and the budget holds; at most GOV_EVERY_MAX. */
TEST(device_group_every)
{
	struct governor g = gov();
	double share = 0.0095 / 2;

	g.ngroups = 2;
	g.window_cost = 100e-6;
	governor__observe(&g, 0, 0.5, 0.5, 100000, 1);
	device_group(&g, 1, 0.4, 15e-3);
	governor__plan(&g);
	/* 2 * 15 ms / (0.475% of 1 s) = 6.3: 8, the next power of two */
	CHECK_INT(g.g[1].every, 8);
	CHECK(2 * 15e-3 / (share * g.period) > 4);
	CHECK(NEAR(g.g[1].duty, (share - 15e-3 / g.period / g.g[1].every) / 0.4, 1e-9));
	CHECK(g.g[1].duty > 0.002);
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
	/* a second of set-up: the most periods, and the floor */
	g.g[1].fixed = 1;
	governor__plan(&g);
	CHECK_INT(g.g[1].every, GOV_EVERY_MAX);
}

/* Any budget and any costs, drawn at random: a plan its floors do not hold up stays within
 * the budget, and device time's fixed cost a window never takes more of a period than
 * half the budget or, where that cannot be, one window in GOV_EVERY_MAX periods (with CPU
 * sampling over a 0.05% budget, its windows came every period: 1.27% of each). */
TEST(plan_within_budget_or_its_floors)
{
	int floored = 0, strata = 0;

	t_rng_state = 0x9e3779b97f4a7c15ull; /* the draws this test has always made */

	for (int it = 0; it < 20000; it++) {
		struct governor g = gov();
		double over, fixed_part;

		g.budget = pow(10, -4 + 3 * t_uniform()); /* 0.01% to 10% */
		g.cpu_cost = 0.006 * t_uniform() * t_uniform();
		g.period = 0.1 + 0.9 * t_uniform();
		g.window_cost = 1e-4 * t_uniform() * t_uniform();
		g.ngroups = 4;
		governor__observe(&g, 0, t_uniform(), t_uniform(), 1e5, 1);
		governor__observe_closed(&g, 0, 0.004 * t_uniform() * t_uniform());
		governor__observe(&g, 1, 0.01 * t_uniform(), 0.01 * t_uniform(), 100, 1);
		g.g[2].always = true;
		g.g[2].util = g.g[2].util_all = 0.0005 * t_uniform();
		device_group(&g, 3, 0.05 + 0.9 * t_uniform(), 0.02 * t_uniform() + 1e-5);
		governor__spent_once(&g, t_uniform() < 0.5 ? 0.05 * t_uniform() : 0);
		governor__plan(&g);
		over = governor__overhead(&g);
		floored += g.floored;
		if (!g.floored && !(over <= g.budget * (1 + 1e-9))) {
			CHECK(over <= g.budget * (1 + 1e-9));
			return;
		}
		/* strata: a power of two, windows no shorter than their floor, their fixed
		 * costs a quarter of the budget at most */
		if (g.g[0].strata > 1 &&
		    !((g.g[0].strata & (g.g[0].strata - 1)) == 0 && g.g[0].strata <= GOV_STRATA_MAX &&
		      g.g[0].duty * g.period / g.g[0].strata >= GOV_STRATUM_MIN_WINDOW * (1 - 1e-9) &&
		      g.period / g.g[0].strata >= GOV_STRATUM_MIN_PART * (1 - 1e-9) &&
		      g.g[0].strata * (governor__window_cost(&g) + g.g[0].closed) / g.period <=
			  g.budget / 4 * (1 + 1e-9))) {
			CHECK(!"strata within their bounds");
			return;
		}
		strata += g.g[0].strata > 1;
		fixed_part = g.g[3].duty < 1 ? g.g[3].fixed / g.period / g.g[3].every : 0;
		if (!(fixed_part <= fmax(g.budget / 2, g.g[3].fixed / g.period / GOV_EVERY_MAX) * (1 + 1e-9))) {
			CHECK(fixed_part <= fmax(g.budget / 2, g.g[3].fixed / g.period / GOV_EVERY_MAX));
			return;
		}
	}
	/* both kinds of plan were drawn, and plans with strata */
	CHECK(floored > 1000 && floored < 19000);
	CHECK(strata > 1000);
}

/* What device time spends once (CUPTI's set-up at attach, its cost measurement: tens of
 * milliseconds) is a debt: each plan keeps back what repays it within a period, at most
 * half of the budget left after CPU sampling, and the windows get the rest until it is
 * repaid. The planned overhead counts what is kept back, and stays the budget. */
TEST(one_off_cost_repaid_from_the_budget)
{
	struct governor g = gov();
	double left = 0.01 - 0.0005, full;

	g.ngroups = 1;
	governor__observe(&g, 0, 0.5, 0.5, 100000, 1);
	governor__plan(&g);
	full = g.g[0].duty;
	CHECK(NEAR(full, left / 0.5, 1e-9));
	CHECK(g.repay == 0);
	/* 4 ms: repaid within one period, from less than half of what is left */
	governor__spent_once(&g, 0.004);
	governor__plan(&g);
	CHECK(NEAR(g.repay, 0.004, 1e-12));
	CHECK(NEAR(g.g[0].duty, (left - 0.004) / 0.5, 1e-9));
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
	governor__repay(&g, g.period);
	CHECK(NEAR(governor__debt(&g), 0, 1e-12));
	governor__plan(&g);
	CHECK(g.repay == 0);
	CHECK(NEAR(g.g[0].duty, full, 1e-12));
	/* 100 ms more: half of what is left each period, 21 periods and a bit */
	governor__spent_once(&g, 0.104);
	int periods = 0;
	for (; governor__debt(&g) > 0 && periods < 100; periods++) {
		governor__plan(&g);
		CHECK(g.repay <= left / 2 + 1e-12);
		CHECK(NEAR(g.g[0].duty, (left - g.repay) / 0.5, 1e-9));
		CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
		governor__repay(&g, g.period);
	}
	CHECK_INT(periods, 22);
	CHECK(NEAR(g.repaid, 0.104, 1e-12));
	governor__plan(&g);
	CHECK(NEAR(g.g[0].duty, full, 1e-12));
	/* an estimate that shrinks (calls counted while a window was open) owes nothing more,
	 * and what was repaid stays repaid */
	governor__spent_once(&g, 0.1);
	CHECK(governor__debt(&g) == 0);
	governor__spent_once(&g, 0.105);
	CHECK(NEAR(governor__debt(&g), 0.001, 1e-12));
	/* --exact keeps nothing back: it has no budget */
	g.exact = true;
	governor__plan(&g);
	CHECK(g.repay == 0);
}

/* What a period's windowed probes spent over their share of the budget, as measured, is a
 * debt like what was spent once: the first window of a job just started read a launch
 * loop's cost at 18% of its thread against 24-29% later, and the rest of that period,
 * planned from it, spent 10-20 ms of a 1 s period where 9 ms were its share (a 4 s job's
 * overhead read 1.21% at a 1% budget). The share is the budget less the plan's other
 * parts; a period under it banks nothing; a plan held over the budget by its floors, or
 * --exact, owes nothing. */
TEST(overspent_period_repaid)
{
	struct governor g = gov();
	double share;

	g.ngroups = 3;
	governor__observe(&g, 0, 0.25, 0.25, 100000, 1);
	g.g[1].always = true; /* allocations: their cost is not the windowed probes' */
	g.g[1].util = g.g[1].util_all = 0.001;
	g.g[1].measured = true;
	device_group(&g, 2, 0.5, 0.001); /* device time: past N, not in SPENT */
	governor__plan(&g);
	share = g.g[0].duty * 0.25 + (g.g[0].duty < 1 ? governor__window_cost(&g) / g.period : 0);
	CHECK(share > 0.001 && share < 0.01);
	/* within the share: nothing owed, whatever the period's length */
	CHECK(governor__overspent(&g, 2, 0.99 * share * 0.5, 0.5) == 0);
	CHECK(governor__overspent(&g, 2, 0, 1) == 0);
	CHECK(g.over_n == 0 && governor__debt(&g) == 0);
	/* 12 ms where the share was less: the difference owed */
	CHECK(NEAR(governor__overspent(&g, 2, share + 0.012, 1), 0.012, 1e-12));
	CHECK(g.over_n == 1 && NEAR(governor__debt(&g), 0.012, 1e-12));
	/* kept back from the next periods at most half of the budget after CPU sampling,
	 * the plan still the budget in all */
	governor__plan(&g);
	CHECK(g.repay > 0 && g.repay <= (0.01 - 0.0005) / 2 + 1e-12);
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
	/* a period that spent the smaller share it was left owes nothing more */
	share = g.g[0].duty * 0.25 + governor__window_cost(&g) / g.period;
	CHECK(governor__overspent(&g, 2, share, 1) == 0);
	governor__repay(&g, 1);
	governor__plan(&g);
	for (int i = 0; i < 10 && governor__debt(&g) > 0; i++) {
		governor__repay(&g, 1);
		governor__plan(&g);
	}
	CHECK(governor__debt(&g) == 0 && NEAR(g.repaid, 0.012, 1e-12));
	CHECK(g.repay == 0);
	/* with what was spent once, both repaid */
	governor__spent_once(&g, 0.002);
	CHECK(NEAR(governor__debt(&g), 0.002, 1e-12));
	/* a period under banks nothing: the next one over owes all its excess */
	share = g.g[0].duty * 0.25 + governor__window_cost(&g) / g.period;
	CHECK(governor__overspent(&g, 2, 0, 1) == 0);
	CHECK(NEAR(governor__overspent(&g, 2, share + 0.001, 1), 0.001, 1e-12));
	/* a plan held over the budget by its floors owes nothing (it says so); nor --exact */
	g.floored = true;
	CHECK(governor__overspent(&g, 2, 1, 1) == 0);
	g.floored = false;
	g.exact = true;
	CHECK(governor__overspent(&g, 2, 1, 1) == 0);
	CHECK(g.over_n == 2);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(hot_and_rare);
	RUN(two_hot_groups);
	RUN(window_costs);
	RUN(strata);
	RUN(closed_gate_cost);
	RUN(all_fit);
	RUN(floor_and_exhausted_budget);
	RUN(unknown_and_exact);
	RUN(observe_smoothing);
	RUN(guard_and_saturation);
	RUN(device_group_fixed_cost);
	RUN(device_group_every);
	RUN(device_group_no_budget_left);
	RUN(plan_within_budget_or_its_floors);
	RUN(one_off_cost_repaid_from_the_budget);
	RUN(overspent_period_repaid);
	RUN(parts_held_for_own_cpu);
	return T_END();
}
