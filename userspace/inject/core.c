// SPDX-License-Identifier: MIT
/* libgpubpf_inject.so: entry point, USDT probes, and the watcher thread that attaches to
 * CUPTI while a gpubpf session has the probes attached, and detaches when it goes.
 *
 * Idle (no session): InitializeInjection only starts the watcher. CUPTI is not loaded, no
 * callback is subscribed, no activity kind is enabled: a CUDA call costs the process
 * nothing at all. The watcher reads two USDT semaphores a few times a second; the kernel
 * raises them while gpubpf's uprobes are attached and lowers them when the links go,
 * also when gpubpf is killed, so the library returns to idle on its own. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* Semaphores (see below), and every probe argument in a register: libbpf's USDT argument
 * decoder knows registers and register+offset, not symbol(%rip) operands. */
#define _SDT_HAS_SEMAPHORES 1
#define STAP_SDT_ARG_CONSTRAINT r
#include <sys/sdt.h>
#if defined(__x86_64__) && !defined(INJ_NOP1) /* INJ_NOP1: the GPU check's variant on sdt.h's nop */
/* A 5-byte nop at each probe, not sdt.h's 1-byte one: from Linux 6.18 (the GPU machines'
 * kernel too) a uprobe on x86-64's nop5 is turned, at its first hit, into a call to the
 * kernel's uprobe trampoline, a syscall: a hit's trap costs 0.27 us here, against
 * 0.54-0.73 us for the int3 on a 1-byte nop (tracefs probes, no program). Older kernels
 * trap on it with int3 as on any instruction. The call and the trampoline push below the
 * stack pointer: this file is built without a red zone (userspace/inject/Makefile.inc).
 * Bytes, not "nopl 0x0(%rax,%rax,1)": the probes' asm has operands, and the assembler may
 * drop a zero displacement. */
#undef _SDT_NOP
// clang-format off
#define _SDT_NOP .byte 0x0f; .byte 0x1f; .byte 0x44; .byte 0x00; .byte 0x00
// clang-format on
#endif

#include "backend.h"
#include "inject.h"

#define EXPORT __attribute__((visibility("default")))

/* The kernel adds 1 for every uprobe attached with the semaphore's offset (libbpf passes
 * it as ref_ctr_offset): non-zero exactly while some session listens. */
EXPORT volatile unsigned short gpubpf_launch_semaphore __attribute__((section(".probes")));
EXPORT volatile unsigned short gpubpf_records_semaphore __attribute__((section(".probes")));
EXPORT volatile unsigned short gpubpf_name_semaphore __attribute__((section(".probes")));
EXPORT volatile unsigned short gpubpf_status_semaphore __attribute__((section(".probes")));
EXPORT volatile unsigned short gpubpf_kname_semaphore __attribute__((section(".probes")));
EXPORT volatile unsigned short gpubpf_windows_semaphore __attribute__((section(".probes")));

/* Sampling settings; gpubpf may overwrite them while attached (bpf/cupti.h). */
EXPORT struct dev_config gpubpf_inject_config = {
    .magic = DEV_CONFIG_MAGIC,
    .version = DEV_CONFIG_VERSION,
    .max_rate = 1000,
    .period_ms = 1000,
    .mode = DEV_MODE_ALWAYS,
    .names_wanted = 1,
    .written = DEV_CONFIG_GPUBPF_PART,
};
_Static_assert(offsetof(struct dev_config, written) == DEV_CONFIG_GPUBPF_PART, "gpubpf writes this much");

/* Device time in windows (devwin.c), and what the backend has on now. */
static struct inj_sched sched;
static int backend_on;

struct inj_state inj;
static const struct inj_backend *backend = &inj_cupti_backend;
static int state = DEV_ST_IDLE;
static bool exiting;
static char status_text[256];
static bool started;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
/* Attach, detach and flush: the watcher's, InitializeInjection's and the exit handler's. */
static pthread_mutex_t backend_lock = PTHREAD_MUTEX_INITIALIZER;
static int pair_tries; /* CUPTI's dispatch timed this attach (time_dispatch) */

