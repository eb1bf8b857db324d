/*
 * faultline fault engine: the seeded draws.  Every draw depends on (seed,
 * rule key, ordinal, salt) only, so a seed replays the same decisions;
 * integer arithmetic only, so every host draws the same values.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fault-engine-int.h"

uint64_t fe_rule_hbase(uint64_t seed, uint64_t key)
{
    return fe_mix64(fe_mix64(seed + FE_GOLDEN) ^ key);
}

/* (a * b) >> 32, saturating; 32-bit limbs so no 128-bit type is needed. */
static uint64_t mul_q32(uint64_t a, uint64_t b)
{
    uint64_t ah = a >> 32, al = a & 0xffffffffu;
    uint64_t bh = b >> 32, bl = b & 0xffffffffu;
    uint64_t r, t[3];

    r = ah * bh;
    if (r >> 32) {
        return UINT64_MAX;
    }
    r <<= 32;
    t[0] = ah * bl;
    t[1] = al * bh;
    t[2] = (al * bl) >> 32;
    for (int i = 0; i < 3; i++) {
        if (r > UINT64_MAX - t[i]) {
            return UINT64_MAX;
        }
        r += t[i];
    }
    return r;
}

/*
 * -ln(U) in Q32.32 for U in (0,1] taken from @u, with integer arithmetic
 * only: libm's log() may differ between hosts, this cannot.
 */
static uint64_t neg_ln_q32(uint64_t u)
{
    uint64_t x = (u >> 1) + 1;              /* U = x / 2^63 */
    int e = 63 - __builtin_clzll(x);
    uint64_t m = e >= 31 ? x >> (e - 31) : x << (31 - e);
    uint64_t frac = 0, neg_log2;

    /* Bit-by-bit log2 of the mantissa m / 2^31 in [1,2). */
    for (int i = 31; i >= 0; i--) {
        m = (m * m) >> 31;
        if (m >= (1ULL << 32)) {
            m >>= 1;
            frac |= 1ULL << i;
        }
    }
    neg_log2 = ((uint64_t)(63 - e) << 32) - frac;
    return mul_q32(neg_log2, 2977044472ULL);    /* ln 2 in Q0.32 */
}

/* A delay drawn for ordinal @n; at most FE_DELAY_MAX_NS (exp() tails). */
uint64_t fe_delay_value(const FeRule *r, const FeDelaySpec *d,
                        uint64_t n, uint64_t salt)
{
    uint64_t v;

    switch (d->kind) {
    case FE_DELAY_FIXED:
        return d->a;
    case FE_DELAY_UNIFORM:
        /* The parser bounds b by FE_DELAY_MAX_NS: the span cannot wrap. */
        return d->a + fe_draw(r, n, salt) % (d->b - d->a + 1);
    case FE_DELAY_EXP:
        v = mul_q32(d->a, neg_ln_q32(fe_draw(r, n, salt)));
        return v < FE_DELAY_MAX_NS ? v : FE_DELAY_MAX_NS;
    case FE_DELAY_NONE:
        break;
    }
    return 0;
}

/*
 * The @k (<= FE_CORRUPT_MAX) distinct byte offsets rule @r flips in an I/O
 * of @bytes (> 0) at its ordinal @n, ascending: drawn from (seed, rule,
 * ordinal) like prob=, so the same run flips the same bytes.  Returns k.
 */
uint32_t fe_corrupt_offsets(const FeRule *r, uint64_t n, uint64_t bytes,
                            uint64_t *off)
{
    uint32_t k = r->corrupt < bytes ? r->corrupt : (uint32_t)bytes;

    for (uint32_t i = 0; i < k; i++) {
        uint64_t o = fe_draw(r, n, 16 + i) % bytes;
        uint32_t j = 0;

        /*
         * A byte drawn twice would flip back: take the next free one.
         * off[0..i) is ascending, so one pass steps over a run of taken
         * ones; wrapping to byte 0 starts the pass again.
         */
        while (j < i) {
            if (off[j] == o) {
                o = (o + 1) % bytes;
                if (o == 0) {
                    j = 0;
                    continue;
                }
            }
            j++;
        }
        /* Insertion keeps off[0..i] ascending. */
        for (j = i; j > 0 && off[j - 1] > o; j--) {
            off[j] = off[j - 1];
        }
        off[j] = o;
    }
    return k;
}
