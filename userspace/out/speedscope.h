/* SPDX-License-Identifier: MIT */
/* speedscope writer: its JSON file format (https://www.speedscope.app/file-format-schema.json).
 *
 * One "sampled" profile per sample type that has any value (the default type is always
 * written, even when empty), with the unit speedscope knows ("nanoseconds", "bytes",
 * otherwise "none"); stacks start with the process (like the folded output), then the
 * call stack root first, inlined functions as frames of their own. "shared.frames" holds
 * each function once, with file and line (the line where the function starts, as
 * speedscope's own pprof import does, so one function is one node of the flame graph).
 */
#ifndef GPUBPF_SPEEDSCOPE_H
#define GPUBPF_SPEEDSCOPE_H

#include <stdio.h>

#include "profile.h"

/* Write p (symbolized) to f. Returns 0 or a negative errno (-EIO on a failed write).
 * Does not close f. */
int speedscope__write(const struct profile *p, FILE *f);

#endif /* GPUBPF_SPEEDSCOPE_H */
