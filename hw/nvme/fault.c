/*
 * faultline NVMe fault layer: its life (realize-time checks, attach,
 * controller and machine reset, exit).
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
 * Upstream posts CQEs and processes SQs from bottom halves guarded by the
 * device's MemReentrancyGuard: DMA from there into the controller's own
 * MMIO fails, and the controller reports a fatal status.  The timers of
 * this layer run the same code, so they engage the same guard.
 *
 * The layer's files: fault.c (this), fault-submit.c (the per-command
 * decision, CQE timing, interrupts), fault-det.c (deterministic mode),
 * fault-corrupt.c (corrupt=), fault-admin.c (Error Information log,
 * vendor log and feature 0xC0).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qemu/main-loop.h"
#include "system/reset.h"
#include "qapi/error.h"
#include "nvme.h"
#include "trace.h"

/* @fn(@opaque), the work of a guarded BH, under the same guard. */
void nvme_fault_run_guarded(NvmeCtrl *n, void (*fn)(void *),
                            void *opaque)
{
    bool engaged = fault_guard_enter(DEVICE(n));

    fn(opaque);
    fault_guard_exit(DEVICE(n), engaged);
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
