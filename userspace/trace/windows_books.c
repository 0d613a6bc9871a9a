// SPDX-License-Identifier: MIT
/* The books of a window, right after its gate closed: what each thread that hit it paid
 * (its probes' time, and what they cost it with no window open since the last look), and
 * the calls its probes' delay pushed out of it (the delay correction). windows.c's thread
 * calls it under the books' lock; windows__summary reads them over the recording. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "estimate.h"
#include "governor.h"
#include "hmap.h"
#include "log.h"
#include "readfile.h"

#include "windows_int.h"

/* The thread's books: SPENT ns more in probes, TRAPS of them calibrated traps and WORK
 * what their work cost its own code after them (est_bare). */
static void book(struct windows *w, uint32_t tid, uint64_t spent, uint64_t traps, uint64_t work)
{
	uint64_t v = 0;

	hmap__get(&w->tcost, tid, 0, 0, &v);
	hmap__put(&w->tcost, tid, 0, 0, v + spent);
	v = 0;
	hmap__get(&w->ttraps, tid, 0, 0, &v);
	hmap__put(&w->ttraps, tid, 0, 0, v + traps);
	if (work) {
		v = 0;
		hmap__get(&w->ttraps, tid, 1, 0, &v);
		hmap__put(&w->ttraps, tid, 1, 0, v + work);
	}
}

/* What group G's probes cost each thread in with no window open since the last look (the
 * lead before this window, the tail after the last: attaching and detaching wait for the
 * kernel): into the threads' books; the busiest thread's part, in seconds, returned. */
static double read_closed(struct windows *w, int g, double trap_scale)
{
	uint32_t tids[WIN_THREADS];
	struct cuda_tclosed st[WIN_THREADS];
	int n = cuda__closed_threads(w->c, g, tids, st, WIN_THREADS);
	double busiest = 0;

	for (int i = 0; i < n; i++) {
		uint64_t cost = 0, traps = 0;
		double paid;

		hmap__get(&w->tclosed, tids[i], (uint64_t)g, 0, &cost);
		hmap__get(&w->tclosed, tids[i], (uint64_t)g, 1, &traps);
		/* an entry the LRU map dropped and made anew starts from 0 */
		cost = st[i].cost_ns >= cost ? st[i].cost_ns - cost : st[i].cost_ns;
		traps = st[i].traps_ns >= traps ? st[i].traps_ns - traps : st[i].traps_ns;
		hmap__put(&w->tclosed, tids[i], (uint64_t)g, 0, st[i].cost_ns);
		hmap__put(&w->tclosed, tids[i], (uint64_t)g, 1, st[i].traps_ns);
		if (!cost)
			continue;
		paid = (double)cost + (trap_scale - 1) * (double)traps;
		book(w, tids[i], paid > 0 ? (uint64_t)paid : 0, traps, 0);
		cost = 0;
		hmap__get(&w->tclosed, tids[i], CG__COUNT, 2, &cost);
		hmap__put(&w->tclosed, tids[i], CG__COUNT, 2, cost + (paid > 0 ? (uint64_t)paid : 0));
		if (paid / 1e9 > busiest)
			busiest = paid / 1e9;
	}
	return busiest;
}

/* The share of a thread's probes' delay that pushed its calls out of the window it just
 * closed, by the stalls in it (estimate.h, est_response): by the window's own gaps where
 * they say it well enough (a job's pace changes, as when a device queue fills after the
 * start: the window's gaps say how it was then; and their noise averages out over windows,
 * as a share clamped to 0-1 or weighed against 1 would not), else by the group's latest
 * windows, each weighed at most EST_RESPONSE_WINDOW gaps. Into the group's books either way. */
/* Under lock: the launches' share from the device's records (windows__device_pace), where
 * group G is the launches' and enough came in lately. */
static bool device_share(const struct windows *w, int g, struct est_delay *s)
{
	double n = w->pace[0] + w->pace[1];

	if (g != CG_LAUNCH || n < EST_PACE_MIN)
		return false;
	s->mid = s->lo = s->hi = w->pace[0] / n;
	return true;
}

static struct est_delay thread_share(struct windows *w, int g, const struct cuda_tstate *st)
{
	double n[2] = {st->gap_n[0], st->gap_n[1]}, sum[2] = {(double)st->gap_ns[0], (double)st->gap_ns[1]},
	       sq[2] = {(double)st->gap_sq[0], (double)st->gap_sq[1]};
	struct est_response mine = {0}, capped;
	bool own;

