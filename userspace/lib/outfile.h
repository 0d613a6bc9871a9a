/* SPDX-License-Identifier: MIT */
/* Output files: complete or absent, private, and never a clobbered device.
 *   - A regular file (or a new one) is written to a temporary file beside it, flushed,
 *     fsynced and renamed over it: it appears complete under its name or not at all.
 *     A new file is created 0600 (a profile holds other users' command lines, paths and
 *     symbols); an existing one keeps its mode and owner.
 *   - A character device or a FIFO (-o /dev/stdout, a named pipe) is written in place:
 *     never replaced by a regular file. Its write errors are errors.
 *   - Anything else (a directory, a block device, a socket) is refused. */
#ifndef GPUBPF_OUTFILE_H
#define GPUBPF_OUTFILE_H

#include <stdio.h>

/* Check, before recording starts, that PATH can be written: a regular file or a new one
 * in an existing writable directory, a character device or a FIFO. 0 or a negative errno
 * (-EISDIR, -EPERM for a kind of file gpubpf does not write over, ...). */
int outfile__check(const char *path);

/* What a negative errno from this module means for PATH, for a message. */
const char *outfile__strerror(int err);

/* Write through CB into PATH as described above. CB returns 0 or a negative errno (the
 * writers say -EIO for any failed write: the errno of the failed write, ENOSPC for a full
 * disk, is what this returns then). On failure a regular PATH is left untouched and no
 * temporary file remains. Returns 0 or a negative errno. */
int outfile__write(const char *path, int (*cb)(void *ctx, FILE *f), void *ctx);

#endif /* GPUBPF_OUTFILE_H */
