// SPDX-License-Identifier: MIT
/* Bounded whole-file reads (userspace/lib/readfile.c): every size below, at and past the
 * bound, truncated or refused, and the errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "readfile.h"
#include "test.h"

static char path[64];

static int make_file(size_t n)
{
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/gpubpf-readfile-XXXXXX");
	{
		int fd = mkstemp(path);

		if (fd < 0)
			return -1;
		close(fd);
	}
	f = fopen(path, "w");
	if (!f)
		return -1;
	for (size_t i = 0; i < n; i++)
		fputc('a' + (int)(i % 26), f);
	return fclose(f);
}

TEST(sizes_and_bounds)
{
	size_t len = 0;
	char *b;

	CHECK_INT(make_file(200000), 0); /* past the first 64 KiB buffer: grows */
	b = readfile__path(path, 1 << 20, false, &len);
	CHECK(b && len == 200000 && strlen(b) == 200000 && b[199999] == 'a' + 199999 % 26);
	free(b);
	b = readfile__path(path, 200000, false, &len); /* exactly the bound */
	CHECK(b && len == 200000);
	free(b);
	b = readfile__path(path, 1000, true, &len);
	CHECK(b && len == 1000 && strlen(b) == 1000);
	free(b);
	errno = 0;
	b = readfile__path(path, 1000, false, &len);
	CHECK(!b && errno == EFBIG);
	unlink(path);
	CHECK_INT(make_file(0), 0);
	b = readfile__path(path, 100, false, NULL);
	CHECK(b && b[0] == '\0');
	free(b);
	unlink(path);
	errno = 0;
	CHECK(!readfile__path("/nonexistent/gpubpf", 100, true, NULL) && errno == ENOENT);
	/* /proc files report size 0: read until EOF all the same */
	b = readfile__path("/proc/self/maps", 1 << 20, false, &len);
	CHECK(b && len > 0 && strstr(b, "["));
	free(b);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(sizes_and_bounds);
	return T_END();
}
