// SPDX-License-Identifier: MIT
/* Symbolizer: DWARF, through libdw on our own ELF_C_READ handle (see syms.c): the CU
 * index of an object, and the frames (inlined ones first) at an address. */
#define _GNU_SOURCE
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zlib.h>

#include "demangle.h"
#include "elfread.h"
#include "hmap.h"
#include "kallsyms.h"
#include "log.h"
#include "perfmap.h"
#include "procmaps.h"
#include "procroot.h"
#include "readfile.h"
#include "syms.h"

#include "syms_int.h"

/* ---- DWARF ------------------------------------------------------------------------- */

static int cu_range_cmp(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return 0;
}

/* Our own address -> CU index: .debug_aranges is optional (clang omits it by default),
 * and dwarf_addrdie relies on it. */
static void obj_build_cu_index(struct obj *o)
{
	Dwarf_CU *cu = NULL;
	Dwarf_Die cudie;
	uint8_t utype;
	size_t cap = 0;

	while (dwarf_get_units(o->dw, cu, &cu, NULL, &utype, &cudie, NULL) == 0) {
		Dwarf_Addr base, lo, hi;
		ptrdiff_t it = 0;

		if (utype != DW_UT_compile && utype != DW_UT_skeleton)
			continue;
		while ((it = dwarf_ranges(&cudie, it, &base, &lo, &hi)) > 0) {
			if (hi <= lo)
				continue;
			if (o->ncus >= DWARF_MAX_CU_RANGES)
				goto done;
			if (o->ncus == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct cu_range *nc = realloc(o->cus, ncap * sizeof(*nc));

				if (!nc)
					goto done;
				o->cus = nc;
				cap = ncap;
			}
			o->cus[o->ncus++] = (struct cu_range){lo, hi, cudie};
		}
	}
done:
	if (o->ncus)
		qsort(o->cus, o->ncus, sizeof(*o->cus), cu_range_cmp);
}

/* Is libdw VERSION ("0.192") one that reads a malformed .debug_line safely? 0.188
 * (Debian 12's) reads past its end in dwarf_getsrclines (tests/fuzz/fuzz_symobj.c finds
 * it in seconds); 0.192 ran clean under the same harness. */
bool sy_libdw_version_safe(const char *version)
{
	unsigned major, minor;

	return version && sscanf(version, "%u.%u", &major, &minor) == 2 && (major > 0 || minor >= SY_LIBDW_SAFE);
}

/* A target's DWARF is read only with a libdw that is safe on it (said once). */
static bool libdw_safe(void)
{
	static int safe = -1;

	if (safe < 0) {
		const char *v = dwfl_version(NULL);

		safe = sy_libdw_version_safe(v);
		if (!safe)
			pr_warn("libdw %s reads past a malformed line table of a target's file (fixed in 0.%d): "
				"source lines and inlined frames are not read, functions are named from symbol "
				"tables; install elfutils 0.%d or later (make deps does)",
				v ? v : "(unknown)", SY_LIBDW_SAFE, SY_LIBDW_SAFE);
	}
	return safe;
}

static Dwarf *obj_dwarf(struct obj *o)
{
	if (o->dw_tried)
		return o->dw;
	o->dw_tried = true;
	if (!libdw_safe())
		return NULL;
	if (o->dbg_elf && sy_elf_has_dwarf(o->dbg_elf) && elfread__dwarf(o->dbg_elf, o->dbg_fd))
		o->dw = dwarf_begin_elf(o->dbg_elf, DWARF_C_READ, NULL);
	if (!o->dw && sy_elf_has_dwarf(o->elf) && elfread__dwarf(o->elf, o->fd))
		o->dw = dwarf_begin_elf(o->elf, DWARF_C_READ, NULL);
	if (o->dw)
		obj_build_cu_index(o);
	return o->dw;
}

