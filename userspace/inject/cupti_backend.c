// SPDX-License-Identifier: MIT
/* The CUPTI side of libgpubpf_inject.so. libcupti is dlopened at the first attach, never
 * while idle, so an idle job does not even map it; it then stays loaded (CUPTI keeps
 * threads and state that a dlclose would pull out from under them).
 *
 * Which CUPTI: the one the job already loaded, if any (PyTorch loads its own libcupti at
 * start-up without subscribing: that very copy, never a second one beside it, whose
 * activity records must be of CUPTI 13); else the toolkit's.
 *
 * Attach: subscribe (cuptiSubscribe_v2 names a subscriber that is there already: the
 * user's torch.profiler or Nsight, and gpubpf then stays out of its way) to the launch,
 * graph-launch and copy callbacks of the runtime and driver, and enable
 * CONCURRENT_KERNEL, MEMCPY and MEMSET activity once (enabling CONCURRENT_KERNEL has
 * stalled jobs for seconds elsewhere: never toggled per window).
 * Detach: disable the activity kinds, force a flush, and give up the subscription: at
 * once for the job's own CUPTI (its profiler may want it), else with cuptiFinalize at the
 * next API exit (where CUPTI's documentation wants it), which detaches CUPTI entirely.
 *
 * CUPTI 13.3+ lets several subscribers trace at once, but only through its V2 APIs, and
 * a process that mixes V1 and V2 gets CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
 * turning it on here would break a later torch.profiler whose kineto uses V1. Not used
 * (docs/DEVICE_TIME.md). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h> /* with generated_cuda_meta.h and ..._runtime_api_meta.h: the params */

#include "backend.h"
#include "cupti_int.h"

#ifndef INJ_CUPTI_LIB
#define INJ_CUPTI_LIB "libcupti.so.13"
#endif

static void *cupti_handle;
static CUpti_SubscriberHandle subscriber;
static bool subscribed, activity_on;
static bool job_cupti; /* the CUPTI is the one the job loaded itself */
/* cuptiFinalize, as CUPTI's documentation asks, in the exit callback of an API call, but
 * of one of the library's own: the watcher calls the driver's cuCtxGetCurrent with its
 * callback on, and that call's exit finalizes (finalize_now). Not in a job's launch: on
 * an H100, a cuptiFinalize in cudaLaunchKernel's exit callback killed launch_loop with
 * SIGSEGV in 12 runs of 28 (in CUPTI's callback dispatch of a launch, on memory the
 * finalize had let go) and broke PyTorch's heap ("malloc(): unsorted double linked list
 * corrupted"); nor outside a callback, where kineto saw it race with other threads.
 * FIN_PENDING from its asking, FIN_RUNNING while it runs (a buffer CUPTI hands back
 * meanwhile calls no CUPTI). */
enum { FIN_NONE, FIN_PENDING, FIN_RUNNING };
static int finalize_pending;
static uint64_t fin_done;	    /* when the last one returned */
static __thread bool tls_finalizer; /* the watcher, in its own driver call */
/* Buffers being handed back (CUPTI's own threads): one that began before a finalize was
 * asked for may still call CUPTI (its clock, its drop count), which races the finalize
 * (kineto saw a SIGSEGV in such a race): the finalize waits for them, FIN_WAIT_NS at most. */
static int in_completion;
#define FIN_WAIT_NS 20000000ull
static CUresult(CUDAAPI *p_cuCtxGetCurrent)(CUcontext *);
/* After a finalize, CUPTI is left alone this long: a job's thread in a launch that
 * entered CUPTI's dispatch before it may still be on its way out. */
#define FIN_SETTLE_NS 2000000ull
/* Read at attach: GPUBPF_INJECT_FINALIZE=0 never finalizes (a window's end turns activity
 * and callbacks off and stays subscribed: launches then pay CUPTI's 0.5-0.6 us until the
 * process ends, an H100's); GPUBPF_INJECT_SETTLE_MS, FIN_SETTLE_NS;
 * GPUBPF_INJECT_DRIVER_LIB, the library whose cuCtxGetCurrent runs the finalize (the
 * driver the job loaded; tests/workloads/inject/cupti_model.c is its own driver). */
