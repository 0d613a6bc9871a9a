// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpfload.h"
#include "../../bpf/cpu.h"
#include "cpu.h"
#include "cpu.skel.h"
#include "hmap.h"
#include "log.h"
#include "procs.h"
#include "python.h"
#include "stacks.h"

struct cpu_sampler {
	struct session *s;
	struct cpu_bpf *skel;
	struct bpf_link **links;
	int *pfds;
	int nfds;	  /* one per CPU, or one per target thread */
	bool per_task;	  /* each target thread sampled on its own clock */
	int hold_fd;	  /* the command's event that is not inherited (open_uninherited), or -1 */
	bool on_task;	  /* told of the targets' new threads (unclone) */
	bool unswappable; /* the kernel never swaps the events of two threads (open_own_clocks) */
	const char *event;
	uint32_t ev_type; /* the event opened (cycles or cpu-clock) */
	uint64_t ev_config;
	uint64_t samples; /* drained into the profile */
	/* How often the most sampled target thread is sampled (cpu__sample_rate): a thread is
	 * sampled freq times a second of its own CPU time, not of the clock's */
	struct hmap tid_drain; /* tid -> its samples in this drain (drain_buffer) */
	double drain_t;	       /* when the last drain was (CLOCK_MONOTONIC s; 0: none yet) */
	double rate;	       /* the most sampled thread's samples a second since the drain before */
	double max_sum;	       /* the sum over drains of that thread's samples in each */
	bool rate_lost;	       /* a thread's count could not be kept (out of memory) */
};

/* The most threads sampled on their own clocks (an fd each); past it, per CPU. */
#define MAX_TASK_EVENTS 4096

