// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "../../bpf/cupti.h"
#include "cupti.h"
#include "cupti.skel.h"
#include "demangle.h"
#include "devtrace.h"
#include "hmap.h"
#include "links.h"
#include "log.h"
#include "objscan.h"
#include "procmaps.h"
#include "procs.h"
#include "stacks.h"

#define MAX_SCAN_PIDS 4096
#define MAX_RANGES 32
#define LIB_NAME "libgpubpf_inject.so"

/* hmap key spaces (third key word) */
enum { HK_NAME = 0, HK_STATUS = 1, HK_RANGES = 2, HK_LIB = 3, HK_TEXT = 4, HK_WAS_ON = 5 };

struct ranges {
	int n;
	struct cupti_range r[MAX_RANGES];
};

struct cupti_tracer {
	struct session *s;
	struct cupti_bpf *skel;
	struct ring_buffer *rb;
	struct linkset links;
	struct hmap scanned; /* objscan: (pid or 0, dev, inode) */
	struct hmap tab;     /* (tgid, id, HK_NAME) -> char *; (tgid, 0, HK_STATUS) -> code;
			      * (tgid, 0, HK_TEXT) -> char *; (tgid, 0, HK_RANGES) -> struct ranges *;
			      * (tgid, 0, HK_LIB) -> 1 */
	int objects;
	int targets_fd, comms_fd;
	bool load_failed; /* the BPF object is loaded when the first library is found */
	uint32_t max_rate;
	struct devtrace *dt; /* --trace: device tracks, or NULL */
	uint64_t kernels, copies, kernel_ns, copy_ns;
	char reason[512];
};

/* ---- helpers (unit tested) ------------------------------------------------------------- */

