// SPDX-License-Identifier: MIT
/* Device time in windows, the injection library's side (userspace/inject/devwin.c and the
 * timing in records.c, the very code libgpubpf_inject.so runs): the cost measurement on
 * launch calls that really cost more while activity is on, and the schedule of windows
 * over many periods on a clock the test drives. */
#include <time.h>

#include "test.h"

#include "../../userspace/inject/devwin.c"
#include "../../userspace/inject/records.c"

static struct inj_state st;
static struct dev_config cfg;
static struct inj_sched sc;
static int nlaunch, launch_win[4096];

static void rec_launch(uint32_t corr, uint32_t cbinfo, uint32_t win)
{
	(void)corr;
	(void)cbinfo;
	if (nlaunch < 4096)
		launch_win[nlaunch] = (int)win;
	nlaunch++;
}
static void rec_batch(const struct dev_batch *b)
{
	(void)b;
}
static void rec_name(uint32_t id, const char *name)
{
	(void)id;
	(void)name;
}
static void rec_kname(uint64_t handle, const char *name)
{
	(void)handle;
	(void)name;
}

static const struct inj_ops ops = {rec_launch, rec_batch, rec_name, rec_kname};

static void reset(uint32_t period_ms)
{
	inj_state_fini(&st);
	inj_state_init(&st, &ops);
	memset(&cfg, 0, sizeof(cfg));
	memset(&sc, 0, sizeof(sc));
	cfg.magic = DEV_CONFIG_MAGIC;
	cfg.version = DEV_CONFIG_VERSION;
	cfg.mode = DEV_MODE_WINDOWS;
	cfg.period_ms = period_ms;
	cfg.seq = 1; /* gpubpf wrote it */
	nlaunch = 0;
}

static void spin_ns(uint64_t ns)
{
	uint64_t t0 = now_ns();

	while (now_ns() - t0 < ns)
		;
}

/* One runtime launch with its nested driver call, as CUPTI calls back; it takes BASE ns,
 * EXTRA more while activity is on (what the watcher last set). */
static uint32_t corr = 100;
static void launch(uint64_t base, uint64_t extra, int on)
{
	inj_api_enter(&st, 0, INJ_API_LAUNCH, 1, 211, corr++, "cudaLaunchKernel");
	inj_api_enter(&st, 0, INJ_API_LAUNCH, 2, 307, corr++, "cuLaunchKernel");
	spin_ns(base + ((on & INJ_ACT) ? extra : 0));
	inj_api_exit(&st);
	inj_api_exit(&st);
}

/* The watcher's step and switch, at the real time. */
static int step_now(void)
{
	uint64_t wake, t = now_ns();
	int want = inj_sched_step(&sc, &st, &cfg, t, &wake);

	inj_sched_switched(&sc, &st, &cfg, want, t, t);
	return want;
}

/* Launches of 2 us, 3 us dearer with activity on, 20 a look, until the measurement ends
 * (WANT: what the last step wanted); what the watcher wants then. */
static int measure_to_end(int want)
{
	for (int guard = 0; cfg.cost.state == DEV_COST_MEASURING && guard < 1000000; guard++) {
		for (int i = 0; i < 20; i++)
			launch(2000, 3000, want);
		want = step_now();
	}
	return want;
}

TEST(slots)
{
	CHECK_INT(inj_slots(10000, 1000000000ull), 100);
	CHECK_INT(inj_slots(12345, 1000000000ull), 82); /* ceil(1/0.012345) = 82 */
	CHECK_INT(inj_slots(1000, 50000000ull), 25);	/* no slot under 2 ms */
	CHECK_INT(inj_slots(0, 1000000000ull), 1);
	CHECK_INT(inj_slots(1000000, 1000000000ull), 1);
}

TEST(trimmed_mean)
{
	uint32_t v[] = {9, 1, 8, 2, 7, 100000, 3, 6, 4, 100000};

	CHECK_INT(inj_tmean(v, 10), 3); /* 1..5: blocked and preempted calls left out */
	CHECK_INT(inj_tmean(v, 0), 0);
}