static int perf_open(struct perf_event_attr *attr, int pid, int cpu)
{
	return (int)syscall(__NR_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static void close_events(struct cpu_sampler *c)
{
	for (int i = 0; c->links && i < c->nfds; i++) {
		bpf_link__destroy(c->links[i]);
		c->links[i] = NULL;
	}
	for (int i = 0; c->pfds && i < c->nfds; i++)
		if (c->pfds[i] >= 0)
			close(c->pfds[i]);
	c->nfds = 0;
}

/* One event per online CPU: whatever runs there is sampled (-a). */
static int open_cpu_events(struct cpu_sampler *c, struct perf_event_attr *attr)
{
	int n = libbpf_num_possible_cpus(), opened = 0;

	if (n <= 0)
		return n < 0 ? n : -ENODEV;
	c->pfds = calloc((size_t)n, sizeof(int));
	c->links = calloc((size_t)n, sizeof(*c->links));
	if (!c->pfds || !c->links)
		return -ENOMEM;
	for (int cpu = 0; cpu < n; cpu++) {
		int fd = perf_open(attr, -1, cpu);

		if (fd >= 0) {
			c->pfds[c->nfds++] = fd;
			opened++;
			continue;
		}
		/* A possible but offline CPU answers ENODEV: nothing to sample there. */
		if (errno == ENODEV)
			continue;
		return -errno;
	}
	return opened ? 0 : -ENODEV;
}

static bool task_open(const struct cpu_sampler *c, int tid, const int *tids)
{
	for (int i = 0; i < c->nfds; i++)
		if (tids[i] == tid)
			return true;
	return false;
}

/* Every thread of PID not sampled yet gets its own event. 0 when none was new, 1 when one
 * was, or a negative errno. */
static int open_threads(struct cpu_sampler *c, struct perf_event_attr *attr, int pid, int *tids)
{
	char dir[64];
	struct dirent *d;
	DIR *dp;
	int found = 0, err = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/task", pid);
	dp = opendir(dir);
	if (!dp)
		return errno == ENOENT ? 0 : -errno;
	while ((d = readdir(dp))) {
		int tid = atoi(d->d_name), fd;

		if (tid <= 0 || task_open(c, tid, tids))
			continue;
		if (c->nfds >= MAX_TASK_EVENTS) {
			err = -E2BIG;
			break;
		}
		fd = perf_open(attr, tid, -1);
		if (fd < 0) {
			if (errno == ESRCH) /* it exited meanwhile */
				continue;
			err = -errno;
			break;
		}
		tids[c->nfds] = tid;
		c->pfds[c->nfds++] = fd;
		found = 1;
	}
	closedir(dp);
	return err ? err : found;
}

/* A thread's inherited events are marked a clone of its creator's when every event the
 * creator holds is inherited. Switching between two threads whose events are such clones,
 * the kernel swaps their event contexts instead of stopping one thread's events and
 * starting the other's: the sampling timer runs on and fires in whichever of them runs,
 * like a per-CPU timer. Under `record --` that was most samples (632 of 684 taken by an
 * event opened for another thread; a 6:3:1 split read 53-63 / 27-36 / 10-12). Since
 * Linux 6.12 the events ask for PERF_SAMPLE_READ and are never swapped (open_own_clocks);
 * before it, two things keep threads apart:
 * - the command holds an event that is not inherited, from before its exec: the threads
 *   and processes it starts are never clones (only where PERF_SAMPLE_READ is refused: a
 *   disabled event still costs its thread at each switch, 0.16-0.28 us a hand-over in
 *   a pair pinned to one CPU);
 * - a thread started by another gets an event opened on it (and closed) as soon as the
 *   kernel reports the thread: opening one makes the kernel forget that a thread's events
 *   are a clone (the kernel's code says threads started by a thread are clones of it and
 *   of each other; no swap was seen there in 10 runs without this). Until then, a few
 *   ms, it may share their clock.
 * STAT_CLOCK_MOVED counts the samples an event took in another thread than its last (a
 * swap with a thread that then sleeps for good moves a clock once, harmlessly). */
static int open_uninherited(int pid)
{
	struct perf_event_attr attr = {
	    .size = sizeof(attr),
	    .type = PERF_TYPE_SOFTWARE,
	    .config = PERF_COUNT_SW_DUMMY,
	    .disabled = 1,
	};

	return perf_open(&attr, pid, -1);
}

static void unclone(void *ctx, int tid)
{
	int fd = open_uninherited(tid);

	(void)ctx;
	if (fd >= 0)
		close(fd);
	else if (errno != ESRCH) /* ESRCH: gone already */
		pr_debug("cannot open an event on thread %d: %s; it may be sampled on another thread's clock", tid,
			 strerror(errno));
}

/* Each target thread on its own clock, as perf record does: a sample every 1/freq
 * seconds of the thread's own CPU time, whatever else the CPU runs (per-CPU timers sample
 * whoever runs at their tick, and a thread that wakes with the tick is never there).
 * inherit: the threads and processes they start later get events of their own. */
static int open_task_events(struct cpu_sampler *c, struct perf_event_attr *attr)
{
	const struct record_opts *o = c->s->opts;
	int *tids = calloc(MAX_TASK_EVENTS, sizeof(int)), err = 0;

	c->pfds = calloc(MAX_TASK_EVENTS, sizeof(int));
	c->links = calloc(MAX_TASK_EVENTS, sizeof(*c->links));
	if (!tids || !c->pfds || !c->links) {
		free(tids);
		return -ENOMEM;
	}
	attr->inherit = 1;
	if (o->command) {
		/* held before its exec: everything it becomes and starts inherits this one */
		int fd = perf_open(attr, (int)procs__child(c->s->procs), -1);

		if (fd < 0)
			err = -errno;
		else
			c->pfds[c->nfds++] = fd;
		if (!err && !(attr->sample_type & PERF_SAMPLE_READ) && c->hold_fd < 0 &&
		    (c->hold_fd = open_uninherited((int)procs__child(c->s->procs))) < 0)
			err = -errno;
	}
	for (int i = 0; !err && i < o->npids; i++) {
		/* a thread started between the listing and its event inherits nothing: list
		 * again until nothing new appears */
		for (int pass = 0; pass < 8; pass++) {
			int r = open_threads(c, attr, o->pids[i], tids);

			if (r <= 0) {
				err = r;
				break;
			}
		}
	}
	free(tids);
	attr->inherit = 0;
	if (!err && !c->nfds)
		err = -ESRCH;
	return err;
}

static void reset_events(struct cpu_sampler *c)
{
	close_events(c);
	free(c->pfds);
	free(c->links);
	c->pfds = NULL;
	c->links = NULL;
}

/* Each thread on its own clock, none swapped with another's: a context that holds an
 * inherited event sampling PERF_SAMPLE_READ is never swapped (kernel 6.12 and later; the
 * read itself costs nothing, the BPF program takes the sample). Before 6.12 such an
 * event is refused (EINVAL): then the command's uninherited event and unclone keep
 * threads apart. */
static int open_own_clocks(struct cpu_sampler *c, struct perf_event_attr *attr)
{
	int err;

	attr->sample_type = PERF_SAMPLE_READ | PERF_SAMPLE_TID; /* TID: required with it */
	err = open_task_events(c, attr);
	if (err == -EINVAL) {
		reset_events(c);
		attr->sample_type = 0;
		err = open_task_events(c, attr);
	}
	c->unswappable = !err && attr->sample_type;
	attr->sample_type = 0;
	return err;
}

/* Hardware cycles where a PMU exists, else the software cpu-clock (always here, in a VM). */
static int open_events(struct cpu_sampler *c)
{
	struct perf_event_attr attr = {
	    .size = sizeof(attr),
	    .freq = 1,
	    .sample_freq = (uint64_t)c->s->opts->freq,
	};
	static const struct {
		uint32_t type;
		uint64_t config;
		const char *name;
	} kinds[] = {
	    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "cycles"},
	    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, "cpu-clock"},
	};
	int err = 0;

	c->per_task = !c->s->opts->all && !c->s->opts->host_wide;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		attr.type = kinds[k].type;
		attr.config = kinds[k].config;
		err = c->per_task ? open_own_clocks(c, &attr) : open_cpu_events(c, &attr);
		if (err == -E2BIG) {
			pr_warn("more than %d target threads: sampling per CPU, not each thread on its own clock",
				MAX_TASK_EVENTS);
			reset_events(c);
			c->per_task = false;
			err = open_cpu_events(c, &attr);
		}
		if (!err) {
			c->event = kinds[k].name;
			c->ev_type = kinds[k].type;
			c->ev_config = kinds[k].config;
			break;
		}
		reset_events(c);
		c->per_task = !c->s->opts->all && !c->s->opts->host_wide;
	}
	if (err) {
		pr_err("cannot open a cpu-clock perf event: %s", strerror(-err));
		return err;
	}
	pr_debug("sampling %s at %d Hz, %s (%d events)", c->event, c->s->opts->freq,
		 !c->per_task	  ? "per CPU"
		 : c->unswappable ? "each target thread on its own clock, never swapped"
				  : "each target thread on its own clock, threads uncloned as they start",
		 c->nfds);
	for (int i = 0; i < c->nfds; i++) {
		c->links[i] = bpf_program__attach_perf_event(c->skel->progs.on_cpu_sample, c->pfds[i]);
		if (!c->links[i]) {
			err = -errno;
			pr_err("cannot attach the sampling program to a perf event: %s", strerror(-err));
			return err;
		}
	}
	return 0;
}

