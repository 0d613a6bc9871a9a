// SPDX-License-Identifier: MIT
#define _GNU_SOURCE /* sched_getaffinity */
#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "switches.h"
#include "test.h"

#define NEAR(a, b, eps) (fabs((a) - (b)) <= (eps))

/* A thread's status: its voluntary and involuntary switches, added (the kernel's nvcsw
 * and nivcsw, as BPF reads them at its exit); a line that only ends like one is not one. */
TEST(parse_status)
{
	static const char status[] = "Name:\tcpu_handoff\nState:\tS (sleeping)\nTgid:\t42\n"
				     "Cpus_allowed_list:\t0-1\nvoluntary_ctxt_switches:\t123456\n"
				     "nonvoluntary_ctxt_switches:\t789\n";
	static const char no_invol[] = "Name:\tx\nvoluntary_ctxt_switches:\t5\n";
	static const char junk[] = "Name:\tx\nvoluntary_ctxt_switches:\tmany\nnonvoluntary_ctxt_switches:\t1\n";
	static const char first[] = "voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t1\n";
	uint64_t n = 0;

	CHECK_INT(switches__parse(status, &n), 0);
	CHECK_INT(n, 123456 + 789);
	CHECK_INT(switches__parse(no_invol, &n), -EINVAL);
	CHECK_INT(switches__parse(junk, &n), -EINVAL);
	CHECK_INT(switches__parse(first, &n), -EINVAL); /* never the first line of a status */
	CHECK_INT(switches__parse("", &n), -EINVAL);
	CHECK_INT(switches__parse(NULL, &n), -EINVAL);
}

/* The status of a target's thread is a target's text (its name is in it): random bytes
 * and a real status cut and mutated anywhere are read within their bounds (ASan) and give
 * a count or -EINVAL, never anything else. */
TEST(parse_mutated_status)
{
	static const char status[] = "Name:\tpt_main_thread\nState:\tR (running)\nTgid:\t7\n"
				     "voluntary_ctxt_switches:\t1000\nnonvoluntary_ctxt_switches:\t20\n";
	char buf[sizeof(status)];
	unsigned seed = 12345;

	for (int i = 0; i < 20000; i++) {
		size_t n = (size_t)rand_r(&seed) % sizeof(status);
		uint64_t v = 0;
		int r;

		memcpy(buf, status, sizeof(status));
		if (i % 2) {
			for (size_t k = 0; k < n; k++)
				buf[k] = (char)(rand_r(&seed) & 0xff);
		} else {
			for (int m = 0; m < 3; m++)
				buf[(size_t)rand_r(&seed) % (sizeof(status) - 1)] = (char)(rand_r(&seed) & 0xff);
		}
		buf[n] = '\0';
		r = switches__parse(buf, &v);
		CHECK(r == 0 || r == -EINVAL);
	}
}

/* Threads seen at the first look count from there; one seen later counts from its start;
 * a thread id reused (fewer runs than before) counts the new thread's from its start. */
TEST(counts_from_the_first_look)
{
	struct switches sw = {.on = true, .cost = 1e-6};

	CHECK_INT(switches__add(&sw, 10, 1000, true), 0);
	CHECK_INT(switches__add(&sw, 11, 50, true), 0);
	CHECK_INT(switches__add(&sw, 10, 1600, false), 0);
	CHECK_INT(switches__add(&sw, 11, 80, false), 0);
	CHECK_INT(switches__add(&sw, 12, 200, false), 0); /* started since */
	CHECK_INT(switches__add(&sw, 11, 20, false), 0);  /* 11 reused: a new thread */
	CHECK_INT(sw.n, 3);
	CHECK_INT(sw.th[0].count, 600);
	CHECK_INT(sw.th[1].count, 30 + 20);
	CHECK_INT(sw.th[2].count, 200);
	switches__free(&sw);
}

/* The share: the most switched thread's switches at the calibrated cost over the
 * recording; all of them together for the top; nothing where sampling is per CPU or the
 * cost was not measured. */
TEST(share)
{
	struct switches sw = {.on = true, .cost = 0.8e-6, .max = 100000, .total = 250000};
	double all = -1;

	CHECK(NEAR(switches__share(&sw, 10, &all), 0.008, 1e-12));
	CHECK(NEAR(all, 0.02, 1e-12));
	CHECK(NEAR(switches__share(&sw, 0, &all), 0, 0));
	sw.max = sw.total = 100000000; /* capped at all of the time */
	CHECK(NEAR(switches__share(&sw, 10, NULL), 1, 0));
	sw.cost = -EACCES;
	CHECK(NEAR(switches__share(&sw, 10, &all), 0, 0) && all == 0);
	sw.cost = 0.8e-6;
	sw.on = false;
	CHECK(NEAR(switches__share(&sw, 10, &all), 0, 0) && all == 0);
}

