// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cuda.h"
#include "cuda.skel.h"
#include "cuda_api.h"
#include "cuda_int.h"
#include "demangle.h"
#include "elfsym.h"
#include "hmap.h"
#include "links.h"
#include "log.h"
#include "objscan.h"
#include "python.h"
#include "procs.h"
#include "stacks.h"
#include "trace.h"
#include "umulti.h"
#include "windows.h"

#define MAX_SCAN_PIDS 4096

static void on_change(void *ctx, int pid);
static void on_exit_pid(void *ctx, int pid);

bool cuda__windowed(const struct cuda_tracer *c)
{
	return c->multi;
}

static void cobj_free(struct cobj *o)
{
	if (!o)
		return;
	for (int g = 0; g < CG__COUNT; g++) {
		for (int r = 0; r <= 1; r++) {
			if (o->link[g][r] >= 0)
				close(o->link[g][r]);
			free(o->offs[g][r]);
			free(o->cookies[g][r]);
		}
	}
	if (o->fd >= 0)
		close(o->fd);
	free(o);
}

/* A name for a launch handle from another source (the injection library's CUPTI). */
static void learn_name(void *ctx, uint32_t tgid, uint64_t handle, const char *mangled)
{
	struct cuda_tracer *c = ctx;
	char *name;

	if (!handle || !mangled || !*mangled || hmap__get(&c->names, tgid, handle, 0, NULL))
		return;
	name = strdup(mangled);
	if (!name)
		return;
	if (hmap__put(&c->names, tgid, handle, 0, (uint64_t)(uintptr_t)name)) {
		free(name);
		return;
	}
	pr_debug("pid %u: launch handle %#" PRIx64 " is %s (CUPTI)", tgid, handle, mangled);
}

static int on_event(void *ctx, void *data, size_t len)
{
	struct cuda_tracer *c = ctx;
	const struct cuda_event *e = data;
	char *name;

	/* name events come at the length of their name */
	if (len < offsetof(struct cuda_event, name))
		return 0;
	switch (e->type) {
	case CUDA_EV_FUNC_NAME:
		if (len <= offsetof(struct cuda_event, name))
			return 0;
		name = strndup(e->name, len - offsetof(struct cuda_event, name));
		if (!name)
			return -ENOMEM;
		{
			uint64_t old;

			if (hmap__get(&c->names, e->tgid, e->handle, 0, &old))
				free((char *)(uintptr_t)old);
		}
		pr_debug("pid %u: CUDA function %#" PRIx64 " is %s", e->tgid, (uint64_t)e->handle, name);
		return hmap__put(&c->names, e->tgid, e->handle, 0, (uint64_t)(uintptr_t)name);
	case CUDA_EV_KERNEL_FUNC:
		return hmap__put(&c->kfuncs, e->tgid, e->handle, 1, e->other);
	case CUDA_EV_RT_KERNEL:
		return hmap__put(&c->rtkernels, e->tgid, e->handle, 2, e->other);
	}
	return 0;
}

/* --trace: one call with its time, kept in the timeline up to --max-events. */
static int on_call(void *ctx, void *data, size_t len)
{
	struct cuda_tracer *c = ctx;
	const struct cuda_call_event *e = data;
	struct prof_label l[SESSION_LABELS];
	struct trace_event ev = {0};

	if (len < sizeof(*e) || e->api >= (uint32_t)cuda_num_apis)
		return 0;
	if (trace__num_events(c->timeline) >= c->s->opts->max_events) {
		c->trace_dropped++;
		return 0;
	}
	ev.kind = TRACE_API;
	ev.name = cuda_apis[e->api].name;
	ev.pid = (int)e->tgid;
	ev.tid = (int)e->tid;
	if (session__labels(c->s, e->tgid, e->tid, l) == 0) {
		ev.thread_name = l[2].str;
		ev.process_name = l[3].str;
	}
	ev.stream = e->stream;
	ev.start_ns = e->start_ns;
	ev.dur_ns = e->dur_ns;
	ev.bytes = e->bytes;
	if (trace__add(c->timeline, &ev) == 0)
		c->trace_calls++;
	else
		c->trace_dropped++;
	return 0;
}

