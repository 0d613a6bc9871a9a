// SPDX-License-Identifier: MIT
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"

int est_slots(double d, double len, double min_slot)
{
	double k, most;

	if (!(d > 0) || d >= 1 || !(len > 0))
		return 1;
	k = ceil(1 / d - 1e-9);
	most = min_slot > 0 ? floor(len / min_slot) : k;
	if (k > most)
		k = most;
	if (k > 1e6)
		k = 1e6;
	return k < 1 ? 1 : (int)k;
}

double est_place(const struct est_segment *seg, int k, double u, double *open, double *close, double *tail)
{
	double span = seg->end - seg->start, len, off;

	*tail = 0;
	if (k <= 1 || !(span > 0)) {
		*open = seg->start;
		*close = seg->end;
		return seg->weight;
	}
	len = span / k;
	off = (u > 0 && u < 1 ? u : 0) * span;
	if (off + len <= span) {
		*open = seg->start + off;
		*close = fmin(*open + len, seg->end);
	} else {
		/* past the end it goes on from the start: both pieces, in time order */
		*open = seg->start;
		*close = seg->start + (off + len - span);
		*tail = seg->start + off;
	}
	return seg->weight * k;
}

struct est_segment est_segment_split(double t, double end, double w)
{
	struct est_segment s = {.start = t, .end = end > t ? end : t, .weight = w};

	return s;
}

double est_run_factor(uint32_t calls, uint32_t run_calls, double run_start, double last, double backlog,
		      double last_cost, bool slept)
{
	double work, rate, pushed;

	/* The run's rate without probes: its calls after the first over the time they took
	 * less what the probes of the calls before the last took. One call says nothing. */
	if (!calls || slept || run_calls < 2 || !(backlog > 0))
		return 1;
	work = (last - run_start) - (backlog - last_cost);
	/* The probes took all of the run's time at this backlog: how many calls it would
	 * have made without them cannot be told. */
	if (!(work > 0))
		return INFINITY;
	rate = (run_calls - 1) / work;
	/* The whole backlog pushed calls past the window's end at that rate. */
	pushed = backlog * rate;
	return (calls + pushed) / calls;
}

