// SPDX-License-Identifier: MIT
/* The project's one hash table (userspace/lib/hmap.c): the u64 map over many growths,
 * replacement, insertion order, keys that differ in one word; the index table with
 * colliding hashes, where only the owner's comparison tells keys apart. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "test.h"

TEST(map_put_get_grow)
{
	struct hmap m = {0};
	uint64_t v = 0;
	size_t n = 0;

	for (uint64_t i = 0; i < 100000; i++)
		CHECK_INT(hmap__put(&m, i, i >> 3, ~i, i * 7), 0);
	CHECK_INT(m.len, 100000);
	for (uint64_t i = 0; i < 100000; i += 997) {
		CHECK(hmap__get(&m, i, i >> 3, ~i, &v));
		CHECK_INT(v, i * 7);
		/* one word different is another key */
		CHECK(!hmap__get(&m, i, i >> 3, i, NULL));
		CHECK(!hmap__get(&m, i, (i >> 3) + 1, ~i, NULL));
	}
	CHECK(!hmap__get(&m, 100000, 100000 >> 3, ~(uint64_t)100000, NULL));
	/* a put of a key present replaces its value, adds nothing */
	CHECK_INT(hmap__put(&m, 5, 0, ~(uint64_t)5, 42), 0);
	CHECK_INT(m.len, 100000);
	CHECK(hmap__get(&m, 5, 0, ~(uint64_t)5, &v) && v == 42);
	/* iteration: every entry once, in insertion order */
	hmap_for_each(&m, e)
	{
		if (e->k[0] != n)
			T_FAIL("entry %zu has key %" PRIu64, n, e->k[0]);
		n++;
	}
	CHECK_INT(n, 100000);
	hmap__clear(&m);
	CHECK(!hmap__get(&m, 1, 0, ~(uint64_t)1, NULL));
	CHECK_INT(hmap__put(&m, 1, 2, 3, 4), 0);
	CHECK(hmap__get(&m, 1, 2, 3, &v) && v == 4);
	hmap__clear(&m);
}

struct owner {
	const char *keys[4096];
	size_t n;
};

static bool key_eq(const void *ctx, uint32_t idx, const void *key)
{
	return !strcmp(((const struct owner *)ctx)->keys[idx], key);
}

/* Every key hashes alike: the table must still tell them apart by the owner's eq. */
TEST(index_table_collisions)
{
	static char names[4096][16];
	struct owner o = {0};
	struct htab t = {0};
	struct htab_slot *s;

	CHECK(htab__find(&t, 1, key_eq, &o, "x") == NULL);
	for (int i = 0; i < 300; i++) {
		snprintf(names[i], sizeof(names[i]), "key-%d", i);
		CHECK_INT(htab__reserve(&t), 0);
		s = htab__find(&t, 12345, key_eq, &o, names[i]);
		CHECK(s && !s->idx1);
		o.keys[o.n] = names[i];
		htab__fill(&t, s, 12345, (uint32_t)o.n++);
	}
	for (int i = 0; i < 300; i++) {
		char k[16];

		snprintf(k, sizeof(k), "key-%d", i);
		s = htab__find(&t, 12345, key_eq, &o, k);
		CHECK(s && s->idx1 == (uint32_t)i + 1);
	}
	s = htab__find(&t, 12345, key_eq, &o, "key-300");
	CHECK(s && !s->idx1);
	CHECK_INT(t.n, 300);
	CHECK(t.n * 10 <= t.cap * 7);
	htab__clear(&t);
	CHECK(!t.slots && !t.cap && !t.n);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

TEST(hash_of_bytes)
{
	/* equal bytes hash alike; the low bits (the table's index) differ for near keys */
	CHECK(htab__bytes("abc", 3) == htab__bytes("abcd", 3));
	CHECK(htab__bytes("abc", 3) != htab__bytes("abd", 3));
	CHECK((htab__bytes("a1", 2) & 63) != (htab__bytes("a2", 2) & 63) ||
	      (htab__bytes("a2", 2) & 63) != (htab__bytes("a3", 2) & 63));
	/* a tail padded with zeros is not a longer input; nor is the empty one */
	CHECK(htab__bytes("ab", 2) != htab__bytes("ab\0", 3));
	CHECK(htab__bytes("abcdefgh", 8) != htab__bytes("abcdefgh\0", 9));
	CHECK(htab__bytes("", 0) != htab__bytes("\0", 1));
	/* the same top bit flipped in two words does not cancel */
	{
		unsigned char a[16] = {0}, b[16] = {0};

		b[7] = b[15] = 0x80;
		CHECK(htab__bytes(a, 16) != htab__bytes(b, 16));
	}
}

/* Maps-like lines, one mapping apart: no two of 100,000 hash alike, and their low bits (a
 * table's index) spread evenly over 1024 slots. */
TEST(hash_of_lines_spreads)
{
	enum { N = 100000, SLOTS = 1024 };
	uint64_t *h = malloc(N * sizeof(*h));
	int count[SLOTS] = {0}, most = 0;
	char line[128];

	CHECK(h != NULL);
	for (int i = 0; i < N; i++) {
		int len = snprintf(line, sizeof(line), "7f%010x-7f%010x r-xp 00000000 08:01 1234 /usr/lib/libx.so\n",
				   i * 4096, (i + 1) * 4096);

		h[i] = htab__bytes(line, (size_t)len);
		count[h[i] % SLOTS]++;
	}
	for (int i = 0; i < SLOTS; i++)
		most = count[i] > most ? count[i] : most;
	qsort(h, N, sizeof(*h), cmp_u64);
	for (int i = 1; i < N; i++)
		CHECK(h[i] != h[i - 1]);
	free(h);
	CHECK(most < 2 * N / SLOTS); /* mean 98 */
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(map_put_get_grow);
	RUN(index_table_collisions);
	RUN(hash_of_bytes);
	RUN(hash_of_lines_spreads);
	return T_END();
}
