// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "procroot.h"

int procroot__open_at(int rootfd, const char *path)
{
	struct open_how how = {
	    .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	struct stat st;
	int fd;

	fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS) {
		/* Pre-5.6 kernels: relative to the root fd, refusing at least a final symlink. */
		while (*path == '/')
			path++;
		fd = openat(rootfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
	}
	if (fd < 0)
		return -errno;
	/* O_NONBLOCK above keeps a FIFO planted by the target from hanging us. */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

int procroot__open(int pid, const char *path)
{
	char root[64];
	int rootfd, fd;

	snprintf(root, sizeof(root), "/proc/%d/root", pid);
	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -errno;
	fd = procroot__open_at(rootfd, path);
	close(rootfd);
	return fd;
}
