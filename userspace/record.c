// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cli.h"
#include "cpu.h"
#include "cuda.h"
#include "cuda_api.h"
#include "cupti.h"
#include "governor.h"
#include "kbtf.h"
#include "folded.h"
#include "log.h"
#include "outfile.h"
#include "pprof.h"
#include "preflight.h"
#include "procs.h"
#include "python.h"
#include "profile.h"
#include "record.h"
#include "session.h"
#include "speedscope.h"
#include "status.h"
#include "syms.h"
#include "trace.h"

static volatile sig_atomic_t stop_signals;

static void on_signal(int sig)
{
	(void)sig;
	stop_signals++;
}

static void install_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a signal must interrupt the poll so we stop promptly. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
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

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct write_ctx {
	struct session *s;
	struct trace *timeline; /* --trace */
};

static int write_cb(void *ctx, FILE *f)
{
	struct write_ctx *w = ctx;

	if (w->s->opts->trace)
		return trace__write(w->timeline, f);
	if (w->s->opts->format == FORMAT_FOLDED)
		return folded__write(w->s->prof, w->s->t_samples, f);
	if (w->s->opts->format == FORMAT_SPEEDSCOPE)
		return speedscope__write(w->s->prof, f);
	return pprof__write(w->s->prof, f);
}

/* "launches 2.1%, copies 100%, ..." */
static void duty_text(const struct governor *gv, char *buf, size_t len)
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

