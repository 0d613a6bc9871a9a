/* SPDX-License-Identifier: MIT */
/* Device time's insides, shared by its files: cupti.c (events, lifecycle, attaching,
 * starting a command with the library) and cupti_drain.c (draining, --trace,
 * reporting). cupti.h is the contract. */
#ifndef GPUBPF_CUPTI_INT_H
#define GPUBPF_CUPTI_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../bpf/cupti.h"
#include "cupti.h"
#include "estimate.h"
#include "hmap.h"
#include "links.h"

#define MAX_SCAN_PIDS 4096
#define MAX_RANGES 32
#define CPT_COSTS 3	     /* a library's last cost measurements whose median is taken */
#define CPT_CONFIRM_MS 10000 /* ... measured again this soon at most where the last two differ */
#define CPT_PROBE_TARGETS 64 /* libraries told of the launch probes' switches (more: not told) */
#define LIB_NAME "libgpubpf_inject.so"

/* hmap key spaces (third key word) */
enum { HK_NAME = 0, HK_STATUS = 1, HK_RANGES = 2, HK_LIB = 3, HK_TEXT = 4, HK_WAS_ON = 5, HK_WINT = 6 };

/* A device-time window of a target, as last read (cupti_win.c). */
#define CPT_WIN_THREADS 8
/* a run's records needed to tell who set its launches' pace (cupti_win.c, run_share) */
#define DEV_PACE_MIN 16
struct cpt_win {
	uint32_t id;
	bool closed;
	uint64_t period; /* the library's period index: slot_open / period */
	double weight;	 /* 1 / the probability of its instants, for its realized length */
	uint64_t end;	 /* CLOCK_MONOTONIC ns: its close (its slot's end while open) */
	/* its launching threads' delay corrections, once it closed (cupti_win.c, run_delay) */
	uint32_t nthr, thr_tid[CPT_WIN_THREADS];
	struct est_delay thr_d[CPT_WIN_THREADS];
};

/* A target's library, its config and its windows (hmap (tgid, 0, HK_WINT)). */
struct cpt_wtarget {
	uint32_t tgid;
	uint64_t addr; /* its struct dev_config; 0: gone */
	uint32_t duty_ppm, written_ppm, written_names, written_every;
	uint32_t remeasure_ms, written_remeasure; /* cupti_cost.c, cpt_remeasure_of */
	uint64_t followed;			  /* launches and copies followed in its closed windows */
	uint64_t pace_read[2];			  /* its dev_proc's free and queued when last read (read_pace) */
	struct dev_costs cost;
	/* its library's cost measurements (dev_costs.measures): the last CPT_COSTS of them,
	 * whose median is the cost (cupti_cost.c, take_median), and c's range over all */
	uint32_t measures, kept;
	struct dev_costs costs[CPT_COSTS]; /* [kept % CPT_COSTS]: the next */
	const struct dev_costs *taken;	   /* the one the cost is taken from (NULL: none yet) */
	double c_lo, c_hi;
	uint64_t idle_done; /* the last measurement that ended DEV_COST_IDLE (dev_costs.done) */
	struct cpt_win win[DEV_WIN_RING];
};

/* The target of a table entry, or NULL for entries of other kinds. */
static inline struct cpt_wtarget *cpt_as_target(const struct hmap_ent *e)
{
	return e->k[2] == HK_WINT && e->val ? (struct cpt_wtarget *)(uintptr_t)e->val : NULL;
}

struct ranges {
	int n;
	struct cupti_range r[MAX_RANGES];
};

struct cupti_tracer {
	struct session *s;
	struct cupti_bpf *skel;
	struct ring_buffer *rb;
	struct linkset links;
	struct hmap scanned; /* objscan: (pid or 0, dev, inode) */
	struct hmap tab;     /* (tgid, id, HK_NAME) -> char *; (tgid, 0, HK_STATUS) -> code;
			      * (tgid, 0, HK_TEXT) -> char *; (tgid, 0, HK_RANGES) -> struct ranges *;
			      * (tgid, 0, HK_LIB) -> 1 */
	int objects;
	int left_idle; /* libraries found and left idle (--no-device-time) */
	int targets_fd, comms_fd;
	bool load_failed; /* the BPF object is loaded when the first library is found */
	uint32_t max_rate;
	struct devtrace *dt; /* --trace: device tracks, or NULL */
	uint64_t kernels, copies, kernel_ns, copy_ns;
	char reason[512];
	/* device time in windows (cupti_win.c); win NULL: followed all the time */
	struct windows *win;
	double period, duty;
	uint32_t every;	       /* the windows' period in periods (the governor's) */
	uint32_t remeasure_ms; /* dev_config.remeasure_ms: GPUBPF_DEVICE_REMEASURE */
	uint64_t p0;	       /* the first period of the recording (CLOCK_MONOTONIC / period) */
	struct est_group est;  /* per period: kernels, kernel ns, copy ns */
	uint64_t windows, followed, switch_ns, open_ns;
	uint64_t unweighted; /* records of a window whose books were gone: counted once */
	bool paced_told;     /* a library told who set its launches' pace (DEV_REC_*) */
	/* the windows' launching threads' runs corrected, those whose records told who set the
	 * pace, and their launches' first kernels that started as launched, and queued */
	uint64_t runs, paced_runs, paced_free, paced_queued;
	uint64_t measured_recs;	  /* records of the cost measurement's launches: counted once */
	uint64_t remeasured_recs; /* ... of its measurements again: not counted (the windows cover them) */
	uint64_t measured_kernels, measured_kernel_ns; /* ... its kernels */
	uint32_t names_wanted;			       /* callbacks on between windows: launch handles to name */
	bool named_tick;			       /* the last tick that drained launches named them all */
	uint64_t unnamed_seen, launches_seen, naming_ticks;
	/* gpubpf's launch probes' state for the libraries (cupti__launch_probes): the
	 * window thread and the detaches' threads write it, the main thread too (write_part) */
	pthread_mutex_t probe_lock;
	uint32_t probe_gen; /* dev_config.probe_gen */
	uint32_t probe_sw;  /* switches so far */
	bool probes_on;	    /* attached (the last attach returned, no detach since) */
	int probes_pending; /* attaches not returned and detaches not closed yet */
	struct {
		uint32_t tgid;
		uint64_t addr;
	} probe_to[CPT_PROBE_TARGETS]; /* the configs to tell (addr 0: free) */
};

