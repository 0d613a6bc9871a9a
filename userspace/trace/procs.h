/* SPDX-License-Identifier: MIT */
/* The target processes of a session: the ones the user named or started, the children
 * followed after attach (in-kernel, by bpf/procs.bpf.c), and under -a every process seen.
 * Owns the BPF target set and the comms map that the other BPF objects share. */
#ifndef GPUBPF_PROCS_USER_H
#define GPUBPF_PROCS_USER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../bpf/procs.h"
#include "opts.h"
#include "syms.h"

struct procs;

/* Loads and attaches the lifecycle tracepoints. NULL with errno set on failure. */
/* TASK_OFF: kbtf__task_offsets() of the session, for the BPF side. */
struct procs *procs__new(const struct record_opts *o, struct syms *syms, const struct task_offsets *task_off);
void procs__free(struct procs *p); /* accepts NULL */

int procs__targets_fd(const struct procs *p);
int procs__comms_fd(const struct procs *p);

/* Add a running process named by the user. -ESRCH if it does not exist. */
int procs__add_pid(struct procs *p, int pid);

/* Fork COMMAND, held before exec until procs__release() (so no early sample is missed),
 * and add it as a target. Returns 0 or a negative errno. */
int procs__spawn(struct procs *p, char **argv);
/* Let the spawned command exec. Returns 0, or the exec's negative errno (the command
 * could not be started; a message was printed). */
int procs__release(struct procs *p);
/* Whether the spawned command was let go (or none is held): procs__release ran. */
bool procs__released(const struct procs *p);
pid_t procs__child(const struct procs *p);	       /* the spawned command, or 0 */
int procs__child_status(struct procs *p, int *status); /* 0 when it exited and was reaped */

/* Handle lifecycle events for up to timeout_ms. Returns the number handled or a negative errno. */
int procs__poll(struct procs *p, int timeout_ms);

/* Handle every event already in the ring buffers, without waiting: before the final
 * drain, so the names they carry (kernels looked up by name) are known. */
int procs__drain_events(struct procs *p);

/* Re-check which targets are alive and refresh their mappings for the symbolizer.
 * Returns the number of live root targets (the named or started ones). */
int procs__refresh(struct procs *p);

/* Whether the last procs__refresh looked at the targets' maps (a recording spaces its
 * looks where they are dear; the agent's other periodic looks keep their own pace): the
 * tick's other safety-net scans of the maps (the CUDA and CUPTI objects') go with it. */
bool procs__maps_looked(const struct procs *p);

/* A pid seen in samples (for -a): track it if new. */
void procs__note_pid(struct procs *p, int pid);

/* Up to MAX live target pids into OUT; returns how many. */
int procs__live_pids(const struct procs *p, int *out, int max);

/* Poll another BPF ring buffer together with the lifecycle events. 0 or negative errno. */
int procs__add_ringbuf(struct procs *p, int map_fd, int (*cb)(void *ctx, void *data, size_t len), void *ctx);

/* Call CB(ctx, pid) when a target's mappings may have changed: a fork, an exec, a load
 * by the dynamic linker. A process gpubpf started is held stopped during the calls.
 * Several tracers may register (up to 4). 0 or -E2BIG. */
int procs__add_on_change(struct procs *p, void (*cb)(void *ctx, int pid), void *ctx);

/* Call CB(ctx, tid) soon after a target starts a thread or a process (TID: its first
 * thread). One callback; NULL removes it. The kernel reports threads only while it is set. */
void procs__set_on_task(struct procs *p, void (*cb)(void *ctx, int tid), void *ctx);

/* Keep each exiting target thread's context switches (voluntary and not, as /proc's
 * status counts them) for procs__take_exit_switches. */
void procs__report_switches(struct procs *p, bool on);
/* CB(ctx, tid, switches) for each target thread that exited since the last call; each is
 * given once. */
void procs__take_exit_switches(struct procs *p, void (*cb)(void *ctx, int tid, uint64_t n), void *ctx);

/* Call CB(ctx, pid) when a target's last thread exited: release what it held. Up to 4. */
int procs__add_on_exit(struct procs *p, void (*cb)(void *ctx, int pid), void *ctx);

/* Probe the dynamic linker's _dl_debug_state at OFFSET in the file open at FD (a
 * dynamic linker a target maps). Once per file, for all processes; BPF keeps to the
 * targets. 0 or a negative errno (said once without -v). */
int procs__attach_dl_state(struct procs *p, int fd, uint64_t offset);

/* Stop holding the started command at loads, and resume it if it is held now: the end
 * of a recording. Also done by procs__free() and, if gpubpf is killed, by its guardian. */
void procs__end_holds(struct procs *p);

/* host_wide (the agent): WATCH sees the fork, exec, load and exit events of processes
 * outside the target set (a fork's ppid says whose child it is). Returning true makes
 * the process a target, and the event is then handled as a target's. */
typedef bool (*procs_watch_fn)(void *ctx, const struct gpubpf_proc_event *ev);
void procs__set_watch(struct procs *p, procs_watch_fn cb, void *ctx);

/* Tell every tracer that PID's mappings may have changed, as an exec or a load does: for
 * a target added with procs__add_pid() once the tracers are set up. */
void procs__rescan(struct procs *p, int pid);

/* What the holds cost the started command and its children: each exec and each change of
 * their link map (two a dlopen) stops the process until gpubpf has read its objects and
 * put its probes in (from the event to the resume, by the monotonic clock). */
struct procs_holds {
	uint64_t n, total_ns, max_ns;
	uint64_t passed; /* not held: a dlopen's or dlclose's first call, let go (dlstate.h) */
};
void procs__holds(const struct procs *p, struct procs_holds *out);

/* Counters for the status line. */
int procs__num_live(const struct procs *p);
unsigned long long procs__lost_events(const struct procs *p);

#endif /* GPUBPF_PROCS_USER_H */
