// SPDX-License-Identifier: GPL-2.0
/* Device-side time from the injection library (userspace/inject/), joined to the CPU
 * stacks that launched it. Two USDT probes carry the data:
 *   launch(corr, cbinfo, win)  on the launching thread, inside the API call: the user
 *                         stack is captured here and kept under (tgid, correlation id),
 *                         with the device-time window it was followed in;
 *   records(batch)        once per batch of completed activity: the records are read
 *                         from the target here, each joined to its launch stack on the
 *                         correlation id, and summed per (stack, kernel, device, stream,
 *                         graph) in the kernel: one trap per batch, none per record.
 * name() and status() are rare and go to userspace through a ring buffer.
 * Everything read from the target is validated: magic, version, bounded counts, kinds. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "regs.bpf.h"
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>

#define EFAULT 14
#define ENOMEM 12
#include "targets.bpf.h"
#include "stacks.h"
#include "stackid.bpf.h"
#include "fpwalk.bpf.h"
#include "python.bpf.h"
#include "cupti.h"

char LICENSE[] SEC("license") = "GPL";

/* Launch stacks outlive the double buffer: records arrive up to a flush period (and a
 * device queue) after their launch, possibly across a drain. Training loops repeat a
 * bounded set of launch stacks, so this map does not grow with the recording. */
DEFINE_STACK_MAP(launch_stacks, 16384);

/* ... and the launch stacks whose bucket there another holds (bpf/stackid.bpf.h) */
DEFINE_STACK_MAP(launch_stacks_ovf, 4096);

/* ... and the launch stacks of the probe's own walk (bpf/fpwalk.bpf.h), most of them */
DEFINE_OWN_STACKS(launch_own, 16384);

/* Sampled launches waiting for their records. LRU: a launch whose records never come
 * (a failed launch) ages out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct dev_launch_key);
	__type(value, struct dev_launch);
} launches SEC(".maps");

/* Each thread's launches per device-time window (struct dev_run): LRU, read at the drains
 * of the window's records. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct dev_run_key);
	__type(value, struct dev_run);
} dev_runs SEC(".maps");

struct dev_counts {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct dev_key);
	__type(value, struct dev_val);
};
struct dev_counts dcounts0 SEC(".maps");
struct dev_counts dcounts1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct dev_proc);
} dev_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} dev_events SEC(".maps");

/* --trace only (sized by userspace; one page otherwise). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} dev_trace SEC(".maps");

const volatile bool trace_records = false;

/* Flipped by userspace through the mmapped .bss (see stacks.bpf.h for why). */
volatile __u32 buf_active = 0;
__u64 lost_events = 0;
__u64 lost_trace = 0;

/* --trace: one launch or record to userspace; a full ring buffer counts a loss. */
static __always_inline void trace_out(__u32 type, __u32 tgid, __u32 tid, __u32 cbinfo, __u64 ts,
				      const struct dev_rec *r)
{
	struct dev_trace_ev *e = bpf_ringbuf_reserve(&dev_trace, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost_trace, 1);
		return;
	}
	e->type = type;
	e->tgid = tgid;
	e->tid = tid;
	e->cbinfo = cbinfo;
	e->ts = ts;
	e->rec = *r;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += 1;
}

/* A launch followed in device-time window WIN by TID: its run since it last slept.
 * PREV_EXIT: when its last followed call returned (the library's clock, CLOCK_MONOTONIC as
 * bpf_ktime_get_ns; 0 from a library that does not say). */
static __always_inline void count_run(__u32 tgid, __u32 tid, __u32 win, __u64 prev_exit)
{
	struct dev_run_key rk = {.tgid = tgid, .tid = tid, .window = win};
	struct dev_run *r, init = {};
	__u64 now = bpf_ktime_get_ns(), nv = task_nvcsw();

	r = bpf_map_lookup_elem(&dev_runs, &rk);
	if (!r) {
		init.nvcsw = nv;
		init.run_start = now;
		bpf_map_update_elem(&dev_runs, &rk, &init, BPF_ANY);
		r = bpf_map_lookup_elem(&dev_runs, &rk);
		if (!r)
			return;
	}
	/* A new run after a sleep, not after a lock's short wait: a thread that waits on
	 * another's lock is slowed as much as by its own launches. Nor after a long wait
	 * inside its last call, where the thread had come back out of it only just now: a
	 * lock of CUPTI's whose holder lost its CPU (2-4 "sleeps" of 0.2-5 ms in a window
	 * beside two CPU hogs on the CUPTI model, each of which took the run's delay for made
	 * up), or a full queue (the device sets the pace: the share takes that). */
	if (!r->run_n || (nv != r->nvcsw && now - r->last > DEV_RUN_GAP_NS &&
			  !(prev_exit > r->last && prev_exit < now && now - prev_exit <= DEV_RUN_GAP_NS))) {
		r->run_n = 0;
		r->run_start = now;
		r->wait0 = task_u64(task_off.run_delay);
	}
	r->run_wait = task_u64(task_off.run_delay) - r->wait0;
	r->nvcsw = nv;
	r->n++;
	r->run_n++;
	r->last = now;
}

