/* SPDX-License-Identifier: MIT */
/* The executable objects a process maps, each seen once: for tracers that put probes
 * into objects (CUDA entry points, the injection library's USDT probes). */
#ifndef GPUBPF_OBJSCAN_H
#define GPUBPF_OBJSCAN_H

#include "hmap.h"

/* Called once per new object: FD is open on the very file mapped (inside the target's
 * root, checked against the mapped inode; closed after the call), PATH is the path the
 * target maps it under (for messages). */
typedef void (*objscan_fn)(void *ctx, int pid, int fd, const char *path);

/* Read /proc/PID/maps (bounded: the target controls its size) and call CB for every
 * executable file mapping whose (KEY_PID, dev, inode) is not in SEEN yet; add it there.
 * KEY_PID lets one SEEN serve per-process probes (the pid) or host-wide ones (0).
 * Returns 0 or a negative errno (-ENOENT when the process is gone). */
int objscan__pid(int pid, int key_pid, struct hmap *seen, objscan_fn cb, void *ctx);

#endif /* GPUBPF_OBJSCAN_H */
