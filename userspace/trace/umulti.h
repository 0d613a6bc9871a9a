/* SPDX-License-Identifier: MIT */
/* uprobe_multi links (kernel 6.6+): many uprobes of one object in one BPF link. Detaching
 * a uprobe waits for a grace period, and the kernel serializes those waits (~50-80 ms
 * each here): 100 single uprobes take seconds to remove, one multi link one wait.
 * Created with libbpf's bpf_link_create (1.4+: Debian 12's backports); whether the kernel
 * has them is asked of the kernel itself (umulti__probe), never read off its version. */
#ifndef GPUBPF_UMULTI_H
#define GPUBPF_UMULTI_H

#include <stdbool.h>
#include <stdint.h>

/* The expected attach type a program needs at load to be used with umulti__attach
 * (BPF_TRACE_UPROBE_MULTI; the installed uapi header, 6.1, does not name it). */
#define UMULTI_ATTACH_TYPE 48

/* Does the kernel make uprobe_multi links for PROG_FD (loaded with UMULTI_ATTACH_TYPE)?
 * 0 when it does; else the kernel's no (a negative errno): use one uprobe per function. */
int umulti__probe(int prog_fd);

/* Attach PROG_FD at every OFFSET of the file at PATH (cookie[i] for offset[i]), as return
 * probes if RETPROBE, for PID (-1: every process). Returns the link fd or a negative errno. */
int umulti__attach(int prog_fd, const char *path, const uint64_t *offsets, const uint64_t *cookies, uint32_t cnt,
		   bool retprobe, int pid);

#endif /* GPUBPF_UMULTI_H */
