// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "preflight.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

static int has_cap(const struct __user_cap_data_struct *d, int cap)
{
	return !!(d[cap / 32].effective & (1u << (cap % 32)));
}

int preflight__privileges(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2] = {};

	if (geteuid() == 0)
		return 0;
	if (syscall(SYS_capget, &hdr, data) == 0 &&
	    (has_cap(data, CAP_SYS_ADMIN) || (has_cap(data, CAP_BPF) && has_cap(data, CAP_PERFMON))))
		return 0;
	pr_err("permission denied: recording needs root, or CAP_BPF and CAP_PERFMON (try: sudo gpubpf record ...)");
	return -EPERM;
}

int preflight__btf(void)
{
	const char *path = getenv("GPUBPF_BTF_PATH");

	if (!path || !*path)
		path = "/sys/kernel/btf/vmlinux";
	if (access(path, R_OK) == 0)
		return 0;
	pr_err("this kernel has no BTF (%s is missing): gpubpf needs a kernel built with "
	       "CONFIG_DEBUG_INFO_BTF=y (5.8 or later)",
	       path);
	return -ENOTSUP;
}
