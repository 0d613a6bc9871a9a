/* SPDX-License-Identifier: MIT */
/* libgpubpf_inject.so internals. records.c is the CUPTI-free core (sampling decisions,
 * the sampled-correlation set, record conversion and batching, name interning), unit
 * tested on its own; core.c owns the USDT probes, the watcher thread and the entry
 * points; cupti_backend.c talks to CUPTI (dlopened at attach, never while idle). */
#ifndef GPUBPF_INJECT_H
#define GPUBPF_INJECT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../bpf/cupti.h"

/* API callbacks gpubpf follows, by what they start on the device. */
enum inj_api_class {
	INJ_API_NONE = 0,
	INJ_API_LAUNCH = 1, /* kernel launches */
	INJ_API_GRAPH = 2,  /* graph launches: every node's record carries this correlation id */
	INJ_API_COPY = 3,   /* memcpy and memset */
};

/* Classify a CUPTI callback by its function name (cuptiGetCallbackName), so new
 * versioned entry points (cudaLaunchKernel_v7000, cuLaunchKernelEx_ptsz, ...) are
 * followed without a table per CUDA release. */
enum inj_api_class inj_classify(const char *name);

/* A device activity as CUPTI reported it, whatever the record's version. */
struct inj_activity {
	uint32_t kind; /* enum dev_kind; anything else is ignored */
	uint32_t corr;
	uint64_t start, end;
	uint32_t device, stream, graph_id;
	uint32_t cupti_copy_kind; /* CUpti_ActivityMemcpyKind */
	uint64_t bytes;
	const char *name; /* kernels: CUPTI's name string (shared by every record of a kernel) */
	/* start = end = 0: CUPTI could not time it (seen after enables, and for a kernel still
	 * queued or running at a forced flush): a loss where its call was followed, not a
	 * kernel of no time */
	bool untimed;
};

/* Where records.c sends what it produced (the USDT probes, or a unit test's recorder). */
struct inj_ops {
	/* WIN: the device-time window the launch was followed in (struct dev_win id), 0 none;
	 * PREV_EXIT: CLOCK_MONOTONIC ns when the thread's last followed call returned (0: none
	 * yet), which tells a thread that slept between its calls from one that waited inside
	 * its last (a lock of CUPTI's, a full queue) */
	void (*launch)(uint32_t corr, uint32_t cbinfo, uint32_t win, uint64_t prev_exit);
	void (*batch)(const struct dev_batch *b);
	void (*name)(uint32_t id, const char *name);
	/* the kernel a launch handle (host stub, cudaKernel_t, CUfunction) stands for */
	void (*kname)(uint64_t handle, const char *name);
};

#define INJ_SAMPLED_SLOTS 65536 /* outstanding sampled correlation ids remembered */
#define INJ_NAMES_MAX 16384
#define INJ_NAME_CACHE 256
#define INJ_NAME_MAX 4096     /* a kernel name's bytes kept (longer ones are cut) */
#define INJ_API_SLOTS 2048    /* (domain & 1) << 10 | cbid & 1023: announced API names */
#define INJ_HANDLE_SLOTS 8192 /* launch handles whose kernel name was announced */
#define INJ_STREAMS 64	      /* streams whose last record is kept (the least recent goes) */

/* A CUPTI name pointer seen in generation GEN, and its names[] slot. */
struct inj_name_ref {
	const char *ptr;
	uint32_t gen, slot;
};

struct inj_name {
	char *copy; /* its text: a CUPTI finalized after a window frees its strings */
	uint64_t hash;
	uint32_t id;
	uint32_t epoch; /* announced in this attach generation */
};

#define INJ_TIMED_MAX 512 /* launch calls timed per half of the cost measurement */
/* The states of gpubpf's launch probes a timed call is kept under (dev_config.probe_gen;
 * one that spans a switch, or met them going in or out, is not kept). */
enum { INJ_PROBES_OUT, INJ_PROBES_IN, INJ_PROBE_STATES };

