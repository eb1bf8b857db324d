/*
 * Helpers shared by faultline's qtests (fault-injector-test, nvme-fault-test,
 * syncblk-test): scratch files, the injector's QMP statistics, startup
 * errors, deterministic-mode machines.
 *
 * Header-only (static inline), so each test stays one source file.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef FAULTLINE_QTEST_H
#define FAULTLINE_QTEST_H

#include "libqtest.h"
#include "qobject/qdict.h"
#include "qobject/qlist.h"

/*
 * Deterministic mode under TCG -icount: with a BIOS of HLT instructions
 * (fl_hlt_bios) the vCPU stays halted, so nothing but the test drives the
 * devices, while virtual time still moves: sleep=off warps an idle vCPU to
 * the next QEMU_CLOCK_VIRTUAL deadline.
 */
#define FL_DET_ICOUNT_ACCEL "-accel tcg -icount shift=4,sleep=off,align=off "

/* Write @text to @dir/@name; returns the path (g_free it). */
static inline char *fl_write_file(const char *dir, const char *name,
                                  const char *text)
{
    char *path = g_build_filename(dir, name, NULL);

    g_assert(g_file_set_contents(path, text, -1, NULL));
    return path;
}

/* A 64 KiB firmware image of HLT instructions in @dir; returns its path. */
static inline char *fl_hlt_bios(const char *dir)
{
    g_autofree char *rom = g_malloc(65536);
    char *path = g_build_filename(dir, "hlt.bin", NULL);

    memset(rom, 0xf4, 65536);
    g_assert(g_file_set_contents(path, rom, 65536, NULL));
    return path;
}

/* x-fault-query-stats of injector @id (unref it). */
static inline QDict *fl_query_stats(QTestState *qts, const char *id)
{
    return qtest_qmp_assert_success_ref(qts,
        "{'execute': 'x-fault-query-stats', 'arguments': {'id': %s}}", id);
}

/* The statistics of rule @name of injector @id (unref it); must exist. */
static inline QDict *fl_rule_stats(QTestState *qts, const char *id,
                                   const char *name)
{
    QDict *st = fl_query_stats(qts, id);
    QListEntry *e;

    QLIST_FOREACH_ENTRY(qdict_get_qlist(st, "rules"), e) {
        QDict *r = qobject_to(QDict, qlist_entry_obj(e));

        if (!strcmp(qdict_get_str(r, "name"), name)) {
            qobject_ref(r);
            qobject_unref(st);
            return r;
        }
    }
    g_test_message("no rule '%s' in fault-injector '%s'", name, id);
    g_assert_not_reached();
}

/* Times rule @name of injector @id fired. */
static inline int64_t fl_rule_hits(QTestState *qts, const char *id,
                                   const char *name)
{
    QDict *r = fl_rule_stats(qts, id, name);
    int64_t hits = qdict_get_int(r, "hits");

    qobject_unref(r);
    return hits;
}

/*
 * QEMU started with @args (after -display none -nodefaults) must refuse
 * to start: exit non-zero with @msg on stderr.
 */
static inline void fl_expect_startup_error(const char *args, const char *msg)
{
    g_autofree char *cmd = g_strdup_printf("exec %s -display none "
                                           "-nodefaults %s",
                                           getenv("QTEST_QEMU_BINARY"), args);
    char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
    g_autofree char *out = NULL, *err = NULL;
    int status;

    g_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                          &out, &err, &status, NULL));
    if (!strstr(err, msg)) {
        g_test_message("stderr: %s", err);
    }
    g_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    g_assert(strstr(err, msg));
}

#endif /* FAULTLINE_QTEST_H */
