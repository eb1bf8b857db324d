/*
 * QTest for syncblk-pci: register interface, the three completion modes,
 * injected errors and latency, and bad commands (which must never crash
 * QEMU).  Register names and codes come from the wire-format header the
 * device and the guest driver share.
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

#define SLOT(i, r)          (SYNCBLK_REG_SLOT_BASE + \
                             (i) * SYNCBLK_REG_SLOT_STRIDE + (r))

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
    "slow:   write lba=1000 delay=5ms\n"
    "lie:    write lba=2000 after=1 lie\n"
    "lier:   read  lba=2100 count=1 lie\n"
    "cw:     write lba=2200 corrupt=3\n"
    "cr:     read  lba=2300 count=1 corrupt=2\n";

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

typedef struct SBOpts {
    const char *completion;
    bool faults;                /* a fault-injector with rules_text */
    bool icount;                /* deterministic=on under TCG -icount */
    bool det_qtest;             /* deterministic=on under the qtest accel */
    const char *dev_opts;       /* more syncblk-pci properties, or NULL */
    const uint8_t *sector0;     /* 512 bytes for the image's sector 0 */
} SBOpts;

/*
 * @o->icount: the BIOS is then 64 KiB of HLT so the halted vCPU runs
 * nothing while virtual time warps (sleep=off) to the device's completion
 * timers.
 */
static void sb_start_opts(SB *sb, const SBOpts *o)
{
    g_autofree char *fi = NULL;
    g_autofree uint8_t *hlt = NULL;
    bool det = o->icount || o->det_qtest;
    int fd;

    memset(sb, 0, sizeof(*sb));
    fd = g_file_open_tmp("syncblk-test.XXXXXX", &sb->img, NULL);
    g_assert(fd >= 0);
    g_assert(ftruncate(fd, IMG_SIZE) == 0);
    if (o->sector0) {
        g_assert(pwrite(fd, o->sector0, 512, 0) == 512);
    }
    close(fd);
    /*
     * qtest runs no guest code, but q35 insists on a BIOS image: a blank
     * 64 KiB one keeps the test independent of installed firmware.
     */
    fd = g_file_open_tmp("syncblk-bios.XXXXXX", &sb->bios, NULL);
    g_assert(fd >= 0);
    g_assert(ftruncate(fd, 64 * 1024) == 0);
    close(fd);
    if (o->icount) {
        hlt = g_malloc(64 * 1024);
        memset(hlt, 0xf4, 64 * 1024);
        g_assert(g_file_set_contents(sb->bios, (char *)hlt, 64 * 1024,
                                     NULL));
    }
    if (o->faults) {
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
                          "-device syncblk-pci,drive=d0,completion=%s%s%s%s,"
                          "addr=04.0",
                          o->icount ? "-accel tcg -icount shift=4,sleep=off,"
                          "align=off " : "",
                          sb->bios, fi ? fi : "", sb->img, o->completion,
                          fi ? ",fault-injector=fi0" : "",
                          o->dev_opts ? "," : "",
                          o->dev_opts ? o->dev_opts : "");
    pc_alloc_init(&sb->alloc, sb->qts, ALLOC_NO_FLAGS);
    sb->bus = qpci_new_pc(sb->qts, &sb->alloc);
    sb->dev = qpci_device_find(sb->bus, QPCI_DEVFN(4, 0));
    g_assert(sb->dev);
    qpci_device_enable(sb->dev);
    sb->bar = qpci_iomap(sb->dev, 0, NULL);
}

static void sb_start_full(SB *sb, const char *completion, bool faults,
                          bool det)
{
    SBOpts o = { .completion = completion, .faults = faults, .icount = det };

    sb_start_opts(sb, &o);
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
    wr(sb, SLOT(slot, SYNCBLK_SLOT_OPCODE), op);
    wr(sb, SLOT(slot, SYNCBLK_SLOT_LBA_LO), (uint32_t)lba);
    wr(sb, SLOT(slot, SYNCBLK_SLOT_LBA_HI), lba >> 32);
    wr(sb, SLOT(slot, SYNCBLK_SLOT_NUM_SECTORS), nsec);
    wr(sb, SLOT(slot, SYNCBLK_SLOT_LIST_LO), (uint32_t)list);
    wr(sb, SLOT(slot, SYNCBLK_SLOT_LIST_HI), list >> 32);
    wr(sb, SLOT(slot, SYNCBLK_SLOT_NUM_ENTRIES), nent);
    wr(sb, SLOT(slot, SYNCBLK_SLOT_DOORBELL), SYNCBLK_DOORBELL_SUBMIT);
}