int cpu__to_per_cpu(struct cpu_sampler *c)
{
	struct perf_event_attr attr = {
	    .size = sizeof(attr),
	    .type = c->ev_type,
	    .config = c->ev_config,
	    .freq = 1,
	    .sample_freq = (uint64_t)c->s->opts->freq,
	};
	struct bpf_link **links = c->links;
	int *pfds = c->pfds, nfds = c->nfds, err;

	if (!c->per_task)
		return 0;
	/* the new events first: the targets are never left unsampled */
	c->pfds = NULL;
	c->links = NULL;
	c->nfds = 0;
	err = open_cpu_events(c, &attr);
	for (int i = 0; !err && i < c->nfds; i++) {
		c->links[i] = bpf_program__attach_perf_event(c->skel->progs.on_cpu_sample, c->pfds[i]);
		if (!c->links[i])
			err = -errno;
	}
	if (err) {
		reset_events(c);
		c->pfds = pfds;
		c->links = links;
		c->nfds = nfds;
		return err;
	}
	/* then the threads' own go, and what kept them apart */
	for (int i = 0; i < nfds; i++) {
		bpf_link__destroy(links[i]);
		if (pfds[i] >= 0)
			close(pfds[i]);
	}
	free(links);
	free(pfds);
	if (c->on_task) {
		procs__set_on_task(c->s->procs, NULL, NULL);
		c->on_task = false;
	}
	if (c->hold_fd >= 0) {
		close(c->hold_fd);
		c->hold_fd = -1;
	}
	c->per_task = false;
	c->unswappable = false;
	pr_debug("sampling %s at %d Hz per CPU from now on (%d events)", c->event, c->s->opts->freq, c->nfds);
	return 0;
}

