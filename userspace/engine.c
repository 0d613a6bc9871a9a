// SPDX-License-Identifier: MIT
/* The recording engine (engine.h): what record and agent share, moved here from record.c
 * as it was. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cpu.h"
#include "cuda.h"
#include "cupti.h"
#include "engine.h"
#include "governor.h"
#include "kbtf.h"
#include "log.h"
#include "procs.h"
#include "profile.h"
#include "python.h"
#include "session.h"
#include "status.h"
#include "syms.h"

double engine__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t engine__wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The symbolizer keeps every object it reads open (so exited processes still resolve),
 * and -a reads many: allow as many descriptors as the hard limit does. */
static void raise_fd_limit(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

/* "launches 2.1%, copies 100%, ..." */
void engine__duty_text(const struct governor *gv, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int g = 0; g < gv->ngroups && off < len; g++) {
		int n;

		if (gv->g[g].always)
			continue;
		n = snprintf(buf + off, len - off, "%s%s %.3g%%", off ? ", " : "", gv->g[g].name, 100 * gv->g[g].duty);
		if (n < 0)
			break;
		off += (size_t)n;
	}
}

/* Every probe is in: tell a script that waits (GPUBPF_READY_FILE names a file to create).
 * Tests use it to release a target only once gpubpf sees everything it does. */
static void signal_ready(void)
{
	const char *f = getenv("GPUBPF_READY_FILE");
	int fd;

	if (!f || !*f)
		return;
	/* The pid tells a waiter this run from an earlier one. */
	fd = open(f, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		dprintf(fd, "%d\n", (int)getpid());
		close(fd);
	}
}

/* Length of one window period: 1 s; GPUBPF_WINDOW_PERIOD (seconds) shortens it so tests
 * see many periods in a few seconds. */
static double window_period(void)
{
	const char *e = getenv("GPUBPF_WINDOW_PERIOD");
	double v;

	if (e && cli__parse_double(e, 0.01, 1, &v) == 0)
		return v;
	return 1.0;
}

static void setup_governor(struct governor *gv, const struct record_opts *o, struct cuda_tracer *cuda,
			   struct cpu_sampler *cpu, bool windowed)
{
	double cost = cuda__calibrate(cuda), sample = windowed ? cpu__sample_cost(cpu) : -1;

	if (cost <= 0) {
		/* What DESIGN measured here; said in the comments with the rest. */
		cost = 5e-6;
		pr_warn("cannot measure the cost of a probe hit; assuming %.1f us", cost * 1e6);
	}
	pr_debug("one probe hit costs %.2f us", cost * 1e6);
	gv->budget = o->budget / 100;
	gv->cost_per_hit = cost;
	/* A CPU sample interrupts a thread at most freq times a second. */
	if (sample < 0)
		sample = cost;
	pr_debug("one CPU sample costs the sampled thread %.2f us", sample * 1e6);
	gv->sample_cost = sample;
	gv->cpu_cost = o->freq * sample;
	gv->min_duty = 0.002; /* 2 ms a second: dozens of launches even at 40k probed calls/s */
	/* Until a group's rate is measured it stays attached: a short program is then counted
	 * exactly, and the first window measures what the next ones cost. */
	gv->probe_duty = 1;
	gv->exact = !windowed;
	gv->ngroups = CG__COUNT;
	for (int g = 0; g < CG__COUNT; g++)
		gv->g[g].name = cuda_group_names[g];
	/* Frees must meet their allocations for gpu_inuse, and name lookups teach kernel
	 * names: both rare, both always attached. */
	gv->g[CG_ALLOC].always = true;
	gv->g[CG_NAME].always = true;
	governor__plan(gv);
	cuda__set_governor(cuda, gv, windowed);
}

/* Between plans, a group can turn hot (a job's next phase) while planned fully on, or at
 * a higher rate than its window was planned for, and cost far more than the plan allowed
 * until the next one. Every GUARD_S, or at once when BPF says a group's hits passed what
 * it may make until then, compare what each group cost since the last look (its hits,
 * counted in BPF) with what the plan allowed it; well over, detach it until the next
 * plan, which knows its new rate from the guard. */
#define GUARD_S 0.05