struct cuda_tracer *cuda__new(struct session *s, int targets_fd, int comms_fd)
{
	struct cuda_tracer *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return NULL;
	c->s = s;
	pthread_mutex_init(&c->lock, NULL);
	c->skel = cuda_bpf__open();
	if (!c->skel) {
		err = -errno;
		pr_err("cannot open the CUDA tracing BPF object: %s", strerror(-err));
		goto fail;
	}
	SESSION_SET_RODATA(c->skel->rodata, s);
	c->multi = umulti__supported() && !getenv("GPUBPF_NO_UPROBE_MULTI");
	c->trace = s->opts->trace;
	if (c->trace) {
		c->timeline = trace__new();
		if (!c->timeline) {
			err = -errno;
			goto fail;
		}
		c->skel->rodata->trace_calls = true;
		/* ~70 bytes an event: room for 200k calls between two polls. */
		bpf_map__set_max_entries(c->skel->maps.call_events, 16u << 20);
	}
	bpf_program__set_autoload(c->skel->progs.cuda_enter, !c->multi);
	bpf_program__set_autoload(c->skel->progs.cuda_exit, !c->multi);
	bpf_program__set_autoload(c->skel->progs.cuda_enter_multi, c->multi);
	bpf_program__set_autoload(c->skel->progs.cuda_exit_multi, c->multi);
	bpf_program__set_expected_attach_type(c->skel->progs.cuda_enter_multi, UMULTI_ATTACH_TYPE);
	bpf_program__set_expected_attach_type(c->skel->progs.cuda_exit_multi, UMULTI_ATTACH_TYPE);
	err = session__share_maps(s, c->skel->obj, targets_fd, comms_fd);
	if (err) {
		pr_err("cannot share the target map with the CUDA tracer: %s", strerror(-err));
		goto fail;
	}
	err = cuda_bpf__load(c->skel);
	if (err) {
		pr_err("cannot load the CUDA tracing BPF programs: %s (run with -v for the verifier log)",
		       strerror(-err));
		goto fail;
	}
	procs__add_on_change(s->procs, on_change, c);
	procs__add_on_exit(s->procs, on_exit_pid, c);
	s->kernel_name = learn_name;
	s->kernel_name_ctx = c;
	if (c->trace) {
		err = procs__add_ringbuf(s->procs, bpf_map__fd(c->skel->maps.call_events), on_call, c);
		if (err) {
			pr_err("cannot poll the CUDA call event ring buffer: %s", strerror(-err));
			goto fail;
		}
	}
	for (int g = 0; g < CG__COUNT; g++)
		c->group_on[g] = true;
	err = procs__add_ringbuf(s->procs, bpf_map__fd(c->skel->maps.cuda_events), on_event, c);
	if (err) {
		pr_err("cannot poll the CUDA event ring buffer: %s", strerror(-err));
		goto fail;
	}
	return c;
fail:
	cuda__free(c);
	errno = -err;
	return NULL;
}

