/*
 * faultline NVMe fault layer.
 *
 * Every I/O command (read, write, write zeroes, flush, dataset management)
 * asks the fault engine once, in submission order, before it reaches the
 * block layer.  The decision is kept in the request (NvmeFaultReq) and
 * applied when the command completes:
 *
 *   error, when=before  the command fails at once, no data moves
 *   error, when=after   the I/O is done, then completes with the error
 *   delay=DUR           the CQE is posted no earlier than DUR after the
 *                       submission (virtual clock)
 *   drop, timeout       the CQE is never posted: only Abort, SQ deletion or
 *                       a controller reset complete the command (aborted)
 *   irq=suppress/delay  no interrupt / a later interrupt for the CQE
 *   lie                 the command is not executed (no backend I/O, no
 *                       DMA) and completes with success (or the error)
 *   corrupt             a read's bytes are flipped in guest memory after
 *                       the transfer; a successful write is stored again
 *                       from a flipped copy before it completes
 *   fatal               the command is not executed; CSTS.CFS is set and
 *                       the controller halts: ctrl.c fetches no command
 *                       and posts no CQE (n->fault.halted) until the host
 *                       resets it (CC.EN 1->0), which clears both
 *   reset-fail=N        the next N enables (CC.EN 0->1) leave CSTS.RDY 0:
 *                       the host gives up after CAP.TO
 *
 * A held command carries its own cancelable AIOCB in req->aiocb, so the
 * upstream Abort and SQ-cancel paths complete it like any in-flight I/O.
 * Released or cancelled, it goes to nvme_do_enqueue_req_completion(), the
 * body of the completion hook, so it is never decided twice.
 *
 * Upstream posts CQEs and processes SQs from bottom halves guarded by the
 * device's MemReentrancyGuard: DMA from there into the controller's own
 * MMIO fails, and the controller reports a fatal status.  The timers of
 * this layer run the same code, so they engage the same guard.
 *
 * An SQ tail doorbell write schedules sq->bh as upstream does; with a
 * fault-injector nvme_fault_sq_doorbell() also stamps the doorbelled slots
 * with the virtual time, so delay= counts from the doorbell, not from when
 * sq->bh got to run.
 *
 * Deterministic mode (fault-injector deterministic=on, needs -icount or
 * the qtest accelerator): nothing the guest sees may depend on host
 * timing.  The SQ is processed inside the doorbell MMIO write, each
 * command's backend I/O is waited for right there (AIO_WAIT_WHILE under
 * the BQL: virtual time stands still meanwhile), cancels of held commands
 * finish before the write returns, and the work upstream defers to the
 * SQ/CQ bottom halves runs from QEMU_CLOCK_VIRTUAL timers.  A command that
 * an atomic write conflict keeps from starting waits for the held command
 * it conflicts with, instead of polling at the same virtual instant.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "qemu/cutils.h"
#include "qemu/log.h"
#include "system/reset.h"
#include "qemu/memalign.h"
#include "system/block-backend.h"
#include "system/dma.h"
#include "block/aio.h"
#include "block/aio-wait.h"
#include "qapi/error.h"
#include "hw/pci/pci.h"
#include "hw/pci/msix.h"
#include "nvme.h"
#include "trace.h"

/* Per SQ id. */
struct NvmeFaultSqTimer {
    NvmeCtrl  *n;
    uint16_t  sqid;
    bool      blocked;      /* deterministic: waits for a held command */
    QEMUTimer kick;         /* deterministic: runs the SQ (upstream: sq->bh) */
    /* Not deterministic: slots [db_head, db_tail) were doorbelled at db_ns */
    int64_t   db_ns;
    uint32_t  db_head;
    uint32_t  db_tail;
};

/* Per CQ id. */
struct NvmeFaultCqTimer {
    NvmeCtrl  *n;
    uint16_t  cqid;
    QEMUTimer kick;         /* deterministic: posts CQEs (upstream: cq->bh) */
    QEMUTimer irq;          /* irq-delay */
};

typedef struct NvmeFaultAIOCB {
    BlockAIOCB   common;
    NvmeRequest  *req;
    QEMUTimer    timer;
    int64_t      expire_ns; /* what the timer was armed for */
    int64_t      deadline_ns; /* submission + delay */
    unsigned     late_bucket; /* for fault_lateness_arrive() */
    bool         done;      /* released or cancelled */
} NvmeFaultAIOCB;

/* @fn(@opaque), the work of a guarded BH, under the same guard. */
static void nvme_fault_run_guarded(NvmeCtrl *n, void (*fn)(void *),
                                   void *opaque)
{
    bool engaged = fault_guard_enter(DEVICE(n));

    fn(opaque);
    fault_guard_exit(DEVICE(n), engaged);
}

static uint16_t nvme_fault_status(FeError err)
{
    switch (err) {
    case FE_ERR_EIO:
        return NVME_DATA_TRAS_ERROR;
    case FE_ERR_ENOSPC:
        return NVME_CAP_EXCEEDED;
    case FE_ERR_WRITE_FAULT:
        return NVME_WRITE_FAULT;
    case FE_ERR_READ_ERROR:
        return NVME_UNRECOVERED_READ;
    case FE_ERR_INTERNAL:
        return NVME_INTERNAL_DEV_ERROR;
    default:
        return NVME_SUCCESS;
    }
}

/*
 * A command can be fetched outside the vCPU's doorbell write (ioeventfd,
 * an SQ resumed by CQ room), so no vCPU is known to match cpu= on.
 */
static const FaultInjectorUser nvme_fault_user = {
    .name = "nvme",
    .keys = FE_KEY_CPU,
    .deterministic = true,
};

