/*
 * faultline fault engine: rule set, seeded decisions, fault log.
 *
 * Source files of the engine library: fault-engine.c, fault-parse.c,
 * fault-cand.c (internal headers fault-engine-int.h, fault-cand.h).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fault-cand.h"

#define FE_LOG_SIZE 4096        /* power of two: the ring index is a mask */
#define FE_GOLDEN 0x9e3779b97f4a7c15ULL
/* Bits of FE_KEY_* and of FE_ACTION_* that attach points refuse. */
#define FE_REFUSE_BITS 2
#define FE_WHO_MAX 96           /* a refuser's name, for the messages */

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

/*
 * Rules with neither lba= nor len= match every I/O of their op (while
 * their state, if any, is the engine's), so their ordinal is a count of
 * the group's I/Os since a base: a matching I/O bumps one counter per
 * group instead of one per rule.  Group FE_OP_ANY counts every I/O.
 */
#define FE_NGROUPS (FE_OP__MAX + 1)
#define FE_NOT_LAZY 0xff
#define FE_SPAN 0xfe            /* counted by the FeSpans, not a group */

typedef struct FeGroup {
    uint64_t count;             /* the group's I/Os since new/reset */
    uint64_t due;               /* min over live members of base + next */
    uint32_t n;
    uint32_t *idx;              /* rule indices */
} FeGroup;

/*
 * Per-rule counters, dense and small: a matching I/O touches these and
 * not the FeRule, until the triggers may pass.
 */
typedef struct FeHot {
    uint64_t matched;           /* ordinal n (of a live lazy rule: stale) */
    uint64_t next;              /* the triggers cannot pass before n == next */
    uint64_t base;              /* live lazy rule: n = group count - base */
    uint32_t state, len_lo, len_hi;
    uint16_t flags;             /* FE_HAS_STATE, FE_HAS_LEN, FE_HOT_KEYS */
    uint8_t group;              /* lazy group, or FE_NOT_LAZY */
} FeHot;

/* FeHot.flags: the rule has sq= or cpu= (bounds in the FeRule: rare). */
#define FE_HOT_KEYS 0x8000u
_Static_assert(!((FE_HAS_STATE | FE_HAS_LEN) & FE_HOT_KEYS),
               "FE_HOT_KEYS must not clash with a stored FE_HAS_* bit");
#define FE_RULE_KEYS (FE_HAS_SQ | FE_HAS_CPU)
/* The actions a rule may carry besides delay= and irq-delay=. */
#define FE_ACTION_FLAGS (FE_HAS_ERROR | FE_HAS_SET_STATE | FE_HAS_COMPLETE | \
                         FE_HAS_IRQ | FE_HAS_DNR | FE_HAS_DROP | FE_HAS_LIE | \
                         FE_HAS_CORRUPT)

typedef struct FeFired {
    uint64_t key;
    const FeRule *rule;
    uint64_t n;                 /* the ordinal it fired at */
} FeFired;

struct FeEngine {
    uint64_t seed;
    uint32_t state;
    uint64_t ordinal;           /* decide() calls since new/reset */
    FeIoProfile io[FE_OP__MAX]; /* the same, per op */

    FeRule *rules;
    FeHot *hot;                 /* parallel to @rules */
    size_t nrules;
    FeCandIndex cand;           /* rules an I/O must look at */
    FeGroup group[FE_NGROUPS];
    FeSpans span[FE_NSPANS];   /* per op and key: span_of() */
    uint32_t nspan;             /* FE_SPAN rules, in @span_idx */
    uint32_t *span_idx;
    uint64_t span_io;           /* I/Os since the last fold */
    uint64_t span_budget;       /* fold when span_io reaches it */
    void *span_mem;
    uint32_t *group_mem;        /* FeGroup.idx, room for @cand's rules */
    FeFired *fired;             /* scratch, one slot per rule */
    uint32_t gen;               /* bumped when rules or counters change */
    uint32_t refused_keys;      /* FE_KEY_* an attach point cannot supply */
    char refused_by[FE_REFUSE_BITS][FE_WHO_MAX]; /* who refuses sq, cpu */

    FeLogEntry *log;
    uint64_t log_total;
    uint64_t digest;

    uint32_t refused_actions;   /* FE_ACTION_* that add_rules rejects */
    char refused_actions_by[FE_REFUSE_BITS][FE_WHO_MAX]; /* fatal, reset-fail */
};

