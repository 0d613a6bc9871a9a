/* SPDX-License-Identifier: MIT */
/* Shared between bpf/procs.bpf.c and userspace/trace/procs.c: process lifecycle events of
 * the targets (fork, exec, exit) and the target set. __u32/__u64 only. */
#ifndef GPUBPF_PROCS_H
#define GPUBPF_PROCS_H

#ifndef __VMLINUX_H__
#include <linux/types.h> /* BPF code gets these from vmlinux.h */
#endif

#define PROCS_MAX_TARGETS 16384

enum proc_event_type {
	PROC_EV_FORK = 1,   /* a target forked a new process: pid is the child, ppid the parent */
	PROC_EV_EXEC = 2,   /* a target called exec: mappings changed */
	PROC_EV_EXIT = 3,   /* a target's last thread exited */
	PROC_EV_LOAD = 4,   /* the dynamic linker loaded or unloaded objects (_dl_debug_state) */
	PROC_EV_THREAD = 5, /* a target started a thread: pid is its thread id, ppid the process */
};

struct gpubpf_proc_event {
	__u32 type;
	__u32 pid;
	__u32 ppid;
	__u32 paused; /* the process was stopped (SIGSTOP) until userspace resumes it */
	__u64 ts_ns;
	char comm[16];
};

/* Key of the comms map: a thread's names as they were when a sample was taken (NAMES, a
 * hash of both names, is what the sample carries), or its latest names (NAMES 0). A
 * thread renamed, or a process that exec'd, keeps its old names on its old samples. */
struct comm_key {
	__u32 tid;
	__u32 names;
};

/* Value of the comms map. */
struct gpubpf_comm {
	__u32 tgid;
	__u32 names;	/* the hash of comm and pcomm (never 0) */
	char comm[16];	/* thread name */
	char pcomm[16]; /* process (group leader) name */
};

/* Byte offsets in struct task_struct of what BPF reads there (userspace/trace/kbtf.c fills
 * them from the kernel's BTF before load; 0: unknown, not read). */
struct task_offsets {
	__u32 group_leader;
	__u32 comm;
	__u32 tgid; /* read by the process events (bpf/procs.bpf.c) off the task they name */
	__u32 pid;
	__u32 signal;	   /* its signal_struct ... */
	__u32 signal_live; /* ... and the threads alive in it (signal->live.counter; 0: unknown) */
	__u32 fsbase;	   /* thread.fsbase (x86-64) */
	__u32 nvcsw;	   /* voluntary context switches: a thread that slept (0: unknown) */
	__u32 nivcsw;	   /* involuntary ones: a thread preempted (0: unknown) */
	__u32 utime;	   /* the thread's CPU time (ns) in user mode ... */
	__u32 stime;	   /* ... and in the kernel: its probes' cost, timed in the job (0: unknown) */
	__u32 runtime;	   /* se.sum_exec_runtime: the CPU time it ran, steal excluded (0: unknown) */
	__u32 start_time;  /* when it started (ns, monotonic): a tid used again is another thread */
	__u32 run_delay;   /* sched_info.run_delay: ns it waited on a runqueue, runnable (0: unknown) */
	/* not the task's: a CPU sample's event (struct bpf_perf_event_data_kern's event) and
	 * the thread it was opened for (struct perf_event's hw.target: NULL for a CPU's);
	 * 0: unknown, every sample taken as on a CPU's event (bpf/cpu.bpf.c) */
	__u32 perf_event;
	__u32 perf_target;
};

/* Value of the targets map: why a process is traced. */
enum target_flags {
	TARGET_ROOT = 1,     /* named by the user (-p, or the command started with --) */
	TARGET_FOLLOWED = 2, /* a descendant followed after attach */
	TARGET_PREEXEC = 4,  /* the command gpubpf forked, not yet exec'd: still gpubpf's code,
			      * not sampled or traced until its exec (which clears this) */
};

#endif /* GPUBPF_PROCS_H */