static double clamp(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

double est_run_stretch(double span, double wait)
{
	if (!(span > 0) || !(wait > 0))
		return 1;
	return wait >= span * (1 - 1.0 / EST_STRETCH_MAX) ? EST_STRETCH_MAX : span / (span - wait);
}

struct est_delay est_run_delay(uint32_t calls, uint32_t run_calls, double run_start, double last, double backlog,
			       double traps, const struct est_delay *scale, double last_cost, bool slept)
{
	struct est_delay d, s = scale ? *scale : (struct est_delay){1, EST_TRAP_LO, EST_TRAP_HI};

	if (!(traps > 0))
		traps = 0;
	if (traps > backlog)
		traps = backlog;
	d.mid = est_run_factor(calls, run_calls, run_start, last, backlog + (s.mid - 1) * traps, last_cost, slept);
	d.lo = est_run_factor(calls, run_calls, run_start, last, backlog + (s.lo - 1) * traps, last_cost, slept);
	d.hi = est_run_factor(calls, run_calls, run_start, last, backlog + (s.hi - 1) * traps, last_cost, slept);
	/* The estimate itself never adds back more than 20 times the run's calls (a probe
	 * cannot slow a thread to nothing; a thread whose probes take nearly all its time, a
	 * 40 ns launch loop's 3 us hits, would otherwise hang it on the difference of two
	 * nearly equal times). Its range is not held so: there the upper end may be
	 * unbounded (INFINITY), which is the truth of it: in a 40 ns launch loop the factor
	 * was 55-75 where the calibrated traps said 13 and the cap 21, and an interval that
	 * stopped there was 10 times short of the calls made. */
	if (calls && d.mid > 1 + 20.0 * run_calls / calls)
		d.mid = 1 + 20.0 * run_calls / calls;
	/* the run's rate is worked out from the same backlog: the factor grows with it */
	if (d.lo > d.mid)
		d.lo = d.mid;
	if (d.hi < d.mid)
		d.hi = d.mid;
	return d;
}

void est_response_add(struct est_response *r, const double n[2], const double sum_ns[2], const double sq_ns[2],
		      double stall_ns, double stalls)
{
	for (int j = 0; j < 2; j++) {
		r->n[j] += n[j];
		r->sum[j] += sum_ns[j] / 1e9;
		r->sq[j] += sq_ns[j] / 1e18;
	}
	r->stall += stall_ns / 1e9;
	r->stalls += stalls;
}

void est_response_cap(struct est_response *r, double most)
{
	double n = r->n[0] + r->n[1], a;

	if (!(most > 0) || !(n > most))
		return;
	a = most / n;
	for (int j = 0; j < 2; j++) {
		r->n[j] *= a;
		r->sum[j] *= a;
		r->sq[j] *= a;
	}
	r->stall *= a;
	r->stalls *= a;
}

void est_response_pool(struct est_response *r, const struct est_response *add, double memory)
{
	double keep = memory - (add->n[0] + add->n[1]);

	if (keep < 0.25 * memory)
		keep = 0.25 * memory;
	if (memory > 0)
		est_response_cap(r, keep);
	for (int j = 0; j < 2; j++) {
		r->n[j] += add->n[j];
		r->sum[j] += add->sum[j];
		r->sq[j] += add->sq[j];
	}
	r->stall += add->stall;
	r->stalls += add->stalls;
}

/* Two sets of N[j] values, their sums SUM[j] and sums of squares SQ[j]: how much greater
 * the second's mean is, and *SE its standard error. */
static double mean_diff(const double n[2], const double sum[2], const double sq[2], double *se)
{
	double m[2], v[2];

	for (int j = 0; j < 2; j++) {
		m[j] = sum[j] / n[j];
		v[j] = sq[j] / n[j] - m[j] * m[j];
		if (!(v[j] > 0))
			v[j] = 0;
	}
	*se = sqrt(v[0] / n[0] + v[1] / n[1]);
	return m[1] - m[0];
}

void est_bare_add(struct est_bare *b, const double n[2], const double sum_ns[2], const double sq_ns[2],
		  const double prog_ns[2])
{
	for (int j = 0; j < 2; j++) {
		b->n[j] += n[j];
		b->sum[j] += sum_ns[j] / 1e9;
		b->sq[j] += sq_ns[j] / 1e18;
		b->prog[j] += prog_ns[j] / 1e9;
	}
}

struct est_delay est_bare_cost(const struct est_bare *b, double share, double *delta, double *prog)
{
	struct est_delay c = {0, 0, 0};
	double d, se, dp;

	if (delta)
		*delta = 0;
	if (prog)
		*prog = 0;
	if (b->n[0] < EST_BARE_MIN || b->n[1] < EST_BARE_MIN)
		return c;
	d = -mean_diff(b->n, b->sum, b->sq, &se);
	dp = b->prog[0] / b->n[0] - b->prog[1] / b->n[1];
	if (delta)
		*delta = d;
	if (prog)
		*prog = dp;
	if (!(share >= EST_BARE_SHARE_MIN))
		return c;
	/* the gaps differ by SHARE of the work's run time and of its cost to the job */
	c.mid = fmax(0, d / share - dp);
	c.lo = fmax(0, (d - 2 * se) / share - dp);
	c.hi = fmax(c.mid, (d + 2 * se) / share - dp);
	return c;
}

/* R's gaps: D, how much longer a gap after a stall was, its standard error SE, and the
 * stall X (s). False while fewer than LEAST are in after stalls or after other calls. */
static bool response_diff(const struct est_response *r, double least, double *d, double *se, double *x)
{
	if (r->n[1] < least || r->n[0] < least || !(r->stalls > 0) || !(r->stall > 0))
		return false;
	*x = r->stall / r->stalls;
	*d = mean_diff(r->n, r->sum, r->sq, se);
	return true;
}

double est_response_paced(const struct est_response *r)
{
	double d, se, x;

	if (!response_diff(r, EST_PACED_MIN, &d, &se, &x) || !((d + 2.5 * se) / x < 1))
		return -1;
	return 1 - clamp(d / x, 0, 1);
}

bool est_response_precise(const struct est_response *r)
{
	double d, se, x;

	return response_diff(r, EST_RESPONSE_MIN, &d, &se, &x) && se * EST_RESPONSE_PRECISE <= x;
}

struct est_delay est_response_share(const struct est_response *r, bool unbiased, double *delta, double *stall)
{
	struct est_delay s = {1, 0, 1};
	double x, d, se;

	if (delta)
		*delta = 0;
	if (stall)
		*stall = 0;
	if (!response_diff(r, EST_RESPONSE_MIN, &d, &se, &x))
		return s;
	if (delta)
		*delta = d;
	if (stall)
		*stall = x;
	/* Gaps far noisier than the stall (a thread whose calls come at all sorts of intervals)
	 * say little: weighed against the old assumption, a thread paced by itself (1, give or
	 * take EST_RESPONSE_PRIOR_SD), by their precision; gaps as regular as a loop's decide. */
	{
		double ws = se > 0 ? x * x / (se * se) : 1e12, wp = 1 / (EST_RESPONSE_PRIOR_SD * EST_RESPONSE_PRIOR_SD),
		       m0 = (ws * (d / x) + wp) / (ws + wp);

		s.mid = unbiased ? clamp(d / x, -1, 2) : clamp(m0, 0, 1);
	}
	s.lo = clamp((d - 2.5 * se) / x, 0, 1);
	s.hi = clamp((d + 2.5 * se) / x, 0, 1);
	/* A share surely below 1 says a device's queue paced the thread some of the time. Then
	 * what did push may have been made up later: a thread that fell behind (an interrupt,
	 * a preemption) calls as fast as it can until the queue is full again, and the stalls
	 * push its next call, but the device's pace, and the calls, are the same in the end;
	 * and a stall that outlasts the little slack the probes left pushes where the probes
	 * taken away would not. The range goes down to none. */
	if (s.hi < 1)
		s.lo = 0;
	if (s.lo > s.mid)
		s.lo = s.mid;
	if (s.hi < s.mid)
		s.hi = s.mid;
	return s;
}

struct est_delay est_delay_share(struct est_delay d, struct est_delay share)
{
	struct est_delay o;

	/* A factor is a ratio of two rates: never below 0. A window's own share is kept with
	 * its noise either side (est_response_share: -1 to 2), and a share below -1/(D - 1)
	 * times a delay D over 2 made it negative: a device-paced thread's precise window (its
	 * share's standard error up to half the stall) with the probes 80% of its run read
	 * -0.56, and the profile got -10 calls for a call seen at weight 20 where the
	 * estimate counted it 20 times. At 0 its calls count themselves and no more; the
	 * noise is clamped on that side only, so such windows lean high, a little. */
	o.mid = fmax(0, 1 + share.mid * (d.mid - 1));
	o.lo = fmax(0, 1 + share.lo * (d.lo - 1));
	o.hi = share.hi > 0 ? 1 + share.hi * (d.hi - 1) : 1;
	if (o.lo > o.mid)
		o.lo = o.mid;
	if (o.hi < o.mid)
		o.hi = o.mid;
	return o;
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t r = a % b;

		a = b;
		b = r;
	}
	return a;
}

