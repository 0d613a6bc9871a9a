/* SPDX-License-Identifier: MIT */
/* Checks before a recording, each answered with one clear line. */
#ifndef GPUBPF_PREFLIGHT_H
#define GPUBPF_PREFLIGHT_H

/* Root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN). 0 or -EPERM. */
int preflight__privileges(void);
/* /sys/kernel/btf/vmlinux (GPUBPF_BTF_PATH overrides it, for tests). 0 or -ENOTSUP. */
int preflight__btf(void);

#endif /* GPUBPF_PREFLIGHT_H */
