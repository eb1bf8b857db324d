/*
 * faultline fault engine: rule language, seeded decisions, fault log.
 *
 * Plain C11 with no QEMU or glib dependency, so the same code is unit-tested,
 * fuzzed and benchmarked on its own.  Not thread-safe: the QOM wrapper
 * (hw/fault/fault-injector.c) serialises calls.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef FAULT_ENGINE_H
#define FAULT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* I/O operations a device reports.  FE_OP_ANY is only a match keyword. */
typedef enum FeOp {
    FE_OP_READ,
    FE_OP_WRITE,
    FE_OP_FLUSH,
    FE_OP_DISCARD,
    FE_OP_WRITE_ZEROES,
    FE_OP__MAX,
    FE_OP_ANY = FE_OP__MAX,
} FeOp;

typedef enum FeError {
    FE_ERR_NONE,
    FE_ERR_EIO,
    FE_ERR_ENOSPC,
    FE_ERR_WRITE_FAULT,
    FE_ERR_READ_ERROR,
    FE_ERR_INTERNAL,
    FE_ERR_TIMEOUT,     /* the device never completes: same as drop */
    FE_ERR__MAX,
} FeError;

/* Completion context requested by a rule; devices that cannot honour it ignore it. */
typedef enum FeComplete {
    FE_COMPLETE_DEFAULT,
    FE_COMPLETE_IRQ,
    FE_COMPLETE_TASK,
    FE_COMPLETE_THREAD,
} FeComplete;

/* When an injected error is reported relative to the data transfer. */
typedef enum FeWhen {
    FE_WHEN_BEFORE,     /* fail before any data moves (default) */
    FE_WHEN_AFTER,      /* do the transfer, then report the error */
} FeWhen;

/* Interrupt handling after the completion is posted (NVMe). */
typedef enum FeIrq {
    FE_IRQ_NORMAL,
    FE_IRQ_DELAY,       /* raise it irq_delay_ns after the completion */
    FE_IRQ_SUPPRESS,    /* never raise it for this completion */
} FeIrq;

/* Most enables reset-fail= makes fail. */
#define FE_RESET_FAIL_MAX 255

/*
 * Actions that only some attach points implement: a device that cannot
 * honour them refuses them (fe_engine_refuse_actions), never ignores them.
 */
#define FE_ACTION_FATAL         (1u << 0)   /* fatal */
#define FE_ACTION_RESET_FAIL    (1u << 1)   /* reset-fail= */

/* Most bytes corrupt= flips in one I/O (one rule's N and the merged set). */
#define FE_CORRUPT_MAX 16

/*
 * A hit of a rule whose only action is irq=suppress: a device whose
 * interrupt was raised anyway (another completion needed it) takes it
 * back with fe_engine_void_hit().  @gen ties it to the rule set and
 * counters it was taken with.
 */
typedef struct FeHitRef {
    uint32_t rule;
    uint32_t gen;
} FeHitRef;

/* Most such hits one decision carries (more rules: their hits stay). */
#define FE_VOIDABLE_MAX 4

/*
 * What to do with one I/O.  All rules that fire for the I/O are merged; the
 * merge does not depend on rule order (see docs/rules.md):
 * delays add up, drop beats error, the most severe error wins (enum order),
 * flags are OR-ed, for enum-valued actions the largest value wins, the
 * corrupt offsets are the union (at most FE_CORRUPT_MAX), lie beats
 * corrupt (nothing moves, so nothing is flipped), fatal is OR-ed and
 * reset_fail is the largest.
 */
typedef struct FeDecision {
    uint64_t delay_ns;      /* hold the completion this long (virtual clock) */
    FeError error;
    bool dnr;               /* NVMe Do Not Retry */
    bool drop;              /* never complete (lost completion) */
    FeWhen when;
    FeComplete complete;
    FeIrq irq;
    uint64_t irq_delay_ns;
    uint32_t fired;         /* number of rules that fired */
    bool lie;               /* report success without moving any data */
    bool fatal;             /* controller fatal status until reset (NVMe) */
    uint32_t reset_fail;    /* the next N controller enables fail (NVMe) */
    uint32_t ncorrupt;
    uint32_t nvoidable;
    /*
     * Pure irq=suppress hits (fe_engine_void_hit()); only [0, nvoidable)
     * is filled, and, like corrupt[], not cleared per I/O.
     */
    FeHitRef voidable[FE_VOIDABLE_MAX];
    /*
     * Byte offsets into the I/O's data (0 = first byte of @lba), distinct
     * and ascending, to flip (XOR 0xff) on the way: in the guest buffer
     * after a read, in what is stored for a write.  Only [0, ncorrupt) is
     * filled, so this stays the last member.
     */
    uint64_t corrupt[FE_CORRUPT_MAX];
} FeDecision;