bool nvme_fault_check(NvmeCtrl *n, Error **errp)
{
    NvmeFaultCtrl *f = &n->fault;

    f->det = false;
    if (!f->fi) {
        return true;
    }
    /* nvme_fault_realize() attaches, once nothing in realize can fail. */
    if (!fault_injector_check_attach(f->fi, &nvme_fault_user, errp)) {
        return false;
    }
    if (!fault_injector_deterministic(f->fi)) {
        return true;
    }
    if (n->params.ioeventfd) {
        error_setg(errp, "nvme: fault-injector deterministic=on needs "
                   "ioeventfd=off (doorbells must be handled in the vCPU)");
        return false;
    }
    f->det = true;
    return true;
}

/* Kicks one instant may chain before the next goes 1 ns later. */
#define NVME_FAULT_KICK_CHAIN_MAX   8

/* Deterministic mode: SQ or CQ work from its kick timer. */
static void nvme_fault_run_kick(NvmeCtrl *n, void (*fn)(void *), void *opaque)
{
    n->fault.in_kick = true;
    nvme_fault_run_guarded(n, fn, opaque);
    n->fault.in_kick = false;
}

static void nvme_fault_sq_kick_cb(void *opaque)
{
    NvmeFaultSqTimer *t = opaque;

    /* The queue may have been deleted (or replaced) meanwhile. */
    if (t->n->sq[t->sqid]) {
        nvme_fault_run_kick(t->n, nvme_process_sq, t->n->sq[t->sqid]);
    }
}

static void nvme_fault_cq_kick_cb(void *opaque)
{
    NvmeFaultCqTimer *t = opaque;

    if (t->n->cq[t->cqid]) {
        nvme_fault_run_kick(t->n, nvme_post_cqes, t->n->cq[t->cqid]);
    }
}

static void nvme_fault_irq_cb(void *opaque)
{
    NvmeFaultCqTimer *t = opaque;
    NvmeCtrl *n = t->n;
    NvmeCQueue *cq = n->cq[t->cqid];
    bool engaged;

    if (!cq) {
        return;
    }
    if (cq->head == cq->tail && !msix_enabled(PCI_DEVICE(n))) {
        /*
         * INTx is a level: the guest consumed the CQEs meanwhile (its
         * head doorbell deasserted the line), so there is nothing to
         * signal, and nothing would ever deassert the line again.  An
         * MSI-X message is sent anyway: a late interrupt, as asked.
         */
        trace_pci_nvme_fault_irq_empty(t->cqid);
        return;
    }
    trace_pci_nvme_fault_irq_fire(t->cqid);
    engaged = fault_guard_enter(DEVICE(n));
    nvme_irq_assert(n, cq);
    fault_guard_exit(DEVICE(n), engaged);
}

/* Machine reset: no failing enable armed by the old boot stays armed. */
static void nvme_fault_machine_reset(void *opaque)
{
    NvmeCtrl *n = opaque;

    n->fault.enables_to_fail = 0;
}

void nvme_fault_realize(NvmeCtrl *n)
{
    NvmeFaultCtrl *f = &n->fault;

    if (!f->fi) {
        return;
    }
    /* nvme_fault_check() found nothing to refuse, under the same BQL. */
    fault_injector_attach(f->fi, &nvme_fault_user, &error_abort);
    qemu_register_reset(nvme_fault_machine_reset, n);
    f->errlog = g_new0(NvmeErrorLog, NVME_FAULT_ERRLOG_ENTRIES);
    f->nr_queues = n->params.max_ioqpairs + 1;
    f->sq_timers = g_new0(NvmeFaultSqTimer, f->nr_queues);
    f->cq_timers = g_new0(NvmeFaultCqTimer, f->nr_queues);
    for (unsigned int i = 0; i < f->nr_queues; i++) {
        NvmeFaultSqTimer *st = &f->sq_timers[i];
        NvmeFaultCqTimer *ct = &f->cq_timers[i];

        st->n = n;
        st->sqid = i;
        timer_init_ns(&st->kick, QEMU_CLOCK_VIRTUAL, nvme_fault_sq_kick_cb, st);
        ct->n = n;
        ct->cqid = i;
        timer_init_ns(&ct->kick, QEMU_CLOCK_VIRTUAL, nvme_fault_cq_kick_cb, ct);
        timer_init_ns(&ct->irq, QEMU_CLOCK_VIRTUAL, nvme_fault_irq_cb, ct);
    }
    /* ELPE is 0's based. */
    n->id_ctrl.elpe = NVME_FAULT_ERRLOG_ENTRIES - 1;
}

static void nvme_fault_det_kick(NvmeCtrl *n, QEMUTimer *kick, uint16_t qid,
                                bool cq)
{
    NvmeFaultCtrl *f = &n->fault;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);

    trace_pci_nvme_fault_det_kick(qid, cq);
    if (timer_pending(kick)) {
        return;
    }
    /*
     * Now, in virtual time: after the current MMIO access returns.  A kick
     * armed by another kick's work runs in the same pass of the timer
     * list, and a guest can make SQ and CQ restart each other for ever
     * (shadow doorbells that read back a tail beyond the queue): after
     * NVME_FAULT_KICK_CHAIN_MAX such kicks at one instant, 1 ns later.
     */
    if (f->in_kick && now == f->chain_ns) {
        f->chain++;
    } else if (f->in_kick) {
        f->chain_ns = now;
        f->chain = 0;
    }
    timer_mod_ns(kick, now + (f->in_kick &&
                              f->chain >= NVME_FAULT_KICK_CHAIN_MAX));
}

