// SPDX-License-Identifier: MIT
/* The injection library's windows and cost measurement under test (test_devwin.c,
 * test_devwin_measure.c): the very code libgpubpf_inject.so runs (userspace/inject/devwin.c
 * and the timing in records.c), a config as gpubpf writes it, and launch calls that really
 * take their time. */
#ifndef GPUBPF_TEST_DEVWIN_FIXTURE_H
#define GPUBPF_TEST_DEVWIN_FIXTURE_H

#include <time.h>

#include "test.h"

#include "../../userspace/inject/devwin.c"
#include "../../userspace/inject/records.c"

static struct inj_state st;
static struct dev_config cfg;
static struct inj_sched sc;
static int nlaunch, launch_win[4096];
static uint64_t launch_prev_exit[4096];
/* launches followed under the measurement's ids, all of them */
static int n_measure, n_remeasure;

static void rec_launch(uint32_t corr, uint32_t cbinfo, uint32_t win, uint64_t prev_exit)
{
	(void)corr;
	(void)cbinfo;
	if (nlaunch < 4096) {
		launch_win[nlaunch] = (int)win;
		launch_prev_exit[nlaunch] = prev_exit;
	}
	nlaunch++;
	n_measure += (win & ~DEV_WIN_NESTED) == DEV_WIN_MEASURE;
	n_remeasure += (win & ~DEV_WIN_NESTED) == DEV_WIN_REMEASURE;
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

__attribute__((unused)) static void spin_ns(uint64_t ns)
{
	uint64_t t0 = now_ns();

	while (now_ns() - t0 < ns)
		;
}

/* One runtime launch with its nested driver call, as CUPTI calls back; it takes BASE ns,
 * EXTRA more while activity is on (what the watcher last set). */
static uint32_t corr = 100;
__attribute__((unused)) static void launch(uint64_t base, uint64_t extra, int on)
{
	inj_api_enter(&st, 0, INJ_API_LAUNCH, 1, 211, corr++, "cudaLaunchKernel");
	inj_api_enter(&st, 0, INJ_API_LAUNCH, 2, 307, corr++, "cuLaunchKernel");
	spin_ns(base + ((on & INJ_ACT) ? extra : 0));
	inj_api_exit(&st);
	inj_api_exit(&st);
}

/* The watcher's step and switch, at the real time. */
__attribute__((unused)) static int step_now(void)
{
	uint64_t wake, t = now_ns();
	int want = inj_sched_step(&sc, &st, &cfg, t, &wake);

	inj_sched_switched(&sc, &st, &cfg, want, t, t);
	return want;
}

/* Launches of 2 us, 3 us dearer with activity on, 20 a look, until the measurement ends
 * (WANT: what the last step wanted); what the watcher wants then. */
__attribute__((unused)) static int measure_to_end(int want)
{
	for (int guard = 0; cfg.cost.state == DEV_COST_MEASURING && guard < 1000000; guard++) {
		for (int i = 0; i < 20; i++)
			launch(2000, 3000, want);
		want = step_now();
	}
	return want;
}

#endif /* GPUBPF_TEST_DEVWIN_FIXTURE_H */
