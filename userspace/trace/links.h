/* SPDX-License-Identifier: MIT */
/* Tearing down many BPF links at once. Detaching a uprobe waits for a grace period
 * (~80 ms here); done one after another, 100 probes take 8 s. Destroyed from parallel
 * threads, the waits overlap and the whole batch takes about one grace period. */
#ifndef GPUBPF_LINKS_H
#define GPUBPF_LINKS_H

#include <stdbool.h>
#include <stddef.h>

struct bpf_link;

/* Destroy every link (NULL entries are skipped); the array itself is not freed. */
void links__destroy_all(struct bpf_link **links, size_t n);

/* A growing set of the links a tracer attached. Zero-initialized is empty.
 * serial: destroy one after another. USDT links need it: libbpf keeps one USDT manager per
 * BPF object, and a USDT link's detach gives its spec ids back to that manager's list
 * (a realloc) with no lock; two threads detaching links of one object corrupt the heap
 * (ASan: a double free in bpf_link__destroy, seen as CI's "realloc(): invalid next size"). */
struct linkset {
	struct bpf_link **v;
	size_t n, cap;
	bool serial;
};

/* Keep L. 0 or -ENOMEM (then L is not kept: the caller destroys it). */
int linkset__add(struct linkset *s, struct bpf_link *l);
/* Destroy every link (in parallel unless serial) and empty the set; it can be reused. */
void linkset__destroy(struct linkset *s);

#endif /* GPUBPF_LINKS_H */
