// SPDX-License-Identifier: MIT
/* Device time in windows, the injection library's side (userspace/inject/devwin.c and the
 * timing in records.c): the cost measurement on launch calls that really cost more while
 * activity is on, at attach and again while the job runs. */
#include "devwin_fixture.h"

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
	cfg.cost.pair_ns = 300; /* CUPTI's dispatch of a callback pair, timed by the core in the first phase */
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
	/* a runtime launch and its driver call: two pairs dispatched */
	CHECK_INT(cfg.cost.dispatch_ns, 600);
	/* done: all off until gpubpf plans a duty */
	CHECK_INT(step_now(), 0);
}

/* A job whose launches are the driver's alone (Triton's): one pair of callbacks a launch,
 * and CUPTI's dispatch is the pair's; not timed (the synthetic backend): none. */
TEST(dispatch_scaled_by_the_callbacks_a_launch_met)
{
	int want = 0, guard = 0;

	for (int timed = 1; timed >= 0; timed--) {
		reset(100);
		cfg.cost.pair_ns = timed ? 250 : 0;
		want = step_now();
		while (cfg.cost.state == DEV_COST_MEASURING && guard++ < 1000000) {
			for (int i = 0; i < 20; i++) {
				inj_api_enter(&st, 0, INJ_API_LAUNCH, 2, 307, corr++, "cuLaunchKernel");
				spin_ns(2000 + ((want & INJ_ACT) ? 3000 : 0));
				inj_api_exit(&st);
			}
			want = step_now();
		}
		CHECK_INT(cfg.cost.state, DEV_COST_DONE);
		CHECK_INT(cfg.cost.dispatch_ns, timed ? 250 : 0);
	}
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
			inj_sched_switched(&sc, &st, &cfg, want, t, 300000);
			spent += 300000;
		} else {
			inj_sched_switched(&sc, &st, &cfg, want, t, 0);
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
 * inside (it takes 50 us here) is kept in neither. A call preempted on a loaded host may be as
 * slow and is kept (the trimmed mean leaves it out): the test times each call itself, and
 * holds the kept slow calls to those that met no switch. */
TEST(launch_probes_state_matched)
{
	uint32_t n = 0;
	int want = 0, guard = 0, slow = 0, switched = 0, preempted = 0;

	reset(100);
	st.probe_gen = &cfg.probe_gen;
	cfg.probe_gen = DEV_PROBE_GEN_IN;
	want = step_now();
	while (cfg.cost.state == DEV_COST_MEASURING && guard++ < 100000) {
		for (int i = 0; i < 20; i++, n++) {
			bool in = st.timing.phase == 0 ? n % 32 >= 4 : n % 32 < 4;
			uint32_t gen = (cfg.probe_gen & ~3u) + (in ? DEV_PROBE_GEN_IN : DEV_PROBE_GEN_OUT);
			bool sw = gen != cfg.probe_gen;
			uint64_t t0 = now_ns();

			inj_api_enter(&st, 0, INJ_API_LAUNCH, 2, 307, corr++, "cuLaunchKernel");
			if (sw) {
				/* a switch (the next count) inside this call */
				cfg.probe_gen = gen + 4;
				spin_ns(50000);
			}
			spin_ns(2000 + (in ? 3000 : 0) + ((want & INJ_ACT) ? 1500 : 0));
			inj_api_exit(&st);
			switched += sw;
			preempted += !sw && now_ns() - t0 > 40000;
		}
		want = step_now();
	}
	printf(
	    "# probes switching: on %llu ns, off %llu ns, state %u; %d calls met a switch, %d others took over 40 us\n",
	    (unsigned long long)cfg.cost.on_ns, (unsigned long long)cfg.cost.off_ns, cfg.cost.probes, switched,
	    preempted);
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	CHECK(cfg.cost.probes != DEV_PROBES_MIXED);
	CHECK(cfg.cost.on_ns > cfg.cost.off_ns + 1000 && cfg.cost.on_ns < cfg.cost.off_ns + 2200);
	/* a switch falls in one call of 16: hundreds, none kept; the slow calls kept are at most
	 * the preempted ones (a kept call is timed inside the test's own timing) */
	CHECK(switched >= 100);
	for (int h = 0; h < 2; h++)
		for (int p = 0; p < INJ_PROBE_STATES; p++)
			for (uint32_t i = 0; i < st.timing.n[h][p] && i < INJ_TIMED_MAX; i++)
				slow += st.timing.ns[h][p][i] > 40000;
	if (slow > preempted)
		T_FAIL("%d slow calls kept, %d preempted: a call a switch fell in was kept", slow, preempted);
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
	/* why, for gpubpf's -v: the first phase, no call */
	CHECK_INT(cfg.cost.idle_why, 0);
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
	/* why: the "on" phase, the first one's calls kept, none of its own */
	CHECK_INT(cfg.cost.idle_why & 3, 1);
	CHECK((cfg.cost.idle_why >> 2 & 0x3fff) >= INJ_MEASURE_MIN);
	CHECK_INT(cfg.cost.idle_why >> 16, 0);
	inj_sched_step(&sc, &st, &cfg, now_ns(), &wake);
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	/* the same again: 2 s on, as for a job that does not launch */
	cfg.names_wanted = 1; /* gpubpf's, from attach */
	on_phase_times_nothing();
	CHECK_INT(cfg.cost.state, DEV_COST_IDLE);
	CHECK(sc.retry_at >= now_ns() + INJ_REMEASURE_NS / 2);
	/* its callbacks named what was launched: off until then, not until gpubpf's next
	 * tick writes names_wanted (up to a second of a launch-bound job's launches) */
	CHECK_INT(cfg.names_wanted, 0);
	CHECK(!(inj_sched_step(&sc, &st, &cfg, now_ns(), &wake) & INJ_CB));
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
	/* why, for gpubpf's -v: the first phase, no call */
	CHECK_INT(cfg.cost.idle_why, 0);
}

/* Windows at 10% of 100 ms periods on the real clock, launches of 2 us, EXTRA dearer with
 * activity on, until the library has measured the cost MEASURES times (or MAX_NS). Each
 * measurement again should start after a window has closed, none open, no sooner than
 * remeasure_ms after the last one ended: *BAD counts those that did not; *CLOSED_THEN is
 * the last window closed before the last one began. */
static void windows_until(uint32_t measures, uint64_t extra, uint64_t max_ns, uint32_t *closed_then, int *bad)
{
	uint64_t t0 = now_ns(), done = cfg.cost.done;
	uint32_t closed = 0;
	int want = step_now();

	while (cfg.cost.measures < measures && now_ns() - t0 < max_ns) {
		uint32_t was = cfg.cost.state;
		volatile struct dev_win *w;

		for (int i = 0; i < 20; i++)
			launch(2000, extra, want);
		want = step_now();
		w = sc.cur ? &cfg.win[sc.cur - 1] : NULL;
		if (was == DEV_COST_DONE && cfg.cost.state == DEV_COST_MEASURING) {
			/* its start: the step's clock (cost.started) */
			*bad += (w && !w->close) || st.win_id ||
				cfg.cost.started < done + (uint64_t)cfg.remeasure_ms * 1000000ull;
			*closed_then = closed;
		}
		if (cfg.cost.state == DEV_COST_DONE)
			done = cfg.cost.done;
		if (w && w->close)
			closed = w->id;
	}
}

/* The job's launches get dearer with activity on as it runs (3 us at attach, 6 us later):
 * measured again remeasure_ms after the last, between windows, the cost follows it; the
 * calls of both are counted (gpubpf's one-off cost), its "on" launches are followed under
 * DEV_WIN_REMEASURE, and the windows go on after it. */
TEST(measured_again_between_windows_follows_the_job)
{
	uint32_t calls, closed = 0;
	int want, bad = 0;

	reset(100);
	want = measure_to_end(step_now());
	(void)want;
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	CHECK_INT(cfg.cost.measures, 1);
	calls = cfg.cost.calls;
	cfg.duty_ppm = 100000;
	cfg.remeasure_ms = 300;
	n_measure = n_remeasure = 0;
	windows_until(2, 6000, 5000000000ull, &closed, &bad);
	CHECK_INT(bad, 0);
	CHECK(closed >= 1);
	CHECK_INT(cfg.cost.measures, 2);
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	printf("# again: on %llu ns, off %llu ns\n", (unsigned long long)cfg.cost.on_ns,
	       (unsigned long long)cfg.cost.off_ns);
	CHECK(cfg.cost.on_ns > cfg.cost.off_ns + 5000 && cfg.cost.on_ns < cfg.cost.off_ns + 7000);
	CHECK(cfg.cost.calls >= calls + 2 * INJ_MEASURE_MIN);
	/* its "on" launches followed as a window's, under DEV_WIN_REMEASURE: the windows'
	 * periods cover that time, and gpubpf does not count their records again */
	CHECK_INT(n_measure, 0);
	CHECK(n_remeasure > 0);
	/* windows again, within two periods */
	for (uint64_t t0 = now_ns(); !st.win_id && now_ns() - t0 < 250000000ull;)
		step_now();
	CHECK(st.win_id != 0);
}

/* Measured again while the job does not launch: activity never goes on, and the last
 * figures stand until the next time (a measurement at attach would say DEV_COST_IDLE). */
TEST(measured_again_while_idle_keeps_the_figures)
{
	struct dev_costs before;
	uint64_t wake, t;
	int want, guard = 0;

	reset(100);
	measure_to_end(step_now());
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	before = cfg.cost;
	cfg.duty_ppm = 100000;
	cfg.remeasure_ms = 1000;
	/* no launch from here, on a driven clock */
	for (t = now_ns(); cfg.cost.state == DEV_COST_DONE && guard++ < 10000; t = wake) {
		want = inj_sched_step(&sc, &st, &cfg, t, &wake);
		inj_sched_switched(&sc, &st, &cfg, want, t, 0);
	}
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	CHECK(t >= before.done + 1000000000ull);
	for (guard = 0; cfg.cost.state == DEV_COST_MEASURING && guard < 1000; guard++) {
		t += INJ_SLICE_NS;
		want = inj_sched_step(&sc, &st, &cfg, t, &wake);
		CHECK(!(want & INJ_ACT));
	}
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	CHECK_INT(cfg.cost.measures, 1);
	CHECK_INT(cfg.cost.on_ns, before.on_ns);
	CHECK_INT(cfg.cost.off_ns, before.off_ns);
	CHECK_INT(cfg.cost.callback_ns, before.callback_ns);
	CHECK(cfg.cost.done > before.done); /* and the next time counts from here */
	CHECK_INT(cfg.names_wanted, 0);
}
/* A measurement's "on" launches are counted once, as what they are, only before the
 * windows' periods begin: at attach. Tried again after too few calls while the windows ran
 * at the planned duty (DEV_COST_IDLE), it is inside their periods, whose estimates cover
 * that time: its launches go under DEV_WIN_REMEASURE, not counted again. */
TEST(measurement_inside_the_windows_periods_not_counted_again)
{
	uint64_t wake, t = 1000000000ull;

	reset(100);
	inj_sched_step(&sc, &st, &cfg, t, &wake);
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	CHECK(!st.timing.again);
	reset(100);
	cfg.cost.state = DEV_COST_IDLE;
	sc.origin = t - 5 * 100000000ull; /* windows planned from 0.5 s ago */
	inj_sched_step(&sc, &st, &cfg, t, &wake);
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	CHECK(st.timing.again);
	CHECK(!sc.again); /* not a measurement again: the warm-up is kept */
}

/* gpubpf's launch probes going in for 400 ms (a PyTorch job's four objects, on an H100:
 * its window was open 857 ms) from the first phase's start: no call is kept meanwhile,
 * and the phases' clocks stand still, so the measurement gets its calls after it. Without
 * the hold the first phase's 100 ms ran out with none kept (DEV_COST_IDLE), as the
 * H100's PyTorch step did. */
TEST(measurement_holds_while_probes_switch)
{
	uint64_t t0;
	int want;

	reset(100);
	st.probe_gen = &cfg.probe_gen;
	cfg.probe_gen = 4 + DEV_PROBE_GEN_OUT;
	want = step_now();
	/* the warm-up, probes out */
	while (cfg.cost.state == DEV_COST_MEASURING && !st.timing.first) {
		for (int i = 0; i < 20; i++)
			launch(2000, 3000, want);
		want = step_now();
	}
	cfg.probe_gen = 8 + DEV_PROBE_GEN_SWITCHING;
	for (t0 = now_ns(); now_ns() - t0 < 400000000ull && cfg.cost.state == DEV_COST_MEASURING;) {
		for (int i = 0; i < 20; i++)
			launch(2000, 3000, want);
		want = step_now();
	}
	CHECK_INT(cfg.cost.state, DEV_COST_MEASURING);
	CHECK_INT(st.timing.phase, 0);
	CHECK_INT(st.timing.n[0][INJ_PROBES_OUT] + st.timing.n[0][INJ_PROBES_IN], 0);
	CHECK(st.timing.not_kept[2] > 0);
	CHECK(st.timing.held_ns >= 300000000ull);
	cfg.probe_gen = 12 + DEV_PROBE_GEN_IN;
	want = measure_to_end(want);
	printf("# held %llu ms; on %llu ns, off %llu ns, probes %u\n", (unsigned long long)st.timing.held_ns / 1000000,
	       (unsigned long long)cfg.cost.on_ns, (unsigned long long)cfg.cost.off_ns, cfg.cost.probes);
	CHECK_INT(cfg.cost.state, DEV_COST_DONE);
	CHECK_INT(cfg.cost.probes, DEV_PROBES_IN);
	CHECK(cfg.cost.on_ns > cfg.cost.off_ns + 2000 && cfg.cost.on_ns < cfg.cost.off_ns + 4000);
	st.probe_gen = NULL;
}

/* Probes that never stop switching: the clocks are held INJ_MEASURE_HOLD_NS at most, and
 * the measurement ends, idle, rather than run on (before its retry, INJ_REMEASURE_NS on). */
TEST(measurement_holds_its_clocks_a_bounded_time)
{
	uint64_t wake, t = 1000000000ull;
	int want;

	reset(100);
	st.probe_gen = &cfg.probe_gen;
	cfg.probe_gen = 4 + DEV_PROBE_GEN_SWITCHING;
	want = inj_sched_step(&sc, &st, &cfg, t, &wake);
	for (int i = 0; i < 20; i++)
		launch(2000, 3000, want);
	for (uint64_t dt = 0;
	     dt < INJ_MEASURE_WAIT_NS + INJ_MEASURE_HOLD_NS + 1000000000ull && cfg.cost.state == DEV_COST_MEASURING;
	     dt += INJ_SLICE_NS) {
		for (int i = 0; i < 2; i++)
			launch(2000, 3000, want);
		want = inj_sched_step(&sc, &st, &cfg, t + dt, &wake);
	}
	CHECK_INT(cfg.cost.state, DEV_COST_IDLE);
	CHECK(st.timing.held_ns <= INJ_MEASURE_HOLD_NS);
	st.probe_gen = NULL;
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(trimmed_mean);
	RUN(cost_measured_on_real_calls);
	RUN(dispatch_scaled_by_the_callbacks_a_launch_met);
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
	RUN(measured_again_between_windows_follows_the_job);
	RUN(measured_again_while_idle_keeps_the_figures);
	RUN(measurement_inside_the_windows_periods_not_counted_again);
	RUN(measurement_holds_while_probes_switch);
	RUN(measurement_holds_its_clocks_a_bounded_time);
	inj_state_fini(&st);
	return T_END();
}
