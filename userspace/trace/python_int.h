/* SPDX-License-Identifier: MIT */
/* CPython frames' insides, shared by their files: python.c (layouts, detection,
 * lifecycle), python_lines.c (line tables, debug offsets and the native/Python merge:
 * pure), python_maps.c (the interpreter's ELF symbols and the target's mappings),
 * python_code.c (code objects read from the target, their locations), python_util.c
 * (reading the target). Not for use outside trace/: python.h is the contract. */
#ifndef GPUBPF_PYTHON_INT_H
#define GPUBPF_PYTHON_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "hmap.h"
#include "python.h"

/* Bounds on what the target can make us read. */
#define PY_STR_MAX 512		/* bytes of a name or file name */
#define PY_LINETABLE_MAX 65536	/* bytes of a line table */
#define PY_CODE_READ 1024	/* bytes of a code object read, its fields in them */
#define PY_MAPS_MAX (16u << 20) /* bytes of /proc/PID/maps */
#define PY_MAX_RANGES 64	/* interpreter functions with a role */
#define PY_SCANS_MAX 256	/* files whose scan is remembered; past it all are forgotten */

/* The frame owner that marks the C stack's shim frame at the base of each
 * _PyEval_EvalFrameDefault call in 3.12+ (FRAME_OWNED_BY_CSTACK). */
#define PY_OWNER_CSTACK 3

/* ---- per-process state ---- */

struct py_range {
	uint64_t start, end; /* runtime addresses */
	uint8_t role;	     /* enum py_role */
};

struct py_code {
	char *name, *file;
	int firstline;
	uint32_t version; /* bumped when the address turns out to hold another code object */
	uint64_t sig[3];  /* name, file and line table pointers: who lives at the address */
	double checked;	  /* when sig was last compared with the target's memory */
	uint8_t *lines;
	size_t nlines;
	bool bad; /* could not be read: shown as [python code 0x...] */
};

struct py_pid {
	int pid;
	bool python; /* a supported interpreter: py_procs has it */
	struct py_layout L;
	uint64_t code_type; /* runtime address of PyCode_Type, 0 if unknown */
	bool fp;	    /* the eval loop keeps a frame pointer: native callers past it are real */
	dev_t interp_dev;
	ino_t interp_ino;
	struct py_range ranges[PY_MAX_RANGES]; /* eval and glue functions */
	int nranges;
	struct py_range *maps; /* executable mappings; role INTERP or OTHER */
	int nmaps;
	double maps_at;	   /* when maps was read (monotonic seconds) */
	double maps_every; /* the least time between two reads at a miss (s; 0: PY_MAPS_EVERY_MIN) */
};

struct python {
	struct session *s;
	int procs_fd, tstates_fd, stacks_fd, new_fd;
	struct hmap pids;  /* pid -> struct py_pid * */
	struct hmap codes; /* (pid, code address) -> struct py_code * */
	struct hmap locs;  /* (pid, code address, line) -> location id */
	struct hmap roots; /* pids named or started by the user: say why they get no Python */
	struct hmap scans; /* (dev, inode, mapping offset) -> struct py_scan * */
	struct python_stats st;
	uint32_t unknown_loc, trunc_loc; /* "[python code]" and "[truncated]" locations */
};

struct py_syms {
	uint64_t runtime, version, code_type; /* st_value, 0 if absent */
	uint64_t bias;			      /* runtime = st_value + bias */
	struct py_range ranges[PY_MAX_RANGES];
	int nranges;
	bool eval;
};

/* ---- python_util.c ---- */

double py_mono_s(void);
int py_read(int pid, uint64_t addr, void *buf, size_t len);
uint64_t py_rd64(const uint8_t *p);
uint32_t py_rd32(const uint8_t *p);

/* ---- python_maps.c ---- */

int py_scan_interp(int fd, uint64_t map_start, uint64_t map_off, struct py_syms *ps);
struct stat;
int py_scan_file(struct python *py, int fd, const struct stat *st, uint64_t map_start, uint64_t map_off,
		 struct py_syms *ps);
void py_scans_clear(struct python *py);
int py_read_maps(struct py_pid *pp);
uint8_t py_role_of(struct py_pid *pp, uint64_t addr, bool *reread);

/* ---- python_code.c ---- */

void py_code_free(struct py_code *c);
struct py_code *py_code_get(struct python *py, struct py_pid *pp, uint64_t addr);

/* ---- python.c ---- */

struct py_pid *py_pid_get(struct python *py, int pid, bool create);
void py_say(struct python *py, int pid, const char *what);

#endif /* GPUBPF_PYTHON_INT_H */
