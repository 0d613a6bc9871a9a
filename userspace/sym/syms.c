// SPDX-License-Identifier: MIT
/* Symbolizer. See syms.h for the contract; the notes here explain the choices.
 *
 * DWARF goes through libdw directly (dwarf_begin_elf on an Elf we opened with
 * ELF_C_READ) rather than libdwfl: libdwfl mmaps the files it opens, and a target that
 * truncates one of its own files while we read it would then kill us with SIGBUS.
 * ELF_C_READ reads with pread into memory, so a hostile file can only produce errors.
 */
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
#include "hmap.h"
#include "kallsyms.h"
#include "log.h"
#include "perfmap.h"
#include "procmaps.h"
#include "procroot.h"
#include "readfile.h"
#include "syms.h"

#define MAPS_MAX_BYTES (64u << 20)
#define PERFMAP_MAX_BYTES (256u << 20)
#define STAT_MAX_BYTES (64u << 10)
#define ELF_MAX_PHDRS 1024
#define ELF_MAX_SYMS (32u << 20)
#define DWARF_MAX_CU_RANGES (16u << 20)
#define DWARF_MAX_DEPTH 64
#define DEBUGLINK_MAX_BYTES (4ull << 30)
#define JIT_SCAN_BACK 32
#define DEFAULT_DEBUG_DIRS "/usr/lib/debug"
#define ARENA_CHUNK (1u << 20)

/* ---- small containers -------------------------------------------------------------- */

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	char data[];
};

/* ---- data model -------------------------------------------------------------------- */

struct load {
	uint64_t vaddr, off, filesz, memsz;
	bool exec;
};

struct esym {
	uint64_t addr;
	uint64_t end; /* exclusive; for size-0 symbols, the next symbol or the section end */
	const char *name;
	uint8_t bind;
	uint8_t from_symtab;
	uint8_t sizeless;
};

struct cu_range {
	uint64_t lo, hi;
	Dwarf_Die cu;
};

struct frames {
	bool resolved;
	int n;
	struct sym_frame f[SYMS_MAX_INLINE];
};

/* One parsed ELF object, shared by every process and mapping that has the same build id
 * (or the same dev:ino:size:mtime when it has none). */
struct obj {
	char *key;
	const char *build_id; /* interned */
	int fd;
	Elf *elf;
	void *mem; /* backing store for elf_memory objects ([vdso]) */
	uint16_t etype;
	struct load *loads;
	size_t nloads;
	struct esym *funcs; /* sorted by addr, aliases collapsed */
	size_t nfuncs;
	struct esym *byname; /* every defined FUNC/IFUNC/OBJECT, aliases kept: syms__find_symbol */
	size_t nbyname;
	int dbg_fd;
	Elf *dbg_elf;
	Dwarf *dw;
	bool dw_tried;
	struct cu_range *cus;
	size_t ncus;
	struct hmap cache; /* vaddr -> index into fr */
	struct frames *fr;
	size_t nfr, capfr;
};

struct map {
	uint64_t start, end, pgoff, ino;
	uint32_t dev_major, dev_minor;
	const char *path; /* interned; NULL for anonymous */
	struct obj *obj;
	bool exec, deleted, file;
};

struct jit {
	uint64_t start, end;
	const char *name;
	uint32_t seq;
};

struct proc {
	int pid;
	int nspid; /* the pid inside the target's pid namespace; 0 until read */
	uint64_t starttime;
	uint64_t maps_hash;
	bool have_hash;
	bool retried;
	struct map *maps; /* sorted by start, non-overlapping */
	size_t nmaps;
	struct jit *jit; /* sorted by (start, seq) */
	size_t njit;
	uint32_t jit_seq;
	dev_t pm_dev;
	ino_t pm_ino;
	off_t pm_off;	 /* bytes of the perf map already parsed (it is append-only) */
	bool pm_refused; /* its perf map was refused, and said so */
	ino_t exe_ino;	 /* /proc/PID/exe's inode: its mapping is the program's */
};

struct syms {
	struct arena_chunk *arena;
	const char **strs; /* interned strings */
	size_t nstrs, capstrs;
	struct htab strtab;
	struct obj **objs;
	size_t nobjs, capobjs;
	struct htab objtab;
	struct proc **procs;
	size_t nprocs, capprocs;
	struct hmap proctab;
	struct kallsyms *ksyms;
	bool ksyms_tried;
	char **debug_dirs;
	size_t ndebug_dirs;
	struct obj *vdso;
	uint64_t vdso_size;
	bool vdso_tried;
};

