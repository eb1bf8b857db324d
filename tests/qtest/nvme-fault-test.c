/*
 * QTest for the faultline NVMe fault layer (hw/nvme/fault.c).
 *
 * Drives the controller by hand: admin queue, one I/O queue pair, raw
 * SQEs/CQEs in guest memory, completions found by polling the CQ (no
 * interrupts needed).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/timer.h"
#include "libqtest.h"
#include "qobject/qdict.h"
#include "qobject/qlist.h"
#include "libqos/pci.h"
#include "libqos/pci-pc.h"
#include "libqos/malloc-pc.h"
#include "hw/pci/pci_regs.h"

#define QSIZE       16
#define NVME_DB     0x1000
#define SC_WRITE_FAULT      0x280
#define SC_UNRECOVERED_READ 0x281
#define SC_INTERNAL         0x6
#define SC_DATA_XFER        0x4
#define SC_CAP_EXCEEDED     0x81
#define SC_INVALID_FIELD    0x2
#define SC_ABORT_REQ        0x7
#define SC_ABORT_SQ_DEL     0x8
#define SC_NOT_SAVEABLE     0x10d
#define SC_DNR              0x4000
#define NO_CQE              0xffffffff

typedef struct Queue {
    uint64_t addr;
    uint16_t head_or_tail;
    uint8_t phase;
} Queue;

typedef struct Nvme {
    QTestState *qts;
    QGuestAllocator alloc;
    QPCIBus *bus;
    QPCIDevice *dev;
    QPCIBar bar;
    Queue asq, acq, sq, cq;
    uint16_t cid;
    uint64_t buf;   /* 64 KiB data buffer */
    bool msix;      /* CQ 1 interrupts on, MSI-X vector 1 */
    uint32_t msix_table, msix_pba;
    char *disk;
    char *rules;
} Nvme;

typedef struct Cqe {
    uint32_t result;
    uint16_t cid;
    uint16_t status;    /* without the phase bit */
} Cqe;

static char *tmpdir;

static void wr32(Nvme *n, uint64_t off, uint32_t v)
{
    qpci_io_writel(n->dev, n->bar, off, v);
}

static uint32_t rd32(Nvme *n, uint64_t off)
{
    return qpci_io_readl(n->dev, n->bar, off);
}

static void wait_rdy(Nvme *n, uint32_t want)
{
    for (int i = 0; i < 10000; i++) {
        if ((rd32(n, 0x1c) & 1) == want) {
            return;
        }
        g_usleep(100);
    }
    g_assert_not_reached();
}

static void enable(Nvme *n)
{
    n->asq = (Queue) { .addr = n->asq.addr };
    n->acq = (Queue) { .addr = n->acq.addr, .phase = 1 };
    wr32(n, 0x24, ((QSIZE - 1) << 16) | (QSIZE - 1));
    qpci_io_writeq(n->dev, n->bar, 0x28, n->asq.addr);
    qpci_io_writeq(n->dev, n->bar, 0x30, n->acq.addr);
    qtest_memset(n->qts, n->acq.addr, 0, 4096);
    wr32(n, 0x14, (4 << 20) | (6 << 16) | 1);
    wait_rdy(n, 1);
}

static void submit(Nvme *n, Queue *sq, int qid, uint32_t *sqe)
{
    qtest_memwrite(n->qts, sq->addr + sq->head_or_tail * 64, sqe, 64);
    sq->head_or_tail = (sq->head_or_tail + 1) % QSIZE;
    wr32(n, NVME_DB + qid * 8, sq->head_or_tail);
}

/* Next CQE on @cq (polling up to @tries times), or cid NO_CQE. */
static Cqe poll_cqe(Nvme *n, Queue *cq, int qid, int tries)
{
    Cqe c = { .cid = 0xffff, .status = 0xffff, .result = NO_CQE };
    uint32_t e[4];

    for (int i = 0; i < tries; i++) {
        qtest_memread(n->qts, cq->addr + cq->head_or_tail * 16, e, 16);
        if (((le32_to_cpu(e[3]) >> 16) & 1) == cq->phase) {
            c.result = le32_to_cpu(e[0]);
            c.cid = le32_to_cpu(e[3]) & 0xffff;
            c.status = le32_to_cpu(e[3]) >> 17;
            cq->head_or_tail++;
            if (cq->head_or_tail == QSIZE) {
                cq->head_or_tail = 0;
                cq->phase ^= 1;
            }
            wr32(n, NVME_DB + qid * 8 + 4, cq->head_or_tail);
            return c;
        }
        if (i + 1 < tries) {
            g_usleep(200);
        }
    }
    return c;
}

