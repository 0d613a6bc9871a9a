// SPDX-License-Identifier: MIT
/* Where the window thread puts a group's windows (windows_plan.c): at a random offset,
 * wrapping past the segment's end into a second piece; every instant inside with
 * probability 1/K, edges included; pieces missed owe what they would have seen, and the
 * next window (both its pieces) stands in for it; the guard's rest of a cut window comes
 * before what is left of its slot (a piece that finds no room is owed); the gate and the
 * probes go in ahead by at most a few of the group's calls. */
#include <math.h>
#include <stdlib.h>

#include "test.h"
#include "windows_int.h"

#define NEAR(a, b, eps) (fabs((a) - (b)) <= (eps))

static struct windows *wins(unsigned short seed)
{
	struct windows *w = calloc(1, sizeof(*w));

	w->period = 1;
	w->xsubi[0] = seed;
	w->xsubi[1] = 7;
	w->xsubi[2] = 11;
	return w;
}

/* Plans of [0, 1) at duty 0.1 until one wraps (at most N tries): true when one did. */
static bool plan_wrapped(struct windows *w, struct est_segment seg, int n)
{
	for (int i = 0; i < n; i++) {
		windows_plan(w, 0, seg, 0.1, false, false);
		if (w->gs[0].nafter)
			return true;
	}
	return false;
}

TEST(wrapped_pieces)
{
	struct windows *w = wins(1);
	struct est_segment seg = {.start = 0, .end = 1, .weight = 1};
	struct gstate *s = &w->gs[0];
	double len_a;

	CHECK(plan_wrapped(w, seg, 1000));
	/* the first piece from the segment's start, the second to its end, 1/10 in all */
	CHECK(s->wopen == 0 && s->pending);
	len_a = s->wclose - s->wopen;
	CHECK(s->after[0].close == 1);
	CHECK(NEAR(len_a + (s->after[0].close - s->after[0].open), 0.1, 1e-12));
	CHECK(NEAR(s->weight, 10, 1e-12) && NEAR(s->after[0].weight, 10, 1e-12));
	/* the first piece over, the second is pending */
	s->pending = false;
	CHECK(windows_next_piece(s));
	CHECK(s->pending && s->wclose == 1 && s->nafter == 0);
	CHECK(!windows_next_piece(s));
	free(w);
}

/* Every instant, at the segment's edges too, is in a window one plan in 10. */
TEST(uniform_inclusion)
{
	struct windows *w = wins(3);
	struct est_segment seg = {.start = 0, .end = 1, .weight = 1};
	const double at[] = {0.0001, 0.05, 0.5, 0.95, 0.9999};
	const int n = 20000;
	int in[5] = {0};

	for (int i = 0; i < n; i++) {
		struct gstate *s = &w->gs[0];

		windows_plan(w, 0, seg, 0.1, false, false);
		for (int j = 0; j < 5; j++) {
			bool inside = at[j] >= s->wopen && at[j] < s->wclose;

			for (int p = 0; p < s->nafter; p++)
				inside = inside || (at[j] >= s->after[p].open && at[j] < s->after[p].close);
			in[j] += inside;
		}
	}
	for (int j = 0; j < 5; j++) {
		printf("# t=%.4f: in %.4f of the plans\n", at[j], (double)in[j] / n);
		/* binomial sd 0.0021: four of them */
		CHECK(NEAR((double)in[j] / n, 0.1, 0.0085));
	}
	free(w);
}

/* Both pieces missed owe the whole slot's share (the segment, at weight 1); the next
 * window stands in for it with both its pieces. */
TEST(missed_and_stood_in)
{
	struct windows *w = wins(5);
	struct est_segment seg = {.start = 0, .end = 1, .weight = 1}, next = {.start = 1, .end = 2, .weight = 1};
	struct gstate *s = &w->gs[0];
	double weight;

	CHECK(plan_wrapped(w, seg, 1000));
	while (s->pending)
		windows_miss(w, s, 1);
	CHECK(NEAR(s->owed, 1, 1e-9));
	CHECK(w->missed == 2);
	/* no probes were in for them: none to take out */
	CHECK(s->detach_at == 0);
	CHECK(plan_wrapped(w, next, 1000));
	weight = s->weight;
	windows_stand_in(s, &weight);
	CHECK(NEAR(weight, 20, 1e-9) && NEAR(s->after[0].weight, 20, 1e-9));
	CHECK(s->owed == 0);
	/* a first window missed owes its whole segment, however short it was cut */
	windows_plan(w, 0, seg, 1, true, false);
	s->wclose = 0.03;
	/* its probes in ahead of it (attach sets detach_at to 0): out from the miss on, not
	 * left in until the next window closes */
	s->attached = true;
	s->detach_at = 0;
	windows_miss(w, s, 0.5);
	CHECK(NEAR(s->owed, 1, 1e-9));
	CHECK(s->detach_at == 0.5);
	free(w);
}