/* ---- strings ----------------------------------------------------------------------- */

static char *arena_alloc(struct syms *s, size_t n)
{
	struct arena_chunk *c = s->arena;
	char *p;

	if (!c || c->cap - c->used < n) {
		size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->cap = cap;
		c->used = 0;
		c->next = s->arena;
		s->arena = c;
	}
	p = c->data + c->used;
	c->used += n;
	return p;
}

static char *arena_strndup(struct syms *s, const char *str, size_t len)
{
	char *p = arena_alloc(s, len + 1);

	if (!p)
		return NULL;
	memcpy(p, str, len);
	p[len] = '\0';
	return p;
}

struct strkey {
	const char *p;
	size_t len;
};

static bool str_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct syms *s = ctx;
	const struct strkey *k = key;

	return !strncmp(s->strs[idx], k->p, k->len) && s->strs[idx][k->len] == '\0';
}

/* Long-lived copy of STR[0..LEN), deduplicated; NULL on ENOMEM. */
static const char *intern_n(struct syms *s, const char *str, size_t len)
{
	struct strkey k = {str, len};
	uint64_t h = htab__bytes(str, len);
	struct htab_slot *slot;
	char *p;

	if (htab__reserve(&s->strtab))
		return NULL;
	slot = htab__find(&s->strtab, h, str_eq, s, &k);
	if (slot->idx1)
		return s->strs[slot->idx1 - 1];
	if (s->nstrs == s->capstrs) {
		size_t ncap = s->capstrs ? s->capstrs * 2 : 1024;
		const char **ns = realloc(s->strs, ncap * sizeof(*ns));

		if (!ns)
			return NULL;
		s->strs = ns;
		s->capstrs = ncap;
	}
	p = arena_strndup(s, str, len);
	if (!p)
		return NULL;
	s->strs[s->nstrs] = p;
	htab__fill(&s->strtab, slot, h, (uint32_t)s->nstrs++);
	return p;
}

static const char *intern(struct syms *s, const char *str)
{
	return str ? intern_n(s, str, strlen(str)) : NULL;
}

static const char *internf(struct syms *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *internf(struct syms *s, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	return intern_n(s, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b && b[1] ? b + 1 : path;
}

/* ---- file access ------------------------------------------------------------------- */

/* Open PATH as the target sees it, never escaping its root, only a regular file
 * (procroot.h). Debug files found this way must still match their object's build id or
 * CRC (debug_candidate). */
static int open_in_root(int rootfd, const char *path)
{
	return procroot__open_at(rootfd, path, NULL);
}

static int open_host(const char *path)
{
	return procroot__open_host(path, NULL);
}

static char *read_proc_file(int pid, const char *name, size_t max, size_t *lenp)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	return readfile__path(path, max, false, lenp);
}

/* Field 22 of /proc/PID/stat: tells a reused pid from the process we tracked. */
static uint64_t proc_starttime(int pid)
{
	size_t len;
	char *buf = read_proc_file(pid, "stat", STAT_MAX_BYTES, &len);
	char *p, *end;
	uint64_t v = 0;

	if (!buf)
		return 0;
	p = strrchr(buf, ')'); /* the comm before it may contain spaces and parens */
	if (!p)
		goto out;
	p++;
	for (int field = 3; field <= 22; field++) {
		while (*p == ' ')
			p++;
		if (!*p)
			goto out;
		if (field == 22) {
			v = strtoull(p, &end, 10);
			break;
		}
		while (*p && *p != ' ')
			p++;
	}
out:
	free(buf);
	return v;
}

/* The pid the target knows itself by (innermost NSpid): JITs name their perf map with it. */
static int proc_nspid(int pid)
{
	size_t len;
	char *buf = read_proc_file(pid, "status", STAT_MAX_BYTES, &len);
	char *line, *p;
	long v = pid;

	if (!buf)
		return pid;
	line = strstr(buf, "\nNSpid:");
	if (line) {
		char *eol = strchr(line + 1, '\n');

		if (eol)
			*eol = '\0';
		p = line + 7;
		for (;;) {
			char *end;
			long x = strtol(p, &end, 10);

			if (end == p)
				break;
			if (x > 0)
				v = x;
			p = end;
		}
	}
	free(buf);
	return (int)v;
}

/* ---- ELF objects ------------------------------------------------------------------- */

static bool elf_has_section(Elf *elf, const char *name, bool progbits)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (!gelf_getshdr(scn, &sh))
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && !strcmp(n, name) && (!progbits || sh.sh_type != SHT_NOBITS))
			return true;
	}
	return false;
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

