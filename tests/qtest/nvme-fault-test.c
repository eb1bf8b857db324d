/*
 * QTest for the faultline NVMe fault layer (hw/nvme/fault*.c).
 *
 * Drives the controller by hand: admin queue, one I/O queue pair, raw
 * SQEs/CQEs in guest memory, completions found by polling the CQ (no
 * interrupts needed).  Registers, commands and statuses are named as in
 * include/block/nvme.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/host-utils.h"
#include "qemu/timer.h"
#include "hw/pci/pci_regs.h"
#include "block/nvme.h"
#include "faultline/nvme-fault-vendor.h"
#include "faultline-qtest.h"

#define QSIZE       16
#define ADMIN_QID   0
#define IO_QID      1
#define IO_NSID     1
/* The I/O CQ's MSI-X vector (the admin CQ has vector 0). */
#define IO_VECTOR   1

/* Doorbells follow the register block; CAP.DSTRD 0 (asserted) packs them. */
#define SQ_TAIL_DB(qid)     (sizeof(NvmeBar) + (qid) * 2 * sizeof(uint32_t))
#define CQ_HEAD_DB(qid)     (SQ_TAIL_DB(qid) + sizeof(uint32_t))

/* A CQE's status field: bit 0 the phase tag, then the status. */
#define CQE_PHASE(sf)       ((sf) & 1)
#define CQE_STATUS(sf)      ((sf) >> 1)

/* Abort: CDW10 holds the SQ ID (bits 15:0) and the CID (bits 31:16). */
#define ABORT_CDW10(sqid, cid)  ((sqid) | ((uint32_t)(cid) << 16))

/* Command flags, FUSE (bits 1:0) = 01b: first command of a fused pair. */
#define FUSE_FIRST          1

/* A Feature Identifier no controller implements. */
#define NO_SUCH_FID         (NVME_FID_MAX - 1)

#define NO_CQE              0xffffffff

typedef struct Queue {
    uint64_t addr;
    uint16_t head_or_tail;
    uint8_t phase;
} Queue;

typedef struct Nvme {
    QTestState *qts;
    FlPci pci;
    Queue asq, acq, sq, cq;
    uint16_t cid;
    uint64_t buf;   /* 64 KiB data buffer */
    bool msix;      /* CQ 1 interrupts on, MSI-X vector IO_VECTOR */
    bool intx;      /* CQ 1 interrupts on, INTx (MSI-X off) */
    uint64_t cq_addr;   /* 0: n->cq.addr; else where CQ 1 is created */
    uint32_t msix_table, msix_pba;
    bool icount;    /* MODE_DET_ICOUNT: virtual time runs by itself */
    char *disk;
} Nvme;

typedef struct Cqe {
    uint32_t result;
    uint16_t cid;
    uint16_t status;    /* without the phase bit */
} Cqe;

static char *tmpdir;

static void wr32(Nvme *n, uint64_t off, uint32_t v)
{
    qpci_io_writel(n->pci.dev, n->pci.bar, off, v);
}

static uint32_t rd32(Nvme *n, uint64_t off)
{
    return qpci_io_readl(n->pci.dev, n->pci.bar, off);
}

static void wait_rdy(Nvme *n, uint32_t want)
{
    g_assert(FL_POLL(NVME_CSTS_RDY(rd32(n, NVME_REG_CSTS)) == want,
                     10000, 100));
}

static void enable(Nvme *n)
{
    uint32_t cc = 0;

    n->asq = (Queue) { .addr = n->asq.addr };
    n->acq = (Queue) { .addr = n->acq.addr, .phase = 1 };
    wr32(n, NVME_REG_AQA, ((QSIZE - 1) << AQA_ACQS_SHIFT) |
                          ((QSIZE - 1) << AQA_ASQS_SHIFT));
    qpci_io_writeq(n->pci.dev, n->pci.bar, NVME_REG_ASQ, n->asq.addr);
    qpci_io_writeq(n->pci.dev, n->pci.bar, NVME_REG_ACQ, n->acq.addr);
    qtest_memset(n->qts, n->acq.addr, 0, 4096);
    NVME_SET_CC_IOCQES(cc, ctz32(sizeof(NvmeCqe)));
    NVME_SET_CC_IOSQES(cc, ctz32(sizeof(NvmeCmd)));
    NVME_SET_CC_EN(cc, 1);
    wr32(n, NVME_REG_CC, cc);
    wait_rdy(n, 1);
}

/* Clear CC.EN and wait until the controller is disabled. */
static void disable(Nvme *n)
{
    wr32(n, NVME_REG_CC, 0);
    wait_rdy(n, 0);
}

static void submit(Nvme *n, Queue *sq, int qid, NvmeCmd *cmd)
{
    qtest_memwrite(n->qts, sq->addr + sq->head_or_tail * sizeof(*cmd), cmd,
                   sizeof(*cmd));
    sq->head_or_tail = (sq->head_or_tail + 1) % QSIZE;
    wr32(n, SQ_TAIL_DB(qid), sq->head_or_tail);
}

/* Whether @cq's next CQE is posted (into @e), without consuming it. */
static bool cqe_posted(Nvme *n, Queue *cq, NvmeCqe *e)
{
    qtest_memread(n->qts, cq->addr + cq->head_or_tail * sizeof(*e), e,
                  sizeof(*e));
    return CQE_PHASE(le16_to_cpu(e->status)) == cq->phase;
}

/* Next CQE on @cq (polling up to @tries times), or result NO_CQE. */
static Cqe poll_cqe(Nvme *n, Queue *cq, int qid, int tries)
{
    Cqe c = { .cid = 0xffff, .status = 0xffff, .result = NO_CQE };
    NvmeCqe e;

    for (int i = 0; i < tries; i++) {
        if (cqe_posted(n, cq, &e)) {
            c.result = le32_to_cpu(e.result);
            c.cid = le16_to_cpu(e.cid);
            c.status = CQE_STATUS(le16_to_cpu(e.status));
            cq->head_or_tail++;
            if (cq->head_or_tail == QSIZE) {
                cq->head_or_tail = 0;
                cq->phase ^= 1;
            }
            wr32(n, CQ_HEAD_DB(qid), cq->head_or_tail);
            return c;
        }
        if (i + 1 < tries) {
            g_usleep(200);
        }
    }
    return c;
}

/* The next CQE on @cq, which must be command @cid's. */
static Cqe wait_cqe(Nvme *n, Queue *cq, int qid, uint16_t cid)
{
    Cqe c = poll_cqe(n, cq, qid, 5000);

    g_assert_cmpuint(c.cid, ==, cid);
    return c;
}

static void cmd_init(Nvme *n, NvmeCmd *cmd, uint8_t opc, uint32_t nsid)
{
    memset(cmd, 0, sizeof(*cmd));
    cmd->opcode = opc;
    cmd->cid = cpu_to_le16(++n->cid);
    cmd->nsid = cpu_to_le32(nsid);
}

static void cmd_prp(NvmeCmd *cmd, uint64_t prp1, uint64_t prp2)
{
    cmd->dptr.prp1 = cpu_to_le64(prp1);
    cmd->dptr.prp2 = cpu_to_le64(prp2);
}

/* Run admin command @cmd (cmd_init'ed); returns its CQE. */
static Cqe admin_cmd(Nvme *n, NvmeCmd *cmd)
{
    submit(n, &n->asq, ADMIN_QID, cmd);
    return wait_cqe(n, &n->acq, ADMIN_QID, le16_to_cpu(cmd->cid));
}

/* Submit an admin command without waiting for it; returns its CID. */
static uint16_t admin_submit(Nvme *n, uint8_t opc, uint32_t nsid,
                             uint64_t prp1, uint32_t cdw10, uint32_t cdw11,
                             uint32_t cdw12)
{
    NvmeCmd cmd;

    cmd_init(n, &cmd, opc, nsid);
    cmd_prp(&cmd, prp1, 0);
    cmd.cdw10 = cpu_to_le32(cdw10);
    cmd.cdw11 = cpu_to_le32(cdw11);
    cmd.cdw12 = cpu_to_le32(cdw12);
    submit(n, &n->asq, ADMIN_QID, &cmd);
    return n->cid;
}

static Cqe admin(Nvme *n, uint8_t opc, uint32_t cdw10, uint32_t cdw11,
                 uint32_t cdw12)
{
    uint16_t cid = admin_submit(n, opc, 0, 0, cdw10, cdw11, cdw12);

    return wait_cqe(n, &n->acq, ADMIN_QID, cid);
}

static Cqe get_features(Nvme *n, uint32_t cdw10, uint32_t cdw11)
{
    return admin(n, NVME_ADM_CMD_GET_FEATURES, cdw10, cdw11, 0);
}

static Cqe set_features(Nvme *n, uint32_t cdw10, uint32_t cdw11,
                        uint32_t cdw12)
{
    return admin(n, NVME_ADM_CMD_SET_FEATURES, cdw10, cdw11, cdw12);
}

/* Abort command @cid of the I/O SQ. */
static Cqe abort_cmd(Nvme *n, uint16_t cid)
{
    return admin(n, NVME_ADM_CMD_ABORT, ABORT_CDW10(IO_QID, cid), 0, 0);
}

/* Delete I/O queue @opc (NVME_ADM_CMD_DELETE_SQ/CQ) IO_QID. */
static uint16_t delete_io_queue(Nvme *n, uint8_t opc)
{
    NvmeCmd cmd;

    cmd_init(n, &cmd, opc, 0);
    ((NvmeDeleteQ *)&cmd)->qid = cpu_to_le16(IO_QID);
    return admin_cmd(n, &cmd).status;
}

