/* SPDX-License-Identifier: MIT */
/* Growing an array that the caller owns. */
#ifndef GPUBPF_VEC_H
#define GPUBPF_VEC_H

#include <stddef.h>

/* Room for NEED elements of ELEM bytes in *ARR (capacity *CAP, doubled from 64 as
 * needed): 0, or -ENOMEM with *ARR and *CAP as they were. */
int vec__grow(void **arr, size_t *cap, size_t need, size_t elem);

#endif /* GPUBPF_VEC_H */
