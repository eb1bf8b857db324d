/*
 * libFuzzer target: arbitrary bytes as rule text, then a few decisions and
 * log exports, so parser, renderer and decision paths all see the input.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fault-engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char err[FE_ERR_MSG_MAX];
    char json[1024];
    /* One engine for the whole run: a fresh 4096-entry log per input
     * would dominate the time per execution. */
    static FeEngine *fe;
    FeDecision d;
    FeLogEntry e;
    FeRuleStats st;
    int n;

    if (!fe) {
        fe = fe_engine_new(1);
    }
    /* The bytes as a file holds them: a NUL inside is an error. */
    n = fe_engine_add_rules_len(fe, text, size, err, sizeof(err));
    if (n < 0 && !memchr(err, '\0', sizeof(err))) {
        abort();                    /* error text must be terminated */
    }
    if (fe_engine_check_rules_len(text, size, err, sizeof(err)) != n) {
        abort();                    /* check and add must agree */
    }
    if (n >= 0 && memchr(text, '\0', size)) {
        abort();                    /* a NUL byte must be an error */
    }
    /* Exercise state changes and lba edges with input-derived I/Os. */
    for (int i = 0; i < 64; i++) {
        uint64_t lba = 0;
        uint8_t b = size ? data[i % size] : 0;
        memcpy(&lba, data + (size > 8 ? (i * 7) % (size - 8) : 0),
               size >= 8 ? 8 : 0);
        if (i & 1) {
            lba &= 0xffff;
        }
        /* Queue and vCPU from the input too, carried or not (bits 6-7). */
        fe_engine_decide_keys(fe, (FeOp)(b % FE_OP__MAX), lba, b * 3u,
                              &(FeIoKeys){ .have = (b >> 6) & 3,
                                           .sq = b & 7, .cpu = (b >> 3) & 3 },
                              i, &d);
        if (d.delay_ns > FE_DELAY_MAX_NS || d.irq_delay_ns > FE_DELAY_MAX_NS) {
            abort();                /* now + delay must not wrap */
        }
        if (i == 32) {
            fe_engine_set_state(fe, b & 3);
        }
    }
    for (int i = 0; i < fe_engine_rule_count(fe); i++) {
        fe_engine_rule_stats(fe, i, &st);
        if (!memchr(st.text, '\0', sizeof(st.text)) ||
            strlen(st.text) + 1 >= sizeof(st.text) ||
            fe_engine_check_rules(st.text, err, sizeof(err)) != 1) {
            abort();                /* whole canonical text, parses back */
        }
    }
    for (uint64_t s = fe_engine_log_first(fe); s < fe_engine_log_total(fe);
         s++) {
        if (fe_engine_log_get(fe, s, &e) == 0) {
            fe_log_entry_json(&e, json, sizeof(json));
        }
    }
    if (n > 0) {
        fe_engine_delete_rule(fe, "r0");
        fe_engine_decide(fe, FE_OP_WRITE, 0, 8, 0, &d);
    }
    fe_engine_clear_rules(fe);
    fe_engine_reset(fe);
    return 0;
}