/* Create CQ and SQ @qid (physically contiguous), the SQ on that CQ. */
static void create_queue_pair(Nvme *n, uint16_t qid, uint64_t sq_addr,
                              uint64_t cq_addr, uint16_t cq_flags,
                              uint16_t vector)
{
    NvmeCmd cmd;
    NvmeCreateCq *ccq = (NvmeCreateCq *)&cmd;
    NvmeCreateSq *csq = (NvmeCreateSq *)&cmd;

    cmd_init(n, &cmd, NVME_ADM_CMD_CREATE_CQ, 0);
    ccq->prp1 = cpu_to_le64(cq_addr);
    ccq->cqid = cpu_to_le16(qid);
    ccq->qsize = cpu_to_le16(QSIZE - 1);
    ccq->cq_flags = cpu_to_le16(cq_flags);
    ccq->irq_vector = cpu_to_le16(vector);
    g_assert_cmphex(admin_cmd(n, &cmd).status, ==, NVME_SUCCESS);
    cmd_init(n, &cmd, NVME_ADM_CMD_CREATE_SQ, 0);
    csq->prp1 = cpu_to_le64(sq_addr);
    csq->sqid = cpu_to_le16(qid);
    csq->qsize = cpu_to_le16(QSIZE - 1);
    csq->sq_flags = cpu_to_le16(NVME_SQ_PC);
    csq->cqid = cpu_to_le16(qid);
    g_assert_cmphex(admin_cmd(n, &cmd).status, ==, NVME_SUCCESS);
}

static void create_io_queues(Nvme *n)
{
    uint16_t cq_flags = NVME_CQ_PC;

    if (n->msix || n->intx) {
        cq_flags |= NVME_CQ_IEN;
    }
    n->sq = (Queue) { .addr = n->sq.addr };
    n->cq = (Queue) { .addr = n->cq.addr, .phase = 1 };
    qtest_memset(n->qts, n->cq.addr, 0, 4096);
    create_queue_pair(n, IO_QID, n->sq.addr,
                      n->cq_addr ? n->cq_addr : n->cq.addr, cq_flags,
                      n->msix ? IO_VECTOR : 0);
}

/* Disable, enable and recreate the I/O queues: a controller reset. */
static void reset_ctrl(Nvme *n)
{
    disable(n);
    enable(n);
    create_io_queues(n);
}

static void rw_init(Nvme *n, NvmeCmd *cmd, uint8_t opc, uint64_t slba,
                    uint16_t nlb, uint64_t buf)
{
    NvmeRwCmd *rw = (NvmeRwCmd *)cmd;

    cmd_init(n, cmd, opc, IO_NSID);
    cmd_prp(cmd, buf, 0);
    rw->slba = cpu_to_le64(slba);
    rw->nlb = cpu_to_le16(nlb - 1);     /* 0's based */
}

/* Submit an I/O command; returns its cid. */
static uint16_t io_submit(Nvme *n, uint8_t opc, uint64_t slba, uint16_t nlb,
                          uint64_t buf)
{
    NvmeCmd cmd;

    rw_init(n, &cmd, opc, slba, nlb, buf);
    submit(n, &n->sq, IO_QID, &cmd);
    return n->cid;
}

/* One 4 KiB (8 x 512 B LBAs) command, waited for. */
static Cqe io(Nvme *n, uint8_t opc, uint64_t slba)
{
    uint16_t cid = io_submit(n, opc, slba, 8, n->buf);

    return wait_cqe(n, &n->cq, IO_QID, cid);
}

/* The next CQE on the I/O CQ is @cid's, with @status. */
static void expect_cqe(Nvme *n, uint16_t cid, uint16_t status)
{
    g_assert_cmphex(wait_cqe(n, &n->cq, IO_QID, cid).status, ==, status);
}

/* No CQE on the I/O CQ now. */
static void assert_no_cqe(Nvme *n, int tries)
{
    g_assert_cmpuint(poll_cqe(n, &n->cq, IO_QID, tries).result, ==, NO_CQE);
}

static uint32_t msix_vector_ctrl(Nvme *n)
{
    return n->msix_table + IO_VECTOR * PCI_MSIX_ENTRY_SIZE +
           PCI_MSIX_ENTRY_VECTOR_CTRL;
}

static void msix_setup(Nvme *n)
{
    QPCIDevice *dev = n->pci.dev;
    uint8_t cap = qpci_find_capability(dev, PCI_CAP_ID_MSIX, 0);
    uint16_t flags;
    uint32_t table, pba;

    g_assert(cap);
    flags = qpci_config_readw(dev, cap + PCI_MSIX_FLAGS);
    qpci_config_writew(dev, cap + PCI_MSIX_FLAGS,
                       flags | PCI_MSIX_FLAGS_ENABLE);
    table = qpci_config_readl(dev, cap + PCI_MSIX_TABLE);
    pba = qpci_config_readl(dev, cap + PCI_MSIX_PBA);
    /* both in BAR0, which is mapped already */
    g_assert_cmpuint(table & PCI_MSIX_FLAGS_BIRMASK, ==, 0);
    g_assert_cmpuint(pba & PCI_MSIX_FLAGS_BIRMASK, ==, 0);
    n->msix_table = table & ~PCI_MSIX_FLAGS_BIRMASK;
    n->msix_pba = pba & ~PCI_MSIX_FLAGS_BIRMASK;
    /* The vector masked: an interrupt only sets its pending bit. */
    wr32(n, msix_vector_ctrl(n), PCI_MSIX_ENTRY_CTRL_MASKBIT);
}

static bool msix_pending(Nvme *n)
{
    return rd32(n, n->msix_pba) & (1u << IO_VECTOR);
}

/* Deliver (and so clear) a pending I/O vector, then mask it again. */
static void msix_ack(Nvme *n)
{
    wr32(n, msix_vector_ctrl(n), 0);
    wr32(n, msix_vector_ctrl(n), PCI_MSIX_ENTRY_CTRL_MASKBIT);
    g_assert(!msix_pending(n));
}

/* The controller's INTx line, as PCI Status reports it. */
static bool intx_asserted(Nvme *n)
{
    return qpci_config_readw(n->pci.dev, PCI_STATUS) & PCI_STATUS_INTERRUPT;
}

typedef struct NvmeOpts {
    const char *rules;  /* NULL: no fault-injector */
    FlMode mode;
    bool msix;
    bool intx;
    const char *dev_opts;   /* appended to -device nvme */
    const char *blockdev;   /* -blockdev node "d0" instead of a disk file */
    bool cq_in_bar0;    /* create CQ 1 with PRP1 = BAR0 */
} NvmeOpts;

static Nvme *nvme_start_opts(const NvmeOpts *o)
{
    Nvme *n = g_new0(Nvme, 1);
    g_autofree char *machine = NULL;
    g_autofree char *drive = NULL;
    uint64_t cap;

    n->disk = fl_zero_file(tmpdir, "disk.img", 16 << 20);
    machine = fl_machine_args(tmpdir, o->rules, o->mode);
    drive = o->blockdev ? g_strdup_printf("-blockdev %s", o->blockdev) :
            g_strdup_printf("-drive file=%s,if=none,id=d0,format=raw",
                            n->disk);
    n->qts = qtest_initf("%s%s -device nvme,addr=04.0,serial=fl,drive=d0%s%s",
                         machine, drive,
                         o->rules ? ",fault-injector=fi0" : "",
                         o->dev_opts ? o->dev_opts : "");
    fl_pci_start(&n->pci, n->qts, 4);
    cap = qpci_io_readq(n->pci.dev, n->pci.bar, NVME_REG_CAP);
    g_assert_cmpuint(NVME_CAP_DSTRD(cap), ==, 0);
    n->asq.addr = guest_alloc(&n->pci.alloc, 4096);
    n->acq.addr = guest_alloc(&n->pci.alloc, 4096);
    n->sq.addr = guest_alloc(&n->pci.alloc, 4096);
    n->cq.addr = guest_alloc(&n->pci.alloc, 4096);
    n->buf = guest_alloc(&n->pci.alloc, 65536);
    n->msix = o->msix;
    n->intx = o->intx;
    n->icount = o->mode == FL_MODE_DET_ICOUNT;
    if (o->cq_in_bar0) {
        g_assert(!n->pci.bar.is_io);
        n->cq_addr = n->pci.bar.addr;
    }
    if (o->msix) {
        msix_setup(n);
    }
    enable(n);
    create_io_queues(n);
    return n;
}

static Nvme *nvme_start_full(const char *rules, bool msix, bool det)
{
    NvmeOpts o = { .rules = rules, .msix = msix,
                   .mode = det ? FL_MODE_DET_ICOUNT : FL_MODE_NORMAL };

    return nvme_start_opts(&o);
}

static Nvme *nvme_start(const char *rules)
{
    return nvme_start_full(rules, false, false);
}

static void nvme_stop(Nvme *n)
{
    fl_pci_stop(&n->pci);
    qtest_quit(n->qts);
    unlink(n->disk);
    g_free(n->disk);
    g_free(n);
}

