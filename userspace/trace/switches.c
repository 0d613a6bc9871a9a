// SPDX-License-Identifier: MIT
/* What the CPU sampler's events cost the targets' context switches (switches.h). */
#define _GNU_SOURCE /* sched_getcpu, CPU_SET, gettid */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "readfile.h"
#include "switches.h"
#include "vec.h"

/* Without the events a hand-over's time is steady: the least of a few short batches,
 * taken before any event is opened on the two threads (one opened and disabled still
 * costs part of it: 3.1 us where none was ever opened 2.55; closed, nothing). With them it
 * is not: a switch costs most where the sampling timer is the CPU's next (started again as
 * the thread comes back, with what is left of its period), so the cost rises as the period
 * runs down and falls when the next one starts. The median of three 3000-round batches right
 * after the opening read 0.55-0.6 us a switch, the same batches after 5000 rounds 1.0-1.06,
 * and 0.5 s runs of the same pair 0.82 (dev VM). The first period is the cheap one (1.2-1.4
 * us a switch over a 2026-12 host's first 20 ms, 1.9-2.1 over a second): it runs untimed,
 * then two whole periods of each thread's CPU time are timed (1.65-2.43 us, median 2.29,
 * where two from the opening read 1.49-1.86 and a pair under gpubpf paid 2.37; four
 * periods read 1.95 for 0.3% of a core more over a 30 s recording). Each batch is timed by the two
 * threads' CPU time, not by the clock: beside a busy thread on that CPU the clock counts
 * its turns too: 0.9-5.1 us a switch beside two spinning threads where alone it read
 * 0.6-2.1 (dev VM; 0.6-0.8 beside them and 0.6-1.1 alone with CPU time). A batch in which
 * the CPU ran another thread is left out all the same (its clock's time is over the pair's
 * by more than CAL_OTHER_S): the pair pays CPU time of its own for the other's turn (its
 * caches), and in the events' mean and not the base's least that read 2.97 us a switch
 * beside busy threads against 0.97 alone on a CI host; 9.1 against 7.7 us a hand-over in
 * the batches a busy thread ran in here. ~75 ms in all at 99 Hz on one CPU (where gpubpf
 * attaches to a job that fills the machine, the job's), up to twice that beside a busy
 * thread on it, which runs half the time: undisturbed batches are waited for only so long. */
#define CAL_WARM_ROUNDS 2000
#define CAL_BASE_ROUNDS 200
#define CAL_BASE_BATCHES 6
#define CAL_EV_ROUNDS 200	 /* a batch with the events, until ... */
#define CAL_EV_SKIP 1		 /* ... each thread ran this many sampling periods untimed, */
#define CAL_EV_SKIP_MAX_S 0.03	 /* the pair at most this long, */
#define CAL_EV_PERIODS 2	 /* ... then this many timed */
#define CAL_EV_MIN_S 0.02	 /* and the pair at least this long */
#define CAL_EV_MAX_S 0.06	 /* or at most this (at -F 10 a period is 100 ms) */
#define CAL_EV_MAX_ROUNDS 100000 /* a bound whatever the CPU clocks say */
#define CAL_OTHER_S 50e-6	 /* a batch where the CPU ran others longer is left out ... */
#define CAL_EV_WAIT_S 0.3	 /* ... while undisturbed ones are fewer, for at most this */

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct pingpong {
	const struct perf_event_attr *attr;
	int cpu;
	int ab[2], ba[2]; /* driver -> peer, peer -> driver */
	int peer_tid;
	clockid_t peer_clock; /* the peer's CPU time */
	double freq;	      /* the events' samples a second of a thread's CPU time */
	double cost;	      /* out: seconds, or a negative errno */
};

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

