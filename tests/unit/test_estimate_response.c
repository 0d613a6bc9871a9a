// SPDX-License-Identifier: MIT
/* The share of the probes' delay that pushes a thread's calls out, as random stalls
 * measure it (est_response): on a thread that calls as soon as it can, on one a device's
 * queue paces, in windows too short or too noisy to say it alone, and pooled over
 * windows; and what a call's work costs the job, as bare calls measure it (est_bare). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"
#include "rng.h"
#include "test.h"

#define NEAR(a, b, eps) (fabs((a) - (b)) <= (eps))

/* A thread launching into a device queue of QDEPTH kernels of DEV s each (0: no device
 * pace), WORK s of its own between launches (+-20%), a probe of COST s on each and a
 * STALL s more on one in 8 at random: the gaps from a launch to the next after the first
 * SKIP, into R as BPF books them. The launch waits (spinning) while the queue is full: a
 * device that sets the pace absorbs a delay before the call. Returns the first launch
 * that waited (N if none). */
static int queue_run(double work, double cost, double stall, double dev, int qdepth, int n, int skip,
		     struct est_response *r)
{
	int first_wait = n;
	double *finish = calloc((size_t)qdepth, sizeof(*finish)), t = 0, last = 0, prev = -1, stalls = 0;
	int stalled = 0;

	for (int i = 0; i < n; i++) {
		double x = t_mixed() < 1.0 / 8 ? stall : 0, start;

		if (prev >= 0 && i > skip) {
			double gap[2] = {0, 0}, one[2] = {0, 0}, sq[2] = {0, 0};

			gap[stalled] = (t - prev) * 1e9;
			one[stalled] = 1;
			sq[stalled] = gap[stalled] * gap[stalled];
			est_response_add(r, one, gap, sq, 0, 0);
		}
		prev = t;
		stalled = x > 0;
		stalls += x > 0 && i >= skip;
		t += cost + x;
		/* the call: a slot in the queue, then the kernel queued behind the last */
		if (dev > 0 && i >= qdepth && finish[i % qdepth] > t) {
			t = finish[i % qdepth];
			if (first_wait == n)
				first_wait = i;
		}
		start = t > last ? t : last;
		last = finish[i % qdepth] = start + dev;
		t += work * (0.8 + 0.4 * t_mixed());
	}
	est_response_add(r, (double[2]){0, 0}, (double[2]){0, 0}, (double[2]){0, 0}, stalls * stall * 1e9, stalls);
	free(finish);
	return first_wait;
}

/* The share of the probes' delay that pushes calls out, measured by random stalls: all of
 * it for a thread that calls as soon as it can, none where a full device queue sets the
 * pace, in between where the queue is full only part of the time; and what it does to a
 * delay correction. */
