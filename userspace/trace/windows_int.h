/* SPDX-License-Identifier: MIT */
/* The sampling windows' insides, shared by their files: windows.c (the window thread,
 * the drains' side) and windows_report.c (the estimates, costs and duty cycles said in
 * the profile and the summary). windows.h is the contract. */
#ifndef GPUBPF_WINDOWS_INT_H
#define GPUBPF_WINDOWS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cuda.h"
#include "estimate.h"
#include "governor.h"
#include "hmap.h"
#include "windows.h"

/* FIRST_MEASURE is short: before anything is known of a group, its first window sees every
 * call pay; 30 ms of a launch loop took 8-12 ms of the period's 9 ms share. */
#define WIN_RING 8192	   /* windows whose books are kept (seconds of them, drains look back one) */
#define WIN_THREADS 64	   /* threads per window with their own delay correction */
#define GUARD_S 0.05	   /* the guard looks at least this often */
#define FIRST_MEASURE 0.01 /* a group's first window, before anything is known of it (above) */
#define MIN_SLOT 0.002	   /* the shortest window worth opening */
#define PIECES_MAX 3	   /* a cut window's rest in two pieces, its slot's second */
#define LATE_S 0.0005	   /* a window opened later than this after its slot began is late */
#define AHEAD_S 0.0002	   /* a window's gate is written this early, its bounds exact ... */
#define AHEAD_HITS 2	   /* ... at most as early as this many of its group's calls take */
#define INSERT_S 0.0004	   /* warmed probes' breakpoints go in this early ... */
#define INSERT_HITS 4	   /* ... at most as early as this many calls take (windows_ahead) */
#define INSERT_MAX 0.002   /* a paced group's: at least their attach's time (at most this) ... */
#define SETTLE_X 3	   /* ... and this many times it more, times how paced (windows_ahead) */
#define LEAD_N 9	   /* attaches the lead is the median of */
#define FLOOR_WARN 1.25	   /* the plan this many times the budget, held up by its floors: warned of */
/* A window's own sign of a device's pace (gstate.paced) weighs this much less in each of
 * the group's windows after it */
#define PACED_DECAY 0.9

struct wthread {
	uint32_t tid;
	float f, lo, hi; /* its delay correction (struct est_delay) */
	float walked;	 /* its calls over those that did their work (bare_every; >= 1) */
	bool paced;	 /* a device's queue surely paced it (its delay's share surely below 1) */
};

/* The books of one window. */
struct wrec {
	uint32_t id; /* 0: free */
	int group;
	size_t period;
	double weight;		      /* 1 / the probability of its instants, by design */
	double planned;		      /* the slot's length */
	double open;		      /* the gate opened: calls count from here */
	double close;		      /* ... and closed */
	double bound;		      /* the gate's end, written with it: calls count until then at most */
	double slip_open, slip_close; /* > 0: the gate's store landed up to this late (windows_gate.c) */
	bool cut;		      /* the guard or the end of the recording cut it short */
	bool final;		      /* its books are closed */
	double w_eff;		      /* the weight, for its realized length */
	int nthr;
	struct wthread thr[WIN_THREADS];
};

/* A group's plan in the current segment. Probes go in a little before a window opens
 * (attaching takes time) and come out a little after it closes (calls in flight return),
 * counting nothing then: a window is exactly the time its gate (window_id, and its bounds)
 * is open. */