/* Poll STATUS until it leaves BUSY (AIO completes in the main loop). */
static uint32_t sb_wait(SB *sb, int slot)
{
    for (int i = 0; i < 50000; i++) {
        uint32_t st = rd(sb, SLOT(slot, SYNCBLK_SLOT_STATUS));

        if (st != SYNCBLK_ST_BUSY) {
            return st;
        }
        g_usleep(100);
    }
    return SYNCBLK_ST_BUSY;
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
    *err = rd(sb, SLOT(0, SYNCBLK_SLOT_ERROR));
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
        g_assert_cmphex(rd(&sb, SYNCBLK_REG_MAGIC), ==, 0x4b425953);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_VERSION), ==, 1);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CAPACITY_LO), ==, IMG_SECTORS);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CAPACITY_HI), ==, 0);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_BLOCK_SIZE), ==, 512);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_MODE), ==, m);
        g_assert_cmphex(rd(&sb, SYNCBLK_REG_FEATURES), ==, 0xf);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_NUM_SLOTS), ==, 16);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_MAX_SECTORS), ==, 4096);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_MAX_ENTRIES), ==, 512);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_TIMEOUT_MS), ==, 1000);
        g_assert_cmpuint(rd(&sb, SLOT(3, SYNCBLK_SLOT_STATUS)), ==,
                         SYNCBLK_ST_IDLE);
        /* 64-bit access is split into two 32-bit halves */
        g_assert_cmphex(qpci_io_readq(sb.dev, sb.bar, SYNCBLK_REG_CAPACITY_LO),
                        ==,
                        IMG_SECTORS);
        /* no injector: the state register reads 0 and ignores writes */
        wr(&sb, SYNCBLK_REG_FAULT_STATE, 5);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_FAULT_STATE), ==, 0);
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
    sb_submit(sb, slot, SYNCBLK_OP_WRITE, 2048 + slot * 16, 16, wlist, 2);
    if (ctx == SYNCBLK_CTX_TASK) {
        /* the data moved during the doorbell write */
        g_assert_cmpuint(rd(sb, SLOT(slot, SYNCBLK_SLOT_STATUS)), ==,
                         SYNCBLK_ST_DONE);
    }
    st = sb_wait(sb, slot);
    g_assert_cmpuint(st, ==, SYNCBLK_ST_DONE);
    g_assert_cmpuint(rd(sb, SLOT(slot, SYNCBLK_SLOT_ERROR)), ==, 0);
    g_assert_cmpuint(rd(sb, SLOT(slot, SYNCBLK_SLOT_CTX)), ==, ctx);
    if (ctx != SYNCBLK_CTX_TASK) {
        g_assert(sb_msi_seen(sb));
    }

    sb_submit(sb, slot, SYNCBLK_OP_READ, 2048 + slot * 16, 16, rlist, 4);
    g_assert_cmpuint(sb_wait(sb, slot), ==, SYNCBLK_ST_DONE);
    if (ctx != SYNCBLK_CTX_TASK) {
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
    rw_roundtrip(&sb, 0, SYNCBLK_CTX_TASK);
    rw_roundtrip(&sb, 15, SYNCBLK_CTX_TASK);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_DONE_TASK), ==, 4);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_DONE_IRQ), ==, 0);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_CMDS), ==, 4);
    sb_stop(&sb);
}

static void test_async_rw(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = !strcmp(mode, "irq") ? SYNCBLK_CTX_IRQ : SYNCBLK_CTX_THREAD;
    SB sb;

    sb_start(&sb, mode, false);
    sb_msix_to_ram(&sb);
    rw_roundtrip(&sb, 0, ctx);
    rw_roundtrip(&sb, 7, ctx);
    g_assert_cmpuint(rd(&sb, ctx == SYNCBLK_CTX_IRQ ? SYNCBLK_REG_CNT_DONE_IRQ :
                        SYNCBLK_REG_CNT_DONE_THREAD), ==, 4);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_DONE_TASK), ==, 0);
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
        sb_submit(&sb, i, SYNCBLK_OP_WRITE, i * 8, 8, list[i], 1);
    }
    for (int i = 0; i < 16; i++) {
        g_assert_cmpuint(sb_wait(&sb, i), ==, SYNCBLK_ST_DONE);
    }
    for (int i = 0; i < 16; i++) {
        qtest_memset(sb.qts, data[i][0], 0, 4096);
        sb_submit(&sb, i, SYNCBLK_OP_READ, i * 8, 8, list[i], 1);
    }
    for (int i = 0; i < 16; i++) {
        g_assert_cmpuint(sb_wait(&sb, i), ==, SYNCBLK_ST_DONE);
        g_assert_cmpuint(qtest_readb(sb.qts, data[i][0] + 4095), ==, i + 1);
    }
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_DONE_IRQ), ==, 32);
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
        { SYNCBLK_OP_WRITE, 100, SYNCBLK_ERR_EIO, "eio" },
        { SYNCBLK_OP_WRITE, 200, SYNCBLK_ERR_ENOSPC, "nospc" },
        { SYNCBLK_OP_WRITE, 300, SYNCBLK_ERR_ENODATA, "wfault" },
        { SYNCBLK_OP_READ, 400, SYNCBLK_ERR_EBADMSG, "rerr" },
        { SYNCBLK_OP_WRITE, 500, SYNCBLK_ERR_EREMOTEIO, "intern" },
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
                         SYNCBLK_ST_ERROR);
        g_assert_cmpuint(err, ==, cases[i].err);
        g_assert(task || sb_msi_seen(&sb));
        assert_hits(&sb, cases[i].rule, 1);
    }
    /* a neighbouring LBA is not hit */
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 108, buf, &err), ==,
                     SYNCBLK_ST_DONE);

    /* when=after: the write lands, the status says it did not */
    qtest_memset(sb.qts, buf, 0xa5, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 800, buf, &err), ==,
                     SYNCBLK_ST_ERROR);
    g_assert_cmpuint(err, ==, SYNCBLK_ERR_ENODATA);
    g_assert(task || sb_msi_seen(&sb));
    qtest_memset(sb.qts, buf, 0, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_READ, 800, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    g_assert_cmpuint(qtest_readb(sb.qts, buf + 100), ==, 0xa5);
    g_assert(task || sb_msi_seen(&sb));
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_INJECTED), ==, 6);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_ERRORS), ==, 6);
    sb_stop(&sb);
}