/* Over the limit: judged after SW_MIN_SECS, never twice; per CPU from then on, nothing
 * more is counted and the share so far is kept for the text. */
TEST(over_the_limit_goes_per_cpu)
{
	struct switches sw = {.on = true, .looked = true, .cost = 1e-6, .max = 10000, .total = 20000};
	int pid = (int)getpid();
	char buf[768];

	CHECK(!switches__over(&sw, 0.1, 0.005)); /* too early */
	CHECK(switches__over(&sw, 1, 0.005));	 /* 1% over 1 s */
	CHECK(!switches__over(&sw, 1, 0.02));	 /* under 2% */
	CHECK(!switches__over(&sw, 4, 0.005));	 /* 0.25% over 4 s */
	sw.on = false;
	CHECK(!switches__over(&sw, 1, 0.005)); /* per CPU from the start */
	sw.on = true;
	switches__per_cpu(&sw, 1);
	CHECK(NEAR(sw.per_cpu_at, 1, 0) && NEAR(sw.per_cpu_share, 0.01, 1e-12));
	CHECK(!switches__over(&sw, 1, 0.005)); /* once */
	switches__look(&sw, &pid, 1);
	CHECK_INT(sw.n, 0);
	CHECK_INT(sw.max, 10000);
	/* the share decays over a longer recording: what was paid, over all of it */
	CHECK(NEAR(switches__share(&sw, 4, NULL), 0.0025, 1e-12));
	switches__text(&sw, 4, buf, sizeof(buf));
	CHECK(strstr(buf, "switched 1e+04 times a second (10000 in all), 0.25% of its time"));
	CHECK(strstr(buf, "sampled per CPU from 1 s on, where that was 1% of its time, over half the budget"));
}

/* The text says each part, or why there is none. */
TEST(text)
{
	struct switches sw = {.on = true, .cost = 0.8e-6, .max = 100000, .total = 250000};
	char buf[512];

	switches__text(&sw, 10, buf, sizeof(buf));
	CHECK(strstr(buf, "pays 0.80 us a switch"));
	CHECK(strstr(buf, "switched 1e+04 times a second (100000 in all), 0.8% of its time"));
	CHECK(strstr(buf, "together 2.5e+04 times a second, up to 2% where"));
	sw.cost = -EPERM;
	switches__text(&sw, 10, buf, sizeof(buf));
	CHECK(strstr(buf, "was not measured"));
	sw.on = false;
	switches__text(&sw, 10, buf, sizeof(buf));
	CHECK(strstr(buf, "sampled per CPU"));
}

/* This process's own threads, looked at twice: the main thread's runs count from the
 * first look, and a sleep between is at least one switch of its. */
TEST(live_look)
{
	struct switches sw = {.on = true, .cost = 1e-6};
	int pid = (int)getpid();

	switches__look(&sw, &pid, 1);
	CHECK(sw.looked && sw.n >= 1);
	CHECK_INT(sw.max, 0);
	usleep(2000);
	usleep(2000);
	switches__look(&sw, &pid, 1);
	CHECK(sw.max >= 2);
	switches__free(&sw);
}

/* A cpu-clock event like the targets' */
static struct perf_event_attr cal_attr(void)
{
	return (struct perf_event_attr){
	    .size = sizeof(struct perf_event_attr),
	    .type = PERF_TYPE_SOFTWARE,
	    .config = PERF_COUNT_SW_CPU_CLOCK,
	    .freq = 1,
	    .sample_freq = 99,
	};
}

/* The calibration, live: a cpu-clock event like the targets' on two threads on one CPU
 * adds something to their switches, and not absurdly much. */
TEST(calibrate_live)
{
	struct perf_event_attr attr = cal_attr();
	double c = switches__calibrate(&attr);

	if (c == -EACCES || c == -EPERM || c == -ENOENT || c == -ENOSYS)
		SKIP("no perf events here (%s)", strerror((int)-c));
	CHECK(c >= 0);
	CHECK(c < 50e-6);
}

static atomic_bool spinning;

static void *spin(void *arg)
{
	(void)arg;
	while (atomic_load_explicit(&spinning, memory_order_relaxed))
		;
	return NULL;
}

/* The median of three calibrations. */
static double calibrate3(const struct perf_event_attr *attr)
{
	double c[3], t;

	for (int i = 0; i < 3; i++) {
		c[i] = switches__calibrate(attr);
		if (c[i] < 0)
			return c[i];
	}
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2 - i; j++)
			if (c[j] > c[j + 1]) {
				t = c[j];
				c[j] = c[j + 1];
				c[j + 1] = t;
			}
	return c[1];
}

