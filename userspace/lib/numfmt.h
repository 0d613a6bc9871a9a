/* SPDX-License-Identifier: MIT */
/* Numbers as the profile's comments say them. */
#ifndef GPUBPF_NUMFMT_H
#define GPUBPF_NUMFMT_H

#include <stddef.h>

/* V rounded to a whole number with thousands grouped ("12,345"; negative as 0, +inf as
 * "unbounded") into BUF of LEN bytes; returns BUF. */
const char *numfmt__grouped(char *buf, size_t len, double v);

#endif /* GPUBPF_NUMFMT_H */
