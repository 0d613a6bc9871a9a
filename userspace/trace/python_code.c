// SPDX-License-Identifier: MIT
/* CPython frames: code objects read from the target (name, file, line table), checked
 * for reuse, and the profile locations of the frames BPF captured. */
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
/* ---- code objects ---- */

static char *read_pystr(int pid, const struct py_layout *L, uint64_t addr)
{
	uint8_t hdr[48], raw[PY_STR_MAX * 4];
	uint64_t length;
	uint32_t state, kind;
	size_t nbytes, off;
	char *out, *o;

	if (py_read(pid, addr, hdr, sizeof(hdr)))
		return NULL;
	length = py_rd64(hdr + 16);
	state = py_rd32(hdr + 32);
	kind = (state >> 2) & 7;
	if (!((state >> 5) & 1) || (kind != 1 && kind != 2 && kind != 4))
		return NULL; /* not compact: a legacy string, never a code object's name */
	off = (state >> 6) & 1 ? L->ascii_size : L->compact_size;
	if (length > PY_STR_MAX)
		length = PY_STR_MAX;
	nbytes = (size_t)length * kind;
	if (nbytes && py_read(pid, addr + off, raw, nbytes))
		return NULL;
	out = malloc((size_t)length * 4 + 1);
	if (!out)
		return NULL;
	o = out;
	for (size_t i = 0; i < length; i++) {
		uint32_t c = kind == 1	 ? raw[i]
			     : kind == 2 ? (uint32_t)raw[2 * i] | (uint32_t)raw[2 * i + 1] << 8
					 : py_rd32(raw + 4 * i);

		if (c < 0x80) {
			*o++ = c ? (char)c : '?';
		} else if (c < 0x800) {
			*o++ = (char)(0xc0 | c >> 6);
			*o++ = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			*o++ = (char)(0xe0 | c >> 12);
			*o++ = (char)(0x80 | ((c >> 6) & 0x3f));
			*o++ = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x110000) {
			*o++ = (char)(0xf0 | c >> 18);
			*o++ = (char)(0x80 | ((c >> 12) & 0x3f));
			*o++ = (char)(0x80 | ((c >> 6) & 0x3f));
			*o++ = (char)(0x80 | (c & 0x3f));
		} else {
			*o++ = '?';
		}
	}
	*o = '\0';
	return out;
}

void py_code_free(struct py_code *c)
{
	if (!c)
		return;
	free(c->name);
	free(c->file);
	free(c->lines);
	free(c);
}

struct py_code *py_code_get(struct python *py, struct py_pid *pp, uint64_t addr)
{
	const struct py_layout *L = &pp->L;
	struct py_code *c, *old = NULL;
	uint8_t hdr[16];
	uint8_t co[PY_CODE_READ];
	uint64_t v;
	size_t colen;
	double now = py_mono_s();
	bool fits;
	int rerr;

