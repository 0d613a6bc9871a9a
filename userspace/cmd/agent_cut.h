/* SPDX-License-Identifier: MIT */
/* Cutting the model at the end of an interval: one profile per process, of that interval
 * only (the engine's model is replaced by an empty one after each cut, so values never
 * accumulate across intervals). Each process's profile has only the locations its own
 * samples use, renumbered 1..N, and of the sample labels only thread_name: the process's
 * own labels go in the upload's series name, and Pyroscope turns every distinct set of
 * string sample labels into a series of its own (tid or a stream address would make one
 * per thread or stream). */
#ifndef GPUBPF_AGENT_CUT_H
#define GPUBPF_AGENT_CUT_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"

/* The processes with samples in a model: pids ascending, each one's sample indices. */
struct cut_set {
	int *pids;
	size_t npids;
	size_t *idx;   /* sample indices grouped by pid */
	size_t *start; /* pids[i]'s samples are idx[start[i], start[i + 1]) */
};

int agent_cut__group(const struct profile *p, struct cut_set *cs); /* 0 or -ENOMEM */
void agent_cut__set_free(struct cut_set *cs);

struct cut_meta {
	int64_t time_ns, duration_ns; /* the interval */
	const char *comments[4];
	int ncomments;
};

/* The samples IDX[0, N) of SRC (symbolized) as a profile of their own, gzipped pprof in a
 * malloc'd *BUF of *LEN bytes. 0 or a negative errno. */
int agent_cut__pprof(const struct profile *src, const size_t *idx, size_t n, const struct cut_meta *m, char **buf,
		     size_t *len);

/* An empty model with SRC's sample types (in the same order: the tracers hold their
 * indices) and period. NULL with errno set. */
struct profile *agent_cut__renew(const struct profile *src);

#endif /* GPUBPF_AGENT_CUT_H */
