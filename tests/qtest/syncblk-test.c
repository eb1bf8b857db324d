/*
 * QTest for syncblk-pci: register interface, the three completion modes,
 * injected errors and latency, and bad commands (which must never crash
 * QEMU).  The register layout is written out here on purpose: the test
 * checks the interface documented in docs/devices.md, not the device's own
 * constants.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "libqtest.h"
#include "qobject/qdict.h"
#include "qobject/qlist.h"
#include "libqos/pci.h"
#include "libqos/pci-pc.h"
#include "libqos/malloc-pc.h"
#include "hw/pci/pci_regs.h"
#include "../../hw/block/syncblk-regs.h"

#define IMG_SIZE            (64 * 1024 * 1024)
#define IMG_SECTORS         (IMG_SIZE / 512)

#define SLOT(i, r)          (REG_SLOT_BASE + (i) * REG_SLOT_STRIDE + (r))

#define MSI_DATA            0x5b10c000u

static const char *rules_text =
    "eio:    write lba=100 error=eio\n"
    "nospc:  write lba=200 error=enospc\n"
    "wfault: write lba=300 error=write-fault\n"
    "rerr:   read  lba=400 error=read-error\n"
    "intern: write lba=500 error=internal\n"
    "lost:   write lba=600 drop\n"
    "tmo:    write lba=700 error=timeout\n"
    "after:  write lba=800 error=write-fault when=after\n"
    "toirq:  write lba=900 complete=irq\n"
    "slow:   write lba=1000 delay=5ms\n";

typedef struct SB {
    QTestState *qts;
    QPCIBus *bus;
    QPCIDevice *dev;
    QPCIBar bar;
    QGuestAllocator alloc;
    uint64_t msi_addr;
    char *img;
    char *rules;
    char *bios;
} SB;

/*
 * @det: fault-injector deterministic=on under TCG -icount; the BIOS is then
 * 64 KiB of HLT so the halted vCPU runs nothing while virtual time warps
 * (sleep=off) to the device's completion timers.
 */
static void sb_start_full(SB *sb, const char *completion, bool faults,
                          bool det)
{
    g_autofree char *fi = NULL;
    g_autofree uint8_t *hlt = NULL;
    int fd;

    memset(sb, 0, sizeof(*sb));
    fd = g_file_open_tmp("syncblk-test.XXXXXX", &sb->img, NULL);
    g_assert(fd >= 0);
    g_assert(ftruncate(fd, IMG_SIZE) == 0);
    close(fd);
    /*
     * qtest runs no guest code, but q35 insists on a BIOS image: a blank
     * 64 KiB one keeps the test independent of installed firmware.
     */
    fd = g_file_open_tmp("syncblk-bios.XXXXXX", &sb->bios, NULL);
    g_assert(fd >= 0);
    g_assert(ftruncate(fd, 64 * 1024) == 0);
    close(fd);
    if (det) {
        hlt = g_malloc(64 * 1024);
        memset(hlt, 0xf4, 64 * 1024);
        g_assert(g_file_set_contents(sb->bios, (char *)hlt, 64 * 1024,
                                     NULL));
    }
    if (faults) {
        fd = g_file_open_tmp("syncblk-rules.XXXXXX", &sb->rules, NULL);
        g_assert(fd >= 0);
        close(fd);
        g_assert(g_file_set_contents(sb->rules, rules_text, -1, NULL));
        fi = g_strdup_printf("-object fault-injector,id=fi0,rules=%s,seed=1%s",
                             sb->rules, det ? ",deterministic=on" : "");
    }
    sb->qts = qtest_initf("%s-machine q35 -nodefaults "
                          "-global apic-common.vapic=off -bios %s %s "
                          "-blockdev driver=file,filename=%s,node-name=d0 "
                          "-device syncblk-pci,drive=d0,completion=%s%s,"
                          "addr=04.0",
                          det ? "-accel tcg -icount shift=4,sleep=off,"
                          "align=off " : "",
                          sb->bios, fi ? fi : "", sb->img, completion,
                          fi ? ",fault-injector=fi0" : "");
    pc_alloc_init(&sb->alloc, sb->qts, ALLOC_NO_FLAGS);
    sb->bus = qpci_new_pc(sb->qts, &sb->alloc);
    sb->dev = qpci_device_find(sb->bus, QPCI_DEVFN(4, 0));
    g_assert(sb->dev);
    qpci_device_enable(sb->dev);
    sb->bar = qpci_iomap(sb->dev, 0, NULL);
}

static void sb_start(SB *sb, const char *completion, bool faults)
{
    sb_start_full(sb, completion, faults, false);
}

