/* SPDX-License-Identifier: MIT */
/* Atomic output: a file appears complete under its final name or not at all. */
#ifndef GPUBPF_OUTFILE_H
#define GPUBPF_OUTFILE_H

#include <stdio.h>

/* Check, before recording starts, that PATH can be created: its directory exists and is
 * writable and PATH is not a directory. Returns 0 or a negative errno. */
int outfile__check(const char *path);

/* Write through cb into a temporary file beside PATH, flush and fsync it, then rename it
 * over PATH. On any failure the temporary file is removed and PATH is left untouched.
 * cb returns 0 or a negative errno. Returns 0 or a negative errno. */
int outfile__write(const char *path, int (*cb)(void *ctx, FILE *f), void *ctx);

#endif /* GPUBPF_OUTFILE_H */
