/* SPDX-License-Identifier: MIT */
/* Opening the files a target names (the paths in its /proc/PID/maps, its perf map, the
 * debug files its objects point to) as the target sees them, and never more than the
 * target itself could read. gpubpf runs as root; targets do not, and a target controls
 * every path here: it can replace a file by a symlink to a root-only one, or by a FIFO
 * or a device that blocks or acts when opened. So:
 *   - lookups stay inside the target's root (RESOLVE_IN_ROOT: absolute symlinks and ".."
 *     cannot leave a container) and never through /proc magic links;
 *   - the file is first opened with O_PATH (which neither opens a device nor blocks on a
 *     FIFO), checked on that descriptor, and only then reopened for reading;
 *   - only regular files, and each caller's rule on top (procroot_rule). */
#ifndef GPUBPF_PROCROOT_H
#define GPUBPF_PROCROOT_H

#include <stdbool.h>
#include <sys/types.h>

#define PROCROOT_MAX_UIDS 4

/* What else the opened file must be. Zero-initialized: any regular file. */
struct procroot_rule {
	bool no_symlinks; /* refuse a symlink anywhere on the path */
	int nuids;	  /* > 0: the file must belong to one of these uids */
	uid_t uids[PROCROOT_MAX_UIDS];
	bool same_file; /* it must be this very file (the one a target mapped): */
	ino_t ino;	/* its inode, */
	dev_t dev;	/* and its device where known (0: not compared; the device
			 * /proc/PID/maps shows is not st_dev on btrfs or overlayfs) */
};

/* Open PATH (absolute, as the target names it) relative to the root directory open at
 * ROOTFD, under RULE (NULL: any regular file). Returns an fd open for reading, or a
 * negative errno: -EINVAL for a file that is not regular, -EPERM for one the rule
 * refuses, -ELOOP for a symlink the rule refuses. */
int procroot__open_at(int rootfd, const char *path, const struct procroot_rule *rule);

/* The same for PID's root ("/proc/PID/root"). */
int procroot__open(int pid, const char *path, const struct procroot_rule *rule);

/* Open PATH on the host (no root confinement: gpubpf's own choice of path, such as
 * /proc/PID/map_files/... or a host debug directory) with the same O_PATH-first check:
 * only a regular file is ever opened for reading. fd or negative errno. */
int procroot__open_host(const char *path, const struct procroot_rule *rule);

/* The uids PID runs as (real, effective, saved, filesystem: a file belonging to any of
 * them is the target's own) into RULE, from /proc/PID/status. 0 or negative errno. */
int procroot__target_uids(int pid, struct procroot_rule *rule);

#endif /* GPUBPF_PROCROOT_H */
