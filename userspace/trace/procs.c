// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpfload.h"
#include "dlstate.h"
#include "hmap.h"
#include "holdguard.h"
#include "links.h"
#include "log.h"
#include "mapsnap.h"
#include "procs.h"
#include "procs_int.h"
#include "stacks.h"
#include "procs.skel.h"

struct proc_ent *procs_find(struct procs *p, int pid)
{
	for (size_t i = 0; i < p->len; i++)
		if (p->ents[i].pid == pid)
			return &p->ents[i];
	return NULL;
}

struct proc_ent *procs_add_ent(struct procs *p, int pid, bool root)
{
	struct proc_ent *e = procs_find(p, pid);

	if (e) {
		e->alive = true;
		e->root |= root;
		return e;
	}
	if (p->len == p->cap) {
		size_t ncap = p->cap ? p->cap * 2 : 16;
		struct proc_ent *n = realloc(p->ents, ncap * sizeof(*n));

		if (!n)
			return NULL;
		p->ents = n;
		p->cap = ncap;
	}
	e = &p->ents[p->len++];
	*e = (struct proc_ent){.pid = pid, .alive = true, .root = root};
	return e;
}

void procs_track(struct procs *p, int pid)
{
	int err = syms__track_pid(p->syms, pid);

	if (err && err != -ESRCH)
		pr_debug("cannot read the mappings of pid %d: %s", pid, strerror(-err));
}

static void changed(struct procs *p, int pid)
{
	for (int i = 0; i < p->n_on_change; i++)
		p->on_change[i].cb(p->on_change[i].ctx, pid);
}

static bool is_target(struct procs *p, int pid)
{
	__u32 key = (__u32)pid, val;

	return bpf_map_lookup_elem(procs__targets_fd(p), &key, &val) == 0;
}

/* host_wide (the agent): an event of a process outside the target set goes to the
 * watcher, which may make it a target; then it is handled as a target's event. */
static bool watched(struct procs *p, const struct gpubpf_proc_event *ev)
{
	if (!p->opts->host_wide || p->opts->all || is_target(p, (int)ev->pid))
		return true;
	if (!p->watch || !p->watch(p->watch_ctx, ev) || ev->type == PROC_EV_EXIT)
		return false;
	return procs_set_target(p, (int)ev->pid, TARGET_ROOT) == 0;
}

void procs__set_watch(struct procs *p, procs_watch_fn cb, void *ctx)
{
	p->watch = cb;
	p->watch_ctx = ctx;
}

void procs__rescan(struct procs *p, int pid)
{
	mapsnap__begin();
	changed(p, pid);
	mapsnap__end();
}

/* Where PID's dynamic linker keeps its r_state, from the maps its event's handlers read:
 * for the BPF side, which lets a dlopen's first call go by it (dlstate.h). */
static void learn_rstate(struct procs *p, int pid)
{
	struct proc_ent *e = procs_find(p, pid); /* the handlers may have added entries */
	__u32 key = (__u32)pid;
	char *maps;

	if (!e || e->rstate_at || !p->dl.files.len)
		return;
	maps = mapsnap__read(pid, 64u << 20, true, NULL);
	e->rstate_at = dlstate__addr(&p->dl, maps);
	free(maps);
	if (e->rstate_at && bpf_map_update_elem(bpf_map__fd(p->skel->maps.rstate_at), &key, &e->rstate_at, BPF_ANY))
		e->rstate_at = 0;
}

static uint64_t procs_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A hold that began at AT_NS (the BPF clock: CLOCK_MONOTONIC) ended now. */
static void held(struct procs *p, uint64_t at_ns)
{
	uint64_t now = procs_mono_ns(), d;

	d = now > at_ns ? now - at_ns : 0;
	p->holds.n++;
	p->holds.total_ns += d;
	if (d > p->holds.max_ns)
		p->holds.max_ns = d;
}

void procs__holds(const struct procs *p, struct procs_holds *out)
{
	*out = p->holds;
	out->passed = __atomic_load_n(&p->skel->bss->loads_passed, __ATOMIC_RELAXED);
}

