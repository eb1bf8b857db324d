/*
 * faultline fault engine: its life (new, free, reset), the rule set (add,
 * check, delete, names, refused keys and actions), counters and state.
 * Rule changes rebuild the indexes here: which rules are counted in a
 * group, by the spans (fault-span.c) or looked at (fault-cand.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fault-engine-int.h"

/* Store every lazy rule's ordinal in matched, before rules move. */
static void freeze_all(FeEngine *fe)
{
    fe_spans_fold(fe);
    fe_spans_set_budget(fe);
    for (size_t i = 0; i < fe->nrules; i++) {
        fe->hot[i].matched = fe_rule_matched(fe, i);
    }
}

void fe_group_update_due(FeEngine *fe, FeGroup *g)
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
        fe_group_update_due(fe, &fe->group[g]);
    }
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
        } else if (fe_span_candidate(fe, i)) {
            h->group = FE_SPAN;
        }
    }
    if (!fe_spans_build(fe)) {
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
    fe_spans_set_budget(fe);
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
void fe_copy_str(char *dst, size_t len, const char *src)
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
            fe_copy_str(by[b], FE_WHO_MAX, who);
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
        fe_spans_fold(fe);
        h->next = fe_next_chance(r, h->matched);
        fe_spans_set_budget(fe);
        return;
    }
    h->next = fe_next_chance(r, fe_rule_matched(fe, ref.rule));
    if (in_group(h)) {
        fe_group_update_due(fe, &fe->group[h->group]);
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
        r->hbase = fe_rule_hbase(fe->seed, r->key);
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
        hot[fe->nrules + i].next = fe_next_chance(&v[i], 0);
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
    fe_copy_str(out->name, sizeof(out->name), r->name);
    fe_copy_str(out->text, sizeof(out->text), r->text);
    out->matched = fe_rule_matched(fe, (size_t)i);
    out->hits = r->hits;
    return 0;
}

/* Lazy rules of the old state stop counting, those of the new one resume. */
void fe_change_state(FeEngine *fe, uint32_t state)
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
    fe_change_state(fe, state);
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
        fe->hot[i].next = fe_next_chance(&fe->rules[i], 0);
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
