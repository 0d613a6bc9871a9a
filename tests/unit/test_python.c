// SPDX-License-Identifier: MIT
/* The pure parts of userspace/trace/python.c: line tables, the native/Python merge, the
 * 3.13 debug offsets parser, and the interpreter's scan remembered per file. The BPF walk
 * and the decoder run in tests/e2e/90_python.sh. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mapsnap.h"
#include "python.h"
#include "python_int.h"
#include "test.h"

/* 3.11 location table of a function at line 10: 2 code units with no column info at
 * line 10 (code 13, delta 0), then 3 units one line later (one-line form, code 11),
 * then a long entry going back 2 lines (code 14), then no location (code 15). */
static const uint8_t lt311[] = {
    0x80 | (13 << 3) | 1, 0x00,		 /* units 0-1: +0 -> 10 */
    0x80 | (11 << 3) | 2, 5,	9,	 /* units 2-4: +1 -> 11 */
    0x80 | (14 << 3) | 0, 0x05, 0, 1, 1, /* unit 5: svarint 5 = -2 -> 9 */
    0x80 | (15 << 3) | 0,		 /* unit 6: none */
    0x80 | (0 << 3) | 0,  3,		 /* unit 7: short form, +0 -> 9 */
};

TEST(line_311)
{
	CHECK_INT(python__line_311(lt311, sizeof(lt311), 10, 0), 10);
	CHECK_INT(python__line_311(lt311, sizeof(lt311), 10, 1), 10);
	CHECK_INT(python__line_311(lt311, sizeof(lt311), 10, 2), 11);
	CHECK_INT(python__line_311(lt311, sizeof(lt311), 10, 4), 11);
	CHECK_INT(python__line_311(lt311, sizeof(lt311), 10, 5), 9);
	CHECK_INT(python__line_311(lt311, sizeof(lt311), 10, 6), 10); /* no location: the first line */
	CHECK_INT(python__line_311(lt311, sizeof(lt311), 10, 7), 9);
	CHECK_INT(python__line_311(lt311, sizeof(lt311), 10, 99), 10);
	CHECK_INT(python__line_311(lt311, sizeof(lt311), 10, -3), 10);
	/* truncated in the middle of a varint, or garbage: bounded, the first line */
	CHECK_INT(python__line_311(lt311, 6, 10, 5), 10);
	{
		static const uint8_t junk[] = {0x7f, 0xff, 0xff};

		CHECK_INT(python__line_311(junk, sizeof(junk), 3, 0), 3);
		CHECK_INT(python__line_311(NULL, 0, 3, 0), 3);
	}
	{
		/* 40 long-form entries of a line delta of 2^58 each: no int is that far, and
		 * summed they overflowed (found by tests/fuzz/fuzz_pylines.c's kind of input) */
		uint8_t big[40 * 14];

		for (int e = 0; e < 40; e++) {
			uint8_t *x = big + e * 14;

			x[0] = 0xf0;		/* long form, one code unit */
			memset(x + 1, 0x40, 9); /* the varint 2^59: nine empty 6-bit chunks, then 0x20 */
			x[10] = 0x20;
			x[11] = x[12] = x[13] = 0; /* end line, columns */
		}
		CHECK_INT(python__line_311(big, sizeof(big), 7, 39), 7);
	}
}

TEST(line_310)
{
	/* bytes 0-5 at +0 (20), 6-9 at +2 (22), 10-11 no line, 12-15 at -1 (21) */
	static const uint8_t lt[] = {6, 0, 4, 2, 2, 0x80, 4, 0xff};

	CHECK_INT(python__line_310(lt, sizeof(lt), 20, 0), 20);
	CHECK_INT(python__line_310(lt, sizeof(lt), 20, 2), 20);
	CHECK_INT(python__line_310(lt, sizeof(lt), 20, 3), 22);
	CHECK_INT(python__line_310(lt, sizeof(lt), 20, 5), 20);
	CHECK_INT(python__line_310(lt, sizeof(lt), 20, 7), 21);
	CHECK_INT(python__line_310(lt, sizeof(lt), 20, 100), 20);
	CHECK_INT(python__line_310(lt, 3, 20, 3), 20); /* odd length: the half pair is ignored */
	/* an index no table reaches, twice it past an int64 (fuzz_pylines found it) */
	CHECK_INT(python__line_310(lt, sizeof(lt), 20, INT64_MAX / 2 + 9), 20);
	CHECK_INT(python__line_310(lt, sizeof(lt), 20, -5), 20);
	/* a first line near the top: a line past an int is no line (it came out negative) */
	CHECK_INT(python__line_310(lt, sizeof(lt), INT32_MAX - 1, 3), INT32_MAX - 1);
}

