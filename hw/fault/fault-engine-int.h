/*
 * faultline fault engine: internals shared by the parser and the engine.
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

#endif /* FAULT_ENGINE_INT_H */
