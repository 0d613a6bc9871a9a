/* SPDX-License-Identifier: MIT */
/* Shared between the injection library (userspace/inject/), bpf/cupti.bpf.c and
 * userspace/trace/cupti.c: the layout of what the library hands to its USDT probes. __u32/__u64
 * only; every field is read from the target's memory and validated before use. */
#ifndef GPUBPF_CUPTI_H
#define GPUBPF_CUPTI_H

#ifndef __VMLINUX_H__
#include <linux/types.h> /* BPF code gets these from vmlinux.h */
#endif

/* USDT provider and probes of libgpubpf_inject.so (provider "gpubpf"):
 *   launch(corr, cbinfo, win)  API callback of a followed launch/copy, on the launching
 *                              thread; win: its device-time window (struct dev_win id), 0 none
 *   records(batch)             one completed batch (struct dev_batch) of sampled activity
 *   name(id, str)              a kernel or API function name, once per name and attach
 *   kname(handle, str)         the kernel a launch handle stands for (CUPTI's symbolName),
 *                              once per handle and attach
 *   status(code, text, cfg)    the library's state changed (enum dev_status); cfg: its config
 *   windows(id, k)             a device-time window opened; attached by a session that wants
 *                              device time in windows, which the library reads off its
 *                              semaphore when it attaches
 * Each has a semaphore (gpubpf_<probe>_semaphore): the kernel counts attached uprobes in it,
 * and the library is attached exactly while launch's and records' are non-zero. */
#define DEV_PROVIDER "gpubpf"

/* cbinfo of launch(): CUPTI callback domain << 16 | callback id. */
#define DEV_CBINFO(domain, cbid) (((__u32)(domain) << 16) | ((__u32)(cbid)&0xffff))
#define DEV_CBINFO_DOMAIN(x) ((__u32)(x) >> 16)
#define DEV_CBINFO_CBID(x) ((__u32)(x)&0xffff)

/* name() ids: kernel names count up from 1; API function names are DEV_NAME_API | cbinfo. */
#define DEV_NAME_API 0x80000000u
/* Kernel names run to kilobytes mangled: read whole, sent at their length. */
#define DEV_NAME_MAX 4096

enum dev_kind {
	DEV_KERNEL = 1,
	DEV_MEMCPY = 2,
	DEV_MEMSET = 3,
};

/* Copy directions, as bpf/cuda.h's CUDA_DIR_* (so both tracers name copies alike). */
#define DEV_DIR_HTOH 0
#define DEV_DIR_HTOD 1
#define DEV_DIR_DTOH 2
#define DEV_DIR_DTOD 3
#define DEV_DIR_OTHER 4 /* arrays, unknown: "[memcpy default]" */
#define DEV_DIR_MEMSET 5

/* One completed device activity, compact and fixed-size (CUPTI's own records are
 * versioned and variable: the library converts). Times are CLOCK_MONOTONIC ns: the
 * library converts CUPTI's timestamps, so device work lines up with the CPU's. */
struct dev_rec {
	__u64 start;
	__u64 end;
	__u64 bytes;   /* copies and memsets */
	__u32 corr;    /* CUPTI correlation id of the API call that launched it */
	__u32 kind;    /* enum dev_kind */
	__u32 name_id; /* kernels: id announced by name(); 0 unknown */
	__u32 device;
	__u32 stream;	/* CUPTI stream id */
	__u32 graph_id; /* 0: not part of a graph launch */
	__u32 dir;	/* copies: DEV_DIR_* */
	__u32 pace;	/* DEV_REC_*: whether the device set its launch's pace */
};
/* A launch's first record on its stream (a graph's or a library's launch may make several)
 * is told as paced by its launch (DEV_REC_PACED alone: its stream had nothing left to run
 * when it started, so a later launch would have started it later) or by the device
 * (DEV_REC_PACED | DEV_REC_QUEUED: it started as the one before it on the stream ended,
 * within DEV_QUEUED_GAP_NS, so a later launch, up to what it waited, would not have). 0:
 * not told (not a launch's first record, or from a library that does not tell). */
#define DEV_REC_PACED 1u
#define DEV_REC_QUEUED 2u
#define DEV_QUEUED_GAP_NS 1000

