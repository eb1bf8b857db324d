/*
 * QMP commands of the fault-injector object (qapi/fault.json).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qapi/qapi-commands-fault.h"
#include "hw/fault/fault-injector.h"
#include "trace.h"

#define LOG_QUERY_DEFAULT 256
#define LOG_QUERY_MAX 4096

XFaultAddResult *qmp_x_fault_add_rules(const char *id, const char *rules,
                                       Error **errp)
{
    FaultInjector *fi = fault_injector_find(id, errp);
    XFaultAddResult *res;
    char err[FE_ERR_MSG_MAX];
    int added;

    if (!fi) {
        return NULL;
    }
    added = fe_engine_add_rules(fault_injector_lock_engine(fi), rules,
                                err, sizeof(err));
    fault_injector_unlock_engine(fi);
    if (added < 0) {
        trace_fault_parse_error(id, err);
        error_setg(errp, "%s", err);
        return NULL;
    }
    res = g_new0(XFaultAddResult, 1);
    res->added = added;
    return res;
}

void qmp_x_fault_delete_rule(const char *id, const char *name, Error **errp)
{
    FaultInjector *fi = fault_injector_find(id, errp);
    int ret;

    if (!fi) {
        return;
    }
    ret = fe_engine_delete_rule(fault_injector_lock_engine(fi), name);
    fault_injector_unlock_engine(fi);
    if (ret < 0) {
        error_setg(errp, "fault-injector '%s' has no rule '%s'", id, name);
    }
}

void qmp_x_fault_set_state(const char *id, uint32_t state, Error **errp)
{
    FaultInjector *fi = fault_injector_find(id, errp);

    if (fi) {
        fault_injector_set_state(fi, state);
    }
}

XFaultStats *qmp_x_fault_query_stats(const char *id, Error **errp)
{
    FaultInjector *fi = fault_injector_find(id, errp);
    XFaultRuleInfoList **tail;
    XFaultIoInfoList **io_tail;
    XFaultStats *st;
    FeEngine *fe;
    int n;

    if (!fi) {
        return NULL;
    }
    st = g_new0(XFaultStats, 1);
    tail = &st->rules;
    io_tail = &st->io;
    st->log_error = fault_injector_log_error(fi);
    fe = fault_injector_lock_engine(fi);
    st->seed = fe_engine_seed(fe);
    st->state = fe_engine_state(fe);
    st->digest = fe_engine_digest(fe);
    st->log_total = fe_engine_log_total(fe);
    n = fe_engine_rule_count(fe);
    for (int i = 0; i < n; i++) {
        XFaultRuleInfo *info = g_new0(XFaultRuleInfo, 1);
        FeRuleStats rs;

        fe_engine_rule_stats(fe, i, &rs);
        info->name = g_strdup(rs.name);
        info->text = g_strdup(rs.text);
        info->matched = rs.matched;
        info->hits = rs.hits;
        QAPI_LIST_APPEND(tail, info);
    }
    for (int op = 0; op < FE_OP__MAX; op++) {
        XFaultIoInfo *io;
        FeIoProfile p;

        fe_engine_io_profile(fe, op, &p);
        if (!p.count) {
            continue;
        }
        io = g_new0(XFaultIoInfo, 1);
        io->op = g_strdup(fe_op_name(op));
        io->count = p.count;
        io->lba_min = p.lba_min;
        io->lba_max = p.lba_max;
        QAPI_LIST_APPEND(io_tail, io);
    }
    fault_injector_unlock_engine(fi);
    return st;
}

XFaultLog *qmp_x_fault_query_log(const char *id, bool has_start,
                                 uint64_t start, bool has_max, uint32_t max,
                                 Error **errp)
{
    FaultInjector *fi = fault_injector_find(id, errp);
    XFaultLogEntryList **tail;
    XFaultLog *log;
    FeEngine *fe;
    uint64_t seq, end;

    if (!fi) {
        return NULL;
    }
    if (has_max && (max == 0 || max > LOG_QUERY_MAX)) {
        error_setg(errp, "'max' must be between 1 and %d", LOG_QUERY_MAX);
        return NULL;
    }
    log = g_new0(XFaultLog, 1);
    tail = &log->entries;
    fe = fault_injector_lock_engine(fi);
    log->total = fe_engine_log_total(fe);
    log->first = fe_engine_log_first(fe);
    log->digest = fe_engine_digest(fe);
    seq = has_start ? MAX(start, log->first) : log->first;
    end = MIN(log->total, seq + (has_max ? max : LOG_QUERY_DEFAULT));
    for (; seq < end; seq++) {
        XFaultLogEntry *e;
        FeLogEntry le;

        if (fe_engine_log_get(fe, seq, &le) < 0) {
            continue;
        }
        e = g_new0(XFaultLogEntry, 1);
        e->seq = le.seq;
        e->ordinal = le.ordinal;
        e->vns = le.vns;
        e->op = g_strdup(fe_op_name(le.op));
        e->lba = le.lba;
        e->len = le.len;
        e->rule = g_strdup(le.rule);
        e->action = g_strdup(le.action);
        QAPI_LIST_APPEND(tail, e);
    }
    fault_injector_unlock_engine(fi);
    return log;
}

void qmp_x_fault_reset(const char *id, Error **errp)
{
    FaultInjector *fi = fault_injector_find(id, errp);

    if (fi) {
        fault_injector_reset(fi);
    }
}

static const char *const when_names[] = { "before", "after" };
static const char *const complete_names[] = {
    "default", "irq", "task", "thread",
};
static const char *const irq_names[] = { "normal", "delay", "suppress" };

XFaultDecision *qmp_x_fault_decide(const char *id, const char *op,
                                   uint64_t lba, uint32_t len, Error **errp)
{
    FaultInjector *fi = fault_injector_find(id, errp);
    XFaultDecision *res;
    FeDecision d;
    int o;

    if (!fi) {
        return NULL;
    }
    for (o = 0; o < FE_OP__MAX && strcmp(op, fe_op_name(o)); o++) {
        continue;
    }
    if (o == FE_OP__MAX) {
        error_setg(errp, "unknown op '%s' (expected read, write, flush, "
                   "discard or write-zeroes)", op);
        return NULL;
    }
    fault_injector_decide(fi, o, lba, len, &d);
    res = g_new0(XFaultDecision, 1);
    res->fired = d.fired;
    res->delay_ns = d.delay_ns;
    res->error = g_strdup(fe_error_name(d.error));
    res->dnr = d.dnr;
    res->drop = d.drop;
    res->when = g_strdup(when_names[d.when & 1]);
    res->complete = g_strdup(complete_names[d.complete & 3]);
    res->irq = g_strdup(irq_names[d.irq % 3]);
    res->irq_delay_ns = d.irq_delay_ns;
    res->lie = d.lie;
    res->fatal = d.fatal;
    res->reset_fail = d.reset_fail;
    for (uint32_t i = d.ncorrupt; i-- > 0;) {
        QAPI_LIST_PREPEND(res->corrupt, d.corrupt[i]);
    }
    return res;
}
