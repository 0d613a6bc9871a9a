/* SPDX-License-Identifier: MIT */
/* Whole small files (/proc, /sys, kallsyms) into memory, bounded: target-controlled
 * files (a process's maps) must not make gpubpf allocate without limit. */
#ifndef GPUBPF_READFILE_H
#define GPUBPF_READFILE_H

#include <stdbool.h>
#include <stddef.h>

/* All of FD, up to MAX bytes, NUL-terminated and malloc'd; *LENP (may be NULL) gets the
 * length. Past MAX: with TRUNCATE the first MAX bytes, else NULL with errno EFBIG. NULL
 * with errno on a failed read or allocation. */
char *readfile__fd(int fd, size_t max, bool truncate, size_t *lenp);

/* The same for the file at PATH (opened O_RDONLY | O_CLOEXEC, closed again). */
char *readfile__path(const char *path, size_t max, bool truncate, size_t *lenp);

#endif /* GPUBPF_READFILE_H */
