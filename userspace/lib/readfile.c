// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "readfile.h"

char *readfile__fd(int fd, size_t max, bool truncate, size_t *lenp)
{
	size_t cap = max < (64u << 10) ? max : 64u << 10, len = 0;
	char *buf = malloc(cap + 1), *nb;

	if (!buf)
		return NULL;
	for (;;) {
		ssize_t r;

		if (len == cap) {
			if (cap >= max) {
				char c;

				/* Exactly MAX bytes is all right: look for the end. */
				do
					r = read(fd, &c, 1);
				while (r < 0 && errno == EINTR);
				if (r == 0 || (r > 0 && truncate))
					break;
				free(buf);
				errno = r > 0 ? EFBIG : errno;
				return NULL;
			}
			cap = cap * 2 > max ? max : cap * 2;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				errno = ENOMEM;
				return NULL;
			}
			buf = nb;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;

			free(buf);
			errno = err;
			return NULL;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	if (lenp)
		*lenp = len;
	return buf;
}

char *readfile__path(const char *path, size_t max, bool truncate, size_t *lenp)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;
	char *buf;

	if (fd < 0)
		return NULL;
	buf = readfile__fd(fd, max, truncate, lenp);
	err = errno;
	close(fd);
	errno = err;
	return buf;
}
