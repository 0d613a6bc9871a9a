// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "envnum.h"
#include "hmap.h"
#include "stacks.h"

/* The map that holds stack ID of M, and its key there. */
static int map_of(const struct stack_maps *m, int32_t id, uint32_t *key)
{
	*key = (uint32_t)id & ~(uint32_t)(STACKS_OVF | STACKS_OWN);
	if (id & STACKS_OWN)
		return id & STACKS_OVF ? -1 : m->own_fd;
	return id & STACKS_OVF ? m->ovf_fd : m->fd;
}

int stacks__read(const struct stack_maps *m, int32_t id, uint64_t ips[STACKS_MAX_DEPTH], int *truncated)
{
	uint32_t key;
	int fd = map_of(m, id, &key), n = 0;
	/* an own-walk stack is at most STACKS_OWN_DEPTH frames, and whole: deeper ones went
	 * to the kernel's walk */
	int depth = id & STACKS_OWN ? STACKS_OWN_DEPTH : STACKS_MAX_DEPTH;

	_Static_assert(sizeof(struct stacks_own) <= STACKS_MAX_DEPTH * sizeof(uint64_t), "an own stack fits IPS");
	*truncated = 0;
	if (id < 0 || fd < 0 || bpf_map_lookup_elem(fd, &key, ips))
		return 0;
	if (depth < STACKS_MAX_DEPTH) /* as the kernel's map, zero past what it holds */
		memset(ips + depth, 0, (size_t)(STACKS_MAX_DEPTH - depth) * sizeof(ips[0]));
	while (n < depth && ips[n])
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

static int take_one_by_one(int fd, struct stacks_taken *t)
{
	unsigned char prev[64];
	bool started = false;

	if (t->key_size > sizeof(prev))
		return -EINVAL;
	/* the inactive buffer: nothing adds to it while it is read, emptied at the end */
	while (t->n < t->cap) {
		unsigned char *k = t->keys + t->n * t->key_size;

		if (bpf_map_get_next_key(fd, started ? prev : NULL, k))
			break;
		memcpy(prev, k, t->key_size);
		started = true;
		if (bpf_map_lookup_elem(fd, k, t->vals + t->n * t->val_size) == 0)
			t->n++;
	}
	stacks__clear(fd, t->key_size);
	return 0;
}

int stacks__take(int fd, uint32_t key_size, uint32_t val_size, uint32_t max_entries, struct stacks_taken *t)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	uint64_t batch = 0; /* the kernel's cursor: a bucket index for hash maps */
	bool first = true;

	memset(t, 0, sizeof(*t));
	t->key_size = key_size;
	t->val_size = val_size;
	t->cap = max_entries;
	t->keys = malloc((size_t)max_entries * key_size);
	t->vals = malloc((size_t)max_entries * val_size);
	if (!t->keys || !t->vals) {
		stacks__taken_free(t);
		return -ENOMEM;
	}
	for (;;) {
		__u32 count = (__u32)(t->cap - t->n);
		int err;

		if (!count)
			break;
		err = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &batch, &batch, t->keys + t->n * key_size,
						      t->vals + t->n * val_size, &count, &opts);
		t->n += count;
		if (!err) {
			first = false;
			continue;
		}
		if (errno == ENOENT)
			break;
		/* A kernel without batches for this map (before 5.6), or one that says no
		 * for another reason: the one-by-one walk takes what is left. */
		return take_one_by_one(fd, t);
	}
	return 0;
}

void stacks__taken_free(struct stacks_taken *t)
{
	free(t->keys);
	free(t->vals);
	memset(t, 0, sizeof(*t));
}

void stacks__clear_ids(const struct stack_maps *m, const int32_t *ids, size_t n)
{
	struct hmap done = {0};
	uint32_t key;

	for (size_t i = 0; ids && i < n; i++) {
		int fd = map_of(m, ids[i], &key);

		if (ids[i] < 0 || fd < 0 || hmap__get(&done, (uint32_t)ids[i], 0, 0, NULL))
			continue;
		bpf_map_delete_elem(fd, &key);
		if (hmap__put(&done, (uint32_t)ids[i], 0, 0, 1))
			break;
	}
	hmap__clear(&done);
	/* a stack whose count never landed (its map was full): the walk takes it */
	if (bpf_map_get_next_key(m->fd, NULL, &key) == 0)
		stacks__clear(m->fd, sizeof(key));
	if (m->ovf_fd >= 0 && bpf_map_get_next_key(m->ovf_fd, NULL, &key) == 0)
		stacks__clear(m->ovf_fd, sizeof(key));
	if (m->own_fd >= 0 && bpf_map_get_next_key(m->own_fd, NULL, &key) == 0)
		stacks__clear(m->own_fd, sizeof(key));
}

void stacks__test_size(struct bpf_map *a, struct bpf_map *b)
{
	const char *e = getenv("GPUBPF_STACK_MAP_ENTRIES");
	long n = e ? strtol(e, NULL, 10) : 0;

	if (n > 0 && n <= STACKS_OVF) {
		bpf_map__set_max_entries(a, (uint32_t)n);
		bpf_map__set_max_entries(b, (uint32_t)n);
	}
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

void stacks__fpwalk_knobs(bool *off, uint32_t *mask)
{
	*off = envnum__get("GPUBPF_FPWALK", 0, 1, 1) == 0;
	*mask = (1u << (int)envnum__get("GPUBPF_FPWALK_KEY_BITS", 0, 29, 29)) - 1;
}
