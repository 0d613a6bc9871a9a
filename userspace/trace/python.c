// SPDX-License-Identifier: MIT
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

/* Bounds on what the target can make us read. */
#define PY_STR_MAX 512		/* bytes of a name or file name */
#define PY_LINETABLE_MAX 65536	/* bytes of a line table */
#define PY_MAPS_MAX (16u << 20) /* bytes of /proc/PID/maps */
#define PY_MAX_RANGES 64	/* interpreter functions with a role */

/* ---- per-version layouts ----
 * 3.10 and 3.12 come from CPython's headers (Include/cpython/pystate.h,
 * Include/internal/pycore_frame.h, Include/cpython/code.h, pycore_runtime.h) and
 * agree with the offsets other profilers ship; only 3.11 could be checked here against
 * a build with DWARF (pyenv 3.11.7) and Debian's 3.11.2. 3.13 reads _Py_DebugOffsets
 * from the target itself. */
static const struct py_layout layout_310 = {
    .major = 3,
    .minor = 10,
    .flags = PY_F_MATCH_FSBASE | PY_F_FRAMEOBJ,
    .runtime_interp_head = 40,
    .interp_threads = 8,
    .tstate_next = 8,
    .tstate_match = 176 /* thread_id */,
    .tstate_frame = 24 /* frame */,
    .frame_previous = 24 /* f_back */,
    .frame_code = 32,
    .frame_instr = 96 /* f_lasti */,
    .frame_owner = 0xffff,
    .co_filename = 104,
    .co_name = 112,
    .co_qualname = 0,
    .co_firstlineno = 40,
    .co_linetable = 120,
    .co_code_adaptive = 0,
    .ascii_size = 48,
    .compact_size = 72,
};
static const struct py_layout layout_311 = {
    .major = 3,
    .minor = 11,
    .flags = PY_F_CFRAME,
    .runtime_interp_head = 40,
    .interp_threads = 16,
    .tstate_next = 8,
    .tstate_match = 160 /* native_thread_id */,
    .tstate_frame = 56 /* cframe */,
    .cframe_current = 8,
    .frame_previous = 48,
    .frame_code = 32,
    .frame_instr = 56 /* prev_instr */,
    .frame_owner = 68 /* is_entry */,
    .co_filename = 112,
    .co_name = 120,
    .co_qualname = 128,
    .co_firstlineno = 72,
    .co_linetable = 136,
    .co_code_adaptive = 184,
    .ascii_size = 48,
    .compact_size = 72,
};
static const struct py_layout layout_312 = {
    .major = 3,
    .minor = 12,
    .flags = PY_F_CFRAME,
    .runtime_interp_head = 48,
    .interp_threads = 72,
    .tstate_next = 8,
    .tstate_match = 144 /* native_thread_id */,
    .tstate_frame = 56 /* cframe */,
    .cframe_current = 0,
    .frame_previous = 8,
    .frame_code = 0,
    .frame_instr = 56 /* prev_instr */,
    .frame_owner = 70 /* owner */,
    .co_filename = 112,
    .co_name = 120,
    .co_qualname = 128,
    .co_firstlineno = 68,
    .co_linetable = 136,
    .co_code_adaptive = 192,
    .ascii_size = 40,
    .compact_size = 56,
};

/* The frame owner that marks the C stack's shim frame at the base of each
 * _PyEval_EvalFrameDefault call in 3.12+ (FRAME_OWNED_BY_CSTACK). */
#define PY_OWNER_CSTACK 3

/* ---- per-process state ---- */

struct py_range {
	uint64_t start, end; /* runtime addresses */
	uint8_t role;	     /* enum py_role */
};

struct py_code {
	char *name, *file;
	int firstline;
	uint32_t version; /* bumped when the address turns out to hold another code object */
	uint64_t sig[3];  /* name, file and line table pointers: who lives at the address */
	double checked;	  /* when sig was last compared with the target's memory */
	uint8_t *lines;
	size_t nlines;
	bool bad; /* could not be read: shown as [python code 0x...] */
};

