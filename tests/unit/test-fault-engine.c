/*
 * Unit tests of the faultline fault engine (no QEMU, no framework).
 * Prints TAP; exits non-zero if any test fails.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault-engine.h"

static int ntests;
static int nfailed;

static bool ok(bool cond, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static bool ok(bool cond, const char *fmt, ...)
{
    va_list ap;
    char desc[256];

    va_start(ap, fmt);
    vsnprintf(desc, sizeof(desc), fmt, ap);
    va_end(ap);
    /* One TAP line per test, whatever the description holds. */
    for (char *p = desc; *p; p++) {
        if ((unsigned char)*p < 0x20) {
            *p = ' ';
        }
    }
    printf("%sok %d - %s\n", cond ? "" : "not ", ++ntests, desc);
    if (!cond) {
        nfailed++;
    }
    return cond;
}

#define OK(cond, ...) ok((cond), __VA_ARGS__)
#define EQ_U64(a, b, desc) do { \
        uint64_t a_ = (a), b_ = (b); \
        if (!ok(a_ == b_, "%s", desc)) { \
            printf("#   got %" PRIu64 ", expected %" PRIu64 "\n", a_, b_); \
        } \
    } while (0)
#define EQ_STR(a, b, desc) do { \
        const char *a_ = (a), *b_ = (b); \
        if (!ok(strcmp(a_, b_) == 0, "%s", desc)) { \
            printf("#   got      '%s'\n#   expected '%s'\n", a_, b_); \
        } \
    } while (0)

static FeEngine *engine(const char *rules)
{
    FeEngine *fe = fe_engine_new(42);
    char err[FE_ERR_MSG_MAX];

    if (rules && fe_engine_add_rules(fe, rules, err, sizeof(err)) < 0) {
        printf("# unexpected rule error: %s\n", err);
        abort();
    }
    return fe;
}

static const char *text_of(FeEngine *fe, int i)
{
    static FeRuleStats st;

    if (fe_engine_rule_stats(fe, i, &st) < 0) {
        return "(none)";
    }
    return st.text;
}

static const char *name_of(FeEngine *fe, int i)
{
    static FeRuleStats st;

    if (fe_engine_rule_stats(fe, i, &st) < 0) {
        return "(none)";
    }
    return st.name;
}

/* Canonical rendering of a single rule. */
static void canon(const char *in, const char *want)
{
    FeEngine *fe = engine(in);
    char desc[300];

    snprintf(desc, sizeof(desc), "canonical form of '%.200s'", in);
    EQ_STR(text_of(fe, 0), want, desc);
    fe_engine_free(fe);
}

/* @text must fail with exactly @want, in both add and check. */
static void err_is(const char *text, const char *want)
{
    FeEngine *fe = fe_engine_new(1);
    char err[FE_ERR_MSG_MAX] = "", err2[FE_ERR_MSG_MAX] = "";
    char desc[300];
    int r = fe_engine_add_rules(fe, text, err, sizeof(err));
    int r2 = fe_engine_check_rules(text, err2, sizeof(err2));

    snprintf(desc, sizeof(desc), "error for '%.60s'", text);
    OK(r == -1 && r2 == -1 && fe_engine_rule_count(fe) == 0,
       "'%.60s' is rejected, nothing added", text);
    EQ_STR(err, want, desc);
    EQ_STR(err2, want, "check_rules gives the same error");
    fe_engine_free(fe);
}

/* Error text starts with @prefix (for long "expected" lists). */
static void err_starts(const char *text, const char *prefix)
{
    char err[FE_ERR_MSG_MAX] = "";
    int r = fe_engine_check_rules(text, err, sizeof(err));

    if (!OK(r == -1 && strncmp(err, prefix, strlen(prefix)) == 0,
            "'%.60s' fails with '%s...'", text, prefix)) {
        printf("#   got '%s'\n", err);
    }
}

static bool wr(FeEngine *fe, uint64_t lba, uint32_t len, FeDecision *d)
{
    return fe_engine_decide(fe, FE_OP_WRITE, lba, len, 0, d);
}

/*
 * Ordinals (1..n) at which @n writes to lba 0 fire, as "a,b,c".  Write i
 * comes from SQ (i - 1) % 3 + 1 on vCPU (i - 1) % 2, as far as @have
 * (FE_KEY_*) says; the digest goes to @digest unless NULL.
 */
static const char *fired_keys(const char *rules, int n, uint32_t have,
                              uint64_t *digest)
{
    static char buf[512];
    FeEngine *fe = engine(rules);
    FeDecision d;
    size_t pos = 0;

    buf[0] = '\0';
    for (int i = 1; i <= n; i++) {
        FeIoKeys k = { .have = have, .sq = (uint32_t)(i - 1) % 3 + 1,
                       .cpu = (uint32_t)(i - 1) % 2 };

        if (fe_engine_decide_keys(fe, FE_OP_WRITE, 0, 8, &k, 0, &d) &&
            pos < sizeof(buf) - 16) {
            pos += (size_t)snprintf(buf + pos, sizeof(buf) - pos, "%s%d",
                                    pos ? "," : "", i);
        }
    }
    if (digest) {
        *digest = fe_engine_digest(fe);
    }
    fe_engine_free(fe);
    return buf;
}

static const char *fired_at(const char *rules, int n)
{
    return fired_keys(rules, n, 0, NULL);
}

static void test_canonical(void)
{
    canon("wfail:  write lba=0-262143      after=1000 every=50 count=20  "
          "error=write-fault",
          "write lba=0-262143 after=1000 every=50 count=20 error=write-fault");
    canon("slow:   write                   prob=0.05              "
          "delay=exp(200us)", "write prob=0.05 delay=exp(200us)");
    canon("lost:   write lba=4096-8191     nth=3                  drop",
          "write lba=4096-8191 nth=3 drop");
    canon("phase2: any   state=2                                  "
          "delay=uniform(50us,2ms)", "any state=2 delay=uniform(50us,2ms)");
    canon("read error=read-error", "read error=read-error");
    canon("flush delay=1s", "flush delay=1s");
    canon("discard error=eio", "discard error=eio");
    canon("write-zeroes error=enospc", "write-zeroes error=enospc");
    canon("write error=internal dnr", "write error=internal dnr");
    canon("write error=timeout", "write error=timeout");
    canon("write lba=0x10-0x1F drop", "write lba=16-31 drop");
    canon("write lba=7 drop", "write lba=7 drop");
    canon("write lba=7-7 drop", "write lba=7 drop");
    canon("write len=8 drop", "write len=8 drop");
    canon("write len=1-0x10 drop", "write len=1-16 drop");
    canon("write delay=5ns", "write delay=5ns");
    canon("write delay=1.5ns", "write delay=1ns");
    canon("write delay=1.5ms", "write delay=1500us");
    canon("write delay=0.5s", "write delay=500ms");
    canon("write delay=2000us", "write delay=2ms");
    canon("write delay=0us", "write delay=0ns");
    canon("write delay=1.0000000009s", "write delay=1s");
    canon("write delay=1.000000001s", "write delay=1000000001ns");
    canon("write delay=uniform( 50us , 2ms )", "write delay=uniform(50us,2ms)");
    canon("write delay=exp(1.5us)", "write delay=exp(1500ns)");
    canon("write prob=0.50 drop", "write prob=0.5 drop");
    canon("write prob=.25 drop", "write prob=0.25 drop");
    canon("write prob=1.000 drop", "write prob=1 drop");
    canon("write prob=0 drop", "write prob=0 drop");
    canon("write prob=0.000 drop", "write prob=0 drop");
    canon("write prob=0.001 drop", "write prob=0.001 drop");
    canon("write state=4294967295 set-state=0x10",
          "write state=4294967295 set-state=16");
    canon("write complete=irq", "write complete=irq");
    canon("write complete=task", "write complete=task");
    canon("write complete=thread", "write complete=thread");
    canon("write error=eio when=after", "write error=eio when=after");
    canon("write error=eio when=before", "write error=eio when=before");
    canon("write irq=suppress", "write irq=suppress");
    canon("write irq-delay=10us", "write irq-delay=10us");
    canon("write irq-delay=uniform(1us,2us)",
          "write irq-delay=uniform(1us,2us)");
    /* Canonical key order, whatever the input order. */
    canon("write drop dnr error=eio nth=2 lba=1-2 state=3",
          "write lba=1-2 state=3 nth=2 error=eio dnr drop");
    canon("a:write drop", "write drop");
    canon("write lie", "write lie");
    canon("read lie", "read lie");
    canon("flush lie", "flush lie");
    canon("write corrupt", "write corrupt");
    canon("read corrupt=1", "read corrupt");
    canon("any corrupt=0x10", "any corrupt=16");
    canon("write corrupt=3 drop lba=5 after=2",
          "write lba=5 after=2 drop corrupt=3");
    canon("write lie error=eio count=1 after=10",
          "write after=10 count=1 error=eio lie");
    canon("write drop # trailing comment", "write drop");
    canon("write drop#no space", "write drop");
    canon("\t write\tdrop \r", "write drop");
}

static void test_names(void)
{
    FeEngine *fe;
    char err[FE_ERR_MSG_MAX];
    FeRuleStats st;

    fe = engine("# just a comment\n\n   \n");
    EQ_U64(fe_engine_rule_count(fe), 0, "comments and blank lines add nothing");
    EQ_U64(fe_engine_add_rules(fe, "", err, sizeof(err)), 0,
           "empty text adds 0 rules");
    EQ_U64(fe_engine_add_rules(fe, "write drop\r\nread drop\n", err,
                               sizeof(err)), 2, "two rules (CRLF) added");
    EQ_STR(name_of(fe, 0), "r0", "unnamed rule 0 is r0");
    EQ_STR(name_of(fe, 1), "r1", "unnamed rule 1 is r1");
    EQ_U64(fe_engine_add_rules(fe, "r3: write drop", err, sizeof(err)), 1,
           "explicit name r3 at index 2");
    EQ_U64(fe_engine_add_rules(fe, "flush drop", err, sizeof(err)), 1,
           "unnamed at index 3");
    EQ_STR(name_of(fe, 3), "r4", "taken r3 is skipped: r4");
    EQ_U64(fe_engine_add_rules(fe, "discard drop\nr5: read drop", err,
                               sizeof(err)), 2, "batch with explicit r5");
    EQ_STR(name_of(fe, 4), "r6", "r4, r5 taken (r5 later in batch): r6");
    EQ_U64(fe_engine_rule_stats(fe, 6, &st), (uint64_t)-1,
           "rule_stats out of range");
    EQ_U64(fe_engine_rule_stats(fe, -1, &st), (uint64_t)-1,
           "rule_stats negative");
    fe_engine_free(fe);

    /* Longest legal name. */
    fe = engine("abcdefghijklmnopqrstuvwxyz_-012: write drop");
    EQ_STR(name_of(fe, 0), "abcdefghijklmnopqrstuvwxyz_-012",
           "31-character name accepted");
    fe_engine_free(fe);
}