void nvme_fault_sq_doorbell(NvmeCtrl *n, NvmeSQueue *sq)
{
    NvmeFaultSqTimer *t;

    /*
     * Deterministic mode processes the SQ in the doorbell write: its I/O
     * must run at that virtual instant.  The MMIO access engages the
     * device's MemReentrancyGuard, as sq->bh does.
     */
    if (n->fault.det) {
        nvme_process_sq(sq);
        return;
    }
    /*
     * Otherwise sq->bh runs it, as upstream: processing in the vCPU's
     * MMIO exit costs more host CPU per I/O than the main loop does.
     * delay= counts from this stamp, not from when sq->bh got to run.
     * A later doorbell restamps every slot not yet fetched: that only
     * ever moves a command's start later than its own doorbell, never
     * earlier.
     */
    if (n->fault.fi && sq->sqid < n->fault.nr_queues) {
        t = &n->fault.sq_timers[sq->sqid];
        t->db_head = sq->head;
        t->db_tail = sq->tail;
        t->db_ns = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    }
    qemu_bh_schedule(sq->bh);
}

/*
 * When the command just fetched from @sq was submitted: its doorbell's
 * stamp, or now for a tail that came without one (a shadow doorbell, an
 * ioeventfd).
 */
static int64_t nvme_fault_submit_ns(NvmeCtrl *n, NvmeSQueue *sq)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    NvmeFaultSqTimer *t;
    uint32_t slot, span;

    if (n->fault.det || sq->sqid >= n->fault.nr_queues || !sq->size) {
        return now;
    }
    t = &n->fault.sq_timers[sq->sqid];
    slot = (sq->head + sq->size - 1) % sq->size;
    span = (t->db_tail + sq->size - t->db_head) % sq->size;
    if ((slot + sq->size - t->db_head) % sq->size >= span) {
        return now;
    }
    t->db_head = sq->head;      /* fetched: out of the span */
    return MIN(now, t->db_ns);
}

void nvme_fault_det_kick_sq(NvmeCtrl *n, uint16_t sqid)
{
    /* No SQ runs in a reset, and a kick armed there would outlive it. */
    if (sqid < n->fault.nr_queues && !n->fault.resetting) {
        nvme_fault_det_kick(n, &n->fault.sq_timers[sqid].kick, sqid, false);
    }
}

void nvme_fault_det_kick_cq(NvmeCtrl *n, uint16_t cqid)
{
    if (cqid >= n->fault.nr_queues) {
        return;
    }
    if (n->fault.resetting) {
        /*
         * A command the reset cancels completes: post it now, as upstream's
         * cq->bh does in the reset's nested aio_poll(), which also releases
         * its mapping.  A kick timer would outlive the CQ, due at "now"
         * with nothing left to tell the main loop about it.
         */
        if (n->cq[cqid]) {
            nvme_fault_run_guarded(n, nvme_post_cqes, n->cq[cqid]);
        }
        return;
    }
    nvme_fault_det_kick(n, &n->fault.cq_timers[cqid].kick, cqid, true);
}

void nvme_fault_det_sq_blocked(NvmeCtrl *n, uint16_t sqid)
{
    /*
     * Every backend I/O completed in its doorbell write, so only a held
     * command can be in the way, and virtual time cannot move while
     * timers re-armed at "now" run: retry when a held command leaves.
     */
    if (sqid < n->fault.nr_queues) {
        trace_pci_nvme_fault_det_blocked(sqid);
        n->fault.sq_timers[sqid].blocked = true;
    }
}

static void nvme_fault_det_unblock(NvmeCtrl *n)
{
    for (unsigned int i = 0; i < n->fault.nr_queues; i++) {
        NvmeFaultSqTimer *t = &n->fault.sq_timers[i];

        if (t->blocked) {
            t->blocked = false;
            nvme_fault_det_kick_sq(n, i);
        }
    }
}

void nvme_fault_det_wait(NvmeCtrl *n, NvmeRequest *req)
{
    NvmeFaultCtrl *f = &n->fault;

    /* An Asynchronous Event Request completes when an event comes. */
    if (!req->sq->sqid && req->cmd.opcode == NVME_ADM_CMD_ASYNC_EV_REQ) {
        f->det_req = NULL;
    }
    if (f->det_req == req || f->det_cancels) {
        trace_pci_nvme_fault_det_wait(nvme_cid(req), req->sq->sqid);
    }
    AIO_WAIT_WHILE(qemu_get_aio_context(),
                   f->det_req == req || f->det_cancels);
    f->det_req = NULL;
    /*
     * A nested aio_poll() (this wait, a synchronous cancel or a drain in
     * the command) may have run the main loop's notify BH that arming a
     * kick timer at "now" scheduled.  Ask again: otherwise nothing tells
     * the main loop to look at that timer, and under the qtest accelerator
     * clock_step finds it due and cannot advance.
     */
    qemu_notify_event();
}

/*
 * The CQEs a fatal halt kept from being posted go with the reset, as on a
 * real controller.  Release their mappings (each QEMUSGList holds a
 * reference to the device) and return the requests to their SQs, as an
 * SQ deletion does.
 */
static void nvme_fault_discard_held_cqes(NvmeCtrl *n)
{
    for (unsigned int i = 0; i < n->fault.nr_queues; i++) {
        NvmeCQueue *cq = n->cq[i];
        NvmeRequest *req, *next;

        if (!cq) {
            continue;
        }
        QTAILQ_FOREACH_SAFE(req, &cq->req_list, entry, next) {
            QTAILQ_REMOVE(&cq->req_list, req, entry);
            nvme_sg_unmap(&req->sg);
            QTAILQ_INSERT_TAIL(&req->sq->req_list, req, entry);
        }
    }
}

