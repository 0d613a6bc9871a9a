// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cuda.h"
#include "hmap.h"
#include "log.h"
#include "owncpu.h"
#include "profile.h"
#include "readfile.h"
#include "windows.h"

#include "windows_int.h"

static int on_guard(void *ctx, void *data, size_t len)
{
	struct windows *w = ctx;

	(void)data;
	(void)len;
	atomic_store(&w->woken, 1);
	return 0;
}

struct windows *windows__new(struct cuda_tracer *c, struct governor *gv, double period)
{
	struct windows *w = calloc(1, sizeof(*w));
	uint64_t seed = 0;
	int err;

	if (!w)
		return NULL;
	w->c = c;
	w->gv = gv;
	w->period = period;
	w->stalls = cuda__stalls(c);
	w->bare_every = cuda__bare_every(c);
	w->stop_fd = -1;
	pthread_mutex_init(&w->lock, NULL);
	w->ring = calloc(WIN_RING, sizeof(*w->ring));
	if (!w->ring) {
		err = -ENOMEM;
		goto fail;
	}
	w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->stop_fd < 0) {
		err = -errno;
		goto fail;
	}
	w->rb = ring_buffer__new(cuda__guard_fd(c), on_guard, w, NULL);
	if (!w->rb) {
		err = -errno;
		goto fail;
	}
	/* Slots drawn at random: GPUBPF_WINDOW_SEED fixes the draws (tests). */
	if (getenv("GPUBPF_WINDOW_SEED"))
		seed = strtoull(getenv("GPUBPF_WINDOW_SEED"), NULL, 0);
	else if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint64_t)(windows_now() * 1e9) ^ (uint64_t)getpid();
	w->xsubi[0] = (unsigned short)seed;
	w->xsubi[1] = (unsigned short)(seed >> 16);
	w->xsubi[2] = (unsigned short)(seed >> 32);
	for (int g = 0; g < CG__COUNT && g < gv->ngroups; g++) {
		w->gs[g].windowed = !gv->exact && !gv->g[g].always;
		/* until the recording starts, calls of windowed groups count nowhere */
		if (w->gs[g].windowed)
			cuda__set_window(c, g, CUDA_WINDOW_CLOSED, 0, 0);
	}
	w->next_id = 1;
	w->lead = 0.001;
	return w;
fail:
	windows__free(w);
	errno = -err;
	return NULL;
}

