/*
 * faultline fault engine: the rule language parser and canonical renderer.
 *
 * The parser never copies a line, so any line length is fine; it recurses
 * nowhere and every quoted token in an error message is truncated.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fault-engine-int.h"

/* Longest piece of input quoted back in an error message. */
#define FE_QUOTE_MAX 40

typedef struct FeTok {
    const char *s;
    size_t len;
    size_t col;                 /* 1-based */
} FeTok;

typedef struct FeParser {
    size_t line;
    char *err;
    size_t errlen;
} FeParser;

static const char *const op_names[] = {
    [FE_OP_READ] = "read",
    [FE_OP_WRITE] = "write",
    [FE_OP_FLUSH] = "flush",
    [FE_OP_DISCARD] = "discard",
    [FE_OP_WRITE_ZEROES] = "write-zeroes",
    [FE_OP_ANY] = "any",
};

static const char *const err_names[] = {
    [FE_ERR_NONE] = "none",
    [FE_ERR_EIO] = "eio",
    [FE_ERR_ENOSPC] = "enospc",
    [FE_ERR_WRITE_FAULT] = "write-fault",
    [FE_ERR_READ_ERROR] = "read-error",
    [FE_ERR_INTERNAL] = "internal",
    [FE_ERR_TIMEOUT] = "timeout",
};

static const char *const complete_names[] = {
    [FE_COMPLETE_DEFAULT] = "default",
    [FE_COMPLETE_IRQ] = "irq",
    [FE_COMPLETE_TASK] = "task",
    [FE_COMPLETE_THREAD] = "thread",
};

const char *fe_op_name(FeOp op)
{
    if ((unsigned)op > FE_OP_ANY) {
        return "?";
    }
    return op_names[op];
}

const char *fe_error_name(FeError err)
{
    if ((unsigned)err >= FE_ERR__MAX) {
        return "?";
    }
    return err_names[err];
}

uint64_t fe_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FE_FNV_PRIME;
    }
    return h;
}

