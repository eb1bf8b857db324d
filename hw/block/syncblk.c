/*
 * syncblk: a small PCI block device for swap fault injection (faultline).
 *
 *   -device syncblk-pci,drive=D[,fault-injector=ID]
 *           [,completion=task|irq|thread][,timeout-ms=N]
 *
 * PCI 1af4:10f0 (the experimental range of docs/specs/pci-ids.rst).
 * BAR0: 4 KiB of 32-bit registers (8-byte accesses are split), BAR1: MSI-X
 * (one vector).  The wire format is include/faultline/syncblk-regs.h; docs/devices.md
 * ("syncblk") describes the protocol.
 *
 * Commands live in independent slots, so in irq/thread mode the guest
 * keeps several I/Os in flight.  Every command's data moves through one
 * path: a bounce buffer, blk_aio_* and syncblk_complete().  completion=task
 * waits for the I/O inside the doorbell write (AIO_WAIT_WHILE): the data
 * has moved before the vCPU continues and the guest polls the slot's
 * STATUS.  irq/thread signal completion by MSI-X; the two differ only in
 * the context the guest driver completes in (hardirq vs. threaded handler).
 *
 * The guest is buggy by assumption: its scatter entries may point at this
 * device's own BAR.  Work that starts outside an MMIO handler (AIO
 * completions, timers) therefore runs with the device's MemReentrancyGuard
 * engaged, as it is inside one, so such DMA fails (EFAULT) instead of
 * re-entering the device; the slot is re-checked after every entry anyway.
 *
 * Injected latency is deterministic: a command's result becomes visible at
 * submit time + delay on QEMU_CLOCK_VIRTUAL (task: STATUS reads BUSY until
 * then; irq/thread: a virtual timer).  Not migratable.
 *
 * With a fault-injector that has deterministic=on (needs -icount or the
 * qtest accelerator), irq and thread commands also wait for their I/O in
 * the doorbell write, like task commands, and always signal completion
 * from the slot's virtual timer (at submit time + delay, or at once in
 * virtual time): no host AIO completion decides when the guest sees
 * anything.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/timer.h"
#include "qapi/error.h"
#include "qapi/qapi-types-fault.h"
#include "block/aio-wait.h"
#include "hw/pci/pci_device.h"
#include "hw/pci/msix.h"
#include "hw/qdev-properties.h"
#include "hw/qdev-properties-system.h"
#include "hw/core/qdev-prop-internal.h"
#include "hw/fault/fault-injector.h"
#include "hw/core/cpu.h"
#include "system/qtest.h"
#include "migration/vmstate.h"
#include "system/block-backend.h"
#include "trace.h"
#include "faultline/syncblk-regs.h"

#define TYPE_SYNCBLK_PCI "syncblk-pci"
OBJECT_DECLARE_SIMPLE_TYPE(SyncBlkState, SYNCBLK_PCI)

#define SYNCBLK_NUM_SLOTS       16
#define SYNCBLK_MAX_SECTORS     4096        /* 2 MiB: one THP swap-out */
#define SYNCBLK_MAX_ENTRIES     512         /* 2 MiB of 4 KiB pages */

QEMU_BUILD_BUG_ON(SYNCBLK_COMPLETION_TASK != SYNCBLK_CTX_TASK ||
                  SYNCBLK_COMPLETION_IRQ != SYNCBLK_CTX_IRQ ||
                  SYNCBLK_COMPLETION_THREAD != SYNCBLK_CTX_THREAD);
QEMU_BUILD_BUG_ON(SYNCBLK_REG_SLOT_BASE + SYNCBLK_NUM_SLOTS *
                  SYNCBLK_REG_SLOT_STRIDE > SYNCBLK_BAR_SIZE);

typedef struct SyncBlkState SyncBlkState;

/* Command registers as the guest writes them. */
typedef struct SyncBlkDesc {
    uint32_t opcode;
    uint32_t num_entries;
    uint64_t lba;
    uint32_t num_sectors;
    uint64_t list_addr;
} SyncBlkDesc;

typedef struct SyncBlkSlot {
    SyncBlkState *s;
    unsigned index;
    SyncBlkDesc desc;           /* next command (guest-writable) */
    SyncBlkDesc cmd;            /* the command in flight (latched) */
    uint32_t seq;               /* bumped when a command starts or ends early */

    uint32_t status;
    uint32_t error;
    uint32_t ctx;
    FeIoKeys keys;              /* cpu= of the command: its doorbell write */

    /* Result held back until @deadline_ns (virtual). */
    uint32_t result_status;
    uint32_t result_error;
    int64_t submit_ns;
    int64_t deadline_ns;
    int64_t armed_ns;           /* what @timer was armed for */
    unsigned late_bucket;       /* for fault_lateness_arrive() */
    bool dropped;               /* lost completion: never signalled */

    FeDecision decision;
    uint8_t *bounce;            /* owned by the I/O until syncblk_complete() */
    uint64_t bytes;
    QEMUIOVector qiov;          /* over @bounce, for blk_aio_* */
    BlockAIOCB *aiocb;
    bool in_io;                 /* between the start and syncblk_complete() */
    uint32_t io_seq;            /* @seq of the command the I/O is for */
    QEMUTimer timer;
} SyncBlkSlot;

