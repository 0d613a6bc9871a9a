// SPDX-License-Identifier: GPL-2.0
/* Process lifecycle of the targets: follow forked children into the target set in the
 * kernel (no race with the child's first samples), and tell userspace about forks,
 * execs and exits so it can snapshot mappings while the process lives. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "targets.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Follow children of targets (off with --no-inherit). */
const volatile bool follow_children = true;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} proc_events SEC(".maps");

/* Events lost because the ring buffer was full; userspace reports it. */
__u64 lost_events = 0;

static __always_inline void emit(__u32 type, __u32 pid, __u32 ppid)
{
	struct gpubpf_proc_event *e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost_events, 1);
		return;
	}
	e->type = type;
	e->pid = pid;
	e->ppid = ppid;
	e->pad = 0;
	e->ts_ns = bpf_ktime_get_ns();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

/* tp_btf needs no tracefs mount (attached by BTF id), unlike classic tracepoints. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	__u32 flags = TARGET_FOLLOWED;

	/* A new thread shares its tgid: already covered. */
	if (ptgid == ctgid)
		return 0;
	if (trace_all) {
		if (ctgid != self_tgid)
			emit(PROC_EV_FORK, ctgid, ptgid);
		return 0;
	}
	if (!follow_children || !bpf_map_lookup_elem(&targets, &ptgid))
		return 0;
	bpf_map_update_elem(&targets, &ctgid, &flags, BPF_NOEXIST);
	emit(PROC_EV_FORK, ctgid, ptgid);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	if (is_target(tgid))
		emit(PROC_EV_EXEC, tgid, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	/* Only the last thread of the group: signal->live drops to 0 before this fires. */
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;
	if (!is_target(tgid))
		return 0;
	emit(PROC_EV_EXIT, tgid, 0);
	return 0;
}
