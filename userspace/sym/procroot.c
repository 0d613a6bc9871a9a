// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "procroot.h"
#include "readfile.h"

#define STATUS_MAX_BYTES (64u << 10)

/* Check the O_PATH descriptor PFD against RULE, then open the same file for reading.
 * Takes PFD (closes it). */
static int reopen_checked(int pfd, const struct procroot_rule *rule)
{
	struct stat st, st2;
	char self[64];
	int fd, err = 0;

	if (fstat(pfd, &st) < 0) {
		err = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EINVAL;
		goto out;
	}
	if (rule && rule->same_file && (st.st_ino != rule->ino || (rule->dev && st.st_dev != rule->dev))) {
		err = -EPERM;
		goto out;
	}
	if (rule && rule->nuids > 0) {
		bool ok = false;

		for (int i = 0; i < rule->nuids && i < PROCROOT_MAX_UIDS; i++)
			ok |= st.st_uid == rule->uids[i];
		if (!ok) {
			err = -EPERM;
			goto out;
		}
	}
	/* Reopening through the descriptor's own magic link opens exactly the inode just
	 * checked, whatever has happened to the path since. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	if (fstat(fd, &st2) < 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
		close(fd);
		err = -EAGAIN;
		goto out;
	}
	err = fd;
out:
	close(pfd);
	return err;
}

int procroot__open_at(int rootfd, const char *path, const struct procroot_rule *rule)
{
	struct open_how how = {
	    .flags = O_PATH | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int pfd;

	if (rule && rule->no_symlinks)
		how.resolve |= RESOLVE_NO_SYMLINKS;
	/* Without openat2 (a seccomp filter that predates it: gpubpf's BPF needs 5.8, openat2
	 * came in 5.6) nothing is opened by a target's path. An openat relative to the root
	 * would resolve an absolute symlink on the way against the host's root: out of
	 * /proc/PID/root, to any file root can read. Objects still open through map_files. */
	pfd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	if (pfd < 0)
		return -errno;
	return reopen_checked(pfd, rule);
}

int procroot__open(int pid, const char *path, const struct procroot_rule *rule)
{
	char root[64];
	int rootfd, fd;

	snprintf(root, sizeof(root), "/proc/%d/root", pid);
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -errno;
	fd = procroot__open_at(rootfd, path, rule);
	close(rootfd);
	return fd;
}

int procroot__open_host(const char *path, const struct procroot_rule *rule)
{
	int pfd = open(path, O_PATH | O_CLOEXEC);

	if (pfd < 0)
		return -errno;
	return reopen_checked(pfd, rule);
}

int procroot__target_uids(int pid, struct procroot_rule *rule)
{
	char path[64], *buf, *line;
	unsigned long u[PROCROOT_MAX_UIDS];
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	buf = readfile__path(path, STATUS_MAX_BYTES, false, NULL);
	if (!buf)
		return errno == ENOENT ? -ESRCH : -errno;
	line = strstr(buf, "\nUid:");
	if (line)
		n = sscanf(line + 5, "%lu %lu %lu %lu", &u[0], &u[1], &u[2], &u[3]);
	free(buf);
	if (n != PROCROOT_MAX_UIDS)
		return -EINVAL;
	rule->nuids = PROCROOT_MAX_UIDS;
	for (int i = 0; i < PROCROOT_MAX_UIDS; i++)
		rule->uids[i] = (uid_t)u[i];
	return 0;
}
