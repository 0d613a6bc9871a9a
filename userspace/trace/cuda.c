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

#include "bpfload.h"
#include "cuda.h"
#include "cuda.skel.h"
#include "cuda_api.h"
#include "cuda_int.h"
#include "demangle.h"
#include "elfsym.h"
#include "envnum.h"
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

/* Open and load the CUDA object with one flavour of the entry and return programs:
 * uprobe_multi links (MULTI) or one perf uprobe per function. */
static int load_flavour(struct cuda_tracer *c, int targets_fd, int comms_fd, bool multi)
{
	struct session *s = c->s;
	int err;

	c->skel = cuda_bpf__open();
	if (!c->skel)
		return -errno;
	SESSION_SET_RODATA(c->skel->rodata, s);
	stacks__test_size(c->skel->maps.stacks0, c->skel->maps.stacks1);
	stacks__fpwalk_knobs(&c->skel->rodata->fpwalk_off, &c->skel->rodata->fpwalk_key_mask);
	c->multi = multi;
	/* tests only: a host whose traps are dearer than this one's (cuda.bpf.c, dear_ns) */
	c->skel->rodata->dear_ns[0] = (uint64_t)envnum__get("GPUBPF_TEST_TRAP_NS", 0, 50000, 0);
	c->skel->rodata->dear_ns[1] = (uint64_t)envnum__get("GPUBPF_TEST_TRAP_RET_NS", 0, 50000, 0);
	if (c->skel->rodata->dear_ns[0] || c->skel->rodata->dear_ns[1])
		pr_warn(
		    "GPUBPF_TEST_TRAP_NS/GPUBPF_TEST_TRAP_RET_NS (tests only): every probe hit held %llu ns more at "
		    "entry and %llu ns at return, as dearer traps would",
		    (unsigned long long)c->skel->rodata->dear_ns[0], (unsigned long long)c->skel->rodata->dear_ns[1]);
	if (c->trace) {
		c->skel->rodata->trace_calls = true;
		/* ~70 bytes an event: room for 200k calls between two polls. */
		bpf_map__set_max_entries(c->skel->maps.call_events, 16u << 20);
	}
	bpf_program__set_autoload(c->skel->progs.cuda_enter, !multi);
	bpf_program__set_autoload(c->skel->progs.cuda_exit, !multi);
	bpf_program__set_autoload(c->skel->progs.cuda_enter_multi, multi);
	bpf_program__set_autoload(c->skel->progs.cuda_exit_multi, multi);
	bpf_program__set_expected_attach_type(c->skel->progs.cuda_enter_multi, UMULTI_ATTACH_TYPE);
	bpf_program__set_expected_attach_type(c->skel->progs.cuda_exit_multi, UMULTI_ATTACH_TYPE);
	err = session__share_maps(s, c->skel->obj, targets_fd, comms_fd);
	if (!err) {
		uint64_t t0 = bpfload__now();

		err = cuda_bpf__load(c->skel);
		if (!err)
			bpfload__report(c->skel->obj, "cuda", t0);
	}
	if (!err && multi)
		err = umulti__probe(bpf_program__fd(c->skel->progs.cuda_enter_multi));
	return err;
}

struct cuda_tracer *cuda__new(struct session *s, int targets_fd, int comms_fd)
{
	struct cuda_tracer *c = calloc(1, sizeof(*c));
	bool multi = !getenv("GPUBPF_NO_UPROBE_MULTI");
	int err;

	if (!c)
		return NULL;
	c->s = s;
	pthread_mutex_init(&c->lock, NULL);
	c->trace = s->opts->trace;
	if (c->trace) {
		c->timeline = trace__new();
		if (!c->timeline) {
			err = -errno;
			goto fail;
		}
	}
	err = load_flavour(c, targets_fd, comms_fd, multi);
	if (err && multi) {
		/* the kernel said no to uprobe_multi (before 6.6): a uprobe per function */
		pr_debug("uprobe_multi links unavailable (%s): one uprobe per function", strerror(-err));
		cuda_bpf__destroy(c->skel);
		c->skel = NULL;
		err = load_flavour(c, targets_fd, comms_fd, false);
	}
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
	found = elfsym__lookup_fd_flags(fd, want, n + 1, ELFSYM_CUDART);
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
	b = calloc(1, sizeof(*b) + sizeof(int) * nfds);
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