static void test_errors(void)
{
    char big[8192];

    err_is("\n\nwfail:  wrte drop",
           "3:9: unknown op 'wrte' (expected read, write, flush, discard, "
           "write-zeroes or any)");
    err_is("write delay=10",
           "1:7: bad duration '10' (expected a unit: ns, us, ms, s)");
    err_is("slow: write prob=0.05 delay=10",
           "1:23: bad duration '10' (expected a unit: ns, us, ms, s)");
    err_is("write delay=1xs",
           "1:7: bad duration '1xs' (expected a unit: ns, us, ms, s)");
    err_is("write delay=ms",
           "1:7: bad duration 'ms' (expected a number and a unit: ns, us, "
           "ms, s)");
    err_is("write delay=99999999999999999999ns",
           "1:7: duration '99999999999999999999ns' out of range (max 1000000s)");
    err_is("write delay=18446744073709551615s",
           "1:7: duration '18446744073709551615s' out of range (max 1000000s)");
    err_is("wfail: write drop\nwfail: read drop",
           "2:1: duplicate rule name 'wfail'");
    err_is("write lba=9-3 drop", "1:7: lba range 9-3 is empty");
    err_is("write len=9-3 drop", "1:7: len range 9-3 is empty");
    err_is("write prob=1.5 drop", "1:7: prob=1.5 out of range [0,1]");
    err_is("write prob=2 drop", "1:7: prob=2 out of range [0,1]");
    err_is("write prob=0.5x drop",
           "1:7: bad probability '0.5x' (expected a number in [0,1])");
    err_is("write prob=-1 drop",
           "1:7: bad probability '-1' (expected a number in [0,1])");
    err_is("write nth=1 nth=2 drop",
           "1:13: duplicate key 'nth' (already given at column 7)");
    err_is("write drop drop",
           "1:12: duplicate key 'drop' (already given at column 7)");
    err_is("write delay=1us delay=2us",
           "1:17: duplicate key 'delay' (already given at column 7)");
    err_is("write lba=1",
           "1:1: rule has no action (expected delay=, error=, dnr, drop, "
           "lie, corrupt, fatal, reset-fail=, set-state=, complete=, irq= or "
           "irq-delay=)");
    err_is("x: write lba=1 when=after",
           "1:4: rule has no action (expected delay=, error=, dnr, drop, "
           "lie, corrupt, fatal, reset-fail=, set-state=, complete=, irq= or "
           "irq-delay=)");
    err_is("write delay=uniform(2ms,50us)",
           "1:7: empty range in 'uniform(2ms,50us)' (min > max)");
    err_is("write delay=uniform(1ms)",
           "1:7: bad delay 'uniform(1ms)' (expected DUR, uniform(MIN,MAX) "
           "or exp(MEAN))");
    err_is("write delay=exp(1ms,2ms)",
           "1:7: bad delay 'exp(1ms,2ms)' (expected DUR, uniform(MIN,MAX) "
           "or exp(MEAN))");
    err_is("write delay=exp(1ms",
           "1:7: bad delay 'exp(1ms' (expected DUR, uniform(MIN,MAX) "
           "or exp(MEAN))");
    err_is("write delay=uniform(1ms,2ms,3ms)",
           "1:7: bad delay 'uniform(1ms,2ms,3ms)' (expected DUR, "
           "uniform(MIN,MAX) or exp(MEAN))");
    err_is("write lba=18446744073709551616 drop",
           "1:7: number '18446744073709551616' out of range (max "
           "18446744073709551615)");
    err_is("write lba=0x10000000000000000 drop",
           "1:7: number '0x10000000000000000' out of range (max "
           "18446744073709551615)");
    err_is("write len=4294967296 drop",
           "1:7: number '4294967296' out of range (max 4294967295)");
    err_is("write set-state=4294967296",
           "1:7: number '4294967296' out of range (max 4294967295)");
    err_is("write nth=99999999999999999999 drop",
           "1:7: number '99999999999999999999' out of range (max "
           "18446744073709551615)");
    err_is("write lba=abc drop",
           "1:7: bad number 'abc' (expected a decimal or 0x hex integer)");
    err_is("write lba=0x drop",
           "1:7: bad number '0x' (expected a decimal or 0x hex integer)");
    err_is("write lba=1-2-3 drop",
           "1:7: bad number '2-3' (expected a decimal or 0x hex integer)");
    err_is("write nth=0 drop", "1:7: nth=0 is never true (expected >= 1)");
    err_is("write every=0 drop",
           "1:7: every=0 is never true (expected >= 1)");
    err_is("write error=foo",
           "1:7: unknown error 'foo' (expected eio, enospc, write-fault, "
           "read-error, internal or timeout)");
    err_is("write error=none",
           "1:7: unknown error 'none' (expected eio, enospc, write-fault, "
           "read-error, internal or timeout)");
    err_is("write complete=soon",
           "1:7: unknown completion 'soon' (expected irq, task or thread)");
    err_is("write error=eio when=later",
           "1:17: unknown when 'later' (expected before or after)");
    err_is("write irq=late", "1:7: unknown irq 'late' (expected suppress)");
    err_is("write irq=suppress irq-delay=1us",
           "1:20: 'irq-delay' conflicts with the 'irq' at column 7");
    err_is("write dnr=1", "1:7: 'dnr' takes no value");
    err_is("write lie=1", "1:7: 'lie' takes no value");
    err_is("write lie lie",
           "1:11: duplicate key 'lie' (already given at column 7)");
    err_is("write corrupt=0",
           "1:7: corrupt=0 out of range (expected 1 to 16 bytes)");
    err_is("write corrupt=17",
           "1:7: corrupt=17 out of range (expected 1 to 16 bytes)");
    err_is("write corrupt=99999999999999999999",
           "1:7: number '99999999999999999999' out of range (max "
           "18446744073709551615)");
    err_is("write corrupt=x",
           "1:7: bad number 'x' (expected a decimal or 0x hex integer)");
    err_is("write corrupt=", "1:7: missing value after 'corrupt='");
    err_is("write lie corrupt",
           "1:11: 'corrupt' conflicts with the 'lie' at column 7");
    err_is("write corrupt=2 lie",
           "1:17: 'lie' conflicts with the 'corrupt' at column 7");
    err_is("flush corrupt", "1:7: 'corrupt' needs data to flip (op read, "
           "write or any, not flush)");
    err_is("x: discard delay=1us corrupt=2", "1:22: 'corrupt' needs data to "
           "flip (op read, write or any, not discard)");
    err_is("write-zeroes corrupt", "1:14: 'corrupt' needs data to flip (op "
           "read, write or any, not write-zeroes)");
    err_is("write drop=yes", "1:7: 'drop' takes no value");
    err_is("write delay", "1:7: 'delay' needs a value ('delay=...')");
    err_is("write lba= drop", "1:7: missing value after 'lba='");
    err_is("1abc: write drop",
           "1:1: bad rule name '1abc' (expected a letter or '_', then "
           "letters, digits, '_' or '-'; at most 31 characters)");
    err_is("a!: write drop",
           "1:1: bad rule name 'a!' (expected a letter or '_', then "
           "letters, digits, '_' or '-'; at most 31 characters)");
    err_is("abcdefghijklmnopqrstuvwxyz_-0123: write drop",
           "1:1: bad rule name 'abcdefghijklmnopqrstuvwxyz_-0123' (expected "
           "a letter or '_', then letters, digits, '_' or '-'; at most 31 "
           "characters)");
    err_is("  foo:  # nothing",
           "1:3: rule 'foo' has no op (expected read, write, flush, "
           "discard, write-zeroes or any)");
    err_starts("write foo=1 drop", "1:7: unknown key 'foo' (expected lba, ");
    err_starts("write read drop", "1:7: unknown key 'read' (expected lba, ");
    /* Long tokens are quoted truncated. */
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    memcpy(big, "write lba=", 10);
    err_is(big, "1:7: bad number 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'"
           " (expected a decimal or 0x hex integer)");
    /* Non-printable bytes are quoted as '?'. */
    err_is("wr\x01te drop", "1:1: unknown op 'wr?te' (expected read, write, "
           "flush, discard, write-zeroes or any)");
    /* A tiny error buffer is still terminated. */
    {
        char small[6];
        OK(fe_engine_check_rules("wrte drop", small, sizeof(small)) == -1 &&
           strcmp(small, "1:1: ") == 0, "error truncated to a small buffer");
        OK(fe_engine_check_rules("wrte drop", NULL, 0) == -1,
           "NULL error buffer is fine");
    }
}

static void test_all_or_nothing(void)
{
    FeEngine *fe = engine("x: write drop");
    char err[FE_ERR_MSG_MAX];

    OK(fe_engine_add_rules(fe, "a: write drop\nb: wrte drop", err,
                           sizeof(err)) == -1 &&
       fe_engine_rule_count(fe) == 1, "bad second line adds nothing");
    OK(fe_engine_add_rules(fe, "y: write drop\nx: read drop", err,
                           sizeof(err)) == -1 &&
       fe_engine_rule_count(fe) == 1, "name clashing with engine adds nothing");
    EQ_STR(err, "2:1: duplicate rule name 'x'", "clash error names the line");
    OK(fe_engine_check_rules("x: write drop", err, sizeof(err)) == 1,
       "check_rules ignores engines");
    OK(fe_engine_check_rules("a: write drop\nread drop", err,
                             sizeof(err)) == 2, "check_rules counts rules");
    OK(fe_engine_add_rules(fe, "a: write drop\nb: read drop", err,
                           sizeof(err)) == 2 &&
       fe_engine_rule_count(fe) == 3, "good batch added");
    fe_engine_free(fe);
}

static void test_lba_len(void)
{
    FeEngine *fe = engine("write lba=100-199 drop");
    FeDecision d;

    OK(!wr(fe, 92, 8, &d), "I/O [92,99] misses [100,199]");
    OK(wr(fe, 93, 8, &d), "I/O [93,100] overlaps start");
    OK(wr(fe, 100, 1, &d), "first sector inclusive");
    OK(wr(fe, 199, 1, &d), "last sector inclusive");
    OK(wr(fe, 199, 8, &d), "I/O [199,206] overlaps end");
    OK(!wr(fe, 200, 8, &d), "I/O [200,207] misses");
    OK(wr(fe, 0, 1000, &d), "I/O covering the range");
    OK(wr(fe, 100, 0, &d), "len 0 at 100 matches (one sector)");
    OK(!wr(fe, 200, 0, &d), "len 0 at 200 misses");
    OK(!fe_engine_decide(fe, FE_OP_READ, 150, 8, 0, &d), "other op misses");
    fe_engine_free(fe);

    fe = engine("write lba=18446744073709551615 drop");
    OK(wr(fe, UINT64_MAX - 1, 8, &d), "range end saturates at 2^64-1");
    OK(!wr(fe, 0, UINT32_MAX, &d), "huge len at 0 misses the last sector");
    fe_engine_free(fe);

    fe = engine("write len=8-16 drop");
    OK(!wr(fe, 5, 7, &d), "len 7 < 8 misses");
    OK(wr(fe, 5, 8, &d), "len 8 matches");
    OK(wr(fe, 5, 16, &d), "len 16 matches");
    OK(!wr(fe, 5, 17, &d), "len 17 misses");
    fe_engine_free(fe);

    /* Many overlapping and disjoint ranges: the sorted index must agree
     * with a plain scan. */
    {
        static const uint64_t r[][2] = {
            { 0, 1000000 }, { 10, 20 }, { 15, 30 }, { 500, 600 },
            { 25, 26 }, { 1000, 1000 }, { 40, 39 + 100 }, { 2000, 3000 },
        };
        char rules[1024];
        size_t pos = 0;
        bool all_ok = true;
        uint64_t x = 1;

        for (size_t i = 1; i < sizeof(r) / sizeof(r[0]); i++) {
            pos += (size_t)snprintf(rules + pos, sizeof(rules) - pos,
                                    "w%zu: write lba=%" PRIu64 "-%" PRIu64
                                    " delay=%zuns\n", i, r[i][0], r[i][1],
                                    (size_t)1 << i);
        }
        fe = engine(rules);
        for (int k = 0; k < 20000; k++) {
            uint64_t lba, want = 0;
            uint32_t len;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            lba = x % 3200;
            len = (uint32_t)(x >> 32) % 40;
            for (size_t i = 1; i < sizeof(r) / sizeof(r[0]); i++) {
                uint64_t end = lba + (len ? len - 1 : 0);
                if (lba <= r[i][1] && end >= r[i][0]) {
                    want |= (uint64_t)1 << i;
                }
            }
            wr(fe, lba, len, &d);
            if (d.delay_ns != want) {
                all_ok = false;
            }
        }
        OK(all_ok, "overlap index agrees with a linear scan over 20000 I/Os");
        fe_engine_free(fe);
    }
}

static void test_ops(void)
{
    FeEngine *fe = engine("any error=eio");
    FeDecision d;
    bool all = true;

    for (int op = 0; op < FE_OP__MAX; op++) {
        all &= fe_engine_decide(fe, (FeOp)op, 0, 1, 0, &d);
    }
    OK(all, "any matches all five ops");
    OK(!fe_engine_decide(fe, FE_OP_ANY, 0, 1, 0, &d) && d.fired == 0,
       "FE_OP_ANY is not an I/O op");
    OK(!fe_engine_decide(fe, (FeOp)77, 0, 1, 0, &d), "bad op value ignored");
    fe_engine_free(fe);

    for (int op = 0; op < FE_OP__MAX; op++) {
        char rule[64];
        bool hit_own = false, hit_other = false;
        snprintf(rule, sizeof(rule), "%s drop", fe_op_name((FeOp)op));
        fe = engine(rule);
        for (int o = 0; o < FE_OP__MAX; o++) {
            bool h = fe_engine_decide(fe, (FeOp)o, 0, 1, 0, &d);
            if (o == op) {
                hit_own = h;
            } else {
                hit_other |= h;
            }
        }
        OK(hit_own && !hit_other, "'%s' matches only its op", rule);
        fe_engine_free(fe);
    }
    EQ_STR(fe_op_name(FE_OP_ANY), "any", "fe_op_name(ANY)");
    EQ_STR(fe_op_name(FE_OP_WRITE_ZEROES), "write-zeroes", "fe_op_name");
    EQ_STR(fe_op_name((FeOp)99), "?", "fe_op_name out of range");
    EQ_STR(fe_error_name(FE_ERR_WRITE_FAULT), "write-fault", "fe_error_name");
    EQ_STR(fe_error_name(FE_ERR_NONE), "none", "fe_error_name(NONE)");
    EQ_STR(fe_error_name((FeError)99), "?", "fe_error_name out of range");
}