static void sqe_init(Nvme *n, uint32_t *sqe, uint8_t opc, uint32_t nsid)
{
    memset(sqe, 0, 64);
    sqe[0] = cpu_to_le32(opc | (++n->cid << 16));
    sqe[1] = cpu_to_le32(nsid);
}

static void sqe_prp(uint32_t *sqe, uint64_t prp1, uint64_t prp2)
{
    sqe[6] = cpu_to_le32(prp1);
    sqe[7] = cpu_to_le32(prp1 >> 32);
    sqe[8] = cpu_to_le32(prp2);
    sqe[9] = cpu_to_le32(prp2 >> 32);
}

static Cqe admin(Nvme *n, uint8_t opc, uint32_t nsid, uint64_t prp1,
                 uint32_t cdw10, uint32_t cdw11, uint32_t cdw12)
{
    uint32_t sqe[16];
    Cqe c;

    sqe_init(n, sqe, opc, nsid);
    sqe_prp(sqe, prp1, 0);
    sqe[10] = cpu_to_le32(cdw10);
    sqe[11] = cpu_to_le32(cdw11);
    sqe[12] = cpu_to_le32(cdw12);
    submit(n, &n->asq, 0, sqe);
    c = poll_cqe(n, &n->acq, 0, 5000);
    g_assert_cmpuint(c.cid, ==, n->cid);
    return c;
}

static void create_io_queues(Nvme *n)
{
    n->sq = (Queue) { .addr = n->sq.addr };
    n->cq = (Queue) { .addr = n->cq.addr, .phase = 1 };
    qtest_memset(n->qts, n->cq.addr, 0, 4096);
    /* CQ 1, physically contiguous, interrupts off; SQ 1 on CQ 1. */
    g_assert_cmphex(admin(n, 0x05, 0, n->cq.addr, ((QSIZE - 1) << 16) | 1,
                          n->msix ? (1 << 16) | 3 : 1, 0).status, ==, 0);
    g_assert_cmphex(admin(n, 0x01, 0, n->sq.addr, ((QSIZE - 1) << 16) | 1,
                          (1 << 16) | 1, 0).status, ==, 0);
}

/* Submit an I/O command; returns its cid. */
static uint16_t io_submit(Nvme *n, uint8_t opc, uint64_t slba, uint16_t nlb,
                          uint64_t buf)
{
    uint32_t sqe[16];

    sqe_init(n, sqe, opc, 1);
    sqe_prp(sqe, buf, 0);
    sqe[10] = cpu_to_le32(slba);
    sqe[11] = cpu_to_le32(slba >> 32);
    sqe[12] = cpu_to_le32(nlb - 1);
    submit(n, &n->sq, 1, sqe);
    return n->cid;
}

/* One 4 KiB (8 x 512 B LBAs) command, waited for. */
static Cqe io(Nvme *n, uint8_t opc, uint64_t slba)
{
    uint16_t cid = io_submit(n, opc, slba, 8, n->buf);
    Cqe c = poll_cqe(n, &n->cq, 1, 5000);

    g_assert_cmpuint(c.cid, ==, cid);
    return c;
}

static void msix_setup(Nvme *n)
{
    uint8_t cap = qpci_find_capability(n->dev, PCI_CAP_ID_MSIX, 0);
    uint16_t flags;
    uint32_t table, pba;

    g_assert(cap);
    flags = qpci_config_readw(n->dev, cap + PCI_MSIX_FLAGS);
    qpci_config_writew(n->dev, cap + PCI_MSIX_FLAGS,
                       flags | PCI_MSIX_FLAGS_ENABLE);
    table = qpci_config_readl(n->dev, cap + PCI_MSIX_TABLE);
    pba = qpci_config_readl(n->dev, cap + PCI_MSIX_PBA);
    g_assert_cmpuint(table & PCI_MSIX_FLAGS_BIRMASK, ==, 0);
    g_assert_cmpuint(pba & PCI_MSIX_FLAGS_BIRMASK, ==, 0);
    n->msix_table = table & ~PCI_MSIX_FLAGS_BIRMASK;
    n->msix_pba = pba & ~PCI_MSIX_FLAGS_BIRMASK;
    /* Vector 1 masked: an interrupt only sets its pending bit. */
    wr32(n, n->msix_table + 16 + 12, 1);
}

