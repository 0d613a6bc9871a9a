/* SPDX-License-Identifier: MIT */
/* The on-disk spool of profiles waiting for the server: one file per profile, named by a
 * sequence number that only grows, so the oldest goes first and a restarted agent
 * (SIGKILL, reboot) resumes where the last one stopped. Each file is written with
 * outfile__write (a temporary file, fsync, rename): present and complete, or absent.
 * Bounded by a byte budget: past it the oldest profiles are dropped, and counted.
 *
 * File: "gpubpf-spool 1\n" META "\n" DATA, where META is one line (the upload's query).
 * Thread-safe: the agent's loop puts, its sender thread takes. */
#ifndef GPUBPF_SPOOL_H
#define GPUBPF_SPOOL_H

#include <stddef.h>
#include <stdint.h>

struct spool;

struct spool_item {
	uint64_t seq;
	char *meta;  /* NUL-terminated, malloc'd */
	void *data;  /* malloc'd */
	size_t len;  /* of data */
	size_t size; /* of the file */
};

struct spool_stats {
	uint64_t queued;	/* profiles waiting */
	uint64_t bytes;		/* their files' bytes */
	uint64_t put;		/* put since open */
	uint64_t done;		/* delivered (or given up) since open */
	uint64_t dropped_full;	/* dropped since open: over the byte budget */
	uint64_t dropped_bad;	/* dropped since open: unreadable files */
	uint64_t resumed;	/* found at open */
	uint64_t resumed_bytes; /* their bytes */
};

/* Open DIR (created 0700 when missing; a symlink or a non-directory is refused), with
 * MAX_BYTES for all files together. Files of an earlier run are taken up in order, and
 * temporary files a killed writer left are removed. NULL with errno set. */
struct spool *spool__open(const char *dir, uint64_t max_bytes);
void spool__close(struct spool *sp); /* accepts NULL; the files stay */

/* Add one profile at the end. When the files would pass the budget, the oldest ones that
 * are not being sent are removed first (a profile larger than the whole budget is
 * dropped itself). 0 or a negative errno (nothing was added then; a write error). */
int spool__put(struct spool *sp, const char *meta, const void *data, size_t len);

/* The oldest profile, read into IT; it stays in the spool, held against drops, until
 * spool__done() or spool__release(). -ENOENT when the spool is empty, -EBUSY when the
 * oldest is already held. An unreadable file is removed, counted in dropped_bad, and
 * the next one is tried. */
int spool__take(struct spool *sp, struct spool_item *it);

/* IT was delivered, or will never be: remove it. Frees IT's buffers. */
void spool__done(struct spool *sp, struct spool_item *it);
/* IT was not delivered: it stays first in line. Frees IT's buffers. */
void spool__release(struct spool *sp, struct spool_item *it);

void spool__stats(struct spool *sp, struct spool_stats *out);

#endif /* GPUBPF_SPOOL_H */