struct SyncBlkState {
    PCIDevice parent_obj;

    /* properties */
    BlockBackend *blk;
    FaultInjector *fi;
    int completion;             /* SyncblkCompletion */
    uint32_t timeout_ms;
    bool deterministic;         /* from the fault-injector */
    FaultLateness lateness;     /* of the slots' timers */

    MemoryRegion mmio;
    uint32_t mode;              /* SYNCBLK_CTX_* */
    uint64_t capacity;          /* sectors */
    uint32_t last_error;

    uint32_t cnt_cmds;
    uint32_t cnt_errors;
    uint32_t cnt_injected;
    uint32_t cnt_timeouts;
    uint32_t cnt_done[3];       /* by SYNCBLK_CTX_* */
    uint32_t cnt_bad_cmds;
    uint32_t cnt_reads;
    uint32_t cnt_writes;

    SyncBlkSlot slots[SYNCBLK_NUM_SLOTS];
};

static uint32_t syncblk_fe_error_code(FeError err)
{
    switch (err) {
    case FE_ERR_NONE:
        return 0;
    case FE_ERR_EIO:
        return SYNCBLK_ERR_EIO;
    case FE_ERR_ENOSPC:
        return SYNCBLK_ERR_ENOSPC;
    case FE_ERR_WRITE_FAULT:
        return SYNCBLK_ERR_ENODATA;
    case FE_ERR_READ_ERROR:
        return SYNCBLK_ERR_EBADMSG;
    case FE_ERR_INTERNAL:
        return SYNCBLK_ERR_EREMOTEIO;
    case FE_ERR_TIMEOUT:
    default:
        return SYNCBLK_ERR_ETIMEDOUT;
    }
}

static FeOp syncblk_fe_op(uint32_t opcode)
{
    switch (opcode) {
    case SYNCBLK_OP_READ:
        return FE_OP_READ;
    case SYNCBLK_OP_WRITE:
        return FE_OP_WRITE;
    case SYNCBLK_OP_FLUSH:
        return FE_OP_FLUSH;
    default:
        return FE_OP_DISCARD;
    }
}

/* Make the held result visible; raise MSI-X for irq/thread commands. */
static void syncblk_signal(SyncBlkSlot *slot)
{
    SyncBlkState *s = slot->s;

    if (slot->status != SYNCBLK_ST_BUSY) {
        return;             /* already ended (aborted, reset): never twice */
    }
    slot->status = slot->result_status;
    slot->error = slot->result_error;
    slot->deadline_ns = 0;
    if (slot->status != SYNCBLK_ST_DONE) {
        s->cnt_errors++;
    }
    if (slot->status == SYNCBLK_ST_TIMEOUT) {
        s->cnt_timeouts++;
    }
    s->cnt_done[slot->ctx]++;
    trace_syncblk_complete(slot->index, slot->status, slot->error, slot->ctx);
    if (slot->ctx != SYNCBLK_CTX_TASK && msix_enabled(PCI_DEVICE(s))) {
        msix_notify(PCI_DEVICE(s), 0);
    }
}

static void syncblk_set_result(SyncBlkSlot *slot, uint32_t status,
                               uint32_t error)
{
    slot->result_status = error ? status : SYNCBLK_ST_DONE;
    slot->result_error = error;
}

/*
 * The transfer is over (or was never started): hold the result until the
 * injected delay has passed, or forever for a lost completion in irq/thread
 * mode.  Task mode turns a lost completion into TIMEOUT after timeout-ms so
 * that the polling guest never hangs.
 */
static void syncblk_schedule_signal(SyncBlkSlot *slot)
{
    SyncBlkState *s = slot->s;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    uint64_t delay = slot->decision.delay_ns;

    if (slot->dropped) {
        if (slot->ctx != SYNCBLK_CTX_TASK) {
            return;         /* stays BUSY until the guest aborts it */
        }
        delay = MIN(delay, INT64_MAX / 4) + (uint64_t)s->timeout_ms * SCALE_MS;
        syncblk_set_result(slot, SYNCBLK_ST_TIMEOUT, SYNCBLK_ERR_ETIMEDOUT);
    }
    slot->deadline_ns = slot->submit_ns + MIN(delay, INT64_MAX / 2);
    if (s->deterministic && slot->ctx != SYNCBLK_CTX_TASK) {
        /* Signal from virtual time only, even when the deadline is now. */
        timer_mod(&slot->timer, MAX(slot->deadline_ns, now));
    } else if (now >= slot->deadline_ns) {
        syncblk_signal(slot);
    } else if (slot->ctx != SYNCBLK_CTX_TASK) {
        /* Early by the host's usual timer lateness (fault-injector.h). */
        slot->armed_ns = slot->deadline_ns -
            fault_lateness_early(&s->lateness, slot->deadline_ns - now, delay,
                                 &slot->late_bucket);
        timer_mod(&slot->timer, MAX(slot->armed_ns, now));
    }
    /* else: task mode, a STATUS read at or after the deadline signals it */
}

