// SPDX-License-Identifier: MIT
/* Two threads that hand work to each other: the main thread writes a byte to a pipe and
 * waits for the answer, the other (wl-peer) reads it and answers, WORK units of spin on
 * each side. Each hand-over is a switch of each thread (to the other or to idle and back),
 * the pattern of a producer and its consumer, or of PyTorch's forward thread and autograd's
 * backward one. Usage: cpu_handoff [SECONDS] [WORK]. Prints "cpu_handoff: handoffs=N
 * seconds=S per_sec=X same_cpu=F": F the share of hand-overs whose answer came from the
 * CPU the main thread read it on (on one CPU a hand-over is a direct switch, across two a
 * wake-up of the other CPU: several times slower where idle CPUs halt, so the rate follows
 * where the scheduler puts the two). WL_HANDOFF_SLICE=SECONDS also prints each slice's
 * rate and share to stderr ("slice t=T per_sec=X same_cpu=F"). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "wl_common.h"

#define NOINLINE __attribute__((noinline))

static int there[2], back[2];
static long work;
static volatile int peer_cpu = -1; /* the CPU the peer answered from, set before it writes */

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
		peer_cpu = sched_getcpu();
		if (write(back[1], &c, 1) != 1)
			break;
	}
	return arg;
}

int main(int argc, char **argv)
{
	double secs = wl_seconds(argc, argv), t0, t, slice = 0, ts;
	long n = 0, same = 0, sn = 0, ssame = 0;
	const char *sl = getenv("WL_HANDOFF_SLICE");
	pthread_t th;
	char c = 0;

	work = argc > 2 ? atol(argv[2]) : 0;
	if (pipe(there) || pipe(back) || pthread_create(&th, NULL, peer, NULL)) {
		perror("cpu_handoff");
		return 1;
	}
	if (sl)
		slice = atof(sl);
	wl_gate();
	t0 = ts = wl_now();
	do {
		if (write(there[1], &c, 1) != 1 || read(back[0], &c, 1) != 1) {
			perror("cpu_handoff");
			return 1;
		}
		if (peer_cpu == sched_getcpu())
			same++;
		handoff_work();
		n++;
		t = wl_now();
		if (slice > 0 && (t - ts >= slice || t - t0 >= secs)) {
			fprintf(stderr, "slice t=%.3f per_sec=%.0f same_cpu=%.3f\n", t - t0,
				(double)(n - sn) / (t - ts), n > sn ? (double)(same - ssame) / (double)(n - sn) : 0.0);
			ts = t, sn = n, ssame = same;
		}
	} while (t - t0 < secs);
	close(there[1]);
	pthread_join(th, NULL);
	printf("cpu_handoff: handoffs=%ld seconds=%.6f per_sec=%.0f same_cpu=%.3f\n", n, t - t0, (double)n / (t - t0),
	       n ? (double)same / (double)n : 0.0);
	return 0;
}
