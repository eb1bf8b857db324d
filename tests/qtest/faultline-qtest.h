/*
 * Helpers shared by faultline's qtests (fault-injector-test, fault-inject-
 * test, nvme-fault-test, syncblk-test): scratch directories, machines with
 * an injector, PCI setup, the injector's QMP commands, its fault log,
 * startup errors and polling.
 *
 * Header-only (static inline), so each test stays one source file and the
 * build wiring (tests/qtest/faultline-qtests.list) stays one line a test.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef FAULTLINE_QTEST_H
#define FAULTLINE_QTEST_H

#include "libqtest.h"
#include "qobject/qdict.h"
#include "qobject/qlist.h"
#include "libqos/pci.h"
#include "libqos/pci-pc.h"
#include "libqos/malloc-pc.h"

/*
 * Poll @cond up to @tries times, @usec apart; true once it holds.  The
 * devices complete in QEMU's main loop, so only real time helps.
 */
#define FL_POLL(cond, tries, usec) ({                   \
    bool fl_ok_ = false;                                \
    for (int fl_i_ = 0; fl_i_ < (tries); fl_i_++) {     \
        if (cond) {                                     \
            fl_ok_ = true;                              \
            break;                                      \
        }                                               \
        g_usleep(usec);                                 \
    }                                                   \
    fl_ok_;                                             \
})

/* A scratch directory for one test binary; fl_tmpdir_remove() empties it. */
static inline char *fl_tmpdir_make(const char *prefix)
{
    g_autofree char *tmpl = g_strdup_printf("%s-XXXXXX", prefix);
    char *dir = g_dir_make_tmp(tmpl, NULL);

    g_assert(dir);
    return dir;
}

/* Delete the files in @dir (flat: the tests make no subdirectories). */
static inline void fl_tmpdir_remove(char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;

    g_assert(d);
    while ((name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);

        unlink(path);
    }
    g_dir_close(d);
    rmdir(dir);
    g_free(dir);
}

/* Write @text to @dir/@name; returns the path (g_free it). */
static inline char *fl_write_file(const char *dir, const char *name,
                                  const char *text)
{
    char *path = g_build_filename(dir, name, NULL);

    g_assert(g_file_set_contents(path, text, -1, NULL));
    return path;
}

/* A zero-filled file @dir/@name of @size bytes; returns the path. */
static inline char *fl_zero_file(const char *dir, const char *name,
                                 off_t size)
{
    char *path = fl_write_file(dir, name, "");

    g_assert(truncate(path, size) == 0);
    return path;
}

/* How many lines of file @path contain @needle. */
static inline int fl_file_lines_with(const char *path, const char *needle)
{
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    int n = 0;

    g_assert(g_file_get_contents(path, &text, NULL, NULL));
    lines = g_strsplit(text, "\n", -1);
    for (int i = 0; lines[i]; i++) {
        n += strstr(lines[i], needle) != NULL;
    }
    return n;
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

/*
 * Deterministic mode under TCG -icount: with a BIOS of HLT instructions
 * (fl_hlt_bios) the vCPU stays halted, so nothing but the test drives the
 * devices, while virtual time still moves: sleep=off warps an idle vCPU to
 * the next QEMU_CLOCK_VIRTUAL deadline.
 */
#define FL_DET_ICOUNT_ACCEL "-accel tcg -icount shift=4,sleep=off,align=off "

typedef enum FlMode {
    FL_MODE_NORMAL,
    FL_MODE_DET_ICOUNT,     /* deterministic=on under TCG -icount */
    FL_MODE_DET_QTEST,      /* deterministic=on under the qtest accelerator */
} FlMode;

/*
 * The start of a device test's command line: a HLT BIOS in @dir (qtest
 * runs no guest code, but q35 insists on an image, and -icount needs one
 * that halts), the accelerator for @mode and, if @rules is not NULL, a
 * fault-injector "fi0" with those rules (written to @dir/fi0.rules) and
 * seed 1.  The device then takes fault-injector=fi0.
 */
static inline char *fl_machine_args(const char *dir, const char *rules,
                                    FlMode mode)
{
    g_autofree char *bios = fl_hlt_bios(dir);
    g_autofree char *path = NULL;
    g_autofree char *fi = NULL;

    if (rules) {
        path = fl_write_file(dir, "fi0.rules", rules);
        fi = g_strdup_printf("-object fault-injector,id=fi0,rules=%s,seed=1%s ",
                             path, mode != FL_MODE_NORMAL ?
                             ",deterministic=on" : "");
    }
    return g_strdup_printf("%s-bios %s %s",
                           mode == FL_MODE_DET_ICOUNT ?
                           FL_DET_ICOUNT_ACCEL : "", bios, fi ? fi : "");
}

/* A PCI function under test, its BAR0 mapped, bus mastering on. */
typedef struct FlPci {
    QGuestAllocator alloc;
    QPCIBus *bus;
    QPCIDevice *dev;
    QPCIBar bar;
} FlPci;

static inline void fl_pci_start(FlPci *p, QTestState *qts, int slot)
{
    pc_alloc_init(&p->alloc, qts, ALLOC_NO_FLAGS);
    p->bus = qpci_new_pc(qts, &p->alloc);
    p->dev = qpci_device_find(p->bus, QPCI_DEVFN(slot, 0));
    g_assert(p->dev);
    qpci_device_enable(p->dev);
    p->bar = qpci_iomap(p->dev, 0, NULL);
}

static inline void fl_pci_stop(FlPci *p)
{
    g_free(p->dev);
    qpci_free_pc(p->bus);
    alloc_destroy(&p->alloc);
}

/* Whatever the guest did, QEMU answers QMP and the VM is running. */
static inline void fl_assert_running(QTestState *qts)
{
    QDict *rsp = qtest_qmp_assert_success_ref(qts,
                                              "{'execute': 'query-status'}");

    g_assert(qdict_get_bool(rsp, "running"));
    qobject_unref(rsp);
}

/* Run a QMP command that must fail; returns its error description. */
static inline char * G_GNUC_PRINTF(2, 3) fl_qmp_error(QTestState *qts,
                                                      const char *fmt, ...)
{
    QDict *rsp;
    char *desc;
    va_list ap;

    va_start(ap, fmt);
    rsp = qtest_vqmp(qts, fmt, ap);
    va_end(ap);
    g_assert(qdict_haskey(rsp, "error"));
    desc = g_strdup(qdict_get_str(qdict_get_qdict(rsp, "error"), "desc"));
    qobject_unref(rsp);
    return desc;
}

static inline void fl_add_rules(QTestState *qts, const char *id,
                                const char *rules)
{
    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-add-rules',"
                             " 'arguments': {'id': %s, 'rules': %s}}",
                             id, rules);
}