static bool msix_pending(Nvme *n)
{
    return rd32(n, n->msix_pba) & 2;
}

/* Deliver (and so clear) a pending vector 1, then mask it again. */
static void msix_ack(Nvme *n)
{
    wr32(n, n->msix_table + 16 + 12, 0);
    wr32(n, n->msix_table + 16 + 12, 1);
    g_assert(!msix_pending(n));
}

/*
 * Deterministic mode runs under TCG with -icount: a 64 KiB "BIOS" of HLT
 * instructions keeps the vCPU halted (so nothing but the test drives the
 * device) while virtual time still moves: sleep=off warps an idle vCPU to
 * the next QEMU_CLOCK_VIRTUAL deadline.
 */
#define DET_ACCEL "-accel tcg -icount shift=4,sleep=off,align=off "

static char *hlt_bios(void)
{
    g_autofree uint8_t *rom = g_malloc(65536);
    char *path = g_build_filename(tmpdir, "hlt.bin", NULL);

    memset(rom, 0xf4, 65536);
    g_assert(g_file_set_contents(path, (char *)rom, 65536, NULL));
    return path;
}

static Nvme *nvme_start_full(const char *rules, bool msix, bool det)
{
    Nvme *n = g_new0(Nvme, 1);
    g_autofree char *fi = NULL;
    g_autofree char *accel = NULL;
    g_autofree char *bios = NULL;
    uint64_t cap;

    n->disk = g_build_filename(tmpdir, "disk.img", NULL);
    g_assert(g_file_set_contents(n->disk, "", 0, NULL));
    g_assert(truncate(n->disk, 16 << 20) == 0);
    if (rules) {
        n->rules = g_build_filename(tmpdir, "nvme.rules", NULL);
        g_assert(g_file_set_contents(n->rules, rules, -1, NULL));
        fi = g_strdup_printf("-object fault-injector,id=fi0,rules=%s,seed=1%s ",
                             n->rules, det ? ",deterministic=on" : "");
    }
    if (det) {
        bios = hlt_bios();
        accel = g_strdup_printf(DET_ACCEL "-bios %s ", bios);
    }
    n->qts = qtest_initf("%s%s-drive file=%s,if=none,id=d0,format=raw "
                         "-device nvme,addr=04.0,serial=fl,drive=d0%s",
                         accel ? accel : "", fi ? fi : "", n->disk,
                         rules ? ",fault-injector=fi0" : "");
    pc_alloc_init(&n->alloc, n->qts, ALLOC_NO_FLAGS);
    n->bus = qpci_new_pc(n->qts, &n->alloc);
    n->dev = qpci_device_find(n->bus, QPCI_DEVFN(4, 0));
    g_assert(n->dev);
    qpci_device_enable(n->dev);
    n->bar = qpci_iomap(n->dev, 0, NULL);
    cap = qpci_io_readq(n->dev, n->bar, 0);
    g_assert_cmpuint((cap >> 32) & 0xf, ==, 0);     /* DSTRD 0 */
    n->asq.addr = guest_alloc(&n->alloc, 4096);
    n->acq.addr = guest_alloc(&n->alloc, 4096);
    n->sq.addr = guest_alloc(&n->alloc, 4096);
    n->cq.addr = guest_alloc(&n->alloc, 4096);
    n->buf = guest_alloc(&n->alloc, 65536);
    n->msix = msix;
    if (msix) {
        msix_setup(n);
    }
    enable(n);
    create_io_queues(n);
    return n;
}

static Nvme *nvme_start_opts(const char *rules, bool msix)
{
    return nvme_start_full(rules, msix, false);
}

static Nvme *nvme_start(const char *rules)
{
    return nvme_start_opts(rules, false);
}

static void nvme_stop(Nvme *n)
{
    g_free(n->dev);
    qpci_free_pc(n->bus);
    alloc_destroy(&n->alloc);
    qtest_quit(n->qts);
    unlink(n->disk);
    if (n->rules) {
        unlink(n->rules);
    }
    g_free(n->disk);
    g_free(n->rules);
    g_free(n);
}

static QDict *query_stats(Nvme *n)
{
    return qtest_qmp_assert_success_ref(n->qts,
        "{'execute': 'x-fault-query-stats', 'arguments': {'id': 'fi0'}}");
}

