// SPDX-License-Identifier: MIT
/* gpubpf's own CPU time and what of it the targets paid (owncpu.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_ISSET */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "owncpu.h"
#include "readfile.h"

/* /proc/stat's CPU lines come first; the rest (every interrupt's count) can be long. */
#define STAT_MAX (256 << 10)

static bool has_cpu(const struct owncpu *o, long n)
{
	return n >= 0 && n < (long)sizeof(o->mask) * 8 && (o->mask[n / 8] >> (n % 8)) & 1;
}

int owncpu__parse(const struct owncpu *o, const char *text, double tick, struct owncpu_snap *s)
{
	const char *p = text;
	bool any = false;

	s->busy = s->idle = 0;
	while (p && *p) {
		unsigned long long v[8] = {0};
		char *end;
		long n;

		/* "cpuN user nice system idle iowait irq softirq steal ..." (not "cpu ", the sum) */
		if (strncmp(p, "cpu", 3) == 0 && p[3] >= '0' && p[3] <= '9') {
			errno = 0;
			n = strtol(p + 3, &end, 10);
			if (!errno && has_cpu(o, n) &&
			    sscanf(end, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
				   &v[6]) == 7) {
				s->busy += (double)(v[0] + v[1] + v[2] + v[5] + v[6]) * tick;
				s->idle += (double)(v[3] + v[4]) * tick;
				any = true;
			}
		} else if (any) {
			break; /* past the CPU lines */
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return any ? 0 : -EINVAL;
}

/* Between looks A and B: gpubpf's CPU time (*G), what of it no idle CPU could have held
 * (*D), and a thread's fair part of that (returned): its CPU time (all of the interval, at
 * most what the others ran) over everything else's. */
static double between(const struct owncpu_snap *a, const struct owncpu_snap *b, double *g, double *d)
{
	double dt = b->t - a->t, idle = fmax(0, b->idle - a->idle), busy = fmax(0, b->busy - a->busy), others;

	*g = fmax(0, b->self - a->self);
	*d = fmax(0, *g - idle);
	others = fmax(0, busy - *g);
	return *d > 0 && others > 0 ? *d * fmin(dt, others) / others : 0;
}

void owncpu__add(struct owncpu *o, const struct owncpu_snap *s)
{
	if (o->have && s->t > o->last.t) {
		double g, d, fair = between(&o->last, s, &g, &d);

		o->own += g;
		o->displaced += d;
		o->span += s->t - o->last.t;
		o->fair += fair;
	}
	o->last = *s;
	o->have = true;
}

/* A one-off part between looks A and B (the set-up, what follows the recording): its CPU
 * in *G, what of it was displaced (returned), counted with the rest where the targets ran
 * BESIDE it. */
static double one_off(struct owncpu *o, const struct owncpu_snap *a, const struct owncpu_snap *b, bool beside,
		      double *g)
{
	double d, fair = between(a, b, g, &d);

	if (beside) {
		o->displaced += d;
		o->fair += fair;
	}
	return d;
}

void owncpu__add_setup(struct owncpu *o, const struct owncpu_snap *mark, bool beside)
{
	double g;

	if (!o->have || !(o->last.t > mark->t))
		return;
	o->setup_displaced = one_off(o, mark, &o->last, beside, &g);
	o->beside = beside;
}

void owncpu__add_after(struct owncpu *o, const struct owncpu_snap *s, bool beside)
{
	if (!o->have || o->have_after || !(s->t > o->last.t))
		return;
	o->after_displaced = one_off(o, &o->last, s, beside, &o->after);
	o->after_beside = beside;
	o->have_after = true;
}

static double self_cpu(void)
{
	struct rusage r;

	if (getrusage(RUSAGE_SELF, &r))
		return 0;
	return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
	       (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

static int snap(struct owncpu *o, struct owncpu_snap *s)
{
	long hz = sysconf(_SC_CLK_TCK);
	struct timespec ts;
	char *text;
	int err;

	text = readfile__path("/proc/stat", STAT_MAX, true, NULL);
	if (!text)
		return -errno;
	err = owncpu__parse(o, text, 1.0 / (double)(hz > 0 ? hz : 100), s);
	free(text);
	if (err)
		return err;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	s->self = self_cpu();
	return 0;
}

/* The look at gpubpf's start (owncpu__mark), if one was taken. */
static struct owncpu_snap mark;
static bool marked;

static void set_mask(struct owncpu *o)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		for (int n = 0; n < CPU_SETSIZE && n < (int)sizeof(o->mask) * 8; n++)
			if (CPU_ISSET(n, &set)) {
				o->mask[n / 8] |= (unsigned char)(1u << (n % 8));
				o->ncpus++;
			}
	}
	if (!o->ncpus) {
		memset(o->mask, 0xff, sizeof(o->mask));
		o->ncpus = -1; /* all of them */
	}
}

void owncpu__mark(void)
{
	struct owncpu o = {0};

	set_mask(&o);
	marked = snap(&o, &mark) == 0;
}

void owncpu__start(struct owncpu *o, bool beside)
{
	memset(o, 0, sizeof(*o));
	set_mask(o);
	owncpu__look(o);
	o->setup = o->have ? o->last.self : self_cpu();
	if (marked)
		owncpu__add_setup(o, &mark, beside);
	marked = false; /* a later recording's set-up is its own */
}

void owncpu__look(struct owncpu *o)
{
	struct owncpu_snap s;
	int err;

	if (o->failed)
		return;
	err = snap(o, &s);
	if (err) {
		o->failed = true;
		pr_debug("cannot read /proc/stat (%s): gpubpf's own CPU is not counted in the overhead",
			 strerror(-err));
		return;
	}
	owncpu__add(o, &s);
}

void owncpu__after(struct owncpu *o, bool beside)
{
	struct owncpu_snap s;

	if (o->failed || !o->have || snap(o, &s))
		return;
	owncpu__add_after(o, &s, beside);
}

double owncpu__share(const struct owncpu *o, double elapsed, double *hi)
{
	if (hi)
		*hi = elapsed > 0 ? fmin(1, o->displaced / elapsed) : 0;
	return elapsed > 0 ? fmin(1, o->fair / elapsed) : 0;
}

void owncpu__text(const struct owncpu *o, double elapsed, char *buf, unsigned long len)
{
	double hi, mid = owncpu__share(o, elapsed, &hi);
	char setup[200], after[200] = "";
	bool aft = o->have_after && o->after_beside;
	const char *parts = o->beside ? (aft ? " and before and after it" : " and the set-up")
			    : aft     ? " and after it"
				      : "";

	if (o->failed || !o->have) {
		snprintf(buf, len, "gpubpf's own CPU: not measured (/proc/stat unreadable)");
		return;
	}
	if (o->beside)
		snprintf(setup, sizeof(setup),
			 "; %.3g s more setting up before it, beside the running targets, %.3g s of that where no "
			 "CPU was idle, counted with the rest",
			 o->setup, o->setup_displaced);
	else
		snprintf(setup, sizeof(setup), "; %.3g s more setting up before it, the targets held or not started",
			 o->setup);
	if (o->have_after && o->after_beside)
		snprintf(after, sizeof(after),
			 "; %.3g s more after it, symbolizing the profile, beside the targets running on, %.3g s "
			 "of that where no CPU was idle, counted with the rest",
			 o->after, o->after_displaced);
	else if (o->have_after)
		snprintf(after, sizeof(after), "; %.3g s more after it, symbolizing the profile, the targets gone",
			 o->after);
	snprintf(
	    buf, len,
	    "gpubpf's own CPU: %.3g s over %.3g s (%.3g%% of a CPU%s%s); %.3g s of it%s ran where none of the %d CPUs "
	    "it may use was idle, taken from what ran there: the busiest target thread's fair share of it is "
	    "%.3g%% of its time (up to %.3g%% if all of it came from that thread), counted in the estimated "
	    "overhead and repaid from the budget",
	    o->own, o->span, o->span > 0 ? 100 * o->own / o->span : 0, setup, after, o->displaced, parts,
	    o->ncpus > 0 ? o->ncpus : (int)sysconf(_SC_NPROCESSORS_ONLN), 100 * mid, 100 * hi);
}
