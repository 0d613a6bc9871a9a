/* SPDX-License-Identifier: MIT */
/* /proc/PID/maps read once for all the readers of one event. A process held at a change
 * of its link map (procs.c: every dlopen calls _dl_debug_state twice) waits while the
 * symbolizer, the CUDA and CUPTI object scans, Python's tracking (twice) and the agent's
 * selection each read its maps: five to six reads of one text that the kernel renders
 * line by line (each mapping's path walked), for each of the two events of each dlopen.
 * Within a scope (one thread's, begun and ended around an event's handlers), the first
 * read of a pid is kept and the others get copies of it; outside one, each reads. */
#ifndef GPUBPF_MAPSNAP_H
#define GPUBPF_MAPSNAP_H

#include <stdbool.h>
#include <stddef.h>

/* A scope on the calling thread: mapsnap__end forgets what it kept. Scopes do not nest:
 * a begin inside one starts afresh. */
void mapsnap__begin(void);
void mapsnap__end(void);

/* /proc/PID/maps as readfile__path reads it (malloc'd, NUL-terminated, at most MAX bytes:
 * past that the first MAX with TRUNCATE, else NULL with errno EFBIG; NULL with errno when
 * it cannot be read), from the scope's copy where there is one. */
char *mapsnap__read(int pid, size_t max, bool truncate, size_t *lenp);

/* Reads of the file itself, and copies given, on this thread since it started (tests). */
void mapsnap__counts(unsigned long *reads, unsigned long *copies);

#endif /* GPUBPF_MAPSNAP_H */