void cuda__free(struct cuda_tracer *c)
{
	if (!c)
		return;
	if (c->s && c->s->kernel_name_ctx == c) {
		c->s->kernel_name = NULL;
		c->s->kernel_name_ctx = NULL;
	}
	/* Detaching costs a grace period per uprobe (~80 ms here): tear down in one go at
	 * the end, after the profile is safe. */
	linkset__destroy(&c->links);
	for (size_t i = 0; i < c->nobjs; i++)
		cobj_free(c->objs[i]);
	free(c->objs);
	hmap_for_each(&c->names, e) free((char *)(uintptr_t)e->val);
	hmap__clear(&c->names);
	hmap__clear(&c->kfuncs);
	hmap__clear(&c->rtkernels);
	hmap__clear(&c->scanned);
	hmap__clear(&c->scanned_pids);
	hmap__clear(&c->plain);
	free(c->staged);
	cuda_bpf__destroy(c->skel);
	trace__free(c->timeline);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Said once without -v (a target starting thousands of processes under a low file limit
 * would fill the terminal), every time with it. */
static void attach_failed(struct cuda_tracer *c, int pid, const char *what, int err)
{
	if (c->warned_attach || log_verbose) {
		pr_debug("cannot attach CUDA %s probes to pid %d: %s", what, pid, strerror(-err));
		return;
	}
	c->warned_attach = true;
	pr_warn("cannot attach CUDA %s probes to pid %d: %s; its calls are not counted (further failures "
		"are said only with -v)",
		what, pid, strerror(-err));
}

/* Keep the object (and its fd) and attach the groups that are on now: an entry link and
 * a return link per group. */
static int attach_multi(struct cuda_tracer *c, int pid, int fd, const struct elfsym_want *want, int n)
{
	struct cobj *o = calloc(1, sizeof(*o));
	int attached = 0;

	if (!o)
		return -ENOMEM;
	o->pid = pid;
	o->fd = dup(fd);
	if (o->fd < 0) {
		free(o);
		return -errno;
	}
	snprintf(o->path, sizeof(o->path), "/proc/self/fd/%d", o->fd);
	for (int g = 0; g < CG__COUNT; g++) {
		for (int ret = 0; ret <= 1; ret++) {
			o->link[g][ret] = -1;
			o->offs[g][ret] = calloc((size_t)n, sizeof(uint64_t));
			o->cookies[g][ret] = calloc((size_t)n, sizeof(uint64_t));
			if (!o->offs[g][ret] || !o->cookies[g][ret]) {
				cobj_free(o);
				return -ENOMEM;
			}
		}
	}
	for (int i = 0; i < n; i++) {
		const struct cuda_api *a = &cuda_apis[i];

		if (!want[i].offset)
			continue;
		for (int ret = 0; ret <= (int)(a->retprobe || c->trace); ret++) {
			uint32_t k = o->cnt[a->group][ret]++;

			o->offs[a->group][ret][k] = want[i].offset;
			o->cookies[a->group][ret][k] = cuda_api__cookie(i);
			attached++;
		}
	}
	/* The window thread attaches and detaches groups in every object: */
	pthread_mutex_lock(&c->lock);
	if (c->nobjs == c->capobjs) {
		size_t ncap = c->capobjs ? c->capobjs * 2 : 16;
		struct cobj **nv = realloc(c->objs, ncap * sizeof(*nv));

		if (!nv) {
			pthread_mutex_unlock(&c->lock);
			cobj_free(o);
			return -ENOMEM;
		}
		c->objs = nv;
		c->capobjs = ncap;
	}
	c->objs[c->nobjs++] = o;
	for (int g = 0; g < CG__COUNT; g++) {
		int err = c->group_on[g] ? cuda_group_attach(c, o, g) : 0;

		if (err)
			attach_failed(c, pid, cuda_group_names[g], err);
	}
	pthread_mutex_unlock(&c->lock);
	return attached;
}

static int attach_single(struct cuda_tracer *c, int pid, const char *path, const char *shown,
			 const struct elfsym_want *want, int n)
{
	int attached = 0;

	for (int i = 0; i < n; i++) {
		const struct cuda_api *a = &cuda_apis[i];
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cuda_api__cookie(i));
		struct bpf_link *l;

		if (!want[i].offset)
			continue;
		for (int ret = 0; ret <= (int)(a->retprobe || c->trace); ret++) {
			opts.retprobe = ret;
			l = bpf_program__attach_uprobe_opts(ret ? c->skel->progs.cuda_exit : c->skel->progs.cuda_enter,
							    pid, path, (size_t)want[i].offset, &opts);
			if (!l) {
				attach_failed(c, pid, a->name, -errno);
				continue;
			}
			if (linkset__add(&c->links, l)) {
				bpf_link__destroy(l);
				return -ENOMEM;
			}
			attached++;
		}
	}
	return attached;
}

