// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "elfsym.h"
#include "test.h"

__attribute__((noinline)) int elfsym_probe_target(int x)
{
	return x * 3 + 1;
}

/* Our own function: its file offset, mapped back through /proc/self/maps, is its address. */
TEST(own_function)
{
	struct elfsym_want w[] = {{.name = "elfsym_probe_target"}, {.name = "no_such_symbol_here"}};
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	uint64_t start, end, off, want_off = 0;
	char line[512], perms[8];
	FILE *maps;

	CHECK(fd >= 0);
	CHECK_INT(elfsym__lookup_fd(fd, w, 2), 1);
	close(fd);
	CHECK(w[0].offset != 0);
	CHECK_INT(w[1].offset, 0);
	/* The mapping that holds the function gives the expected offset. */
	maps = fopen("/proc/self/maps", "r");
	CHECK(maps != NULL);
	uintptr_t a = (uintptr_t)&elfsym_probe_target;
	while (fgets(line, sizeof(line), maps)) {
		if (sscanf(line, "%lx-%lx %7s %lx", &start, &end, perms, &off) == 4 && a >= start && a < end) {
			want_off = a - start + off;
			break;
		}
	}
	fclose(maps);
	CHECK_INT(w[0].offset, want_off);
}

TEST(not_elf)
{
	struct elfsym_want w[] = {{.name = "x"}};
	int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		SKIP("/etc/hostname missing");
	CHECK_INT(elfsym__lookup_fd(fd, w, 1), -ENOEXEC);
	close(fd);
}

TEST(libcudart)
{
	const char *home = getenv("CUDA_HOME");
	char path[512];
	struct elfsym_want w[] = {{.name = "cudaLaunchKernel"},
				  {.name = "cudaMemcpy"},
				  {.name = "cudaMalloc"},
				  {.name = "cudaLaunchKernel_ptsz"}};
	int fd;

	snprintf(path, sizeof(path), "%s/lib64/libcudart.so.13", home && *home ? home : "/usr/local/cuda");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		SKIP("%s is missing (no CUDA here)", path);
	CHECK_INT(elfsym__lookup_fd(fd, w, 4), 4);
	close(fd);
	for (int i = 0; i < 4; i++)
		CHECK(w[i].offset != 0);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(own_function);
	RUN(not_elf);
	RUN(libcudart);
	return T_END();
}