/* The offsets of rule @rule's first x-fault-query-log entry (corrupt=). */
static int logged_offsets(SB *sb, const char *rule, uint64_t *off, int max)
{
    QDict *rsp = qtest_qmp_assert_success_ref(sb->qts,
        "{'execute': 'x-fault-query-log', 'arguments': {'id': 'fi0'}}");
    QListEntry *e;
    int cnt = 0;

    QLIST_FOREACH_ENTRY(qdict_get_qlist(rsp, "entries"), e) {
        QDict *ent = qobject_to(QDict, qlist_entry_obj(e));
        const char *p = strstr(qdict_get_str(ent, "action"), " at=");
        char *end;

        if (strcmp(qdict_get_str(ent, "rule"), rule) || cnt) {
            continue;
        }
        g_assert(p);
        for (p += 4; cnt < max; p = end + 1) {
            off[cnt++] = g_ascii_strtoull(p, &end, 10);
            if (*end != ',') {
                break;
            }
        }
    }
    qobject_unref(rsp);
    return cnt;
}

/* @buf's 4 KiB are @byte, but for the bytes at @off[0..cnt), flipped. */
static void assert_buf(SB *sb, uint64_t buf, uint8_t byte, const uint64_t *off,
                       int cnt)
{
    uint8_t got[4096];

    qtest_memread(sb->qts, buf, got, sizeof(got));
    for (int i = 0, k = 0; i < 4096; i++) {
        bool flip = k < cnt && off[k] == (uint64_t)i;

        g_assert_cmphex(got[i], ==, flip ? byte ^ 0xff : byte);
        k += flip;
    }
}

/*
 * lie: a write reports DONE and the old data stays; a read reports DONE
 * and the buffer keeps what it held.  corrupt: what a write stored, or
 * what a read delivered, differs by exactly N bytes at the logged offsets.
 */
