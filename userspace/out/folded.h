/* SPDX-License-Identifier: MIT */
/* Folded-stack writer (flamegraph.pl, speedscope, inferno):
 * one "process;root;...;leaf VALUE" line per distinct stack, for one sample type. */
#ifndef GPUBPF_FOLDED_H
#define GPUBPF_FOLDED_H

#include <stdio.h>

#include "profile.h"

/* Write the values of sample type type_idx (0: the default type). Stacks with a zero
 * value are left out. Frame names have ';' and newlines replaced so a line stays one
 * stack. Returns 0 or a negative errno. */
int folded__write(const struct profile *p, int type_idx, FILE *f);

#endif /* GPUBPF_FOLDED_H */
