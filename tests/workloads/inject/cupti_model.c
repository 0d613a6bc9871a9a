// SPDX-License-Identifier: MIT
/* libcupti_model.so: a CUPTI for a machine without a GPU that keeps CUPTI's documented
 * contract and behaves as the one measured on an H100 (tests/workloads/cuda/cupti_cost,
 * docs/DEVICE_TIME.md), so that the injection library's CUPTI backend, which only a GPU
 * otherwise runs, is tested here. A job (tests/workloads/inject/producer "model") loads
 * it as PyTorch loads its own libcupti, and launches through cupti_model_launch(), which
 * calls the job's libcuda (the stub here) inside each launch, as the driver's entry point
 * is what gpubpf's probes see.
 *
 * What it keeps of the contract (cupti_activity.h, cupti_callbacks.h):
 *   - one subscriber; callbacks for the enabled callback ids only, ENTER and EXIT; a
 *     runtime launch (cupti_model_launch: cudaLaunchKernel) calls the driver's
 *     cuLaunchKernel inside it, and both are called back, under one correlation id (a
 *     real job's kernels have every launch's id, one apart: ../shared/gpu's timeline;
 *     CUPTI_MODEL_NESTED_IDS=1: the driver call has an id of its own, which the kernel's
 *     record carries); cupti_model_cu_launch is a driver launch alone (as Triton's);
 *   - kernel records exist only for launches made while CONCURRENT_KERNEL is enabled, in
 *     buffers the client hands in, back through its completion callback;
 *   - cuptiActivityFlushAll(0) returns only buffers whose records are all complete (a
 *     record is complete once its kernel has ended); FLUSH_FORCED returns every buffer,
 *     a kernel still queued or running with start = end = 0;
 *   - cuptiFinalize ends everything: subscription, enables, and the kernel name strings,
 *     which are freed (their first byte overwritten first, so a reader that kept one
 *     sees the difference).
 * What it holds a client to, beyond the documentation, and aborts on ("CUPTI's contract
 * broken"), as a real CUPTI then corrupts the job's heap (an H100, docs/DEVICE_TIME.md):
 *   - cuptiFinalize only in the exit callback of the thread's outermost API call (kineto
 *     finalizes at runtime API exits only): in a driver call's exit inside a runtime
 *     call, the runtime's exit then runs in a CUPTI torn down;
 *   - and not a launch's: on an H100 a cuptiFinalize in cudaLaunchKernel's exit callback
 *     killed launch_loop with SIGSEGV in 12 runs of 28 (in CUPTI's callback dispatch of a
 *     launch, on memory the finalize had let go). The model is the job's driver too
 *     for one call that is not a launch, cuCtxGetCurrent, called back (ENTER and EXIT)
 *     where its callback id is enabled, as the library's own call to finalize in;
 *   - no CUPTI call at all, on any thread, from cuptiFinalize's start until its thread
 *     has come back out of CUPTI's callback dispatch (MODEL_UNWIND_NS after the callback
 *     returns): a CUPTI set up again meanwhile is set up under that thread's feet.
 * What it models of the H100 (measured; tests/gpu, docs/BENCHMARKS.md):
 *   - a launch takes MODEL_LAUNCH_NS, 200 ns more while subscribed, 500 ns more while it
 *     is called back (CUPTI's own work: 0.4-1.4 us there), 125 ns of it in each of the
 *     four callbacks a runtime launch makes (a driver launch alone makes two, the library's
 *     cuCtxGetCurrent two), and 1.5 us more from the first enable of kernel activity
 *     until cuptiFinalize (activity off or not);
 *   - 1024 launches can be queued: a launch waits for the kernel 1024 before it to end;
 *   - the first enable of kernel activity after a (re)start of CUPTI takes 10 ms (its
 *     set-up was 9-17 ms there), cuptiFinalize 3 ms (2-4 ms); CUPTI_MODEL_SETUP_US and
 *     CUPTI_MODEL_FINALIZE_US set others; CUPTI_MODEL_DIRTY_LATER=SECONDS:NS makes activity
 *     cost NS from SECONDS after the first launch on.
 * It is no GPU: kernels are times on the device clock, nothing runs. CUPTI_MODEL_DEBUG=1
 * counts the launches in each state at exit; =2 also says what each flush hands back. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#define EXPORT __attribute__((visibility("default")))

#define MODEL_LAUNCH_NS 4500ull
#define MODEL_SUBSCRIBED_NS 200ull
#define MODEL_DIRTY_NS 1500ull
#define MODEL_CALLBACK_NS 125ull /* CUPTI's own work to make one callback (enter or exit) */
/* set-up and teardown; CUPTI_MODEL_SETUP_US and CUPTI_MODEL_FINALIZE_US change them */
static uint64_t setup_ns = 10000000ull, finalize_ns = 3000000ull;
static bool nested_ids; /* CUPTI_MODEL_NESTED_IDS */
/* CUPTI_MODEL_DIRTY_LATER=SECONDS:NS: activity costs a launch NS, not MODEL_DIRTY_NS, from
 * SECONDS after the first launch on (a job whose launches change as it runs) */
