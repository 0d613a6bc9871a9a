/* SPDX-License-Identifier: MIT */
/* Shared between bpf/python.bpf.h (included by cpu.bpf.c and cuda.bpf.c) and
 * userspace/trace/python.c. __u32/__u64 only. CPython's structs are not in kernel BTF, so
 * CO-RE cannot help: userspace finds the version and fills the offsets per process. */
#ifndef GPUBPF_PYTHON_H
#define GPUBPF_PYTHON_H

#ifndef __VMLINUX_H__
#include <linux/types.h> /* BPF code gets these from vmlinux.h */
#endif

/* Python frames kept per capture; deeper chains are truncated (PY_STACK_TRUNCATED). */
#define PY_MAX_DEPTH 64
/* Thread states looked at when searching the current thread's one. */
#define PY_MAX_THREADS 64
/* Bytes read from an interpreter frame in one go: every field the walk needs lies in
 * the first 104 bytes in 3.10 (PyFrameObject.f_lasti at 96) and 72 in 3.11-3.13. */
#define PY_FRAME_READ 112

#define PY_STACKS_ENTRIES 8192
#define PY_PROCS_ENTRIES 4096
#define PY_TSTATES_ENTRIES 16384

enum py_proc_flags {
	PY_F_CFRAME = 1,       /* tstate->cframe->current_frame (3.11, 3.12), else tstate->frame field directly */
	PY_F_MATCH_FSBASE = 2, /* match tstate->thread_id (pthread_self) with fsbase (3.10), else native tid */
	PY_F_FRAMEOBJ = 4,     /* frames are PyFrameObjects with an int f_lasti (3.10) */
};

/* py_procs value: where a process's interpreter keeps its threads and frames. */
struct py_proc {
	__u32 version;	      /* 0x030b for 3.11 */
	__u32 flags;	      /* enum py_proc_flags */
	__u64 interp_head;    /* address of _PyRuntime.interpreters.head */
	__u32 interp_threads; /* PyInterpreterState: threads.head */
	__u32 tstate_next;    /* PyThreadState: next */
	__u32 tstate_match;   /* PyThreadState: native_thread_id (or thread_id, PY_F_MATCH_FSBASE) */
	__u32 tstate_frame;   /* PyThreadState: cframe (PY_F_CFRAME), current_frame or frame */
	__u32 cframe_current; /* _PyCFrame: current_frame */
	__u32 frame_previous; /* frame: previous / f_back */
	__u32 frame_code;     /* frame: f_code / f_executable */
	__u32 frame_instr;    /* frame: prev_instr / instr_ptr (pointer) or f_lasti (int, PY_F_FRAMEOBJ) */
	__u32 frame_owner;    /* frame: is_entry (3.11) or owner (3.12+) byte; 0xffff: none */
	__u32 pad;
};

/* One Python frame as captured: the code object and where in it the frame is. instr
 * holds the instruction pointer (or f_lasti) in its low 56 bits and the frame's
 * is_entry/owner byte in the top 8 bits; userspace decodes both per version. */
struct py_frame {
	__u64 code;
	__u64 instr;
};

#define PY_INSTR_MASK 0x00ffffffffffffffULL
#define PY_INSTR_TAG(instr) ((__u32)((instr) >> 56))

enum py_stack_flags {
	PY_STACK_TRUNCATED = 1, /* the chain went on past PY_MAX_DEPTH */
	PY_STACK_FAULT = 2,	/* a frame could not be read: the chain ends early */
};

/* py_stacks value, keyed by a hash of the frames (deduplicated; content-addressed, so
 * an id never names other frames later: the map is an LRU and never cleared). */
struct py_stack {
	__u32 depth;
	__u32 flags;
	__u32 tgid; /* whose frames: userspace reads their code objects from its memory */
	__u32 pad;
	struct py_frame frames[PY_MAX_DEPTH];
};

/* py_new_stacks record: a stack seen for the first time, to decode while its process
 * still lives (the last second of a process that exits is drained after it is gone). */
struct py_new_stack {
	__u32 id;
	__u32 tgid;
};

/* py_tstates value: a thread's PyThreadState address (0: not a Python thread when last
 * looked, at ts). */
struct py_tcache {
	__u64 tstate;
	__u64 ts;
};

#endif /* GPUBPF_PYTHON_H */
