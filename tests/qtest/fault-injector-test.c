/*
 * QTest for the fault-injector object and its x-fault-* QMP commands.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "libqtest.h"
#include "qobject/qdict.h"
#include "qobject/qlist.h"

static char *tmpdir;
static const char *const rule_files[] = {
    "ok.rules", "bad.rules", "nul.rules", "reset.jsonl", "durable.jsonl",
};

static char *write_rules(const char *name, const char *text)
{
    char *path = g_build_filename(tmpdir, name, NULL);

    g_assert(g_file_set_contents(path, text, -1, NULL));
    return path;
}

/* Run a command that must fail; return its error description. */
static char * G_GNUC_PRINTF(2, 3) qmp_error(QTestState *qts, const char *fmt, ...)
{
    QDict *rsp, *err;
    char *desc;
    va_list ap;

    va_start(ap, fmt);
    rsp = qtest_vqmp(qts, fmt, ap);
    va_end(ap);

    g_assert(qdict_haskey(rsp, "error"));
    err = qdict_get_qdict(rsp, "error");
    desc = g_strdup(qdict_get_str(err, "desc"));
    qobject_unref(rsp);
    return desc;
}

static QDict *query_stats(QTestState *qts)
{
    return qtest_qmp_assert_success_ref(qts,
        "{'execute': 'x-fault-query-stats', 'arguments': {'id': 'fi0'}}");
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
    g_autofree char *rules = write_rules("ok.rules",
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
    e1 = qmp_error(qts, "{'execute': 'x-fault-add-rules', 'arguments':"
                   " {'id': 'fi0', 'rules': 'c: read drop\\nd: wrte drop\\n'}}");
    g_assert(g_str_has_prefix(e1, "2:"));
    g_assert(strstr(e1, "wrte"));
    /* Duplicate names are refused as a whole too. */
    e2 = qmp_error(qts, "{'execute': 'x-fault-add-rules', 'arguments':"
                   " {'id': 'fi0', 'rules': 'a: read drop'}}");
    g_assert(strstr(e2, "'a'"));
    st = query_stats(qts);
    g_assert_nonnull(rule_at(st, 1));
    g_assert_null(rule_at(st, 2));
    qobject_unref(st);

    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-delete-rule',"
                             " 'arguments': {'id': 'fi0', 'name': 'a'}}");
    e3 = qmp_error(qts, "{'execute': 'x-fault-delete-rule',"
                   " 'arguments': {'id': 'fi0', 'name': 'a'}}");
    g_assert(strstr(e3, "no rule 'a'"));
    st = query_stats(qts);
    g_assert_cmpstr(qdict_get_str(rule_at(st, 0), "name"), ==, "b");
    g_assert_null(rule_at(st, 1));
    qobject_unref(st);

    /* Wrong argument types are QMP errors, not crashes. */
    e4 = qmp_error(qts, "{'execute': 'x-fault-add-rules', 'arguments':"
                   " {'id': 'fi0', 'rules': 5}}");
    g_assert(strstr(e4, "rules"));
    qtest_quit(qts);
}