static uint64_t later_after_ns, later_dirty_ns, first_launch_ns;
#define MODEL_QUEUE 1024
/* CUPTI's clock runs this far ahead of CLOCK_MONOTONIC: a reader must convert */
#define MODEL_CLOCK_AHEAD 5000000000ull
#define MODEL_BUFS 16
/* CUPTI's own work in a callback's dispatch after the client's callback returned */
#define MODEL_UNWIND_NS 20000ull

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool subscribed, kernel_act, dirty, set_up;
static CUpti_CallbackFunc cb_fn;
static void *cb_userdata;
static bool cb_on[CUPTI_CB_DOMAIN_SIZE][2];
static CUpti_BuffersCallbackRequestFunc req_fn;
static CUpti_BuffersCallbackCompleteFunc done_fn;
static char *kernel_name; /* CUPTI's string for the kernel: until cuptiFinalize */

/* The device: the end of each of the last MODEL_QUEUE kernels, and when it is free. */
static uint64_t queue_end[MODEL_QUEUE];
static unsigned queue_head;
static uint64_t device_free;

struct mbuf {
	uint8_t *p;
	size_t size, used;
	uint64_t last_end; /* kernels end in order on the one stream: the buffer's last */
};
static struct mbuf bufs[MODEL_BUFS]; /* [0, nbufs): in CUPTI's hands, the last one filling */
static int nbufs;
static size_t dropped;
static uint32_t corr_next = 1;
/* CUPTI_MODEL_DEBUG: launch calls in each state (enum st) and their time; set-ups, finalizes */
enum st { ST_NONE, ST_SUBSCRIBED, ST_AFTER_ACTIVITY, ST_ACTIVITY, ST_N };
static uint64_t ns_state[ST_N], n_state[ST_N], n_fin, n_setup;
/* the time from the thread's last launch call's return to this one's start (under 1 ms) */
static uint64_t gap_state[ST_N], n_gap[ST_N];
static __thread uint64_t tls_last_end;
/* the time in the client's callbacks, enter and exit */
static uint64_t cbt_state[ST_N];
/* The contract: the thread's API calls open, the callback site it is in (0: none), and
 * a cuptiFinalize whose thread is not yet out of CUPTI's dispatch. */
static __thread int tls_api_depth, tls_in_cb;
static __thread bool tls_cb_launch; /* the callback the thread is in is a launch's */
static bool ctx_cb_on;		    /* cuCtxGetCurrent's callback is enabled */
static __thread bool tls_finalized;
static int fin_busy;

