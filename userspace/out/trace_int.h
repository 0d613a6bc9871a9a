/* SPDX-License-Identifier: MIT */
/* The Chrome trace's insides, shared by its files: trace.c (JSON strings, the event
 * list, finding a call, the writer) and trace_read.c (the reader and the validator).
 * trace.h is the contract. */
#ifndef GPUBPF_TRACE_INT_H
#define GPUBPF_TRACE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

#define TRACE_MAX_BYTES (1ULL << 30)
struct trace {
	struct trace_event *ev;
	size_t n, cap;
	/* trace__find_call's index: the API events by (pid, tid, start), built for the
	 * first n_indexed events */
	size_t *calls;
	size_t ncalls, n_indexed;
};

#endif /* GPUBPF_TRACE_INT_H */