static uint64_t rule_hits(Nvme *n, const char *name)
{
    return fl_rule_hits(n->qts, "fi0", name);
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
    uint32_t numd = len / 4 - 1;        /* dwords, 0's based */
    NvmeCmd cmd;

    qtest_memset(n->qts, n->buf, 0xaa, len);
    cmd_init(n, &cmd, NVME_ADM_CMD_GET_LOG_PAGE, NVME_NSID_BROADCAST);
    cmd_prp(&cmd, n->buf, len > 4096 ? n->buf + 4096 : 0);
    cmd.cdw10 = cpu_to_le32(lid | (numd << 16));    /* LID, NUMDL */
    cmd.cdw11 = cpu_to_le32(numd >> 16);            /* NUMDU */
    cmd.cdw12 = cpu_to_le32(off);                   /* LPOL */
    cmd.cdw13 = cpu_to_le32(off >> 32);             /* LPOU */
    return admin_cmd(n, &cmd).status;
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
    uint16_t want[8] = {
        NVME_SUCCESS, NVME_SUCCESS, NVME_SUCCESS, NVME_WRITE_FAULT,
        NVME_SUCCESS, NVME_WRITE_FAULT | NVME_DNR, NVME_SUCCESS,
        NVME_WRITE_FAULT,
    };
    uint16_t cids[8];
    NvmeSmartLog smart;
    NvmeErrorLog page[64];

    for (int i = 1; i <= 7; i++) {
        Cqe c;

        fill(n, 0x10 + i);
        c = io(n, NVME_CMD_WRITE, i * 8);
        cids[i] = c.cid;
        g_assert_cmphex(c.status, ==, want[i]);
    }
    /* when=before: nothing landed; when=after: the data is there. */
    g_assert_cmphex(io(n, NVME_CMD_READ, 3 * 8).status, ==, NVME_SUCCESS);
    g_assert_cmphex(first_byte(n), ==, 0);
    g_assert_cmphex(io(n, NVME_CMD_READ, 7 * 8).status, ==,
                    NVME_UNRECOVERED_READ | NVME_DNR);
    g_assert_cmphex(io(n, NVME_CMD_READ, 7 * 8).status, ==,
                    NVME_INTERNAL_DEV_ERROR);
    g_assert_cmphex(io(n, NVME_CMD_READ, 7 * 8).status, ==,
                    NVME_DATA_TRAS_ERROR);
    g_assert_cmphex(io(n, NVME_CMD_READ, 7 * 8).status, ==, NVME_CAP_EXCEEDED);
    g_assert_cmphex(io(n, NVME_CMD_READ, 7 * 8).status, ==, NVME_SUCCESS);
    g_assert_cmphex(first_byte(n), ==, 0x17);
    g_assert_cmpuint(rule_hits(n, "wf"), ==, 1);
    g_assert_cmpuint(rule_hits(n, "wa"), ==, 1);

    /* Error Information log: 64 entries, newest first. */
    g_assert_cmphex(get_log(n, NVME_LOG_ERROR_INFO, 4096, 0), ==, NVME_SUCCESS);
    qtest_memread(n->qts, n->buf, page, sizeof(page));
    for (int i = 0; i < 7; i++) {
        NvmeErrorLog *e = &page[i];
        uint16_t status = CQE_STATUS(le16_to_cpu(e->status_field));

        g_assert_cmpuint(le64_to_cpu(e->error_count), ==, 7 - i);
        g_assert_cmpuint(le16_to_cpu(e->sqid), ==, IO_QID);
        g_assert_cmpuint(le32_to_cpu(e->nsid), ==, IO_NSID);
        if (i == 4) {
            g_assert_cmphex(status, ==, NVME_WRITE_FAULT);
            g_assert_cmpuint(le16_to_cpu(e->cid), ==, cids[7]);
            g_assert_cmpuint(le64_to_cpu(e->lba), ==, 7 * 8);
        }
        if (i == 5) {
            g_assert_cmphex(status, ==, NVME_WRITE_FAULT | NVME_DNR);
            g_assert_cmpuint(le16_to_cpu(e->cid), ==, cids[5]);
        }
    }
    for (int i = 7; i < 64; i++) {
        g_assert_cmpuint(le64_to_cpu(page[i].error_count), ==, 0);
    }
    /* An offset inside the page works, past it is Invalid Field. */
    g_assert_cmphex(get_log(n, NVME_LOG_ERROR_INFO, 64, 64), ==, NVME_SUCCESS);
    g_assert_cmpuint(qtest_readq(n->qts, n->buf), ==, 6);
    g_assert_cmphex(get_log(n, NVME_LOG_ERROR_INFO, 64, 4096), ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    /* SMART: Number of Error Information Log Entries. */
    g_assert_cmphex(get_log(n, NVME_LOG_SMART_INFO, sizeof(smart), 0), ==,
                    NVME_SUCCESS);
    qtest_memread(n->qts, n->buf, &smart, sizeof(smart));
    g_assert_cmpuint(le64_to_cpu(smart.number_of_error_log_entries[0]), ==,
                     7);
    nvme_stop(n);
}

/* n->buf's 4 KiB are @byte, but for the bytes at @off[0..cnt), flipped. */
static void assert_buf(Nvme *n, uint8_t byte, const uint64_t *off, int cnt)
{
    fl_assert_guest_flipped(n->qts, n->buf, byte, off, cnt);
}

static int logged_offsets(Nvme *n, const char *rule, uint64_t *off, int max)
{
    return fl_logged_offsets(n->qts, "fi0", rule, off, max);
}

/*
 * lie: a write reports success and the old data stays; a read reports
 * success and the buffer keeps what it held.  corrupt: what a write
 * stored, or what a read delivered, differs by exactly N bytes, at the
 * logged offsets.  @opaque non-NULL: in deterministic mode.
 */
static void test_lie_corrupt(gconstpointer opaque)
{
    Nvme *n = nvme_start_full("l:  write lba=0-7 after=1 lie\n"
                              "lr: read lba=64-71 count=1 lie\n"
                              "c:  write lba=16-23 corrupt=3\n"
                              "r:  read lba=32-39 count=1 corrupt=2\n",
                              false, opaque != NULL);
    uint64_t off[16];

    fill(n, 0x11);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    fill(n, 0x22);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    g_assert_cmpuint(rule_hits(n, "l"), ==, 1);
    fill(n, 0);
    g_assert_cmphex(io(n, NVME_CMD_READ, 0).status, ==, NVME_SUCCESS);
    assert_buf(n, 0x11, NULL, 0);

    fill(n, 0x55);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 64).status, ==, NVME_SUCCESS);
    fill(n, 0x99);
    g_assert_cmphex(io(n, NVME_CMD_READ, 64).status, ==, NVME_SUCCESS);
    assert_buf(n, 0x99, NULL, 0);
    g_assert_cmphex(io(n, NVME_CMD_READ, 64).status, ==, NVME_SUCCESS);
    assert_buf(n, 0x55, NULL, 0);

    fill(n, 0x33);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 16).status, ==, NVME_SUCCESS);
    assert_buf(n, 0x33, NULL, 0);       /* the guest's copy is intact */
    fill(n, 0);
    g_assert_cmphex(io(n, NVME_CMD_READ, 16).status, ==, NVME_SUCCESS);
    g_assert_cmpint(logged_offsets(n, "c", off, 16), ==, 3);
    assert_buf(n, 0x33, off, 3);

    fill(n, 0x44);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 32).status, ==, NVME_SUCCESS);
    fill(n, 0);
    g_assert_cmphex(io(n, NVME_CMD_READ, 32).status, ==, NVME_SUCCESS);
    g_assert_cmpint(logged_offsets(n, "r", off, 16), ==, 2);
    assert_buf(n, 0x44, off, 2);
    g_assert_cmphex(io(n, NVME_CMD_READ, 32).status, ==, NVME_SUCCESS);
    assert_buf(n, 0x44, NULL, 0);       /* the disk's copy is intact */
    nvme_stop(n);
}

static void test_delay(void)
{
    Nvme *n = nvme_start("slow: write nth=2 delay=5ms\n");
    uint16_t cid;

    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    cid = io_submit(n, NVME_CMD_WRITE, 8, 8, n->buf);
    assert_no_cqe(n, 50);
    qtest_clock_step(n->qts, 4 * SCALE_MS);
    assert_no_cqe(n, 50);
    qtest_clock_step(n->qts, 1 * SCALE_MS + 1);
    expect_cqe(n, cid, NVME_SUCCESS);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 16).status, ==, NVME_SUCCESS);
    nvme_stop(n);
}

/* A command whose completion was dropped: no CQE until Abort ends it. */
static void assert_lost_until_abort(Nvme *n, uint16_t cid, int tries)
{
    Cqe c = poll_cqe(n, &n->cq, IO_QID, tries);

    g_assert_cmpuint(c.result, ==, NO_CQE);
    g_assert_cmphex(abort_cmd(n, cid).status, ==, NVME_SUCCESS);
    expect_cqe(n, cid, NVME_CMD_ABORT_REQ);
}

static void test_drop_abort(void)
{
    Nvme *n = nvme_start("lost: write nth=1 drop\n"
                         "slow: write nth=2 delay=1s\n");
    uint16_t cid;

    /* A dropped command: only Abort completes it. */
    cid = io_submit(n, NVME_CMD_WRITE, 0, 8, n->buf);
    qtest_clock_step(n->qts, 10 * NANOSECONDS_PER_SECOND);
    assert_lost_until_abort(n, cid, 50);

    /* A delayed one: Abort completes it, its timer never fires later. */
    cid = io_submit(n, NVME_CMD_WRITE, 8, 8, n->buf);
    assert_no_cqe(n, 50);
    abort_cmd(n, cid);
    expect_cqe(n, cid, NVME_CMD_ABORT_REQ);
    qtest_clock_step(n->qts, 2 * NANOSECONDS_PER_SECOND);
    assert_no_cqe(n, 50);
    /* Aborting a command that is not outstanding is harmless. */
    abort_cmd(n, cid);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 16).status, ==, NVME_SUCCESS);
    nvme_stop(n);
}

static void test_drop_sq_delete_reset(gconstpointer opaque)
{
    Nvme *n = nvme_start_full("lost: write drop\n", false, opaque != NULL);
    uint16_t cid, cid2;

    /* Delete I/O SQ completes the held commands as aborted. */
    cid = io_submit(n, NVME_CMD_WRITE, 0, 8, n->buf);
    cid2 = io_submit(n, NVME_CMD_WRITE, 8, 8, n->buf);
    assert_no_cqe(n, 50);
    g_assert_cmphex(delete_io_queue(n, NVME_ADM_CMD_DELETE_SQ), ==,
                    NVME_SUCCESS);
    expect_cqe(n, cid, NVME_CMD_ABORT_SQ_DEL);
    expect_cqe(n, cid2, NVME_CMD_ABORT_SQ_DEL);
    g_assert_cmphex(delete_io_queue(n, NVME_ADM_CMD_DELETE_CQ), ==,
                    NVME_SUCCESS);
    create_io_queues(n);

    /* Controller reset with held commands, then a working controller. */
    io_submit(n, NVME_CMD_WRITE, 0, 8, n->buf);
    io_submit(n, NVME_CMD_WRITE, 8, 8, n->buf);
    assert_no_cqe(n, 50);
    reset_ctrl(n);
    g_assert_cmphex(io(n, NVME_CMD_READ, 0).status, ==, NVME_SUCCESS);
    g_assert_cmpuint(rule_hits(n, "lost"), ==, 4);
    nvme_stop(n);
}

