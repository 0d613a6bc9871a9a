/* SPDX-License-Identifier: MIT */
/* The process tracker's state, shared by procs.c and procs_spawn.c (the command started
 * with --). Not for other files: procs.h is the interface. */
#ifndef GPUBPF_PROCS_INT_H
#define GPUBPF_PROCS_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/types.h>

#include "dlstate.h"
#include "hmap.h"
#include "holdguard.h"
#include "links.h"
#include "procs.h"

#define PROCS_MAX_ON_CHANGE 4

struct proc_ent {
	int pid;
	bool alive;
	bool root;
	uint64_t rstate_at; /* its dynamic linker's r_state (dlstate.h), 0: not known */
};

struct procs {
	struct procs_bpf *skel;
	struct ring_buffer *rb;
	struct syms *syms;
	const struct record_opts *opts;
	struct proc_ent *ents;
	size_t len, cap;
	/* the command started with --, held at a gate until released */
	pid_t child;
	int child_status;
	bool child_reaped;
	int gate_fd;  /* write end: closing it lets the child exec */
	int error_fd; /* read end: the child's exec errno, or EOF on success (CLOEXEC) */
	/* called when a target's mappings may have changed (fork, exec, a dynamic load) */
	struct {
		void (*cb)(void *ctx, int pid);
		void *ctx;
	} on_change[PROCS_MAX_ON_CHANGE];
	int n_on_change;
	struct {
		void (*cb)(void *ctx, int pid);
		void *ctx;
	} on_exit[PROCS_MAX_ON_CHANGE];
	int n_on_exit;
	struct {
		void (*cb)(void *ctx, int tid);
		void *ctx;
	} on_task;
	/* _dl_debug_state probes: one per dynamic linker file, for every process (the BPF
	 * side keeps to targets), so a target that starts thousands of processes costs no
	 * more than one that starts one. */
	struct linkset links;
	struct hmap dl_files; /* (dev, inode, 0) -> 1 */
	struct dlstate dl;
	bool warned_dl;
	struct holdguard guard; /* resumes held processes if gpubpf dies (-- only) */
	struct procs_holds holds;
	procs_watch_fn watch; /* host_wide: events of processes that are not targets */
	void *watch_ctx;
	unsigned refreshes;
	double retrack_at; /* a recording's next periodic look at its targets' maps (monotonic s) */
	bool looked;	   /* the last refresh looked at them */
};

/* The tracked process PID, or NULL. */
struct proc_ent *procs_find(struct procs *p, int pid);

/* PID tracked (alive; ROOT: a target named or started, not a child of one), or NULL on
 * running out of memory. */
struct proc_ent *procs_add_ent(struct procs *p, int pid, bool root);

/* Read PID's mappings into the symbolizer (a process gone already is no error). */
void procs_track(struct procs *p, int pid);

/* PID into the BPF side's targets as VAL (TARGET_* flags). 0 or a negative errno. */
int procs_set_target(struct procs *p, int pid, __u32 val);

#endif