TEST(delay_response)
{
	struct est_response r = {0};
	struct est_delay s, d;
	double delta, stall;
	int first;

	/* too few gaps: the delay may push all of itself out or none (the old estimate: all) */
	s = est_response_share(&r, false, &delta, &stall);
	CHECK(s.mid == 1 && s.lo == 0 && s.hi == 1 && delta == 0 && stall == 0);
	/* CPU-paced: 4 us of work, a 3 us probe, no device */
	queue_run(4e-6, 3e-6, 1e-6, 0, 1024, 100000, 0, &r);
	s = est_response_share(&r, false, &delta, &stall);
	printf("# cpu-paced: %.3f (%.3f-%.3f), +%.0f ns after a %.0f ns stall\n", s.mid, s.lo, s.hi, delta * 1e9,
	       stall * 1e9);
	CHECK(s.mid > 0.9 && s.hi == 1 && s.lo > 0.8 && NEAR(stall, 1e-6, 1e-12));
	/* device-paced: 10 us kernels, the thread needs 7 (slack 3 us > the stall), its
	 * queue full (it fills 0.3 kernels a launch: after ~3,500 launches) */
	memset(&r, 0, sizeof(r));
	queue_run(4e-6, 3e-6, 1e-6, 10e-6, 1024, 100000, 5000, &r);
	s = est_response_share(&r, false, &delta, &stall);
	printf("# device-paced: %.3f (%.3f-%.3f), +%.0f ns\n", s.mid, s.lo, s.hi, delta * 1e9);
	CHECK(s.lo == 0 && s.mid < 0.03 && s.hi < 0.05);
	/* its range goes down to 0 where its upper end is below 1 (a device paced the thread
	 * some of the time: what pushed may have been made up) */
	/* filling the queue, then device-paced: the share of the launches that did not wait */
	memset(&r, 0, sizeof(r));
	first = queue_run(4e-6, 3e-6, 1e-6, 10e-6, 1024, 8000, 0, &r);
	s = est_response_share(&r, false, &delta, &stall);
	printf("# filling the queue for %d launches of 8000, then device-paced: %.3f (%.3f-%.3f)\n", first, s.mid, s.lo,
	       s.hi);
	CHECK(first > 3000 && first < 4000 && s.lo < first / 8000.0 && first / 8000.0 < s.hi);
	/* gaps 50 us apart give or take 50, 400 of them: a 0.5 us stall's effect is lost in
	 * them, and the share stays near the old assumption (paced by itself), its range 0-1 */
	memset(&r, 0, sizeof(r));
	est_response_add(&r, (double[2]){300, 100}, (double[2]){300 * 50e3, 100 * 50e3},
			 (double[2]){300 * 5000e6, 100 * 5000e6}, 100 * 0.5e3, 100);
	s = est_response_share(&r, false, &delta, &stall);
	printf("# noisy gaps: %.3f (%.3f-%.3f)\n", s.mid, s.lo, s.hi);
	CHECK(s.mid > 0.95 && s.lo == 0 && s.hi == 1);
	/* what the share does to a correction: its ends with the share's, unbounded times 0
	 * adding nothing */
	d = est_delay_share((struct est_delay){1.5, 1.2, INFINITY}, (struct est_delay){0.5, 0, 1});
	CHECK(NEAR(d.mid, 1.25, 1e-12) && d.lo == 1 && isinf(d.hi));
	d = est_delay_share((struct est_delay){1.5, 1.2, INFINITY}, (struct est_delay){0, 0, 0});
	CHECK(d.mid == 1 && d.lo == 1 && d.hi == 1);
	d = est_delay_share((struct est_delay){1.5, 1.2, 2}, (struct est_delay){1, 1, 1});
	CHECK(d.mid == 1.5 && d.lo == 1.2 && d.hi == 2);
}

/* One window's gaps as BPF books them: N0 after other calls, N1 after stalled ones, SD s
 * of noise about a pace of MEAN s, a stall of STALL s of which SHARE pushes the next call. */
static struct est_response window_gaps(int n0, int n1, double mean, double sd, double stall, double share)
{
	struct est_response r = {0};

	for (int i = 0; i < n0 + n1; i++) {
		int j = i >= n0;
		/* Box-Muller: normal noise about the gap */
		double z = sqrt(-2 * log(1 - t_mixed())) * cos(2 * M_PI * t_mixed()),
		       gap = (mean + j * share * stall + sd * z) * 1e9, one[2] = {0, 0}, sum[2] = {0, 0},
		       sq[2] = {0, 0};

		one[j] = 1;
		sum[j] = gap;
		sq[j] = gap * gap;
		est_response_add(&r, one, sum, sq, j ? stall * 1e9 : 0, j);
	}
	return r;
}

/* Short windows (2 ms of a 10 us loop: 110 gaps after other calls, 37 after a stalled
 * one) of a thread its device paces, a 0.55 us stall, the gaps 1 us apart give or take:
 * each window's own share, averaged over windows, is the truth. Weighed against 1 by its
 * precision, each read 0.15 where the truth was 0.05, and the launches came out +5-10%
 * high (e2e 61's short windows). Gaps too noisy for one window to say are not its to say. */
