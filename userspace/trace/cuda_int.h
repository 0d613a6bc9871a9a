/* SPDX-License-Identifier: MIT */
/* The CUDA tracer's insides, shared by cuda.c (finding entry points, draining, naming) and
 * cuda_probes.c (attaching probe groups in windows, calibration). Not for other files. */
#ifndef GPUBPF_CUDA_INT_H
#define GPUBPF_CUDA_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cuda.h"
#include "cuda.skel.h"
#include "hmap.h"
#include "links.h"
#include "stacks.h"

/* A drained call whose window's books were not closed yet: kept, stack and all, until
 * they are (its weight depends on how the window ended). */
struct cuda_staged {
	struct cuda_key key;
	struct cuda_val val;
	int n, trunc;
	uint64_t ips[STACKS_MAX_DEPTH];
};

struct cuda_tracer {
	struct session *s;
	struct cuda_bpf *skel;
	struct linkset links; /* single uprobes (kernels without uprobe_multi) */
	bool multi;	      /* uprobe_multi links per object and group, rather than single uprobes */
	/* objs and group_on are shared with the window thread (windows.c): under lock */
	pthread_mutex_t lock;
	struct cobj **objs;
	size_t nobjs, capobjs;
	bool group_on[CG__COUNT];		 /* groups currently attached */
	void (*on_launch)(void *arg, int event); /* cuda__on_launch_probes */
	void *on_launch_arg;
	_Atomic int launch_closing;    /* detaches of the launch probes whose OUT is to come */
	_Atomic uint64_t close_cpu_ns; /* gpubpf's CPU in the detaching threads (cuda__close_cpu_ns) */
	struct windows *win;	       /* the sampling windows: weights of drained calls (NULL: exact) */
	struct cuda_staged *staged;
	size_t nstaged, capstaged;
	bool trace; /* --trace: every call timed into `timeline` */
	struct trace *timeline;
	uint64_t trace_dropped; /* events past --max-events */
	size_t trace_calls;	/* calls in the timeline (device events go in too: cupti.c) */
	int probes;
	struct hmap scanned;	  /* (attach pid or 0, dev, inode) -> 1 */
	struct hmap scanned_pids; /* (pid, 0, 4) -> last full scan, CLOCK_MONOTONIC ms */
	struct hmap names;	  /* (tgid, handle, 0) -> char * name (driver functions, kernels) */
	struct hmap kfuncs;	  /* (tgid, CUfunction, 1) -> CUkernel */
	struct hmap rtkernels;	  /* (tgid, cudaKernel_t, 2) -> host stub address */
	struct hmap plain;	  /* (dev, inode, 5) -> 1: objects without CUDA entry points */
	bool warned_attach;	  /* a failure to attach was said once without -v */
	uint64_t warm_off;	  /* a spot of gpubpf's own text, never run, for cuda__warm (0: none) */
	int objects;
	uint64_t calls;
};

/* A probed object of one process (or of all, under -a): its entry points by group, and
 * the uprobe_multi links of the groups attached now. The fd stays open so a group can be
 * attached again through /proc/self/fd at the next window. */
struct cobj {
	int pid;
	int fd;
	char path[32];
	uint32_t cnt[CG__COUNT][2];
	uint64_t *offs[CG__COUNT][2];
	uint64_t *cookies[CG__COUNT][2];
	int link[CG__COUNT][2]; /* -1: detached */
};

static inline double cuda_mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Closing a uprobe link waits for a grace period (~80 ms here): links are closed on a
 * thread of their own, so the window schedule holds. The breakpoints go at the start of
 * close(): the thread stores when it began in *began (CLOCK_MONOTONIC ns), if not NULL. */
struct close_batch {
	_Atomic int64_t *began;
	void (*done)(void *arg, int event); /* called with CUDA_PROBES_OUT once all are closed */
	void *done_arg;
	_Atomic int *pending;	  /* decremented after DONE */
	_Atomic uint64_t *cpu_ns; /* the closing thread's CPU time added (NULL: none) */
	size_t n;
	int fds[];
};
void cuda_close_async(struct close_batch *b);

/* Attach group G's links in object O (those not attached yet). Under c->lock. */
int cuda_group_attach(struct cuda_tracer *c, struct cobj *o, int g);

#endif /* GPUBPF_CUDA_INT_H */