static uint64_t rule_hits(Nvme *n, const char *name)
{
    QDict *st = query_stats(n);
    QListEntry *e;
    uint64_t hits = UINT64_MAX;

    QLIST_FOREACH_ENTRY(qdict_get_qlist(st, "rules"), e) {
        QDict *r = qobject_to(QDict, qlist_entry_obj(e));

        if (!strcmp(qdict_get_str(r, "name"), name)) {
            hits = qdict_get_int(r, "hits");
        }
    }
    qobject_unref(st);
    return hits;
}

static void fill(Nvme *n, uint8_t byte)
{
    qtest_memset(n->qts, n->buf, byte, 4096);
}

static uint8_t first_byte(Nvme *n)
{
    uint8_t b;

    qtest_memread(n->qts, n->buf, &b, 1);
    return b;
}

/* Get Log Page @lid into n->buf (@len bytes at @off); returns the status. */
static uint16_t get_log(Nvme *n, uint8_t lid, uint32_t len, uint64_t off)
{
    uint32_t numd = len / 4 - 1;
    uint32_t sqe[16];
    Cqe c;

    qtest_memset(n->qts, n->buf, 0xaa, len);
    sqe_init(n, sqe, 0x02, 0xffffffff);
    sqe_prp(sqe, n->buf, len > 4096 ? n->buf + 4096 : 0);
    sqe[10] = cpu_to_le32(lid | (numd << 16));
    sqe[11] = cpu_to_le32(numd >> 16);
    sqe[12] = cpu_to_le32(off);
    sqe[13] = cpu_to_le32(off >> 32);
    submit(n, &n->asq, 0, sqe);
    c = poll_cqe(n, &n->acq, 0, 5000);
    g_assert_cmpuint(c.cid, ==, n->cid);
    return c.status;
}

/* @opaque non-NULL: in deterministic mode. */
static void test_errors(gconstpointer opaque)
{
    Nvme *n = nvme_start_full(
        "wf:  write nth=3 error=write-fault\n"
        "wfd: write nth=5 error=write-fault dnr\n"
        "wa:  write nth=7 error=write-fault when=after\n"
        "re:  read nth=2 error=read-error dnr\n"
        "ie:  read nth=3 error=internal\n"
        "eio: read nth=4 error=eio\n"
        "nsp: read nth=5 error=enospc\n", false, opaque != NULL);
    uint16_t want[8] = { 0, 0, 0, SC_WRITE_FAULT, 0,
                         SC_WRITE_FAULT | SC_DNR, 0, SC_WRITE_FAULT };
    uint16_t cids[8];
    uint8_t smart[512];
    uint8_t page[4096];

    for (int i = 1; i <= 7; i++) {
        Cqe c;

        fill(n, 0x10 + i);
        c = io(n, 0x01, i * 8);
        cids[i] = c.cid;
        g_assert_cmphex(c.status, ==, want[i]);
    }
    /* when=before: nothing landed; when=after: the data is there. */
    g_assert_cmphex(io(n, 0x02, 3 * 8).status, ==, 0);
    g_assert_cmphex(first_byte(n), ==, 0);
    g_assert_cmphex(io(n, 0x02, 7 * 8).status, ==,
                    SC_UNRECOVERED_READ | SC_DNR);
    g_assert_cmphex(io(n, 0x02, 7 * 8).status, ==, SC_INTERNAL);
    g_assert_cmphex(io(n, 0x02, 7 * 8).status, ==, SC_DATA_XFER);
    g_assert_cmphex(io(n, 0x02, 7 * 8).status, ==, SC_CAP_EXCEEDED);
    g_assert_cmphex(io(n, 0x02, 7 * 8).status, ==, 0);
    g_assert_cmphex(first_byte(n), ==, 0x17);
    g_assert_cmpuint(rule_hits(n, "wf"), ==, 1);
    g_assert_cmpuint(rule_hits(n, "wa"), ==, 1);

    /* Error Information log: 64 entries, newest first. */
    g_assert_cmphex(get_log(n, 0x01, 4096, 0), ==, 0);
    qtest_memread(n->qts, n->buf, page, sizeof(page));
    for (int i = 0; i < 7; i++) {
        uint8_t *e = page + i * 64;
        uint16_t status = lduw_le_p(e + 12) >> 1;

        g_assert_cmpuint(ldq_le_p(e), ==, 7 - i);
        g_assert_cmpuint(lduw_le_p(e + 8), ==, 1);          /* sqid */
        g_assert_cmpuint(ldl_le_p(e + 24), ==, 1);          /* nsid */
        if (i == 4) {
            g_assert_cmphex(status, ==, SC_WRITE_FAULT);
            g_assert_cmpuint(lduw_le_p(e + 10), ==, cids[7]);
            g_assert_cmpuint(ldq_le_p(e + 16), ==, 7 * 8);
        }
        if (i == 5) {
            g_assert_cmphex(status, ==, SC_WRITE_FAULT | SC_DNR);
            g_assert_cmpuint(lduw_le_p(e + 10), ==, cids[5]);
        }
    }
    for (int i = 7; i < 64; i++) {
        g_assert_cmpuint(ldq_le_p(page + i * 64), ==, 0);
    }
    /* An offset inside the page works, past it is Invalid Field. */
    g_assert_cmphex(get_log(n, 0x01, 64, 64), ==, 0);
    g_assert_cmpuint(qtest_readq(n->qts, n->buf), ==, 6);
    g_assert_cmphex(get_log(n, 0x01, 64, 4096), ==,
                    SC_INVALID_FIELD | SC_DNR);
    /* SMART: Number of Error Information Log Entries. */
    g_assert_cmphex(get_log(n, 0x02, 512, 0), ==, 0);
    qtest_memread(n->qts, n->buf, smart, sizeof(smart));
    g_assert_cmpuint(ldq_le_p(smart + 176), ==, 7);
    nvme_stop(n);
}

