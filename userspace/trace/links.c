// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include <bpf/libbpf.h>

#include "links.h"

#define LINKS_THREADS 64

struct slice {
	struct bpf_link **links;
	size_t from, n, step;
};

static void *destroy_slice(void *arg)
{
	struct slice *s = arg;

	for (size_t i = s->from; i < s->n; i += s->step)
		bpf_link__destroy(s->links[i]);
	return NULL;
}

void links__destroy_all(struct bpf_link **links, size_t n)
{
	pthread_t tids[LINKS_THREADS];
	struct slice slices[LINKS_THREADS];
	size_t nt = n < LINKS_THREADS ? n : LINKS_THREADS, started = 0;

	for (size_t t = 0; t < nt; t++) {
		slices[t] = (struct slice){.links = links, .from = t, .n = n, .step = nt};
		if (pthread_create(&tids[t], NULL, destroy_slice, &slices[t]) != 0)
			break;
		started++;
	}
	/* Whatever no thread took (thread creation failed) is destroyed here, in order. */
	for (size_t t = started; t < nt; t++)
		destroy_slice(&slices[t]);
	for (size_t t = 0; t < started; t++)
		pthread_join(tids[t], NULL);
}

int linkset__add(struct linkset *s, struct bpf_link *l)
{
	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 16;
		struct bpf_link **n = realloc(s->v, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		s->v = n;
		s->cap = ncap;
	}
	s->v[s->n++] = l;
	return 0;
}

void linkset__destroy(struct linkset *s)
{
	if (s->serial)
		destroy_slice(&(struct slice){.links = s->v, .from = 0, .n = s->n, .step = 1});
	else
		links__destroy_all(s->v, s->n);
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}