/* Attach to every CUDA entry point defined in the object open at FD. *PLAIN: it has none
 * (whatever process maps it). */
static int attach_object(struct cuda_tracer *c, int pid, int fd, const char *shown, bool *plain)
{
	struct elfsym_want want[256];
	char path[64];
	int n = cuda_num_apis, found, attached = 0;

	for (int i = 0; i < n; i++)
		want[i] = (struct elfsym_want){.name = cuda_apis[i].name};
	/* The dynamic linker's hook: probed so loads trigger a rescan at once. */
	want[n] = (struct elfsym_want){.name = "_dl_debug_state"};
	found = elfsym__lookup_fd(fd, want, n + 1);
	*plain = found == 0 || (found == 1 && want[n].offset);
	if (found <= 0)
		return found;
	/* The kernel resolves this magic link to exactly the file we opened inside the
	 * target's root: no second lookup of a path the target controls. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (want[n].offset) {
		int err = procs__attach_dl_state(c->s->procs, fd, want[n].offset);

		if (err)
			pr_debug("cannot probe _dl_debug_state in %s: %s", shown, strerror(-err));
		if (found == 1)
			return 0;
	}
	if (c->multi) {
		attached = attach_multi(c, pid, fd, want, n);
		if (attached < 0)
			return attached;
	} else {
		attached = attach_single(c, pid, path, shown, want, n);
		if (attached < 0)
			return attached;
	}
	c->objects++;
	c->probes += attached;
	pr_debug("pid %d: %d CUDA entry points in %s, %d probes", pid, found, shown, attached);
	return attached;
}

static void scan_object(void *ctx, int pid, int fd, const char *path)
{
	struct cuda_tracer *c = ctx;
	struct stat st;
	bool plain = false;

	/* A process that starts thousands of others maps the same libc each time: an
	 * object once found without CUDA entry points is not read again. */
	if (fstat(fd, &st) == 0 && hmap__get(&c->plain, st.st_dev, st.st_ino, 5, NULL))
		return;
	attach_object(c, c->s->opts->all || c->s->opts->host_wide ? -1 : pid, fd, path, &plain);
	if (plain)
		hmap__put(&c->plain, st.st_dev, st.st_ino, 5, 1);
}

static int scan_pid(struct cuda_tracer *c, int pid)
{
	return objscan__pid(pid, c->s->opts->all || c->s->opts->host_wide ? 0 : pid, &c->scanned, scan_object, c);
}

static void on_change(void *ctx, int pid)
{
	scan_pid(ctx, pid);
}

/* A target exited: its probes go (a process that starts thousands of CUDA programs one
 * after another must not collect their links). Closing links waits for a grace period:
 * on a thread of its own. Under -a probes belong to no process. */
static void on_exit_pid(void *ctx, int pid)
{
	struct cuda_tracer *c = ctx;
	struct close_batch *b;
	size_t keep = 0, nfds = 0;

	if (c->s->opts->all)
		return;
	for (size_t i = 0; i < c->nobjs; i++)
		nfds += c->objs[i]->pid == pid ? 2 * CG__COUNT + 1 : 0;
	if (!nfds)
		return;
	b = malloc(sizeof(*b) + sizeof(int) * nfds);
	if (b) {
		b->n = 0;
		b->began = NULL;
	}
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nobjs; i++) {
		struct cobj *o = c->objs[i];

		if (o->pid != pid) {
			c->objs[keep++] = o;
			continue;
		}
		for (int g = 0; g < CG__COUNT && b; g++)
			for (int r = 0; r <= 1; r++)
				if (o->link[g][r] >= 0) {
					b->fds[b->n++] = o->link[g][r];
					o->link[g][r] = -1;
				}
		cobj_free(o);
	}
	c->nobjs = keep;
	pthread_mutex_unlock(&c->lock);
	cuda_close_async(b);
}

