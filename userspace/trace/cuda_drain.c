// SPDX-License-Identifier: MIT
/* CUDA calls: draining the inactive buffer into the model: each call's stack with its
 * API frame and GPU-side frame (kernel names, copy directions), weighted by its
 * window's inclusion probability; calls whose window's books are still open wait.
 * Then GPU memory still held, the counters and the timeline. */
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
	c->s->kernel_launches++;
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
	c->s->unnamed_launches++;
}

/* The user stack of a drained call, its first frame made the caller's call site. */
static int read_ips(struct cuda_tracer *c, const struct cuda_key *k, const struct stack_maps *sm, uint64_t *ips,
		    int *trunc)
{
	int n = stacks__read(sm, k->ustack, ips, trunc);

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
	double w = 1, walked = 1, values[3] = {(double)v->calls, 0, 0};
	struct est_delay f = {1, 1, 1};
	int r = 1;

	if (k->window && c->win) {
		r = windows__weight(c->win, k->window, k->tid, &w, &f, &walked);
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
		/* the window's bare calls, in no stack, count through the others */
		values[0] *= walked;
		values[1] = walked * (cuda_apis[k->api].group == CG_SYNC ? (double)v->wait_ns : (double)v->bytes);
		windows__add(c->win, k->window, values[0], values, w, &f);
	}
	c->s->truncated_stacks += (uint64_t)trunc;
	c->calls += v->calls;
	return add_cuda_sample(c, k, v, ips, n, 0, walked * est_weight(w, f.mid));
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
	struct stack_maps sm = {bpf_map__fd(buf ? c->skel->maps.stacks1 : c->skel->maps.stacks0),
				bpf_map__fd(buf ? c->skel->maps.stacks1_ovf : c->skel->maps.stacks0_ovf),
				bpf_map__fd(buf ? c->skel->maps.own_stacks1 : c->skel->maps.own_stacks0)};
	struct stack_maps alloc = {bpf_map__fd(c->skel->maps.alloc_stacks), bpf_map__fd(c->skel->maps.alloc_stacks_ovf),
				   -1};
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
		n = read_ips(c, &key, key.flags & CUDA_KEY_ALLOC_STACK ? &alloc : &sm, ips, &trunc);
		err = settle_call(c, &key, &val, ips, n, trunc, final);
		if (err > 0)
			err = 0;
	}
	stacks__clear_ids(&sm, ids, nids);
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
	struct stack_maps alloc = {bpf_map__fd(c->skel->maps.alloc_stacks), bpf_map__fd(c->skel->maps.alloc_stacks_ovf),
				   -1};
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
		int trunc = 0, n = read_ips(c, &val.key, &alloc, ips, &trunc);

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
	out->kernel_walks = stacks__stat(fd, STAT_KERNEL_WALK);
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
