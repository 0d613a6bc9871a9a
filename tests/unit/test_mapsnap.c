// SPDX-License-Identifier: MIT
/* One read of /proc/PID/maps an event (userspace/lib/mapsnap.c): in a scope, readers after
 * the first get copies of its text, bounded and refused as readfile__path would; another
 * pid, a process gone, and reads outside a scope. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mapsnap.h"
#include "readfile.h"
#include "test.h"

static unsigned long reads(void)
{
	unsigned long r, c;

	mapsnap__counts(&r, &c);
	return r;
}

static unsigned long copies(void)
{
	unsigned long r, c;

	mapsnap__counts(&r, &c);
	return c;
}

TEST(one_read_a_scope)
{
	pid_t child = fork();
	unsigned long r0, c0;
	size_t la = 0, lb = 0, lc = 0;
	char *a, *b, *c, *fresh;

	if (child == 0) {
		pause();
		_exit(0);
	}
	CHECK(child > 0);
	kill(child, SIGSTOP); /* its maps stay as they are */
	waitpid(child, NULL, WUNTRACED);
	fresh = readfile__path("/proc/self/maps", 1 << 20, false, NULL);
	r0 = reads(), c0 = copies();
	mapsnap__begin();
	a = mapsnap__read(child, 64u << 20, false, &la);
	b = mapsnap__read(child, 16u << 20, true, &lb);
	CHECK(a && b && la > 0 && la == lb && !memcmp(a, b, la) && strlen(b) == lb);
	CHECK_INT((int)(reads() - r0), 1);
	CHECK_INT((int)(copies() - c0), 2);
	/* a reader's bound: the first bytes, or refused */
	c = mapsnap__read(child, 100, true, &lc);
	CHECK(c && lc == 100 && strlen(c) == 100 && !memcmp(a, c, 100));
	free(c);
	errno = 0;
	CHECK(!mapsnap__read(child, 100, false, NULL) && errno == EFBIG);
	c = mapsnap__read(child, la, false, &lc); /* exactly the bound is all right */
	CHECK(c && lc == la);
	free(c);
	CHECK_INT((int)(reads() - r0), 1);
	/* another pid replaces it */
	c = mapsnap__read(getpid(), 1 << 20, false, &lc);
	CHECK(c && fresh && strstr(c, "[stack]"));
	free(c);
	CHECK_INT((int)(reads() - r0), 2);
	mapsnap__end();
	/* outside a scope every reader reads */
	c = mapsnap__read(child, 1 << 20, false, &lc);
	CHECK(c && lc == la && !memcmp(a, c, la));
	free(c);
	free(mapsnap__read(child, 1 << 20, false, NULL));
	CHECK_INT((int)(reads() - r0), 4);
	free(a);
	free(b);
	free(fresh);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

TEST(gone_once)
{
	pid_t child = fork();
	unsigned long r0;

	if (child == 0)
		_exit(0);
	CHECK(child > 0);
	waitpid(child, NULL, 0);
	r0 = reads();
	mapsnap__begin();
	errno = 0;
	CHECK(!mapsnap__read(child, 1 << 20, true, NULL) && errno == ENOENT);
	errno = 0;
	CHECK(!mapsnap__read(child, 1 << 20, false, NULL) && errno == ENOENT);
	CHECK_INT((int)(reads() - r0), 1);
	/* a scope begun again starts afresh */
	mapsnap__begin();
	CHECK(!mapsnap__read(child, 1 << 20, true, NULL));
	CHECK_INT((int)(reads() - r0), 2);
	mapsnap__end();
	mapsnap__end();
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(one_read_a_scope);
	RUN(gone_once);
	return T_END();
}