/* Point MSI-X vector 0 at guest RAM: a delivered message shows up there. */
static void sb_msix_to_ram(SB *sb)
{
    QPCIDevice *d = sb->dev;
    uint64_t e = d->msix_table_off;

    qpci_msix_enable(d);
    sb->msi_addr = guest_alloc(&sb->alloc, 4);
    qtest_writel(sb->qts, sb->msi_addr, 0);
    qpci_io_writel(d, d->msix_table_bar, e + PCI_MSIX_ENTRY_LOWER_ADDR,
                   (uint32_t)sb->msi_addr);
    qpci_io_writel(d, d->msix_table_bar, e + PCI_MSIX_ENTRY_UPPER_ADDR,
                   sb->msi_addr >> 32);
    qpci_io_writel(d, d->msix_table_bar, e + PCI_MSIX_ENTRY_DATA, MSI_DATA);
    qpci_io_writel(d, d->msix_table_bar, e + PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
}

/* True once (and clears it) if an MSI-X message arrived. */
static bool sb_msi_seen(SB *sb)
{
    uint32_t v = qtest_readl(sb->qts, sb->msi_addr);

    qtest_writel(sb->qts, sb->msi_addr, 0);
    g_assert(v == 0 || v == MSI_DATA);
    return v == MSI_DATA;
}

static void sb_stop(SB *sb)
{
    QDict *rsp;

    /* Whatever happened, QEMU must still be alive and running. */
    rsp = qtest_qmp_assert_success_ref(sb->qts,
                                       "{'execute': 'query-status'}");
    g_assert(qdict_get_bool(rsp, "running"));
    qobject_unref(rsp);
    g_free(sb->dev);
    qpci_free_pc(sb->bus);
    alloc_destroy(&sb->alloc);
    qtest_quit(sb->qts);
    unlink(sb->img);
    g_free(sb->img);
    unlink(sb->bios);
    g_free(sb->bios);
    if (sb->rules) {
        unlink(sb->rules);
        g_free(sb->rules);
    }
}

static uint32_t rd(SB *sb, uint64_t off)
{
    return qpci_io_readl(sb->dev, sb->bar, off);
}

static void wr(SB *sb, uint64_t off, uint32_t val)
{
    qpci_io_writel(sb->dev, sb->bar, off, val);
}

/* A scatter list of @n entries, each @len bytes, in one fresh buffer. */
static uint64_t sb_list(SB *sb, uint64_t *data, unsigned n, uint32_t len)
{
    uint64_t list = guest_alloc(&sb->alloc, n * 16);

    for (unsigned i = 0; i < n; i++) {
        if (!data[i]) {
            data[i] = guest_alloc(&sb->alloc, len);
        }
        qtest_writeq(sb->qts, list + i * 16, data[i]);
        qtest_writel(sb->qts, list + i * 16 + 8, len);
        qtest_writel(sb->qts, list + i * 16 + 12, 0);
    }
    return list;
}

static void sb_submit(SB *sb, int slot, uint32_t op, uint64_t lba,
                      uint32_t nsec, uint64_t list, uint32_t nent)
{
    wr(sb, SLOT(slot, SLOT_OPCODE), op);
    wr(sb, SLOT(slot, SLOT_LBA_LO), (uint32_t)lba);
    wr(sb, SLOT(slot, SLOT_LBA_HI), lba >> 32);
    wr(sb, SLOT(slot, SLOT_NUM_SECTORS), nsec);
    wr(sb, SLOT(slot, SLOT_LIST_LO), (uint32_t)list);
    wr(sb, SLOT(slot, SLOT_LIST_HI), list >> 32);
    wr(sb, SLOT(slot, SLOT_NUM_ENTRIES), nent);
    wr(sb, SLOT(slot, SLOT_DOORBELL), DOORBELL_SUBMIT);
}

/* Poll STATUS until it leaves BUSY (AIO completes in the main loop). */
static uint32_t sb_wait(SB *sb, int slot)
{
    for (int i = 0; i < 50000; i++) {
        uint32_t st = rd(sb, SLOT(slot, SLOT_STATUS));

        if (st != ST_BUSY) {
            return st;
        }
        g_usleep(100);
    }
    return ST_BUSY;
}

/* One 4 KiB I/O from/to one buffer; returns STATUS, ERROR in @err. */
static uint32_t sb_io(SB *sb, uint32_t op, uint64_t lba, uint64_t buf,
                      uint32_t *err)
{
    uint64_t data[1] = { buf };
    uint64_t list = sb_list(sb, data, 1, 4096);
    uint32_t st;

    sb_submit(sb, 0, op, lba, 8, list, 1);
    st = sb_wait(sb, 0);
    *err = rd(sb, SLOT(0, SLOT_ERROR));
    return st;
}

static void fill(uint8_t *p, size_t len, uint8_t seed)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = seed + i * 7 + (i >> 9);
    }
}

