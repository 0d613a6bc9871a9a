/* SPDX-License-Identifier: MIT */
/* gpubpf's own CPU time, and what of it the targets paid.
 *
 * gpubpf's threads (start-up's symbolization and probe attaches, the drains, the window
 * thread) run beside the job. Where a CPU gpubpf may run on is idle, the scheduler puts
 * them there and the job loses nothing; where none is (a job whose threads fill the
 * machine, or other work beside it), gpubpf's time is taken from what was running. Each
 * look (the engine's tick) reads gpubpf's own CPU time (getrusage) and the CPUs' idle and
 * busy time (/proc/stat, over the CPUs gpubpf may run on): of its time G since the last
 * look, what the CPUs' idle time I could not have held, max(0, G - I), was displaced.
 * Which thread it was taken from is the scheduler's choice. Its fair shares take from
 * each thread its part: displaced * its CPU time over everything else's. That is the
 * estimate for the busiest thread (one that could run all the time), a share of its time
 * over the recording, a part of the estimated overhead like the probes', and repaid from
 * the budget. Its range goes up to all of it: gpubpf's threads are woken by the targets'
 * probes, and a woken thread tends to run on its waker's CPU. In `launch_loop --busy 1` (a
 * launching thread and a spinning one on 2 CPUs) the launching thread's wait for a CPU
 * (the kernel's schedstat) rose by 0.34 to 0.96 of what was displaced, where the fair share
 * is about a half; in a job of a launching thread and one mapping memory, both threads'
 * waits rose alike. Coarse by design (a look a second, ticks of 10 ms): a job full
 * in one half of a second and idle in the other reads as half full. */
#ifndef GPUBPF_OWNCPU_H
#define GPUBPF_OWNCPU_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* The calling thread's CPU time (ns; 0 where unknown): what a piece of gpubpf's own work
 * took of it (a window's, governor.h's own_window). */
static inline uint64_t owncpu_thread_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One look: seconds each. */
struct owncpu_snap {
	double t;    /* CLOCK_MONOTONIC */
	double self; /* gpubpf's CPU time, all its threads */
	double busy; /* the CPUs' busy time (user, nice, system, irq, softirq), gpubpf's included */
	double idle; /* the CPUs' idle and iowait time */
};

struct owncpu {
	bool have;		 /* LAST is a look */
	bool failed;		 /* /proc/stat could not be read: nothing is counted */
	int ncpus;		 /* CPUs looked at (gpubpf's affinity) */
	unsigned char mask[128]; /* bit N: CPU N (up to 1024 CPUs) */
	struct owncpu_snap last;
	double own;		/* gpubpf's CPU seconds between the first look and the last */
	double displaced;	/* ... of it that no idle CPU could have held: what the busiest thread
				 * may have lost, at most */
	double fair;		/* ... a thread's fair share of that, where it could run all the time */
	double span;		/* seconds between the first look and the last */
	double setup;		/* gpubpf's CPU seconds before the first look: its set-up (BPF, the
				 * calibrations), beside the job where it attached to a running one */
	double setup_displaced; /* ... of it that no idle CPU could have held (owncpu__mark) */
	bool beside;		/* ... and the targets ran meanwhile: in displaced and fair */
	double after;		/* gpubpf's CPU seconds after the last look, symbolizing the profile
				 * (owncpu__after; the write that follows is not in it) */
	double after_displaced; /* ... of it that no idle CPU could have held */
	bool after_beside;	/* ... and the targets ran on: in displaced and fair */
	bool have_after;	/* AFTER was looked at */
};

/* A look at gpubpf's start, before its set-up (BPF, BTF, the calibrations: 0.2-0.3 s of
 * CPU): what of that no idle CPU could have held is known at the next owncpu__start
 * (the first only: a later recording's set-up is not measured). */
void owncpu__mark(void);

/* The first look: which CPUs gpubpf may run on, and where they stand now. BESIDE: the
 * targets ran during gpubpf's set-up (-p, -a, the agent; a started command is held): what
 * the set-up displaced since owncpu__mark is counted as the recording's. */
void owncpu__start(struct owncpu *o, bool beside);

/* Pure arithmetic of the set-up's part (unit-tested): O's first look against MARK. */
void owncpu__add_setup(struct owncpu *o, const struct owncpu_snap *mark, bool beside);

/* A look once the recording's numbers are fixed and its profile symbolized (kernel symbols,
 * every object's: 60 ms for a small job here, most of it /proc/kallsyms), before the
 * comments are written: what that took is set apart from the recording's. BESIDE: the
 * targets may still run (they did not all exit): what it displaced is counted with the
 * rest, like the set-up's. */
void owncpu__after(struct owncpu *o, bool beside);

/* Pure arithmetic of owncpu__after's part (unit-tested): S against O's last look. */
void owncpu__add_after(struct owncpu *o, const struct owncpu_snap *s, bool beside);

/* Another look: what gpubpf ran since the last one, and what it displaced. */
void owncpu__look(struct owncpu *o);

/* Pure arithmetic of a look (unit-tested): S against the last one. */
void owncpu__add(struct owncpu *o, const struct owncpu_snap *s);

/* The CPU lines of /proc/stat's TEXT summed over O's CPUs into S's busy and idle (seconds,
 * at TICK seconds a unit). 0, or -EINVAL where no CPU line of O's was found. */
int owncpu__parse(const struct owncpu *o, const char *text, double tick, struct owncpu_snap *s);

/* What the busiest thread lost as a share of its time over ELAPSED seconds (0 when nothing
 * was seen): its fair share of what was displaced; HI (may be NULL) all of it. */
double owncpu__share(const struct owncpu *o, double elapsed, double *hi);

/* "gpubpf's own CPU ..." for the profile's comments and -v: what it ran, what it displaced,
 * what that cost a thread. */
void owncpu__text(const struct owncpu *o, double elapsed, char *buf, unsigned long len);

#endif /* GPUBPF_OWNCPU_H */
