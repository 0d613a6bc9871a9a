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

/* The offset of member NAME of TYPE, or of member INNER of that member where INNER is
 * given; 0 where either is missing (BPF then reads nothing there). */
static __u32 offset_or_0(const struct btf *btf, int type, const char *name, const char *inner)
{
	int member = 0;
	long off = kbtf__member_offset(btf, type, name, &member), in = 0;

	if (off >= 0 && inner)
		in = kbtf__member_offset(btf, member, inner, NULL);
	return off >= 0 && in >= 0 ? (__u32)(off + in) : 0;
}

int kbtf__task_offsets_from(const struct btf *btf, struct task_offsets *out)
{
	int task = btf__find_by_name_kind(btf, "task_struct", BTF_KIND_STRUCT);
	long leader, comm, tgid, pid;

	memset(out, 0, sizeof(*out));
	if (task <= 0)
		return -ENOENT;
	leader = kbtf__member_offset(btf, task, "group_leader", NULL);
	comm = kbtf__member_offset(btf, task, "comm", NULL);
	tgid = kbtf__member_offset(btf, task, "tgid", NULL);
	pid = kbtf__member_offset(btf, task, "pid", NULL);
	if (leader < 0 || comm < 0 || tgid < 0 || pid < 0)
		return -ENOENT;
	out->group_leader = (__u32)leader;
	out->comm = (__u32)comm;
	out->tgid = (__u32)tgid;
	out->pid = (__u32)pid;
	/* a process's last thread to exit (bpf/procs.bpf.c, on_exit) */
	{
		int sig = btf__find_by_name_kind(btf, "signal_struct", BTF_KIND_STRUCT);

		out->signal = offset_or_0(btf, task, "signal", NULL);
		out->signal_live = sig > 0 ? offset_or_0(btf, sig, "live", "counter") : 0;
		if (!out->signal || !out->signal_live)
			out->signal = out->signal_live = 0;
	}
	/* thread.fsbase: x86-64 only (Python 3.10's thread match); absent elsewhere. */
	out->fsbase = offset_or_0(btf, task, "thread", "fsbase");
	/* the overhead budget's estimates: whether a thread slept between two probe hits */
	out->nvcsw = offset_or_0(btf, task, "nvcsw", NULL);
	/* ... or was preempted between two (a gap that says nothing of the probes' delay) */
	out->nivcsw = offset_or_0(btf, task, "nivcsw", NULL);
	/* ... and how much of a closed-loop thread's time its probes' traps really took */
	out->utime = offset_or_0(btf, task, "utime", NULL);
	out->stime = offset_or_0(btf, task, "stime", NULL);
	if (!out->utime || !out->stime)
		out->utime = out->stime = 0;
	/* the CPU time a thread's sample on its own clock stands for (bpf/cpu.bpf.c) */
	out->runtime = offset_or_0(btf, task, "se", "sum_exec_runtime");
	out->start_time = offset_or_0(btf, task, "start_time", NULL);
	/* the time a run of a thread's calls waited for a CPU (other threads' turns): its
	 * probes' delay stretches by as much (windows_books.c) */
	out->run_delay = offset_or_0(btf, task, "sched_info", "run_delay");
	/* whether a CPU sample's event was opened for a thread (its own clock, bpf/cpu.bpf.c) */
	{
		int kern = btf__find_by_name_kind(btf, "bpf_perf_event_data_kern", BTF_KIND_STRUCT),
		    ev = btf__find_by_name_kind(btf, "perf_event", BTF_KIND_STRUCT);

		out->perf_event = kern > 0 ? offset_or_0(btf, kern, "event", NULL) : 0;
		out->perf_target = ev > 0 ? offset_or_0(btf, ev, "hw", "target") : 0;
		if (!out->perf_event || !out->perf_target)
			out->perf_event = out->perf_target = 0;
	}
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