/* Launch calls that cost 3 us more with activity on: the measurement finds it, with
 * callbacks on throughout; the launches of the "on" halves are followed as a window's would
 * be (so the probe's cost is timed too), under DEV_WIN_MEASURE, never counted. */
TEST(cost_measured_on_real_calls)
{
	int want = 0, guard = 0;

	reset(100);
	want = step_now();
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	while (cfg.cost.state == DEV_COST_MEASURING && guard++ < 1000000) {
		for (int i = 0; i < 20; i++)
			launch(2000, 3000, want);
		want = step_now();
		CHECK(want & INJ_CB || cfg.cost.state != DEV_COST_MEASURING);
	}
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	CHECK(nlaunch > 0);
	for (int i = 0; i < nlaunch && i < 4096; i++)
		if ((launch_win[i] & ~DEV_WIN_NESTED) != DEV_WIN_MEASURE)
			T_FAIL("launch %d of the measurement followed under window %x", i, launch_win[i]);
	CHECK(cfg.cost.calls >= 2 * INJ_MEASURE_MIN);
	printf("# measured: on %llu ns, off %llu ns, callbacks %llu ns, %u calls\n", (unsigned long long)cfg.cost.on_ns,
	       (unsigned long long)cfg.cost.off_ns, (unsigned long long)cfg.cost.callback_ns, cfg.cost.calls);
	/* 3 us of activity, within a microsecond either way on a loaded machine */
	CHECK(cfg.cost.on_ns > cfg.cost.off_ns + 2000 && cfg.cost.on_ns < cfg.cost.off_ns + 4000);
	CHECK(cfg.cost.off_ns >= 2000 && cfg.cost.off_ns < 5000);
	CHECK(cfg.cost.callback_ns > 0 && cfg.cost.callback_ns < 2000);
	/* done: all off until gpubpf plans a duty */
	CHECK_INT(step_now(), 0);
}

/* The measurement's switches (CUPTI set up, finalized, set up again: 300 us each here)
 * are spent once, whatever comes after: into the one-off part gpubpf counts in the cost,
 * added to what attach spent (the library's core sets that), never to a window's. */
TEST(measurement_switches_are_a_one_off_cost)
{
	uint64_t wake, spent = 0;
	int want, last = 0, guard = 0;

	reset(100);
	cfg.cost.fixed_us = 250; /* CUPTI's set-up at attach */
	do {
		uint64_t t = now_ns();

		want = inj_sched_step(&sc, &st, &cfg, t, &wake);
		if (want != last && cfg.cost.state == DEV_COST_MEASURING) {
			inj_sched_switched(&sc, &st, &cfg, want, t, t + 300000);
			spent += 300000;
		} else {
			inj_sched_switched(&sc, &st, &cfg, want, t, t);
		}
		last = want;
		for (int i = 0; i < 20; i++)
			launch(2000, 3000, want);
	} while (cfg.cost.state == DEV_COST_MEASURING && guard++ < 1000000);
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	CHECK(spent >= 600000); /* on, off at least */
	CHECK_INT(cfg.cost.fixed_us, 250 + spent / 1000);
	CHECK_INT(cfg.cost.switch_ns, spent); /* and the first window is planned from them */
}

/* A job whose launches get dearer as it runs (5 us more each phase), launching 600 calls
 * between two looks: the first "off" phase fills only its half of the timed calls, the
 * last one has its own, and the drift cancels (3 us of activity found, not 8). */
TEST(drift_cancels_with_many_calls_a_look)
{
	int want = 0, guard = 0;

	reset(100);
	want = step_now();
	while (cfg.cost.state == DEV_COST_MEASURING && guard++ < 100000) {
		uint64_t base = 2000 + 3000ull * st.timing.phase;

		for (int i = 0; i < 600; i++)
			launch(base, 3000, want);
		want = step_now();
	}
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	printf("# drifting: on %llu ns, off %llu ns\n", (unsigned long long)cfg.cost.on_ns,
	       (unsigned long long)cfg.cost.off_ns);
	CHECK(cfg.cost.on_ns > cfg.cost.off_ns + 2000 && cfg.cost.on_ns < cfg.cost.off_ns + 4000);
}