/* Loads, execs and forks rescan a process at once (procs' change callbacks); this pass
 * finds processes never scanned, and rescans the others now and then in case a change
 * went unreported (a process without a dynamic linker to probe). Reading every target's
 * maps every second would cost real CPU under -a. */
#define RESCAN_MS 10000

int cuda__scan(struct cuda_tracer *c)
{
	static int pids[MAX_SCAN_PIDS];
	int n = procs__live_pids(c->s->procs, pids, MAX_SCAN_PIDS);
	uint64_t now = (uint64_t)(cuda_mono_now() * 1000), last;

	for (int i = 0; i < n; i++) {
		if (hmap__get(&c->scanned_pids, (uint64_t)pids[i], 0, 4, &last) && now - last < RESCAN_MS)
			continue;
		hmap__put(&c->scanned_pids, (uint64_t)pids[i], 0, 4, now);
		scan_pid(c, pids[i]);
	}
	return 0;
}

/* ---- draining ----------------------------------------------------------------------- */

static const char *dir_frame(uint32_t dir)
{
	static const char *const names[] = {"[memcpy HtoH]", "[memcpy HtoD]",	 "[memcpy DtoH]",
					    "[memcpy DtoD]", "[memcpy default]", "[memset]"};

	return dir < sizeof(names) / sizeof(names[0]) ? names[dir] : "[memcpy default]";
}

/* Name a launched kernel: the runtime passes a host stub (or a cudaKernel_t that
 * __cudaGetKernel mapped to one), which symbolizes to the kernel's mangled name; the
 * driver passes a CUfunction whose name cuModuleGetFunction (or friends) told us. */
/* A name learned for the launch handle (driver name events, CUPTI's symbolName, or an
 * earlier stack): its frame. */
static bool named_handle(struct cuda_tracer *c, uint32_t tgid, uint64_t handle, struct prof_frame *f, char **owned)
{
	uint64_t v;
	const char *mangled;
	char *d;

	if (!hmap__get(&c->names, tgid, handle, 0, &v))
		return false;
	mangled = (const char *)(uintptr_t)v;
	d = demangle(mangled);
	f->name = d ? d : mangled;
	f->sys_name = mangled;
	*owned = d;
	return true;
}

/* nvcc's host stub for kernel K is __device_stub__K (K mangled without its leading '_'):
 * the first such frame above the launch names the kernel, where no symbol names the
 * handle (a cudaKernel_t of a real driver) and no CUPTI is there to. Kept for the handle.
 * Needs the stub not inlined: PyTorch's release builds inline it (CUPTI names those). */
static bool stub_on_stack(struct cuda_tracer *c, uint32_t tgid, uint64_t handle, const uint64_t *ips, int n)
{
	static const char pfx[] = "__device_stub__";

	for (int i = 0; i < n && i < 6; i++) {
		struct sym_result r;
		const char *fn, *p;
		char *name;
		size_t len;

		if (syms__resolve_user(c->s->syms, (int)tgid, ips[i], &r) || !r.resolved || r.nframes < 1)
			continue;
		for (int j = 0; j < r.nframes; j++) {
			fn = r.frames[j].func;
			if (!fn || strncmp(fn, pfx, sizeof(pfx) - 1))
				continue;
			p = fn + sizeof(pfx) - 1;
			len = strcspn(p, "(");
			if (!len)
				continue;
			/* a C++ kernel's mangled name lost its '_'; an extern "C" one is as is */
			name = malloc(len + 2);
			if (!name)
				return false;
			snprintf(name, len + 2, "%s%.*s", p[0] == 'Z' ? "_" : "", (int)len, p);
			if (hmap__put(&c->names, tgid, handle, 0, (uint64_t)(uintptr_t)name)) {
				free(name);
				return false;
			}
			return true;
		}
	}
	return false;
}

/* The leaf frame of a launch: what ran on the GPU. IPS (N frames, the caller first) is the
 * launch's user stack. */