static int plan(const uint8_t *roles, int nu, const bool *gend, int np, bool walkable, int32_t *out)
{
	return python__merge_plan(roles, nu, gend, np, walkable, out, 64);
}

TEST(merge_frame_pointers)
{
	/* native: leaf ext, eval, glue, ext callback, eval, glue, main */
	static const uint8_t roles[] = {PY_ROLE_OTHER, PY_ROLE_EVAL, PY_ROLE_GLUE,  PY_ROLE_OTHER,
					PY_ROLE_EVAL,  PY_ROLE_GLUE, PY_ROLE_INTERP};
	/* Python: f, g run by the first eval; h, <module> by the second */
	static const bool gend[] = {false, true, false, true};
	static const int32_t want[] = {0, -1, -2, 3, -3, -4, 6};
	int32_t out[64];
	int n = plan(roles, 7, gend, 4, true, out);

	CHECK_INT(n, 7);
	for (int i = 0; i < n; i++)
		CHECK_INT(out[i], want[i]);
}

TEST(merge_no_frame_pointers)
{
	/* The eval loop keeps no frame pointer: what follows it is dropped. */
	static const uint8_t roles[] = {PY_ROLE_INTERP, PY_ROLE_EVAL, PY_ROLE_INTERP, PY_ROLE_UNMAPPED};
	static const bool gend[] = {false, false, true};
	int32_t out[64];
	int n = plan(roles, 4, gend, 3, false, out);

	CHECK_INT(n, 4);
	CHECK_INT(out[0], 0);
	CHECK_INT(out[1], -1);
	CHECK_INT(out[2], -2);
	CHECK_INT(out[3], -3);
}

TEST(merge_no_eval)
{
	/* A uprobe in libcudart called through libffi, then a stray value: the foreign
	 * frames stay under the Python ones, the rest goes. */
	static const uint8_t roles[] = {PY_ROLE_OTHER, PY_ROLE_OTHER, PY_ROLE_UNMAPPED, PY_ROLE_INTERP};
	static const bool gend[] = {false, true};
	int32_t out[64];
	int n = plan(roles, 4, gend, 2, true, out);

	CHECK_INT(n, 4);
	CHECK_INT(out[0], 0);
	CHECK_INT(out[1], 1);
	CHECK_INT(out[2], -1);
	CHECK_INT(out[3], -2);
	/* the leaf is kept even in the interpreter */
	{
		static const uint8_t r2[] = {PY_ROLE_INTERP, PY_ROLE_INTERP};

		n = plan(r2, 2, gend, 2, true, out);
		CHECK_INT(n, 3);
		CHECK_INT(out[0], 0);
		CHECK_INT(out[1], -1);
	}
}

TEST(merge_more_evals_than_groups)
{
	/* A truncated Python chain: the extra eval frames stay native; a stray address
	 * past an eval frame ends the stack. */
	static const uint8_t roles[] = {PY_ROLE_EVAL, PY_ROLE_EVAL, PY_ROLE_OTHER, PY_ROLE_UNMAPPED, PY_ROLE_OTHER};
	static const bool gend[] = {true};
	int32_t out[64];
	int n = plan(roles, 5, gend, 1, true, out);

	CHECK_INT(n, 3);
	CHECK_INT(out[0], -1);
	CHECK_INT(out[1], 1);
	CHECK_INT(out[2], 2);
	/* and the output is bounded by cap */
	CHECK_INT(python__merge_plan(roles, 5, gend, 1, true, out, 1), 1);
	CHECK_INT(python__merge_plan(roles, 0, gend, 0, true, out, 64), 0);
}

