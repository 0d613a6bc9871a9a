// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "agent_labels.h"
#include "agent_select.h"
#include "cuda_api.h"
#include "elfsym.h"
#include "hmap.h"
#include "log.h"
#include "mapsnap.h"
#include "procmaps.h"
#include "procroot.h"
#include "procs.h"
#include "readfile.h"

#define MAPS_MAX (16u << 20)
#define VERDICTS_MAX 100000 /* objects remembered; past it they are read again */
#define V_PLAIN 1
#define V_CUDA 2

struct agent_select {
	const struct agent_opts *o;
	struct procs *procs;
	regex_t re;
	bool have_re;
	struct hmap verdicts; /* (0, dev, inode) -> V_PLAIN or V_CUDA */
	struct hmap dl;	      /* (0, dev, inode) -> 1: its _dl_debug_state is probed */
	struct hmap recent;   /* (pid, 0, 0) -> 1: looked at this tick, 2: loaded again since */
	agent_selected_fn cb;
	void *ctx;
};

const char *agent_select__describe(const struct agent_opts *o, char *buf, size_t len)
{
	switch (o->sel) {
	case SEL_CUDA:
		snprintf(buf, len, "every CUDA process");
		break;
	case SEL_ALL:
		snprintf(buf, len, "every process");
		break;
	case SEL_PIDS:
		snprintf(buf, len, "%d named process%s and their children", o->sel_npids,
			 o->sel_npids == 1 ? "" : "es");
		break;
	case SEL_COMM:
		snprintf(buf, len, "processes named like /%s/", o->sel_arg);
		break;
	case SEL_CGROUP:
		snprintf(buf, len, "processes in cgroup %s", o->sel_arg);
		break;
	}
	return buf;
}

struct agent_select *agent_select__new(const struct agent_opts *o, agent_selected_fn cb, void *ctx)
{
	struct agent_select *sel = calloc(1, sizeof(*sel));

	if (!sel)
		return NULL;
	sel->o = o;
	sel->cb = cb;
	sel->ctx = ctx;
	if (o->sel == SEL_COMM) {
		int rc = regcomp(&sel->re, o->sel_arg, REG_EXTENDED | REG_NOSUB);

		if (rc) {
			char msg[128];

			regerror(rc, &sel->re, msg, sizeof(msg));
			pr_err("agent: --select comm=%s: %s", o->sel_arg, msg);
			free(sel);
			errno = EINVAL;
			return NULL;
		}
		sel->have_re = true;
	}
	return sel;
}

void agent_select__free(struct agent_select *sel)
{
	if (!sel)
		return;
	if (sel->have_re)
		regfree(&sel->re);
	hmap__clear(&sel->verdicts);
	hmap__clear(&sel->dl);
	hmap__clear(&sel->recent);
	free(sel);
}

/* Look at one object (open at FD): CUDA entry points? The dynamic linker? */
static int verdict_of(struct agent_select *sel, int fd, uint64_t dev, uint64_t ino, const char *shown)
{
	struct elfsym_want want[256];
	int n = cuda_num_apis, found, v = V_PLAIN;

	for (int i = 0; i < n; i++)
		want[i] = (struct elfsym_want){.name = cuda_apis[i].name};
	want[n] = (struct elfsym_want){.name = "_dl_debug_state"};
	found = elfsym__lookup_fd_flags(fd, want, n + 1, ELFSYM_CUDART);
	if (found > 0 && (found > 1 || !want[n].offset))
		v = V_CUDA;
	if (found > 0 && want[n].offset && !hmap__get(&sel->dl, 0, dev, ino, NULL)) {
		int err;

		/* Loads in every process using this dynamic linker now reach the watcher. */
		err = procs__attach_dl_state(sel->procs, fd, want[n].offset);
		if (err)
			pr_debug("agent: cannot probe _dl_debug_state in %s: %s", shown, strerror(-err));
		else
			pr_debug("agent: loads reach the agent through _dl_debug_state in %s", shown);
		hmap__put(&sel->dl, 0, dev, ino, 1);
	}
	if (sel->verdicts.len >= VERDICTS_MAX)
		hmap__clear(&sel->verdicts);
	hmap__put(&sel->verdicts, 0, dev, ino, (uint64_t)v);
	return v;
}

static bool maps_cuda(struct agent_select *sel, int pid)
{
	char *buf, *line, *save = NULL;
	bool cuda = false;

	buf = mapsnap__read(pid, MAPS_MAX, true, NULL);
	if (!buf)
		return false;
	for (line = strtok_r(buf, "\n", &save); line && !cuda; line = strtok_r(NULL, "\n", &save)) {
		struct procmaps_entry e;
		char path[4096];
		struct stat st;
		uint64_t dev, v;
		int fd;

		if (procmaps__parse_line(line, strlen(line), &e) || !e.exec || !procmaps__is_file(&e) || e.deleted)
			continue;
		dev = makedev(e.dev_major, e.dev_minor);
		if (hmap__get(&sel->verdicts, 0, dev, e.inode, &v)) {
			cuda = v == V_CUDA;
			continue;
		}
		if (e.path_len >= sizeof(path))
			continue;
		memcpy(path, e.path, e.path_len);
		path[e.path_len] = '\0';
		/* The file must be the one mapped: a target can replace a path's file. */
		fd = procroot__open(pid, path, &(struct procroot_rule){.same_file = true, .ino = (ino_t)e.inode});
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0)
			cuda = verdict_of(sel, fd, dev, e.inode, path) == V_CUDA;
		close(fd);
	}
	free(buf);
	return cuda;
}