static void test_delay(void)
{
    Nvme *n = nvme_start("slow: write nth=2 delay=5ms\n");
    uint16_t cid;
    Cqe c;

    g_assert_cmphex(io(n, 0x01, 0).status, ==, 0);
    cid = io_submit(n, 0x01, 8, 8, n->buf);
    c = poll_cqe(n, &n->cq, 1, 50);
    g_assert_cmpuint(c.result, ==, NO_CQE);
    qtest_clock_step(n->qts, 4 * SCALE_MS);
    c = poll_cqe(n, &n->cq, 1, 50);
    g_assert_cmpuint(c.result, ==, NO_CQE);
    qtest_clock_step(n->qts, 1 * SCALE_MS + 1);
    c = poll_cqe(n, &n->cq, 1, 5000);
    g_assert_cmpuint(c.cid, ==, cid);
    g_assert_cmphex(c.status, ==, 0);
    g_assert_cmphex(io(n, 0x01, 16).status, ==, 0);
    nvme_stop(n);
}

/* A command whose completion was dropped: no CQE until Abort ends it. */
static void assert_lost_until_abort(Nvme *n, uint16_t cid, int tries)
{
    Cqe c = poll_cqe(n, &n->cq, 1, tries);

    g_assert_cmpuint(c.result, ==, NO_CQE);
    g_assert_cmphex(admin(n, 0x08, 0, 0, 1 | (cid << 16), 0, 0).status,
                    ==, 0);
    c = poll_cqe(n, &n->cq, 1, 5000);
    g_assert_cmpuint(c.cid, ==, cid);
    g_assert_cmphex(c.status, ==, SC_ABORT_REQ);
}

static void test_drop_abort(void)
{
    Nvme *n = nvme_start("lost: write nth=1 drop\n"
                         "slow: write nth=2 delay=1s\n");
    uint16_t cid;
    Cqe c;

    /* A dropped command: only Abort completes it. */
    cid = io_submit(n, 0x01, 0, 8, n->buf);
    qtest_clock_step(n->qts, 10 * NANOSECONDS_PER_SECOND);
    assert_lost_until_abort(n, cid, 50);

    /* A delayed one: Abort completes it, its timer never fires later. */
    cid = io_submit(n, 0x01, 8, 8, n->buf);
    c = poll_cqe(n, &n->cq, 1, 50);
    g_assert_cmpuint(c.result, ==, NO_CQE);
    admin(n, 0x08, 0, 0, 1 | (cid << 16), 0, 0);
    c = poll_cqe(n, &n->cq, 1, 5000);
    g_assert_cmpuint(c.cid, ==, cid);
    g_assert_cmphex(c.status, ==, SC_ABORT_REQ);
    qtest_clock_step(n->qts, 2 * NANOSECONDS_PER_SECOND);
    c = poll_cqe(n, &n->cq, 1, 50);
    g_assert_cmpuint(c.result, ==, NO_CQE);
    /* Aborting a command that is not outstanding is harmless. */
    admin(n, 0x08, 0, 0, 1 | (cid << 16), 0, 0);
    g_assert_cmphex(io(n, 0x01, 16).status, ==, 0);
    nvme_stop(n);
}