static void test_irq(void)
{
    Nvme *n = nvme_start_full("noirq:   write nth=2 irq=suppress\n"
                              "slowirq: write nth=3 irq-delay=1ms\n", true,
                              false);

    /* A normal completion raises vector 1. */
    g_assert(!msix_pending(n));
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    g_assert(msix_pending(n));
    msix_ack(n);
    /* Suppressed: the CQE is there, no interrupt. */
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 8).status, ==, NVME_SUCCESS);
    assert_no_cqe(n, 50);
    g_assert(!msix_pending(n));
    /* Delayed: the CQE is there, the interrupt comes 1 ms later. */
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 16).status, ==, NVME_SUCCESS);
    g_assert(!msix_pending(n));
    qtest_clock_step(n->qts, SCALE_MS / 2);
    g_assert(!msix_pending(n));
    qtest_clock_step(n->qts, SCALE_MS / 2 + 1);
    g_assert(msix_pending(n));
    msix_ack(n);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 24).status, ==, NVME_SUCCESS);
    g_assert(msix_pending(n));
    nvme_stop(n);
}

static void test_vendor(void)
{
    Nvme *n = nvme_start("st5:  write state=5 error=internal\n"
                         "arm:  read nth=1 set-state=7\n");
    struct {
        NvmeFaultHitsHdr hdr;
        NvmeFaultHitsEntry e[2];
    } log;
    Cqe c;

    /* Get/Set Features 0xC0: the engine state. */
    c = get_features(n, NVME_FAULT_FID, 0);
    g_assert_cmphex(c.status, ==, NVME_SUCCESS);
    g_assert_cmpuint(c.result, ==, 0);
    g_assert_cmphex(set_features(n, NVME_FAULT_FID, 5, 0).status, ==,
                    NVME_SUCCESS);
    c = get_features(n, NVME_FAULT_FID, 0);
    g_assert_cmpuint(c.result, ==, 5);
    g_assert_cmpint(fl_stat(n->qts, "fi0", "state"), ==, 5);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==,
                    NVME_INTERNAL_DEV_ERROR);
    /* A rule's set-state shows up in Get Features. */
    g_assert_cmphex(io(n, NVME_CMD_READ, 0).status, ==, NVME_SUCCESS);
    g_assert_cmpuint(get_features(n, NVME_FAULT_FID, 0).result, ==, 7);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    /* Supported capabilities: changeable. */
    c = get_features(n, NVME_FAULT_FID |
                     (NVME_GETFEAT_SELECT_CAP << NVME_GETFEAT_SELECT_SHIFT), 0);
    g_assert_cmpuint(c.result, ==, NVME_FEAT_CAP_CHANGE);

    /* Bad arguments: Invalid Field (or not saveable), never a crash. */
    g_assert_cmphex(set_features(n, NVME_FAULT_FID, 1, 1).status, ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    g_assert_cmphex(set_features(n, NVME_FAULT_FID |
                                 (1u << NVME_SETFEAT_SAVE_SHIFT), 1, 0).status,
                    ==, NVME_FID_NOT_SAVEABLE | NVME_DNR);
    /* select 5: reserved */
    g_assert_cmphex(get_features(n, NVME_FAULT_FID |
                                 (5 << NVME_GETFEAT_SELECT_SHIFT), 0).status,
                    ==, NVME_INVALID_FIELD | NVME_DNR);
    g_assert_cmphex(get_features(n, NVME_FAULT_FID, 3).status, ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    g_assert_cmphex(set_features(n, NVME_FAULT_FID + 1, 1, 0).status, ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    g_assert_cmphex(get_features(n, NO_SUCH_FID, 0).status, ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    g_assert_cmpuint(get_features(n, NVME_FAULT_FID, 0).result, ==, 7);

    /* Log page 0xC0: per-rule hit counts. */
    g_assert_cmphex(get_log(n, NVME_FAULT_LOG_ID, sizeof(log), 0), ==,
                    NVME_SUCCESS);
    qtest_memread(n->qts, n->buf, &log, sizeof(log));
    g_assert_cmpuint(le32_to_cpu(log.hdr.version), ==,
                     NVME_FAULT_HITS_LOG_VERSION);
    g_assert_cmpuint(le32_to_cpu(log.hdr.nrules), ==, 2);
    g_assert_cmpuint(le32_to_cpu(log.hdr.entry_size), ==,
                     sizeof(NvmeFaultHitsEntry));
    g_assert_cmpuint(le32_to_cpu(log.hdr.state), ==, 7);
    g_assert_cmpstr(log.e[0].name, ==, "st5");
    g_assert_cmpuint(le64_to_cpu(log.e[0].matched), ==, 1);
    g_assert_cmpuint(le64_to_cpu(log.e[0].hits), ==, 1);
    g_assert_cmpstr(log.e[1].name, ==, "arm");
    g_assert_cmpuint(le64_to_cpu(log.e[1].matched), ==, 1);
    g_assert_cmpuint(le64_to_cpu(log.e[1].hits), ==, 1);
    /* A partial read at an offset; past the end is Invalid Field. */
    g_assert_cmphex(get_log(n, NVME_FAULT_LOG_ID, 8,
                            offsetof(typeof(log), e[1].hits)), ==,
                    NVME_SUCCESS);
    g_assert_cmpuint(qtest_readq(n->qts, n->buf), ==, 1);
    g_assert_cmphex(get_log(n, NVME_FAULT_LOG_ID, 4, sizeof(log)), ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    g_assert_cmphex(get_log(n, NVME_FAULT_LOG_ID, 4, 1ull << 40), ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    g_assert_cmphex(get_log(n, NVME_FAULT_LOG_ID + 1, 4, 0), ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    /* Still alive and working. */
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    nvme_stop(n);
}

static void test_no_injector(void)
{
    Nvme *n = nvme_start(NULL);

    g_assert_cmphex(get_features(n, NVME_FAULT_FID, 0).status, ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    g_assert_cmphex(set_features(n, NVME_FAULT_FID, 1, 0).status, ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    g_assert_cmphex(get_log(n, NVME_FAULT_LOG_ID, 64, 0), ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    /* Upstream Error Information log: one zeroed entry. */
    g_assert_cmphex(get_log(n, NVME_LOG_ERROR_INFO, 64, 64), ==,
                    NVME_INVALID_FIELD | NVME_DNR);
    for (int i = 0; i < 20; i++) {
        g_assert_cmphex(io(n, NVME_CMD_WRITE, i * 8).status, ==, NVME_SUCCESS);
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
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    g_assert(msix_pending(n));
    msix_ack(n);
    fill(n, 0x33);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 8).status, ==, NVME_WRITE_FAULT);
    fill(n, 0);
    g_assert_cmphex(io(n, NVME_CMD_READ, 0).status, ==, NVME_SUCCESS);
    g_assert_cmphex(first_byte(n), ==, 0x5a);
    g_assert_cmphex(io(n, NVME_CMD_READ, 8).status, ==, NVME_SUCCESS);
    g_assert_cmphex(first_byte(n), ==, 0);      /* when=before: not written */
    g_assert(msix_pending(n));
    msix_ack(n);

    /* A lost completion stays lost however far virtual time goes. */
    cid = io_submit(n, NVME_CMD_WRITE, 16, 8, n->buf);
    assert_lost_until_abort(n, cid, 200);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 24).status, ==, NVME_SUCCESS);
    g_assert_cmpuint(rule_hits(n, "wf"), ==, 1);
    g_assert_cmpuint(rule_hits(n, "slow"), ==, 2);
    g_assert_cmpuint(rule_hits(n, "lost"), ==, 1);
    nvme_stop(n);
}

static void test_deterministic_errors(void)
{
    g_autofree char *disk = fl_zero_file(tmpdir, "disk.img", 1 << 20);
    g_autofree char *base = NULL, *args = NULL;

    base = g_strdup_printf("-object fault-injector,id=fi0,deterministic=on "
                           "-drive file=%s,if=none,id=d0,format=raw "
                           "-device nvme,serial=fl,drive=d0,"
                           "fault-injector=fi0", disk);
    /* No -icount. */
    args = g_strdup_printf("-machine pc -accel tcg %s", base);
    fl_expect_startup_error(args, "has deterministic=on, which needs -icount");
    g_free(args);
    /* Adaptive icount is not deterministic either. */
    args = g_strdup_printf("-machine pc -accel tcg -icount shift=auto %s",
                           base);
    fl_expect_startup_error(args, "has deterministic=on, which needs -icount");
    g_free(args);
    /* Doorbells through ioeventfd are handled outside the vCPU. */
    args = g_strdup_printf("-machine pc " FL_DET_ICOUNT_ACCEL "%s,ioeventfd=on",
                           base);
    fl_expect_startup_error(args, "deterministic=on needs ioeventfd=off");
    unlink(disk);
}

/*
 * delay=DUR completes no earlier than DUR after the submission, not DUR
 * after the backend: a 200 ms (real time) backend while 3 ms of virtual
 * time pass leaves 2 ms of the delay.
 */
static void test_delay_from_submission(void)
{
    NvmeOpts o = { .rules = "slow: write delay=5ms\n",
                   .blockdev = "driver=null-co,node-name=d0,size=16777216,"
                               "latency-ns=200000000" };
    Nvme *n = nvme_start_opts(&o);
    uint16_t cid;

    cid = io_submit(n, NVME_CMD_WRITE, 0, 8, n->buf);
    qtest_clock_step(n->qts, 3 * SCALE_MS);
    g_usleep(400 * 1000);           /* the backend is done meanwhile */
    assert_no_cqe(n, 20);
    qtest_clock_step(n->qts, 2 * SCALE_MS - 1);
    assert_no_cqe(n, 20);
    qtest_clock_step(n->qts, 1);
    expect_cqe(n, cid, NVME_SUCCESS);
    nvme_stop(n);
}

/*
 * Regression tests for guest-triggered crash paths (issue 12).  The
 * deterministic ones run under -icount and under the qtest accelerator.
 */

/* Let virtual time pass: clock_step under qtest, warps under -icount. */
static void det_advance(Nvme *n, FlMode mode, int64_t ns)
{
    if (mode == FL_MODE_DET_QTEST) {
        qtest_clock_step(n->qts, ns);
    }
}

/* Wait (up to ~2 s) until CSTS has all of @bits. */
static bool wait_csts(Nvme *n, uint32_t bits)
{
    return FL_POLL((rd32(n, NVME_REG_CSTS) & bits) == bits, 2000, 1000);
}

/*
 * A CQ whose PRP1 points into BAR0: posting a CQE is DMA into the
 * controller's own registers (the second CQE would clear CC.EN and free
 * the queues under nvme_post_cqes).  As upstream: controller fatal
 * status, and a reset brings the controller back.
 */
static void test_det_cq_in_bar0(gconstpointer opaque)
{
    NvmeOpts o = { .rules = "never: read lba=30000 error=eio\n",
                   .mode = GPOINTER_TO_INT(opaque), .cq_in_bar0 = true };
    Nvme *n = nvme_start_opts(&o);

    io_submit(n, NVME_CMD_FLUSH, 0, 1, 0);
    io_submit(n, NVME_CMD_FLUSH, 0, 1, 0);
    det_advance(n, o.mode, 1);
    g_assert(wait_csts(n, NVME_CSTS_FAILED));
    fl_assert_running(n->qts);

    disable(n);
    n->cq_addr = 0;
    enable(n);
    create_io_queues(n);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    nvme_stop(n);
}

/*
 * Shadow doorbells (Doorbell Buffer Config) whose I/O SQ tail and CQ head
 * read back as 0xffffffff: the SQ is never empty, the CQ never full, and
 * every CQE post restarts the SQ.  In deterministic mode that chain ran
 * in one pass of the timer list at one virtual instant, and QEMU never
 * returned (found by fuzzing, tests/fuzz/devices/crashes/
 * nvme-fault-det--dbbuf-spin).  QEMU must keep answering, and a reset
 * must end it.
 */
static void test_det_dbbuf_spin(gconstpointer opaque)
{
    NvmeOpts o = { .rules = "never: read lba=30000 error=eio\n",
                   .mode = GPOINTER_TO_INT(opaque) };
    Nvme *n = nvme_start_opts(&o);
    uint64_t dbs = guest_alloc(&n->pci.alloc, 4096);
    uint64_t eis = guest_alloc(&n->pci.alloc, 4096);
    uint64_t shadow_sq = dbs + SQ_TAIL_DB(IO_QID) - sizeof(NvmeBar);
    uint64_t shadow_cq = dbs + CQ_HEAD_DB(IO_QID) - sizeof(NvmeBar);
    NvmeCmd cmd;

    qtest_memset(n->qts, dbs, 0, 4096);
    qtest_memset(n->qts, eis, 0, 4096);
    cmd_init(n, &cmd, NVME_ADM_CMD_DBBUF_CONFIG, 0);
    cmd_prp(&cmd, dbs, eis);
    g_assert_cmphex(admin_cmd(n, &cmd).status, ==, NVME_SUCCESS);

    qtest_writel(n->qts, shadow_sq, 0xffffffff);
    qtest_writel(n->qts, shadow_cq, 0xffffffff);
    io_submit(n, NVME_CMD_FLUSH, 0, 1, 0);
    det_advance(n, o.mode, 100);
    fl_assert_running(n->qts);
    g_assert_cmphex(rd32(n, NVME_REG_CSTS) & NVME_CSTS_READY, ==,
                    NVME_CSTS_READY);

    disable(n);
    enable(n);
    create_io_queues(n);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    nvme_stop(n);
}

/*
 * Deterministic mode with atomic writes: a write that conflicts with a
 * held (delayed) write waits for it, and the main loop keeps running.
 */
static void test_det_atomic_held(gconstpointer opaque)
{
    NvmeOpts o = { .rules = "slow: write nth=1 delay=10ms\n",
                   .mode = GPOINTER_TO_INT(opaque),
                   .dev_opts = ",atomic.dn=off,atomic.awun=15" };
    Nvme *n = nvme_start_opts(&o);
    uint16_t held, blocked;

    held = io_submit(n, NVME_CMD_WRITE, 0, 8, n->buf);
    blocked = io_submit(n, NVME_CMD_WRITE, 0, 8, n->buf);
    fl_assert_running(n->qts);
    if (o.mode == FL_MODE_DET_QTEST) {
        assert_no_cqe(n, 20);
        det_advance(n, o.mode, 10 * SCALE_MS - 1);
        assert_no_cqe(n, 20);
        det_advance(n, o.mode, 1);
    }
    expect_cqe(n, held, NVME_SUCCESS);
    expect_cqe(n, blocked, NVME_SUCCESS);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    nvme_stop(n);
}

/*
 * Commands failed before their transfer and held (delay): a read failed
 * by the fault layer, a fused write (unsupported) by upstream's check.
 * The atomic write check of the next command walks them on out_req_list.
 */
static void test_held_error_atomic(void)
{
    NvmeOpts o = { .rules = "re:    read error=read-error delay=10ms\n"
                            "fused: write lba=128-135 delay=10ms\n",
                   .dev_opts = ",atomic.dn=off,atomic.awun=15" };
    Nvme *n = nvme_start_opts(&o);
    uint16_t rd, fused;
    NvmeCmd cmd;

    rd = io_submit(n, NVME_CMD_READ, 0, 8, n->buf);
    rw_init(n, &cmd, NVME_CMD_WRITE, 128, 8, n->buf);
    cmd.flags = FUSE_FIRST;
    submit(n, &n->sq, IO_QID, &cmd);
    fused = n->cid;
    assert_no_cqe(n, 20);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 64).status, ==, NVME_SUCCESS);
    qtest_clock_step(n->qts, 10 * SCALE_MS);
    expect_cqe(n, rd, NVME_UNRECOVERED_READ);
    expect_cqe(n, fused, NVME_INVALID_FIELD);
    g_assert_cmpuint(rule_hits(n, "re"), ==, 1);
    g_assert_cmpuint(rule_hits(n, "fused"), ==, 1);
    nvme_stop(n);
}

/*
 * Two writes whose data is in MMIO (the IOAPIC): the first holds the
 * device's one DMA bounce buffer while its (slow) backend write runs, the
 * second waits for a mapping.  A controller reset cancels both: it must
 * finish, not wait forever for the second.
 */
#define MMIO_DATA   0xfec00000

static void test_reset_dma_map_wait(void)
{
    NvmeOpts o = { .rules = "never: read lba=30000 error=eio\n",
                   .blockdev = "driver=null-co,node-name=d0,size=16777216,"
                               "latency-ns=300000000" };
    Nvme *n = nvme_start_opts(&o);

    io_submit(n, NVME_CMD_WRITE, 0, 8, MMIO_DATA);
    io_submit(n, NVME_CMD_WRITE, 8, 8, MMIO_DATA);
    reset_ctrl(n);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    nvme_stop(n);
}

/*
 * A controller reset while an atomic write waits for a held one it
 * overlaps.  Cancelling the held write runs a nested aio_poll(); the SQ
 * must not fetch and execute the waiting write then (the reset discards
 * it), nor spin in that poll.  Found by generic-fuzz as a machine reset
 * that never returned, and as a use-after-free of an SQ that an admin
 * command fetched during the reset deleted.
 */
static void test_reset_atomic_waiting(void)
{
    NvmeOpts o = { .rules = "slow: write nth=1 delay=10s\n",
                   .dev_opts = ",atomic.dn=off,atomic.awun=15" };
    Nvme *n = nvme_start_opts(&o);
    uint64_t second = n->buf + 4096;

    fill(n, 0xa1);
    io_submit(n, NVME_CMD_WRITE, 0, 8, n->buf);
    qtest_memset(n->qts, second, 0xb2, 4096);
    io_submit(n, NVME_CMD_WRITE, 0, 8, second);
    assert_no_cqe(n, 20);
    reset_ctrl(n);
    fill(n, 0);
    g_assert_cmphex(io(n, NVME_CMD_READ, 0).status, ==, NVME_SUCCESS);
    g_assert_cmphex(first_byte(n), ==, 0xa1);
    g_assert_cmpuint(rule_hits(n, "slow"), ==, 1);
    nvme_stop(n);
}

/* Wait until the I/O CQ's next CQE is posted, without consuming it. */
static void wait_cqe_posted(Nvme *n)
{
    NvmeCqe e;

    g_assert(FL_POLL(cqe_posted(n, &n->cq, &e), 5000, 200));
}

/*
 * INTx and irq-delay: a delayed interrupt for a CQ the guest emptied
 * meanwhile must not assert the line (nothing would deassert it).
 */
static void test_irq_delay_intx(void)
{
    NvmeOpts o = { .rules = "slowirq: write lba=0-7 irq-delay=1ms\n",
                   .intx = true };
    Nvme *n = nvme_start_opts(&o);

    /* Consumed before the delay is over: no interrupt at all. */
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    g_assert(!intx_asserted(n));
    qtest_clock_step(n->qts, SCALE_MS + 1);
    g_assert(!intx_asserted(n));

    /* Still there when the delay is over: the interrupt comes then. */
    io_submit(n, NVME_CMD_WRITE, 0, 8, n->buf);
    wait_cqe_posted(n);
    g_assert(!intx_asserted(n));
    qtest_clock_step(n->qts, SCALE_MS + 1);
    g_assert(intx_asserted(n));
    g_assert_cmphex(poll_cqe(n, &n->cq, IO_QID, 5000).status, ==, NVME_SUCCESS);
    g_assert(!intx_asserted(n));

    /* Not matching: at once. */
    io_submit(n, NVME_CMD_WRITE, 64, 8, n->buf);
    wait_cqe_posted(n);
    g_assert(intx_asserted(n));
    g_assert_cmphex(poll_cqe(n, &n->cq, IO_QID, 5000).status, ==, NVME_SUCCESS);
    g_assert(!intx_asserted(n));
    nvme_stop(n);
}

/* An aborted held command completes with a normal interrupt. */
static void test_abort_held_irq(void)
{
    NvmeOpts o = { .rules = "quiet: write nth=1 delay=1s irq=suppress\n",
                   .msix = true };
    Nvme *n = nvme_start_opts(&o);
    uint16_t cid;

    cid = io_submit(n, NVME_CMD_WRITE, 0, 8, n->buf);
    assert_no_cqe(n, 20);
    g_assert(!msix_pending(n));
    g_assert_cmphex(abort_cmd(n, cid).status, ==, NVME_SUCCESS);
    expect_cqe(n, cid, NVME_CMD_ABORT_REQ);
    g_assert(msix_pending(n));
    nvme_stop(n);
}

/*
 * A controller whose realize fails after the fault layer's checks
 * (namespace setup): a clear error, and QEMU stays up.  The layer
 * allocates last in realize, so nothing leaks (the ASAN suite checks).
 */
static void test_realize_fails(void)
{
    Nvme *n = nvme_start("never: read lba=30000 error=eio\n");
    g_autofree char *disk2 = fl_zero_file(tmpdir, "disk2.img", 1 << 20);

    qtest_qmp_assert_success(n->qts,
        "{'execute': 'blockdev-add', 'arguments': {'driver': 'raw', "
        "'node-name': 'd2', 'file': {'driver': 'file', 'filename': %s}}}",
        disk2);
    qtest_qmp_assert_success(n->qts, "{'execute': 'object-add', "
                             "'arguments': {'qom-type': 'fault-injector', "
                             "'id': 'fi1'}}");
    for (int i = 0; i < 3; i++) {
        g_autofree char *err = fl_qmp_error(n->qts,
            "{'execute': 'device_add', 'arguments': {"
            "'driver': 'nvme', 'id': 'bad', 'serial': 'bad', "
            "'drive': 'd2', 'fault-injector': %s, "
            "'logical_block_size': 4096, 'physical_block_size': 512}}",
            i ? "fi1" : "fi0");

        g_assert(strstr(err, "physical_block_size"));
    }
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    /*
     * The failed controllers left no attachment behind.  (object-del of
     * fi1 stays refused: upstream's failed realize keeps the controller,
     * and so its link to fi1, alive.)
     */
    g_assert(!fl_refuses(n->qts, "fi1", "write cpu=0 error=eio", NULL));
    nvme_stop(n);
    unlink(disk2);
}

/*
 * sq=2 fails the writes on SQ 2 only: SQ 1's writes land, SQ 2's report
 * Write Fault in their CQE and store nothing.
 */
static void test_sq_key(void)
{
    Nvme *n = nvme_start("sq2: write sq=2 error=write-fault\n");
    Queue sq2 = { .addr = guest_alloc(&n->pci.alloc, 4096) };
    Queue cq2 = { .addr = guest_alloc(&n->pci.alloc, 4096), .phase = 1 };
    QDict *rsp;

    qtest_memset(n->qts, cq2.addr, 0, 4096);
    create_queue_pair(n, 2, sq2.addr, cq2.addr, NVME_CQ_PC, 0);
    for (int i = 0; i < 4; i++) {
        NvmeCmd cmd;
        NvmeRwCmd *rw = (NvmeRwCmd *)&cmd;
        Cqe c;

        fill(n, 0x21 + i);
        g_assert_cmphex(io(n, NVME_CMD_WRITE, i * 16).status, ==, 0);
        fill(n, 0x41 + i);
        cmd_init(n, &cmd, NVME_CMD_WRITE, IO_NSID);
        cmd_prp(&cmd, n->buf, 0);
        rw->slba = cpu_to_le64(i * 16 + 8);
        rw->nlb = cpu_to_le16(7);
        submit(n, &sq2, 2, &cmd);
        c = poll_cqe(n, &cq2, 2, 5000);
        g_assert_cmpuint(c.cid, ==, n->cid);
        g_assert_cmphex(c.status, ==, NVME_WRITE_FAULT);
    }
    for (int i = 0; i < 4; i++) {
        g_assert_cmphex(io(n, NVME_CMD_READ, i * 16).status, ==, 0);
        g_assert_cmphex(first_byte(n), ==, 0x21 + i);
        g_assert_cmphex(io(n, NVME_CMD_READ, i * 16 + 8).status, ==, 0);
        g_assert_cmphex(first_byte(n), ==, 0);
    }
    g_assert_cmpuint(rule_hits(n, "sq2"), ==, 4);

    /* NVMe knows no vCPU (the SQ runs in a bottom half): cpu= is refused. */
    rsp = qtest_qmp(n->qts, "{'execute': 'x-fault-add-rules', 'arguments': "
                    "{'id': 'fi0', 'rules': 'write cpu=0 error=eio'}}");
    g_assert(qdict_haskey(rsp, "error"));
    g_assert_cmpstr(qdict_get_str(qdict_get_qdict(rsp, "error"), "desc"), ==,
                    "1:7: 'cpu' is not supplied by nvme");
    qobject_unref(rsp);
    nvme_stop(n);
}

static void test_cpu_key_refused(void)
{
    g_autofree char *disk = g_build_filename(tmpdir, "disk.img", NULL);
    g_autofree char *rules = fl_write_file(tmpdir, "cpu.rules",
                                           "c0: write cpu=0 error=eio\n");
    g_autofree char *args = NULL;

    g_assert(g_file_set_contents(disk, "", 0, NULL));
    g_assert(truncate(disk, 1 << 20) == 0);
    args = g_strdup_printf("-machine pc -accel qtest "
                           "-object fault-injector,id=fi0,rules=%s "
                           "-drive file=%s,if=none,id=d0,format=raw "
                           "-device nvme,serial=fl,drive=d0,"
                           "fault-injector=fi0", rules, disk);
    fl_expect_startup_error(args, "nvme: rule 'c0' of fault-injector 'fi0' "
                            "matches on cpu=, which nvme does not supply\n");
    unlink(disk);
    unlink(rules);
}
/*
 * irq=suppress counts a hit (and uses up count=) only when it kept an
 * interrupt from being raised.  Deterministic mode under the qtest
 * accelerator posts the CQEs of both writes in one round, when the
 * clock steps.
 */
static void test_irq_suppress_hits(void)
{
    NvmeOpts o = { .rules = "noirq: write lba=8-15 count=1 irq=suppress\n",
                   .msix = true, .mode = FL_MODE_DET_QTEST };
    Nvme *n = nvme_start_opts(&o);
    uint16_t a, b;

    /*
     * A normal CQE in the same round raises the interrupt: no hit.  One
     * doorbell for both: their CQEs are posted together.
     */
    for (int i = 0; i < 2; i++) {
        NvmeCmd cmd;
        NvmeRwCmd *rw = (NvmeRwCmd *)&cmd;

        cmd_init(n, &cmd, NVME_CMD_WRITE, IO_NSID);
        cmd_prp(&cmd, n->buf, 0);
        rw->slba = cpu_to_le64(i * 8);
        rw->nlb = cpu_to_le16(7);
        qtest_memwrite(n->qts, n->sq.addr + n->sq.head_or_tail * sizeof(cmd),
                       &cmd, sizeof(cmd));
        n->sq.head_or_tail = (n->sq.head_or_tail + 1) % QSIZE;
    }
    a = n->cid - 1;
    b = n->cid;
    wr32(n, SQ_TAIL_DB(1), n->sq.head_or_tail);
    det_advance(n, o.mode, 1);
    expect_cqe(n, a, NVME_SUCCESS);
    expect_cqe(n, b, NVME_SUCCESS);
    g_assert(msix_pending(n));
    g_assert_cmpuint(rule_hits(n, "noirq"), ==, 0);
    msix_ack(n);

    /* Alone, it suppresses the interrupt: a hit, count=1 used up. */
    b = io_submit(n, NVME_CMD_WRITE, 8, 8, n->buf);
    det_advance(n, o.mode, 1);
    expect_cqe(n, b, NVME_SUCCESS);
    g_assert(!msix_pending(n));
    g_assert_cmpuint(rule_hits(n, "noirq"), ==, 1);

    b = io_submit(n, NVME_CMD_WRITE, 8, 8, n->buf);
    det_advance(n, o.mode, 1);
    expect_cqe(n, b, NVME_SUCCESS);
    g_assert(msix_pending(n));
    g_assert_cmpuint(rule_hits(n, "noirq"), ==, 1);
    nvme_stop(n);
}

/* The action of the @nth (from 0) log entry of rule @rule, or NULL. */
static char *logged_action(Nvme *n, const char *rule, int nth)
{
    QDict *rsp = qtest_qmp_assert_success_ref(n->qts,
        "{'execute': 'x-fault-query-log', 'arguments': {'id': 'fi0'}}");
    QListEntry *e;
    char *action = NULL;

    QLIST_FOREACH_ENTRY(qdict_get_qlist(rsp, "entries"), e) {
        QDict *ent = qobject_to(QDict, qlist_entry_obj(e));

        if (!strcmp(qdict_get_str(ent, "rule"), rule) && nth-- == 0) {
            action = g_strdup(qdict_get_str(ent, "action"));
        }
    }
    qobject_unref(rsp);
    return action;
}

/*
 * Let @ns of virtual time pass under the qtest accelerator; under -icount
 * (sleep=off) an idle guest's clock warps to the next timer by itself, so
 * give it a little host time instead.
 */
static void clock_step_ns(Nvme *n, int64_t ns)
{
    if (n->icount) {
        g_usleep(MIN(ns / 1000, 20000));
    } else {
        qtest_clock_step(n->qts, ns);
    }
}

/*
 * fatal: CSTS.CFS, then no command is fetched and no CQE posted (I/O or
 * admin, however far time goes) until CC.EN 1->0, which clears it all.
 * @opaque non-NULL: in deterministic mode.
 */
static void test_fatal(gconstpointer opaque)
{
    Nvme *n = nvme_start_full("die: write nth=2 fatal\n", false,
                              opaque != NULL);
    g_autofree char *action = NULL;
    uint16_t acid;

    fill(n, 0x11);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, 0);
    g_assert_cmphex(rd32(n, NVME_REG_CSTS), ==, NVME_CSTS_READY);

    /* The rule fires: the command is not executed, the controller halts. */
    fill(n, 0x66);
    io_submit(n, NVME_CMD_WRITE, 8, 8, n->buf);
    assert_no_cqe(n, 50);
    g_assert_cmphex(rd32(n, NVME_REG_CSTS), ==,
                    NVME_CSTS_READY | NVME_CSTS_FAILED);
    /* Doorbells are taken, nothing is fetched: neither I/O nor admin. */
    fill(n, 0x77);
    io_submit(n, NVME_CMD_WRITE, 16, 8, n->buf);
    acid = admin_submit(n, NVME_ADM_CMD_GET_FEATURES, 0, 0, NVME_FAULT_FID,
                        0, 0);
    clock_step_ns(n, 60 * NANOSECONDS_PER_SECOND);
    assert_no_cqe(n, 50);
    g_assert_cmpuint(poll_cqe(n, &n->acq, 0, 50).result, ==, NO_CQE);
    g_assert_cmphex(rd32(n, NVME_REG_CSTS), ==,
                    NVME_CSTS_READY | NVME_CSTS_FAILED);
    (void)acid;
    /* Logged like every action, once. */
    g_assert_cmpuint(rule_hits(n, "die"), ==, 1);
    action = logged_action(n, "die", 0);
    g_assert_cmpstr(action, ==, "fatal");

    /* The host resets the controller: CFS clears, it works again. */
    disable(n);
    g_assert_cmphex(rd32(n, NVME_REG_CSTS), ==, 0);
    enable(n);
    g_assert_cmphex(rd32(n, NVME_REG_CSTS), ==, NVME_CSTS_READY);
    create_io_queues(n);
    /* No CQE of the halted commands surfaces after the reset. */
    assert_no_cqe(n, 20);
    fill(n, 0);
    g_assert_cmphex(io(n, NVME_CMD_READ, 0).status, ==, 0);
    g_assert_cmphex(first_byte(n), ==, 0x11);
    /* Neither the fatal command nor the one after it was executed. */
    g_assert_cmphex(io(n, NVME_CMD_READ, 8).status, ==, 0);
    g_assert_cmphex(first_byte(n), ==, 0);
    g_assert_cmphex(io(n, NVME_CMD_READ, 16).status, ==, 0);
    g_assert_cmphex(first_byte(n), ==, 0);
    fill(n, 0x22);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 24).status, ==, 0);
    g_assert_cmphex(get_features(n, NVME_FAULT_FID, 0).status, ==, 0);
    g_assert_cmpuint(rule_hits(n, "die"), ==, 1);
    nvme_stop(n);
}

/* CC.EN 0->1 without waiting: RDY must stay 0 for the host's whole wait. */
static void enable_fails(Nvme *n, uint64_t cap)
{
    /* CAP.TO in 500 ms units: what Linux's nvme_wait_ready() waits. */
    int64_t to_ns = (NVME_CAP_TO(cap) + 1) * 500 * SCALE_MS;

    n->asq = (Queue) { .addr = n->asq.addr };
    n->acq = (Queue) { .addr = n->acq.addr, .phase = 1 };
    qtest_memset(n->qts, n->acq.addr, 0, 4096);
    wr32(n, NVME_REG_CC, (4 << CC_IOCQES_SHIFT) | (6 << CC_IOSQES_SHIFT) |
                         (1 << CC_EN_SHIFT));
    for (int i = 0; i < 10; i++) {
        clock_step_ns(n, to_ns / 10);
        g_assert_cmphex(rd32(n, NVME_REG_CSTS), ==, 0);
    }
    /* Not ready: the admin queue does not run either. */
    admin_submit(n, NVME_ADM_CMD_GET_FEATURES, 0, 0, NVME_FAULT_FID, 0, 0);
    g_assert_cmpuint(poll_cqe(n, &n->acq, 0, 20).result, ==, NO_CQE);
    disable(n);
}

/* reset-fail=N: the next N enables never reach RDY, then they do again. */
static void test_reset_fail(gconstpointer opaque)
{
    Nvme *n = nvme_start_full("rf: write nth=2 reset-fail=2\n"
                              "die: write nth=2 fatal\n", false,
                              opaque != NULL);
    uint64_t cap = qpci_io_readq(n->pci.dev, n->pci.bar, NVME_REG_CAP);
    g_autofree char *action = NULL;

    /* QEMU's CAP.TO: 15, a 8 s wait for the host. */
    g_assert_cmpuint(NVME_CAP_TO(cap), ==, 15);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, 0);
    /* Armed by a command (here with fatal, as a dying controller). */
    io_submit(n, NVME_CMD_WRITE, 8, 8, n->buf);
    assert_no_cqe(n, 20);
    g_assert_cmphex(rd32(n, NVME_REG_CSTS), ==,
                    NVME_CSTS_READY | NVME_CSTS_FAILED);
    action = logged_action(n, "rf", 0);
    g_assert_cmpstr(action, ==, "reset-fail=2");

    disable(n);
    enable_fails(n, cap);
    enable_fails(n, cap);
    /* The third enable works, and so does the controller. */
    enable(n);
    create_io_queues(n);
    g_assert_cmphex(io(n, NVME_CMD_READ, 0).status, ==, 0);
    /* Exhausted: later resets succeed. */
    disable(n);
    enable(n);
    create_io_queues(n);
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 16).status, ==, 0);
    g_assert_cmpuint(rule_hits(n, "rf"), ==, 1);
    nvme_stop(n);
}