static void test_registers(void)
{
    const char *modes[] = { "task", "irq", "thread" };

    for (int m = 0; m < 3; m++) {
        SB sb;

        sb_start(&sb, modes[m], false);
        g_assert_cmphex(rd(&sb, REG_MAGIC), ==, 0x4b425953);
        g_assert_cmpuint(rd(&sb, REG_VERSION), ==, 1);
        g_assert_cmpuint(rd(&sb, REG_CAPACITY_LO), ==, IMG_SECTORS);
        g_assert_cmpuint(rd(&sb, REG_CAPACITY_HI), ==, 0);
        g_assert_cmpuint(rd(&sb, REG_BLOCK_SIZE), ==, 512);
        g_assert_cmpuint(rd(&sb, REG_MODE), ==, m);
        g_assert_cmphex(rd(&sb, REG_FEATURES), ==, 0xf);
        g_assert_cmpuint(rd(&sb, REG_NUM_SLOTS), ==, 16);
        g_assert_cmpuint(rd(&sb, REG_MAX_SECTORS), ==, 4096);
        g_assert_cmpuint(rd(&sb, REG_MAX_ENTRIES), ==, 512);
        g_assert_cmpuint(rd(&sb, REG_TIMEOUT_MS), ==, 1000);
        g_assert_cmpuint(rd(&sb, SLOT(3, SLOT_STATUS)), ==, ST_IDLE);
        /* 64-bit access is split into two 32-bit halves */
        g_assert_cmphex(qpci_io_readq(sb.dev, sb.bar, REG_CAPACITY_LO), ==,
                        IMG_SECTORS);
        /* no injector: the state register reads 0 and ignores writes */
        wr(&sb, REG_FAULT_STATE, 5);
        g_assert_cmpuint(rd(&sb, REG_FAULT_STATE), ==, 0);
        g_assert_cmpuint(qpci_config_readw(sb.dev, PCI_VENDOR_ID), ==,
                         0x1af4);
        g_assert_cmpuint(qpci_config_readw(sb.dev, PCI_DEVICE_ID), ==,
                         0x10f0);
        sb_stop(&sb);
    }
}

/* Write a pattern over two scatter entries, read it back over four. */
static void rw_roundtrip(SB *sb, int slot, uint32_t ctx)
{
    uint8_t out[8192], in[8192];
    uint64_t wdata[2] = { 0 }, rdata[4] = { 0 };
    uint64_t wlist = sb_list(sb, wdata, 2, 4096);
    uint64_t rlist = sb_list(sb, rdata, 4, 2048);
    uint32_t st;

    fill(out, sizeof(out), 0x11 * (slot + 1));
    qtest_memwrite(sb->qts, wdata[0], out, 4096);
    qtest_memwrite(sb->qts, wdata[1], out + 4096, 4096);
    sb_submit(sb, slot, OP_WRITE, 2048 + slot * 16, 16, wlist, 2);
    if (ctx == CTX_TASK) {
        /* the data moved during the doorbell write */
        g_assert_cmpuint(rd(sb, SLOT(slot, SLOT_STATUS)), ==, ST_DONE);
    }
    st = sb_wait(sb, slot);
    g_assert_cmpuint(st, ==, ST_DONE);
    g_assert_cmpuint(rd(sb, SLOT(slot, SLOT_ERROR)), ==, 0);
    g_assert_cmpuint(rd(sb, SLOT(slot, SLOT_CTX)), ==, ctx);
    if (ctx != CTX_TASK) {
        g_assert(sb_msi_seen(sb));
    }

    sb_submit(sb, slot, OP_READ, 2048 + slot * 16, 16, rlist, 4);
    g_assert_cmpuint(sb_wait(sb, slot), ==, ST_DONE);
    if (ctx != CTX_TASK) {
        g_assert(sb_msi_seen(sb));
    }
    for (int i = 0; i < 4; i++) {
        qtest_memread(sb->qts, rdata[i], in + i * 2048, 2048);
    }
    g_assert(memcmp(in, out, sizeof(in)) == 0);
}

static void test_task_rw(void)
{
    SB sb;

    sb_start(&sb, "task", false);
    rw_roundtrip(&sb, 0, CTX_TASK);
    rw_roundtrip(&sb, 15, CTX_TASK);
    g_assert_cmpuint(rd(&sb, REG_CNT_DONE_TASK), ==, 4);
    g_assert_cmpuint(rd(&sb, REG_CNT_DONE_IRQ), ==, 0);
    g_assert_cmpuint(rd(&sb, REG_CNT_CMDS), ==, 4);
    sb_stop(&sb);
}