static void test_drop_sq_delete_reset(gconstpointer opaque)
{
    Nvme *n = nvme_start_full("lost: write drop\n", false, opaque != NULL);
    uint16_t cid, cid2;
    Cqe c;

    /* Delete I/O SQ completes the held commands as aborted. */
    cid = io_submit(n, 0x01, 0, 8, n->buf);
    cid2 = io_submit(n, 0x01, 8, 8, n->buf);
    c = poll_cqe(n, &n->cq, 1, 50);
    g_assert_cmpuint(c.result, ==, NO_CQE);
    g_assert_cmphex(admin(n, 0x00, 0, 0, 1, 0, 0).status, ==, 0);
    c = poll_cqe(n, &n->cq, 1, 5000);
    g_assert_cmpuint(c.cid, ==, cid);
    g_assert_cmphex(c.status, ==, SC_ABORT_SQ_DEL);
    c = poll_cqe(n, &n->cq, 1, 5000);
    g_assert_cmpuint(c.cid, ==, cid2);
    g_assert_cmphex(c.status, ==, SC_ABORT_SQ_DEL);
    g_assert_cmphex(admin(n, 0x04, 0, 0, 1, 0, 0).status, ==, 0);
    create_io_queues(n);

    /* Controller reset with held commands, then a working controller. */
    io_submit(n, 0x01, 0, 8, n->buf);
    io_submit(n, 0x01, 8, 8, n->buf);
    c = poll_cqe(n, &n->cq, 1, 50);
    g_assert_cmpuint(c.result, ==, NO_CQE);
    wr32(n, 0x14, 0);
    wait_rdy(n, 0);
    enable(n);
    create_io_queues(n);
    g_assert_cmphex(io(n, 0x02, 0).status, ==, 0);
    g_assert_cmpuint(rule_hits(n, "lost"), ==, 4);
    nvme_stop(n);
}

static void test_irq(void)
{
    Nvme *n = nvme_start_opts("noirq:   write nth=2 irq=suppress\n"
                              "slowirq: write nth=3 irq-delay=1ms\n", true);
    Cqe c;

    /* A normal completion raises vector 1. */
    g_assert(!msix_pending(n));
    g_assert_cmphex(io(n, 0x01, 0).status, ==, 0);
    g_assert(msix_pending(n));
    msix_ack(n);
    /* Suppressed: the CQE is there, no interrupt. */
    g_assert_cmphex(io(n, 0x01, 8).status, ==, 0);
    c = poll_cqe(n, &n->cq, 1, 50);
    g_assert_cmpuint(c.result, ==, NO_CQE);
    g_assert(!msix_pending(n));
    /* Delayed: the CQE is there, the interrupt comes 1 ms later. */
    g_assert_cmphex(io(n, 0x01, 16).status, ==, 0);
    g_assert(!msix_pending(n));
    qtest_clock_step(n->qts, SCALE_MS / 2);
    g_assert(!msix_pending(n));
    qtest_clock_step(n->qts, SCALE_MS / 2 + 1);
    g_assert(msix_pending(n));
    msix_ack(n);
    g_assert_cmphex(io(n, 0x01, 24).status, ==, 0);
    g_assert(msix_pending(n));
    nvme_stop(n);
}