static void test_lie_corrupt(gconstpointer opaque)
{
    const char *mode = opaque;
    uint64_t buf, off[16];
    uint32_t err;
    SB sb;

    sb_start(&sb, mode, true);
    if (strcmp(mode, "task")) {
        sb_msix_to_ram(&sb);
    }
    buf = guest_alloc(&sb.alloc, 4096);
    qtest_memset(sb.qts, buf, 0x11, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 2000, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    qtest_memset(sb.qts, buf, 0x22, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 2000, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    assert_hits(&sb, "lie", 1);
    qtest_memset(sb.qts, buf, 0, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_READ, 2000, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    assert_buf(&sb, buf, 0x11, NULL, 0);

    qtest_memset(sb.qts, buf, 0x55, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 2100, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    qtest_memset(sb.qts, buf, 0x99, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_READ, 2100, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    assert_buf(&sb, buf, 0x99, NULL, 0);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_READ, 2100, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    assert_buf(&sb, buf, 0x55, NULL, 0);

    qtest_memset(sb.qts, buf, 0x33, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 2200, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    assert_buf(&sb, buf, 0x33, NULL, 0);    /* the guest's copy is intact */
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_READ, 2200, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    g_assert_cmpint(logged_offsets(&sb, "cw", off, 16), ==, 3);
    assert_buf(&sb, buf, 0x33, off, 3);

    qtest_memset(sb.qts, buf, 0x44, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 2300, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    qtest_memset(sb.qts, buf, 0, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_READ, 2300, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    g_assert_cmpint(logged_offsets(&sb, "cr", off, 16), ==, 2);
    assert_buf(&sb, buf, 0x44, off, 2);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_READ, 2300, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    assert_buf(&sb, buf, 0x44, NULL, 0);    /* the disk's copy is intact */
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
        sb_submit(&sb, 2, SYNCBLK_OP_WRITE, lba, 8, list, 1);
        g_assert_cmpuint(rd(&sb, SLOT(2, SYNCBLK_SLOT_STATUS)), ==,
                         SYNCBLK_ST_BUSY);
        qtest_clock_step(sb.qts, 999 * 1000 * 1000);
        g_usleep(10 * 1000);
        g_assert_cmpuint(rd(&sb, SLOT(2, SYNCBLK_SLOT_STATUS)), ==,
                         SYNCBLK_ST_BUSY);
        /* a second doorbell on the busy slot is refused */
        wr(&sb, SLOT(2, SYNCBLK_SLOT_DOORBELL), SYNCBLK_DOORBELL_SUBMIT);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_LAST_ERROR), ==,
                         SYNCBLK_ERR_EBUSY);
        wr(&sb, SYNCBLK_REG_LAST_ERROR, 0);
        g_assert_cmpuint(rd(&sb, SYNCBLK_REG_LAST_ERROR), ==, 0);
        if (task) {
            qtest_clock_step(sb.qts, 2 * 1000 * 1000);
        } else {
            qtest_clock_step(sb.qts, 10ll * 1000 * 1000 * 1000);
            g_assert_cmpuint(rd(&sb, SLOT(2, SYNCBLK_SLOT_STATUS)), ==,
                             SYNCBLK_ST_BUSY);
            g_assert(!sb_msi_seen(&sb));
            wr(&sb, SLOT(2, SYNCBLK_SLOT_DOORBELL), SYNCBLK_DOORBELL_ABORT);
            g_assert(!sb_msi_seen(&sb));
        }
        g_assert_cmpuint(rd(&sb, SLOT(2, SYNCBLK_SLOT_STATUS)), ==,
                         SYNCBLK_ST_TIMEOUT);
        g_assert_cmpuint(rd(&sb, SLOT(2, SYNCBLK_SLOT_ERROR)), ==,
                         SYNCBLK_ERR_ETIMEDOUT);
    }
    assert_hits(&sb, "lost", 1);
    assert_hits(&sb, "tmo", 1);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_TIMEOUTS), ==, 2);
    /* the slot is usable again */
    sb_submit(&sb, 2, SYNCBLK_OP_WRITE, 0, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 2), ==, SYNCBLK_ST_DONE);
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
    sb_submit(&sb, 1, SYNCBLK_OP_WRITE, 1000, 8, list, 1);
    g_usleep(20 * 1000);        /* let any AIO finish: only time is missing */
    g_assert_cmpuint(rd(&sb, SLOT(1, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_BUSY);
    qtest_clock_step(sb.qts, 4 * 1000 * 1000);
    g_usleep(10 * 1000);
    g_assert_cmpuint(rd(&sb, SLOT(1, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_BUSY);
    g_assert(task || !sb_msi_seen(&sb));
    qtest_clock_step(sb.qts, 1000 * 1000);
    g_assert_cmpuint(sb_wait(&sb, 1), ==, SYNCBLK_ST_DONE);
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
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 900, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    g_assert_cmpuint(rd(&sb, SLOT(0, SYNCBLK_SLOT_CTX)), ==, SYNCBLK_CTX_IRQ);
    g_assert(sb_msi_seen(&sb));
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 16, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    g_assert_cmpuint(rd(&sb, SLOT(0, SYNCBLK_SLOT_CTX)), ==, SYNCBLK_CTX_TASK);
    g_assert(!sb_msi_seen(&sb));
    sb_stop(&sb);
}

static void test_fault_state(void)
{
    QDict *st;
    SB sb;

    sb_start(&sb, "task", true);
    wr(&sb, SYNCBLK_REG_FAULT_STATE, 3);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_FAULT_STATE), ==, 3);
    st = qtest_qmp_assert_success_ref(sb.qts,
        "{'execute': 'x-fault-query-stats', 'arguments': {'id': 'fi0'}}");
    g_assert_cmpuint(qdict_get_int(st, "state"), ==, 3);
    qobject_unref(st);
    qtest_qmp_assert_success(sb.qts, "{'execute': 'x-fault-set-state',"
                             " 'arguments': {'id': 'fi0', 'state': 9}}");
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_FAULT_STATE), ==, 9);
    sb_stop(&sb);
}

static void expect_bad(SB *sb, uint32_t op, uint64_t lba, uint32_t nsec,
                       uint64_t list, uint32_t nent, uint32_t err)
{
    uint32_t bad = rd(sb, SYNCBLK_REG_CNT_BAD_CMDS);

    sb_submit(sb, 5, op, lba, nsec, list, nent);
    g_assert_cmpuint(sb_wait(sb, 5), ==, SYNCBLK_ST_ERROR);
    g_assert_cmpuint(rd(sb, SLOT(5, SYNCBLK_SLOT_ERROR)), ==, err);
    g_assert_cmpuint(rd(sb, SYNCBLK_REG_CNT_BAD_CMDS), ==, bad + 1);
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

    expect_bad(&sb, SYNCBLK_OP_WRITE, cap, 8, list, 1,
               22);          /* past end */
    expect_bad(&sb, SYNCBLK_OP_WRITE, cap - 4, 8, list, 1,
               22);      /* straddles */
    expect_bad(&sb, SYNCBLK_OP_READ, UINT64_MAX - 2, 8, list, 1,
               22); /* wraps */
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, 0, list, 1, 22);            /* empty */
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, 4097, list, 1,
               22);         /* too big */
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, UINT32_MAX, list, 1, 22);
    expect_bad(&sb, SYNCBLK_OP_DISCARD, cap - 1, 2, 0, 0, 22);
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, 8, list, 0,
               22);            /* no entries */
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, 8, list, 513,
               22);          /* too many */
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, 8, list, UINT32_MAX, 22);
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, 16, list, 1,
               22);           /* sum short */
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, 8, list2, 2,
               22);           /* sum long */
    expect_bad(&sb, 7, 0, 8, list, 1, 95);                   /* opcode */
    expect_bad(&sb, UINT32_MAX, 0, 8, list, 1, 95);
    /* a scatter list or data buffer nowhere in guest memory */
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, 8, 1ull << 62, 1, 14);
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, 8, UINT64_MAX - 7, 1, 14);

    /* misaligned entry length */
    mlist = sb_list(&sb, data, 1, 4096);
    qtest_writel(sb.qts, mlist + 8, 500);
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, 1, mlist, 1, 22);
    /* an entry that wraps the address space */
    qtest_writeq(sb.qts, mlist, UINT64_MAX - 511);
    qtest_writel(sb.qts, mlist + 8, 4096);
    expect_bad(&sb, SYNCBLK_OP_WRITE, 0, 8, mlist, 1, 22);

    /* data address beyond guest memory: DMA fails, no data moves */
    sb_submit(&sb, 6, SYNCBLK_OP_WRITE, 0, 8, hlist, 1);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, SYNCBLK_ST_ERROR);
    g_assert_cmpuint(rd(&sb, SLOT(6, SYNCBLK_SLOT_ERROR)), ==,
                     SYNCBLK_ERR_EFAULT);
    sb_submit(&sb, 6, SYNCBLK_OP_READ, 0, 8, hlist, 1);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, SYNCBLK_ST_ERROR);
    g_assert_cmpuint(rd(&sb, SLOT(6, SYNCBLK_SLOT_ERROR)), ==,
                     SYNCBLK_ERR_EFAULT);

    /* bus mastering off: every DMA fails */
    qpci_config_writew(sb.dev, PCI_COMMAND,
                       qpci_config_readw(sb.dev, PCI_COMMAND) &
                       ~PCI_COMMAND_MASTER);
    sb_submit(&sb, 6, SYNCBLK_OP_WRITE, 0, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, SYNCBLK_ST_ERROR);
    g_assert_cmpuint(rd(&sb, SLOT(6, SYNCBLK_SLOT_ERROR)), ==,
                     SYNCBLK_ERR_EFAULT);
    qpci_device_enable(sb.dev);
    sb_submit(&sb, 6, SYNCBLK_OP_WRITE, 0, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, SYNCBLK_ST_DONE);

    /* unknown doorbell values, read-only and unmapped registers */
    wr(&sb, SLOT(6, SYNCBLK_SLOT_DOORBELL), 0x77);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_LAST_ERROR), ==, 22);
    wr(&sb, SYNCBLK_REG_MAGIC, 0);
    wr(&sb, SLOT(6, SYNCBLK_SLOT_STATUS), SYNCBLK_ST_BUSY);
    wr(&sb, 0xff0, 1);
    wr(&sb, 0x34, 1);
    g_assert_cmphex(rd(&sb, SYNCBLK_REG_MAGIC), ==, 0x4b425953);
    g_assert_cmpuint(rd(&sb, SLOT(6, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_DONE);
    g_assert_cmpuint(rd(&sb, 0xffc), ==, 0);
    /* flush and discard of a valid range */
    sb_submit(&sb, 6, SYNCBLK_OP_FLUSH, 0, 0, 0, 0);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, SYNCBLK_ST_DONE);
    sb_submit(&sb, 6, SYNCBLK_OP_DISCARD, 0, 2048, 0, 0);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, SYNCBLK_ST_DONE);
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
    sb_submit(&sb, 0, SYNCBLK_OP_WRITE, 1000, 8, list, 1);     /* delayed */
    sb_submit(&sb, 1, SYNCBLK_OP_WRITE, 600, 8, list, 1);      /* dropped */
    sb_submit(&sb, 2, SYNCBLK_OP_WRITE, 8, 8, list, 1);
    qtest_qmp_assert_success(sb.qts, "{'execute': 'system_reset'}");
    qtest_clock_step(sb.qts, 2ll * 1000 * 1000 * 1000);
    /* the reset cleared the BARs: map them again */
    qpci_device_enable(sb.dev);
    sb.bar = qpci_iomap(sb.dev, 0, NULL);
    for (int i = 0; i < 3; i++) {
        g_assert_cmpuint(rd(&sb, SLOT(i, SYNCBLK_SLOT_STATUS)), ==,
                         SYNCBLK_ST_IDLE);
    }
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_CMDS), ==, 0);
    /* the device works after the reset */
    sb_submit(&sb, 0, SYNCBLK_OP_WRITE, 8, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 0), ==, SYNCBLK_ST_DONE);
    sb_stop(&sb);
}

