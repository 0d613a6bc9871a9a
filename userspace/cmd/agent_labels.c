// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_labels.h"
#include "pyroscope.h"
#include "readfile.h"

#define GPU_RECHECK_S 60
#define MAX_FDS 65536

struct agent_procs {
	struct agent_proc *v;
	size_t n, cap;
};

/* ---- pure helpers ---- */

int labels__environ(int fd, size_t max, const char *const *names, int n, char (*vals)[LABELS_VALUE_MAX])
{
	/* The start of the current entry, enough for NAME=value; the rest of a longer
	 * entry is skipped, never kept. */
	char chunk[4096], ent[64 + LABELS_VALUE_MAX];
	size_t elen = 0, total = 0;
	bool skip = false;
	int found = 0, err = 0;

	for (int i = 0; i < n; i++)
		vals[i][0] = '\0';
	while (total < max) {
		size_t want = max - total < sizeof(chunk) ? max - total : sizeof(chunk);
		ssize_t r = read(fd, chunk, want);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			break;
		}
		if (r == 0)
			break;
		total += (size_t)r;
		for (ssize_t i = 0; i < r; i++) {
			if (chunk[i] != '\0') {
				if (!skip && elen < sizeof(ent) - 1)
					ent[elen++] = chunk[i];
				else
					skip = true;
				continue;
			}
			ent[elen] = '\0';
			for (int k = 0; k < n; k++) {
				size_t nl = strlen(names[k]);

				if (!vals[k][0] && !strncmp(ent, names[k], nl) && ent[nl] == '=') {
					snprintf(vals[k], LABELS_VALUE_MAX, "%s", ent + nl + 1);
					found += vals[k][0] != '\0';
				}
			}
			elen = 0;
			skip = false;
		}
	}
	/* A last entry without its NUL (cut at MAX) is not trusted: it may be partial. */
	explicit_bzero(chunk, sizeof(chunk));
	explicit_bzero(ent, sizeof(ent));
	return err ? err : found;
}

static bool is_hex64(const char *s, size_t n)
{
	if (n != 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return true;
}

/* The last run of 64 lowercase hex digits in S[0, N) bounded by a non-alphanumeric
 * character or the ends: "docker-<id>.scope", "/docker/<id>", "cri-containerd-<id>.scope",
 * "crio-<id>.scope", "libpod-<id>.scope", "/kubepods/.../<id>". */
static const char *last_id(const char *s, size_t n)
{
	const char *best = NULL;

	for (size_t i = 0; i + 64 <= n; i++) {
		bool left = i == 0 || !isalnum((unsigned char)s[i - 1]);
		bool right = i + 64 == n || !isalnum((unsigned char)s[i + 64]);

		if (left && right && is_hex64(s + i, 64))
			best = s + i;
	}
	return best;
}

bool labels__container(const char *cgroup, char *out, size_t cap)
{
	const char *line = cgroup, *best = NULL, *v2 = NULL;

	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		const char *id = last_id(line, len);

		if (id && !strncmp(line, "0::", 3))
			v2 = id;
		else if (id)
			best = id;
		line = nl ? nl + 1 : NULL;
	}
	if (v2)
		best = v2;
	if (!best || cap < 13)
		return false;
	memcpy(out, best, 12);
	out[12] = '\0';
	return true;
}

bool labels__cgroup_path(const char *cgroup, char *out, size_t cap)
{
	const char *line = cgroup, *sysd = NULL;
	size_t sysd_len = 0;

	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);

		if (len >= 3 && !strncmp(line, "0::", 3)) {
			snprintf(out, cap, "%.*s", (int)(len - 3), line + 3);
			return true;
		}
		if (len > 14 && strstr(line, ":name=systemd:") && strstr(line, ":name=systemd:") < line + len) {
			sysd = strstr(line, ":name=systemd:") + 14;
			sysd_len = len - (size_t)(sysd - line);
		}
		line = nl ? nl + 1 : NULL;
	}
	if (!sysd)
		return false;
	snprintf(out, cap, "%.*s", (int)sysd_len, sysd);
	return true;
}

static const char *base_of(const char *p, size_t len, size_t *blen)
{
	const char *b = p;

	for (size_t i = 0; i < len; i++)
		if (p[i] == '/')
			b = p + i + 1;
	*blen = len - (size_t)(b - p);
	return b;
}

