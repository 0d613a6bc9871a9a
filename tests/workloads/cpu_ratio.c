// SPDX-License-Identifier: MIT
/* CPU time split 1:2:3 across leaf_a, leaf_b, leaf_c, each called from its own parent
 * (parent_a, parent_b, parent_c). Usage: cpu_ratio [SECONDS].
 *
 * Each round's length varies (0.5-1.5 times, the split within it kept): a round of a fixed
 * length near a whole fraction of the sampling period (0.66 ms here against 2.004 ms at
 * 499 Hz) locks a profiler that samples each thread on its own CPU clock, as perf and
 * gpubpf do, onto the same phase of it, and the shares alias (12% for a 16.7% share seen
 * once in a make test). */
#include "wl_common.h"

#define NOINLINE __attribute__((noinline))

static unsigned long scale = 100; /* this round's units per share */

NOINLINE void leaf_a(void)
{
	WL_SPIN(scale);
}

NOINLINE void leaf_b(void)
{
	WL_SPIN(2 * scale);
}

NOINLINE void leaf_c(void)
{
	WL_SPIN(3 * scale);
}

NOINLINE void parent_a(void)
{
	leaf_a();
}

NOINLINE void parent_b(void)
{
	leaf_b();
}

NOINLINE void parent_c(void)
{
	leaf_c();
}

int main(int argc, char **argv)
{
	double secs = wl_seconds(argc, argv), end;
	unsigned long rounds = 0, rng = 0x9e3779b97f4a7c15UL;

	wl_gate();
	end = wl_now() + secs;
	while (wl_now() < end) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		scale = 50 + rng % 101;
		parent_a();
		parent_b();
		parent_c();
		rounds++;
	}
	printf("cpu_ratio: %lu rounds\n", rounds);
	return 0;
}