static void test_triggers(void)
{
    FeEngine *fe;
    FeDecision d;
    FeRuleStats st;

    EQ_STR(fired_at("write nth=3 drop", 10), "3", "nth=3");
    EQ_STR(fired_at("write after=5 drop", 10), "6,7,8,9,10", "after=5");
    EQ_STR(fired_at("write every=4 drop", 13), "4,8,12", "every=4");
    EQ_STR(fired_at("write count=3 drop", 10), "1,2,3", "count=3");
    EQ_STR(fired_at("write count=0 drop", 10), "", "count=0 never");
    EQ_STR(fired_at("write after=2 every=3 count=2 drop", 20), "5,8",
           "after=2 every=3 count=2");
    EQ_STR(fired_at("write after=2 every=3 drop", 12), "5,8,11",
           "after=2 every=3");
    EQ_STR(fired_at("write after=1000 every=50 count=20 drop", 1100),
           "1050,1100", "after=1000 every=50");
    EQ_STR(fired_at("write nth=5 after=3 drop", 10), "5", "nth=5 after=3");
    EQ_STR(fired_at("write nth=2 after=3 drop", 10), "", "nth=2 after=3");
    EQ_STR(fired_at("write nth=4 every=2 drop", 10), "4", "nth=4 every=2");
    EQ_STR(fired_at("write nth=3 every=2 drop", 10), "", "nth=3 every=2");
    EQ_STR(fired_at("write every=2 count=2 drop", 10), "2,4",
           "every=2 count=2");
    EQ_STR(fired_at("write prob=1 count=2 drop", 10), "1,2",
           "prob=1 count=2");
    EQ_STR(fired_at("write prob=0 drop", 1000), "", "prob=0 never");

    /* Ordinals count only matching I/Os. */
    fe = engine("write lba=0-9 nth=2 drop");
    OK(!wr(fe, 0, 1, &d) && !wr(fe, 100, 1, &d) && !wr(fe, 200, 1, &d) &&
       wr(fe, 5, 1, &d) && !wr(fe, 5, 1, &d),
       "nth counts matching I/Os only");
    fe_engine_rule_stats(fe, 0, &st);
    EQ_U64(st.matched, 3, "matched counter");
    EQ_U64(st.hits, 1, "hits counter");
    fe_engine_free(fe);

    {
        int n1 = 0, nh = 0;
        fe = engine("p1: write prob=1 drop\n"
                    "ph: write lba=0 prob=0.5 error=eio");
        for (int i = 0; i < 10000; i++) {
            wr(fe, 0, 1, &d);
            n1 += d.drop;
            nh += d.fired == 2;
        }
        EQ_U64(n1, 10000, "prob=1 always fires");
        /* Binomial sd is 50: +-300 is 6 sd. */
        OK(nh > 4700 && nh < 5300, "prob=0.5 fires about half (%d/10000)",
           nh);
        fe_engine_free(fe);
    }
    {
        int n = 0;
        fe = engine("write prob=0.05 drop");
        for (int i = 0; i < 100000; i++) {
            n += wr(fe, 0, 1, &d);
        }
        OK(n > 4400 && n < 5600, "prob=0.05 about 5%% (%d/100000)", n);
        fe_engine_free(fe);
    }
}

static void test_state(void)
{
    FeEngine *fe = engine("arm: write nth=2 set-state=2\n"
                          "w2: write state=2 error=eio");
    FeDecision d;
    FeRuleStats st;

    EQ_U64(fe_engine_state(fe), 0, "initial state 0");
    OK(!wr(fe, 0, 1, &d), "I/O 1: nothing");
    OK(wr(fe, 0, 1, &d) && d.error == FE_ERR_NONE && d.fired == 1,
       "I/O 2: arm fires, w2 does not see the new state yet");
    EQ_U64(fe_engine_state(fe), 2, "state set after the decision");
    fe_engine_rule_stats(fe, 1, &st);
    EQ_U64(st.matched, 0, "w2 did not match while state was 0");
    OK(wr(fe, 0, 1, &d) && d.error == FE_ERR_EIO, "I/O 3: w2 fires");
    fe_engine_set_state(fe, 3);
    OK(!wr(fe, 0, 1, &d), "state 3: w2 does not match");
    fe_engine_set_state(fe, 2);
    OK(wr(fe, 0, 1, &d), "state 2 again: w2 matches");
    fe_engine_free(fe);

    fe = engine("a: write set-state=7\nb: write set-state=3\n"
                "c: write set-state=5");
    wr(fe, 0, 1, &d);
    EQ_U64(fe_engine_state(fe), 7, "largest set-state wins");
    fe_engine_free(fe);
    fe = engine("a: write set-state=0\nb: write state=4 delay=1ns");
    fe_engine_set_state(fe, 4);
    OK(wr(fe, 0, 1, &d) && d.fired == 2 && fe_engine_state(fe) == 0,
       "set-state=0 applies (largest of one value)");
    fe_engine_free(fe);
}

static void test_merge(void)
{
    FeEngine *fe = engine("a: write delay=10us\n"
                          "b: write delay=5us error=eio dnr\n"
                          "c: write error=write-fault when=after "
                          "complete=task\n"
                          "d: write complete=irq irq-delay=3us\n"
                          "e: write irq-delay=7us\n");
    FeDecision d;

    memset(&d, 0xff, sizeof(d));
    OK(wr(fe, 0, 1, &d), "merge: fired");
    EQ_U64(d.fired, 5, "merge: 5 rules fired");
    EQ_U64(d.delay_ns, 15000, "merge: delays add");
    EQ_U64(d.error, FE_ERR_WRITE_FAULT, "merge: most severe error");
    OK(d.dnr && !d.drop, "merge: dnr OR-ed, no drop");
    EQ_U64(d.when, FE_WHEN_AFTER, "merge: when=after wins");
    EQ_U64(d.complete, FE_COMPLETE_TASK, "merge: larger complete wins");
    EQ_U64(d.irq, FE_IRQ_DELAY, "merge: irq delay");
    EQ_U64(d.irq_delay_ns, 7000, "merge: irq delay max");
    fe_engine_free(fe);

    fe = engine("a: write error=internal dnr\nb: write drop");
    wr(fe, 0, 1, &d);
    OK(d.drop && d.error == FE_ERR_NONE, "drop beats error");
    fe_engine_free(fe);

    fe = engine("a: write error=timeout\nb: write error=eio");
    wr(fe, 0, 1, &d);
    OK(d.drop && d.error == FE_ERR_TIMEOUT, "error=timeout implies drop");
    fe_engine_free(fe);

    fe = engine("a: write irq-delay=5us\nb: write irq=suppress");
    wr(fe, 0, 1, &d);
    OK(d.irq == FE_IRQ_SUPPRESS && d.irq_delay_ns == 0,
       "irq=suppress beats irq-delay");
    fe_engine_free(fe);

    fe = engine("a: write complete=thread\nb: write complete=irq");
    wr(fe, 0, 1, &d);
    EQ_U64(d.complete, FE_COMPLETE_THREAD, "complete=thread beats irq");
    fe_engine_free(fe);

    fe = engine("a: write delay=1us");
    memset(&d, 0xff, sizeof(d));
    OK(!fe_engine_decide(fe, FE_OP_READ, 0, 1, 0, &d) && d.delay_ns == 0 &&
       d.fired == 0 && !d.drop && !d.dnr && d.error == FE_ERR_NONE &&
       d.irq_delay_ns == 0, "no fire: decision zeroed");
    fe_engine_free(fe);

    /* Random delays. */
    {
        bool in = true, varied = false;
        uint64_t first = 0, sum = 0;
        fe = engine("u: write delay=uniform(50us,2ms)\n");
        for (int i = 0; i < 2000; i++) {
            wr(fe, 0, 1, &d);
            in &= d.delay_ns >= 50000 && d.delay_ns <= 2000000;
            if (i == 0) {
                first = d.delay_ns;
            }
            varied |= d.delay_ns != first;
        }
        OK(in && varied, "uniform delays within [50us,2ms] and varied");
        fe_engine_free(fe);
        fe = engine("u: write delay=uniform(7ns,7ns)\n");
        wr(fe, 0, 1, &d);
        EQ_U64(d.delay_ns, 7, "uniform(a,a) is a");
        fe_engine_free(fe);
        fe = engine("e: write delay=exp(100us)\n");
        for (int i = 0; i < 50000; i++) {
            wr(fe, 0, 1, &d);
            sum += d.delay_ns;
        }
        /* sd of the mean is 100us/sqrt(50000) = 0.45us. */
        OK(sum / 50000 > 97000 && sum / 50000 < 103000,
           "exp(100us) mean %" PRIu64 "ns", sum / 50000);
        fe_engine_free(fe);
        fe = engine("e: write delay=exp(0ns)\n");
        wr(fe, 0, 1, &d);
        EQ_U64(d.delay_ns, 0, "exp(0) is 0");
        fe_engine_free(fe);
        fe = engine("a: write delay=1000000s\n"
                    "b: write delay=1ns\n");
        wr(fe, 0, 1, &d);
        EQ_U64(d.delay_ns, FE_DELAY_MAX_NS, "delay sum capped at 1000000s");
        fe_engine_free(fe);
    }
}

/* Offsets of @d are distinct, ascending and below @bytes. */
static bool offsets_sane(const FeDecision *d, uint64_t bytes)
{
    for (uint32_t i = 0; i < d->ncorrupt; i++) {
        if (d->corrupt[i] >= bytes ||
            (i && d->corrupt[i - 1] >= d->corrupt[i])) {
            return false;
        }
    }
    return true;
}

/* "at=a,b,c" of @d, as the log writes it. */
static const char *at_list(const FeDecision *d)
{
    static char buf[FE_CORRUPT_MAX * 21 + 4];
    size_t pos = (size_t)snprintf(buf, sizeof(buf), "at=");

    for (uint32_t i = 0; i < d->ncorrupt; i++) {
        pos += (size_t)snprintf(buf + pos, sizeof(buf) - pos, "%s%" PRIu64,
                                i ? "," : "", d->corrupt[i]);
    }
    return buf;
}

static bool same_offsets(const FeDecision *a, const FeDecision *b)
{
    return a->ncorrupt == b->ncorrupt &&
           !memcmp(a->corrupt, b->corrupt, a->ncorrupt * sizeof(a->corrupt[0]));
}

static void test_lie(void)
{
    FeEngine *fe = engine("l: write after=2 count=2 lie");
    FeDecision d;
    FeLogEntry e;

    for (int i = 1; i <= 5; i++) {
        bool f = wr(fe, 0, 8, &d);
        OK(f == (i == 3 || i == 4) && d.lie == f && d.error == FE_ERR_NONE &&
           !d.drop && d.ncorrupt == 0, "lie after=2 count=2: write %d %s", i,
           f ? "lies" : "passes");
    }
    fe_engine_log_get(fe, 0, &e);
    OK(e.ordinal == 3 && !strcmp(e.action, "lie"), "lie is logged as 'lie'");
    fe_engine_free(fe);

    fe = engine("l: read lie");
    OK(fe_engine_decide(fe, FE_OP_READ, 0, 8, 0, &d) && d.lie,
       "read lie decided");
    OK(!fe_engine_decide(fe, FE_OP_WRITE, 0, 8, 0, &d) && !d.lie,
       "read lie leaves writes alone");
    fe_engine_free(fe);

    fe = engine("a: write corrupt=4\nb: write lie");
    wr(fe, 0, 8, &d);
    OK(d.lie && d.ncorrupt == 0 && d.fired == 2,
       "lie beats corrupt: no bytes to flip");
    fe_engine_free(fe);
    fe = engine("a: write lie\nb: write error=eio when=after");
    wr(fe, 0, 8, &d);
    OK(d.lie && d.error == FE_ERR_EIO && d.when == FE_WHEN_AFTER,
       "lie with an error: both reach the device (no transfer, error status)");
    fe_engine_free(fe);
}