TEST(debug_offsets_313)
{
	/* The first words of _PyRuntime in CPython 3.13.0 (pyenv build, x86-64). */
	static const uint64_t w[] = {
	    0x7970677562656478,
	    0x30d00f0,
	    0x0,
	    0x452b8,
	    0x260,
	    0x278,
	    0x2f998,
	    0x1c68,
	    0x1c60,
	    0x1cb0,
	    0x1ce8,
	    0x1de8,
	    0x1dd8,
	    0x1de0,
	    0x10,
	    0x1e48,
	    0x0,
	    0x1e58,
	    0x1e50,
	    0x130,
	    0x0,
	    0x8,
	    0x10,
	    0x48,
	    0x98,
	    0xa0,
	    0xe8,
	    0x20,
	    0x50,
	    0x8,
	    0x0,
	    0x38,
	    0x48,
	    0x46,
	    0xd0,
	    0x70,
	    0x78,
	    0x80,
	    0x88,
	    0x44,
	    0x34,
	    0x60,
	    0x68,
	    0xc8,
	    0x10,
	    0x8,
	    0x1a0,
	    0x18,
	};
	uint8_t buf[1024] = {0};
	struct py_layout L;

	memcpy(buf, w, sizeof(w));
	CHECK_INT(python__parse_debug_offsets(buf, sizeof(buf), &L), 0);
	CHECK_INT(L.major, 3);
	CHECK_INT(L.minor, 13);
	CHECK_INT(L.runtime_interp_head, 0x278);
	CHECK_INT(L.interp_threads, 0x1cb0);
	CHECK_INT(L.tstate_frame, 0x48);
	CHECK_INT(L.tstate_match, 0xa0);
	CHECK_INT(L.frame_previous, 8);
	CHECK_INT(L.frame_code, 0);
	CHECK_INT(L.frame_instr, 0x38);
	CHECK_INT(L.frame_owner, 0x46);
	CHECK_INT(L.co_filename, 0x70);
	CHECK_INT(L.co_qualname, 0x80);
	CHECK_INT(L.co_firstlineno, 0x44);
	CHECK_INT(L.co_code_adaptive, 0xc8);
	CHECK_INT(py_code_span(&L), 0xc8);
	/* a field whose 8 bytes end past the code object's bytes read: refused (at 1024,
	 * accepted until the fuzz harness's bound, it was read past them) */
	buf[8 * 35] = 0xf8, buf[8 * 35 + 1] = 3; /* code_object.filename: 1016 */
	CHECK_INT(python__parse_debug_offsets(buf, sizeof(buf), &L), 0);
	CHECK_INT(py_code_span(&L), PY_CODE_READ);
	buf[8 * 35] = 0; /* 1024 */
	buf[8 * 35 + 1] = 4;
	CHECK_INT(python__parse_debug_offsets(buf, sizeof(buf), &L), -EINVAL);
	memcpy(buf, w, sizeof(w));
	/* not the cookie, too short, or offsets outside what the walk reads: refused */
	buf[0] = 'X';
	CHECK_INT(python__parse_debug_offsets(buf, sizeof(buf), &L), -EINVAL);
	buf[0] = 'x';
	CHECK_INT(python__parse_debug_offsets(buf, 32, &L), -EINVAL);
	memset(buf + 8 * 31, 0x7f, 8); /* interpreter_frame.instr_ptr */
	CHECK_INT(python__parse_debug_offsets(buf, sizeof(buf), &L), -EINVAL);
	memset(buf + 16, 0xff, sizeof(buf) - 16);
	CHECK_INT(python__parse_debug_offsets(buf, sizeof(buf), &L), -EINVAL);
}

/* The host's python3 (a dependency of the tests): scanned once, then remembered for any
 * mapping of it; a file that is not the same (ctime) scanned again, a native program's
 * "no interpreter" remembered too. */