static bool no_finalize;
static uint64_t settle_ns = FIN_SETTLE_NS;
/* Device time in windows: activity was on since CUPTI was set up; a window's end then
 * tears CUPTI down (cupti_set), after the window's records came in or DRAIN_NS passed
 * (a kernel queued behind 1024 others of 20 us each ends 20 ms after its launch). */
static bool windows_mode, act_dirty;
static uint64_t drain_until;
static int64_t open_deficit; /* followed calls without their records when activity went on */
#define DRAIN_NS 50000000ull
uint8_t inj_cb_class[3][CBID_MAX]; /* [domain][cbid]: enum inj_api_class */

#define CUPTI_FNS(X)                                                                                                   \
	X(cuptiSubscribe, CUptiResult, (CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *))                         \
	X(cuptiUnsubscribe, CUptiResult, (CUpti_SubscriberHandle))                                                     \
	X(cuptiEnableCallback, CUptiResult,                                                                            \
	  (uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId))                                  \
	X(cuptiEnableAllDomains, CUptiResult, (uint32_t, CUpti_SubscriberHandle))                                      \
	X(cuptiGetCallbackName, CUptiResult, (CUpti_CallbackDomain, uint32_t, const char **))                          \
	X(cuptiActivityRegisterCallbacks, CUptiResult,                                                                 \
	  (CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc))                                       \
	X(cuptiActivityEnable, CUptiResult, (CUpti_ActivityKind))                                                      \
	X(cuptiActivityDisable, CUptiResult, (CUpti_ActivityKind))                                                     \
	X(cuptiActivityFlushAll, CUptiResult, (uint32_t))                                                              \
	X(cuptiActivityGetNextRecord, CUptiResult, (uint8_t *, size_t, CUpti_Activity **))                             \
	X(cuptiActivityGetNumDroppedRecords, CUptiResult, (CUcontext, uint32_t, size_t *))                             \
	X(cuptiGetResultString, CUptiResult, (CUptiResult, const char **))                                             \
	X(cuptiGetTimestamp, CUptiResult, (uint64_t *))

#define DECL(name, ret, args) static ret(CUPTIAPI *p_##name) args;
CUPTI_FNS(DECL)
#undef DECL
static CUptiResult(CUPTIAPI *p_cuptiSubscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
						  CUpti_SubscriberParams *);
static CUptiResult(CUPTIAPI *p_cuptiFinalize)(void);

static const char *result_str(CUptiResult r)
{
	const char *s = NULL;

	if (p_cuptiGetResultString && p_cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s)
		return s;
	return "unknown CUPTI error";
}

/* ---- activity records ---------------------------------------------------------------- */

