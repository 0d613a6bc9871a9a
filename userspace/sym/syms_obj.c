// SPDX-License-Identifier: MIT
/* Symbolizer: ELF objects, shared by build id: their loads, function symbols, the
 * debug files that carry their DWARF, and the vDSO. */
#define _GNU_SOURCE
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
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
#include "elfsym.h"
#include "hmap.h"
#include "kallsyms.h"
#include "log.h"
#include "perfmap.h"
#include "procmaps.h"
#include "procroot.h"
#include "readfile.h"
#include "syms.h"

#include "syms_int.h"

/* ---- ELF objects ------------------------------------------------------------------- */

static bool elf_has_section(Elf *elf, const char *name, bool progbits)
{
	return elfread__section(elf, name, progbits) != NULL;
}

static bool elf_has_symtab(Elf *elf)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB && sh.sh_size)
			return true;
	}
	return false;
}

bool sy_elf_has_dwarf(Elf *elf)
{
	return elf_has_section(elf, ".debug_info", true) || elf_has_section(elf, ".zdebug_info", true);
}

static char *build_id_hex(Elf *elf)
{
	const void *bid = NULL;
	ssize_t n = elfread__notes(elf) ? dwelf_elf_gnu_build_id(elf, &bid) : -1;
	char *hex;

	if (n <= 0 || n > 64 || !bid)
		return NULL;
	hex = malloc((size_t)n * 2 + 1);
	if (!hex)
		return NULL;
	for (ssize_t i = 0; i < n; i++)
		snprintf(hex + i * 2, 3, "%02x", ((const unsigned char *)bid)[i]);
	return hex;
}

static size_t leading_underscores(const char *n)
{
	return strspn(n, "_");
}

static int esym_cmp(const void *a, const void *b)
{
	const struct esym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* Best alias first: global, then weak, then local; then .symtab; then larger. */
	if (x->bind != y->bind) {
		int rx = x->bind == STB_GLOBAL ? 0 : x->bind == STB_WEAK ? 1 : 2;
		int ry = y->bind == STB_GLOBAL ? 0 : y->bind == STB_WEAK ? 1 : 2;

		if (rx != ry)
			return rx < ry ? -1 : 1;
	}
	/* "printf" reads better than its aliases "_IO_printf" and "__printf" */
	if (leading_underscores(x->name) != leading_underscores(y->name))
		return leading_underscores(x->name) < leading_underscores(y->name) ? -1 : 1;
	if (x->from_symtab != y->from_symtab)
		return x->from_symtab ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

struct symvec {
	struct esym *v;
	size_t n, cap;
};

static int symvec_push(struct symvec *sv, const struct esym *e)
{
	if (sv->n >= ELF_MAX_SYMS)
		return -E2BIG;
	if (sv->n == sv->cap) {
		size_t ncap = sv->cap ? sv->cap * 2 : 1024;
		struct esym *nv = realloc(sv->v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		sv->v = nv;
		sv->cap = ncap;
	}
	sv->v[sv->n++] = *e;
	return 0;
}

/* Collect defined FUNC/IFUNC (and OBJECT, for lookups by name) symbols of every
 * SHT_SYMTAB/SHT_DYNSYM in ELF (open at FD) that can be read whole, with its names
 * (elfread__whole). String reads go through elf_strptr, which checks that the
 * name lies inside its string table. */
static int collect_syms(struct syms *s, Elf *elf, int fd, bool want_symtab, bool want_dynsym, struct symvec *funcs,
			struct symvec *datas)
{
	Elf_Scn *scn = NULL;
	size_t shnum;
	int err;

	if (elf_getshdrnum(elf, &shnum))
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		size_t entsz = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
		Elf_Data *data;
		GElf_Shdr sh;
		size_t n;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (!((sh.sh_type == SHT_SYMTAB && want_symtab) || (sh.sh_type == SHT_DYNSYM && want_dynsym)) ||
		    !elfread__symtab(elf, scn, fd))
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !entsz)
			continue;
		n = data->d_size / entsz;
		for (size_t i = 1; i < n; i++) {
			GElf_Sym sym;
			struct esym e = {0};
			const char *name;
			int type;

			if (!gelf_getsym(data, (int)i, &sym))
				break;
			type = GELF_ST_TYPE(sym.st_info);
			if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE || !sym.st_value)
				continue;
			if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_OBJECT)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			e.addr = sym.st_value;
			e.end = sym.st_value + sym.st_size;
			if (e.end < e.addr)
				continue;
			if (!sym.st_size) {
				/* Bound a sizeless symbol by its section at least; the next symbol
				 * may bound it further once sorted. */
				GElf_Shdr ssh;
				Elf_Scn *sscn = sym.st_shndx < shnum ? elf_getscn(elf, sym.st_shndx) : NULL;

				e.sizeless = 1;
				e.end = e.addr + 1;
				if (sscn && gelf_getshdr(sscn, &ssh) && ssh.sh_addr <= e.addr &&
				    e.addr < ssh.sh_addr + ssh.sh_size)
					e.end = ssh.sh_addr + ssh.sh_size;
			}
			e.bind = (uint8_t)GELF_ST_BIND(sym.st_info);
			e.from_symtab = sh.sh_type == SHT_SYMTAB;
			e.name = sy_arena_strndup(s, name, strlen(name));
			if (!e.name)
				return -ENOMEM;
			err = symvec_push(type == STT_OBJECT ? datas : funcs, &e);
			if (err)
				return err;
		}
	}
	return 0;
}

