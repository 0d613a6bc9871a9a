// SPDX-License-Identifier: MIT
/* Symbolizer tests on the fixtures of syms_fixture.h: perf maps (the target's own, read
 * as the target's user), symbol lookup by name, many processes sharing objects. */
#define _GNU_SOURCE
#include "syms_fixture.h"

/* The target's maps read again (its perf map with them), then ADDR resolved. */
#define REREAD_RESOLVE(addr)                                                                                           \
	do {                                                                                                           \
		CHECKC_INT(syms__track_pid(s, ch.pid), 0);                                                             \
		CHECKC_INT(syms__resolve_user(s, ch.pid, (addr), &r), 0);                                              \
	} while (0)

TEST(perf_map)
{
	char path[64];
	uint64_t anon;
	FILE *f;
	int pid;

	FIXTURE_BEGIN("fixture_nopie");
	pid = ch.pid;
	anon = kv(&ch, "anon");
	CHECKC(anon);
	CHECKC_INT(syms__track_pid(s, ch.pid), 0);
	/* before the JIT writes its map: an anonymous mapping is unknown */
	CHECKC_INT(syms__resolve_user(s, ch.pid, anon + 0x110, &r), 0);
	CHECKC(!r.resolved);
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", ch.pid);
	f = fopen(path, "w");
	CHECKC(f);
	fprintf(f, "%" PRIx64 " 40 jit_old\n", anon + 0x100);
	fprintf(f, "%" PRIx64 " 80 LazyCompile:*foo bar.js:12\n", anon + 0x100); /* reuses the range */
	fprintf(f, "garbage line\n");
	fprintf(f, "%" PRIx64 " 10 jit_two\n", anon + 0x1000);
	fclose(f);
	REREAD_RESOLVE(anon + 0x110);
	CHECKC(r.resolved);
	CHECKC_STR(r.module, "[perf-map]");
	CHECKC_STR(r.frames[0].func, "LazyCompile:*foo bar.js:12");
	CHECKC_INT(r.rel_addr, 0x10);
	/* appended later: picked up incrementally */
	f = fopen(path, "a");
	CHECKC(f);
	fprintf(f, "0x%" PRIx64 " 0x10 jit_three\n", anon + 0x2000);
	fclose(f);
	REREAD_RESOLVE(anon + 0x2008);
	CHECKC_STR(r.frames[0].func, "jit_three");
	CHECKC_INT(syms__resolve_user(s, ch.pid, anon + 0x1008, &r), 0);
	CHECKC_STR(r.frames[0].func, "jit_two");
	unlink(path);
	child_stop(&ch);
	/* still there after the exit (and after the file is gone) */
	CHECKC_INT(syms__resolve_user(s, pid, anon + 0x108, &r), 0);
	CHECKC_STR(r.frames[0].func, "LazyCompile:*foo bar.js:12");
	syms__free(s);
}

/* A target that is not root must not get gpubpf (root) to read a file it could not read
 * itself into a profile: its perf map is only ever its own regular file, reached through
 * no symlink, and a FIFO or device there is never opened. */
TEST(perf_map_is_the_targets_own)
{
	char path[64], secret_dir[] = "/tmp/gpubpf-secret-XXXXXX", secret[128];
	uint64_t anon;
	FILE *f;
	int fd;

	build_fixtures();
	if (fx_skip)
		SKIP("%s", fx_skip);
	if (geteuid() != 0)
		SKIP("needs root to run the target as another user");
	CHECK(mkdtemp(secret_dir) != NULL);
	chmod(fx_dir, 0755);
	child_uid = 65534;
	{
		FIXTURE_BEGIN("fixture_nopie");
		child_uid = 0;
		anon = kv(&ch, "anon");
		CHECKC(anon);
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", ch.pid);
		snprintf(secret, sizeof(secret), "%s/secret", secret_dir);
		f = fopen(secret, "w"); /* root's, mode 0600 in a 0700 directory */
		CHECKC(f);
		fprintf(f, "%" PRIx64 " 10000 ROOT_ONLY_SECRET\n", anon);
		fclose(f);
		chmod(secret, 0600);

		/* a symlink to it, made by the target's user */
		unlink(path);
		CHECKC(symlink(secret, path) == 0);
		CHECKC(lchown(path, 65534, 65534) == 0);
		REREAD_RESOLVE(anon + 0x10);
		CHECKC(!r.resolved);

		/* a hard copy that belongs to root, not to the target */
		unlink(path);
		f = fopen(path, "w");
		CHECKC(f);
		fprintf(f, "%" PRIx64 " 10000 ROOT_OWNED\n", anon);
		fclose(f);
		REREAD_RESOLVE(anon + 0x10);
		CHECKC(!r.resolved);

		/* a FIFO: refused, and without blocking on it (no writer ever comes) */
		unlink(path);
		CHECKC(mkfifo(path, 0666) == 0);
		CHECKC(chown(path, 65534, 65534) == 0);
		REREAD_RESOLVE(anon + 0x10);
		CHECKC(!r.resolved);

		/* its own regular file: read */
		unlink(path);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		CHECKC(fd >= 0);
		CHECKC(fchown(fd, 65534, 65534) == 0);
		f = fdopen(fd, "w");
		CHECKC(f);
		fprintf(f, "%" PRIx64 " 10000 jit_own\n", anon);
		fclose(f);
		REREAD_RESOLVE(anon + 0x10);
		CHECKC(r.resolved);
		CHECKC_STR(r.frames[0].func, "jit_own");
		unlink(path);
		child_stop(&ch);
		syms__free(s);
	}
	unlink(secret);
	rmdir(secret_dir);
}