static void add_comments(struct session *s, const struct cpu_stats *st, const struct cuda_stats *cs, double secs,
			 const struct governor *gv, bool windowed)
{
	const struct record_opts *o = s->opts;
	char cmd[1024];
	size_t off = 0;

	cmd[0] = '\0';
	for (int i = 0; i < o->argc && off < sizeof(cmd) - 1; i++) {
		int n = snprintf(cmd + off, sizeof(cmd) - off, "%s%s", i ? " " : "", o->argv[i]);

		if (n < 0)
			break;
		off += (size_t)n;
	}
	profile__add_comment(s->prof, "gpubpf %s", GPUBPF_VERSION);
	profile__add_comment(s->prof, "command: gpubpf %s", cmd);
	profile__add_comment(s->prof, "settings: event=%s freq=%dHz inherit=%s duration=%.1fs", st->event, o->freq,
			     o->inherit ? "yes" : "no", secs);
	profile__add_comment(s->prof, "cpu: %llu samples, %llu stacks lost, %llu samples dropped, %llu truncated",
			     (unsigned long long)st->samples, (unsigned long long)st->lost_stacks,
			     (unsigned long long)st->dropped, (unsigned long long)s->truncated_stacks);
	if (cs->objects) {
		char duty[256];

		profile__add_comment(
		    s->prof,
		    "cuda: %llu calls traced by %d probes in %d objects, %llu dropped, %llu stacks lost, "
		    "%llu name events lost",
		    (unsigned long long)cs->calls, cs->probes, cs->objects, (unsigned long long)cs->dropped,
		    (unsigned long long)cs->lost_stacks, (unsigned long long)cs->lost_events);
		duty_text(gv, duty, sizeof(duty));
		if (windowed)
			profile__add_comment(
			    s->prof,
			    "cuda: sampled windows under a %.3g%% overhead budget; last duty cycles: %s "
			    "(syncs, allocations and name lookups always attached); counts and bytes of "
			    "windowed groups are scaled to estimates of the whole recording; estimated "
			    "overhead %.3g%% of the busiest target thread (CPU sampling %.3g%% of it); one "
			    "probe hit costs %.2f us and one CPU sample %.2f us here",
			    s->opts->budget, duty, 100 * governor__overhead(gv), 100 * gv->cpu_cost,
			    gv->cost_per_hit * 1e6, gv->sample_cost * 1e6);
		else
			profile__add_comment(
			    s->prof,
			    "cuda: exact counts (%s): every probe attached all the time; estimated "
			    "overhead %.3g%% of the busiest target thread; one probe hit costs %.2f us here",
			    s->opts->exact ? "--exact" : "this kernel has no uprobe_multi links",
			    100 * governor__overhead(gv), gv->cost_per_hit * 1e6);
	} else
		profile__add_comment(s->prof, "cuda: no CUDA runtime or driver entry points found in the targets");
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

struct guard {
	uint64_t hits[CG__COUNT];
	double t;
};

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

/* pprof's "File:" is its first mapping: the program the user named or started, whether
 * or not a sampled frame (stacks without frame pointers) falls in it. */
static void set_main_mapping(struct session *s)
{
	int pid = s->opts->command ? (int)procs__child(s->procs) : s->opts->npids ? s->opts->pids[0] : 0;
	struct sym_result m;

	if (pid > 0 && syms__main_mapping(s->syms, pid, &m) == 0)
		profile__set_main_mapping(s->prof, m.module, m.build_id, m.map_start, m.map_limit, m.map_offset);
}

static int setup_profile(struct session *s)
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

static const char *target_desc(const struct record_opts *o, char *buf, size_t len)
{
	if (o->all)
		snprintf(buf, len, "all processes");
	else if (o->command)
		snprintf(buf, len, "%s", o->command[0]);
	else if (o->npids == 1)
		snprintf(buf, len, "pid %d", o->pids[0]);
	else
		snprintf(buf, len, "%d pids", o->npids);
	return buf;
}

int record__main(int argc, char **argv)
{
	struct record_opts o;
	struct session s = {.comms_fd = -1};
	struct cpu_sampler *cpu = NULL;
	struct cuda_tracer *cuda = NULL;
	struct cupti_tracer *cupti = NULL;
	char gpu_summary[600] = "";
	struct cpu_stats st = {0};
	struct cuda_stats cs = {0};
	struct governor gov = {0};
	double off_at[GOV_MAX_GROUPS] = {0}, next_window = 0, period = window_period();
	bool windowed = false;
	struct guard guard = {0};
	struct status status;
	struct write_ctx w = {.s = &s};
	double start, next_tick, elapsed;
	char desc[128];
	int err, exited = 0;

	err = cli__parse_record(argc, argv, &o);
	if (err)
		return err;
	if (o.help) {
		cli__usage_record(stdout);
		return 0;
	}
	log_verbose = o.verbose;
	log__setup_libbpf();
	s.opts = &o;

	/* Everything that can be checked before touching the kernel or the target. */
	err = preflight__privileges();
	if (err)
		return err;
	err = preflight__btf();
	if (err)
		return err;
	for (int i = 0; i < o.npids; i++) {
		if (kill(o.pids[i], 0) < 0 && errno == ESRCH) {
			pr_err("no such process: %d", o.pids[i]);
			return -ESRCH;
		}
		err = preflight__pid(o.pids[i]);
		if (err)
			return err;
	}
	err = outfile__check(o.output);
	if (err) {
		pr_err("cannot write %s: %s", o.output, outfile__strerror(err));
		return err;
	}

	install_signals();
	raise_fd_limit();
	s.syms = syms__new();
	if (!s.syms) {
		err = -errno;
		pr_err("cannot start the symbolizer: %s", strerror(-err));
		goto cleanup;
	}
	err = setup_profile(&s);
	if (err) {
		pr_err("cannot set up the profile: %s", strerror(-err));
		goto cleanup;
	}
	err = kbtf__task_offsets(&s.task_off);
	if (err) {
		pr_err("cannot read struct task_struct from the kernel's BTF: %s", strerror(-err));
		goto cleanup;
	}
	s.procs = procs__new(&o, s.syms, &s.task_off);
	if (!s.procs) {
		err = -errno;
		pr_err("cannot load the process tracking BPF programs: %s (run with -v for details)", strerror(-err));
		goto cleanup;
	}
	s.comms_fd = procs__comms_fd(s.procs);
	if (o.command) {
		/* The injection library, idle until a session attaches: device time. */
		if (!o.no_device_time)
			cupti__prepare_command();
		err = procs__spawn(s.procs, o.command);
		if (err) {
			pr_err("cannot start %s: %s", o.command[0], strerror(-err));
			goto cleanup;
		}
	}
	for (int i = 0; i < o.npids; i++) {
		err = procs__add_pid(s.procs, o.pids[i]);
		if (err) {
			pr_err("cannot attach to pid %d: %s", o.pids[i],
			       err == -ESRCH ? "no such process" : strerror(-err));
			goto cleanup;
		}
	}
	/* Python frames: shares its maps with the CPU and CUDA objects, so before them. A
	 * failure only costs the Python frames (it said why). */
	python__attach_session(&s);
	cpu = cpu__new(&s, procs__targets_fd(s.procs), s.comms_fd);
	if (!cpu) {
		err = -errno;
		goto cleanup;
	}
	cuda = cuda__new(&s, procs__targets_fd(s.procs), s.comms_fd);
	if (!cuda) {
		err = -errno;
		goto cleanup;
	}
	windowed = !o.exact && cuda__windowed(cuda);
	setup_governor(&gov, &o, cuda, cpu, windowed);
	/* Device time: the injection library's USDT probes, where a target has it. */
	cupti = cupti__new(&s, procs__targets_fd(s.procs), s.comms_fd);
	if (!cupti) {
		err = -errno;
		goto cleanup;
	}
	cupti__set_budget(cupti, o.budget, gov.cost_per_hit, o.exact);
	if (o.trace) {
		err = cupti__set_timeline(cupti, cuda__timeline(cuda), o.max_events);
		if (err) {
			pr_err("cannot set up the device tracks of the timeline: %s", strerror(-err));
			goto cleanup;
		}
	}
	cupti__scan(cupti);
	cuda__scan(cuda);
	/* Probes are in place: let the command run. */
	if (o.command) {
		err = procs__release(s.procs);
		if (err) {
			pr_err("cannot execute '%s': %s", o.command[0], strerror(-err));
			goto cleanup;
		}
	}

	start = now_s();
	cuda__start(cuda);
	profile__set_time(s.prof, wall_ns(), 0);
	status__init(&status, target_desc(&o, desc, sizeof(desc)));
	/* The first drain measures the hit rates the window plan needs: early. */
	next_tick = start + (windowed ? FIRST_DRAIN : 1.0);
	pr_debug("recording %s", desc);
	signal_ready();

	next_window = start;
	if (windowed) {
		/* From here on: hits before the recording (a held command's start) do not count. */
		cuda__group_hits(cuda, guard.hits);
		guard.t = start;
		guard_check(&guard, cuda, &gov, start, true);
	}
	while (!stop_signals) {
		double t = now_s();
		int timeout = 100;

		if (windowed) {
			double next = run_windows(cuda, &gov, off_at, &next_window, period, t);
			int ms = (int)((next - t) * 1000) + 1;

			guard_check(&guard, cuda, &gov, t, cuda__guard_woken(cuda));
			if (timeout > GUARD_S * 1000)
				timeout = GUARD_S * 1000;
			if (ms < timeout)
				timeout = ms > 0 ? ms : 1;
		}
		procs__poll(s.procs, timeout);
		t = now_s();
		if (o.duration > 0 && t - start >= o.duration)
			break;
		if (t >= next_tick) {
			next_tick = t + 1.0;
			/* The tick's work (drains, symbolization) takes tens of milliseconds: a
			 * window left open through it would last that long. Close open windows
			 * now (their books take the real time); new ones open after the work. */
			if (windowed)
				close_windows(cuda, &gov, off_at);
			err = cpu__drain(cpu, false);
			cupti__consume_events(cupti); /* kernel names the CUDA drain uses */
			if (!err)
				err = cuda__drain(cuda, false);
			if (!err)
				err = cupti__drain(cupti, false);
			if (err) {
				pr_err("cannot read samples: %s", strerror(-err));
				goto cleanup;
			}
			if (!o.all && procs__refresh(s.procs) == 0) {
				exited = 1;
				break;
			}
			if (o.all)
				procs__refresh(s.procs);
			/* Objects mapped since the last look (a dlopen'd libcudart) get probes. */
			cuda__scan(cuda);
			cupti__scan(cupti);
			/* Resolve while the targets live: exited processes keep their names. */
			profile__symbolize(s.prof, s.syms);
			cpu__stats(cpu, &st);
			{
				char extra[256];
				char duty[200];

				struct cuda_stats now_cs;
				bool show = windowed;

				/* Duty cycles mean something only once there are CUDA probes. */
				cuda__stats(cuda, &now_cs);
				show = show && now_cs.objects > 0;
				duty_text(&gov, duty, sizeof(duty));
				snprintf(extra, sizeof(extra), "  overhead ~%.2g%%%s%s%s",
					 100 * governor__overhead(&gov), show ? " (" : "", show ? duty : "",
					 show ? ")" : "");
				status__update(&status, t - start, procs__num_live(s.procs), st.samples,
					       st.lost_stacks + st.dropped + procs__lost_events(s.procs), extra);
			}
			if (windowed)
				next_window = now_s();
		} else if (!o.all && procs__num_live(s.procs) == 0) {
			/* An exit event arrived: confirm and stop without waiting for the tick. */
			if (procs__refresh(s.procs) == 0) {
				exited = 1;
				break;
			}
		}
	}
	elapsed = now_s() - start;
	status__clear(&status);
	if (stop_signals)
		pr_debug("stopping on a signal; a second Ctrl-C skips the rest of symbolization");
	else if (exited)
		pr_debug("every target exited");

	procs__drain_events(s.procs);
	/* From here on nothing is probed any more: a started command that loads a library
	 * now must not wait for the drains, symbolization and writing. */
	procs__end_holds(s.procs);
	err = cpu__drain(cpu, true);
	cupti__consume_events(cupti);
	if (!err)
		err = cuda__drain(cuda, true);
	if (!err)
		err = cuda__finish(cuda);
	if (!err)
		err = cupti__drain(cupti, true);
	if (!err)
		err = cupti__finish_timeline(cupti);
	if (err) {
		pr_err("cannot read samples: %s", strerror(-err));
		goto cleanup;
	}
	cpu__stats(cpu, &st);
	cuda__stats(cuda, &cs);
	w.timeline = cuda__take_trace(cuda);
	/* Detach before symbolizing and writing: the target runs on unprofiled. */
	cpu__free(cpu);
	cpu = NULL;
	cuda__free(cuda);
	cuda = NULL;
	cupti__detach(cupti);
	if (stop_signals < 2)
		profile__symbolize(s.prof, s.syms);
	{
		int64_t t0, d;

		profile__time(s.prof, &t0, &d);
		profile__set_time(s.prof, t0, (int64_t)(elapsed * 1e9));
	}
	set_main_mapping(&s);
	add_comments(&s, &st, &cs, elapsed, &gov, windowed);
	cupti__add_comments(cupti);
	cupti__summary(cupti, gpu_summary, sizeof(gpu_summary));

	err = outfile__write(o.output, write_cb, &w);
	if (err) {
		pr_err("cannot write %s: %s", o.output, outfile__strerror(err));
		goto cleanup;
	}
	if (o.trace) {
		uint64_t dev, dev_dropped;

		cupti__timeline_stats(cupti, &dev, &dev_dropped);
		fprintf(stderr,
			"gpubpf: wrote %s: a timeline of %zu CUDA calls (%llu dropped: --max-events %zu), %.1f s",
			o.output, cs.trace_events, (unsigned long long)cs.trace_dropped, o.max_events, elapsed);
		if (dev || dev_dropped)
			fprintf(stderr, ", %llu kernels and copies on device tracks (%llu dropped)",
				(unsigned long long)dev, (unsigned long long)dev_dropped);
	} else
		fprintf(stderr, "gpubpf: wrote %s: %llu samples, %zu stacks, %.1f s", o.output,
			(unsigned long long)st.samples, profile__num_samples(s.prof), elapsed);
	if (st.lost_stacks || st.dropped)
		fprintf(stderr, ", %llu stacks lost, %llu samples dropped", (unsigned long long)st.lost_stacks,
			(unsigned long long)st.dropped);
	if (cs.objects) {
		char duty[200];

		duty_text(&gov, duty, sizeof(duty));
		fprintf(stderr, ", %llu CUDA calls traced", (unsigned long long)cs.calls);
		if (windowed)
			fprintf(stderr, " in windows (%s; estimates scaled)", duty);
		fprintf(stderr, ", overhead ~%.2g%%", 100 * governor__overhead(&gov));
	}
	fputs(gpu_summary, stderr);
	if (procs__lost_events(s.procs))
		fprintf(stderr, ", %llu process events lost", procs__lost_events(s.procs));
	fputc('\n', stderr);
	if (!st.samples && !cs.calls && o.npids && !o.trace)
		preflight__explain_empty(o.pids, o.npids, elapsed);
	if (o.command) {
		int ws;

		if (procs__child_status(s.procs, &ws) == 0) {
			if (WIFEXITED(ws) && WEXITSTATUS(ws))
				fprintf(stderr, "gpubpf: %s exited with status %d\n", o.command[0], WEXITSTATUS(ws));
			else if (WIFSIGNALED(ws))
				fprintf(stderr, "gpubpf: %s was killed by signal %d\n", o.command[0], WTERMSIG(ws));
		} else {
			fprintf(stderr, "gpubpf: %s (pid %d) keeps running unprofiled\n", o.command[0],
				(int)procs__child(s.procs));
		}
	}
	err = 0;
cleanup:
	cupti__free(cupti);
	cuda__free(cuda);
	cpu__free(cpu);
	python__free(s.py);
	trace__free(w.timeline);
	procs__free(s.procs);
	profile__free(s.prof);
	syms__free(s.syms);
	session__names_free();
	return err;
}