struct py_pid {
	int pid;
	bool python; /* a supported interpreter: py_procs has it */
	struct py_layout L;
	uint64_t code_type; /* runtime address of PyCode_Type, 0 if unknown */
	bool fp;	    /* the eval loop keeps a frame pointer: native callers past it are real */
	dev_t interp_dev;
	ino_t interp_ino;
	struct py_range ranges[PY_MAX_RANGES]; /* eval and glue functions */
	int nranges;
	struct py_range *maps; /* executable mappings; role INTERP or OTHER */
	int nmaps;
	double maps_at; /* when maps was read (monotonic seconds) */
};

struct python {
	struct session *s;
	int procs_fd, tstates_fd, stacks_fd, new_fd;
	struct hmap pids;  /* pid -> struct py_pid * */
	struct hmap codes; /* (pid, code address) -> struct py_code * */
	struct hmap locs;  /* (pid, code address, line) -> location id */
	struct hmap roots; /* pids named or started by the user: say why they get no Python */
	struct python_stats st;
	uint32_t unknown_loc, trunc_loc; /* "[python code]" and "[truncated]" locations */
};

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Read LEN bytes of the target at ADDR: 0, or a negative errno (a short read too). */
static int py_read(int pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	ssize_t n;

	if (!addr)
		return -EFAULT;
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

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
		line += delta;
		if (idx >= addr && idx < addr + n)
			return noloc || line <= 0 || line > 0x7fffffff ? firstline : (int)line;
		addr += n;
	}
	return firstline;
}

/* 3.10 (Objects/lnotab_notes.txt): pairs (bytes delta, signed line delta); a line delta
 * of -128 means "no line" for that range. Offsets are in bytes, two per code unit. */
