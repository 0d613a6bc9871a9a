// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "umulti.h"

/* The link_create member of union bpf_attr with its uprobe_multi variant (uapi 6.6);
 * the installed uapi header (6.1) does not have it yet. */
struct link_create_uprobe_multi {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t multi_flags; /* BPF_F_UPROBE_MULTI_RETURN */
	uint32_t pid;
	uint32_t pad;
};

#define UPROBE_MULTI_RETURN 1

bool umulti__supported(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return false;
	return major > 6 || (major == 6 && minor >= 6);
}

int umulti__attach(int prog_fd, const char *path, const uint64_t *offsets, const uint64_t *cookies, uint32_t cnt,
		   bool retprobe, int pid)
{
	struct link_create_uprobe_multi attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = (uint32_t)prog_fd;
	attr.attach_type = UMULTI_ATTACH_TYPE;
	attr.path = (uint64_t)(uintptr_t)path;
	attr.offsets = (uint64_t)(uintptr_t)offsets;
	attr.cookies = (uint64_t)(uintptr_t)cookies;
	attr.cnt = cnt;
	attr.multi_flags = retprobe ? UPROBE_MULTI_RETURN : 0;
	attr.pid = pid < 0 ? 0 : (uint32_t)pid;
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}
