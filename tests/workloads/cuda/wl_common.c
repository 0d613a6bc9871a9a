/* Shared start-up convention for the CUDA test workloads (tests/workloads/cuda/).
 *
 *   GPUBPF_WL_WAIT=1 (or argv[1] == "--wait-stdin")
 *       print "ready\n" on stdout, flush, and block until a line (or EOF) is read
 *       on stdin. Nothing CUDA-related has run yet (static cudart's constructors
 *       have registered the fat binary, nothing more), so a tracer can attach
 *       with `-p PID` and then release the workload by writing a line.
 *   GPUBPF_WL_REPEAT=N (N >= 1, default 1)
 *       multiply every loop count by N; the summary line prints the scaled counts.
 *
 * wl_now(): CLOCK_MONOTONIC in seconds, for the workloads that time themselves.
 *
 * stdout carries only "ready" (when asked to wait) and the final summary line.
 * Plain C so that nvcc-built and cc-built workloads link the same object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int wl_repeat(void)
{
	const char *s = getenv("GPUBPF_WL_REPEAT");
	long n = s ? strtol(s, NULL, 10) : 1;

	return n >= 1 && n <= 1000000 ? (int)n : 1;
}

void wl_wait(int argc, char **argv)
{
	const char *s = getenv("GPUBPF_WL_WAIT");
	int wait = s && *s && strcmp(s, "0") != 0;
	char line[64];

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--wait-stdin") == 0)
			wait = 1;
	if (!wait)
		return;
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return; /* EOF releases too */
}

double wl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}
