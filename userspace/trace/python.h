/* SPDX-License-Identifier: MIT */
/* Python stacks: find CPython (3.10-3.13, static or libpython, in containers too) in a
 * target, tell the BPF side (bpf/python.bpf.h) where its thread states and frames are,
 * and turn the captured frames into `function (file:line)` frames merged into the
 * native stack: each run of interpreter frames (_PyEval_EvalFrameDefault and the call
 * machinery around it) becomes the Python frames it was executing.
 *
 * The target is untrusted: its memory is read with process_vm_readv, every read and
 * string bounded, every chain depth-limited. Code objects are cached per (pid, address)
 * while the process lives, so names survive until export when they were seen once. */
#ifndef GPUBPF_PYTHON_USER_H
#define GPUBPF_PYTHON_USER_H

#include <stdbool.h>
#include <stdint.h>

#include "profile.h"

struct python;
struct session;
struct bpf_object;

/* Create the shared BPF maps (py_procs, py_tstates, py_stacks). NULL with errno set. */
struct python *python__new(struct session *s);
void python__free(struct python *py); /* accepts NULL */

/* For every BPF object that includes bpf/python.bpf.h, after __open() and before
 * __load(): share py's maps. py NULL (--no-python): shrink the object's own maps to
 * one entry, so capture finds no process and costs one lookup. 0 or negative errno. */
int python__prepare(struct python *py, struct bpf_object *obj);

/* Look at PID (again after an exec or a load): find the interpreter and fill py_procs.
 * Returns 0, also for a process that is not Python (a line says why when the pid is a
 * root target); negative errno only on internal failure. */
int python__track(struct python *py, int pid);

/* What the lead's record.c calls once, after procs__new() and the procs__add_pid() /
 * procs__spawn() calls and before cpu__new() / cuda__new(): creates s->py unless
 * --no-python, tracks the current targets and registers for their exec/load events.
 * 0 or negative errno (s->py stays NULL then; recording works without Python frames). */
int python__attach_session(struct session *s);

/* The user part of a sample's stack with Python merged in. USER holds the native user
 * frames (leaf first, return addresses already moved back into the call). Writes location
 * ids of s->prof, leaf first, into IDS (at most CAP) and returns how many, or -ENOENT
 * when there is nothing to merge (no such Python stack: the caller adds the native
 * frames as usual), or another negative errno. */
int python__frames(struct python *py, int pid, int32_t pystack, const struct prof_frame *user, int nu, uint32_t *ids,
		   int cap);

/* The session's model (s->prof) was replaced by an empty one (the agent, after each
 * interval): forget the location ids kept for the old one. */
void python__model_renewed(struct python *py);

/* A pid seen in samples (-a): look at it once. */
void python__note_pid(struct python *py, int pid);

struct python_stats {
	uint64_t procs;	     /* processes with a supported interpreter */
	uint64_t stacks;     /* Python stacks merged into samples */
	uint64_t truncated;  /* of which deeper than PY_MAX_DEPTH */
	uint64_t bad_frames; /* frames whose code object could not be read */
};
void python__stats(const struct python *py, struct python_stats *out);

/* ---- pure helpers, exported for the unit tests ---- */

/* What a native frame is, for the merge. */
enum py_role {
	PY_ROLE_OTHER = 0,    /* a mapped object other than the interpreter, or its other functions */
	PY_ROLE_EVAL = 1,     /* _PyEval_EvalFrameDefault: runs one group of Python frames */
	PY_ROLE_GLUE = 2,     /* call machinery next to it (_PyEval_Vector, _PyFunction_Vectorcall...) */
	PY_ROLE_INTERP = 3,   /* elsewhere in the interpreter's object */
	PY_ROLE_UNMAPPED = 4, /* in no executable mapping: a frame-pointer walk gone astray */
};

/* Plan the merge: ROLES[0..nu) describe the native frames (leaf first), GROUP_END[0..np)
 * the Python frames (leaf first; true on the outermost frame run by one native eval
 * call). WALKABLE: the interpreter keeps frame pointers, so native frames past an eval
 * frame are real callers (else they are dropped). Writes up to CAP entries to OUT, leaf
 * first: i >= 0 is native frame i, -1-j is Python frame j. Returns the count. */
int python__merge_plan(const uint8_t *roles, int nu, const bool *group_end, int np, bool walkable, int32_t *out,
		       int cap);

/* Line of instruction index IDX (code units) in a 3.11+ location table, or in a 3.10
 * line table (IDX counts code units too). Returns the line, or FIRSTLINE when the table
 * has no entry for it. Bounded by LEN. */
int python__line_311(const uint8_t *tab, size_t len, int firstline, int64_t idx);
int python__line_310(const uint8_t *tab, size_t len, int firstline, int64_t idx);

/* 3.13+: parse _Py_DebugOffsets at the start of _PyRuntime (BUF, LEN bytes). Fills the
 * offsets the walk and the decoder need. 0 or -EINVAL when it does not look right. */
struct py_layout {
	int major, minor;
	uint32_t flags;		      /* enum py_proc_flags */
	uint32_t runtime_interp_head; /* offset of interpreters.head in _PyRuntime */
	uint32_t interp_threads, tstate_next, tstate_match, tstate_frame, cframe_current;
	uint32_t frame_previous, frame_code, frame_instr, frame_owner; /* frame_owner 0xffff: none */
	uint32_t co_filename, co_name, co_qualname, co_firstlineno, co_linetable, co_code_adaptive;
	uint32_t ascii_size, compact_size; /* sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject) */
};
int python__parse_debug_offsets(const uint8_t *buf, size_t len, struct py_layout *out);

/* The bytes of a code object that hold every field L reads (its pointers, its first
 * line), up to co_code_adaptive at least. */
size_t py_code_span(const struct py_layout *L);

#endif /* GPUBPF_PYTHON_USER_H */
