// SPDX-License-Identifier: MIT
/* Symbolizer: processes: a snapshot of each target's mappings (re-read when they
 * change), the objects behind them, and its perf map (JIT symbols). */
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
#include "mapsnap.h"
#include "perfmap.h"
#include "procmaps.h"
#include "procroot.h"
#include "syms.h"

#include "syms_int.h"
#include "vec.h"

/* ---- processes --------------------------------------------------------------------- */

void sy_proc_free(struct proc *p)
{
	if (!p)
		return;
	free(p->maps);
	free(p->jit);
	free(p);
}

struct proc *sy_proc_find(struct syms *s, int pid)
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

const struct map *sy_proc_find_map(const struct proc *p, uint64_t addr)
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

const struct jit *sy_proc_find_jit(const struct proc *p, uint64_t addr)
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
		p->nspid = sy_proc_nspid(p->pid);
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
			size_t strs = s->nstrs, keep = nlen > 1024 ? 1024 : nlen;

			/* The file is the target's: rewritten shorter before each read, it was read
			 * anew each time, and its names went into memory kept for the recording
			 * (96 MiB more a round, without end). Names are interned (a rewrite of the
			 * same lines adds nothing), and a process's new ones stop at
			 * PERFMAP_MAX_BYTES over its life, its entries at PERFMAP_MAX_ENTRIES. */
			if (p->jit_bytes > PERFMAP_MAX_BYTES || p->njit >= PERFMAP_MAX_ENTRIES)
				break;
			if (p->njit % 1024 == 0) {
				struct jit *nj = realloc(p->jit, (p->njit + 1024) * sizeof(*nj));

				if (!nj) {
					err = -ENOMEM;
					goto out;
				}
				p->jit = nj;
			}
			name = sy_intern_n(s, name, keep);
			if (!name) {
				err = -ENOMEM;
				goto out;
			}
			if (s->nstrs > strs)
				p->jit_bytes += keep + 1;
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

/* The mapping of P that starts at START (P's maps are sorted and never overlap), or NULL. */
static const struct map *old_at(const struct proc *p, uint64_t start)
{
	size_t lo = 0, hi = p->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->maps[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < p->nmaps && p->maps[lo].start == start ? &p->maps[lo] : NULL;
}

/* Does any of NM[0..N) (sorted, never overlapping) overlap [START, END)? */
static bool overlaps(const struct map *nm, size_t n, uint64_t start, uint64_t end)
{
	size_t lo = 0, hi = n;

	/* the last one that starts before END ends the latest of those that could */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (nm[mid].start < end)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && nm[lo - 1].end > start;
}

/* A file's object by its device, inode and path, in FILES. */
static struct obj *file_obj(const struct hmap *files, const struct map *m)
{
	uint64_t v;

	return hmap__get(files, (uint64_t)m->dev_major << 32 | m->dev_minor, m->ino, (uint64_t)(uintptr_t)m->path, &v)
		   ? (struct obj *)(uintptr_t)v
		   : NULL;
}

static struct obj *open_mapping(struct syms *s, int pid, int rootfd, const struct map *m)
{
	char mf[96];
	int fd;

	if (!strcmp(m->path, "[vdso]"))
		return sy_vdso_obj(s, m->end - m->start);
	if (!m->file)
		return NULL;
	/* map_files names exactly the inode mapped, even if deleted or replaced since. */
	snprintf(mf, sizeof(mf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, m->start, m->end);
	fd = sy_open_host(mf);
	if (fd < 0 && !m->deleted) {
		/* By path: only the very file mapped (the target may have put another, or a
		 * symlink to one it cannot read, at that path since). */
		struct procroot_rule same = {.same_file = true, .ino = (ino_t)m->ino};

		fd = procroot__open_at(rootfd, m->path, &same);
	}
	if (fd < 0)
		return NULL;
	return sy_obj_get(s, fd, rootfd, m->path);
}

int syms__track_pid(struct syms *s, int pid)
{
	struct map *nm = NULL;
	struct hmap files = {0}; /* (dev, inode, path) -> the object opened for it */
	size_t nn = 0, nnew, capn = 0, len = 0;
	char *buf = NULL, root[64];
	struct proc *p;
	uint64_t h, st;
	int rootfd = -1, err = 0;

	if (!s || pid <= 0)
		return -EINVAL;
	buf = mapsnap__read(pid, MAPS_MAX_BYTES, false, &len);
	if (!buf)
		return errno == ENOENT || errno == ESRCH ? -ESRCH : -errno;
	if (!len) {
		/* zombies and kernel threads: nothing to symbolize */
		err = -ESRCH;
		goto out;
	}
	st = sy_proc_starttime(pid);
	p = sy_proc_find(s, pid);
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
		err = vec__grow((void **)&nm, &capn, nn + 1, sizeof(*nm));
		if (err)
			goto out;
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
			m.path = sy_intern_n(s, e.path, e.path_len);
			if (!m.path) {
				err = -ENOMEM;
				goto out;
			}
		}
		/* Lookups, not scans: a CUDA job maps thousands of regions, and a process gpubpf
		 * started waits for this at each of its loads (3000 mappings: 13 ms a load when
		 * each was compared with each, dev VM). */
		{
			const struct map *old = old_at(p, e.start);

			if (old && same_mapping(old, &e, m.path))
				m.obj = old->obj;
		}
		if (!m.obj && m.exec && m.path) {
			/* the same file mapped twice (or its other segments): open it once */
			if (m.file)
				m.obj = file_obj(&files, &m);
			if (!m.obj)
				m.obj = open_mapping(s, pid, rootfd, &m);
		}
		if (m.obj && m.file && !file_obj(&files, &m) &&
		    hmap__put(&files, (uint64_t)m.dev_major << 32 | m.dev_minor, m.ino, (uint64_t)(uintptr_t)m.path,
			      (uint64_t)(uintptr_t)m.obj)) {
			err = -ENOMEM;
			goto out;
		}
		nm[nn++] = m;
	next:
		q = le + 1;
	}
	/* Non-executable segments of an object we opened (its .rodata, its ELF header). */
	for (size_t i = 0; i < nn; i++)
		if (!nm[i].obj && nm[i].file)
			nm[i].obj = file_obj(&files, &nm[i]);
	/* Keep old mappings nothing new overlaps: a library dlclose'd since may still own
	 * addresses sampled earlier. (The kernel lists mappings in order; sorted all the same.) */
	nnew = nn;
	if (nnew)
		qsort(nm, nnew, sizeof(*nm), map_cmp);
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct map *o = &p->maps[i];

		if (overlaps(nm, nnew, o->start, o->end))
			continue;
		err = vec__grow((void **)&nm, &capn, nn + 1, sizeof(*nm));
		if (err)
			goto out;
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
	hmap__clear(&files);
	free(nm);
	free(buf);
	return err;
}

int syms__main_mapping(struct syms *s, int pid, struct sym_result *out)
{
	struct proc *p = s ? sy_proc_find(s, pid) : NULL;

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
