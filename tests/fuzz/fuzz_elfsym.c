// SPDX-License-Identifier: MIT
/* libFuzzer harness: function symbols of an ELF object (userspace/sym/elfsym.c), the file
 * a target maps: .symtab and .dynsym passes, and .gnu.hash lookups whose every read is
 * bounded by the sections' sizes. The input is the file (in a memfd); each way of
 * reading .dynsym is run (by size, the pass, the hash), each with and without ELFSYM_CUDART,
 * and none may find more names than asked. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elfsym.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct elfsym_want w[] = {{.name = "cudaLaunchKernel"},
				  {.name = "cudaMalloc"},
				  {.name = "cudaData"},
				  {.name = "_dl_debug_state"},
				  {.name = "f"}};
	int n = (int)(sizeof(w) / sizeof(w[0]));
	int fd = memfd_create("fuzz_elfsym", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		/* each way, with and without ELFSYM_CUDART's look at the object's kind and
		 * dependencies (.dynamic, its names read one by one) */
		for (unsigned flags = 0; flags <= (ELFSYM_HASH | ELFSYM_CUDART); flags++) {
			int found = elfsym__lookup_fd_flags(fd, w, n, flags), had = 0;

			for (int i = 0; i < n; i++)
				had += w[i].offset != 0;
			if (found > n || (found >= 0 && found != had))
				abort();
		}
	}
	close(fd);
	return 0;
}