static void test_controller_actions(void)
{
    FeEngine *fe;
    FeDecision d;
    FeLogEntry e;
    const char *action = NULL;
    char err[FE_ERR_MSG_MAX] = "";
    uint64_t digest1;

    canon("write nth=3 fatal", "write nth=3 fatal");
    canon("any reset-fail=0x2 fatal delay=1us",
          "any delay=1us fatal reset-fail=2");
    err_is("write fatal=1", "1:7: 'fatal' takes no value");
    err_is("write reset-fail", "1:7: 'reset-fail' needs a value "
           "('reset-fail=...')");
    err_is("write reset-fail=0",
           "1:7: reset-fail=0 out of range (expected 1 to 255 enables)");
    err_is("write reset-fail=256",
           "1:7: reset-fail=256 out of range (expected 1 to 255 enables)");
    err_is("write fatal fatal",
           "1:13: duplicate key 'fatal' (already given at column 7)");

    fe = engine("f: write nth=2 fatal\nr: write nth=2 reset-fail=3\n"
                "s: write nth=2 reset-fail=1");
    OK(!wr(fe, 0, 8, &d) && !d.fatal && !d.reset_fail,
       "fatal/reset-fail: write 1 passes");
    OK(wr(fe, 0, 8, &d) && d.fatal && d.reset_fail == 3 && d.fired == 3 &&
       d.error == FE_ERR_NONE && !d.drop,
       "fatal is OR-ed, reset-fail merges to the largest");
    for (uint64_t i = 0; i < fe_engine_log_total(fe); i++) {
        fe_engine_log_get(fe, i, &e);
        if (!strcmp(e.rule, "f")) {
            EQ_STR(e.action, "fatal", "fatal is logged as 'fatal'");
        } else if (!strcmp(e.rule, "r")) {
            EQ_STR(e.action, "reset-fail=3",
                   "reset-fail is logged with its count");
        }
    }
    OK(fe_engine_log_total(fe) == 3, "one log entry per fired rule");
    digest1 = fe_engine_digest(fe);
    fe_engine_free(fe);
    fe = engine("f: write nth=2 fatal\nr: write nth=2 reset-fail=2\n"
                "s: write nth=2 reset-fail=1");
    wr(fe, 0, 8, &d);
    wr(fe, 0, 8, &d);
    OK(fe_engine_digest(fe) != digest1, "reset-fail's count is in the digest");

    /* A device that cannot honour them refuses them. */
    OK(fe_engine_find_action(fe, FE_ACTION_FATAL, &action) == 0 &&
       !strcmp(action, "fatal"), "find_action finds the fatal rule");
    OK(fe_engine_find_action(fe, FE_ACTION_RESET_FAIL, &action) == 1 &&
       !strcmp(action, "reset-fail"), "find_action finds reset-fail");
    fe_engine_refuse_actions(fe, FE_ACTION_FATAL | FE_ACTION_RESET_FAIL,
                             "syncblk-pci (NVMe only)");
    OK(fe_engine_add_rules(fe, "ok: write drop\nx: read delay=1us "
                           "reset-fail=1 fatal", err, sizeof(err)) == -1 &&
       fe_engine_rule_count(fe) == 3, "refused action: nothing added");
    EQ_STR(err, "2:19: 'reset-fail' is not supported by syncblk-pci "
           "(NVMe only)", "refusal names the line, column and device");
    fe_engine_refuse_actions(fe, FE_ACTION_RESET_FAIL, "fault-inject");
    OK(fe_engine_add_rules(fe, "x: read reset-fail=1 fatal", err,
                           sizeof(err)) == -1, "refused by two");
    EQ_STR(err, "1:9: 'reset-fail' is not supported by fault-inject",
           "each action names its own refuser");
    OK(fe_engine_add_rules(fe, "x: read fatal reset-fail=1", err,
                           sizeof(err)) == -1, "refused by two, fatal first");
    EQ_STR(err, "1:9: 'fatal' is not supported by syncblk-pci (NVMe only)",
           "the action given first is named with its refuser");
    fe_engine_refuse_actions(fe, FE_ACTION_RESET_FAIL, NULL);
    OK(fe_engine_add_rules(fe, "x: read reset-fail=1", err, sizeof(err)) == 1,
       "reset-fail's refusal lifted alone");
    OK(fe_engine_add_rules(fe, "y: read fatal", err, sizeof(err)) == -1,
       "fatal's refusal stays");
    fe_engine_refuse_actions(fe, FE_ACTION_FATAL, NULL);
    OK(fe_engine_add_rules(fe, "y: read fatal", err, sizeof(err)) == 1,
       "refusal lifted: fatal is accepted again");
    fe_engine_free(fe);
    fe = engine("write drop");
    OK(fe_engine_find_action(fe, FE_ACTION_FATAL | FE_ACTION_RESET_FAIL,
                             NULL) == -1, "find_action: no such rule");
    fe_engine_free(fe);
}

static void test_corrupt(void)
{
    FeEngine *fe, *fe2;
    FeDecision d, d2;
    FeLogEntry e;
    char want[FE_ACTION_MAX];
    bool sane = true, full = true, same = true, varied = false;
    uint64_t first = 0;

    /* N distinct offsets inside the I/O, logged as they are. */
    fe = engine("c: write corrupt=3");
    wr(fe, 100, 8, &d);
    EQ_U64(d.ncorrupt, 3, "corrupt=3: three offsets");
    OK(offsets_sane(&d, 8 * 512), "offsets distinct, ascending, in the I/O");
    fe_engine_log_get(fe, 0, &e);
    snprintf(want, sizeof(want), "corrupt=3 %s", at_list(&d));
    EQ_STR(e.action, want, "log names the corrupt offsets");
    fe_engine_free(fe);

    fe = engine("c: read corrupt");
    fe_engine_decide(fe, FE_OP_READ, 0, 1, 0, &d);
    EQ_U64(d.ncorrupt, 1, "corrupt: default 1 byte");
    fe_engine_free(fe);

    /* 16 bytes of a 512-byte I/O, 2000 times: draws collide, never twice. */
    fe = engine("c: write corrupt=16");
    for (int i = 0; i < 2000; i++) {
        wr(fe, 0, 1, &d);
        sane &= offsets_sane(&d, 512);
        full &= d.ncorrupt == 16;
        if (i == 0) {
            first = d.corrupt[0];
        }
        varied |= d.corrupt[0] != first;
    }
    OK(sane && full, "corrupt=16 in 512 bytes: always 16 distinct offsets");
    OK(varied, "offsets vary with the ordinal");
    fe_engine_free(fe);

    /* Seeded: same seed same bytes, other seed other bytes. */
    fe = engine("c: write corrupt=4");
    fe2 = engine("c: write corrupt=4");
    for (int i = 0; i < 100; i++) {
        wr(fe, 0, 64, &d);
        wr(fe2, 0, 64, &d2);
        same &= d.ncorrupt == 4 && same_offsets(&d, &d2);
    }
    OK(same && fe_engine_digest(fe) == fe_engine_digest(fe2),
       "same seed: same offsets and digest");
    fe_engine_free(fe2);
    fe2 = fe_engine_new(43);
    fe_engine_add_rules(fe2, "c: write corrupt=4", NULL, 0);
    fe_engine_reset(fe);
    same = true;
    for (int i = 0; i < 100; i++) {
        wr(fe, 0, 64, &d);
        wr(fe2, 0, 64, &d2);
        same &= same_offsets(&d, &d2);
    }
    OK(!same && fe_engine_digest(fe) != fe_engine_digest(fe2),
       "other seed: other offsets and digest");
    fe_engine_free(fe);
    fe_engine_free(fe2);

    /* The offsets are in the digest, not only the action's name. */
    fe = engine("c: write corrupt=2");
    fe2 = engine("c: write corrupt=2");
    wr(fe, 0, 8, &d);
    wr(fe2, 0, 16, &d2);
    OK(!same_offsets(&d, &d2) && fe_engine_digest(fe) != fe_engine_digest(fe2),
       "other I/O length: other offsets, other digest");
    fe_engine_free(fe);
    fe_engine_free(fe2);

    /* corrupt under 'any': only reads and writes have data. */
    fe = engine("c: any corrupt=2");
    fe_engine_decide(fe, FE_OP_FLUSH, 0, 0, 0, &d);
    fe_engine_decide(fe, FE_OP_DISCARD, 0, 8, 0, &d2);
    OK(d.fired == 1 && d.ncorrupt == 0 && d2.ncorrupt == 0,
       "any corrupt: nothing to flip in a flush or discard");
    fe_engine_log_get(fe, 0, &e);
    EQ_STR(e.action, "corrupt=2", "no data: logged without offsets");
    fe_engine_decide(fe, FE_OP_READ, 0, 1, 0, &d);
    EQ_U64(d.ncorrupt, 2, "any corrupt: a read gets its bytes");
    fe_engine_decide(fe, FE_OP_WRITE, 0, 0, 0, &d);
    EQ_U64(d.ncorrupt, 0, "zero-length write: nothing to flip");
    fe_engine_free(fe);
}

static void test_corrupt_merge_apply(void)
{
    unsigned char buf[4096], orig[4096];
    FeEngine *fe = engine("a: write corrupt=5\nb: write corrupt=7");
    FeEngine *fa = engine("a: write corrupt=5");
    FeEngine *fb = engine("b: write corrupt=7");
    FeDecision d, da, db;
    uint32_t flipped = 0, diff = 0;
    bool all = true, at = true, same = true;

    /* Union of the rules' offsets, capped. */
    wr(fe, 0, 8, &d);
    wr(fa, 0, 8, &da);
    wr(fb, 0, 8, &db);
    for (uint32_t i = 0; i < da.ncorrupt; i++) {
        all &= fe_decision_corrupt(&d, da.corrupt[i], buf, 1) == 1;
    }
    for (uint32_t i = 0; i < db.ncorrupt; i++) {
        all &= fe_decision_corrupt(&d, db.corrupt[i], buf, 1) == 1;
    }
    OK(all && d.ncorrupt <= 12 && d.ncorrupt >= 7 && offsets_sane(&d, 4096),
       "two corrupt rules: the union of their offsets (%" PRIu32 ")",
       d.ncorrupt);
    fe_engine_free(fe);
    fe_engine_free(fa);
    fe_engine_free(fb);
    fe = engine("a: write corrupt=16\nb: write corrupt=16\n");
    wr(fe, 0, 8, &d);
    OK(d.ncorrupt == FE_CORRUPT_MAX && offsets_sane(&d, 4096),
       "union capped at %d bytes", FE_CORRUPT_MAX);
    fe_engine_free(fe);

    /* Applying: each byte flipped once, whatever the pieces. */
    fe = engine("c: read corrupt=16");
    fe_engine_decide(fe, FE_OP_READ, 0, 8, 0, &d);
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = orig[i] = (unsigned char)(i * 7);
    }
    /* Pieces of 1000, 1000, 96, 2000 bytes, like an iovec. */
    flipped += fe_decision_corrupt(&d, 0, buf, 1000);
    flipped += fe_decision_corrupt(&d, 1000, buf + 1000, 1000);
    flipped += fe_decision_corrupt(&d, 2000, buf + 2000, 96);
    flipped += fe_decision_corrupt(&d, 2096, buf + 2096, 2000);
    for (size_t i = 0; i < sizeof(buf); i++) {
        diff += buf[i] != orig[i];
    }
    for (uint32_t i = 0; i < d.ncorrupt; i++) {
        at &= buf[d.corrupt[i]] == (orig[d.corrupt[i]] ^ 0xff);
    }
    OK(flipped == 16 && diff == 16 && at,
       "16 bytes flipped across 4 pieces, at the offsets (%" PRIu32 " %"
       PRIu32 ")", flipped, diff);
    OK(fe_decision_corrupt(&d, 4096, buf, 512) == 0,
       "a piece past the offsets flips nothing");
    fe_engine_free(fe);

    /* Rule order does not matter, lie and corrupt included. */
    fe = engine("a: write prob=0.3 corrupt=3\nb: write prob=0.2 lie\n"
                "c: read every=3 corrupt=2\n");
    fa = engine("c: read every=3 corrupt=2\nb: write prob=0.2 lie\n"
                "a: write prob=0.3 corrupt=3\n");
    for (int i = 0; i < 3000; i++) {
        FeOp op = i % 2 ? FE_OP_READ : FE_OP_WRITE;
        fe_engine_decide(fe, op, (uint64_t)i, 8, 0, &d);
        fe_engine_decide(fa, op, (uint64_t)i, 8, 0, &da);
        same &= d.lie == da.lie && same_offsets(&d, &da);
    }
    OK(same && fe_engine_digest(fe) == fe_engine_digest(fa) &&
       fe_engine_log_total(fe) > 1000,
       "lie/corrupt: rule order changes neither decisions nor digest");
    fe_engine_free(fe);
    fe_engine_free(fa);
}

