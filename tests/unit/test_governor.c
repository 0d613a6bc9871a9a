// SPDX-License-Identifier: MIT
#include <math.h>

#include "governor.h"
#include "test.h"

#define NEAR(a, b, eps) (fabs((a) - (b)) <= (eps))

static struct governor gov(void)
{
	struct governor g = {
		.budget = 0.01, .cost_per_hit = 5e-6, .cpu_cost = 0.0005, .min_duty = 0.005,
		.probe_duty = 0.02, .ngroups = 4,
		.g = {{.name = "launch"}, {.name = "copy"}, {.name = "sync"}, {.name = "alloc"}},
	};
	return g;
}

/* Rare groups fit whole; the hot one takes what is left, and the sum is the budget. */
TEST(hot_and_rare)
{
	struct governor g = gov();

	governor__observe(&g, 0, 100000, 1); /* 100k launches/s: 50% of a thread exact */
	governor__observe(&g, 1, 100, 1);
	governor__observe(&g, 2, 10, 1);
	governor__observe(&g, 3, 1, 1);
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
	g.min_duty = 0.0001; /* the floor is tested below; here the shares decide */
	governor__observe(&g, 0, 200000, 1); /* cost rate 1.0 */
	governor__observe(&g, 1, 20000, 1);  /* cost rate 0.1 */
	governor__plan(&g);
	CHECK(NEAR(g.g[0].duty * 1.0, g.g[1].duty * 0.1, 1e-12));
	CHECK(NEAR(governor__overhead(&g), 0.01, 1e-9));
}

/* Everything cheap: all attached, overhead under budget. */
TEST(all_fit)
{
	struct governor g = gov();

	for (int i = 0; i < 4; i++)
		governor__observe(&g, i, 50, 1);
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
	governor__observe(&g, 0, 1e6, 1);
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
	governor__observe(&g, 0, 1e6, 1);
	governor__plan(&g);
	for (int i = 0; i < 4; i++)
		CHECK(g.g[i].duty == 1);
}

/* Smoothing, scaling, and bad input ignored. */
TEST(observe_and_scale)
{
	struct governor g = gov();

	governor__observe(&g, 0, 1000, 0.5); /* 2000/s */
	CHECK(NEAR(g.g[0].rate, 2000, 1e-9));
	governor__observe(&g, 0, 1000, 1); /* 1000/s, averaged with 2000 */
	CHECK(NEAR(g.g[0].rate, 1500, 1e-9));
	governor__observe(&g, 0, 5, 0);   /* no time attached: ignored */
	governor__observe(&g, 9, 5, 1);   /* no such group: ignored */
	CHECK(NEAR(g.g[0].rate, 1500, 1e-9));
	CHECK(NEAR(governor__scale(0.1, 1.0), 10, 1e-12));
	CHECK(NEAR(governor__scale(1.0, 1.0), 1, 1e-12));
	CHECK(NEAR(governor__scale(0, 1.0), 1, 1e-12));
	/* a scaled window count estimates the whole: 37 hits in 2% of 1 s at 1850/s */
	CHECK(NEAR(37 * governor__scale(0.02, 1.0), 1850, 1e-9));
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
	return T_END();
}
