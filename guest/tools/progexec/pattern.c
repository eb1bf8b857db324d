// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The page pattern (docs/programs.md, The pattern): version N of page P of
 * object O, and which version a page holds (mix64 undone), as
 * python/faultline/prog/pattern.py computes them.
 */
#include <string.h>

#include "model.h"

/* ---- the pattern (docs/programs.md, The pattern) */

#define GOLDEN 0x9E3779B97F4A7C15ULL
#define M1 0xBF58476D1CE4E5B9ULL
#define M2 0x94D049BB133111EBULL

/* The inverse of odd @a modulo 2^64 (Newton's iteration). */
static uint64_t inverse(uint64_t a)
{
	uint64_t x = a;

	for (int i = 0; i < 6; i++)
		x *= 2 - a * x;
	return x;
}

uint64_t pe_mix64(uint64_t z)
{
	z = (z ^ z >> 30) * M1;
	z = (z ^ z >> 27) * M2;
	return z ^ z >> 31;
}

/* x from z = x ^ (x >> s). */
static uint64_t unshift(uint64_t z, int s)
{
	uint64_t x = z;

	for (int i = 0; i < 64 / s + 1; i++)
		x = z ^ x >> s;
	return x;
}

uint64_t pe_unmix64(uint64_t z)
{
	z = unshift(z, 31);
	z = unshift(z * inverse(M2), 27);
	return unshift(z * inverse(M1), 30);
}

static uint64_t pattern_key(int obj, uint64_t page, int version)
{
	return (uint64_t)obj << 48 | page << 16 | (uint64_t)version;
}

uint64_t pe_pattern_word(int obj, uint64_t page, int version, int i)
{
	return version ? pe_mix64(pattern_key(obj, page, version) * GOLDEN + (uint64_t)i) : 0;
}

void pe_pattern_fill(uint64_t *w, int obj, uint64_t page, int version)
{
	uint64_t base = pattern_key(obj, page, version) * GOLDEN;

	for (int i = 0; i < PE_WORDS; i++)
		w[i] = version ? pe_mix64(base + (uint64_t)i) : 0;
}

int pe_pattern_version_of(const uint64_t *w, int obj, uint64_t page)
{
	uint64_t k = pe_unmix64(w[0]) * inverse(GOLDEN);
	int version = (int)(k & 0xffff);
	uint64_t want[PE_WORDS];

	if (!w[0]) {
		for (int i = 1; i < PE_WORDS; i++)
			if (w[i])
				return -1;
		return 0;
	}
	if (!version || k >> 48 != (uint64_t)obj || (k >> 16 & 0xffffffff) != page)
		return -1;
	pe_pattern_fill(want, obj, page, version);
	return memcmp(want, w, sizeof(want)) ? -1 : version;
}
