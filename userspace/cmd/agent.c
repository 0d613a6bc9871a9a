// SPDX-License-Identifier: MIT
/* `gpubpf agent`: the engine run host-wide until a signal, cut every interval into one
 * profile per process, delivered to the spool (and so the server) and the output dir. */
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agent_cut.h"
#include "agent_labels.h"
#include "agent_out.h"
#include "agent_select.h"
#include "engine.h"
#include "envnum.h"
#include "ingest.h"
#include "log.h"
#include "metrics.h"
#include "preflight.h"
#include "procs.h"
#include "profile.h"
#include "pyroscope.h"
#include "python.h"
#include "readfile.h"
#include "spool.h"
#include "version.h" /* GPUBPF_VERSION, generated (Makefile) */

#define FLUSH_S 5 /* at a stop, how long the spool may still be delivered */
/* The session keeps what it learnt of every process it profiled (mappings, parsed
 * objects, Python code objects, kernel names) for the rest of its life, which is what
 * `record` wants and a service must not: after this many targets have come and gone, or
 * a day, the agent sets its session up anew right after a cut. */
#define RENEW_AFTER_GONE 200
#define RENEW_AFTER_S (24 * 3600)
#define RENEW 16 /* on_tick's code: ends the loop to renew (no enum engine_state) */

struct agent {
	struct agent_opts *o;
	struct engine e;
	struct agent_stats st;
	struct agent_select *sel;
	struct agent_procs *procs;
	struct spool *spool;
	struct ingest *in;
	struct agent_out *out;
	struct metrics *metrics;
	char host[256];
	double next_cut, next_report, report_every;
	int64_t cut_wall; /* CLOCK_REALTIME ns: where the interval being recorded began */
	uint64_t dropped_said, errors_said;
	uint64_t spool_errors; /* profiles that could not be spooled: lost */
	int gone;	       /* targets forgotten since the session was set up */
	int renew_after_gone;
	double renewed_at;
	unsigned renewals;
	double started; /* CLOCK_MONOTONIC seconds */
	double dropped_at, errors_at;
	struct { /* at the last hourly line */
		uint64_t profiles, bytes, sent, dropped, rejected;
		double cpu;
	} last;
	size_t pids_in_hour;
};

