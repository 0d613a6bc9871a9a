// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "stacks.h"

int stacks__read(int fd, int32_t id, uint64_t ips[STACKS_MAX_DEPTH], int *truncated)
{
	uint32_t key = (uint32_t)id;
	int n = 0;

	*truncated = 0;
	if (id < 0)
		return 0;
	if (bpf_map_lookup_elem(fd, &key, ips))
		return 0;
	while (n < STACKS_MAX_DEPTH && ips[n])
		n++;
	*truncated = n == STACKS_MAX_DEPTH;
	return n;
}

void stacks__clear(int fd, uint32_t key_size)
{
	unsigned char key[64], next[64];
	void *prev = NULL;

	if (key_size > sizeof(key))
		return;
	/* Deleting the key we iterate from restarts the walk at the first key: always
	 * delete the one get_next_key returned. */
	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		bpf_map_delete_elem(fd, next);
		memcpy(key, next, key_size);
		prev = NULL;
	}
	(void)key;
}

uint64_t stacks__stat(int stats_fd, uint32_t idx)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t sum = 0, *vals;

	if (ncpu <= 0)
		return 0;
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return 0;
	if (bpf_map_lookup_elem(stats_fd, &idx, vals) == 0)
		for (int i = 0; i < ncpu; i++)
			sum += vals[i];
	free(vals);
	return sum;
}

unsigned stacks__flip(volatile uint32_t *active)
{
	unsigned old = *active & 1;
	/* A BPF program runs for microseconds: 2 ms is far past the last one that read the
	 * old value. */
	struct timespec ts = {0, 2 * 1000 * 1000};

	*active = !old;
	nanosleep(&ts, NULL);
	return old;
}