static void test_delete_clear_reset(void)
{
    FeEngine *fe = engine("a: write drop\nb: read drop\nc: write lba=5 "
                          "error=eio");
    FeDecision d;
    FeRuleStats st;
    FeLogEntry e;
    uint64_t basis;

    {
        FeEngine *fresh = fe_engine_new(5);
        basis = fe_engine_digest(fresh);
        EQ_U64(basis, 0xcbf29ce484222325ULL, "fresh digest is FNV basis");
        EQ_U64(fe_engine_seed(fresh), 5, "seed reported");
        fe_engine_free(fresh);
    }
    EQ_U64(fe_engine_delete_rule(fe, "zz"), (uint64_t)-1,
           "delete missing rule");
    EQ_U64(fe_engine_delete_rule(fe, "a"), 0, "delete a");
    EQ_U64(fe_engine_rule_count(fe), 2, "two left");
    EQ_STR(name_of(fe, 0), "b", "order kept after delete");
    OK(!wr(fe, 0, 1, &d), "deleted rule no longer fires");
    OK(wr(fe, 5, 1, &d) && d.error == FE_ERR_EIO, "remaining lba rule fires");
    fe_engine_set_state(fe, 9);
    fe_engine_reset(fe);
    fe_engine_rule_stats(fe, 1, &st);
    OK(st.matched == 0 && st.hits == 0, "reset zeroes counters");
    OK(fe_engine_log_total(fe) == 0 && fe_engine_digest(fe) == basis,
       "reset empties log and digest");
    EQ_U64(fe_engine_state(fe), 0, "reset returns state to 0");
    wr(fe, 5, 1, &d);
    OK(fe_engine_log_get(fe, 0, &e) == 0 && e.ordinal == 1,
       "ordinal restarts at 1 after reset");
    {
        /* A machine reset: counters restart, the log and digest go on. */
        uint64_t dg = fe_engine_digest(fe);
        fe_engine_set_state(fe, 4);
        fe_engine_reset_counters(fe);
        fe_engine_rule_stats(fe, 1, &st);
        OK(st.matched == 0 && st.hits == 0 && fe_engine_state(fe) == 4 &&
           fe_engine_log_total(fe) == 1 && fe_engine_digest(fe) == dg,
           "reset_counters zeroes counters, keeps log, digest and state");
        OK(wr(fe, 5, 1, &d) && fe_engine_log_get(fe, 1, &e) == 0 &&
           e.seq == 1 && e.ordinal == 1 && fe_engine_digest(fe) != dg,
           "after reset_counters: ordinal 1, log seq 1, digest goes on");
        fe_engine_set_state(fe, 0);
    }
    fe_engine_clear_rules(fe);
    EQ_U64(fe_engine_rule_count(fe), 0, "clear");
    OK(!wr(fe, 5, 1, &d) && !fe_engine_decide(fe, FE_OP_READ, 0, 1, 0, &d),
       "nothing fires after clear");
    OK(fe_engine_add_rules(fe, "a: write drop", NULL, 0) == 1 &&
       wr(fe, 0, 1, &d), "rules can be added after clear (name reusable)");
    fe_engine_free(fe);
    fe_engine_free(NULL);
}

static void test_log(void)
{
    FeEngine *fe = engine("wfail: write nth=2 error=write-fault dnr\n"
                          "slow: write delay=200us\n"
                          "lost: write lba=100 drop\n"
                          "arm: read set-state=2 complete=irq\n");
    FeDecision d;
    FeLogEntry e;
    char buf[512];
    bool ok_all = true;

    fe_engine_decide(fe, FE_OP_WRITE, 7, 8, 1000, &d);
    fe_engine_decide(fe, FE_OP_WRITE, 100, 8, 2000, &d);
    fe_engine_decide(fe, FE_OP_READ, 3, 1, 3000, &d);
    EQ_U64(fe_engine_log_total(fe), 5, "one entry per fired rule");
    fe_engine_log_get(fe, 0, &e);
    OK(e.seq == 0 && e.ordinal == 1 && e.vns == 1000 && e.op == FE_OP_WRITE &&
       e.lba == 7 && e.len == 8 && !strcmp(e.rule, "slow") &&
       !strcmp(e.action, "delay=200000ns"), "entry 0: slow delay");
    {
        /* Entries of one decision are in rule-key order: check the set. */
        bool w = false, s = false, l = false;
        for (uint64_t q = 1; q <= 3; q++) {
            fe_engine_log_get(fe, q, &e);
            ok_all &= e.ordinal == 2 && e.vns == 2000;
            w |= !strcmp(e.rule, "wfail") &&
                 !strcmp(e.action, "error=write-fault dnr");
            s |= !strcmp(e.rule, "slow") && !strcmp(e.action, "delay=200000ns");
            l |= !strcmp(e.rule, "lost") && !strcmp(e.action, "drop");
        }
        OK(ok_all && w && s && l, "entries 1-3: ordinal 2, three rules");
    }
    fe_engine_log_get(fe, 4, &e);
    OK(e.op == FE_OP_READ && !strcmp(e.rule, "arm") &&
       !strcmp(e.action, "set-state=2 complete=irq"),
       "entry 4: set-state and complete");
    OK(fe_engine_log_get(fe, 5, &e) == -1, "entry 5 does not exist");
    fe_engine_free(fe);

    fe = engine("a: write error=eio when=after irq=suppress\n"
                "b: write irq-delay=uniform(1us,1us) error=timeout\n");
    wr(fe, 0, 1, &d);
    fe_engine_log_get(fe, 0, &e);
    {
        FeLogEntry e2;
        fe_engine_log_get(fe, 1, &e2);
        const FeLogEntry *ea = !strcmp(e.rule, "a") ? &e : &e2;
        const FeLogEntry *eb = ea == &e ? &e2 : &e;
        EQ_STR(ea->action, "error=eio when=after irq=suppress", "action a");
        EQ_STR(eb->action, "error=timeout irq-delay=1000ns", "action b");
    }
    fe_engine_free(fe);

    /* Ring wraparound. */
    fe = engine("write drop");
    for (int i = 0; i < 5000; i++) {
        wr(fe, (uint64_t)i, 1, &d);
    }
    EQ_U64(fe_engine_log_total(fe), 5000, "log total 5000");
    EQ_U64(fe_engine_log_first(fe), 5000 - 4096, "oldest held");
    OK(fe_engine_log_get(fe, 903, &e) == -1, "seq 903 left the ring");
    OK(fe_engine_log_get(fe, 904, &e) == 0 && e.seq == 904 && e.lba == 904 &&
       e.ordinal == 905, "seq 904 held");
    OK(fe_engine_log_get(fe, 4999, &e) == 0 && e.seq == 4999,
       "newest held");
    OK(fe_engine_log_get(fe, 5000, &e) == -1, "seq 5000 not yet");
    OK(fe_engine_log_get(fe, UINT64_MAX, &e) == -1, "seq 2^64-1");
    {
        FILE *f = tmpfile();
        int n = fe_engine_log_write_jsonl(fe, 0, f);
        int n2 = fe_engine_log_write_jsonl(fe, 4990, f);
        int n3 = fe_engine_log_write_jsonl(fe, 6000, f);
        long lines = 0;
        int c;
        rewind(f);
        while ((c = fgetc(f)) != EOF) {
            lines += c == '\n';
        }
        fclose(f);
        OK(n == 4096 && n2 == 10 && n3 == 0 && lines == 4106,
           "jsonl export counts (%d %d %d %ld)", n, n2, n3, lines);
    }
    fe_engine_log_get(fe, 4999, &e);
    fe_log_entry_json(&e, buf, sizeof(buf));
    EQ_STR(buf, "{\"seq\":4999,\"ordinal\":5000,\"vns\":0,\"op\":\"write\","
           "\"lba\":4999,\"len\":1,\"rule\":\"r0\",\"nth\":5000,"
           "\"action\":\"drop\"}",
           "JSON of an entry");
    fe_engine_free(fe);

    /* JSON escaping. */
    memset(&e, 0, sizeof(e));
    e.seq = 1;
    e.ordinal = 2;
    e.vns = 3;
    e.lba = 4;
    e.len = 5;
    e.nth = 6;
    e.op = FE_OP_FLUSH;
    snprintf(e.rule, sizeof(e.rule), "q\"b\\s/\x01");
    snprintf(e.action, sizeof(e.action), "a\nb\tc\rd\x1f\x7f");
    {
        const char *want = "{\"seq\":1,\"ordinal\":2,\"vns\":3,"
            "\"op\":\"flush\","
            "\"lba\":4,\"len\":5,\"rule\":\"q\\\"b\\\\s/\\u0001\","
            "\"nth\":6,\"action\":\"a\\nb\\tc\\rd\\u001f\\u007f\"}";
        int n = fe_log_entry_json(&e, buf, sizeof(buf));
        EQ_STR(buf, want, "JSON escaping");
        EQ_U64(n, strlen(want), "JSON length");
        n = fe_log_entry_json(&e, buf, 10);
        OK(n == (int)strlen(want) && strlen(buf) == 9,
           "JSON truncates, returns full length");
        OK(fe_log_entry_json(&e, NULL, 0) == (int)strlen(want),
           "JSON length query with no buffer");
    }
    /* Unterminated fields stay bounded. */
    memset(e.rule, 'x', sizeof(e.rule));
    memset(e.action, 'y', sizeof(e.action));
    OK(fe_log_entry_json(&e, buf, sizeof(buf)) < (int)sizeof(buf),
       "unterminated names stay bounded");
}