/* Set in a child of fork() (pthread_atfork). Its copy of this library has no watcher
 * thread and a copy of the parent's CUPTI state, and its probe sites may be calls into a
 * uprobe trampoline that Linux 6.18 does not map into the child: a child that reached one
 * died of SIGSEGV (e2e 80). So a forked child fires no probe and detaches nothing. */
static volatile bool forked_child;

static void on_fork_child(void)
{
	forked_child = true;
}

/* The probes. Arguments are plain integers and pointers: BPF reads them from registers
 * (libbpf's USDT argument specs), and reads what pointers point to with bounded reads. */
static void fire_launch(uint32_t corr, uint32_t cbinfo, uint32_t win, uint64_t prev_exit)
{
	if (!forked_child)
		DTRACE_PROBE4(gpubpf, launch, corr, cbinfo, win, prev_exit);
}

static void fire_batch(const struct dev_batch *b)
{
	if (gpubpf_records_semaphore && !forked_child)
		DTRACE_PROBE1(gpubpf, records, b);
}

static void fire_name(uint32_t id, const char *name)
{
	if (gpubpf_name_semaphore && !forked_child)
		DTRACE_PROBE2(gpubpf, name, id, name);
}

static void fire_kname(uint64_t handle, const char *name)
{
	if (gpubpf_kname_semaphore && !forked_child)
		DTRACE_PROBE2(gpubpf, kname, handle, name);
}

static void fire_windows(uint32_t id, uint32_t k)
{
	if (gpubpf_windows_semaphore && !forked_child)
		DTRACE_PROBE2(gpubpf, windows, id, k);
}

static void fire_status(void)
{
	if (gpubpf_status_semaphore && !forked_child)
		DTRACE_PROBE3(gpubpf, status, state, status_text, &gpubpf_inject_config);
}

