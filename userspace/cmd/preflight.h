/* SPDX-License-Identifier: MIT */
/* Checks before a recording, each answered with one clear line. */
#ifndef GPUBPF_PREFLIGHT_H
#define GPUBPF_PREFLIGHT_H

/* Root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN). 0 or -EPERM. */
int preflight__privileges(void);
/* /sys/kernel/btf/vmlinux (GPUBPF_BTF_PATH overrides it, for tests). 0 or -ENOTSUP. */
int preflight__btf(void);

/* A pid named with -p: not gpubpf itself (-EINVAL), existing (-ESRCH), and said when
 * it is a kernel thread or a zombie (nothing or little to see). 0 or negative errno. */
int preflight__pid(int pid);
/* A recording of PIDS came out empty: say why, per pid (asleep, stopped, gone). */
void preflight__explain_empty(const int *pids, int npids, double secs);

#endif /* GPUBPF_PREFLIGHT_H */