bool cupti__internal_object(const char *base)
{
	static const char *const prefixes[] = {"libgpubpf_inject", "libcupti", "libcuda.so", "libcudart.so"};

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

int cupti__internal_frames(const uint64_t *ips, int n, const struct cupti_range *r, int nr)
{
	int last = -1;

	/* The deepest (rootmost) internal frame of the leaf-side run: everything up to it is
	 * the API's and CUPTI's machinery; the user's frames start after it. */
	for (int i = 0; i < n; i++) {
		bool in = false;

		for (int j = 0; j < nr && !in; j++)
			in = ips[i] >= r[j].lo && ips[i] < r[j].hi;
		if (!in)
			break;
		last = i;
	}
	return last + 1;
}

double cupti__scale(uint64_t seen, uint64_t sampled)
{
	if (!sampled || seen <= sampled)
		return 1.0;
	return (double)seen / (double)sampled;
}

/* ---- events ------------------------------------------------------------------------------ */

static void put_str(struct hmap *m, uint64_t a, uint64_t b, uint64_t c, const char *text)
{
	uint64_t old;
	char *d = strdup(text);

	if (!d)
		return;
	if (hmap__get(m, a, b, c, &old))
		free((char *)(uintptr_t)old);
	if (hmap__put(m, a, b, c, (uint64_t)(uintptr_t)d))
		free(d);
}

static const char *get_str(const struct hmap *m, uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t v;

	return hmap__get(m, a, b, c, &v) ? (const char *)(uintptr_t)v : NULL;
}

/* Write the sampling settings into the library, at the address its status probe gave.
 * The address comes from the target: check that a config of ours is there first. */
static void write_config(struct cupti_tracer *c, uint32_t tgid, uint64_t addr)
{
	struct dev_config cur, want;
	struct iovec l = {&cur, sizeof(cur)}, r = {(void *)(uintptr_t)addr, sizeof(cur)};

	if (!addr || process_vm_readv((pid_t)tgid, &l, 1, &r, 1, 0) != (ssize_t)sizeof(cur) ||
	    cur.magic != DEV_CONFIG_MAGIC || cur.version != 1)
		return;
	want = cur;
	want.max_rate = c->max_rate;
	want.window_ms = 1000;
	want.period_ms = 1000;
	want.seq = cur.seq + 1;
	l.iov_base = &want;
	if (process_vm_writev((pid_t)tgid, &l, 1, &r, 1, 0) != (ssize_t)sizeof(want))
		pr_debug("pid %u: cannot set the injection library's sampling: %s", tgid, strerror(errno));
}

static const char *dir_frame(uint32_t dir)
{
	static const char *const names[] = {"[memcpy HtoH]", "[memcpy HtoD]",	 "[memcpy DtoH]",
					    "[memcpy DtoD]", "[memcpy default]", "[memset]"};

	return dir < sizeof(names) / sizeof(names[0]) ? names[dir] : "[memcpy default]";
}

/* --trace: launches and records, each as it came (names arrived before on dev_events). */
static int on_trace(void *ctx, void *data, size_t len)
{
	struct cupti_tracer *c = ctx;
	const struct dev_trace_ev *e = data;
	const struct dev_rec *r = &e->rec;
	struct trace_event ev = {0};
	struct prof_label l[SESSION_LABELS];
	char kbuf[48], *owned = NULL;
	const char *name = NULL;
	int err;

	if (len < sizeof(*e) || !c->dt)
		return 0;
	if (e->type == DEV_TR_LAUNCH)
		return devtrace__launch(c->dt, (int)e->tgid, (int)e->tid, r->corr, e->ts,
					get_str(&c->tab, e->tgid, DEV_NAME_API | e->cbinfo, HK_NAME));
	if (e->type != DEV_TR_RECORD || r->kind < DEV_KERNEL || r->kind > DEV_MEMSET || r->end < r->start)
		return 0;
	if (r->kind == DEV_KERNEL) {
		name = r->name_id ? get_str(&c->tab, e->tgid, r->name_id, HK_NAME) : NULL;
		owned = name ? demangle(name) : NULL;
		if (owned)
			name = owned;
		if (!name) {
			snprintf(kbuf, sizeof(kbuf), "[cuda kernel #%u]", r->name_id);
			name = kbuf;
		}
		ev.kind = TRACE_KERNEL;
	} else {
		name = dir_frame(r->kind == DEV_MEMSET ? DEV_DIR_MEMSET : r->dir);
		ev.kind = TRACE_MEMCPY;
		ev.bytes = r->bytes;
	}
	ev.name = name;
	ev.pid = (int)e->tgid;
	if (session__labels(c->s, e->tgid, e->tid ? e->tid : e->tgid, l) == 0)
		ev.process_name = l[3].str;
	ev.device = r->device;
	ev.stream = r->stream;
	ev.start_ns = r->start;
	ev.dur_ns = r->end - r->start;
	err = devtrace__record(c->dt, &ev, r->corr);
	free(owned);
	return err;
}

static int on_event(void *ctx, void *data, size_t len)
{
	struct cupti_tracer *c = ctx;
	static struct dev_event ev; /* 4 KiB; ring buffer callbacks run one at a time */
	struct dev_event *e = &ev;

	/* events come at the length of their text */
	if (len <= offsetof(struct dev_event, text) || len > sizeof(*e))
		return 0;
	/* The ring buffer is mapped read-only: terminate the text in a copy. */
	memcpy(e, data, len);
	((char *)e)[len - 1] = '\0';
	switch (e->type) {
	case DEV_EV_NAME:
		put_str(&c->tab, e->tgid, e->id, HK_NAME, e->text);
		break;
	case DEV_EV_KNAME:
		/* a launch handle's kernel: the CUDA tracer names its launches with it */
		if (c->s->kernel_name)
			c->s->kernel_name(c->s->kernel_name_ctx, e->tgid, e->addr, e->text);
		break;
	case DEV_EV_STATUS:
		hmap__put(&c->tab, e->tgid, 0, HK_STATUS, e->id);
		put_str(&c->tab, e->tgid, 0, HK_TEXT, e->text);
		pr_debug("pid %u: injection library: %s", e->tgid, e->text);
		if (e->id == DEV_ST_ATTACHED || e->id == DEV_ST_SYNTHETIC) {
			/* "attached" stays true of it after it exits (and so goes idle) */
			hmap__put(&c->tab, e->tgid, 0, HK_WAS_ON, 1);
			write_config(c, e->tgid, e->addr);
		} else if (e->id != DEV_ST_IDLE)
			pr_warn("pid %u: no device time: the injection library stays idle: %s", e->tgid, e->text);
		break;
	}
	return 0;
}

/* ---- lifecycle ------------------------------------------------------------------------- */

static void on_change(void *ctx, int pid);

/* The BPF side, loaded when the first target with the library shows up: most targets
 * never have it, and loading costs ~75 ms of CPU (BTF, maps, verifier). */
static int load_bpf(struct cupti_tracer *c)
{
	struct session *s = c->s;
	int err;

	if (c->skel)
		return 0;
	if (c->load_failed)
		return -EAGAIN;
	c->skel = cupti_bpf__open();
	if (!c->skel) {
		err = -errno;
		pr_warn("no device time: cannot open its BPF object: %s", strerror(-err));
		goto fail;
	}
	SESSION_SET_RODATA(c->skel->rodata, s);
	if (c->dt) {
		/* 16 MiB: ~190k records between two drains (a second) */
		c->skel->rodata->trace_records = true;
		err = bpf_map__set_max_entries(c->skel->maps.dev_trace, 16u << 20);
		if (err) {
			pr_warn("no device time: cannot size its timeline buffer: %s", strerror(-err));
			goto fail;
		}
	}
	err = session__share_maps(s, c->skel->obj, c->targets_fd, c->comms_fd);
	if (err) {
		pr_warn("no device time: cannot share the target map with its tracer: %s", strerror(-err));
		goto fail;
	}
	err = cupti_bpf__load(c->skel);
	if (err) {
		pr_warn("no device time: cannot load its BPF programs: %s (run with -v for the verifier log)",
			strerror(-err));
		goto fail;
	}
	/* dev_events first: a kernel's name comes before its records */
	c->rb = ring_buffer__new(bpf_map__fd(c->skel->maps.dev_events), on_event, c, NULL);
	if (!c->rb || (c->dt && ring_buffer__add(c->rb, bpf_map__fd(c->skel->maps.dev_trace), on_trace, c))) {
		err = -errno;
		pr_warn("no device time: cannot read its events: %s", strerror(-err));
		goto fail;
	}
	return 0;
fail:
	ring_buffer__free(c->rb);
	c->rb = NULL;
	cupti_bpf__destroy(c->skel);
	c->skel = NULL;
	c->load_failed = true;
	return err;
}

static int ensure_type(struct session *s, int *idx, const char *type)
{
	int i = profile__find_type(s->prof, type);

	if (i < 0)
		i = profile__add_type(s->prof, type, "nanoseconds");
	if (i < 0)
		return i;
	*idx = i;
	return 0;
}

struct cupti_tracer *cupti__new(struct session *s, int targets_fd, int comms_fd)
{
	struct cupti_tracer *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return NULL;
	c->s = s;
	err = ensure_type(s, &s->t_gpu_kernel_ns, "gpu_kernel_time");
	if (!err)
		err = ensure_type(s, &s->t_gpu_memcpy_ns, "gpu_memcpy_time");
	if (err) {
		pr_err("cannot add the device time sample types: %s", strerror(-err));
		goto fail;
	}
	c->targets_fd = targets_fd;
	c->comms_fd = comms_fd;
	cupti__set_budget(c, s->opts->budget, 5e-6, s->opts->exact);
	err = procs__add_on_change(s->procs, on_change, c);
	if (err) {
		pr_err("cannot follow the targets' loads for device time: %s", strerror(-err));
		goto fail;
	}
	return c;
fail:
	cupti__free(c);
	errno = -err;
	return NULL;
}

void cupti__detach(struct cupti_tracer *c)
{
	/* The library sees its semaphores drop and returns to idle on its own. */
	if (c->rb)
		ring_buffer__consume(c->rb);
	linkset__destroy(&c->links);
}

void cupti__free(struct cupti_tracer *c)
{
	if (!c)
		return;
	if (c->skel)
		cupti__detach(c);
	ring_buffer__free(c->rb);
	hmap_for_each(&c->tab, e)
	{
		if (e->k[2] == HK_NAME || e->k[2] == HK_TEXT || e->k[2] == HK_RANGES)
			free((void *)(uintptr_t)e->val);
	}
	hmap__clear(&c->tab);
	hmap__clear(&c->scanned);
	cupti_bpf__destroy(c->skel);
	devtrace__free(c->dt);
	free(c);
}

void cupti__set_budget(struct cupti_tracer *c, double budget_pct, double cost_per_hit, bool exact)
{
	double r;

	if (exact) {
		c->max_rate = 0;
		return;
	}
	if (cost_per_hit <= 0)
		cost_per_hit = 5e-6;
	r = budget_pct / 100 / cost_per_hit / 2;
	c->max_rate = r < 10 ? 10 : r > 1e6 ? 1000000 : (uint32_t)r;
}

/* ---- attaching ------------------------------------------------------------------------- */

static void scan_object(void *ctx, int pid, int fd, const char *shown)
{
	struct cupti_tracer *c = ctx;
	const char *base = strrchr(shown, '/');
	char path[64];
	int attach_pid = c->s->opts->all || c->s->opts->host_wide ? -1 : pid;

	base = base ? base + 1 : shown;
	if (strncmp(base, "libgpubpf_inject", 16) != 0 || load_bpf(c))
		return;
	/* launch last: the library turns on when launch's and records' semaphores are both
	 * up, and by then name and status are listening too. */
	const struct {
		struct bpf_program *prog;
		const char *name;
		bool optional; /* libraries built before it lack it */
	} probes[] = {
	    {c->skel->progs.dev_name, "name", false},	  {c->skel->progs.dev_kname, "kname", true},
	    {c->skel->progs.dev_status, "status", false}, {c->skel->progs.dev_records, "records", false},
	    {c->skel->progs.dev_launch, "launch", false},
	};
	/* The kernel resolves this magic link to exactly the file objscan opened inside the
	 * target's root. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		struct bpf_link *l =
		    bpf_program__attach_usdt(probes[i].prog, attach_pid, path, DEV_PROVIDER, probes[i].name, NULL);

		if (!l && probes[i].optional) {
			pr_debug("pid %d: no %s probe in %s (an older library): %s", pid, probes[i].name, shown,
				 strerror(errno));
			continue;
		}
		if (!l) {
			pr_warn("pid %d: cannot attach to the injection library's %s probe in %s: %s", pid,
				probes[i].name, shown, strerror(errno));
			return;
		}
		if (linkset__add(&c->links, l)) {
			bpf_link__destroy(l);
			return;
		}
	}
	hmap__put(&c->tab, (uint64_t)pid, 0, HK_LIB, 1);
	c->objects++;
	pr_debug("pid %d: device timing through %s", pid, shown);
}

static void forget_ranges(struct cupti_tracer *c, int pid)
{
	uint64_t v;

	if (hmap__get(&c->tab, (uint64_t)pid, 0, HK_RANGES, &v)) {
		free((void *)(uintptr_t)v);
		hmap__put(&c->tab, (uint64_t)pid, 0, HK_RANGES, 0);
	}
}

static void scan_pid(struct cupti_tracer *c, int pid)
{
	objscan__pid(pid, c->s->opts->all || c->s->opts->host_wide ? 0 : pid, &c->scanned, scan_object, c);
}

static void on_change(void *ctx, int pid)
{
	struct cupti_tracer *c = ctx;

	scan_pid(c, pid);
	/* New objects are mapped: the trimming ranges are read again at the next drain. */
	forget_ranges(c, pid);
}

int cupti__scan(struct cupti_tracer *c)
{
	static int pids[MAX_SCAN_PIDS];
	int n = procs__live_pids(c->s->procs, pids, MAX_SCAN_PIDS);

	for (int i = 0; i < n; i++)
		scan_pid(c, pids[i]);
	if (c->rb)
		ring_buffer__consume(c->rb);
	return 0;
}

void cupti__consume_events(struct cupti_tracer *c)
{
	if (c && c->rb)
		ring_buffer__consume(c->rb);
}

/* ---- draining -------------------------------------------------------------------------- */

/* The executable mappings of the objects between the user's call and the probe. */
static const struct ranges *ranges_of(struct cupti_tracer *c, uint32_t tgid)
{
	struct ranges *rg;
	char path[64], line[4096];
	uint64_t v;
	FILE *f;

	if (hmap__get(&c->tab, tgid, 0, HK_RANGES, &v) && v)
		return (const struct ranges *)(uintptr_t)v;
	snprintf(path, sizeof(path), "/proc/%u/maps", tgid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	rg = calloc(1, sizeof(*rg));
	if (!rg) {
		fclose(f);
		return NULL;
	}
	while (fgets(line, sizeof(line), f) && rg->n < MAX_RANGES) {
		struct procmaps_entry e;
		char name[256];
		const char *b;
		size_t len;

		if (procmaps__parse_line(line, strlen(line), &e) || !e.exec || !e.path)
			continue;
		len = e.path_len < sizeof(name) - 1 ? e.path_len : sizeof(name) - 1;
		memcpy(name, e.path, len);
		name[len] = '\0';
		b = strrchr(name, '/');
		b = b ? b + 1 : name;
		if (cupti__internal_object(b))
			rg->r[rg->n++] = (struct cupti_range){e.start, e.end};
	}
	fclose(f);
	if (hmap__put(&c->tab, tgid, 0, HK_RANGES, (uint64_t)(uintptr_t)rg)) {
		free(rg);
		return NULL;
	}
	return rg;
}

static int add_dev_sample(struct cupti_tracer *c, const struct dev_key *k, const struct dev_val *v,
			  const struct dev_proc *p)
{
	struct session *s = c->s;
	struct prof_frame leaf[2];
	struct prof_label extra[3];
	uint64_t ips[STACKS_MAX_DEPTH];
	char kbuf[48], dbuf[16], sbuf[16], gbuf[16], *owned = NULL;
	const char *name, *api;
	int nleaf = 0, nextra = 0, n, trunc = 0, skip = 0, err;
	double scale;

	SESSION_VALUES(values);
	if (k->kind == DEV_KERNEL) {
		scale = p ? cupti__scale(p->ctr.launches_seen, p->ctr.launches_sampled) : 1;
		values[s->t_gpu_kernel_ns] = llround((double)v->ns * scale);
		name = k->name_id ? get_str(&c->tab, k->tgid, k->name_id, HK_NAME) : NULL;
		leaf[nleaf] = (struct prof_frame){.kind = PROF_FRAME_SYNTH, .addr = k->name_id};
		if (name) {
			owned = demangle(name);
			leaf[nleaf].name = owned ? owned : name;
			leaf[nleaf].sys_name = name;
		} else {
			snprintf(kbuf, sizeof(kbuf), "[cuda kernel #%u]", k->name_id);
			leaf[nleaf].name = kbuf;
		}
		nleaf++;
		c->kernels += v->count;
		c->kernel_ns += v->ns;
	} else {
		scale = p ? cupti__scale(p->ctr.copies_seen, p->ctr.copies_sampled) : 1;
		values[s->t_gpu_memcpy_ns] = llround((double)v->ns * scale);
		leaf[nleaf++] = (struct prof_frame){.kind = PROF_FRAME_SYNTH,
						    .name = dir_frame(k->kind == DEV_MEMSET ? DEV_DIR_MEMSET : k->dir)};
		c->copies += v->count;
		c->copy_ns += v->ns;
	}
	api = k->cbinfo ? get_str(&c->tab, k->tgid, DEV_NAME_API | k->cbinfo, HK_NAME) : NULL;
	if (api)
		leaf[nleaf++] = (struct prof_frame){.kind = PROF_FRAME_SYNTH, .name = api};
	snprintf(dbuf, sizeof(dbuf), "%u", k->device);
	extra[nextra++] = (struct prof_label){.key = "cuda_device", .str = dbuf};
	snprintf(sbuf, sizeof(sbuf), "%u", k->stream);
	extra[nextra++] = (struct prof_label){.key = "cuda_stream", .str = sbuf};
	if (k->graph_id) {
		snprintf(gbuf, sizeof(gbuf), "%u", k->graph_id);
		extra[nextra++] = (struct prof_label){.key = "cuda_graph", .str = gbuf};
	}

	n = stacks__read(bpf_map__fd(c->skel->maps.launch_stacks), k->ustack, ips, &trunc);
	s->truncated_stacks += (uint64_t)trunc;
	if (n > 0) {
		const struct ranges *rg = ranges_of(c, k->tgid);

		skip = rg ? cupti__internal_frames(ips, n, rg->r, rg->n) : 0;
		if (skip >= n)
			skip = 0; /* nothing of the user's: keep what there is */
		n -= skip;
		/* ips[skip] is a return address into the user's call: back into the call. */
		if (skip)
			ips[skip] -= 1;
	}
	/* The launch's own stack: its Python frames merged as in the launch's samples, and
	 * the names the thread had when it launched. */
	err = session__add_stack_sample_py(s, k->tgid, k->tid, k->names, NULL, 0, ips + skip, n, k->pystack, leaf,
					   nleaf, extra, nextra, values);
	free(owned);
	return err;
}

static int drain_buffer(struct cupti_tracer *c, unsigned buf)
{
	int counts_fd = bpf_map__fd(buf ? c->skel->maps.dcounts1 : c->skel->maps.dcounts0);
	int procs_fd = bpf_map__fd(c->skel->maps.dev_procs);
	struct dev_key key, next, *prev = NULL;
	struct dev_val val;
	int err = 0;

	while (bpf_map_get_next_key(counts_fd, prev, &next) == 0) {
		struct dev_proc p;
		bool have_p;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(counts_fd, &key, &val) || !val.count)
			continue;
		if (c->s->opts->all)
			procs__note_pid(c->s->procs, (int)key.tgid);
		have_p = bpf_map_lookup_elem(procs_fd, &key.tgid, &p) == 0;
		err = add_dev_sample(c, &key, &val, have_p ? &p : NULL);
		if (err)
			break;
	}
	stacks__clear(counts_fd, sizeof(struct dev_key));
	return err;
}

int cupti__drain(struct cupti_tracer *c, bool final)
{
	int err;

	if (!c->skel)
		return 0;
	/* Names first: the records about to be drained may use them. */
	ring_buffer__consume(c->rb);
	err = drain_buffer(c, stacks__flip(&c->skel->bss->buf_active));
	if (!err && final) {
		ring_buffer__consume(c->rb);
		err = drain_buffer(c, stacks__flip(&c->skel->bss->buf_active));
	}
	return err;
}

/* ---- --trace ---------------------------------------------------------------------------- */

int cupti__set_timeline(struct cupti_tracer *c, struct trace *t, size_t max_events)
{
	if (c->skel) /* the trace settings go in before the BPF object loads */
		return -EBUSY;
	devtrace__free(c->dt);
	c->dt = devtrace__new(t, max_events);
	return c->dt ? 0 : -ENOMEM;
}

int cupti__finish_timeline(struct cupti_tracer *c)
{
	if (!c->dt)
		return 0;
	if (c->rb)
		ring_buffer__consume(c->rb);
	return devtrace__link(c->dt);
}

void cupti__timeline_stats(struct cupti_tracer *c, uint64_t *events, uint64_t *dropped)
{
	struct devtrace_stats st = {0};

	if (c->dt)
		devtrace__stats(c->dt, &st);
	*events = st.records;
	*dropped = st.dropped + (c->skel ? c->skel->bss->lost_trace : 0);
}

/* ---- reporting ------------------------------------------------------------------------- */

void cupti__stats(struct cupti_tracer *c, struct cupti_stats *out)
{
	__u32 k, nk, *prev = NULL;
	struct dev_proc p;
	int procs_fd, fd;

	memset(out, 0, sizeof(*out));
	out->max_rate = c->max_rate;
	if (!c->skel)
		return;
	procs_fd = bpf_map__fd(c->skel->maps.dev_procs);
	fd = bpf_map__fd(c->skel->maps.stats);
	while (bpf_map_get_next_key(procs_fd, prev, &nk) == 0) {
		k = nk;
		prev = &k;
		if (bpf_map_lookup_elem(procs_fd, &k, &p))
			continue;
		out->launches_seen += p.ctr.launches_seen;
		out->launches_sampled += p.ctr.launches_sampled;
		out->copies_seen += p.ctr.copies_seen;
		out->copies_sampled += p.ctr.copies_sampled;
		out->dropped_unsampled += p.ctr.dropped_unsampled;
		out->lost += p.ctr.lost;
		out->unjoined += p.unjoined;
		out->invalid += p.invalid;
	}
	hmap_for_each(&c->tab, e)
	{
		if (e->k[2] == HK_WAS_ON)
			out->attached++;
	}
	out->kernels = c->kernels;
	out->copies = c->copies;
	out->kernel_ns = c->kernel_ns;
	out->copy_ns = c->copy_ns;
	out->lost_stacks = stacks__stat(fd, STAT_USTACK_LOST) + stacks__stat(fd, STAT_STACK_FULL);
	out->map_full = stacks__stat(fd, STAT_MAP_FULL);
	out->lost_events = c->skel->bss->lost_events;
	out->objects = c->objects;
	out->max_rate = c->max_rate;
}

const char *cupti__unavailable_reason(struct cupti_tracer *c)
{
	const char *lib = cupti__library_path();
	const char *why = NULL;

	if (c->rb)
		ring_buffer__consume(c->rb);
	if (c->kernels || c->copies)
		return NULL;
	if (c->load_failed) {
		snprintf(c->reason, sizeof(c->reason),
			 "a target has the injection library, but the device time BPF programs could not be loaded");
		return c->reason;
	}
	if (!c->objects) {
		snprintf(c->reason, sizeof(c->reason),
			 "no target had the injection library loaded (start the job with CUDA_INJECTION64_PATH=%s)",
			 lib ? lib : "/path/to/libgpubpf_inject.so");
		return c->reason;
	}
	hmap_for_each(&c->tab, e)
	{
		if (e->k[2] == HK_WAS_ON)
			return NULL; /* attached: no device work ran, which the counts say */
	}
	hmap_for_each(&c->tab, e)
	{
		if (e->k[2] == HK_STATUS)
			why = get_str(&c->tab, e->k[0], 0, HK_TEXT);
	}
	if (why)
		snprintf(c->reason, sizeof(c->reason), "the injection library stayed idle: %s", why);
	else
		snprintf(c->reason, sizeof(c->reason),
			 "the injection library is loaded but never attached (the target did not initialize CUDA "
			 "during the recording)");
	return c->reason;
}

int cupti__add_comments(struct cupti_tracer *c)
{
	const char *why = cupti__unavailable_reason(c);
	struct cupti_stats st;
	char rate[32];

	if (why)
		return profile__add_comment(c->s->prof, "gpu: device time unavailable: %s", why);
	cupti__stats(c, &st);
	if (st.max_rate)
		snprintf(rate, sizeof(rate), "at most %u/s", st.max_rate);
	else
		snprintf(rate, sizeof(rate), "every call");
	return profile__add_comment(
	    c->s->prof,
	    "gpu: device time from CUPTI (libgpubpf_inject.so) in %d of %d targets: %" PRIu64
	    " kernels (%.3f ms), %" PRIu64 " copies/memsets (%.3f ms) measured; sampled (%s) %" PRIu64 " of %" PRIu64
	    " launches and %" PRIu64 " of %" PRIu64
	    " copies; gpu_kernel_time and gpu_memcpy_time are scaled by seen/sampled per process "
	    "to estimate the whole recording; %" PRIu64 " records of unsampled launches dropped, %" PRIu64
	    " lost, %" PRIu64 " without a launch stack, %" PRIu64 " invalid",
	    st.attached, st.objects, st.kernels, (double)st.kernel_ns / 1e6, st.copies, (double)st.copy_ns / 1e6, rate,
	    st.launches_sampled, st.launches_seen, st.copies_sampled, st.copies_seen, st.dropped_unsampled, st.lost,
	    st.unjoined, st.invalid);
}

void cupti__summary(struct cupti_tracer *c, char *buf, size_t len)
{
	const char *why = cupti__unavailable_reason(c);
	struct cupti_stats st;

	if (why) {
		snprintf(buf, len, ", device time unavailable (%s)", why);
		return;
	}
	cupti__stats(c, &st);
	snprintf(buf, len, ", device time: %" PRIu64 " kernels %.3g ms, %" PRIu64 " copies %.3g ms%s", st.kernels,
		 (double)st.kernel_ns / 1e6, st.copies, (double)st.copy_ns / 1e6,
		 st.launches_sampled < st.launches_seen || st.copies_sampled < st.copies_seen ? " (sampled; scaled)"
											      : "");
}

/* ---- starting a command with the library --------------------------------------------- */

const char *cupti__library_path(void)
{
	static char path[PATH_MAX];
	const char *e = getenv("GPUBPF_INJECT_LIB");
	char exe[PATH_MAX - 32];
	ssize_t n;
	char *slash;

	if (e && *e)
		return access(e, R_OK) == 0 ? e : NULL;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	snprintf(path, sizeof(path), "%s/" LIB_NAME, exe);
	return access(path, R_OK) == 0 ? path : NULL;
}

int cupti__prepare_command(void)
{
	const char *cur = getenv("CUDA_INJECTION64_PATH"), *lib = cupti__library_path();

	if (cur && *cur) {
		if (!lib || strcmp(cur, lib) != 0)
			pr_warn("CUDA_INJECTION64_PATH is already set (%s): keeping it; device time needs %s", cur,
				lib ? lib : LIB_NAME);
		return 0;
	}
	if (!lib) {
		pr_debug("%s is not installed next to gpubpf: no device time", LIB_NAME);
		return -ENOENT;
	}
	return setenv("CUDA_INJECTION64_PATH", lib, 1) ? -errno : 0;
}
