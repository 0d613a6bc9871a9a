/* SPDX-License-Identifier: MIT */
/* Command-line parsing of `gpubpf record` (the options themselves: opts.h). */
#ifndef GPUBPF_CLI_H
#define GPUBPF_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "opts.h"

/* Parse `record` arguments (argv[0] is "record"). Returns 0, or -EINVAL after printing
 * one clear line on stderr. */
int cli__parse_record(int argc, char **argv, struct record_opts *o);

void cli__usage_record(FILE *f);
void cli__usage_main(FILE *f);

/* Strict number parsing: whole string, in range. 0 or -EINVAL. */
int cli__parse_int(const char *s, long min, long max, long *out);
int cli__parse_double(const char *s, double min, double max, double *out);

#endif /* GPUBPF_CLI_H */
