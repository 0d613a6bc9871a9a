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
 * adds to a launch. gpubpf's own launch probes go in and out meanwhile, on its windows'
 * clock, and their trap costs a launch as much as CUPTI's activity does: the halves
 * compare calls that met them alike (dev_config.probe_gen, pick_state), else their mix
 * could say anything. The library's own time in its callbacks (all of it, from the
 * callback's start) is timed too. CUPTI's own dispatch to a callback is in both halves
 * and so in neither figure: the core times it on a driver call of the watcher's once the
 * job launches (dev_costs.pair_ns), and the callbacks a launch call met are counted to
 * scale it by. No CUPTI types here: unit-tested. */
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

static uint32_t load(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Calls kept of half A (0 off, 1 on) in the probes' state P, at most what its slots hold. */
static uint32_t kept(const struct inj_timing *t, int a, int p)
{
	uint32_t n = load(&t->n[a][p]);

	return n < INJ_TIMED_MAX ? n : INJ_TIMED_MAX;
}

/* The launch probes' state whose calls both halves compare: out where the first "off"
 * phase and the "on" one have INJ_MEASURE_MIN of it (a window's launches meet the probes
 * as often as the job's others do, and their trap is not CUPTI's), else in; -1: neither
 * (their mix is compared: DEV_PROBES_MIXED). */
static int matched(const struct inj_timing *t)
{
	for (int p = INJ_PROBES_OUT; p < INJ_PROBE_STATES; p++)
		if (t->off1[p] >= INJ_MEASURE_MIN && kept(t, 1, p) >= INJ_MEASURE_MIN)
			return p;
	return -1;
}

/* The durations of half A in state P (-1: both) into OUT, those of phase PH (0 or 2) where
 * A is "off"; how many. */
static uint32_t collect(const struct inj_timing *t, int a, int ph, int p, uint32_t *out)
{
	uint32_t k = 0;

	for (int q = 0; q < INJ_PROBE_STATES; q++) {
		uint32_t from = a == 0 && ph == 2 ? t->off1[q] : 0, to = a == 0 && ph == 0 ? t->off1[q] : kept(t, a, q);

		if (p >= 0 && q != p)
			continue;
		for (uint32_t i = from; i < to; i++)
			out[k++] = t->ns[a][q][i];
	}
	return k;
}

/* For the trace: the spread of half WHAT's N durations V (sorted here, as inj_tmean does). */
static void trace_spread(const char *what, uint32_t *v, uint32_t n)
{
	uint64_t sum = 0, sum50 = 0, sum90 = 0;
	uint32_t n50 = (n + 1) / 2, n90 = n - n / 10;

	if (inj_debug < 2 || !n)
		return;
	qsort(v, n, sizeof(*v), cmp_u32);
	for (uint32_t i = 0; i < n; i++) {
		sum += v[i];
		sum50 += i < n50 ? v[i] : 0;
		sum90 += i < n90 ? v[i] : 0;
	}
	/* the fastest half's mean is inj_tmean's, from the same sorted calls */
	inj_trace("measure: %s %u calls, ns: p10 %u p25 %u p50 %u p75 %u p90 %u p99 %u max %u; mean %llu, of the "
		  "fastest half %llu, of the fastest 90%% %llu",
		  what, n, v[n / 10], v[n / 4], v[n / 2], v[3 * n / 4], v[9 * n / 10], v[99 * n / 100], v[n - 1],
		  (unsigned long long)(sum / n), (unsigned long long)(sum50 / n50), (unsigned long long)(sum90 / n90));
}

/* The measurement is over: its figures into the config, or DEV_COST_IDLE. */
static void measure_end(struct inj_sched *sc, struct inj_state *s, volatile struct dev_config *cfg, uint64_t now)
{
	struct inj_timing *t = &s->timing;
	uint64_t cb = __atomic_load_n(&t->cb_ns, __ATOMIC_RELAXED),
		 calls = __atomic_load_n(&t->cb_calls, __ATOMIC_RELAXED),
		 cbs = __atomic_load_n(&t->cb_n, __ATOMIC_RELAXED);
	uint32_t off[INJ_PROBE_STATES * INJ_TIMED_MAX], on[INJ_PROBE_STATES * INJ_TIMED_MAX], n1, n2, n3;
	int p;

	__atomic_store_n(&t->on, false, __ATOMIC_RELEASE);
	__atomic_store_n(&t->activity, false, __ATOMIC_RELEASE);
	/* its switches, a window's dearest part, spent once: in gpubpf's cost, idle or not */
	cfg->cost.fixed_us += (uint32_t)(sc->measure_switch_ns / 1000);
	if (t->phase == 0)
		for (int q = 0; q < INJ_PROBE_STATES; q++)
			t->off1[q] = kept(t, 0, q) < INJ_TIMED_MAX / 2 ? kept(t, 0, q) : INJ_TIMED_MAX / 2;
	p = matched(t);
	n1 = collect(t, 0, 0, p, off);
	n3 = collect(t, 1, 1, p, on);
	inj_trace("measure: ends in phase %d, %u calls off, %u on (probes %d); %u callbacks timed; not kept: %u "
		  "across a phase's start, %u across a switch of gpubpf's probes, %u while they switched; "
		  "clocks held %llu ms",
		  t->phase, n1, n3, p, (unsigned)calls, t->not_kept[0], t->not_kept[1], t->not_kept[2],
		  (unsigned long long)t->held_ns / 1000000);
	cfg->cost.calls += n1 + n3;
	cfg->cost.done = now;
	if ((n1 < INJ_MEASURE_MIN || n3 < INJ_MEASURE_MIN) && sc->again) {
		/* measured again while the job launched too little: the last figures stand,
		 * until the next time */
		sc->again = false;
		cfg->cost.on_ns = sc->last.on_ns;
		cfg->cost.off_ns = sc->last.off_ns;
		cfg->cost.callback_ns = sc->last.callback_ns;
		cfg->cost.dispatch_ns = sc->last.dispatch_ns;
		cfg->cost.probes = sc->last.probes;
		cfg->names_wanted = 0;
		__atomic_store_n(&cfg->cost.state, DEV_COST_DONE, __ATOMIC_RELEASE);
		return;
	}
	if (n1 < INJ_MEASURE_MIN || n3 < INJ_MEASURE_MIN) {
		cfg->cost.state = DEV_COST_IDLE;
		/* why, for gpubpf's -v: one run in 25-50 of a launch-bound loop times too few */
		cfg->cost.idle_why =
		    ((uint32_t)t->phase & 3) | (n1 < 0x3fff ? n1 : 0x3fff) << 2 | (n3 < 0xffff ? n3 : 0xffff) << 16;
		/* its callbacks named what the job launched meanwhile: off until the next try,
		 * as after a measurement done (they stayed on until gpubpf's next tick wrote
		 * names_wanted: up to a second of a launch-bound loop's launches, 0.7 us each) */
		cfg->names_wanted = 0;
		/* The first phase had its calls and the "on" one not: the job launches, and its
		 * windows meanwhile would be counted with no correction for what CUPTI pushes
		 * out of them (a launch-bound loop's estimate 30-45% low, 1 run in 15 on the
		 * CUPTI model, its "on" phase timing no call for its 100 ms): at once, once. */
		sc->retried = t->phase >= 1 && n1 >= INJ_MEASURE_MIN && !sc->retried;
		sc->retry_at = now + (sc->retried ? 0 : INJ_REMEASURE_NS);
		return;
	}
	sc->retried = sc->again = false;
	cfg->cost.measures++;
	cfg->cost.probes = p == INJ_PROBES_OUT ? DEV_PROBES_OUT : p == INJ_PROBES_IN ? DEV_PROBES_IN : DEV_PROBES_MIXED;
	/* the launch without activity before and after it: a job's drift cancels */
	cfg->cost.off_ns = inj_tmean(off, n1);
	trace_spread("\"off\" before", off, n1);
	n2 = collect(t, 0, 2, p, off);
	cfg->cost.calls += n2;
	if (n2 >= INJ_MEASURE_MIN)
		cfg->cost.off_ns = (cfg->cost.off_ns + inj_tmean(off, n2)) / 2;
	trace_spread("\"off\" after", off, n2);
	trace_spread("\"on\"", on, n3);
	cfg->cost.on_ns = inj_tmean(on, n3);
	cfg->cost.callback_ns = calls ? cb / calls : 0;
	/* CUPTI's dispatch: the pair the watcher timed in the first phase (core.c), times the
	 * pairs a launch call met (a runtime launch 2, its driver call's and its own; a driver
	 * launch 1) */
	cfg->cost.dispatch_ns = calls ? (uint32_t)((uint64_t)cfg->cost.pair_ns * cbs / (2 * calls)) : 0;
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
	memset(t->n, 0, sizeof(t->n));
	memset(t->off1, 0, sizeof(t->off1));
	t->cb_ns = t->cb_calls = t->cb_n = 0;
	memset(t->not_kept, 0, sizeof(t->not_kept));
	t->activity = false;
	t->phase = 0;
	t->phase_at = now;
	t->first = t->seen = 0;
	t->held_ns = 0;
	t->probes_seen = cfg->probe_gen;
	t->step_at = now;
	if (sc->again) {
		/* the job's launches are past their start: no warm-up */
		t->seen = now;
		t->first = now - INJ_MEASURE_WARMUP_NS;
		t->probes0 = cfg->probe_gen;
	}
	/* inside the windows' periods (measured again, or tried again while the windows ran
	 * at the planned duty: DEV_COST_IDLE), whose estimates cover its time already */
	__atomic_store_n(&t->again, sc->again || sc->origin, __ATOMIC_RELAXED);
	cfg->cost.started = now;
	cfg->cost.done = 0;
	cfg->cost.state = DEV_COST_MEASURING;
	__atomic_store_n(&t->on, true, __ATOMIC_RELEASE);
	inj_trace("measure: starts%s", sc->again ? " again" : "");
}

static void next_phase(struct inj_timing *t, uint64_t now)
{
	__atomic_store_n(&t->phase, t->phase + 1, __ATOMIC_RELEASE);
	inj_trace("measure: phase %d", t->phase);
	t->phase_at = now;
	t->first = 0;
	__atomic_store_n(&t->activity, t->phase == 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&t->gen, 1, __ATOMIC_ACQ_REL);
}

/* Half A's counts back to phase 0's (TO_OFF1) or to none. */
static void drop_calls(struct inj_timing *t, int a, bool to_off1)
{
	for (int q = 0; q < INJ_PROBE_STATES; q++)
		__atomic_store_n(&t->n[a][q], to_off1 ? t->off1[q] : 0, __ATOMIC_RELEASE);
}

/* The measurement's step: callbacks on; activity off, then on, then off again (each
 * phase a third of INJ_MEASURE_NS at most; the "off" ones half of INJ_MEASURE_CALLS
 * calls each, the "on" one all of it, in one state of gpubpf's launch probes). Not on and
 * off in slices: once activity has been on, a launch costs more until CUPTI is finalized
 * (cupti_set), so the last phase comes after a finalize, and an "off" right after an
 * "on" would not be the launch without device time. A first phase with too few calls
 * ends it (DEV_COST_IDLE) before activity was ever on.
 *
 * gpubpf's launch probes go in for a window of theirs every period or so: a phase of a
 * few milliseconds (a launch of 5 us makes the calls in 1.3 ms) can fall all in one and
 * the next all out of one. So the first phase, which costs the job little, runs at least
 * INJ_MEASURE_SPREAD_NS and until it has its calls with the probes out (they are out
 * most of the time; in, where they stayed in all along or its time ran out first); the
 * "on" phase, the dear one, runs until it has its calls in a state the first one has,
 * the last until it has them in the state compared. */
static int measure_step(struct inj_sched *sc, struct inj_state *s, volatile struct dev_config *cfg, uint64_t now,
			uint64_t *wake)
{
	struct inj_timing *t = &s->timing;
	uint32_t n0 = kept(t, 0, INJ_PROBES_OUT) + kept(t, 0, INJ_PROBES_IN), got = 0;
	uint64_t from = t->phase_at, dt = now - t->step_at;
	bool over = now - t->phase_at >= INJ_MEASURE_NS / 3, held;
	int p;

	t->step_at = now;
	/* No call is kept while gpubpf's launch probes go in or out, nor across a switch: the
	 * first phase's clock stands still meanwhile (INJ_MEASURE_HOLD_NS at most), else a job
	 * whose probes take long to switch may have its time run out with no call kept, and
	 * no device time until the next try (the CUPTI model here: 28,186 calls not kept, 1
	 * run in 3; the H100's PyTorch step, whose probes are in four objects). Only the
	 * first: it costs the job its callbacks alone, and it ends with gpubpf's probes still,
	 * so that the dear "on" phase, short, seldom meets a switch. */
	held = t->phase == 0 && t->held_ns + dt <= INJ_MEASURE_HOLD_NS &&
	       ((cfg->probe_gen & 3) == DEV_PROBE_GEN_SWITCHING || cfg->probe_gen != t->probes_seen);
	if (held) {
		t->held_ns += dt;
		t->phase_at += dt;
		from += dt;
		if (t->first)
			t->first += dt;
		if (t->seen)
			t->seen += dt;
	}
	t->probes_seen = cfg->probe_gen;
	/* The first phase's time runs from INJ_MEASURE_WARMUP_NS after the job's first
	 * launch call, not from attach: a job attached at cuInit creates its context first
	 * (hundreds of ms on an H100), and a callback that no call meets costs nothing; and
	 * a job's first launches are not its launches (modules load; an empty device queue
	 * fills, so a device-bound job's first calls return at once and later ones wait for
	 * a kernel to end: "off" then timed the fast ones, and CUPTI was charged the wait).
	 * Calls until then are not kept. A job with no launch at all for
	 * INJ_MEASURE_WAIT_NS is idle. */
	if (t->phase == 0 && !n0 && !t->seen) {
		over = now - t->phase_at >= INJ_MEASURE_WAIT_NS;
	} else if (t->phase == 0 && (!t->first || now < t->first + INJ_MEASURE_WARMUP_NS || !cfg->seq)) {
		/* Nor do the first calls count before they come at INJ_MEASURE_STEADY a second,
		 * or INJ_MEASURE_RAMP_NS has passed: a real PyTorch loop's first half second
		 * after its first launch has a few launches of 1-3 ms each (modules load,
		 * kernels are tuned), 1000 of 15 us each a 100 ms after it (../shared/gpu's
		 * timeline). A measurement whose first phase met those ended with too few
		 * calls, and the next came 2 s later: a short job got no device time. */
		if (!t->seen)
			t->seen = now;
		if (!t->first && ((uint64_t)n0 * 1000000000ull >= (uint64_t)INJ_MEASURE_STEADY * dt ||
				  now - t->seen >= INJ_MEASURE_RAMP_NS)) {
			t->first = now;
			inj_trace("measure: launches steady (%u timed in %llu us), probes %u, config %s", n0,
				  (unsigned long long)dt / 1000, cfg->probe_gen,
				  cfg->seq ? "written" : "not yet written");
		}
		/* Nor before gpubpf has written this attach's config: from then on it says which
		 * launch calls met its launch probes (probe_gen). It writes at once (0.1 s at
		 * most), within the warm-up as a rule; the warm-up ends no earlier. */
		if (t->first && !cfg->seq && now - t->first > INJ_MEASURE_WARMUP_NS)
			t->first = now - INJ_MEASURE_WARMUP_NS;
		t->probes0 = cfg->probe_gen;
		drop_calls(t, 0, false);
		n0 = 0;
		over = false;
	} else if (t->phase == 0) {
		from = t->first + INJ_MEASURE_WARMUP_NS;
		over = now - from >= INJ_MEASURE_NS / 3;
	} else if (t->phase == 2 && (!t->first || now < t->first + INJ_MEASURE_SETTLE_NS)) {
		/* the same after the finalize: the launching thread that ran it stalled, and a
		 * device-bound job's queue fills again (a millisecond or so) */
		if (!t->first)
			t->first = now;
		drop_calls(t, 0, true);
	}
	if (t->phase == 1) {
		/* the "on" calls in a state the first phase has */
		for (int q = 0; q < INJ_PROBE_STATES; q++)
			if (t->off1[q] >= INJ_MEASURE_MIN && kept(t, 1, q) > got)
				got = kept(t, 1, q);
	}
	/* the probes in all along (a group never windowed, or windows far apart): no
	 * waiting for them to come out */
	if (t->phase == 0 && !held &&
	    (over || (now - from >= INJ_MEASURE_SPREAD_NS &&
		      (kept(t, 0, INJ_PROBES_OUT) >= INJ_MEASURE_CALLS / 2 ||
		       (kept(t, 0, INJ_PROBES_IN) >= INJ_MEASURE_CALLS / 2 && cfg->probe_gen == t->probes0))))) {
		/* the calls kept: a launch of 5 us makes 800 in one look, and the last phase
		 * needs room for its own (drift cancels only with both) */
		for (int q = 0; q < INJ_PROBE_STATES; q++)
			t->off1[q] = kept(t, 0, q) < INJ_TIMED_MAX / 2 ? kept(t, 0, q) : INJ_TIMED_MAX / 2;
		if (t->off1[INJ_PROBES_OUT] < INJ_MEASURE_MIN && t->off1[INJ_PROBES_IN] < INJ_MEASURE_MIN)
			goto end;
		next_phase(t, now);
		drop_calls(t, 0, true);
	} else if (t->phase == 1 && (over || got >= INJ_MEASURE_CALLS)) {
		if (kept(t, 1, INJ_PROBES_OUT) + kept(t, 1, INJ_PROBES_IN) < INJ_MEASURE_MIN)
			goto end;
		next_phase(t, now);
	} else if (t->phase == 2) {
		p = matched(t);
		for (int q = 0; q < INJ_PROBE_STATES; q++)
			if (p < 0 || q == p)
				got += kept(t, 0, q) - t->off1[q];
		if (over || got >= INJ_MEASURE_CALLS / 2)
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

/* Window ID into the ring for [OPEN, CLOSE) of period P (counted from sc->origin), at
 * weight K, its slot LEN long in all. */
static volatile struct dev_win *put(struct inj_sched *sc, volatile struct dev_config *cfg, uint64_t p, uint32_t k,
				    uint64_t open, uint64_t close, uint64_t len, uint64_t start)
{
	uint32_t id = cfg->win_next ? cfg->win_next : 1;
	volatile struct dev_win *w = &cfg->win[id % DEV_WIN_RING];

	w->id = 0; /* a reader never sees half of an entry as the new window's */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	w->k = k;
	/* where its period begins, in gpubpf's periods */
	w->period = start / ((uint64_t)cfg->period_ms * 1000000ull);
	w->slot_open = open;
	w->slot_close = close;
	w->slot_len = len;
	w->open = w->close = w->launches = w->switch_ns = 0;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	w->id = id;
	cfg->win_next = id + 1 ? id + 1 : 1;
	sc->period = p;
	sc->cur = id % DEV_WIN_RING + 1;
	return w;
}

/* Plan the window of period P (counted from sc->origin): a slot of 1/K of it, starting
 * anywhere in it, and where it runs past the period's end, on from its start: two
 * windows, that one first, then the rest to the end (sc->piece_*). Every instant is then
 * inside with probability 1/K, whatever the job's rhythm; on a grid of K slots, a step
 * that divides the slot met every window at one phase, and a window opened late (CUPTI's
 * set-up) cut the same part of the step from each (the probe groups' windows erred so on
 * a steady loop: windows_plan.c). */
static volatile struct dev_win *plan(struct inj_sched *sc, volatile struct dev_config *cfg, uint64_t p, uint64_t period,
				     uint64_t now)
{
	uint32_t k = inj_slots(cfg->duty_ppm, period), gap = 1;
	uint64_t start = sc->origin + p * period, len = k > 1 ? period / k : period,
		 off = k > 1 ? (rng(sc, now) >> 11) % period : 0, open = start + off, close = open + len;
	volatile struct dev_win *w;

	/* Periods since the last one a window opened in, with none (the cost measured again
	 * took them, or a starved watcher slept through them): this window stands in for
	 * them too, its weight theirs, else their launches would count for nothing. */
	if (sc->covered && p + 1 > sc->covered + 1)
		gap = p + 1 - sc->covered < INJ_GAP_MAX ? (uint32_t)(p + 1 - sc->covered) : INJ_GAP_MAX;
	sc->piece_open = sc->piece_close = 0;
	if (close > start + period) {
		/* the part past the end first, at the period's start; then its own */
		sc->piece_open = open;
		sc->piece_close = start + period;
		sc->piece_k = k * gap;
		close = start + (close - (start + period));
		open = start;
	}
	w = put(sc, cfg, p, k * gap, open, close, len, start);
	inj_trace("window %u planned: period %llu, %u slots, standing in for %u periods%s", w->id,
		  (unsigned long long)p, k, gap, sc->piece_close ? ", in two pieces" : "");
	return w;
}

/* Window W's slot, which the watcher slept through, from NOW for its length, up to the
 * slot's second piece. */
static void retime(struct inj_sched *sc, volatile struct dev_win *w, uint64_t now)
{
	uint64_t len = w->slot_close - w->slot_open;

	w->slot_open = now;
	w->slot_close = now + len;
	if (sc->piece_close && w->slot_close > sc->piece_open)
		w->slot_close = sc->piece_open > now ? sc->piece_open : now;
}

/* The cost measured again (dev_config.remeasure_ms): a job's launches change (its phases,
 * its kernels, the host's load), and one measurement of a few hundred calls is off by a
 * tenth at times, which a launch-bound window's correction takes several times over
 * (docs/DEVICE_TIME.md). Right after a window ends, so that none is cut short and the
 * next is planned, at its random slot, after the measurement. */
static bool remeasure_due(const struct inj_sched *sc, volatile struct dev_config *cfg, uint64_t now)
{
	volatile struct dev_win *w = sc->cur ? &cfg->win[sc->cur - 1] : NULL;

	return cfg->cost.state == DEV_COST_DONE && cfg->remeasure_ms &&
	       now >= cfg->cost.done + (uint64_t)cfg->remeasure_ms * 1000000ull && (!w || w->close);
}

/* gpubpf's EVERY as a power of two, at most DEV_EVERY_MAX */
static uint32_t every_of(volatile struct dev_config *cfg)
{
	uint32_t e = 1;

	while (e < cfg->every && e < DEV_EVERY_MAX)
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
			inj_trace("windows: every %u periods from %u", next, sc->every);
			sc->every = sc->every_next = next;
		} else if (next != sc->every_next) {
			uint64_t big = unit * (next > sc->every ? next : sc->every);

			sc->every_next = next;
			sc->every_at = sc->origin + ((now - sc->origin) / big + 1) * big;
		}
		if (sc->origin && now >= sc->every_at) {
			inj_trace("windows: every %u periods from %u", next, sc->every);
			/* what the windows so far covered, in the new periods (the change is at a
			 * boundary of both): periods with none before the change, a cost
			 * measurement's or an unplanned stretch's, are the next window's to stand
			 * in for. Zeroed, they counted for nothing: the cost_changes model's
			 * estimate was 0.47-0.94 of the truth, 2 s of periods lost in one run. */
			if (sc->covered) {
				uint64_t cov = (sc->covered * sc->every + next / 2) / next;

				sc->covered = cov ? cov : 1;
			}
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
	else if (remeasure_due(sc, cfg, now)) {
		sc->again = true;
		sc->last = cfg->cost;
		measure_start(sc, s, cfg, now);
	}
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
		bool on = sc->on_id == w->id;

		/* A slot the watcher slept through runs its length from when CUPTI is on
		 * (inj_sched_switched), however long its set-up takes after a finalize, within
		 * its period: a window closed before, its whole slot's weight on no launch, was
		 * one in ten of the CUPTI model's (e2e 82, the window after each measurement). */
		if (!on && sc->retimed && sc->period == p) {
			*wake = now + INJ_RETRY_NS;
			return INJ_CB | INJ_ACT;
		}
		/* the window's end: followed launches stop before activity does */
		__atomic_store_n(&s->win_id, 0, __ATOMIC_RELEASE);
		w->close = now;
		w->launches = __atomic_load_n(&s->ctr.launches_sampled, __ATOMIC_RELAXED) +
			      __atomic_load_n(&s->ctr.copies_sampled, __ATOMIC_RELAXED) - w->launches;
		inj_trace(
		    "window %u closes: gpubpf's period %llu, k %u, slot %llu us, open %llu us from %lld us into it, "
		    "%u calls followed%s",
		    w->id, (unsigned long long)w->period, w->k,
		    (unsigned long long)(w->slot_close - w->slot_open) / 1000,
		    (unsigned long long)(now - w->open) / 1000, (long long)(w->open - w->slot_open) / 1000,
		    (unsigned)w->launches, on ? "" : "; never on: no window, the next stands in for its period");
		/* Never on (CUPTI not set up by its slot's end): no window at all, not one that
		 * saw nothing at its weight; gpubpf skips a window of no weight, and the next
		 * one stands in for this period too. */
		if (!on) {
			w->k = 0;
			if (sc->every == sc->covered_every)
				sc->covered = sc->covered_was;
		}
	}
	if (!w || w->close || (!w->open && sc->period != p)) {
		/* a slot that passed while the watcher slept is planned anew in its period */
		if (sc->period == p && w && w->close && sc->piece_close) {
			/* the slot's second piece */
			w = put(sc, cfg, p, sc->piece_k, sc->piece_open, sc->piece_close, w->slot_len,
				sc->origin + p * period);
			sc->piece_open = sc->piece_close = 0;
		} else if (sc->period == p && w && w->close) {
			*wake = sc->origin + (p + 1) * period;
			return idle;
		} else {
			w = plan(sc, cfg, p, period, now);
		}
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
		 * it is (inj_sched_switched: the window opens then). A watcher that slept
		 * through the whole slot (a starved CPU, a cost measurement) opens it for the
		 * slot's length from when it is on, up to the second piece. */
		sc->retimed = now >= w->slot_close;
		if (sc->retimed)
			retime(sc, w, now);
		w->open = now;
		sc->covered_was = sc->covered;
		sc->covered_every = sc->every;
		sc->covered = p + 1;
		w->launches = __atomic_load_n(&s->ctr.launches_sampled, __ATOMIC_RELAXED) +
			      __atomic_load_n(&s->ctr.copies_sampled, __ATOMIC_RELAXED);
	}
	*wake = w->slot_close;
	return INJ_CB | INJ_ACT;
}

void inj_sched_switched(struct inj_sched *sc, struct inj_state *s, volatile struct dev_config *cfg, int want,
			uint64_t at, uint64_t cost)
{
	volatile struct dev_win *w = sc->cur ? &cfg->win[sc->cur - 1] : NULL;
	bool open =
	    s->windowed && (want & INJ_ACT) && cfg->cost.state != DEV_COST_MEASURING && w && w->open && !w->close;

	if (open && !__atomic_load_n(&s->win_id, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&s->in_followed, 0, __ATOMIC_RELEASE); /* none can be yet */
		sc->on_id = w->id;
		/* Open from here: launches are followed from now, not from when the step asked
		 * for activity. CUPTI set up again after a finalize waits for it to settle (a
		 * window right after a cost measurement: 2-3 ms on the CUPTI model, of a slot of
		 * 2.4), and a window's books that said it open from the ask made its weight that
		 * of a whole slot for a few launches (5-12 where the others had 150: e2e 82's
		 * cost_changes 0.75-0.85 of the truth). A slot the watcher slept through runs
		 * its length from here. */
		if (at > w->open) {
			if (sc->retimed)
				retime(sc, w, at);
			w->open = at;
		}
	}
	__atomic_store_n(&s->win_id, open ? w->id : 0, __ATOMIC_RELEASE);
	if (s->windowed && cfg->cost.state == DEV_COST_MEASURING)
		sc->measure_switch_ns += cost;
	if (!s->windowed || cfg->cost.state == DEV_COST_MEASURING || !w || !w->id || !cost)
		return;
	w->switch_ns += cost;
	/* the last window's switches, on and off: what one window costs */
	if (w->close)
		cfg->cost.switch_ns = w->switch_ns;
}