static inline void fl_delete_rule(QTestState *qts, const char *id,
                                  const char *name)
{
    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-delete-rule',"
                             " 'arguments': {'id': %s, 'name': %s}}",
                             id, name);
}

static inline void fl_set_state(QTestState *qts, const char *id,
                                int64_t state)
{
    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-set-state',"
                             " 'arguments': {'id': %s, 'state': %" PRId64
                             "}}", id, state);
}

/* x-fault-query-stats of injector @id (unref it). */
static inline QDict *fl_query_stats(QTestState *qts, const char *id)
{
    return qtest_qmp_assert_success_ref(qts,
        "{'execute': 'x-fault-query-stats', 'arguments': {'id': %s}}", id);
}

/* One integer member of x-fault-query-stats (state, digest, log-total). */
static inline int64_t fl_stat(QTestState *qts, const char *id,
                              const char *key)
{
    QDict *st = fl_query_stats(qts, id);
    int64_t val = qdict_get_int(st, key);

    qobject_unref(st);
    return val;
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

/* Counter @key ("hits", "matched") of rule @name of injector @id. */
static inline int64_t fl_rule_count(QTestState *qts, const char *id,
                                    const char *name, const char *key)
{
    QDict *r = fl_rule_stats(qts, id, name);
    int64_t val = qdict_get_int(r, key);

    qobject_unref(r);
    return val;
}

/* Times rule @name of injector @id fired. */
static inline int64_t fl_rule_hits(QTestState *qts, const char *id,
                                   const char *name)
{
    return fl_rule_count(qts, id, name, "hits");
}

/*
 * The byte offsets of a logged corrupt action ("corrupt=N at=A,B,..."),
 * at most @max of them, into @off; returns how many.
 */
static inline int fl_parse_offsets(const char *action, uint64_t *off,
                                   int max)
{
    const char *p = strstr(action, " at=");
    char *end;
    int n = 0;

    g_assert(p);
    for (p += 4; n < max; p = end + 1) {
        off[n++] = g_ascii_strtoull(p, &end, 10);
        if (*end != ',') {
            break;
        }
    }
    return n;
}

/* The offsets of rule @rule's first entry in x-fault-query-log of @id. */
static inline int fl_logged_offsets(QTestState *qts, const char *id,
                                    const char *rule, uint64_t *off, int max)
{
    QDict *rsp = qtest_qmp_assert_success_ref(qts,
        "{'execute': 'x-fault-query-log', 'arguments': {'id': %s}}", id);
    QListEntry *e;
    int n = -1;

    QLIST_FOREACH_ENTRY(qdict_get_qlist(rsp, "entries"), e) {
        QDict *ent = qobject_to(QDict, qlist_entry_obj(e));

        if (n < 0 && !strcmp(qdict_get_str(ent, "rule"), rule)) {
            n = fl_parse_offsets(qdict_get_str(ent, "action"), off, max);
        }
    }
    qobject_unref(rsp);
    g_assert_cmpint(n, >=, 0);
    return n;
}

/*
 * @got's @len bytes are all @byte but for those at the sorted offsets
 * @off[0..cnt), which are @byte flipped (corrupt= inverts a byte).
 */
static inline void fl_assert_flipped(const uint8_t *got, size_t len,
                                     uint8_t byte, const uint64_t *off,
                                     int cnt)
{
    int k = 0;

    for (size_t i = 0; i < len; i++) {
        bool flip = k < cnt && off[k] == i;

        g_assert_cmphex(got[i], ==, flip ? byte ^ 0xff : byte);
        k += flip;
    }
    g_assert_cmpint(k, ==, cnt);
}

/* fl_assert_flipped() on 4 KiB of guest memory at @addr. */
static inline void fl_assert_guest_flipped(QTestState *qts, uint64_t addr,
                                           uint8_t byte, const uint64_t *off,
                                           int cnt)
{
    uint8_t got[4096];

    qtest_memread(qts, addr, got, sizeof(got));
    fl_assert_flipped(got, sizeof(got), byte, off, cnt);
}

/* libqos' PC hotplug port (tests/qtest/libqos/pci-pc.c): eject a slot. */
#define FL_PCIHP_EJECT  (0xae00 + 0x0008)

static inline bool fl_device_deleted(QTestState *qts)
{
    QDict *ev;

    qtest_qmp_assert_success(qts, "{'execute': 'query-status'}");
    ev = qtest_qmp_event_ref(qts, "DEVICE_DELETED");
    qobject_unref(ev);
    return ev != NULL;
}

/*
 * Remove device @id from PCI slot @slot of a pc machine as the guest's
 * ACPI hotplug does, and wait (2 s at most) until it is finalized: a
 * reference left behind never gets there.
 */
static inline void fl_pci_unplug(QTestState *qts, const char *id, int slot)
{
    qtest_qmp_device_del_send(qts, id);
    qtest_outl(qts, FL_PCIHP_EJECT, 1 << slot);
    g_assert(FL_POLL(fl_device_deleted(qts), 100, 20000));
}

/* x-fault-add-rules of @rules to injector @id: NULL, or its error. */
static inline char *fl_try_add_rules(QTestState *qts, const char *id,
                                     const char *rules)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'x-fault-add-rules', "
                           "'arguments': {'id': %s, 'rules': %s}}", id, rules);
    char *desc = NULL;

    if (qdict_haskey(rsp, "error")) {
        desc = g_strdup(qdict_get_str(qdict_get_qdict(rsp, "error"), "desc"));
    }
    qobject_unref(rsp);
    return desc;
}