/* A machine reset forgets failing enables armed before it. */
static void test_reset_fail_machine_reset(void)
{
    Nvme *n = nvme_start("rf: write nth=1 reset-fail=3\n");

    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, 0);
    qtest_qmp_assert_success(n->qts, "{'execute': 'system_reset'}");
    qtest_qmp_eventwait(n->qts, "RESET");
    qpci_device_enable(n->pci.dev);
    n->pci.bar = qpci_iomap(n->pci.dev, 0, NULL);
    enable(n);
    create_io_queues(n);
    g_assert_cmphex(io(n, NVME_CMD_READ, 0).status, ==, 0);
    nvme_stop(n);
}

/* Bad controller-failure rule text is refused with its position. */
static void test_ctrl_fail_bad_rules(void)
{
    Nvme *n = nvme_start("never: read lba=30000 error=eio\n");
    static const struct {
        const char *rules, *msg;
    } bad[] = {
        { "x: write reset-fail=0",
          "1:10: reset-fail=0 out of range (expected 1 to 255 enables)" },
        { "x: write reset-fail=256",
          "1:10: reset-fail=256 out of range (expected 1 to 255 enables)" },
        { "x: write reset-fail", "1:10: 'reset-fail' needs a value" },
        { "x: write fatal=yes", "1:10: 'fatal' takes no value" },
        { "x: write fatal fatal", "1:16: duplicate key 'fatal'" },
    };

    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        QDict *rsp = qtest_qmp(n->qts, "{'execute': 'x-fault-add-rules', "
                               "'arguments': {'id': 'fi0', 'rules': %s}}",
                               bad[i].rules);
        const char *desc;

        g_assert(qdict_haskey(rsp, "error"));
        desc = qdict_get_str(qdict_get_qdict(rsp, "error"), "desc");
        if (!g_str_has_prefix(desc, bad[i].msg)) {
            g_test_message("'%s': got '%s'", bad[i].rules, desc);
            g_assert_not_reached();
        }
        qobject_unref(rsp);
    }
    /* NVMe takes them: nothing refuses them here. */
    qtest_qmp_assert_success(n->qts, "{'execute': 'x-fault-add-rules', "
                             "'arguments': {'id': 'fi0', 'rules': "
                             "'ok: read lba=30000 fatal reset-fail=1'}}");
    g_assert_cmphex(io(n, NVME_CMD_WRITE, 0).status, ==, NVME_SUCCESS);
    nvme_stop(n);
}