void nvme_fault_reset(NvmeCtrl *n)
{
    NvmeFaultCtrl *f = &n->fault;

    /*
     * The reset drains and cancels every command in flight, polling the
     * main context meanwhile.  An SQ run from there would fetch and
     * execute commands that the reset discards, an admin one among them
     * could delete the SQ being cancelled, and an atomic write waiting
     * for the command being cancelled would keep rescheduling sq->bh.
     * CQEs are still posted: that also releases the cancelled requests'
     * mappings (and their references to the device).
     */
    trace_pci_nvme_fault_reset_halt(f->halted);
    if (f->halted) {
        nvme_fault_discard_held_cqes(n);
    }
    f->halted = false;      /* nvme_ctrl_reset() clears CSTS.CFS */
    f->resetting = true;
    for (unsigned int i = 0; i < f->nr_queues; i++) {
        timer_del(&f->sq_timers[i].kick);
        f->sq_timers[i].blocked = false;
        f->sq_timers[i].db_head = f->sq_timers[i].db_tail;
        timer_del(&f->cq_timers[i].kick);
        timer_del(&f->cq_timers[i].irq);
    }
}

void nvme_fault_exit(NvmeCtrl *n)
{
    NvmeFaultCtrl *f = &n->fault;

    if (!f->fi) {
        return;
    }
    qemu_unregister_reset(nvme_fault_machine_reset, n);
    nvme_fault_reset(n);
    g_free(f->sq_timers);
    f->sq_timers = NULL;
    g_free(f->cq_timers);
    f->cq_timers = NULL;
    f->nr_queues = 0;
    g_free(f->errlog);
    f->errlog = NULL;
    fault_injector_detach(f->fi, &nvme_fault_user);
}

bool nvme_fault_enable_fails(NvmeCtrl *n)
{
    NvmeFaultCtrl *f = &n->fault;

    f->resetting = false;   /* the queues start afresh */
    if (!f->enables_to_fail) {
        return false;
    }
    f->enables_to_fail--;
    trace_pci_nvme_fault_enable_fail(f->enables_to_fail);
    return true;
}

/* fatal: halt the controller at @req, which is never executed. */
static void nvme_fault_halt(NvmeCtrl *n, NvmeRequest *req)
{
    trace_pci_nvme_fault_fatal(nvme_cid(req), req->sq->sqid);
    n->fault.halted = true;
    stl_le_p(&n->bar.csts, ldl_le_p(&n->bar.csts) | NVME_CSTS_FAILED);
}

/* The command's range in 512-byte sectors. */
static bool nvme_fault_range(NvmeCtrl *n, NvmeRequest *req, NvmeNamespace *ns,
                             FeOp *op, uint64_t *slba, uint64_t *lba,
                             uint32_t *len)
{
    NvmeRwCmd *rw = (NvmeRwCmd *)&req->cmd;
    uint64_t nlb = 0, bytes;

    *slba = 0;
    *lba = 0;
    *len = 0;

    switch (req->cmd.opcode) {
    case NVME_CMD_FLUSH:
        *op = FE_OP_FLUSH;
        return true;
    case NVME_CMD_READ:
        *op = FE_OP_READ;
        break;
    case NVME_CMD_WRITE:
        *op = FE_OP_WRITE;
        break;
    case NVME_CMD_WRITE_ZEROES:
        *op = FE_OP_WRITE_ZEROES;
        break;
    case NVME_CMD_DSM:
        *op = FE_OP_DISCARD;
        break;
    default:
        return false;
    }
    if (!ns) {
        return false;
    }

    if (*op == FE_OP_DISCARD) {
        NvmeDsmRange range;

        /* The first range; the whole namespace if it cannot be read. */
        if (NVME_CMD_FLAGS_PSDT(req->cmd.flags) == NVME_PSDT_PRP &&
            pci_dma_read(PCI_DEVICE(n), le64_to_cpu(req->cmd.dptr.prp1),
                         &range, sizeof(range)) == MEMTX_OK) {
            *slba = le64_to_cpu(range.slba);
            nlb = le32_to_cpu(range.nlb);
        } else {
            nlb = le64_to_cpu(ns->id_ns.nsze);
        }
    } else {
        *slba = le64_to_cpu(rw->slba);
        nlb = (uint64_t)le16_to_cpu(rw->nlb) + 1;
    }
    *lba = (*slba << ns->lbaf.ds) >> BDRV_SECTOR_BITS;
    bytes = nlb << ns->lbaf.ds;
    *len = MIN(bytes >> BDRV_SECTOR_BITS, UINT32_MAX);
    return true;
}

