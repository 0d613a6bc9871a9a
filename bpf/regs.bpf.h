/* SPDX-License-Identifier: MIT */
/* Register access without CO-RE. Include before <bpf/bpf_tracing.h>.
 *
 * vmlinux.h marks struct pt_regs preserve_access_index, so PT_REGS_SP(ctx) and friends
 * become CO-RE relocations, and libbpf then parses the kernel's whole BTF (~5 MB, ~25 ms)
 * for each object that has one. On x86-64 the layout is ABI (uapi asm/ptrace.h: what a
 * kprobe or uprobe program's context is), so a plain copy of it needs no relocation. */
#ifndef GPUBPF_REGS_BPF_H
#define GPUBPF_REGS_BPF_H

#if defined(__TARGET_ARCH_x86)
struct gpubpf_pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};
#define __PT_REGS_CAST(x) ((const struct gpubpf_pt_regs *)(x))
#endif

#endif /* GPUBPF_REGS_BPF_H */
