// SPDX-License-Identifier: MIT
#include <errno.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "umulti.h"

#ifndef BPF_F_UPROBE_MULTI_RETURN
#define BPF_F_UPROBE_MULTI_RETURN 1
#endif

_Static_assert(sizeof(unsigned long) == sizeof(uint64_t), "uprobe_multi offsets are unsigned long");

int umulti__probe(int prog_fd)
{
	const unsigned long off = 0;
	const __u64 cookie = 0;
	LIBBPF_OPTS(bpf_link_create_opts, opts, .uprobe_multi.path = "/nonexistent/gpubpf-uprobe-multi-probe",
		    .uprobe_multi.offsets = &off, .uprobe_multi.cookies = &cookie, .uprobe_multi.cnt = 1);
	int fd = bpf_link_create(prog_fd, 0, (enum bpf_attach_type)UMULTI_ATTACH_TYPE, &opts);

	/* A kernel with uprobe_multi links looks the path up, and finds nothing there;
	 * one without them refuses the attach type before (EINVAL). */
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return fd == -ENOENT ? 0 : fd;
}

int umulti__attach(int prog_fd, const char *path, const uint64_t *offsets, const uint64_t *cookies, uint32_t cnt,
		   bool retprobe, int pid)
{
	LIBBPF_OPTS(bpf_link_create_opts, opts, .uprobe_multi.path = path,
		    .uprobe_multi.offsets = (const unsigned long *)offsets,
		    .uprobe_multi.cookies = (const __u64 *)cookies, .uprobe_multi.cnt = cnt,
		    .uprobe_multi.flags = retprobe ? BPF_F_UPROBE_MULTI_RETURN : 0,
		    .uprobe_multi.pid = pid < 0 ? 0 : (uint32_t)pid);

	return bpf_link_create(prog_fd, 0, (enum bpf_attach_type)UMULTI_ATTACH_TYPE, &opts);
}