static void syncblk_timer_cb(void *opaque)
{
    SyncBlkSlot *slot = opaque;
    bool was = fault_guard_enter(DEVICE(slot->s));

    if (!slot->dropped) {
        if (!slot->s->deterministic &&
            !fault_lateness_arrive(&slot->s->lateness, &slot->late_bucket,
                                   slot->armed_ns, slot->deadline_ns)) {
            slot->armed_ns = slot->deadline_ns;
            timer_mod(&slot->timer, slot->armed_ns);
        } else {
            syncblk_signal(slot);
        }
    }
    fault_guard_exit(DEVICE(slot->s), was);
}

/*
 * Move the data between the scatter entries and @buf; false on any DMA
 * failure, or when the slot's command changed under us (@seq).
 */
static bool syncblk_dma_list(SyncBlkSlot *slot, uint32_t seq, uint8_t *buf,
                             bool to_device)
{
    PCIDevice *pci = PCI_DEVICE(slot->s);
    uint64_t list = slot->cmd.list_addr;
    uint32_t num_entries = slot->cmd.num_entries;
    uint64_t bytes = slot->bytes;
    uint64_t off = 0;

    for (uint32_t i = 0; i < num_entries; i++) {
        uint8_t raw[SYNCBLK_ENTRY_SIZE];
        uint64_t addr;
        uint32_t len;
        MemTxResult r;

        r = pci_dma_read(pci, list + i * SYNCBLK_ENTRY_SIZE, raw, sizeof(raw));
        if (r != MEMTX_OK || slot->seq != seq) {
            return false;
        }
        addr = ldq_le_p(raw + SYNCBLK_ENTRY_ADDR);
        len = ldl_le_p(raw + SYNCBLK_ENTRY_LEN);
        /* Checked by syncblk_check_list(); the list may have changed since. */
        if (len == 0 || len > bytes - off || addr + len < addr) {
            return false;
        }
        if (to_device) {
            r = pci_dma_read(pci, addr, buf + off, len);
        } else {
            r = pci_dma_write(pci, addr, buf + off, len);
        }
        if (r != MEMTX_OK || slot->seq != seq) {
            return false;
        }
        off += len;
    }
    return off == bytes;
}

/*
 * The one completion function of a command that passed validation,
 * whether its backend I/O ran (@ret its result) or not: moves read data to
 * the guest, frees the bounce buffer and holds or signals the result.  A
 * command aborted or reset meanwhile only gives its buffer back.
 */
static void syncblk_complete(SyncBlkSlot *slot, uint32_t seq, int ret)
{
    g_autofree uint8_t *buf = g_steal_pointer(&slot->bounce);
    bool read_data = slot->cmd.opcode == SYNCBLK_OP_READ && buf && ret == 0;

    slot->in_io = false;
    if (slot->seq != seq) {
        return;
    }
    if (read_data) {
        /* corrupt=: the guest gets the read with the bytes flipped. */
        fe_decision_corrupt(&slot->decision, 0, buf, slot->bytes);
    }
    if (ret < 0) {
        syncblk_set_result(slot, SYNCBLK_ST_ERROR, SYNCBLK_ERR_EIO);
    } else if (read_data && !syncblk_dma_list(slot, seq, buf, false)) {
        if (slot->seq != seq) {
            return;
        }
        /* An injected when=after error stands; the data went anyway. */
        if (slot->decision.error == FE_ERR_NONE) {
            syncblk_set_result(slot, SYNCBLK_ST_ERROR, SYNCBLK_ERR_EFAULT);
        }
    }
    syncblk_schedule_signal(slot);
}

static void syncblk_aio_cb(void *opaque, int ret)
{
    SyncBlkSlot *slot = opaque;
    SyncBlkState *s = slot->s;
    bool was = fault_guard_enter(DEVICE(s));

    slot->aiocb = NULL;
    syncblk_complete(slot, slot->io_seq, ret);
    fault_guard_exit(DEVICE(s), was);
}

/*
 * Start the backend I/O.  Task and deterministic commands wait for it
 * right here, in the doorbell write, as NVMe's deterministic mode does.
 */