/* Answers each byte with one, on the driver's CPU, until the driver closes its end. */
static void *peer(void *arg)
{
	struct pingpong *p = arg;
	char c = 0;

	__atomic_store_n(&p->peer_tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	if (pin(p->cpu))
		c = 1; /* tells the driver */
	while (write(p->ba[1], &c, 1) == 1 && read(p->ab[0], &c, 1) == 1)
		;
	return NULL;
}

/* The two threads' CPU time together: what a hand-over costs the CPU, whatever else ran on
 * it between (the switch to a thread, its events' included, is charged to that thread). */
static double pair_cpu_s(const struct pingpong *p)
{
	struct timespec a, b;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a) || clock_gettime(p->peer_clock, &b))
		return NAN;
	return (double)(a.tv_sec + b.tv_sec) + (double)(a.tv_nsec + b.tv_nsec) / 1e9;
}

/* Seconds a hand-over (there and back) takes over ROUNDS of them, or -1; *OTHER, the
 * seconds the CPU spent on anything else meanwhile (the clock's less the pair's). */
static double batch(struct pingpong *p, int rounds, double *other)
{
	double w0 = mono_s(), t0 = pair_cpu_s(p), t1, w1;
	char c = 0;

	for (int i = 0; i < rounds; i++)
		if (write(p->ab[1], &c, 1) != 1 || read(p->ba[0], &c, 1) != 1)
			return -1;
	t1 = pair_cpu_s(p);
	w1 = mono_s();
	if (!isfinite(t0) || !isfinite(t1))
		return -1;
	*other = fmax(0, (w1 - w0) - (t1 - t0));
	return (t1 - t0) / rounds;
}

