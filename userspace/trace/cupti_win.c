// SPDX-License-Identifier: MIT
/* Device time in windows, gpubpf's side (bpf/cupti.h, struct dev_config): every tick it
 * reads each library's config (the cost per launch measured in the job, the windows run),
 * gives each window its weight, counts the closed ones into the estimates, feeds the cost
 * to the governor as the "device time" group, and writes the duty the governor planned
 * back into every library.
 *
 * The cost the governor plans from is the worst case, a thread that does nothing but
 * launch: device time costs it c = (a launch followed with activity on - one with it off) +
 * the callbacks for each launch of b = (off - callbacks), a fraction c / (b + c) of its
 * time. All three are timed in the job (struct dev_costs), the launch probe's trap, stack
 * walk and Python frames included.
 * Launch rates change faster than a plan can follow, and a window cannot be cut short
 * without losing the rest of its slot, so the duty is sized for that case: the cost stays
 * under the budget whatever the job does. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "../../bpf/cupti.h"
#include "cuda.h"
#include "cupti.h"
#include "cupti.skel.h"
#include "envnum.h"
#include "hmap.h"
#include "log.h"
#include "numfmt.h"
#include "profile.h"
#include "windows.h"

#include "cupti_int.h"

_Static_assert(offsetof(struct dev_config, written) == DEV_CONFIG_GPUBPF_PART, "gpubpf writes this much");

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct cpt_wtarget *target(struct cupti_tracer *c, uint32_t tgid, bool create)
{
	struct cpt_wtarget *t;
	uint64_t v;

	if (hmap__get(&c->tab, tgid, 0, HK_WINT, &v) && v)
		return (struct cpt_wtarget *)(uintptr_t)v;
	if (!create)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->tgid = tgid;
	if (hmap__put(&c->tab, tgid, 0, HK_WINT, (uint64_t)(uintptr_t)t)) {
		free(t);
		return NULL;
	}
	return t;
}

/* gpubpf's part of the config: the mode, the period, the duty (its first bytes only: the
 * library writes the rest). The address comes from the target: a config of ours must be
 * there first. */
static int write_part(struct cupti_tracer *c, struct cpt_wtarget *t)
{
	struct dev_config cur;
	struct iovec l = {&cur, DEV_CONFIG_GPUBPF_PART}, r = {(void *)(uintptr_t)t->addr, DEV_CONFIG_GPUBPF_PART};
	int err = 0;

	/* the launch probes' state is written from other threads too: not undone here */
	pthread_mutex_lock(&c->probe_lock);
	if (!t->addr || process_vm_readv((pid_t)t->tgid, &l, 1, &r, 1, 0) != DEV_CONFIG_GPUBPF_PART ||
	    cur.magic != DEV_CONFIG_MAGIC || cur.version != DEV_CONFIG_VERSION) {
		err = -EINVAL;
		goto out;
	}
	cur.probe_gen = c->probe_gen;
	cur.max_rate = c->max_rate;
	cur.names_wanted = c->names_wanted;
	cur.period_ms = c->win ? (uint32_t)lround(c->period * 1000) : 1000;
	cur.mode = c->win ? DEV_MODE_WINDOWS : DEV_MODE_ALWAYS;
	cur.duty_ppm = t->duty_ppm;
	cur.every = c->every;
	cur.remeasure_ms = t->remeasure_ms;
	cur.seq++;
	if (process_vm_writev((pid_t)t->tgid, &l, 1, &r, 1, 0) != DEV_CONFIG_GPUBPF_PART) {
		err = -errno;
		pr_debug("pid %u: cannot set the injection library's sampling: %s", t->tgid, strerror(errno));
		goto out;
	}
	t->written_ppm = t->duty_ppm;
	t->written_names = c->names_wanted;
	t->written_every = c->every;
	t->written_remeasure = t->remeasure_ms;
out:
	pthread_mutex_unlock(&c->probe_lock);
	return err;
}