static void syncblk_start_io(SyncBlkState *s, SyncBlkSlot *slot)
{
    int64_t off = slot->cmd.lba * SYNCBLK_SECTOR_SIZE;
    int64_t len = slot->bytes;

    slot->in_io = true;
    slot->io_seq = slot->seq;
    switch (slot->cmd.opcode) {
    case SYNCBLK_OP_READ:
        qemu_iovec_init_buf(&slot->qiov, slot->bounce, len);
        slot->aiocb = blk_aio_preadv(s->blk, off, &slot->qiov, 0,
                                     syncblk_aio_cb, slot);
        break;
    case SYNCBLK_OP_WRITE:
        qemu_iovec_init_buf(&slot->qiov, slot->bounce, len);
        slot->aiocb = blk_aio_pwritev(s->blk, off, &slot->qiov, 0,
                                      syncblk_aio_cb, slot);
        break;
    case SYNCBLK_OP_FLUSH:
        slot->aiocb = blk_aio_flush(s->blk, syncblk_aio_cb, slot);
        break;
    case SYNCBLK_OP_DISCARD:
        slot->aiocb = blk_aio_pdiscard(s->blk, off, len, syncblk_aio_cb, slot);
        break;
    }
    if (slot->ctx == SYNCBLK_CTX_TASK || s->deterministic) {
        AIO_WAIT_WHILE(qemu_get_aio_context(), slot->in_io);
        /*
         * This vCPU thread's aio_poll() of the main context may have
         * consumed the wake-up meant for the main loop thread, which polls
         * the same notifier: a timer the guest armed meanwhile (its APIC
         * timer) would then wait for some unrelated event, and an idle
         * guest for ever.  Wake the main loop again, as NVMe's
         * deterministic wait does.
         */
        qemu_notify_event();
    }
}

/*
 * Validate the scatter list before any data moves: NULL, or the reason
 * with the error code in @error.
 */
static const char *syncblk_check_list(SyncBlkSlot *slot, uint32_t *error)
{
    PCIDevice *pci = PCI_DEVICE(slot->s);
    uint64_t list = slot->cmd.list_addr;
    uint64_t sum = 0;

    *error = SYNCBLK_ERR_EINVAL;
    if (slot->cmd.num_entries == 0) {
        return "no scatter entries";
    }
    if (slot->cmd.num_entries > SYNCBLK_MAX_ENTRIES) {
        return "too many scatter entries";
    }
    *error = SYNCBLK_ERR_EFAULT;
    if (list + slot->cmd.num_entries * SYNCBLK_ENTRY_SIZE < list) {
        return "scatter list wraps the address space";
    }
    for (uint32_t i = 0; i < slot->cmd.num_entries; i++) {
        uint8_t raw[SYNCBLK_ENTRY_SIZE];
        uint64_t addr;
        uint32_t len;

        *error = SYNCBLK_ERR_EFAULT;
        if (pci_dma_read(pci, list + i * SYNCBLK_ENTRY_SIZE,
                         raw, sizeof(raw)) != MEMTX_OK) {
            return "scatter list not readable";
        }
        *error = SYNCBLK_ERR_EINVAL;
        addr = ldq_le_p(raw + SYNCBLK_ENTRY_ADDR);
        len = ldl_le_p(raw + SYNCBLK_ENTRY_LEN);
        if (len == 0 || len % SYNCBLK_SECTOR_SIZE) {
            return "entry length not a multiple of 512";
        }
        if (addr + len < addr) {
            return "entry wraps the address space";
        }
        sum += len;
        if (sum > slot->bytes) {
            return "entries longer than the command";
        }
    }
    if (sum != slot->bytes) {
        return "entries shorter than the command";
    }
    return NULL;
}

static const char *syncblk_check_cmd(SyncBlkState *s, SyncBlkSlot *slot,
                                     uint32_t *error)
{
    const SyncBlkDesc *c = &slot->cmd;

    *error = SYNCBLK_ERR_EINVAL;
    switch (c->opcode) {
    case SYNCBLK_OP_FLUSH:
        return NULL;
    case SYNCBLK_OP_READ:
    case SYNCBLK_OP_WRITE:
        if (c->num_sectors > SYNCBLK_MAX_SECTORS) {
            return "too many sectors";
        }
        /* fall through */
    case SYNCBLK_OP_DISCARD:
        if (c->num_sectors == 0) {
            return "zero sectors";
        }
        if (c->lba >= s->capacity || c->num_sectors > s->capacity - c->lba) {
            return "lba range beyond capacity";
        }
        return NULL;
    default:
        *error = SYNCBLK_ERR_EOPNOTSUPP;
        return "unknown opcode";
    }
}

/*
 * The vCPU whose doorbell write submits the command, kept with it: the
 * completion runs later, elsewhere.  qtest's accesses go through
 * first_cpu's address space from the main loop, so they count as its.
 */
static void syncblk_latch_cpu(SyncBlkSlot *slot)
{
    CPUState *cpu = current_cpu ? current_cpu :
                    qtest_enabled() ? first_cpu : NULL;

    slot->keys.have = cpu ? FE_KEY_CPU : 0;
    slot->keys.cpu = cpu ? cpu->cpu_index : 0;
}

/*
 * Take the command in the slot's descriptor: a new sequence number, the
 * device's mode, the submission stamp and vCPU.  Returns the sequence.
 */
