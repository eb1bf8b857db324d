/*
 * QTest for the fault-injector object and its x-fault-* QMP commands.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qobject/qjson.h"
#include "qobject/qnum.h"
#include "faultline-qtest.h"

static char *tmpdir;

static QDict *query_stats(QTestState *qts)
{
    return fl_query_stats(qts, "fi0");
}

static QDict *rule_at(QDict *stats, int i)
{
    QList *rules = qdict_get_qlist(stats, "rules");
    QListEntry *e;

    QLIST_FOREACH_ENTRY(rules, e) {
        if (i-- == 0) {
            return qobject_to(QDict, qlist_entry_obj(e));
        }
    }
    return NULL;
}

static void test_properties(void)
{
    QTestState *qts = qtest_init("-machine none");
    QDict *rsp = qtest_qmp(qts, "{'execute': 'qom-list-properties',"
                           " 'arguments': {'typename': 'fault-injector'}}");
    const char *want[] = { "rules", "seed", "log", "state", "events" };
    QList *props = qdict_get_qlist(rsp, "return");

    g_assert(props);
    for (int i = 0; i < ARRAY_SIZE(want); i++) {
        QListEntry *e;
        bool found = false;

        QLIST_FOREACH_ENTRY(props, e) {
            QDict *p = qobject_to(QDict, qlist_entry_obj(e));

            found |= !strcmp(qdict_get_str(p, "name"), want[i]);
        }
        g_assert(found);
    }
    qobject_unref(rsp);
    qtest_quit(qts);
}

static void test_create_and_stats(void)
{
    g_autofree char *rules = fl_write_file(tmpdir, "ok.rules",
        "# two rules\n"
        "wfail: write lba=0-99 nth=3 error=write-fault dnr\n"
        "slow:  read prob=0.5 delay=2ms\n");
    QTestState *qts = qtest_initf("-machine none -object fault-injector,"
                                  "id=fi0,rules=%s,seed=42,state=7", rules);
    QDict *st = query_stats(qts);

    g_assert_cmpuint(qdict_get_int(st, "seed"), ==, 42);
    g_assert_cmpuint(qdict_get_int(st, "state"), ==, 7);
    g_assert_cmpuint(qdict_get_int(st, "log-total"), ==, 0);
    g_assert_cmpstr(qdict_get_str(rule_at(st, 0), "name"), ==, "wfail");
    g_assert_cmpstr(qdict_get_str(rule_at(st, 1), "name"), ==, "slow");
    g_assert_cmpuint(qdict_get_int(rule_at(st, 0), "hits"), ==, 0);
    g_assert_null(rule_at(st, 2));
    qobject_unref(st);
    qtest_quit(qts);
}

static void test_add_delete(void)
{
    QTestState *qts = qtest_init("-machine none -object fault-injector,id=fi0");
    g_autofree char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL;
    QDict *rsp, *st;

    rsp = qtest_qmp_assert_success_ref(qts,
        "{'execute': 'x-fault-add-rules', 'arguments': {'id': 'fi0',"
        " 'rules': 'a: write every=2 error=eio\\nb: flush drop\\n'}}");
    g_assert_cmpint(qdict_get_int(rsp, "added"), ==, 2);
    qobject_unref(rsp);

    /* A bad line names LINE:COL and arms nothing, QEMU keeps running. */
    e1 = fl_qmp_error(qts, "{'execute': 'x-fault-add-rules', 'arguments':"
                   " {'id': 'fi0', 'rules': 'c: read drop\\nd: wrte drop\\n'}}");
    g_assert(g_str_has_prefix(e1, "2:"));
    g_assert(strstr(e1, "wrte"));
    /* Duplicate names are refused as a whole too. */
    e2 = fl_qmp_error(qts, "{'execute': 'x-fault-add-rules', 'arguments':"
                   " {'id': 'fi0', 'rules': 'a: read drop'}}");
    g_assert(strstr(e2, "'a'"));
    st = query_stats(qts);
    g_assert_nonnull(rule_at(st, 1));
    g_assert_null(rule_at(st, 2));
    qobject_unref(st);

    fl_delete_rule(qts, "fi0", "a");
    e3 = fl_qmp_error(qts, "{'execute': 'x-fault-delete-rule',"
                   " 'arguments': {'id': 'fi0', 'name': 'a'}}");
    g_assert(strstr(e3, "no rule 'a'"));
    st = query_stats(qts);
    g_assert_cmpstr(qdict_get_str(rule_at(st, 0), "name"), ==, "b");
    g_assert_null(rule_at(st, 1));
    qobject_unref(st);

    /* Wrong argument types are QMP errors, not crashes. */
    e4 = fl_qmp_error(qts, "{'execute': 'x-fault-add-rules', 'arguments':"
                   " {'id': 'fi0', 'rules': 5}}");
    g_assert(strstr(e4, "rules"));
    qtest_quit(qts);
}