static bool elf_has_dwarf(Elf *elf)
{
	return elf_has_section(elf, ".debug_info", true) || elf_has_section(elf, ".zdebug_info", true);
}

static char *build_id_hex(Elf *elf)
{
	const void *bid = NULL;
	ssize_t n = dwelf_elf_gnu_build_id(elf, &bid);
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
 * SHT_SYMTAB/SHT_DYNSYM in ELF. String reads go through elf_strptr, which checks that
 * the name lies inside its string table. */
static int collect_syms(struct syms *s, Elf *elf, bool want_symtab, bool want_dynsym, struct symvec *funcs,
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
		if (!((sh.sh_type == SHT_SYMTAB && want_symtab) || (sh.sh_type == SHT_DYNSYM && want_dynsym)))
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
			e.name = arena_strndup(s, name, strlen(name));
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

	err = collect_syms(s, o->elf, true, true, &funcs, &datas);
	if (!err && !main_symtab && o->dbg_elf)
		err = collect_syms(s, o->dbg_elf, true, false, &funcs, &datas);
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

static const struct esym *obj_lookup_func(const struct obj *o, uint64_t vaddr)
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
static int obj_off_to_vaddr(const struct obj *o, uint64_t off, bool exec, uint64_t *vaddr)
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

static int obj_vaddr_to_off(const struct obj *o, uint64_t vaddr, uint64_t *off)
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

static void obj_free(struct obj *o)
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
static Elf *debug_candidate(struct obj *o, int fd, const struct stat *main_st, bool check_crc, GElf_Word crc)
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
		while ((r = pread(fd, buf, sizeof(buf), off)) > 0) {
			c = crc32(c, buf, (uInt)r);
			off += r;
		}
		if (r < 0 || (GElf_Word)c != crc)
			goto reject;
	} else {
		goto reject;
	}
	if (!elf_has_dwarf(elf) && !elf_has_symtab(elf))
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
	elf = debug_candidate(o, fd, main_st, check_crc, crc);
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
			if (rootfd >= 0 && try_debug_fd(o, open_in_root(rootfd, cand), main_st, false, 0))
				return;
			if (try_debug_fd(o, open_host(cand), main_st, false, 0))
				return;
		}
	}
	link = dwelf_elf_gnu_debuglink(o->elf, &crc);
	if (!link || !*link || strchr(link, '/') || !path || path[0] != '/')
		return;
	slash = strrchr(path, '/');
	if (!fmt_path(dir, sizeof(dir), "%.*s", (int)(slash - path), path))
		return;
	if (rootfd >= 0) {
		if (fmt_path(cand, sizeof(cand), "%s/%s", dir, link) &&
		    try_debug_fd(o, open_in_root(rootfd, cand), main_st, true, crc))
			return;
		if (fmt_path(cand, sizeof(cand), "%s/.debug/%s", dir, link) &&
		    try_debug_fd(o, open_in_root(rootfd, cand), main_st, true, crc))
			return;
	}
	for (size_t i = 0; i < s->ndebug_dirs; i++) {
		if (!fmt_path(cand, sizeof(cand), "%s%s/%s", s->debug_dirs[i], dir, link))
			continue;
		if (rootfd >= 0 && try_debug_fd(o, open_in_root(rootfd, cand), main_st, true, crc))
			return;
		if (try_debug_fd(o, open_host(cand), main_st, true, crc))
			return;
	}
}

/* Take ownership of FD (an ELF file of the target) and return the cached object for it,
 * parsing it on first sight. NULL with errno set when it is not a usable ELF. */
static struct obj *obj_get(struct syms *s, int fd, int rootfd, const char *path)
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
		o->build_id = intern(s, bid);
		if (!o->build_id) {
			err = -ENOMEM;
			goto err_out;
		}
	}
	err = obj_load_phdrs(o);
	if (err)
		goto err_out;
	if (!elf_has_dwarf(o->elf) || !elf_has_symtab(o->elf))
		obj_find_debug(s, o, rootfd, path, &st);
	err = obj_load_syms(s, o);
	if (err)
		goto err_out;
	err = obj_insert(s, o);
	if (err)
		goto err_out;
	free(bid);
	return o;
err_out:
	free(bid);
	obj_free(o);
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	errno = -err;
	return NULL;
}

/* The vDSO is the same image in every process on this kernel, so ours stands in for the
 * target's: no file to open, nothing the target controls. */
