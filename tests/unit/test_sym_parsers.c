// SPDX-License-Identifier: MIT
/* The symbolizer's parsers of what a target gives it (untrusted input): /proc/PID/maps
 * lines, perf map lines, /proc/kallsyms lines and its table, and the demangler. The
 * symbolizer on real processes is test_syms.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "demangle.h"
#include "kallsyms.h"
#include "perfmap.h"
#include "procmaps.h"

static int parse_maps(const char *line, struct procmaps_entry *e)
{
	return procmaps__parse_line(line, strlen(line), e);
}

static bool path_is(const struct procmaps_entry *e, const char *want)
{
	return e->path && e->path_len == strlen(want) && !memcmp(e->path, want, e->path_len);
}

TEST(maps_parser)
{
	struct procmaps_entry e;

	CHECK_INT(parse_maps("55d0c2a00000-55d0c2a21000 r-xp 00002000 08:01 1234567                    "
			     "/usr/bin/cat\n",
			     &e),
		  0);
	CHECK(e.start == 0x55d0c2a00000ull && e.end == 0x55d0c2a21000ull && e.offset == 0x2000);
	CHECK(e.read && !e.write && e.exec && !e.shared && !e.deleted);
	CHECK_INT(e.dev_major, 8);
	CHECK_INT(e.dev_minor, 1);
	CHECK_INT(e.inode, 1234567);
	CHECK(path_is(&e, "/usr/bin/cat"));
	CHECK(procmaps__is_file(&e));

	CHECK_INT(parse_maps("7f0000000000-7f0000001000 r-xp 00000000 fd:02 99 /tmp/lib foo.so (deleted)", &e), 0);
	CHECK(e.deleted);
	CHECK(path_is(&e, "/tmp/lib foo.so"));
	CHECK_INT(e.dev_major, 0xfd);

	CHECK_INT(parse_maps("7f0000000000-7f0000001000 r-xp 00000000 00:00 0  /path with  spaces/x", &e), 0);
	CHECK(path_is(&e, "/path with  spaces/x"));

	CHECK_INT(parse_maps("7ffd1a9f1000-7ffd1a9f3000 r-xp 00000000 00:00 0                          [vdso]", &e), 0);
	CHECK(path_is(&e, "[vdso]"));
	CHECK(!procmaps__is_file(&e));

	CHECK_INT(parse_maps("7f0000000000-7f0000010000 rw-s 00000000 00:05 4  /memfd:jit (deleted)", &e), 0);
	CHECK(e.shared && e.deleted && path_is(&e, "/memfd:jit"));

	CHECK_INT(parse_maps("7f0000000000-7f0000010000 rw-p 00000000 00:00 0 ", &e), 0);
	CHECK(!e.path);
	CHECK_INT(parse_maps("7f0000000000-7f0000010000 rw-p 00000000 00:00 0", &e), 0);
	CHECK(!e.path && !procmaps__is_file(&e));
	CHECK_INT(parse_maps("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]", &e), 0);
	CHECK(e.exec && !e.read);

	/* malformed */
	CHECK_INT(parse_maps("", &e), -EINVAL);
	CHECK_INT(parse_maps("\n", &e), -EINVAL);
	CHECK_INT(parse_maps("7f00-7f10", &e), -EINVAL);
	CHECK_INT(parse_maps("7f10-7f00 r-xp 00000000 00:00 0", &e), -EINVAL); /* end before start */
	CHECK_INT(parse_maps("7f00-7f10 rwxq 00000000 00:00 0", &e), -EINVAL);
	CHECK_INT(parse_maps("7f00-7f10 r-x 00000000 00:00 0", &e), -EINVAL);
	CHECK_INT(parse_maps("7f00-7f10 r-xp 00000000 0000 0", &e), -EINVAL);
	CHECK_INT(parse_maps("7f00-7f10 r-xp 00000000 00:00 x", &e), -EINVAL);
	CHECK_INT(parse_maps("7f00-7f10 r-xp 00000000 00:00 0x/bin/x", &e), -EINVAL);
	CHECK_INT(parse_maps("g7f00-7f10 r-xp 00000000 00:00 0", &e), -EINVAL);
	CHECK_INT(parse_maps("17f0000000000000000-7f10 r-xp 00000000 00:00 0", &e), -EINVAL); /* overflow */
	CHECK_INT(parse_maps("7f00-7f10 r-xp 0 00:00 99999999999999999999999", &e), -EINVAL);
	CHECK_INT(procmaps__parse_line("7f00-7f10 r-xp 0 00:00 0 /a\n/b", 31, &e), -EINVAL);
	CHECK_INT(procmaps__parse_line(NULL, 0, &e), -EINVAL);

	/* the readers' look before the parse: code kept, the rest turned away */