/* A device-bound job: its first launches fill an empty queue and return in 2 us, later
 * ones wait for a kernel to end (20 us), and so do those after the finalize once the
 * queue the stall drained is full again (the first 40 of the last phase: 2 us). Activity
 * adds 1 us. The warm-up and the settling keep the fast ones out: 1 us found, not 18. */
TEST(device_bound_start_not_charged_to_cupti)
{
	uint64_t t0 = 0;
	int want = 0, guard = 0, fast2 = 40;

	reset(100);
	want = step_now();
	while (cfg.cost.state == DEV_COST_MEASURING && guard++ < 100000) {
		for (int i = 0; i < 20; i++) {
			bool slow;

			t0 = t0 ? t0 : now_ns();
			slow = now_ns() - t0 > 50000000ull && !(st.timing.phase == 2 && fast2 > 0);
			if (st.timing.phase == 2 && fast2 > 0 &&
			    st.timing.n[0][INJ_PROBES_OUT] > st.timing.off1[INJ_PROBES_OUT])
				fast2--;
			launch(slow ? 20000 : 2000, 1000, want);
		}
		want = step_now();
	}
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	printf("# device-bound: on %llu ns, off %llu ns\n", (unsigned long long)cfg.cost.on_ns,
	       (unsigned long long)cfg.cost.off_ns);
	CHECK(cfg.cost.off_ns > 18000);
	CHECK(cfg.cost.on_ns < cfg.cost.off_ns + 2500);
}

/* gpubpf's launch probes go in and out on its windows' clock, and their trap (3 us here)
 * costs a launch more than CUPTI's activity does (1.5 us): in the first "off" phase they
 * are in for 28 calls of every 32, after it for 4. Timed regardless, the phases would say
 * activity costs 0.3 us; compared in one state (in, or out), 1.5 us. A call that a switch falls
 * inside (it takes 50 us here) is kept in neither. */
TEST(launch_probes_state_matched)
{
	uint32_t n = 0;
	int want = 0, guard = 0, slow = 0;

	reset(100);
	st.probe_gen = &cfg.probe_gen;
	cfg.probe_gen = DEV_PROBE_GEN_IN;
	want = step_now();
	while (cfg.cost.state == DEV_COST_MEASURING && guard++ < 100000) {
		for (int i = 0; i < 20; i++, n++) {
			bool in = st.timing.phase == 0 ? n % 32 >= 4 : n % 32 < 4;
			uint32_t gen = (cfg.probe_gen & ~3u) + (in ? DEV_PROBE_GEN_IN : DEV_PROBE_GEN_OUT);

			inj_api_enter(&st, 0, INJ_API_LAUNCH, 2, 307, corr++, "cuLaunchKernel");
			if (gen != cfg.probe_gen) {
				/* a switch (the next count) inside this call */
				cfg.probe_gen = gen + 4;
				spin_ns(50000);
			}
			spin_ns(2000 + (in ? 3000 : 0) + ((want & INJ_ACT) ? 1500 : 0));
			inj_api_exit(&st);
		}
		want = step_now();
	}
	printf("# probes switching: on %llu ns, off %llu ns, state %u\n", (unsigned long long)cfg.cost.on_ns,
	       (unsigned long long)cfg.cost.off_ns, cfg.cost.probes);
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	CHECK(cfg.cost.probes != DEV_PROBES_MIXED);
	CHECK(cfg.cost.on_ns > cfg.cost.off_ns + 1000 && cfg.cost.on_ns < cfg.cost.off_ns + 2200);
	/* a switch falls in one call of 16: hundreds; a preempted call may be as slow */
	for (int h = 0; h < 2; h++)
		for (int p = 0; p < INJ_PROBE_STATES; p++)
			for (uint32_t i = 0; i < st.timing.n[h][p] && i < INJ_TIMED_MAX; i++)
				slow += st.timing.ns[h][p][i] > 40000;
	if (slow > 3)
		T_FAIL("%d calls a switch fell in were kept", slow);
	st.probe_gen = NULL;
}