static struct obj *vdso_obj(struct syms *s, uint64_t target_size)
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
	maps = read_proc_file(getpid(), "maps", MAPS_MAX_BYTES, &len);
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
	if (obj_load_phdrs(o) || obj_load_syms(s, o) || obj_insert(s, o))
		goto fail;
	s->vdso = o;
	s->vdso_size = size;
	goto out;
fail:
	obj_free(o);
out:
	/* A 32-bit target maps a different vDSO: only trust ours when the sizes agree. */
	if (s->vdso && target_size == s->vdso_size)
		return s->vdso;
	return NULL;
}

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

static Dwarf *obj_dwarf(struct obj *o)
{
	if (o->dw_tried)
		return o->dw;
	o->dw_tried = true;
	if (o->dbg_elf && elf_has_dwarf(o->dbg_elf))
		o->dw = dwarf_begin_elf(o->dbg_elf, DWARF_C_READ, NULL);
	if (!o->dw && elf_has_dwarf(o->elf))
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
	f->func = intern(s, dem ? dem : linkage);
	free(dem);
	f->sys_name = intern(s, linkage);
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
		fr->f[0].file = file ? intern(s, file) : NULL;
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
				f->func = f->sys_name = intern(s, "[inlined]");
			} else {
				err = -ENOMEM;
				goto out;
			}
		}
		f->file = pend[i].file ? intern(s, pend[i].file) : NULL;
		f->line = pend[i].line;
		if (dwarf_decl_line(&pend[i].die, &decl) == 0)
			f->start_line = decl;
		nf++;
	}
out:
	free(c);
	return err ? err : nf;
}

static struct frames *obj_frames(struct syms *s, struct obj *o, uint64_t vaddr)
{
	const struct esym *sym;
	struct frames fr = {0};
	uint64_t idx;
	int n;

	if (hmap__get(&o->cache, vaddr, 0, 0, &idx))
		return &o->fr[idx];
	sym = obj_lookup_func(o, vaddr);
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

/* ---- processes --------------------------------------------------------------------- */

static void proc_free(struct proc *p)
{
	if (!p)
		return;
	free(p->maps);
	free(p->jit);
	free(p);
}

static struct proc *proc_find(struct syms *s, int pid)
{
	uint64_t idx;

	return hmap__get(&s->proctab, (uint64_t)pid, 0, 0, &idx) ? s->procs[idx] : NULL;
}

static struct proc *proc_new(struct syms *s, int pid)
{
	struct proc *p;