void est_traps_add(struct est_traps *t, uint64_t k, uint64_t u, double prog, double traps)
{
	if (!(traps > 0) || !(prog >= 0) || k + u == 0)
		return;
	t->k += (double)k;
	t->u += (double)u;
	t->prog += prog;
	t->traps += traps;
	t->tick = gcd64(gcd64(t->tick, k), u);
}

struct est_delay est_traps_scale(const struct est_traps *t, double *ticks)
{
	/* exact accounting has no tick: count it as 1 ms; ticks are at most 10 ms (HZ 100) */
	double tick = clamp(t->tick ? (double)t->tick : 1e6, 1e6, 1e7), n = (t->k + t->u) / tick, p, sd, s;
	struct est_delay d = {1, EST_TRAP_LO, EST_TRAP_HI};

	if (ticks)
		*ticks = n;
	if (n < EST_TRAPS_MIN_TICKS || !(t->traps > 0))
		return d;
	p = t->k / (t->k + t->u);
	/* the kernel's ticks as n draws, each in the kernel with probability p; at least one */
	sd = tick * sqrt(n * p * (1 - p));
	if (sd < tick)
		sd = tick;
	sd /= t->traps;
	s = (t->k - t->prog) / t->traps;
	/* Ticks that put the traps outside the calibrated range are not draws at random: a
	 * loop paced to a whole fraction of the tick (a device's 10 us kernels, 400 to a 4 ms
	 * tick) has every tick land at one phase of it, all in the probes or none (x4 and
	 * x0.25 flipped from run to run on one such loop). Not taken; said (*ticks < 0). */
	if (s < EST_TRAP_LO || s > EST_TRAP_HI) {
		if (ticks)
			*ticks = -n;
		return d;
	}
	/* Few ticks say little: weighed against the calibration (1, give or take
	 * EST_TRAPS_PRIOR_SD) by their precision, so the first windows stay near it. */
	{
		double wp = 1 / (EST_TRAPS_PRIOR_SD * EST_TRAPS_PRIOR_SD), ws = 1 / (sd * sd);

		s = (wp + ws * s) / (wp + ws);
		sd = 1 / sqrt(wp + ws);
	}
	d.mid = clamp(s, 0.25, 4);
	d.lo = clamp(s - 2.5 * sd - 0.2, 0.25, d.mid);
	/* The ticks see the traps' kernel side only. A trap also costs the job's code after
	 * it (its caches and predictors refilled: user time, estimate.h), which the calibrated
	 * top was set to hold: so the ticks may narrow the range from below, not from above. */
	d.hi = clamp(fmax(s + 2.5 * sd + 0.2, EST_TRAP_HI), d.mid, 4);
	return d;
}