/* No call is kept before gpubpf has written this attach's config (seq): until then it
 * cannot say which calls met its launch probes. The warm-up runs meanwhile, and ends no
 * earlier than the write. */
TEST(measurement_waits_for_gpubpf)
{
	int want;

	reset(100);
	cfg.seq = 0;
	want = step_now();
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	/* launches for twice the warm-up: nothing kept, still the first phase */
	for (uint64_t t0 = now_ns(); now_ns() - t0 < 2 * INJ_MEASURE_WARMUP_NS;) {
		for (int i = 0; i < 20; i++)
			launch(2000, 3000, want);
		want = step_now();
	}
	CHECK_INT(st.timing.phase, 0);
	CHECK_INT(st.timing.n[0][INJ_PROBES_OUT] + st.timing.n[0][INJ_PROBES_IN], 0);
	/* written: on from here, at once (the warm-up is over) */
	cfg.seq = 1;
	want = measure_to_end(want);
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	CHECK(cfg.cost.on_ns > cfg.cost.off_ns + 2000 && cfg.cost.on_ns < cfg.cost.off_ns + 4000);
}

TEST(idle_job_measured_again_later)
{
	uint64_t wake, t = 1000000000ull;
	int want;

	reset(100);
	want = inj_sched_step(&sc, &st, &cfg, t, &wake);
	CHECK(want & INJ_CB);
	/* no launch yet: still waiting for the first, callbacks on (they cost nothing) */
	want = inj_sched_step(&sc, &st, &cfg, t + INJ_MEASURE_NS, &wake);
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	CHECK_INT(want, INJ_CB);
	want = inj_sched_step(&sc, &st, &cfg, t + INJ_MEASURE_WAIT_NS, &wake);
	CHECK_INT(cfg.cost.state, DEV_COST_IDLE);
	CHECK_INT(want, 0);
	want = inj_sched_step(&sc, &st, &cfg, t + INJ_MEASURE_WAIT_NS + INJ_REMEASURE_NS, &wake);
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
}

/* The measurement's "on" phase timed no call (seen 1 run in 15 on the CUPTI model, in
 * a launch-bound loop) where its first phase had all of its: the job launches, and the
 * measurement is tried again at once rather than in INJ_REMEASURE_NS, whose windows would
 * go uncorrected for what CUPTI pushes out of them; once only, in a row. */
static void on_phase_times_nothing(void)
{
	int want = step_now(), guard = 0;

	while (st.timing.phase == 0 && cfg.cost.state == DEV_COST_MEASURING && guard++ < 1000000) {
		for (int i = 0; i < 20; i++)
			launch(2000, 3000, want);
		want = step_now();
	}
	/* no launch from here: the "on" phase runs its time out */
	for (uint64_t t0 = now_ns(); cfg.cost.state == DEV_COST_MEASURING && now_ns() - t0 < INJ_MEASURE_NS;)
		step_now();
}

TEST(on_phase_with_no_call_measured_again_at_once)
{
	uint64_t wake;

	reset(100);
	on_phase_times_nothing();
	CHECK_INT(cfg.cost.state, DEV_COST_IDLE);
	CHECK(sc.retry_at <= now_ns());
	inj_sched_step(&sc, &st, &cfg, now_ns(), &wake);
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	/* the same again: 2 s on, as for a job that does not launch */
	on_phase_times_nothing();
	CHECK_INT(cfg.cost.state, DEV_COST_IDLE);
	CHECK(sc.retry_at >= now_ns() + INJ_REMEASURE_NS / 2);
	/* and a measurement that completes starts the count again */
	inj_sched_step(&sc, &st, &cfg, sc.retry_at, &wake);
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	CHECK(!sc.retried);
}

/* Attached at cuInit, the job launches only once its context is up, 400 ms later (an
 * H100's): the measurement's time runs from the first launch, and it completes. */
