/*
 * faultline NVMe fault layer: engine decisions -> NVMe statuses, CQE
 * timing, interrupts, Error Information log, vendor feature/log 0xC0.
 *
 * The hooks in ctrl.c call these only when the controller has a
 * fault-injector (property "fault-injector"); without one the controller
 * behaves exactly as upstream.  The layer calls back into ctrl.c only
 * through the functions nvme.h exports, and only their bodies (never a
 * hook), so a held completion or a delayed interrupt is never decided
 * twice.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_NVME_FAULT_H
#define HW_NVME_FAULT_H

#include "qemu/timer.h"
#include "qemu/iov.h"
#include "block/nvme.h"
#include "hw/fault/fault-injector.h"
#include "faultline/nvme-fault-vendor.h"

/* Error Information log entries kept and advertised (ELPE + 1). */
#define NVME_FAULT_ERRLOG_ENTRIES   64

/* Per request: the engine's decision, kept once, applied at completion. */
typedef struct NvmeFaultReq {
    bool       active;      /* @d still has something to apply */
    uint16_t   status;      /* NVMe status for d.error, incl. DNR; 0: none */
    FeDecision d;
    uint64_t   slba;        /* for the Error Information log */
    int64_t    submit_ns;   /* QEMU_CLOCK_VIRTUAL at submission */
    bool       corrupted;   /* d.corrupt applied (or found inapplicable) */
    QEMUIOVector bounce;    /* write corrupt: the data stored again, flipped */
} NvmeFaultReq;

/* Distinct pure irq=suppress rules remembered per CQ round. */
#define NVME_FAULT_VOID_MAX 8

/* Per completion queue: what the CQEs posted in this round asked for. */
typedef struct NvmeFaultCq {
    uint16_t posted_normal;
    uint16_t posted_delay;
    uint16_t posted_suppress;
    uint64_t irq_delay_ns;
    /* Their pure irq=suppress hits, void if an interrupt comes anyway. */
    uint16_t nvoid;
    FeHitRef void_ref[NVME_FAULT_VOID_MAX];
    uint16_t void_times[NVME_FAULT_VOID_MAX];
} NvmeFaultCq;

struct NvmeCtrl;
struct NvmeCQueue;
struct NvmeSQueue;
struct NvmeRequest;

/* Per queue id: the timers of the layer. */
typedef struct NvmeFaultSqTimer NvmeFaultSqTimer;
typedef struct NvmeFaultCqTimer NvmeFaultCqTimer;

/* Per SQ id. */
struct NvmeFaultSqTimer {
    struct NvmeCtrl *n;
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
    struct NvmeCtrl *n;
    uint16_t  cqid;
    QEMUTimer kick;         /* deterministic: posts CQEs (upstream: cq->bh) */
    QEMUTimer irq;          /* irq-delay */
};

/* Per controller. */
typedef struct NvmeFaultCtrl {
    FaultInjector     *fi;          /* property "fault-injector" */
    NvmeErrorLog      *errlog;      /* ring, NVME_FAULT_ERRLOG_ENTRIES */
    unsigned int      errlog_next;  /* next slot to fill */
    uint64_t          error_count;  /* errors logged so far */
    uint64_t          held;         /* CQEs held back right now */
    FaultLateness     lateness;     /* of held completions' timers */
    unsigned int      nr_queues;    /* entries in sq_timers, cq_timers */
    NvmeFaultSqTimer  *sq_timers;
    NvmeFaultCqTimer  *cq_timers;

    /*
     * Controller failure.  fatal: CSTS.CFS is set and the controller
     * fetches no command and posts no CQE until a reset (CC.EN 1->0).
     * reset-fail=N: the next @enables_to_fail enables (CC.EN 0->1) never
     * set CSTS.RDY; a machine reset forgets them.  @resetting: from a
     * reset to the next enable no SQ fetches a command, so none runs in
     * the nested aio_poll() of the reset's drain and cancels.
     */
    bool              halted;
    bool              resetting;
    uint32_t          enables_to_fail;

    /*
     * Deterministic mode (fault-injector deterministic=on): the SQ is
     * processed in the doorbell write, every command's backend I/O is
     * waited for there, and SQ/CQ work deferred by upstream to the BHs
     * runs from QEMU_CLOCK_VIRTUAL timers (per queue id) instead.
     */
    bool              det;
    struct NvmeRequest *det_req;    /* command being dispatched */
    unsigned int      det_cancels;  /* held-command cancels not done yet */
    bool              in_kick;      /* running SQ/CQ work from a kick timer */
    int64_t           chain_ns;     /* the instant kicks are chained at */
    unsigned int      chain;        /* kicks armed by kicks at chain_ns */
} NvmeFaultCtrl;