static void guard_check(struct guard *gd, struct cuda_tracer *cuda, struct governor *gv, double t, bool woken)
{
	uint64_t hits[CG__COUNT];
	double dt = t - gd->t;

	if (!woken && dt < 0.8 * GUARD_S)
		return;
	cuda__group_hits(cuda, hits);
	for (int g = 0; g < gv->ngroups && g < CG__COUNT; g++) {
		double n = (double)(hits[g] - gd->hits[g]), allow;

		if (n > 0 && dt > 0 && cuda__group_on(cuda, g) && governor__guard(gv, g, n, dt)) {
			cuda__set_group(cuda, g, false);
			/* n/dt understates a burst that woke us: the hits may all be recent */
			if (woken)
				governor__assume_saturated(gv, g);
			pr_debug("guard: %s detached until the next plan (%.0f hits in %.1f ms)", gv->g[g].name, n,
				 dt * 1e3);
		}
		/* Until the next look: the hit past its allowance wakes us. */
		allow = governor__guard_hits(gv, g, GUARD_S);
		if (!gv->exact && !gv->g[g].always)
			cuda__arm_guard(cuda, g, hits[g] + (uint64_t)(allow > 1 ? allow : 1));
	}
	memcpy(gd->hits, hits, sizeof(hits));
	gd->t = t;
}

/* Close every window that is open now (groups planned fully on stay on). */
static void close_windows(struct cuda_tracer *cuda, struct governor *gv, double *off_at)
{
	for (int g = 0; g < gv->ngroups; g++) {
		if (off_at[g] > 0) {
			cuda__set_group(cuda, g, false);
			off_at[g] = 0;
		}
	}
}

/* The first drain (seconds), which measures the hit rates for the first plan. */
#define FIRST_DRAIN 0.03

/* Open and close the probe windows that are due; at each period's start, plan anew. */
static double run_windows(struct cuda_tracer *cuda, struct governor *gv, double *off_at, double *next_window,
			  double period, double t)
{
	double next = *next_window;

	for (int g = 0; g < gv->ngroups; g++) {
		if (off_at[g] > 0 && t >= off_at[g]) {
			cuda__set_group(cuda, g, false);
			off_at[g] = 0;
		}
	}
	if (t >= *next_window) {
		governor__plan(gv);
		if (log_verbose)
			for (int g = 0; g < gv->ngroups; g++)
				if (!gv->g[g].always)
					pr_debug("plan: %s %.3g%% (busiest thread %.0f hits/s, all %.0f/s)",
						 gv->g[g].name, 100 * gv->g[g].duty, gv->g[g].rate, gv->g[g].all);
		*next_window = t + period;
		for (int g = 0; g < gv->ngroups; g++) {
			cuda__set_group(cuda, g, true);
			off_at[g] = gv->g[g].duty >= 1 ? 0 : t + gv->g[g].duty * period;
			/* A rate not known yet is measured in one window up to the first drain
			 * (the plan after it knows the rate), closed before that tick's work,
			 * which symbolizes for ~0.2 s. Meanwhile the guard lets such a group
			 * spend one period's budget: a short program is counted exactly. */
			if (!gv->g[g].measured && !gv->g[g].always && period > FIRST_DRAIN) {
				off_at[g] = t + FIRST_DRAIN;
				*next_window = t + FIRST_DRAIN;
			}
		}
		next = *next_window;
	}
	for (int g = 0; g < gv->ngroups; g++)
		if (off_at[g] > 0 && off_at[g] < next)
			next = off_at[g];
	return next;
}

int engine__setup_profile(struct session *s)
{
	s->prof = profile__new();
	if (!s->prof)
		return -errno;
	s->t_samples = profile__add_type(s->prof, "samples", "count");
	s->t_cpu_ns = profile__add_type(s->prof, "cpu", "nanoseconds");
	s->t_cuda_calls = profile__add_type(s->prof, "cuda_calls", "count");
	s->t_cuda_launches = profile__add_type(s->prof, "cuda_launches", "count");
	s->t_cuda_memcpy = profile__add_type(s->prof, "cuda_memcpy", "bytes");
	s->t_cuda_sync_ns = profile__add_type(s->prof, "cuda_sync_wait", "nanoseconds");
	s->t_gpu_alloc = profile__add_type(s->prof, "gpu_alloc", "bytes");
	s->t_gpu_inuse = profile__add_type(s->prof, "gpu_inuse", "bytes");
	if (s->t_samples < 0 || s->t_cpu_ns < 0 || s->t_cuda_calls < 0 || s->t_cuda_launches < 0 ||
	    s->t_cuda_memcpy < 0 || s->t_cuda_sync_ns < 0 || s->t_gpu_alloc < 0 || s->t_gpu_inuse < 0)
		return -EINVAL;
	s->period_ns = 1000000000LL / s->opts->freq;
	return profile__set_period(s->prof, "cpu", "nanoseconds", s->period_ns);
}

