/* SPDX-License-Identifier: MIT */
/* Device time's insides, shared by its files: cupti.c (events, lifecycle, attaching,
 * starting a command with the library) and cupti_drain.c (draining, --trace,
 * reporting). cupti.h is the contract. */
#ifndef GPUBPF_CUPTI_INT_H
#define GPUBPF_CUPTI_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "../../bpf/cupti.h"
#include "cupti.h"
#include "hmap.h"
#include "links.h"

#define MAX_SCAN_PIDS 4096
#define MAX_RANGES 32
#define LIB_NAME "libgpubpf_inject.so"

/* hmap key spaces (third key word) */
enum { HK_NAME = 0, HK_STATUS = 1, HK_RANGES = 2, HK_LIB = 3, HK_TEXT = 4, HK_WAS_ON = 5 };

struct ranges {
	int n;
	struct cupti_range r[MAX_RANGES];
};

struct cupti_tracer {
	struct session *s;
	struct cupti_bpf *skel;
	struct ring_buffer *rb;
	struct linkset links;
	struct hmap scanned; /* objscan: (pid or 0, dev, inode) */
	struct hmap tab;     /* (tgid, id, HK_NAME) -> char *; (tgid, 0, HK_STATUS) -> code;
			      * (tgid, 0, HK_TEXT) -> char *; (tgid, 0, HK_RANGES) -> struct ranges *;
			      * (tgid, 0, HK_LIB) -> 1 */
	int objects;
	int targets_fd, comms_fd;
	bool load_failed; /* the BPF object is loaded when the first library is found */
	uint32_t max_rate;
	struct devtrace *dt; /* --trace: device tracks, or NULL */
	uint64_t kernels, copies, kernel_ns, copy_ns;
	char reason[512];
};

/* ---- cupti.c ---- */

const char *cpt_get_str(const struct hmap *m, uint64_t a, uint64_t b, uint64_t c);
const char *cpt_dir_frame(uint32_t dir);

#endif /* GPUBPF_CUPTI_INT_H */
