/* SPDX-License-Identifier: MIT */
/* pprof writer: gzipped perftools.profiles.Profile (proto/profile.proto) via protobuf-c.
 *
 * Rules the consumers enforce: string_table[0] is ""; mapping, location and function
 * ids are 1..N in order (Parca); sample type names contain no '-' (Pyroscope).
 */
#ifndef GPUBPF_PPROF_H
#define GPUBPF_PPROF_H

#include <stdio.h>

#include "profile.h"

/* Encode p (symbolized: call profile__symbolize first) and write it gzipped to f.
 * Returns 0 or a negative errno (-EIO on a failed write). Does not close f. */
int pprof__write(const struct profile *p, FILE *f);

#endif /* GPUBPF_PPROF_H */