static uint64_t cupti_clock(void)
{
	uint64_t t = 0;

	return p_cuptiGetTimestamp && p_cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? t : 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
	CUpti_Activity *r = NULL;
	size_t dropped = 0;
	bool finalizing;

	(void)size;
	__atomic_add_fetch(&in_completion, 1, __ATOMIC_ACQ_REL);
	finalizing = __atomic_load_n(&finalize_pending, __ATOMIC_ACQUIRE) != FIN_NONE;
	inj_trace("buffer back: %zu bytes%s", valid, finalizing ? ", in the finalize" : "");
	/* a buffer handed back by cuptiFinalize itself, or while one is about to run: no
	 * CUPTI call but the records' */
	if (!finalizing)
		inj_sample_clock();
	if (valid > 0) {
		while (p_cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS)
			inj_handle_record(r);
	}
	inj_flush(&inj);
	if (!finalizing && p_cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
		inj_count_lost(&inj, dropped);
	if (buffer)
		inj_pool_put(buffer);
	__atomic_sub_fetch(&in_completion, 1, __ATOMIC_ACQ_REL);
}

/* ---- API callbacks -------------------------------------------------------------------- */

/* In the exit callback of the watcher's own driver call (finalize_now). */
static void finalize_here(void)
{
	int one = FIN_PENDING;
	uint64_t t0 = inj_mono_ns(), t1;

	if (!__atomic_compare_exchange_n(&finalize_pending, &one, FIN_RUNNING, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return;
	inj_trace("finalize: begins");
	p_cuptiFinalize();
	t1 = inj_mono_ns();
	inj_trace("finalize: done in %llu us", (unsigned long long)(t1 - t0) / 1000);
	/* its name strings are gone: names are looked up by their text again */
	__atomic_add_fetch(&inj.names_gen, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&subscribed, false, __ATOMIC_RELEASE);
	__atomic_store_n(&fin_done, t1, __ATOMIC_RELEASE);
	__atomic_store_n(&finalize_pending, FIN_NONE, __ATOMIC_RELEASE);
}

void CUPTIAPI inj_on_callback(void *userdata, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *cb = data;
	int cls;

	(void)userdata;
	if ((dom != CUPTI_CB_DOMAIN_RUNTIME_API && dom != CUPTI_CB_DOMAIN_DRIVER_API) || cbid >= CBID_MAX || !cb)
		return;
	if (tls_finalizer) {
		/* the watcher's own call: the only callback that finalizes */
		if (dom == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent &&
		    cb->callbackSite == CUPTI_API_EXIT)
			finalize_here();
		return;
	}
	cls = inj_cb_class[dom][cbid];
	if (!cls)
		return;
	if (cb->callbackSite == CUPTI_API_ENTER) {
		uint64_t t_cb = inj_callback_start(&inj);

		if (cls == INJ_API_LAUNCH && cb->symbolName)
			inj_announce_handle(&inj, inj_launch_handle(dom, cbid, cb->functionParams), cb->symbolName);
		inj_api_enter(&inj, t_cb, cls, dom, cbid, cb->correlationId, cb->functionName);
		return;
	}
	inj_api_exit(&inj);
}

static void set_callbacks(bool on);

/* The watcher tears CUPTI down now: the job's callbacks off, its own cuCtxGetCurrent's
 * on, and that call's exit callback finalizes. False where it did not (no driver call to
 * make, or its callback never came): CUPTI stays subscribed with nothing on. */
static bool finalize_now(void)
{
	CUcontext ctx = NULL;

	if (no_finalize || !p_cuptiFinalize || !p_cuCtxGetCurrent || !__atomic_load_n(&subscribed, __ATOMIC_ACQUIRE))
		return false;
	set_callbacks(false);
	if (p_cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent) !=
	    CUPTI_SUCCESS)
		return false;
	__atomic_store_n(&finalize_pending, FIN_PENDING, __ATOMIC_RELEASE);
	for (uint64_t t0 = inj_mono_ns();
	     __atomic_load_n(&in_completion, __ATOMIC_ACQUIRE) > 0 && inj_mono_ns() - t0 < FIN_WAIT_NS;)
		sched_yield();
	tls_finalizer = true;
	p_cuCtxGetCurrent(&ctx);
	tls_finalizer = false;
	if (__atomic_load_n(&finalize_pending, __ATOMIC_ACQUIRE) == FIN_NONE)
		return true; /* finalize_here ran */
	__atomic_store_n(&finalize_pending, FIN_NONE, __ATOMIC_RELEASE);
	p_cuptiEnableCallback(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent);
	inj_trace("finalize: no callback for the driver call: CUPTI stays subscribed");
	return false;
}

/* Whether CUPTI may be called now: no finalize running, and the job's threads out of the
 * last one's way (FIN_SETTLE_NS). */
static bool cupti_settled(void)
{
	return !__atomic_load_n(&finalize_pending, __ATOMIC_ACQUIRE) &&
	       inj_mono_ns() - __atomic_load_n(&fin_done, __ATOMIC_ACQUIRE) >= settle_ns;
}

/* Attach: the last finalize's settling waited for. */
static void finalize_settle(void)
{
	struct timespec ts = {0, 200000};

	while (!cupti_settled())
		nanosleep(&ts, NULL);
}

/* CUPTI's own work to call back one driver call, enter and exit (ns): the watcher's
 * cuCtxGetCurrent, with no class of ours (inj_on_callback returns at once), in batches of
 * PAIR_BATCH with its callback on and off in turn, the fastest half of each, once the job
 * has launched (backend.h). What a launch's callbacks cost beyond the library's own time
 * in them, which no callback can time (devwin.c). A launch's dispatch carries more (its
 * kernel's name): gpubpf takes the H100's as the least. 0: not measured now. */
#define PAIR_BATCH 64
#define PAIR_ROUNDS 24
static uint32_t dispatch_pair(void)
{
	uint32_t t[2][PAIR_ROUNDS], on, off;
	CUcontext ctx = NULL;

	if (!p_cuCtxGetCurrent || !__atomic_load_n(&subscribed, __ATOMIC_ACQUIRE) || !cupti_settled())
		return 0;
	for (int r = 0; r < PAIR_ROUNDS; r++) {
		for (int k = 0; k < 2; k++) {
			uint64_t t0;

			if (k && p_cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
						       CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent) != CUPTI_SUCCESS)
				return 0;
			t0 = inj_mono_ns();
			for (int i = 0; i < PAIR_BATCH; i++)
				p_cuCtxGetCurrent(&ctx);
			t[k][r] = (uint32_t)((inj_mono_ns() - t0) / PAIR_BATCH);
			if (k)
				p_cuptiEnableCallback(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
						      CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent);
		}
	}
	off = inj_tmean(t[0], PAIR_ROUNDS);
	on = inj_tmean(t[1], PAIR_ROUNDS);
	inj_trace("dispatch: cuCtxGetCurrent %u ns with its callback, %u ns without", on, off);
	return on > off ? on - off : 0;
}

/* ---- attach / detach ------------------------------------------------------------------ */

/* An object the process has loaded whose file name starts with PREFIX: its path. */
struct loaded {
	const char *prefix;
	char path[256];
};

static int find_object(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct loaded *f = ctx;
	const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	if (!base || strncmp(base, f->prefix, strlen(f->prefix)) != 0)
		return 0;
	snprintf(f->path, sizeof(f->path), "%s", info->dlpi_name);
	return 1;
}

/* The driver's cuCtxGetCurrent, whose exit callback finalizes (finalize_now): from the
 * driver the job loaded, or GPUBPF_INJECT_DRIVER_LIB. Its reference is kept. */
static void load_driver_call(void)
{
	const char *path = getenv("GPUBPF_INJECT_DRIVER_LIB");
	struct loaded drv = {.prefix = "libcuda.so"};
	void *h;

	if (p_cuCtxGetCurrent)
		return;
	if (!path || !*path) {
		if (!dl_iterate_phdr(find_object, &drv))
			return;
		path = drv.path;
	}
	h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (h)
		p_cuCtxGetCurrent = (CUresult(CUDAAPI *)(CUcontext *))dlsym(h, "cuCtxGetCurrent");
	inj_trace("the finalize's driver call: %s in %s", p_cuCtxGetCurrent ? "cuCtxGetCurrent" : "none", path);
}

/* The records are read through the structs of the CUPTI headers this library was built
 * with (CUpti_ActivityKernel10, ...): a CUPTI of another major version lays them out
 * differently. */
static int check_version(const char *path, char *why, size_t len)
{
	CUptiResult(CUPTIAPI * get_version)(uint32_t *) =
	    (CUptiResult(CUPTIAPI *)(uint32_t *))dlsym(cupti_handle, "cuptiGetVersion");
	uint32_t v = 0;

	if (!get_version || get_version(&v) != CUPTI_SUCCESS) {
		snprintf(why, len, "CUPTI (%s) does not say its version", path);
		return DEV_ST_NO_CUPTI;
	}
	if (v / 10000 != CUPTI_API_VERSION / 10000 || v < CUPTI_API_VERSION) {
		snprintf(why, len,
			 "the job's CUPTI (%s) has API version %u; gpubpf reads the records of CUPTI %u.x (API %u "
			 "or later)",
			 path, v, CUPTI_API_VERSION / 10000, CUPTI_API_VERSION);
		return DEV_ST_NO_CUPTI;
	}
	return 0;
}

static int load_cupti(char *why, size_t len)
{
	const char *path = getenv("GPUBPF_CUPTI_LIB");
	struct loaded f = {.prefix = "libcupti"};
	int st;

	if (cupti_handle)
		return 0;
	if (dl_iterate_phdr(find_object, &f)) {
		/* The job loaded a CUPTI itself (PyTorch does at start-up, without subscribing):
		 * use that very one, never a second copy beside it. Whether its owner is a client
		 * (torch.profiler, Nsight) is for cuptiSubscribe to say. */
		path = f.path;
		job_cupti = true;
		cupti_handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
		if (!cupti_handle) {
			snprintf(why, len, "cannot use the job's CUPTI (%s): %s", path, dlerror());
			return DEV_ST_NO_CUPTI;
		}
	} else {
		if (!path || !*path)
			path = INJ_CUPTI_LIB;
		cupti_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!cupti_handle && strchr(path, '/')) {
			path = "libcupti.so.13";
			cupti_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		}
		if (!cupti_handle) {
			snprintf(why, len, "cannot load CUPTI (%s): %s", path, dlerror());
			return DEV_ST_NO_CUPTI;
		}
	}
	st = check_version(path, why, len);
	if (st)
		goto fail;
#define LOAD(name, ret, args)                                                                                          \
	p_##name = (ret(CUPTIAPI *) args)dlsym(cupti_handle, #name);                                                   \
	if (!p_##name) {                                                                                               \
		snprintf(why, len, "CUPTI (%s) lacks %s", path, #name);                                                \
		st = DEV_ST_NO_CUPTI;                                                                                  \
		goto fail;                                                                                             \
	}
	CUPTI_FNS(LOAD)
#undef LOAD
	p_cuptiSubscribe_v2 =
	    (CUptiResult(CUPTIAPI *)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
				     CUpti_SubscriberParams *))dlsym(cupti_handle, "cuptiSubscribe_v2");
	p_cuptiFinalize = (CUptiResult(CUPTIAPI *)(void))dlsym(cupti_handle, "cuptiFinalize");
	return 0;
fail:
	/* Tried again at the next attach (a handle of the job's own CUPTI only drops a
	 * reference: the job keeps its copy). */
	dlclose(cupti_handle);
	cupti_handle = NULL;
	return st;
}