#define MAYBE_X(s) procmaps__maybe_exec(s, strlen(s))
	CHECK(MAYBE_X("55d0c2a00000-55d0c2a21000 r-xp 00002000 08:01 1234567 /usr/bin/cat\n"));
	CHECK(MAYBE_X("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]"));
	CHECK(MAYBE_X("7f00-7f10 rwxs 0 00:00 0"));
	CHECK(!MAYBE_X("7f0000000000-7f0000010000 rw-p 00000000 00:00 0"));
	CHECK(!MAYBE_X("7f0000000000-7f0000010000 r--p 00000000 08:01 12 /usr/lib/libx.so"));
	CHECK(!MAYBE_X("7f0000000000-7f0000010000 ---p 00000000 00:00 0"));
	CHECK(!MAYBE_X("7f00-7f10 r-"));
	CHECK(!MAYBE_X("7f00-7f10"));
	CHECK(!MAYBE_X(""));
	CHECK(!procmaps__maybe_exec("7f00-7f10 r-xp", 11)); /* the x is past LEN */
#undef MAYBE_X
}

static int parse_pm(const char *line, uint64_t *start, uint64_t *size, char *name, size_t cap)
{
	const char *n;
	size_t nlen;
	int err = perfmap__parse_line(line, strlen(line), start, size, &n, &nlen);

	if (!err)
		snprintf(name, cap, "%.*s", (int)nlen, n);
	return err;
}

TEST(perfmap_parser)
{
	uint64_t start, size;
	char name[128];

	CHECK_INT(parse_pm("7f1234000 40 foo\n", &start, &size, name, sizeof(name)), 0);
	CHECK(start == 0x7f1234000ull && size == 0x40);
	CHECK_STR(name, "foo");
	CHECK_INT(parse_pm("0x10 0x20 Interpreted: a b c \r\n", &start, &size, name, sizeof(name)), 0);
	CHECK(start == 0x10 && size == 0x20);
	CHECK_STR(name, "Interpreted: a b c");
	CHECK_INT(parse_pm("10 0 zero", &start, &size, name, sizeof(name)), -EINVAL);
	CHECK_INT(parse_pm("10 20", &start, &size, name, sizeof(name)), -EINVAL);
	CHECK_INT(parse_pm("10 20 ", &start, &size, name, sizeof(name)), -EINVAL);
	CHECK_INT(parse_pm("xyz 20 name", &start, &size, name, sizeof(name)), -EINVAL);
	CHECK_INT(parse_pm("ffffffffffffffff 2 wrap", &start, &size, name, sizeof(name)), -EINVAL);
	CHECK_INT(parse_pm("", &start, &size, name, sizeof(name)), -EINVAL);
}