static void test_async_rw(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = !strcmp(mode, "irq") ? CTX_IRQ : CTX_THREAD;
    SB sb;

    sb_start(&sb, mode, false);
    sb_msix_to_ram(&sb);
    rw_roundtrip(&sb, 0, ctx);
    rw_roundtrip(&sb, 7, ctx);
    g_assert_cmpuint(rd(&sb, ctx == CTX_IRQ ? REG_CNT_DONE_IRQ :
                        REG_CNT_DONE_THREAD), ==, 4);
    g_assert_cmpuint(rd(&sb, REG_CNT_DONE_TASK), ==, 0);
    sb_stop(&sb);
}

/* Several commands in flight at once, in different slots. */
static void test_irq_many_slots(void)
{
    uint64_t data[16][1] = { { 0 } };
    uint64_t list[16];
    SB sb;

    sb_start(&sb, "irq", false);
    sb_msix_to_ram(&sb);
    for (int i = 0; i < 16; i++) {
        list[i] = sb_list(&sb, data[i], 1, 4096);
        qtest_memset(sb.qts, data[i][0], i + 1, 4096);
    }
    for (int i = 0; i < 16; i++) {
        sb_submit(&sb, i, OP_WRITE, i * 8, 8, list[i], 1);
    }
    for (int i = 0; i < 16; i++) {
        g_assert_cmpuint(sb_wait(&sb, i), ==, ST_DONE);
    }
    for (int i = 0; i < 16; i++) {
        qtest_memset(sb.qts, data[i][0], 0, 4096);
        sb_submit(&sb, i, OP_READ, i * 8, 8, list[i], 1);
    }
    for (int i = 0; i < 16; i++) {
        g_assert_cmpuint(sb_wait(&sb, i), ==, ST_DONE);
        g_assert_cmpuint(qtest_readb(sb.qts, data[i][0] + 4095), ==, i + 1);
    }
    g_assert_cmpuint(rd(&sb, REG_CNT_DONE_IRQ), ==, 32);
    sb_stop(&sb);
}

static QDict *rule_stats(SB *sb, const char *name)
{
    QDict *st = qtest_qmp_assert_success_ref(sb->qts,
        "{'execute': 'x-fault-query-stats', 'arguments': {'id': 'fi0'}}");
    QList *rules = qdict_get_qlist(st, "rules");
    QListEntry *e;

    QLIST_FOREACH_ENTRY(rules, e) {
        QDict *r = qobject_to(QDict, qlist_entry_obj(e));

        if (!strcmp(qdict_get_str(r, "name"), name)) {
            qobject_ref(r);
            qobject_unref(st);
            return r;
        }
    }
    g_assert_not_reached();
}

static void assert_hits(SB *sb, const char *name, int64_t hits)
{
    QDict *r = rule_stats(sb, name);

    g_assert_cmpint(qdict_get_int(r, "hits"), ==, hits);
    qobject_unref(r);
}

static void test_errors(gconstpointer opaque)
{
    const char *mode = opaque;
    bool task = !strcmp(mode, "task");
    static const struct {
        uint32_t op;
        uint64_t lba;
        uint32_t err;
        const char *rule;
    } cases[] = {
        { OP_WRITE, 100, 5, "eio" },        /* EIO */
        { OP_WRITE, 200, 28, "nospc" },     /* ENOSPC */
        { OP_WRITE, 300, 61, "wfault" },    /* ENODATA: medium error */
        { OP_READ, 400, 74, "rerr" },       /* EBADMSG: unrecovered read */
        { OP_WRITE, 500, 121, "intern" },   /* EREMOTEIO */
    };
    uint64_t buf;
    uint32_t err;
    SB sb;

    sb_start(&sb, mode, true);
    if (!task) {
        sb_msix_to_ram(&sb);
    }
    buf = guest_alloc(&sb.alloc, 4096);
    for (int i = 0; i < ARRAY_SIZE(cases); i++) {
        g_assert_cmpuint(sb_io(&sb, cases[i].op, cases[i].lba, buf, &err), ==,
                         ST_ERROR);
        g_assert_cmpuint(err, ==, cases[i].err);
        g_assert(task || sb_msi_seen(&sb));
        assert_hits(&sb, cases[i].rule, 1);
    }
    /* a neighbouring LBA is not hit */
    g_assert_cmpuint(sb_io(&sb, OP_WRITE, 108, buf, &err), ==, ST_DONE);

    /* when=after: the write lands, the status says it did not */
    qtest_memset(sb.qts, buf, 0xa5, 4096);
    g_assert_cmpuint(sb_io(&sb, OP_WRITE, 800, buf, &err), ==, ST_ERROR);
    g_assert_cmpuint(err, ==, 61);
    g_assert(task || sb_msi_seen(&sb));
    qtest_memset(sb.qts, buf, 0, 4096);
    g_assert_cmpuint(sb_io(&sb, OP_READ, 800, buf, &err), ==, ST_DONE);
    g_assert_cmpuint(qtest_readb(sb.qts, buf + 100), ==, 0xa5);
    g_assert(task || sb_msi_seen(&sb));
    g_assert_cmpuint(rd(&sb, REG_CNT_INJECTED), ==, 6);
    g_assert_cmpuint(rd(&sb, REG_CNT_ERRORS), ==, 6);
    sb_stop(&sb);
}

