// SPDX-License-Identifier: MIT
/* gpubpf record: one recording of the targets the user named, started or all, written as
 * a profile (pprof, folded, speedscope) or a timeline. The machinery is the engine's. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "cpu.h"
#include "cuda.h"
#include "cupti.h"
#include "engine.h"
#include "folded.h"
#include "governor.h"
#include "log.h"
#include "outfile.h"
#include "pprof.h"
#include "preflight.h"
#include "procs.h"
#include "profile.h"
#include "record.h"
#include "session.h"
#include "speedscope.h"
#include "stacks.h"
#include "syms.h"
#include "trace.h"
#include "windows.h"
#include "version.h" /* GPUBPF_VERSION, generated (Makefile) */

struct write_ctx {
	struct session *s;
	struct trace *timeline; /* --trace */
};

static int write_cb(void *ctx, FILE *f)
{
	struct write_ctx *w = ctx;

	if (w->s->opts->trace)
		return trace__write(w->timeline, f);
	if (w->s->opts->format == FORMAT_FOLDED) {
		int t =
		    w->s->opts->sample_type ? profile__find_type(w->s->prof, w->s->opts->sample_type) : w->s->t_samples;

		if (t < 0) {
			pr_err("record: no %s in this recording's profile", w->s->opts->sample_type);
			return -EINVAL;
		}
		if (w->s->opts->sample_type && !profile__total(w->s->prof, t))
			pr_warn("record: no %s was recorded: the folded file is empty", w->s->opts->sample_type);
		return folded__write(w->s->prof, t, f);
	}
	if (w->s->opts->format == FORMAT_SPEEDSCOPE)
		return speedscope__write(w->s->prof, f);
	return pprof__write(w->s->prof, f);
}

