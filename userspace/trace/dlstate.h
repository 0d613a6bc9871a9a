/* SPDX-License-Identifier: MIT */
/* Which change of its link map a target's dynamic linker announces. glibc calls
 * _dl_debug_state (procs.c probes it) twice for each dlopen and each dlclose: first with
 * its _r_debug.r_state at RT_ADD or RT_DELETE, before the objects are mapped or
 * unmapped, then at RT_CONSISTENT once they are. Only the second changes what the
 * process maps; the first held the process all the same while every tracer read its
 * maps (an interpreter importing 47 extension modules: 97 holds, 72-88 ms, dev VM).
 * r_state is read from the target (4 bytes, at the address its maps and the linker's
 * symbols give); where it cannot be (another dynamic linker, no _r_debug, a process
 * gone), the event is handled as before. */
#ifndef GPUBPF_DLSTATE_H
#define GPUBPF_DLSTATE_H

#include <stdint.h>
#include <sys/types.h>

#include "hmap.h"

enum { DL_RT_CONSISTENT = 0, DL_RT_ADD = 1, DL_RT_DELETE = 2 };

struct dlstate {
	struct hmap files; /* (dev, inode, 0) -> r_state's address less the object's base */
};

/* Learn the dynamic linker open at FD (the file _dl_debug_state is probed in): 0, or a
 * negative errno (-ENOENT: no _r_debug there, -ENOSPC: 64 linkers known already; its
 * events are handled as they come). */
int dlstate__add_file(struct dlstate *d, int fd);

/* Where r_state is in the process whose /proc/PID/maps is MAPS (a known dynamic linker
 * mapped from its start), or 0. */
uint64_t dlstate__addr(const struct dlstate *d, const char *maps);

/* The r_state of process PID at ADDR (DL_RT_*), or a negative errno. */
int dlstate__read(pid_t pid, uint64_t addr);

void dlstate__free(struct dlstate *d);

#endif /* GPUBPF_DLSTATE_H */