/* TGID's config at ADDR hears of the launch probes' switches from now (ADDR 0: no more). */
static void probe_target(struct cupti_tracer *c, uint32_t tgid, uint64_t addr)
{
	int i, free_i = -1;

	pthread_mutex_lock(&c->probe_lock);
	for (i = 0; i < CPT_PROBE_TARGETS; i++) {
		if (c->probe_to[i].addr && c->probe_to[i].tgid == tgid)
			break;
		if (!c->probe_to[i].addr && free_i < 0)
			free_i = i;
	}
	if (i == CPT_PROBE_TARGETS)
		i = free_i;
	if (i >= 0) {
		c->probe_to[i].tgid = tgid;
		c->probe_to[i].addr = addr;
	}
	pthread_mutex_unlock(&c->probe_lock);
}

void cupti__launch_probes(void *arg, int event)
{
	struct cupti_tracer *c = arg;
	uint32_t gen;

	pthread_mutex_lock(&c->probe_lock);
	switch (event) {
	case CUDA_PROBES_ATTACHING:
		c->probes_pending++;
		break;
	case CUDA_PROBES_IN:
		c->probes_pending--;
		c->probes_on = true;
		break;
	case CUDA_PROBES_DETACHING:
		c->probes_on = false;
		c->probes_pending++;
		break;
	case CUDA_PROBES_OUT:
		c->probes_pending--;
		break;
	}
	/* every switch a new value: a launch call that spans one is not timed */
	c->probe_sw++;
	c->probe_gen = c->probe_sw * 4 + (c->probes_pending > 0 ? DEV_PROBE_GEN_SWITCHING
					  : c->probes_on	? DEV_PROBE_GEN_IN
								: DEV_PROBE_GEN_OUT);
	gen = c->probe_gen;
	for (int i = 0; i < CPT_PROBE_TARGETS; i++) {
		struct iovec l = {&gen, sizeof(gen)},
			     r = {(void *)(uintptr_t)(c->probe_to[i].addr + offsetof(struct dev_config, probe_gen)),
				  sizeof(gen)};

		if (c->probe_to[i].addr)
			process_vm_writev((pid_t)c->probe_to[i].tgid, &l, 1, &r, 1, 0);
	}
	pthread_mutex_unlock(&c->probe_lock);
}

void cpt_win_attached(struct cupti_tracer *c, uint32_t tgid, uint64_t addr)
{
	struct cpt_wtarget *t = target(c, tgid, true);

	if (!t)
		return;
	probe_target(c, tgid, addr);
	t->addr = addr;
	t->written_ppm = UINT32_MAX;
	t->measures = t->kept = 0; /* measured anew for this attach */
	t->taken = NULL;
	t->remeasure_ms = c->remeasure_ms;
	write_part(c, t);
}

/* The weight of window W as it ran: K for its slot, scaled by the slot over the time it
 * was open (late opens, as the probe groups' windows). */
static double win_weight(const struct dev_win *w)
{
	double slot = (double)(w->slot_close - w->slot_open), open, f;

	if (!w->open)
		return w->k;
	open = (double)((w->close ? w->close : w->slot_close) - w->open);
	f = open > 0 ? slot / open : 1;
	return w->k * fmin(fmax(f, 1), 4);
}

