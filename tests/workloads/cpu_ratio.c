// SPDX-License-Identifier: MIT
/* CPU time split 1:2:3 across leaf_a, leaf_b, leaf_c, each called from its own parent
 * (parent_a, parent_b, parent_c). Usage: cpu_ratio [SECONDS]. */
#include "wl_common.h"

#define NOINLINE __attribute__((noinline))

NOINLINE void leaf_a(void)
{
	WL_SPIN(100);
}

NOINLINE void leaf_b(void)
{
	WL_SPIN(200);
}

NOINLINE void leaf_c(void)
{
	WL_SPIN(300);
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
	unsigned long rounds = 0;

	wl_gate();
	end = wl_now() + secs;
	while (wl_now() < end) {
		parent_a();
		parent_b();
		parent_c();
		rounds++;
	}
	printf("cpu_ratio: %lu rounds\n", rounds);
	return 0;
}
