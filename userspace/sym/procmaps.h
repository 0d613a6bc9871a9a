/* SPDX-License-Identifier: MIT */
/* Parser for one line of /proc/PID/maps. Pure text handling, no I/O, so it can be fuzzed. */
#ifndef GPUBPF_PROCMAPS_H
#define GPUBPF_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct procmaps_entry {
	uint64_t start;
	uint64_t end; /* exclusive */
	uint64_t offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	bool read, write, exec, shared;
	bool deleted;	  /* path carried the " (deleted)" suffix (not part of path/path_len) */
	const char *path; /* points into the caller's line, NOT NUL-terminated; NULL if anonymous */
	size_t path_len;
};

/* Parse LINE[0..LEN) (a trailing '\n' is allowed). Returns 0 or -EINVAL. */
int procmaps__parse_line(const char *line, size_t len, struct procmaps_entry *e);

/* Could LINE[0..LEN) be an executable mapping ("start-end r-xp ...")? A byte's look,
 * before the parse: most of a large process's mappings (stacks, heaps, a driver's
 * reservations, data) are not, and readers that want only code (the object scans,
 * Python's tracking) skip them. False for every line procmaps__parse_line parses to a
 * mapping without exec (and for some it would refuse). */
bool procmaps__maybe_exec(const char *line, size_t len);

/* True for a path naming a file ("/..."), false for "[heap]", "[vdso]", anonymous etc. */
bool procmaps__is_file(const struct procmaps_entry *e);

#endif /* GPUBPF_PROCMAPS_H */