TEST(kallsyms_parser_and_table)
{
	struct kallsyms_line kl;
	char path[] = "/tmp/gpubpf-kallsyms-XXXXXX";
	const struct ksym *k;
	struct kallsyms *t;
	FILE *f;
	int fd;

	CHECK_INT(kallsyms__parse_line("ffffffff81000000 T _stext\n", 26, &kl), 0);
	CHECK(kl.addr == 0xffffffff81000000ull && kl.type == 'T' && kl.name_len == 6 && !kl.mod);
	CHECK_INT(kallsyms__parse_line("ffffffffc0a01000 t nv_ioctl\t[nvidia]", 36, &kl), 0);
	CHECK(kl.mod && kl.mod_len == 6 && !memcmp(kl.mod, "nvidia", 6));
	CHECK_INT(kallsyms__parse_line("ffffffffc0a01000 t", 18, &kl), -EINVAL);
	CHECK_INT(kallsyms__parse_line("zz T x", 6, &kl), -EINVAL);
	CHECK_INT(kallsyms__parse_line("1000 T x\t[mod", 13, &kl), -EINVAL);

	fd = mkstemp(path);
	CHECK(fd >= 0);
	f = fdopen(fd, "w");
	CHECK(f);
	/* unsorted on purpose, with a data symbol and a module */
	fputs("0000000000003000 T gamma\n"
	      "0000000000001000 T alpha\n"
	      "0000000000001000 t alpha_alias\n"
	      "0000000000002000 D some_data\n"
	      "0000000000005000 t mod_fn\t[nvidia]\n"
	      "bogus line\n",
	      f);
	fclose(f);
	t = kallsyms__load(path);
	unlink(path);
	CHECK(t);
	CHECK_INT(kallsyms__count(t), 5);
	k = kallsyms__lookup(t, 0x1010);
	CHECK(k && !strcmp(k->name, "alpha"));
	CHECK(!kallsyms__lookup(t, 0x2010)); /* data */
	CHECK(!kallsyms__lookup(t, 0x10));   /* before everything */
	k = kallsyms__lookup(t, 0x5001);
	CHECK(k && !strcmp(k->name, "mod_fn") && k->mod && !strcmp(k->mod, "nvidia"));
	CHECK(!kallsyms__lookup(t, 0x5000 + (1u << 21))); /* far past the last symbol */
	kallsyms__free(t);
	kallsyms__free(NULL);

	/* in address order, as the kernel lists its own (only the aliases' runs are sorted):
	 * the global text symbol among a run of aliases is the one found */
	{
		static const char sorted[] = "0000000000001000 T alpha\n"
					     "0000000000001000 D alpha_data\n"
					     "0000000000001000 t alpha_local\n"
					     "0000000000002000 t beta\n"
					     "0000000000002000 W beta_weak\n"
					     "0000000000003000 T gamma\n";
		char *buf = strdup(sorted);

		t = buf ? kallsyms__from_buf(buf, strlen(sorted)) : NULL;
		CHECK(t);
		CHECK_INT(kallsyms__count(t), 6);
		k = kallsyms__lookup(t, 0x1010);
		CHECK(k && !strcmp(k->name, "alpha"));
		k = kallsyms__lookup(t, 0x2fff);
		CHECK(k && !strcmp(k->name, "beta_weak")); /* W is global (upper case): last */
		k = kallsyms__lookup(t, 0x3000);
		CHECK(k && !strcmp(k->name, "gamma"));
		kallsyms__free(t);
	}
}

TEST(demangler)
{
	char *d;
	char buf[128];

	d = demangle("_ZN2ns3fooEi");
	CHECK_STR(d, "ns::foo(int)");
	free(d);
	d = demangle("_Z3barIfET_S0_");
	CHECK_STR(d, "bar<float>(float)");
	free(d);
	d = demangle("_ZNKSt6vectorIiSaIiEE4sizeEv");
	CHECK_STR(d, "std::vector<int, std::allocator<int> >::size() const");
	free(d);
	CHECK(!demangle("main"));
	CHECK(!demangle("_Zinvalid"));
	CHECK(!demangle(NULL));
	snprintf(buf, sizeof(buf), "void (anonymous namespace)::f<int>(int)");
	demangle__strip_return_type(buf);
	CHECK_STR(buf, "(anonymous namespace)::f<int>(int)");
	snprintf(buf, sizeof(buf), "bool operator< <int>(int, int)");
	demangle__strip_return_type(buf);
	CHECK_STR(buf, "bool operator< <int>(int, int)");
	snprintf(buf, sizeof(buf), "guard variable for x");
	demangle__strip_return_type(buf);
	CHECK_STR(buf, "guard variable for x");
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(maps_parser);
	RUN(perfmap_parser);
	RUN(kallsyms_parser_and_table);
	RUN(demangler);
	return T_END();
}