SEC("usdt")
int BPF_USDT(dev_launch, __u32 corr, __u32 cbinfo, __u32 win, __u64 prev_exit)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct dev_launch_key k = {.tgid = tgid, .corr = corr};
	struct dev_launch v = {.tid = tid, .cbinfo = cbinfo, .window = win & ~DEV_WIN_NESTED};
	long id;

	if (!is_target(tgid))
		return 0;
	/* the cost measurement's launches too (never read): they cost what a window's do */
	if (v.window && !(win & DEV_WIN_NESTED))
		count_run(tgid, tid, v.window, prev_exit);
	/* The probe sits mid-function in the library's callback, whose frame is set up:
	 * the frame-pointer walk misses no caller here (unlike at a function entry). The
	 * own walk where it can (no page fault), else the kernel's. */
	id = fpwalk(ctx, &launch_own);
	if (id == FPWALK_KERNEL) {
		stat_inc(STAT_KERNEL_WALK);
		id = stackid_ovf(ctx, &launch_stacks, &launch_stacks_ovf, BPF_F_USER_STACK);
	}
	if (id < 0)
		stat_inc(id == -ENOMEM ? STAT_STACK_FULL : STAT_USTACK_LOST);
	v.ustack = id < 0 ? -1 : (__s32)id;
	/* The device time it leads to goes under the same stack as the launch itself: its
	 * Python frames too, and the names the thread had when it launched. */
	v.pystack = python_capture(tgid, tid);
	v.names = record_comm(tgid, tid);
	bpf_map_update_elem(&launches, &k, &v, BPF_ANY);
	if (trace_records) {
		struct dev_rec r = {.corr = corr};

		trace_out(DEV_TR_LAUNCH, tgid, tid, cbinfo, bpf_ktime_get_ns(), &r);
	}
	return 0;
}

/* A device-time window opened (the library's watcher thread). Attached only by sessions
 * that want device time in windows: its semaphore is how the library learns it at attach. */
SEC("usdt")
int BPF_USDT(dev_windows, __u32 id, __u32 k)
{
	return 0;
}

struct rec_ctx {
	__u64 base; /* user address of recs[0] */
	__u32 tgid;
	__u32 count;
	__u32 buf;
	__u32 invalid;
	__u32 unjoined;
	__u32 read;
	__u32 free, queued; /* DEV_REC_* told of followed launches */
};

static int one_record(__u32 i, struct rec_ctx *c)
{
	struct dev_rec r;
	struct dev_key key = {};
	struct dev_launch_key lk;
	struct dev_launch *l;
	struct dev_val *v, init = {};
	void *counts = c->buf ? (void *)&dcounts1 : (void *)&dcounts0;

	if (i >= c->count)
		return 1;
	if (bpf_probe_read_user(&r, sizeof(r), (void *)(c->base + (__u64)i * sizeof(r)))) {
		c->invalid++;
		return 1; /* the batch is gone or bogus: stop reading it */
	}
	c->read++;
	if (r.kind < DEV_KERNEL || r.kind > DEV_MEMSET || r.end < r.start) {
		c->invalid++;
		return 0;
	}
	key.tgid = c->tgid;
	key.kind = r.kind;
	key.name_id = r.kind == DEV_KERNEL ? r.name_id : 0;
	key.dir = r.kind == DEV_KERNEL ? 0 : (r.dir > DEV_DIR_MEMSET ? DEV_DIR_OTHER : r.dir);
	key.device = r.device;
	key.stream = r.stream;
	key.graph_id = r.graph_id;
	lk.tgid = c->tgid;
	lk.corr = r.corr;
	l = bpf_map_lookup_elem(&launches, &lk);
	if (l) {
		key.tid = l->tid;
		key.ustack = l->ustack;
		key.cbinfo = l->cbinfo;
		key.pystack = l->pystack;
		key.names = l->names;
		key.window = l->window;
	} else {
		/* Counted anyway (under "[stack lost]"): device time is not thrown away. */
		key.ustack = -1;
		key.pystack = -1;
		c->unjoined++;
	}
	/* whether the device or the launch set the pace, for its window's delay correction,
	 * and the process's (the cost measurement's launches too) */
	if (l && l->window && (r.pace & DEV_REC_PACED)) {
		struct dev_run_key rk = {.tgid = c->tgid, .tid = l->tid, .window = l->window};
		struct dev_run *run = bpf_map_lookup_elem(&dev_runs, &rk);
		bool queued = r.pace & DEV_REC_QUEUED;

		if (run && queued)
			__sync_fetch_and_add(&run->queued, 1);
		else if (run)
			__sync_fetch_and_add(&run->free, 1);
		if (queued)
			c->queued++;
		else
			c->free++;
	}
	if (trace_records)
		trace_out(DEV_TR_RECORD, c->tgid, key.tid, key.cbinfo, 0, &r);
	v = bpf_map_lookup_elem(counts, &key);
	if (!v) {
		bpf_map_update_elem(counts, &key, &init, BPF_NOEXIST);
		v = bpf_map_lookup_elem(counts, &key);
		if (!v) {
			stat_inc(STAT_MAP_FULL);
			return 0;
		}
	}
	__sync_fetch_and_add(&v->ns, r.end - r.start);
	__sync_fetch_and_add(&v->count, 1);
	if (r.bytes)
		__sync_fetch_and_add(&v->bytes, r.bytes);
	stat_inc(STAT_SAMPLES);
	return 0;
}