uint16_t nvme_fault_io_cmd(NvmeCtrl *n, NvmeRequest *req)
{
    NvmeFaultReq *fr = &req->fault;
    uint32_t nsid = le32_to_cpu(req->cmd.nsid);
    NvmeNamespace *ns = NULL;
    FeIoKeys keys = { .have = FE_KEY_SQ, .sq = req->sq->sqid };
    uint64_t lba;
    uint32_t len;
    FeOp op;

    memset(fr, 0, sizeof(*fr));
    if (nsid && nsid != NVME_NSID_BROADCAST && nsid <= NVME_MAX_NAMESPACES) {
        ns = nvme_ns(n, nsid);
        if (ns && ns->status) {
            ns = NULL;
        }
    }
    if (!nvme_fault_range(n, req, ns, &op, &fr->slba, &lba, &len) ||
        !fault_injector_decide_keys(n->fault.fi, op, lba, len, &keys,
                                    &fr->d)) {
        return NVME_SUCCESS;
    }

    /*
     * A held command stays on out_req_list, where the atomic write check
     * reads req->ns: set it now, as nvme_io_cmd() would have, also when
     * this or an upstream check (a fused command) fails it first.
     */
    req->ns = ns;
    fr->submit_ns = nvme_fault_submit_ns(n, req->sq);
    fr->d.drop |= fr->d.error == FE_ERR_TIMEOUT;
    fr->status = nvme_fault_status(fr->d.error);
    if (fr->status && fr->d.dnr) {
        fr->status |= NVME_DNR;
    }
    fr->active = fr->d.drop || fr->status || fr->d.delay_ns ||
                 fr->d.irq != FE_IRQ_NORMAL || fr->d.lie || fr->d.ncorrupt;
    if (fr->d.reset_fail > n->fault.enables_to_fail) {
        n->fault.enables_to_fail = fr->d.reset_fail;
        trace_pci_nvme_fault_enable_fail_armed(fr->d.reset_fail);
    }

    trace_pci_nvme_fault_decide(nvme_cid(req), req->sq->sqid,
                                fe_op_name(op), lba, len, fr->status,
                                fr->d.delay_ns, fr->d.drop, fr->d.irq,
                                fr->d.irq_delay_ns);

    if (fr->d.fatal) {
        /* Never executed, and its CQE is never posted: the queues halt. */
        nvme_fault_halt(n, req);
        return NVME_INTERNAL_DEV_ERROR;
    }
    if (fr->d.lie) {
        /*
         * Never executed: completes at once through the completion hook,
         * which reports fr->status (success unless an error was decided)
         * in place of this one.  Seen without the hook, it is an error.
         */
        return NVME_INTERNAL_DEV_ERROR;
    }
    if (fr->status && !fr->d.drop && fr->d.when == FE_WHEN_BEFORE) {
        /* Fail without touching data; the completion hook still runs. */
        return fr->status;
    }
    return NVME_SUCCESS;
}

static void nvme_fault_log_error(NvmeCtrl *n, NvmeRequest *req)
{
    NvmeFaultCtrl *f = &n->fault;
    NvmeErrorLog *e = &f->errlog[f->errlog_next];

    f->errlog_next = (f->errlog_next + 1) % NVME_FAULT_ERRLOG_ENTRIES;
    f->error_count++;
    memset(e, 0, sizeof(*e));
    e->error_count = cpu_to_le64(f->error_count);
    e->sqid = cpu_to_le16(req->sq->sqid);
    e->cid = req->cqe.cid;      /* already little endian */
    e->status_field = cpu_to_le16(req->status << 1);
    e->param_error_location = cpu_to_le16(0xffff);
    e->lba = cpu_to_le64(req->fault.slba);
    e->nsid = req->cmd.nsid;    /* already little endian */
    trace_pci_nvme_fault_error(nvme_cid(req), req->sq->sqid, req->status,
                               f->error_count);
}

static void nvme_fault_held_cb(void *opaque, int ret)
{
    NvmeRequest *req = opaque;
    NvmeFaultReq *fr = &req->fault;
    NvmeCtrl *n = nvme_ctrl(req);
    NvmeCQueue *cq = nvme_cq(req);

    n->fault.held--;
    req->aiocb = NULL;
    if (ret < 0) {
        /*
         * Abort, SQ deletion or reset set the status before cancelling:
         * the command completes with that alone, interrupt included.
         */
        fr->active = false;
        trace_pci_nvme_fault_cancel(nvme_cid(req), req->sq->sqid,
                                    req->status);
    } else {
        trace_pci_nvme_fault_release(nvme_cid(req), req->sq->sqid);
        if (fr->status) {
            nvme_fault_log_error(n, req);
        }
    }
    nvme_do_enqueue_req_completion(cq, req);
    if (n->fault.det) {
        nvme_fault_det_unblock(n);
    } else if (ret == 0 || n->fault.resetting) {
        /*
         * Released by its timer (main loop, not inside an MMIO access):
         * post now rather than one main-loop iteration later from cq->bh,
         * whose work this is.  Cancelled by a reset: post now as well,
         * since the reset may free the CQ, and delete cq->bh, before that
         * runs; the CQE would never be posted and its mapping, which
         * holds a reference to the device, never released.
         */
        qemu_bh_cancel(cq->bh);
        nvme_fault_run_guarded(n, nvme_post_cqes, cq);
    }
}

static void nvme_fault_timer_cb(void *opaque)
{
    NvmeFaultAIOCB *iocb = opaque;
    NvmeFaultCtrl *f = &nvme_ctrl(iocb->req)->fault;

    if (iocb->done) {
        return;
    }
    if (!f->det && !fault_lateness_arrive(&f->lateness, &iocb->late_bucket,
                                          iocb->expire_ns,
                                          iocb->deadline_ns)) {
        iocb->expire_ns = iocb->deadline_ns;
        timer_mod_ns(&iocb->timer, iocb->expire_ns);
        return;
    }
    iocb->done = true;
    iocb->common.cb(iocb->common.opaque, 0);
    qemu_aio_unref(iocb);
}

static void nvme_fault_cancel_bh(void *opaque)
{
    NvmeFaultAIOCB *iocb = opaque;
    NvmeCtrl *n = nvme_ctrl(iocb->req);

    if (n->fault.det) {
        n->fault.det_cancels--;
    }
    iocb->common.cb(iocb->common.opaque, -ECANCELED);
    qemu_aio_unref(iocb);
}