/* splitmix64 finaliser. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rule_hbase(uint64_t seed, uint64_t key)
{
    return mix64(mix64(seed + FE_GOLDEN) ^ key);
}

/* Counter-based draw: depends on (seed, rule key, ordinal, salt) only. */
static inline uint64_t draw(const FeRule *r, uint64_t n, uint64_t salt)
{
    return mix64(mix64(r->hbase + n * FE_GOLDEN) ^
                 (salt * 0xd6e8feb86659fd93ULL));
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
static uint64_t delay_value(const FeRule *r, const FeDelaySpec *d,
                            uint64_t n, uint64_t salt)
{
    uint64_t v;

    switch (d->kind) {
    case FE_DELAY_FIXED:
        return d->a;
    case FE_DELAY_UNIFORM:
        /* The parser bounds b by FE_DELAY_MAX_NS: the span cannot wrap. */
        return d->a + draw(r, n, salt) % (d->b - d->a + 1);
    case FE_DELAY_EXP:
        v = mul_q32(d->a, neg_ln_q32(draw(r, n, salt)));
        return v < FE_DELAY_MAX_NS ? v : FE_DELAY_MAX_NS;
    case FE_DELAY_NONE:
        break;
    }
    return 0;
}

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline bool hot_live(const FeHot *h, uint32_t state)
{
    return !(h->flags & FE_HAS_STATE) || h->state == state;
}

static inline FeSpans *span_of(FeEngine *fe, int op, int key)
{
    return &fe->span[op * FE_RANGE_KEYS + key];
}

static inline bool in_group(const FeHot *h)
{
    return h->group < FE_NGROUPS;
}

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

static uint64_t rule_matched(const FeEngine *fe, size_t i)
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
static void spans_fold(FeEngine *fe)
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
static void spans_set_budget(FeEngine *fe)
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

/* Store every lazy rule's ordinal in matched, before rules move. */
static void freeze_all(FeEngine *fe)
{
    spans_fold(fe);
    spans_set_budget(fe);
    for (size_t i = 0; i < fe->nrules; i++) {
        fe->hot[i].matched = rule_matched(fe, i);
    }
}

static void group_update_due(FeEngine *fe, FeGroup *g)
{
    uint64_t due = UINT64_MAX;

    for (uint32_t k = 0; k < g->n; k++) {
        const FeHot *h = &fe->hot[g->idx[k]];
        if (hot_live(h, fe->state)) {
            uint64_t d = sat_add(h->base, h->next);
            due = d < due ? d : due;
        }
    }
    g->due = due;
}

/* Live lazy rules count on from their stored ordinal. */
static void thaw_all(FeEngine *fe)
{
    for (size_t i = 0; i < fe->nrules; i++) {
        FeHot *h = &fe->hot[i];
        if (in_group(h) && hot_live(h, fe->state)) {
            h->base = fe->group[h->group].count - h->matched;
        }
    }
    for (int g = 0; g < FE_NGROUPS; g++) {
        group_update_due(fe, &fe->group[g]);
    }
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
static bool span_candidate(const FeEngine *fe, size_t i)
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
static bool spans_build(FeEngine *fe)
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

/* Is rule @i counted rather than looked at (a group's or the spans')? */
static bool rule_lazy(const void *opaque, size_t i)
{
    const FeEngine *fe = opaque;

    return fe->hot[i].group != FE_NOT_LAZY;
}

/* Never fails when the rule count did not grow (delete, clear). */
static int rebuild_candidates(FeEngine *fe)
{
    size_t per = fe->nrules ? fe->nrules : 1;

    if (per > fe->cand.cap) {
        uint32_t *group_mem = malloc(FE_NGROUPS * per * sizeof(*group_mem));
        FeFired *fired = malloc(per * sizeof(*fired));

        /* fe_cand_reserve() last: it changes nothing when it fails. */
        if (!group_mem || !fired || fe_cand_reserve(&fe->cand, per) < 0) {
            free(group_mem);
            free(fired);
            return -1;
        }
        free(fe->group_mem);
        free(fe->fired);
        fe->group_mem = group_mem;
        fe->fired = fired;
    }
    fe->gen++;              /* rule indices move: older hit refs are void */
    for (int g = 0; g < FE_NGROUPS; g++) {
        fe->group[g].idx = fe->group_mem + (size_t)g * fe->cand.cap;
        fe->group[g].n = 0;
    }
    for (size_t i = 0; i < fe->nrules; i++) {
        const FeRule *r = &fe->rules[i];
        FeHot *h = &fe->hot[i];

        h->flags = (uint16_t)(r->flags & (FE_HAS_STATE | FE_HAS_LEN));
        if (r->flags & FE_RULE_KEYS) {
            h->flags |= FE_HOT_KEYS;
        }
        h->state = r->state;
        h->len_lo = r->len_lo;
        h->len_hi = r->len_hi;
        h->group = FE_NOT_LAZY;
        if (!(r->flags & (FE_HAS_LBA | FE_HAS_LEN | FE_RULE_KEYS))) {
            FeGroup *g = &fe->group[r->op];
            h->group = (uint8_t)r->op;
            g->idx[g->n++] = (uint32_t)i;
        } else if (span_candidate(fe, i)) {
            h->group = FE_SPAN;
        }
    }
    if (!spans_build(fe)) {
        /* Out of memory: the span rules are looked at per I/O instead. */
        for (size_t i = 0; i < fe->nrules; i++) {
            if (fe->hot[i].group == FE_SPAN) {
                fe->hot[i].group = FE_NOT_LAZY;
            }
        }
    }
    fe_cand_build(&fe->cand, fe->rules, fe->nrules, rule_lazy, fe);
    thaw_all(fe);
    fe->span_io = 0;
    spans_set_budget(fe);
    return 0;
}

static void io_profile_reset(FeEngine *fe)
{
    for (int op = 0; op < FE_OP__MAX; op++) {
        fe->io[op] = (FeIoProfile) { .lba_min = UINT64_MAX };
    }
}

FeEngine *fe_engine_new(uint64_t seed)
{
    FeEngine *fe = calloc(1, sizeof(*fe));

    if (!fe) {
        return NULL;
    }
    fe->seed = seed;
    fe->digest = FE_FNV_BASIS;
    io_profile_reset(fe);
    fe->log = calloc(FE_LOG_SIZE, sizeof(*fe->log));
    if (!fe->log || rebuild_candidates(fe) < 0) {
        fe_engine_free(fe);
        return NULL;
    }
    return fe;
}

void fe_engine_free(FeEngine *fe)
{
    if (!fe) {
        return;
    }
    free(fe->rules);
    free(fe->hot);
    fe_cand_free(&fe->cand);
    free(fe->group_mem);
    free(fe->fired);
    free(fe->span_mem);
    free(fe->log);
    free(fe);
}

/* Truncating string copy, for buffers sized to their longest content. */
static void copy_str(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);

    if (n >= len) {
        n = len - 1;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/*
 * Open-addressing set of rule names, so the name checks and the "rN"
 * search of one add cost O(rules), whatever the engine already holds.
 */
typedef struct FeNameSet {
    const char **slot;
    size_t mask;
} FeNameSet;

static int names_init(FeNameSet *ns, size_t n)
{
    size_t cap = 16;

    while (cap < 2 * n) {
        cap *= 2;
    }
    ns->slot = calloc(cap, sizeof(*ns->slot));
    ns->mask = cap - 1;
    return ns->slot ? 0 : -1;
}

/* Adds @name (kept by pointer); false if it was already there. */
static bool names_add(FeNameSet *ns, const char *name)
{
    size_t i = fe_fnv1a(FE_FNV_BASIS, name, strlen(name)) & ns->mask;

    for (; ns->slot[i]; i = (i + 1) & ns->mask) {
        if (strcmp(ns->slot[i], name) == 0) {
            return false;
        }
    }
    ns->slot[i] = name;
    return true;
}

static bool names_has(const FeNameSet *ns, const char *name)
{
    size_t i = fe_fnv1a(FE_FNV_BASIS, name, strlen(name)) & ns->mask;

    for (; ns->slot[i]; i = (i + 1) & ns->mask) {
        if (strcmp(ns->slot[i], name) == 0) {
            return true;
        }
    }
    return false;
}

static int batch_error(char *err, size_t errlen, size_t line, size_t col,
                       const char *msg, const char *name)
{
    if (err && errlen) {
        snprintf(err, errlen, "%zu:%zu: %s '%s'", line, col, msg, name);
    }
    return -1;
}

static int oom_error(char *err, size_t errlen)
{
    if (err && errlen) {
        snprintf(err, errlen, "1:1: out of memory");
    }
    return -1;
}

/*
 * Check the names of batch @v against @have (rules already present) and
 * each other, then, if @assign, name the unnamed rules "rN" from their
 * engine index, skipping taken names.
 */
static int check_names(const FeRule *have, size_t nhave, FeRule *v, size_t n,
                       bool assign, char *err, size_t errlen)
{
    FeNameSet ns;
    uint64_t k = 0;

    if (names_init(&ns, nhave + n) < 0) {
        return oom_error(err, errlen);
    }
    for (size_t i = 0; i < nhave; i++) {
        names_add(&ns, have[i].name);
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i].named && !names_add(&ns, v[i].name)) {
            free(ns.slot);
            return batch_error(err, errlen, v[i].line, v[i].name_col,
                               "duplicate rule name", v[i].name);
        }
    }
    for (size_t i = 0; assign && i < n; i++) {
        if (v[i].named) {
            continue;
        }
        /* Names below k were found taken for an earlier rule: skip them. */
        k = k > nhave + i ? k : nhave + i;
        do {
            snprintf(v[i].name, sizeof(v[i].name), "r%" PRIu64, k++);
        } while (names_has(&ns, v[i].name));
        names_add(&ns, v[i].name);
    }
    free(ns.slot);
    return 0;
}

int fe_engine_check_rules_len(const char *text, size_t len, char *err,
                              size_t errlen)
{
    FeRule *v;
    size_t n;
    int ret;

    if (fe_parse_rules(text, len, &v, &n, err, errlen) < 0) {
        return -1;
    }
    ret = check_names(NULL, 0, v, n, false, err, errlen) < 0 ? -1 : (int)n;
    free(v);
    return ret;
}

int fe_engine_check_rules(const char *text, char *err, size_t errlen)
{
    return fe_engine_check_rules_len(text, text ? strlen(text) : 0, err,
                                     errlen);
}

static uint32_t rule_keys(const FeRule *r)
{
    return ((r->flags & FE_HAS_SQ) ? FE_KEY_SQ : 0) |
           ((r->flags & FE_HAS_CPU) ? FE_KEY_CPU : 0);
}

/* Rules on a key an attach point refused fail like a bad rule. */
static int check_refused_keys(const FeEngine *fe, const FeRule *v,
                              size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t k = rule_keys(&v[i]) & fe->refused_keys;

        if (k && err && errlen) {
            bool sq = k & FE_KEY_SQ;
            snprintf(err, errlen, "%zu:%zu: '%s' is not supplied by %s",
                     v[i].line, sq ? v[i].sq_col : v[i].cpu_col,
                     sq ? "sq" : "cpu", fe->refused_by[sq ? 0 : 1]);
        }
        if (k) {
            return -1;
        }
    }
    return 0;
}

