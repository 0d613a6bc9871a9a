// SPDX-License-Identifier: MIT
/* Two threads that hand work to each other: the main thread writes a byte to a pipe and
 * waits for the answer, the other (wl-peer) reads it and answers, WORK units of spin on
 * each side. Each hand-over is a switch of each thread (to the other or to idle and back),
 * the pattern of a producer and its consumer, or of PyTorch's forward thread and autograd's
 * backward one. Usage: cpu_handoff [SECONDS] [WORK]. Prints "cpu_handoff: handoffs=N
 * seconds=S per_sec=X". */
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>

#include "wl_common.h"

#define NOINLINE __attribute__((noinline))

static int there[2], back[2];
static long work;

NOINLINE void handoff_work(void)
{
	WL_SPIN(work);
}

static void *peer(void *arg)
{
	char c;

	pthread_setname_np(pthread_self(), "wl-peer");
	while (read(there[0], &c, 1) == 1) {
		handoff_work();
		if (write(back[1], &c, 1) != 1)
			break;
	}
	return arg;
}

int main(int argc, char **argv)
{
	double secs = wl_seconds(argc, argv), t0, t;
	long n = 0;
	pthread_t th;
	char c = 0;

	work = argc > 2 ? atol(argv[2]) : 0;
	if (pipe(there) || pipe(back) || pthread_create(&th, NULL, peer, NULL)) {
		perror("cpu_handoff");
		return 1;
	}
	wl_gate();
	t0 = wl_now();
	do {
		if (write(there[1], &c, 1) != 1 || read(back[0], &c, 1) != 1) {
			perror("cpu_handoff");
			return 1;
		}
		handoff_work();
		n++;
		t = wl_now();
	} while (t - t0 < secs);
	close(there[1]);
	pthread_join(th, NULL);
	printf("cpu_handoff: handoffs=%ld seconds=%.6f per_sec=%.0f\n", n, t - t0, (double)n / (t - t0));
	return 0;
}