static int obj_load_syms(struct syms *s, struct obj *o)
{
	struct symvec funcs = {0}, datas = {0}, all = {0};
	bool main_symtab = elf_has_symtab(o->elf);
	size_t k = 0;
	int err;

	err = collect_syms(s, o->elf, o->fd, true, true, &funcs, &datas);
	if (!err && !main_symtab && o->dbg_elf)
		err = collect_syms(s, o->dbg_elf, o->dbg_fd, true, false, &funcs, &datas);
	if (err && err != -E2BIG)
		goto err_out;

	for (size_t i = 0; i < funcs.n + datas.n && !err; i++)
		err = symvec_push(&all, i < funcs.n ? &funcs.v[i] : &datas.v[i - funcs.n]);
	free(datas.v);
	datas.v = NULL;
	if (err && err != -E2BIG)
		goto err_out;
	if (funcs.n) {
		qsort(funcs.v, funcs.n, sizeof(*funcs.v), esym_cmp);
		for (size_t i = 0; i < funcs.n; i++) {
			if (k && funcs.v[k - 1].addr == funcs.v[i].addr)
				continue; /* an alias: the best one sorted first */
			funcs.v[k++] = funcs.v[i];
		}
		for (size_t i = 0; i + 1 < k; i++)
			if (funcs.v[i].sizeless && funcs.v[i].end > funcs.v[i + 1].addr)
				funcs.v[i].end = funcs.v[i + 1].addr;
	}
	o->funcs = funcs.v;
	o->nfuncs = k;
	o->byname = all.v;
	o->nbyname = all.n;
	return 0;
err_out:
	free(funcs.v);
	free(datas.v);
	free(all.v);
	return err;
}

int sy_obj_load_syms(struct syms *s, struct obj *o)
{
	if (o->syms_tried)
		return 0;
	o->syms_tried = true;
	return obj_load_syms(s, o);
}

const struct esym *sy_obj_lookup_func(const struct obj *o, uint64_t vaddr)
{
	size_t lo = 0, hi = o->nfuncs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->funcs[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Nested symbols (a local label inside a function) are rare; look back a little. */
	for (size_t i = lo, tries = 0; i > 0 && tries < 4; i--, tries++) {
		const struct esym *e = &o->funcs[i - 1];

		if (vaddr < e->end)
			return e;
	}
	return NULL;
}

/* File offset within the object -> ELF virtual address, through the PT_LOAD holding it.
 * Without -z separate-code the text and data segments can share a file page, so the
 * segment whose X flag matches the mapping's is preferred. */
int sy_obj_off_to_vaddr(const struct obj *o, uint64_t off, bool exec, uint64_t *vaddr)
{
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < o->nloads; i++) {
			const struct load *l = &o->loads[i];

			if (!pass && l->exec != exec)
				continue;
			if (off >= l->off && off - l->off < (l->memsz > l->filesz ? l->memsz : l->filesz)) {
				*vaddr = off - l->off + l->vaddr;
				return 0;
			}
		}
	return -ENOENT;
}