static void read_target(struct cupti_tracer *c, struct cpt_wtarget *t)
{
	struct dev_config cfg;
	struct iovec l = {&cfg, sizeof(cfg)}, r = {(void *)(uintptr_t)t->addr, sizeof(cfg)};
	uint64_t period_ns = (uint64_t)llround(c->period * 1e9), latest;

	if (!t->addr || process_vm_readv((pid_t)t->tgid, &l, 1, &r, 1, 0) != (ssize_t)sizeof(cfg) ||
	    cfg.magic != DEV_CONFIG_MAGIC || cfg.version != DEV_CONFIG_VERSION) {
		if (t->addr)
			probe_target(c, t->tgid, 0);
		t->addr = 0; /* gone, or not ours any more */
		return;
	}
	t->cost = cfg.cost;
	cpt_note_measure(t);
	/* the library drops the callbacks that name launch handles at its measurement's end
	 * (they named all it launched): written again where this tick still wants them */
	t->written_names = cfg.names_wanted;
	/* The config is the target's memory, its own to write: a window's slot is at most
	 * EVERY (64) of gpubpf's periods ahead. One past that is none the library drew, and
	 * its period would size the books (est_group_period: 2.4 GiB for a slot 16 million
	 * periods on). */
	latest = mono_ns() + (DEV_EVERY_MAX + 2) * period_ns;
	for (int i = 0; i < DEV_WIN_RING; i++) {
		const struct dev_win *w = &cfg.win[i];
		struct cpt_win *m = &t->win[w->id % DEV_WIN_RING];
		uint64_t p;

		if (!w->id || w->id % DEV_WIN_RING != (uint32_t)i || !w->k || (m->id == w->id && m->closed) ||
		    w->slot_open > latest)
			continue;
		if (m->id != w->id)
			m->nthr = 0;
		m->id = w->id;
		/* the period (gpubpf's) the window opened in: a window's own period is EVERY of them */
		m->period = period_ns ? w->slot_open / period_ns : 0;
		m->weight = win_weight(w);
		m->closed = w->close != 0;
		m->end = w->close ? w->close : w->slot_close;
		if (!m->closed)
			continue;
		/* closed: planned into its period's estimates, and into the books */
		p = m->period;
		if (p >= c->p0 && !c->s->opts->daemon) {
			struct est_period *ep = est_group_period(&c->est, p - c->p0);
			/* the window's own period: K slots of its length (EVERY periods; a slot
			 * in two pieces is two windows, each the whole slot's length) */
			double len = (double)(w->slot_len ? w->slot_len : w->slot_close - w->slot_open) * w->k / 1e9;

			if (ep)
				est_period_plan(ep, len > c->period ? len : c->period, m->weight);
		}
		pr_debug("pid %u: device window %u: %.2f ms (%.6f-%.6f s, CLOCK_MONOTONIC) of a %.2f ms slot (opened "
			 "%.2f ms into it), 1 slot in %u, weight %.1f, %llu launches and copies followed",
			 t->tgid, w->id, (double)(w->close > w->open ? w->close - w->open : 0) / 1e6,
			 (double)w->open / 1e9, (double)w->close / 1e9, (double)(w->slot_close - w->slot_open) / 1e6,
			 w->open > w->slot_open ? (double)(w->open - w->slot_open) / 1e6 : 0.0, w->k, m->weight,
			 (unsigned long long)w->launches);
		c->windows++;
		c->followed += w->launches;
		t->followed += w->launches;
		c->switch_ns += w->switch_ns;
		c->open_ns += w->close > w->open ? w->close - w->open : 0;
	}
}

static double once_costs(struct cupti_tracer *c, double part[3]);

/* Who set the pace of T's followed launches since the last tick, as the device's records
 * told BPF (the cost measurement's too, a few hundred at attach): into the launches'
 * share that the launch probes' windows, device-time windows with too few records of
 * their own and the job's slowdown are taken at (windows__device_pace). */
static void read_pace(struct cupti_tracer *c, struct cpt_wtarget *t)
{
	struct dev_proc p;

	if (!c->skel || !c->win || bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.dev_procs), &t->tgid, &p))
		return;
	/* (counts that went back: the process's books began anew; read from there) */
	if (p.free >= t->pace_read[0] && p.queued >= t->pace_read[1] &&
	    (p.free > t->pace_read[0] || p.queued > t->pace_read[1]))
		windows__device_pace(c->win, (double)(p.free - t->pace_read[0]), (double)(p.queued - t->pace_read[1]));
	t->pace_read[0] = p.free;
	t->pace_read[1] = p.queued;
}