/* Lost completions: TIMEOUT after timeout-ms in task mode, abort else. */
static void test_drop(gconstpointer opaque)
{
    const char *mode = opaque;
    bool task = !strcmp(mode, "task");
    uint64_t data[1] = { 0 };
    uint64_t list;
    SB sb;

    sb_start(&sb, mode, true);
    if (!task) {
        sb_msix_to_ram(&sb);
    }
    list = sb_list(&sb, data, 1, 4096);
    for (uint64_t lba = 600; lba <= 700; lba += 100) {
        sb_submit(&sb, 2, OP_WRITE, lba, 8, list, 1);
        g_assert_cmpuint(rd(&sb, SLOT(2, SLOT_STATUS)), ==, ST_BUSY);
        qtest_clock_step(sb.qts, 999 * 1000 * 1000);
        g_usleep(10 * 1000);
        g_assert_cmpuint(rd(&sb, SLOT(2, SLOT_STATUS)), ==, ST_BUSY);
        /* a second doorbell on the busy slot is refused */
        wr(&sb, SLOT(2, SLOT_DOORBELL), DOORBELL_SUBMIT);
        g_assert_cmpuint(rd(&sb, REG_LAST_ERROR), ==, 16);
        wr(&sb, REG_LAST_ERROR, 0);
        g_assert_cmpuint(rd(&sb, REG_LAST_ERROR), ==, 0);
        if (task) {
            qtest_clock_step(sb.qts, 2 * 1000 * 1000);
        } else {
            qtest_clock_step(sb.qts, 10ll * 1000 * 1000 * 1000);
            g_assert_cmpuint(rd(&sb, SLOT(2, SLOT_STATUS)), ==, ST_BUSY);
            g_assert(!sb_msi_seen(&sb));
            wr(&sb, SLOT(2, SLOT_DOORBELL), DOORBELL_ABORT);
            g_assert(!sb_msi_seen(&sb));
        }
        g_assert_cmpuint(rd(&sb, SLOT(2, SLOT_STATUS)), ==, ST_TIMEOUT);
        g_assert_cmpuint(rd(&sb, SLOT(2, SLOT_ERROR)), ==, 110);
    }
    assert_hits(&sb, "lost", 1);
    assert_hits(&sb, "tmo", 1);
    g_assert_cmpuint(rd(&sb, REG_CNT_TIMEOUTS), ==, 2);
    /* the slot is usable again */
    sb_submit(&sb, 2, OP_WRITE, 0, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 2), ==, ST_DONE);
    sb_stop(&sb);
}

/* Injected latency runs on the virtual clock, exactly. */
static void test_latency(gconstpointer opaque)
{
    const char *mode = opaque;
    bool task = !strcmp(mode, "task");
    uint64_t data[1] = { 0 };
    uint64_t list;
    SB sb;

    sb_start(&sb, mode, true);
    if (!task) {
        sb_msix_to_ram(&sb);
    }
    list = sb_list(&sb, data, 1, 4096);
    sb_submit(&sb, 1, OP_WRITE, 1000, 8, list, 1);
    g_usleep(20 * 1000);        /* let any AIO finish: only time is missing */
    g_assert_cmpuint(rd(&sb, SLOT(1, SLOT_STATUS)), ==, ST_BUSY);
    qtest_clock_step(sb.qts, 4 * 1000 * 1000);
    g_usleep(10 * 1000);
    g_assert_cmpuint(rd(&sb, SLOT(1, SLOT_STATUS)), ==, ST_BUSY);
    g_assert(task || !sb_msi_seen(&sb));
    qtest_clock_step(sb.qts, 1000 * 1000);
    g_assert_cmpuint(sb_wait(&sb, 1), ==, ST_DONE);
    g_assert(task || sb_msi_seen(&sb));
    assert_hits(&sb, "slow", 1);
    sb_stop(&sb);
}