static void kernel_frame(struct cuda_tracer *c, const struct cuda_key *k, const struct cuda_api *a, const uint64_t *ips,
			 int n, struct prof_frame *f, char *buf, size_t len, char **owned)
{
	uint64_t v, handle = k->object;

	*owned = NULL;
	f->kind = PROF_FRAME_SYNTH;
	f->addr = k->object;
	f->sys_name = NULL;
	if (a->cls == CC_GRAPH) {
		f->name = "[cuda graph]";
		return;
	}
	if (named_handle(c, k->tgid, handle, f, owned))
		return;
	if (a->runtime) {
		struct sym_result r;
		uint64_t host = k->object;

		if (hmap__get(&c->rtkernels, k->tgid, k->object, 2, &v))
			host = v;
		if (syms__resolve_user(c->s->syms, (int)k->tgid, host, &r) == 0 && r.resolved && r.nframes > 0) {
			const struct sym_frame *fr = &r.frames[r.nframes - 1];
			/* The host stub carries the kernel's mangled name; demangled in full it is
			 * the kernel's signature (DWARF names leave the parameters out). */
			char *d = fr->sys_name ? demangle(fr->sys_name) : NULL;

			f->name = d ? d : fr->func;
			f->sys_name = fr->sys_name;
			*owned = d;
			return;
		}
	} else if (hmap__get(&c->kfuncs, k->tgid, handle, 1, &v) && named_handle(c, k->tgid, v, f, owned)) {
		return; /* a CUfunction of a CUkernel: the kernel's name */
	}
	if (stub_on_stack(c, k->tgid, handle, ips, n) && named_handle(c, k->tgid, handle, f, owned))
		return;
	snprintf(buf, len, "[cuda kernel %#" PRIx64 "]", (uint64_t)k->object);
	f->name = buf;
}

/* The user stack of a drained call, its first frame made the caller's call site. */
static int read_ips(struct cuda_tracer *c, const struct cuda_key *k, int stacks_fd, uint64_t *ips, int *trunc)
{
	int n = stacks__read(stacks_fd, k->ustack, ips, trunc);

	/* Entry probes: ips[0] is the function's own entry, and a frame-pointer walk from a
	 * function's first instruction skips its direct caller: [rsp] (k->caller) takes
	 * ips[0]'s place. Return probes: ips[0] already is the return address in the caller.
	 * Either way ips[0] is a return address: move it back into the call instruction
	 * (session__add_stack_sample does that for the deeper frames). */
	(void)c;
	if (k->caller) {
		/* Kernels since ~6.15 fix up the walk at a function entry themselves: then
		 * ips[1] already is the caller, and only the entry frame goes. */
		if (n >= 2 && ips[1] == k->caller) {
			memmove(ips, ips + 1, (size_t)(n - 1) * sizeof(ips[0]));
			n--;
		} else {
			ips[0] = k->caller;
			if (n == 0)
				n = 1;
		}
	}
	if (n > 0)
		ips[0] -= 1;
	return n;
}

/* One drained entry into the profile; its counts and sums count SCALE each (the window's
 * weight, for windowed groups). */
