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
 * wl_ucount_open(), wl_ucount_mark(0 or 1), wl_ucount_print(N, UNIT): the calling
 * thread's instructions and cycles in user mode from the CPU's own counters (as
 * tests/workloads/python/user_counters.py), printed between the two marks per N UNITs as
 * " user_instr_per_UNIT=I user_cycles_per_UNIT=C", or " user_instr_per_UNIT=none(WHY)"
 * where they cannot be opened (a VM without a virtual PMU: ENOENT). A probe's trap leaves
 * the instructions as they were and costs the cycles the thread's code spends after it.
 *
 * stdout carries only "ready" (when asked to wait) and the final summary line.
 * Plain C so that nvcc-built and cc-built workloads link the same object. */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

static int ucount_fd[2] = {-1, -1}, ucount_err;
static double ucount_at[2][2];

void wl_ucount_open(void)
{
	static const unsigned long long config[2] = {PERF_COUNT_HW_INSTRUCTIONS, PERF_COUNT_HW_CPU_CYCLES};

	for (int i = 0; i < 2 && !ucount_err; i++) {
		struct perf_event_attr a;

		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.type = PERF_TYPE_HARDWARE;
		a.config = config[i];
		a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
		a.exclude_kernel = 1;
		a.exclude_hv = 1;
		ucount_fd[i] = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
		if (ucount_fd[i] < 0)
			ucount_err = errno;
	}
}

/* The counts now into mark SLOT (0 before, 1 after), scaled where they were multiplexed. */
void wl_ucount_mark(int slot)
{
	for (int i = 0; i < 2 && !ucount_err; i++) {
		unsigned long long v[3];

		if (read(ucount_fd[i], v, sizeof(v)) != (ssize_t)sizeof(v)) {
			ucount_err = EIO;
			break;
		}
		ucount_at[slot & 1][i] = v[2] ? (double)v[0] * (double)v[1] / (double)v[2] : 0;
	}
}

void wl_ucount_print(double n, const char *unit)
{
	const char *why = ucount_err == ENOENT ? "ENOENT" : ucount_err ? strerror(ucount_err) : NULL;

	if (why || n <= 0) {
		printf(" user_instr_per_%s=none(%s)", unit, why ? why : "no count");
		return;
	}
	printf(" user_instr_per_%s=%.0f user_cycles_per_%s=%.0f", unit, (ucount_at[1][0] - ucount_at[0][0]) / n, unit,
	       (ucount_at[1][1] - ucount_at[0][1]) / n);
}