int python__line_310(const uint8_t *tab, size_t len, int firstline, int64_t idx)
{
	int64_t line = firstline, addr = 0, off = idx * 2;

	for (size_t i = 0; i + 1 < len; i += 2) {
		int sdelta = tab[i];
		int ldelta = (int8_t)tab[i + 1];

		if (ldelta != -128)
			line += ldelta;
		if (off >= addr && off < addr + sdelta)
			return ldelta == -128 || line <= 0 ? firstline : (int)line;
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
	ver = rd64(buf + 8);
	memset(L, 0, sizeof(*L));
	L->major = (int)((ver >> 24) & 0xff);
	L->minor = (int)((ver >> 16) & 0xff);
	/* A free_threaded flag (0/1) precedes runtime_state in 3.13 builds that have it;
	 * runtime_state.size (sizeof(_PyRuntimeState)) is never that small. */
	w = rd64(buf + 16) <= 1 ? 3 : 2;
	if (w + 3 + 4 > nw)
		return -EINVAL;
	L->runtime_interp_head = (uint32_t)rd64(buf + 8 * (w + 2));
	/* interpreter_state: size, id, next, threads_head... (3.13 puts the ceval state
	 * first, so no field is at a known offset to check). */
	L->interp_threads = (uint32_t)rd64(buf + 8 * (w + 3 + 3));
	if (!L->interp_threads || L->interp_threads > (1u << 20))
		return -EINVAL;
	/* thread_state: size, prev (0), next (8), interp (16), current_frame, thread_id,
	 * native_thread_id. Found by that signature: the interpreter_state section grew
	 * between releases. */
	for (ts = w + 3 + 4; ts + 9 + 6 + 10 <= nw; ts++)
		if (rd64(buf + 8 * (ts + 1)) == 0 && rd64(buf + 8 * (ts + 2)) == 8 && rd64(buf + 8 * (ts + 3)) == 16)
			break;
	if (ts + 9 + 6 + 10 > nw)
		return -EINVAL;
	L->tstate_next = 8;
	L->tstate_frame = (uint32_t)rd64(buf + 8 * (ts + 4));
	L->tstate_match = (uint32_t)rd64(buf + 8 * (ts + 6));
	fr = ts + 9; /* interpreter_frame: size, previous, executable, instr_ptr, localsplus, owner */
	L->frame_previous = (uint32_t)rd64(buf + 8 * (fr + 1));
	L->frame_code = (uint32_t)rd64(buf + 8 * (fr + 2));
	L->frame_instr = (uint32_t)rd64(buf + 8 * (fr + 3));
	L->frame_owner = (uint32_t)rd64(buf + 8 * (fr + 5));
	co = fr + 6; /* code_object: size, filename, name, qualname, linetable, firstlineno, ... co_code_adaptive */
	L->co_filename = (uint32_t)rd64(buf + 8 * (co + 1));
	L->co_name = (uint32_t)rd64(buf + 8 * (co + 2));
	L->co_qualname = (uint32_t)rd64(buf + 8 * (co + 3));
	L->co_linetable = (uint32_t)rd64(buf + 8 * (co + 4));
	L->co_firstlineno = (uint32_t)rd64(buf + 8 * (co + 5));
	L->co_code_adaptive = (uint32_t)rd64(buf + 8 * (co + 9));
	L->ascii_size = 40;
	L->compact_size = 56;
	L->flags = 0;
	/* Everything the BPF walk reads must lie in its frame window; the rest must be
	 * plausible offsets into a code object. */
	if (L->frame_previous + 8 > PY_FRAME_READ || L->frame_code + 8 > PY_FRAME_READ ||
	    L->frame_instr + 8 > PY_FRAME_READ || L->frame_owner >= PY_FRAME_READ || L->tstate_frame > 4096 ||
	    L->tstate_match > 4096 || !L->runtime_interp_head || L->co_code_adaptive < 64 ||
	    L->co_code_adaptive > 1024 || L->co_filename > 1024 || L->co_name > 1024 || L->co_qualname > 1024 ||
	    L->co_linetable > 1024 || L->co_firstlineno > 1024)
		return -EINVAL;
	return 0;
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

/* ---- ELF: the interpreter's symbols ---- */

struct py_syms {
	uint64_t runtime, version, code_type; /* st_value, 0 if absent */
	uint64_t bias;			      /* runtime = st_value + bias */
	struct py_range ranges[PY_MAX_RANGES];
	int nranges;
	bool eval;
};

static const char *const glue_names[] = {
    "_PyEval_Vector",	      "PyEval_EvalCode",
    "PyEval_EvalCodeEx",      "_PyFunction_Vectorcall",
    "PyObject_Call",	      "_PyObject_Call",
    "PyObject_Vectorcall",    "PyVectorcall_Call",
    "_PyObject_Call_Prepend", "_PyObject_FastCallDictTstate",
    "PyObject_CallObject",    "method_vectorcall",
    "slot_tp_call",	      "gen_send_ex",
    "gen_send_ex2",	      "gen_iternext",
    "_PyEval_EvalFrame",      "run_eval_code_obj",
    "PyEval_EvalFrameEx",     "_PyObject_VectorcallTstate",
};

static void sym_want(struct py_syms *ps, const char *name, uint64_t value, uint64_t size, int type)
{
	int role = -1;

	if (!value)
		return;
	if (type == STT_OBJECT) {
		if (!strcmp(name, "_PyRuntime"))
			ps->runtime = value;
		else if (!strcmp(name, "Py_Version"))
			ps->version = value;
		else if (!strcmp(name, "PyCode_Type"))
			ps->code_type = value;
		return;
	}
	if (type != STT_FUNC || !size)
		return;
	/* The eval loop and its compiler-split cold part (a local .symtab symbol). */
	if (!strcmp(name, "_PyEval_EvalFrameDefault") || !strcmp(name, "_PyEval_EvalFrameDefault.cold")) {
		role = PY_ROLE_EVAL;
		ps->eval = true;
	} else {
		for (size_t i = 0; i < sizeof(glue_names) / sizeof(glue_names[0]); i++)
			if (!strcmp(name, glue_names[i]))
				role = PY_ROLE_GLUE;
	}
	if (role < 0 || ps->nranges >= PY_MAX_RANGES)
		return;
	for (int i = 0; i < ps->nranges; i++)
		if (ps->ranges[i].start == value)
			return; /* in both .symtab and .dynsym */
	ps->ranges[ps->nranges++] = (struct py_range){.start = value, .end = value + size, .role = (uint8_t)role};
}

/* Scan FD's symbols for the interpreter's; bias from the executable mapping (START,
 * OFFSET) of this file. 0 or negative errno (-ENOENT: no interpreter here). */
static int scan_interp(int fd, uint64_t map_start, uint64_t map_off, struct py_syms *ps)
{
	Elf *e;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	size_t nph;
	int err = -ENOENT;
	bool biased = false;

	memset(ps, 0, sizeof(*ps));
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return -ENOEXEC;
	if (!gelf_getehdr(e, &eh) || elf_getphdrnum(e, &nph)) {
		err = -ENOEXEC;
		goto out;
	}
	for (size_t i = 0; i < nph && i < 256; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (map_off >= ph.p_offset && map_off < ph.p_offset + ph.p_filesz) {
			ps->bias = map_start - map_off - (ph.p_vaddr - ph.p_offset);
			biased = true;
			break;
		}
	}
	if (!biased) {
		err = -ENOEXEC;
		goto out;
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !sh.sh_entsize)
			continue;
		n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n && i < (1u << 24); i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			name = elf_strptr(e, sh.sh_link, sym.st_name);
			if (!name || (name[0] != '_' && name[0] != 'P' && name[0] != 'm' && name[0] != 's' &&
				      name[0] != 'g' && name[0] != 'r'))
				continue;
			sym_want(ps, name, sym.st_value, sym.st_size, GELF_ST_TYPE(sym.st_info));
		}
	}
	err = ps->runtime && ps->eval ? 0 : -ENOENT;
out:
	elf_end(e);
	return err;
}