void windows__free(struct windows *w)
{
	if (!w)
		return;
	if (w->running)
		windows__stop(w);
	ring_buffer__free(w->rb);
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	for (int g = 0; g < CG__COUNT; g++)
		est_group_free(&w->est[g]);
	hmap__clear(&w->tcost);
	hmap__clear(&w->ttraps);
	hmap__clear(&w->tmark);
	hmap__clear(&w->tclosed);
	free(w->ring);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* ---- the thread's side ---------------------------------------------------------------- */

static void arm_guard(struct windows *w, int g, double t)
{
	struct gstate *s = &w->gs[g];
	uint64_t hits[CG__COUNT];
	double allow = governor__guard_hits(w->gv, g, GUARD_S);

	cuda__group_hits(w->c, hits);
	s->look_hits = hits[g];
	s->look_t = t;
	cuda__arm_guard(w->c, g, hits[g] + (uint64_t)(allow > 1 ? allow : 1));
}

/* Group G's probes in with no window open from T: every call pays its trap and counts
 * nowhere (ahead of a window, after one, or held in by a window thread that woke late). */
static void idle_begin(struct gstate *s, double t)
{
	if (s->attached && !s->cur && !(s->idle_since > 0))
		s->idle_since = t;
}

/* ... until T (a window opened, or the probes came out): the longest such time is said. */
static void idle_end(struct windows *w, int g, double t)
{
	struct gstate *s = &w->gs[g];

	if (!(s->idle_since > 0))
		return;
	pthread_mutex_lock(&w->lock);
	w->idle_max[g] = fmax(w->idle_max[g], t - s->idle_since);
	pthread_mutex_unlock(&w->lock);
	s->idle_since = 0;
}

/* Probes in for a window about to open (its gate still closed). */
static void attach(struct windows *w, int g)
{
	struct gstate *s = &w->gs[g];
	double t0 = windows_now(), t1;

	s->detach_at = 0;
	if (s->attached)
		return;
	cuda__set_group(w->c, g, true, NULL);
	s->attached = true;
	/* the breakpoints go in at the attach's end, after its wait for the kernel */
	t1 = windows_now();
	idle_begin(s, t1);
	s->ready = t1 + w->insert * SETTLE_X * s->paced;
	/* the next ones start this much earlier, and then some */
	windows_note_took(w, t1 - t0, s->warmed);
}

/* Ahead of group G's window: the kernel warmed for its attach, which then puts the
 * breakpoints in at once when the window opens (cuda__warm); where that cannot be done,
 * the attach itself, ahead. */
static void warm(struct windows *w, int g)
{
	struct gstate *s = &w->gs[g];
	double t0 = windows_now();

	if (cuda__warm(w->c)) {
		attach(w, g);
		return;
	}
	s->warmed = true;
	windows_note_took(w, windows_now() - t0, false);
}

static void open_window(struct windows *w, int g)
{
	struct gstate *s = &w->gs[g];
	uint32_t id = w->next_id++;
	struct wrec *r;
	double gate;

	if (!id || id == CUDA_WINDOW_CLOSED)
		id = w->next_id = 1, w->next_id++;
	attach(w, g);
	s->warmed = false;
	r = &w->ring[id % WIN_RING];
	pthread_mutex_lock(&w->lock);
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->group = g;
	r->period = w->pi;
	r->weight = s->weight;
	/* segments before it whose window never opened: it stands in for them too */
	windows_stand_in(s, &r->weight);
	r->planned = s->slot_len > 0 ? s->slot_len : s->wclose - s->wopen;
	s->slot_len = 0;
	{
		struct est_period *p = w->no_estimates ? NULL : est_group_period(&w->est[g], w->pi);

		if (p)
			est_period_plan(p, w->period, r->weight);
	}
	pthread_mutex_unlock(&w->lock);
	/* written ahead of its slot (windows_ahead), the gate opens exactly at it, or where
	 * the thread caught up on the probes' stall (a late attach) */
	gate = fmax(s->wopen, s->ready);
	r->bound = s->wclose;
	r->open = windows_gate_open(w, g, r, gate);
	s->wclose = r->bound;
	idle_end(w, g, r->open);
	s->pending = false;
	s->cur = r;
	w->windows++;
	arm_guard(w, g, r->open);
}

/* Whether S's pending window, due by now, still has room at T before LIMIT (the next
 * piece, or its segment's end): on time, or late with half a shortest window left. */
static bool room_at(const struct gstate *s, double t, double limit)
{
	return t - s->wopen <= LATE_S || t + MIN_SLOT / 2 < limit;
}

/* Group G's pending window is due at T. One that opens late (the thread woke late, or
 * was held in a detach, or its attach took longer than the lead, or came as it opened at
 * a period's start: 5-18 ms was seen on a loaded machine, past slots of 2-10 ms) keeps
 * its slot's length from now, within its segment, and is weighed for the length it gets
 * (w_eff). Opened for what was left of its slot, a window of 0.1 ms stood for a slot of
 * 5 ms and saw nothing; dropped, one past its slot lost a sampled period (1-3% low).
 * With no room left for it, the next window stands in for it. */
static void open_due(struct windows *w, int g, double t)
{
	struct gstate *s = &w->gs[g];
	double limit = s->nafter ? s->after[0].open : s->seg.end, late;
	bool room = true;

	/* probes out at a period's start: their attach (a grace period, 10-14 ms here) is
	 * part of how late the window opens; none for a window with no room left already */
	if (!s->attached) {
		if (!room_at(s, t, limit)) {
			w->late++;
			w->late_s += t - s->wopen;
			windows_miss(w, s, t);
			return;
		}
		attach(w, g);
		t = windows_now();
	}
	/* A thread a device paces makes up, once the queue lets it, the calls the probes'
	 * stall held back; in a window just after an attach that came late (its warm-up
	 * took longer than the median), inside it: +12% in 2 ms windows. Opened from when
	 * it caught up (s->ready, exact by the gate's bounds). */
	t = fmax(t, s->ready);
	late = t - s->wopen;
	if (late > LATE_S) {
		w->late++;
		w->late_s += late;
		room = room_at(s, t, limit);
		if (room) {
			if (!(s->slot_len > 0))
				s->slot_len = s->wclose - s->wopen;
			w->moved += t >= s->wclose;
			s->wopen = t;
			s->wclose = fmin(t + s->slot_len, limit);
		}
	}
	if (room && t < s->wclose)
		open_window(w, g);
	else
		windows_miss(w, s, t);
}

/* Close group G's window now (or as soon as its gate can be exact): its gate first,
 * then its books; returns where it closed. KEEP: the next window opens at once (the
 * probes stay); else they come out once calls in flight have returned. CUT: the guard or
 * the end cut it short. */
static double close_window(struct windows *w, int g, bool keep, bool cut)
{
	struct gstate *s = &w->gs[g];
	struct wrec *r = s->cur;
	double busiest, span, all, hits, len, closed, seen;

	if (!r)
		return 0;
	/* at its bound, however late this thread woke; just ahead of now if sooner */
	r->close = windows_gate_close(w, g, r);
	r->cut = cut;
	len = r->close - r->open;
	pthread_mutex_lock(&w->lock);
	s->paced_seen *= PACED_DECAY;
	windows_read_threads(w, g, r, &busiest, &span, &all, &hits, &closed);
	/* How much a device's queue paces the group's threads: its breakpoints go in earlier.
	 * Not by the pool alone: a window that opened while its thread caught up on the
	 * breakpoints' stall (1 ms on a 2026-12 host) reads the thread as pacing itself, the
	 * pool's share rose with it, the next breakpoints went in later, and more windows
	 * opened in a catch-up: the pool's share swung from 0 to 1, and a device-paced loop's
	 * estimate in 2 ms windows read +15% to +60% (e2e 61). A window whose own gaps say a
	 * device paced the thread holds it so for the next ones (PACED_DECAY). */
	s->paced = w->stalls ? fmax(s->paced_seen, 1 - est_response_share(&w->resp[g], false, NULL, NULL).mid) : 0;
	/* Calls that began in this window (none in the group's last: the job's start, or the
	 * end of an idle phase) came at the rate of the part from the busiest thread's first
	 * hit, not of the whole window: a 3 s launch loop that began 7 ms into its first 10 ms
	 * window read 27% of its thread in probes where it spent 90%, and the next window,
	 * planned from that, spent 25 ms of the period's 10 ms (a host whose traps cost 5 us).
	 * Read so, a burst that began late reads dearer than the group is: the next windows
	 * are the shorter for it, once. */
	seen = len;
	if (!s->called && span > 0 && span < len)
		seen = fmax(span, fmin(len, MIN_SLOT / 4));
	s->called = hits > 0;
	governor__observe(w->gv, g, busiest, all, hits, seen);
	if (len > 0.001)
		s->rate = s->rate > 0 ? (s->rate + hits / len) / 2 : hits / len;
	governor__observe_closed(w->gv, g, closed);
	pr_debug("window %u of %s: %.2f ms (%.6f-%.6f s, CLOCK_MONOTONIC), its busiest thread %.3f ms in probes "
		 "(over %.2f ms from its first hit; the plan's %.2f ms); %.3f ms with no window open before it; its "
		 "gate's stores late by %.0f and %.0f us",
		 r->id, cuda_group_names[g], len * 1e3, r->open, r->close, busiest * 1e3, span * 1e3, seen * 1e3,
		 closed * 1e3, r->slip_open * 1e6, r->slip_close * 1e6);
	/* A window opened late (its gate written after its slot began) saw its slot's
	 * instants in proportion to its length. A window cut short keeps its design weight:
	 * the rest of its slot is sampled on its own. */
	r->w_eff = r->weight;
	if (!cut && len > 0 && r->planned > 0 && r->weight > 1)
		r->w_eff = r->weight * r->planned / len;
	r->final = true;
	pthread_mutex_unlock(&w->lock);
	s->cur = NULL;
	if (!keep) {
		s->detach_at = r->close;
		idle_begin(s, r->close);
	}
	return r->close;
}

/* Probes out once their calls in flight have returned (at most a quarter period), unless
 * the next window is about to need them. */
static void maybe_detach(struct windows *w, int g, double t)
{
	struct gstate *s = &w->gs[g];

	if (!s->attached || s->cur || !(s->detach_at > 0))
		return;
	if (s->pending && s->wopen - w->lead <= t + 2 * w->lead)
		return;
	if (cuda__group_pending(w->c, g) > 0 && t < s->detach_at + w->period / 4)
		return;
	cuda__set_group(w->c, g, false, NULL);
	idle_end(w, g, windows_now());
	s->attached = false;
	s->detach_at = 0;
}

/* Group G's window ends as planned; a first window's measurement plans the rest of its
 * period. The next window starting at once keeps the probes. */
static void end_window(struct windows *w, int g, double t)
{
	struct gstate *s = &w->gs[g];

	if (s->first && s->seg.end > t + MIN_SLOT) {
		double end = s->seg.end, weight = s->seg.weight, at;

		/* The rest from where the gate closed (at its bound, or just ahead of now where
		 * that is sooner), not from this thread's waking: one that woke past the bound
		 * left the instants between them in no window and in no plan. */
		at = close_window(w, g, false, false); /* measures the group */
		if (!(at > 0))
			at = t;
		pthread_mutex_lock(&w->lock);
		governor__plan(w->gv);
		pthread_mutex_unlock(&w->lock);
		windows_plan(w, g, est_segment_split(at, end, weight), w->gv->g[g].duty, false, false);
	} else {
		close_window(w, g, false, false);
		windows_next_piece(s); /* the slot's second piece, if it has one */
	}
	if (s->pending && s->wopen - windows_ahead(w, s, false) <= t)
		open_due(w, g, t);
}

static void guard_check(struct windows *w, double t)
{
	uint64_t hits[CG__COUNT];

	cuda__group_hits(w->c, hits);
	for (int g = 0; g < CG__COUNT; g++) {
		struct gstate *s = &w->gs[g];
		double n = (double)(hits[g] - s->look_hits), dt = t - s->look_t;

		if (!s->windowed || !s->cur)
			continue;
		if (n > 0 && dt > 0 && governor__guard(w->gv, g, n, dt)) {
			double end = s->wclose, d;
			int k;

			pthread_mutex_lock(&w->lock);
			governor__saturated(w->gv, g);
			governor__plan(w->gv);
			d = w->gv->g[g].duty;
			pthread_mutex_unlock(&w->lock);
			k = est_slots(d, end - t, MIN_SLOT);
			/* Too little left to sample: it stays open, at most 2 * MIN_SLOT. */
			if (k >= 2) {
				double weight = s->cur->weight;

				pr_debug(
				    "guard: %s cut at %.0f hits in %.1f ms; the rest of its window sampled 1 in %d",
				    cuda_group_names[g], n, dt * 1e3, k);
				/* the rest from where the gate closed */
				double at = close_window(w, g, false, true);

				w->cuts++;
				windows_plan(w, g, est_segment_split(at, end, weight), d, false, true);
				continue;
			}
		}
		arm_guard(w, g, t);
	}
}

/* A period ended: its books closed, what it spent over the budget owed, the next planned. */
static void new_period(struct windows *w)
{
	double over;

	w->pi++;
	for (int g = 0; g < CG__COUNT; g++) {
		struct gstate *s = &w->gs[g];

		close_window(w, g, false, false);
		while (s->pending)
			windows_miss(w, s, windows_now());
	}
	pthread_mutex_lock(&w->lock);
	over = governor__overspent(w->gv, CG__COUNT, windows_period_spent(w), w->period);
	governor__repay(w->gv, w->period);
	/* what a window costs gpubpf itself, over the recording: the window thread's work on
	 * windows (attaches, gates, books) and the detaching threads' */
	if (w->windows >= 4)
		w->gv->own_window = (double)(w->own_ns + cuda__close_cpu_ns(w->c)) / 1e9 / (double)w->windows;
	governor__plan(w->gv);
	windows_warn_floored(w);
	pthread_mutex_unlock(&w->lock);
	if (over > 0)
		pr_debug("period %zu: the probes %.3f ms over their budget, owed", w->pi - 1, over * 1e3);
	for (int g = 0; g < CG__COUNT; g++) {
		struct gstate *s = &w->gs[g];
		bool first = !w->gv->g[g].measured;

		if (!s->windowed)
			continue;
		/* one slot in each part of the period (governor.c, strata_for) */
		s->strata = !first && w->gv->g[g].strata > 1 ? w->gv->g[g].strata : 1;
		s->stratum = 0;
		windows_plan(w, g, windows_stratum(w, 0, s->strata), w->gv->g[g].duty, first, false);
		/* open from the boundary: the probes stay, the calls go to the new window */
		if (s->wopen - windows_ahead(w, s, false) <= w->period_start)
			open_due(w, g, windows_now());
	}
}

static void *run(void *arg)
{
	struct windows *w = arg;
	int rb_fd = ring_buffer__epoll_fd(w->rb);
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	/* its wake-ups on time within AHEAD_S: not the 50 us a thread's timers may slip */
	prctl(PR_SET_TIMERSLACK, 1000UL);
	for (;;) {
		struct pollfd pf[2] = {{.fd = w->stop_fd, .events = POLLIN}, {.fd = rb_fd, .events = POLLIN}};
		double t = windows_now(), next = t + GUARD_S;
		bool look = atomic_exchange(&w->woken, 0);
		struct timespec to;
		uint64_t own0;

		for (int g = 0; g < CG__COUNT; g++)
			look = look || (w->gs[g].cur && t >= w->gs[g].look_t + GUARD_S * 0.8);
		if (look)
			guard_check(w, t);
		own0 = owncpu_thread_ns();
		while (t >= w->period_start + w->period) {
			w->period_start += w->period;
			new_period(w);
		}
		for (int g = 0; g < CG__COUNT; g++) {
			struct gstate *s = &w->gs[g];

			if (!s->windowed)
				continue;
			t = windows_now();
			if (s->cur && t >= s->wclose)
				end_window(w, g, t);
			/* the window of this part of the period is over (or was dropped): the next */
			if (!s->cur && !s->pending && s->stratum + 1 < s->strata) {
				s->stratum++;
				windows_plan(w, g, windows_stratum(w, s->stratum, s->strata), w->gv->g[g].duty, false,
					     false);
			}
			/* the warm-up ends about as its probes go in (it waits for a grace
			 * period; warmed any earlier, the attach would wait for another) */
			if (!s->cur && s->pending && !s->attached && !s->warmed &&
			    t >= s->wopen - w->lead - windows_ahead(w, s, true))
				warm(w, g);
			if (!s->cur && s->pending && s->warmed && !s->attached &&
			    t >= s->wopen - windows_ahead(w, s, true))
				attach(w, g);
			if (!s->cur && s->pending && t >= s->wopen - windows_ahead(w, s, false))
				open_due(w, g, t);
			maybe_detach(w, g, t);
			if (s->cur && s->wclose < next)
				next = s->wclose;
			if (!s->cur && s->pending)
				next = fmin(next, s->attached ? s->wopen - windows_ahead(w, s, false)
						  : s->warmed ? s->wopen - windows_ahead(w, s, true)
							      : s->wopen - w->lead - windows_ahead(w, s, true));
			if (s->detach_at > 0 && s->attached)
				next = fmin(next, t + 0.005);
		}
		w->own_ns += owncpu_thread_ns() - own0;
		if (w->period_start + w->period < next)
			next = w->period_start + w->period;
		t = windows_now();
		if (next < t)
			next = t;
		to.tv_sec = (time_t)(next - t);
		to.tv_nsec = (long)((next - t - (double)to.tv_sec) * 1e9);
		if (ppoll(pf, 2, &to, NULL) > 0) {
			if (pf[0].revents)
				break;
			if (pf[1].revents)
				ring_buffer__consume(w->rb);
		}
	}
	/* The end: every open window closes here (its slot, cut by the end, is the part
	 * recorded), and the probes stay for the final drain. */
	w->stop_t = windows_now();
	pr_debug("windows: %" PRIu64 " opened, %" PRIu64 " cut by the guard, %" PRIu64
		 " opened late (%.1f ms in all), %" PRIu64 " of them past their slot, %" PRIu64
		 " segments with none stood in for by the next; probes attached "
		 "%.2f ms before a window; %" PRIu64 " gate bounds stored late, by %.0f us at most",
		 w->windows, w->cuts, w->late, w->late_s * 1e3, w->moved, w->missed, w->lead * 1e3, w->slips,
		 w->slip_max * 1e6);
	for (int g = 0; g < CG__COUNT; g++) {
		if (w->gs[g].cur)
			close_window(w, g, true, w->gs[g].wclose > w->stop_t);
		idle_end(w, g, w->stop_t);
	}
	return NULL;
}

int windows__start(struct windows *w)
{
	double t = windows_now();
	int err;

	w->start = w->period_start = t;
	w->pi = 0;
	/* Period 0: every group is attached since load, its first window opens now. */
	pthread_mutex_lock(&w->lock);
	governor__plan(w->gv);
	pthread_mutex_unlock(&w->lock);
	for (int g = 0; g < CG__COUNT; g++) {
		struct gstate *s = &w->gs[g];
		struct est_segment seg = {.start = t, .end = t + w->period, .weight = 1};

		if (!s->windowed)
			continue;
		s->attached = true;
		windows_plan(w, g, seg, w->gv->g[g].duty, !w->gv->g[g].measured, false);
		if (s->wopen <= t)
			open_window(w, g);
		else {
			s->detach_at = t;
			idle_begin(s, t);
		}
	}
	err = pthread_create(&w->thread, NULL, run, w);
	if (err)
		return -err;
	w->running = true;
	return 0;
}

void windows__stop(struct windows *w)
{
	uint64_t one = 1;

	if (!w || !w->running)
		return;
	if (write(w->stop_fd, &one, sizeof(one)) != sizeof(one))
		pr_debug("cannot wake the window thread: %s", strerror(errno));
	pthread_join(w->thread, NULL);
	w->running = false;
}