/* complete=irq switches one command of a task-mode device to MSI-X. */
static void test_complete_override(void)
{
    uint64_t buf;
    uint32_t err;
    SB sb;

    sb_start(&sb, "task", true);
    sb_msix_to_ram(&sb);
    buf = guest_alloc(&sb.alloc, 4096);
    g_assert_cmpuint(sb_io(&sb, OP_WRITE, 900, buf, &err), ==, ST_DONE);
    g_assert_cmpuint(rd(&sb, SLOT(0, SLOT_CTX)), ==, CTX_IRQ);
    g_assert(sb_msi_seen(&sb));
    g_assert_cmpuint(sb_io(&sb, OP_WRITE, 16, buf, &err), ==, ST_DONE);
    g_assert_cmpuint(rd(&sb, SLOT(0, SLOT_CTX)), ==, CTX_TASK);
    g_assert(!sb_msi_seen(&sb));
    sb_stop(&sb);
}

static void test_fault_state(void)
{
    QDict *st;
    SB sb;

    sb_start(&sb, "task", true);
    wr(&sb, REG_FAULT_STATE, 3);
    g_assert_cmpuint(rd(&sb, REG_FAULT_STATE), ==, 3);
    st = qtest_qmp_assert_success_ref(sb.qts,
        "{'execute': 'x-fault-query-stats', 'arguments': {'id': 'fi0'}}");
    g_assert_cmpuint(qdict_get_int(st, "state"), ==, 3);
    qobject_unref(st);
    qtest_qmp_assert_success(sb.qts, "{'execute': 'x-fault-set-state',"
                             " 'arguments': {'id': 'fi0', 'state': 9}}");
    g_assert_cmpuint(rd(&sb, REG_FAULT_STATE), ==, 9);
    sb_stop(&sb);
}

static void expect_bad(SB *sb, uint32_t op, uint64_t lba, uint32_t nsec,
                       uint64_t list, uint32_t nent, uint32_t err)
{
    uint32_t bad = rd(sb, REG_CNT_BAD_CMDS);

    sb_submit(sb, 5, op, lba, nsec, list, nent);
    g_assert_cmpuint(sb_wait(sb, 5), ==, ST_ERROR);
    g_assert_cmpuint(rd(sb, SLOT(5, SLOT_ERROR)), ==, err);
    g_assert_cmpuint(rd(sb, REG_CNT_BAD_CMDS), ==, bad + 1);
}

