/* SPDX-License-Identifier: MIT */
/* What loading a BPF object cost: its time and each program's verified instructions, said
 * under -v. The verifier's work is most of gpubpf's set-up after the calibrations (the CUDA
 * probes' walk once took 140 ms of a 160 ms load), so a change that makes it explode shows
 * here and in e2e 54, which holds the CUDA probes to their count. */
#ifndef GPUBPF_BPFLOAD_H
#define GPUBPF_BPFLOAD_H

#include <stdint.h>

struct bpf_object;

/* CLOCK_MONOTONIC in ns, to take before the load. */
uint64_t bpfload__now(void);

/* Say under -v how long OBJ (WHAT: "cuda", "cpu", ...) took to load since T0 and how many
 * instructions the verifier went through for each of its loaded programs. */
void bpfload__report(const struct bpf_object *obj, const char *what, uint64_t t0);

#endif /* GPUBPF_BPFLOAD_H */