void cpt_win_tick(struct cupti_tracer *c)
{
	double worst = 0, fixed = 0;
	bool measured = false;
	struct governor g;
	uint32_t ppm;

	if (!c->win)
		return;
	hmap_for_each(&c->tab, e)
	{
		struct cpt_wtarget *t = cpt_as_target(e);
		double cost, base;

		if (!t)
			continue;
		read_target(c, t);
		if (!cpt_launch_cost(t, &cost, &base))
			continue;
		/* the costliest target sets the duty: the busiest thread may be its. Where a
		 * device sets the launches' pace, the wait hides CUPTI's cost and it measures
		 * as none; it is there as soon as the job launches faster than its device
		 * runs, so the plan takes at least what it was on the H100. */
		measured = true;
		cost = fmax(cost, DEV_ACT_FLOOR_S);
		worst = fmax(worst, cost / (base + cost));
		fixed = fmax(fixed, (double)t->cost.switch_ns / 1e9);
	}
	/* a window's switches: the last one's, or their mean so far where that is more (they
	 * vary several times over where the launching threads take the CPUs) */
	if (c->windows)
		fixed = fmax(fixed, (double)c->switch_ns / 1e9 / (double)c->windows);
	/* what was spent once, repaid from the budget before the windows take it all */
	windows__set_once(c->win, once_costs(c, NULL));
	if (measured)
		windows__set_device(c->win, worst, fixed);
	windows__governor(c->win, &g);
	ppm = g.ngroups > CG__COUNT && !g.g[CG__COUNT].always ? (uint32_t)lround(g.g[CG__COUNT].duty * 1e6) : 0;
	if (ppm > 1000000)
		ppm = 1000000;
	if (measured && !ppm)
		ppm = 1;
	c->duty = ppm / 1e6;
	c->every = g.ngroups > CG__COUNT && g.g[CG__COUNT].every > 1 ? (uint32_t)g.g[CG__COUNT].every : 1;
	/* From attach to the end of its cost measurement a library has callbacks on, and
	 * names every handle launched meanwhile. After it, whenever a tick meets a launch
	 * whose handle had no name, the libraries' callbacks stay on between windows too
	 * (activity off, nothing followed) until a tick drains launches all named, so that
	 * a handle is named at its next launch. */
	{
		bool unnamed = c->s->unnamed_launches != c->unnamed_seen,
		     launched = c->s->kernel_launches != c->launches_seen;

		/* a tick that drained launches, every one named */
		if (launched || unnamed)
			c->named_tick = launched && !unnamed;
		c->names_wanted = !c->named_tick;
		c->launches_seen = c->s->kernel_launches;
	}
	c->unnamed_seen = c->s->unnamed_launches;
	if (c->names_wanted)
		c->naming_ticks++;
	hmap_for_each(&c->tab, e)
	{
		struct cpt_wtarget *t = cpt_as_target(e);

		if (!t)
			continue;
		read_pace(c, t);
		/* each library plans its windows at its own measured cost's duty, once known, and
		 * kept while it measures again: its windows resume right after, not a tick later */
		t->duty_ppm = t->cost.state == DEV_COST_IDLE || t->taken ? (ppm ? ppm : 1) : 0;
		t->remeasure_ms = cpt_remeasure_of(c, t);
		if (t->addr && (t->duty_ppm != t->written_ppm || c->names_wanted != t->written_names ||
				c->every != t->written_every || t->remeasure_ms != t->written_remeasure))
			write_part(c, t);
	}
}

/* The share of CUPTI's cost that pushed run R's launches out of their window. Where the
 * device's records tell who set the pace (DEV_REC_*), from them: a kernel that started
 * as it was launched, its stream idle before it, started later by as much as its launch
 * was later; one that waited for the kernel before it on its stream absorbed the delay
 * (a device that sets the pace). The launch probes' stall experiment says the same of the
 * CPU's side, but its noise over a few thousand gaps is most of the share (0.2-0.96 over
 * runs of a launch-bound loop on the CUPTI model, whose kernels all start as launched:
 * device time 0.66-0.85 of the truth), where the records are exact. *TOLD: false while
 * too few have come in to tell (DEV_PACE_MIN) from a library that tells: the launch
 * probes' share stands in. */
static struct est_delay run_share(struct cupti_tracer *c, const struct dev_run *r, bool *told)
{
	double n = (double)r->free + r->queued, s;

	if (n < DEV_PACE_MIN) {
		/* final where every launch's record is in, or its library does not tell */
		*told = n >= r->n || !c->paced_told;
		return windows__share(c->win, CG_LAUNCH);
	}
	c->paced_told = true;
	s = r->free / n;
	return (struct est_delay){s, s, s};
}

/* The launches of thread TID that CUPTI's cost pushed past the end of window M: its run
 * since it last slept, each launch c seconds dearer, the probe's trap part of c taken within
 * its calibrated range. A thread that slept after its last launch before the window closed
 * stopped launching of itself: nothing pushed. Nor does a launch that waits for a device
 * that sets the pace: the share of a delay that pushes launches out is the launch probes'
 * measured one (estimate.h, est_response). Records of a window still open (a buffer CUPTI
 * completed in it) count its run so far, which goes on; once closed, each thread's is
 * worked out once (a window's records come in a batch per stack). */