int sy_obj_vaddr_to_off(const struct obj *o, uint64_t vaddr, uint64_t *off)
{
	for (size_t i = 0; i < o->nloads; i++) {
		const struct load *l = &o->loads[i];

		if (vaddr >= l->vaddr && vaddr - l->vaddr < l->memsz) {
			*off = vaddr - l->vaddr + l->off;
			return 0;
		}
	}
	return -ENOENT;
}

static int obj_load_phdrs(struct obj *o)
{
	size_t phnum;

	if (elf_getphdrnum(o->elf, &phnum) || phnum > ELF_MAX_PHDRS)
		return -EINVAL;
	o->loads = calloc(phnum ? phnum : 1, sizeof(*o->loads));
	if (!o->loads)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(o->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		o->loads[o->nloads++] =
		    (struct load){ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz, (ph.p_flags & PF_X) != 0};
	}
	return o->nloads ? 0 : -ENOEXEC;
}

void sy_obj_free(struct obj *o)
{
	if (!o)
		return;
	if (o->dw)
		dwarf_end(o->dw);
	if (o->dbg_elf)
		elf_end(o->dbg_elf);
	if (o->dbg_fd >= 0)
		close(o->dbg_fd);
	if (o->elf)
		elf_end(o->elf);
	if (o->fd >= 0)
		close(o->fd);
	free(o->mem);
	free(o->key);
	free(o->loads);
	free(o->funcs);
	free(o->byname);
	free(o->cus);
	free(o->fr);
	hmap__clear(&o->cache);
	free(o);
}

static bool obj_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct syms *s = ctx;

	return !strcmp(s->objs[idx]->key, key);
}

static struct obj *obj_find(struct syms *s, const char *key)
{
	const struct htab_slot *slot = htab__find(&s->objtab, htab__bytes(key, strlen(key)), obj_eq, s, key);

	return slot && slot->idx1 ? s->objs[slot->idx1 - 1] : NULL;
}

static int obj_insert(struct syms *s, struct obj *o)
{
	uint64_t h = htab__bytes(o->key, strlen(o->key));
	struct htab_slot *slot;
	int err = htab__reserve(&s->objtab);

	if (err)
		return err;
	if (s->nobjs == s->capobjs) {
		size_t ncap = s->capobjs ? s->capobjs * 2 : 64;
		struct obj **no = realloc(s->objs, ncap * sizeof(*no));

		if (!no)
			return -ENOMEM;
		s->objs = no;
		s->capobjs = ncap;
	}
	/* O's key is not in the table yet: this is the empty slot for it */
	slot = htab__find(&s->objtab, h, obj_eq, s, o->key);
	s->objs[s->nobjs] = o;
	htab__fill(&s->objtab, slot, h, (uint32_t)s->nobjs++);
	return 0;
}

/* Does the candidate debug file at FD belong to O? By build id when O has one, else by
 * the CRC32 that .gnu_debuglink records. */