static uint64_t xs(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Run @n random I/Os; returns a hash of every decision. */
static uint64_t stream(FeEngine *fe, int n)
{
    uint64_t s = 12345, h = 0xcbf29ce484222325ULL;
    FeDecision d;

    for (int i = 0; i < n; i++) {
        uint64_t x = xs(&s);
        FeOp op = (FeOp)(x % FE_OP__MAX);
        uint64_t lba = (x >> 8) % 300000;
        uint32_t len = (uint32_t)((x >> 40) % 64) + 1;
        uint64_t v[9];

        fe_engine_decide(fe, op, lba, len, (uint64_t)i * 1000, &d);
        v[0] = d.delay_ns;
        v[1] = d.error;
        v[2] = d.dnr;
        v[3] = d.drop;
        v[4] = d.when;
        v[5] = d.complete;
        v[6] = d.irq;
        v[7] = d.irq_delay_ns;
        v[8] = d.fired;
        for (int k = 0; k < 9; k++) {
            h = (h ^ v[k]) * 0x100000001b3ULL;
        }
    }
    return h;
}

static void test_determinism(void)
{
    static const char *const lines[] = {
        ("wfail: write lba=0-262143 after=1000 every=50 count=20 "
         "error=write-fault"),
        "slow: write prob=0.05 delay=exp(200us)",
        "lost: write lba=4096-8191 nth=3 drop",
        "phase2: any state=2 delay=uniform(50us,2ms)",
        "arm: write prob=0.001 set-state=2",
        "disarm: any state=2 prob=0.01 set-state=0",
        "rerr: read lba=1000-50000 prob=0.02 error=read-error dnr",
        "jit: any prob=0.3 delay=uniform(1us,9us) irq-delay=exp(3us)",
    };
    size_t n = sizeof(lines) / sizeof(lines[0]);
    char fwd[2048] = "", rev[2048] = "";
    char ufwd[2048] = "", urev[2048] = "";
    FeEngine *a, *b, *c, *ua, *ub;
    uint64_t ha, hb, hc, hu1, hu2;

    for (size_t i = 0; i < n; i++) {
        strcat(fwd, lines[i]);
        strcat(fwd, "\n");
        strcat(rev, lines[n - 1 - i]);
        strcat(rev, "\n");
        /* Unnamed variants: strip "name: ". */
        strcat(ufwd, strchr(lines[i], ':') + 2);
        strcat(ufwd, "\n");
        strcat(urev, strchr(lines[n - 1 - i], ':') + 2);
        strcat(urev, "\n");
    }
    a = fe_engine_new(7);
    b = fe_engine_new(7);
    c = fe_engine_new(8);
    fe_engine_add_rules(a, fwd, NULL, 0);
    fe_engine_add_rules(b, rev, NULL, 0);
    fe_engine_add_rules(c, fwd, NULL, 0);
    ha = stream(a, 100000);
    hb = stream(b, 100000);
    hc = stream(c, 100000);
    OK(ha == hb, "same seed, rules in reverse order: same decisions");
    OK(fe_engine_digest(a) == fe_engine_digest(b),
       "same seed, reverse order: same digest");
    OK(fe_engine_log_total(a) == fe_engine_log_total(b) &&
       fe_engine_log_total(a) > 10000, "same log length (%" PRIu64 ")",
       fe_engine_log_total(a));
    OK(ha != hc, "different seed: different decisions");
    OK(fe_engine_digest(a) != fe_engine_digest(c),
       "different seed: different digest");
    {
        uint64_t d1 = fe_engine_digest(a);
        fe_engine_reset(a);
        OK(stream(a, 100000) == ha && fe_engine_digest(a) == d1,
           "reset then replay: same decisions and digest");
    }
    ua = fe_engine_new(7);
    ub = fe_engine_new(7);
    fe_engine_add_rules(ua, ufwd, NULL, 0);
    fe_engine_add_rules(ub, urev, NULL, 0);
    hu1 = stream(ua, 100000);
    hu2 = stream(ub, 100000);
    OK(hu1 == hu2, "unnamed rules keyed by text: order-independent");
    OK(hu1 != ha, "keys differ from the named rules: other streams");
    fe_engine_free(a);
    fe_engine_free(b);
    fe_engine_free(c);
    fe_engine_free(ua);
    fe_engine_free(ub);

    /*
     * Pinned before lie and corrupt existed: rules without them keep their
     * decisions and their run's digest (repro of an older run.json).
     */
    a = fe_engine_new(7);
    fe_engine_add_rules(a, fwd, NULL, 0);
    stream(a, 100000);
    EQ_U64(fe_engine_digest(a), 0x9373f9f65b987e93ULL,
           "digest of the pinned run is unchanged");
    EQ_U64(fe_engine_log_total(a), 32896, "log length of the pinned run");
    fe_engine_free(a);
}

static void test_many_rules(void)
{
    FeEngine *fe = fe_engine_new(1);
    char err[FE_ERR_MSG_MAX];
    size_t sz = 4097 * 32;
    char *text = malloc(sz);
    size_t pos = 0;
    FeDecision d;

    for (int i = 0; i < 4097; i++) {
        pos += (size_t)snprintf(text + pos, sz - pos, "write lba=%d drop\n", i);
    }
    OK(fe_engine_add_rules(fe, text, err, sizeof(err)) == -1 &&
       fe_engine_rule_count(fe) == 0, "4097 rules rejected");
    EQ_STR(err, "4097:1: too many rules (max 4096)", "too many rules error");
    /* 4096 rules and then comments only: fine. */
    snprintf(text + pos - strlen("write lba=4096 drop\n"), 32, "# x\n\n");
    OK(fe_engine_add_rules(fe, text, err, sizeof(err)) == 4096,
       "4096 rules accepted");
    OK(wr(fe, 4095, 1, &d) && d.fired == 1 && !wr(fe, 4096, 1, &d),
       "last of 4096 rules matches");
    OK(wr(fe, 10, 100, &d) && d.fired == 100, "I/O over 100 rules fires 100");
    OK(fe_engine_add_rules(fe, "read drop", err, sizeof(err)) == -1,
       "engine full");
    free(text);
    fe_engine_free(fe);
}

/* Issue 12 defect 5: no delay a device adds to its clock can wrap int64. */
static void test_delay_bounds(void)
{
    FeEngine *fe;
    FeDecision d;
    uint64_t max = 0;
    int capped = 0;

    err_is("write delay=9223372036854775808ns",
           "1:7: duration '9223372036854775808ns' out of range (max "
           "1000000s)");
    err_is("write delay=1000000.000000001s",
           "1:7: duration '1000000.000000001s' out of range (max 1000000s)");
    err_is("write delay=uniform(1us,292y)",
           "1:7: bad duration '292y' (expected a unit: ns, us, ms, s)");
    err_is("write delay=uniform(1us,1000001s)",
           "1:7: duration '1000001s' out of range (max 1000000s)");
    err_is("write delay=exp(10000000s)",
           "1:7: duration '10000000s' out of range (max 1000000s)");
    err_is("x: write irq-delay=1000001s",
           "1:10: duration '1000001s' out of range (max 1000000s)");
    canon("write delay=1000000s irq-delay=uniform(0ns,1000000s)",
          "write delay=1000000s irq-delay=uniform(0ns,1000000s)");

    /* 64 maximal delays merge to the cap, far below INT64_MAX. */
    fe = fe_engine_new(3);
    for (int i = 0; i < 64; i++) {
        char line[64];
        snprintf(line, sizeof(line), "m%d: write delay=1000000s", i);
        fe_engine_add_rules(fe, line, NULL, 0);
    }
    OK(wr(fe, 0, 1, &d) && d.fired == 64 && d.delay_ns == FE_DELAY_MAX_NS,
       "64 merged 1000000s delays are capped at 1000000s");
    fe_engine_free(fe);

    /* exp() tails beyond the cap are capped, the rest keep their value. */
    fe = engine("e: write delay=exp(1000000s) irq-delay=exp(1000000s)");
    for (int i = 0; i < 20000; i++) {
        wr(fe, 0, 1, &d);
        max = d.delay_ns > max ? d.delay_ns : max;
        max = d.irq_delay_ns > max ? d.irq_delay_ns : max;
        capped += d.delay_ns == FE_DELAY_MAX_NS;
    }
    /* P(draw > mean) = 1/e: about 7358 of 20000. */
    OK(max == FE_DELAY_MAX_NS && capped > 7000 && capped < 7700,
       "exp(1000000s) draws capped at 1000000s (%d capped)", capped);
    fe_engine_free(fe);
}

/* Issue 12 defect 9: nothing a rule says is cut short. */
static void test_no_truncation(void)
{
    static const char longest[] =
        "write-zeroes lba=18446744073709551614-18446744073709551615 "
        "len=4294967294-4294967295 sq=65534-65535 "
        "cpu=4294967294-4294967295 state=4294967295 "
        "nth=18446744073709551615 after=18446744073709551614 "
        "every=18446744073709551615 count=18446744073709551615 "
        "prob=0.123456789012345678 "
        "delay=uniform(999999999999999ns,999999999999999ns) "
        "error=write-fault when=before dnr drop set-state=4294967295 "
        "complete=thread irq-delay=uniform(999999999999999ns,"
        "999999999999999ns)";
    static const char action[] =
        "delay=1000000000000000ns error=write-fault when=before dnr drop "
        "set-state=4294967295 complete=thread irq-delay=1000000000000000ns";
    FeEngine *fe = engine(longest), *fe2;
    char err[FE_ERR_MSG_MAX];
    FeRuleStats st;
    FeLogEntry e;
    FeDecision d;

    fe_engine_rule_stats(fe, 0, &st);
    OK(strlen(longest) > 400 && strlen(longest) < FE_TEXT_MAX,
       "longest canonical rule is %zu bytes", strlen(longest));
    EQ_STR(st.text, longest, "stats hold the whole canonical text");
    OK(fe_engine_check_rules(st.text, err, sizeof(err)) == 1,
       "the whole text parses back");
    fe_engine_free(fe);

    fe = engine("a: write delay=1000000s error=write-fault when=before dnr "
                "drop set-state=4294967295 complete=thread "
                "irq-delay=1000000s");
    wr(fe, 0, 1, &d);
    fe_engine_log_get(fe, 0, &e);
    OK(strlen(action) > 96, "longest action is %zu bytes", strlen(action));
    EQ_STR(e.action, action, "log holds the whole action");
    /* Same rule name, I/O and action but the last digit: other digest. */
    fe2 = engine("a: write delay=1000000s error=write-fault when=before dnr "
                 "drop set-state=4294967295 complete=thread "
                 "irq-delay=999999999999999ns");
    wr(fe2, 0, 1, &d);
    OK(fe_engine_digest(fe) != fe_engine_digest(fe2),
       "digest covers the action past byte 96");
    fe_engine_free(fe);
    fe_engine_free(fe2);

    /* The longest rule and action with corrupt: 16 offsets of 13 digits. */
    {
        static const char longest_c[] =
            "write lba=18446744073709551614-18446744073709551615 "
            "len=4294967294-4294967295 state=4294967295 "
            "nth=18446744073709551615 after=18446744073709551614 "
            "every=18446744073709551615 count=18446744073709551615 "
            "prob=0.123456789012345678 "
            "delay=uniform(999999999999999ns,999999999999999ns) "
            "error=write-fault when=before dnr drop corrupt=16 "
            "set-state=4294967295 complete=thread "
            "irq-delay=uniform(999999999999999ns,999999999999999ns)";
        static const char tail[] = " irq-delay=1000000000000000ns";
        size_t digits = 0;

        fe = engine(longest_c);
        fe_engine_rule_stats(fe, 0, &st);
        EQ_STR(st.text, longest_c, "longest corrupt rule held whole");
        fe_engine_free(fe);
        fe = engine("a: write delay=1000000s error=write-fault when=before "
                    "dnr drop corrupt=16 set-state=4294967295 "
                    "complete=thread irq-delay=1000000s");
        /* Offsets below 2^41 with at least 12 digits: almost all of them. */
        wr(fe, 0, 4294967295u, &d);
        fe_engine_log_get(fe, 0, &e);
        for (const char *c = strstr(e.action, "at="); c && *c != ' '; c++) {
            digits += *c >= '0' && *c <= '9';
        }
        OK(d.ncorrupt == 16 && digits >= 16 * 12 &&
           strlen(e.action) + 1 < FE_ACTION_MAX &&
           !strcmp(e.action + strlen(e.action) - strlen(tail), tail),
           "log holds the whole action with 16 offsets (%zu bytes)",
           strlen(e.action));
        fe_engine_free(fe);
    }

    /* A NUL byte is an error where it is, not the end of the text. */
    {
        static const char bin[] = "write drop\nread\0 drop\nflush drop\n";
        char err2[FE_ERR_MSG_MAX];

        fe = engine(NULL);
        OK(fe_engine_add_rules_len(fe, bin, sizeof(bin) - 1, err,
                                   sizeof(err)) == -1 &&
           fe_engine_rule_count(fe) == 0, "NUL byte: nothing added");
        EQ_STR(err, "2:5: NUL byte in rule text (expected plain text, one "
               "rule per line)", "NUL byte error names LINE:COL");
        OK(fe_engine_check_rules_len(bin, sizeof(bin) - 1, err2,
                                     sizeof(err2)) == -1 &&
           !strcmp(err, err2), "check gives the same NUL error");
        OK(fe_engine_add_rules_len(fe, bin, 11, err, sizeof(err)) == 1,
           "length-bounded text before the NUL is fine");
        OK(fe_engine_add_rules_len(fe, "\0", 1, err, sizeof(err)) == -1 &&
           !strncmp(err, "1:1: NUL byte", 13), "lone NUL is 1:1");
        fe_engine_free(fe);
    }
}

/*
 * Issue 12 defect 10: naming unnamed rules is linear.  4096 rules whose
 * "rN" names all collide took minutes (O(n^3) strcmp); now milliseconds.
 */
static void test_naming_scales(void)
{
    size_t sz = 4096 * 24;
    char *text = malloc(sz);
    size_t pos = 0;
    FeEngine *fe = engine(NULL);
    char err[FE_ERR_MSG_MAX];
    bool names_ok = true;

    for (int i = 0; i < 2048; i++) {
        pos += (size_t)snprintf(text + pos, sz - pos, "r%d: write drop\n",
                                2048 + i);
    }
    for (int i = 0; i < 2048; i++) {
        pos += (size_t)snprintf(text + pos, sz - pos, "read drop\n");
    }
    OK(fe_engine_add_rules(fe, text, err, sizeof(err)) == 4096,
       "4096 rules with colliding rN names added");
    for (int i = 0; i < 2048; i++) {
        char want[16];
        snprintf(want, sizeof(want), "r%d", 4096 + i);
        names_ok &= !strcmp(name_of(fe, 2048 + i), want);
    }
    OK(names_ok, "unnamed rules got r4096..r6143");
    fe_engine_free(fe);
    free(text);
}

/*
 * Rules counted per group (no lba=, no len=) keep exact ordinals across
 * state changes, adds and deletes: compare with counting by hand.
 */
static void test_lazy_ordinals(void)
{
    FeEngine *fe = engine("s1: write state=1 every=3 count=2 drop\n"
                          "s0: write state=0 nth=4 delay=1ns\n"
                          "an: any after=5 every=2 delay=2ns\n"
                          "ln: write len=8 every=2 delay=4ns\n");
    uint64_t want_s1 = 0, want_s0 = 0, want_an = 0, want_ln = 0;
    uint64_t fires_s1 = 0;
    FeRuleStats st;
    FeDecision d;
    bool fired_ok = true;

    for (int i = 0; i < 300; i++) {
        FeOp op = (i % 3) ? FE_OP_WRITE : FE_OP_READ;
        uint32_t len = (i % 5) ? 8 : 1;
        uint32_t state = fe_engine_state(fe);
        bool f_s1 = false, f_s0 = false, f_an, f_ln = false;
        uint64_t want_delay = 0;

        if (i == 100) {
            fe_engine_delete_rule(fe, "ln");
        }
        if (i == 150) {
            fe_engine_add_rules(fe, "ln: write len=8 every=2 delay=4ns",
                                NULL, 0);
            want_ln = 0;
        }
        if (op == FE_OP_WRITE && state == 1) {
            want_s1++;
            f_s1 = want_s1 % 3 == 0 && fires_s1 < 2;
            fires_s1 += f_s1;
        }
        if (op == FE_OP_WRITE && state == 0) {
            f_s0 = ++want_s0 == 4;
        }
        want_an++;
        f_an = want_an > 5 && (want_an - 5) % 2 == 0;
        if (op == FE_OP_WRITE && len == 8 && (i < 100 || i >= 150)) {
            f_ln = ++want_ln % 2 == 0;
        }
        want_delay = (f_s0 ? 1 : 0) + (f_an ? 2 : 0) + (f_ln ? 4 : 0);
        fe_engine_decide(fe, op, 0, len, 0, &d);
        fired_ok &= d.drop == f_s1 && d.delay_ns == want_delay;
        if (i % 7 == 0) {
            fe_engine_set_state(fe, state ^ 1);
        }
    }
    OK(fired_ok, "fires where counting by hand says");
    fe_engine_rule_stats(fe, 0, &st);
    EQ_U64(st.matched, want_s1, "state=1 rule ordinal");
    EQ_U64(st.hits, 2, "count=2 used up");
    fe_engine_rule_stats(fe, 1, &st);
    EQ_U64(st.matched, want_s0, "state=0 rule ordinal");
    fe_engine_rule_stats(fe, 2, &st);
    EQ_U64(st.matched, want_an, "any rule ordinal");
    fe_engine_rule_stats(fe, 3, &st);
    EQ_U64(st.matched, want_ln, "len rule ordinal after delete and re-add");
    fe_engine_reset(fe);
    fe_engine_rule_stats(fe, 2, &st);
    OK(st.matched == 0 && st.hits == 0, "reset zeroes a grouped rule");
    OK(!wr(fe, 0, 8, &d) && fe_engine_rule_stats(fe, 2, &st) == 0 &&
       st.matched == 1, "grouped rule counts again from 1");
    fe_engine_free(fe);
}

/*
 * The log's nth is the firing rule's own ordinal: a rule that keeps the
 * original's match and adds nth=K (what `faultline minimize` pins) fires on
 * exactly the I/O the original fired on, with set-state rules kept.
 */
static void test_log_nth_pins(void)
{
    static const char *const arm = "arm: write lba=0-999 nth=30 set-state=1\n";
    static const struct { const char *name, *match; } m[] = {
        { "p", "write lba=100-499" }, { "s", "write state=1" }, { "g", "any" },
    };
    char rules[512], err[FE_ERR_MSG_MAX];
    FeEngine *a;
    FeLogEntry e, f;
    FeDecision d;
    uint64_t x, total, faults = 0, pinned_ok = 0;

    snprintf(rules, sizeof(rules), "%s%s", arm,
             "p: write lba=100-499 prob=0.2 error=eio\n"
             "s: write state=1 every=3 delay=uniform(1us,9us)\n"
             "g: any prob=0.05 drop\n");
    a = engine(rules);
    x = 7;
    for (int i = 0; i < 2000; i++) {
        FeOp op = xs(&x) % 3 ? FE_OP_WRITE : FE_OP_READ;
        fe_engine_decide(a, op, xs(&x) % 1000, 8, 0, &d);
    }
    total = fe_engine_log_total(a);
    for (uint64_t seq = 0; seq < total; seq++) {
        const char *match = NULL;
        FeEngine *b;
        int n = 0, same = 0;

        fe_engine_log_get(a, seq, &e);
        for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
            if (!strcmp(e.rule, m[k].name)) {
                match = m[k].match;
            }
        }
        if (!match) {
            continue;       /* the state rule: kept, not pinned */
        }
        faults++;
        snprintf(rules, sizeof(rules), "%spin: %s nth=%" PRIu64 " %s\n", arm,
                 match, e.nth, e.action);
        b = fe_engine_new(42);
        if (fe_engine_add_rules(b, rules, err, sizeof(err)) < 0) {
            printf("# pinned rule refused: %s\n", err);
            fe_engine_free(b);
            continue;
        }
        x = 7;
        for (int i = 0; i < 2000; i++) {
            FeOp op = xs(&x) % 3 ? FE_OP_WRITE : FE_OP_READ;
            fe_engine_decide(b, op, xs(&x) % 1000, 8, 0, &d);
        }
        for (uint64_t s2 = 0; s2 < fe_engine_log_total(b); s2++) {
            fe_engine_log_get(b, s2, &f);
            if (!strcmp(f.rule, "pin")) {
                n++;
                same += f.ordinal == e.ordinal && f.lba == e.lba &&
                        f.nth == e.nth && !strcmp(f.action, e.action);
            }
        }
        pinned_ok += n == 1 && same == 1;
        fe_engine_free(b);
    }
    OK(faults > 100 && pinned_ok == faults,
       "every fault pinned by match + nth fires on its I/O alone (%" PRIu64
       " of %" PRIu64 ")", pinned_ok, faults);
    fe_engine_free(a);
}