struct cpu_sampler *cpu__new(struct session *s, int targets_fd, int comms_fd)
{
	struct cpu_sampler *c = calloc(1, sizeof(*c));
	uint64_t t0;
	int err;

	if (!c)
		return NULL;
	c->s = s;
	c->hold_fd = -1;
	c->skel = cpu_bpf__open();
	if (!c->skel) {
		err = -errno;
		pr_err("cannot open the CPU sampling BPF object: %s", strerror(-err));
		goto fail;
	}
	SESSION_SET_RODATA(c->skel->rodata, s);
	c->skel->rodata->period_ns = (uint64_t)s->period_ns;
	stacks__test_size(c->skel->maps.stacks0, c->skel->maps.stacks1);
	err = session__share_maps(s, c->skel->obj, targets_fd, comms_fd);
	if (err) {
		pr_err("cannot share the target map: %s", strerror(-err));
		goto fail;
	}
	t0 = bpfload__now();
	err = cpu_bpf__load(c->skel);
	if (!err)
		bpfload__report(c->skel->obj, "cpu", t0);
	if (err) {
		pr_err("cannot load the CPU sampling BPF program: %s (run with -v for the verifier log)",
		       strerror(-err));
		goto fail;
	}
	err = open_events(c);
	if (err)
		goto fail;
	if (c->per_task && !c->unswappable) {
		procs__set_on_task(s->procs, unclone, c);
		c->on_task = true;
	}
	return c;
fail:
	cpu__free(c);
	errno = -err;
	return NULL;
}