/* Realize-time checks (deterministic mode); false with @errp set. */
bool nvme_fault_check(struct NvmeCtrl *n, Error **errp);
/* Called last in realize: allocates what nvme_fault_exit() frees. */
void nvme_fault_realize(struct NvmeCtrl *n);
/* First in nvme_ctrl_reset(): no SQ runs, the timers stop. */
void nvme_fault_reset(struct NvmeCtrl *n);
/* CC.EN 0->1: SQs run again; true if this enable fails (CSTS.RDY 0). */
bool nvme_fault_enable_fails(struct NvmeCtrl *n);
void nvme_fault_exit(struct NvmeCtrl *n);
/*
 * An SQ tail doorbell write: in deterministic mode process the SQ right
 * here (the I/O starts in the MMIO write); otherwise schedule sq->bh, as
 * upstream, with the doorbell's time stamped when there is an injector.
 */
void nvme_fault_sq_doorbell(struct NvmeCtrl *n, struct NvmeSQueue *sq);
/* Submission: decide; a nonzero status fails the command at once. */
uint16_t nvme_fault_io_cmd(struct NvmeCtrl *n, struct NvmeRequest *req);
/* Completion: true if the layer took the request (held or dropped). */
bool nvme_fault_complete(struct NvmeCQueue *cq, struct NvmeRequest *req);
void nvme_fault_cqe_posted(struct NvmeCQueue *cq, struct NvmeRequest *req);
/* true: do not raise the interrupt now. */
bool nvme_fault_irq(struct NvmeCtrl *n, struct NvmeCQueue *cq);
/* Deterministic mode: run the SQ / post the CQ's CQEs, from a timer. */
void nvme_fault_det_kick_sq(struct NvmeCtrl *n, uint16_t sqid);
void nvme_fault_det_kick_cq(struct NvmeCtrl *n, uint16_t cqid);
/* Deterministic mode: SQ @sqid waits for a held command to complete. */
void nvme_fault_det_sq_blocked(struct NvmeCtrl *n, uint16_t sqid);
/* Deterministic mode: wait for @req's backend I/O and pending cancels. */
void nvme_fault_det_wait(struct NvmeCtrl *n, struct NvmeRequest *req);
uint16_t nvme_fault_error_info(struct NvmeCtrl *n, uint8_t rae,
                               uint32_t buf_len, uint64_t off,
                               struct NvmeRequest *req);
uint16_t nvme_fault_hits_log(struct NvmeCtrl *n, uint32_t buf_len,
                             uint64_t off, struct NvmeRequest *req);
uint16_t nvme_fault_get_feature(struct NvmeCtrl *n, struct NvmeRequest *req);
uint16_t nvme_fault_set_feature(struct NvmeCtrl *n, struct NvmeRequest *req);

/* Between the layer's files (fault*.c), not for ctrl.c. */
/* fault.c: @fn(@opaque), the work of a guarded BH, under the same guard. */
void nvme_fault_run_guarded(struct NvmeCtrl *n, void (*fn)(void *),
                            void *opaque);
/* fault-submit.c: the irq-delay timer. */
void nvme_fault_irq_cb(void *opaque);
/* fault-det.c: the kick timers; a held command left, blocked SQs retry. */
void nvme_fault_sq_kick_cb(void *opaque);
void nvme_fault_cq_kick_cb(void *opaque);
void nvme_fault_det_unblock(struct NvmeCtrl *n);
/* fault-corrupt.c: apply corrupt=; true if the command completes later. */
bool nvme_fault_corrupt(struct NvmeRequest *req);
/* fault-admin.c: an injected error into the Error Information log. */
void nvme_fault_log_error(struct NvmeCtrl *n, struct NvmeRequest *req);

#endif /* HW_NVME_FAULT_H */