__attribute__((constructor)) static void model_settings(void)
{
	const char *s = getenv("CUPTI_MODEL_SETUP_US"), *f = getenv("CUPTI_MODEL_FINALIZE_US");

	if (s && *s)
		setup_ns = strtoull(s, NULL, 10) * 1000ull;
	if (f && *f)
		finalize_ns = strtoull(f, NULL, 10) * 1000ull;
	nested_ids = getenv("CUPTI_MODEL_NESTED_IDS") && strcmp(getenv("CUPTI_MODEL_NESTED_IDS"), "1") == 0;
	if (getenv("CUPTI_MODEL_DIRTY_LATER")) {
		double after = 0;
		unsigned long long ns = 0;

		if (sscanf(getenv("CUPTI_MODEL_DIRTY_LATER"), "%lf:%llu", &after, &ns) == 2 && after >= 0) {
			later_after_ns = (uint64_t)(after * 1e9);
			later_dirty_ns = ns;
		}
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CUPTI_MODEL_DEBUG=2: each call that changes CUPTI's state, with its time */
static void trace_call(const char *what, int arg)
{
	const char *d = getenv("CUPTI_MODEL_DEBUG");

	if (d && strcmp(d, "2") == 0)
		fprintf(stderr, "model: %.6f %s %d\n", (double)mono_ns() / 1e9, what, arg);
}

/* What activity adds to a launch made at NOW where it has been on (CUPTI_MODEL_DIRTY_LATER).
 * Under mu, for every launch: the first one's time is kept. */
static uint64_t dirty_cost(uint64_t now)
{
	if (!first_launch_ns)
		first_launch_ns = now;
	return later_dirty_ns && now - first_launch_ns >= later_after_ns ? later_dirty_ns : MODEL_DIRTY_NS;
}

static void spin_until(uint64_t t)
{
	while (mono_ns() < t)
		;
}

static _Noreturn void broken(const char *what)
{
	fprintf(stderr, "cupti model: CUPTI's contract broken: %s\n", what);
	abort();
}

/* Every CUPTI call: none while a cuptiFinalize is tearing CUPTI down. */
static void contract(const char *api)
{
	char why[200];

	if (!__atomic_load_n(&fin_busy, __ATOMIC_ACQUIRE))
		return;
	snprintf(why, sizeof(why), "%s called while cuptiFinalize's thread is still inside CUPTI", api);
	broken(why);
}

/* Whether DOM's launch callback is to be made now, and to whom. */
static bool called_back(CUpti_CallbackDomain dom, CUpti_CallbackFunc *fn, void **ud)
{
	bool on;

	pthread_mutex_lock(&mu);
	on = subscribed && cb_on[dom][1];
	*fn = cb_fn;
	*ud = cb_userdata;
	pthread_mutex_unlock(&mu);
	return on;
}

/* A callback as CUPTI makes it: the site the thread is in is known to cuptiFinalize, and
 * a finalize in it ends once the thread is back out of the dispatch. */
static void dispatch(CUpti_CallbackFunc fn, void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
		     CUpti_CallbackData *cb)
{
	spin_until(mono_ns() + MODEL_CALLBACK_NS);
	tls_in_cb = (int)cb->callbackSite + 1;
	tls_cb_launch = !(dom == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent);
	fn(ud, dom, cbid, cb);
	tls_in_cb = 0;
	if (tls_finalized) {
		spin_until(mono_ns() + MODEL_UNWIND_NS);
		tls_finalized = false;
		__atomic_store_n(&fin_busy, 0, __ATOMIC_RELEASE);
	}
}

#define REC_SIZE ((sizeof(CUpti_ActivityKernel10) + 7) & ~(size_t)7)

/* Under mu: room for one record, a new buffer from the client when the last is full. */
static CUpti_ActivityKernel10 *record_slot(void)
{
	struct mbuf *b = nbufs ? &bufs[nbufs - 1] : NULL;

	if (!b || b->used + REC_SIZE > b->size) {
		uint8_t *p = NULL;
		size_t size = 0, max = 0;

		if (nbufs == MODEL_BUFS || !req_fn)
			return NULL;
		req_fn(&p, &size, &max);
		if (!p || size < REC_SIZE)
			return NULL;
		b = &bufs[nbufs++];
		*b = (struct mbuf){.p = p, .size = size};
	}
	b->used += REC_SIZE;
	return (CUpti_ActivityKernel10 *)(b->p + b->used - REC_SIZE);
}

/* One cuLaunchKernel of a kernel of KERNEL_NS, as the driver with CUPTI runs it; DRIVER,
 * if any, is called with the kernel's handle inside it (the job's libcuda: what gpubpf's
 * probes see of a launch). RT_CORR: the id of the runtime call it is inside, if any. */
static void cu_launch(uint64_t kernel_ns, void (*driver)(void *f), uint32_t rt_corr)
{
	static char handle_obj;
	cuLaunchKernel_params params = {.f = (CUfunction)(void *)&handle_obj};
	CUpti_CallbackData cb = {
	    .functionName = "cuLaunchKernel",
	    .symbolName = "model_kernel",
	    .functionParams = &params,
	};
	CUpti_CallbackFunc fn;
	void *ud;
	uint64_t t0, cost = MODEL_LAUNCH_NS, wait, start, end, cbt, whole = mono_ns();
	bool follow;
	enum st state;

	tls_api_depth++;
	pthread_mutex_lock(&mu);
	cb.correlationId = rt_corr && !nested_ids ? rt_corr : corr_next++;
	pthread_mutex_unlock(&mu);
	follow = called_back(CUPTI_CB_DOMAIN_DRIVER_API, &fn, &ud);
	if (follow) {
		cb.callbackSite = CUPTI_API_ENTER;
		dispatch(fn, ud, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
	}
	cbt = mono_ns() - whole;
	pthread_mutex_lock(&mu);
	cost += dirty_cost(whole) * dirty + (subscribed ? MODEL_SUBSCRIBED_NS : 0);
	state = kernel_act ? ST_ACTIVITY : dirty ? ST_AFTER_ACTIVITY : subscribed ? ST_SUBSCRIBED : ST_NONE;
	wait = queue_end[queue_head]; /* a full queue: the kernel MODEL_QUEUE launches back */
	pthread_mutex_unlock(&mu);
	/* the driver's own work comes after whatever ran before it in the call (a probe's
	 * trap, a callback): it adds, as a real launch's does */
	if (driver)
		driver(params.f);
	t0 = mono_ns();
	spin_until(t0 + cost);
	spin_until(wait);
	pthread_mutex_lock(&mu);
	start = mono_ns() > device_free ? mono_ns() : device_free;
	end = device_free = start + kernel_ns;
	queue_end[queue_head] = end;
	queue_head = (queue_head + 1) % MODEL_QUEUE;
	if (kernel_act) {
		CUpti_ActivityKernel10 *k = record_slot();

		if (k) {
			memset(k, 0, sizeof(*k));
			k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
			k->correlationId = cb.correlationId;
			k->name = kernel_name;
			k->start = start + MODEL_CLOCK_AHEAD;
			k->end = end + MODEL_CLOCK_AHEAD;
			k->streamId = 7;
			bufs[nbufs - 1].last_end = end;
		} else {
			dropped++;
		}
	}
	pthread_mutex_unlock(&mu);
	t0 = mono_ns();
	if (called_back(CUPTI_CB_DOMAIN_DRIVER_API, &fn, &ud)) {
		cb.callbackSite = CUPTI_API_EXIT;
		dispatch(fn, ud, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
	}
	__atomic_add_fetch(&cbt_state[state], cbt + mono_ns() - t0, __ATOMIC_RELAXED);
	__atomic_add_fetch(&ns_state[state], mono_ns() - whole, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_state[state], 1, __ATOMIC_RELAXED);
	if (tls_last_end && whole - tls_last_end < 1000000) {
		__atomic_add_fetch(&gap_state[state], whole - tls_last_end, __ATOMIC_RELAXED);
		__atomic_add_fetch(&n_gap[state], 1, __ATOMIC_RELAXED);
	}
	tls_last_end = mono_ns();
	tls_api_depth--;
}

/* The driver's cuLaunchKernel alone, as Triton's launches are. */
EXPORT void cupti_model_cu_launch(uint64_t kernel_ns, void (*driver)(void *f))
{
	cu_launch(kernel_ns, driver, 0);
}

/* One cudaLaunchKernel: the runtime's callbacks around the driver's launch. */
EXPORT void cupti_model_launch(uint64_t kernel_ns, void (*driver)(void *f))
{
	static char stub_obj;
	cudaLaunchKernel_v7000_params params = {.func = &stub_obj};
	CUpti_CallbackData cb = {
	    .functionName = "cudaLaunchKernel_v7000",
	    .symbolName = "model_kernel",
	    .functionParams = &params,
	};
	CUpti_CallbackFunc fn;
	void *ud;

	tls_api_depth++;
	pthread_mutex_lock(&mu);
	cb.correlationId = corr_next++;
	pthread_mutex_unlock(&mu);
	if (called_back(CUPTI_CB_DOMAIN_RUNTIME_API, &fn, &ud)) {
		cb.callbackSite = CUPTI_API_ENTER;
		dispatch(fn, ud, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &cb);
	}
	cu_launch(kernel_ns, driver, cb.correlationId);
	if (called_back(CUPTI_CB_DOMAIN_RUNTIME_API, &fn, &ud)) {
		cb.callbackSite = CUPTI_API_EXIT;
		dispatch(fn, ud, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &cb);
	}
	tls_api_depth--;
}

/* The driver's cuCtxGetCurrent, as the job's driver with CUPTI runs it: no context (the
 * model has none), called back where its callback is on. */
EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	CUpti_CallbackData cb = {.functionName = "cuCtxGetCurrent"};
	CUpti_CallbackFunc fn;
	void *ud;
	bool on;

	tls_api_depth++;
	pthread_mutex_lock(&mu);
	cb.correlationId = corr_next++;
	on = subscribed && ctx_cb_on;
	fn = cb_fn;
	ud = cb_userdata;
	pthread_mutex_unlock(&mu);
	if (on) {
		cb.callbackSite = CUPTI_API_ENTER;
		dispatch(fn, ud, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, &cb);
	}
	if (pctx)
		*pctx = NULL;
	pthread_mutex_lock(&mu);
	on = subscribed && ctx_cb_on;
	pthread_mutex_unlock(&mu);
	if (on) {
		cb.callbackSite = CUPTI_API_EXIT;
		dispatch(fn, ud, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, &cb);
	}
	tls_api_depth--;
	return CUDA_SUCCESS;
}

/* ---- the subset of CUPTI's API the injection library uses ------------------------------ */

EXPORT CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
	*version = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
	*str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI model error";
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
	contract("cuptiGetTimestamp");
	*timestamp = mono_ns() + MODEL_CLOCK_AHEAD;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
					   void *userdata)
{
	CUptiResult r = CUPTI_SUCCESS;

	contract("cuptiSubscribe");
	trace_call("subscribe", subscribed);
	pthread_mutex_lock(&mu);
	if (subscribed) {
		r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
		goto out;
	}
	subscribed = true;
	cb_fn = callback;
	cb_userdata = userdata;
	memset(cb_on, 0, sizeof(cb_on));
	*subscriber = (CUpti_SubscriberHandle)(void *)&cb_fn;
out:
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
	contract("cuptiUnsubscribe");
	(void)subscriber;
	trace_call("unsubscribe", 0);
	pthread_mutex_lock(&mu);
	subscribed = false;
	pthread_mutex_unlock(&mu);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
	contract("cuptiGetCallbackName");
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) {
		*name = "cuLaunchKernel";
		return CUPTI_SUCCESS;
	}
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
		*name = "cudaLaunchKernel_v7000";
		return CUPTI_SUCCESS;
	}
	return CUPTI_ERROR_INVALID_PARAMETER;
}