/*
 * deterministic=on: irq/thread commands do their I/O in the doorbell
 * write and signal completion (MSI-X) from a virtual timer.
 */
static void test_deterministic(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = !strcmp(mode, "irq") ? SYNCBLK_CTX_IRQ :
                   !strcmp(mode,
                           "thread") ? SYNCBLK_CTX_THREAD : SYNCBLK_CTX_TASK;
    uint8_t out[4096], in[4096];
    uint64_t buf;
    uint32_t err;
    SB sb;

    sb_start_full(&sb, mode, true, true);
    sb_msix_to_ram(&sb);
    buf = guest_alloc(&sb.alloc, 4096);
    fill(out, sizeof(out), 0x42);
    qtest_memwrite(sb.qts, buf, out, sizeof(out));
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 8, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    g_assert_cmpuint(rd(&sb, SLOT(0, SYNCBLK_SLOT_CTX)), ==, ctx);
    g_assert(sb_msi_seen(&sb) == (ctx != SYNCBLK_CTX_TASK));
    /* An injected write error; when=before, so nothing is written. */
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 300, buf, &err), ==,
                     SYNCBLK_ST_ERROR);
    g_assert_cmpuint(err, ==, SYNCBLK_ERR_ENODATA);
    g_assert(sb_msi_seen(&sb) == (ctx != SYNCBLK_CTX_TASK));
    /* 5 ms of virtual latency, then the data reads back. */
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 1000, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    g_assert(sb_msi_seen(&sb) == (ctx != SYNCBLK_CTX_TASK));
    qtest_memset(sb.qts, buf, 0, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_READ, 8, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    g_assert(sb_msi_seen(&sb) == (ctx != SYNCBLK_CTX_TASK));
    qtest_memread(sb.qts, buf, in, sizeof(in));
    g_assert(memcmp(in, out, sizeof(in)) == 0);
    qtest_memset(sb.qts, buf, 0, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_READ, 300, buf, &err), ==,
                     SYNCBLK_ST_DONE);
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

