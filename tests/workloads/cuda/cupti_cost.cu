// cupti_cost: what each CUPTI state costs a kernel launch on this machine's driver, in
// one process, state after state (the order matters: a state may leave something behind).
//   cupti_cost [LAUNCHES] [--early] [--all-kinds] [--per-cbid]   (100000 launches a state)
// --early subscribes and turns activity on before the CUDA context exists (where an
// injection library called from cuInit does); --all-kinds turns memcpy and memset
// activity on and off with the kernels'; --per-cbid turns on the launch and copy
// callbacks one by one (cuptiEnableCallback) instead of whole domains. --decay (last):
// a 10 ms window, then the call's cost in 50 ms slices for 3 s, with CUPTI left
// subscribed and with it finalized, and what opening and closing a window takes.
// --residue never|finalized (last): a launch's cost in a process where CUPTI was never set
// up, or was for one 10 ms window and then finalized; run the two alternately.
// --dispatch (last): what CUPTI's dispatch of the launch callbacks adds to a launch, against
// what it adds to a driver call of the injection library's own (dispatch()).
// For each state: the launch call's own time, in ns (host clock around batches of 200
// launches, each batch followed by a synchronize that is not timed, so that the device's
// queue never fills and the figure is the CPU's), the median of the batches' means; and
// the launches per second of an unsynchronized loop (the device may set that pace).
// States: none; subscribed (no callback); launch callbacks on; callbacks off again;
// kernel activity on; activity off; both on; both off; unsubscribed; finalized.
// Prints one "cupti_cost: state=NAME call_ns=X loop_per_sec=Y" line per state. Needs a
// GPU; without one it prints the CUDA error and exits 1.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>
#include <dlfcn.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>

extern "C" double wl_now(void);

#define BATCH 200

__global__ void empty_kernel(int i, int *out)
{
	if (out && threadIdx.x == 0)
		out[0] = i;
}

static double now(void)
{
	return wl_now();
}

static void CUPTIAPI on_callback(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *)
{
}

static size_t records;

static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max)
{
	*size = 1 << 20;
	*buf = (uint8_t *)aligned_alloc(8, *size);
	*max = 0;
}

static void CUPTIAPI buf_completed(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid)
{
	CUpti_Activity *r = NULL;

	while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS)
		records++;
	free(buf);
}

static int check(const char *what, int rc)
{
	if (rc) {
		fprintf(stderr, "cupti_cost: %s: error %d\n", what, rc);
		exit(1);
	}
	return rc;
}

static void measure(const char *state, long n)
{
	std::vector<double> means;
	double t0, end;
	long loops = 0;
	cudaError_t e;

	for (long done = 0; done < n; done += BATCH) {
		t0 = now();
		for (int i = 0; i < BATCH; i++)
			empty_kernel<<<1, 32>>>(i, nullptr);
		means.push_back((now() - t0) / BATCH * 1e9);
		check("synchronize", cudaDeviceSynchronize());
	}
	if ((e = cudaGetLastError()) != cudaSuccess)
		check(cudaGetErrorString(e), e);
	std::sort(means.begin(), means.end());
	t0 = now();
	end = t0 + 0.5;
	while (now() < end) {
		for (int i = 0; i < 1000; i++)
			empty_kernel<<<1, 32>>>(i, nullptr);
		loops += 1000;
	}
	check("synchronize", cudaDeviceSynchronize());
	printf("cupti_cost: state=%s call_ns=%.0f loop_per_sec=%.0f records=%zu\n", state, means[means.size() / 2],
	       loops / (now() - t0), records);
	fflush(stdout);
}

static bool all_kinds, per_cbid;

/* launch and copy API functions, by name, as the injection library picks them */
static bool followed(const char *name)
{
	return name && (strstr(name, "aunch") || strstr(name, "emcpy") || strstr(name, "emset"));
}

static void callbacks(CUpti_SubscriberHandle s, int on)
{
	static const CUpti_CallbackDomain doms[] = {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API};
	static const uint32_t sizes[] = {CUPTI_RUNTIME_TRACE_CBID_SIZE, CUPTI_DRIVER_TRACE_CBID_SIZE};

	if (!per_cbid) {
		check("cuptiEnableDomain(runtime)", cuptiEnableDomain(on, s, CUPTI_CB_DOMAIN_RUNTIME_API));
		check("cuptiEnableDomain(driver)", cuptiEnableDomain(on, s, CUPTI_CB_DOMAIN_DRIVER_API));
		return;
	}
	for (int d = 0; d < 2; d++)
		for (uint32_t cbid = 1; cbid < sizes[d]; cbid++) {
			const char *name = NULL;

			if (cuptiGetCallbackName(doms[d], cbid, &name) == CUPTI_SUCCESS && followed(name))
				cuptiEnableCallback(on, s, doms[d], cbid);
		}
}

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
					   CUPTI_ACTIVITY_KIND_MEMSET};