static uint32_t syncblk_take_cmd(SyncBlkState *s, SyncBlkSlot *slot)
{
    uint32_t seq = ++slot->seq;

    s->cnt_cmds++;
    slot->cmd = slot->desc;
    slot->ctx = s->mode;
    slot->dropped = false;
    slot->deadline_ns = 0;
    slot->submit_ns = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    slot->bytes = (uint64_t)slot->cmd.num_sectors * SYNCBLK_SECTOR_SIZE;
    syncblk_latch_cpu(slot);
    memset(&slot->decision, 0, sizeof(slot->decision));
    return seq;
}

/* A malformed command completes at once with an error: true if it was. */
static bool syncblk_reject_bad(SyncBlkState *s, SyncBlkSlot *slot, bool data)
{
    const char *why;
    uint32_t error;

    why = syncblk_check_cmd(s, slot, &error);
    if (!why && data) {
        why = syncblk_check_list(slot, &error);
    }
    if (!why) {
        return false;
    }
    s->cnt_bad_cmds++;
    trace_syncblk_bad_command(slot->index, why);
    qemu_log_mask(LOG_GUEST_ERROR, "syncblk: slot %u: %s\n",
                  slot->index, why);
    /* Bad commands complete at once, in the device's mode. */
    slot->status = SYNCBLK_ST_BUSY;
    syncblk_set_result(slot, SYNCBLK_ST_ERROR, error);
    syncblk_signal(slot);
    return true;
}

/*
 * Ask the injector about the command and apply what is known before any
 * I/O: the completion context, a drop, the error status; the slot is BUSY.
 */
static void syncblk_decide(SyncBlkState *s, SyncBlkSlot *slot)
{
    FeDecision *d = &slot->decision;

    /*
     * Before the decision, which may write the fault log: a trace reader
     * times the command from here.  ctx is the device's mode; a complete=
     * rule's shows in syncblk_complete.
     */
    trace_syncblk_submit(slot->index, slot->cmd.opcode, slot->cmd.lba,
                         slot->cmd.num_sectors, slot->ctx);
    if (s->fi &&
        fault_injector_decide_keys(s->fi, syncblk_fe_op(slot->cmd.opcode),
                                   slot->cmd.lba,
                                   slot->cmd.opcode == SYNCBLK_OP_FLUSH ?
                                   0 : slot->cmd.num_sectors, &slot->keys,
                                   d)) {
        s->cnt_injected++;
    }
    switch (d->complete) {
    case FE_COMPLETE_IRQ:
        slot->ctx = SYNCBLK_CTX_IRQ;
        break;
    case FE_COMPLETE_TASK:
        slot->ctx = SYNCBLK_CTX_TASK;
        break;
    case FE_COMPLETE_THREAD:
        slot->ctx = SYNCBLK_CTX_THREAD;
        break;
    default:
        break;
    }
    slot->dropped = d->drop || d->error == FE_ERR_TIMEOUT;
    syncblk_set_result(slot, SYNCBLK_ST_ERROR,
                       syncblk_fe_error_code(d->error));
    slot->status = SYNCBLK_ST_BUSY;
    slot->error = 0;
    if (slot->cmd.opcode == SYNCBLK_OP_READ) {
        s->cnt_reads++;
    } else if (slot->cmd.opcode == SYNCBLK_OP_WRITE) {
        s->cnt_writes++;
    }
}

/*
 * The bounce buffer of a read or write, filled from the guest for a write
 * (with corrupt= applied).  False when the command completed instead.
 */
static bool syncblk_stage_data(SyncBlkSlot *slot, uint32_t seq)
{
    slot->bounce = g_try_malloc(slot->bytes);
    if (!slot->bounce) {
        syncblk_set_result(slot, SYNCBLK_ST_ERROR, SYNCBLK_ERR_EIO);
        syncblk_complete(slot, seq, 0);
        return false;
    }
    if (slot->cmd.opcode != SYNCBLK_OP_WRITE) {
        return true;
    }
    if (!syncblk_dma_list(slot, seq, slot->bounce, true)) {
        if (slot->seq == seq) {
            syncblk_set_result(slot, SYNCBLK_ST_ERROR, SYNCBLK_ERR_EFAULT);
        }
        syncblk_complete(slot, seq, 0);
        return false;
    }
    /* corrupt=: stored with the bytes flipped, the guest's intact. */
    fe_decision_corrupt(&slot->decision, 0, slot->bounce, slot->bytes);
    return true;
}

/* A doorbell: check, decide, move the data in, start the backend I/O. */
static void syncblk_submit(SyncBlkState *s, SyncBlkSlot *slot)
{
    const FeDecision *d = &slot->decision;
    uint32_t seq;
    bool data;

    if (slot->status == SYNCBLK_ST_BUSY) {
        /* The command in flight keeps going; the doorbell is refused. */
        s->last_error = SYNCBLK_ERR_EBUSY;
        s->cnt_bad_cmds++;
        trace_syncblk_bad_command(slot->index, "doorbell while busy");
        return;
    }
    seq = syncblk_take_cmd(s, slot);
    data = slot->cmd.opcode == SYNCBLK_OP_READ ||
           slot->cmd.opcode == SYNCBLK_OP_WRITE;
    if (syncblk_reject_bad(s, slot, data)) {
        return;
    }
    syncblk_decide(s, slot);
    if ((d->error != FE_ERR_NONE && !slot->dropped &&
         d->when == FE_WHEN_BEFORE) || d->lie) {
        /* No data moves; a lie completes as decided (success or error). */
        syncblk_complete(slot, seq, 0);
        return;
    }
    if (data && !syncblk_stage_data(slot, seq)) {
        return;
    }
    syncblk_start_io(s, slot);
}

