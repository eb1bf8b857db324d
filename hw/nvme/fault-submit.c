/*
 * faultline NVMe fault layer: submission and completion.  An I/O
 * command's decision is taken once at submission (nvme_fault_io_cmd())
 * and applied at completion: its status, a held CQE (delay=, drop), its
 * interrupt (irq=).
 *
 * A held command carries its own cancelable AIOCB in req->aiocb, so the
 * upstream Abort and SQ-cancel paths complete it like any in-flight I/O.
 * Released or cancelled, it goes to nvme_do_enqueue_req_completion(), the
 * body of the completion hook, so it is never decided twice.
 *
 * An SQ tail doorbell write schedules sq->bh as upstream does; with a
 * fault-injector nvme_fault_sq_doorbell() also stamps the doorbelled slots
 * with the virtual time, so delay= counts from the doorbell, not from when
 * sq->bh got to run.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "system/block-backend.h"
#include "block/aio.h"
#include "hw/pci/pci.h"
#include "hw/pci/msix.h"
#include "nvme.h"
#include "trace.h"

typedef struct NvmeFaultAIOCB {
    BlockAIOCB   common;
    NvmeRequest  *req;
    QEMUTimer    timer;
    int64_t      expire_ns; /* what the timer was armed for */
    int64_t      deadline_ns; /* submission + delay */
    unsigned     late_bucket; /* for fault_lateness_arrive() */
    bool         done;      /* released or cancelled */
} NvmeFaultAIOCB;

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

void nvme_fault_irq_cb(void *opaque)
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
