// SPDX-License-Identifier: MIT
/* The parent waits at the gate, then forks two children that spin in child_work (one of
 * them after exec'ing itself, to test following across exec) while the parent spins in
 * parent_work. Usage: cpu_fork [SECONDS]. */
#include <sys/wait.h>
#include <unistd.h>

#include "wl_common.h"

#define NOINLINE __attribute__((noinline))

NOINLINE void child_work(double secs)
{
	double end = wl_now() + secs;

	while (wl_now() < end)
		WL_SPIN(100);
}

NOINLINE void parent_work(double secs)
{
	double end = wl_now() + secs;

	while (wl_now() < end)
		WL_SPIN(100);
}

int main(int argc, char **argv)
{
	double secs = wl_seconds(argc, argv);
	char arg[32];
	pid_t kids[2];

	if (argc > 2 && !strcmp(argv[2], "child")) {
		child_work(secs);
		return 0;
	}
	wl_gate();
	snprintf(arg, sizeof(arg), "%g", secs);
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 1;
		if (kids[i] == 0) {
			if (i == 1) {
				execl("/proc/self/exe", argv[0], arg, "child", (char *)NULL);
				_exit(127);
			}
			child_work(secs);
			_exit(0);
		}
	}
	parent_work(secs);
	for (int i = 0; i < 2; i++)
		waitpid(kids[i], NULL, 0);
	printf("cpu_fork: done\n");
	return 0;
}
