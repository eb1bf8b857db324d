/*
 * faultline fault engine: the candidate index (fault-cand.h).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdlib.h>

#include "fault-engine-int.h"

static int cmp_sort_ent(const void *a, const void *b)
{
    const FeSortEnt *x = a, *y = b;

    if (x->lo != y->lo) {
        return x->lo < y->lo ? -1 : 1;
    }
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Sort the @n entries of @t into @rg. */
static void ranges_build(FeRanges *rg, FeSortEnt *t, uint32_t n)
{
    uint64_t m = 0;

    qsort(t, n, sizeof(*t), cmp_sort_ent);
    for (uint32_t i = 0; i < n; i++) {
        m = t[i].hi > m ? t[i].hi : m;
        rg->lo[i] = t[i].lo;
        rg->hi[i] = t[i].hi;
        rg->pmax[i] = m;
        rg->idx[i] = t[i].idx;
    }
    rg->n = n;
}

int fe_cand_reserve(FeCandIndex *ci, size_t n)
{
    /* Per op: lo, hi, pmax of each range list; idx of each and @all. */
    size_t sz = FE_OP__MAX * n *
                (3 * FE_RANGE_KEYS * sizeof(uint64_t) +
                 (FE_RANGE_KEYS + 1) * sizeof(uint32_t));
    char *mem = malloc(sz);
    FeSortEnt *tmp = malloc(n * sizeof(*tmp));

    if (!mem || !tmp) {
        free(mem);
        free(tmp);
        return -1;
    }
    free(ci->mem);
    free(ci->sort_tmp);
    ci->mem = mem;
    ci->sort_tmp = tmp;
    ci->cap = n;
    return 0;
}

void fe_cand_build(FeCandIndex *ci, const FeRule *rules, size_t nrules,
                   bool (*lazy)(const void *opaque, size_t i),
                   const void *opaque)
{
    size_t cap = ci->cap;
    /* All 64-bit arrays first, so every array stays aligned. */
    uint64_t *b64 = (uint64_t *)(void *)ci->mem;
    uint32_t *b32 = (uint32_t *)(void *)(b64 + FE_OP__MAX * 3 *
                                         FE_RANGE_KEYS * cap);

    for (int op = 0; op < FE_OP__MAX; op++) {
        FeCand *c = &ci->op[op];
        FeRanges *rg[FE_RANGE_KEYS] = { &c->lba, &c->sq, &c->cpu };

        for (int l = 0; l < FE_RANGE_KEYS; l++) {
            uint64_t *o = b64 + ((size_t)op * FE_RANGE_KEYS + l) * 3 * cap;
            uint32_t n = 0;

            rg[l]->lo = o;
            rg[l]->hi = o + cap;
            rg[l]->pmax = o + 2 * cap;
            rg[l]->idx = b32 + ((size_t)op * (FE_RANGE_KEYS + 1) + l) *
                               cap;
            for (size_t i = 0; i < nrules; i++) {
                const FeRule *r = &rules[i];
                FeSortEnt *t = &ci->sort_tmp[n];

                if (!fe_rule_of_op(r, op) || lazy(opaque, i) ||
                    fe_cand_list(r) != l) {
                    continue;
                }
                fe_rule_bounds(r, l, &t->lo, &t->hi);
                t->idx = (uint32_t)i;
                n++;
            }
            ranges_build(rg[l], ci->sort_tmp, n);
        }
        c->all = b32 + ((size_t)op * (FE_RANGE_KEYS + 1) + FE_RANGE_KEYS) *
                 cap;
        c->nall = 0;
        for (size_t i = 0; i < nrules; i++) {
            if (fe_rule_of_op(&rules[i], op) && !lazy(opaque, i) &&
                fe_cand_list(&rules[i]) == 3) {
                c->all[c->nall++] = (uint32_t)i;
            }
        }
    }
}

void fe_cand_free(FeCandIndex *ci)
{
    free(ci->mem);
    free(ci->sort_tmp);
    ci->mem = NULL;
    ci->sort_tmp = NULL;
    ci->cap = 0;
}
