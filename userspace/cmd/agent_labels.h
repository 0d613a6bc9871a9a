/* SPDX-License-Identifier: MIT */
/* What the agent knows of each process it profiles: the labels of its profiles. Read
 * once when the process is selected (while it lives) and again after an exec:
 *   comm       /proc/PID/comm
 *   service    OTEL_SERVICE_NAME or PYROSCOPE_APPLICATION_NAME from its environment, else
 *              the Python script (or -m module) it runs, else its executable's name
 *   container  the container id in its cgroup (docker, containerd, CRI-O, podman), 12 hex
 *   rank, local_rank, world_size   torchrun's RANK, LOCAL_RANK, WORLD_SIZE
 *   gpu        the /dev/nvidiaN devices it has open ("0+1"), looked at once a minute
 * From /proc/PID/environ only these variables are read: the file is scanned in bounded
 * chunks, the value of a named variable is the only thing copied out, and the buffers
 * are wiped afterwards. Every other read is bounded too: the process is untrusted. */
#ifndef GPUBPF_AGENT_LABELS_H
#define GPUBPF_AGENT_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LABELS_ENV_MAX (1u << 20) /* bytes of environ looked at */
#define LABELS_VALUE_MAX 256

struct agent_proc {
	int pid;
	uint64_t starttime; /* /proc/PID/stat field 22: tells a reused pid */
	char comm[17];
	char service[128];
	char container[16];
	char rank[16], local_rank[16], world_size[16];
	char gpu[64];
	double gpu_at; /* CLOCK_MONOTONIC seconds of the last look at its devices */
	bool stale;    /* exec'd or loaded something: read again while it lives */
	bool seen;     /* had samples in the interval being cut */
};

struct agent_procs;

struct agent_procs *agent_procs__new(void);
void agent_procs__free(struct agent_procs *t);

/* The record of PID, read now when it is new (or its pid was reused). NULL only when out
 * of memory; a process already gone gets what can still be known (its pid). */
struct agent_proc *agent_procs__get(struct agent_procs *t, int pid, double now);
/* PID exec'd or loaded objects: read its labels again at the next get. */
void agent_procs__stale(struct agent_procs *t, int pid);
/* After a cut: forget processes that are gone and had nothing in it. Clears `seen`.
 * Returns how many were forgotten. */
int agent_procs__prune(struct agent_procs *t);
/* Processes profiled before that are still alive (same start time) and had nothing in the
 * interval being cut: their pids into PIDS (at most MAX). Each still gets its profile, an
 * empty one, so a process's series has no gap while it lives. Returns how many. */
size_t agent_procs__quiet(const struct agent_procs *t, int *pids, size_t max);
size_t agent_procs__count(const struct agent_procs *t);

/* ---- pure helpers, exported for the unit tests ---- */

/* Scan an environ stream (NUL-separated NAME=value entries) read from FD, at most MAX
 * bytes, for the N NAMES; copy each one's value (cut to LABELS_VALUE_MAX - 1 bytes) into
 * VALS[i], "" when absent. Returns how many were found, or a negative errno. */
int labels__environ(int fd, size_t max, const char *const *names, int n, char (*vals)[LABELS_VALUE_MAX]);

/* The container id in /proc/PID/cgroup's text (the last 64-hex component of a cgroup
 * path), its first 12 characters into OUT. false when there is none. */
bool labels__container(const char *cgroup, char *out, size_t cap);

/* The process's cgroup path: the unified hierarchy's ("0::PATH"), else systemd's. */
bool labels__cgroup_path(const char *cgroup, char *out, size_t cap);

/* The service of a process without a service variable: for a Python interpreter
 * (EXE's base name starts with "python") the script's base name or the -m module, else
 * EXE's base name. CMDLINE is /proc/PID/cmdline (LEN bytes, NUL-separated). */
void labels__service(const char *exe, const char *cmdline, size_t len, char *out, size_t cap);

#endif /* GPUBPF_AGENT_LABELS_H */