/* End whatever the slot does; it ends up in @status (no interrupt). */
static void syncblk_slot_cancel(SyncBlkSlot *slot, uint32_t status,
                                uint32_t error)
{
    slot->seq++;                        /* the I/O's completion only frees */
    if (slot->aiocb) {
        blk_aio_cancel(slot->aiocb);    /* waits for syncblk_aio_cb() */
    }
    assert(!slot->aiocb);
    timer_del(&slot->timer);
    slot->deadline_ns = 0;
    slot->dropped = false;
    slot->status = status;
    slot->error = error;
}

static void syncblk_abort(SyncBlkState *s, SyncBlkSlot *slot)
{
    trace_syncblk_abort(slot->index, slot->status);
    if (slot->status != SYNCBLK_ST_BUSY) {
        return;
    }
    syncblk_slot_cancel(slot, SYNCBLK_ST_TIMEOUT, SYNCBLK_ERR_ETIMEDOUT);
    s->cnt_errors++;
    s->cnt_timeouts++;
}

static uint32_t syncblk_slot_read(SyncBlkState *s, SyncBlkSlot *slot,
                                  hwaddr reg)
{
    switch (reg) {
    case SYNCBLK_SLOT_OPCODE:
        return slot->desc.opcode;
    case SYNCBLK_SLOT_NUM_ENTRIES:
        return slot->desc.num_entries;
    case SYNCBLK_SLOT_LBA_LO:
        return slot->desc.lba;
    case SYNCBLK_SLOT_LBA_HI:
        return slot->desc.lba >> 32;
    case SYNCBLK_SLOT_NUM_SECTORS:
        return slot->desc.num_sectors;
    case SYNCBLK_SLOT_LIST_LO:
        return slot->desc.list_addr;
    case SYNCBLK_SLOT_LIST_HI:
        return slot->desc.list_addr >> 32;
    case SYNCBLK_SLOT_STATUS:
        /* Task commands: the held result shows once its time has come. */
        if (slot->status == SYNCBLK_ST_BUSY && slot->ctx == SYNCBLK_CTX_TASK &&
            slot->deadline_ns &&
            qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) >= slot->deadline_ns) {
            syncblk_signal(slot);
        }
        return slot->status;
    case SYNCBLK_SLOT_ERROR:
        return slot->error;
    case SYNCBLK_SLOT_CTX:
        return slot->ctx;
    default:
        return 0;
    }
}

static void syncblk_slot_write(SyncBlkState *s, SyncBlkSlot *slot,
                               hwaddr reg, uint32_t val)
{
    switch (reg) {
    case SYNCBLK_SLOT_OPCODE:
        slot->desc.opcode = val;
        break;
    case SYNCBLK_SLOT_NUM_ENTRIES:
        slot->desc.num_entries = val;
        break;
    case SYNCBLK_SLOT_LBA_LO:
        slot->desc.lba = deposit64(slot->desc.lba, 0, 32, val);
        break;
    case SYNCBLK_SLOT_LBA_HI:
        slot->desc.lba = deposit64(slot->desc.lba, 32, 32, val);
        break;
    case SYNCBLK_SLOT_NUM_SECTORS:
        slot->desc.num_sectors = val;
        break;
    case SYNCBLK_SLOT_LIST_LO:
        slot->desc.list_addr = deposit64(slot->desc.list_addr, 0, 32, val);
        break;
    case SYNCBLK_SLOT_LIST_HI:
        slot->desc.list_addr = deposit64(slot->desc.list_addr, 32, 32, val);
        break;
    case SYNCBLK_SLOT_DOORBELL:
        if (val == SYNCBLK_DOORBELL_SUBMIT) {
            syncblk_submit(s, slot);
        } else if (val == SYNCBLK_DOORBELL_ABORT) {
            syncblk_abort(s, slot);
        } else {
            s->last_error = SYNCBLK_ERR_EINVAL;
        }
        break;
    default:
        qemu_log_mask(LOG_GUEST_ERROR,
                      "syncblk: write to read-only slot register 0x%x\n",
                      (unsigned)reg);
        break;
    }
}

