/* SPDX-License-Identifier: MIT */
/* Draws for the unit tests that make up call patterns and costs: seeded, so a run repeats
 * the last one's draws, and the same generator in every test that needs one. */
#ifndef GPUBPF_TEST_RNG_H
#define GPUBPF_TEST_RNG_H

#include <stdint.h>

static uint64_t t_rng_state = 88172645463325252ull;

/* xorshift64, uniform in [0, 1), from STATE. */
static inline double t_uniform_of(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (double)(*state >> 11) / 9007199254740992.0;
}

static inline double t_uniform(void)
{
	return t_uniform_of(&t_rng_state);
}

/* splitmix64 over the xorshift: for draws that must not be correlated with the one before
 * them (a stall's and the next work's), as consecutive xorshift outputs are a little
 * (BPF's prandom is not drawn from the job's). */
static inline double t_mixed(void)
{
	uint64_t z = (uint64_t)(t_uniform() * 9007199254740992.0) + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

#endif