/* ---- cupti.c ---- */

const char *cpt_get_str(const struct hmap *m, uint64_t a, uint64_t b, uint64_t c);
const char *cpt_dir_frame(uint32_t dir);

/* ---- cupti_cost.c ---- */

/* What CUPTI's activity added to a launch on an H100 (1.2-1.5 us on 4.0-4.8 us,
 * tests/workloads/cuda/cupti_cost): the least the windows are planned for. */
#define DEV_ACT_FLOOR_S 1.2e-6
/* What being subscribed and called back (CUPTI's own work, enter and exit) added to a
 * launch there: 0.15-0.3 us and 0.4-1.4 us more (cupti_cost's "subscribed" and
 * "callbacks"). Both halves of the measurement have it, the job between windows has not,
 * and no callback can time it. The library times CUPTI's dispatch of a driver call's
 * callbacks on its watcher and scales it by the callbacks a launch call met
 * (dev_costs.dispatch_ns); the subscription's is taken at its low end. A launch's dispatch
 * carries more than that call's (its kernel's name): the H100's low end of both together
 * is the least taken. Uncertain by DEV_CB_DISPATCH_SPREAD_S (est_run_delay takes the
 * uncertain part from 0.5 to 2.5 times). */
#define DEV_CB_DISPATCH_S 0.6e-6
#define DEV_SUBSCRIBED_S 0.15e-6
#define DEV_CB_DISPATCH_SPREAD_S 0.2e-6

/* CUPTI's dispatch to the callbacks of a launch call and the subscription, seconds, by
 * measurement K: the one timed in the job, the H100's low end at least. */
double cpt_dispatch_s(const struct dev_costs *k);
/* T's library measured its cost again (dev_costs.measures): kept, the one taken chosen. */
void cpt_note_measure(struct cpt_wtarget *t);
/* When T's library is to measure its cost again (dev_config.remeasure_ms). */
uint32_t cpt_remeasure_of(const struct cupti_tracer *c, const struct cpt_wtarget *t);
/* What device time costs a launch in T (*COST, seconds: c) and the launch call without it
 * (*BASE); false until its cost was measured. */
bool cpt_launch_cost(const struct cpt_wtarget *t, double *cost, double *base);

/* ---- cupti_win.c ---- */

/* The library in TGID attached; its config is at ADDR: gpubpf's part is written. */
void cpt_win_attached(struct cupti_tracer *c, uint32_t tgid, uint64_t addr);
/* Every tick, before the drain: the libraries' costs and windows in, the duty out. */
void cpt_win_tick(struct cupti_tracer *c);
/* Window ID of TGID: its weight and *PERIOD, and in *D the correction for the launches of
 * thread TID that CUPTI's cost pushed past its end; 0 when it is not known (yet). */
double cpt_win_weight(struct cupti_tracer *c, uint32_t tgid, uint32_t tid, uint32_t id, uint64_t *period,
		      struct est_delay *d);
/* A drained entry of a window of PERIOD at weight W and correction D: N records, VALUES
 * (kernels, kernel ns, copy ns) into the estimates. */
void cpt_win_add(struct cupti_tracer *c, uint64_t period, double w, const struct est_delay *d, double n,
		 const double values[3]);
/* ---- cupti_notes.c ---- */

/* The profile's "gpu cost:", "gpu correction:" and "gpu estimate:" comments. */
void cpt_win_comments(struct cupti_tracer *c, double elapsed);

/* ---- cupti_drain.c ---- */

/* Device time's estimates of the whole recording, kernels (*K) and their ns (*T): the
 * windows' records weighed, the cost measurement's kernels counted once. */
void cpt_win_totals(struct cupti_tracer *c, struct est_total *k, struct est_total *t);

/* TGID's objects changed: the ranges its device samples' stacks are trimmed by, read now
 * (cupti_drain.c). */
void cpt_ranges_refresh(struct cupti_tracer *c, uint32_t tgid);

#endif /* GPUBPF_CUPTI_INT_H */
