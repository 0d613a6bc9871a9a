/* SPDX-License-Identifier: MIT */
/* Which processes the agent profiles (--select). The engine runs host-wide: lifecycle
 * events of every process reach here (procs__set_watch), and a process that qualifies
 * becomes a target, followed to its exit together with the children it forks.
 *   cuda         maps an object that defines CUDA runtime or driver entry points
 *                (libcudart, libcuda, or cudart linked statically into anything): looked
 *                at when the agent starts, at every exec and every load of the dynamic
 *                linker (whose _dl_debug_state is probed for that, host-wide); each object
 *                is read once, its verdict kept by device and inode
 *   all          every process (the engine runs as `record -a`)
 *   PID,...      these processes
 *   comm=REGEX   processes whose name (comm) matches REGEX (POSIX extended), at start and exec
 *   cgroup=PATH  processes in cgroup PATH or below it, at start and exec */
#ifndef GPUBPF_AGENT_SELECT_H
#define GPUBPF_AGENT_SELECT_H

#include <stdbool.h>

#include "../../bpf/procs.h"
#include "agent.h"

struct procs;
struct agent_select;

/* Called for every process that becomes a target. */
typedef void (*agent_selected_fn)(void *ctx, int pid);

/* NULL with errno set (-EINVAL: a REGEX that does not compile; a message was printed). */
struct agent_select *agent_select__new(const struct agent_opts *o, agent_selected_fn cb, void *ctx);
void agent_select__free(struct agent_select *sel);

/* The processes running now: each one that qualifies becomes a target. PROCS is the
 * session's, its watcher set to agent_select__event. Returns how many. */
int agent_select__start(struct agent_select *sel, struct procs *procs);

/* procs' watcher (procs_watch_fn). */
bool agent_select__event(void *ctx, const struct gpubpf_proc_event *ev);

/* The session was set up anew: the dynamic linkers' probes went with the old one. */
void agent_select__reset(struct agent_select *sel);

/* Once a tick: processes that loaded objects again since their last look. */
void agent_select__tick(struct agent_select *sel);

/* What --select says, for the start line. */
const char *agent_select__describe(const struct agent_opts *o, char *buf, size_t len);

#endif /* GPUBPF_AGENT_SELECT_H */