static int subscribe(char *why, size_t len)
{
	CUptiResult r;
	char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 8] = "";

	if (subscribed)
		return 0;
	if (p_cuptiSubscribe_v2) {
		CUpti_SubscriberParams p = {
		    .structSize = CUpti_SubscriberParams_STRUCT_SIZE,
		    .subscriberName = "gpubpf",
		    .oldSubscriberName = old,
		    .oldSubscriberSize = sizeof(old),
		};

		r = p_cuptiSubscribe_v2(&subscriber, (CUpti_CallbackFunc)inj_on_callback, NULL, &p);
	} else {
		r = p_cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)inj_on_callback, NULL);
	}
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		snprintf(why, len, "another CUPTI subscriber is present%s%s%s", old[0] ? " (" : "", old,
			 old[0] ? ")" : "");
		return DEV_ST_OTHER_SUBSCRIBER;
	}
	if (r != CUPTI_SUCCESS) {
		struct loaded drv = {.prefix = "libcuda.so"};

		/* Without a working driver CUPTI cannot start (NOT_INITIALIZED, or UNKNOWN
		 * where the driver is missing altogether): say that, not just the code. */
		if (r == CUPTI_ERROR_NOT_INITIALIZED || r == CUPTI_ERROR_UNKNOWN)
			snprintf(why, len, "cuptiSubscribe: %s: %s", result_str(r),
				 dl_iterate_phdr(find_object, &drv)
				     ? "the CUDA driver in this process did not initialize"
				     : "no CUDA driver in this process");
		else
			snprintf(why, len, "cuptiSubscribe: %s", result_str(r));
		return DEV_ST_CUPTI_ERROR;
	}
	subscribed = true;
	return 0;
}

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
					   CUPTI_ACTIVITY_KIND_MEMSET};