/* ---- /proc/PID/maps ---- */

/* Refresh pp's executable mappings (roles INTERP for the interpreter's file). */
static int read_maps(struct py_pid *pp)
{
	char path[64], *buf, *line, *save = NULL;
	struct py_range *m = NULL;
	int n = 0, cap = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", pp->pid);
	buf = readfile__path(path, PY_MAPS_MAX, true, NULL);
	if (!buf)
		return -errno ? -errno : -ENOENT;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct procmaps_entry e;

		if (procmaps__parse_line(line, strlen(line), &e) || !e.exec)
			continue;
		if (n == cap) {
			int ncap = cap ? cap * 2 : 64;
			struct py_range *nm = realloc(m, sizeof(*m) * (size_t)ncap);

			if (!nm) {
				free(m);
				free(buf);
				return -ENOMEM;
			}
			m = nm;
			cap = ncap;
		}
		m[n].start = e.start;
		m[n].end = e.end;
		m[n].role = pp->interp_ino && e.inode == (uint64_t)pp->interp_ino &&
				    makedev(e.dev_major, e.dev_minor) == pp->interp_dev
				? PY_ROLE_INTERP
				: PY_ROLE_OTHER;
		n++;
	}
	free(buf);
	free(pp->maps);
	pp->maps = m;
	pp->nmaps = n;
	pp->maps_at = mono_s();
	return 0;
}

static uint8_t role_of(struct py_pid *pp, uint64_t addr, bool *reread)
{
	for (int i = 0; i < pp->nranges; i++)
		if (addr >= pp->ranges[i].start && addr < pp->ranges[i].end)
			return pp->ranges[i].role;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < pp->nmaps; i++)
			if (addr >= pp->maps[i].start && addr < pp->maps[i].end)
				return pp->maps[i].role;
		/* A library loaded since the last look: read the maps again, at most once a
		 * second per process (the walk's stray values are unmapped too). */
		if (pass || *reread || mono_s() - pp->maps_at < 1.0 || read_maps(pp))
			break;
		*reread = true;
	}
	return PY_ROLE_UNMAPPED;
}

/* ---- detection ---- */

static struct py_pid *pid_get(struct python *py, int pid, bool create)
{
	uint64_t v;
	struct py_pid *pp;

