// SPDX-License-Identifier: MIT
/* The recording engine (engine.h): what record and agent share, moved here from record.c
 * as it was. */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "opts.h"
#include "cpu.h"
#include "cuda.h"
#include "cupti.h"
#include "engine.h"
#include "envnum.h"
#include "governor.h"
#include "kbtf.h"
#include "log.h"
#include "mapsnap.h"
#include "procs.h"
#include "profile.h"
#include "python.h"
#include "session.h"
#include "status.h"
#include "syms.h"
#include "windows.h"

/* Periods a -d recording is cut into at the least, up to 1 s each */
#define WINDOW_PERIODS_MIN 8

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

static volatile sig_atomic_t stop_signals, first_signal;

static void on_signal(int sig)
{
	if (!stop_signals)
		first_signal = sig;
	stop_signals++;
}

void engine__install_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a signal must interrupt the poll so we stop promptly. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int engine__stop_signals(void)
{
	return (int)stop_signals;
}

int engine__stop_signal(void)
{
	return (int)first_signal;
}

double engine__overhead(struct engine *e)
{
	double t = engine__now() - e->start, own = owncpu__share(&e->own, t, NULL);
	uint64_t cost[CG__COUNT];
	struct governor g;

	if (!e->win || !e->cuda)
		return governor__overhead(&e->gov) + own;
	cuda__group_costs(e->cuda, cost);
	windows__governor(e->win, &g);
	return windows__overhead(e->win, cost, &g, t, NULL, NULL, NULL) + cupti__overhead(e->cupti, t, NULL) + own;
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

/* Length of one window period: 1 s, or an eighth of a -d DURATION under 8 s (at least
 * 0.1 s): an estimate's interval comes from the spread between periods, and a recording
 * of one or two has none. GPUBPF_WINDOW_PERIOD (seconds) sets it, so that tests see many
 * periods in a few seconds. */
static double window_period(double duration)
{
	double v = duration > 0 ? duration / WINDOW_PERIODS_MIN : 1.0;

	return envnum__get("GPUBPF_WINDOW_PERIOD", 0.01, 1, v < 0.1 ? 0.1 : v > 1 ? 1.0 : v);
}

/* The stall that tells whether the probes' delay pushes a thread's calls out (estimate.h,
 * est_response): 0.5 us on one counted call in CUDA_STALL_EVERY of a window (small: it
 * asks whether a little less delay would have made more calls, and a device's queue that
 * the probes have nearly caught up with absorbs less of a larger one); GPUBPF_STALL_US
 * sets it (0: none, and the delay is taken to push out all it can). */
static double stall_secs(void)
{
	return envnum__get("GPUBPF_STALL_US", 0, 100, 0.5) / 1e6;
}

/* One counted call in a window in GPUBPF_BARE_EVERY (a power of two; 0: none) skips its
 * stack walks and map updates, at random: the gaps after it say what that work costs the
 * job's own code after it, beyond the program's run time (estimate.h, est_bare), which
 * the delay correction and the overhead then count. Its stack is not taken: the window's
 * other calls count for it. */
static unsigned bare_every(void)
{
	return (unsigned)envnum__get("GPUBPF_BARE_EVERY", 0, 1024, 0);
}

static void setup_governor(struct governor *gv, const struct record_opts *o, struct cuda_tracer *cuda,
			   struct cpu_sampler *cpu, bool windowed, double *calib)
{
	struct cuda_calib cal;
	double sample = cpu__sample_cost(cpu);

	if (cuda__calibrate(cuda, &cal) || cal.traced_call <= 0) {
		/* What DESIGN measured here; said in the comments with the rest. */
		cal = (struct cuda_calib){.traced_call = 5e-6, .trap_entry = 2e-6, .trap_return = 2e-6};
		pr_warn("cannot measure the cost of a probe hit; assuming %.1f us", cal.traced_call * 1e6);
	}
	pr_debug("calibration: a traced call %.2f us (entry trap %.2f, program %.2f, return %.2f), first hit +%.2f us, "
		 "a window's switches %.2f us, attach %.2f ms",
		 cal.traced_call * 1e6, cal.trap_entry * 1e6, cal.prog * 1e6, cal.trap_return * 1e6,
		 cal.first_hit * 1e6, cal.window * 1e6, cal.attach * 1e3);
	gv->budget = o->budget / 100;
	gv->period = window_period(o->duration);
	gv->cost_per_hit = cal.traced_call;
	gv->trap_entry = cal.trap_entry > 0 ? cal.trap_entry : 0;
	gv->trap_return = cal.trap_return > 0 ? cal.trap_return : 0;
	gv->first_hit = cal.first_hit > 0 ? cal.first_hit : 0;
	gv->window_cost = cal.window > 0 ? cal.window : 0;
	cuda__set_traps(cuda, gv->trap_entry, gv->trap_return);
	cuda__set_stall(cuda, stall_secs());
	cuda__set_bare(cuda, bare_every());
	/* A CPU sample interrupts a thread at most freq times a second. */
	if (sample < 0)
		sample = cal.traced_call;
	pr_debug("one CPU sample costs the sampled thread %.2f us", sample * 1e6);
	gv->sample_hz = o->freq;
	/* -F a second until the first tick tells how often a target thread is sampled */
	governor__set_cpu(gv, sample, o->freq, 0);
	*calib = sample;
	gv->min_duty = 0.002; /* 2 ms a second: dozens of launches even at 40k probed calls/s */
	gv->min_slot = 0.002;
	gv->exact = !windowed;
	gv->ngroups = CG__COUNT + 1;
	for (int g = 0; g < CG__COUNT; g++)
		gv->g[g].name = cuda_group_names[g];
	/* Device time: no cost until a library measures it in its job (cupti_win.c). */
	gv->g[CG__COUNT].name = "device time";
	gv->g[CG__COUNT].always = true;
	/* Frees must meet their allocations for gpu_inuse, and name lookups teach kernel
	 * names: both rare, both always attached. */
	gv->g[CG_ALLOC].always = true;
	gv->g[CG_NAME].always = true;
	governor__plan(gv);
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

/* Where each target thread has an event of its own, what the event adds to its context
 * switches: calibrated now, counted in the job at each tick (switches.h). */
static void setup_switches(struct engine *e)
{
	struct perf_event_attr attr;

	if (cpu__task_attr(e->cpu, &attr))
		return;
	e->sw.on = true;
	procs__report_switches(e->s.procs, true);
	e->sw.cost = switches__calibrate(&attr);
	if (e->sw.cost < 0)
		pr_debug("cannot measure what a thread's event adds to its context switches: %s",
			 strerror((int)-e->sw.cost));
	else
		pr_debug("calibration: a sampled thread's context switch costs it %.2f us more", e->sw.cost * 1e6);
}

static void exited(void *ctx, int tid, uint64_t n)
{
	struct switches *sw = ctx;

	if (sw->looked && switches__add(sw, tid, n, false))
		pr_debug("cannot count thread %d's switches: out of memory", tid);
}

/* A look at the targets' threads' switches: the live ones in /proc, the ones that exited
 * since the last look as the kernel kept them (before the first look: not counted). */
static void switches_look(struct engine *e)
{
	int pids[256], n;

	if (!e->sw.on)
		return;
	procs__take_exit_switches(e->s.procs, exited, &e->sw);
	n = procs__live_pids(e->s.procs, pids, (int)(sizeof(pids) / sizeof(pids[0])));
	switches__look(&e->sw, pids, n);
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
	setup_governor(&e->gov, o, e->cuda, e->cpu, e->windowed, &e->sample_calib);
	setup_switches(e);
	if (e->windowed) {
		e->win = windows__new(e->cuda, &e->gov, e->gov.period);
		if (!e->win) {
			err = -errno;
			pr_err("cannot set up the sampling windows: %s", strerror(-err));
			return err;
		}
		cuda__set_windows(e->cuda, e->win);
		if (o->daemon)
			windows__no_estimates(e->win);
	}
	/* Device time: the injection library's USDT probes, where a target has it. */
	e->cupti = cupti__new(s, procs__targets_fd(s->procs), s->comms_fd);
	if (!e->cupti) {
		err = -errno;
		return err ? err : -ENOMEM;
	}
	/* Device time in windows too, planned by the same governor. */
	if (e->win) {
		cupti__set_windows(e->cupti, e->win, e->gov.period);
		/* the cost measurement compares launch calls that met the launch probes alike */
		cuda__on_launch_probes(e->cuda, cupti__launch_probes, e->cupti);
	}
	cupti__set_budget(e->cupti, o->budget, e->gov.cost_per_hit, o->exact);
	return 0;
}

void engine__scan(struct engine *e)
{
	cupti__scan(e->cupti);
	cuda__scan(e->cuda);
}

int engine__start(struct engine *e, const char *desc)
{
	struct session *s = &e->s;
	int err;

	snprintf(e->desc, sizeof(e->desc), "%s", desc);
	e->start = engine__now();
	/* From here on the windows run on their own thread: hits before the recording (a
	 * held command's start) count nowhere. */
	if (e->win) {
		err = windows__start(e->win);
		if (err) {
			pr_err("cannot start the window thread: %s", strerror(-err));
			return err;
		}
	}
	profile__set_time(s->prof, engine__wall_ns(), 0);
	/* a started command was held through the set-up; anything else ran beside it */
	owncpu__start(&e->own, !e->s.opts->command);
	switches_look(e);
	status__init(&e->status, e->desc);
	e->next_tick = e->start + 1.0;
	e->sw_next = e->start + SW_EARLY;
	pr_debug("recording %s", e->desc);
	signal_ready();
	return 0;
}

/* A CPU sample's cost: the interrupt's, calibrated, and the program's, as timed in the
 * job (a target's stack walks cost more than gpubpf's own, which returns at once), as
 * often as the most sampled target thread is sampled: over the last tick for the plan,
 * over the recording (WHOLE) for its estimate; -F times a second until the first tick has
 * told (a thread that sleeps most of the time, launching at a timer's pace, is sampled a
 * few times a second where -F would have charged it 99 samples). */
static void sample_cost(struct engine *e, bool whole)
{
	double s = e->sample_calib + cpu__prog_cost(e->cpu), freq = e->s.opts->freq, now = engine__now() - e->start;
	double sw = switches__share(&e->sw, now, NULL), rate = cpu__sample_rate(e->cpu, now, whole);

	rate = rate >= 0 ? fmin(rate, freq) : freq;
	if (e->win)
		windows__set_cpu(e->win, s, rate, sw); /* its governor is e->gov, under its lock */
	else
		governor__set_cpu(&e->gov, s, rate, sw);
}

/* What gpubpf's own CPU took from the targets so far: a look, and the budget repays it. */
static void own_look(struct engine *e)
{
	owncpu__look(&e->own);
	if (e->win)
		windows__set_own(e->win, e->own.fair);
}

/* Where the threads' own sampling events cost the most switched thread more than half the
 * budget in its context switches, sample per CPU from now on (switches.h). Not under
 * --exact, which spares no cost. */
static void switch_check(struct engine *e, double t)
{
	const struct record_opts *o = e->s.opts;
	double now = t - e->start;
	int err;

	if (o->exact || !switches__over(&e->sw, now, o->budget / 100 / 2))
		return;
	err = cpu__to_per_cpu(e->cpu);
	if (err) {
		pr_debug("cannot sample per CPU: %s; each thread keeps its own clock", strerror(-err));
		return;
	}
	switches__per_cpu(&e->sw, now);
	procs__report_switches(e->s.procs, false);
	pr_debug("the threads' own sampling events cost the most switched thread %.3g%% of its time in its "
		 "switches: sampling per CPU from %.3g s on",
		 100 * e->sw.per_cpu_share, now);
}

/* The tick: drains, targets, new objects, symbolization, the status line. */
static int tick(struct engine *e, double t)
{
	const struct record_opts *o = e->s.opts;
	struct session *s = &e->s;
	bool keep_going = o->all || o->daemon;
	int err;

	e->next_tick = t + 1.0;
	own_look(e);
	switches_look(e);
	switch_check(e, t);
	/* The looks at the targets' maps in a tick (Python's frames' roles at the drain, the
	 * symbolizer's, the CUDA and CUPTI scans', a symbolization miss's) read each target's
	 * once: three to four reads a second of a PyTorch job's thousands of mappings, each
	 * ~2.6 us of gpubpf's CPU a mapping (1.3% of a CPU at 5,000 of them). */
	mapsnap__begin();
	err = cpu__drain(e->cpu, false);
	sample_cost(e, false);
	cupti__consume_events(e->cupti); /* kernel names the CUDA drain uses */
	if (!err)
		err = cuda__drain(e->cuda, false);
	if (!err)
		err = cupti__drain(e->cupti, false);
	if (err) {
		mapsnap__end();
		pr_err("cannot read samples: %s", strerror(-err));
		return err;
	}
	if (!keep_going && procs__refresh(s->procs) == 0) {
		mapsnap__end();
		return ENGINE_EXITED;
	}
	if (keep_going)
		procs__refresh(s->procs);
	/* Objects mapped since the last look (a dlopen'd libcudart) get probes: the safety
	 * net under the dynamic linker's events, at the symbolizer's pace. */
	if (procs__maps_looked(s->procs)) {
		cuda__scan(e->cuda);
		cupti__scan(e->cupti);
	}
	/* Resolve while the targets live: exited processes keep their names. Kernel frames
	 * wait for the write (the caller's profile__symbolize): on a machine with no CPU free
	 * the kernel's symbols at the first tick were a third of gpubpf's CPU in a recording. */
	profile__symbolize_user(s->prof, s->syms);
	mapsnap__end();
	cpu__stats(e->cpu, &e->st);
	{
		char extra[256];
		char duty[200];
		struct cuda_stats now_cs;
		struct governor now_gov = e->gov;
		bool show = e->windowed;

		/* Duty cycles mean something only once there are CUDA probes. */
		cuda__stats(e->cuda, &now_cs);
		show = show && now_cs.objects > 0;
		if (e->win)
			windows__governor(e->win, &now_gov);
		windows__duty_text(&now_gov, duty, sizeof(duty));
		snprintf(extra, sizeof(extra), "  overhead ~%.2g%%%s%s%s", 100 * governor__overhead(&now_gov),
			 show ? " (" : "", show ? duty : "", show ? ")" : "");
		if (!e->quiet)
			status__update(&e->status, t - e->start, procs__num_live(s->procs), e->st.samples,
				       e->st.lost_stacks + e->st.dropped + procs__lost_events(s->procs), extra);
	}
	if (e->on_tick) {
		err = e->on_tick(e->on_tick_ctx, t);
		if (err)
			return err;
	}
	return ENGINE_RUNNING;
}

int engine__step(struct engine *e)
{
	const struct record_opts *o = e->s.opts;
	double t = engine__now();
	int timeout = 100;

	procs__poll(e->s.procs, timeout);
	/* a library's attach at once, not at the tick: its cost measurement waits for
	 * gpubpf's first write */
	cupti__consume_events(e->cupti);
	t = engine__now();
	if (o->duration > 0 && t - e->start >= o->duration)
		return ENGINE_DURATION;
	if (t >= e->next_tick)
		return tick(e, t);
	/* the threads' own clocks judged early too: a job of threads that hand work to each
	 * other pays most of its cost before the first tick */
	if (t >= e->sw_next) {
		switches_look(e);
		switch_check(e, t);
		e->sw_next = t - e->start + SW_EARLY < 1.0 ? t + SW_EARLY : INFINITY;
	}
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
	own_look(e); /* what follows (drains, writing) no longer runs beside the recording */
	switches_look(e);
	status__clear(&e->status);
	/* The windows' books close before the last drain: every call gets its weight. */
	windows__stop(e->win);
	cuda__on_launch_probes(e->cuda, NULL, NULL);
	procs__drain_events(e->s.procs);
	/* From here on nothing is probed any more: a started command that loads a library
	 * now must not wait for the drains, symbolization and writing. */
	procs__end_holds(e->s.procs);
	err = cpu__drain(e->cpu, true);
	sample_cost(e, true);
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
	cuda__group_costs(e->cuda, e->gcost);
	return 0;
}

void engine__detach(struct engine *e)
{
	cpu__free(e->cpu);
	e->cpu = NULL;
	cuda__on_launch_probes(e->cuda, NULL, NULL);
	cuda__free(e->cuda);
	e->cuda = NULL;
	cupti__detach(e->cupti);
}

void engine__close(struct engine *e)
{
	windows__free(e->win);
	e->win = NULL;
	cuda__on_launch_probes(e->cuda, NULL, NULL);
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
	switches__free(&e->sw);
	profile__free(e->s.prof);
	e->s.prof = NULL;
	syms__free(e->s.syms);
	e->s.syms = NULL;
	session__names_free();
}