	est_response_add(&mine, n, sum, sq, (double)st->stall_sum_ns, st->stalls);
	{
		double paced = est_response_paced(&mine);

		if (paced > w->gs[g].paced_seen)
			w->gs[g].paced_seen = paced;
	}
	est_response_pool(&w->resp_all[g], &mine, 0);
	capped = mine;
	est_response_cap(&capped, EST_RESPONSE_WINDOW);
	est_response_pool(&w->resp[g], &capped, EST_RESPONSE_MEMORY);
	{
		struct est_delay s;

		if (device_share(w, g, &s))
			return s;
	}
	if (!w->stalls)
		return (struct est_delay){1, 1, 1};
	own = est_response_precise(&mine);
	return est_response_share(own ? &mine : &w->resp[g], own, NULL, NULL);
}

/* What a counted call's work costs group G's threads' own code after it, beyond its run
 * time, by the gaps after bare calls (estimate.h, est_bare) pooled over the recording with
 * thread ST's in the window just closed; at the share of a delay that pushes calls out
 * pooled alike. 0 (0-0) where no calls are bare. */
static struct est_delay work_cost(struct windows *w, int g, const struct cuda_tstate *st)
{
	double n[2] = {st->gap_n[0], st->gap_n[2]}, sum[2] = {(double)st->gap_ns[0], (double)st->gap_ns[2]},
	       sq[2] = {(double)st->gap_sq[0], (double)st->gap_sq[2]},
	       prog[2] = {(double)st->gap_prog_ns[0], (double)st->gap_prog_ns[2]};

	if (!w->bare_every)
		return (struct est_delay){0, 0, 0};
	est_bare_add(&w->bare[g], n, sum, sq, prog);
	return est_bare_cost(&w->bare[g], w->stalls ? est_response_share(&w->resp_all[g], false, NULL, NULL).mid : 1,
			     NULL, NULL);
}

/* How much longer than their CPU time the probes took of a run of thread ST
 * (est_run_stretch): beside two CPU hogs on this 2-CPU VM a launch loop's calls took 3.3
 * us longer in a window where its probes ran 1.7 us a hit, and the correction then held
 * the truth in 0-6 of 43-55 windows. */
static double run_stretch(const struct cuda_tstate *st)
{
	return est_run_stretch(st->last_ns > st->run_start_ns ? (double)(st->last_ns - st->run_start_ns) : 0,
			       (double)st->run_wait_ns);
}

/* Thread ST's delay correction (est_run_delay), the work of each of its run's calls that
 * did it costing WORK more (mid, lo, hi: each end of the range at that end), all of it
 * stretched X times (run_stretch). */
static struct est_delay run_delay(const struct cuda_tstate *st, const struct est_delay *scale, struct est_delay work,
				  double x, bool slept)
{
	double walked = st->run_calls > st->run_bare ? (double)(st->run_calls - st->run_bare) : 0, at[3];
	struct est_delay d[3];

	at[0] = work.mid, at[1] = work.lo, at[2] = work.hi;
	for (int k = 0; k < (work.hi > 0 ? 3 : 1); k++)
		d[k] =
		    est_run_delay(st->calls, st->run_calls, (double)st->run_start_ns / 1e9, (double)st->last_ns / 1e9,
				  x * ((double)st->backlog_ns / 1e9 + at[k] * walked),
				  x * (double)st->run_trap_ns / 1e9, scale, x * (double)st->last_cost_ns / 1e9, slept);
	if (!(work.hi > 0))
		return d[0]; /* no bare calls, or no cost measured: one delay, its own range */
	return (struct est_delay){d[0].mid, d[1].lo, d[2].hi};
}

/* A thread a device's queue paces makes up, once the queue lets it, the calls a stall
 * held back; the breakpoints going in stall it (0.3-0.5 ms here), and so do its traps
 * before the gate opens. The window thread waits for that (windows_ahead, s->ready), but
 * where the thread made them up inside the window all the same (a launch loop paced at 10 us a
 * kernel: +4% to +12% in 2 ms windows), the window saw calls that belong before it. Its
 * range goes down by as many as that time, the attach's and CLOSED's, would hold. */
static void paced_catch_up(const struct windows *w, struct wrec *r, double closed)
{
	double len = r->close - r->open, keep;

	if (!(len > 0))
		return;
	keep = fmax(0.01, 1 - (w->insert + closed) / len);
	for (int i = 0; i < r->nthr; i++)
		if (r->thr[i].paced)
			r->thr[i].lo = (float)(keep * r->thr[i].lo);
}

