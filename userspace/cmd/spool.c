// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "readfile.h"
#include "spool.h"

#define MAGIC "gpubpf-spool 1\n"
#define NAME_DIGITS 20
#define SUFFIX ".spool"
#define MAX_FILE (256u << 20) /* a profile is far smaller; a bigger file is not ours */

struct ent {
	uint64_t seq;
	uint64_t size;
};

struct spool {
	pthread_mutex_t mu;
	char *dir;
	struct ent *ents; /* waiting, oldest first: ents[head, len) */
	size_t head, len, cap;
	uint64_t next_seq;
	uint64_t bytes, max;
	uint64_t held; /* seq being sent, 0: none */
	struct spool_stats st;
};

static void path_of(const struct spool *sp, uint64_t seq, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%0*" PRIu64 SUFFIX, sp->dir, NAME_DIGITS, seq);
}

static int push(struct spool *sp, uint64_t seq, uint64_t size)
{
	if (sp->head > 0 && sp->head * 2 >= sp->len) {
		memmove(sp->ents, sp->ents + sp->head, (sp->len - sp->head) * sizeof(*sp->ents));
		sp->len -= sp->head;
		sp->head = 0;
	}
	if (sp->len == sp->cap) {
		size_t ncap = sp->cap ? sp->cap * 2 : 64;
		struct ent *n = realloc(sp->ents, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		sp->ents = n;
		sp->cap = ncap;
	}
	sp->ents[sp->len++] = (struct ent){.seq = seq, .size = size};
	sp->bytes += size;
	return 0;
}

/* Forget entry I (an index into ents) and remove its file. */
static void remove_at(struct spool *sp, size_t i)
{
	char path[4200];

	path_of(sp, sp->ents[i].seq, path, sizeof(path));
	unlink(path);
	sp->bytes -= sp->ents[i].size;
	if (i == sp->head) {
		sp->head++;
	} else {
		memmove(sp->ents + i, sp->ents + i + 1, (sp->len - i - 1) * sizeof(*sp->ents));
		sp->len--;
	}
	if (sp->head == sp->len)
		sp->head = sp->len = 0;
}

/* Drop the oldest files that are not being sent until the budget holds. */
static void enforce(struct spool *sp)
{
	size_t i = sp->head;

	while (sp->bytes > sp->max && i < sp->len) {
		if (sp->ents[i].seq == sp->held) {
			i++;
			continue;
		}
		remove_at(sp, i);
		sp->st.dropped_full++;
		if (i < sp->head)
			i = sp->head;
	}
}

static int cmp_ent(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* mkdir -p, 0700 for what it creates. */
static int make_dirs(const char *dir)
{
	char buf[4096];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return -errno;
		buf[i] = i < n ? '/' : '\0';
	}
	return 0;
}

static int scan(struct spool *sp)
{
	DIR *d = opendir(sp->dir);
	struct dirent *de;
	int err = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		char *end;
		uint64_t seq;
		struct stat st;

		if (!strncmp(name, ".gpubpf-out.", 12)) {
			/* a write a kill interrupted: never renamed, never counted */
			unlinkat(dirfd(d), name, 0);
			continue;
		}
		if (strlen(name) != NAME_DIGITS + strlen(SUFFIX) || strcmp(name + NAME_DIGITS, SUFFIX))
			continue;
		errno = 0;
		seq = strtoull(name, &end, 10);
		if (errno || end != name + NAME_DIGITS || seq == 0)
			continue;
		if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		err = push(sp, seq, (uint64_t)st.st_size);
		if (err)
			break;
		if (seq >= sp->next_seq)
			sp->next_seq = seq + 1;
	}
	closedir(d);
	if (!err && sp->len)
		qsort(sp->ents, sp->len, sizeof(*sp->ents), cmp_ent);
	return err;
}

struct spool *spool__open(const char *dir, uint64_t max_bytes)
{
	struct spool *sp = calloc(1, sizeof(*sp));
	struct stat st;
	int err;

	if (!sp) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&sp->mu, NULL);
	sp->max = max_bytes;
	sp->next_seq = 1;
	sp->dir = strdup(dir);
	if (!sp->dir) {
		err = -ENOMEM;
		goto fail;
	}
	err = make_dirs(dir);
	if (err)
		goto fail;
	/* Root writes here: never through a link someone put in the path's place. */
	if (lstat(dir, &st) < 0) {
		err = -errno;
		goto fail;
	}
	if (!S_ISDIR(st.st_mode)) {
		err = -ENOTDIR;
		goto fail;
	}
	err = scan(sp);
	if (err)
		goto fail;
	sp->st.resumed = sp->len - sp->head;
	sp->st.resumed_bytes = sp->bytes;
	enforce(sp);
	return sp;
fail:
	spool__close(sp);
	errno = -err;
	return NULL;
}

