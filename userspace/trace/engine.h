/* SPDX-License-Identifier: MIT */
/* The recording engine that `gpubpf record` and `gpubpf agent` share: one session (the
 * symbolizer, the profile model, the target processes), the tracers (CPU sampling, CUDA
 * probes, device time, Python frames), the overhead governor with its windows and guard
 * (windows.h, on a thread of their own), and the loop that drives them: a tick about once a second drains the BPF maps
 * into the model, follows the targets and symbolizes while they live.
 *
 * Order of use:
 *   engine__open_session()  symbolizer, model, process tracking (BPF procs object)
 *   ...the caller adds targets: a started command (procs__spawn) or pids...
 *   engine__open_tracers()  Python, CPU, CUDA (calibrated), device time
 *   ...record: the timeline...
 *   engine__scan()          probes into the targets' objects
 *   ...record: releases the started command...
 *   engine__start()         the clock starts
 *   engine__step()          until it says stop, or the caller does
 *   engine__stop()          final drains, holds undone, statistics
 *   engine__detach()        the tracers go (the targets run on unprofiled)
 *   engine__close()         everything else */
#ifndef GPUBPF_ENGINE_H
#define GPUBPF_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "opts.h"
#include "cpu.h"
#include "cuda.h"
#include "governor.h"
#include "owncpu.h"
#include "session.h"
#include "status.h"
#include "switches.h"

struct cupti_tracer;

struct engine {
	struct session s;
	struct cpu_sampler *cpu;
	struct cuda_tracer *cuda;
	struct cupti_tracer *cupti;
	struct governor gov;
	double sample_calib; /* a CPU sample's cost as calibrated at start-up (seconds) */
	bool windowed;	     /* hot CUDA groups in windows (else every probe attached) */
	struct windows *win; /* those windows, on their own thread (windows.h) */
	double start, next_tick, elapsed;
	struct status status;
	struct owncpu own;  /* gpubpf's own CPU time, and what of it the targets paid (owncpu.h) */
	struct switches sw; /* what the sampler's events add to the targets' switches (switches.h) */
	double sw_next;	    /* when to look at them before the first tick (SW_EARLY apart) */
	char desc[128];
	bool quiet; /* no status line (the agent) */
	/* called at the end of each tick, after the drains and symbolization (the agent cuts
	 * its intervals there); 0 or a negative errno, which stops the engine */
	int (*on_tick)(void *ctx, double now);
	void *on_tick_ctx;
	/* filled by engine__stop() */
	struct cpu_stats st;
	struct cuda_stats cs;
	uint64_t gcost[CG__COUNT]; /* what each group's probes cost, measured (cuda__group_costs) */
};

enum engine_state {
	ENGINE_RUNNING = 0,
	ENGINE_EXITED = 1,   /* every root target exited */
	ENGINE_DURATION = 2, /* -d expired */
};

/* SIGINT, SIGTERM and SIGHUP count stop requests (no SA_RESTART: they cut a wait short);
 * SIGPIPE is ignored. */
void engine__install_signals(void);
int engine__stop_signals(void);
/* The first of them (SIGINT, ...), or 0. */
int engine__stop_signal(void);

/* What gpubpf costs the busiest target thread so far, as measured (a fraction): its probes,
 * samples (their events in its context switches too), device time, and its own CPU where
 * no CPU was free. */
double engine__overhead(struct engine *e);

/* Seconds of CLOCK_MONOTONIC; nanoseconds of CLOCK_REALTIME. */
double engine__now(void);
int64_t engine__wall_ns(void);

/* The symbolizer, the model with its sample types, and process tracking. 0 or a negative
 * errno (said on stderr). O must outlive the engine. */
int engine__open_session(struct engine *e, const struct record_opts *o);

/* The model's sample types (the same ones in the same order each time): a fresh model
 * for the next interval (the agent) reuses the indices the tracers know. */
int engine__setup_profile(struct session *s);

/* Python frames, CPU sampling, the CUDA probes (calibrated, the governor planned), device
 * time. 0 or a negative errno (said). */
int engine__open_tracers(struct engine *e);

/* Probes into the objects the targets map now (later ones at each tick and load). */
void engine__scan(struct engine *e);

/* The recording begins now (DESC names the targets for the status line): the window
 * thread starts. 0 or a negative errno (said). */
int engine__start(struct engine *e, const char *desc);

/* One turn of the loop: lifecycle events for up to the next due
 * moment (a signal cuts the wait short), and the tick when due. Returns an enum
 * engine_state, or a negative errno (said). */
int engine__step(struct engine *e);

/* The end: lifecycle events handled, holds undone, the last drains, statistics in
 * e->st and e->cs. 0 or a negative errno (said). */
int engine__stop(struct engine *e);

/* Detach every tracer: the targets run on unprofiled. */
void engine__detach(struct engine *e);

/* Free everything (accepts a partly opened engine). */
void engine__close(struct engine *e);

#endif /* GPUBPF_ENGINE_H */