bool windows__task_slept(uint32_t tgid, uint32_t tid, uint64_t nvcsw)
{
	char path[64], *text, *p;
	bool slept;

	snprintf(path, sizeof(path), "/proc/%u/task/%u/status", tgid, tid);
	text = readfile__path(path, 1 << 16, true, NULL);
	p = text ? strstr(text, "\nvoluntary_ctxt_switches:") : NULL;
	slept = !p || strtoull(p + 25, NULL, 10) != nvcsw;
	free(text);
	return slept;
}

/* The threads that hit window R: their delay corrections, and the costs for the
 * governor and the busiest thread's books. Right after the gate closed. */
void windows_read_threads(struct windows *w, int g, struct wrec *r, double *busiest, double *span, double *all,
			  double *hits, double *closed)
{
	uint32_t tids[WIN_THREADS];
	struct cuda_tstate st[WIN_THREADS];
	int n = cuda__window_threads(w->c, g, r->id, tids, st, WIN_THREADS);
	double per_window = governor__window_cost(w->gv);

	*busiest = *span = *all = *hits = 0;
	for (int i = 0; i < n; i++) {
		struct est_delay d, scale, share, work;
		double cost, work_paid, x = run_stretch(&st[i]);
		bool slept;

		/* Did the thread sleep after its last call in the window (its delay made up)? */
		slept = windows__task_slept((uint32_t)st[i].tgid, tids[i], st[i].nvcsw);
		/* A run that never slept spent its kernel time in its probes: the programs'
		 * part timed, the traps' calibrated, both up to its last call's entry. */
		if (!slept && st[i].run_calls >= 2 && st[i].backlog_ns > st[i].last_cost_ns && st[i].run_trap_ns) {
			double span = (double)(st[i].backlog_ns - st[i].last_cost_ns),
			       tshare = (double)st[i].run_trap_ns / (double)st[i].backlog_ns;

			est_traps_add(&w->traps, st[i].run_stime_ns, st[i].run_utime_ns, span * (1 - tshare),
				      span * tshare);
		}
		scale = est_traps_scale(&w->traps, NULL);
		share = thread_share(w, g, &st[i]);
		work = work_cost(w, g, &st[i]);
		d = run_delay(&st[i], &scale, work, x, slept);
		/* ... as far as the delay pushes calls out at all */
		d = est_delay_share(d, share);
		r->thr[r->nthr].tid = tids[i];
		r->thr[r->nthr].f = (float)d.mid;
		r->thr[r->nthr].lo = (float)d.lo;
		r->thr[r->nthr].hi = (float)d.hi;
		r->thr[r->nthr].walked =
		    st[i].calls > st[i].bare ? (float)st[i].calls / (float)(st[i].calls - st[i].bare) : 1;
		r->thr[r->nthr].paced = share.hi < 1;
		if (d.mid > 1.01)
			pr_debug(
			    "window %u of %s: thread %u made %u calls (%u since it last slept) in %.0f us, its "
			    "probes' delay %.0f us (traps %.0f us of it, at x%.2f (x%.2f-x%.2f); stretched x%.2f by "
			    "%.0f us its run waited for a CPU; its kernel time "
			    "%.0f ms, user %.0f ms; of the delay %.2f (%.2f-%.2f) pushes calls out): x%.3f "
			    "(x%.3f-x%.3f)",
			    r->id, cuda_group_names[g], tids[i], st[i].calls, st[i].run_calls,
			    (double)(st[i].last_ns - st[i].run_start_ns) / 1e3, x * (double)st[i].backlog_ns / 1e3,
			    (double)st[i].run_trap_ns / 1e3, scale.mid, scale.lo, scale.hi, x,
			    (double)st[i].run_wait_ns / 1e3, (double)st[i].run_stime_ns / 1e6,
			    (double)st[i].run_utime_ns / 1e6, share.mid, share.lo, share.hi, d.mid, d.lo, d.hi);
		r->nthr++;
		/* What the thread paid: its traps at what they cost in the job, as far as the
		 * ticks have timed them (the governor plans from it, the summary says it; the
		 * multiple is at least 0.25, so the cost never goes below the programs'). */
		work_paid = work.mid * 1e9 * (st[i].calls - st[i].bare);
		cost = (double)st[i].cost_ns + (scale.mid - 1) * (double)st[i].traps_ns + work_paid;
		*all += cost / 1e9;
		*hits += st[i].hits;
		if (cost / 1e9 > *busiest) {
			*busiest = cost / 1e9;
			*span = r->close - (double)st[i].first_ns / 1e9;
		}
		book(w, tids[i], (uint64_t)cost + (uint64_t)(per_window * 1e9), st[i].traps_ns, (uint64_t)work_paid);
	}
	*closed = read_closed(w, g, est_traps_scale(&w->traps, NULL).mid);
	paced_catch_up(w, r, *closed);
}