static int add_cuda_sample(struct cuda_tracer *c, const struct cuda_key *k, const struct cuda_val *v, uint64_t *ips,
			   int n, int64_t inuse, double scale)
{
	struct session *s = c->s;
	const struct cuda_api *a;
	struct prof_frame leaf[2];
	struct prof_label extra[1];
	char kbuf[64], sbuf[32], *owned = NULL;
	int nleaf = 0, nextra = 0, err;

	if (k->api >= (uint32_t)cuda_num_apis)
		return 0;
	a = &cuda_apis[k->api];
	SESSION_VALUES(values);
	values[s->t_cuda_calls] = inuse ? 0 : (int64_t)v->calls;
	switch (a->group) {
	case CG_LAUNCH:
		values[s->t_cuda_launches] = (int64_t)v->calls;
		kernel_frame(c, k, a, ips, n, &leaf[nleaf++], kbuf, sizeof(kbuf), &owned);
		break;
	case CG_COPY:
		values[s->t_cuda_memcpy] = (int64_t)v->bytes;
		leaf[nleaf++] = (struct prof_frame){.kind = PROF_FRAME_SYNTH, .name = dir_frame(k->dir)};
		break;
	case CG_SYNC:
		values[s->t_cuda_sync_ns] = (int64_t)v->wait_ns;
		break;
	case CG_ALLOC:
		if (inuse)
			values[s->t_gpu_inuse] = inuse;
		else
			values[s->t_gpu_alloc] = (int64_t)v->bytes;
		break;
	}
	/* Windowed groups saw part of the time: each call stands for 1/p of them. */
	if (!inuse && scale != 1) {
		for (int t = 0; t < profile__num_types(s->prof); t++)
			values[t] = llround((double)values[t] * scale);
	}
	/* The API function itself, under the GPU-side effect. */
	leaf[nleaf++] = (struct prof_frame){.kind = PROF_FRAME_SYNTH, .name = a->name};
	if ((a->group == CG_LAUNCH || a->group == CG_COPY) && k->stream > 2) {
		snprintf(sbuf, sizeof(sbuf), "%#" PRIx64, (uint64_t)k->stream);
		extra[nextra++] = (struct prof_label){.key = "cuda_stream", .str = sbuf};
	}

	err = session__add_stack_sample_py(s, k->tgid, k->tid, k->names, NULL, 0, ips, n, k->pystack, leaf, nleaf,
					   extra, nextra, values);
	free(owned);
	return err;
}

/* A drained call with its stack: into the profile at its window's weight, or kept until
 * its window's books are closed (FINAL: no more waiting). 1 when kept. */
static int settle_call(struct cuda_tracer *c, const struct cuda_key *k, const struct cuda_val *v, uint64_t *ips, int n,
		       int trunc, bool final)
{
	double w = 1, f = 1, values[3] = {(double)v->calls, 0, 0};
	int r = 1;

	if (k->window && c->win) {
		r = windows__weight(c->win, k->window, k->tid, &w, &f);
		if (r == 0 && !final) {
			struct cuda_staged *st;

			if (c->nstaged == c->capstaged) {
				size_t cap = c->capstaged ? 2 * c->capstaged : 64;
				struct cuda_staged *ns = realloc(c->staged, cap * sizeof(*ns));

				if (!ns)
					return -ENOMEM;
				c->staged = ns;
				c->capstaged = cap;
			}
			st = &c->staged[c->nstaged++];
			st->key = *k;
			st->val = *v;
			st->n = n;
			st->trunc = trunc;
			memcpy(st->ips, ips, (size_t)n * sizeof(ips[0]));
			return 1;
		}
		values[1] = cuda_apis[k->api].group == CG_SYNC ? (double)v->wait_ns : (double)v->bytes;
		windows__add(c->win, k->window, (double)v->calls, values, w, f);
	}
	c->s->truncated_stacks += (uint64_t)trunc;
	c->calls += v->calls;
	return add_cuda_sample(c, k, v, ips, n, 0, w * f);
}

/* The calls kept at earlier drains whose windows' books are closed now. */
static int settle_staged(struct cuda_tracer *c, bool final)
{
	size_t n = c->nstaged;
	int err = 0;

	/* settle_call appends what must still wait: at most one entry for each one taken,
	 * so always into a slot already read (each is copied out first) */
	c->nstaged = 0;
	for (size_t i = 0; i < n && !err; i++) {
		struct cuda_staged st = c->staged[i];
		int r = settle_call(c, &st.key, &st.val, st.ips, st.n, st.trunc, final);

		if (r < 0)
			err = r;
	}
	return err;
}

