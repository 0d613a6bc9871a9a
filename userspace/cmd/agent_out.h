/* SPDX-License-Identifier: MIT */
/* --output-dir: one file per process and interval, DIR/SERVICE/START-PID.pb.gz (START in
 * UTC, e.g. 20260102T030405.123Z), written atomically (outfile.c). Retention removes the
 * oldest files first: those older than the age bound, then as many as it takes to stay
 * under the size bound. Only files named like ours, in service directories, are
 * counted or removed; the directory is scanned at start and once an hour. */
#ifndef GPUBPF_AGENT_OUT_H
#define GPUBPF_AGENT_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct agent_out;

/* DIR is created (0700) when missing. MAX_BYTES and MAX_AGE_S bound it (0: no bound).
 * NULL with errno set. */
struct agent_out *agent_out__open(const char *dir, uint64_t max_bytes, double max_age_s);
void agent_out__close(struct agent_out *o);

/* Write one profile. SERVICE is made a directory name ([A-Za-z0-9_.-], not starting with
 * '.'). 0 or a negative errno. */
int agent_out__write(struct agent_out *o, const char *service, int64_t start_ns, int pid, const void *data, size_t len);

/* Apply retention now (NOW: time(NULL)). Returns how many files were removed. */
int agent_out__retain(struct agent_out *o, time_t now);

/* Files and bytes under the directory, as counted. */
void agent_out__usage(const struct agent_out *o, uint64_t *files, uint64_t *bytes);

/* The directory name of SERVICE. */
void agent_out__dirname(const char *service, char *out, size_t cap);

#endif /* GPUBPF_AGENT_OUT_H */
