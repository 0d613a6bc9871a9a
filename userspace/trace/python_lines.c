// SPDX-License-Identifier: MIT
/* CPython frames: the pure parts: line tables (3.10, 3.11+), 3.13's debug offsets, and
 * the merge of native and Python frames. Unit-tested on their own (test_python.c). */
#define _GNU_SOURCE /* process_vm_readv */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "../../bpf/python.h"
#include "hmap.h"
#include "log.h"
#include "procmaps.h"
#include "procroot.h"
#include "procs.h"
#include "python.h"
#include "readfile.h"
#include "session.h"

#include "python_int.h"
/* ---- line tables (pure) ---- */

/* 3.11+ (Objects/locations.md): entries of one header byte 1CCCCLLL (code, length-1 in
 * code units), then by code: 15 no location, 14 long form (svarint line delta, then three
 * varints), 13 no column (svarint line delta), 10-12 one line (delta code-10, two bytes),
 * 0-9 short form (delta 0, one byte). Varints are 6-bit chunks, 0x40 = more. */
static bool lt_varint(const uint8_t *t, size_t len, size_t *i, uint64_t *out)
{
	uint64_t v = 0;
	int shift = 0;

	for (;;) {
		if (*i >= len || shift > 60)
			return false;
		uint8_t b = t[(*i)++];

		v |= (uint64_t)(b & 0x3f) << shift;
		shift += 6;
		if (!(b & 0x40))
			break;
	}
	*out = v;
	return true;
}

int python__line_311(const uint8_t *tab, size_t len, int firstline, int64_t idx)
{
	int64_t line = firstline, addr = 0;
	size_t i = 0;

	while (i < len) {
		uint8_t h = tab[i++];
		int code = (h >> 3) & 15, n = (h & 7) + 1;
		int64_t delta = 0;
		bool noloc = false;
		uint64_t v;

		if (!(h & 0x80))
			break; /* not at an entry start: a corrupt table */
		switch (code) {
		case 15:
			noloc = true;
			break;
		case 14:
			if (!lt_varint(tab, len, &i, &v))
				return firstline;
			delta = (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
			for (int k = 0; k < 3; k++)
				if (!lt_varint(tab, len, &i, &v))
					return firstline;
			break;
		case 13:
			if (!lt_varint(tab, len, &i, &v))
				return firstline;
			delta = (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
			break;
		case 12:
		case 11:
		case 10:
			delta = code - 10;
			i += 2;
			break;
		default:
			i += 1;
			break;
		}
		/* a line delta is an int in CPython: a larger one is a corrupt table (and
		 * many of them would overflow LINE) */
		if (delta > INT32_MAX || delta < -INT32_MAX)
			return firstline;
		line += delta;
		if (idx >= addr && idx < addr + n)
			return noloc || line <= 0 || line > INT32_MAX ? firstline : (int)line;
		addr += n;
	}
	return firstline;
}

/* 3.10 (Objects/lnotab_notes.txt): pairs (bytes delta, signed line delta); a line delta
 * of -128 means "no line" for that range. Offsets are in bytes, two per code unit. */
int python__line_310(const uint8_t *tab, size_t len, int firstline, int64_t idx)
{
	int64_t line = firstline, addr = 0, off;

	/* each pair covers at most 255 bytes: an index past them all is in no entry */
	if (idx < 0 || (uint64_t)idx > (uint64_t)len * 128)
		return firstline;
	off = idx * 2;
	for (size_t i = 0; i + 1 < len; i += 2) {
		int sdelta = tab[i];
		int ldelta = (int8_t)tab[i + 1];

		if (ldelta != -128)
			line += ldelta;
		if (off >= addr && off < addr + sdelta)
			return ldelta == -128 || line <= 0 || line > INT32_MAX ? firstline : (int)line;
		addr += sdelta;
	}
	return firstline;
}

/* ---- 3.13+ debug offsets (pure) ---- */

int python__parse_debug_offsets(const uint8_t *buf, size_t len, struct py_layout *L)
{
	size_t nw = len / 8, w, ts, fr, co;
	uint64_t ver;

	if (len < 64 || memcmp(buf, "xdebugpy", 8))
		return -EINVAL;
	ver = py_rd64(buf + 8);
	memset(L, 0, sizeof(*L));
	L->major = (int)((ver >> 24) & 0xff);
	L->minor = (int)((ver >> 16) & 0xff);
	/* A free_threaded flag (0/1) precedes runtime_state in 3.13 builds that have it;
	 * runtime_state.size (sizeof(_PyRuntimeState)) is never that small. */
	w = py_rd64(buf + 16) <= 1 ? 3 : 2;
	if (w + 3 + 4 > nw)
		return -EINVAL;
	L->runtime_interp_head = (uint32_t)py_rd64(buf + 8 * (w + 2));
	/* interpreter_state: size, id, next, threads_head... (3.13 puts the ceval state
	 * first, so no field is at a known offset to check). */
	L->interp_threads = (uint32_t)py_rd64(buf + 8 * (w + 3 + 3));
	if (!L->interp_threads || L->interp_threads > (1u << 20))
		return -EINVAL;
	/* thread_state: size, prev (0), next (8), interp (16), current_frame, thread_id,
	 * native_thread_id. Found by that signature: the interpreter_state section grew
	 * between releases. */
	for (ts = w + 3 + 4; ts + 9 + 6 + 10 <= nw; ts++)
		if (py_rd64(buf + 8 * (ts + 1)) == 0 && py_rd64(buf + 8 * (ts + 2)) == 8 &&
		    py_rd64(buf + 8 * (ts + 3)) == 16)
			break;
	if (ts + 9 + 6 + 10 > nw)
		return -EINVAL;
	L->tstate_next = 8;
	L->tstate_frame = (uint32_t)py_rd64(buf + 8 * (ts + 4));
	L->tstate_match = (uint32_t)py_rd64(buf + 8 * (ts + 6));
	fr = ts + 9; /* interpreter_frame: size, previous, executable, instr_ptr, localsplus, owner */
	L->frame_previous = (uint32_t)py_rd64(buf + 8 * (fr + 1));
	L->frame_code = (uint32_t)py_rd64(buf + 8 * (fr + 2));
	L->frame_instr = (uint32_t)py_rd64(buf + 8 * (fr + 3));
	L->frame_owner = (uint32_t)py_rd64(buf + 8 * (fr + 5));
	co = fr + 6; /* code_object: size, filename, name, qualname, linetable, firstlineno, ... co_code_adaptive */
	L->co_filename = (uint32_t)py_rd64(buf + 8 * (co + 1));
	L->co_name = (uint32_t)py_rd64(buf + 8 * (co + 2));
	L->co_qualname = (uint32_t)py_rd64(buf + 8 * (co + 3));
	L->co_linetable = (uint32_t)py_rd64(buf + 8 * (co + 4));
	L->co_firstlineno = (uint32_t)py_rd64(buf + 8 * (co + 5));
	L->co_code_adaptive = (uint32_t)py_rd64(buf + 8 * (co + 9));
	L->ascii_size = 40;
	L->compact_size = 56;
	L->flags = 0;
	/* Everything the BPF walk reads must lie in its frame window; the rest must be
	 * plausible offsets into a code object. */
	if (L->frame_previous + 8 > PY_FRAME_READ || L->frame_code + 8 > PY_FRAME_READ ||
	    L->frame_instr + 8 > PY_FRAME_READ || L->frame_owner >= PY_FRAME_READ || L->tstate_frame > 4096 ||
	    L->tstate_match > 4096 || !L->runtime_interp_head || L->co_code_adaptive < 64 ||
	    py_code_span(L) > PY_CODE_READ)
		return -EINVAL;
	return 0;
}

size_t py_code_span(const struct py_layout *L)
{
	/* the pointers and the first line are read 8 and 4 bytes wide */
	uint64_t end = (uint64_t)L->co_firstlineno + 4,
		 f[] = {L->co_filename, L->co_name, L->co_qualname, L->co_linetable};

	if (L->co_code_adaptive > end)
		end = L->co_code_adaptive;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i] + 8 > end)
			end = f[i] + 8;
	return (size_t)end;
}

