/* SPDX-License-Identifier: MIT */
/* The symbolizer's insides, shared by its files: syms.c (strings, files, resolution,
 * lifecycle), syms_obj.c (ELF objects, their symbols and debug files), syms_dwarf.c
 * (DWARF lines and inlines), syms_proc.c (per-process mappings and perf maps). Not for
 * use outside sym/: syms.h is the contract. What these files share carries the sy_
 * prefix. */
#ifndef GPUBPF_SYMS_INT_H
#define GPUBPF_SYMS_INT_H

#include <elfutils/libdw.h>
#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "hmap.h"
#include "procmaps.h"
#include "syms.h"

#define MAPS_MAX_BYTES (64u << 20)
#define PERFMAP_MAX_BYTES (256u << 20)
#define PERFMAP_MAX_ENTRIES (8u << 20)
#define STAT_MAX_BYTES (64u << 10)
#define ELF_MAX_PHDRS 1024
#define ELF_MAX_SYMS (32u << 20)
#define DWARF_MAX_CU_RANGES (16u << 20)
#define DWARF_MAX_DEPTH 64
#define DEBUGLINK_MAX_BYTES (4ull << 30)
#define DEBUGLINK_SECTION_MAX 4096 /* .gnu_debuglink: a file name and a CRC */
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
	bool syms_tried; /* funcs and byname read (sy_obj_load_syms), or tried */
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
	off_t pm_off;	  /* bytes of the perf map already parsed (it is append-only) */
	size_t jit_bytes; /* new names its perf maps added, over its life (PERFMAP_MAX_BYTES) */
	bool pm_refused;  /* its perf map was refused, and said so */
	ino_t exe_ino;	  /* /proc/PID/exe's inode: its mapping is the program's */
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

/* ---- syms.c ---- */

char *sy_arena_strndup(struct syms *s, const char *str, size_t len);
const char *sy_intern_n(struct syms *s, const char *str, size_t len);
const char *sy_intern(struct syms *s, const char *str);
int sy_open_in_root(int rootfd, const char *path);
int sy_open_host(const char *path);
char *sy_read_proc_file(int pid, const char *name, size_t max, size_t *lenp);
uint64_t sy_proc_starttime(int pid);
int sy_proc_nspid(int pid);

/* ---- syms_obj.c ---- */

bool sy_elf_has_dwarf(Elf *elf);
const struct esym *sy_obj_lookup_func(const struct obj *o, uint64_t vaddr);
int sy_obj_off_to_vaddr(const struct obj *o, uint64_t off, bool exec, uint64_t *vaddr);
int sy_obj_vaddr_to_off(const struct obj *o, uint64_t vaddr, uint64_t *off);
void sy_obj_free(struct obj *o);
Elf *sy_debug_candidate(struct obj *o, int fd, const struct stat *main_st, bool check_crc, GElf_Word crc);
struct obj *sy_obj_get(struct syms *s, int fd, int rootfd, const char *path);
/* O's symbol tables, read at its first lookup, not when it is first mapped: a process
 * gpubpf started is held while its new objects are opened (procs.c), and a library of
 * 60,000 exported functions took 40 ms of a 100 ms hold to read them. The object's file
 * stays open, so they can be read after the process is gone. 0 or a negative errno (the
 * object then has none). */
int sy_obj_load_syms(struct syms *s, struct obj *o);
struct obj *sy_vdso_obj(struct syms *s, uint64_t target_size);

/* ---- syms_dwarf.c ---- */

#define SY_LIBDW_SAFE 192 /* the first 0.x read safely */
bool sy_libdw_version_safe(const char *version);

struct frames *sy_obj_frames(struct syms *s, struct obj *o, uint64_t vaddr);

/* ---- syms_proc.c ---- */

void sy_proc_free(struct proc *p);
struct proc *sy_proc_find(struct syms *s, int pid);
const struct map *sy_proc_find_map(const struct proc *p, uint64_t addr);
const struct jit *sy_proc_find_jit(const struct proc *p, uint64_t addr);

#endif /* GPUBPF_SYMS_INT_H */