uint32_t fe_engine_keys_used(const FeEngine *fe)
{
    uint32_t keys = 0;

    for (size_t i = 0; i < fe->nrules; i++) {
        keys |= rule_keys(&fe->rules[i]);
    }
    return keys;
}

/*
 * Set (@who) or lift (@who NULL) the refusal of each of the @bits in
 * @mask, whose refusers are named in @by.
 */
static void set_refusals(uint32_t *mask, char (*by)[FE_WHO_MAX],
                         uint32_t bits, const char *who)
{
    for (int b = 0; b < FE_REFUSE_BITS; b++) {
        if (!(bits & (1u << b))) {
            continue;
        }
        if (who) {
            *mask |= 1u << b;
            copy_str(by[b], FE_WHO_MAX, who);
        } else {
            *mask &= ~(1u << b);
            by[b][0] = '\0';
        }
    }
}

void fe_engine_refuse_keys(FeEngine *fe, uint32_t keys, const char *who)
{
    set_refusals(&fe->refused_keys, fe->refused_by, keys, who);
}

int fe_engine_find_key(const FeEngine *fe, uint32_t keys, const char **key)
{
    for (size_t i = 0; i < fe->nrules; i++) {
        uint32_t k = rule_keys(&fe->rules[i]) & keys;

        if (k) {
            if (key) {
                *key = (k & FE_KEY_SQ) ? "sq" : "cpu";
            }
            return (int)i;
        }
    }
    return -1;
}

/* The trigger bound after ordinal @n: no ordinal below it can fire. */
static uint64_t next_chance(const FeRule *r, uint64_t n)
{
    uint32_t f = r->flags;
    uint64_t m, a, rem;

    if (((f & FE_HAS_COUNT) && r->hits >= r->count) ||
        ((f & FE_HAS_PROB) && !r->prob_one && !r->prob_thresh) ||
        n == UINT64_MAX) {
        return UINT64_MAX;
    }
    m = n + 1;
    if (f & FE_HAS_NTH) {
        return m <= r->nth ? r->nth : UINT64_MAX;
    }
    if (f & FE_HAS_AFTER) {
        if (r->after == UINT64_MAX) {
            return UINT64_MAX;
        }
        m = m > r->after ? m : r->after + 1;
    }
    if (f & FE_HAS_EVERY) {
        a = (f & FE_HAS_AFTER) ? r->after : 0;
        rem = (m - a) % r->every;
        if (rem) {
            if (m > UINT64_MAX - (r->every - rem)) {
                return UINT64_MAX;
            }
            m += r->every - rem;
        }
    }
    return m;
}

