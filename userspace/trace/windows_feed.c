// SPDX-License-Identifier: MIT
/* The windows from the drains' and the tick's side (windows.h): what they learn of the
 * costs goes to the governor, what they read of a window's hits into its period's
 * estimate, by the window's weight and its threads' delay corrections. Under the books'
 * lock, as the window thread's side (windows.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "estimate.h"
#include "governor.h"
#include "windows.h"

#include "windows_int.h"

/* Window ID's record, while the ring still holds it */
static struct wrec *rec_of(struct windows *w, uint32_t id)
{
	struct wrec *r = &w->ring[id % WIN_RING];

	return id && r->id == id ? r : NULL;
}

void windows__no_estimates(struct windows *w)
{
	pthread_mutex_lock(&w->lock);
	w->no_estimates = true;
	pthread_mutex_unlock(&w->lock);
}

void windows__set_device(struct windows *w, double util, double fixed)
{
	struct gov_group *g;

	pthread_mutex_lock(&w->lock);
	if (w->gv->ngroups > CG__COUNT) {
		g = &w->gv->g[CG__COUNT];
		g->always = false;
		g->measured = true;
		g->util = g->util_all = util;
		g->fixed = fixed;
		governor__plan(w->gv);
	}
	pthread_mutex_unlock(&w->lock);
}

/* The governor's debt is device time's one-off costs (OWN false) and what gpubpf's own CPU
 * took (OWN true): SECS is one of them so far. */
static void set_debt(struct windows *w, bool own, double secs)
{
	pthread_mutex_lock(&w->lock);
	*(own ? &w->once_own : &w->once_dev) = secs;
	if (w->once_dev + w->once_own != w->gv->once) {
		governor__spent_once(w->gv, w->once_dev + w->once_own);
		governor__plan(w->gv);
	}
	pthread_mutex_unlock(&w->lock);
}

void windows__set_once(struct windows *w, double secs)
{
	set_debt(w, false, secs);
}

void windows__set_own(struct windows *w, double secs)
{
	set_debt(w, true, secs);
}

void windows__set_cpu(struct windows *w, double sample, double rate, double switches)
{
	pthread_mutex_lock(&w->lock);
	governor__set_cpu(w->gv, sample, rate, switches);
	pthread_mutex_unlock(&w->lock);
}

int windows__weight(struct windows *w, uint32_t id, uint32_t tid, double *weight, struct est_delay *d, double *walked)
{
	struct wrec *r;
	int ret = 1;

	*weight = *walked = 1;
	d->mid = d->lo = d->hi = 1;
	pthread_mutex_lock(&w->lock);
	r = rec_of(w, id);
	if (!r)
		ret = -ENOENT;
	else if (!r->final)
		ret = 0;
	else {
		*weight = r->w_eff;
		for (int i = 0; i < r->nthr; i++)
			if (r->thr[i].tid == tid) {
				d->mid = r->thr[i].f;
				d->lo = r->thr[i].lo;
				d->hi = r->thr[i].hi;
				*walked = r->thr[i].walked;
			}
	}
	pthread_mutex_unlock(&w->lock);
	return ret;
}

void windows__add(struct windows *w, uint32_t id, double n, const double values[3], double weight,
		  const struct est_delay *d)
{
	struct wrec *r;

	pthread_mutex_lock(&w->lock);
	r = rec_of(w, id);
	if (r) {
		struct est_period *p = w->no_estimates ? NULL : est_group_period(&w->est[r->group], r->period);

		if (p)
			est_period_add(p, weight, d, n, values);
	}
	pthread_mutex_unlock(&w->lock);
}

void windows__governor(struct windows *w, struct governor *out)
{
	pthread_mutex_lock(&w->lock);
	*out = *w->gv;
	pthread_mutex_unlock(&w->lock);
}