/* Remove nv0 (slot 4) as the guest's ACPI hotplug does. */
static void remove_device(Nvme *n)
{
    fl_pci_unplug(n->qts, "nv0", 4);
}

/*
 * Surprise removal (device_del and ACPI eject) of a controller with one
 * command held by drop and one under delay=: QEMU stays up, the delay's
 * timer never fires into the freed controller, and the injector is free
 * again (object-del succeeds once no device uses it).
 */
static void test_surprise_removal(gconstpointer opaque)
{
    NvmeOpts o = { .rules = "held: write lba=8 drop\n"
                            "slow: write lba=16 delay=1s\n",
                   .mode = GPOINTER_TO_INT(opaque),
                   .dev_opts = ",id=nv0" };
    Nvme *n = nvme_start_opts(&o);
    g_autofree char *err = NULL;

    io_submit(n, NVME_CMD_WRITE, 8, 8, n->buf);
    io_submit(n, NVME_CMD_WRITE, 16, 8, n->buf);
    assert_no_cqe(n, 20);
    g_assert_cmpuint(rule_hits(n, "held"), ==, 1);
    g_assert_cmpuint(rule_hits(n, "slow"), ==, 1);
    err = fl_qmp_error(n->qts, "{'execute': 'object-del', 'arguments': "
                       "{'id': 'fi0'}}");
    g_assert(strstr(err, "fi0"));

    /* Deterministic mode used to leak the cancelled commands' mappings. */
    remove_device(n);
    qtest_clock_step(n->qts, 2 * NANOSECONDS_PER_SECOND);
    fl_assert_running(n->qts);
    qtest_qmp_assert_success(n->qts, "{'execute': 'object-del', "
                             "'arguments': {'id': 'fi0'}}");
    fl_assert_running(n->qts);
    nvme_stop(n);
}