/* The guard cut the first piece at 0.02: the rest of it is sampled before the second
 * piece, which keeps its place and weight. */
TEST(guard_rest_before_second_piece)
{
	struct windows *w = wins(9);
	struct est_segment seg = {.start = 0, .end = 1, .weight = 1};
	struct gstate *s = &w->gs[0];
	struct piece second;
	double end;

	/* a first piece longer than 0.02 */
	do
		CHECK(plan_wrapped(w, seg, 1000));
	while (s->wclose < 0.03);
	second = s->after[0];
	end = s->wclose;
	windows_plan(w, 0, est_segment_split(0.02, end, s->weight), 0.25, false, true);
	CHECK(s->wopen >= 0.02 && s->wclose <= end);
	CHECK(s->nafter >= 1 && s->after[s->nafter - 1].open == second.open &&
	      s->after[s->nafter - 1].weight == second.weight);
	CHECK(s->weight >= 10 * 2 - 1e-9);
	free(w);
}

/* Three pieces to come and the guard's rest wraps again: the last piece goes, owed. */
TEST(pieces_full)
{
	struct windows *w = wins(13);
	struct est_segment seg = {.start = 0, .end = 1, .weight = 1};
	struct gstate *s = &w->gs[0];
	int tries = 0;

	s->nafter = PIECES_MAX;
	for (int i = 0; i < PIECES_MAX; i++)
		s->after[i] = (struct piece){2 + i, 2.01 + i, 50};
	while (s->owed == 0 && tries++ < 1000)
		windows_plan(w, 0, seg, 0.1, false, true);
	CHECK(s->owed > 0);
	CHECK(NEAR(s->owed, 50 * 0.01, 1e-9));
	CHECK(s->nafter == PIECES_MAX && s->after[0].close == 1 && s->after[1].open == 2);
	free(w);
}

TEST(ahead)
{
	struct windows w = {0};
	struct gstate s = {0};

	/* nothing known of the group: the full leads */
	CHECK(windows_ahead(&w, &s, false) == AHEAD_S && windows_ahead(&w, &s, true) == INSERT_S);
	/* e2e 60's steady loop, 8000 calls a second: the full leads still */
	s.rate = 8000;
	CHECK(windows_ahead(&w, &s, false) == AHEAD_S && windows_ahead(&w, &s, true) == INSERT_S);
	/* a launch-bound loop, 200k a second: 2 and 4 calls' time */
	s.rate = 200000;
	CHECK(NEAR(windows_ahead(&w, &s, false), 10e-6, 1e-12) && NEAR(windows_ahead(&w, &s, true), 20e-6, 1e-12));
	/* ... whose breakpoints took 0.3-0.5 ms to go in: a loop that paces itself keeps its
	 * lead (a late gate only shortens its window) */
	for (int i = 0; i < 5; i++)
		windows_note_took(&w, 0.0003 + 0.00005 * i, true);
	CHECK(NEAR(w.insert, 0.0004 + 0.0001, 1e-12));
	CHECK(NEAR(windows_ahead(&w, &s, true), 20e-6, 1e-12));
	CHECK(w.ntook == 0); /* the warm-up's lead is apart */
	/* a group a device's queue paces (its delay's share 0.1): that long ahead of the gate
	 * (the median, and 0.1 ms), and SETTLE_X times more, for its thread to catch up on
	 * the stall before the gate */
	s.paced = 0.9;
	CHECK(NEAR(windows_ahead(&w, &s, true), 10e-6 + 0.0005 * 0.9 * (1 + SETTLE_X), 1e-12));
	s.paced = 0;
	/* at most INSERT_MAX, however slow */
	for (int i = 0; i < LEAD_N; i++)
		windows_note_took(&w, 0.02, true);
	CHECK(w.insert == INSERT_MAX);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(wrapped_pieces);
	RUN(uniform_inclusion);
	RUN(missed_and_stood_in);
	RUN(guard_rest_before_second_piece);
	RUN(pieces_full);
	RUN(ahead);
	return T_END();
}