static void test_state_log_reset(void)
{
    QTestState *qts = qtest_init("-machine none -object fault-injector,id=fi0");
    g_autofree char *e1 = NULL, *e2 = NULL;
    QDict *rsp, *st;

    fl_set_state(qts, "fi0", 3);
    st = query_stats(qts);
    g_assert_cmpuint(qdict_get_int(st, "state"), ==, 3);
    qobject_unref(st);
    rsp = qtest_qmp_assert_success_ref(qts, "{'execute': 'qom-get',"
        " 'arguments': {'path': '/objects/fi0', 'property': 'state'}}");
    qobject_unref(rsp);
    e1 = fl_qmp_error(qts, "{'execute': 'x-fault-set-state',"
                   " 'arguments': {'id': 'fi0', 'state': -1}}");
    g_assert(strstr(e1, "state"));

    rsp = qtest_qmp_assert_success_ref(qts, "{'execute': 'x-fault-query-log',"
        " 'arguments': {'id': 'fi0', 'start': 0, 'max': 10}}");
    g_assert_cmpuint(qdict_get_int(rsp, "total"), ==, 0);
    g_assert(qlist_empty(qdict_get_qlist(rsp, "entries")));
    qobject_unref(rsp);
    e2 = fl_qmp_error(qts, "{'execute': 'x-fault-query-log',"
                   " 'arguments': {'id': 'fi0', 'max': 0}}");
    g_assert(strstr(e2, "max"));

    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-reset',"
                             " 'arguments': {'id': 'fi0'}}");
    st = query_stats(qts);
    g_assert_cmpuint(qdict_get_int(st, "state"), ==, 3);
    qobject_unref(st);
    qtest_quit(qts);
}

/* One write through x-fault-decide; returns how many rules fired. */
static int64_t decide_write(QTestState *qts, uint64_t lba)
{
    QDict *rsp = qtest_qmp_assert_success_ref(qts,
        "{'execute': 'x-fault-decide', 'arguments': {'id': 'fi0',"
        " 'op': 'write', 'lba': %" PRIu64 ", 'len': 8}}", lba);
    int64_t fired = qdict_get_int(rsp, "fired");

    qobject_unref(rsp);
    return fired;
}

static void test_decide(void)
{
    QTestState *qts = qtest_init("-machine none -object fault-injector,id=fi0");
    g_autofree char *e1 = NULL;
    QDict *rsp;

    fl_add_rules(qts, "fi0",
                 "a: write lba=0-7 delay=1ms error=write-fault dnr\n"
                 "b: write irq-delay=5us complete=task");
    rsp = qtest_qmp_assert_success_ref(qts,
        "{'execute': 'x-fault-decide', 'arguments': {'id': 'fi0',"
        " 'op': 'write', 'lba': 4, 'len': 8}}");
    g_assert_cmpint(qdict_get_int(rsp, "fired"), ==, 2);
    g_assert_cmpint(qdict_get_int(rsp, "delay-ns"), ==, 1000000);
    g_assert_cmpstr(qdict_get_str(rsp, "error"), ==, "write-fault");
    g_assert(qdict_get_bool(rsp, "dnr") && !qdict_get_bool(rsp, "drop"));
    g_assert_cmpstr(qdict_get_str(rsp, "complete"), ==, "task");
    g_assert_cmpstr(qdict_get_str(rsp, "irq"), ==, "delay");
    g_assert_cmpint(qdict_get_int(rsp, "irq-delay-ns"), ==, 5000);
    qobject_unref(rsp);
    g_assert_cmpint(decide_write(qts, 100), ==, 1);
    e1 = fl_qmp_error(qts, "{'execute': 'x-fault-decide', 'arguments':"
                   " {'id': 'fi0', 'op': 'any', 'lba': 0, 'len': 1}}");
    g_assert(strstr(e1, "unknown op 'any'"));
    qtest_quit(qts);
}