void cpu__free(struct cpu_sampler *c)
{
	if (!c)
		return;
	if (c->on_task)
		procs__set_on_task(c->s->procs, NULL, NULL);
	if (c->hold_fd >= 0)
		close(c->hold_fd);
	close_events(c);
	free(c->links);
	free(c->pfds);
	cpu_bpf__destroy(c->skel);
	hmap__clear(&c->tid_drain);
	free(c);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A drained entry's samples, added to its thread's in this drain. Out of memory, the rate
 * is no longer known: -F is charged from then on, as before any drain. */
static void count_thread(struct cpu_sampler *c, uint32_t tid, uint64_t samples)
{
	uint64_t n = 0;

	hmap__get(&c->tid_drain, tid, 0, 0, &n);
	if (!c->rate_lost && hmap__put(&c->tid_drain, tid, 0, 0, n + samples)) {
		pr_debug("cannot count thread %u's CPU samples: out of memory; CPU sampling charged at -F", tid);
		c->rate_lost = true;
	}
}

/* A drain's end: the most sampled thread's samples in it, into the recording's sum, and a
 * second since the drain before (the buffer drained held what came since then; the
 * first held what came since the events opened, before the recording's start: not a
 * rate; a final drain's second buffer, at once after the first, holds a moment's). */
static void drained(struct cpu_sampler *c)
{
	double now = mono_s();
	uint64_t most = 0;

	hmap_for_each(&c->tid_drain, en)
	{
		if (en->val > most)
			most = en->val;
	}
	hmap__clear(&c->tid_drain);
	c->max_sum += (double)most;
	if (c->drain_t > 0 && now - c->drain_t < 0.05)
		return;
	c->rate = c->drain_t > 0 ? (double)most / (now - c->drain_t) : -1;
	c->drain_t = now;
}

double cpu__sample_rate(const struct cpu_sampler *c, double elapsed, bool whole)
{
	if (!c || c->drain_t <= 0 || c->rate_lost)
		return -1;
	if (whole)
		return elapsed > 0 ? c->max_sum / elapsed : -1;
	return c->rate;
}

static int drain_buffer(struct cpu_sampler *c, unsigned buf)
{
	struct session *s = c->s;
	struct bpf_map *counts = buf ? c->skel->maps.counts1 : c->skel->maps.counts0;
	struct stack_maps sm = {bpf_map__fd(buf ? c->skel->maps.stacks1 : c->skel->maps.stacks0),
				bpf_map__fd(buf ? c->skel->maps.stacks1_ovf : c->skel->maps.stacks0_ovf), -1};
	uint64_t kips[STACKS_MAX_DEPTH], uips[STACKS_MAX_DEPTH];
	struct stacks_taken t;
	int32_t *ids = NULL;
	size_t nids = 0;
	int err;

	err = stacks__take(bpf_map__fd(counts), sizeof(struct cpu_key), sizeof(struct cpu_val),
			   bpf_map__max_entries(counts), &t);
	if (!err && t.n && !(ids = malloc(2 * t.n * sizeof(*ids))))
		err = -ENOMEM;
	for (size_t i = 0; i < t.n && !err; i++) {
		struct cpu_key key;
		struct cpu_val val;
		int nk, nu, tk, tu;

		memcpy(&key, t.keys + i * sizeof(key), sizeof(key));
		memcpy(&val, t.vals + i * sizeof(val), sizeof(val));
		ids[nids++] = key.kstack;
		ids[nids++] = key.ustack;
		if (!val.samples)
			continue;
		nk = stacks__read(&sm, key.kstack, kips, &tk);
		nu = stacks__read(&sm, key.ustack, uips, &tu);
		s->truncated_stacks += (uint64_t)(tk + tu);
		if (s->opts->all)
			procs__note_pid(s->procs, (int)key.tgid);

		SESSION_VALUES(values);
		values[s->t_samples] = (int64_t)val.samples;
		values[s->t_cpu_ns] = (int64_t)val.cpu_ns;
		err = session__add_stack_sample_py(s, key.tgid, key.tid, key.names, kips, nk, uips, nu, key.pystack,
						   NULL, 0, NULL, 0, values);
		if (!err)
			c->samples += val.samples;
		if (!err)
			count_thread(c, key.tid, val.samples);
	}
	if (!err)
		drained(c);
	/* Nothing writes this buffer now: empty it for its next turn. */
	stacks__clear_ids(&sm, ids, nids);
	stacks__clear(bpf_map__fd(counts), sizeof(struct cpu_key)); /* what an error left */
	free(ids);
	stacks__taken_free(&t);
	return err;
}

int cpu__drain(struct cpu_sampler *c, bool final)
{
	int err = drain_buffer(c, stacks__flip(&c->skel->bss->buf_active));

	if (err || !final)
		return err;
	return drain_buffer(c, stacks__flip(&c->skel->bss->buf_active));
}

/* The time a thread lost to interruptions over SECS seconds: a loop that reads the clock
 * sees each one as a gap (over GAP_MIN, under GAP_MAX: a switch to another thread is
 * none of the sampling's). *N: how many. */
#define GAP_MIN 0.0000004
#define GAP_MAX 0.0005
static double gaps(double secs, int *n)
{
	double t0 = mono_s(), prev = t0, t, lost = 0;

	*n = 0;
	do {
		t = mono_s();
		if (t - prev > GAP_MIN && t - prev < GAP_MAX) {
			lost += t - prev;
			(*n)++;
		}
		prev = t;
	} while (t - t0 < secs);
	return lost;
}

double cpu__sample_cost(struct cpu_sampler *c)
{
	const double hz = 10000, secs = 0.006;
	struct perf_event_attr attr = {
	    .size = sizeof(attr),
	    .type = c->ev_type,
	    .config = c->ev_config,
	    .freq = 1,
	    .sample_freq = (uint64_t)hz,
	    .disabled = 1,
	};
	double base = 0, sampled = 0;
	int fd, nb = 0, ns = 0;

	if (!c->event)
		return -1;
	/* This thread, sampled by the same kind of event running the same program (which
	 * returns at once for gpubpf itself: its stack walk is not in this measure). */
	fd = (int)syscall(__NR_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, bpf_program__fd(c->skel->progs.on_cpu_sample))) {
		close(fd);
		return -1;
	}
	/* The gaps a sample leaves in the thread's time, against those it has unsampled
	 * (other interrupts): timed one by one, where the loss of a loop's rate, best of two
	 * runs each, read anything from 0 to 20 us a sample on a loaded machine. A try whose
	 * sampled gaps are not a quarter of the samples asked more than the unsampled ones
	 * measures nothing: a burst of other interrupts in the unsampled runs (165 gaps once,
	 * 15-35 as a rule) leaves the cost divided by a handful (one run here planned CPU
	 * sampling at 3.15% of a 1% budget, 318 us a sample, where 3-5 us is the rule). Tried
	 * again, up to 3 times. */
	for (int tries = 0; tries < 3 && ns - nb < hz * secs * 2 / 4; tries++) {
		base = sampled = 0;
		nb = ns = 0;
		for (int r = 0; r < 2; r++) {
			int n;

			base += gaps(secs, &n);
			nb += n;
			ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
			sampled += gaps(secs, &n);
			ns += n;
			ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
		}
	}
	close(fd);
	if (ns - nb < hz * secs * 2 / 4)
		return -1;
	return sampled > base ? (sampled - base) / (ns - nb) : 0;
}