void fe_engine_void_hit(FeEngine *fe, FeHitRef ref, uint32_t times)
{
    FeRule *r;
    FeHot *h;

    if (ref.gen != fe->gen || ref.rule >= fe->nrules) {
        return;
    }
    r = &fe->rules[ref.rule];
    h = &fe->hot[ref.rule];
    r->hits -= times < r->hits ? times : r->hits;
    /* A count= it had used up may pass again. */
    if (h->group == FE_SPAN) {
        spans_fold(fe);
        h->next = next_chance(r, h->matched);
        spans_set_budget(fe);
        return;
    }
    h->next = next_chance(r, rule_matched(fe, ref.rule));
    if (in_group(h)) {
        group_update_due(fe, &fe->group[h->group]);
    }
}

/*
 * Which of the FE_ACTION_* @mask rule @r carries; @action and @col name
 * the one given first on its line.
 */
static uint32_t rule_actions(const FeRule *r, uint32_t mask,
                             const char **action, size_t *col)
{
    bool fatal = (mask & FE_ACTION_FATAL) && (r->flags & FE_HAS_FATAL);
    bool rf = (mask & FE_ACTION_RESET_FAIL) &&
              (r->flags & FE_HAS_RESET_FAIL);

    if (fatal && (!rf || r->fatal_col < r->reset_fail_col)) {
        *action = "fatal";
        *col = r->fatal_col;
    } else if (rf) {
        *action = "reset-fail";
        *col = r->reset_fail_col;
    }
    return (fatal ? FE_ACTION_FATAL : 0) | (rf ? FE_ACTION_RESET_FAIL : 0);
}

/* Rules with an action a device of this engine refuses are an error. */
static int check_refused_actions(const FeEngine *fe, const FeRule *v,
                                 size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; fe->refused_actions && i < n; i++) {
        const char *action = NULL;
        size_t col = 1;

        if (rule_actions(&v[i], fe->refused_actions, &action, &col)) {
            /* The refuser of the action given first on the line. */
            int b = strcmp(action, "fatal") ? 1 : 0;

            if (err && errlen) {
                snprintf(err, errlen, "%zu:%zu: '%s' is not supported by %s",
                         v[i].line, col, action, fe->refused_actions_by[b]);
            }
            return -1;
        }
    }
    return 0;
}

void fe_engine_refuse_actions(FeEngine *fe, uint32_t mask, const char *who)
{
    set_refusals(&fe->refused_actions, fe->refused_actions_by, mask, who);
}

int fe_engine_find_action(const FeEngine *fe, uint32_t mask,
                          const char **action)
{
    for (size_t i = 0; i < fe->nrules; i++) {
        const char *a = NULL;
        size_t col = 0;

        if (rule_actions(&fe->rules[i], mask, &a, &col)) {
            if (action) {
                *action = a;
            }
            return (int)i;
        }
    }
    return -1;
}

int fe_engine_add_rules_len(FeEngine *fe, const char *text, size_t len,
                            char *err, size_t errlen)
{
    FeRule *v, *all;
    FeHot *hot;
    size_t n;

    if (fe_parse_rules(text, len, &v, &n, err, errlen) < 0) {
        return -1;
    }
    if (fe->nrules + n > FE_RULES_MAX) {
        if (err && errlen) {
            snprintf(err, errlen, "1:1: too many rules (max %d)",
                     FE_RULES_MAX);
        }
        free(v);
        return -1;
    }
    if (check_names(fe->rules, fe->nrules, v, n, true, err, errlen) < 0 ||
        check_refused_keys(fe, v, n, err, errlen) < 0 ||
        check_refused_actions(fe, v, n, err, errlen) < 0) {
        free(v);
        return -1;
    }
    if (n == 0) {
        free(v);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        FeRule *r = &v[i];
        r->key = r->named ? fe_fnv1a(FE_FNV_BASIS, r->name, strlen(r->name))
                          : fe_fnv1a(FE_FNV_BASIS, r->text, strlen(r->text));
        r->hbase = rule_hbase(fe->seed, r->key);
    }
    freeze_all(fe);
    all = realloc(fe->rules, (fe->nrules + n) * sizeof(*all));
    if (all) {
        fe->rules = all;
    }
    hot = realloc(fe->hot, (fe->nrules + n) * sizeof(*hot));
    if (hot) {
        fe->hot = hot;
    }
    if (!all || !hot) {
        free(v);
        return oom_error(err, errlen);
    }
    memcpy(all + fe->nrules, v, n * sizeof(*v));
    memset(hot + fe->nrules, 0, n * sizeof(*hot));
    for (size_t i = 0; i < n; i++) {
        hot[fe->nrules + i].next = next_chance(&v[i], 0);
    }
    fe->nrules += n;
    free(v);
    if (rebuild_candidates(fe) < 0) {
        fe->nrules -= n;
        rebuild_candidates(fe);
        return oom_error(err, errlen);
    }
    return (int)n;
}

int fe_engine_add_rules(FeEngine *fe, const char *text, char *err,
                        size_t errlen)
{
    return fe_engine_add_rules_len(fe, text, text ? strlen(text) : 0, err,
                                   errlen);
}

int fe_engine_delete_rule(FeEngine *fe, const char *name)
{
    for (size_t i = 0; name && i < fe->nrules; i++) {
        if (strcmp(fe->rules[i].name, name) == 0) {
            freeze_all(fe);
            memmove(&fe->rules[i], &fe->rules[i + 1],
                    (fe->nrules - i - 1) * sizeof(FeRule));
            memmove(&fe->hot[i], &fe->hot[i + 1],
                    (fe->nrules - i - 1) * sizeof(FeHot));
            fe->nrules--;
            rebuild_candidates(fe);
            return 0;
        }
    }
    return -1;
}

void fe_engine_clear_rules(FeEngine *fe)
{
    free(fe->rules);
    free(fe->hot);
    fe->rules = NULL;
    fe->hot = NULL;
    fe->nrules = 0;
    rebuild_candidates(fe);
}

int fe_engine_rule_count(const FeEngine *fe)
{
    return (int)fe->nrules;
}