TEST(scan_remembered)
{
	struct python py = {0};
	struct py_syms direct, a, b;
	struct stat st, self_st, lie;
	int fd = open("/usr/bin/python3", O_RDONLY | O_CLOEXEC), self = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0 && self >= 0 && fstat(fd, &st) == 0 && fstat(self, &self_st) == 0);
	CHECK_INT(py_scan_interp(fd, 0x555500000000ull, 0, &direct), 0);
	CHECK(direct.runtime && direct.eval && direct.nranges > 0);
	CHECK_INT(py_scan_file(&py, fd, &st, 0x555500000000ull, 0, &a), 0);
	CHECK(!memcmp(&a, &direct, sizeof(a)));
	CHECK_INT((int)py.scans.len, 1);
	/* from the memo: another mapping's bias, the same symbols; the fd is not read (here it
	 * is not even the file) */
	CHECK_INT(py_scan_file(&py, self, &st, 0x7f0000000000ull, 0, &b), 0);
	CHECK(b.bias == direct.bias - 0x555500000000ull + 0x7f0000000000ull);
	CHECK(b.runtime == direct.runtime && b.nranges == direct.nranges &&
	      !memcmp(b.ranges, direct.ranges, sizeof(b.ranges)));
	/* the same inode changed since: scanned again (this fd holds no interpreter) */
	lie = st;
	lie.st_ctim.tv_nsec ^= 1;
	CHECK_INT(py_scan_file(&py, self, &lie, 0x7f0000000000ull, 0, &b), -ENOENT);
	CHECK_INT(py_scan_file(&py, fd, &lie, 0x7f0000000000ull, 0, &b), -ENOENT); /* remembered */
	CHECK_INT((int)py.scans.len, 1);
	CHECK_INT(py_scan_file(&py, self, &self_st, 0, 0, &b), -ENOENT);
	CHECK_INT((int)py.scans.len, 2);
	/* a full memo is forgotten whole */
	for (int i = 0; i < PY_SCANS_MAX; i++) {
		lie.st_ino = (ino_t)(1000000 + i);
		CHECK(py_scan_file(&py, self, &lie, 0, 0, &b) == -ENOENT);
	}
	CHECK((int)py.scans.len <= PY_SCANS_MAX && py.scans.len > 0);
	py_scans_clear(&py);
	close(fd);
	close(self);
}

/* A miss reads the process's maps again at most once a second, and half as often each time
 * that read did not find the address (the stray values a walk through code without frame
 * pointers finds), back to once a second where a read found it. */
static unsigned long maps_reads(void)
{
	unsigned long reads, copies;

	mapsnap__counts(&reads, &copies);
	return reads;
}

TEST(miss_reads_back_off)
{
	struct py_pid pp = {.pid = getpid()};
	bool reread = false;
	unsigned long r0 = maps_reads();
	uint64_t mapped = (uint64_t)(uintptr_t)&maps_reads;

	CHECK_INT(py_role_of(&pp, 0x10, &reread), PY_ROLE_UNMAPPED);
	CHECK(maps_reads() == r0 + 1 && pp.nmaps > 0 && pp.maps_every == 2.0);
	reread = false;
	pp.maps_at = py_mono_s() - 1.5; /* a second and a half ago: not again yet */
	CHECK_INT(py_role_of(&pp, 0x10, &reread), PY_ROLE_UNMAPPED);
	CHECK(maps_reads() == r0 + 1 && !reread);
	pp.maps_at = py_mono_s() - 2.5;
	CHECK_INT(py_role_of(&pp, 0x10, &reread), PY_ROLE_UNMAPPED);
	CHECK(maps_reads() == r0 + 2 && pp.maps_every == 4.0);
	for (int i = 0; i < 10; i++) {
		reread = false;
		pp.maps_at = 0;
		py_role_of(&pp, 0x10, &reread);
	}
	CHECK(pp.maps_every == 32.0); /* at most */
	/* a read that finds what missed: once a second again */
	free(pp.maps);
	pp.maps = NULL;
	pp.nmaps = 0;
	pp.maps_at = 0;
	reread = false;
	CHECK_INT(py_role_of(&pp, mapped, &reread), PY_ROLE_OTHER);
	CHECK(pp.maps_every == 1.0);
	free(pp.maps);
}

int main(int argc, char **argv)
{
	(void)argc;
	T_BEGIN(argv);
	RUN(line_311);
	RUN(line_310);
	RUN(merge_frame_pointers);
	RUN(merge_no_frame_pointers);
	RUN(merge_no_eval);
	RUN(merge_more_evals_than_groups);
	RUN(debug_offsets_313);
	RUN(scan_remembered);
	RUN(miss_reads_back_off);
	return T_END();
}
