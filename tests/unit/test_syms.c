// SPDX-License-Identifier: MIT
/* Symbolizer tests on the fixtures of syms_fixture.h: names, lines, inlined frames and
 * modules of PIE, non-PIE, stripped and C++ programs and a shared library. */
#define _GNU_SOURCE
#include <elfutils/libdwfl.h>

#include "syms_fixture.h"
#include "syms_int.h"

TEST(pie_and_exit)
{
	uint64_t leaf, ret, blob, base;
	char want[128];
	int pid;

	FIXTURE_BEGIN("fixture_pie");
	pid = ch.pid;
	leaf = kv(&ch, "leaf");
	ret = kv(&ch, "ret");
	blob = kv(&ch, "blob");
	base = kv(&ch, "base");
	CHECKC(leaf && ret && blob && base);
	CHECKC_INT(syms__track_pid(s, pid), 0);
	CHECKC_INT(syms__track_pid(s, pid), 0); /* unchanged: cheap no-op */

	CHECKC_INT(syms__resolve_user(s, pid, leaf, &r), 0);
	CHECKC(r.resolved);
	CHECKC_INT(r.nframes, 1);
	CHECKC_STR(r.frames[0].func, "fixture_leaf");
	CHECKC_STR(r.frames[0].sys_name, "fixture_leaf");
	CHECKC_STR(base_of(r.frames[0].file), "fixture.c");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_c, "LEAF"));
	CHECKC_INT(r.frames[0].start_line, marker_line(fixture_c, "LEAF"));
	CHECKC_STR(base_of(r.module), "fixture_pie");
	CHECKC(r.build_id && strlen(r.build_id) >= 16);
	CHECKC(r.map_start <= leaf && leaf < r.map_limit);
	CHECKC_INT(r.rel_addr, leaf - base);

	child_stop(&ch); /* exited: what was never looked up must still resolve */

	/* a return address: like a profiler, look up the call instruction (ret - 1) */
	CHECKC_INT(syms__resolve_user(s, pid, ret - 1, &r), 0);
	CHECKC(r.resolved);
	CHECKC_INT(r.nframes, 2);
	CHECKC_STR(r.frames[0].func, "fixture_inl");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_c, "INL_CALL"));
	CHECKC_INT(r.frames[0].start_line, marker_line(fixture_c, "INL_DECL"));
	CHECKC_STR(base_of(r.frames[0].file), "fixture.c");
	CHECKC_STR(r.frames[1].func, "fixture_outer");
	CHECKC_INT(r.frames[1].line, marker_line(fixture_c, "OUTER_CALL"));
	CHECKC_INT(r.frames[1].start_line, marker_line(fixture_c, "OUTER_DECL"));
	CHECKC_STR(base_of(r.frames[1].file), "fixture.c");

	/* a data object: mapped, but no function there */
	CHECKC_INT(syms__resolve_user(s, pid, blob, &r), 0);
	CHECKC(!r.resolved);
	CHECKC_INT(r.nframes, 1);
	snprintf(want, sizeof(want), "fixture_pie+0x%" PRIx64, blob - base);
	CHECKC_STR(r.frames[0].func, want);
	CHECKC_STR(r.frames[0].sys_name, want);
	CHECKC_INT(r.rel_addr, blob - base);

	/* no mapping at all */
	CHECKC_INT(syms__resolve_user(s, pid, 0x10, &r), 0);
	CHECKC(!r.resolved);
	CHECKC_STR(r.module, "[unknown]");
	CHECKC_STR(r.frames[0].func, "[unknown]+0x10");

	/* the shared library, resolved after the exit too */
	CHECKC_INT(syms__resolve_user(s, pid, kv(&ch, "lib"), &r), 0);
	CHECKC(r.resolved);
	CHECKC_STR(r.frames[0].func, "lib_func");
	CHECKC_STR(base_of(r.module), "libfixture.so");
	CHECKC_STR(base_of(r.frames[0].file), "fixture_lib.c");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_lib_c, "LIB_FUNC"));
	CHECKC_INT(syms__resolve_user(s, pid, kv(&ch, "libret") - 1, &r), 0);
	CHECKC(r.resolved);
	CHECKC_STR(r.frames[0].func, "lib_func");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_lib_c, "LIB_CALL"));

	/* a new address in the dead process, in an object already parsed */
	CHECKC_INT(syms__resolve_user(s, pid, leaf + 1, &r), 0);
	CHECKC_STR(r.frames[0].func, "fixture_leaf");
	syms__free(s);
}

