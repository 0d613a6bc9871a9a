// SPDX-License-Identifier: MIT
#include <math.h>

#include "governor.h"
#include "test.h"

#define NEAR(a, b, eps) (fabs((a) - (b)) <= (eps))

static struct governor gov(void)
{
	struct governor g = {
	    .budget = 0.01,
	    .cost_per_hit = 5e-6,
	    .cpu_cost = 0.0005,
	    .min_duty = 0.005,
	    .probe_duty = 0.02,
	    .ngroups = 4,
	    .g = {{.name = "launch"}, {.name = "copy"}, {.name = "sync"}, {.name = "alloc"}},
	};
	return g;
}

/* Rare groups fit whole; the hot one takes what is left, and the sum is the budget. */
TEST(hot_and_rare)
{
	struct governor g = gov();

	governor__observe(&g, 0, 100000, 100000, 1); /* 100k launches/s: 50% of a thread exact */
	governor__observe(&g, 1, 100, 100, 1);
	governor__observe(&g, 2, 10, 10, 1);
	governor__observe(&g, 3, 1, 1, 1);
	governor__plan(&g);
	CHECK(g.g[1].duty == 1 && g.g[2].duty == 1 && g.g[3].duty == 1);
	/* left = 0.01 - 0.0005 - (100+10+1)*5e-6 = 0.008945; duty = left / 0.5 */
	CHECK(NEAR(g.g[0].duty, 0.008945 / 0.5, 1e-9));
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
}

/* Two hot groups share the remainder equally in cost, not in duty. */
TEST(two_hot_groups)
{
	struct governor g = gov();

	g.ngroups = 2;
	g.min_duty = 0.0001;			     /* the floor is tested below; here the shares decide */
	governor__observe(&g, 0, 200000, 200000, 1); /* cost rate 1.0 */
	governor__observe(&g, 1, 20000, 20000, 1);   /* cost rate 0.1 */
	governor__plan(&g);
	CHECK(NEAR(g.g[0].duty * 1.0, g.g[1].duty * 0.1, 1e-12));
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
}

/* Everything cheap: all attached, overhead under budget. */
TEST(all_fit)
{
	struct governor g = gov();

	for (int i = 0; i < 4; i++)
		governor__observe(&g, i, 50, 50, 1);
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
	governor__observe(&g, 0, 1e6, 1e6, 1);
	governor__plan(&g);
	CHECK(NEAR(g.g[0].duty, g.min_duty, 1e-12));
}

/* Unknown rates get the probing window; exact mode attaches everything. */
TEST(unknown_and_exact)
{
	struct governor g = gov();

	governor__plan(&g);
	for (int i = 0; i < 4; i++)
		CHECK(NEAR(g.g[i].duty, g.probe_duty, 1e-12));
	g.exact = true;
	governor__observe(&g, 0, 1e6, 1e6, 1);
	governor__plan(&g);
	for (int i = 0; i < 4; i++)
		CHECK(g.g[i].duty == 1);
}

/* Smoothing, scaling, and bad input ignored. */
TEST(observe_and_scale)
{
	struct governor g = gov();

	governor__observe(&g, 0, 1000, 1000, 0.5); /* 2000/s */
	CHECK(NEAR(g.g[0].rate, 2000, 1e-9));
	governor__observe(&g, 0, 1000, 1000, 1); /* 1000/s, averaged with 2000 */
	CHECK(NEAR(g.g[0].rate, 1500, 1e-9));
	governor__observe(&g, 0, 0, 0, 1); /* a cold window: halves */
	CHECK(NEAR(g.g[0].rate, 750, 1e-9));
	governor__observe(&g, 0, 3000, 3000, 1); /* hot again: taken at once */
	CHECK(NEAR(g.g[0].rate, 3000, 1e-9));
	governor__observe(&g, 0, 1000, 1000, 1);
	CHECK(NEAR(g.g[0].rate, 2000, 1e-9));
	governor__observe(&g, 0, 1000, 1000, 2); /* 500/s */
	CHECK(NEAR(g.g[0].rate, 1250, 1e-9));
	governor__observe(&g, 0, 5, 5, 0); /* no time attached: ignored */
	governor__observe(&g, 9, 5, 5, 1); /* no such group: ignored */
	CHECK(NEAR(g.g[0].rate, 1250, 1e-9));
	CHECK(NEAR(governor__scale(0.1, 1.0), 10, 1e-12));
	CHECK(NEAR(governor__scale(1.0, 1.0), 1, 1e-12));
	CHECK(NEAR(governor__scale(0, 1.0), 1, 1e-12));
	/* a scaled window count estimates the whole: 37 hits in 2% of 1 s at 1850/s */
	CHECK(NEAR(37 * governor__scale(0.02, 1.0), 1850, 1e-9));
}

