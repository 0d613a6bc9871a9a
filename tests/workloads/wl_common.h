/* SPDX-License-Identifier: MIT */
/* Shared by the CPU workloads: a busy loop the compiler cannot remove, a clock, and the
 * start gate (GPUBPF_WL_WAIT=1: print "ready" and wait for a line on stdin, so a test can
 * attach with -p before the interesting part starts). */
#ifndef WL_COMMON_H
#define WL_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned long wl_sink;

/* About one microsecond of work per 100 units on a 2 GHz core; exact time does not matter,
 * only that every leaf runs the same instructions per unit. */
#define WL_SPIN(units)                                                                                                 \
	do {                                                                                                           \
		unsigned long _x = wl_sink;                                                                            \
		for (unsigned long _i = 0; _i < (unsigned long)(units) * 1000UL; _i++)                                 \
			_x = _x * 6364136223846793005UL + 1442695040888963407UL;                                       \
		wl_sink = _x;                                                                                          \
	} while (0)

static inline double wl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void wl_gate(void)
{
	const char *w = getenv("GPUBPF_WL_WAIT");
	char line[64];

	if (!w || strcmp(w, "1") != 0)
		return;
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return;
}

/* Seconds to run: argv[1], default 2. */
static inline double wl_seconds(int argc, char **argv)
{
	return argc > 1 ? atof(argv[1]) : 2.0;
}

#endif