/* A pair of threads on one CPU handing a byte to each other through pipes, as a job's
 * producer and consumer do (written apart from switches.c's, which it checks). */
struct pair {
	int ab[2], ba[2];
	atomic_int tid;
	int cpu;
};

static void *pair_peer(void *arg)
{
	struct pair *p = arg;
	cpu_set_t set;
	char c = 0;

	CPU_ZERO(&set);
	CPU_SET(p->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	atomic_store(&p->tid, (int)syscall(SYS_gettid));
	while (read(p->ab[0], &c, 1) == 1 && write(p->ba[1], &c, 1) == 1)
		;
	return NULL;
}

/* A new pair on CPU, warmed: 0, or -1 */
static int pair_start(struct pair *p, pthread_t *t, int cpu)
{
	*p = (struct pair){.cpu = cpu};
	if (pipe(p->ab) || pipe(p->ba) || pthread_create(t, NULL, pair_peer, p))
		return -1;
	while (!atomic_load(&p->tid))
		usleep(100);
	return 0;
}

static void pair_stop(struct pair *p, pthread_t t)
{
	close(p->ab[1]); /* the peer's read ends */
	pthread_join(t, NULL);
	close(p->ab[0]);
	close(p->ba[0]);
	close(p->ba[1]);
}

/* Seconds a hand-over takes by the clock, over SECS of them; -1 where the pipes fail. */
static double pair_run(struct pair *p, double secs)
{
	struct timespec a, b;
	double t = 0;
	long n = 0;
	char c = 0;

	clock_gettime(CLOCK_MONOTONIC, &a);
	while (t < secs) {
		for (int i = 0; i < 500; i++)
			if (write(p->ab[1], &c, 1) != 1 || read(p->ba[0], &c, 1) != 1)
				return -1;
		n += 500;
		clock_gettime(CLOCK_MONOTONIC, &b);
		t = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	}
	return t / (double)n;
}

static int open_event(const struct perf_event_attr *attr, int tid)
{
	struct perf_event_attr a = *attr;

	return (int)syscall(__NR_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* The calibration against what such a pair pays over a longer run (0.8 s with the events,
 * from their opening, as a job pays from attach): the same within the host's spread, at
 * the rate a recording samples at. A switch costs least in the events' first period; timed
 * from the opening, the calibration read 0.75-0.93 of a long run on a 2026-12 host, and
 * after the first period 0.8-1.2. A switch costs more at a higher rate: 1.3-1.4 us at 20
 * Hz, 2.1 at 99, 6.3 at 400 on that host. At 400 Hz the pair's cost cycles over 100-130 ms
 * (10 ms slices 13-22 us a hand-over), of which the calibration times 20 ms: it read
 * 0.62-1.05 of the long run there (median of 3: 0.70-1.03), so LOW is 0.6 at that rate. */
static void against_a_long_run(const char *t_case_name, int freq, double low)
{
	struct perf_event_attr attr = cal_attr();
	struct pair p;
	double cal, base, base2, ev, truth;
	int fds[2] = {-1, -1};
	cpu_set_t set, old;
	pthread_t t;

	attr.sample_freq = (unsigned long)freq;
	CHECK_INT(sched_getaffinity(0, sizeof(old), &old), 0);
	CPU_ZERO(&set);
	CPU_SET(sched_getcpu(), &set);
	CHECK_INT(sched_setaffinity(0, sizeof(set), &set), 0);
	cal = calibrate3(&attr);
	if (cal == -EACCES || cal == -EPERM || cal == -ENOENT || cal == -ENOSYS) {
		sched_setaffinity(0, sizeof(old), &old);
		SKIP("no perf events here (%s)", strerror((int)-cal));
	}
	CHECK(cal >= 0);
	CHECK_INT(pair_start(&p, &t, sched_getcpu()), 0);
	pair_run(&p, 0.05); /* warm */
	base = pair_run(&p, 0.2);
	fds[0] = open_event(&attr, (int)syscall(SYS_gettid));
	fds[1] = open_event(&attr, atomic_load(&p.tid));
	CHECK(fds[0] >= 0 && fds[1] >= 0);
	ev = pair_run(&p, 0.8);
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	pair_stop(&p, t);
	/* a thread that held an event pays part of it after (switches.c): a new pair */
	CHECK_INT(pair_start(&p, &t, p.cpu), 0);
	pair_run(&p, 0.05);
	base2 = pair_run(&p, 0.2);
	pair_stop(&p, t);
	sched_setaffinity(0, sizeof(old), &old);
	truth = (ev - fmin(base, base2)) / 2;
	printf("# a switch's events at %d Hz: calibrated %.2f us (median of 3), a pair's 0.8 s paid %.2f us (a "
	       "hand-over %.2f us, %.2f/%.2f us without)\n",
	       freq, cal * 1e6, truth * 1e6, ev * 1e6, base * 1e6, base2 * 1e6);
	CHECK(base > 0 && base2 > 0 && ev > 0);
	CHECK(truth > 0);
	CHECK(cal >= low * truth - 0.1e-6);
	CHECK(cal <= 1.5 * truth + 0.1e-6);
}

TEST(calibrate_against_a_long_run)
{
	against_a_long_run(t_case_name, 99, 0.75);
}

/* -F 20: a period is 50 ms of a thread's CPU time, longer than the calibration times (it
 * read 0.9-1.4 us against 1.6 before it ran the first period untimed) */
TEST(calibrate_against_a_long_run_at_20_hz)
{
	against_a_long_run(t_case_name, 20, 0.75);
}

TEST(calibrate_against_a_long_run_at_400_hz)
{
	against_a_long_run(t_case_name, 400, 0.6);
}

/* Busy threads beside the calibration: N of them, pinned to CPU where it is >= 0. */
static int start_spinners(pthread_t *t, int n, int cpu)
{
	pthread_attr_t a;
	cpu_set_t set;
	int k = 0;

	pthread_attr_init(&a);
	CPU_ZERO(&set);
	if (cpu >= 0) {
		CPU_SET(cpu, &set);
		pthread_attr_setaffinity_np(&a, sizeof(set), &set);
	}
	atomic_store(&spinning, true);
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[k], &a, spin, NULL) == 0)
			k++;
	pthread_attr_destroy(&a);
	return k;
}

static void stop_spinners(pthread_t *t, int n)
{
	atomic_store(&spinning, false);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/* On a machine with no CPU free (gpubpf attached to a job that fills it), the calibration
 * shares its CPU with a busy thread: it counts its two threads' CPU time, not the time
 * that passed, so the busy thread's turns are not read as the events' cost. Timed by the
 * clock, this read 2.6-3.0 us a switch beside busy threads where it read 0.6-0.7 alone;
 * with every batch in the mean, a busy thread's turns still cost the pair CPU time of its
 * own (2.97 us against 0.97 alone on a CI host; 9.1 against 7.7 us a hand-over here in
 * the batches it ran in). One spinner a CPU, free to move, then two pinned to the
 * calibration's own CPU, which the scheduler cannot move away. */
TEST(calibrate_beside_busy_threads)
{
	struct perf_event_attr attr = cal_attr();
	pthread_t t[64];
	cpu_set_t set;
	double alone, busy, pinned;
	int n, ncpu, cpu;

	alone = calibrate3(&attr);
	if (alone == -EACCES || alone == -EPERM || alone == -ENOENT || alone == -ENOSYS)
		SKIP("no perf events here (%s)", strerror((int)-alone));
	CHECK(alone >= 0);
	ncpu = sched_getaffinity(0, sizeof(set), &set) ? 1 : CPU_COUNT(&set);
	n = start_spinners(t, ncpu < 64 ? ncpu : 64, -1);
	busy = calibrate3(&attr);
	stop_spinners(t, n);
	CHECK(n == ncpu || n == 64);
	/* the calibration runs on the CPU its caller is on */
	cpu = sched_getcpu();
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	CHECK_INT(sched_setaffinity(0, sizeof(set), &set), 0);
	n = start_spinners(t, 2, cpu);
	pinned = calibrate3(&attr);
	stop_spinners(t, n);
	printf("# a switch's events: %.2f us alone, %.2f us beside %d busy threads, %.2f us beside 2 on "
	       "its CPU (medians of 3)\n",
	       alone * 1e6, busy * 1e6, ncpu, pinned * 1e6);
	CHECK_INT(n, 2);
	CHECK(busy >= 0 && pinned >= 0);
	CHECK(busy <= 2 * alone + 0.5e-6);
	CHECK(pinned <= 2 * alone + 0.5e-6);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(parse_status);
	RUN(parse_mutated_status);
	RUN(counts_from_the_first_look);
	RUN(share);
	RUN(over_the_limit_goes_per_cpu);
	RUN(text);
	RUN(live_look);
	RUN(calibrate_live);
	RUN(calibrate_against_a_long_run);
	RUN(calibrate_against_a_long_run_at_20_hz);
	RUN(calibrate_against_a_long_run_at_400_hz);
	RUN(calibrate_beside_busy_threads);
	return T_END();
}