/* lie and corrupt through QMP: the decision and the log agree on the bytes. */
static void test_decide_lie_corrupt(void)
{
    g_autofree char *log = g_build_filename(tmpdir, "corrupt.jsonl", NULL);
    QTestState *qts = qtest_initf("-machine none -object fault-injector,"
                                  "id=fi0,log=%s", log);
    g_autofree char *want = NULL;
    QListEntry *e;
    uint64_t off[2];
    QDict *rsp;
    int n = 0;

    fl_add_rules(qts, "fi0", "l: write lba=0-7 lie\nc: read corrupt=2");
    rsp = qtest_qmp_assert_success_ref(qts,
        "{'execute': 'x-fault-decide', 'arguments': {'id': 'fi0',"
        " 'op': 'write', 'lba': 0, 'len': 8}}");
    g_assert(qdict_get_bool(rsp, "lie"));
    g_assert(qlist_empty(qdict_get_qlist(rsp, "corrupt")));
    g_assert_cmpstr(qdict_get_str(rsp, "error"), ==, "none");
    qobject_unref(rsp);
    rsp = qtest_qmp_assert_success_ref(qts,
        "{'execute': 'x-fault-decide', 'arguments': {'id': 'fi0',"
        " 'op': 'read', 'lba': 64, 'len': 8}}");
    g_assert(!qdict_get_bool(rsp, "lie"));
    QLIST_FOREACH_ENTRY(qdict_get_qlist(rsp, "corrupt"), e) {
        g_assert_cmpint(n, <, 2);
        off[n++] = qnum_get_uint(qobject_to(QNum, qlist_entry_obj(e)));
    }
    qobject_unref(rsp);
    g_assert_cmpint(n, ==, 2);
    g_assert_cmpuint(off[0], <, off[1]);
    g_assert_cmpuint(off[1], <, 8 * 512);
    qobject_unref(query_stats(qts));
    g_assert_cmpint(fl_file_lines_with(log, "\"action\":\"lie\""), ==, 1);
    want = g_strdup_printf("\"action\":\"corrupt=2 at=%" PRIu64 ",%" PRIu64
                           "\"", off[0], off[1]);
    g_assert_cmpint(fl_file_lines_with(log, want), ==, 1);
    qtest_quit(qts);
}

/* Issue 12 defect 8: x-fault-reset restarts the export of the log too. */
static void test_reset_log_cursor(void)
{
    g_autofree char *log = g_build_filename(tmpdir, "reset.jsonl", NULL);
    QTestState *qts = qtest_initf("-machine none -object fault-injector,"
                                  "id=fi0,log=%s,events=on", log);
    QDict *ev;

    fl_add_rules(qts, "fi0", "w: write error=eio");
    g_assert_cmpint(decide_write(qts, 0), ==, 1);
    qobject_unref(qtest_qmp_eventwait_ref(qts, "X_FAULT_INJECTED"));
    g_assert_cmpint(decide_write(qts, 8), ==, 1);
    qobject_unref(qtest_qmp_eventwait_ref(qts, "X_FAULT_INJECTED"));
    qobject_unref(query_stats(qts));
    g_assert_cmpint(fl_file_lines_with(log, "\"seq\":"), ==, 2);
    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-reset',"
                             " 'arguments': {'id': 'fi0'}}");
    g_assert_cmpint(decide_write(qts, 16), ==, 1);
    qobject_unref(query_stats(qts));
    /* The file goes on: its third line is the new log's seq 0. */
    g_assert_cmpint(fl_file_lines_with(log, "\"seq\":"), ==, 3);
    g_assert_cmpint(fl_file_lines_with(log, "\"seq\":0,\"ordinal\":1,"), ==, 2);
    g_assert_cmpint(fl_file_lines_with(log, "\"lba\":16,"), ==, 1);
    ev = qtest_qmp_eventwait_ref(qts, "X_FAULT_INJECTED");
    g_assert_cmpint(qdict_get_int(qdict_get_qdict(ev, "data"), "lba"), ==, 16);
    qobject_unref(ev);
    qtest_quit(qts);
}

/*
 * Issue 12 defect 8: each fired fault is in the file when the decision
 * returns, with no QMP call or exit to flush it, so a kill -9 loses none.
 */
