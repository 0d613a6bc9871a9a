// SPDX-License-Identifier: MIT
/* A fixed amount of CPU work (for wall-time benchmarks): ROUNDS rounds of the same
 * 1:2:3 split as cpu_ratio. Prints the elapsed seconds. Usage: cpu_fixed [ROUNDS]. */
#include "wl_common.h"

#define NOINLINE __attribute__((noinline))

NOINLINE void fixed_a(void)
{
	WL_SPIN(100);
}

NOINLINE void fixed_b(void)
{
	WL_SPIN(200);
}

NOINLINE void fixed_c(void)
{
	WL_SPIN(300);
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 3000;
	double t0;

	wl_gate();
	t0 = wl_now();
	for (long i = 0; i < rounds; i++) {
		fixed_a();
		fixed_b();
		fixed_c();
	}
	printf("cpu_fixed: %ld rounds in %.3f s\n", rounds, wl_now() - t0);
	return 0;
}