/*
 * The same with one held command: its cancel is the reset's last, and
 * the CQE it completes with must still be posted (upstream's cq->bh,
 * scheduled then, is deleted with the CQ before it runs).
 */
static void test_removal_one_held(gconstpointer opaque)
{
    NvmeOpts o = { .rules = "held: write lba=8 drop\n",
                   .mode = GPOINTER_TO_INT(opaque),
                   .dev_opts = ",id=nv0" };
    Nvme *n = nvme_start_opts(&o);

    io_submit(n, NVME_CMD_WRITE, 8, 8, n->buf);
    assert_no_cqe(n, 20);
    remove_device(n);
    nvme_stop(n);
}

/*
 * A write completes while the controller is halted by fatal: its CQE is
 * held back with its mapped data, whose QEMUSGList holds a reference to
 * the device.  The removal's reset must drop it (the CQE is discarded),
 * or the device is never finalized and DEVICE_DELETED never comes.
 */
static void test_fatal_held_cqe_removal(void)
{
    NvmeOpts o = { .rules = "slow: write lba=16 delay=1ms\n"
                            "die: write lba=8 fatal\n",
                   .dev_opts = ",id=nv0" };
    Nvme *n = nvme_start_opts(&o);

    io_submit(n, NVME_CMD_WRITE, 16, 8, n->buf);
    io_submit(n, NVME_CMD_WRITE, 8, 8, n->buf);
    qtest_clock_step(n->qts, 2 * SCALE_MS);
    assert_no_cqe(n, 20);
    g_assert_cmpuint(rule_hits(n, "slow"), ==, 1);
    g_assert_cmpuint(rule_hits(n, "die"), ==, 1);

    remove_device(n);
    qtest_qmp_assert_success(n->qts, "{'execute': 'object-del', "
                             "'arguments': {'id': 'fi0'}}");
    nvme_stop(n);
}