#define DEV_BATCH_MAGIC 0x67627062u /* "gbpb" */
#define DEV_BATCH_VERSION 1
/* Records per records() probe: BPF reads them in a bounded loop. */
#define DEV_BATCH_MAX 4096

/* Counters are cumulative since the library started; gpubpf differences them. */
struct dev_counters {
	__u64 launches_seen;	/* launch API calls while attached (kernels and graphs) */
	__u64 launches_sampled; /* ... of which followed */
	__u64 copies_seen;	/* copy and memset API calls while attached */
	__u64 copies_sampled;
	__u64 dropped_unsampled; /* activity records of launches that were not followed */
	__u64 lost;		 /* records CUPTI dropped (no buffer) or the batch had no room for */
};

struct dev_batch {
	__u32 magic;
	__u32 version;
	__u32 count;
	__u32 epoch; /* attach generation: names are announced again in each */
	struct dev_counters ctr;
	struct dev_rec recs[];
};

enum dev_status {
	DEV_ST_IDLE = 0,
	DEV_ST_ATTACHED = 1,	     /* subscribed, activity enabled */
	DEV_ST_OTHER_SUBSCRIBER = 2, /* another CUPTI client is present: stays idle */
	DEV_ST_NO_CUPTI = 3,	     /* libcupti could not be loaded or lacks a function */
	DEV_ST_CUPTI_ERROR = 4,	     /* a CUPTI call failed */
	DEV_ST_SYNTHETIC = 5,	     /* test mode: attached without CUPTI (tests/workloads/inject) */
};

/* Device time in windows (issue 13): CUPTI's activity, once on, costs every launch
 * whether it is followed or not, so under a budget the library turns activity and its
 * callbacks on only in windows, one a period, its slot drawn at random (as the probe
 * groups' windows, userspace/trace/estimate.h): the period is cut into k slots and one
 * is drawn, so every instant is observed with probability 1/k and a record of a launch in
 * that window counts k. gpubpf plans the duty with its governor, from the cost per launch
 * the library measured in the job at attach (struct dev_costs), and writes it into the
 * config; the library runs the windows on its watcher thread and keeps their books in
 * the config's ring, which gpubpf reads every tick. */
#define DEV_WIN_RING 64
#define DEV_EVERY_MAX 64   /* a window every this many of gpubpf's periods at most */
#define DEV_MODE_ALWAYS 0  /* follow while attached (exact, and the library's default) */
#define DEV_MODE_WINDOWS 1 /* measure the cost, then activity and callbacks only in windows */

/* launch()'s win of the driver call inside a followed runtime call (not counted again) */
#define DEV_WIN_NESTED 0x80000000u
/* launch()'s win while the cost is measured: the probe's cost is part of what is timed, and
 * these launches' records are not counted (no window's weight is theirs) */
#define DEV_WIN_MEASURE 0x7fffffffu
/* ... while it is measured again, or tried again after DEV_COST_IDLE, once the windows'
 * periods have begun: they cover that time already, and its records are not counted again */
#define DEV_WIN_REMEASURE 0x7ffffffeu

/* A thread's launches in a device-time window (BPF, per (tgid, tid, window)): a thread
 * that launches again as soon as it can makes fewer launches while CUPTI slows each one,
 * and the window would under-count it; the launches pushed past the window's end are
 * added back (estimate.h's est_run_delay) from its run since it last slept. */
#define DEV_RUN_GAP_NS 200000 /* a thread that slept this long between launches made its delay up */
struct dev_run_key {
	__u32 tgid;
	__u32 tid;
	__u32 window;
	__u32 pad;
};

struct dev_run {
	__u32 n;	 /* outermost launch and copy calls followed in the window */
	__u32 run_n;	 /* ... since the thread last slept (DEV_RUN_GAP_NS and a voluntary switch) */
	__u64 nvcsw;	 /* its voluntary context switches at the last one */
	__u64 run_start; /* bpf_ktime_get_ns() of the run's first */
	__u64 last;	 /* ... and of the last */
	__u64 wait0;	 /* sched_info.run_delay at the run's first ... */
	__u64 run_wait;	 /* ... and what it grew by up to the last: turns lost to other threads */
	__u32 free;	 /* its launches' first records told paced by the launch (DEV_REC_*) */
	__u32 queued;	 /* ... by the device */
};

