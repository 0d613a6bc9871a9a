/* SPDX-License-Identifier: MIT */
/* Where the kernel fields the BPF programs read live, from the running kernel's BTF.
 *
 * The uprobe, perf_event and USDT objects read three task_struct fields (the group
 * leader's name for process labels, the thread's fsbase for Python 3.10). With CO-RE,
 * libbpf parses the whole kernel BTF (~5 MB) again for every object that has a
 * relocation: ~25 ms of CPU each at start-up. Reading the offsets once here and handing
 * them to every object as read-only data keeps those objects free of relocations. */
#ifndef GPUBPF_KBTF_H
#define GPUBPF_KBTF_H

#include "../../bpf/procs.h"

struct btf;

/* Fill OUT from the running kernel's BTF. 0, or a negative errno (no BTF, or a field
 * missing: a kernel too unlike the ones gpubpf knows). */
int kbtf__task_offsets(struct task_offsets *out);

/* The same from a parsed BTF (tests). */
int kbtf__task_offsets_from(const struct btf *btf, struct task_offsets *out);

/* Byte offset of member NAME in the struct or union TYPE_ID, looking into anonymous
 * struct and union members. Fills *member_type (the member's type id, modifiers and
 * typedefs resolved) when not NULL. Returns the offset, or -ENOENT. */
long kbtf__member_offset(const struct btf *btf, int type_id, const char *name, int *member_type);

#endif /* GPUBPF_KBTF_H */
