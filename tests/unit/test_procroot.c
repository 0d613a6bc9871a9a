// SPDX-License-Identifier: MIT
/* Files a target names are opened inside its root (procroot.c): an absolute symlink on the
 * way resolves against that root, never the host's. Where openat2 is missing (a seccomp
 * filter older than it, emulated here with one that answers ENOSYS), nothing is opened at
 * all: an openat relative to the root would follow such a link out of it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "procroot.h"
#include "test.h"

/* A root at DIR with dir/link -> /etc (absolute: the host's /etc if followed outside). */
static int make_root(char *dir)
{
	char p[512];

	if (!mkdtemp(dir))
		return -1;
	snprintf(p, sizeof(p), "%s/inside", dir);
	if (mkdir(p, 0755))
		return -1;
	snprintf(p, sizeof(p), "%s/inside/hostname", dir);
	FILE *f = fopen(p, "w");
	if (!f)
		return -1;
	fputs("the target's own\n", f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/link", dir);
	return symlink("/etc", p);
}

/* In a child: openat2 answers ENOSYS; 0 where nothing was opened through the link. */
static int without_openat2(const char *dir)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	int rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC), fd;

	if (rootfd < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return 2;
	fd = procroot__open_at(rootfd, "/link/hostname", NULL);
	if (fd >= 0)
		return 1; /* the host's /etc/hostname */
	fd = procroot__open_at(rootfd, "/inside/hostname", NULL);
	return fd >= 0 ? 3 : 0; /* nothing at all, not even the target's own */
}

TEST(no_way_out_of_the_root)
{
	char dir[] = "/tmp/gpubpf-procroot-XXXXXX", p[512];
	int rootfd, fd, status = -1;
	pid_t pid;

	CHECK(make_root(dir) == 0);
	rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(rootfd >= 0);
	/* with openat2: the link resolves inside the root, where there is no etc/hostname */
	fd = procroot__open_at(rootfd, "/link/hostname", NULL);
	CHECK(fd < 0);
	fd = procroot__open_at(rootfd, "/inside/hostname", NULL);
	CHECK(fd >= 0);
	close(fd);
	close(rootfd);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(without_openat2(dir));
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK_INT(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	CHECK(system(p) == 0);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(no_way_out_of_the_root);
	return T_END();
}