/* The cost measurement (struct dev_costs): launch calls timed in the callbacks while the
 * watcher turns activity on and off. Written by launching threads with atomics. */
struct inj_timing {
	bool on;			 /* measuring */
	bool again;			 /* ... inside the windows' periods (DEV_WIN_REMEASURE) */
	bool activity;			 /* activity is on now (the half a call falls in) */
	uint8_t phase;			 /* 0: off, before; 1: on; 2: off again, after a finalize */
	uint32_t off1[INJ_PROBE_STATES]; /* calls of n[0][p] kept in phase 0 */
	uint64_t phase_at;		 /* when the phase began */
	uint64_t first;			 /* when the watcher first saw a timed call in the phase */
	uint64_t seen;			 /* ... the first one at all (phase 0: the job launches) */
	uint64_t step_at;		 /* the watcher's last look */
	uint32_t probes0;		 /* dev_config.probe_gen at the first phase's warm-up's end */
	uint32_t probes_seen;		 /* ... at the watcher's last look */
	uint64_t held_ns;		 /* the first phase's clock held while gpubpf's probes switched */
	uint32_t gen;			 /* bumped at each switch: a call that spans one is not kept */
	/* calls kept, [activity off, on][gpubpf's launch probes' state], and their durations */
	uint32_t n[2][INJ_PROBE_STATES];
	uint32_t ns[2][INJ_PROBE_STATES][INJ_TIMED_MAX];
	uint64_t cb_ns, cb_calls; /* the library's time in its callbacks, and the calls */
	uint64_t cb_n;		  /* ... and the callbacks, enters and exits (CUPTI dispatched them) */
	/* calls not kept, for the trace (GPUBPF_INJECT_DEBUG=2): a phase began during the
	 * call, gpubpf's probes switched during it, they were going in or out */
	uint32_t not_kept[3];
};

struct inj_state {
	struct inj_ops ops;
	/* gpubpf's launch probes' state (dev_config.probe_gen), or NULL */
	const volatile uint32_t *probe_gen;
	/* Sampling, set by the watcher: follow 1 in every_n calls while the window is open. */
	uint32_t every_n;
	bool window_open;
	/* DEV_MODE_WINDOWS: launches are followed only in a window, and carry its id. */
	bool windowed;
	uint32_t win_id;
	/* Bumped at each switch of callbacks: an API call whose enter came before one may
	 * never see its exit callback (CUPTI stops calling back), so a later enter is not
	 * nested in it. */
	uint32_t cb_gen;
	/* Followed calls between their enter and exit callbacks (a window's end waits for
	 * them: a launch followed in it makes its record only inside the driver); reset when
	 * a window opens, so a call whose exit never came is not waited for again. */
	int32_t in_followed;
	struct inj_timing timing;
	uint32_t epoch;
	uint32_t sampled[INJ_SAMPLED_SLOTS]; /* corr stored at corr % slots: "corr was followed" */
	/* ... and, for the driver call inside a followed runtime call that has an id of its
	 * own, the runtime call's: its records are taken as the outer call's */
	uint32_t outer[INJ_SAMPLED_SLOTS];
	uint32_t api_epoch[INJ_API_SLOTS];
	/* (handle, epoch) announced; open addressing, claimed under lock, read without */
	uint64_t handle_key[INJ_HANDLE_SLOTS];
	uint32_t handle_epoch[INJ_HANDLE_SLOTS];
	struct dev_counters ctr; /* updated with atomics */
	uint64_t kept;		 /* records kept (of followed calls), with atomics */
	/* Under lock: each stream's last record (device, stream, its end, its call's id),
	 * which tells whether the device or the launch set the next one's pace (DEV_REC_*) */
	struct inj_stream {
		uint32_t device, stream, corr;
		uint64_t end;
	} streams[INJ_STREAMS];
	uint64_t lost_told; /* ctr.lost in the last batch handed to gpubpf (under lock) */
	/* Under lock: batch and names (buffer callbacks may come from two threads). */
	pthread_mutex_t lock;
	struct dev_batch *batch;
	struct inj_name names[INJ_NAMES_MAX];
	uint32_t next_name;
	/* CUPTI's name pointer -> names[] slot, for this CUPTI's life only (NAMES_GEN is
	 * bumped when it is finalized: its strings are freed): one hash of a name's text per
	 * kernel, not per record */
	uint32_t names_gen;
	struct inj_name_ref name_cache[INJ_NAME_CACHE];
};