static void test_vendor(void)
{
    Nvme *n = nvme_start("st5:  write state=5 error=internal\n"
                         "arm:  read nth=1 set-state=7\n");
    uint8_t log[16 + 2 * 48];
    QDict *st;
    Cqe c;

    /* Get/Set Features 0xC0: the engine state. */
    c = admin(n, 0x0a, 0, 0, 0xc0, 0, 0);
    g_assert_cmphex(c.status, ==, 0);
    g_assert_cmpuint(c.result, ==, 0);
    g_assert_cmphex(admin(n, 0x09, 0, 0, 0xc0, 5, 0).status, ==, 0);
    c = admin(n, 0x0a, 0, 0, 0xc0, 0, 0);
    g_assert_cmpuint(c.result, ==, 5);
    st = query_stats(n);
    g_assert_cmpuint(qdict_get_int(st, "state"), ==, 5);
    qobject_unref(st);
    g_assert_cmphex(io(n, 0x01, 0).status, ==, SC_INTERNAL);
    /* A rule's set-state shows up in Get Features. */
    g_assert_cmphex(io(n, 0x02, 0).status, ==, 0);
    g_assert_cmpuint(admin(n, 0x0a, 0, 0, 0xc0, 0, 0).result, ==, 7);
    g_assert_cmphex(io(n, 0x01, 0).status, ==, 0);
    /* Supported capabilities: changeable. */
    c = admin(n, 0x0a, 0, 0, 0xc0 | (3 << 8), 0, 0);
    g_assert_cmpuint(c.result, ==, 1 << 2);

    /* Bad arguments: Invalid Field (or not saveable), never a crash. */
    g_assert_cmphex(admin(n, 0x09, 0, 0, 0xc0, 1, 1).status, ==,
                    SC_INVALID_FIELD | SC_DNR);
    g_assert_cmphex(admin(n, 0x09, 0, 0, 0xc0 | (1u << 31), 1, 0).status,
                    ==, SC_NOT_SAVEABLE | SC_DNR);
    g_assert_cmphex(admin(n, 0x0a, 0, 0, 0xc0 | (5 << 8), 0, 0).status,
                    ==, SC_INVALID_FIELD | SC_DNR);
    g_assert_cmphex(admin(n, 0x0a, 0, 0, 0xc0, 3, 0).status, ==,
                    SC_INVALID_FIELD | SC_DNR);
    g_assert_cmphex(admin(n, 0x09, 0, 0, 0xc1, 1, 0).status, ==,
                    SC_INVALID_FIELD | SC_DNR);
    g_assert_cmphex(admin(n, 0x0a, 0, 0, 0xff, 0, 0).status, ==,
                    SC_INVALID_FIELD | SC_DNR);
    g_assert_cmpuint(admin(n, 0x0a, 0, 0, 0xc0, 0, 0).result, ==, 7);

    /* Log page 0xC0: per-rule hit counts. */
    g_assert_cmphex(get_log(n, 0xc0, sizeof(log), 0), ==, 0);
    qtest_memread(n->qts, n->buf, log, sizeof(log));
    g_assert_cmpuint(ldl_le_p(log), ==, 1);             /* version */
    g_assert_cmpuint(ldl_le_p(log + 4), ==, 2);         /* rules */
    g_assert_cmpuint(ldl_le_p(log + 8), ==, 48);        /* entry size */
    g_assert_cmpuint(ldl_le_p(log + 12), ==, 7);        /* state */
    g_assert_cmpstr((char *)log + 16, ==, "st5");
    g_assert_cmpuint(ldq_le_p(log + 16 + 32), ==, 1);   /* matched */
    g_assert_cmpuint(ldq_le_p(log + 16 + 40), ==, 1);   /* hits */
    g_assert_cmpstr((char *)log + 64, ==, "arm");
    g_assert_cmpuint(ldq_le_p(log + 64 + 32), ==, 1);
    g_assert_cmpuint(ldq_le_p(log + 64 + 40), ==, 1);
    /* A partial read at an offset; past the end is Invalid Field. */
    g_assert_cmphex(get_log(n, 0xc0, 8, 64 + 40), ==, 0);
    g_assert_cmpuint(qtest_readq(n->qts, n->buf), ==, 1);
    g_assert_cmphex(get_log(n, 0xc0, 4, sizeof(log)), ==,
                    SC_INVALID_FIELD | SC_DNR);
    g_assert_cmphex(get_log(n, 0xc0, 4, 1ull << 40), ==,
                    SC_INVALID_FIELD | SC_DNR);
    g_assert_cmphex(get_log(n, 0xc1, 4, 0), ==, SC_INVALID_FIELD | SC_DNR);
    /* Still alive and working. */
    g_assert_cmphex(io(n, 0x01, 0).status, ==, 0);
    nvme_stop(n);
}

static void test_no_injector(void)
{
    Nvme *n = nvme_start(NULL);

    g_assert_cmphex(admin(n, 0x0a, 0, 0, 0xc0, 0, 0).status, ==,
                    SC_INVALID_FIELD | SC_DNR);
    g_assert_cmphex(admin(n, 0x09, 0, 0, 0xc0, 1, 0).status, ==,
                    SC_INVALID_FIELD | SC_DNR);
    g_assert_cmphex(get_log(n, 0xc0, 64, 0), ==, SC_INVALID_FIELD | SC_DNR);
    /* Upstream Error Information log: one zeroed entry. */
    g_assert_cmphex(get_log(n, 0x01, 64, 64), ==, SC_INVALID_FIELD | SC_DNR);
    for (int i = 0; i < 20; i++) {
        g_assert_cmphex(io(n, 0x01, i * 8).status, ==, 0);
    }
    nvme_stop(n);
}