int engine__open_session(struct engine *e, const struct record_opts *o)
{
	int err;

	memset(e, 0, sizeof(*e));
	e->s.opts = o;
	e->s.comms_fd = -1;
	e->period = window_period();
	raise_fd_limit();
	e->s.syms = syms__new();
	if (!e->s.syms) {
		err = -errno;
		pr_err("cannot start the symbolizer: %s", strerror(-err));
		return err;
	}
	err = engine__setup_profile(&e->s);
	if (err) {
		pr_err("cannot set up the profile: %s", strerror(-err));
		return err;
	}
	err = kbtf__task_offsets(&e->s.task_off);
	if (err) {
		pr_err("cannot read struct task_struct from the kernel's BTF: %s", strerror(-err));
		return err;
	}
	e->s.procs = procs__new(o, e->s.syms, &e->s.task_off);
	if (!e->s.procs) {
		err = -errno;
		pr_err("cannot load the process tracking BPF programs: %s (run with -v for details)", strerror(-err));
		return err;
	}
	e->s.comms_fd = procs__comms_fd(e->s.procs);
	return 0;
}

int engine__open_tracers(struct engine *e)
{
	const struct record_opts *o = e->s.opts;
	struct session *s = &e->s;
	int err;

	/* Python frames: shares its maps with the CPU and CUDA objects, so before them. A
	 * failure only costs the Python frames (it said why). */
	python__attach_session(s);
	e->cpu = cpu__new(s, procs__targets_fd(s->procs), s->comms_fd);
	if (!e->cpu)
		return -errno;
	e->cuda = cuda__new(s, procs__targets_fd(s->procs), s->comms_fd);
	if (!e->cuda)
		return -errno;
	e->windowed = !o->exact && cuda__windowed(e->cuda);
	setup_governor(&e->gov, o, e->cuda, e->cpu, e->windowed);
	/* Device time: the injection library's USDT probes, where a target has it. */
	e->cupti = cupti__new(s, procs__targets_fd(s->procs), s->comms_fd);
	if (!e->cupti) {
		err = -errno;
		return err ? err : -ENOMEM;
	}
	cupti__set_budget(e->cupti, o->budget, e->gov.cost_per_hit, o->exact);
	return 0;
}

void engine__scan(struct engine *e)
{
	cupti__scan(e->cupti);
	cuda__scan(e->cuda);
}

void engine__start(struct engine *e, const char *desc)
{
	struct session *s = &e->s;

	snprintf(e->desc, sizeof(e->desc), "%s", desc);
	e->start = engine__now();
	cuda__start(e->cuda);
	profile__set_time(s->prof, engine__wall_ns(), 0);
	status__init(&e->status, e->desc);
	/* The first drain measures the hit rates the window plan needs: early. */
	e->next_tick = e->start + (e->windowed ? FIRST_DRAIN : 1.0);
	pr_debug("recording %s", e->desc);
	signal_ready();
	e->next_window = e->start;
	if (e->windowed) {
		/* From here on: hits before the recording (a held command's start) do not count. */
		cuda__group_hits(e->cuda, e->guard.hits);
		e->guard.t = e->start;
		guard_check(&e->guard, e->cuda, &e->gov, e->start, true);
	}
}

