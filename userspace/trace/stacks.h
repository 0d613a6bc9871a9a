/* SPDX-License-Identifier: MIT */
/* Reading the double-buffered stack maps of bpf/stacks.bpf.h. */
#ifndef GPUBPF_STACKS_USER_H
#define GPUBPF_STACKS_USER_H

#include <stdbool.h>
#include <stdint.h>

#include "../../bpf/stacks.h"

/* A buffer's stack map, its overflow map (bpf/stacks.bpf.h) and its own-walk map
 * (bpf/fpwalk.bpf.h); ovf_fd, own_fd -1: none. */
struct stack_maps {
	int fd, ovf_fd, own_fd;
};

/* Copy stack ID of the stack maps M into ips (leaf first): an id with STACKS_OVF is in
 * the overflow map, one with STACKS_OWN in the own-walk map. Returns the depth (0 for an id < 0 or a missing entry).
 * *truncated is set when the stack filled STACKS_MAX_DEPTH. */
int stacks__read(const struct stack_maps *m, int32_t id, uint64_t ips[STACKS_MAX_DEPTH], int *truncated);

/* The own walk's knobs from the environment (bpf/fpwalk.bpf.h): *OFF where GPUBPF_FPWALK=0
 * (the kernel's walk for every hit), *MASK the key bits GPUBPF_FPWALK_KEY_BITS leaves (all
 * 29 by default; fewer make stacks collide, for tests). */
void stacks__fpwalk_knobs(bool *off, uint32_t *mask);

/* Make the other buffer active (ACTIVE is a BPF object's mmapped buf_active), wait for
 * programs that already picked the old one to finish, and return the old one: it can be
 * drained now. */
unsigned stacks__flip(volatile uint32_t *active);

/* Delete every entry of a stack or hash map (the inactive buffer after a drain). */
void stacks__clear(int fd, uint32_t key_size);

/* What stacks__take read out of a hash map: N keys and values, packed. */
struct stacks_taken {
	unsigned char *keys, *vals;
	size_t n, cap;
	uint32_t key_size, val_size;
};

/* Read and empty the hash map FD of the inactive buffer (at most MAX_ENTRIES): in
 * batches of the kernel's lookup-and-delete (a few system calls for the whole map),
 * or, where the kernel has none for it, one entry at a time. 0 or -ENOMEM; free T
 * with stacks__taken_free either way. */
int stacks__take(int fd, uint32_t key_size, uint32_t val_size, uint32_t max_entries, struct stacks_taken *t);
void stacks__taken_free(struct stacks_taken *t);

/* Empty the stack maps M of the inactive buffer: the N IDS their entries were read
 * under, one delete each (duplicates and ids < 0 skipped), then a walk over anything
 * left (a stack whose count never landed because the counts map was full); IDS NULL:
 * the walks only. */
void stacks__clear_ids(const struct stack_maps *m, const int32_t *ids, size_t n);

struct bpf_map;
/* Before load: the two buffers' stack maps A, B sized GPUBPF_STACK_MAP_ENTRIES where it
 * is set (tests: a tiny map makes bucket collisions sure, and the overflow maps take the
 * losers); else left as built. */
void stacks__test_size(struct bpf_map *a, struct bpf_map *b);

/* Sum one counter of the per-CPU stats map over every CPU. */
uint64_t stacks__stat(int stats_fd, uint32_t idx);

#endif /* GPUBPF_STACKS_USER_H */