TEST(delay_response_short_windows)
{
	const int windows = 2000;
	double paced = 0, self = 0;
	struct est_response r;

	for (int w = 0; w < windows; w++) {
		r = window_gaps(110, 37, 10e-6, 1e-6, 0.55e-6, 0.05);
		CHECK(est_response_precise(&r));
		paced += est_response_share(&r, true, NULL, NULL).mid / windows;
		r = window_gaps(110, 37, 7e-6, 1e-6, 0.55e-6, 1);
		self += est_response_share(&r, true, NULL, NULL).mid / windows;
	}
	printf("# short windows, own shares averaged: device-paced %.3f (truth 0.05), self-paced %.3f (truth 1)\n",
	       paced, self);
	CHECK(fabs(paced - 0.05) < 0.03 && fabs(self - 1) < 0.05);
	/* 5 us of noise: one window's share would be 0.55 us against 1.3 of error */
	r = window_gaps(110, 37, 10e-6, 5e-6, 0.55e-6, 0.05);
	CHECK(!est_response_precise(&r));
	r = window_gaps(110, 20, 10e-6, 0, 0.55e-6, 0.05);
	CHECK(!est_response_precise(&r));
}

/* A window's own sign that a device paced its thread (est_response_paced), which holds the
 * next windows' breakpoints early: the window just after a job's start, or one that opened
 * while its thread caught up on the breakpoints' stall, reads the thread as pacing itself
 * and gives no sign; a window of the device's pace gives one from as few as
 * EST_PACED_MIN gaps after stalls (a 2 ms window of a 14 us loop has 15-35), and of a
 * loop that paces itself, one window in forty at most (its noise past 2.5 sigma, 18
 * gaps after stalls: 1.4%). */
TEST(window_paced_sign)
{
	struct est_response r;
	int signs = 0;

	r = window_gaps(60, 18, 14.2e-6, 0.2e-6, 0.63e-6, 0);
	CHECK(est_response_paced(&r) > 0.8);
	r = window_gaps(60, 18, 10.3e-6, 0.2e-6, 0.63e-6, 1); /* catching up: pacing itself */
	CHECK(est_response_paced(&r) == -1);
	r = window_gaps(60, EST_PACED_MIN - 1, 14.2e-6, 0.2e-6, 0.63e-6, 0);
	CHECK(est_response_paced(&r) == -1);
	r = window_gaps(60, 18, 14.2e-6, 5e-6, 0.63e-6, 0); /* gaps too noisy to say */
	CHECK(est_response_paced(&r) == -1);
	r = window_gaps(60, 18, 14.2e-6, 0.2e-6, 0.63e-6, 0.5); /* half of it absorbed */
	CHECK(NEAR(est_response_paced(&r), 0.5, 0.15));
	for (int w = 0; w < 1000; w++) {
		r = window_gaps(60, 18, 10e-6, 1e-6, 0.63e-6, 1);
		signs += est_response_paced(&r) >= 0;
	}
	printf("# a loop that paces itself: a device's sign in %d of 1000 windows\n", signs);
	CHECK(signs <= 25);
}

/* The pool a window too noisy for itself takes its share from: the job's first window, 15
 * ms long while its queue fills (2,400 gaps, all of the delay pushing), then short ones
 * (80 gaps each) of the thread its device paces. Each window weighs at most
 * EST_RESPONSE_WINDOW gaps in it: after 30 short windows the pool says they are paced;
 * by gaps alone it said the first window's share for dozens more. */
TEST(response_pool_window_cap)
{
	struct est_response pool = {0}, bygaps = {0}, r;
	struct est_delay capped, plain;

	r = window_gaps(1800, 600, 7e-6, 1e-6, 0.55e-6, 1);
	pool = bygaps = (struct est_response){0};
	est_response_pool(&bygaps, &r, EST_RESPONSE_MEMORY);
	est_response_cap(&r, EST_RESPONSE_WINDOW);
	CHECK(NEAR(r.n[0] + r.n[1], EST_RESPONSE_WINDOW, 1e-9) && NEAR(r.stalls, 50, 1e-9));
	est_response_pool(&pool, &r, EST_RESPONSE_MEMORY);
	for (int w = 0; w < 30; w++) {
		r = window_gaps(60, 20, 10e-6, 0.5e-6, 0.55e-6, 0.05);
		est_response_pool(&bygaps, &r, EST_RESPONSE_MEMORY);
		est_response_cap(&r, EST_RESPONSE_WINDOW); /* under the cap: unchanged */
		CHECK(r.n[0] + r.n[1] == 80);
		est_response_pool(&pool, &r, EST_RESPONSE_MEMORY);
	}
	capped = est_response_share(&pool, false, NULL, NULL);
	plain = est_response_share(&bygaps, false, NULL, NULL);
	printf("# the pool after a long first window and 30 short ones: %.3f capped, %.3f by gaps\n", capped.mid,
	       plain.mid);
	CHECK(capped.mid < 0.25 && plain.mid > 0.4);
}

