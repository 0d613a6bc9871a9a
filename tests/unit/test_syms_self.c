// SPDX-License-Identifier: MIT
/* The symbolizer without fixtures: the running kernel's symbols (and kernel frames left
 * for the profile's write), its API's errors, and this process's own frames, vDSO and
 * mappings tracked again among thousands. The symbolizer on fixture processes is
 * test_syms.c's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test.h"
#include "kallsyms.h"
#include "profile.h"
#include "syms.h"

/* The running kernel's `schedule` (0), or why not: NULL when found. */
static const char *schedule_addr(uint64_t *addr)
{
	struct kallsyms *k = kallsyms__load("/proc/kallsyms");
	const struct ksym *ks;
	static char why[128];

	if (!k) {
		snprintf(why, sizeof(why), "kallsyms unusable (%s)", strerror(errno));
		return why;
	}
	ks = kallsyms__find(k, "schedule");
	*addr = ks && (ks->type == 'T' || ks->type == 't') ? ks->addr : 0;
	kallsyms__free(k);
	return *addr ? NULL : "no schedule symbol";
}

TEST(kernel)
{
	const char *why;
	struct sym_result r;
	struct syms *s;
	uint64_t addr;

	why = schedule_addr(&addr);
	if (why)
		SKIP("%s", why);
	s = syms__new();
	CHECK(s);
	CHECK_INT(syms__resolve_kernel(s, addr + 1, &r), 0);
	CHECK(r.resolved);
	CHECK_STR(r.module, "[kernel.kallsyms]");
	CHECK_STR(r.frames[0].func, "schedule");
	CHECK_INT(syms__resolve_kernel(s, 1, &r), 0);
	CHECK(!r.resolved);
	CHECK_STR(r.frames[0].func, "[kernel.kallsyms]+0x1");
	syms__free(s);
}

/* A recording's ticks symbolize user frames while the targets live (profile__symbolize_user)
 * and leave kernel frames, whose symbols cost reading all of kallsyms, for the write. */
TEST(kernel_frames_wait_for_the_write)
{
	const struct prof_location *l;
	struct prof_frame fr[2];
	struct profile *p;
	struct syms *s;
	const char *why;
	int64_t one = 1;
	uint64_t addr;
	int nk = 0, nu = 0;

	why = schedule_addr(&addr);
	if (why)
		SKIP("%s", why);
	fr[0] = (struct prof_frame){.kind = PROF_FRAME_KERNEL, .addr = addr + 1};
	fr[1] = (struct prof_frame){.kind = PROF_FRAME_USER, .addr = (uint64_t)(uintptr_t)&syms__new};
	p = profile__new();
	s = syms__new();
	CHECK(p && s);
	CHECK(profile__add_type(p, "samples", "count") >= 0);
	CHECK_INT(profile__add_sample(p, getpid(), getpid(), fr, 2, NULL, 0, &one), 0);
	CHECK_INT(profile__symbolize_user(p, s), 0);
	for (uint32_t id = 1; id <= profile__num_locations(p); id++) {
		l = profile__location(p, id);
		if (l->kind == PROF_FRAME_KERNEL) {
			CHECK(!l->symbolized);
			nk++;
		} else {
			CHECK(l->symbolized);
			nu++;
		}
	}
	CHECK(nk == 1 && nu == 1);
	CHECK_INT(profile__symbolize(p, s), 0);
	for (uint32_t id = 1; id <= profile__num_locations(p); id++) {
		l = profile__location(p, id);
		CHECK(l->symbolized);
		if (l->kind == PROF_FRAME_KERNEL)
			CHECK_STR(l->sym.frames[0].func, "schedule");
	}
	profile__free(p);
	syms__free(s);
}