	if (s->nprocs == s->capprocs) {
		size_t ncap = s->capprocs ? s->capprocs * 2 : 64;
		struct proc **np = realloc(s->procs, ncap * sizeof(*np));

		if (!np)
			return NULL;
		s->procs = np;
		s->capprocs = ncap;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	if (hmap__put(&s->proctab, (uint64_t)pid, 0, 0, s->nprocs)) {
		free(p);
		return NULL;
	}
	s->procs[s->nprocs++] = p;
	return p;
}

static const struct map *proc_find_map(const struct proc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->maps[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && addr < p->maps[lo - 1].end)
		return &p->maps[lo - 1];
	return NULL;
}

static const struct jit *proc_find_jit(const struct proc *p, uint64_t addr)
{
	const struct jit *best = NULL;
	size_t lo = 0, hi = p->njit;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->jit[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* JITs reuse code space: among overlapping entries the latest line wins. */
	for (size_t i = lo, tries = 0; i > 0 && tries < JIT_SCAN_BACK; i--, tries++) {
		const struct jit *j = &p->jit[i - 1];

		if (addr < j->end && (!best || j->seq > best->seq))
			best = j;
	}
	return best;
}

static int jit_cmp(const void *a, const void *b)
{
	const struct jit *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void pr_warn_syms(int pid, const char *path, int err)
{
	pr_warn("pid %d: not reading its %s: %s; its JIT frames stay unnamed", pid, path,
		err == -ELOOP	 ? "a symlink, not the process's own file"
		: err == -EPERM	 ? "the file does not belong to the process's user"
		: err == -EINVAL ? "not a regular file"
				 : strerror(-err));
}

/* Read /tmp/perf-NSPID.map inside the target's root. JITs append to it, so only the part
 * past what we already parsed is read, up to its last complete line. */
static int proc_load_perfmap(struct syms *s, struct proc *p, int rootfd)
{
	struct procroot_rule own = {0};
	char path[64];
	struct stat st;
	char *buf = NULL;
	size_t cap = 0, len = 0, used;
	int fd, err = 0;
	size_t added = 0;

	if (!p->nspid)
		p->nspid = proc_nspid(p->pid);
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", p->nspid);
	/* As the target would have written it: its own regular file, reached through no
	 * symlink. Anything else there (a link to a root-only file, a FIFO, a device) is
	 * not the target's perf map, and must not become symbol names in a profile. */
	if (procroot__target_uids(p->pid, &own))
		return 0;
	own.no_symlinks = true;
	fd = procroot__open_at(rootfd, path, &own);
	if (fd < 0) {
		if (fd != -ENOENT && !p->pm_refused)
			pr_warn_syms(p->pid, path, fd);
		p->pm_refused = fd != -ENOENT;
		return 0;
	}
	if (fstat(fd, &st))
		goto out;
	if (st.st_dev != p->pm_dev || st.st_ino != p->pm_ino || st.st_size < p->pm_off) {
		p->njit = 0;
		p->pm_off = 0;
		p->pm_dev = st.st_dev;
		p->pm_ino = st.st_ino;
	}
	if (st.st_size == p->pm_off || st.st_size - p->pm_off > (off_t)PERFMAP_MAX_BYTES)
		goto out;
	cap = (size_t)(st.st_size - p->pm_off);
	buf = malloc(cap);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	while (len < cap) {
		ssize_t r = pread(fd, buf + len, cap - len, p->pm_off + (off_t)len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	used = 0;
	for (char *q = buf, *end = buf + len; q < end;) {
		char *nl = memchr(q, '\n', (size_t)(end - q));
		uint64_t start, size;
		const char *name;
		size_t nlen;

		if (!nl)
			break; /* a line still being written: next time */
		if (!perfmap__parse_line(q, (size_t)(nl - q), &start, &size, &name, &nlen)) {
			if (p->njit % 1024 == 0) {
				struct jit *nj = realloc(p->jit, (p->njit + 1024) * sizeof(*nj));

				if (!nj) {
					err = -ENOMEM;
					goto out;
				}
				p->jit = nj;
			}
			name = arena_strndup(s, name, nlen > 1024 ? 1024 : nlen);
			if (!name) {
				err = -ENOMEM;
				goto out;
			}
			p->jit[p->njit++] = (struct jit){start, start + size, name, p->jit_seq++};
			added++;
		}
		q = nl + 1;
		used = (size_t)(q - buf);
	}
	p->pm_off += (off_t)used;
	if (added)
		qsort(p->jit, p->njit, sizeof(*p->jit), jit_cmp);
out:
	free(buf);
	close(fd);
	return err;
}

static bool same_mapping(const struct map *a, const struct procmaps_entry *e, const char *path)
{
	return a->start == e->start && a->end == e->end && a->pgoff == e->offset && a->ino == e->inode &&
	       a->dev_major == e->dev_major && a->dev_minor == e->dev_minor && a->path == path;
}

static int map_cmp(const void *a, const void *b)
{
	const struct map *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

static struct obj *open_mapping(struct syms *s, int pid, int rootfd, const struct map *m)
{
	char mf[96];
	int fd;

	if (!strcmp(m->path, "[vdso]"))
		return vdso_obj(s, m->end - m->start);
	if (!m->file)
		return NULL;
	/* map_files names exactly the inode mapped, even if deleted or replaced since. */
	snprintf(mf, sizeof(mf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, m->start, m->end);
	fd = open_host(mf);
	if (fd < 0 && !m->deleted) {
		/* By path: only the very file mapped (the target may have put another, or a
		 * symlink to one it cannot read, at that path since). */
		struct procroot_rule same = {.same_file = true, .ino = (ino_t)m->ino};

		fd = procroot__open_at(rootfd, m->path, &same);
	}
	if (fd < 0)
		return NULL;
	return obj_get(s, fd, rootfd, m->path);
}

int syms__track_pid(struct syms *s, int pid)
{
	struct map *nm = NULL;
	size_t nn = 0, capn = 0, len = 0;
	char *buf = NULL, root[64];
	struct proc *p;
	uint64_t h, st;
	int rootfd = -1, err = 0;

	if (!s || pid <= 0)
		return -EINVAL;
	buf = read_proc_file(pid, "maps", MAPS_MAX_BYTES, &len);
	if (!buf)
		return errno == ENOENT || errno == ESRCH ? -ESRCH : -errno;
	if (!len) {
		/* zombies and kernel threads: nothing to symbolize */
		err = -ESRCH;
		goto out;
	}
	st = proc_starttime(pid);
	p = proc_find(s, pid);
	if (!p) {
		p = proc_new(s, pid);
		if (!p) {
			err = -ENOMEM;
			goto out;
		}
	} else if (st && p->starttime && st != p->starttime) {
		/* The pid was reused: the old snapshot describes another program. */
		p->nmaps = 0;
		p->nspid = 0;
		p->njit = 0;
		p->pm_off = 0;
		p->pm_ino = 0;
		p->have_hash = false;
	}
	p->starttime = st;
	{
		struct stat exe;

		snprintf(root, sizeof(root), "/proc/%d/exe", pid);
		p->exe_ino = stat(root, &exe) == 0 ? exe.st_ino : 0;
	}
	snprintf(root, sizeof(root), "/proc/%d/root", pid);
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		err = errno == ENOENT ? -ESRCH : -errno;
		goto out;
	}
	h = htab__bytes(buf, len);
	if (p->have_hash && h == p->maps_hash)
		goto perfmap;

	for (char *q = buf, *end = buf + len; q < end;) {
		char *nl = memchr(q, '\n', (size_t)(end - q));
		char *le = nl ? nl : end;
		struct procmaps_entry e;
		struct map m = {0};

		if (procmaps__parse_line(q, (size_t)(le - q), &e))
			goto next;
		if (nn == capn) {
			size_t ncap = capn ? capn * 2 : 256;
			struct map *t = realloc(nm, ncap * sizeof(*t));

			if (!t) {
				err = -ENOMEM;
				goto out;
			}
			nm = t;
			capn = ncap;
		}
		m.start = e.start;
		m.end = e.end;
		m.pgoff = e.offset;
		m.ino = e.inode;
		m.dev_major = e.dev_major;
		m.dev_minor = e.dev_minor;
		m.exec = e.exec;
		m.deleted = e.deleted;
		m.file = procmaps__is_file(&e);
		if (e.path) {
			m.path = intern_n(s, e.path, e.path_len);
			if (!m.path) {
				err = -ENOMEM;
				goto out;
			}
		}
		for (size_t i = 0; i < p->nmaps; i++)
			if (same_mapping(&p->maps[i], &e, m.path)) {
				m.obj = p->maps[i].obj;
				break;
			}
		if (!m.obj && m.exec && m.path) {
			/* the same file mapped twice (or its other segments): open it once */
			for (size_t i = 0; i < nn && m.file; i++)
				if (nm[i].obj && nm[i].ino == m.ino && nm[i].dev_major == m.dev_major &&
				    nm[i].dev_minor == m.dev_minor && nm[i].path == m.path) {
					m.obj = nm[i].obj;
					break;
				}
			if (!m.obj)
				m.obj = open_mapping(s, pid, rootfd, &m);
		}
		nm[nn++] = m;
	next:
		q = le + 1;
	}
	/* Non-executable segments of an object we opened (its .rodata, its ELF header). */
	for (size_t i = 0; i < nn; i++) {
		if (nm[i].obj || !nm[i].file)
			continue;
		for (size_t j = 0; j < nn; j++)
			if (nm[j].obj && nm[j].file && nm[j].ino == nm[i].ino && nm[j].dev_major == nm[i].dev_major &&
			    nm[j].dev_minor == nm[i].dev_minor && nm[j].path == nm[i].path) {
				nm[i].obj = nm[j].obj;
				break;
			}
	}
	/* Keep old mappings nothing new overlaps: a library dlclose'd since may still own
	 * addresses sampled earlier. */
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct map *o = &p->maps[i];
		bool overlap = false;

		for (size_t j = 0; j < nn && !overlap; j++)
			overlap = o->start < nm[j].end && nm[j].start < o->end;
		if (overlap)
			continue;
		if (nn == capn) {
			size_t ncap = capn ? capn * 2 : 256;
			struct map *t = realloc(nm, ncap * sizeof(*t));

			if (!t) {
				err = -ENOMEM;
				goto out;
			}
			nm = t;
			capn = ncap;
		}
		nm[nn++] = *o;
	}
	if (nn) {
		struct map *fit = realloc(nm, nn * sizeof(*nm));

		/* Kept for the whole recording, for each of possibly thousands of processes:
		 * no room to spare. */
		if (fit)
			nm = fit;
		qsort(nm, nn, sizeof(*nm), map_cmp);
	}
	free(p->maps);
	p->maps = nm;
	p->nmaps = nn;
	nm = NULL;
	p->maps_hash = h;
	p->have_hash = true;
	p->retried = false;
perfmap:
	err = proc_load_perfmap(s, p, rootfd);
out:
	if (rootfd >= 0)
		close(rootfd);
	free(nm);
	free(buf);
	return err;
}

int syms__main_mapping(struct syms *s, int pid, struct sym_result *out)
{
	struct proc *p = s ? proc_find(s, pid) : NULL;

	if (!p || !p->exe_ino || !out)
		return -ENOENT;
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct map *m = &p->maps[i];

		if (m->exec && m->path && m->ino == (uint64_t)p->exe_ino) {
			out->module = m->path;
			out->build_id = m->obj ? m->obj->build_id : NULL;
			out->map_start = m->start;
			out->map_limit = m->end;
			out->map_offset = m->pgoff;
			out->main_exe = true;
			return 0;
		}
	}
	return -ENOENT;
}

/* ---- resolution -------------------------------------------------------------------- */

static int fill_fallback(struct syms *s, struct sym_result *out, const char *module, const char *label, uint64_t rel)
{
	out->module = module;
	out->rel_addr = rel;
	out->resolved = false;
	out->nframes = 1;
	out->frames[0].func = internf(s, "%s+0x%" PRIx64, label, rel);
	out->frames[0].sys_name = out->frames[0].func;
	return out->frames[0].func ? 0 : -ENOMEM;
}

static int fill_unknown(struct syms *s, uint64_t addr, struct sym_result *out)
{
	const char *u = intern(s, "[unknown]");

	if (!u)
		return -ENOMEM;
	return fill_fallback(s, out, u, u, addr);
}

int syms__resolve_user(struct syms *s, int pid, uint64_t addr, struct sym_result *out)
{
	const struct map *m = NULL;
	const struct jit *j;
	struct frames *fr;
	struct proc *p;
	uint64_t vaddr;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!s)
		return -EINVAL;
	p = proc_find(s, pid);
	if (!p) {
		syms__track_pid(s, pid);
		p = proc_find(s, pid);
	}
	if (!p)
		return fill_unknown(s, addr, out);
	m = proc_find_map(p, addr);
	if (!m && !p->retried) {
		/* Maybe dlopen'd since the last snapshot: look once more while it lives. */
		p->retried = true;
		if (!syms__track_pid(s, pid))
			m = proc_find_map(p, addr);
		p->retried = true;
	}
	if (m && m->obj && !obj_off_to_vaddr(m->obj, addr - m->start + m->pgoff, m->exec, &vaddr)) {
		out->module = m->path;
		out->build_id = m->obj->build_id;
		out->map_start = m->start;
		out->map_limit = m->end;
		out->map_offset = m->pgoff;
		out->main_exe = p->exe_ino && m->ino == (uint64_t)p->exe_ino;
		fr = obj_frames(s, m->obj, vaddr);
		if (!fr)
			return -ENOMEM;
		if (fr->resolved) {
			out->rel_addr = vaddr;
			out->resolved = true;
			out->nframes = fr->n;
			memcpy(out->frames, fr->f, sizeof(out->frames));
			return 0;
		}
		return fill_fallback(s, out, m->path, base_name(m->path), vaddr);
	}
	j = proc_find_jit(p, addr);
	if (j) {
		out->module = intern(s, "[perf-map]");
		out->map_start = m ? m->start : j->start;
		out->map_limit = m ? m->end : j->end;
		out->rel_addr = addr - j->start;
		out->resolved = true;
		out->nframes = 1;
		out->frames[0].func = out->frames[0].sys_name = intern(s, j->name);
		return out->module && out->frames[0].func ? 0 : -ENOMEM;
	}
	if (m && m->path) {
		out->map_start = m->start;
		out->map_limit = m->end;
		out->map_offset = m->pgoff;
		/* No ELF to translate through: the file offset is the next best coordinate. */
		if (m->file)
			return fill_fallback(s, out, m->path, base_name(m->path), addr - m->start + m->pgoff);
		return fill_fallback(s, out, m->path, m->path, addr - m->start);
	}
	return fill_unknown(s, addr, out);
}

int syms__resolve_kernel(struct syms *s, uint64_t addr, struct sym_result *out)
{
	const struct ksym *k;
	const char *mod;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!s)
		return -EINVAL;
	if (!s->ksyms_tried) {
		s->ksyms_tried = true;
		s->ksyms = kallsyms__load("/proc/kallsyms");
	}
	mod = intern(s, "[kernel.kallsyms]");
	if (!mod)
		return -ENOMEM;
	k = kallsyms__lookup(s->ksyms, addr);
	if (!k)
		return fill_fallback(s, out, mod, mod, addr);
	out->module = mod;
	out->rel_addr = addr;
	out->resolved = true;
	out->nframes = 1;
	out->frames[0].sys_name = intern(s, k->name);
	out->frames[0].func = k->mod ? internf(s, "%s [%s]", k->name, k->mod) : out->frames[0].sys_name;
	return out->frames[0].func && out->frames[0].sys_name ? 0 : -ENOMEM;
}

static bool sym_name_matches(const char *symname, const char *name, size_t nlen)
{
	/* .symtab may spell versioned definitions "name@@VER" */
	return !strncmp(symname, name, nlen) && (symname[nlen] == '\0' || symname[nlen] == '@');
}

int syms__find_symbol(struct syms *s, int pid, const char *name, const char **path, uint64_t *file_offset)
{
	struct proc *p;
	size_t nlen;
	int err;

	if (!s || !name || !*name || !path || !file_offset)
		return -EINVAL;
	p = proc_find(s, pid);
	if (!p) {
		err = syms__track_pid(s, pid);
		if (err)
			return err;
		p = proc_find(s, pid);
		if (!p)
			return -ESRCH;
	}
	nlen = strlen(name);
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct map *m = &p->maps[i];
		bool seen = false;

		if (!m->obj || !m->file || !m->exec)
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = p->maps[j].obj == m->obj && p->maps[j].exec;
		if (seen)
			continue;
		for (size_t k = 0; k < m->obj->nbyname; k++) {
			const struct esym *e = &m->obj->byname[k];
			uint64_t off;

			if (!sym_name_matches(e->name, name, nlen) || obj_vaddr_to_off(m->obj, e->addr, &off))
				continue;
			/* a deleted file is only reachable through map_files */
			if (m->deleted)
				*path = internf(s, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, m->start, m->end);
			else
				*path = internf(s, "/proc/%d/root%s", pid, m->path);
			if (!*path)
				return -ENOMEM;
			*file_offset = off;
			return 0;
		}
	}
	return -ENOENT;
}

/* ---- lifecycle --------------------------------------------------------------------- */

int syms__set_debug_dirs(struct syms *s, const char *dirs)
{
	char **nd = NULL, *copy = NULL, *tok, *save = NULL;
	size_t n = 0;
	int err = 0;

	if (!s || !dirs)
		return -EINVAL;
	copy = strdup(dirs);
	nd = calloc(strlen(dirs) / 2 + 2, sizeof(*nd));
	if (!copy || !nd) {
		err = -ENOMEM;
		goto out;
	}
	for (tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
		size_t l = strlen(tok);

		while (l > 1 && tok[l - 1] == '/')
			tok[--l] = '\0';
		if (tok[0] != '/')
			continue; /* relative dirs would depend on our cwd, and mean nothing in a root */
		nd[n] = strdup(tok);
		if (!nd[n]) {
			err = -ENOMEM;
			goto out;
		}
		n++;
	}
	for (size_t i = 0; i < s->ndebug_dirs; i++)
		free(s->debug_dirs[i]);
	free(s->debug_dirs);
	s->debug_dirs = nd;
	s->ndebug_dirs = n;
	nd = NULL;
out:
	if (nd)
		for (size_t i = 0; i < n; i++)
			free(nd[i]);
	free(nd);
	free(copy);
	return err;
}

struct syms *syms__new(void)
{
	struct syms *s;
	int err;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = ENOTSUP;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	err = syms__set_debug_dirs(s, DEFAULT_DEBUG_DIRS);
	if (err) {
		syms__free(s);
		errno = -err;
		return NULL;
	}
	return s;
}

void syms__free(struct syms *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nprocs; i++)
		proc_free(s->procs[i]);
	free(s->procs);
	hmap__clear(&s->proctab);
	for (size_t i = 0; i < s->nobjs; i++)
		obj_free(s->objs[i]);
	free(s->objs);
	htab__clear(&s->objtab);
	free(s->strs);
	htab__clear(&s->strtab);
	for (size_t i = 0; i < s->ndebug_dirs; i++)
		free(s->debug_dirs[i]);
	free(s->debug_dirs);
	kallsyms__free(s->ksyms);
	while (s->arena) {
		struct arena_chunk *next = s->arena->next;

		free(s->arena);
		s->arena = next;
	}
	free(s);
}
