// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent_out.h"
#include "outfile.h"

#define RESCAN_S 3600
#define SUFFIX ".pb.gz"

struct out_file {
	char *rel; /* SERVICE/NAME */
	uint64_t size;
	int64_t mtime;
};

struct agent_out {
	char *dir;
	uint64_t max_bytes;
	double max_age;
	struct out_file *v; /* oldest first: v[head, n) */
	size_t head, n, cap;
	uint64_t bytes;
	time_t scanned;
};

void agent_out__dirname(const char *service, char *out, size_t cap)
{
	size_t n = 0;

	for (const char *c = service; c && *c && n + 1 < cap && n < 100; c++) {
		bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
			  *c == '_' || *c == '-' || *c == '.';

		out[n++] = ok ? *c : '_';
	}
	if (!n)
		n = (size_t)snprintf(out, cap, "unknown");
	out[n] = '\0';
	/* never ".", "..", or hidden (the spool lives in DIR/.spool) */
	if (out[0] == '.')
		out[0] = '_';
}

static bool our_name(const char *name)
{
	size_t n = strlen(name), s = strlen(SUFFIX);

	/* 20260102T030405.123Z-PID.pb.gz */
	return n > 22 + s && name[8] == 'T' && name[19] == 'Z' && name[20] == '-' && !strcmp(name + n - s, SUFFIX);
}

static int push(struct agent_out *o, const char *rel, uint64_t size, int64_t mtime)
{
	if (o->n == o->cap) {
		if (o->head > 0) {
			memmove(o->v, o->v + o->head, (o->n - o->head) * sizeof(*o->v));
			o->n -= o->head;
			o->head = 0;
		}
		if (o->n == o->cap) {
			size_t ncap = o->cap ? o->cap * 2 : 256;
			struct out_file *v = realloc(o->v, ncap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			o->v = v;
			o->cap = ncap;
		}
	}
	o->v[o->n].rel = strdup(rel);
	if (!o->v[o->n].rel)
		return -ENOMEM;
	o->v[o->n].size = size;
	o->v[o->n].mtime = mtime;
	o->n++;
	o->bytes += size;
	return 0;
}

static void clear(struct agent_out *o)
{
	for (size_t i = o->head; i < o->n; i++)
		free(o->v[i].rel);
	o->head = o->n = 0;
	o->bytes = 0;
}

static int cmp_file(const void *a, const void *b)
{
	const struct out_file *x = a, *y = b;

	if (x->mtime != y->mtime)
		return x->mtime < y->mtime ? -1 : 1;
	return strcmp(x->rel, y->rel);
}

static int scan(struct agent_out *o)
{
	DIR *d = opendir(o->dir);
	struct dirent *de;

	if (!d)
		return -errno;
	clear(o);
	while ((de = readdir(d))) {
		struct stat st;
		struct dirent *fe;
		DIR *sd;
		int fd;

		if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISDIR(st.st_mode))
			continue;
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		sd = fdopendir(fd);
		if (!sd) {
			close(fd);
			continue;
		}
		while ((fe = readdir(sd))) {
			char rel[600];

			if (!our_name(fe->d_name) || fstatat(fd, fe->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
			    !S_ISREG(st.st_mode))
				continue;
			snprintf(rel, sizeof(rel), "%s/%s", de->d_name, fe->d_name);
			if (push(o, rel, (uint64_t)st.st_size, (int64_t)st.st_mtime)) {
				closedir(sd);
				closedir(d);
				return -ENOMEM;
			}
		}
		closedir(sd);
	}
	closedir(d);
	if (o->n)
		qsort(o->v, o->n, sizeof(*o->v), cmp_file);
	o->scanned = time(NULL);
	return 0;
}

static int make_dir(const char *path)
{
	struct stat st;

	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	/* root writes here: not through a link put in its place */
	if (lstat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

struct agent_out *agent_out__open(const char *dir, uint64_t max_bytes, double max_age_s)
{
	struct agent_out *o = calloc(1, sizeof(*o));
	char buf[4096];
	int err = -ENOMEM;

	if (!o || !(o->dir = strdup(dir)))
		goto fail;
	o->max_bytes = max_bytes;
	o->max_age = max_age_s;
	/* mkdir -p */
	snprintf(buf, sizeof(buf), "%s", dir);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST) {
			err = -errno;
			goto fail;
		}
		*p = '/';
	}
	err = make_dir(dir);
	if (!err)
		err = scan(o);
	if (err)
		goto fail;
	return o;
fail:
	agent_out__close(o);
	errno = -err;
	return NULL;
}

void agent_out__close(struct agent_out *o)
{
	if (!o)
		return;
	if (o->v)
		clear(o);
	free(o->v);
	free(o->dir);
	free(o);
}

struct blob {
	const void *data;
	size_t len;
};

static int write_blob(void *ctx, FILE *f)
{
	const struct blob *b = ctx;

	return b->len && fwrite(b->data, 1, b->len, f) != b->len ? -EIO : 0;
}

int agent_out__write(struct agent_out *o, const char *service, int64_t start_ns, int pid, const void *data, size_t len)
{
	struct blob b = {.data = data, .len = len};
	char sdir[128], rel[300], path[4500];
	time_t secs = (time_t)(start_ns / 1000000000);
	struct tm tm;
	int err;

	agent_out__dirname(service, sdir, sizeof(sdir));
	snprintf(path, sizeof(path), "%s/%s", o->dir, sdir);
	err = make_dir(path);
	if (err)
		return err;
	gmtime_r(&secs, &tm);
	snprintf(rel, sizeof(rel), "%s/%04d%02d%02dT%02d%02d%02d.%03dZ-%d" SUFFIX, sdir, tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(start_ns / 1000000 % 1000), pid);
	snprintf(path, sizeof(path), "%s/%s", o->dir, rel);
	err = outfile__write(path, write_blob, &b);
	if (err)
		return err;
	return push(o, rel, len, (int64_t)time(NULL));
}

int agent_out__retain(struct agent_out *o, time_t now)
{
	int removed = 0;

	if (now - o->scanned >= RESCAN_S)
		scan(o); /* files removed or added by someone else */
	while (o->head < o->n) {
		struct out_file *f = &o->v[o->head];
		bool old = o->max_age > 0 && (double)(now - f->mtime) > o->max_age;
		bool big = o->max_bytes && o->bytes > o->max_bytes;
		char path[4500];

		if (!old && !big)
			break;
		snprintf(path, sizeof(path), "%s/%s", o->dir, f->rel);
		if (unlink(path) == 0)
			removed++;
		o->bytes -= f->size;
		free(f->rel);
		o->head++;
	}
	if (o->head == o->n)
		o->head = o->n = 0;
	return removed;
}

void agent_out__usage(const struct agent_out *o, uint64_t *files, uint64_t *bytes)
{
	*files = o->n - o->head;
	*bytes = o->bytes;
}