/* At an exec only the executable (and the dynamic linker) is mapped: cudart linked into
 * it is found here, without reading the maps; shared libraries come with the loads. */
static bool exe_cuda(struct agent_select *sel, int pid)
{
	char path[64];
	struct stat st;
	uint64_t v;
	bool cuda = false;
	int fd;

	/* the magic link opens the very file executed, in whatever root it lives */
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0) {
		if (hmap__get(&sel->verdicts, 0, st.st_dev, st.st_ino, &v))
			cuda = v == V_CUDA;
		else
			cuda = verdict_of(sel, fd, st.st_dev, st.st_ino, path) == V_CUDA;
	}
	close(fd);
	return cuda;
}

static bool in_cgroup(const char *want, int pid)
{
	char path[64], cg[4096], *buf;
	size_t wl = strlen(want);
	bool ok;

	while (wl > 1 && want[wl - 1] == '/')
		wl--;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	buf = readfile__path(path, 65536, true, NULL);
	ok = buf && labels__cgroup_path(buf, cg, sizeof(cg));
	free(buf);
	if (!ok)
		return false;
	if (wl == 1 && want[0] == '/')
		return true;
	return !strncmp(cg, want, wl) && (cg[wl] == '\0' || cg[wl] == '/');
}

static bool comm_matches(struct agent_select *sel, int pid, const char *comm)
{
	char buf[32], path[64];
	int fd;
	ssize_t n;

	if (!comm) {
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return false;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			return false;
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		comm = buf;
	}
	return regexec(&sel->re, comm, 0, NULL, 0) == 0;
}

/* Does PID qualify now? COMM: its name when the event carried it. */
static bool qualifies(struct agent_select *sel, int pid, const char *comm)
{
	switch (sel->o->sel) {
	case SEL_CUDA:
		return maps_cuda(sel, pid);
	case SEL_COMM:
		return comm_matches(sel, pid, comm);
	case SEL_CGROUP:
		return in_cgroup(sel->o->sel_arg, pid);
	case SEL_PIDS:
		for (int i = 0; i < sel->o->sel_npids; i++)
			if (sel->o->sel_pids[i] == pid)
				return true;
		return false;
	case SEL_ALL:
		return true;
	}
	return false;
}

static bool is_target(struct agent_select *sel, int pid)
{
	__u32 key = (__u32)pid, val;

	return bpf_map_lookup_elem(procs__targets_fd(sel->procs), &key, &val) == 0;
}

/* Make PID a target outside an event (at start, or at a tick). */
static bool take(struct agent_select *sel, int pid)
{
	if (procs__add_pid(sel->procs, pid))
		return false;
	procs__rescan(sel->procs, pid);
	sel->cb(sel->ctx, pid);
	return true;
}

int agent_select__start(struct agent_select *sel, struct procs *procs)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int self = (int)getpid(), n = 0;

	sel->procs = procs;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid == self || is_target(sel, (int)pid))
			continue;
		if (qualifies(sel, (int)pid, NULL) && take(sel, (int)pid))
			n++;
	}
	closedir(d);
	return n;
}

bool agent_select__event(void *ctx, const struct gpubpf_proc_event *ev)
{
	struct agent_select *sel = ctx;
	int pid = (int)ev->pid;
	uint64_t state = 0;
	bool yes = false;

	switch (ev->type) {
	case PROC_EV_FORK:
		/* a target's child is part of its job (dataloader workers, torchrun's ranks) */
		yes = is_target(sel, (int)ev->ppid);
		break;
	case PROC_EV_EXEC:
	case PROC_EV_LOAD:
		if (sel->o->sel == SEL_PIDS || (ev->type == PROC_EV_LOAD && sel->o->sel != SEL_CUDA))
			return false;
		if (sel->o->sel == SEL_CUDA && ev->type == PROC_EV_EXEC) {
			yes = exe_cuda(sel, pid);
			break;
		}
		if (sel->o->sel == SEL_CUDA) {
			/* A process loading many objects (Python importing its extensions) is
			 * read once now and once more at the tick, not once per load. */
			hmap__get(&sel->recent, (uint64_t)pid, 0, 0, &state);
			if (state) {
				hmap__put(&sel->recent, (uint64_t)pid, 0, 0, 2);
				return false;
			}
			hmap__put(&sel->recent, (uint64_t)pid, 0, 0, 1);
		}
		{
			char comm[sizeof(ev->comm) + 1];

			memcpy(comm, ev->comm, sizeof(ev->comm));
			comm[sizeof(ev->comm)] = '\0';
			yes = qualifies(sel, pid, ev->type == PROC_EV_EXEC ? comm : NULL);
		}
		break;
	default:
		return false;
	}
	if (yes)
		sel->cb(sel->ctx, pid);
	return yes;
}

void agent_select__reset(struct agent_select *sel)
{
	hmap__clear(&sel->dl);
	hmap__clear(&sel->recent);
	/* a verdict also stands for "its dynamic linker is probed": look again */
	hmap__clear(&sel->verdicts);
	sel->procs = NULL;
}

void agent_select__tick(struct agent_select *sel)
{
	hmap_for_each(&sel->recent, e)
	{
		int pid = (int)e->k[0];

		if (e->val == 2 && !is_target(sel, pid) && kill(pid, 0) == 0 && qualifies(sel, pid, NULL))
			take(sel, pid);
	}
	hmap__clear(&sel->recent);
}