static uint64_t syncblk_mmio_read(void *opaque, hwaddr addr, unsigned size)
{
    SyncBlkState *s = opaque;

    if (addr >= SYNCBLK_REG_SLOT_BASE) {
        hwaddr off = addr - SYNCBLK_REG_SLOT_BASE;
        hwaddr i = off / SYNCBLK_REG_SLOT_STRIDE;

        if (i >= SYNCBLK_NUM_SLOTS) {
            return 0;
        }
        return syncblk_slot_read(s, &s->slots[i],
                                 off % SYNCBLK_REG_SLOT_STRIDE);
    }
    switch (addr) {
    case SYNCBLK_REG_MAGIC:
        return SYNCBLK_MAGIC;
    case SYNCBLK_REG_VERSION:
        return SYNCBLK_VERSION;
    case SYNCBLK_REG_CAPACITY_LO:
        return (uint32_t)s->capacity;
    case SYNCBLK_REG_CAPACITY_HI:
        return s->capacity >> 32;
    case SYNCBLK_REG_BLOCK_SIZE:
        return SYNCBLK_SECTOR_SIZE;
    case SYNCBLK_REG_MODE:
        return s->mode;
    case SYNCBLK_REG_FEATURES:
        return SYNCBLK_FEATURE_FLUSH | SYNCBLK_FEATURE_DISCARD |
               SYNCBLK_FEATURE_MSIX | SYNCBLK_FEATURE_ABORT;
    case SYNCBLK_REG_NUM_SLOTS:
        return SYNCBLK_NUM_SLOTS;
    case SYNCBLK_REG_MAX_SECTORS:
        return SYNCBLK_MAX_SECTORS;
    case SYNCBLK_REG_MAX_ENTRIES:
        return SYNCBLK_MAX_ENTRIES;
    case SYNCBLK_REG_TIMEOUT_MS:
        return s->timeout_ms;
    case SYNCBLK_REG_FAULT_STATE:
        return s->fi ? fault_injector_get_state(s->fi) : 0;
    case SYNCBLK_REG_LAST_ERROR:
        return s->last_error;
    case SYNCBLK_REG_CNT_CMDS:
        return s->cnt_cmds;
    case SYNCBLK_REG_CNT_ERRORS:
        return s->cnt_errors;
    case SYNCBLK_REG_CNT_INJECTED:
        return s->cnt_injected;
    case SYNCBLK_REG_CNT_TIMEOUTS:
        return s->cnt_timeouts;
    case SYNCBLK_REG_CNT_DONE_TASK:
        return s->cnt_done[SYNCBLK_CTX_TASK];
    case SYNCBLK_REG_CNT_DONE_IRQ:
        return s->cnt_done[SYNCBLK_CTX_IRQ];
    case SYNCBLK_REG_CNT_DONE_THREAD:
        return s->cnt_done[SYNCBLK_CTX_THREAD];
    case SYNCBLK_REG_CNT_BAD_CMDS:
        return s->cnt_bad_cmds;
    case SYNCBLK_REG_CNT_READS:
        return s->cnt_reads;
    case SYNCBLK_REG_CNT_WRITES:
        return s->cnt_writes;
    default:
        return 0;
    }
}

static void syncblk_mmio_write(void *opaque, hwaddr addr, uint64_t val,
                               unsigned size)
{
    SyncBlkState *s = opaque;

    if (addr >= SYNCBLK_REG_SLOT_BASE) {
        hwaddr off = addr - SYNCBLK_REG_SLOT_BASE;
        hwaddr i = off / SYNCBLK_REG_SLOT_STRIDE;

        if (i < SYNCBLK_NUM_SLOTS) {
            syncblk_slot_write(s, &s->slots[i],
                               off % SYNCBLK_REG_SLOT_STRIDE, val);
        }
        return;
    }
    switch (addr) {
    case SYNCBLK_REG_FAULT_STATE:
        if (s->fi) {
            fault_injector_set_state(s->fi, val);
        }
        break;
    case SYNCBLK_REG_LAST_ERROR:
        s->last_error = 0;
        break;
    default:
        qemu_log_mask(LOG_GUEST_ERROR,
                      "syncblk: write to read-only register 0x%x\n",
                      (unsigned)addr);
        break;
    }
}

static const MemoryRegionOps syncblk_mmio_ops = {
    .read = syncblk_mmio_read,
    .write = syncblk_mmio_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 4,
    },
};

static void syncblk_reset(DeviceState *dev)
{
    SyncBlkState *s = SYNCBLK_PCI(dev);

    trace_syncblk_reset();
    for (unsigned i = 0; i < SYNCBLK_NUM_SLOTS; i++) {
        SyncBlkSlot *slot = &s->slots[i];

        syncblk_slot_cancel(slot, SYNCBLK_ST_IDLE, 0);
        memset(&slot->desc, 0, sizeof(slot->desc));
        memset(&slot->cmd, 0, sizeof(slot->cmd));
        slot->ctx = s->mode;
    }
    s->last_error = 0;
    s->cnt_cmds = s->cnt_errors = s->cnt_injected = s->cnt_timeouts = 0;
    memset(s->cnt_done, 0, sizeof(s->cnt_done));
    s->cnt_bad_cmds = s->cnt_reads = s->cnt_writes = 0;
}

/*
 * One queue of slots: there is no submission queue id.  Controller
 * failure (fatal, reset-fail=) is an NVMe notion.
 */
