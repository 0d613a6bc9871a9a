/* SPDX-License-Identifier: MIT */
/* Parser for /tmp/perf-PID.map lines ("START SIZE name", hex), written by JITs. */
#ifndef GPUBPF_PERFMAP_H
#define GPUBPF_PERFMAP_H

#include <stddef.h>
#include <stdint.h>

/* Parse LINE[0..LEN) (trailing "\n" or "\r\n" allowed). *name points into LINE, not
 * NUL-terminated. Returns 0 or -EINVAL (also for a zero size or a range that wraps). */
int perfmap__parse_line(const char *line, size_t len, uint64_t *start, uint64_t *size, const char **name,
			size_t *name_len);

#endif /* GPUBPF_PERFMAP_H */