static void nvme_fault_cancel(BlockAIOCB *acb)
{
    NvmeFaultAIOCB *iocb = container_of(acb, NvmeFaultAIOCB, common);
    NvmeCtrl *n = nvme_ctrl(iocb->req);

    if (iocb->done) {
        return;
    }
    iocb->done = true;
    timer_del(&iocb->timer);
    /* Deterministic mode: nvme_fault_det_wait() runs it before returning. */
    if (n->fault.det) {
        n->fault.det_cancels++;
    }
    aio_bh_schedule_oneshot(qemu_get_aio_context(), nvme_fault_cancel_bh,
                            iocb);
}

static const AIOCBInfo nvme_fault_aiocb_info = {
    .aiocb_size   = sizeof(NvmeFaultAIOCB),
    .cancel_async = nvme_fault_cancel,
};

/* @start + @delay, saturated. */
static int64_t nvme_fault_deadline(int64_t start, uint64_t delay)
{
    return delay > INT64_MAX - start ? INT64_MAX : start + (int64_t)delay;
}

static void nvme_fault_hold(NvmeCtrl *n, NvmeRequest *req)
{
    NvmeFaultReq *fr = &req->fault;
    NvmeFaultAIOCB *iocb = qemu_aio_get(&nvme_fault_aiocb_info, NULL,
                                        nvme_fault_held_cb, req);
    int64_t now, early = 0;

    iocb->req = req;
    iocb->done = false;
    timer_init_ns(&iocb->timer, QEMU_CLOCK_VIRTUAL, nvme_fault_timer_cb,
                  iocb);
    req->aiocb = &iocb->common;
    n->fault.held++;
    if (fr->d.drop) {
        trace_pci_nvme_fault_drop(nvme_cid(req), req->sq->sqid);
        return;
    }
    /* delay=DUR: no earlier than DUR after the submission. */
    now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    iocb->deadline_ns = nvme_fault_deadline(fr->submit_ns, fr->d.delay_ns);
    early = fault_lateness_early(&n->fault.lateness, iocb->deadline_ns - now,
                                 fr->d.delay_ns, &iocb->late_bucket);
    if (n->fault.det) {
        early = 0;
    }
    iocb->expire_ns = MAX(now, iocb->deadline_ns - early);
    trace_pci_nvme_fault_delay(nvme_cid(req), req->sq->sqid, fr->d.delay_ns,
                               iocb->expire_ns - now, early);
    timer_mod_ns(&iocb->timer, iocb->expire_ns);
}

/* The namespace of a corruptible command: data without metadata. */
static NvmeNamespace *nvme_fault_corrupt_ns(NvmeRequest *req)
{
    if (!req->ns || req->ns->lbaf.ms || !(req->sg.flags & NVME_SG_ALLOC)) {
        return NULL;
    }
    return req->ns;
}

/* Flip the decided bytes of a read where the guest reads them. */
static void nvme_fault_corrupt_read(NvmeRequest *req)
{
    const FeDecision *d = &req->fault.d;
    NvmeSg *sg = &req->sg;
    uint64_t pos = 0;

    if (!(sg->flags & NVME_SG_DMA)) {
        /* Controller memory (CMB/PMR), mapped. */
        for (int i = 0; i < sg->iov.niov; i++) {
            fe_decision_corrupt(d, pos, sg->iov.iov[i].iov_base,
                                sg->iov.iov[i].iov_len);
            pos += sg->iov.iov[i].iov_len;
        }
        return;
    }
    for (int i = 0; i < sg->qsg.nsg; i++) {
        const ScatterGatherEntry *e = &sg->qsg.sg[i];

        for (uint32_t k = 0; k < d->ncorrupt; k++) {
            dma_addr_t addr = e->base + (d->corrupt[k] - pos);
            uint8_t b;

            if (d->corrupt[k] < pos || d->corrupt[k] - pos >= e->len) {
                continue;
            }
            if (dma_memory_read(sg->qsg.as, addr, &b, 1,
                                MEMTXATTRS_UNSPECIFIED) == MEMTX_OK) {
                b ^= 0xff;
                if (dma_memory_write(sg->qsg.as, addr, &b, 1,
                                     MEMTXATTRS_UNSPECIFIED) == MEMTX_OK) {
                    continue;
                }
            }
            qemu_log_mask(LOG_GUEST_ERROR, "nvme: fault corrupt: cannot "
                          "flip the read byte at 0x%" PRIx64 "\n",
                          (uint64_t)addr);
        }
        pos += e->len;
    }
}

static void nvme_fault_corrupt_write_cb(void *opaque, int ret)
{
    NvmeRequest *req = opaque;
    NvmeCQueue *cq = nvme_cq(req);

    req->aiocb = NULL;
    qemu_vfree(req->fault.bounce.iov[0].iov_base);
    qemu_iovec_destroy(&req->fault.bounce);
    if (ret < 0 && req->status == NVME_SUCCESS) {
        /* What is stored is neither the data nor its planned corruption. */
        req->status = NVME_INTERNAL_DEV_ERROR;
    }
    /* The completion hook again, this time past the corruption. */
    if (!nvme_fault_complete(cq, req)) {
        nvme_do_enqueue_req_completion(cq, req);
    }
}

/*
 * Store the written data again from a copy with the decided bytes
 * flipped; the guest's buffer stays as it is.  True if the command now
 * completes from nvme_fault_corrupt_write_cb().
 */
