/* SPDX-License-Identifier: MIT */
/* Opening a target's files as the target sees them, without escaping its root. */
#ifndef GPUBPF_PROCROOT_H
#define GPUBPF_PROCROOT_H

/* Open PATH (absolute, as in /proc/PID/maps) relative to the root directory open at
 * ROOTFD. RESOLVE_IN_ROOT keeps absolute symlinks and ".." inside that root, which a
 * plain open of "/proc/PID/root" + path does not: that is the container escape to
 * avoid. Only regular files; never blocks on a FIFO. Returns an fd or a negative errno. */
int procroot__open_at(int rootfd, const char *path);

/* The same for PID's root ("/proc/PID/root"). */
int procroot__open(int pid, const char *path);

#endif /* GPUBPF_PROCROOT_H */