#define FE_NAME_MAX 32
#define FE_ERR_MSG_MAX 256
/* Holds the longest canonical rule text (about 460 bytes) with room. */
#define FE_TEXT_MAX 512
/* Holds the longest action string (about 360 bytes: 16 corrupt offsets). */
#define FE_ACTION_MAX 384
/*
 * Longest duration a rule may give (1000000s, about 11.6 days).  Drawn and
 * merged delays are capped here too, so a device's now + delay never wraps.
 */
#define FE_DELAY_MAX_NS 1000000000000000ULL

typedef struct FeEngine FeEngine;

/*
 * Where an I/O came from, for the sq= and cpu= match keys.  An attach
 * point fills in what it knows and sets the matching FE_KEY_* bits in
 * @have; a rule on a key the I/O does not carry does not match it.
 */
enum {
    FE_KEY_SQ  = 1u << 0,   /* NVMe submission queue id */
    FE_KEY_CPU = 1u << 1,   /* index of the vCPU that submitted the I/O */
};

typedef struct FeIoKeys {
    uint32_t have;          /* FE_KEY_* */
    uint32_t sq;
    uint32_t cpu;
} FeIoKeys;

typedef struct FeRuleStats {
    char name[FE_NAME_MAX];
    char text[FE_TEXT_MAX]; /* the rule as parsed, normalised */
    uint64_t matched;       /* matching I/Os seen (the rule's ordinal) */
    uint64_t hits;          /* times it fired */
} FeRuleStats;

/* The I/Os of one op a device passed to decide() since new/reset. */
typedef struct FeIoProfile {
    uint64_t count;
    uint64_t lba_min;       /* first sector touched; UINT64_MAX: none */
    uint64_t lba_max;       /* last sector touched */
} FeIoProfile;

typedef struct FeLogEntry {
    uint64_t seq;           /* index in the whole log, from 0 */
    uint64_t ordinal;       /* device I/O ordinal (1-based, all I/Os) */
    uint64_t vns;           /* virtual time the device passed in */
    uint64_t lba;
    uint32_t len;           /* sectors */
    FeOp op;
    FeIoKeys keys;          /* logged (JSON "sq", "cpu"), not digested */
    char rule[FE_NAME_MAX];
    uint64_t nth;           /* the rule's ordinal n when it fired (its nth=) */
    char action[FE_ACTION_MAX]; /* e.g. "error=write-fault dnr" */
} FeLogEntry;

FeEngine *fe_engine_new(uint64_t seed);
void fe_engine_free(FeEngine *fe);

/*
 * Parse @text (any number of rule lines) and append the rules.  On any
 * error nothing is added, -1 is returned and @err holds "LINE:COL: message".
 * Returns the number of rules added.  Rule names must be unique; unnamed
 * rules get "rN" names from their position in the engine.
 */
int fe_engine_add_rules(FeEngine *fe, const char *text, char *err, size_t errlen);
/* Check @text without changing the engine.  Same return convention. */
int fe_engine_check_rules(const char *text, char *err, size_t errlen);
/*
 * The same for @len bytes at @text (a file's contents): a NUL byte among
 * them is an error, not the end of the text.
 */
int fe_engine_add_rules_len(FeEngine *fe, const char *text, size_t len,
                            char *err, size_t errlen);
int fe_engine_check_rules_len(const char *text, size_t len, char *err,
                              size_t errlen);
/*
 * An attach point that cannot honour the FE_ACTION_* @mask: from now on
 * adding a rule with one fails with "LINE:COL: 'fatal' is not supported
 * by @who".  @who NULL lifts the refusal of @mask.  @who is copied; each
 * action keeps the latest one given.
 */
void fe_engine_refuse_actions(FeEngine *fe, uint32_t mask, const char *who);
/*
 * The index of the first rule with any of the FE_ACTION_* @mask, or -1;
 * with @action (if not NULL) set to that action's keyword.
 */
int fe_engine_find_action(const FeEngine *fe, uint32_t mask,
                          const char **action);