static const char *keys_fired(const char *rules, uint32_t have)
{
    return fired_keys(rules, 6, have, NULL);
}

static uint64_t keys_digest(const char *rules)
{
    uint64_t h;

    fired_keys(rules, 6, FE_KEY_SQ | FE_KEY_CPU, &h);
    return h;
}

static void test_sq_cpu(void)
{
    enum { both = FE_KEY_SQ | FE_KEY_CPU };
    /* Writes 1..6 come from SQ 1,2,3,1,2,3 on vCPU 0,1,0,1,0,1. */
    static const struct {
        const char *rule;
        uint32_t have;
        const char *want, *desc;
    } fires[] = {
        { "write sq=2 error=eio", both, "2,5",
          "sq=2 matches the writes on SQ 2 only" },
        { "write sq=2-3 error=eio", both, "2,3,5,6",
          "sq=2-3 matches SQ 2 and 3" },
        { "write cpu=1 error=eio", both, "2,4,6",
          "cpu=1 matches the writes from vCPU 1 only" },
        { "write sq=1 cpu=1 error=eio", both, "4", "sq=1 cpu=1 needs both" },
        { "write error=eio", both, "1,2,3,4,5,6",
          "a rule without sq=/cpu= matches every queue and vCPU" },
        { "write error=eio", 0, "1,2,3,4,5,6",
          "... and I/Os that carry no keys" },
        { "write sq=1 error=eio", FE_KEY_CPU, "",
          "sq= never matches an I/O without a queue id" },
        { "write cpu=0 error=eio", FE_KEY_SQ, "",
          "cpu= never matches an I/O without a vCPU" },
        { "write sq=2 nth=2 error=eio", both, "5",
          "the ordinal counts the matching queue's I/Os only" },
        { "write sq=3 lba=0-7 every=2 error=eio", both, "6",
          "sq= with lba= and every=" },
    };
    char err[FE_ERR_MSG_MAX] = "", json[512];
    const char *key = NULL;
    FeEngine *fe;
    FeLogEntry e;
    FeDecision d;

    canon("write cpu=1 sq=2 error=eio", "write sq=2 cpu=1 error=eio");
    canon("write sq=0x1-3 cpu=0-1 len=8 lba=0 drop",
          "write lba=0 len=8 sq=1-3 cpu=0-1 drop");
    canon("write sq=65535 cpu=4294967295 drop",
          "write sq=65535 cpu=4294967295 drop");
    err_is("write sq=3-1 drop", "1:7: sq range 3-1 is empty");
    err_is("write cpu=2-0 drop", "1:7: cpu range 2-0 is empty");
    err_is("write drop sq=65536",
           "1:12: number '65536' out of range (max 65535)");
    err_is("write cpu=4294967296 drop",
           "1:7: number '4294967296' out of range (max 4294967295)");
    err_is("write sq=x drop",
           "1:7: bad number 'x' (expected a decimal or 0x hex integer)");
    err_is("write sq= drop", "1:7: missing value after 'sq='");
    err_is("write cpu drop", "1:7: 'cpu' needs a value ('cpu=...')");
    err_is("write cpu=1 drop cpu=1",
           "1:18: duplicate key 'cpu' (already given at column 7)");
    err_is("write sq=1", "1:1: rule has no action (expected delay=, error=, "
           "dnr, drop, lie, corrupt, fatal, reset-fail=, set-state=, "
           "complete=, irq= or irq-delay=)");

    for (size_t i = 0; i < sizeof(fires) / sizeof(fires[0]); i++) {
        EQ_STR(keys_fired(fires[i].rule, fires[i].have), fires[i].want,
               fires[i].desc);
    }
    fe = engine("write sq=1 error=eio");
    OK(!fe_engine_decide(fe, FE_OP_WRITE, 0, 8, 0, &d),
       "fe_engine_decide() carries no keys: sq=1 does not match");
    fe_engine_free(fe);

    OK(keys_digest("write sq=1 error=eio") !=
       keys_digest("write sq=2 error=eio"),
       "the digest changes when sq= changes");
    OK(keys_digest("write cpu=0 error=eio") !=
       keys_digest("write cpu=1 error=eio"),
       "the digest changes when cpu= changes");
    OK(keys_digest("write sq=1 prob=0.5 error=eio") !=
       keys_digest("write sq=1-3 prob=0.5 error=eio") &&
       keys_digest("a: write sq=1 error=eio") ==
       keys_digest("a: write sq=1 error=eio"),
       "sq= is part of an unnamed rule's identity; a named rule's "
       "digest is reproducible");

    fe = engine("w: write sq=2 cpu=1 error=eio");
    fe_engine_decide_keys(fe, FE_OP_WRITE, 0, 8,
                          &(FeIoKeys){ .have = both, .sq = 2, .cpu = 1 }, 0,
                          &d);
    OK(fe_engine_log_get(fe, 0, &e) == 0 && e.keys.have == both &&
       e.keys.sq == 2 && e.keys.cpu == 1, "the log entry holds sq and cpu");
    fe_log_entry_json(&e, json, sizeof(json));
    OK(strstr(json, "\"len\":8,\"sq\":2,\"cpu\":1,\"rule\":\"w\"") != NULL,
       "JSON log line has \"sq\" and \"cpu\": %s", json);
    fe_engine_free(fe);
    fe = engine("w: write error=eio");
    wr(fe, 0, 8, &d);
    fe_engine_log_get(fe, 0, &e);
    fe_log_entry_json(&e, json, sizeof(json));
    OK(!strstr(json, "\"sq\"") && !strstr(json, "\"cpu\""),
       "an I/O without keys logs neither: %s", json);
    fe_engine_free(fe);

    /* An attach point refuses what it cannot supply. */
    fe = engine("a: write error=eio\nb: read cpu=0 drop");
    EQ_U64(fe_engine_keys_used(fe), FE_KEY_CPU, "keys_used sees cpu=");
    OK(fe_engine_find_key(fe, FE_KEY_SQ, &key) == -1,
       "find_key: no sq= rule");
    OK(fe_engine_find_key(fe, FE_KEY_SQ | FE_KEY_CPU, &key) == 1 &&
       !strcmp(key, "cpu"), "find_key finds the cpu= rule");
    fe_engine_refuse_keys(fe, FE_KEY_SQ, "x");
    err[0] = '\0';
    OK(fe_engine_add_rules(fe, "c: write delay=1us\nd: write sq=1 drop", err,
                           sizeof(err)) == -1 && fe_engine_rule_count(fe) == 2,
       "a refused key fails the add as a whole");
    EQ_STR(err, "2:10: 'sq' is not supplied by x", "refused key: LINE:COL");
    OK(fe_engine_add_rules(fe, "write cpu=1 drop", err, sizeof(err)) == 1,
       "keys not refused still add");
    fe_engine_refuse_keys(fe, FE_KEY_SQ, NULL);
    OK(fe_engine_add_rules(fe, "d: write sq=1 drop", err, sizeof(err)) == 1,
       "refusal lifted: sq= adds");
    OK(fe_engine_find_key(fe, FE_KEY_SQ, &key) == 3 && !strcmp(key, "sq"),
       "find_key finds the sq= rule");
    fe_engine_free(fe);
}