static void activity_off(void)
{
	if (!activity_on)
		return;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		p_cuptiActivityDisable(kinds[i]);
	p_cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	activity_on = false;
}

static void unsubscribe(void)
{
	if (!subscribed)
		return;
	p_cuptiEnableAllDomains(0, subscriber);
	p_cuptiUnsubscribe(subscriber);
	subscribed = false;
}

static int cupti_attach(struct inj_state *s, char *why, size_t len)
{
	static const CUpti_CallbackDomain doms[] = {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API};
	static const uint32_t sizes[] = {CUPTI_RUNTIME_TRACE_CBID_SIZE, CUPTI_DRIVER_TRACE_CBID_SIZE};
	const char *e = getenv("GPUBPF_INJECT_FINALIZE");
	CUptiResult r;
	int st, enabled = 0;

	no_finalize = e && strcmp(e, "0") == 0;
	e = getenv("GPUBPF_INJECT_SETTLE_MS");
	settle_ns = e && *e ? strtoull(e, NULL, 10) * 1000000ull : FIN_SETTLE_NS;
	st = load_cupti(why, len);
	if (st)
		return st;
	load_driver_call();
	inj_device_clock = cupti_clock;
	finalize_settle();
	windows_mode = s->windowed;
	st = subscribe(why, len);
	if (st)
		return st;
	r = p_cuptiActivityRegisterCallbacks(inj_buffer_requested, buffer_completed);
	if (r != CUPTI_SUCCESS) {
		snprintf(why, len, "cuptiActivityRegisterCallbacks: %s", result_str(r));
		goto fail;
	}
	/* In windows, activity waits for the first window (or the cost measurement's middle
	 * phase): once on, it costs every launch until cuptiFinalize (cupti_set). */
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && !windows_mode; i++) {
		r = p_cuptiActivityEnable(kinds[i]);
		if (r != CUPTI_SUCCESS) {
			snprintf(why, len, "cuptiActivityEnable(%d): %s", (int)kinds[i], result_str(r));
			activity_on = true;
			goto fail;
		}
	}
	activity_on = act_dirty = !windows_mode;
	for (size_t d = 0; d < 2; d++) {
		for (uint32_t cbid = 1; cbid < sizes[d] && cbid < CBID_MAX; cbid++) {
			const char *name = NULL;
			enum inj_api_class cls;

			if (p_cuptiGetCallbackName(doms[d], cbid, &name) != CUPTI_SUCCESS)
				continue;
			cls = inj_classify(name);
			inj_cb_class[doms[d]][cbid] = (uint8_t)cls;
			if (cls && p_cuptiEnableCallback(1, subscriber, doms[d], cbid) == CUPTI_SUCCESS)
				enabled++;
		}
	}
	if (!enabled) {
		snprintf(why, len, "no launch or copy callback could be enabled");
		goto fail;
	}
	snprintf(why, len, "attached: %d API callbacks, kernel/memcpy/memset activity%s", enabled,
		 windows_mode ? " in windows" : "");
	return DEV_ST_ATTACHED;
