/* SPDX-License-Identifier: MIT */
/* Reading the double-buffered stack maps of bpf/stacks.bpf.h. */
#ifndef GPUBPF_STACKS_USER_H
#define GPUBPF_STACKS_USER_H

#include <stdint.h>

#include "../../bpf/stacks.h"

/* Copy stack ID of the stack map FD into ips (leaf first). Returns the depth (0 for an
 * id < 0 or a missing entry). *truncated is set when the stack filled STACKS_MAX_DEPTH. */
int stacks__read(int fd, int32_t id, uint64_t ips[STACKS_MAX_DEPTH], int *truncated);

/* Make the other buffer active (ACTIVE is a BPF object's mmapped buf_active), wait for
 * programs that already picked the old one to finish, and return the old one: it can be
 * drained now. */
unsigned stacks__flip(volatile uint32_t *active);

/* Delete every entry of a stack or hash map (the inactive buffer after a drain). */
void stacks__clear(int fd, uint32_t key_size);

/* Sum one counter of the per-CPU stats map over every CPU. */
uint64_t stacks__stat(int stats_fd, uint32_t idx);

#endif /* GPUBPF_STACKS_USER_H */
