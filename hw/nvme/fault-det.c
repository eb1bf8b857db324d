/*
 * faultline NVMe fault layer: deterministic mode.
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
#include "block/aio-wait.h"
#include "nvme.h"
#include "trace.h"

/* Kicks one instant may chain before the next goes 1 ns later. */
#define NVME_FAULT_KICK_CHAIN_MAX   8

/* Deterministic mode: SQ or CQ work from its kick timer. */
static void nvme_fault_run_kick(NvmeCtrl *n, void (*fn)(void *), void *opaque)
{
    n->fault.in_kick = true;
    nvme_fault_run_guarded(n, fn, opaque);
    n->fault.in_kick = false;
}

void nvme_fault_sq_kick_cb(void *opaque)
{
    NvmeFaultSqTimer *t = opaque;

    /* The queue may have been deleted (or replaced) meanwhile. */
    if (t->n->sq[t->sqid]) {
        nvme_fault_run_kick(t->n, nvme_process_sq, t->n->sq[t->sqid]);
    }
}

void nvme_fault_cq_kick_cb(void *opaque)
{
    NvmeFaultCqTimer *t = opaque;

    if (t->n->cq[t->cqid]) {
        nvme_fault_run_kick(t->n, nvme_post_cqes, t->n->cq[t->cqid]);
    }
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

void nvme_fault_det_unblock(NvmeCtrl *n)
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
