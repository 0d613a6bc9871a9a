/* SPDX-License-Identifier: MIT */
/* pprof reader: a perftools.profiles.Profile (gzipped or not) into the profile model.
 *
 * Input is untrusted: sizes are bounded (PPROF_READ_MAX_BYTES compressed and
 * uncompressed, each field and string as it is inflated), every string index and id
 * reference is checked, and a profile with a dangling reference is refused with a
 * message saying which. What the model cannot hold
 * (more than PROFILE_MAX_TYPES types, deeper stacks, more labels) is dropped and counted
 * in struct pprof_read_info, so callers can say what they skipped.
 */
#ifndef GPUBPF_PPROF_READ_H
#define GPUBPF_PPROF_READ_H

#include <stddef.h>

#include "profile.h"

/* Bounds on a file, compressed or not; on one top-level field of it (a sample, a
 * location, a function: kilobytes in practice); on one string (a symbol name). */
#define PPROF_READ_MAX_BYTES (512ULL << 20)
#define PPROF_READ_MAX_TEXT "512 MiB"
#define PPROF_READ_MAX_FIELD (16ULL << 20)
#define PPROF_READ_MAX_STRING (1ULL << 20)
#define PPROF_STRING_FIELD 6 /* Profile.string_table */

struct pprof_read_info {
	char error[256];	 /* why reading failed (set with a NULL return) */
	char skipped_types[256]; /* "name/unit, ..." of types the model could not take */
	int nskipped_types;
	int nrenamed_types;	 /* names with '-' read as '_' (the model refuses '-') */
	size_t skipped_samples;	 /* samples whose value count does not match the types */
	size_t truncated_stacks; /* deeper than PROFILE_MAX_FRAMES: the leaf-most kept */
	size_t dropped_labels;	 /* labels past PROFILE_MAX_LABELS on a sample */
};

/* Parse a pprof profile from memory: gzip is recognised by its magic. Returns the model
 * (locations already symbolized with the file's names) or NULL with errno set and
 * info->error filled. info may be NULL. */
struct profile *pprof_read__buf(const void *data, size_t len, struct pprof_read_info *info);

/* Read PATH ("-": standard input) and parse it as above. */
struct profile *pprof_read__file(const char *path, struct pprof_read_info *info);

/* Read a whole file, at most max bytes (more: -EFBIG). *out is malloc'd and
 * NUL-terminated (not counted in *len). Returns 0 or a negative errno. */
int pprof_read__slurp(const char *path, size_t max, char **out, size_t *len);

#endif /* GPUBPF_PPROF_READ_H */