static void test_state_log_reset(void)
{
    QTestState *qts = qtest_init("-machine none -object fault-injector,id=fi0");
    g_autofree char *e1 = NULL, *e2 = NULL;
    QDict *rsp, *st;

    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-set-state',"
                             " 'arguments': {'id': 'fi0', 'state': 3}}");
    st = query_stats(qts);
    g_assert_cmpuint(qdict_get_int(st, "state"), ==, 3);
    qobject_unref(st);
    rsp = qtest_qmp_assert_success_ref(qts, "{'execute': 'qom-get',"
        " 'arguments': {'path': '/objects/fi0', 'property': 'state'}}");
    qobject_unref(rsp);
    e1 = qmp_error(qts, "{'execute': 'x-fault-set-state',"
                   " 'arguments': {'id': 'fi0', 'state': -1}}");
    g_assert(strstr(e1, "state"));

    rsp = qtest_qmp_assert_success_ref(qts, "{'execute': 'x-fault-query-log',"
        " 'arguments': {'id': 'fi0', 'start': 0, 'max': 10}}");
    g_assert_cmpuint(qdict_get_int(rsp, "total"), ==, 0);
    g_assert(qlist_empty(qdict_get_qlist(rsp, "entries")));
    qobject_unref(rsp);
    e2 = qmp_error(qts, "{'execute': 'x-fault-query-log',"
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

static int count_lines(const char *path, const char *needle)
{
    g_autofree char *text = NULL;
    int n = 0;

    g_assert(g_file_get_contents(path, &text, NULL, NULL));
    for (char *p = text; (p = strstr(p, needle)); p++) {
        n++;
    }
    return n;
}

static void test_decide(void)
{
    QTestState *qts = qtest_init("-machine none -object fault-injector,id=fi0");
    g_autofree char *e1 = NULL;
    QDict *rsp;

    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-add-rules',"
        " 'arguments': {'id': 'fi0', 'rules':"
        " 'a: write lba=0-7 delay=1ms error=write-fault dnr\\n"
        "b: write irq-delay=5us complete=task'}}");
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
    e1 = qmp_error(qts, "{'execute': 'x-fault-decide', 'arguments':"
                   " {'id': 'fi0', 'op': 'any', 'lba': 0, 'len': 1}}");
    g_assert(strstr(e1, "unknown op 'any'"));
    qtest_quit(qts);
}

/* Issue 12 defect 8: x-fault-reset restarts the export of the log too. */
static void test_reset_log_cursor(void)
{
    g_autofree char *log = g_build_filename(tmpdir, "reset.jsonl", NULL);
    QTestState *qts = qtest_initf("-machine none -object fault-injector,"
                                  "id=fi0,log=%s,events=on", log);
    QDict *ev;

    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-add-rules',"
        " 'arguments': {'id': 'fi0', 'rules': 'w: write error=eio'}}");
    g_assert_cmpint(decide_write(qts, 0), ==, 1);
    qobject_unref(qtest_qmp_eventwait_ref(qts, "X_FAULT_INJECTED"));
    g_assert_cmpint(decide_write(qts, 8), ==, 1);
    qobject_unref(qtest_qmp_eventwait_ref(qts, "X_FAULT_INJECTED"));
    qobject_unref(query_stats(qts));
    g_assert_cmpint(count_lines(log, "\"seq\":"), ==, 2);
    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-reset',"
                             " 'arguments': {'id': 'fi0'}}");
    g_assert_cmpint(decide_write(qts, 16), ==, 1);
    qobject_unref(query_stats(qts));
    /* The file goes on: its third line is the new log's seq 0. */
    g_assert_cmpint(count_lines(log, "\"seq\":"), ==, 3);
    g_assert_cmpint(count_lines(log, "\"seq\":0,\"ordinal\":1,"), ==, 2);
    g_assert_cmpint(count_lines(log, "\"lba\":16,"), ==, 1);
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

    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-add-rules',"
        " 'arguments': {'id': 'fi0', 'rules': 'w: write every=2 drop'}}");
    for (int i = 1; i <= 6; i++) {
        decide_write(qts, i);
        g_assert_cmpint(count_lines(log, "\"rule\":\"w\""), ==, i / 2);
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
    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-add-rules',"
        " 'arguments': {'id': 'fi0', 'rules': 'w: write drop'}}");
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

    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-add-rules',"
        " 'arguments': {'id': 'fi0', 'rules': 'first: write nth=1 error=eio"
        "\\nany: write delay=1us'}}");
    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-set-state',"
                             " 'arguments': {'id': 'fi0', 'state': 2}}");
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

    e1 = qmp_error(qts, "{'execute': 'object-del', 'arguments':"
                   " {'id': 'fi0'}}");
    g_assert(strstr(e1, "fi0") && strstr(e1, "in use"));
    st = query_stats(qts);
    qobject_unref(st);
    /* An unused one goes. */
    qtest_qmp_assert_success(qts, "{'execute': 'object-del', 'arguments':"
                             " {'id': 'fi1'}}");
    g_free(qmp_error(qts, "{'execute': 'x-fault-query-stats', 'arguments':"
                     " {'id': 'fi1'}}"));
    qtest_quit(qts);
}

