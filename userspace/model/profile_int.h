/* SPDX-License-Identifier: MIT */
/* The profile model's insides, shared by its files: profile.c (arena, strings,
 * header, locations, symbolization) and profile_samples.c (samples and their labels).
 * profile.h is the contract. */
#ifndef GPUBPF_PROFILE_INT_H
#define GPUBPF_PROFILE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "hmap.h"
#include "profile.h"

#define ARENA_CHUNK (64 * 1024)
#define SYMBOLIZE_TRIES 4
#define LOC_BLOCK 1024 /* locations per block */

struct arena_chunk {
	struct arena_chunk *next;
	size_t size, used;
	/* 8-byte aligned: three 8-byte fields above */
	char data[];
};

struct loc_ent {
	struct prof_location pub;
	const char *synth_name; /* interned; PROF_FRAME_SYNTH only */
	const char *synth_sys;
	uint8_t tries; /* resolver calls that did not resolve it */
};

struct sample_ent {
	struct prof_sample pub;
	int64_t *values; /* in the arena; pub.values points here */
};

struct profile {
	struct arena_chunk *arena;
	size_t arena_bytes;

	const char **strs; /* interned strings, in the arena */
	size_t nstrs, cap_strs;
	struct htab str_ht;

	struct {
		const char *type, *unit;
	} types[PROFILE_MAX_TYPES];
	int ntypes;
	int64_t totals[PROFILE_MAX_TYPES];
	uint64_t saturated; /* sums held at the int64 limits */
	struct prof_mapping main_map;
	bool have_main_map;

	const char *period_type, *period_unit;
	int64_t period;
	int64_t time_nanos, duration_nanos;

	const char **comments;
	int ncomments, cap_comments;

	/* fixed-size blocks: a location is large (it holds a whole sym_result), so the
	 * array neither doubles its slack nor copies itself when it grows */
	struct loc_ent **loc_blocks;
	size_t nlocs, cap_blocks;
	struct htab loc_ht;

	struct sample_ent *samples;
	size_t nsamples, cap_samples;
	struct htab sample_ht;
};

static inline struct loc_ent *loc_at(const struct profile *p, size_t idx)
{
	return &p->loc_blocks[idx / LOC_BLOCK][idx % LOC_BLOCK];
}

/* ---- profile.c ---- */

void *prof_arena_alloc(struct profile *p, size_t size);
int prof_intern(struct profile *p, const char *s, const char **out);
int prof_intern_location(struct profile *p, int pid, const struct prof_frame *f, uint32_t *id);

#endif /* GPUBPF_PROFILE_INT_H */
