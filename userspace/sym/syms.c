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

#include "syms_int.h"

/* ---- strings ----------------------------------------------------------------------- */

size_t syms__string_bytes(const struct syms *s)
{
	size_t n = 0;

	for (const struct arena_chunk *c = s ? s->arena : NULL; c; c = c->next)
		n += c->used;
	return n;
}

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

char *sy_arena_strndup(struct syms *s, const char *str, size_t len)
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
const char *sy_intern_n(struct syms *s, const char *str, size_t len)
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
	p = sy_arena_strndup(s, str, len);
	if (!p)
		return NULL;
	s->strs[s->nstrs] = p;
	htab__fill(&s->strtab, slot, h, (uint32_t)s->nstrs++);
	return p;
}

const char *sy_intern(struct syms *s, const char *str)
{
	return str ? sy_intern_n(s, str, strlen(str)) : NULL;
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
	return sy_intern_n(s, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
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
int sy_open_in_root(int rootfd, const char *path)
{
	return procroot__open_at(rootfd, path, NULL);
}

int sy_open_host(const char *path)
{
	return procroot__open_host(path, NULL);
}

char *sy_read_proc_file(int pid, const char *name, size_t max, size_t *lenp)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	return readfile__path(path, max, false, lenp);
}

/* Field 22 of /proc/PID/stat: tells a reused pid from the process we tracked. */
uint64_t sy_proc_starttime(int pid)
{
	size_t len;
	char *buf = sy_read_proc_file(pid, "stat", STAT_MAX_BYTES, &len);
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
int sy_proc_nspid(int pid)
{
	size_t len;
	char *buf = sy_read_proc_file(pid, "status", STAT_MAX_BYTES, &len);
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
	const char *u = sy_intern(s, "[unknown]");

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
	p = sy_proc_find(s, pid);
	if (!p) {
		syms__track_pid(s, pid);
		p = sy_proc_find(s, pid);
	}
	if (!p)
		return fill_unknown(s, addr, out);
	m = sy_proc_find_map(p, addr);
	if (!m && !p->retried) {
		/* Maybe dlopen'd since the last snapshot: look once more while it lives. */
		p->retried = true;
		if (!syms__track_pid(s, pid))
			m = sy_proc_find_map(p, addr);
		p->retried = true;
	}
	if (m && m->obj && !sy_obj_off_to_vaddr(m->obj, addr - m->start + m->pgoff, m->exec, &vaddr)) {
		out->module = m->path;
		out->build_id = m->obj->build_id;
		out->map_start = m->start;
		out->map_limit = m->end;
		out->map_offset = m->pgoff;
		out->main_exe = p->exe_ino && m->ino == (uint64_t)p->exe_ino;
		fr = sy_obj_frames(s, m->obj, vaddr);
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
	j = sy_proc_find_jit(p, addr);
	if (j) {
		out->module = sy_intern(s, "[perf-map]");
		out->map_start = m ? m->start : j->start;
		out->map_limit = m ? m->end : j->end;
		out->rel_addr = addr - j->start;
		out->resolved = true;
		out->nframes = 1;
		out->frames[0].func = out->frames[0].sys_name = sy_intern(s, j->name);
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
	mod = sy_intern(s, "[kernel.kallsyms]");
	if (!mod)
		return -ENOMEM;
	k = kallsyms__lookup(s->ksyms, addr);
	if (!k)
		return fill_fallback(s, out, mod, mod, addr);
	out->module = mod;
	out->rel_addr = addr;
	out->resolved = true;
	out->nframes = 1;
	out->frames[0].sys_name = sy_intern(s, k->name);
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
	p = sy_proc_find(s, pid);
	if (!p) {
		err = syms__track_pid(s, pid);
		if (err)
			return err;
		p = sy_proc_find(s, pid);
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
		if (sy_obj_load_syms(s, m->obj) == -ENOMEM)
			return -ENOMEM;
		for (size_t k = 0; k < m->obj->nbyname; k++) {
			const struct esym *e = &m->obj->byname[k];
			uint64_t off;

			if (!sym_name_matches(e->name, name, nlen) || sy_obj_vaddr_to_off(m->obj, e->addr, &off))
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
		sy_proc_free(s->procs[i]);
	free(s->procs);
	hmap__clear(&s->proctab);
	for (size_t i = 0; i < s->nobjs; i++)
		sy_obj_free(s->objs[i]);
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
