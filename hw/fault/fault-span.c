/*
 * faultline fault engine: the span counts (fault-cand.h), range rules
 * that cannot fire soon counted per I/O rather than looked at.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdlib.h>
#include <string.h>

#include "fault-engine-int.h"

/* Matches of span entry @e since the last fold. */
static uint64_t span_pending(const FeSpans *s, const FeSpanEnt *e)
{
    uint64_t miss = 0;

    for (uint32_t k = e->jhi + 1; k <= s->nhi; k++) {
        miss += s->below[k];
    }
    for (uint32_t k = 0; k <= e->jlo; k++) {
        miss += s->upto[k];
    }
    return s->total - miss;
}

uint64_t fe_rule_matched(const FeEngine *fe, size_t i)
{
    const FeHot *h = &fe->hot[i];
    uint64_t m = h->matched;

    if (h->group == FE_SPAN) {
        for (const FeSpans *s = fe->span; s < fe->span + FE_NSPANS; s++) {
            for (uint32_t k = 0; k < s->nent; k++) {
                if (s->ent[k].idx == i) {
                    m += span_pending(s, &s->ent[k]);
                }
            }
        }
        return m;
    }
    if (in_group(h) && hot_live(h, fe->state)) {
        return fe->group[h->group].count - h->base;
    }
    return m;
}

/* Fold the span counts into the span rules' ordinals (no trigger). */
void fe_spans_fold(FeEngine *fe)
{
    for (FeSpans *s = fe->span; s < fe->span + FE_NSPANS; s++) {
        if (!s->total) {
            continue;
        }
        /* below[] to suffix sums, upto[] to prefix sums. */
        for (uint32_t k = s->nhi; k-- > 0;) {
            s->below[k] += s->below[k + 1];
        }
        for (uint32_t k = 1; k <= s->nlo; k++) {
            s->upto[k] += s->upto[k - 1];
        }
        for (uint32_t k = 0; k < s->nent; k++) {
            const FeSpanEnt *e = &s->ent[k];
            uint64_t miss = s->upto[e->jlo] +
                            (e->jhi < s->nhi ? s->below[e->jhi + 1] : 0);
            fe->hot[e->idx].matched += s->total - miss;
        }
        memset(s->below, 0, (s->nhi + 1) * sizeof(*s->below));
        memset(s->upto, 0, (s->nlo + 1) * sizeof(*s->upto));
        s->total = 0;
    }
    fe->span_io = 0;
}

/* The fewest I/Os after which a span rule may be due. */
void fe_spans_set_budget(FeEngine *fe)
{
    uint64_t budget = UINT64_MAX;

    for (uint32_t k = 0; k < fe->nspan; k++) {
        const FeHot *h = &fe->hot[fe->span_idx[k]];
        uint64_t slack = h->next == UINT64_MAX ? UINT64_MAX :
                         h->next > h->matched ? h->next - h->matched : 1;
        budget = slack < budget ? slack : budget;
    }
    fe->span_budget = budget;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Sort and de-duplicate @v[0..n); returns the distinct count. */
static uint32_t sort_unique(uint64_t *v, uint32_t n)
{
    uint32_t k = 0;

    qsort(v, n, sizeof(*v), cmp_u64);
    for (uint32_t i = 0; i < n; i++) {
        if (!k || v[i] != v[k - 1]) {
            v[k++] = v[i];
        }
    }
    return k;
}

/*
 * Count rule @i with the spans if it cannot fire for FE_SPAN_SLACK more
 * matches and its one match key is lba=, sq= or cpu=.
 */
bool fe_span_candidate(const FeEngine *fe, size_t i)
{
    const FeRule *r = &fe->rules[i];
    const FeHot *h = &fe->hot[i];
    uint32_t keys = r->flags & (FE_HAS_LBA | FE_HAS_LEN | FE_HAS_STATE |
                                FE_RULE_KEYS);

    if (in_group(h) || (keys != FE_HAS_LBA && keys != FE_HAS_SQ &&
                        keys != FE_HAS_CPU)) {
        return false;
    }
    return h->next == UINT64_MAX ||
           (h->next > h->matched && h->next - h->matched >= FE_SPAN_SLACK);
}

/* Set up fe->span[] for the rules marked FE_SPAN; false if out of memory. */
bool fe_spans_build(FeEngine *fe)
{
    uint32_t nent[FE_NSPANS] = { 0 };
    size_t sz, nspan = 0;
    FeSpans *sp;
    uint32_t *ne;
    char *p;

    free(fe->span_mem);
    fe->span_mem = NULL;
    memset(fe->span, 0, sizeof(fe->span));
    fe->nspan = 0;
    fe->span_idx = NULL;
    for (size_t i = 0; i < fe->nrules; i++) {
        if (fe->hot[i].group != FE_SPAN) {
            continue;
        }
        nspan++;
        for (int op = 0; op < FE_OP__MAX; op++) {
            nent[op * FE_RANGE_KEYS + fe_cand_list(&fe->rules[i])] +=
                fe_rule_of_op(&fe->rules[i], op);
        }
    }
    if (!nspan) {
        return true;
    }
    sz = nspan * sizeof(uint32_t);
    for (ne = nent; ne < nent + FE_NSPANS; ne++) {
        sz += (4 * (size_t)*ne + 2) * sizeof(uint64_t) +
              *ne * sizeof(FeSpanEnt);
    }
    p = calloc(1, sz);
    if (!p) {
        return false;
    }
    fe->span_mem = p;
    /* 64-bit arrays first, so every array stays aligned. */
    for (sp = fe->span, ne = nent; sp < fe->span + FE_NSPANS; sp++, ne++) {
        sp->lo = (uint64_t *)(void *)p;
        sp->hi = sp->lo + *ne;
        sp->below = sp->hi + *ne;
        sp->upto = sp->below + *ne + 1;
        p = (char *)(sp->upto + *ne + 1);
    }
    for (sp = fe->span, ne = nent; sp < fe->span + FE_NSPANS; sp++, ne++) {
        sp->ent = (FeSpanEnt *)(void *)p;
        p += *ne * sizeof(FeSpanEnt);
    }
    fe->span_idx = (uint32_t *)(void *)p;
    for (size_t i = 0; i < fe->nrules; i++) {
        if (fe->hot[i].group == FE_SPAN) {
            fe->span_idx[fe->nspan++] = (uint32_t)i;
        }
    }
    for (int op = 0; op < FE_OP__MAX; op++) {
        for (int l = 0; l < FE_RANGE_KEYS; l++) {
            uint64_t lo, hi;

            sp = span_of(fe, op, l);
            for (uint32_t k = 0; k < fe->nspan; k++) {
                const FeRule *r = &fe->rules[fe->span_idx[k]];
                if (fe_rule_of_op(r, op) && fe_cand_list(r) == l) {
                    fe_rule_bounds(r, l, &lo, &hi);
                    sp->lo[sp->nent] = lo;
                    sp->hi[sp->nent] = hi;
                    sp->ent[sp->nent++].idx = fe->span_idx[k];
                }
            }
            if (!sp->nent) {
                continue;
            }
            sp->nlo = sort_unique(sp->lo, sp->nent);
            sp->nhi = sort_unique(sp->hi, sp->nent);
            for (uint32_t k = 0; k < sp->nent; k++) {
                fe_rule_bounds(&fe->rules[sp->ent[k].idx], l, &lo, &hi);
                sp->ent[k].jlo = fe_upper_bound(sp->lo, sp->nlo, lo) - 1;
                sp->ent[k].jhi = fe_upper_bound(sp->hi, sp->nhi, hi) - 1;
            }
        }
    }
    return true;
}