void spool__close(struct spool *sp)
{
	if (!sp)
		return;
	pthread_mutex_destroy(&sp->mu);
	free(sp->ents);
	free(sp->dir);
	free(sp);
}

struct put_ctx {
	const char *meta;
	const void *data;
	size_t len;
};

static int write_entry(void *ctx, FILE *f)
{
	const struct put_ctx *p = ctx;

	if (fputs(MAGIC, f) < 0 || fputs(p->meta, f) < 0 || fputc('\n', f) < 0 ||
	    (p->len && fwrite(p->data, 1, p->len, f) != p->len))
		return -EIO;
	return 0;
}

int spool__put(struct spool *sp, const char *meta, const void *data, size_t len)
{
	struct put_ctx pc = {.meta = meta, .data = data, .len = len};
	char path[4200];
	uint64_t seq;
	int err;

	if (!sp || !meta || strchr(meta, '\n') || (len && !data))
		return -EINVAL;
	pthread_mutex_lock(&sp->mu);
	seq = sp->next_seq++;
	pthread_mutex_unlock(&sp->mu);
	path_of(sp, seq, path, sizeof(path));
	err = outfile__write(path, write_entry, &pc);
	if (err)
		return err;
	pthread_mutex_lock(&sp->mu);
	err = push(sp, seq, strlen(MAGIC) + strlen(meta) + 1 + len);
	if (err) {
		unlink(path);
	} else {
		sp->st.put++;
		enforce(sp);
	}
	pthread_mutex_unlock(&sp->mu);
	return err;
}

static int parse(char *buf, size_t n, struct spool_item *it)
{
	size_t ml = strlen(MAGIC);
	char *nl;

	if (n < ml + 1 || memcmp(buf, MAGIC, ml))
		return -EBADMSG;
	nl = memchr(buf + ml, '\n', n - ml);
	if (!nl)
		return -EBADMSG;
	it->meta = strndup(buf + ml, (size_t)(nl - (buf + ml)));
	it->len = n - (size_t)(nl + 1 - buf);
	it->data = malloc(it->len ? it->len : 1);
	if (!it->meta || !it->data) {
		free(it->meta);
		free(it->data);
		return -ENOMEM;
	}
	memcpy(it->data, nl + 1, it->len);
	return 0;
}

int spool__take(struct spool *sp, struct spool_item *it)
{
	memset(it, 0, sizeof(*it));
	for (;;) {
		char path[4200], *buf;
		struct ent e;
		size_t n = 0;
		int err;

		pthread_mutex_lock(&sp->mu);
		if (sp->head == sp->len) {
			pthread_mutex_unlock(&sp->mu);
			return -ENOENT;
		}
		e = sp->ents[sp->head];
		if (sp->held == e.seq) {
			pthread_mutex_unlock(&sp->mu);
			return -EBUSY;
		}
		sp->held = e.seq;
		pthread_mutex_unlock(&sp->mu);

		path_of(sp, e.seq, path, sizeof(path));
		buf = readfile__path(path, MAX_FILE, false, &n);
		err = buf ? parse(buf, n, it) : -errno;
		free(buf);
		if (err == -ENOMEM) {
			it->seq = e.seq;
			spool__release(sp, it);
			return err;
		}
		if (!err) {
			it->seq = e.seq;
			it->size = e.size;
			return 0;
		}
		/* torn or foreign: it can never be sent */
		pthread_mutex_lock(&sp->mu);
		if (sp->head < sp->len && sp->ents[sp->head].seq == e.seq) {
			remove_at(sp, sp->head);
			sp->st.dropped_bad++;
		}
		sp->held = 0;
		pthread_mutex_unlock(&sp->mu);
	}
}

static void item_free(struct spool_item *it)
{
	free(it->meta);
	free(it->data);
	it->meta = NULL;
	it->data = NULL;
}

void spool__done(struct spool *sp, struct spool_item *it)
{
	pthread_mutex_lock(&sp->mu);
	for (size_t i = sp->head; i < sp->len; i++) {
		if (sp->ents[i].seq == it->seq) {
			remove_at(sp, i);
			sp->st.done++;
			break;
		}
	}
	if (sp->held == it->seq)
		sp->held = 0;
	pthread_mutex_unlock(&sp->mu);
	item_free(it);
}

void spool__release(struct spool *sp, struct spool_item *it)
{
	pthread_mutex_lock(&sp->mu);
	if (sp->held == it->seq)
		sp->held = 0;
	/* what waited past the budget while this one was held */
	enforce(sp);
	pthread_mutex_unlock(&sp->mu);
	item_free(it);
}

void spool__stats(struct spool *sp, struct spool_stats *out)
{
	pthread_mutex_lock(&sp->mu);
	*out = sp->st;
	out->queued = sp->len - sp->head;
	out->bytes = sp->bytes;
	pthread_mutex_unlock(&sp->mu);
}