static const FaultInjectorUser syncblk_fault_user = {
    .name = "syncblk-pci",
    .keys = FE_KEY_SQ,
    .actions = FE_ACTION_FATAL | FE_ACTION_RESET_FAIL,
    .deterministic = true,
};

static void syncblk_realize(PCIDevice *pci, Error **errp)
{
    SyncBlkState *s = SYNCBLK_PCI(pci);
    int64_t len;

    if (!s->blk || !blk_bs(s->blk)) {
        error_setg(errp, "syncblk-pci: drive property not set");
        return;
    }
    if (s->timeout_ms == 0 || s->timeout_ms > 60000) {
        error_setg(errp, "syncblk-pci: timeout-ms must be 1..60000");
        return;
    }
    if (s->fi && !fault_injector_attach(s->fi, &syncblk_fault_user, errp)) {
        return;
    }
    s->mode = s->completion;
    s->deterministic = s->fi && fault_injector_deterministic(s->fi);
    if (blk_set_perm(s->blk, BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE,
                     BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE_UNCHANGED,
                     errp) < 0) {
        goto fail;
    }
    len = blk_getlength(s->blk);
    if (len < 0) {
        error_setg_errno(errp, -len, "syncblk-pci: cannot get drive size");
        goto fail;
    }
    s->capacity = len / SYNCBLK_SECTOR_SIZE;

    for (unsigned i = 0; i < SYNCBLK_NUM_SLOTS; i++) {
        s->slots[i].s = s;
        s->slots[i].index = i;
        timer_init_ns(&s->slots[i].timer, QEMU_CLOCK_VIRTUAL,
                      syncblk_timer_cb, &s->slots[i]);
    }

    memory_region_init_io(&s->mmio, OBJECT(s), &syncblk_mmio_ops, s,
                          "syncblk-mmio", SYNCBLK_BAR_SIZE);
    pci_register_bar(pci, 0, PCI_BASE_ADDRESS_SPACE_MEMORY, &s->mmio);
    if (msix_init_exclusive_bar(pci, 1, 1, errp)) {
        goto fail;
    }
    msix_vector_use(pci, 0);
    return;

fail:
    if (s->fi) {
        fault_injector_detach(s->fi, &syncblk_fault_user);
    }
}

static void syncblk_exit(PCIDevice *pci)
{
    SyncBlkState *s = SYNCBLK_PCI(pci);

    for (unsigned i = 0; i < SYNCBLK_NUM_SLOTS; i++) {
        syncblk_slot_cancel(&s->slots[i], SYNCBLK_ST_IDLE, 0);
    }
    msix_uninit_exclusive_bar(pci);
    if (s->fi) {
        fault_injector_detach(s->fi, &syncblk_fault_user);
    }
}

static const PropertyInfo syncblk_prop_completion = {
    .type = "SyncblkCompletion",
    .description = "where the guest sees a command complete: "
                   "task/irq/thread",
    .enum_table = &SyncblkCompletion_lookup,
    .get = qdev_propinfo_get_enum,
    .set = qdev_propinfo_set_enum,
    .set_default_value = qdev_propinfo_set_default_value_enum,
};

static const Property syncblk_properties[] = {
    DEFINE_PROP_DRIVE("drive", SyncBlkState, blk),
    DEFINE_PROP_LINK("fault-injector", SyncBlkState, fi,
                     TYPE_FAULT_INJECTOR, FaultInjector *),
    DEFINE_PROP_SIGNED("completion", SyncBlkState, completion,
                       SYNCBLK_COMPLETION_TASK, syncblk_prop_completion, int),
    DEFINE_PROP_UINT32("timeout-ms", SyncBlkState, timeout_ms, 1000),
};

static const VMStateDescription syncblk_vmstate = {
    .name = "syncblk-pci",
    .unmigratable = 1,      /* in-flight AIO and held results are not saved */
};

static void syncblk_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    k->realize = syncblk_realize;
    k->exit = syncblk_exit;
    k->vendor_id = SYNCBLK_VENDOR_ID;
    k->device_id = SYNCBLK_DEVICE_ID;
    k->revision = 1;
    k->class_id = PCI_CLASS_STORAGE_OTHER;
    dc->desc = "faultline synchronous block device";
    dc->vmsd = &syncblk_vmstate;
    device_class_set_props(dc, syncblk_properties);
    device_class_set_legacy_reset(dc, syncblk_reset);
    set_bit(DEVICE_CATEGORY_STORAGE, dc->categories);
}

static const TypeInfo syncblk_info = {
    .name = TYPE_SYNCBLK_PCI,
    .parent = TYPE_PCI_DEVICE,
    .instance_size = sizeof(SyncBlkState),
    .class_init = syncblk_class_init,
    .interfaces = (InterfaceInfo[]) {
        { INTERFACE_CONVENTIONAL_PCI_DEVICE },
        { },
    },
};

static void syncblk_register_types(void)
{
    type_register_static(&syncblk_info);
}

type_init(syncblk_register_types)