static int on_event(void *ctx, void *data, size_t len)
{
	struct procs *p = ctx;
	const struct gpubpf_proc_event *ev = data;
	struct proc_ent *e;
	int err = 0;

	if (len < sizeof(*ev))
		return 0;
	/* the watcher and the handlers read the process's maps once (mapsnap.h) */
	mapsnap__begin();
	if (!watched(p, ev))
		goto resume;
	switch (ev->type) {
	case PROC_EV_FORK:
		pr_debug("following pid %u (%.16s), forked by %u", ev->pid, ev->comm, ev->ppid);
		e = procs_add_ent(p, (int)ev->pid, false);
		if (!e) {
			err = -ENOMEM;
			break;
		}
		e->rstate_at = 0; /* a pid used before may come back: learnt again */
		procs_track(p, (int)ev->pid);
		if (p->on_task.cb)
			p->on_task.cb(p->on_task.ctx, (int)ev->pid);
		changed(p, (int)ev->pid);
		learn_rstate(p, (int)ev->pid);
		break;
	case PROC_EV_THREAD:
		if (p->on_task.cb)
			p->on_task.cb(p->on_task.ctx, (int)ev->pid);
		break;
	case PROC_EV_EXEC:
	case PROC_EV_LOAD:
		e = procs_find(p, (int)ev->pid);
		pr_debug("pid %u %s (%.16s)%s", ev->pid, ev->type == PROC_EV_EXEC ? "exec'd" : "loaded objects",
			 ev->comm, ev->paused ? ", held until probed" : "");
		e = e ? e : procs_add_ent(p, (int)ev->pid, false);
		if (!e) {
			err = -ENOMEM;
			break;
		}
		if (ev->type == PROC_EV_EXEC)
			e->rstate_at = 0; /* another address space */
		procs_track(p, (int)ev->pid);
		changed(p, (int)ev->pid);
		learn_rstate(p, (int)ev->pid);
		break;
	case PROC_EV_EXIT:
		e = procs_find(p, (int)ev->pid);
		if (e)
			e->alive = false;
		for (int i = 0; i < p->n_on_exit; i++)
			p->on_exit[i].cb(p->on_exit[i].ctx, (int)ev->pid);
		holdguard__forget(bpf_map__fd(p->skel->maps.held), (pid_t)ev->pid);
		break;
	}
resume:
	mapsnap__end();
	/* Whatever happened above, a process we stopped runs on. */
	if (ev->paused) {
		holdguard__resume((pid_t)ev->pid);
		held(p, ev->ts_ns);
	}
	return err;
}

int procs__add_on_change(struct procs *p, void (*cb)(void *ctx, int pid), void *ctx)
{
	if (p->n_on_change >= PROCS_MAX_ON_CHANGE)
		return -E2BIG;
	p->on_change[p->n_on_change].cb = cb;
	p->on_change[p->n_on_change].ctx = ctx;
	p->n_on_change++;
	return 0;
}

void procs__set_on_task(struct procs *p, void (*cb)(void *ctx, int tid), void *ctx)
{
	p->on_task.cb = cb;
	p->on_task.ctx = ctx;
	p->skel->bss->report_threads = cb != NULL;
}

int procs__add_on_exit(struct procs *p, void (*cb)(void *ctx, int pid), void *ctx)
{
	if (p->n_on_exit >= PROCS_MAX_ON_CHANGE)
		return -E2BIG;
	p->on_exit[p->n_on_exit].cb = cb;
	p->on_exit[p->n_on_exit].ctx = ctx;
	p->n_on_exit++;
	return 0;
}

