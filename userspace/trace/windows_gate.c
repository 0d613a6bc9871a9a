// SPDX-License-Identifier: MIT
/* A window's gate, written where its bounds are exact.
 *
 * The probes count a call in a window when its entry's time lies within the bounds
 * written with the window's id (cuda.bpf.c, window_at): calls before the id's store lands
 * count nowhere, calls after it by their time. The window thread cannot read when its
 * store landed, only the clock before and after it. A bound already past when it is
 * written (a window opened late, or cut before its end) was therefore inexact by what ran
 * between the store and the clock read: a preemption there once counted 11 launches
 * before the window's recorded open (e2e 62). Written at least AHEAD_S ahead of the clock
 * read before the store, a bound is exact unless the store lands later than that (the
 * thread preempted that long in between); then the clock read after the store says so,
 * and by how much at most (the window's slip, said with it). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "cuda.h"
#include "windows_int.h"

double windows_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The store before the clock read AFTER landed within its bound T, or slipped past it. */
static double slip(struct windows *w, double t, double after)
{
	if (!(after > t))
		return 0;
	pthread_mutex_lock(&w->lock);
	w->slips++;
	w->slip_max = fmax(w->slip_max, after - t);
	pthread_mutex_unlock(&w->lock);
	return after - t;
}

double windows_gate_open(struct windows *w, int g, struct wrec *r, double at)
{
	double t0 = windows_now(), open = fmax(at, t0 + AHEAD_S);

	/* a window due with less left than the lead gets the lead's length */
	if (open >= r->bound)
		r->bound = open + AHEAD_S;
	cuda__set_window(w->c, g, r->id, open, r->bound);
	r->slip_open = slip(w, open, windows_now());
	return open;
}

static void sleep_until(double t)
{
	struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - floor(t)) * 1e9)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

double windows_gate_close(struct windows *w, int g, struct wrec *r)
{
	double end = fmin(r->bound, windows_now() + AHEAD_S);

	/* Cut before its bound (the guard, the end, a thread that woke early): the bound
	 * moves up to END. The window thread waits for END before the books are read, and
	 * the id comes off after it: a call after END counts by its time in no window. */
	if (end < r->bound) {
		cuda__set_window(w->c, g, r->id, r->open, end);
		r->slip_close = slip(w, end, windows_now());
	}
	if (windows_now() < end)
		sleep_until(end);
	cuda__set_window(w->c, g, CUDA_WINDOW_CLOSED, 0, 0);
	return end;
}