static void test_bad_commands(gconstpointer opaque)
{
    const char *mode = opaque;
    uint64_t data[2] = { 0 }, huge[1] = { 1ull << 62 };
    uint64_t list, list2, hlist, mlist;
    uint32_t cap = IMG_SECTORS;
    SB sb;

    sb_start(&sb, mode, false);
    list = sb_list(&sb, data, 1, 4096);
    list2 = sb_list(&sb, data, 2, 4096);
    hlist = sb_list(&sb, huge, 1, 4096);

    expect_bad(&sb, OP_WRITE, cap, 8, list, 1, 22);          /* past end */
    expect_bad(&sb, OP_WRITE, cap - 4, 8, list, 1, 22);      /* straddles */
    expect_bad(&sb, OP_READ, UINT64_MAX - 2, 8, list, 1, 22); /* wraps */
    expect_bad(&sb, OP_WRITE, 0, 0, list, 1, 22);            /* empty */
    expect_bad(&sb, OP_WRITE, 0, 4097, list, 1, 22);         /* too big */
    expect_bad(&sb, OP_WRITE, 0, UINT32_MAX, list, 1, 22);
    expect_bad(&sb, OP_DISCARD, cap - 1, 2, 0, 0, 22);
    expect_bad(&sb, OP_WRITE, 0, 8, list, 0, 22);            /* no entries */
    expect_bad(&sb, OP_WRITE, 0, 8, list, 513, 22);          /* too many */
    expect_bad(&sb, OP_WRITE, 0, 8, list, UINT32_MAX, 22);
    expect_bad(&sb, OP_WRITE, 0, 16, list, 1, 22);           /* sum short */
    expect_bad(&sb, OP_WRITE, 0, 8, list2, 2, 22);           /* sum long */
    expect_bad(&sb, 7, 0, 8, list, 1, 95);                   /* opcode */
    expect_bad(&sb, UINT32_MAX, 0, 8, list, 1, 95);
    /* a scatter list or data buffer nowhere in guest memory */
    expect_bad(&sb, OP_WRITE, 0, 8, 1ull << 62, 1, 14);
    expect_bad(&sb, OP_WRITE, 0, 8, UINT64_MAX - 7, 1, 14);

    /* misaligned entry length */
    mlist = sb_list(&sb, data, 1, 4096);
    qtest_writel(sb.qts, mlist + 8, 500);
    expect_bad(&sb, OP_WRITE, 0, 1, mlist, 1, 22);
    /* an entry that wraps the address space */
    qtest_writeq(sb.qts, mlist, UINT64_MAX - 511);
    qtest_writel(sb.qts, mlist + 8, 4096);
    expect_bad(&sb, OP_WRITE, 0, 8, mlist, 1, 22);

    /* data address beyond guest memory: DMA fails, no data moves */
    sb_submit(&sb, 6, OP_WRITE, 0, 8, hlist, 1);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, ST_ERROR);
    g_assert_cmpuint(rd(&sb, SLOT(6, SLOT_ERROR)), ==, 14);
    sb_submit(&sb, 6, OP_READ, 0, 8, hlist, 1);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, ST_ERROR);
    g_assert_cmpuint(rd(&sb, SLOT(6, SLOT_ERROR)), ==, 14);

    /* bus mastering off: every DMA fails */
    qpci_config_writew(sb.dev, PCI_COMMAND,
                       qpci_config_readw(sb.dev, PCI_COMMAND) &
                       ~PCI_COMMAND_MASTER);
    sb_submit(&sb, 6, OP_WRITE, 0, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, ST_ERROR);
    g_assert_cmpuint(rd(&sb, SLOT(6, SLOT_ERROR)), ==, 14);
    qpci_device_enable(sb.dev);
    sb_submit(&sb, 6, OP_WRITE, 0, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, ST_DONE);

    /* unknown doorbell values, read-only and unmapped registers */
    wr(&sb, SLOT(6, SLOT_DOORBELL), 0x77);
    g_assert_cmpuint(rd(&sb, REG_LAST_ERROR), ==, 22);
    wr(&sb, REG_MAGIC, 0);
    wr(&sb, SLOT(6, SLOT_STATUS), ST_BUSY);
    wr(&sb, 0xff0, 1);
    wr(&sb, 0x34, 1);
    g_assert_cmphex(rd(&sb, REG_MAGIC), ==, 0x4b425953);
    g_assert_cmpuint(rd(&sb, SLOT(6, SLOT_STATUS)), ==, ST_DONE);
    g_assert_cmpuint(rd(&sb, 0xffc), ==, 0);
    /* flush and discard of a valid range */
    sb_submit(&sb, 6, OP_FLUSH, 0, 0, 0, 0);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, ST_DONE);
    sb_submit(&sb, 6, OP_DISCARD, 0, 2048, 0, 0);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, ST_DONE);
    sb_stop(&sb);
}

/* Reset with commands in flight (timer, dropped, AIO) cancels them all. */
static void test_reset(gconstpointer opaque)
{
    const char *mode = opaque;
    uint64_t data[1] = { 0 };
    uint64_t list;
    SB sb;

    sb_start(&sb, mode, true);
    list = sb_list(&sb, data, 1, 4096);
    sb_submit(&sb, 0, OP_WRITE, 1000, 8, list, 1);     /* delayed */
    sb_submit(&sb, 1, OP_WRITE, 600, 8, list, 1);      /* dropped */
    sb_submit(&sb, 2, OP_WRITE, 8, 8, list, 1);
    qtest_qmp_assert_success(sb.qts, "{'execute': 'system_reset'}");
    qtest_clock_step(sb.qts, 2ll * 1000 * 1000 * 1000);
    /* the reset cleared the BARs: map them again */
    qpci_device_enable(sb.dev);
    sb.bar = qpci_iomap(sb.dev, 0, NULL);
    for (int i = 0; i < 3; i++) {
        g_assert_cmpuint(rd(&sb, SLOT(i, SLOT_STATUS)), ==, ST_IDLE);
    }
    g_assert_cmpuint(rd(&sb, REG_CNT_CMDS), ==, 0);
    /* the device works after the reset */
    sb_submit(&sb, 0, OP_WRITE, 8, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 0), ==, ST_DONE);
    sb_stop(&sb);
}

/*
 * deterministic=on: irq/thread commands do their I/O in the doorbell
 * write and signal completion (MSI-X) from a virtual timer.
 */
