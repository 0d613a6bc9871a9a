// SPDX-License-Identifier: MIT
/* A start-up among many mappings: map MAPPINGS one-page regions of its own executable
 * (none merge: a CUDA job's thread stacks and driver reservations count in the
 * thousands), then dlopen gpubpf's own dependencies one by one. A command gpubpf
 * started is held at each load until its tracers have read the process's maps and the
 * new objects' symbols. Usage: maps_loads [MAPPINGS [LIBRARY...]]: the libraries named
 * instead of those (large C++ libraries, as a PyTorch start-up loads, export tens of
 * thousands of functions). Prints "maps_loads: M mappings, N dlopens in S s" (the loads
 * alone). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "wl_common.h"

int main(int argc, char **argv)
{
	static const char *const libs[] = {"libm.so.6",	  "libz.so.1",	  "libelf.so.1",     "libdw.so.1",
					   "libbpf.so.1", "libcurl.so.4", "libjansson.so.4", "libzstd.so.1"};
	int k = argc > 1 ? atoi(argv[1]) : 3000, fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), n = 0, want;
	double t0;

	if (fd < 0 || k < 0 || k > 60000) {
		fprintf(stderr, "usage: maps_loads [MAPPINGS <= 60000 [LIBRARY...]]\n");
		return 2;
	}
	for (int i = 0; i < k; i++)
		if (mmap(NULL, 4096, (i & 1) ? PROT_READ : PROT_NONE, MAP_PRIVATE, fd, 0) == MAP_FAILED) {
			perror("maps_loads: mmap");
			return 1;
		}
	t0 = wl_now();
	if (argc > 2) {
		want = argc - 2;
		for (int i = 2; i < argc; i++)
			n += dlopen(argv[i], RTLD_NOW) != NULL;
	} else {
		want = (int)(sizeof(libs) / sizeof(libs[0]));
		for (int i = 0; i < want; i++)
			n += dlopen(libs[i], RTLD_NOW) != NULL;
	}
	if (n != want) {
		fprintf(stderr, "maps_loads: %d of %d libraries would not load: %s\n", want - n, want, dlerror());
		return 1;
	}
	printf("maps_loads: %d mappings, %d dlopens in %.4f s\n", k, n, wl_now() - t0);
	return 0;
}