static int drain_buffer(struct cuda_tracer *c, unsigned buf, bool final)
{
	struct bpf_map *counts = buf ? c->skel->maps.ccounts1 : c->skel->maps.ccounts0;
	int stacks_fd = bpf_map__fd(buf ? c->skel->maps.stacks1 : c->skel->maps.stacks0);
	int alloc_fd = bpf_map__fd(c->skel->maps.alloc_stacks);
	uint64_t ips[STACKS_MAX_DEPTH];
	struct stacks_taken t;
	int32_t *ids = NULL;
	size_t nids = 0;
	int err;

	err = stacks__take(bpf_map__fd(counts), sizeof(struct cuda_key), sizeof(struct cuda_val),
			   bpf_map__max_entries(counts), &t);
	if (!err && t.n && !(ids = malloc(t.n * sizeof(*ids))))
		err = -ENOMEM;
	for (size_t i = 0; i < t.n && !err; i++) {
		struct cuda_key key;
		struct cuda_val val;
		int n, trunc = 0;

		memcpy(&key, t.keys + i * sizeof(key), sizeof(key));
		memcpy(&val, t.vals + i * sizeof(val), sizeof(val));
		if (!(key.flags & CUDA_KEY_ALLOC_STACK))
			ids[nids++] = key.ustack;
		if (!val.calls)
			continue;
		if (c->s->opts->all)
			procs__note_pid(c->s->procs, (int)key.tgid);
		n = read_ips(c, &key, key.flags & CUDA_KEY_ALLOC_STACK ? alloc_fd : stacks_fd, ips, &trunc);
		err = settle_call(c, &key, &val, ips, n, trunc, final);
		if (err > 0)
			err = 0;
	}
	if (ids)
		stacks__clear_ids(stacks_fd, ids, nids);
	else
		stacks__clear(stacks_fd, sizeof(uint32_t));
	stacks__clear(bpf_map__fd(counts), sizeof(struct cuda_key)); /* what an error left */
	free(ids);
	stacks__taken_free(&t);
	return err;
}

int cuda__drain(struct cuda_tracer *c, bool final)
{
	unsigned old = stacks__flip(&c->skel->bss->buf_active);
	int err = settle_staged(c, final);

	if (!err)
		err = drain_buffer(c, old, final);
	if (!err && final)
		err = drain_buffer(c, stacks__flip(&c->skel->bss->buf_active), final);
	return err;
}

void cuda__set_windows(struct cuda_tracer *c, struct windows *w)
{
	c->win = w;
}

int cuda__finish(struct cuda_tracer *c)
{
	int live_fd = bpf_map__fd(c->skel->maps.live_allocs);
	int alloc_fd = bpf_map__fd(c->skel->maps.alloc_stacks);
	struct cuda_alloc_key key, next, *prev = NULL;
	struct cuda_alloc_val val;
	struct cuda_val none = {0};
	int err = 0;

	while (bpf_map_get_next_key(live_fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(live_fd, &key, &val) || !val.size)
			continue;
		uint64_t ips[STACKS_MAX_DEPTH];
		int trunc = 0, n = read_ips(c, &val.key, alloc_fd, ips, &trunc);

		c->s->truncated_stacks += (uint64_t)trunc;
		err = add_cuda_sample(c, &val.key, &none, ips, n, (int64_t)val.size, 1);
		if (err)
			break;
	}
	return err;
}

void cuda__stats(struct cuda_tracer *c, struct cuda_stats *out)
{
	int fd = bpf_map__fd(c->skel->maps.stats);

	/* What reached the profile: hits after the last drain (a target running on while
	 * probes detach) are not in it, so the counter would overstate it. */
	out->calls = c->calls;
	out->dropped = c->skel->bss->dropped_calls;
	out->lost_stacks = stacks__stat(fd, STAT_USTACK_LOST) + stacks__stat(fd, STAT_STACK_FULL);
	out->lost_events = c->skel->bss->lost_events;
	out->objects = c->objects;
	out->trace_events = c->trace_calls;
	out->trace_dropped = c->trace_dropped + c->skel->bss->lost_call_events;
	out->probes = c->probes;
}

struct trace *cuda__timeline(struct cuda_tracer *c)
{
	return c->timeline;
}

struct trace *cuda__take_trace(struct cuda_tracer *c)
{
	struct trace *t = c->timeline;

	c->timeline = NULL;
	return t;
}