struct gstate {
	bool windowed;
	struct est_segment seg;
	double wopen, wclose; /* the slot drawn: its piece to come next */
	double slot_len;      /* > 0: the slot's length, when its window was moved (late) */
	double weight;
	/* Pieces still to come after it, in time order: a slot that ran past its segment's
	 * end goes on from the start (est_place), and the rest of a window the guard cut is
	 * sampled before what is left of its slot. */
	struct piece {
		double open, close, weight;
	} after[PIECES_MAX];
	int nafter;
	bool attached;	     /* the probes are in */
	bool warmed;	     /* the kernel warmed for the attach at the slot's start (cuda__warm) */
	bool pending;	     /* the slot drawn is still to come */
	bool first;	     /* the first, measuring window */
	int stratum, strata; /* the part of the period planned, of how many (governor's strata) */
	double rate;	     /* its calls a second in its last windows, all threads' */
	bool called;	     /* its last window had calls (not the job's start, nor after an idle phase) */
	double paced;	     /* 0-1: how much a device's queue paced its threads lately (1 - the
			      * share of a delay that pushes their calls out, est_response) */
	double paced_seen;   /* ... the most a window's own gaps said of late (est_response_paced),
			      * down by PACED_DECAY a window */
	double ready;	     /* its probes went in, and a thread so paced caught up on their
			      * stall, by then: the gate opens no earlier */
	double owed;	     /* seconds of segments whose window never opened (the thread woke too
			      * late), at weight 1: the next window stands in for them */
	double detach_at;    /* > 0: detach once calls in flight have returned */
	double idle_since;   /* > 0: its probes in with no window open since then */
	struct wrec *cur;
	double look_t;
	uint64_t look_hits;
};

struct windows {
	struct cuda_tracer *c;
	struct governor *gv; /* the caller's: written under lock */
	double period, lead; /* lead: attach this early (LEAD_N's last attaches' median, and more) */
	double took[LEAD_N]; /* how long the last attaches took, a ring */
	unsigned ntook;
	double ins[LEAD_N]; /* how long the last warmed attaches (the breakpoints) took */
	unsigned nins;
	double insert;	      /* their median and 0.1 ms: warmed probes go in this much earlier */
	pthread_mutex_t lock; /* the books, the estimates, gv */
	pthread_t thread;
	bool running;
	int stop_fd; /* eventfd: stop */
	struct ring_buffer *rb;
	_Atomic int woken;
	double start, stop_t, period_start;
	size_t pi; /* the current period */
	uint32_t next_id;
	struct wrec *ring;
	struct gstate gs[CG__COUNT];
	struct est_group est[CG__COUNT];
	struct hmap tcost;		     /* (tid) -> ns the thread spent in probes and window switches */
	struct hmap ttraps;		     /* (tid) -> ns of its traps, at their calibrated cost */
	struct hmap tmark;		     /* (tid) -> its tcost when the last period ended */
	struct hmap tclosed;		     /* (tid, group, 0/1) -> its struct cuda_tclosed's cost_ns/traps_ns read;
					      * (tid, CG__COUNT, 2) -> ns the thread paid so, in tcost too */
	struct est_traps traps;		     /* the traps' cost timed in the job, pooled */
	struct est_response resp[CG__COUNT]; /* whether the delay pushes calls out: lately ... */
	struct est_response resp_all[CG__COUNT]; /* ... and over the recording */
	bool stalls;				 /* ... asked of the job by stalls (cuda__set_stall) */
	/* the device's records: launches' first kernels that started as launched, and that
	 * waited ([0], [1]), lately (about EST_PACE_MEMORY of them) and over the recording */
	double pace[2], pace_all[2];
	struct est_bare bare[CG__COUNT]; /* what a call's work costs the job, by bare calls */
	unsigned bare_every;		 /* ... one in this many in a window (0: none) */
	uint64_t windows, cuts;
	uint64_t own_ns;	    /* gpubpf's CPU in the window thread's windows work (the governor's own_window) */
	uint64_t late, moved;	    /* windows opened late (> LATE_S), moved past their slot */
	uint64_t slips;		    /* gate bounds whose store may have landed after them ... */
	double slip_max;	    /* ... by at most this much */
	uint64_t missed;	    /* segments with no window, stood in for by the next (owed) */
	double late_s;		    /* how late those opened, in all */
	double idle_max[CG__COUNT]; /* per group: the longest its probes were in with no window open */
	unsigned short xsubi[3];
	bool no_estimates; /* the agent: no per-period estimates kept (windows__no_estimates) */
	bool warned_floor; /* said that the budget is below the plan's floors */
	double once_dev;   /* seconds device time spent once (windows__set_once) */
	double once_own;   /* ... and gpubpf's own CPU took from a thread (windows__set_own) */
};

/* CLOCK_MONOTONIC in seconds: the clock of the windows, their gates and the books. */
double windows_now(void);

