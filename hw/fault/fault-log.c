/*
 * faultline fault engine: the fault log (a ring of the last FE_LOG_SIZE
 * fired rules), its digest over every entry, and its JSON form.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <string.h>

#include "fault-engine-int.h"

static void put_le(uint64_t *h, uint64_t v, int bytes)
{
    unsigned char b[8];

    for (int i = 0; i < bytes; i++) {
        b[i] = (unsigned char)(v >> (8 * i));
    }
    *h = fe_fnv1a(*h, b, (size_t)bytes);
}

void fe_log_append(FeEngine *fe, FeOp op, uint64_t lba, uint32_t len,
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
    fe_copy_str(e->rule, sizeof(e->rule), rule);
    e->nth = nth;
    fe_copy_str(e->action, sizeof(e->action), action);

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