/* GPUBPF_INJECT_DEBUG's level: 1 says why the library stays idle; 2 also traces, one
 * line each on stderr, CUPTI's set-up and teardown, the windows' switches and the cost
 * measurement's phases, with CLOCK_MONOTONIC's time and the thread (the H100's crashes). */
extern int inj_debug;
void inj_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* 0 or -ENOMEM. */
int inj_state_init(struct inj_state *s, const struct inj_ops *ops);
void inj_state_fini(struct inj_state *s);
/* A new attach: names and API functions are announced again. */
void inj_new_epoch(struct inj_state *s);

/* A launch's handle and the kernel's name (CUPTI's symbolName): announced once per
 * handle and attach, for every launch, followed or not, so that gpubpf names the launches
 * its probes count by the handle they pass. */
void inj_announce_handle(struct inj_state *s, uint64_t handle, const char *name);

/* Wait, at most MAX_NS, for the followed calls in flight to exit. True if none is left. */
bool inj_wait_followed(struct inj_state *s, uint64_t max_ns);

/* When a callback began, for the cost measurement (0 while it does not time calls). */
uint64_t inj_callback_start(struct inj_state *s);

/* API callbacks (enter and exit of each followed call, on the calling thread). Nested
 * calls (the runtime calling the driver) follow the outer call's decision. T_CB: when the
 * enter callback began (inj_callback_start; 0: now), so that the library's time in it
 * before this is timed too. */
void inj_api_enter(struct inj_state *s, uint64_t t_cb, enum inj_api_class cls, uint32_t domain, uint32_t cbid,
		   uint32_t corr, const char *func_name);
void inj_api_exit(struct inj_state *s);
bool inj_is_sampled(const struct inj_state *s, uint32_t corr);

/* Activity records: kept (1) when their launch was followed, else dropped and counted (0);
 * -EINVAL for a kind gpubpf does not follow. inj_flush sends what is batched. Both lock. */
int inj_add_activity(struct inj_state *s, const struct inj_activity *a);
void inj_flush(struct inj_state *s);
void inj_count_lost(struct inj_state *s, uint64_t n);

/* ---- devwin.c: device time in windows (bpf/cupti.h, struct dev_config) ---- */

/* What activity and callbacks should be: INJ_CB (callbacks), INJ_ACT (activity). */
#define INJ_CB 1
#define INJ_ACT 2
#define INJ_UNSET (-1) /* the backend between states (a switch not done yet) */

#define INJ_SLICE_NS 4000000ull		   /* the cost measurement counts its calls this often */
#define INJ_MEASURE_NS 300000000ull	   /* ... for at most this long, a third in each phase */
#define INJ_MEASURE_CALLS 256		   /* ... or until each half (on, off) has this many calls */
#define INJ_MEASURE_MIN 16		   /* fewer in a half: too few to say (DEV_COST_IDLE) */
#define INJ_MEASURE_WAIT_NS 10000000000ull /* no launch call this long from its start: idle */
#define INJ_MEASURE_WARMUP_NS 100000000ull /* ... and none kept this long after the first */
#define INJ_MEASURE_STEADY 2000		   /* launch calls a second from which they are the job's */
#define INJ_MEASURE_RAMP_NS 1000000000ull  /* ... or this long after the first one */
#define INJ_MEASURE_SPREAD_NS 25000000ull  /* the first phase runs this long at least */
#define INJ_MEASURE_SETTLE_NS 5000000ull   /* ... nor this long after the finalize */
#define INJ_REMEASURE_NS 2000000000ull	   /* an idle measurement is tried again after this */
#define INJ_MEASURE_HOLD_NS 2000000000ull  /* its first phase held at most this long */
#define INJ_MIN_SLOT_NS 2000000ull	   /* the shortest window worth opening */
#define INJ_RETRY_NS 1000000ull		   /* a switch not yet done is tried again after this */
#define INJ_FOLLOWED_WAIT_NS 200000ull	   /* a window's end waits this long for its calls */
#define INJ_LEAD_MAX_NS 100000000ull	   /* CUPTI set up at most this long ahead of a window */
#define INJ_GAP_MAX 64			   /* periods with no window one window stands in for, at most */