static void test_bad_ids(void)
{
    QTestState *qts = qtest_init("-machine none -object iothread,id=io0");
    const char *want = "no fault-injector with id 'nope'";
    char *e[7];

    e[0] = qmp_error(qts, "{'execute': 'x-fault-query-stats',"
                     " 'arguments': {'id': 'nope'}}");
    e[1] = qmp_error(qts, "{'execute': 'x-fault-reset',"
                     " 'arguments': {'id': 'nope'}}");
    e[2] = qmp_error(qts, "{'execute': 'x-fault-set-state',"
                     " 'arguments': {'id': 'nope', 'state': 1}}");
    e[3] = qmp_error(qts, "{'execute': 'x-fault-query-log',"
                     " 'arguments': {'id': 'nope'}}");
    e[4] = qmp_error(qts, "{'execute': 'x-fault-delete-rule',"
                     " 'arguments': {'id': 'nope', 'name': 'x'}}");
    e[5] = qmp_error(qts, "{'execute': 'x-fault-add-rules',"
                     " 'arguments': {'id': 'nope', 'rules': ''}}");
    e[6] = qmp_error(qts, "{'execute': 'x-fault-query-stats',"
                     " 'arguments': {'id': 'io0'}}");
    for (int i = 0; i < ARRAY_SIZE(e); i++) {
        g_assert(strstr(e[i], i < 6 ? want : "not a fault-injector"));
        g_free(e[i]);
    }
    qtest_quit(qts);
}

/* Startup errors: QEMU must exit non-zero with a clear message. */
static void expect_startup_error(const char *objopts, const char *msg)
{
    const char *qemu = getenv("QTEST_QEMU_BINARY");
    g_autofree char *obj = g_strdup_printf("fault-injector,id=fi0%s", objopts);
    char *argv[] = { (char *)qemu, (char *)"-machine", (char *)"none",
                     (char *)"-display", (char *)"none", (char *)"-object",
                     obj, NULL };
    g_autofree char *out = NULL, *err = NULL;
    int status;

    g_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                          &out, &err, &status, NULL));
    g_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    if (!strstr(err, msg)) {
        g_test_message("stderr: %s", err);
    }
    g_assert(strstr(err, msg));
}

static void test_startup_errors(void)
{
    g_autofree char *bad = write_rules("bad.rules", "ok: read drop\n"
                                       "bad: read lba=9-3 drop\n");
    g_autofree char *badopt = g_strdup_printf(",rules=%s", bad);

    expect_startup_error(",rules=/nonexistent/faultline.rules", "cannot read rules");
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
    tmpdir = g_dir_make_tmp("fault-injector-test-XXXXXX", NULL);
    qtest_add_func("/fault-injector/properties", test_properties);
    qtest_add_func("/fault-injector/create-and-stats", test_create_and_stats);
    qtest_add_func("/fault-injector/add-delete", test_add_delete);
    qtest_add_func("/fault-injector/state-log-reset", test_state_log_reset);
    qtest_add_func("/fault-injector/bad-ids", test_bad_ids);
    qtest_add_func("/fault-injector/startup-errors", test_startup_errors);
    qtest_add_func("/fault-injector/decide", test_decide);
    qtest_add_func("/fault-injector/reset-log-cursor", test_reset_log_cursor);
    qtest_add_func("/fault-injector/log-durable", test_log_durable);
    qtest_add_func("/fault-injector/log-write-error", test_log_write_error);
    qtest_add_func("/fault-injector/machine-reset", test_machine_reset);
    qtest_add_func("/fault-injector/delete-in-use", test_delete_in_use);
    qtest_add_func("/fault-injector/rules-nul", test_rules_nul);
    ret = g_test_run();
    for (int i = 0; i < ARRAY_SIZE(rule_files); i++) {
        g_autofree char *path = g_build_filename(tmpdir, rule_files[i], NULL);

        unlink(path);
    }
    rmdir(tmpdir);
    g_free(tmpdir);
    return ret;
}