static Dwarf_Die *obj_find_cu(struct obj *o, uint64_t vaddr)
{
	size_t lo = 0, hi = o->ncus;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->cus[mid].lo <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, tries = 0; i > 0 && tries < 8; i--, tries++)
		if (vaddr < o->cus[i - 1].hi)
			return &o->cus[i - 1].cu;
	return NULL;
}

struct scope_chain {
	Dwarf_Die d[DWARF_MAX_DEPTH];
	int n;
};

/* Walk the concrete DIE tree down to PC, recording subprograms and inlined instances
 * outermost first. dwarf_getscopes would jump to the abstract origin's scopes at the
 * first inlined instance, losing the caller chain we want. */
static bool find_scopes(Dwarf_Die *parent, uint64_t pc, struct scope_chain *c, int depth)
{
	Dwarf_Die child;

	if (depth >= DWARF_MAX_DEPTH || dwarf_child(parent, &child) != 0)
		return false;
	do {
		int tag = dwarf_tag(&child);

		switch (tag) {
		case DW_TAG_subprogram:
		case DW_TAG_inlined_subroutine:
		case DW_TAG_lexical_block:
		case DW_TAG_entry_point:
			if (dwarf_haspc(&child, pc) == 1) {
				if (tag != DW_TAG_lexical_block && c->n < DWARF_MAX_DEPTH)
					c->d[c->n++] = child;
				find_scopes(&child, pc, c, depth + 1);
				return true;
			}
			break;
		case DW_TAG_namespace:
		case DW_TAG_module:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
			if (dwarf_haschildren(&child) == 1 && find_scopes(&child, pc, c, depth + 1))
				return true;
			break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

static const char *die_attr_str(Dwarf_Die *d, unsigned int name)
{
	Dwarf_Attribute a;

	return dwarf_formstring(dwarf_attr_integrate(d, name, &a));
}

static int set_frame_names(struct syms *s, struct sym_frame *f, const char *linkage, const char *name)
{
	char *dem;

	if (!linkage)
		linkage = name;
	if (!linkage)
		return -ENOENT;
	dem = demangle(linkage);
	f->func = sy_intern(s, dem ? dem : linkage);
	free(dem);
	f->sys_name = sy_intern(s, linkage);
	return f->func && f->sys_name ? 0 : -ENOMEM;
}

struct pending {
	Dwarf_Die die;
	const char *file;
	int line;
};

/* Fill FR with the inline chain at VADDR, innermost first. Returns the number of frames
 * (0 when there is no DWARF for it) or -ENOMEM. */
static int dwarf_frames(struct syms *s, struct obj *o, uint64_t vaddr, const struct esym *sym, struct frames *fr)
{
	struct scope_chain *c;
	struct pending pend[DWARF_MAX_DEPTH];
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	const char *file = NULL;
	Dwarf_Die *cu;
	Dwarf_Line *ln;
	const char *elf_name = sym ? sym->name : NULL;
	int line = 0, k, np = 0, nf = 0, err = 0;

	if (!obj_dwarf(o))
		return 0;
	cu = obj_find_cu(o, vaddr);
	if (!cu)
		return 0;
	ln = dwarf_getsrc_die(cu, vaddr);
	if (ln) {
		file = dwarf_linesrc(ln, NULL, NULL);
		dwarf_lineno(ln, &line);
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	find_scopes(cu, vaddr, c, 0);
	for (k = c->n - 1; k >= 0 && dwarf_tag(&c->d[k]) != DW_TAG_subprogram; k--)
		;
	if (k < 0) {
		/* Line info but no function DIE (e.g. assembly): one frame, named by ELF. */
		if (!elf_name && !file)
			goto out;
		fr->f[0].file = file ? sy_intern(s, file) : NULL;
		fr->f[0].line = line;
		if (elf_name && set_frame_names(s, &fr->f[0], elf_name, NULL))
			err = -ENOMEM;
		nf = elf_name ? 1 : 0;
		goto out;
	}
	/* Innermost first; each inlined instance supplies its caller's file and line. */
	for (int i = c->n - 1; i >= k; i--) {
		Dwarf_Attribute a;
		Dwarf_Word w;

		pend[np++] = (struct pending){c->d[i], file, line};
		if (i == k)
			break;
		line = 0;
		file = NULL;
		if (dwarf_formudata(dwarf_attr(&c->d[i], DW_AT_call_line, &a), &w) == 0 && w <= INT32_MAX)
			line = (int)w;
		if (dwarf_formudata(dwarf_attr(&c->d[i], DW_AT_call_file, &a), &w) == 0) {
			if (!files)
				dwarf_getsrcfiles(cu, &files, &nfiles);
			if (files && w < nfiles)
				file = dwarf_filesrc(files, w, NULL, NULL);
		}
	}
	/* Too deep: keep the innermost frames and the real function, which takes the call
	 * site line of the outermost inlined instance we kept. */
	if (np > SYMS_MAX_INLINE) {
		pend[SYMS_MAX_INLINE - 1] = pend[np - 1];
		np = SYMS_MAX_INLINE;
	}
	for (int i = 0; i < np; i++) {
		struct sym_frame *f = &fr->f[nf];
		const char *linkage = die_attr_str(&pend[i].die, DW_AT_linkage_name);
		const char *name = die_attr_str(&pend[i].die, DW_AT_name);
		int decl = 0;

		if (!linkage)
			linkage = die_attr_str(&pend[i].die, DW_AT_MIPS_linkage_name);
		if (i == np - 1 && sym) {
			Dwarf_Addr entry;

			/* The exported alias names the function as callers know it (glibc's DWARF
			 * says "__printf" for printf); local clones ("foo.constprop.0") keep the
			 * DWARF name. */
			/* A local symbol whose DWARF has no linkage name (nvcc's kernel host stubs)
			 * still has its mangled ELF name: the full signature, parameters and all. */
			bool mangled_local =
			    !linkage && elf_name && !strncmp(elf_name, "_Z", 2) && !strchr(elf_name, '.');

			if ((!linkage && !name) || ((sym->bind != STB_LOCAL || mangled_local) &&
						    dwarf_entrypc(&pend[i].die, &entry) == 0 && entry == sym->addr)) {
				linkage = elf_name;
				name = NULL;
			}
		}
		if (set_frame_names(s, f, linkage, name)) {
			if (!linkage && !name) {
				f->func = f->sys_name = sy_intern(s, "[inlined]");
			} else {
				err = -ENOMEM;
				goto out;
			}
		}
		f->file = pend[i].file ? sy_intern(s, pend[i].file) : NULL;
		f->line = pend[i].line;
		if (dwarf_decl_line(&pend[i].die, &decl) == 0)
			f->start_line = decl;
		nf++;
	}
out:
	free(c);
	return err ? err : nf;
}

struct frames *sy_obj_frames(struct syms *s, struct obj *o, uint64_t vaddr)
{
	const struct esym *sym;
	struct frames fr = {0};
	uint64_t idx;
	int n;

	if (hmap__get(&o->cache, vaddr, 0, 0, &idx))
		return &o->fr[idx];
	if (sy_obj_load_syms(s, o) == -ENOMEM)
		return NULL;
	sym = sy_obj_lookup_func(o, vaddr);
	n = dwarf_frames(s, o, vaddr, sym, &fr);
	if (n < 0)
		return NULL;
	if (n == 0 && sym) {
		if (set_frame_names(s, &fr.f[0], sym->name, NULL))
			return NULL;
		n = 1;
	}
	fr.n = n;
	fr.resolved = n > 0;
	if (o->nfr == o->capfr) {
		size_t ncap = o->capfr ? o->capfr * 2 : 64;
		struct frames *nfr = realloc(o->fr, ncap * sizeof(*nfr));

		if (!nfr)
			return NULL;
		o->fr = nfr;
		o->capfr = ncap;
	}
	o->fr[o->nfr] = fr;
	if (hmap__put(&o->cache, vaddr, 0, 0, o->nfr))
		return NULL;
	return &o->fr[o->nfr++];
}