fail:
	activity_off();
	unsubscribe();
	return DEV_ST_CUPTI_ERROR;
}

static void cupti_detach(bool process_exit)
{
	inj_trace("detach%s: subscribed %d, activity %d", process_exit ? " at exit" : "", subscribed, activity_on);
	finalize_settle();
	activity_off();
	/* The job's own CUPTI (PyTorch's): its profiler may subscribe any moment from now,
	 * before any API call would run a pending cuptiFinalize, and CUPTI takes one
	 * subscriber. Let go of the subscription at once; CUPTI stays initialized, with no
	 * activity kind and no callback of ours. */
	if (job_cupti) {
		unsubscribe();
		return;
	}
	/* At the process's exit no driver call is made (the driver may be tearing down
	 * already): the records are out (activity_off's forced flush), the callbacks off. */
	if (process_exit) {
		if (subscribed)
			set_callbacks(false);
		return;
	}
	/* Else the job runs on: CUPTI is torn down, as after a window. */
	if (!finalize_now())
		unsubscribe();
}

static void cupti_flush(void)
{
	if (activity_on && cupti_settled())
		p_cuptiActivityFlushAll(0);
}

/* Device time in windows: activity on before the callbacks that follow launches, and off
 * after them. Enabling CONCURRENT_KERNEL the first time generates CUPTI's instrumentation
 * for the loaded modules (seconds in large jobs); attach did that once, so a window's
 * switch only flips what is collected (its cost is timed: struct dev_win's switch_ns). */
static void set_callbacks(bool on)
{
	static const CUpti_CallbackDomain doms[] = {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API};

	for (size_t d = 0; d < 2; d++)
		for (uint32_t cbid = 1; cbid < CBID_MAX; cbid++)
			if (inj_cb_class[doms[d]][cbid])
				p_cuptiEnableCallback(on, subscriber, doms[d], cbid);
}