static const struct inj_ops usdt_ops = {
    .launch = fire_launch,
    .batch = fire_batch,
    .name = fire_name,
    .kname = fire_kname,
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The calling thread's wait for a CPU so far (ns): /proc/thread-self/schedstat's second
 * field, the scheduler's sched_info.run_delay, exact for a thread that reads it while it
 * runs. 0 where it cannot be read (no /proc in the job's mount namespace, a kernel
 * without sched_info, which prints zeros). */
static uint64_t run_delay_ns(void)
{
	char buf[96];
	uint64_t on_cpu, delay;
	ssize_t n;
	int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return sscanf(buf, "%" SCNu64 " %" SCNu64, &on_cpu, &delay) == 2 ? delay : 0;
}

/* A stopwatch for what the watcher's CUPTI work costs the job: its wall time less its
 * waits for a CPU. Beside a busy machine's other tasks a window's switches took 6.6 ms
 * of wall time where they take 0.42 (tests/e2e/82's model), and the budget then spaced
 * windows 8 periods apart for time the watcher spent preempted; the time it spends
 * blocked (a real CUPTI waiting on the driver) still counts. */
static uint64_t own_ns(void)
{
	return mono_ns() - run_delay_ns();
}

static bool session_present(void)
{
	return gpubpf_launch_semaphore && gpubpf_records_semaphore;
}

/* Without windows (DEV_MODE_ALWAYS): follow at most max_rate calls a second, 1 in N, N
 * from the rate seen in the last interval. A random 1-in-N keeps the estimate (seen/sampled
 * x sampled time) unbiased. */
static void plan_sampling(double now_ms, double *last_ms, uint64_t *last_seen)
{
	volatile struct dev_config *vc = &gpubpf_inject_config;
	struct dev_config cfg = {.magic = vc->magic, .max_rate = vc->max_rate}; /* gpubpf may be writing it */
	uint64_t seen = __atomic_load_n(&inj.ctr.launches_seen, __ATOMIC_RELAXED) +
			__atomic_load_n(&inj.ctr.copies_seen, __ATOMIC_RELAXED);
	double dt = (now_ms - *last_ms) / 1e3;
	uint32_t n = 1;

	if (cfg.magic != DEV_CONFIG_MAGIC)
		return;
	if (dt > 0 && cfg.max_rate > 0) {
		double rate = (double)(seen - *last_seen) / dt;
		double want = rate / cfg.max_rate;

		n = want > 1 ? (uint32_t)(want + 0.999) : 1;
		if (n > 1u << 20)
			n = 1u << 20;
	}
	__atomic_store_n(&inj.every_n, n, __ATOMIC_RELAXED);
	*last_ms = now_ms;
	*last_seen = seen;
}

static void set_state(int st, const char *why)
{
	state = st;
	snprintf(status_text, sizeof(status_text), "%s", why ? why : "");
	if (st != DEV_ST_IDLE && st != DEV_ST_ATTACHED && st != DEV_ST_SYNTHETIC && getenv("GPUBPF_INJECT_DEBUG"))
		fprintf(stderr, "gpubpf-inject: staying idle: %s\n", status_text);
	fire_status();
}

static bool attached(void)
{
	return state == DEV_ST_ATTACHED || state == DEV_ST_SYNTHETIC;
}

/* Under backend_lock. A new session starts as the library always did (everything
 * followed: an exact session, a program shorter than gpubpf's first look) until it asks
 * for windows; the cost is measured again for it. */
static void attach_now(void)
{
	volatile struct dev_config *cfg = &gpubpf_inject_config;
	char why[200] = "";
	uint64_t t0;
	int st;

	inj_new_epoch(&inj);
	/* A session that wants windows attached the windows probe before launch's. */
	cfg->mode = gpubpf_windows_semaphore ? DEV_MODE_WINDOWS : DEV_MODE_ALWAYS;
	cfg->duty_ppm = 0;
	/* gpubpf's first write of this attach (it knows the config's address then, and tells
	 * it the launch probes' state from there on) starts the cost measurement */
	cfg->seq = 0;
	/* callbacks on between windows until gpubpf says every launch it counted is named */
	cfg->names_wanted = 1;
	memset((void *)&cfg->cost, 0, sizeof(cfg->cost));
	memset((void *)cfg->win, 0, sizeof(cfg->win));
	memset(&sched, 0, sizeof(sched));
	/* in windows, nothing is followed before the first window opens */
	inj.windowed = cfg->mode == DEV_MODE_WINDOWS;
	inj.win_id = 0;
	inj.probe_gen = &cfg->probe_gen;
	backend_on = inj.windowed ? INJ_CB : INJ_CB | INJ_ACT;
	t0 = own_ns();
	inj_trace("attach: %s", inj.windowed ? "windows" : "every launch");
	st = backend->attach(&inj, why, sizeof(why));
	inj_trace("attach: state %d: %s", st, why);
	pair_tries = 0;
	/* CUPTI's set-up (subscribe, callbacks on): the watcher's, once; in gpubpf's cost */
	cfg->cost.fixed_us = (uint32_t)((own_ns() - t0) / 1000);
	set_state(st, why);
}

/* Under backend_lock, attached, on the watcher: CUPTI's dispatch of a callback pair timed
 * (dev_costs.pair_ns) while the cost is measured, once the job has launched. Not at
 * attach: that may run inside cuInit (InitializeInjection), where no driver call is to be
 * made; a job that launches has its driver up. Its time is spent once, in gpubpf's cost;
 * tried again at the next steps where CUPTI could not be called. */
static void time_dispatch(volatile struct dev_config *cfg)
{
	uint64_t t0;

	if (pair_tries >= 3 || !inj.windowed || !backend->dispatch_pair || cfg->cost.state != DEV_COST_MEASURING ||
	    !__atomic_load_n(&inj.ctr.launches_seen, __ATOMIC_RELAXED))
		return;
	pair_tries++;
	t0 = own_ns();
	cfg->cost.pair_ns = backend->dispatch_pair();
	cfg->cost.fixed_us += (uint32_t)((own_ns() - t0) / 1000);
	if (cfg->cost.pair_ns)
		pair_tries = 3;
	inj_trace("CUPTI's dispatch of a callback pair: %u ns, timed in %llu us", cfg->cost.pair_ns,
		  (unsigned long long)(mono_ns() - t0) / 1000);
}

/* Under backend_lock, attached: the windows' step (devwin.c). Returns when to look again. */
static uint64_t schedule(uint64_t now)
{
	static uint32_t announced;
	uint64_t wake, at = now, cost = 0;
	int want = inj_sched_step(&sched, &inj, &gpubpf_inject_config, now, &wake);

	if (want != backend_on && backend->set) {
		uint64_t w0 = own_ns();
		bool done = backend->set(want);

		/* callbacks switched (or CUPTI is on its way down): a call in flight may never
		 * see its exit callback */
		if (((want ^ backend_on) & INJ_CB) || !done)
			__atomic_add_fetch(&inj.cb_gen, 1, __ATOMIC_ACQ_REL);
		/* Not there yet (a window's records still draining, CUPTI on its way down):
		 * neither state, so that the next step asks again whatever it wants. Left at
		 * the old state, a window due meanwhile wanted what the old state was, was
		 * never set up, and followed nothing (the drain ran on with callbacks off until
		 * its end: 0 launches in one window of several, device-bound, tests/e2e/82). */
		backend_on = done ? want : INJ_UNSET;
		if (!done && wake > now + INJ_RETRY_NS)
			wake = now + INJ_RETRY_NS; /* again soon */
		/* what the switch cost: its time less its waits for a CPU (own_ns) */
		cost = own_ns() - w0;
		at = mono_ns();
	}
	/* The windows follow what is on, not what is wanted; a window's finalize (run by
	 * the set above) counts in its switches. */
	inj_sched_switched(&sched, &inj, &gpubpf_inject_config, want == backend_on ? want : 0, at, cost);
	if (inj.win_id && inj.win_id != announced) {
		announced = inj.win_id;
		fire_windows(announced, gpubpf_inject_config.win[announced % DEV_WIN_RING].k);
	}
	return wake;
}

/* One look at the semaphores; the watcher calls it a few times a second. */
static void watch_once(double now, double *last_plan, uint64_t *last_seen, double *last_flush, bool *status_seen)
{
	bool present = session_present(), status_on = gpubpf_status_semaphore != 0;

	pthread_mutex_lock(&backend_lock);
	if (present && state == DEV_ST_IDLE && !exiting) {
		*last_plan = now;
		*last_seen = inj.ctr.launches_seen + inj.ctr.copies_seen;
		attach_now();
		*status_seen = status_on;
	} else if (!present && state != DEV_ST_IDLE) {
		if (attached()) {
			inj_trace("detach: the session is gone");
			backend->detach(false);
		}
		inj.windowed = false;
		inj.win_id = 0;
		__atomic_store_n(&inj.timing.on, false, __ATOMIC_RELEASE);
		set_state(DEV_ST_IDLE, "no gpubpf session");
	}
	pthread_mutex_unlock(&backend_lock);
	if (state == DEV_ST_ATTACHED || state == DEV_ST_SYNTHETIC) {
		if (now - *last_plan >= 200)
			plan_sampling(now, last_plan, last_seen);
		if (now - *last_flush >= 500) {
			pthread_mutex_lock(&backend_lock);
			if (attached())
				backend->flush();
			pthread_mutex_unlock(&backend_lock);
			*last_flush = now;
		}
	}
	/* A second session (or one that attached status last) learns the state too. */
	if (status_on && !*status_seen)
		fire_status();
	*status_seen = status_on;
}

static void *watcher(void *arg)
{
	double last_plan = 0, last_flush = 0, last_look = 0;
	uint64_t last_seen = 0, wake = 0;
	bool status_seen = false;
	sigset_t all;

	(void)arg;
	/* Never take the application's signals. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	prctl(PR_SET_NAME, "gpubpf-inject");
	for (;;) {
		/* A look every 100 ms attached (timely records), 250 ms idle (a few reads a
		 * second); in between, the windows' switches on time. */
		uint64_t now = mono_ns(), next = now + (state == DEV_ST_IDLE ? 250 : 100) * 1000000ull;
		struct timespec ts;

		/* a switch that is due (a window's end, after a set-up that outlasted its
		 * slot) is made now, not a look later */
		if (wake && wake < next)
			next = wake > now ? wake : now;
		ts.tv_sec = (time_t)(next / 1000000000ull);
		ts.tv_nsec = (long)(next % 1000000000ull);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		now = mono_ns();
		if ((double)now / 1e6 - last_look >= 95 || !attached()) {
			last_look = (double)now / 1e6;
			watch_once(last_look, &last_plan, &last_seen, &last_flush, &status_seen);
		}
		wake = 0;
		pthread_mutex_lock(&backend_lock);
		if (attached() && !exiting) {
			time_dispatch(&gpubpf_inject_config);
			wake = schedule(mono_ns());
		}
		pthread_mutex_unlock(&backend_lock);
	}
	return NULL;
}

