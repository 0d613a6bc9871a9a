// mt_wl: 4 threads, thread i launches mt_kernel 25R times from its own noinline
// call site mt_site_<i> (R = GPUBPF_WL_REPEAT) => cudaLaunchKernel 100R in all,
// 25R per thread; each thread then calls cudaStreamSynchronize(0) once.
// Threads are named "wl-worker-<i>". Static cudart. Start-up: wl_common.c.
#include <cstdio>
#include <pthread.h>
#include <cuda_runtime.h>

extern "C" int wl_repeat(void);
extern "C" void wl_wait(int argc, char **argv);

#define NOINLINE __attribute__((noinline))
#define NTHREADS 4

__global__ void mt_kernel(int tid, int *out)
{
	if (out && threadIdx.x == 0)
		out[tid] = tid;
}

static int g_per_thread;

NOINLINE static void mt_site_0(int n) { for (int i = 0; i < n; i++) mt_kernel<<<1, 32>>>(0, nullptr); }
NOINLINE static void mt_site_1(int n) { for (int i = 0; i < n; i++) mt_kernel<<<1, 32>>>(1, nullptr); }
NOINLINE static void mt_site_2(int n) { for (int i = 0; i < n; i++) mt_kernel<<<1, 32>>>(2, nullptr); }
NOINLINE static void mt_site_3(int n) { for (int i = 0; i < n; i++) mt_kernel<<<1, 32>>>(3, nullptr); }

static void (*const sites[NTHREADS])(int) = {mt_site_0, mt_site_1, mt_site_2, mt_site_3};

static void *worker(void *arg)
{
	long i = (long)arg;
	char name[16];

	snprintf(name, sizeof(name), "wl-worker-%ld", i);
	pthread_setname_np(pthread_self(), name);
	sites[i](g_per_thread);
	(void)cudaStreamSynchronize(0);
	return nullptr;
}

int main(int argc, char **argv)
{
	pthread_t t[NTHREADS];

	g_per_thread = 25 * wl_repeat();
	wl_wait(argc, argv);
	for (long i = 0; i < NTHREADS; i++)
		if (pthread_create(&t[i], nullptr, worker, (void *)i) != 0)
			return 1;
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], nullptr);
	printf("mt_wl: threads=%d launch=%d launch_per_thread=%d stream_sync=%d\n", NTHREADS, NTHREADS * g_per_thread,
	       g_per_thread, NTHREADS);
	return 0;
}