/* Bounded, printable copy of a token for error messages. */
static const char *quote(char *buf, const char *s, size_t len)
{
    size_t n = len < FE_QUOTE_MAX ? len : FE_QUOTE_MAX;
    size_t i;

    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (len > n) {
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

#define QBUF char qb[FE_QUOTE_MAX + 4]
#define Q(s, len) quote(qb, (s), (len))

static int perr(FeParser *p, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int perr(FeParser *p, size_t col, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (!p->err || !p->errlen) {
        return -1;
    }
    n = snprintf(p->err, p->errlen, "%zu:%zu: ", p->line, col);
    if (n >= 0 && (size_t)n < p->errlen) {
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errlen - n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int hexval(char c)
{
    if (is_digit(c)) {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* 0 ok, -1 malformed, -2 overflow. */
static int parse_u64(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = 0;

    if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        for (i = 2; i < len; i++) {
            int d = hexval(s[i]);
            if (d < 0) {
                return -1;
            }
            if (v > (UINT64_MAX >> 4)) {
                return -2;
            }
            v = (v << 4) | (uint64_t)d;
        }
        *out = v;
        return 0;
    }
    if (len == 0) {
        return -1;
    }
    for (i = 0; i < len; i++) {
        uint64_t d;
        if (!is_digit(s[i])) {
            return -1;
        }
        d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return -2;
        }
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int number(FeParser *p, const FeTok *t, const char *s, size_t len,
                  uint64_t max, uint64_t *out)
{
    QBUF;
    int r = parse_u64(s, len, out);

    if (r == -1) {
        return perr(p, t->col, "bad number '%s' (expected a decimal or 0x "
                    "hex integer)", Q(s, len));
    }
    if (r == -2 || *out > max) {
        return perr(p, t->col, "number '%s' out of range (max %" PRIu64 ")",
                    Q(s, len), max);
    }
    return 0;
}

/* "A-B" or "N", inclusive. */
static int range(FeParser *p, const FeTok *t, const char *what,
                 const char *s, size_t len, uint64_t max,
                 uint64_t *lo, uint64_t *hi)
{
    const char *dash = memchr(s, '-', len);

    if (!dash) {
        if (number(p, t, s, len, max, lo) < 0) {
            return -1;
        }
        *hi = *lo;
        return 0;
    }
    if (number(p, t, s, dash - s, max, lo) < 0 ||
        number(p, t, dash + 1, len - (dash - s) - 1, max, hi) < 0) {
        return -1;
    }
    if (*lo > *hi) {
        return perr(p, t->col, "%s range %" PRIu64 "-%" PRIu64 " is empty",
                    what, *lo, *hi);
    }
    return 0;
}

/* Probability as an exact decimal; threshold = floor(P * 2^64). */
static int prob(FeParser *p, const FeTok *t, const char *s, size_t len,
                FeRule *r)
{
    QBUF;
    uint64_t ip = 0, mant = 0, den = 1;
    unsigned digits = 0;
    size_t i = 0;
    bool any = false;

    for (; i < len && is_digit(s[i]); i++) {
        any = true;
        if (ip < 10) {
            ip = ip * 10 + (uint64_t)(s[i] - '0');
        }
    }
    if (i < len && s[i] == '.') {
        for (i++; i < len && is_digit(s[i]); i++) {
            any = true;
            /* 18 digits keep mant and 10^digits below 2^60. */
            if (digits < 18) {
                mant = mant * 10 + (uint64_t)(s[i] - '0');
                den *= 10;
                digits++;
            }
        }
    }
    if (!any || i != len) {
        return perr(p, t->col, "bad probability '%s' (expected a number in "
                    "[0,1])", Q(s, len));
    }
    /* Drop trailing zeros so 0.50 and 0.5 render (and hash) the same. */
    while (digits && mant % 10 == 0) {
        mant /= 10;
        den /= 10;
        digits--;
    }
    if (ip > 1 || (ip == 1 && mant != 0)) {
        return perr(p, t->col, "prob=%s out of range [0,1]", Q(s, len));
    }
    r->prob_one = ip == 1;
    r->prob_mant = mant;
    r->prob_digits = digits;
    r->prob_thresh = 0;
    if (!r->prob_one) {
        /* Binary long division: 64 fraction bits of mant / den. */
        uint64_t rem = mant, q = 0;
        for (int b = 0; b < 64; b++) {
            rem <<= 1;
            q <<= 1;
            if (rem >= den) {
                rem -= den;
                q |= 1;
            }
        }
        r->prob_thresh = q;
    }
    return 0;
}

/* "10us", "1.5ms": exact integer nanoseconds, fractions of 1ns dropped. */
static int duration(FeParser *p, const FeTok *t, const char *s, size_t len,
                    uint64_t *out)
{
    QBUF;
    static const struct {
        const char *name;
        uint64_t mult;
    } units[] = {
        { "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
    };
    uint64_t ip = 0, frac = 0, fden = 1, mult = 0, v;
    size_t i = 0, ulen;
    bool any = false, ovf = false;

    while (len && is_space(s[0])) {
        s++;
        len--;
    }
    while (len && is_space(s[len - 1])) {
        len--;
    }
    for (; i < len && is_digit(s[i]); i++) {
        uint64_t d = (uint64_t)(s[i] - '0');
        any = true;
        if (ip > (UINT64_MAX - d) / 10) {
            ovf = true;
        } else {
            ip = ip * 10 + d;
        }
    }
    if (i < len && s[i] == '.') {
        for (i++; i < len && is_digit(s[i]); i++) {
            any = true;
            /* Beyond 9 fraction digits nothing changes at 1ns resolution. */
            if (fden < 1000000000) {
                frac = frac * 10 + (uint64_t)(s[i] - '0');
                fden *= 10;
            }
        }
    }
    if (!any) {
        return perr(p, t->col, "bad duration '%s' (expected a number and a "
                    "unit: ns, us, ms, s)", Q(s, len));
    }
    ulen = len - i;
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        if (ulen == strlen(units[u].name) &&
            memcmp(s + i, units[u].name, ulen) == 0) {
            mult = units[u].mult;
        }
    }
    if (!mult) {
        return perr(p, t->col, "bad duration '%s' (expected a unit: ns, us, "
                    "ms, s)", Q(s, len));
    }
    v = ip * mult;
    /* frac < fden <= 1e9 and mult <= 1e9: the product fits. */
    frac = frac * mult / fden;
    if (ovf || ip > FE_DELAY_MAX_NS / mult || v + frac > FE_DELAY_MAX_NS) {
        return perr(p, t->col, "duration '%s' out of range (max %" PRIu64 "s)",
                    Q(s, len), (uint64_t)(FE_DELAY_MAX_NS / 1000000000));
    }
    *out = v + frac;
    return 0;
}

static bool has_prefix(const char *s, size_t len, const char *pfx)
{
    size_t n = strlen(pfx);

    return len >= n && memcmp(s, pfx, n) == 0;
}

static int delay_spec(FeParser *p, const FeTok *t, const char *s, size_t len,
                      FeDelaySpec *d)
{
    QBUF;

    if (has_prefix(s, len, "uniform(") || has_prefix(s, len, "exp(")) {
        bool uni = s[0] == 'u';
        size_t open = uni ? 8 : 4;
        const char *in = s + open;
        size_t inlen;
        const char *comma;

        if (s[len - 1] != ')') {
            goto bad;
        }
        inlen = len - open - 1;
        comma = memchr(in, ',', inlen);
        if (uni != (comma != NULL) ||
            (comma && memchr(comma + 1, ',', inlen - (comma - in) - 1))) {
            goto bad;
        }
        if (!uni) {
            d->kind = FE_DELAY_EXP;
            return duration(p, t, in, inlen, &d->a);
        }
        d->kind = FE_DELAY_UNIFORM;
        if (duration(p, t, in, comma - in, &d->a) < 0 ||
            duration(p, t, comma + 1, inlen - (comma - in) - 1, &d->b) < 0) {
            return -1;
        }
        if (d->a > d->b) {
            return perr(p, t->col, "empty range in '%s' (min > max)",
                        Q(s, len));
        }
        return 0;
    }
    if (memchr(s, '(', len) || memchr(s, ')', len) || memchr(s, ',', len)) {
        goto bad;
    }
    d->kind = FE_DELAY_FIXED;
    return duration(p, t, s, len, &d->a);

bad:
    return perr(p, t->col, "bad delay '%s' (expected DUR, uniform(MIN,MAX) "
                "or exp(MEAN))", Q(s, len));
}

/* Index of the value in @names[0..n), or -1. */
static int lookup(const char *const *names, int n, const char *s, size_t len)
{
    for (int i = 0; i < n; i++) {
        if (names[i] && strlen(names[i]) == len &&
            memcmp(names[i], s, len) == 0) {
            return i;
        }
    }
    return -1;
}

enum {
    K_LBA, K_LEN, K_SQ, K_CPU, K_STATE, K_NTH, K_AFTER, K_EVERY, K_COUNT,
    K_PROB, K_DELAY, K_ERROR, K_SET_STATE, K_COMPLETE, K_WHEN, K_IRQ,
    K_IRQ_DELAY, K_DNR, K_DROP, K_LIE, K_CORRUPT, K_FATAL, K_RESET_FAIL,
    K__MAX,
};

static const char *const key_names[K__MAX] = {
    "lba", "len", "sq", "cpu", "state", "nth", "after", "every", "count",
    "prob", "delay", "error", "set-state", "complete", "when", "irq",
    "irq-delay", "dnr", "drop", "lie", "corrupt", "fatal", "reset-fail",
};

#define KEYS_EXPECTED "lba, len, sq, cpu, state, nth, after, every, " \
    "count, prob, delay, error, set-state, complete, when, irq, irq-delay, " \
    "dnr, drop, lie, corrupt, fatal or reset-fail"

static int key_value(FeParser *p, const FeTok *t, int k, const char *v,
                     size_t vlen, FeRule *r)
{
    QBUF;
    uint64_t lo, hi;
    int i;

    switch (k) {
    case K_LBA:
        if (range(p, t, "lba", v, vlen, UINT64_MAX, &lo, &hi) < 0) {
            return -1;
        }
        r->flags |= FE_HAS_LBA;
        r->lba_lo = lo;
        r->lba_hi = hi;
        return 0;
    case K_LEN:
        if (range(p, t, "len", v, vlen, UINT32_MAX, &lo, &hi) < 0) {
            return -1;
        }
        r->flags |= FE_HAS_LEN;
        r->len_lo = (uint32_t)lo;
        r->len_hi = (uint32_t)hi;
        return 0;
    case K_SQ:
    case K_CPU:
        /* NVMe queue ids are 16-bit. */
        if (range(p, t, key_names[k], v, vlen,
                  k == K_SQ ? UINT16_MAX : UINT32_MAX, &lo, &hi) < 0) {
            return -1;
        }
        if (k == K_SQ) {
            r->flags |= FE_HAS_SQ;
            r->sq_lo = (uint32_t)lo;
            r->sq_hi = (uint32_t)hi;
            r->sq_col = t->col;
        } else {
            r->flags |= FE_HAS_CPU;
            r->cpu_lo = (uint32_t)lo;
            r->cpu_hi = (uint32_t)hi;
            r->cpu_col = t->col;
        }
        return 0;
    case K_STATE:
    case K_SET_STATE:
        if (number(p, t, v, vlen, UINT32_MAX, &lo) < 0) {
            return -1;
        }
        if (k == K_STATE) {
            r->flags |= FE_HAS_STATE;
            r->state = (uint32_t)lo;
        } else {
            r->flags |= FE_HAS_SET_STATE;
            r->set_state = (uint32_t)lo;
        }
        return 0;
    case K_NTH:
    case K_AFTER:
    case K_EVERY:
    case K_COUNT:
        if (number(p, t, v, vlen, UINT64_MAX, &lo) < 0) {
            return -1;
        }
        if (lo == 0 && (k == K_NTH || k == K_EVERY)) {
            /* Ordinals start at 1 and every=0 would divide by zero. */
            return perr(p, t->col, "%s=0 is never true (expected >= 1)",
                        key_names[k]);
        }
        if (k == K_NTH) {
            r->flags |= FE_HAS_NTH;
            r->nth = lo;
        } else if (k == K_AFTER) {
            r->flags |= FE_HAS_AFTER;
            r->after = lo;
        } else if (k == K_EVERY) {
            r->flags |= FE_HAS_EVERY;
            r->every = lo;
        } else {
            r->flags |= FE_HAS_COUNT;
            r->count = lo;
        }
        return 0;
    case K_PROB:
        r->flags |= FE_HAS_PROB;
        return prob(p, t, v, vlen, r);
    case K_DELAY:
        return delay_spec(p, t, v, vlen, &r->delay);
    case K_IRQ_DELAY:
        if (delay_spec(p, t, v, vlen, &r->irq_delay) < 0) {
            return -1;
        }
        r->irq = FE_IRQ_DELAY;
        return 0;
    case K_ERROR:
        i = lookup(err_names, FE_ERR__MAX, v, vlen);
        if (i <= FE_ERR_NONE) {
            return perr(p, t->col, "unknown error '%s' (expected eio, enospc, "
                        "write-fault, read-error, internal or timeout)",
                        Q(v, vlen));
        }
        r->flags |= FE_HAS_ERROR;
        r->error = (FeError)i;
        return 0;
    case K_COMPLETE:
        i = lookup(complete_names, 4, v, vlen);
        if (i <= FE_COMPLETE_DEFAULT) {
            return perr(p, t->col, "unknown completion '%s' (expected irq, "
                        "task or thread)", Q(v, vlen));
        }
        r->flags |= FE_HAS_COMPLETE;
        r->complete = (FeComplete)i;
        return 0;
    case K_WHEN:
        if (vlen == 6 && memcmp(v, "before", 6) == 0) {
            r->when = FE_WHEN_BEFORE;
        } else if (vlen == 5 && memcmp(v, "after", 5) == 0) {
            r->when = FE_WHEN_AFTER;
        } else {
            return perr(p, t->col, "unknown when '%s' (expected before or "
                        "after)", Q(v, vlen));
        }
        r->flags |= FE_HAS_WHEN;
        return 0;
    case K_CORRUPT:
        if (number(p, t, v, vlen, UINT64_MAX, &lo) < 0) {
            return -1;
        }
        if (lo < 1 || lo > FE_CORRUPT_MAX) {
            return perr(p, t->col, "corrupt=%s out of range (expected 1 to "
                        "%d bytes)", Q(v, vlen), FE_CORRUPT_MAX);
        }
        r->corrupt = (uint32_t)lo;
        return 0;
    case K_RESET_FAIL:
        if (number(p, t, v, vlen, UINT64_MAX, &lo) < 0) {
            return -1;
        }
        if (lo < 1 || lo > FE_RESET_FAIL_MAX) {
            return perr(p, t->col, "reset-fail=%s out of range (expected 1 "
                        "to %d enables)", Q(v, vlen), FE_RESET_FAIL_MAX);
        }
        r->flags |= FE_HAS_RESET_FAIL;
        r->reset_fail = (uint32_t)lo;
        r->reset_fail_col = t->col;
        return 0;
    case K_IRQ:
        if (!(vlen == 8 && memcmp(v, "suppress", 8) == 0)) {
            return perr(p, t->col, "unknown irq '%s' (expected suppress)",
                        Q(v, vlen));
        }
        r->flags |= FE_HAS_IRQ;
        r->irq = FE_IRQ_SUPPRESS;
        return 0;
    }
    return perr(p, t->col, "internal parser error");
}

static int token(FeParser *p, const FeTok *t, FeRule *r, uint32_t *seen,
                 size_t *seen_col)
{
    QBUF;
    const char *eq = memchr(t->s, '=', t->len);
    size_t klen = eq ? (size_t)(eq - t->s) : t->len;
    int k = lookup(key_names, K__MAX, t->s, klen);
    const char *v;
    size_t vlen;

    if (k < 0) {
        return perr(p, t->col, "unknown key '%s' (expected " KEYS_EXPECTED
                    ")", Q(t->s, klen));
    }
    if (*seen & (1u << k)) {
        return perr(p, t->col, "duplicate key '%s' (already given at column "
                    "%zu)", key_names[k], seen_col[k]);
    }
    /* irq=suppress and irq-delay= both set the irq mode. */
    if ((k == K_IRQ && (*seen & (1u << K_IRQ_DELAY))) ||
        (k == K_IRQ_DELAY && (*seen & (1u << K_IRQ)))) {
        return perr(p, t->col, "'%s' conflicts with the '%s' at column %zu",
                    key_names[k], key_names[k == K_IRQ ? K_IRQ_DELAY : K_IRQ],
                    seen_col[k == K_IRQ ? K_IRQ_DELAY : K_IRQ]);
    }
    /* A lie moves no data, so there is nothing it could corrupt. */
    if ((k == K_LIE && (*seen & (1u << K_CORRUPT))) ||
        (k == K_CORRUPT && (*seen & (1u << K_LIE)))) {
        return perr(p, t->col, "'%s' conflicts with the '%s' at column %zu",
                    key_names[k], key_names[k == K_LIE ? K_CORRUPT : K_LIE],
                    seen_col[k == K_LIE ? K_CORRUPT : K_LIE]);
    }
    *seen |= 1u << k;
    seen_col[k] = t->col;
    if (k == K_DNR || k == K_DROP || k == K_LIE || k == K_FATAL) {
        if (eq) {
            return perr(p, t->col, "'%s' takes no value", key_names[k]);
        }
        r->flags |= k == K_DNR ? FE_HAS_DNR :
                    k == K_DROP ? FE_HAS_DROP :
                    k == K_LIE ? FE_HAS_LIE : FE_HAS_FATAL;
        if (k == K_FATAL) {
            r->fatal_col = t->col;
        }
        return 0;
    }
    if (k == K_CORRUPT) {
        r->flags |= FE_HAS_CORRUPT;
        r->corrupt = 1;
        if (!eq) {
            return 0;
        }
    }
    if (!eq) {
        return perr(p, t->col, "'%s' needs a value ('%s=...')",
                    key_names[k], key_names[k]);
    }
    v = eq + 1;
    vlen = t->len - klen - 1;
    if (!vlen) {
        return perr(p, t->col, "missing value after '%s='", key_names[k]);
    }
    return key_value(p, t, k, v, vlen, r);
}

static bool valid_name(const char *s, size_t len)
{
    if (len == 0 || len >= FE_NAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                     c == '_';
        if (!alpha && (i == 0 || !(is_digit(c) || c == '-'))) {
            return false;
        }
    }
    return true;
}

/* Next token in [*pos, end); whitespace inside (...) does not split. */
static bool next_token(const char *line, const char **pos, const char *end,
                       FeTok *t)
{
    const char *s = *pos;
    bool paren = false;

    while (s < end && is_space(*s)) {
        s++;
    }
    if (s >= end) {
        *pos = s;
        return false;
    }
    t->s = s;
    t->col = (size_t)(s - line) + 1;
    while (s < end && (paren || !is_space(*s))) {
        if (*s == '(') {
            paren = true;
        } else if (*s == ')') {
            paren = false;
        }
        s++;
    }
    t->len = (size_t)(s - t->s);
    *pos = s;
    return true;
}

#define OPS_EXPECTED "read, write, flush, discard, write-zeroes or any"

/* Parse one non-empty line [line, end).  Returns 1 rule, 0 blank, -1. */
static int parse_line(FeParser *p, const char *line, const char *end,
                      FeRule *r)
{
    QBUF;
    const char *pos = line;
    FeTok t, op;
    const char *colon;
    uint32_t seen = 0;
    size_t seen_col[K__MAX] = { 0 };
    int i;

    if (!next_token(line, &pos, end, &t)) {
        return 0;
    }
    memset(r, 0, sizeof(*r));
    r->line = p->line;
    colon = memchr(t.s, ':', t.len);
    op = t;
    if (colon) {
        size_t nlen = (size_t)(colon - t.s);
        if (!valid_name(t.s, nlen)) {
            return perr(p, t.col, "bad rule name '%s' (expected a letter or "
                        "'_', then letters, digits, '_' or '-'; at most %d "
                        "characters)", Q(t.s, nlen), FE_NAME_MAX - 1);
        }
        memcpy(r->name, t.s, nlen);
        r->name[nlen] = '\0';
        r->named = true;
        r->name_col = t.col;
        if (nlen + 1 < t.len) {
            /* "name:write" */
            op.s = colon + 1;
            op.len = t.len - nlen - 1;
            op.col = t.col + nlen + 1;
        } else if (!next_token(line, &pos, end, &op)) {
            return perr(p, t.col, "rule '%s' has no op (expected "
                        OPS_EXPECTED ")", r->name);
        }
    }
    i = lookup(op_names, FE_OP_ANY + 1, op.s, op.len);
    if (i < 0) {
        return perr(p, op.col, "unknown op '%s' (expected " OPS_EXPECTED ")",
                    Q(op.s, op.len));
    }
    r->op = (FeOp)i;
    while (next_token(line, &pos, end, &t)) {
        if (token(p, &t, r, &seen, seen_col) < 0) {
            return -1;
        }
    }
    if (!(seen & ((1u << K_DELAY) | (1u << K_ERROR) | (1u << K_SET_STATE) |
                  (1u << K_COMPLETE) | (1u << K_IRQ) | (1u << K_IRQ_DELAY) |
                  (1u << K_DNR) | (1u << K_DROP) | (1u << K_LIE) |
                  (1u << K_CORRUPT) | (1u << K_FATAL) |
                  (1u << K_RESET_FAIL)))) {
        return perr(p, op.col, "rule has no action (expected delay=, error=, "
                    "dnr, drop, lie, corrupt, fatal, reset-fail=, set-state=, "
                    "complete=, irq= or irq-delay=)");
    }
    if ((r->flags & FE_HAS_CORRUPT) && r->op != FE_OP_READ &&
        r->op != FE_OP_WRITE && r->op != FE_OP_ANY) {
        return perr(p, seen_col[K_CORRUPT], "'corrupt' needs data to flip "
                    "(op read, write or any, not %s)", fe_op_name(r->op));
    }
    if (r->error == FE_ERR_TIMEOUT) {
        /* A timeout is a completion that never comes. */
        r->drop = true;
    }
    if (r->flags & FE_HAS_DROP) {
        r->drop = true;
    }
    r->dnr = (r->flags & FE_HAS_DNR) != 0;
    fe_rule_render(r);
    return 1;
}

int fe_format_duration(char *buf, size_t len, uint64_t ns)
{
    if (ns && ns % 1000000000 == 0) {
        return snprintf(buf, len, "%" PRIu64 "s", ns / 1000000000);
    } else if (ns && ns % 1000000 == 0) {
        return snprintf(buf, len, "%" PRIu64 "ms", ns / 1000000);
    } else if (ns && ns % 1000 == 0) {
        return snprintf(buf, len, "%" PRIu64 "us", ns / 1000);
    }
    return snprintf(buf, len, "%" PRIu64 "ns", ns);
}

/* snprintf-append that never overruns and stops once full. */
typedef struct FeBuf {
    char *s;
    size_t len, pos;
} FeBuf;

static void bput(FeBuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void bput(FeBuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->pos >= b->len) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(b->s + b->pos, b->len - b->pos, fmt, ap);
    va_end(ap);
    if (n > 0) {
        b->pos += (size_t)n;
    }
}

static void render_delay(FeBuf *b, const char *key, const FeDelaySpec *d)
{
    char x[32], y[32];

    fe_format_duration(x, sizeof(x), d->a);
    switch (d->kind) {
    case FE_DELAY_FIXED:
        bput(b, " %s=%s", key, x);
        break;
    case FE_DELAY_UNIFORM:
        fe_format_duration(y, sizeof(y), d->b);
        bput(b, " %s=uniform(%s,%s)", key, x, y);
        break;
    case FE_DELAY_EXP:
        bput(b, " %s=exp(%s)", key, x);
        break;
    case FE_DELAY_NONE:
        break;
    }
}

static void render_range(FeBuf *b, const char *key, uint32_t lo, uint32_t hi)
{
    if (lo == hi) {
        bput(b, " %s=%" PRIu32, key, lo);
    } else {
        bput(b, " %s=%" PRIu32 "-%" PRIu32, key, lo, hi);
    }
}

void fe_rule_render(FeRule *r)
{
    FeBuf b = { r->text, sizeof(r->text), 0 };

    r->text[0] = '\0';
    bput(&b, "%s", fe_op_name(r->op));
    if (r->flags & FE_HAS_LBA) {
        if (r->lba_lo == r->lba_hi) {
            bput(&b, " lba=%" PRIu64, r->lba_lo);
        } else {
            bput(&b, " lba=%" PRIu64 "-%" PRIu64, r->lba_lo, r->lba_hi);
        }
    }
    if (r->flags & FE_HAS_LEN) {
        render_range(&b, "len", r->len_lo, r->len_hi);
    }
    if (r->flags & FE_HAS_SQ) {
        render_range(&b, "sq", r->sq_lo, r->sq_hi);
    }
    if (r->flags & FE_HAS_CPU) {
        render_range(&b, "cpu", r->cpu_lo, r->cpu_hi);
    }
    if (r->flags & FE_HAS_STATE) {
        bput(&b, " state=%" PRIu32, r->state);
    }
    if (r->flags & FE_HAS_NTH) {
        bput(&b, " nth=%" PRIu64, r->nth);
    }
    if (r->flags & FE_HAS_AFTER) {
        bput(&b, " after=%" PRIu64, r->after);
    }
    if (r->flags & FE_HAS_EVERY) {
        bput(&b, " every=%" PRIu64, r->every);
    }
    if (r->flags & FE_HAS_COUNT) {
        bput(&b, " count=%" PRIu64, r->count);
    }
    if (r->flags & FE_HAS_PROB) {
        if (r->prob_one) {
            bput(&b, " prob=1");
        } else if (r->prob_digits == 0) {
            bput(&b, " prob=0");
        } else {
            bput(&b, " prob=0.%0*" PRIu64, (int)r->prob_digits, r->prob_mant);
        }
    }
    render_delay(&b, "delay", &r->delay);
    if (r->flags & FE_HAS_ERROR) {
        bput(&b, " error=%s", fe_error_name(r->error));
    }
    if (r->flags & FE_HAS_WHEN) {
        bput(&b, " when=%s", r->when == FE_WHEN_AFTER ? "after" : "before");
    }
    if (r->flags & FE_HAS_DNR) {
        bput(&b, " dnr");
    }
    if (r->flags & FE_HAS_DROP) {
        bput(&b, " drop");
    }
    if (r->flags & FE_HAS_LIE) {
        bput(&b, " lie");
    }
    if ((r->flags & FE_HAS_CORRUPT) && r->corrupt == 1) {
        bput(&b, " corrupt");
    } else if (r->flags & FE_HAS_CORRUPT) {
        bput(&b, " corrupt=%" PRIu32, r->corrupt);
    }
    if (r->flags & FE_HAS_FATAL) {
        bput(&b, " fatal");
    }
    if (r->flags & FE_HAS_RESET_FAIL) {
        bput(&b, " reset-fail=%" PRIu32, r->reset_fail);
    }
    if (r->flags & FE_HAS_SET_STATE) {
        bput(&b, " set-state=%" PRIu32, r->set_state);
    }
    if (r->flags & FE_HAS_COMPLETE) {
        bput(&b, " complete=%s", complete_names[r->complete]);
    }
    if (r->flags & FE_HAS_IRQ) {
        bput(&b, " irq=suppress");
    }
    render_delay(&b, "irq-delay", &r->irq_delay);
}

/* A NUL byte would silently end a C string: reject it where it is. */
static int reject_nul(FeParser *p, const char *text, size_t len)
{
    const char *nul = memchr(text, '\0', len);
    const char *line = text;

    if (!nul) {
        return 0;
    }
    for (const char *c = text; c < nul; c++) {
        if (*c == '\n') {
            p->line++;
            line = c + 1;
        }
    }
    p->line++;
    return perr(p, (size_t)(nul - line) + 1, "NUL byte in rule text (expected "
                "plain text, one rule per line)");
}

int fe_parse_rules(const char *text, size_t len, FeRule **rules, size_t *n,
                   char *err, size_t errlen)
{
    FeParser p = { 0, err, errlen };
    FeRule *v = NULL, *nv, tmp;
    size_t cnt = 0, cap = 0;
    const char *s = text ? text : "";
    const char *text_end = s + (text ? len : 0);

    *rules = NULL;
    *n = 0;
    if (err && errlen) {
        err[0] = '\0';
    }
    if (reject_nul(&p, s, (size_t)(text_end - s)) < 0) {
        return -1;
    }
    while (s < text_end) {
        const char *nl = memchr(s, '\n', (size_t)(text_end - s));
        const char *end = nl ? nl : text_end;
        const char *hash = memchr(s, '#', (size_t)(end - s));
        int r;

        p.line++;
        r = parse_line(&p, s, hash ? hash : end, &tmp);
        if (r < 0) {
            goto fail;
        }
        if (r > 0) {
            if (cnt == FE_RULES_MAX) {
                perr(&p, 1, "too many rules (max %d)", FE_RULES_MAX);
                goto fail;
            }
            if (cnt == cap) {
                cap = cap ? cap * 2 : 8;
                nv = realloc(v, cap * sizeof(*v));
                if (!nv) {
                    perr(&p, 1, "out of memory");
                    goto fail;
                }
                v = nv;
            }
            v[cnt++] = tmp;
        }
        s = nl ? nl + 1 : end;
    }
    *rules = v;
    *n = cnt;
    return 0;

fail:
    free(v);
    return -1;
}