int fe_engine_rule_stats(const FeEngine *fe, int i, FeRuleStats *out)
{
    const FeRule *r;

    if (i < 0 || (size_t)i >= fe->nrules) {
        return -1;
    }
    r = &fe->rules[i];
    memset(out, 0, sizeof(*out));
    copy_str(out->name, sizeof(out->name), r->name);
    copy_str(out->text, sizeof(out->text), r->text);
    out->matched = rule_matched(fe, (size_t)i);
    out->hits = r->hits;
    return 0;
}

/* Lazy rules of the old state stop counting, those of the new one resume. */
static void change_state(FeEngine *fe, uint32_t state)
{
    if (state == fe->state) {
        return;
    }
    freeze_all(fe);
    fe->state = state;
    thaw_all(fe);
}

void fe_engine_set_state(FeEngine *fe, uint32_t state)
{
    change_state(fe, state);
}

uint32_t fe_engine_state(const FeEngine *fe)
{
    return fe->state;
}

uint64_t fe_engine_seed(const FeEngine *fe)
{
    return fe->seed;
}

void fe_engine_io_profile(const FeEngine *fe, FeOp op, FeIoProfile *out)
{
    *out = (unsigned)op < FE_OP__MAX ? fe->io[op]
                                      : (FeIoProfile) { .lba_min = UINT64_MAX };
}

void fe_engine_reset_counters(FeEngine *fe)
{
    for (size_t i = 0; i < fe->nrules; i++) {
        fe->rules[i].hits = 0;
        fe->hot[i].matched = 0;
        fe->hot[i].next = next_chance(&fe->rules[i], 0);
    }
    for (int g = 0; g < FE_NGROUPS; g++) {
        fe->group[g].count = 0;
    }
    fe->ordinal = 0;
    io_profile_reset(fe);
    /* Bounds moved: the span rules are chosen again, their counts dropped. */
    rebuild_candidates(fe);
}

void fe_engine_reset(FeEngine *fe)
{
    fe->state = 0;
    fe_engine_reset_counters(fe);
    fe->log_total = 0;
    fe->digest = FE_FNV_BASIS;
}

/*
 * The triggers of rule @idx at its ordinal @n (count last, so only real
 * hits use it up); records a hit in the fired list.  Returns 1 if fired.
 */
static uint32_t trigger(FeEngine *fe, uint32_t idx, uint64_t n, uint32_t nf)
{
    FeRule *r = &fe->rules[idx];
    uint32_t f = r->flags;
    bool pass = true;

    if ((f & FE_HAS_NTH) && n != r->nth) {
        pass = false;
    } else if ((f & FE_HAS_AFTER) && n <= r->after) {
        pass = false;
    } else if (f & FE_HAS_EVERY) {
        uint64_t m = n - ((f & FE_HAS_AFTER) ? r->after : 0);
        pass = m >= 1 && m % r->every == 0;
    }
    /* prob=0 needs no draw: the threshold is 0. */
    if (pass && (f & FE_HAS_PROB) && !r->prob_one &&
        (!r->prob_thresh || draw(r, n, 1) >= r->prob_thresh)) {
        pass = false;
    }
    if (pass && (f & FE_HAS_COUNT) && r->hits >= r->count) {
        pass = false;
    }
    if (pass) {
        r->hits++;
        fe->fired[nf].key = r->key;
        fe->fired[nf].rule = r;
        fe->fired[nf].n = n;
    }
    fe->hot[idx].next = next_chance(r, n);
    return pass;
}

/* sq= and cpu= of rule @r against the I/O's @keys (absent: no match). */
static bool keys_match(const FeRule *r, const FeIoKeys *keys)
{
    if ((r->flags & FE_HAS_SQ) &&
        (!(keys->have & FE_KEY_SQ) || keys->sq < r->sq_lo ||
         keys->sq > r->sq_hi)) {
        return false;
    }
    if ((r->flags & FE_HAS_CPU) &&
        (!(keys->have & FE_KEY_CPU) || keys->cpu < r->cpu_lo ||
         keys->cpu > r->cpu_hi)) {
        return false;
    }
    return true;
}

/* state=, len=, sq= and cpu= of a rule that has one of them. */
static __attribute__((noinline, cold))
bool hot_match(const FeEngine *fe, uint32_t idx, const FeHot *h,
               uint32_t len, const FeIoKeys *keys, uint32_t state)
{
    if ((h->flags & FE_HAS_STATE) && h->state != state) {
        return false;
    }
    if ((h->flags & FE_HAS_LEN) && (len < h->len_lo || len > h->len_hi)) {
        return false;
    }
    return !(h->flags & FE_HOT_KEYS) || keys_match(&fe->rules[idx], keys);
}

/* Rule @idx overlaps the I/O: check the rest of the match, then trigger. */
static inline uint32_t consider(FeEngine *fe, uint32_t idx, uint32_t len,
                                const FeIoKeys *keys, uint32_t state,
                                uint32_t nf)
{
    FeHot *h = &fe->hot[idx];
    uint64_t n;

    /* One test for the common rule with lba= alone. */
    if (__builtin_expect(h->flags != 0, 0) &&
        !hot_match(fe, idx, h, len, keys, state)) {
        return 0;
    }
    n = ++h->matched;
    return n < h->next ? 0 : trigger(fe, idx, n, nf);
}

/* An I/O over [lo, hi] of the key of @sp. */
static inline void spans_count(FeSpans *sp, uint64_t lo, uint64_t hi)
{
    if (sp->nent) {
        sp->below[lo ? fe_upper_bound(sp->hi, sp->nhi, lo - 1) : 0]++;
        sp->upto[fe_upper_bound(sp->lo, sp->nlo, hi)]++;
        sp->total++;
    }
}

/* A span rule may be due: fold, trigger the due ones, set a new budget. */
static uint32_t spans_due(FeEngine *fe, uint32_t nf)
{
    spans_fold(fe);
    for (uint32_t k = 0; k < fe->nspan; k++) {
        uint32_t idx = fe->span_idx[k];
        const FeHot *h = &fe->hot[idx];

        /* A bound cannot be passed: an I/O adds at most one match. */
        if (h->next != UINT64_MAX && h->matched >= h->next) {
            nf += trigger(fe, idx, h->matched, nf);
        }
    }
    spans_set_budget(fe);
    return nf;
}

