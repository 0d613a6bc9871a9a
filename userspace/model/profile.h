/* SPDX-License-Identifier: MIT */
/* The profile model: the one in-memory truth every writer reads.
 *
 * Samples are keyed by (pid, tid, location list, labels) and carry one int64 value per
 * sample type. Locations are interned: a user address of a pid, a kernel address, or a
 * synthetic frame (a kernel name, "[memcpy HtoD]"). Symbolization fills each location's
 * sym_result once (profile__symbolize), while the target still lives where possible;
 * writers then only read.
 */
#ifndef GPUBPF_PROFILE_H
#define GPUBPF_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "syms.h"

#define PROFILE_MAX_TYPES 16
#define PROFILE_MAX_LABELS 8
#define PROFILE_MAX_FRAMES 256

enum prof_frame_kind {
	PROF_FRAME_USER = 0,   /* addr is a user address in pid */
	PROF_FRAME_KERNEL = 1, /* addr is a kernel address */
	PROF_FRAME_SYNTH = 2,  /* name (and sys_name) describe it; addr is informational */
};

struct prof_frame {
	uint32_t kind; /* enum prof_frame_kind */
	uint64_t addr;
	const char *name;     /* PROF_FRAME_SYNTH: display name (copied by the model) */
	const char *sys_name; /* PROF_FRAME_SYNTH: optional system name, e.g. the mangled kernel name */
};

struct prof_label {
	const char *key; /* copied by the model */
	const char *str; /* string value (copied), or NULL for a numeric label */
	int64_t num;
	const char *unit; /* numeric labels only, may be NULL */
};

struct prof_location {
	uint32_t id;   /* 1..N in insertion order */
	uint32_t kind; /* enum prof_frame_kind */
	int pid;       /* PROF_FRAME_USER only */
	uint64_t addr;
	bool symbolized;       /* sym is valid */
	struct sym_result sym; /* for SYNTH: module "[cuda]", one frame with the name */
};

struct prof_sample {
	int pid, tid;
	uint32_t nlocs;
	const uint32_t *locs; /* location ids, leaf first */
	uint32_t nlabels;
	const struct prof_label *labels;
	const int64_t *values; /* profile__num_types() values */
};

struct profile;

/* NULL with errno set on failure. */
struct profile *profile__new(void);
void profile__free(struct profile *p); /* accepts NULL */

/* Declare a sample type ("samples", "count"). Names must not contain '-'. Returns the
 * index of the type (its position in every sample's values) or a negative errno. The
 * first type added is the default. Types are added before samples. */
int profile__add_type(struct profile *p, const char *type, const char *unit);
int profile__num_types(const struct profile *p);
void profile__type(const struct profile *p, int idx, const char **type, const char **unit);
int profile__find_type(const struct profile *p, const char *type); /* index or -ENOENT */

/* Metadata for the header of the output. */
int profile__set_period(struct profile *p, const char *type, const char *unit, int64_t period);
void profile__period(const struct profile *p, const char **type, const char **unit, int64_t *period);
void profile__set_time(struct profile *p, int64_t time_nanos, int64_t duration_nanos);
void profile__time(const struct profile *p, int64_t *time_nanos, int64_t *duration_nanos);
int profile__add_comment(struct profile *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int profile__num_comments(const struct profile *p);
const char *profile__comment(const struct profile *p, int idx);

/* Add values to the sample with this key (creating it). frames are leaf first; nframes
 * <= PROFILE_MAX_FRAMES. values has profile__num_types() entries; the model adds them
 * to what the sample already holds. Returns 0 or a negative errno. */
int profile__add_sample(struct profile *p, int pid, int tid, const struct prof_frame *frames, int nframes,
			const struct prof_label *labels, int nlabels, const int64_t *values);

/* A profile read back from a file: add a location whose names are already known. kind
 * (enum prof_frame_kind) says how writers show it; sym is copied (nframes >= 1, frames
 * inlined first; a NULL func becomes "[unknown]+0xADDR"). The location is never merged
 * with another one, and no resolver is asked about it. Returns 0 and sets *id (1..N),
 * or a negative errno. */
int profile__add_resolved_location(struct profile *p, uint32_t kind, int pid, uint64_t addr,
				   const struct sym_result *sym, uint32_t *id);

/* profile__add_sample with location ids (leaf first) instead of frames; every id must
 * name an existing location (-ENOENT otherwise). */
int profile__add_sample_locs(struct profile *p, int pid, int tid, const uint32_t *locs, int nlocs,
			     const struct prof_label *labels, int nlabels, const int64_t *values);

/* The location id of one frame (interned as profile__add_sample does), for
 * profile__add_sample_locs. 0 or a negative errno. */
int profile__location_id(struct profile *p, int pid, const struct prof_frame *f, uint32_t *id);

/* Symbolize every location that is not yet symbolized. USER and KERNEL locations go
 * through syms; SYNTH locations get a module of "[cuda]" and their own name. Call it as
 * often as you like (e.g. at every drain while targets live, and once before writing). */
int profile__symbolize(struct profile *p, struct syms *s);

/* The same for USER locations only: what must be done while the targets live. Kernel
 * addresses outlive them, and the kernel's symbols (all of /proc/kallsyms read and sorted,
 * 40-60 ms of CPU) wait for a profile__symbolize before writing, out of the recording. */
int profile__symbolize_user(struct profile *p, struct syms *s);

/* profile__symbolize with another resolver (tests, replayed symbols): resolve is called
 * for every USER or KERNEL location that is not yet symbolized, or whose last result was
 * not resolved (at most 4 calls per location in all), and fills *out like syms__resolve_user (strings need only live
 * until it returns: the model copies them). A negative return leaves the location as it was; -ENOMEM stops the walk and
 * is returned. */
typedef int (*profile_resolve_fn)(void *ctx, const struct prof_location *loc, struct sym_result *out);
int profile__symbolize_with(struct profile *p, profile_resolve_fn resolve, void *ctx);

/* Read access for writers. Indices are 0..n-1; location ids are 1..N. */
size_t profile__num_samples(const struct profile *p);
const struct prof_sample *profile__sample(const struct profile *p, size_t idx);
size_t profile__num_locations(const struct profile *p);
const struct prof_location *profile__location(const struct profile *p, uint32_t id);

/* The program's own mapping, which pprof writes first (its "File:"), whether or not a
 * sample's frame falls in it. MODULE and BUILD_ID (may be NULL) are copied. 0 or -errno. */
struct prof_mapping {
	const char *module, *build_id; /* interned */
	uint64_t start, limit, offset;
};
int profile__set_main_mapping(struct profile *p, const char *module, const char *build_id, uint64_t start,
			      uint64_t limit, uint64_t offset);
/* NULL when not set. */
const struct prof_mapping *profile__main_mapping(const struct profile *p);

/* Sum of one type's values over all samples (for summaries and tests). */
int64_t profile__total(const struct profile *p, int type_idx);
/* How many sums of sample values passed the int64 range and were held at its limit. */
uint64_t profile__saturated(const struct profile *p);

/* Bytes of heap the model holds (tables, arrays and copied strings), for the governor. */
size_t profile__mem_bytes(const struct profile *p);

#endif /* GPUBPF_PROFILE_H */