static double mono(void)
{
	return engine__now();
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

static double rss_mb(void)
{
	char *s = readfile__path("/proc/self/statm", 256, true, NULL);
	unsigned long long size = 0, rss = 0;

	if (s && sscanf(s, "%llu %llu", &size, &rss) != 2)
		rss = 0;
	free(s);
	return (double)rss * (double)sysconf(_SC_PAGESIZE) / (1 << 20);
}

/* ---- hooks ---- */

static void on_selected(void *ctx, int pid)
{
	struct agent *a = ctx;

	/* its environment and cgroup, while it lives */
	agent_procs__get(a->procs, pid, mono());
	atomic_fetch_add(&a->st.selected_total, 1);
	pr_debug("agent: profiling pid %d", pid);
}

static void on_change(void *ctx, int pid)
{
	struct agent *a = ctx;

	agent_procs__stale(a->procs, pid);
}

static int on_targets(struct agent *a, struct engine *e)
{
	int n, err;

	err = procs__add_on_change(e->s.procs, on_change, a);
	if (err) {
		pr_err("agent: cannot follow the targets' execs: %s", strerror(-err));
		return err;
	}
	if (a->o->rec.all)
		return 0;
	procs__set_watch(e->s.procs, agent_select__event, a->sel);
	n = agent_select__start(a->sel, e->s.procs);
	if (n < 0) {
		pr_err("agent: cannot list the processes: %s", strerror(-n));
		return n;
	}
	return 0;
}

/* ---- one interval's profiles ---- */

static int labels_of(struct agent *a, const struct agent_proc *p, char vals[][PYRO_MAX_VALUE + 1], struct pyro_label *l)
{
	const char *keys[] = {"host", "pid", "comm", "service", "container", "rank", "local_rank", "world_size", "gpu"};
	const char *raw[9];
	char pid[16];
	int n = 0;

	snprintf(pid, sizeof(pid), "%d", p->pid);
	raw[0] = a->host;
	raw[1] = pid;
	raw[2] = p->comm;
	raw[3] = p->service;
	raw[4] = p->container;
	raw[5] = p->rank;
	raw[6] = p->local_rank;
	raw[7] = p->world_size;
	raw[8] = p->gpu;
	for (int i = 0; i < 9; i++) {
		const char *v = raw[i];

		for (int u = 0; u < a->o->nlabels; u++)
			if (!strcmp(a->o->labels[u].key, keys[i]))
				v = a->o->labels[u].value;
		pyro__clean_value(vals[n], PYRO_MAX_VALUE + 1, v);
		l[n].key = keys[i];
		l[n].value = vals[n];
		n++;
	}
	for (int u = 0; u < a->o->nlabels; u++) {
		bool ours = false;

		for (int i = 0; i < 9; i++)
			ours |= !strcmp(a->o->labels[u].key, keys[i]);
		if (!ours) {
			l[n].key = a->o->labels[u].key;
			l[n].value = a->o->labels[u].value;
			n++;
		}
	}
	return n;
}

/* A problem that may repeat every interval: a line a minute at most. */
static void say_error(struct agent *a, const char *what, int err)
{
	uint64_t n = ++a->errors_said;

	if (n == 1 || mono() - a->errors_at >= 60) {
		pr_err("agent: %s: %s (%llu such errors in all)", what, strerror(-err), (unsigned long long)n);
		a->errors_at = mono();
	}
}

static void one_process(struct agent *a, const struct profile *prof, int pid, const size_t *idx, size_t n,
			int64_t now_wall)
{
	char vals[9 + AGENT_MAX_USER_LABELS][PYRO_MAX_VALUE + 1], service[PYRO_MAX_SERVICE + 1];
	struct pyro_label l[9 + AGENT_MAX_USER_LABELS];
	char name[8192], query[16384], comment[8300], settings[200];
	struct cut_meta m = {.time_ns = a->cut_wall, .duration_ns = now_wall - a->cut_wall};
	struct agent_proc *p = agent_procs__get(a->procs, pid, mono());
	const char *svc;
	char *buf = NULL;
	size_t len = 0;
	int nl, err;

	if (!p) {
		say_error(a, "cannot keep a process's labels", -ENOMEM);
		return;
	}
	p->seen = true;
	nl = labels_of(a, p, vals, l);
	/* --labels service=X names the service too */
	svc = p->service;
	for (int u = 0; u < a->o->nlabels; u++)
		if (!strcmp(a->o->labels[u].key, "service"))
			svc = a->o->labels[u].value;
	pyro__clean_service(service, sizeof(service), svc);
	err = pyro__name(name, sizeof(name), service, l, nl);
	if (err) {
		say_error(a, "cannot name a profile's series", err);
		return;
	}
	snprintf(comment, sizeof(comment), "gpubpf %s agent: %s", GPUBPF_VERSION, name);
	snprintf(settings, sizeof(settings),
		 "interval %.3g s, CPU samples at %d Hz, overhead budget %.3g%%, estimated overhead %.3g%%",
		 a->o->interval, a->o->rec.freq, a->o->rec.budget, 100 * engine__overhead(&a->e));
	m.comments[m.ncomments++] = comment;
	m.comments[m.ncomments++] = settings;
	err = agent_cut__pprof(prof, idx, n, &m, &buf, &len);
	if (err) {
		say_error(a, "cannot encode a profile", err);
		return;
	}
	atomic_fetch_add(&a->st.profiles, 1);
	atomic_fetch_add(&a->st.profile_bytes, len);
	if (a->spool) {
		int64_t from = a->cut_wall / 1000000000, until = (now_wall + 999999999) / 1000000000;

		err = pyro__query(query, sizeof(query), name, from, until > from ? until : from + 1, a->o->rec.freq);
		if (!err)
			err = spool__put(a->spool, query, buf, len);
		if (err) {
			a->spool_errors++;
			say_error(a, "cannot spool a profile (it is lost)", err);
		} else {
			atomic_fetch_add(&a->st.spooled, 1);
			ingest__kick(a->in);
		}
	}
	if (a->out) {
		err = agent_out__write(a->out, service, a->cut_wall, pid, buf, len);
		if (err) {
			atomic_fetch_add(&a->st.write_errors, 1);
			say_error(a, "cannot write a profile under --output-dir", err);
		} else {
			atomic_fetch_add(&a->st.written, 1);
		}
	}
	free(buf);
}

static void spool_gauges(struct agent *a)
{
	struct spool_stats ss;
	uint64_t dropped;

	if (!a->spool)
		return;
	spool__stats(a->spool, &ss);
	atomic_store(&a->st.spool_queued, ss.queued);
	atomic_store(&a->st.spool_bytes, ss.bytes);
	atomic_store(&a->st.dropped_full, ss.dropped_full);
	atomic_store(&a->st.dropped_bad, ss.dropped_bad + a->spool_errors);
	dropped = ss.dropped_full + ss.dropped_bad;
	if (dropped > a->dropped_said && (!a->dropped_said || mono() - a->dropped_at >= 60)) {
		pr_warn("agent: the spool is full (--spool-max %.3g MB): dropped the %llu oldest profiles not yet "
			"delivered (%llu dropped in all, %llu unreadable)",
			a->o->spool_max_mb, (unsigned long long)(dropped - a->dropped_said),
			(unsigned long long)ss.dropped_full, (unsigned long long)ss.dropped_bad);
		a->dropped_said = dropped;
		a->dropped_at = mono();
	}
}

/* The interval ends now: one profile per process with samples in it (or profiled before
 * and still alive), then an empty
 * model for the next one. FINAL: after the engine's last drains (allocations still
 * live are in already). */
static int cut(struct agent *a, bool final)
{
	struct session *s = &a->e.s;
	int64_t now_wall = engine__wall_ns();
	struct cut_set cs;
	struct profile *fresh;
	int quiet[256], err;
	size_t nquiet;

	if (!final) {
		/* GPU memory held at the end of the interval, under its allocating stacks */
		err = cuda__finish(a->e.cuda);
		if (err)
			say_error(a, "cannot read the live GPU allocations", err);
		profile__symbolize(s->prof, s->syms);
	}
	err = agent_cut__group(s->prof, &cs);
	if (err) {
		say_error(a, "cannot cut the interval", err);
		return 0;
	}
	for (size_t i = 0; i < cs.npids; i++)
		one_process(a, s->prof, cs.pids[i], cs.idx + cs.start[i], cs.start[i + 1] - cs.start[i], now_wall);
	a->pids_in_hour += cs.npids;
	agent_cut__set_free(&cs);
	/* profiled before, alive, nothing this interval: an empty profile, not a gap */
	nquiet = agent_procs__quiet(a->procs, quiet, sizeof(quiet) / sizeof(quiet[0]));
	for (size_t i = 0; i < nquiet; i++)
		one_process(a, s->prof, quiet[i], NULL, 0, now_wall);
	a->cut_wall = now_wall;
	if (!final) {
		fresh = agent_cut__renew(s->prof);
		if (!fresh) {
			say_error(a, "cannot start the next interval", -errno);
			return -errno;
		}
		profile__free(s->prof);
		s->prof = fresh;
		python__model_renewed(s->py);
		session__names_free();
	}
	a->gone += agent_procs__prune(a->procs);
	if (a->out)
		atomic_fetch_add(&a->st.removed, (uint64_t)agent_out__retain(a->out, time(NULL)));
	spool_gauges(a);
	return 0;
}

static void hourly(struct agent *a)
{
	uint64_t profiles = atomic_load(&a->st.profiles), bytes = atomic_load(&a->st.profile_bytes);
	uint64_t sent = atomic_load(&a->st.sent), rejected = atomic_load(&a->st.rejected);
	uint64_t dropped = atomic_load(&a->st.dropped_full) + atomic_load(&a->st.dropped_bad);
	double cpu = cpu_seconds();

	fprintf(stderr,
		"gpubpf: agent: last %.0f min: %llu profiles (%.1f MB, %.3g a process-interval) of %llu processes "
		"now",
		a->report_every / 60, (unsigned long long)(profiles - a->last.profiles),
		(double)(bytes - a->last.bytes) / (1 << 20),
		profiles > a->last.profiles ? (double)(bytes - a->last.bytes) / (double)(profiles - a->last.profiles)
					    : 0.0,
		(unsigned long long)atomic_load(&a->st.targets));
	if (a->spool)
		fprintf(stderr, "; %llu sent, %llu waiting in the spool, %llu dropped, %llu refused",
			(unsigned long long)(sent - a->last.sent), (unsigned long long)atomic_load(&a->st.spool_queued),
			(unsigned long long)(dropped - a->last.dropped),
			(unsigned long long)(rejected - a->last.rejected));
	fprintf(stderr, "; agent CPU %.1f s (%.2f%% of a core), RSS %.0f MB; estimated overhead %.2g%%\n",
		cpu - a->last.cpu, 100 * (cpu - a->last.cpu) / a->report_every, rss_mb(),
		100 * engine__overhead(&a->e));
	a->last.profiles = profiles;
	a->last.bytes = bytes;
	a->last.sent = sent;
	a->last.dropped = dropped;
	a->last.rejected = rejected;
	a->last.cpu = cpu;
}

static int on_tick(void *ctx, double t)
{
	struct agent *a = ctx;
	struct engine *e = &a->e;
	int err = 0;

	if (a->sel && !a->o->rec.all)
		agent_select__tick(a->sel);
	atomic_store(&a->st.targets, (uint64_t)procs__num_live(e->s.procs));
	atomic_store(&a->st.overhead_ppm, (uint64_t)llround(1e6 * engine__overhead(e)));
	if (t >= a->next_cut) {
		err = cut(a, false);
		a->next_cut += a->o->interval;
		if (a->next_cut <= t)
			a->next_cut = t + a->o->interval;
		if (!err && (a->gone >= a->renew_after_gone || t - a->renewed_at >= RENEW_AFTER_S))
			err = RENEW;
	}
	if (t >= a->next_report) {
		hourly(a);
		a->next_report = t + a->report_every;
	}
	return err;
}

/* ---- the engine ---- */

/* The session, the processes selected now, the tracers, their probes: recording starts. */
static int engine_up(struct agent *a)
{
	struct engine *e = &a->e;
	int err;

	err = engine__open_session(e, &a->o->rec);
	if (err)
		return err;
	e->quiet = true;
	e->on_tick = on_tick;
	e->on_tick_ctx = a;
	err = on_targets(a, e);
	if (err)
		return err;
	err = engine__open_tracers(e);
	if (err) {
		pr_err("agent: cannot set up the tracers: %s", strerror(-err));
		return err;
	}
	engine__scan(e);
	return engine__start(e, "the agent's targets");
}

/* Until a signal, an error, or on_tick's RENEW. */
static int engine_run(struct agent *a)
{
	int st = ENGINE_RUNNING;

	while (!engine__stop_signals() && st == ENGINE_RUNNING)
		st = engine__step(&a->e);
	return st == ENGINE_DURATION || st == ENGINE_EXITED ? 0 : st;
}

/* ---- start and stop ---- */

static void start_line(struct agent *a, const char *what)
{
	struct agent_opts *o = a->o;

	fprintf(stderr,
		"gpubpf: agent %s on %s: profiling %s (%llu now) with CPU samples at %d Hz, CUDA calls under a "
		"%.3g%% overhead budget%s and device time for jobs started with the injection library; one "
		"profile per process every %.3g s",
		GPUBPF_VERSION, a->host, what, (unsigned long long)atomic_load(&a->st.selected_total), o->rec.freq,
		o->rec.budget, o->rec.python ? ", Python frames" : "", o->interval);
	if (o->server) {
		struct spool_stats ss;

		spool__stats(a->spool, &ss);
		fprintf(stderr, " to %s (spool %s, up to %.4g MB", o->server, o->spool_dir, o->spool_max_mb);
		if (ss.resumed)
			fprintf(stderr, "; %llu profiles from before to deliver first", (unsigned long long)ss.resumed);
		fputc(')', stderr);
	}
	if (o->output_dir)
		fprintf(stderr, "%s %s/SERVICE/ (kept %.4g MB, %.4g h)", o->server ? " and" : " to", o->output_dir,
			o->retention_mb, o->retention_h);
	if (o->metrics)
		fprintf(stderr, "; metrics on %s", o->metrics);
	fputc('\n', stderr);
}

/* Set the session up anew: everything kept for exited processes goes with the old one.
 * The interval goes on from the last cut; the processes that qualify are found again. */
static int renew(struct agent *a)
{
	int err;

	pr_debug("agent: setting the session up anew (%d processes gone since the last time)", a->gone);
	engine__close(&a->e);
	/* main.c keeps freed memory for reuse; this is the time to give it back */
	malloc_trim(0);
	agent_select__reset(a->sel);
	err = engine_up(a);
	if (err)
		return err;
	a->next_cut = a->e.start + a->o->interval;
	a->renewed_at = a->e.start;
	a->gone = 0;
	a->renewals++;
	atomic_fetch_add(&a->st.renewals, 1);
	return 0;
}

static double report_period(void)
{
	return envnum__get("GPUBPF_AGENT_REPORT_S", 1, INFINITY, 3600); /* tests: a shorter "hour" */
}

static int renew_after_gone(void)
{
	const char *e = getenv("GPUBPF_AGENT_RENEW_GONE"); /* tests: renew sooner */
	int v = e ? atoi(e) : 0;

	return v >= 1 ? v : RENEW_AFTER_GONE;
}

static double retry_max(void)
{
	return envnum__get("GPUBPF_RETRY_MAX", 0.1, INFINITY, 300); /* tests: a shorter longest backoff */
}

int agent__main(int argc, char **argv)
{
	struct agent_opts o;
	struct agent *a = NULL;
	char what[256];
	int err;

	owncpu__mark(); /* the set-up's CPU from here */
	err = agent__parse(argc, argv, &o);
	if (err)
		return err;
	if (o.help) {
		agent__usage(stdout);
		return 0;
	}
	log_verbose = o.rec.verbose;
	log__setup_libbpf();
	err = preflight__privileges();
	if (!err)
		err = preflight__btf();
	if (err)
		return err;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->o = &o;
	a->report_every = report_period();
	a->renew_after_gone = renew_after_gone();
	if (gethostname(a->host, sizeof(a->host) - 1))
		snprintf(a->host, sizeof(a->host), "unknown");
	a->procs = agent_procs__new();
	a->sel = agent_select__new(&o, on_selected, a);
	if (!a->procs || !a->sel) {
		err = a->procs ? -errno : -ENOMEM;
		goto cleanup;
	}
	if (o.output_dir) {
		a->out = agent_out__open(o.output_dir, (uint64_t)(o.retention_mb * (1 << 20)), o.retention_h * 3600);
		if (!a->out) {
			err = -errno;
			pr_err("agent: cannot use --output-dir %s: %s", o.output_dir, strerror(-err));
			goto cleanup;
		}
	}
	if (o.server) {
		struct ingest_opts io = {
		    .server = o.server, .token_file = o.token_file, .ca_file = o.ca_file, .retry_max = retry_max()};

		a->spool = spool__open(o.spool_dir, (uint64_t)(o.spool_max_mb * (1 << 20)));
		if (!a->spool) {
			err = -errno;
			pr_err("agent: cannot use the spool %s: %s", o.spool_dir, strerror(-err));
			goto cleanup;
		}
		a->in = ingest__start(&io, a->spool, &a->st);
		if (!a->in) {
			err = -errno;
			goto cleanup;
		}
	}
	if (o.metrics) {
		a->metrics = metrics__start(o.metrics, &a->st);
		if (!a->metrics) {
			err = -errno;
			goto cleanup;
		}
	}
	engine__install_signals();
	err = engine_up(a);
	if (err)
		goto cleanup;
	a->cut_wall = engine__wall_ns();
	a->next_cut = a->e.start + o.interval;
	a->next_report = a->e.start + a->report_every;
	a->renewed_at = a->started = a->e.start;
	a->last.cpu = cpu_seconds();
	start_line(a, agent_select__describe(&o, what, sizeof(what)));
	while ((err = engine_run(a)) == RENEW) {
		err = renew(a);
		if (err)
			goto cleanup;
	}
	if (err)
		goto cleanup;
	/* The last, partial interval: the final drains, then its profiles. */
	err = engine__stop(&a->e);
	if (err)
		goto cleanup;
	engine__detach(&a->e);
	if (engine__stop_signals() < 2)
		profile__symbolize(a->e.s.prof, a->e.s.syms);
	cut(a, true);
	ingest__stop(a->in, engine__stop_signals() < 2 ? FLUSH_S : 0);
	a->in = NULL;
	spool_gauges(a);
	fprintf(stderr, "gpubpf: agent: stopped after %.0f s: %llu profiles", mono() - a->started,
		(unsigned long long)atomic_load(&a->st.profiles));
	if (a->spool)
		fprintf(stderr, ", %llu sent, %llu left in the spool for the next start, %llu dropped",
			(unsigned long long)atomic_load(&a->st.sent),
			(unsigned long long)atomic_load(&a->st.spool_queued),
			(unsigned long long)(atomic_load(&a->st.dropped_full) + atomic_load(&a->st.dropped_bad)));
	if (a->out)
		fprintf(stderr, ", %llu files written", (unsigned long long)atomic_load(&a->st.written));
	fputc('\n', stderr);
	err = 0;
cleanup:
	metrics__stop(a->metrics);
	ingest__stop(a->in, 0);
	engine__close(&a->e);
	spool__close(a->spool);
	agent_out__close(a->out);
	agent_select__free(a->sel);
	agent_procs__free(a->procs);
	free(a);
	return err;
}
