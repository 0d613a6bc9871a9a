/* SPDX-License-Identifier: MIT */
/* Diagnostics on stderr. Errors and warnings always; debug only with -v. */
#ifndef GPUBPF_LOG_H
#define GPUBPF_LOG_H

#include <stdbool.h>

extern bool log_verbose;

void pr_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pr_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pr_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Route libbpf's own messages through pr_debug (quiet unless -v). */
void log__setup_libbpf(void);

#endif /* GPUBPF_LOG_H */
