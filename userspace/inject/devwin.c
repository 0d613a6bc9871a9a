// SPDX-License-Identifier: MIT
/* Device time in windows, the library's side (bpf/cupti.h, struct dev_config): measure
 * what device time costs a launch in this job, then turn CUPTI's activity and callbacks
 * on only in one window a period, its slot drawn at random at the duty gpubpf planned,
 * and keep each window's books where gpubpf reads them.
 *
 * Why here and not from gpubpf: a window of a few milliseconds must open on time, and
 * only a thread of the job can call CUPTI. The watcher sleeps until the next switch.
 *
 * The measurement: with callbacks on, activity is off, on, and off again (measure_step)
 * while the launching threads time their launch calls, outermost API enter to exit, in
 * the callbacks (records.c). The mean of each half (on; the two offs) is the call's
 * cost with and without activity, over the faster half of each (on a real GPU a launch blocks
 * while the device's queue is full, and a thread is preempted mid-call: neither says
 * anything of CUPTI's cost, which is the fast path's); their difference is what activity
 * adds to a launch. The
 * library's own time in its callbacks is timed too. CUPTI's own dispatch to a callback is
 * in both halves and so in neither figure. No CUPTI types here: unit-tested. */
#include <stdlib.h>
#include <string.h>

#include "inject.h"

uint32_t inj_slots(uint32_t ppm, uint64_t period)
{
	uint64_t k, most;

	if (!ppm || ppm >= 1000000 || !period)
		return 1;
	k = (1000000 + ppm - 1) / ppm;
	most = period / INJ_MIN_SLOT_NS;
	if (k > most)
		k = most;
	return k < 1 ? 1 : (uint32_t)k;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

uint32_t inj_tmean(uint32_t *v, uint32_t n)
{
	uint64_t sum = 0;
	uint32_t m;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_u32);
	m = (n + 1) / 2;
	for (uint32_t i = 0; i < m; i++)
		sum += v[i];
	return (uint32_t)(sum / m);
}

