/* SPDX-License-Identifier: MIT */
/* Timeline: Chrome trace-event JSON (the "JSON Object Format" that Perfetto and
 * chrome://tracing open) from an in-memory list of timed events.
 *
 * CUDA API calls become complete ("X") events on their process and thread; kernels and
 * copies become "X" events on one track per (process, device, stream), named
 * "GPU D stream 0xS" and sorted below the CPU threads; a launch and the kernel it
 * started (same correlation id) are joined by a flow arrow ("s" -> "f"). Timestamps are
 * written in microseconds with nanosecond digits, in time order, so every track is
 * monotonic; events on one track that overlap without nesting are clipped to nest.
 *
 * The same module reads such a file back (for `gpubpf report`) and validates one
 * (tests): well-formed JSON, known phases, balanced B/E and properly nested X per track,
 * monotonic timestamps per track, every flow start with its finish.
 */
#ifndef GPUBPF_TRACE_H
#define GPUBPF_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum trace_kind {
	TRACE_API = 1,	  /* a CUDA API call on a CPU thread (pid, tid) */
	TRACE_KERNEL = 2, /* a kernel (or graph) on a device stream */
	TRACE_MEMCPY = 3, /* a copy or memset on a device stream; name "[memcpy HtoD]", "[memset]" */
	TRACE_LAUNCH = 4, /* a launch CUPTI saw where no traced call was: a zero-length slice
			   * on the thread (category cuda_launch), where its flow arrow starts */
};

struct trace_event {
	enum trace_kind kind;
	const char *name;	  /* API function, kernel name, copy direction; copied */
	int pid;		  /* the process (for device events: the one that issued it) */
	int tid;		  /* TRACE_API: the calling thread */
	const char *process_name; /* optional, copied; the first one given per pid wins */
	const char *thread_name;  /* optional (TRACE_API), copied; first per (pid, tid) wins */
	uint32_t device;	  /* device events */
	uint64_t stream;	  /* device events: the stream handle (0: default) */
	uint64_t start_ns;	  /* any clock common to all events (CLOCK_MONOTONIC) */
	uint64_t dur_ns;
	uint64_t correlation; /* 0: none; equal on a launch and its kernel */
	uint64_t bytes;	      /* TRACE_MEMCPY */
};

struct trace;

/* NULL with errno set on failure. */
struct trace *trace__new(void);
void trace__free(struct trace *t); /* accepts NULL */

/* Copy one event in. 0, -EINVAL (no name, unknown kind) or -ENOMEM. */
int trace__add(struct trace *t, const struct trace_event *ev);

/* Write the whole trace as JSON (the events are sorted by time first). Returns 0 or a
 * negative errno (-EIO on a failed write). Does not close f. */
int trace__write(struct trace *t, FILE *f);

size_t trace__num_events(const struct trace *t);
const struct trace_event *trace__event(const struct trace *t, size_t idx);

/* The index of the innermost TRACE_API event of thread (pid, tid) whose span holds TS,
 * or -1 (none; or no memory for the index, built on first use after an add). */
long trace__find_call(struct trace *t, int pid, int tid, uint64_t ts);
/* The first TRACE_API event of thread (pid, tid) that starts after AFTER and before
 * BEFORE, has no correlation id yet and whose name begins with PREFIX (NULL: any), or -1. */
long trace__find_call_after(struct trace *t, int pid, int tid, uint64_t after, uint64_t before, const char *prefix);
/* Set event IDX's correlation id (a launch joined to the device work it started). */
void trace__set_correlation(struct trace *t, size_t idx, uint64_t corr);

/* Read a trace file written by trace__write (other tools' traces: their "X" events in
 * categories cuda_api, kernel and memcpy, if any) into a new trace. *out is NULL on
 * failure. Returns 0 or a negative errno with a reason in err. At most 1 GiB. */
int trace__read_file(const char *path, struct trace **out, char *err, size_t errlen);

/* Check a trace file's text against the trace-event format (see the top of this file).
 * Returns 0, or -EINVAL with the first problem in err. */
int trace__validate(const char *json, size_t len, char *err, size_t errlen);

/* Write s as a JSON string literal, quotes included: control characters escaped, bytes
 * that are not valid UTF-8 replaced by U+FFFD (JSON text must be UTF-8). NULL writes
 * "". Returns 0 or -EIO. Shared by every JSON writer (speedscope too). */
int json__write_str(FILE *f, const char *s);

#endif /* GPUBPF_TRACE_H */