TEST(api_errors)
{
	struct sym_result r;
	struct syms *s = syms__new();
	const char *p;
	uint64_t off;

	CHECK(s);
	syms__free(NULL);
	CHECK_INT(syms__track_pid(s, -1), -EINVAL);
	CHECK_INT(syms__track_pid(s, 0x3fffffff), -ESRCH);
	CHECK_INT(syms__resolve_user(s, 0x3fffffff, 0x1234, &r), 0);
	CHECK(!r.resolved);
	CHECK_STR(r.frames[0].func, "[unknown]+0x1234");
	CHECK_INT(syms__find_symbol(s, 0x3fffffff, "x", &p, &off), -ESRCH);
	CHECK_INT(syms__set_debug_dirs(s, NULL), -EINVAL);
	/* ourselves: libc resolves through .dynsym at least */
	CHECK_INT(syms__track_pid(s, getpid()), 0);
	CHECK_INT(syms__resolve_user(s, getpid(), (uint64_t)(uintptr_t)&getpid, &r), 0);
	CHECK(r.resolved);
	CHECK(r.frames[0].func && strstr(r.frames[0].func, "getpid"));
	syms__free(s);
}

TEST(vdso)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	struct sym_result r;
	struct syms *s;
	bool found = false;

	if (!base)
		SKIP("no vDSO");
	s = syms__new();
	CHECK(s);
	CHECK_INT(syms__track_pid(s, getpid()), 0);
	for (uint64_t off = 0; off < 0x4000 && !found; off += 0x10) {
		CHECK_INT(syms__resolve_user(s, getpid(), base + off, &r), 0);
		CHECK_STR(r.module, "[vdso]");
		found = r.resolved && !strncmp(r.frames[0].func, "__vdso_", 7);
		if (r.map_limit && base + off + 0x10 >= r.map_limit)
			break;
	}
	syms__free(s);
	CHECK(found);
}

/* This process tracked again with 2000 more mappings (each looked up, not compared with
 * every other): libc's getpid mapped once more by itself resolves; unmapped, its old
 * mapping is kept (a sample may still point there); covered by an anonymous one, it goes. */
TEST(retrack_among_many)
{
	enum { FILLERS = 2000 };
	static void *fill[FILLERS];
	struct sym_result r;
	struct syms *s = syms__new();
	Dl_info info;
	uint64_t rel, at;
	int fd;
	char *m;

	CHECK(s && dladdr((void *)&getpid, &info) && info.dli_fname && info.dli_fbase);
	fd = open(info.dli_fname, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_INT(syms__track_pid(s, getpid()), 0);
	for (int i = 0; i < FILLERS; i++) {
		fill[i] = mmap(NULL, 4096, (i & 1) ? PROT_READ : PROT_NONE, MAP_PRIVATE, fd, (off_t)(i % 8) * 4096);
		CHECK(fill[i] != MAP_FAILED);
	}
	/* libc's segments have file offset == address less its base: one page of its text */
	rel = (uint64_t)(uintptr_t)&getpid - (uint64_t)(uintptr_t)info.dli_fbase;
	m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, (off_t)(rel & ~4095ull));
	CHECK(m != MAP_FAILED);
	at = (uint64_t)(uintptr_t)m + (rel & 4095);
	CHECK_INT(syms__track_pid(s, getpid()), 0);
	CHECK_INT(syms__resolve_user(s, getpid(), at, &r), 0);
	CHECK(r.resolved && strstr(r.frames[0].func, "getpid"));
	CHECK_INT(syms__resolve_user(s, getpid(), (uint64_t)(uintptr_t)&getpid, &r), 0);
	CHECK(r.resolved && strstr(r.frames[0].func, "getpid"));
	munmap(m, 4096);
	CHECK_INT(syms__track_pid(s, getpid()), 0);
	CHECK_INT(syms__resolve_user(s, getpid(), at + 1, &r), 0);
	CHECK(r.resolved && strstr(r.frames[0].func, "getpid"));
	CHECK(mmap(m, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == m);
	CHECK_INT(syms__track_pid(s, getpid()), 0);
	CHECK_INT(syms__resolve_user(s, getpid(), at + 2, &r), 0);
	CHECK(!r.resolved);
	munmap(m, 4096);
	for (int i = 0; i < FILLERS; i++)
		munmap(fill[i], 4096);
	close(fd);
	syms__free(s);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(api_errors);
	RUN(vdso);
	RUN(retrack_among_many);
	RUN(kernel);
	RUN(kernel_frames_wait_for_the_write);
	return T_END();
}
