// SPDX-License-Identifier: MIT
/* CPython frames: the interpreter's ELF symbols (its runtime, version, code type and
 * the functions that evaluate or glue Python calls) and the target's executable
 * mappings, each given its role. */
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
#include "elfread.h"
#include "elfsym.h"
#include "hmap.h"
#include "log.h"
#include "mapsnap.h"
#include "procmaps.h"
#include "procroot.h"
#include "procs.h"
#include "python.h"
#include "session.h"

#include "python_int.h"
/* ---- ELF: the interpreter's symbols ---- */

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
int py_scan_interp(int fd, uint64_t map_start, uint64_t map_off, struct py_syms *ps)
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

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !elfread__symtab(e, scn, fd))
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

/* A file's scan, with the bias of a mapping at 0: each process that maps the file (every
 * fork, every exec of the interpreter) and each change of a process's link map (two a
 * dlopen: an interpreter importing 50 extension modules is tracked 100 times) would scan
 * its symbols again, 0.2-0.5 ms for a distribution's python3 and more for one with its
 * whole .symtab, while the process is held (procs.c). The file is the same while its
 * size and its ctime (set by every write, and by no call a user can make to set it back)
 * are. */
struct py_scan {
	int64_t size, ctime_s, ctime_ns;
	int err;
	struct py_syms ps;
};

void py_scans_clear(struct python *py)
{
	hmap_for_each(&py->scans, e) free((void *)(uintptr_t)e->val);
	hmap__clear(&py->scans);
}

int py_scan_file(struct python *py, int fd, const struct stat *st, uint64_t map_start, uint64_t map_off,
		 struct py_syms *ps)
{
	struct py_scan *m = NULL;
	uint64_t v;
	int err;

	if (hmap__get(&py->scans, (uint64_t)st->st_dev, (uint64_t)st->st_ino, map_off, &v)) {
		m = (struct py_scan *)(uintptr_t)v;
		if (m->size == (int64_t)st->st_size && m->ctime_s == (int64_t)st->st_ctim.tv_sec &&
		    m->ctime_ns == (int64_t)st->st_ctim.tv_nsec) {
			*ps = m->ps;
			ps->bias += map_start;
			return m->err;
		}
	}
	err = py_scan_interp(fd, 0, map_off, ps);
	if (err && err != -ENOENT && err != -ENOEXEC)
		return err; /* not the file's: nothing to remember */
	if (!m) {
		if (py->scans.len >= PY_SCANS_MAX)
			py_scans_clear(py);
		m = malloc(sizeof(*m));
		if (m && hmap__put(&py->scans, (uint64_t)st->st_dev, (uint64_t)st->st_ino, map_off, (uintptr_t)m)) {
			free(m);
			m = NULL;
		}
	}
	if (m) {
		m->size = (int64_t)st->st_size;
		m->ctime_s = (int64_t)st->st_ctim.tv_sec;
		m->ctime_ns = (int64_t)st->st_ctim.tv_nsec;
		m->err = err;
		m->ps = *ps;
	}
	ps->bias += map_start;
	return err;
}

/* ---- /proc/PID/maps ---- */

/* Refresh pp's executable mappings (roles INTERP for the interpreter's file). */
int py_read_maps(struct py_pid *pp)
{
	char *buf, *line, *save = NULL;
	struct py_range *m = NULL;
	int n = 0, cap = 0;

	buf = mapsnap__read(pp->pid, PY_MAPS_MAX, true, NULL);
	if (!buf)
		return -errno ? -errno : -ENOENT;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct procmaps_entry e;
		size_t len = strlen(line);

		if (!procmaps__maybe_exec(line, len) || procmaps__parse_line(line, len, &e) || !e.exec)
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
	pp->maps_at = py_mono_s();
	return 0;
}

/* A miss reads the maps again at most once a PY_MAPS_EVERY_MIN per process, and half as
 * often each time the read did not find the address: the stray values of a walk through
 * code built without frame pointers miss every second, and a read of a PyTorch job's
 * thousands of mappings costs gpubpf ~2.6 us each (half its CPU in a recording of a
 * 5,000-mapping process). Loads the dynamic linker reports are read at their event. */
#define PY_MAPS_EVERY_MIN 1.0
#define PY_MAPS_EVERY_MAX 32.0

uint8_t py_role_of(struct py_pid *pp, uint64_t addr, bool *reread)
{
	double every = pp->maps_every > 0 ? pp->maps_every : PY_MAPS_EVERY_MIN;
	bool now = false;

	for (int i = 0; i < pp->nranges; i++)
		if (addr >= pp->ranges[i].start && addr < pp->ranges[i].end)
			return pp->ranges[i].role;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < pp->nmaps; i++)
			if (addr >= pp->maps[i].start && addr < pp->maps[i].end) {
				if (now)
					pp->maps_every = PY_MAPS_EVERY_MIN;
				return pp->maps[i].role;
			}
		/* A library loaded since the last look: read the maps again (the walk's stray
		 * values are unmapped too). */
		if (pass || *reread || py_mono_s() - pp->maps_at < every || py_read_maps(pp))
			break;
		*reread = now = true;
	}
	if (now)
		pp->maps_every = every * 2 < PY_MAPS_EVERY_MAX ? every * 2 : PY_MAPS_EVERY_MAX;
	return PY_ROLE_UNMAPPED;
}