/* One window as the library ran it, at ring[id % DEV_WIN_RING]. */
struct dev_win {
	__u32 id;	 /* 1, 2, ... per attach; 0: empty */
	__u32 k;	 /* slots its period was cut into: observed with probability 1/k; times the
			  * periods before it that had no window (the cost measured again), which it
			  * stands in for */
	__u64 period;	 /* its period: slot_open / period_ns */
	__u64 slot_open; /* the slot drawn, CLOCK_MONOTONIC ns: a slot that ran past its period's end
			  * goes on from the period's start, in a window of its own (the first) */
	__u64 slot_close;
	__u64 slot_len;	 /* the whole slot's length (its period's over k), in one window or two */
	__u64 open;	 /* when activity and callbacks were on (the watcher wakes late at times) */
	__u64 close;	 /* ... and off again; 0 while open */
	__u64 launches;	 /* launch and copy calls followed in it */
	__u64 switch_ns; /* the watcher's time turning it on and off */
};

/* What device time costs a launch, measured in the job when windows are first asked for:
 * the library times the launch calls (outermost API enter to exit, in its callbacks)
 * while it turns activity on and off every few milliseconds, callbacks on throughout, and
 * follows the launches of the "on" halves as a window would (the launch probe's trap,
 * stack walk and Python frames as they cost in this job). */
struct dev_costs {
	__u32 state;	     /* DEV_COST_* */
	__u32 calls;	     /* launch calls timed, both halves, in all the measurements of this attach */
	__u64 on_ns;	     /* a launch call with activity on and followed (mean of the faster half) */
	__u64 off_ns;	     /* ... with activity off, callbacks on, not followed */
	__u64 callback_ns;   /* the library's own callbacks, per launch call, in the "off" halves */
	__u64 switch_ns;     /* turning activity and callbacks on and off once (the watcher's) */
	__u64 started, done; /* CLOCK_MONOTONIC ns: the measurement's span */
	__u32 probes;	     /* DEV_PROBES_*: the launch probes' state in the calls compared */
	__u32 fixed_us;	     /* one-off: CUPTI's set-up at attach, and each measurement's switches
			      * (set-up, finalize, set-up again), microseconds (0 from an older library) */
	__u32 measures;	     /* measurements that ended DEV_COST_DONE this attach (calls: all of theirs) */
	__u32 idle_why;	     /* the last that ended DEV_COST_IDLE: the phase it ended in (bits 0-1),
			      * the first "off" phase's calls kept (2-15) and the "on" phase's (16-31) */
	__u32 pair_ns;	     /* CUPTI's own work to call back one driver call, enter and exit: the
			      * watcher's cuCtxGetCurrent timed with its callback on against off, once
			      * the job has launched (0: not measured) */
	__u32 dispatch_ns;   /* ... times the callback pairs a launch call met in the "off" halves:
			      * what CUPTI's dispatch adds to a launch call, which no callback can
			      * time and both halves have (0: not measured) */
};
#define DEV_PROBES_OUT 0   /* all out */
#define DEV_PROBES_IN 1	   /* all in */
#define DEV_PROBES_MIXED 2 /* too few calls of one state in each half: all compared */
#define DEV_COST_NONE 0
#define DEV_COST_MEASURING 1
#define DEV_COST_DONE 2
#define DEV_COST_IDLE 3 /* too few launches to time: windows run at the planned duty, measured again later */

#define DEV_PROBE_GEN_OUT 0	  /* dev_config.probe_gen & 3: all out */
#define DEV_PROBE_GEN_SWITCHING 1 /* going in or out */
#define DEV_PROBE_GEN_IN 2	  /* all in */

/* The library's sampling settings, at the address status() passes; gpubpf writes the part
 * before `written` (process_vm_writev) while attached and reads the rest every tick. */