static uint32_t mode_ctx(const char *mode)
{
    return !strcmp(mode, "irq") ? SYNCBLK_CTX_IRQ :
           !strcmp(mode, "thread") ? SYNCBLK_CTX_THREAD : SYNCBLK_CTX_TASK;
}

static uint32_t done_count(SB *sb, uint32_t ctx)
{
    return rd(sb, ctx == SYNCBLK_CTX_IRQ ? SYNCBLK_REG_CNT_DONE_IRQ :
              ctx == SYNCBLK_CTX_THREAD ? SYNCBLK_REG_CNT_DONE_THREAD :
              SYNCBLK_REG_CNT_DONE_TASK);
}

/* A write and a read back of one 4 KiB block: the device still works. */
static void assert_device_works(SB *sb, uint32_t ctx)
{
    uint8_t out[4096], in[4096];
    uint64_t buf = guest_alloc(&sb->alloc, 4096);
    uint32_t err;

    fill(out, sizeof(out), 0x5c);
    qtest_memwrite(sb->qts, buf, out, sizeof(out));
    g_assert_cmpuint(sb_io(sb, SYNCBLK_OP_WRITE, 64, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    g_assert(ctx == SYNCBLK_CTX_TASK || sb_msi_seen(sb));
    qtest_memset(sb->qts, buf, 0, sizeof(in));
    g_assert_cmpuint(sb_io(sb, SYNCBLK_OP_READ, 64, buf, &err), ==,
                     SYNCBLK_ST_DONE);
    g_assert(ctx == SYNCBLK_CTX_TASK || sb_msi_seen(sb));
    qtest_memread(sb->qts, buf, in, sizeof(in));
    g_assert(memcmp(in, out, sizeof(in)) == 0);
}

/*
 * Issue 12, defect 1: DMA re-entrancy.  A READ of 2 sectors whose scatter
 * list is [{BAR0 + slot 0, 512}, {RAM, 512}], where sector 0 holds
 * DOORBELL_ABORT at the DOORBELL offset: the read data would abort the
 * command from inside its own completion (in irq/thread mode from the AIO
 * callback, outside any MMIO handler) and free the bounce buffer under the
 * scatter loop.  The device must refuse DMA into itself: the command ends
 * once, with EFAULT and (irq/thread) one MSI-X, and QEMU lives on.
 */
static void test_dma_into_own_bar(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = mode_ctx(mode);
    uint8_t sector0[512] = { 0 };
    SBOpts o = { .completion = mode, .sector0 = sector0 };
    uint64_t data[2];
    uint64_t list;
    SB sb;

    sector0[SYNCBLK_SLOT_DOORBELL] = SYNCBLK_DOORBELL_ABORT;   /* le32 */
    sb_start_opts(&sb, &o);
    if (ctx != SYNCBLK_CTX_TASK) {
        sb_msix_to_ram(&sb);
    }
    data[0] = sb.bar.addr + SLOT(0, 0);
    data[1] = guest_alloc(&sb.alloc, 512);
    list = sb_list(&sb, data, 2, 512);
    sb_submit(&sb, 0, SYNCBLK_OP_READ, 0, 2, list, 2);
    g_assert_cmpuint(sb_wait(&sb, 0), ==, SYNCBLK_ST_ERROR);
    g_assert_cmpuint(rd(&sb, SLOT(0, SYNCBLK_SLOT_ERROR)), ==,
                     SYNCBLK_ERR_EFAULT);
    if (ctx != SYNCBLK_CTX_TASK) {
        g_assert(sb_msi_seen(&sb));
    }
    /* Completed once: no second status change, no second MSI-X. */
    qtest_clock_step(sb.qts, 2ll * 1000 * 1000 * 1000);
    g_usleep(10 * 1000);
    g_assert(ctx == SYNCBLK_CTX_TASK || !sb_msi_seen(&sb));
    g_assert_cmpuint(rd(&sb, SLOT(0, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_ERROR);
    g_assert_cmpuint(done_count(&sb, ctx), ==, 1);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_ERRORS), ==, 1);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_TIMEOUTS), ==, 0);
    assert_device_works(&sb, ctx);
    sb_stop(&sb);
}

/*
 * The MSI-X message itself aimed at the device's own slot 1 DOORBELL with
 * data SUBMIT: a completion signalled from the AIO callback or a timer must
 * not start a command in the middle of another one's completion.
 */
