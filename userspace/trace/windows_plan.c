// SPDX-License-Identifier: MIT
/* Where a group's windows go, and how early the window thread acts for them: a segment
 * of time (a period, or a part of one, or the rest of a window the guard cut) gets one
 * window of 1/K of it at a random place (est_place), in one piece or, where it ran past
 * the segment's end, two; the pieces wait in the group's state until their time (the
 * window thread's side, windows.c). */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "windows_int.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* How early to attach, from the last N attaches' durations TOOK: their median and 0.3 ms.
 * An attach waits for the kernel (a grace period: ~4-10 ms here) and puts the breakpoints
 * in at its end; from then until the window opens every call pays its trap and counts
 * nowhere. The slowest attach seen, doubled, made that 10 ms a window in a launch loop, as
 * much as the window itself; at the median, half the windows open late by a millisecond
 * or so, weighed for the length they got (w_eff). */
static double lead_of(const double *took, unsigned n)
{
	double t[LEAD_N];

	if (!n)
		return 0.001;
	memcpy(t, took, n * sizeof(*t));
	qsort(t, n, sizeof(*t), cmp_double);
	return t[n / 2] + 0.0003;
}

void windows_note_took(struct windows *w, double took, bool warmed)
{
	if (warmed) {
		w->ins[w->nins++ % LEAD_N] = took;
		/* their median and 0.1 ms (lead_of's is 0.3 ms), at most INSERT_MAX */
		w->insert = fmin(lead_of(w->ins, w->nins < LEAD_N ? w->nins : LEAD_N) - 0.0002, INSERT_MAX);
		return;
	}
	w->took[w->ntook++ % LEAD_N] = took;
	w->lead = fmin(lead_of(w->took, w->ntook < LEAD_N ? w->ntook : LEAD_N), 0.05);
}

double windows_ahead(const struct windows *w, const struct gstate *s, bool insert)
{
	double a = s->rate > 0 ? fmin(AHEAD_S, AHEAD_HITS / s->rate) : AHEAD_S;

	if (insert)
		a = fmax(a + w->insert * s->paced * (1 + SETTLE_X),
			 s->rate > 0 ? fmin(INSERT_S, INSERT_HITS / s->rate) : INSERT_S);
	return a;
}

/* A piece at the front of those still to come (it comes before them). */
static void push_front(struct gstate *s, double open, double close, double weight)
{
	/* The guard cut the rest of a cut window again and again: the last piece goes, and
	 * the next window stands in for it, as for one missed. */
	if (s->nafter >= PIECES_MAX) {
		struct piece *last = &s->after[PIECES_MAX - 1];

		s->owed += last->weight * (last->close - last->open);
		s->nafter = PIECES_MAX - 1;
	}
	memmove(s->after + 1, s->after, (size_t)s->nafter * sizeof(*s->after));
	s->after[0] = (struct piece){open, close, weight};
	s->nafter++;
}

void windows_plan(struct windows *w, int g, struct est_segment seg, double d, bool first, bool keep)
{
	struct gstate *s = &w->gs[g];
	int k = est_slots(d, seg.end - seg.start, MIN_SLOT);
	double tail;

	if (!keep)
		s->nafter = 0;
	s->seg = seg;
	s->slot_len = 0;
	s->weight = est_place(&seg, k, erand48(w->xsubi), &s->wopen, &s->wclose, &tail);
	s->first = first;
	s->warmed = false;
	if (first && s->wclose > seg.start + FIRST_MEASURE)
		s->wclose = seg.start + FIRST_MEASURE;
	/* a first window's measurement plans the rest of its segment anew */
	if (tail > 0 && !first)
		push_front(s, tail, seg.end, s->weight);
	s->pending = true;
}

bool windows_next_piece(struct gstate *s)
{
	if (!s->nafter)
		return false;
	s->wopen = s->after[0].open;
	s->wclose = s->after[0].close;
	s->weight = s->after[0].weight;
	s->nafter--;
	memmove(s->after, s->after + 1, (size_t)s->nafter * sizeof(*s->after));
	s->slot_len = 0;
	s->first = false;
	s->warmed = false;
	s->pending = true;
	return true;
}

void windows_stand_in(struct gstate *s, double *weight)
{
	double f;

	if (!(s->owed > 0) || !(s->seg.end > s->seg.start))
		return;
	f = 1 + s->owed / (s->seg.weight * (s->seg.end - s->seg.start));
	*weight *= f;
	/* the rest of this slot stands in as much */
	for (int i = 0; i < s->nafter; i++)
		s->after[i].weight *= f;
	s->owed = 0;
}

void windows_miss(struct windows *w, struct gstate *s, double t)
{
	double len = s->slot_len > 0 ? s->slot_len : s->wclose - s->wopen;

	s->pending = false;
	/* what the piece would have seen, at weight 1; a first window, the whole segment (the
	 * rest of it was to be planned at its end) */
	if (s->first)
		s->owed += s->seg.weight * (s->seg.end - s->seg.start);
	else if (len > 0)
		s->owed += s->weight * len;
	w->missed++;
	if (s->attached && !s->cur && !(s->detach_at > 0))
		s->detach_at = t;
	windows_next_piece(s);
}

struct est_segment windows_stratum(const struct windows *w, int i, int strata)
{
	double len = w->period / strata;
	struct est_segment seg = {.start = w->period_start + i * len, .weight = 1};

	seg.end = i + 1 < strata ? seg.start + len : w->period_start + w->period;
	return seg;
}
