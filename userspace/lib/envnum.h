/* SPDX-License-Identifier: MIT */
/* Numbers from the environment: the knobs tests and experiments turn (GPUBPF_*). */
#ifndef GPUBPF_ENVNUM_H
#define GPUBPF_ENVNUM_H

/* The number in environment variable NAME where it is one, whole, within LO-HI; DEF
 * where it is unset, empty, not a number, or out of range. */
double envnum__get(const char *name, double lo, double hi, double def);

#endif /* GPUBPF_ENVNUM_H */