Elf *sy_debug_candidate(struct obj *o, int fd, const struct stat *main_st, bool check_crc, GElf_Word crc)
{
	struct stat st;
	Elf *elf;

	if (fstat(fd, &st) || (st.st_dev == main_st->st_dev && st.st_ino == main_st->st_ino))
		return NULL;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return NULL;
	if (elf_kind(elf) != ELF_K_ELF)
		goto reject;
	if (o->build_id) {
		char *hex = build_id_hex(elf);
		bool same = hex && !strcmp(hex, o->build_id);

		free(hex);
		if (!same)
			goto reject;
	} else if (check_crc) {
		unsigned char buf[64 << 10];
		uLong c = crc32(0, Z_NULL, 0);
		off_t off = 0;
		ssize_t r;

		if ((uint64_t)st.st_size > DEBUGLINK_MAX_BYTES)
			goto reject;
		/* the size checked, no more: a file the target grows while it is read (truncate
		 * to 4 TiB, sparse) would keep this loop reading zeros for hours; one that
		 * changed size under it is not the file checked */
		r = 0;
		while (off < st.st_size) {
			size_t want =
			    (uint64_t)(st.st_size - off) < sizeof(buf) ? (size_t)(st.st_size - off) : sizeof(buf);

			r = pread(fd, buf, want, off);
			if (r <= 0)
				break;
			c = crc32(c, buf, (uInt)r);
			off += r;
		}
		if (r < 0 || off != st.st_size || pread(fd, buf, 1, off) != 0 || (GElf_Word)c != crc)
			goto reject;
	} else {
		goto reject;
	}
	if (!sy_elf_has_dwarf(elf) && !elf_has_symtab(elf))
		goto reject;
	return elf;
reject:
	elf_end(elf);
	return NULL;
}

static bool try_debug_fd(struct obj *o, int fd, const struct stat *main_st, bool check_crc, GElf_Word crc)
{
	Elf *elf;

	if (fd < 0)
		return false;
	elf = sy_debug_candidate(o, fd, main_st, check_crc, crc);
	if (!elf) {
		close(fd);
		return false;
	}
	o->dbg_fd = fd;
	o->dbg_elf = elf;
	return true;
}

/* snprintf that reports truncation: a cut-off path could name some other file. */
static bool fmt_path(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fmt_path(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return r >= 0 && (size_t)r < n;
}

/* Separate debug info: by build id under each debug dir, first inside the target's root
 * (the container ships its own -dbg packages), then on the host; then .gnu_debuglink
 * next to the object, in .debug/, and under each debug dir. */
static void obj_find_debug(struct syms *s, struct obj *o, int rootfd, const char *path, const struct stat *main_st)
{
	char cand[4096], dir[4096];
	const char *link, *slash;
	GElf_Word crc = 0;

	if (o->build_id && strlen(o->build_id) > 2) {
		for (size_t i = 0; i < s->ndebug_dirs; i++) {
			if (!fmt_path(cand, sizeof(cand), "%s/.build-id/%.2s/%s.debug", s->debug_dirs[i], o->build_id,
				      o->build_id + 2))
				continue;
			if (rootfd >= 0 && try_debug_fd(o, sy_open_in_root(rootfd, cand), main_st, false, 0))
				return;
			if (try_debug_fd(o, sy_open_host(cand), main_st, false, 0))
				return;
		}
	}
	/* (read whole by libdw: a path and a CRC) */
	if (!elfread__whole(elfread__section(o->elf, ".gnu_debuglink", true), o->fd, DEBUGLINK_SECTION_MAX))
		return;
	link = dwelf_elf_gnu_debuglink(o->elf, &crc);
	if (!link || !*link || strchr(link, '/') || !path || path[0] != '/')
		return;
	slash = strrchr(path, '/');
	if (!fmt_path(dir, sizeof(dir), "%.*s", (int)(slash - path), path))
		return;
	if (rootfd >= 0) {
		if (fmt_path(cand, sizeof(cand), "%s/%s", dir, link) &&
		    try_debug_fd(o, sy_open_in_root(rootfd, cand), main_st, true, crc))
			return;
		if (fmt_path(cand, sizeof(cand), "%s/.debug/%s", dir, link) &&
		    try_debug_fd(o, sy_open_in_root(rootfd, cand), main_st, true, crc))
			return;
	}
	for (size_t i = 0; i < s->ndebug_dirs; i++) {
		if (!fmt_path(cand, sizeof(cand), "%s%s/%s", s->debug_dirs[i], dir, link))
			continue;
		if (rootfd >= 0 && try_debug_fd(o, sy_open_in_root(rootfd, cand), main_st, true, crc))
			return;
		if (try_debug_fd(o, sy_open_host(cand), main_st, true, crc))
			return;
	}
}

/* Take ownership of FD (an ELF file of the target) and return the cached object for it,
 * parsing it on first sight. NULL with errno set when it is not a usable ELF. */
struct obj *sy_obj_get(struct syms *s, int fd, int rootfd, const char *path)
{
	struct obj *o = NULL, *hit;
	char *bid = NULL, keybuf[128];
	struct stat st;
	GElf_Ehdr eh;
	Elf *elf = NULL;
	int err;

	if (fstat(fd, &st)) {
		err = -errno;
		goto err_out;
	}
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)) {
		err = -ENOEXEC;
		goto err_out;
	}
	bid = build_id_hex(elf);
	if (bid)
		snprintf(keybuf, sizeof(keybuf), "b:%s", bid);
	else
		snprintf(keybuf, sizeof(keybuf), "i:%" PRIu64 ":%" PRIu64 ":%" PRId64 ":%" PRId64 ".%09ld",
			 (uint64_t)st.st_dev, (uint64_t)st.st_ino, (int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec,
			 st.st_mtim.tv_nsec);
	hit = obj_find(s, keybuf);
	if (hit) {
		free(bid);
		elf_end(elf);
		close(fd);
		return hit;
	}

	o = calloc(1, sizeof(*o));
	if (!o) {
		err = -ENOMEM;
		goto err_out;
	}
	o->fd = fd;
	o->dbg_fd = -1;
	o->elf = elf;
	o->etype = eh.e_type;
	fd = -1;
	elf = NULL;
	o->key = strdup(keybuf);
	if (!o->key) {
		err = -ENOMEM;
		goto err_out;
	}
	if (bid) {
		o->build_id = sy_intern(s, bid);
		if (!o->build_id) {
			err = -ENOMEM;
			goto err_out;
		}
	}
	err = obj_load_phdrs(o);
	if (err)
		goto err_out;
	if (!sy_elf_has_dwarf(o->elf) || !elf_has_symtab(o->elf))
		obj_find_debug(s, o, rootfd, path, &st);
	err = obj_insert(s, o);
	if (err)
		goto err_out;
	free(bid);
	return o;
err_out:
	free(bid);
	sy_obj_free(o);
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	errno = -err;
	return NULL;
}

