/* SPDX-License-Identifier: MIT */
/* `gpubpf report FILE [--top N] [--sample-type NAME] [--raw]`: text tables of a pprof
 * profile (gpubpf's, or another tool's as far as its sample types allow) or of a trace
 * written by gpubpf, the largest first, each with a percentage column. */
#ifndef GPUBPF_REPORT_H
#define GPUBPF_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "pprof_read.h"
#include "profile.h"
#include "trace.h"

struct report_opts {
	int top;			    /* rows per table before an "[N more]" row (default 10) */
	const char *sample_type;	    /* the type of the top-functions table (default: CPU samples) */
	bool raw;			    /* plain integers (ns, bytes) instead of human units */
	const char *source;		    /* file name for the header, or NULL */
	const struct pprof_read_info *info; /* what reading skipped, or NULL */
};

/* argv[0] is "report". Returns 0 or a negative errno (after one line on stderr). */
int report__main(int argc, char **argv);
void report__usage(FILE *f);

/* The tables of a profile / of a trace. Return 0 or a negative errno (-EINVAL: a
 * --sample-type the profile does not have, after one line on stderr). */
int report__profile(const struct profile *p, const struct report_opts *o, FILE *f);
int report__trace(const struct trace *t, const struct report_opts *o, FILE *f);

#endif /* GPUBPF_REPORT_H */