/*
 * deterministic=on under -icount: the I/O is done in the doorbell write,
 * completions are posted from virtual timers; errors, delays and a lost
 * completion (aborted) behave as without it.
 */
static void test_deterministic(void)
{
    Nvme *n = nvme_start_full("wf:   write nth=2 error=write-fault\n"
                              "slow: read delay=2ms\n"
                              "lost: write nth=3 drop\n", true, true);
    uint16_t cid;

    fill(n, 0x5a);
    g_assert_cmphex(io(n, 0x01, 0).status, ==, 0);
    g_assert(msix_pending(n));
    msix_ack(n);
    fill(n, 0x33);
    g_assert_cmphex(io(n, 0x01, 8).status, ==, SC_WRITE_FAULT);
    fill(n, 0);
    g_assert_cmphex(io(n, 0x02, 0).status, ==, 0);
    g_assert_cmphex(first_byte(n), ==, 0x5a);
    g_assert_cmphex(io(n, 0x02, 8).status, ==, 0);
    g_assert_cmphex(first_byte(n), ==, 0);      /* when=before: not written */
    g_assert(msix_pending(n));
    msix_ack(n);

    /* A lost completion stays lost however far virtual time goes. */
    cid = io_submit(n, 0x01, 16, 8, n->buf);
    assert_lost_until_abort(n, cid, 200);
    g_assert_cmphex(io(n, 0x01, 24).status, ==, 0);
    g_assert_cmpuint(rule_hits(n, "wf"), ==, 1);
    g_assert_cmpuint(rule_hits(n, "slow"), ==, 2);
    g_assert_cmpuint(rule_hits(n, "lost"), ==, 1);
    nvme_stop(n);
}

/* QEMU must refuse to start, with @msg on stderr. */
static void expect_startup_error(const char *args, const char *msg)
{
    g_autofree char *cmd = g_strdup_printf("exec %s -machine pc -display none "
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

static void test_deterministic_errors(void)
{
    g_autofree char *disk = g_build_filename(tmpdir, "disk.img", NULL);
    g_autofree char *base = NULL, *args = NULL;

    g_assert(g_file_set_contents(disk, "", 0, NULL));
    g_assert(truncate(disk, 1 << 20) == 0);
    base = g_strdup_printf("-object fault-injector,id=fi0,deterministic=on "
                           "-drive file=%s,if=none,id=d0,format=raw "
                           "-device nvme,serial=fl,drive=d0,"
                           "fault-injector=fi0", disk);
    /* No -icount. */
    args = g_strdup_printf("-accel tcg %s", base);
    expect_startup_error(args, "has deterministic=on, which needs -icount");
    g_free(args);
    /* Adaptive icount is not deterministic either. */
    args = g_strdup_printf("-accel tcg -icount shift=auto %s", base);
    expect_startup_error(args, "has deterministic=on, which needs -icount");
    g_free(args);
    /* Doorbells through ioeventfd are handled outside the vCPU. */
    args = g_strdup_printf(DET_ACCEL "%s,ioeventfd=on", base);
    expect_startup_error(args, "deterministic=on needs ioeventfd=off");
    unlink(disk);
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    tmpdir = g_dir_make_tmp("nvme-fault-test-XXXXXX", NULL);
    g_assert(tmpdir);
    qtest_add_data_func("/nvme-fault/errors", NULL, test_errors);
    qtest_add_func("/nvme-fault/delay", test_delay);
    qtest_add_func("/nvme-fault/drop-abort", test_drop_abort);
    qtest_add_data_func("/nvme-fault/drop-sq-delete-reset", NULL,
                        test_drop_sq_delete_reset);
    qtest_add_func("/nvme-fault/irq", test_irq);
    qtest_add_func("/nvme-fault/vendor", test_vendor);
    qtest_add_func("/nvme-fault/no-injector", test_no_injector);
    qtest_add_func("/nvme-fault/deterministic/basic", test_deterministic);
    qtest_add_data_func("/nvme-fault/deterministic/errors", "det",
                        test_errors);
    qtest_add_data_func("/nvme-fault/deterministic/drop-sq-delete-reset",
                        "det", test_drop_sq_delete_reset);
    qtest_add_func("/nvme-fault/deterministic/bad-config",
                   test_deterministic_errors);
    ret = g_test_run();
    {
        g_autofree char *bios = g_build_filename(tmpdir, "hlt.bin", NULL);

        unlink(bios);
    }
    rmdir(tmpdir);
    g_free(tmpdir);
    return ret;
}