static uint64_t rng(struct inj_sched *sc, uint64_t now)
{
	uint64_t x = sc->rng ? sc->rng : (now | 1) * 0x9e3779b97f4a7c15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	sc->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* The measurement is over: its figures into the config, or DEV_COST_IDLE. */
static void measure_end(struct inj_sched *sc, struct inj_state *s, volatile struct dev_config *cfg, uint64_t now)
{
	struct inj_timing *t = &s->timing;
	uint32_t n0 = __atomic_load_n(&t->n[0], __ATOMIC_ACQUIRE), n1 = __atomic_load_n(&t->n[1], __ATOMIC_ACQUIRE);
	uint64_t cb = __atomic_load_n(&t->cb_ns, __ATOMIC_RELAXED),
		 calls = __atomic_load_n(&t->cb_calls, __ATOMIC_RELAXED);
	uint32_t off1 = t->phase > 0 ? t->off1 : n0;

	__atomic_store_n(&t->on, false, __ATOMIC_RELEASE);
	__atomic_store_n(&t->activity, false, __ATOMIC_RELEASE);
	n0 = n0 < INJ_TIMED_MAX ? n0 : INJ_TIMED_MAX;
	n1 = n1 < INJ_TIMED_MAX ? n1 : INJ_TIMED_MAX;
	off1 = off1 < n0 ? off1 : n0;
	cfg->cost.calls = n0 + n1;
	cfg->cost.done = now;
	if (off1 < INJ_MEASURE_MIN || n1 < INJ_MEASURE_MIN) {
		cfg->cost.state = DEV_COST_IDLE;
		sc->retry_at = now + INJ_REMEASURE_NS;
		return;
	}
	/* the launch without activity before and after it: a job's drift cancels */
	cfg->cost.off_ns = inj_tmean(t->ns[0], off1);
	if (n0 - off1 >= INJ_MEASURE_MIN)
		cfg->cost.off_ns = (cfg->cost.off_ns + inj_tmean(t->ns[0] + off1, n0 - off1)) / 2;
	cfg->cost.on_ns = inj_tmean(t->ns[1], n1);
	cfg->cost.callback_ns = calls ? cb / calls : 0;
	/* it set CUPTI up and tore it down once, as a window does: what gpubpf plans the
	 * windows' period from before the first one (a window's own replace it) */
	if (!cfg->cost.switch_ns)
		cfg->cost.switch_ns = sc->measure_switch_ns;
	/* Callbacks were on from attach to here and named every launch handle the job used
	 * meanwhile: between windows they cost a launch 0.4-1.4 us on an H100 (cupti_cost's
	 * "callbacks"), so they go off now, and on again where gpubpf meets a launch it
	 * could not name (its next tick writes names_wanted again). */
	cfg->names_wanted = 0;
	__atomic_store_n(&cfg->cost.state, DEV_COST_DONE, __ATOMIC_RELEASE);
}

static void measure_start(struct inj_sched *sc, struct inj_state *s, volatile struct dev_config *cfg, uint64_t now)
{
	struct inj_timing *t = &s->timing;

	sc->measure_switch_ns = 0;
	t->n[0] = t->n[1] = 0;
	t->cb_ns = t->cb_calls = 0;
	t->activity = false;
	t->phase = 0;
	t->off1 = 0;
	t->phase_at = now;
	t->first = 0;
	cfg->cost.started = now;
	cfg->cost.done = 0;
	cfg->cost.calls = 0;
	cfg->cost.state = DEV_COST_MEASURING;
	__atomic_store_n(&t->on, true, __ATOMIC_RELEASE);
}

static void next_phase(struct inj_timing *t, uint64_t now)
{
	__atomic_store_n(&t->phase, t->phase + 1, __ATOMIC_RELEASE);
	t->phase_at = now;
	t->first = 0;
	__atomic_store_n(&t->activity, t->phase == 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&t->gen, 1, __ATOMIC_ACQ_REL);
}

/* The measurement's step: callbacks on; activity off, then on, then off again (each
 * phase a third of INJ_MEASURE_NS at most; the "off" ones half of INJ_MEASURE_CALLS
 * calls each, the "on" one all of it). Not on and off in slices: once activity has been
 * on, a launch costs more until CUPTI is finalized (cupti_set), so the last phase comes
 * after a finalize, and an "off" right after an "on" would not be the launch without
 * device time. A first phase with too few calls ends it (DEV_COST_IDLE) before activity
 * was ever on. */
static int measure_step(struct inj_sched *sc, struct inj_state *s, volatile struct dev_config *cfg, uint64_t now,
			uint64_t *wake)
{
	struct inj_timing *t = &s->timing;
	uint32_t n0 = __atomic_load_n(&t->n[0], __ATOMIC_RELAXED), n1 = __atomic_load_n(&t->n[1], __ATOMIC_RELAXED);
	bool over = now - t->phase_at >= INJ_MEASURE_NS / 3;

	/* The first phase's time runs from INJ_MEASURE_WARMUP_NS after the job's first
	 * launch call, not from attach: a job attached at cuInit creates its context first
	 * (hundreds of ms on an H100), and a callback that no call meets costs nothing; and
	 * a job's first launches are not its launches (modules load; an empty device queue
	 * fills, so a device-bound job's first calls return at once and later ones wait for
	 * a kernel to end: "off" then timed the fast ones, and CUPTI was charged the wait).
	 * Calls until then are not kept. A job with no launch at all for
	 * INJ_MEASURE_WAIT_NS is idle. */
	if (t->phase == 0 && !n0 && !t->first) {
		over = now - t->phase_at >= INJ_MEASURE_WAIT_NS;
	} else if (t->phase == 0 && (!t->first || now < t->first + INJ_MEASURE_WARMUP_NS)) {
		if (!t->first)
			t->first = now;
		__atomic_store_n(&t->n[0], 0, __ATOMIC_RELEASE);
		n0 = 0;
		over = false;
	} else if (t->phase == 0) {
		over = now - (t->first + INJ_MEASURE_WARMUP_NS) >= INJ_MEASURE_NS / 3;
	} else if (t->phase == 2 && (!t->first || now < t->first + INJ_MEASURE_SETTLE_NS) && n0 > t->off1) {
		/* the same after the finalize: the launching thread that ran it stalled, and a
		 * device-bound job's queue fills again (a millisecond or so) */
		if (!t->first)
			t->first = now;
		__atomic_store_n(&t->n[0], t->off1, __ATOMIC_RELEASE);
		n0 = t->off1;
	}
	if (t->phase == 0 && (over || n0 >= INJ_MEASURE_CALLS / 2)) {
		/* the calls kept: a launch of 5 us makes 800 in one look, and the last phase
		 * needs room for its own (drift cancels only with both) */
		t->off1 = n0 < INJ_TIMED_MAX / 2 ? n0 : INJ_TIMED_MAX / 2;
		if (n0 < INJ_MEASURE_MIN)
			goto end;
		next_phase(t, now);
		__atomic_store_n(&t->n[0], t->off1, __ATOMIC_RELEASE);
	} else if (t->phase == 1 && (over || n1 >= INJ_MEASURE_CALLS)) {
		if (n1 < INJ_MEASURE_MIN)
			goto end;
		next_phase(t, now);
	} else if (t->phase == 2 && (over || n0 - t->off1 >= INJ_MEASURE_CALLS / 2)) {
		goto end;
	}
	/* a look every INJ_SLICE_NS for the calls' count */
	*wake = now + INJ_SLICE_NS;
	return INJ_CB | (t->phase == 1 ? INJ_ACT : 0);
end:
	measure_end(sc, s, cfg, now);
	*wake = now;
	return 0;
}

/* Plan the window of period P (counted from sc->origin): K slots, one drawn. */
static volatile struct dev_win *plan(struct inj_sched *sc, volatile struct dev_config *cfg, uint64_t p, uint64_t period,
				     uint64_t now)
{
	uint32_t id = cfg->win_next ? cfg->win_next : 1, k = inj_slots(cfg->duty_ppm, period);
	uint64_t j = k > 1 ? (rng(sc, now) >> 11) % k : 0, start = sc->origin + p * period;
	volatile struct dev_win *w = &cfg->win[id % DEV_WIN_RING];

	w->id = 0; /* a reader never sees half of an entry as the new window's */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	w->k = k;
	/* where its period begins, in gpubpf's periods */
	w->period = start / ((uint64_t)cfg->period_ms * 1000000ull);
	w->slot_open = start + j * period / k;
	w->slot_close = j + 1 >= k ? start + period : start + (j + 1) * period / k;
	w->open = w->close = w->launches = w->switch_ns = 0;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	w->id = id;
	cfg->win_next = id + 1 ? id + 1 : 1;
	sc->period = p;
	sc->cur = id % DEV_WIN_RING + 1;
	return w;
}

/* gpubpf's EVERY as a power of two, at most 64 */
static uint32_t every_of(volatile struct dev_config *cfg)
{
	uint32_t e = 1;

	while (e < cfg->every && e < 64)
		e *= 2;
	return e;
}

int inj_sched_step(struct inj_sched *sc, struct inj_state *s, volatile struct dev_config *cfg, uint64_t now,
		   uint64_t *wake)
{
	uint64_t unit = (uint64_t)cfg->period_ms * 1000000ull, period, p;
	volatile struct dev_win *w;
	int idle;

	*wake = now + 100000000ull;
	/* one window in EVERY of gpubpf's periods, where its set-up costs that much */
	if (!sc->every)
		sc->every = 1;
	if (unit && every_of(cfg) != sc->every) {
		uint32_t next = every_of(cfg);

		if (!sc->origin) {
			/* no window planned yet (gpubpf knew the set-up's cost from the
			 * measurement): at once, not after seconds of dear windows */
			sc->every = sc->every_next = next;
		} else if (next != sc->every_next) {
			uint64_t big = unit * (next > sc->every ? next : sc->every);

			sc->every_next = next;
			sc->every_at = sc->origin + ((now - sc->origin) / big + 1) * big;
		}
		if (sc->origin && now >= sc->every_at) {
			sc->every = next;
			sc->period = UINT64_MAX; /* planned anew in the new periods */
		}
	}
	period = unit * sc->every;
	if (cfg->mode != DEV_MODE_WINDOWS || !period) {
		s->windowed = false;
		__atomic_store_n(&s->win_id, 0, __ATOMIC_RELEASE);
		return INJ_CB | INJ_ACT;
	}
	s->windowed = true;
	if (cfg->cost.state == DEV_COST_NONE || (cfg->cost.state == DEV_COST_IDLE && now >= sc->retry_at))
		measure_start(sc, s, cfg, now);
	if (cfg->cost.state == DEV_COST_MEASURING)
		return measure_step(sc, s, cfg, now, wake);
	/* between windows: callbacks only while gpubpf has launch handles to name */
	idle = cfg->names_wanted ? INJ_CB : 0;
	if (!cfg->duty_ppm)
		return idle; /* gpubpf has not planned yet */
	/* the windows' periods count from the start of gpubpf's period of the first plan:
	 * the first one begins at most one of gpubpf's periods before it, whatever EVERY */
	if (!sc->origin)
		sc->origin = now / unit * unit;
	p = (now - sc->origin) / period;
	w = sc->cur ? &cfg->win[sc->cur - 1] : NULL;
	if (w && w->open && !w->close && now >= w->slot_close) {
		/* the window's end: followed launches stop before activity does */
		__atomic_store_n(&s->win_id, 0, __ATOMIC_RELEASE);
		w->close = now;
		w->launches = __atomic_load_n(&s->ctr.launches_sampled, __ATOMIC_RELAXED) +
			      __atomic_load_n(&s->ctr.copies_sampled, __ATOMIC_RELAXED) - w->launches;
	}
	if (!w || w->close || (!w->open && sc->period != p)) {
		/* a slot that passed while the watcher slept is planned anew in its period */
		if (sc->period == p && w && w->close) {
			*wake = sc->origin + (p + 1) * period;
			return idle;
		}
		w = plan(sc, cfg, p, period, now);
	}
	if (!w->open) {
		/* CUPTI is set up ahead of the slot by what the last window's switches took
		 * (10-20 ms on an H100: cupti_set), so that the window follows its whole slot;
		 * nothing is followed before it opens */
		uint64_t lead = cfg->cost.switch_ns < INJ_LEAD_MAX_NS ? cfg->cost.switch_ns : INJ_LEAD_MAX_NS;

		if (now + lead < w->slot_open) {
			*wake = w->slot_open - lead;
			return idle;
		}
		if (now < w->slot_open) {
			*wake = w->slot_open;
			return INJ_CB | INJ_ACT;
		}
		/* Opens now; activity goes on first, and launches are followed under its id once
		 * it is (inj_sched_switched). A watcher that slept through the whole slot (a
		 * starved CPU) opens it from now for the slot's length. */
		if (now >= w->slot_close) {
			uint64_t len = w->slot_close - w->slot_open;

			w->slot_open = now;
			w->slot_close = now + len;
		}
		w->open = now;
		w->launches = __atomic_load_n(&s->ctr.launches_sampled, __ATOMIC_RELAXED) +
			      __atomic_load_n(&s->ctr.copies_sampled, __ATOMIC_RELAXED);
	}
	*wake = w->slot_close;
	return INJ_CB | INJ_ACT;
}

void inj_sched_switched(struct inj_sched *sc, struct inj_state *s, volatile struct dev_config *cfg, int want,
			uint64_t t0, uint64_t t1)
{
	volatile struct dev_win *w = sc->cur ? &cfg->win[sc->cur - 1] : NULL;
	bool open =
	    s->windowed && (want & INJ_ACT) && cfg->cost.state != DEV_COST_MEASURING && w && w->open && !w->close;

	if (open && !__atomic_load_n(&s->win_id, __ATOMIC_ACQUIRE))
		__atomic_store_n(&s->in_followed, 0, __ATOMIC_RELEASE); /* none can be yet */
	__atomic_store_n(&s->win_id, open ? w->id : 0, __ATOMIC_RELEASE);
	if (s->windowed && cfg->cost.state == DEV_COST_MEASURING && t1 > t0)
		sc->measure_switch_ns += t1 - t0;
	if (!s->windowed || cfg->cost.state == DEV_COST_MEASURING || !w || !w->id || t1 <= t0)
		return;
	w->switch_ns += t1 - t0;
	/* the last window's switches, on and off: what one window costs */
	if (w->close)
		cfg->cost.switch_ns = w->switch_ns;
}