static uint64_t hits_of(FeEngine *fe, int i)
{
    FeRuleStats st;

    fe_engine_rule_stats(fe, i, &st);
    return st.hits;
}

/* A pure irq=suppress hit that suppressed nothing is taken back. */
static void test_void_hit(void)
{
    static const char *const rules[] = {
        "noirq: write count=1 irq=suppress",            /* lazy group */
        "noirq: write lba=0-7 count=1 irq=suppress",    /* candidate */
    };
    FeEngine *fe;
    FeDecision d;
    FeHitRef ref;

    for (int k = 0; k < 2; k++) {
        fe = engine(rules[k]);
        OK(wr(fe, 0, 8, &d) && d.nvoidable == 1 && d.voidable[0].rule == 0,
           "%s: a pure irq=suppress hit is voidable", rules[k]);
        ref = d.voidable[0];
        EQ_U64(hits_of(fe, 0), 1, "counted at the decision");
        fe_engine_void_hit(fe, ref, 1);
        EQ_U64(hits_of(fe, 0), 0, "voided: no hit");
        OK(wr(fe, 0, 8, &d) && d.nvoidable == 1,
           "a voided hit does not use up count=1");
        OK(!wr(fe, 0, 8, &d), "a real one does");
        EQ_U64(hits_of(fe, 0), 1, "one real hit");
        fe_engine_free(fe);
    }
    fe = engine("a: write irq=suppress delay=1us\nb: write irq=suppress "
                "error=eio\nc: write irq=suppress set-state=0\n"
                "d: write irq=suppress when=after\n");
    OK(wr(fe, 0, 8, &d) && d.fired == 4 && d.nvoidable == 1 &&
       d.voidable[0].rule == 3,
       "only a rule whose one action is irq=suppress is voidable");
    ref = d.voidable[0];
    fe_engine_add_rules(fe, "e: read drop", NULL, 0);
    fe_engine_void_hit(fe, ref, 1);
    EQ_U64(hits_of(fe, 3), 1, "a ref from before an add is ignored");
    wr(fe, 0, 8, &d);
    ref = d.voidable[0];
    fe_engine_reset_counters(fe);
    wr(fe, 0, 8, &d);
    fe_engine_void_hit(fe, ref, 1);
    EQ_U64(hits_of(fe, 3), 1, "a ref from before a counter reset is ignored");
    fe_engine_void_hit(fe, d.voidable[0], 5);
    EQ_U64(hits_of(fe, 3), 0, "voiding more than the hits stops at 0");
    fe_engine_free(fe);
}

/*
 * lba= rules far from their bound are counted per op, not looked at per
 * I/O: against counting by hand, with overlapping ranges, every op, zero
 * lengths, a saturated end, a rule added mid-way, state changes (which
 * fold the counts), voided hits, stats read at any time and a reset.
 */
static void test_span_ordinals(void)
{
    enum { LBA, SQ, CPU };
    static const struct {
        const char *text;
        int op;                 /* FeOp, or -1 for any */
        int key;
        uint64_t lo, hi, nth, after, every, count;
    } R[] = {
        { "r0: write lba=100-299 prob=0 delay=1ns", FE_OP_WRITE, LBA,
          .lo = 100, .hi = 299 },
        { "r1: any lba=200-399 nth=150 delay=2ns", -1, LBA,
          .lo = 200, .hi = 399, .nth = 150 },
        { "r2: write lba=0-999 every=70 delay=4ns", FE_OP_WRITE, LBA,
          .lo = 0, .hi = 999, .every = 70 },
        { "r3: read lba=250-260 after=80 every=65 delay=8ns", FE_OP_READ, LBA,
          .lo = 250, .hi = 260, .after = 80, .every = 65 },
        { "r4: any lba=300 nth=18446744073709551615 delay=16ns", -1, LBA,
          .lo = 300, .hi = 300, .nth = UINT64_MAX },
        { "r5: write lba=150-450 every=64 count=2 delay=32ns", FE_OP_WRITE,
          LBA, .lo = 150, .hi = 450, .every = 64, .count = 2 },
        { "r6: any lba=0-18446744073709551615 every=100 delay=64ns", -1, LBA,
          .lo = 0, .hi = UINT64_MAX, .every = 100 },
        { "r7: write lba=500-600 nth=3 delay=128ns", FE_OP_WRITE, LBA,
          .lo = 500, .hi = 600, .nth = 3 },
        { "r8: write lba=200-700 every=70 count=3 irq=suppress", FE_OP_WRITE,
          LBA, .lo = 200, .hi = 700, .every = 70, .count = 3 },
        { "r9: write sq=1-2 every=65 delay=512ns", FE_OP_WRITE, SQ,
          .lo = 1, .hi = 2, .every = 65 },
        { "r10: any cpu=1 nth=100 delay=1024ns", -1, CPU,
          .lo = 1, .hi = 1, .nth = 100 },
        { "r11: read sq=3 prob=0 delay=2048ns", FE_OP_READ, SQ,
          .lo = 3, .hi = 3 },
        { "r12: any lba=0-50 every=66 delay=4096ns", -1, LBA,
          .lo = 0, .hi = 50, .every = 66 },
    };
    enum { NR = sizeof(R) / sizeof(R[0]), ADD_AT = 1200, RESET_AT = 2500 };
    static const FeOp ops[] = { FE_OP_READ, FE_OP_WRITE, FE_OP_FLUSH,
                                FE_OP_DISCARD };
    uint64_t m[NR] = { 0 }, hits[NR] = { 0 }, x = 12345, voids = 0;
    FeEngine *fe = fe_engine_new(7);
    bool fired_ok = true, stats_ok = true;
    int nrules = NR - 1, first_bad = -1;
    FeRuleStats st;
    FeDecision d;
    FeIoKeys keys;

    for (int k = 0; k < NR - 1; k++) {
        fe_engine_add_rules(fe, R[k].text, NULL, 0);
    }
    for (int i = 0; i < 4000; i++) {
        FeOp op;
        uint64_t lba, end, want_delay = 0;
        uint32_t len;
        bool want8 = false, got8 = false;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        op = ops[x % 4];
        lba = (x >> 8) % 1100;
        len = op == FE_OP_FLUSH ? 0 : (uint32_t)((x >> 24) % 65);
        if (x % 251 == 0) {
            lba = UINT64_MAX - 3;       /* the end saturates */
        }
        if (op == FE_OP_FLUSH) {
            lba = 0;
        }
        end = lba + (len ? len - 1 : 0);
        end = end < lba ? UINT64_MAX : end;
        keys.have = (x >> 40) % 5 ? FE_KEY_SQ | FE_KEY_CPU : 0;
        keys.sq = (uint32_t)(x >> 44) % 4;
        keys.cpu = (uint32_t)(x >> 50) % 3;
        if (i == ADD_AT) {
            fe_engine_add_rules(fe, R[NR - 1].text, NULL, 0);
            nrules = NR;
        }
        if (i == RESET_AT) {
            fe_engine_reset_counters(fe);
            memset(m, 0, sizeof(m));
            memset(hits, 0, sizeof(hits));
        }
        for (int k = 0; k < nrules; k++) {
            bool f;

            uint64_t lo = R[k].key == LBA ? lba : R[k].key == SQ ? keys.sq
                                                                : keys.cpu;
            uint64_t hi = R[k].key == LBA ? end : lo;

            if ((R[k].op >= 0 && R[k].op != (int)op) || R[k].lo > hi ||
                R[k].hi < lo || (R[k].key != LBA && !keys.have)) {
                continue;
            }
            m[k]++;
            f = R[k].nth ? m[k] == R[k].nth :
                R[k].every ? m[k] > R[k].after &&
                             (m[k] - R[k].after) % R[k].every == 0 :
                false;
            if (f && R[k].count && hits[k] >= R[k].count) {
                f = false;
            }
            hits[k] += f;
            if (f && k == 8) {
                want8 = true;
            } else if (f) {
                want_delay += 1ull << k;
            }
        }
        fe_engine_decide_keys(fe, op, lba, len, &keys, 0, &d);
        for (uint32_t v = 0; v < d.nvoidable; v++) {
            got8 |= d.voidable[v].rule == 8;
            /* Every other suppress-only hit is taken back. */
            if (d.voidable[v].rule == 8 && voids++ % 2 == 0) {
                fe_engine_void_hit(fe, d.voidable[v], 1);
                hits[8]--;
            }
        }
        if (d.delay_ns != want_delay || got8 != want8) {
            fired_ok = false;
            first_bad = first_bad < 0 ? i : first_bad;
        }
        if (i % 37 == 0) {
            fe_engine_set_state(fe, (uint32_t)(i / 37) & 1);
        }
        for (int k = 0; i % 97 == 0 && k < nrules; k++) {
            fe_engine_rule_stats(fe, k, &st);
            stats_ok &= st.matched == m[k] && st.hits == hits[k];
        }
    }
    OK(fired_ok, "span rules fire where counting by hand says (first "
       "wrong I/O: %d)", first_bad);
    OK(stats_ok, "span rule ordinals and hits read right at any time");
    for (int k = 0; k < NR; k++) {
        fe_engine_rule_stats(fe, k, &st);
        stats_ok &= st.matched == m[k] && st.hits == hits[k];
    }
    OK(stats_ok, "and at the end");
    OK(voids > 2, "suppress-only span hits were voided (%" PRIu64 ")",
       voids);
    fe_engine_free(fe);
}

/* The I/O profile counts every I/O per op, fired or not, with or without rules. */
static void test_io_profile(void)
{
    FeEngine *fe = engine("w: write lba=100-199 error=eio");
    FeDecision d;
    FeIoProfile p;

    fe_engine_io_profile(fe, FE_OP_READ, &p);
    OK(p.count == 0 && p.lba_min == UINT64_MAX && p.lba_max == 0,
       "io profile: none before any I/O");
    fe_engine_decide(fe, FE_OP_WRITE, 150, 8, 0, &d);
    fe_engine_decide(fe, FE_OP_WRITE, 8, 8, 0, &d);
    fe_engine_decide(fe, FE_OP_READ, 600, 16, 0, &d);
    fe_engine_decide(fe, FE_OP_DISCARD, 0, 0, 0, &d);
    fe_engine_io_profile(fe, FE_OP_WRITE, &p);
    OK(p.count == 2 && p.lba_min == 8 && p.lba_max == 157,
       "io profile: writes fired or not, first and last sector");
    fe_engine_io_profile(fe, FE_OP_READ, &p);
    OK(p.count == 1 && p.lba_min == 600 && p.lba_max == 615, "io profile: reads");
    fe_engine_io_profile(fe, FE_OP_DISCARD, &p);
    OK(p.count == 1 && p.lba_min == 0 && p.lba_max == 0,
       "io profile: a zero-length I/O touches one sector");
    fe_engine_io_profile(fe, FE_OP_ANY, &p);
    OK(p.count == 0, "io profile: 'any' is no op of its own");
    fe_engine_decide(fe, FE_OP__MAX + 3, 0, 1, 0, &d);
    fe_engine_reset_counters(fe);
    fe_engine_io_profile(fe, FE_OP_WRITE, &p);
    OK(p.count == 0 && p.lba_min == UINT64_MAX, "io profile: reset_counters empties it");
    fe_engine_free(fe);
}

int main(void)
{
    test_canonical();
    test_names();
    test_errors();
    test_all_or_nothing();
    test_lba_len();
    test_ops();
    test_triggers();
    test_state();
    test_merge();
    test_lie();
    test_controller_actions();
    test_corrupt();
    test_corrupt_merge_apply();
    test_delete_clear_reset();
    test_log();
    test_determinism();
    test_many_rules();
    test_delay_bounds();
    test_no_truncation();
    test_naming_scales();
    test_lazy_ordinals();
    test_log_nth_pins();
    test_sq_cpu();
    test_void_hit();
    test_span_ordinals();
    test_io_profile();
    printf("1..%d\n", ntests);
    return nfailed ? 1 : 0;
}