double cpu__prog_cost(struct cpu_sampler *c)
{
	uint64_t runs, ns;

	if (!c || !c->skel)
		return 0;
	runs = __atomic_load_n(&c->skel->bss->prog_runs, __ATOMIC_RELAXED);
	ns = __atomic_load_n(&c->skel->bss->prog_ns, __ATOMIC_RELAXED);
	return runs ? (double)ns / 1e9 / (double)runs : 0;
}

void cpu__stats(struct cpu_sampler *c, struct cpu_stats *out)
{
	int fd = bpf_map__fd(c->skel->maps.stats);

	out->samples = c->samples; /* drained into the profile, as the summary reports */
	out->lost_stacks =
	    stacks__stat(fd, STAT_USTACK_LOST) + stacks__stat(fd, STAT_KSTACK_LOST) + stacks__stat(fd, STAT_STACK_FULL);
	out->dropped = stacks__stat(fd, STAT_MAP_FULL);
	out->clock_moves = stacks__stat(fd, STAT_CLOCK_MOVED);
	out->event = c->event;
}

int cpu__task_attr(const struct cpu_sampler *c, struct perf_event_attr *attr)
{
	if (!c || !c->per_task || !c->event)
		return -ENOENT;
	*attr = (struct perf_event_attr){
	    .size = sizeof(*attr),
	    .type = c->ev_type,
	    .config = c->ev_config,
	    .freq = 1,
	    .sample_freq = (uint64_t)c->s->opts->freq,
	    .inherit = 1,
	    .sample_type = c->unswappable ? PERF_SAMPLE_READ | PERF_SAMPLE_TID : 0,
	};
	return 0;
}