/* The tick: drains, targets, new objects, symbolization, the status line. */
static int tick(struct engine *e, double t)
{
	const struct record_opts *o = e->s.opts;
	struct session *s = &e->s;
	bool keep_going = o->all || o->daemon;
	int err;

	e->next_tick = t + 1.0;
	/* The tick's work (drains, symbolization) takes tens of milliseconds: a window left
	 * open through it would last that long. Close open windows now (their books take the
	 * real time); new ones open after the work. */
	if (e->windowed)
		close_windows(e->cuda, &e->gov, e->off_at);
	err = cpu__drain(e->cpu, false);
	cupti__consume_events(e->cupti); /* kernel names the CUDA drain uses */
	if (!err)
		err = cuda__drain(e->cuda, false);
	if (!err)
		err = cupti__drain(e->cupti, false);
	if (err) {
		pr_err("cannot read samples: %s", strerror(-err));
		return err;
	}
	if (!keep_going && procs__refresh(s->procs) == 0)
		return ENGINE_EXITED;
	if (keep_going)
		procs__refresh(s->procs);
	/* Objects mapped since the last look (a dlopen'd libcudart) get probes. */
	cuda__scan(e->cuda);
	cupti__scan(e->cupti);
	/* Resolve while the targets live: exited processes keep their names. */
	profile__symbolize(s->prof, s->syms);
	cpu__stats(e->cpu, &e->st);
	{
		char extra[256];
		char duty[200];
		struct cuda_stats now_cs;
		bool show = e->windowed;

		/* Duty cycles mean something only once there are CUDA probes. */
		cuda__stats(e->cuda, &now_cs);
		show = show && now_cs.objects > 0;
		engine__duty_text(&e->gov, duty, sizeof(duty));
		snprintf(extra, sizeof(extra), "  overhead ~%.2g%%%s%s%s", 100 * governor__overhead(&e->gov),
			 show ? " (" : "", show ? duty : "", show ? ")" : "");
		status__update(&e->status, t - e->start, procs__num_live(s->procs), e->st.samples,
			       e->st.lost_stacks + e->st.dropped + procs__lost_events(s->procs), extra);
	}
	if (e->on_tick) {
		err = e->on_tick(e->on_tick_ctx, t);
		if (err)
			return err;
	}
	if (e->windowed)
		e->next_window = engine__now();
	return ENGINE_RUNNING;
}

int engine__step(struct engine *e)
{
	const struct record_opts *o = e->s.opts;
	double t = engine__now();
	int timeout = 100;

	if (e->windowed) {
		double next = run_windows(e->cuda, &e->gov, e->off_at, &e->next_window, e->period, t);
		int ms = (int)((next - t) * 1000) + 1;

		guard_check(&e->guard, e->cuda, &e->gov, t, cuda__guard_woken(e->cuda));
		if (timeout > GUARD_S * 1000)
			timeout = GUARD_S * 1000;
		if (ms < timeout)
			timeout = ms > 0 ? ms : 1;
	}
	procs__poll(e->s.procs, timeout);
	t = engine__now();
	if (o->duration > 0 && t - e->start >= o->duration)
		return ENGINE_DURATION;
	if (t >= e->next_tick)
		return tick(e, t);
	if (!(o->all || o->daemon) && procs__num_live(e->s.procs) == 0) {
		/* An exit event arrived: confirm and stop without waiting for the tick. */
		if (procs__refresh(e->s.procs) == 0)
			return ENGINE_EXITED;
	}
	return ENGINE_RUNNING;
}

int engine__stop(struct engine *e)
{
	int err;

	e->elapsed = engine__now() - e->start;
	status__clear(&e->status);
	procs__drain_events(e->s.procs);
	/* From here on nothing is probed any more: a started command that loads a library
	 * now must not wait for the drains, symbolization and writing. */
	procs__end_holds(e->s.procs);
	err = cpu__drain(e->cpu, true);
	cupti__consume_events(e->cupti);
	if (!err)
		err = cuda__drain(e->cuda, true);
	if (!err)
		err = cuda__finish(e->cuda);
	if (!err)
		err = cupti__drain(e->cupti, true);
	if (!err)
		err = cupti__finish_timeline(e->cupti);
	if (err) {
		pr_err("cannot read samples: %s", strerror(-err));
		return err;
	}
	cpu__stats(e->cpu, &e->st);
	cuda__stats(e->cuda, &e->cs);
	return 0;
}

void engine__detach(struct engine *e)
{
	cpu__free(e->cpu);
	e->cpu = NULL;
	cuda__free(e->cuda);
	e->cuda = NULL;
	cupti__detach(e->cupti);
}

void engine__close(struct engine *e)
{
	cupti__free(e->cupti);
	e->cupti = NULL;
	cuda__free(e->cuda);
	e->cuda = NULL;
	cpu__free(e->cpu);
	e->cpu = NULL;
	python__free(e->s.py);
	e->s.py = NULL;
	procs__free(e->s.procs);
	e->s.procs = NULL;
	profile__free(e->s.prof);
	e->s.prof = NULL;
	syms__free(e->s.syms);
	e->s.syms = NULL;
	session__names_free();
}
