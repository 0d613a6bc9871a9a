// SPDX-License-Identifier: MIT
/* The dynamic linker's r_state in a process (userspace/trace/dlstate.c): this process's
 * own ld.so learnt, the address found from its maps is the r_state of the r_debug the
 * linker keeps (the one its DT_DEBUG names: this binary's own _r_debug is a copy
 * relocation), read back as RT_CONSISTENT; a file with no _r_debug, maps that name no
 * known linker or that would overflow, a process gone. The BPF side's use of it runs in
 * tests/e2e/52. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlstate.h"
#include "readfile.h"
#include "test.h"

extern ElfW(Dyn) _DYNAMIC[];

/* The linker's r_debug, as it told debuggers in this binary's DT_DEBUG. */
static struct r_debug *linker_r_debug(void)
{
	for (ElfW(Dyn) *d = _DYNAMIC; d->d_tag != DT_NULL; d++)
		if (d->d_tag == DT_DEBUG)
			return (struct r_debug *)d->d_un.d_ptr;
	return NULL;
}

/* The path of this process's dynamic linker, from its maps. */
static int linker_path(const char *maps, char *out, size_t len)
{
	const char *p = strstr(maps, "/ld-linux");
	const char *start, *end;

	if (!p)
		return -1;
	for (start = p; start > maps && start[-1] != ' '; start--)
		;
	end = strchr(p, '\n');
	if (!end || (size_t)(end - start) >= len)
		return -1;
	memcpy(out, start, (size_t)(end - start));
	out[end - start] = '\0';
	return 0;
}

TEST(own_linker)
{
	struct dlstate d = {0};
	char *maps = readfile__path("/proc/self/maps", 1 << 20, false, NULL), path[512];
	int fd = -1, self = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	uint64_t at;

	CHECK(maps && linker_path(maps, path, sizeof(path)) == 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_INT(dlstate__addr(&d, maps) == 0, 1); /* no linker known yet */
	CHECK_INT(dlstate__add_file(&d, fd), 0);
	CHECK_INT(dlstate__add_file(&d, fd), 0); /* once */
	CHECK_INT((int)d.files.len, 1);
	at = dlstate__addr(&d, maps);
	CHECK(linker_r_debug() && at == (uint64_t)(uintptr_t)&linker_r_debug()->r_state);
	CHECK_INT(dlstate__read(getpid(), at), DL_RT_CONSISTENT);
	/* the test binary has no _r_debug of its own */
	CHECK_INT(dlstate__add_file(&d, self), -ENOENT);
	CHECK_INT((int)d.files.len, 1);
	free(maps);
	close(fd);
	close(self);
	dlstate__free(&d);
}

TEST(maps_that_name_no_linker)
{
	struct dlstate d = {0};
	char *maps = readfile__path("/proc/self/maps", 1 << 20, false, NULL), path[512], line[1024];
	struct stat st;
	int fd;

	CHECK(maps && linker_path(maps, path, sizeof(path)) == 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && fstat(fd, &st) == 0 && dlstate__add_file(&d, fd) == 0);
	/* its file at an offset other than 0, another inode, garbage, nothing */
	snprintf(line, sizeof(line), "7f0000001000-7f0000002000 r-xp 00001000 %02x:%02x %lu %s\n", major(st.st_dev),
		 minor(st.st_dev), (unsigned long)st.st_ino, path);
	CHECK(dlstate__addr(&d, line) == 0);
	snprintf(line, sizeof(line), "7f0000000000-7f0000001000 r--p 00000000 %02x:%02x %lu %s\n", major(st.st_dev),
		 minor(st.st_dev), (unsigned long)st.st_ino + 1, path);
	CHECK(dlstate__addr(&d, line) == 0);
	CHECK(dlstate__addr(&d, "garbage\n\n-\n") == 0);
	CHECK(dlstate__addr(&d, "") == 0);
	CHECK(dlstate__addr(&d, NULL) == 0);
	/* the right file where its r_state would lie past the top of the address space */
	snprintf(line, sizeof(line), "fffffffffffff000-ffffffffffffffff r--p 00000000 %02x:%02x %lu %s",
		 major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino, path);
	CHECK(dlstate__addr(&d, line) == 0);
	/* and where it would not: found, without a trailing newline */
	snprintf(line, sizeof(line), "7f0000000000-7f0000001000 r--p 00000000 %02x:%02x %lu %s", major(st.st_dev),
		 minor(st.st_dev), (unsigned long)st.st_ino, path);
	CHECK(dlstate__addr(&d, line) > 0x7f0000000000ull);
	free(maps);
	close(fd);
	dlstate__free(&d);
}

TEST(process_gone)
{
	pid_t child = fork();

	if (child == 0)
		_exit(0);
	CHECK(child > 0);
	waitpid(child, NULL, 0);
	CHECK(dlstate__read(child, (uint64_t)(uintptr_t)&linker_r_debug()->r_state) < 0);
	CHECK(dlstate__read(getpid(), 8) < 0); /* nothing mapped there */
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(own_linker);
	RUN(maps_that_name_no_linker);
	RUN(process_gone);
	return T_END();
}
