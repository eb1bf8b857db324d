/*
 * faultline fault engine micro-benchmark: ns per fe_engine_decide() for
 * 1, 8 and 64 rules that never fire (no match, or matching while a
 * trigger fails), against an empty call through a volatile function
 * pointer (the floor any per-I/O hook pays).
 *
 * Usage: engine-bench [iterations]   (default 20000000)
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault-engine.h"

#define NLBA 4096               /* pre-drawn I/Os, so the loop draws nothing */

typedef bool (*DecideFn)(FeEngine *fe, FeOp op, uint64_t lba, uint32_t len,
                         uint64_t now_ns, FeDecision *out);

static uint64_t lbas[NLBA];

static bool empty_decide(FeEngine *fe, FeOp op, uint64_t lba, uint32_t len,
                         uint64_t now_ns, FeDecision *out)
{
    (void)fe;
    (void)op;
    (void)lba;
    (void)len;
    (void)now_ns;
    out->fired = 0;
    return false;
}

/* An NVMe-like caller: every I/O comes from SQ 1. */
static bool decide_sq1(FeEngine *fe, FeOp op, uint64_t lba, uint32_t len,
                       uint64_t now_ns, FeDecision *out)
{
    static const FeIoKeys sq1 = { .have = FE_KEY_SQ, .sq = 1 };

    return fe_engine_decide_keys(fe, op, lba, len, &sq1, now_ns, out);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best of 3 runs: the least disturbed by the other tenant of the CPU. */
static double run(DecideFn fn, FeEngine *fe, uint64_t iters)
{
    volatile DecideFn vfn = fn;
    double best = 1e9;
    FeDecision d;
    uint64_t fired = 0;

    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s();
        for (uint64_t i = 0; i < iters; i++) {
            fired += vfn(fe, FE_OP_WRITE, lbas[i & (NLBA - 1)], 8, i, &d);
        }
        double ns = (now_s() - t0) * 1e9 / (double)iters;
        if (ns < best) {
            best = ns;
        }
    }
    if (fired) {
        fprintf(stderr, "unexpected: %" PRIu64 " decisions fired\n", fired);
        exit(1);
    }
    return best;
}

static FeEngine *make(int nrules, const char *kind)
{
    FeEngine *fe = fe_engine_new(1);
    char line[256], err[FE_ERR_MSG_MAX];

    for (int i = 0; i < nrules; i++) {
        uint64_t lo = (uint64_t)i * 16384;
        if (!strcmp(kind, "lba")) {
            /* Ranges in [0, 1M); the I/Os land in [2M, 3M). */
            snprintf(line, sizeof(line), "write lba=%" PRIu64 "-%" PRIu64
                     " delay=1us", lo, lo + 8191);
        } else if (!strcmp(kind, "otherop")) {
            snprintf(line, sizeof(line), "read lba=%" PRIu64 "-%" PRIu64
                     " delay=1us", lo, lo + 8191);
        } else if (!strcmp(kind, "prob0")) {
            snprintf(line, sizeof(line), "b%d: write prob=0 delay=1us", i);
        } else if (!strcmp(kind, "count")) {
            snprintf(line, sizeof(line), "c%d: write count=1 delay=1us", i);
        } else if (!strcmp(kind, "state")) {
            snprintf(line, sizeof(line), "s%d: write state=1 error=eio", i);
        } else if (!strcmp(kind, "sq")) {
            snprintf(line, sizeof(line), "q%d: write sq=2 error=eio", i);
        } else if (!strcmp(kind, "lbaprob0")) {
            /* Ranges covering every I/O of the loop. */
            snprintf(line, sizeof(line), "l%d: write lba=%" PRIu64
                     "-3999999 prob=0 delay=1us", i, 1000000 + lo);
        } else if (!strcmp(kind, "lbanth")) {
            snprintf(line, sizeof(line), "m%d: any lba=%" PRIu64
                     "-3999999 nth=18446744073709551615 delay=1us", i,
                     1000000 + lo);
        } else if (!strcmp(kind, "sqprob0")) {
            snprintf(line, sizeof(line), "p%d: write sq=1 prob=0 error=eio",
                     i);
        } else {
            snprintf(line, sizeof(line),
                     "n%d: write nth=18446744073709551615 error=eio", i);
        }
        if (fe_engine_add_rules(fe, line, err, sizeof(err)) != 1) {
            fprintf(stderr, "bench rule: %s\n", err);
            exit(1);
        }
    }
    if (!strcmp(kind, "count")) {
        /* Use up every count=1 before the timed loop. */
        FeDecision d;
        fe_engine_decide(fe, FE_OP_WRITE, 0, 8, 0, &d);
    }
    return fe;
}

int main(int argc, char **argv)
{
    uint64_t iters = argc > 1 ? strtoull(argv[1], NULL, 0) : 20000000;
    static const char *const kinds[] = {
        "lba", "otherop", "prob0", "nth", "count", "state", "lbaprob0",
        "lbanth", "sq", "sqprob0",
    };
    static const char *const desc[] = {
        "non-matching lba ranges", "rules on another op",
        "matching, prob=0", "matching, nth=huge",
        "matching, count used up", "state mismatch",
        "overlapping lba, prob=0", "overlapping lba, nth=huge",
        "sq mismatch (SQ 1 I/O)", "sq match, prob=0 (SQ 1)",
    };
    static const int counts[] = { 1, 8, 64 };
    uint64_t x = 88172645463325252ULL;
    double base;

    for (int i = 0; i < NLBA; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        lbas[i] = 2000000 + x % 1000000;
    }
    base = run(empty_decide, NULL, iters);
    printf("baseline (empty call via volatile fn ptr): %.2f ns\n", base);
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            FeEngine *fe = make(counts[c], kinds[k]);
            double ns = run(strncmp(kinds[k], "sq", 2) ? fe_engine_decide
                                                       : decide_sq1, fe, iters);
            printf("%-25s %2d rules: %6.2f ns/decision  (%.1fx baseline, "
                   "%+.2f ns)\n", desc[k], counts[c], ns, ns / base,
                   ns - base);
            fe_engine_free(fe);
        }
    }
    return 0;
}