	if (hmap__get(&py->pids, (uint64_t)pid, 0, 0, &v))
		return (struct py_pid *)(uintptr_t)v;
	if (!create)
		return NULL;
	pp = calloc(1, sizeof(*pp));
	if (!pp)
		return NULL;
	pp->pid = pid;
	if (hmap__put(&py->pids, (uint64_t)pid, 0, 0, (uint64_t)(uintptr_t)pp)) {
		free(pp);
		return NULL;
	}
	return pp;
}

static bool basename_has_python(const char *path, size_t len)
{
	const char *b = path;

	for (size_t i = 0; i < len; i++)
		if (path[i] == '/')
			b = path + i + 1;
	len -= (size_t)(b - path);
	for (size_t i = 0; i + 6 <= len; i++)
		if (!memcmp(b + i, "python", 6))
			return true;
	return false;
}

/* "3.10" from a name like python3.10 or libpython3.10.so: 0 when none. */
static int minor_from_name(const char *path)
{
	const char *b = strrchr(path, '/'), *p;

	b = b ? b + 1 : path;
	p = strstr(b, "python3.");
	if (!p)
		return 0;
	return atoi(p + 8);
}

static int layout_for(struct python *py, struct py_pid *pp, const struct py_syms *ps, const char *path,
		      const char **why)
{
	uint64_t runtime = ps->runtime + ps->bias, ver = 0;
	uint8_t dbg[1024];
	int minor = 0;

	if (ps->version && py_read(pp->pid, ps->version + ps->bias, &ver, sizeof(ver)) == 0 && (ver >> 24) == 3)
		minor = (int)((ver >> 16) & 0xff);
	if (!minor)
		minor = minor_from_name(path);
	if (minor >= 13) {
		if (py_read(pp->pid, runtime, dbg, sizeof(dbg)) ||
		    python__parse_debug_offsets(dbg, sizeof(dbg), &pp->L)) {
			*why = "its _Py_DebugOffsets could not be read or understood";
			return -ENOTSUP;
		}
		if (pp->L.minor > 13) {
			*why = "versions after 3.13 are not supported yet";
			return -ENOTSUP;
		}
		return 0;
	}
	switch (minor) {
	case 10:
		pp->L = layout_310;
		return 0;
	case 11:
		pp->L = layout_311;
		break;
	case 12:
		pp->L = layout_312;
		break;
	default:
		*why = minor ? "only CPython 3.10 to 3.13 are supported" : "its version could not be found";
		return -ENOTSUP;
	}
	/* PyCode_Type.tp_basicsize is offsetof(PyCodeObject, co_code_adaptive) in 3.11+:
	 * trust the target over the table when it is plausible. */
	if (ps->code_type) {
		uint64_t basic = 0;

		if (py_read(pp->pid, ps->code_type + ps->bias + 32, &basic, sizeof(basic)) == 0 && basic >= 120 &&
		    basic <= 400 && basic % 8 == 0)
			pp->L.co_code_adaptive = (uint32_t)basic;
	}
	(void)py;
	return 0;
}

/* Does _PyEval_EvalFrameDefault start with push %rbp; mov %rsp,%rbp (after an optional
 * endbr64)? Distribution builds mostly do not (Debian 12); Fedora 38+, Ubuntu 24.04 and
 * -X perf-friendly builds do. x86-64 only; elsewhere assume not. */
static bool eval_has_fp(int pid, const struct py_pid *pp)
{
#if defined(__x86_64__)
	static const uint8_t prologue[] = {0x55, 0x48, 0x89, 0xe5};
	uint8_t b[8];

	for (int i = 0; i < pp->nranges; i++) {
		if (pp->ranges[i].role != PY_ROLE_EVAL || py_read(pid, pp->ranges[i].start, b, sizeof(b)))
			continue;
		if (!memcmp(b, prologue, 4) ||
		    (b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa && !memcmp(b + 4, prologue, 4)))
			return true;
	}
#else
	(void)pid;
	(void)pp;
#endif
	return false;
}

