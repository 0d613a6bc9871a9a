// SPDX-License-Identifier: MIT
/* What device time costs a launch in a target, gpubpf's side: its library's measurements
 * (bpf/cupti.h, struct dev_costs) kept as they come, the one taken chosen among them, when
 * the library measures again, and the cost per launch (c) and the launch without it that
 * the windows are planned and corrected from (cupti_win.c). */
#include <math.h>
#include <stdint.h>

#include "../../bpf/cupti.h"
#include "cupti.h"
#include "log.h"

#include "cupti_int.h"

/* CUPTI's dispatch to the callbacks of a launch call and the subscription, seconds, by
 * measurement K */
double cpt_dispatch_s(const struct dev_costs *k)
{
	return fmax(DEV_CB_DISPATCH_S, DEV_SUBSCRIBED_S + (double)k->dispatch_ns / 1e9);
}

/* c of measurement K (seconds): what activity added to a launch, and the callbacks: the
 * library's time in them, timed, and CUPTI's dispatch to them, which both halves of the
 * measurement had and the job between windows has not */
static double cost_c(const struct dev_costs *k)
{
	return (k->on_ns > k->off_ns ? (double)(k->on_ns - k->off_ns) / 1e9 : 0) + (double)k->callback_ns / 1e9 +
	       cpt_dispatch_s(k);
}

/* The measurement T's cost is taken from, chosen when one comes: the median by c of its
 * last three, of two the later. One measurement times a few hundred calls, and one in
 * several is off by a tenth (c 4.7-6.0 us run to run on the CUPTI model, the launching
 * thread's CPUs shared): the median leaves it out, and follows a job whose launches
 * changed after two. While the library measures again, its last figures stand. */
static const struct dev_costs *take_median(const struct cpt_wtarget *t)
{
	const struct dev_costs *v[CPT_COSTS];
	uint32_t n = t->kept < CPT_COSTS ? t->kept : CPT_COSTS;

	if (n < CPT_COSTS)
		return n ? &t->costs[n - 1] : NULL;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t j = i;

		for (; j > 0 && cost_c(v[j - 1]) > cost_c(&t->costs[i]); j--)
			v[j] = v[j - 1];
		v[j] = &t->costs[i];
	}
	return v[n / 2];
}

/* T's library measured its cost again (dev_costs.measures; GPUBPF_DEVICE_REMEASURE): kept,
 * and the one taken chosen anew. */
void cpt_note_measure(struct cpt_wtarget *t)
{
	double k = cost_c(&t->cost);

	if (t->cost.measures < t->measures) {
		t->measures = t->kept = 0; /* attached again */
		t->taken = NULL;
	}
	if (t->cost.state == DEV_COST_IDLE && t->cost.done && t->cost.done != t->idle_done) {
		t->idle_done = t->cost.done;
		pr_debug("pid %u: cost measurement not done: too few launch calls in its %.0f ms (ended in phase %u "
			 "with %u \"off\" and %u \"on\" calls kept; %u timed so far); tried again at once where its "
			 "first phase had them, else in 2 s",
			 t->tgid, (double)(t->cost.done - t->cost.started) / 1e6, t->cost.idle_why & 3,
			 (t->cost.idle_why >> 2) & 0x3fff, t->cost.idle_why >> 16, t->cost.calls);
	}
	if (t->cost.state != DEV_COST_DONE || t->cost.measures == t->measures)
		return;
	t->c_lo = t->kept ? fmin(t->c_lo, k) : k;
	t->c_hi = t->kept ? fmax(t->c_hi, k) : k;
	t->costs[t->kept++ % CPT_COSTS] = t->cost;
	t->measures = t->cost.measures;
	t->taken = take_median(t);
	pr_debug("pid %u: cost measurement %u: c %.2f us (on %.2f, off %.2f, callbacks %.2f us, %u calls so far)",
		 t->tgid, t->measures, k * 1e6, t->cost.on_ns / 1e3, t->cost.off_ns / 1e3, t->cost.callback_ns / 1e3,
		 t->cost.calls);
}

/* When T's library measures its cost again (dev_config.remeasure_ms): GPUBPF_DEVICE_REMEASURE
 * after the last, sooner (a quarter of it, 10 s at most) where the last one's c is a tenth
 * or more off the one before: the job changed, or one of the two is off, and the median
 * takes the next one's side. */
uint32_t cpt_remeasure_of(const struct cupti_tracer *c, const struct cpt_wtarget *t)
{
	double last, before;

	if (t->kept < 2)
		return c->remeasure_ms;
	last = cost_c(&t->costs[(t->kept - 1) % CPT_COSTS]);
	before = cost_c(&t->costs[(t->kept - 2) % CPT_COSTS]);
	if (fabs(last - before) < 0.1 * fmin(last, before))
		return c->remeasure_ms;
	return c->remeasure_ms / 4 < CPT_CONFIRM_MS ? c->remeasure_ms / 4 : CPT_CONFIRM_MS;
}

bool cpt_launch_cost(const struct cpt_wtarget *t, double *cost, double *base)
{
	const struct dev_costs *k = t->taken;
	double cb;

	if (!k)
		return false;
	cb = (double)k->callback_ns / 1e9 + cpt_dispatch_s(k);
	*cost = cost_c(k);
	*base = fmax((double)k->off_ns / 1e9 - cb, 0.5e-6);
	return true;
}
