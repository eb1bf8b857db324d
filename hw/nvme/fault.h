/*
 * faultline NVMe fault layer: engine decisions -> NVMe statuses, CQE
 * timing, interrupts, Error Information log, vendor feature/log 0xC0.
 *
 * The hooks in ctrl.c call these only when the controller has a
 * fault-injector (property "fault-injector"); without one the controller
 * behaves exactly as upstream.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_NVME_FAULT_H
#define HW_NVME_FAULT_H

#include "qemu/timer.h"
#include "block/nvme.h"
#include "hw/fault/fault-injector.h"

/* Vendor-specific Set/Get Features FID: the fault engine state. */
#define NVME_FAULT_FID              0xc0
/* Vendor-specific log page: per-rule hit counts (NvmeFaultHitsLog). */
#define NVME_FAULT_LOG_ID           0xc0
/* Error Information log entries kept and advertised (ELPE + 1). */
#define NVME_FAULT_ERRLOG_ENTRIES   64

#define NVME_FAULT_HITS_LOG_VERSION 1

typedef struct NvmeFaultHitsHdr {
    uint32_t version;       /* NVME_FAULT_HITS_LOG_VERSION */
    uint32_t nrules;        /* entries that follow */
    uint32_t entry_size;    /* sizeof(NvmeFaultHitsEntry) */
    uint32_t state;         /* engine state */
} NvmeFaultHitsHdr;

typedef struct NvmeFaultHitsEntry {
    char     name[32];      /* NUL-terminated rule name */
    uint64_t matched;       /* matching I/Os seen */
    uint64_t hits;          /* times the rule fired */
} NvmeFaultHitsEntry;

/* Per request: the engine's decision, applied when the command completes. */
typedef struct NvmeFaultReq {
    bool     pending;       /* decided, not yet applied at completion */
    bool     drop;          /* never post the CQE */
    uint8_t  irq;           /* FeIrq */
    uint16_t status;        /* injected status incl. DNR, 0: none */
    uint64_t delay_ns;
    uint64_t irq_delay_ns;
    uint64_t slba;          /* for the Error Information log */
} NvmeFaultReq;

/* Per completion queue: what the CQEs posted in this round asked for. */
typedef struct NvmeFaultCq {
    uint16_t posted_normal;
    uint16_t posted_delay;
    uint16_t posted_suppress;
    uint64_t irq_delay_ns;
} NvmeFaultCq;

typedef struct NvmeFaultIrqTimer NvmeFaultIrqTimer;
struct NvmeCtrl;
struct NvmeCQueue;
struct NvmeRequest;

/* ctrl.c functions the layer calls back (they are static there). */
typedef struct NvmeFaultOps {
    uint16_t (*c2h)(struct NvmeCtrl *n, void *ptr, uint32_t len,
                    struct NvmeRequest *req);
    void (*enqueue)(struct NvmeCQueue *cq, struct NvmeRequest *req);
    void (*irq_assert)(struct NvmeCtrl *n, struct NvmeCQueue *cq);
    void (*process_sq)(void *sq);
    void (*post_cqes)(void *cq);
} NvmeFaultOps;

/* Per controller. */
typedef struct NvmeFaultCtrl {
    FaultInjector     *fi;          /* property "fault-injector" */
    const NvmeFaultOps *ops;
    NvmeErrorLog      *errlog;      /* ring, NVME_FAULT_ERRLOG_ENTRIES */
    unsigned int      errlog_next;  /* next slot to fill */
    uint64_t          error_count;  /* errors logged so far */
    uint64_t          held;         /* CQEs held back right now */
    NvmeFaultIrqTimer *irq_timers;  /* per CQ id, for irq-delay */
    unsigned int      nr_irq_timers;

    /*
     * Deterministic mode (fault-injector deterministic=on): the SQ is
     * processed in the doorbell write, every command's backend I/O is
     * waited for there, and SQ/CQ work deferred by upstream to the BHs
     * runs from these QEMU_CLOCK_VIRTUAL timers (per queue id) instead.
     */
    bool              det;
    struct NvmeRequest *det_req;    /* command being dispatched */
    unsigned int      det_cancels;  /* held-command cancels not done yet */
    NvmeFaultIrqTimer *det_sq_timers;
    NvmeFaultIrqTimer *det_cq_timers;
} NvmeFaultCtrl;

/* Realize-time checks (deterministic mode); false with @errp set. */
bool nvme_fault_check(struct NvmeCtrl *n, Error **errp);
void nvme_fault_realize(struct NvmeCtrl *n, const NvmeFaultOps *ops);
void nvme_fault_reset(struct NvmeCtrl *n);
void nvme_fault_exit(struct NvmeCtrl *n);
/* Submission: decide; a nonzero status fails the command at once. */
uint16_t nvme_fault_io_cmd(struct NvmeCtrl *n, struct NvmeRequest *req);
/* Completion: true if the layer took the request (held or dropped). */
bool nvme_fault_complete(struct NvmeCQueue *cq, struct NvmeRequest *req);
void nvme_fault_cqe_posted(struct NvmeCQueue *cq, struct NvmeRequest *req);
/* true: do not raise the interrupt now. */
bool nvme_fault_irq(struct NvmeCtrl *n, struct NvmeCQueue *cq);
/* Deterministic mode: run the SQ (@cq false) or post CQEs (@cq true). */
void nvme_fault_det_kick(struct NvmeCtrl *n, uint16_t qid, bool cq);
/* Deterministic mode: wait for @req's backend I/O and pending cancels. */
void nvme_fault_det_wait(struct NvmeCtrl *n, struct NvmeRequest *req);
uint16_t nvme_fault_error_info(struct NvmeCtrl *n, uint32_t buf_len,
                               uint64_t off, struct NvmeRequest *req);
uint16_t nvme_fault_hits_log(struct NvmeCtrl *n, uint32_t buf_len,
                             uint64_t off, struct NvmeRequest *req);
uint16_t nvme_fault_get_feature(struct NvmeCtrl *n, struct NvmeRequest *req);
uint16_t nvme_fault_set_feature(struct NvmeCtrl *n, struct NvmeRequest *req);

#endif /* HW_NVME_FAULT_H */