/* The guard: a group planned at a low rate that turns hot is caught, its peak rate
 * reaches the next plan even though the drain's average over its attached time was
 * diluted by the idle part; a hot group in its planned window is left alone. */
TEST(guard_and_peak)
{
	struct governor g = gov();

	g.ngroups = 2;
	/* not measured yet: one second's budget (1% at 5 us a hit: 2000 hits), however short
	 * the interval */
	CHECK(NEAR(governor__guard_hits(&g, 0, 0.05), 2000, 1e-9));
	CHECK(!governor__guard(&g, 0, 1999, 0.001) && governor__guard(&g, 0, 2001, 0.001));
	g.g[0].peak = 0;			   /* that look's peak is not this test's subject */
	governor__observe(&g, 0, 0, 0, 1);	   /* idle when measured */
	governor__observe(&g, 1, 1.6e5, 1.6e5, 1); /* 160k/s: 80% of a thread */
	governor__plan(&g);
	CHECK(g.g[0].duty == 1);
	/* 10 ms later group 0 is hot: 1500 hits (7.5 ms of probes) against 2 * 1% * 10 ms */
	CHECK(governor__guard(&g, 0, 1500, 0.01));
	/* a quiet group 0 passes: 10 hits, 50 us */
	CHECK(!governor__guard(&g, 0, 10, 0.01));
	/* the allowance BPF is told to wake us at: 2 * 1% of 10 ms at 5 us a hit */
	CHECK(NEAR(governor__guard_hits(&g, 0, 0.01), 40, 1e-9));
	CHECK(!governor__guard(&g, 0, 40, 0.01) && governor__guard(&g, 0, 41, 0.01));
	/* group 1 at its known rate, saturated in its window: allowed */
	CHECK(!governor__guard(&g, 1, 1600, 0.01));
	/* the drain saw 1500 hits over 0.5 s attached (3000/s), but the peak was 150k/s */
	governor__observe(&g, 0, 1500, 1500, 0.5);
	CHECK(NEAR(g.g[0].rate, 150000, 1e-6));
	CHECK(NEAR(g.g[0].all, 150000, 1e-6));
	CHECK(g.g[0].peak == 0);
	/* two threads: the busiest made 3/4 of the hits, so 3/4 of the peak is its own */
	governor__guard(&g, 1, 4000, 0.01); /* 400k/s all threads */
	governor__observe(&g, 1, 750, 1000, 0.1);
	CHECK(NEAR(g.g[1].all, 400000, 1e-6));
	CHECK(NEAR(g.g[1].rate, 300000, 1e-6));
	/* a burst that woke the guard: planned as saturated (1 / 5 us) */
	governor__assume_saturated(&g, 0);
	governor__observe(&g, 0, 10, 10, 1);
	CHECK(NEAR(g.g[0].all, 200000, 1e-6));
	/* always-attached groups and --exact are never guarded */
	g.g[0].always = true;
	CHECK(!governor__guard(&g, 0, 1e6, 0.01));
	g.g[0].always = false;
	g.exact = true;
	CHECK(!governor__guard(&g, 0, 1e6, 0.01));
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(hot_and_rare);
	RUN(two_hot_groups);
	RUN(all_fit);
	RUN(floor_and_exhausted_budget);
	RUN(unknown_and_exact);
	RUN(observe_and_scale);
	RUN(guard_and_peak);
	return T_END();
}