/*
 * A controller attaches to its injector at realize and detaches when it
 * goes: while attached the injector refuses cpu= rules and object-del;
 * after an unplug it takes both.  A controller whose injector has a cpu=
 * rule is refused and takes nothing.
 */
static void test_attach_detach(void)
{
    NvmeOpts o = { .rules = "", .dev_opts = ",id=nv0" };
    Nvme *n = nvme_start_opts(&o);
    static const char cpu_rule[] = "write cpu=0 error=eio";
    g_autofree char *err = NULL;

    g_assert(fl_refuses(n->qts, "fi0", cpu_rule,
                        "1:14: 'cpu' is not supplied by nvme"));
    g_assert(!fl_refuses(n->qts, "fi0", "write sq=1 fatal reset-fail=1",
                         NULL));
    g_assert(!fl_object_del(n->qts, "fi0"));
    remove_device(n);
    g_assert(!fl_refuses(n->qts, "fi0", cpu_rule, NULL));

    /* -drive's d0 went with nv0. */
    qtest_qmp_assert_success(n->qts, "{'execute': 'blockdev-add', "
                             "'arguments': {'driver': 'null-co', "
                             "'node-name': 'd1', 'size': 1048576}}");
    fl_add_rules(n->qts, "fi0", "c0: write cpu=0 error=eio\n");
    err = fl_qmp_error(n->qts, "{'execute': 'device_add', 'arguments': {"
                       "'driver': 'nvme', 'id': 'nv1', 'serial': 'fl1', "
                       "'drive': 'd1', 'fault-injector': 'fi0'}}");
    g_assert_cmpstr(err, ==, "nvme: rule 'c0' of fault-injector 'fi0' "
                    "matches on cpu=, which nvme does not supply");
    fl_delete_rule(n->qts, "fi0", "c0");
    g_assert(fl_object_del(n->qts, "fi0"));
    nvme_stop(n);
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    tmpdir = fl_tmpdir_make("nvme-fault-test");
    qtest_add_data_func("/nvme-fault/errors", NULL, test_errors);
    qtest_add_data_func("/nvme-fault/lie-corrupt", NULL, test_lie_corrupt);
    qtest_add_data_func("/nvme-fault/deterministic/lie-corrupt", "det",
                        test_lie_corrupt);
    qtest_add_func("/nvme-fault/delay", test_delay);
    qtest_add_func("/nvme-fault/drop-abort", test_drop_abort);
    qtest_add_data_func("/nvme-fault/drop-sq-delete-reset", NULL,
                        test_drop_sq_delete_reset);
    qtest_add_func("/nvme-fault/irq", test_irq);
    qtest_add_func("/nvme-fault/sq-key", test_sq_key);
    qtest_add_func("/nvme-fault/deterministic-qtest/irq-suppress-hits",
                   test_irq_suppress_hits);
    qtest_add_func("/nvme-fault/cpu-key-refused", test_cpu_key_refused);
    qtest_add_func("/nvme-fault/attach-detach", test_attach_detach);
    qtest_add_func("/nvme-fault/vendor", test_vendor);
    qtest_add_func("/nvme-fault/no-injector", test_no_injector);
    qtest_add_func("/nvme-fault/deterministic/basic", test_deterministic);
    qtest_add_data_func("/nvme-fault/deterministic/errors", "det",
                        test_errors);
    qtest_add_data_func("/nvme-fault/deterministic/drop-sq-delete-reset",
                        "det", test_drop_sq_delete_reset);
    qtest_add_func("/nvme-fault/deterministic/bad-config",
                   test_deterministic_errors);
    qtest_add_data_func("/nvme-fault/deterministic/cq-in-bar0",
                        GINT_TO_POINTER(FL_MODE_DET_ICOUNT),
                        test_det_cq_in_bar0);
    qtest_add_data_func("/nvme-fault/deterministic-qtest/cq-in-bar0",
                        GINT_TO_POINTER(FL_MODE_DET_QTEST),
                        test_det_cq_in_bar0);
    qtest_add_data_func("/nvme-fault/deterministic/dbbuf-spin",
                        GINT_TO_POINTER(FL_MODE_DET_ICOUNT),
                        test_det_dbbuf_spin);
    qtest_add_data_func("/nvme-fault/deterministic-qtest/dbbuf-spin",
                        GINT_TO_POINTER(FL_MODE_DET_QTEST),
                        test_det_dbbuf_spin);
    qtest_add_data_func("/nvme-fault/deterministic/atomic-held",
                        GINT_TO_POINTER(FL_MODE_DET_ICOUNT),
                        test_det_atomic_held);
    qtest_add_data_func("/nvme-fault/deterministic-qtest/atomic-held",
                        GINT_TO_POINTER(FL_MODE_DET_QTEST),
                        test_det_atomic_held);
    qtest_add_func("/nvme-fault/delay-from-submission",
                   test_delay_from_submission);
    qtest_add_func("/nvme-fault/held-error-atomic", test_held_error_atomic);
    qtest_add_func("/nvme-fault/irq-delay-intx", test_irq_delay_intx);
    qtest_add_func("/nvme-fault/abort-held-irq", test_abort_held_irq);
    qtest_add_func("/nvme-fault/realize-fails", test_realize_fails);
    qtest_add_func("/nvme-fault/reset-dma-map-wait", test_reset_dma_map_wait);
    qtest_add_func("/nvme-fault/reset-atomic-waiting",
                   test_reset_atomic_waiting);
    qtest_add_data_func("/nvme-fault/fatal", NULL, test_fatal);
    qtest_add_data_func("/nvme-fault/deterministic/fatal", "det", test_fatal);
    qtest_add_data_func("/nvme-fault/reset-fail", NULL, test_reset_fail);
    qtest_add_data_func("/nvme-fault/deterministic/reset-fail", "det",
                        test_reset_fail);
    qtest_add_func("/nvme-fault/reset-fail-machine-reset",
                   test_reset_fail_machine_reset);
    qtest_add_data_func("/nvme-fault/surprise-removal",
                        GINT_TO_POINTER(FL_MODE_NORMAL), test_surprise_removal);
    qtest_add_data_func("/nvme-fault/deterministic-qtest/surprise-removal",
                        GINT_TO_POINTER(FL_MODE_DET_QTEST),
                        test_surprise_removal);
    qtest_add_data_func("/nvme-fault/removal-one-held",
                        GINT_TO_POINTER(FL_MODE_NORMAL), test_removal_one_held);
    qtest_add_data_func("/nvme-fault/deterministic-qtest/removal-one-held",
                        GINT_TO_POINTER(FL_MODE_DET_QTEST),
                        test_removal_one_held);
    qtest_add_func("/nvme-fault/fatal-held-cqe-removal",
                   test_fatal_held_cqe_removal);
    qtest_add_func("/nvme-fault/ctrl-fail-bad-rules",
                   test_ctrl_fail_bad_rules);
    ret = g_test_run();
    fl_tmpdir_remove(tmpdir);
    return ret;
}