/* Remove one rule by name; -1 if no such rule. */
int fe_engine_delete_rule(FeEngine *fe, const char *name);
void fe_engine_clear_rules(FeEngine *fe);
int fe_engine_rule_count(const FeEngine *fe);
/* Copy out stats of rule @i (0 <= i < count); -1 if out of range. */
int fe_engine_rule_stats(const FeEngine *fe, int i, FeRuleStats *out);

/* What the device asked for on @op (< FE_OP__MAX): how a workload uses it. */
void fe_engine_io_profile(const FeEngine *fe, FeOp op, FeIoProfile *out);

void fe_engine_set_state(FeEngine *fe, uint32_t state);
uint32_t fe_engine_state(const FeEngine *fe);
uint64_t fe_engine_seed(const FeEngine *fe);

/*
 * Zero hit/match counters and I/O ordinals, empty the log, reset the digest
 * and set the state back to 0: the rules behave as if freshly added.
 */
void fe_engine_reset(FeEngine *fe);
/*
 * Zero hit/match counters and I/O ordinals only: the rules trigger as if
 * freshly added, while the log and the digest go on (a machine reset).
 */
void fe_engine_reset_counters(FeEngine *fe);

/*
 * The per-I/O decision.  @lba and @len are in 512-byte sectors, @now_ns the
 * device's virtual clock (recorded in the log only: it never influences a
 * decision).  Returns true if any rule fired; @out is always filled.
 */
bool fe_engine_decide(FeEngine *fe, FeOp op, uint64_t lba, uint32_t len,
                      uint64_t now_ns, FeDecision *out);
/* The same for an I/O that carries @keys (NULL: none). */
bool fe_engine_decide_keys(FeEngine *fe, FeOp op, uint64_t lba, uint32_t len,
                           const FeIoKeys *keys, uint64_t now_ns,
                           FeDecision *out);

/*
 * Take back @times hits of the pure irq=suppress rule @ref whose
 * suppression suppressed nothing (the interrupt was raised anyway, or
 * interrupts were off), once per decision: the rule counts, and uses up
 * count=, only real suppressions.  Ignored if the rules or counters
 * changed since.  The fault log keeps the decision.
 */
void fe_engine_void_hit(FeEngine *fe, FeHitRef ref, uint32_t times);

/* The FE_KEY_* bits that the engine's rules match on. */
uint32_t fe_engine_keys_used(const FeEngine *fe);
/*
 * The same for the FE_KEY_* @keys an attach point cannot supply: adding
 * a rule that matches on one fails with "LINE:COL: 'sq' is not supplied
 * by @who"; @who NULL lifts the refusal.
 */
void fe_engine_refuse_keys(FeEngine *fe, uint32_t keys, const char *who);
/*
 * The index of the first rule that matches on any of the FE_KEY_* @keys,
 * or -1; with @key (if not NULL) set to that key's name ("sq", "cpu").
 */
int fe_engine_find_key(const FeEngine *fe, uint32_t keys, const char **key);

/*
 * Flip the bytes of @d's corrupt set that fall in the piece [@off, @off +
 * @len) of the I/O's data, held at @buf: devices call it once per
 * scatter-gather piece.  Returns how many bytes it flipped.
 */
uint32_t fe_decision_corrupt(const FeDecision *d, uint64_t off, void *buf,
                             size_t len);

/* Fault log: a ring of the most recent entries plus a running digest. */
uint64_t fe_engine_log_total(const FeEngine *fe);   /* entries ever logged */
uint64_t fe_engine_log_first(const FeEngine *fe);   /* oldest seq still held */
/* Copy entry @seq; -1 if it has left the ring or does not exist yet. */
int fe_engine_log_get(const FeEngine *fe, uint64_t seq, FeLogEntry *out);
/* 64-bit FNV-1a over every logged decision (not the time): identifies a run. */
uint64_t fe_engine_digest(const FeEngine *fe);
/* Write one JSON object for @e (no newline) into @buf; returns length. */
int fe_log_entry_json(const FeLogEntry *e, char *buf, size_t buflen);
/* Append the entries from @from_seq on to @f as JSON lines; returns count. */
int fe_engine_log_write_jsonl(const FeEngine *fe, uint64_t from_seq, FILE *f);

const char *fe_op_name(FeOp op);
const char *fe_error_name(FeError err);

#endif /* FAULT_ENGINE_H */