static int open_on(const struct perf_event_attr *attr, int tid)
{
	struct perf_event_attr a = *attr;

	a.disabled = 0;
	a.inherit = 0; /* nothing to inherit: these threads start none */
	return (int)syscall(__NR_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void *driver(void *arg)
{
	struct pingpong *p = arg;
	double base = INFINITY, ev = 0, all_s = 0, clean_s = 0, want, other, until;
	long all_rounds = 0, clean_rounds = 0;
	int fds[2] = {-1, -1}, err;
	pthread_t t;
	char c;

	err = pin(p->cpu);
	if (err)
		goto out;
	err = -pthread_create(&t, NULL, peer, p);
	if (err)
		goto out;
	/* the peer is pinned and waiting */
	err = -pthread_getcpuclockid(t, &p->peer_clock);
	if (!err && read(p->ba[0], &c, 1) != 1)
		err = -EIO;
	if (err || c) {
		err = err ? err : -EIO;
		goto join;
	}
	batch(p, CAL_WARM_ROUNDS, &other);
	/* the least of a few undisturbed batches (of any, where none is) */
	until = mono_s() + CAL_EV_WAIT_S;
	for (int b = 0, clean = 0; !err && clean < CAL_BASE_BATCHES && (b < CAL_BASE_BATCHES || mono_s() < until);
	     b++) {
		double x = batch(p, CAL_BASE_ROUNDS, &other);

		err = x < 0 ? -EIO : 0;
		if (other <= CAL_OTHER_S && clean++ == 0)
			base = x;
		else if (other <= CAL_OTHER_S || !clean)
			base = fmin(base, x);
	}
	fds[0] = err ? -1 : open_on(p->attr, (int)syscall(SYS_gettid));
	fds[1] = fds[0] < 0 ? -1 : open_on(p->attr, __atomic_load_n(&p->peer_tid, __ATOMIC_ACQUIRE));
	if (!err && (fds[0] < 0 || fds[1] < 0))
		err = -errno;
	/* the events' first period, untimed: it costs less than the job's (above) */
	double skip = fmin(CAL_EV_SKIP_MAX_S, 2.0 * CAL_EV_SKIP / (double)p->freq);

	for (long r = 0; !err && skip > 0 && r < CAL_EV_MAX_ROUNDS; r += CAL_EV_ROUNDS) {
		double x = batch(p, CAL_EV_ROUNDS, &other);

		err = x < 0 ? -EIO : 0;
		skip -= x * CAL_EV_ROUNDS;
	}
	/* whole periods of both threads' clocks, in batches the CPU gave to nothing else: the
	 * first batch after another thread's turn pays for its caches */
	want = fmin(CAL_EV_MAX_S, fmax(CAL_EV_MIN_S, 2.0 * CAL_EV_PERIODS / (double)p->freq));
	until = mono_s() + CAL_EV_WAIT_S;
	while (!err && (all_s < want || (clean_s < want && mono_s() < until)) && all_rounds < CAL_EV_MAX_ROUNDS) {
		double x = batch(p, CAL_EV_ROUNDS, &other);

		err = x < 0 ? -EIO : 0;
		all_s += x * CAL_EV_ROUNDS;
		all_rounds += CAL_EV_ROUNDS;
		if (other <= CAL_OTHER_S) {
			clean_s += x * CAL_EV_ROUNDS;
			clean_rounds += CAL_EV_ROUNDS;
		}
	}
	/* too few undisturbed: every batch, as a CPU that is never free would run the job */
	if (!err)
		ev = clean_s >= want / 2 ? clean_s / (double)clean_rounds : all_s / (double)all_rounds;
join:
	close(p->ab[1]); /* the peer's read ends */
	p->ab[1] = -1;
	pthread_join(t, NULL);
out:
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* a hand-over is two switches, one of each thread: each out and back in once */
	if (!err)
		pr_debug("switches: a hand-over on CPU %d %.2f us, %.2f us with the events (%ld of %ld rounds "
			 "undisturbed)",
			 p->cpu, base * 1e6, ev * 1e6, clean_rounds, all_rounds);
	p->cost = err ? err : fmax(0, ev - base) / 2;
	return NULL;
}

double switches__calibrate(const struct perf_event_attr *attr)
{
	struct pingpong p = {.attr = attr, .ab = {-1, -1}, .ba = {-1, -1}};
	pthread_t t;
	int err, cpu = sched_getcpu();

	p.cpu = cpu >= 0 ? cpu : 0;
	/* a cpu-clock period is in ns; a cycles one, in freq mode too, lasts about 1/freq */
	p.freq = attr->freq && attr->sample_freq			   ? (double)attr->sample_freq
		 : attr->type == PERF_TYPE_SOFTWARE && attr->sample_period ? 1e9 / (double)attr->sample_period
									   : 99;
	if (pipe2(p.ab, O_CLOEXEC) || pipe2(p.ba, O_CLOEXEC)) {
		err = -errno;
		goto out;
	}
	err = -pthread_create(&t, NULL, driver, &p);
	if (err)
		goto out;
	pthread_join(t, NULL);
	err = p.cost < 0 ? (int)p.cost : 0;
out:
	for (int i = 0; i < 2; i++) {
		if (p.ab[i] >= 0)
			close(p.ab[i]);
		if (p.ba[i] >= 0)
			close(p.ba[i]);
	}
	return err ? err : p.cost;
}

int switches__parse(const char *text, uint64_t *n)
{
	static const char vol[] = "\nvoluntary_ctxt_switches:", invol[] = "\nnonvoluntary_ctxt_switches:";
	const char *v = text ? strstr(text, vol) : NULL, *i = text ? strstr(text, invol) : NULL;
	unsigned long long a, b;

	if (!v || !i || sscanf(v + sizeof(vol) - 1, "%llu", &a) != 1 || sscanf(i + sizeof(invol) - 1, "%llu", &b) != 1)
		return -EINVAL;
	*n = a + b;
	return 0;
}

int switches__add(struct switches *sw, int tid, uint64_t runs, bool first)
{
	uint64_t i;

	if (hmap__get(&sw->idx, (uint64_t)tid, 0, 0, &i)) {
		struct sw_thread *t = &sw->th[i];

		/* fewer than before: another thread with a reused id, counted from its start */
		t->count += runs >= t->last ? runs - t->last : runs;
		t->last = runs;
		return 0;
	}
	if (sw->n >= SW_MAX_THREADS) {
		sw->untracked++;
		return 0;
	}
	if (vec__grow((void **)&sw->th, &sw->cap, sw->n + 1, sizeof(*sw->th)))
		return -ENOMEM;
	if (hmap__put(&sw->idx, (uint64_t)tid, 0, 0, sw->n))
		return -ENOMEM;
	sw->th[sw->n++] = (struct sw_thread){.tid = tid, .last = runs, .count = first ? 0 : runs};
	return 0;
}

/* A thread's status is ~1.5 KB, its switches the last lines; a CPU list of a large machine
 * can add a few hundred bytes. */
#define STATUS_MAX (16 << 10)

/* Every thread of PID. */
static void look_pid(struct switches *sw, int pid, bool first)
{
	char path[96];
	struct dirent *d;
	DIR *dp;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dp = opendir(path);
	if (!dp)
		return; /* exited meanwhile */
	while ((d = readdir(dp))) {
		int tid = atoi(d->d_name);
		uint64_t runs = 0;
		char *text;

		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
		text = readfile__path(path, STATUS_MAX, true, NULL);
		if (text && switches__parse(text, &runs) == 0 && switches__add(sw, tid, runs, first))
			pr_debug("cannot count thread %d's switches: out of memory", tid);
		free(text);
	}
	closedir(dp);
}

bool switches__over(const struct switches *sw, double now, double limit)
{
	return sw->on && !(sw->per_cpu_at > 0) && now >= SW_MIN_SECS && switches__share(sw, now, NULL) > limit;
}

void switches__per_cpu(struct switches *sw, double now)
{
	sw->per_cpu_share = switches__share(sw, now, NULL);
	sw->per_cpu_at = now > 0 ? now : 1e-9;
}

void switches__look(struct switches *sw, const int *pids, int n)
{
	bool first = !sw->looked;

	if (!sw->on || sw->per_cpu_at > 0)
		return;
	if (first) {
		sw->t0 = mono_s();
		sw->looked = true;
	}
	for (int i = 0; i < n; i++)
		look_pid(sw, pids[i], first);
	sw->max = sw->total = 0;
	for (size_t i = 0; i < sw->n; i++) {
		sw->total += sw->th[i].count;
		if (sw->th[i].count > sw->max)
			sw->max = sw->th[i].count;
	}
}

double switches__share(const struct switches *sw, double elapsed, double *all)
{
	double c = sw->on && sw->cost > 0 && elapsed > 0 ? sw->cost / elapsed : 0;

	if (all)
		*all = fmin(1, c * (double)sw->total);
	return fmin(1, c * (double)sw->max);
}

void switches__text(const struct switches *sw, double elapsed, char *buf, unsigned long len)
{
	double all, mid = switches__share(sw, elapsed, &all), t = elapsed > 0 ? elapsed : 1;
	char tail[256] = "";

	if (!sw->on) {
		snprintf(buf, len,
			 "context switches: sampled per CPU, no event of a thread's own: nothing added to a switch");
		return;
	}
	if (!(sw->cost >= 0)) {
		snprintf(buf, len, "context switches: what the sampler's events add to one was not measured");
		return;
	}
	if (sw->per_cpu_at > 0) {
		t = sw->per_cpu_at;
		snprintf(tail, sizeof(tail),
			 "; sampled per CPU from %.3g s on, where that was %.3g%% of its time, over half the "
			 "budget (per-CPU events are no thread's own: nothing is added to a switch)",
			 sw->per_cpu_at, 100 * sw->per_cpu_share);
	}
	snprintf(buf, len,
		 "context switches: each target thread sampled on its own clock pays %.2f us a switch (its event "
		 "stopped and started again; calibrated); the most switched thread switched %.3g times a second "
		 "(%" PRIu64 " in all), %.3g%% of its time, counted in the estimated overhead and the budget; all the "
		 "targets' threads together %.3g times a second, up to %.3g%% where each waits for the others'%s%s",
		 sw->cost * 1e6, (double)sw->max / t, sw->max, 100 * mid, (double)sw->total / t, 100 * all,
		 sw->untracked ? " (threads past the first 4096 not counted)" : "", tail);
}

void switches__free(struct switches *sw)
{
	free(sw->th);
	sw->th = NULL;
	sw->n = sw->cap = 0;
	hmap__clear(&sw->idx);
}