SEC("usdt")
int BPF_USDT(dev_records, void *batch)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct dev_batch hdr;
	struct dev_proc *p, init = {};
	struct rec_ctx c = {};

	if (!is_target(tgid))
		return 0;
	p = bpf_map_lookup_elem(&dev_procs, &tgid);
	if (!p) {
		bpf_map_update_elem(&dev_procs, &tgid, &init, BPF_NOEXIST);
		p = bpf_map_lookup_elem(&dev_procs, &tgid);
		if (!p)
			return 0;
	}
	if (bpf_probe_read_user(&hdr, sizeof(hdr), batch) || hdr.magic != DEV_BATCH_MAGIC ||
	    hdr.version != DEV_BATCH_VERSION || hdr.count > DEV_BATCH_MAX) {
		__sync_fetch_and_add(&p->invalid, 1);
		return 0;
	}
	p->ctr = hdr.ctr;
	c.base = (__u64)batch + sizeof(hdr);
	c.tgid = tgid;
	c.count = hdr.count;
	c.buf = buf_active & 1;
	bpf_loop(DEV_BATCH_MAX, one_record, &c, 0);
	__sync_fetch_and_add(&p->batches, 1);
	__sync_fetch_and_add(&p->records, c.read);
	if (c.unjoined)
		__sync_fetch_and_add(&p->unjoined, c.unjoined);
	if (c.invalid)
		__sync_fetch_and_add(&p->invalid, c.invalid);
	if (c.free)
		__sync_fetch_and_add(&p->free, c.free);
	if (c.queued)
		__sync_fetch_and_add(&p->queued, c.queued);
	return 0;
}

/* Events are built here (4 KiB: not on the BPF stack) and sent at their length. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dev_event);
} event_scratch SEC(".maps");

static __always_inline void emit(__u32 type, __u32 id, __u64 addr, const char *text)
{
	__u32 zero = 0;
	struct dev_event *e = bpf_map_lookup_elem(&event_scratch, &zero);
	long n;
	__u64 size;

	if (!e)
		return;
	e->type = type;
	e->tgid = bpf_get_current_pid_tgid() >> 32;
	e->id = id;
	e->pad = 0;
	e->addr = addr;
	n = bpf_probe_read_user_str(e->text, sizeof(e->text), text);
	if (n < 1) {
		e->text[0] = '\0';
		n = 1;
	}
	size = offsetof(struct dev_event, text) + (__u64)n;
	if (size > sizeof(*e))
		size = sizeof(*e);
	if (bpf_ringbuf_output(&dev_events, e, size, 0))
		__sync_fetch_and_add(&lost_events, 1);
}

SEC("usdt")
int BPF_USDT(dev_name, __u32 id, const char *name)
{
	if (!is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	emit(DEV_EV_NAME, id, 0, name);
	return 0;
}

SEC("usdt")
int BPF_USDT(dev_kname, __u64 handle, const char *name)
{
	if (!is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	emit(DEV_EV_KNAME, 0, handle, name);
	return 0;
}

SEC("usdt")
int BPF_USDT(dev_status, int code, const char *text, void *cfg)
{
	if (!is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	emit(DEV_EV_STATUS, (__u32)code, (__u64)cfg, text);
	return 0;
}