static void test_msix_into_own_bar(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = mode_ctx(mode);
    SBOpts o = { .completion = mode };
    QPCIDevice *d;
    uint64_t data[1] = { 0 };
    uint64_t doorbell, list;
    SB sb;

    sb_start_opts(&sb, &o);
    d = sb.dev;
    qpci_msix_enable(d);
    doorbell = sb.bar.addr + SLOT(1, SYNCBLK_SLOT_DOORBELL);
    qpci_io_writel(d, d->msix_table_bar,
                   d->msix_table_off + PCI_MSIX_ENTRY_LOWER_ADDR,
                   (uint32_t)doorbell);
    qpci_io_writel(d, d->msix_table_bar,
                   d->msix_table_off + PCI_MSIX_ENTRY_UPPER_ADDR,
                   doorbell >> 32);
    qpci_io_writel(d, d->msix_table_bar,
                   d->msix_table_off + PCI_MSIX_ENTRY_DATA,
                   SYNCBLK_DOORBELL_SUBMIT);
    qpci_io_writel(d, d->msix_table_bar,
                   d->msix_table_off + PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
    list = sb_list(&sb, data, 1, 4096);
    /* slot 1 holds a valid command that only the MSI-X write would start */
    wr(&sb, SLOT(1, SYNCBLK_SLOT_OPCODE), SYNCBLK_OP_WRITE);
    wr(&sb, SLOT(1, SYNCBLK_SLOT_LBA_LO), 16);
    wr(&sb, SLOT(1, SYNCBLK_SLOT_NUM_SECTORS), 8);
    wr(&sb, SLOT(1, SYNCBLK_SLOT_LIST_LO), (uint32_t)list);
    wr(&sb, SLOT(1, SYNCBLK_SLOT_LIST_HI), list >> 32);
    wr(&sb, SLOT(1, SYNCBLK_SLOT_NUM_ENTRIES), 1);
    sb_submit(&sb, 0, SYNCBLK_OP_WRITE, 8, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 0), ==, SYNCBLK_ST_DONE);
    qtest_clock_step(sb.qts, 1000 * 1000);
    g_usleep(10 * 1000);
    g_assert_cmpuint(rd(&sb, SLOT(1, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_IDLE);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_CNT_CMDS), ==, 1);
    g_assert_cmpuint(done_count(&sb, ctx), ==, 1);
    sb_stop(&sb);
}

/*
 * Issue 12, defect 6: timeout-ms * 1 ms overflowed 32 bits, so 4295 ms
 * became 32 us.  A lost completion in task mode stays BUSY for the whole
 * timeout, then reads TIMEOUT.
 */
