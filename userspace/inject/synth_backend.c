// SPDX-License-Identifier: MIT
/* The synthetic backend of libgpubpf_inject.so and its test entry points: a producer
 * without a GPU (tests/workloads/inject/producer.c) drives the production path, the same
 * watcher, probes, windows, sampling and record handling, with real CUpti_CallbackData
 * and CUpti_Activity records; only CUPTI itself is replaced. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cupti_int.h"

static bool synthetic_on;
/* What "CUPTI" has on (set by the windows): callbacks are delivered only while on, and a
 * producer can make a launch cost more while activity is (gpubpf_inject_test_activity). */
static int synth_on = INJ_CB | INJ_ACT;

/* The synthetic "CUPTI clock" runs 1000 s ahead of CLOCK_MONOTONIC, so a timeline that
 * skipped the conversion would show it. */
#define SYNTH_CLOCK_AHEAD 1000000000000ull

static uint64_t synth_clock(void)
{
	return inj_mono_ns() + SYNTH_CLOCK_AHEAD;
}

static int synth_attach(struct inj_state *s, char *why, size_t len)
{
	inj_device_clock = synth_clock;
	synthetic_on = true;
	/* as CUPTI's: in windows, activity waits for the first window */
	__atomic_store_n(&synth_on, s->windowed ? INJ_CB : INJ_CB | INJ_ACT, __ATOMIC_RELEASE);
	snprintf(why, len, "attached: synthetic records (test producer, no CUPTI)");
	return DEV_ST_SYNTHETIC;
}

/* A buffer "CUPTI" holds until a forced flush (a detach): what a short program's
 * records are at its exit. */
static const uint8_t *held_buf;
static size_t held_len;

static int walk_buffer(const uint8_t *buf, size_t valid);

static void synth_detach(bool process_exit)
{
	(void)process_exit;
	if (held_buf) {
		walk_buffer(held_buf, held_len);
		held_buf = NULL;
	}
	synthetic_on = false;
	inj_flush(&inj);
}

static void synth_flush(void)
{
	inj_flush(&inj);
}

static bool synth_set(int want)
{
	/* as CUPTI's: a window's end waits for its followed calls to leave the "driver" */
	if ((__atomic_load_n(&synth_on, __ATOMIC_ACQUIRE) & INJ_ACT) && !(want & INJ_ACT))
		inj_wait_followed(&inj, INJ_FOLLOWED_WAIT_NS);
	__atomic_store_n(&synth_on, want, __ATOMIC_RELEASE);
	return true;
}

const struct inj_backend inj_synthetic_backend = {
    .attach = synth_attach,
    .detach = synth_detach,
    .flush = synth_flush,
    .set = synth_set,
};

#define EXPORT __attribute__((visibility("default")))

/* The synthetic backend's device clock: the producer stamps its records with it. */
EXPORT uint64_t gpubpf_inject_test_clock(void)
{
	return synth_clock();
}

static uint8_t synth_classified[3][CBID_MAX];

/* One API callback, as CUPTI would deliver it; the classification is the one attach
 * derives from cuptiGetCallbackName. Nothing happens while detached, like in production
 * where an idle library has no subscription. */
EXPORT void gpubpf_inject_test_callback(uint32_t domain, uint32_t cbid, const CUpti_CallbackData *cb)
{
	if (!synthetic_on || !(__atomic_load_n(&synth_on, __ATOMIC_ACQUIRE) & INJ_CB) || domain > 2 ||
	    cbid >= CBID_MAX || !cb)
		return;
	/* Once per function, as attach does: classifying the name at every callback cost the
	 * producer's launch loop ~1% of its time, which production never pays (make bench's
	 * device-time row measured the harness, not the library). */
	if (!synth_classified[domain][cbid]) {
		inj_cb_class[domain][cbid] = (uint8_t)inj_classify(cb->functionName);
		synth_classified[domain][cbid] = 1;
	}
	inj_on_callback(NULL, (CUpti_CallbackDomain)domain, cbid, cb);
}

/* Whether "CUPTI" has activity on now: a producer spins longer in its launches then, as a
 * real launch costs more with CUPTI's activity on (the cost gpubpf plans windows from). */
EXPORT int gpubpf_inject_test_activity(void)
{
	return synthetic_on && (__atomic_load_n(&synth_on, __ATOMIC_ACQUIRE) & INJ_ACT);
}

/* Whether "CUPTI" calls back now: a real one's own work to do so (and its subscription)
 * costs a launch 0.6-1.6 us on an H100, which a producer spins too. */
EXPORT int gpubpf_inject_test_callbacks(void)
{
	return synthetic_on && (__atomic_load_n(&synth_on, __ATOMIC_ACQUIRE) & INJ_CB);
}

static size_t record_size(uint32_t kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMSET:
		return sizeof(CUpti_ActivityMemset4);
	}
	return 0;
}

/* A completed buffer of CUPTI records laid end to end (each 8-byte aligned), walked
 * here by size since there is no cuptiActivityGetNextRecord without CUPTI; each record
 * then takes the production path. Returns the records walked. */
EXPORT int gpubpf_inject_test_buffer(const uint8_t *buf, size_t valid)
{
	if (!synthetic_on)
		return 0;
	return walk_buffer(buf, valid);
}

/* Hand "CUPTI" a buffer it keeps until it is forced to flush (the library's detach, at the
 * latest at exit). BUF must stay valid until then. */
EXPORT void gpubpf_inject_test_hold(const uint8_t *buf, size_t valid)
{
	held_buf = buf;
	held_len = valid;
}

static int walk_buffer(const uint8_t *buf, size_t valid)
{
	size_t off = 0;
	int n = 0;

	inj_sample_clock();
	while (off + sizeof(CUpti_Activity) <= valid) {
		const CUpti_Activity *r = (const void *)(buf + off);
		size_t sz = record_size(r->kind);

		if (!sz || off + sz > valid)
			break;
		inj_handle_record(r);
		off += (sz + 7) & ~(size_t)7;
		n++;
	}
	inj_flush(&inj);
	return n;
}