/* A perf map the target rewrites a line shorter before each read is read anew each time:
 * its names must not pile up in the strings kept for the recording (2 MiB more a round,
 * here, before they were interned). */
TEST(perf_map_rewritten_shorter)
{
	char path[64], pad[1001];
	size_t base;
	uint64_t anon;

	FIXTURE_BEGIN("fixture_nopie");
	anon = kv(&ch, "anon");
	CHECKC(anon);
	memset(pad, 'x', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", ch.pid);
	base = 0;
	for (int round = 0; round < 8; round++) {
		FILE *f = fopen(path, "w");

		CHECKC(f);
		for (int i = 0; i < 2000 - round; i++)
			fprintf(f, "%" PRIx64 " 10 jit_%d_%s\n", anon + 16 * (uint64_t)i, i, pad);
		fclose(f);
		REREAD_RESOLVE(anon + 16 * 7 + 4);
		CHECKC(r.resolved && !strncmp(r.frames[0].func, "jit_7_xxx", 9));
		if (round == 1)
			base = syms__string_bytes(s);
	}
	printf("# 2000 lines of 1 KiB read 8 times: %zu bytes of strings more after the second\n",
	       syms__string_bytes(s) - base);
	CHECKC(base > 2000 * 1000 && syms__string_bytes(s) - base < 4096);
	unlink(path);
	child_stop(&ch);
	syms__free(s);
}

TEST(find_symbol)
{
	const char *path = NULL;
	uint64_t off = 0, leaf;
	char want[512];

	FIXTURE_BEGIN("fixture_pie");
	leaf = kv(&ch, "leaf");
	REREAD_RESOLVE(leaf);
	CHECKC_INT(syms__find_symbol(s, ch.pid, "fixture_leaf", &path, &off), 0);
	snprintf(want, sizeof(want), "/proc/%d/root%s/fixture_pie", ch.pid, fx_dir);
	CHECKC_STR(path, want);
	CHECKC_INT(off, leaf - r.map_start + r.map_offset);
	CHECKC(access(path, R_OK) == 0);
	CHECKC_INT(syms__find_symbol(s, ch.pid, "lib_func", &path, &off), 0);
	CHECKC_STR(base_of(path), "libfixture.so");
	CHECKC_INT(syms__resolve_user(s, ch.pid, kv(&ch, "lib"), &r), 0);
	CHECKC_INT(off, kv(&ch, "lib") - r.map_start + r.map_offset);
	/* from libc's .dynsym */
	CHECKC_INT(syms__find_symbol(s, ch.pid, "malloc", &path, &off), 0);
	CHECKC(strstr(path, "libc"));
	CHECKC_INT(syms__find_symbol(s, ch.pid, "no_such_symbol_anywhere", &path, &off), -ENOENT);
	child_stop(&ch);
	syms__free(s);
}

TEST(many_processes_share_objects_and_rate)
{
	struct child kids[4];
	struct timespec t0, t1;
	uint64_t leaf;
	int n = 0;
	double secs;

	FIXTURE_BEGIN("fixture_pie");
	leaf = kv(&ch, "leaf");
	for (int i = 0; i < 4; i++)
		if (!child_start(&kids[i], "fixture_pie"))
			n++;
	for (int i = 0; i < n; i++) {
		CHECKC_INT(syms__track_pid(s, kids[i].pid), 0);
		CHECKC_INT(syms__resolve_user(s, kids[i].pid, kv(&kids[i], "leaf"), &r), 0);
		CHECKC_STR(r.frames[0].func, "fixture_leaf");
	}
	for (int i = 0; i < n; i++)
		child_stop(&kids[i]);
	/* distinct addresses across the text of libc: must stay well above a few thousand/s */
	CHECKC_INT(syms__find_symbol(s, ch.pid, "malloc", &(const char *){NULL}, &(uint64_t){0}), 0);
	CHECKC_INT(syms__resolve_user(s, ch.pid, leaf, &r), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 5000; i++)
		CHECKC_INT(syms__resolve_user(s, ch.pid, leaf + (uint64_t)(i % 40), &r), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CHECKC(secs < 2.0);
	child_stop(&ch);
	syms__free(s);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	signal(SIGPIPE, SIG_IGN);
	RUN(perf_map);
	RUN(perf_map_is_the_targets_own);
	RUN(perf_map_rewritten_shorter);
	RUN(find_symbol);
	RUN(many_processes_share_objects_and_rate);
	remove_fixtures();
	return T_END();
}
