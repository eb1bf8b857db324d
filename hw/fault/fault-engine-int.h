/*
 * faultline fault engine: internals shared by the engine's files.
 *
 * The engine library (plain C11, public API in fault-engine.h):
 *   fault-parse.c   the rule text parser
 *   fault-rules.c   the engine's life, its rule set, counters and state
 *   fault-decide.c  matching an I/O against the rules, triggers, decisions
 *   fault-cand.c    the candidate index: the rules an I/O looks at
 *   fault-span.c    the span counts: range rules counted, not looked at
 *   fault-rng.c     the seeded draws (prob=, delays, corrupt offsets)
 *   fault-log.c     the fault log, its digest and JSON
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef FAULT_ENGINE_INT_H
#define FAULT_ENGINE_INT_H

#include "fault-engine.h"

/* Bounds the engine's size (and the candidate scans). */
#define FE_RULES_MAX 4096

#define FE_FNV_BASIS 0xcbf29ce484222325ULL
#define FE_FNV_PRIME 0x100000001b3ULL

typedef enum FeDelayKind {
    FE_DELAY_NONE,
    FE_DELAY_FIXED,
    FE_DELAY_UNIFORM,
    FE_DELAY_EXP,
} FeDelayKind;

typedef struct FeDelaySpec {
    FeDelayKind kind;
    uint64_t a;             /* fixed value, uniform min or exp mean */
    uint64_t b;             /* uniform max */
} FeDelaySpec;

/* Which optional match/trigger/action fields a rule carries. */
enum {
    FE_HAS_LBA       = 1u << 0,
    FE_HAS_LEN       = 1u << 1,
    FE_HAS_STATE     = 1u << 2,
    FE_HAS_NTH       = 1u << 3,
    FE_HAS_AFTER     = 1u << 4,
    FE_HAS_EVERY     = 1u << 5,
    FE_HAS_COUNT     = 1u << 6,
    FE_HAS_PROB      = 1u << 7,
    FE_HAS_SET_STATE = 1u << 8,
    FE_HAS_ERROR     = 1u << 9,
    FE_HAS_WHEN      = 1u << 10,
    FE_HAS_COMPLETE  = 1u << 11,
    FE_HAS_IRQ       = 1u << 12,
    FE_HAS_DNR       = 1u << 13,
    FE_HAS_DROP      = 1u << 14,
    FE_HAS_LIE       = 1u << 15,
    FE_HAS_CORRUPT   = 1u << 16,
    FE_HAS_SQ        = 1u << 17,
    FE_HAS_CPU       = 1u << 18,
    FE_HAS_FATAL     = 1u << 19,
    FE_HAS_RESET_FAIL = 1u << 20,
};

/*
 * Everything but the ordinal (kept by the engine in a dense array): the
 * engine reads a rule only when its triggers may pass.
 */
typedef struct FeRule {
    uint32_t flags;
    uint32_t state;
    uint32_t len_lo, len_hi;
    bool prob_one;              /* prob=1: skip the draw */
    uint64_t hits;
    uint64_t nth, after, every, count;
    uint64_t prob_thresh;       /* fires when draw < thresh */
    uint64_t hbase;             /* hash of (seed, key): start of the draws */

    /* Match bounds (mirrored in the per-op candidate arrays). */
    FeOp op;
    uint64_t lba_lo, lba_hi;
    uint32_t sq_lo, sq_hi;      /* FE_HAS_SQ */
    uint32_t cpu_lo, cpu_hi;    /* FE_HAS_CPU */

    /* Actions. */
    FeDelaySpec delay;
    FeDelaySpec irq_delay;
    FeError error;
    FeWhen when;
    FeComplete complete;
    FeIrq irq;
    uint32_t set_state;
    bool dnr;
    bool drop;                  /* drop, or error=timeout */
    uint32_t corrupt;           /* bytes to flip (FE_HAS_CORRUPT) */
    uint32_t reset_fail;        /* enables to fail (FE_HAS_RESET_FAIL) */

    /* Identity. */
    uint64_t prob_mant;         /* prob = prob_mant / 10^prob_digits */
    unsigned prob_digits;
    bool named;
    uint64_t key;
    char name[FE_NAME_MAX];
    char text[FE_TEXT_MAX];

    /* Parse bookkeeping, for errors found after the line was parsed. */
    size_t line, name_col;
    size_t sq_col, cpu_col;
    size_t fatal_col, reset_fail_col;   /* where the keys were given */
} FeRule;

/*
 * Parse @len bytes of @text into a freshly allocated array (*rules, *n).
 * Names are not yet assigned to unnamed rules.  Returns 0 or -1 with @err
 * filled.
 */
int fe_parse_rules(const char *text, size_t len, FeRule **rules, size_t *n,
                   char *err, size_t errlen);
/* Render the canonical text (without name) into r->text. */
void fe_rule_render(FeRule *r);
uint64_t fe_fnv1a(uint64_t h, const void *data, size_t len);
int fe_format_duration(char *buf, size_t len, uint64_t ns);

/*
 * The engine's state, shared by its files.  fault-cand.h needs FeRule
 * above, so it is included here rather than by the .c files.
 */
#include "fault-cand.h"

#define FE_LOG_SIZE 4096        /* power of two: the ring index is a mask */
#define FE_GOLDEN 0x9e3779b97f4a7c15ULL
/* Bits of FE_KEY_* and of FE_ACTION_* that attach points refuse. */
#define FE_REFUSE_BITS 2
#define FE_WHO_MAX 96           /* a refuser's name, for the messages */

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

/*
 * The RNG (fault-rng.c).  Inline: trigger()'s prob= draw is on the
 * per-I/O path.
 */

/* splitmix64 finaliser. */
static inline uint64_t fe_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Counter-based draw: depends on (seed, rule key, ordinal, salt) only. */
static inline uint64_t fe_draw(const FeRule *r, uint64_t n, uint64_t salt)
{
    return fe_mix64(fe_mix64(r->hbase + n * FE_GOLDEN) ^
                    (salt * 0xd6e8feb86659fd93ULL));
}

/* fault-rules.c */
/* Truncating string copy. */
void fe_copy_str(char *dst, size_t len, const char *src);
/* @g's due: the earliest bound of its live members. */
void fe_group_update_due(FeEngine *fe, FeGroup *g);
void fe_change_state(FeEngine *fe, uint32_t state);

/* fault-decide.c: the trigger bound after ordinal @n. */
uint64_t fe_next_chance(const FeRule *r, uint64_t n);

/* fault-span.c */
/* Rule @i's ordinal, with what a group or the spans counted since. */
uint64_t fe_rule_matched(const FeEngine *fe, size_t i);
void fe_spans_fold(FeEngine *fe);
void fe_spans_set_budget(FeEngine *fe);
bool fe_span_candidate(const FeEngine *fe, size_t i);
bool fe_spans_build(FeEngine *fe);

/* fault-rng.c */
uint64_t fe_rule_hbase(uint64_t seed, uint64_t key);
uint64_t fe_delay_value(const FeRule *r, const FeDelaySpec *d, uint64_t n,
                        uint64_t salt);
uint32_t fe_corrupt_offsets(const FeRule *r, uint64_t n, uint64_t bytes,
                            uint64_t *off);

/* fault-log.c */
void fe_log_append(FeEngine *fe, FeOp op, uint64_t lba, uint32_t len,
                   const FeIoKeys *keys, uint64_t now_ns, const char *rule,
                   uint64_t nth, const char *action);

#endif /* FAULT_ENGINE_INT_H */
