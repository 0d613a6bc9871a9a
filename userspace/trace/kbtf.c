// SPDX-License-Identifier: MIT
#include <errno.h>
#include <string.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "kbtf.h"

/* Through typedefs and const/volatile/restrict to the type itself. */
static int skip_mods(const struct btf *btf, int id)
{
	for (int depth = 0; depth < 32 && id > 0; depth++) {
		const struct btf_type *t = btf__type_by_id(btf, (__u32)id);

		if (!t)
			return -1;
		if (!btf_is_typedef(t) && !btf_is_mod(t))
			return id;
		id = (int)t->type;
	}
	return -1;
}

static long member_offset(const struct btf *btf, int type_id, const char *name, int *member_type, int depth)
{
	const struct btf_type *t;
	const struct btf_member *m;

	type_id = skip_mods(btf, type_id);
	t = type_id > 0 ? btf__type_by_id(btf, (__u32)type_id) : NULL;
	if (!t || depth > 8 || !btf_is_composite(t))
		return -ENOENT;
	m = btf_members(t);
	for (int i = 0; i < btf_vlen(t); i++, m++) {
		const char *mname = btf__name_by_offset(btf, m->name_off);
		__u32 bits = btf_member_bit_offset(t, (__u32)i);

		if (btf_member_bitfield_size(t, (__u32)i) || bits % 8)
			continue;
		if (mname && *mname) {
			if (strcmp(mname, name) != 0)
				continue;
			if (member_type)
				*member_type = skip_mods(btf, (int)m->type);
			return (long)(bits / 8);
		}
		/* An anonymous struct or union: its members are the outer type's. */
		long off = member_offset(btf, (int)m->type, name, member_type, depth + 1);

		if (off >= 0)
			return (long)(bits / 8) + off;
	}
	return -ENOENT;
}

long kbtf__member_offset(const struct btf *btf, int type_id, const char *name, int *member_type)
{
	return member_offset(btf, type_id, name, member_type, 0);
}

int kbtf__task_offsets_from(const struct btf *btf, struct task_offsets *out)
{
	int task = btf__find_by_name_kind(btf, "task_struct", BTF_KIND_STRUCT), thread = 0, se_type = 0;
	long leader, comm, th, fs = -ENOENT, nv, se, rt = -ENOENT;

	memset(out, 0, sizeof(*out));
	if (task <= 0)
		return -ENOENT;
	leader = kbtf__member_offset(btf, task, "group_leader", NULL);
	comm = kbtf__member_offset(btf, task, "comm", NULL);
	if (leader < 0 || comm < 0)
		return -ENOENT;
	out->group_leader = (__u32)leader;
	out->comm = (__u32)comm;
	/* thread.fsbase: x86-64 only (Python 3.10's thread match); absent elsewhere. */
	th = kbtf__member_offset(btf, task, "thread", &thread);
	if (th >= 0)
		fs = kbtf__member_offset(btf, thread, "fsbase", NULL);
	out->fsbase = fs >= 0 ? (__u32)(th + fs) : 0;
	/* the overhead budget's estimates: whether a thread slept between two probe hits */
	nv = kbtf__member_offset(btf, task, "nvcsw", NULL);
	out->nvcsw = nv >= 0 ? (__u32)nv : 0;
	/* ... or was preempted between two (a gap that says nothing of the probes' delay) */
	nv = kbtf__member_offset(btf, task, "nivcsw", NULL);
	out->nivcsw = nv >= 0 ? (__u32)nv : 0;
	/* ... and how much of a closed-loop thread's time its probes' traps really took */
	nv = kbtf__member_offset(btf, task, "utime", NULL);
	out->utime = nv >= 0 ? (__u32)nv : 0;
	nv = kbtf__member_offset(btf, task, "stime", NULL);
	out->stime = nv >= 0 ? (__u32)nv : 0;
	if (!out->utime || !out->stime)
		out->utime = out->stime = 0;
	/* the CPU time a thread's sample on its own clock stands for (bpf/cpu.bpf.c) */
	se = kbtf__member_offset(btf, task, "se", &se_type);
	if (se >= 0)
		rt = kbtf__member_offset(btf, se_type, "sum_exec_runtime", NULL);
	out->runtime = rt >= 0 ? (__u32)(se + rt) : 0;
	nv = kbtf__member_offset(btf, task, "start_time", NULL);
	out->start_time = nv >= 0 ? (__u32)nv : 0;
	return 0;
}

int kbtf__task_offsets(struct task_offsets *out)
{
	struct btf *btf = btf__load_vmlinux_btf();
	int err;

	if (!btf)
		return errno ? -errno : -ENOENT;
	err = kbtf__task_offsets_from(btf, out);
	btf__free(btf);
	return err;
}