static void test_log_durable(void)
{
    g_autofree char *log = g_build_filename(tmpdir, "durable.jsonl", NULL);
    QTestState *qts = qtest_initf("-machine none -object fault-injector,"
                                  "id=fi0,log=%s", log);

    fl_add_rules(qts, "fi0", "w: write every=2 drop");
    for (int i = 1; i <= 6; i++) {
        decide_write(qts, i);
        g_assert_cmpint(fl_file_lines_with(log, "\"rule\":\"w\""), ==, i / 2);
    }
    qtest_quit(qts);
}

/* Issue 12 defect 8: a log file that cannot be written is a clear error. */
static void test_log_write_error(void)
{
    QTestState *qts = qtest_init("-machine none -object fault-injector,"
                                 "id=fi0,log=/dev/full");
    QDict *st, *rsp;

    st = query_stats(qts);
    g_assert(!qdict_haskey(st, "log-error"));
    qobject_unref(st);
    fl_add_rules(qts, "fi0", "w: write drop");
    g_assert_cmpint(decide_write(qts, 0), ==, 1);
    g_assert_cmpint(decide_write(qts, 8), ==, 1);
    st = query_stats(qts);
    g_assert_cmpstr(qdict_get_try_str(st, "log-error"), ==,
                    "cannot write log '/dev/full': No space left on device");
    g_assert_cmpint(qdict_get_int(st, "log-total"), ==, 2);
    qobject_unref(st);
    /* Nothing is lost: the ring and QMP keep every entry. */
    rsp = qtest_qmp_assert_success_ref(qts, "{'execute': 'x-fault-query-log',"
        " 'arguments': {'id': 'fi0'}}");
    g_assert_cmpint(qdict_get_int(rsp, "total"), ==, 2);
    qobject_unref(rsp);
    qtest_quit(qts);
}

/*
 * Issue 12 defect 10: a machine reset (guest reboot) restarts the rules'
 * counters and ordinals and the state; the log and digest go on.
 */
static void test_machine_reset(void)
{
    QTestState *qts = qtest_init("-machine none -object fault-injector,"
                                 "id=fi0,state=5");
    QDict *st;
    int64_t digest;

    fl_add_rules(qts, "fi0", "first: write nth=1 error=eio\n"
                 "any: write delay=1us");
    fl_set_state(qts, "fi0", 2);
    g_assert_cmpint(decide_write(qts, 0), ==, 2);
    g_assert_cmpint(decide_write(qts, 0), ==, 1);
    st = query_stats(qts);
    digest = qdict_get_int(st, "digest");
    g_assert_cmpint(qdict_get_int(rule_at(st, 0), "matched"), ==, 2);
    qobject_unref(st);

    qtest_system_reset(qts);
    st = query_stats(qts);
    g_assert_cmpint(qdict_get_int(rule_at(st, 0), "matched"), ==, 0);
    g_assert_cmpint(qdict_get_int(rule_at(st, 0), "hits"), ==, 0);
    g_assert_cmpint(qdict_get_int(rule_at(st, 1), "matched"), ==, 0);
    g_assert_cmpint(qdict_get_int(st, "state"), ==, 5);
    g_assert_cmpint(qdict_get_int(st, "log-total"), ==, 3);
    g_assert_cmpint(qdict_get_int(st, "digest"), ==, digest);
    qobject_unref(st);
    /* The new boot's first write fails again. */
    g_assert_cmpint(decide_write(qts, 0), ==, 2);
    st = query_stats(qts);
    g_assert_cmpint(qdict_get_int(st, "log-total"), ==, 5);
    qobject_unref(st);
    qtest_quit(qts);
}

/* Issue 12 defect 10: object-del of an injector a device uses is refused. */
static void test_delete_in_use(void)
{
    QTestState *qts = qtest_init("-machine pc -nodefaults"
                                 " -object fault-injector,id=fi0"
                                 " -object fault-injector,id=fi1"
                                 " -blockdev driver=null-co,node-name=null0"
                                 " -device nvme,serial=fl0,drive=null0,"
                                 "fault-injector=fi0");
    g_autofree char *e1 = NULL;
    QDict *st;

    e1 = fl_qmp_error(qts, "{'execute': 'object-del', 'arguments':"
                   " {'id': 'fi0'}}");
    g_assert(strstr(e1, "fi0") && strstr(e1, "in use"));
    st = query_stats(qts);
    qobject_unref(st);
    /* An unused one goes. */
    qtest_qmp_assert_success(qts, "{'execute': 'object-del', 'arguments':"
                             " {'id': 'fi1'}}");
    g_free(fl_qmp_error(qts, "{'execute': 'x-fault-query-stats', 'arguments':"
                     " {'id': 'fi1'}}"));
    qtest_quit(qts);
}