static void say(struct python *py, int pid, const char *what)
{
	uint64_t said = 1;

	if (hmap__get(&py->roots, (uint64_t)pid, 0, 0, &said) && !said) {
		fprintf(stderr, "gpubpf: pid %d: %s\n", pid, what);
		hmap__put(&py->roots, (uint64_t)pid, 0, 0, 1); /* said once per detection */
	} else {
		pr_debug("pid %d: %s", pid, what);
	}
}

int python__track(struct python *py, int pid)
{
	char path[64], *buf, *line, *save = NULL, msg[256];
	struct py_pid *pp;
	struct py_syms ps;
	struct py_proc v = {0};
	const char *why = "not a Python process (no CPython interpreter mapped): native stacks only";
	bool first = true, found = false;
	int err, nfiles = 0;

	if (!py || pid <= 0)
		return -EINVAL;
	pp = pid_get(py, pid, true);
	if (!pp)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	buf = readfile__path(path, PY_MAPS_MAX, true, NULL);
	if (!buf)
		return 0; /* gone */
	/* The interpreter is the main executable (static) or a libpython: look at the
	 * first executable mapping and at objects named like python. */
	for (line = strtok_r(buf, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
		struct procmaps_entry e;
		char obj[4096];
		struct stat stt;
		int fd;

		if (procmaps__parse_line(line, strlen(line), &e) || !e.exec || !procmaps__is_file(&e))
			continue;
		nfiles++;
		if (!first && !basename_has_python(e.path, e.path_len))
			continue;
		first = false;
		if (e.path_len >= sizeof(obj))
			continue;
		memcpy(obj, e.path, e.path_len);
		obj[e.path_len] = '\0';
		fd = procroot__open(pid, obj, &(struct procroot_rule){.same_file = true, .ino = (ino_t)e.inode});
		if (fd < 0)
			continue;
		if (fstat(fd, &stt) == 0 && scan_interp(fd, e.start, e.offset, &ps) == 0) {
			found = true;
			pp->interp_dev = stt.st_dev;
			pp->interp_ino = stt.st_ino;
			err = layout_for(py, pp, &ps, obj, &why);
			if (!err) {
				pp->nranges = 0;
				for (int i = 0; i < ps.nranges; i++) {
					pp->ranges[pp->nranges] = ps.ranges[i];
					pp->ranges[pp->nranges].start += ps.bias;
					pp->ranges[pp->nranges].end += ps.bias;
					pp->nranges++;
				}
				pp->code_type = ps.code_type ? ps.code_type + ps.bias : 0;
				pp->fp = eval_has_fp(pid, pp);
				v.version = (uint32_t)(pp->L.major << 8 | pp->L.minor);
				v.flags = pp->L.flags;
				v.interp_head = ps.runtime + ps.bias + pp->L.runtime_interp_head;
				v.interp_threads = pp->L.interp_threads;
				v.tstate_next = pp->L.tstate_next;
				v.tstate_match = pp->L.tstate_match;
				v.tstate_frame = pp->L.tstate_frame;
				v.cframe_current = pp->L.cframe_current;
				v.frame_previous = pp->L.frame_previous;
				v.frame_code = pp->L.frame_code;
				v.frame_instr = pp->L.frame_instr;
				v.frame_owner = pp->L.frame_owner;
				snprintf(msg, sizeof(msg), "Python %d.%d (%.160s): Python frames on", pp->L.major,
					 pp->L.minor, obj);
			} else {
				snprintf(msg, sizeof(msg), "Python in %.120s, but %.80s: native stacks only", obj, why);
			}
		}
		close(fd);
	}
	free(buf);
	if (found && v.version) {
		err = bpf_map_update_elem(py->procs_fd, &pid, &v, BPF_ANY);
		if (err)
			return -errno;
		if (!pp->python)
			py->st.procs++;
		pp->python = true;
		read_maps(pp);
		pr_debug("pid %d: %s", pid, msg);
		return 0;
	}
	if (pp->python) {
		/* exec'd into something else */
		bpf_map_delete_elem(py->procs_fd, &pid);
		pp->python = false;
	}
	/* Right after an exec only the executable and the dynamic linker are mapped: a
	 * libpython may come with the loader's next event. Say nothing yet. */
	if (found)
		say(py, pid, msg);
	else if (nfiles >= 3)
		pr_debug("pid %d: %s", pid, why); /* a native program: nothing to tell the user */
	return 0;
}

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
	length = rd64(hdr + 16);
	state = rd32(hdr + 32);
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
					 : rd32(raw + 4 * i);

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

static void code_free(struct py_code *c)
{
	if (!c)
		return;
	free(c->name);
	free(c->file);
	free(c->lines);
	free(c);
}

static struct py_code *code_get(struct python *py, struct py_pid *pp, uint64_t addr)
{
	const struct py_layout *L = &pp->L;
	struct py_code *c, *old = NULL;
	uint8_t hdr[16];
	uint8_t co[1024];
	uint64_t v;
	size_t colen;
	double now = mono_s();
	int rerr;

	colen = L->co_code_adaptive > L->co_linetable ? L->co_code_adaptive : L->co_linetable + 8;
	if (colen > sizeof(co))
		colen = sizeof(co);
	if (hmap__get(&py->codes, (uint64_t)pp->pid, addr, 0, &v)) {
		old = (struct py_code *)(uintptr_t)v;
		/* Code objects die (a module's body after import) and their memory is reused
		 * by others: check, at most twice a second per code object, that the same
		 * one still lives there. A process that is gone keeps what we knew. */
		if (now - old->checked < 0.5)
			return old;
		rerr = py_read(pp->pid, addr, co, colen);
		if (rerr || (rd64(co + (L->co_qualname ? L->co_qualname : L->co_name)) == old->sig[0] &&
			     rd64(co + L->co_filename) == old->sig[1] && rd64(co + L->co_linetable) == old->sig[2])) {
			old->checked = now;
			return old;
		}
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->checked = now;
	c->version = old ? old->version + 1 : 0;
	if ((!old && py_read(pp->pid, addr, co, colen)) || (pp->code_type && rd64(co + 8) != pp->code_type)) {
		c->bad = true;
	} else {
		uint64_t name = rd64(co + (L->co_qualname ? L->co_qualname : L->co_name));
		uint64_t file = rd64(co + L->co_filename);
		uint64_t lt = rd64(co + L->co_linetable);

		c->sig[0] = name;
		c->sig[1] = file;
		c->sig[2] = lt;
		c->firstline = (int)rd32(co + L->co_firstlineno);
		c->name = read_pystr(pp->pid, L, name);
		if (!c->name && L->co_qualname)
			c->name = read_pystr(pp->pid, L, rd64(co + L->co_name));
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
		code_free(c);
		return NULL;
	}
	code_free(old); /* replaced */
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
	struct py_code *c = code_get(py, pp, f->code);
	int64_t idx;
	int line, err;

	if (!c)
		return -ENOMEM;
	if (c->bad) {
		code_free(c);
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
	pp = pid_get(py, pid, false);
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
		roles[i] = user[i].kind == PROF_FRAME_USER ? role_of(pp, user[i].addr, &reread) : PY_ROLE_OTHER;
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

/* ---- lifecycle ---- */

struct python *python__new(struct session *s)
{
	struct python *py = calloc(1, sizeof(*py));
	int err;

	if (!py)
		return NULL;
	py->s = s;
	py->procs_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "py_procs", sizeof(__u32), sizeof(struct py_proc),
				      PY_PROCS_ENTRIES, NULL);
	py->tstates_fd = bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "py_tstates", sizeof(__u32), sizeof(struct py_tcache),
					PY_TSTATES_ENTRIES, NULL);
	py->stacks_fd = bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "py_stacks", sizeof(__u32), sizeof(struct py_stack),
				       PY_STACKS_ENTRIES, NULL);
	py->new_fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "py_new_stacks", 0, 0, 64 * 1024, NULL);
	if (py->procs_fd < 0 || py->tstates_fd < 0 || py->stacks_fd < 0 || py->new_fd < 0) {
		err = -errno;
		python__free(py);
		errno = -err;
		return NULL;
	}
	return py;
}