	/* Every field read below lies in the bytes read: the layout may be the target's own
	 * (3.13's debug offsets), which python__parse_debug_offsets bounds to this buffer. */
	colen = py_code_span(L);
	fits = colen <= sizeof(co); /* always, where the layouts are made; else unreadable */
	if (hmap__get(&py->codes, (uint64_t)pp->pid, addr, 0, &v)) {
		old = (struct py_code *)(uintptr_t)v;
		/* Code objects die (a module's body after import) and their memory is reused
		 * by others: check, at most twice a second per code object, that the same
		 * one still lives there. A process that is gone keeps what we knew. */
		if (now - old->checked < 0.5)
			return old;
		rerr = fits ? py_read(pp->pid, addr, co, colen) : -EFAULT;
		if (rerr ||
		    (py_rd64(co + (L->co_qualname ? L->co_qualname : L->co_name)) == old->sig[0] &&
		     py_rd64(co + L->co_filename) == old->sig[1] && py_rd64(co + L->co_linetable) == old->sig[2])) {
			old->checked = now;
			return old;
		}
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->checked = now;
	c->version = old ? old->version + 1 : 0;
	if (!fits || (!old && py_read(pp->pid, addr, co, colen)) ||
	    (pp->code_type && py_rd64(co + 8) != pp->code_type)) {
		c->bad = true;
	} else {
		uint64_t name = py_rd64(co + (L->co_qualname ? L->co_qualname : L->co_name));
		uint64_t file = py_rd64(co + L->co_filename);
		uint64_t lt = py_rd64(co + L->co_linetable);

		c->sig[0] = name;
		c->sig[1] = file;
		c->sig[2] = lt;
		c->firstline = (int)py_rd32(co + L->co_firstlineno);
		c->name = read_pystr(pp->pid, L, name);
		if (!c->name && L->co_qualname)
			c->name = read_pystr(pp->pid, L, py_rd64(co + L->co_name));
		c->file = read_pystr(pp->pid, L, file);
		/* co_linetable is a bytes object: ob_size at 16, data at 32. */
		if (lt && py_read(pp->pid, lt, hdr, sizeof(hdr)) == 0) {
			uint64_t n = 0;

			if (py_read(pp->pid, lt + 16, &n, sizeof(n)) == 0 && n > 0 && n <= PY_LINETABLE_MAX) {
				c->lines = malloc((size_t)n);
				if (c->lines && py_read(pp->pid, lt + 32, c->lines, (size_t)n) == 0) {
					c->nlines = (size_t)n;
				} else {
					free(c->lines);
					c->lines = NULL;
				}
			}
		}
		if (!c->name)
			c->bad = true;
	}
	if (c->bad) {
		/* Not cached: the process may be gone (then it never will be) or the object
		 * half-built; a later drain may read it. */
		py->st.bad_frames++;
		return c;
	}
	if (hmap__put(&py->codes, (uint64_t)pp->pid, addr, 0, (uint64_t)(uintptr_t)c)) {
		py_code_free(c);
		return NULL;
	}
	py_code_free(old); /* replaced */
	return c;
}

static int synth_loc(struct python *py, const char *name, const char *file, int line, int start, uint32_t *id)
{
	struct sym_result r;

	memset(&r, 0, sizeof(r));
	r.module = "[python]";
	r.resolved = true;
	r.nframes = 1;
	r.frames[0].func = name;
	r.frames[0].sys_name = name;
	r.frames[0].file = file;
	r.frames[0].line = line;
	r.frames[0].start_line = start;
	return profile__add_resolved_location(py->s->prof, PROF_FRAME_SYNTH, 0, 0, &r, id);
}

/* The location of one Python frame: cached per (pid, code, line). */
static int frame_loc(struct python *py, struct py_pid *pp, const struct py_frame *f, uint32_t *id)
{
	const struct py_layout *L = &pp->L;
	uint64_t instr = f->instr & PY_INSTR_MASK, v, lkey;
	struct py_code *c = py_code_get(py, pp, f->code);
	int64_t idx;
	int line, err;

	if (!c)
		return -ENOMEM;
	if (c->bad) {
		py_code_free(c);
		if (!py->unknown_loc) {
			err = synth_loc(py, "[python code]", NULL, 0, 0, &py->unknown_loc);
			if (err)
				return err;
		}
		*id = py->unknown_loc;
		return 0;
	}
	if (L->flags & PY_F_FRAMEOBJ)
		idx = (int64_t)(int32_t)instr;
	else
		idx = ((int64_t)instr - (int64_t)(f->code + L->co_code_adaptive)) / 2;
	if (L->flags & PY_F_FRAMEOBJ)
		line = python__line_310(c->lines, c->nlines, c->firstline, idx);
	else
		line = python__line_311(c->lines, c->nlines, c->firstline, idx);
	lkey = (uint64_t)(uint32_t)line | (uint64_t)c->version << 32;
	if (hmap__get(&py->locs, (uint64_t)pp->pid, f->code, lkey, &v)) {
		*id = (uint32_t)v;
		return 0;
	}
	err = synth_loc(py, c->name, c->file, line, c->firstline, id);
	if (!err)
		err = hmap__put(&py->locs, (uint64_t)pp->pid, f->code, lkey, *id);
	return err;
}

int python__frames(struct python *py, int pid, int32_t pystack, const struct prof_frame *user, int nu, uint32_t *ids,
		   int cap)
{
	static struct py_stack st; /* 1 KiB: not on the stack; drains are single-threaded */
	uint8_t roles[PROFILE_MAX_FRAMES];
	bool gend[PY_MAX_DEPTH + 1];
	uint32_t pyloc[PY_MAX_DEPTH + 1];
	int32_t plan[PROFILE_MAX_FRAMES];
	struct py_pid *pp;
	bool reread = false;
	int np = 0, n, err;
	uint32_t key = (uint32_t)pystack;

	if (!py || pystack < 0)
		return -ENOENT;
	pp = py_pid_get(py, pid, false);
	if (!pp || !pp->python)
		return -ENOENT;
	if (bpf_map_lookup_elem(py->stacks_fd, &key, &st) || st.depth == 0 || st.depth > PY_MAX_DEPTH)
		return -ENOENT;
	if (nu > PROFILE_MAX_FRAMES)
		nu = PROFILE_MAX_FRAMES;
	for (uint32_t i = 0; i < st.depth; i++) {
		const struct py_frame *f = &st.frames[i];
		uint32_t tag = PY_INSTR_TAG(f->instr);

		if (pp->L.minor >= 12 && tag == PY_OWNER_CSTACK) {
			/* The shim frame at the base of an eval call: it ends the group. */
			if (np)
				gend[np - 1] = true;
			continue;
		}
		err = frame_loc(py, pp, f, &pyloc[np]);
		if (err)
			return err;
		/* 3.10: one eval call per frame. 3.11: is_entry marks a call's first frame. */
		gend[np] = pp->L.minor == 10 || (pp->L.minor == 11 && tag != 0);
		np++;
	}
	if (!np)
		return -ENOENT;
	gend[np - 1] = true;
	if (st.flags & (PY_STACK_TRUNCATED | PY_STACK_FAULT)) {
		if (!py->trunc_loc) {
			err = synth_loc(py, "[truncated]", NULL, 0, 0, &py->trunc_loc);
			if (err)
				return err;
		}
		pyloc[np] = py->trunc_loc;
		gend[np - 1] = false;
		gend[np++] = true;
		py->st.truncated++;
	}
	for (int i = 0; i < nu; i++)
		roles[i] = user[i].kind == PROF_FRAME_USER ? py_role_of(pp, user[i].addr, &reread) : PY_ROLE_OTHER;
	n = python__merge_plan(roles, nu, gend, np, pp->fp, plan, cap < PROFILE_MAX_FRAMES ? cap : PROFILE_MAX_FRAMES);
	for (int i = 0; i < n; i++) {
		if (plan[i] >= 0) {
			err = profile__location_id(py->s->prof, pid, &user[plan[i]], &ids[i]);
			if (err)
				return err;
		} else {
			ids[i] = pyloc[-1 - plan[i]];
		}
	}
	py->st.stacks++;
	return n;
}
