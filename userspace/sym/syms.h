/* SPDX-License-Identifier: MIT */
/* Symbolizer: turns user and kernel addresses into module, function, file and line.
 *
 * Target processes are untrusted: every object is opened through /proc/PID/root (or
 * /proc/PID/map_files), never by the path the target claims, and every read is bounded.
 * Objects are cached by build id (or dev:inode) so many processes that map the same
 * libraries share one parsed copy.
 *
 * Addresses of a process that exited still resolve as long as syms__track_pid() saw
 * its mappings while it lived: the tracker keeps the mapping snapshot and the opened
 * ELF handles for the lifetime of the struct syms.
 */
#ifndef GPUBPF_SYMS_H
#define GPUBPF_SYMS_H

#include <stdbool.h>
#include <stdint.h>

#define SYMS_MAX_INLINE 8

struct syms;

struct sym_frame {
	const char *func;     /* demangled name; never NULL (falls back to "module+0xoff") */
	const char *sys_name; /* mangled (linkage) name, or the same as func */
	const char *file;     /* source file from DWARF, or NULL */
	int line;	      /* source line, or 0 */
	int start_line;	      /* line where the function begins (DW_AT_decl_line), or 0 */
};

struct sym_result {
	const char *module;   /* path as the target maps it, "[kernel.kallsyms]", "[perf-map]" or "[unknown]" */
	const char *build_id; /* lowercase hex, or NULL */
	uint64_t map_start;   /* the executable mapping holding the address (0 for kernel) */
	uint64_t map_limit;
	uint64_t map_offset; /* file offset of map_start */
	uint64_t rel_addr;   /* address relative to the object (the "+0x..." in fallbacks) */
	bool resolved;	     /* a symbol was found (false: frames[0].func is "module+0xoff") */
	bool main_exe;	     /* the mapping is the process's executable (/proc/PID/exe) */
	int nframes;	     /* >= 1; inlined frames first, the real function last */
	struct sym_frame frames[SYMS_MAX_INLINE];
};

/* The mapping of PID's executable (/proc/PID/exe, as tracked): module, build id and
 * addresses into OUT (frames untouched). 0, or -ENOENT when it is not known. */
int syms__main_mapping(struct syms *s, int pid, struct sym_result *out);

/* NULL with errno set on failure. */
struct syms *syms__new(void);
void syms__free(struct syms *s); /* accepts NULL */

/* Colon-separated directories searched for separate debug files (".build-id/xx/rest.debug"
 * and .gnu_debuglink names), each first inside the target's root, then on the host.
 * Replaces the default "/usr/lib/debug"; affects objects opened after the call.
 * Returns 0 or a negative errno. */
int syms__set_debug_dirs(struct syms *s, const char *dirs);

/* Snapshot /proc/PID/maps and open every executable file-backed object it maps (through
 * /proc/PID/root), so later lookups work after the process exits. Cheap when nothing
 * changed since the last call; call again after dlopen to pick up new objects.
 * Also reads /tmp/perf-PID.map (inside the target's root) when present.
 * Returns 0 or a negative errno (-ESRCH when the process is gone). */
int syms__track_pid(struct syms *s, int pid);

/* Resolve one user address of PID. Fills *out (strings owned by s, valid until
 * syms__free). Returns 0, also for an address it could not name (then out->resolved is
 * false and frames[0].func is "module+0xoffset" or "[unknown]+0xaddr"); negative errno
 * only on internal failure (-ENOMEM). */
int syms__resolve_user(struct syms *s, int pid, uint64_t addr, struct sym_result *out);

/* Resolve one kernel address from /proc/kallsyms (loaded once, lazily). */
int syms__resolve_kernel(struct syms *s, uint64_t addr, struct sym_result *out);

/* Look up a symbol's address in a tracked process: the first mapped object that defines
 * NAME (in .symtab or .dynsym) wins. Used to place uprobes and to read interpreter
 * globals. Returns 0 and sets *path (the /proc/PID/root-based path to open, owned by s)
 * and *file_offset (for uprobe attach), or -ENOENT. */
int syms__find_symbol(struct syms *s, int pid, const char *name, const char **path, uint64_t *file_offset);

/* The bytes of the strings S keeps until syms__free (names, paths): what it holds grows
 * only with names it has not seen (tests check a target cannot grow it without end). */
size_t syms__string_bytes(const struct syms *s);

#endif /* GPUBPF_SYMS_H */