/*
 * Does injector @id refuse rule @rule (added as "probe: @rule", so the
 * error's column counts from that) now, with error
 * @msg?  An attached user refuses what it cannot do.  An accepted probe
 * is deleted again.
 */
static inline bool fl_refuses(QTestState *qts, const char *id,
                              const char *rule, const char *msg)
{
    g_autofree char *text = g_strdup_printf("probe: %s", rule);
    g_autofree char *err = fl_try_add_rules(qts, id, text);

    if (err) {
        g_assert_cmpstr(err, ==, msg);
        return true;
    }
    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-delete-rule',"
                             " 'arguments': {'id': %s, 'name': 'probe'}}",
                             id);
    return false;
}

/*
 * object-del of injector @id: true if it went, false if it is in use
 * (the only error allowed).
 */
static inline bool fl_object_del(QTestState *qts, const char *id)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'object-del', "
                           "'arguments': {'id': %s}}", id);
    bool ok = !qdict_haskey(rsp, "error");

    if (!ok) {
        g_assert(strstr(qdict_get_str(qdict_get_qdict(rsp, "error"), "desc"),
                        "in use"));
    }
    qobject_unref(rsp);
    return ok;
}

/*
 * QEMU started with @args (after -display none -nodefaults) must refuse
 * to start: it exits (no crash) with a non-zero code, stored in @code if
 * not NULL.  Returns its stderr (g_free it).
 */
static inline char *fl_startup_error(const char *args, int *code)
{
    g_autofree char *cmd = g_strdup_printf("exec %s -display none "
                                           "-nodefaults %s",
                                           getenv("QTEST_QEMU_BINARY"), args);
    char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
    g_autofree char *out = NULL;
    char *err = NULL;
    int status;

    g_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                          &out, &err, &status, NULL));
    g_test_message("stderr: %s", err);
    g_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    if (code) {
        *code = WEXITSTATUS(status);
    }
    return err;
}

/* fl_startup_error() whose stderr contains @msg. */
static inline void fl_expect_startup_error(const char *args, const char *msg)
{
    g_autofree char *err = fl_startup_error(args, NULL);

    g_assert(strstr(err, msg));
}

#endif /* FAULTLINE_QTEST_H */