int procs__attach_dl_state(struct procs *p, int fd, uint64_t offset)
{
	struct bpf_link *l;
	struct stat st;
	char path[64];
	int err;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (hmap__get(&p->dl_files, st.st_dev, st.st_ino, 0, NULL))
		return 0;
	/* The kernel resolves this magic link to exactly the file the caller opened. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	l = bpf_program__attach_uprobe(p->skel->progs.on_dl_debug_state, false, -1, path, (size_t)offset);
	if (!l) {
		err = -errno;
		if (!p->warned_dl && !log_verbose)
			pr_warn("cannot watch the dynamic linker for library loads: %s; CUDA libraries loaded "
				"later are found only at the next rescan (-v says more)",
				strerror(-err));
		p->warned_dl = true;
		return err;
	}
	if (linkset__add(&p->links, l) || hmap__put(&p->dl_files, st.st_dev, st.st_ino, 0, 1)) {
		bpf_link__destroy(l);
		return -ENOMEM;
	}
	err = dlstate__add_file(&p->dl, fd);
	if (err)
		pr_debug("no r_state in this dynamic linker (each call of its _dl_debug_state is read as a load): %s",
			 strerror(-err));
	return 0;
}

void procs__end_holds(struct procs *p)
{
	int n = holdguard__resume_all(bpf_map__fd(p->skel->maps.pause_pids), bpf_map__fd(p->skel->maps.held));

	if (n)
		pr_debug("resumed %d held process%s", n, n == 1 ? "" : "es");
}

struct procs *procs__new(const struct record_opts *o, struct syms *syms, const struct task_offsets *task_off)
{
	struct procs *p = calloc(1, sizeof(*p));
	uint64_t t0;
	int err;

	if (!p)
		return NULL;
	p->opts = o;
	p->syms = syms;
	p->gate_fd = -1;
	p->error_fd = -1;
	p->guard.ctl_fd = -1;
	p->skel = procs_bpf__open();
	if (!p->skel) {
		err = -errno;
		goto fail;
	}
	/* host_wide: lifecycle events of every process; samplers still follow the target set */
	p->skel->rodata->trace_all = o->all || o->host_wide;
	p->skel->rodata->self_tgid = (__u32)getpid();
	p->skel->rodata->task_off = *task_off;
	p->skel->rodata->follow_children = o->inherit;
	p->skel->rodata->lazy_wakeup = o->host_wide && !o->all;
	t0 = bpfload__now();
	err = procs_bpf__load(p->skel);
	if (!err)
		bpfload__report(p->skel->obj, "processes", t0);
	if (err)
		goto fail;
	err = procs_bpf__attach(p->skel);
	if (err)
		goto fail;
	p->rb = ring_buffer__new(bpf_map__fd(p->skel->maps.proc_events), on_event, p, NULL);
	if (!p->rb) {
		err = -errno;
		goto fail;
	}
	return p;
fail:
	procs__free(p);
	errno = err < 0 ? -err : EINVAL;
	return NULL;
}

void procs__free(struct procs *p)
{
	if (!p)
		return;
	/* No process stays stopped: stop holding, detach, then resume whatever a program
	 * still running during the detach stopped. */
	if (p->skel)
		procs__end_holds(p);
	linkset__destroy(&p->links);
	if (p->skel) {
		bpf_link__destroy(p->skel->links.on_exec);
		p->skel->links.on_exec = NULL;
		procs__end_holds(p);
	}
	holdguard__stop(&p->guard);
	if (p->gate_fd >= 0)
		close(p->gate_fd);
	if (p->error_fd >= 0)
		close(p->error_fd);
	/* A child that never got released must not linger at the gate. */
	if (p->child > 0 && !p->child_reaped && p->gate_fd >= 0) {
		kill(p->child, SIGKILL);
		waitpid(p->child, NULL, 0);
	}
	ring_buffer__free(p->rb);
	procs_bpf__destroy(p->skel);
	hmap__clear(&p->dl_files);
	dlstate__free(&p->dl);
	free(p->ents);
	free(p);
}

int procs__targets_fd(const struct procs *p)
{
	return bpf_map__fd(p->skel->maps.targets);
}

int procs__comms_fd(const struct procs *p)
{
	return bpf_map__fd(p->skel->maps.comms);
}

int procs_set_target(struct procs *p, int pid, __u32 val)
{
	__u32 key = (__u32)pid;

	if (bpf_map_update_elem(procs__targets_fd(p), &key, &val, BPF_ANY))
		return -errno;
	return 0;
}

int procs__add_pid(struct procs *p, int pid)
{
	int err;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return -ESRCH;
	err = procs_set_target(p, pid, TARGET_ROOT);
	if (err)
		return err;
	if (!procs_add_ent(p, pid, true))
		return -ENOMEM;
	procs_track(p, pid);
	return 0;
}

int procs__poll(struct procs *p, int timeout_ms)
{
	int n = ring_buffer__poll(p->rb, timeout_ms);

	if (n == -EINTR)
		return 0;
	if (n >= 0 && p->opts->host_wide && !p->opts->all) {
		/* lazy_wakeup: the events that did not wake us */
		int m = ring_buffer__consume(p->rb);

		if (m > 0)
			n += m;
	}
	return n;
}

/* Alive unless gone or a zombie. Target memory is not read here: /proc/PID/stat only. */
static bool pid_alive(int pid)
{
	char path[64], buf[512], *paren;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* comm may hold ')' itself: the state follows the last one. */
	paren = strrchr(buf, ')');
	if (!paren || paren[1] != ' ')
		return false;
	return paren[2] != 'Z' && paren[2] != 'X';
}