static void test_deterministic(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = !strcmp(mode, "irq") ? CTX_IRQ :
                   !strcmp(mode, "thread") ? CTX_THREAD : CTX_TASK;
    uint8_t out[4096], in[4096];
    uint64_t buf;
    uint32_t err;
    SB sb;

    sb_start_full(&sb, mode, true, true);
    sb_msix_to_ram(&sb);
    buf = guest_alloc(&sb.alloc, 4096);
    fill(out, sizeof(out), 0x42);
    qtest_memwrite(sb.qts, buf, out, sizeof(out));
    g_assert_cmpuint(sb_io(&sb, OP_WRITE, 8, buf, &err), ==, ST_DONE);
    g_assert_cmpuint(rd(&sb, SLOT(0, SLOT_CTX)), ==, ctx);
    g_assert(sb_msi_seen(&sb) == (ctx != CTX_TASK));
    /* An injected write error; when=before, so nothing is written. */
    g_assert_cmpuint(sb_io(&sb, OP_WRITE, 300, buf, &err), ==, ST_ERROR);
    g_assert_cmpuint(err, ==, 61);
    g_assert(sb_msi_seen(&sb) == (ctx != CTX_TASK));
    /* 5 ms of virtual latency, then the data reads back. */
    g_assert_cmpuint(sb_io(&sb, OP_WRITE, 1000, buf, &err), ==, ST_DONE);
    g_assert(sb_msi_seen(&sb) == (ctx != CTX_TASK));
    qtest_memset(sb.qts, buf, 0, 4096);
    g_assert_cmpuint(sb_io(&sb, OP_READ, 8, buf, &err), ==, ST_DONE);
    g_assert(sb_msi_seen(&sb) == (ctx != CTX_TASK));
    qtest_memread(sb.qts, buf, in, sizeof(in));
    g_assert(memcmp(in, out, sizeof(in)) == 0);
    qtest_memset(sb.qts, buf, 0, 4096);
    g_assert_cmpuint(sb_io(&sb, OP_READ, 300, buf, &err), ==, ST_DONE);
    g_assert_cmpuint(qtest_readb(sb.qts, buf), ==, 0);
    assert_hits(&sb, "wfault", 1);
    assert_hits(&sb, "slow", 1);
    sb_stop(&sb);
}

/* deterministic=on without -icount: QEMU refuses to start, clearly. */
static void test_deterministic_no_icount(void)
{
    g_autofree char *cmd = g_strdup_printf(
        "exec %s -machine q35 -nodefaults -display none -accel tcg "
        "-object fault-injector,id=fi0,deterministic=on "
        "-blockdev driver=null-co,node-name=d0 "
        "-device syncblk-pci,drive=d0,completion=irq,fault-injector=fi0",
        getenv("QTEST_QEMU_BINARY"));
    char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
    g_autofree char *out = NULL, *err = NULL;
    int status;

    g_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                          &out, &err, &status, NULL));
    if (!strstr(err, "has deterministic=on, which needs -icount")) {
        g_test_message("stderr: %s", err);
    }
    g_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    g_assert(strstr(err, "syncblk-pci: fault-injector 'fi0' has "
                    "deterministic=on, which needs -icount"));
}

int main(int argc, char **argv)
{
    static const char *const modes[] = { "task", "irq", "thread" };

    g_test_init(&argc, &argv, NULL);
    qtest_add_func("/syncblk/registers", test_registers);
    qtest_add_func("/syncblk/task/rw", test_task_rw);
    qtest_add_data_func("/syncblk/irq/rw", "irq", test_async_rw);
    qtest_add_data_func("/syncblk/thread/rw", "thread", test_async_rw);
    qtest_add_func("/syncblk/irq/many-slots", test_irq_many_slots);
    qtest_add_func("/syncblk/task/complete-override", test_complete_override);
    qtest_add_func("/syncblk/fault-state", test_fault_state);
    for (int i = 0; i < ARRAY_SIZE(modes); i++) {
        g_autofree char *e = g_strdup_printf("/syncblk/%s/errors", modes[i]);
        g_autofree char *d = g_strdup_printf("/syncblk/%s/drop", modes[i]);
        g_autofree char *l = g_strdup_printf("/syncblk/%s/latency", modes[i]);
        g_autofree char *b = g_strdup_printf("/syncblk/%s/bad-commands",
                                             modes[i]);
        g_autofree char *r = g_strdup_printf("/syncblk/%s/reset", modes[i]);

        qtest_add_data_func(e, modes[i], test_errors);
        qtest_add_data_func(d, modes[i], test_drop);
        qtest_add_data_func(l, modes[i], test_latency);
        qtest_add_data_func(b, modes[i], test_bad_commands);
        qtest_add_data_func(r, modes[i], test_reset);
    }
    for (int i = 0; i < ARRAY_SIZE(modes); i++) {
        g_autofree char *t = g_strdup_printf("/syncblk/%s/deterministic",
                                             modes[i]);

        qtest_add_data_func(t, modes[i], test_deterministic);
    }
    qtest_add_func("/syncblk/deterministic-no-icount",
                   test_deterministic_no_icount);
    return g_test_run();
}
