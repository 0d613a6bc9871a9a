// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "preflight.h"
#include "readfile.h"

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

#define PF_KTHREAD 0x00200000 /* include/linux/sched.h: flags in /proc/PID/stat */

/* The comm, state and flags of /proc/PID/stat. 0 or negative errno. */
static int pid_stat(int pid, char *comm, size_t len, char *state, unsigned long *flags)
{
	char path[64], *buf, *open_paren, *close_paren;
	unsigned long f = 0;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	buf = readfile__path(path, 4096, true, NULL);
	if (!buf)
		return errno == ENOENT ? -ESRCH : -errno;
	open_paren = strchr(buf, '(');
	close_paren = strrchr(buf, ')'); /* the comm may hold ')' itself */
	if (!open_paren || !close_paren || close_paren < open_paren) {
		free(buf);
		return -EINVAL;
	}
	snprintf(comm, len, "%.*s", (int)(close_paren - open_paren - 1), open_paren + 1);
	/* state ppid pgrp session tty_nr tpgid flags */
	n = sscanf(close_paren + 1, " %c %*d %*d %*d %*d %*d %lu", state, &f);
	free(buf);
	if (n != 2)
		return -EINVAL;
	*flags = f;
	return 0;
}

int preflight__pid(int pid)
{
	unsigned long flags;
	char comm[64], state;
	int err;

	if (pid == getpid()) {
		pr_err("pid %d is this gpubpf: it does not profile itself", pid);
		return -EINVAL;
	}
	err = pid_stat(pid, comm, sizeof(comm), &state, &flags);
	if (err == -ESRCH) {
		pr_err("no such process: %d", pid);
		return err;
	}
	if (err)
		return 0; /* not readable here: the attach itself will say what is wrong */
	if (flags & PF_KTHREAD)
		pr_warn("pid %d (%s) is a kernel thread: it has no user space and no CUDA; only its kernel stacks are "
			"sampled, when it runs",
			pid, comm);
	else if (state == 'Z' || state == 'X')
		pr_warn("pid %d (%s) has exited (a zombie): there will be nothing to record", pid, comm);
	return 0;
}

void preflight__explain_empty(const int *pids, int npids, double secs)
{
	for (int i = 0; i < npids; i++) {
		unsigned long flags;
		char comm[64], state;

		if (pid_stat(pids[i], comm, sizeof(comm), &state, &flags))
			pr_warn("nothing was recorded: pid %d is gone", pids[i]);
		else
			pr_warn("nothing was recorded: pid %d (%s) did not run on a CPU in these %.1f s (state %c: %s)",
				pids[i], comm, secs, state,
				state == 'S' || state == 'I'   ? "asleep"
				: state == 'T' || state == 't' ? "stopped"
				: state == 'D'		       ? "waiting on I/O"
							       : "never sampled");
	}
}
