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
#include "mapsnap.h"
#include "procmaps.h"
#include "procroot.h"
#include "procs.h"
#include "python.h"
#include "session.h"

#include "python_int.h"
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

/* ---- detection ---- */

struct py_pid *py_pid_get(struct python *py, int pid, bool create)
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

void py_say(struct python *py, int pid, const char *what)
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
	char *buf, *line, *save = NULL, msg[256];
	struct py_pid *pp;
	struct py_syms ps;
	struct py_proc v = {0};
	const char *why = "not a Python process (no CPython interpreter mapped): native stacks only";
	bool first = true, found = false;
	int err, nfiles = 0;

	if (!py || pid <= 0)
		return -EINVAL;
	pp = py_pid_get(py, pid, true);
	if (!pp)
		return -ENOMEM;
	buf = mapsnap__read(pid, PY_MAPS_MAX, true, NULL);
	if (!buf)
		return 0; /* gone */
	/* The interpreter is the main executable (static) or a libpython: look at the
	 * first executable mapping and at objects named like python. */
	for (line = strtok_r(buf, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
		struct procmaps_entry e;
		char obj[4096];
		struct stat stt;
		size_t len = strlen(line);
		int fd;

		if (!procmaps__maybe_exec(line, len) || procmaps__parse_line(line, len, &e) || !e.exec ||
		    !procmaps__is_file(&e))
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
		if (fstat(fd, &stt) == 0 && py_scan_file(py, fd, &stt, e.start, e.offset, &ps) == 0) {
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
		py_read_maps(pp);
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
		py_say(py, pid, msg);
	else if (nfiles >= 3)
		pr_debug("pid %d: %s", pid, why); /* a native program: nothing to tell the user */
	return 0;
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
	hmap_for_each(&py->codes, e) py_code_free((struct py_code *)(uintptr_t)e->val);
	hmap__clear(&py->pids);
	hmap__clear(&py->codes);
	hmap__clear(&py->locs);
	hmap__clear(&py->roots);
	py_scans_clear(py);
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
	python__track(ctx, pid); /* in procs.c's scope: its maps read once for every reader */
}

/* Outside an event: the maps python__track and py_read_maps read, read once (mapsnap.h). */
static void track_once(struct python *py, int pid)
{
	mapsnap__begin();
	python__track(py, pid);
	mapsnap__end();
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
	pp = py_pid_get(py, (int)st.tgid, false);
	if (!pp || !pp->python)
		return 0;
	for (uint32_t i = 0; i < st.depth; i++)
		if (st.frames[i].code)
			py_code_get(py, pp, st.frames[i].code);
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
			track_once(s->py, pids[i]);
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
	if (py && !py_pid_get(py, pid, false))
		track_once(py, pid);
}

void python__stats(const struct python *py, struct python_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (py)
		*out = py->st;
}