static bool nvme_fault_corrupt_write(NvmeRequest *req, NvmeNamespace *ns)
{
    NvmeRwCmd *rw = (NvmeRwCmd *)&req->cmd;
    NvmeSg *sg = &req->sg;
    uint64_t bytes = ((uint64_t)le16_to_cpu(rw->nlb) + 1) << ns->lbaf.ds;
    uint8_t *buf = qemu_try_blockalign(blk_bs(ns->blkconf.blk), bytes);
    uint64_t pos = 0;

    if (!buf) {
        return false;
    }
    if (sg->flags & NVME_SG_DMA) {
        for (int i = 0; i < sg->qsg.nsg && pos < bytes; i++) {
            dma_addr_t len = MIN(sg->qsg.sg[i].len, bytes - pos);

            if (dma_memory_read(sg->qsg.as, sg->qsg.sg[i].base, buf + pos,
                                len, MEMTXATTRS_UNSPECIFIED)) {
                qemu_log_mask(LOG_GUEST_ERROR, "nvme: fault corrupt: cannot "
                              "read the written data back\n");
                qemu_vfree(buf);
                return false;
            }
            pos += len;
        }
    } else {
        pos = qemu_iovec_to_buf(&sg->iov, 0, buf, bytes);
    }
    if (pos != bytes) {
        qemu_vfree(buf);
        return false;
    }
    fe_decision_corrupt(&req->fault.d, 0, buf, bytes);
    qemu_iovec_init_buf(&req->fault.bounce, buf, bytes);
    req->aiocb = blk_aio_pwritev(ns->blkconf.blk, nvme_l2b(ns,
                                 le64_to_cpu(rw->slba)), &req->fault.bounce,
                                 0, nvme_fault_corrupt_write_cb, req);
    return true;
}

/* Apply corrupt= once, after the data moved.  True: completes later. */
static bool nvme_fault_corrupt(NvmeRequest *req)
{
    NvmeNamespace *ns = nvme_fault_corrupt_ns(req);

    req->fault.corrupted = true;
    if (!ns) {
        return false;
    }
    if (req->cmd.opcode == NVME_CMD_READ) {
        nvme_fault_corrupt_read(req);
        return false;
    }
    return req->cmd.opcode == NVME_CMD_WRITE &&
           nvme_fault_corrupt_write(req, ns);
}

bool nvme_fault_complete(NvmeCQueue *cq, NvmeRequest *req)
{
    NvmeFaultReq *fr = &req->fault;
    NvmeCtrl *n = cq->ctrl;

    /* Deterministic mode waits on (det_req) for the rewrite as well. */
    if (fr->active && fr->d.ncorrupt && !fr->corrupted &&
        req->status == NVME_SUCCESS && nvme_fault_corrupt(req)) {
        return true;
    }
    if (n->fault.det_req == req) {
        n->fault.det_req = NULL;    /* its backend I/O is over */
    }
    if (!fr->active) {
        return false;
    }
    if (req->status == NVME_CMD_ABORT_REQ ||
        req->status == NVME_CMD_ABORT_SQ_DEL) {
        /* Aborted while its I/O was in flight: report only that. */
        fr->active = false;
        return false;
    }
    if (fr->status || fr->d.lie) {
        req->status = fr->status;
    }
    if (fr->d.drop || fr->d.delay_ns) {
        nvme_fault_hold(n, req);
        return true;
    }
    if (fr->status) {
        nvme_fault_log_error(n, req);
    }
    return false;
}

/* Remember @d's pure irq=suppress hits for the end of the CQ round. */
static void nvme_fault_note_voidable(NvmeFaultCq *fc, const FeDecision *d)
{
    for (uint32_t i = 0; i < d->nvoidable; i++) {
        const FeHitRef *r = &d->voidable[i];
        unsigned int k = 0;

        while (k < fc->nvoid && (fc->void_ref[k].rule != r->rule ||
                                 fc->void_ref[k].gen != r->gen)) {
            k++;
        }
        if (k == NVME_FAULT_VOID_MAX) {
            continue;   /* too many distinct rules: their hits stay */
        }
        if (k == fc->nvoid) {
            fc->void_ref[fc->nvoid++] = *r;
        }
        fc->void_times[k]++;
    }
}

/* The round's suppressions suppressed nothing: take their hits back. */
static void nvme_fault_void_hits(NvmeCtrl *n, const NvmeFaultCq *fc)
{
    for (unsigned int k = 0; k < fc->nvoid; k++) {
        fault_injector_void_hit(n->fault.fi, fc->void_ref[k],
                                fc->void_times[k]);
    }
}

void nvme_fault_cqe_posted(NvmeCQueue *cq, NvmeRequest *req)
{
    NvmeFaultCq *fc = &cq->fault;
    NvmeFaultReq *fr = &req->fault;

    if (!fr->active) {
        fc->posted_normal++;
        return;
    }
    fr->active = false;
    switch (fr->d.irq) {
    case FE_IRQ_SUPPRESS:
        fc->posted_suppress++;
        nvme_fault_note_voidable(fc, &fr->d);
        break;
    case FE_IRQ_DELAY:
        fc->posted_delay++;
        fc->irq_delay_ns = MAX(fc->irq_delay_ns, fr->d.irq_delay_ns);
        break;
    default:
        fc->posted_normal++;
        break;
    }
}

bool nvme_fault_irq(NvmeCtrl *n, NvmeCQueue *cq)
{
    NvmeFaultCq fc = cq->fault;
    QEMUTimer *irq;

    memset(&cq->fault, 0, sizeof(cq->fault));
    /*
     * A suppression counts only if it kept an interrupt from being
     * raised: not when another CQE of the round raises one now or later,
     * nor on a CQ without interrupts.
     */
    if (fc.posted_normal || fc.posted_delay || !cq->irq_enabled) {
        nvme_fault_void_hits(n, &fc);
    }
    if (fc.posted_normal || (!fc.posted_delay && !fc.posted_suppress)) {
        return false;
    }
    if (!fc.posted_delay) {
        trace_pci_nvme_fault_irq_suppress(cq->cqid);
        return true;
    }
    if (cq->cqid >= n->fault.nr_queues) {
        return false;
    }
    irq = &n->fault.cq_timers[cq->cqid].irq;
    trace_pci_nvme_fault_irq_delay(cq->cqid, fc.irq_delay_ns);
    if (!timer_pending(irq)) {
        timer_mod_ns(irq, nvme_fault_deadline(
                              qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL),
                              fc.irq_delay_ns));
    }
    return true;
}