void python__free(struct python *py)
{
	if (!py)
		return;
	hmap_for_each(&py->pids, e)
	{
		struct py_pid *pp = (struct py_pid *)(uintptr_t)e->val;

		free(pp->maps);
		free(pp);
	}
	hmap_for_each(&py->codes, e) code_free((struct py_code *)(uintptr_t)e->val);
	hmap__clear(&py->pids);
	hmap__clear(&py->codes);
	hmap__clear(&py->locs);
	hmap__clear(&py->roots);
	if (py->procs_fd > 0)
		close(py->procs_fd);
	if (py->tstates_fd > 0)
		close(py->tstates_fd);
	if (py->stacks_fd > 0)
		close(py->stacks_fd);
	if (py->new_fd > 0)
		close(py->new_fd);
	free(py);
}

int python__prepare(struct python *py, struct bpf_object *obj)
{
	static const char *const names[] = {"py_procs", "py_tstates", "py_stacks", "py_new_stacks"};

	for (int i = 0; i < 4; i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(obj, names[i]);
		int fds[4];
		int err;

		if (!m)
			return -ENOENT;
		if (py) {
			fds[0] = py->procs_fd;
			fds[1] = py->tstates_fd;
			fds[2] = py->stacks_fd;
			fds[3] = py->new_fd;
			err = bpf_map__reuse_fd(m, fds[i]);
		} else {
			/* A ring buffer's size is a multiple of the page size. */
			err = bpf_map__set_max_entries(m, i == 3 ? 4096 : 1);
		}
		if (err)
			return err;
	}
	return 0;
}

