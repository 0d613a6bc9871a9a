// SPDX-License-Identifier: MIT
#define _GNU_SOURCE /* fopencookie */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

/* Writes go through this cookie so the errno of the first failed write survives the
 * writers, which only see that fwrite came up short. */
struct sink {
	int fd;
	int err; /* first write errno, or 0 */
};

static ssize_t sink_write(void *cookie, const char *buf, size_t len)
{
	struct sink *k = cookie;
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(k->fd, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (!k->err)
				k->err = n < 0 ? errno : ENOSPC;
			errno = k->err;
			return done ? (ssize_t)done : -1;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int sink_close(void *cookie)
{
	(void)cookie; /* the descriptor is closed by its owner */
	return 0;
}

static int dir_of(const char *path, char *buf, size_t len)
{
	char *copy = strdup(path);
	int n;

	if (!copy)
		return -ENOMEM;
	n = snprintf(buf, len, "%s", dirname(copy));
	free(copy);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static bool in_place(const struct stat *st)
{
	return S_ISCHR(st->st_mode) || S_ISFIFO(st->st_mode);
}

int outfile__check(const char *path)
{
	char dir[4096];
	struct stat st;
	int err;

	if (!path || !*path)
		return -EINVAL;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		if (in_place(&st))
			return access(path, W_OK) < 0 ? -errno : 0;
		if (!S_ISREG(st.st_mode))
			return -EPERM;
	}
	err = dir_of(path, dir, sizeof(dir));
	if (err)
		return err;
	if (stat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (access(dir, W_OK | X_OK) < 0)
		return -errno;
	return 0;
}

const char *outfile__strerror(int err)
{
	if (err == -EPERM)
		return "not a regular file, a character device or a FIFO (gpubpf writes over no other kind)";
	return strerror(-err);
}

/* Run CB on FD through a sink; flush. 0 or negative errno (the write's own errno). */
static int write_fd(int fd, int (*cb)(void *ctx, FILE *f), void *ctx)
{
	struct sink k = {.fd = fd};
	cookie_io_functions_t io = {.write = sink_write, .close = sink_close};
	FILE *f = fopencookie(&k, "w", io);
	int err;

	if (!f)
		return -errno;
	err = cb(ctx, f);
	if (fflush(f) != 0 && !err)
		err = -(k.err ? k.err : EIO);
	fclose(f);
	/* A writer's -EIO stands for "a write failed": say which way it failed. */
	if (err && k.err)
		err = -k.err;
	return err;
}

/* A character device or a FIFO, written where it is. */
static int write_in_place(const char *path, int (*cb)(void *ctx, FILE *f), void *ctx)
{
	struct stat st;
	int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	/* It must still be what outfile__check saw: a regular file that appeared at the
	 * path since is neither truncated nor written here. */
	if (fstat(fd, &st) < 0 || !in_place(&st)) {
		close(fd);
		return -EAGAIN;
	}
	err = write_fd(fd, cb, ctx);
	if (close(fd) < 0 && !err && errno != EINTR)
		err = -errno;
	return err;
}

int outfile__write(const char *path, int (*cb)(void *ctx, FILE *f), void *ctx)
{
	char dir[4096], tmp[4096 + 64];
	struct stat old;
	bool have_old;
	int fd = -1, err, n;

	have_old = stat(path, &old) == 0;
	if (have_old && in_place(&old)) {
		err = write_in_place(path, cb, ctx);
		if (err != -EAGAIN)
			return err;
		have_old = stat(path, &old) == 0;
	}
	if (have_old && !S_ISREG(old.st_mode))
		return S_ISDIR(old.st_mode) ? -EISDIR : -EPERM;
	err = dir_of(path, dir, sizeof(dir));
	if (err)
		return err;
	n = snprintf(tmp, sizeof(tmp), "%s/.gpubpf-out.XXXXXX", dir);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	/* mkstemp creates the file 0600: private unless the file it replaces was not. */
	fd = mkstemp(tmp);
	if (fd < 0)
		return -errno;
	if (have_old) {
		if (fchown(fd, old.st_uid, old.st_gid) < 0) {
			/* not ours to give away (not root): it stays the caller's own */
		}
		fchmod(fd, old.st_mode & 07777);
	}
	err = write_fd(fd, cb, ctx);
	if (err)
		goto cleanup;
	if (fsync(fd) < 0) {
		err = -errno;
		goto cleanup;
	}
	err = close(fd) < 0 ? -errno : 0;
	fd = -1;
	if (err)
		goto cleanup;
	if (rename(tmp, path) < 0) {
		err = -errno;
		goto cleanup;
	}
	return 0;
cleanup:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return err;
}