struct est_period *est_group_period(struct est_group *g, size_t i)
{
	if (i >= g->cap) {
		size_t cap = g->cap ? g->cap : 16;
		struct est_period *np;

		while (cap <= i)
			cap *= 2;
		np = realloc(g->p, cap * sizeof(*np));
		if (!np)
			return NULL;
		memset(np + g->cap, 0, (cap - g->cap) * sizeof(*np));
		g->p = np;
		g->cap = cap;
	}
	if (i >= g->n)
		g->n = i + 1;
	return &g->p[i];
}

void est_period_plan(struct est_period *p, double len, double w)
{
	if (len > p->len)
		p->len = len;
	if (w > p->wmax)
		p->wmax = w;
	if (w > 1)
		p->sampled = true;
}

double est_weight(double w, double f)
{
	/* (an unbounded F times no time outside is still none; a seen call counts at least
	 * itself, whatever F) */
	return w > 1 && f > 0 ? 1 + f * (w - 1) : 1;
}

void est_period_add(struct est_period *p, double w, const struct est_delay *d, double n, const double values[3])
{
	/* a factor below 1 is a window's share of the delay measured below 0: noise, kept so
	 * that the windows' estimates average to the truth (est_response_share), down to 0
	 * (est_delay_share), where est_weight counts the seen calls alone, as the profile's
	 * samples do */
	double factor = d ? fmax(d->mid, 0) : 1, lo = d ? fmin(fmax(d->lo, 0), factor) : factor,
	       hi = d && d->hi > factor ? d->hi : factor, a;

	if (!(w >= 1))
		w = 1;
	/* A window over all of its period saw every call (its delay corrects nothing, its
	 * own error is none); with a delay it still counts in the periods' spread, which the
	 * interval of the few sampled periods around it is taken from (an attach whose
	 * windows covered 50 of its 51 periods would have no interval at all). */
	if (w > 1 || factor != 1)
		p->sampled = true;
	p->seen += n;
	a = est_weight(w, factor);
	for (int v = 0; v < 3; v++) {
		double x = values[v] * a;

		p->raw[v] += values[v];
		p->est[v] += x;
		p->sys[0][v] += values[v] * est_weight(w, lo);
		if (values[v] != 0) /* hi may be unbounded: nothing times it is still nothing */
			p->sys[1][v] += values[v] * est_weight(w, hi);
		/* Each call's value is in the sum with probability 1/w, at weight a: its own
		 * share of the variance is (1 - 1/w) (a value)^2; the calls of a window share
		 * theirs equally. */
		if (n > 0)
			p->poisson[v] += (1 - 1 / w) * x * x / n;
	}
}