static struct est_delay run_delay(struct cupti_tracer *c, const struct cpt_wtarget *t, struct cpt_win *m, uint32_t tid)
{
	struct dev_run_key rk = {.tgid = t->tgid, .tid = tid, .window = m->id};
	struct est_delay d = {1, 1, 1}, share;
	struct dev_run r;
	double cost, base, span, x;
	bool slept = false, told = true;

	for (uint32_t i = 0; m->closed && i < m->nthr; i++)
		if (m->thr_tid[i] == tid)
			return m->thr_d[i];
	if (!c->skel || !cpt_launch_cost(t, &cost, &base) ||
	    bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.dev_runs), &rk, &r))
		return d;
	if (r.run_n >= 2 && r.last >= r.run_start) {
		span = (double)(r.last - r.run_start) / 1e9;
		/* slept after its last launch, by its voluntary switches (read at the first drain
		 * after the close), as the probe groups' windows judge it: a gap alone, which a
		 * thread preempted at the end has too (3-25 ms beside two CPU hogs), took whole
		 * windows for made up (device time 0.4-0.7 of the truth there) */
		slept = m->closed && m->end > r.last + DEV_RUN_GAP_NS && windows__task_slept(t->tgid, tid, r.nvcsw);
		/* on a shared CPU the run waited its turns in CUPTI's cost as in its own work */
		x = est_run_stretch(span, (double)r.run_wait / 1e9);
		/* c is measured, at a quantile of a few hundred calls: a fifth of it is taken as
		 * uncertain (its range 0.9-1.3 c), and so is CUPTI's dispatch in it, which is not */
		share = run_share(c, &r, &told);
		d = est_delay_share(est_run_delay(r.n, r.run_n, 0, span, x * r.run_n * cost,
						  x * r.run_n * (0.2 * cost + DEV_CB_DISPATCH_SPREAD_S), NULL, x * cost,
						  slept),
				    share);
		pr_debug("device window %u: thread %u made %u launches (%u since it last slept) in %.0f us, waited "
			 "%.0f us for a CPU (x%.2f), %s after its last; c %.2f us, of which %.2f pushes launches "
			 "out (%s: %u started as they were launched, %u queued): x%.3f (x%.3f-x%.3f)",
			 m->id, tid, r.n, r.run_n, span * 1e6, (double)r.run_wait / 1e3, x,
			 slept	     ? "slept"
			 : m->closed ? "did not sleep"
				     : "window open",
			 cost * 1e6, share.mid,
			 r.free + r.queued >= DEV_PACE_MIN ? "the device's records" : "the launch probes' stalls",
			 r.free, r.queued, d.mid, d.lo, d.hi);
	}
	/* (worked out again at the next drain while too few of its records have come in to
	 * tell who set the pace) */
	if (m->closed && told && m->nthr < CPT_WIN_THREADS) {
		m->thr_tid[m->nthr] = tid;
		m->thr_d[m->nthr++] = d;
		c->runs++;
		if (r.run_n >= 2 && r.free + r.queued >= DEV_PACE_MIN) {
			c->paced_runs++;
			c->paced_free += r.free;
			c->paced_queued += r.queued;
		}
	}
	return d;
}

double cpt_win_weight(struct cupti_tracer *c, uint32_t tgid, uint32_t tid, uint32_t id, uint64_t *period,
		      struct est_delay *d)
{
	struct cpt_wtarget *t = id ? target(c, tgid, false) : NULL;
	struct cpt_win *m = t ? &t->win[id % DEV_WIN_RING] : NULL;

	if (!m || m->id != id)
		return 0;
	*period = m->period;
	*d = run_delay(c, t, m, tid);
	return m->weight;
}

void cpt_win_add(struct cupti_tracer *c, uint64_t period, double w, const struct est_delay *d, double n,
		 const double values[3])
{
	struct est_period *ep;

	/* the agent says no estimate of a whole recording: its periods are not kept (they
	 * would grow with its days) */
	if (!c->win || period < c->p0 || c->s->opts->daemon)
		return;
	ep = est_group_period(&c->est, period - c->p0);
	if (ep)
		est_period_add(ep, w, d, n, values);
}