#define PROCS_TRACK_SHARE 0.002
#define PROCS_TRACK_MAX_S 10.0

int procs__refresh(struct procs *p)
{
	/* The agent runs for days over many processes: their mappings are read again at
	 * exec and at every load the dynamic linker reports (procs__rescan), and at a
	 * symbolization miss (syms.c); the periodic look is the safety net, every 5 ticks
	 * there. A recording, which is short and wants every mapping, looks every tick
	 * where that is cheap, and spaces its looks to take at most PROCS_TRACK_SHARE of a
	 * CPU where it is not: a PyTorch job's thousands of mappings take the kernel ~2.6 us
	 * each to render (13 ms a look at 5,000: every 6.5 s). */
	double t0 = (double)procs_mono_ns() / 1e9;
	bool retrack = p->opts->host_wide ? p->refreshes++ % 5 == 0 : t0 >= p->retrack_at;
	int live_roots = 0;

	if (p->child > 0 && !p->child_reaped && p->gate_fd < 0) {
		pid_t r = waitpid(p->child, &p->child_status, WNOHANG);

		if (r == p->child)
			p->child_reaped = true;
	}
	for (size_t i = 0; i < p->len; i++) {
		struct proc_ent *e = &p->ents[i];

		if (!e->alive)
			continue;
		if (e->pid == p->child && p->child_reaped)
			e->alive = false;
		else
			e->alive = pid_alive(e->pid);
		if (e->alive) {
			if (retrack)
				procs_track(p, e->pid);
			live_roots += e->root;
		} else if (!p->opts->all) {
			__u32 key = (__u32)e->pid;

			bpf_map_delete_elem(procs__targets_fd(p), &key);
		}
	}
	p->looked = retrack || p->opts->host_wide;
	if (retrack && !p->opts->host_wide) {
		double cost = (double)procs_mono_ns() / 1e9 - t0;

		p->retrack_at =
		    t0 + (cost / PROCS_TRACK_SHARE < PROCS_TRACK_MAX_S ? cost / PROCS_TRACK_SHARE : PROCS_TRACK_MAX_S);
	}
	return live_roots;
}

bool procs__maps_looked(const struct procs *p)
{
	return p->looked;
}

void procs__note_pid(struct procs *p, int pid)
{
	if (procs_find(p, pid))
		return;
	if (procs_add_ent(p, pid, false))
		procs_track(p, pid);
}

int procs__num_live(const struct procs *p)
{
	int n = 0;

	for (size_t i = 0; i < p->len; i++)
		n += p->ents[i].alive;
	return n;
}

unsigned long long procs__lost_events(const struct procs *p)
{
	return p->skel->bss->lost_events;
}

void procs__report_switches(struct procs *p, bool on)
{
	p->skel->bss->report_switches = on;
}

void procs__take_exit_switches(struct procs *p, void (*cb)(void *ctx, int tid, uint64_t n), void *ctx)
{
	struct bpf_map *m = p->skel->maps.exit_switches;
	struct stacks_taken t;

	/* read and emptied as the sampler's counts are: batches of lookup-and-delete */
	if (stacks__take(bpf_map__fd(m), sizeof(__u32), sizeof(__u64), bpf_map__max_entries(m), &t) == 0) {
		for (size_t i = 0; i < t.n; i++) {
			__u32 tid;
			__u64 n;

			memcpy(&tid, t.keys + i * sizeof(tid), sizeof(tid));
			memcpy(&n, t.vals + i * sizeof(n), sizeof(n));
			cb(ctx, (int)tid, n);
		}
	}
	stacks__taken_free(&t);
}

int procs__live_pids(const struct procs *p, int *out, int max)
{
	int n = 0;

	for (size_t i = 0; i < p->len && n < max; i++)
		if (p->ents[i].alive)
			out[n++] = p->ents[i].pid;
	return n;
}

int procs__add_ringbuf(struct procs *p, int map_fd, int (*cb)(void *ctx, void *data, size_t len), void *ctx)
{
	return ring_buffer__add(p->rb, map_fd, cb, ctx);
}

int procs__drain_events(struct procs *p)
{
	int n = ring_buffer__consume(p->rb);

	return n < 0 ? n : 0;
}