static void test_bad_ids(void)
{
    static const struct {
        const char *cmd, *args;
    } bad[] = {
        { "x-fault-query-stats", "{'id': 'nope'}" },
        { "x-fault-reset", "{'id': 'nope'}" },
        { "x-fault-set-state", "{'id': 'nope', 'state': 1}" },
        { "x-fault-query-log", "{'id': 'nope'}" },
        { "x-fault-delete-rule", "{'id': 'nope', 'name': 'x'}" },
        { "x-fault-add-rules", "{'id': 'nope', 'rules': ''}" },
        { "x-fault-query-stats", "{'id': 'io0'}" },     /* not an injector */
    };
    QTestState *qts = qtest_init("-machine none -object iothread,id=io0");

    for (int i = 0; i < ARRAY_SIZE(bad); i++) {
        g_autofree char *e = fl_qmp_error(qts,
            "{'execute': %s, 'arguments': %p}", bad[i].cmd,
            qobject_from_json(bad[i].args, &error_abort));

        g_assert(strstr(e, i < 6 ? "no fault-injector with id 'nope'" :
                        "not a fault-injector"));
    }
    qtest_quit(qts);
}

/* Startup errors: QEMU must exit non-zero with a clear message. */
static void expect_startup_error(const char *objopts, const char *msg)
{
    g_autofree char *args = g_strdup_printf("-machine none "
                                            "-object fault-injector,id=fi0%s",
                                            objopts);

    fl_expect_startup_error(args, msg);
}

static void test_startup_errors(void)
{
    g_autofree char *bad = fl_write_file(tmpdir, "bad.rules", "ok: read drop\n"
                                       "bad: read lba=9-3 drop\n");
    g_autofree char *badopt = g_strdup_printf(",rules=%s", bad);

    expect_startup_error(",rules=/nonexistent/faultline.rules",
                         "cannot read rules");
    expect_startup_error(badopt, "bad.rules:2:");
    expect_startup_error(",seed=banana", "seed");
    expect_startup_error(",log=/nonexistent/dir/log", "cannot open log");
}

/* Issue 12 defect 9: a NUL byte does not silently end a rules file. */
static void test_rules_nul(void)
{
    g_autofree char *path = g_build_filename(tmpdir, "nul.rules", NULL);
    g_autofree char *opt = g_strdup_printf(",rules=%s", path);
    /* Cut at the NUL, the text would be two good rules. */
    static const char text[] = "a: read drop\nb: write drop\0\nc: flush "
                               "drop\n";

    g_assert(g_file_set_contents(path, text, sizeof(text) - 1, NULL));
    expect_startup_error(opt, "nul.rules:2:14: NUL byte in rule text");
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    tmpdir = fl_tmpdir_make("fault-injector-test");
    qtest_add_func("/fault-injector/properties", test_properties);
    qtest_add_func("/fault-injector/create-and-stats", test_create_and_stats);
    qtest_add_func("/fault-injector/add-delete", test_add_delete);
    qtest_add_func("/fault-injector/state-log-reset", test_state_log_reset);
    qtest_add_func("/fault-injector/bad-ids", test_bad_ids);
    qtest_add_func("/fault-injector/startup-errors", test_startup_errors);
    qtest_add_func("/fault-injector/decide", test_decide);
    qtest_add_func("/fault-injector/decide-lie-corrupt",
                   test_decide_lie_corrupt);
    qtest_add_func("/fault-injector/reset-log-cursor", test_reset_log_cursor);
    qtest_add_func("/fault-injector/log-durable", test_log_durable);
    qtest_add_func("/fault-injector/log-write-error", test_log_write_error);
    qtest_add_func("/fault-injector/machine-reset", test_machine_reset);
    qtest_add_func("/fault-injector/delete-in-use", test_delete_in_use);
    qtest_add_func("/fault-injector/rules-nul", test_rules_nul);
    ret = g_test_run();
    fl_tmpdir_remove(tmpdir);
    return ret;
}