/* Launch and copy calls T's callbacks saw outside its windows and its cost measurement:
 * those of the ticks that named launch handles (the library counts every call its
 * callbacks see; the batches carry the count). */
static double naming_calls(struct cupti_tracer *c, const struct cpt_wtarget *t)
{
	struct dev_proc p;
	double n;

	if (!c->skel || bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.dev_procs), &t->tgid, &p))
		return 0;
	n = (double)(p.ctr.launches_seen + p.ctr.copies_seen) - (double)t->followed - t->cost.calls;
	return n > 0 ? n : 0;
}

/* What T's library spent once, in seconds of its launching threads' time: CUPTI's set-up
 * at attach and each measurement's switches (ONE), the measurements' timed calls (half of
 * them with activity, all with callbacks: MEASURE), and the calls its callbacks saw
 * outside windows (the measurements' warm-up and calls they did not time, the ticks that
 * named launch handles: NAMING), at the library's own time in them and CUPTI's dispatch to
 * them, which is in neither half of the measurement (dispatch_s). The last two once its
 * cost is measured. */
static void once_parts(struct cupti_tracer *c, const struct cpt_wtarget *t, double part[3])
{
	const struct dev_costs *k = t->taken;
	double cb;

	part[0] += (double)t->cost.fixed_us / 1e6;
	if (!k)
		return;
	cb = (double)k->callback_ns / 1e9 + cpt_dispatch_s(k);
	part[1] += t->cost.calls * (cb + (k->on_ns > k->off_ns ? (double)(k->on_ns - k->off_ns) / 2e9 : 0));
	part[2] += naming_calls(c, t) * cb;
}

/* All that every library spent once (seconds): repaid from the budget (the governor's
 * debt), and in the estimated overhead. PART (may be NULL): once_parts' three. */
static double once_costs(struct cupti_tracer *c, double part[3])
{
	double p[3] = {0, 0, 0};

	hmap_for_each(&c->tab, e)
	{
		const struct cpt_wtarget *t = cpt_as_target(e);

		if (t)
			once_parts(c, t, p);
	}
	if (part)
		memcpy(part, p, sizeof(p));
	return p[0] + p[1] + p[2];
}

double cupti__overhead(struct cupti_tracer *c, double elapsed, double *parts)
{
	double cost = 0, launches = 0, once[3], sw = (double)c->switch_ns / 1e9;
	int n = 0;

	if (parts)
		memset(parts, 0, CUPTI_COST_PARTS * sizeof(*parts));
	if (!c->win)
		return 0;
	hmap_for_each(&c->tab, e)
	{
		struct cpt_wtarget *t = cpt_as_target(e);
		double k, b;

		if (t && cpt_launch_cost(t, &k, &b)) {
			cost += k;
			n++;
		}
	}
	once_costs(c, once);
	if (n)
		launches = (double)c->followed * cost / n;
	if (parts && elapsed > 0) {
		parts[0] = launches / elapsed;
		parts[1] = sw / elapsed;
		parts[2] = once[1] / elapsed;
		parts[3] = once[2] / elapsed;
		parts[4] = once[0] / elapsed;
	}
	return elapsed > 0 ? (launches + sw + once[0] + once[1] + once[2]) / elapsed : 0;
}

void cupti__set_windows(struct cupti_tracer *c, struct windows *w, double period)
{
	c->win = w;
	c->period = period > 0 ? period : 1;
	c->every = 1;
	c->p0 = mono_ns() / (uint64_t)llround(c->period * 1e9);
	c->names_wanted = 1; /* what a library starts with; its measurement names all */
	/* its cost measured again after this long (0: once per attach): an agent's job runs
	 * for days, its launches change, and a measurement now and then costs a few tens of
	 * milliseconds, repaid from the budget */
	c->remeasure_ms = (uint32_t)lround(1000 * envnum__get("GPUBPF_DEVICE_REMEASURE", 0, 86400, 300));
	c->named_tick = true;
	/* every call in a window is followed */
	if (w)
		c->max_rate = 0;
}