TEST(measurement_waits_for_the_first_launch)
{
	uint64_t wake, t0 = now_ns();
	int want;

	reset(100);
	want = inj_sched_step(&sc, &st, &cfg, t0, &wake);
	CHECK_INT(want, INJ_CB);
	want = inj_sched_step(&sc, &st, &cfg, t0 + 400000000ull, &wake);
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	/* launches from here, on the real clock (before t0 + 400 ms: the steps' clock only
	 * moves on) */
	want = measure_to_end(want);
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	CHECK(cfg.cost.on_ns > cfg.cost.off_ns + 2000);
}

/* A real PyTorch loop's first half second after its first launch: a few launches of
 * milliseconds (modules load, kernels are tuned), then 10,000 a second. Its first phase
 * waits for the steady ones (it ended with too few calls, device time came 2 s later),
 * and times none of the slow ones. */
TEST(measurement_waits_for_steady_launches)
{
	int want;

	reset(100);
	want = step_now();
	for (int i = 0; i < 12; i++) {
		launch(1500000, 3000, want); /* 1.5 ms each, one look apart */
		want = step_now();
		spin_ns(20000000);
		want = step_now();
	}
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	CHECK_INT(st.timing.phase, 0);
	CHECK(st.timing.seen && !st.timing.first);
	want = measure_to_end(want);
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	CHECK(cfg.cost.on_ns > cfg.cost.off_ns + 2000 && cfg.cost.on_ns < cfg.cost.off_ns + 4000);
	CHECK(cfg.cost.off_ns < 5000);
}

/* Activity goes on once, for the measurement's middle phase, then off for good: on a real
 * driver a launch after activity was on costs more until CUPTI is finalized, so activity
 * is never on and off in slices (the last "off" phase comes after a finalize). */
TEST(measurement_turns_activity_on_once)
{
	int want = 0, guard = 0, ons = 0, offs = 0, was = 0;

	reset(100);
	want = step_now();
	CHECK(!(want & INJ_ACT));
	while (cfg.cost.state == DEV_COST_MEASURING && guard++ < 1000000) {
		for (int i = 0; i < 20; i++)
			launch(2000, 3000, want);
		want = step_now();
		if (cfg.cost.state == DEV_COST_MEASURING) {
			ons += (want & INJ_ACT) && !was;
			offs += !(want & INJ_ACT) && was;
			was = want & INJ_ACT;
		}
	}
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	CHECK_INT(ons, 1);
	CHECK_INT(offs, 1);
	CHECK(!(want & INJ_ACT));
}

/* A job that does not launch for INJ_MEASURE_WAIT_NS: idle, and activity never went on. */
TEST(idle_first_half_never_turns_activity_on)
{
	uint64_t wake, t = 1000000000ull;
	int want;

	reset(100);
	want = inj_sched_step(&sc, &st, &cfg, t, &wake);
	CHECK_INT(want, INJ_CB);
	want = inj_sched_step(&sc, &st, &cfg, t + INJ_MEASURE_WAIT_NS, &wake);
	CHECK_INT(cfg.cost.state, DEV_COST_IDLE);
	CHECK_INT(want, 0);
}

/* 400 periods on a driven clock at a 5% duty of 100 ms: one window a period, 20 slots,
 * the slot drawn uniformly, launches followed only inside, each under its window's id. */