double windows_period_spent(struct windows *w)
{
	uint64_t most = 0;

	hmap_for_each(&w->tcost, e)
	{
		uint64_t mark = 0;

		hmap__get(&w->tmark, e->k[0], 0, 0, &mark);
		if (e->val > mark && e->val - mark > most)
			most = e->val - mark;
		hmap__put(&w->tmark, e->k[0], 0, 0, e->val);
	}
	return (double)most / 1e9;
}

/* The share of group G's probes' delay that pushes calls out, pooled (windows.h). */
struct est_delay windows__share(struct windows *w, int g)
{
	struct est_delay s = {1, 1, 1};

	if (!w || g < 0 || g >= CG__COUNT)
		return s;
	pthread_mutex_lock(&w->lock);
	if (!device_share(w, g, &s) && w->stalls)
		s = est_response_share(&w->resp[g], false, NULL, NULL);
	pthread_mutex_unlock(&w->lock);
	return s;
}

void windows__device_pace(struct windows *w, double free, double queued)
{
	double n;

	if (!w || !(free >= 0) || !(queued >= 0))
		return;
	pthread_mutex_lock(&w->lock);
	w->pace_all[0] += free;
	w->pace_all[1] += queued;
	n = w->pace[0] + w->pace[1];
	/* the older weighed down as newer come, as the stalls' gaps are (a job's pace
	 * changes: a queue fills after the start) */
	if (n > 0 && n + free + queued > EST_PACE_MEMORY) {
		double keep = fmax(EST_PACE_MEMORY - free - queued, EST_PACE_MEMORY / 4) / n;

		if (keep < 1) {
			w->pace[0] *= keep;
			w->pace[1] *= keep;
		}
	}
	w->pace[0] += free;
	w->pace[1] += queued;
	pthread_mutex_unlock(&w->lock);
}

/* The books over the recording (windows.h). */
void windows__summary(struct windows *w, struct windows_summary *out)
{
	uint64_t max = 0, traps = 0, closed = 0, work = 0;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&w->lock);
	/* The last period ends with the recording: its length is what was recorded of it. */
	for (int g = 0; g < CG__COUNT; g++) {
		if (w->stop_t > 0 && w->est[g].n > w->pi)
			w->est[g].p[w->pi].len = w->stop_t - w->period_start;
		est_group_total(&w->est[g], 0, &out->calls[g]);
		est_group_total(&w->est[g], 1, &out->value[g]);
	}
	hmap_for_each(&w->tcost, e) if (e->val > max)
	{
		max = e->val;
		out->busiest_tid = (int)e->k[0];
	}
	if (max) {
		hmap__get(&w->ttraps, (uint64_t)out->busiest_tid, 0, 0, &traps);
		hmap__get(&w->ttraps, (uint64_t)out->busiest_tid, 1, 0, &work);
		hmap__get(&w->tclosed, (uint64_t)out->busiest_tid, CG__COUNT, 2, &closed);
	}
	out->trap_scale = est_traps_scale(&w->traps, &out->trap_ticks);
	memcpy(out->resp, w->resp_all, sizeof(out->resp));
	out->stalls = w->stalls;
	memcpy(out->pace, w->pace_all, sizeof(out->pace));
	memcpy(out->bare, w->bare, sizeof(out->bare));
	out->bare_every = w->bare_every;
	out->windows = w->windows;
	out->guard_cuts = w->cuts;
	out->late = w->late;
	out->late_s = w->late_s;
	out->missed = w->missed;
	out->slips = w->slips;
	out->slip_max = w->slip_max;
	memcpy(out->idle_max, w->idle_max, sizeof(out->idle_max));
	out->elapsed = (w->stop_t > 0 ? w->stop_t : windows_now()) - w->start;
	pthread_mutex_unlock(&w->lock);
	out->probes = (double)max / 1e9;
	out->probes_traps = (double)traps / 1e9;
	out->probes_closed = (double)closed / 1e9;
	out->probes_work = (double)work / 1e9;
}
