/* SPDX-License-Identifier: MIT */
/* The one-line status on a terminal, refreshed about once a second. */
#ifndef GPUBPF_STATUS_H
#define GPUBPF_STATUS_H

#include <stdbool.h>
#include <stdint.h>

struct status {
	bool tty;
	bool shown;
	const char *what;
};

void status__init(struct status *st, const char *what);
void status__update(struct status *st, double elapsed, int targets, uint64_t samples, uint64_t lost, const char *extra);
void status__clear(struct status *st);

#endif /* GPUBPF_STATUS_H */