/* The vDSO is the same image in every process on this kernel, so ours stands in for the
 * target's: no file to open, nothing the target controls. */
struct obj *sy_vdso_obj(struct syms *s, uint64_t target_size)
{
	size_t len;
	char *maps = NULL;
	uint64_t base = getauxval(AT_SYSINFO_EHDR), size = 0;
	struct obj *o = NULL;
	GElf_Ehdr eh;

	if (s->vdso_tried)
		goto out;
	s->vdso_tried = true;
	if (!base)
		goto out;
	maps = sy_read_proc_file(getpid(), "maps", MAPS_MAX_BYTES, &len);
	for (char *p = maps, *nl; p && *p; p = nl + 1) {
		struct procmaps_entry e;

		nl = strchr(p, '\n');
		if (!nl)
			nl = p + strlen(p) - 1;
		if (!procmaps__parse_line(p, (size_t)(nl - p), &e) && e.path && e.path_len == 6 &&
		    !memcmp(e.path, "[vdso]", 6) && e.start == base) {
			size = e.end - e.start;
			break;
		}
	}
	free(maps);
	if (!size)
		goto out;
	o = calloc(1, sizeof(*o));
	if (!o)
		goto out;
	o->fd = o->dbg_fd = -1;
	o->mem = malloc(size);
	o->key = strdup("[vdso]");
	if (!o->mem || !o->key)
		goto fail;
	memcpy(o->mem, (const void *)(uintptr_t)base, size);
	o->elf = elf_memory(o->mem, size);
	if (!o->elf || !gelf_getehdr(o->elf, &eh))
		goto fail;
	o->etype = eh.e_type;
	if (obj_load_phdrs(o) || sy_obj_load_syms(s, o) || obj_insert(s, o))
		goto fail;
	s->vdso = o;
	s->vdso_size = size;
	goto out;
fail:
	sy_obj_free(o);
out:
	/* A 32-bit target maps a different vDSO: only trust ours when the sizes agree. */
	if (s->vdso && target_size == s->vdso_size)
		return s->vdso;
	return NULL;
}