void labels__service(const char *exe, const char *cmdline, size_t len, char *out, size_t cap)
{
	const char *argv[64], *b;
	size_t blen, argc = 0;

	out[0] = '\0';
	for (size_t i = 0; i < len && argc < 64; i += strnlen(cmdline + i, len - i) + 1)
		argv[argc++] = cmdline + i;
	b = exe ? base_of(exe, strlen(exe), &blen) : NULL;
	if (b && blen >= 6 && !strncmp(b, "python", 6)) {
		for (size_t i = 1; i < argc; i++) {
			const char *a = argv[i];
			size_t al = strnlen(a, len - (size_t)(a - cmdline));

			if (!strcmp(a, "-m") && i + 1 < argc) {
				snprintf(out, cap, "%.*s", (int)strnlen(argv[i + 1], 127), argv[i + 1]);
				return;
			}
			if (!strcmp(a, "-c") || !strcmp(a, "-"))
				break;
			if (!strcmp(a, "-W") || !strcmp(a, "-X")) {
				i++;
				continue;
			}
			if (a[0] == '-')
				continue;
			a = base_of(a, al, &al);
			snprintf(out, cap, "%.*s", (int)(al < 127 ? al : 127), a);
			return;
		}
	}
	if (b)
		snprintf(out, cap, "%.*s", (int)(blen < 127 ? blen : 127), b);
}

/* ---- reading a process ---- */

static void read_small(int pid, const char *name, char *out, size_t cap)
{
	char path[64], *buf;
	size_t n = 0;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	buf = readfile__path(path, cap - 1, true, &n);
	if (!buf)
		return;
	memcpy(out, buf, n + 1);
	free(buf);
	out[strcspn(out, "\n")] = '\0';
}

static uint64_t starttime_of(int pid)
{
	char path[64], *buf, *p;
	unsigned long long st = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	buf = readfile__path(path, 4096, true, NULL);
	if (!buf)
		return 0;
	/* comm may hold ')' and spaces: fields count from the last ')' (state is 3rd) */
	p = strrchr(buf, ')');
	if (p &&
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &st) != 1)
		st = 0;
	free(buf);
	return st;
}

static void read_gpus(struct agent_proc *p)
{
	char dpath[64], lpath[320], target[64];
	bool used[64] = {false};
	size_t off = 0;
	struct dirent *de;
	int seen = 0;
	DIR *d;

	p->gpu[0] = '\0';
	snprintf(dpath, sizeof(dpath), "/proc/%d/fd", p->pid);
	d = opendir(dpath);
	if (!d)
		return;
	while ((de = readdir(d)) && seen++ < MAX_FDS) {
		ssize_t n;
		unsigned idx;
		char extra;

		if (de->d_name[0] == '.')
			continue;
		snprintf(lpath, sizeof(lpath), "%s/%s", dpath, de->d_name);
		n = readlink(lpath, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		/* /dev/nvidiaN is one device; nvidiactl, nvidia-uvm and the caps are not */
		if (sscanf(target, "/dev/nvidia%u%c", &idx, &extra) == 1 && idx < 64)
			used[idx] = true;
	}
	closedir(d);
	for (unsigned i = 0; i < 64 && off + 4 < sizeof(p->gpu); i++)
		if (used[i])
			off += (size_t)snprintf(p->gpu + off, sizeof(p->gpu) - off, "%s%u", off ? "+" : "", i);
}

static void read_proc(struct agent_proc *p, double now)
{
	static const char *const names[] = {"OTEL_SERVICE_NAME", "PYROSCOPE_APPLICATION_NAME", "RANK", "LOCAL_RANK",
					    "WORLD_SIZE"};
	char vals[5][LABELS_VALUE_MAX], path[64], exe[512], *buf;
	size_t n = 0;
	ssize_t el;
	int fd;

	p->starttime = starttime_of(p->pid);
	read_small(p->pid, "comm", p->comm, sizeof(p->comm));
	snprintf(path, sizeof(path), "/proc/%d/environ", p->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (labels__environ(fd, LABELS_ENV_MAX, names, 5, vals) < 0)
			memset(vals, 0, sizeof(vals));
		close(fd);
	} else {
		memset(vals, 0, sizeof(vals));
	}
	snprintf(p->rank, sizeof(p->rank), "%.15s", vals[2]);
	snprintf(p->local_rank, sizeof(p->local_rank), "%.15s", vals[3]);
	snprintf(p->world_size, sizeof(p->world_size), "%.15s", vals[4]);
	if (vals[0][0] || vals[1][0]) {
		snprintf(p->service, sizeof(p->service), "%.127s", vals[0][0] ? vals[0] : vals[1]);
	} else {
		snprintf(path, sizeof(path), "/proc/%d/exe", p->pid);
		el = readlink(path, exe, sizeof(exe) - 1);
		exe[el > 0 ? el : 0] = '\0';
		if (el > 10 && !strcmp(exe + el - 10, " (deleted)"))
			exe[el - 10] = '\0';
		snprintf(path, sizeof(path), "/proc/%d/cmdline", p->pid);
		buf = readfile__path(path, 8192, true, &n);
		labels__service(exe[0] ? exe : NULL, buf ? buf : "", buf ? n : 0, p->service, sizeof(p->service));
		free(buf);
		if (!p->service[0])
			snprintf(p->service, sizeof(p->service), "%s", p->comm);
	}
	explicit_bzero(vals, sizeof(vals));
	snprintf(path, sizeof(path), "/proc/%d/cgroup", p->pid);
	buf = readfile__path(path, 65536, true, NULL);
	if (!buf || !labels__container(buf, p->container, sizeof(p->container)))
		p->container[0] = '\0';
	free(buf);
	read_gpus(p);
	p->gpu_at = now;
	p->stale = false;
}

/* ---- the table ---- */

struct agent_procs *agent_procs__new(void)
{
	return calloc(1, sizeof(struct agent_procs));
}

void agent_procs__free(struct agent_procs *t)
{
	if (!t)
		return;
	free(t->v);
	free(t);
}

static struct agent_proc *find(struct agent_procs *t, int pid)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].pid == pid)
			return &t->v[i];
	return NULL;
}

