// SPDX-License-Identifier: MIT
/* libFuzzer harness: what gpubpf reads of a Python process's memory and decodes in
 * userspace (python_lines.c), all of it the (untrusted) target's: a code object's line
 * table (3.10's and 3.11+'s formats) at an instruction index, _Py_DebugOffsets (3.13+),
 * and the merge of a walked native stack with its Python frames. The input's first byte
 * picks the parser; the bytes after it are the parser's input and arguments. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../bpf/python.h"
#include "python.h"
#include "python_int.h"

static int64_t take64(const uint8_t **p, size_t *n)
{
	uint64_t v = 0;
	size_t k = *n < 8 ? *n : 8;

	memcpy(&v, *p, k);
	*p += k;
	*n -= k;
	return (int64_t)v;
}

static void lines(bool v311, const uint8_t *p, size_t n)
{
	int firstline = (int)(take64(&p, &n) & 0xffffffff);
	int64_t idx = take64(&p, &n);
	int line = v311 ? python__line_311(p, n, firstline, idx) : python__line_310(p, n, firstline, idx);

	/* a line of the table, or the code object's first line where it has none */
	if (line != firstline && (line <= 0 || line > 0x7fffffff))
		abort();
}

static void debug_offsets(const uint8_t *p, size_t n)
{
	struct py_layout L;

	if (python__parse_debug_offsets(p, n, &L))
		return;
	/* what the BPF walk reads must be in its frame window */
	if (L.frame_previous + 8 > PY_FRAME_READ || L.frame_code + 8 > PY_FRAME_READ ||
	    L.frame_instr + 8 > PY_FRAME_READ || !L.interp_threads || py_code_span(&L) > PY_CODE_READ)
		abort();
}

static void merge(const uint8_t *p, size_t n)
{
	uint8_t roles[256];
	bool gend[256], seen_native[256] = {false}, seen_py[256] = {false};
	int32_t out[64];
	int nu, np, cap, got;
	bool walkable;

	if (n < 3)
		return;
	walkable = p[0] & 1;
	cap = p[0] >> 2;
	nu = p[1] % 64;
	np = p[2] % 64;
	p += 3;
	n -= 3;
	for (int i = 0; i < nu; i++)
		roles[i] = i < (int)n ? p[i] % 5 : PY_ROLE_OTHER;
	for (int j = 0; j < np; j++)
		gend[j] = (size_t)(nu + j) < n ? p[nu + j] & 1 : j == np - 1;
	got = python__merge_plan(roles, nu, gend, np, walkable, out, cap);
	if (got < 0 || got > cap)
		abort();
	/* each native and each Python frame at most once */
	for (int k = 0; k < got; k++) {
		int32_t v = out[k];

		if (v >= 0 ? v >= nu || seen_native[v] : -1 - v >= np || seen_py[-1 - v])
			abort();
		if (v >= 0)
			seen_native[v] = true;
		else
			seen_py[-1 - v] = true;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	switch (data[0] % 4) {
	case 0:
		lines(true, data + 1, size - 1);
		break;
	case 1:
		lines(false, data + 1, size - 1);
		break;
	case 2:
		debug_offsets(data + 1, size - 1);
		break;
	default:
		merge(data + 1, size - 1);
		break;
	}
	return 0;
}
