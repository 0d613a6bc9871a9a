// SPDX-License-Identifier: GPL-2.0
/* Process lifecycle of the targets: follow forked children into the target set in the
 * kernel (no race with the child's first samples), and tell userspace about forks,
 * execs and exits so it can snapshot mappings while the process lives. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "targets.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Follow children of targets (off with --no-inherit). */
const volatile bool follow_children = true;
/* The agent watches every process: events of processes outside the target set do not
 * wake userspace one by one (on a busy host they come hundreds a second); its next poll,
 * within 100 ms, takes them in a batch. */
const volatile bool lazy_wakeup = false;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} proc_events SEC(".maps");

/* Processes gpubpf started itself (-- COMMAND): stopped at exec and at each load of the
 * dynamic linker until userspace has put its probes into the new objects, so not even
 * the first CUDA call after start-up is missed. Never used for processes gpubpf attached
 * to (-p, -a): those are not ours to stop. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} pause_pids SEC(".maps");

/* The processes this program may have stopped (tgid -> when it last did). Userspace
 * resumes each after probing; if gpubpf dies first, its guardian process
 * (userspace/trace/holdguard.c), which holds this map and pause_pids, resumes them all. An
 * entry goes only when its process exits: see holdguard.h for why. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} held SEC(".maps");

/* Report the threads targets start (PROC_EV_THREAD): set by userspace when the CPU
 * sampler asks for them (userspace/trace/cpu.c says why). */
bool report_threads = false;

/* The targets' threads' context switches as each exits (tid -> nvcsw + nivcsw): what the
 * CPU sampler's events cost a thread up to its end, where userspace's look at /proc comes
 * too late (userspace/trace/switches.h). Set by userspace; it takes and deletes entries. */
bool report_switches = false;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} exit_switches SEC(".maps");

/* Events lost because the ring buffer was full; userspace reports it. */
__u64 lost_events = 0;

/* Where each target's dynamic linker keeps its r_state (tgid -> address; set by userspace,
 * userspace/trace/dlstate.h): a dlopen's or dlclose's first call of _dl_debug_state
 * (RT_ADD, RT_DELETE: nothing mapped or unmapped yet; the second, RT_CONSISTENT, follows)
 * is let go here, neither stopped nor reported, and counted. Gone at exec (another
 * address space) and exit. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} rstate_at SEC(".maps");

__u64 loads_passed = 0;

#define SIGSTOP 19

/* Stop the current process if it is ours to hold. Noted in `held` before the signal, so
 * whoever resumes it finds it there; the signal is delivered on the way back to user
 * space, so the process stops before it runs on. */
static __always_inline __u32 maybe_pause(__u32 tgid, __u64 ts)
{
	if (!bpf_map_lookup_elem(&pause_pids, &tgid))
		return 0;
	if (bpf_map_update_elem(&held, &tgid, &ts, BPF_ANY))
		return 0;
	return bpf_send_signal(SIGSTOP) == 0;
}

/* The event is reserved before the process is stopped: the event is what makes userspace
 * resume it, so a process is never stopped when its event would be lost. */
static __always_inline void emit_paused(__u32 type, __u32 pid, __u32 ppid, bool may_pause)
{
	struct gpubpf_proc_event *e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost_events, 1);
		return;
	}
	e->type = type;
	e->pid = pid;
	e->ppid = ppid;
	e->ts_ns = bpf_ktime_get_ns();
	e->paused = may_pause ? maybe_pause(pid, e->ts_ns) : 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	/* a held process waits for userspace: always wake it */
	bpf_ringbuf_submit(e, lazy_wakeup && !e->paused && !bpf_map_lookup_elem(&targets, &pid) ? BPF_RB_NO_WAKEUP : 0);
}

static __always_inline void emit(__u32 type, __u32 pid, __u32 ppid)
{
	emit_paused(type, pid, ppid, false);
}

/* Raw tracepoints, reading the tasks they name by the offsets userspace read from the
 * kernel's BTF (task_u32_of, task_u64_of): with tp_btf and CO-RE, libbpf parsed the whole
 * BTF again for this object at start-up (10-25 ms of CPU). Like tp_btf they need no
 * tracefs mount (attached by name). Fork, exec and exit are rare: a probe read each is
 * nothing. */
SEC("raw_tp/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = task_u32_of(parent, task_off.tgid);
	__u32 ctgid = task_u32_of(child, task_off.tgid);
	__u32 flags = TARGET_FOLLOWED;

	/* A new thread shares its tgid: already a target. */
	if (ptgid == ctgid) {
		if (report_threads && is_target(ctgid))
			emit(PROC_EV_THREAD, task_u32_of(child, task_off.pid), ctgid);
		return 0;
	}
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

SEC("raw_tp/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = task_u32_of(p, task_off.tgid), *flags = bpf_map_lookup_elem(&targets, &tgid);

	/* The command gpubpf started becomes a target proper here: before, it ran gpubpf. */
	if (flags && (*flags & TARGET_PREEXEC))
		*flags &= ~(__u32)TARGET_PREEXEC;
	bpf_map_delete_elem(&rstate_at, &tgid);
	if (is_target(tgid))
		emit_paused(PROC_EV_EXEC, tgid, 0, true);
	return 0;
}

/* The dynamic linker calls _dl_debug_state after every change to the link map (start-up,
 * dlopen, dlclose): new objects may hold CUDA entry points to probe. */
SEC("uprobe")
int on_dl_debug_state(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 *at;
	__s32 state;

	if (!is_target(tgid))
		return 0;
	at = bpf_map_lookup_elem(&rstate_at, &tgid);
	if (at && !bpf_probe_read_user(&state, sizeof(state), (const void *)*at) && (state == 1 || state == 2)) {
		__sync_fetch_and_add(&loads_passed, 1);
		return 0;
	}
	emit_paused(PROC_EV_LOAD, tgid, 0, true);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tgid = task_u32_of(p, task_off.tgid);

	/* every thread's switches, for the cost of the sampler's events */
	if (report_switches && is_target(tgid)) {
		__u32 tid = task_u32_of(p, task_off.pid);
		__u64 n = task_u64_of(p, task_off.nvcsw) + task_u64_of(p, task_off.nivcsw);

		bpf_map_update_elem(&exit_switches, &tid, &n, BPF_ANY);
	}
	/* Only the last thread of the group: signal->live drops to 0 before this fires
	 * (unknown offsets: the group leader's exit stands for it). */
	if (task_off.signal_live) {
		void *sig = (void *)task_u64_of(p, task_off.signal);

		if (!sig || task_u32_of(sig, task_off.signal_live) != 0)
			return 0;
	} else if (task_u32_of(p, task_off.pid) != tgid) {
		return 0;
	}
	bpf_map_delete_elem(&rstate_at, &tgid);
	if (!is_target(tgid))
		return 0;
	emit(PROC_EV_EXIT, tgid, 0);
	return 0;
}
