// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

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

int outfile__check(const char *path)
{
	char dir[4096];
	struct stat st;
	int err;

	if (!path || !*path)
		return -EINVAL;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return -EISDIR;
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

int outfile__write(const char *path, int (*cb)(void *ctx, FILE *f), void *ctx)
{
	char dir[4096], tmp[4096 + 64];
	FILE *f = NULL;
	int fd = -1, err, n;

	err = dir_of(path, dir, sizeof(dir));
	if (err)
		return err;
	n = snprintf(tmp, sizeof(tmp), "%s/.gpubpf-out.XXXXXX", dir);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkstemp(tmp);
	if (fd < 0)
		return -errno;
	/* mkstemp creates 0600; a profile is as readable as any file the user creates. */
	mode_t um = umask(0);
	umask(um);
	fchmod(fd, 0666 & ~um);
	f = fdopen(fd, "wb");
	if (!f) {
		err = -errno;
		close(fd);
		goto cleanup;
	}
	err = cb(ctx, f);
	if (err)
		goto cleanup;
	if (fflush(f) != 0 || ferror(f)) {
		err = -(errno ? errno : EIO);
		goto cleanup;
	}
	if (fsync(fileno(f)) < 0) {
		err = -errno;
		goto cleanup;
	}
	err = fclose(f) ? -(errno ? errno : EIO) : 0;
	f = NULL;
	if (err)
		goto cleanup;
	if (rename(tmp, path) < 0) {
		err = -errno;
		goto cleanup;
	}
	return 0;
cleanup:
	if (f)
		fclose(f);
	unlink(tmp);
	return err;
}