/* ---- the merge (pure) ---- */

int python__merge_plan(const uint8_t *roles, int nu, const bool *group_end, int np, bool walkable, int32_t *out,
		       int cap)
{
	int n = 0, i = 0, j = 0, first_eval = -1;

#define EMIT(v)                                                                                                        \
	do {                                                                                                           \
		if (n < cap)                                                                                           \
			out[n++] = (v);                                                                                \
	} while (0)
/* Python frames of the next group, leaf first. */
#define EMIT_GROUP()                                                                                                   \
	do {                                                                                                           \
		while (j < np) {                                                                                       \
			EMIT(-1 - j);                                                                                  \
			if (group_end[j++])                                                                            \
				break;                                                                                 \
		}                                                                                                      \
	} while (0)

	for (int k = 0; k < nu; k++) {
		if (roles[k] == PY_ROLE_EVAL) {
			first_eval = k;
			break;
		}
	}
	if (first_eval < 0) {
		/* The frame walk never reached the eval loop: the interpreter was built
		 * without frame pointers, or the thread is in a C extension whose caller's
		 * frame is lost. Keep the leaf and the foreign frames under it (an extension,
		 * libffi, the CUDA runtime), stop at the first interpreter or unmapped
		 * address (stale values from a frame the walk cannot decode), and put every
		 * Python frame above. */
		if (nu > 0)
			EMIT(0);
		for (i = 1; i < nu && roles[i] == PY_ROLE_OTHER; i++)
			EMIT(i);
		while (j < np)
			EMIT_GROUP();
		return n;
	}
	if (!walkable) {
		/* The eval loop keeps no frame pointer: the walk's values past it are stale
		 * registers, not callers. Its Python frames say the rest. */
		for (i = 0; i < first_eval; i++)
			EMIT(i);
		while (j < np)
			EMIT_GROUP();
		return n;
	}
	for (i = 0; i < nu; i++) {
		if (roles[i] == PY_ROLE_EVAL) {
			if (j < np)
				EMIT_GROUP();
			else
				EMIT(i); /* more eval calls than captured groups: a truncated chain */
			/* The call machinery around it is the Python call itself. */
			while (i + 1 < nu && roles[i + 1] == PY_ROLE_GLUE)
				i++;
			continue;
		}
		if (roles[i] == PY_ROLE_GLUE && i + 1 < nu && roles[i + 1] == PY_ROLE_EVAL)
			continue;
		/* Past an eval frame, an address in no mapping means the walk went astray:
		 * what follows is not a stack. The remaining Python frames say the rest. */
		if (roles[i] == PY_ROLE_UNMAPPED)
			break;
		EMIT(i);
	}
	while (j < np)
		EMIT_GROUP();
	return n;
#undef EMIT
#undef EMIT_GROUP
}
