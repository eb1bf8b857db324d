/*
 * faultline fault engine: the candidate index (fault-cand.c), which rules
 * an I/O of one op must look at, and the span counts (fault-span.c) of
 * the range rules counted instead.  The group rules (fault-rules.c) are
 * counted too, so both leave them out.  Internal to the engine, plain
 * C11 like it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef FAULT_CAND_H
#define FAULT_CAND_H

/* Its types need FeRule: fault-engine-int.h includes this file. */
#ifndef FAULT_ENGINE_INT_H
#error "include fault-engine-int.h, not fault-cand.h"
#endif

/* The range keys: lba=, sq=, cpu= (fe_cand_list() 0..2). */
#define FE_RANGE_KEYS 3

/*
 * Rules of one op with a range key, sorted by start, with a prefix maximum
 * of their ends, so one branch-free binary search finds the last range
 * starting at or before the I/O's end and a short backward scan stops as
 * soon as no earlier range can reach the I/O's start: an I/O outside every
 * range costs O(log n) and never touches a rule.
 */
typedef struct FeRanges {
    uint32_t n;
    uint64_t *lo;               /* sorted ascending */
    uint64_t *hi;
    uint64_t *pmax;             /* max(hi[0..i]) */
    uint32_t *idx;
} FeRanges;

/*
 * Candidate rules of one op that must be looked at per I/O: by lba= if
 * they have it, else by sq=, else by cpu= (an I/O without that key skips
 * the list); rules with only len= are in @all.
 */
typedef struct FeCand {
    uint32_t nall;
    uint32_t *all;              /* rule indices, no lba=, sq= or cpu= */
    FeRanges lba, sq, cpu;
} FeCand;

typedef struct FeSortEnt {
    uint64_t lo, hi;
    uint32_t idx;
} FeSortEnt;

typedef struct FeCandIndex {
    FeCand op[FE_OP__MAX];
    char *mem;                  /* every array of @op */
    FeSortEnt *sort_tmp;        /* scratch of fe_cand_build() */
    size_t cap;                 /* rules the arrays can hold */
} FeCandIndex;

/*
 * Room for @n rules (at least 1).  -1 if out of memory: the index is then
 * unchanged.  On success the old arrays are gone: fe_cand_build() next.
 */
int fe_cand_reserve(FeCandIndex *ci, size_t n);
/*
 * Index @rules[0..n) (@n within the reserved room), leaving out every
 * rule @i for which @lazy(@opaque, @i) is true.
 */
void fe_cand_build(FeCandIndex *ci, const FeRule *rules, size_t n,
                   bool (*lazy)(const void *opaque, size_t i),
                   const void *opaque);
void fe_cand_free(FeCandIndex *ci);

/* Number of a[0..n) that are <= key (a sorted, n >= 1); branch-free. */
static inline uint32_t fe_upper_bound(const uint64_t *a, uint32_t n,
                                      uint64_t key)
{
    const uint64_t *base = a;

    while (n > 1) {
        uint32_t half = n / 2;
        base = base[half] <= key ? base + half : base;
        n -= half;
    }
    return (uint32_t)(base - a) + (*base <= key);
}

static inline bool fe_rule_of_op(const FeRule *r, int op)
{
    return r->op == FE_OP_ANY || (int)r->op == op;
}

/* Which candidate list of its op rule @r is in (FeCand.all: 3). */
static inline int fe_cand_list(const FeRule *r)
{
    return (r->flags & FE_HAS_LBA) ? 0 : (r->flags & FE_HAS_SQ) ? 1 :
           (r->flags & FE_HAS_CPU) ? 2 : 3;
}

/* Rule @r's bounds for key @l (a fe_cand_list() index below 3). */
static inline void fe_rule_bounds(const FeRule *r, int l, uint64_t *lo,
                                  uint64_t *hi)
{
    *lo = l == 0 ? r->lba_lo : l == 1 ? r->sq_lo : r->cpu_lo;
    *hi = l == 0 ? r->lba_hi : l == 1 ? r->sq_hi : r->cpu_hi;
}

/*
 * Rules with one range key (lba=, sq= or cpu=, nothing else to match)
 * that cannot fire for many matches (prob=0, nth=huge, a used up
 * count=...) are counted, not looked at: per op and key, two counts per
 * I/O (how many of the rules' sorted distinct ends lie below its start,
 * how many starts lie at or below its end) give every such rule its
 * ordinal at a fold, since an I/O misses [lo, hi] exactly when hi < start
 * or lo > end.  A matching I/O bumps a rule's ordinal by at most one, so no
 * rule reaches its bound before @budget I/Os since the last fold: the
 * fold triggers the rules that are due then.
 */
#define FE_SPAN_SLACK 64        /* fewer matches to a bound: looked at */

#define FE_NSPANS (FE_OP__MAX * FE_RANGE_KEYS)

typedef struct FeSpanEnt {
    uint32_t idx;               /* rule index */
    uint32_t jlo, jhi;          /* its lo in @lo, its hi in @hi */
} FeSpanEnt;

typedef struct FeSpans {
    uint32_t nlo, nhi, nent;
    uint64_t *lo, *hi;          /* sorted distinct starts, ends */
    uint64_t *below;            /* [k]: I/Os with k ends below their lba */
    uint64_t *upto;             /* [k]: I/Os with k starts <= their end */
    uint64_t total;             /* I/Os since the last fold */
    FeSpanEnt *ent;
} FeSpans;

/* An I/O over [lo, hi] of the key of @sp. */
static inline void spans_count(FeSpans *sp, uint64_t lo, uint64_t hi)
{
    if (sp->nent) {
        sp->below[lo ? fe_upper_bound(sp->hi, sp->nhi, lo - 1) : 0]++;
        sp->upto[fe_upper_bound(sp->lo, sp->nlo, hi)]++;
        sp->total++;
    }
}

#endif /* FAULT_CAND_H */