TEST(non_pie)
{
	uint64_t leaf, ret, blob, base;
	char want[128];

	FIXTURE_BEGIN("fixture_nopie");
	leaf = kv(&ch, "leaf");
	ret = kv(&ch, "ret");
	blob = kv(&ch, "blob");
	base = kv(&ch, "base");
	CHECKC(leaf && ret && blob && base);
	CHECKC_INT(syms__track_pid(s, ch.pid), 0);
	CHECKC_INT(syms__resolve_user(s, ch.pid, leaf, &r), 0);
	CHECKC(r.resolved);
	CHECKC_STR(r.frames[0].func, "fixture_leaf");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_c, "LEAF"));
	CHECKC_INT(r.rel_addr, leaf); /* non-PIE: ELF addresses are absolute */
	CHECKC_INT(syms__resolve_user(s, ch.pid, ret - 1, &r), 0);
	CHECKC_INT(r.nframes, 2);
	CHECKC_STR(r.frames[0].func, "fixture_inl");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_c, "INL_CALL"));
	CHECKC_STR(r.frames[1].func, "fixture_outer");
	CHECKC_INT(r.frames[1].line, marker_line(fixture_c, "OUTER_CALL"));
	CHECKC_INT(syms__resolve_user(s, ch.pid, blob, &r), 0);
	CHECKC(!r.resolved);
	snprintf(want, sizeof(want), "fixture_nopie+0x%" PRIx64, blob);
	CHECKC_STR(r.frames[0].func, want);
	child_stop(&ch);
	syms__free(s);
}

TEST(stripped_with_build_id_debug_file)
{
	char dbg[512];
	uint64_t leaf, ret;

	FIXTURE_BEGIN("fixture_stripped");
	snprintf(dbg, sizeof(dbg), "/nonexistent-dir:%s/debug", fx_dir);
	CHECKC_INT(syms__set_debug_dirs(s, dbg), 0);
	leaf = kv(&ch, "leaf");
	ret = kv(&ch, "ret");
	CHECKC_INT(syms__track_pid(s, ch.pid), 0);
	CHECKC_INT(syms__resolve_user(s, ch.pid, leaf, &r), 0);
	CHECKC(r.resolved);
	CHECKC_STR(r.frames[0].func, "fixture_leaf");
	CHECKC_STR(base_of(r.frames[0].file), "fixture.c");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_c, "LEAF"));
	CHECKC_INT(syms__resolve_user(s, ch.pid, ret - 1, &r), 0);
	CHECKC_INT(r.nframes, 2);
	CHECKC_STR(r.frames[1].func, "fixture_outer");
	child_stop(&ch);
	syms__free(s);

	/* Without the debug dir the stripped binary has no names: module+offset. */
	s = syms__new();
	CHECK(s);
	CHECKC(!child_start(&ch, "fixture_stripped"));
	leaf = kv(&ch, "leaf");
	CHECKC_INT(syms__set_debug_dirs(s, "/nonexistent-dir"), 0);
	CHECKC_INT(syms__resolve_user(s, ch.pid, leaf, &r), 0); /* untracked: tracks itself */
	CHECKC(!r.resolved);
	CHECKC(!strncmp(r.frames[0].func, "fixture_stripped+0x", 19));
	CHECKC(r.frames[0].func == r.frames[0].sys_name);
	child_stop(&ch);
	syms__free(s);
}

TEST(cxx_demangled)
{
	uint64_t foo, bar;

	build_fixtures();
	if (!fx_skip && !have_cxx)
		SKIP("g++ missing or C++ fixture failed to build");
	{
		FIXTURE_BEGIN("fixture_cxx");
		foo = kv(&ch, "foo");
		bar = kv(&ch, "bar");
		CHECKC(foo && bar);
		CHECKC_INT(syms__track_pid(s, ch.pid), 0);
		CHECKC_INT(syms__resolve_user(s, ch.pid, foo, &r), 0);
		CHECKC(r.resolved);
		CHECKC_STR(r.frames[0].func, "ns::foo(int)");
		CHECKC_STR(r.frames[0].sys_name, "_ZN2ns3fooEi");
		CHECKC_INT(r.frames[0].line, marker_line(fixture_cc, "NS_FOO"));
		CHECKC_INT(syms__resolve_user(s, ch.pid, bar, &r), 0);
		CHECKC(r.resolved);
		CHECKC_STR(r.frames[0].func, "bar<float>(float)");
		CHECKC_STR(r.frames[0].sys_name, "_Z3barIfET_S0_");
		CHECKC_INT(r.frames[0].line, marker_line(fixture_cc, "BAR"));
		child_stop(&ch);
		syms__free(s);
	}
}

/* DWARF is read only through a libdw that reads a malformed line table safely; make deps
 * installs one, so the tests above read lines with it. */
TEST(libdw_version_gate)
{
	CHECK(sy_libdw_version_safe("0.192"));
	CHECK(sy_libdw_version_safe("0.193"));
	CHECK(sy_libdw_version_safe("1.0"));
	CHECK(!sy_libdw_version_safe("0.188"));
	CHECK(!sy_libdw_version_safe("0.19"));
	CHECK(!sy_libdw_version_safe(""));
	CHECK(!sy_libdw_version_safe("elfutils"));
	CHECK(!sy_libdw_version_safe(NULL));
	CHECK(sy_libdw_version_safe(dwfl_version(NULL)));
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	signal(SIGPIPE, SIG_IGN);
	RUN(pie_and_exit);
	RUN(non_pie);
	RUN(stripped_with_build_id_debug_file);
	RUN(cxx_demangled);
	RUN(libdw_version_gate);
	remove_fixtures();
	return T_END();
}
