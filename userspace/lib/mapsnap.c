// SPDX-License-Identifier: MIT
/* /proc/PID/maps once an event (mapsnap.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mapsnap.h"
#include "readfile.h"

/* The most any reader takes (the symbolizer's and the object scans' bound): a larger
 * text is not kept, and each reader reads it under its own bound. */
#define SNAP_MAX (64u << 20)

static __thread struct {
	bool on, have;
	int pid;
	char *text; /* NULL with have: the read failed with err */
	size_t len;
	int err;
	unsigned long reads, copies;
} snap;

void mapsnap__begin(void)
{
	mapsnap__end();
	snap.on = true;
}

void mapsnap__end(void)
{
	free(snap.text);
	snap.text = NULL;
	snap.have = snap.on = false;
}

void mapsnap__counts(unsigned long *reads, unsigned long *copies)
{
	*reads = snap.reads;
	*copies = snap.copies;
}

static char *read_maps(int pid, size_t max, bool truncate, size_t *lenp)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	snap.reads++;
	return readfile__path(path, max, truncate, lenp);
}

char *mapsnap__read(int pid, size_t max, bool truncate, size_t *lenp)
{
	size_t n;
	char *out;

	if (!snap.on)
		return read_maps(pid, max, truncate, lenp);
	if (!snap.have || snap.pid != pid) {
		free(snap.text);
		snap.text = read_maps(pid, SNAP_MAX, false, &snap.len);
		snap.err = snap.text ? 0 : errno;
		if (!snap.text && snap.err == EFBIG) {
			snap.have = false; /* too large to keep: each reader reads it */
			return read_maps(pid, max, truncate, lenp);
		}
		snap.have = true;
		snap.pid = pid;
	}
	if (!snap.text) {
		errno = snap.err;
		return NULL;
	}
	n = snap.len;
	if (n > max) {
		if (!truncate) {
			errno = EFBIG;
			return NULL;
		}
		n = max;
	}
	out = malloc(n + 1);
	if (!out) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(out, snap.text, n);
	out[n] = '\0';
	if (lenp)
		*lenp = n;
	snap.copies++;
	return out;
}