TEST(one_window_a_period_at_random)
{
	const uint64_t P = 100000000ull, t0 = 7 * P + 1234;
	uint32_t hist[20] = {0}, windows = 0;
	uint64_t t = t0, wake;
	int want = 0, inside = 0, outside_followed = 0;

	reset(100);
	cfg.cost.state = DEV_COST_DONE;
	cfg.duty_ppm = 50000;
	while (t < t0 + 400 * P) {
		int before = nlaunch;
		uint32_t id;

		want = inj_sched_step(&sc, &st, &cfg, t, &wake);
		inj_sched_switched(&sc, &st, &cfg, want, t, t);
		id = __atomic_load_n(&st.win_id, __ATOMIC_RELAXED);
		/* a launch now: followed exactly when a window is open */
		launch(0, 0, want);
		if (id) {
			inside++;
			if (nlaunch != before + 1 || launch_win[before] != (int)id)
				T_FAIL("a launch in window %u was not followed under it", id);
		} else if (nlaunch != before) {
			outside_followed++;
		}
		CHECK(wake > t);
		/* the watcher wakes at the switch, or sooner */
		t = wake < t + 3 * P / 100 ? wake : t + 3 * P / 100;
	}
	CHECK_INT(outside_followed, 0);
	CHECK(inside > 0);
	for (uint32_t i = 1; i < cfg.win_next; i++) {
		const struct dev_win *w = &cfg.win[i % DEV_WIN_RING];

		if (w->id != i || !w->close)
			continue;
		windows++;
		CHECK_INT(w->k, 20);
		CHECK_INT(w->slot_close - w->slot_open, P / 20);
		CHECK(w->open == w->slot_open && w->close == w->slot_close);
		CHECK_INT(w->slot_open / P, w->period);
		hist[(w->slot_open % P) / (P / 20)]++;
	}
	CHECK_INT(cfg.win_next - 1, 401); /* one a period touched (400 and the start of one), none skipped */
	CHECK(windows >= DEV_WIN_RING - 2);
	/* the slots drawn are spread over the period (63 windows in the ring: no slot takes
	 * more than a fifth of them) */
	for (int i = 0; i < 20; i++)
		CHECK(hist[i] < windows / 5);
}

/* The watcher slept through a whole slot (a starved CPU): the window opens from the time
 * it wakes, for the slot's length, and its books say when it really was open. */
TEST(late_window_stands_in_from_then)
{
	const uint64_t P = 100000000ull;
	uint64_t t = 50 * P, wake;
	int want;

	reset(100);
	cfg.cost.state = DEV_COST_DONE;
	cfg.duty_ppm = 100000;
	want = inj_sched_step(&sc, &st, &cfg, t, &wake);
	CHECK_INT(want, 0);
	{
		volatile struct dev_win *w = &cfg.win[sc.cur - 1];
		uint64_t so = w->slot_open, len = w->slot_close - w->slot_open, late = so + len + 1000;

		want = inj_sched_step(&sc, &st, &cfg, late, &wake);
		CHECK_INT(want, INJ_CB | INJ_ACT);
		CHECK_INT(w->open, late);
		CHECK_INT(w->slot_close - w->slot_open, len);
		CHECK_INT(wake, late + len);
		want = inj_sched_step(&sc, &st, &cfg, late + len, &wake);
		CHECK_INT(want, 0);
		CHECK_INT(w->close, late + len);
	}
}

/* A window closed while a launch was inside its call: CUPTI stops calling back, so its exit
 * never comes. The next launch, in the next window, is a call of its own, followed under
 * that window (not a nested call of the stale one, under the old window's id). */
TEST(lost_exit_across_a_switch_is_not_nesting)
{
	reset(100);
	st.windowed = true;
	st.win_id = 7;
	inj_api_enter(&st, 0, INJ_API_LAUNCH, 2, 307, 500, "cuLaunchKernel");
	CHECK_INT(nlaunch, 1);
	CHECK_INT(launch_win[0], 7);
	/* the window closes (callbacks off: no exit) and the next opens */
	st.win_id = 0;
	st.cb_gen++;
	st.win_id = 8;
	st.cb_gen++;
	inj_api_enter(&st, 0, INJ_API_LAUNCH, 2, 307, 501, "cuLaunchKernel");
	inj_api_exit(&st);
	CHECK_INT(nlaunch, 2);
	CHECK_INT(launch_win[1], 8);
	/* and between windows nothing is followed */
	st.win_id = 0;
	inj_api_enter(&st, 0, INJ_API_LAUNCH, 2, 307, 502, "cuLaunchKernel");
	inj_api_exit(&st);
	CHECK_INT(nlaunch, 2);
}