#define DEV_CONFIG_MAGIC 0x67626366u /* "gbcf" */
#define DEV_CONFIG_VERSION 7
struct dev_config {
	__u32 magic;
	__u32 version;
	__u32 max_rate;	    /* DEV_MODE_ALWAYS: followed launches+copies per second; 0: every one */
	__u32 names_wanted; /* DEV_MODE_WINDOWS: callbacks on between windows too (activity off,
			     * nothing followed), so that launch handles get named */
	__u32 period_ms;    /* DEV_MODE_WINDOWS: one window per period */
	__u32 seq;	    /* bumped by each write */
	__u32 mode;	    /* DEV_MODE_* */
	__u32 duty_ppm;	    /* DEV_MODE_WINDOWS: the planned duty, parts per million (0: none yet) */
	__u32 every;	    /* DEV_MODE_WINDOWS: the windows' period is EVERY periods (0 or 1: one),
			     * where a window's set-up and teardown cost more than a period affords */
	__u32 probe_gen;    /* gpubpf's launch probes (uprobes in the job's launch calls): their
			     * switches so far times 4 plus DEV_PROBE_GEN_* (their state). The
			     * cost measurement compares launch calls of one state, none that
			     * spans a switch. */
	__u32 remeasure_ms; /* DEV_MODE_WINDOWS: the cost is measured again this long after its
			     * last measurement, after a window (0: once per attach) */
	/* the library's part */
	__u32 written;	/* end of gpubpf's part */
	__u32 win_next; /* the id of the next window */
	struct dev_costs cost;
	struct dev_win win[DEV_WIN_RING];
};
#define DEV_CONFIG_GPUBPF_PART 44 /* offsetof(struct dev_config, written) */

/* BPF -> userspace ring buffer events (rare: names and status changes). */
enum dev_event_type {
	DEV_EV_NAME = 1,
	DEV_EV_STATUS = 2,
	DEV_EV_KNAME = 3, /* addr: a launch handle; text: its kernel's (mangled) name */
};

struct dev_event {
	__u32 type;
	__u32 tgid;
	__u32 id; /* name id, or status code */
	__u32 pad;
	__u64 addr; /* status: address of the library's struct dev_config */
	char text[DEV_NAME_MAX];
};

/* --trace: every launch and every record goes to userspace as well (ring buffer
 * dev_trace), for device tracks with flow arrows from the launching call. */
enum dev_trace_type {
	DEV_TR_LAUNCH = 1, /* a followed launch: tgid, tid, corr, cbinfo, ts */
	DEV_TR_RECORD = 2, /* a device record: tgid, tid (of its launch, 0 unknown), corr, rec */
};

struct dev_trace_ev {
	__u32 type;
	__u32 tgid;
	__u32 tid;
	__u32 cbinfo;
	__u64 ts; /* launch: bpf_ktime_get_ns() (CLOCK_MONOTONIC) inside the API call */
	struct dev_rec rec;
};

/* In-kernel aggregation of joined records, double-buffered like the other tracers. */
struct dev_key {
	__u32 tgid;
	__u32 tid;
	__s32 ustack;  /* id in launch_stacks (not double-buffered: records arrive late) */
	__u32 cbinfo;  /* launching API function */
	__u32 kind;    /* enum dev_kind */
	__u32 name_id; /* kernels */
	__u32 dir;     /* copies */
	__u32 device;
	__u32 stream;
	__u32 graph_id;
	__s32 pystack; /* the launch's Python frames (bpf/python.bpf.h), or -1 */
	__u32 names;   /* the launching thread's names then (struct comm_key) */
	__u32 window;  /* the device-time window of its launch (struct dev_win id), 0: none */
};

struct dev_val {
	__u64 ns;    /* device time, end - start */
	__u64 count; /* records */
	__u64 bytes;
};

/* Per target: the latest counters a batch carried. */
struct dev_proc {
	struct dev_counters ctr;
	__u64 batches;
	__u64 records;	/* records read */
	__u64 unjoined; /* records whose launch stack was not (or no longer) known */
	__u64 invalid;	/* records with a bad kind, or batches with a bad header */
	__u64 free;	/* followed launches' first records told paced by the launch (DEV_REC_*) */
	__u64 queued;	/* ... by the device */
};

/* What the launch probe left for the records to find. */
struct dev_launch_key {
	__u32 tgid;
	__u32 corr;
};

struct dev_launch {
	__u32 tid;
	__s32 ustack;
	__u32 cbinfo;
	__s32 pystack; /* -1: none */
	__u32 names;
	__u32 window; /* struct dev_win id, 0: not windowed */
};

#endif /* GPUBPF_CUPTI_H */
