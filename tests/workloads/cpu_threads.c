// SPDX-License-Identifier: MIT
/* Two named threads, each in its own function: thread_one spins in spin_one,
 * thread_two in spin_two. Usage: cpu_threads [SECONDS]. */
#define _GNU_SOURCE
#include <pthread.h>

#include "wl_common.h"

#define NOINLINE __attribute__((noinline))

static double end_time;

NOINLINE void spin_one(void)
{
	WL_SPIN(100);
}

NOINLINE void spin_two(void)
{
	WL_SPIN(100);
}

static void *thread_one(void *arg)
{
	pthread_setname_np(pthread_self(), "wl-one");
	while (wl_now() < end_time)
		spin_one();
	return arg;
}

static void *thread_two(void *arg)
{
	pthread_setname_np(pthread_self(), "wl-two");
	while (wl_now() < end_time)
		spin_two();
	return arg;
}

int main(int argc, char **argv)
{
	pthread_t a, b;

	wl_gate();
	end_time = wl_now() + wl_seconds(argc, argv);
	if (pthread_create(&a, NULL, thread_one, NULL) || pthread_create(&b, NULL, thread_two, NULL))
		return 1;
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("cpu_threads: done\n");
	return 0;
}