/* gpubpf has launches whose handle has no name: callbacks stay on between windows (they
 * name handles), activity off, nothing followed. */
TEST(names_wanted_keeps_callbacks_between_windows)
{
	const uint64_t P = 100000000ull;
	uint64_t t = 20 * P, wake;
	int want;

	reset(100);
	cfg.cost.state = DEV_COST_DONE;
	cfg.duty_ppm = 100000;
	CHECK_INT(inj_sched_step(&sc, &st, &cfg, t, &wake), 0);
	cfg.names_wanted = 1;
	want = inj_sched_step(&sc, &st, &cfg, t, &wake);
	CHECK_INT(want, INJ_CB);
	inj_sched_switched(&sc, &st, &cfg, want, t, t);
	launch(0, 0, want);
	CHECK_INT(nlaunch, 0);
}

TEST(always_mode_follows_everything)
{
	uint64_t wake;

	reset(100);
	cfg.mode = DEV_MODE_ALWAYS;
	CHECK_INT(inj_sched_step(&sc, &st, &cfg, 12345, &wake), INJ_CB | INJ_ACT);
	CHECK(!st.windowed);
	launch(0, 0, INJ_CB | INJ_ACT);
	CHECK_INT(nlaunch, 1); /* the runtime call's probe; its driver call's records go under it */
	CHECK_INT(launch_win[0], 0);
}

/* gpubpf asks for one window in EVERY periods, and changes its mind (1, 4, 2, 8, 1, at
 * moments of its own): each window's own period (EVERY periods, its K slots) starts where
 * the last one's ended, so every instant stays in exactly one window's period, observed
 * with probability 1/K (the estimate's weights), never in two, never in none. */
TEST(every_changes_only_where_both_periods_begin)
{
	const uint64_t P = 100000000ull, t0 = 5 * P + 777;
	static const uint32_t plan[] = {1, 4, 2, 8, 1, 3};
	static uint64_t wo[2048], wc[2048];
	uint64_t t = t0, wake, last_end = 0;
	uint32_t seen = 0, gaps = 0, overlaps = 0, n = 0;

	reset(100);
	cfg.cost.state = DEV_COST_DONE;
	cfg.duty_ppm = 50000;
	for (int step = 0; t < t0 + 300 * P; step++) {
		int want;

		/* gpubpf's tick writes a new EVERY at times unrelated to the periods */
		cfg.every = plan[(t - t0) / (37 * P + 12345) % 6];
		want = inj_sched_step(&sc, &st, &cfg, t, &wake);
		inj_sched_switched(&sc, &st, &cfg, want, t, t);
		for (uint32_t id = seen + 1; id < cfg.win_next; id++) {
			const struct dev_win *w = &cfg.win[id % DEV_WIN_RING];
			uint64_t len, start;

			if (w->id != id || !w->close)
				break;
			seen = id;
			/* the window's own period: K slots of its length, from where the
			 * library says it begins (in gpubpf's periods), around its slot */
			len = (w->slot_close - w->slot_open) * w->k;
			len = (len + P / 2) / P * P;
			start = w->period * P;
			CHECK(start <= w->slot_open && w->slot_close <= start + len);
			if (n < 2048) {
				wo[n] = start;
				wc[n] = start + len;
				n++;
			}
		}
		t = wake < t + 3 * P / 100 ? wake : t + 3 * P / 100;
	}
	CHECK(n > 40);
	for (uint32_t i = 1; i < n; i++) {
		last_end = wc[i - 1];
		gaps += wo[i] > last_end;
		overlaps += wo[i] < last_end;
	}
	printf("# %u windows, %u gaps, %u overlaps between their periods\n", n, gaps, overlaps);
	CHECK_INT(gaps, 0);
	CHECK_INT(overlaps, 0);
	CHECK(sc.every == 1 || sc.every == 2 || sc.every == 4 || sc.every == 8);
	/* the first window's period begins in gpubpf's period of the first plan */
	CHECK(wo[0] / P == t0 / P);
}