/* N gaps of a thread, into B as BPF books them: WORK s of its own (+-SD, normal) between
 * calls, a program of PROG s and what its work costs the code after it, COST s, of which
 * SHARE pushes the next call; one call in 8 bare, its program BARE_PROG s and no cost. */
static void bare_gaps(struct est_bare *b, int n, double work, double sd, double prog, double bare_prog, double cost,
		      double share)
{
	for (int i = 0; i < n; i++) {
		int j = t_mixed() < 1.0 / 8;
		double z = sqrt(-2 * log(1 - t_mixed())) * cos(2 * M_PI * t_mixed()), p = j ? bare_prog : prog,
		       gap = (work + sd * z + share * (p + (j ? 0 : cost))) * 1e9, one[2] = {0, 0}, sum[2] = {0, 0},
		       sq[2] = {0, 0}, pr[2] = {0, 0};

		one[j] = 1;
		sum[j] = gap;
		sq[j] = gap * gap;
		pr[j] = p * 1e9;
		est_bare_add(b, one, sum, sq, pr);
	}
}

/* What a call's work costs the job beyond its run time, by the gaps after bare calls: the
 * truth within the range, whether all of the delay pushes calls out or half; nothing
 * where too few bare gaps are in or a device's queue absorbs the delay; at least 0. */
TEST(bare_work_cost)
{
	struct est_bare b = {0};
	struct est_delay c;
	double delta, prog;

	/* too few gaps after bare calls */
	bare_gaps(&b, 800, 3e-6, 0.2e-6, 1.2e-6, 0.1e-6, 0.3e-6, 1);
	c = est_bare_cost(&b, 1, NULL, NULL);
	CHECK(b.n[1] < EST_BARE_MIN && c.mid == 0 && c.lo == 0 && c.hi == 0);
	/* a Python-like step: 1.2 us of work's program, 0.1 us bare, the work 0.3 us more */
	b = (struct est_bare){0};
	bare_gaps(&b, 40000, 3e-6, 0.2e-6, 1.2e-6, 0.1e-6, 0.3e-6, 1);
	c = est_bare_cost(&b, 1, &delta, &prog);
	printf("# self-paced: %.3f us (%.3f-%.3f), the truth 0.300; gaps %.3f us apart, programs %.3f\n", c.mid * 1e6,
	       c.lo * 1e6, c.hi * 1e6, delta * 1e6, prog * 1e6);
	CHECK(NEAR(prog, 1.1e-6, 1e-12) && c.lo <= 0.3e-6 && 0.3e-6 <= c.hi && NEAR(c.mid, 0.3e-6, 0.02e-6));
	/* half of a delay pushes calls out: the gaps differ by half, the share says so */
	b = (struct est_bare){0};
	bare_gaps(&b, 40000, 3e-6, 0.2e-6, 1.2e-6, 0.1e-6, 0.3e-6, 0.5);
	c = est_bare_cost(&b, 0.5, &delta, NULL);
	CHECK(NEAR(delta, 0.7e-6, 0.02e-6) && c.lo <= 0.3e-6 && 0.3e-6 <= c.hi);
	/* a device's queue sets the pace: not taken */
	c = est_bare_cost(&b, 0.3, NULL, NULL);
	CHECK(c.mid == 0 && c.hi == 0);
	/* no cost beyond the run time (a C loop's): about 0, never below */
	b = (struct est_bare){0};
	bare_gaps(&b, 40000, 3e-6, 0.2e-6, 0.7e-6, 0.1e-6, 0, 1);
	c = est_bare_cost(&b, 1, NULL, NULL);
	CHECK(c.lo == 0 && c.mid < 0.02e-6 && c.hi >= c.mid && c.hi < 0.05e-6);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(delay_response);
	RUN(delay_response_short_windows);
	RUN(response_pool_window_cap);
	RUN(window_paced_sign);
	RUN(bare_work_cost);
	return T_END();
}