struct agent_proc *agent_procs__get(struct agent_procs *t, int pid, double now)
{
	struct agent_proc *p = find(t, pid);
	bool alive = kill(pid, 0) == 0 || errno != ESRCH;

	if (p) {
		if (alive && p->stale) {
			uint64_t st = starttime_of(pid);

			/* a reused pid is another process: nothing of the old one holds */
			if (st && st != p->starttime)
				memset(p, 0, sizeof(*p));
			p->pid = pid;
			read_proc(p, now);
		} else if (alive && now - p->gpu_at >= GPU_RECHECK_S) {
			read_gpus(p);
			p->gpu_at = now;
		}
		return p;
	}
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 16;
		struct agent_proc *v = realloc(t->v, ncap * sizeof(*v));

		if (!v)
			return NULL;
		t->v = v;
		t->cap = ncap;
	}
	p = &t->v[t->n++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	read_proc(p, now);
	if (!p->service[0])
		snprintf(p->service, sizeof(p->service), "pid-%d", pid);
	return p;
}

void agent_procs__stale(struct agent_procs *t, int pid)
{
	struct agent_proc *p = find(t, pid);

	if (p)
		p->stale = true;
}

int agent_procs__prune(struct agent_procs *t)
{
	size_t j = 0, n = t->n;

	for (size_t i = 0; i < t->n; i++) {
		struct agent_proc *p = &t->v[i];
		bool gone = kill(p->pid, 0) < 0 && errno == ESRCH;

		if (!gone && !p->seen) {
			uint64_t st = starttime_of(p->pid);

			gone = st && st != p->starttime;
		}
		if (gone && !p->seen)
			continue;
		p->seen = false;
		t->v[j++] = *p;
	}
	t->n = j;
	return (int)(n - j);
}

size_t agent_procs__quiet(const struct agent_procs *t, int *pids, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < t->n && n < max; i++) {
		const struct agent_proc *p = &t->v[i];
		uint64_t st;

		if (p->seen || (kill(p->pid, 0) < 0 && errno == ESRCH))
			continue;
		st = starttime_of(p->pid);
		if (st && st == p->starttime)
			pids[n++] = p->pid;
	}
	return n;
}

size_t agent_procs__count(const struct agent_procs *t)
{
	return t->n;
}
