// SPDX-License-Identifier: MIT
/* Names that change while a profiler watches: the main thread spins as "phase-one", then
 * renames itself (the process name with it) "phase-two" and spins again, while a worker
 * thread "wl-worker" spins throughout; then the process execs itself, as "phase-three".
 * Each sample must carry the names of its own moment.
 * Usage: cpu_rename [SECONDS per phase, default 1]. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "wl_common.h"

#define NOINLINE __attribute__((noinline))

static volatile int stop;

NOINLINE void spin_main(void)
{
	WL_SPIN(100);
}

NOINLINE void spin_worker(void)
{
	WL_SPIN(100);
}

static void *worker(void *arg)
{
	pthread_setname_np(pthread_self(), "wl-worker");
	while (!stop)
		spin_worker();
	return arg;
}

static void phase(const char *name, double secs)
{
	double end = wl_now() + secs;

	prctl(PR_SET_NAME, name, 0, 0, 0);
	while (wl_now() < end)
		spin_main();
}

int main(int argc, char **argv)
{
	double secs = wl_seconds(argc, argv);
	pthread_t t;

	if (argc > 2 && !strcmp(argv[2], "--exec-done")) {
		phase("phase-three", secs);
		return 0;
	}
	wl_gate();
	phase("phase-one", 0);
	if (pthread_create(&t, NULL, worker, NULL))
		return 1;
	phase("phase-one", secs);
	phase("phase-two", secs);
	stop = 1;
	pthread_join(t, NULL);
	fflush(stdout);
	execl("/proc/self/exe", argv[0], argv[1] ? argv[1] : "1", "--exec-done", (char *)NULL);
	return 1;
}