static void activity(int on)
{
	for (int i = 0; i < (all_kinds ? 3 : 1); i++)
		check(on ? "cuptiActivityEnable" : "cuptiActivityDisable",
		      on ? cuptiActivityEnable(kinds[i]) : cuptiActivityDisable(kinds[i]));
	if (!on)
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

/* The launch call's cost in consecutive 50 ms slices for SECS seconds: how long a state's
 * cost lasts after it ends. */
static void series(const char *state, double secs)
{
	double t0 = now(), slice_end = t0 + 0.05, sum = 0;
	long n = 0;

	printf("cupti_cost: series=%s call_ns_per_50ms=", state);
	while (now() < t0 + secs) {
		double a = now();

		empty_kernel<<<1, 32>>>(0, nullptr);
		sum += now() - a;
		if (++n % 100 == 0)
			check("synchronize", cudaDeviceSynchronize());
		if (now() >= slice_end) {
			printf("%.0f,", sum / n * 1e9);
			sum = 0;
			n = 0;
			slice_end += 0.05;
		}
	}
	printf("\n");
	fflush(stdout);
}

/* A window as gpubpf opens one (activity and callbacks on for 10 ms), then what it costs
 * afterwards: with activity off and callbacks off, and with CUPTI finalized; and what a
 * window's start costs when CUPTI was finalized after the last one. */
static void decay(long n)
{
	CUpti_SubscriberHandle s;
	double t0;

	check("cudaFree(0)", cudaFree(0));
	measure("none", n);
	for (int fin = 0; fin < 2; fin++) {
		t0 = now();
		check("cuptiSubscribe", cuptiSubscribe(&s, (CUpti_CallbackFunc)on_callback, NULL));
		check("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(buf_requested, buf_completed));
		activity(1);
		callbacks(s, 1);
		printf("cupti_cost: window-start%s us=%.0f\n", fin ? "-after-finalize" : "", (now() - t0) * 1e6);
		series("window", 0.01);
		t0 = now();
		activity(0);
		callbacks(s, 0);
		if (fin) {
			check("cuptiUnsubscribe", cuptiUnsubscribe(s));
			check("cuptiFinalize", cuptiFinalize());
		}
		printf("cupti_cost: window-end%s us=%.0f\n", fin ? "-finalize" : "", (now() - t0) * 1e6);
		series(fin ? "after-finalize" : "after-off", 3);
		if (!fin) {
			check("cuptiUnsubscribe", cuptiUnsubscribe(s));
			check("cuptiFinalize", cuptiFinalize());
			series("then-finalized", 0.5);
		}
	}
}

/* What a job pays after CUPTI was set up once and finalized (--residue finalized), against
 * one where it never was (--residue never), each in a process of its own so that the two
 * can be run alternately: gpubpf sets CUPTI up only for a window and finalizes it after,
 * and counts nothing of a launch's cost between windows. Prints state=residue-MODE. */
static int residue(long n, const char *mode)
{
	CUpti_SubscriberHandle s;
	bool fin = !strcmp(mode, "finalized");
	double t0;

	if (!fin && strcmp(mode, "never")) {
		fprintf(stderr, "cupti_cost: --residue takes never or finalized\n");
		return 2;
	}
	check("cudaFree(0)", cudaFree(0));
	measure("warm-up", n);
	if (fin) {
		check("cuptiSubscribe", cuptiSubscribe(&s, (CUpti_CallbackFunc)on_callback, NULL));
		check("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(buf_requested, buf_completed));
		activity(1);
		callbacks(s, 1);
		series("window", 0.01);
		activity(0);
		callbacks(s, 0);
		check("cuptiUnsubscribe", cuptiUnsubscribe(s));
		check("cuptiFinalize", cuptiFinalize());
	}
	/* as long after the window as the other mode's first call is after its warm-up */
	for (t0 = now(); now() < t0 + 0.01;)
		;
	measure(fin ? "residue-finalized" : "residue-never", n);
	return 0;
}

/* CUPTI's own work to call back a launch (--dispatch): the launch and copy callbacks on
 * (per callback id, as the injection library enables them: the runtime's and the driver's)
 * against subscribed with nothing on, in alternating batches of launches; and a driver
 * call of the library's own, cuCtxGetCurrent, with its callback on and off in turn, timed
 * as libgpubpf_inject times it (userspace/inject/cupti_backend.c, dispatch_pair): the pair
 * it takes, scaled by a launch's two, against what a launch pays. Medians of each.
 * Prints one "cupti_cost: dispatch ..." line. */
static int dispatch(long n)
{
	std::vector<double> launch[2], ctx[2];
	CUresult (*get_ctx)(CUcontext *) = NULL;
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CUpti_SubscriberHandle s;
	CUcontext c = NULL;
	auto med = [](std::vector<double> &v) {
		std::sort(v.begin(), v.end());
		return v.empty() ? 0.0 : v[v.size() / 2];
	};

	per_cbid = true;
	check("cudaFree(0)", cudaFree(0));
	measure("warm-up", n);
	if (!drv)
		drv = dlopen("libcuda.so.1", RTLD_NOW);
	if (drv)
		get_ctx = (CUresult(*)(CUcontext *))dlsym(drv, "cuCtxGetCurrent");
	if (!get_ctx) {
		fprintf(stderr, "cupti_cost: no cuCtxGetCurrent in libcuda.so.1\n");
		return 1;
	}
	check("cuptiSubscribe", cuptiSubscribe(&s, (CUpti_CallbackFunc)on_callback, NULL));
	for (long done = 0; done < n; done += 2 * BATCH)
		for (int on = 0; on < 2; on++) {
			double t0;

			if (on)
				callbacks(s, 1);
			t0 = now();
			for (int i = 0; i < BATCH; i++)
				empty_kernel<<<1, 32>>>(i, nullptr);
			launch[on].push_back((now() - t0) / BATCH * 1e9);
			if (on)
				callbacks(s, 0);
			check("synchronize", cudaDeviceSynchronize());
		}
	for (int r = 0; r < 200; r++)
		for (int on = 0; on < 2; on++) {
			double t0;

			if (on)
				check("cuptiEnableCallback",
				      cuptiEnableCallback(1, s, CUPTI_CB_DOMAIN_DRIVER_API,
							  CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent));
			t0 = now();
			for (int i = 0; i < 64; i++)
				get_ctx(&c);
			ctx[on].push_back((now() - t0) / 64 * 1e9);
			if (on)
				cuptiEnableCallback(0, s, CUPTI_CB_DOMAIN_DRIVER_API,
						    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent);
		}
	printf("cupti_cost: dispatch launch_on_ns=%.0f launch_off_ns=%.0f ctx_on_ns=%.0f ctx_off_ns=%.0f\n",
	       med(launch[1]), med(launch[0]), med(ctx[1]), med(ctx[0]));
	fflush(stdout);
	check("cuptiUnsubscribe", cuptiUnsubscribe(s));
	return 0;
}

int main(int argc, char **argv)
{
	long n = 100000;
	bool early = false;
	CUpti_SubscriberHandle s;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--early"))
			early = true;
		else if (!strcmp(argv[i], "--all-kinds"))
			all_kinds = true;
		else if (!strcmp(argv[i], "--per-cbid"))
			per_cbid = true;
		else if (!strcmp(argv[i], "--decay"))
			return decay(n), 0;
		else if (!strcmp(argv[i], "--residue") && i + 1 < argc)
			return residue(n, argv[i + 1]);
		else if (!strcmp(argv[i], "--dispatch"))
			return dispatch(n);
		else if (atol(argv[i]) > 0)
			n = atol(argv[i]);
		else {
			fprintf(stderr, "usage: cupti_cost [LAUNCHES] [--early] [--all-kinds] [--per-cbid] "
					"[--decay | --residue never|finalized | --dispatch]\n");
			return 2;
		}
	}
	if (early) {
		/* as an injection library attached at cuInit: everything on before the context */
		check("cuptiSubscribe", cuptiSubscribe(&s, (CUpti_CallbackFunc)on_callback, NULL));
		check("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(buf_requested, buf_completed));
		activity(1);
		callbacks(s, 1);
		check("cudaFree(0)", cudaFree(0));
		measure("early-both", n);
		activity(0);
		callbacks(s, 0);
		measure("early-both-off", n);
	} else {
		check("cudaFree(0)", cudaFree(0));
		measure("warm-up", n);
		measure("none", n);
		check("cuptiSubscribe", cuptiSubscribe(&s, (CUpti_CallbackFunc)on_callback, NULL));
		check("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(buf_requested, buf_completed));
		measure("subscribed", n);
	}
	callbacks(s, 1);
	measure("callbacks", n);
	callbacks(s, 0);
	measure("callbacks-off", n);
	activity(1);
	measure("activity", n);
	activity(0);
	measure("activity-off", n);
	callbacks(s, 1);
	activity(1);
	measure("both", n);
	activity(0);
	callbacks(s, 0);
	measure("both-off", n);
	check("cuptiUnsubscribe", cuptiUnsubscribe(s));
	measure("unsubscribed", n);
	check("cuptiFinalize", cuptiFinalize());
	measure("finalized", n);
	return 0;
}