/* Ranges of @rg that overlap [lo, hi]: check the rest, then trigger. */
static inline uint32_t ranges_scan(FeEngine *fe, const FeRanges *rg,
                                   uint64_t lo, uint64_t hi, uint32_t len,
                                   const FeIoKeys *keys, uint32_t state,
                                   uint32_t nf)
{
    uint32_t i;

    if (!rg->n) {
        return nf;
    }
    i = fe_upper_bound(rg->lo, rg->n, hi);
    while (i-- > 0 && rg->pmax[i] >= lo) {
        if (rg->hi[i] >= lo) {
            nf += consider(fe, rg->idx[i], len, keys, state, nf);
        }
    }
    return nf;
}

/* Group @g reached a member's bound: trigger the members that are due. */
static uint32_t group_due(FeEngine *fe, FeGroup *g, uint32_t nf)
{
    for (uint32_t k = 0; k < g->n; k++) {
        uint32_t idx = g->idx[k];
        FeHot *h = &fe->hot[idx];
        if (hot_live(h, fe->state) && sat_add(h->base, h->next) <= g->count) {
            nf += trigger(fe, idx, g->count - h->base, nf);
        }
    }
    group_update_due(fe, g);
    return nf;
}

static int cmp_fired(const void *a, const void *b)
{
    const FeFired *x = a, *y = b;

    if (x->key != y->key) {
        return x->key < y->key ? -1 : 1;
    }
    return strcmp(x->rule->name, y->rule->name);
}

static void put_le(uint64_t *h, uint64_t v, int bytes)
{
    unsigned char b[8];

    for (int i = 0; i < bytes; i++) {
        b[i] = (unsigned char)(v >> (8 * i));
    }
    *h = fe_fnv1a(*h, b, (size_t)bytes);
}

static void log_append(FeEngine *fe, FeOp op, uint64_t lba, uint32_t len,
                       const FeIoKeys *keys, uint64_t now_ns,
                       const char *rule, uint64_t nth, const char *action)
{
    FeLogEntry *e = &fe->log[fe->log_total & (FE_LOG_SIZE - 1)];

    e->seq = fe->log_total++;
    e->ordinal = fe->ordinal;
    e->vns = now_ns;
    e->op = op;
    e->lba = lba;
    e->len = len;
    e->keys = *keys;
    copy_str(e->rule, sizeof(e->rule), rule);
    e->nth = nth;
    copy_str(e->action, sizeof(e->action), action);

    /*
     * Fixed little-endian layout: the digest is the same on every host.
     * nth and the keys are not in it: nth follows from the rules and the
     * I/O sequence, and digests stay comparable with logs written before
     * nth, sq and cpu existed (a rule's sq=/cpu= is in its key already).
     */
    put_le(&fe->digest, e->ordinal, 8);
    put_le(&fe->digest, (uint64_t)op, 1);
    put_le(&fe->digest, lba, 8);
    put_le(&fe->digest, len, 4);
    fe->digest = fe_fnv1a(fe->digest, e->rule, strlen(e->rule) + 1);
    fe->digest = fe_fnv1a(fe->digest, e->action, strlen(e->action) + 1);
}

/* Space-separated append; @buf holds the longest action (FE_ACTION_MAX). */
static void act(char *buf, size_t len, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void act(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*pos && *pos + 1 < len) {
        buf[(*pos)++] = ' ';
        buf[*pos] = '\0';
    }
    if (*pos + 1 >= len) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(buf + *pos, len - *pos, fmt, ap);
    va_end(ap);
    if (n > 0) {
        *pos += (size_t)n;
    }
}

/*
 * The @k (<= FE_CORRUPT_MAX) distinct byte offsets rule @r flips in an I/O
 * of @bytes (> 0) at its ordinal @n, ascending: drawn from (seed, rule,
 * ordinal) like prob=, so the same run flips the same bytes.  Returns k.
 */
