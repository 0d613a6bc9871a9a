// SPDX-License-Identifier: MIT
/* The buffers CUPTI writes its activity records into (cupti_backend.c): a bounded pool,
 * allocated on CUPTI's request, taken back when CUPTI hands a buffer back, never freed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "cupti_int.h"

/* Bounded buffers: at most POOL_N buffers are in CUPTI's hands; when all are, CUPTI drops
 * records (and counts them) rather than gpubpf growing the job's memory. */
#define POOL_N 8
/* ... and at most POOL_ALLOC_MAX ever allocated: a buffer CUPTI never gave back before a
 * cuptiFinalize is not reused (CUPTI might still write it), and more can be made */
#define POOL_ALLOC_MAX 16
#define POOL_BUF_SIZE (512 * 1024)
#define POOL_ALIGN 8

static struct {
	pthread_mutex_t lock;
	uint8_t *free[POOL_ALLOC_MAX];
	int nfree, nalloc;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

void CUPTIAPI inj_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint8_t *b = NULL;

	pthread_mutex_lock(&pool.lock);
	if (pool.nfree > 0) {
		b = pool.free[--pool.nfree];
	} else if (pool.nalloc < POOL_ALLOC_MAX && pool.nalloc - pool.nfree < POOL_N) {
		b = aligned_alloc(POOL_ALIGN, POOL_BUF_SIZE);
		if (b)
			pool.nalloc++;
	}
	pthread_mutex_unlock(&pool.lock);
	*buffer = b;
	*size = b ? POOL_BUF_SIZE : 0;
	*max_records = 0;
}

/* A buffer back from CUPTI. Never freed, and taken once however often it comes back:
 * around a cuptiFinalize (after each device-time window) CUPTI may hand back a buffer
 * it returned at a forced flush, and a buffer freed twice would break the job's heap. */
void inj_pool_put(uint8_t *b)
{
	pthread_mutex_lock(&pool.lock);
	for (int i = 0; i < pool.nfree; i++)
		if (pool.free[i] == b)
			goto out;
	if (pool.nfree < POOL_ALLOC_MAX)
		pool.free[pool.nfree++] = b;
out:
	pthread_mutex_unlock(&pool.lock);
}