static void on_change(void *ctx, int pid)
{
	python__track(ctx, pid);
}

/* A stack seen for the first time: read its code objects now, while the process lives,
 * into the cache the drains use (a process's last second is drained after it exits). */
static int on_new_stack(void *ctx, void *data, size_t len)
{
	static struct py_stack st;
	struct python *py = ctx;
	const struct py_new_stack *ns = data;
	struct py_pid *pp;

	if (len < sizeof(*ns) || bpf_map_lookup_elem(py->stacks_fd, &ns->id, &st) || st.depth > PY_MAX_DEPTH)
		return 0;
	pp = pid_get(py, (int)st.tgid, false);
	if (!pp || !pp->python)
		return 0;
	for (uint32_t i = 0; i < st.depth; i++)
		if (st.frames[i].code)
			code_get(py, pp, st.frames[i].code);
	return 0;
}

int python__attach_session(struct session *s)
{
	int pids[CLI_MAX_PIDS], n, err;

	if (!s->opts->python)
		return 0;
	s->py = python__new(s);
	if (!s->py) {
		err = -errno;
		pr_warn("no Python frames: cannot create the Python maps: %s", strerror(-err));
		return err;
	}
	err = procs__add_on_change(s->procs, on_change, s->py);
	if (!err)
		err = procs__add_ringbuf(s->procs, s->py->new_fd, on_new_stack, s->py);
	if (err) {
		pr_warn("no Python frames: %s", strerror(-err));
		python__free(s->py);
		s->py = NULL;
		return err;
	}
	/* The targets named or started now: they get a line when they are not Python. A
	 * command started with -- is still held before its exec: it is looked at again
	 * when it execs. */
	n = procs__live_pids(s->procs, pids, CLI_MAX_PIDS);
	for (int i = 0; i < n; i++) {
		hmap__put(&s->py->roots, (uint64_t)pids[i], 0, 0, 0);
		if (!s->opts->command)
			python__track(s->py, pids[i]);
	}
	return 0;
}

void python__model_renewed(struct python *py)
{
	if (!py)
		return;
	/* the location ids named the old model's locations */
	hmap__clear(&py->locs);
	py->unknown_loc = py->trunc_loc = 0;
}

void python__note_pid(struct python *py, int pid)
{
	if (py && !pid_get(py, pid, false))
		python__track(py, pid);
}

void python__stats(const struct python *py, struct python_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (py)
		*out = py->st;
}