static uint32_t corrupt_offsets(const FeRule *r, uint64_t n, uint64_t bytes,
                                uint64_t *off)
{
    uint32_t k = r->corrupt < bytes ? r->corrupt : (uint32_t)bytes;

    for (uint32_t i = 0; i < k; i++) {
        uint64_t o = draw(r, n, 16 + i) % bytes;
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

/* Union of @off[0..k) into the decision's corrupt set, while room is left. */
static void corrupt_merge(FeDecision *out, const uint64_t *off, uint32_t k)
{
    for (uint32_t i = 0; i < k; i++) {
        uint32_t j = 0;

        while (j < out->ncorrupt && out->corrupt[j] < off[i]) {
            j++;
        }
        if ((j < out->ncorrupt && out->corrupt[j] == off[i]) ||
            out->ncorrupt == FE_CORRUPT_MAX) {
            continue;
        }
        memmove(&out->corrupt[j + 1], &out->corrupt[j],
                (out->ncorrupt - j) * sizeof(out->corrupt[0]));
        out->corrupt[j] = off[i];
        out->ncorrupt++;
    }
}

uint32_t fe_decision_corrupt(const FeDecision *d, uint64_t off, void *buf,
                             size_t len)
{
    unsigned char *p = buf;
    uint32_t flipped = 0;

    for (uint32_t i = 0; i < d->ncorrupt && i < FE_CORRUPT_MAX; i++) {
        if (d->corrupt[i] >= off && d->corrupt[i] - off < len) {
            p[d->corrupt[i] - off] ^= 0xff;
            flipped++;
        }
    }
    return flipped;
}

/* Apply rule @r, fired at its ordinal @n, to @out and log it: the rare path. */
static void apply_rule(FeEngine *fe, const FeRule *r, uint64_t n, FeOp op,
                       uint64_t lba, uint32_t len, const FeIoKeys *keys,
                       uint64_t now_ns, FeDecision *out, bool *set,
                       uint32_t *new_state)
{
    char a[FE_ACTION_MAX];
    size_t pos = 0;
    uint64_t d;

    a[0] = '\0';
    if (r->delay.kind != FE_DELAY_NONE) {
        d = delay_value(r, &r->delay, n, 2);
        out->delay_ns = sat_add(out->delay_ns, d);
        act(a, sizeof(a), &pos, "delay=%" PRIu64 "ns", d);
    }
    if (r->error != FE_ERR_NONE) {
        if (r->error > out->error) {
            out->error = r->error;
        }
        act(a, sizeof(a), &pos, "error=%s", fe_error_name(r->error));
    }
    if (r->flags & FE_HAS_WHEN) {
        if (r->when > out->when) {
            out->when = r->when;
        }
        act(a, sizeof(a), &pos, "when=%s",
            r->when == FE_WHEN_AFTER ? "after" : "before");
    }
    if (r->dnr) {
        out->dnr = true;
        act(a, sizeof(a), &pos, "dnr");
    }
    if (r->flags & FE_HAS_DROP) {
        act(a, sizeof(a), &pos, "drop");
    }
    out->drop |= r->drop;
    if (r->flags & FE_HAS_LIE) {
        out->lie = true;
        act(a, sizeof(a), &pos, "lie");
    }
    if (r->flags & FE_HAS_CORRUPT) {
        /* Only reads and writes carry data; len 0 is no data either. */
        uint64_t bytes = (op == FE_OP_READ || op == FE_OP_WRITE) ?
                         (uint64_t)len * 512 : 0;
        uint64_t off[FE_CORRUPT_MAX];
        uint32_t k = bytes ? corrupt_offsets(r, n, bytes, off) : 0;

        char at[FE_CORRUPT_MAX * 21];
        size_t apos = 0;

        corrupt_merge(out, off, k);
        at[0] = '\0';
        for (uint32_t i = 0; i < k; i++) {
            apos += (size_t)snprintf(at + apos, sizeof(at) - apos,
                                     "%s%" PRIu64, i ? "," : "", off[i]);
        }
        /* The offsets are part of the action: logged and digested. */
        act(a, sizeof(a), &pos, "corrupt=%" PRIu32 "%s%s", r->corrupt,
            k ? " at=" : "", at);
    }
    if (r->flags & FE_HAS_FATAL) {
        out->fatal = true;
        act(a, sizeof(a), &pos, "fatal");
    }
    if (r->flags & FE_HAS_RESET_FAIL) {
        if (r->reset_fail > out->reset_fail) {
            out->reset_fail = r->reset_fail;
        }
        act(a, sizeof(a), &pos, "reset-fail=%" PRIu32, r->reset_fail);
    }
    if (r->flags & FE_HAS_SET_STATE) {
        if (!*set || r->set_state > *new_state) {
            *new_state = r->set_state;
        }
        *set = true;
        act(a, sizeof(a), &pos, "set-state=%" PRIu32, r->set_state);
    }
    if (r->complete != FE_COMPLETE_DEFAULT) {
        static const char *const cn[] = { "default", "irq", "task", "thread" };
        if (r->complete > out->complete) {
            out->complete = r->complete;
        }
        act(a, sizeof(a), &pos, "complete=%s", cn[r->complete & 3]);
    }
    if (r->irq == FE_IRQ_SUPPRESS) {
        act(a, sizeof(a), &pos, "irq=suppress");
        if (!(r->flags & FE_ACTION_FLAGS & ~FE_HAS_IRQ) &&
            r->delay.kind == FE_DELAY_NONE &&
            out->nvoidable < FE_VOIDABLE_MAX) {
            out->voidable[out->nvoidable].rule = (uint32_t)(r - fe->rules);
            out->voidable[out->nvoidable++].gen = fe->gen;
        }
    }
    if (r->irq > out->irq) {
        out->irq = r->irq;
    }
    if (r->irq_delay.kind != FE_DELAY_NONE) {
        d = delay_value(r, &r->irq_delay, n, 3);
        if (d > out->irq_delay_ns) {
            out->irq_delay_ns = d;
        }
        act(a, sizeof(a), &pos, "irq-delay=%" PRIu64 "ns", d);
    }
    log_append(fe, op, lba, len, keys, now_ns, r->name, n, a);
}

static const FeIoKeys no_keys;

/* Inlined into both entry points, so fe_engine_decide() pays no keys. */
static inline __attribute__((always_inline))
bool decide(FeEngine *fe, FeOp op, uint64_t lba, uint32_t len,
            const FeIoKeys *keys, uint64_t now_ns, FeDecision *out)
{
    const FeCand *c;
    FeGroup *g, *gany;
    FeIoProfile *io;
    uint64_t end;
    uint32_t nf = 0, state = fe->state, new_state = 0;
    bool set = false;

    /* voidable[] and corrupt[] are read only below their counts. */
    memset(out, 0, offsetof(FeDecision, voidable));
    fe->ordinal++;
    if ((unsigned)op >= FE_OP__MAX) {
        return false;
    }
    /* Last sector touched; a zero-length I/O is treated as one sector. */
    end = lba + (len ? len - 1 : 0);
    if (end < lba) {
        end = UINT64_MAX;
    }
    io = &fe->io[op];
    io->count++;
    if (lba < io->lba_min) {
        io->lba_min = lba;
    }
    if (end > io->lba_max) {
        io->lba_max = end;
    }
    g = &fe->group[op];
    gany = &fe->group[FE_OP_ANY];
    if (++g->count >= g->due) {
        nf = group_due(fe, g, nf);
    }
    if (++gany->count >= gany->due) {
        nf = group_due(fe, gany, nf);
    }
    c = &fe->cand.op[op];
    for (uint32_t i = 0; i < c->nall; i++) {
        nf += consider(fe, c->all[i], len, keys, state, nf);
    }
    nf = ranges_scan(fe, &c->lba, lba, end, len, keys, state, nf);
    if (keys->have & FE_KEY_SQ) {
        nf = ranges_scan(fe, &c->sq, keys->sq, keys->sq, len, keys, state,
                         nf);
    }
    if (keys->have & FE_KEY_CPU) {
        nf = ranges_scan(fe, &c->cpu, keys->cpu, keys->cpu, len, keys, state,
                         nf);
    }
    if (fe->nspan) {
        spans_count(span_of(fe, op, 0), lba, end);
        if (keys->have & FE_KEY_SQ) {
            spans_count(span_of(fe, op, 1), keys->sq, keys->sq);
        }
        if (keys->have & FE_KEY_CPU) {
            spans_count(span_of(fe, op, 2), keys->cpu, keys->cpu);
        }
        if (++fe->span_io >= fe->span_budget) {
            nf = spans_due(fe, nf);
        }
    }
    if (!nf) {
        return false;
    }
    /* Log in key order so the log and digest ignore rule order. */
    if (nf > 1) {
        qsort(fe->fired, nf, sizeof(*fe->fired), cmp_fired);
    }
    for (uint32_t i = 0; i < nf; i++) {
        apply_rule(fe, fe->fired[i].rule, fe->fired[i].n, op, lba, len,
                   keys, now_ns, out, &set, &new_state);
    }
    if (out->delay_ns > FE_DELAY_MAX_NS) {
        out->delay_ns = FE_DELAY_MAX_NS;
    }
    if (out->drop) {
        /* Nothing completes, so no status is reported (timeout is a drop). */
        if (out->error != FE_ERR_TIMEOUT) {
            out->error = FE_ERR_NONE;
        }
    }
    if (out->irq != FE_IRQ_DELAY) {
        out->irq_delay_ns = 0;
    }
    if (out->lie) {
        /* No data moves, so none is flipped. */
        out->ncorrupt = 0;
    }
    out->fired = nf;
    if (set) {
        change_state(fe, new_state);
    }
    return true;
}

bool fe_engine_decide(FeEngine *fe, FeOp op, uint64_t lba, uint32_t len,
                      uint64_t now_ns, FeDecision *out)
{
    return decide(fe, op, lba, len, &no_keys, now_ns, out);
}

bool fe_engine_decide_keys(FeEngine *fe, FeOp op, uint64_t lba, uint32_t len,
                           const FeIoKeys *keys, uint64_t now_ns,
                           FeDecision *out)
{
    return decide(fe, op, lba, len, keys ? keys : &no_keys, now_ns, out);
}

uint64_t fe_engine_log_total(const FeEngine *fe)
{
    return fe->log_total;
}

uint64_t fe_engine_log_first(const FeEngine *fe)
{
    return fe->log_total > FE_LOG_SIZE ? fe->log_total - FE_LOG_SIZE : 0;
}

int fe_engine_log_get(const FeEngine *fe, uint64_t seq, FeLogEntry *out)
{
    if (seq >= fe->log_total || seq < fe_engine_log_first(fe)) {
        return -1;
    }
    *out = fe->log[seq & (FE_LOG_SIZE - 1)];
    return 0;
}

uint64_t fe_engine_digest(const FeEngine *fe)
{
    return fe->digest;
}

/* Appends @s as a JSON string; counts what would be written. */
static void json_str(char *buf, size_t buflen, size_t *pos, const char *s,
                     size_t maxlen)
{
    char tmp[8];

    for (size_t i = 0; i < maxlen && s[i]; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *o = tmp;
        if (ch == '"' || ch == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)ch;
            tmp[2] = '\0';
        } else if (ch == '\n') {
            o = "\\n";
        } else if (ch == '\t') {
            o = "\\t";
        } else if (ch == '\r') {
            o = "\\r";
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(tmp, sizeof(tmp), "\\u%04x", ch);
        } else {
            tmp[0] = (char)ch;
            tmp[1] = '\0';
        }
        for (; *o; o++, (*pos)++) {
            if (*pos + 1 < buflen) {
                buf[*pos] = *o;
            }
        }
    }
}

static void json_raw(char *buf, size_t buflen, size_t *pos, const char *s)
{
    for (; *s; s++, (*pos)++) {
        if (*pos + 1 < buflen) {
            buf[*pos] = *s;
        }
    }
}

int fe_log_entry_json(const FeLogEntry *e, char *buf, size_t buflen)
{
    char num[160];
    size_t pos = 0;

    snprintf(num, sizeof(num),
             "{\"seq\":%" PRIu64 ",\"ordinal\":%" PRIu64 ",\"vns\":%" PRIu64
             ",\"op\":\"%s\",\"lba\":%" PRIu64 ",\"len\":%" PRIu32,
             e->seq, e->ordinal, e->vns, fe_op_name(e->op), e->lba, e->len);
    json_raw(buf, buflen, &pos, num);
    if (e->keys.have & FE_KEY_SQ) {
        snprintf(num, sizeof(num), ",\"sq\":%" PRIu32, e->keys.sq);
        json_raw(buf, buflen, &pos, num);
    }
    if (e->keys.have & FE_KEY_CPU) {
        snprintf(num, sizeof(num), ",\"cpu\":%" PRIu32, e->keys.cpu);
        json_raw(buf, buflen, &pos, num);
    }
    json_raw(buf, buflen, &pos, ",\"rule\":\"");
    json_str(buf, buflen, &pos, e->rule, sizeof(e->rule));
    snprintf(num, sizeof(num), "\",\"nth\":%" PRIu64 ",\"action\":\"", e->nth);
    json_raw(buf, buflen, &pos, num);
    json_str(buf, buflen, &pos, e->action, sizeof(e->action));
    json_raw(buf, buflen, &pos, "\"}");
    if (buflen) {
        buf[pos < buflen ? pos : buflen - 1] = '\0';
    }
    return (int)pos;
}

int fe_engine_log_write_jsonl(const FeEngine *fe, uint64_t from_seq, FILE *f)
{
    char buf[1024];
    FeLogEntry e;
    uint64_t seq = from_seq > fe_engine_log_first(fe) ? from_seq
                                                      : fe_engine_log_first(fe);
    int n = 0;

    for (; seq < fe->log_total; seq++) {
        if (fe_engine_log_get(fe, seq, &e) < 0) {
            continue;
        }
        fe_log_entry_json(&e, buf, sizeof(buf));
        fprintf(f, "%s\n", buf);
        n++;
    }
    return n;
}
