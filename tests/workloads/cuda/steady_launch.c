// SPDX-License-Identifier: MIT
/* A steady launch rate, the case the overhead budget's accuracy is stated for: every
 * tick of a fixed schedule (absolute deadlines, so probe cost does not change the rate)
 * site_a makes 3 cudaLaunchKernel calls and site_b 1, through the real libcudart.
 *   steady_launch [TICKS] [TICKS_PER_SECOND]   (defaults 10000, 2000)
 * Prints: "steady_launch: ticks=N site_a=3N site_b=N late=L" (late: ticks that missed
 * their deadline, i.e. the rate was not held). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

static char host_fn; /* any host address: without a driver the launch fails fast */

NOINLINE static void launch_once(void)
{
	dim3 g = {1, 1, 1}, b = {1, 1, 1};

	(void)cudaLaunchKernel(&host_fn, g, b, NULL, 0, 0);
}

NOINLINE void site_a(void)
{
	launch_once();
	launch_once();
	launch_once();
}

NOINLINE void site_b(void)
{
	launch_once();
}

int main(int argc, char **argv)
{
	long ticks = argc > 1 ? atol(argv[1]) : 10000, late = 0;
	double hz = argc > 2 ? atof(argv[2]) : 2000;
	struct timespec next;
	long period_ns = (long)(1e9 / hz);

	(void)cudaGetLastError(); /* lazy runtime init before the schedule starts */
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (long i = 0; i < ticks; i++) {
		struct timespec now;

		site_a();
		site_b();
		next.tv_nsec += period_ns;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec))
			late++;
		else
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	printf("steady_launch: ticks=%ld site_a=%ld site_b=%ld late=%ld\n", ticks, 3 * ticks, ticks, late);
	return 0;
}