double est_t975(int df)
{
	static const double t[] = {0,	  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
				   2.201, 2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080,
				   2.074, 2.069,  2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};

	if (df < 1)
		return t[1];
	if (df <= 30)
		return t[df];
	if (df <= 60)
		return 2.042 - (2.042 - 2.000) * (df - 30) / 30.0;
	if (df <= 120)
		return 2.000 - (2.000 - 1.980) * (df - 60) / 60.0;
	return 1.96;
}

void est_group_total(const struct est_group *g, int v, struct est_total *out)
{
	double var_sd = 0, var_p = 0, sq = 0, prev = 0, raw = 0, seen_sampled = 0, len_s = 0, obs_s = 0, full = 0;
	int ns = 0, nd = 0;

	memset(out, 0, sizeof(*out));
	if (v < 0 || v > 2)
		return;
	for (size_t i = 0; i < g->n; i++)
		if (g->p[i].sampled && g->p[i].len > full)
			full = g->p[i].len;
	full /= 2;
	for (size_t i = 0; i < g->n; i++) {
		const struct est_period *p = &g->p[i];

		if (!(p->len > 0) && !p->seen)
			continue;
		out->periods++;
		out->seen += p->seen;
		out->est += p->est[v];
		out->sys_lo += p->sys[0][v];
		out->sys_hi += p->sys[1][v];
		raw += p->raw[v];
		if (!p->sampled)
			continue;
		/* Successive differences of the periods' rates, over sampled periods only
		 * (fully observed periods have no sampling error), and whole ones: a period
		 * cut short (the recording's last) has a rate as many times noisier as it is
		 * shorter, its window having seen none or all of its few calls. A 5 ms last
		 * period after 8 of 0.5 s took the interval from +-3.9% to +-194%. Its own
		 * error weighs by its length squared, and the Poisson floor holds it. */
		if (p->len >= full) {
			double r = p->len > 0 ? p->est[v] / p->len : 0;

			if (nd > 0)
				sq += (r - prev) * (r - prev);
			prev = r;
			nd++;
		}
		ns++;
		var_sd += p->len * p->len;
		var_p += p->poisson[v];
		seen_sampled += p->seen;
		len_s += p->len;
		obs_s += p->wmax > 0 ? p->len / p->wmax : p->len;
	}
	out->sampled = ns;
	if (nd >= 2)
		var_sd *= sq / (2.0 * (nd - 1));
	else
		var_sd = 0;
	{
		double var = var_sd > var_p ? var_sd : var_p, half = est_t975(nd >= 2 ? nd - 1 : 1000) * sqrt(var);

		/* The sampling error around either end of the delay correction's range. */
		if (out->sys_lo > out->est)
			out->sys_lo = out->est;
		if (out->sys_hi < out->est)
			out->sys_hi = out->est;
		out->lo = out->sys_lo - half;
		out->hi = out->sys_hi + half;
	}
	/* Whatever was seen happened: the interval never goes below it. */
	if (out->lo < raw)
		out->lo = raw;
	if (out->hi < out->est)
		out->hi = out->est;
	/* Nothing seen where sampled: at most ~3 calls in the time observed (the rule of
	 * three), scaled to the time sampled. */
	if (ns > 0 && seen_sampled == 0 && v == 0 && obs_s > 0 && out->hi < out->est + 3 * len_s / obs_s)
		out->hi = out->est + 3 * len_s / obs_s;
}

void est_group_free(struct est_group *g)
{
	free(g->p);
	g->p = NULL;
	g->n = g->cap = 0;
}