/* The process exits: what CUPTI still holds (a program of half a second ends with all
 * its records in CUPTI's buffers) is flushed and delivered while gpubpf listens. */
static void at_exit(void)
{
	if (forked_child)
		return;
	pthread_mutex_lock(&backend_lock);
	exiting = true;
	if (attached()) {
		backend->detach(true);
		set_state(DEV_ST_IDLE, "the process exited");
	}
	pthread_mutex_unlock(&backend_lock);
}

static int start(void)
{
	pthread_attr_t a;
	pthread_t t;
	const char *e;
	int err = 0;

	pthread_mutex_lock(&start_lock);
	if (started)
		goto out;
	e = getenv("GPUBPF_INJECT_DEBUG");
	if (e && *e)
		inj_debug = atoi(e) > 1 ? atoi(e) : 1;
	e = getenv("GPUBPF_INJECT_MAX_RATE");
	if (e && *e)
		gpubpf_inject_config.max_rate = (uint32_t)strtoul(e, NULL, 10);
	err = inj_state_init(&inj, &usdt_ops);
	if (err)
		goto out;
	/* A session that started the job (record --) put its probes in while the dynamic
	 * linker loaded this library, before the driver called us: follow from the very
	 * first launch, rather than from the watcher's first look a quarter second later. */
	if (session_present()) {
		pthread_mutex_lock(&backend_lock);
		attach_now();
		if (attached())
			schedule(mono_ns()); /* in windows: off until the first one */
		pthread_mutex_unlock(&backend_lock);
	}
	atexit(at_exit);
	pthread_atfork(NULL, NULL, on_fork_child);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 256 * 1024);
	err = -pthread_create(&t, &a, watcher, NULL);
	pthread_attr_destroy(&a);
	if (err) {
		inj_state_fini(&inj);
		goto out;
	}
	started = true;
out:
	pthread_mutex_unlock(&start_lock);
	return err;
}

/* Called by the CUDA driver (CUDA_INJECTION64_PATH) during cuInit. Returns 1 (success)
 * even when it cannot start: the job must run on whatever happens here. */
EXPORT int InitializeInjection(void)
{
	int err = start();

	if (err && getenv("GPUBPF_INJECT_DEBUG"))
		fprintf(stderr, "gpubpf-inject: cannot start: %s\n", strerror(-err));
	return 1;
}

/* ---- test entry points (tests/workloads/inject) --------------------------------------
 * A producer without a GPU drives the production path: the same watcher, probes,
 * sampling and record handling, with a backend that needs no CUPTI. */

EXPORT int gpubpf_inject_test_start(void)
{
	backend = &inj_synthetic_backend;
	return start();
}

EXPORT int gpubpf_inject_test_state(void)
{
	return state;
}

EXPORT const char *gpubpf_inject_test_status(void)
{
	return status_text;
}