EXPORT CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
						CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	contract("cuptiEnableCallback");
	(void)subscriber;
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent) {
		pthread_mutex_lock(&mu);
		ctx_cb_on = enable != 0;
		pthread_mutex_unlock(&mu);
		return CUPTI_SUCCESS;
	}
	if ((domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) &&
	    (domain != CUPTI_CB_DOMAIN_RUNTIME_API || cbid != CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000))
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&mu);
	cb_on[domain][1] = enable != 0;
	pthread_mutex_unlock(&mu);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber)
{
	contract("cuptiEnableAllDomains");
	(void)subscriber;
	pthread_mutex_lock(&mu);
	for (int d = 0; d < CUPTI_CB_DOMAIN_SIZE; d++)
		cb_on[d][1] = enable != 0;
	ctx_cb_on = enable != 0;
	pthread_mutex_unlock(&mu);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
							   CUpti_BuffersCallbackCompleteFunc done)
{
	contract("cuptiActivityRegisterCallbacks");
	pthread_mutex_lock(&mu);
	req_fn = req;
	done_fn = done;
	pthread_mutex_unlock(&mu);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
	bool first;

	contract("cuptiActivityEnable");
	if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		return CUPTI_SUCCESS; /* copies and memsets: none are made */
	trace_call("activity on", 1);
	pthread_mutex_lock(&mu);
	first = !set_up;
	set_up = kernel_act = dirty = true;
	if (!kernel_name)
		kernel_name = strdup("_Z12model_kernelv");
	pthread_mutex_unlock(&mu);
	if (first) {
		spin_until(mono_ns() + setup_ns);
		__atomic_add_fetch(&n_setup, 1, __ATOMIC_RELAXED);
	}
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
	contract("cuptiActivityDisable");
	if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
		trace_call("activity off", 0);
		pthread_mutex_lock(&mu);
		kernel_act = false;
		pthread_mutex_unlock(&mu);
	}
	return CUPTI_SUCCESS;
}