uint16_t nvme_fault_error_info(NvmeCtrl *n, uint8_t rae, uint32_t buf_len,
                               uint64_t off, NvmeRequest *req)
{
    NvmeFaultCtrl *f = &n->fault;
    const size_t size = NVME_FAULT_ERRLOG_ENTRIES * sizeof(NvmeErrorLog);
    g_autofree NvmeErrorLog *page = g_new0(NvmeErrorLog,
                                           NVME_FAULT_ERRLOG_ENTRIES);
    uint64_t count = MIN(f->error_count, NVME_FAULT_ERRLOG_ENTRIES);

    if (off >= size) {
        return NVME_INVALID_FIELD | NVME_DNR;
    }
    if (!rae) {
        nvme_clear_events(n, NVME_AER_TYPE_ERROR);
    }
    /* Newest first. */
    for (uint64_t i = 0; i < count; i++) {
        unsigned int slot = (f->errlog_next + NVME_FAULT_ERRLOG_ENTRIES - 1 -
                             i) % NVME_FAULT_ERRLOG_ENTRIES;

        page[i] = f->errlog[slot];
    }
    trace_pci_nvme_fault_log(NVME_LOG_ERROR_INFO, off, buf_len);
    return nvme_c2h(n, (uint8_t *)page + off, MIN(size - off, buf_len), req);
}

uint16_t nvme_fault_hits_log(NvmeCtrl *n, uint32_t buf_len, uint64_t off,
                             NvmeRequest *req)
{
    FaultInjector *fi = n->fault.fi;
    NvmeFaultHitsHdr *hdr;
    NvmeFaultHitsEntry *ent;
    g_autofree FeRuleStats *stats = NULL;
    g_autofree uint8_t *buf = NULL;
    size_t size;
    int nr, got;

    nr = fault_injector_rule_stats(fi, NULL, 0);
    stats = g_new0(FeRuleStats, MAX(nr, 1));
    got = fault_injector_rule_stats(fi, stats, nr);
    nr = MIN(nr, got);

    size = sizeof(*hdr) + nr * sizeof(*ent);
    if (off >= size) {
        return NVME_INVALID_FIELD | NVME_DNR;
    }
    buf = g_malloc0(size);
    hdr = (NvmeFaultHitsHdr *)buf;
    hdr->version = cpu_to_le32(NVME_FAULT_HITS_LOG_VERSION);
    hdr->nrules = cpu_to_le32(nr);
    hdr->entry_size = cpu_to_le32(sizeof(*ent));
    hdr->state = cpu_to_le32(fault_injector_get_state(fi));
    ent = (NvmeFaultHitsEntry *)(hdr + 1);
    /* Rule names fit whole. */
    QEMU_BUILD_BUG_ON(NVME_FAULT_RULE_NAME_LEN < FE_NAME_MAX);
    for (int i = 0; i < nr; i++) {
        pstrcpy(ent[i].name, sizeof(ent[i].name), stats[i].name);
        ent[i].matched = cpu_to_le64(stats[i].matched);
        ent[i].hits = cpu_to_le64(stats[i].hits);
    }
    trace_pci_nvme_fault_log(NVME_FAULT_LOG_ID, off, buf_len);
    return nvme_c2h(n, buf + off, MIN(size - off, buf_len), req);
}

uint16_t nvme_fault_get_feature(NvmeCtrl *n, NvmeRequest *req)
{
    uint32_t dw10 = le32_to_cpu(req->cmd.cdw10);
    uint32_t state;

    if (!n->fault.fi || req->cmd.cdw11 || req->cmd.cdw12) {
        return NVME_INVALID_FIELD | NVME_DNR;
    }
    switch (NVME_GETFEAT_SELECT(dw10)) {
    case NVME_GETFEAT_SELECT_CURRENT:
        state = fault_injector_get_state(n->fault.fi);
        break;
    case NVME_GETFEAT_SELECT_DEFAULT:
    case NVME_GETFEAT_SELECT_SAVED:
        state = 0;
        break;
    case NVME_GETFEAT_SELECT_CAP:
        state = NVME_FEAT_CAP_CHANGE;
        break;
    default:
        return NVME_INVALID_FIELD | NVME_DNR;
    }
    req->cqe.result = cpu_to_le32(state);
    trace_pci_nvme_fault_get_state(state);
    return NVME_SUCCESS;
}

uint16_t nvme_fault_set_feature(NvmeCtrl *n, NvmeRequest *req)
{
    uint32_t dw10 = le32_to_cpu(req->cmd.cdw10);
    uint32_t state = le32_to_cpu(req->cmd.cdw11);

    if (!n->fault.fi || req->cmd.cdw12) {
        return NVME_INVALID_FIELD | NVME_DNR;
    }
    if (NVME_SETFEAT_SAVE(dw10)) {
        return NVME_FID_NOT_SAVEABLE | NVME_DNR;
    }
    /* Completion dword 0: the previous state. */
    req->cqe.result = cpu_to_le32(fault_injector_get_state(n->fault.fi));
    fault_injector_set_state(n->fault.fi, state);
    trace_pci_nvme_fault_set_state(state);
    return NVME_SUCCESS;
}
