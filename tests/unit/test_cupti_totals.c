// SPDX-License-Identifier: MIT
/* Device time's estimate of a whole recording (cupti_drain.c, cpt_win_totals): the
 * windows' periods, plus the cost measurement's kernels counted once, with no error. The
 * profile's comment gives the interval in two parts (cupti_notes.c): the estimate at
 * either end of CUPTI's cost's range, which must hold the estimate, and the windows'
 * sampling around them. */
#include <math.h>
#include <string.h>

#include "cupti_int.h"
#include "test.h"

/* 10 periods of 1 s, ~105 kernels seen in each at weight 10, CUPTI's cost correcting
 * them by 1.05 (1.02-1.10); MEASURED kernels of the cost measurement. */
static void totals(uint64_t measured, struct est_total *k, struct est_total *t)
{
	struct cupti_tracer c;

	memset(&c, 0, sizeof(c));
	for (size_t i = 0; i < 10; i++) {
		struct est_period *p = est_group_period(&c.est, i);
		double n = 100 + (double)(i % 3) * 5;

		est_period_plan(p, 1, 10);
		est_period_add(p, 10, &(struct est_delay){1.05, 1.02, 1.10}, n, (double[3]){n, n * 1000, 0});
	}
	c.measured_kernels = measured;
	c.measured_kernel_ns = measured * 1000;
	cpt_win_totals(&c, k, t);
	est_group_free(&c.est);
}

TEST(measured_kernels_in_every_part)
{
	struct est_total k0, t0, k, t;

	totals(0, &k0, &t0);
	totals(2000, &k, &t);
	CHECK(fabs(k.est - k0.est - 2000) < 1e-6 && fabs(t.est - t0.est - 2e6) < 1e-3);
	/* every end moves by the same count: the interval's parts keep their widths */
	CHECK(fabs((k.sys_lo - k0.sys_lo) - 2000) < 1e-6 && fabs((k.sys_hi - k0.sys_hi) - 2000) < 1e-6);
	CHECK(fabs((k.lo - k0.lo) - 2000) < 1e-6 && fabs((k.hi - k0.hi) - 2000) < 1e-6);
	CHECK(k.lo <= k.sys_lo && k.sys_lo <= k.est && k.est <= k.sys_hi && k.sys_hi <= k.hi);
	CHECK(t.lo <= t.sys_lo && t.sys_lo <= t.est && t.est <= t.sys_hi && t.sys_hi <= t.hi);
	CHECK(fabs(fmax(k.sys_lo - k.lo, k.hi - k.sys_hi) - fmax(k0.sys_lo - k0.lo, k0.hi - k0.sys_hi)) < 1e-6);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(measured_kernels_in_every_part);
	return T_END();
}