static void add_comments(struct engine *e)
{
	struct session *s = &e->s;
	const struct record_opts *o = s->opts;
	const struct cpu_stats *st = &e->st;
	const struct cuda_stats *cs = &e->cs;
	char cmd[1024], own[1024];
	struct procs_holds holds;
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
	profile__add_comment(s->prof, "settings: event=%s freq=%dHz inherit=%s duration=%.3fs", st->event, o->freq,
			     o->inherit ? "yes" : "no", e->elapsed);
	profile__add_comment(s->prof,
			     "cpu: %llu samples, %llu stacks lost, %llu samples dropped, %llu truncated, "
			     "%llu moves of a thread's clock to another thread",
			     (unsigned long long)st->samples, (unsigned long long)st->lost_stacks,
			     (unsigned long long)st->dropped, (unsigned long long)s->truncated_stacks,
			     (unsigned long long)st->clock_moves);
	if (cs->objects) {
		profile__add_comment(
		    s->prof,
		    "cuda: %llu calls traced by %d probes in %d objects, %llu dropped, %llu stacks lost, "
		    "%llu name events lost, %llu hits walked by the kernel (a stack over %d frames, or "
		    "another's key in the probes' own walk)",
		    (unsigned long long)cs->calls, cs->probes, cs->objects, (unsigned long long)cs->dropped,
		    (unsigned long long)cs->lost_stacks, (unsigned long long)cs->lost_events,
		    (unsigned long long)cs->kernel_walks, STACKS_OWN_DEPTH);
		windows__comments(e->win, e->gcost, &e->gov, s->prof, o->budget,
				  o->exact ? "--exact" : "this kernel has no uprobe_multi links", e->elapsed,
				  owncpu__share(&e->own, e->elapsed, NULL));
	} else
		profile__add_comment(s->prof, "cuda: no CUDA runtime or driver entry points found in the targets");
	owncpu__text(&e->own, e->elapsed, own, sizeof(own));
	profile__add_comment(s->prof, "cost: %s", own);
	switches__text(&e->sw, e->elapsed, own, sizeof(own));
	profile__add_comment(s->prof, "cost: %s", own);
	procs__holds(s->procs, &holds);
	if (holds.n)
		profile__add_comment(s->prof,
				     "cost: holds: the started command and its children were held %llu times (at "
				     "each exec, and each change of their objects) until gpubpf had read their "
				     "objects and put its probes in: %.1f ms in all, the longest %.1f ms (start-up "
				     "time, not in the estimated overhead); %llu more calls of the dynamic linker, "
				     "a dlopen's or dlclose's first (before it maps or unmaps anything), let go with "
				     "no hold",
				     (unsigned long long)holds.n, (double)holds.total_ns / 1e6,
				     (double)holds.max_ns / 1e6, (unsigned long long)holds.passed);
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

/* The one line that says what was written, and how the command ended. */
static void print_summary(struct engine *e, const char *gpu_summary)
{
	const struct record_opts *o = e->s.opts;
	struct session *s = &e->s;

	if (o->trace) {
		uint64_t dev, dev_dropped;

		cupti__timeline_stats(e->cupti, &dev, &dev_dropped);
		fprintf(
		    stderr, "gpubpf: wrote %s: a timeline of %zu CUDA calls (%llu dropped: --max-events %zu), %.1f s",
		    o->output, e->cs.trace_events, (unsigned long long)e->cs.trace_dropped, o->max_events, e->elapsed);
		if (dev || dev_dropped)
			fprintf(stderr, ", %llu kernels and copies on device tracks (%llu dropped)",
				(unsigned long long)dev, (unsigned long long)dev_dropped);
	} else
		fprintf(stderr, "gpubpf: wrote %s: %llu samples, %zu stacks, %.1f s", o->output,
			(unsigned long long)e->st.samples, profile__num_samples(s->prof), e->elapsed);
	if (e->st.lost_stacks || e->st.dropped)
		fprintf(stderr, ", %llu stacks lost, %llu samples dropped", (unsigned long long)e->st.lost_stacks,
			(unsigned long long)e->st.dropped);
	if (e->cs.objects) {
		char duty[200];

		windows__duty_text(&e->gov, duty, sizeof(duty));
		fprintf(stderr, ", %llu CUDA calls traced", (unsigned long long)e->cs.calls);
		if (e->windowed)
			fprintf(stderr, " in windows (%s; estimates scaled)", duty);
	}
	{
		/* the probes' windows, CPU sampling, and device time in windows at its measured
		 * cost per launch, counted the same */
		double dev = cupti__overhead(e->cupti, e->elapsed, NULL), lo, hi, mid;
		/* and gpubpf's own CPU where no CPU was idle */
		double own_hi, own = owncpu__share(&e->own, e->elapsed, &own_hi);
		/* the sampler's events in the switches of threads that hand work to each other:
		 * up to all the threads' (the estimate has the most switched one's) */
		double sw_all, sw = switches__share(&e->sw, e->elapsed, &sw_all);
		struct est_delay js;

		mid = windows__overhead(e->win, e->gcost, &e->gov, e->elapsed, &lo, &hi, &js) + dev + own;
		lo += dev + own;
		hi += dev + own_hi + (sw_all - sw);
		/* a job without CUDA too: its samples, their events in its switches */
		if (!o->trace) {
			/* where the device set the pace, what the thread paid is only partly the job's */
			if (js.hi < 1) {
				fprintf(stderr,
					", overhead ~%.2g%% (%.2g-%.2g%%: a device set the pace; %.2g%% of the "
					"thread's time)",
					100 * mid * js.mid, 100 * lo * js.lo, 100 * hi * js.hi, 100 * mid);
			} else {
				fprintf(stderr, ", overhead ~%.2g%%", 100 * mid);
				if (hi - lo > 0.1 * mid) {
					const char *why[3];
					int n = 0;

					if (e->cs.objects)
						why[n++] = "the traps' cost in the job";
					if (own_hi - own > 0.05 * mid)
						why[n++] = "whom gpubpf's own CPU was taken from";
					if (sw_all - sw > 0.05 * mid)
						why[n++] = "threads that wait for each other's switches";
					fprintf(stderr, " (%.2g-%.2g%%", 100 * lo, 100 * hi);
					for (int i = 0; i < n; i++)
						fprintf(stderr, "%s%s", i == 0 ? ": " : ", and ", why[i]);
					fputc(')', stderr);
				}
			}
		}
	}
	fputs(gpu_summary, stderr);
	if (procs__lost_events(s->procs))
		fprintf(stderr, ", %llu process events lost", procs__lost_events(s->procs));
	fputc('\n', stderr);
	if (!e->st.samples && !e->cs.calls && o->npids && !o->trace)
		preflight__explain_empty(o->pids, o->npids, e->elapsed);
}

/* What record ends with where it wrote its profile: 0, or the status of a COMMAND that
 * failed (128+N for signal N, as a shell says it), so that `gpubpf record -- job` in a
 * script fails where the job did; said on stderr too. */
static int job_status(struct engine *e)
{
	const struct record_opts *o = e->s.opts;
	int ws;

	if (!o->command)
		return 0;
	if (procs__child_status(e->s.procs, &ws)) {
		fprintf(stderr, "gpubpf: %s (pid %d) keeps running unprofiled\n", o->command[0],
			(int)procs__child(e->s.procs));
		return 0;
	}
	if (WIFEXITED(ws) && WEXITSTATUS(ws)) {
		fprintf(stderr, "gpubpf: %s exited with status %d\n", o->command[0], WEXITSTATUS(ws));
		return WEXITSTATUS(ws);
	}
	if (WIFSIGNALED(ws)) {
		fprintf(stderr, "gpubpf: %s was killed by signal %d\n", o->command[0], WTERMSIG(ws));
		return 128 + WTERMSIG(ws);
	}
	return 0;
}

/* A stop (Ctrl-C, SIGTERM) before COMMAND was let go: it is never run (engine__close kills
 * it at its gate) and nothing is written; the status is the signal's, as a shell's. */
static int not_started(const struct record_opts *o)
{
	int sig = engine__stop_signal();

	fprintf(stderr, "gpubpf: stopped by signal %d before %s started: it was not run, nothing written\n", sig,
		o->command[0]);
	return 128 + sig;
}

int record__main(int argc, char **argv)
{
	struct record_opts o;
	struct engine e;
	struct session *s = &e.s;
	char gpu_summary[600] = "";
	struct write_ctx w = {.s = s};
	char desc[128];
	bool opened = false;
	int err, state = ENGINE_RUNNING;

	owncpu__mark(); /* the set-up's CPU from here */
	err = cli__parse_record(argc, argv, &o);
	if (err)
		return err;
	if (o.help) {
		cli__usage_record(stdout);
		return 0;
	}
	log_verbose = o.verbose;
	log__setup_libbpf();

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

	engine__install_signals();
	opened = true;
	err = engine__open_session(&e, &o);
	if (err)
		goto cleanup;
	if (o.command) {
		/* The injection library, idle until a session attaches: device time. */
		if (!o.no_device_time)
			cupti__prepare_command();
		err = procs__spawn(s->procs, o.command);
		if (err) {
			pr_err("cannot start %s: %s", o.command[0], strerror(-err));
			goto cleanup;
		}
	}
	for (int i = 0; i < o.npids; i++) {
		err = procs__add_pid(s->procs, o.pids[i]);
		if (err) {
			pr_err("cannot attach to pid %d: %s", o.pids[i],
			       err == -ESRCH ? "no such process" : strerror(-err));
			goto cleanup;
		}
	}
	err = engine__open_tracers(&e);
	if (err)
		goto cleanup;
	if (o.trace) {
		err = cupti__set_timeline(e.cupti, cuda__timeline(e.cuda), o.max_events);
		if (err) {
			pr_err("cannot set up the device tracks of the timeline: %s", strerror(-err));
			goto cleanup;
		}
	}
	engine__scan(&e);
	/* Probes are in place: let the command run, unless a stop came first. */
	if (o.command) {
		if (engine__stop_signals()) {
			err = not_started(&o);
			goto cleanup;
		}
		err = procs__release(s->procs);
		if (err) {
			pr_err("cannot execute '%s': %s", o.command[0], strerror(-err));
			goto cleanup;
		}
	}

	err = engine__start(&e, target_desc(&o, desc, sizeof(desc)));
	if (err)
		goto cleanup;
	while (!engine__stop_signals() && state == ENGINE_RUNNING)
		state = engine__step(&e);
	if (state < 0) {
		err = state;
		goto cleanup;
	}
	if (engine__stop_signals())
		pr_debug("stopping on a signal; a second Ctrl-C skips the rest of symbolization");
	else if (state == ENGINE_EXITED)
		pr_debug("every target exited");

	err = engine__stop(&e);
	if (err)
		goto cleanup;
	w.timeline = cuda__take_trace(e.cuda);
	/* Detach before symbolizing and writing: the target runs on unprofiled. */
	engine__detach(&e);
	if (engine__stop_signals() < 2)
		profile__symbolize(s->prof, s->syms);
	{
		int64_t t0, d;

		profile__time(s->prof, &t0, &d);
		profile__set_time(s->prof, t0, (int64_t)(e.elapsed * 1e9));
	}
	set_main_mapping(s);
	/* what symbolizing took, beside the targets where they may run on (not all exited) */
	owncpu__after(&e.own, state != ENGINE_EXITED);
	add_comments(&e);
	cupti__add_comments(e.cupti, e.elapsed);
	{
		struct cupti_stats cst;

		/* a job with no CUDA at all: no device time to explain (the comments still do) */
		cupti__stats(e.cupti, &cst);
		if (e.cs.objects || cst.objects)
			cupti__summary(e.cupti, gpu_summary, sizeof(gpu_summary));
		else
			snprintf(gpu_summary, sizeof(gpu_summary), ", no CUDA in the targets");
	}

	err = outfile__write(o.output, write_cb, &w);
	if (err) {
		pr_err("cannot write %s: %s", o.output, outfile__strerror(err));
		goto cleanup;
	}
	print_summary(&e, gpu_summary);
	err = job_status(&e);
cleanup:
	/* A set-up cut short by a stop (the whole group's Ctrl-C kills the held command, and
	 * the set-up then fails on it): said as such, not as the failure it caused. */
	if (err < 0 && o.command && engine__stop_signals() && !procs__released(s->procs))
		err = not_started(&o);
	if (opened)
		engine__close(&e);
	trace__free(w.timeline);
	return err;
}