/* gpubpf knows the set-up's cost from the measurement, which set CUPTI up and tore it
 * down once, and asks for a longer period before any window: taken at once, so the job's
 * first seconds do not pay a set-up every period. */
TEST(every_at_once_before_the_first_window)
{
	const uint64_t P = 1000000000ull;
	uint64_t t = 40 * P + 5, wake;
	int want;

	reset(1000);
	st.windowed = true;
	cfg.cost.state = DEV_COST_MEASURING;
	inj_sched_switched(&sc, &st, &cfg, INJ_CB | INJ_ACT, t, t + 12000000ull);
	CHECK_INT(sc.measure_switch_ns, 12000000ull);
	cfg.cost.state = DEV_COST_DONE;
	cfg.cost.switch_ns = sc.measure_switch_ns;
	cfg.every = 8;
	cfg.duty_ppm = 10000;
	want = inj_sched_step(&sc, &st, &cfg, t, &wake);
	(void)want;
	CHECK_INT(sc.every, 8);
	CHECK(sc.cur > 0);
	/* its period: 8 s from the start of the second of the plan, its slot inside */
	CHECK_INT(cfg.win[sc.cur - 1].period, 40);
	CHECK(cfg.win[sc.cur - 1].slot_open >= 40 * P && cfg.win[sc.cur - 1].slot_close <= 48 * P);
	CHECK_INT(cfg.win[sc.cur - 1].k, 100);
}

/* CUPTI takes 10-20 ms to set up on an H100: the library sets it up that long ahead of a
 * window's slot (the last window's switches), and follows nothing before the slot opens,
 * so the window still covers its slot and nothing else. */
TEST(set_up_ahead_of_the_slot)
{
	const uint64_t P = 1000000000ull;
	uint64_t t = 40 * P + 5, wake, lead = 20000000ull;
	const struct dev_win *w;
	int want, ahead = 0;

	reset(1000);
	cfg.cost.state = DEV_COST_DONE;
	cfg.cost.switch_ns = lead;
	cfg.duty_ppm = 10000;
	want = inj_sched_step(&sc, &st, &cfg, t, &wake);
	w = &cfg.win[sc.cur - 1];
	CHECK(w->slot_open > t);
	while (t < w->slot_close + 1) {
		want = inj_sched_step(&sc, &st, &cfg, t, &wake);
		inj_sched_switched(&sc, &st, &cfg, want, t, t);
		if (t < w->slot_open) {
			CHECK_INT(st.win_id, 0);
			if (want & INJ_ACT) {
				ahead++;
				CHECK(t + lead >= w->slot_open);
			}
		} else if (t < w->slot_close) {
			CHECK_INT(st.win_id, w->id);
		}
		CHECK(wake > t || t >= w->slot_close);
		t = wake > t ? wake : t + 1;
	}
	CHECK_INT(ahead, 1);
	CHECK_INT(w->open, w->slot_open);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(slots);
	RUN(trimmed_mean);
	RUN(cost_measured_on_real_calls);
	RUN(measurement_switches_are_a_one_off_cost);
	RUN(drift_cancels_with_many_calls_a_look);
	RUN(device_bound_start_not_charged_to_cupti);
	RUN(launch_probes_state_matched);
	RUN(measurement_waits_for_gpubpf);
	RUN(idle_job_measured_again_later);
	RUN(on_phase_with_no_call_measured_again_at_once);
	RUN(measurement_waits_for_the_first_launch);
	RUN(measurement_waits_for_steady_launches);
	RUN(measurement_turns_activity_on_once);
	RUN(idle_first_half_never_turns_activity_on);
	RUN(one_window_a_period_at_random);
	RUN(every_changes_only_where_both_periods_begin);
	RUN(set_up_ahead_of_the_slot);
	RUN(every_at_once_before_the_first_window);
	RUN(late_window_stands_in_from_then);
	RUN(lost_exit_across_a_switch_is_not_nesting);
	RUN(names_wanted_keeps_callbacks_between_windows);
	RUN(always_mode_follows_everything);
	inj_state_fini(&st);
	return T_END();
}