static void test_timeout_over_32bit_ns(void)
{
    SBOpts o = { .completion = "task", .faults = true,
                 .dev_opts = "timeout-ms=4295" };
    uint64_t data[1] = { 0 };
    uint64_t list;
    SB sb;

    sb_start_opts(&sb, &o);
    g_assert_cmpuint(rd(&sb, SYNCBLK_REG_TIMEOUT_MS), ==, 4295);
    list = sb_list(&sb, data, 1, 4096);
    sb_submit(&sb, 3, SYNCBLK_OP_WRITE, 600, 8, list, 1);      /* dropped */
    g_assert_cmpuint(rd(&sb, SLOT(3, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_BUSY);
    qtest_clock_step(sb.qts, 1000 * 1000);
    g_assert_cmpuint(rd(&sb, SLOT(3, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_BUSY);
    qtest_clock_step(sb.qts, 4293ll * 1000 * 1000);
    g_assert_cmpuint(rd(&sb, SLOT(3, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_BUSY);
    qtest_clock_step(sb.qts, 1000 * 1000);
    g_assert_cmpuint(rd(&sb, SLOT(3, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_TIMEOUT);
    g_assert_cmpuint(rd(&sb, SLOT(3, SYNCBLK_SLOT_ERROR)), ==,
                     SYNCBLK_ERR_ETIMEDOUT);
    sb_stop(&sb);
}

/*
 * deterministic=on under the qtest accelerator (what the fuzzers run):
 * accepted, and completions follow virtual time only, which moves only
 * on clock_step.
 */
static void test_deterministic_qtest(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = mode_ctx(mode);
    SBOpts o = { .completion = mode, .faults = true, .det_qtest = true };
    uint64_t data[1] = { 0 };
    uint64_t list;
    SB sb;

    sb_start_opts(&sb, &o);
    if (ctx != SYNCBLK_CTX_TASK) {
        sb_msix_to_ram(&sb);
    }
    list = sb_list(&sb, data, 1, 4096);
    sb_submit(&sb, 0, SYNCBLK_OP_WRITE, 1000, 8, list, 1);    /* 5 ms */
    g_usleep(20 * 1000);
    g_assert_cmpuint(rd(&sb, SLOT(0, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_BUSY);
    g_assert(ctx == SYNCBLK_CTX_TASK || !sb_msi_seen(&sb));
    qtest_clock_step(sb.qts, 4 * 1000 * 1000);
    g_assert_cmpuint(rd(&sb, SLOT(0, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_BUSY);
    qtest_clock_step(sb.qts, 1000 * 1000);
    g_assert_cmpuint(rd(&sb, SLOT(0, SYNCBLK_SLOT_STATUS)), ==,
                     SYNCBLK_ST_DONE);
    g_assert(ctx == SYNCBLK_CTX_TASK || sb_msi_seen(&sb));
    assert_device_works(&sb, ctx);
    sb_stop(&sb);
}

/* A completion mode that does not exist is refused, by its QAPI name. */
static void test_bad_completion(void)
{
    g_autofree char *cmd = g_strdup_printf(
        "exec %s -machine q35 -nodefaults -display none -accel qtest "
        "-blockdev driver=null-co,node-name=d0 "
        "-device syncblk-pci,drive=d0,completion=softirq",
        getenv("QTEST_QEMU_BINARY"));
    char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
    g_autofree char *out = NULL, *err = NULL;
    int status;

    g_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                          &out, &err, &status, NULL));
    g_test_message("stderr: %s", err);
    g_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    g_assert(strstr(err, "softirq"));
    g_assert(strstr(err, "completion"));
}

/* x-fault-add-rules of @rules must fail with exactly @msg. */
static void expect_rules_refused(QTestState *qts, const char *rules,
                                 const char *msg)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'x-fault-add-rules', "
                           "'arguments': {'id': 'fi0', 'rules': %s}}", rules);

    g_assert(qdict_haskey(rsp, "error"));
    g_assert_cmpstr(qdict_get_str(qdict_get_qdict(rsp, "error"), "desc"), ==,
                    msg);
    qobject_unref(rsp);
}

/*
 * Controller failure (fatal, reset-fail=) is NVMe's: syncblk refuses it
 * at realize and afterwards, with one line naming the rule, never ignores it.
 */
static void test_refuses_ctrl_fail(void)
{
    g_autofree char *rules = NULL;
    g_autofree char *cmd = NULL;
    char *argv[] = { (char *)"/bin/sh", (char *)"-c", NULL, NULL };
    g_autofree char *out = NULL, *err = NULL;
    g_autofree uint8_t *buf = g_malloc0(4096);
    uint64_t gbuf;
    uint32_t ioerr;
    int status, fd;
    SB sb;

    fd = g_file_open_tmp("syncblk-rules.XXXXXX", &rules, NULL);
    g_assert(fd >= 0);
    close(fd);
    g_assert(g_file_set_contents(rules, "ok: write lba=9 error=eio\n"
                                 "die: write nth=5 fatal\n", -1, NULL));
    cmd = g_strdup_printf("exec %s -machine q35 -nodefaults -display none "
                          "-object fault-injector,id=fi0,rules=%s "
                          "-blockdev driver=null-co,node-name=d0 "
                          "-device syncblk-pci,drive=d0,fault-injector=fi0",
                          getenv("QTEST_QEMU_BINARY"), rules);
    argv[2] = cmd;
    g_assert(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                          &out, &err, &status, NULL));
    unlink(rules);
    if (!strstr(err, "rule 'die'")) {
        g_test_message("stderr: %s", err);
    }
    g_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    g_assert(strstr(err, "syncblk-pci: rule 'die' of fault-injector 'fi0' "
                    "has 'fatal', which syncblk-pci does not support (NVMe "
                    "only)\n"));
    g_assert(!strstr(err, "Aborted") && !strstr(err, "assert"));

    /* Attached: adding one later fails, and the device goes on working. */
    sb_start(&sb, "task", true);
    expect_rules_refused(sb.qts, "x: write lba=5 reset-fail=1",
                         "1:16: 'reset-fail' is not supported by "
                         "syncblk-pci (NVMe only)");
    expect_rules_refused(sb.qts, "y: write drop\nz: read fatal",
                         "2:9: 'fatal' is not supported by syncblk-pci "
                         "(NVMe only)");
    gbuf = guest_alloc(&sb.alloc, 4096);
    qtest_memwrite(sb.qts, gbuf, buf, 4096);
    g_assert_cmpuint(sb_io(&sb, SYNCBLK_OP_WRITE, 8, gbuf, &ioerr), ==,
                     SYNCBLK_ST_DONE);
    g_assert_cmpuint(ioerr, ==, 0);
    sb_stop(&sb);
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
    qtest_add_func("/syncblk/refuses-ctrl-fail", test_refuses_ctrl_fail);
    for (int i = 0; i < ARRAY_SIZE(modes); i++) {
        g_autofree char *e = g_strdup_printf("/syncblk/%s/errors", modes[i]);
        g_autofree char *d = g_strdup_printf("/syncblk/%s/drop", modes[i]);
        g_autofree char *l = g_strdup_printf("/syncblk/%s/latency", modes[i]);
        g_autofree char *b = g_strdup_printf("/syncblk/%s/bad-commands",
                                             modes[i]);
        g_autofree char *r = g_strdup_printf("/syncblk/%s/reset", modes[i]);
        g_autofree char *lc = g_strdup_printf("/syncblk/%s/lie-corrupt",
                                              modes[i]);

        qtest_add_data_func(e, modes[i], test_errors);
        qtest_add_data_func(d, modes[i], test_drop);
        qtest_add_data_func(l, modes[i], test_latency);
        qtest_add_data_func(b, modes[i], test_bad_commands);
        qtest_add_data_func(r, modes[i], test_reset);
        qtest_add_data_func(lc, modes[i], test_lie_corrupt);
    }
    for (int i = 0; i < ARRAY_SIZE(modes); i++) {
        g_autofree char *t = g_strdup_printf("/syncblk/%s/deterministic",
                                             modes[i]);

        qtest_add_data_func(t, modes[i], test_deterministic);
    }
    for (int i = 0; i < ARRAY_SIZE(modes); i++) {
        g_autofree char *t = g_strdup_printf("/syncblk/%s/dma-into-own-bar",
                                             modes[i]);
        g_autofree char *m = g_strdup_printf("/syncblk/%s/msix-into-own-bar",
                                             modes[i]);
        g_autofree char *q = g_strdup_printf(
            "/syncblk/%s/deterministic-qtest", modes[i]);

        qtest_add_data_func(t, modes[i], test_dma_into_own_bar);
        if (i) {
            qtest_add_data_func(m, modes[i], test_msix_into_own_bar);
        }
        qtest_add_data_func(q, modes[i], test_deterministic_qtest);
    }
    qtest_add_func("/syncblk/task/timeout-over-32bit-ns",
                   test_timeout_over_32bit_ns);
    qtest_add_func("/syncblk/deterministic-no-icount",
                   test_deterministic_no_icount);
    qtest_add_func("/syncblk/bad-completion", test_bad_completion);
    return g_test_run();
}