/* Hand back the buffers FLAG allows, oldest first, outside the lock (the client's
 * callback may call into CUPTI). */
EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
	struct mbuf out[MODEL_BUFS];
	CUpti_BuffersCallbackCompleteFunc done;
	int n = 0;
	uint64_t now = mono_ns();

	contract("cuptiActivityFlushAll");
	pthread_mutex_lock(&mu);
	done = done_fn;
	while (n < nbufs && (bufs[n].last_end <= now || (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED))) {
		out[n] = bufs[n];
		for (size_t off = 0; off + REC_SIZE <= out[n].used; off += REC_SIZE) {
			CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)(out[n].p + off);

			if (k->end - MODEL_CLOCK_AHEAD > now)
				k->start = k->end = 0; /* not complete: forced out */
		}
		n++;
	}
	memmove(bufs, bufs + n, (size_t)(nbufs - n) * sizeof(bufs[0]));
	nbufs -= n;
	pthread_mutex_unlock(&mu);
	if (getenv("CUPTI_MODEL_DEBUG") && strcmp(getenv("CUPTI_MODEL_DEBUG"), "2") == 0)
		fprintf(stderr, "model: flush %u: %d buffers, %d left, done %p\n", flag, n, nbufs, (void *)done);
	for (int i = 0; i < n; i++)
		if (done)
			done(NULL, 0, out[i].p, out[i].size, out[i].used);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record)
{
	uint8_t *p = *record ? (uint8_t *)*record + REC_SIZE : buffer;

	contract("cuptiActivityGetNextRecord");
	if (p + REC_SIZE > buffer + valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*record = (CUpti_Activity *)p;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *n)
{
	contract("cuptiActivityGetNumDroppedRecords");
	(void)ctx;
	(void)stream;
	pthread_mutex_lock(&mu);
	*n = dropped;
	dropped = 0;
	pthread_mutex_unlock(&mu);
	return CUPTI_SUCCESS;
}

/* Everything ends; buffers never handed back are CUPTI's to drop. */
EXPORT CUptiResult CUPTIAPI cuptiFinalize(void)
{
	uint64_t t0 = mono_ns();

	contract("cuptiFinalize");
	if (tls_in_cb != (int)CUPTI_API_EXIT + 1)
		broken("cuptiFinalize outside an API exit callback");
	if (tls_api_depth != 1)
		broken("cuptiFinalize in the exit callback of a call inside another one (that call's exit then "
		       "runs in a CUPTI torn down)");
	if (tls_cb_launch)
		broken("cuptiFinalize in a launch's exit callback (CUPTI's dispatch then goes on in what it freed: "
		       "SIGSEGV or a broken heap on an H100)");
	__atomic_store_n(&fin_busy, 1, __ATOMIC_RELEASE);
	tls_finalized = true;
	trace_call("finalize", 0);
	pthread_mutex_lock(&mu);
	subscribed = kernel_act = dirty = set_up = ctx_cb_on = false;
	memset(cb_on, 0, sizeof(cb_on));
	req_fn = NULL;
	done_fn = NULL;
	nbufs = 0;
	if (kernel_name) {
		kernel_name[0] = '?';
		free(kernel_name);
		kernel_name = NULL;
	}
	pthread_mutex_unlock(&mu);
	spin_until(t0 + finalize_ns);
	__atomic_add_fetch(&n_fin, 1, __ATOMIC_RELAXED);
	return CUPTI_SUCCESS;
}

__attribute__((destructor)) static void model_stats(void)
{
	static const char *const names[ST_N] = {"without CUPTI", "subscribed", "after activity (to cuptiFinalize)",
						"with activity on"};

	if (!getenv("CUPTI_MODEL_DEBUG"))
		return;
	for (int i = 0; i < ST_N; i++)
		fprintf(stderr,
			"model: %llu launches %s, %.2f us each (%.2f us in callbacks), %.2f us from the last one's "
			"return\n",
			(unsigned long long)n_state[i], names[i],
			n_state[i] ? (double)ns_state[i] / (double)n_state[i] / 1e3 : 0,
			n_state[i] ? (double)cbt_state[i] / (double)n_state[i] / 1e3 : 0,
			n_gap[i] ? (double)gap_state[i] / (double)n_gap[i] / 1e3 : 0);
	fprintf(stderr, "model: %llu set-ups, %llu finalizes\n", (unsigned long long)n_setup,
		(unsigned long long)n_fin);
}
