// SPDX-License-Identifier: MIT
/* A tiny "JIT": a spin loop copied into anonymous executable memory and run from there,
 * so its samples can only be named by the process's perf map (/tmp/perf-PID.map).
 * With --perf-map it writes that map itself, naming the code "jit_spin", as JITs do.
 * Usage: cpu_jit [SECONDS] [--perf-map]. Exit 3 where the code is not x86-64. */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "wl_common.h"

int main(int argc, char **argv)
{
#if defined(__x86_64__)
	/* mov rcx, 0x100000; 1: dec rcx; jnz 1b; ret */
	static const unsigned char code[] = {0x48, 0xc7, 0xc1, 0x00, 0x00, 0x10, 0x00,
					     0x48, 0xff, 0xc9, 0x75, 0xfb, 0xc3};
	double end = wl_now() + wl_seconds(argc, argv);
	unsigned char *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void (*fn)(void);

	if (mem == MAP_FAILED)
		return 1;
	memcpy(mem, code, sizeof(code));
	if (mprotect(mem, 4096, PROT_READ | PROT_EXEC))
		return 1;
	if (argc > 2 && !strcmp(argv[2], "--perf-map")) {
		char path[64];
		FILE *f;

		snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
		f = fopen(path, "w");
		if (!f)
			return 1;
		fprintf(f, "%lx %zx jit_spin\n", (unsigned long)(uintptr_t)mem, sizeof(code));
		fclose(f);
	}
	printf("jit=%p\n", (void *)mem);
	fflush(stdout);
	fn = (void (*)(void))(uintptr_t)mem;
	while (wl_now() < end)
		fn();
	return 0;
#else
	(void)argc;
	(void)argv;
	fprintf(stderr, "cpu_jit: x86-64 only\n");
	return 3;
#endif
}