/* CUPTI set up again for a window, after the last one's cuptiFinalize. */
static bool resubscribe(void)
{
	char why[160];

	if (subscribe(why, sizeof(why))) {
		inj_trace("set-up again: %s", why);
		return false;
	}
	if (p_cuptiActivityRegisterCallbacks(inj_buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
		inj_trace("set-up again: cuptiActivityRegisterCallbacks failed");
		unsubscribe();
		return false;
	}
	inj_trace("set-up again: subscribed");
	act_dirty = false;
	return true;
}

/* Followed launches and copies without their records (less, where a graph launch's
 * nodes came in). */
static int64_t deficit(void)
{
	return (int64_t)(__atomic_load_n(&inj.ctr.launches_sampled, __ATOMIC_RELAXED) +
			 __atomic_load_n(&inj.ctr.copies_sampled, __ATOMIC_RELAXED) -
			 __atomic_load_n(&inj.kept, __ATOMIC_RELAXED));
}

/* Measured on an H100 (tests/workloads/cuda/cupti_cost, docs/DESIGN.md): once kernel
 * activity has been on, the driver calls into CUPTI on every launch until cuptiFinalize,
 * activity off, callbacks off and unsubscribed alike: 0.5-1.5 us more on a 3.6-4.5 us
 * launch, for seconds and more. So in windows, a window's end tears CUPTI down (once the
 * window's records are in, or DRAIN_NS passed: finalize_now, in the watcher, which runs
 * this), and the next window sets it up again (9-17 ms, ahead of its slot, counted as the
 * window's switches, the finalize's time with them). */
static bool cupti_set(int want)
{
	bool act = want & INJ_ACT, cb = want & INJ_CB;

	inj_trace("switch to%s%s: subscribed %d, activity %d%s", act ? " activity" : "", cb ? " callbacks" : "",
		  subscribed, activity_on, act_dirty ? ", dirty" : "");
	if (!cupti_settled())
		return !want;
	if (!__atomic_load_n(&subscribed, __ATOMIC_ACQUIRE)) {
		if (!want)
			return true;
		if (!resubscribe())
			return false;
	}
	if (act && !activity_on) {
		for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
			p_cuptiActivityEnable(kinds[i]);
		/* a window right after one still draining: both windows' records are waited for */
		if (!act_dirty)
			open_deficit = deficit();
		activity_on = act_dirty = true;
	}
	if (!act && activity_on) {
		/* the launches followed in the window get their records inside the driver */
		inj_wait_followed(&inj, INJ_FOLLOWED_WAIT_NS);
		for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
			p_cuptiActivityDisable(kinds[i]);
		activity_on = false;
		drain_until = inj_mono_ns() + DRAIN_NS;
		set_callbacks(false);
	}
	/* CUPTI down where nothing is wanted, too: subscribed with nothing on, a launch
	 * still costs 0.15-0.3 us more (cupti_cost's "subscribed") */
	if (windows_mode && ((!act && act_dirty) || !want)) {
		/* The kernels launched in the window finish and their records come in. Only
		 * buffers whose records are all complete are asked for (a forced flush hands
		 * back a kernel still queued or running with no times: lost, and a device-bound
		 * job's window would lose all of its kernels, tests/e2e/82); forced only at the
		 * end, before cuptiFinalize drops what CUPTI still holds. */
		p_cuptiActivityFlushAll(0);
		if (act_dirty && deficit() > open_deficit && inj_mono_ns() < drain_until)
			return false;
		p_cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		if (finalize_now())
			return !want; /* set up again at the next step, once settled */
		inj_trace("window's end: activity off, no finalize%s",
			  no_finalize ? " (GPUBPF_INJECT_FINALIZE=0)" : "");
		act_dirty = false;
	}
	set_callbacks(cb);
	return true;
}

const struct inj_backend inj_cupti_backend = {
    .attach = cupti_attach,
    .detach = cupti_detach,
    .flush = cupti_flush,
    .set = cupti_set,
    .dispatch_pair = dispatch_pair,
};