/* The schedule of windows: its state lives in CFG (the config gpubpf reads) and S. */
struct inj_sched {
	uint64_t period; /* the period whose window is planned (+1: none yet) */
	uint32_t cur;	 /* ring index + 1 of the window planned or open, 0 none */
	/* the slot's second piece, in the same period, after the first: from its start to the
	 * period's end (0, 0: none), and the weight it shares with the first */
	uint64_t piece_open, piece_close;
	uint32_t piece_k;
	uint64_t rng;	   /* xorshift state for the slots */
	uint64_t retry_at; /* DEV_COST_IDLE: measure again from here */
	bool retried;	   /* ... at once, after a measurement whose "on" phase timed too few */
	/* the windows' period in gpubpf's (struct dev_config every), and a new one gpubpf
	 * asked for, taken at EVERY_AT: a boundary of both, so no instant is in two windows'
	 * periods or in none (every is a power of two) */
	uint32_t every, every_next;
	uint64_t every_at;
	uint64_t origin;	    /* the periods count from here (0: no window planned yet) */
	uint64_t covered;	    /* the last period a window opened in, + 1 (0: none yet) */
	bool retimed;		    /* the open window's slot passed while the watcher slept: it
				     * runs its length from when its launches are followed */
	uint32_t on_id;		    /* the last window whose launches were followed (CUPTI on) */
	uint64_t covered_was;	    /* covered before the open window opened, and EVERY then: */
	uint32_t covered_every;	    /* ... back where it is never on */
	uint64_t measure_switch_ns; /* the cost measurement's switches (set-up, teardown) */
	/* a measurement again (dev_config.remeasure_ms): the figures it replaces, kept where
	 * it times too few calls (the job idle meanwhile) */
	bool again;
	struct dev_costs last;
};

/* The watcher's step at NOW (CLOCK_MONOTONIC ns): the state activity and callbacks should
 * be in (INJ_CB | INJ_ACT bits) and, in *WAKE, when to look again. CFG is read for the
 * plan and written for the books. A mode other than DEV_MODE_WINDOWS returns INJ_CB|INJ_ACT. */
int inj_sched_step(struct inj_sched *sc, struct inj_state *s, volatile struct dev_config *cfg, uint64_t now,
		   uint64_t *wake);

/* The watcher put activity and callbacks in state WANT, done AT (CLOCK_MONOTONIC ns), at a
 * cost of COST ns of its time (0: they were already): launches are followed under the open
 * window's id from here (the window opens AT, where it had not yet), and the switch's
 * cost goes into its books. */
void inj_sched_switched(struct inj_sched *sc, struct inj_state *s, volatile struct dev_config *cfg, int want,
			uint64_t at, uint64_t cost);

/* Slots a period of PERIOD ns is cut into at duty PPM: ceil(1/d), none shorter than
 * INJ_MIN_SLOT_NS. */
uint32_t inj_slots(uint32_t ppm, uint64_t period);

/* The mean of the faster half of N durations (sorts them). */
uint32_t inj_tmean(uint32_t *v, uint32_t n);

/* CUpti_ActivityMemcpyKind -> DEV_DIR_*. */
uint32_t inj_copy_dir(uint32_t cupti_kind);

#endif /* GPUBPF_INJECT_H */
