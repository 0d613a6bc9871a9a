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

#include "bpfload.h"
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

#include "cupti_int.h"

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

const char *cpt_get_str(const struct hmap *m, uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t v;

	return hmap__get(m, a, b, c, &v) ? (const char *)(uintptr_t)v : NULL;
}

const char *cpt_dir_frame(uint32_t dir)
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
					cpt_get_str(&c->tab, e->tgid, DEV_NAME_API | e->cbinfo, HK_NAME));
	if (e->type != DEV_TR_RECORD || r->kind < DEV_KERNEL || r->kind > DEV_MEMSET || r->end < r->start)
		return 0;
	if (r->kind == DEV_KERNEL) {
		name = r->name_id ? cpt_get_str(&c->tab, e->tgid, r->name_id, HK_NAME) : NULL;
		owned = name ? demangle(name) : NULL;
		if (owned)
			name = owned;
		if (!name) {
			snprintf(kbuf, sizeof(kbuf), "[cuda kernel #%u]", r->name_id);
			name = kbuf;
		}
		ev.kind = TRACE_KERNEL;
	} else {
		name = cpt_dir_frame(r->kind == DEV_MEMSET ? DEV_DIR_MEMSET : r->dir);
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
			cpt_win_attached(c, e->tgid, e->addr);
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
	uint64_t t0;
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
	stacks__fpwalk_knobs(&c->skel->rodata->fpwalk_off, &c->skel->rodata->fpwalk_key_mask);
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
	t0 = bpfload__now();
	err = cupti_bpf__load(c->skel);
	if (!err)
		bpfload__report(c->skel->obj, "device time", t0);
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
	c->links.serial = true; /* USDT links: see links.h */
	pthread_mutex_init(&c->probe_lock, NULL);
	/* the launch probes are in from load until the windows first take them out */
	c->probes_on = true;
	c->probe_gen = DEV_PROBE_GEN_IN;
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
		if (e->k[2] == HK_NAME || e->k[2] == HK_TEXT || e->k[2] == HK_RANGES || e->k[2] == HK_WINT)
			free((void *)(uintptr_t)e->val);
	}
	est_group_free(&c->est);
	hmap__clear(&c->tab);
	hmap__clear(&c->scanned);
	cupti_bpf__destroy(c->skel);
	devtrace__free(c->dt);
	pthread_mutex_destroy(&c->probe_lock);
	free(c);
}

void cupti__set_budget(struct cupti_tracer *c, double budget_pct, double cost_per_hit, bool exact)
{
	double r;

	if (exact || c->win) {
		c->max_rate = 0; /* every call, or every call in a window */
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
	/* --no-device-time: a library already in the target (the job was started with it) is
	 * left idle, its probes never attached; CUPTI is never set up */
	if (strncmp(base, "libgpubpf_inject", 16) != 0)
		return;
	if (c->s->opts->no_device_time) {
		pr_debug("pid %d: %s left idle (--no-device-time)", pid, shown);
		c->left_idle++;
		return;
	}
	if (load_bpf(c))
		return;
	/* launch last: the library turns on when launch's and records' semaphores are both
	 * up, and by then name and status are listening too. */
	const struct {
		struct bpf_program *prog;
		const char *name;
		bool optional; /* libraries built before it lack it */
	} probes[] = {
	    {c->skel->progs.dev_name, "name", false},	    {c->skel->progs.dev_kname, "kname", true},
	    {c->skel->progs.dev_status, "status", false},   {c->skel->progs.dev_windows, "windows", true},
	    {c->skel->progs.dev_records, "records", false}, {c->skel->progs.dev_launch, "launch", false},
	};
	/* The kernel resolves this magic link to exactly the file objscan opened inside the
	 * target's root. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		struct bpf_link *l;

		/* windows: its semaphore tells the library at attach that this session wants
		 * device time in windows (an exact one follows everything from the start) */
		if (probes[i].prog == c->skel->progs.dev_windows && !c->win)
			continue;
		l = bpf_program__attach_usdt(probes[i].prog, attach_pid, path, DEV_PROVIDER, probes[i].name, NULL);

		if (!l && errno == ESRCH) {
			pr_debug("pid %d exited before the injection library's probes went in", pid);
			return;
		}
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
	cpt_ranges_refresh(c, (uint32_t)pid);
	c->objects++;
	pr_debug("pid %d: device timing through %s", pid, shown);
}

static void scan_pid(struct cupti_tracer *c, int pid)
{
	objscan__pid(pid, c->s->opts->all || c->s->opts->host_wide ? 0 : pid, &c->scanned, scan_object, c);
}

static void on_change(void *ctx, int pid)
{
	struct cupti_tracer *c = ctx;
	uint64_t v;

	scan_pid(c, pid);
	/* New objects are mapped (CUPTI, at attach): the trimming ranges are read again now,
	 * while the process lives. Read at the drain instead, a job that had exited or died
	 * by then kept its device time under the library's and CUPTI's frames (an H100:
	 * every launch_loop that ended before gpubpf's last drain). */
	if (hmap__get(&c->tab, (uint64_t)pid, 0, HK_LIB, &v))
		cpt_ranges_refresh(c, (uint32_t)pid);
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
