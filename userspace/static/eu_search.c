// SPDX-License-Identifier: MIT
/* Linked into gpubpf-static only (the GPU bundle's binary). Debian 12's backported
 * elfutils 0.192 ships libelf.a and libdw.a without elfutils' lib/eu-search.o, the
 * tsearch wrappers they call, so a static link lacks these six functions (the shared
 * libraries carry their own). Same contract as elfutils': each call is tsearch(3) and
 * friends on the tree's root, under a lock. Ours is one lock for every tree (recursive: a
 * free_node callback may free another tree), so only the tree's first member, its root,
 * is touched, and the rest of elfutils' struct, its own lock, is left as it lays it out. */
#define _GNU_SOURCE
#include <pthread.h>
#include <search.h>
#include <stddef.h>

struct eu_tree {
	void *root; /* elfutils' search_tree begins so */
};

typedef int (*eu_cmp)(const void *, const void *);

void *eu_tsearch(const void *key, struct eu_tree *tree, eu_cmp compare);
void *eu_tfind(const void *key, struct eu_tree *tree, eu_cmp compare);
void *eu_tdelete(const void *key, struct eu_tree *tree, eu_cmp compare);
void eu_tdestroy(struct eu_tree *tree, void (*free_node)(void *));
void eu_search_tree_init(struct eu_tree *tree);
void eu_search_tree_fini(struct eu_tree *tree, void (*free_node)(void *));

static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void *eu_tsearch(const void *key, struct eu_tree *tree, eu_cmp compare)
{
	void *ret;

	pthread_mutex_lock(&lock);
	ret = tsearch(key, &tree->root, compare);
	pthread_mutex_unlock(&lock);
	return ret;
}

void *eu_tfind(const void *key, struct eu_tree *tree, eu_cmp compare)
{
	void *ret;

	pthread_mutex_lock(&lock);
	ret = tfind(key, &tree->root, compare);
	pthread_mutex_unlock(&lock);
	return ret;
}

void *eu_tdelete(const void *key, struct eu_tree *tree, eu_cmp compare)
{
	void *ret;

	pthread_mutex_lock(&lock);
	ret = tdelete(key, &tree->root, compare);
	pthread_mutex_unlock(&lock);
	return ret;
}

static void no_free(void *node)
{
	(void)node;
}

void eu_tdestroy(struct eu_tree *tree, void (*free_node)(void *))
{
	pthread_mutex_lock(&lock);
	if (tree->root)
		tdestroy(tree->root, free_node ? free_node : no_free);
	tree->root = NULL;
	pthread_mutex_unlock(&lock);
}

void eu_search_tree_init(struct eu_tree *tree)
{
	tree->root = NULL;
}

void eu_search_tree_fini(struct eu_tree *tree, void (*free_node)(void *))
{
	eu_tdestroy(tree, free_node);
}