/* Window R of group G just closed (its gate first; under w->lock): its threads' delay
 * corrections into R, what they paid into the books (tcost, ttraps), and for the
 * governor its busiest thread's probe time and the part of the window from that thread's
 * first hit (SPAN, seconds), all threads' probe time and their hits, and the busiest
 * thread's probe time with no window open since the last window (windows_books.c). */
void windows_read_threads(struct windows *w, int g, struct wrec *r, double *busiest, double *span, double *all,
			  double *hits, double *closed);

/* The most any thread paid in probes and window switches since the last call (the
 * period that just ended), in seconds (under w->lock; windows_books.c). */
double windows_period_spent(struct windows *w);

/* Group G's window for SEG at duty D (FIRST: the group's measuring window), drawn at
 * random; KEEP: the pieces still to come stay after it (the guard's rest of a cut window;
 * windows_plan.c). */
void windows_plan(struct windows *w, int g, struct est_segment seg, double d, bool first, bool keep);

/* An attach took TOOK seconds: the lead for the next ones (windows_plan.c). WARMED: the
 * kernel was warmed for it, and TOOK was the breakpoints going in. */
void windows_note_took(struct windows *w, double took, bool warmed);

/* How early before S's window its gate is written, or (INSERT) its warmed probes go in.
 * Putting breakpoints in stalls the job for a moment (50-300 us here): just before a
 * window it pushed a steady loop's tick into it (+25% in those windows), and a thread's
 * wake-up a little late met the tick where the CPU was busy with it. Ahead, the job has
 * caught up and the gate's bounds are exact. But each call in that time pays its trap
 * and counts nowhere: a group whose calls come fast (a launch-bound loop's 200k a second
 * paid 120 traps a window) goes no earlier than a few of its calls, and a stall before
 * a busy thread's window only moves all its calls later, not in or out of it. The
 * breakpoints take 0.3-0.5 ms to go in here (W->insert), 10 calls' time of a
 * launch-bound loop, and where they went in later the gate opened late, in the stall
 * they cause: a thread that paces itself only resumes its pace then, but one its
 * device paces made up there, inside the window, the calls the stall held back (+13% in
 * 2 ms windows). For a group so paced (S->paced) they go in that long and SETTLE_X times
 * that more ahead, times how paced: its thread's traps then come out of its waits on
 * the device, not out of the job. For the launch-bound loop the lead of W->insert had
 * cost its bench row 1.019 against 1.009. */
double windows_ahead(const struct windows *w, const struct gstate *s, bool insert);

/* The next piece to come, if any, becomes the one pending. */
bool windows_next_piece(struct gstate *s);

/* Segments whose window never opened (S->owed): WEIGHT, and the rest of the slot's, stand
 * in for them too. */
void windows_stand_in(struct gstate *s, double *weight);

/* The window planned for S's segment never opened (the thread woke after the segment, or
 * after the period, ended: a warm-up of 20 ms was seen, past parts of 25 ms): the next
 * window stands in for that time, as one moved past its slot does for its slot (lost, it
 * made the estimate 25% low with 8 parts a 0.2 s period). The next piece, if any, is
 * pending then. Probes put in for it come out from T, as after a window (maybe_detach):
 * left in, every call paid its trap and counted nowhere until the group's next window
 * closed, up to a period later (67% of a launch loop's time on a loaded CI host). */
void windows_miss(struct windows *w, struct gstate *s, double t);

/* Part I of the current period's STRATA equal parts (the last ends with the period). */
struct est_segment windows_stratum(const struct windows *w, int i, int strata);

/* Window R of group G opens at AT, or AHEAD_S after now if that is later: its id and
 * bounds written (windows_gate.c). Returns the time it opens, exactly: calls before it
 * count in no window, unless R->slip_open says the store landed late. */
double windows_gate_open(struct windows *w, int g, struct wrec *r, double at);

/* Window R of group G closes at its bound, or AHEAD_S after now if that is sooner (the
 * thread waits for it); its id off then. Returns the time it closed, exactly, unless
 * R->slip_close says otherwise. */
double windows_gate_close(struct windows *w, int g, struct wrec *r);

/* The budget is well below the plan's floors: said once, with what to change (under
 * w->lock; windows_report.c). */
void windows_warn_floored(struct windows *w);

#endif /* GPUBPF_WINDOWS_INT_H */
