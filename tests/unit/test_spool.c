// SPDX-License-Identifier: MIT
/* The on-disk spool (userspace/cmd/spool.c): order, resume after a restart, the byte budget
 * (oldest dropped first, counted, the one being sent kept), torn files and leftovers of
 * a killed writer, and refusing a symlink. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spool.h"
#include "test.h"

static char dir[64];

static void fresh_dir(void)
{
	snprintf(dir, sizeof(dir), "/tmp/gpubpf-spool-XXXXXX");
	if (!mkdtemp(dir))
		abort();
	rmdir(dir); /* spool__open creates it */
}

static void rm_dir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
}

static int count_files(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Take the oldest and check it carries META and DATA; then done. */
static int take_expect(struct spool *sp, const char *meta, const char *data)
{
	struct spool_item it;
	int ok;

	if (spool__take(sp, &it))
		return 0;
	ok = !strcmp(it.meta, meta) && it.len == strlen(data) && !memcmp(it.data, data, it.len);
	spool__done(sp, &it);
	return ok;
}

TEST(order_and_resume)
{
	struct spool *sp;
	struct spool_stats st;
	struct spool_item it;

	fresh_dir();
	sp = spool__open(dir, 1 << 20);
	CHECK(sp);
	CHECK_INT(spool__put(sp, "name=a", "AAAA", 4), 0);
	CHECK_INT(spool__put(sp, "name=b", "BB\nB\0B", 6), 0);
	CHECK_INT(spool__put(sp, "name=c", "", 0), 0);
	CHECK_INT(spool__put(sp, "bad\nmeta", "x", 1), -EINVAL);
	spool__stats(sp, &st);
	CHECK_INT(st.queued, 3);
	CHECK_INT(st.put, 3);
	CHECK_INT(count_files(), 3);
	/* taken but not delivered: first in line again, never taken twice at once */
	CHECK_INT(spool__take(sp, &it), 0);
	CHECK_STR(it.meta, "name=a");
	{
		struct spool_item again;

		CHECK_INT(spool__take(sp, &again), -EBUSY);
	}
	spool__release(sp, &it);
	CHECK(take_expect(sp, "name=a", "AAAA"));
	spool__close(sp);

	/* a restart resumes in order, and new profiles go after the old ones */
	sp = spool__open(dir, 1 << 20);
	CHECK(sp);
	spool__stats(sp, &st);
	CHECK_INT(st.resumed, 2);
	CHECK_INT(spool__put(sp, "name=d", "D", 1), 0);
	{
		struct spool_item b;

		CHECK_INT(spool__take(sp, &b), 0);
		CHECK_STR(b.meta, "name=b");
		CHECK(b.len == 6 && !memcmp(b.data, "BB\nB\0B", 6));
		spool__done(sp, &b);
	}
	CHECK(take_expect(sp, "name=c", ""));
	CHECK(take_expect(sp, "name=d", "D"));
	CHECK_INT(spool__take(sp, &it), -ENOENT);
	spool__stats(sp, &st);
	CHECK_INT(st.done, 3);
	CHECK_INT(st.bytes, 0);
	CHECK_INT(count_files(), 0);
	spool__close(sp);
	rm_dir();
}

TEST(budget_drops_oldest)
{
	char data[1000];
	struct spool *sp;
	struct spool_stats st;
	struct spool_item held;

	fresh_dir();
	memset(data, 'p', sizeof(data));
	/* each file: 15-byte magic + "name=N" + newline + 1000 bytes = 1022 */
	sp = spool__open(dir, 3 * 1022);
	CHECK(sp);
	for (int i = 0; i < 5; i++) {
		char meta[16];

		snprintf(meta, sizeof(meta), "name=%d", i);
		CHECK_INT(spool__put(sp, meta, data, sizeof(data)), 0);
	}
	spool__stats(sp, &st);
	CHECK_INT(st.queued, 3);
	CHECK_INT(st.dropped_full, 2);
	CHECK_INT(count_files(), 3);
	/* the oldest left is 2; while it is being sent, drops take the next ones */
	CHECK_INT(spool__take(sp, &held), 0);
	CHECK_STR(held.meta, "name=2");
	CHECK_INT(spool__put(sp, "name=5", data, sizeof(data)), 0);
	spool__stats(sp, &st);
	CHECK_INT(st.dropped_full, 3);
	spool__done(sp, &held);
	{
		struct spool_item it;

		CHECK_INT(spool__take(sp, &it), 0);
		CHECK_STR(it.meta, "name=4");
		spool__release(sp, &it);
	}
	/* a profile bigger than the whole budget goes itself */
	{
		char *huge = calloc(1, 5000);

		CHECK(huge);
		CHECK_INT(spool__put(sp, "name=huge", huge, 5000), 0);
		free(huge);
	}
	spool__stats(sp, &st);
	CHECK_INT(st.dropped_full, 6);
	CHECK_INT(st.queued, 0);
	spool__close(sp);
	/* a smaller budget at the next start drops the excess at once */
	sp = spool__open(dir, 1 << 20);
	CHECK(sp);
	for (int i = 0; i < 3; i++)
		CHECK_INT(spool__put(sp, "name=x", data, sizeof(data)), 0);
	spool__close(sp);
	sp = spool__open(dir, 1022);
	CHECK(sp);
	spool__stats(sp, &st);
	CHECK_INT(st.queued, 1);
	CHECK_INT(st.dropped_full, 2);
	spool__close(sp);
	rm_dir();
}

TEST(torn_and_leftovers)
{
	struct spool *sp;
	struct spool_stats st;
	char path[256];
	FILE *f;

	fresh_dir();
	sp = spool__open(dir, 1 << 20);
	CHECK(sp);
	CHECK_INT(spool__put(sp, "name=ok1", "1", 1), 0);
	CHECK_INT(spool__put(sp, "name=ok2", "2", 1), 0);
	spool__close(sp);
	/* a file that is not a spool entry under an entry's name, a killed writer's
	 * temporary file, and someone else's file */
	snprintf(path, sizeof(path), "%s/00000000000000000001.spool", dir);
	f = fopen(path, "w");
	CHECK(f);
	fputs("garbage", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/.gpubpf-out.abc123", dir);
	f = fopen(path, "w");
	CHECK(f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/README", dir);
	f = fopen(path, "w");
	CHECK(f);
	fclose(f);
	sp = spool__open(dir, 1 << 20);
	CHECK(sp);
	CHECK(access(path, F_OK) == 0); /* not ours: left alone */
	snprintf(path, sizeof(path), "%s/.gpubpf-out.abc123", dir);
	CHECK(access(path, F_OK) < 0);
	CHECK(take_expect(sp, "name=ok2", "2"));
	spool__stats(sp, &st);
	CHECK_INT(st.dropped_bad, 1);
	spool__close(sp);
	rm_dir();
}

TEST(refuses_links)
{
	char link[80];

	fresh_dir();
	snprintf(link, sizeof(link), "%s-link", dir);
	CHECK_INT(mkdir(dir, 0700), 0);
	unlink(link);
	CHECK_INT(symlink(dir, link), 0);
	errno = 0;
	CHECK(!spool__open(link, 1 << 20) && errno == ENOTDIR);
	unlink(link);
	rm_dir();
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(order_and_resume);
	RUN(budget_drops_oldest);
	RUN(torn_and_leftovers);
	RUN(refuses_links);
	return T_END();
}
