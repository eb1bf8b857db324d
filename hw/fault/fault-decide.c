/*
 * faultline fault engine: the decision for one I/O.  Candidate rules are
 * matched, their triggers checked and the fired rules' actions merged
 * into a FeDecision and logged (fault-log.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fault-engine-int.h"

/* The trigger bound after ordinal @n: no ordinal below it can fire. */
uint64_t fe_next_chance(const FeRule *r, uint64_t n)
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
        (!r->prob_thresh || fe_draw(r, n, 1) >= r->prob_thresh)) {
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
    fe->hot[idx].next = fe_next_chance(r, n);
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

/* A span rule may be due: fold, trigger the due ones, set a new budget. */
static uint32_t spans_due(FeEngine *fe, uint32_t nf)
{
    fe_spans_fold(fe);
    for (uint32_t k = 0; k < fe->nspan; k++) {
        uint32_t idx = fe->span_idx[k];
        const FeHot *h = &fe->hot[idx];

        /* A bound cannot be passed: an I/O adds at most one match. */
        if (h->next != UINT64_MAX && h->matched >= h->next) {
            nf += trigger(fe, idx, h->matched, nf);
        }
    }
    fe_spans_set_budget(fe);
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
    fe_group_update_due(fe, g);
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
        d = fe_delay_value(r, &r->delay, n, 2);
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
        uint32_t k = bytes ? fe_corrupt_offsets(r, n, bytes, off) : 0;

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
        d = fe_delay_value(r, &r->irq_delay, n, 3);
        if (d > out->irq_delay_ns) {
            out->irq_delay_ns = d;
        }
        act(a, sizeof(a), &pos, "irq-delay=%" PRIu64 "ns", d);
    }
    fe_log_append(fe, op, lba, len, keys, now_ns, r->name, n, a);
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
        fe_change_state(fe, new_state);
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
