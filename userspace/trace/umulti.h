/* SPDX-License-Identifier: MIT */
/* uprobe_multi links (kernel 6.6+): many uprobes of one object in one BPF link. Detaching
 * a uprobe waits for a grace period, and the kernel serializes those waits (~50-80 ms
 * each here): 100 single uprobes take seconds to remove, one multi link one wait.
 * libbpf 1.1 (Debian 12) predates them, so the link is created with the raw syscall. */
#ifndef GPUBPF_UMULTI_H
#define GPUBPF_UMULTI_H

#include <stdbool.h>
#include <stdint.h>

/* The expected attach type a program needs at load to be used with umulti__attach. */
#define UMULTI_ATTACH_TYPE 48 /* BPF_TRACE_UPROBE_MULTI */

/* Whether this kernel has uprobe_multi links (6.6 or later). */
bool umulti__supported(void);

/* Attach PROG_FD at every OFFSET of the file at PATH (cookie[i] for offset[i]), as return
 * probes if RETPROBE, for PID (-1: every process). Returns the link fd or a negative errno. */
int umulti__attach(int prog_fd, const char *path, const uint64_t *offsets, const uint64_t *cookies, uint32_t cnt,
		   bool retprobe, int pid);

#endif /* GPUBPF_UMULTI_H */
