// SPDX-License-Identifier: MIT
/* A fixed 6:3:1 split of CPU time over three threads, each in its own function (work_a,
 * work_b, work_c): every PERIOD seconds (default 1/99 s, the period of 99 Hz sampling)
 * thread a works 6 parts, b 3 and c 1 of 10 parts of 90% of the period, then each sleeps
 * until the next period. A sampler whose timer ticks with the same period sees the same
 * moment of every period (per-CPU timers alias); one on each thread's own clock does not.
 * Prints each thread's own CPU time, the truth a profile's shares are checked against:
 *   "cpu_split: a=SECONDS b=SECONDS c=SECONDS"
 * With DELAY, the three threads are started DELAY seconds in by another thread (not the
 * main one), as a job's worker threads are started by its own threads after attach.
 * Usage: cpu_split [SECONDS] [PERIOD] [DELAY]. */
#define _GNU_SOURCE
#include <pthread.h>

#include "wl_common.h"

#define NOINLINE __attribute__((noinline))

static double end_time, period = 1.0 / 99, delay;
static double cpu_s[3];

static double thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Work until the thread's own CPU clock has advanced by SECS (preemption does not count). */
#define WORK(name)                                                                                                     \
	NOINLINE void name(double secs)                                                                                \
	{                                                                                                              \
		double end = thread_cpu() + secs;                                                                      \
		while (thread_cpu() < end)                                                                             \
			WL_SPIN(1);                                                                                    \
	}
WORK(work_a)
WORK(work_b)
WORK(work_c)

static void *run(void *arg)
{
	long i = (long)arg;
	static const int parts[3] = {6, 3, 1};
	static void (*const work[3])(double) = {work_a, work_b, work_c};
	static const char *const names[3] = {"split-a", "split-b", "split-c"};
	double busy = period * 0.9 * parts[i] / 10;
	struct timespec next;

	pthread_setname_np(pthread_self(), names[i]);
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (wl_now() < end_time) {
		work[i](busy);
		next.tv_nsec += (long)(period * 1e9);
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	cpu_s[i] = thread_cpu();
	return NULL;
}

static void *start(void *arg)
{
	pthread_t t[3];

	(void)arg;
	if (delay > 0) {
		struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};

		nanosleep(&ts, NULL);
	}
	for (long i = 0; i < 3; i++)
		if (pthread_create(&t[i], NULL, run, (void *)i))
			return (void *)1;
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t starter;
	void *ret = NULL;

	if (argc > 2)
		period = atof(argv[2]);
	if (argc > 3)
		delay = atof(argv[3]);
	if (!(period > 0) || delay < 0)
		return 2;
	wl_gate();
	end_time = wl_now() + wl_seconds(argc, argv);
	if (delay > 0) {
		if (pthread_create(&starter, NULL, start, NULL))
			return 1;
		pthread_join(starter, &ret);
	} else {
		ret = start(NULL);
	}
	if (ret)
		return 1;
	printf("cpu_split: a=%.6f b=%.6f c=%.6f\n", cpu_s[0], cpu_s[1], cpu_s[2]);
	return 0;
}
